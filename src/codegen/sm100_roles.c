/*
 * sm100_roles.c - the sm_100a role bodies (PTX ISA 8.6, .target sm_100a) on the warp-specialized frame (ws_frame.c):
 * S and O in tensor memory, P written back to tensor memory and read from there by O += P V, TMA loads. The frame
 * emits what the role table (sm100.c fj_sm100_roles) says: the barrier setup, the tensor memory allocation, the
 * dispatch, setmaxnreg, the work-tile schedule and the teardown; this file what each role does per work tile:
 *
 *   load (warp 9, one thread)   per work tile: Q once its buffer is free, then K(j), V(j) into the stage ring
 *   MMA (warp 8, one thread)    S(0), S(1); for each j: wait P(j) and O rescaled, O += P(j) V(j), S(j + 2);
 *                               each MMA group closes with tcgen05.commit (async->mma_commit) on the barrier its
 *                               reader waits on
 *   softmax (warps 0-3)         thread t: row t of S(j) (tcgen05.ld), mask, row max (lazy: the reference max
 *                               moves only when the tile's passes it by 2^slack), P = 2^(s - m) (plan.soft_exp2 of
 *                               every 8 on the FMA units, the rest on the MUFU) packed to 16 bits into P[j % 2]
 *                               (tcgen05.st), the row's factor to shared memory; l, m at the end
 *   correction (warps 4-7)      thread t: O's row t x the factor once O += P(j - 1) V(j - 1) is done, only in a warp
 *                               where some row's max moved; at the end of a work tile the epilogue: O x 1/l to
 *                               global memory, LSE
 * The MMA issue order S(0), S(1), PV(0), S(2), PV(1), ... lets the softmax of S(j + 1) run while PV(j) does. KV tile
 * j of the CTA's whole run (counted across work tiles: `it`) uses stage it % stages (phase it / stages) and
 * S[it % 2], P[it % 2] (phase it / 2). Tensor memory hazards and what orders them:
 *   S[b] written by S(j + 2) after the softmax read S(j): the MMA waits P full(j) (the softmax arrives after its
 *     tcgen05.wait::ld) before PV(j), and issues S(j + 2) after PV(j)
 *   P[b] written by softmax(j + 2) while PV(j) may read it: softmax(j + 2) waits S full(j + 2), a tcgen05.commit
 *     issued after PV(j), and a commit tracks every earlier MMA of its thread
 *   O rescaled by correction(j) while PV(j - 1) writes it: the correction waits O full (commit after each PV)
 *   O read by the epilogue, then the next work tile's PV(0): the MMA waits O free
 * Every thread-to-thread hand-over of tensor memory is tcgen05.wait / tcgen05.fence::before_thread_sync, the
 * arrive, the wait, tcgen05.fence::after_thread_sync (PTX ISA 9.7.16.6.4).
 * Every role walks the frame's persistent schedule (fj_ws_tile_loop_head: work tile round x G + CTA, causal odd
 * rounds backwards, the KV range of mask.c) on its own; each runs at least one KV tile a work tile.
 */
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm100.h"
#include "ptx_templates/sm90.h"
#include "sm100.h"
#include "tc05.h"
#include "ws_frame.h"

#define R(reg) fj_r(k->e, reg)

/* A role's walk over the CTA's work tiles: the frame's schedule and decode (round, m0, h, b, hkv are the frame's
 * registers: l->round, k->m0, k->h, k->b, k->hkv), the KV tiles the role has gone through and the work tile's. */
typedef struct sm_tile {
    fj_reg_t round;                /* u32: l->round */
    fj_reg_t m0, h, b, hkv;        /* u32: k->m0, k->h, k->b, k->hkv */
    fj_reg_t n;                    /* s32: its KV tiles (>= 1) */
    fj_reg_t it;                   /* u32: KV tiles this role has gone through before this work tile */
    int what;                      /* the role's FJ_WS_* flags (tile_begin's) */
    char top[48], end[48];
} sm_tile;

static fj_reg_t r32(fj_kctx *k) { return fj_alloc(k->e, k->b_r, 1); }
static fj_reg_t r64(fj_kctx *k) { return fj_alloc(k->e, k->b_rd, 1); }
static fj_reg_t rf(fj_kctx *k) { return fj_alloc(k->e, k->b_f, 1); }
static fj_reg_t rp(fj_kctx *k) { return fj_alloc(k->e, k->b_p, 1); }

static int sbar(const fj_plan *p, int which) { return p->sm100_bar + 8 * which; }

/* dst = (x >> shift) & 1: the parity of use x >> shift of a barrier */
static void parity(fj_kctx *k, fj_reg_t dst, fj_reg_t x, int shift, int flip)
{
    fj_ins(k->e, "shr.u32 %s, %s, %d", R(dst), R(x), shift);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(dst), R(dst));
    if (flip) fj_ins(k->e, "xor.b32 %s, %s, 1", R(dst), R(dst));
}

/* The stage of KV tile `it` and its pass's parity (flip: the producer's wait on the empty barrier). */
static void stage_of(fj_kctx *k, fj_reg_t it, fj_reg_t stage, fj_reg_t par, int flip)
{
    int s = k->p->cfg.stages;
    fj_ins(k->e, "rem.u32 %s, %s, %d", R(stage), R(it), s);
    fj_ins(k->e, "div.u32 %s, %s, %d", R(par), R(it), s);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(par), R(par));
    if (flip) fj_ins(k->e, "xor.b32 %s, %s, 1", R(par), R(par));
}

/* ---- the work-tile walk (the frame's schedule) ---------------------------------------------------- */

/* The loop head of a role's walk (`what`: ws_frame.h FJ_WS_*): the frame takes the next work tile and decodes it, or
 * leaves to t->end; n = its KV tiles, at least one (a work tile whose rows see no key runs one fully masked tile:
 * O = 0, LSE = -inf). */
