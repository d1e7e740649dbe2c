/*
 * forward.c - fajit_attention_forward: argument checks, config choice, parameter block, launch.
 *
 * Every argument is checked before any driver call, with a message naming the field, the value and the
 * rule. Without a config, the heuristic (fajit_config_fill) runs once per shape class and context; the
 * chosen config and its kernel are then reused, so a steady stream of calls costs one lookup each.
 */
#include "forward.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "checked.h"
#include "context.h"
#include "decode.h"
#include "base/error.h"
#include "fp8_args.h"
#include "policy.h"
#include "tensor_map.h"
#include "variants.h"

#define LOG2E 1.4426950408889634

/* ---------------------------------------------------------------------------------------------------
 * Strides for the two contiguous layouts
 * ------------------------------------------------------------------------------------------------- */
/* Products of caller sizes are checked: a shape whose strides do not fit in 64 bits (possible only with
 * fields the forward refuses anyway, e.g. head_dim = INT_MAX) gets FJ_STRIDE_OVERFLOW in every stride,
 * which check_strides refuses with a message saying so (fajit.h). */
static void strides_poison(fajit_attention_args *a)
{
    for (int i = 0; i < 3; i++)
        a->q_stride[i] = a->k_stride[i] = a->v_stride[i] = a->o_stride[i] = FJ_STRIDE_OVERFLOW;
}

/* s = {n1 * n2 * d, n2 * d, d}: 0, or 1 on overflow */
static int strides_of(int64_t s[3], int64_t n1, int64_t n2, int64_t d)
{
    s[2] = d;
    return fj_mul_i64(n2, d, &s[1]) || fj_mul_i64(n1, s[1], &s[0]);
}

void fajit_args_set_bhnd_strides(fajit_attention_args *a)
{
    if (!a) return;
    /* [B, H, N, D]: batch = H * N * D, head = N * D, sequence = D */
    if (strides_of(a->q_stride, a->heads_q, a->seqlen_q, a->head_dim) ||
        strides_of(a->k_stride, a->heads_kv, a->seqlen_k, a->head_dim)) {
        strides_poison(a);
        return;
    }
    memcpy(a->o_stride, a->q_stride, sizeof a->o_stride);
    memcpy(a->v_stride, a->k_stride, sizeof a->v_stride);
}

void fajit_args_set_bnhd_strides(fajit_attention_args *a)
{
    if (!a) return;
    /* [B, N, H, D]: batch = N * H * D, sequence = H * D, head = D */
    int64_t q[3], k[3];
    if (strides_of(q, a->seqlen_q, a->heads_q, a->head_dim) || strides_of(k, a->seqlen_k, a->heads_kv, a->head_dim)) {
        strides_poison(a);
        return;
    }
    const int64_t qs[3] = {q[0], q[2], q[1]}, ks[3] = {k[0], k[2], k[1]};
    memcpy(a->q_stride, qs, sizeof qs);
    memcpy(a->o_stride, qs, sizeof qs);
    memcpy(a->k_stride, ks, sizeof ks);
    memcpy(a->v_stride, ks, sizeof ks);
}

/* ---------------------------------------------------------------------------------------------------
 * Validation
 * ------------------------------------------------------------------------------------------------- */
static const char *dtype_name(fajit_dtype t)
{
    return t == FAJIT_DTYPE_F16    ? "f16"
           : t == FAJIT_DTYPE_BF16 ? "bf16"
           : t == FAJIT_DTYPE_E4M3 ? "e4m3"
           : t == FAJIT_DTYPE_AUTO ? "auto"
                                   : "?";
}

static fajit_status check_at_least(const char *field, int value, int min)
{
    if (value >= min) return FAJIT_OK;
    return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s = %d: must be >= %d", field, value, min);
}

