#include "io/fault_env.h"

#include <signal.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/assert.h"
#include "base/log.h"
#include "io/aligned.h"
#include "io/limits.h"

namespace strata::io {
namespace {

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string StripTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool WriteWhole(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  return static_cast<bool>(out);
}

// A File whose calls pass through the FaultEnv's rules first.
class FaultFile final : public File {
 public:
  FaultFile(FaultEnv* env, std::unique_ptr<File> base) : env_(env), base_(std::move(base)) {}

  Status Read(uint64_t offset, size_t len, void* buf, size_t* bytes_read) override {
    *bytes_read = 0;
    if (base_->direct()) STRATA_RETURN_IF_ERROR(CheckDirectIo("read", path(), offset, len, buf));
    if (env_->has_rules()) {
      STRATA_RETURN_IF_ERROR(env_->BeforeIo(FaultOp::kRead, path(), offset, &len));
      if (base_->direct()) len = AlignDown(len);
    }
    return base_->Read(offset, len, buf, bytes_read);
  }
  Status Write(uint64_t offset, const void* buf, size_t len) override {
    if (base_->direct()) STRATA_RETURN_IF_ERROR(CheckDirectIo("write", path(), offset, len, buf));
    if (env_->has_rules()) {
      size_t allowed = len;
      Status injected = env_->BeforeIo(FaultOp::kWrite, path(), offset, &allowed);
      if (!injected.ok()) {
        if (base_->direct()) allowed = AlignDown(allowed);
        if (allowed > 0 && allowed < len) (void)base_->Write(offset, buf, allowed);  // torn
        return injected;
      }
    }
    return base_->Write(offset, buf, len);
  }
  Status Sync() override {
    if (env_->has_rules()) {
      size_t ignored = 0;
      STRATA_RETURN_IF_ERROR(env_->BeforeIo(FaultOp::kSync, path(), 0, &ignored));
    }
    STRATA_RETURN_IF_ERROR(base_->Sync());
    env_->AfterSync(path());
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    if (env_->has_rules()) {
      size_t ignored = 0;
      STRATA_RETURN_IF_ERROR(env_->BeforeIo(FaultOp::kTruncate, path(), size, &ignored));
    }
    return base_->Truncate(size);
  }
  Result<uint64_t> Size() const override { return base_->Size(); }
  int fd() const override { return base_->fd(); }
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }

 private:
  FaultEnv* const env_;
  const std::unique_ptr<File> base_;
};

}  // namespace

std::string_view FaultOpName(FaultOp op) {
  switch (op) {
    case FaultOp::kOpen:
      return "open";
    case FaultOp::kRead:
      return "read";
    case FaultOp::kWrite:
      return "write";
    case FaultOp::kSync:
      return "sync";
    case FaultOp::kTruncate:
      return "truncate";
    case FaultOp::kRename:
      return "rename";
    case FaultOp::kDelete:
      return "delete";
    case FaultOp::kCreateDirs:
      return "create_dirs";
    case FaultOp::kSyncDir:
      return "sync_dir";
    case FaultOp::kListDir:
      return "list_dir";
    case FaultOp::kAny:
      return "any";
  }
  return "unknown";
}

FaultEnv::FaultEnv(Env* base) : base_(base) {
  STRATA_ASSERT(base != nullptr, "FaultEnv needs a base Env");
}
FaultEnv::~FaultEnv() = default;

Status FaultEnv::AddRule(const FaultRule& rule) {
  base::MutexLock lock(&rules_mu_);
  if (rules_.size() >= kFaultRulesMax) {
    return Status::ResourceExhausted("FaultEnv: more than " + std::to_string(kFaultRulesMax) +
                                     " rules");
  }
  rules_.push_back(RuleState{rule});
  rules_active_.store(true, std::memory_order_relaxed);
  return Status::Ok();
}

void FaultEnv::ClearRules() {
  base::MutexLock lock(&rules_mu_);
  rules_.clear();
  rules_active_.store(false, std::memory_order_relaxed);
}

