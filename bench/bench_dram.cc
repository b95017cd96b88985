// `strata bench dram`: batched lookup-and-copy from the DRAM row cache (T1),
// side by side in one run with a plain memcpy of the same bytes and with a
// std::unordered_map + std::mutex baseline.
//
//   strata bench dram --rows N --dim 64 --threads T --batch 4096 [--json]
//
// Rows are `dim` float32 values (row_bytes = 4 * dim). The cache is filled
// with N rows (capacity exactly N rows, no evictions), then each thread looks
// up `--batches` batches of keys drawn uniformly from the N (drawn before
// timing). memcpy: each thread copies the same number of bytes in chunks of
// one batch from random batch-aligned offsets of an N-row buffer. Baseline:
// one unordered_map key -> row offset under one mutex, locked once per batch.
// Gather (a reference, not a competitor): the same rows copied from an N-row
// buffer by known offsets with the same prefetch distance, no index at all:
// what this machine's random DRAM access allows. The four run in `--rounds`
// interleaved rounds so that load from other processes hits them alike.
// `--writers W` adds W threads overwriting rows through the rounds (the
// index's lock stripes matter when writers hold them); `--stripes` sets the
// stripe count so the two can be compared. Last, N/4 fresh rows are inserted
// into the full cache (each evicts one): steady-state insert throughput;
// index bytes per row are reported before and after it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "cli/cli_util.h"
#include "cli/command.h"
#include "storage/dram/dram_cache.h"

namespace strata::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct DramBenchArgs {
  uint64_t rows = 1 << 20;
  uint32_t dim = 64;
  uint32_t threads = 1;
  uint32_t batch = 4096;
  uint32_t batches = 0;  // per thread; 0: enough to read every row twice
  uint32_t stripes = 64;
  uint32_t writers = 0;
  uint32_t rounds = 4;
  bool json = false;
};

// Key of row i: the first splitmix64 output seeded with i, a bijection of i
// (distinct rows, distinct keys) spread over all 64 bits.
Key KeyOf(uint64_t i) { return SplitMix64(i).Next(); }

// Runs body(thread) on `threads` threads started together; returns seconds
// from the common start to the last finish.
template <typename Body>
double RunTimed(uint32_t threads, Body body) {
  std::latch ready(threads + 1);
  std::vector<SteadyClock::time_point> ends(threads);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.arrive_and_wait();
      body(t);
      ends[t] = SteadyClock::now();
    });
  }
  ready.arrive_and_wait();
  SteadyClock::time_point start = SteadyClock::now();
  for (auto& th : pool) th.join();
  SteadyClock::time_point end = *std::max_element(ends.begin(), ends.end());
  return std::chrono::duration<double>(end - start).count();
}

