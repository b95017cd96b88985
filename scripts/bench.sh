#!/usr/bin/env bash
# `make bench`: a short run of every benchmark, side by side with its baseline.
set -euo pipefail
build=${1:-build}
bin="$build/bin/strata"
"$bin" info
