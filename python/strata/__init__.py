"""Strata from Python: embedding tables with their optimizer state across
GPU memory, host memory and NVMe SSD, with intents that move rows up the
tiers before a batch needs them (docs/python.md).

    import numpy as np, strata
    tables = [strata.Table("ads", dim=16, optimizer="adagrad")]
    with strata.Store("/tmp/store", tables, use_gpu=False) as store:
        w = store.register_worker()
        keys = np.array([3, 7, 7], dtype=np.uint64)
        store.intent(w, "ads", keys, start=0, end=1)
        rows = store.pull(w, "ads", keys)      # (3, 16) float32
        store.push(w, "ads", keys, np.ones_like(rows))
        store.advance_clock(w)
        store.checkpoint()

Keys are 1-D uint64 or int64 arrays on the host, rows and gradients
C-contiguous float32 arrays of shape (len(keys), dim), on the host or, when
the store's T0 is on a GPU (store.t0_on_gpu), in CUDA device memory: NumPy
arrays or any DLPack tensor (PyTorch's), used in place; other arrays are a
TypeError naming what was expected. Every call that may wait releases the GIL. Errors
are the exceptions of strata._errors (strata.InvalidArgument, ...).
"""
from ._errors import (  # noqa: F401
    Corruption,
    Error,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    IOError,
    NotFound,
    ResourceExhausted,
    Unavailable,
)


def _load_wheel_nccl():
    """Loads the NCCL of NVIDIA's PyPI wheel (nvidia/nccl, which PyPI's torch
    depends on) when it is installed. A build with NCCL links libnccl.so.2
    (the cluster's NCCL form); the dynamic loader keeps one library per
    soname, so the first NCCL loaded serves the module and torch alike. The
    system's can be older than the wheel's and lack symbols that torch
    needs, which broke `import strata` before `import torch`; the wheel's
    first makes the order free (torch first already loaded the wheel's)."""
    import ctypes
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "nccl", "lib", "libnccl.so.2")
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return


_load_wheel_nccl()
from . import _strata  # noqa: E402
from ._strata import Store, Table, __version__, build_info  # noqa: F401,E402
# The cluster's owner function and manifest (docs/cluster.md), for tools and
# checks beside strata.Cluster and strata.distributed.
from ._strata import cluster_owner, cluster_ownership, read_cluster_manifest  # noqa: F401,E402

# strata.Cluster (a store sharded across MPI ranks) exists when the build
# has MPI.
if hasattr(_strata, "Cluster"):
    Cluster = _strata.Cluster

__all__ = [
    "Store", "Table", "Error", "InvalidArgument", "NotFound", "IOError", "Corruption",
    "ResourceExhausted", "FailedPrecondition", "Unavailable", "Internal", "build_info",
    "cluster_owner", "cluster_ownership", "read_cluster_manifest",
] + (["Cluster"] if hasattr(_strata, "Cluster") else [])
