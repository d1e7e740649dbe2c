/*
 * fp8_args.c - the FP8 arguments of fajit_attention_forward (fp8_args.h): read through struct_size, checked.
 */
#include "fp8_args.h"

#include <inttypes.h>
#include <string.h>

#include "decode.h"
#include "base/error.h"
#include "variants.h"

#define BAD(...) fj_fail(FAJIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)

static const char *name_of(fajit_dtype t)
{
    return t == FAJIT_DTYPE_F16    ? "f16"
           : t == FAJIT_DTYPE_BF16 ? "bf16"
           : t == FAJIT_DTYPE_E4M3 ? "e4m3"
           : t == FAJIT_DTYPE_AUTO ? "0"
                                   : "?";
}

void fj_fp8_read(const fajit_attention_args *a, fj_fp8_args *f)
{
    memset(f, 0, sizeof *f);
    if (fj_args_size(a) >= FAJIT_ATTENTION_ARGS_SIZE_4) {
        f->kv_dtype_given = a->kv_dtype;
        f->out_dtype_given = a->out_dtype;
        f->q_descale = a->q_descale;
        f->k_descale = a->k_descale;
        f->v_descale = a->v_descale;
        f->descale_batch_stride = a->descale_batch_stride;
    }
    f->kv_dtype = f->kv_dtype_given ? f->kv_dtype_given : a->dtype;
    f->out_dtype = f->out_dtype_given ? f->out_dtype_given : a->dtype == FAJIT_DTYPE_E4M3 ? FAJIT_DTYPE_BF16 : a->dtype;
}

int fj_fp8_any(const fajit_attention_args *a)
{
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    return a->dtype == FAJIT_DTYPE_E4M3 || f.kv_dtype == FAJIT_DTYPE_E4M3;
}

int fj_fp8_row_align(const fajit_attention_args *a, char which)
{
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    fajit_dtype t = which == 'o' ? f.out_dtype : which == 'q' ? a->dtype : f.kv_dtype;
    return t == FAJIT_DTYPE_E4M3 ? 16 : 8;
}

static fajit_status check_descale(const char *field, uint64_t p, const char *needs, int fp8)
{
    if (p % 4)
        return BAD("args->%s = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to float32 [batch][heads_kv])",
                   field, p);
    if (p && !fp8)
        return BAD("args->%s = 0x%" PRIx64 ": a descale applies to e4m3 %s only; leave it 0 for f16 / bf16", field, p,
                   needs);
    return FAJIT_OK;
}

