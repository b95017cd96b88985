// `strata bench sweep CONFIG`: the tiering grid of bench/sweep.h, then PNG
// plots drawn by scripts/plot_sweep.py (python3-matplotlib).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/sweep.h"
#include "cli/cli_util.h"
#include "strata/store.h"

namespace strata::cli {
namespace {

struct SweepArgs {
  std::string config;
  std::string out = "sweep-out";
  std::string plot_script = STRATA_PLOT_SCRIPT;
  // Debian's interpreter first: python3-matplotlib installs there, and a
  // python3 earlier on PATH (pyenv, venv) may lack it.
  std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  bool no_plots = false;
  bool json = false;
};

void Run(const SweepArgs& a) {
  std::ifstream in(a.config);
  if (!in)
    return ReportFailure("bench sweep", Status::NotFound("config " + a.config + " not found"));
  std::stringstream text;
  text << in.rdbuf();
  auto config = bench::ParseSweepConfig(text.str());
  if (!config.ok()) return ReportFailure("bench sweep", config.status());
  if (!a.json) {
    std::printf("%-12s %8s %8s %5s %4s %7s %9s %10s %10s %10s %10s %8s %10s\n", "workload",
                "t0_rows", "t1_rows", "look", "fb", "backend", "compute", "ssd_reads", "horizon",
                "opt", "lru", "stall%", "rows/s");
  }
  auto rows = bench::RunSweep(*config, a.out, Store::Open, [&](const bench::SweepRow& r) {
    if (a.json) return;
    std::printf("%-12s %8llu %8llu %5llu %4s %7s %9llu %10llu %10llu %10llu %10llu %8.3f %10.0f\n",
                r.workload.c_str(), (unsigned long long)r.device_rows,
                (unsigned long long)r.dram_rows, (unsigned long long)r.lookahead,
                r.fallback.c_str(), r.ssd_backend.c_str(), (unsigned long long)r.compute_us,
                (unsigned long long)r.replay.ssd_row_reads, (unsigned long long)r.horizon_misses,
                (unsigned long long)r.opt_misses, (unsigned long long)r.lru_misses,
                100 * r.replay.stall_fraction, r.replay.rows_per_s);
    std::fflush(stdout);
  });
  if (!rows.ok()) return ReportFailure("bench sweep", rows.status());
  if (!a.no_plots) {
    const std::string cmd =
        a.python + " '" + a.plot_script + "' '" + a.out + "/sweep.csv' '" + a.out + "'";
    if (std::system(cmd.c_str()) != 0) {
      return ReportFailure(
          "bench sweep",
          Status::Unavailable("plots: '" + cmd +
                              "' failed (python3-matplotlib installed? "
                              "scripts/deps.sh); sweep.csv and sweep.json are written"));
    }
  }
  if (a.json) {
    std::ifstream js(a.out + "/sweep.json");
    std::stringstream all;
    all << js.rdbuf();
    std::printf("%s", all.str().c_str());
  } else {
    std::printf("wrote %s/sweep.csv, %s/sweep.json%s\n", a.out.c_str(), a.out.c_str(),
                a.no_plots ? "" : " and PNG plots");
  }
}

CommandRegistrar reg{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<SweepArgs>();
      auto* c =
          group.add_subcommand("sweep", "tiering grid: replays beside Belady MIN, horizon and LRU");
      c->add_option("config", args->config, "JSON config (see bench/sweep.h)")->required();
      c->add_option("--out", args->out, "output directory")->capture_default_str();
      c->add_option("--plot-script", args->plot_script, "plot script")->capture_default_str();
      c->add_option("--python", args->python, "interpreter for the plot script")
          ->capture_default_str();
      c->add_flag("--no-plots", args->no_plots, "write CSV and JSON only");
      c->add_flag("--json", args->json, "print the rows as JSON");
      c->callback([args] { Run(*args); });
    }};

}  // namespace
}  // namespace strata::cli
