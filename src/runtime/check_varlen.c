/*
 * check_varlen.c - fajit_attention_forward on a varlen (packed) batch against the CPU float64 reference
 * (check.h: fj_check_varlen_run; used by `fagen check --varlen` and tests/test_gpu_varlen.c).
 *
 * Phases: lengths -> cu_seqlens (host); random Q / K / V with NaN row padding; device buffers, O and LSE
 * poisoned with guards; paged K/V when asked (pages shuffled in a pool with a spare NaN page); the attention
 * variants' sinks / slopes (check.c's values); the forward and a synchronize; the reference per sequence (the CPU
 * one whenever a variant is set); compare every owned element, then count the words that lost their poison
 * anywhere else (rows past a capped sequence, row padding, guards).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "context.h"
#include "base/error.h"
#include "half.h"
#include "reference.h"

#define VL_GUARD_WORDS 2048 /* poisoned 16-bit words after O, floats after LSE */
#define VL_POISON16 0xFFFFu

typedef struct vl_run {
    fajit_context *ctx;
    const fj_cuda_api *cu;
    const fj_check_problem *p;
    const fj_check_varlen *vl;
    fajit_attention_args args;
    int32_t *cu_q, *cu_k, *used;     /* host: [n + 1], [n + 1] (packed K) / NULL, [n] or NULL */
    int64_t total_q, total_k, kv_rows; /* packed rows; K/V rows allocated (packed: total_k, batched: n x cap) */
    int ld, cap_k;                   /* elements per row of one head (D + row_pad); key capacity (batched) */
    int64_t o_words, lse_words;
    uint16_t *hq, *hk, *hv, *ho;
    float *hlse;
    double *ref_o, *ref_lse;
    float *hsinks, *halibi;          /* attention variants: sinks [Hq], slopes [Hq] or [n][Hq]; or NULL */
    fj_CUdeviceptr dq, dk, dv, do_, dlse, dcu_q, dcu_k, dused, dpk, dpv, dtab, dsinks, dalibi;
} vl_run;

static fajit_status vl_cuda(fj_CUresult rc, const char *call)
{
    return rc == 0 ? FAJIT_OK : fj_fail_context(fj_cuda_fail(rc, call), "check varlen");
}

static fajit_status vl_upload(vl_run *r, fj_CUdeviceptr *d, const void *host, int64_t bytes, const char *what)
{
    fj_CUresult rc = r->cu->cuMemAlloc(d, (size_t)(bytes > 0 ? bytes : 4));
    if (rc != 0) {
        *d = 0;
        return fj_fail_context(fj_cuda_fail(rc, "cuMemAlloc"), "check varlen: %s (%lld bytes)", what, (long long)bytes);
    }
    if (bytes <= 0) return FAJIT_OK;
    rc = host ? r->cu->cuMemcpyHtoD(*d, host, (size_t)bytes) : r->cu->cuMemsetD8(*d, 0xff, (size_t)bytes);
    return vl_cuda(rc, host ? "cuMemcpyHtoD" : "cuMemsetD8");
}

