// strata-test-labels: integration
// strata-test-timeout: 300
// The Store end to end on the host runner: values against a model, tiering
// transparency, intents, pins, checkpoints, errors and concurrent workers.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>
#include <unordered_map>

#include "strata/store.h"

namespace strata {
namespace {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("strata_store_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::vector<TableOptions> SgdTables(int n, uint32_t dim, float lr = 0.5f) {
  std::vector<TableOptions> tables;
  for (int i = 0; i < n; ++i) {
    TableOptions t;
    t.name = "t" + std::to_string(i);
    t.dim = dim;
    t.optimizer.kind = Optimizer::kSgd;
    t.optimizer.learning_rate = lr;
    t.initializer = Initializer::kUniform;
    t.init_scale = 0.1f;
    tables.push_back(t);
  }
  return tables;
}

StoreOptions Tiny(const std::string& dir, uint64_t device_rows, uint64_t dram_rows) {
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = device_rows;
  o.dram_rows_max = dram_rows;
  o.use_gpu = false;
  o.planner_round_us = 50;
  return o;
}

std::unique_ptr<Store> OpenOrDie(const StoreOptions& o, const std::vector<TableOptions>& t) {
  auto r = Store::Open(o, t);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// SGD model: the first pull of a key fixes its value; every push subtracts
// lr * the summed gradients.
struct SgdModel {
  float lr;
  uint32_t dim;
  std::unordered_map<Key, std::vector<float>> rows;

  void CheckPull(std::span<const Key> keys, const std::vector<float>& out) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, fresh] = rows.try_emplace(keys[i]);
      if (fresh) {
        it->second.assign(out.begin() + i * dim, out.begin() + (i + 1) * dim);
        continue;
      }
      for (uint32_t d = 0; d < dim; ++d) {
        ASSERT_NEAR(out[i * dim + d], it->second[d], 1e-4) << "key " << keys[i] << " dim " << d;
      }
    }
  }
  void ApplyPush(std::span<const Key> keys, const std::vector<float>& grads) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& row = rows.at(keys[i]);
      for (uint32_t d = 0; d < dim; ++d) row[d] -= lr * grads[i * dim + d];
    }
  }
};

TEST(StoreTest, OpenRejectsBadOptionsClearly) {
  TempDir dir;
  auto tables = SgdTables(2, 4);
  StoreOptions o = Tiny(dir.path(), 1024, 1024);
  o.dir = "";
  EXPECT_TRUE(Store::Open(o, tables).status().IsInvalidArgument());
  o = Tiny(dir.path(), 1024, 1024);
  auto dup = tables;
  dup[1].name = dup[0].name;
  auto r = Store::Open(o, dup);
  ASSERT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("t0"), std::string::npos) << r.status().ToString();
  auto bad_dim = tables;
  bad_dim[1].dim = 0;
  r = Store::Open(o, bad_dim);
  ASSERT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("t1"), std::string::npos) << r.status().ToString();
  o.device_rows_max = 3;
  EXPECT_TRUE(Store::Open(o, tables).status().IsInvalidArgument());
  EXPECT_TRUE(Store::Open(o, {}).status().IsInvalidArgument());
  // Tier sizes whose bytes would overflow (a CLI's "-1" read as 2^64 - 1).
  for (auto [device, dram] : {std::pair{UINT64_MAX, uint64_t{1024}},
                              {uint64_t{1024}, UINT64_MAX},
                              {kTierRowsMax + 1, uint64_t{1024}}}) {
    o = Tiny(dir.path(), device, dram);
    r = Store::Open(o, tables);
    ASSERT_TRUE(r.status().IsInvalidArgument()) << device << " " << dram;
    EXPECT_NE(r.status().message().find("at most"), std::string::npos) << r.status().ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ssd"));
}

TEST(StoreTest, CallsWithBadArgumentsFailAndChangeNothing) {
  TempDir dir;
  auto store = OpenOrDie(Tiny(dir.path(), 1024, 1024), SgdTables(1, 4));
  ASSERT_TRUE(store);
  std::vector<Key> keys{1, 2, 3};
  std::vector<float> out(keys.size() * 4);
  EXPECT_TRUE(store->Pull(0, 0, keys, out.data()).IsInvalidArgument());  // no worker yet
  auto w = store->RegisterWorker();
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(store->Pull(*w, 7, keys, out.data()).IsInvalidArgument());
  EXPECT_TRUE(store->Pull(*w, 0, keys, nullptr).IsInvalidArgument());
  EXPECT_TRUE(store->Intent(*w, 0, keys, 5, 5).IsInvalidArgument());
  EXPECT_TRUE(store->Intent(*w, 9, keys, 0, 1).IsInvalidArgument());
  EXPECT_TRUE(store->FindTable("nope").status().IsNotFound());
  EXPECT_EQ(store->Stats().pulls, 0u);
  ASSERT_TRUE(store->Close().ok());
  EXPECT_TRUE(store->Pull(*w, 0, keys, out.data()).IsFailedPrecondition());
}

