// The strata module's shared pieces (module_common.h).
#include "module_common.h"

#include <string>
#include <utility>

#include "strata/store.h"

namespace strata::python {

[[noreturn]] void Raise(const Status& s) {
  py::object by_code = py::module_::import("strata._errors").attr("BY_CODE");
  py::object cls = by_code[py::str(std::string(StatusCodeName(s.code())))];
  PyErr_SetString(cls.ptr(), s.message().c_str());
  throw py::error_already_set();
}

ArrayView KeysArg(const char* call, const py::handle& obj) {
  Want want;
  want.elem = Elem::kKey;
  want.ndim = 1;
  want.rows = -1;
  return View(call, "keys", obj, want, /*stream=*/0);
}

TableId TableIndexArg(const py::handle& table, const std::vector<TableOptions>& tables) {
  if (!py::isinstance<py::int_>(table)) {
    throw py::type_error("table must be a name (str) or an index (int), not " +
                         std::string(py::str(py::type::of(table).attr("__name__"))));
  }
  const long long id = table.cast<long long>();
  if (id < 0 || static_cast<size_t>(id) >= tables.size()) {
    Raise(Status::InvalidArgument("table " + std::to_string(id) + ": the store has " +
                                  std::to_string(tables.size()) + " tables"));
  }
  return static_cast<TableId>(id);
}

Optimizer OptimizerByName(const std::string& name) {
  const std::pair<const char*, Optimizer> names[] = {
      {"sgd", Optimizer::kSgd},
      {"adagrad", Optimizer::kAdagrad},
      {"rowwise_adagrad", Optimizer::kRowwiseAdagrad},
      {"adam", Optimizer::kAdam},
      {"ftrl", Optimizer::kFtrl}};
  for (const auto& [n, k] : names) {
    if (name == n) return k;
  }
  Raise(Status::InvalidArgument("optimizer '" + name +
                                "': one of sgd, adagrad, rowwise_adagrad, adam, ftrl"));
}

Initializer InitializerByName(const std::string& name) {
  if (name == "zeros") return Initializer::kZeros;
  if (name == "uniform") return Initializer::kUniform;
  if (name == "normal") return Initializer::kNormal;
  Raise(Status::InvalidArgument("initializer '" + name + "': one of zeros, uniform, normal"));
}

namespace {

py::dict TierDict(const TierStats& t) {
  py::dict d;
  d["hits"] = t.hits;
  d["misses"] = t.misses;
  d["rows_in"] = t.rows_in;
  d["rows_out"] = t.rows_out;
  d["bytes_in"] = t.bytes_in;
  d["bytes_out"] = t.bytes_out;
  d["evictions"] = t.evictions;
  d["dirty_writebacks"] = t.dirty_writebacks;
  d["rows"] = t.rows;
  d["rows_max"] = t.rows_max;
  return d;
}

}  // namespace

py::dict StatsDict(const StoreStats& s) {
  py::dict d;
  d["t0"] = TierDict(s.t0);
  d["t1"] = TierDict(s.t1);
  d["ssd_row_reads"] = s.ssd_row_reads;
  d["ssd_row_writes"] = s.ssd_row_writes;
  d["pulls"] = s.pulls;
  d["pushes"] = s.pushes;
  d["nonfinite_grads"] = s.nonfinite_grads;
  d["stall_pulls"] = s.stall_pulls;
  d["prefetched_rows"] = s.prefetched_rows;
  d["late_prefetches"] = s.late_prefetches;
  d["intents"] = s.intents;
  d["expired_intents"] = s.expired_intents;
  d["deferred_intents"] = s.deferred_intents;
  d["intent_bytes"] = s.intent_bytes;
  d["intent_bytes_max"] = s.intent_bytes_max;
  d["intent_pairs"] = s.intent_pairs;
  d["intent_pairs_max"] = s.intent_pairs_max;
  d["planner_rounds"] = s.planner_rounds;
  d["planner_io_errors"] = s.planner_io_errors;
  d["cleaned_ahead"] = s.cleaned_ahead;
  d["cleaner_io_errors"] = s.cleaner_io_errors;
  d["planner_round_us_max"] = s.planner_round_us_max;
  d["planner_round_us_mean"] = s.planner_round_us_mean;
  d["t0_on_gpu"] = s.t0_on_gpu;
  return d;
}

StoreOptions StoreOptionsOf(uint64_t device_rows_max, uint64_t dram_rows_max,
                            const std::string& ssd_backend, const std::string& fallback,
                            bool use_gpu, uint32_t io_threads, double device_share_growth_max,
                            uint32_t planner_round_us, const std::string& faults) {
  StoreOptions o;
  o.device_rows_max = device_rows_max;
  o.dram_rows_max = dram_rows_max;
  if (ssd_backend == "native") {
    o.ssd_backend = SsdBackend::kNative;
  } else if (ssd_backend == "rocksdb") {
    o.ssd_backend = SsdBackend::kRocksDb;
  } else {
    Raise(Status::InvalidArgument("ssd_backend '" + ssd_backend + "': native or rocksdb"));
  }
  if (fallback == "lru") {
    o.fallback_policy = FallbackPolicy::kLru;
  } else if (fallback == "lfu") {
    o.fallback_policy = FallbackPolicy::kLfu;
  } else {
    Raise(Status::InvalidArgument("fallback '" + fallback + "': lru or lfu"));
  }
  o.use_gpu = use_gpu;
  o.io_threads = io_threads;
  o.device_share_growth_max = device_share_growth_max;
  o.planner_round_us = planner_round_us;
  o.faults = Value(ParseFaultOptions(faults));
  return o;
}

}  // namespace strata::python
