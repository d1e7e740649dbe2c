/*
 * fwd_ws.c - the warp-specialized forward skeleton (sm_90a; the sm_100a path takes the same shape).
 *
 *   all threads: indices, KV range, mbarrier init (thread 0), CTA barrier
 *   warpgroup 0, the producer: gives registers back (setmaxnreg.dec); one thread loads Q, then for each
 *       KV tile j waits until the consumers have freed its stage (empty barriers) and starts the TMA
 *       loads of K(j) and V(j), each completing on its stage's full barrier
 *   warpgroups 1.., the consumers (64 query rows each): take registers (setmaxnreg.inc); for each tile
 *       wait for K(j), S = Q K^T (wgmma), free K's stage, mask, online softmax, wait for V(j),
 *       O += P V (wgmma, P from registers), free V's stage; then the epilogue
 * With plan.overlap a consumer issues S(j + 1) = Q K(j + 1)^T and O += P(j) V(j) together and
 * exponentiates S(j + 1) while the PV product runs (FlashAttention-3, section 3.2); with plan.pingpong
 * the consumer warpgroups take turns issuing their GEMMs (named barriers 1 + warpgroup), so one's
 * softmax overlaps another's GEMMs (section 3.1).
 * The index math, the KV range, the mask, the softmax and the epilogue are fwd_kernel.c's and
 * softmax.c's; the MMAs are the backend's (mma_qk, mma_pv, mma_wait); the pipeline is async.c's.
 */
#include <stdio.h>

#include "async.h"
#include "backend.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm90.h"

#define R(reg) fj_r(k->e, reg)

/* Named barriers of the ping-pong schedule: consumer warpgroup c waits on 1 + c. */
#define FJ_PINGPONG_BAR0 1

/* ---- producer ---------------------------------------------------------------------------------- */

/* Tile j (register) into stage s: wait until the consumers freed it (parity `empty_parity`), then K and V. */
static void producer_tile(fj_kctx *k, int s, fj_reg_t empty_parity)
{
    const fj_plan *p = k->p;
    int tile_tx = p->kv_tile_bytes;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(row), R(k->j), p->cfg.block_n);
    fj_comment(k->e, 2, "K(j) -> stage %d once every consumer warp has freed it; the copy completes K full[%d]", s, s);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_EMPTY, s), empty_parity);
    fj_emit_mbar_expect_tx(k, fj_ws_bar(p, FJ_BAR_K_FULL, s), tile_tx);
    fj_emit_tma_tile(k, FJ_TMA_K, p->k_off + s * p->kv_tile_bytes, p->cfg.block_n, row, k->hkv,
                     fj_ws_bar(p, FJ_BAR_K_FULL, s));
    fj_comment(k->e, 2, "V(j) -> stage %d likewise (V full[%d])", s, s);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, s), empty_parity);
    fj_emit_mbar_expect_tx(k, fj_ws_bar(p, FJ_BAR_V_FULL, s), tile_tx);
    fj_emit_tma_tile(k, FJ_TMA_V, p->v_off + s * p->kv_tile_bytes, p->cfg.block_n, row, k->hkv,
                     fj_ws_bar(p, FJ_BAR_V_FULL, s));
}

static void emit_producer(fj_kctx *k, fj_reg_t n_end)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], done[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), not_phase = fj_alloc(e, k->b_r, 1);
    fj_banner(e, "Producer warpgroup: TMA loads",
              "One thread issues every copy; the other 127 have nothing to do and leave once the\n"
              "warpgroup has handed its registers to the consumers. K(j) and V(j) go to stage j % stages\n"
              "when the consumers have freed it (its empty barriers) and complete its full barriers.");
    if (p->producer_regs) {
        fj_comment(e, 1, "registers: %d per thread here, so the consumers can take %d", p->producer_regs, p->consumer_regs);
        fj_ins(e, PTX_SETMAXNREG_DEC, p->producer_regs);
    }
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
    fj_ins(e, "@%s bra $L_exit", R(pr));
    fj_ins(e, "mov.u64 %s, " FJ_FWD_PARAM_NAME, R(k->params));
    fj_ins(e, PTX_CVTA_PARAM, R(k->params), R(k->params));
    fj_comment(e, 1, "Q: %d rows from m0 (rows past Nq arrive as zeros)", p->cfg.block_m);
    fj_emit_mbar_expect_tx(k, fj_ws_bar(p, FJ_BAR_Q, 0), p->q_bytes);
    fj_emit_tma_tile(k, FJ_TMA_Q, p->q_off, p->cfg.block_m, k->m0, k->h, fj_ws_bar(p, FJ_BAR_Q, 0));
    fj_ins(e, "mov.u32 %s, 0", R(k->j));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_label_new(e, "prod_loop", top, sizeof top);
    fj_label_new(e, "prod_done", done, sizeof done);
    fj_label(e, top);
    fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(k->phase));
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_comment(e, 1, "---- tile j -> stage %d ----", s);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(n_end));
        fj_ins(e, "@%s bra.uni %s", R(pr), done);
        producer_tile(k, s, not_phase);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    }
    fj_comment(e, 1, "next pass over the stages: the barriers' next phase");
    fj_ins(e, "xor.b32 %s, %s, 1", R(k->phase), R(k->phase));
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, done);
    fj_ins(e, "bra.uni $L_exit");
}

