// Options for a Store and its tables. One struct per concern; every field has
// a unit in its name where it has one, a default, and a one-line trade-off.
//
// Thread safety: plain values, copied by Store::Open; ParseFaultOptions is a
// pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"

namespace strata {

// The largest values Store::Open accepts (InvalidArgument above them).
// Tables of one store.
inline constexpr uint32_t kTablesMax = 1024;
// Workers one store registers (RegisterWorker: ResourceExhausted above).
inline constexpr uint32_t kWorkersMax = 256;
// TableOptions::name: bytes, each of [A-Za-z0-9_.-] (IsValidTableName).
inline constexpr size_t kTableNameBytesMax = 128;
// The one rule for a table's name, which Store::Open applies and `strata
// trace import` applies to the tables it names after columns: 1 to
// kTableNameBytesMax bytes, each of [A-Za-z0-9_.-].
constexpr bool IsValidTableName(std::string_view name) {
  if (name.empty() || name.size() > kTableNameBytesMax) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}
// TableOptions::dim: embedding floats per row.
inline constexpr uint32_t kTableDimMax = 4096;
// StoreOptions::device_rows_max and dram_rows_max each: about 10^12 rows, so
// a tier's rows times its row bytes stay far below 2^64.
inline constexpr uint64_t kTierRowsMax = uint64_t{1} << 40;
// Shards of T1 (StoreOptions::dram_shards): a power of two at most this.
inline constexpr uint32_t kDramShardsMax = 64;
// StoreOptions::device_share_growth_max.
inline constexpr double kDeviceShareGrowthMax = 16.0;
// The largest StoreOptions.ssd_write_log_fraction accepted (a log 16 times
// the table: far past any use, a bound on the index's DRAM).
inline constexpr double kSsdWriteLogFractionMax = 16.0;
// FaultOptions::delay_us: a longer delay per I/O is a hang, not a test.
inline constexpr uint64_t kFaultDelayUsMax = 1'000'000;
// Record bytes per key range the native SSD tier aims at for a new table
// with TableOptions::expected_rows: a merge rewrites one range (its base and
// log), so this bounds a merge's work and buffer.
inline constexpr uint64_t kSsdRangeRecordBytes = uint64_t{128} << 20;

// The optimizer applied by Push, in place, where the row lives. Its state is
// part of the row and moves with it between tiers.
enum class Optimizer : uint8_t {
  kSgd,             // no state
  kAdagrad,         // one float of state per embedding float
  kRowwiseAdagrad,  // one float of state per row
  kAdam,            // two floats per embedding float plus a step count
  kFtrl,            // two floats (z, n) per embedding float
};

// How a row is created the first time its key is touched: deterministic per
// (table, key), so runs with different tier sizes give the same values.
enum class Initializer : uint8_t { kZeros, kUniform, kNormal };

// Hyper-parameters of a table's optimizer (formulas: docs/device-table.md).
// Store::Open checks them (InvalidArgument naming the table and field): a
// finite learning_rate (a negative one turns descent into accumulation),
// epsilon and initial_accumulator >= 0; Adam beta1, beta2 in [0, 1); FTRL
// ftrl_alpha > 0 and ftrl_beta, ftrl_l1, ftrl_l2 >= 0.
struct OptimizerOptions {
  Optimizer kind = Optimizer::kAdagrad;
  float learning_rate = 0.01f;       // SGD, AdaGrad, Adam step size
  float epsilon = 1e-8f;             // AdaGrad / Adam denominator guard
  float initial_accumulator = 0.0f;  // AdaGrad acc and FTRL n start here
  float beta1 = 0.9f;                // Adam first-moment decay
  float beta2 = 0.999f;              // Adam second-moment decay
  float ftrl_alpha = 0.05f;          // FTRL-Proximal per-coordinate learning rate alpha
  float ftrl_beta = 1.0f;            // FTRL learning-rate smoothing beta
  float ftrl_l1 = 0.0f;              // FTRL L1 strength (sparsity)
  float ftrl_l2 = 0.0f;              // FTRL L2 strength
};

struct TableOptions {
  std::string name;   // unique within a store, at most kTableNameBytesMax
  uint32_t dim = 16;  // embedding floats per row, at most kTableDimMax
  OptimizerOptions optimizer;
  Initializer initializer = Initializer::kUniform;
  float init_scale = 0.01f;  // uniform in [-s, s] or normal with stddev s
  // Share of StoreOptions::device_rows_max this table's T0 slots are sized for,
  // relative to the other tables' (then grown: StoreOptions::device_share_growth_max;
  // one eviction order across tables decides what T0 holds). Best: the distinct keys a batch
  // touches in the table (the rows it needs in T0 at once); a tiny table
  // needs few rows, a huge one room for a few batches' keys pinned at once.
  double device_rows_weight = 1.0;
  // Rows the table is expected to hold (0: unknown). Sizes a new table's
  // native SSD layout: key ranges of about kSsdRangeRecordBytes of records
  // each (so a small table gets one range and few partly filled segments);
  // unknown, StoreOptions::ssd_range_bits. Not stored: a table keeps the
  // layout it was created with.
  uint64_t expected_rows = 0;
  // A Push whose gradients hold a NaN or an infinity: false applies it (a
  // NaN then spreads through the row and its optimizer state) and counts it
  // in StoreStats::nonfinite_grads; true refuses the whole Push
  // (InvalidArgument naming the table and the first such key, nothing
  // applied), which a caller must handle. Both scan the gradients once.
  bool refuse_nonfinite_grads = false;
};

enum class SsdBackend : uint8_t { kNative, kRocksDb };
// DRAM index of the native SSD tier's format 2 (docs/ssd-format.md, "Exact
// index"). kCompact: 7 bytes per key plus slack (about 7.5), but a put of a
// stored key reads its record once (puts at the device's random-read rate).
// kExact: the whole key per entry, 11 bytes plus slack (about 11.7): puts
// read nothing (sequential appends only) and gets of a deleted key read
// nothing. Not stored on disk: the index is rebuilt at every open, so either
// opens any format-2 directory. kRanges (docs/ssd-format.md, "Key ranges"):
// a new table keeps most rows in key-ordered base segments per key range
// (a directory of about 2 bytes per key finds them) and only the rows
// written since their range's last merge in the log, under an exact index;
// background merges replace cleaning. A table keeps the layout it was
// created with (stored in its segments' headers).
enum class SsdIndex : uint8_t { kCompact, kExact, kRanges };
// Order of eviction among rows nobody declared an intent for (they always go
// before rows with one). kLru: least recently used first. kLfu: least
// frequently used first (a count-min sketch with aging per table, so a
// drifting hot set is followed), least recent among equals; keeps the hot
// rows of skewed (Zipf) tables that a scan of cold keys would flush from LRU.
enum class FallbackPolicy : uint8_t { kLru, kLfu };

// Fault injection into the SSD tier's I/O, for stress tests and replays: the
// native backend only (RocksDB does its own file access). Off by default, at
// no cost. Injected errors surface as a Status; no row is lost. Store::Open
// refuses values out of range (InvalidArgument naming the field).
struct FaultOptions {
  // Probability per read or write of the SSD files that it fails with EIO,
  // in [0, 1]: higher tests the retry paths harder and runs slower.
  double eio_probability = 0.0;
  // Probability per write that it fails with ENOSPC, in [0, 1].
  double enospc_probability = 0.0;
  // Delay added to every read and write, at most kFaultDelayUsMax: models a
  // slow device (the planner then has to prefetch further ahead).
  uint64_t delay_us = 0;
  // Seed of the random choices: the same seed, the same faults per I/O.
  uint64_t seed = 1;

