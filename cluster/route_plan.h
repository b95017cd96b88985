// RoutePlan: the path every rank-to-rank message of the Cluster's exchange
// takes (docs/cluster.md, "Routes"). Ranks are GPUs: rank r is GPU
// r % gpus of node r / gpus, every node with the same NodeTopology.
//
//   flat       every message goes straight from sender to receiver: over
//              NVLink where the pair has one, else over PCIe (through the
//              switch, or through the CPUs), and over the network to
//              another node (through the PCIe path to the NIC)
//   two-phase  inside a node, direct where an NVLink joins the pair, else
//              through middleman GPUs along the shortest NVLink path (the
//              lowest-numbered middlemen on a tie), PCIe only where no
//              NVLink path exists; to another node, to the sender node's
//              NIC GPU along such a route, one network hop to the receiver
//              node's NIC GPU (one exchange per node pair), then on to the
//              receiver along such a route
//
// Thread safety: immutable after Build.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "strata/status.h"

namespace strata::cluster {

// The most ranks a plan covers: it keeps a route per rank pair.
inline constexpr int kRoutePlanRanksMax = 1024;

enum class ExchangeMode : uint8_t { kFlat, kTwoPhase };
const char* ExchangeModeName(ExchangeMode mode);  // "flat", "two-phase"
Result<ExchangeMode> ParseExchangeMode(std::string_view name);

struct Hop {
  int from = 0;  // rank
  int to = 0;    // rank
  LinkClass link = LinkClass::kSelf;
};

class RoutePlan {
 public:
  // A plan for `nodes` nodes of topology `t`; InvalidArgument unless
  // 1 <= nodes * t.gpus <= kRoutePlanRanksMax.
  static Result<RoutePlan> Build(const NodeTopology& t, int nodes, ExchangeMode mode);

  int world_size() const { return world_; }
  int gpus_per_node() const { return topology_.gpus; }
  int Node(int rank) const { return rank / topology_.gpus; }
  int Gpu(int rank) const { return rank % topology_.gpus; }
  const NodeTopology& topology() const { return topology_; }
  ExchangeMode mode() const { return mode_; }

  // The hops from rank src to rank dst (none when src == dst).
  const std::vector<Hop>& Route(int src, int dst) const {
    return routes_[static_cast<size_t>(src) * world_ + dst];
  }
  // The most hops of any route: the stages of a forwarding exchange.
  int stages() const { return stages_; }
  // The rank after `at` on the route from src to dst. REQUIRES: `at` is on
  // that route and is not dst.
  int NextHop(int at, int src, int dst) const;

  // The plan as text, one line per route with more than one hop or with
  // other than NVLink ("0 -> 5: 0 -nvlink-> 1 -nvlink-> 5"); for people and
  // tests.
  std::string Describe() const;

 private:
  RoutePlan() = default;
  // GPU a to GPU b inside node `node` under `mode_`, appended to *hops.
  void AppendIntraNode(int node, int a, int b, std::vector<Hop>* hops) const;

  NodeTopology topology_;
  ExchangeMode mode_ = ExchangeMode::kFlat;
  int world_ = 0;
  int stages_ = 0;
  std::vector<std::vector<Hop>> routes_;       // world * world
  std::vector<std::vector<int>> nvlink_path_;  // gpus * gpus: shortest NVLink path, ends included
};

}  // namespace strata::cluster
