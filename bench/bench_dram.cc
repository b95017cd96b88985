// `strata bench dram`: batched lookup-and-copy from the DRAM row cache (T1),
// side by side in one run with a plain memcpy of the same bytes and with a
// std::unordered_map + std::mutex baseline.
//
//   strata bench dram --rows N --dim 64 --threads T[,T2,...] --batch 4096 [--json]
//
// Rows are `dim` float32 values (row_bytes = 4 * dim). The cache is filled
// with N rows (capacity exactly N rows, no evictions), then, for each thread
// count in turn, each thread looks up `--batches` batches of keys drawn
// uniformly from the N (drawn before timing). memcpy: each thread copies the same number of bytes
// in chunks of one batch from random batch-aligned offsets of an N-row buffer. Baseline: one
// unordered_map key -> row offset under one mutex, locked once per batch. Gather (a reference, not
// a competitor): the same rows copied from an N-row buffer by known offsets with the same prefetch
// distance, no index at all: what this machine's random DRAM access allows. Gather through an
// index line (a second reference): the same, but each row's address first goes through one
// random 64-byte line of an array of 10 bytes per row (an index of 8-byte entries at load 0.8),
// read in the lookup's two-stage pipeline: the ceiling of any index that reads one line per
// lookup (and keeps its lines outside the TLB's reach when the rows are). Both gathers read
// rows packed in an arena like the cache's (huge pages, interleaved). Gather through an index
// line onto slots (a third reference): the same again, but the rows sit in slots laid out as
// the cache's (the 8-byte key, then the row, DramSlotBytes apart) and each row's key is compared
// before its copy: the ceiling of the cache's own layout, whose slots span one cache line more
// than their rows. The six run in `--rounds` interleaved rounds so that load from other
// processes hits them alike.
// `--writers W` adds W threads overwriting rows through the rounds (the
// index's lock stripes matter when writers hold them); `--stripes` sets the
// stripe count so the two can be compared, `--shards` the cache's shards
// (each with its own eviction order and mutation lock). Last, for each thread count,
// N/4 fresh rows are inserted into the full cache (each evicts one), split
// over the threads: steady-state insert throughput; index bytes per row are
// reported before and after these evictions.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/hash.h"
#include "cli/cli_util.h"
#include "cli/command.h"
#include "storage/dram/dram_arena.h"
#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/dram_shard_internal.h"
#include "storage/dram/limits.h"

namespace strata::cli {
namespace {

using SteadyClock = std::chrono::steady_clock;

inline constexpr uint64_t kDramBenchThreadsMax = 1024;  // per count of --threads

struct DramBenchArgs {
  uint64_t rows = 1 << 20;
  uint32_t dim = 64;
  std::string threads = "1";  // a list: each count in turn
  uint32_t batch = 4096;
  uint32_t batches = 0;  // per thread; 0: enough to read every row twice
  uint32_t stripes = 64;
  uint32_t shards = 0;  // 0: the cache's automatic count
  uint32_t writers = 0;
  uint32_t rounds = 4;
  bool json = false;
};

// Key of row i: the first splitmix64 output seeded with i, a bijection of i
// (distinct rows, distinct keys) spread over all 64 bits.
Key KeyOf(uint64_t i) { return SplitMix64(i).Next(); }

// Runs body(thread) on `threads` threads started together; returns seconds
// from the first thread's start to the last one's finish. Each thread reads
// the clock itself: the caller's clock after the latch may come after a
// short body has finished (the caller descheduled), which gave negative
// times.
template <typename Body>
double RunTimed(uint32_t threads, Body body) {
  std::latch ready(threads);
  std::vector<SteadyClock::time_point> starts(threads), ends(threads);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.arrive_and_wait();
      starts[t] = SteadyClock::now();
      body(t);
      ends[t] = SteadyClock::now();
    });
  }
  for (auto& th : pool) th.join();
  const SteadyClock::time_point start = *std::min_element(starts.begin(), starts.end());
  const SteadyClock::time_point end = *std::max_element(ends.begin(), ends.end());
  return std::chrono::duration<double>(end - start).count();
}

