# Strata: every target installs what is missing (scripts/deps.sh), configures
# and builds before it runs. See README.md.
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=
BUILD ?= build

.PHONY: all deps build test test-torch demo demo-python demo-torchrec crash asan tsan fuzz lint bench format format-check clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Builds everything (CUDA sources included when nvcc is present) and runs the
# CTest suite; prints the output of failing tests.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

# The Python suite (tests/python/test_*.py, test_torchrec.py included) in a
# venv of the PyPI stack a PyTorch recommendation user has: torch 2.14,
# TorchRec, FBGEMM's CPU operators, NumPy 2 (scripts/torch_venv.sh builds it
# once in TORCH_VENV, about 2 minutes and 5.5 GB, and reuses it after).
# `make test` runs the same files under Debian's torch 1.13, where the
# TorchRec tests skip.
TORCH_VENV ?= .venv-torch
test-torch: build
	bash scripts/torch_venv.sh $(TORCH_VENV)
	PYTHONPATH=$(BUILD)/python STRATA_BUILD_DIR=$(abspath $(BUILD)) STRATA_SOURCE_DIR=$(CURDIR) \
	  $(TORCH_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/python

# The same click model in PyTorch through the strata Python package
# (examples/python/train_ctr.py) on the shipped Criteo sample: per-epoch
# validation AUC and the tier counters.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
demo-python: build
	PYTHONPATH=$(BUILD)/python $(PYTHON) examples/python/train_ctr.py \
	  examples/train/data/criteo_kaggle_train_head10k.txt

# TorchRec's DLRM on the shipped Criteo sample with its tables in Strata
# (tiers smaller than the tables, intents by prefetch) beside TorchRec's own
# EmbeddingBagCollection, same seeds and data (examples/python/dlrm_torchrec.py):
# both validation AUCs, both rows/s, Strata's hits per tier; then the same
# under torchrun with 2 ranks and the store sharded over them (gloo). In the
# venv of test-torch.
CRITEO_SAMPLE = examples/train/data/criteo_kaggle_train_head10k.txt
demo-torchrec: build
	bash scripts/torch_venv.sh $(TORCH_VENV)
	PYTHONPATH=$(BUILD)/python $(TORCH_VENV)/bin/python examples/python/dlrm_torchrec.py $(CRITEO_SAMPLE)
	PYTHONPATH=$(BUILD)/python OMP_NUM_THREADS=1 $(TORCH_VENV)/bin/python -m torch.distributed.run \
	  --nproc_per_node 2 --nnodes 1 --master_addr 127.0.0.1 --master_port 29545 \
	  examples/python/dlrm_torchrec.py $(CRITEO_SAMPLE)

# The long crash campaign (tests/engine/crash_campaign_test.cc): CRASH_TRIALS
# kills and power losses per backend (make test runs 20 of each). A failure
# prints the seed; STRATA_CRASH_SEED=<seed> replays it.
CRASH_TRIALS ?= 200
crash: build
	STRATA_CRASH_TRIALS=$(CRASH_TRIALS) ctest --test-dir $(BUILD) --output-on-failure -V \
	  -R 'CrashCampaignTest|NativeFaultSweepTest' $(CTEST_FLAGS)

# The main job: the most complete end-to-end run the project has.
demo: build
	bash scripts/demo.sh $(BUILD)

asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=address $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE slow $(CTEST_FLAGS)

# Tests labelled many-locks hold more locks at once on one thread than
# ThreadSanitizer's deadlock detector tracks (64: a checkpoint of the 26
# Criteo tables takes each table's two locks), which aborts it: they run in a
# second pass with the detector off (races are still reported).
TSAN_OPTIONS_BASE = halt_on_error=1:suppressions=$(CURDIR)/scripts/tsan.supp
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS=$(TSAN_OPTIONS_BASE):second_deadlock_stack=1 \
	  ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -LE 'slow|many-locks' $(CTEST_FLAGS)
	TSAN_OPTIONS=$(TSAN_OPTIONS_BASE):detect_deadlocks=0 \
	  ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -L many-locks -LE slow $(CTEST_FLAGS)

# libFuzzer targets (tests/fuzz/) built by clang in build-fuzz/, each run for
# FUZZ_SECONDS from a copy of its corpus; fails on any crash (scripts/fuzz.sh).
FUZZ_SECONDS ?= 60
fuzz:
	@bash scripts/deps.sh fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash scripts/fuzz.sh build-fuzz

# Static checks, each an error: a clang build in build-lint/ with
# -Werror=thread-safety (the GUARDED_BY/REQUIRES annotations of base/mutex.h,
# and with -Wthread-safety-beta the ACQUIRED_BEFORE/AFTER lock order),
# make format-check, and clang-tidy (.clang-tidy) over the non-test sources.
lint:
	@bash scripts/deps.sh lint
	JOBS=$(JOBS) bash scripts/lint.sh build-lint

bench: build
	bash scripts/bench.sh $(BUILD)

FORMAT_FILES = $(shell git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
format:
	@bash scripts/deps.sh
	@clang-format -i $(FORMAT_FILES) && echo "format: $(words $(FORMAT_FILES)) files"

format-check:
	@bash scripts/deps.sh
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files clean"

clean:
	rm -rf build build-asan build-tsan build-fuzz build-lint
