#include "examples/train/batch_loader.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "examples/train/trainer.h"
#include "tests/examples/train/memory_store.h"
#include "tests/util/scratch_dir.h"

namespace strata::train {
namespace {

// 10 rows, 2 tables; table 1 missing on odd rows.
Dataset TinyDataset() {
  Dataset d;
  d.categorical_names = {"a", "b"};
  d.dense_names = {"x"};
  for (uint32_t r = 0; r < 10; ++r) {
    d.labels.push_back(static_cast<float>(r % 2));
    d.dense.push_back(static_cast<float>(r));
    d.keys.push_back(r % 3);
    d.present.push_back(1);
    d.keys.push_back(r % 2 == 0 ? 100 + r % 4 : 0);
    d.present.push_back(r % 2 == 0 ? 1 : 0);
  }
  return d;
}

std::vector<std::unique_ptr<Batch>> Drain(BatchLoader* loader) {
  std::vector<std::unique_ptr<Batch>> out;
  while (true) {
    auto next = loader->Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !*next) break;
    out.push_back(std::move(*next));
  }
  return out;
}

TEST(BatchLoaderTest, ScheduleSplitsByRowOrder) {
  LoaderOptions o;
  o.batch_rows = 3;
  o.epochs = 2;
  o.validation_fraction = 0.2;
  auto s = MakeSchedule(10, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->train_rows, 8u);
  EXPECT_EQ(s->validation_rows, 2u);
  EXPECT_EQ(s->train_batches, 3u);
  EXPECT_EQ(s->validation_batches, 1u);
  EXPECT_EQ(s->total_batches(), 8u);
  o.batch_rows = 0;
  EXPECT_TRUE(MakeSchedule(10, o).status().IsInvalidArgument());
  o.batch_rows = 3;
  o.lookahead_batches = 0;
  EXPECT_TRUE(MakeSchedule(10, o).status().IsInvalidArgument());
  o.lookahead_batches = 1;
  o.validation_fraction = 1.0;
  EXPECT_TRUE(MakeSchedule(10, o).status().IsInvalidArgument());
}

TEST(BatchLoaderTest, BatchesCoverRowsAndKeysMatchTheData) {
  const Dataset d = TinyDataset();
  LoaderOptions o;
  o.batch_rows = 3;
  o.epochs = 2;
  o.intents = false;
  BatchLoader loader(d, {0, 1}, o, nullptr, 0, 5, nullptr, nullptr);
  ASSERT_TRUE(loader.Start().ok());
  auto batches = Drain(&loader);
  ASSERT_EQ(batches.size(), 8u);
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<uint32_t> train_rows, val_rows;
    for (size_t i = epoch * 4; i < epoch * 4 + 4; ++i) {
      const Batch& b = *batches[i];
      EXPECT_EQ(b.clock, static_cast<Clock>(5 + i));  // consecutive clocks from first_clock
      EXPECT_EQ(b.epoch, epoch);
      (b.train ? train_rows : val_rows)
          .insert((b.train ? train_rows : val_rows).end(), b.rows.begin(), b.rows.end());
      for (size_t r = 0; r < b.size(); ++r) {
        const uint32_t row = b.rows[r];
        EXPECT_EQ(b.labels[r], d.labels[row]);
        EXPECT_EQ(b.dense[r], d.dense[row]);
        for (size_t t = 0; t < 2; ++t) {
          if (!d.Present(row, t)) {
            EXPECT_EQ(b.Slot(r, t), -1);
          } else {
            EXPECT_EQ(b.unique_keys[t][b.Slot(r, t)], d.KeyAt(row, t));
          }
        }
      }
      for (const auto& keys : b.unique_keys) {
        auto sorted = keys;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
      }
    }
    EXPECT_EQ(val_rows, (std::vector<uint32_t>{8, 9}));  // the last 20%, in order
    std::sort(train_rows.begin(), train_rows.end());
    EXPECT_EQ(train_rows, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  }
}

TEST(BatchLoaderTest, ShuffleFollowsTheSeed) {
  const Dataset d = TinyDataset();
  auto order = [&](uint64_t seed) {
    LoaderOptions o;
    o.batch_rows = 8;
    o.epochs = 1;
    o.intents = false;
    o.seed = seed;
    BatchLoader loader(d, {0, 1}, o, nullptr, 0, 0, nullptr, nullptr);
    EXPECT_TRUE(loader.Start().ok());
    return Drain(&loader)[0]->rows;
  };
  EXPECT_EQ(order(1), order(1));
  EXPECT_NE(order(1), order(2));
}

TEST(BatchLoaderTest, IntentsAnnounceEveryPulledKeyWithinTheLookahead) {
  const Dataset d = TinyDataset();
  FmConfig model;
  model.dim = 2;
  testing::MemoryStore store(MakeTables(d, model));
  auto worker = store.RegisterWorker(-1);
  ASSERT_TRUE(worker.ok());
  std::mutex mu;
  LoaderOptions o;
  o.batch_rows = 2;
  o.epochs = 3;
  o.lookahead_batches = 3;
  strata::testing::ScratchDir dir;
  const std::string trace_path = dir.File("loader.trace");
  trace::TraceHeader header;
  header.tables = {{"a", 0}, {"b", 0}};
  auto writer = trace::TraceWriter::Create(trace_path, header);
  ASSERT_TRUE(writer.ok());
  BatchLoader loader(d, {0, 1}, o, &store, *worker, 0, &mu, writer->get());
  ASSERT_TRUE(loader.Start().ok());
  std::vector<float> out;
  std::vector<std::vector<std::vector<Key>>> pulled;  // per batch, per table
  while (true) {
    auto next = loader.Next();
    ASSERT_TRUE(next.ok());
    if (!*next) break;
    pulled.push_back((*next)->unique_keys);
    std::lock_guard<std::mutex> lock(mu);
    for (TableId t = 0; t < 2; ++t) {
      out.resize((*next)->unique_keys[t].size() * 3);
      Store& base = store;
      ASSERT_TRUE(base.Pull(*worker, t, (*next)->unique_keys[t], out.data()).ok());
    }
    ASSERT_TRUE(store.AdvanceClock(*worker).ok());
  }
  loader.Stop();
  ASSERT_TRUE((*writer)->Finish().ok());
  ASSERT_EQ(pulled.size(), 15u);
  // The trace holds each batch's unique keys at its clock: exactly the keys
  // pulled, in the same order, a table left out when the batch has none.
  Clock clock = 0;
  ASSERT_TRUE(trace::ForEachBatch(trace_path, [&](const trace::TraceBatch& b) {
                EXPECT_EQ(b.clock, clock);
                EXPECT_LT(clock, Clock(pulled.size()));
                if (clock >= Clock(pulled.size())) return Status::Ok();
                std::vector<trace::TraceBatchTable> want;
                for (TableId t = 0; t < 2; ++t) {
                  if (!pulled[clock][t].empty()) want.push_back({t, pulled[clock][t]});
                }
                EXPECT_EQ(b.tables.size(), want.size()) << "batch " << clock;
                for (size_t i = 0; i < std::min(b.tables.size(), want.size()); ++i) {
                  EXPECT_EQ(b.tables[i].table, want[i].table) << "batch " << clock;
                  EXPECT_EQ(b.tables[i].keys, want[i].keys) << "batch " << clock;
                }
                ++clock;
                return Status::Ok();
              }).ok());
  EXPECT_EQ(clock, 15);
  EXPECT_EQ(store.unannounced_pulls(), 0u);
  EXPECT_LE(store.max_intent_lead(), 3);
  EXPECT_FALSE(store.overlapping_calls());
}

}  // namespace
}  // namespace strata::train
