#!/usr/bin/env bash
# ab_builds.sh - sourced by the A/B scripts that compare builds of this tree differing only in -D macros
# (softmax_ab.sh, modcost_ab.sh, softcap_ab.sh, acc_ab.sh) or one build under two settings (kv_order_ab.sh).
# After `source bench/ab_builds.sh`:
#   ab_build_all OUT TARGETS NAME=FLAGS ...   builds each NAME into OUT/build-NAME with CMAKE_C_FLAGS=FLAGS (Release,
#                                             no tests, no prebuilt set, the given cmake targets), all in parallel on
#                                             nproc/4 jobs each; returns 2 (and says which, with its log) if one failed
#   ab_fagen NAME ARGS...                     runs that build's fagen
#   ab_fagen_bin NAME                         prints its path (for `timeout`, which cannot run a shell function)
#   ab_bench_rounds ROUNDS LIMIT CELLS SIDE...
#                                             settled sm_90a speed, sides interleaved per cell: for each round, cell
#                                             (CELLS: the NAME of an array of fagen bench flag strings) and side
#                                             ("label=command words", e.g. "asc=env FAJIT_KV_ORDER=asc build/tools/
#                                             fagen/fagen"; the words are split, so no spaces in paths), one line
#                                             "r<round> <label> <fagen bench's line>" of `command bench --arch sm_90a
#                                             --untuned --settle-ms 300 --reps 30 <cell>`, each under timeout LIMIT s
# The caller sets FAJIT_CACHE=0 so that no build reads another's cubins (same config text, other PTX).
ab_out=
ab_build_all() {
    ab_out=$1
    local targets=$2 jobs spec name pids=()
    shift 2
    mkdir -p "$ab_out"
    jobs=$(( $(nproc) / 4 )); [ "$jobs" -ge 1 ] || jobs=1
    for spec in "$@"; do
        name=${spec%%=*}
        ( cmake -S . -B "$ab_out/build-$name" -DCMAKE_BUILD_TYPE=Release -DFAJIT_BUILD_TESTS=OFF -DFAJIT_PREBUILT=OFF \
              -DFAJIT_INSTALL=OFF -DCMAKE_C_FLAGS="${spec#*=}" >"$ab_out/build-$name.log" 2>&1 &&
          # shellcheck disable=SC2086 # targets are words
          cmake --build "$ab_out/build-$name" -j"$jobs" --target $targets >>"$ab_out/build-$name.log" 2>&1 ) &
        pids+=($!)
    done
    # these builds only: a bare `wait` also waits for the caller's process substitutions (exec > >(tee ...))
    wait "${pids[@]}"
    for spec in "$@"; do
        name=${spec%%=*}
        [ -x "$ab_out/build-$name/tools/fagen/fagen" ] || { echo "ab_builds: build $name failed ($ab_out/build-$name.log)"; return 2; }
    done
}
ab_fagen_bin() { echo "$ab_out/build-$1/tools/fagen/fagen"; }
ab_fagen() { "$(ab_fagen_bin "$1")" "${@:2}"; }
ab_bench_rounds() {
    local rounds=$1 limit=$2 round c side l
    local -n ab_cells=$3
    shift 3
    for round in $(seq 1 "$rounds"); do
        for c in "${ab_cells[@]}"; do
            for side in "$@"; do
                # shellcheck disable=SC2086 # the command and the cell are words
                l=$(timeout "$limit" ${side#*=} bench --arch sm_90a --untuned --settle-ms 300 --reps 30 $c 2>&1 |
                    grep -E "^sm_|fagen:" | head -1)
                printf 'r%d %-5s %s\n' "$round" "${side%%=*}" "$(echo "$l" | cut -c1-170)"
            done
        done
    done
}
