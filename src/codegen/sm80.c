/*
 * sm80.c - the sm_80 backend: cp.async tile copies, ldmatrix, mma.sync.m16n8k16 (PTX ISA 7.0).
 *
 * The same PTX runs on sm_80, 86, 89, 90 and up. FlashAttention-2 work split: each warp owns
 * 16 * m_frags query rows; all warps share the K and V tiles of a stage.
 *
 * Shared-memory layout of every tile ([rows][head_dim] of 16-bit elements, row_bytes = 2 * head_dim):
 * the 16-byte chunk c of row r is stored at chunk c ^ (r & swz_mask). ldmatrix reads 8 rows of one
 * logical chunk per 8x8 matrix; row_bytes is a multiple of 128 B (or 192 B for d96), so without the
 * XOR those 8 rows would sit in the same 4 banks. With swz_mask = 7 the 8 rows land in 8 different
 * chunks of a 128-byte window: all 32 banks, no conflict.
 *
 * Addressing trick: an ldmatrix row address is  base + row * row_bytes + ((c ^ (row & m)) << 4).
 * Every ldmatrix issued here has row = (multiple of 8) + (a lane part) and c = (even constant) +
 * (a 0/1 lane bit). The smem base, row_bytes, stage and tile offsets all have bits 4..6 clear (they
 * are multiples of 16 * (m + 1)), so the address is  L ^ ((c & m) << 4)  + immediate, where the one
 * per-lane register L = base + row * row_bytes + ((lane bit ^ (row & m)) << 4) is computed once:
 * one register and at most one XOR per ldmatrix, instead of a register per value of (c & m).
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "kv8.h"
#include "kv8_frag.h"
#include "ptx_templates/sm80.h"
#include "base/error.h"

#define R(reg) fj_r(k->e, reg)

/* bk[] slots of this backend */
enum {
    BK_LT_A = 0,  /* L for rows lane&15, chunk bit lane>>4 (A operand Q, and V with .trans) */
    BK_LT_B = 4,  /* L for rows (lane&7)+8*(lane>>4), chunk bit (lane>>3)&1 (B operand K) */
    BK_Q_ADDR = 8, /* L of this warp's Q rows */
    BK_CP_SOFF = 12, /* first of copy_chunks_per_thread_row shared addresses (smem + row/chunk offset) */
    BK_CP_R0 = 13,  /* s32: copy row of this thread in the first pass */
    BK_CP_C16 = 14, /* u64: c0 * 16, the thread's first chunk in bytes */
    BK_K_ADDR = 15, /* L of this warp's K rows: BK_LT_B, + its half of the keys with col_warps = 2 */
    BK_V_OWN = 16,  /* L of V for this warp's head dims and its own keys (BK_LT_A with col_warps = 1) */
    BK_V_PEER = 17  /* col_warps = 2: L of V for this warp's head dims and the partner's keys */
};

/* Byte offsets of a field in fj_fwd_params, per copied tensor (0 = Q, 1 = K, 2 = V). */
static const int k_row_bytes_off[3] = {FJ_PARAM_OFF(q_row_bytes), FJ_PARAM_OFF(k_row_bytes), FJ_PARAM_OFF(v_row_bytes)};
static const int k_pass_bytes_off[3] = {FJ_PARAM_OFF(q_pass_bytes), FJ_PARAM_OFF(k_pass_bytes), FJ_PARAM_OFF(v_pass_bytes)};

/* Register model (32-bit registers per thread), calibrated with nvJitLink (the library's compiler) for
 * sm_90 over every tile shape the tuner explores, both masks: the accumulators a config keeps (O, S,
 * the second S set of the pipelined schedule, Q when it stays in registers) plus FJ_SM80_REG_MISC for
 * addresses, loop state, row statistics and fragments in flight fit in 255 without spills; one stage
 * needs FJ_SM80_REG_ONE_STAGE more (its K copy is issued while S is live), a causal kernel with 3 or 4
 * stages FJ_SM80_REG_CAUSAL_DEEP more (with 1-2 stages the mask fits: the KV range it tests is on
 * ptxas's uniform datapath), and with one or two warps each extra copy chunk per thread and row costs
 * its smem address and pass arithmetic. Built for sm_80/sm_86 the same PTX is allocated differently:
 * there ptxas reads %ctaid.x into a vector register, and the causal configs at the 255 edge spill 4-12
 * bytes (their KV range); the tuner skips any config that spills on the GPU at hand. */
#define FJ_SM80_REG_LIMIT 255
#define FJ_SM80_REG_MISC 47
#define FJ_SM80_REG_ONE_STAGE 24
#define FJ_SM80_REG_CAUSAL_DEEP 17 /* the causal mask with 3-4 stages: computed where S, O and more copy state are live */
#define FJ_SM80_REG_PER_CHUNK 6 /* each 16-byte copy chunk per thread and row past the first (1-2 warps) */
#define FJ_SM80_REG_KV8 12 /* FP8 K/V: the e4m3 copy terms and the widening's words (kv8.c; not calibrated) */
#define FJ_SM80_REG_PAIR 12 /* col_warps = 2: the pair's barrier, exchange slots, K and V bases */
#define FJ_SM80_REG_PAIR_CAUSAL_W8 32 /* causal warp pairs in 8 warps: at O + S = 160 they spill 8-12 bytes
                                          on sm_90 where the same tiles in 4 warps do not (nvJitLink) */
/* Headroom: registers the check keeps free above reg_total (the estimate itself, which also decides
 * pipelining and lean registers, is unchanged). Found in rounds of tests/test_spill_space.c over the
 * register edges of the whole space fagen accepts (nvJitLink 13.0, sm_80 and sm_90); the tuner's shapes
 * (4-8 warps, block_n 32/64/128, swizzle 128, O + S at most 192, at 239) compile clean, but away from
 * them the estimate ran short, so:
 *   8 without warp pairs: 0-4 under 255 about a third of the edges spilled (4-372 bytes); 4 more with
 *     one stage (d128 bc48 s1 at 8 under: 8 bytes)
 *   96 with 1-2 warps: one warp copies whole tiles in up to 64 unrolled passes the estimate does not
 *     count; d128 br16 bc128 w1 spilled 8 bytes 28 under with 52 of headroom (needs ~82). An FP8 K/V cache's
 *     copies are e4m3 bytes into their ring (kv8.c), not those 16-bit passes: 16 (d128 br16 cw2 w2 and br16 w1,
 *     bc32-128, 2-4 stages, seqlens + split + packgqa + paged + ahead: ptxas sm_90a 173-234 registers, 7-12 over
 *     the estimate, no spill; test_decode_ptx test_kv8_small_tiles)
 *   12 with a swizzle narrower than 128 B: d128 br128 bc64 s2-s3 at 239 spills 4-8 bytes with swizzle
 *     none where 128 compiles clean (issue 13); causal, 12 bytes with 32 or 64
 *   S acc again for a block_n that is not a power of two: the KV range then takes div.s32 and leaves the
 *     uniform datapath, and the excess grew with S: d64 bc96 / bc112 two fragments 33-51 registers past
 *     the estimate, d128 bc208 one fragment 51 (76 bytes)
 *   for warp pairs, the partner's P past 16 (below) */
