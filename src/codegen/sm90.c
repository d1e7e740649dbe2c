/*
 * sm90.c - the sm_90a backend: wgmma.mma_async with shared-memory descriptors, fed by TMA, in the
 * warp-specialized frame (ws_frame.c; its role bodies sm90_roles.c). PTX ISA 8.0, .target sm_90a (wgmma and setmaxnreg exist on
 * sm_90a only). ISA sections: 9.7.15 (wgmma, its descriptors and shared-memory layouts).
 *
 * Work split: warpgroup 0 loads (async.c), consumer warpgroup c = 0.. owns query rows [64c, 64c + 64)
 * of the CTA tile: S = Q K^T is one m64nBc k16 wgmma per 16 head dims, O += P V one m64nD k16 wgmma per
 * 16 keys. A wgmma accumulator gives each warp 16 rows in the m16n8 C layout (frag_m16n8.c), so the
 * softmax, the mask, the P repack and the store are the sm_80 path's.
 *
 * Shared-memory tiles are stored as TMA writes them: a [rows][head_dim] tile is tma_boxes boxes of
 * [rows][W bytes] (W = the swizzle span, 32/64/128 B), each row's 16-byte chunks XOR-swizzled within W
 * by the row's index (mod W / 16). That is the canonical wgmma layout of the same swizzle mode:
 *   Q (A) and K (B) are K-major (head dims contiguous): an 8-row group of a box is 8 * W bytes (SBO);
 *     a k16 step is 32 bytes further along a row, the next box after rows * W bytes.
 *   V (B of O += P V) is N-major (its rows are the keys = the K dimension, head dims contiguous): SBO =
 *     8 * W bytes between 8-key groups, LBO = rows * W bytes between the W / 2-column boxes along N; a
 *     k16 step is 16 rows = 16 * W bytes further, and transB = 1.
 * Descriptor (64 bits): start address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, base
 * offset 0 (every tile starts on a whole swizzle pattern), swizzle mode in 62-63 (1 = 128 B, 2 = 64 B,
 * 3 = 32 B). Per-thread 64-bit bases are built once; each wgmma adds an immediate offset >> 4 (the
 * address field cannot carry: the smem window ends below 2^18 bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "kernel_abi.h"
#include "mask.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm90.h"
#include "base/env_word.h"
#include "base/error.h"
#include "fp8_ws.h"
#include "seqlen.h"
#include "sched.h"
#include "sm90.h"

#define R(reg) fj_r(k->e, reg)
#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)

/* bk[] slots of this backend */
enum {
    BK_DESC_Q = 0, /* u64: descriptor of this warpgroup's Q rows, box 0, k-step 0 */
    BK_DESC_K = 1, /* u64: K-major descriptor of smem offset 0 (K tiles add their offset) */
    BK_DESC_V = 2, /* u64: N-major descriptor of smem offset 0 (V tiles add their offset) */
    BK_O_LANE = 3, /* u32: this thread's first O staging address (row, 4 t, swizzle XOR applied) */
    BK_O_WG = 4,   /* u32: this warpgroup's O staging region */
    BK_EPI_BAR = 5 /* u32: named barrier of this warpgroup's epilogue */
};

/* Named barriers 4 + c: consumer warpgroup c's epilogue (ping-pong takes 1..3); 7: all consumer
 * warpgroups, before O is staged in the V ring (every last PV has read V). */
#define FJ_SM90_EPI_BAR0 4
#define FJ_SM90_CONSUMERS_BAR 7

/* Registers per thread after setmaxnreg, by consumer warpgroups: 1 consumer takes what a 256-thread CTA
 * gets anyway (no setmaxnreg); 2 and 3 split the 64K registers of the SM with the producer warpgroup
 * (2: 128 x 24 + 256 x 240 = 64512; 3: 128 x 32 + 384 x 160 = 65536). */
static const int k_reg_split[4][2] = {{0, 0}, {0, 0}, {24, 240}, {32, 160}};
/* FP8: the producer's warps 1-3 transpose V (fp8_ws.c), which takes more than 24-32 registers: 40 each
 * (2: 128 x 40 + 256 x 232 = 64512; 3: 128 x 40 + 384 x 152 = 63488). */
static const int k_reg_split_fp8[4][2] = {{0, 0}, {0, 0}, {40, 232}, {40, 152}};
/* FP8 with FJ_FP8_KNOB_REGS: FlashAttention-3's splits (2: 128 x 24 + 256 x 240 = 64512; 3: 128 x 32 + 384 x 160 =
 * 65536). The pool setmaxnreg moves registers in is the CTA's launch allocation (PTX ISA, setmaxnreg: a per-CTA pool;
 * .inc blocks until it holds enough), and ptxas allocates at most 168 per thread to a 384-thread CTA (8-register
 * steps under 65536 / 384): 384 x 168 = 64512. A 32 / 240 split (65536, this knob before 2026-11-27) asks 1024 more
 * than the pool holds, so the consumers' USETMAXREG.TRY_ALLOC retried forever: the hang of bench/fp8_ab.sh. The
 * transposers fit 24 (ptxas -v: 0 spills, D64-D256; at 24 ptxas keeps one ldmatrix in flight). fj_sm90_reg_pool_ok
 * checks every split against the pool. */
static const int k_reg_split_fp8_lean[4][2] = {{0, 0}, {0, 0}, {24, 240}, {32, 160}};
#define FJ_SM90_OCC2_PRODUCER_REGS 40
#define FJ_SM90_OCC2_CONSUMER_REGS 216
#define FJ_SM90_REG_FP8 4 /* FP8 consumers: the tile's descaled softmax scale, the byte-pair temporaries of P */
/* FP8 with FJ_FP8_KNOB_REGS, two consumer warpgroups (240 registers): misc 32 in all. ptxas -v (13.0, 2026-11-27):
 * D256 br128 bc128 ov (pp or not) and D128 br128 bc224 ov pp, FlashAttention-3's FP8 tiles, assemble with no spill
 * at 240 (O + S + P = 208 and 204); at 232 they spill 96 and 32 bytes. Causal with ping-pong takes 4 more: D256 bc128
 * ov pp causal spills 4 bytes at 240 (D128 bc224 ov pp causal, 240 with them, none). */
#define FJ_SM90_REG_MISC_FP8_LEAN 32
/* ... and three consumer warpgroups under regs (160 registers, the producer 32): misc 28. ptxas -v (13.0,
 * 2026-11-29): D64 br192 bc160 ov, with and without ping-pong, causal or not, assemble with no spill at 160 (O + S + P =
 * 132). Until then three warpgroups kept 32 + FP8's 4 from a 4-byte spill of D64 bc160 ov measured on 2026-11-27. */
#define FJ_SM90_REG_MISC_FP8_LEAN_3WG 28
#define FJ_SM90_REG_LIMIT_1WG 255
/* Registers besides O, S and (with overlap) P's A fragments: addresses, descriptors, the persistent
 * schedule's and the ring's state, row statistics, the mask and softmax temporaries. Calibrated with
 * ptxas -v against the setmaxnreg caps (consumers compile under them and spill past them): with overlap,
 * O + S + P = 204 fits 240 and 208 spills (D128 Bc192: 4-12 B; D256 Bc112: 8 B), 128 fits 160 and 132
 * spills (D96 Bc112, 3 warpgroups: 20 B); without overlap P is packed as S dies and O + S + misc fits
 * everywhere measured (D256 Bc160 s1: 0 spills). tests/test_ptxas_grid.c holds the model to it. */
#define FJ_SM90_REG_MISC 36
#define FJ_SM90_REG_MISC_3WG 32 /* three consumer warpgroups (160 registers): less per-row state each */
#define FJ_SM90_REG_CAUSAL_DEEP 4 /* a causal kernel with 3-4 stages: the only spill in the tuner's whole
                                     space (1234 configs) was D64 br192 bc128 s3 causal at 160 of 160; and
                                     any kernel with 4 stages (not in the tuner's space): D64 br192 bc128 s4
                                     ov pp spills 8 bytes at 160 of 160 (tests/test_spill_space.c) */
#ifndef FJ_SM90_RESCALE_SLACK /* a build knob for A/B runs (bench/softmax_ab.sh): -1 = rescale O every tile */
#define FJ_SM90_RESCALE_SLACK 8
#endif
#ifndef FJ_FP8_RESCALE_SLACK /* FP8's rescale_slack: 0 = rebase behind the vote on every moved max; -1 = every tile,
                                with no vote and no branch, as FlashAttention-3's FP8 softmax. H200 (session 17, fagen
                                bench e4m3, 2 rounds): -1 is 4% slower at D128 N4k, 6% at N16k, 0-1% at D64 / D256 -
                                the vote skips the 64 multiplies on the tiles that move no max, most of them at N16k */
#define FJ_FP8_RESCALE_SLACK 0
#endif
#ifndef FJ_SM90_RESCALE_WEIGHT_LOG2 /* a build knob for A/B runs (bench/acc_ab.sh) */
#define FJ_SM90_RESCALE_WEIGHT_LOG2 0 /* off: see FJ_SM80_RESCALE_WEIGHT_LOG2 (sm80.c) */
#endif
/* config accurate = 1 (fajit.h): the weight test at 1/4 of the estimated final l, its threshold held in a register
 * (sm80.c FJ_SM80_ACCURATE_WEIGHT_LOG2; sm_90a ratio to FA2 mean 1.00-1.02, max 1.11-1.16 in session 17) */
