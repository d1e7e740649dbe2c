/*
 * sm100.c - the sm_100a backend's plan: tcgen05.mma (kind::f16, fp32 accumulation in tensor memory) fed by TMA,
 * the roles of sm100.h as a role table (fj_sm100_roles) for the warp-specialized frame (ws_frame.c), whose role bodies
 * are sm100_roles.c's. PTX ISA 8.6, .target sm_100a. The instruction forms and descriptors are tc05.[ch]'s.
 *
 * Tensor memory (128 lanes x 512 columns of 32 bits; row i of an M = 128 accumulator is lane i): S[0], S[1] take
 * block_n columns each (a KV tile's S alternates between them, so S(j + 1) = Q K(j + 1)^T runs while the softmax
 * reads S(j)); O head_dim columns; P[0], P[1] block_n / 2 each (bf16 / f16 pairs, the A operand of O += P V read
 * from tensor memory). P has buffers of its own rather than S's columns (FlashAttention-4 writes P over S): the
 * PTX ISA orders two tcgen05.mma of one thread only for the same accumulator and shape (9.7.16.6.2), so S(j + 2)
 * into S[b] is not ordered after O += P(j) V reading P in S[b]. 3 block_n + head_dim <= 512:
 *   D64 bc128: 448   D96 bc128: 480   D128 bc128: 512   D192 bc64: 384   D256 bc64: 448 (bc128 would be 640)
 * D256 fits by a 64-key tile: one query tile of 128 rows, S 2 x 64 + O 256 + P 2 x 32. Two query tiles in flight
 * (FlashAttention-4's ping-pong: 2 x (S + O)) fit only D <= 128 and are not built yet.
 */
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "kernel_abi.h"
#include "base/error.h"
#include "sm100.h"
#include "tc05.h"
#include "ws_frame.h"

#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)

#define FJ_SM100_RESCALE_SLACK 8 /* log2 units a row max may pass the reference before O is rescaled */
/* Exponentials of every 8 of a softmax row on the FMA units (soft_exp2.h) instead of the MUFU (plan.soft_exp2).
 * Reckoned, not measured (no Blackwell GPU here): an SM of sm_100 issues 128 FMA lanes but 16 MUFU lanes a clock, so a
 * warp's ex2 takes 8 issue cycles of its sub-partition's MUFU while the softmax spends ~4 FMA-pipe slots per value
 * (scale FMA, max, sum, pack); x of 8 values in software (11 slots each) balance at 8 (8 - x) = 8 x 4 + 11 x, x ~ 1.7:
 * 2 of 8 up to head_dim 128. Above it each exponential carries twice the MMA work (D x block_n per tile), so the MUFU
 * is not the bound: 0. FlashAttention-4 moves a share of its exponentials the same way. The sm_90a A/B (sm90.c) found
 * the issue slots, not the MUFU, the limit on the H100: a Blackwell A/B decides (build knob; the ptxas test
 * assembles shares 0-4). */
#ifndef FJ_SM100_SOFT_EXP2
#define FJ_SM100_SOFT_EXP2 2
#endif
/* ptxas 13.0 gives 320 threads 168 registers (as 384): the softmax needed 199 (d128 bc128, 24 B spilled at 168),
 * hence 12 warps and setmaxnreg (sm100.h) */
#define FJ_SM100_REG_MISC 48     /* softmax thread: addresses, ring and schedule state, row statistics */

/* Tensor memory columns of a config: S [2] block_n, O head_dim, P [2] block_n / 2 - per query tile in flight with the
 * ping-pong (S, O, P of each tile; S and P single-buffered). */
static int tmem_cols_of(const fajit_config *c)
{
    return c->pingpong == 1 ? 2 * (c->block_n + c->head_dim + c->block_n / 2) : 3 * c->block_n + c->head_dim;
}

