// strata-test-labels: integration many-locks
// strata-test-timeout: 300
//
// `strata train --dir D` keeps D as a store the trained rows can be read
// back from: it checkpoints after every epoch and says so, and Store::Open on
// D finds rows that training changed (before, D held only the empty first
// checkpoint: every row read back at its initial value).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <initializer_list>

#include "examples/train/trainer.h"
#include "strata/store.h"
#include "tests/cli/cli_runner.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/source_files.h"

namespace strata::train {
namespace {

using bench::testing::Cli;
using bench::testing::RunCli;

constexpr size_t kRows = 2000;

StoreOptions StoreAt(const std::string& dir) {
  StoreOptions so;
  so.dir = dir;
  so.device_rows_max = 512;
  so.dram_rows_max = 2048;
  so.use_gpu = false;
  return so;
}

TEST(TrainCommandTest, KeptDirectoryHoldsTheTrainedRows) {
  ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
  strata::testing::ScratchDir tmp;
  const std::string dir = tmp.File("store");
  std::string out;
  ASSERT_EQ(RunCli("train " + strata::testing::CriteoSamplePath() + " --rows-max " +
                       std::to_string(kRows) +
                       " --epochs 2 --device-rows 512 --dram-rows 2048 --no-gpu --dir " + dir,
                   &out),
            0)
      << out;
  EXPECT_NE(out.find("ckpt_s"), std::string::npos) << out;
  EXPECT_NE(out.find("checkpointed after every epoch"), std::string::npos) << out;

  auto data = ReadCriteoTsv(strata::testing::CriteoSamplePath(), kRows);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  const std::vector<TableOptions> tables = MakeTables(*data, FmConfig{});
  auto trained = Store::Open(StoreAt(dir), tables);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  auto fresh = Store::Open(StoreAt(tmp.File("fresh")), tables);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  auto trained_worker = (*trained)->RegisterWorker(-1);
  auto fresh_worker = (*fresh)->RegisterWorker(-1);
  ASSERT_TRUE(trained_worker.ok() && fresh_worker.ok());

  // Keys of the first rows (training rows: the held-out ones are the last).
  size_t keys = 0, changed = 0;
  for (TableId t = 0; t < tables.size(); ++t) {
    std::vector<Key> touched;
    for (size_t r = 0; r < 100; ++r) {
      if (data->Present(r, t)) touched.push_back(data->KeyAt(r, t));
    }
    if (touched.empty()) continue;
    const uint32_t dim = tables[t].dim;
    std::vector<float> now(touched.size() * dim), initial(touched.size() * dim);
    ASSERT_TRUE((*trained)->Pull(*trained_worker, t, touched, now.data()).ok());
    ASSERT_TRUE((*fresh)->Pull(*fresh_worker, t, touched, initial.data()).ok());
    for (size_t i = 0; i < touched.size(); ++i) {
      keys++;
      changed += std::memcmp(&now[i * dim], &initial[i * dim], dim * sizeof(float)) != 0;
    }
  }
  ASSERT_GT(keys, 1000u);
  // Every key a training batch pushed has moved (AdaGrad with L2).
  EXPECT_EQ(changed, keys);
  EXPECT_TRUE((*trained)->Close().ok());
  EXPECT_TRUE((*fresh)->Close().ok());
}

// The trace is renamed into place at the end of the run: a --trace-out it
// cannot take failed only then, after the whole run, and dropped the
// report. Now it is refused before the data is read or the store is made.
TEST(TrainCommandTest, TraceOutThatCannotBeWrittenIsRefusedBeforeTraining) {
  ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
  strata::testing::ScratchDir tmp;
  // The input, and a copy named like the trace's temporary file of "data".
  const std::string input = tmp.File("train.txt");
  const std::string temp_named = tmp.File("data.tmp");
  std::filesystem::copy_file(strata::testing::CriteoSamplePath(), input);
  std::filesystem::copy_file(strata::testing::CriteoSamplePath(), temp_named);
  const auto input_bytes = std::filesystem::file_size(input);
  std::filesystem::create_directory(tmp.File("a_dir"));
  const std::string store = tmp.File("store");
  struct Case {
    std::string input, trace_out, why;
  };
  for (const Case& c :
       std::initializer_list<Case>{{input, tmp.File("a_dir"), " is a directory"},
                                   {input, tmp.File("missing/run.trace"),
                                    ": directory " + tmp.File("missing") + " does not exist"},
                                   {input, input, ": is the input file " + input},
                                   {temp_named, tmp.File("data"),
                                    ": its temporary file " + temp_named + " is the input file"}}) {
    SCOPED_TRACE(c.trace_out);
    std::string out;
    EXPECT_EQ(RunCli("train " + c.input +
                         " --rows-max 200 --epochs 1 --device-rows 512 --dram-rows 2048 --no-gpu "
                         "--dir " +
                         store + " --trace-out " + c.trace_out,
                     &out, /*timeout_s=*/120),
              1)
        << out;
    EXPECT_NE(out.find("strata train: InvalidArgument: --trace-out " + c.trace_out + c.why),
              std::string::npos)
        << out;
    EXPECT_FALSE(std::filesystem::exists(store)) << out;
  }
  // No trace replaced an input.
  EXPECT_EQ(std::filesystem::file_size(input), input_bytes);
  EXPECT_EQ(std::filesystem::file_size(temp_named), input_bytes);
}

}  // namespace
}  // namespace strata::train