static void tile_begin(fj_kctx *k, fj_ws_loop *l, sm_tile *t, const char *role, int what)
{
    fj_emit *e = k->e;
    char stem[32];
    t->round = l->round, t->m0 = k->m0, t->h = k->h, t->b = k->b, t->hkv = k->hkv;
    t->it = r32(k), t->n = r32(k), t->what = what;
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(t->it));
    fj_ws_sched_start(k, l, what);
    snprintf(stem, sizeof stem, "%s_tile", role);
    fj_label_new(e, stem, t->top, sizeof t->top);
    snprintf(stem, sizeof stem, "%s_done", role);
    fj_label_new(e, stem, t->end, sizeof t->end);
    fj_ws_tile_loop_head(k, l, t->top, what, t->end);
    fj_comment(e, 1, "KV tiles of the work tile: at least one (rows that see no key: one fully masked tile)");
    fj_ins(e, "max.s32 %s, %s, 1", R(t->n), R(l->n_end));
}

static void tile_next(fj_kctx *k, fj_ws_loop *l, sm_tile *t)
{
    fj_ins(k->e, "add.u32 %s, %s, %s", R(t->it), R(t->it), R(t->n));
    fj_ws_next_round(k, l, t->what);
    fj_ins(k->e, "bra.uni %s", t->top);
    fj_label(k->e, t->end);
}

/* leader = lane 0 of the warp (it arrives for the warp; in the MMA and load warps it issues) */
static void set_leader(fj_kctx *k) { fj_ins(k->e, "setp.eq.u32 %s, %s, 0", R(k->leader), R(k->lane)); }

/* ---- load ----------------------------------------------------------------------------------------- */

/* One thread: Q, then K(j), V(j) of each work tile (the warps' other threads, and warps 10-11, leave). */
static void role_load(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    sm_tile t;
    fj_reg_t pr = l->has_group_pred ? l->group_pred : rp(k);
    fj_ins(e, "setp.ne.u32 %s, %s, %d", R(pr), R(k->tid), 32 * fj_sm100_warp_load(p));
    fj_ins(e, "@%s bra $L_exit", R(pr));
    fj_ins(e, "mov.u64 %s, " FJ_FWD_PARAM_NAME, R(k->params));
    fj_ins(e, PTX_CVTA_PARAM, R(k->params), R(k->params));
    tile_begin(k, l, &t, "load", FJ_WS_DECODE_ROWS | FJ_WS_DECODE_HEADS | FJ_WS_TILE_PRODUCER);
    fj_reg_t par = r32(k), j = r32(k), it = r32(k), st = r32(k), dst = r32(k), bar = r32(k), row = r32(k);
    char loop[48];
    fj_comment(e, 1, "Q once the last work tile's S MMAs are done with its buffer (Q empty)");
    fj_ins(e, "xor.b32 %s, %s, 1", R(par), R(l->qpar));
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0), par);
    fj_ws_publish_tile(k, l);
    fj_ins(e, PTX_MBAR_ARRIVE_EXPECT_TX, R(l->qbar), fj_ws_bar(p, FJ_BAR_Q_FULL, 0), p->q_bytes);
    fj_ins(e, "add.u32 %s, %s, %s", R(dst), R(k->smem), R(k->q_buf));
    fj_emit_tma_tile(k, FJ_TMA_Q, dst, p->q_off, p->cfg.block_m, t.m0, t.h, l->qbar, fj_ws_bar(p, FJ_BAR_Q_FULL, 0));
    fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "load_kv", loop, sizeof loop);
    fj_label(e, loop);
    fj_ins(e, "add.u32 %s, %s, %s", R(it), R(t.it), R(j));
    stage_of(k, it, st, par, 1);
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(row), R(j), p->cfg.block_n);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(dst), R(st), p->kv_tile_bytes, R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(bar), R(st), 8 * FJ_WS_BARS_PER_STAGE, R(k->smem));
    for (int v = 0; v < 2; v++) {
        int full = fj_ws_bar(p, v ? FJ_BAR_V_FULL : FJ_BAR_K_FULL, 0);
        int empty = fj_ws_bar(p, v ? FJ_BAR_V_EMPTY : FJ_BAR_K_EMPTY, 0);
        fj_emit_mbar_wait_at(k, bar, empty, par);
        fj_ins(e, PTX_MBAR_ARRIVE_EXPECT_TX, R(bar), full, p->kv_tile_bytes);
        fj_emit_tma_tile(k, v ? FJ_TMA_V : FJ_TMA_K, dst, v ? p->v_off : p->k_off, p->cfg.block_n, row, t.hkv, bar,
                         full);
    }
    fj_ins(e, "add.s32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(j), R(t.n));
    fj_ins(e, "@%s bra.uni %s", R(pr), loop);
    tile_next(k, l, &t);
    fj_ws_tile_loop_end(k, l, FJ_WS_TILE_PRODUCER, "$L_exit");
    fj_ins(e, "bra.uni $L_exit");
}

/* ---- MMA ------------------------------------------------------------------------------------------ */

/* A 64-bit descriptor of shared address base + off (a register + an immediate) with the given LBO / SBO. */
static fj_reg_t sdesc_reg(fj_kctx *k, fj_reg_t base, int off, int lbo, int sbo)
{
    uint64_t bits = fj_tc05_sdesc(0, (uint32_t)lbo, (uint32_t)sbo, k->p->cfg.swizzle);
    fj_reg_t a = r32(k), d = r64(k);
    fj_ins(k->e, "add.u32 %s, %s, %d", R(a), R(base), off);
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(a), R(a));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(d), R(a));
    fj_ins(k->e, "or.b64 %s, %s, 0x%016llX", R(d), R(d), (unsigned long long)bits);
    return d;
}

