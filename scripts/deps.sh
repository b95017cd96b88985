#!/usr/bin/env bash
# Installs the Debian packages Strata builds with, only those missing.
# Idempotent and silent when everything is present. Used by every Makefile
# target, so a fresh Debian 12 machine needs nothing installed by hand.
# Arguments name extra groups a target needs: `fuzz` (clang and its
# sanitizer and libFuzzer runtimes, Debian's default version: 14 on bookworm),
# `lint` (clang and clang-tidy, the same version; run-clang-tidy comes with it).
# `cuda-tools` (cuobjdump and nvdisasm, from the PyPI wheels
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, installed with pip into the
# git-ignored .cuda-tools/ at the repository root when missing; the SASS
# budget check scripts/sass_budget.py reads the cubin with them).
# Open MPI (libopenmpi-dev, openmpi-bin: mpirun) builds strata::Cluster and
# runs its multi-rank tests (docs/cluster.md).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  liburing-dev librocksdb-dev libnuma-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
  nlohmann-json3-dev libxxhash-dev
  clang-format fio python3-matplotlib
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
  libopenmpi-dev openmpi-bin
)
cuda_tools=0
for group in "$@"; do
  case "$group" in
    fuzz) packages+=(clang libclang-rt-dev) ;;
    lint) packages+=(clang clang-tidy) ;;
    cuda-tools) packages+=(python3-pip); cuda_tools=1 ;;
    *) echo "deps.sh: unknown group '$group'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -ne 0 ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_cmd=(sudo -n)
    else
      echo "deps.sh: missing packages (${missing[*]}) and no root or sudo to install them" >&2
      exit 1
    fi
  fi

  echo "deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "deps.sh: done" >&2
fi

# The CUDA binary utilities, the versions of the toolkit's major release,
# into .cuda-tools/ (nvidia/cu<major>/bin/), once.
if [ "$cuda_tools" -eq 1 ]; then
  tools="$(cd "$(dirname "$0")/.." && pwd)/.cuda-tools"
  if ! compgen -G "$tools/nvidia/*/bin/cuobjdump" >/dev/null ||
    ! compgen -G "$tools/nvidia/*/bin/nvdisasm" >/dev/null; then
    echo "deps.sh: installing cuobjdump and nvdisasm into $tools" >&2
    /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
      --target "$tools" 'nvidia-cuda-cuobjdump>=13,<14' 'nvidia-cuda-nvdisasm>=13,<14' >/dev/null
  fi
fi
