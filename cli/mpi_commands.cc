// `strata replay --cluster`, `strata cluster export` and `strata bench
// cluster` (mpi_commands.h).
#include "cli/mpi_commands.h"

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

#ifdef STRATA_HAVE_MPI
#include <mpi.h>

#include "bench/cluster_bench.h"
#include "bench/cluster_replay.h"
#include "cluster/manifest.h"
#endif

namespace strata::cli {

#ifdef STRATA_HAVE_MPI
namespace {

nlohmann::json RankJson(const bench::ClusterReplayRank& r, uint64_t batches_total) {
  const double per_batch = batches_total == 0 ? 0.0 : 1.0 / static_cast<double>(batches_total);
  return {{"batches", r.batches},
          {"pulls", r.pulls},
          {"shard_pulls", r.shard_pulls},
          {"stall_pulls", r.stall_pulls},
          {"stall_fraction",
           r.shard_pulls == 0 ? 0.0 : static_cast<double>(r.stall_pulls) / r.shard_pulls},
          {"rows_exchanged", r.keys_sent},
          {"keys_served", r.keys_served},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"bytes_sent_per_batch", static_cast<double>(r.bytes_sent) * per_batch},
          {"intents_sent", r.intents_sent},
          {"exchange_us", r.exchange_us},
          {"ssd_row_reads", r.ssd_row_reads},
          {"ssd_row_writes", r.ssd_row_writes},
          {"t0_hits", r.t0_hits},
          {"t1_hits", r.t1_hits},
          {"verified_rows", r.verified_rows},
          {"scanned_rows", r.scanned_rows},
          {"retried_errors", r.retried_errors},
          {"elapsed_s", static_cast<double>(r.elapsed_us) / 1e6},
          {"rows_per_s", r.elapsed_us == 0 ? 0.0
                                           : static_cast<double>(r.pulls) * 1e6 /
                                                 static_cast<double>(r.elapsed_us)}};
}

void Print(const bench::ReplayOptions& o, const std::string& faults, bool json,
           const bench::ClusterReplayReport& r) {
  const uint64_t n = r.batches_total;
  nlohmann::json merged = RankJson(r.summed, n);
  merged["ranks"] = r.world_size;
  merged["steps"] = r.steps;
  merged["batches_total"] = n;
  merged["workers"] = o.workers;
  merged["trace"] = o.trace;
  merged["lookahead"] = o.intents ? o.lookahead : 0;
  merged["verify"] = o.verify;
  merged["faults"] = faults;
  if (json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& rank : r.ranks) ranks.push_back(RankJson(rank, n));
    std::printf("%s\n", nlohmann::json{{"cluster", merged}, {"ranks", ranks}}.dump(2).c_str());
    return;
  }
  std::printf("replay --cluster %s: %d ranks, %llu batches in %llu steps, %.2f s\n",
              o.trace.c_str(), r.world_size, static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(r.steps), merged["elapsed_s"].get<double>());
  std::printf("%-8s %10s %12s %10s %14s %14s %12s\n", "rank", "batches", "pulls", "stall_%",
              "rows_exchanged", "bytes/batch", "verified");
  auto line = [&](const std::string& name, const nlohmann::json& j) {
    std::printf("%-8s %10llu %12llu %9.4f%% %14llu %14.0f %12llu\n", name.c_str(),
                static_cast<unsigned long long>(j["batches"].get<uint64_t>()),
                static_cast<unsigned long long>(j["pulls"].get<uint64_t>()),
                100 * j["stall_fraction"].get<double>(),
                static_cast<unsigned long long>(j["rows_exchanged"].get<uint64_t>()),
                j["bytes_sent_per_batch"].get<double>(),
                static_cast<unsigned long long>(j["verified_rows"].get<uint64_t>()));
  };
  for (size_t q = 0; q < r.ranks.size(); ++q) line(std::to_string(q), RankJson(r.ranks[q], n));
  line("all", merged);
  if (o.verify) {
    std::printf("verify: OK, %llu pulled rows and %llu final rows checked\n",
                static_cast<unsigned long long>(r.summed.verified_rows),
                static_cast<unsigned long long>(r.summed.scanned_rows));
  }
}