#define FJ_SM90_ACCURATE_WEIGHT_LOG2 (-2)
#ifndef FJ_RESCALE_WEIGHT_EST /* plan.rescale_weight_est: see sm80.c */
#define FJ_RESCALE_WEIGHT_EST 0
#endif
#ifndef FJ_RESCALE_WEIGHT_HELD /* plan.rescale_weight_held: see sm80.c */
#define FJ_RESCALE_WEIGHT_HELD 0
#endif
#ifndef FJ_RESCALE_WEIGHT_LAG /* plan.rescale_weight_lag: see sm80.c */
#define FJ_RESCALE_WEIGHT_LAG 0
#endif
#ifndef FJ_SM90_O_RESCALE_LATE /* plan.o_rescale_late: a build knob for A/B runs (bench/acc_ab.sh) */
#define FJ_SM90_O_RESCALE_LATE 0
#endif

/* Softcap's share of the exponentials taken off the MUFU (plan.soft_exp2, eighths of a row's values). Counted
 * per consumer warp and KV tile (H100: MUFU 16 / clk / SM = 8 cycles per warp instruction on a sub-partition,
 * one issue slot per instruction, dense bf16 wgmma ~4096 FLOP / clk / SM): d128 bc128 with ping-pong has the other
 * warpgroup's GEMMs, 1024 cycles, to hide a softmax of 64 tanh + 64 ex2 = 1024 MUFU cycles (plain: 512) beside
 * ~420 issue slots. A software exp2 (soft_exp2.h) moves 8 MUFU cycles to 10 more issue slots: 4 of 8 gives MUFU
 * 768, issue ~740, below the GEMMs again. d256 (bc80, no ping-pong) has its MUFU at ~half its GEMM time: 2 of 8. */
/* Exponentials of every 8 taken off the MUFU (soft_exp2.h). Off: on an H100 (2026-11-26, bench/variants_compare.py,
 * bench/results/h100-variants-ab-soft-exp2-2026-11-26.md) 4 of 8 at d128 and 2 of 8 at d256 made softcap 50 causal
 * B2 N8k slower, 473 -> 408 and 571 -> 527-544 TFLOP/s: the predicted MUFU bound was not the limit, the ~320 extra
 * issue slots per tile were. The emitter and its accuracy test stay for the sm_100a softmax roles and for tuning. */
#ifndef FJ_SOFTCAP_SOFT_EXP2
#define FJ_SOFTCAP_SOFT_EXP2 0 /* a build knob for A/B runs: 1 or 2 of 8 with -DFJ_SOFT_EXP2_DEG=3 (bench/softcap_ab.sh) */
#endif
/* The same for the other 16-bit kernels (issue 24: software exp2 offered on sm_90a, kept only where it measures
 * faster): a build knob for the H200 A/B (bench/softexp2_ab.sh), 0 = off. FP8 kernels never (their softmax is not
 * the bound: the V transpose is). */
#ifndef FJ_SOFT_EXP2_SHARE
#define FJ_SOFT_EXP2_SHARE 0
#endif
/* Softcap's tanh on the FMA units where a warp's scores allow (plan.cap_poly, soft_tanh.h): the MUFU then runs one
 * instruction a score instead of two, for about 2 more issue slots a score. Head dims up to 64 only: H200, fagen
 * bench, softcap 50 B2 N8k, TFLOP/s off / on (bench/results/h200-session12-2026-11-28.md): D64 H32 causal 303 / 362-365
 * (+20%; the exact-max form 339); D96 causal 449 / 443; D128 causal 518-527 / 516-521 and non-causal 534-545 /
 * 537-551 (a wash: those tiles' softmax was bound by issue slots, not the MUFU); D256 causal 663-670 / 626-633
 * (-5%); f16 D128 causal 503 / 492. Build knobs for A/B runs: FJ_SOFTCAP_POLY 0 off, 1 the default (max |s| for bf16,
 * max and min for f16), 2 max and min for both; FJ_SOFTCAP_POLY_SHARE the scores of every 8 that take it (2 and 4
 * were slower than 8 and than none at D128 and D256). */
#ifndef FJ_SOFTCAP_POLY
#define FJ_SOFTCAP_POLY 1
#endif
#ifndef FJ_SOFTCAP_POLY_SHARE
#define FJ_SOFTCAP_POLY_SHARE 8
#endif
#ifndef FJ_SOFTCAP_POLY_MAX_D
#define FJ_SOFTCAP_POLY_MAX_D 64 /* -DFJ_SOFTCAP_POLY_MAX_D=256: every head dim, for an A/B */
#endif
#ifndef FJ_SM90_CROSS_TILE
#define FJ_SM90_CROSS_TILE 0
#endif
#ifndef FJ_SM90_KV_PREFETCH
#define FJ_SM90_KV_PREFETCH 0
#endif
/* no variant bits but varlen and lpt: a dense or varlen 16-bit forward's (no decode variants, no paging) */
static int dense_or_varlen(const fj_plan *p)
{
    return !p->fp8 && !(p->variant & ~(unsigned)(FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K | FJ_VARIANT_LPT));
}
int fj_sm90_kv_prefetch(const fj_plan *p) { return FJ_SM90_KV_PREFETCH && p->ws && dense_or_varlen(p); }
/* What the cross-tile tail needs of a plan, but the variant (a config's cross_tile = 1 is planned without one): NULL,
 * or the first thing missing, in the config's words */
static const char *cross_tile_missing(const fj_plan *p)
{
    return p->fp8                            ? "dtype e4m3"
           : !p->ws || !p->pingpong           ? "pingpong off"
           : !p->overlap                      ? "overlap off"
           : !p->roll_stages                  ? "roll off (or one stage)"
           : p->cfg.mods & FAJIT_MOD_ALIBI    ? "ALiBi (its slopes are set up per work tile before the KV loop)"
           : p->o_stage != 1                  ? "O staged in the V ring (no smem for an O buffer of its own)"
           : p->o_rescale_late                ? "the late O rescale (build knob FJ_SM90_O_RESCALE_LATE)"
                                              : NULL;
}
/* the config's cross_tile = 1 (a plain kernel: fj_plan_build_variant plans variants with 0), or the build knob for
 * every plan that can (varlen under lpt included) */
int fj_sm90_cross_tile(const fj_plan *p)
{
    return (p->cfg.cross_tile == 1 || FJ_SM90_CROSS_TILE) && !cross_tile_missing(p) && dense_or_varlen(p) &&
           (p->lpt || !(p->variant & FJ_VARIANT_VARLEN));
}

static int plan_cap_poly(const fajit_config *c)
{
    if (!(c->mods & FAJIT_MOD_SOFTCAP) || (c->mods & FAJIT_MOD_ALIBI) || c->dtype == FAJIT_DTYPE_E4M3 ||
        c->head_dim > FJ_SOFTCAP_POLY_MAX_D || !FJ_SOFTCAP_POLY)
        return 0; /* (with ALiBi the softmax takes no early max, so no split tile: softmax.c) */
    return FJ_SOFTCAP_POLY == 2 || c->dtype == FAJIT_DTYPE_F16 ? 2 : 1;
}

static int plan_soft_exp2(const fajit_config *c)
{
    if (c->mods & FAJIT_MOD_SOFTCAP) return FJ_SOFTCAP_SOFT_EXP2;
    return c->dtype == FAJIT_DTYPE_E4M3 ? 0 : FJ_SOFT_EXP2_SHARE;
}

int fj_sm90_acc_o_regs(const fajit_config *c) { return c->head_dim / 2; }
int fj_sm90_acc_s_regs(const fajit_config *c) { return c->block_n / 2; }
/* P as 16- or 8-bit A fragments: 64 x block_n over 128 threads */
int fj_sm90_p_regs(const fajit_config *c) { return c->block_n / (c->dtype == FAJIT_DTYPE_E4M3 ? 8 : 4); }

int fj_sm90_launch_regs_ctas(int threads, int ctas)
{
    int r = 65536 / (threads * (ctas > 1 ? ctas : 1)) / 8 * 8;
    return r > 255 ? 255 : r;
}

int fj_sm90_launch_regs(int threads) { return fj_sm90_launch_regs_ctas(threads, 1); }

static int reg_pool_ok_ctas(int consumer_wgs, int producer_regs, int consumer_regs, int ctas)
{
    int threads = 128 * (consumer_wgs + 1);
    return 128 * producer_regs + 128 * consumer_wgs * consumer_regs <= threads * fj_sm90_launch_regs_ctas(threads, ctas);
}

int fj_sm90_reg_pool_ok(int consumer_wgs, int producer_regs, int consumer_regs)
{
    return reg_pool_ok_ctas(consumer_wgs, producer_regs, consumer_regs, 1);
}

static int swizzle_mode(int swizzle) { return swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3; }

/* FJ_LEAN_* bits from FAJIT_SM90_LEAN, a comma list: "wgu" (FJ_LEAN_WG_UNIFORM), "all"; "0" or "none" (or set but
 * empty) = none (the kernels as before the trims, byte for byte); unset = FJ_LEAN_ALL; another word is refused. Read at
 * planning, so one build serves both sides of a GPU A/B (bench/lean_ab.sh); a setting other than the default names
 * itself in the plan's text (env_words_sm90), which the kernel caches key on. */
