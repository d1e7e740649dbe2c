#!/usr/bin/env bash
# profile.sh - Nsight Compute on one fajit forward kernel launched by fagen bench: shared-memory bank
# conflicts of ldmatrix, tensor-pipe use, warp stall reasons. Leaves the GPU clocks alone.
#   usage: bench/profile.sh [fagen] [fagen bench flags...]        (run on a GPU machine with ncu)
set -u
FAGEN=${1:-build/tools/fagen/fagen}
shift || true
metrics=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
metrics=$metrics,smsp__inst_executed_op_ldsm.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics=$metrics,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
# conflicts the ldmatrix address patterns themselves cause (the l1tex counter above also counts
# arbitration with the concurrent cp.async writes into the other stages)
metrics=$metrics,sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum,sm__sass_inst_executed_op_ldsm.sum
metrics=$metrics,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum
# stall reasons: cycles per issued instruction spent in each
for r in wait math_pipe_throttle short_scoreboard long_scoreboard barrier mio_throttle not_selected dispatch_stall \
    lg_throttle no_instruction branch_resolving selected; do
    metrics=$metrics,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
ncu --clock-control none -k fajit_fwd -s 3 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --metrics "$metrics" "$FAGEN" bench --reps 20 --warmup 2 "$@"