/* ---- consumers ---------------------------------------------------------------------------------- */

/* Wait for K(j) in stage s (phase parity in a register). */
static void consumer_wait_k(fj_kctx *k, int s, fj_reg_t parity)
{
    fj_comment(k->e, 1, "wait for K(j) in stage %d", s);
    fj_emit_mbar_wait(k, fj_ws_bar(k->p, FJ_BAR_K_FULL, s), parity);
}

/* This warp is done with the K or V tile of stage s: lane 0 arrives on its empty barrier. */
static void release(fj_kctx *k, int which, int s)
{
    fj_emit_mbar_arrive(k, fj_ws_bar(k->p, which, s), k->leader);
}

/* Mask (edge tiles only) and the online softmax of the S accumulators for tile j. */
static void consumer_softmax(fj_kctx *k, fj_reg_t mask_from)
{
    fj_emit *e = k->e;
    char nomask[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_emit_score_hook(k);
    fj_label_new(e, "no_mask", nomask, sizeof nomask);
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(k->j), R(mask_from));
    fj_ins(e, "@%s bra.uni %s", R(pr), nomask);
    fj_emit_mask(k);
    fj_label(e, nomask);
    fj_emit_softmax_rebase(k);
    fj_emit_softmax_exp(k);
}

/* Ping-pong: wait for this warpgroup's turn to issue GEMMs / hand the turn to the next warpgroup. */
static void turn_wait(fj_kctx *k, fj_reg_t my_bar)
{
    if (!k->p->pingpong) return;
    fj_ins(k->e, "bar.sync %s, %d", R(my_bar), 256);
}

/* pred: a predicate register, or NULL for every thread. */
static void turn_pass(fj_kctx *k, fj_reg_t next_bar, const fj_reg_t *pred)
{
    if (!k->p->pingpong) return;
    if (pred) fj_ins(k->e, "@%s bar.arrive %s, %d", R(*pred), R(next_bar), 256);
    else fj_ins(k->e, "bar.arrive %s, %d", R(next_bar), 256);
}

/* Serial schedule: per tile S = QK^T, softmax, O += PV, each waited for before the next. */
static void consumer_loop_serial(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from, const char *done)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "kv_loop", top, sizeof top);
    fj_label(e, top);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_comment(e, 1, "---- KV tile j in stage %d ----", s);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(n_end));
        fj_ins(e, "@%s bra.uni %s", R(pr), done);
        consumer_wait_k(k, s, k->phase);
        fj_comment(e, 1, "S = Q K^T; then the stage's K is free");
        p->backend->mma_qk(k, s);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_K_EMPTY, s);
        consumer_softmax(k, mask_from);
        fj_comment(e, 1, "wait for V(j); O += P V; then the stage's V is free");
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_FULL, s), k->phase);
        p->backend->pack_p(k);
        p->backend->mma_pv(k, s, FJ_KEYS_ALL);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_V_EMPTY, s);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    }
    fj_ins(e, "xor.b32 %s, %s, 1", R(k->phase), R(k->phase));
    fj_ins(e, "bra.uni %s", top);
}

/* O += P V for the last tile, whose V is in stage sp (the loop leaves through one tail per stage). */
static void overlap_tail(fj_kctx *k, int sp, fj_reg_t vparity, fj_reg_t my_bar, fj_reg_t next_bar,
                         fj_reg_t not_last_wg)
{
    const fj_plan *p = k->p;
    fj_comment(k->e, 1, "last tile: its V is in stage %d; the last warpgroup's last turn passes to nobody", sp);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_FULL, sp), vparity);
    turn_wait(k, my_bar);
    p->backend->mma_pv(k, sp, FJ_KEYS_ALL);
    turn_pass(k, next_bar, &not_last_wg);
    p->backend->mma_wait(k, 0);
    release(k, FJ_BAR_V_EMPTY, sp);
}

