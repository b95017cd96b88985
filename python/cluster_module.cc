// strata.Cluster: strata::Cluster (include/strata/cluster.h) over
// MPI_COMM_WORLD for Python programs started by mpirun, or over a
// torch.distributed process group (comm=, a strata.distributed collectives
// object: torch_comm.h) for programs started by torchrun; the same cluster
// code, owners, shard layout and manifest either way. Built when the
// project is built with MPI (STRATA_HAVE_MPI).
//
// MPI: the first Cluster without comm= initializes MPI (MPI_THREAD_SERIALIZED) unless the
// program already did (mpi4py, say); the module then finalizes it at
// interpreter exit, after closing the clusters still open (Close is
// collective: every rank reaches exit the same way). Arrays are host memory
// (the MPI form's shards keep T0 in host memory), as for a host Store.
// Thread safety: the Cluster's (collective calls serialized per rank, one
// thread driving them); the GIL is released during every call into it.
#include "cluster_module.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_impl.h"
#include "export_module.h"
#include "io/env.h"
#include "module_common.h"
#include "strata/cluster.h"
#include "torch_comm.h"

namespace strata::python {
namespace {

class PyCluster;

// The clusters not yet closed, closed at exit before MPI_Finalize.
std::set<PyCluster*>& OpenClusters() {
  static std::set<PyCluster*> open;
  return open;
}

bool g_mpi_ours = false;  // this module called MPI_Init_thread

void FinalizeAtExit();

void EnsureMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    Raise(
        Status::Unavailable("strata.Cluster: MPI_Init_thread failed (start the program with "
                            "mpirun)"));
  }
  g_mpi_ours = true;
  py::module_::import("atexit").attr("register")(py::cpp_function(&FinalizeAtExit));
}

class PyCluster {
 public:
  // Over MPI_COMM_WORLD when `comm` is None, else over its collectives
  // (TorchComm).
  PyCluster(const ClusterOptions& options, const std::vector<TableOptions>& tables,
            const py::object& comm) {
    std::unique_ptr<TorchComm> torch_comm;
    if (comm.is_none()) {
      EnsureMpi();
    } else {
      torch_comm = TorchComm::Create(comm);
    }
    Result<std::unique_ptr<Cluster>> opened = Status::Internal("not opened");
    {
      py::gil_scoped_release unlocked;
      opened = torch_comm == nullptr
                   ? Cluster::Open(options, tables, MPI_COMM_WORLD)
                   : cluster::ClusterImpl::Open(options, tables, std::move(torch_comm),
                                                io::Env::Default());
    }
    cluster_ = Value(std::move(opened));
    dir_ = options.store.dir;
    OpenClusters().insert(this);
  }
  PyCluster(const PyCluster&) = delete;
  PyCluster& operator=(const PyCluster&) = delete;
  ~PyCluster() { OpenClusters().erase(this); }

  TableId TableArg(const py::handle& table) const {
    const std::vector<TableOptions>& tables = cluster_->Tables();
    if (py::isinstance<py::str>(table)) {
      const std::string name = table.cast<std::string>();
      for (size_t i = 0; i < tables.size(); ++i) {
        if (tables[i].name == name) return static_cast<TableId>(i);
      }
      Raise(Status::NotFound("strata.Cluster rank " + std::to_string(cluster_->rank()) +
                             ": no table named '" + name + "'"));
    }
    return TableIndexArg(table, tables);
  }

  Want RowsWant(TableId table, const ArrayView& keys, bool writable) const {
    Want want;
    want.rows = keys.rows();
    want.cols = cluster_->Tables()[table].dim;
    want.writable = writable;
    return want;
  }

  template <typename Fn>
  void Unlocked(Fn&& fn) {
    CallUnlocked([&] { return fn(*cluster_); });
  }

  // The Python form's shards keep T0 in host memory: a call takes stream 0
  // (as strata.Store's host form does), anything else is refused.
  static void HostStream(const char* call, intptr_t stream) {
    if (stream != 0) {
      throw py::value_error(std::string("strata.Cluster.") + call +
                            ": the shards' rows are in host memory; stream must be 0");
    }
  }

  WorkerId RegisterWorker() {
    Result<WorkerId> r = Status::Internal("not registered");
    {
      py::gil_scoped_release unlocked;
      r = cluster_->RegisterWorker();
    }
    return Value(std::move(r));
  }

