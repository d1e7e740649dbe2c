#!/usr/bin/env bash
# run_gpu.sh - every GPU-side part of fajit in one scripted run on a GPU machine, from the repository
# root: build, the gpu tests, fagen check, fagen bench (latency and the first grid) and bench/compare.py.
# Each stage writes $OUT/<stage>.log under a time limit; a
# failing stage does not stop the next; $OUT/summary.txt gets one line per stage (exit status, seconds).
#
#   usage: [OUT=dir] [BUILD=dir] bench/run_gpu.sh [stage...]      (defaults: $BUILD/gpu-out, ./build)
#   stages (default: all, in this order):
#     build        cmake Release into $BUILD (tests too when cmocka is found or can be unpacked from .deps/)
#     tests        $BUILD/tests/test_gpu_forward (label gpu), and the unit tests of the reference
#     check-quick  fagen check --quick
#     latency      fagen bench --latency (D 128 bf16, the default config: cold and disk-hit in new processes)
#     first-call   bench/first_call.sh: issue 23's table (first call prebuilt / compiled, disk hit, a tuned winner's
#                    first call and the time until it serves; one fresh process per cell)
#     store-tests  test_store_gpu: prebuilt first calls, background specialization, capture, a damaged entry
#     bench        fagen bench --grid first
#     compare      python3 bench/compare.py --out $OUT (the full grid vs FA2 and cuDNN; torch, matplotlib)
#     check-full   fagen check (the whole grid)
#   and, only when named:
#     gpu-tests      every gpu-labelled test (ctest -L gpu in $BUILD: forward, variants, decode, FP8, varlen, runtime,
#                    store, tune, warm, pipeline bugs, accuracy; about 9 minutes on an H200 with a warm build): run it
#                    whenever device time allows - two GPU tests had gone stale unseen for days (session 22)
#     install        scripts/check-install.sh: cmake --install $BUILD into a prefix, examples/ built against it
#                    (find_package, shared and static; pkg-config) and run: each runs one forward on the GPU
#                    checked against a CPU reference (needs the build stage)
#     python         the Python package: python3 (with its torch, scikit-build-core, cmake, pytest) runs
#                    `pip install --no-build-isolation --no-index --target $BUILD/py-gpu ./python` (no
#                    network needed), then pytest
#                    python/tests (GPU numerics vs float64, torch.compile, CUDA graphs; per-case errors in
#                    $OUT/python-gpu-errors.txt), then bench/python_overhead.py (-> $OUT/python-overhead*.md)
#     python-compare compare.py --quick through the installed package (needs the python stage's install)
#     decode-compare bench/decode_compare.py --out $OUT through the installed package (needs the python stage's
#                    install): issue 11's decode rows (+ paged, + FP16) vs FA3 (flash_attn_with_kvcache /
#                    flash_attn_func, num_splits=0; installed under $PEERS_SITE, default /tmp/peers-site: see
#                    bench/README.md; n/a without) and SDPA; GB/s of K + V -> $OUT/decode-<gpu>.*
#     tune           fagen tune --grid issue3 into a fresh cache directory; winners -> $OUT/tuned-v1.txt
#     compare-tuned  compare.py over the full grid with $OUT/tuned-v1.txt's configs -> $OUT/tuned/
#     profile        bench/profile.sh on $OUT/tuned-v1.txt's BF16 D=128 N=4096 winner
#   (`bench/run_gpu.sh build tune compare-tuned profile` is how the codegen-6 results were taken)
#     decode-tests   test_decode_args, test_reference (unit) and test_gpu_decode (seqlens_k, split-KV, both paths;
#                    and test_sm90_decode: the opt-in sm_90a decode variants, FAJIT_DECODE_SM90=1; limit 300 s)
#     decode-check   fagen check over the quick grid's D 128 shapes with 5 splits and per-sequence lengths, one
#                    decode shape (B 5, Nq 16 causal, Nk 3000) with the split heuristic and the caller's workspace,
#                    one with paged K/V (16-row pages),
#                    and one under compute-sanitizer memcheck (sm_80 br64 bc64, both masks, 7 splits, seqlens)
#     sanitize       compute-sanitizer ($SAN_TOOLS, default memcheck racecheck) on the sm_90a and sm_80 defaults, D
#                    $SAN_HEADDIMS (default 64 128 256), fagen check --quick, FAJIT_PERSISTENT_CTAS=2; one log each
#     decode-bench   fagen bench --grid decode (issue 11's rows x Nq 1/4/16, GB/s of K + V), then the first row
#                    without splits, the B 8 row paged (pages of 16, 64, 256 rows), then the GQA rows at Nq 1
#                    without GQA packing (FAJIT_PACK_GQA=0)
#   (`bench/run_gpu.sh build decode-tests decode-check decode-bench` is issue 11's first GPU run, ~10 minutes)
#     paged-ahead    A/B of paged K/V with each tile's pages read a tile ahead (FAJIT_DECODE_PAGE_AHEAD=1, the
#                    default) and at the copy (=0): fagen bench on the Nq 1 rows B1 H32/32 32k (on/off twice),
#                    B8 H32/8 8k, B64 H32/8 2k (once), pages of 16 / 64 / 256, each row's contiguous line first;
#                    then compute-sanitizer memcheck of fagen check on 16- and 64-row pages (over 4 minutes on the H200, most of it the memcheck half)
#     paged-ab       A/B (bench/ab.sh, interleaved) of the sm_80 decode kernel (FAJIT_DECODE_SM90=0, br64 bc64 w4 s2)
#                    built from a base tree ($AB_BASE_SRC, default .carry/a-src: `git archive main | tar -x -C
#                    .carry/a-src`, carried) against this tree's: Nq 1 rows B1 H32/32 32k, B8 H32/8 8k, B64 H32/8
#                    2k, contiguous ([B, Nk, Hkv, D], the pools' row layout) and pages of 16 and 64 rows (skips
#                    with its reason without a base tree)
#     decode-sweep   bench/decode_sweep.py --out $OUT (the package from the source tree on $BUILD/libfajit.so; needs
#                    the build stage): the decode heuristic against forced splits / tiles / stages and the paged
#                    gather modes on the rows short of FA3, each checked against float64 -> $OUT/decode-sweep.*
#     decode-tune    fagen tune --grid decode in a fresh cache directory (the split count of issue 11's 15 decode
#                    classes; the winners -> $OUT/tuned-decode.txt), then fagen bench --grid decode on it: its
#                    last column says "(N splits, tuned)" where a tuned count ran
# cmocka: if pkg-config does not know it, the .deb files in .deps/ (carry them: they are git-ignored)
# are unpacked into $TMPDIR and a fixed-up cmocka.pc is put on PKG_CONFIG_PATH.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build tests check-quick latency bench compare check-full)
FAGEN=$BUILD/tools/fagen/fagen

