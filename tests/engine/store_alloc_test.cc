// strata-test-labels: integration gpu
// The Pull and Push hot path allocates nothing once its scratch has grown:
// this binary replaces the global operator new to count the calling
// thread's allocations around resident Pulls and Pushes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <random>

#include "kernels/runner.h"
#include "strata/store.h"
#include "tests/engine/store_test_util.h"

namespace {
thread_local bool counting = false;
thread_local uint64_t allocations = 0;

void* Allocate(std::size_t size, std::size_t align) {
  if (counting) ++allocations;
  if (size == 0) size = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (size + align - 1) / align * align)
                : std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return Allocate(size, 0); }
void* operator new[](std::size_t size) { return Allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return Allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return Allocate(size, static_cast<std::size_t>(a));
}
// The nothrow forms too: every allocation and free of the binary pairs
// malloc with free (a sanitizer's own operator new would not).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return Allocate(size, static_cast<std::size_t>(a));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t& tag) noexcept {
  return operator new(size, a, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace strata {
namespace {

using testing::StoreCombination;

class StoreAllocTest : public testing::StoreFixture {
 protected:
  // Allocations on this thread during `rounds` Pull + Push rounds over
  // `batches` (every key resident), after three rounds that grow the scratch.
  uint64_t HotPathAllocations(Store& store, const std::vector<std::vector<Key>>& batches,
                              uint32_t dim) {
    WorkerId w = *store.RegisterWorker();
    const kernels::Runner runner =
        store.Stats().t0_on_gpu ? kernels::Runner::kGpu : kernels::Runner::kHost;
    const size_t n = batches[0].size();
    kernels::RunnerBuffer<float> out, grads;
    EXPECT_TRUE(out.Allocate(runner, n * dim).ok());
    EXPECT_TRUE(grads.Allocate(runner, n * dim).ok());
    EXPECT_TRUE(kernels::RunnerMemset(runner, grads.data(), 0, grads.bytes()).ok());
    for (int warm = 0; warm < 3; ++warm) {
      for (const auto& keys : batches) {
        EXPECT_TRUE(store.Pull(w, 0, keys, out.data()).ok());
        EXPECT_TRUE(store.Push(w, 0, keys, grads.data()).ok());
      }
    }
    const StoreStats before = store.Stats();
    allocations = 0;
    counting = true;
    bool ok = true;
    for (int round = 0; round < 5; ++round) {
      for (const auto& keys : batches) {
        ok = ok && store.Pull(w, 0, keys, out.data()).ok();
        ok = ok && store.Push(w, 0, keys, grads.data()).ok();
      }
    }
    counting = false;
    EXPECT_TRUE(ok);
    const StoreStats after = store.Stats();
    EXPECT_EQ(after.t0.misses, before.t0.misses) << "every key was meant to be resident";
    return allocations;
  }

  std::vector<std::vector<Key>> Batches(size_t n, uint64_t range) {
    std::mt19937_64 rng(11);
    std::vector<std::vector<Key>> batches(4, std::vector<Key>(n));
    for (auto& b : batches) {
      for (Key& k : b) k = rng() % range;  // repeats included
    }
    return batches;
  }
};

TEST_P(StoreAllocTest, ResidentPullAndPushAllocateNothing) {
  auto store = Open(Options(1 << 14, 1 << 14), testing::SgdTables(1, 16));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(HotPathAllocations(*store, Batches(4096, 4096), 16), 0u);
}

// With the LFU fallback every key gets its own next use (the frequency
// sketch), through the per-key path: still nothing allocated.
TEST_P(StoreAllocTest, PerKeyNextUsesAllocateNothing) {
  StoreOptions o = Options(1 << 14, 1 << 14);
  o.fallback_policy = FallbackPolicy::kLfu;
  auto store = Open(o, testing::SgdTables(1, 8));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(HotPathAllocations(*store, Batches(1000, 2000), 8), 0u);
}

INSTANTIATE_TEST_SUITE_P(Runners, StoreAllocTest,
                         ::testing::Values(StoreCombination{false, SsdBackend::kNative},
                                           StoreCombination{true, SsdBackend::kNative}),
                         testing::StoreCombinationName);

}  // namespace
}  // namespace strata
