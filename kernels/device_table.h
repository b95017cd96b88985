// DeviceTable: tier T0, a fixed-capacity hash table of rows (embedding plus
// optimizer state, fp32) in runner memory, with batched lookups, inserts,
// eviction and a fused optimizer step (Push).
//
// Runner::kGpu runs CUDA kernels on one device; Runner::kHost runs the same
// per-key code (device_table_ref.h, optimizer.h, initializer.h) on a
// process-wide thread pool. Both produce the same rows; see
// docs/device-table.md for the layout, probe bound and formulas.
//
// Thread safety: NOT thread-safe; the engine serialises calls per table. A
// batched call may use many threads internally.
// Ownership: the table owns its runner memory. Every pointer passed to a call
// is runner memory (device memory on kGpu, host memory on kHost) owned by the
// caller; on kGpu an *Async call reads and writes it until the stream reaches
// that point. Rows are copied in and out, never handed out by address, so
// eviction never invalidates anything the caller holds.
// Keys: every 64-bit value is a key (occupancy is kept in metadata).
// Errors: bad arguments are InvalidArgument and change nothing. On kGpu an
// *Async call returns only the errors it sees before launching; what the
// kernels find (full table, missing key) is returned by the next
// Synchronize(stream) (the synchronous forms do both).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/device_table_ref.h"
#include "kernels/initializer.h"
#include "kernels/limits.h"
#include "kernels/optimizer.h"
#include "kernels/runner.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::kernels {

struct DeviceTableOptions {
  // Rows the table must hold; slots = ceil(capacity_rows / kLoadFactorMax),
  // rounded up to whole buckets (a prime count of them beyond 32). More rows
  // fit (0.9 of the slots is tested); none beyond the slots.
  uint64_t capacity_rows = 0;
  uint32_t dim = 16;                  // embedding floats per row
  OptimizerOptions optimizer;         // decides the state floats per row
  InitializerOptions initializer;     // rows created by FindOrInsert
  uint64_t batch_keys_max = 1 << 20;  // most keys per call (scratch is sized by it)
  uint32_t host_threads = 0;          // kHost: 0 = hardware threads (one shared pool)
  int gpu_device = 0;                 // kGpu: CUDA device ordinal
};

// One pass of a Pull over resident rows (DeviceTable::FindTouch). Every
// pointer is runner memory.
struct TouchBatch {
  const Key* keys = nullptr;
  uint64_t n = 0;
  float* out = nullptr;                // dim floats per output row
  const uint32_t* out_rows = nullptr;  // output row of key i (null: row i)
  const int64_t* next_use = nullptr;   // per key (null: next_use_all for all)
  int64_t next_use_all = kClockNever;
  uint8_t* found = nullptr;  // per key, 1 when resident (may be null)
};

// FindOrInsert's per-key outcome.
inline constexpr uint8_t kInsertFound = 0;    // the row existed
inline constexpr uint8_t kInsertCreated = 1;  // the row was created by InitRow
inline constexpr uint8_t kInsertNoRoom = 2;   // no room: nothing changed for this key

class DeviceTable {
 public:
  // REQUIRES nothing: bad options are InvalidArgument; kGpu without a device
  // is FailedPrecondition; no memory is ResourceExhausted.
  static Result<std::unique_ptr<DeviceTable>> Create(const DeviceTableOptions& options,
                                                     Runner runner);
  ~DeviceTable();
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // Gathers the embeddings (dim floats) of keys into values[n*dim] (rows of
  // missing keys untouched) and found[n] (1/0). values may be null.
  [[nodiscard]] Status Find(const Key* keys, uint64_t n, float* values, uint8_t* found);
  [[nodiscard]] Status FindAsync(const Key* keys, uint64_t n, float* values, uint8_t* found,
                                 void* stream);
  // Find, the gather and SetNextUse fused into one pass: for each resident
  // key i, copies its embedding to batch.out[row(i) * dim] (row(i) =
  // out_rows[i], or i), sets its next use and sets found[i] = 1; a key not
  // resident gets found[i] = 0 and changes nothing. *missing (host memory)
  // receives the number of keys not resident. kGpu: everything runs on
  // `stream`, and the call waits for it once, to read *missing.
  [[nodiscard]] Status FindTouch(const TouchBatch& batch, uint64_t* missing, void* stream);

  // As Find, whole rows (row_floats each).
  [[nodiscard]] Status FindRows(const Key* keys, uint64_t n, float* rows, uint8_t* found);

