#include "storage/ssd/page_file.h"

#include <xxhash.h>

#include <cstring>

namespace strata::storage {

Result<std::unique_ptr<PageFile>> PageFile::Open(io::Env* env, const std::string& path,
                                                 uint32_t page_bytes, bool create, bool direct,
                                                 io::IoThreads* threads) {
  io::FileOptions options;
  options.create = create;
  options.truncate = create;
  if (direct) {
    options.direct = true;
    auto file = env->OpenFile(path, options);
    if (file.ok()) {
      return std::unique_ptr<PageFile>(
          new PageFile(std::move(file).value(), page_bytes, true, threads));
    }
  }
  options.direct = false;
  STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, options));
  return std::unique_ptr<PageFile>(new PageFile(std::move(file), page_bytes, false, threads));
}

std::vector<io::IoRequest> PageFile::Requests(bool write, std::span<const uint32_t> pages,
                                              std::byte* buf) const {
  constexpr size_t kRunBytesMax = 8u << 20;
  std::vector<io::IoRequest> reqs;
  size_t i = 0;
  while (i < pages.size()) {
    size_t run = 1;
    while (i + run < pages.size() && pages[i + run] == pages[i] + run &&
           (run + 1) * page_bytes_ <= kRunBytesMax) {
      ++run;
    }
    io::IoRequest r;
    r.op = write ? io::IoRequest::Op::kWrite : io::IoRequest::Op::kRead;
    r.file = file_.get();
    r.offset = Offset(pages[i]);
    r.buf = buf + i * page_bytes_;
    r.len = static_cast<uint32_t>(run * page_bytes_);
    reqs.push_back(std::move(r));
    i += run;
  }
  return reqs;
}

Status PageFile::CheckDone(bool write, std::span<const io::IoRequest> reqs) const {
  for (const io::IoRequest& r : reqs) {
    if (r.bytes_done != r.len) {
      return Status::Corruption(path() + " offset " + std::to_string(r.offset + r.bytes_done) +
                                ": short " + (write ? "write" : "read") +
                                " of a page (file ends early)");
    }
  }
  return Status::Ok();
}

Status PageFile::Transfer(bool write, std::span<const uint32_t> pages, std::byte* buf) {
  std::vector<io::IoRequest> reqs = Requests(write, pages, buf);
  if (threads_ != nullptr) {
    STRATA_RETURN_IF_ERROR(threads_->SubmitAndWait(reqs));
  } else {
    for (io::IoRequest& r : reqs) {
      if (write) {
        STRATA_RETURN_IF_ERROR(file_->Write(r.offset, r.buf, r.len));
        r.bytes_done = r.len;
      } else {
        size_t got = 0;
        STRATA_RETURN_IF_ERROR(file_->Read(r.offset, r.len, r.buf, &got));
        r.bytes_done = static_cast<uint32_t>(got);
      }
    }
  }
  return CheckDone(write, reqs);
}

void PageFile::StartWritePages(std::span<const uint32_t> pages, const std::byte* buf,
                               PendingWrite* w) {
  w->file_ = this;
  if (pages.empty()) {
    w->status_ = Status::Ok();
    return;
  }
  if (threads_ == nullptr) {
    w->status_ = WritePages(pages, buf);
    return;
  }
  w->reqs_ = Requests(true, pages, const_cast<std::byte*>(buf));  // a write only reads buf
  w->done_ = threads_->SubmitAsync(w->reqs_);
  w->in_flight_ = true;
}

Status PageFile::PendingWrite::Finish() {
  if (in_flight_) {
    in_flight_ = false;
    status_ = done_.get();
    if (status_.ok()) status_ = file_->CheckDone(true, reqs_);
  }
  return status_;
}

Status PageFile::ReadPages(std::span<const uint32_t> pages, std::byte* buf) {
  return Transfer(false, pages, buf);
}

