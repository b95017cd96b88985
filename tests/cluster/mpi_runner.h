// Launching a program under real `mpirun` from a test, on one machine:
// where mpirun is, the command line that runs N ranks (--oversubscribe,
// --allow-run-as-root as root, shared memory only, ranks yielding while they
// wait), running a command for its exit code and output, and reading the
// JSON it printed. Test code only.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::cluster::testing {

// mpirun's path on $PATH, or "" when it is not installed.
inline std::string Mpirun() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', pos), dirs.size());
    const std::string candidate = dirs.substr(pos, end - pos) + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = end + 1;
  }
  return "";
}

// Why a test of `strata <command> --cluster` under mpirun cannot run here
// ("" when it can): mpirun missing, or a build without MPI.
inline std::string MpiSkipReason(const std::string& command) {
  if (Mpirun().empty()) return "mpirun is not installed (scripts/deps.sh installs it)";
#ifndef STRATA_HAVE_MPI
  return "the build found no MPI (STRATA_MPI): strata " + command + " has no --cluster";
#else
  (void)command;
  return "";
#endif
}

// "... mpirun ... -np <ranks>", to be followed by the program and its
// arguments; the whole job runs under `timeout timeout_s`.
inline std::string MpirunCommand(int ranks, int timeout_s = 240) {
  // Open MPI's own runtime leaks at exit (its components, hwloc), so under
  // AddressSanitizer the ranks run without the leak check; the Cluster's
  // code is leak-checked through its MPI-free tests.
  std::string cmd = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" timeout " +
                    std::to_string(timeout_s) + " " + Mpirun() + " --oversubscribe";
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  // One machine: shared memory and self only, and ranks yield while they
  // wait (more ranks than cores).
  cmd +=
      " --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
      " --mca mpi_yield_when_idle 1 -np " +
      std::to_string(ranks);
  return cmd;
}

// Runs `cmd` through the shell, stdout and stderr into *output; its exit
// code (-1 when it did not exit).
inline int RunCommand(const std::string& cmd, std::string* output) {
  output->clear();
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  const int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The JSON object a command printed (from its first '{'), or an empty
// object when there is none or it does not parse.
inline nlohmann::json ParseJsonOutput(const std::string& out) {
  const size_t brace = out.find('{');
  if (brace == std::string::npos) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(out.substr(brace), nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

}  // namespace strata::cluster::testing
