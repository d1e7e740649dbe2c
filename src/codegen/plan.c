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
#include "runtime/error.h"

#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)

const fj_backend *fj_backend_of(fajit_arch path)
{
    switch (path) {
    case FAJIT_ARCH_SM80: return &fj_backend_sm80;
    case FAJIT_ARCH_SM90A: return &fj_backend_sm90;
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
static fajit_status check_shape(const fajit_config *c, fj_plan *p)
{
    if (c->dtype != FAJIT_DTYPE_F16 && c->dtype != FAJIT_DTYPE_BF16)
        return CFG_FAIL("dtype = %d: must be f16 (1) or bf16 (2)", (int)c->dtype);
    if (c->head_dim != 64 && c->head_dim != 96 && c->head_dim != 128 && c->head_dim != 192 && c->head_dim != 256)
        return CFG_FAIL("head_dim = %d: must be 64, 96, 128, 192 or 256", c->head_dim);
    if (c->block_n < 16 || c->block_n > 256 || c->block_n % 16 != 0)
        return CFG_FAIL("block_n = %d: must be a multiple of 16 in 16..256", c->block_n);
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
    p->overlap = c->overlap == 1;
    p->pingpong = c->pingpong == 1;
    return FAJIT_OK;
}

void fj_plan_smem_map(fj_plan *p)
{
    const fj_backend *b = fj_backend_of(p->cfg.arch);
    p->smem_bytes = 0;
    if (b) b->smem_map(p);
}

static fajit_status map_smem(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    fj_plan_smem_map(p);
    int limit = fj_arch_path_smem_max(c->arch);
    if (p->smem_bytes > limit) {
        char extra[64] = "";
        if (p->xchg_warp_bytes)
            snprintf(extra, sizeof extra, " + warp-pair exchange %d x %d", c->warps, p->xchg_warp_bytes);
        if (p->n_bars) snprintf(extra, sizeof extra, " + %d mbarriers x 8", p->n_bars);
        return CFG_FAIL("smem %d B (Q %d + K,V %d stages x 2 x %d%s) exceeds %d B, the most any GPU running %s code "
                        "has; lower stages, block_n or block_m",
                        p->smem_bytes, p->q_bytes, c->stages, p->kv_tile_bytes, extra, limit, p->arch->name);
    }
    return FAJIT_OK;
}

fajit_status fj_plan_build(const fajit_config *cfg, fj_plan *p)
{
    if (!cfg || !p) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    fajit_status st;
    if ((st = check_arch(cfg, p)) != FAJIT_OK) return st;
    if ((st = check_shape(cfg, p)) != FAJIT_OK) return st;
    if ((st = p->backend->tiles(p)) != FAJIT_OK) return st;
    p->threads = cfg->warps * 32;
    p->n_frags_s = cfg->block_n / 8 / p->col_warps;
    p->n_frags_o = cfg->head_dim / 8 / p->col_warps;
    p->k_steps_qk = cfg->head_dim / 16;
    p->k_steps_pv = cfg->block_n / 16;
    if ((st = map_smem(p)) != FAJIT_OK) return st;
    return p->backend->plan(p);
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