Status PageFile::WritePages(std::span<const uint32_t> pages, const std::byte* buf) {
  return Transfer(true, pages, const_cast<std::byte*>(buf));  // a write only reads buf
}

Status PageFile::TruncatePages(uint64_t page_count) {
  return file_->Truncate(page_count * page_bytes_);
}

Result<uint64_t> PageFile::PageCount() const {
  STRATA_ASSIGN_OR_RETURN(uint64_t bytes, file_->Size());
  return bytes / page_bytes_;
}

namespace {

Status CorruptionAt(const std::string& path, uint64_t offset, const std::string& what) {
  return Status::Corruption(path + " offset " + std::to_string(offset) + ": " + what);
}

}  // namespace

void SealPage(std::byte* page, uint32_t page_bytes, TableId table, uint16_t row_count,
              uint64_t low_mixed) {
  ssd::PageHeader h{};
  h.magic = ssd::kPageMagic;
  h.version = ssd::kFormatVersion;
  h.row_count = row_count;
  h.table_id = table;
  h.reserved = 0;
  h.low_mixed = low_mixed;
  std::memcpy(page, &h, sizeof(h));
  h.checksum = XXH3_64bits(page + 8, page_bytes - 8);
  std::memcpy(page, &h.checksum, 8);
}

Status VerifyPage(const std::byte* page, uint32_t page_bytes, uint32_t capacity, TableId table,
                  uint64_t low_mixed, const std::string& path, uint64_t offset) {
  ssd::PageHeader h;
  std::memcpy(&h, page, sizeof(h));
  auto fail = [&](const std::string& what) {
    return CorruptionAt(path, offset, what + " (table " + std::to_string(table) + ")");
  };
  if (XXH3_64bits(page + 8, page_bytes - 8) != h.checksum) {
    return fail("page checksum mismatch");
  }
  if (h.magic != ssd::kPageMagic) return fail("bad page magic");
  if (h.version != ssd::kFormatVersion) {
    return fail("page format version " + std::to_string(h.version) + " unsupported");
  }
  if (h.table_id != table || h.low_mixed != low_mixed) {
    return fail("page belongs to another table or range (misdirected write)");
  }
  if (h.row_count > capacity) return fail("row count above page capacity");
  return Status::Ok();
}

uint64_t LogSeed(TableId table, uint64_t epoch, uint64_t record) {
  return MixSplit64(MixSplit64((uint64_t{table} << 40) ^ epoch) ^ record);
}

void SealLogRecord(std::byte* dst, TableId table, uint64_t seed, Key key, const std::byte* row,
                   uint32_t row_bytes) {
  ssd::LogRecordHeader h{};
  h.key = key;
  h.kind = ssd::kLogRecordRow;
  h.table_id = table;
  std::memcpy(dst, &h, sizeof(h));
  std::memcpy(dst + ssd::kLogRecordHeaderBytes, row, row_bytes);
  h.checksum = XXH3_64bits_withSeed(dst + 8, ssd::kLogRecordHeaderBytes - 8 + row_bytes, seed);
  std::memcpy(dst, &h.checksum, 8);
}

Status VerifyLogRecord(const std::byte* src, TableId table, uint64_t seed, Key key,
                       uint32_t row_bytes, const std::string& path, uint64_t offset) {
  ssd::LogRecordHeader h;
  std::memcpy(&h, src, sizeof(h));
  auto fail = [&](const std::string& what) {
    return CorruptionAt(
        path, offset,
        what + " (table " + std::to_string(table) + ", key " + std::to_string(key) + ")");
  };
  if (XXH3_64bits_withSeed(src + 8, ssd::kLogRecordHeaderBytes - 8 + row_bytes, seed) !=
      h.checksum) {
    return fail("log record checksum mismatch");
  }
  if (h.kind != ssd::kLogRecordRow || h.table_id != table || h.key != key) {
    return fail("log record of another table or key (misdirected write)");
  }
  return Status::Ok();
}

}  // namespace strata::storage
