// The tiering sweep (sweep.h).
#include "bench/sweep.h"

#include <algorithm>
#include <bit>
#include <concepts>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "trace/cache_sim.h"
#include "trace/generator.h"

namespace strata::bench {
namespace {

using nlohmann::json;

Status CheckKeys(const json& j, const std::set<std::string>& known, const std::string& where) {
  if (!j.is_object())
    return Status::InvalidArgument("sweep config: " + where + " must be an object");
  for (const auto& [key, value] : j.items()) {
    if (!known.count(key)) {
      return Status::InvalidArgument("sweep config: unknown key '" + key + "' in " + where);
    }
  }
  return Status::Ok();
}

// nlohmann reads -1 into an unsigned field as 2^64 - 1 and 1.5 as 1 (a
// static_cast): unsigned fields take non-negative integers that fit only.
template <std::unsigned_integral T>
bool FitsUnsigned(const json& v) {
  if (v.is_array()) return std::all_of(v.begin(), v.end(), FitsUnsigned<T>);
  return v.is_number_unsigned() && v.get<uint64_t>() <= std::numeric_limits<T>::max();
}
template <typename T>
struct UnsignedField : std::false_type {};
template <std::unsigned_integral T>
struct UnsignedField<T> : std::true_type {
  using type = T;
};
template <std::unsigned_integral T>
struct UnsignedField<std::vector<T>> : std::true_type {
  using type = T;
};

template <typename T>
Status Get(const json& j, const char* key, T* out, const std::string& where) {
  if (!j.contains(key)) return Status::Ok();
  if constexpr (UnsignedField<T>::value) {
    if (!FitsUnsigned<typename UnsignedField<T>::type>(j.at(key))) {
      return Status::InvalidArgument("sweep config: " + where + "." + key + ": " +
                                     j.at(key).dump() + " is not a non-negative integer (of " +
                                     std::to_string(sizeof(typename UnsignedField<T>::type) * 8) +
                                     " bits)");
    }
  }
  try {
    *out = j.at(key).get<T>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument("sweep config: " + where + "." + key + ": " + e.what());
  }
  return Status::Ok();
}

std::string Csv(const SweepRow& r) {
  const ReplayReport& p = r.replay;
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "%s,%llu,%llu,%llu,%s,%s,%llu,%llu,%llu,%llu,%.6f,%llu,%llu,%.1f,%.3f,%llu,%llu,"
      "%llu,%llu,%llu,%llu,%llu,%llu\n",
      r.workload.c_str(), (unsigned long long)r.device_rows, (unsigned long long)r.dram_rows,
      (unsigned long long)r.lookahead, r.fallback.c_str(), r.ssd_backend.c_str(),
      (unsigned long long)p.cache_rows, (unsigned long long)p.batches, (unsigned long long)p.pulls,
      (unsigned long long)p.stall_pulls, p.stall_fraction, (unsigned long long)p.ssd_row_reads,
      (unsigned long long)p.ssd_row_writes, p.rows_per_s, p.elapsed_s,
      (unsigned long long)p.t0_hits, (unsigned long long)p.t1_hits, (unsigned long long)p.t2_hits,
      (unsigned long long)r.compulsory_misses, (unsigned long long)r.opt_misses,
      (unsigned long long)r.lru_misses, (unsigned long long)r.horizon_misses,
      (unsigned long long)r.compute_us);
  return buf;
}

constexpr const char* kCsvHeader =
    "workload,device_rows,dram_rows,lookahead,fallback,ssd_backend,cache_rows,batches,pulls,"
    "stall_pulls,stall_fraction,ssd_row_reads,ssd_row_writes,rows_per_s,elapsed_s,t0_hits,"
    "t1_hits,t2_hits,compulsory_misses,opt_misses,lru_misses,horizon_misses,compute_us\n";

json Json(const SweepRow& r) {
  const ReplayReport& p = r.replay;
  return {{"workload", r.workload},
          {"device_rows", r.device_rows},
          {"dram_rows", r.dram_rows},
          {"lookahead", r.lookahead},
          {"fallback", r.fallback},
          {"ssd_backend", r.ssd_backend},
          {"cache_rows", p.cache_rows},
          {"batches", p.batches},
          {"pulls", p.pulls},
          {"stall_pulls", p.stall_pulls},
          {"stall_fraction", p.stall_fraction},
          {"ssd_row_reads", p.ssd_row_reads},
          {"ssd_row_writes", p.ssd_row_writes},
          {"rows_per_s", p.rows_per_s},
          {"elapsed_s", p.elapsed_s},
          {"t0_hits", p.t0_hits},
          {"t1_hits", p.t1_hits},
          {"t2_hits", p.t2_hits},
          {"compulsory_misses", r.compulsory_misses},
          {"opt_misses", r.opt_misses},
          {"lru_misses", r.lru_misses},
          {"horizon_misses", r.horizon_misses},
          {"compute_us", r.compute_us}};
}

Result<std::string> PrepareTrace(const SweepWorkload& w, const std::string& out_dir) {
  if (!w.trace.empty()) return w.trace;
  STRATA_ASSIGN_OR_RETURN(trace::GenOptions g, trace::PresetOptions(w.preset, w.exponent));
  g.scale = w.scale;
  g.batch_size = w.batch_size;
  g.batches = w.batches;
  g.seed = w.seed;
  g.workers = w.workers;
  g.drift = w.drift;
  const std::string path = out_dir + "/" + w.name + ".trace";
  STRATA_RETURN_IF_ERROR(trace::Generate(g, path).status());
  return path;
}

}  // namespace

