"""strata.distributed under torchrun (tests/python/distributed_ranks.py,
gloo on 127.0.0.1; where this torch's torchrun is broken, as Debian's 1.13
under Python 3.11, the ranks start with the environment torchrun gives): 2 ranks training strata.torch's EmbeddingBagCollection
over a sharded store end with the rows one process gets from the same
global batches (within float summation order), each rank's shard holding
exactly the keys strata.cluster_owner gives it; the cluster checkpoints,
reopens at 2 ranks with its rows and its module state, and refuses 1 rank
naming both world sizes. Skips, with the reason, without torch.distributed,
gloo, torchrun or a build with the cluster."""
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed  # noqa: E402
import strata  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _why_not():
    if not torch.distributed.is_available():
        return "this torch has no torch.distributed"
    if not torch.distributed.is_gloo_available():
        return "this torch.distributed has no gloo backend"
    if not hasattr(strata, "Cluster"):
        return "the build has no cluster (STRATA_MPI)"
    import importlib.util
    if importlib.util.find_spec("torch.distributed.run") is None:
        return "torchrun (torch.distributed.run) is missing"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_works():
    """Debian's torch 1.13 under Python 3.11 has a torchrun that cannot
    start workers (its Std.from_str returns None for every --redirects)."""
    from torch.distributed.elastic.multiprocessing.api import Std
    return Std.from_str("0") is not None


class _Ranks:
    """What torchrun does on one node, for a torch whose torchrun is broken:
    `ranks` processes with its environment (RANK, LOCAL_RANK, WORLD_SIZE,
    LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""

    def __init__(self, cmd, ranks, port, env):
        self.procs = []
        for r in range(ranks):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks),
                     LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            self.procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, text=True))

    def wait(self):
        outs = [p.communicate(timeout=300)[0] for p in self.procs]
        code = next((p.returncode for p in self.procs if p.returncode != 0), 0)
        return subprocess.CompletedProcess(self.procs[0].args, code, "".join(outs), "")


def torchrun(ranks, mode, directory):
    """Runs distributed_ranks.py on `ranks` processes under torchrun (this
    interpreter's), or with torchrun's environment where its torchrun is
    broken; returns the run and each rank's result line."""
    script = [os.path.join(HERE, "distributed_ranks.py"), mode, directory]
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    port = free_port()
    if torchrun_works():
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
               "--nnodes", "1", "--master_addr", "127.0.0.1", "--master_port", str(port)]
        run = subprocess.run(cmd + script, capture_output=True, text=True, timeout=300, env=env)
    else:
        run = _Ranks([sys.executable] + script, ranks, port, env).wait()
    lines = []
    for r in range(ranks):
        path = "%s.result-%d" % (directory, r)
        lines.append(open(path).read().strip() if os.path.exists(path) else "")
        if os.path.exists(path):
            os.remove(path)
    return run, lines


def single_process_rows(tmp_path, mode="train"):
    """The plan's global batches on one strata.Store: table -> {key: row}."""
    import distributed_ranks as ranks
    with strata.Store(str(tmp_path / "single"), ranks.tables(), use_gpu=False,
                      **ranks.TIERS) as store:
        train = ranks.train if mode == "train" else ranks.train_torchrec
        train(store, store.register_worker(), 0, 1)
        out = {}
        for t in ranks.TABLES:
            keys, rows = ranks.rows_of(store, t)
            out[t] = dict(zip(keys.tolist(), rows))
    return out


def check_rows_equal_one_process(tmp_path, directory, mode):
    want = single_process_rows(tmp_path, mode)
    for t, rows in want.items():
        got = {}
        for r in range(2):
            with np.load("%s.rows-%d.npz" % (directory, r)) as f:
                keys, shard = f[t + ".keys"], f[t + ".rows"]
            assert not set(keys.tolist()) & set(got), "a key on both shards"
            got.update(zip(keys.tolist(), shard))
        assert sorted(got) == sorted(rows), t
        assert (-1) in got or mode != "train"  # key 2^64 - 1
        for k, row in rows.items():
            np.testing.assert_allclose(got[k], row, rtol=1e-5, atol=1e-6,
                                       err_msg="table %s key %d" % (t, k))


def test_two_ranks_train_to_one_process_rows_and_reopen(tmp_path):
    directory = str(tmp_path / "c")
    run, lines = torchrun(2, "train", directory)
    assert run.returncode == 0, "\n".join(lines) + run.stdout + run.stderr
    assert all(l.split()[2] == "ok" for l in lines), lines
    assert strata.read_cluster_manifest(directory)["world_size"] == 2
    assert sorted(p for p in os.listdir(directory) if p.startswith("rank-")) == \
        ["rank-0", "rank-0.LOCK", "rank-1", "rank-1.LOCK"]
    check_rows_equal_one_process(tmp_path, directory, "train")

    run, lines = torchrun(2, "reopen", directory)
    assert run.returncode == 0, "\n".join(lines) + run.stdout + run.stderr
    assert all(l.split()[2] == "ok" for l in lines), lines


def test_another_world_size_is_refused_naming_both(tmp_path):
    directory = str(tmp_path / "c")
    run, lines = torchrun(2, "train", directory)
    assert run.returncode == 0, "\n".join(lines) + run.stdout + run.stderr
    run, lines = torchrun(1, "open", directory)
    assert run.returncode != 0
    assert "FAIL InvalidArgument" in lines[0], lines
    assert "cluster of 2 ranks; this one has 1" in lines[0], lines


def test_two_ranks_of_strata_torchrec_train_to_one_process_rows(tmp_path):
    pytest.importorskip("torchrec", reason="TorchRec is not installed (make test-torch has it)")
    directory = str(tmp_path / "c")
    run, lines = torchrun(2, "torchrec", directory)
    assert run.returncode == 0, "\n".join(lines) + run.stdout + run.stderr
    check_rows_equal_one_process(tmp_path, directory, "torchrec")