static const fj_env_word k_lean_words[] = {{"wgu", FJ_LEAN_WG_UNIFORM, "the warpgroup index in uniform registers"},
                                           {"all", FJ_LEAN_ALL, "every trim"},
                                           {"none", 0, "no trim"},
                                           {"0", 0, "no trim"},
                                           {NULL, 0, NULL}};

fajit_status fj_sm90_lean_parse(const char *value, unsigned *bits)
{
    return fj_env_list_parse("FAJIT_SM90_LEAN", value, k_lean_words, FJ_LEAN_ALL, "all", bits);
}

/* KV tile order (plan.kv_desc, ws_frame.h): descending for causal ALiBi, whose bias -slope x (i - j) grows along
 * the tiles in ascending order, so that most tiles raised a row max past the lazy rescale's slack and paid the O
 * rescale (scripts/alibi_kv_order.py, N 8k H16 D128 128 x 128: 68.6% of the (tile, warp) steps rebase ascending,
 * 0.0% descending); ascending for the rest (plain kernels keep their PTX). FAJIT_KV_ORDER = asc | desc | auto (unset:
 * auto) overrides it for GPU A/B runs of any 16-bit kernel; an order other than auto's names itself in the plan's
 * text (env_words_sm90), so the kernel caches never serve one order for the other. FP8 kernels stay ascending (not
 * A/B'd). */
static const fj_env_word k_kv_order_words[] = {{"asc", FJ_KV_ORDER_ASC, "ascending"},
                                               {"desc", FJ_KV_ORDER_DESC, "descending"},
                                               {"auto", FJ_KV_ORDER_AUTO, "descending for causal ALiBi only"},
                                               {NULL, 0, NULL}};

fajit_status fj_kv_order_parse(const char *value, int *order)
{
    return fj_env_word_parse("FAJIT_KV_ORDER", value, k_kv_order_words, FJ_KV_ORDER_AUTO, "auto", order);
}

/* The work-tile schedule of a plain causal kernel (plan.lpt): the static round-robin of ws_frame.c, whose odd rounds
 * run backwards to pair long causal tiles with short ones, or the dynamic longest-first one of sched.c (a global
 * counter hands the tiles out, each L2 section's longest query blocks first). The static one shares the work evenly
 * only when a head's query blocks line up with the rounds: D64 br192 on 132 SMs counts the heaviest CTA 1.03x the
 * mean at N 4k (B4 H32) and 1.20 / 1.27x at N 8k / 16k (B2 / B1 H32), where the runtime then launches one CTA per
 * tile (forward.c causal_schedule_balances); a greedy hand-out of the longest-first order counts 1.002-1.014x (its
 * sections' heads by fj_sched_section_heads), as FlashAttention-3's dynamic scheduler does for causal
 * (bench/results/d64-sass-vs-fa3-2026-11-27.md). The config's sched = 1 (the heuristic's pick: config.c fill_sm90,
 * measured in bench/results/h100-session9-2026-11-27.md; for a sliding window the runtime's fj_forward_window_lpt,
 * which knows the window's length) or FAJIT_CAUSAL_SCHED=lpt picks it for 16-bit causal kernels; the environment's
 * lpt names itself in the plan's text
 * (" causalsched=lpt") where the config does not say " lpt", so the caches never serve one for the other. */
static const fj_env_word k_causal_sched_words[] = {{"static", 0, "the static round-robin"},
                                                   {"lpt", 1, "the dynamic longest-first schedule"},
                                                   {NULL, 0, NULL}};

fajit_status fj_causal_sched_parse(const char *value, int *lpt)
{
    return fj_env_word_parse("FAJIT_CAUSAL_SCHED", value, k_causal_sched_words, 0, "static", lpt);
}

/* plan.lpt of a plain plan (fj_plan_build_variant sets it again for a decode variant): the config's sched = 1, or
 * FAJIT_CAUSAL_SCHED=lpt for every plan that can take it */
static fajit_status plan_causal_sched(fj_plan *p)
{
    int lpt, can = fj_config_lpt_can(&p->cfg);
    fajit_status st = fj_causal_sched_parse(getenv("FAJIT_CAUSAL_SCHED"), &lpt);
    if (st != FAJIT_OK) return st;
    if (p->cfg.sched == 1 && !can)
        return CFG_FAIL("sched = 1 (lpt) with %s: the longest-first schedule orders causal BF16 / F16 work tiles; "
                        "use sched 0",
                        !p->cfg.causal ? "a non-causal mask" : p->fp8 ? "dtype e4m3" : "kv_dtype e4m3");
    p->lpt = can && (lpt || p->cfg.sched == 1);
    return FAJIT_OK;
}

/* auto's order of a plan: descending for causal ALiBi, and never for FP8 */
static int kv_desc_auto(const fj_plan *p) { return (p->cfg.mods & FAJIT_MOD_ALIBI) && p->cfg.causal && !p->fp8; }

static fajit_status plan_kv_order(fj_plan *p)
{
    int order;
    fajit_status st = fj_kv_order_parse(getenv("FAJIT_KV_ORDER"), &order);
    if (st != FAJIT_OK) return st;
    p->kv_desc = order == FJ_KV_ORDER_AUTO ? kv_desc_auto(p) : order == FJ_KV_ORDER_DESC && !p->fp8;
    return FAJIT_OK;
}

/* The words fj_plan_format adds to an sm_90a plan whose environment knobs (read at planning) gave it other code than
 * their defaults: " sm90lean=...", " kvorder=asc|desc", " fp8knobs=...", " causalsched=lpt" (and " lptindex" for a
 * varlen lpt plan of a build with FJ_LPT_COORDS=0). The kernel caches (memory, prebuilt, disk) key on the plan's
 * text, so a kernel built under one setting is never served under another; a plan of the defaults (whatever the
 * variables say) adds nothing, so its key and PTX stay what they were. */
static int env_words_sm90(const fj_plan *p, char *buf, size_t size)
{
    int n = 0;
    char words[64];
    buf[0] = '\0';
    if (p->lean != FJ_LEAN_ALL) {
        fj_env_list_format(k_lean_words, p->lean, words, sizeof words);
        n += snprintf(buf, size, " sm90lean=%s", words);
    }
    if (p->kv_desc != kv_desc_auto(p))
        n += snprintf(buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0,
                      " kvorder=%s", p->kv_desc ? "desc" : "asc");
    if (p->fp8) n += fj_fp8_knobs_words(p, buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0);
    if (p->lpt && !(p->variant & FJ_VARIANT_LPT) && p->cfg.sched != 1) /* (sched = 1: the config's text says " lpt") */
        n += snprintf(buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0,
                      " causalsched=lpt");
    if ((p->variant & FJ_VARIANT_LPT) && !fj_sched_coords(p)) /* a build knob (sched.h FJ_LPT_COORDS), not an
                                                                * environment one: the source digest misses it */
        n += snprintf(buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0, " lptindex");
    return n;
}

/* ---- plan ------------------------------------------------------------------------------------ */
static fajit_status tiles_sm90(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->col_warps != 0 && c->col_warps != 1)
        return CFG_FAIL("col_warps = %d: the sm_90a path has no warp pairs (a consumer warpgroup owns whole rows); "
                        "use 0 or 1",
                        c->col_warps);
    p->col_warps = p->cfg.col_warps = 1;
    if (c->swizzle == FAJIT_SWIZZLE_NONE)
        return CFG_FAIL("swizzle = none: the sm_90a path stores tiles as TMA boxes of the swizzle span, which the "
                        "wgmma descriptors read; use 32, 64 or 128");
    if (c->block_m != 64 && c->block_m != 128 && c->block_m != 192)
        return CFG_FAIL("block_m (--br) = %d: must be 64, 128 or 192 on sm_90a (one consumer warpgroup per 64 query rows, "
                        "the m64 wgmma shape; at most 3)",
                        c->block_m);
    p->consumer_wgs = c->block_m / 64;
    int want = 4 * (p->consumer_wgs + 1);
    if (c->warps != want)
        return CFG_FAIL("warps = %d: the sm_90a path runs one producer warpgroup and block_m / 64 = %d consumer "
                        "warpgroups, so warps must be 4 x %d = %d",
                        c->warps, p->consumer_wgs, p->consumer_wgs + 1, want);
    if (p->pingpong && p->consumer_wgs < 2)
        return CFG_FAIL("pingpong = 1 with block_m (--br) = %d: ping-pong alternates two or more consumer warpgroups; use "
                        "block_m >= 128 or pingpong = -1",
                        c->block_m);
    if (p->pingpong && !p->overlap)
        return CFG_FAIL("pingpong = 1 with overlap = %d: a warpgroup's turn issues S(j) and PV(j-1) together, which "
                        "is the overlapped schedule; use overlap = 1",
                        c->overlap);
    if (c->roll == 1 && c->stages < 2)
        return CFG_FAIL("roll = 1 with stages = %d: one stage is one loop body already; use roll = 0 or -1, or stages "
                        ">= 2",
                        c->stages);
    if (c->dtype == FAJIT_DTYPE_E4M3) {
        fajit_status st = fj_fp8_tiles(p);
        if (st != FAJIT_OK) return st;
    }
    p->ws = 1;
    p->row_warps = 4 * p->consumer_wgs;
    p->m_frags = 1;
    p->params_bytes = (int)sizeof(fj_fwd_params_tma);
    p->params_align = 64;
    return FAJIT_OK;
}

