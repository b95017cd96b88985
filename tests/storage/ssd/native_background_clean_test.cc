// strata-test-labels: unit
// Format 2's background cleaner (docs/ssd-format.md, "Cleaning"): a
// cleaning step held by a hook after its victim read or after its copies'
// write (no table lock held there) while gets, puts and deletes go on; a
// put racing a copy of its key keeps the put's row, before and after a
// reopen; puts over the stall bound wait for the cleaner (backpressure)
// while gets still run; space amplification stays under the stall bound
// under sustained overwrites; a write error of the cleaner surfaces on the
// next write and loses nothing. Each with either DRAM index, and with key
// ranges (SsdIndex::kRanges, four ranges), whose background steps are merges:
// held after the range's log read (kVictimRead) or after its new base's write
// (kMergeWritten, in place of the copies' write), so a put racing a merge's
// switch keeps the put's row and a merge's write error surfaces the same way.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr TableId kTable = 6;
constexpr uint32_t kRowBytes = 200;  // 224-byte records, 292 per 64 KiB segment
constexpr Key kKeys = 4000;

// The clean hook: once armed, holds the cleaner at the next `hold_at` (and
// then, if given, at the next `then`), each until Release(); counts the
// steps ended and the puts that waited (stalls).
class CleanGate {
 public:
  explicit CleanGate(CleanPoint hold_at, std::optional<CleanPoint> then = std::nullopt) {
    points_.push_back(hold_at);
    if (then) points_.push_back(*then);
  }
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  void operator()(CleanPoint point) {
    std::unique_lock<std::mutex> lock(mu_);
    if (point == CleanPoint::kStall) ++stalls_;
    if (point == CleanPoint::kStepEnd) ++steps_ended_;
    cv_.notify_all();
    if (!armed_ || holds_ == points_.size() || point != points_[holds_]) return;
    ++holds_;
    if (holds_ == 1) ended_at_hold_ = steps_ended_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_ >= holds_; });
  }
  bool held() {
    std::lock_guard<std::mutex> lock(mu_);
    return holds_ > 0;
  }
  // Waits until the cleaner reached its `n`th hold.
  void WaitHeld(size_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return holds_ >= n; });
  }
  // Waits until more than `seen` puts waited for the cleaner.
  void WaitStall(int seen) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stalls_ > seen; });
  }
  // Waits until the held step ended.
  void WaitHeldStepEnded() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock,
             [&] { return holds_ > 0 && released_ >= holds_ && steps_ended_ > ended_at_hold_; });
  }
  // Lets the cleaner past its current (or next) hold.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    ++released_;
    cv_.notify_all();
  }
  int stalls() {
    std::lock_guard<std::mutex> lock(mu_);
    return stalls_;
  }
  int steps_ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_ended_;
  }

 private:
  std::vector<CleanPoint> points_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  size_t holds_ = 0, released_ = 0;
  int stalls_ = 0;
  int steps_ended_ = 0;
  int ended_at_hold_ = 0;
};

// Every model key reads its row through MultiGet (Scan is in ExpectContent).
void ExpectGets(RowStore& store, const Model& model) {
  std::vector<Key> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  std::vector<std::byte> rows(keys.size() * kRowBytes);
  std::vector<uint8_t> found(keys.size());
  ASSERT_TRUE(store.MultiGet(kTable, keys, rows, found).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(found[i], 1) << "key " << keys[i];
    ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, model.at(keys[i]).data(), kRowBytes), 0)
        << "row of key " << keys[i];
  }
}

std::vector<Key> AllKeys() {
  std::vector<Key> keys;
  for (Key k = 0; k < kKeys; ++k) keys.push_back(k);
  return keys;
}

std::vector<Key> RandomBatch(std::mt19937_64& rng, size_t n) {
  std::vector<Key> batch(n);
  for (Key& k : batch) k = rng() % kKeys;
  return batch;
}

