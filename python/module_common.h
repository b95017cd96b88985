// What the strata module's classes share (Store, Cluster): statuses raised as
// the exceptions of strata._errors, key arguments, the store's keyword
// options, and the counters as dicts. REQUIRES: the GIL for all of it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "strata/options.h"
#include "strata/stats.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::python {

namespace py = pybind11;

// Raises the strata._errors exception named after the status's code, with
// its message.
[[noreturn]] void Raise(const Status& s);

inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

// Runs fn() (which returns a Status) without the GIL, then raises its
// failure.
template <typename Fn>
void CallUnlocked(Fn&& fn) {
  Status s;
  {
    py::gil_scoped_release unlocked;
    s = fn();
  }
  Check(s);
}

template <typename T>
T Value(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// The keys of a call: a 1-D array of 64-bit integers on the host (a key is
// its 64-bit pattern), used in place; and their span.
ArrayView KeysArg(const char* call, const py::handle& obj);
inline std::span<const Key> KeySpan(const ArrayView& keys) {
  return {static_cast<const Key*>(keys.data()), static_cast<size_t>(keys.rows())};
}

// A table named by its index (int) among `tables`; a name (str) is looked up
// by the caller's own FindTable. TypeError for anything else.
TableId TableIndexArg(const py::handle& table, const std::vector<TableOptions>& tables);

Optimizer OptimizerByName(const std::string& name);
Initializer InitializerByName(const std::string& name);

// The keyword options of strata.Store (and of each shard of strata.Cluster).
StoreOptions StoreOptionsOf(uint64_t device_rows_max, uint64_t dram_rows_max,
                            const std::string& ssd_backend, const std::string& fallback,
                            bool use_gpu, uint32_t io_threads, double device_share_growth_max,
                            uint32_t planner_round_us, const std::string& faults);

py::dict StatsDict(const StoreStats& s);

}  // namespace strata::python
