#!/usr/bin/env bash
# make lint: a clang build with thread-safety analysis as an error, then
# clang-format and clang-tidy (.clang-tidy) over the non-test sources. Runs
# every step, prints what failed, exits non-zero if any did.
# Usage: scripts/lint.sh BUILD_DIR   (JOBS=n for parallelism)
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-lint}"
jobs="${JOBS:-$(nproc)}"
failed=()

# 1. Clang build of the libraries, tools and tests: -Wthread-safety and
#    -Wthread-safety-beta (lock order) with -Werror=thread-safety
#    (STRATA_LINT, cmake/StrataWarnings.cmake).
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DSTRATA_CUDA=OFF -DSTRATA_LINT=ON || exit 1
fi
cmake --build "$build" -j "$jobs" || failed+=("clang build (thread-safety)")

# 1b. The analysis still catches what it must: tests/lint/unguarded_access.cc
#     case 0 compiles, cases 1..4 (an unguarded write, a REQUIRES call without
#     the lock, the wrong mutex, re-entering an EXCLUDES) each fail with a
#     thread-safety error.
tsa_flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety -I. -Iinclude)
tsa_src=tests/lint/unguarded_access.cc
if ! clang++ "${tsa_flags[@]}" -DSTRATA_LINT_CASE=0 "$tsa_src"; then
  failed+=("thread-safety check: case 0 of $tsa_src must compile")
fi
for c in 1 2 3 4; do
  if out=$(clang++ "${tsa_flags[@]}" -DSTRATA_LINT_CASE=$c "$tsa_src" 2>&1); then
    failed+=("thread-safety check: case $c of $tsa_src compiled; the analysis missed it")
  elif ! grep -q 'Wthread-safety' <<<"$out"; then
    echo "$out" | head -5
    failed+=("thread-safety check: case $c of $tsa_src failed for another reason")
  fi
done

# 2. Formatting.
make --no-print-directory format-check >"$build/format-check.log" 2>&1 ||
  { grep -m 20 'error:' "$build/format-check.log"
    failed+=("format-check ($(grep -c 'error:' "$build/format-check.log") places; $build/format-check.log)"); }

# 3. clang-tidy over our non-test translation units (headers through
#    .clang-tidy's HeaderFilterRegex), with the build's compile commands.
mapfile -t sources < <(git ls-files '*.cc' | grep -v -E '^(tests|cmake)/')
run-clang-tidy -quiet -p "$build" -j "$jobs" "${sources[@]/#/$PWD/}" >"$build/clang-tidy.log" 2>&1 ||
  { sed 's/\x1b\[[0-9;]*m//g' "$build/clang-tidy.log" | grep -A3 'error:' | head -60
    failed+=("clang-tidy ($build/clang-tidy.log)"); }

if [ ${#failed[@]} -ne 0 ]; then
  printf 'lint: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "lint: clean"