static void vl_free(vl_run *r)
{
    fj_CUdeviceptr *dev[] = {&r->dq, &r->dk, &r->dv, &r->do_, &r->dlse, &r->dcu_q, &r->dcu_k, &r->dused,
                             &r->dpk, &r->dpv, &r->dtab, &r->dsinks, &r->dalibi};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (*dev[i] && r->cu) r->cu->cuMemFree(*dev[i]);
    void *host[] = {r->cu_q, r->cu_k, r->used, r->hq, r->hk, r->hv, r->ho, r->hlse, r->ref_o, r->ref_lse,
                    r->hsinks, r->halibi};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* ---------------------------------------------------------------------------------------------------
 * Host side: lengths, arguments, inputs
 * ------------------------------------------------------------------------------------------------- */
static int vl_len_k(const fj_check_varlen *vl, int b) { return vl->len_k ? vl->len_k[b] : vl->len_q[b]; }

static fajit_status vl_lengths(vl_run *r, uint64_t *seed)
{
    const fj_check_varlen *vl = r->vl;
    int n = vl->n, max_q = 1, max_k = 1;
    r->cu_q = malloc(sizeof(int32_t) * (size_t)(n + 1));
    r->cu_k = malloc(sizeof(int32_t) * (size_t)(n + 1));
    r->used = malloc(sizeof(int32_t) * (size_t)n);
    if (!r->cu_q || !r->cu_k || !r->used) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check varlen: %d lengths", n);
    r->cu_q[0] = r->cu_k[0] = 0;
    for (int b = 0; b < n; b++) {
        int lq = vl->len_q[b], lk = vl_len_k(vl, b);
        if (lq < 0 || lk < 0) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check varlen: sequence %d: lengths %d, %d < 0", b, lq, lk);
        r->cu_q[b + 1] = r->cu_q[b] + lq;
        r->cu_k[b + 1] = r->cu_k[b] + lk;
        max_q = lq > max_q ? lq : max_q, max_k = lk > max_k ? lk : max_k;
        r->used[b] = vl->packed_k && vl->seqused ? (int)(fj_check_rand(seed) % (uint64_t)(lk + 1)) : lk;
    }
    r->total_q = r->cu_q[n], r->total_k = r->cu_k[n];
    r->cap_k = max_k;
    r->kv_rows = vl->packed_k ? r->total_k : (int64_t)n * max_k;
    fajit_attention_args *a = &r->args;
    fajit_attention_args_init(a);
    a->dtype = r->p->dtype, a->batch = n, a->heads_q = r->p->heads_q, a->heads_kv = r->p->heads_kv;
    a->seqlen_q = vl->q_cap > 0 ? vl->q_cap : max_q, a->seqlen_k = max_k;
    a->head_dim = r->p->head_dim, a->causal = r->p->causal;
    a->window = r->p->window, a->window_left = r->p->window_left, a->window_right = r->p->window_right;
    a->softcap = r->p->softcap, a->attention_chunk = r->p->attention_chunk;
    r->ld = r->p->head_dim + r->p->row_pad;
    int64_t hq = r->p->heads_q, hk = r->p->heads_kv, ld = r->ld;
    int64_t sq[3] = {0, ld, hq * ld}, sk[3] = {(int64_t)max_k * hk * ld, ld, hk * ld};
    if (vl->packed_k) sk[0] = 0;
    memcpy(a->q_stride, sq, sizeof sq), memcpy(a->o_stride, sq, sizeof sq);
    memcpy(a->k_stride, sk, sizeof sk), memcpy(a->v_stride, sk, sizeof sk);
    return fj_reference_check_args(a, 0);
}

static fajit_status vl_inputs(vl_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->p;
    int64_t q_words = r->total_q * p->heads_q * r->ld, kv_words = r->kv_rows * p->heads_kv * r->ld;
    r->o_words = q_words + VL_GUARD_WORDS;
    r->lse_words = p->no_lse ? 0 : r->total_q * p->heads_q + VL_GUARD_WORDS;
    r->hq = malloc(2 * (size_t)(q_words + 1));
    r->hk = malloc(2 * (size_t)(kv_words + 1));
    r->hv = malloc(2 * (size_t)(kv_words + 1));
    r->ho = malloc(2 * (size_t)r->o_words);
    r->hlse = malloc(4 * (size_t)(r->lse_words + 1));
    r->ref_o = malloc(sizeof(double) * (size_t)(r->total_q * p->heads_q * p->head_dim + 1));
    r->ref_lse = malloc(sizeof(double) * (size_t)(r->total_q * p->heads_q + 1));
    if (!r->hq || !r->hk || !r->hv || !r->ho || !r->hlse || !r->ref_o || !r->ref_lse)
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check varlen: host buffers (%lld + 2 x %lld elements)",
                       (long long)q_words, (long long)kv_words);
    fj_check_problem fp = *p; /* the fill's "growing" keys count positions over [rows, H] */
    fp.layout = FJ_LAYOUT_BNHD, fp.seqlen_k = r->cap_k;
    uint64_t s = seed;
    fj_check_fill_rows(r->hq, r->total_q * p->heads_q, p->head_dim, r->ld, &fp, fj_check_rand(&s), 0);
    fj_check_fill_rows(r->hk, r->kv_rows * p->heads_kv, p->head_dim, r->ld, &fp, fj_check_rand(&s), 1);
    fj_check_fill_rows(r->hv, r->kv_rows * p->heads_kv, p->head_dim, r->ld, &fp, fj_check_rand(&s), 0);
    uint16_t nan16 = p->dtype == FAJIT_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
    for (int b = 0; b < r->vl->n; b++) { /* keys a sequence does not use: NaN, which no output may see */
        int64_t first = r->vl->packed_k ? r->cu_k[b] : (int64_t)b * r->cap_k;
        int64_t end = r->vl->packed_k ? r->cu_k[b + 1] : first + r->cap_k;
        for (int64_t t = first + r->used[b]; t < end; t++)
            for (int64_t e = 0; e < (int64_t)p->heads_kv * r->ld; e++)
                r->hk[t * p->heads_kv * r->ld + e] = r->hv[t * p->heads_kv * r->ld + e] = nan16;
    }
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Device side
 * ------------------------------------------------------------------------------------------------- */
/* Paged K/V: pools of n x max_pages + 1 pages in a random order, the spare one and every row past a sequence's keys
 * NaN; the forward then reads the pools through the block table (the reference the batched arrays). */
static fajit_status vl_paged(vl_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->p;
    int n = r->vl->n, ps = p->page_size, hk = p->heads_kv, dim = p->head_dim;
    int max_pages = (r->cap_k + ps - 1) / ps, pages = n * max_pages + 1;
    size_t page_elems = (size_t)ps * (size_t)hk * (size_t)dim, elems = page_elems * (size_t)pages;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)pages);
    uint16_t *pool = malloc(2 * elems), nan16 = p->dtype == FAJIT_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
    fajit_status st = table && pool ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check varlen: pools");
    for (int i = 0; st == FAJIT_OK && i < pages; i++) table[i] = i;
    for (int i = pages - 1; st == FAJIT_OK && i > 0; i--) {
        int j = (int)(fj_check_rand(&seed) % (uint64_t)(i + 1)), t = table[i];
        table[i] = table[j], table[j] = t;
    }
    const uint16_t *src[2] = {r->hk, r->hv};
    fj_CUdeviceptr *dst[2] = {&r->dpk, &r->dpv};
    for (int x = 0; x < 2 && st == FAJIT_OK; x++) {
        for (size_t e = 0; e < elems; e++) pool[e] = nan16;
        for (int b = 0; b < n; b++)
            for (int j = 0; j < r->used[b]; j++)
                for (int h = 0; h < hk; h++)
                    memcpy(pool + (size_t)table[b * max_pages + j / ps] * page_elems + ((size_t)(j % ps) * hk + h) * dim,
                           src[x] + ((int64_t)b * r->cap_k + j) * hk * r->ld + h * r->ld, 2 * (size_t)dim);
        st = vl_upload(r, dst[x], pool, (int64_t)(2 * elems), x ? "V pool" : "K pool");
    }
    if (st == FAJIT_OK)
        st = vl_upload(r, &r->dtab, table, (int64_t)sizeof(int32_t) * n * max_pages, "block table");
    free(table);
    free(pool);
    if (st != FAJIT_OK) return st;
    fajit_attention_args *a = &r->args;
    a->k = r->dpk, a->v = r->dpv, a->block_table = r->dtab, a->max_pages = max_pages, a->page_size = ps;
    int64_t s[3] = {(int64_t)page_elems, dim, (int64_t)hk * dim};
    memcpy(a->k_stride, s, sizeof s), memcpy(a->v_stride, s, sizeof s);
    return FAJIT_OK;
}

