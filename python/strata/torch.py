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

Keys are 1-D int64 tensors (an id is its 64-bit pattern) and offsets 1-D
int64 tensors of each sample's first key (as nn.EmbeddingBag's). When the
store's T0 is on a GPU (store.t0_on_gpu), the rows are pulled straight into
CUDA tensors and the gradients pushed from them on the current CUDA stream
(no host copy); the pooled outputs are then on that device. Otherwise
everything stays on the CPU.
"""
from collections import deque

import torch
import torch.nn.functional as F

__all__ = ["EmbeddingBagCollection", "IntentLoader"]


def _check_keys(keys):
    if not isinstance(keys, torch.Tensor) or keys.dim() != 1 or keys.dtype != torch.int64:
        raise TypeError("strata.torch: keys must be a 1-D int64 tensor (got %s)" % (
            "tensor of %s with shape %s" % (keys.dtype, tuple(keys.shape))
            if isinstance(keys, torch.Tensor) else type(keys).__name__))


def _host_keys(keys):
    """The keys as a C-contiguous CPU int64 tensor: the store reads keys on
    the host."""
    _check_keys(keys)
    return keys.detach().to("cpu").contiguous()


def _stream(device):
    """The current CUDA stream of `device` as the store takes it (an int), or
    0 on the CPU."""
    if device.type != "cuda":
        return 0
    return torch.cuda.current_stream(device).cuda_stream


class _PullPool(torch.autograd.Function):
    """Pulls a table's distinct keys and pools them; backward pushes their
    gradients. `anchor` is an empty tensor that requires grad, so autograd
    calls backward although the module has no parameters."""

    @staticmethod
    def forward(ctx, anchor, store, worker, table, keys, offsets, weights, mode, device):
        unique, inverse = torch.unique(_host_keys(keys), return_inverse=True)
        rows = torch.empty((unique.numel(), store.dim(table)), dtype=torch.float32,
                           device=device)
        store.pull(worker, table, unique, out=rows, stream=_stream(device))
        index = inverse.to(device)
        ctx.store, ctx.worker, ctx.table, ctx.mode = store, worker, table, mode
        ctx.unique = unique
        ctx.save_for_backward(rows, index, offsets, weights)
        return F.embedding_bag(index, rows, offsets, mode=mode, per_sample_weights=weights)

    @staticmethod
    def backward(ctx, grad_out):
        rows, index, offsets, weights = ctx.saved_tensors
        with torch.enable_grad():
            leaf = rows.detach().requires_grad_(True)
            pooled = F.embedding_bag(index, leaf, offsets, mode=ctx.mode,
                                     per_sample_weights=weights)
            (grad_rows,) = torch.autograd.grad(pooled, leaf, grad_out)
        ctx.store.push(ctx.worker, ctx.table, ctx.unique, grad_rows.detach().contiguous(),
                       stream=_stream(grad_rows.device))
        return (None,) * 9


class EmbeddingBagCollection(torch.nn.Module):
    """Pooled embeddings of several tables of one store, for one worker.

    forward(features) takes a dict: table name -> (keys, offsets) or
    (keys, offsets, per_sample_weights), and returns a dict: table name ->
    (batch, dim) float32 tensor. mode: "sum" or "mean" (weights need "sum").
    """

    def __init__(self, store, worker, tables, mode="sum", device=None):
        super().__init__()
        if mode not in ("sum", "mean"):
            raise ValueError("strata.torch: mode must be 'sum' or 'mean', not %r" % (mode,))
        names = set(store.tables)
        for t in tables:
            if t not in names:
                raise ValueError("strata.torch: the store has no table %r (it has %s)"
                                 % (t, sorted(names)))
        self.store, self.worker, self.tables, self.mode = store, worker, list(tables), mode
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if store.t0_on_gpu \
                else torch.device("cpu")
        self.device = torch.device(device)
        if (self.device.type == "cuda") != bool(store.t0_on_gpu):
            raise ValueError("strata.torch: the store's T0 is %s, so the rows live there: device "
                             "must be %s, not %s" % (
                                 "on a GPU" if store.t0_on_gpu else "on the host",
                                 "a CUDA device" if store.t0_on_gpu else "the CPU", self.device))
        self._anchor = torch.empty(0, requires_grad=True)

    def forward(self, features):
        out = {}
        for table, feature in features.items():
            if table not in self.tables:
                raise ValueError("strata.torch: feature %r is not one of this collection's "
                                 "tables %s" % (table, self.tables))
            keys, offsets = feature[0], feature[1]
            weights = feature[2] if len(feature) > 2 else None
            if weights is not None and self.mode != "sum":
                raise ValueError("strata.torch: per-sample weights need mode 'sum'")
            offsets = offsets.to(device=self.device, dtype=torch.int64)
            if weights is not None:
                weights = weights.to(self.device)
            out[table] = _PullPool.apply(self._anchor, self.store, self.worker, table, keys,
                                         offsets, weights, self.mode, self.device)
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
