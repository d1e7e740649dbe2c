/*
 * plan.c - config -> plan: the rules every config must follow, and what they imply.
 *
 * The arch-neutral rules (tile shapes, head dims, smem budget) are checked here; the backend of the
 * config's arch path adds its own (copy layout, register budget). Every failure names the field, the
 * value and the rule, with the arithmetic where there is some.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "fp8_ws.h"
#include "kv8_frag.h"
#include "base/error.h"
#include "sched.h"
#include "sm100.h"

#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)

const fj_backend *fj_backend_of(fajit_arch path)
{
    switch (path) {
    case FAJIT_ARCH_SM80: return &fj_backend_sm80;
    case FAJIT_ARCH_SM90A: return &fj_backend_sm90;
    case FAJIT_ARCH_SM100A: return &fj_backend_sm100;
    default: return NULL;
    }
}

static fajit_status check_arch(const fajit_config *c, fj_plan *p)
{
    if (c->arch == FAJIT_ARCH_AUTO)
        return CFG_FAIL("arch = auto: a checked config names its path (sm_80, sm_90a or sm_100a); "
                        "fajit_config_fill() picks one");
    p->arch = fj_arch_of_path(c->arch);
    if (!p->arch) return CFG_FAIL("arch = %d: not a code-generation path (use 80, 90 or 100)", (int)c->arch);
    p->backend = fj_backend_of(c->arch);
    if (!p->backend)
        return fj_fail(FAJIT_ERR_UNSUPPORTED,
                       "arch = %s: this backend is not implemented yet; the sm_80 path (mma.sync, every GPU from "
                       "sm_80) and the sm_90a path (wgmma, H100/H200) are; the sm_80 PTX assembles for sm_100a",
                       p->arch->name);
    if ((p->arch->caps & p->backend->required_caps) != p->backend->required_caps)
        return fj_fail(FAJIT_ERR_INTERNAL, "backend %s needs capabilities %s lacks", p->backend->name, p->arch->name);
    return FAJIT_OK;
}

static int swizzle_mask(int swizzle)
{
    switch (swizzle) {
    case FAJIT_SWIZZLE_NONE: return 0;
    case 32: return 1;
    case 64: return 3;
    case 128: return 7;
    default: return -1;
    }
}

/* Rules every path shares: dtype, head dim, block_n, stages, mask, the swizzle span against a row. The
 * path's own (warps, block_m, column split, schedule flags) are its backend's `tiles` hook. */
/* FP8 (fajit.h: kv_dtype, out_dtype): E4M3 Q/K/V on the sm_90a path at head_dim 64, 128 or 256 with O in BF16 or
 * F16; an E4M3 K/V cache under F16 / BF16 queries. Neither has kernels yet: FAJIT_ERR_UNSUPPORTED once the
 * config is otherwise valid. */
static fajit_status check_fp8(const fajit_config *c)
{
    fajit_dtype kv = fj_config_kv_dtype(c), out = fj_config_out_dtype(c);
    if (c->kv_dtype != 0 && c->kv_dtype != c->dtype && c->kv_dtype != FAJIT_DTYPE_E4M3)
        return CFG_FAIL("kv_dtype = %d: must be 0 (K/V are dtype) or e4m3 (3, an FP8 K/V cache)", (int)c->kv_dtype);
    if (c->dtype == FAJIT_DTYPE_E4M3) {
        if (out != FAJIT_DTYPE_BF16 && out != FAJIT_DTYPE_F16)
            return CFG_FAIL("out_dtype = %d with dtype e4m3: O must be bf16 (2, or 0) or f16 (1)", (int)c->out_dtype);
        if (c->arch != FAJIT_ARCH_SM90A)
            return CFG_FAIL("dtype = e4m3 on the %s path: FP8 kernels are built for sm_90a only (wgmma e4m3, H100 / "
                            "H200); the sm_80 path has no FP8 mma.sync (sm_89's e4m3 mma.sync is not built)",
                            fj_arch_path_name(c->arch));
        if (c->head_dim != 64 && c->head_dim != 128 && c->head_dim != 256)
            return CFG_FAIL("head_dim = %d with dtype e4m3: FP8 kernels take head_dim 64, 128 or 256", c->head_dim);
    } else if (c->out_dtype != 0 && out != c->dtype) {
        return CFG_FAIL("out_dtype = %d with dtype %s: O is the dtype of Q (0 or %d); out_dtype chooses O's dtype "
                        "for e4m3 inputs only", (int)c->out_dtype, c->dtype == FAJIT_DTYPE_F16 ? "f16" : "bf16",
                        (int)c->dtype);
    }
    (void)kv;
    return FAJIT_OK;
}