/* dtype, sizes, head_dim, GQA grouping, grid limits, causal, scale. */
static fajit_status check_shape(const fajit_attention_args *a)
{
    fajit_status st;
    if (a->dtype != FAJIT_DTYPE_F16 && a->dtype != FAJIT_DTYPE_BF16 && a->dtype != FAJIT_DTYPE_E4M3)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->dtype = %d (%s): must be FAJIT_DTYPE_F16 (1), "
                                                   "FAJIT_DTYPE_BF16 (2) or FAJIT_DTYPE_E4M3 (3)",
                       (int)a->dtype, dtype_name(a->dtype));
    if ((st = check_at_least("batch", a->batch, 1)) || (st = check_at_least("heads_q", a->heads_q, 1)) ||
        (st = check_at_least("heads_kv", a->heads_kv, 1)) || (st = check_at_least("seqlen_q", a->seqlen_q, 1)) ||
        (st = check_at_least("seqlen_k", a->seqlen_k, 1)))
        return st;
    int d = a->head_dim;
    if (d != 64 && d != 96 && d != 128 && d != 192 && d != 256)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->head_dim = %d: must be one of 64, 96, 128, 192, 256", d);
    if (a->heads_q % a->heads_kv != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->heads_q = %d, heads_kv = %d: heads_q must be a multiple of "
                                                   "heads_kv (each K/V head serves heads_q / heads_kv query heads)",
                       a->heads_q, a->heads_kv);
    if (a->heads_q > FJ_GRID_YZ_MAX)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->heads_q = %d: must be <= %d (it is the grid's y dimension)",
                       a->heads_q, FJ_GRID_YZ_MAX);
    if (a->batch > FJ_GRID_YZ_MAX)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->batch = %d: must be <= %d (it is the grid's z dimension)",
                       a->batch, FJ_GRID_YZ_MAX);
    long long rows = (long long)a->batch * a->heads_q; /* <= 65535 x 65535 */
    if (rows > FJ_QUERY_ROWS_MAX / a->seqlen_q)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->batch = %d, heads_q = %d, seqlen_q = %d: %lld x %d query "
                                                   "rows, more than %lld (the kernels index rows with 32 bits)",
                       a->batch, a->heads_q, a->seqlen_q, rows, a->seqlen_q, FJ_QUERY_ROWS_MAX);
    if (a->causal != 0 && a->causal != 1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->causal = %d: must be 0 or 1", a->causal);
    if (!isfinite(a->softmax_scale) || a->softmax_scale < 0.0f)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT,
                       "args->softmax_scale = %g: must be finite and >= 0 (0 means 1/sqrt(%d); a negative scale "
                       "would turn masked scores into +inf)",
                       (double)a->softmax_scale, d);
    return FAJIT_OK;
}

static fajit_status check_pointer(const char *field, uint64_t p, unsigned align, int required)
{
    if (p == 0 && required)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s = 0: a device pointer is required", field);
    if (p % align != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s = 0x%" PRIx64 ": must be %u-byte aligned (it is %" PRIu64
                                                   " bytes past a multiple of %u)",
                       field, p, align, p % align, align);
    return FAJIT_OK;
}

/* One tensor's strides: >= 0, multiples of `align` elements (16-byte rows: 8 for f16 / bf16, 16 for e4m3), rows
 * of at least head_dim elements, and for the output no zero stride over a dimension of extent > 1 (rows would be
 * written twice). */
static fajit_status check_strides(const char *name, const int64_t s[3], int head_dim, const int extent[3], int out,
                                  int align)
{
    static const char *const dims[3] = {"batch", "head", "sequence"};
    int64_t span = head_dim, part = 0;
    int first = extent[0] < 0 ? 1 : 0; /* extent[0] < 0: packed (varlen), stride[0] not read */
    for (int i = first; i < 3; i++)
        if (s[i] == FJ_STRIDE_OVERFLOW)
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s_stride[%d] = INT64_MIN: the stride helper found that "
                                                       "this shape's strides overflow 64 bits (fajit_args_set_bhnd_"
                                                       "strides / _bnhd_strides mark them so); check batch, heads, "
                                                       "seqlen and head_dim",
                           name, i);
    for (int i = first; i < 3; i++) {
        if (s[i] < 0 || s[i] % align != 0)
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s_stride[%d] = %" PRId64 ": the %s stride must be a "
                                                       "non-negative multiple of %d elements (16-byte rows%s)",
                           name, i, s[i], dims[i], align, align == 16 ? " of e4m3" : "");
        if (out && s[i] == 0 && extent[i] > 1)
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s_stride[%d] = 0 with %s extent %d: output rows would "
                                                       "overlap",
                           name, i, dims[i], extent[i]);
    }
    for (int i = 0; i < 3; i++) /* the last element's offset, in bytes: 2 x (sum of stride x (extent - 1) + D) */
        if (fj_mul_i64(s[i], extent[i] > 0 ? extent[i] - 1 : 0, &part) || fj_add_i64(span, part, &span) ||
            span > FJ_TENSOR_SPAN_MAX / 2)
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s_stride = {%" PRId64 ", %" PRId64 ", %" PRId64 "} with "
                                                       "extents {%d, %d, %d}: the last element would lie more than "
                                                       "2^62 bytes past args->%s",
                           name, s[0], s[1], s[2], extent[0], extent[1], extent[2], name);
    if (s[2] < head_dim)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args->%s_stride[2] = %" PRId64 ": the sequence stride must be at "
                                                   "least head_dim (%d) elements; for contiguous tensors call "
                                                   "fajit_args_set_bhnd_strides() or fajit_args_set_bnhd_strides()",
                       name, s[2], head_dim);
    return FAJIT_OK;
}

