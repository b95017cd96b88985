// `strata bench ssd`: the tier-T2 row stores side by side (native page store
// on io_uring, RocksDB) on the same machine, directory and workload.
//
//   strata bench ssd --dir D [--backend native|rocksdb|both] [--format 2|1|both]
//                    --rows N --dim 64 --state-floats 64 --batch 4096
//                    --dist uniform|zipf --seconds S [--mix 0.5] [--clients 1]
//                    [--write-log-fraction 0.25] [--segment-bytes 8388608]
//                    [--index ranges|compact|exact|both] [--range-bits 6] [--json]
//
// The native store runs in the formats --format names (the default: 2 with
// --index ranges, the Store's default; docs/ssd-format.md:
// 1, leaf pages with a write log, reported as "native"; 2, the append-only
// log with its cleaner, reported as "native2" with the compact DRAM index
// and "native2_exact" with the exact one, as --index names, or with key
// ranges and merges, "native2_ranges" for --index ranges), each beside
// RocksDB.
//
// For each backend: loads N rows (keys 0..N-1 scrambled by a bijection, in
// batches of 64k, timed as load; the native store loads into its leaves with
// the write log off and is reopened with it), checkpoints, then runs random batched gets
// for S seconds, random batched puts (overwrites) for S seconds, and S seconds
// of a mix (each batch a get with probability R, else a put: 0.5 is training's
// eviction pattern, a dirty row written for every row read), keys drawn
// uniformly or Zipf(0.99). Latency is per MultiGet/MultiPut call; the mix
// reports rows moved (got + put) per second.
//
// Write amplification is sustained: every byte the store wrote to the device
// from the start of the put phase to the end of a final checkpoint (flushes,
// merges, garbage collection and compactions included), over the row bytes
// handed to MultiPut in the put and mix phases. The same window is also
// measured from outside the store, by the kernel's count of bytes this
// process sent to block devices (/proc/self/io write_bytes; 0 where the
// kernel does not account them), so a store cannot under-count its own work.
// Also measures raw 4 KiB random reads of the native data file through
// io::IoThreads with the same batch size, the device's ceiling for the native
// store's one-read-per-get design.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/cli_util.h"
#include "cli/command.h"
#include "io/aligned.h"
#include "io/io_threads.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "strata/options.h"

namespace strata::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The largest values of the options: Adam's state floats for the largest
// dim, keys per call, client threads.
constexpr uint32_t kStateFloatsMax = 2 * kTableDimMax + 1;
constexpr uint32_t kBatchKeysMax = 1 << 22;
constexpr uint32_t kClientsMax = 1024;

struct SsdBenchArgs {
  std::string dir;
  std::string backend = "both";
  uint64_t rows = 1'000'000;
  uint32_t dim = 64;
  uint32_t state_floats = 64;
  uint32_t batch = 4096;
  std::string dist = "uniform";
  double seconds = 10;
  double mix = 0.5;  // fraction of gets among the mix phase's batches
  uint32_t clients = 1;
  double write_log_fraction = storage::RowStoreOptions{}.write_log_fraction;  // native only
  std::string format = "2";                                                   // native: 1, 2, both
  uint64_t segment_bytes = storage::RowStoreOptions{}.ssd_segment_bytes;      // format 2
  std::string index = "ranges";  // format 2's DRAM index: ranges, compact, exact, both
  uint32_t range_bits = storage::RowStoreOptions{}.ssd_range_bits;  // --index ranges
  bool json = false;
};

Key KeyOf(uint64_t i) { return i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull; }

// Zipf(theta) over [0, n) by Gray et al.'s method (as YCSB); rank 0 hottest,
// scattered over the key space by KeyOf.
class KeyChooser {
 public:
  KeyChooser(uint64_t n, bool zipf, uint64_t seed) : n_(n), zipf_(zipf), rng_(seed) {
    if (!zipf_) return;
    double zetan = 0;
    for (uint64_t i = 1; i <= n; ++i) zetan += 1.0 / std::pow(double(i), kTheta);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, kTheta);
    alpha_ = 1.0 / (1.0 - kTheta);
    eta_ = (1.0 - std::pow(2.0 / double(n), 1.0 - kTheta)) / (1.0 - zeta2 / zetan);
    zetan_ = zetan;
  }
  uint64_t Next() {
    if (!zipf_) return rng_() % n_;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, kTheta)) return 1;
    return std::min<uint64_t>(n_ - 1, uint64_t(double(n_) * std::pow(eta_ * u - eta_ + 1, alpha_)));
  }

 private:
  static constexpr double kTheta = 0.99;
  uint64_t n_;
  bool zipf_;
  std::mt19937_64 rng_;
  double alpha_ = 0, eta_ = 0, zetan_ = 0;
};

