// The crash campaign's workload (crash_campaign_test.cc): a deterministic
// training run through all three tiers of a Store with tiny T0 and T1, and
// the model of every row at any clock.
//
// Two tables of different row sizes, SGD with learning rate -1 and zero
// initial rows, so a push of gradient g adds g: a row's value at clock c is
// the sum of the gradients its key was pushed with in batches [0, c). Each
// batch signals intents two batches ahead, pulls and pushes both tables and
// advances the clock; every kCheckpointEvery batches it checkpoints. The
// workload writes one line per step to a progress file ("C <clock>" before a
// checkpoint, "D <clock>" after one succeeded, "P"/"U"/"I" before a pull,
// push or intent), which tells the parent of a killed child which
// checkpoints may be durable and where the kill landed (a kill at an I/O
// call adds "K <op> <path>").
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "strata/store.h"

namespace strata::crash {

inline constexpr int kBatches = 48;
inline constexpr int kCheckpointEvery = 6;
inline constexpr int kLookahead = 2;
inline constexpr Key kKeySpace = 400;  // keys 0..kKeySpace-2 and 2^64-1 per table
inline constexpr size_t kKeysPerBatch = 16;
inline constexpr uint32_t kDims[2] = {2, 5};

inline std::vector<TableOptions> Tables() {
  std::vector<TableOptions> tables(2);
  for (int i = 0; i < 2; ++i) {
    tables[i].name = i == 0 ? "narrow" : "wide";
    tables[i].dim = kDims[i];
    tables[i].optimizer.kind = Optimizer::kSgd;
    tables[i].optimizer.learning_rate = -1.0f;  // a push of gradient g adds g
    tables[i].initializer = Initializer::kZeros;
  }
  return tables;
}

// `ssd_format`: the native tier's format of a new directory (1 or 2);
// `ssd_index`: format 2's DRAM index.
inline StoreOptions Options(const std::string& dir, SsdBackend backend, uint32_t ssd_format = 1,
                            SsdIndex ssd_index = SsdIndex::kCompact) {
  StoreOptions o;
  o.dir = dir;
  o.ssd_backend = backend;
  o.ssd_format_version = ssd_format;
  o.ssd_index = ssd_index;
  o.ssd_range_bits = 1;            // kRanges: two ranges, so that merges run on 800 rows
  o.ssd_segment_bytes = 64 << 10;  // format 2: small files, many segments, the cleaner runs
  o.device_rows_max = 2 * 64;      // T0 holds the batches intents pin, little more
  o.dram_rows_max = 40;            // T1 a fraction of the 800 rows: most live on SSD
  o.use_gpu = false;
  o.io_threads = 1;
  return o;
}

// Every key a table may hold.
inline std::vector<Key> AllKeys() {
  std::vector<Key> keys;
  for (Key k = 0; k + 1 < kKeySpace; ++k) keys.push_back(k * 2654435761u);
  keys.push_back(kKeyMax);
  return keys;
}

struct Batch {
  std::vector<Key> keys[2];  // unique, per table
  float grad = 0;
};

inline std::vector<Batch> Plan(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<Key> all = AllKeys();
  std::vector<Batch> plan(kBatches);
  for (int b = 0; b < kBatches; ++b) {
    plan[b].grad = float(1 + (b * 7 + seed) % 5);
    for (int t = 0; t < 2; ++t) {
      std::vector<Key>& keys = plan[b].keys[t];
      while (keys.size() < kKeysPerBatch) {
        // Skewed: half the draws from the first 40 keys.
        const Key k = rng() % 2 ? all[rng() % 40] : all[rng() % all.size()];
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      }
    }
  }
  return plan;
}

// The value of every element of (table, key)'s embedding at `clock`.
inline std::map<Key, float> Model(const std::vector<Batch>& plan, int table, int64_t clock) {
  std::map<Key, float> rows;
  for (Key k : AllKeys()) rows[k] = 0;
  for (int64_t b = 0; b < clock && b < int64_t(plan.size()); ++b) {
    for (Key k : plan[b].keys[table]) rows[k] += plan[b].grad;
  }
  return rows;
}

// Appends lines to the progress file; unbuffered, so a SIGKILL loses none.
class Progress {
 public:
  explicit Progress(const std::string& path)
      : fd_(path.empty() ? -1 : ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644)) {}
  ~Progress() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  void Note(char what, int64_t clock) {
    if (fd_ < 0) return;
    const std::string line = std::string(1, what) + " " + std::to_string(clock) + "\n";
    (void)!::write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
};

// What the progress lines say: the last checkpoint that returned OK, the
// one in flight at the end (-1: none) and the step the run was in.
struct Outcome {
  int64_t last_done = 0;  // a new store is checkpoint 0 (clock 0, zero rows)
  int64_t in_flight = -1;
  char last_step = '-';
  uint64_t merges = 0;    // SSD merges and cleaning steps done before the end ("M" lines)
  std::string killed_at;  // "<op> <file kind>" of an I/O-call kill, from its "K" line
};

// "MANIFEST", "pages", "CHECKPOINT", ... : what kind of file a path is.
inline std::string FileKind(const std::string& path) {
  const std::string name = path.substr(path.find_last_of('/') + 1);
  const size_t dot = name.find_last_of('.');
  if (name.rfind("MANIFEST", 0) == 0) return "MANIFEST";
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

inline Outcome ReadProgress(const std::string& text) {
  Outcome o;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a torn last line: ignore
    const char what = text[pos];
    if (what == 'K') {  // "K <op> <path>"
      const std::string rest = text.substr(pos + 2, end - pos - 2);
      const size_t space = rest.find(' ');
      o.killed_at = rest.substr(0, space) + " " + FileKind(rest.substr(space + 1));
      pos = end + 1;
      continue;
    }
    const int64_t clock = std::stoll(text.substr(pos + 2, end - pos - 2));
    if (what == 'M') {  // "M <merges so far>": not a step
      o.merges = static_cast<uint64_t>(clock);
      pos = end + 1;
      continue;
    }
    if (what == 'C') o.in_flight = clock;
    if (what == 'D') {
      o.last_done = clock;
      o.in_flight = -1;
    }
    o.last_step = what;
    pos = end + 1;
  }
  return o;
}

// Runs the plan on `store` from its current clock; stops at the first error
// and returns it.
inline Status RunWorkload(Store& store, const std::vector<Batch>& plan, Progress* progress) {
  STRATA_ASSIGN_OR_RETURN(WorkerId w, store.RegisterWorker());
  STRATA_ASSIGN_OR_RETURN(Clock start, store.CurrentClock(w));
  auto intent = [&](int64_t b) -> Status {
    if (b >= int64_t(plan.size())) return Status::Ok();
    progress->Note('I', b);
    for (TableId t = 0; t < 2; ++t) {
      STRATA_RETURN_IF_ERROR(store.Intent(w, t, plan[b].keys[t], b, b + 1));
    }
    return Status::Ok();
  };
  for (int64_t b = start; b < start + kLookahead; ++b) STRATA_RETURN_IF_ERROR(intent(b));
  uint64_t merges = 0;
  for (int64_t b = start; b < int64_t(plan.size()); ++b) {
    if (b > 0 && b % kCheckpointEvery == 0) {
      progress->Note('C', b);
      STRATA_RETURN_IF_ERROR(store.Checkpoint());
      progress->Note('D', b);
    }
    STRATA_RETURN_IF_ERROR(intent(b + kLookahead));
    for (TableId t = 0; t < 2; ++t) {
      const std::vector<Key>& keys = plan[b].keys[t];
      std::vector<float> out(keys.size() * kDims[t]);
      std::vector<float> grads(keys.size() * kDims[t], plan[b].grad);
      progress->Note('P', b);
      STRATA_RETURN_IF_ERROR(store.Pull(w, t, keys, out.data()));
      progress->Note('U', b);
      STRATA_RETURN_IF_ERROR(store.Push(w, t, keys, grads.data()));
    }
    STRATA_RETURN_IF_ERROR(store.AdvanceClock(w));
    // The SSD tier's merges so far, when they grew (the campaign counts
    // the merges its trials crossed).
    if (const uint64_t m = store.Stats().ssd_merges; m > merges) {
      merges = m;
      progress->Note('M', static_cast<int64_t>(m));
    }
  }
  return Status::Ok();
}

// The reopened store holds exactly the rows of the plan at one of the
// clocks in `allowed`, and its worker's clock is that one.
inline void ExpectCheckpoint(Store& store, const std::vector<Batch>& plan,
                             const std::vector<int64_t>& allowed) {
  auto w = store.RegisterWorker();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto clock = store.CurrentClock(*w);
  ASSERT_TRUE(clock.ok());
  ASSERT_NE(std::find(allowed.begin(), allowed.end(), *clock), allowed.end())
      << "reopened at clock " << *clock << ", a clock no checkpoint may hold";
  const std::vector<Key> keys = AllKeys();
  for (TableId t = 0; t < 2; ++t) {
    const std::map<Key, float> model = Model(plan, t, *clock);
    constexpr size_t kChunk = 16;  // pulls well within T0
    for (size_t i = 0; i < keys.size(); i += kChunk) {
      std::span<const Key> chunk(keys.data() + i, std::min(kChunk, keys.size() - i));
      std::vector<float> out(chunk.size() * kDims[t], -1.0f);
      Status s = store.Pull(*w, t, chunk, out.data());
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (size_t j = 0; j < chunk.size(); ++j) {
        for (uint32_t d = 0; d < kDims[t]; ++d) {
          ASSERT_EQ(out[j * kDims[t] + d], model.at(chunk[j]))
              << "table " << t << " key " << chunk[j] << " element " << d << " at clock " << *clock;
        }
      }
    }
  }
}

}  // namespace strata::crash
