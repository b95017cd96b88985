"""strata.torch: embedding bags over a strata.Store for PyTorch, and a loader
wrapper that signals each batch's keys as intents ahead of the trainer.

EmbeddingBagCollection(store, worker, tables, mode="sum") is an nn.Module
with no parameters for the tables: forward pulls the rows of each table's
distinct keys from the store and pools them per sample (sum or mean,
optional per-sample weights); backward computes each distinct key's
gradient and pushes it, and the store's fused optimizer (the table's
optimizer, e.g. SGD or AdaGrad) applies it where the row lives. Dense
layers around it train with a torch optimizer as usual.

    ebc = strata.torch.EmbeddingBagCollection(store, w, ["user", "ad"])
    for batch in strata.torch.IntentLoader(batches, store, w, keys_of, lookahead=4):
        pooled = ebc({"user": (keys, offsets), "ad": (keys, offsets, weights)})
        loss = loss_fn(mlp(torch.cat([pooled["user"], pooled["ad"]], 1)), batch.labels)
        loss.backward()          # pushes the tables' gradients
        dense_optimizer.step()

Keys are 1-D int64 or int32 tensors (an id is its 64-bit pattern) and
offsets 1-D int64 or int32 tensors of each sample's first key, or with
include_last_offset=True one more, the number of keys (nn.EmbeddingBag's
two conventions); they are checked, and B+1 offsets under the first
convention are refused rather than read as an extra empty bag. A table is
looked up once per training step (its backward's Push is the optimizer's
step): a second lookup before the first one's backward is refused. When the
store's T0 is on a GPU (store.t0_on_gpu), the rows are pulled straight into
CUDA tensors and the gradients pushed from them on the current CUDA stream
(no host copy); the pooled outputs are then on that device. Otherwise
everything stays on the CPU.

The store may be a strata.Store or a sharded one, a strata.Cluster
(strata.distributed.Cluster under torchrun): on a cluster every rank runs
the same forwards and backwards, whose pulls and pushes are collective.

state_dict() holds no rows: its "_extra_state" checkpoints the store
(collective on a cluster: every rank calls state_dict) and names that
checkpoint (directory, cluster generation, the worker's clock, tables);
load_state_dict() checks that the module's store is at that checkpoint
(reopen the directory to go back to it) and raises ValueError naming what
differs. table_rows(store, table) streams a table's rows as tensors for
those who need them.
"""
import os
import queue
import threading
import weakref
from collections import deque

import torch
import torch.nn.functional as F

__all__ = ["EmbeddingBagCollection", "IntentLoader", "table_rows"]

_INTEGER_DTYPES = (torch.int32, torch.int64)


def _describe(x):
    if isinstance(x, torch.Tensor):
        return "tensor of %s with shape %s" % (x.dtype, tuple(x.shape))
    return type(x).__name__


def _check_keys(keys):
    if not isinstance(keys, torch.Tensor) or keys.dim() != 1 or keys.dtype not in _INTEGER_DTYPES:
        raise TypeError("strata.torch: keys must be a 1-D int64 or int32 tensor (got %s)"
                        % _describe(keys))


def _host_keys(keys):
    """The keys as a C-contiguous CPU int64 tensor: the store reads keys on
    the host. int32 ids are widened (a negative id sign-extends, as torch's
    int64 conversion does)."""
    _check_keys(keys)
    return keys.detach().to(device="cpu", dtype=torch.int64).contiguous()


def _check_offsets(offsets, keys_count, include_last_offset, what="offsets"):
    """Checks bag offsets as nn.EmbeddingBag reads them and returns the
    number of bags. Without include_last_offset there is one offset per bag
    (its first key) and the last bag may not be empty: a last offset equal
    to the number of keys is what B+1 offsets look like, so it is refused
    rather than read as an extra, empty bag."""
    if not isinstance(offsets, torch.Tensor) or offsets.dim() != 1 \
            or offsets.dtype not in _INTEGER_DTYPES:
        raise TypeError("strata.torch: %s must be a 1-D int64 or int32 tensor (got %s)"
                        % (what, _describe(offsets)))
    n = offsets.numel()
    if n < (2 if include_last_offset else 1):
        raise ValueError("strata.torch: %s has %d entries: at least %d with include_last_offset=%s"
                         % (what, n, 2 if include_last_offset else 1, include_last_offset))
    host = offsets.detach().to("cpu")
    if int(host[0]) != 0:
        raise ValueError("strata.torch: %s must start at 0 (got %d)" % (what, int(host[0])))
    if n > 1 and bool((host[1:] < host[:-1]).any()):
        raise ValueError("strata.torch: %s must be non-decreasing" % what)
    last = int(host[-1])
    if include_last_offset and last != keys_count:
        raise ValueError("strata.torch: with include_last_offset=True the last of %s is the "
                         "number of keys, %d (got %d)" % (what, keys_count, last))
    if not include_last_offset and last >= keys_count:
        raise ValueError(
            "strata.torch: the last of %s is %d for %d keys: the last bag would be empty, which "
            "is how B+1 offsets (each bag's start and the end) look; pass "
            "include_last_offset=True for those" % (what, last, keys_count))
    return n - 1 if include_last_offset else n