  void Intent(WorkerId worker, const py::handle& table, const py::handle& keys, Clock start,
              Clock end) {
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("intent", keys);
    Unlocked([&](Cluster& c) { return c.Intent(worker, t, KeySpan(k), start, end); });
  }

  py::object Pull(WorkerId worker, const py::handle& table, const py::handle& keys,
                  const py::object& out, intptr_t stream) {
    HostStream("pull", stream);
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("pull", keys);
    const Want want = RowsWant(t, k, /*writable=*/true);
    const py::object target =
        out.is_none() ? py::object(py::array_t<float>({want.rows, want.cols})) : out;
    const ArrayView rows = View("pull", "out", target, want, /*stream=*/0);
    Unlocked([&](Cluster& c) {
      return c.Pull(worker, t, KeySpan(k), static_cast<float*>(rows.data()));
    });
    return rows.object();
  }

  void Push(WorkerId worker, const py::handle& table, const py::handle& keys,
            const py::handle& grads, intptr_t stream) {
    HostStream("push", stream);
    const TableId t = TableArg(table);
    const ArrayView k = KeysArg("push", keys);
    const ArrayView g = View("push", "grads", grads, RowsWant(t, k, /*writable=*/false), 0);
    Unlocked([&](Cluster& c) {
      return c.Push(worker, t, KeySpan(k), static_cast<const float*>(g.data()));
    });
  }

  // Collective; a second close does nothing (as leaving a `with` block
  // after close() must not fail).
  void Close() {
    if (closed_) return;
    Unlocked([](Cluster& c) { return c.Close(); });
    closed_ = true;
    OpenClusters().erase(this);
  }

  Cluster& cluster() { return *cluster_; }
  const std::string& dir() const { return dir_; }

 private:
  std::unique_ptr<Cluster> cluster_;
  std::string dir_;  // as opened
  bool closed_ = false;
};

py::dict ExchangeDict(const ClusterExchangeStats& e) {
  py::dict d;
  d["pull_calls"] = e.pull_calls;
  d["push_calls"] = e.push_calls;
  d["keys_sent"] = e.keys_sent;
  d["keys_served"] = e.keys_served;
  d["bytes_sent"] = e.bytes_sent;
  d["bytes_received"] = e.bytes_received;
  d["intents_sent"] = e.intents_sent;
  d["exchange_us"] = e.exchange_us;
  d["exchange_calls"] = e.exchange_calls;
  return d;
}

py::dict ClusterStatsDict(const ClusterStats& s) {
  py::dict d = StatsDict(s.store);
  d["exchange"] = ExchangeDict(s.exchange);
  return d;
}

void FinalizeAtExit() {
  // Copies: Close erases from the set.
  const std::vector<PyCluster*> open(OpenClusters().begin(), OpenClusters().end());
  for (PyCluster* c : open) {
    py::gil_scoped_release unlocked;
    (void)c->cluster().Close();  // at exit: nobody is left to tell
    OpenClusters().erase(c);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_mpi_ours && finalized == 0) MPI_Finalize();
}

}  // namespace

