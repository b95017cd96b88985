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