/* Overlapped schedule (FlashAttention-3, Algorithm 2): tile 0's S and softmax first; then iteration j
 * issues S(j) = Q K(j)^T and O += P(j-1) V(j-1), waits for S(j) only, exponentiates it while the PV
 * product runs, waits for that, rescales O when the softmax says so and packs P(j). */
static void consumer_loop_overlap(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from, fj_reg_t my_bar, fj_reg_t next_bar,
                                  fj_reg_t not_last_wg, const char *done)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int stages = p->cfg.stages;
    char top[48], tail[4][48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), vph = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "tile 0: S(0), its softmax and P(0); the loop then overlaps PV(j-1) with the softmax of S(j)");
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    fj_comment(e, 1, "wait for K(0) in stage 0 (pass 0)");
    fj_emit_mbar_wait_imm(k, fj_ws_bar(p, FJ_BAR_K_FULL, 0), 0);
    turn_wait(k, my_bar);
    p->backend->mma_qk(k, 0);
    turn_pass(k, next_bar, NULL);
    p->backend->mma_wait(k, 0);
    release(k, FJ_BAR_K_EMPTY, 0);
    k->defer_o_rescale = 0; /* O is still 0 */
    consumer_softmax(k, mask_from);
    p->backend->pack_p(k);
    fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    for (int s = 0; s < stages; s++) fj_label_new(e, "kv_tail", tail[s], sizeof tail[s]);
    fj_label_new(e, "kv_loop", top, sizeof top);
    fj_label(e, top);
    /* the unrolled body starts at stage 1 % stages: tile j = 1 is the first it sees */
    for (int i = 1; i <= stages; i++) {
        int s = i % stages, sp = (s + stages - 1) % stages;
        fj_comment(e, 1, "---- KV tile j in stage %d; PV of tile j - 1 from stage %d ----", s, sp);
        if (s == 0) fj_ins(e, "mov.u32 %s, %s", R(vph), R(k->phase));
        else if (i == 1) fj_ins(e, "mov.u32 %s, %s", R(vph), R(k->phase));
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(n_end));
        fj_ins(e, "@%s bra.uni %s", R(pr), tail[sp]);
        if (s == 0) {
            fj_comment(e, 1, "stage 0 again: the next pass over the ring (tile j - 1 was the last of this one)");
            fj_ins(e, "xor.b32 %s, %s, 1", R(k->phase), R(k->phase));
        }
        consumer_wait_k(k, s, k->phase);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_FULL, sp), vph);
        turn_wait(k, my_bar);
        fj_comment(e, 1, "issue S(j) = Q K(j)^T, then O += P(j-1) V(j-1); wait for S(j) only");
        p->backend->mma_qk(k, s);
        p->backend->mma_pv(k, sp, FJ_KEYS_ALL);
        turn_pass(k, next_bar, NULL);
        p->backend->mma_wait(k, 1);
        release(k, FJ_BAR_K_EMPTY, s);
        k->defer_o_rescale = 1;
        consumer_softmax(k, mask_from);
        fj_comment(e, 1, "PV(j-1) done: its V stage is free, O may be rescaled and P(j) packed");
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_V_EMPTY, sp);
        fj_emit_softmax_rescale_o(k);
        p->backend->pack_p(k);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        if (s != 0) fj_ins(e, "mov.u32 %s, %s", R(vph), R(k->phase));
    }
    fj_ins(e, "bra.uni %s", top);
    for (int sp = 0; sp < stages; sp++) {
        fj_label(e, tail[sp]);
        overlap_tail(k, sp, vph, my_bar, next_bar, not_last_wg);
        fj_ins(e, "bra.uni %s", done);
    }
    k->defer_o_rescale = 0;
}

