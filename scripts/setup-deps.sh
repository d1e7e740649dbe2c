#!/usr/bin/env bash
# setup-deps.sh - make sure the tools fajit builds and tests with are present: a C compiler and make
# (build-essential), cmake, pkg-config, cmocka (libcmocka-dev), and a python3 that can make virtual
# environments (python3, python3-venv: scripts/test-python.sh installs the Python package into one,
# fetching scikit-build-core and pytest from PyPI there); under CI=true (or FAJIT_TEST_SANITIZE=1) also
# clang with libFuzzer (clang, libclang-rt-dev) for the sanitizer build. Installs what is missing with
# apt-get (Debian / Ubuntu), as root or through sudo; does nothing, silently, when all are there.
# The CUDA toolkit is not installed here: ptxas and nvJitLink are looked for in /usr/local/cuda.
#   usage: scripts/setup-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

have_all() {
    command -v cc >/dev/null && command -v make >/dev/null && command -v cmake >/dev/null &&
        command -v pkg-config >/dev/null && pkg-config --exists cmocka && have_venv
}
# venv and ensurepip: Debian's own python3 has them only with python3-venv; pyenv's builds have them
have_venv() { command -v python3 >/dev/null && python3 -c "import venv, ensurepip" 2>/dev/null; }

if ! have_all; then
    if ! command -v apt-get >/dev/null; then
        echo "setup-deps: need a C compiler, make, cmake, pkg-config, cmocka and python3 with venv;" \
            "no apt-get here to install them" >&2
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
    have_venv || pkgs+=(python3 python3-venv)
    echo "setup-deps: installing ${pkgs[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    have_all || { echo "setup-deps: still missing a tool after apt-get install" >&2; exit 1; }
fi

# The sanitizer and fuzz build (scripts/test-sanitize.sh, run by scripts/test.sh under CI=true or
# FAJIT_TEST_SANITIZE=1) needs clang with libFuzzer and the sanitizer runtimes: Debian's clang and
# libclang-rt-dev (Debian 12: clang 14). Checked by linking a tiny fuzz target.
fuzzer_links() {
    local d
    d=$(mktemp -d)
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$d/t.c"
    command -v clang >/dev/null && clang -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" 2>/dev/null
    local rc=$?
    rm -rf "$d"
    return $rc
}
want_sanitize=${FAJIT_TEST_SANITIZE:-}
[ -n "$want_sanitize" ] || { [ "${CI:-}" = true ] && want_sanitize=1 || want_sanitize=0; }
if [ "$want_sanitize" = 1 ] && ! fuzzer_links; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "setup-deps: installing clang libclang-rt-dev (sanitizer and fuzz build) with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
    fuzzer_links || { echo "setup-deps: clang -fsanitize=fuzzer,address,undefined still does not link" >&2; exit 1; }
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/ptxas" ] && ! command -v ptxas >/dev/null; then
    echo "setup-deps: note: no ptxas in $cuda/bin or on PATH; the ptxas-labelled tests will be skipped" >&2
fi

# Optional: a disassembler for the SASS checks of the ptxas tests (HMMA present, no local memory).
# The CUDA 13 toolkit here ships none; PyPI's nvidia-cuda-nvdisasm wheel does. It is installed with
# `pip install --target .whl` (git-ignored; --target also works where the system Python is "externally
# managed", as on Debian 12), and tests/CMakeLists.txt looks in .whl/nvidia/cu13/bin. Best effort:
# without python3 and pip, or without network, those checks skip and say why.
note() { echo "setup-deps: note: $*; the SASS checks will be skipped" >&2; }
if ! command -v nvdisasm >/dev/null && [ ! -x "$cuda/bin/nvdisasm" ] && [ ! -x .whl/nvidia/cu13/bin/nvdisasm ]; then
    site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
    if [ -n "$site" ] && [ -x "$site/nvidia/cu13/bin/nvdisasm" ]; then
        : # installed into this Python already; CMake finds it there
    elif ! python3 -m pip --version >/dev/null 2>&1; then
        note "no nvdisasm, and no python3 with pip to install nvidia-cuda-nvdisasm"
    elif ! python3 -m pip install --quiet --disable-pip-version-check --timeout 30 --retries 2 --target .whl \
        nvidia-cuda-nvdisasm >/dev/null 2>&1 || [ ! -x .whl/nvidia/cu13/bin/nvdisasm ]; then
        note "could not pip install nvidia-cuda-nvdisasm into .whl/"
    fi
fi
