// Node topologies (cluster/topology.h) and the exchange's route table
// (cluster/route_plan.h): the three fixtures' routes against tables derived
// by hand from their links, the text format, and bad files.
#include "cluster/route_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cluster/topology.h"

namespace strata::cluster {
namespace {

NodeTopology Fixture(const char* name) {
  Result<NodeTopology> t = FixtureTopology(name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

RoutePlan Plan(const NodeTopology& t, int nodes, ExchangeMode mode) {
  Result<RoutePlan> plan = RoutePlan::Build(t, nodes, mode);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return *plan;
}

// The ranks a route visits, the sender first.
std::vector<int> Path(const RoutePlan& plan, int src, int dst) {
  std::vector<int> path{src};
  for (const Hop& h : plan.Route(src, dst)) path.push_back(h.to);
  return path;
}

// seed8 by hand (the seed's Figure 1): GPUs 0-3 and 4-7 fully joined by
// NVLink within their socket, plus i <-> i+4. The pairs without NVLink and
// the lowest-numbered GPU with NVLink to both (Figure 3: GPU 0 forwards to
// 5, 6, 7 through 1, 2, 3).
const std::map<std::pair<int, int>, int> kSeed8Middlemen = {
    {{0, 5}, 1}, {{0, 6}, 2}, {{0, 7}, 3},  //
    {{1, 4}, 0}, {{1, 6}, 2}, {{1, 7}, 3},  //
    {{2, 4}, 0}, {{2, 5}, 1}, {{2, 7}, 3},  //
    {{3, 4}, 0}, {{3, 5}, 1}, {{3, 6}, 2},  //
    {{4, 1}, 0}, {{4, 2}, 0}, {{4, 3}, 0},  //
    {{5, 0}, 1}, {{5, 2}, 1}, {{5, 3}, 1},  //
    {{6, 0}, 2}, {{6, 1}, 2}, {{6, 3}, 2},  //
    {{7, 0}, 3}, {{7, 1}, 3}, {{7, 2}, 3},
};

TEST(RoutePlanTest, Seed8TwoPhaseForwardsThroughTheMiddlemanOverNvlinkOnly) {
  const RoutePlan plan = Plan(Fixture("seed8"), 1, ExchangeMode::kTwoPhase);
  EXPECT_EQ(plan.stages(), 2);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) {
        EXPECT_TRUE(plan.Route(a, b).empty());
        continue;
      }
      const auto it = kSeed8Middlemen.find({a, b});
      const std::vector<int> want =
          it == kSeed8Middlemen.end() ? std::vector<int>{a, b} : std::vector<int>{a, it->second, b};
      EXPECT_EQ(Path(plan, a, b), want) << a << " -> " << b;
      for (const Hop& h : plan.Route(a, b)) EXPECT_EQ(h.link, LinkClass::kNvlink) << a << "->" << b;
    }
  }
}

TEST(RoutePlanTest, Seed8FlatGoesDirectOverPcieThroughTheCpus) {
  const RoutePlan plan = Plan(Fixture("seed8"), 1, ExchangeMode::kFlat);
  EXPECT_EQ(plan.stages(), 1);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      ASSERT_EQ(plan.Route(a, b).size(), 1u);
      const LinkClass want =
          kSeed8Middlemen.count({a, b}) ? LinkClass::kPcieCpu : LinkClass::kNvlink;
      EXPECT_EQ(plan.Route(a, b)[0].link, want) << a << " -> " << b;
    }
  }
}

