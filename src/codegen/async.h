/*
 * async.h - the arch-neutral pieces of a warp-specialized kernel (sm_90a now; sm_100a is built from the
 * same): mbarrier rings between a TMA producer and consumer warpgroups, TMA tile loads, warp roles.
 *
 * The mbarriers of a plan live at plan.bar_off, 8 bytes each, in this order:
 *   Q full                          count 1 (the producer's arrive.expect_tx) + the Q tile's bytes
 *   per stage s: K full, V full     count 1 + the tile's bytes (the copy engine completes them)
 *                K empty, V empty   count = consumer warps (lane 0 of each arrives once it is done)
 * Phases: pass u over the ring (u = j / stages for tile j) completes phase u of a stage's barriers. A
 * consumer waits for the full barrier's phase u (parity u & 1); the producer, before refilling a stage
 * for pass u, waits for the empty barrier's phase u - 1 (parity (u & 1) ^ 1: a fresh barrier counts
 * the phase before its first as complete, so pass 0 does not wait).
 */
#ifndef FJ_ASYNC_H
#define FJ_ASYNC_H

#include "backend.h"

enum fj_ws_bar { FJ_BAR_Q = 0, FJ_BAR_K_FULL, FJ_BAR_V_FULL, FJ_BAR_K_EMPTY, FJ_BAR_V_EMPTY };
#define FJ_WS_BARS_PER_STAGE 4

/* Byte offset (from the smem base) of barrier `which` of stage `stage` (FJ_BAR_Q: stage ignored). */
int fj_ws_bar(const fj_plan *p, int which, int stage);
/* Barriers a plan needs: 1 + 4 * stages. */
int fj_ws_bar_count(int stages);

/* One thread (the caller branches) initializes every barrier; then a fence makes the init visible to the
 * copy engine. The caller follows with a CTA barrier. */
void fj_emit_ws_bar_init(fj_kctx *k);
/* Spin until the phase of parity `parity` (a u32 register holding 0 or 1) of the barrier at byte offset
 * `off` has completed; fj_emit_mbar_wait_imm with a constant parity. */
void fj_emit_mbar_wait(fj_kctx *k, int off, fj_reg_t parity);
void fj_emit_mbar_wait_imm(fj_kctx *k, int off, int parity);
/* Arrive on a barrier, only in the threads where predicate `pred` holds (e.g. lane 0 of each warp). */
void fj_emit_mbar_arrive(fj_kctx *k, int off, fj_reg_t pred);
/* Arrive and add `bytes` to the transactions the current phase waits for. */
void fj_emit_mbar_expect_tx(fj_kctx *k, int off, int bytes);

/* Which tensor a TMA load reads (the tensor map in the parameter block). */
enum fj_tma_tensor { FJ_TMA_Q = 0, FJ_TMA_K = 1, FJ_TMA_V = 2 };
/* Copy one tile of `rows` rows starting at sequence row `row` (a register) of head `head` and batch
 * k->b into smem at byte offset `smem_off`, box by box ([tma_boxes][rows][swizzle bytes]), completing
 * on the barrier at `bar_off`. k->params holds the generic address of the parameter block. */
void fj_emit_tma_tile(fj_kctx *k, int tensor, int smem_off, int rows, fj_reg_t row, fj_reg_t head, int bar_off);

#endif
