// DeviceTable's GPU back end: CUDA kernels that call the per-key functions of
// device_table_ref.h, initializer.h and optimizer.h, one thread per key (or
// per slot for scans). The only CUDA translation unit of the table; built
// with --fmad=false so its arithmetic rounds like the host runner's.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/cuda_status.h"
#include "kernels/device_table.h"
#include "kernels/gpu_runtime.h"

namespace strata::kernels {
namespace {

constexpr int kBlockThreads = 256;

// counters_ layout (uint64 words).
constexpr int kSize = 0;         // resident rows
constexpr int kErrCode = 1;      // first async error: 0 none, 1 no room, 2 missing key
constexpr int kErrCount = 2;     // keys that failed in that call
constexpr int kErrKey = 3;       // first failing key
constexpr int kErrBatch = 4;     // keys in that call
constexpr int kErrOp = 5;        // 0 FindOrInsert, 1 InsertOrAssign, 2 Push
constexpr int kBatchFailed = 6;  // failures of the running call
constexpr int kBatchFirst = 7;   // lowest failing index of the running call
// Scratch words after the 8 counters: [8] unique count / export count,
// [9] greater-than count, [10] tie count, [16..16+256) histogram.
constexpr int kScratch0 = 8;
constexpr int kHist = 16;
static_assert(kHist + 256 <= detail::kTableCounterWords);

cudaStream_t S(void* stream) { return static_cast<cudaStream_t>(stream); }

unsigned Blocks(uint64_t n) {
  const uint64_t b = (n + kBlockThreads - 1) / kBlockThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 0x7fffffffULL ? 0x7fffffffULL : b));
}

// The message is built only on failure: a launch on the hot path allocates nothing.
Status LaunchStatus(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::Ok();
  return base::CudaStatus(e, std::string("DeviceTable: launching ") + what);
}