cmocka_setup() {
    pkg-config --exists cmocka 2>/dev/null && return 0
    ls .deps/libcmocka*.deb >/dev/null 2>&1 || return 1
    local root="${TMPDIR:-/tmp}/fajit-cmocka"
    mkdir -p "$root/pc"
    for d in .deps/libcmocka*.deb; do dpkg -x "$d" "$root" || return 1; done
    local lib="$root/usr/lib/x86_64-linux-gnu"
    printf 'Name: cmocka\nDescription: cmocka (unpacked from .deps)\nVersion: 1.1.5\nLibs: -L%s -lcmocka\nCflags: -I%s\n' \
        "$lib" "$root/usr/include" >"$root/pc/cmocka.pc"
    export PKG_CONFIG_PATH="$root/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CMOCKA_ROOT="$root" # for tests/CMakeLists.txt's fallback when there is no pkg-config at all
}

do_build() {
    local tests=ON
    cmocka_setup || { echo "no cmocka: building without tests"; tests=OFF; }
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFAJIT_BUILD_TESTS=$tests ${CMOCKA_ROOT:+-DCMOCKA_ROOT="$CMOCKA_ROOT"} && cmake --build "$BUILD" -j "$(nproc)"
}

do_tests() {
    cmocka_setup
    local rc=0 g=0
    "$BUILD"/tests/test_reference || rc=1
    "$BUILD"/tests/test_gpu_forward || g=$?
    [ $rc -eq 0 ] && [ $g -eq 77 ] && return 77 # skipped: no GPU (the log says why)
    [ $g -eq 0 ] || rc=1
    "$BUILD"/tests/test_runtime_gpu || rc=1
    "$BUILD"/tests/test_tune_gpu || rc=1
    "$BUILD"/tests/test_store_gpu || rc=1
    return $rc
}

