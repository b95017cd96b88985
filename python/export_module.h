// Streaming a table's rows to Python, and the cluster files a Python
// program reads (export_module.cc). REQUIRES: the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "module_common.h"
#include "strata/store.h"

namespace strata::python {

// Calls fn(keys, rows) for every chunk of at most chunk_rows rows of
// `table` (uint64 (n,) and float32 (n, dim) NumPy arrays, fn's to keep),
// every row once, in no particular order. The scan holds the table's lock
// (Store::ScanTable): not for the training loop. A failed scan raises; an
// exception of fn stops the scan and is raised.
void ScanChunks(Store& store, TableId table, const pybind11::object& fn, uint64_t chunk_rows);

// cluster_owner, cluster_ownership and read_cluster_manifest.
void DefineExport(pybind11::module_& m);

}  // namespace strata::python
