// strata-test-labels: unit
// strata-test-timeout: 600
// Every durability call of a native checkpoint fails in turn: each fsync,
// directory fsync, rename, truncate, unlink and write of a checkpoint that
// also garbage-collects (positions enumerated by a counting run, not
// sampled), writes failing whole or torn, fsyncs failing and losing what
// they should have made durable. After each fault the workload goes on
// writing (with or without another checkpoint), then the process dies or the
// power fails; the
// reopened store must hold exactly one checkpoint that may have become
// durable, never a row no checkpoint held.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

const std::vector<TableSpec> kTables = {{1, "small", 64}, {2, "large", 200}};
constexpr Key kKeys = 300;

struct Fault {
  io::FaultOp op;
  io::FaultKind kind;
};

std::string Describe(const Fault& f, uint64_t nth, bool power_loss) {
  return std::string(io::FaultOpName(f.op)) +
         (f.kind == io::FaultKind::kShortWrite ? " (torn)" : "") + " #" + std::to_string(nth) +
         (power_loss ? ", then power loss" : ", then the process dies");
}

class Sweep {
 public:
  // `gc`: checkpoint 2 garbage-collects (rewrites every table into a new
  // file); otherwise it syncs the pages written since checkpoint 1.
  // `format`: the native format (2 has no garbage collection at
  // checkpoints: its cleaner runs in the writes); `index`: format 2's DRAM
  // index.
  explicit Sweep(bool gc, uint32_t format = 1, SsdIndex index = SsdIndex::kCompact)
      : env_(io::Env::Default()), gc_(gc), format_(format), index_(index) {}

  RowStoreOptions Options() {
    RowStoreOptions o;
    o.backend = SsdBackend::kNative;
    o.ssd_format_version = format_;
    o.ssd_segment_bytes = 64 << 10;
    o.ssd_index = index_;
    o.ssd_range_bits = 2;  // key ranges: 4 per table, so 4 range heads to seal
    o.dir = dir_.path() + "/store";
    o.env = &env_;
    o.gc_space_amp_trigger = gc_ ? 1.2 : 1000.0;
    return o;
  }

  // Checkpoint `n` of the workload, noting what may be durable after it.
  void Checkpoint(RowStore& store, int n) {
    Status s = store.Checkpoint(Bytes(std::to_string(n)));
    if (s.ok()) possible_.clear();
    possible_.insert(n);  // a failed checkpoint may be durable too (a switch in doubt)
    if (s.ok()) last_ok_ = n;
  }

  // Writes of round `version` to both tables (failures ignored: a failed
  // write changes nothing, and the model is only updated on success).
  void Write(RowStore& store, uint64_t version, Key stride) {
    for (const TableSpec& t : kTables) {
      std::vector<Key> keys;
      for (Key k = version % stride; k < kKeys; k += stride) keys.push_back(k * 1000003);
      (void)PutRows(store, t.id, t.row_bytes, keys, version, &current_[t.id]);
      if (version % 2 == 0) {
        const std::vector<Key> gone = {keys[0], keys[keys.size() / 2]};
        if (store.Delete(t.id, gone).ok()) {
          for (Key k : gone) current_[t.id].erase(k);
        }
      }
    }
  }
  void Snapshot(int n) { models_[n] = current_; }

  // Runs the workload with `fault` at its nth matching call inside
  // checkpoint 2 (nth = 0: counts the matching calls instead) and returns
  // that count.
  uint64_t Run(const Fault& fault, uint64_t nth, bool power_loss, bool checkpoint_after) {
    auto opened = OpenRowStore(Options(), kTables);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return 0;
    auto store = std::move(opened).value();
    Snapshot(0);
    Write(*store, 1, 1);
    Snapshot(1);
    Checkpoint(*store, 1);
    EXPECT_EQ(last_ok_, 1);
    Write(*store, 2, 1);  // overwrites everything: garbage for checkpoint 2 to collect
    Snapshot(2);
    io::FaultRule rule{.op = fault.op, .kind = fault.kind, .short_read_bytes = 4096};
    rule.nth_call = nth == 0 ? std::numeric_limits<uint64_t>::max() : nth;
    rule.times_max = 1;
    rule.sync_error_drops_writes = true;
    const uint64_t calls_before = env_.calls_seen(fault.op);
    EXPECT_TRUE(env_.AddRule(rule).ok());
    Checkpoint(*store, 2);
    env_.ClearRules();
    const uint64_t calls = env_.calls_seen(fault.op) - calls_before;
    Write(*store, 3, 2);
    Snapshot(3);
    if (checkpoint_after) Checkpoint(*store, 3);
    for (uint64_t version = 4; version < 8; ++version) Write(*store, version, 3);
    if (power_loss) EXPECT_TRUE(env_.DropUnsyncedWrites().ok());
    store.reset();  // the process dies: nothing is flushed or checkpointed

    auto reopened = OpenRowStore(Options(), kTables);
    EXPECT_TRUE(reopened.ok()) << reopened.status().ToString();
    if (!reopened.ok()) return calls;
    auto& again = *reopened.value();
    const std::vector<std::byte> meta = again.CheckpointMeta();
    const int n =
        meta.empty()
            ? 0
            : std::stoi(std::string(reinterpret_cast<const char*>(meta.data()), meta.size()));
    EXPECT_TRUE(possible_.count(n)) << "reopened at checkpoint " << n << ", last ok " << last_ok_;
    for (const TableSpec& t : kTables) {
      SCOPED_TRACE("table " + t.name + " at checkpoint " + std::to_string(n));
      ExpectContent(again, t.id, t.row_bytes, models_[n][t.id]);
    }
    return calls;
  }

