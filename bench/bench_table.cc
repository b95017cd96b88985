// `strata bench table`: throughput of the T0 DeviceTable's batched calls.
//
//   strata bench table --capacity 4194304 --dim 8,32,64 --load-factor 0.5,1.0
//                      --batch 1048576 --op find,insert_or_assign,push
//                      [--dist uniform|zipf] [--runner host|gpu]
//                      [--optimizer adagrad] [--iters 10] [--json]
//
// For every (op, dim, load factor) the table is created with --capacity rows
// (slots = capacity / 0.85) and filled (not timed) to load_factor * slots
// rows, as HierarchicalKV's benchmark counts load factor. Each timed
// call takes --batch keys drawn from the resident keys (uniform, or zipf with
// exponent 1.1 over them), so the table stays at its load factor:
//   find            gathers embeddings of the keys
//   insert_or_assign writes whole rows for the keys
//   find_or_insert  finds the keys (creating none: all resident)
//   push            one optimizer step with random gradients (zipf batches
//                   hold duplicates, which Push sums first)
// Only the call is timed (synchronous form: it includes the GPU sync).
// Reports keys per second and the payload rate (key in, row or embedding in
// or out) in GB/s (10^9 bytes); on the GPU also the device-to-device copy
// bandwidth and the payload rate as a fraction of it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/command.h"
#include "kernels/device_table.h"
#include "kernels/gpu_runtime.h"
#include "kernels/limits.h"

namespace strata::cli {
namespace {

using kernels::DeviceTable;
using kernels::Runner;
using kernels::RunnerBuffer;

struct TableBenchArgs {
  uint64_t capacity = 1 << 22;
  std::string dims = "8,32,64";
  std::string load_factors = "0.5,1.0";
  uint64_t batch = 1 << 20;
  std::string ops = "find,insert_or_assign,push";
  std::string dist = "uniform";
  std::string runner = "auto";
  std::string optimizer = "adagrad";
  uint32_t iters = 10;
  bool json = false;
};

struct BenchResult {
  std::string op;
  uint32_t dim = 0;
  double load_factor = 0;
  double slot_load_factor = 0;
  double seconds = 0;
  double keys_per_s = 0;
  double payload_gb_per_s = 0;
};

Key KeyOfRank(uint64_t rank) { return rank * 0x9e3779b97f4a7c15ULL + 12345; }

// Ranks in [0, n): uniform, or zipf(1.1) by inverting a precomputed CDF.
std::vector<uint64_t> DrawRanks(const std::string& dist, uint64_t n, uint64_t count,
                                std::mt19937_64& rng) {
  std::vector<uint64_t> ranks(count);
  if (dist == "uniform") {
    for (auto& r : ranks) r = rng() % n;
    return ranks;
  }
  std::vector<double> cdf(n);
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) cdf[i] = sum += 1.0 / std::pow(static_cast<double>(i + 1), 1.1);
  std::uniform_real_distribution<double> u(0.0, sum);
  for (auto& r : ranks) {
    r = std::min<uint64_t>(n - 1, std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
  }
  return ranks;
}

Result<Optimizer> ParseOptimizer(const std::string& name) {
  for (auto k : {Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kRowwiseAdagrad, Optimizer::kAdam,
                 Optimizer::kFtrl}) {
    if (name == kernels::OptimizerName(k)) return k;
  }
  return Status::InvalidArgument("--optimizer: unknown '" + name +
                                 "' (sgd, adagrad, rowwise_adagrad, adam, ftrl)");
}

Result<BenchResult> RunOne(const TableBenchArgs& a, Runner runner, Optimizer opt,
                           const std::string& op, uint32_t dim, double load_factor) {
  kernels::DeviceTableOptions o;
  o.capacity_rows = a.capacity;
  o.dim = dim;
  o.optimizer.kind = opt;
  o.batch_keys_max = std::max<uint64_t>(a.batch, 1 << 16);
  STRATA_ASSIGN_OR_RETURN(auto table, DeviceTable::Create(o, runner));
  const uint32_t rf = table->row_floats();
  const uint64_t fill = static_cast<uint64_t>(load_factor * static_cast<double>(table->slots()));
  if (fill == 0) return Status::InvalidArgument("--load-factor: fills no rows");
  // Runner buffers for one batch.
  RunnerBuffer<Key> keys;
  RunnerBuffer<float> floats;
  RunnerBuffer<uint8_t> flags;
  RunnerBuffer<int64_t> next_use;
  STRATA_RETURN_IF_ERROR(keys.Allocate(runner, o.batch_keys_max));
  STRATA_RETURN_IF_ERROR(floats.Allocate(runner, o.batch_keys_max * rf));
  STRATA_RETURN_IF_ERROR(flags.Allocate(runner, o.batch_keys_max));
  STRATA_RETURN_IF_ERROR(next_use.Allocate(runner, o.batch_keys_max));
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerMemset(runner, floats.data(), 0, floats.bytes()));  // zero rows / grads
  STRATA_RETURN_IF_ERROR(kernels::RunnerMemset(runner, flags.data(), 0, flags.bytes()));
  STRATA_RETURN_IF_ERROR(kernels::RunnerMemset(runner, next_use.data(), 0, next_use.bytes()));
  // Fill (not timed).
  std::vector<Key> host_keys(o.batch_keys_max);
  for (uint64_t begin = 0; begin < fill; begin += o.batch_keys_max) {
    const uint64_t n = std::min(o.batch_keys_max, fill - begin);
    for (uint64_t i = 0; i < n; ++i) host_keys[i] = KeyOfRank(begin + i);
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner, keys.data(), host_keys.data(), n * 8));
    STRATA_RETURN_IF_ERROR(
        table->FindOrInsert(keys.data(), n, nullptr, flags.data(), /*next_use=*/0));
  }
  // Batches of resident keys; a few distinct ones, cycled.
  std::mt19937_64 rng(7);
  constexpr int kBatches = 3;
  std::vector<std::vector<Key>> batches(kBatches);
  for (auto& b : batches) {
    for (uint64_t r : DrawRanks(a.dist, fill, a.batch, rng)) b.push_back(KeyOfRank(r));
  }
  if (op == "push") {  // small random gradients
    std::vector<float> grads(a.batch * dim);
    std::uniform_real_distribution<float> u(-1e-3f, 1e-3f);
    for (float& g : grads) g = u(rng);
    STRATA_RETURN_IF_ERROR(
        kernels::RunnerCopyIn(runner, floats.data(), grads.data(), grads.size() * 4));
  }
  auto call = [&]() -> Status {
    const uint64_t n = a.batch;
    if (op == "find") return table->Find(keys.data(), n, floats.data(), flags.data());
    if (op == "insert_or_assign") {
      return table->InsertOrAssign(keys.data(), n, floats.data(), next_use.data(), flags.data());
    }
    if (op == "find_or_insert") {
      return table->FindOrInsert(keys.data(), n, floats.data(), flags.data(), 0);
    }
    return table->Push(keys.data(), n, floats.data());
  };
  double seconds = 0;
  for (uint32_t it = 0; it <= a.iters; ++it) {  // iteration 0 warms up
    const auto& b = batches[it % kBatches];
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner, keys.data(), b.data(), b.size() * 8));
    STRATA_RETURN_IF_ERROR(kernels::RunnerSync(runner, nullptr));
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(call());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (it > 0) seconds += s;
  }
  BenchResult r;
  r.op = op;
  r.dim = dim;
  r.load_factor = load_factor;
  r.slot_load_factor = table->LoadFactor();
  r.seconds = seconds;
  const double keys_total = static_cast<double>(a.batch) * a.iters;
  r.keys_per_s = keys_total / seconds;
  const double floats_per_key = op == "insert_or_assign" ? rf : op == "push" ? 2.0 * dim : dim;
  r.payload_gb_per_s = r.keys_per_s * (8.0 + 4.0 * floats_per_key) / 1e9;
  return r;
}