// The share of the mapping at `base` that sits on transparent huge pages
// (AnonHugePages over Rss in /proc/self/smaps), or -1 where that file cannot
// tell: a gather whose rows fell back to 4 KiB pages is no fair reference
// for a cache whose rows did not.
double HugePageShare(const void* base) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  const auto at = reinterpret_cast<uintptr_t>(base);
  char line[512];
  bool in = false;
  double rss = -1, huge = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    // Only a mapping's first line reads as two hex numbers joined by '-'.
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      in = lo <= at && at < hi;
      continue;
    }
    if (!in) continue;
    unsigned long kb = 0;
    if (std::sscanf(line, "Rss: %lu kB", &kb) == 1) rss = double(kb);
    if (std::sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) huge = double(kb);
  }
  std::fclose(f);
  return rss > 0 && huge >= 0 ? huge / rss : -1;
}

// What one thread count measured.
struct DramBenchRun {
  uint32_t threads = 0;
  uint32_t batches = 0;  // per thread
  uint32_t rounds = 0;
  uint64_t lookup_rows = 0;  // over all threads
  double lookup_s = 0, memcpy_s = 0, gather_s = 0, gather_index_s = 0, gather_slots_s = 0;
  double baseline_s = 0, rounds_s = 0;
  uint64_t misses = 0, written = 0;
  uint64_t retries = 0;  // lookup keys read again under their stripe's lock
  uint64_t evict_rows = 0;
  double evict_s = 0;
};

