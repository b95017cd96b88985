// What strata.export and strata.distributed read beside a store: a table's
// rows streamed in chunks (ScanChunks, used by Store.scan and Cluster.scan),
// the cluster's owner function (cluster_owner) and its manifest
// (read_cluster_manifest). The owner and the manifest need no MPI.
#include "export_module.h"

#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cluster/manifest.h"
#include "io/env.h"
#include "kernels/optimizer.h"
#include "strata/cluster_owner.h"

namespace strata::python {

namespace {

// A new NumPy array of `shape` and `dtype`, and its data. Made by
// numpy.empty and reached through the buffer protocol: pybind11's own array
// construction reads dtype fields whose layout NumPy 2 changed (a uint64
// array came out with every element the first).
py::object NewArray(const std::vector<size_t>& shape, const char* dtype, void** data) {
  py::object a = py::module_::import("numpy").attr("empty")(py::tuple(py::cast(shape)), dtype);
  *data = py::reinterpret_borrow<py::buffer>(a).request(/*writable=*/true).ptr;
  return a;
}

// The same, holding a copy of `bytes` bytes at `from`.
py::object Filled(const void* from, size_t bytes, const std::vector<size_t>& shape,
                  const char* dtype) {
  void* data = nullptr;
  py::object a = NewArray(shape, dtype, &data);
  std::memcpy(data, from, bytes);
  return a;
}

}  // namespace

void ScanChunks(Store& store, TableId table, const py::object& fn, uint64_t chunk_rows) {
  if (chunk_rows == 0) throw py::value_error("scan: chunk_rows must be at least 1");
  const uint32_t dim = store.Tables()[table].dim;
  std::vector<Key> keys;
  std::vector<float> rows;
  keys.reserve(chunk_rows);
  rows.reserve(chunk_rows * dim);
  bool raised = false;
  // Hands the chunk to fn (as NumPy copies, so fn may keep them) under the
  // GIL; a Python exception stops the scan and is raised after it.
  auto flush = [&]() -> Status {
    if (keys.empty()) return Status::Ok();
    py::gil_scoped_acquire locked;
    try {
      const py::object k = Filled(keys.data(), keys.size() * sizeof(Key), {keys.size()}, "uint64");
      const py::object r =
          Filled(rows.data(), rows.size() * sizeof(float), {keys.size(), dim}, "float32");
      fn(k, r);
    } catch (py::error_already_set&) {
      raised = true;
      return Status::Internal("scan: the chunk function raised");
    }
    keys.clear();
    rows.clear();
    return Status::Ok();
  };
  Status s;
  std::optional<py::error_already_set> error;
  {
    py::gil_scoped_release unlocked;
    s = store.ScanTable(table, [&](Key key, std::span<const float> row) -> Status {
      keys.push_back(key);
      rows.insert(rows.end(), row.begin(), row.end());
      return keys.size() == chunk_rows ? flush() : Status::Ok();
    });
    if (s.ok()) s = flush();
  }
  if (raised) throw py::error_already_set();
  Check(s);
}

namespace {

py::object Owners(uint32_t table, const py::handle& keys, uint32_t world_size) {
  if (world_size == 0) throw py::value_error("cluster_owner: world_size must be at least 1");
  const ArrayView k = KeysArg("cluster_owner", keys);
  const std::span<const Key> span = KeySpan(k);
  void* data = nullptr;
  py::object out = NewArray({span.size()}, "uint32", &data);
  uint32_t* o = static_cast<uint32_t*>(data);
  for (size_t i = 0; i < span.size(); ++i) o[i] = ClusterOwner(table, span[i], world_size);
  return out;
}

py::object ReadManifest(const std::string& dir) {
  io::Env* env = io::Env::Default();
  std::optional<std::string> text = Value(cluster::ReadSmallFile(env, dir, cluster::kManifestName));
  if (!text.has_value()) return py::none();
  const cluster::ClusterManifest m =
      Value(cluster::DecodeClusterManifest(*text, dir + "/" + cluster::kManifestName));
  py::dict d;
  d["version"] = m.version;
  d["world_size"] = m.world_size;
  d["ownership"] = m.ownership;
  d["generation"] = m.generation;
  d["rank_generations"] = m.rank_generations;
  d["ssd_backend"] = m.ssd_backend == SsdBackend::kRocksDb ? "rocksdb" : "native";
  py::list tables;
  for (const cluster::ManifestTable& t : m.tables) {
    py::dict table;
    table["name"] = t.name;
    table["dim"] = t.dim;
    table["optimizer"] = kernels::OptimizerName(t.optimizer);
    tables.append(table);
  }
  d["tables"] = tables;
  return d;
}

}  // namespace

void DefineExport(py::module_& m) {
  m.attr("cluster_ownership") = kClusterOwnershipName;
  m.def("cluster_owner", &Owners, py::arg("table"), py::arg("keys"), py::arg("world_size"),
        "The owner rank of each key of table `table` (its index) in a cluster of world_size "
        "ranks: the function strata.Cluster places rows by (strata::ClusterOwner).");
  m.def("read_cluster_manifest", &ReadManifest, py::arg("dir"),
        "The cluster manifest dir/CLUSTER as a dict (world_size, ownership, generation, "
        "rank_generations, ssd_backend, tables), or None when dir has none.");
}

}  // namespace strata::python
