#include "tests/engine/store_test_util.h"

#include <algorithm>

#include "kernels/gpu_runtime.h"
#include "kernels/runner.h"
#include "strata/version.h"

namespace strata::testing {

namespace {

std::string Name(const StoreCombination& combination) {
  return std::string(combination.gpu ? "Gpu" : "Host") +
         (combination.backend == SsdBackend::kNative ? "Native" : "RocksDb");
}

// Floats of a batch of `keys` of `table`; 0 for a table the store lacks
// (the call is then expected to fail, naming it).
size_t BatchFloats(const Store& store, TableId table, std::span<const Key> keys) {
  const std::vector<TableOptions>& tables = store.Tables();
  return table < tables.size() ? keys.size() * tables[table].dim : 0;
}

// Device memory for `floats` floats (at least one, so an empty batch has a
// valid pointer).
Status Allocate(kernels::RunnerBuffer<float>* buffer, size_t floats) {
  return buffer->Allocate(kernels::Runner::kGpu, std::max<size_t>(floats, 1));
}

}  // namespace

std::string StoreCombinationName(const ::testing::TestParamInfo<StoreCombination>& info) {
  return Name(info.param);
}

void PrintTo(const StoreCombination& combination, std::ostream* out) { *out << Name(combination); }

void StoreFixture::SetUp() {
  if (GetParam().gpu && VisibleGpuCount() == 0) {
    GTEST_SKIP() << "T0 on the GPU: no CUDA device visible" << kernels::CudaBuildInfo();
  }
}

StoreOptions StoreFixture::Options(uint64_t device_rows, uint64_t dram_rows,
                                   const std::string& name) const {
  StoreOptions o;
  o.dir = dir_.File(name);
  o.device_rows_max = device_rows;
  o.dram_rows_max = dram_rows;
  o.ssd_backend = GetParam().backend;
  o.use_gpu = GetParam().gpu;
  o.planner_round_us = 50;
  return o;
}

std::unique_ptr<Store> StoreFixture::Open(const StoreOptions& options,
                                          const std::vector<TableOptions>& tables) {
  auto store = Store::Open(options, tables);
  if (!store.ok()) {
    ADD_FAILURE() << "Store::Open(" << options.dir << "): " << store.status().ToString();
    return nullptr;
  }
  EXPECT_EQ((*store)->Stats().t0_on_gpu, options.use_gpu) << "T0 runs elsewhere than asked";
  return std::move(store).value();
}

Status StoreFixture::Pull(Store& store, WorkerId worker, TableId table, std::span<const Key> keys,
                          float* out) {
  if (!GetParam().gpu) return store.Pull(worker, table, keys, out);
  const size_t floats = BatchFloats(store, table, keys);
  kernels::RunnerBuffer<float> device_out;
  STRATA_RETURN_IF_ERROR(Allocate(&device_out, floats));
  STRATA_RETURN_IF_ERROR(store.Pull(worker, table, keys, device_out.data()));
  return kernels::RunnerCopyOut(kernels::Runner::kGpu, out, device_out.data(),
                                floats * sizeof(float));
}

Status StoreFixture::Push(Store& store, WorkerId worker, TableId table, std::span<const Key> keys,
                          const float* grads) {
  if (!GetParam().gpu) return store.Push(worker, table, keys, grads);
  const size_t floats = BatchFloats(store, table, keys);
  kernels::RunnerBuffer<float> device_grads;
  STRATA_RETURN_IF_ERROR(Allocate(&device_grads, floats));
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(kernels::Runner::kGpu, device_grads.data(), grads,
                                               floats * sizeof(float)));
  return store.Push(worker, table, keys, device_grads.data());
}

std::map<Key, std::vector<float>> ScanRows(Store& store, TableId table) {
  std::map<Key, std::vector<float>> rows;
  Status s = store.ScanTable(table, [&](Key k, std::span<const float> v) {
    EXPECT_TRUE(rows.try_emplace(k, v.begin(), v.end()).second) << "key " << k << " scanned twice";
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return rows;
}

std::vector<TableOptions> SgdTables(int n, uint32_t dim, float learning_rate,
                                    Initializer initializer) {
  std::vector<TableOptions> tables;
  for (int i = 0; i < n; ++i) {
    TableOptions t;
    t.name = "t" + std::to_string(i);
    t.dim = dim;
    t.optimizer.kind = Optimizer::kSgd;
    t.optimizer.learning_rate = learning_rate;
    t.initializer = initializer;
    t.init_scale = 0.1f;
    tables.push_back(t);
  }
  return tables;
}

std::vector<Key> KeyRange(Key from, size_t n) {
  std::vector<Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = from + i;
  return keys;
}

}  // namespace strata::testing
