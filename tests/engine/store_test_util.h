// The fixture of the Store tests: every test runs on the four combinations
// of T0 runner (host thread pool or GPU) and SSD backend (native or
// RocksDB), as a value-parameterised test:
//
//   class StoreTest : public strata::testing::StoreFixture {};
//   TEST_P(StoreTest, Something) { auto store = Open(Options(64, 128), Tables); ... }
//   INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreTest, testing::StoreCombinations(),
//                            testing::StoreCombinationName);
//
// The GPU combinations skip (GTEST_SKIP, with the reason) where no GPU is
// visible. Pull and Push take host memory and copy through device memory
// when T0 is on the GPU, so one test body serves both runners.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "strata/store.h"
#include "tests/util/scratch_dir.h"

namespace strata::testing {

struct StoreCombination {
  bool gpu = false;  // StoreOptions::use_gpu: T0 on the GPU
  SsdBackend backend = SsdBackend::kNative;
};

// "HostNative", "HostRocksDb", "GpuNative", "GpuRocksDb": the test names'
// suffix, so `--gtest_filter='*/HostRocksDb'` picks one combination.
std::string StoreCombinationName(const ::testing::TestParamInfo<StoreCombination>& info);
// The same name in failure messages.
void PrintTo(const StoreCombination& combination, std::ostream* out);

class StoreFixture : public ::testing::TestWithParam<StoreCombination> {
 protected:
  // Skips a GPU combination when no GPU is visible (a derived SetUp calls it
  // first and returns if IsSkipped()).
  void SetUp() override;

  // Options of a store in `name` under the scratch directory, with the
  // combination's runner and backend, tier sizes in rows and a fast planner.
  StoreOptions Options(uint64_t device_rows, uint64_t dram_rows,
                       const std::string& name = "store") const;

  // The opened store, or nullptr after recording the error (callers
  // ASSERT_NE(store, nullptr)). Also checks T0 runs where the combination says.
  std::unique_ptr<Store> Open(const StoreOptions& options, const std::vector<TableOptions>& tables);

  // Store::Pull and Store::Push with `out` and `grads` in host memory
  // (keys.size() x the table's dim floats), through device memory on the GPU.
  [[nodiscard]] Status Pull(Store& store, WorkerId worker, TableId table, std::span<const Key> keys,
                            float* out);
  [[nodiscard]] Status Push(Store& store, WorkerId worker, TableId table, std::span<const Key> keys,
                            const float* grads);

  ScratchDir dir_;
};

// All four combinations, host first.
inline auto StoreCombinations() {
  return ::testing::Values(
      StoreCombination{false, SsdBackend::kNative}, StoreCombination{false, SsdBackend::kRocksDb},
      StoreCombination{true, SsdBackend::kNative}, StoreCombination{true, SsdBackend::kRocksDb});
}

// Every row of `table` by key (Store::ScanTable: each key once, its newest
// copy, wherever it lives); records a failure when the scan fails or yields
// a key twice.
std::map<Key, std::vector<float>> ScanRows(Store& store, TableId table);

// SGD tables "t0", "t1", ... of `dim` floats, uniform initializer.
std::vector<TableOptions> SgdTables(int n, uint32_t dim, float learning_rate = 0.5f,
                                    Initializer initializer = Initializer::kUniform);

// Keys from, from + 1, ..., from + n - 1.
std::vector<Key> KeyRange(Key from, size_t n);

}  // namespace strata::testing
