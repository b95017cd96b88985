"""strata.torchrec: a TorchRec EmbeddingBagCollection whose tables live in a
strata.Store, for models written against TorchRec's types.

EmbeddingBagCollection(tables, store) takes the model's
torchrec.EmbeddingBagConfig list, reads a KeyedJaggedTensor and returns a
KeyedTensor keyed as TorchRec's own EmbeddingBagCollection keys it (each
table's features in the configs' order; a feature in several tables is
"feature@table"), so it drops in where the model had TorchRec's module
(torchrec.models.dlrm takes any EmbeddingBagCollectionInterface). The
features of one table are pulled together, one Pull of the union of their
ids, and their gradients pushed together by the backward, one Push: one
step of the table's optimizer, which runs in the store, per training step.

    configs = [torchrec.EmbeddingBagConfig(name="t", embedding_dim=16,
                   num_embeddings=10**6, feature_names=["f1", "f2"])]
    store = strata.Store(path, strata.torchrec.store_tables(configs, optimizer="adagrad"))
    ebc = strata.torchrec.EmbeddingBagCollection(configs, store, is_weighted=True)
    ebc.prefetch(next_kjt)           # intents for the batch after this one
    pooled = ebc(kjt)                # KeyedTensor: pooled["f1"], pooled.values()
    loss.backward()                  # pushes each table's gradients, once

Each forward is one batch at the worker's clock, which advances at the next
forward (so a backward pushes at the clock of its pull); prefetch(kjt)
signals a batch's ids for the clock at which it will be forwarded, batches
prefetched in the order they will run. The store may be a strata.Store
or a strata.Cluster (strata.distributed.Cluster under torchrun: every rank
runs the same forwards and backwards). state_dict() names the store's
checkpoint rather than holding rows (see strata.torch). The store's rows are on the host
unless its T0 is on a GPU (see strata.torch); a KeyedJaggedTensor's ids are
read on the host either way.
"""
try:
    import torchrec
    from torchrec.modules.embedding_modules import (EmbeddingBagCollectionInterface,
                                                    get_embedding_names_by_table)
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError("strata.torchrec needs TorchRec (pip install torchrec; "
                      "scripts/torch_venv.sh builds a venv with it): %s" % (e,)) from e

import torch

import strata

from .torch import (_device_of, _lookup, _OneLookupPerStep, checkpoint_state,
                    verify_checkpoint_state)

__all__ = ["EmbeddingBagCollection", "store_tables"]

_POOLING = {torchrec.PoolingType.SUM: "sum", torchrec.PoolingType.MEAN: "mean"}


def _check_config(config):
    if config.pooling not in _POOLING:
        raise ValueError("strata.torchrec: table %r has pooling %s: the store pools SUM or MEAN"
                         % (config.name, config.pooling))
    if config.data_type != torchrec.DataType.FP32:
        raise ValueError("strata.torchrec: table %r has data_type %s: the store holds FP32 rows"
                         % (config.name, config.data_type))


def store_tables(tables, **table_options):
    """The strata.Table of each EmbeddingBagConfig in `tables`: its name and
    embedding_dim, rows drawn uniformly from TorchRec's init range
    ([weight_init_min, weight_init_max], by default +-sqrt(1/num_embeddings);
    the store's uniform initializer is symmetric, so the range must be too).
    table_options go to every strata.Table (optimizer, learning_rate, ...;
    init_scale there overrides the range). A config's init_fn is not run:
    rows are created in the store when a key is first touched."""
    out = []
    for config in tables:
        _check_config(config)
        options = dict(table_options)
        if "init_scale" not in options and options.get("initializer", "uniform") == "uniform":
            high, low = config.get_weight_init_max(), config.get_weight_init_min()
            if low != -high:
                raise ValueError("strata.torchrec: table %r initializes in [%g, %g]: the store's "
                                 "uniform initializer is [-s, s]; pass init_scale" %
                                 (config.name, low, high))
            options["init_scale"] = high
        out.append(strata.Table(config.name, dim=config.embedding_dim, **options))
    return out