__device__ inline uint64_t GlobalIndex() {
  return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline uint64_t GridStride() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

__device__ inline void RecordFailure(uint64_t* counters, uint64_t i) {
  detail::AtomicAdd(&counters[kBatchFailed], uint64_t{1});
  detail::AtomicMin(&counters[kBatchFirst], i);
}

// Find with a tile of kKeyTile = kBucketSlots threads per key (the other
// tile kernels use it too): lane j compares slot j of the bucket (one
// coalesced 128-byte read of keys), a ballot picks the hit, and the tile
// copies the row. Same semantics as DeviceTableRef::Find.
constexpr uint32_t kKeyTile = kBucketSlots;
static_assert(kKeyTile == 16);

// The slot of `key` (kNoSlot when absent), found by a tile: lane j compares
// slot j of each bucket on the key's probe sequence. Key, state and the
// bucket's overflow flag are loaded together (no load waits on a compare).
// Plain loads: a find-only call runs while nothing writes the table, and
// what earlier calls wrote is visible across the kernel boundary.
__device__ inline uint64_t TileFind(const cooperative_groups::thread_block_tile<kKeyTile>& tile,
                                    const DeviceTableRef& ref, Key key) {
  const uint32_t lane = tile.thread_rank();
  uint64_t bucket = ref.HomeBucket(key);
  const uint64_t step = ref.ProbeStep(key);
  for (uint32_t p = 0; p < ref.probe_buckets; ++p) {
    const uint64_t s = bucket * kBucketSlots + lane;
    const Key k = ref.keys[s];
    const uint32_t state = ref.states[s];
    const uint32_t overflowed = ref.overflow[bucket];
    const uint32_t hits = tile.ballot((k == key) & (state == kSlotOccupied));
    if (hits != 0) return bucket * kBucketSlots + (__ffs(hits) - 1);
    if (overflowed == 0) break;
    bucket = ref.NextBucket(bucket, step);
  }
  return kNoSlot;
}

// ---- Claims on the GPU: the memory-order contract (docs/device-table.md) ----
//
// An insert call (FindOrInsert, InsertOrAssign) claims slots in one kernel
// and publishes them in a later kernel of the same call. A claim is one
// relaxed CAS of the state word kSlotEmpty -> kSlotClaimed + i by the tile of
// batch key i; until the publishing kernel the state keeps that tag. So a
// tile that meets a slot claimed during the call learns whose key it holds
// from the state word alone: it compares keys_in[tag - kSlotClaimed], the
// call's input (written before the kernel, read-only in it), and never reads
// the slot's key, row or metadata that the claimer is writing. Hence:
//  - no acquire anywhere: a tile reads only (a) what earlier kernels wrote
//    (published rows, their keys and overflow flags: visible across the
//    kernel boundary) and (b) state words, each a single location whose
//    coherence order is empty -> tag (one CAS, at most once per call);
//  - no release: the claimer's key, row and metadata are read by later
//    kernels only, which the kernel boundary orders after every write of
//    this one;
//  - a relaxed load of a state may be stale only towards kSlotEmpty (the
//    earlier value of its coherence order): the CAS then fails and returns
//    the tag, which is compared like any other; a state once non-empty stays
//    non-empty for the whole call (nothing is erased during an insert call);
//  - the overflow flags set during the call (relaxed atomicOr) may be missed
//    by pass 1; pass 2 then still walks the probe order up to the first
//    empty slot, so it meets every slot claimed for the key.
// Duplicates of a key meet at one slot: each tile claims the first slot of
// the probe order it sees empty, and every slot before it was non-empty
// (so stays non-empty) when it looked; a tile with the same key walks the
// same order, sees those slots non-empty too (a stale empty fails its CAS),
// and so reaches the claimed slot first, as a tag carrying its key.
__device__ inline uint32_t LoadStateRelaxed(const DeviceTableRef& ref, uint64_t s) {
  return detail::LoadRelaxed(&ref.states[s]);
}

// Whether state (of a slot holding `slot_key` when published) holds `key`,
// for the tile of batch key `self`: published before the call, or claimed
// during it by a key of keys_in equal to it.
__device__ inline bool HoldsKey(uint32_t state, Key slot_key, Key key, const Key* keys_in) {
  if (state == kSlotOccupied) return slot_key == key;
  return state >= kSlotClaimed && keys_in[state - kSlotClaimed] == key;
}

// Finds keys_in[i] or claims a slot for it, by a tile (all lanes call it and
// get the same answer). kClaimed: this tile's CAS took the slot (state
// kSlotClaimed + i); the caller writes key, row and metadata, and a later
// kernel publishes it. kFound: the key is in *slot_out (published before the
// call, or claimed during it by an equal key). kFull: no empty slot within
// the probe bound; nothing changed. Same outcomes as
// DeviceTableRef::FindOrClaim on the host runner.
__device__ ClaimResult TileFindOrClaim(const cooperative_groups::thread_block_tile<kKeyTile>& tile,
                                       const DeviceTableRef& ref, const Key* keys_in, uint64_t i,
                                       uint64_t* slot_out) {
  const uint32_t lane = tile.thread_rank();
  const Key key = keys_in[i];
  const uint64_t home = ref.HomeBucket(key);
  const uint64_t step = ref.ProbeStep(key);
  // Pass 1: rows published before the call (erase may have left holes, so
  // an empty slot does not end the search), and claims already seen.
  uint64_t bucket = home;
  for (uint32_t p = 0; p < ref.probe_buckets; ++p) {
    const uint64_t s = bucket * kBucketSlots + lane;
    const Key k = ref.keys[s];
    const uint32_t state = LoadStateRelaxed(ref, s);
    const uint32_t overflowed = ref.overflow[bucket];
    const uint32_t hits = tile.ballot(HoldsKey(state, k, key, keys_in));
    if (hits != 0) {
      *slot_out = bucket * kBucketSlots + (__ffs(hits) - 1);
      return ClaimResult::kFound;
    }
    if (overflowed == 0) break;
    bucket = ref.NextBucket(bucket, step);
  }
  // Pass 2: in probe order, the first slot that holds the key or is empty;
  // the lowest empty lane's CAS claims it. A lost CAS returns the winner's
  // tag: a match ends the search, else the bucket is looked at again (that
  // slot is non-empty now, so each retry has one empty slot fewer).
  bucket = home;
  for (uint32_t p = 0; p < ref.probe_buckets; ++p) {
    const uint64_t base = bucket * kBucketSlots;
    const uint64_t s = base + lane;
    for (;;) {
      const Key k = ref.keys[s];
      const uint32_t state = LoadStateRelaxed(ref, s);
      const uint32_t hits = tile.ballot(HoldsKey(state, k, key, keys_in));
      if (hits != 0) {
        *slot_out = base + (__ffs(hits) - 1);
        return ClaimResult::kFound;
      }
      const uint32_t empties = tile.ballot(state == kSlotEmpty);
      if (empties == 0) break;
      const uint32_t first = __ffs(empties) - 1;
      uint32_t seen = 0;
      if (lane == first) {
        seen = atomicCAS(&ref.states[s], kSlotEmpty, kSlotClaimed + static_cast<uint32_t>(i));
      }
      seen = tile.shfl(seen, first);
      if (seen == kSlotEmpty) {
        if (lane == 0) {
          uint64_t passed = home;
          for (uint32_t q = 0; q < p; ++q) {
            detail::AtomicOr(&ref.overflow[passed], 1u);
            passed = ref.NextBucket(passed, step);
          }
        }
        *slot_out = base + first;
        return ClaimResult::kClaimed;
      }
      if (seen >= kSlotClaimed && keys_in[seen - kSlotClaimed] == key) {
        *slot_out = base + first;
        return ClaimResult::kFound;
      }
    }
    bucket = ref.NextBucket(bucket, step);
  }
  return ClaimResult::kFull;
}

// Copies `floats` floats from src to dst by the tile's lanes: 16-byte accesses
// for rows of at least kTileCopyWideFloats floats when both are 16-byte
// aligned and floats is a multiple of 4 (true for the whole tile, so the tile
// never splits), else one float per lane per step. On an H200 the 16-byte
// form found rows of 64 floats 5% faster and rows of 8 and 32 floats 12-21%
// slower (docs/gpu/README.md, runs 9b61231 and e5a7d2f).
constexpr uint32_t kTileCopyWideFloats = 64;
__device__ inline void TileCopy(uint32_t lane, float* dst, const float* src, uint32_t floats) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  if (floats >= kTileCopyWideFloats && (floats & 3) == 0 && (addresses & 15) == 0) {
    const auto* src4 = reinterpret_cast<const float4*>(src);
    auto* dst4 = reinterpret_cast<float4*>(dst);
    for (uint32_t d = lane; d < floats / 4; d += kKeyTile) dst4[d] = src4[d];
    return;
  }
  for (uint32_t d = lane; d < floats; d += kKeyTile) dst[d] = src[d];
}

