// NodeTopology (topology.h): link classes, fixtures, the text format.
#include "cluster/topology.h"

#include <filesystem>
#include <optional>
#include <sstream>

#include "cluster/manifest.h"
#include "io/env.h"

namespace strata::cluster {
namespace {

NodeTopology Empty(std::string name, int gpus) {
  NodeTopology t;
  t.name = std::move(name);
  t.gpus = gpus;
  t.pcie_switch.assign(gpus, 0);
  t.socket.assign(gpus, 0);
  t.nvlink.assign(static_cast<size_t>(gpus) * gpus, 0);
  return t;
}

void Join(NodeTopology* t, int a, int b) {
  t->nvlink[static_cast<size_t>(a) * t->gpus + b] = 1;
  t->nvlink[static_cast<size_t>(b) * t->gpus + a] = 1;
}

// GPUs 0-3 on switch and socket 0, 4-7 on switch and socket 1.
NodeTopology TwoSockets(std::string name) {
  NodeTopology t = Empty(std::move(name), 8);
  for (int g = 0; g < 8; ++g) t.pcie_switch[g] = t.socket[g] = g / 4;
  return t;
}

Status LineError(const std::string& source, int line, const std::string& what) {
  return Status::InvalidArgument("topology " + source + ": line " + std::to_string(line) + ": " +
                                 what);
}

// Reads `count` integers in [0, max) from `in` into *out.
bool ReadInts(std::istringstream& in, int count, int max, std::vector<int>* out) {
  out->clear();
  for (int i = 0; i < count; ++i) {
    long long v = -1;
    if (!(in >> v) || v < 0 || v >= max) return false;
    out->push_back(static_cast<int>(v));
  }
  std::string extra;
  return !(in >> extra);
}

}  // namespace

const char* LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf:
      return "self";
    case LinkClass::kNvlink:
      return "nvlink";
    case LinkClass::kPcieSwitch:
      return "pcie";
    case LinkClass::kPcieCpu:
      return "pcie-cpu";
    case LinkClass::kNetwork:
      return "network";
  }
  return "?";
}

LinkClass NodeTopology::Link(int a, int b) const {
  if (a == b) return LinkClass::kSelf;
  if (HasNvlink(a, b)) return LinkClass::kNvlink;
  return pcie_switch[a] == pcie_switch[b] ? LinkClass::kPcieSwitch : LinkClass::kPcieCpu;
}

LinkClass NodeTopology::LinkToNic(int g) const {
  return pcie_switch[g] == pcie_switch[nic_gpu] ? LinkClass::kPcieSwitch : LinkClass::kPcieCpu;
}

Result<NodeTopology> FixtureTopology(std::string_view name) {
  if (name == "seed8") {
    NodeTopology t = TwoSockets("seed8");
    for (int s = 0; s < 8; s += 4) {
      for (int a = s; a < s + 4; ++a) {
        for (int b = a + 1; b < s + 4; ++b) Join(&t, a, b);
      }
    }
    for (int a = 0; a < 4; ++a) Join(&t, a, a + 4);
    return t;
  }
  if (name == "nvswitch8") {
    NodeTopology t = Empty("nvswitch8", 8);
    for (int a = 0; a < 8; ++a) {
      for (int b = a + 1; b < 8; ++b) Join(&t, a, b);
    }
    return t;
  }
  if (name == "pcie8") return TwoSockets("pcie8");
  return Status::NotFound("topology '" + std::string(name) + "' is neither a fixture (" +
                          kTopologyFixtures + ") nor a file");
}

Result<NodeTopology> ParseTopology(std::string_view text, const std::string& source) {
  std::istringstream lines{std::string(text)};
  std::string raw;
  int line = 0;
  bool saw_magic = false;
  std::optional<NodeTopology> t;
  std::vector<int> ints;
  while (std::getline(lines, raw)) {
    ++line;
    if (const size_t hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
    std::istringstream in(raw);
    std::string word;
    if (!(in >> word)) continue;
    if (!saw_magic) {
      if (word != "strata-topology" || !ReadInts(in, 1, 2, &ints) || ints[0] != 1) {
        return LineError(source, line, "expected 'strata-topology 1' first");
      }
      saw_magic = true;
      continue;
    }
    if (word == "gpus") {
      if (t.has_value()) return LineError(source, line, "'gpus' given twice");
      if (!ReadInts(in, 1, kTopologyGpusMax + 1, &ints) || ints[0] < 1) {
        return LineError(source, line, "'gpus N' with N in 1.." + std::to_string(kTopologyGpusMax));
      }
      t = Empty(source, ints[0]);
      continue;
    }
    if (!t.has_value()) return LineError(source, line, "'" + word + "' before 'gpus'");
    const int n = t->gpus;
    if (word == "switch" || word == "socket") {
      if (!ReadInts(in, n, kTopologyGpusMax, &ints)) {
        return LineError(source, line,
                         "'" + word + "' takes " + std::to_string(n) + " numbers in 0.." +
                             std::to_string(kTopologyGpusMax - 1));
      }
      (word == "switch" ? t->pcie_switch : t->socket) = ints;
    } else if (word == "nvlink") {
      if (!ReadInts(in, 2, n, &ints) || ints[0] == ints[1]) {
        return LineError(source, line,
                         "'nvlink A B' with two different GPUs below " + std::to_string(n));
      }
      Join(&*t, ints[0], ints[1]);
    } else if (word == "nic_gpu") {
      if (!ReadInts(in, 1, n, &ints)) {
        return LineError(source, line, "'nic_gpu G' with G below " + std::to_string(n));
      }
      t->nic_gpu = ints[0];
    } else {
      return LineError(source, line, "unknown directive '" + word + "'");
    }
  }
  if (!t.has_value()) {
    return Status::InvalidArgument("topology " + source + ": no 'gpus' line");
  }
  for (int a = 0; a < t->gpus; ++a) {
    for (int b = 0; b < t->gpus; ++b) {
      if (t->pcie_switch[a] == t->pcie_switch[b] && t->socket[a] != t->socket[b]) {
        return Status::InvalidArgument("topology " + source + ": GPUs " + std::to_string(a) +
                                       " and " + std::to_string(b) +
                                       " share a switch but not a socket");
      }
    }
  }
  return std::move(*t);
}

std::string FormatTopology(const NodeTopology& t) {
  std::string out = "strata-topology 1\ngpus " + std::to_string(t.gpus) + "\nswitch";
  for (int s : t.pcie_switch) out += " " + std::to_string(s);
  out += "\nsocket";
  for (int s : t.socket) out += " " + std::to_string(s);
  out += "\n";
  for (int a = 0; a < t.gpus; ++a) {
    for (int b = a + 1; b < t.gpus; ++b) {
      if (t.HasNvlink(a, b)) out += "nvlink " + std::to_string(a) + " " + std::to_string(b) + "\n";
    }
  }
  return out + "nic_gpu " + std::to_string(t.nic_gpu) + "\n";
}

Result<NodeTopology> LoadTopology(const std::string& spec) {
  Result<NodeTopology> fixture = FixtureTopology(spec);
  if (fixture.ok()) return fixture;
  if (spec.find('/') == std::string::npos && !std::filesystem::exists(spec)) return fixture;
  const std::filesystem::path path(spec);
  std::string dir = path.parent_path().string();
  if (dir.empty()) dir = ".";
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          ReadSmallFile(io::Env::Default(), dir, path.filename().string()));
  if (!text.has_value()) return Status::NotFound("topology file " + spec + " does not exist");
  return ParseTopology(*text, spec);
}

}  // namespace strata::cluster