Result<SweepConfig> ParseSweepConfig(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("sweep config: not JSON: ") + e.what());
  }
  STRATA_RETURN_IF_ERROR(
      CheckKeys(j,
                {"workloads", "device_rows", "dram_rows", "lookahead", "fallback", "ssd_backend",
                 "compute_us", "workers", "dim", "device_share_growth", "dram_shards"},
                "the config"));
  SweepConfig c;
  STRATA_RETURN_IF_ERROR(Get(j, "device_rows", &c.device_rows, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "dram_rows", &c.dram_rows, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "lookahead", &c.lookahead, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "fallback", &c.fallback, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "ssd_backend", &c.ssd_backend, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "workers", &c.workers, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "dim", &c.dim, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "compute_us", &c.compute_us, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "device_share_growth", &c.device_share_growth, "config"));
  STRATA_RETURN_IF_ERROR(Get(j, "dram_shards", &c.dram_shards, "config"));
  if (!j.contains("workloads") || !j["workloads"].is_array() || j["workloads"].empty()) {
    return Status::InvalidArgument("sweep config: 'workloads' must be a non-empty list");
  }
  for (size_t i = 0; i < j["workloads"].size(); ++i) {
    const json& wj = j["workloads"][i];
    const std::string where = "workloads[" + std::to_string(i) + "]";
    STRATA_RETURN_IF_ERROR(CheckKeys(wj,
                                     {"name", "trace", "preset", "scale", "batch_size", "batches",
                                      "exponent", "seed", "workers", "drift"},
                                     where));
    SweepWorkload w;
    STRATA_RETURN_IF_ERROR(Get(wj, "name", &w.name, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "trace", &w.trace, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "preset", &w.preset, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "scale", &w.scale, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "batch_size", &w.batch_size, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "batches", &w.batches, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "exponent", &w.exponent, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "seed", &w.seed, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "workers", &w.workers, where));
    STRATA_RETURN_IF_ERROR(Get(wj, "drift", &w.drift, where));
    if (w.name.empty() || w.name.find_first_of("/ ,") != std::string::npos) {
      return Status::InvalidArgument("sweep config: " + where +
                                     ".name must be non-empty without '/', ' ' or ','");
    }
    c.workloads.push_back(w);
  }
  for (const auto* list : {&c.device_rows, &c.dram_rows, &c.lookahead, &c.compute_us}) {
    if (list->empty()) {
      return Status::InvalidArgument(
          "sweep config: device_rows, dram_rows, lookahead and compute_us need a value each");
    }
  }
  // The bounds `strata replay` applies to the same values.
  auto above = [](const std::vector<uint64_t>& list, uint64_t max) {
    return std::any_of(list.begin(), list.end(), [max](uint64_t v) { return v > max; });
  };
  if (above(c.device_rows, kTierRowsMax) || above(c.dram_rows, kTierRowsMax) ||
      above(c.lookahead, kReplayLookaheadMax) || above(c.compute_us, kReplayComputeUsMax)) {
    return Status::InvalidArgument("sweep config: device_rows and dram_rows at most " +
                                   std::to_string(kTierRowsMax) + ", lookahead at most " +
                                   std::to_string(kReplayLookaheadMax) + ", compute_us at most " +
                                   std::to_string(kReplayComputeUsMax));
  }
  if (c.dram_shards > kDramShardsMax || !std::has_single_bit(std::max(c.dram_shards, 1u))) {
    return Status::InvalidArgument("sweep config: dram_shards " + std::to_string(c.dram_shards) +
                                   " is neither 0 (automatic) nor a power of two in [1, " +
                                   std::to_string(kDramShardsMax) + "]");
  }
  for (const auto& f : c.fallback) {
    if (f != "lru" && f != "lfu")
      return Status::InvalidArgument("sweep config: fallback '" + f + "'");
  }
  for (const auto& b : c.ssd_backend) {
    if (b != "native" && b != "rocksdb") {
      return Status::InvalidArgument("sweep config: ssd_backend '" + b + "'");
    }
  }
  return c;
}