fajit_status fj_fp8_validate(const fajit_attention_args *a)
{
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    int q8 = a->dtype == FAJIT_DTYPE_E4M3, kv8 = f.kv_dtype == FAJIT_DTYPE_E4M3;
    if (f.kv_dtype_given != 0 && f.kv_dtype_given != a->dtype && f.kv_dtype_given != FAJIT_DTYPE_E4M3)
        return BAD("args->kv_dtype = %d (%s) with dtype %s: must be 0 (K/V are dtype) or FAJIT_DTYPE_E4M3 (3, an FP8 "
                   "K/V cache)", (int)f.kv_dtype_given, name_of(f.kv_dtype_given), name_of(a->dtype));
    if (q8 && !kv8)
        return BAD("args->kv_dtype = %d (%s) with dtype e4m3: e4m3 queries need e4m3 K/V (kv_dtype 0 or 3)",
                   (int)f.kv_dtype_given, name_of(f.kv_dtype_given));
    if (q8 && f.out_dtype != FAJIT_DTYPE_BF16 && f.out_dtype != FAJIT_DTYPE_F16)
        return BAD("args->out_dtype = %d (%s) with dtype e4m3: O must be FAJIT_DTYPE_BF16 (2, or 0) or FAJIT_DTYPE_F16 "
                   "(1)", (int)f.out_dtype_given, name_of(f.out_dtype_given));
    if (!q8 && f.out_dtype_given != 0 && f.out_dtype_given != a->dtype)
        return BAD("args->out_dtype = %d (%s) with dtype %s: O has the queries' dtype (0 or %d); out_dtype chooses O's "
                   "dtype for e4m3 inputs only", (int)f.out_dtype_given, name_of(f.out_dtype_given), name_of(a->dtype),
                   (int)a->dtype);
    if (q8 && a->head_dim != 64 && a->head_dim != 128 && a->head_dim != 256)
        return BAD("args->head_dim = %d with dtype e4m3: FP8 kernels take head_dim 64, 128 or 256", a->head_dim);
    fajit_status st;
    if ((st = check_descale("q_descale", f.q_descale, "queries (dtype e4m3)", q8)) ||
        (st = check_descale("k_descale", f.k_descale, "K (dtype or kv_dtype e4m3)", kv8)) ||
        (st = check_descale("v_descale", f.v_descale, "V (dtype or kv_dtype e4m3)", kv8)))
        return st;
    if (f.descale_batch_stride < 0 || f.descale_batch_stride > INT32_MAX)
        return BAD("args->descale_batch_stride = %" PRId64 ": must be in 0..2^31-1 (elements between batches' rows; "
                   "0 = one [heads_kv] row for every batch)", f.descale_batch_stride);
    if (f.descale_batch_stride && !f.q_descale && !f.k_descale && !f.v_descale)
        return BAD("args->descale_batch_stride = %" PRId64 " with no descale pointer: give q_descale / k_descale / "
                   "v_descale (or leave the stride 0)", f.descale_batch_stride);
    if (f.descale_batch_stride && f.descale_batch_stride < a->heads_kv)
        return BAD("args->descale_batch_stride = %" PRId64 ": less than heads_kv = %d, so batches' rows would overlap "
                   "(a contiguous [batch][heads_kv] tensor has stride heads_kv; 0 = one row for every batch)",
                   f.descale_batch_stride, a->heads_kv);
    return FAJIT_OK;
}

fajit_status fj_fp8_unsupported(const fajit_attention_args *a)
{
    size_t n = fj_args_size(a);
    uint64_t table = n >= FAJIT_ATTENTION_ARGS_SIZE_2 ? a->block_table : 0;
    uint64_t cu_q = n >= FAJIT_ATTENTION_ARGS_SIZE_3 ? a->cu_seqlens_q : 0;
    if (cu_q && a->seqlens_k)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with cu_seqlens_q and seqlens_k (seqused_k): FP8 "
                                              "varlen batches use each sequence's whole key range (seqlens_k is taken "
                                              "by batched FP8 K/V: decode)");
    if (cu_q && table)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with cu_seqlens_q and a block table: paged varlen "
                                              "batches (chunked prefill) are not built for FP8 (varlen batches with "
                                              "packed K/V, and paged K/V with seqlens_k, are)");
    if (cu_q && !a->cu_seqlens_k)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with cu_seqlens_q but no cu_seqlens_k: FP8 varlen "
                                              "batches pack both queries and keys (packed queries against batched K / V "
                                              "are not built for FP8)");
    if (fj_variant_mods(a) & FAJIT_MOD_ALIBI)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with alibi_slopes: the FP8 kernels have no ALiBi "
                                              "(window, softcap, sinks and attention_chunk they take)");
    return FAJIT_OK;
}

fajit_status fj_fp8_kv_unsupported(const fajit_attention_args *a)
{
    if (fj_variant_mods(a))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->kv_dtype = e4m3 with an attention variant (window, softcap, sinks, "
                                              "alibi_slopes, attention_chunk): the FP8 K/V cache kernels have none yet");
    if (fj_args_size(a) >= FAJIT_ATTENTION_ARGS_SIZE_3 && (a->cu_seqlens_q || a->cu_seqlens_k))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->kv_dtype = e4m3 with cu_seqlens_q / cu_seqlens_k: the FP8 K/V "
                                              "cache kernels take batched K/V (seqlens_k, block_table), not varlen "
                                              "batches yet");
    return FAJIT_OK;
}
