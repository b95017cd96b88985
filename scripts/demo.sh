#!/usr/bin/env bash
# `make demo`: the most complete end-to-end run Strata has today.
set -euo pipefail
build=${1:-build}
bin="$build/bin/strata"
echo "== strata info"
"$bin" info
