// RoutePlan (route_plan.h).
#include "cluster/route_plan.h"

#include <algorithm>
#include <deque>

#include "base/assert.h"

namespace strata::cluster {
namespace {

// The shortest NVLink path from a to b (ends included), the lowest-numbered
// GPUs first on a tie; empty when none exists. BFS from b records, for each
// GPU, its distance to b; walking from a, take the lowest neighbour one
// step closer.
std::vector<int> ShortestNvlinkPath(const NodeTopology& t, int a, int b) {
  std::vector<int> dist(t.gpus, -1);
  std::deque<int> queue{b};
  dist[b] = 0;
  while (!queue.empty()) {
    const int g = queue.front();
    queue.pop_front();
    for (int h = 0; h < t.gpus; ++h) {
      if (dist[h] < 0 && t.HasNvlink(g, h)) {
        dist[h] = dist[g] + 1;
        queue.push_back(h);
      }
    }
  }
  if (dist[a] < 0) return {};
  std::vector<int> path{a};
  for (int g = a; g != b;) {
    for (int h = 0; h < t.gpus; ++h) {
      if (t.HasNvlink(g, h) && dist[h] == dist[g] - 1) {
        g = h;
        break;
      }
    }
    path.push_back(g);
  }
  return path;
}

}  // namespace

const char* ExchangeModeName(ExchangeMode mode) {
  return mode == ExchangeMode::kFlat ? "flat" : "two-phase";
}

Result<ExchangeMode> ParseExchangeMode(std::string_view name) {
  if (name == "flat") return ExchangeMode::kFlat;
  if (name == "two-phase") return ExchangeMode::kTwoPhase;
  return Status::InvalidArgument("exchange mode '" + std::string(name) +
                                 "': expected flat or two-phase");
}

Result<RoutePlan> RoutePlan::Build(const NodeTopology& t, int nodes, ExchangeMode mode) {
  if (nodes < 1 || t.gpus < 1 || nodes > kRoutePlanRanksMax / t.gpus) {
    return Status::InvalidArgument("RoutePlan: " + std::to_string(nodes) + " nodes of " +
                                   std::to_string(t.gpus) + " GPUs: a plan covers 1 to " +
                                   std::to_string(kRoutePlanRanksMax) + " ranks");
  }
  RoutePlan plan;
  plan.topology_ = t;
  plan.mode_ = mode;
  plan.world_ = nodes * t.gpus;
  plan.nvlink_path_.resize(static_cast<size_t>(t.gpus) * t.gpus);
  for (int a = 0; a < t.gpus; ++a) {
    for (int b = 0; b < t.gpus; ++b) {
      plan.nvlink_path_[static_cast<size_t>(a) * t.gpus + b] = ShortestNvlinkPath(t, a, b);
    }
  }
  const int w = plan.world_;
  plan.routes_.resize(static_cast<size_t>(w) * w);
  for (int src = 0; src < w; ++src) {
    for (int dst = 0; dst < w; ++dst) {
      std::vector<Hop>& hops = plan.routes_[static_cast<size_t>(src) * w + dst];
      const int ns = plan.Node(src);
      const int nd = plan.Node(dst);
      if (src == dst) continue;
      if (ns == nd) {
        plan.AppendIntraNode(ns, plan.Gpu(src), plan.Gpu(dst), &hops);
      } else if (mode == ExchangeMode::kFlat) {
        hops.push_back(Hop{src, dst, LinkClass::kNetwork});
      } else {
        plan.AppendIntraNode(ns, plan.Gpu(src), t.nic_gpu, &hops);
        hops.push_back(Hop{ns * t.gpus + t.nic_gpu, nd * t.gpus + t.nic_gpu, LinkClass::kNetwork});
        plan.AppendIntraNode(nd, t.nic_gpu, plan.Gpu(dst), &hops);
      }
      plan.stages_ = std::max(plan.stages_, static_cast<int>(hops.size()));
    }
  }
  return plan;
}

void RoutePlan::AppendIntraNode(int node, int a, int b, std::vector<Hop>* hops) const {
  if (a == b) return;
  const int base = node * topology_.gpus;
  const std::vector<int>& path = nvlink_path_[static_cast<size_t>(a) * topology_.gpus + b];
  if (mode_ == ExchangeMode::kFlat || path.size() <= 2) {
    hops->push_back(Hop{base + a, base + b, topology_.Link(a, b)});
    return;
  }
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    hops->push_back(Hop{base + path[i], base + path[i + 1], LinkClass::kNvlink});
  }
}

int RoutePlan::NextHop(int at, int src, int dst) const {
  for (const Hop& h : Route(src, dst)) {
    if (h.from == at) return h.to;
  }
  STRATA_ASSERT(false, "RoutePlan::NextHop: the rank is not on the route");
  return dst;
}

std::string RoutePlan::Describe() const {
  std::string out;
  for (int src = 0; src < world_; ++src) {
    for (int dst = 0; dst < world_; ++dst) {
      const std::vector<Hop>& hops = Route(src, dst);
      if (hops.empty() || (hops.size() == 1 && hops[0].link == LinkClass::kNvlink)) continue;
      out += std::to_string(src) + " -> " + std::to_string(dst) + ": " + std::to_string(src);
      for (const Hop& h : hops) {
        out += std::string(" -") + LinkClassName(h.link) + "-> " + std::to_string(h.to);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace strata::cluster