static void smem_map_sm90(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->dtype == FAJIT_DTYPE_E4M3) {
        fj_fp8_smem_map(p);
        return;
    }
    p->row_bytes = c->head_dim * 2;
    p->q_off = 0;
    p->q_bytes = c->block_m * p->row_bytes;
    p->kv_tile_bytes = c->block_n * p->row_bytes;
    /* 1024-byte alignment of every tile (the 128-byte swizzle repeats every 8 rows x 128 B): Q is a
     * multiple of 64 rows and a K / V tile of 16 rows x >= 128 B, so the offsets below already are */
    /* Q and the K/V ring must fit; the O staging buffer (TMA-store epilogue) and a second Q buffer are
     * added in that order of preference while they fit too. When no staging buffer fits but the V ring
     * holds block_m rows, O is staged in the V ring (o_stage 2): the consumers write it there once every
     * warpgroup's last PV is done, and the producer loads the next work tile's first V only after the
     * TMA stores have read it (the O free barrier). */
    int limit = fj_arch_path_smem_max(FAJIT_ARCH_SM90A), ring = 2 * c->stages * p->kv_tile_bytes;
    int base = p->q_bytes + ring + 8 * fj_ws_bar_count(c->stages, 0);
    /* a split's or a packed tile's epilogue stores O from registers: no staging buffer */
    p->o_stage = fj_ws_o_in_regs(p)                                                 ? 0
                 : base + p->q_bytes <= limit                                        ? 1
                 : c->stages * p->kv_tile_bytes >= p->q_bytes && base + 8 <= limit ? 2
                                                                                   : 0;
    p->n_bars = fj_ws_bar_count(c->stages, p->o_stage);
    p->q_bufs = base + 8 * (p->o_stage == 2) + ((p->o_stage == 1) + 1) * p->q_bytes <= limit ? 2 : 1;
    p->k_off = p->q_off + p->q_bufs * p->q_bytes;
    p->v_off = p->k_off + c->stages * p->kv_tile_bytes;
    p->o_off = p->o_stage == 2 ? p->v_off : p->v_off + c->stages * p->kv_tile_bytes;
    p->bar_off = p->v_off + c->stages * p->kv_tile_bytes + (p->o_stage == 1 ? p->q_bytes : 0);
    p->smem_bytes = p->bar_off + 8 * p->n_bars;
    p->xchg_off = p->xchg_warp_bytes = 0;
    p->o_row_bytes = p->row_bytes;
    p->o_bytes = p->q_bytes;
}

int fj_sm90_rolled(const fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->roll) return c->roll == 1;
    if (!FJ_SM90_ROLL_DEFAULT || c->stages < 2) return 0;
    unsigned v = p->variant_wanted;
    if (c->dtype == FAJIT_DTYPE_E4M3) return FJ_FP8_ROLL_D128 && c->head_dim == 128 && !c->mods && !v;
    /* 16-bit: the attention variants (mods) included: on an H100 (bench/results/h100-session5-2026-11-27.md) rolled =
     * unrolled within noise or faster for softcap, sinks, ALiBi, window, chunk and varlen, and `fagen check --roll on`
     * passes them; not the decode variants (seqlens_k, split-KV, paging, GQA packing: not GPU-measured rolled) */
    return !(v & ~(unsigned)(FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K | FJ_VARIANT_LPT));
}

static fajit_status plan_sm90(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    int w = c->swizzle;
    p->tma_box_cols = p->fp8 ? w : w / 2; /* a box row is the swizzle span: w elements of 1 byte, w / 2 of 2 */
    p->tma_boxes = c->head_dim / p->tma_box_cols;
    p->o_box_cols = w / 2;
    p->o_boxes = c->head_dim / p->o_box_cols;
    const int(*split)[2] = !p->fp8                                 ? k_reg_split
                           : p->fp8_knobs & FJ_FP8_KNOB_REGS ? k_reg_split_fp8_lean
                                                               : k_reg_split_fp8;
    p->producer_regs = split[p->consumer_wgs][0];
    p->consumer_regs = split[p->consumer_wgs][1];
    if (p->min_ctas == 2) /* FP8 occ2, one consumer warpgroup: 128 x 40 + 128 x 216 = the 256 x 128 launch pool */
        p->producer_regs = FJ_SM90_OCC2_PRODUCER_REGS, p->consumer_regs = FJ_SM90_OCC2_CONSUMER_REGS;
    if (p->consumer_regs && !reg_pool_ok_ctas(p->consumer_wgs, p->producer_regs, p->consumer_regs, p->min_ctas))
        return fj_fail(FAJIT_ERR_INTERNAL, "sm90.c: register split %d / %d with %d consumer warpgroups exceeds the CTA's "
                                           "launch allocation (%d per thread): setmaxnreg.inc would wait forever",
                       p->producer_regs, p->consumer_regs, p->consumer_wgs,
                       fj_sm90_launch_regs_ctas(128 * (p->consumer_wgs + 1), p->min_ctas));
    if (p->fp8) { /* k = 32 a wgmma: 32 bytes of a row either way */
        p->k_steps_qk = c->head_dim / 32;
        p->k_steps_pv = c->block_n / 32;
    }
    p->whole_program = p->consumer_regs > 0;
    fajit_status st = fj_sm90_lean_parse(getenv("FAJIT_SM90_LEAN"), &p->lean);
    if (st != FAJIT_OK || (st = plan_kv_order(p)) != FAJIT_OK || (st = plan_causal_sched(p)) != FAJIT_OK) return st;
    p->roll_stages = fj_sm90_rolled(p); /* (the check refuses roll = 1 with one stage) */
    p->reg_limit = p->consumer_regs ? p->consumer_regs : FJ_SM90_REG_LIMIT_1WG;
    p->reg_acc_o = fj_sm90_acc_o_regs(c);
    p->reg_acc_s = fj_sm90_acc_s_regs(c);
    p->reg_p = fj_sm90_p_regs(c);
    p->reg_q = 0;
    p->q_in_regs = 0;
    p->pipeline_qk = 0;
    p->lean_regs = 0;
    p->reg_s_next = 0;
    /* FP8: a rescale whenever a row max moves, so each row's largest P is 2^0 = 1, exact in e4m3 (with the lazy
     * rescale it could be any 2^x below 2^8, rounded by up to 2^-4: the dominant key of a peaked row would carry
     * that error) */
    p->rescale_slack = p->fp8 ? FJ_FP8_RESCALE_SLACK : FJ_SM90_RESCALE_SLACK;
    p->rescale_weight_log2 = FJ_SM90_RESCALE_WEIGHT_LOG2;
    p->rescale_weight_est = FJ_RESCALE_WEIGHT_EST;
    p->rescale_weight_lag = FJ_RESCALE_WEIGHT_LAG;
    p->rescale_weight_held = FJ_RESCALE_WEIGHT_HELD;
    if (c->accurate == 1) {
        p->rescale_weight_log2 = FJ_SM90_ACCURATE_WEIGHT_LOG2;
        p->rescale_weight_est = p->rescale_weight_held = 1;
    }
    p->o_rescale_late = FJ_SM90_O_RESCALE_LATE;
    p->soft_exp2 = plan_soft_exp2(c);
    p->cap_poly = plan_cap_poly(c);
    p->cap_poly_share = FJ_SOFTCAP_POLY_SHARE;
    p->reg_misc = (p->consumer_wgs == 3 ? FJ_SM90_REG_MISC_3WG : FJ_SM90_REG_MISC) +
                  ((c->causal && c->stages >= 3) || c->stages == 4 ? FJ_SM90_REG_CAUSAL_DEEP : 0) +
                  (p->fp8 ? FJ_SM90_REG_FP8 : 0);
    if (p->fp8 && (p->fp8_knobs & FJ_FP8_KNOB_REGS) && p->consumer_wgs == 2)
        p->reg_misc = FJ_SM90_REG_MISC_FP8_LEAN + (c->causal && p->pingpong ? FJ_SM90_REG_FP8 : 0) +
                      ((c->causal && c->stages >= 3) || c->stages == 4 ? FJ_SM90_REG_CAUSAL_DEEP : 0);
    else if (p->fp8 && (p->fp8_knobs & FJ_FP8_KNOB_REGS) && p->consumer_wgs == 3)
        p->reg_misc = FJ_SM90_REG_MISC_FP8_LEAN_3WG +
                      ((c->causal && c->stages >= 3) || c->stages == 4 ? FJ_SM90_REG_CAUSAL_DEEP : 0);
    /* without overlap P's registers are written as S's die (the repack reads each S pair once) */
    if (!p->overlap) p->reg_p = 0;
    p->reg_total = p->reg_acc_o + p->reg_acc_s + p->reg_p + p->reg_misc;
    if (p->reg_total > p->reg_limit)
        return CFG_FAIL("registers: about %d per consumer thread (O acc %d + S acc %d + P %d + addressing and softmax "
                        "~%d) exceed %d, what %d consumer warpgroup%s get (setmaxnreg); lower block_n, or use fewer "
                        "consumer warpgroups (block_m)",
                        p->reg_total, p->reg_acc_o, p->reg_acc_s, p->reg_p, p->reg_misc, p->reg_limit, p->consumer_wgs,
                        p->consumer_wgs > 1 ? "s" : "");
    const char *xt = c->cross_tile == 1 ? cross_tile_missing(p) : NULL;
    if (xt)
        return CFG_FAIL("cross_tile = 1 with %s: the cross-tile tail runs in the rolled, overlapped ping-pong "
                        "consumers of BF16 / F16 kernels with an O buffer of their own; use 0 or -1",
                        xt);
    return FAJIT_OK;
}

