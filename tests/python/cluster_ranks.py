"""One rank of test_cluster.py, run under `mpirun -np R`: strata.Cluster
against a NumPy model of every rank's pushes. Each rank prints one line,
`cluster-ranks <rank> ok <detail>` or `cluster-ranks <rank> FAIL <why>`, and
writes it to DIR.result-<rank> too (mpirun's forwarded output may merge the
ranks' lines).

    mpirun -np 2 /usr/bin/python3 tests/python/cluster_ranks.py DIR
"""
import os
import sys

import numpy as np

import strata

DIM = 4
LR = 0.5
STEPS = 6
KEYS = 40


def batches(rank):
    """The keys and gradients rank `rank` pushes at each step (any rank can
    compute any other's, so each holds the whole model)."""
    rng = np.random.default_rng(1000 + rank)
    out = []
    for _ in range(STEPS):
        keys = rng.integers(0, 3 * KEYS, KEYS).astype(np.uint64)
        keys[0] = np.uint64(2**64 - 1)  # the extreme key on every rank
        grads = rng.standard_normal((KEYS, DIM)).astype(np.float32)
        out.append((keys, grads))
    return out


def main():
    directory = sys.argv[1]
    tables = [strata.Table("t", dim=DIM, optimizer="sgd", learning_rate=LR,
                           initializer="zeros")]
    rank = -1
    try:
        with strata.Cluster(directory, tables, device_rows_max=32, dram_rows_max=64,
                            collective_timeout_ms=120_000) as cluster:
            rank, world = cluster.rank, cluster.world_size
            plan = [batches(r) for r in range(world)]
            w = cluster.register_worker()
            model = {}
            for step in range(STEPS):
                keys, grads = plan[rank][step]
                cluster.intent(w, "t", keys, step, step + 1)
                want = np.stack([model.get(int(k), np.zeros(DIM, np.float32)) for k in keys])
                got = cluster.pull(w, "t", keys)
                if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    raise AssertionError("step %d: pulled rows differ from the model" % step)
                cluster.push(w, "t", keys, grads)
                # SGD from zeros: a row is -LR times every rank's gradients summed.
                for r in range(world):
                    for k, g in zip(*plan[r][step]):
                        row = model.setdefault(int(k), np.zeros(DIM, np.float32))
                        row -= np.float32(LR) * g
                cluster.advance_clock(w)
            cluster.checkpoint()
            summed = cluster.summed_stats()
            calls = summed["exchange"]["push_calls"]
            if calls != world * STEPS:
                raise AssertionError("summed push calls %d, not %d" % (calls, world * STEPS))
            try:
                cluster.pull(w, "nope", keys)
                raise AssertionError("a missing table was not refused")
            except strata.NotFound as e:
                if "nope" not in str(e):
                    raise AssertionError("NotFound does not name the table: %s" % e)
        report(directory, rank, "ok %d keys, %d exchanged bytes" % (
            len(model), summed["exchange"]["bytes_sent"]))
    except Exception as e:  # noqa: BLE001 - reported to the test
        report(directory, rank, "FAIL %s: %s" % (type(e).__name__, e))
        sys.exit(1)


def report(directory, rank, text):
    line = "cluster-ranks %d %s" % (rank, text)
    print(line, flush=True)
    if rank < 0:  # the Cluster did not open: no rank to name a file by
        rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "-1"))
    with open("%s.result-%d" % (directory, rank), "w") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
