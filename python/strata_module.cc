// strata._strata: the Store of include/strata/store.h for Python (pybind11).
// python/strata/__init__.py re-exports it; docs/python.md is the guide.
//
// Arrays: keys are 1-D numpy.uint64, rows and gradients C-contiguous
// float32 of shape (len(keys), dim), all on the host and used in place (no
// copy); anything else is a TypeError naming the call, the argument and
// what was expected. A store whose T0 is on a GPU takes device memory, which
// this module does not pass yet: such a store is refused at open with a
// message saying so (use_gpu=False keeps T0 on the host).
// Errors: a failed Status raises the exception of strata._errors named after
// its code (strata.InvalidArgument, ...), with the C++ message.
// GIL: released during every call into the store (any may wait on I/O or on
// the planner), so several Python threads can drive several workers.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "strata/store.h"
#include "strata/version.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// Raises the strata._errors exception for a failed status. REQUIRES: the GIL.
[[noreturn]] void Raise(const Status& s) {
  py::object by_code = py::module_::import("strata._errors").attr("BY_CODE");
  py::object cls = by_code[py::str(std::string(StatusCodeName(s.code())))];
  PyErr_SetString(cls.ptr(), s.message().c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Value(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

std::string Describe(const py::handle& obj) {
  if (!py::isinstance<py::array>(obj))
    return std::string(py::str(py::type::of(obj).attr("__name__")));
  py::array a = py::reinterpret_borrow<py::array>(obj);
  std::string shape = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    shape += std::to_string(a.shape(i)) + (a.ndim() == 1 || i + 1 < a.ndim() ? "," : "");
  }
  shape += ")";
  std::string s = "numpy array of " + std::string(py::str(a.dtype())) + " with shape " + shape;
  if (!(a.flags() & py::array::c_style)) s += ", not C-contiguous";
  return s;
}

[[noreturn]] void WrongArray(const char* call, const char* arg, const std::string& expected,
                             const py::handle& got) {
  throw py::type_error(std::string(call) + ": " + arg + " must be " + expected + " (got " +
                       Describe(got) + ")");
}

// The keys of a call: a 1-D C-contiguous numpy.uint64 array, used in place.
std::span<const Key> KeysArg(const char* call, const py::handle& obj) {
  const std::string expected = "a 1-D C-contiguous numpy.uint64 array on the host";
  if (!py::isinstance<py::array>(obj)) WrongArray(call, "keys", expected, obj);
  py::array a = py::reinterpret_borrow<py::array>(obj);
  if (a.ndim() != 1 || !a.dtype().is(py::dtype::of<uint64_t>()) ||
      !(a.flags() & py::array::c_style)) {
    WrongArray(call, "keys", expected, obj);
  }
  return {static_cast<const Key*>(a.data()), static_cast<size_t>(a.shape(0))};
}

// Rows or gradients: a C-contiguous float32 array of shape (n, dim).
py::array RowsArg(const char* call, const char* arg, const py::handle& obj, size_t n, uint32_t dim,
                  bool writable) {
  const std::string expected = "a C-contiguous numpy.float32 array of shape (" + std::to_string(n) +
                               ", " + std::to_string(dim) + ")" + (writable ? ", writable," : "") +
                               " on the host";
  if (!py::isinstance<py::array>(obj)) WrongArray(call, arg, expected, obj);
  py::array a = py::reinterpret_borrow<py::array>(obj);
  if (a.ndim() != 2 || static_cast<size_t>(a.shape(0)) != n ||
      static_cast<uint32_t>(a.shape(1)) != dim || !a.dtype().is(py::dtype::of<float>()) ||
      !(a.flags() & py::array::c_style) || (writable && !a.writeable())) {
    WrongArray(call, arg, expected, obj);
  }
  return a;
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

py::dict StatsDict(const StoreStats& s) {
  py::dict d;
  d["t0"] = TierDict(s.t0);
  d["t1"] = TierDict(s.t1);
  d["ssd_row_reads"] = s.ssd_row_reads;
  d["ssd_row_writes"] = s.ssd_row_writes;
  d["pulls"] = s.pulls;
  d["pushes"] = s.pushes;
  d["stall_pulls"] = s.stall_pulls;
  d["prefetched_rows"] = s.prefetched_rows;
  d["late_prefetches"] = s.late_prefetches;
  d["intents"] = s.intents;
  d["expired_intents"] = s.expired_intents;
  d["deferred_intents"] = s.deferred_intents;
  d["planner_rounds"] = s.planner_rounds;
  d["planner_io_errors"] = s.planner_io_errors;
  d["cleaned_ahead"] = s.cleaned_ahead;
  d["cleaner_io_errors"] = s.cleaner_io_errors;
  d["planner_round_us_max"] = s.planner_round_us_max;
  d["planner_round_us_mean"] = s.planner_round_us_mean;
  d["t0_on_gpu"] = s.t0_on_gpu;
  return d;
}

// One open store. Thread safety: the Store's own (calls for different
// workers may run at once); close() after the other threads are done.
class PyStore {
 public:
  PyStore(const std::string& dir, const std::vector<TableOptions>& tables,
          const StoreOptions& options) {
    StoreOptions o = options;
    o.dir = dir;
    Result<std::unique_ptr<Store>> opened = Status::Internal("not opened");
    {
      py::gil_scoped_release unlocked;
      opened = Store::Open(o, tables);
    }
    store_ = Value(std::move(opened));
    if (store_->Stats().t0_on_gpu) {
      Status closed;
      {
        py::gil_scoped_release unlocked;
        closed = store_->Close();
      }
      Check(closed);
      Raise(Status::FailedPrecondition(
          "strata.Store(" + dir +
          "): T0 is on a GPU, whose Pull and Push take device memory; this module passes host "
          "arrays only so far: open with use_gpu=False"));
    }
  }

  WorkerId RegisterWorker(int device) {
    Result<WorkerId> r = Status::Internal("not registered");
    {
      py::gil_scoped_release unlocked;
      r = store_->RegisterWorker(device);
    }
    return Value(std::move(r));
  }

  TableId TableArg(const py::handle& table) const {
    if (py::isinstance<py::str>(table)) return Value(store_->FindTable(table.cast<std::string>()));
    if (py::isinstance<py::int_>(table)) {
      const long long id = table.cast<long long>();
      if (id < 0 || static_cast<size_t>(id) >= store_->Tables().size()) {
        Raise(Status::InvalidArgument("table " + std::to_string(id) + ": the store has " +
                                      std::to_string(store_->Tables().size()) + " tables"));
      }
      return static_cast<TableId>(id);
    }
    throw py::type_error("table must be a name (str) or an index (int), not " +
                         std::string(py::str(py::type::of(table).attr("__name__"))));
  }

  void Intent(WorkerId worker, const py::handle& table, const py::handle& keys, Clock start,
              Clock end) {
    const TableId t = TableArg(table);
    const std::span<const Key> k = KeysArg("intent", keys);
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = store_->Intent(worker, t, k, start, end);
    }
    Check(s);
  }

  py::array Pull(WorkerId worker, const py::handle& table, const py::handle& keys,
                 const py::object& out) {
    const TableId t = TableArg(table);
    const std::span<const Key> k = KeysArg("pull", keys);
    const uint32_t dim = store_->Tables()[t].dim;
    py::array rows = out.is_none() ? py::array_t<float>({static_cast<py::ssize_t>(k.size()),
                                                         static_cast<py::ssize_t>(dim)})
                                   : RowsArg("pull", "out", out, k.size(), dim, /*writable=*/true);
    float* target = static_cast<float*>(rows.mutable_data());
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = store_->Pull(worker, t, k, target);
    }
    Check(s);
    return rows;
  }

  void Push(WorkerId worker, const py::handle& table, const py::handle& keys,
            const py::handle& grads) {
    const TableId t = TableArg(table);
    const std::span<const Key> k = KeysArg("push", keys);
    py::array g = RowsArg("push", "grads", grads, k.size(), store_->Tables()[t].dim, false);
    const float* source = static_cast<const float*>(g.data());
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = store_->Push(worker, t, k, source);
    }
    Check(s);
  }

  // Runs a store call that returns a Status without the GIL.
  template <typename Fn>
  void Unlocked(Fn&& fn) {
    Status s;
    {
      py::gil_scoped_release unlocked;
      s = fn(*store_);
    }
    Check(s);
  }

  Clock CurrentClock(WorkerId worker) const { return Value(store_->CurrentClock(worker)); }
  py::dict Stats() const { return StatsDict(store_->Stats()); }
  std::vector<std::string> TableNames() const {
    std::vector<std::string> names;
    for (const TableOptions& t : store_->Tables()) names.push_back(t.name);
    return names;
  }
  uint32_t Dim(const py::handle& table) const { return store_->Tables()[TableArg(table)].dim; }

 private:
  std::unique_ptr<Store> store_;
};

