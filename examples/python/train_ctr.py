"""The click model of `strata train` (examples/train), in PyTorch through
strata.torch: a factorization machine with logistic regression on Criteo
data. Each of the 26 categorical fields is a Strata table whose row holds
the key's FM factors and its first-order weight (dim + 1 floats, AdaGrad in
the store); the dense part (bias, weights and factors of the 13 numeric
fields) is a torch module trained by torch.optim.Adagrad. The loader
signals each batch's keys `--lookahead` batches ahead. Prints per-epoch
validation AUC and logloss and the store's tier counters.

    PYTHONPATH=build/python python3 examples/python/train_ctr.py \\
        examples/train/data/criteo_kaggle_train_head10k.txt --dir /tmp/ctr

The last 20% of the rows (by file order) are the validation set; the
training rows are shuffled each epoch by --seed.
"""
import argparse
import json
import math
import sys
import tempfile
import time

import numpy as np
import torch

import strata
import strata.torch as st

DENSE, CATEGORICAL = 13, 26
MASK64 = (1 << 64) - 1


def hash_feature(column, value):
    """The trainer's key of a categorical value (examples/train/dataset.cc):
    FNV-1a over its bytes, mixed with the column by splitmix64's finalizer."""
    h = 14695981039346656037
    for c in value.encode():
        h = ((h ^ c) * 1099511628211) & MASK64
    x = (h + 0x9E3779B97F4A7C15 * (column + 1)) & MASK64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK64
    x ^= x >> 31
    return x


def read_criteo(path, rows_max):
    labels, dense, keys, present = [], [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if rows_max and n > rows_max:
                break
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) != 1 + DENSE + CATEGORICAL:
                raise SystemExit("%s:%d: %d columns, expected %d" % (path, n, len(cols),
                                                                      1 + DENSE + CATEGORICAL))
            labels.append(float(cols[0]))
            dense.append([math.copysign(math.log1p(abs(float(v))), float(v)) if v else 0.0
                          for v in cols[1:1 + DENSE]])
            cats = cols[1 + DENSE:]
            keys.append([hash_feature(c, v) if v else 0 for c, v in enumerate(cats)])
            present.append([1.0 if v else 0.0 for v in cats])
    # Keys are 64-bit patterns; torch holds them as int64.
    keys = np.array(keys, dtype=np.uint64).view(np.int64)
    return (np.array(labels, np.float32), np.array(dense, np.float32), keys,
            np.array(present, np.float32))


