// ModelExchange (comm_model.h).
#include "cluster/comm_model.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/assert.h"

namespace strata::cluster {
namespace {

// A port of the model: (kind, node or rank, peer, direction).
enum class Port : uint8_t { kNvlink, kPcieOut, kPcieIn, kNicOut, kNicIn };
using PortKey = std::tuple<Port, int, int>;

double Gbps(const LinkBandwidths& bw, LinkClass c) {
  switch (c) {
    case LinkClass::kNvlink:
      return bw.nvlink_gbps;
    case LinkClass::kPcieSwitch:
      return bw.pcie_gbps;
    case LinkClass::kPcieCpu:
      return bw.pcie_cpu_gbps;
    case LinkClass::kNetwork:
      return bw.network_gbps;
    case LinkClass::kSelf:
      break;
  }
  return 1.0;
}

}  // namespace

TrafficModel& TrafficModel::operator+=(const TrafficModel& other) {
  for (size_t c = 0; c < bytes.size(); ++c) bytes[c] += other.bytes[c];
  time_s += other.time_s;
  return *this;
}

TrafficModel ModelExchange(const RoutePlan& plan, std::span<const uint64_t> pair_bytes,
                           const LinkBandwidths& bw) {
  const int w = plan.world_size();
  STRATA_ASSERT(pair_bytes.size() == static_cast<size_t>(w) * w, "ModelExchange: W*W pairs");
  const NodeTopology& t = plan.topology();
  TrafficModel model;
  std::vector<std::map<PortKey, double>> stages(plan.stages());
  auto load = [&](int stage, PortKey key, LinkClass c, uint64_t bytes) {
    model.bytes[static_cast<size_t>(c)] += bytes;
    stages[stage][key] += static_cast<double>(bytes) / (Gbps(bw, c) * 1e9);
  };
  for (int src = 0; src < w; ++src) {
    for (int dst = 0; dst < w; ++dst) {
      const uint64_t bytes = pair_bytes[static_cast<size_t>(src) * w + dst];
      if (src == dst || bytes == 0) continue;
      const std::vector<Hop>& hops = plan.Route(src, dst);
      for (size_t k = 0; k < hops.size(); ++k) {
        const Hop& h = hops[k];
        const int stage = static_cast<int>(k);
        if (h.link == LinkClass::kNvlink) {
          load(stage, {Port::kNvlink, h.from, h.to}, h.link, bytes);
        } else if (h.link != LinkClass::kNetwork) {
          load(stage, {Port::kPcieOut, h.from, 0}, h.link, bytes);
          // Counted once: the receiving port's time, not its bytes.
          stages[stage][{Port::kPcieIn, h.to, 0}] +=
              static_cast<double>(bytes) / (Gbps(bw, h.link) * 1e9);
        } else {
          const int from_gpu = plan.Gpu(h.from);
          const int to_gpu = plan.Gpu(h.to);
          if (from_gpu != t.nic_gpu) {
            load(stage, {Port::kPcieOut, h.from, 0}, t.LinkToNic(from_gpu), bytes);
          }
          if (to_gpu != t.nic_gpu) {
            load(stage, {Port::kPcieIn, h.to, 0}, t.LinkToNic(to_gpu), bytes);
          }
          load(stage, {Port::kNicOut, plan.Node(h.from), 0}, h.link, bytes);
          stages[stage][{Port::kNicIn, plan.Node(h.to), 0}] +=
              static_cast<double>(bytes) / (bw.network_gbps * 1e9);
        }
      }
    }
  }
  for (const auto& ports : stages) {
    double busiest = 0;
    for (const auto& [key, seconds] : ports) busiest = std::max(busiest, seconds);
    model.time_s += busiest;
  }
  return model;
}

}  // namespace strata::cluster