__global__ void __launch_bounds__(kBlockThreads, 8)
    FindKernel(DeviceTableRef ref, const Key* keys, uint64_t n, float* out, uint32_t out_floats,
               uint8_t* found) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < n; i += tiles) {  // uniform per tile
    const uint64_t slot = TileFind(tile, ref, keys[i]);
    if (lane == 0) found[i] = slot != kNoSlot;
    if (slot != kNoSlot && out != nullptr)
      TileCopy(lane, out + i * out_floats, ref.Row(slot), out_floats);
  }
}

// FindTouch: the tile search, the gather to the key's output row and the
// next-use store in one pass; misses counted in counters[kBatchFailed].
__global__ void __launch_bounds__(kBlockThreads, 8)
    FindTouchKernel(DeviceTableRef ref, TouchBatch b, uint64_t* counters) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < b.n; i += tiles) {  // uniform per tile
    const uint64_t slot = TileFind(tile, ref, b.keys[i]);
    if (lane == 0) {
      if (b.found != nullptr) b.found[i] = slot != kNoSlot;
      if (slot == kNoSlot) {
        detail::AtomicAdd(&counters[kBatchFailed], uint64_t{1});
      } else {
        ref.next_use[slot] = b.next_use != nullptr ? b.next_use[i] : b.next_use_all;
      }
    }
    if (slot == kNoSlot) continue;
    float* dst = b.out + (b.out_rows != nullptr ? b.out_rows[i] : i) * uint64_t{ref.dim};
    TileCopy(lane, dst, ref.Row(slot), ref.dim);
  }
}

// FindOrInsert, kernel 1: a tile per key finds or claims its slot; the
// claiming tile writes the key, a fresh row (InitValue per element over the
// lanes, the optimizer state by lane 0) and the metadata. Rows created here
// are published by PublishGatherKernel.
__global__ void __launch_bounds__(kBlockThreads)
    FindOrInsertKernel(DeviceTableRef ref, InitializerOptions init, OptimizerOptions opt,
                       const Key* keys, uint64_t n, uint8_t* inserted, int64_t next_use,
                       uint32_t* slot_of, uint64_t* counters) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < n; i += tiles) {  // uniform per tile
    uint64_t s = kNoSlot;
    const ClaimResult r = TileFindOrClaim(tile, ref, keys, i, &s);
    if (r == ClaimResult::kFull) {
      if (lane == 0) {
        inserted[i] = kInsertNoRoom;
        slot_of[i] = kNoSlot32;
        RecordFailure(counters, i);
      }
      continue;
    }
    if (r == ClaimResult::kClaimed) {
      const Key key = keys[i];
      float* row = ref.Row(s);
      for (uint32_t d = lane; d < ref.dim; d += kKeyTile) row[d] = InitValue(init, key, d);
      if (lane == 0) {
        InitOptimizerState(opt, ref.dim, row);
        ref.keys[s] = key;
        ref.next_use[s] = next_use;
        ref.pins[s] = 0;
        ref.dirty[s] = 0;
        detail::AtomicAdd(ref.size, uint64_t{1});
      }
    }
    if (lane == 0) {
      inserted[i] = r == ClaimResult::kClaimed ? kInsertCreated : kInsertFound;
      slot_of[i] = static_cast<uint32_t>(s);
    }
  }
}

// FindOrInsert, kernel 2, a tile per key: the claimer publishes its slot
// (tag -> kSlotOccupied: nothing reads states in this kernel, and the next
// call's kernels see the store across the kernel boundary), and every key's
// embedding is copied to values (null: none). The rows were written by
// kernel 1, so no ordering within this kernel is needed.
__global__ void __launch_bounds__(kBlockThreads, 8)
    PublishGatherKernel(DeviceTableRef ref, uint64_t n, const uint32_t* slot_of,
                        const uint8_t* inserted, float* values) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < n; i += tiles) {
    const uint32_t s = slot_of[i];
    if (s == kNoSlot32) continue;
    if (lane == 0 && inserted[i] == kInsertCreated) ref.states[s] = kSlotOccupied;
    if (values != nullptr) TileCopy(lane, values + i * ref.dim, ref.Row(s), ref.dim);
  }
}

