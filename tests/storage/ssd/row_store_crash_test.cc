// strata-test-labels: integration
// Crash simulation for both backends: a child process writes and checkpoints
// in a loop and is killed (SIGKILL) at an arbitrary point, mid-write or
// mid-checkpoint. Reopening must give exactly the last checkpoint the child
// completed: its meta names the iteration, and the content equals a model
// replayed up to that iteration.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 128;
constexpr char kChildEnv[] = "STRATA_ROW_STORE_CRASH_CHILD";
const std::vector<TableSpec> kTables = {{2, "emb", kRowBytes}};

RowStoreOptions OptionsFor(SsdBackend backend, uint32_t format, SsdIndex index,
                           const std::string& dir) {
  RowStoreOptions o;
  o.backend = backend;
  o.ssd_format_version = format;
  o.ssd_index = index;
  o.ssd_segment_bytes = 64 << 10;  // format 2: many segments, the cleaner runs
  o.ssd_range_bits = 2;            // key ranges: merges run
  o.dir = dir;
  o.rocksdb_block_cache_bytes = 8 << 20;
  o.rocksdb_write_buffer_bytes = 1 << 20;
  return o;
}

// Iteration i's writes: puts of version i, then deletes.
std::vector<Key> PutKeys(int i) {
  std::mt19937_64 rng(i);
  std::vector<Key> keys(400);
  for (Key& k : keys) k = rng() % 20000;
  keys[0] = i % 2 ? 0 : kKeyMax;
  return keys;
}
std::vector<Key> DeleteKeys(int i) {
  std::mt19937_64 rng(i + 1000000);
  std::vector<Key> keys(60);
  for (Key& k : keys) k = rng() % 20000;
  return keys;
}
Status RunIteration(RowStore& store, int i) {
  STRATA_RETURN_IF_ERROR(PutRows(store, 2, kRowBytes, PutKeys(i), i, nullptr));
  return store.Delete(2, DeleteKeys(i));
}
void ApplyIteration(int i, Model* model) {
  for (Key k : PutKeys(i)) (*model)[k] = testing::MakeRow(k, i, kRowBytes);
  for (Key k : DeleteKeys(i)) model->erase(k);
}

// The child: runs before main when kChildEnv is set, never returns.
[[noreturn]] void ChildMain(const char* spec) {
  // "<backend 0|1><format 1|2><index c|e|r>:<fd>:<dir>"
  const std::string s(spec);
  const SsdBackend backend = s[0] == '0' ? SsdBackend::kNative : SsdBackend::kRocksDb;
  const uint32_t format = s[1] == '2' ? 2 : 1;
  const SsdIndex index = s[2] == 'e'   ? SsdIndex::kExact
                         : s[2] == 'r' ? SsdIndex::kRanges
                                       : SsdIndex::kCompact;
  const size_t colon = s.find(':', 4);
  const int fd = std::atoi(s.substr(4, colon - 4).c_str());
  auto store = OpenRowStore(OptionsFor(backend, format, index, s.substr(colon + 1)), kTables);
  if (!store.ok()) _exit(2);
  for (int i = 1;; ++i) {
    if (!RunIteration(**store, i).ok()) _exit(3);
    if (!(*store)->Checkpoint(Bytes(std::to_string(i))).ok()) _exit(4);
    if (::write(fd, &i, sizeof(i)) != sizeof(i)) _exit(5);
  }
}

const bool kChildStarted = [] {
  if (const char* spec = std::getenv(kChildEnv)) ChildMain(spec);
  return false;
}();

struct Native {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 1;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};
struct NativeV2 {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};
struct NativeV2Exact {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kExact;
};
struct NativeV2Ranges {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kRanges;
};
struct RocksDb {
  static constexpr SsdBackend kBackend = SsdBackend::kRocksDb;
  static constexpr uint32_t kFormat = 1;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};

template <typename B>
class RowStoreCrashTest : public ::testing::Test {
 protected:
  strata::testing::ScratchDir dir_;
};
using Backends = ::testing::Types<Native, NativeV2, NativeV2Exact, NativeV2Ranges, RocksDb>;
TYPED_TEST_SUITE(RowStoreCrashTest, Backends);

TYPED_TEST(RowStoreCrashTest, KilledChildLeavesLastCheckpointExactly) {
  const std::string dir = this->dir_.path() + "/store";
  std::mt19937 rng(42);
  for (int trial = 0; trial < 3; ++trial) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const std::string spec = std::string(TypeParam::kBackend == SsdBackend::kNative ? "0" : "1") +
                             std::to_string(TypeParam::kFormat) +
                             (TypeParam::kIndex == SsdIndex::kExact    ? "e"
                              : TypeParam::kIndex == SsdIndex::kRanges ? "r"
                                                                       : "c") +
                             ":" + std::to_string(fds[1]) + ":" + dir;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::setenv(kChildEnv, spec.c_str(), 1);
      ::execl("/proc/self/exe", "row_store_crash_child", static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(fds[1]);
    // Let it complete a few checkpoints, then kill it wherever it is.
    const int wait_for = 2 + int(rng() % 4);
    int last = 0;
    while (last < wait_for) {
      ASSERT_EQ(::read(fds[0], &last, sizeof(last)), ssize_t(sizeof(last))) << "child died early";
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exit status " << status;
    ::close(fds[0]);

    auto store = OpenRowStore(
        OptionsFor(TypeParam::kBackend, TypeParam::kFormat, TypeParam::kIndex, dir), kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const std::vector<std::byte> meta = (*store)->CheckpointMeta();
    const int done =
        std::stoi(std::string(reinterpret_cast<const char*>(meta.data()), meta.size()));
    EXPECT_GE(done, last);  // it may have finished one more after its last report
    EXPECT_LE(done, last + 1);
    Model model;
    for (int i = 1; i <= done; ++i) ApplyIteration(i, &model);
    ExpectContent(**store, 2, kRowBytes, model);
    ASSERT_TRUE(RunIteration(**store, done + 1).ok());  // writes after it, then no checkpoint
    store->reset();
    // Reopened again, the store still holds exactly that checkpoint.
    auto again = OpenRowStore(
        OptionsFor(TypeParam::kBackend, TypeParam::kFormat, TypeParam::kIndex, dir), kTables);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ExpectContent(**again, 2, kRowBytes, model);
    again->reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
}

}  // namespace
}  // namespace strata::storage
