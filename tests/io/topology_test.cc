// strata-test-labels: unit
#include "io/topology.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>

#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;

void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(TopologyTest, ParseCpuList) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList("5"), (std::vector<int>{5}));
  EXPECT_EQ(*ParseCpuList(""), (std::vector<int>{}));
  EXPECT_TRUE(ParseCpuList("3-1").status().IsInvalidArgument());
  EXPECT_TRUE(ParseCpuList("a,b").status().IsInvalidArgument());
  EXPECT_NE(ParseCpuList("1,x").status().message().find("'x'"), std::string::npos);
}

// A fake sysfs: the device holding a scratch file is a partition on NUMA
// node 1, whose cores are 2-3.
TEST(TopologyTest, NodeOfPathAndCoreChoiceFromFakeSysfs) {
  ScratchDir dir;
  const std::string file = dir.File("data");
  std::ofstream(file) << "x";
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  const std::string sys = dir.File("sys");
  const std::string disk = sys + "/devices/pci0/nvme0n1";
  WriteText(disk + "/device/numa_node", "1\n");
  std::filesystem::create_directories(disk + "/nvme0n1p1");
  std::filesystem::create_directories(sys + "/dev/block");
  std::filesystem::create_directory_symlink(
      disk + "/nvme0n1p1", sys + "/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                               std::to_string(minor(st.st_dev)));
  WriteText(sys + "/devices/system/node/node1/cpulist", "2-3\n");
  std::filesystem::create_directories(sys + "/devices/system/cpu/cpu3/node1");

  EXPECT_EQ(*NumaNodeOfPath(file, sys), 1);
  EXPECT_EQ(CpusOfNode(1, sys), (std::vector<int>{2, 3}));
  EXPECT_EQ(NodeOfCpu(3, sys), 1);
  EXPECT_EQ(NodeOfCpu(0, sys), -1);
  // Node-local allowed cores first, then the rest, cycling.
  EXPECT_EQ(ChooseIoCores(5, 1, {0, 1, 3}, sys), (std::vector<int>{3, 0, 1, 3, 0}));
  EXPECT_EQ(ChooseIoCores(2, -1, {4, 5}, sys), (std::vector<int>{4, 5}));
  EXPECT_TRUE(ChooseIoCores(2, -1, {}, sys).empty());
  EXPECT_TRUE(NumaNodeOfPath(dir.File("missing"), sys).status().IsNotFound());
  EXPECT_TRUE(DeviceIrqCountsOfPath(file, sys, dir.File("proc")).empty());  // no msi_irqs

  // The disk's PCI function has MSI vectors 40 and 41; 41 fired mostly on core 1.
  std::filesystem::create_directories(sys + "/devices/pci0/msi_irqs/40");
  std::filesystem::create_directories(sys + "/devices/pci0/msi_irqs/41");
  WriteText(dir.File("proc/interrupts"),
            "           CPU0       CPU1       CPU2       CPU3\n"
            "  0:         50          0          0          0   IO-APIC   2-edge      timer\n"
            " 40:          1          0          0          0   PCI-MSIX  config\n"
            " 41:         10        900          0         20   PCI-MSIX  req.0\n"
            "NMI:          0          0          0          0   Non-maskable interrupts\n");
  std::vector<uint64_t> irqs = DeviceIrqCountsOfPath(file, sys, dir.File("proc"));
  EXPECT_EQ(irqs, (std::vector<uint64_t>{11, 900, 0, 20}));
  // Node 1 cores (2, 3) first, core 3 before 2 (20 interrupts); then 1 (900) before 0.
  EXPECT_EQ(ChooseIoCores(4, 1, {0, 1, 2, 3}, sys, irqs), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(ChooseIoCores(2, -1, {0, 1, 2, 3}, sys, irqs), (std::vector<int>{1, 3}));
  EXPECT_EQ(*NumaNodeOfPath(file, dir.File("empty_sys")), -1);
}

TEST(TopologyTest, RealSystemAnswers) {
  std::vector<int> allowed = AllowedCpus();
  EXPECT_FALSE(allowed.empty());
  auto node = NumaNodeOfPath("/");
  ASSERT_TRUE(node.ok());
  EXPECT_GE(*node, -1);
  EXPECT_EQ(ChooseIoCores(1, *node, allowed).size(), 1u);
}

}  // namespace
}  // namespace strata::io