// InsertOrAssign, kernel 1: a tile per key finds or claims its slot (a new
// slot gets its key and no pins), and bids for the slot's ownership: the
// last occurrence of a key wins (atomicMax, relaxed: read by kernel 2).
__global__ void __launch_bounds__(kBlockThreads)
    ClaimOwnersKernel(DeviceTableRef ref, const Key* keys, uint64_t n, uint32_t* slot_of,
                      uint32_t* owner, uint64_t* counters) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < n; i += tiles) {  // uniform per tile
    uint64_t s = kNoSlot;
    const ClaimResult r = TileFindOrClaim(tile, ref, keys, i, &s);
    if (tile.thread_rank() != 0) continue;
    if (r == ClaimResult::kFull) {
      slot_of[i] = kNoSlot32;
      RecordFailure(counters, i);
      continue;
    }
    if (r == ClaimResult::kClaimed) {
      ref.keys[s] = keys[i];
      ref.pins[s] = 0;
      detail::AtomicAdd(ref.size, uint64_t{1});
    }
    detail::AtomicMax(&owner[s], static_cast<uint32_t>(i + 1));
    slot_of[i] = static_cast<uint32_t>(s);
  }
}

// InsertOrAssign, kernel 2: owners write their rows, a tile per key
// (coalesced row copies), their metadata, publish the slot (a slot claimed
// by kernel 1 holds a tag; one already published is rewritten as it was)
// and clear their owner word. Lane 0 reads owner[s] once and shares it, so
// the clear cannot change the tile's answer; another key of the same slot
// reads either the owner's index + 1 or 0, neither its own index + 1.
__global__ void __launch_bounds__(kBlockThreads, 8)
    AssignOwnedKernel(DeviceTableRef ref, uint64_t n, const uint32_t* slot_of, uint32_t* owner,
                      const float* rows, const int64_t* next_use, const uint8_t* dirty) {
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  for (uint64_t i = GlobalIndex() / kKeyTile; i < n; i += tiles) {
    const uint32_t s = slot_of[i];
    if (s == kNoSlot32) continue;
    bool owns = false;
    if (lane == 0) owns = ref.Owns(owner, s, i);
    if (!tile.shfl(owns, 0)) continue;
    TileCopy(lane, ref.Row(s), rows + i * ref.row_floats, ref.row_floats);
    if (lane == 0) {
      ref.AssignMeta(s, next_use, dirty, i);
      ref.states[s] = kSlotOccupied;
      owner[s] = 0;
    }
  }
}

__global__ void ForEachFoundKernel(DeviceTableRef ref, const Key* keys, uint64_t n, int op,
                                   const int64_t* next_use, uint8_t* found) {
  for (uint64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const uint64_t s = ref.Find(keys[i]);
    if (found != nullptr) found[i] = s != kNoSlot;
    if (s != kNoSlot) ref.ApplyOp(op, s, next_use != nullptr ? next_use[i] : 0);
  }
}

// Push, step 1: slot of every key; a missing key fails the whole call.
__global__ void LocateKernel(DeviceTableRef ref, const Key* keys, uint64_t n, uint32_t* slot_of,
                             uint64_t* counters) {
  for (uint64_t i = GlobalIndex(); i < n; i += GridStride()) {
    slot_of[i] = ref.Locate(keys[i]);
    if (slot_of[i] == kNoSlot32) RecordFailure(counters, i);
  }
}

// Step 2: one representative index per distinct slot.
__global__ void ElectKernel(uint64_t n, const uint32_t* slot_of, uint32_t* owner,
                            const uint64_t* counters) {
  if (counters[kBatchFailed] != 0) return;
  for (uint64_t i = GlobalIndex(); i < n; i += GridStride()) {
    detail::AtomicMax(&owner[slot_of[i]], static_cast<uint32_t>(i + 1));
  }
}

// Step 3: representatives take a dense group id u.
__global__ void CompactKernel(uint64_t n, const uint32_t* slot_of, const uint32_t* owner,
                              uint32_t* unique_slots, uint64_t* counters) {
  if (counters[kBatchFailed] != 0) return;
  for (uint64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const uint32_t s = slot_of[i];
    if (owner[s] != i + 1) continue;
    const uint64_t u = detail::AtomicAdd(&counters[kScratch0], uint64_t{1});
    unique_slots[u] = s;
  }
}

// Step 4: owner[slot] becomes the group id + 1.
__global__ void RelabelKernel(const uint32_t* unique_slots, uint32_t* owner,
                              const uint64_t* counters) {
  if (counters[kBatchFailed] != 0) return;
  const uint64_t groups = counters[kScratch0];
  for (uint64_t u = GlobalIndex(); u < groups; u += GridStride()) {
    owner[unique_slots[u]] = static_cast<uint32_t>(u + 1);
  }
}

// Step 5: sum gradients per group (order of duplicates unspecified).
__global__ void SumKernel(uint64_t n, uint32_t dim, const uint32_t* slot_of, const uint32_t* owner,
                          const float* grads, float* sums, const uint64_t* counters) {
  if (counters[kBatchFailed] != 0) return;
  const uint64_t total = n * dim;
  for (uint64_t e = GlobalIndex(); e < total; e += GridStride()) {
    const uint64_t i = e / dim;
    const uint64_t u = owner[slot_of[i]] - 1;
    atomicAdd(&sums[u * dim + e % dim], grads[e]);
  }
}

