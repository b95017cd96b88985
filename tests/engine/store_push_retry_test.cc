// strata-test-labels: integration
// strata-test-timeout: 600
// A failed Push and its retry (engine/store_push_retry.cc): EIO and ENOSPC
// injected at every SSD read and write of a Push in turn, each fault lasting
// until the test clears it (a full disk stays full). A Push that fails either
// changed no row, or, chunked, says how many of its distinct keys it applied
// and a retry of the same call applies only the rest; every row then equals a
// model that applied each gradient exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/store_impl.h"
#include "io/fault_env.h"
#include "tests/util/scratch_dir.h"

namespace strata {
namespace {

constexpr uint32_t kDim = 2;
// T0 and T1 of 32 rows each: a Push of 240 distinct keys goes in chunks of at
// most 32, and most of its rows are read from and written to the SSD.
constexpr uint64_t kDeviceRows = 32;
constexpr uint64_t kDramRows = 32;
constexpr uint64_t kKeys = 240;
constexpr int kRetriesMax = 8;

using Row = std::array<float, kDim>;
using Model = std::unordered_map<Key, Row>;

StoreOptions Options(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = kDeviceRows;
  o.dram_rows_max = kDramRows;
  o.use_gpu = false;
  // Format 1 with every put rewriting its leaf (a read and a write per
  // leaf): a Push makes I/O calls of its own, where the default layout
  // appends into range heads held in DRAM (the contract is the engine's,
  // whatever the layout).
  o.ssd_format_version = 1;
  o.ssd_write_log_fraction = 0;
  return o;
}

// SGD with learning rate -1 from zero rows: a row is the sum of its
// gradients, exact for the small integers pushed here.
std::vector<TableOptions> Tables() {
  TableOptions t;
  t.name = "a";
  t.dim = kDim;
  t.optimizer.kind = Optimizer::kSgd;
  t.optimizer.learning_rate = -1.0f;
  t.initializer = Initializer::kZeros;
  return {t};
}

// One Push: keys (repeats included) and their gradients.
struct Batch {
  std::vector<Key> keys;
  std::vector<float> grads;
};

// `distinct` keys from 0, `repeats` of them twice, shuffled; gradients 1 to 4.
Batch MakeBatch(uint64_t distinct, uint64_t repeats, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (Key k = 0; k < distinct; ++k) b.keys.push_back(k);
  for (uint64_t i = 0; i < repeats; ++i) b.keys.push_back(rng() % distinct);
  std::shuffle(b.keys.begin(), b.keys.end(), rng);
  for (size_t i = 0; i < b.keys.size() * kDim; ++i) b.grads.push_back(float(1 + rng() % 4));
  return b;
}

void Apply(const Batch& b, Model* model) {
  for (size_t i = 0; i < b.keys.size(); ++i) {
    Row& row = (*model)[b.keys[i]];
    for (uint32_t d = 0; d < kDim; ++d) row[d] += b.grads[i * kDim + d];
  }
}

// The batch's distinct keys in first-occurrence order: the order a chunked
// Push applies them in.
std::vector<Key> Distinct(const std::vector<Key>& keys) {
  std::vector<Key> out;
  std::unordered_set<Key> seen;
  for (Key k : keys) {
    if (seen.insert(k).second) out.push_back(k);
  }
  return out;
}

// Every key of the model pulled (no fault active) and compared with it.
void ExpectRows(Store& store, WorkerId w, const Model& model, const std::string& where) {
  std::vector<Key> keys;
  for (const auto& [k, row] : model) keys.push_back(k);
  std::vector<float> out(keys.size() * kDim);
  Status s = store.Pull(w, 0, keys, out.data());
  ASSERT_TRUE(s.ok()) << where << ": " << s.ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    for (uint32_t d = 0; d < kDim; ++d) {
      ASSERT_EQ(out[i * kDim + d], model.at(keys[i])[d]) << where << ": key " << keys[i];
    }
  }
}

// How many distinct keys a failed Push's error says it applied (0: the error
// does not say, so nothing was applied).
uint64_t AppliedOf(const Status& s) {
  const std::string& m = s.message();
  const std::string word = "applied ";
  const size_t at = m.find(word);
  if (at == std::string::npos) return 0;
  return std::stoull(m.substr(at + word.size()));
}

// A store in `dir` over `env` whose rows of keys [0, kKeys) all hold a first
// gradient, spread over T0, T1 and the SSD.
struct Fixture {
  io::FaultEnv env{io::Env::Default()};
  std::unique_ptr<Store> store;
  WorkerId worker = 0;
  Model model;

