#!/usr/bin/env bash
# `make demo`: the most complete end-to-end run Strata has. Trains the click
# model of examples/train (factorization machine + logistic regression,
# embeddings in Strata with AdaGrad) on the shipped Criteo sample, with tiers
# far smaller than the key count so that all three work: 2,048 device rows <<
# 8,192 DRAM rows << 43,579 unique keys (a batch of 64 rows touches ~800).
# The loader signals intents 2 batches ahead. Prints per-epoch metrics and a
# summary: validation AUC and logloss, rows/s, hits per tier, and the SSD
# reads set against Belady's MIN for the same run (the trace library's
# simulator, as in `strata trace opt`, on the run's own access trace). Then
# the same training without intents, the two side by side (SSD reads, stall
# fraction, rows/s, MIN) and a PNG of hits per tier and SSD reads per epoch
# for both (scripts/demo_plot.py), written to <build dir>/demo/.
#
# Usage: bash scripts/demo.sh <build dir>
set -euo pipefail
build=${1:-build}
bin="$build/bin/strata"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data="$here/examples/train/data/criteo_kaggle_train_head10k.txt"

echo "== strata info"
"$bin" info
echo
echo "== strata train (Criteo sample: 10,000 rows, last 20% validation)"
args=(train "$data" --device-rows 2048 --dram-rows 8192 --batch-size 64 --epochs 2
      --lookahead 2 --seed 1)
echo "\$ strata ${args[*]}"
"$bin" "${args[@]}"

out="$build/demo"
mkdir -p "$out"
echo
echo "== the value of intents: the same training with intents and with --no-intents"
echo "\$ strata ${args[*]} --json > $out/intents.json"
"$bin" "${args[@]}" --json > "$out/intents.json"
echo "\$ strata ${args[*]} --no-intents --json > $out/no_intents.json"
"$bin" "${args[@]}" --no-intents --json > "$out/no_intents.json"
python="$(command -v /usr/bin/python3 || command -v python3)"
"$python" "$here/scripts/demo_plot.py" "$out/intents.json" "$out/no_intents.json" \
  "$out/tiers_per_epoch.png"