// Step 6: the optimizer, once per distinct key, a tile per key: lane 0
// does the row part, the lanes share the elements; clears the scratch.
__global__ void ApplyKernel(DeviceTableRef ref, OptimizerOptions opt, const uint32_t* unique_slots,
                            uint32_t* owner, const float* sums, const uint64_t* counters) {
  if (counters[kBatchFailed] != 0) return;
  namespace cg = cooperative_groups;
  const auto tile = cg::tiled_partition<kKeyTile>(cg::this_thread_block());
  const uint32_t lane = tile.thread_rank();
  const uint64_t tiles = GridStride() / kKeyTile;
  const uint64_t groups = counters[kScratch0];
  for (uint64_t u = GlobalIndex() / kKeyTile; u < groups; u += tiles) {
    const uint32_t s = unique_slots[u];
    float* row = ref.Row(s);
    const float* g = sums + u * ref.dim;
    RowStep r;
    if (lane == 0) r = BeginRowStep(opt, ref.dim, row, g);
    r.bias1 = tile.shfl(r.bias1, 0);
    r.bias2 = tile.shfl(r.bias2, 0);
    r.denom = tile.shfl(r.denom, 0);
    for (uint32_t i = lane; i < ref.dim; i += kKeyTile) ApplyElement(opt, ref.dim, row, g[i], i, r);
    if (lane == 0) {
      ref.dirty[s] = 1;
      owner[s] = 0;
    }
  }
}

// Moves the running call's failures into the sticky async error record.
__global__ void FinishCallKernel(const Key* keys, uint64_t n, int op, uint64_t* counters) {
  const uint64_t failed = counters[kBatchFailed];
  if (failed != 0 && counters[kErrCode] == 0) {
    counters[kErrCode] = op == 2 ? 2 : 1;
    counters[kErrCount] = failed;
    counters[kErrKey] = keys[counters[kBatchFirst]];
    counters[kErrBatch] = n;
    counters[kErrOp] = static_cast<uint64_t>(op);
  }
}

__device__ inline uint64_t OrderedNextUse(const DeviceTableRef& ref, uint64_t s) {
  return static_cast<uint64_t>(ref.next_use[s]) ^ (uint64_t{1} << 63);
}

// Radix select: histogram of one 8-bit digit among candidates whose higher
// digits equal `prefix` (under `mask`).
__global__ void HistogramKernel(DeviceTableRef ref, uint64_t prefix, uint64_t mask, int shift,
                                uint64_t* hist) {
  __shared__ uint32_t local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const uint64_t slots = ref.slots();
  for (uint64_t s = GlobalIndex(); s < slots; s += GridStride()) {
    if (!ref.Evictable(s)) continue;
    const uint64_t u = OrderedNextUse(ref, s);
    if ((u & mask) == prefix) atomicAdd(&local[(u >> shift) & 255], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x) {
    if (local[b] != 0) detail::AtomicAdd(&hist[b], static_cast<uint64_t>(local[b]));
  }
}

// Exports candidates above the threshold, and `ties` of those equal to it,
// packed from 0 (greater ones first), and frees their slots.
__global__ void EvictKernel(DeviceTableRef ref, uint64_t threshold, bool all, uint64_t greater,
                            uint64_t ties, RowBatch out, uint64_t* counters) {
  const uint64_t slots = ref.slots();
  for (uint64_t s = GlobalIndex(); s < slots; s += GridStride()) {
    if (!ref.Evictable(s)) continue;
    const uint64_t u = OrderedNextUse(ref, s);
    uint64_t pos;
    if (all || u > threshold) {
      pos = detail::AtomicAdd(&counters[kScratch0 + 1], uint64_t{1});
    } else if (u == threshold) {
      const uint64_t t = detail::AtomicAdd(&counters[kScratch0 + 2], uint64_t{1});
      if (t >= ties) continue;
      pos = greater + t;
    } else {
      continue;
    }
    ref.Export(s, out, pos);
    (void)ref.Release(s);
  }
}

// Copies the next uses of unpinned rows above the threshold (every unpinned
// row with `all`) to out, packed from 0 in no order.
__global__ void CollectNextUsesKernel(DeviceTableRef ref, uint64_t threshold, bool all,
                                      int64_t* out, uint64_t* counters) {
  const uint64_t slots = ref.slots();
  for (uint64_t s = GlobalIndex(); s < slots; s += GridStride()) {
    if (!ref.Evictable(s)) continue;
    if (!all && OrderedNextUse(ref, s) <= threshold) continue;
    out[detail::AtomicAdd(&counters[kScratch0], uint64_t{1})] = ref.next_use[s];
  }
}

__global__ void ExportRangeKernel(DeviceTableRef ref, uint64_t begin, uint64_t end, RowBatch out,
                                  uint64_t* counters) {
  for (uint64_t s = begin + GlobalIndex(); s < end; s += GridStride()) {
    if (!ref.Occupied(s)) continue;
    const uint64_t pos = detail::AtomicAdd(&counters[kScratch0], uint64_t{1});
    ref.Export(s, out, pos);
  }
}

}  // namespace