static fajit_status check_memory(const fajit_attention_args *a)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    /* packed queries: cu_seqlens_q (or cu_seqlens_k alone, which fj_decode_validate refuses with its own message) */
    const int eq[3] = {d.cu_seqlens_q || d.cu_seqlens_k ? -1 : a->batch, a->heads_q, a->seqlen_q};
    const int ek[3] = {d.cu_seqlens_k ? -1 : a->batch, a->heads_kv, a->seqlen_k};
    fajit_status st;
    if ((st = check_pointer("q", a->q, 16, 1)) || (st = check_pointer("k", a->k, 16, 1)) ||
        (st = check_pointer("v", a->v, 16, 1)) || (st = check_pointer("o", a->o, 16, 1)) ||
        (st = check_pointer("lse", a->lse, 4, 0)))
        return st;
    if ((st = check_strides("q", a->q_stride, a->head_dim, eq, 0, fj_fp8_row_align(a, 'q'))) ||
        (st = check_strides("k", a->k_stride, a->head_dim, ek, 0, fj_fp8_row_align(a, 'k'))) ||
        (st = check_strides("v", a->v_stride, a->head_dim, ek, 0, fj_fp8_row_align(a, 'v'))) ||
        (st = check_strides("o", a->o_stride, a->head_dim, eq, 1, fj_fp8_row_align(a, 'o'))))
        return st;
    return FAJIT_OK;
}

/* A given config must be for the same dtype, head_dim and masking as the arguments. */
static fajit_status check_config(const fajit_attention_args *a, const fajit_config *c)
{
    if (c->dtype != a->dtype)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg->dtype = %s but args->dtype = %s: the config must match the "
                                                   "arguments", dtype_name(c->dtype), dtype_name(a->dtype));
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    if (fj_config_kv_dtype(c) != f.kv_dtype || fj_config_out_dtype(c) != f.out_dtype)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg->kv_dtype / out_dtype = %s / %s but the arguments' K/V and O "
                                                   "are %s / %s: the config must match the arguments",
                       dtype_name(fj_config_kv_dtype(c)), dtype_name(fj_config_out_dtype(c)), dtype_name(f.kv_dtype),
                       dtype_name(f.out_dtype));
    if (c->head_dim != a->head_dim)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg->head_dim = %d but args->head_dim = %d: the config must "
                                                   "match the arguments", c->head_dim, a->head_dim);
    if (c->causal != a->causal)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg->causal = %d but args->causal = %d: the config must match "
                                                   "the arguments", c->causal, a->causal);
    if (c->mods != fj_variant_mods(a)) {
        fajit_config want = *c;
        char have[FJ_CONFIG_TEXT_MAX], need[FJ_CONFIG_TEXT_MAX];
        want.mods = fj_variant_mods(a);
        fajit_config_format(c, have, sizeof have);
        fajit_config_format(&want, need, sizeof need);
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg->mods = %d (\"%s\") but the arguments' attention variants need "
                                                   "mods = %d (\"%s\"): the config must match the arguments",
                       c->mods, have, want.mods, need);
    }
    return FAJIT_OK;
}