#define FJ_SM80_REG_HEADROOM 8
#define FJ_SM80_REG_HEADROOM_FEW_WARPS 96 /* warps <= 2 */
#define FJ_SM80_REG_HEADROOM_FEW_WARPS_KV8 16 /* warps <= 2 with an FP8 K/V cache (see above) */
#define FJ_SM80_REG_HEADROOM_ONE_STAGE 4
#define FJ_SM80_REG_HEADROOM_SWZ_NARROW 12 /* swizzle none, 32 or 64 */
/* Warp pairs hold the partner's P (m_frags x block_n / 8 registers, fetched from the exchange area before
 * the PV of its keys) beside O and their own S: the pair term holds 16 of it (the tuner's d256 bc64);
 * d64 bc256 pairs (64) spilled 8-24 bytes 24 under the estimate's limit. */
#define FJ_SM80_REG_PAIR_PEER_P_HELD 16
/* Causal configs compiled for sm_80-sm_89: there ptxas reads %ctaid.x into a vector register and keeps
 * the KV range the mask tests in vector registers, so the causal configs near the limit spill 4-12 bytes
 * where sm_90's allocation (uniform registers) does not: d128 br128 bc64 s2 (239 + headroom 8) spills 4
 * bytes built for sm_80 and sm_86 (nvJitLink 13.0), none for sm_90. Above this reg_total + headroom a
 * causal config needs sm_90 or newer (fj_plan_check_target; the runtime refuses it on an A100, and
 * fajit_config_fill there takes a smaller block_n). */
#define FJ_SM80_CAUSAL_SM8X_MAX 243
#define FJ_SM80_LEAN_ABOVE 224
/* Q stays in registers when O + S + Q fit in this many: room is left for pipelining and the lane
 * terms, and bigger tiles pay more than the saved ldmatrix traffic. */
#define FJ_SM80_Q_IN_REGS_MAX 152
#define FJ_SM80_RESCALE_SLACK 8 /* log2 of how far P may exceed 1 before O is rescaled (softmax.c) */
/* ... or a new max would weigh more than ~2^this of the lane's l (softmax.c). 0 = off: -2 (~1/4) brought the ratio
 * to FA2's error to FA3's range on an H200 but cost 2-3.5% at N <= 4096 (bench/results/h200-accuracy-ab-2026-11-26.md),
 * and the issue asks for no loss of speed: off until a cheaper form is found (the held form, FJ_RESCALE_WEIGHT_HELD,
 * costs 1-4% on sm_90a at N <= 4096: softmax.c). */
#ifndef FJ_SM80_RESCALE_WEIGHT_LOG2 /* a build knob for A/B runs (bench/acc_ab.sh) */
#define FJ_SM80_RESCALE_WEIGHT_LOG2 0
#endif
/* 1: the weight test weighs a new max against an estimate of the row's final l (plan.rescale_weight_est,
 * softmax.c): about half the extra rebases. Both paths; a build knob (bench/acc_ab.sh), off until measured. */
#ifndef FJ_RESCALE_WEIGHT_EST
#define FJ_RESCALE_WEIGHT_EST 0
#endif
/* 1: the weight test's threshold is held in a register, recomputed only after a tile that moved m
 * (plan.rescale_weight_held, softmax.c). Both paths; a build knob (bench/acc_ab.sh). */
#ifndef FJ_RESCALE_WEIGHT_HELD
#define FJ_RESCALE_WEIGHT_HELD 0
#endif
/* config accurate = 1 (fajit.h): the weight test at 1/8 of the estimated final l, its threshold held in a register -
 * the build knobs' w3held form (bench/acc_ab.sh), measured on the H200 in session 17 (sm_80 ratio to FA2 mean
 * 0.98-1.00, max 1.03-1.09; h200-session17-2026-11-28.md) */
#define FJ_SM80_ACCURATE_WEIGHT_LOG2 (-3)
/* ... and its registers in the estimate: the held threshold, the estimate's tile count and shift. ptxas 13.0 spilled
 * the D128 br128 bc64 s2 tile (estimate 239 + headroom 8) by 12 bytes for sm_80 / sm_86 and 76 for sm_90 with it on
 * (0 without): so a tile within 9 registers of that edge is refused with accurate = 1, and the fill takes another */
#define FJ_SM80_REG_ACCURATE 9
/* 1: the weight test reads l as it was one KV tile earlier (plan.rescale_weight_lag, softmax.c). Both paths; a build
 * knob for the A/B of whether the test's cost is the vote waiting for the previous tile's row sums. */
#ifndef FJ_RESCALE_WEIGHT_LAG
#define FJ_RESCALE_WEIGHT_LAG 0
#endif

/* Split a constant chunk index c (even) into the lane-term index and the immediate part. */
static int chunk_low(const fj_plan *p, int c) { return p->swz_mask >= 1 ? (c & p->swz_mask) : 0; }

/* ---- plan ------------------------------------------------------------------------------------ */
#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)

/* Warps, the column split and block_m; the schedule flags of the warp-specialized path are not ours. */
static fajit_status tiles_sm80(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->warps != 1 && c->warps != 2 && c->warps != 4 && c->warps != 8)
        return CFG_FAIL("warps = %d: must be 1, 2, 4 or 8", c->warps);
    int cw = c->col_warps ? c->col_warps : 1;
    if (cw != 1 && cw != 2) return CFG_FAIL("col_warps = %d: must be 1 or 2 (0 reads as 1)", c->col_warps);
    if (c->warps % cw != 0 || c->warps < cw)
        return CFG_FAIL("col_warps = %d with warps = %d: the warps must form whole groups of col_warps", cw, c->warps);
    p->col_warps = p->cfg.col_warps = cw;
    p->row_warps = c->warps / cw;
    if (c->block_m <= 0 || c->block_m % (16 * p->row_warps) != 0)
        return CFG_FAIL("block_m (--br) = %d: must be a positive multiple of 16 x warps%s = %d (each warp owns whole 16-row "
                        "MMA fragments)",
                        c->block_m, cw > 1 ? " / col_warps" : "", 16 * p->row_warps);
    p->m_frags = c->block_m / (16 * p->row_warps);
    if (p->m_frags > 2)
        return CFG_FAIL("block_m (--br) = %d with warps = %d, col_warps = %d gives %d 16-row fragments per warp: at most 2 "
                        "(use more warps or a smaller block_m)",
                        c->block_m, c->warps, cw, p->m_frags);
    int chunks = c->head_dim / 8;
    if (cw == 2 && c->block_n % 32 != 0)
        return CFG_FAIL("block_n (--bc) = %d with col_warps = 2: each warp of a pair takes block_n / 2 keys, which must be "
                        "whole 16-key MMA steps; use a multiple of 32",
                        c->block_n);
    if (cw == 2 && (chunks / 2) % (p->swz_mask + 1) != 0)
        return CFG_FAIL("swizzle = %d with col_warps = 2: each warp of a pair reads half a head_dim %d row (%d "
                        "16-byte chunks), which must be whole groups of %d swizzled chunks; use a smaller swizzle",
                        c->swizzle, c->head_dim, chunks / 2, p->swz_mask + 1);
    if (p->overlap || p->pingpong || c->roll == 1 || c->sched == 1 || c->cross_tile == 1)
        return CFG_FAIL("%s = 1: the sm_80 path has no warp specialization (every warp loads and computes); "
                        "use 0 or -1, or arch sm_90a",
                        p->overlap ? "overlap" : p->pingpong ? "pingpong" : c->roll == 1 ? "roll" :
                        c->sched == 1 ? "sched" : "cross_tile");
    p->params_bytes = (int)sizeof(fj_fwd_params);
    p->params_align = 8;
    return FAJIT_OK;
}