void fj_sm100_fill(fajit_config *c)
{
    int pp = c->pingpong == 1;
    if (!c->col_warps) c->col_warps = 1;
    if (!c->block_m) c->block_m = pp ? 2 * FJ_SM100_TILE_ROWS : FJ_SM100_TILE_ROWS;
    if (!c->warps) c->warps = pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS;
    /* the largest block_n (a multiple of 32, at most 128) whose S, O and P fit 512 columns */
    if (!c->block_n) {
        c->block_n = 128;
        while (c->block_n > 32 && tmem_cols_of(c) > 512) c->block_n -= 32;
    }
    if (!c->stages) c->stages = c->head_dim <= 64 ? 3 : 2;
    if (!c->swizzle) c->swizzle = c->head_dim % 64 == 0 ? 128 : 64;
    if (!c->overlap) c->overlap = -1;
    if (!c->pingpong) c->pingpong = -1;
}

static fajit_status tiles_sm100(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->dtype != FAJIT_DTYPE_BF16 && c->dtype != FAJIT_DTYPE_F16)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "dtype = %d on sm_100a: its kernels take bf16 and f16 (kind::f16)",
                       (int)c->dtype);
    if (c->mods)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "mods = 0x%x on sm_100a: its kernels take no attention variants yet",
                       (unsigned)c->mods);
    int pp = c->pingpong == 1;
    int cols = tmem_cols_of(c);
    if (cols > 512 && pp && (512 - 2 * c->head_dim) / 3 < 32)
        return CFG_FAIL("pingpong = 1 with head_dim %d on sm_100a: two query tiles' O take 2 x %d of tensor memory's 512 "
                        "columns, too few are left for S and P (block_n >= 32); use pingpong off (one query tile)",
                        c->head_dim, c->head_dim);
    if (cols > 512 && pp)
        return CFG_FAIL("block_n (--bc) = %d with head_dim %d and pingpong: tensor memory needs 2 query tiles x (S %d + "
                        "O %d + P %d) = %d columns, more than its 512; use block_n <= %d, or pingpong off",
                        c->block_n, c->head_dim, c->block_n, c->head_dim, c->block_n / 2, cols,
                        (512 - 2 * c->head_dim) / 3 / 16 * 16);
    if (cols > 512)
        return CFG_FAIL("block_n (--bc) = %d with head_dim %d: tensor memory needs S 2 x %d + O %d + P 2 x %d = %d "
                        "columns, more than its 512; use block_n <= %d",
                        c->block_n, c->head_dim, c->block_n, c->head_dim, c->block_n / 2, cols,
                        (512 - c->head_dim) / 3 / 16 * 16);
    if (c->sched == 1)
        return CFG_FAIL("sched = 1 (lpt) on sm_100a: its kernel takes the static schedule only (the longest-first one "
                        "is the sm_90a kernel's); use 0 or -1");
    if (c->cross_tile == 1)
        return CFG_FAIL("cross_tile = 1 on sm_100a: the cross-tile tail is the sm_90a ping-pong consumers'; use 0 or -1");
    if (c->accurate == 1)
        return CFG_FAIL("accurate = 1 on sm_100a: its softmax has no weight test yet (sm_80 and sm_90a have); use 0 or -1");
    if (c->col_warps != 0 && c->col_warps != 1)
        return CFG_FAIL("col_warps = %d: the sm_100a path has no warp pairs (a softmax thread owns a row); use 0 or 1",
                        c->col_warps);
    p->col_warps = p->cfg.col_warps = 1;
    if (c->block_m != (pp ? 2 : 1) * FJ_SM100_TILE_ROWS)
        return CFG_FAIL("block_m (--br) = %d: must be %d on sm_100a%s (one M = 128 tcgen05.mma tile a query tile, a row "
                        "a lane of tensor memory)", c->block_m, (pp ? 2 : 1) * FJ_SM100_TILE_ROWS,
                        pp ? " with pingpong (two query tiles in flight)" : " (256 with pingpong on)");
    if (c->warps != (pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS))
        return CFG_FAIL("warps = %d: the sm_100a kernel runs %d warps (%s, a correction warpgroup, an MMA warp, a load "
                        "warp%s)", c->warps, pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS,
                        pp ? "two softmax warpgroups" : "a softmax warpgroup", pp ? "" : "; 16 with pingpong on");
    if (c->swizzle == FAJIT_SWIZZLE_NONE)
        return CFG_FAIL("swizzle = none: the sm_100a path stores tiles as TMA boxes of the swizzle span, which the "
                        "tcgen05 descriptors read; use 32, 64 or 128");
    if (c->stages < 2)
        return CFG_FAIL("stages = %d: the sm_100a kernel issues S(j + 1) before O += P(j) V, so K(j + 1) and V(j) are "
                        "in the ring together; use 2..4", c->stages);
    if (c->overlap == 1)
        return CFG_FAIL("overlap = 1 on sm_100a: its schedule is fixed (S(j + 1) beside softmax(j), or with pingpong "
                        "one query tile's softmax beside the other's MMAs); use 0 or -1");
    if (c->block_n < 32 || c->block_n % 16)
        return CFG_FAIL("block_n (--bc) = %d on sm_100a: a multiple of 16 from 32 (the N of tcgen05.mma M128, P's "
                        "8-column k-steps)", c->block_n);
    p->ws = 1;
    p->consumer_wgs = 1;
    p->row_warps = 4;
    p->m_frags = 1;
    p->params_bytes = (int)sizeof(fj_fwd_params_tma);
    p->params_align = 64;
    return FAJIT_OK;
}