Status DeviceTable::GpuInit() { return detail::GpuSetDevice(options_.gpu_device); }

void DeviceTable::GpuRelease() {}

// Resets the running call's failure record and scratch words.
__global__ void BeginCallKernel(uint64_t* counters) {
  counters[kBatchFailed] = 0;
  counters[kBatchFirst] = ~uint64_t{0};
  counters[kScratch0] = 0;
  counters[kScratch0 + 1] = 0;
  counters[kScratch0 + 2] = 0;
}

static Status BeginCall(uint64_t* counters, void* stream) {
  BeginCallKernel<<<1, 1, 0, S(stream)>>>(counters);
  return LaunchStatus("BeginCallKernel");
}

Status DeviceTable::GpuFind(const Key* keys, uint64_t n, float* out, uint32_t out_floats,
                            uint8_t* found, void* stream) {
  if (n == 0) return Status::Ok();
  FindKernel<<<Blocks(n * kKeyTile), kBlockThreads, 0, S(stream)>>>(ref_, keys, n, out, out_floats,
                                                                    found);
  return LaunchStatus("FindKernel");
}

Status DeviceTable::GpuFindTouch(const TouchBatch& batch, uint64_t* missing, void* stream) {
  uint64_t* c = counters_.data();
  STRATA_RETURN_IF_ERROR(BeginCall(c, stream));
  FindTouchKernel<<<Blocks(batch.n * kKeyTile), kBlockThreads, 0, S(stream)>>>(ref_, batch, c);
  STRATA_RETURN_IF_ERROR(LaunchStatus("FindTouchKernel"));
  STRATA_RETURN_IF_ERROR(detail::GpuCopy(host_word_.data(), c + kBatchFailed, sizeof(uint64_t),
                                         detail::GpuCopyKind::kDeviceToHost, stream));
  STRATA_RETURN_IF_ERROR(detail::GpuSync(stream));
  *missing = *host_word_.data();
  return Status::Ok();
}

Status DeviceTable::GpuFindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                                    int64_t next_use, void* stream) {
  if (n == 0) return Status::Ok();
  uint64_t* c = counters_.data();
  STRATA_RETURN_IF_ERROR(BeginCall(c, stream));
  const unsigned tiles = Blocks(n * kKeyTile);
  FindOrInsertKernel<<<tiles, kBlockThreads, 0, S(stream)>>>(ref_, options_.initializer,
                                                             options_.optimizer, keys, n, inserted,
                                                             next_use, slot_of_.data(), c);
  PublishGatherKernel<<<tiles, kBlockThreads, 0, S(stream)>>>(ref_, n, slot_of_.data(), inserted,
                                                              values);
  FinishCallKernel<<<1, 1, 0, S(stream)>>>(keys, n, 0, c);
  return LaunchStatus("FindOrInsert kernels");
}

Status DeviceTable::GpuInsertOrAssign(const Key* keys, uint64_t n, const float* rows,
                                      const int64_t* next_use, const uint8_t* dirty, void* stream) {
  if (n == 0) return Status::Ok();
  uint64_t* c = counters_.data();
  STRATA_RETURN_IF_ERROR(BeginCall(c, stream));
  const unsigned tiles = Blocks(n * kKeyTile);
  ClaimOwnersKernel<<<tiles, kBlockThreads, 0, S(stream)>>>(ref_, keys, n, slot_of_.data(),
                                                            owner_.data(), c);
  AssignOwnedKernel<<<tiles, kBlockThreads, 0, S(stream)>>>(ref_, n, slot_of_.data(), owner_.data(),
                                                            rows, next_use, dirty);
  FinishCallKernel<<<1, 1, 0, S(stream)>>>(keys, n, 1, c);
  return LaunchStatus("InsertOrAssign kernels");
}

Status DeviceTable::GpuForEachFound(const Key* keys, uint64_t n, int op, const int64_t* next_use,
                                    uint8_t* found, void* stream) {
  if (n == 0) return Status::Ok();
  ForEachFoundKernel<<<Blocks(n), kBlockThreads, 0, S(stream)>>>(ref_, keys, n, op, next_use,
                                                                 found);
  return LaunchStatus("ForEachFoundKernel");
}

