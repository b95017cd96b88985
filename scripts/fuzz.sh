#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined) in BUILD_DIR (build-fuzz) and runs
# each for FUZZ_SECONDS (60) from a copy of its checked-in corpus
# tests/fuzz/corpus/<name>/. Fails when any target crashes, breaks one of its
# checked properties, leaks, times out on one input (10 s), or allocates
# FUZZ_MALLOC_MB (64) at once: inputs are a few KiB, so an allocation that
# large trusts a size read from the input. The input that did it is kept in
# BUILD_DIR/fuzz/artifacts/; once fixed, add it to the corpus as crash-<what>.
#
# Usage: scripts/fuzz.sh [BUILD_DIR]   env: FUZZ_SECONDS, FUZZ_TARGETS (names,
# default all), FUZZ_MALLOC_MB, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
malloc_mb=${FUZZ_MALLOC_MB:-64}
jobs=${JOBS:-$(nproc)}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSTRATA_CUDA=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_FUZZ=ON >/dev/null
cmake --build "$build" -j "$jobs" --target strata_fuzz

targets=${FUZZ_TARGETS:-$(cd tests/fuzz && ls -- *_fuzz.cc | sed 's/_fuzz\.cc$//')}
work="$build/fuzz"
mkdir -p "$work/artifacts" "$work/logs"
failed=()
for name in $targets; do
  rm -rf "$work/corpus/$name"
  mkdir -p "$work/corpus"
  cp -r "tests/fuzz/corpus/$name" "$work/corpus/$name"
  echo "fuzz: $name for ${seconds}s"
  start=$(date +%s)
  if "$build/bin/${name}_fuzz" "$work/corpus/$name" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb="$malloc_mb" -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/$name-" >"$work/logs/$name.log" 2>&1; then
    runs=$(grep -m1 'stat::number_of_executed_units' "$work/logs/$name.log" | awk '{print $2}')
    cov=$(grep -E '^#[0-9]+.*DONE' "$work/logs/$name.log" | grep -oE 'cov: [0-9]+' | tail -1)
    echo "fuzz: $name ok: ${runs:-?} runs in $(($(date +%s) - start))s, ${cov:-cov: ?}," \
         "corpus $(ls "$work/corpus/$name" | wc -l) inputs"
  else
    echo "fuzz: $name FAILED (log $work/logs/$name.log):"
    grep -E 'ERROR|assertion failed|SUMMARY|Test unit written' "$work/logs/$name.log" | head -8
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: every target ran ${seconds}s without a failure"
