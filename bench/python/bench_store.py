"""The Python package's Pull + Push beside strata_engine_bench's
BM_PullPushResident: the same store (T0 1<<17 rows, T1 1<<20, one AdaGrad
table of dim 16, host runner), the same batches (16 of 4096 random keys in
[0, 65536), every row resident after a warm pass), timed the same way
(wall time of Pull + Push per key).

    PYTHONPATH=build/python /usr/bin/python3 bench/python/bench_store.py [--seconds 2] [--json]
"""
import argparse
import json
import tempfile
import time

import numpy as np

import strata


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds (after a warm pass)")
    p.add_argument("--json", action="store_true", help="print JSON")
    a = p.parse_args()
    if not a.seconds > 0:
        p.error("--seconds must be positive")
    batch, dim = 4096, 16
    with tempfile.TemporaryDirectory(prefix="strata_py_bench_") as d:
        table = strata.Table("bench", dim=dim, optimizer="adagrad")
        with strata.Store(d, [table], device_rows_max=1 << 17, dram_rows_max=1 << 20,
                          use_gpu=False) as store:
            w = store.register_worker()
            batches = [np.random.default_rng(100 + i).integers(0, 1 << 16, batch, dtype=np.uint64)
                       for i in range(16)]
            out = np.empty((batch, dim), dtype=np.float32)
            grads = np.full((batch, dim), 0.01, dtype=np.float32)
            for b in batches:
                store.pull(w, 0, b, out=out)
            calls = 0
            start = time.perf_counter()
            while True:
                keys = batches[calls % len(batches)]
                store.pull(w, 0, keys, out=out)
                store.push(w, 0, keys, grads)
                calls += 1
                elapsed = time.perf_counter() - start
                if elapsed >= a.seconds:
                    break
            stats = store.stats()
    ns_per_key = elapsed / (calls * batch) * 1e9
    hit_rate = stats["t0"]["hits"] / max(1, stats["t0"]["hits"] + stats["t0"]["misses"])
    if a.json:
        print(json.dumps({"bench": "python_pull_push_resident", "calls": calls,
                          "ns_per_key": ns_per_key, "t0_hit_rate": hit_rate}))
    else:
        print("python pull + push, %d keys, dim %d: %.1f ns/key over %d calls (T0 hit rate %.3f)"
              % (batch, dim, ns_per_key, calls, hit_rate))


if __name__ == "__main__":
    main()