def _stream(device):
    """The current CUDA stream of `device` as the store takes it (an int), or
    0 on the CPU."""
    if device.type != "cuda":
        return 0
    return torch.cuda.current_stream(device).cuda_stream


class _OneLookupPerStep:
    """One push per table per training step: the store applies its optimizer
    on every push, so a second lookup of a table whose earlier lookup has
    not had its backward yet would become a second optimizer step. Such a
    lookup is refused. A lookup is held from its forward until its backward
    pushes, or until its graph is freed without a backward (the weak
    reference to its autograd node dies); lookups without grad are not held."""

    def __init__(self, owner):
        self._owner = owner
        self._held = {}  # table -> weakref to the autograd node of its lookup

    def check(self, table):
        held = self._held.get(table)
        if held is not None and held() is not None:
            raise RuntimeError(
                "%s: table %r was already looked up in this training step and that lookup's "
                "backward has not pushed yet; a second lookup would be a second optimizer step. "
                "Look up all of a table's bags in one forward, or run backward before the next "
                "forward (lookups under torch.no_grad() are free)" % (self._owner, table))

    def hold(self, table, node):
        self._held[table] = weakref.ref(node)

    def release(self, table, node):
        held = self._held.get(table)
        if held is not None and held() is node:
            del self._held[table]


class _PullPool(torch.autograd.Function):
    """Pulls a table's distinct keys and pools them; backward pushes their
    gradients, once. `anchor` is an empty tensor that requires grad, so
    autograd calls backward although the module has no parameters. `guard`
    (a _OneLookupPerStep, or None) holds the table until then."""

    @staticmethod
    def forward(ctx, anchor, store, worker, table, keys, offsets, weights, mode, device,
                include_last_offset, guard):
        unique, inverse = torch.unique(_host_keys(keys), return_inverse=True)
        rows = torch.empty((unique.numel(), store.dim(table)), dtype=torch.float32,
                           device=device)
        store.pull(worker, table, unique, out=rows, stream=_stream(device))
        index = inverse.to(device)
        ctx.store, ctx.worker, ctx.table, ctx.mode = store, worker, table, mode
        ctx.include_last_offset, ctx.guard, ctx.pushed = include_last_offset, guard, False
        ctx.unique = unique
        ctx.save_for_backward(rows, index, offsets, weights)
        if guard is not None:
            guard.hold(table, ctx)
        return F.embedding_bag(index, rows, offsets, mode=mode, per_sample_weights=weights,
                               include_last_offset=include_last_offset)

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.pushed:
            raise RuntimeError("strata.torch: a second backward through one lookup of table %r "
                               "would push its gradients twice (two optimizer steps)" % (ctx.table,))
        rows, index, offsets, weights = ctx.saved_tensors
        with torch.enable_grad():
            leaf = rows.detach().requires_grad_(True)
            pooled = F.embedding_bag(index, leaf, offsets, mode=ctx.mode,
                                     per_sample_weights=weights,
                                     include_last_offset=ctx.include_last_offset)
            (grad_rows,) = torch.autograd.grad(pooled, leaf, grad_out)
        ctx.store.push(ctx.worker, ctx.table, ctx.unique, grad_rows.detach().contiguous(),
                       stream=_stream(grad_rows.device))
        ctx.pushed = True
        if ctx.guard is not None:
            ctx.guard.release(ctx.table, ctx)
        return (None,) * 11