static fj_reg_t desc_at(fj_kctx *k, fj_reg_t base, int off)
{
    fj_reg_t d = r64(k);
    fj_ins(k->e, "add.s64 %s, %s, %d", R(d), R(base), off >> 4);
    return d;
}

typedef struct mma_regs {
    fj_reg_t tmem, idesc_qk, idesc_pv, qdesc;
    fj_reg_t kv_base; /* u32: smem + stage x kv_tile_bytes of the tile at hand */
} mma_regs;

/* b (u32) and par (u32) of KV tile `it` for query tile `tile` (-1: the one-tile kernel): sm100.h's rule. */
static void buf_of(fj_kctx *k, fj_reg_t it, int tile, fj_reg_t b, fj_reg_t par)
{
    if (tile < 0) {
        fj_ins(k->e, "and.b32 %s, %s, 1", R(b), R(it));
        parity(k, par, it, 1, 0);
    } else {
        fj_ins(k->e, "mov.u32 %s, %d", R(b), tile);
        parity(k, par, it, 0, 0);
    }
}

/* S[b] = Q K(it)^T (two query tiles: S[tile] = Q_tile K(it)^T, Q_tile the rows 128 tile ..); then S full[b], and
 * after the stage's last reader (the one tile, or tile 1) K's stage is freed and, for the work tile's last KV tile
 * (j == n - 1), Q. */
static void mma_qk(fj_kctx *k, fj_ws_loop *l, mma_regs *m, fj_reg_t it, fj_reg_t j, fj_reg_t n, int tile)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int w = p->cfg.swizzle, bc = p->cfg.block_n, last_reader = tile != 0;
    fj_reg_t st = r32(k), par = r32(k), bar = r32(k), sb = r32(k), pr = rp(k), scol = r32(k);
    stage_of(k, it, st, par, 0);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(bar), R(st), 8 * FJ_WS_BARS_PER_STAGE, R(k->smem));
    if (tile <= 0) { /* tile 1 reads the K tile tile 0's MMA waited for (one thread: in program order) */
        fj_emit_mbar_wait_at(k, bar, fj_ws_bar(p, FJ_BAR_K_FULL, 0), par);
        fj_ins(e, PTX_TC05_FENCE_AFTER);
    }
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(m->kv_base), R(st), p->kv_tile_bytes, R(k->smem));
    int lbo, sbo;
    fj_sm100_desc_strides(p, 0, &lbo, &sbo);
    fj_reg_t kdesc = sdesc_reg(k, m->kv_base, p->k_off, lbo, sbo);
    buf_of(k, it, tile, sb, par);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(scol), R(sb), bc, R(m->tmem));
    if (tile < 0)
        fj_comment(e, 1, "S[it %% 2] = Q K^T: %d x M128 N%d K16, Q and K K-major (k-step: 32 B along the row, next box "
                         "after rows x %d B)", p->k_steps_qk, bc, w);
    else
        fj_comment(e, 1, "S[%d] = Q_%d K^T: %d x M128 N%d K16 (Q_%d: rows %d.. of each Q box)", tile, tile, p->k_steps_qk,
                   bc, tile, FJ_SM100_TILE_ROWS * tile);
    int q_tile = fj_sm100_q_tile_off(p, tile > 0 ? tile : 0);
    for (int ks = 0; ks < p->k_steps_qk; ks++) {
        int qo, ko;
        fj_sm100_qk_step(p, ks, &qo, &ko);
        fj_reg_t da = desc_at(k, m->qdesc, qo + q_tile);
        fj_reg_t db = desc_at(k, kdesc, ko);
        fj_tc05_mma_ss(k, scol, 0, da, db, m->idesc_qk, ks ? "1" : "0");
    }
    if (last_reader) p->backend->async->mma_commit(k, bar, fj_ws_bar(p, FJ_BAR_K_EMPTY, 0));
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sb), R(sb), R(k->smem));
    p->backend->async->mma_commit(k, sb, sbar(p, FJ_SB_S_FULL));
    if (!last_reader) return;
    fj_reg_t last = r32(k);
    fj_ins(e, "sub.s32 %s, %s, 1", R(last), R(n));
    fj_ins(e, "setp.eq.s32 %s, %s, %s", R(pr), R(j), R(last));
    fj_ins(e, "@%s " PTX_TC05_COMMIT, R(pr), R(l->qbar), fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0));
}

/* O (+)= P[b] V(it) (two query tiles: O[tile] += P[tile] V(it)), after P and the rescaled O are ready; frees V's
 * stage after its last reader, signals O full (O full[tile]). */
static void mma_pv(fj_kctx *k, mma_regs *m, fj_reg_t it, fj_reg_t j, int tile)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int w = p->cfg.swizzle, bc = p->cfg.block_n, ocol = fj_sm100_o_col(p, tile > 0 ? tile : 0);
    fj_reg_t st = r32(k), par = r32(k), bar = r32(k), sb = r32(k), acc = rp(k), pcol = r32(k), sbb = r32(k);
    buf_of(k, it, tile, sb, par);
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sbb), R(sb), R(k->smem));
    fj_emit_mbar_wait_at(k, sbb, sbar(p, FJ_SB_P_FULL), par);
    fj_emit_mbar_wait_at(k, sbb, sbar(p, FJ_SB_O_READY), par);
    stage_of(k, it, st, par, 0);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(bar), R(st), 8 * FJ_WS_BARS_PER_STAGE, R(k->smem));
    if (tile <= 0) fj_emit_mbar_wait_at(k, bar, fj_ws_bar(p, FJ_BAR_V_FULL, 0), par);
    fj_ins(e, PTX_TC05_FENCE_AFTER);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(m->kv_base), R(st), p->kv_tile_bytes, R(k->smem));
    int lbo, sbo;
    fj_sm100_desc_strides(p, 1, &lbo, &sbo);
    fj_reg_t vdesc = sdesc_reg(k, m->kv_base, p->v_off, lbo, sbo);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(pcol), R(sb), bc / 2, R(m->tmem));
    fj_ins(e, "setp.ne.s32 %s, %s, 0", R(acc), R(j));
    fj_comment(e, 1, "O%s (+)= P V: %d x M128 N%d K16, A = P from tensor memory (8 columns a k-step), B = V N-major "
                     "(LBO one box of %d rows, a k-step 16 rows = %d B)", tile < 0 ? "" : tile ? "[1]" : "[0]",
               p->k_steps_pv, p->cfg.head_dim, bc, 16 * w);
    for (int ks = 0; ks < p->k_steps_pv; ks++) {
        int pc, vo;
        fj_sm100_pv_step(p, ks, &pc, &vo);
        fj_reg_t db = desc_at(k, vdesc, vo);
        fj_ins(e, PTX_TC05_MMA_TS, R(m->tmem), ocol, R(pcol), p->tmem_p_col + pc, R(db), R(m->idesc_pv),
               ks ? "1" : R(acc));
    }
    if (tile != 0) p->backend->async->mma_commit(k, bar, fj_ws_bar(p, FJ_BAR_V_EMPTY, 0));
    p->backend->async->mma_commit(k, k->smem, sbar(p, FJ_SB_O_FULL) + 8 * (tile > 0 ? tile : 0));
}