static void smem_map_sm100(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    p->row_bytes = c->head_dim * 2;
    p->q_off = 0;
    p->q_bufs = 1;
    p->q_bytes = c->block_m * p->row_bytes;
    p->kv_tile_bytes = c->block_n * p->row_bytes;
    p->kv_slots = c->stages;
    p->k_off = p->q_bytes; /* every tile a multiple of 1024 bytes: 16 rows x >= 128 B, 128 rows */
    p->v_off = p->k_off + c->stages * p->kv_tile_bytes;
    p->o_stage = 0;
    p->o_off = 0;
    p->o_row_bytes = p->row_bytes;
    p->o_bytes = p->q_bytes;
    p->bar_off = p->v_off + c->stages * p->kv_tile_bytes;
    p->sm100_bar = p->bar_off + 8 * fj_ws_bar_count(c->stages, 0);
    p->n_bars = fj_ws_bar_count(c->stages, 0) + FJ_SB_COUNT;
    p->tmem_slot = p->bar_off + 8 * p->n_bars;
    p->corr_off = p->tmem_slot + 16;
    p->stats_off = p->corr_off + 2 * 4 * c->block_m;
    p->smem_bytes = p->stats_off + 4 * 4 * c->block_m;
    p->xchg_off = p->xchg_warp_bytes = 0;
}

static fajit_status plan_sm100(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    p->tma_box_cols = c->swizzle / 2;
    p->tma_boxes = c->head_dim / p->tma_box_cols;
    p->o_box_cols = p->tma_box_cols;
    p->o_boxes = p->tma_boxes;
    int tiles = fj_sm100_tiles(p);
    p->tmem_s_col = 0;                                  /* S[0], S[1]: block_n each */
    p->tmem_o_col = 2 * c->block_n;                     /* O (O[0], O[1] with the ping-pong): head_dim each */
    p->tmem_p_col = p->tmem_o_col + tiles * c->head_dim; /* P[0], P[1]: block_n / 2 each */
    p->tmem_cols = fj_tc05_alloc_cols(p->tmem_p_col + c->block_n);
    p->rescale_slack = FJ_SM100_RESCALE_SLACK;
    p->soft_exp2 = c->head_dim <= 128 ? FJ_SM100_SOFT_EXP2 : 0;
    p->reg_limit = tiles == 2 ? FJ_SM100_PP_REGS_SOFTMAX : FJ_SM100_REGS_SOFTMAX;
    p->consumer_regs = p->reg_limit;
    p->producer_regs = tiles == 2 ? FJ_SM100_PP_REGS_OTHER : FJ_SM100_REGS_OTHER;
    p->consumer_wgs = tiles; /* softmax warpgroups */
    p->whole_program = 1; /* setmaxnreg: NVRTC or the driver's JIT (nvJitLink drops it) */
    p->reg_acc_s = c->block_n; /* a softmax thread holds its row of S */
    p->reg_acc_o = 0;          /* O stays in tensor memory; the correction moves 32 columns at a time */
    p->reg_p = 0;              /* P is packed as S dies */
    p->reg_misc = FJ_SM100_REG_MISC;
    p->reg_total = p->reg_acc_s + p->reg_misc;
    if (p->reg_total > p->reg_limit)
        return CFG_FAIL("registers: about %d per softmax thread (S row %d + ~%d) exceed %d; lower block_n",
                        p->reg_total, p->reg_acc_s, p->reg_misc, p->reg_limit);
    return FAJIT_OK;
}

