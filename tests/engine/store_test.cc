// strata-test-labels: integration gpu
// strata-test-timeout: 300
// The Store end to end on each T0 runner and SSD backend: values against a
// model, tiering transparency, intents, pins, checkpoints, errors and
// concurrent workers.
#include "strata/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "tests/engine/store_test_util.h"
#include "tests/util/thread_names.h"

namespace strata {
namespace {

using testing::SgdTables;

class StoreTest : public testing::StoreFixture {};

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

TEST_P(StoreTest, OpenRejectsBadOptionsClearly) {
  auto tables = SgdTables(2, 4);
  StoreOptions o = Options(1024, 1024);
  o.dir = "";
  EXPECT_TRUE(Store::Open(o, tables).status().IsInvalidArgument());
  o = Options(1024, 1024);
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
    o = Options(device, dram);
    r = Store::Open(o, tables);
    ASSERT_TRUE(r.status().IsInvalidArgument()) << device << " " << dram;
    EXPECT_NE(r.status().message().find("at most"), std::string::npos) << r.status().ToString();
  }
  // Nothing was created: not the store's directory, let alone its SSD tier.
  EXPECT_FALSE(std::filesystem::exists(o.dir));
}

TEST_P(StoreTest, CallsWithBadArgumentsFailAndChangeNothing) {
  auto store = Open(Options(1024, 1024), SgdTables(1, 4));
  ASSERT_NE(store, nullptr);
  std::vector<Key> keys{1, 2, 3};
  std::vector<float> out(keys.size() * 4);
  EXPECT_TRUE(Pull(*store, 0, 0, keys, out.data()).IsInvalidArgument());  // no worker yet
  auto w = store->RegisterWorker();
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(Pull(*store, *w, 7, keys, out.data()).IsInvalidArgument());
  EXPECT_TRUE(store->Pull(*w, 0, keys, nullptr).IsInvalidArgument());
  EXPECT_TRUE(store->Push(*w, 0, keys, nullptr).IsInvalidArgument());
  EXPECT_TRUE(store->Intent(*w, 0, keys, 5, 5).IsInvalidArgument());
  EXPECT_TRUE(store->Intent(*w, 9, keys, 0, 1).IsInvalidArgument());
  EXPECT_TRUE(store->FindTable("nope").status().IsNotFound());
  StoreStats s = store->Stats();
  EXPECT_EQ(s.pulls, 0u);
  EXPECT_EQ(s.pushes, 0u);
  EXPECT_EQ(s.intents, 0u);
  EXPECT_EQ(s.t0.rows, 0u);
  EXPECT_EQ(s.t1.rows, 0u);
  ASSERT_TRUE(store->Close().ok());
  EXPECT_TRUE(Pull(*store, *w, 0, keys, out.data()).IsFailedPrecondition());
}

// A row's first value depends on its table and key only: tiers of any size
// give the same rows; the uniform initializer keeps them within its scale.
TEST_P(StoreTest, RowsAreDeterministicAndExtremeKeysWork) {
  const uint32_t dim = 8;
  auto tables = SgdTables(2, dim);
  auto small = Open(Options(32, 64, "small"), tables);
  auto big = Open(Options(1 << 14, 1 << 14, "big"), tables);
  ASSERT_TRUE(small && big);
  WorkerId ws = *small->RegisterWorker(), wb = *big->RegisterWorker();
  std::vector<Key> keys{0, ~Key{0}, 1, 42, Key{1} << 63};
  std::vector<std::vector<float>> rows_of_table;
  for (TableId t = 0; t < 2; ++t) {
    std::vector<float> x(keys.size() * dim), y(keys.size() * dim);
    ASSERT_TRUE(Pull(*small, ws, t, keys, x.data()).ok());
    ASSERT_TRUE(Pull(*big, wb, t, keys, y.data()).ok());
    EXPECT_EQ(x, y);
    for (float v : x) {
      EXPECT_GE(v, -tables[t].init_scale);
      EXPECT_LT(v, tables[t].init_scale);
    }
    std::set<std::vector<float>> distinct;
    for (size_t i = 0; i < keys.size(); ++i) {
      distinct.emplace(x.begin() + i * dim, x.begin() + (i + 1) * dim);
    }
    EXPECT_EQ(distinct.size(), keys.size()) << "two keys of table " << t << " share a row";
    rows_of_table.push_back(x);
  }
  EXPECT_NE(rows_of_table[0], rows_of_table[1]) << "tables must be seeded apart";
}

// The same random workload against tiny tiers (all three tiers busy) and
// against an SGD model.
TEST_P(StoreTest, TinyTiersMatchModelUnderRandomWorkload) {
  const uint32_t dim = 4;
  auto store = Open(Options(2 * 32, 48), SgdTables(2, dim));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<SgdModel> models(2, SgdModel{0.5f, dim, {}});
  std::mt19937_64 rng(7);
  uint64_t keys_sent = 0;
  for (int step = 0; step < 300; ++step) {
    TableId t = rng() % 2;
    std::vector<Key> keys(1 + rng() % 40);
    for (auto& k : keys) k = rng() % 400;
    keys_sent += keys.size();
    std::vector<float> out(keys.size() * dim);
    ASSERT_TRUE(Pull(*store, w, t, keys, out.data()).ok()) << step;
    ASSERT_NO_FATAL_FAILURE(models[t].CheckPull(keys, out));
    std::vector<float> grads(keys.size() * dim);
    for (auto& g : grads) g = float(int(rng() % 200) - 100) / 1000.0f;
    ASSERT_TRUE(Push(*store, w, t, keys, grads.data()).ok()) << step;
    models[t].ApplyPush(keys, grads);
    ASSERT_TRUE(store->AdvanceClock(w).ok());
  }
  StoreStats s = store->Stats();
  EXPECT_EQ(s.pulls, keys_sent);
  EXPECT_EQ(s.pushes, keys_sent);
  // The workload did go through every tier.
  EXPECT_GT(s.t0.evictions, 0u);
  EXPECT_GT(s.t1.hits, 0u);
  EXPECT_GT(s.ssd_row_reads, 0u);
  // Every row, wherever it lives, equals the model.
  for (TableId t = 0; t < 2; ++t) {
    const std::map<Key, std::vector<float>> rows = testing::ScanRows(*store, t);
    EXPECT_EQ(rows.size(), models[t].rows.size());
    for (const auto& [k, v] : rows) {
      auto it = models[t].rows.find(k);
      ASSERT_NE(it, models[t].rows.end()) << "unexpected key " << k;
      for (uint32_t d = 0; d < dim; ++d) EXPECT_NEAR(v[d], it->second[d], 1e-4) << "key " << k;
    }
  }
}

TEST_P(StoreTest, BatchLargerThanDeviceTierIsDoneInChunks) {
  const uint32_t dim = 2;
  auto store = Open(Options(64, 128), SgdTables(1, dim));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  SgdModel model{0.5f, dim, {}};
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k * 7919);
  keys.push_back(keys[3]);  // a duplicate
  std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.25f);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(Pull(*store, w, 0, keys, out.data()).ok());
    ASSERT_NO_FATAL_FAILURE(model.CheckPull(keys, out));
    ASSERT_TRUE(Push(*store, w, 0, keys, grads.data()).ok());
    model.ApplyPush(keys, grads);
  }
  ASSERT_TRUE(Pull(*store, w, 0, keys, out.data()).ok());
  model.CheckPull(keys, out);
}