TEST(StoreTest, RowsAreDeterministicAndExtremeKeysWork) {
  TempDir a, b;
  auto tables = SgdTables(2, 8);
  auto small = OpenOrDie(Tiny(a.path(), 32, 64), tables);
  auto big = OpenOrDie(Tiny(b.path(), 1 << 14, 1 << 14), tables);
  ASSERT_TRUE(small && big);
  WorkerId ws = *small->RegisterWorker(), wb = *big->RegisterWorker();
  std::vector<Key> keys{0, ~Key{0}, 1, 42, Key{1} << 63};
  std::vector<float> x(keys.size() * 8), y(keys.size() * 8);
  for (TableId t = 0; t < 2; ++t) {
    ASSERT_TRUE(small->Pull(ws, t, keys, x.data()).ok());
    ASSERT_TRUE(big->Pull(wb, t, keys, y.data()).ok());
    EXPECT_EQ(x, y);
    bool nonzero = false;
    for (float v : x) nonzero |= v != 0.0f;
    EXPECT_TRUE(nonzero);
  }
}

// The same random workload against tiny tiers (all three tiers busy) and
// against an SGD model.
TEST(StoreTest, TinyTiersMatchModelUnderRandomWorkload) {
  TempDir dir;
  const uint32_t dim = 4;
  auto store = OpenOrDie(Tiny(dir.path(), 2 * 32, 48), SgdTables(2, dim));
  ASSERT_TRUE(store);
  WorkerId w = *store->RegisterWorker();
  std::vector<SgdModel> models(2, SgdModel{0.5f, dim, {}});
  std::mt19937_64 rng(7);
  for (int step = 0; step < 300; ++step) {
    TableId t = rng() % 2;
    std::vector<Key> keys(1 + rng() % 40);
    for (auto& k : keys) k = rng() % 400;
    std::vector<float> out(keys.size() * dim);
    ASSERT_TRUE(store->Pull(w, t, keys, out.data()).ok()) << step;
    models[t].CheckPull(keys, out);
    std::vector<float> grads(keys.size() * dim);
    for (auto& g : grads) g = float(int(rng() % 200) - 100) / 1000.0f;
    ASSERT_TRUE(store->Push(w, t, keys, grads.data()).ok()) << step;
    models[t].ApplyPush(keys, grads);
    ASSERT_TRUE(store->AdvanceClock(w).ok());
  }
  StoreStats s = store->Stats();
  EXPECT_GT(s.t0.evictions, 0u);
  EXPECT_GT(s.t1.hits, 0u);
  EXPECT_GT(s.ssd_row_reads, 0u);
  // Every row, wherever it lives, equals the model.
  for (TableId t = 0; t < 2; ++t) {
    size_t seen = 0;
    ASSERT_TRUE(store->ScanTable(t, [&](Key k, std::span<const float> v) -> Status {
      ++seen;
      auto it = models[t].rows.find(k);
      if (it == models[t].rows.end()) return Status::Internal("unexpected key");
      for (uint32_t d = 0; d < dim; ++d) {
        if (std::abs(v[d] - it->second[d]) > 1e-4) return Status::Internal("value differs");
      }
      return Status::Ok();
    }).ok());
    EXPECT_EQ(seen, models[t].rows.size());
  }
}

TEST(StoreTest, BatchLargerThanDeviceTierIsDoneInChunks) {
  TempDir dir;
  const uint32_t dim = 2;
  auto store = OpenOrDie(Tiny(dir.path(), 64, 128), SgdTables(1, dim));
  ASSERT_TRUE(store);
  WorkerId w = *store->RegisterWorker();
  SgdModel model{0.5f, dim, {}};
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k * 7919);
  keys.push_back(keys[3]);  // a duplicate
  std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.25f);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(store->Pull(w, 0, keys, out.data()).ok());
    model.CheckPull(keys, out);
    ASSERT_TRUE(store->Push(w, 0, keys, grads.data()).ok());
    model.ApplyPush(keys, grads);
  }
}

TEST(StoreTest, IntentsPrefetchSoPullsDoNotStall) {
  TempDir dir;
  auto store = OpenOrDie(Tiny(dir.path(), 256, 1024), SgdTables(1, 4));
  ASSERT_TRUE(store);
  WorkerId w = *store->RegisterWorker();
  std::vector<Key> keys{10, 20, 30, 40, 50};
  std::vector<float> out(keys.size() * 4);
  ASSERT_TRUE(store->Intent(w, 0, keys, 0, 1).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  StoreStats before = store->Stats();
  EXPECT_EQ(before.prefetched_rows, keys.size());
  ASSERT_TRUE(store->Pull(w, 0, keys, out.data()).ok());
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls, before.stall_pulls);
  EXPECT_EQ(after.t0.hits - before.t0.hits, keys.size());
  // An intent whose window has passed is ignored and counted.
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->Intent(w, 0, keys, 0, 1).ok());
  EXPECT_EQ(store->Stats().expired_intents, keys.size());
}