  // Finds each key, creating missing rows with InitRow (next_use as given,
  // clean, unpinned); values[n*dim] (may be null) receives embeddings and
  // inserted[n] kInsertFound / kInsertCreated / kInsertNoRoom. Duplicate keys
  // share one row. ResourceExhausted (count and first key) when any key
  // found no room; all other keys are done.
  [[nodiscard]] Status FindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                                    int64_t next_use);
  [[nodiscard]] Status FindOrInsertAsync(const Key* keys, uint64_t n, float* values,
                                         uint8_t* inserted, int64_t next_use, void* stream);

  // Writes whole rows (n*row_floats), next_use (null: kClockNever) and dirty
  // (null: clean); keeps pin counts of existing rows. For duplicate keys the
  // last occurrence wins. ResourceExhausted when some key found no room.
  [[nodiscard]] Status InsertOrAssign(const Key* keys, uint64_t n, const float* rows,
                                      const int64_t* next_use, const uint8_t* dirty);
  [[nodiscard]] Status InsertOrAssignAsync(const Key* keys, uint64_t n, const float* rows,
                                           const int64_t* next_use, const uint8_t* dirty,
                                           void* stream);

  // Removes the keys present (missing keys are ignored), pinned or not.
  [[nodiscard]] Status Erase(const Key* keys, uint64_t n);
  // Adds one pin per occurrence; found[n] (may be null) says which exist.
  [[nodiscard]] Status Pin(const Key* keys, uint64_t n, uint8_t* found);
  // Removes one pin per occurrence (never below 0); missing keys are ignored.
  [[nodiscard]] Status Unpin(const Key* keys, uint64_t n);
  // Sets next-use clocks of present keys (duplicates: one of the values).
  [[nodiscard]] Status SetNextUse(const Key* keys, uint64_t n, const int64_t* next_use);

  // Fused optimizer step: gradients grads[n*dim] of duplicate keys are
  // summed (in batch order on the host runner; in no fixed order on a GPU,
  // whose atomic adds may differ from it in the last bits), then the
  // optimizer runs once per distinct key in place and marks the row dirty. Any key not present:
  // NotFound naming the first such key, and nothing is applied.
  [[nodiscard]] Status Push(const Key* keys, uint64_t n, const float* grads);
  [[nodiscard]] Status PushAsync(const Key* keys, uint64_t n, const float* grads, void* stream);

  // The rows of grads[n*dim] (runner memory) holding a NaN or an infinity:
  // *rows (host memory) gets how many, *first_index the lowest such row (n
  // when none). Changes nothing; any n. kGpu: runs on `stream` and waits
  // for it.
  [[nodiscard]] Status FindNonFinite(const float* grads, uint64_t n, uint64_t* rows,
                                     uint64_t* first_index, void* stream);

  // Moves up to k unpinned rows with the largest next_use (ties broken
  // arbitrarily) out of the table into out (buffers hold k rows), with their
  // dirty flags and next_use, and frees their slots. out->count = rows
  // written, packed from index 0 (kHost: in descending next_use).
  [[nodiscard]] Status EvictCandidates(uint64_t k, RowBatch* out);
  // The next uses EvictCandidates(k) would take, without taking them: up to
  // k of the largest next_use among unpinned rows, in descending order, into
  // out_host (host memory, room for k); *count = how many. A store with
  // several tables merges these to pick one victim order across them.
  [[nodiscard]] Status LargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count);

  // Calls fn with chunks (at most batch_keys_max rows, in runner memory
  // valid during the call) of every resident row; rows stay resident. An
  // error from fn stops the scan and is returned.
  [[nodiscard]] Status ExportAll(const std::function<Status(const RowBatch&)>& fn);

  // Waits for `stream` and returns the first error found on the device by
  // *Async calls since the last Synchronize (kHost: OK).
  [[nodiscard]] Status Synchronize(void* stream);

  uint64_t Size() const;      // resident rows (kGpu: reads the device counter)
  double LoadFactor() const;  // Size() / slots()
  uint64_t capacity_rows() const { return options_.capacity_rows; }
  uint64_t slots() const { return ref_.slots(); }
  uint32_t dim() const { return options_.dim; }
  uint32_t row_floats() const { return ref_.row_floats; }
  Runner runner() const { return runner_; }
  const DeviceTableOptions& options() const { return options_; }
  // The kernel view (pointers into runner memory).
  DeviceTableRef ref() const { return ref_; }

 private:
  DeviceTable(const DeviceTableOptions& options, Runner runner);
  Status Allocate();
  Status CheckBatch(const char* op, const Key* keys, uint64_t n) const;
  // The errors the back ends report for a batch: `failed` of its `n` keys
  // found no room (first_key the first of them) or were not resident.
  Status NoRoom(const char* op, uint64_t failed, uint64_t n, Key first_key) const;
  static Status NotResident(const char* op, uint64_t failed, Key first_key);

  // Runner back ends (device_table_host.cc, device_table_gpu.cu).
  Status HostFind(const Key* keys, uint64_t n, float* out, uint32_t out_floats, uint8_t* found);
  Status HostFindTouch(const TouchBatch& batch, uint64_t* missing);
  Status HostFindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                          int64_t next_use);
  Status HostInsertOrAssign(const Key* keys, uint64_t n, const float* rows, const int64_t* next_use,
                            const uint8_t* dirty);
  Status HostForEachFound(const Key* keys, uint64_t n, int op, const int64_t* next_use,
                          uint8_t* found);
  Status HostPush(const Key* keys, uint64_t n, const float* grads);
  Status HostFindNonFinite(const float* grads, uint64_t n, uint64_t* rows, uint64_t* first_index);
  Status HostEvict(uint64_t k, RowBatch* out);
  Status HostLargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count);
  Status HostExportAll(const std::function<Status(const RowBatch&)>& fn);

  Status GpuInit();
  void GpuRelease();
  Status GpuFind(const Key* keys, uint64_t n, float* out, uint32_t out_floats, uint8_t* found,
                 void* stream);
  Status GpuFindTouch(const TouchBatch& batch, uint64_t* missing, void* stream);
  Status GpuFindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                         int64_t next_use, void* stream);
  Status GpuInsertOrAssign(const Key* keys, uint64_t n, const float* rows, const int64_t* next_use,
                           const uint8_t* dirty, void* stream);
  Status GpuForEachFound(const Key* keys, uint64_t n, int op, const int64_t* next_use,
                         uint8_t* found, void* stream);
  Status GpuPush(const Key* keys, uint64_t n, const float* grads, void* stream);
  Status GpuFindNonFinite(const float* grads, uint64_t n, uint64_t* rows, uint64_t* first_index,
                          void* stream);
  Status GpuEvict(uint64_t k, RowBatch* out);
  Status GpuLargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count);
  // Radix select over the unpinned rows' next uses (as ordered unsigned):
  // *threshold is the k-th largest, *greater how many are above it; *total
  // the unpinned rows (when *total <= k every one is selected).
  Status GpuSelect(uint64_t k, uint64_t* threshold, uint64_t* greater, uint64_t* total);
  Status GpuExportAll(const std::function<Status(const RowBatch&)>& fn);
  Status GpuSynchronize(void* stream);
  uint64_t GpuSize() const;

  // Constant after Create.
  const DeviceTableOptions options_;
  const Runner runner_;
  DeviceTableRef ref_{};

  // Table memory (runner memory).
  RunnerBuffer<Key> keys_;
  RunnerBuffer<uint32_t> states_;
  RunnerBuffer<float> rows_;
  RunnerBuffer<int64_t> next_use_;
  RunnerBuffer<uint32_t> pins_;
  RunnerBuffer<uint8_t> dirty_;
  RunnerBuffer<uint32_t> overflow_;
  RunnerBuffer<uint64_t> counters_;  // [0] size; kGpu: error record, scratch
  // Scratch: per-slot batch owner (0 = none), per-key slot ids.
  RunnerBuffer<uint32_t> owner_;
  RunnerBuffer<uint32_t> slot_of_;
  // kHost scratch for Push: (slot, index) of keys that occur more than once,
  // grown geometrically and kept.
  std::vector<uint64_t> host_repeats_;
  // kHost scratch for LargestNextUses and Evict (grown and kept).
  std::vector<int64_t> host_next_uses_;
  std::vector<std::pair<int64_t, uint32_t>> host_candidates_;
  // kGpu: page-locked words FindTouch copies its miss count into (one) and
  // FindNonFinite its row count and first row (two).
  HostStaging<uint64_t> host_word_;
  // kGpu scratch for Push: summed gradients, grown on demand.
  RunnerBuffer<float> grad_sums_;
  RunnerBuffer<uint32_t> unique_slots_;
  // kGpu scratch for LargestNextUses: the selected next uses, grown on demand.
  RunnerBuffer<int64_t> selected_next_use_;
};

}  // namespace strata::kernels