static void describe_sm100(const fj_plan *p, fj_buf *out, const char *pf)
{
    const fajit_config *c = &p->cfg;
    const char *dt = fj_dtype_ptx(p);
    if (p->pingpong)
        fj_buf_printf(out, "%swarp roles (two query tiles in flight, FlashAttention-4's ping-pong): warps 0-3 softmax of "
                           "query tile 0 (rows 0-127 of the work tile), 4-7 softmax of tile 1 (rows 128-255), 8-11 "
                           "correction + epilogue of both tiles, 12 MMA (one thread; alternates between the tiles, each "
                           "K / V tile read by both; allocates and frees tensor memory), 13-15 load (one thread); "
                           "setmaxnreg: softmax %d, correction %d, warpgroup 3 %d (512 threads); the warp-specialized "
                           "frame emits the setup, the dispatch and the teardown from the role table\n",
                      pf, FJ_SM100_PP_REGS_SOFTMAX, FJ_SM100_PP_REGS_CORR, FJ_SM100_PP_REGS_OTHER);
    else
        fj_buf_printf(out, "%swarp roles: warps 0-3 softmax (thread t owns query row t), 4-7 correction + epilogue (O's "
                           "row t), 8 MMA (one thread issues every tcgen05.mma / commit; the warp allocates and frees "
                           "tensor memory), 9-11 load (one thread issues the TMA loads; warps 10-11 leave); setmaxnreg: "
                           "softmax %d, correction %d, warpgroup 2 %d; the warp-specialized frame emits the setup, the "
                           "dispatch and the teardown from the role table\n",
                      pf, FJ_SM100_REGS_SOFTMAX, FJ_SM100_REGS_START, FJ_SM100_REGS_OTHER);
    fj_buf_printf(out, "%sMMA: S = QK^T: %d x tcgen05.mma.kind::f16 M128 N%d K16 (%s; A = Q, B = K from smem, both "
                       "K-major); O += PV: %d x M128 N%d K16 (A = P from tensor memory, B = V from smem, N-major)\n",
                  pf, p->k_steps_qk, c->block_n, dt, p->k_steps_pv, c->head_dim);
    fj_buf_printf(out, "%stensor memory: %d columns allocated: S[0] at %d, S[1] at %d (%d each), O%s at %d (%d%s), P[0] at "
                       "%d, P[1] at %d (%d each: two %s a column); %s; S, O, P rows = lanes, read and written with "
                       "tcgen05.ld / st .32x32b\n",
                  pf, p->tmem_cols, p->tmem_s_col, p->tmem_s_col + c->block_n, c->block_n, p->pingpong ? "[0], O[1]" : "",
                  p->tmem_o_col, c->head_dim, p->pingpong ? " each" : "", p->tmem_p_col, p->tmem_p_col + c->block_n / 2,
                  c->block_n / 2, dt,
                  p->pingpong ? "[b]: query tile b's" : "S[b], P[b] alternate with the KV tile (b = it % 2)");
    fj_buf_printf(out, "%sTMA: 4-D tensor maps in the parameter block; boxes of %d columns (%d B, swizzle %d B) x %d rows "
                       "(Q) / %d rows (K, V), %d per tile; descriptors (sm_100 version bit 46): SBO %d B; V's LBO one box\n",
                  pf, p->tma_box_cols, c->swizzle, c->swizzle, c->block_m, c->block_n, p->tma_boxes, 8 * c->swizzle);
    fj_buf_printf(out, "%smbarriers at +%d: Q full / empty, K / V full / empty per stage (async.h; the empties count 1: "
                       "tcgen05.commit of the MMA thread), then at +%d S full[2], P full[2], O ready[2], corr full[2], O "
                       "full[%d], O free[%d], stats full[2] (sm100.h; [b]: %s); each a ring of the role table, which the "
                       "frame initializes\n",
                  pf, p->bar_off, p->sm100_bar, fj_sm100_tiles(p), fj_sm100_tiles(p),
                  p->pingpong ? "query tile b" : "KV tile it, b = it % 2");
    fj_buf_printf(out, "%ssoftmax: lazy rescale (a row's reference max moves only when the tile max passes it by more than "
                       "2^%d); the correction warps rescale O in tensor memory only when a row of theirs moved (a warp "
                       "vote); %d of every 8 exponentials on the FMA units (software exp2), the rest on the MUFU; "
                       "epilogue: O x 1/l from tensor memory to global memory (st.global), LSE\n",
                  pf, p->rescale_slack, p->soft_exp2);
    int pp = p->pingpong;
    fj_buf_printf(out, "%sregister budget (estimate, 32-bit regs per thread, setmaxnreg per role): softmax: S row %d "
                       "(tcgen05.ld, a register a column; P packed as S dies) + addressing/softmax ~%d = %d of %d; "
                       "correction: O 32 columns at a time (tcgen05.ld / st .x32) + factors and epilogue addressing, of "
                       "%d; MMA and load threads: descriptors and ring state, of %d\n",
                  pf, p->reg_acc_s, p->reg_misc, p->reg_total, p->reg_limit,
                  pp ? FJ_SM100_PP_REGS_CORR : FJ_SM100_REGS_START, pp ? FJ_SM100_PP_REGS_OTHER : FJ_SM100_REGS_OTHER);
}

