// strata-test-labels: unit
#include "bench/replay_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "strata/trace.h"
#include "tests/bench/model_store.h"
#include "tests/trace/test_util.h"
#include "trace/generator.h"
#include "trace/info.h"

namespace strata::bench {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ModelStore;
using trace::testing::TempDir;

std::string SmallTrace(const TempDir& dir, uint32_t workers = 1) {
  trace::GenOptions g;
  g.cardinalities = {300, 40, 5};
  g.exponents = {1.1, 1.1, 0.5};
  g.hotness = {2, 1, 1};
  g.batch_size = 32;
  g.batches = 24;
  g.workers = workers;
  const std::string path = dir.Path("small.trace");
  EXPECT_TRUE(trace::Generate(g, path).ok());
  return path;
}

struct Harness {
  ModelStore::Knobs knobs;
  int opened = 0;
  StoreOpener Opener() {
    return [this](const StoreOptions&,
                  const std::vector<TableOptions>& tables) -> Result<std::unique_ptr<Store>> {
      ++opened;
      return std::unique_ptr<Store>(std::make_unique<ModelStore>(tables, knobs));
    };
  }
};

ReplayOptions Options(const TempDir& dir, const std::string& trace) {
  ReplayOptions o;
  o.trace = trace;
  o.dir = dir.Path("store");
  o.verify = true;
  o.dim = 8;
  return o;
}

TEST(ReplayDriverTest, VerifiedRunCoversEveryBatchKeyAndRow) {
  for (uint32_t workers : {1u, 4u}) {
    for (bool intents : {true, false}) {
      TempDir dir;
      const std::string trace = SmallTrace(dir, workers);
      auto info = trace::ComputeTraceInfo(trace);
      ASSERT_TRUE(info.ok());
      Harness h;
      ReplayOptions o = Options(dir, trace);
      o.workers = workers;
      o.intents = intents;
      auto r = RunReplay(o, h.Opener(), {});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->batches, 24u);
      EXPECT_EQ(r->pulls, info->keys);
      // Every pull is checked, but for a rare concurrent first pull with workers.
      if (workers == 1) {
        EXPECT_EQ(r->verified_rows, info->keys);
      }
      EXPECT_GT(r->verified_rows, info->keys * 9 / 10);
      EXPECT_EQ(r->scanned_rows, info->unique_keys);
      EXPECT_EQ(r->stats.intents > 0, intents);
    }
  }
}