/* Q, then `stages` K tiles, then `stages` V tiles, each [rows][head_dim]; warp pairs add their exchange
 * areas at the end. */
static void smem_map_sm80(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    p->row_bytes = c->head_dim * 2;
    p->q_off = 0;
    p->q_bytes = c->block_m * p->row_bytes;
    p->kv_tile_bytes = c->block_n * p->row_bytes;
    /* kv8: the e4m3 ring holds the stages, one 16-bit tile is widened into (none when the MMAs read the e4m3 tiles) */
    p->kv_slots = p->kv8 ? !p->kv8_direct : c->stages;
    p->k_off = p->q_off + p->q_bytes;
    p->v_off = p->k_off + p->kv_slots * p->kv_tile_bytes;
    p->smem_bytes = p->v_off + p->kv_slots * p->kv_tile_bytes;
    p->xchg_off = p->xchg_warp_bytes = 0;
    int row_warps = c->col_warps == 2 ? c->warps / 2 : 0;
    if (row_warps > 0) {
        /* per warp, 16 B per lane: its row statistics (at most 4 rows per thread), an unused slot (see
         * FJ_XCHG_SLOT_P), then P's A fragments of its half of the keys, one 512-byte [lane][4 regs]
         * block per (fragment, k-step) */
        int m_frags = c->block_m / (16 * row_warps);
        p->xchg_warp_bytes = 512 * (2 + m_frags * (c->block_n / 32));
        p->xchg_off = p->smem_bytes;
        p->smem_bytes += c->warps * p->xchg_warp_bytes;
    }
    if (p->kv8) fj_kv8_smem(p);
}

static fajit_status plan_copy(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    int chunks = c->head_dim / 8;
    for (int tpr = chunks; tpr >= 1; tpr--) {
        if (chunks % tpr || p->threads % tpr) continue;
        int rpp = p->threads / tpr;
        if (c->block_m % rpp || c->block_n % rpp || rpp % (p->swz_mask + 1)) continue;
        if (p->kv8 && !fj_kv8_copy_fits(p, tpr)) continue;
        p->copy_tpr = tpr;
        p->copy_rows_per_pass = rpp;
        p->copy_chunks_per_thread_row = chunks / tpr;
        if (p->kv8) fj_kv8_plan_copy(p);
        return FAJIT_OK;
    }
    return fj_fail(FAJIT_ERR_INVALID_CONFIG,
                   "block_n (--bc) = %d, block_m (--br) = %d, warps = %d: no copy layout moves [rows][%d] tiles in 16-byte "
                   "chunks with %d threads (rows per pass must divide both block sizes); use larger tiles or "
                   "fewer warps",
                   c->block_n, c->block_m, c->warps, c->head_dim, p->threads);
}

/* One headroom term: regs added to *h, " + regs what" to the text. */
static void headroom_term(int *h, char *terms, size_t size, int regs, const char *what)
{
    size_t n = strlen(terms);
    *h += regs;
    snprintf(terms + n, size - n, "%s%d %s", n ? " + " : "", regs, what);
}

/* The headroom of a plan (see FJ_SM80_REG_HEADROOM), its terms in words into `terms`. */
static int headroom_sm80(const fj_plan *p, char *terms, size_t size)
{
    const fajit_config *c = &p->cfg;
    int h = 0, whole_rows = p->col_warps == 1;
    terms[0] = '\0';
    if (whole_rows) headroom_term(&h, terms, size, FJ_SM80_REG_HEADROOM, "without warp pairs");
    if (c->warps <= 2)
        headroom_term(&h, terms, size, p->kv8 ? FJ_SM80_REG_HEADROOM_FEW_WARPS_KV8 : FJ_SM80_REG_HEADROOM_FEW_WARPS,
                      p->kv8 ? "with 1-2 warps (FP8 K/V copies)" : "with 1-2 warps");
    if (whole_rows && c->stages == 1) headroom_term(&h, terms, size, FJ_SM80_REG_HEADROOM_ONE_STAGE, "with one stage");
    if (p->swz_mask < 7)
        headroom_term(&h, terms, size, FJ_SM80_REG_HEADROOM_SWZ_NARROW, "with a swizzle narrower than 128");
    if (c->block_n & (c->block_n - 1)) /* S counted twice */
        headroom_term(&h, terms, size, p->reg_acc_s, "(S acc again) with block_n not a power of two");
    int peer_p = p->m_frags * c->block_n / 8;
    if (!whole_rows && peer_p > FJ_SM80_REG_PAIR_PEER_P_HELD)
        headroom_term(&h, terms, size, peer_p - FJ_SM80_REG_PAIR_PEER_P_HELD,
                      "for the partner's P past the pair term's 16 (warp pairs)");
    if (!terms[0]) snprintf(terms, size, "0 with warp pairs");
    return h;
}

