// The `strata` command-line tool: trace tools, replay, training and the
// benchmark harness. Subcommands register themselves (bench/command.h).
#include <cstdio>
#include <map>

#include "bench/command.h"
#include "strata/version.h"

namespace strata::cli {

std::vector<CommandEntry>& CommandRegistry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

int& ExitCode() {
  static int code = 0;
  return code;
}

}  // namespace strata::cli

// An exception escaping a command (CLI11_PARSE catches parse errors) ends
// the process through std::terminate, which is what a CLI should do.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  using strata::cli::CommandRegistry;
  CLI::App app{"strata: a GPU-DRAM-SSD embedding store driven by intent signals"};
  app.require_subcommand(1);
  app.set_version_flag("--version", strata::BuildInfo());

  std::map<std::string, CLI::App*> groups;
  groups[""] = &app;
  groups["bench"] = app.add_subcommand("bench", "benchmarks of each subsystem and tiering sweeps");
  groups["bench"]->require_subcommand(1);
  groups["trace"] = app.add_subcommand("trace", "generate, import, inspect and analyse access traces");
  groups["trace"]->require_subcommand(1);

  app.add_subcommand("info", "print the build and the GPUs visible")->callback([] {
    std::printf("%s\n", strata::BuildInfo().c_str());
    std::printf("gpus_visible: %d\n", strata::VisibleGpuCount());
  });

  for (auto& entry : CommandRegistry()) {
    auto it = groups.find(entry.group);
    if (it == groups.end()) {
      std::fprintf(stderr, "strata: command registered under unknown group '%s'\n",
                   entry.group.c_str());
      return 2;
    }
    entry.add(*it->second);
  }

  CLI11_PARSE(app, argc, argv);
  return strata::cli::ExitCode();
}
