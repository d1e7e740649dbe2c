/*
 * variants.c - the attention variants' arguments on the host (variants.h): read, checked, mapped to the
 * FAJIT_MOD_* bits of the kernel config and to the fj_fwd_params_mods block the variant kernels read.
 */
#include "variants.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "decode.h"
#include "base/error.h"
#include "fp8_args.h"

#define BAD(...) fj_fail(FAJIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define LOG2E 1.4426950408889634

void fj_variant_read(const fajit_attention_args *a, fj_variant_args *v)
{
    memset(v, 0, sizeof *v);
    if (fj_args_size(a) < FAJIT_ATTENTION_ARGS_SIZE_3) return;
    v->window = a->window;
    v->window_left = a->window_left;
    v->window_right = a->window_right;
    v->softcap = a->softcap;
    v->sinks = a->sinks;
    v->alibi_slopes = a->alibi_slopes;
    v->alibi_slopes_batch_stride = a->alibi_slopes_batch_stride;
    v->attention_chunk = a->attention_chunk;
}

fajit_status fj_variant_validate(const fajit_attention_args *a)
{
    if (fj_args_size(a) < FAJIT_ATTENTION_ARGS_SIZE_3) return FAJIT_OK;
    if (a->reserved1 != 0) return BAD("args->reserved1 = %d: must be 0", a->reserved1);
    fj_variant_args v;
    fj_variant_read(a, &v);
    if (v.window != 0 && v.window != 1)
        return BAD("args->window = %d: must be 0 (no sliding window) or 1 (keys window_left before to window_right "
                   "after the diagonal)", v.window);
    if (v.window_left < -1) return BAD("args->window_left = %d: must be >= -1 (-1 = unbounded)", v.window_left);
    if (v.window_right < -1) return BAD("args->window_right = %d: must be >= -1 (-1 = unbounded)", v.window_right);
    if (!v.window && (v.window_left || v.window_right))
        return BAD("args->window_left = %d, window_right = %d with args->window = 0: set window = 1 for a sliding "
                   "window (or leave both 0)", v.window_left, v.window_right);
    if (!isfinite(v.softcap) || v.softcap < 0.0f)
        return BAD("args->softcap = %g: must be finite and >= 0 (0 = no softcap; Gemma 2 uses 50)", (double)v.softcap);
    if (v.sinks % 4)
        return BAD("args->sinks = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to float32 [heads_q])",
                   v.sinks);
    if (v.alibi_slopes % 4)
        return BAD("args->alibi_slopes = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to float32 [heads_q] "
                   "or [batch][heads_q])", v.alibi_slopes);
    if (v.alibi_slopes_batch_stride < 0)
        return BAD("args->alibi_slopes_batch_stride = %" PRId64 ": must be >= 0 (elements between batches' slopes; 0 "
                   "= one row for every batch)", v.alibi_slopes_batch_stride);
    if (v.alibi_slopes_batch_stride && !v.alibi_slopes)
        return BAD("args->alibi_slopes_batch_stride = %" PRId64 " with args->alibi_slopes = 0: give the slopes (or "
                   "leave the stride 0)", v.alibi_slopes_batch_stride);
    if (v.alibi_slopes_batch_stride > INT32_MAX)
        return BAD("args->alibi_slopes_batch_stride = %" PRId64 ": must be < 2^31", v.alibi_slopes_batch_stride);
    if (v.attention_chunk < 0)
        return BAD("args->attention_chunk = %d: must be >= 0 (0 = no chunks)", v.attention_chunk);
    return FAJIT_OK;
}

int fj_variant_mods(const fajit_attention_args *a)
{
    fj_variant_args v;
    fj_variant_read(a, &v);
    return (v.window ? FAJIT_MOD_WINDOW : 0) | (v.softcap > 0.0f ? FAJIT_MOD_SOFTCAP : 0) |
           (v.sinks ? FAJIT_MOD_SINKS : 0) | (v.alibi_slopes ? FAJIT_MOD_ALIBI : 0) |
           (v.attention_chunk > 0 ? FAJIT_MOD_CHUNK : 0);
}

float fj_variant_scale_log2(const fajit_attention_args *a, double scale)
{
    fj_variant_args v;
    fj_variant_read(a, &v);
    return (float)((v.softcap > 0.0f ? (double)v.softcap : scale) * LOG2E);
}

/* The window's sides as the kernel reads them: an unbounded side becomes a bound no row reaches (left seqlen_k,
 * right seqlen_q: fajit.h's a - seqlen_k < 0 and a + seqlen_q >= Nk_b for every row); causal makes the right 0. */
static void window_sides(const fajit_attention_args *a, const fj_variant_args *v, int32_t *left, int32_t *right)
{
    *left = a->seqlen_k;
    *right = a->seqlen_q;
    if (v->window) {
        if (v->window_left >= 0 && v->window_left < a->seqlen_k) *left = v->window_left;
        if (v->window_right >= 0 && v->window_right < a->seqlen_q) *right = v->window_right;
    }
    if (a->causal) *right = 0;
}

void *fj_variant_params(const fj_plan *plan, const fajit_attention_args *a, const void *own, size_t own_size,
                        fj_param_block *blk)
{
    if (!plan->cfg.mods && !plan->fp8_off) return (void *)own;
    size_t first = (size_t)(plan->cfg.mods ? plan->mods_off : plan->fp8_off); /* the first trailing block */
    memset(blk, 0, sizeof *blk);
    memcpy(blk->bytes, own, own_size < first ? own_size : first);
    if (plan->fp8_off) {
        fj_fp8_args f;
        fj_fp8_read(a, &f);
        fj_fwd_params_fp8 d = {f.q_descale, f.k_descale, f.v_descale, f.descale_batch_stride};
        memcpy(blk->bytes + plan->fp8_off, &d, sizeof d);
    }
    if (!plan->cfg.mods) return blk->bytes;
    fj_variant_args v;
    fj_variant_read(a, &v);
    double scale = a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->head_dim);
    fj_fwd_params_mods m;
    memset(&m, 0, sizeof m);
    window_sides(a, &v, &m.win_left, &m.win_right);
    m.chunk = v.attention_chunk > 0 ? (uint32_t)v.attention_chunk : 1;
    m.cap_scale = v.softcap > 0.0f ? (float)(scale / v.softcap) : 1.0f;
    m.score_unit = (float)(v.softcap > 0.0f ? 1.0 / v.softcap : 1.0 / scale);
    m.sinks = v.sinks;
    m.alibi = v.alibi_slopes;
    m.alibi_stride = v.alibi_slopes_batch_stride;
    memcpy(blk->bytes + plan->mods_off, &m, sizeof m);
    return blk->bytes;
}
