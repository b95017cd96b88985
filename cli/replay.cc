// `strata replay`: replays a trace against a fresh store, with intents a
// given number of batches ahead or none, optionally verifying every row
// (bench/replay_driver.h).
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "bench/replay_driver.h"
#include "cli/cli_util.h"
#include "cli/mpi_commands.h"
#include "storage/ssd/limits.h"
#include "strata/store.h"
#include "strata/trace.h"

namespace strata::cli {
namespace {

struct ReplayArgs {
  bench::ReplayOptions options;
  bool no_intents = false;
  std::string faults;  // the --faults spelling of options.faults
  std::string fallback = "lru";
  std::string ssd_backend = "native";
  std::string ssd_index = "ranges";
  CLI::Option* ssd_index_flag = nullptr;  // given or not
  bool no_gpu = false;
  bool progress = false;
  bool json = false;
  bool cluster = false;
};

// A one-line progress bar on stderr, redrawn in place.
void DrawProgress(const bench::ReplayProgress& p) {
  constexpr int kWidth = 30;
  const double fraction =
      p.batches_total == 0 ? 0 : static_cast<double>(p.batches_done) / p.batches_total;
  const int filled = static_cast<int>(fraction * kWidth);
  std::fprintf(stderr, "\r[%.*s%*s] %5.1f%% %llu/%llu batches %.0f rows/s ", filled,
               "==============================", kWidth - filled, "", 100 * fraction,
               static_cast<unsigned long long>(p.batches_done),
               static_cast<unsigned long long>(p.batches_total),
               p.elapsed_s > 0 ? p.pulls / p.elapsed_s : 0.0);
}

nlohmann::json ReportJson(const ReplayArgs& a, const bench::ReplayReport& r) {
  const bench::ReplayOptions& o = a.options;
  return {{"trace", o.trace},
          {"lookahead", o.intents ? o.lookahead : 0},
          {"intents", o.intents},
          {"workers", o.workers},
          {"device_rows", o.device_rows},
          {"dram_rows", o.dram_rows},
          {"dram_shards", o.dram_shards},
          {"batches", r.batches},
          {"pulls", r.pulls},
          {"stall_pulls", r.stall_pulls},
          {"stall_fraction", r.stall_fraction},
          {"ssd_row_reads", r.ssd_row_reads},
          {"ssd_row_writes", r.ssd_row_writes},
          {"ssd_bytes_written", r.ssd_bytes_written},
          {"ssd_user_bytes_written", r.ssd_user_bytes_written},
          {"ssd_write_amp", r.ssd_write_amp},
          {"ssd_write_log_fraction", o.ssd_write_log_fraction},
          {"ssd_format_version", o.ssd_format_version},
          {"ssd_index", a.ssd_index},
          {"ssd_range_bits", o.ssd_range_bits},
          {"checkpoint_at_end", o.checkpoint_at_end},
          {"rows_per_s", r.rows_per_s},
          {"elapsed_s", r.elapsed_s},
          {"cache_rows", r.cache_rows},
          {"t0_on_gpu", r.stats.t0_on_gpu},
          {"t0_hits", r.t0_hits},
          {"t1_hits", r.t1_hits},
          {"t2_hits", r.t2_hits},
          {"prefetched_rows", r.stats.prefetched_rows},
          {"late_prefetches", r.stats.late_prefetches},
          {"deferred_intents", r.stats.deferred_intents},
          {"intent_bytes_max", r.stats.intent_bytes_max},
          {"intent_pairs_max", r.stats.intent_pairs_max},
          {"compute_us", o.compute_us},
          {"device_share_growth", o.device_share_growth},
          {"act_ahead_max", o.act_ahead_max},
          {"cleaned_ahead", r.stats.cleaned_ahead},
          {"planner_rounds", r.stats.planner_rounds},
          {"planner_round_us_mean", r.stats.planner_round_us_mean},
          {"planner_round_us_max", r.stats.planner_round_us_max},
          {"verify", o.verify},
          {"verified_rows", r.verified_rows},
          {"scanned_rows", r.scanned_rows},
          {"retried_errors", r.retried_errors},
          {"faults", a.faults}};
}

// The options given as words: enums and the fault spelling.
Status ParseWords(ReplayArgs* a) {
  if (a->fallback == "lru") {
    a->options.fallback = FallbackPolicy::kLru;
  } else if (a->fallback == "lfu") {
    a->options.fallback = FallbackPolicy::kLfu;
  } else {
    return Status::InvalidArgument("--fallback '" + a->fallback + "' (lru, lfu)");
  }
  if (a->ssd_backend == "native") {
    a->options.ssd_backend = SsdBackend::kNative;
  } else if (a->ssd_backend == "rocksdb") {
    a->options.ssd_backend = SsdBackend::kRocksDb;
  } else {
    return Status::InvalidArgument("--ssd-backend '" + a->ssd_backend + "' (native, rocksdb)");
  }
  if (a->options.ssd_format_version == 1 && a->ssd_index_flag != nullptr &&
      a->ssd_index_flag->count() > 0) {
    return Status::InvalidArgument("--ssd-index " + a->ssd_index +
                                   " applies to --ssd-format 2 only (format 1 has no DRAM index "
                                   "choice)");
  }
  // Checked by the parser (AddChoice): compact, exact or ranges.
  a->options.ssd_index = a->ssd_index == "exact"    ? SsdIndex::kExact
                         : a->ssd_index == "ranges" ? SsdIndex::kRanges
                                                    : SsdIndex::kCompact;
  a->options.intents = !a->no_intents;
  a->options.use_gpu = !a->no_gpu;
  STRATA_ASSIGN_OR_RETURN(a->options.faults, ParseFaultOptions(a->faults));
  if (a->cluster && a->options.checkpoint_at_end) {
    return Status::InvalidArgument(
        "--checkpoint is not taken with --cluster (a cluster replay reports no SSD write counts)");
  }
  return Status::Ok();
}

void Run(ReplayArgs a) {
  if (Status s = ParseWords(&a); !s.ok()) return ReportFailure("replay", s);
  if (a.cluster) return RunClusterReplayCommand(a.options, a.faults, a.json);
  const bool bar = a.progress || ::isatty(2);
  auto report = bench::RunReplay(a.options, Store::Open,
                                 bar ? bench::ProgressFn(DrawProgress) : bench::ProgressFn());
  if (bar) std::fprintf(stderr, "\n");
  if (!report.ok()) return ReportFailure("replay", report.status());
  const auto& r = *report;
  if (a.json) {
    std::printf("%s\n", ReportJson(a, r).dump(2).c_str());
    return;
  }
  std::printf("replay %s: %llu batches, %llu pulls in %.2f s (%.0f rows/s)\n",
              a.options.trace.c_str(), static_cast<unsigned long long>(r.batches),
              static_cast<unsigned long long>(r.pulls), r.elapsed_s, r.rows_per_s);
  std::printf(
      "intents %s, cache_rows %llu (T0 %llu + T1 %llu)\n",
      a.options.intents ? ("lookahead " + std::to_string(a.options.lookahead)).c_str() : "off",
      static_cast<unsigned long long>(r.cache_rows),
      static_cast<unsigned long long>(a.options.device_rows),
      static_cast<unsigned long long>(a.options.dram_rows));
  std::printf("%-16s %14s\n", "counter", "value");
  auto row = [](const char* name, uint64_t v) {
    std::printf("%-16s %14llu\n", name, static_cast<unsigned long long>(v));
  };
  row("stall_pulls", r.stall_pulls);
  std::printf("%-16s %13.4f%%\n", "stall_fraction", 100 * r.stall_fraction);
  row("ssd_row_reads", r.ssd_row_reads);
  row("ssd_row_writes", r.ssd_row_writes);
  row("ssd_bytes_written", r.ssd_bytes_written);
  std::printf("%-16s %14.2f\n", "ssd_write_amp", r.ssd_write_amp);
  row("t0_hits", r.t0_hits);
  row("t1_hits", r.t1_hits);
  row("t2_hits", r.t2_hits);
  row("retried_errors", r.retried_errors);
  row("prefetched_rows", r.stats.prefetched_rows);
  row("late_prefetches", r.stats.late_prefetches);
  row("deferred_intents", r.stats.deferred_intents);
  row("intent_bytes_max", r.stats.intent_bytes_max);
  row("intent_pairs_max", r.stats.intent_pairs_max);
  row("planner_rounds", r.stats.planner_rounds);
  row("planner_max_us", r.stats.planner_round_us_max);
  if (a.options.verify) {
    std::printf("verify: OK, %llu pulled rows and %llu final rows checked\n",
                static_cast<unsigned long long>(r.verified_rows),
                static_cast<unsigned long long>(r.scanned_rows));
  }
}

CommandRegistrar reg{
    "", [](CLI::App& app) {
      auto args = std::make_shared<ReplayArgs>();
      auto& o = args->options;
      auto* c = app.add_subcommand("replay", "replay a trace against a fresh store");
      c->add_option("trace", o.trace, "trace file")->required();
      c->add_option("--dir", o.dir, "store directory (missing or empty)")->required();
      AddUnsigned<uint64_t>(c, "--device-rows", o.device_rows, "T0 capacity in rows", 1,
                            kTierRowsMax)
          ->required();
      AddUnsigned<uint64_t>(c, "--dram-rows", o.dram_rows, "T1 capacity in rows", 1, kTierRowsMax)
          ->required();
      AddUnsigned<uint64_t>(c, "--lookahead", o.lookahead,
                            "batches intents run ahead of each worker", 0,
                            bench::kReplayLookaheadMax)
          ->capture_default_str();
      c->add_flag("--no-intents", args->no_intents, "signal no intents (plain multi-tier cache)");
      AddUnsigned<uint32_t>(c, "--workers", o.workers, "workers (default: the trace's)", 0,
                            trace::kTraceWorkersMax);
      c->add_flag("--verify", o.verify, "check every pulled row against a model of all pushes");
      c->add_option("--faults", args->faults,
                    "SSD fault injection, e.g. eio=0.01,enospc=0.001,delay_us=200,seed=7");
      AddUnsigned<uint32_t>(c, "--dim", o.dim, "embedding floats per row", 1, kTableDimMax)
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--act-ahead-max", o.act_ahead_max,
                            "the planner prefetches and pins windows at most this many batches "
                            "ahead (0: as far as its timing says)",
                            0, bench::kReplayLookaheadMax)
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--dram-shards", o.dram_shards,
                            "T1 shards, each with its own eviction order (a power of two; 0: one "
                            "per 2^18 rows, at most 16)",
                            0, kDramShardsMax)
          ->capture_default_str();
      AddReal(c, "--device-share-growth", o.device_share_growth,
              "how far one table's T0 may grow past its share (0: static split)",
              {0, kDeviceShareGrowthMax})
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--ssd-format", o.ssd_format_version,
                            "native SSD tier: format of a new tier directory (1: leaf pages, "
                            "2: append-only log)",
                            1, 2)
          ->capture_default_str();
      args->ssd_index_flag =
          AddChoice(c, "--ssd-index", args->ssd_index,
                    "native SSD tier, format 2: DRAM index (compact: 7 bytes per key, a put of a "
                    "stored key reads it once; exact: about 11.7 bytes per key, puts read nothing; "
                    "ranges: key-ordered base segments per key range, merged in the background)",
                    {"compact", "exact", "ranges"})
              ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--ssd-range-bits", o.ssd_range_bits,
                            "native SSD tier, --ssd-index ranges: a new table's key ranges, 2^this",
                            0, storage::kRangeBitsMax)
          ->capture_default_str();
      AddReal(c, "--ssd-write-log-fraction", o.ssd_write_log_fraction,
              "native SSD tier: write log size as a fraction of each table's rows (0: puts "
              "rewrite their leaves)",
              {0, kSsdWriteLogFractionMax})
          ->capture_default_str();
      c->add_flag("--checkpoint", o.checkpoint_at_end,
                  "checkpoint after the last batch, so deferred SSD merges count in "
                  "ssd_bytes_written");
      c->add_option("--fallback", args->fallback, "eviction order without intents: lru or lfu")
          ->capture_default_str();
      c->add_option("--ssd-backend", args->ssd_backend, "native or rocksdb")->capture_default_str();
      AddUnsigned(c, "--batches", o.batches_max, "stop after this many batches (0: all)");
      AddUnsigned<uint64_t>(
          c, "--compute-us", o.compute_us,
          "simulated model compute per batch in microseconds (between pulls and pushes)", 0,
          bench::kReplayComputeUsMax)
          ->capture_default_str();
      c->add_flag("--no-gpu", args->no_gpu, "keep T0 on the host even when a GPU is visible");
      c->add_flag("--progress", args->progress, "draw the progress bar even when stderr is no tty");
      c->add_flag("--json", args->json, "print JSON");
      c->add_option("--export", o.export_path,
                    "write every row at the end to this file (sorted text, to compare runs)");
      c->add_flag("--cluster", args->cluster,
                  "run under mpirun over a strata::Cluster: batch b on rank b % R, --dir is the "
                  "cluster's directory (docs/cluster.md)");
      c->callback([args] { Run(*args); });
    }};

}  // namespace
}  // namespace strata::cli
