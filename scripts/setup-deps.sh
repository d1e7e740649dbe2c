#!/usr/bin/env bash
# setup-deps.sh - make sure the tools fajit builds and tests with are present: a C compiler and make
# (build-essential), cmake, pkg-config and cmocka (libcmocka-dev). Installs what is missing with
# apt-get (Debian / Ubuntu), as root or through sudo; does nothing, silently, when all are there.
# The CUDA toolkit is not installed here: ptxas and nvJitLink are looked for in /usr/local/cuda.
#   usage: scripts/setup-deps.sh
set -euo pipefail

have_all() {
    command -v cc >/dev/null && command -v make >/dev/null && command -v cmake >/dev/null &&
        command -v pkg-config >/dev/null && pkg-config --exists cmocka
}

if ! have_all; then
    if ! command -v apt-get >/dev/null; then
        echo "setup-deps: need a C compiler, make, cmake, pkg-config and cmocka; no apt-get here to install them" >&2
        exit 1
    fi
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null; then
            echo "setup-deps: packages are missing and installing them needs root (no sudo found)" >&2
            exit 1
        fi
        sudo=sudo
    fi
    pkgs=(build-essential cmake pkg-config libcmocka-dev)
    echo "setup-deps: installing ${pkgs[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    have_all || { echo "setup-deps: still missing a tool after apt-get install" >&2; exit 1; }
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/ptxas" ] && ! command -v ptxas >/dev/null; then
    echo "setup-deps: note: no ptxas in $cuda/bin or on PATH; the ptxas-labelled tests will be skipped" >&2
fi

# Optional: a disassembler for the SASS checks of the ptxas tests (HMMA present, no local memory).
# The CUDA 13 toolkit here ships none; PyPI's nvidia-cuda-nvdisasm wheel does. Best effort: without
# it those checks skip with their reason.
if ! command -v nvdisasm >/dev/null && [ ! -x "$cuda/bin/nvdisasm" ] && command -v python3 >/dev/null; then
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
    if [ -n "$site" ] && [ ! -x "$site/nvidia/cu13/bin/nvdisasm" ]; then
        python3 -m pip install --quiet --disable-pip-version-check nvidia-cuda-nvdisasm >/dev/null 2>&1 ||
            echo "setup-deps: note: could not pip install nvidia-cuda-nvdisasm; SASS checks will be skipped" >&2
    fi
fi