def _device_of(store, device):
    """The device the rows of `store` live on: `device` checked against the
    store's T0, or the store's own when None."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if store.t0_on_gpu \
            else torch.device("cpu")
    device = torch.device(device)
    if (device.type == "cuda") != bool(store.t0_on_gpu):
        raise ValueError("strata.torch: the store's T0 is %s, so the rows live there: device "
                         "must be %s, not %s" % (
                             "on a GPU" if store.t0_on_gpu else "on the host",
                             "a CUDA device" if store.t0_on_gpu else "the CPU", device))
    return device


def _lookup(anchor, guard, store, worker, table, keys, offsets, weights, mode, device,
            include_last_offset):
    """Pooled rows of one table, (bags, dim) on `device`: the checks, then
    _PullPool, held by `guard` when autograd records it."""
    _check_keys(keys)
    _check_offsets(offsets, keys.numel(), include_last_offset)
    if weights is not None:
        if mode != "sum":
            raise ValueError("strata.torch: per-sample weights need mode 'sum'")
        if not isinstance(weights, torch.Tensor) or weights.dim() != 1 \
                or not weights.is_floating_point() or weights.numel() != keys.numel():
            raise TypeError("strata.torch: per-sample weights must be a 1-D float tensor of "
                            "one weight per key, %d (got %s)" % (keys.numel(), _describe(weights)))
        weights = weights.detach().to(device=device, dtype=torch.float32)
    training = torch.is_grad_enabled()
    if training:
        guard.check(table)
    offsets = offsets.to(device=device, dtype=torch.int64)
    return _PullPool.apply(anchor, store, worker, table, keys, offsets, weights, mode, device,
                           include_last_offset, guard if training else None)


_STATE_VERSION = 1


def _is_cluster(store):
    return hasattr(store, "world_size")


def checkpoint_state(store, worker, tables, **extra):
    """Checkpoints `store` (collective on a cluster) and returns what names
    that checkpoint: its directory, the cluster's world size and generation
    (read back from its manifest) or None for a Store, the worker's clock,
    and each table's name and dim; `extra` goes along."""
    store.checkpoint()
    state = {"version": _STATE_VERSION, "dir": os.path.abspath(store.dir),
             "world_size": None, "generation": None,
             "clock": int(store.current_clock(worker)),
             "tables": [(t, int(store.dim(t))) for t in tables]}
    if _is_cluster(store):
        import strata
        manifest = strata.read_cluster_manifest(store.dir)
        state["world_size"] = int(store.world_size)
        state["generation"] = int(manifest["generation"])
    state.update(extra)
    return state


def verify_checkpoint_state(owner, store, worker, tables, state):
    """Raises ValueError, naming both sides, when `store` is not at the
    checkpoint `state` (from checkpoint_state) names."""
    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        raise ValueError("%s: the state is not a strata checkpoint state of version %d (got %r)"
                         % (owner, _STATE_VERSION, state if not isinstance(state, dict)
                            else state.get("version")))

    def differ(what, saved, here):
        raise ValueError("%s: the state names a checkpoint with %s %s; this module's store has "
                         "%s (load it into a module over the store reopened from %s)"
                         % (owner, what, saved, here, state["dir"]))

    here_dir = os.path.abspath(store.dir)
    if os.path.realpath(state["dir"]) != os.path.realpath(here_dir):
        differ("directory", state["dir"], here_dir)
    here_tables = [(t, int(store.dim(t))) for t in tables]
    if [tuple(t) for t in state["tables"]] != here_tables:
        differ("tables (name, dim)", list(map(tuple, state["tables"])), here_tables)
    if _is_cluster(store):
        if state["world_size"] != store.world_size:
            differ("world size", state["world_size"], store.world_size)
        import strata
        generation = int(strata.read_cluster_manifest(store.dir)["generation"])
        if state["generation"] != generation:
            differ("cluster generation", state["generation"], generation)
    elif state["world_size"] is not None:
        differ("world size", state["world_size"], "one process (a strata.Store)")
    clock = int(store.current_clock(worker))
    if state["clock"] != clock:
        differ("worker %d at clock" % worker, state["clock"], "it at clock %d" % clock)


