// DiscoverTopology (topology.h): the local GPUs from CUDA (count, PCI bus
// ids, peer access) and NVML (NVLink between a pair, the PCIe ancestor two
// GPUs share). NVML is loaded at run time (dlopen of the driver's
// libnvidia-ml.so.1), so the library links and runs on machines without a
// driver; the few NVML declarations used are below (stable C ABI, values as
// in nvml.h).
#include "cluster/topology.h"

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <numeric>
#endif

namespace strata::cluster {

#if STRATA_HAVE_CUDA
namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlP2pCapsNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kNvmlP2pStatusOk = 0;
constexpr int kNvmlTopologyMultiple = 20;  // NVML_TOPOLOGY_MULTIPLE: behind PCIe switches only
constexpr int kNvmlTopologyNode = 40;      // NVML_TOPOLOGY_NODE: one CPU socket

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  int (*common_ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
  template <typename Fn>
  bool Load(Fn* fn, const char* name) {
    *fn = reinterpret_cast<Fn>(dlsym(lib, name));
    return *fn != nullptr;
  }
  Status Open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      return Status::Unavailable("DiscoverTopology: NVML (libnvidia-ml.so.1) not found");
    if (!Load(&init, "nvmlInit_v2") || !Load(&by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") ||
        !Load(&p2p_status, "nvmlDeviceGetP2PStatus") ||
        !Load(&common_ancestor, "nvmlDeviceGetTopologyCommonAncestor") ||
        !Load(&shutdown, "nvmlShutdown")) {
      shutdown = nullptr;
      return Status::Unavailable("DiscoverTopology: NVML lacks a function it needs");
    }
    if (init() != kNvmlSuccess) {
      shutdown = nullptr;
      return Status::Unavailable("DiscoverTopology: nvmlInit failed");
    }
    return Status::Ok();
  }
};

// Groups GPUs whose common PCIe ancestor is at most `level_max` deep (NVML
// topology levels): each GPU takes the group of the first earlier GPU within
// reach, else its own number.
std::vector<int> Groups(int n, const std::vector<int>& level, int level_max) {
  std::vector<int> group(n);
  std::iota(group.begin(), group.end(), 0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < a; ++b) {
      if (level[static_cast<size_t>(a) * n + b] <= level_max) {
        group[a] = group[b];
        break;
      }
    }
  }
  return group;
}

}  // namespace

Result<NodeTopology> DiscoverTopology() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return Status::Unavailable("DiscoverTopology: no GPU is visible to CUDA");
  }
  if (n > kTopologyGpusMax) n = kTopologyGpusMax;
  Nvml nvml;
  STRATA_RETURN_IF_ERROR(nvml.Open());
  std::vector<NvmlDevice> dev(n);
  for (int g = 0; g < n; ++g) {
    char bus[64] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), g) != cudaSuccess ||
        nvml.by_bus_id(bus, &dev[g]) != kNvmlSuccess) {
      return Status::Unavailable("DiscoverTopology: no NVML device for CUDA GPU " +
                                 std::to_string(g));
    }
  }
  NodeTopology t;
  t.name = "discovered";
  t.gpus = n;
  t.nvlink.assign(static_cast<size_t>(n) * n, 0);
  std::vector<int> level(static_cast<size_t>(n) * n, 0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      int status = -1;
      int peer = 0;
      // NVLink counts only where CUDA can also reach the peer directly.
      cudaDeviceCanAccessPeer(&peer, a, b);
      if (peer != 0 &&
          nvml.p2p_status(dev[a], dev[b], kNvmlP2pCapsNvlink, &status) == kNvmlSuccess &&
          status == kNvmlP2pStatusOk) {
        t.nvlink[static_cast<size_t>(a) * n + b] = 1;
        t.nvlink[static_cast<size_t>(b) * n + a] = 1;  // symmetric, as the format is
      }
      int ancestor = 0;
      if (nvml.common_ancestor(dev[a], dev[b], &ancestor) != kNvmlSuccess) ancestor = 1 << 20;
      level[static_cast<size_t>(a) * n + b] = ancestor;
    }
  }
  t.pcie_switch = Groups(n, level, kNvmlTopologyMultiple);
  t.socket = Groups(n, level, kNvmlTopologyNode);
  return t;
}

#else

Result<NodeTopology> DiscoverTopology() {
  return Status::Unavailable(
      "DiscoverTopology: built without CUDA; give a topology file or a fixture (" +
      std::string(kTopologyFixtures) + ")");
}

#endif

}  // namespace strata::cluster