do_gpu_tests() {
    cmocka_setup
    (cd "$BUILD" && ctest -L gpu --timeout 500 --output-on-failure)
}

do_paged_ab() {
    local src=${AB_BASE_SRC:-.carry/a-src} base=${TMPDIR:-/tmp}/fajit-ab-base rc=0
    : >"$base.ab"
    [ -f "$src/CMakeLists.txt" ] || { echo "SKIP: no base tree in $src (git archive main | tar -x -C $src)"; return 77; }
    cmake -S "$src" -B "$base" -DCMAKE_BUILD_TYPE=Release -DFAJIT_BUILD_TESTS=OFF -DFAJIT_INSTALL=OFF >"$base.log" 2>&1 &&
        cmake --build "$base" -j "$(nproc)" --target fagen >>"$base.log" 2>&1 ||
        { tail -n 20 "$base.log"; echo "base build failed"; return 1; }
    echo "A = $src, B = this tree; FAJIT_DECODE_SM90=0, --arch sm_80 --br 64 --bc 64 --warps 4 --stages 2, Nq 1"
    for row in "1 32 32 32768" "8 32 8 8192" "64 32 8 2048"; do
        set -- $row
        local shape="--batch $1 --heads $2 --heads-kv $3 --seqlen 1 --seqlen-k $4 --arch sm_80 --br 64 --bc 64"
        shape="$shape --warps 4 --stages 2 --splits 0 --layout bnhd" # the contiguous line in the pools' row layout
        FAJIT_DECODE_SM90=0 bench/ab.sh "$base/tools/fagen/fagen" "$FAGEN" "$shape" "$shape --page-size 16" \
            "$shape --page-size 64" | tee -a "$base.ab" || rc=1
    done
    grep -q "fagen:" "$base.ab" && rc=1 # a bench that failed prints its error instead of the result line
    return $rc
}

do_decode_tests() {
    cmocka_setup
    local rc=0 g=0
    "$BUILD"/tests/test_decode_args || rc=1
    "$BUILD"/tests/test_reference || rc=1
    "$BUILD"/tests/test_gpu_decode || g=$?
    [ $rc -eq 0 ] && [ $g -eq 77 ] && return 77 # skipped: no GPU (the log says why)
    [ $g -eq 0 ] || rc=1
    return $rc
}

do_paged_ahead() {
    set -o pipefail # a failing fagen bench must fail the stage, not be hidden by tail
    local rc=0 rounds
    for row in "1 32 32 32768" "8 32 8 8192" "64 32 8 2048"; do
        set -- $row
        rounds="1 0"
        [ "$1" = 1 ] && rounds="1 0 1 0"
        echo "B$1 H$2/$3 Nk$4 Nq1 bf16 D128, contiguous:"
        "$FAGEN" bench --batch $1 --heads $2 --heads-kv $3 --seqlen 1 --seqlen-k $4 --splits 0 --reps 20 \
            --warmup 5 | tail -n 1 || rc=1
        for ps in 16 64 256; do
            for a in $rounds; do
                printf "page %3d FAJIT_DECODE_PAGE_AHEAD=%s: " $ps $a
                FAJIT_DECODE_PAGE_AHEAD=$a "$FAGEN" bench --batch $1 --heads $2 --heads-kv $3 --seqlen 1 \
                    --seqlen-k $4 --splits 0 --page-size $ps --reps 20 --warmup 5 | tail -n 1 || rc=1
            done
        done
    done
    local san=compute-sanitizer
    command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
    if [ -x "$(command -v $san)" ]; then # pages read ahead: the block table read only for filled pages
        for ps in 16 64; do
            $san --tool memcheck --error-exitcode 9 "$FAGEN" check --headdim 128 --batch 5 --heads-q 8 --heads-kv 1 \
                --seqlen-q 4 --seqlen-k 2000 --seqlens --page-size $ps --splits 3 || rc=1
        done
    else
        echo "SKIP: compute-sanitizer not found"
    fi
    return $rc
}

