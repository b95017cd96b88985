// strata-test-labels: integration
// strata-test-timeout: 300
//
// `strata cluster reshard` refuses what it cannot do before it creates
// anything: more ranks than the open-file limit lets it hold open (65536
// made 2,500 shard directories before "Too many open files"), and an --out
// that is --from or lies inside it (accepted before). The cluster is a
// one-rank replay's (mpirun -np 1); skips without mpirun or MPI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "io/env.h"
#include "tests/cli/cli_runner.h"
#include "tests/cluster/mpi_runner.h"
#include "tests/util/scratch_dir.h"

namespace strata::cluster {
namespace {

using bench::testing::Cli;
using bench::testing::RunCli;

class ReshardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::MpiSkipReason("replay"); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
    const std::string trace = dir_.File("t.trace");
    std::string out;
    ASSERT_EQ(RunCli("trace gen --out " + trace + " --cardinalities 300,40 --batch-size 16 " +
                         "--batches 8",
                     &out),
              0)
        << out;
    from_ = dir_.File("c1");
    ASSERT_EQ(testing::RunCommand(testing::MpirunCommand(1, 120) + " " + Cli() + " replay " +
                                      trace + " --cluster --dir " + from_ +
                                      " --device-rows 300 --dram-rows 400 --dim 4",
                                  &out),
              0)
        << out;
    ASSERT_TRUE(std::filesystem::exists(from_ + "/CLUSTER")) << out;
  }

  // `cluster reshard` with `flags` fails with code 1 and a line holding
  // `why`, leaving the cluster as it was and `untouched` missing.
  void ExpectRefused(const std::string& flags, const std::string& why,
                     const std::string& untouched) {
    SCOPED_TRACE(flags);
    const auto entries = [&] {
      size_t n = 0;
      for (const auto& e : std::filesystem::recursive_directory_iterator(from_))
        n += !e.is_directory();
      return n;
    };
    const size_t before = entries();
    std::string out;
    EXPECT_EQ(RunCli("cluster reshard --from " + from_ + " " + flags, &out, /*timeout_s=*/60), 1)
        << out;
    EXPECT_NE(out.find("strata cluster reshard: InvalidArgument: " + why), std::string::npos)
        << out;
    EXPECT_FALSE(std::filesystem::exists(untouched)) << out;
    EXPECT_EQ(entries(), before);
  }

  strata::testing::ScratchDir dir_;
  std::string from_;
};

TEST_F(ReshardTest, MoreRanksThanTheOpenFileLimitHoldsAreRefusedBeforeAnyDirectory) {
  const std::string out = dir_.File("big");
  ExpectRefused("--ranks 65536 --out " + out,
                "--ranks 65536: reshard holds every new shard open at once, about ", out);
  std::string text;
  EXPECT_EQ(RunCli("cluster reshard --from " + from_ + " --ranks 65536 --out " + out, &text, 60),
            1);
  EXPECT_NE(text.find("(2 tables), and this process may open "), std::string::npos) << text;
  EXPECT_NE(text.find(" ranks here"), std::string::npos) << text;
  // A count that fits still reshards.
  EXPECT_EQ(RunCli("cluster reshard --from " + from_ + " --ranks 3 --out " + out, &text, 60), 0)
      << text;
  EXPECT_TRUE(std::filesystem::exists(out + "/CLUSTER")) << text;
}

TEST_F(ReshardTest, OutThatIsFromOrLiesInsideItIsRefused) {
  for (const std::string& out :
       {from_ + "/new", from_ + "/rank-0/x/..", dir_.File("link") + "/new"}) {
    if (out == dir_.File("link") + "/new") {
      std::filesystem::create_directory_symlink(from_, dir_.File("link"));
    }
    ExpectRefused("--ranks 2 --out " + out, "--out " + out + " lies inside --from " + from_,
                  from_ + "/new");
  }
  ExpectRefused("--ranks 2 --out " + from_ + "/", "--out " + from_ + "/ is --from " + from_,
                from_ + "/new");
}

// A shard open in a Store (its LOCK held here as a Store holds it) or in a
// cluster's rank (rank-0.LOCK) is refused, with nothing read or written; a
// RocksDB tier would have been rebuilt under the running store.
TEST_F(ReshardTest, ShardInUseIsRefused) {
  for (const std::string& lock_path : {from_ + "/rank-0/LOCK", from_ + "/rank-0.LOCK"}) {
    SCOPED_TRACE(lock_path);
    auto held = io::Env::Default()->LockFile(lock_path);
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    const std::string out = dir_.File("busy");
    std::string text;
    EXPECT_EQ(RunCli("cluster reshard --from " + from_ + " --ranks 2 --out " + out, &text, 60), 1)
        << text;
    EXPECT_NE(text.find("Unavailable: reshard: "), std::string::npos) << text;
    EXPECT_NE(text.find("is in use (lock of file " + lock_path + ": held by process " +
                        std::to_string(::getpid())),
              std::string::npos)
        << text;
    EXPECT_FALSE(std::filesystem::exists(out + "/CLUSTER")) << text;
  }
}

}  // namespace
}  // namespace strata::cluster
