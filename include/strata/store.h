// Store: the object a training pipeline holds. It keeps the rows of several
// embedding tables (embedding plus optimizer state) across three tiers — T0
// device memory (GPU, or its host twin without one), T1 DRAM and T2 SSD — and
// moves them up ahead of use from the intents the pipeline signals.
//
// A worker (a training thread, stream or GPU) registers, then per mini-batch:
//   Intent(w, t, keys, b, b+1)  ... usually from a loader, batches ahead
//   Pull(w, t, keys, out)       embeddings of keys into out (row-major, dim floats each)
//   Push(w, t, keys, grads)     optimizer applied once per key (duplicates summed)
//   AdvanceClock(w)
// Intents are optional: without them the store is a multi-tier LRU cache and a
// Pull that misses T0 fetches synchronously (counted as a stall).
//
// Consistency: a worker's Pull after its own Push sees the push; no update is
// lost while a row moves between tiers.
// Thread safety: every method may be called concurrently from any thread;
// calls naming one worker must come from one thread at a time.
// Ownership: the caller owns keys, out and grads; `out`/`grads` are device
// memory when T0 is a GPU (Stats().t0_on_gpu), host memory otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/options.h"
#include "strata/stats.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata {

// Keys of one table, for the multi-table Intent.
struct TableKeys {
  TableId table = 0;
  std::span<const Key> keys;
};

class Store {
 public:
  virtual ~Store() = default;

  // Opens the store in options.dir: creates it, or restores its last
  // checkpoint. `tables` must match the directory's tables when it exists.
  // Takes the directory's LOCK file before reading anything in it:
  // Unavailable, naming the directory and the holder's pid, while another
  // Store (in this process or another) has it open; a lock left by a dead
  // process does not block. A failed Open of a directory that held no store
  // leaves it as it was (missing, or as empty as it was).
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options,
                                             const std::vector<TableOptions>& tables);

  // A new worker with clock 0 (or the checkpointed clock of the same index).
  // `device`: CUDA device ordinal, -1 for the host.
  virtual Result<WorkerId> RegisterWorker(int device = -1) = 0;

  // Worker w will access `keys` of `table` while its clock is in [start, end).
  // Never blocks on I/O. An already expired window (end <= clock) is ignored
  // and counted. REQUIRES: start < end.
  [[nodiscard]] virtual Status Intent(WorkerId worker, TableId table, std::span<const Key> keys,
                                      Clock start, Clock end) = 0;
  [[nodiscard]] virtual Status Intent(WorkerId worker, std::span<const TableKeys> keys, Clock start,
                                      Clock end) = 0;
  [[nodiscard]] virtual Status AdvanceClock(WorkerId worker) = 0;
  virtual Result<Clock> CurrentClock(WorkerId worker) const = 0;

  // Embeddings of `keys` into `out` (keys.size() * dim floats). Rows never
  // seen are created by the table's initializer. `stream`: cudaStream_t on a
  // GPU, ignored on the host runner.
  [[nodiscard]] virtual Status Pull(WorkerId worker, TableId table, std::span<const Key> keys,
                                    float* out, void* stream = nullptr) = 0;
  // Gradients (keys.size() * dim floats); duplicates are summed, then the
  // table's optimizer is applied once per key.
  // Failure: a Push that fits T0's free room at once changes no row when it
  // fails. A larger one is applied in chunks of its distinct keys (in the
  // order of their first occurrence), each of which may read rows from the
  // SSD and write others down; when a chunk after the first fails, the
  // chunks before it stay applied (they cannot be undone without the I/O
  // that failed), and the error keeps the failure's code (IOError,
  // ResourceExhausted) and says "applied A of its D distinct keys". The
  // worker remembers that call: retrying the same Push (same worker, table,
  // keys and gradient bytes) applies only the other D - A keys, so no
  // gradient is applied twice. The worker's next different Push (any
  // table) or its AdvanceClock gives the retry up; meanwhile Checkpoint
  // returns FailedPrecondition, so no checkpoint holds half a Push. Pulls
  // in between see the applied part.
  [[nodiscard]] virtual Status Push(WorkerId worker, TableId table, std::span<const Key> keys,
                                    const float* grads, void* stream = nullptr) = 0;

  // Waits until the planner has taken in every intent signalled before this
  // call and acted on those due now (deterministic tests and replays).
  [[nodiscard]] virtual Status DrainIntents() = 0;

  // Calls fn(key, embedding) for every row of `table` in any tier (each key
  // once, its newest copy; order unspecified). For export and verification;
  // holds the table's lock, so not for the training loop.
  [[nodiscard]] virtual Status ScanTable(
      TableId table, const std::function<Status(Key, std::span<const float>)>& fn) = 0;

  // Flushes dirty rows of T0 and T1 into T2 and switches the manifest
  // (tables, clocks). Open on the directory restores exactly this state.
  // FailedPrecondition, naming the worker, while a worker's chunked Push is
  // applied in part and not given up (see Push).
  [[nodiscard]] virtual Status Checkpoint() = 0;

  virtual StoreStats Stats() const = 0;
  virtual Result<TableId> FindTable(const std::string& name) const = 0;
  virtual const std::vector<TableOptions>& Tables() const = 0;

  // Waits for the Pull, Push, ScanTable and Checkpoint calls in flight, then
  // stops the planner and I/O; later calls return FailedPrecondition (Stats
  // returns the counters as Close left them). Dirty rows not checkpointed
  // are written to T2 but not checkpointed. Once everything is written down
  // the tiers and the directory's lock are released: a new Store may open
  // the directory while this object lives. On an I/O error the rows not yet
  // written stay in memory (the lock stays held) and calling Close again
  // retries; once it succeeded, Close returns Ok.
  // REQUIRES: not called from a ScanTable callback (it would wait for itself).
  [[nodiscard]] virtual Status Close() = 0;
};

}  // namespace strata
