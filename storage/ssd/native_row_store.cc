// Native store: open and recovery, reads, scan and stats. Writes are in
// native_write.cc, checkpoints and garbage collection in native_checkpoint.cc.
#include "storage/ssd/native_row_store.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/assert.h"
#include "base/thread_name.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/manifest.h"
#include "storage/ssd/native_common.h"
#include "storage/ssd/native_table.h"

namespace strata::storage {
namespace native {

io::AlignedBuffer* ThreadScratch(ScratchSlot slot) {
  thread_local io::AlignedBuffer buffers[3];
  return &buffers[slot];
}

Status EnsureBytes(io::AlignedBuffer* buf, size_t bytes) {
  if (buf->size() >= bytes) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(*buf, io::AlignedBuffer::Allocate(bytes));
  return Status::Ok();
}

uint64_t Table::KeyAt(const std::byte* page, uint32_t slot) const {
  uint64_t key;
  std::memcpy(&key, page + ssd::kPageHeaderBytes + uint64_t{slot} * 8, 8);
  return key;
}

uint16_t Table::CountOf(const std::byte* page) const {
  ssd::PageHeader h;
  std::memcpy(&h, page, sizeof(h));
  return h.row_count;
}

Result<std::vector<uint32_t>> Table::Allocate(size_t n) {
  std::vector<uint32_t> pages;
  pages.reserve(n);
  uint64_t p = free_hint;
  while (pages.size() < n) {
    if (p >= ssd::kNoPage || p >= kPagesPerFileMax) {
      Unallocate(pages);
      return Status::ResourceExhausted(file->path() + ": more than kPagesPerFileMax pages");
    }
    if (p == page_state.size()) page_state.push_back(kFree);
    if (page_state[p] == kFree) {
      page_state[p] = kCurrent;
      pages.push_back(static_cast<uint32_t>(p));
    }
    ++p;
  }
  free_hint = static_cast<uint32_t>(p);
  return pages;
}

void Table::Unallocate(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) {
    page_state[p] = kFree;
    free_hint = std::min(free_hint, p);
  }
}

void Table::Release(uint32_t page) {
  if (page_state[page] == kBoth) {
    page_state[page] = kCheckpointOnly;
  } else {
    STRATA_ASSERT(page_state[page] == kCurrent, "released page not referenced");
    page_state[page] = kFree;
    free_hint = std::min(free_hint, page);
  }
}

Result<Table*> Store::Find(TableId table) const {
  STRATA_RETURN_IF_ERROR(Failed());
  for (const auto& t : tables_) {
    if (t->spec.id == table) return t.get();
  }
  return Status::InvalidArgument(options_.dir + ": unknown table id " + std::to_string(table));
}

Status Store::Open(const std::vector<TableSpec>& tables) {
  if (!(options_.write_log_fraction >= 0 &&
        options_.write_log_fraction <= kSsdWriteLogFractionMax) ||
      options_.write_log_entries_min == 0 ||
      options_.write_log_entries_min > LogIndex::kRecordsMax) {
    return Status::InvalidArgument(options_.dir + ": write_log_fraction must be in [0, " +
                                   std::to_string(kSsdWriteLogFractionMax) +
                                   "] and write_log_entries_min in [1, " +
                                   std::to_string(LogIndex::kRecordsMax) + "]");
  }
  STRATA_RETURN_IF_ERROR(env_->CreateDirs(options_.dir));
  io_threads_ = StartStoreIoThreads(options_, env_);  // null: File::Read/Write
  STRATA_ASSIGN_OR_RETURN(std::optional<Manifest> manifest, ReadManifest(env_, options_.dir));
  if (manifest) return OpenExisting(*manifest, tables);
  STRATA_RETURN_IF_ERROR(RefuseOrphanedData(
      env_, options_.dir, [](std::string_view n) { return ssd::IsDataFileName(n); }));
  specs_ = tables;
  for (const TableSpec& spec : tables) {
    auto t = std::make_unique<Table>();
    base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
    t->spec = spec;
    t->page_bytes = ssd::PageBytes(spec.row_bytes);
    t->capacity = ssd::PageCapacity(spec.row_bytes);
    t->file_number = 1;
    STRATA_ASSIGN_OR_RETURN(
        t->file,
        PageFile::Open(env_, options_.dir + "/" + ssd::DataFileName(spec.id, 1), t->page_bytes,
                       /*create=*/true, options_.direct_io, io_threads_.get()));
    STRATA_RETURN_IF_ERROR(OpenLogs(*t));
    tables_.push_back(std::move(t));
  }
  STRATA_RETURN_IF_ERROR(Checkpoint({}));
  StartMergeThread();
  return Status::Ok();
}

void Store::StartMergeThread() {
  if (options_.write_log_fraction > 0) {
    merge_thread_ = std::thread([this] { MergeThread(); });
    base::NameThread(merge_thread_.native_handle(), "strata-v1-merge");
  }
}

Store::~Store() {
  {
    base::MutexLock lock(&merge_queue_mu_);
    stopping_ = true;
    merge_queue_cv_.SignalAll();
  }
  if (merge_thread_.joinable()) merge_thread_.join();
}

Status Store::OpenExisting(const Manifest& manifest, const std::vector<TableSpec>& tables) {
  const std::string mpath = options_.dir + "/" + ssd::kManifestName;
  std::vector<TableSpec> stored;
  for (const ManifestTable& mt : manifest.tables) stored.push_back(mt.spec);
  STRATA_RETURN_IF_ERROR(CompareTableSpecs(stored, tables, options_.dir));
  // Validate everything before changing any file.
  std::set<std::string> referenced{ssd::kManifestName};
  for (const ManifestTable& mt : manifest.tables) {
    auto t = std::make_unique<Table>();
    base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
    t->spec = mt.spec;
    t->page_bytes = mt.page_bytes;
    t->capacity = ssd::PageCapacity(mt.spec.row_bytes);
    t->file_number = mt.file_number;
    t->row_count = mt.row_count;
    const std::string name = ssd::DataFileName(mt.spec.id, mt.file_number);
    referenced.insert(name);
    const std::string path = options_.dir + "/" + name;
    const bool exists = env_->FileExists(path);
    // DecodeManifest checked the leaves; their pages must also lie inside the
    // data file, so the page states are bounded by its real size, never by a
    // page number alone.
    uint64_t file_pages = 0;
    if (exists) {
      STRATA_ASSIGN_OR_RETURN(t->file, PageFile::Open(env_, path, t->page_bytes, false,
                                                      options_.direct_io, io_threads_.get()));
      STRATA_ASSIGN_OR_RETURN(file_pages, t->file->PageCount());
    } else if (std::any_of(mt.leaves.begin(), mt.leaves.end(),
                           [](const ssd::LeafRecord& l) { return l.page != ssd::kNoPage; })) {
      return Status::Corruption(mpath + ": data file " + path + " is missing");
    }
    STRATA_RETURN_IF_ERROR(CheckManifestPages(mt, file_pages, mpath));
    for (const ssd::LeafRecord& leaf : mt.leaves) {
      if (leaf.page == ssd::kNoPage) continue;
      if (leaf.page >= t->page_state.size()) t->page_state.resize(uint64_t{leaf.page} + 1, kFree);
      STRATA_ASSERT(t->page_state[leaf.page] == kFree, "DecodeManifest passed a page twice");
      t->page_state[leaf.page] = kBoth;
    }
    t->dir = PageDirectory(mt.leaves);
    if (!exists) {
      STRATA_ASSIGN_OR_RETURN(t->file, PageFile::Open(env_, path, t->page_bytes, /*create=*/true,
                                                      options_.direct_io, io_threads_.get()));
    }
    t->free_hint = 0;
    while (t->free_hint < t->page_state.size() && t->page_state[t->free_hint] != kFree) {
      ++t->free_hint;
    }
    tables_.push_back(std::move(t));
  }
  specs_ = stored;
  {  // nothing else runs yet; taken so the analysis sees them held
    base::MutexLock checkpoint_lock(&checkpoint_mu_);
    generation_ = manifest.generation;
  }
  {
    base::MutexLock meta_lock(&meta_mu_);
    meta_ = manifest.meta;
  }
  // The MANIFEST read may be one whose rename was never made durable (a
  // checkpoint whose directory fsync failed, then the process died): make it
  // durable before freeing, truncating or deleting anything only the
  // previous MANIFEST referenced.
  if (Status s = env_->SyncDir(options_.dir); !s.ok()) {
    return s.WithContext("making " + mpath + " durable before recovery");
  }
  // Drop what was written after the checkpoint: pages past the referenced
  // ones, and files of unfinished checkpoints or garbage collections.
  for (auto& t : tables_) {
    base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
    STRATA_RETURN_IF_ERROR(t->file->TruncatePages(t->page_state.size()));
    STRATA_RETURN_IF_ERROR(OpenLogs(*t));  // whatever a log held is after the checkpoint
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(options_.dir));
  for (const std::string& name : names) {
    const bool ours = name == ssd::kManifestTmpName || ssd::IsDataFileName(name);
    if (ours && referenced.count(name) == 0) {
      STRATA_RETURN_IF_ERROR(env_->DeleteFile(options_.dir + "/" + name));
    }
  }
  StartMergeThread();
  return Status::Ok();
}

Status Store::ReadVerified(Table& t, std::span<const uint32_t> pages,
                           std::span<const uint64_t> lows, io::AlignedBuffer* buf) {
  return ReadVerifiedFrom(t, t.file.get(), pages, lows, buf);
}

Status Store::ReadVerifiedFrom(Table& t, PageFile* file, std::span<const uint32_t> pages,
                               std::span<const uint64_t> lows, io::AlignedBuffer* buf) {
  const size_t bytes = pages.size() * t.page_bytes;
  STRATA_RETURN_IF_ERROR(EnsureBytes(buf, bytes));
  auto* data = reinterpret_cast<std::byte*>(buf->data());
  STRATA_RETURN_IF_ERROR(file->ReadPages(pages, data));
  bytes_read_ += bytes;
  for (size_t i = 0; i < pages.size(); ++i) {
    STRATA_RETURN_IF_ERROR(VerifyPage(data + i * t.page_bytes, t.page_bytes, t.capacity, t.spec.id,
                                      lows[i], file->path(), file->Offset(pages[i])));
  }
  return Status::Ok();
}

Status Store::MultiGet(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                       std::span<uint8_t> found) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  const uint32_t rb = t->spec.row_bytes;
  if (rows.size() != keys.size() * rb || found.size() != keys.size()) {
    return Status::InvalidArgument("MultiGet table " + t->spec.name +
                                   ": rows/found spans do not match keys");
  }
  struct Want {
    uint32_t page;
    uint32_t index;
    uint64_t low;
  };
  std::vector<Want> wants;
  wants.reserve(keys.size());
  std::vector<LogWant> log_wants[2];  // per log
  base::ReaderLock lock(&t->mu);
  for (size_t i = 0; i < keys.size(); ++i) {
    found[i] = 0;
    uint32_t value = 0;
    // The log index names the key's newest entry (active or frozen log),
    // newer than its leaf.
    if (t->log_index.Find(keys[i], &value)) {
      if (RecordOf(value) != LogIndex::kTombstone) {
        log_wants[LogOf(value)].push_back({RecordOf(value), static_cast<uint32_t>(i)});
      }
      continue;
    }
    const ssd::LeafRecord& leaf = t->dir.at(t->dir.Find(ssd::MixKey(keys[i])));
    if (leaf.page != ssd::kNoPage) {
      wants.push_back({leaf.page, static_cast<uint32_t>(i), leaf.low_mixed});
    }
  }
  std::sort(wants.begin(), wants.end(),
            [](const Want& a, const Want& b) { return a.page < b.page; });
  io::AlignedBuffer& buf = *ThreadScratch(kGetScratch);
  std::vector<uint32_t> pages;
  std::vector<uint64_t> lows;
  size_t pos = 0;
  while (pos < wants.size()) {
    pages.clear();
    lows.clear();
    size_t end = pos;
    while (end < wants.size() &&
           (pages.size() < kLeavesPerRoundMax || wants[end].page == pages.back())) {
      if (pages.empty() || pages.back() != wants[end].page) {
        pages.push_back(wants[end].page);
        lows.push_back(wants[end].low);
      }
      ++end;
    }
    STRATA_RETURN_IF_ERROR(ReadVerified(*t, pages, lows, &buf));
    size_t p = 0;
    for (size_t w = pos; w < end; ++w) {
      while (pages[p] != wants[w].page) ++p;
      const std::byte* page = reinterpret_cast<std::byte*>(buf.data()) + p * t->page_bytes;
      const uint16_t count = t->CountOf(page);
      const Key key = keys[wants[w].index];
      for (uint32_t s = 0; s < count; ++s) {
        if (t->KeyAt(page, s) == key) {
          std::memcpy(rows.data() + uint64_t{wants[w].index} * rb, t->RowAt(page, s), rb);
          found[wants[w].index] = 1;
          break;
        }
      }
    }
    pos = end;
  }
  for (int which = 0; which < 2; ++which) {
    if (log_wants[which].empty()) continue;
    STRATA_RETURN_IF_ERROR(
        ReadFromLog(*t, t->logs[which], keys, log_wants[which], rows.data(), found.data()));
  }
  rows_read_ += keys.size();
  return Status::Ok();
}