/* ---- the role table (roles.h) -------------------------------------------------------------------- */

void fj_sm90_roles(fj_plan *p)
{
    fj_role_table *t = &p->roles;
    int cw = 4 * p->consumer_wgs, prod = 0, xp = 1, cons = p->fp8 ? 2 : 1; /* a group's roles are consecutive */
    memset(t, 0, sizeof *t);
    t->mma_event = FJ_MMA_EVENT_GROUP;
    t->setup_why = "Thread 0 initializes the mbarriers; after a CTA barrier warpgroup 0 becomes the producer\n"
                   "and warpgroups 1.. the consumers. setmaxnreg moves registers from the first to the others;\n"
                   "no CTA-wide barrier follows (the producer's idle warps leave early).";
    fj_role *r = fj_role_add(t, "producer", FJ_ROLE_LOAD, 0, p->fp8 ? 1 : 4, 0);
    r->regs = p->producer_regs;
    r->regs_how = p->producer_regs ? FJ_REGS_DEC : FJ_REGS_KEEP;
    r->title = "Producer warpgroup: TMA loads";
    r->why = "One thread issues every copy; the other 127 have nothing to do and leave once the\n"
             "warpgroup has handed its registers to the consumers. Per work tile: Q into its buffer once\n"
             "the consumers have freed it (Q empty), then K(j) and V(j) to the next stage of the ring when\n"
             "the consumers have freed it (its empty barriers); the copies complete the full barriers.";
    if (p->fp8) { /* warp 0 loads; warps 1..transpose_warps transpose (the rest of the warpgroup idles there); vt4:
                   * warp 0 transposes too, in the loader's loop (sm90_roles.c), so this role is warps 1-3 */
        r = fj_role_add(t, "transposer", FJ_ROLE_TRANSPOSE, 1, p->transpose_warps - p->fp8_vt4, 0);
        r->label = "transposer";
        r->title = "Producer warps 1..: the V transpose (FP8)";
        r->why = "FP8 wgmma reads B K-major only: V(j) [keys][head dims] becomes Vt(j) [head dims][keys] in its own\n"
                 "ring, by ldmatrix.trans + prmt + stmatrix, keys in P's k order (fp8_layout.h).";
        if (p->fp8_vt4)
            snprintf(r->note, sizeof r->note, "FP8 vt4: warps 0-3 transpose V (below); thread 0 of warp 0 loads "
                                              "first, then its warp transposes");
        else
            snprintf(r->note, sizeof r->note, "FP8: warps 1-%d transpose V (below); thread 0 of warp 0 loads",
                     p->transpose_warps);
    }
    r = fj_role_add(t, "consumers", FJ_ROLE_SOFTMAX, 4, cw, 1);
    r->instances = p->consumer_wgs;
    r->regs = p->consumer_regs;
    r->regs_how = p->consumer_regs ? FJ_REGS_INC : FJ_REGS_KEEP;
    r->label = "consumer";
    r->title = "Consumer warpgroups: S = QK^T, softmax, O += PV";
    r->why = p->overlap ? "Warpgroup c owns query rows [64c, 64c + 64) of each work tile. KV tile j: wait for K(j),\n"
                          "issue S(j) = QK(j)^T and O += P(j-1) V(j-1) (wgmma), wait for S(j), free K's stage,\n"
                          "mask and exponentiate while the PV product runs, wait for it, free V's stage, rescale\n"
                          "O if the reference max moved, pack P(j). The last KV tile's PV runs after the loop."
                        : "Warpgroup c owns query rows [64c, 64c + 64) of each work tile. KV tile j: wait for\n"
                          "K(j), S = QK^T (wgmma, both operands from smem), free K's stage, mask, online softmax,\n"
                          "wait for V(j), O += PV (wgmma, P from registers), free V's stage.";
    /* the rings, in the order of their barrier initialization (async.h's map) */
    fj_ring *g = fj_ring_add(t, "Q", 2, 8);
    snprintf(g->note, sizeof g->note,
             "mbarriers: Q full[2] (1 arrival + %d bytes), Q empty[2] (%d arrivals); per stage K / V full (1 arrival + "
             "the tile's bytes), K / V empty (%d arrivals: lane 0 of every consumer warp)",
             p->q_bytes, cw, cw);
    fj_ring_add_part(t, g, "Q", prod, cons, 1, p->q_bytes, cw, fj_ws_bar(p, FJ_BAR_Q_FULL, 0), fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0));
    t->n_rings++;
    g = fj_ring_add(t, "K/V", p->cfg.stages, 8 * FJ_WS_BARS_PER_STAGE);
    fj_ring_add_part(t, g, "K", prod, cons, 1, p->kv_tile_bytes, cw, fj_ws_bar(p, FJ_BAR_K_FULL, 0),
             fj_ws_bar(p, FJ_BAR_K_EMPTY, 0));
    fj_ring_add_part(t, g, "V", prod, p->fp8 ? xp : cons, 1, p->kv_tile_bytes, p->fp8 ? 32 * p->transpose_warps : cw,
             fj_ws_bar(p, FJ_BAR_V_FULL, 0), fj_ws_bar(p, FJ_BAR_V_EMPTY, 0));
    t->n_rings++;
    if (p->fp8) {
        g = fj_ring_add(t, "Vt", p->cfg.stages, p->vt_bar_stride);
        snprintf(g->note, sizeof g->note,
                 "FP8: per stage VT full (%d arrivals: every thread of the %d transposing producer warps, after its "
                 "stmatrix and a proxy fence) and VT empty (%d arrivals: lane 0 of every consumer warp); V empty above "
                 "counts the transposing threads, which free the TMA-loaded V",
                 32 * p->transpose_warps, p->transpose_warps, cw);
        fj_ring_add_part(t, g, "Vt", xp, cons, 32 * p->transpose_warps, 0, cw, fj_ws_bar(p, FJ_BAR_VT_FULL, 0),
                 fj_ws_bar(p, FJ_BAR_VT_EMPTY, 0));
        t->n_rings++;
    }
    if (p->o_stage == 2) {
        g = fj_ring_add(t, "O free", 1, 0);
        snprintf(g->note, sizeof g->note,
                 "O free (%d arrivals: each consumer warpgroup's store leader, once its TMA store has read the O "
                 "staging in the V ring)",
                 p->consumer_wgs);
        fj_ring_add_part(t, g, "O free", cons, prod, p->consumer_wgs, 0, 0, fj_ws_bar(p, FJ_BAR_O_FREE, 0), 0);
        t->n_rings++;
    }
    if (p->vtail_bar) {
        g = fj_ring_add(t, "V tail", 1, 0);
        snprintf(g->note, sizeof g->note,
                 "V tail (1 arrival + the tile's bytes): a sequence's last, partial V tile, zero-filled past the length "
                 "by the producer before it completes V full");
        fj_ring_add_part(t, g, "V tail", prod, prod, 1, p->kv_tile_bytes, 0, p->vtail_bar, 0);
        t->n_rings++;
    }
}

