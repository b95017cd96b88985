#include "storage/ssd/native_common.h"

#include <vector>

#include "base/log.h"
#include "storage/ssd/ssd_format.h"

namespace strata::storage {

std::unique_ptr<io::IoThreads> StartStoreIoThreads(const RowStoreOptions& options, io::Env* env) {
  io::IoThreadsOptions io_options;
  io_options.threads = options.io_threads;
  io_options.cores = options.io_cores;
  io_options.topology_path = options.dir;
  io_options.env = env;
  auto threads = io::IoThreads::Create(io_options);
  if (!threads.ok()) return nullptr;
  return std::move(threads).value();
}

Status FsyncFailure::Get() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::Ok();
  base::MutexLock lock(&mu_);
  return status_;
}

void FsyncFailure::Set(const std::string& dir, const Status& cause) {
  base::MutexLock lock(&mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  status_ = Status::IOError(
      "native store " + dir + " stopped after a failed fsync (" + cause.ToString() +
      "): data written since the last checkpoint may be lost; reopen the directory to recover "
      "the last checkpoint");
  failed_.store(true, std::memory_order_release);
  STRATA_LOG_ERROR("%s", status_.ToString().c_str());
}

Status RefuseOrphanedData(io::Env* env, const std::string& dir,
                          bool (*is_data_file)(std::string_view)) {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::string found;
  for (const std::string& name : names) {
    if (!is_data_file(name)) continue;
    const std::string path = dir + "/" + name;
    io::FileOptions read_only;
    read_only.read_only = true;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file, env->OpenFile(path, read_only));
    STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    if (size > 0) found += (found.empty() ? "" : ", ") + path;
  }
  if (found.empty()) return Status::Ok();
  return Status::Corruption(dir + "/" + ssd::kManifestName + " is missing but data files " +
                            "hold data (" + found + "): refusing to create a new store over " +
                            "them; restore the MANIFEST or move the files away");
}

}  // namespace strata::storage
