"""strata.torch's EmbeddingBagCollection beside nn.EmbeddingBag + SGD on
the CPU, for a table that fits in T0: the same batches (--batch samples of
--bag keys each, uniform over --keys), sum pooling, forward + backward +
the optimizer step, timed per step. Ours: SGD in the store (Push);
theirs: torch.optim.SGD (sparse=False, the default).

    PYTHONPATH=build/python /usr/bin/python3 bench/python/bench_torch.py [--steps 20] [--json]
"""
import argparse
import json
import tempfile
import time

import numpy as np
import torch

import strata
import strata.torch as st


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--bag", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    for name in ("keys", "dim", "batch", "bag", "steps"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name)
    rng = np.random.default_rng(1)
    batches = [torch.from_numpy(rng.integers(0, a.keys, a.batch * a.bag).astype(np.int64))
               for _ in range(8)]
    offsets = torch.arange(0, a.batch * a.bag, a.bag, dtype=torch.int64)

    def timed(step):
        for i in range(2):  # warm: rows created, caches filled
            step(batches[i % len(batches)])
        start = time.perf_counter()
        for i in range(a.steps):
            step(batches[i % len(batches)])
        return (time.perf_counter() - start) / a.steps

    reference = torch.nn.EmbeddingBag(a.keys, a.dim, mode="sum")
    sgd = torch.optim.SGD(reference.parameters(), lr=0.01)

    def theirs(keys):
        sgd.zero_grad()
        reference(keys, offsets).sum().backward()
        sgd.step()

    with tempfile.TemporaryDirectory(prefix="strata_bench_torch_") as d:
        table = strata.Table("t", dim=a.dim, optimizer="sgd", learning_rate=0.01)
        with strata.Store(d, [table], device_rows_max=2 * a.keys, dram_rows_max=2 * a.keys,
                          use_gpu=False) as store:
            ebc = st.EmbeddingBagCollection(store, store.register_worker(), ["t"])

            def ours(keys):
                ebc({"t": (keys, offsets)})["t"].sum().backward()

            results = []
            for _ in range(2):  # alternate, to see the spread
                results.append({"ours_s": timed(ours), "theirs_s": timed(theirs)})
    for r in results:
        r["ratio"] = r["theirs_s"] / r["ours_s"]  # our speed relative to theirs
    if a.json:
        print(json.dumps({"bench": "torch_embedding_bag", **vars(a), "rounds": results}))
    else:
        for r in results:
            print("step: strata.torch %.1f ms, nn.EmbeddingBag + SGD %.1f ms, speed ratio %.2f"
                  % (1e3 * r["ours_s"], 1e3 * r["theirs_s"], r["ratio"]))


if __name__ == "__main__":
    main()
