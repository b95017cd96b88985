// strata-test-labels: integration many-locks
// strata-test-timeout: 600
//
// scripts/gpu_check.sh runs here too: on a machine without a GPU it says so,
// records the GPU steps as skipped and runs the host parts. Runs its --quick
// form on this build tree (no pack) and reads the summary it writes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/gpu_runtime.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/source_files.h"

namespace strata {
namespace {

int RunScript(const std::string& cmd, std::string* out) {
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const nlohmann::json* FindStep(const nlohmann::json& summary, const std::string& name) {
  for (const auto& s : summary["steps"]) {
    if (s["name"] == name) return &s;
  }
  return nullptr;
}

TEST(GpuCheckTest, QuickRunWritesSummaryAndRunsTheHostParts) {
  strata::testing::ScratchDir dir;
  const std::string out_dir = dir.File("out");
  std::string out;
  const std::string cmd = "STRATA_GPU_PACK=" + dir.File("no-pack") +
                          " STRATA_GPU_BUILD=" + STRATA_TEST_BINARY_DIR + " timeout 540 bash " +
                          testing::SourceDir() + "/scripts/gpu_check.sh " + out_dir + " --quick";
  ASSERT_EQ(RunScript(cmd, &out), 0) << out;

  std::ifstream in(out_dir + "/summary.json");
  ASSERT_TRUE(in.good()) << "no summary.json\n" << out;
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_TRUE(summary["quick"].get<bool>());
  const bool gpu = kernels::VisibleGpuCount() > 0;
  EXPECT_EQ(summary["gpu"].is_null(), !gpu) << summary.dump(2);

  // Every step that ran passed; without a GPU the GPU steps say why they skipped.
  for (const auto& s : summary["steps"]) {
    EXPECT_NE(s["result"], "fail") << s.dump();
  }
  for (const char* name : {"test_kernels_device_table_gpu_test", "engine_bench", "table_bench",
                           "trace_gen", "replay_host", "train_host"}) {
    const nlohmann::json* s = FindStep(summary, name);
    ASSERT_NE(s, nullptr) << name << " missing\n" << summary.dump(2);
    EXPECT_EQ((*s)["result"], "pass") << name;
  }
  for (const char* name :
       {"replay_gpu", "train_gpu", "sanitizer_memcheck_kernels_device_table_gpu_test",
        "sanitizer_racecheck_kernels_device_table_gpu_test"}) {
    const nlohmann::json* s = FindStep(summary, name);
    ASSERT_NE(s, nullptr) << name << " missing\n" << summary.dump(2);
    if (!gpu) {
      EXPECT_EQ((*s)["result"], "skip") << name;
      EXPECT_EQ((*s)["note"], "no GPU visible") << name;
    }
  }
  EXPECT_NE(out.find(gpu ? "GPU:" : "no GPU visible"), std::string::npos) << out;

  // The numbers come from the steps' own output.
  const auto& n = summary["numbers"];
  ASSERT_TRUE(n.contains("replay_host")) << summary.dump(2);
  EXPECT_GT(n["replay_host"]["ssd_row_reads"].get<double>(), 0);
  EXPECT_FALSE(n["replay_host"]["t0_on_gpu"].get<bool>());
  ASSERT_TRUE(n.contains("train_host")) << summary.dump(2);
  const double auc = n["train_host"]["validation_auc"].get<double>();
  EXPECT_GT(auc, 0.5);
  EXPECT_LT(auc, 1.0);
  ASSERT_TRUE(n.contains("BM_PullPushResident")) << summary.dump(2);
  EXPECT_GT(n["BM_PullPushResident"]["keys_per_s"].get<double>(), 0);
  ASSERT_TRUE(n.contains("table_find")) << summary.dump(2);
  EXPECT_GT(n["table_find"]["keys_per_s"].get<double>(), 0);
  // The cluster's exchange ran under mpirun (deps.sh installs Open MPI; a
  // machine without it records the step as skipped, saying why), and its
  // bytes sent equal the model's.
  const nlohmann::json* cluster = FindStep(summary, "cluster_r2_1");
  ASSERT_NE(cluster, nullptr) << summary.dump(2);
  if ((*cluster)["result"] == "skip") {
    EXPECT_NE((*cluster)["note"].get<std::string>().find("not"), std::string::npos)
        << cluster->dump();
  } else {
    EXPECT_EQ((*cluster)["result"], "pass");
    ASSERT_TRUE(n.contains("cluster_r2")) << summary.dump(2);
    ASSERT_EQ(n["cluster_r2"].size(), 1u);
    const auto& run = n["cluster_r2"][0];
    EXPECT_GT(run["plain_aligned_over_exchange_aligned"].get<double>(), 0);
    EXPECT_GT(run["bytes_sent_per_batch"].get<double>(), 0);
    EXPECT_EQ(run["bytes_sent_per_batch"], run["model_bytes_per_batch"]);
  }
  // The DRAM tier's bench ran at both dimensions and thread counts, with
  // the three gathers beside the lookups (the ratios come from them).
  for (const char* name : {"dram_d16", "dram_d64", "dram1_d16", "dram1_d64"}) {
    const nlohmann::json* s = FindStep(summary, name);
    ASSERT_NE(s, nullptr) << name << " missing\n" << summary.dump(2);
    EXPECT_EQ((*s)["result"], "pass") << name;
    ASSERT_TRUE(n.contains(name)) << summary.dump(2);
    const auto& dram = n[name];
    EXPECT_GT(dram["index_bytes_per_row"].get<double>(), 0) << name;
    EXPECT_GE(dram["shards"].get<int>(), 1) << name;
    if (name[4] == '1') EXPECT_EQ(dram["shards"].get<int>(), 1) << name;
    ASSERT_EQ(dram["by_threads"].size(), 2u) << dram.dump(2);
    for (const auto& r : dram["by_threads"]) {
      for (const char* key : {"lookup_rows_per_s", "gather_gbps", "gather_index_gbps",
                              "gather_slots_gbps", "lookup_vs_gather", "lookup_vs_gather_index",
                              "lookup_vs_gather_slots", "insert_evict_vs_lookup"}) {
        EXPECT_GT(r[key].get<double>(), 0) << name << " " << key << "\n" << r.dump();
      }
    }
  }
  // The device table's GPU test ran (its cases skip without a GPU).
  const auto& t = summary["tests"]["kernels_device_table_gpu_test"];
  EXPECT_GT(t["tests"].get<int>(), 0);
  EXPECT_EQ(t["failed"].get<int>(), 0);
  if (!gpu) EXPECT_EQ(t["skipped"], t["tests"]);
}

// The summary of a full (not --quick) run judges the DRAM issue's bars from
// the bench's JSON: made-up numbers, one run passing a bar and the other not,
// so a check that read the wrong key or compared the wrong way fails.
TEST(GpuCheckTest, SummaryJudgesTheDramBarsOfAFullRun) {
  strata::testing::ScratchDir dir;
  const std::string detail = dir.File("detail"), out_dir = dir.File("out");
  std::filesystem::create_directories(detail);
  std::filesystem::create_directories(out_dir);
  std::ofstream(detail + "/steps.tsv") << "dram_d16\tpass\t10\t\ndram_d64\tpass\t10\t\n";
  auto bench = [](double index_bytes, double vs_gather, double vs_slots, double evict) {
    nlohmann::json run = {{"threads", 1},
                          {"lookup_rows_per_s", 1e7},
                          {"lookup_vs_gather", vs_gather},
                          {"lookup_vs_gather_slots", vs_slots},
                          {"insert_evict_vs_lookup", evict}};
    return nlohmann::json{{"rows", 4000000},
                          {"shards", 8},
                          {"index_bytes_per_row", index_bytes},
                          {"index_bytes_per_row_after_evict", index_bytes + 0.3},
                          {"by_threads", {run}}};
  };
  // Bench output: a line of text before the JSON, as the steps' logs have.
  std::ofstream(detail + "/dram_d16.txt") << "log line\n" << bench(22.2, 0.3, 0.6, 0.55).dump();
  std::ofstream(detail + "/dram_d64.txt") << bench(25.0, 0.85, 0.9, 0.4).dump();
  std::string out;
  ASSERT_EQ(RunScript("python3 " + testing::SourceDir() + "/scripts/gpu_check_summary.py " +
                          detail + " " + out_dir + " abc1234 0 none 0",
                      &out),
            0)
      << out;
  std::ifstream in(out_dir + "/summary.json");
  ASSERT_TRUE(in.good()) << out;
  const nlohmann::json checks = nlohmann::json::parse(in)["checks"];
  auto verdict = [&](const std::string& name) {
    EXPECT_TRUE(checks.contains(name)) << name << "\n" << checks.dump(2);
    return checks.contains(name) ? checks[name]["pass"] : nlohmann::json("missing");
  };
  EXPECT_EQ(verdict("dram_d16_index_bytes_per_row"), true);   // 22.5 <= 24
  EXPECT_EQ(verdict("dram_d64_index_bytes_per_row"), false);  // 25.3
  EXPECT_EQ(verdict("dram_d64_lookup_vs_gather"), true);
  EXPECT_EQ(verdict("dram_d16_insert_evict_vs_lookup"), true);
  EXPECT_EQ(verdict("dram_d64_insert_evict_vs_lookup"), false);
  // Reported without a verdict, with their values.
  EXPECT_TRUE(verdict("dram_d16_lookup_vs_gather").is_null());
  EXPECT_TRUE(verdict("dram_d16_lookup_vs_gather_slots").is_null());
  EXPECT_TRUE(verdict("dram_d64_lookup_vs_gather_slots").is_null());
  EXPECT_DOUBLE_EQ(checks["dram_d16_lookup_vs_gather_slots"]["value"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(checks["dram_d64_lookup_vs_gather_slots"]["value"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(checks["dram_d16_lookup_vs_gather"]["value"].get<double>(), 0.3);
}

TEST(GpuCheckTest, BadArgumentsAreUsageErrorsThatWriteNothing) {
  strata::testing::ScratchDir dir;
  const std::string script = "bash " + testing::SourceDir() + "/scripts/gpu_check.sh";
  for (const std::string& args : {std::string(""), std::string("''"), std::string("--quik"),
                                  dir.File("out") + " --quik", dir.File("out") + " --quick x"}) {
    std::string out;
    EXPECT_EQ(RunScript(script + " " + args, &out), 2) << args << "\n" << out;
    EXPECT_NE(out.find("usage"), std::string::npos) << args << "\n" << out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("out")));
}

}  // namespace
}  // namespace strata