class DensePart(torch.nn.Module):
    """Bias, first-order weights and FM factors of the numeric fields."""

    def __init__(self, dim, init_scale, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.bias = torch.nn.Parameter(torch.zeros(1))
        self.weight = torch.nn.Parameter(torch.zeros(DENSE))
        self.factors = torch.nn.Parameter(
            (torch.rand(DENSE, dim, generator=g) * 2 - 1) * init_scale)


def auc(labels, scores):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    # Ties share their mean rank.
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j + 2) / 2.0
        i = j + 1
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main():
    p = argparse.ArgumentParser(description="FM + LR on Criteo data through strata.torch")
    p.add_argument("input", help="Criteo TSV: label, I1..I13, C1..C26")
    p.add_argument("--dir", help="store directory (default: a temporary one)")
    p.add_argument("--rows-max", type=int, default=0, help="read at most this many rows (0: all)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lookahead", type=int, default=2, help="batches signalled ahead")
    p.add_argument("--dim", type=int, default=16, help="FM factor dimension")
    p.add_argument("--learning-rate", type=float, default=0.005)
    p.add_argument("--device-rows", type=int, default=2048, help="T0 capacity in rows")
    p.add_argument("--dram-rows", type=int, default=8192, help="T1 capacity in rows")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print JSON")
    a = p.parse_args()
    for name in ("epochs", "batch_size", "dim", "device_rows", "dram_rows"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.rows_max < 0 or a.lookahead < 0 or not a.learning_rate > 0:
        p.error("--rows-max and --lookahead must be >= 0, --learning-rate > 0")

    labels, dense, keys, present = read_criteo(a.input, a.rows_max)
    n = len(labels)
    n_val = n // 5
    train_rows, val_rows = np.arange(n - n_val), np.arange(n - n_val, n)
    names = ["C%d" % (i + 1) for i in range(CATEGORICAL)]
    tables = [strata.Table(t, dim=a.dim + 1, optimizer="adagrad", learning_rate=a.learning_rate,
                           init_scale=0.01) for t in names]
    tmp = None if a.dir else tempfile.TemporaryDirectory(prefix="strata_train_ctr_")
    with strata.Store(a.dir or tmp.name, tables, device_rows_max=a.device_rows,
                      dram_rows_max=a.dram_rows, use_gpu=False) as store:
        w = store.register_worker()
        ebc = st.EmbeddingBagCollection(store, w, names)
        part = DensePart(a.dim, 0.01, a.seed)
        opt = torch.optim.Adagrad(part.parameters(), lr=a.learning_rate)
        rng = np.random.default_rng(a.seed)

        def batches(rows):
            for s in range(0, len(rows), a.batch_size):
                yield rows[s:s + a.batch_size]

        def keys_of(rows):
            return {t: torch.from_numpy(keys[rows, i].copy()) for i, t in enumerate(names)}

        def logits(rows):
            b = len(rows)
            offsets = torch.arange(b, dtype=torch.int64)
            pooled = ebc({t: (torch.from_numpy(keys[rows, i].copy()), offsets,
                              torch.from_numpy(present[rows, i].copy()))
                          for i, t in enumerate(names)})
            rows_t = torch.stack([pooled[t] for t in names], 1)  # (b, 26, dim + 1)
            v_cat, w_cat = rows_t[:, :, :a.dim], rows_t[:, :, a.dim]
            x = torch.from_numpy(dense[rows])
            v_dense = x[:, :, None] * part.factors[None]  # (b, 13, dim)
            v = torch.cat([v_cat, v_dense], 1)
            fm = 0.5 * ((v.sum(1) ** 2) - (v ** 2).sum(1)).sum(1)
            return part.bias + x @ part.weight + w_cat.sum(1) + fm

        epochs = []
        for epoch in range(a.epochs):
            start = time.perf_counter()
            order = rng.permutation(train_rows)
            schedule = list(batches(order)) + list(batches(val_rows))
            scores = []
            for step, rows in enumerate(st.IntentLoader(schedule, store, w, keys_of,
                                                        lookahead=a.lookahead)):
                y = torch.from_numpy(labels[rows])
                if step < (len(order) + a.batch_size - 1) // a.batch_size:
                    opt.zero_grad()
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits(rows), y)
                    loss.backward()  # pushes the tables' gradients into the store
                    opt.step()
                else:
                    with torch.no_grad():
                        scores.append(torch.sigmoid(logits(rows)).numpy())
            p_val = np.clip(np.concatenate(scores), 1e-7, 1 - 1e-7)
            y_val = labels[val_rows]
            logloss = float(-np.mean(y_val * np.log(p_val) + (1 - y_val) * np.log(1 - p_val)))
            epochs.append({"epoch": epoch + 1, "validation_auc": auc(y_val, p_val),
                           "validation_logloss": logloss,
                           "rows_per_s": len(schedule) and n / (time.perf_counter() - start)})
            if not a.json:
                e = epochs[-1]
                print("epoch %d: validation AUC %.4f, logloss %.4f, %.0f rows/s"
                      % (e["epoch"], e["validation_auc"], e["validation_logloss"],
                         e["rows_per_s"]))
        stats = store.stats()
    if tmp:
        tmp.cleanup()
    summary = {"rows": n, "validation_rows": n_val, "epochs": epochs,
               "validation_auc": epochs[-1]["validation_auc"],
               "t0_hits": stats["t0"]["hits"], "t1_hits": stats["t1"]["hits"],
               "ssd_row_reads": stats["ssd_row_reads"], "stall_pulls": stats["stall_pulls"],
               "pulls": stats["pulls"]}
    if a.json:
        print(json.dumps(summary, indent=2))
    else:
        print("tiers: T0 hits %d, T1 hits %d, SSD row reads %d, stalled pulls %d of %d"
              % (summary["t0_hits"], summary["t1_hits"], summary["ssd_row_reads"],
                 summary["stall_pulls"], summary["pulls"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