void fj_sm100_qk_step(const fj_plan *p, int ks, int *q_off, int *k_off)
{
    int w = p->cfg.swizzle, col = 16 * ks, box = col / p->tma_box_cols, inner = 2 * (col % p->tma_box_cols);
    *q_off = box * p->cfg.block_m * w + inner; /* 32 B further along the row; the next box after rows x W bytes */
    *k_off = box * p->cfg.block_n * w + inner;
}

void fj_sm100_pv_step(const fj_plan *p, int ks, int *p_col, int *v_off)
{
    *p_col = 8 * ks;                  /* 16 keys of P: 8 columns of two */
    *v_off = ks * 16 * p->cfg.swizzle; /* 16 key rows of V */
}

void fj_sm100_desc_strides(const fj_plan *p, int v, int *lbo, int *sbo)
{
    *lbo = v ? p->cfg.block_n * p->cfg.swizzle : 16; /* V: one box along N; K-major swizzled: unused ("assumed 1") */
    *sbo = 8 * p->cfg.swizzle;                        /* 8 rows of the swizzle span */
}

/* ---- the role table (roles.h) -------------------------------------------------------------------- */

static int sbar(const fj_plan *p, int which) { return p->sm100_bar + 8 * which; }

static void roles_sm100(const fj_plan *p, fj_role_table *t)
{
    int pp = p->pingpong, corr = fj_sm100_warp_corr(p), mma = fj_sm100_warp_mma(p), load = fj_sm100_warp_load(p);
    fj_role *r = fj_role_add(t, "softmax", FJ_ROLE_SOFTMAX, FJ_SM100_WARP_SOFTMAX, 4 * fj_sm100_tiles(p), 0);
    r->instances = fj_sm100_tiles(p);
    r->regs = p->consumer_regs;
    r->regs_how = FJ_REGS_INC;
    r->title = pp ? "Softmax roles (warpgroup i: query tile i; thread t owns its row t, tensor memory lane t)"
                  : "Softmax role (warps 0-3: thread t owns query row t, tensor memory lane t)";
    r->why = "Per KV tile: S(j) row from tensor memory, mask, m = the reference max (moved only when the tile's\n"
             "passes it by 2^slack), P = 2^(s scale - m) packed to 16 bits into P[b], the rescale factor\n"
             "2^(m_old - m) to the correction role, l = l c + sum P. At the end of a work tile l and m go to\n"
             "shared memory for the epilogue.";
    r = fj_role_add(t, "correction", FJ_ROLE_CORRECTION, corr, 4, 1);
    r->regs = pp ? FJ_SM100_PP_REGS_CORR : FJ_SM100_REGS_START;
    r->regs_how = pp ? FJ_REGS_DEC : FJ_REGS_KEEP;
    r->label = "corr";
    r->title = pp ? "Correction role (warps 8-11: thread t rescales row t of each query tile's O; then the epilogue)"
                  : "Correction role (warps 4-7: thread t rescales O's row t; then the epilogue)";
    r->why = "Per KV tile j > 0: once O += P(j-1) V(j-1) is done (O full), O's row x the softmax's factor, in a warp\n"
             "only when one of its rows' max moved (vote); then O ready. The epilogue ends each work tile.";
    r = fj_role_add(t, "MMA", FJ_ROLE_MMA, mma, 1, 2);
    r->regs = p->producer_regs;
    r->regs_how = FJ_REGS_DEC;
    r->label = "mma";
    r->title = pp ? "MMA role (warp 12, one thread)" : "MMA role (warp 8, one thread)";
    r->why = pp ? "S0(0), S1(0), then per KV tile and query tile i: O_i += P_i(j) V(j) once P_i(j) is stored and O_i\n"
                  "rescaled, S_i(j + 1): one tile's MMAs run while the other's softmax does. Every group ends in\n"
                  "tcgen05.commit: K / V empty (after tile 1's), S full, O full, Q empty arrive when it completes."
                : "S(0), S(1), then per KV tile: O += P(j) V(j) once P(j) is stored and O rescaled, S(j + 2).\n"
                  "Every group ends in tcgen05.commit: K / V empty, S full, O full, Q empty arrive when it completes.";
    r = fj_role_add(t, "load", FJ_ROLE_LOAD, load, (pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS) - load, 2);
    r->label = "load";
    r->title = pp ? "Load role (warp 13, one thread)" : "Load role (warp 9, one thread)";
    r->why = "Q into its buffer once the last work tile's S MMAs are done (Q empty), K(j) and V(j) into stage\n"
             "it % stages once the MMAs that read the stage's last tiles are done (K / V empty: tcgen05.commit).";
    snprintf(r->note, sizeof r->note, "warps %d-%d: the load role (thread 0 of warp %d issues every copy; the others leave)",
             load, (pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS) - 1, load);
}

