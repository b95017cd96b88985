"""One rank of test_distributed.py, run under `torchrun --nproc_per_node R`
(gloo on 127.0.0.1): strata.distributed.Cluster under strata.torch's
EmbeddingBagCollection. Modes:

  train DIR    STEPS steps of the shared plan (plan()), this rank's half of
               each global batch; then a checkpoint, the module's
               state_dict (torch.save'd to DIR.state-<rank>.pt) and this
               rank's shard's rows (DIR.rows-<rank>.npz, with the owner of
               each key checked against strata.cluster_owner)
  reopen DIR   reopens at the same world size, load_state_dict of the saved
               state, and pulls every key the ranks wrote: each must equal
               its saved row
  torchrec DIR as train, with strata.torchrec's EmbeddingBagCollection on
               KeyedJaggedTensors (three features, two sharing table b);
               writes DIR.rows-<rank>.npz
  open DIR     only opens the cluster (the world-size mismatch case): prints
               the error

Each rank writes its last line, `distributed-ranks <rank> ok|FAIL ...`, to
DIR.result-<rank>.

    torchrun --nproc_per_node 2 tests/python/distributed_ranks.py train DIR
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import strata
import strata.distributed
import strata.torch

DIM = 4
STEPS = 5
BATCH = 8        # bags per global batch; rank r of R takes bags r*B/R .. (r+1)*B/R
KEYS = 50
TABLES = ["a", "b"]
# Tiers smaller than the tables (about 100 rows): rows go down to the SSD tier.
TIERS = dict(device_rows_max=32, dram_rows_max=48)


def tables():
    return [strata.Table("a", dim=DIM, optimizer="adagrad", learning_rate=0.1,
                         init_scale=0.05),
            strata.Table("b", dim=DIM, optimizer="sgd", learning_rate=0.2, init_scale=0.05)]


def plan():
    """Per step, per table: (keys, offsets, weights) of the global batch, and
    the loss's weights per bag, the same in every process."""
    rng = np.random.default_rng(45)
    steps = []
    for _ in range(STEPS):
        step = {}
        for t in TABLES:
            lengths = rng.integers(1, 5, BATCH)
            keys = rng.integers(0, KEYS, int(lengths.sum()))
            keys[0] = -1  # key 2^64 - 1
            weights = rng.uniform(0.5, 1.5, keys.size).astype(np.float32)
            target = rng.standard_normal((BATCH, DIM)).astype(np.float32)
            step[t] = (keys, lengths, weights, target)
        steps.append(step)
    return steps


def bags(step, rank, world):
    """This rank's share of one step: table -> (keys, offsets, weights), and
    table -> the loss's weights of its bags."""
    per = BATCH // world
    features, targets = {}, {}
    for t, (keys, lengths, weights, target) in step.items():
        starts = np.concatenate([[0], np.cumsum(lengths)])
        lo, hi = starts[rank * per], starts[(rank + 1) * per]
        features[t] = (torch.from_numpy(keys[lo:hi].astype(np.int64)),
                       torch.from_numpy(starts[rank * per:(rank + 1) * per] - lo),
                       torch.from_numpy(weights[lo:hi]))
        targets[t] = torch.from_numpy(target[rank * per:(rank + 1) * per])
    return features, targets


def train(store, worker, rank, world):
    """STEPS steps of the plan on `store` (a Store or a Cluster): returns the
    module."""
    ebc = strata.torch.EmbeddingBagCollection(store, worker, TABLES)
    for step in plan():
        features, targets = bags(step, rank, world)
        pooled = ebc(features)
        loss = sum((pooled[t] * targets[t]).sum() for t in TABLES)
        loss.backward()
        store.advance_clock(worker)
    return ebc


def torchrec_configs():
    import torchrec
    return [torchrec.EmbeddingBagConfig(name="a", embedding_dim=DIM, num_embeddings=KEYS,
                                        feature_names=["fa"]),
            torchrec.EmbeddingBagConfig(name="b", embedding_dim=DIM, num_embeddings=KEYS,
                                        feature_names=["fb1", "fb2"])]


def train_torchrec(store, worker, rank, world):
    """The plan as KeyedJaggedTensors (fa: table a's bags, fb1: table b's,
    fb2: table a's again, into table b), weighted, on strata.torchrec."""
    import strata.torchrec
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    ebc = strata.torchrec.EmbeddingBagCollection(torchrec_configs(), store, worker=worker,
                                                 is_weighted=True)
    for step in plan():
        features, targets = bags(step, rank, world)
        parts = [features["a"], features["b"], features["a"]]
        lengths = [torch.diff(o, append=torch.tensor([k.numel()])) for k, o, _ in parts]
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=["fa", "fb1", "fb2"], values=torch.cat([k % KEYS for k, _, _ in parts]),
            lengths=torch.cat(lengths), weights=torch.cat([w for _, _, w in parts]))
        target = torch.cat([targets["a"], targets["b"], targets["a"]], dim=1)
        (ebc(kjt).values() * target).sum().backward()
    return ebc


def rows_of(store, table):
    keys, rows = [], []
    for k, r in strata.torch.table_rows(store, table, chunk_rows=7):
        keys.append(k)
        rows.append(r)
    return torch.cat(keys).numpy(), torch.cat(rows).numpy()


def main():
    mode, directory = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        if mode == "open":
            strata.distributed.Cluster(directory, tables()).close()
            detail = "opened"
        else:
            with strata.distributed.Cluster(directory, tables(), **TIERS,
                                            ) as cluster:
                detail = run(mode, cluster, directory, rank, world)
        report(directory, rank, "ok " + detail)
    except Exception as e:  # noqa: BLE001 - reported to the test
        report(directory, rank, "FAIL %s: %s" % (type(e).__name__, e))
        sys.exit(1)
    finally:
        dist.destroy_process_group()


def run(mode, cluster, directory, rank, world):
    worker = cluster.register_worker()
    if mode in ("train", "torchrec"):
        ebc = (train if mode == "train" else train_torchrec)(cluster, worker, rank, world)
        cluster.checkpoint()
        torch.save(ebc.state_dict(), "%s.state-%d.pt" % (directory, rank))
        saved = {}
        for index, t in enumerate(TABLES):
            keys, rows = rows_of(cluster, t)
            owners = strata.cluster_owner(index, keys, world)
            if keys.size == 0 or not (owners == rank).all():
                raise AssertionError("table %s: the shard holds keys rank %d does not own"
                                     % (t, rank))
            saved[t + ".keys"], saved[t + ".rows"] = keys, rows
        np.savez("%s.rows-%d.npz" % (directory, rank), **saved)
        return "%d rows" % sum(v.shape[0] for k, v in saved.items() if k.endswith(".rows"))
    if mode == "reopen":
        ebc = strata.torch.EmbeddingBagCollection(cluster, worker, TABLES)
        ebc.load_state_dict(torch.load("%s.state-%d.pt" % (directory, rank)))
        pulled = 0
        for t in TABLES:
            for r in range(world):
                with np.load("%s.rows-%d.npz" % (directory, r)) as f:
                    keys, rows = f[t + ".keys"], f[t + ".rows"]
                got = cluster.pull(worker, t, keys)
                if not np.array_equal(got, rows):
                    raise AssertionError("table %s: rank %d's rows differ after reopening"
                                         % (t, r))
                pulled += keys.size
        return "%d rows equal" % pulled
    raise ValueError("mode %r" % mode)


def report(directory, rank, text):
    line = "distributed-ranks %d %s" % (rank, text)
    print(line, flush=True)
    with open("%s.result-%d" % (directory, rank), "w") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