/* The MMA thread's setup: instruction descriptors, Q's descriptor. */
static void mma_setup(fj_kctx *k, mma_regs *m)
{
    const fj_plan *p = k->p;
    int bf16 = p->cfg.dtype == FAJIT_DTYPE_BF16;
    m->tmem = k->tmem;
    m->idesc_qk = r32(k), m->idesc_pv = r32(k), m->kv_base = r32(k);
    fj_ins(k->e, "mov.u32 %s, 0x%08X", R(m->idesc_qk), fj_tc05_idesc_f16(128, p->cfg.block_n, bf16, 0, 0));
    fj_ins(k->e, "mov.u32 %s, 0x%08X", R(m->idesc_pv), fj_tc05_idesc_f16(128, p->cfg.head_dim, bf16, 0, 1));
    int lbo, sbo;
    fj_sm100_desc_strides(p, 0, &lbo, &sbo);
    m->qdesc = sdesc_reg(k, k->smem, p->q_off, lbo, sbo);
}

/* Two query tiles (pingpong): S0(0), S1(0), then per KV tile j and query tile i = 0, 1: O_i += P_i(j) V(j), S_i(j + 1).
 * While the MMAs of one tile run, the other tile's softmax does; each K / V tile serves both. */
static void mma_loop_two_tiles(fj_kctx *k, fj_ws_loop *l, mma_regs *m, sm_tile *t)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t par = r32(k), j = r32(k), it = r32(k), pr = rp(k), zero = r32(k), j1 = r32(k), it1 = r32(k);
    char loop[48], no_next[2][48], free1[48];
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    mma_qk(k, l, m, t->it, zero, t->n, 0);
    mma_qk(k, l, m, t->it, zero, t->n, 1);
    fj_comment(e, 1, "a query tile's first PV writes its O: the epilogue of the last work tile must have read it (O free)");
    parity(k, par, t->round, 0, 1);
    fj_emit_mbar_wait(k, sbar(p, FJ_SB_O_FREE), par);
    fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "mma_kv", loop, sizeof loop);
    fj_label_new(e, "mma_free1", free1, sizeof free1);
    for (int i = 0; i < 2; i++) fj_label_new(e, "mma_no_next", no_next[i], sizeof no_next[i]);
    fj_label(e, loop);
    fj_ins(e, "add.u32 %s, %s, %s", R(it), R(t->it), R(j));
    fj_ins(e, "add.s32 %s, %s, 1", R(j1), R(j));
    fj_ins(e, "add.u32 %s, %s, 1", R(it1), R(it));
    for (int i = 0; i < 2; i++) {
        if (i == 1) {
            fj_ins(e, "setp.ne.s32 %s, %s, 0", R(pr), R(j));
            fj_ins(e, "@%s bra.uni %s", R(pr), free1);
            parity(k, par, t->round, 0, 1);
            fj_emit_mbar_wait(k, sbar(p, FJ_SB_O_FREE) + 8, par);
            fj_label(e, free1);
        }
        mma_pv(k, m, it, j, i);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(j1), R(t->n));
        fj_ins(e, "@%s bra.uni %s", R(pr), no_next[i]);
        mma_qk(k, l, m, it1, j1, t->n, i);
        fj_label(e, no_next[i]);
    }
    fj_ins(e, "mov.s32 %s, %s", R(j), R(j1));
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(j), R(t->n));
    fj_ins(e, "@%s bra.uni %s", R(pr), loop);
}

/* One query tile: S(0), S(1), then per KV tile PV(j), S(j + 2). */
static void mma_loop_one_tile(fj_kctx *k, fj_ws_loop *l, mma_regs *m, sm_tile *t)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t par = r32(k), j = r32(k), it = r32(k), pr = rp(k), one = r32(k), zero = r32(k);
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    mma_qk(k, l, m, t->it, zero, t->n, -1);
    char skip1[48], loop[48], no_next[48];
    fj_label_new(e, "mma_one", skip1, sizeof skip1);
    fj_ins(e, "setp.lt.s32 %s, %s, 2", R(pr), R(t->n));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip1);
    fj_ins(e, "add.u32 %s, %s, 1", R(it), R(t->it));
    fj_ins(e, "mov.u32 %s, 1", R(one));
    mma_qk(k, l, m, it, one, t->n, -1);
    fj_label(e, skip1);
    fj_comment(e, 1, "the first PV of a work tile writes O: the epilogue of the last one must have read it (O free)");
    parity(k, par, t->round, 0, 1);
    fj_emit_mbar_wait(k, sbar(p, FJ_SB_O_FREE), par);
    fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "mma_kv", loop, sizeof loop);
    fj_label_new(e, "mma_no_next", no_next, sizeof no_next);
    fj_label(e, loop);
    fj_ins(e, "add.u32 %s, %s, %s", R(it), R(t->it), R(j));
    mma_pv(k, m, it, j, -1);
    fj_reg_t j2 = r32(k), it2 = r32(k);
    fj_ins(e, "add.s32 %s, %s, 2", R(j2), R(j));
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(j2), R(t->n));
    fj_ins(e, "@%s bra.uni %s", R(pr), no_next);
    fj_ins(e, "add.u32 %s, %s, 2", R(it2), R(it));
    mma_qk(k, l, m, it2, j2, t->n, -1);
    fj_label(e, no_next);
    fj_ins(e, "add.s32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(j), R(t->n));
    fj_ins(e, "@%s bra.uni %s", R(pr), loop);
}