class NativeBackgroundCleanTest : public testing::NativeRowStoreFixture,
                                  public ::testing::WithParamInterface<SsdIndex> {
 protected:
  NativeBackgroundCleanTest() : NativeRowStoreFixture(kTable, kRowBytes) {
    format_ = 2;
    ssd_index_ = GetParam();
  }
  // Format 2, background cleaning, `gate` as the clean hook when given.
  std::unique_ptr<RowStore> OpenClean(CleanGate* gate, double stall_slack) {
    RowStoreOptions o = Options();
    o.ssd_segment_bytes = 64 << 10;
    o.gc_space_amp_stall_slack = stall_slack;
    o.ssd_range_bits = 2;  // kRanges: four ranges of about 1,000 keys
    if (gate != nullptr) o.clean_hook = [gate](CleanPoint p) { (*gate)(p); };
    auto store = OpenRowStore(o, {{kTable, "emb", kRowBytes}});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  // Loads every key (and with `checkpointed`, checkpoints them as "base"),
  // arms `gate` and overwrites (puts never stall: a large slack) until the
  // cleaner holds there.
  void LoadUntilHeld(RowStore& store, CleanGate& gate, std::mt19937_64& rng, Model* model,
                     Model* checkpointed = nullptr) {
    ASSERT_TRUE(PutRows(store, kTable, kRowBytes, AllKeys(), 0, model).ok());
    if (checkpointed != nullptr) {
      ASSERT_TRUE(store.Checkpoint(Bytes("base")).ok());
      *checkpointed = *model;
    }
    gate.Arm();
    for (int step = 1; step < 200 && !gate.held(); ++step) {
      ASSERT_TRUE(PutRows(store, kTable, kRowBytes, RandomBatch(rng, 256), step, model).ok());
    }
    gate.WaitHeld();  // the table is over its target: the cleaner gets there
  }
  // A store (puts never stall) whose cleaner holds at `gate`'s point after
  // LoadUntilHeld with a generator of `seed`; nullptr on failure.
  std::unique_ptr<RowStore> OpenHeld(CleanGate& gate, uint64_t seed, Model* model,
                                     Model* checkpointed = nullptr) {
    auto store = OpenClean(&gate, 1000.0);
    if (store == nullptr) return nullptr;
    std::mt19937_64 rng(seed);
    LoadUntilHeld(*store, gate, rng, model, checkpointed);
    return store;
  }
  void ExpectReopenGives(std::unique_ptr<RowStore>* store, const Model& model) {
    ASSERT_TRUE((*store)->Checkpoint(Bytes("end")).ok());
    store->reset();
    *store = OpenClean(nullptr, 0.1);
    ASSERT_NE(*store, nullptr);
    EXPECT_EQ((*store)->CheckpointMeta(), Bytes("end"));
    ExpectContent(**store, kTable, kRowBytes, model);
    EXPECT_EQ((*store)->Stats().live_rows, model.size());
  }
  // Where a step's output is written and not yet switched: the cleaner's
  // copies, or a merge's new base.
  CleanPoint Written() const {
    return ssd_index_ == SsdIndex::kRanges ? CleanPoint::kMergeWritten : CleanPoint::kCopiesWritten;
  }
};
INSTANTIATE_TEST_SUITE_P(, NativeBackgroundCleanTest,
                         ::testing::Values(SsdIndex::kCompact, SsdIndex::kExact, SsdIndex::kRanges),
                         [](const ::testing::TestParamInfo<SsdIndex>& info) {
                           return info.param == SsdIndex::kExact    ? "Exact"
                                  : info.param == SsdIndex::kRanges ? "Ranges"
                                                                    : "Compact";
                         });

// Held after the victim read, then after the copies' write: gets, puts and
// deletes complete meanwhile (the step holds no table lock across its I/O).
TEST_P(NativeBackgroundCleanTest, GetsAndPutsProceedWhileACleaningStepIsHeld) {
  for (CleanPoint point : {CleanPoint::kVictimRead, Written()}) {
    SCOPED_TRACE(static_cast<int>(point));
    std::filesystem::remove_all(Options().dir);
    CleanGate gate(point);
    Model model;
    auto store = OpenHeld(gate, 21, &model);
    ASSERT_NE(store, nullptr);
    std::mt19937_64 rng(27);
    ExpectGets(*store, model);
    for (int step = 0; step < 8; ++step) {
      ASSERT_TRUE(
          PutRows(*store, kTable, kRowBytes, RandomBatch(rng, 500), 1000 + step, &model).ok());
    }
    const std::vector<Key> gone = {1, 2, 3, 500};
    ASSERT_TRUE(store->Delete(kTable, gone).ok());
    for (Key k : gone) model.erase(k);
    ExpectGets(*store, model);
    gate.Release();
    gate.WaitHeldStepEnded();
    ExpectContent(*store, kTable, kRowBytes, model, gone);
    ExpectReopenGives(&store, model);
  }
}

// Every key is put again while a step's copies are written but not yet
// switched: each put wins over the copy of its key, now and after a reopen
// (the rebuild takes a key's newest record).
TEST_P(NativeBackgroundCleanTest, APutRacingACleanerCopyKeepsThePutsRow) {
  CleanGate gate(Written());
  Model model;
  auto store = OpenHeld(gate, 22, &model);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, AllKeys(), 5000, &model).ok());
  gate.Release();
  gate.WaitHeldStepEnded();
  ExpectContent(*store, kTable, kRowBytes, model);
  EXPECT_EQ(store->Stats().live_rows, kKeys);
  ExpectReopenGives(&store, model);
}

