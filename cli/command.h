// Registration of `strata` CLI subcommands. Each subsystem's command file
// defines a static CommandRegistrar naming its group ("bench", "trace", or ""
// for a top-level command) and a function that adds its subcommand to that
// group's CLI11 App. main.cc builds the groups and calls every registrar, so
// adding a command touches only its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace strata::cli {

using AddCommandFn = std::function<void(CLI::App& group)>;

struct CommandEntry {
  std::string group;  // "" (top level), "bench", "trace" or "cluster"
  AddCommandFn add;
};

std::vector<CommandEntry>& CommandRegistry();

struct CommandRegistrar {
  CommandRegistrar(std::string group, AddCommandFn add) {
    CommandRegistry().push_back({std::move(group), std::move(add)});
  }
};

// Exit code a command's callback sets; main returns it.
int& ExitCode();

}  // namespace strata::cli