static void describe_sm90(const fj_plan *p, fj_buf *out, const char *pf)
{
    const fajit_config *c = &p->cfg;
    const char *dt = fj_dtype_ptx(p);
    fj_buf_printf(out, "%swarp roles: warpgroup 0 = producer (thread 0 issues every TMA load; %s), warpgroups 1..%d = "
                       "consumers, warpgroup c owns query rows [64(c-1), 64(c-1) + 64) of the tile%s\n",
                  pf, p->producer_regs ? "setmaxnreg.dec to its budget, the other warps then exit" : "no setmaxnreg",
                  p->consumer_wgs, p->consumer_regs ? "; setmaxnreg.inc to theirs" : "");
    if (p->consumer_regs)
        fj_buf_printf(out, "%sregister split (setmaxnreg): producer %d x 128 threads + consumers %d x %d threads = %d of "
                           "%d%s\n",
                      pf, p->producer_regs, p->consumer_regs, 128 * p->consumer_wgs,
                      128 * p->producer_regs + 128 * p->consumer_wgs * p->consumer_regs,
                      65536 / fj_plan_ctas_per_sm(p),
                      p->min_ctas > 1 ? " (two CTAs an SM: .minnctapersm 2, a 128-register launch; the persistent grid "
                                        "twice the SMs)" : "");
    if (p->fp8) {
        unsigned kn = p->fp8_knobs, def = fj_fp8_plan_knobs_default(p);
        char words[48] = "";
        snprintf(words, sizeof words, "%s%s%s%s%s%s", kn & FJ_FP8_KNOB_REGS ? " regs" : "",
                 kn & FJ_FP8_KNOB_VT ? " vt" : "", kn & FJ_FP8_KNOB_OSTAGE ? " ostage" : "",
                 kn & FJ_FP8_KNOB_VT4 ? " vt4" : "", kn & FJ_FP8_KNOB_POFF ? " poff" : "",
                 kn & FJ_FP8_KNOB_OCC2 ? " occ2" : "");
        fj_buf_printf(out, "%sFP8 knobs (fp8_ws.h):%s (%s)\n", pf, kn ? words : " none",
                      kn == def ? (c->head_dim == 256 && FJ_FP8_D256_FA3 && (kn & FJ_FP8_KNOB_VT4) ? "the D256 default: FlashAttention-3's "
                                                                           "register split, the V transpose on four "
                                                                           "warps (lean at 24 registers), O staged in "
                                                                           "the V ring, P against m - 8"
                                                                         : c->head_dim != 256 && (kn & FJ_FP8_KNOB_REGS)
                                                                             ? "the default: FlashAttention-3's register "
                                                                               "split for a tile this wide"
                                                                             : "the default")
                                : "FAJIT_FP8_KNOBS, not the default");
    }
    if (p->fp8)
        fj_buf_printf(out, "%sMMA (FP8): S = QK^T: %d x wgmma.m64n%dk32.f32.e4m3.e4m3 (Q, K from smem, K-major); O += "
                           "PV: %d x wgmma.m64n%dk32 (P e4m3 from registers in fj_fp8_p_key's k order, B = Vt from smem, "
                           "K-major in %d-byte boxes: producer warps %d-%d transpose each V tile into the Vt ring at +%d "
                           "with ldmatrix.trans + prmt + stmatrix; VT full / empty mbarriers at +%d); O %s, %d B rows\n",
                      pf, p->k_steps_qk, c->block_n, p->k_steps_pv, c->head_dim, p->vt_swizzle, 1 - p->fp8_vt4,
                      p->transpose_warps - p->fp8_vt4, p->vt_off, p->vt_bar, fj_out_dtype_ptx(p), p->o_row_bytes);
    else
        fj_buf_printf(out, "%sMMA: S = QK^T: %d x wgmma.m64n%dk16.f32.%s.%s (A = Q and B = K from smem, both K-major); "
                           "O += PV: %d x wgmma.m64n%dk16 (A = P from registers, B = V from smem, N-major, transB = 1)\n",
                      pf, p->k_steps_qk, c->block_n, dt, dt, p->k_steps_pv, c->head_dim);
    fj_buf_printf(out, "%sfragment layout: each consumer warp holds 16 rows of its warpgroup's 64 in the m16n8 C layout "
                       "(lane = 4g + t: rows g and g+8, columns 2t, 2t+1 of each n8 block); row max/sum reduce over the "
                       "quad (shfl.bfly 1, 2); P re-packed into A fragments from the S accumulators\n",
                  pf);
    fj_buf_printf(out, "%sTMA: 4-D tensor maps (head_dim, seqlen, heads, batch) in the parameter block; boxes of %d "
                       "columns (%d B, swizzle %d B) x %d rows (Q) / %d rows (K, V), %d per tile; rows past seqlen are "
                       "zero-filled; descriptors: SBO %d B, %s\n",
                  pf, p->tma_box_cols, c->swizzle, c->swizzle, c->block_m, c->block_n, p->tma_boxes, 8 * c->swizzle,
                  "V's LBO = one box (block_n x swizzle bytes)");
    fj_buf_printf(out, "%smbarriers at +%d (8 B each): Q full[b] (count 1: the producer's arrive.expect_tx, + %d bytes "
                       "from the copy engine) and Q empty[b] (count %d: lane 0 of each consumer warp, as soon as the work "
                       "tile's last S = QK^T has completed, so the next Q loads under the last softmax, PV and "
                       "epilogue) for %s; both used "
                       "every %s, so their parity is %s. Per "
                       "stage s: K full[s], V full[s] (count 1 + %d bytes), K empty[s], V empty[s] (count %d). The "
                       "ring runs on across work tiles: its u-th KV tile overall uses stage u %% %d in pass u / %d; "
                       "consumers wait for the full barriers' phase of that pass (parity (u / %d) & 1), the producer "
                       "for the empty barriers' previous phase (parity ((u / %d) & 1) ^ 1; the first pass does not "
                       "wait)\n",
                  pf, p->bar_off, p->q_bytes, 4 * p->consumer_wgs,
                  p->q_bufs == 2 ? "Q buffer b = round % 2 (round: the CTA's work tiles counted from 0)"
                                 : "the one Q buffer (b = 0; round: the CTA's work tiles counted from 0)",
                  p->q_bufs == 2 ? "second round" : "round",
                  p->q_bufs == 2 ? "(round / 2) & 1" : "round & 1", p->kv_tile_bytes, 4 * p->consumer_wgs, c->stages,
                  c->stages, c->stages, c->stages);
    if (fj_ws_o_in_regs(p))
        fj_buf_printf(out, "%sepilogue: O x 1/l and LSE per row, O stored from registers (a split's fp32 partials, a "
                           "packed tile's rows of several heads: no TMA box fits them, so no staging buffer is "
                           "planned)\n",
                      pf);
    else if (p->o_stage == 2)
        fj_buf_printf(out, "%sepilogue: O x 1/l and LSE per row; no staging buffer fits beside Q and the K/V ring, so O is "
                           "staged in the V ring: %s, write O there in the TMA box layout, and thread 0 of each issues one TMA store "
                           "(%d-row box; rows past seqlen are not written), waits until it has read the ring and "
                           "arrives on O free (mbarrier at +%d, count %d); the producer waits for O free before each "
                           "work tile's first V load (parity (round - 1) & 1), so the next tile's Q and first K load "
                           "under the epilogue but its first V after it\n",
                      pf,
                      p->fp8 ? "each consumer warpgroup, past its wait for the work tile's last VT full (the "
                               "transposers, V's only readers, are done with it)"
                             : "the consumer warpgroups meet at named barrier 7 (every last PV has read V)",
                      64, fj_ws_bar(p, FJ_BAR_O_FREE, 0), p->consumer_wgs);
    else if (p->o_stage)
        fj_buf_printf(out, "%sepilogue: O x 1/l and LSE per row, O written to the staging buffer in the TMA box layout, "
                           "then one TMA store per consumer warpgroup (%d-row box; rows past seqlen are not written), "
                           "waited for only before the buffer's next use or the exit\n",
                      pf, 64);
    else if (p->fp8)
        fj_buf_printf(out, "%sepilogue: O x 1/l and LSE per row, O stored from registers (no staging buffer fits beside "
                           "Q and the K, V and Vt rings%s; rows past seqlen are not written)\n",
                      pf, p->fp8_knobs & FJ_FP8_KNOB_OSTAGE ? ", and the V ring holds fewer rows than O" : ", and the "
                                                             "ostage knob is off");
    else
        fj_buf_printf(out, "%sepilogue: O x 1/l and LSE per row, O stored from registers (no staging buffer fits beside "
                           "Q and the K/V ring, and the V ring holds fewer than %d rows; rows past seqlen are not "
                           "written)\n",
                      pf, c->block_m);
    if (fj_sm90_cross_tile(p))
        fj_buf_printf(out, "%scross-tile tail (cross_tile, text \" xt\"): when the CTA has a next work tile, its last KV tile's PV "
                           "goes to the tensor cores in one ping-pong turn with the next work tile's first S = QK^T "
                           "(after waiting for that tile's Q and first K), this tile's epilogue and the next tile's "
                           "decode run under that S, and the next tile joins the KV loop at its softmax; else the plain "
                           "tail\n",
                      pf);
}

/* ---- thread geometry and descriptor bases ------------------------------------------------------ */
static void geometry_sm90(fj_kctx *k)
{
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1), w = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "thread geometry: row_base = 64 * wg + 16 * (warp %% 4) + lane / 4, col_base = 2 * (lane %% 4)");
    fj_ins(k->e, "mov.u32 %s, %%tid.x", R(t));
    fj_ins(k->e, "shr.u32 %s, %s, 5", R(w), R(t));
    fj_ins(k->e, "and.b32 %s, %s, 3", R(w), R(w));
    fj_ins(k->e, "and.b32 %s, %s, 31", R(t), R(t));
    fj_ins(k->e, "and.b32 %s, %s, 3", R(k->col_base_s), R(t));
    fj_ins(k->e, "shl.b32 %s, %s, 1", R(k->col_base_s), R(k->col_base_s));
    fj_ins(k->e, "shr.u32 %s, %s, 2", R(t), R(t));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 16, %s", R(t), R(w), R(t));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 64, %s", R(k->row_base), R(k->wg), R(t));
}

/* A 64-bit descriptor base: (addr >> 4) | lbo << 16 | (sbo >> 4) << 32 | mode << 62, addr a register; rows of
 * `sw` bytes (the swizzle span), SBO = 8 rows. */
static fj_reg_t desc_base_sw(fj_kctx *k, fj_reg_t addr, int lbo_field, int sw)
{
    unsigned long long hi = (unsigned long long)((8 * sw) >> 4) | ((unsigned long long)swizzle_mode(sw) << 30);
    unsigned long long bits = (hi << 32) | ((unsigned long long)lbo_field << 16);
    fj_reg_t a = fj_alloc(k->e, k->b_r, 1), d = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(a), R(addr));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(d), R(a));
    fj_ins(k->e, "or.b64 %s, %s, 0x%016llX", R(d), R(d), bits);
    return d;
}