class EmbeddingBagCollection(EmbeddingBagCollectionInterface):
    """TorchRec's EmbeddingBagCollection over a strata.Store.

    tables: the torchrec.EmbeddingBagConfig list (unique table names; SUM or
    MEAN pooling; FP32); each names a table of `store` with its
    embedding_dim (strata.torchrec.store_tables makes them). worker: a
    worker of the store, one registered when None. is_weighted: pool with
    the KeyedJaggedTensor's weights, which must then be there; unweighted,
    weights are ignored, as TorchRec's module ignores them.

    forward(features) takes a KeyedJaggedTensor holding every feature of
    the configs (others are ignored), one batch size for all (variable
    batch sizes per feature are refused), ids in [0, num_embeddings) of
    their table, int32 or int64, and returns the pooled KeyedTensor, values
    (batch, sum of the dims). A table may be looked up once per training
    step: a second forward before the backward of the first is a
    RuntimeError (see strata.torch.EmbeddingBagCollection).
    """

    def __init__(self, tables, store, worker=None, is_weighted=False, device=None):
        super().__init__()
        names = set(store.tables)
        seen = set()
        for config in tables:
            _check_config(config)
            if config.name in seen:
                raise ValueError("strata.torchrec: duplicate table name %r" % (config.name,))
            seen.add(config.name)
            if config.name not in names:
                raise ValueError("strata.torchrec: the store has no table %r (it has %s); "
                                 "strata.torchrec.store_tables(configs) gives the tables to open "
                                 "it with" % (config.name, sorted(names)))
            if store.dim(config.name) != config.embedding_dim:
                raise ValueError("strata.torchrec: table %r has embedding_dim %d in its config "
                                 "but dim %d in the store" % (config.name, config.embedding_dim,
                                                              store.dim(config.name)))
            if not config.feature_names:
                config.feature_names = [config.name]  # as TorchRec's module does
        self._configs = list(tables)
        self._is_weighted = bool(is_weighted)
        self.store = store
        self.worker = store.register_worker() if worker is None else worker
        self.device = _device_of(store, device)
        self._embedding_names = [n for names_ in get_embedding_names_by_table(self._configs)
                                 for n in names_]
        self._length_per_key = [c.embedding_dim for c in self._configs for _ in c.feature_names]
        self._anchor = torch.empty(0, requires_grad=True)
        self._guard = _OneLookupPerStep("strata.torchrec.EmbeddingBagCollection")
        self._forwards = 0          # forwards so far: the clock advances before each but the first
        self._signalled = None      # the last clock a prefetch signalled

    def get_extra_state(self):
        """Checkpoints the store (collective on a strata.Cluster) and names
        the checkpoint: no rows (see strata.torch)."""
        return checkpoint_state(self.store, self.worker, [c.name for c in self._configs],
                                forwards=self._forwards)

    def set_extra_state(self, state):
        verify_checkpoint_state("strata.torchrec.EmbeddingBagCollection", self.store,
                                self.worker, [c.name for c in self._configs], state)
        # The next forward is the batch after the checkpoint's: it advances the clock.
        self._forwards = max(self._forwards, int(state.get("forwards", 0)))
        self._signalled = None

    def embedding_bag_configs(self):
        return self._configs

    def is_weighted(self):
        return self._is_weighted

    def _tables_of(self, features):
        """Per config: (ids, offsets with the end, weights or None), the
        features of the table concatenated in config order, on the host."""
        if not isinstance(features, KeyedJaggedTensor):
            raise TypeError("strata.torchrec: forward takes a KeyedJaggedTensor (got %s)"
                            % type(features).__name__)
        if features.variable_stride_per_key():
            raise ValueError("strata.torchrec: the KeyedJaggedTensor has a batch size per "
                             "feature (variable_stride_per_key); the store's module takes one "
                             "batch size for all features")
        if features.inverse_indices_or_none() is not None:
            raise ValueError("strata.torchrec: KeyedJaggedTensors with inverse_indices are not "
                             "supported")
        position = {k: i for i, k in enumerate(features.keys())}
        missing = [f for c in self._configs for f in c.feature_names if f not in position]
        if missing:
            raise ValueError("strata.torchrec: the KeyedJaggedTensor lacks features %s (it has %s)"
                             % (missing, features.keys()))
        weights = features.weights_or_none() if self._is_weighted else None
        if self._is_weighted and weights is None:
            raise ValueError("strata.torchrec: the collection is weighted but the "
                             "KeyedJaggedTensor has no weights")
        batch = features.stride()
        values = features.values()
        offsets = features.offsets().detach().to(device="cpu", dtype=torch.int64)
        if offsets.numel() != len(position) * batch + 1:
            raise ValueError("strata.torchrec: the KeyedJaggedTensor has %d offsets for %d "
                             "features of batch %d" % (offsets.numel(), len(position), batch))
        out = []
        for config in self._configs:
            ids, bags, weight_parts, shift = [], [torch.zeros(1, dtype=torch.int64)], [], 0
            for f in config.feature_names:
                segment = offsets[position[f] * batch:(position[f] + 1) * batch + 1]
                begin, end = int(segment[0]), int(segment[-1])
                ids.append(values[begin:end])
                if weights is not None:
                    weight_parts.append(weights[begin:end])
                bags.append(segment[1:] - begin + shift)
                shift += end - begin
            ids = torch.cat(ids)
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= config.num_embeddings):
                raise ValueError("strata.torchrec: table %r has ids in [%d, %d], outside "
                                 "[0, num_embeddings=%d)" % (config.name, int(ids.min()),
                                                            int(ids.max()), config.num_embeddings))
            out.append((ids, torch.cat(bags),
                        torch.cat(weight_parts) if weights is not None else None))
        return batch, out

    def forward(self, features):
        batch, per_table = self._tables_of(features)
        if torch.is_grad_enabled():
            for config in self._configs:
                self._guard.check(config.name)
        if self._forwards:
            self.store.advance_clock(self.worker)
        self._forwards += 1
        pooled = []
        for config, (ids, offsets, weights) in zip(self._configs, per_table):
            rows = _lookup(self._anchor, self._guard, self.store, self.worker, config.name, ids,
                           offsets, weights, _POOLING[config.pooling], self.device,
                           include_last_offset=True)
            pooled.extend(rows.split(batch))
        return KeyedTensor(keys=self._embedding_names, length_per_key=self._length_per_key,
                           values=torch.cat(pooled, dim=1) if pooled else
                           torch.empty((batch, 0), device=self.device))

    def prefetch(self, features):
        """Signals the ids of `features`, a batch to be forwarded after those
        forwarded or prefetched so far, as intents for the clock it will run
        at: the store moves their rows up the tiers meanwhile. Returns that
        clock."""
        _, per_table = self._tables_of(features)
        clock = self.store.current_clock(self.worker) + (1 if self._forwards else 0)
        if self._signalled is not None:
            clock = max(clock, self._signalled + 1)
        for config, (ids, _, _) in zip(self._configs, per_table):
            keys = torch.unique(ids.detach().to(device="cpu", dtype=torch.int64))
            self.store.intent(self.worker, config.name, keys, clock, clock + 1)
        self._signalled = clock
        return clock
