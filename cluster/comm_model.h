// The exchange's communication model (docs/cluster.md, "The comm model"):
// given the bytes every rank sends every other in one all-to-all, the bytes
// each link class carries under a RoutePlan and the time at given link
// bandwidths. `strata cluster plan` prints it per batch of a trace.
//
// Bytes: a hop of a route carries the message's bytes on its class. A
// network hop from (to) a GPU other than the node's NIC GPU first (last)
// crosses PCIe between that GPU and the NIC (kPcieSwitch on the NIC's
// switch, else kPcieCpu); the NIC GPU's own path to the NIC counts as
// network. So under two-phase, whose network hops join NIC GPUs, PCIe
// carries only what has no NVLink path.
//
// Time: a route's k-th hop happens in stage k; within a stage every port
// works in parallel, each at its class's bandwidth: an NVLink per direction,
// a GPU's PCIe port per direction (kPcieSwitch or kPcieCpu rate), a node's
// NIC per direction. A stage takes as long as its busiest port; the
// exchange, the sum of its stages. No latency, no contention beyond ports.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "cluster/route_plan.h"

namespace strata::cluster {

// GB/s (1e9 bytes per second) per direction. Defaults: one NVLink 2.0
// link (25), PCIe 3.0 x16 peer-to-peer (12), GPU to GPU through the CPUs'
// memory (6: two copies), a 100 Gb/s NIC (12.5).
struct LinkBandwidths {
  double nvlink_gbps = 25.0;
  double pcie_gbps = 12.0;
  double pcie_cpu_gbps = 6.0;
  double network_gbps = 12.5;
};

struct TrafficModel {
  std::array<uint64_t, kLinkClasses> bytes{};  // per LinkClass, every hop counted
  double time_s = 0;

  uint64_t Bytes(LinkClass c) const { return bytes[static_cast<size_t>(c)]; }
  TrafficModel& operator+=(const TrafficModel& other);
};

// pair_bytes[src * W + dst]: the bytes rank src sends rank dst (the
// diagonal is ignored). REQUIRES: pair_bytes.size() == W * W, W the plan's
// world size; every bandwidth > 0.
TrafficModel ModelExchange(const RoutePlan& plan, std::span<const uint64_t> pair_bytes,
                           const LinkBandwidths& bandwidths);

}  // namespace strata::cluster
