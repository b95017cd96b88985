// strata-test-labels: unit
// Merges of the key-ranges layout that fail, and merges beside checkpoints
// (docs/ssd-format.md, "Merge and cleaning errors", "Merges and
// checkpoints"): a failed merge fails no put and no checkpoint, is retried
// only after its back-off, and becomes one sticky error naming the table,
// the range and the file once it has failed kStuckFailures times in a row,
// refusing (applying nothing) only the puts past the space bound; the space
// bound holds while merges fail; a merge that then succeeds clears it. A
// checkpoint taken while a merge runs does not wait for it, and a reopen
// gives that checkpoint exactly, before and after the merge's switch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr TableId kTable = 4;
constexpr uint32_t kRowBytes = 200;  // 224-byte records, 292 per 64 KiB segment
constexpr Key kKeys = 3000;
constexpr uint64_t kHour = 3600ull * 1000 * 1000;  // microseconds

class NativeMergeErrorsTest : public ::testing::Test {
 protected:
  RowStoreOptions Options(bool background, uint32_t range_bits, uint64_t backoff_us) {
    RowStoreOptions o;
    o.backend = SsdBackend::kNative;
    o.ssd_format_version = 2;
    o.ssd_index = SsdIndex::kRanges;
    o.ssd_range_bits = range_bits;
    o.ssd_segment_bytes = 64 << 10;
    o.ssd_background_cleaning = background;
    o.merge_retry_backoff_us = backoff_us;
    o.dir = dir_.path() + "/" + store_name_;
    o.env = &env_;
    o.clean_hook = [this](CleanPoint p) { OnHook(p); };
    return o;
  }
  std::unique_ptr<RowStore> Open(const RowStoreOptions& o) {
    auto store = OpenRowStore(o, {{kTable, "emb", kRowBytes}});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Every merge from now on fails at its first read after `point`
  // (kMergeStart: reading its log; kVictimRead: reading its base, after the
  // log's reads credited stalled puts), until Disarm.
  void FailMergesAt(CleanPoint point) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_at_ = point;
    failing_ = true;
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = false;
    env_.ClearRules();
  }
  void OnHook(CleanPoint p) {
    std::unique_lock<std::mutex> lock(mu_);
    if (p == CleanPoint::kMergeStart) ++merge_starts_;
    if (p == CleanPoint::kMergeWritten) ++merges_written_;
    if (failing_ && p == fail_at_) {
      io::FaultRule rule;
      rule.op = io::FaultOp::kRead;
      rule.path_substring = dir_.path();
      rule.times_max = 1;
      EXPECT_TRUE(env_.AddRule(rule).ok());
    }
    if (hold_merge_ && p == CleanPoint::kMergeWritten) {
      hold_merge_ = false;
      held_ = true;
      cv_.notify_all();
      // Bounded, so that a checkpoint that waits for the merge shows as a
      // failure of the test instead of a hang.
      checkpoint_while_held_ =
          cv_.wait_for(lock, std::chrono::seconds(20), [&] { return release_; });
    }
  }
  int merge_starts() {
    std::lock_guard<std::mutex> lock(mu_);
    return merge_starts_;
  }
  int merges_written() {
    std::lock_guard<std::mutex> lock(mu_);
    return merges_written_;
  }

  // Batches of 40 keys of [0, kKeys) at versions *version, *version + 1,
  // ... until `until` holds or a put fails (returned); Internal after
  // kBatchesMax batches.
  static constexpr uint64_t kBatchesMax = 20000;
  Status PutUntil(RowStore& store, uint64_t* version, Model* model,
                  const std::function<bool()>& until) {
    for (uint64_t n = 0; !until(); ++n) {
      if (n == kBatchesMax) return Status::Internal("no put refused and no condition met");
      std::vector<Key> keys;
      for (Key k = 0; k < 40; ++k) keys.push_back((*version * 37 + k * 101) % kKeys);
      STRATA_RETURN_IF_ERROR(PutRows(store, kTable, kRowBytes, keys, (*version)++, model));
    }
    return Status::Ok();
  }

