// PageFile: one native data file of fixed-size pages, read and written in
// batches, and the encoding, checksum and verification of one leaf page
// (layout in ssd_format.h and docs/ssd-format.md).
//
// Every read page is verified (XXH3 checksum, magic, version, table, range)
// before any byte of it is used; a failure is a Corruption naming the file
// and offset, so a torn or misdirected write is never returned as data.
//
// Thread safety: ReadPages/WritePages may run concurrently on disjoint pages;
// Sync and Truncate beside them too (Truncate only of pages no call in
// flight uses). Ownership: owns its io::File.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/env.h"
#include "io/io_threads.h"
#include "storage/ssd/ssd_format.h"
#include "strata/status.h"

namespace strata::storage {

class PageFile {
 public:
  // Opens (or with `create`, creates empty) `path`; with `direct` tries
  // O_DIRECT first and falls back to buffered I/O where it is refused. Page
  // reads and writes go through `threads` (io_uring, batched) when given,
  // else through File::Read/Write one request at a time.
  [[nodiscard]] static Result<std::unique_ptr<PageFile>> Open(io::Env* env, const std::string& path,
                                                              uint32_t page_bytes, bool create,
                                                              bool direct, io::IoThreads* threads);

  // Reads pages[i] into buf + i * page_bytes. REQUIRES: buf 4 KiB aligned,
  // pages.size() * page_bytes long. Fails on a short read (page past the end).
  [[nodiscard]] Status ReadPages(std::span<const uint32_t> pages, std::byte* buf);
  // Writes buf + i * page_bytes at pages[i]; runs of consecutive pages are
  // coalesced into one request each.
  [[nodiscard]] Status WritePages(std::span<const uint32_t> pages, const std::byte* buf);

  // A page write under way (StartWritePages). Finish waits for it and gives
  // what WritePages would have returned; the destructor waits too, since
  // the pages' buffer is in use until then.
  class PendingWrite {
   public:
    PendingWrite() = default;
    PendingWrite(const PendingWrite&) = delete;
    PendingWrite& operator=(const PendingWrite&) = delete;
    ~PendingWrite() { (void)Finish(); }
    [[nodiscard]] Status Finish();

   private:
    friend class PageFile;
    const PageFile* file_ = nullptr;
    std::vector<io::IoRequest> reqs_;
    std::future<Status> done_;
    bool in_flight_ = false;
    Status status_;  // of the start, or of the whole write once finished
  };
  // As WritePages, but returns once the write is issued, so the caller can
  // work while the device writes (without I/O threads: once it is done).
  // REQUIRES: `w` holds no write under way; `buf` untouched until Finish.
  void StartWritePages(std::span<const uint32_t> pages, const std::byte* buf, PendingWrite* w);
  [[nodiscard]] Status Sync() { return file_->Sync(); }
  [[nodiscard]] Status TruncatePages(uint64_t page_count);
  // Whole pages in the file now (a partial last page does not count).
  [[nodiscard]] Result<uint64_t> PageCount() const;

  uint64_t Offset(uint32_t page) const { return uint64_t{page} * page_bytes_; }
  const std::string& path() const { return file_->path(); }
  uint32_t page_bytes() const { return page_bytes_; }
  bool direct() const { return direct_; }

 private:
  PageFile(std::unique_ptr<io::File> file, uint32_t page_bytes, bool direct, io::IoThreads* threads)
      : file_(std::move(file)), page_bytes_(page_bytes), direct_(direct), threads_(threads) {}
  // One request per run of consecutive pages.
  [[nodiscard]] Status Transfer(bool write, std::span<const uint32_t> pages, std::byte* buf);
  std::vector<io::IoRequest> Requests(bool write, std::span<const uint32_t> pages,
                                      std::byte* buf) const;
  // Done requests' statuses, then a short transfer as Corruption.
  [[nodiscard]] Status CheckDone(bool write, std::span<const io::IoRequest> reqs) const;

  std::unique_ptr<io::File> file_;
  const uint32_t page_bytes_;
  const bool direct_;
  io::IoThreads* const threads_;  // not owned; may be null
};

// Fills a page's header (magic, version, count, table, range) and checksum.
// REQUIRES: keys and rows already at their slots, row_count <= capacity.
void SealPage(std::byte* page, uint32_t page_bytes, TableId table, uint16_t row_count,
              uint64_t low_mixed);

// Verifies the page read from `path` at `offset`; `capacity` bounds row_count.
[[nodiscard]] Status VerifyPage(const std::byte* page, uint32_t page_bytes, uint32_t capacity,
                                TableId table, uint64_t low_mixed, const std::string& path,
                                uint64_t offset);

// Seed of the checksum of log record `record` of a table's log cycle `epoch`:
// ties a record to its place and cycle, so a record left by an earlier cycle
// or a misdirected write fails verification like a torn one.
uint64_t LogSeed(TableId table, uint64_t epoch, uint64_t record);

// Writes a log record (header and row) at `dst`; `row_bytes` bytes of `row`.
void SealLogRecord(std::byte* dst, TableId table, uint64_t seed, Key key, const std::byte* row,
                   uint32_t row_bytes);

// Verifies the log record at `src` read from `path` at `offset`: checksum,
// kind, table and key. A failure is Corruption naming the file and offset.
[[nodiscard]] Status VerifyLogRecord(const std::byte* src, TableId table, uint64_t seed, Key key,
                                     uint32_t row_bytes, const std::string& path, uint64_t offset);

}  // namespace strata::storage