/* An FP8 K/V cache (kv_dtype e4m3 under f16 / bf16 queries) runs on the sm_80 path's kernels (sm80.c widens the
 * e4m3 tiles in shared memory), without attention variants, with 2+ stages. */
static fajit_status check_kv8(const fajit_config *c)
{
    if (c->arch != FAJIT_ARCH_SM80)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "kv_dtype e4m3 on the %s path: the FP8 K/V cache kernels are the sm_80 "
                                              "path's (they run on sm_80 and every later GPU); use arch sm_80",
                       fj_arch_path_name(c->arch));
    if (c->mods)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "kv_dtype e4m3 with attention variants (mods = %d): the FP8 K/V cache "
                                              "kernels take none yet", c->mods);
    if (c->stages < 2)
        return CFG_FAIL("stages = %d with kv_dtype e4m3: the FP8 K/V cache kernels widen a tile while the next "
                        "one lands, so they need 2+ stages", c->stages);
    return FAJIT_OK;
}

static fajit_status check_fp8_built(const fajit_config *c)
{
    if (c->dtype == FAJIT_DTYPE_E4M3) return FAJIT_OK; /* the sm_90a FP8 kernels (fp8_ws.c) */
    return fj_config_kv_dtype(c) == FAJIT_DTYPE_E4M3 ? check_kv8(c) : FAJIT_OK;
}

static fajit_status check_shape(const fajit_config *c, fj_plan *p)
{
    if (c->dtype != FAJIT_DTYPE_F16 && c->dtype != FAJIT_DTYPE_BF16 && c->dtype != FAJIT_DTYPE_E4M3)
        return CFG_FAIL("dtype = %d: must be f16 (1), bf16 (2) or e4m3 (3)", (int)c->dtype);
    fajit_status st = check_fp8(c);
    if (st != FAJIT_OK) return st;
    if (c->head_dim != 64 && c->head_dim != 96 && c->head_dim != 128 && c->head_dim != 192 && c->head_dim != 256)
        return CFG_FAIL("head_dim = %d: must be 64, 96, 128, 192 or 256", c->head_dim);
    if (c->block_n < 16 || c->block_n > 256 || c->block_n % 16 != 0)
        return CFG_FAIL("block_n (--bc) = %d: must be a multiple of 16 in 16..256", c->block_n);
    if (c->stages < 1 || c->stages > 4) return CFG_FAIL("stages = %d: must be 1..4", c->stages);
    if (c->causal != 0 && c->causal != 1) return CFG_FAIL("causal = %d: must be 0 or 1", c->causal);
    p->swz_mask = swizzle_mask(c->swizzle);
    if (p->swz_mask < 0)
        return CFG_FAIL("swizzle = %d: must be none (%d), 32, 64 or 128 bytes", c->swizzle, FAJIT_SWIZZLE_NONE);
    int chunks = c->head_dim / 8;
    if (chunks % (p->swz_mask + 1) != 0)
        return CFG_FAIL("swizzle = %d: it permutes groups of %d 16-byte chunks, but a head_dim %d row has %d "
                        "chunks (%d B), not a multiple; use a smaller swizzle",
                        c->swizzle, p->swz_mask + 1, c->head_dim, chunks, c->head_dim * 2);
    if (c->overlap < -1 || c->overlap > 1) return CFG_FAIL("overlap = %d: must be 1 (on), -1 (off) or 0 (pick)", c->overlap);
    if (c->pingpong < -1 || c->pingpong > 1)
        return CFG_FAIL("pingpong = %d: must be 1 (on), -1 (off) or 0 (pick)", c->pingpong);
    if (c->roll < -1 || c->roll > 1)
        return CFG_FAIL("roll = %d: must be 1 (one KV loop body for every stage), -1 (one per stage) or 0 (default)",
                        c->roll);
    if (c->sched < -1 || c->sched > 1)
        return CFG_FAIL("sched = %d: must be 1 (lpt: the dynamic longest-first work-tile schedule), -1 or 0 (static)",
                        c->sched);
    if (c->cross_tile < -1 || c->cross_tile > 1)
        return CFG_FAIL("cross_tile = %d: must be 1 (a work tile's last PV beside the next one's first S), -1 or 0 (off)",
                        c->cross_tile);
    if (c->accurate < -1 || c->accurate > 1)
        return CFG_FAIL("accurate = %d: must be 1 (the reference max follows a heavy new row max), -1 or 0 (off)",
                        c->accurate);
    if (c->accurate == 1 && (c->dtype == FAJIT_DTYPE_E4M3 || fj_config_kv_dtype(c) == FAJIT_DTYPE_E4M3))
        return CFG_FAIL("accurate = 1 with e4m3 %s: the accurate softmax is measured for 16-bit P only (FP8 rounds P "
                        "to e4m3, whose error it does not address); use 0",
                        c->dtype == FAJIT_DTYPE_E4M3 ? "Q, K, V" : "K / V");
    p->overlap = c->overlap == 1;
    p->pingpong = c->pingpong == 1;
    if (c->mods & ~FAJIT_MOD_ALL)
        return CFG_FAIL("mods = 0x%x: unknown bits (FAJIT_MOD_WINDOW 1, SOFTCAP 2, SINKS 4, ALIBI 8, CHUNK 16)",
                        (unsigned)c->mods);
    return FAJIT_OK;
}