fajit_status fj_forward_validate(const fajit_attention_args *args, const fajit_config *cfg)
{
    fajit_status st;
    if (!args) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "args = NULL: fajit_attention_forward needs arguments");
    if ((st = check_shape(args)) || (st = fj_fp8_validate(args)) || (st = check_memory(args)) ||
        (st = fj_decode_validate(args)))
        return st;
    if ((st = cfg ? check_config(args, cfg) : FAJIT_OK)) return st;
    if (fj_fp8_any(args))
        return args->dtype == FAJIT_DTYPE_E4M3 ? fj_fp8_unsupported(args) : fj_fp8_kv_unsupported(args);
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Parameters, grid, shape class
 * ------------------------------------------------------------------------------------------------- */
void fj_forward_params(const fajit_attention_args *a, const fj_plan *plan, fj_fwd_params *p)
{
    double scale = a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->head_dim);
    *p = (fj_fwd_params){0};
    p->q = a->q;
    p->k = a->k;
    p->v = a->v;
    p->o = a->o;
    p->lse = a->lse;
    for (int i = 0; i < 3; i++) {
        p->q_stride[i] = a->q_stride[i];
        p->k_stride[i] = a->k_stride[i];
        p->v_stride[i] = a->v_stride[i];
        p->o_stride[i] = a->o_stride[i];
    }
    p->seqlen_q = (uint32_t)a->seqlen_q;
    p->seqlen_k = (uint32_t)a->seqlen_k;
    p->heads_q = (uint32_t)a->heads_q;
    p->group = (uint32_t)(a->heads_q / a->heads_kv);
    p->scale_log2 = plan->cfg.mods ? fj_variant_scale_log2(a, scale) : (float)(scale * LOG2E);
    fj_fwd_params_derive(p, plan->cfg.block_n, plan->copy_rows_per_pass);
    if (a->dtype == FAJIT_DTYPE_E4M3) { /* e4m3 Q, K, V: 1-byte rows (O stays 16-bit) */
        p->q_row_bytes = a->q_stride[2];
        p->k_row_bytes = a->k_stride[2];
        p->v_row_bytes = a->v_stride[2];
        p->k_tile_bytes = plan->cfg.block_n * p->k_row_bytes;
        p->v_tile_bytes = plan->cfg.block_n * p->v_row_bytes;
    }
    if (plan->kv8) { /* FP8 K/V: 1-byte rows, copied kv8_rows_per_pass rows a pass (kv8.c) */
        p->k_row_bytes = a->k_stride[2];
        p->v_row_bytes = a->v_stride[2];
        p->k_tile_bytes = plan->cfg.block_n * p->k_row_bytes;
        p->v_tile_bytes = plan->cfg.block_n * p->v_row_bytes;
        p->k_pass_bytes = plan->kv8_rows_per_pass * p->k_row_bytes;
        p->v_pass_bytes = plan->kv8_rows_per_pass * p->v_row_bytes;
    }
}

/* KV tiles a causal work tile of query block mb visits (fwd_kernel.c's KV range, on the host), for tiles of bm x bn;
 * with a window of `left` keys (-1: none) only those from the block's first row's first key (mask.c's local
 * range). */
static long causal_kv_tiles(const fajit_attention_args *a, long bm, long bn, long left, long mb)
{
    long all = (a->seqlen_k + bn - 1) / bn;
    long last = mb * bm + bm - 1 + (long)a->seqlen_k - a->seqlen_q; /* the block's last row's last key */
    long n = ((last < -1 ? -1 : last) + 1 + bn - 1) / bn;
    if (n > all) n = all;
    if (left < 0) return n;
    long lo = mb * bm + (long)a->seqlen_k - a->seqlen_q - left; /* the block's first row's first key */
    long first = (lo < 0 ? 0 : lo) / bn;
    return n > first ? n - first : 0;
}

/* The static schedule of ws_frame.c (CTA c: tile round * G + c, odd rounds backwards) over G CTAs: the heaviest
 * CTA's work and the mean's, a tile costing its KV tiles plus one for its prologue and epilogue. */
static void static_schedule_load(const fajit_attention_args *a, long bm, long bn, long left, unsigned mblocks,
                                 unsigned tiles, unsigned g, long *worst, long *total)
{
    *worst = *total = 0;
    for (unsigned c = 0; c < g; c++) {
        long sum = 0;
        for (unsigned r = 0;; r++) {
            unsigned t = r * g + (r % 2 ? g - 1 - c : c);
            if (t >= tiles) break;
            sum += causal_kv_tiles(a, bm, bn, left, (long)mblocks - 1 - (long)(t % mblocks)) + 1;
        }
        *total += sum;
        if (sum > *worst) *worst = sum;
    }
}