// No slack above the target: with the cleaner held, a writer's put soon
// finds its table over the stall bound and waits; gets run meanwhile; once
// released, the cleaner reclaims the room and the put completes.
TEST_P(NativeBackgroundCleanTest, PutsOverTheStallBoundWaitForTheCleanerWhileGetsRun) {
  // A merge credits its log's read (below): it is held before.
  CleanGate gate(ssd_index_ == SsdIndex::kRanges ? CleanPoint::kMergeStart
                                                 : CleanPoint::kVictimRead);
  auto store = OpenClean(&gate, 0.0);
  ASSERT_NE(store, nullptr);
  Model model;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, AllKeys(), 0, &model).ok());
  const Model loaded = model;
  gate.Arm();
  std::atomic<bool> stop{false};
  std::atomic<int> puts_done{0};
  Model written;  // the writer's model, read after join
  std::thread writer([&] {
    std::mt19937_64 rng(23);
    for (int step = 1; !stop.load(); ++step) {
      ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, RandomBatch(rng, 256), step, &written).ok());
      puts_done.fetch_add(1);
    }
  });
  gate.WaitHeld();
  gate.WaitStall(0);
  const int done_at_stall = puts_done.load();
  // A put stalled while the cleaner is held waits for reclaimed room, which
  // the held cleaner cannot give. The stall seen may be older than the hold:
  // that put may still return on the credit of a step that ended before the
  // hold, and the writer's next put then stalls with the cleaner held. So at
  // most one put returns while held. Gets of keys no put holds go on.
  std::vector<Key> keys = AllKeys();
  std::vector<std::byte> rows(keys.size() * kRowBytes);
  std::vector<uint8_t> found(keys.size());
  ASSERT_TRUE(store->MultiGet(kTable, keys, rows, found).ok());
  for (uint8_t f : found) ASSERT_EQ(f, 1);
  EXPECT_LE(puts_done.load(), done_at_stall + 1);
  stop = true;
  gate.Release();
  writer.join();  // the stalled put completed once the cleaner went on
  // The put in flight at the stall, and at most the one after it.
  EXPECT_GE(puts_done.load(), done_at_stall);
  EXPECT_LE(puts_done.load(), done_at_stall + 2);
  for (auto& [k, row] : written) model[k] = row;
  ExpectContent(*store, kTable, kRowBytes, model);
  EXPECT_GE(gate.stalls(), 1);
  ExpectReopenGives(&store, model);
}