do_decode_check() {
    local rc=0
    "$FAGEN" check --quick --headdim 128 --splits 5 --seqlens || rc=1
    "$FAGEN" check --headdim 128 --causal --batch 5 --heads-q 16 --heads-kv 2 --seqlen-q 16 --seqlen-k 3000 \
        --splits 0 --seqlens --workspace || rc=1
    "$FAGEN" check --headdim 128 --batch 5 --heads-q 8 --heads-kv 1 --seqlen-q 4 --seqlen-k 2000 --seqlens \
        --page-size 16 --splits 3 || rc=1
    local san=compute-sanitizer
    command -v $san >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
    if [ -x "$(command -v $san)" ]; then # the new kernels' memory accesses: seqlens_k, the workspace, the combine
        $san --tool memcheck --error-exitcode 9 "$FAGEN" check --dtype bf16 --headdim 128 --arch sm_80 --br 64 --bc 64 --stages 2 --warps 4 \
            --batch 5 --heads-q 8 --heads-kv 2 --seqlen-q 4 --seqlen-k 1000 --splits 7 --seqlens || rc=1
    else
        echo "SKIP: compute-sanitizer not found"
    fi
    return $rc
}

do_decode_bench() {
    set -o pipefail
    local rc=0
    "$FAGEN" bench --grid decode --reps 20 --warmup 5 || rc=1
    "$FAGEN" bench --batch 1 --heads 32 --heads-kv 32 --seqlen 1 --seqlen-k 32768 --splits 1 --reps 20 --warmup 5 || rc=1
    echo "paged K/V (shuffled pages) on the B 8 row at Nq 1, next to its contiguous line above:"
    for ps in 16 64 256; do
        "$FAGEN" bench --batch 8 --heads 32 --heads-kv 8 --seqlen 1 --seqlen-k 8192 --page-size $ps \
            --reps 20 --warmup 5 | tail -n 1 || rc=1
    done
    echo "without GQA packing (FAJIT_PACK_GQA=0), the GQA / MQA rows at Nq 1:"
    for row in "1 32 8 131072" "8 32 8 8192" "64 32 8 2048" "1 8 1 524288"; do
        set -- $row
        FAJIT_PACK_GQA=0 "$FAGEN" bench --batch $1 --heads $2 --heads-kv $3 --seqlen 1 --seqlen-k $4 --splits 0 \
            --reps 20 --warmup 5 | tail -n 1 || rc=1
    done
    return $rc
}

mkdir -p "$BUILD"
PY_VENV=$(cd "$BUILD" && pwd)/py-gpu # the package, installed with --target: kept between runs on a warm machine
do_python() {
    export FAJIT_PY_OFFLINE=1 FAJIT_PY_VENV="$PY_VENV" FAJIT_TEST_REPORT="$OUT/python-gpu-errors.txt"
    export FAJIT_CACHE_DIR="${TMPDIR:-/tmp}/fajit-py-cache"
    rm -rf "$FAJIT_TEST_REPORT" "$FAJIT_CACHE_DIR"
    local rc=0
    scripts/test-python.sh -v --durations=10 --junitxml="$OUT/python-pytest.xml" || rc=1
    export PYTHONPATH="$PY_VENV${PYTHONPATH:+:$PYTHONPATH}"
    python3 bench/python_overhead.py --out "$OUT/python-overhead.md" || rc=1
    python3 bench/python_overhead.py --seqlen 1024 --headdim 128 --no-causal \
        --out "$OUT/python-overhead-n1024.md" || rc=1
    return $rc
}