static fajit_status plan_sm80(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    fajit_status st = plan_copy(p);
    if (st != FAJIT_OK) return st;
    p->reg_acc_o = p->m_frags * c->head_dim / 2 / p->col_warps;
    p->reg_acc_s = p->m_frags * c->block_n / 2 / p->col_warps;
    int causal_deep = c->causal && c->stages >= 3;
    p->reg_misc = FJ_SM80_REG_MISC + (c->stages == 1 ? FJ_SM80_REG_ONE_STAGE : 0) +
                  (p->col_warps > 1 ? FJ_SM80_REG_PAIR : 0) +
                  (p->col_warps > 1 && c->causal && c->warps == 8 ? FJ_SM80_REG_PAIR_CAUSAL_W8 : 0) +
                  (causal_deep ? FJ_SM80_REG_CAUSAL_DEEP : 0) + FJ_SM80_REG_PER_CHUNK * (p->copy_chunks_per_thread_row - 1);
    int q_regs = p->m_frags * c->head_dim / 4;
    p->q_in_regs = p->reg_acc_o + p->reg_acc_s + q_regs <= FJ_SM80_Q_IN_REGS_MAX;
    p->reg_q = p->q_in_regs ? q_regs : 0;
    p->kv8_f16 = p->kv8 && c->dtype == FAJIT_DTYPE_BF16 && p->q_in_regs;
    /* Lazy rescale (softmax.c): the reference max moves only when a row's max passes it by more than
     * 2^8, so after the first tiles the warp vote skips the O multiplies almost always. */
    p->rescale_slack = FJ_SM80_RESCALE_SLACK;
    p->rescale_weight_log2 = p->col_warps == 1 ? FJ_SM80_RESCALE_WEIGHT_LOG2 : 0;
    p->rescale_weight_est = FJ_RESCALE_WEIGHT_EST;
    p->rescale_weight_lag = FJ_RESCALE_WEIGHT_LAG;
    p->rescale_weight_held = FJ_RESCALE_WEIGHT_HELD;
    if (c->accurate == 1) {
        if (p->col_warps > 1)
            return CFG_FAIL("accurate = 1 with col_warps = %d: the weight test reads a row's sum in one warp, and a warp "
                            "pair holds it in two; use col_warps 1", p->col_warps);
        p->rescale_weight_log2 = FJ_SM80_ACCURATE_WEIGHT_LOG2;
        p->rescale_weight_est = p->rescale_weight_held = 1;
        p->reg_misc += FJ_SM80_REG_ACCURATE;
    }
    /* Software pipelining of S = QK^T across iterations needs a second S register set and a tile of
     * K in smem one iteration ahead of V (stages >= 3); taken whenever the budget has room, but not with
     * warp pairs, whose tile flow (fwd_kernel.c) branches between the row maxima and the exponentials. */
    p->reg_total = p->reg_acc_o + p->reg_acc_s + p->reg_q + p->reg_misc;
    if (p->kv8) p->reg_misc += FJ_SM80_REG_KV8, p->reg_total += FJ_SM80_REG_KV8;
    p->pipeline_qk = c->stages >= 3 && p->col_warps == 1 && p->reg_total + p->reg_acc_s <= FJ_SM80_REG_LIMIT &&
                     !p->kv8; /* kv8 widens a stage at its tile's wait, which S(j + 1) would pass */
    p->reg_s_next = p->pipeline_qk ? p->reg_acc_s : 0;
    p->reg_total += p->reg_s_next;
    /* Above FJ_SM80_LEAN_ABOVE m0 and the thread geometry are recomputed in the mask and the epilogue
     * instead of kept live across the loop: three registers, what d128 with Bc = 64 and two fragments
     * (O + S = 192) needs to compile without spills (non-causal). Below it the recomputation would only
     * cost issue slots. */
    p->lean_regs = p->reg_total > FJ_SM80_LEAN_ABOVE;
    p->reg_limit = FJ_SM80_REG_LIMIT;
    char terms[160];
    p->reg_headroom = headroom_sm80(p, terms, sizeof terms);
    if (c->causal && p->reg_total + p->reg_headroom > FJ_SM80_CAUSAL_SM8X_MAX) {
        p->min_target_sm = 90;
        p->min_target_regs = FJ_SM80_CAUSAL_SM8X_MAX;
    }
    if (p->reg_total + p->reg_headroom > FJ_SM80_REG_LIMIT)
        return fj_fail(FAJIT_ERR_INVALID_CONFIG,
                       "registers: about %d per thread (O acc %d + S acc %d + next S %d + Q frags %d + addressing and "
                       "softmax ~%d%s) + headroom %d (%s) = %d exceed %d, the most a thread can have (the compiler "
                       "spills near the estimate's edge); lower block_n or block_m, or use more warps",
                       p->reg_total, p->reg_acc_o, p->reg_acc_s, p->reg_s_next, p->reg_q, p->reg_misc,
                       c->stages == 1 || causal_deep ? ", more with one stage or a causal mask at 3-4 stages" : "",
                       p->reg_headroom, terms, p->reg_total + p->reg_headroom, FJ_SM80_REG_LIMIT);
    return FAJIT_OK;
}

static void describe_sm80(const fj_plan *p, fj_buf *out, const char *pf)
{
    const fajit_config *c = &p->cfg;
    if (p->col_warps == 1)
        fj_buf_printf(out, "%swarp roles: %d warps, all alike; warp w owns query rows [%d*w, %d*w + %d) of the tile "
                           "(FlashAttention-2: Q split across warps, K/V shared)\n",
                      pf, c->warps, 16 * p->m_frags, 16 * p->m_frags, 16 * p->m_frags);
    else
        fj_buf_printf(out, "%swarp roles: %d warps in %d pairs; pair i owns query rows [%d*i, %d*i + %d), its warp h "
                           "(= warp %% 2) keys [%d*h, %d*h + %d) of each KV tile for S and head dims [%d*h, %d*h + %d) "
                           "for O; the pair exchanges row maxima, P and l through smem (%d B per warp) behind named "
                           "barrier 1 + i\n",
                      pf, c->warps, p->row_warps, 16 * p->m_frags, 16 * p->m_frags, 16 * p->m_frags, c->block_n / 2,
                      c->block_n / 2, c->block_n / 2, c->head_dim / 2, c->head_dim / 2, c->head_dim / 2,
                      p->xchg_warp_bytes);
    fj_buf_printf(out, "%sMMA: mma.sync.m16n8k16 %s -> f32; S = QK^T: %d x %d k-steps x %d n8 tiles per fragment; "
                       "O += PV: %d k-steps x %d n8 tiles\n",
                  pf, c->dtype == FAJIT_DTYPE_BF16 ? "bf16" : "f16", p->m_frags, p->k_steps_qk, p->n_frags_s,
                  p->k_steps_pv, p->n_frags_o);
    fj_buf_printf(out, "%sfragment layout: lane = 4g + t holds rows g and g+8 of each 16-row fragment, columns "
                       "2t and 2t+1 of each n8 tile; row max/sum reduce over the quad (shfl.bfly 1, 2)\n",
                  pf);
    fj_buf_printf(out, "%soperands: Q %s; K via ldmatrix.x4 (B operand, rows = keys); V via ldmatrix.x4.trans; "
                       "P re-packed from the S accumulators in registers (C layout of m16n8 = A layout of k16)\n",
                  pf, p->q_in_regs ? "loaded once into registers (ldmatrix.x4)" : "re-read from smem each k-step");
    fj_buf_printf(out, "%scopy: cp.async.cg 16 B chunks, %d threads per row, %d rows per pass, %d chunks per "
                       "thread per row; rows past the end are zero-filled (src-size 0)\n",
                  pf, p->copy_tpr, p->copy_rows_per_pass, p->copy_chunks_per_thread_row);
}

/* ---- setup ----------------------------------------------------------------------------------- */
/* L = smem + row * row_bytes + ((chunk bit ^ (row & m)) << 4) for one lane pattern. */
static void emit_lane_base(fj_kctx *k, int slot, fj_reg_t r_row, fj_reg_t r_cbit)
{
    const fj_plan *p = k->p;
    fj_reg_t x = fj_alloc(k->e, k->b_r, 1), rb = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "and.b32 %s, %s, %d", R(x), R(r_row), p->swz_mask);
    fj_ins(k->e, "xor.b32 %s, %s, %s", R(x), R(x), R(r_cbit));
    fj_ins(k->e, "shl.b32 %s, %s, 4", R(x), R(x));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(rb), R(r_row), p->row_bytes, R(k->smem));
    k->bk[slot] = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "add.u32 %s, %s, %s", R(k->bk[slot]), R(rb), R(x));
}

/* The register to address chunk constant c from lane base L: L itself, or L ^ ((c & m) << 4). */
static fj_reg_t lane_addr(fj_kctx *k, fj_reg_t base, int c)
{
    int lo = chunk_low(k->p, c);
    if (!lo) return base;
    fj_reg_t t = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "xor.b32 %s, %s, %d", R(t), R(base), lo << 4);
    return t;
}