TEST(RoutePlanTest, NvswitchAndPcieFixturesGoDirectInBothModes) {
  for (ExchangeMode mode : {ExchangeMode::kFlat, ExchangeMode::kTwoPhase}) {
    const RoutePlan nvswitch = Plan(Fixture("nvswitch8"), 1, mode);
    const RoutePlan pcie = Plan(Fixture("pcie8"), 1, mode);
    EXPECT_EQ(nvswitch.stages(), 1);
    EXPECT_EQ(pcie.stages(), 1);
    for (int a = 0; a < 8; ++a) {
      for (int b = 0; b < 8; ++b) {
        if (a == b) continue;
        EXPECT_EQ(Path(nvswitch, a, b), (std::vector<int>{a, b}));
        EXPECT_EQ(nvswitch.Route(a, b)[0].link, LinkClass::kNvlink);
        EXPECT_EQ(Path(pcie, a, b), (std::vector<int>{a, b}));
        // One switch per socket: PCIe peer-to-peer within, through the CPUs across.
        EXPECT_EQ(pcie.Route(a, b)[0].link,
                  a / 4 == b / 4 ? LinkClass::kPcieSwitch : LinkClass::kPcieCpu);
      }
    }
  }
}

TEST(RoutePlanTest, TwoPhaseAcrossNodesGathersOnTheNicGpuOnceAPair) {
  const RoutePlan seed = Plan(Fixture("seed8"), 2, ExchangeMode::kTwoPhase);
  EXPECT_EQ(seed.world_size(), 16);
  EXPECT_EQ(seed.stages(), 5);
  // Node 0's GPU 5 to node 1's GPU 5: 5 -> 1 -> 0 (NIC GPU), network to
  // node 1's GPU 0 (rank 8), then 8 -> 9 -> 13.
  EXPECT_EQ(Path(seed, 5, 13), (std::vector<int>{5, 1, 0, 8, 9, 13}));
  EXPECT_EQ(Path(seed, 0, 8), (std::vector<int>{0, 8}));
  EXPECT_EQ(Path(seed, 4, 12), (std::vector<int>{4, 0, 8, 12}));
  // Every network hop joins the two NIC GPUs: one exchange per node pair.
  for (int a = 0; a < 16; ++a) {
    for (int b = 0; b < 16; ++b) {
      int network = 0;
      for (const Hop& h : seed.Route(a, b)) {
        if (h.link != LinkClass::kNetwork) {
          EXPECT_EQ(h.link, LinkClass::kNvlink);
          continue;
        }
        ++network;
        EXPECT_EQ(seed.Gpu(h.from), 0);
        EXPECT_EQ(seed.Gpu(h.to), 0);
      }
      EXPECT_EQ(network, a / 8 == b / 8 ? 0 : 1);
    }
  }
  // PCIe only: to the NIC GPU over PCIe, through the CPUs from the other socket.
  const RoutePlan pcie = Plan(Fixture("pcie8"), 2, ExchangeMode::kTwoPhase);
  EXPECT_EQ(Path(pcie, 5, 13), (std::vector<int>{5, 0, 8, 13}));
  EXPECT_EQ(pcie.Route(5, 13)[0].link, LinkClass::kPcieCpu);
  EXPECT_EQ(pcie.Route(5, 13)[1].link, LinkClass::kNetwork);
  const RoutePlan flat = Plan(Fixture("seed8"), 2, ExchangeMode::kFlat);
  EXPECT_EQ(Path(flat, 5, 13), (std::vector<int>{5, 13}));
  EXPECT_EQ(flat.Route(5, 13)[0].link, LinkClass::kNetwork);
}

TEST(RoutePlanTest, NextHopWalksTheRoute) {
  const RoutePlan plan = Plan(Fixture("seed8"), 2, ExchangeMode::kTwoPhase);
  EXPECT_EQ(plan.NextHop(5, 5, 13), 1);
  EXPECT_EQ(plan.NextHop(1, 5, 13), 0);
  EXPECT_EQ(plan.NextHop(0, 5, 13), 8);
  EXPECT_EQ(plan.NextHop(9, 5, 13), 13);
}

