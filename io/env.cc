// Env's non-virtual helpers, written once over its virtual calls.
#include "io/env.h"

namespace strata::io {

Status Env::CreateDirs(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("CreateDirs: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    if (path[pos - 1] == '/') continue;  // "a//b" or a trailing slash
    const std::string prefix = path.substr(0, pos);
    STRATA_ASSIGN_OR_RETURN(bool created, CreateDir(prefix));
    (void)created;
    // A new directory's entry is durable only once its parent is fsynced.
    // Every level is synced, not only those created now: an earlier call may
    // have created one and failed (or died) before its fsync.
    const size_t slash = prefix.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "."
                               : slash == 0               ? "/"
                                                          : prefix.substr(0, slash);
    STRATA_RETURN_IF_ERROR(SyncDir(parent));
  }
  return Status::Ok();
}

Status Env::WriteFileAtomically(const std::string& dir, const std::string& name,
                                const std::string& tmp_name, const std::string& bytes,
                                bool* in_doubt) {
  if (in_doubt != nullptr) *in_doubt = false;
  const std::string tmp = dir + "/" + tmp_name;
  {
    FileOptions options;
    options.create = true;
    options.truncate = true;
    STRATA_ASSIGN_OR_RETURN(auto file, OpenFile(tmp, options));
    STRATA_RETURN_IF_ERROR(file->Write(0, bytes.data(), bytes.size()));
    STRATA_RETURN_IF_ERROR(file->Sync());
  }
  // From here on a failure leaves the switch in doubt: a failed rename may
  // still have happened, and a renamed file whose directory fsync failed is
  // visible now and may or may not survive a power loss.
  if (in_doubt != nullptr) *in_doubt = true;
  STRATA_RETURN_IF_ERROR(RenameFile(tmp, dir + "/" + name));
  STRATA_RETURN_IF_ERROR(SyncDir(dir));
  if (in_doubt != nullptr) *in_doubt = false;
  return Status::Ok();
}

}  // namespace strata::io