TEST(StoreTest, PinnedIntentRowsSurviveEvictionPressure) {
  TempDir dir;
  auto store = OpenOrDie(Tiny(dir.path(), 64, 4096), SgdTables(1, 4));
  ASSERT_TRUE(store);
  WorkerId w = *store->RegisterWorker();
  std::vector<Key> wanted{1000, 1001, 1002, 1003};
  ASSERT_TRUE(store->Intent(w, 0, wanted, 0, 100).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  // Many other keys flow through T0.
  std::vector<Key> other(40);
  std::vector<float> out(40 * 4);
  for (int r = 0; r < 20; ++r) {
    for (size_t i = 0; i < other.size(); ++i) other[i] = r * 100 + i;
    ASSERT_TRUE(store->Pull(w, 0, other, out.data()).ok());
  }
  StoreStats before = store->Stats();
  EXPECT_GT(before.t0.evictions, 0u);
  std::vector<float> got(wanted.size() * 4);
  ASSERT_TRUE(store->Pull(w, 0, wanted, got.data()).ok());
  EXPECT_EQ(store->Stats().stall_pulls, before.stall_pulls);
}

TEST(StoreTest, CheckpointAndReopenRestoreExactly) {
  TempDir dir;
  const uint32_t dim = 4;
  auto tables = SgdTables(2, dim);
  std::vector<Key> keys;
  for (Key k = 0; k < 300; ++k) keys.push_back(k * 13);
  std::vector<float> at_checkpoint(keys.size() * dim);
  {
    auto store = OpenOrDie(Tiny(dir.path(), 64, 128), tables);
    ASSERT_TRUE(store);
    WorkerId w = *store->RegisterWorker();
    std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.1f);
    ASSERT_TRUE(store->Pull(w, 1, keys, out.data()).ok());
    ASSERT_TRUE(store->Push(w, 1, keys, grads.data()).ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->Checkpoint().ok());
    ASSERT_TRUE(store->Pull(w, 1, keys, at_checkpoint.data()).ok());
    // Changes after the checkpoint are not part of it.
    ASSERT_TRUE(store->Push(w, 1, keys, grads.data()).ok());
    ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = OpenOrDie(Tiny(dir.path(), 64, 128), tables);
  ASSERT_TRUE(store);
  WorkerId w = *store->RegisterWorker();
  EXPECT_EQ(*store->CurrentClock(w), 3);
  std::vector<float> out(keys.size() * dim);
  ASSERT_TRUE(store->Pull(w, 1, keys, out.data()).ok());
  EXPECT_EQ(out, at_checkpoint);
  ASSERT_TRUE(store->Close().ok());

  auto other = tables;
  other[0].dim = 8;
  auto r = Store::Open(Tiny(dir.path(), 64, 128), other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t0"), std::string::npos) << r.status().ToString();
}

TEST(StoreTest, ConcurrentWorkersKeepEveryUpdate) {
  TempDir dir;
  const uint32_t dim = 4;
  const int kWorkers = 4;
  auto store = OpenOrDie(Tiny(dir.path(), 2 * 64, 256), SgdTables(2, dim));
  ASSERT_TRUE(store);
  std::vector<WorkerId> ids;
  for (int i = 0; i < kWorkers; ++i) ids.push_back(*store->RegisterWorker());
  std::vector<std::vector<SgdModel>> models(kWorkers,
                                            std::vector<SgdModel>(2, SgdModel{0.5f, dim, {}}));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(100 + i);
      for (int step = 0; step < 150; ++step) {
        TableId t = rng() % 2;
        std::vector<Key> keys(1 + rng() % 24);
        for (auto& k : keys) k = (rng() % 200) * kWorkers + i;  // disjoint per worker
        std::vector<Key> ahead = keys;
        if (!store->Intent(ids[i], t, ahead, step + 1, step + 2).ok()) failures++;
        std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.01f * (i + 1));
        if (!store->Pull(ids[i], t, keys, out.data()).ok()) failures++;
        models[i][t].CheckPull(keys, out);
        if (!store->Push(ids[i], t, keys, grads.data()).ok()) failures++;
        models[i][t].ApplyPush(keys, grads);
        if (!store->AdvanceClock(ids[i]).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kWorkers; ++i) {
    for (TableId t = 0; t < 2; ++t) {
      std::vector<Key> keys;
      for (auto& [k, v] : models[i][t].rows) keys.push_back(k);
      std::vector<float> out(keys.size() * dim);
      ASSERT_TRUE(store->Pull(ids[i], t, keys, out.data()).ok());
      models[i][t].CheckPull(keys, out);
    }
  }
}

}  // namespace
}  // namespace strata
