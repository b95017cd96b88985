#!/usr/bin/env bash
# `make bench`: a short run of every benchmark, each side by side with its
# baseline (fio, RocksDB, memcpy/unordered_map, the host runner, the
# no-intent replay). Small sizes so it finishes in a few minutes; the
# subsystem pages in docs/ give the commands for full-size runs.
set -euo pipefail
build=${1:-build}
bin="$build/bin/strata"
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/strata-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"$bin" info
echo "== io: IoThreads against fio (4 KiB random reads, O_DIRECT)"
# One file for both, laid out first: bench io's own fill would count in its
# --seconds.
head -c $((1 << 30)) /dev/urandom >"$scratch/io.dat"
"$bin" bench io --file "$scratch/io.dat" --size-gib 1 --block 4096 --depth 32 --threads 1 \
  --mode randread --seconds 3
if command -v fio >/dev/null; then
  fio --name=randread --filename="$scratch/io.dat" --rw=randread --bs=4k --direct=1 \
    --ioengine=io_uring --iodepth=32 --runtime=3 --time_based --size=1G --output-format=terse \
    | awk -F';' '{printf "fio: %s IOPS\n", $8}'
fi
echo "== ssd: native store against RocksDB"
"$bin" bench ssd --dir "$scratch/ssd" --rows 200000 --seconds 3
echo "== dram: T1 cache against an unordered_map baseline and memcpy"
"$bin" bench dram --rows 200000 --dim 64 --threads 2 --batch 4096
echo "== table: T0 device table (GPU when visible, else the host runner)"
"$bin" bench table --capacity 1048576 --dim 8,64 --load-factor 0.5,0.85 --batch 65536 --iters 5
echo "== engine: Intent, AdvanceClock, Pull/Push (Google Benchmark)"
"$build/bin/strata_engine_bench" --benchmark_min_time=0.2
echo "== replay: intents against no intents against Belady's MIN"
"$bin" trace gen --out "$scratch/k.trace" --preset criteo-kaggle --scale 0.01 --batch-size 512 \
  --batches 60 --seed 1 >/dev/null
"$bin" trace opt "$scratch/k.trace" --cache-rows 8000 --lookahead 2
"$bin" replay "$scratch/k.trace" --dir "$scratch/r1" --device-rows 3000 --dram-rows 5000 --lookahead 2
"$bin" replay "$scratch/k.trace" --dir "$scratch/r2" --device-rows 3000 --dram-rows 5000 --no-intents