void DefineTable(py::module_& m) {
  const TableOptions d;  // the C++ defaults become the keyword defaults
  const OptimizerOptions& o = d.optimizer;
  py::class_<TableOptions>(m, "Table",
                           "One embedding table: name, dimension, optimizer and initializer.")
      .def(
          py::init([](const std::string& name, uint32_t dim, const std::string& optimizer,
                      float learning_rate, float epsilon, float initial_accumulator, float beta1,
                      float beta2, float ftrl_alpha, float ftrl_beta, float ftrl_l1, float ftrl_l2,
                      const std::string& initializer, float init_scale, double device_rows_weight) {
            TableOptions t;
            t.name = name;
            t.dim = dim;
            t.optimizer.kind = OptimizerByName(optimizer);
            t.optimizer.learning_rate = learning_rate;
            t.optimizer.epsilon = epsilon;
            t.optimizer.initial_accumulator = initial_accumulator;
            t.optimizer.beta1 = beta1;
            t.optimizer.beta2 = beta2;
            t.optimizer.ftrl_alpha = ftrl_alpha;
            t.optimizer.ftrl_beta = ftrl_beta;
            t.optimizer.ftrl_l1 = ftrl_l1;
            t.optimizer.ftrl_l2 = ftrl_l2;
            t.initializer = InitializerByName(initializer);
            t.init_scale = init_scale;
            t.device_rows_weight = device_rows_weight;
            return t;
          }),
          py::arg("name"), py::kw_only(), py::arg("dim") = d.dim, py::arg("optimizer") = "adagrad",
          py::arg("learning_rate") = o.learning_rate, py::arg("epsilon") = o.epsilon,
          py::arg("initial_accumulator") = o.initial_accumulator, py::arg("beta1") = o.beta1,
          py::arg("beta2") = o.beta2, py::arg("ftrl_alpha") = o.ftrl_alpha,
          py::arg("ftrl_beta") = o.ftrl_beta, py::arg("ftrl_l1") = o.ftrl_l1,
          py::arg("ftrl_l2") = o.ftrl_l2, py::arg("initializer") = "uniform",
          py::arg("init_scale") = d.init_scale,
          py::arg("device_rows_weight") = d.device_rows_weight)
      .def_readonly("name", &TableOptions::name)
      .def_readonly("dim", &TableOptions::dim)
      .def("__repr__", [](const TableOptions& t) {
        return "strata.Table('" + t.name + "', dim=" + std::to_string(t.dim) + ")";
      });
}

