// strata-test-labels: integration
// strata-test-timeout: 300
// SSD faults (EIO, ENOSPC) injected through StoreOptions::faults surface as
// errors, change nothing, and a retry succeeds: no update is lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <span>
#include <unordered_map>

#include "strata/store.h"

namespace strata {
namespace {

TEST(StoreFaultTest, InjectedSsdErrorsAreRetriedWithoutLoss) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("strata_fault_test_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = 32;
  o.dram_rows_max = 48;
  o.use_gpu = false;
  o.faults = {.eio_probability = 0.05, .enospc_probability = 0.02, .seed = 11};
  TableOptions t;
  t.name = "faulty";
  t.dim = 2;
  t.expected_rows = 300;  // one key range: a checkpoint seals one head
  t.optimizer.kind = Optimizer::kSgd;
  t.optimizer.learning_rate = -1.0f;  // gradient 1 adds 1
  t.initializer = Initializer::kZeros;
  auto opened = Store::Open(o, {t});
  for (int attempt = 0; attempt < 100 && opened.status().IsIOError(); ++attempt) {
    opened = Store::Open(o, {t});  // a fault may hit the directory's creation too
  }
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto store = std::move(opened).value();
  WorkerId w = *store->RegisterWorker();

  std::unordered_map<Key, int64_t> pushes;
  std::mt19937_64 rng(5);
  uint64_t errors = 0;
  auto retry = [&](const std::function<Status()>& op) {
    for (int attempt = 0; attempt < 1000; ++attempt) {
      Status s = op();
      if (s.ok()) return;
      ASSERT_TRUE(s.IsIOError()) << s.ToString();
      ++errors;
    }
    FAIL() << "no success in 1000 attempts";
  };
  for (int step = 0; step < 300; ++step) {
    std::vector<Key> keys(1 + rng() % 12);
    for (auto& k : keys) k = rng() % 300;
    std::vector<float> out(keys.size() * 2), grads(keys.size() * 2, 1.0f);
    retry([&] { return store->Pull(w, 0, keys, out.data()); });
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(out[i * 2], float(pushes[keys[i]])) << "key " << keys[i] << " step " << step;
    }
    retry([&] { return store->Push(w, 0, keys, grads.data()); });
    for (Key k : keys) pushes[k]++;
    if (step % 100 == 99) retry([&] { return store->Checkpoint(); });
  }
  EXPECT_GT(errors, 0u);  // the faults did fire
  std::vector<Key> all;
  for (auto& [k, n] : pushes) all.push_back(k);
  // In pulls of 12 keys, as the steps: each key read from the SSD tier is a
  // read call that fails with probability 0.07.
  std::vector<float> out(all.size() * 2);
  for (size_t i = 0; i < all.size(); i += 12) {
    const std::span<const Key> part(all.data() + i, std::min<size_t>(12, all.size() - i));
    retry([&] { return store->Pull(w, 0, part, out.data() + i * 2); });
  }
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(out[i * 2], float(pushes[all[i]]));
  store.reset();
  std::filesystem::remove_all(dir);
}

TEST(StoreFaultTest, BadFaultOptionsAreRejectedBeforeAnythingIsCreated) {
  StoreOptions o;
  o.dir = (std::filesystem::temp_directory_path() / "strata_fault_test_bad").string();
  std::filesystem::remove_all(o.dir);
  TableOptions t;
  t.name = "x";
  o.faults.eio_probability = 7;
  auto r = Store::Open(o, {t});
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("StoreOptions.faults.eio_probability"), std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(o.dir));

  o.faults = {.delay_us = kFaultDelayUsMax + 1};
  r = Store::Open(o, {t});
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("delay_us"), std::string::npos) << r.status().ToString();

  o.faults = {.eio_probability = 0.1};
  o.ssd_backend = SsdBackend::kRocksDb;
  r = Store::Open(o, {t});
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("native"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(o.dir));
}

}  // namespace
}  // namespace strata