/* One thread issues; the warp's other lanes wait at its end (the frame's teardown takes the whole warp). */
static void role_mma(fj_kctx *k, fj_ws_loop *l)
{
    fj_emit *e = k->e;
    sm_tile t;
    mma_regs m;
    set_leader(k);
    fj_ins(e, "@!%s bra $L_mma_idle", R(k->leader));
    mma_setup(k, &m);
    tile_begin(k, l, &t, "mma", FJ_WS_DECODE_ROWS);
    fj_ws_wait_q(k, l);
    if (k->p->pingpong) mma_loop_two_tiles(k, l, &m, &t);
    else mma_loop_one_tile(k, l, &m, &t);
    tile_next(k, l, &t);
    fj_label(e, "$L_mma_idle");
    fj_ins(e, PTX_BAR_WARP_SYNC);
}

/* ---- softmax -------------------------------------------------------------------------------------- */

/* The warp meets, then lane 0 arrives on the barrier at base + off for it (after each thread's own fences). */
static void warp_arrive(fj_kctx *k, fj_reg_t base, int off)
{
    fj_ins(k->e, PTX_BAR_WARP_SYNC);
    fj_ins(k->e, "@%s " PTX_MBAR_ARRIVE, R(k->leader), R(base), off);
}

/* Mask row t's scores of KV tile j: keys >= Nk, and with causal keys past the row's diagonal. */
static void softmax_mask(fj_kctx *k, sm_tile *t, fj_reg_t s, fj_reg_t j, fj_reg_t row)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int bc = p->cfg.block_n;
    fj_reg_t lim = r32(k), x = r32(k), kv0 = r32(k), pr = rp(k);
    char skip[48];
    fj_ins(e, "mul.lo.s32 %s, %s, %d", R(kv0), R(j), bc);
    fj_ins(e, PTX_LD_PARAM_U32, R(lim), FJ_PARAM_OFF(seqlen_k));
    if (p->cfg.causal) {
        fj_comment(e, 2, "causal, bottom-right aligned: row a sees keys <= m0 + a + Nk - Nq");
        fj_ins(e, PTX_LD_PARAM_U32, R(x), FJ_PARAM_OFF(seqlen_q));
        fj_ins(e, "sub.s32 %s, %s, %s", R(x), R(lim), R(x));
        fj_ins(e, "add.s32 %s, %s, %s", R(x), R(x), R(t->m0));
        fj_ins(e, "add.s32 %s, %s, %s", R(x), R(x), R(row));
        fj_ins(e, "add.s32 %s, %s, 1", R(x), R(x));
        fj_ins(e, "min.s32 %s, %s, %s", R(lim), R(lim), R(x));
    }
    fj_ins(e, "sub.s32 %s, %s, %s", R(lim), R(lim), R(kv0));
    fj_label_new(e, "sm_nomask", skip, sizeof skip);
    fj_ins(e, "setp.ge.s32 %s, %s, %d", R(pr), R(lim), bc);
    fj_ins(e, "@%s bra %s", R(pr), skip);
    fj_comment(e, 1, "keys >= lim of this tile: -inf");
    for (int i = 0; i < bc; i++) {
        fj_ins(e, "setp.le.s32 %s, %s, %d", R(pr), R(lim), i);
        fj_ins(e, "@%s mov.f32 %s, " PTX_F32_NEG_INF, R(pr), R(fj_at(s, i)));
    }
    fj_label(e, skip);
}