static void setup_ldmatrix(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), cbit = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 2, "per-lane ldmatrix base L = smem + row * row_bytes + ((chunk bit ^ (row & m)) << 4); an address");
    fj_comment(k->e, 2, "is L ^ ((c & m) << 4) + immediate (tile, stage, k-step), see the file comment of sm80.c");
    fj_comment(k->e, 2, "pattern A (Q, and V with .trans): lane i reads row i&15, chunk bit i>>4");
    fj_ins(k->e, "and.b32 %s, %s, 15", R(row), R(k->lane));
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(cbit), R(k->lane));
    emit_lane_base(k, BK_LT_A, row, cbit);
    fj_comment(k->e, 2, "pattern B (K): lane i reads row (i&7) + 8*(i>>4), chunk bit (i>>3)&1");
    fj_ins(k->e, "and.b32 %s, %s, 7", R(row), R(k->lane));
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(t), R(k->lane));
    fj_ins(k->e, "shl.b32 %s, %s, 3", R(t), R(t));
    fj_ins(k->e, "add.u32 %s, %s, %s", R(row), R(row), R(t));
    fj_ins(k->e, "bfe.u32 %s, %s, 3, 1", R(cbit), R(k->lane));
    emit_lane_base(k, BK_LT_B, row, cbit);
    fj_reg_t qb = fj_alloc(k->e, k->b_r, 1);
    if (p->col_warps == 1) {
        fj_comment(k->e, 1, "Q ldmatrix base of this warp (its %d rows start at row %d * warp)", 16 * p->m_frags,
                   16 * p->m_frags);
        fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(qb), R(k->warp), 16 * p->m_frags * p->row_bytes);
    } else {
        fj_comment(k->e, 1, "Q ldmatrix base of this warp (the pair's %d rows start at row %d * (warp / 2))",
                   16 * p->m_frags, 16 * p->m_frags);
        fj_ins(k->e, "shr.u32 %s, %s, 1", R(qb), R(k->warp));
        fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(qb), R(qb), 16 * p->m_frags * p->row_bytes);
    }
    k->bk[BK_Q_ADDR] = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "add.u32 %s, %s, %s", R(k->bk[BK_Q_ADDR]), R(qb), R(k->bk[BK_LT_A]));
    if (p->col_warps == 1) {
        k->bk[BK_K_ADDR] = k->bk[BK_LT_B];
        k->bk[BK_V_OWN] = k->bk[BK_LT_A];
        return;
    }
    int half_keys = p->cfg.block_n / 2 * p->row_bytes, half_dims = p->row_bytes / 2;
    fj_comment(k->e, 1, "warp 2i+h: K rows h * %d.. of a tile; V rows of its own keys and of the partner's, columns h * %d..",
               p->cfg.block_n / 2, p->cfg.head_dim / 2);
    fj_comment(k->e, 2, "(half a row is whole swizzle groups and half a tile whole 8-row groups: the XOR terms of L stay valid)");
    fj_reg_t h = fj_alloc(k->e, k->b_r, 1), nh = fj_alloc(k->e, k->b_r, 1), vb = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(h), R(k->warp));
    fj_ins(k->e, "xor.b32 %s, %s, 1", R(nh), R(h));
    k->bk[BK_K_ADDR] = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BK_K_ADDR]), R(h), half_keys, R(k->bk[BK_LT_B]));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(vb), R(h), half_dims, R(k->bk[BK_LT_A]));
    k->bk[BK_V_OWN] = fj_alloc(k->e, k->b_addr, 1);
    k->bk[BK_V_PEER] = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BK_V_OWN]), R(h), half_keys, R(vb));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BK_V_PEER]), R(nh), half_keys, R(vb));
}

static void setup_copy(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int tpr = p->copy_tpr, kc = p->copy_chunks_per_thread_row;
    int tpr_shift = fj_log2_ceil(tpr);
    fj_comment(k->e, 1, "copy layout: thread -> (row r0 = tid / %d, chunks c0 + %d*j), %d rows per pass", tpr, tpr,
               p->copy_rows_per_pass);
    fj_reg_t r0 = fj_alloc(k->e, k->b_r, 1), c0 = fj_alloc(k->e, k->b_r, 1), x = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "shr.u32 %s, %s, %d", R(r0), R(k->tid), tpr_shift);
    fj_ins(k->e, "and.b32 %s, %s, %d", R(c0), R(k->tid), tpr - 1);
    fj_ins(k->e, "and.b32 %s, %s, %d", R(x), R(r0), p->swz_mask);
    k->bk[BK_CP_R0] = r0;
    k->bk[BK_CP_SOFF] = fj_alloc(k->e, k->b_addr, kc);
    fj_reg_t rb = fj_alloc(k->e, k->b_r, 1), ch = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 2, "rows r0 + i * %d keep (row & %d) = (r0 & %d), so one swizzled offset per chunk serves every pass",
               p->copy_rows_per_pass, p->swz_mask, p->swz_mask);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(rb), R(r0), p->row_bytes, R(k->smem));
    for (int j = 0; j < kc; j++) {
        fj_ins(k->e, "add.u32 %s, %s, %d", R(ch), R(c0), j * tpr);
        fj_ins(k->e, "xor.b32 %s, %s, %s", R(ch), R(ch), R(x));
        fj_ins(k->e, "shl.b32 %s, %s, 4", R(ch), R(ch));
        fj_ins(k->e, "add.u32 %s, %s, %s", R(fj_at(k->bk[BK_CP_SOFF], j)), R(rb), R(ch));
    }
    /* global: the thread's offset r0 * row_bytes + c0 * 16 is formed at each copy (row_bytes differs
     * per tensor and comes from the constant bank) rather than kept in three 64-bit registers */
    k->bk[BK_CP_C16] = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "mul.wide.u32 %s, %s, 16", R(k->bk[BK_CP_C16]), R(c0));
    if ((p->variant & (FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD)) == (FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD)) {
        fj_comment(k->e, 1, "paged K/V gathered: the thread's column bytes go into the kept K/V bases, once");
        for (int t = 0; t < 2; t++)
            fj_ins(k->e, "add.u64 %s, %s, %s", R(fj_at(k->page_base, t)), R(fj_at(k->page_base, t)),
                   R(k->bk[BK_CP_C16]));
    }
}