// Key ranges: a merge credits the log records it frees as its I/O goes
// (a part of its log, base and output each time), so a put at the stall
// bound waits for about its own share of a merge, not for the whole merge
// (at 20M rows a whole merge took 265 ms at the median). Held before its
// reads until a put stalls, then after its new base's write, before its
// switch frees anything: the stalled put has completed by then.
class NativeMergeCreditTest : public NativeBackgroundCleanTest {};
INSTANTIATE_TEST_SUITE_P(Ranges, NativeMergeCreditTest, ::testing::Values(SsdIndex::kRanges));

TEST_P(NativeMergeCreditTest, APutAtTheStallBoundWaitsForItsShareOfAMergeNotAllOfIt) {
  CleanGate gate(CleanPoint::kMergeStart, CleanPoint::kMergeWritten);
  auto store = OpenClean(&gate, 0.0);
  ASSERT_NE(store, nullptr);
  Model model;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, AllKeys(), 0, &model).ok());
  gate.Arm();
  std::mutex mu;
  std::condition_variable cv;
  int puts_done = 0;
  bool stop = false;
  Model written;  // the writer's model, read after join
  std::thread writer([&] {
    std::mt19937_64 rng(29);
    for (int step = 1;; ++step) {
      ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, RandomBatch(rng, 16), step, &written).ok());
      std::lock_guard<std::mutex> lock(mu);
      ++puts_done;
      cv.notify_all();
      if (stop) return;
    }
  });
  gate.WaitHeld(1);  // the merge credits nothing before this hold
  gate.WaitStall(0);
  int done_at_stall = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    done_at_stall = puts_done;
  }
  const int ended = gate.steps_ended();
  gate.Release();
  gate.WaitHeld(2);  // the new base is written; nothing is freed yet
  bool went_on = false;
  {
    // The wait's bound only turns a regression into a failure, not a hang.
    std::unique_lock<std::mutex> lock(mu);
    went_on =
        cv.wait_for(lock, std::chrono::seconds(60), [&] { return puts_done > done_at_stall; });
    stop = true;
  }
  EXPECT_TRUE(went_on) << "the stalled put waited for the whole merge";
  EXPECT_EQ(gate.steps_ended(), ended) << "the merge ended before the check";
  gate.Release();
  writer.join();
  for (auto& [k, row] : written) model[k] = row;
  ExpectContent(*store, kTable, kRowBytes, model);
  ExpectReopenGives(&store, model);
}

