// The `strata` command-line tool: trace tools, replay, training and the
// benchmark harness. Subcommands register themselves (cli/command.h).
#include <cstdio>
#include <map>

#include "cli/cli_util.h"
#include "cli/command.h"
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

namespace {

// "strata trace gen": the app and the subcommands parsed so far.
std::string CommandPath(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* sub = app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().back();
    path += " " + sub->get_name();
  }
  return path;
}

}  // namespace
}  // namespace strata::cli

// An exception escaping a command (CLI11_PARSE catches parse errors) ends
// the process through std::terminate, which is what a CLI should do.
int main(int argc, char** argv) {  // NOLINT(bugprone-exception-escape)
  using strata::cli::CommandRegistry;
  CLI::App app{"strata: a GPU-DRAM-SSD embedding store driven by intent signals", "strata"};
  app.require_subcommand(1);
  app.set_version_flag("--version", strata::BuildInfo());

  std::map<std::string, CLI::App*> groups;
  groups[""] = &app;
  groups["bench"] = app.add_subcommand("bench", "benchmarks of each subsystem and tiering sweeps");
  groups["bench"]->require_subcommand(1);
  groups["trace"] =
      app.add_subcommand("trace", "generate, import, inspect and analyse access traces");
  groups["trace"]->require_subcommand(1);
  groups["cluster"] = app.add_subcommand(
      "cluster",
      "a cluster of ranks: plan its exchange, reshard its directory for another rank count, "
      "export its rows");
  groups["cluster"]->require_subcommand(1);

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

  if (auto s = strata::cli::CheckNumberOptions(app, "strata"); !s.ok()) {
    std::fprintf(stderr, "strata: internal error: %s\n", s.ToString().c_str());
    return 70;
  }
  // A usage error (unknown option, missing or bad value) is one line naming
  // the command, and exit code 2; the command has not started.
  app.failure_message([](const CLI::App* root, const CLI::Error& e) {
    return strata::cli::CommandPath(root) + ": " + e.what() + "\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return strata::cli::ExitCode();
}
