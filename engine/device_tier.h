// DeviceTier: T0 of one table. It owns the table's kernels::DeviceTable, the
// staging that carries batches between host memory and the runner's memory
// (device memory on a GPU), and the host scratch of the data path, and it
// offers the batched operations the engine runs on T0 in host terms: a
// Pull's passes, a Push, pins, inserts, evictions, next-use updates and
// exports. StoreImpl decides what moves where (store_data.cc,
// store_tiers.cc); this class moves it.
//
// The data path allocates nothing once the staging and scratch have grown
// (geometrically, and kept). On a GPU every copy and kernel of Touch, Push
// and TouchMisses runs on the caller's stream, and each waits for that
// stream once; the other operations use the default stream and finish before
// returning.
//
// Thread safety: none; a table's DeviceTier is guarded by its Table::mu.
// Ownership: owns the DeviceTable and every buffer; spans passed in are the
// caller's, read during the call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/key_dedup.h"
#include "engine/runner_staging.h"
#include "kernels/device_table.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::engine {

class DeviceTier {
 public:
  explicit DeviceTier(std::unique_ptr<kernels::DeviceTable> table);

  kernels::Runner runner() const { return runner_; }
  uint64_t Size() const { return table_->Size(); }
  // The most keys one call on the table takes.
  uint64_t batch_keys_max() const { return table_->options().batch_keys_max; }

  // ---- A Pull ----
  // The first pass: for every key, its embedding into its row of `out`
  // (runner memory) and its next use (next_use[i], or next_use_all when
  // next_use is empty); *missing = the keys not resident (their rows of
  // `out` untouched). REQUIRES: keys.size() <= batch_keys_max().
  [[nodiscard]] Status Touch(std::span<const Key> keys, std::span<const int64_t> next_use,
                             int64_t next_use_all, float* out, void* stream, uint64_t* missing);
  // After a Touch (or FindPresence) that found keys missing: lists them,
  // their positions in `keys` (the same keys), their next uses (the ones the
  // Touch was given; empty after a FindPresence) and their distinct keys.
  [[nodiscard]] Status CollectMisses(std::span<const Key> keys,
                                     std::span<const int64_t> next_use = {},
                                     int64_t next_use_all = kClockNever);
  std::span<const Key> missing_keys() const { return scratch_.miss_unique; }
  // The second pass, over the positions CollectMisses listed only, with the
  // next uses the first pass gave them. *still_missing: keys not resident.
  [[nodiscard]] Status TouchMisses(float* out, void* stream, uint64_t* still_missing);

  // ---- A Push ----
  // Runs the fused optimizer step on `keys` (repeats summed) with grads
  // (runner memory). NotFound, and nothing applied, when a key is not
  // resident. REQUIRES: keys.size() <= batch_keys_max().
  [[nodiscard]] Status Push(std::span<const Key> keys, const float* grads, void* stream);
  // The rows of grads[n * dim] (runner memory) holding a NaN or an
  // infinity: how many, and the lowest (n when none). Any n.
  [[nodiscard]] Status FindNonFinite(const float* grads, uint64_t n, void* stream, uint64_t* rows,
                                     uint64_t* first_index) {
    return table_->FindNonFinite(grads, n, rows, first_index, stream);
  }
  // Which keys are resident, for CollectMisses after a failed Push.
  [[nodiscard]] Status FindPresence(std::span<const Key> keys);

  // ---- Rows moving in and out (host memory, any number of keys) ----
  // found[i] = 1 when keys[i] is resident.
  [[nodiscard]] Status Presence(std::span<const Key> keys, std::vector<uint8_t>* found);
  // Adds (pin) or removes one pin per key; missing keys are ignored. A failed
  // pin leaves no key pinned by this call; a failed unpin still unpins every
  // chunk it can and returns the first error.
  [[nodiscard]] Status Pin(std::span<const Key> keys, bool pin);
  // Writes whole rows (row_floats each) with next uses and dirty flags.
  // ResourceExhausted when some key found no slot (keys before it may be in).
  [[nodiscard]] Status Insert(std::span<const Key> keys, const float* rows, const int64_t* next_use,
                              const uint8_t* dirty);
  // Sets the next use of the resident keys among `keys`.
  [[nodiscard]] Status SetNextUse(std::span<const Key> keys, std::span<const int64_t> next_use);
  // Takes up to `count` unpinned rows with the largest next use out of T0
  // into *out (host memory).
  [[nodiscard]] Status Evict(uint64_t count, HostRows* out);
  // The next uses Evict(count) would take, largest first, into *out (host
  // memory), without taking them.
  [[nodiscard]] Status LargestNextUses(uint64_t count, std::vector<int64_t>* out);
  // The embeddings of `keys` (dim floats each) into host memory, with
  // found flags.
  [[nodiscard]] Status Gather(std::span<const Key> keys, float* values,
                              std::vector<uint8_t>* found);
  // A Push of summed gradients held in host memory (dim floats per key).
  [[nodiscard]] Status PushHost(std::span<const Key> keys, const float* grads);
  // Calls fn with every resident row, copied to the host in chunks.
  [[nodiscard]] Status ExportAll(const std::function<Status(const HostRows&)>& fn);

 private:
  // Host keys into the staging's key buffer (on `stream`).
  Status StageKeys(std::span<const Key> keys, void* stream = nullptr);
  // Grows, before a pass queues anything, every buffer a pass of n keys
  // uses: a page-locked buffer is never freed or refilled while a copy queued
  // on a stream may still read it.
  Status ReservePass(size_t n, bool with_next_use, bool with_out_rows);
  // Host data as runner memory: in place on the host runner, else copied
  // through page-locked `pinned` into `buffer` on `stream`. REQUIRES: both
  // grown by ReservePass.
  template <class T>
  Result<const T*> Send(kernels::RunnerBuffer<T>& buffer, kernels::HostStaging<T>& pinned,
                        const T* data, size_t count, void* stream);
  // The keys by Send, through the key staging.
  Result<const Key*> SendKeys(std::span<const Key> keys, void* stream);
  // Returns `status`; when it is an error, first waits for `stream`, so that
  // nothing queued by the failed call still runs when the next one starts.
  Status Settle(Status status, void* stream);
  // The found flags of the last pass or FindPresence, on the host.
  Result<const uint8_t*> FoundOnHost(size_t n);

  std::unique_ptr<kernels::DeviceTable> table_;
  const kernels::Runner runner_;
  const uint32_t row_floats_;
  const uint32_t dim_;
  RunnerStaging staging_;
  PassScratch scratch_;
  // kGpu: page-locked host copies of what the data path sends on a stream.
  kernels::HostStaging<Key> pinned_keys_;
  kernels::HostStaging<int64_t> pinned_next_use_;
  kernels::HostStaging<uint32_t> pinned_out_rows_;
};

}  // namespace strata::engine