void fj_sm100_roles(fj_plan *p)
{
    fj_role_table *t = &p->roles;
    const int sm = FJ_SM100_ROLE_SOFTMAX, co = FJ_SM100_ROLE_CORR, mma = FJ_SM100_ROLE_MMA, ld = FJ_SM100_ROLE_LOAD;
    int tiles = fj_sm100_tiles(p);
    memset(t, 0, sizeof *t);
    t->mma_event = FJ_MMA_EVENT_MBARRIER;
    t->setup_why = "Thread 0 initializes the mbarriers, the MMA warp allocates tensor memory (its address lands in\n"
                   "shared memory); after a CTA barrier every thread reads it and the warps go to their roles.";
    roles_sm100(p, t);
    t->tmem_cols = p->tmem_cols;
    t->tmem_slot = p->tmem_slot;
    t->tmem_warp = fj_sm100_warp_mma(p);
    t->tmem_bar = FJ_SM100_TEARDOWN_BAR;
    t->tmem_roles = 1u << sm | 1u << co | 1u << mma;
    fj_ring *g = fj_ring_add(t, "Q", 1, 8);
    snprintf(g->note, sizeof g->note,
             "mbarriers: Q full (1 arrival + %d bytes), Q empty (1: tcgen05.commit after the work tile's last S); per "
             "stage K / V full (1 arrival + the tile's bytes), K / V empty (1: tcgen05.commit after the MMAs reading it)",
             p->q_bytes);
    fj_ring_add_part(t, g, "Q", ld, mma, 1, p->q_bytes, 1, fj_ws_bar(p, FJ_BAR_Q_FULL, 0), fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0));
    t->n_rings++;
    g = fj_ring_add(t, "K/V", p->cfg.stages, 8 * FJ_WS_BARS_PER_STAGE);
    fj_ring_add_part(t, g, "K", ld, mma, 1, p->kv_tile_bytes, 1, fj_ws_bar(p, FJ_BAR_K_FULL, 0),
                     fj_ws_bar(p, FJ_BAR_K_EMPTY, 0));
    fj_ring_add_part(t, g, "V", ld, mma, 1, p->kv_tile_bytes, 1, fj_ws_bar(p, FJ_BAR_V_FULL, 0),
                     fj_ws_bar(p, FJ_BAR_V_EMPTY, 0));
    t->n_rings++;
    g = fj_ring_add(t, "S", 2, 8);
    snprintf(g->note, sizeof g->note,
             "S full[2] (1: tcgen05.commit after S[b] = QK^T); P full[2], O ready[2] (4 each: lane 0 of each softmax / "
             "correction warp); corr full[2], stats full[2] (4: softmax warps); O full[%d] (1: commit after each PV); O "
             "free[%d] (4: correction warps)%s", tiles, tiles,
             tiles == 2 ? "; [b]: query tile b" : "; [b]: KV tile it, b = it % 2");
    fj_ring_add_part(t, g, "S", mma, sm, 1, 0, 0, sbar(p, FJ_SB_S_FULL), 0);
    t->n_rings++;
    g = fj_ring_add(t, "P/O ready", 2, 8);
    fj_ring_add_part(t, g, "P", sm, mma, 4, 0, 0, sbar(p, FJ_SB_P_FULL), 0);
    fj_ring_add_part(t, g, "O ready", co, mma, 4, 0, 0, sbar(p, FJ_SB_O_READY), 0);
    t->n_rings++;
    g = fj_ring_add(t, "corr", 2, 8);
    fj_ring_add_part(t, g, "corr", sm, co, 4, 0, 0, sbar(p, FJ_SB_CORR_FULL), 0);
    t->n_rings++;
    g = fj_ring_add(t, "O full", tiles, 8);
    fj_ring_add_part(t, g, "O full", mma, co, 1, 0, 0, sbar(p, FJ_SB_O_FULL), 0);
    t->n_rings++;
    g = fj_ring_add(t, "O free", tiles, 8);
    fj_ring_add_part(t, g, "O free", co, mma, 4, 0, 0, sbar(p, FJ_SB_O_FREE), 0);
    t->n_rings++;
    g = fj_ring_add(t, "stats", 2, 8);
    fj_ring_add_part(t, g, "stats", sm, co, 4, 0, 0, sbar(p, FJ_SB_STATS_FULL), 0);
    t->n_rings++;
}