Result<std::vector<SweepRow>> RunSweep(const SweepConfig& c, const std::string& out_dir,
                                       const StoreOpener& open,
                                       const std::function<void(const SweepRow&)>& log) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir + "/stores", ec);
  if (ec) return Status::IOError("sweep: create " + out_dir + "/stores: " + ec.message());
  std::vector<SweepRow> rows;
  for (const auto& w : c.workloads) {
    STRATA_ASSIGN_OR_RETURN(const std::string trace_path, PrepareTrace(w, out_dir));
    STRATA_ASSIGN_OR_RETURN(const trace::IndexedTrace indexed, trace::LoadIndexedTrace(trace_path));
    std::map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> sims;  // (cache, L, fallback)
    auto misses = [&](uint64_t cache, uint64_t lookahead,
                      const std::string& fallback) -> Result<uint64_t> {
      auto key = std::make_tuple(cache, lookahead, fallback);
      if (auto it = sims.find(key); it != sims.end()) return it->second;
      STRATA_ASSIGN_OR_RETURN(
          uint64_t m, trace::SimulateMisses(indexed, cache, lookahead,
                                            fallback == "lfu" ? trace::FallbackOrder::kLfu
                                                              : trace::FallbackOrder::kLru));
      sims[key] = m;
      return m;
    };
    for (uint64_t device : c.device_rows) {
      for (uint64_t dram : c.dram_rows) {
        for (const auto& backend : c.ssd_backend) {
          for (const auto& fallback : c.fallback) {
            for (uint64_t compute_us : c.compute_us) {
              for (uint64_t lookahead : c.lookahead) {
                SweepRow row{w.name, device, dram, lookahead, fallback, backend, compute_us};
                ReplayOptions o;
                o.trace = trace_path;
                o.dir = out_dir + "/stores/run" + std::to_string(rows.size());
                std::filesystem::remove_all(o.dir, ec);
                o.device_rows = device;
                o.dram_rows = dram;
                o.lookahead = lookahead;
                o.intents = lookahead > 0;
                o.workers = c.workers;
                o.dim = c.dim;
                o.fallback = fallback == "lfu" ? FallbackPolicy::kLfu : FallbackPolicy::kLru;
                o.ssd_backend = backend == "rocksdb" ? SsdBackend::kRocksDb : SsdBackend::kNative;
                o.compute_us = compute_us;
                o.device_share_growth = c.device_share_growth;
                o.dram_shards = c.dram_shards;
                STRATA_ASSIGN_OR_RETURN(row.replay, RunReplay(o, open, {}));
                std::filesystem::remove_all(o.dir, ec);
                const uint64_t cache = row.replay.cache_rows;
                row.compulsory_misses = indexed.index.size();
                STRATA_ASSIGN_OR_RETURN(row.opt_misses,
                                        misses(cache, trace::kLookaheadUnbounded, fallback));
                STRATA_ASSIGN_OR_RETURN(row.lru_misses, misses(cache, 0, "lru"));
                STRATA_ASSIGN_OR_RETURN(row.horizon_misses, misses(cache, lookahead, fallback));
                if (log) log(row);
                rows.push_back(row);
              }
            }
          }
        }
      }
    }
  }
  std::ofstream csv(out_dir + "/sweep.csv", std::ios::trunc);
  csv << kCsvHeader;
  json all = json::array();
  for (const auto& r : rows) {
    csv << Csv(r);
    all.push_back(Json(r));
  }
  std::ofstream js(out_dir + "/sweep.json", std::ios::trunc);
  js << all.dump(2) << "\n";
  if (!csv || !js) return Status::IOError("sweep: write " + out_dir + "/sweep.csv or sweep.json");
  return rows;
}

}  // namespace strata::bench