Status Store::Scan(TableId table,
                   const std::function<Status(Key, std::span<const std::byte>)>& fn) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  if (options_.write_log_fraction > 0) {  // the leaves then hold every row put before
    MergeLock merge(t);                   // (a put racing the scan may be missed)
    STRATA_RETURN_IF_ERROR(DrainLogs(*t));
  }
  base::ReaderLock lock(&t->mu);
  io::AlignedBuffer buf;
  std::vector<uint32_t> pages;
  std::vector<uint64_t> lows;
  PageDirectory::Handle h = t->dir.Begin();
  while (t->dir.Valid(h)) {
    pages.clear();
    lows.clear();
    for (; t->dir.Valid(h) && pages.size() < kLeavesPerRoundMax; h = t->dir.Next(h)) {
      if (t->dir.at(h).page == ssd::kNoPage) continue;
      pages.push_back(t->dir.at(h).page);
      lows.push_back(t->dir.at(h).low_mixed);
    }
    if (pages.empty()) break;
    STRATA_RETURN_IF_ERROR(ReadVerified(*t, pages, lows, &buf));
    for (size_t p = 0; p < pages.size(); ++p) {
      const std::byte* page = reinterpret_cast<std::byte*>(buf.data()) + p * t->page_bytes;
      for (uint32_t s = 0; s < t->CountOf(page); ++s) {
        STRATA_RETURN_IF_ERROR(fn(t->KeyAt(page, s), {t->RowAt(page, s), t->spec.row_bytes}));
      }
    }
  }
  return Status::Ok();
}