static void geometry_sm80(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t g = fj_alloc(k->e, k->b_r, 1), w = fj_alloc(k->e, k->b_r, 1);
    if (p->col_warps == 1)
        fj_comment(k->e, 1, "thread geometry: row_base = %d * warp + lane/4, col_base = 2 * (lane %% 4)", 16 * p->m_frags);
    else
        fj_comment(k->e, 1, "thread geometry: row_base = %d * (warp / 2) + lane/4; with h = warp %% 2, col_base_s = "
                            "2 * (lane %% 4) + %d h, col_base_o = 2 * (lane %% 4) + %d h",
                   16 * p->m_frags, p->cfg.block_n / 2, p->cfg.head_dim / 2);
    fj_ins(k->e, "mov.u32 %s, %%tid.x", R(g));
    fj_ins(k->e, "shr.u32 %s, %s, 5", R(w), R(g));
    fj_ins(k->e, "and.b32 %s, %s, 31", R(g), R(g));
    fj_ins(k->e, "and.b32 %s, %s, 3", R(k->col_base_s), R(g));
    fj_ins(k->e, "shl.b32 %s, %s, 1", R(k->col_base_s), R(k->col_base_s));
    fj_ins(k->e, "shr.u32 %s, %s, 2", R(g), R(g));
    if (p->col_warps > 1) {
        fj_reg_t h = fj_alloc(k->e, k->b_r, 1);
        fj_ins(k->e, "and.b32 %s, %s, 1", R(h), R(w));
        fj_ins(k->e, "shr.u32 %s, %s, 1", R(w), R(w));
        fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->col_base_o), R(h), p->cfg.head_dim / 2, R(k->col_base_s));
        if (p->kv8_direct) fj_ins(k->e, "add.u32 %s, %s, %s", R(k->col_base_o), R(k->col_base_o), R(k->col_base_s));
        fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->col_base_s), R(h), p->cfg.block_n / 2, R(k->col_base_s));
    } else if (p->kv8_direct) {
        fj_comment(k->e, 1, "O from the e4m3 V fragments: a lane holds dims 16c + 4t .. 4t + 3 (kv8_frag.c), col_base_o = 4t");
        fj_ins(k->e, "add.u32 %s, %s, %s", R(k->col_base_o), R(k->col_base_s), R(k->col_base_s));
    }
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->row_base), R(w), 16 * p->m_frags, R(g));
}

static void setup_sm80(fj_kctx *k)
{
    geometry_sm80(k);
    setup_ldmatrix(k);
    setup_copy(k);
    if (k->p->kv8) fj_kv8_setup_copy(k);
}

/* ---- copies ---------------------------------------------------------------------------------- */
/* Copy a [rows][head_dim] tile of tensor `which` (0 Q, 1 K, 2 V) from global rows at gptr into the
 * shared tile at byte offset tile_off; rows >= rows_valid are zero-filled. */
static void copy_tile(fj_kctx *k, int tile_off, fj_reg_t gptr, int which, int rows, fj_reg_t rows_valid)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, rpp = p->copy_rows_per_pass;
    fj_reg_t g = fj_alloc(k->e, k->b_rd, 1), gs = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), sz = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mul.wide.u32 %s, %s, %d", R(g), R(k->bk[BK_CP_R0]), 1);
    {
        fj_reg_t prm = fj_param_u64(k, k_row_bytes_off[which]);
        fj_ins(k->e, "mad.lo.u64 %s, %s, %s, %s", R(g), R(g), R(prm), R(k->bk[BK_CP_C16]));
    }
    fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(g), R(gptr));
    for (int i = 0; i < rows / rpp; i++) {
        if (i) {
            fj_reg_t prm = fj_param_u64(k, k_pass_bytes_off[which]);
            fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(g), R(prm));
        }
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->bk[BK_CP_R0]), i * rpp);
        fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(row), R(rows_valid));
        fj_ins(k->e, "selp.u32 %s, 16, 0, %s", R(sz), R(pr));
        fj_ins(k->e, "selp.b64 %s, %s, %s, %s", R(gs), R(g), R(gptr), R(pr)); /* never form an address past the end */
        for (int j = 0; j < kc; j++)
            fj_ins(k->e, PTX_CP_ASYNC_16, R(fj_at(k->bk[BK_CP_SOFF], j)), tile_off + i * rpp * p->row_bytes, R(gs),
                   j * p->copy_tpr * 16, R(sz));
    }
}

/* GQA packing: the Q tile's rows belong to several query heads, so each pass's row address is worked out
 * from its packed row (fj_emit_packed_row_offset); rows >= q_rows are zero-filled. */
static void copy_q_packed(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, rpp = p->copy_rows_per_pass;
    fj_reg_t g = fj_alloc(k->e, k->b_rd, 1), gs = fj_alloc(k->e, k->b_rd, 1), off = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), sz = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_comment(k->e, 1, "Q of packed rows: each pass's row (g x Nq + i) addressed as head g, row i");
    for (int i = 0; i < p->cfg.block_m / rpp; i++) {
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->bk[BK_CP_R0]), i * rpp);
        fj_emit_packed_row_offset(k, row, FJ_PARAM_OFF(q_stride), FJ_PARAM_OFF(q_row_bytes), off);
        fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(off), R(k->bk[BK_CP_C16]));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(g), R(k->q_ptr));
        fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(row), R(k->q_rows));
        fj_ins(k->e, "selp.u32 %s, 16, 0, %s", R(sz), R(pr));
        fj_ins(k->e, "selp.b64 %s, %s, %s, %s", R(gs), R(g), R(k->q_ptr), R(pr));
        for (int j = 0; j < kc; j++)
            fj_ins(k->e, PTX_CP_ASYNC_16, R(fj_at(k->bk[BK_CP_SOFF], j)), p->q_off + i * rpp * p->row_bytes, R(gs),
                   j * p->copy_tpr * 16, R(sz));
    }
}

static void load_q_sm80(fj_kctx *k)
{
    if (k->p->variant & FJ_VARIANT_PACK) copy_q_packed(k);
    else copy_tile(k, k->p->q_off, k->q_ptr, 0, k->p->cfg.block_m, k->q_rows);
}

/* Paged K/V gathered, AHEAD: the pages of the next tile's segments (k->kv_tile + 1), as its copy will look
 * them up (rows clamped to its last valid row, last - block_n), read now into k->page_next, and each
 * segment's row in its page into k->page_row (a clamped row's is wrong for the unclamped key, but such a
 * segment's rows are all past the end and zero-filled from the pool's base). */
static void gather_pages_ahead_rows(fj_kctx *k, fj_reg_t next, fj_reg_t lastn)
{
    const fj_plan *p = k->p;
    int rpp = p->copy_rows_per_pass, seg_passes = fj_paged_seg_passes(p), bn = p->cfg.block_n;
    for (int i = 0; i < bn / rpp; i += seg_passes) {
        fj_reg_t r = fj_at(k->page_row, i / seg_passes);
        fj_ins(k->e, "add.s32 %s, %s, %d", R(r), R(k->bk[BK_CP_R0]), i * rpp);
        fj_ins(k->e, "min.s32 %s, %s, %s", R(r), R(r), R(lastn));
        fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(r), R(next), bn, R(r));
        fj_emit_paged_key_page(k, r, i / seg_passes);
    }
}

/* One uniform branch on page_shift around all the segments' lookups (one per lookup, ptxas if-converts
 * some and then issues their divisions on the shift path too). */