  void Open(const std::string& dir) {
    auto opened = engine::StoreImpl::Open(Options(dir), Tables(), {.env = &env});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store = std::move(opened).value();
    worker = *store->RegisterWorker();
    const Batch first = MakeBatch(kKeys, 0, 1);
    ASSERT_TRUE(store->Push(worker, 0, first.keys, first.grads.data()).ok());
    Apply(first, &model);
  }
};

struct Sweep {
  uint64_t pushes_failed = 0;
  uint64_t partial = 0;  // failures after some keys were applied
};

// Pushes `batch` with `rule` active: a failure is the rule's IOError; one
// that applied nothing changed no row; one that applied some keys says how
// many, Checkpoint refuses meanwhile, and a retry (first with the fault
// still there, then without) applies the rest. Afterwards every row equals
// the model with the batch applied once.
void PushWithFault(Fixture& f, const Batch& batch, const io::FaultRule& rule, const std::string& at,
                   Sweep* sweep) {
  ASSERT_TRUE(f.env.AddRule(rule).ok());
  Status s = f.store->Push(f.worker, 0, batch.keys, batch.grads.data());
  if (!s.ok()) {
    ++sweep->pushes_failed;
    ASSERT_TRUE(s.IsIOError()) << at << ": " << s.ToString();
    const uint64_t distinct = Distinct(batch.keys).size();
    const uint64_t applied = AppliedOf(s);
    if (applied > 0) {
      ++sweep->partial;
      ASSERT_LT(applied, distinct) << at << ": " << s.ToString();
      EXPECT_NE(s.message().find("of its " + std::to_string(distinct) + " distinct keys"),
                std::string::npos)
          << at << ": " << s.ToString();
      EXPECT_NE(s.message().find("retrying the same Push"), std::string::npos) << s.ToString();
      EXPECT_NE(s.message().find("table 'a'"), std::string::npos) << s.ToString();
      Status checkpoint = f.store->Checkpoint();
      EXPECT_TRUE(checkpoint.IsFailedPrecondition()) << at << ": " << checkpoint.ToString();
      // The disk is still full: the retry fails again, or needs no I/O.
      Status again = f.store->Push(f.worker, 0, batch.keys, batch.grads.data());
      if (!again.ok()) {
        ASSERT_TRUE(again.IsIOError()) << at << ": " << again.ToString();
        ASSERT_GE(AppliedOf(again), applied) << at << ": " << again.ToString();
      }
      s = again;
    }
    f.env.ClearRules();
    if (applied == 0) ExpectRows(*f.store, f.worker, f.model, at + ", nothing applied");
    for (int attempt = 0; attempt < kRetriesMax && !s.ok(); ++attempt) {
      s = f.store->Push(f.worker, 0, batch.keys, batch.grads.data());
    }
    ASSERT_TRUE(s.ok()) << at << ": the retry: " << s.ToString();
  }
  f.env.ClearRules();
  Apply(batch, &f.model);
  ExpectRows(*f.store, f.worker, f.model, at);
  Status checkpoint = f.store->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << at << ": " << checkpoint.ToString();
}

// The reads and writes one Push of `batch` makes on a fresh fixture (the
// cleaner thread's writes may add to them).
std::array<uint64_t, 2> CountIo(const std::string& dir, const Batch& batch) {
  Fixture f;
  f.Open(dir);
  if (::testing::Test::HasFatalFailure()) return {0, 0};
  // A rule that never fires, so that the calls are counted.
  EXPECT_TRUE(
      f.env.AddRule({.op = io::FaultOp::kAny, .nth_call = std::numeric_limits<uint64_t>::max()})
          .ok());
  EXPECT_TRUE(f.store->Push(f.worker, 0, batch.keys, batch.grads.data()).ok());
  return {f.env.calls_seen(io::FaultOp::kRead), f.env.calls_seen(io::FaultOp::kWrite)};
}

// Every read and every write of a Push of `batch` failing in turn, from that
// call on, with `error`.
Sweep SweepFaults(const testing::ScratchDir& scratch, const Batch& batch, int error) {
  Sweep sweep;
  const std::array<uint64_t, 2> calls = CountIo(scratch.File("count"), batch);
  EXPECT_GT(calls[0] + calls[1], 0u) << "the Push made no I/O";
  const io::FaultOp ops[] = {io::FaultOp::kRead, io::FaultOp::kWrite};
  for (int o = 0; o < 2; ++o) {
    if (error == ENOSPC && ops[o] == io::FaultOp::kRead) continue;  // a read does not fill a disk
    // A few past the count: the cleaner's writes vary from run to run.
    for (uint64_t n = 1; n <= calls[o] + 3; ++n) {
      const std::string dir =
          scratch.File(std::string(io::FaultOpName(ops[o])) + "-" + std::to_string(n));
      const std::string at = std::string(io::FaultOpName(ops[o])) + " " + std::to_string(n) +
                             " failing with errno " + std::to_string(error);
      {
        Fixture f;
        f.Open(dir);
        if (::testing::Test::HasFatalFailure()) return sweep;
        PushWithFault(f, batch, {.op = ops[o], .nth_call = n, .error_number = error}, at, &sweep);
        if (::testing::Test::HasFatalFailure()) return sweep;
      }
      std::filesystem::remove_all(dir);
    }
  }
  return sweep;
}

// The sweep over a chunked Push: some failures, some of them after a chunk
// was applied.
void SweepChunkedPush(int error, uint64_t seed) {
  testing::ScratchDir scratch;
  const Sweep sweep = SweepFaults(scratch, MakeBatch(kKeys, 60, seed), error);
  EXPECT_GT(sweep.pushes_failed, 0u);
  EXPECT_GT(sweep.partial, 0u) << "no fault landed after the first chunk";
}

TEST(StorePushRetryTest, ChunkedPushWithEioAtEveryIoIsAppliedOnce) { SweepChunkedPush(EIO, 2); }

TEST(StorePushRetryTest, ChunkedPushWithFullDiskAtEveryWriteIsAppliedOnce) {
  SweepChunkedPush(ENOSPC, 3);
}

// A Push that fits T0's room is applied whole or not at all: its failures
// say nothing was applied, and the rows show it.
TEST(StorePushRetryTest, SmallPushWithEioAtEveryIoChangesNothingOrEverything) {
  testing::ScratchDir scratch;
  const Batch batch = MakeBatch(kDeviceRows / 2, 4, 4);
  const Sweep sweep = SweepFaults(scratch, batch, EIO);
  EXPECT_GT(sweep.pushes_failed, 0u);
  EXPECT_EQ(sweep.partial, 0u);
}

// Fails a chunked Push part-way; returns how many distinct keys it applied.
uint64_t FailPartWay(Fixture& f, const Batch& batch) {
  // Sweep the write at which the disk fills until a failure lands after the
  // first chunk (a fixed index would depend on the cleaner's timing).
  for (uint64_t n = 1; n < 1000; ++n) {
    EXPECT_TRUE(
        f.env.AddRule({.op = io::FaultOp::kWrite, .nth_call = n, .error_number = ENOSPC}).ok());
    Status s = f.store->Push(f.worker, 0, batch.keys, batch.grads.data());
    f.env.ClearRules();
    if (s.ok()) {
      Apply(batch, &f.model);
      continue;
    }
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    const uint64_t applied = AppliedOf(s);
    if (applied > 0) return applied;
  }
  ADD_FAILURE() << "no write failed after the first chunk";
  return 0;
}

// Applies the first `applied` distinct keys' summed gradients of `batch`.
void ApplyPrefix(const Batch& batch, uint64_t applied, Model* model) {
  const std::vector<Key> distinct = Distinct(batch.keys);
  const std::unordered_set<Key> prefix(distinct.begin(), distinct.begin() + applied);
  Batch part;
  for (size_t i = 0; i < batch.keys.size(); ++i) {
    if (prefix.count(batch.keys[i]) == 0) continue;
    part.keys.push_back(batch.keys[i]);
    part.grads.insert(part.grads.end(), batch.grads.begin() + i * kDim,
                      batch.grads.begin() + (i + 1) * kDim);
  }
  Apply(part, model);
}

// A store whose worker's chunked Push of `batch_` failed part-way, after
// `applied_` distinct keys (the model holds them).
class PartialPushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    f_.Open(scratch_.File("store"));
    if (HasFatalFailure()) return;
    applied_ = FailPartWay(f_, batch_);
    ASSERT_GT(applied_, 0u);
    ApplyPrefix(batch_, applied_, &f_.model);
  }

  testing::ScratchDir scratch_;
  Fixture f_;
  const Batch batch_ = MakeBatch(kKeys, 60, 5);
  uint64_t applied_ = 0;
};

