// The exchange's communication model (cluster/comm_model.h) on the fixture
// topologies, against byte counts worked out by hand from their routes.
#include "cluster/comm_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata::cluster {
namespace {

RoutePlan Plan(const char* fixture, int nodes, ExchangeMode mode) {
  Result<NodeTopology> t = FixtureTopology(fixture);
  EXPECT_TRUE(t.ok());
  Result<RoutePlan> plan = RoutePlan::Build(*t, nodes, mode);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return *plan;
}

// `bytes` from every rank to every other.
std::vector<uint64_t> Uniform(int ranks, uint64_t bytes) {
  std::vector<uint64_t> pairs(static_cast<size_t>(ranks) * ranks, bytes);
  for (int r = 0; r < ranks; ++r) pairs[static_cast<size_t>(r) * ranks + r] = 0;
  return pairs;
}

uint64_t Pcie(const TrafficModel& m) {
  return m.Bytes(LinkClass::kPcieSwitch) + m.Bytes(LinkClass::kPcieCpu);
}

TEST(CommModelTest, Seed8TwoPhaseMovesNoPcieByteBetweenNvlinkConnectedGpus) {
  const LinkBandwidths bw;
  const std::vector<uint64_t> pairs = Uniform(8, 1000);
  const TrafficModel flat = ModelExchange(Plan("seed8", 1, ExchangeMode::kFlat), pairs, bw);
  const TrafficModel two = ModelExchange(Plan("seed8", 1, ExchangeMode::kTwoPhase), pairs, bw);
  // 56 ordered pairs: 32 joined by NVLink, 24 not (each GPU lacks 3).
  EXPECT_EQ(flat.Bytes(LinkClass::kNvlink), 32'000u);
  EXPECT_EQ(flat.Bytes(LinkClass::kPcieCpu), 24'000u);
  EXPECT_EQ(flat.Bytes(LinkClass::kPcieSwitch), 0u);
  // Two-phase: the 24 go twice over NVLink, none over PCIe.
  EXPECT_EQ(two.Bytes(LinkClass::kNvlink), 32'000u + 2 * 24'000u);
  EXPECT_EQ(Pcie(two), 0u);
  EXPECT_EQ(two.Bytes(LinkClass::kNetwork), 0u);
  // Flat's busiest port: a GPU's PCIe port sending 3 x 1000 bytes at 6 GB/s.
  EXPECT_DOUBLE_EQ(flat.time_s, 3000.0 / 6e9);
  EXPECT_LT(two.time_s, flat.time_s);
}

TEST(CommModelTest, AcrossNodesFlatCrossesPcieToTheNicAndTwoPhaseDoesNot) {
  const LinkBandwidths bw;
  const std::vector<uint64_t> pairs = Uniform(16, 1000);
  const TrafficModel flat = ModelExchange(Plan("seed8", 2, ExchangeMode::kFlat), pairs, bw);
  const TrafficModel two = ModelExchange(Plan("seed8", 2, ExchangeMode::kTwoPhase), pairs, bw);
  // 128 ordered pairs across the two nodes, each 1000 bytes over the network.
  EXPECT_EQ(flat.Bytes(LinkClass::kNetwork), 128'000u);
  EXPECT_EQ(two.Bytes(LinkClass::kNetwork), 128'000u);
  // Flat: every message from (to) GPUs 1-3 crosses the NIC's switch, from
  // (to) GPUs 4-7 the CPUs: 8 remote peers x 1000 bytes, both ends, both nodes.
  EXPECT_EQ(flat.Bytes(LinkClass::kPcieSwitch), 2u * 2 * 3 * 8 * 1000);
  EXPECT_EQ(flat.Bytes(LinkClass::kPcieCpu), 2u * 2 * 4 * 8 * 1000 + 2 * 24'000u);
  EXPECT_EQ(Pcie(two), 0u);
}

TEST(CommModelTest, NvswitchAndPcieNodesAreTheSameEitherWay) {
  const LinkBandwidths bw;
  const std::vector<uint64_t> pairs = Uniform(8, 1'000'000'000);
  for (const char* fixture : {"nvswitch8", "pcie8"}) {
    const TrafficModel flat = ModelExchange(Plan(fixture, 1, ExchangeMode::kFlat), pairs, bw);
    const TrafficModel two = ModelExchange(Plan(fixture, 1, ExchangeMode::kTwoPhase), pairs, bw);
    EXPECT_EQ(flat.bytes, two.bytes) << fixture;
    EXPECT_DOUBLE_EQ(flat.time_s, two.time_s) << fixture;
  }
  // Every NVLink of the switch carries 1 GB at 25 GB/s.
  EXPECT_DOUBLE_EQ(ModelExchange(Plan("nvswitch8", 1, ExchangeMode::kFlat), pairs, bw).time_s,
                   1e9 / 25e9);
  // pcie8: a GPU sends 3 GB through its switch (12 GB/s) and 4 GB through
  // the CPUs (6 GB/s) from one port.
  EXPECT_DOUBLE_EQ(ModelExchange(Plan("pcie8", 1, ExchangeMode::kFlat), pairs, bw).time_s,
                   3e9 / 12e9 + 4e9 / 6e9);
}

}  // namespace
}  // namespace strata::cluster