int RunDramBench(const DramBenchArgs& a) {
  using storage::DramCache;
  const uint32_t rb = a.dim * 4;
  const uint32_t batches =
      a.batches ? a.batches
                : static_cast<uint32_t>(std::max<uint64_t>(8, 2 * a.rows / a.batch / a.threads));
  std::vector<Key> keys(a.rows);
  for (uint64_t i = 0; i < a.rows; ++i) keys[i] = KeyOf(i);

  storage::DramCacheOptions o;
  o.dram_bytes_max = a.rows * rb;
  o.lock_stripes = a.stripes;
  auto made = DramCache::Create(o, {{1, "bench", rb}}, nullptr);
  if (!made.ok()) {
    std::fprintf(stderr, "strata bench dram: %s\n", made.status().ToString().c_str());
    return 1;
  }
  DramCache& cache = **made;
  std::vector<std::byte> fill(uint64_t{a.batch} * rb, std::byte{7});
  auto insert_start = SteadyClock::now();
  for (uint64_t i = 0; i < a.rows; i += a.batch) {
    uint64_t n = std::min<uint64_t>(a.batch, a.rows - i);
    Status s = cache.Insert(1, {keys.data() + i, n}, {fill.data(), n * rb}, {}, {});
    if (!s.ok()) {
      std::fprintf(stderr, "strata bench dram: insert: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  double insert_s = std::chrono::duration<double>(SteadyClock::now() - insert_start).count();

  // Queries drawn before timing: batches * batch keys per thread.
  std::vector<std::vector<Key>> queries(a.threads);
  std::vector<std::vector<uint32_t>> query_rows(a.threads);
  for (uint32_t t = 0; t < a.threads; ++t) {
    std::mt19937_64 rng(t + 1);
    queries[t].resize(uint64_t{batches} * a.batch);
    query_rows[t].resize(queries[t].size());
    for (uint64_t q = 0; q < queries[t].size(); ++q) {
      query_rows[t][q] = static_cast<uint32_t>(rng() % a.rows);
      queries[t][q] = keys[query_rows[t][q]];
    }
  }
  std::vector<std::vector<std::byte>> out(a.threads, std::vector<std::byte>(fill.size()));
  const uint64_t total_rows = uint64_t{batches} * a.batch * a.threads;
  const double total_gb = double(total_rows) * rb / 1e9;

  // The four methods run in interleaved rounds, so that load from other
  // processes on a shared machine falls on all of them alike.
  std::vector<std::byte> source(a.rows * rb, std::byte{3});
  std::unordered_map<Key, uint64_t> map;
  map.reserve(a.rows);
  for (uint64_t i = 0; i < a.rows; ++i) map[keys[i]] = i * rb;
  std::mutex map_mu;
  std::atomic<uint64_t> misses{0};

  // 1. DramCache lookup-and-copy.
  auto lookup = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    std::vector<uint8_t> found(a.batch);
    for (uint32_t b = b0; b < b1; ++b) {
      std::span<const Key> q(queries[t].data() + uint64_t{b} * a.batch, a.batch);
      Status s = cache.Lookup(1, q, out[t], found, {});
      if (!s.ok()) std::abort();
      misses.fetch_add(a.batch - std::count(found.begin(), found.end(), 1));
    }
  };
  // 2. memcpy of the same bytes, one batch's worth at a time.
  const uint64_t chunks = std::max<uint64_t>(1, a.rows / a.batch);
  auto copy = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    std::mt19937_64 rng(t + 77 + b0);
    const uint64_t bytes = std::min<uint64_t>(out[t].size(), source.size());
    for (uint32_t b = b0; b < b1; ++b) {
      std::memcpy(out[t].data(), source.data() + (rng() % chunks) * bytes, bytes);
    }
  };
  // 3. Gather by known offsets (the machine's random-access ceiling).
  auto gather = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    constexpr uint32_t kAhead = 16;
    for (uint32_t b = b0; b < b1; ++b) {
      const uint32_t* q = query_rows[t].data() + uint64_t{b} * a.batch;
      for (uint32_t i = 0; i < a.batch; ++i) {
        if (i + kAhead < a.batch) {
          const std::byte* p = &source[uint64_t{q[i + kAhead]} * rb];
          for (uint32_t off = 0; off < std::min<uint32_t>(rb, 1024); off += 64) {
            __builtin_prefetch(p + off);
          }
        }
        std::memcpy(out[t].data() + uint64_t{i} * rb, &source[uint64_t{q[i]} * rb], rb);
      }
    }
  };
  // 4. unordered_map + mutex baseline over the same rows.
  auto baseline = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    for (uint32_t b = b0; b < b1; ++b) {
      const Key* q = queries[t].data() + uint64_t{b} * a.batch;
      std::lock_guard lock(map_mu);
      for (uint32_t i = 0; i < a.batch; ++i) {
        auto it = map.find(q[i]);
        if (it != map.end()) std::memcpy(out[t].data() + uint64_t{i} * rb, &source[it->second], rb);
      }
    }
  };

  // Optional writers overwrite cached rows through all rounds.
  std::atomic<bool> rounds_done{false};
  std::atomic<uint64_t> written{0};
  std::vector<std::thread> writers;
  for (uint32_t w = 0; w < a.writers; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(1000 + w);
      std::vector<Key> wk(a.batch);
      std::vector<std::byte> rows(fill.size(), std::byte{9});
      while (!rounds_done.load(std::memory_order_relaxed)) {
        for (Key& k : wk) k = keys[rng() % a.rows];
        if (cache.Insert(1, wk, rows, {}, {}).ok()) written.fetch_add(wk.size());
      }
    });
  }
  double lookup_s = 0, memcpy_s = 0, gather_s = 0, baseline_s = 0;
  const uint32_t rounds = std::min(a.rounds, batches);
  auto rounds_start = SteadyClock::now();
  for (uint32_t r = 0; r < rounds; ++r) {
    const uint32_t b0 = batches * r / rounds, b1 = batches * (r + 1) / rounds;
    lookup_s += RunTimed(a.threads, [&](uint32_t t) { lookup(t, b0, b1); });
    memcpy_s += RunTimed(a.threads, [&](uint32_t t) { copy(t, b0, b1); });
    gather_s += RunTimed(a.threads, [&](uint32_t t) { gather(t, b0, b1); });
    baseline_s += RunTimed(a.threads, [&](uint32_t t) { baseline(t, b0, b1); });
  }
  rounds_done = true;
  for (auto& w : writers) w.join();
  const double rounds_s = std::chrono::duration<double>(SteadyClock::now() - rounds_start).count();
  const storage::DramCacheStats stats = cache.Stats();

  // Steady-state inserts into the full cache: every new row evicts one.
  const uint64_t fresh = std::max<uint64_t>(a.batch, a.rows / 4);
  auto evict_start = SteadyClock::now();
  for (uint64_t i = 0; i < fresh; i += a.batch) {
    std::vector<Key> batch_keys(std::min<uint64_t>(a.batch, fresh - i));
    for (uint64_t j = 0; j < batch_keys.size(); ++j) batch_keys[j] = KeyOf(a.rows + i + j);
    Status s = cache.Insert(1, batch_keys, {fill.data(), batch_keys.size() * rb}, {}, {});
    if (!s.ok()) {
      std::fprintf(stderr, "strata bench dram: insert with eviction: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  double evict_s = std::chrono::duration<double>(SteadyClock::now() - evict_start).count();
  const storage::DramCacheStats evicted_stats = cache.Stats();  // queues in use now

  nlohmann::json j = {
      {"rows", a.rows},
      {"dim", a.dim},
      {"row_bytes", rb},
      {"threads", a.threads},
      {"batch", a.batch},
      {"batches_per_thread", batches},
      {"stripes", a.stripes},
      {"writers", a.writers},
      {"rounds", rounds},
      {"lookup_rows_per_s", total_rows / lookup_s},
      {"lookup_gbps", total_gb / lookup_s},
      {"lookup_misses", misses.load()},
      {"memcpy_gbps", total_gb / memcpy_s},
      {"baseline_rows_per_s", total_rows / baseline_s},
      {"baseline_gbps", total_gb / baseline_s},
      {"lookup_vs_memcpy", memcpy_s / lookup_s},
      {"gather_gbps", total_gb / gather_s},
      {"lookup_vs_gather", gather_s / lookup_s},
      {"writer_rows_per_s", written.load() / rounds_s},
      {"insert_rows_per_s", a.rows / insert_s},
      {"insert_evict_rows_per_s", fresh / evict_s},
      {"insert_evict_vs_lookup", (fresh / evict_s) / (total_rows / lookup_s)},
      {"index_bytes_per_row", double(stats.index_bytes) / double(stats.rows)},
      {"index_bytes_per_row_after_evict",
       double(evicted_stats.index_bytes) / double(evicted_stats.rows)},
      {"numa_interleaved", cache.numa_interleaved()},
  };
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "strata bench dram: %llu rows x %u B, %u threads, batch %u, %u batches/thread, "
        "%u stripes, %u writers, NUMA interleaved: %s\n",
        static_cast<unsigned long long>(a.rows), rb, a.threads, a.batch, batches, a.stripes,
        a.writers, cache.numa_interleaved() ? "yes" : "no");
    std::printf("%-28s %14s %10s\n", "operation", "rows/s", "GB/s");
    std::printf("%-28s %14.3e %10.2f\n", "dram cache lookup+copy", total_rows / lookup_s,
                total_gb / lookup_s);
    std::printf("%-28s %14s %10.2f\n", "memcpy (same bytes)", "-", total_gb / memcpy_s);
    std::printf("%-28s %14.3e %10.2f\n", "gather by offset (no index)", total_rows / gather_s,
                total_gb / gather_s);
    std::printf("%-28s %14.3e %10.2f\n", "unordered_map + mutex", total_rows / baseline_s,
                total_gb / baseline_s);
    std::printf("lookup / memcpy bandwidth: %.2f; lookup / gather: %.2f\n", memcpy_s / lookup_s,
                gather_s / lookup_s);
    std::printf(
        "insert into empty cache %.3e rows/s; insert evicting %.3e rows/s; "
        "index+metadata %.1f B/row (%.1f after the evictions); writers %.3e rows/s\n",
        a.rows / insert_s, fresh / evict_s, double(stats.index_bytes) / double(stats.rows),
        double(evicted_stats.index_bytes) / double(evicted_stats.rows), written.load() / rounds_s);
  }
  return misses.load() == 0 ? 0 : 1;
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<DramBenchArgs>();
      CLI::App* c = group.add_subcommand("dram",
                                         "DRAM row cache: batched lookup-and-copy vs memcpy "
                                         "and an unordered_map+mutex baseline");
      AddUnsigned<uint64_t>(c, "--rows", args->rows, "rows in the cache", 1, uint64_t{1} << 32);
      AddUnsigned<uint32_t>(c, "--dim", args->dim, "float32 values per row", 1, 65536);
      AddUnsigned<uint32_t>(c, "--threads", args->threads, "lookup threads", 1, 1024);
      AddUnsigned<uint32_t>(c, "--batch", args->batch, "keys per lookup", 1, 1 << 20);
      AddUnsigned(c, "--batches", args->batches, "batches per thread (0: read every row twice)");
      AddUnsigned<uint32_t>(c, "--stripes", args->stripes, "index lock stripes", 1, 4096);
      AddUnsigned<uint32_t>(c, "--writers", args->writers,
                            "threads overwriting rows during the lookups", 0, 1024);
      AddUnsigned<uint32_t>(c, "--rounds", args->rounds, "interleaved rounds of the four methods",
                            1, 1000);
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { ExitCode() = RunDramBench(*args); });
    }};

}  // namespace
}  // namespace strata::cli