Status DeviceTable::GpuPush(const Key* keys, uint64_t n, const float* grads, void* stream) {
  if (n == 0) return Status::Ok();
  const uint32_t dim = options_.dim;
  if (grad_sums_.size() < n * dim) {
    STRATA_RETURN_IF_ERROR(RunnerSync(Runner::kGpu, stream));
    STRATA_RETURN_IF_ERROR(grad_sums_.Allocate(Runner::kGpu, n * dim));
    STRATA_RETURN_IF_ERROR(unique_slots_.Allocate(Runner::kGpu, n));
  }
  uint64_t* c = counters_.data();
  uint32_t* slot_of = slot_of_.data();
  uint32_t* owner = owner_.data();
  STRATA_RETURN_IF_ERROR(BeginCall(c, stream));
  STRATA_RETURN_IF_ERROR(detail::GpuMemset(grad_sums_.data(), 0, sizeof(float) * n * dim, stream));
  const unsigned blocks = Blocks(n);
  LocateKernel<<<blocks, kBlockThreads, 0, S(stream)>>>(ref_, keys, n, slot_of, c);
  ElectKernel<<<blocks, kBlockThreads, 0, S(stream)>>>(n, slot_of, owner, c);
  CompactKernel<<<blocks, kBlockThreads, 0, S(stream)>>>(n, slot_of, owner, unique_slots_.data(),
                                                         c);
  RelabelKernel<<<blocks, kBlockThreads, 0, S(stream)>>>(unique_slots_.data(), owner, c);
  SumKernel<<<Blocks(n * dim), kBlockThreads, 0, S(stream)>>>(n, dim, slot_of, owner, grads,
                                                              grad_sums_.data(), c);
  ApplyKernel<<<Blocks(n * kKeyTile), kBlockThreads, 0, S(stream)>>>(
      ref_, options_.optimizer, unique_slots_.data(), owner, grad_sums_.data(), c);
  FinishCallKernel<<<1, 1, 0, S(stream)>>>(keys, n, 2, c);
  return LaunchStatus("Push kernels");
}

// The rows of grads holding a NaN or an infinity, one thread per row:
// counted, and the lowest kept, as a call's failures.
__global__ void FindNonFiniteKernel(const float* grads, uint64_t n, uint32_t dim,
                                    uint64_t* counters) {
  for (uint64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const float* g = grads + i * dim;
    bool finite = true;
    for (uint32_t d = 0; d < dim; ++d) finite &= isfinite(g[d]);
    if (!finite) RecordFailure(counters, i);
  }
}

Status DeviceTable::GpuFindNonFinite(const float* grads, uint64_t n, uint64_t* rows,
                                     uint64_t* first_index, void* stream) {
  uint64_t* c = counters_.data();
  STRATA_RETURN_IF_ERROR(BeginCall(c, stream));
  FindNonFiniteKernel<<<Blocks(n), kBlockThreads, 0, S(stream)>>>(grads, n, options_.dim, c);
  STRATA_RETURN_IF_ERROR(LaunchStatus("FindNonFiniteKernel"));
  static_assert(kBatchFirst == kBatchFailed + 1);
  STRATA_RETURN_IF_ERROR(detail::GpuCopy(host_word_.data(), c + kBatchFailed, 2 * sizeof(uint64_t),
                                         detail::GpuCopyKind::kDeviceToHost, stream));
  STRATA_RETURN_IF_ERROR(detail::GpuSync(stream));
  *rows = host_word_.data()[0];
  if (*rows > 0) *first_index = host_word_.data()[1];
  return Status::Ok();
}

Status DeviceTable::GpuSelect(uint64_t k, uint64_t* threshold, uint64_t* greater, uint64_t* total) {
  uint64_t* c = counters_.data();
  const unsigned blocks = Blocks(ref_.slots());
  uint64_t prefix = 0, mask = 0, remaining = k;
  uint64_t hist[256];
  *total = 0;
  for (int pass = 0; pass < 8; ++pass) {
    const int shift = 56 - 8 * pass;
    STRATA_RETURN_IF_ERROR(detail::GpuMemset(c + kHist, 0, sizeof(hist), nullptr));
    HistogramKernel<<<blocks, kBlockThreads>>>(ref_, prefix, mask, shift, c + kHist);
    STRATA_RETURN_IF_ERROR(LaunchStatus("HistogramKernel"));
    STRATA_RETURN_IF_ERROR(detail::GpuCopy(hist, c + kHist, sizeof(hist),
                                           detail::GpuCopyKind::kDeviceToHost, nullptr));
    if (pass == 0) {
      for (uint64_t h : hist) *total += h;
      if (*total <= k) break;  // everything unpinned is selected
    }
    int digit = 255;
    for (; digit > 0; --digit) {
      if (hist[digit] >= remaining) break;
      remaining -= hist[digit];
    }
    prefix |= static_cast<uint64_t>(digit) << shift;
    mask |= uint64_t{255} << shift;
  }
  *threshold = prefix;
  *greater = *total <= k ? *total : k - remaining;
  return Status::Ok();
}

Status DeviceTable::GpuEvict(uint64_t k, RowBatch* out) {
  uint64_t threshold = 0, greater = 0, total = 0;
  STRATA_RETURN_IF_ERROR(GpuSelect(k, &threshold, &greater, &total));
  uint64_t* c = counters_.data();
  const bool all = total <= k;
  STRATA_RETURN_IF_ERROR(detail::GpuMemset(c + kScratch0, 0, sizeof(uint64_t) * 3, nullptr));
  EvictKernel<<<Blocks(ref_.slots()), kBlockThreads>>>(ref_, threshold, all, greater,
                                                       all ? 0 : k - greater, *out, c);
  STRATA_RETURN_IF_ERROR(LaunchStatus("EvictKernel"));
  STRATA_RETURN_IF_ERROR(detail::GpuSync(nullptr));
  out->count = all ? total : k;
  return Status::Ok();
}