void DefineCluster(py::module_& m) {
  const StoreOptions d;
  const ClusterOptions cd;
  py::class_<PyCluster>(
      m, "Cluster",
      "A store sharded across the ranks of MPI_COMM_WORLD, or of a torch.distributed process "
      "group with comm= (strata.distributed.Cluster makes one) (strata::Cluster): one per rank, "
      "rank r's shard in dir/rank-<r>. register_worker, pull, push, advance_clock, drain_intents, "
      "checkpoint, summed_stats and close are collective (every rank, same order). A context "
      "manager: leaving the block closes it.")
      .def(py::init([](const std::string& dir, const std::vector<TableOptions>& tables,
                       uint64_t device_rows_max, uint64_t dram_rows_max,
                       const std::string& ssd_backend, const std::string& fallback,
                       uint32_t io_threads, uint32_t planner_round_us, const std::string& faults,
                       uint64_t collective_timeout_ms, const py::object& comm) {
             ClusterOptions o;
             o.store =
                 StoreOptionsOf(device_rows_max, dram_rows_max, ssd_backend, fallback,
                                /*use_gpu=*/false, io_threads,
                                StoreOptions{}.device_share_growth_max, planner_round_us, faults);
             o.store.dir = dir;
             o.collective_timeout_ms = collective_timeout_ms;
             return std::make_unique<PyCluster>(o, tables, comm);
           }),
           py::arg("dir"), py::arg("tables"), py::kw_only(),
           py::arg("device_rows_max") = d.device_rows_max,
           py::arg("dram_rows_max") = d.dram_rows_max, py::arg("ssd_backend") = "native",
           py::arg("fallback") = "lru", py::arg("io_threads") = d.io_threads,
           py::arg("planner_round_us") = d.planner_round_us, py::arg("faults") = "",
           py::arg("collective_timeout_ms") = cd.collective_timeout_ms,
           py::arg("comm") = py::none())
      .def_property_readonly("rank", [](PyCluster& c) { return c.cluster().rank(); })
      .def_property_readonly("world_size", [](PyCluster& c) { return c.cluster().world_size(); })
      .def_property_readonly(
          "dir", [](PyCluster& c) { return c.dir(); },
          "The cluster's directory (rank r's shard in dir/rank-<r>), as opened.")
      .def_property_readonly(
          "t0_on_gpu", [](PyCluster&) { return false; },
          "False: the shards' T0 is in host memory, so pull's out and push's grads are too.")
      .def("register_worker", &PyCluster::RegisterWorker,
           "Collective: a new worker, the same id on every rank.")
      .def("intent", &PyCluster::Intent, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("start"), py::arg("end"),
           "Local: queues keys for their owners, delivered by the next advance_clock or "
           "drain_intents.")
      .def("pull", &PyCluster::Pull, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("out") = py::none(), py::kw_only(), py::arg("stream") = 0,
           "Collective: this rank's keys' embeddings, (len(keys), dim) float32, from their "
           "owners.")
      .def("push", &PyCluster::Push, py::arg("worker"), py::arg("table"), py::arg("keys"),
           py::arg("grads"), py::kw_only(), py::arg("stream") = 0,
           "Collective: gradients to the owners, which sum every rank's and step once per key.")
      .def(
          "advance_clock",
          [](PyCluster& c, WorkerId w) {
            c.Unlocked([w](Cluster& cl) { return cl.AdvanceClock(w); });
          },
          py::arg("worker"))
      .def(
          "current_clock",
          [](PyCluster& c, WorkerId w) { return Value(c.cluster().CurrentClock(w)); },
          py::arg("worker"))
      .def("drain_intents",
           [](PyCluster& c) { c.Unlocked([](Cluster& cl) { return cl.DrainIntents(); }); })
      .def("checkpoint",
           [](PyCluster& c) { c.Unlocked([](Cluster& cl) { return cl.Checkpoint(); }); })
      .def("close", &PyCluster::Close)
      .def(
          "scan",
          [](PyCluster& c, const py::handle& t, const py::object& fn, uint64_t chunk_rows) {
            ScanChunks(c.cluster().shard(), c.TableArg(t), fn, chunk_rows);
          },
          py::arg("table"), py::arg("fn"), py::arg("chunk_rows") = 65536,
          "Local: Store.scan over this rank's shard, the rows this rank owns.")
      .def(
          "stats", [](PyCluster& c) { return ClusterStatsDict(c.cluster().Stats()); },
          "This rank's counters: the shard's StoreStats and 'exchange'.")
      .def(
          "summed_stats",
          [](PyCluster& c) {
            Result<ClusterStats> r = Status::Internal("not summed");
            {
              py::gil_scoped_release unlocked;
              r = c.cluster().SummedStats();
            }
            return ClusterStatsDict(Value(std::move(r)));
          },
          "Collective: every rank's counters summed.")
      .def_property_readonly("tables",
                             [](PyCluster& c) {
                               std::vector<std::string> names;
                               for (const TableOptions& t : c.cluster().Tables()) {
                                 names.push_back(t.name);
                               }
                               return names;
                             })
      .def(
          "dim",
          [](PyCluster& c, const py::handle& t) { return c.cluster().Tables()[c.TableArg(t)].dim; },
          py::arg("table"))
      .def("__enter__", [](PyCluster& c) -> PyCluster& { return c; })
      .def("__exit__", [](PyCluster& c, const py::args&) { c.Close(); });
}

}  // namespace strata::python