// A Pull whose batch repeats keys, some resident and some not: every
// occurrence gets its row, each missing key is fetched once (a stall), and
// the lookups add up to the keys pulled. The Push after it finds every key
// resident; a Push of keys T0 lacks brings them in and applies every
// gradient once.
TEST_P(StoreTest, RepeatedKeysTakeTheSlowPathOnlyForMissingOnes) {
  const uint32_t dim = 2;
  auto store = Open(Options(64, 1024), SgdTables(1, dim));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  SgdModel model{0.5f, dim, {}};
  std::vector<Key> warm{1, 2, 3, 4};
  std::vector<float> out(warm.size() * dim);
  ASSERT_TRUE(Pull(*store, w, 0, warm, out.data()).ok());
  ASSERT_NO_FATAL_FAILURE(model.CheckPull(warm, out));

  std::vector<Key> keys{2, 50, 2, 51, 50, 4, 50};  // 50 and 51 are missing
  out.assign(keys.size() * dim, 0.0f);
  StoreStats before = store->Stats();
  ASSERT_TRUE(Pull(*store, w, 0, keys, out.data()).ok());
  ASSERT_NO_FATAL_FAILURE(model.CheckPull(keys, out));
  for (uint32_t d = 0; d < dim; ++d) {
    EXPECT_EQ(out[1 * dim + d], out[4 * dim + d]);  // every 50 the same row
    EXPECT_EQ(out[1 * dim + d], out[6 * dim + d]);
  }
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls - before.stall_pulls, 2u);
  EXPECT_EQ(after.t0.misses - before.t0.misses, 4u);  // three 50s and one 51
  EXPECT_EQ(after.t0.hits - before.t0.hits, 3u);
  EXPECT_EQ(after.pulls - before.pulls, keys.size());

  std::vector<float> grads(keys.size() * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.125f * static_cast<float>(i + 1);
  ASSERT_TRUE(Push(*store, w, 0, keys, grads.data()).ok());
  model.ApplyPush(keys, grads);
  EXPECT_EQ(store->Stats().t0.rows_in, after.t0.rows_in);  // nothing was missing

  // Push first: 70 and 71 were never pulled; 70 twice.
  std::vector<Key> fresh{70, 2, 71, 70};
  std::vector<float> fresh_grads{1, 1, 0.5f, 0.5f, 0.25f, 0.25f, 2, 2};
  std::vector<float> fresh_before(dim);
  ASSERT_TRUE(Pull(*store, w, 0, std::vector<Key>{2}, fresh_before.data()).ok());
  ASSERT_TRUE(Push(*store, w, 0, fresh, fresh_grads.data()).ok());
  auto rows = testing::ScanRows(*store, 0);
  ASSERT_EQ(rows.count(70), 1u);
  ASSERT_EQ(rows.count(71), 1u);
  model.ApplyPush(std::vector<Key>{2}, std::vector<float>{0.5f, 0.5f});
  for (uint32_t d = 0; d < dim; ++d) EXPECT_NEAR(rows[2][d], model.rows.at(2)[d], 1e-6);
  // 70's row moved by exactly lr * (1 + 2) from where a Pull would have found it.
  std::vector<float> seventy(dim);
  ASSERT_TRUE(Pull(*store, w, 0, std::vector<Key>{70}, seventy.data()).ok());
  auto reference = Open(Options(64, 1024, "reference"), SgdTables(1, dim));
  ASSERT_NE(reference, nullptr);
  WorkerId rw = *reference->RegisterWorker();
  std::vector<float> initial(dim);
  ASSERT_TRUE(Pull(*reference, rw, 0, std::vector<Key>{70}, initial.data()).ok());
  for (uint32_t d = 0; d < dim; ++d) EXPECT_NEAR(seventy[d], initial[d] - 0.5f * 3.0f, 1e-6);
}