static void role_softmax(fj_kctx *k, fj_ws_loop *l_)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int bc = p->cfg.block_n;
    sm_tile t;
    set_leader(k);
    int b_s = fj_bank(e, "s", "f32"), b_pk = fj_bank(e, "pk", "b32");
    fj_reg_t s = fj_alloc(e, b_s, bc), pk = fj_alloc(e, b_pk, bc / 2);
    fj_reg_t lanes = r32(k), row = r32(k), scale = rf(k);
    fj_reg_t mrow = p->pingpong ? r32(k) : row; /* the row in the work tile (the mask's) */
    fj_ins(e, "and.b32 %s, %s, 3", R(lanes), R(k->warp));
    fj_ins(e, "shl.b32 %s, %s, 21", R(lanes), R(lanes)); /* lanes 32 (warp % 4) .. (<< 16) */
    fj_ins(e, "add.u32 %s, %s, %s", R(lanes), R(lanes), R(k->tmem));
    fj_ins(e, "and.b32 %s, %s, %d", R(row), R(k->tid), FJ_SM100_TILE_ROWS - 1);
    if (p->pingpong) {
        fj_comment(e, 1, "two query tiles: this warpgroup (instance %%wg) owns tile wg, work-tile rows 128 wg + t; its S, "
                         "P, factors and statistics are buffer b = wg");
        fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(mrow), R(k->wg), FJ_SM100_TILE_ROWS, R(row));
    }
    fj_ins(e, "ld.param.f32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(scale), FJ_PARAM_OFF(scale_log2));
    tile_begin(k, l_, &t, "softmax", FJ_WS_DECODE_ROWS);
    fj_reg_t m = rf(k), l = rf(k), j = r32(k), it = r32(k), sb = r32(k), sbb = r32(k), par = r32(k), pr = rp(k);
    fj_reg_t col = r32(k), mx = rf(k), mt = rf(k), mn = rf(k), mb = rf(k), c = rf(k), sum = rf(k), ca = r32(k);
    char loop[48];
    fj_ins(e, "mov.f32 %s, " PTX_F32_NEG_INF, R(m));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(l));
    fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "softmax_kv", loop, sizeof loop);
    fj_label(e, loop);
    fj_ins(e, "add.u32 %s, %s, %s", R(it), R(t.it), R(j));
    if (p->pingpong) {
        fj_ins(e, "mov.u32 %s, %s", R(sb), R(k->wg));
        parity(k, par, it, 0, 0);
    } else {
        buf_of(k, it, -1, sb, par);
    }
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sbb), R(sb), R(k->smem));
    fj_emit_mbar_wait_at(k, sbb, sbar(p, FJ_SB_S_FULL), par);
    fj_ins(e, PTX_TC05_FENCE_AFTER);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(col), R(sb), bc, R(lanes));
    for (int c0 = 0; c0 < bc; c0 += 32) fj_tc05_ld(k, fj_at(s, c0), bc - c0 < 32 ? bc - c0 : 32, col, p->tmem_s_col + c0);
    fj_ins(e, PTX_TC05_WAIT_LD);
    softmax_mask(k, &t, s, j, mrow);
    fj_comment(e, 1, "row max (raw scores), then in log2 units");
    fj_ins(e, "max.f32 %s, %s, %s", R(mx), R(s), R(fj_at(s, 1)));
    for (int i = 2; i < bc; i++) fj_ins(e, "max.f32 %s, %s, %s", R(mx), R(mx), R(fj_at(s, i)));
    fj_ins(e, "mul.f32 %s, %s, %s", R(mt), R(mx), R(scale));
    fj_comment(e, 1, "lazy rescale: the reference max moves only past m + %d", p->rescale_slack);
    fj_ins(e, "add.f32 %s, %s, 0f%08X", R(mn), R(m), 0x41000000u); /* + 8.0 */
    fj_ins(e, "setp.gt.f32 %s, %s, %s", R(pr), R(mt), R(mn));
    fj_ins(e, "selp.f32 %s, %s, %s, %s", R(mn), R(mt), R(m), R(pr));
    fj_ins(e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pr), R(mn));
    fj_ins(e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(mb), R(mn), R(pr));
    fj_ins(e, "sub.f32 %s, %s, %s", R(c), R(m), R(mb));
    fj_ins(e, "ex2.approx.ftz.f32 %s, %s", R(c), R(c));
    fj_ins(e, "mov.f32 %s, %s", R(m), R(mn));
    fj_ins(e, "neg.f32 %s, %s", R(mb), R(mb));
    fj_comment(e, 1, "P = 2^(s scale - m), l = l c + sum P, P packed in pairs (the first key in the low half)");
    if (p->soft_exp2)
        fj_comment(e, 1, "%d of every 8 exponentials on the FMA units (soft_exp2.h), the rest on the MUFU; the row sum "
                         "flushes subnormals (a masked score's software 2^-inf is one)", p->soft_exp2);
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(sum));
    for (int i = 0; i < bc; i++) {
        const char *v = R(fj_at(s, i));
        fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", v, v, R(scale), R(mb));
        fj_emit_exp2_value(k, fj_at(s, i), i);
        fj_ins(e, "add.%sf32 %s, %s, %s", p->soft_exp2 ? "ftz." : "", R(sum), R(sum), v);
    }
    fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(l), R(l), R(c), R(sum));
    for (int i = 0; i < bc / 2; i++)
        fj_ins(e, "cvt.rn.%sx2.f32 %s, %s, %s", fj_dtype_ptx(p), R(fj_at(pk, i)), R(fj_at(s, 2 * i + 1)),
               R(fj_at(s, 2 * i)));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(col), R(sb), bc / 2, R(lanes));
    for (int c0 = 0; c0 < bc / 2; c0 += 32)
        fj_tc05_st(k, col, p->tmem_p_col + c0, fj_at(pk, c0), bc / 2 - c0 < 32 ? bc / 2 - c0 : 32);
    fj_comment(e, 1, "the row's factor to corr[b][t]");
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ca), R(sb), 4 * p->cfg.block_m, R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(ca), R(row), R(ca));
    fj_ins(e, "st.shared.f32 [%s+%d], %s", R(ca), p->corr_off, R(c));
    fj_ins(e, PTX_TC05_WAIT_ST);
    fj_ins(e, PTX_TC05_FENCE_BEFORE);
    warp_arrive(k, sbb, sbar(p, FJ_SB_CORR_FULL));
    fj_ins(e, "@%s " PTX_MBAR_ARRIVE, R(k->leader), R(sbb), sbar(p, FJ_SB_P_FULL));
    fj_ins(e, "add.s32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(j), R(t.n));
    fj_ins(e, "@%s bra.uni %s", R(pr), loop);
    fj_comment(e, 1, "the work tile's l and m to stats[%s] for the epilogue", p->pingpong ? "wg" : "round % 2");
    if (p->pingpong) fj_ins(e, "mov.u32 %s, %s", R(sb), R(k->wg));
    else fj_ins(e, "and.b32 %s, %s, 1", R(sb), R(t.round));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ca), R(sb), 8 * p->cfg.block_m, R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(ca), R(row), R(ca));
    fj_ins(e, "st.shared.f32 [%s+%d], %s", R(ca), p->stats_off, R(l));
    fj_ins(e, "st.shared.f32 [%s+%d], %s", R(ca), p->stats_off + 4 * p->cfg.block_m, R(m));
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sbb), R(sb), R(k->smem));
    warp_arrive(k, sbb, sbar(p, FJ_SB_STATS_FULL));
    tile_next(k, l_, &t);
}