TEST(TopologyTest, TextFormatRoundTripsAndLongerNvlinkPathsForward) {
  // A ring 0-1-2-3-4-5-0 on one switch: 0 -> 3 takes three NVLink hops
  // (through 1 and 2, the lower of the two shortest ways round).
  const std::string text =
      "strata-topology 1\n# a ring\ngpus 6\nnvlink 0 1\nnvlink 1 2\nnvlink 2 3\n"
      "nvlink 3 4\nnvlink 4 5\nnvlink 5 0  # closes it\nnic_gpu 2\n";
  Result<NodeTopology> t = ParseTopology(text, "ring6");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->nic_gpu, 2);
  EXPECT_EQ(t->Link(0, 2), LinkClass::kPcieSwitch);
  Result<NodeTopology> again = ParseTopology(FormatTopology(*t), "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->nvlink, t->nvlink);
  EXPECT_EQ(again->nic_gpu, 2);
  const RoutePlan plan = Plan(*t, 1, ExchangeMode::kTwoPhase);
  EXPECT_EQ(Path(plan, 0, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Path(plan, 0, 4), (std::vector<int>{0, 5, 4}));
  EXPECT_EQ(plan.stages(), 3);
  const std::string seed = FormatTopology(Fixture("seed8"));
  Result<NodeTopology> seed_again = ParseTopology(seed, "seed8.txt");
  ASSERT_TRUE(seed_again.ok());
  EXPECT_EQ(seed_again->nvlink, Fixture("seed8").nvlink);
  EXPECT_EQ(seed_again->pcie_switch, Fixture("seed8").pcie_switch);
}

TEST(TopologyTest, BadFilesNameTheLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"gpus 2\n", "line 1: expected 'strata-topology 1'"},
      {"strata-topology 1\nnvlink 0 1\n", "line 2: 'nvlink' before 'gpus'"},
      {"strata-topology 1\ngpus 2\nnvlink 0 2\n", "line 3: 'nvlink A B'"},
      {"strata-topology 1\ngpus 2\nnvlink 1 1\n", "line 3: 'nvlink A B'"},
      {"strata-topology 1\ngpus 2\nswitch 0\n", "line 3: 'switch' takes 2 numbers"},
      {"strata-topology 1\ngpus 0\n", "line 2: 'gpus N'"},
      {"strata-topology 1\ngpus 2\nlink 0 1\n", "line 3: unknown directive 'link'"},
      {"strata-topology 1\n", "no 'gpus' line"},
      {"strata-topology 1\ngpus 2\nswitch 0 0\nsocket 0 1\n", "share a switch but not a socket"},
  };
  for (const auto& [text, words] : bad) {
    Result<NodeTopology> t = ParseTopology(text, "bad.topo");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_TRUE(t.status().IsInvalidArgument()) << t.status().ToString();
    EXPECT_NE(t.status().message().find("topology bad.topo: "), std::string::npos)
        << t.status().ToString();
    EXPECT_NE(t.status().message().find(words), std::string::npos) << t.status().ToString();
  }
  Result<NodeTopology> missing = LoadTopology("seed9");
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("seed8, nvswitch8, pcie8"), std::string::npos);
  EXPECT_TRUE(LoadTopology("/nonexistent/x.topo").status().IsNotFound());
  EXPECT_FALSE(RoutePlan::Build(Fixture("seed8"), 0, ExchangeMode::kFlat).ok());
  EXPECT_TRUE(ParseExchangeMode("two-phase").ok());
  EXPECT_TRUE(ParseExchangeMode("tree").status().IsInvalidArgument());
}

TEST(TopologyTest, DiscoveryWithoutAGpuIsUnavailable) {
  Result<NodeTopology> t = DiscoverTopology();
  if (t.ok()) {
    EXPECT_GE(t->gpus, 1);
    GTEST_SKIP() << "a GPU is visible: discovered " << t->gpus << " GPUs";
  }
  EXPECT_TRUE(t.status().IsUnavailable()) << t.status().ToString();
}

}  // namespace
}  // namespace strata::cluster