/* Does the persistent schedule share the causal tiles' uneven work out evenly over G CTAs? The heaviest CTA
 * within 10% of the mean (measured on the H100, persistent launches up to 1.08x over the mean still beat one CTA
 * per tile by 3-10% at N 1k-4k, and 1.5x was 1.5x slower at 16k).
 * Where it does not (its pairing of long and short
 * tiles breaks when a head's query blocks do not line up with the rounds, e.g. 128 blocks on 132 SMs:
 * up to 2x), a launch of one CTA per tile lets the hardware's block scheduler balance instead. */
static int causal_schedule_balances(const fajit_attention_args *a, const fj_plan *plan, unsigned mblocks,
                                    unsigned tiles, unsigned g)
{
    long worst, total;
    static_schedule_load(a, plan->cfg.block_m, plan->cfg.block_n, -1, mblocks, tiles, g, &worst, &total);
    return worst * g <= total + total / 10;
}

/* A causal sliding window's work tiles cost alike except the first window's worth of query blocks, so the static
 * schedule's balance depends on how the tiles fall into rounds, and the dynamic one (lpt) costs a little per work
 * tile (its counter, the slot hand-over). Measured on the H200 (fagen bench, static / lpt, 2-3 interleaved rounds,
 * bench/results/h200-session11-2026-11-27.md): lpt +3-4% at D128 H16 N32k window 4096 (static's heaviest CTA
 * 1.064x the mean, 31 KV tiles a work tile), +20% at D256 B2 H8 N8k window 4096 (1.37x, 40), +1% for GQA B2 N8k
 * windows 2048 / 4096 (1.03x); -1.5% at window 2048 and -3% at 1024 for H16 N32k (1.03x / 1.02x; 17 / 9 tiles),
 * -6% at window 128 (2 tiles). So lpt where static's heaviest CTA exceeds the mean by more than 4% and a work tile
 * averages at least 8 KV tiles. */
int fj_forward_window_lpt(const fajit_attention_args *a, const fajit_config *cfg, int max_ctas)
{
    fj_variant_args v;
    fj_variant_read(a, &v);
    if (!v.window || !a->causal || cfg->arch != FAJIT_ARCH_SM90A || !fj_config_lpt_can(cfg) || cfg->block_m <= 0 ||
        cfg->block_n <= 0)
        return 0;
    long left = v.window_left >= 0 && v.window_left < a->seqlen_k ? v.window_left : -1;
    if (left < 0) return 0; /* an unbounded left side is plain causal: the heuristic's rule */
    unsigned bm = (unsigned)cfg->block_m, mblocks = ((unsigned)a->seqlen_q + bm - 1) / bm;
    unsigned long long t = (unsigned long long)mblocks * (unsigned)a->heads_q * (unsigned)a->batch;
    unsigned g = fj_persistent_ctas(max_ctas, t > UINT32_MAX ? UINT32_MAX : (unsigned)t);
    if (t > (1u << 18) || g == 0 || g >= t) return 0; /* one round, or too many tiles to weigh (a class miss pays it) */
    long worst, total;
    static_schedule_load(a, bm, cfg->block_n, left, mblocks, (unsigned)t, g, &worst, &total);
    return worst * 100 * (long)g > total * 104 && total - (long)t >= 8 * (long)t; /* mean KV tiles >= 8 */
}

/* A causal window of at most 128 keys on the left with sinks at head_dim <= 64 (gpt-oss's local layers) takes the
 * cross-tile tail (config cross_tile): its work tiles are 2-3 KV tiles long and end in the sinks' epilogue, which
 * the tail runs under the next tile's first S. Measured on the H200 (session 15, fagen bench, 2 interleaved rounds,
 * bench/results/h200-session15-2026-11-28.md): window (128, 0) with sinks +4.4-5.4% (Hq64 / Hkv8) and +4.1-4.5%
 * (multi-head); without sinks -0.4..-1.0%, windows of 1024 and 4096 keys -1..-3%: off there (the heuristic's rule
 * for grouped-query causal attention without a window: config.c fit_cross_tile). */
