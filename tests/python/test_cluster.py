"""strata.Cluster under real mpirun (tests/python/cluster_ranks.py, one rank
per process) for 1, 2 and 3 ranks: every rank's pulls equal a NumPy model of
all ranks' pushes, and a missing table is refused on every rank. Skips, with
the reason, when the build has no MPI or mpirun is missing."""
import os
import shutil
import subprocess
import sys

import pytest

import strata

HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun_command(ranks, directory):
    cmd = [shutil.which("mpirun"), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # One machine: shared memory and self only; ranks yield while they wait.
    cmd += ["--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
            "--mca", "mpi_yield_when_idle", "1", "-np", str(ranks),
            "-x", "PYTHONPATH", sys.executable, os.path.join(HERE, "cluster_ranks.py"), directory]
    return cmd


@pytest.mark.skipif(not hasattr(strata, "Cluster"), reason="the build has no MPI (STRATA_MPI)")
@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="mpirun is not installed (scripts/deps.sh installs openmpi-bin)")
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_cluster_ranks_agree_with_the_model(tmp_path, ranks):
    run = subprocess.run(mpirun_command(ranks, str(tmp_path / "c")), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    # Each rank's line, from its own file.
    lines = []
    for r in range(ranks):
        with open("%s.result-%d" % (tmp_path / "c", r)) as f:
            lines.append(f.read().strip())
    assert [l.split()[1] for l in lines] == [str(r) for r in range(ranks)], lines
    assert all(l.split()[2] == "ok" for l in lines), lines
    # The cluster manifest, and one shard per rank beside the lock its rank took.
    assert sorted(p for p in os.listdir(tmp_path / "c") if p.startswith("rank-")) == \
        sorted(["rank-%d" % r for r in range(ranks)] + ["rank-%d.LOCK" % r for r in range(ranks)])
