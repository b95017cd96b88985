// Native store checkpoints and garbage collection.
//
// Checkpoint: garbage-collect tables that need it, fsync every data file,
// switch the MANIFEST (manifest.h), then recycle the pages only the old
// checkpoint referenced, delete files it alone referenced, and truncate each
// data file after its last used page. Until the switch nothing the old
// MANIFEST references has been touched, so a crash or error anywhere before it
// leaves the old checkpoint whole, and after it the new one.
//
// Garbage collection rewrites a table's rows, in mixed-key order and packed
// to kGcFillTarget, into a new data file with large sequential writes; the
// old file is deleted once a MANIFEST naming the new one is durable.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/log.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/native_table.h"

namespace strata::storage::native {

bool Store::GcDue(const Table& t) const {
  if (t.row_count == 0) return false;
  uint64_t last_used = 0;  // pages the file keeps after this checkpoint
  for (uint64_t p = t.page_state.size(); p > 0; --p) {
    if (t.page_state[p - 1] == kBoth || t.page_state[p - 1] == kCurrent) {
      last_used = p;
      break;
    }
  }
  const double file_bytes = double(last_used) * t.page_bytes;
  const double live_bytes = double(t.row_count) * t.spec.row_bytes;
  const uint64_t per_page = std::max<uint64_t>(1, uint64_t(t.capacity * ssd::kGcFillTarget));
  const uint64_t packed_pages = (t.row_count + per_page - 1) / per_page;
  return file_bytes > options_.gc_space_amp_trigger * live_bytes &&
         double(last_used) > 1.1 * double(packed_pages) + 1;
}

Status Store::CollectGarbage(Table& t) {
  const uint64_t number = t.file_number + 1;
  const std::string path = options_.dir + "/" + ssd::DataFileName(t.spec.id, number);
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<PageFile> file,
      PageFile::Open(env_, path, t.page_bytes, true, options_.direct_io, io_threads_.get()));
  const uint32_t per_page = std::max<uint32_t>(1, uint32_t(t.capacity * ssd::kGcFillTarget));
  const uint32_t rb = t.spec.row_bytes;
  std::vector<ssd::LeafRecord> leaves;
  STRATA_ASSIGN_OR_RETURN(io::AlignedBuffer out,
                          io::AlignedBuffer::Allocate(size_t{kLeavesPerRoundMax} * t.page_bytes));
  auto* out_data = reinterpret_cast<std::byte*>(out.data());
  std::vector<uint32_t> out_pages;
  uint32_t fill = 0;  // rows in the page being filled (out_pages.size() - 1)
  uint64_t written = 0;
  auto seal_current = [&]() {
    std::byte* page = out_data + (out_pages.size() - 1) * t.page_bytes;
    SealPage(page, t.page_bytes, t.spec.id, uint16_t(fill), leaves.back().low_mixed);
    leaves.back().row_count = fill;
  };
  auto flush = [&]() -> Status {
    STRATA_RETURN_IF_ERROR(file->WritePages(out_pages, out_data));
    written += out_pages.size() * uint64_t{t.page_bytes};
    out_pages.clear();
    return Status::Ok();
  };
  auto add_row = [&](uint64_t mixed, Key key, const std::byte* row) -> Status {
    if (out_pages.empty() || fill == per_page) {
      if (!out_pages.empty()) seal_current();
      if (out_pages.size() == kLeavesPerRoundMax) STRATA_RETURN_IF_ERROR(flush());
      const uint32_t page = static_cast<uint32_t>(leaves.size());
      leaves.push_back({leaves.empty() ? 0 : mixed, page, 0});
      out_pages.push_back(page);
      std::memset(out_data + (out_pages.size() - 1) * t.page_bytes, 0, t.page_bytes);
      fill = 0;
    }
    std::byte* page = out_data + (out_pages.size() - 1) * t.page_bytes;
    std::memcpy(page + ssd::kPageHeaderBytes + uint64_t{fill} * 8, &key, 8);
    std::memcpy(page + ssd::kPageHeaderBytes + uint64_t{t.capacity} * 8 + uint64_t{fill} * rb, row,
                rb);
    ++fill;
    return Status::Ok();
  };
  auto rewrite = [&]() REQUIRES(t.mu) -> Status {
    io::AlignedBuffer in;
    std::vector<uint32_t> pages;
    std::vector<uint64_t> lows;
    PageDirectory::Handle h = t.dir.Begin();
    while (t.dir.Valid(h)) {
      pages.clear();
      lows.clear();
      for (; t.dir.Valid(h) && pages.size() < kLeavesPerRoundMax; h = t.dir.Next(h)) {
        if (t.dir.at(h).page == ssd::kNoPage) continue;
        pages.push_back(t.dir.at(h).page);
        lows.push_back(t.dir.at(h).low_mixed);
      }
      if (pages.empty()) break;
      STRATA_RETURN_IF_ERROR(ReadVerified(t, pages, lows, &in));
      for (size_t p = 0; p < pages.size(); ++p) {
        const std::byte* page = reinterpret_cast<std::byte*>(in.data()) + p * t.page_bytes;
        for (uint32_t s = 0; s < t.CountOf(page); ++s) {
          const Key key = t.KeyAt(page, s);
          STRATA_RETURN_IF_ERROR(add_row(ssd::MixKey(key), key, t.RowAt(page, s)));
        }
      }
    }
    if (!out_pages.empty()) {
      seal_current();
      STRATA_RETURN_IF_ERROR(flush());
    }
    return file->Sync();
  };
  if (Status s = rewrite(); !s.ok()) {
    file.reset();
    (void)env_->DeleteFile(path);  // best effort: Open deletes unreferenced files too
    return s.WithContext("garbage collection of table " + t.spec.name);
  }
  if (leaves.empty()) leaves.push_back({0, ssd::kNoPage, 0});
  t.obsolete_paths.push_back(t.file->path());
  t.file = std::move(file);
  t.file_number = number;
  t.dir = PageDirectory(leaves);
  const size_t used = leaves[0].page == ssd::kNoPage ? 0 : leaves.size();
  t.page_state.assign(used, kCurrent);
  t.page_state.shrink_to_fit();
  t.free_hint = static_cast<uint32_t>(used);
  bytes_written_ += written;
  return Status::Ok();
}