Status FaultEnv::BeforeIo(FaultOp op, const std::string& path, uint64_t offset, size_t* len) {
  if (!has_rules()) return Status::Ok();
  return Apply(op, path, offset, len);
}

void FaultEnv::SetSeed(uint64_t seed) {
  base::MutexLock lock(&rules_mu_);
  rng_ = SplitMix64(seed);
}

Status FaultEnv::Apply(FaultOp op, const std::string& path, uint64_t offset, size_t* len) {
  uint64_t latency_us = 0;
  Status error;
  bool revert = false;
  {
    base::MutexLock lock(&rules_mu_);
    calls_seen_.fetch_add(1, std::memory_order_relaxed);
    op_calls_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
    for (RuleState& state : rules_) {
      const FaultRule& rule = state.rule;
      if ((rule.op != op && rule.op != FaultOp::kAny) ||
          path.find(rule.path_substring) == std::string::npos ||
          (rule.kind == FaultKind::kShortRead && op != FaultOp::kRead) ||
          (rule.kind == FaultKind::kShortWrite && op != FaultOp::kWrite)) {
        continue;
      }
      ++state.calls;
      if (state.calls < rule.nth_call || state.fired >= rule.times_max) continue;
      if (rule.probability < 1.0) {
        if (rng_.NextDouble() >= rule.probability) continue;
      }
      ++state.fired;
      faults_injected_.fetch_add(1, std::memory_order_relaxed);
      switch (rule.kind) {
        case FaultKind::kLatency:
          latency_us += rule.latency_us;
          break;
        case FaultKind::kShortRead:
          if (op == FaultOp::kRead && len != nullptr && *len > rule.short_read_bytes) {
            *len = rule.short_read_bytes;
          }
          break;
        case FaultKind::kKill: {
          const int fd = kill_note_fd_.load(std::memory_order_relaxed);
          if (fd >= 0) {
            const std::string note = "K " + std::string(FaultOpName(op)) + " " + path + "\n";
            (void)!::write(fd, note.data(), note.size());
          }
          ::kill(::getpid(), SIGKILL);
          break;
        }
        case FaultKind::kShortWrite:
          if (op != FaultOp::kWrite) break;
          if (len != nullptr && *len > rule.short_read_bytes) *len = rule.short_read_bytes;
          [[fallthrough]];
        case FaultKind::kError:
          if (error.ok()) {
            char where[160];
            std::snprintf(where, sizeof(where), " at offset %" PRIu64, offset);
            error = Status::FromErrno(
                rule.error_number,
                std::string(rule.kind == FaultKind::kShortWrite ? "injected short write: "
                                                                : "injected fault: ") +
                    std::string(FaultOpName(op)) + " of file " + path + where);
            revert = op == FaultOp::kSync && rule.sync_error_drops_writes;
          }
          break;
      }
    }
  }
  if (revert) RevertToSynced(path);
  if (latency_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(latency_us));
  return error;
}

void FaultEnv::RevertToSynced(const std::string& path) {
  base::MutexLock lock(&crash_mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return;
  if (!WriteWhole(path, it->second.synced_content)) {
    STRATA_LOG_ERROR("FaultEnv: cannot revert %s to its synced content", path.c_str());
  }
}

void FaultEnv::AfterSync(const std::string& path) {
  // Read under the lock, so a concurrent RevertToSynced is never half seen.
  base::MutexLock lock(&crash_mu_);
  files_[path].synced_content = ReadWhole(path);
}

void FaultEnv::TrackOpen(const std::string& path, bool existed) {
  base::MutexLock lock(&crash_mu_);
  if (files_.count(path) != 0) return;
  CrashState& state = files_[path];
  state.entry_durable = existed;
  if (existed) state.synced_content = ReadWhole(path);
}

Result<std::unique_ptr<File>> FaultEnv::OpenFile(const std::string& path,
                                                 const FileOptions& options) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kOpen, path, 0, nullptr));
  const bool existed = base_->FileExists(path);
  // Snapshot before opening: a truncating open is itself an unsynced change.
  if (existed || options.create) TrackOpen(path, existed);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->OpenFile(path, options));
  return std::unique_ptr<File>(new FaultFile(this, std::move(file)));
}

Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kRename, from, 0, nullptr));
  if (base_->FileExists(from)) TrackOpen(from, true);
  if (base_->FileExists(to)) TrackOpen(to, true);
  STRATA_RETURN_IF_ERROR(base_->RenameFile(from, to));
  base::MutexLock lock(&crash_mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return Status::Ok();
  CrashState moved = std::move(it->second);
  files_.erase(it);
  auto old = files_.find(to);
  if (old != files_.end() && old->second.entry_durable) {
    moved.overwrote = true;
    moved.overwritten_content = old->second.synced_content;
  }
  if (moved.entry_durable) moved.renamed_from = from;
  moved.entry_durable = false;
  files_[to] = std::move(moved);
  return Status::Ok();
}