// With the LFU fallback every key has a next use of its own. A Push of many
// keys T0 lacks, right after a Pull of one key, must not read the Pull's
// next uses (one value) for the Push's keys (ASan reads past them if it
// does), and applies every gradient once.
TEST_P(StoreTest, PushOfMissingKeysAfterSmallPullUsesNoNextUsesOfThePull) {
  const uint32_t dim = 2;
  StoreOptions o = Options(256, 1024);
  o.fallback_policy = FallbackPolicy::kLfu;
  auto store = Open(o, SgdTables(1, dim));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  SgdModel model{0.5f, dim, {}};
  std::vector<float> one(dim);
  ASSERT_TRUE(Pull(*store, w, 0, std::vector<Key>{7}, one.data()).ok());
  ASSERT_NO_FATAL_FAILURE(model.CheckPull(std::vector<Key>{7}, one));

  std::vector<Key> keys;
  for (Key k = 100; k < 300; ++k) keys.push_back(k);
  keys.push_back(7);
  keys.push_back(150);
  std::vector<float> grads(keys.size() * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * static_cast<float>(i % 5 + 1);
  ASSERT_TRUE(Push(*store, w, 0, keys, grads.data()).ok());
  // Keys never pulled start from the initializer: pull them from a second
  // store to know it, then check each moved by lr times its summed gradient.
  auto reference = Open(Options(256, 1024, "reference"), SgdTables(1, dim));
  ASSERT_NE(reference, nullptr);
  WorkerId rw = *reference->RegisterWorker();
  std::vector<Key> distinct(keys.begin(), keys.end() - 2);
  std::vector<float> initial(distinct.size() * dim);
  ASSERT_TRUE(Pull(*reference, rw, 0, distinct, initial.data()).ok());
  for (size_t i = 0; i < distinct.size(); ++i) {
    model.rows[distinct[i]] =
        std::vector<float>(initial.begin() + i * dim, initial.begin() + (i + 1) * dim);
  }
  model.ApplyPush(keys, grads);
  auto rows = testing::ScanRows(*store, 0);
  for (Key k : keys) {
    ASSERT_EQ(rows.count(k), 1u) << "key " << k;
    for (uint32_t d = 0; d < dim; ++d) EXPECT_NEAR(rows[k][d], model.rows.at(k)[d], 1e-6) << k;
  }
}

// T0 evicts more rows at once than all of T1 holds: T1 takes them in pieces
// (its rows go on to SSD), and every value survives the trip.
TEST_P(StoreTest, EvictionLargerThanDramTierGoesThroughIt) {
  const uint32_t dim = 2;
  auto store = Open(Options(64, 8), SgdTables(1, dim));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  SgdModel model{0.5f, dim, {}};
  std::vector<Key> all;
  for (int round = 0; round < 4; ++round) {
    std::vector<Key> keys;
    for (Key k = 0; k < 40; ++k) keys.push_back(round * 1000 + k);
    all.insert(all.end(), keys.begin(), keys.end());
    std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.25f);
    Status s = Pull(*store, w, 0, keys, out.data());
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    ASSERT_NO_FATAL_FAILURE(model.CheckPull(keys, out));
    s = Push(*store, w, 0, keys, grads.data());
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    model.ApplyPush(keys, grads);
  }
  EXPECT_GE(store->Stats().t0.evictions, 3u * 16);
  const std::map<Key, std::vector<float>> rows = testing::ScanRows(*store, 0);
  ASSERT_EQ(rows.size(), all.size());
  for (const auto& [k, v] : rows) {
    for (uint32_t d = 0; d < dim; ++d) EXPECT_NEAR(v[d], model.rows.at(k)[d], 1e-6) << "key " << k;
  }
}