static fajit_status vl_device(vl_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->p;
    int n = r->vl->n;
    int64_t kv_bytes = 2 * r->kv_rows * p->heads_kv * r->ld;
    fajit_status st;
    if ((st = vl_upload(r, &r->dq, r->hq, 2 * r->total_q * p->heads_q * r->ld, "Q")) ||
        (st = vl_upload(r, &r->dk, r->hk, kv_bytes, "K")) || (st = vl_upload(r, &r->dv, r->hv, kv_bytes, "V")) ||
        (st = vl_upload(r, &r->do_, NULL, 2 * r->o_words, "O")) ||
        (st = vl_upload(r, &r->dcu_q, r->cu_q, 4 * (int64_t)(n + 1), "cu_seqlens_q")))
        return st;
    if (!p->no_lse && (st = vl_upload(r, &r->dlse, NULL, 4 * r->lse_words, "LSE"))) return st;
    fajit_attention_args *a = &r->args;
    a->q = r->dq, a->k = r->dk, a->v = r->dv, a->o = r->do_, a->lse = r->dlse, a->cu_seqlens_q = r->dcu_q;
    if (r->vl->packed_k) {
        if ((st = vl_upload(r, &r->dcu_k, r->cu_k, 4 * (int64_t)(n + 1), "cu_seqlens_k"))) return st;
        a->cu_seqlens_k = r->dcu_k;
    }
    if (!r->vl->packed_k || r->vl->seqused) {
        if ((st = vl_upload(r, &r->dused, r->used, 4 * (int64_t)n, "seqlens_k"))) return st;
        a->seqlens_k = r->dused;
    }
    return p->page_size > 0 ? vl_paged(r, seed) : FAJIT_OK;
}

