#!/usr/bin/env bash
# Builds, once, the PyPI stack a PyTorch recommendation user has (recent
# torch, TorchRec and FBGEMM's CPU operators, NumPy 2) in a venv beside the
# Debian one that `make test` uses, so `make test-torch` runs the Python
# suite and the TorchRec tests against both. Reused while its stamp names the
# pins below; a change of a pin rebuilds it. About 2 minutes and 5.5 GB.
#
#   bash scripts/torch_venv.sh [DIR]     # DIR: .venv-torch by default
#
# torchrec goes in with --no-deps: its metadata asks for the CUDA fbgemm-gpu,
# which fails to load on a machine without a driver; fbgemm-gpu-cpu gives the
# same operators on the CPU (fbgemm-gpu-cpu 1.9 needs torch 2.14).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-${STRATA_TORCH_VENV:-.venv-torch}}
PYTHON=${PYTHON:-$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)}

PINS="torch==2.14.1 fbgemm-gpu-cpu==1.9.0 torchmetrics==1.0.3 tensordict==0.15.3 numpy==2.4.6 tqdm==4.70.1 pyre-extensions==0.0.32 pytest==9.2.0"
NO_DEPS="torchrec==1.9.2"
STAMP="$DIR/strata-stamp"
WANT="$($PYTHON -c 'import sys; print(sys.version.split()[0])') $PINS --no-deps $NO_DEPS"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "torch_venv: $DIR is up to date ($NO_DEPS, $(grep -o 'torch==[^ ]*' <<<"$PINS" | head -1))"
  exit 0
fi

echo "torch_venv: building $DIR with $PYTHON: $PINS, then --no-deps $NO_DEPS"
start=$(date +%s)
rm -rf "$DIR"
$PYTHON -m venv "$DIR"
"$DIR/bin/python" -m pip install --quiet --disable-pip-version-check $PINS
"$DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps $NO_DEPS
# The stamp goes last: an interrupted build is rebuilt from scratch.
"$DIR/bin/python" -c 'import torch, torchrec, fbgemm_gpu, numpy, pytest'
echo "$WANT" >"$STAMP"
echo "torch_venv: built $DIR in $(( $(date +%s) - start )) s, $(du -sh "$DIR" | cut -f1)"
"$DIR/bin/python" -m pip freeze --disable-pip-version-check | grep -Ei '^(torch|torchrec|fbgemm|numpy|tensordict|torchmetrics)=' || true
