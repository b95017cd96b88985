#!/usr/bin/env bash
# `strata bench io` and fio side by side on the same file, same block size,
# queue depth and thread count (fio: --ioengine=io_uring --direct=1
# --numjobs=1). Prints one line per case with both IOPS and their ratio.
#
#   scripts/bench_io_vs_fio.sh [build-dir] [file] [seconds]
# Environment: SIZE_GIB (1), CASES ("randread:4096:64 randread:65536:64 randwrite:4096:64"),
#              BACKEND (uring), ROUNDS (1: alternate strata/fio this many times).
set -euo pipefail
build=${1:-build}
file=${2:-/tmp/strata_bench_io.dat}
seconds=${3:-5}
size_gib=${SIZE_GIB:-1}
backend=${BACKEND:-uring}
rounds=${ROUNDS:-1}
cases=${CASES:-"randread:4096:64 randread:65536:64 randwrite:4096:64"}
bin="$build/bin/strata"
command -v fio >/dev/null || { echo "fio not found (scripts/deps.sh installs it)" >&2; exit 1; }

# Lay the file out once (strata bench io extends it when shorter).
"$bin" bench io --file "$file" --size-gib "$size_gib" --seconds 0.2 --json >/dev/null

printf '%-10s %7s %5s %5s %12s %12s %7s %10s %10s\n' mode block depth round \
  strata_iops fio_iops ratio s_p99_us f_p99_us
for c in $cases; do
  IFS=: read -r mode block depth <<<"$c"
  for round in $(seq 1 "$rounds"); do
    s=$("$bin" bench io --file "$file" --size-gib "$size_gib" --block "$block" --depth "$depth" \
          --threads 1 --mode "$mode" --seconds "$seconds" --backend "$backend" --json)
    f=$(fio --name=cmp --filename="$file" --size="${size_gib}G" --ioengine=io_uring --direct=1 \
          --rw="$mode" --bs="$block" --iodepth="$depth" --numjobs=1 --time_based \
          --runtime="$seconds" --norandommap --randrepeat=0 --group_reporting \
          --output-format=json 2>/dev/null)
    python3 - "$mode" "$block" "$depth" "$round" "$s" "$f" <<'PY'
import json, sys
mode, block, depth, rnd, s, f = sys.argv[1:]
s = json.loads(s)
job = json.loads(f)["jobs"][0]["write" if "write" in mode else "read"]
fio_iops = job["iops"]
fio_p99 = job["clat_ns"]["percentile"]["99.000000"] / 1000.0
print(f"{mode:<10} {block:>7} {depth:>5} {rnd:>5} {s['iops']:>12.0f} {fio_iops:>12.0f} "
      f"{s['iops'] / fio_iops:>7.2f} {s['lat_us']['p99']:>10.1f} {fio_p99:>10.1f}")
PY
  done
done
