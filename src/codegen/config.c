/*
 * config.c - the public config calls: check, canonical text, and the heuristic that fills zeros.
 *
 * The heuristic is a table per head dim (the defaults measured best on an H100 for the sm_80 path,
 * see bench/results/), then shrunk until the plan fits the device's shared memory.
 */
#include <stdio.h>
#include <string.h>

#include "codegen.h"
#include "runtime/error.h"
#include "runtime/tune.h"

fajit_status fajit_config_check(const fajit_config *cfg)
{
    fj_plan plan;
    fj_clear_error();
    return fj_plan_build(cfg, &plan);
}

static const char *dtype_name(fajit_dtype d)
{
    return d == FAJIT_DTYPE_F16 ? "f16" : d == FAJIT_DTYPE_BF16 ? "bf16" : "auto";
}

int fajit_config_format(const fajit_config *c, char *buf, size_t size)
{
    if (!c) return snprintf(buf, size, "(null)");
    char sw[16];
    if (c->swizzle == FAJIT_SWIZZLE_NONE) snprintf(sw, sizeof sw, "none");
    else snprintf(sw, sizeof sw, "%d", c->swizzle);
    char cw[16] = "";
    if (c->col_warps > 1) snprintf(cw, sizeof cw, " cw%d", c->col_warps);
    return snprintf(buf, size, "%s %s d%d br%d bc%d s%d sw%s w%d%s %s", fj_arch_path_name(c->arch),
                    dtype_name(c->dtype), c->head_dim, c->block_m, c->block_n, c->stages, sw, c->warps, cw,
                    c->causal ? "causal" : "noncausal");
}

/* Defaults of the sm_80 path per head dim and mask: block_m, block_n, warps, stages. Measured on an
 * H100 (bench/sweep.sh, BF16, B*N = 16384, H*D = 2048; bench/results/h100-sweep-2026-11-22.md).
 * Two 16-row fragments per warp (block_m = 32 * warps) halve the K/V shared-memory reads per MMA.
 * Non-causal d128 takes br128 bc64 s2 (FlashAttention-2's shape) since codegen 7 fits it in 255
 * registers: +4% to +5% over br128 bc32 (bench/results/h100-ab-bc64-2026-11-22.md). Causal d128 takes
 * it too since codegen 8, whose KV range lives in uniform registers (ptxas's sm_90 allocation has no
 * spills with the mask; bench/results/h100-ab-causal-bc64-2026-11-22.md).
 * d96 and d192 were not swept: they take the shape of their neighbours. */
typedef struct sm80_default {
    int head_dim, causal, block_m, block_n, warps, stages, col_warps;
} sm80_default;

static const sm80_default k_sm80_defaults[] = {
    {64, 0, 128, 64, 4, 2, 1},  {64, 1, 128, 64, 4, 2, 1},  {96, 0, 128, 32, 4, 2, 1}, {96, 1, 64, 64, 4, 3, 1},
    {128, 0, 128, 64, 4, 2, 1}, {128, 1, 128, 64, 4, 2, 1}, {192, 0, 64, 64, 4, 1, 1}, {192, 1, 64, 64, 4, 1, 1},
    {256, 0, 64, 64, 4, 1, 2},  {256, 1, 64, 64, 4, 1, 1},
};

static void fill_sm80(fajit_config *c, const fajit_shape *shape)
{
    const sm80_default *d = &k_sm80_defaults[4];
    for (size_t i = 0; i < sizeof k_sm80_defaults / sizeof k_sm80_defaults[0]; i++)
        if (k_sm80_defaults[i].head_dim == c->head_dim && k_sm80_defaults[i].causal == c->causal)
            d = &k_sm80_defaults[i];
    if (!c->col_warps) c->col_warps = c->warps && c->warps < d->col_warps ? 1 : d->col_warps;
    int cw = c->col_warps > 0 ? c->col_warps : 1; /* the check reports a bad one */
    if (!c->warps) {
        c->warps = d->warps < cw ? cw : d->warps;
        /* a given block_m decides the warps: whole 16-row fragments per warp row, at most 2 per warp */
        while (c->block_m && c->warps > cw && c->block_m % (16 * c->warps / cw) != 0) c->warps /= 2;
        while (c->block_m && c->warps < 8 && c->block_m / (16 * c->warps / cw) > 2) c->warps *= 2;
    }
    int rows16 = 16 * (c->warps / cw > 0 ? c->warps / cw : 1); /* rows of one 16-row fragment per warp row */
    if (!c->block_m) {
        c->block_m = d->block_m;
        /* short queries: do not waste a CTA on rows that do not exist */
        if (shape && shape->seqlen_q > 0 && shape->seqlen_q <= 64 && 64 % rows16 == 0) c->block_m = 64;
        if (c->block_m % rows16 != 0 || c->block_m / rows16 > 2) c->block_m = rows16;
    }
    if (!c->block_n) c->block_n = d->block_n;
    if (!c->stages) c->stages = d->stages;
    if (!c->swizzle) {
        /* the largest span whose chunk group divides the part of a row one warp reads (half with pairs) */
        int chunks = c->head_dim / 8 / cw;
        c->swizzle = chunks % 8 == 0 ? 128 : chunks % 4 == 0 ? 64 : 32;
    }
}

/* Shrink stages, then block_n, until the smem map fits `limit` bytes (only fields the caller left 0). */
static void fit_smem(fajit_config *c, const fajit_config *given, int limit)
{
    for (;;) {
        fj_plan map;
        map.cfg = *c;
        fj_plan_smem_map(&map);
        if (map.smem_bytes <= limit) return;
        if (!given->stages && c->stages > 1) c->stages--;
        else if (!given->block_n && c->block_n > 16) c->block_n /= 2;
        else return; /* the check reports it */
    }
}

fajit_status fajit_config_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg)
{
    fj_clear_error();
    if (!cfg) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    const fajit_config given = *cfg;
    const fj_arch_info *device = ctx ? fj_arch_find(fajit_context_sm(ctx)) : NULL;
    if (cfg->head_dim == 0) cfg->head_dim = 128;
    if (cfg->dtype == FAJIT_DTYPE_AUTO) cfg->dtype = FAJIT_DTYPE_BF16;
    /* Only the sm_80 path is implemented; its PTX runs on every GPU from sm_80 up. */
    if (cfg->arch == FAJIT_ARCH_AUTO) cfg->arch = FAJIT_ARCH_SM80;
    fj_tune_fill(ctx, shape, cfg); /* zero fields from the tuned winner of the shape's class, if any */
    if (cfg->arch == FAJIT_ARCH_SM80) fill_sm80(cfg, shape);
    const fj_arch_info *target = fj_arch_of_path(cfg->arch);
    /* the device's own limit when there is one (an H100 gives sm_80 code 227 KB), else the portable one */
    int limit = device ? device->smem_per_block : target ? target->smem_per_block : 0;
    if (limit) fit_smem(cfg, &given, limit);
    fj_plan plan;
    return fj_plan_build(cfg, &plan);
}