/* Attention variants: their parameter block after the kernel's own (kernel_abi.h). */
static void plan_mods_params(fj_plan *p)
{
    if (!p->cfg.mods) return;
    p->mods_off = (p->params_bytes + 7) / 8 * 8;
    p->params_bytes = p->mods_off + (int)sizeof(fj_fwd_params_mods);
}

/* FP8 K/V: the descales' block after the others (kernel_abi.h). */
static void plan_fp8_params(fj_plan *p)
{
    if (!p->kv8 && !p->fp8) return;
    p->fp8_off = (p->params_bytes + 7) / 8 * 8;
    p->params_bytes = p->fp8_off + (int)sizeof(fj_fwd_params_fp8);
}

/* Registers the score-changing variants (all but SINKS, which works in the epilogue) add to an sm_80 plan:
 * the local range keeps one more tile bound live, ALiBi the rows' slopes, and their per-tile arithmetic
 * changes ptxas's schedule. ptxas 13.0 -arch=sm_90 on the default d128 br128 bc64 s2 tile (model 239) spilled
 * 20-120 bytes with softcap, ALiBi or chunk (0 with the window alone); so a plan must leave this many free.
 * The heuristic (config.c) then takes a 64-row tile for those variants. */
#define FJ_MODS_REGS_SM80 17
/* The sm_90a consumers: the d64 br192 tile (model 160 of its 160 setmaxnreg budget) spilled 4-36 bytes with
 * softcap, ALiBi or all variants (ptxas 13.0); d96 br192 (152) and every 128-row tile (d64-d256) did not. */
#define FJ_MODS_REGS_WS 8

static fajit_status plan_mods_regs(fj_plan *p)
{
    if (!(p->cfg.mods & ~FAJIT_MOD_SINKS)) return FAJIT_OK;
    int extra = p->ws ? FJ_MODS_REGS_WS : FJ_MODS_REGS_SM80;
    p->reg_misc += extra;
    p->reg_total += extra;
    if (p->reg_total + p->reg_headroom > p->reg_limit)
        return CFG_FAIL("registers: about %d per thread with the attention variant's %d (window / chunk bounds, softcap, "
                        "ALiBi) exceed %d; lower block_m or block_n",
                        p->reg_total + p->reg_headroom, extra, p->reg_limit);
    return FAJIT_OK;
}

void fj_plan_smem_map(fj_plan *p)
{
    const fj_backend *b = fj_backend_of(p->cfg.arch);
    p->smem_bytes = 0;
    p->kv8 = fj_config_kv_dtype(&p->cfg) == FAJIT_DTYPE_E4M3; /* its map differs (sm80.c) */
    p->kv8_direct = 0; /* the widening kernel's map (kv8direct's is smaller: fj_kv8_direct_plan) */
    if (b) b->smem_map(p);
}

int fj_plan_smem_limit(const fj_plan *p)
{
    int arch = fj_arch_path_smem_max(p->cfg.arch), ctas = fj_plan_ctas_per_sm(p);
    if (ctas == 1) return arch;
    int share = FJ_SM90_SMEM_PER_SM / ctas - 1024; /* the CTAs share an SM's 228 KiB, less 1 KiB the hardware keeps for each */
    return share < arch ? share : arch;
}

static fajit_status map_smem(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    fj_plan_smem_map(p);
    int limit = fj_plan_smem_limit(p);
    if (p->smem_bytes > limit) {
        char extra[64] = "";
        if (p->xchg_warp_bytes)
            snprintf(extra, sizeof extra, " + warp-pair exchange %d x %d", c->warps, p->xchg_warp_bytes);
        if (p->n_bars) snprintf(extra, sizeof extra, " + %d mbarriers x 8", p->n_bars);
        if (p->min_ctas > 1)
            return CFG_FAIL("smem %d B (Q %d + K,V %d stages x 2 x %d%s) exceeds %d B, the most each of two CTAs on an SM "
                            "has (FP8 knob occ2, fp8_ws.h); lower stages or block_n",
                            p->smem_bytes, p->q_bytes, c->stages, p->kv_tile_bytes, extra, limit);
        return CFG_FAIL("smem %d B (Q %d + K,V %d stages x 2 x %d%s) exceeds %d B, the most any GPU running %s code "
                        "has; lower stages, block_n or block_m",
                        p->smem_bytes, p->q_bytes, c->stages, p->kv_tile_bytes, extra, limit, p->arch->name);
    }
    return FAJIT_OK;
}

