// The names of this process's threads as the kernel reports them
// (/proc/self/task/TID/comm), for tests of base::NameThisThread's callers.
//
// Thread safety: reads /proc only.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace strata::testing {

// The name of thread `tid` of this process ("" when it has exited).
inline std::string ThreadName(int tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The names of every thread of this process.
inline std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    names.push_back(ThreadName(std::stoi(e.path().filename().string())));
  }
  return names;
}

}  // namespace strata::testing
