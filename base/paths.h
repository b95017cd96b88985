// Checks of the paths a command is given, so that it refuses a bad one before
// it writes anything: two names of one file (the same path spelled another
// way, a symbolic link, a hard link), one directory inside another, and an
// output file whose directory is missing or whose name is a directory.
//
// Paths are compared resolved: std::filesystem::weakly_canonical makes them
// absolute, follows the links and drops "." and ".." of the part that exists
// and keeps the rest as written, so a path that does not exist yet compares
// by where it would be created.
//
// Thread safety: functions; the answer holds for the file system as it was
// when asked (another process may change it after).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "strata/status.h"

namespace strata::base {

// `path` absolute, with what exists of it resolved and no trailing '/'.
inline Result<std::filesystem::path> ResolvedPath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (!ec) p = std::filesystem::weakly_canonical(p, ec);
  if (ec) return Status::FromErrno(ec.value(), "resolve " + path);
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Whether `a` and `b` name one file: the same resolved path or, when both
// exist, the same device and inode (hard links).
inline Result<bool> SameFile(const std::string& a, const std::string& b) {
  STRATA_ASSIGN_OR_RETURN(const std::filesystem::path resolved_a, ResolvedPath(a));
  STRATA_ASSIGN_OR_RETURN(const std::filesystem::path resolved_b, ResolvedPath(b));
  if (resolved_a == resolved_b) return true;
  struct stat stat_a {};
  struct stat stat_b {};
  for (auto [path, st] : {std::pair{&a, &stat_a}, std::pair{&b, &stat_b}}) {
    if (::stat(path->c_str(), st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return false;
      return Status::FromErrno(errno, "stat " + *path);
    }
  }
  return stat_a.st_dev == stat_b.st_dev && stat_a.st_ino == stat_b.st_ino;
}

// Whether `path` is `dir` or lies inside it, both resolved.
inline Result<bool> SameOrInside(const std::string& path, const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(const std::filesystem::path resolved_path, ResolvedPath(path));
  STRATA_ASSIGN_OR_RETURN(const std::filesystem::path resolved_dir, ResolvedPath(dir));
  const auto [dir_end, path_at] = std::mismatch(resolved_dir.begin(), resolved_dir.end(),
                                                resolved_path.begin(), resolved_path.end());
  return dir_end == resolved_dir.end();
}

// Ok when a file can be written at `path` (by creating it, or a temporary
// beside it and renaming): `path` is not a directory and its directory
// exists and is writable. InvalidArgument naming `option` and the path
// otherwise.
inline Status CheckOutputFile(const std::string& option, const std::string& path) {
  const std::string named = option + " " + path;
  if (path.empty()) return Status::InvalidArgument(option + ": empty path");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(named + " is a directory; give a file's path");
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::InvalidArgument(
        named + ": directory " + dir.string() +
        (std::filesystem::exists(dir, ec) ? " is not a directory" : " does not exist"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::InvalidArgument(named + ": directory " + dir.string() +
                                   " is not writable: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace strata::base