static int window_cross_tile(const fajit_attention_args *a, const fajit_config *cfg)
{
    fj_variant_args v;
    fj_variant_read(a, &v);
    return v.window && a->causal && cfg->arch == FAJIT_ARCH_SM90A && cfg->head_dim <= 64 && v.window_left >= 0 &&
           v.window_left <= 128 && (cfg->mods & FAJIT_MOD_SINKS) &&
           !(cfg->mods & (FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI | FAJIT_MOD_CHUNK));
}

fajit_status fj_forward_fill(fajit_context *ctx, const fajit_shape *shape, const fajit_attention_args *a,
                             fajit_config *cfg)
{
    fajit_config first = *cfg;
    fajit_status st = fajit_config_fill(ctx, shape, &first);
    if (st == FAJIT_OK && !first.sched && fj_forward_window_lpt(a, &first, ctx ? ctx->persistent_ctas : 0)) {
        first = *cfg;
        first.sched = 1; /* a long window: the dynamic schedule, and the tiles the heuristic gives it */
        st = fajit_config_fill(ctx, shape, &first);
    }
    if (st == FAJIT_OK && !cfg->cross_tile && window_cross_tile(a, &first)) fj_config_try_cross_tile(&first);
    *cfg = first;
    return st;
}

int fj_plan_max_ctas(const fj_plan *plan, int max_ctas)
{
    int ctas = fj_plan_ctas_per_sm(plan);
    return max_ctas > 0 && max_ctas <= INT32_MAX / ctas ? max_ctas * ctas : max_ctas;
}

unsigned fj_persistent_ctas(int max_ctas, unsigned tiles)
{
    return max_ctas > 0 && tiles > (unsigned)max_ctas ? (unsigned)max_ctas : tiles;
}

void fj_forward_grid(const fajit_attention_args *a, const fj_plan *plan, int max_ctas, unsigned grid[3])
{
    unsigned bm = (unsigned)plan->cfg.block_m, mblocks = ((unsigned)a->seqlen_q + bm - 1) / bm;
    if (plan->ws) { /* persistent: at most max_ctas CTAs (0 = no cap), each looping over work tiles */
        unsigned tiles = mblocks * (unsigned)a->heads_q * (unsigned)a->batch;
        grid[0] = fj_persistent_ctas(fj_plan_max_ctas(plan, max_ctas), tiles);
        /* a local variant's tiles cost alike (the window's), the causal balance check does not apply */
        int local = (plan->cfg.mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_CHUNK)) != 0;
        /* the dynamic schedule (plan.lpt) balances as it goes: no one-CTA-per-tile fallback */
        if (plan->cfg.causal && !local && !plan->lpt && grid[0] < tiles &&
            !causal_schedule_balances(a, plan, mblocks, tiles, grid[0]))
            grid[0] = tiles;
        grid[1] = grid[2] = 1;
        return;
    }
    grid[0] = mblocks;
    grid[1] = (unsigned)a->heads_q;
    grid[2] = (unsigned)a->batch;
}

void fj_forward_params_tma(const fajit_attention_args *a, const fj_plan *plan, fj_fwd_params_tma *p)
{
    unsigned bm = (unsigned)plan->cfg.block_m;
    fj_forward_params(a, plan, &p->base);
    p->n_mblocks = ((unsigned)a->seqlen_q + bm - 1) / bm;
    p->heads_batch = (uint32_t)a->heads_q * (uint32_t)a->batch;
    p->n_tiles = p->n_mblocks * p->heads_batch;
}

/* The smallest power of two >= n, clamped to INT_MAX. */
static int pow2_ceil(int n)
{
    long long p = 1;
    while (p < n) p <<= 1;
    return p > INT_MAX ? INT_MAX : (int)p;
}