int RunDramBench(const DramBenchArgs& a) {
  using storage::DramCache;
  auto counts = ParseUints(a.threads, "--threads", 1, kDramBenchThreadsMax);
  if (!counts.ok()) {
    std::fprintf(stderr, "strata bench dram: %s\n", counts.status().ToString().c_str());
    return 2;
  }
  const uint32_t rb = a.dim * 4;
  auto batches_of = [&](uint64_t threads) {
    return a.batches ? a.batches
                     : static_cast<uint32_t>(std::max<uint64_t>(8, 2 * a.rows / a.batch / threads));
  };
  const uint32_t threads_max =
      static_cast<uint32_t>(*std::max_element(counts->begin(), counts->end()));
  // What the run holds at once, before anything is allocated: a --rows or
  // --dim too large for this machine is a usage error, not an allocation
  // failure or the kernel's OOM kill halfway through the fill.
  {
    const uint64_t slot_bytes = storage::DramSlotBytes(rb);
    // Per row: the cache's slot and its index and metadata (at most 24 B),
    // the gathers' three copies (packed rows, index line share, slots), the
    // key, and the baseline's unordered_map node and bucket (about 48 B).
    uint64_t need = a.rows * (slot_bytes + 24 + rb + 10 + slot_bytes + 8 + 48);
    for (uint32_t t = 0; t < threads_max; ++t) {
      uint64_t batches = 0;
      for (uint64_t c : *counts) {
        if (c > t) batches = std::max<uint64_t>(batches, batches_of(c));
      }
      need += batches * a.batch * (sizeof(Key) + 2 * sizeof(uint32_t)) + uint64_t{a.batch} * rb;
    }
    const uint64_t have = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
    if (need > have) {
      std::fprintf(stderr,
                   "strata bench dram: --rows %llu --dim %u needs about %.1f GB of memory (the "
                   "cache, three reference copies of the rows, the baseline's map, the queries); "
                   "this machine has %.1f GB\n",
                   static_cast<unsigned long long>(a.rows), a.dim, double(need) / 1e9,
                   double(have) / 1e9);
      return 2;
    }
  }
  std::vector<Key> keys(a.rows);
  for (uint64_t i = 0; i < a.rows; ++i) keys[i] = KeyOf(i);

  storage::DramCacheOptions o;
  o.dram_bytes_max = a.rows * rb;
  o.lock_stripes = a.stripes;
  o.shards = a.shards;
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

  // Queries drawn before timing: thread t draws the most batches any count
  // with more than t threads gives it.
  std::vector<std::vector<Key>> queries(threads_max);
  std::vector<std::vector<uint32_t>> query_rows(threads_max);
  std::vector<std::vector<uint32_t>> query_lines(threads_max);  // the index line of each query
  // The index lines' array: 10 bytes per row, whole lines.
  const uint64_t index_lines = std::max<uint64_t>(1, (a.rows * 10 + 63) / 64);
  for (uint32_t t = 0; t < threads_max; ++t) {
    uint64_t batches = 0;
    for (uint64_t c : *counts) {
      if (c > t) batches = std::max<uint64_t>(batches, batches_of(c));
    }
    std::mt19937_64 rng(t + 1);
    queries[t].resize(batches * a.batch);
    query_rows[t].resize(queries[t].size());
    query_lines[t].resize(queries[t].size());
    for (uint64_t q = 0; q < queries[t].size(); ++q) {
      query_rows[t][q] = static_cast<uint32_t>(rng() % a.rows);
      queries[t][q] = keys[query_rows[t][q]];
      const uint64_t h = storage::DramKeyHash(queries[t][q]);
      query_lines[t][q] =
          static_cast<uint32_t>((static_cast<unsigned __int128>(h) * index_lines) >> 64);
    }
  }
  std::vector<std::vector<std::byte>> out(threads_max, std::vector<std::byte>(fill.size()));

  // The six methods run in interleaved rounds, so that load from other
  // processes on a shared machine falls on all of them alike. The gathers'
  // rows and index lines live in arenas like the cache's (huge pages,
  // interleaved), written first so that every page is resident.
  auto source_arena = storage::DramArena::Create(a.rows, rb, /*huge_pages=*/true);
  auto index_arena = storage::DramArena::Create(index_lines, 64, /*huge_pages=*/true);
  const uint32_t slot_bytes = storage::DramSlotBytes(rb);
  auto slots_arena = storage::DramArena::Create(a.rows, slot_bytes, /*huge_pages=*/true);
  for (const auto* arena : {&source_arena, &index_arena, &slots_arena}) {
    if (!arena->ok()) {
      std::fprintf(stderr, "strata bench dram: %s\n", arena->status().ToString().c_str());
      return 1;
    }
  }
  std::byte* const source = (*source_arena)->base();
  std::memset(source, 3, a.rows * rb);
  const std::byte* const index_base = (*index_arena)->base();
  std::memset((*index_arena)->base(), 0, index_lines * 64);
  std::byte* const slots = (*slots_arena)->base();
  std::memset(slots, 3, a.rows * slot_bytes);
  for (uint64_t i = 0; i < a.rows; ++i) {
    const Key k = keys[i];
    std::memcpy(slots + i * slot_bytes, &k, sizeof(k));
  }
  std::unordered_map<Key, uint64_t> map;
  map.reserve(a.rows);
  for (uint64_t i = 0; i < a.rows; ++i) map[keys[i]] = i * rb;
  std::mutex map_mu;
  std::atomic<uint64_t> misses{0};
  std::atomic<uint64_t> slot_key_mismatches{0};  // 3c's keys (0 unless the bench is wrong)

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
    const uint64_t bytes = std::min<uint64_t>(out[t].size(), a.rows * rb);
    for (uint32_t b = b0; b < b1; ++b) {
      std::memcpy(out[t].data(), source + (rng() % chunks) * bytes, bytes);
    }
  };
  // 3. Gather by known offsets (the machine's random-access ceiling).
  auto gather = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    constexpr uint32_t kAhead = 16;
    for (uint32_t b = b0; b < b1; ++b) {
      const uint32_t* q = query_rows[t].data() + uint64_t{b} * a.batch;
      for (uint32_t i = 0; i < a.batch; ++i) {
        if (i + kAhead < a.batch) {
          const std::byte* p = source + uint64_t{q[i + kAhead]} * rb;
          for (uint32_t off = 0; off < std::min<uint32_t>(rb, 1024); off += 64) {
            __builtin_prefetch(p + off);
          }
        }
        std::memcpy(out[t].data() + uint64_t{i} * rb, source + uint64_t{q[i]} * rb, rb);
      }
    }
  };
  // 3b. Gather through one index line per row, in the lookup's pipeline:
  // row j's line prefetched, row j - kAhead's line read (its first word, 0,
  // is added to the row's address: a true dependency) and its row
  // prefetched, row j - 2 kAhead copied. 3c (kSlots): the same onto slots
  // laid out as the cache's, the slot prefetched whole and its key compared
  // at the copy (a mismatch is counted, and fails the run).
  auto gather_through_line = [&]<bool kSlots>(uint32_t t, uint32_t b0, uint32_t b1) {
    constexpr uint32_t kAhead = storage::kDramLookupAhead;
    constexpr uint32_t kRing = std::bit_ceil(2 * kAhead + 1);
    const std::byte* const base = kSlots ? slots : source;
    const uint64_t stride = kSlots ? slot_bytes : rb;
    const uint32_t header = kSlots ? storage::kDramSlotHeaderBytes : 0;
    const uint32_t prefetch_bytes = std::min<uint32_t>(header + rb, 1024);
    std::array<const std::byte*, kRing> ring{};
    uint64_t wrong = 0;
    for (uint32_t b = b0; b < b1; ++b) {
      const uint32_t* q = query_rows[t].data() + uint64_t{b} * a.batch;
      const uint32_t* l = query_lines[t].data() + uint64_t{b} * a.batch;
      const Key* want = queries[t].data() + uint64_t{b} * a.batch;
      for (uint32_t j = 0; j < a.batch + 2 * kAhead; ++j) {
        if (j < a.batch) __builtin_prefetch(index_base + uint64_t{l[j]} * 64);
        if (j >= kAhead && j - kAhead < a.batch) {
          const uint32_t i = j - kAhead;
          uint64_t word;
          std::memcpy(&word, index_base + uint64_t{l[i]} * 64, sizeof(word));
          const std::byte* p = base + q[i] * stride + word;
          ring[i & (kRing - 1)] = p;
          for (uint32_t off = 0; off < prefetch_bytes; off += 64) __builtin_prefetch(p + off);
        }
        if (j >= 2 * kAhead) {
          const uint32_t i = j - 2 * kAhead;
          const std::byte* p = ring[i & (kRing - 1)];
          if constexpr (kSlots) {
            Key k;
            std::memcpy(&k, p, sizeof(k));
            if (k != want[i]) {
              ++wrong;
              continue;
            }
          }
          std::memcpy(out[t].data() + uint64_t{i} * rb, p + header, rb);
        }
      }
    }
    if (wrong != 0) slot_key_mismatches.fetch_add(wrong);
  };
  auto gather_index = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    gather_through_line.operator()<false>(t, b0, b1);
  };
  auto gather_slots = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    gather_through_line.operator()<true>(t, b0, b1);
  };
  // 4. unordered_map + mutex baseline over the same rows.
  auto baseline = [&](uint32_t t, uint32_t b0, uint32_t b1) {
    for (uint32_t b = b0; b < b1; ++b) {
      const Key* q = queries[t].data() + uint64_t{b} * a.batch;
      std::lock_guard lock(map_mu);
      for (uint32_t i = 0; i < a.batch; ++i) {
        auto it = map.find(q[i]);
        if (it != map.end()) std::memcpy(out[t].data() + uint64_t{i} * rb, source + it->second, rb);
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
  std::vector<DramBenchRun> runs;
  for (uint64_t count : *counts) {
    DramBenchRun r;
    r.threads = static_cast<uint32_t>(count);
    r.batches = batches_of(count);
    r.lookup_rows = uint64_t{r.batches} * a.batch * r.threads;
    r.rounds = std::min(a.rounds, r.batches);
    const uint64_t misses_before = misses.load(), written_before = written.load();
    const uint64_t retries_before = cache.Stats().lookup_retries;
    auto rounds_start = SteadyClock::now();
    for (uint32_t k = 0; k < r.rounds; ++k) {
      const uint32_t b0 = r.batches * k / r.rounds, b1 = r.batches * (k + 1) / r.rounds;
      r.lookup_s += RunTimed(r.threads, [&](uint32_t t) { lookup(t, b0, b1); });
      r.memcpy_s += RunTimed(r.threads, [&](uint32_t t) { copy(t, b0, b1); });
      r.gather_s += RunTimed(r.threads, [&](uint32_t t) { gather(t, b0, b1); });
      r.gather_index_s += RunTimed(r.threads, [&](uint32_t t) { gather_index(t, b0, b1); });
      r.gather_slots_s += RunTimed(r.threads, [&](uint32_t t) { gather_slots(t, b0, b1); });
      r.baseline_s += RunTimed(r.threads, [&](uint32_t t) { baseline(t, b0, b1); });
    }
    r.rounds_s = std::chrono::duration<double>(SteadyClock::now() - rounds_start).count();
    r.misses = misses.load() - misses_before;
    r.written = written.load() - written_before;
    r.retries = cache.Stats().lookup_retries - retries_before;
    runs.push_back(r);
  }
  rounds_done = true;
  for (auto& w : writers) w.join();
  const storage::DramCacheStats stats = cache.Stats();

  // Steady-state inserts into the full cache, for each thread count: N/4
  // fresh rows split over the threads, every new row evicting one. Keys
  // are made before timing.
  const uint64_t fresh = std::max<uint64_t>(a.batch, a.rows / 4);
  uint64_t next_key = a.rows;
  for (DramBenchRun& r : runs) {
    std::vector<std::vector<Key>> fresh_keys(r.threads);
    for (uint32_t t = 0; t < r.threads; ++t) {
      const uint64_t begin = fresh * t / r.threads, end = fresh * (t + 1) / r.threads;
      for (uint64_t i = begin; i < end; ++i) fresh_keys[t].push_back(KeyOf(next_key + i));
    }
    next_key += fresh;
    std::atomic<bool> failed{false};
    r.evict_s = RunTimed(r.threads, [&](uint32_t t) {
      const std::vector<Key>& mine = fresh_keys[t];
      for (uint64_t i = 0; i < mine.size(); i += a.batch) {
        const uint64_t n = std::min<uint64_t>(a.batch, mine.size() - i);
        Status s = cache.Insert(1, {mine.data() + i, n}, {fill.data(), n * rb}, {}, {});
        if (!s.ok()) {
          std::fprintf(stderr, "strata bench dram: insert with eviction: %s\n",
                       s.ToString().c_str());
          failed = true;
          return;
        }
      }
    });
    if (failed) return 1;
    r.evict_rows = fresh;
  }
  const storage::DramCacheStats evicted_stats = cache.Stats();  // queues in use now

  const double row_gb = double(rb) / 1e9;
  auto measures = [&](const DramBenchRun& r) {
    const double lookup_rows_per_s = r.lookup_rows / r.lookup_s;
    const double evict_rows_per_s = r.evict_rows / r.evict_s;
    return nlohmann::json{
        {"threads", r.threads},
        {"batches_per_thread", r.batches},
        {"rounds", r.rounds},
        {"lookup_rows_per_s", lookup_rows_per_s},
        {"lookup_gbps", r.lookup_rows * row_gb / r.lookup_s},
        {"lookup_misses", r.misses},
        {"lookup_retries", r.retries},
        {"memcpy_gbps", r.lookup_rows * row_gb / r.memcpy_s},
        {"baseline_rows_per_s", r.lookup_rows / r.baseline_s},
        {"baseline_gbps", r.lookup_rows * row_gb / r.baseline_s},
        {"lookup_vs_memcpy", r.memcpy_s / r.lookup_s},
        {"gather_gbps", r.lookup_rows * row_gb / r.gather_s},
        {"lookup_vs_gather", r.gather_s / r.lookup_s},
        {"gather_index_gbps", r.lookup_rows * row_gb / r.gather_index_s},
        {"lookup_vs_gather_index", r.gather_index_s / r.lookup_s},
        {"gather_slots_gbps", r.lookup_rows * row_gb / r.gather_slots_s},
        {"lookup_vs_gather_slots", r.gather_slots_s / r.lookup_s},
        {"writer_rows_per_s", r.written / r.rounds_s},
        {"insert_evict_rows_per_s", evict_rows_per_s},
        {"insert_evict_vs_lookup", evict_rows_per_s / lookup_rows_per_s},
    };
  };
  uint64_t misses_total = 0;
  nlohmann::json by_threads = nlohmann::json::array();
  for (const DramBenchRun& r : runs) {
    by_threads.push_back(measures(r));
    misses_total += r.misses;
  }
  nlohmann::json j = {
      {"rows", a.rows},
      {"dim", a.dim},
      {"row_bytes", rb},
      {"threads", *counts},
      {"batch", a.batch},
      {"stripes", a.stripes},
      {"shards", cache.shards()},
      {"writers", a.writers},
      {"insert_rows_per_s", a.rows / insert_s},
      {"index_bytes_per_row", double(stats.index_bytes) / double(stats.rows)},
      {"index_bytes_per_row_after_evict",
       double(evicted_stats.index_bytes) / double(evicted_stats.rows)},
      {"numa_interleaved", cache.numa_interleaved()},
      {"gather_rows_huge_page_share", HugePageShare(source)},
      {"gather_index_huge_page_share", HugePageShare(index_base)},
      {"gather_slots_huge_page_share", HugePageShare(slots)},
      {"gather_slots_key_mismatches", slot_key_mismatches.load()},
      {"by_threads", by_threads},
  };
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "strata bench dram: %llu rows x %u B, threads %s, batch %u, %u stripes, %u shards, "
        "%u writers, NUMA interleaved: %s\n",
        static_cast<unsigned long long>(a.rows), rb, a.threads.c_str(), a.batch, a.stripes,
        cache.shards(), a.writers, cache.numa_interleaved() ? "yes" : "no");
    std::printf("%7s %9s %12s %9s %9s %9s %9s %9s %9s %13s %13s %13s %19s %12s %14s\n", "threads",
                "batches", "lookup rows/s", "lookup GB/s", "memcpy GB/s", "gather GB/s",
                "gather+line GB/s", "gather+line+slot GB/s", "map GB/s", "lookup/gather",
                "lookup/(gather+line)", "lookup/(gather+line+slot)", "insert-evict rows/s",
                "evict/lookup", "writers rows/s");
    for (const DramBenchRun& r : runs) {
      const double lookup_rows_per_s = r.lookup_rows / r.lookup_s;
      const double evict_rows_per_s = r.evict_rows / r.evict_s;
      std::printf(
          "%7u %9u %12.3e %11.2f %11.2f %11.2f %16.2f %21.2f %9.2f %13.2f %20.2f %25.2f %19.3e "
          "%12.2f %14.3e\n",
          r.threads, r.batches, lookup_rows_per_s, r.lookup_rows * row_gb / r.lookup_s,
          r.lookup_rows * row_gb / r.memcpy_s, r.lookup_rows * row_gb / r.gather_s,
          r.lookup_rows * row_gb / r.gather_index_s, r.lookup_rows * row_gb / r.gather_slots_s,
          r.lookup_rows * row_gb / r.baseline_s, r.gather_s / r.lookup_s,
          r.gather_index_s / r.lookup_s, r.gather_slots_s / r.lookup_s, evict_rows_per_s,
          evict_rows_per_s / lookup_rows_per_s, r.written / r.rounds_s);
    }
    std::printf(
        "insert into empty cache %.3e rows/s; index+metadata %.1f B/row (%.1f after the "
        "evictions); on huge pages: gather rows %.2f, gather index lines %.2f, gather slots %.2f\n",
        a.rows / insert_s, double(stats.index_bytes) / double(stats.rows),
        double(evicted_stats.index_bytes) / double(evicted_stats.rows), HugePageShare(source),
        HugePageShare(index_base), HugePageShare(slots));
    if (slot_key_mismatches.load() != 0) {
      std::printf("gather onto slots: %llu keys did not match their slots\n",
                  static_cast<unsigned long long>(slot_key_mismatches.load()));
    }
  }
  // Every row looked up was inserted into a cache with room for all of
  // them: a miss is a row the cache lost. Said on stderr, so a run with
  // --json says why it failed too.
  if (misses_total != 0) {
    std::fprintf(stderr,
                 "strata bench dram: %llu lookups missed rows inserted into a cache with room for "
                 "all %llu (%u shards)\n",
                 static_cast<unsigned long long>(misses_total),
                 static_cast<unsigned long long>(a.rows), cache.shards());
  }
  if (slot_key_mismatches.load() != 0 && a.json) {
    std::fprintf(stderr,
                 "strata bench dram: gather onto slots: %llu keys did not match their slots\n",
                 static_cast<unsigned long long>(slot_key_mismatches.load()));
  }
  return misses_total == 0 && slot_key_mismatches.load() == 0 ? 0 : 1;
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<DramBenchArgs>();
      CLI::App* c = group.add_subcommand("dram",
                                         "DRAM row cache: batched lookup-and-copy vs memcpy "
                                         "and an unordered_map+mutex baseline");
      AddUnsigned<uint64_t>(c, "--rows", args->rows, "rows in the cache", 1, uint64_t{1} << 32);
      AddUnsigned<uint32_t>(c, "--dim", args->dim, "float32 values per row", 1, 65536);
      AddUnsignedList(c, "--threads", args->threads,
                      "thread counts, each measured in turn: 1 or 1,2,...", 1,
                      kDramBenchThreadsMax);
      AddUnsigned<uint32_t>(c, "--batch", args->batch, "keys per lookup", 1, 1 << 20);
      AddUnsigned(c, "--batches", args->batches, "batches per thread (0: read every row twice)");
      AddUnsigned<uint32_t>(c, "--stripes", args->stripes, "index lock stripes", 1, 4096);
      AddUnsigned<uint32_t>(c, "--shards", args->shards,
                            "cache shards, each with its own eviction order (a power of two; 0: "
                            "automatic)",
                            0, kDramShardsMax);
      AddUnsigned<uint32_t>(c, "--writers", args->writers,
                            "threads overwriting rows during the lookups", 0, 1024);
      AddUnsigned<uint32_t>(c, "--rounds", args->rounds, "interleaved rounds of the five methods",
                            1, 1000);
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { ExitCode() = RunDramBench(*args); });
    }};

}  // namespace
}  // namespace strata::cli