void DefineStore(py::module_& m) {
  const StoreOptions d;
  py::class_<PyStore>(m, "Store",
                      "An open store (strata::Store): opens or creates `dir`, restoring its last "
                      "checkpoint. A context manager: leaving the block closes it.")
      .def(py::init([](const std::string& dir, const std::vector<TableOptions>& tables,
                       uint64_t device_rows_max, uint64_t dram_rows_max,
                       const std::string& ssd_backend, const std::string& fallback, bool use_gpu,
                       uint32_t io_threads, double device_share_growth_max,
                       uint32_t planner_round_us, const std::string& faults) {
             StoreOptions o;
             o.device_rows_max = device_rows_max;
             o.dram_rows_max = dram_rows_max;
             if (ssd_backend == "native") {
               o.ssd_backend = SsdBackend::kNative;
             } else if (ssd_backend == "rocksdb") {
               o.ssd_backend = SsdBackend::kRocksDb;
             } else {
               Raise(
                   Status::InvalidArgument("ssd_backend '" + ssd_backend + "': native or rocksdb"));
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
             return std::make_unique<PyStore>(dir, tables, o);
           }),
           py::arg("dir"), py::arg("tables"), py::kw_only(),
           py::arg("device_rows_max") = d.device_rows_max,
           py::arg("dram_rows_max") = d.dram_rows_max, py::arg("ssd_backend") = "native",
           py::arg("fallback") = "lru", py::arg("use_gpu") = d.use_gpu,
           py::arg("io_threads") = d.io_threads,
           py::arg("device_share_growth_max") = d.device_share_growth_max,
           py::arg("planner_round_us") = d.planner_round_us, py::arg("faults") = "")
      .def("register_worker", &PyStore::RegisterWorker, py::arg("device") = -1,
           "A new worker (clock 0, or its checkpointed clock); device -1 is the host.")
      .def("intent", &PyStore::Intent, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("start"), py::arg("end"),
           "Worker will access keys of table while its clock is in [start, end). Never waits "
           "on I/O.")
      .def("pull", &PyStore::Pull, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("out") = py::none(),
           "The embeddings of keys, shape (len(keys), dim), into `out` when given.")
      .def("push", &PyStore::Push, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("grads"),
           "Applies the table's optimizer to the rows of keys (duplicates summed first).")
      .def(
          "advance_clock",
          [](PyStore& s, WorkerId w) { s.Unlocked([w](Store& st) { return st.AdvanceClock(w); }); },
          py::arg("worker"))
      .def("current_clock", &PyStore::CurrentClock, py::arg("worker"))
      .def("drain_intents",
           [](PyStore& s) { s.Unlocked([](Store& st) { return st.DrainIntents(); }); })
      .def("checkpoint", [](PyStore& s) { s.Unlocked([](Store& st) { return st.Checkpoint(); }); })
      .def("close", [](PyStore& s) { s.Unlocked([](Store& st) { return st.Close(); }); })
      .def("stats", &PyStore::Stats, "The store's counters (StoreStats) as a dict.")
      .def_property_readonly("tables", &PyStore::TableNames)
      .def("dim", &PyStore::Dim, py::arg("table"))
      .def("__enter__", [](PyStore& s) -> PyStore& { return s; })
      .def("__exit__",
           [](PyStore& s, const py::args&) { s.Unlocked([](Store& st) { return st.Close(); }); });
}

}  // namespace
}  // namespace strata::python

PYBIND11_MODULE(_strata, m) {
  m.doc() = "Strata's Store (include/strata/store.h); use the strata package.";
  m.attr("__version__") = strata::Version();
  m.def("build_info", &strata::BuildInfo, "The build: version, CUDA, compiler.");
  strata::python::DefineTable(m);
  strata::python::DefineStore(m);
}