  strata::testing::ScratchDir dir_;
  std::string store_name_ = "store";
  io::FaultEnv env_{io::Env::Default()};
  std::mutex mu_;
  std::condition_variable cv_;
  bool failing_ = false;
  CleanPoint fail_at_ = CleanPoint::kMergeStart;
  int merge_starts_ = 0;
  int merges_written_ = 0;
  bool hold_merge_ = false;
  bool held_ = false;
  bool release_ = false;
  bool checkpoint_while_held_ = false;
};

// One range, a back-off far longer than the test: the merge that failed is
// not retried by the writes after it, none of which fails; checkpoints pass;
// every row stays readable and a reopen gives the checkpoint.
TEST_F(NativeMergeErrorsTest, FailedMergeWaitsForItsBackoffAndFailsNothingElse) {
  Model model;
  uint64_t version = 1;
  auto store = Open(Options(/*background=*/false, /*range_bits=*/0, /*backoff_us=*/kHour));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return merges_written() > 0; }).ok());
  FailMergesAt(CleanPoint::kMergeStart);
  const int starts = merge_starts();
  ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return merge_starts() > starts; }).ok())
      << "a failed merge failed the put that ran it";
  EXPECT_EQ(store->Stats().merge_failures, 1u);
  // Far past the merge trigger: no retry before the back-off ends.
  const uint64_t until = version + 200;
  ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return version >= until; }).ok());
  EXPECT_EQ(merge_starts(), starts + 1) << "the failed merge was retried inside its back-off";
  EXPECT_EQ(store->Stats().merge_failures, 1u);
  Disarm();
  ASSERT_TRUE(store->Checkpoint({}).ok());
  ExpectContent(*store, kTable, kRowBytes, model);
  store.reset();
  store = Open(Options(false, 0, kHour));
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model);
}

// Merges failing every time, retried at once (back-off 0): after
// kStuckFailures in a row the table is stuck; puts go on until the table
// reaches its space bound, where a put is refused with one error naming the
// table, the key range and the file, and applies nothing. A checkpoint
// still succeeds and every row reads; once merges succeed again puts pass.
TEST_F(NativeMergeErrorsTest, LastingFailureIsOneStickyErrorAtTheSpaceBound) {
  for (const bool background : {false, true}) {
    SCOPED_TRACE(background ? "background merges" : "merges in the writes");
    store_name_ = background ? "background" : "in-writes";
    Model model;
    uint64_t version = 1;
    // Back-off 0 in the writes; 1 ms (to 64 ms) for the cleaner thread, so
    // that it does not spin while it fails.
    const uint64_t backoff_us = background ? 1000 : 0;
    auto store = Open(Options(background, /*range_bits=*/1, backoff_us));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return merges_written() > 0; }).ok());
    FailMergesAt(CleanPoint::kMergeStart);
    Status refused = PutUntil(*store, &version, &model, [] { return false; });
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(refused.IsIOError()) << refused.ToString();
    const std::string what = refused.ToString();
    EXPECT_NE(what.find("table emb"), std::string::npos) << what;
    EXPECT_NE(what.find("key range"), std::string::npos) << what;
    EXPECT_NE(what.find(dir_.path() + "/" + store_name_ + "/"), std::string::npos) << what;
    EXPECT_NE(what.find("in a row"), std::string::npos) << what;
    const RowStoreStats st = store->Stats();
    EXPECT_GE(st.merge_failures, 4u);
    // The space bound held: the base (records of 224 bytes for rows of
    // 200, each range's last segment partly filled), the log at most its
    // budget plus the stall slack (0.45 of the live bytes) or the bound's
    // slack of a segment per range plus 4, and a batch's fresh segment.
    EXPECT_LE(double(st.file_bytes), 1.25 * double(st.live_bytes) +
                                         std::max(0.45 * double(st.live_bytes), 6.0 * 65536) +
                                         3.0 * 65536)
        << "file bytes " << st.file_bytes << " for " << st.live_bytes << " live";
    // The refused put applied nothing; every row reads; a checkpoint passes.
    ExpectContent(*store, kTable, kRowBytes, model);
    ASSERT_TRUE(store->Checkpoint({}).ok());
    Disarm();
    const uint64_t until = version + 100;
    const Status again = PutUntil(*store, &version, &model, [&] { return version >= until; });
    ASSERT_TRUE(again.ok()) << again.ToString();
    ASSERT_TRUE(store->Checkpoint({}).ok());
    ExpectContent(*store, kTable, kRowBytes, model);
    store.reset();
    store = Open(Options(background, 1, backoff_us));
    ASSERT_NE(store, nullptr);
    ExpectContent(*store, kTable, kRowBytes, model);
  }
}