Status Store::Sync() {
  STRATA_RETURN_IF_ERROR(Failed());
  for (auto& t : tables_) {
    base::ReaderLock lock(&t->mu);
    std::vector<PageFile*> files{t->file.get(), t->Active().file.get()};
    if (t->Other().state == LogState::kFrozen) files.push_back(t->Other().file.get());
    for (PageFile* file : files) {
      if (Status s = file->Sync(); !s.ok()) {
        Fail(s);
        return Failed();
      }
    }
  }
  return Status::Ok();
}

RowStoreStats Store::Stats() const {
  RowStoreStats s;
  s.rows_read = rows_read_.load();
  s.rows_written = rows_written_.load();
  s.bytes_read = bytes_read_.load();
  s.bytes_written = bytes_written_.load();
  s.user_bytes_written = user_bytes_written_.load();
  s.cleanup_errors = cleanup_errors_.load();
  for (const auto& t : tables_) {
    base::ReaderLock lock(&t->mu);
    // Exact once the log is merged (after a checkpoint); before, rows in the
    // log count as new (an upper bound: some replace rows of the leaves).
    uint64_t rows = t->row_count;
    s.file_bytes += t->page_state.size() * uint64_t{t->page_bytes};
    s.index_bytes += t->dir.MemoryBytes() + t->page_state.capacity();
    for (const WriteLog& log : t->logs) {
      rows += log.rows;
      s.file_bytes += log.units * uint64_t{t->log_layout.unit_bytes};
    }
    s.index_bytes += t->log_index.MemoryBytes();
    s.live_rows += rows;
    s.live_bytes += rows * t->spec.row_bytes;
  }
  return s;
}

}  // namespace native

Result<std::unique_ptr<RowStore>> OpenNativeRowStore(const RowStoreOptions& options,
                                                     const std::vector<TableSpec>& tables) {
  io::Env* env = options.env != nullptr ? options.env : io::Env::Default();
  auto store = std::make_unique<native::Store>(options, env);
  STRATA_RETURN_IF_ERROR(store->Open(tables));
  return std::unique_ptr<RowStore>(std::move(store));
}

}  // namespace strata::storage
