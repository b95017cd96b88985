// FaultEnv: an Env wrapping another Env (usually Env::Default()) that injects
// faults for tests and simulates crashes.
//
// Faults are described by FaultRules: on calls of one kind (read, write,
// sync, ...) whose path contains a substring, from the Nth matching call on,
// at most `times_max` times, it returns an error (EIO, ENOSPC or any errno,
// as an IOError naming the file and offset), shortens a read, or adds
// latency. io::IoThreads, which issues reads and writes on File::fd()
// directly, consults the same rules through BeforeIo()/AfterSync(), so both
// paths fail alike. With no rules the cost is one relaxed atomic load.
//
// Crash simulation: FaultEnv remembers, for every file opened through it, its
// content at the last Sync (or at first open, for a file that existed), and
// whether its directory entry is durable (it existed, or SyncDir ran on its
// directory after it was created or renamed). DropUnsyncedWrites() makes the
// file system look as after a power loss: each file reverts to its synced
// content; files created and never dir-synced vanish; files renamed and never
// dir-synced move back to their old name. Deletions count as durable at once.
// The cost is a copy of the file at every Sync: meant for tests, small files.
//
// Thread safety: all methods are thread-safe. Ownership: the base Env is not
// owned and must outlive the FaultEnv; Files it returns must not outlive it.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/hash.h"
#include "base/mutex.h"
#include "io/env.h"
#include "io/limits.h"

namespace strata::io {

enum class FaultOp : uint8_t {
  kOpen,
  kRead,
  kWrite,
  kSync,
  kTruncate,
  kRename,
  kDelete,
  kCreateDirs,
  kSyncDir,
  kListDir,
  kAny,  // in a rule: matches calls of every kind (a crash at the Nth I/O call of any kind)
};
std::string_view FaultOpName(FaultOp op);

enum class FaultKind : uint8_t {
  kError,       // the call fails with `error_number`
  kShortRead,   // a read returns at most `short_read_bytes` (other ops: ignored)
  kLatency,     // the call is delayed by `latency_us`, then proceeds
  kShortWrite,  // a write stores only its first `short_read_bytes` (4 KiB aligned down for
                // O_DIRECT files), then fails with `error_number`: a torn write
  kKill,        // the process dies at once (SIGKILL) before the call: a crash at that point
};

struct FaultRule {
  FaultOp op = FaultOp::kRead;
  std::string path_substring;  // matches paths containing it; "" matches every path
  uint64_t nth_call = 1;       // fires from the Nth matching call on (1-based)
  uint64_t times_max = std::numeric_limits<uint64_t>::max();  // then at most this many times
  FaultKind kind = FaultKind::kError;
  int error_number = EIO;       // kError: EIO, ENOSPC, ...
  size_t short_read_bytes = 0;  // kShortRead, kShortWrite: bytes the call still transfers
  uint64_t latency_us = 0;      // kLatency
  double probability = 1.0;     // fires on this fraction of eligible calls (seeded, see SetSeed)
  // kError on a sync: the failed fsync also loses what was written to the
  // file since its last successful sync (the file reverts to that content at
  // once), as Linux may drop dirty pages after reporting the error once.
  bool sync_error_drops_writes = false;
};

class FaultEnv final : public Env {
 public:
  // REQUIRES: base != nullptr and outlives this FaultEnv.
  explicit FaultEnv(Env* base);
  ~FaultEnv() override;

  // Adds a rule; ResourceExhausted past kFaultRulesMax rules.
  [[nodiscard]] Status AddRule(const FaultRule& rule) EXCLUDES(rules_mu_);
  void ClearRules() EXCLUDES(rules_mu_);
  // Seed of the generator behind FaultRule::probability (default 1).
  void SetSeed(uint64_t seed) EXCLUDES(rules_mu_);
  // Faults injected so far (errors, short reads and delays).
  uint64_t faults_injected() const { return faults_injected_.load(std::memory_order_relaxed); }
  // A descriptor a kKill rule writes one line to before it kills the process
  // ("K <op> <path>\n"), so the parent learns where the crash landed; -1
  // (the default): none. Not owned.
  void set_kill_note_fd(int fd) { kill_note_fd_.store(fd, std::memory_order_relaxed); }
  // Calls the rules have seen so far (every kind; counted only while rules
  // are set): how a test learns the number of I/O points of a workload.
  uint64_t calls_seen() const { return calls_seen_.load(std::memory_order_relaxed); }
  // The same, of one kind.
  uint64_t calls_seen(FaultOp op) const {
    return op_calls_[static_cast<size_t>(op)].load(std::memory_order_relaxed);
  }

  // Simulates a crash (see the header comment). REQUIRES: no File of this
  // Env is being read or written concurrently; Files may stay open.
  [[nodiscard]] Status DropUnsyncedWrites() EXCLUDES(crash_mu_);

  // Hooks for I/O issued on File::fd() directly (io::IoThreads). BeforeIo
  // applies the rules to one call: returns the injected error, or OK after
  // any added latency, shortening `*len` for a short read. For a short write
  // it returns the error and shortens `*len`: the caller writes the first
  // `*len` bytes, then fails with the error.
  [[nodiscard]] Status BeforeIo(FaultOp op, const std::string& path, uint64_t offset, size_t* len);
  // Records a successful sync of `path` (its content becomes the crash state).
  void AfterSync(const std::string& path) EXCLUDES(crash_mu_);
  bool has_rules() const { return rules_active_.load(std::memory_order_relaxed); }

  // Env.
  [[nodiscard]] Result<std::unique_ptr<File>> OpenFile(const std::string& path,
                                                       const FileOptions& options) override;
  [[nodiscard]] Status RenameFile(const std::string& from, const std::string& to) override;
  [[nodiscard]] Status DeleteFile(const std::string& path) override;
  [[nodiscard]] Result<bool> CreateDir(const std::string& path) override;
  [[nodiscard]] Status SyncDir(const std::string& path) override;
  [[nodiscard]] Result<std::vector<std::string>> ListDir(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  [[nodiscard]] Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  uint64_t NowMicros() override;
  FaultEnv* AsFaultEnv() override { return this; }

 private:
  struct RuleState {
    FaultRule rule;
    uint64_t calls = 0;  // matching calls seen
    uint64_t fired = 0;
  };
  // What a crash leaves of one file.
  struct CrashState {
    std::string synced_content;
    bool entry_durable = false;
    std::string renamed_from;         // old name to restore when the rename is not durable
    bool overwrote = false;           // a rename replaced a durable file at this name ...
    std::string overwritten_content;  // ... whose synced content this is
  };

  Status Apply(FaultOp op, const std::string& path, uint64_t offset, size_t* len)
      EXCLUDES(rules_mu_, crash_mu_);
  void TrackOpen(const std::string& path, bool existed) EXCLUDES(crash_mu_);
  // Reverts `path` to its last synced content (sync_error_drops_writes).
  void RevertToSynced(const std::string& path) EXCLUDES(crash_mu_);

  Env* const base_;
  std::atomic<bool> rules_active_{false};
  std::atomic<uint64_t> faults_injected_{0};
  std::atomic<uint64_t> calls_seen_{0};
  std::atomic<int> kill_note_fd_{-1};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(FaultOp::kAny) + 1> op_calls_{};
  base::Mutex rules_mu_;
  std::vector<RuleState> rules_ GUARDED_BY(rules_mu_);
  SplitMix64 rng_ GUARDED_BY(rules_mu_) = SplitMix64(1);  // draws against probabilities
  base::Mutex crash_mu_;
  std::map<std::string, CrashState> files_ GUARDED_BY(crash_mu_);
};

}  // namespace strata::io
