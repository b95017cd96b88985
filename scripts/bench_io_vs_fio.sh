#!/usr/bin/env bash
# `strata bench io` and fio side by side on the same file, same block size,
# queue depth and thread count (fio: --ioengine=io_uring --direct=1
# --numjobs=1). Prints one line per case with both IOPS and their ratio.
#
#   scripts/bench_io_vs_fio.sh [build-dir] [file] [seconds]
# Environment: SIZE_GIB (1), CASES ("randread:4096:64 randread:65536:64 randwrite:4096:64"),
#              BACKEND (uring), ROUNDS (1: this many rounds, strata first in odd ones),
#              FIO_PIN (0; 1: fio runs on the core strata's I/O thread uses),
#              DIRECT (1; 0: page-cache I/O on both sides, which measures the
#              engines' CPU cost rather than the device).
set -euo pipefail
build=${1:-build}
file=${2:-/tmp/strata_bench_io.dat}
seconds=${3:-5}
size_gib=${SIZE_GIB:-1}
backend=${BACKEND:-uring}
rounds=${ROUNDS:-1}
direct=${DIRECT:-1}
buffered_flag=()
[ "$direct" = 0 ] && buffered_flag=(--buffered)
cases=${CASES:-"randread:4096:64 randread:65536:64 randwrite:4096:64"}
bin="$build/bin/strata"
command -v fio >/dev/null || { echo "fio not found (scripts/deps.sh installs it)" >&2; exit 1; }

# Lay the file out once for both tools when it is missing or shorter (strata
# bench io fills only a file it creates, and its fill counts in --seconds);
# both write it in the write cases (strata: --overwrite). Then note the core
# strata's I/O thread runs on.
size_bytes=$(python3 -c "print(int($size_gib * 2**30))")
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" -lt "$size_bytes" ]; then
  fio --name=layout --filename="$file" --size="${size_gib}G" --rw=write --bs=1M --direct=1 \
    --output-format=terse >/dev/null
fi
core=$("$bin" bench io --file "$file" --size-gib "$size_gib" --seconds 0.2 --json |
       python3 -c 'import json, sys; print(json.load(sys.stdin)["io_cores"][0])')
fio_pin=()
[ "${FIO_PIN:-0}" = 1 ] && fio_pin=(--cpus_allowed="$core")
echo "strata I/O core: $core; fio ${fio_pin[*]:-unpinned}"

printf '%-10s %7s %5s %5s %12s %12s %7s %10s %10s %9s %9s\n' mode block depth round \
  strata_iops fio_iops ratio s_p99_us f_p99_us s_cpu_us f_cpu_us
run_strata() {
  "$bin" bench io --file "$file" --size-gib "$size_gib" --block "$block" --depth "$depth" \
    --threads 1 --mode "$mode" --seconds "$seconds" --backend "$backend" "${buffered_flag[@]}" \
    --overwrite --json
}
run_fio() {
  fio --name=cmp --filename="$file" --size="${size_gib}G" --ioengine=io_uring --direct="$direct" \
    --rw="$mode" --bs="$block" --iodepth="$depth" --numjobs=1 --time_based \
    --runtime="$seconds" --norandommap --randrepeat=0 --group_reporting \
    "${fio_pin[@]}" --output-format=json 2>/dev/null
}

for c in $cases; do
  IFS=: read -r mode block depth <<<"$c"
  for round in $(seq 1 "$rounds"); do
    # Alternate which runs first, so neither always meets the other's leftovers.
    if [ $((round % 2)) = 1 ]; then
      s=$(run_strata); f=$(run_fio)
    else
      f=$(run_fio); s=$(run_strata)
    fi
    python3 - "$mode" "$block" "$depth" "$round" "$s" "$f" <<'PY'
import json, sys
mode, block, depth, rnd, s, f = sys.argv[1:]
s = json.loads(s)
job = json.loads(f)["jobs"][0]["write" if "write" in mode else "read"]
fio_iops = job["iops"]
fio_p99 = job["clat_ns"]["percentile"]["99.000000"] / 1000.0
fj = json.loads(f)["jobs"][0]
fio_cpu = (fj["usr_cpu"] + fj["sys_cpu"]) / 100.0 * fj["job_runtime"] * 1e3 / max(1, job["total_ios"])
print(f"{mode:<10} {block:>7} {depth:>5} {rnd:>5} {s['iops']:>12.0f} {fio_iops:>12.0f} "
      f"{s['iops'] / fio_iops:>7.2f} {s['lat_us']['p99']:>10.1f} {fio_p99:>10.1f} "
      f"{s['cpu_us_per_io']:>9.2f} {fio_cpu:>9.2f}")
PY
  done
done