Status FaultEnv::DeleteFile(const std::string& path) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kDelete, path, 0, nullptr));
  STRATA_RETURN_IF_ERROR(base_->DeleteFile(path));
  base::MutexLock lock(&crash_mu_);
  files_.erase(path);
  return Status::Ok();
}

Result<bool> FaultEnv::CreateDir(const std::string& path) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kCreateDirs, path, 0, nullptr));
  return base_->CreateDir(path);
}

Status FaultEnv::SyncDir(const std::string& path) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kSyncDir, path, 0, nullptr));
  STRATA_RETURN_IF_ERROR(base_->SyncDir(path));
  const std::string dir = StripTrailingSlash(path);
  base::MutexLock lock(&crash_mu_);
  for (auto& [name, state] : files_) {
    if (ParentDir(name) != dir || state.entry_durable) continue;
    state.entry_durable = true;
    state.renamed_from.clear();
    state.overwrote = false;
    state.overwritten_content.clear();
  }
  return Status::Ok();
}

Result<std::vector<std::string>> FaultEnv::ListDir(const std::string& path) {
  STRATA_RETURN_IF_ERROR(Apply(FaultOp::kListDir, path, 0, nullptr));
  return base_->ListDir(path);
}

bool FaultEnv::FileExists(const std::string& path) { return base_->FileExists(path); }
// Locks are not I/O a rule injects into: a store's lock is taken before its
// files are read.
Result<std::unique_ptr<FileLock>> FaultEnv::LockFile(const std::string& path) {
  return base_->LockFile(path);
}
uint64_t FaultEnv::NowMicros() { return base_->NowMicros(); }

Status FaultEnv::DropUnsyncedWrites() {
  base::MutexLock lock(&crash_mu_);
  std::map<std::string, CrashState> after;
  for (auto& [name, state] : files_) {
    if (state.entry_durable) {
      if (!WriteWhole(name, state.synced_content)) {
        return Status::IOError("DropUnsyncedWrites: cannot restore file " + name);
      }
      after[name] = std::move(state);
      continue;
    }
    // The directory entry was never made durable: the name goes away ...
    if (base_->FileExists(name)) STRATA_RETURN_IF_ERROR(base_->DeleteFile(name));
    // ... the file it replaced comes back ...
    if (state.overwrote) {
      if (!WriteWhole(name, state.overwritten_content)) {
        return Status::IOError("DropUnsyncedWrites: cannot restore file " + name);
      }
      after[name] = CrashState{state.overwritten_content, true, {}, false, {}};
    }
    // ... and a renamed file is back under its old name.
    if (!state.renamed_from.empty()) {
      if (!WriteWhole(state.renamed_from, state.synced_content)) {
        return Status::IOError("DropUnsyncedWrites: cannot restore file " + state.renamed_from);
      }
      after[state.renamed_from] = CrashState{state.synced_content, true, {}, false, {}};
    }
  }
  files_ = std::move(after);
  return Status::Ok();
}

}  // namespace strata::io