def table_rows(store, table, chunk_rows=65536):
    """Iterates the rows of `table` as (keys, rows) tensors: int64 (n,)
    (a key's 64-bit pattern) and float32 (n, dim), at most chunk_rows at a
    time, every row in any tier once, in no particular order. On a cluster,
    this rank's shard: the rows it owns (local, not collective). The scan
    runs in a thread, one chunk ahead of the consumer, and holds the table's
    lock until the iteration ends (or the iterator is closed): not for the
    training loop."""
    chunks = queue.Queue(maxsize=1)
    stop = threading.Event()
    done = object()

    class _Stopped(Exception):
        pass

    def put(item):
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped()

    def scan():
        try:
            store.scan(table, lambda k, r: put((k, r)), chunk_rows)
            put(done)
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            try:
                put(e)
            except _Stopped:
                pass

    thread = threading.Thread(target=scan, name="strata-table-rows", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            keys, rows = item
            yield torch.from_numpy(keys.view("int64")), torch.from_numpy(rows)
    finally:
        stop.set()
        thread.join()


class EmbeddingBagCollection(torch.nn.Module):
    """Pooled embeddings of several tables of one store, for one worker.

    forward(features) takes a dict: table name -> (keys, offsets) or
    (keys, offsets, per_sample_weights), and returns a dict: table name ->
    (batch, dim) float32 tensor. mode: "sum" or "mean" (weights need "sum").
    Keys are int64 or int32 tensors; offsets int64 or int32, one per bag
    (each bag's first key), or with include_last_offset=True one more, the
    number of keys, as nn.EmbeddingBag reads them.

    Each table is looked up at most once per training step: its backward
    pushes the gradients, which is the table's optimizer step, so a second
    forward of a table before the first one's backward is a RuntimeError
    (forwards under torch.no_grad() may repeat freely).
    """

    def __init__(self, store, worker, tables, mode="sum", device=None,
                 include_last_offset=False):
        super().__init__()
        if mode not in ("sum", "mean"):
            raise ValueError("strata.torch: mode must be 'sum' or 'mean', not %r" % (mode,))
        names = set(store.tables)
        for t in tables:
            if t not in names:
                raise ValueError("strata.torch: the store has no table %r (it has %s)"
                                 % (t, sorted(names)))
        self.store, self.worker, self.tables, self.mode = store, worker, list(tables), mode
        self.include_last_offset = bool(include_last_offset)
        self.device = _device_of(store, device)
        self._anchor = torch.empty(0, requires_grad=True)
        self._guard = _OneLookupPerStep("strata.torch.EmbeddingBagCollection")

    def get_extra_state(self):
        """Checkpoints the store and names the checkpoint (no rows)."""
        return checkpoint_state(self.store, self.worker, self.tables)

    def set_extra_state(self, state):
        verify_checkpoint_state("strata.torch.EmbeddingBagCollection", self.store, self.worker,
                                self.tables, state)

    def forward(self, features):
        if not hasattr(features, "items"):
            raise TypeError("strata.torch: features must be a dict of table name -> (keys, "
                            "offsets[, weights]) (got %s; a TorchRec KeyedJaggedTensor goes to "
                            "strata.torchrec.EmbeddingBagCollection)" % type(features).__name__)
        out = {}
        for table, feature in features.items():
            if table not in self.tables:
                raise ValueError("strata.torch: feature %r is not one of this collection's "
                                 "tables %s" % (table, self.tables))
            keys, offsets = feature[0], feature[1]
            weights = feature[2] if len(feature) > 2 else None
            out[table] = _lookup(self._anchor, self._guard, self.store, self.worker, table,
                                 keys, offsets, weights, self.mode, self.device,
                                 self.include_last_offset)
        return out


class IntentLoader:
    """Iterates `batches` in order while signalling, `lookahead` batches
    ahead, the keys each will touch: keys_of(batch) -> {table: keys}. Batch
    i (from the worker's clock c at the start) is signalled for the window
    [c + i, c + i + 1); the worker's clock advances after each batch, when
    the next one is asked for (and after the last)."""

    def __init__(self, batches, store, worker, keys_of, lookahead=2):
        if int(lookahead) < 0:
            raise ValueError("strata.torch: lookahead must be >= 0, not %r" % (lookahead,))
        self.batches, self.store, self.worker = batches, store, worker
        self.keys_of, self.lookahead = keys_of, int(lookahead)

    def _signal(self, batch, clock):
        for table, keys in self.keys_of(batch).items():
            if isinstance(keys, torch.Tensor):
                keys = _host_keys(keys)
            self.store.intent(self.worker, table, keys, clock, clock + 1)

    def __iter__(self):
        source = iter(self.batches)
        start = self.store.current_clock(self.worker)
        queued = deque()
        drawn = 0
        exhausted = False
        served = 0
        while True:
            while not exhausted and drawn <= served + self.lookahead:
                try:
                    batch = next(source)
                except StopIteration:
                    exhausted = True
                    break
                self._signal(batch, start + drawn)
                queued.append(batch)
                drawn += 1
            if not queued:
                return
            yield queued.popleft()
            served += 1
            self.store.advance_clock(self.worker)