// After AdvanceClock the worker has moved on: the partial Push is forgotten,
// Checkpoint works, and the same keys and gradients pushed again are a new
// Push, applied whole. The applied prefix is the batch's first distinct keys.
TEST_F(PartialPushTest, AdvanceClockForgetsThePartialPush) {
  ExpectRows(*f_.store, f_.worker, f_.model, "after the partial Push");
  EXPECT_TRUE(f_.store->Checkpoint().IsFailedPrecondition());
  ASSERT_TRUE(f_.store->AdvanceClock(f_.worker).ok());
  ASSERT_TRUE(f_.store->Checkpoint().ok());
  ASSERT_TRUE(f_.store->Push(f_.worker, 0, batch_.keys, batch_.grads.data()).ok());
  Apply(batch_, &f_.model);
  ExpectRows(*f_.store, f_.worker, f_.model, "after the new Push");
}

// A different Push (other gradients) by the worker forgets the partial one:
// it is applied whole, and so is the first batch pushed after it.
TEST_F(PartialPushTest, ADifferentPushForgetsThePartialPush) {
  Batch other = batch_;
  other.grads[0] += 1.0f;
  ASSERT_TRUE(f_.store->Push(f_.worker, 0, other.keys, other.grads.data()).ok());
  Apply(other, &f_.model);
  ASSERT_TRUE(f_.store->Push(f_.worker, 0, batch_.keys, batch_.grads.data()).ok());
  Apply(batch_, &f_.model);
  ExpectRows(*f_.store, f_.worker, f_.model, "after both Pushes");
  ASSERT_TRUE(f_.store->Checkpoint().ok());
}

// A retry by another worker is another Push: only the worker that failed
// resumes.
TEST_F(PartialPushTest, AnotherWorkersPushIsAppliedWhole) {
  const WorkerId second = *f_.store->RegisterWorker();
  ASSERT_TRUE(f_.store->Push(second, 0, batch_.keys, batch_.grads.data()).ok());
  Apply(batch_, &f_.model);
  // The first worker's retry still applies only its rest.
  ASSERT_TRUE(f_.store->Push(f_.worker, 0, batch_.keys, batch_.grads.data()).ok());
  Model whole, prefix;
  Apply(batch_, &whole);
  ApplyPrefix(batch_, applied_, &prefix);
  for (const auto& [k, row] : whole) {
    const Row before = prefix.count(k) != 0 ? prefix.at(k) : Row{};
    for (uint32_t d = 0; d < kDim; ++d) f_.model[k][d] += row[d] - before[d];
  }
  ExpectRows(*f_.store, f_.worker, f_.model, "after the retry");
}

}  // namespace
}  // namespace strata
