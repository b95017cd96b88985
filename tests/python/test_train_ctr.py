"""examples/python/train_ctr.py against `strata train` on the same data and
seed: the same FM + LR model reaches the same validation AUC (within 0.01)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (scripts/deps.sh installs python3-torch)")

SOURCE = os.environ.get("STRATA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("STRATA_BUILD_DIR", os.path.join(SOURCE, "build"))
DATA = os.path.join(SOURCE, "examples", "train", "data", "criteo_kaggle_train_head10k.txt")
ARGS = ["--rows-max", "4000", "--device-rows", "2048", "--dram-rows", "8192", "--batch-size",
        "64", "--epochs", "2", "--lookahead", "2", "--seed", "1", "--json"]


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python")))
    return json.loads(out.stdout[out.stdout.index("{"):])


def test_example_auc_matches_strata_train(tmp_path):
    ours = run([sys.executable, os.path.join(SOURCE, "examples", "python", "train_ctr.py"), DATA,
                "--dir", str(tmp_path / "py")] + ARGS)
    theirs = run([os.path.join(BUILD, "bin", "strata"), "train", DATA, "--dir",
                  str(tmp_path / "cpp"), "--no-gpu"] + ARGS)
    assert ours["rows"] == 4000 and ours["validation_rows"] == 800
    assert abs(ours["validation_auc"] - theirs["validation_auc"]) <= 0.01, (ours, theirs)
    assert ours["validation_auc"] > 0.6
    assert ours["pulls"] > 0 and ours["t0_hits"] > 0