void Store::AfterManifestSwitch(Table& t) {
  uint64_t keep = 0;
  for (uint64_t p = 0; p < t.page_state.size(); ++p) {
    uint8_t& s = t.page_state[p];
    if (s == kCheckpointOnly) s = kFree;
    if (s == kCurrent) s = kBoth;
    if (s != kFree) keep = p + 1;
  }
  t.page_state.resize(keep);
  t.free_hint = 0;
  while (t.free_hint < keep && t.page_state[t.free_hint] != kFree) ++t.free_hint;
  (void)NoteCleanup(t.file->TruncatePages(keep));
  std::vector<std::string> left;
  for (const std::string& path : t.obsolete_paths) {
    if (!NoteCleanup(env_->DeleteFile(path))) left.push_back(path);
  }
  t.obsolete_paths = std::move(left);
}

bool Store::NoteCleanup(const Status& s) {
  if (s.ok()) return true;
  if (cleanup_errors_.fetch_add(1) == 0) {
    STRATA_LOG_WARN(
        "native store %s: cleanup after a durable checkpoint or a merge failed (retried at "
        "the next one): %s",
        options_.dir.c_str(), s.ToString().c_str());
  }
  return false;
}

void Store::AfterSwitchInDoubt(Table& t) {
  // kCurrent pages are referenced by the attempted MANIFEST: from now on they
  // count as checkpointed, so releasing one makes it kCheckpointOnly (kept)
  // rather than free. kCheckpointOnly pages stay kept for the old MANIFEST.
  // Both sets become free only after a later switch succeeds.
  for (uint8_t& s : t.page_state) {
    if (s == kCurrent) s = kBoth;
  }
}

Status Store::Failed() const { return failure_.Get(); }

void Store::Fail(const Status& cause) { failure_.Set(options_.dir, cause); }

Status Store::Checkpoint(std::span<const std::byte> meta) {
  if (meta.size() > kCheckpointMetaBytesMax) {
    return Status::InvalidArgument("Checkpoint: meta larger than kCheckpointMetaBytesMax");
  }
  base::MutexLock checkpoint_lock(&checkpoint_mu_);
  STRATA_RETURN_IF_ERROR(Failed());
  // The leaf writer of every table for the whole checkpoint: no background
  // merge or garbage collection runs meanwhile. Each table's logs are merged
  // first, holding its lock only per round, so gets and puts go on; puts
  // after that land in the new active log, which the checkpoint leaves be.
  struct WakeWaitingPuts {  // after the merge locks below are released
    std::vector<std::unique_ptr<Table>>& tables;
    ~WakeWaitingPuts() {
      for (auto& t : tables) t->NotifyProgress();
    }
  } wake{tables_};
  std::vector<std::unique_lock<base::Mutex>> merge_locks;
  for (auto& t : tables_) {
    merge_locks.emplace_back(t->merge_mu);
    t->merge_mu.AssertHeld();  // through `merge_locks`, which the analysis cannot follow
    STRATA_RETURN_IF_ERROR(DrainLogs(*t));  // a checkpoint holds leaves only
  }
  std::vector<std::unique_lock<base::RwLock>> locks;
  for (auto& t : tables_) locks.emplace_back(t->mu);
  // Again under the table locks: a Sync() that held them shared may have
  // failed meanwhile, and a second fsync of its file would now succeed.
  STRATA_RETURN_IF_ERROR(Failed());
  Manifest m;
  m.generation = generation_ + 1;
  m.meta.assign(meta.begin(), meta.end());
  for (auto& t : tables_) {
    t->mu.AssertHeld();  // through `locks`
    t->merge_mu.AssertHeld();
    if (GcDue(*t)) STRATA_RETURN_IF_ERROR(CollectGarbage(*t));
    if (Status s = t->file->Sync(); !s.ok()) {
      Fail(s);
      return Failed();
    }
    m.tables.push_back({t->spec, t->page_bytes, t->file_number, t->row_count, t->dir.Leaves()});
  }
  uint64_t bytes = 0;
  bool in_doubt = false;
  if (Status s = WriteManifest(env_, options_.dir, m, &bytes, &in_doubt); !s.ok()) {
    if (!in_doubt) return s;
    // Either MANIFEST may be the durable one: keep what both reference, and
    // never reuse this generation number.
    generation_ = m.generation;
    for (auto& t : tables_) {
      t->mu.AssertHeld();  // through `locks`
      AfterSwitchInDoubt(*t);
    }
    return s.WithContext("checkpoint " + std::to_string(m.generation) + " of " + options_.dir +
                         " in doubt (pages of both MANIFESTs are kept until a checkpoint "
                         "succeeds)");
  }
  bytes_written_ += bytes;
  manifest_bytes_ = bytes;
  generation_ = m.generation;
  {
    base::MutexLock meta_lock(&meta_mu_);
    meta_ = std::move(m.meta);
  }
  for (auto& t : tables_) {
    t->mu.AssertHeld();  // through `locks`
    AfterManifestSwitch(*t);
  }
  return Status::Ok();
}

}  // namespace strata::storage::native
