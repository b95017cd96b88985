// `strata train`: trains the FM + LR click model of examples/train on a
// Criteo TSV or a CSV file through a Store with the tier sizes given, and
// prints per-epoch metrics and the store's counters, then a summary that sets
// the SSD reads against Belady's MIN (and LRU) for the same key sequence and
// the same memory above the SSD (device + DRAM rows).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_util.h"
#include "cli/command.h"
#include "examples/train/limits.h"
#include "examples/train/trainer.h"
#include "strata/store.h"
#include "strata/trace.h"
#include "trace/cache_sim.h"
#include "trace/importers.h"

#ifdef STRATA_HAVE_MPI
#include "examples/train/cluster_train.h"
#endif

namespace strata::train {
namespace {

struct TrainFlags {
  std::string input;
  std::string format = "criteo";
  std::string label = "label";
  std::vector<std::string> columns;
  std::vector<std::string> dense_columns;
  size_t rows_max = 0;
  std::string dir;
  uint64_t device_rows = 4096;
  uint64_t dram_rows = 16384;
  bool no_gpu = false;
  bool json = false;
  bool cluster = false;
  DenseMerging dense;  // --kstep (0: absent; the dense part averaged every step), --dense-lr
  TrainOptions options;
};

// The yardsticks of the trace simulator for this run's access sequence. The
// store counts every T2 lookup as an SSD read, found or not (a key never seen
// is looked up before it is created), so the comparable floor is the
// simulator's misses with the first touches included.
struct Floors {
  uint64_t cache_rows = 0;  // rows above the SSD: device + DRAM (the hierarchy is exclusive)
  bool ok = false;          // false: a batch has more rows than the cache (no floor)
  trace::OptReport report;
};

Result<Dataset> Load(const TrainFlags& f) {
  if (f.format == "criteo") return ReadCriteoTsv(f.input, f.rows_max);
  if (f.format == "csv") {
    CsvSpec spec;
    spec.label_column = f.label;
    spec.categorical_columns = f.columns;
    spec.dense_columns = f.dense_columns;
    return ReadCsv(f.input, spec, f.rows_max);
  }
  return Status::InvalidArgument("--format must be criteo or csv, not '" + f.format + "'");
}

// A fresh directory under the system temp dir, removed when the run ends.
Result<std::string> TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "strata-train-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + templ);
  return templ;
}

// One row per epoch; with a kept store directory, the seconds of the
// checkpoint that ended the epoch too.
void PrintEpochs(const TrainResult& r, bool checkpoints) {
  std::printf("%5s %9s %8s %9s %8s %9s %9s %9s %9s %10s %7s %7s%s\n", "epoch", "train_ll",
              "train_auc", "val_ll", "val_auc", "rows/s", "t0_hits", "t1_hits", "ssd_reads",
              "stall_frac", "wait", "secs", checkpoints ? "  ckpt_s" : "");
  for (const EpochReport& e : r.epochs) {
    std::printf("%5u %9.4f %8.4f %9.4f %8.4f %9.0f %9llu %9llu %9llu %10.4f %7.3f %7.2f", e.epoch,
                e.train_logloss, e.train_auc, e.validation_logloss, e.validation_auc, e.rows_per_s,
                static_cast<unsigned long long>(e.t0_hits),
                static_cast<unsigned long long>(e.t1_hits),
                static_cast<unsigned long long>(e.ssd_row_reads), e.stall_fraction,
                e.loader_wait_fraction, e.seconds);
    if (checkpoints) std::printf(" %7.2f", e.checkpoint_seconds);
    std::printf("\n");
  }
}

nlohmann::json ToJson(const TrainFlags& f, const Dataset& data, const TrainResult& r,
                      const Floors& floors, double seconds) {
  nlohmann::json j;
  j["rows"] = data.rows();
  j["tables"] = data.categorical_columns();
  j["unique_keys"] = r.unique_keys;
  j["device_rows"] = f.device_rows;
  j["dram_rows"] = f.dram_rows;
  j["t0_on_gpu"] = r.final_stats.t0_on_gpu;
  // A kept store directory, checkpointed after every epoch ("" otherwise).
  j["store_dir"] = f.options.checkpoint_each_epoch ? f.dir : "";
  j["dense_math"] = "host";
  j["seconds"] = seconds;
  for (const EpochReport& e : r.epochs) {
    j["epochs"].push_back({{"epoch", e.epoch},
                           {"train_logloss", e.train_logloss},
                           {"train_auc", e.train_auc},
                           {"validation_logloss", e.validation_logloss},
                           {"validation_auc", e.validation_auc},
                           {"rows", e.rows},
                           {"seconds", e.seconds},
                           {"rows_per_s", e.rows_per_s},
                           {"loader_wait_fraction", e.loader_wait_fraction},
                           {"pulls", e.pulls},
                           {"stall_pulls", e.stall_pulls},
                           {"stall_fraction", e.stall_fraction},
                           {"t0_hits", e.t0_hits},
                           {"t1_hits", e.t1_hits},
                           {"ssd_row_reads", e.ssd_row_reads},
                           {"ssd_row_writes", e.ssd_row_writes},
                           {"prefetched_rows", e.prefetched_rows},
                           {"late_prefetches", e.late_prefetches},
                           {"checkpoint_seconds", e.checkpoint_seconds}});
  }
  const EpochReport& last = r.epochs.back();
  j["validation_auc"] = last.validation_auc;
  j["validation_logloss"] = last.validation_logloss;
  uint64_t rows = 0;
  double secs = 0;
  for (const EpochReport& e : r.epochs) rows += e.rows, secs += e.seconds;
  j["rows_per_s"] = secs > 0 ? static_cast<double>(rows) / secs : 0.0;
  const StoreStats& s = r.final_stats;
  j["t0_hits"] = s.t0.hits;
  j["t1_hits"] = s.t1.hits;
  j["ssd_row_reads"] = s.ssd_row_reads;
  j["ssd_row_writes"] = s.ssd_row_writes;
  j["stall_fraction"] =
      s.pulls == 0 ? 0.0 : static_cast<double>(s.stall_pulls) / static_cast<double>(s.pulls);
  j["cache_rows"] = floors.cache_rows;
  if (floors.ok) {
    j["belady_min_ssd_reads"] = floors.report.opt_misses;
    j["horizon_ssd_reads"] = floors.report.horizon_misses;
    j["lru_ssd_reads"] = floors.report.lru_misses;
    j["first_touches"] = floors.report.unique_rows;  // included in the three above
  }
  return j;
}

void PrintSummary(const nlohmann::json& j) {
  auto u = [&](const char* k) { return static_cast<unsigned long long>(j[k].get<uint64_t>()); };
  std::printf("\nsummary (dense math on the host; T0 %s)\n",
              j["t0_on_gpu"].get<bool>() ? "on the GPU" : "on its host twin");
  std::printf("  validation_auc       %.4f\n", j["validation_auc"].get<double>());
  std::printf("  validation_logloss   %.4f\n", j["validation_logloss"].get<double>());
  std::printf("  rows_per_s           %.0f\n", j["rows_per_s"].get<double>());
  std::printf("  tiers                device %llu rows, dram %llu rows, unique keys %llu\n",
              u("device_rows"), u("dram_rows"), u("unique_keys"));
  std::printf("  hits                 t0 %llu, t1 %llu, ssd %llu\n", u("t0_hits"), u("t1_hits"),
              u("ssd_row_reads"));
  std::printf("  stall_fraction       %.4f\n", j["stall_fraction"].get<double>());
  if (!j["store_dir"].get<std::string>().empty()) {
    std::printf("  store                %s (checkpointed after every epoch; embedding rows only)\n",
                j["store_dir"].get<std::string>().c_str());
  }
  if (j.contains("no_belady_floor")) {
    std::printf("  ssd_row_reads        %llu (no Belady floor: %s)\n", u("ssd_row_reads"),
                j["no_belady_floor"].get<std::string>().c_str());
    return;
  }
  if (!j.contains("belady_min_ssd_reads")) {
    std::printf("  ssd_row_reads        %llu (no Belady floor: a batch exceeds %llu rows)\n",
                u("ssd_row_reads"), u("cache_rows"));
    return;
  }
  std::printf("  ssd_row_reads        %llu\n", u("ssd_row_reads"));
  std::printf("  belady_min_ssd_reads %llu  (same run, %llu rows above the SSD; ",
              u("belady_min_ssd_reads"), u("cache_rows"));
  std::printf("horizon %llu, LRU %llu; all with the %llu first touches)\n", u("horizon_ssd_reads"),
              u("lru_ssd_reads"), u("first_touches"));
  const double min = static_cast<double>(u("belady_min_ssd_reads"));
  if (min > 0) {
    std::printf("  ssd_reads / MIN      %.2f\n", static_cast<double>(u("ssd_row_reads")) / min);
  }
}

Status RunTrain(TrainFlags f) {
  // The trace is written as the run goes and renamed into place at its end:
  // a path it cannot take would fail only then, after the whole run.
  if (!f.options.trace_path.empty()) {
    STRATA_RETURN_IF_ERROR(trace::CheckTraceOutput("--trace-out", f.options.trace_path, f.input));
  }
  STRATA_ASSIGN_OR_RETURN(Dataset data, Load(f));
  // A scratch directory for the store (unless --dir) and the trace (unless --trace-out).
  STRATA_ASSIGN_OR_RETURN(const std::string scratch, TempDir());
  // A store directory of the caller's is kept: checkpoint it every epoch so
  // it holds the trained rows (a temporary one is removed, unsaved).
  f.options.checkpoint_each_epoch = !f.dir.empty();
  if (f.dir.empty()) f.dir = scratch + "/store";
  if (f.options.trace_path.empty()) f.options.trace_path = scratch + "/run.trace";
  StoreOptions so;
  so.dir = f.dir;
  so.device_rows_max = f.device_rows;
  so.dram_rows_max = f.dram_rows;
  so.use_gpu = !f.no_gpu;
  const auto start = std::chrono::steady_clock::now();
  Result<TrainResult> result = [&]() -> Result<TrainResult> {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                            Store::Open(so, MakeTables(data, f.options.model)));
    Result<TrainResult> r = Train(store.get(), data, f.options);
    Status closed = store->Close();
    if (r.ok() && !closed.ok()) return closed;
    return r;
  }();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Floors floors;
  floors.cache_rows = f.device_rows + f.dram_rows;
  if (result.ok()) {
    auto indexed = trace::LoadIndexedTrace(f.options.trace_path);
    if (!indexed.ok()) result = indexed.status();
    if (indexed.ok()) {
      auto report = trace::RunOpt(*indexed, floors.cache_rows, f.options.loader.lookahead_batches,
                                  trace::FallbackOrder::kLru);
      floors.ok = report.ok();
      if (report.ok()) floors.report = *report;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  STRATA_RETURN_IF_ERROR(result.status());
  nlohmann::json j = ToJson(f, data, *result, floors, seconds);
  if (f.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintEpochs(*result, f.options.checkpoint_each_epoch);
    PrintSummary(j);
  }
  return Status::Ok();
}

#ifdef STRATA_HAVE_MPI
// The dense part's all-reduces, as counted on each rank: per rank, and
// merged (steps and all-reduces are collective, the same on every rank;
// bytes summed over the ranks; seconds the slowest rank's).
void AddDenseComm(const DenseMerging& dense, const std::vector<DenseCommStats>& ranks,
                  nlohmann::json* j) {
  nlohmann::json& o = *j;
  o["kstep"] = dense.kstep;  // 0: --kstep absent
  o["dense_optimizer"] = dense.kstep == 0 ? "adagrad, averaged every step"
                                          : "adam (beta1 0, beta2 0.999), k-step merging";
  if (dense.kstep > 0) o["dense_learning_rate"] = dense.learning_rate;
  uint64_t bytes = 0, us_max = 0;
  o["dense_per_rank"] = nlohmann::json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const DenseCommStats& d = ranks[r];
    bytes += d.allreduce_bytes;
    us_max = std::max(us_max, d.allreduce_us);
    o["dense_per_rank"].push_back(
        {{"rank", r},
         {"steps", d.steps},
         {"allreduces", d.allreduces},
         {"allreduce_bytes", d.allreduce_bytes},
         {"allreduce_seconds", static_cast<double>(d.allreduce_us) / 1e6}});
  }
  o["dense_steps"] = ranks.empty() ? 0 : ranks[0].steps;
  o["dense_allreduces"] = ranks.empty() ? 0 : ranks[0].allreduces;
  o["dense_allreduce_bytes"] = bytes;
  o["dense_allreduce_seconds"] = static_cast<double>(us_max) / 1e6;
}

void PrintDenseComm(const nlohmann::json& j) {
  auto u = [&](const char* k) { return static_cast<unsigned long long>(j[k].get<uint64_t>()); };
  std::printf("  dense part           %s", j["dense_optimizer"].get<std::string>().c_str());
  if (u("kstep") > 0) std::printf(" every %llu steps", u("kstep"));
  std::printf("\n  dense_allreduces     %llu over %llu steps, %llu bytes (all ranks), %.3f s\n",
              u("dense_allreduces"), u("dense_steps"), u("dense_allreduce_bytes"),
              j["dense_allreduce_seconds"].get<double>());
  for (const nlohmann::json& r : j["dense_per_rank"]) {
    std::printf("    rank %llu             %llu all-reduces, %llu bytes, %.3f s\n",
                static_cast<unsigned long long>(r["rank"].get<uint64_t>()),
                static_cast<unsigned long long>(r["allreduces"].get<uint64_t>()),
                static_cast<unsigned long long>(r["allreduce_bytes"].get<uint64_t>()),
                r["allreduce_seconds"].get<double>());
  }
}

// `--cluster` under mpirun: rank r trains on rows r % R over a strata::Cluster
// (cluster_train.h); rank 0 prints the metrics of all ranks' scores.
Status RunClusterTrain(TrainFlags f) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return Status::Unavailable("MPI_Init failed");
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Status s = [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(Dataset data, Load(f));
    // One directory for the cluster: the caller's (kept, checkpointed every
    // epoch) or rank 0's temporary one, named to every rank.
    std::string scratch;
    f.options.checkpoint_each_epoch = !f.dir.empty();
    if (f.dir.empty()) {
      if (rank == 0) {
        Result<std::string> made = TempDir();
        if (made.ok()) scratch = *made;
      }
      uint64_t size = scratch.size();
      MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
      scratch.resize(size);
      MPI_Bcast(scratch.data(), static_cast<int>(size), MPI_CHAR, 0, MPI_COMM_WORLD);
      if (scratch.empty()) return Status::IOError("train --cluster: no temporary directory");
      f.dir = scratch + "/cluster";
    }
    f.options.trace_path.clear();  // the Belady floor is a one-process yardstick
    ClusterOptions co;
    co.store.dir = f.dir;
    co.store.device_rows_max = f.device_rows;
    co.store.dram_rows_max = f.dram_rows;
    const auto start = std::chrono::steady_clock::now();
    Result<ClusterTrainResult> result =
        TrainOnCluster(data, co, f.options, f.dense, MPI_COMM_WORLD);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && !scratch.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(scratch, ignored);
    }
    STRATA_RETURN_IF_ERROR(result.status());
    if (rank != 0) return Status::Ok();
    Floors floors;
    floors.cache_rows = f.device_rows + f.dram_rows;
    nlohmann::json j = ToJson(f, data, result->train, floors, seconds);
    j["ranks"] = ranks;
    j["rows_per_rank"] = data.rows() / static_cast<size_t>(ranks);
    j["no_belady_floor"] = "not computed under --cluster (a one-process yardstick)";
    AddDenseComm(f.dense, result->dense, &j);
    if (f.json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("data-parallel over %d ranks (rows r %% %d on rank r); counters of rank 0\n",
                  ranks, ranks);
      PrintEpochs(result->train, f.options.checkpoint_each_epoch);
      PrintSummary(j);
      PrintDenseComm(j);
    }
    return Status::Ok();
  }();
  std::fflush(stdout);
  MPI_Finalize();
  return s;
}
#else
Status RunClusterTrain(const TrainFlags&) {
  return Status::InvalidArgument(
      "--cluster: this strata was built without MPI (STRATA_MPI=OFF or Open MPI not found)");
}
#endif