static fj_reg_t desc_base(fj_kctx *k, fj_reg_t addr, int lbo_field)
{
    return desc_base_sw(k, addr, lbo_field, k->p->cfg.swizzle);
}

static void setup_sm90(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int w = p->cfg.swizzle;
    geometry_sm90(k);
    fj_reg_t lt = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mov.u32 %s, %%tid.x", R(lt));
    fj_ins(k->e, "and.b32 %s, %s, 127", R(lt), R(lt));
    fj_ins(k->e, "setp.eq.u32 %s, %s, 0", R(k->wg_leader), R(lt));
    fj_comment(k->e, 2, "wgmma descriptors: start address >> 4 (bits 0-13), LBO >> 4 (16-29), SBO >> 4 = %d (32-45), "
                        "swizzle mode %d (62-63); each wgmma adds its tile's offset >> 4",
               (8 * w) >> 4, swizzle_mode(w));
    k->bk[BK_DESC_K] = desc_base(k, k->smem, 1);
    if (p->fp8) /* Vt: K-major like K, rows of block_n bytes in boxes of vt_swizzle bytes */
        k->bk[BK_DESC_V] = desc_base_sw(k, k->smem, 1, p->vt_swizzle);
    else
        k->bk[BK_DESC_V] = desc_base(k, k->smem, p->cfg.block_n * w >> 4);
    k->bk[BK_DESC_Q] = fj_alloc(k->e, k->b_rd, 1);
}

/* The O staging addresses of this thread (computed per work tile in the epilogue, not kept live across
 * the KV loop): warpgroup c's 64 rows at o_off + c * 64 * row_bytes as tma_boxes boxes of [64][W]; row r,
 * 16-byte chunk c at r * W + ((c ^ x) << 4) with x = (r * W >> 7) & (W / 16 - 1), the TMA swizzle. x is
 * the same for rows r and r + 8, so one lane address L = (row r + 4 t) ^ (x << 4) serves both. */
static void o_stage_addresses(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int w = p->cfg.swizzle;
    fj_reg_t r = fj_alloc(k->e, k->b_r, 1), x = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_r, 1);
    k->bk[BK_O_WG] = fj_alloc(k->e, k->b_addr, 1);
    k->bk[BK_O_LANE] = fj_alloc(k->e, k->b_addr, 1);
    k->bk[BK_EPI_BAR] = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BK_O_WG]), R(k->wg), 64 * p->o_row_bytes, R(k->smem));
    fj_ins(k->e, "add.u32 %s, %s, %d", R(k->bk[BK_O_WG]), R(k->bk[BK_O_WG]), p->o_off);
    fj_ins(k->e, "and.b32 %s, %s, 63", R(r), R(k->row_base));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(x), R(r), w);
    fj_ins(k->e, "shr.u32 %s, %s, 7", R(x), R(x));
    fj_ins(k->e, "and.b32 %s, %s, %d", R(x), R(x), w / 16 - 1);
    fj_ins(k->e, "shl.b32 %s, %s, 4", R(x), R(x));
    fj_ins(k->e, "shl.b32 %s, %s, 1", R(t), R(k->col_base_o)); /* 2 t columns = 4 t bytes */
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BK_O_LANE]), R(r), w, R(k->bk[BK_O_WG]));
    fj_ins(k->e, "add.u32 %s, %s, %s", R(k->bk[BK_O_LANE]), R(k->bk[BK_O_LANE]), R(t));
    fj_ins(k->e, "xor.b32 %s, %s, %s", R(k->bk[BK_O_LANE]), R(k->bk[BK_O_LANE]), R(x));
    fj_ins(k->e, "add.u32 %s, %s, %d", R(k->bk[BK_EPI_BAR]), R(k->wg), FJ_SM90_EPI_BAR0);
}

/* The Q descriptor of this warpgroup's 64 rows in the work tile's Q buffer. */
static void tile_start_sm90(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t qa = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(qa), R(k->wg), 64 * p->cfg.swizzle, R(k->q_buf));
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(qa), R(qa));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(k->bk[BK_DESC_Q]), R(qa));
    fj_ins(k->e, "add.s64 %s, %s, %s", R(k->bk[BK_DESC_Q]), R(k->bk[BK_DESC_Q]), R(k->bk[BK_DESC_K]));
    if (p->q_off) fj_ins(k->e, "add.s64 %s, %s, %d", R(k->bk[BK_DESC_Q]), R(k->bk[BK_DESC_Q]), p->q_off >> 4);
}

/* ---- MMA ------------------------------------------------------------------------------------- */
/* "%acc0, %acc1, ..." for n registers from r. */
static void reg_list(fj_kctx *k, fj_reg_t r, int n, fj_buf *out)
{
    for (int i = 0; i < n; i++) fj_buf_printf(out, "%s%s", i ? ", " : "", R(fj_at(r, i)));
}

/* d = base + off >> 4 (off a multiple of 16). */
static fj_reg_t desc_at(fj_kctx *k, fj_reg_t base, int off)
{
    fj_reg_t d = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "add.s64 %s, %s, %d", R(d), R(base), off >> 4);
    return d;
}

/* The descriptor base of a K or V stage: the tile's own (an immediate stage, slot >= 0), or with FJ_SLOT_RING
 * (the rolled loop) the base plus the stage's offset held in `ring` (stage x kv_tile_bytes / 16). */
static fj_reg_t stage_base(fj_kctx *k, fj_reg_t base, int slot, fj_reg_t ring)
{
    if (slot != FJ_SLOT_RING) return base;
    fj_reg_t d = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "add.s64 %s, %s, %s", R(d), R(base), R(ring));
    return d;
}

/* FP8 S = Q K^T: wgmma k32 steps of 32 bytes along the rows of Q and K (both K-major, boxes of the swizzle span). */
static void mma_qk_fp8(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    int w = p->cfg.swizzle, bc = p->cfg.block_n, tile = p->k_off + (slot == FJ_SLOT_RING ? 0 : slot) * p->kv_tile_bytes;
    fj_reg_t kbase = stage_base(k, k->bk[BK_DESC_K], slot, k->ring_desc_k);
    fj_buf acc;
    fj_buf_init(&acc);
    reg_list(k, k->acc_s, bc / 2, &acc);
    fj_ins(k->e, PTX_WGMMA_FENCE);
    for (int ks = 0; ks < p->k_steps_qk; ks++) {
        int col = 32 * ks, box = col / w, inner = col % w;
        fj_reg_t da = desc_at(k, k->bk[BK_DESC_Q], box * p->cfg.block_m * w + inner);
        fj_reg_t db = desc_at(k, kbase, tile + box * bc * w + inner);
        fj_ins(k->e, PTX_WGMMA_SS_E4M3, bc, acc.data ? acc.data : "", R(da), R(db), ks ? 1 : 0);
    }
    fj_ins(k->e, PTX_WGMMA_COMMIT);
    fj_buf_free(&acc);
}

/* FP8 O += P Vt: P's A fragments (k order fj_fp8_p_key, fp8_layout.h) and Vt [head_dim][block_n] K-major in boxes
 * of vt_swizzle bytes; k32 steps of 32 keys. */
static void mma_pv_fp8(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    int wv = p->vt_swizzle, d = p->cfg.head_dim, tile = p->vt_off + (slot == FJ_SLOT_RING ? 0 : slot) * p->kv_tile_bytes;
    fj_reg_t vbase = stage_base(k, k->bk[BK_DESC_V], slot, k->ring_desc_v); /* (Vt's tiles: the K / V tiles' size) */
    fj_buf acc;
    fj_buf_init(&acc);
    reg_list(k, k->acc_o, d / 2, &acc);
    fj_ins(k->e, PTX_WGMMA_FENCE);
    for (int ks = 0; ks < p->k_steps_pv; ks++) {
        int key = 32 * ks, box = key / wv, inner = key % wv;
        fj_reg_t a = fj_at(k->frag_p, 4 * ks);
        fj_reg_t db = desc_at(k, vbase, tile + box * d * wv + inner);
        fj_ins(k->e, PTX_WGMMA_RS_E4M3, d, acc.data ? acc.data : "", R(a), R(fj_at(a, 1)), R(fj_at(a, 2)),
               R(fj_at(a, 3)), R(db));
    }
    fj_ins(k->e, PTX_WGMMA_COMMIT);
    fj_buf_free(&acc);
}

static void mma_qk_sm90(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    if (p->fp8) {
        mma_qk_fp8(k, slot);
        return;
    }
    const char *dt = fj_dtype_ptx(p);
    int w = p->cfg.swizzle, bc = p->cfg.block_n, tile = p->k_off + (slot == FJ_SLOT_RING ? 0 : slot) * p->kv_tile_bytes;
    fj_reg_t kbase = stage_base(k, k->bk[BK_DESC_K], slot, k->ring_desc_k);
    fj_buf acc;
    fj_buf_init(&acc);
    reg_list(k, k->acc_s, bc / 2, &acc);
    fj_ins(k->e, PTX_WGMMA_FENCE);
    for (int ks = 0; ks < p->k_steps_qk; ks++) {
        int col = 16 * ks, box = col / p->tma_box_cols, inner = 2 * (col % p->tma_box_cols);
        fj_reg_t da = desc_at(k, k->bk[BK_DESC_Q], box * p->cfg.block_m * w + inner);
        fj_reg_t db = desc_at(k, kbase, tile + box * bc * w + inner);
        fj_ins(k->e, PTX_WGMMA_SS, bc, dt, dt, acc.data ? acc.data : "", R(da), R(db), ks ? 1 : 0, 0);
    }
    fj_ins(k->e, PTX_WGMMA_COMMIT);
    fj_buf_free(&acc);
}

