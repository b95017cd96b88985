// Topology: which CPU cores an I/O thread should run on. The block device
// backing a path sits on a NUMA node (sysfs: /sys/dev/block/<maj:min>/device
// /numa_node, or its parent disk's for a partition); cores of that node come
// first, then the other cores this process may run on. Within each group,
// cores that took more of the device's interrupts come first (its MSI
// vectors' counts in /proc/interrupts): with a single-queue device (virtio)
// the I/O thread then runs where its completions arrive; with per-core
// queues (NVMe) the counts are spread and change little.
//
// All functions read sysfs under `sysfs_root` ("/sys") and procfs under
// `proc_root` ("/proc"); tests pass fake trees. They never fail hard: missing
// information means "unknown" (-1, no counts) or "all allowed cores".
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata::io {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}. InvalidArgument naming the text when
// malformed. Sorted, without duplicates.
[[nodiscard]] Result<std::vector<int>> ParseCpuList(std::string_view text);

// Cores this process may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCpus();

// NUMA node of the block device holding `path`; -1 when unknown (no NUMA,
// a virtual device, tmpfs). NotFound when `path` does not exist.
[[nodiscard]] Result<int> NumaNodeOfPath(const std::string& path,
                                         const std::string& sysfs_root = "/sys");

// Interrupts per core taken by the MSI vectors of the device holding `path`
// (index = core); empty when unknown.
std::vector<uint64_t> DeviceIrqCountsOfPath(const std::string& path,
                                            const std::string& sysfs_root = "/sys",
                                            const std::string& proc_root = "/proc");

// Cores of NUMA node `node`, ascending; empty when unknown.
std::vector<int> CpusOfNode(int node, const std::string& sysfs_root = "/sys");

// The NUMA node of core `cpu`, -1 when unknown.
int NodeOfCpu(int cpu, const std::string& sysfs_root = "/sys");

// `count` cores for I/O threads: allowed cores of `node` first, then the other
// allowed cores, each group by descending `irq_counts` (then ascending core);
// cycles when count exceeds them. node -1: allowed cores.
std::vector<int> ChooseIoCores(uint32_t count, int node, const std::vector<int>& allowed,
                               const std::string& sysfs_root = "/sys",
                               const std::vector<uint64_t>& irq_counts = {});

}  // namespace strata::io
