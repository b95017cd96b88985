"""TorchRec's DLRM (torchrec.models.dlrm.DLRM) on Criteo data twice, with
the same seeds, data and optimizer: once with its 26 tables in Strata
(strata.torchrec.EmbeddingBagCollection over a store whose tiers are smaller
than the tables, intents from the loader by prefetch), once with TorchRec's
own EmbeddingBagCollection (its tables in memory). Prints both validation
AUCs, both training rows/s and Strata's hits per tier.

    PYTHONPATH=build/python .venv-torch/bin/python examples/python/dlrm_torchrec.py \\
        examples/train/data/criteo_kaggle_train_head10k.txt
    PYTHONPATH=build/python .venv-torch/bin/torchrun --nproc_per_node 2 \\
        examples/python/dlrm_torchrec.py examples/train/data/criteo_kaggle_train_head10k.txt

Under torchrun (gloo) the store is sharded over the ranks
(strata.distributed.Cluster) and each rank trains on its share of every
global batch; the dense gradients (and TorchRec's table gradients) are
summed over the ranks by all_reduce, the store's owners sum the ranks' row
gradients, so both runs train the model one process does on the global
batches. Ids are the hashed Criteo values modulo --num-embeddings (hash
buckets, as TorchRec's Criteo pipelines do). The models start from the same
rows: TorchRec's tables get the store's initial rows of the ids the data
holds. AdaGrad for everything (torch.optim.Adagrad's update is the store's).
The last 20% of the rows (by file order) are the validation set.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torchrec
from torchrec.models.dlrm import DLRM
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

import strata
import strata.distributed
import strata.torchrec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_ctr import CATEGORICAL, auc, read_criteo  # noqa: E402

FEATURES = ["C%d" % (i + 1) for i in range(CATEGORICAL)]


def configs(a):
    return [torchrec.EmbeddingBagConfig(name="t_" + f, embedding_dim=a.dim,
                                        num_embeddings=a.num_embeddings, feature_names=[f])
            for f in FEATURES]


def kjt_of(ids, present, rows):
    """The batch `rows` as a KeyedJaggedTensor: one id per feature and
    sample, none where the value is missing."""
    lengths = present[rows].T.astype(np.int64)           # (26, b)
    values = ids[rows].T[lengths.astype(bool)]           # feature-major
    return KeyedJaggedTensor.from_lengths_sync(
        keys=FEATURES, values=torch.from_numpy(values.astype(np.int64)),
        lengths=torch.from_numpy(lengths.reshape(-1)))


def model_of(ebc, a):
    torch.manual_seed(a.seed)  # the dense layers alike in both runs
    return DLRM(embedding_bag_collection=ebc, dense_in_features=13,
                dense_arch_layer_sizes=[64, a.dim], over_arch_layer_sizes=[64, 32, 1])


def sum_gradients(params, world):
    """Sums the gradients of `params` over the ranks (one flat all_reduce)."""
    if world == 1:
        return
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    at = 0
    for g in grads:
        g.copy_(flat[at:at + g.numel()].view_as(g))
        at += g.numel()


def run(model, sparse_params, data, a, rank, world, prefetch=None):
    """Trains `model` for --epochs over the training batches, scores the
    validation rows; returns (AUC, training rows/s). Each rank takes its
    share of every global batch; the loss is the batch's summed BCE over the
    global batch size, so summed gradients are the global batch's mean."""
    labels, dense, ids, present, train_batches, val_batches = data
    dense_params = [p for n, p in model.named_parameters() if "embedding_bag_collection" not in n]
    opt = torch.optim.Adagrad(dense_params + sparse_params, lr=a.learning_rate, eps=a.epsilon)

    def share(rows):
        per = (len(rows) + world - 1) // world
        return rows[rank * per:(rank + 1) * per]

    schedule = [(share(r), len(r), True) for _ in range(a.epochs) for r in train_batches]
    schedule += [(share(r), len(r), False) for r in val_batches]
    kjts = [kjt_of(ids, present, rows) for rows, _, _ in schedule]
    xs = [torch.from_numpy(dense[rows]) for rows, _, _ in schedule]
    if prefetch is not None:
        for k in kjts[:a.lookahead]:
            prefetch(k)
    scores, trained, train_s = [], 0, 0.0
    for i, (rows, global_rows, training) in enumerate(schedule):
        start = time.perf_counter()
        if prefetch is not None and i + a.lookahead < len(kjts):
            prefetch(kjts[i + a.lookahead])
        if training:
            logits = model(xs[i], kjts[i]).squeeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, torch.from_numpy(labels[rows]), reduction="sum") / global_rows
            opt.zero_grad()
            loss.backward()   # Strata: pushes the tables' gradients into the store
            sum_gradients(dense_params + sparse_params, world)
            opt.step()
            trained += global_rows
            train_s += time.perf_counter() - start
        else:
            with torch.no_grad():
                scores.append(torch.sigmoid(model(xs[i], kjts[i]).squeeze(1)).numpy())
    local = np.concatenate(scores)
    if world > 1:
        parts = [None] * world
        dist.all_gather_object(parts, local)
        val_rows = np.concatenate(val_batches)
        # Rank q's scores are, batch by batch, its share of each validation batch.
        by_rank = [list(p) for p in parts]
        merged, cursor = [], [0] * world
        for r in val_batches:
            per = (len(r) + world - 1) // world
            for q in range(world):
                n = len(r[q * per:(q + 1) * per])
                merged.extend(by_rank[q][cursor[q]:cursor[q] + n])
                cursor[q] += n
        local = np.array(merged, np.float32)
        y = labels[val_rows]
    else:
        y = labels[np.concatenate(val_batches)]
    return auc(y, local), trained / train_s if train_s else 0.0