static void gather_pages_ahead(fj_kctx *k, fj_reg_t last)
{
    fj_reg_t next = fj_alloc(k->e, k->b_r, 1), lastn = fj_alloc(k->e, k->b_r, 1), pow2 = fj_alloc(k->e, k->b_p, 1);
    char shift[48], done[48];
    fj_comment(k->e, 1, "paged K/V gathered: the next tile's segment pages and rows in them, for its copy");
    fj_ins(k->e, "add.s32 %s, %s, 1", R(next), R(k->kv_tile));
    fj_ins(k->e, "sub.s32 %s, %s, %d", R(lastn), R(last), k->p->cfg.block_n);
    {
        fj_reg_t prm = fj_param_s32(k, FJ_DEC_OFF(k, page_shift));
        fj_ins(k->e, "setp.ne.u32 %s, %s, 0", R(pow2), R(prm));
    }
    fj_label_new(k->e, "pages_shift", shift, sizeof shift);
    fj_label_new(k->e, "pages_read", done, sizeof done);
    fj_ins(k->e, "@%s bra.uni %s", R(pow2), shift);
    k->page_split_how = FJ_PAGE_SPLIT_DIV;
    gather_pages_ahead_rows(k, next, lastn);
    fj_ins(k->e, "bra.uni %s", done);
    fj_label(k->e, shift);
    k->page_split_how = FJ_PAGE_SPLIT_SHIFT;
    gather_pages_ahead_rows(k, next, lastn);
    fj_label(k->e, done);
    k->page_split_how = FJ_PAGE_SPLIT_BRANCH;
}

/* The K and V addresses (gx, u64 x 2, at the thread's first column) of the segment that pass i of the tile
 * starts: AHEAD after the first copy, from the page and row read a tile ahead; else looked up now from the
 * pass's row clamped to last (the block table is read for filled pages only). */
static void gather_seg_ptrs(fj_kctx *k, int i, fj_reg_t row, fj_reg_t last, const fj_reg_t gx[2])
{
    int seg = i / fj_paged_seg_passes(k->p), ahead = k->p->variant & FJ_VARIANT_AHEAD;
    if (ahead && !k->page_sync) {
        fj_emit_paged_seg_ptrs(k, seg, gx);
        return;
    }
    fj_reg_t r = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "min.s32 %s, %s, %s", R(r), R(row), R(last));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(r), R(k->kv_tile), k->p->cfg.block_n, R(r));
    fj_emit_paged_key_ptrs(k, r, seg, gx);
    if (ahead) return; /* the column bytes are in k->page_base (setup_copy) */
    for (int x = 0; x < 2; x++) fj_ins(k->e, "add.u64 %s, %s, %s", R(gx[x]), R(gx[x]), R(k->bk[BK_CP_C16]));
}

/* Paged K/V gathered (variant GATHER): the K and V rows of tile k->kv_tile from 16-row segments, each with
 * its own page (gather_seg_ptrs) when a thread's pass enters a new segment (every pass when a pass is 16
 * rows or more; every 16 / rows-per-pass passes otherwise: the segment's next rows follow in its page). The
 * rows past the end are zero-filled (cp.async src-size 0) from the pool's base address. */
static void copy_kv_gathered(fj_kctx *k, int slot, int parts, fj_reg_t valid)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, rpp = p->copy_rows_per_pass;
    int seg_passes = fj_paged_seg_passes(p);
    fj_reg_t g = fj_alloc(k->e, k->b_rd, 2), gs = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), last = fj_alloc(k->e, k->b_r, 1), sz = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    const fj_reg_t gx[2] = {fj_at(g, 0), fj_at(g, 1)};
    const int off[2] = {p->k_off, p->v_off}, want[2] = {parts & FJ_KV_K, parts & FJ_KV_V};
    const int base_off[2] = {FJ_PARAM_OFF(k), FJ_PARAM_OFF(v)};
    fj_comment(k->e, 1, "paged K/V gathered: each 16-row segment from its own page");
    fj_ins(k->e, "sub.s32 %s, %s, 1", R(last), R(valid));
    for (int i = 0; i < p->cfg.block_n / rpp; i++) {
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->bk[BK_CP_R0]), i * rpp);
        if (i % seg_passes == 0) {
            gather_seg_ptrs(k, i, row, last, gx);
        } else {
            for (int x = 0; x < 2; x++) {
                fj_reg_t prm = fj_param_u64(k, k_pass_bytes_off[1 + x]);
                fj_ins(k->e, "add.u64 %s, %s, %s", R(gx[x]), R(gx[x]), R(prm));
            }
        }
        fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(row), R(valid));
        fj_ins(k->e, "selp.u32 %s, 16, 0, %s", R(sz), R(pr));
        for (int x = 0; x < 2; x++) {
            if (!want[x]) continue;
            fj_reg_t base = fj_param_u64(k, base_off[x]);
            fj_ins(k->e, "selp.b64 %s, %s, %s, %s", R(gs), R(gx[x]), R(base), R(pr));
            for (int j = 0; j < kc; j++)
                fj_ins(k->e, PTX_CP_ASYNC_16, R(fj_at(k->bk[BK_CP_SOFF], j)),
                       off[x] + slot * p->kv_tile_bytes + i * rpp * p->row_bytes, R(gs), j * p->copy_tpr * 16, R(sz));
        }
    }
    if (p->variant & FJ_VARIANT_AHEAD) gather_pages_ahead(k, last);
}

static void load_kv_sm80(fj_kctx *k, int slot, int parts, fj_reg_t valid)
{
    const fj_plan *p = k->p;
    if (p->variant & FJ_VARIANT_GATHER) {
        copy_kv_gathered(k, slot, parts, valid);
        return;
    }
    if (p->kv8) { /* e4m3 bytes into their own ring (kv8.c) */
        if (parts & FJ_KV_K) fj_kv8_copy_tile(k, slot, 1, k->k_ptr, valid);
        if (parts & FJ_KV_V) fj_kv8_copy_tile(k, slot, 2, k->v_ptr, valid);
        return;
    }
    if (parts & FJ_KV_K) copy_tile(k, p->k_off + slot * p->kv_tile_bytes, k->k_ptr, 1, p->cfg.block_n, valid);
    if (parts & FJ_KV_V) copy_tile(k, p->v_off + slot * p->kv_tile_bytes, k->v_ptr, 2, p->cfg.block_n, valid);
}

static void commit_sm80(fj_kctx *k) { fj_ins(k->e, PTX_CP_ASYNC_COMMIT); }

static void wait_sm80(fj_kctx *k, int pending)
{
    fj_ins(k->e, PTX_CP_ASYNC_WAIT, pending);
    if (k->kv8_slot) { /* FP8 K/V: the thread's own e4m3 bytes have landed; widened before the barrier, into the
                        * one 16-bit slot once every warp is done with the previous tile's MMAs (first barrier) */
        fj_ins(k->e, "bar.sync 0");
        fj_kv8_widen(k, k->kv8_slot - 1);
        k->kv8_slot = 0;
    }
    fj_ins(k->e, "bar.sync 0");
}

/* ---- MMA ------------------------------------------------------------------------------------- */
static const char *dt(const fj_kctx *k) { return fj_mma_dtype_ptx(k->p); }

/* A fragment (4 regs) of Q for fragment mf, k-step ks into dst. */
static void ldmatrix_q(fj_kctx *k, fj_reg_t dst, int mf, int ks)
{
    const fj_plan *p = k->p;
    int c = 2 * ks, lo = chunk_low(p, c);
    fj_ins(k->e, PTX_LDMATRIX_X4, R(dst), R(fj_at(dst, 1)), R(fj_at(dst, 2)), R(fj_at(dst, 3)),
           R(lane_addr(k, k->bk[BK_Q_ADDR], c)), p->q_off + mf * 16 * p->row_bytes + (c - lo) * 16);
}