static void emit_consumer(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char done[48];
    fj_reg_t my_bar = fj_alloc(e, k->b_r, 1), next_bar = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1);
    fj_reg_t not_last_wg = fj_alloc(e, k->b_p, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_banner(e, "Consumer warpgroups: S = QK^T, softmax, O += PV",
              p->overlap ? "Warpgroup c owns query rows [64c, 64c + 64) of the tile. Tile j: wait for K(j), issue\n"
                           "S(j) = QK(j)^T and O += P(j-1) V(j-1) (wgmma), wait for S(j), free K's stage, mask and\n"
                           "exponentiate while the PV product runs, wait for it, free V's stage, rescale O if the\n"
                           "reference max moved, pack P(j). The last tile's PV runs after the loop."
                         : "Warpgroup c owns query rows [64c, 64c + 64) of the tile. Tile j: wait for K(j),\n"
                           "S = QK^T (wgmma, both operands from smem), free K's stage, mask, online softmax, wait\n"
                           "for V(j), O += PV (wgmma, P from registers), free V's stage.");
    if (p->consumer_regs) {
        fj_comment(e, 1, "registers: %d per thread", p->consumer_regs);
        fj_ins(e, PTX_SETMAXNREG_INC, p->consumer_regs);
    }
    p->backend->setup(k);
    fj_ins(e, "and.b32 %s, %s, 31", R(t), R(k->tid));
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(k->leader), R(t));
    if (p->pingpong) {
        fj_comment(e, 1, "ping-pong: warpgroup c issues its GEMMs after bar.sync %d + c and then lets the next one go "
                         "(bar.arrive on its barrier); the last warpgroup lets warpgroup 0 start",
                   FJ_PINGPONG_BAR0);
        fj_ins(e, "add.u32 %s, %s, %d", R(my_bar), R(k->wg), FJ_PINGPONG_BAR0);
        fj_ins(e, "add.u32 %s, %s, 1", R(t), R(k->wg));
        fj_ins(e, "rem.u32 %s, %s, %d", R(t), R(t), p->consumer_wgs);
        fj_ins(e, "add.u32 %s, %s, %d", R(next_bar), R(t), FJ_PINGPONG_BAR0);
        fj_ins(e, "setp.ne.u32 %s, %s, %d", R(not_last_wg), R(k->wg), p->consumer_wgs - 1);
        fj_ins(e, "setp.gt.s32 %s, %s, 0", R(pr), R(n_end));
        fj_ins(e, "@%s bra.uni $L_no_first_turn", R(not_last_wg));
        fj_ins(e, "@%s bar.arrive %d, %d", R(pr), FJ_PINGPONG_BAR0, 256);
        fj_label(e, "$L_no_first_turn");
    }
    fj_emit_init_accumulators(k);
    fj_comment(e, 1, "wait for Q (one use: phase 0)");
    fj_emit_mbar_wait_imm(k, fj_ws_bar(p, FJ_BAR_Q, 0), 0);
    fj_ins(e, "mov.u32 %s, 0", R(k->j));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_label_new(e, "kv_done", done, sizeof done);
    if (p->overlap) consumer_loop_overlap(k, n_end, mask_from, my_bar, next_bar, not_last_wg, done);
    else consumer_loop_serial(k, n_end, mask_from, done);
    fj_label(e, done);
    fj_banner(e, "Consumer epilogue",
              "Reduce l over the lanes sharing a row, scale O by 1/l, write LSE, store O (rows past Nq skipped).");
    fj_emit_epilogue(k);
    fj_ins(e, "bra.uni $L_exit");
}

void fj_emit_fwd_ws_kernel(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    p->backend->frag_desc(p, &k->frag);
    fj_emit_alloc_banks(k);
    k->wg = fj_alloc(e, k->b_r, 1);
    k->phase = fj_alloc(e, k->b_r, 1);
    k->params = fj_alloc(e, k->b_rd, 1);
    k->leader = fj_alloc(e, k->b_p, 1);
    k->corr = fj_alloc(e, k->b_f, k->frag.rows);
    k->rescale_pred = fj_alloc(e, k->b_p, 1);
    fj_emit_indices(k, 0);
    fj_reg_t n_end = fj_alloc(e, k->b_r, 1), mask_from = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_emit_kv_range(k, n_end, mask_from);
    fj_banner(e, "Warp roles",
              "Thread 0 initializes the mbarriers; after a CTA barrier warpgroup 0 becomes the producer\n"
              "and warpgroups 1.. the consumers. setmaxnreg moves registers from the first to the others;\n"
              "no CTA-wide barrier follows (the producer's idle warps leave early).");
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
    fj_ins(e, "@%s bra.uni $L_bars_done", R(pr));
    fj_emit_ws_bar_init(k);
    fj_label(e, "$L_bars_done");
    fj_ins(e, "bar.sync 0");
    fj_ins(e, "shr.u32 %s, %s, 2", R(k->wg), R(k->warp));
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->wg));
    fj_ins(e, "@%s bra.uni $L_consumer", R(pr));
    emit_producer(k, n_end);
    fj_label(e, "$L_consumer");
    fj_ins(e, "sub.u32 %s, %s, 1", R(k->wg), R(k->wg));
    emit_consumer(k, n_end, mask_from);
    fj_label(e, "$L_exit");
    fj_ins(e, "ret");
}
