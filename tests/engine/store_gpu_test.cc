// strata-test-labels: gpu integration
// strata-test-timeout: 300
// The Store with T0 on the GPU: the same workload gives the same rows as on
// the host runner, with tiny tiers so rows move through all three tiers.
// Skipped where no GPU is visible.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "kernels/runner.h"
#include "strata/store.h"
#include "strata/version.h"

namespace strata {
namespace {

std::unique_ptr<Store> OpenStore(const std::string& dir, bool use_gpu) {
  std::filesystem::remove_all(dir);
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = 2 * 64;
  o.dram_rows_max = 128;
  o.use_gpu = use_gpu;
  std::vector<TableOptions> tables(2);
  for (int i = 0; i < 2; ++i) {
    tables[i].name = "gpu" + std::to_string(i);
    tables[i].dim = 8;
    tables[i].optimizer.kind = i == 0 ? Optimizer::kAdagrad : Optimizer::kAdam;
  }
  auto r = Store::Open(o, tables);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(StoreGpuTest, GpuTierMatchesHostRunner) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU visible";
  auto base = std::filesystem::temp_directory_path();
  auto gpu = OpenStore((base / ("strata_gpu_" + std::to_string(getpid()))).string(), true);
  auto host = OpenStore((base / ("strata_host_" + std::to_string(getpid()))).string(), false);
  ASSERT_TRUE(gpu && host);
  ASSERT_TRUE(gpu->Stats().t0_on_gpu);
  ASSERT_FALSE(host->Stats().t0_on_gpu);
  WorkerId wg = *gpu->RegisterWorker(0), wh = *host->RegisterWorker();
  const kernels::Runner r = kernels::Runner::kGpu;
  kernels::RunnerBuffer<float> d_out, d_grads;
  ASSERT_TRUE(d_out.Allocate(r, 256 * 8).ok());
  ASSERT_TRUE(d_grads.Allocate(r, 256 * 8).ok());
  std::mt19937_64 rng(9);
  for (int step = 0; step < 200; ++step) {
    TableId t = rng() % 2;
    std::vector<Key> keys(1 + rng() % 100);
    for (auto& k : keys) k = rng() % 600;
    if (step % 3 == 0) {
      ASSERT_TRUE(gpu->Intent(wg, t, keys, step + 1, step + 2).ok());
      ASSERT_TRUE(host->Intent(wh, t, keys, step + 1, step + 2).ok());
    }
    std::vector<float> want(keys.size() * 8), got(keys.size() * 8), grads(keys.size() * 8);
    for (auto& g : grads) g = float(int(rng() % 200) - 100) / 100.0f;
    ASSERT_TRUE(host->Pull(wh, t, keys, want.data()).ok());
    ASSERT_TRUE(gpu->Pull(wg, t, keys, d_out.data()).ok());
    ASSERT_TRUE(kernels::RunnerCopyOut(r, got.data(), d_out.data(), got.size() * 4).ok());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5) << "step " << step << " key " << keys[i / 8];
    }
    ASSERT_TRUE(kernels::RunnerCopyIn(r, d_grads.data(), grads.data(), grads.size() * 4).ok());
    ASSERT_TRUE(host->Push(wh, t, keys, grads.data()).ok());
    ASSERT_TRUE(gpu->Push(wg, t, keys, d_grads.data()).ok());
    ASSERT_TRUE(gpu->AdvanceClock(wg).ok());
    ASSERT_TRUE(host->AdvanceClock(wh).ok());
  }
  StoreStats s = gpu->Stats();
  EXPECT_GT(s.t0.evictions, 0u) << s.ToString();
  EXPECT_GT(s.ssd_row_reads, 0u) << s.ToString();
  ASSERT_TRUE(gpu->Checkpoint().ok());
}

}  // namespace
}  // namespace strata