// T0 and T1 together hold device_rows + dram_rows rows: cycling through
// exactly that many rows reads nothing from the SSD once every row exists,
// because the rows moving up from T1 leave their room to the rows T0
// demotes, instead of T1 evicting as many others to take those.
TEST_P(StoreTest, TiersTogetherHoldBothCapacities) {
  auto store = Open(Options(16, 32), SgdTables(1, 4));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(4 * 4);
  uint64_t reads_after_first_pass = 0;
  for (int pass = 0; pass < 4; ++pass) {
    for (Key base = 0; base < 48; base += 4) {
      std::vector<Key> keys{base, base + 1, base + 2, base + 3};
      ASSERT_TRUE(Pull(*store, w, 0, keys, out.data()).ok());
      ASSERT_TRUE(store->AdvanceClock(w).ok());
    }
    if (pass == 0) reads_after_first_pass = store->Stats().ssd_row_reads;
  }
  const StoreStats s = store->Stats();
  EXPECT_EQ(s.ssd_row_reads, reads_after_first_pass);
  EXPECT_EQ(s.t0.rows + s.t1.rows, 48u);
}

TEST_P(StoreTest, IntentsPrefetchSoPullsDoNotStall) {
  auto store = Open(Options(256, 1024), SgdTables(1, 4));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<Key> keys{10, 20, 30, 40, 50};
  std::vector<float> out(keys.size() * 4);
  ASSERT_TRUE(store->Intent(w, 0, keys, 0, 1).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  StoreStats before = store->Stats();
  EXPECT_EQ(before.prefetched_rows, keys.size());
  ASSERT_TRUE(Pull(*store, w, 0, keys, out.data()).ok());
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls, before.stall_pulls);
  EXPECT_EQ(after.t0.hits - before.t0.hits, keys.size());
  // An intent whose window has passed is ignored and counted.
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->Intent(w, 0, keys, 0, 1).ok());
  EXPECT_EQ(store->Stats().expired_intents, keys.size());
}