# compute-sanitizer on the default kernels of both paths: fagen check --quick (heuristic + one more tile, both masks,
# N = 1, 17, Nq != Nk both ways, GQA, growing scores), several work tiles per sm_90a CTA; 10 runs at a time.
do_sanitize() {
    local rc=0 n=0 arch d tool f
    for arch in sm_90a sm_80; do for tool in $SAN_TOOLS; do for d in $SAN_HEADDIMS; do
        { FAJIT_PERSISTENT_CTAS=2 timeout 250 compute-sanitizer --tool "$tool" --error-exitcode 9 "$FAGEN" check --quick \
            --dtype bf16 --headdim "$d" --arch "$arch"; echo "exit status $?"; } >"$OUT/san-$arch-d$d-$tool.log" 2>&1 &
        n=$((n + 1)); [ $((n % 10)) -eq 0 ] && wait
    done; done; done
    wait
    for f in "$OUT"/san-*.log; do
        # fagen check exits 1 when a run failed or none ran (a filter that matches nothing); 9: a sanitizer report
        grep -qx "exit status 0" "$f" && grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" "$f" ||
            { echo "FAIL $f"; rc=1; }
        echo "$(basename "$f" .log): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1 | sed 's/=* *//')"
    done
    return $rc
}

do_tune() {
    export FAJIT_CACHE_DIR="${TMPDIR:-/tmp}/fajit-run-gpu-tune"
    rm -rf "$FAJIT_CACHE_DIR"
    "$FAGEN" tune --grid issue3 && cp "$FAJIT_CACHE_DIR/tuned-v1.txt" "$OUT/tuned-v1.txt"
}

do_decode_tune() {
    export FAJIT_CACHE_DIR="${TMPDIR:-/tmp}/fajit-run-gpu-decode-tune"
    rm -rf "$FAJIT_CACHE_DIR"
    "$FAGEN" tune --grid decode && cp "$FAJIT_CACHE_DIR/tuned-v1.txt" "$OUT/tuned-decode.txt" &&
        "$FAGEN" bench --grid decode --reps 20 --warmup 5
}

# fields of the tuned BF16 D=128 N=4096 winner ("... | sm_80 bf16 d128 br128 bc32 s3 sw128 w4 noncausal | ...")
do_profile() {
    local w
    w=$(awk -F'|' '/\| *bf16 d128 noncausal n4096 *\|/ { print $5; exit }' "$OUT/tuned-v1.txt")
    [ -n "$w" ] || { echo "no bf16 d128 n4096 winner in $OUT/tuned-v1.txt (run the tune stage first)"; return 1; }
    field() { echo " $w " | grep -oE " $1[0-9]+ " | tr -dc 0-9; }
    echo "winner: $w"
    bench/profile.sh "$FAGEN" --headdim 128 --seqlen 4096 --br "$(field br)" --bc "$(field bc)" \
        --stages "$(field s)" --warps "$(field w)"
}

