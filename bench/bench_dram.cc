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
// `--writers W` adds W threads overwriting rows while the lookups run (the
// index's lock stripes matter when writers hold them); `--stripes` sets the
// stripe count so the two can be compared.
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

#include "bench/command.h"
#include "storage/dram_cache.h"

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
  bool json = false;
};

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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
  for (uint64_t i = 0; i < a.rows; ++i) keys[i] = SplitMix(i);

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
  for (uint32_t t = 0; t < a.threads; ++t) {
    std::mt19937_64 rng(t + 1);
    queries[t].resize(uint64_t{batches} * a.batch);
    for (Key& k : queries[t]) k = keys[rng() % a.rows];
  }
  std::vector<std::vector<std::byte>> out(a.threads, std::vector<std::byte>(fill.size()));
  const uint64_t total_rows = uint64_t{batches} * a.batch * a.threads;
  const double total_gb = double(total_rows) * rb / 1e9;

  // 1. DramCache lookup-and-copy (with optional concurrent writers).
  std::atomic<bool> lookups_done{false};
  std::atomic<uint64_t> written{0};
  std::vector<std::thread> writers;
  for (uint32_t w = 0; w < a.writers; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(1000 + w);
      std::vector<Key> wk(a.batch);
      std::vector<std::byte> rows(fill.size(), std::byte{9});
      while (!lookups_done.load(std::memory_order_relaxed)) {
        for (Key& k : wk) k = keys[rng() % a.rows];
        if (cache.Insert(1, wk, rows, {}, {}).ok()) written.fetch_add(wk.size());
      }
    });
  }
  std::atomic<uint64_t> misses{0};
  double lookup_s = RunTimed(a.threads, [&](uint32_t t) {
    std::vector<uint8_t> found(a.batch);
    for (uint32_t b = 0; b < batches; ++b) {
      std::span<const Key> q(queries[t].data() + uint64_t{b} * a.batch, a.batch);
      Status s = cache.Lookup(1, q, out[t], found, {});
      if (!s.ok()) std::abort();
      misses.fetch_add(a.batch - std::count(found.begin(), found.end(), 1));
    }
  });
  lookups_done = true;
  for (auto& w : writers) w.join();
  const storage::DramCacheStats stats = cache.Stats();

  // 2. memcpy of the same bytes.
  std::vector<std::byte> source(a.rows * rb, std::byte{3});
  const uint64_t chunks = std::max<uint64_t>(1, a.rows / a.batch);
  double memcpy_s = RunTimed(a.threads, [&](uint32_t t) {
    std::mt19937_64 rng(t + 77);
    const uint64_t bytes = std::min<uint64_t>(out[t].size(), source.size());
    for (uint32_t b = 0; b < batches; ++b) {
      std::memcpy(out[t].data(), source.data() + (rng() % chunks) * bytes, bytes);
    }
  });

  // 3. unordered_map + mutex baseline over the same rows.
  std::unordered_map<Key, uint64_t> map;
  map.reserve(a.rows);
  for (uint64_t i = 0; i < a.rows; ++i) map[keys[i]] = i * rb;
  std::mutex map_mu;
  double baseline_s = RunTimed(a.threads, [&](uint32_t t) {
    for (uint32_t b = 0; b < batches; ++b) {
      const Key* q = queries[t].data() + uint64_t{b} * a.batch;
      std::lock_guard lock(map_mu);
      for (uint32_t i = 0; i < a.batch; ++i) {
        auto it = map.find(q[i]);
        if (it != map.end()) std::memcpy(out[t].data() + uint64_t{i} * rb, &source[it->second], rb);
      }
    }
  });

  nlohmann::json j = {
      {"rows", a.rows},
      {"dim", a.dim},
      {"row_bytes", rb},
      {"threads", a.threads},
      {"batch", a.batch},
      {"batches_per_thread", batches},
      {"stripes", a.stripes},
      {"writers", a.writers},
      {"lookup_rows_per_s", total_rows / lookup_s},
      {"lookup_gbps", total_gb / lookup_s},
      {"lookup_misses", misses.load()},
      {"memcpy_gbps", total_gb / memcpy_s},
      {"baseline_rows_per_s", total_rows / baseline_s},
      {"baseline_gbps", total_gb / baseline_s},
      {"lookup_vs_memcpy", memcpy_s / lookup_s},
      {"writer_rows_per_s", written.load() / lookup_s},
      {"insert_rows_per_s", a.rows / insert_s},
      {"index_bytes_per_row", double(stats.index_bytes) / double(stats.rows)},
      {"numa_interleaved", cache.numa_interleaved()},
  };
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("strata bench dram: %llu rows x %u B, %u threads, batch %u, %u batches/thread, "
                "%u stripes, %u writers, NUMA interleaved: %s\n",
                static_cast<unsigned long long>(a.rows), rb, a.threads, a.batch, batches,
                a.stripes, a.writers, cache.numa_interleaved() ? "yes" : "no");
    std::printf("%-28s %14s %10s\n", "operation", "rows/s", "GB/s");
    std::printf("%-28s %14.3e %10.2f\n", "dram cache lookup+copy", total_rows / lookup_s,
                total_gb / lookup_s);
    std::printf("%-28s %14s %10.2f\n", "memcpy (same bytes)", "-", total_gb / memcpy_s);
    std::printf("%-28s %14.3e %10.2f\n", "unordered_map + mutex", total_rows / baseline_s,
                total_gb / baseline_s);
    std::printf("lookup / memcpy bandwidth: %.2f; insert %.3e rows/s; "
                "index+metadata %.1f B/row; writers %.3e rows/s\n",
                memcpy_s / lookup_s, a.rows / insert_s,
                double(stats.index_bytes) / double(stats.rows), written.load() / lookup_s);
  }
  return misses.load() == 0 ? 0 : 1;
}

CommandRegistrar reg{"bench", [](CLI::App& group) {
  auto args = std::make_shared<DramBenchArgs>();
  CLI::App* c = group.add_subcommand("dram", "DRAM row cache: batched lookup-and-copy vs memcpy "
                                             "and an unordered_map+mutex baseline");
  c->add_option("--rows", args->rows, "rows in the cache")->check(CLI::Range(1ull, 1ull << 32));
  c->add_option("--dim", args->dim, "float32 values per row")->check(CLI::Range(1u, 65536u));
  c->add_option("--threads", args->threads, "lookup threads")->check(CLI::Range(1u, 1024u));
  c->add_option("--batch", args->batch, "keys per lookup")->check(CLI::Range(1u, 1u << 20));
  c->add_option("--batches", args->batches, "batches per thread (0: read every row twice)");
  c->add_option("--stripes", args->stripes, "index lock stripes")->check(CLI::Range(1u, 4096u));
  c->add_option("--writers", args->writers, "threads overwriting rows during the lookups");
  c->add_flag("--json", args->json, "print JSON");
  c->callback([args] { ExitCode() = RunDramBench(*args); });
}};

}  // namespace
}  // namespace strata::cli