 private:
  strata::testing::ScratchDir dir_;
  io::FaultEnv env_;
  std::map<TableId, Model> current_;
  std::map<int, std::map<TableId, Model>> models_;
  const bool gc_;
  const uint32_t format_;
  const SsdIndex index_;
  std::set<int> possible_ = {0};
  int last_ok_ = 0;
};

// Every position of every fault of `faults` in a checkpoint of `format`,
// with and without garbage collection (`gcs`), format 2 with `index`;
// returns the runs.
uint64_t SweepAll(uint32_t format, const std::vector<bool>& gcs,
                  SsdIndex index = SsdIndex::kCompact) {
  const std::vector<Fault> faults = {
      {io::FaultOp::kSync, io::FaultKind::kError},
      {io::FaultOp::kSyncDir, io::FaultKind::kError},
      {io::FaultOp::kRename, io::FaultKind::kError},
      {io::FaultOp::kTruncate, io::FaultKind::kError},
      {io::FaultOp::kDelete, io::FaultKind::kError},
      {io::FaultOp::kWrite, io::FaultKind::kError},
      {io::FaultOp::kWrite, io::FaultKind::kShortWrite},
  };
  uint64_t runs = 0;
  for (bool gc : gcs) {
    for (const Fault& fault : faults) {
      const uint64_t positions = Sweep(gc, format, index).Run(fault, 0, false, false);
      const std::string name = std::string(io::FaultOpName(fault.op)) +
                               (fault.kind == io::FaultKind::kShortWrite ? " (torn)" : "") +
                               (gc ? ", checkpoint with GC" : ", checkpoint without GC") +
                               ", format " + std::to_string(format);
      std::printf("%s: %llu calls\n", name.c_str(), static_cast<unsigned long long>(positions));
      SCOPED_TRACE(name + ": " + std::to_string(positions) + " calls");
      // A checkpoint that garbage-collects makes every kind of call; one
      // that does not deletes no file.
      if (gc || fault.op != io::FaultOp::kDelete) EXPECT_GE(positions, 1u);
      for (uint64_t nth = 1; nth <= positions; ++nth) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool power_loss = variant % 2 == 1, checkpoint_after = variant >= 2;
          SCOPED_TRACE(Describe(fault, nth, power_loss) +
                       (checkpoint_after ? " (a checkpoint between)" : ""));
          Sweep(gc, format, index).Run(fault, nth, power_loss, checkpoint_after);
          ++runs;
          if (::testing::Test::HasFatalFailure()) return runs;
        }
      }
    }
  }
  std::printf("fault sweep: %llu runs\n", static_cast<unsigned long long>(runs));
  return runs;
}

TEST(NativeFaultSweepTest, EveryDurabilityCallOfACheckpointFailsInTurn) {
  EXPECT_GE(SweepAll(1, {true, false}), 20u);
}

TEST(NativeFaultSweepTest, EveryDurabilityCallOfAVersion2CheckpointFailsInTurn) {
  EXPECT_GE(SweepAll(2, {false}), 20u);
}

TEST(NativeFaultSweepTest, EveryDurabilityCallOfAKeyRangesCheckpointFailsInTurn) {
  EXPECT_GE(SweepAll(2, {false}, SsdIndex::kRanges), 20u);
}

TEST(NativeFaultSweepTest, EveryDurabilityCallOfAVersion2CheckpointFailsInTurnExactIndex) {
  EXPECT_GE(SweepAll(2, {false}, SsdIndex::kExact), 20u);
}

}  // namespace
}  // namespace strata::storage