run_stage() {
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "== $name (limit ${limit}s)" | tee -a "$OUT/summary.txt"
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    echo "   $name: exit $rc after $(($(date +%s) - start))s" | tee -a "$OUT/summary.txt"
    tail -n 25 "$OUT/$name.log"
}

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
for s in "${stages[@]}"; do
    case "$s" in
    build) run_stage build 300 env BUILD="$BUILD" bash -c "$(declare -f cmocka_setup do_build); do_build" ;;
    tests) run_stage tests 420 env BUILD="$BUILD" bash -c "$(declare -f cmocka_setup do_tests); do_tests" ;;
    gpu-tests) run_stage gpu-tests 590 env BUILD="$BUILD" bash -c "$(declare -f cmocka_setup do_gpu_tests); do_gpu_tests" ;;
    check-quick) run_stage check-quick 300 "$FAGEN" check --quick ;;
    latency) run_stage latency 120 "$FAGEN" bench --latency ;;
    first-call) run_stage first-call 300 bench/first_call.sh "$BUILD" ;;
    store-tests) run_stage store-tests 300 env BUILD="$BUILD" bash -c "$(declare -f cmocka_setup); cmocka_setup; \"$BUILD\"/tests/test_store_gpu" ;;
    bench) run_stage bench 300 "$FAGEN" bench --grid first ;;
    compare) run_stage compare 540 env PYTHONUNBUFFERED=1 python3 bench/compare.py --lib "$BUILD/libfajit.so" --out "$OUT" ;;
    check-full) run_stage check-full 590 "$FAGEN" check ;;
    install) run_stage install 300 scripts/check-install.sh "$BUILD" ;;
    python) run_stage python 590 env OUT="$OUT" PY_VENV="$PY_VENV" bash -c "$(declare -f do_python); do_python" ;;
    python-compare) run_stage python-compare 500 env PYTHONUNBUFFERED=1 PYTHONPATH="$PY_VENV${PYTHONPATH:+:$PYTHONPATH}" \
        python3 bench/compare.py --quick ;;
    decode-compare) run_stage decode-compare 300 env PYTHONUNBUFFERED=1 \
        PYTHONPATH="$PY_VENV:${PEERS_SITE:-/tmp/peers-site}${PYTHONPATH:+:$PYTHONPATH}" \
        python3 bench/decode_compare.py --out "$OUT" ;;
    tune) run_stage tune 500 env FAGEN="$FAGEN" OUT="$OUT" bash -c "$(declare -f do_tune); do_tune" ;;
    compare-tuned) run_stage compare-tuned 540 env PYTHONUNBUFFERED=1 python3 bench/compare.py --lib "$BUILD/libfajit.so" \
        --out "$OUT/tuned" --config-from-tune "$OUT/tuned-v1.txt" ;;
    profile) run_stage profile 150 env FAGEN="$FAGEN" OUT="$OUT" bash -c "$(declare -f do_profile); do_profile" ;;
    decode-tests) run_stage decode-tests 300 env BUILD="$BUILD" bash -c "$(declare -f cmocka_setup do_decode_tests); do_decode_tests" ;;
    decode-check) run_stage decode-check 110 env FAGEN="$FAGEN" bash -c "$(declare -f do_decode_check); do_decode_check" ;;
    decode-tune) run_stage decode-tune 400 env FAGEN="$FAGEN" OUT="$OUT" bash -c "$(declare -f do_decode_tune); do_decode_tune" ;;
    decode-sweep) run_stage decode-sweep 360 env PYTHONUNBUFFERED=1 PYTHONPATH="python/src${PYTHONPATH:+:$PYTHONPATH}" \
        FAJIT_LIB="$BUILD/libfajit.so" python3 bench/decode_sweep.py --out "$OUT" ;;
    paged-ab) run_stage paged-ab 480 env FAGEN="$FAGEN" bash -c "$(declare -f do_paged_ab); do_paged_ab" ;;
    paged-ahead) run_stage paged-ahead 480 env FAGEN="$FAGEN" bash -c "$(declare -f do_paged_ahead); do_paged_ahead" ;;
    decode-bench) run_stage decode-bench 200 env FAGEN="$FAGEN" bash -c "$(declare -f do_decode_bench); do_decode_bench" ;;
    sanitize) run_stage sanitize 590 env FAGEN="$FAGEN" OUT="$OUT" SAN_HEADDIMS="${SAN_HEADDIMS:-64 128 256}" \
        SAN_TOOLS="${SAN_TOOLS:-memcheck racecheck}" bash -c "$(declare -f do_sanitize); do_sanitize" ;;
    *) echo "run_gpu.sh: unknown stage '$s'" >&2; exit 2 ;;
    esac
done