/* The plan of cfg before a decode variant or the schedule's slots (fj_plan_build, fj_plan_build_variant). */
static fajit_status plan_core(const fajit_config *cfg, unsigned variant, fj_plan *p)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->variant_wanted = variant;
    fajit_status st;
    if ((st = check_arch(cfg, p)) != FAJIT_OK) return st;
    if ((st = check_shape(cfg, p)) != FAJIT_OK) return st;
    if ((st = check_fp8_built(cfg)) != FAJIT_OK) return st;
    p->kv8 = fj_config_kv_dtype(cfg) == FAJIT_DTYPE_E4M3;
    if ((st = p->backend->tiles(p)) != FAJIT_OK) return st;
    p->threads = cfg->warps * 32;
    p->n_frags_s = cfg->block_n / 8 / p->col_warps;
    p->n_frags_o = cfg->head_dim / 8 / p->col_warps;
    p->k_steps_qk = cfg->head_dim / 16;
    p->k_steps_pv = cfg->block_n / 16;
    if ((st = map_smem(p)) != FAJIT_OK) return st;
    if ((st = p->backend->plan(p)) != FAJIT_OK) return st;
    if (p->backend->async) p->backend->async->roles(p);
    plan_mods_params(p);
    plan_fp8_params(p);
    return plan_mods_regs(p);
}

/* The dynamic schedule's work-tile slots (sched.c: the tile of each round, from the producer to the consumers). */
static fajit_status plan_lpt_slots(fj_plan *p)
{
    p->sched_off = (p->smem_bytes + 15) / 16 * 16;
    p->smem_bytes = p->sched_off + FJ_SCHED_SLOT_BYTES * FJ_SCHED_SLOTS;
    if (p->smem_bytes > fj_plan_smem_limit(p))
        return CFG_FAIL("smem %d B with the lpt schedule's %d work-tile slots exceeds %d B; lower stages or block_n",
                        p->smem_bytes, FJ_SCHED_SLOTS, fj_plan_smem_limit(p));
    return FAJIT_OK;
}

fajit_status fj_plan_build(const fajit_config *cfg, fj_plan *p)
{
    if (!cfg || !p) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    fajit_status st = plan_core(cfg, 0, p);
    if (st != FAJIT_OK || !p->lpt) return st;
    if ((st = plan_lpt_slots(p)) != FAJIT_OK) return st;
    if (p->backend->async) p->backend->async->roles(p); /* again: after the slots */
    return FAJIT_OK;
}

/* ---- decode variants ---------------------------------------------------------------------------- */

/* Registers a decode variant adds to the model: it keeps the split's first tile live and adds per-tile
 * address and length arithmetic (lengths and pages are re-read per tile, not kept live). Sized from
 * nvJitLink for sm_90 (what the library compiles with): the causal d128 br128 bc64 s2 kernel (model 239)
 * spills 8-24 bytes with any variant, d128 br64 and every other default tile of the sm_80 table does not;
 * so configs above 255 - 17 are refused for the variants and the runtime takes a 64-row tile instead. */
#define FJ_VARIANT_REGS 17
/* GATHER's per-segment page lookups on top (a segment's K and V addresses live through its copy passes).
 * ptxas 13.0 for sm_90a over d64-d256 x br64 w4 / br128 w8 / br128 w4 x block_n 16-128 x 1-4 stages x both
 * masks (split + packgqa + paged + gather): with 0 or 8 more, 3 tiles at the 255 edge spilled 4-52 bytes
 * (d64 br64 bc128 s3, d192 br64 bc64 s3, d256 br128 w8 bc64 s2), with 16 two of them; with 24 none of the
 * 246 that plan does (d128 br64 bc64 s3 / s4 causal are refused: the runtime then takes the s2 tile). */