// Background merges that fail after their log's reads credited the puts
// waiting at the stall bound: the credits are taken back, so the space
// bound holds (the puts wait, then are refused once the table is stuck)
// instead of letting puts through for room never reclaimed.
TEST_F(NativeMergeErrorsTest, CreditsOfAFailedMergeAreTakenBack) {
  Model model;
  uint64_t version = 1;
  auto store = Open(Options(/*background=*/true, /*range_bits=*/0, /*backoff_us=*/1000));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return merges_written() > 0; }).ok());
  FailMergesAt(CleanPoint::kVictimRead);
  Status refused = PutUntil(*store, &version, &model, [] { return false; });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.ToString().find("in a row"), std::string::npos) << refused.ToString();
  const RowStoreStats st = store->Stats();
  EXPECT_LE(double(st.file_bytes), 1.25 * double(st.live_bytes) +
                                       std::max(0.45 * double(st.live_bytes), 5.0 * 65536) +
                                       3.0 * 65536)
      << "file bytes " << st.file_bytes << " for " << st.live_bytes << " live";
  Disarm();
  ExpectContent(*store, kTable, kRowBytes, model);
}

// A checkpoint while a merge runs (held at its start, the cleaning lock
// taken) completes without waiting for it; the store reopened after the
// merge's switch, with nothing checkpointed since, gives that checkpoint.
TEST_F(NativeMergeErrorsTest, CheckpointDoesNotWaitForARunningMerge) {
  Model model;
  std::mutex model_mu;
  uint64_t version = 1;
  auto store = Open(Options(/*background=*/false, /*range_bits=*/1, /*backoff_us=*/0));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutUntil(*store, &version, &model, [&] { return merges_written() > 0; }).ok());
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_merge_ = true;
  }
  // The writer's put runs the next merge (in the writes), which holds.
  Model before;
  std::thread writer([&] {
    Model local;
    {
      std::lock_guard<std::mutex> lock(model_mu);
      local = model;
    }
    EXPECT_TRUE(PutUntil(*store, &version, &local, [&] {
                  std::lock_guard<std::mutex> lock(mu_);
                  if (!held_) before = local;  // the puts done before the held one
                  return held_;
                }).ok());
    std::lock_guard<std::mutex> lock(model_mu);
    model = local;
  });
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return held_; });
  }
  // The writer is inside the merge of its put, which applied nothing yet.
  const Status checkpoint = store->Checkpoint(testing::Bytes("mid-merge"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    release_ = true;
    cv_.notify_all();
  }
  writer.join();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.ToString();
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_TRUE(checkpoint_while_held_) << "the checkpoint waited for the running merge";
  }
  ExpectContent(*store, kTable, kRowBytes, model);
  // The held merge switched in after the checkpoint; nothing checkpointed
  // since: a reopen gives the checkpoint, without the held put.
  store.reset();
  store = Open(Options(false, 1, 0));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), testing::Bytes("mid-merge"));
  ExpectContent(*store, kTable, kRowBytes, before);
  // And one more checkpoint after merges: the model after the held put.
  version += 1000;
  ASSERT_TRUE(PutUntil(*store, &version, &before, [&] { return merges_written() > 2; }).ok());
  ASSERT_TRUE(store->Checkpoint({}).ok());
  store.reset();
  store = Open(Options(false, 1, 0));
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, before);
}

}  // namespace
}  // namespace strata::storage
