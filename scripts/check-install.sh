#!/usr/bin/env bash
# check-install.sh - install the C package from a configured build directory into a fresh prefix and
# build examples/attention.c against the INSTALLED files, both with find_package(fajit) (CMake, shared
# and static) and with pkg-config (examples/Makefile); run the three programs (their GPU part skips
# without a GPU and says so; with one, each runs a forward checked against a CPU reference). Without
# pkg-config or make (outside CI) the pkg-config build is skipped and said so. Then the README's
# install, pkg-config and CMake snippets run against the same prefix (scripts/check-readme.py
# --installed). Writes only under <build>/install-check/ and a scratch directory of check-readme.py.
# Exit status: 0 when all worked.
#   usage: scripts/check-install.sh [build dir]      (default: build, already built)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf "$build/install-check"
mkdir -p "$build/install-check"
work=$(cd "$build/install-check" && pwd)
prefix=$work/prefix

step() { echo "check-install: $*"; }
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
pc=$(cd "$prefix" && find . -path '*/pkgconfig/fajit.pc' -print -quit)
[ -n "$pc" ] || { echo "check-install: no pkgconfig/fajit.pc under $prefix" >&2; exit 1; }
libdir=$(dirname "$(dirname "${pc#./}")") # lib, or lib/<multiarch> with the prefix /usr
for f in include/fajit.h "$libdir"/libfajit.so "$libdir"/libfajit.a bin/fagen "$libdir"/pkgconfig/fajit.pc \
    "$libdir"/cmake/fajit/fajitConfig.cmake "$libdir"/cmake/fajit/fajitConfigVersion.cmake; do
    [ -e "$prefix/$f" ] || { echo "check-install: $f was not installed" >&2; exit 1; }
done
"$prefix/bin/fagen" --version

step "examples with find_package(fajit) (CMAKE_PREFIX_PATH=$prefix)"
cmake -S examples -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake-configure.log" ||
    { cat "$work/cmake-configure.log"; exit 1; }
grep "fajit .* from" "$work/cmake-configure.log"
cmake --build "$work/cmake" -j2 >"$work/cmake-build.log" || { cat "$work/cmake-build.log"; exit 1; }
"$work/cmake/fajit_example"
"$work/cmake/fajit_example_static"

if ! command -v pkg-config >/dev/null || ! command -v make >/dev/null; then
    # CI has both (scripts/setup-deps.sh); a GPU image may not
    [ "${CI:-}" = true ] && { echo "check-install: no pkg-config or make" >&2; exit 1; }
    echo "SKIP: check-install: the pkg-config build (no pkg-config or make here)"
    step "ok (without the pkg-config build)"
    exit 0
fi
step "examples with pkg-config (PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig)"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
echo "pkg-config fajit: version $(pkg-config --modversion fajit), $(pkg-config --cflags --libs fajit)"
make -s -C examples O="$work" CC="${CC:-cc}"
"$work/fajit_example_pc"
# the shared library the pkg-config build runs with is the installed one. ldd's output is read whole
# before it is searched: `ldd | grep -q` under pipefail fails at random when grep exits at its match
# and ldd, still writing, dies of SIGPIPE (7 of 50 runs here).
loaded=$(ldd "$work/fajit_example_pc")
grep -qF "$prefix/$libdir/libfajit.so" <<<"$loaded" ||
    { echo "check-install: fajit_example_pc does not load $prefix/$libdir/libfajit.so:" >&2; echo "$loaded" >&2; exit 1; }

step "README's install, pkg-config and CMake lines against $prefix (scripts/check-readme.py --installed)"
if command -v python3 >/dev/null; then
    python3 scripts/check-readme.py --build "$build" --installed "$prefix"
else
    [ "${CI:-}" = true ] && { echo "check-install: no python3 for scripts/check-readme.py" >&2; exit 1; }
    echo "SKIP: check-install: the README's install lines (no python3 here)"
fi
step "ok"
