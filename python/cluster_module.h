// strata.Cluster (cluster_module.cc), defined when the build has MPI.
#pragma once

#include <pybind11/pybind11.h>

namespace strata::python {

void DefineCluster(pybind11::module_& m);

}  // namespace strata::python