/* The attention variants' sinks and slopes (check.c's values for the n sequences), uploaded into the forward's args. */
static fajit_status vl_variants(vl_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->p;
    fajit_attention_args *a = &r->args;
    int64_t stride = 0;
    fajit_status st = fj_check_variant_values(p, r->vl->n, seed, &r->hsinks, &r->halibi, &stride);
    int64_t sb = 4 * (int64_t)p->heads_q, ab = sb * (p->alibi == 2 ? r->vl->n : 1);
    if (st == FAJIT_OK && r->hsinks && (st = vl_upload(r, &r->dsinks, r->hsinks, sb, "sinks")) == FAJIT_OK)
        a->sinks = r->dsinks;
    if (st == FAJIT_OK && r->halibi && (st = vl_upload(r, &r->dalibi, r->halibi, ab, "alibi slopes")) == FAJIT_OK)
        a->alibi_slopes = r->dalibi, a->alibi_slopes_batch_stride = stride;
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * Compare
 * ------------------------------------------------------------------------------------------------- */
static void vl_compare(vl_run *r, fj_check_result *res)
{
    const fj_check_problem *p = r->p;
    const int64_t hq = p->heads_q, dim = p->head_dim;
    double diff2 = 0.0, ref2 = 0.0;
    res->worst_row = -1;
    for (int b = 0; b < r->vl->n; b++) {
        int64_t len = r->cu_q[b + 1] - r->cu_q[b];
        if (len > r->args.seqlen_q) len = r->args.seqlen_q;
        for (int64_t i = 0; i < len; i++)
            for (int64_t h = 0; h < hq; h++) {
                int64_t t = r->cu_q[b] + i, row = t * hq + h;
                uint16_t *o = r->ho + row * r->ld;
                const double *ref = r->ref_o + row * dim;
                double d2 = 0.0, r2 = 0.0;
                for (int64_t d = 0; d < dim; d++) {
                    double got = fj_half_to_f32(p->dtype, o[d]), e = got - ref[d];
                    o[d] = VL_POISON16;
                    if (!isfinite(got)) {
                        res->nan_count++;
                        continue;
                    }
                    d2 += e * e, r2 += ref[d] * ref[d];
                    if (fabs(e) > res->max_abs) res->max_abs = fabs(e);
                }
                diff2 += d2, ref2 += r2;
                res->elements += dim;
                double rel = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
                if (rel > res->worst_row_rel) res->worst_row_rel = rel, res->worst_row = row;
                if (p->no_lse) continue;
                float got = r->hlse[h * r->total_q + t];
                double want = r->ref_lse[h * r->total_q + t];
                memset(&r->hlse[h * r->total_q + t], 0xff, sizeof(float));
                if (isnan(got) || got == INFINITY) res->nan_count++;
                else if ((got == -INFINITY) != (want == -INFINITY)) res->lse_inf_mismatch++;
                else if (got != -INFINITY && fabs((double)got - want) > res->lse_max_abs)
                    res->lse_max_abs = fabs((double)got - want);
            }
    }
    res->rel_l2 = ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    for (int64_t w = 0; w < r->o_words; w++) res->oob_writes += r->ho[w] != VL_POISON16;
    for (int64_t w = 0; w < r->lse_words; w++) {
        uint32_t bits;
        memcpy(&bits, &r->hlse[w], sizeof bits);
        res->oob_writes += bits != 0xffffffffu;
    }
    fj_check_judge(res);
}

/* The GPU reference (large batches): fp32 per-sequence blocks (fj_reference_gpu_varlen), read back into the packed
 * double arrays vl_compare reads. ra: the batched K / V the device holds besides any pools. */
static fajit_status vl_reference_gpu(vl_run *r, fajit_attention_args *ra, const int32_t *used)
{
    const int64_t hq = r->p->heads_q, dim = r->p->head_dim, rows = r->total_q * hq;
    fj_CUdeviceptr d_o = 0, d_l = 0;
    float *ho = malloc(4 * (size_t)(rows * dim + 1)), *hl = malloc(4 * (size_t)(rows + 1));
    fajit_status st = ho && hl ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check varlen: GPU reference outputs");
    ra->k = r->dk, ra->v = r->dv;
    if (st == FAJIT_OK) st = vl_upload(r, &d_o, NULL, 4 * rows * dim, "reference O");
    if (st == FAJIT_OK) st = vl_upload(r, &d_l, NULL, 4 * rows, "reference LSE");
    if (st == FAJIT_OK)
        st = fj_reference_gpu_varlen(r->ctx, ra, r->cu_q, r->vl->packed_k ? r->cu_k : NULL, used, d_o, d_l);
    if (st == FAJIT_OK && rows)
        st = vl_cuda(r->cu->cuMemcpyDtoH(ho, d_o, 4 * (size_t)(rows * dim)), "cuMemcpyDtoH(reference O)");
    if (st == FAJIT_OK && rows)
        st = vl_cuda(r->cu->cuMemcpyDtoH(hl, d_l, 4 * (size_t)rows), "cuMemcpyDtoH(reference LSE)");
    for (int b = 0; st == FAJIT_OK && b < r->vl->n; b++) {
        int64_t len = r->cu_q[b + 1] - r->cu_q[b], t0 = r->cu_q[b];
        if (len > r->args.seqlen_q) len = r->args.seqlen_q;
        for (int64_t h = 0; h < hq; h++)
            for (int64_t i = 0; i < len; i++) {
                int64_t blk = t0 * hq + h * len + i, row = (t0 + i) * hq + h;
                for (int64_t d = 0; d < dim; d++) r->ref_o[row * dim + d] = ho[blk * dim + d];
                r->ref_lse[h * r->total_q + t0 + i] = hl[blk];
            }
    }
    if (d_o) r->cu->cuMemFree(d_o);
    if (d_l) r->cu->cuMemFree(d_l);
    free(ho);
    free(hl);
    return st;
}

static fajit_status vl_steps(vl_run *r, const fajit_config *cfg, fj_check_result *res)
{
    uint64_t seed = res->seed;
    fajit_status st;
    if ((st = vl_lengths(r, &seed)) || (st = vl_inputs(r, fj_check_rand(&seed))) ||
        (st = vl_device(r, fj_check_rand(&seed))) || (st = vl_variants(r, fj_check_rand(&seed))))
        return st;
    if ((st = fajit_attention_forward(r->ctx, &r->args, cfg)) != FAJIT_OK)
        return fj_fail_context(st, "check varlen: fajit_attention_forward");
    snprintf(res->kernel, sizeof res->kernel, "%s", fajit_last_forward());
    if ((st = vl_cuda(r->cu->cuCtxSynchronize(), "cuCtxSynchronize after the forward"))) return st;
    if ((st = vl_cuda(r->cu->cuMemcpyDtoH(r->ho, r->do_, 2 * (size_t)r->o_words), "cuMemcpyDtoH(O)"))) return st;
    if (r->dlse && (st = vl_cuda(r->cu->cuMemcpyDtoH(r->hlse, r->dlse, 4 * (size_t)r->lse_words), "cuMemcpyDtoH(LSE)")))
        return st;
    fajit_attention_args ra = r->args; /* the reference reads the host arrays: batched K/V (not the pools) */
    int64_t hk = r->p->heads_kv, ld = r->ld, sk[3] = {r->vl->packed_k ? 0 : (int64_t)r->cap_k * hk * ld, ld, hk * ld};
    memcpy(ra.k_stride, sk, sizeof sk), memcpy(ra.v_stride, sk, sizeof sk);
    const int32_t *used = r->vl->packed_k && !r->vl->seqused ? NULL : r->used;
    const int32_t *cu_k = r->vl->packed_k ? r->cu_k : NULL;
    if (res->reference == FJ_REF_GPU) st = vl_reference_gpu(r, &ra, used);
    else
        st = fj_reference_cpu_varlen_variants(&ra, r->cu_q, cu_k, used, r->hsinks, r->halibi, r->hq, r->hk, r->hv,
                                              r->ref_o, r->p->no_lse ? NULL : r->ref_lse);
    if (st == FAJIT_OK) vl_compare(r, res);
    return st;
}

fajit_status fj_check_varlen_run(fajit_context *ctx, const fajit_config *cfg, const fj_check_problem *prob,
                                 const fj_check_varlen *vl, const fj_check_options *opts, fj_check_result *res)
{
    if (!prob || !vl || !res || !vl->len_q || vl->n < 1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_check_varlen_run: prob, vl (n >= 1, len_q) and res are required");
    if (prob->row_pad < 0 || prob->row_pad % 8)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check varlen: row_pad = %d: a multiple of 8, >= 0", prob->row_pad);
    if (vl->packed_k && prob->page_size)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check varlen: packed keys with paged K/V: one or the other");
    memset(res, 0, sizeof *res);
    fajit_status st = fj_check_variant_rules(prob);
    if (st != FAJIT_OK) return st;
    int variants = fj_check_has_variants(prob);
    if (variants && opts && opts->reference == FJ_REF_GPU)
        return fj_fail(FAJIT_ERR_UNSUPPORTED,
                       "check varlen: the GPU reference does not know the attention variants; use the CPU one");
    if ((st = fj_context_require_device(ctx, "fj_check_varlen_run")) != FAJIT_OK) return st;
    vl_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx, r.cu = ctx->cu, r.p = prob, r.vl = vl;
    fj_check_tolerances(prob, opts, res);
    double macs = 0.0, limit = opts && opts->cpu_max_macs > 0 ? opts->cpu_max_macs : 2147483648.0;
    for (int b = 0; b < vl->n; b++) macs += (double)vl->len_q[b] * (vl->len_k ? vl->len_k[b] : vl->len_q[b]);
    macs *= (double)prob->heads_q * prob->head_dim;
    /* the GPU reference has no variants: with one, the CPU reference whatever the size (as fj_check_run) */
    res->reference = opts && opts->reference != FJ_REF_AUTO ? opts->reference
                     : variants || macs <= limit             ? FJ_REF_CPU
                                                             : FJ_REF_GPU;
    res->seed = fj_check_seed(prob->seed);
    if ((st = fj_context_push(ctx)) != FAJIT_OK) return st;
    st = vl_steps(&r, cfg, res);
    vl_free(&r);
    fj_context_pop(ctx);
    return st;
}
