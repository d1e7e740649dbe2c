/*
 * async.h - the arch-neutral pieces of a warp-specialized kernel (sm_90a now; sm_100a is built from the
 * same): mbarrier rings between a TMA producer and consumer warpgroups, TMA tile loads, warp roles.
 *
 * The mbarriers of a plan live at plan.bar_off, 8 bytes each, in this order (the sm_90a role table, plan.roles,
 * names them as rings - roles.h - and the frame initializes them from it, ws_frame.c):
 *   Q full[b], b = 0, 1             count 1 (the producer's arrive.expect_tx) + the Q tile's bytes
 *   Q empty[b]                      count = consumer warps (lane 0 of each arrives after its last S = QK^T)
 *   per stage s: K full, V full     count 1 + the tile's bytes (the copy engine completes them)
 *                K empty, V empty   count = consumer warps (lane 0 of each arrives once it is done)
 *   O free (plan.o_stage == 2 only)  count = consumer warpgroups: O is staged in the V ring, and each
 *                                    warpgroup's store leader arrives once its TMA store has read the
 *                                    staging; the producer waits for it before a work tile's first V load
 * A CTA runs several work tiles (the persistent schedule, ws_frame.c); the K/V ring runs on across them,
 * and Q alternates between plan.q_bufs buffers (1 or 2) from one work tile to the next.
 * Phases: use u of a buffer or stage completes phase u of its barriers. A consumer waits for the full
 * barrier's phase u (parity u & 1); the producer, before refilling it for use u, waits for the empty
 * barrier's phase u - 1 (parity (u & 1) ^ 1: a fresh barrier counts the phase before its first as
 * complete, so the first use does not wait).
 */
#ifndef FJ_ASYNC_H
#define FJ_ASYNC_H

#include "backend.h"

enum fj_ws_bar {
    FJ_BAR_Q_FULL = 0, FJ_BAR_Q_EMPTY, FJ_BAR_K_FULL, FJ_BAR_V_FULL, FJ_BAR_K_EMPTY, FJ_BAR_V_EMPTY, FJ_BAR_O_FREE,
    FJ_BAR_VT_FULL, FJ_BAR_VT_EMPTY /* FP8 (plan.fp8): the transposed V ring (plan.vt_bar) */
};
/* The barriers the consumers wait on for V(j) and free it with: V's, or with FP8 Vt's. */
#define FJ_BAR_PV_FULL(p) ((p)->fp8 ? FJ_BAR_VT_FULL : FJ_BAR_V_FULL)
#define FJ_BAR_PV_EMPTY(p) ((p)->fp8 ? FJ_BAR_VT_EMPTY : FJ_BAR_V_EMPTY)
#define FJ_WS_BARS_PER_STAGE 4

/* Byte offset (from the smem base) of barrier `which` of stage `index` (for the Q barriers: of Q buffer
 * `index`; for O free: 0). */
int fj_ws_bar(const fj_plan *p, int which, int index);
/* Barriers a plan needs: 4 + 4 * stages, and O free when O is staged in the V ring (o_stage 2). */
int fj_ws_bar_count(int stages, int o_stage);
/* 1 for the decode variants that write split partials or GQA-packed rows (plan.variant_wanted, so the smem maps can
 * ask before the variant is set): O leaves by st.global from registers (no TMA box fits those), no staging planned. */
int fj_ws_o_in_regs(const fj_plan *p);
/* How a work tile's O leaves: plan.o_stage (1 own buffer, 2 the V ring: a TMA store), or 0 - st.global from
 * registers (fj_ws_o_in_regs, or no staging fits). */
int fj_ws_o_staged(const fj_plan *p);

/* Spin until the phase of parity `parity` (a u32 register holding 0 or 1) of the barrier at byte offset
 * `off` has completed. */
void fj_emit_mbar_wait(fj_kctx *k, int off, fj_reg_t parity);
/* Arrive on a barrier, only in the threads where predicate `pred` holds (e.g. lane 0 of each warp). */
void fj_emit_mbar_arrive(fj_kctx *k, int off, fj_reg_t pred);
/* fj_emit_mbar_wait for the barrier at shared address base + off (base: a register, e.g. the smem base
 * plus the current Q buffer's barrier offset). */
void fj_emit_mbar_wait_at(fj_kctx *k, fj_reg_t base, int off, fj_reg_t parity);
void fj_emit_mbar_arrive_at(fj_kctx *k, fj_reg_t base, int off, fj_reg_t pred);
/* Arrive and add `bytes` to the transactions the current phase waits for. */
void fj_emit_mbar_expect_tx(fj_kctx *k, int off, int bytes);

/* Which tensor a TMA load reads (the tensor map in the parameter block). */
enum fj_tma_tensor { FJ_TMA_Q = 0, FJ_TMA_K = 1, FJ_TMA_V = 2 };
/* Copy one tile of `rows` rows starting at sequence row `row` (a register) of head `head` and batch
 * k->b into shared address dst + smem_off, box by box ([tma_boxes][rows][swizzle bytes]), completing
 * on the barrier at shared address bar + bar_off. k->params holds the generic address of the parameter
 * block. */
void fj_emit_tma_tile(fj_kctx *k, int tensor, fj_reg_t dst, int smem_off, int rows, fj_reg_t row, fj_reg_t head,
                      fj_reg_t bar, int bar_off);
/* fj_emit_tma_tile with the 4th coordinate `batch` (a register) instead of k->b: the paged K/V's pool page
 * (sm90_roles.c), whose box may hold fewer rows than the `rows` of the tile the boxes are laid out in. */
void fj_emit_tma_boxes(fj_kctx *k, int tensor, fj_reg_t dst, int smem_off, int rows, fj_reg_t row, fj_reg_t head,
                       fj_reg_t batch, fj_reg_t bar, int bar_off);
/* The boxes fj_emit_tma_boxes would load (row, head, batch), fetched into the L2 only: no shared memory, no barrier. */
void fj_emit_tma_prefetch(fj_kctx *k, int tensor, fj_reg_t row, fj_reg_t head, fj_reg_t batch);

#endif