#define FJ_VARIANT_GATHER_REGS 24
/* AHEAD's registers: the next tile's page(s) live across an iteration (1, gathered 1 per segment a thread
 * copies), and ptxas schedules the address work differently. ptxas 13.0 for sm_90a over 309 tiles (d64-d256 x
 * br64 w4 / br128 w8 / br128 w4 x block_n 32-128 x 2-4 stages x both masks, split + packgqa + paged +
 * gather + ahead; and seqlens + split + paged + ahead at d64/128/256, block_n 64/128, 2-3 stages): the 11
 * that spilled (4-28 bytes) had a model of 233-248 with the other variants' registers, none at or below
 * 232 did. With 23 more those are refused; the runtime then reads each tile's pages at its copy (decode.c).
 * Checked again with the kept registers and next-tile pointers: of 810 tiles (d64-d256 x the 3 layouts x
 * block_n 32/64/128 x 2-4 stages x both masks x gathered + packed / packed / per-sequence), the 317 that
 * plan with AHEAD spill 0 (ptxas 13.0, sm_90a; the widest at 255 registers). Gathered, AHEAD also keeps each
 * segment's row in its page (page_row, 1-4 more): of the 61 tiles that plan with split + packgqa + paged +
 * gather + ahead (d64-d256 x the 3 layouts x block_n 32/64/128 x 2-4 stages x both masks), none spills with
 * ptxas 13.0 -arch=sm_90 or sm_80 on the sm_80 PTX, the widest at 247 registers (243 before page_row). */
#define FJ_VARIANT_AHEAD_REGS 23

/* The warp-specialized (sm_90a) kernel's decode variants: seqlens_k, split-KV, GQA packing of group x Nq <=
 * block_m rows (one row block; the runtime's rule) and paged K/V (TMA boxes from the pool's pages, sm90_roles.c),
 * all run on the H200. Their registers: the per-tile sequence length, kept across the KV loop for
 * the mask, and the split index, live in the tile head and the epilogue only (the page lookups are the producer's,
 * under its own setmaxnreg budget). */
#define FJ_VARIANT_WS_OK                                                                                                 \
    (FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED | FJ_VARIANT_VARLEN |                 \
     FJ_VARIANT_VARLEN_K | FJ_VARIANT_LPT)
#define FJ_VARIANT_WS_REGS 4
/* Varlen (seqlen.c) on top: sm_80 re-reads the sequence's bounds where it uses them (the mask, the epilogue), as the
 * per-sequence KV length; sm_90a consumers keep the query length live across the KV loop beside the KV length. */
#define FJ_VARIANT_VARLEN_REGS 2

/* Variant bits that do not go together (FAJIT_ERR_INTERNAL: the runtime never asks for them). */
static fajit_status varlen_rules(unsigned variant)
{
    if ((variant & FJ_VARIANT_VARLEN_K) && !(variant & FJ_VARIANT_VARLEN))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: varlen keys without varlen queries", variant);
    if ((variant & FJ_VARIANT_VARLEN_K) && (variant & FJ_VARIANT_PAGED))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: varlen keys with paged K/V (pages are the keys)", variant);
    if ((variant & FJ_VARIANT_VARLEN) &&
        (variant & (FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD)))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: varlen goes without split-KV, GQA packing, gathered "
                                           "pages and pages read ahead (not built)", variant);
    if ((variant & FJ_VARIANT_LPT) && !(variant & FJ_VARIANT_VARLEN))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: the longest-first schedule (lpt) is varlen's", variant);
    return FAJIT_OK;
}

int fj_ws_page_fits(int page_size, int block_n)
{
    int box = page_size < block_n ? page_size : block_n;
    return !page_size || (block_n > 0 && (page_size % block_n == 0 || block_n % page_size == 0) && box <= 256);
}

/* The combine kernel's plan: only dtype and head_dim of the config count; 4 warps, one row each. */
static fajit_status plan_combine(const fajit_config *cfg, fj_plan *p)
{
    fajit_config c = {0};
    c.arch = FAJIT_ARCH_SM80;
    c.dtype = cfg->dtype;
    c.head_dim = cfg->head_dim;
    c.warps = FJ_COMBINE_WARPS;
    p->cfg = c;
    p->arch = fj_arch_of_path(FAJIT_ARCH_SM80);
    p->backend = &fj_backend_sm80;
    if (c.dtype != FAJIT_DTYPE_F16 && c.dtype != FAJIT_DTYPE_BF16)
        return CFG_FAIL("dtype = %d: must be f16 (1) or bf16 (2)", (int)c.dtype);
    if (c.head_dim != 64 && c.head_dim != 96 && c.head_dim != 128 && c.head_dim != 192 && c.head_dim != 256)
        return CFG_FAIL("head_dim = %d: must be 64, 96, 128, 192 or 256", c.head_dim);
    p->variant = FJ_VARIANT_COMBINE;
    p->threads = 32 * FJ_COMBINE_WARPS;
    p->params_bytes = (int)sizeof(fj_fwd_params_decode);
    p->params_align = 8;
    return FAJIT_OK;
}