/* ---- correction and epilogue ---------------------------------------------------------------------- */

/* The epilogue of query tile `tile` (-1: the one-tile kernel) of a work tile: O x 1/l from tensor memory to global
 * memory, LSE; then O free. */
static void emit_epilogue(fj_kctx *k, sm_tile *t, fj_reg_t lanes, fj_reg_t row, fj_reg_t o, int tile)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int d = p->cfg.head_dim, bm = p->cfg.block_m, ob = tile > 0 ? tile : 0, ocol = fj_sm100_o_col(p, ob);
    fj_reg_t par = r32(k), sb = r32(k), sbb = r32(k), ca = r32(k), l = rf(k), m = rf(k), inv = rf(k), lse = rf(k);
    fj_reg_t pos = rp(k), ok = rp(k), sq = r32(k), grow = r32(k), a = r64(k), x = r64(k), y = r64(k), last = r32(k);
    fj_comment(e, 1, "epilogue%s: the work tile's last PV done (O full), its l and m (stats full)",
               tile < 0 ? "" : tile ? " of query tile 1" : " of query tile 0");
    fj_ins(e, "add.u32 %s, %s, %s", R(last), R(t->it), R(t->n));
    fj_ins(e, "sub.u32 %s, %s, 1", R(last), R(last));
    parity(k, par, last, 0, 0);
    fj_emit_mbar_wait(k, sbar(p, FJ_SB_O_FULL) + 8 * ob, par);
    fj_ins(e, PTX_TC05_FENCE_AFTER);
    if (tile < 0) {
        fj_ins(e, "and.b32 %s, %s, 1", R(sb), R(t->round));
        parity(k, par, t->round, 1, 0);
    } else {
        fj_ins(e, "mov.u32 %s, %d", R(sb), tile);
        parity(k, par, t->round, 0, 0);
    }
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sbb), R(sb), R(k->smem));
    fj_emit_mbar_wait_at(k, sbb, sbar(p, FJ_SB_STATS_FULL), par);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ca), R(sb), 8 * bm, R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(ca), R(row), R(ca));
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(l), R(ca), p->stats_off);
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(m), R(ca), p->stats_off + 4 * bm);
    fj_ins(e, "setp.gt.f32 %s, %s, " PTX_F32_ZERO, R(pos), R(l));
    fj_ins(e, "rcp.approx.ftz.f32 %s, %s", R(inv), R(l));
    fj_ins(e, "selp.f32 %s, %s, " PTX_F32_ZERO ", %s", R(inv), R(inv), R(pos));
    fj_comment(e, 1, "row m0 + t exists: &O[b, h, m0 + t, 0] = o + 2 (b s0 + h s1 + (m0 + t) s2)");
    fj_ins(e, PTX_LD_PARAM_U32, R(sq), FJ_PARAM_OFF(seqlen_q));
    fj_ins(e, "add.u32 %s, %s, %s", R(grow), R(t->m0), R(row));
    if (tile > 0) fj_ins(e, "add.u32 %s, %s, %d", R(grow), R(grow), tile * FJ_SM100_TILE_ROWS);
    fj_ins(e, "setp.lt.u32 %s, %s, %s", R(ok), R(grow), R(sq));
    fj_ins(e, "ld.param.u64 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(a), FJ_PARAM_OFF(o));
    const int offs[3] = {FJ_PARAM_OFF(o_stride[0]), FJ_PARAM_OFF(o_stride[1]), FJ_PARAM_OFF(o_stride[2])};
    const fj_reg_t idx[3] = {t->b, t->h, grow};
    for (int i = 0; i < 3; i++) {
        fj_ins(e, "ld.param.u64 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(x), offs[i]);
        fj_ins(e, "cvt.u64.u32 %s, %s", R(y), R(idx[i]));
        fj_ins(e, "mul.lo.u64 %s, %s, %s", R(x), R(x), R(y));
        fj_ins(e, "shl.b64 %s, %s, 1", R(x), R(x));
        fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(x));
    }
    fj_reg_t pkr = fj_alloc(e, fj_bank(e, "pk", "b32"), 16);
    for (int c0 = 0; c0 < d; c0 += 32) {
        fj_tc05_ld(k, o, 32, lanes, ocol + c0);
        fj_ins(e, PTX_TC05_WAIT_LD);
        for (int i = 0; i < 16; i++) {
            fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(o, 2 * i)), R(fj_at(o, 2 * i)), R(inv));
            fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(o, 2 * i + 1)), R(fj_at(o, 2 * i + 1)), R(inv));
            fj_ins(e, "cvt.rn.%sx2.f32 %s, %s, %s", fj_dtype_ptx(p), R(fj_at(pkr, i)), R(fj_at(o, 2 * i + 1)),
                   R(fj_at(o, 2 * i)));
        }
        for (int q = 0; q < 4; q++)
            fj_ins(e, "@%s st.global.v4.b32 [%s+%d], {%s, %s, %s, %s}", R(ok), R(a), 2 * c0 + 16 * q,
                   R(fj_at(pkr, 4 * q)), R(fj_at(pkr, 4 * q + 1)), R(fj_at(pkr, 4 * q + 2)), R(fj_at(pkr, 4 * q + 3)));
    }
    fj_comment(e, 1, "LSE[b, h, m0 + t] = (m + log2 l) ln 2 (-inf for a row with no key), when asked for");
    fj_reg_t hq = r32(k), li = r32(k);
    fj_ins(e, "ld.param.u64 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(a), FJ_PARAM_OFF(lse));
    fj_ins(e, "setp.ne.and.u64 %s, %s, 0, %s", R(ok), R(a), R(ok));
    fj_ins(e, "lg2.approx.ftz.f32 %s, %s", R(lse), R(l));
    fj_ins(e, "add.f32 %s, %s, %s", R(lse), R(lse), R(m));
    fj_ins(e, "mul.f32 %s, %s, " PTX_F32_LN2, R(lse), R(lse));
    fj_ins(e, "selp.f32 %s, %s, " PTX_F32_NEG_INF ", %s", R(lse), R(lse), R(pos));
    fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(li), R(t->b), R(hq), R(t->h));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(li), R(li), R(sq), R(grow));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(x), R(li));
    fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(x));
    fj_ins(e, "@%s st.global.f32 [%s], %s", R(ok), R(a), R(lse));
    fj_ins(e, PTX_TC05_FENCE_BEFORE);
    warp_arrive(k, k->smem, sbar(p, FJ_SB_O_FREE) + 8 * ob);
}

