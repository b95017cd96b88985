// `strata cluster plan`: the Cluster's exchange on a node topology, flat
// against two-phase, per batch of a trace (docs/cluster.md, "The comm
// model"). Each trace batch is one global batch split evenly across the
// ranks in sample order (key i of n to rank i * R / n, per table); each rank
// sends its distinct keys to their owners (ClusterOwner), the rows come
// back, and Push sends keys and gradients: three all-to-alls whose bytes the
// model routes (cluster/comm_model.h). Needs no MPI and no GPU.
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "cli/cli_util.h"
#include "cluster/comm_model.h"
#include "strata/cluster_owner.h"
#include "strata/options.h"
#include "strata/trace.h"

namespace strata::cli {
namespace {

struct PlanArgs {
  std::string topology;
  uint32_t nodes = 1;
  std::string trace;
  uint32_t dim = 16;
  uint64_t batches = 0;  // 0: all
  bool json = false;
  cluster::LinkBandwidths bandwidths;
};

// The bytes of one batch's three all-to-alls, rank pair by rank pair.
struct BatchBytes {
  std::vector<uint64_t> keys, rows, push;  // R * R each
};

void CountBatch(const trace::TraceBatch& batch, int ranks, uint32_t dim, BatchBytes* out) {
  const size_t pairs = static_cast<size_t>(ranks) * ranks;
  out->keys.assign(pairs, 0);
  out->rows.assign(pairs, 0);
  out->push.assign(pairs, 0);
  std::unordered_set<Key> distinct;
  for (const trace::TraceBatchTable& t : batch.tables) {
    const size_t n = t.keys.size();
    for (int r = 0; r < ranks; ++r) {
      distinct.clear();
      for (size_t i = n * r / ranks; i < n * (r + 1) / ranks; ++i) distinct.insert(t.keys[i]);
      for (Key k : distinct) {
        const uint32_t owner = ClusterOwner(t.table, k, static_cast<uint32_t>(ranks));
        out->keys[static_cast<size_t>(r) * ranks + owner] += sizeof(Key);
        out->rows[static_cast<size_t>(owner) * ranks + r] += uint64_t{dim} * sizeof(float);
        out->push[static_cast<size_t>(r) * ranks + owner] += sizeof(Key) + uint64_t{dim} * 4;
      }
    }
  }
}

cluster::TrafficModel Model(const cluster::RoutePlan& plan, const BatchBytes& b,
                            const cluster::LinkBandwidths& bw) {
  cluster::TrafficModel m = cluster::ModelExchange(plan, b.keys, bw);
  m += cluster::ModelExchange(plan, b.rows, bw);
  m += cluster::ModelExchange(plan, b.push, bw);
  return m;
}

nlohmann::json ToJson(const cluster::TrafficModel& m) {
  using cluster::LinkClass;
  return {{"nvlink_bytes", m.Bytes(LinkClass::kNvlink)},
          {"pcie_bytes", m.Bytes(LinkClass::kPcieSwitch)},
          {"pcie_cpu_bytes", m.Bytes(LinkClass::kPcieCpu)},
          {"network_bytes", m.Bytes(LinkClass::kNetwork)},
          {"time_us", m.time_s * 1e6}};
}

void PrintRow(const char* batch, const char* mode, const cluster::TrafficModel& m) {
  using cluster::LinkClass;
  std::printf("%-8s %-10s %14llu %14llu %14llu %14llu %12.1f\n", batch, mode,
              static_cast<unsigned long long>(m.Bytes(LinkClass::kNvlink)),
              static_cast<unsigned long long>(m.Bytes(LinkClass::kPcieSwitch)),
              static_cast<unsigned long long>(m.Bytes(LinkClass::kPcieCpu)),
              static_cast<unsigned long long>(m.Bytes(LinkClass::kNetwork)), m.time_s * 1e6);
}

Status Run(const PlanArgs& a) {
  STRATA_ASSIGN_OR_RETURN(cluster::NodeTopology topology, cluster::LoadTopology(a.topology));
  const int nodes = static_cast<int>(a.nodes);
  STRATA_ASSIGN_OR_RETURN(cluster::RoutePlan flat,
                          cluster::RoutePlan::Build(topology, nodes, cluster::ExchangeMode::kFlat));
  STRATA_ASSIGN_OR_RETURN(
      cluster::RoutePlan two,
      cluster::RoutePlan::Build(topology, nodes, cluster::ExchangeMode::kTwoPhase));
  STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(a.trace));
  const int ranks = flat.world_size();
  nlohmann::json rows = nlohmann::json::array();
  cluster::TrafficModel flat_total, two_total;
  if (!a.json) {
    std::printf(
        "topology %s, %d node(s), %d ranks, dim %u; bandwidths GB/s: nvlink %g pcie %g "
        "pcie-cpu %g network %g\n",
        topology.name.c_str(), nodes, ranks, a.dim, a.bandwidths.nvlink_gbps,
        a.bandwidths.pcie_gbps, a.bandwidths.pcie_cpu_gbps, a.bandwidths.network_gbps);
    std::printf("%-8s %-10s %14s %14s %14s %14s %12s\n", "batch", "exchange", "nvlink_bytes",
                "pcie_bytes", "pcie_cpu_bytes", "network_bytes", "time_us");
  }
  trace::TraceBatch batch;
  BatchBytes bytes;
  uint64_t index = 0;
  while (a.batches == 0 || index < a.batches) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    CountBatch(batch, ranks, a.dim, &bytes);
    const cluster::TrafficModel f = Model(flat, bytes, a.bandwidths);
    const cluster::TrafficModel t = Model(two, bytes, a.bandwidths);
    flat_total += f;
    two_total += t;
    if (a.json) {
      rows.push_back({{"batch", index},
                      {"keys", batch.KeyCount()},
                      {"flat", ToJson(f)},
                      {"two_phase", ToJson(t)}});
    } else {
      const std::string name = std::to_string(index);
      PrintRow(name.c_str(), "flat", f);
      PrintRow(name.c_str(), "two-phase", t);
    }
    ++index;
  }
  if (a.json) {
    const cluster::LinkBandwidths& bw = a.bandwidths;
    nlohmann::json j = {
        {"topology", topology.name},
        {"nodes", nodes},
        {"ranks", ranks},
        {"dim", a.dim},
        {"trace", a.trace},
        {"bandwidths_gbps",
         {{"nvlink", bw.nvlink_gbps},
          {"pcie", bw.pcie_gbps},
          {"pcie_cpu", bw.pcie_cpu_gbps},
          {"network", bw.network_gbps}}},
        {"routes", two.Describe()},
        {"batches", rows},
        {"total",
         {{"batches", index}, {"flat", ToJson(flat_total)}, {"two_phase", ToJson(two_total)}}}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintRow("total", "flat", flat_total);
    PrintRow("total", "two-phase", two_total);
    if (flat_total.time_s > 0) {
      std::printf("two-phase time / flat time: %.3f over %llu batches\n",
                  two_total.time_s / flat_total.time_s, static_cast<unsigned long long>(index));
    }
  }
  return Status::Ok();
}

void AddBandwidth(CLI::App* c, const char* name, double& value, const char* what) {
  AddReal(c, name, value, std::string("GB/s per direction of ") + what,
          RealRange{0, 1e6, true, false})
      ->capture_default_str();
}

CommandRegistrar reg{
    "cluster", [](CLI::App& group) {
      auto args = std::make_shared<PlanArgs>();
      auto* c = group.add_subcommand("plan",
                                     "bytes per link class and modelled time of the cluster's "
                                     "exchange, flat against two-phase, per batch of a trace");
      c->add_option("--topology", args->topology,
                    "a fixture (seed8, nvswitch8, pcie8) or a topology file")
          ->required();
      AddUnsigned<uint32_t>(c, "--nodes", args->nodes, "nodes", 1, cluster::kRoutePlanRanksMax)
          ->capture_default_str();
      c->add_option("--trace", args->trace, "trace file")->required();
      AddUnsigned<uint32_t>(c, "--dim", args->dim, "embedding floats per row", 1, kTableDimMax)
          ->capture_default_str();
      AddUnsigned<uint64_t>(c, "--batches", args->batches, "model the first N batches (0: all)")
          ->capture_default_str();
      c->add_flag("--json", args->json, "print JSON");
      AddBandwidth(c, "--nvlink-gbps", args->bandwidths.nvlink_gbps, "an NVLink");
      AddBandwidth(c, "--pcie-gbps", args->bandwidths.pcie_gbps,
                   "a GPU's PCIe port, peer to peer through a switch");
      AddBandwidth(c, "--pcie-cpu-gbps", args->bandwidths.pcie_cpu_gbps,
                   "a GPU's PCIe port, through the CPUs' memory");
      AddBandwidth(c, "--network-gbps", args->bandwidths.network_gbps, "a node's NIC");
      c->callback([args] {
        const Status s = Run(*args);
        if (!s.ok()) ReportFailure("cluster plan", s);
      });
    }};

}  // namespace
}  // namespace strata::cli