  // Whether anything is injected (an error probability or a delay above 0).
  bool enabled() const { return eio_probability > 0 || enospc_probability > 0 || delay_us > 0; }
};

// FaultOptions from their spelling on a command line or in an environment
// variable: comma-separated key=value pairs, "eio=P,enospc=P,delay_us=N,seed=N",
// any subset in any order; "" gives the defaults (nothing injected). An
// unknown key, a malformed number or a value out of range is InvalidArgument
// naming the pair.
Result<FaultOptions> ParseFaultOptions(std::string_view text);

struct StoreOptions {
  // Created when missing. One Store at a time opens a directory: Open takes
  // its LOCK file first (Unavailable while another Store, in this process
  // or another, holds it); Close releases it.
  std::string dir;
  // Open fails with FailedPrecondition, changing nothing, when `dir` already
  // holds a store (anything but its LOCK file): for commands that need a
  // fresh store, checked under the lock so two of them cannot both pass.
  bool error_if_exists = false;
  // Tier capacities, in rows summed over all tables, at most kTierRowsMax.
  // Bigger tiers stall less and cost more memory.
  uint64_t device_rows_max = 1 << 20;  // T0 (GPU memory, or its host twin)
  uint64_t dram_rows_max = 1 << 22;    // T1
  // T1's shards, each with its own eviction order and lock, so inserts on
  // several threads do not serialise on one (docs/dram-cache.md, "Shards"):
  // a power of two at most kDramShardsMax; 0: one per 2^18 rows of T1, at
  // most 16 (so one below 2^19 rows: the exact order).
  uint32_t dram_shards = 0;
  SsdBackend ssd_backend = SsdBackend::kNative;
  // How far one table's T0 may grow past its weighted share of
  // device_rows_max: to (1 + this) x the share, at most device_rows_max.
  // T0 evicts by one order across tables within device_rows_max in total;
  // this bounds only what one table may take of it. T0 reserves slots for
  // the grown size: its memory is (1 + this) x the static split's (about
  // row bytes x device_rows_max / 0.7). 0: the static split.
  // Measured in docs/benchmarks.md ("One order across T0").
  double device_share_growth_max = 0.25;
  // Eviction order for rows nobody declared an intent for.
  FallbackPolicy fallback_policy = FallbackPolicy::kLru;
  // Planner: how often it runs a round when idle, and how much work a round
  // does at most (bounded rounds keep latency low under load).
  uint32_t planner_round_us = 200;
  uint32_t planner_keys_per_round_max = 1 << 18;
  // AdaPM action timing (alpha, quantile p, initial rate lambda0).
  double timing_alpha = 0.1;
  double timing_quantile = 0.9999;
  double timing_lambda0 = 10.0;
  // The planner acts on (prefetches and pins) the windows that start before
  // clock + min(AdaPM's horizon, this); 0: AdaPM's horizon alone. When
  // batches come faster than planner rounds, the horizon spans many batches,
  // and pinning their windows took the T0 rows the one eviction order needed
  // (with T0 at 71% of the cache: 1.06x MIN's SSD reads without the bound,
  // 1.02x with 2): docs/benchmarks.md, "Replay".
  uint32_t intent_act_ahead_max = 2;
  // Use the GPU for T0 when one is visible; false forces the host runner.
  bool use_gpu = true;
  // I/O threads of the SSD tier (0: chosen from topology).
  uint32_t io_threads = 0;
  // Native SSD tier: rows put go to a write log of this fraction of each
  // table's rows, merged into the leaves in the background (docs/ssd-format.md,
  // "Write log"); its DRAM index costs about 15 x this bytes per key. 0: every
  // put rewrites its leaf (version 1's writes). At most kSsdWriteLogFractionMax.
  double ssd_write_log_fraction = 0.25;
  // Native SSD tier: the on-disk format of a new tier directory, 2 (an
  // append-only log of segments; with ssd_index kRanges, the default, key
  // ranges merged in the background: docs/ssd-format.md, "Key ranges") or
  // 1 (leaf pages and the write log above). An existing directory opens in
  // the format it was written in.
  uint32_t ssd_format_version = 2;
  // Native SSD tier, format 2: bytes of a log segment, a power of two in
  // [64 KiB, 64 MiB] (the unit of cleaning; tests use small ones).
  uint64_t ssd_segment_bytes = 8ull << 20;
  // Native SSD tier, format 2: the layout and DRAM index of a new table
  // (SsdIndex: kRanges, the default, key-ordered base segments per key
  // range; kCompact, fewer bytes per key; kExact, puts without reads).
  // Format 1 ignores it.
  SsdIndex ssd_index = SsdIndex::kRanges;
  // Native SSD tier, format 2 with kRanges: the key ranges of a new table
  // whose TableOptions::expected_rows is 0, 2^this, at most 12 (a table with
  // expected_rows gets ranges of about kSsdRangeRecordBytes each). More
  // ranges make each merge shorter and its buffer smaller but hold more
  // partly filled segments (about 1.5 segments per range).
  uint32_t ssd_range_bits = 6;
  // Native SSD tier, kRanges: a merge runs while a table's log exceeds this
  // fraction of its live row bytes; in (0, 8]. Larger: fewer merges (less
  // write amplification), more space.
  double ssd_merge_log_fraction = 0.35;
  // Fault injection into the SSD tier's I/O (tests and replays); off by default.
  FaultOptions faults;
};

}  // namespace strata