int fj_forward_class(const fajit_attention_args *a, char *key, size_t size, fajit_shape *shape)
{
    shape->batch = pow2_ceil(a->batch);
    shape->heads_q = a->heads_q;
    shape->heads_kv = a->heads_kv;
    shape->seqlen_q = pow2_ceil(a->seqlen_q);
    shape->seqlen_k = pow2_ceil(a->seqlen_k);
    int mods = fj_variant_mods(a);
    char m[40] = "";
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    int n = mods ? snprintf(m, sizeof m, " m%d", mods) : 0;
    fj_variant_args v;
    fj_variant_read(a, &v);
    if (v.window && a->causal) /* the window's length picks the schedule (fj_forward_window_lpt) */
        n += snprintf(m + n, sizeof m - (size_t)n, " wl%d", v.window_left);
    if (f.kv_dtype != a->dtype || f.out_dtype != a->dtype)
        snprintf(m + n, sizeof m - (size_t)n, " kv%d o%d", (int)f.kv_dtype, (int)f.out_dtype);
    return snprintf(key, size, "%s d%d c%d b%d hq%d hkv%d nq%d nk%d%s", dtype_name(a->dtype), a->head_dim, a->causal,
                    shape->batch, shape->heads_q, shape->heads_kv, shape->seqlen_q, shape->seqlen_k, m);
}

/* ---------------------------------------------------------------------------------------------------
 * Kernel choice and launch
 * ------------------------------------------------------------------------------------------------- */

/* The kernel the calling thread's last successful forward launched, in words (fajit_last_forward), where it
 * came from (fajit_last_forward_source), and while a stand-in runs, the config it stands in for. */
static _Thread_local char t_last_forward[2 * FJ_CONFIG_TEXT_MAX + 320];
static _Thread_local fajit_cache_source t_last_source;
static _Thread_local char t_compiling[FJ_CONFIG_TEXT_MAX];

const char *fajit_last_forward(void) { return t_last_forward; }

fajit_cache_source fajit_last_forward_source(void) { return t_last_source; }

/* Within one forward every kernel fetched sets the source (the last one fetched ran: the plain kernel, the
 * decode variant, the sm_80 kernel standing in for a TMA one), and a stand-in anywhere in the call sets the
 * config it stands in for, which the call then reports (FALLBACK, "; while <config> compiles"). */
void fj_forward_set_source(fajit_cache_source source, const fajit_config *compiling)
{
    t_last_source = source;
    if (source == FAJIT_SOURCE_FALLBACK && compiling) fajit_config_format(compiling, t_compiling, sizeof t_compiling);
}

void fj_forward_set_last(const char *text)
{
    if (t_compiling[0]) snprintf(t_last_forward, sizeof t_last_forward, "%s; while %s compiles", text, t_compiling);
    else snprintf(t_last_forward, sizeof t_last_forward, "%s", text);
}

/* The launch grid of k for a; a causal warp-specialized kernel's (its balance check walks every work
 * tile) is kept per kernel for the last shape it was asked for. */
static void forward_grid_cached(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a, unsigned grid[3])
{
    if (!k->plan.ws || !k->plan.cfg.causal) {
        fj_forward_grid(a, &k->plan, ctx->persistent_ctas, grid); /* persistent: one CTA per SM */
        return;
    }
    const int key[4] = {a->batch, a->heads_q, a->seqlen_q, a->seqlen_k};
    pthread_mutex_lock(&ctx->lock);
    int hit = memcmp(k->grid_key, key, sizeof key) == 0;
    if (hit) grid[0] = k->grid_x;
    pthread_mutex_unlock(&ctx->lock);
    if (!hit) {
        fj_forward_grid(a, &k->plan, ctx->persistent_ctas, grid);
        pthread_mutex_lock(&ctx->lock);
        memcpy(k->grid_key, key, sizeof key);
        k->grid_x = grid[0];
        pthread_mutex_unlock(&ctx->lock);
    }
    grid[1] = grid[2] = 1;
}

static fajit_status forward_launch(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a, void *own,
                                   size_t own_size)
{
    unsigned grid[3];
    fj_param_block blk;
    void *kernel_params[1] = {fj_variant_params(&k->plan, a, own, own_size, &blk)};
    forward_grid_cached(ctx, k, a, grid);
    fajit_status st = fj_context_push(ctx);
    if (st != FAJIT_OK) return st;
    fj_CUresult rc = ctx->cu->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], (unsigned)k->plan.threads, 1, 1,
                                             (unsigned)k->plan.smem_bytes, (fj_CUstream)a->stream, kernel_params, NULL);
    fj_context_pop(ctx);
    if (rc == FJ_CUDA_SUCCESS) return FAJIT_OK;
    fj_cuda_fail(rc, "cuLaunchKernel");
    return fj_fail_context(FAJIT_ERR_CUDA, "config \"%s\", grid (%u, %u, %u), block %d, smem %d B", k->config_text,
                           grid[0], grid[1], grid[2], k->plan.threads, k->plan.smem_bytes);
}

