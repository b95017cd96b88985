#include "io/topology.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace strata::io {
namespace {

bool ReadFirstLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, *line);
  return true;
}

bool ParseInt(std::string_view text, int* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::set<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? text.npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() : comma + 1;
    size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    bool ok = dash == std::string_view::npos
                  ? ParseInt(item, &lo) && (hi = lo, true)
                  : ParseInt(item.substr(0, dash), &lo) && ParseInt(item.substr(dash + 1), &hi);
    if (!ok || lo < 0 || hi < lo || hi > 1 << 20) {
      return Status::InvalidArgument("cpu list '" + std::string(text) + "': bad item '" +
                                     std::string(item) + "'");
    }
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

namespace {

// The sysfs directory of the block device holding `path`, or empty when
// unknown. NotFound when `path` does not exist.
Result<std::filesystem::path> BlockDeviceDir(const std::string& path,
                                             const std::string& sysfs_root) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound("topology: no such path " + path);
    return Status::FromErrno(errno, "topology: stat of " + path);
  }
  dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
  std::string block =
      sysfs_root + "/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(block, ec);
  if (ec) return std::filesystem::path();
  return real;
}

}  // namespace

Result<int> NumaNodeOfPath(const std::string& path, const std::string& sysfs_root) {
  STRATA_ASSIGN_OR_RETURN(std::filesystem::path real, BlockDeviceDir(path, sysfs_root));
  if (real.empty()) return -1;
  // A partition's directory sits inside its disk's; virtio and NVMe keep the
  // node on the device or one level further up.
  for (const auto& dir : {real, real.parent_path()}) {
    for (const char* leaf : {"device/numa_node", "device/device/numa_node"}) {
      std::string line;
      int node = -1;
      if (ReadFirstLine((dir / leaf).string(), &line) && ParseInt(line, &node) && node >= 0) {
        return node;
      }
    }
  }
  return -1;
}

std::vector<uint64_t> DeviceIrqCountsOfPath(const std::string& path, const std::string& sysfs_root,
                                            const std::string& proc_root) {
  auto real = BlockDeviceDir(path, sysfs_root);
  if (!real.ok() || real->empty()) return {};
  // The MSI vectors hang off the PCI function, a few levels above the disk.
  std::set<int> irqs;
  std::filesystem::path dir = *real;
  for (int level = 0; level < 6 && irqs.empty() && dir.has_parent_path(); ++level) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "msi_irqs", ec)) {
      int irq = -1;
      if (ParseInt(entry.path().filename().string(), &irq)) irqs.insert(irq);
    }
    dir = dir.parent_path();
  }
  if (irqs.empty()) return {};
  std::ifstream in(proc_root + "/interrupts");
  std::string line;
  if (!std::getline(in, line)) return {};
  std::vector<int> columns;  // core of each count column
  std::istringstream header(line);
  for (std::string word; header >> word;) {
    int cpu = -1;
    if (word.rfind("CPU", 0) == 0 && ParseInt(std::string_view(word).substr(3), &cpu)) {
      columns.push_back(cpu);
    }
  }
  std::vector<uint64_t> counts;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string label;
    int irq = -1;
    if (!(row >> label) || label.back() != ':' ||
        !ParseInt(std::string_view(label).substr(0, label.size() - 1), &irq) ||
        irqs.count(irq) == 0) {
      continue;
    }
    for (int cpu : columns) {
      uint64_t n = 0;
      if (!(row >> n)) break;
      if (static_cast<size_t>(cpu) >= counts.size()) counts.resize(cpu + 1, 0);
      counts[cpu] += n;
    }
  }
  return counts;
}

std::vector<int> CpusOfNode(int node, const std::string& sysfs_root) {
  if (node < 0) return {};
  std::string line;
  if (!ReadFirstLine(sysfs_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist",
                     &line)) {
    return {};
  }
  auto cpus = ParseCpuList(line);
  return cpus.ok() ? std::move(cpus).value() : std::vector<int>{};
}

int NodeOfCpu(int cpu, const std::string& sysfs_root) {
  std::error_code ec;
  std::filesystem::directory_iterator it(
      sysfs_root + "/devices/system/cpu/cpu" + std::to_string(cpu), ec);
  if (ec) return -1;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    int node = -1;
    if (name.rfind("node", 0) == 0 && ParseInt(std::string_view(name).substr(4), &node))
      return node;
  }
  return -1;
}

std::vector<int> ChooseIoCores(uint32_t count, int node, const std::vector<int>& allowed,
                               const std::string& sysfs_root,
                               const std::vector<uint64_t>& irq_counts) {
  const std::vector<int> local = CpusOfNode(node, sysfs_root);
  auto irqs_of = [&](int c) {
    return static_cast<size_t>(c) < irq_counts.size() ? irq_counts[c] : uint64_t{0};
  };
  auto is_local = [&](int c) { return std::find(local.begin(), local.end(), c) != local.end(); };
  std::vector<int> order = allowed;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (is_local(a) != is_local(b)) return is_local(a);
    if (irqs_of(a) != irqs_of(b)) return irqs_of(a) > irqs_of(b);
    return a < b;
  });
  std::vector<int> cores;
  if (order.empty()) return cores;
  for (uint32_t i = 0; i < count; ++i) cores.push_back(order[i % order.size()]);
  return cores;
}

}  // namespace strata::io