/* Query tile `tile`'s step of KV tile j (it = the CTA's count): the factor from the softmax (corr full); for j > 0,
 * once PV(j - 1) is done (O full), O's row x c where a row of the warp moved; then O ready. */
static void correction_step(fj_kctx *k, fj_reg_t lanes, fj_reg_t row, fj_reg_t o, fj_reg_t j, fj_reg_t it, int tile)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int d = p->cfg.head_dim, ob = tile > 0 ? tile : 0, ocol = fj_sm100_o_col(p, ob);
    fj_reg_t sb = r32(k), sbb = r32(k), par = r32(k), pr = rp(k), ca = r32(k), c = rf(k), prev = r32(k);
    char skip[48];
    buf_of(k, it, tile, sb, par);
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(sbb), R(sb), R(k->smem));
    fj_emit_mbar_wait_at(k, sbb, sbar(p, FJ_SB_CORR_FULL), par);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ca), R(sb), 4 * p->cfg.block_m, R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(ca), R(row), R(ca));
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(c), R(ca), p->corr_off);
    fj_label_new(e, "corr_skip", skip, sizeof skip);
    fj_ins(e, "setp.eq.s32 %s, %s, 0", R(pr), R(j));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    fj_ins(e, "sub.u32 %s, %s, 1", R(prev), R(it));
    parity(k, par, prev, 0, 0);
    fj_emit_mbar_wait(k, sbar(p, FJ_SB_O_FULL) + 8 * ob, par);
    fj_ins(e, "setp.neu.f32 %s, %s, 0f3F800000", R(pr), R(c));
    fj_ins(e, "vote.sync.any.pred %s, %s, -1", R(pr), R(pr));
    fj_ins(e, "@!%s bra.uni %s", R(pr), skip);
    fj_ins(e, PTX_TC05_FENCE_AFTER);
    fj_comment(e, 1, "O%s's row x c, 32 columns at a time", tile < 0 ? "" : tile ? "[1]" : "[0]");
    for (int c0 = 0; c0 < d; c0 += 32) {
        fj_tc05_ld(k, o, 32, lanes, ocol + c0);
        fj_ins(e, PTX_TC05_WAIT_LD);
        for (int i = 0; i < 32; i++) fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(o, i)), R(fj_at(o, i)), R(c));
        fj_tc05_st(k, lanes, ocol + c0, o, 32);
    }
    fj_ins(e, PTX_TC05_WAIT_ST);
    fj_label(e, skip);
    fj_ins(e, PTX_TC05_FENCE_BEFORE);
    warp_arrive(k, sbb, sbar(p, FJ_SB_O_READY));
}

static void role_correction(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    sm_tile t;
    set_leader(k);
    int b_o = fj_bank(e, "o", "f32");
    fj_reg_t o = fj_alloc(e, b_o, 32);
    fj_reg_t lanes = r32(k), row = r32(k);
    fj_ins(e, "and.b32 %s, %s, 3", R(lanes), R(k->warp));
    fj_ins(e, "shl.b32 %s, %s, 21", R(lanes), R(lanes));
    fj_ins(e, "add.u32 %s, %s, %s", R(lanes), R(lanes), R(k->tmem));
    fj_ins(e, "sub.u32 %s, %s, %d", R(row), R(k->tid), 32 * fj_sm100_warp_corr(p));
    tile_begin(k, l, &t, "corr", FJ_WS_DECODE_ROWS | FJ_WS_DECODE_HEADS);
    fj_reg_t j = r32(k), it = r32(k), pr = rp(k);
    char loop[48];
    fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "corr_kv", loop, sizeof loop);
    fj_label(e, loop);
    fj_ins(e, "add.u32 %s, %s, %s", R(it), R(t.it), R(j));
    if (p->pingpong)
        for (int i = 0; i < 2; i++) correction_step(k, lanes, row, o, j, it, i);
    else
        correction_step(k, lanes, row, o, j, it, -1);
    fj_ins(e, "add.s32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "setp.lt.s32 %s, %s, %s", R(pr), R(j), R(t.n));
    fj_ins(e, "@%s bra.uni %s", R(pr), loop);
    if (p->pingpong)
        for (int i = 0; i < 2; i++) emit_epilogue(k, &t, lanes, row, o, i);
    else
        emit_epilogue(k, &t, lanes, row, o, -1);
    tile_next(k, l, &t);
}

/* ---- the role bodies the frame emits (fj_async_proto.role_body) ---------------------------------- */

void fj_sm100_role_body(fj_kctx *k, fj_ws_loop *l, const fj_role *r)
{
    switch (r->kind) {
    case FJ_ROLE_LOAD: role_load(k, l); return;
    case FJ_ROLE_MMA: role_mma(k, l); return;
    case FJ_ROLE_SOFTMAX: role_softmax(k, l); return;
    case FJ_ROLE_CORRECTION: role_correction(k, l); return;
    default: fj_emit_error(k->e, "sm_100a: no body for role %s (kind %d)", r->name, r->kind);
    }
}