/* Launch k; a warp-specialized kernel gets its tensor maps, and when TMA cannot describe the tensors the
 * sm_80 path's kernel for the shape runs instead (said in fajit_last_forward). */
static fajit_status forward_run(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a)
{
    fj_fwd_params_tma params;
    char why[256];
    memset(&params, 0, sizeof params);
    fj_forward_params_tma(a, &k->plan, &params);
    if (!k->plan.ws) {
        fj_forward_set_last(k->config_text);
        return forward_launch(ctx, k, a, &params.base, sizeof params.base);
    }
    if (fj_tensor_maps(ctx, &k->plan, a, &params, why, sizeof why) == 0) {
        fajit_status st = k->plan.lpt ? fj_lpt_counter(ctx, a, &params) : FAJIT_OK; /* FAJIT_CAUSAL_SCHED=lpt */
        if (st != FAJIT_OK) return st;
        fj_forward_set_last(k->config_text);
        return forward_launch(ctx, k, a, &params, sizeof params);
    }
    if (k->plan.fp8) /* no sm_80 kernel to fall back to */
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s: the FP8 kernel's tensor maps cannot describe the tensors: %s",
                       k->config_text, why);
    fajit_kernel *fallback = NULL;
    fajit_status st = fj_forward_choose(ctx, a, FAJIT_ARCH_SM80, k->plan.cfg.accurate, &fallback);
    if (st != FAJIT_OK) return fj_fail_context(st, "falling back from %s (%s) to the sm_80 path", k->config_text, why);
    fj_forward_params(a, &fallback->plan, &params.base);
    char text[FJ_CONFIG_TEXT_MAX + 320];
    snprintf(text, sizeof text, "%s; fell back from %s: %s", fallback->config_text, fj_arch_path_name(k->plan.cfg.arch),
             why);
    fj_forward_set_last(text);
    return forward_launch(ctx, fallback, a, &params.base, sizeof params.base);
}

fajit_status fajit_attention_forward(fajit_context *ctx, const fajit_attention_args *args, const fajit_config *cfg)
{
    fajit_kernel *k = NULL;
    fj_clear_error();
    if (!ctx) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "ctx = NULL: fajit_attention_forward needs a context");
    fajit_cache_source prev_source = t_last_source; /* restored when this call launches nothing */
    char prev_compiling[FJ_CONFIG_TEXT_MAX];
    memcpy(prev_compiling, t_compiling, sizeof prev_compiling);
    t_compiling[0] = '\0';
    fajit_status st = fj_forward_validate(args, cfg);
    if (st == FAJIT_OK) st = fj_context_require_device(ctx, "fajit_attention_forward");
    if (st == FAJIT_OK && args->dtype == FAJIT_DTYPE_E4M3 && strcmp(fajit_context_sm(ctx), "sm_90") != 0)
        st = fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 on a %s device: the FP8 kernels are sm_90a's (H100, "
                                            "H200); other GPUs have no FP8 path yet", fajit_context_sm(ctx));
    if (st == FAJIT_OK) /* the policy (policy.c): a given config's kernel, or the choice for the shape class */
        st = cfg ? fj_policy_get(ctx, cfg, 0, args->stream, &k) : fj_forward_choose(ctx, args, FAJIT_ARCH_AUTO, 0, &k);
    int handled = 0;
    if (st == FAJIT_OK && fj_decode_wanted(ctx, args)) st = fj_decode_run(ctx, k, args, cfg != NULL, &handled);
    if (st == FAJIT_OK && !handled) st = forward_run(ctx, k, args);
    if (st == FAJIT_OK) fj_clear_error(); /* a tile probe that failed on the way (decode.c) left its message */
    if (st == FAJIT_OK && t_compiling[0]) t_last_source = FAJIT_SOURCE_FALLBACK;
    if (st != FAJIT_OK) {
        t_last_source = prev_source;
        memcpy(t_compiling, prev_compiling, sizeof prev_compiling);
    }
    return st;
}