def initial_rows(tables, ids, present, a, directory):
    """The store's initial row of every id the data holds, per table: a
    scratch store with the same tables, tiers large enough for all."""
    out = {}
    with strata.Store(directory, tables, use_gpu=False, device_rows_max=1 << 16,
                      dram_rows_max=1 << 17) as scratch:
        w = scratch.register_worker()
        for i, f in enumerate(FEATURES):
            u = np.unique(ids[present[:, i] > 0, i]).astype(np.uint64)
            out["t_" + f] = (u, scratch.pull(w, "t_" + f, u))
    return out


def main():
    p = argparse.ArgumentParser(description="TorchRec's DLRM with its tables in Strata and in "
                                "TorchRec's own EmbeddingBagCollection")
    p.add_argument("input", help="Criteo TSV: label, I1..I13, C1..C26")
    p.add_argument("--dir", help="store directory (default: a temporary one)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256, help="global batch size")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--num-embeddings", type=int, default=20000, help="hash buckets per table")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--epsilon", type=float, default=1e-8)
    p.add_argument("--lookahead", type=int, default=2, help="batches prefetched ahead")
    p.add_argument("--device-rows", type=int, default=8192, help="Strata's T0 rows (all tables)")
    p.add_argument("--dram-rows", type=int, default=16384, help="Strata's T1 rows (all tables)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))

    labels, dense, keys, present = read_criteo(a.input, 0)
    ids = (keys.view(np.uint64) % np.uint64(a.num_embeddings)).astype(np.int64)
    n = len(labels)
    n_val = n // 5
    order = np.random.default_rng(a.seed).permutation(n - n_val)
    train_batches = [order[s:s + a.batch_size] for s in range(0, len(order), a.batch_size)]
    val_rows = np.arange(n - n_val, n)
    val_batches = [val_rows[s:s + a.batch_size] for s in range(0, n_val, a.batch_size)]
    data = (labels, dense, ids, present, train_batches, val_batches)

    cfgs = configs(a)
    tables = strata.torchrec.store_tables(cfgs, optimizer="adagrad",
                                          learning_rate=a.learning_rate, epsilon=a.epsilon)
    tmp = None if a.dir else tempfile.TemporaryDirectory(prefix="strata_dlrm_")
    root = a.dir or tmp.name
    if distributed:  # one directory for all ranks: rank 0's
        holder = [root]
        dist.broadcast_object_list(holder, src=0)
        root = holder[0]
    start_rows = initial_rows(tables, ids, present, a, os.path.join(root, "init-%d" % rank))

    # Strata: the tables in a store (sharded over the ranks under torchrun).
    options = dict(device_rows_max=a.device_rows // world, dram_rows_max=a.dram_rows // world)
    store = (strata.distributed.Cluster(os.path.join(root, "store"), tables, **options)
             if distributed else
             strata.Store(os.path.join(root, "store"), tables, use_gpu=False, **options))
    with store:
        ebc = strata.torchrec.EmbeddingBagCollection(cfgs, store)
        strata_auc, strata_rate = run(model_of(ebc, a), [], data, a, rank, world,
                                      prefetch=ebc.prefetch)
        stats = store.summed_stats() if distributed else store.stats()

    # TorchRec's own EmbeddingBagCollection, from the same rows.
    own = torchrec.EmbeddingBagCollection(tables=cfgs, device=torch.device("cpu"))
    with torch.no_grad():
        for name, (u, rows) in start_rows.items():
            own.embedding_bags[name].weight[torch.from_numpy(u.astype(np.int64))] = \
                torch.from_numpy(rows)
    torch_auc, torch_rate = run(model_of(own, a), list(own.parameters()), data, a,
                                rank, world)
    if distributed:
        dist.barrier()  # every rank is done with the directory
    if tmp:
        tmp.cleanup()

    summary = {"world_size": world, "rows": n, "validation_rows": n_val, "epochs": a.epochs,
               "strata": {"validation_auc": strata_auc, "rows_per_s": strata_rate,
                          "t0_hits": stats["t0"]["hits"], "t1_hits": stats["t1"]["hits"],
                          "ssd_row_reads": stats["ssd_row_reads"],
                          "stall_pulls": stats["stall_pulls"], "pulls": stats["pulls"]},
               "torchrec": {"validation_auc": torch_auc, "rows_per_s": torch_rate}}
    if rank == 0:
        if a.json:
            print(json.dumps(summary, indent=2))
        else:
            s = summary["strata"]
            print("DLRM on %d rows (%d validation), %d epochs, %d rank(s):" % (
                n, n_val, a.epochs, world))
            print("  strata.torchrec : validation AUC %.4f, %.0f rows/s" % (strata_auc,
                                                                              strata_rate))
            print("  torchrec EBC    : validation AUC %.4f, %.0f rows/s" % (torch_auc,
                                                                              torch_rate))
            print("  AUC difference %.4f, Strata's rows/s %.2fx TorchRec's" % (
                abs(strata_auc - torch_auc), strata_rate / torch_rate))
            print("  Strata tiers: T0 hits %d, T1 hits %d, SSD row reads %d, stalled pulls %d "
                  "of %d" % (s["t0_hits"], s["t1_hits"], s["ssd_row_reads"], s["stall_pulls"],
                             s["pulls"]))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