void AddTrainCommand(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  TrainFlags& f = *flags;
  CLI::App* c = app.add_subcommand(
      "train", "train a click model (FM + LR) on Criteo TSV or CSV data through the store");
  c->add_option("input", f.input, "Criteo TSV (label, I1..I13, C1..C26) or CSV file")->required();
  c->add_option("--format", f.format, "criteo or csv")->capture_default_str();
  c->add_option("--label", f.label, "csv: the 0/1 label column")->capture_default_str();
  c->add_option("--columns", f.columns, "csv: categorical columns, one table each")->delimiter(',');
  c->add_option("--dense-columns", f.dense_columns, "csv: numeric columns")->delimiter(',');
  cli::AddUnsigned<size_t>(c, "--rows-max", f.rows_max, "read at most this many rows (0: all)", 0,
                           kRowsMax);
  c->add_option("--dir", f.dir,
                "store directory, kept, checkpointed after every epoch (default: a temporary "
                "one, removed after)");
  c->add_option("--trace-out", f.options.trace_path,
                "also keep the run's access trace there (for strata trace opt / replay)");
  cli::AddUnsigned<uint64_t>(c, "--device-rows", f.device_rows, "T0 capacity in rows", 1,
                             kTierRowsMax)
      ->capture_default_str();
  cli::AddUnsigned<uint64_t>(c, "--dram-rows", f.dram_rows, "T1 capacity in rows", 1, kTierRowsMax)
      ->capture_default_str();
  c->add_flag("--no-gpu", f.no_gpu, "keep T0 on the host even when a GPU is visible");
  cli::AddUnsigned<uint32_t>(c, "--epochs", f.options.loader.epochs, "passes over the data", 1,
                             kEpochsMax)
      ->capture_default_str();
  cli::AddUnsigned<uint32_t>(c, "--batch-size", f.options.loader.batch_rows, "rows per mini-batch",
                             1, kBatchRowsMax)
      ->capture_default_str();
  cli::AddUnsigned<uint32_t>(c, "--lookahead", f.options.loader.lookahead_batches,
                             "batches the loader builds and signals ahead", 1, kLookaheadBatchesMax)
      ->capture_default_str();
  c->add_flag(
      "--no-intents", [&f](int64_t) { f.options.loader.intents = false; },
      "signal no intents (the store runs as a multi-tier LRU cache)");
  cli::AddReal(c, "--validation-fraction", f.options.loader.validation_fraction,
               "last rows (file order) held out", {.min = 0, .max = 1, .max_open = true})
      ->capture_default_str();
  cli::AddUnsigned(c, "--seed", f.options.loader.seed, "shuffle and dense initialisation")
      ->capture_default_str();
  cli::AddUnsigned<uint32_t>(c, "--dim", f.options.model.dim,
                             "FM factor dimension (rows hold dim + 1 floats)", 1, kEmbeddingDimMax)
      ->capture_default_str();
  cli::AddReal(c, "--lr", f.options.model.learning_rate, "AdaGrad learning rate",
               {.min = 0, .max = kLearningRateMax, .min_open = true})
      ->capture_default_str();
  cli::AddReal(c, "--l2", f.options.model.l2, "L2 penalty", {.min = 0, .max = kL2Max})
      ->capture_default_str();
  c->add_flag("--json", f.json, "print JSON instead of tables");
  CLI::Option* cluster =
      c->add_flag("--cluster", f.cluster,
                  "under mpirun: data-parallel over a strata::Cluster (rows r % R on rank r, dense "
                  "parameters averaged every step unless --kstep; docs/cluster.md)");
  CLI::Option* kstep =
      cli::AddUnsigned<uint32_t>(c, "--kstep", f.dense.kstep,
                                 "with --cluster: train the dense part with k-step Adam "
                                 "(strata::DenseSync), merging the ranks' copies every K steps",
                                 1, kKStepMax);
  kstep->needs(cluster);
  cli::AddReal(c, "--dense-lr", f.dense.learning_rate, "with --kstep: Adam's learning rate",
               {.min = 0, .max = kLearningRateMax, .min_open = true})
      ->capture_default_str()
      ->needs(kstep);
  c->callback([flags] {
    TrainFlags& f = *flags;
    f.options.model.seed = f.options.loader.seed;
    Status s = f.cluster ? RunClusterTrain(f) : RunTrain(f);
    if (!s.ok()) {
      std::fprintf(stderr, "strata train: %s\n", s.ToString().c_str());
      cli::ExitCode() = 1;
    }
  });
}

const cli::CommandRegistrar kRegisterTrain{"", AddTrainCommand};

}  // namespace
}  // namespace strata::train
