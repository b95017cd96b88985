// strata-test-labels: integration
// strata-test-timeout: 600
//
// End to end: `strata trace gen`, `trace opt` and `strata replay --verify`
// against the real Store, with tiers so small that rows move through all
// three (T0, T1, SSD), with and without intents, one and four workers, and
// under injected faults.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::bench {
namespace {

using testing::RunCli;

nlohmann::json RunJson(const std::string& args) {
  std::string out;
  const int rc = RunCli(args + " --json", &out);
  EXPECT_EQ(rc, 0) << args << "\n" << out;
  const size_t brace = out.find('{');
  if (rc != 0 || brace == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(out.substr(brace));
}

class ReplayCliTest : public testing::CliTraceTest {
 protected:
  ReplayCliTest()
      : CliTraceTest("--cardinalities 3000,500,40 --batch-size 64 --batches 60 --workers 4") {}
};

// Every pulled key is checked (verified_rows: the trace's keys) and the final
// scan finds exactly its distinct keys, whatever the lookahead and workers.
TEST_F(ReplayCliTest, VerifiesThroughAllThreeTiersWithAndWithoutIntents) {
  const auto info = RunJson("trace info " + trace_);
  ASSERT_FALSE(info.empty());
  ASSERT_EQ(info["keys"], 60 * 64 * 3);  // batches x rows x tables
  uint64_t unique_keys = 0;
  for (const auto& table : info["tables"]) unique_keys += table["unique_keys"].get<uint64_t>();
  int run = 0;
  for (const char* mode : {"--lookahead 2", "--lookahead 16", "--no-intents"}) {
    for (int workers : {1, 4}) {
      const std::string store = dir_.File("s" + std::to_string(run++));
      auto j = RunJson("replay " + trace_ + " --dir " + store +
                       " --device-rows 300 --dram-rows 400 --dim 8 --verify --workers " +
                       std::to_string(workers) + " " + mode);
      ASSERT_FALSE(j.empty());
      EXPECT_EQ(j["batches"], 60);
      EXPECT_EQ(j["verified_rows"], info["keys"]) << mode;
      EXPECT_EQ(j["scanned_rows"], unique_keys) << mode;
      // The run went through every tier.
      EXPECT_GT(j["t0_hits"].get<uint64_t>(), 0u) << mode;
      EXPECT_GT(j["t1_hits"].get<uint64_t>(), 0u) << mode;
      EXPECT_GT(j["ssd_row_reads"].get<uint64_t>(), 0u) << mode;
      EXPECT_GT(j["ssd_row_writes"].get<uint64_t>(), 0u) << mode;
    }
  }
}

TEST_F(ReplayCliTest, IntentsReadNearTheHorizonFloor) {
  const uint64_t lookahead = 8;
  auto replay = RunJson("replay " + trace_ + " --dir " + dir_.File("s") +
                        " --device-rows 300 --dram-rows 400 --dim 8 --workers 1 --lookahead " +
                        std::to_string(lookahead));
  ASSERT_FALSE(replay.empty());
  const uint64_t cache = replay["cache_rows"];
  auto opt = RunJson("trace opt " + trace_ + " --cache-rows " + std::to_string(cache) +
                     " --lookahead " + std::to_string(lookahead));
  ASSERT_FALSE(opt.empty());
  const double reads = replay["ssd_row_reads"].get<double>();
  // ssd_row_reads counts first touches too, like the *_misses. The store can
  // do no better than MIN (0.99: T0 may hold a few rows more while quota
  // moves between tables), and with intents stays near what the horizon
  // policy needs (measured 1.04x on this trace).
  EXPECT_GE(reads, opt["opt_misses"].get<double>() * 0.99);
  EXPECT_LE(reads, 1.15 * opt["horizon_misses"].get<double>())
      << "ssd_row_reads " << reads << " horizon_misses " << opt["horizon_misses"];
}

TEST_F(ReplayCliTest, CorruptTraceFailsNamingTheOffsetAndCreatesNoStore) {
  auto bytes = trace::testing::ReadBytes(trace_);
  bytes[bytes.size() / 2] ^= 0x40;
  trace::testing::WriteBytes(dir_.File("bad.trace"), bytes, bytes.size());
  std::string out;
  EXPECT_NE(RunCli("replay " + dir_.File("bad.trace") + " --dir " + dir_.File("s") +
                       " --device-rows 300 --dram-rows 400",
                   &out),
            0);
  EXPECT_NE(out.find("byte offset"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("s")));
}

// The SSD tier's write counts: with --checkpoint the log's merges are paid
// inside the run; the log writes fewer device bytes than leaf rewrites of
// the same rows. Bad values of the new flags change nothing.
TEST_F(ReplayCliTest, SsdWriteCountsWithAndWithoutTheWriteLog) {
  double bytes[2] = {0, 0};
  for (int with_log = 0; with_log < 2; ++with_log) {
    auto j = RunJson("replay " + trace_ + " --dir " + dir_.File("w" + std::to_string(with_log)) +
                     " --device-rows 300 --dram-rows 400 --dim 8 --no-intents --checkpoint " +
                     "--ssd-format 1 --ssd-write-log-fraction " + (with_log ? "0.25" : "0"));
    ASSERT_FALSE(j.empty());
    EXPECT_EQ(j["checkpoint_at_end"], true);
    const double user = j["ssd_user_bytes_written"].get<double>();
    bytes[with_log] = j["ssd_bytes_written"].get<double>();
    ASSERT_GT(user, 0);
    EXPECT_GE(bytes[with_log], user);
    EXPECT_DOUBLE_EQ(j["ssd_write_amp"].get<double>(), bytes[with_log] / user);
  }
  EXPECT_LT(bytes[1], bytes[0]) << "log " << bytes[1] << ", leaves " << bytes[0];
  for (const char* bad : {"--ssd-write-log-fraction -1", "--ssd-write-log-fraction 17",
                          "--ssd-write-log-fraction abc", "--checkpoint --cluster"}) {
    std::string out;
    EXPECT_NE(RunCli("replay " + trace_ + " --dir " + dir_.File("bad") +
                         " --device-rows 300 --dram-rows 400 " + bad,
                     &out),
              0)
        << bad;
    EXPECT_NE(
        out.find(std::string(bad).find("fraction") != std::string::npos ? "--ssd-write-log-fraction"
                                                                        : "--checkpoint"),
        std::string::npos)
        << bad << ": " << out;
    EXPECT_FALSE(std::filesystem::exists(dir_.File("bad"))) << bad;
  }
}

// A tiny T0 (128 rows) under injected read and write errors: the final
// check's Pulls of 4096 keys are done by the engine in ~37 chunks and fail
// whole on one chunk's error, so the replay gave up after 1000 attempts with
// no context; split and backed off, the run converges in about a second.
TEST(ReplayCliFaultsTest, TinyDeviceTierUnderFaultsConverges) {
  strata::testing::ScratchDir dir;
  const std::string trace = dir.File("one.trace");
  std::string out;
  ASSERT_EQ(RunCli("trace gen --out " + trace +
                       " --cardinalities 5000 --exponent 0 --batch-size 1024 --batches 20",
                   &out),
            0)
      << out;
  auto j = RunJson("replay " + trace + " --dir " + dir.File("s") +
                   " --device-rows 128 --dram-rows 1024 --verify --faults eio=0.01,seed=1");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j["verified_rows"], 20480);
  EXPECT_GT(j["scanned_rows"].get<uint64_t>(), 4000u);
  EXPECT_GT(j["retried_errors"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace strata::bench
