// Portability layer for code that runs both on the GPU (compiled by nvcc) and
// on the host runner (compiled by the host compiler): the STRATA_HD marker, a
// few atomics with the same meaning on both sides, and range reduction. Keys
// are hashed with MixMurmur64 (base/hash.h, constexpr: callable on the device).
//
// Per-key logic of the kernels module (probing, initializer, optimizers) is
// written once as STRATA_HD functions; CUDA kernels call them on the device,
// the host runner calls them from its thread pool. Without nvcc STRATA_HD is
// empty and the atomics map to std::atomic_ref.
//
// Thread safety: the atomics are the synchronisation; everything else is pure.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__
#else
#define STRATA_HD
#endif

#if !defined(__CUDA_ARCH__)
#include <atomic>
#endif

namespace strata::kernels::detail {

// High 64 bits of a * b (range reduction of a hash onto [0, b)).
STRATA_HD inline uint64_t MulHi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

// A load that may race with atomic writers (no ordering: a stale value is
// acceptable to its callers). On the device ld.relaxed.gpu: a strong load
// served by L2 (never a stale L1 line), with no fence.
STRATA_HD inline uint32_t LoadRelaxed(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  uint32_t v;
  asm volatile("ld.relaxed.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
#else
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
#endif
}

// A store that may race with other stores of the same batch (no ordering;
// any one of the values wins).
STRATA_HD inline void StoreRelaxed(int64_t* p, int64_t v) {
#if defined(__CUDA_ARCH__)
  *p = v;
#else
  std::atomic_ref<int64_t>(*p).store(v, std::memory_order_relaxed);
#endif
}

STRATA_HD inline void StoreRelaxed(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  *p = v;
#else
  std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed);
#endif
}

// Acquire and release at device scope. On sm_90 ld.acquire.gpu is a strong
// load + CCTL.IVALL (the SM's L1 invalidated) and st.release.gpu is
// MEMBAR.ALL.GPU + a strong store; neither is a sequentially consistent
// fence (MEMBAR.SC, what __threadfence() compiles to). The table's hot GPU
// kernels use neither (see the memory-order contract in
// docs/device-table.md); the host runner's FindOrClaim does.
STRATA_HD inline uint32_t AtomicLoadAcquire(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  uint32_t v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
#endif
}

STRATA_HD inline void AtomicStoreRelease(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
#endif
}

// Returns true when *p was `expected` and is now `desired`.
STRATA_HD inline bool AtomicCas(uint32_t* p, uint32_t expected, uint32_t desired) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(p, expected, desired) == expected;
#else
  return std::atomic_ref<uint32_t>(*p).compare_exchange_strong(expected, desired,
                                                               std::memory_order_acq_rel);
#endif
}

STRATA_HD inline uint32_t AtomicAdd(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(p, v);
#else
  return std::atomic_ref<uint32_t>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}

STRATA_HD inline uint64_t AtomicAdd(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  return std::atomic_ref<uint64_t>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}

STRATA_HD inline void AtomicOr(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  atomicOr(p, v);
#else
  std::atomic_ref<uint32_t>(*p).fetch_or(v, std::memory_order_relaxed);
#endif
}

STRATA_HD inline void AtomicMax(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  atomicMax(p, v);
#else
  std::atomic_ref<uint32_t> ref(*p);
  uint32_t cur = ref.load(std::memory_order_relaxed);
  while (cur < v && !ref.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
#endif
}

STRATA_HD inline void AtomicMin(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  atomicMin(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  std::atomic_ref<uint64_t> ref(*p);
  uint64_t cur = ref.load(std::memory_order_relaxed);
  while (cur > v && !ref.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
#endif
}

// Decrements *p unless it is 0; returns the value before.
STRATA_HD inline uint32_t AtomicDecrementToZero(uint32_t* p) {
#if defined(__CUDA_ARCH__)
  uint32_t cur = *reinterpret_cast<volatile uint32_t*>(p);
  while (cur != 0) {
    uint32_t seen = atomicCAS(p, cur, cur - 1);
    if (seen == cur) break;
    cur = seen;
  }
  return cur;
#else
  std::atomic_ref<uint32_t> ref(*p);
  uint32_t cur = ref.load(std::memory_order_relaxed);
  while (cur != 0 && !ref.compare_exchange_weak(cur, cur - 1, std::memory_order_relaxed)) {
  }
  return cur;
#endif
}

}  // namespace strata::kernels::detail
