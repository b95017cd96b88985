// Google Benchmark of the Store's foreground calls: Intent (per key, 4096
// keys per call), AdvanceClock, and a Pull/Push round trip on resident rows
// and on rows that miss T0 (no intents: synchronous fetch from T1), at dim 16
// and 4096 keys per call; and, at the scale of a GPU batch (1,048,576 keys,
// dim 64: BM_PullResident1M, BM_RoundTripResident1M), a resident Pull alone
// and a Pull + Push, to set beside `strata bench table`'s find and push of
// the same shape (scripts/gpu_check.sh). Those two take about 1.5 GB.
//
//   build/bin/strata_engine_bench [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "kernels/runner.h"
#include "strata/store.h"

namespace strata {
namespace {

constexpr size_t kBatch = 4096;
constexpr uint32_t kDim = 16;

struct Fixture {
  std::string dir;
  std::unique_ptr<Store> store;
  WorkerId worker = 0;

  Fixture(uint64_t device_rows, uint64_t dram_rows, uint32_t dim = kDim) {
    static int counter = 0;
    dir = (std::filesystem::temp_directory_path() /
           ("strata_engine_bench_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
              .string();
    std::filesystem::remove_all(dir);
    StoreOptions o;
    o.dir = dir;
    o.device_rows_max = device_rows;
    o.dram_rows_max = dram_rows;
    TableOptions t;
    t.name = "bench";
    t.dim = dim;
    t.optimizer.kind = Optimizer::kAdagrad;
    auto r = Store::Open(o, {t});
    if (!r.ok()) {
      fprintf(stderr, "%s\n", r.status().ToString().c_str());
      std::abort();
    }
    store = std::move(r).value();
    worker = *store->RegisterWorker();
  }
  ~Fixture() {
    (void)store->Close();
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

std::vector<Key> RandomKeys(size_t n, uint64_t range, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (auto& k : keys) k = rng() % range;
  return keys;
}

void BM_Intent(benchmark::State& state) {
  Fixture f(1 << 16, 1 << 18);
  auto keys = RandomKeys(kBatch, 1 << 20, 1);
  Clock clock = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    // Windows far ahead: taken in by the planner, not acted on.
    Status s = f.store->Intent(f.worker, 0, keys, clock + 1000, clock + 1001);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    if (++calls % 64 == 0) {
      // Let the windows expire so the index stays small.
      state.PauseTiming();
      (void)f.store->DrainIntents();
      for (int c = 0; c < 1001; ++c) (void)f.store->AdvanceClock(f.worker);
      clock += 1001;
      (void)f.store->DrainIntents();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["ns_per_key"] =
      benchmark::Counter(double(state.iterations() * kBatch),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Intent)->Unit(benchmark::kMicrosecond);

void BM_AdvanceClock(benchmark::State& state) {
  Fixture f(1 << 10, 1 << 10);
  for (auto _ : state) {
    Status s = f.store->AdvanceClock(f.worker);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_AdvanceClock);

// Pull (and Push unless pull_only) of `batch` random keys in [0, key_range)
// at dimension `dim`, T0 sized for device_rows.
void PullPush(benchmark::State& state, uint64_t device_rows, uint64_t key_range,
              size_t batch = kBatch, uint32_t dim = kDim, bool pull_only = false) {
  Fixture f(device_rows, std::max<uint64_t>(1 << 20, key_range), dim);
  // out and grads live where T0 lives: device memory when it is a GPU.
  const kernels::Runner runner =
      f.store->Stats().t0_on_gpu ? kernels::Runner::kGpu : kernels::Runner::kHost;
  std::vector<float> host_grads(batch * dim, 0.01f);
  kernels::RunnerBuffer<float> out_buf, grads_buf;
  if (!out_buf.Allocate(runner, batch * dim).ok() ||
      !grads_buf.Allocate(runner, batch * dim).ok() ||
      !kernels::RunnerCopyIn(runner, grads_buf.data(), host_grads.data(),
                             host_grads.size() * sizeof(float))
           .ok()) {
    state.SkipWithError("buffer allocation failed");
    return;
  }
  float* out = out_buf.data();
  const float* grads = grads_buf.data();
  const int batch_count = batch > kBatch ? 4 : 16;
  std::vector<std::vector<Key>> batches;
  batches.reserve(batch_count);
  for (int i = 0; i < batch_count; ++i) batches.push_back(RandomKeys(batch, key_range, 100 + i));
  for (const auto& b : batches) (void)f.store->Pull(f.worker, 0, b, out);  // warm
  size_t i = 0;
  for (auto _ : state) {
    const auto& keys = batches[i++ % batches.size()];
    Status s = f.store->Pull(f.worker, 0, keys, out);
    if (s.ok() && !pull_only) s = f.store->Push(f.worker, 0, keys, grads);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["ns_per_key"] =
      benchmark::Counter(double(state.iterations() * batch),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  StoreStats s = f.store->Stats();
  state.counters["t0_on_gpu"] = s.t0_on_gpu ? 1 : 0;
  state.counters["t0_hit_rate"] =
      s.t0.hits + s.t0.misses ? double(s.t0.hits) / double(s.t0.hits + s.t0.misses) : 0.0;
}

// Every row resident in T0.
void BM_PullPushResident(benchmark::State& state) { PullPush(state, 1 << 17, 1 << 16); }
BENCHMARK(BM_PullPushResident)->Unit(benchmark::kMicrosecond);

// T0 holds a quarter of the keys; misses come from T1 synchronously.
void BM_PullPushMissing(benchmark::State& state) { PullPush(state, 1 << 14, 1 << 16); }
BENCHMARK(BM_PullPushMissing)->Unit(benchmark::kMicrosecond);

// A GPU-sized batch: 1,048,576 keys drawn from 2^20, dim 64, all resident.
constexpr size_t kWideBatch = size_t{1} << 20;
constexpr uint32_t kWideDim = 64;
void BM_PullResident1M(benchmark::State& state) {
  PullPush(state, 1 << 21, 1 << 20, kWideBatch, kWideDim, /*pull_only=*/true);
}
BENCHMARK(BM_PullResident1M)->Unit(benchmark::kMillisecond);
void BM_RoundTripResident1M(benchmark::State& state) {
  PullPush(state, 1 << 21, 1 << 20, kWideBatch, kWideDim);
}
BENCHMARK(BM_RoundTripResident1M)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