// Initializes MPI (false, reported, when it cannot be).
bool InitMpi(const char* command) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    ReportFailure(command, Status::Unavailable("MPI_Init failed"));
    return false;
  }
  return true;
}

// Rank 0 reads DIR/CLUSTER and hands its bytes to every rank: the tables and
// backend to open the cluster with.
Result<cluster::ClusterManifest> ReadManifestOnRankZero(const std::string& dir) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string text;
  if (rank == 0) {
    Result<std::optional<std::string>> got =
        cluster::ReadSmallFile(io::Env::Default(), dir, cluster::kManifestName);
    if (got.ok() && got->has_value()) text = **got;
  }
  uint64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  text.resize(size);
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD);
  const std::string path = dir + "/" + cluster::kManifestName;
  if (text.empty()) {
    return Status::FailedPrecondition(path + " is missing or unreadable on rank 0");
  }
  STRATA_ASSIGN_OR_RETURN(cluster::ClusterManifest m, cluster::DecodeClusterManifest(text, path));
  if (m.version < 2) {
    return Status::FailedPrecondition(path + " is version 1, which does not name the tables");
  }
  return m;
}

Status ExportCluster(const std::string& dir, const std::string& out) {
  STRATA_ASSIGN_OR_RETURN(cluster::ClusterManifest m, ReadManifestOnRankZero(dir));
  ClusterOptions options;
  options.store.dir = dir;
  options.store.ssd_backend = m.ssd_backend;
  options.store.use_gpu = false;
  std::vector<TableOptions> tables;
  for (const cluster::ManifestTable& t : m.tables) {
    TableOptions to;
    to.name = t.name;
    to.dim = t.dim;
    to.optimizer.kind = t.optimizer;
    tables.push_back(to);
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> c,
                          Cluster::Open(options, tables, MPI_COMM_WORLD));
  uint64_t rows = 0;
  Status exported = bench::ExportClusterRows(*c, MPI_COMM_WORLD, out, 1, &rows);
  const Status closed = c->Close();
  STRATA_RETURN_IF_ERROR(exported);
  STRATA_RETURN_IF_ERROR(closed);
  uint64_t total = 0;
  MPI_Reduce(&rows, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (c->rank() == 0) {
    std::printf("exported %llu rows of %zu tables from %d ranks (generation %llu) to %s\n",
                static_cast<unsigned long long>(total), tables.size(), c->world_size(),
                static_cast<unsigned long long>(m.generation), out.c_str());
  }
  return Status::Ok();
}

}  // namespace

void RunClusterExportCommand(const std::string& dir, const std::string& out) {
  if (!InitMpi("cluster export")) return;
  const Status s = ExportCluster(dir, out);
  if (!s.ok()) ReportFailure("cluster export", s);
  std::fflush(stdout);
  MPI_Finalize();
}

void RunClusterReplayCommand(const bench::ReplayOptions& options, const std::string& faults,
                             bool json) {
  if (!InitMpi("replay --cluster")) return;
  {
    Result<bench::ClusterReplayReport> report = bench::RunClusterReplay(options, MPI_COMM_WORLD);
    if (!report.ok()) {
      ReportFailure("replay --cluster", report.status());
    } else if (report->rank == 0) {
      Print(options, faults, json, *report);
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
}

void RunClusterBenchCommand(const bench::ClusterBenchArgs& args) {
  if (!InitMpi("bench cluster")) return;
  ExitCode() = bench::RunClusterBench(args);
  std::fflush(stdout);
  MPI_Finalize();
}

#else

void RunClusterBenchCommand(const bench::ClusterBenchArgs&) {
  ReportFailure("bench cluster", Status::InvalidArgument("this strata was built without MPI "
                                                         "(STRATA_MPI=OFF or Open MPI not found)"));
}

void RunClusterReplayCommand(const bench::ReplayOptions&, const std::string&, bool) {
  ReportFailure("replay", Status::InvalidArgument("--cluster: this strata was built without MPI "
                                                  "(STRATA_MPI=OFF or Open MPI not found)"));
}

void RunClusterExportCommand(const std::string&, const std::string&) {
  ReportFailure("cluster export",
                Status::InvalidArgument("this strata was built without MPI "
                                        "(STRATA_MPI=OFF or Open MPI not found)"));
}

#endif

}  // namespace strata::cli