/* sm_100a's decode variants: what the frame gives them and what its role bodies (sm100_roles.c) lack, per bit asked.
 * The frame's tile schedule (ws_frame.c fj_ws_decode_tile) already decodes split ranges, seqlens_k lengths, packed
 * heads and varlen tiles, as for sm_90a; the sm_100a bodies read the dense parameter block and walk the dense work
 * tile, and none of their decode parts exists (not generated, so not checked by ptxas or the simulator). */
static fajit_status sm100_variant_fail(const fj_plan *p, unsigned variant)
{
    static const struct {
        unsigned bit;
        const char *what;
    } k_missing[] = {
        {FJ_VARIANT_SEQLENS, "seqlens: the roles' KV range and the softmax's mask from the sequence's length"},
        {FJ_VARIANT_SPLIT, "split: the epilogue's partial O and LSE to the workspace"},
        {FJ_VARIANT_PACK, "packgqa: the load's packed Q rows and the epilogue's row-to-head stores"},
        {FJ_VARIANT_PAGED, "paged: the load's TMA boxes from the block table's pages"},
        {FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD, "gather / ahead: page segments and pages read a tile ahead"},
        {FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K | FJ_VARIANT_LPT, "varlen / lpt: per-sequence Q / K maps and the "
                                                                   "dynamic schedule's hand-over"},
        {FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V | FJ_VARIANT_KV8_DIRECT, "kv8: an e4m3 K / V cache"},
    };
    char missing[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < sizeof k_missing / sizeof k_missing[0]; i++)
        if (variant & k_missing[i].bit)
            n += (size_t)snprintf(missing + n, n < sizeof missing ? sizeof missing - n : 0, "%s%s", n ? "; " : "",
                                  k_missing[i].what);
    return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant 0x%x on %s: not built - the warp-specialized frame gives the "
                                          "schedule (split ranges, sequence lengths, packed heads) and the decode "
                                          "parameter block, but the %s role bodies lack %s; the sm_90a and sm_80 "
                                          "kernels take it (fajit_attention_forward falls back to sm_80)",
                   variant, p->arch->name, p->arch->name, missing);
}

