// strata-test-labels: unit
// The arena's pages follow MPOL_INTERLEAVE over every node the process may
// use, checked page by page with get_mempolicy(MPOL_F_ADDR).
#include <gtest/gtest.h>
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "storage/dram/dram_arena.h"
#include "storage/dram/dram_cache.h"
#include "tests/storage/dram/dram_test_util.h"

namespace strata::storage {
namespace {

// Probes the kernel independently of the code under test: can this process
// set MPOL_INTERLEAVE on a mapping at all?
std::string NumaUnsupportedReason() {
  if (numa_available() < 0) return "libnuma reports no NUMA support on this kernel";
  const size_t bytes = 1 << 16;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return "mmap failed";
  unsigned long mask = 1;
  long rc = mbind(p, bytes, MPOL_INTERLEAVE, &mask, sizeof(mask) * 8, 0);
  int err = errno;
  munmap(p, bytes);
  if (rc != 0) return std::string("mbind(MPOL_INTERLEAVE) refused: ") + std::strerror(err);
  return "";
}

// The policy of the page holding `addr` and its node mask.
void ExpectInterleaved(const void* addr) {
  int mode = -1;
  std::vector<unsigned long> mask(16);
  long rc = get_mempolicy(&mode, mask.data(), mask.size() * sizeof(unsigned long) * 8,
                          const_cast<void*>(addr), MPOL_F_ADDR);
  ASSERT_EQ(rc, 0) << std::strerror(errno);
  EXPECT_EQ(mode, MPOL_INTERLEAVE) << "page at " << addr;
  struct bitmask* allowed = numa_get_mems_allowed();
  for (int node = 0; node <= numa_max_node(); ++node) {
    bool in_policy = (mask[node / 64] >> (node % 64)) & 1;
    EXPECT_EQ(in_policy, numa_bitmask_isbitset(allowed, node) != 0) << "node " << node;
  }
  numa_bitmask_free(allowed);
}

TEST(DramNumaTest, ArenaPagesAreInterleavedAcrossAllNodes) {
  std::string reason = NumaUnsupportedReason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  const uint64_t slots = 4096;
  const uint32_t slot_bytes = 1024;  // 4 MiB: two huge pages or 1024 small ones
  auto arena = DramArena::Create(slots, slot_bytes, /*huge_pages=*/true);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_TRUE((*arena)->interleaved());
  for (uint64_t slot : {uint64_t{0}, slots / 3, slots / 2, slots - 1}) {
    std::memset((*arena)->Slot(slot), 1, slot_bytes);  // fault the page in
    ExpectInterleaved((*arena)->Slot(slot));
  }
}

TEST(DramNumaTest, CachedRowsLiveOnInterleavedPages) {
  std::string reason = NumaUnsupportedReason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  DramCacheOptions o;
  o.dram_bytes_max = 1 << 22;
  auto made = DramCache::Create(o, {{3, "emb", 256}}, nullptr);
  ASSERT_TRUE(made.ok());
  DramCache& cache = **made;
  EXPECT_TRUE(cache.numa_interleaved());
  std::vector<Key> keys;
  for (Key k = 0; k < 4096; ++k) keys.push_back(k * 977);
  auto rows = testing::MakeRows(keys, 1, 256);
  ASSERT_TRUE(cache.Insert(3, keys, rows, {}, {}).ok());
  // ForEach hands out the rows where they lie in the arena.
  size_t visited = 0;
  ASSERT_TRUE(cache
                  .ForEach(3,
                           [&](Key, std::span<const std::byte> row, bool) {
                             if (visited++ % 257 == 0) ExpectInterleaved(row.data());
                             return Status::Ok();
                           })
                  .ok());
  EXPECT_EQ(visited, keys.size());
}

}  // namespace
}  // namespace strata::storage