Status DeviceTable::GpuLargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count) {
  uint64_t threshold = 0, greater = 0, total = 0;
  STRATA_RETURN_IF_ERROR(GpuSelect(k, &threshold, &greater, &total));
  const bool all = total <= k;
  if (selected_next_use_.size() < greater) {
    STRATA_RETURN_IF_ERROR(selected_next_use_.Allocate(Runner::kGpu, std::max(greater, k)));
  }
  uint64_t* c = counters_.data();
  if (greater > 0) {
    STRATA_RETURN_IF_ERROR(detail::GpuMemset(c + kScratch0, 0, sizeof(uint64_t), nullptr));
    CollectNextUsesKernel<<<Blocks(ref_.slots()), kBlockThreads>>>(ref_, threshold, all,
                                                                   selected_next_use_.data(), c);
    STRATA_RETURN_IF_ERROR(LaunchStatus("CollectNextUsesKernel"));
    STRATA_RETURN_IF_ERROR(detail::GpuCopy(out_host, selected_next_use_.data(),
                                           greater * sizeof(int64_t),
                                           detail::GpuCopyKind::kDeviceToHost, nullptr));
  }
  // The ties at the threshold fill the rest (the ordered form maps back).
  const uint64_t n = all ? total : k;
  const auto tie = static_cast<int64_t>(threshold ^ (uint64_t{1} << 63));
  std::fill(out_host + greater, out_host + n, tie);
  std::sort(out_host, out_host + greater, std::greater<>());
  *count = n;
  return Status::Ok();
}

Status DeviceTable::GpuExportAll(const std::function<Status(const RowBatch&)>& fn) {
  const uint64_t size = GpuSize();
  if (size == 0) return Status::Ok();
  // Each launch scans `chunk` slots, so it finds at most `chunk` rows.
  const uint64_t chunk = std::min(options_.batch_keys_max, std::max<uint64_t>(size, 4096));
  RunnerBuffer<Key> keys;
  RunnerBuffer<float> rows;
  RunnerBuffer<int64_t> next_use;
  RunnerBuffer<uint8_t> dirty;
  STRATA_RETURN_IF_ERROR(keys.Allocate(Runner::kGpu, chunk));
  STRATA_RETURN_IF_ERROR(rows.Allocate(Runner::kGpu, chunk * ref_.row_floats));
  STRATA_RETURN_IF_ERROR(next_use.Allocate(Runner::kGpu, chunk));
  STRATA_RETURN_IF_ERROR(dirty.Allocate(Runner::kGpu, chunk));
  RowBatch batch{keys.data(), rows.data(), next_use.data(), dirty.data(), 0};
  uint64_t* c = counters_.data();
  const uint64_t slots = ref_.slots();
  for (uint64_t begin = 0; begin < slots; begin += chunk) {
    const uint64_t end = std::min(slots, begin + chunk);
    STRATA_RETURN_IF_ERROR(detail::GpuMemset(c + kScratch0, 0, sizeof(uint64_t), nullptr));
    ExportRangeKernel<<<Blocks(end - begin), kBlockThreads>>>(ref_, begin, end, batch, c);
    STRATA_RETURN_IF_ERROR(LaunchStatus("ExportRangeKernel"));
    STRATA_RETURN_IF_ERROR(detail::GpuCopy(&batch.count, c + kScratch0, sizeof(uint64_t),
                                           detail::GpuCopyKind::kDeviceToHost, nullptr));
    if (batch.count > 0) STRATA_RETURN_IF_ERROR(fn(batch));
  }
  return Status::Ok();
}

Status DeviceTable::GpuSynchronize(void* stream) {
  STRATA_RETURN_IF_ERROR(detail::GpuSync(stream));
  uint64_t err[5];
  STRATA_RETURN_IF_ERROR(detail::GpuCopy(err, counters_.data() + kErrCode, sizeof(err),
                                         detail::GpuCopyKind::kDeviceToHost, nullptr));
  if (err[0] == 0) return Status::Ok();
  STRATA_RETURN_IF_ERROR(detail::GpuMemset(counters_.data() + kErrCode, 0, sizeof(err), nullptr));
  STRATA_RETURN_IF_ERROR(detail::GpuSync(nullptr));
  static const char* kOps[] = {"FindOrInsert", "InsertOrAssign", "Push"};
  const char* op = kOps[err[4] < 3 ? err[4] : 0];
  if (err[0] == 2) return NotResident(op, err[1], err[2]);
  return NoRoom(op, err[1], err[3], err[2]);
}

uint64_t DeviceTable::GpuSize() const {
  uint64_t size = 0;
  if (!detail::GpuCopy(&size, counters_.data() + kSize, sizeof(size),
                       detail::GpuCopyKind::kDeviceToHost, nullptr)
           .ok()) {
    return 0;
  }
  return size;
}

}  // namespace strata::kernels