// Device-to-device copy bandwidth (bytes read + written per second), the
// memory-bandwidth yardstick for the payload rates; 0 on the host runner.
Result<double> MeasureCopyGbPerS(Runner runner) {
  if (runner != Runner::kGpu) return 0.0;
  constexpr size_t kBytes = size_t{1} << 30;
  RunnerBuffer<uint8_t> src, dst;
  STRATA_RETURN_IF_ERROR(src.Allocate(runner, kBytes));
  STRATA_RETURN_IF_ERROR(dst.Allocate(runner, kBytes));
  STRATA_RETURN_IF_ERROR(kernels::RunnerMemset(runner, src.data(), 1, kBytes));
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopy(runner, dst.data(), src.data(), kBytes));
  STRATA_RETURN_IF_ERROR(kernels::RunnerSync(runner, nullptr));
  constexpr int kReps = 10;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) {
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopy(runner, dst.data(), src.data(), kBytes));
  }
  STRATA_RETURN_IF_ERROR(kernels::RunnerSync(runner, nullptr));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * kBytes * kReps / s / 1e9;
}

void RunTableBench(const TableBenchArgs& a) {
  Runner runner = kernels::DefaultRunner(a.runner != "host");
  if (a.runner == "gpu" && runner != Runner::kGpu) {
    return ReportFailure("bench table", Status::FailedPrecondition("--runner gpu: no GPU visible" +
                                                                   kernels::CudaBuildInfo()));
  }
  if (a.runner != "gpu" && a.runner != "host" && a.runner != "auto") {
    return ReportFailure("bench table", Status::InvalidArgument("--runner: gpu, host or auto"));
  }
  if (a.dist != "uniform" && a.dist != "zipf") {
    return ReportFailure("bench table", Status::InvalidArgument("--dist: uniform or zipf"));
  }
  auto dims = ParseUints(a.dims, "--dim", 1, kTableDimMax);
  auto lfs = ParseDoubles(a.load_factors, "--load-factor");
  auto ops = SplitList(a.ops, "--op");
  auto opt = ParseOptimizer(a.optimizer);
  for (const Status& s : {dims.status(), lfs.status(), ops.status(), opt.status()}) {
    if (!s.ok()) return ReportFailure("bench table", s);
  }
  for (const auto& op : *ops) {
    if (op != "find" && op != "insert_or_assign" && op != "find_or_insert" && op != "push") {
      return ReportFailure(
          "bench table", Status::InvalidArgument("--op: find, insert_or_assign, find_or_insert or "
                                                 "push, not '" +
                                                 op + "'"));
    }
  }
  for (double lf : *lfs) {
    if (!(lf > 0 && lf <= 1.0)) {
      return ReportFailure("bench table", Status::InvalidArgument("--load-factor: in (0, 1]"));
    }
  }
  auto copy = MeasureCopyGbPerS(runner);
  if (!copy.ok()) return ReportFailure("bench table", copy.status());
  const double copy_gb_per_s = *copy;
  nlohmann::json results = nlohmann::json::array();
  if (!a.json) {
    if (copy_gb_per_s > 0)
      std::printf("device copy bandwidth %.0f GB/s (read + write)\n", copy_gb_per_s);
    std::printf("runner %s, capacity %llu rows, batch %llu keys, dist %s, optimizer %s, %u iters\n",
                kernels::RunnerName(runner), static_cast<unsigned long long>(a.capacity),
                static_cast<unsigned long long>(a.batch), a.dist.c_str(), a.optimizer.c_str(),
                a.iters);
    std::printf("%-17s %5s %6s %9s %14s %10s %12s\n", "op", "dim", "load", "slot_load",
                "keys_per_s", "Gkeys/s", "payload_GB/s");
  }
  for (const auto& op : *ops) {
    for (uint64_t dim : *dims) {
      for (double lf : *lfs) {
        auto r = RunOne(a, runner, *opt, op, static_cast<uint32_t>(dim), lf);
        if (!r.ok()) return ReportFailure("bench table", r.status());
        if (a.json) {
          results.push_back(
              {{"op", r->op},
               {"dim", r->dim},
               {"load_factor", r->load_factor},
               {"slot_load_factor", r->slot_load_factor},
               {"keys_per_s", r->keys_per_s},
               {"seconds", r->seconds},
               {"payload_gb_per_s", r->payload_gb_per_s},
               {"copy_fraction", copy_gb_per_s > 0 ? r->payload_gb_per_s / copy_gb_per_s : 0.0}});
        } else {
          std::printf("%-17s %5u %6.2f %9.3f %14.0f %10.4f %12.2f\n", r->op.c_str(), r->dim,
                      r->load_factor, r->slot_load_factor, r->keys_per_s, r->keys_per_s / 1e9,
                      r->payload_gb_per_s);
        }
      }
    }
  }
  if (a.json) {
    nlohmann::json out = {{"bench", "table"},       {"runner", kernels::RunnerName(runner)},
                          {"capacity", a.capacity}, {"batch", a.batch},
                          {"dist", a.dist},         {"optimizer", a.optimizer},
                          {"iters", a.iters},       {"copy_gb_per_s", copy_gb_per_s},
                          {"results", results}};
    std::printf("%s\n", out.dump(2).c_str());
  }
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<TableBenchArgs>();
      auto* c =
          group.add_subcommand("table", "T0 device table: find / insert / push keys per second");
      AddUnsigned<uint64_t>(c, "--capacity", args->capacity, "rows the table is created for", 1,
                            kernels::kCapacityRowsMax);
      c->add_option("--dim", args->dims, "embedding dims, comma separated");
      c->add_option("--load-factor", args->load_factors,
                    "fill as a fraction of the slots, comma separated, in (0, 1]");
      AddUnsigned<uint64_t>(c, "--batch", args->batch, "keys per call", 1, kernels::kBatchKeysMax);
      c->add_option("--op", args->ops, "find, insert_or_assign, find_or_insert, push (comma list)");
      c->add_option("--dist", args->dist, "key distribution: uniform or zipf (exponent 1.1)");
      c->add_option("--runner", args->runner, "gpu, host or auto (gpu when visible)");
      c->add_option("--optimizer", args->optimizer, "sgd, adagrad, rowwise_adagrad, adam, ftrl");
      AddUnsigned<uint32_t>(c, "--iters", args->iters, "timed calls per configuration", 1, 1 << 20);
      c->add_flag("--json", args->json, "print JSON instead of a table");
      c->callback([args] { RunTableBench(*args); });
    }};

}  // namespace
}  // namespace strata::cli