struct Phase {
  double rows_per_s = 0, mb_per_s = 0, p50_us = 0, p99_us = 0, max_us = 0;
  // Latencies of the put calls alone (a put waiting for a merge shows here).
  double put_p50_us = 0, put_p99_us = 0, put_max_us = 0;
  uint64_t calls = 0;
  uint64_t rows_got = 0, rows_put = 0;  // rows moved by gets and by puts
};

// Bytes this process has sent to block devices (/proc/self/io write_bytes
// less cancelled_write_bytes), or 0 where the kernel does not say.
uint64_t ProcessDeviceBytesWritten() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return 0;
  char name[64];
  unsigned long long value = 0, written = 0, cancelled = 0;
  while (std::fscanf(f, "%63s %llu", name, &value) == 2) {
    if (std::string_view(name) == "write_bytes:") written = value;
    if (std::string_view(name) == "cancelled_write_bytes:") cancelled = value;
  }
  std::fclose(f);
  return written > cancelled ? written - cancelled : 0;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

// `clients` threads call `get(keys, rows, found)` or `put(keys, rows)` on
// batches for `seconds`: each batch a get with probability `get_fraction`.
template <typename Get, typename Put>
Result<Phase> Timed(const SsdBenchArgs& a, uint32_t row_bytes, double get_fraction, Get get,
                    Put put) {
  std::atomic<bool> stop{false}, failed{false};
  std::vector<std::vector<double>> lat(a.clients), put_lat(a.clients);
  std::vector<uint64_t> rows_got(a.clients, 0), rows_put(a.clients, 0);
  std::string error;
  std::vector<std::thread> threads;
  const auto start = SteadyClock::now();
  for (uint32_t c = 0; c < a.clients; ++c) {
    threads.emplace_back([&, c] {
      KeyChooser chooser(a.rows, a.dist == "zipf", 1000 + c);
      std::mt19937_64 coin(2000 + c);
      std::vector<Key> keys(a.batch);
      std::vector<std::byte> buf(size_t{a.batch} * row_bytes, std::byte{0x33});
      std::vector<uint8_t> found(a.batch);
      while (!stop.load(std::memory_order_relaxed)) {
        for (Key& k : keys) k = KeyOf(chooser.Next());
        const bool is_get = std::uniform_real_distribution<double>(0, 1)(coin) < get_fraction;
        const auto t0 = SteadyClock::now();
        Status s = is_get ? get(keys, buf, found) : put(keys, buf);
        const double us =
            std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count();
        lat[c].push_back(us);
        if (!is_get) put_lat[c].push_back(us);
        if (!s.ok()) {
          if (!failed.exchange(true)) error = s.ToString();
          stop = true;
        }
        (is_get ? rows_got[c] : rows_put[c]) += keys.size();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));  // the measured window
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (failed) return Status::IOError("bench ssd: " + error);
  std::vector<double> all, puts;
  Phase p;
  for (uint32_t c = 0; c < a.clients; ++c) {
    all.insert(all.end(), lat[c].begin(), lat[c].end());
    puts.insert(puts.end(), put_lat[c].begin(), put_lat[c].end());
    p.rows_got += rows_got[c];
    p.rows_put += rows_put[c];
  }
  p.rows_per_s = double(p.rows_got + p.rows_put);
  p.calls = all.size();
  p.rows_per_s /= elapsed;
  p.mb_per_s = p.rows_per_s * row_bytes / 1e6;
  p.p50_us = Percentile(all, 0.5);
  p.p99_us = Percentile(all, 0.99);
  p.max_us = Percentile(all, 1.0);
  p.put_p50_us = Percentile(puts, 0.5);
  p.put_p99_us = Percentile(puts, 0.99);
  p.put_max_us = Percentile(puts, 1.0);
  return p;
}

// Random 4 KiB reads of `path` in batches of `batch`, SubmitAndWait per batch.
Result<double> RawReadIops(const std::string& path, uint32_t batch, double seconds) {
  STRATA_ASSIGN_OR_RETURN(auto file, io::Env::Default()->OpenFile(path, {.direct = true}));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  const uint64_t blocks = size / 4096;
  if (blocks == 0) return Status::InvalidArgument(path + ": empty");
  io::IoThreadsOptions o;
  o.topology_path = path;
  STRATA_ASSIGN_OR_RETURN(auto io, io::IoThreads::Create(o));
  STRATA_ASSIGN_OR_RETURN(auto buf, io::AlignedBuffer::Allocate(size_t{batch} * 4096));
  std::vector<io::IoRequest> reqs(batch);
  std::mt19937_64 rng(5);
  uint64_t done = 0;
  const auto start = SteadyClock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (uint32_t i = 0; i < batch; ++i) {
      reqs[i] = io::IoRequest{.op = io::IoRequest::Op::kRead,
                              .file = file.get(),
                              .offset = (rng() % blocks) * 4096,
                              .buf = buf.data() + i * 4096,
                              .len = 4096};
    }
    STRATA_RETURN_IF_ERROR(io->SubmitAndWait(reqs));
    done += batch;
    elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  }
  return double(done) / elapsed;
}

// Share of the phase's rows moved by `rows` (gets or puts).
double RatioOf(uint64_t rows, const Phase& p) {
  const uint64_t all = p.rows_got + p.rows_put;
  return all ? double(rows) / double(all) : 0.0;
}

struct BackendResult {
  std::string name;
  double load_rows_per_s = 0;
  Phase get, put, mix;
  storage::RowStoreStats stats;
  uint64_t process_bytes_written = 0;  // /proc/self/io over the write window
  std::string data_file;
};

// One store of a run: the backend, the native format (1 or 2) and format
// 2's DRAM index.
struct RunSpec {
  SsdBackend backend;
  uint32_t format;
  SsdIndex index;
};

Result<BackendResult> RunBackend(const SsdBenchArgs& a, const RunSpec& spec) {
  const SsdBackend backend = spec.backend;
  BackendResult r;
  r.name = backend == SsdBackend::kRocksDb   ? "rocksdb"
           : spec.format == 1                ? "native"
           : spec.index == SsdIndex::kExact  ? "native2_exact"
           : spec.index == SsdIndex::kRanges ? "native2_ranges"
                                             : "native2";
  storage::RowStoreOptions o;
  o.backend = backend;
  o.ssd_format_version = spec.format;
  o.ssd_index = spec.index;
  o.ssd_range_bits = a.range_bits;
  o.ssd_segment_bytes = a.segment_bytes;
  o.dir = a.dir + "/" + r.name;
  o.write_log_fraction = a.write_log_fraction;
  std::error_code ignored;
  std::filesystem::remove_all(o.dir, ignored);
  const uint32_t row_bytes = (a.dim + a.state_floats) * 4;
  // The load writes new rows into their leaves directly (no write log): a
  // log on a table that grows from empty merges over and over. The store is
  // then reopened with the log, so the measured phases run as configured.
  o.write_log_fraction = 0;
  STRATA_ASSIGN_OR_RETURN(auto store, storage::OpenRowStore(o, {{1, "emb", row_bytes}}));
  constexpr uint64_t kLoadBatch = 1 << 16;
  std::vector<Key> keys;
  std::vector<std::byte> rows(kLoadBatch * row_bytes);
  std::mt19937_64 rng(1);
  for (auto& b : rows) b = std::byte(rng());
  const auto t0 = SteadyClock::now();
  for (uint64_t i = 0; i < a.rows; i += kLoadBatch) {
    keys.clear();
    for (uint64_t k = i; k < std::min(a.rows, i + kLoadBatch); ++k) keys.push_back(KeyOf(k));
    STRATA_RETURN_IF_ERROR(store->MultiPut(1, keys, {rows.data(), keys.size() * row_bytes}));
  }
  STRATA_RETURN_IF_ERROR(store->Checkpoint({}));
  r.load_rows_per_s =
      double(a.rows) / std::chrono::duration<double>(SteadyClock::now() - t0).count();
  store.reset();
  o.write_log_fraction = a.write_log_fraction;
  STRATA_ASSIGN_OR_RETURN(store, storage::OpenRowStore(o, {{1, "emb", row_bytes}}));
  auto get = [&](std::span<const Key> k, std::span<std::byte> buf, std::span<uint8_t> found) {
    return store->MultiGet(1, k, buf, found);
  };
  auto put = [&](std::span<const Key> k, std::span<const std::byte> buf) {
    return store->MultiPut(1, k, buf);
  };
  STRATA_ASSIGN_OR_RETURN(r.get, Timed(a, row_bytes, 1.0, get, put));
  // The write window: puts, the mix, and a final checkpoint that pays what
  // the store deferred (garbage collection, flushes).
  const storage::RowStoreStats before_puts = store->Stats();
  const uint64_t process_before = ProcessDeviceBytesWritten();
  STRATA_ASSIGN_OR_RETURN(r.put, Timed(a, row_bytes, 0.0, get, put));
  STRATA_ASSIGN_OR_RETURN(r.mix, Timed(a, row_bytes, a.mix, get, put));
  STRATA_RETURN_IF_ERROR(store->Checkpoint({}));
  r.stats = store->Stats();
  r.process_bytes_written = ProcessDeviceBytesWritten() - process_before;
  // Write amplification of the write window alone (load excluded).
  r.stats.bytes_written -= before_puts.bytes_written;
  r.stats.user_bytes_written -= before_puts.user_bytes_written;
  if (backend == SsdBackend::kNative) {
    for (const auto& e : std::filesystem::directory_iterator(o.dir)) {
      const std::string name = e.path().filename().string();
      if (storage::ssd::IsDataFileName(name) || storage::ssd::IsLogDataFileName(name)) {
        r.data_file = e.path().string();
      }
    }
  }
  return r;
}

Status RunSsdBench(const SsdBenchArgs& a) {
  // The CLI checks the numbers' ranges; these come from code callers too.
  auto bad = [](const std::string& what) { return Status::InvalidArgument("bench ssd: " + what); };
  if (a.dir.empty()) return bad("--dir must not be empty");
  if (a.rows == 0 || a.batch == 0 || a.seconds <= 0 || a.clients == 0) {
    return bad("--rows, --batch, --seconds and --clients must be positive");
  }
  if (!(a.mix >= 0 && a.mix <= 1)) return bad("--mix " + std::to_string(a.mix) + " not in [0, 1]");
  if (a.dist != "uniform" && a.dist != "zipf") {
    return bad("--dist '" + a.dist + "': uniform or zipf");
  }
  if (a.backend != "native" && a.backend != "uring" && a.backend != "rocksdb" &&
      a.backend != "both") {
    return bad("--backend '" + a.backend + "': native, uring, rocksdb or both");
  }
  if (a.format != "1" && a.format != "2" && a.format != "both") {
    return bad("--format '" + a.format + "': 1, 2 or both");
  }
  if (a.index != "compact" && a.index != "exact" && a.index != "both" && a.index != "ranges") {
    return bad("--index '" + a.index + "': compact, exact, both or ranges");
  }
  std::vector<RunSpec> runs;
  if (a.backend != "rocksdb") {
    if (a.format != "2") runs.push_back({SsdBackend::kNative, 1, SsdIndex::kCompact});
    if (a.format != "1" && (a.index == "compact" || a.index == "both")) {
      runs.push_back({SsdBackend::kNative, 2, SsdIndex::kCompact});
    }
    if (a.format != "1" && (a.index == "exact" || a.index == "both")) {
      runs.push_back({SsdBackend::kNative, 2, SsdIndex::kExact});
    }
    if (a.format != "1" && a.index == "ranges") {
      runs.push_back({SsdBackend::kNative, 2, SsdIndex::kRanges});
    }
  }
  if (a.backend == "rocksdb" || a.backend == "both") {
    runs.push_back({SsdBackend::kRocksDb, 1, SsdIndex::kCompact});
  }
  std::vector<BackendResult> results;
  double raw_iops = 0;
  for (const RunSpec& spec : runs) {
    STRATA_ASSIGN_OR_RETURN(BackendResult r, RunBackend(a, spec));
    results.push_back(std::move(r));
    // Raw reads of the first native file right after its run, on the
    // device as its gets saw it: measured after RocksDB's run they gave
    // 22,000 IOPS twice where runs without RocksDB gave 53,000 to 67,000.
    if (results.size() == 1 && !results[0].data_file.empty()) {
      STRATA_ASSIGN_OR_RETURN(raw_iops, RawReadIops(results[0].data_file, a.batch, a.seconds));
    }
  }
  const uint32_t row_bytes = (a.dim + a.state_floats) * 4;
  nlohmann::json out = {{"rows", a.rows},
                        {"row_bytes", row_bytes},
                        {"batch", a.batch},
                        {"dist", a.dist},
                        {"clients", a.clients},
                        {"seconds", a.seconds},
                        {"mix", a.mix},
                        {"write_log_fraction", a.write_log_fraction},
                        {"segment_bytes", a.segment_bytes},
                        {"index", a.index}};
  if (raw_iops > 0) out["raw_4k_read_iops"] = raw_iops;
  for (const BackendResult& r : results) {
    const auto& s = r.stats;
    nlohmann::json j = {
        {"load_rows_per_s", r.load_rows_per_s},
        {"get_rows_per_s", r.get.rows_per_s},
        {"get_mb_per_s", r.get.mb_per_s},
        {"get_p50_us", r.get.p50_us},
        {"get_p99_us", r.get.p99_us},
        {"put_rows_per_s", r.put.rows_per_s},
        {"put_mb_per_s", r.put.mb_per_s},
        {"put_p50_us", r.put.p50_us},
        {"put_p99_us", r.put.p99_us},
        {"put_max_us", r.put.max_us},
        {"mix_rows_per_s", r.mix.rows_per_s},
        {"mix_get_rows_per_s", r.mix.rows_per_s * RatioOf(r.mix.rows_got, r.mix)},
        {"mix_put_rows_per_s", r.mix.rows_per_s * RatioOf(r.mix.rows_put, r.mix)},
        {"mix_p99_us", r.mix.p99_us},
        {"mix_put_p50_us", r.mix.put_p50_us},
        {"mix_put_p99_us", r.mix.put_p99_us},
        {"mix_put_max_us", r.mix.put_max_us},
        {"write_amp", s.write_amp()},
        {"process_write_amp", s.user_bytes_written
                                  ? double(r.process_bytes_written) / double(s.user_bytes_written)
                                  : 0.0},
        {"space_amp", s.space_amp()},
        {"index_bytes_per_key", s.live_rows ? double(s.index_bytes) / double(s.live_rows) : 0.0}};
    if (r.name == results[0].name && r.name != "rocksdb" && raw_iops > 0) {
      j["get_vs_raw_read"] = r.get.rows_per_s / raw_iops;
    }
    out[r.name] = j;
  }
  // Each native format against RocksDB of the same run: "<name>_vs_rocksdb_*".
  const BackendResult& last = results.back();
  for (const BackendResult& r : results) {
    if (last.name != "rocksdb" || r.name == "rocksdb" || last.get.rows_per_s <= 0) continue;
    out[r.name + "_vs_rocksdb_get"] = r.get.rows_per_s / last.get.rows_per_s;
    out[r.name + "_vs_rocksdb_put"] = r.put.rows_per_s / last.put.rows_per_s;
    out[r.name + "_vs_rocksdb_mix"] = r.mix.rows_per_s / last.mix.rows_per_s;
  }
  if (a.json) {
    std::printf("%s\n", out.dump().c_str());
    return Status::Ok();
  }
  std::printf(
      "bench ssd: rows=%lu row_bytes=%u batch=%u dist=%s clients=%u seconds=%.0f mix=%.2f\n",
      (unsigned long)a.rows, row_bytes, a.batch, a.dist.c_str(), a.clients, a.seconds, a.mix);
  // Latencies in ms per call of `batch` keys.
  std::printf("%-13s %10s %10s %8s %8s %10s %8s %8s %8s %8s %10s %8s %8s %7s %7s %7s %9s\n",
              "backend", "load_r/s", "get_r/s", "get_MB/s", "get_p99", "put_r/s", "put_MB/s",
              "put_p50", "put_p99", "put_max", "mix_r/s", "mix_p99", "mix_pmax", "w_amp", "dev_amp",
              "s_amp", "idx_B/key");
  for (const BackendResult& r : results) {
    const auto& j = out[r.name];
    std::printf(
        "%-13s %10.0f %10.0f %8.1f %8.1f %10.0f %8.1f %8.1f %8.1f %8.1f %10.0f %8.1f %8.1f %7.2f "
        "%7.2f %7.2f %9.2f\n",
        r.name.c_str(), r.load_rows_per_s, r.get.rows_per_s, r.get.mb_per_s, r.get.p99_us / 1e3,
        r.put.rows_per_s, r.put.mb_per_s, r.put.put_p50_us / 1e3, r.put.put_p99_us / 1e3,
        r.put.put_max_us / 1e3, r.mix.rows_per_s, r.mix.p99_us / 1e3, r.mix.put_max_us / 1e3,
        j["write_amp"].get<double>(), j["process_write_amp"].get<double>(),
        j["space_amp"].get<double>(), j["index_bytes_per_key"].get<double>());
  }
  if (raw_iops > 0) {
    std::printf("raw 4 KiB random reads of the native file: %.0f IOPS; native gets / raw = %.2f\n",
                raw_iops, results[0].get.rows_per_s / raw_iops);
  }
  for (const BackendResult& r : results) {
    if (!out.contains(r.name + "_vs_rocksdb_get")) continue;
    std::printf("%s / rocksdb: gets %.2fx, puts %.2fx, mix %.2fx\n", r.name.c_str(),
                out[r.name + "_vs_rocksdb_get"].get<double>(),
                out[r.name + "_vs_rocksdb_put"].get<double>(),
                out[r.name + "_vs_rocksdb_mix"].get<double>());
  }
  return Status::Ok();
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<SsdBenchArgs>();
      CLI::App* c = group.add_subcommand("ssd", "SSD row stores: native vs RocksDB gets and puts");
      c->add_option("--dir", args->dir, "directory for the stores (O_DIRECT capable: not tmpfs)")
          ->required();
      c->add_option("--backend", args->backend, "native (alias uring), rocksdb or both");
      AddUnsigned<uint64_t>(c, "--rows", args->rows, "rows loaded", 1, kTierRowsMax);
      AddUnsigned<uint32_t>(c, "--dim", args->dim, "embedding floats per row", 1, kTableDimMax);
      AddUnsigned<uint32_t>(c, "--state-floats", args->state_floats,
                            "optimizer-state floats per row", 0, kStateFloatsMax);
      AddUnsigned<uint32_t>(c, "--batch", args->batch, "keys per MultiGet/MultiPut call", 1,
                            kBatchKeysMax);
      c->add_option("--dist", args->dist, "uniform or zipf (theta 0.99)");
      AddReal(c, "--seconds", args->seconds, "measured seconds per phase (gets, puts, mix)",
              {.min = 0, .max = kBenchSecondsMax, .min_open = true});
      AddReal(c, "--mix", args->mix,
              "fraction of gets among the mix phase's batches (0.5: training's evictions)",
              {.min = 0, .max = 1});
      AddUnsigned<uint32_t>(c, "--clients", args->clients, "threads calling the store", 1,
                            kClientsMax);
      AddReal(c, "--write-log-fraction", args->write_log_fraction,
              "native: write log size as a fraction of the table's rows (0: puts rewrite "
              "their leaves)",
              {.min = 0, .max = kSsdWriteLogFractionMax});
      c->add_option("--format", args->format,
                    "native store format: 2 (append-only log), 1 (leaf pages) or both")
          ->capture_default_str();
      AddUnsigned<uint64_t>(c, "--segment-bytes", args->segment_bytes,
                            "native format 2: log segment bytes (a power of two)",
                            storage::kSegmentBytesMin, storage::kSegmentBytesMax);
      AddChoice(c, "--index", args->index,
                "native format 2: DRAM index, compact (7 bytes per key; a put of a stored key "
                "reads it once), exact (about 11.7 bytes per key; puts read nothing), both, or "
                "ranges (key-ordered base segments per key range and an exact index of the "
                "log's rows only)",
                {"compact", "exact", "both", "ranges"})
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--range-bits", args->range_bits,
                            "--index ranges: a table's key ranges, 2^this", 0,
                            storage::kRangeBitsMax);
      c->add_flag("--json", args->json, "one JSON object instead of the table");
      c->callback([args] {
        Status s = RunSsdBench(*args);
        if (!s.ok()) {
          std::fprintf(stderr, "strata bench ssd: %s\n", s.ToString().c_str());
          ExitCode() = 1;
        }
      });
    }};

}  // namespace
}  // namespace strata::cli
