"""strata.distributed: the store sharded over a torch.distributed process
group, for programs started by torchrun.

    import torch.distributed as dist, strata, strata.distributed
    dist.init_process_group("gloo")          # torchrun sets RANK, WORLD_SIZE, ...
    cluster = strata.distributed.Cluster("/data/store", tables)
    ebc = strata.torch.EmbeddingBagCollection(cluster, cluster.register_worker(), ["ads"])

Cluster(dir, tables, group=None, **options) is a strata.Cluster whose
collectives run on `group` (the default group when None) through
torch.distributed: the same cluster code as under mpirun, so the same owner
of each key (strata.cluster_owner, "splitmix64-table-key-v1"), the same
shards dir/rank-<r>, the same cluster manifest dir/CLUSTER, the same
checkpoints. A directory written by an MPI cluster of R ranks reopens under
torchrun with R processes and the other way round; at another world size
Open raises strata.InvalidArgument naming both. Keys, rows and gradients go
to their owners by all_to_all_single; the control plane is all_gather,
broadcast and all_reduce. Every call that is collective for strata.Cluster
(register_worker, pull, push, advance_clock, drain_intents, checkpoint,
summed_stats, close) is collective over the group: every rank calls it, in
the same order.

Backends: gloo runs the collectives on the host buffers in place. NCCL
needs CUDA tensors, so each collective copies its host buffers to the
current CUDA device and back; the shards' rows stay in host memory either
way (t0_on_gpu is False). A pipeline whose default group is NCCL may pass a
gloo group for the store instead: dist.new_group(backend="gloo").
The process group's timeout (init_process_group(timeout=...)) bounds every
collective; collective_timeout_ms is not used in this form.
"""
import os

import torch
import torch.distributed as dist

from . import _strata

__all__ = ["Cluster", "cluster_owner"]

cluster_owner = _strata.cluster_owner


def _global_rank(group, rank):
    """The global rank of `rank` of `group` (broadcast's src is global)."""
    if group is None:
        return rank
    get = getattr(dist, "get_global_rank", None)
    if get is None:  # torch < 2.0
        from torch.distributed import distributed_c10d
        get = distributed_c10d._get_global_rank
    return get(group, rank)


class _Collectives:
    """The collectives strata.Cluster runs (python/torch_comm.h), on the
    host buffers it hands over as memoryviews, over `group`."""

    def __init__(self, group):
        self.group = group
        self.nccl = dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.nccl \
            else torch.device("cpu")

    def rank(self):
        return dist.get_rank(self.group)

    def size(self):
        return dist.get_world_size(self.group)

    @staticmethod
    def _host(view, dtype=torch.uint8):
        if len(view) == 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(view, dtype=dtype)

    def _run(self, out, inp, fn):
        """fn(out, inp) on the group's device: the host tensors themselves
        on gloo; on NCCL, device copies, `out`'s copied back."""
        if not self.nccl:
            fn(out, inp)
            return
        out_device = out.to(self.device)
        inp_device = out_device if inp is out else inp.to(self.device)
        fn(out_device, inp_device)
        out.copy_(out_device)

    def all_to_all(self, send, send_bytes, recv, recv_bytes):
        def run(out, inp):
            dist.all_to_all_single(out, inp, output_split_sizes=recv_bytes,
                                   input_split_sizes=send_bytes, group=self.group)
        self._run(self._host(recv), self._host(send), run)

    def all_gather(self, send, recv):
        size = self.size()

        def run(out, inp):
            dist.all_gather(list(out.view(size, -1).unbind(0)), inp, group=self.group)
        self._run(self._host(recv), self._host(send), run)

    def broadcast(self, data, root):
        src = _global_rank(self.group, root)
        data = self._host(data)
        self._run(data, data, lambda t, _: dist.broadcast(t, src=src, group=self.group))

    def all_reduce_sum(self, send, recv):
        out = self._host(recv, torch.int64)  # uint64 sums wrap as int64's do
        out.copy_(self._host(send, torch.int64))
        self._run(out, out, lambda t, _: dist.all_reduce(t, group=self.group))


def Cluster(dir, tables, group=None, **options):  # noqa: N802 - a class to its callers
    """A strata.Cluster over `group` (see the module's docstring). `options`
    are strata.Cluster's keywords (device_rows_max, dram_rows_max,
    ssd_backend, ...)."""
    if not dist.is_available():
        raise RuntimeError("strata.distributed: this torch has no torch.distributed")
    if not dist.is_initialized():
        raise RuntimeError("strata.distributed: call torch.distributed.init_process_group first "
                           "(torchrun sets MASTER_ADDR, RANK and WORLD_SIZE for it)")
    if not hasattr(_strata, "Cluster"):
        raise RuntimeError("strata.distributed: this build of strata has no cluster (it is "
                           "built with MPI: STRATA_MPI)")
    if "comm" in options:
        raise TypeError("strata.distributed.Cluster: comm is the process group's; pass group=")
    return _strata.Cluster(os.fspath(dir), tables, comm=_Collectives(group), **options)

