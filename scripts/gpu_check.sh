#!/usr/bin/env bash
# The Store on a GPU, verified in one command (docs/gpu/README.md).
#
#   bash scripts/gpu_check.sh OUT [--quick]   run the checks, write OUT/summary.json + OUT/log
#   bash scripts/gpu_check.sh --pack [DIR]    build here (sm_90) and pack what the run needs
#
# Run: the GPU tests (every test labelled gpu: the device table's and the
# Store's, parameterized over the host and GPU runner), compute-sanitizer's
# memcheck and racecheck over the GPU-only tests, the engine benchmark
# (resident Pull and Pull + Push at 1,048,576 keys x dim 64 beside `strata
# bench table`'s find and push of the same shape), `strata replay` and
# `strata train` with T0 on the GPU and on the host runner (same SSD reads,
# AUC within 1e-4), `strata bench cluster` under mpirun at 2, 3 and 4 host
# ranks (the cluster's exchange against plain MPI_Alltoallv, a core per rank
# on a lent machine), `strata bench dram` (the DRAM tier against a random
# gather, dimensions 16 and 64, 1 to 8 threads, with the automatic shards and
# with one), and the side-by-side with
# HierarchicalKV when it was built. Without a GPU it says so and runs the host parts, so it is tested
# on machines without one (tests/scripts/gpu_check_test.cc runs --quick).
# OUT receives three files (a lent machine hands back only a few): log (every
# step's output), summary.json (the steps' outcomes, the numbers and the
# issue's checks) and details.tar.gz (each step's own output and JSON). The
# exit status is 0 when every step that ran passed.
#
# Binaries: from the pack ($STRATA_GPU_PACK, default .gpu-pack/ at the
# repository root) when it exists, else from $STRATA_GPU_BUILD (default
# build/), configured and built when its strata binary is missing. A GPU
# machine without the project's Debian packages (liburing, RocksDB, ...)
# runs from a pack made here: `--pack` builds with CUDA for sm_90 (and the
# HierarchicalKV side-by-side when ../shared/baselines/HierarchicalKV or
# $STRATA_HKV_DIR exists) and copies the binaries, Open MPI's runtime
# (mpirun, orted, plugins, help files; relocated by OPAL_PREFIX at the run),
# the shared libraries they load that are not the C library or the GPU
# driver, the test data and the commit into the pack, compressed. Carry the
# pack with the run. With STRATA_GPU_BASELINE=<commit> (e.g. the previous
# main), `--pack` also builds that commit's CLI (no CUDA, in a worktree under
# the build folder) into the pack, and the run times its `bench dram`
# between two runs of this commit's (dram_base_d<dim>, dram_again_d<dim>):
# the DRAM tier of both commits side by side on one machine.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The test binaries labelled gpu (tests/<module>/<name>.cc: strata-test-labels).
gpu_tests() {
  grep -l '^// strata-test-labels:.*\bgpu\b' "$here"/tests/*/*_test.cc | while read -r f; do
    rel=${f#"$here"/tests/}
    echo "${rel%.cc}" | tr / _
  done
}
# The tests that run only on a GPU (sanitized: the host runner has nothing for it).
gpu_only_tests() { echo kernels_device_table_gpu_test; }

# Open MPI's runtime into DIR, laid out as under its prefix (mpirun, orted,
# the plugins, the help files), for the cluster steps on a machine without
# Open MPI: the run points OPAL_PREFIX at it. Nothing when this machine has
# no mpirun.
pack_ompi() {
  local dir=$1 mpirun prefix rel
  mpirun=$(command -v mpirun) || return 0
  command -v ompi_info >/dev/null || return 0
  path_of() { ompi_info --parsable --path "$1" | sed -n "s/^path:$1://p"; }
  prefix=$(path_of prefix)
  [[ -n $prefix ]] || return 0
  for what in bindir pkglibdir pkgdatadir; do
    local from
    from=$(path_of $what)
    rel=${from#"$prefix"}
    [[ $rel != "$from" && -d $from ]] || { echo "gpu_check: Open MPI's $what ($from) is not under $prefix" >&2; return 1; }
    mkdir -p "$dir$rel" || return 1
    if [[ $what == bindir ]]; then
      cp -L "$(readlink -f "$mpirun")" "$dir$rel/mpirun" && cp -L "$from/orted" "$dir$rel/" || return 1
    else
      cp -rL "$from/." "$dir$rel/" || return 1
    fi
  done
}

# STRATA_GPU_BASELINE's CLI: the commit checked out in a worktree at
# $1/baseline-src (reused by later packs), built in $1/baseline without CUDA
# (the DRAM tier is host code).
build_baseline() {
  local build=$1 commit=$2 src=$1/baseline-src
  if [[ -d $src ]]; then
    git -C "$src" checkout -q --detach "$commit" || return 1
  else
    git -C "$here" worktree add -q --detach "$src" "$commit" || return 1
  fi
  cmake -S "$src" -B "$build/baseline" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=OFF \
    >/dev/null || return 1
  cmake --build "$build/baseline" -j "$(nproc)" --target strata_cli || return 1
}

pack() {
  local dir=${1:-$here/.gpu-pack}
  # A baseline that names no commit is an error before anything is built.
  if [[ -n ${STRATA_GPU_BASELINE:-} ]] &&
    ! git -C "$here" rev-parse --verify --quiet "${STRATA_GPU_BASELINE}^{commit}" >/dev/null; then
    echo "gpu_check: STRATA_GPU_BASELINE='$STRATA_GPU_BASELINE' names no commit of $here" >&2
    return 2
  fi
  local build=${STRATA_GPU_BUILD:-$here/build}
  local hkv=${STRATA_HKV_DIR:-}
  if [[ -z $hkv && -f $here/../shared/baselines/HierarchicalKV/include/merlin_hashtable.cuh ]]; then
    hkv=$(cd "$here/../shared/baselines/HierarchicalKV" && pwd)
  fi
  bash "$here/scripts/deps.sh" || return 1
  local cache=(-DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
  [[ -n $hkv ]] && cache+=("-DSTRATA_HKV_DIR=$hkv")
  cmake -S "$here" -B "$build" -G Ninja "${cache[@]}" >/dev/null || return 1
  local targets=(strata_cli strata_engine_bench $(gpu_tests))
  [[ -n $hkv ]] && targets+=(strata_hkv_side_by_side)
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || return 1
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" "$dir/data"
  local bins=()
  for t in "${targets[@]}"; do bins+=("$build/bin/${t/#strata_cli/strata}"); done  # the CLI's file is strata
  local baseline=${STRATA_GPU_BASELINE:-}
  if [[ -n $baseline ]]; then
    build_baseline "$build" "$baseline" || { echo "gpu_check: cannot build the baseline $baseline" >&2; return 1; }
    cp "$build/baseline/bin/strata" "$build/baseline/bin/strata_baseline" || return 1
    bins+=("$build/baseline/bin/strata_baseline")
    git -C "$build/baseline-src" rev-parse HEAD >"$dir/BASELINE" || return 1
  fi
  pack_ompi "$dir/ompi" || return 1
  # Shared libraries outside the C library, the driver and NCCL (the GPU
  # machine has its own of those: NCCL is 218 MB of device code that hardly
  # compresses, and the lent machines carry NCCL 2.28 in the system's library
  # path); the C++ runtime goes along, in case its is older.
  ldd "${bins[@]}" $(find "$dir/ompi" -type f 2>/dev/null) 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | libnccl.so*) ;;
      *) cp -L "$lib" "$dir/lib/" || return 1 ;;
    esac
  done
  cp "${bins[@]}" "$dir/bin/" || return 1
  strip --strip-unneeded "$dir"/bin/* "$dir"/lib/* 2>/dev/null
  cp "$here/examples/train/data/criteo_kaggle_train_head10k.txt" "$dir/data/"
  (cd "$here" && git rev-parse HEAD 2>/dev/null || echo unknown) >"$dir/COMMIT"
  local parts=(bin lib data)
  [[ -d $dir/ompi ]] && parts+=(ompi)
  (cd "$dir" && tar -cJf payload.tar.xz "${parts[@]}" && rm -rf "${parts[@]}") || return 1
  echo "gpu_check: packed $(du -sh "$dir" | cut -f1) into $dir (commit $(cat "$dir/COMMIT"))"
}

if [[ ${1:-} == --pack ]]; then
  [[ $# -le 2 ]] || { echo "gpu_check: --pack takes one folder at most" >&2; exit 2; }
  pack "${2:-}"
  exit $?
fi

usage="usage: gpu_check.sh OUT [--quick] | gpu_check.sh --pack [DIR]"
if [[ $# -lt 1 || $# -gt 2 || -z $1 || $1 == -* ]]; then
  echo "gpu_check: $usage" >&2
  exit 2
fi
out=$1
quick=0
if [[ $# == 2 ]]; then
  [[ $2 == --quick ]] || { echo "gpu_check: unknown argument '$2'; $usage" >&2; exit 2; }
  quick=1
fi
mkdir -p "$out" || { echo "gpu_check: cannot create $out" >&2; exit 1; }
out=$(cd "$out" && pwd)
log=$out/log
: >"$log"
say() { echo "gpu_check: $*" | tee -a "$log"; }
work=$(mktemp -d "${TMPDIR:-/tmp}/strata_gpu_check.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
detail=$work/detail  # each step's output, packed into OUT/details.tar.gz
mkdir -p "$detail"
: >"$detail/steps.tsv"

# ---- Binaries ---------------------------------------------------------------
pack_dir=${STRATA_GPU_PACK:-$here/.gpu-pack}
data=$here/examples/train/data/criteo_kaggle_train_head10k.txt
commit=$(cd "$here" && git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -f $pack_dir/payload.tar.xz ]]; then
  bin=$work/pack/bin
  mkdir -p "$work/pack" && tar -xJf "$pack_dir/payload.tar.xz" -C "$work/pack" || exit 1
  export LD_LIBRARY_PATH=$work/pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  data=$work/pack/data/criteo_kaggle_train_head10k.txt
  commit=$(cat "$pack_dir/COMMIT")
  say "binaries from the pack $pack_dir (commit $commit)"
else
  build=${STRATA_GPU_BUILD:-$here/build}
  if [[ ! -x $build/bin/strata ]]; then
    say "building $build"
    (bash "$here/scripts/deps.sh" && cmake -S "$here" -B "$build" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
      cmake --build "$build" -j "$(nproc)") >>"$log" 2>&1 || {
      say "build failed (see $log)"
      exit 1
    }
  fi
  bin=$build/bin
  say "binaries from $bin (commit $commit)"
fi
if ! "$bin/strata" info >>"$log" 2>&1; then
  say "$bin/strata does not start here (missing libraries?): see $log"
  exit 1
fi

gpu=0
gpu_name=none
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
  gpu_name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
fi
if [[ $gpu == 1 ]]; then
  say "GPU: $gpu_name"
else
  say "no GPU visible: running the host parts only (GPU steps are recorded as skipped)"
fi

# step NAME [--gpu] CMD...: runs CMD with its output in DETAIL/NAME.txt and
# the log; records NAME, pass|fail|skip and seconds in steps.tsv. A step
# gets $STRATA_GPU_CHECK_STEP_S seconds (240; exit 124 when it runs out).
step() {
  local name=$1
  shift
  if [[ $1 == --gpu ]]; then
    shift
    if [[ $gpu == 0 ]]; then
      printf '%s\tskip\t0\tno GPU visible\n' "$name" >>"$detail/steps.tsv"
      return 0
    fi
  fi
  say "== $name: $*"
  local start=$SECONDS
  timeout "${STRATA_GPU_CHECK_STEP_S:-240}" "$@" >"$detail/$name.txt" 2>&1
  local rc=$?
  cat "$detail/$name.txt" >>"$log"
  local result=pass
  [[ $rc != 0 ]] && result=fail
  printf '%s\t%s\t%s\texit %s\n' "$name" "$result" $((SECONDS - start)) "$rc" >>"$detail/steps.tsv"
  say "   $result (exit $rc, $((SECONDS - start)) s)"
}

export STRATA_SOURCE_DIR=$here

# ---- GPU tests (host runner cases too; GPU cases skip without a GPU) --------
tests=$(gpu_tests)
[[ $quick == 1 ]] && tests=$(gpu_only_tests)
for t in $tests; do
  step "test_$t" "$bin/$t" --gtest_brief=1 "--gtest_output=json:$detail/test_$t.json"
done
# ---- compute-sanitizer over the GPU-only tests ------------------------------
for tool in memcheck racecheck; do
  for t in $(gpu_only_tests); do
    if [[ $gpu == 1 ]] && ! command -v compute-sanitizer >/dev/null; then
      printf 'sanitizer_%s_%s\tfail\t0\tcompute-sanitizer not found\n' "$tool" "$t" >>"$detail/steps.tsv"
      continue
    fi
    step "sanitizer_${tool}_$t" --gpu compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/$t" --gtest_brief=1
  done
done

# ---- Engine benchmark beside the table's own find and push ------------------
if [[ $quick == 1 ]]; then
  step engine_bench "$bin/strata_engine_bench" --benchmark_filter='BM_PullPushResident$' \
    --benchmark_min_time=0.05 --benchmark_format=json "--benchmark_out=$detail/engine_bench.json"
  step table_bench "$bin/strata" bench table --capacity 65536 --dim 16 --load-factor 0.5 \
    --batch 4096 --op find,push --iters 3 --json
else
  step engine_bench "$bin/strata_engine_bench" \
    --benchmark_filter='BM_PullPushResident$|BM_PullResident1M|BM_RoundTripResident1M' \
    --benchmark_min_time=1 --benchmark_format=json "--benchmark_out=$detail/engine_bench.json"
  # The same shape as BM_*Resident1M: 2^20 keys per call, dim 64, AdaGrad.
  step table_bench "$bin/strata" bench table --capacity 2097152 --dim 64 --load-factor 0.5 \
    --batch 1048576 --op find,push --optimizer adagrad --iters 20 --json
fi

# ---- replay and train: T0 on the GPU beside the host runner -----------------
batches=400
rows=10000
[[ $quick == 1 ]] && batches=60 && rows=2000
step trace_gen "$bin/strata" trace gen --preset criteo-kaggle --scale 0.001 --batch-size 256 \
  --batches $batches --seed 3 --out "$work/check.trace"
for where in gpu host; do
  flag=()
  [[ $where == host ]] && flag=(--no-gpu)
  gate=()
  [[ $where == gpu ]] && gate=(--gpu)
  # Without intents the replay is deterministic (no planner thread): the two
  # runners must read the same rows from the SSD. With intents the planner
  # runs on its own clock, so reads vary from run to run on either runner.
  step "replay_nointents_$where" "${gate[@]}" "$bin/strata" replay "$work/check.trace" \
    --dir "$work/replay_nointents_$where" --device-rows 2048 --dram-rows 8192 --workers 1 \
    --no-intents --verify "${flag[@]}" --json
  step "replay_$where" "${gate[@]}" "$bin/strata" replay "$work/check.trace" --dir "$work/replay_$where" \
    --device-rows 2048 --dram-rows 8192 --workers 1 --lookahead 4 --verify "${flag[@]}" --json
  step "train_$where" "${gate[@]}" "$bin/strata" train "$data" --rows-max $rows --dir "$work/train_$where" \
    --device-rows 2048 --dram-rows 8192 --batch-size 64 --epochs 1 --lookahead 2 --seed 1 \
    "${flag[@]}" --json
done

# ---- The cluster's exchange against plain MPI_Alltoallv ----------------------
# Host ranks under mpirun (no GPU needed): `strata bench cluster` at 2, 3 and
# 4 ranks, twice each, on a machine with a core per rank (docs/cluster.md,
# "Measured"). Open MPI from the pack when it has one, else the machine's.
mpirun=()
if [[ -x ${work}/pack/ompi/bin/mpirun ]]; then
  export OPAL_PREFIX=$work/pack/ompi PATH=$work/pack/ompi/bin:$PATH
  mpirun=("$work/pack/ompi/bin/mpirun")
elif command -v mpirun >/dev/null; then
  mpirun=(mpirun)
fi
[[ ${#mpirun[@]} -gt 0 && $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
cluster_ranks=(2 3 4)
cluster_rounds=2
cluster_batches=300
[[ $quick == 1 ]] && cluster_ranks=(2) && cluster_rounds=1 && cluster_batches=30
for ranks in "${cluster_ranks[@]}"; do
  for round in $(seq 1 $cluster_rounds); do
    name=cluster_r${ranks}_$round
    if [[ ${#mpirun[@]} == 0 ]]; then
      printf '%s\tskip\t0\tmpirun not found (and no Open MPI in the pack)\n' "$name" >>"$detail/steps.tsv"
    elif ! "$bin/strata" bench cluster --help >/dev/null 2>&1; then
      printf '%s\tskip\t0\tstrata built without MPI\n' "$name" >>"$detail/steps.tsv"
    else
      # Open MPI's own allocations left at exit are not ours: no leak check
      # when the binaries are built with AddressSanitizer (as the cluster
      # tests run them).
      step "$name" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        "${mpirun[@]}" --oversubscribe --mca btl self,vader --mca mpi_yield_when_idle 1 \
        -np "$ranks" "$bin/strata" bench cluster --dir "$work/$name" --json --batches $cluster_batches
    fi
  done
done

# ---- The DRAM tier (T1) beside a random gather of the same rows --------------
# Host only (no GPU needed): `strata bench dram` at dimensions 16 and 64, 1, 2,
# 4 and 8 threads, on this machine's memory (docs/dram-cache.md, "Benchmark"):
# lookups against the index-free gather and the gather through one index
# line, inserts with eviction against lookups, index bytes per row; each
# with the cache's automatic shards (8 at 4M rows) and beside it with one
# shard, the one exact order (dram1_d<dim>: docs/dram-cache.md, "Shards").
dram_rows=4000000
dram_threads=1,2,4,8
[[ $quick == 1 ]] && dram_rows=100000 && dram_threads=1,2
for dim in 16 64; do
  step "dram_d$dim" "$bin/strata" bench dram --rows $dram_rows --dim $dim --threads $dram_threads \
    --batch 4096 --json
  step "dram1_d$dim" "$bin/strata" bench dram --rows $dram_rows --dim $dim --threads $dram_threads \
    --batch 4096 --shards 1 --json
done
# The baseline commit's DRAM tier (a pack made with STRATA_GPU_BASELINE)
# between two runs of this commit's, 1 and 8 threads, automatic shards: the
# run before and the run after show how far the machine drifted.
if [[ -x $bin/strata_baseline ]]; then
  ab_threads=1,8
  [[ $quick == 1 ]] && ab_threads=1
  for dim in 16 64; do
    step "dram_base_d$dim" "$bin/strata_baseline" bench dram --rows $dram_rows --dim $dim \
      --threads $ab_threads --batch 4096 --json
    step "dram_again_d$dim" "$bin/strata" bench dram --rows $dram_rows --dim $dim \
      --threads $ab_threads --batch 4096 --json
  done
fi

# ---- HierarchicalKV side by side ---------------------------------------------
if [[ -x $bin/strata_hkv_side_by_side ]]; then
  # Nine (dim, load factor) pairs of two 64M-slot tables: longer than one step.
  STRATA_GPU_CHECK_STEP_S=$((${STRATA_GPU_CHECK_STEP_S:-240} * 2)) \
    step hkv --gpu "$bin/strata_hkv_side_by_side" --json "$detail/hkv.json"
else
  printf 'hkv\tskip\t0\tnot built (configure with -DSTRATA_HKV_DIR)\n' >>"$detail/steps.tsv"
fi

# ---- Summary ----------------------------------------------------------------
python3 "$here/scripts/gpu_check_summary.py" "$detail" "$out" "$commit" "$gpu" "$gpu_name" \
  "$quick" | tee -a "$log"
status=${PIPESTATUS[0]}
tar -czf "$out/details.tar.gz" -C "$detail" . || status=1
say "summary: $out/summary.json, log: $log, each step's output: $out/details.tar.gz"
exit "$status"