TEST(ReplayDriverTest, IntentsRunExactlyLookaheadAhead) {
  for (uint64_t lookahead : {1, 3, 8}) {
    TempDir dir;
    Harness h;
    h.knobs.log = std::make_shared<ModelStore::IntentLog>();
    ReplayOptions o = Options(dir, SmallTrace(dir));
    o.lookahead = lookahead;
    o.verify = false;
    auto r = RunReplay(o, h.Opener(), {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto& log = *h.knobs.log;
    ASSERT_FALSE(log.lead_counts.empty());
    // The first batches are signalled at clock 0 (leads 0..lookahead); every
    // later one exactly `lookahead` batches ahead.
    EXPECT_EQ(log.lead_counts.rbegin()->first, static_cast<int64_t>(lookahead));
    EXPECT_GE(log.lead_counts.begin()->first, 0) << "an intent arrived after its batch";
    uint64_t full = 0, total = 0;
    for (auto [lead, n] : log.lead_counts) {
      total += n;
      if (lead == static_cast<int64_t>(lookahead)) full += n;
    }
    EXPECT_EQ(total - full, lookahead * 3);  // 3 tables per batch
    EXPECT_EQ(full, (24 - lookahead) * 3);
  }
}

// A run cut short by --batches verifies against the pushes of the batches it
// ran, not the whole trace's.
TEST(ReplayDriverTest, VerifiedRunOfThePrefixOfATrace) {
  TempDir dir;
  Harness h;
  ReplayOptions o = Options(dir, SmallTrace(dir));
  o.batches_max = 10;
  auto r = RunReplay(o, h.Opener(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches, 10u);
  EXPECT_GT(r->verified_rows, 0u);
}

TEST(ReplayDriverTest, VerifyCatchesALostPush) {
  TempDir dir;
  Harness h;
  h.knobs.lose_push_number = 500;
  auto r = RunReplay(Options(dir, SmallTrace(dir)), h.Opener(), {});
  ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("table t"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(" key "), std::string::npos);
  EXPECT_NE(r.status().message().find(" batch "), std::string::npos);
}

TEST(ReplayDriverTest, VerifyCatchesAWrongRow) {
  TempDir dir;
  Harness h;
  h.knobs.wrong_row_number = 700;
  auto r = RunReplay(Options(dir, SmallTrace(dir)), h.Opener(), {});
  ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
}

// The engine does a Pull larger than T0's room in chunks and fails it whole
// when one chunk meets an I/O error: with a tiny T0 and injected faults a
// large Pull hardly ever got through, and the replay gave up after 1000
// attempts. Pulls that keep failing are split until the parts get through:
// the workers' and, with faults (which the model store ignores), the final
// check's.
TEST(ReplayDriverTest, PullsThatFailWholeAreSplitUntilTheyGetThrough) {
  for (double eio : {0.0, 0.5}) {
    TempDir dir;
    Harness h;
    h.knobs.pull_keys_ok_max = 8;  // every batch pulls 64 keys of table t0
    ReplayOptions o = Options(dir, SmallTrace(dir));
    o.faults.eio_probability = eio;
    auto r = RunReplay(o, h.Opener(), {});
    ASSERT_TRUE(r.ok()) << "eio " << eio << ": " << r.status().ToString();
    EXPECT_EQ(r->batches, 24u);
    EXPECT_GT(r->verified_rows, 0u);
    EXPECT_GT(r->scanned_rows, 0u);
    EXPECT_GT(r->retried_errors, 0u);
  }
}

TEST(ReplayDriverTest, GivingUpNamesTheCallTableAndAttempts) {
  TempDir dir;
  Harness h;
  h.knobs.failing_table = 1;
  ReplayOptions o = Options(dir, SmallTrace(dir));
  o.attempts_max = 30;
  const auto start = std::chrono::steady_clock::now();
  auto r = RunReplay(o, h.Opener(), {});
  ASSERT_TRUE(r.status().IsIOError()) << r.status().ToString();
  // The call, table and keys, the attempts, the last error, where.
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("Pull of table t1 ("), HasSubstr("gave up after 30 attempts"),
                    HasSubstr("injected: Pull of"), HasSubstr("worker 0 batch 0")));
  // Backoff is bounded: 30 attempts wait well under a second.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ReplayDriverTest, BadInputChangesNothing) {
  TempDir dir;
  Harness h;
  const std::string trace = SmallTrace(dir);
  // A truncated trace is found before the store is opened.
  auto bytes = trace::testing::ReadBytes(trace);
  trace::testing::WriteBytes(dir.Path("cut.trace"), bytes, bytes.size() - 3);
  ReplayOptions o = Options(dir, dir.Path("cut.trace"));
  EXPECT_TRUE(RunReplay(o, h.Opener(), {}).status().IsCorruption());
  EXPECT_EQ(h.opened, 0);
  // A store directory in use is refused.
  std::filesystem::create_directories(dir.Path("store"));
  trace::testing::WriteText(dir.Path("store/x"), "data");
  o.trace = trace;
  EXPECT_TRUE(RunReplay(o, h.Opener(), {}).status().IsInvalidArgument());
  EXPECT_EQ(h.opened, 0);
  o.dir = dir.Path("fresh");
  o.lookahead = 0;
  EXPECT_TRUE(RunReplay(o, h.Opener(), {}).status().IsInvalidArgument());
}

}  // namespace
}  // namespace strata::bench
