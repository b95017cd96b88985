// NodeTopology: how the GPUs of one node connect (docs/cluster.md, "Routes").
// Each GPU sits on a PCIe switch under a CPU socket; some pairs also share an
// NVLink. The class of a pair's best direct path follows:
//   kNvlink      an NVLink between the two
//   kPcieSwitch  no NVLink, one PCIe switch (peer-to-peer through the switch)
//   kPcieCpu     no NVLink, different switches: through the CPUs' memory
//                (and the inter-socket link when the sockets differ)
// One GPU is nearest the node's network card (nic_gpu): the node's traffic
// to other nodes gathers there under the two-phase plan (route_plan.h).
//
// A topology comes from a built-in fixture (seed8, nvswitch8, pcie8), a
// text file (format below, ParseTopology), or the machine's CUDA/NVML
// attributes (DiscoverTopology; Unavailable without a GPU or without CUDA).
//
// Text format, one directive a line, '#' starts a comment:
//   strata-topology 1
//   gpus 8                      # GPUs of the node, 1..64
//   switch 0 0 0 0 1 1 1 1      # the PCIe switch of each GPU (default: all 0)
//   socket 0 0 0 0 1 1 1 1      # the CPU socket of each GPU (default: all 0)
//   nvlink 0 1                  # one line per NVLink-connected pair
//   nic_gpu 0                   # the GPU nearest the NIC (default 0)
// GPUs on one switch must be on one socket.
//
// Thread safety: a value type. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata::cluster {

enum class LinkClass : uint8_t { kSelf, kNvlink, kPcieSwitch, kPcieCpu, kNetwork };
inline constexpr int kLinkClasses = 5;

// "self", "nvlink", "pcie", "pcie-cpu", "network".
const char* LinkClassName(LinkClass c);

// GPUs per node the text format accepts.
inline constexpr int kTopologyGpusMax = 64;

struct NodeTopology {
  std::string name;  // the fixture's name or the file's path
  int gpus = 0;
  std::vector<int> pcie_switch;  // per GPU
  std::vector<int> socket;       // per GPU
  std::vector<uint8_t> nvlink;   // gpus * gpus, symmetric: 1 where an NVLink joins the pair
  int nic_gpu = 0;

  bool HasNvlink(int a, int b) const { return nvlink[static_cast<size_t>(a) * gpus + b] != 0; }
  // The class of the direct path between GPUs a and b (kSelf when a == b).
  LinkClass Link(int a, int b) const;
  // The class of the path from GPU g to the node's NIC, which hangs off
  // nic_gpu's switch: kPcieSwitch on that switch, kPcieCpu otherwise.
  LinkClass LinkToNic(int g) const;
};

// The built-in fixtures:
//   seed8      the seed paper's 8-GPU two-socket node (Baidu, Figures 1 and
//              3): GPUs 0-3 on switch/socket 0, 4-7 on 1; NVLink among each
//              socket's four and between i and i+4, so GPU 0 has none to 5,
//              6, 7 and forwards through 1, 2, 3; NIC on GPU 0's switch
//   nvswitch8  8 GPUs all joined by NVLink (an NVSwitch), one socket
//   pcie8      seed8 without NVLink: PCIe only
// NotFound for another name.
Result<NodeTopology> FixtureTopology(std::string_view name);
inline constexpr const char* kTopologyFixtures = "seed8, nvswitch8, pcie8";

// Parses the text format; InvalidArgument naming `source` and the line.
Result<NodeTopology> ParseTopology(std::string_view text, const std::string& source);
// The text format of `t` (ParseTopology reads it back equal).
std::string FormatTopology(const NodeTopology& t);
// A fixture name, or the path of a topology file.
Result<NodeTopology> LoadTopology(const std::string& spec);
// The local GPUs' topology from CUDA's peer attributes and NVML's NVLink and
// PCIe information; Unavailable when built without CUDA, when no GPU is
// visible, or when NVML cannot be loaded. The NIC is not visible to either:
// nic_gpu is 0 (a topology file can say otherwise).
Result<NodeTopology> DiscoverTopology();

}  // namespace strata::cluster
