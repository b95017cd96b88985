// Pieces both native formats share (native_row_store.cc, format 1;
// log_row_store.cc, format 2): their I/O threads, the sticky error after a
// failed fsync, and the refusal to create a store over orphaned data files.
//
// Thread safety: FsyncFailure is thread-safe; the functions are pure.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "io/env.h"
#include "io/io_threads.h"
#include "storage/ssd/row_store_factory.h"
#include "strata/status.h"

namespace strata::storage {

// The store's I/O threads, or nullptr when they cannot start (the store
// then uses File::Read/Write).
std::unique_ptr<io::IoThreads> StartStoreIoThreads(const RowStoreOptions& options, io::Env* env);

// After a failed fsync of a data file the kernel may have dropped the
// written pages, so neither reads of data written since the last checkpoint
// nor a new checkpoint can be trusted: every later call returns this error,
// and reopening the directory gives the last checkpoint, exactly.
class FsyncFailure {
 public:
  // OK, or the error set by Set().
  Status Get() const EXCLUDES(mu_);
  void Set(const std::string& dir, const Status& cause) EXCLUDES(mu_);

 private:
  std::atomic<bool> failed_{false};
  mutable base::Mutex mu_;
  Status status_ GUARDED_BY(mu_);
};

// A directory without MANIFEST is new only if it holds no data: a new store
// writes its first MANIFEST before any data, so non-empty data files
// (names passing `is_data_file`) without one mean the MANIFEST was lost.
// Creating a store there would truncate them: Corruption naming them.
[[nodiscard]] Status RefuseOrphanedData(io::Env* env, const std::string& dir,
                                        bool (*is_data_file)(std::string_view));

}  // namespace strata::storage