static void q_to_regs_sm80(fj_kctx *k)
{
    if (k->p->kv8_direct) { /* Q's head dims permuted as the e4m3 K fragments carry them (kv8_frag.c) */
        for (int mf = 0; mf < k->p->m_frags; mf++)
            for (int ks = 0; ks < k->p->k_steps_qk; ks++)
                fj_kv8d_q_frag(k, fj_at(k->frag_q, (mf * k->p->k_steps_qk + ks) * 4), mf, ks);
        return;
    }
    for (int mf = 0; mf < k->p->m_frags; mf++)
        for (int ks = 0; ks < k->p->k_steps_qk; ks++) ldmatrix_q(k, fj_at(k->frag_q, (mf * k->p->k_steps_qk + ks) * 4), mf, ks);
}

static void mma(fj_kctx *k, fj_reg_t d, fj_reg_t a, fj_reg_t b, int c_zero)
{
    const char *c[4];
    for (int i = 0; i < 4; i++) c[i] = c_zero ? R(k->f_zero) : R(fj_at(d, i));
    fj_ins(k->e, PTX_MMA_16816, dt(k), dt(k), R(d), R(fj_at(d, 1)), R(fj_at(d, 2)), R(fj_at(d, 3)), R(a),
           R(fj_at(a, 1)), R(fj_at(a, 2)), R(fj_at(a, 3)), R(b), R(fj_at(b, 1)), c[0], c[1], c[2], c[3]);
}

static void mma_qk_sm80(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    if (p->kv8_direct) {
        fj_kv8d_mma_qk(k, slot);
        return;
    }
    int tile = p->k_off + slot % p->kv_slots * p->kv_tile_bytes;
    fj_reg_t bf = fj_alloc(k->e, k->b_frag_b, 4);
    fj_reg_t qf = p->q_in_regs ? k->frag_q : fj_alloc(k->e, k->b_frag_q, 4 * p->m_frags);
    for (int ks = 0; ks < p->k_steps_qk; ks++) {
        int c = 2 * ks, lo = chunk_low(p, c);
        if (!p->q_in_regs)
            for (int mf = 0; mf < p->m_frags; mf++) ldmatrix_q(k, fj_at(qf, mf * 4), mf, ks);
        for (int np = 0; np < p->n_frags_s / 2; np++) {
            fj_ins(k->e, PTX_LDMATRIX_X4, R(bf), R(fj_at(bf, 1)), R(fj_at(bf, 2)), R(fj_at(bf, 3)), R(lane_addr(k, k->bk[BK_K_ADDR], c)),
                   tile + np * 16 * p->row_bytes + (c - lo) * 16);
            for (int mf = 0; mf < p->m_frags; mf++) {
                fj_reg_t a = p->q_in_regs ? fj_at(qf, (mf * p->k_steps_qk + ks) * 4) : fj_at(qf, mf * 4);
                for (int h = 0; h < 2; h++)
                    mma(k, fj_at(k->acc_s, (mf * p->n_frags_s + 2 * np + h) * 4), a, fj_at(bf, 2 * h), ks == 0);
            }
        }
    }
}

/* Warp pairs: this warp's packed P to its exchange area (get = 0), or the partner's into k-steps
 * own..k_steps_pv - 1 of frag_p (get = 1). Both warps map lanes to rows and columns alike, so the
 * partner's registers are this lane's A fragments for the partner's k-steps. */
static void xchg_p_sm80(fj_kctx *k, int get)
{
    const fj_plan *p = k->p;
    int own = p->k_steps_pv / p->col_warps;
    for (int mf = 0; mf < p->m_frags; mf++)
        for (int ks = 0; ks < own; ks++) {
            int slot = FJ_XCHG_SLOT_P + mf * own + ks;
            if (get) fj_emit_pair_get(k, slot, fj_at(k->frag_p, (mf * p->k_steps_pv + own + ks) * 4), 4, "b32");
            else fj_emit_pair_put(k, slot, fj_at(k->frag_p, (mf * p->k_steps_pv + ks) * 4), 4, "b32");
        }
}

/* O += P V over the k-steps of `keys`: all of them, or (warp pairs) this warp's keys or the partner's. */
static void mma_pv_sm80(fj_kctx *k, int slot, int keys)
{
    const fj_plan *p = k->p;
    if (p->kv8_direct) {
        fj_kv8d_mma_pv(k, slot, keys);
        return;
    }
    int own = p->k_steps_pv / p->col_warps;
    int ks0 = keys == FJ_KEYS_PEER ? own : 0, ks1 = keys == FJ_KEYS_OWN ? own : p->k_steps_pv;
    int tile = p->v_off + slot % p->kv_slots * p->kv_tile_bytes;
    fj_reg_t bf = fj_alloc(k->e, k->b_frag_b, 4);
    for (int ks = ks0; ks < ks1; ks++)
        for (int np = 0; np < p->n_frags_o / 2; np++) {
            int c = 2 * np, lo = chunk_low(p, c);
            fj_reg_t vbase = k->bk[ks < own ? BK_V_OWN : BK_V_PEER];
            fj_ins(k->e, PTX_LDMATRIX_X4_TRANS, R(bf), R(fj_at(bf, 1)), R(fj_at(bf, 2)), R(fj_at(bf, 3)),
                   R(lane_addr(k, vbase, c)), tile + (ks % own) * 16 * p->row_bytes + (c - lo) * 16);
            for (int mf = 0; mf < p->m_frags; mf++)
                for (int h = 0; h < 2; h++)
                    mma(k, fj_at(k->acc_o, (mf * p->n_frags_o + 2 * np + h) * 4),
                        fj_at(k->frag_p, (mf * p->k_steps_pv + ks) * 4), fj_at(bf, 2 * h), 0);
        }
}

/* The sm_80 protocol: cp.async groups and CTA barriers (fwd_kernel.c). */
static const fj_sync_proto sync_sm80 = {
    .load_q = load_q_sm80,
    .load_kv = load_kv_sm80,
    .commit = commit_sm80,
    .wait = wait_sm80,
    .q_to_regs = q_to_regs_sm80,
    .xchg_p = xchg_p_sm80,
};

const fj_backend fj_backend_sm80 = {
    .name = "sm80-mma.sync",
    .required_caps = FJ_CAP_MMA_SYNC | FJ_CAP_CP_ASYNC | FJ_CAP_LDMATRIX,
    .tiles = tiles_sm80,
    .smem_map = smem_map_sm80,
    .plan = plan_sm80,
    .describe = describe_sm80,
    .frag_desc = fj_frag_desc_m16n8,
    .setup = setup_sm80,
    .geometry = geometry_sm80,
    .mma_qk = mma_qk_sm80,
    .pack_p = fj_emit_pack_p_m16n8,
    .mma_pv = mma_pv_sm80,
    .store_o = fj_emit_store_o_m16n8,
    .sync = &sync_sm80,
};