fajit_status fj_plan_build_variant(const fajit_config *cfg, unsigned variant, fj_plan *p)
{
    if (variant &
        ~(unsigned)(FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_COMBINE | FJ_VARIANT_PACK | FJ_VARIANT_PAGED |
                    FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD | FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K |
                    FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V | FJ_VARIANT_LPT |
                    FJ_VARIANT_KV8_DIRECT))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: unknown bits", variant);
    if (varlen_rules(variant) != FAJIT_OK) return FAJIT_ERR_INTERNAL;
    if ((variant & FJ_VARIANT_GATHER) && !(variant & FJ_VARIANT_PAGED))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: gather without paged", variant);
    if ((variant & FJ_VARIANT_AHEAD) && !(variant & FJ_VARIANT_PAGED))
        return fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: ahead without paged", variant);
    if (!cfg || !p) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    if (variant & FJ_VARIANT_COMBINE) {
        memset(p, 0, sizeof *p);
        return variant == FJ_VARIANT_COMBINE ? plan_combine(cfg, p)
                                             : fj_fail(FAJIT_ERR_INTERNAL, "plan variant 0x%x: combine alone", variant);
    }
    /* before the plan: a one-stage tile breaks this rule whatever else it breaks */
    if ((variant & FJ_VARIANT_AHEAD) && cfg->stages < 2)
        return CFG_FAIL("stages = %d: pages read ahead (decode variant ahead) need 2+ stages", cfg->stages);
    /* a decode or varlen variant's schedule is its own (its FJ_VARIANT_LPT bit, FAJIT_VARLEN_SCHED), whatever the
     * config's sched says (fajit.h): planned, and named, as sched 0 */
    fajit_config own = *cfg;
    if (variant) own.sched = 0, own.cross_tile = 0; /* (cross_tile likewise: a plain kernel's tail) */
    fajit_status st = variant ? plan_core(&own, variant, p) : fj_plan_build(cfg, p);
    if (st != FAJIT_OK || !variant) return st;
    p->lpt = (variant & FJ_VARIANT_LPT) != 0; /* a decode variant's schedule is its own bit's, not FAJIT_CAUSAL_SCHED's */
    /* FP8 (e4m3 Q, K, V): the shared frame's decode variants (seqlens_k, split-KV, GQA packing, paged K/V); the runtime
     * runs them for e4m3 queries (decode.c fp8_run; test_gpu_fp8 test_fp8_decode) */
    const unsigned fp8_ok = FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K | FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT |
                            FJ_VARIANT_PACK | FJ_VARIANT_PAGED;
    if (p->fp8 && (variant & ~fp8_ok))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant 0x%x with dtype e4m3: the FP8 kernels take varlen batches "
                                              "(cu_seqlens) on the static schedule, seqlens_k, split-KV, GQA packing and "
                                              "paged K/V, and no other decode variant (lpt, gathered pages, pages read "
                                              "ahead)", variant);
    if (p->fp8 && (variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED)) && fj_fp8_vt4_lean(p))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant%s%s with dtype e4m3 at head_dim %d: the lean vt4 producer "
                                              "(24 registers) spills 8-36 bytes with the V-tail fill (ptxas 13.0); FP8 "
                                              "seqlens_k / paged K/V take head_dim 64 and 128 on any tile, 256 on one "
                                              "consumer warpgroup (block_m 64, warps 8: the decode tile up to 64 rows)",
                       variant & FJ_VARIANT_SEQLENS ? " seqlens" : "", variant & FJ_VARIANT_PAGED ? " paged" : "",
                       p->cfg.head_dim);
    if (p->roles.tmem_cols) return sm100_variant_fail(p, variant);
    if (p->ws && (variant & ~(unsigned)FJ_VARIANT_WS_OK))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant%s%s: the %s kernel does not take them yet (it takes "
                                              "seqlens_k, split-KV, GQA packing and paged K/V whole pages or tiles; "
                                              "no gathered segments or pages read ahead); the sm_80 path's "
                                              "does (fajit_attention_forward falls back to it)",
                       variant & FJ_VARIANT_GATHER ? " gather" : "", variant & FJ_VARIANT_AHEAD ? " ahead" : "",
                       p->arch->name);
    if (p->kv8 && !p->fp8 && (variant & (FJ_VARIANT_GATHER | FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K)))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant%s%s with kv_dtype e4m3: the FP8 K/V cache kernels take "
                                              "seqlens_k, split-KV, GQA packing and paged K/V in whole tiles of a page "
                                              "(block_n dividing page_size), not gathered segments or varlen batches yet",
                       variant & FJ_VARIANT_GATHER ? " gather" : "", variant & FJ_VARIANT_VARLEN ? " varlen" : "");
    if (!p->ws && (variant & FJ_VARIANT_LPT))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant lpt: the %s kernel has no persistent loop to schedule (one "
                                              "CTA per row block, handed out by the hardware's block scheduler, the "
                                              "longest first); lpt is the sm_90a kernel's", p->arch->name);
    if ((variant & FJ_VARIANT_LPT) && ((variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED)) || p->cfg.head_dim > 192))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant lpt with %s: the producer's tile search does not fit its "
                                              "24 registers beside %s (ptxas 13.0 spills 8-60 bytes); lpt takes "
                                              "varlen / varlenq alone, head_dim <= 192",
                       p->cfg.head_dim > 192 ? "head_dim 256" : "seqlens / paged",
                       p->cfg.head_dim > 192 ? "the d256 producer's state" : "their page and V-tail state");
    if (!p->kv8 && (variant & (FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V)))
        return fj_fail(FAJIT_ERR_INVALID_CONFIG, "decode variant kv8intk / kv8intv (the integer widening of e4m3 K / V) "
                                                 "without kv_dtype e4m3: there is nothing to widen");
    if (variant & FJ_VARIANT_KV8_DIRECT) {
        if (!p->kv8)
            return fj_fail(FAJIT_ERR_INVALID_CONFIG, "decode variant kv8direct (MMA fragments from the e4m3 K / V tiles) "
                                                     "without kv_dtype e4m3: there are no e4m3 tiles");
        if ((st = fj_kv8_direct_plan(p)) != FAJIT_OK) return st;
    }
    p->variant = variant;
    /* (the rolled default for a variant is sm90.c fj_sm90_rolled's, from plan.variant_wanted) */
    p->params_bytes = (int)(p->ws ? sizeof(fj_fwd_params_tma_decode) : sizeof(fj_fwd_params_decode));
    plan_mods_params(p);
    plan_fp8_params(p);
    if (p->ws && (variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED))) { /* sm90_roles.c: the V tail's zero fill */
        p->vtail_bar = p->smem_bytes;
        p->smem_bytes += 8;
        if (p->smem_bytes > fj_plan_smem_limit(p))
            return CFG_FAIL("smem %d B with the seqlens_k / paged variant's V-tail mbarrier exceeds %d B; lower stages or "
                            "block_n", p->smem_bytes, fj_plan_smem_limit(p));
    }
    if ((variant & FJ_VARIANT_LPT) && (st = plan_lpt_slots(p)) != FAJIT_OK) return st;
    if (p->backend->async) p->backend->async->roles(p); /* again: the V-tail ring */
    int extra = p->ws ? FJ_VARIANT_WS_REGS
                      : FJ_VARIANT_REGS + (variant & FJ_VARIANT_GATHER ? FJ_VARIANT_GATHER_REGS : 0) +
                            (variant & FJ_VARIANT_AHEAD ? FJ_VARIANT_AHEAD_REGS : 0);
    if (variant & FJ_VARIANT_VARLEN) extra += FJ_VARIANT_VARLEN_REGS;
    p->reg_misc += extra;
    p->reg_total += extra;
    if (p->reg_total > p->reg_limit)
        return CFG_FAIL("registers: about %d per thread with the decode variant's %d (split range, per-tile length and "
                        "page arithmetic) exceed %d; lower block_n or block_m",
                        p->reg_total, extra, p->reg_limit);
    fj_kv8_direct_chains(p);
    return FAJIT_OK;
}