static void mma_commit_sm100(fj_kctx *k, fj_reg_t base, int off) { fj_tc05_commit(k, base, off); }

static const fj_async_proto async_sm100 = {
    .roles = fj_sm100_roles,
    .role_body = fj_sm100_role_body,
    .mma_wait = NULL, /* FJ_MMA_EVENT_MBARRIER: tcgen05.commit arrives on the rings' barriers */
    .mma_commit = mma_commit_sm100,
};

static int row0(const fj_plan *p, int row) { (void)p; return row; }
static int s_reg1(const fj_plan *p, int row, int val) { (void)p; (void)row; return val; }
static int col_id(const fj_plan *p, int val) { (void)p; return val; }

/* After tcgen05.ld.32x32b a thread owns a whole row: no shuffles. */
static void frag_desc_sm100(const fj_plan *p, fj_frag_desc *d)
{
    d->rows = 1;
    d->s_vals = p->cfg.block_n;
    d->o_vals = p->cfg.head_dim;
    d->n_shuffles = 0;
    d->s_reg = s_reg1;
    d->o_reg = s_reg1;
    d->row_off = row0;
    d->s_col_off = col_id;
    d->o_col_off = col_id;
}

const fj_backend fj_backend_sm100 = {
    .name = "sm100a-tcgen05",
    .required_caps = FJ_CAP_TMA | FJ_CAP_TCGEN05,
    .tiles = tiles_sm100,
    .smem_map = smem_map_sm100,
    .plan = plan_sm100,
    .describe = describe_sm100,
    .frag_desc = frag_desc_sm100,
    .async = &async_sm100,
};