// Twenty table-sizes of uniform overwrites in batches of 500 (a 4.4 MB
// table of 64 KiB segments): after every put the segments stay within the
// stall bound (1.6) plus one batch and the heads' and the small-table
// slack's segments; the content holds and write amplification stays bounded.
TEST_P(NativeBackgroundCleanTest, SpaceAmpStaysUnderTheStallBoundUnderSustainedOverwrites) {
  auto store = OpenClean(nullptr, 0.1);
  ASSERT_NE(store, nullptr);
  constexpr Key kMany = 20000;
  constexpr size_t kBatch = 500;
  Model model;
  std::vector<Key> all;
  for (Key k = 0; k < kMany; ++k) all.push_back(k);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, all, 0, &model).ok());
  const RowStoreStats loaded = store->Stats();
  std::mt19937_64 rng(24);
  double worst = 0;
  // Key ranges: each of the four ranges also holds a partly filled head and
  // base segment, and a merge writes its range's new base (a quarter of
  // the rows here) before it frees the old one and the log it folded in;
  // and the load leaves every row in the log (no base yet),
  // which the first merges fold into bases while the puts wait for them
  // (each stalled put for about one merge): the bound is checked once two
  // table-sizes of puts have passed (it failed at put 15-18 with four
  // copies of this test on two cores).
  const bool ranges = ssd_index_ == SsdIndex::kRanges;
  const uint64_t slack_segments = ranges ? 6 + 2 * 4 : 6;
  const int first_checked = ranges ? int(2 * kMany / kBatch) : 1;
  for (int step = 1; step <= int(20 * kMany / kBatch); ++step) {
    std::vector<Key> batch(kBatch);
    for (Key& k : batch) k = rng() % kMany;
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, batch, step, &model).ok());
    const RowStoreStats s = store->Stats();
    const double slack =
        double(kBatch * ssd::RecordBytes(kRowBytes) + slack_segments * (64 << 10)) /
        double(s.live_bytes);
    if (step < first_checked) continue;
    ASSERT_LE(s.space_amp(), 1.5 + 0.1 + (ranges ? 0.25 : 0.0) + slack) << "after put " << step;
    worst = std::max(worst, s.space_amp());
  }
  const RowStoreStats s = store->Stats();
  const double write_amp = double(s.bytes_written - loaded.bytes_written) /
                           double(s.user_bytes_written - loaded.user_bytes_written);
  // Bounded, not the 3 (checked by `strata bench ssd` at 20M rows:
  // 1.67): with 64 KiB segments the victims the cleaner finds depend on
  // when it runs: 2.73 in a release build, 3.02-3.03 under tsan. Key
  // ranges: each merge rewrites its range's whole base for the range's log
  // (a quarter of the log budget here, 64 KiB heads in 64 KiB segments):
  // 3.66 in a release build (the bench at 20M rows, 64 ranges: 2.67-2.88).
  EXPECT_LE(write_amp, ssd_index_ == SsdIndex::kRanges ? 4.0 : 3.5);
  RecordProperty("space_amp_max", std::to_string(worst));
  RecordProperty("write_amp", std::to_string(write_amp));
  ExpectContent(*store, kTable, kRowBytes, model);
  ExpectReopenGives(&store, model);
}

// The cleaner's copy write fails (held after its victim read, the fault is
// added, then released): the step changes nothing and is counted, no put
// sees its error (the step is retried after its back-off), every row reads
// as before and cleaning goes on; power loss gives the last checkpoint, a
// checkpoint gives everything.
TEST_P(NativeBackgroundCleanTest, ACleanerWriteErrorIsRetriedAndLosesNothing) {
  CleanGate gate(CleanPoint::kVictimRead);
  Model model, checkpointed;
  auto store = OpenHeld(gate, 25, &model, &checkpointed);
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(26);
  io::FaultRule rule;
  rule.op = io::FaultOp::kWrite;
  rule.path_substring = ".log";
  rule.times_max = 1;
  ASSERT_TRUE(fault_env_.AddRule(rule).ok());
  gate.Release();
  gate.WaitHeldStepEnded();
  EXPECT_EQ(fault_env_.faults_injected(), 1u) << "the held step wrote no copies";
  fault_env_.ClearRules();
  EXPECT_EQ(store->Stats().merge_failures, 1u);
  ExpectContent(*store, kTable, kRowBytes, model);
  const std::vector<Key> batch = RandomBatch(rng, 300);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, batch, 901, &model).ok());
  for (int step = 0; step < 20; ++step) {  // cleaning goes on
    ASSERT_TRUE(
        PutRows(*store, kTable, kRowBytes, RandomBatch(rng, 256), 1000 + step, &model).ok());
  }
  ExpectContent(*store, kTable, kRowBytes, model);
  store.reset();  // stops the cleaner: FaultEnv drops writes with no I/O in flight
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  store = OpenClean(nullptr, 0.1);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("base"));
  ExpectContent(*store, kTable, kRowBytes, checkpointed);
  model = checkpointed;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, batch, 902, &model).ok());
  ExpectReopenGives(&store, model);
}

}  // namespace
}  // namespace strata::storage