TEST_P(StoreTest, PinnedIntentRowsSurviveEvictionPressure) {
  auto store = Open(Options(64, 4096), SgdTables(1, 4));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<Key> wanted{1000, 1001, 1002, 1003};
  ASSERT_TRUE(store->Intent(w, 0, wanted, 0, 100).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  // Many other keys flow through T0.
  std::vector<Key> other(40);
  std::vector<float> out(40 * 4);
  for (int r = 0; r < 20; ++r) {
    for (size_t i = 0; i < other.size(); ++i) other[i] = r * 100 + i;
    ASSERT_TRUE(Pull(*store, w, 0, other, out.data()).ok());
  }
  StoreStats before = store->Stats();
  EXPECT_GT(before.t0.evictions, 0u);  // the pressure was real
  std::vector<float> got(wanted.size() * 4);
  ASSERT_TRUE(Pull(*store, w, 0, wanted, got.data()).ok());
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls, before.stall_pulls);
  EXPECT_EQ(after.t0.hits - before.t0.hits, wanted.size());
}

TEST_P(StoreTest, CheckpointAndReopenRestoreExactly) {
  const uint32_t dim = 4;
  auto tables = SgdTables(2, dim);
  std::vector<Key> keys;
  for (Key k = 0; k < 300; ++k) keys.push_back(k * 13);
  std::vector<float> at_checkpoint(keys.size() * dim);
  {
    auto store = Open(Options(64, 128), tables);
    ASSERT_NE(store, nullptr);
    WorkerId w = *store->RegisterWorker();
    std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 0.1f);
    ASSERT_TRUE(Pull(*store, w, 1, keys, out.data()).ok());
    ASSERT_TRUE(Push(*store, w, 1, keys, grads.data()).ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->Checkpoint().ok());
    ASSERT_TRUE(Pull(*store, w, 1, keys, at_checkpoint.data()).ok());
    // Changes after the checkpoint are not part of it.
    ASSERT_TRUE(Push(*store, w, 1, keys, grads.data()).ok());
    ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = Open(Options(64, 128), tables);
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  EXPECT_EQ(*store->CurrentClock(w), 3);
  std::vector<float> out(keys.size() * dim);
  ASSERT_TRUE(Pull(*store, w, 1, keys, out.data()).ok());
  EXPECT_EQ(out, at_checkpoint);
  ASSERT_TRUE(store->Close().ok());

  auto other = tables;
  other[0].dim = 8;
  auto r = Store::Open(Options(64, 128), other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t0"), std::string::npos) << r.status().ToString();
}

TEST_P(StoreTest, ConcurrentWorkersKeepEveryUpdate) {
  const uint32_t dim = 4;
  const int kWorkers = 4;
  auto store = Open(Options(2 * 64, 256), SgdTables(2, dim));
  ASSERT_NE(store, nullptr);
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
        if (!Pull(*store, ids[i], t, keys, out.data()).ok()) failures++;
        models[i][t].CheckPull(keys, out);
        if (HasFatalFailure()) return;
        if (!Push(*store, ids[i], t, keys, grads.data()).ok()) failures++;
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
      ASSERT_TRUE(Pull(*store, ids[i], t, keys, out.data()).ok());
      models[i][t].CheckPull(keys, out);
    }
  }
}

// The Store's background threads carry names (top -H, perf, gdb), and go
// with the Store.
TEST_P(StoreTest, BackgroundThreadsAreNamedAndEndWithTheStore) {
  auto count = [](const std::string& name) {
    std::vector<std::string> names = testing::ThreadNames();
    return std::count(names.begin(), names.end(), name);
  };
  ASSERT_EQ(count("strata-plan"), 0);
  auto store = Open(Options(64, 128), SgdTables(1, 4));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(count("strata-plan"), 1);
  EXPECT_EQ(count("strata-clean"), 1);
  store.reset();
  EXPECT_EQ(count("strata-plan"), 0);
  EXPECT_EQ(count("strata-clean"), 0);
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreTest, testing::StoreCombinations(),
                         testing::StoreCombinationName);

}  // namespace
}  // namespace strata
