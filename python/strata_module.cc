// strata._strata: the Store of include/strata/store.h for Python (pybind11).
// python/strata/__init__.py re-exports it; docs/python.md is the guide.
//
// Arrays (arrays.h): keys are 1-D uint64 or int64 arrays on the host, rows
// and gradients C-contiguous float32 of shape (len(keys), dim), on the host
// or, when T0 is on a GPU, in CUDA device memory; NumPy arrays or any
// DLPack tensor (PyTorch's), used in place (no copy). Anything else is a
// TypeError naming the call, the argument and what was expected. On a GPU,
// pull and push run on the caller's stream (`stream=`, a cudaStream_t).
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

#include "arrays.h"
#include "export_module.h"
#if STRATA_HAVE_MPI
#include "cluster_module.h"
#endif
#include "module_common.h"
#include "strata/store.h"
#include "strata/version.h"

namespace py = pybind11;

namespace strata::python {
namespace {

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
    dir_ = dir;
    rows_place_ = store_->Stats().t0_on_gpu ? Place::kCuda : Place::kHost;
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
    return TableIndexArg(table, store_->Tables());
  }

  void Intent(WorkerId worker, const py::handle& table, const py::handle& keys, Clock start,
              Clock end) {
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("intent", keys);
    CallUnlocked([&] { return store_->Intent(worker, t, KeySpan(k), start, end); });
  }

  // Rows or gradients of a call: float32 (n, dim), in device memory when T0
  // is on a GPU, on the host otherwise.
  Want RowsWant(TableId table, const ArrayView& keys, bool writable) const {
    Want want;
    want.rows = keys.rows();
    want.cols = store_->Tables()[table].dim;
    want.writable = writable;
    want.place = rows_place_;
    return want;
  }

  py::object Pull(WorkerId worker, const py::handle& table, const py::handle& keys,
                  const py::object& out, intptr_t stream) {
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("pull", keys);
    const Want want = RowsWant(t, k, /*writable=*/true);
    ArrayView rows;
    if (out.is_none()) {
      if (rows_place_ == Place::kCuda) {
        throw py::type_error(
            "pull: this store's T0 is on a GPU, so its rows go to device memory: "
            "pass out=, " +
            Expected(want));
      }
      rows = View("pull", "out", py::array_t<float>({want.rows, want.cols}), want, stream);
    } else {
      rows = View("pull", "out", out, want, stream);
    }
    CallUnlocked([&] {
      return store_->Pull(worker, t, KeySpan(k), static_cast<float*>(rows.data()),
                          reinterpret_cast<void*>(stream));
    });
    return rows.object();
  }

  void Push(WorkerId worker, const py::handle& table, const py::handle& keys,
            const py::handle& grads, intptr_t stream) {
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("push", keys);
    const ArrayView g = View("push", "grads", grads, RowsWant(t, k, /*writable=*/false), stream);
    CallUnlocked([&] {
      return store_->Push(worker, t, KeySpan(k), static_cast<const float*>(g.data()),
                          reinterpret_cast<void*>(stream));
    });
  }

  // Runs a store call that returns a Status without the GIL.
  template <typename Fn>
  void Unlocked(Fn&& fn) {
    CallUnlocked([&] { return fn(*store_); });
  }

  Clock CurrentClock(WorkerId worker) const { return Value(store_->CurrentClock(worker)); }
  py::dict Stats() const { return StatsDict(store_->Stats()); }
  std::vector<std::string> TableNames() const {
    std::vector<std::string> names;
    for (const TableOptions& t : store_->Tables()) names.push_back(t.name);
    return names;
  }
  uint32_t Dim(const py::handle& table) const { return store_->Tables()[TableArg(table)].dim; }
  bool T0OnGpu() const { return rows_place_ == Place::kCuda; }
  const std::string& Dir() const { return dir_; }
  void Scan(const py::handle& table, const py::object& fn, uint64_t chunk_rows) {
    ScanChunks(*store_, TableArg(table), fn, chunk_rows);
  }

 private:
  std::unique_ptr<Store> store_;
  std::string dir_;                  // as opened
  Place rows_place_ = Place::kHost;  // where Pull's out and Push's grads live
};

void DefineTable(py::module_& m) {
  const TableOptions d;  // the C++ defaults become the keyword defaults
  const OptimizerOptions& o = d.optimizer;
  py::class_<TableOptions>(m, "Table",
                           "One embedding table: name, dimension, optimizer and initializer.")
      .def(py::init([](const std::string& name, uint32_t dim, const std::string& optimizer,
                       float learning_rate, float epsilon, float initial_accumulator, float beta1,
                       float beta2, float ftrl_alpha, float ftrl_beta, float ftrl_l1, float ftrl_l2,
                       const std::string& initializer, float init_scale, double device_rows_weight,
                       bool refuse_nonfinite_grads, uint64_t expected_rows) {
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
             t.refuse_nonfinite_grads = refuse_nonfinite_grads;
             t.expected_rows = expected_rows;
             return t;
           }),
           py::arg("name"), py::kw_only(), py::arg("dim") = d.dim, py::arg("optimizer") = "adagrad",
           py::arg("learning_rate") = o.learning_rate, py::arg("epsilon") = o.epsilon,
           py::arg("initial_accumulator") = o.initial_accumulator, py::arg("beta1") = o.beta1,
           py::arg("beta2") = o.beta2, py::arg("ftrl_alpha") = o.ftrl_alpha,
           py::arg("ftrl_beta") = o.ftrl_beta, py::arg("ftrl_l1") = o.ftrl_l1,
           py::arg("ftrl_l2") = o.ftrl_l2, py::arg("initializer") = "uniform",
           py::arg("init_scale") = d.init_scale,
           py::arg("device_rows_weight") = d.device_rows_weight,
           py::arg("refuse_nonfinite_grads") = d.refuse_nonfinite_grads,
           py::arg("expected_rows") = d.expected_rows)
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
             const StoreOptions o =
                 StoreOptionsOf(device_rows_max, dram_rows_max, ssd_backend, fallback, use_gpu,
                                io_threads, device_share_growth_max, planner_round_us, faults);
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
           py::arg("out") = py::none(), py::kw_only(), py::arg("stream") = 0,
           "The embeddings of keys, shape (len(keys), dim), into `out` when given (required, "
           "in device memory, when T0 is on a GPU). stream: the caller's cudaStream_t as an "
           "int (0: the default stream).")
      .def("push", &PyStore::Push, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("grads"), py::kw_only(), py::arg("stream") = 0,
           "Applies the table's optimizer to the rows of keys (duplicates summed first).")
      .def_property_readonly(
          "t0_on_gpu", [](const PyStore& s) { return s.T0OnGpu(); },
          "Whether T0 is on a GPU: pull's out and push's grads are then device memory.")
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
      .def("scan", &PyStore::Scan, py::arg("table"), py::arg("fn"), py::arg("chunk_rows") = 65536,
           "Calls fn(keys, rows) for chunks of at most chunk_rows rows of the table, every row "
           "in any tier once (uint64 (n,) and float32 (n, dim) arrays). Holds the table's lock: "
           "for export, not for the training loop (strata.export.rows streams it).")
      .def_property_readonly("tables", &PyStore::TableNames)
      .def_property_readonly("dir", &PyStore::Dir, "The store's directory, as opened.")
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
  strata::python::DefineExport(m);
#if STRATA_HAVE_MPI
  strata::python::DefineCluster(m);
#endif
}