int fj_plan_format(const fj_plan *p, char *buf, size_t size)
{
    if (p->variant & FJ_VARIANT_COMBINE)
        return snprintf(buf, size, "%s %s d%d combine", fj_arch_path_name(p->cfg.arch),
                        p->cfg.dtype == FAJIT_DTYPE_F16 ? "f16" : "bf16", p->cfg.head_dim);
    int n = fajit_config_format(&p->cfg, buf, size);
    if (n >= 0 && p->variant)
        n += snprintf(buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0,
                      "%s%s%s%s%s%s%s%s%s%s%s%s", p->variant & FJ_VARIANT_SEQLENS ? " seqlens" : "",
                      p->variant & FJ_VARIANT_SPLIT ? " split" : "", p->variant & FJ_VARIANT_PACK ? " packgqa" : "",
                      p->variant & FJ_VARIANT_PAGED ? " paged" : "", p->variant & FJ_VARIANT_GATHER ? " gather" : "",
                      p->variant & FJ_VARIANT_AHEAD ? " ahead" : "", p->variant & FJ_VARIANT_VARLEN ? " varlen" : "",
                      p->variant & FJ_VARIANT_VARLEN_K ? " varlenk" : "",
                      p->variant & FJ_VARIANT_KV8_INT_K ? " kv8intk" : "", p->variant & FJ_VARIANT_KV8_INT_V ? " kv8intv" : "",
                      p->variant & FJ_VARIANT_LPT ? " lpt" : "",
                      p->variant & FJ_VARIANT_KV8_DIRECT ? " kv8direct" : "");
    if (n >= 0 && p->backend && p->backend->env_words)
        n += p->backend->env_words(p, buf + ((size_t)n < size ? (size_t)n : size), (size_t)n < size ? size - (size_t)n : 0);
    return n;
}

const char *fj_plan_entry(const fj_plan *p)
{
    return p->variant & FJ_VARIANT_COMBINE ? FJ_COMBINE_KERNEL_NAME : FJ_FWD_KERNEL_NAME;
}

void fj_plan_for_target(fj_plan *p, const fj_arch_info *target)
{
    fj_kv8_for_target(p, target);
    if (!target || !(target->caps & FJ_CAP_GRIDDEP) || !(p->variant & (FJ_VARIANT_SPLIT | FJ_VARIANT_COMBINE))) return;
    if (!(p->arch->caps & FJ_CAP_GRIDDEP)) p->arch = target; /* the sm_80 path's portable PTX: the device's row */
    p->griddep = 1;
}

fajit_status fj_plan_check_target(const fj_plan *p, const fj_arch_info *target)
{
    if (!p->min_target_sm || target->sm >= p->min_target_sm) return FAJIT_OK;
    char text[160];
    fajit_config_format(&p->cfg, text, sizeof text);
    return fj_fail(FAJIT_ERR_UNSUPPORTED,
                   "target %s: config \"%s\" needs sm_%d or newer: about %d registers per thread + headroom %d = %d "
                   "with a causal mask exceed %d, what the mask's register allocation below sm_%d holds without "
                   "spilling (ptxas keeps the KV range in vector registers there); build for sm_%d+, or lower block_n "
                   "or block_m",
                   target->name, text, p->min_target_sm, p->reg_total, p->reg_headroom, p->reg_total + p->reg_headroom,
                   p->min_target_regs, p->min_target_sm, p->min_target_sm);
}