static void mma_pv_sm90(fj_kctx *k, int slot, int keys)
{
    const fj_plan *p = k->p;
    const char *dt = fj_dtype_ptx(p);
    (void)keys; /* no warp pairs on this path: always all keys */
    if (p->fp8) {
        mma_pv_fp8(k, slot);
        return;
    }
    int w = p->cfg.swizzle, tile = p->v_off + (slot == FJ_SLOT_RING ? 0 : slot) * p->kv_tile_bytes;
    fj_reg_t vbase = stage_base(k, k->bk[BK_DESC_V], slot, k->ring_desc_v);
    fj_buf acc;
    fj_buf_init(&acc);
    reg_list(k, k->acc_o, p->cfg.head_dim / 2, &acc);
    fj_ins(k->e, PTX_WGMMA_FENCE);
    for (int ks = 0; ks < p->k_steps_pv; ks++) {
        fj_reg_t a = fj_at(k->frag_p, 4 * ks);
        fj_reg_t db = desc_at(k, vbase, tile + ks * 16 * w);
        fj_ins(k->e, PTX_WGMMA_RS, p->cfg.head_dim, dt, dt, acc.data ? acc.data : "", R(a), R(fj_at(a, 1)),
               R(fj_at(a, 2)), R(fj_at(a, 3)), R(db), 1, 1);
    }
    fj_ins(k->e, PTX_WGMMA_COMMIT);
    fj_buf_free(&acc);
}

static void mma_wait_sm90(fj_kctx *k, int pending) { fj_ins(k->e, PTX_WGMMA_WAIT, pending); }

/* P's A fragments: 16-bit pairs (the m16n8 repack), or FP8 bytes (fp8_ws.c). */
static void pack_p_sm90(fj_kctx *k)
{
    if (k->p->fp8) fj_fp8_emit_pack_p(k);
    else fj_emit_pack_p_m16n8(k);
}

/* ---- epilogue store --------------------------------------------------------------------------- */
/* O (normalized f32 accumulators) -> packed pairs in the warpgroup's staging region, in the TMA box
 * layout; thread 0 of the warpgroup then stores the boxes with TMA (rows past Nq are not written).
 * Own buffer (o_stage 1): it goes on without waiting; the next work tile's epilogue waits for the reads
 * of this one's store before it writes the region again. In the V ring (o_stage 2): the warpgroups first
 * wait for each other (every last PV has read V), and thread 0 waits for its store's reads and then
 * arrives on O free, which the producer waits for before it loads V again. Without either: st.global
 * from registers. */
static void store_o_sm90(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int w = p->cfg.swizzle, box_bytes = 64 * w;
    if (!fj_ws_o_staged(p)) {
        fj_emit_store_o_m16n8(k);
        return;
    }
    o_stage_addresses(k);
    if (p->o_stage == 2 && !p->fp8) {
        fj_comment(k->e, 1, "O -> this warpgroup's rows of the V ring, once every consumer warpgroup's last PV has "
                            "read V (the producer loads no V until O free), then one TMA store");
        fj_ins(k->e, "bar.sync %d, %d", FJ_SM90_CONSUMERS_BAR, 128 * p->consumer_wgs);
    } else if (p->o_stage == 2) {
        fj_comment(k->e, 1, "FP8: O -> this warpgroup's rows of the V ring: only the transposers read V, and this "
                            "warpgroup has waited for the work tile's last VT full, so they are done with every V "
                            "of it (the producer loads no V until O free); its last store has read the rows");
        fj_ins(k->e, "bar.sync %s, 128", R(k->bk[BK_EPI_BAR]));
    } else {
        fj_comment(k->e, 1, "O -> this warpgroup's staging region (its last TMA store has read it), then one TMA store");
        fj_ins(k->e, "@%s " PTX_BULK_WAIT_READ, R(k->wg_leader), 0);
        fj_ins(k->e, "bar.sync %s, 128", R(k->bk[BK_EPI_BAR]));
    }
    fj_reg_t v = fj_alloc(k->e, k->b_r, 1), a = fj_alloc(k->e, k->b_addr, 1);
    for (int r = 0; r < k->frag.rows; r++)
        for (int i = 0; i < p->n_frags_o; i++) {
            int col = 8 * i, box = col / p->o_box_cols, c = (col % p->o_box_cols) / 8;
            fj_reg_t o0 = fj_at(k->acc_o, k->frag.o_reg(p, r, 2 * i));
            fj_ins(k->e, PTX_CVT_PACK, fj_out_dtype_ptx(p), R(v), R(fj_at(o0, 1)), R(o0));
            fj_reg_t addr = k->bk[BK_O_LANE];
            if (c) {
                fj_ins(k->e, "xor.b32 %s, %s, %d", R(a), R(k->bk[BK_O_LANE]), c << 4);
                addr = a;
            }
            fj_ins(k->e, "st.shared.b32 [%s+%d], %s", R(addr), box * box_bytes + k->frag.row_off(p, r) * w, R(v));
        }
    fj_ins(k->e, PTX_FENCE_PROXY_ASYNC_SMEM);
    fj_ins(k->e, "bar.sync %s, 128", R(k->bk[BK_EPI_BAR]));
    char skip[48];
    /* cross-tile: the next work tile's S may be in flight, so no divergent branch here (ptxas would serialize every
     * wgmma of the kernel: C7518); the store is predicated on the leader instead */
    int xt = fj_sm90_cross_tile(p);
    char lp[40] = "";
    if (xt) snprintf(lp, sizeof lp, "@%s ", R(k->wg_leader));
    fj_label_new(k->e, "no_store", skip, sizeof skip);
    if (!xt) fj_ins(k->e, "@!%s bra %s", R(k->wg_leader), skip);
    fj_reg_t map = fj_alloc(k->e, k->b_rd, 1), row = fj_alloc(k->e, k->b_r, 1), col = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mov.u64 %s, " FJ_FWD_PARAM_NAME, R(map));
    fj_ins(k->e, PTX_CVTA_PARAM, R(map), R(map));
    fj_ins(k->e, "add.u64 %s, %s, %d", R(map), R(map), (int)offsetof(fj_fwd_params_tma, tmap_o));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 64, %s", R(row), R(k->wg), R(k->m0));
    fj_reg_t seq = k->b;
    if (p->variant & FJ_VARIANT_VARLEN) {
        seq = fj_alloc(k->e, k->b_r, 1);
        fj_seqlen_tma_store_coords(k, row, seq);
    }
    for (int box = 0; box < p->o_boxes; box++) {
        fj_ins(k->e, "mov.u32 %s, %d", R(col), box * p->o_box_cols);
        fj_ins(k->e, "%s" PTX_TMA_STORE_4D, lp, R(map), R(col), R(row), R(k->h), R(seq), R(k->bk[BK_O_WG]),
               box * box_bytes);
    }
    fj_ins(k->e, "%s" PTX_BULK_COMMIT, lp);
    if (p->o_stage == 2) {
        fj_comment(k->e, 1, "the store has read the V ring: O free for the producer");
        fj_ins(k->e, PTX_BULK_WAIT_READ, 0);
        fj_ins(k->e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_O_FREE, 0));
    }
    fj_label(k->e, skip);
}

/* Before the warpgroup leaves: its TMA stores have finished (their smem is read and their writes done). */
static void finish_sm90(fj_kctx *k)
{
    if (k->p->o_stage) fj_ins(k->e, "@%s " PTX_BULK_WAIT, R(k->wg_leader), 0);
}

/* The warp-specialized protocol on sm_90a: wgmma groups as the MMA event, the role bodies of sm90_roles.c. */
static const fj_async_proto async_sm90 = {
    .roles = fj_sm90_roles,
    .role_body = fj_sm90_role_body,
    .mma_wait = mma_wait_sm90,
    .mma_commit = NULL, /* FJ_MMA_EVENT_GROUP: the wgmma groups are counted, no barrier tracks them */
    .tile_start = tile_start_sm90,
    .finish = finish_sm90,
};

const fj_backend fj_backend_sm90 = {
    .name = "sm90a-wgmma",
    .required_caps = FJ_CAP_WGMMA | FJ_CAP_TMA | FJ_CAP_SETMAXNREG,
    .tiles = tiles_sm90,
    .smem_map = smem_map_sm90,
    .plan = plan_sm90,
    .describe = describe_sm90,
    .frag_desc = fj_frag_desc_m16n8,
    .setup = setup_sm90,
    .geometry = geometry_sm90,
    .mma_qk = mma_qk_sm90,
    .pack_p = pack_p_sm90,
    .mma_pv = mma_pv_sm90,
    .store_o = store_o_sm90,
    .async = &async_sm90,
    .env_words = env_words_sm90,
};
