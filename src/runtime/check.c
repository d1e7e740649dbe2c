/*
 * check.c - run fajit_attention_forward on random inputs and compare it with a reference
 * (see check.h for the procedure and the pass criteria).
 *
 * Phases, one function each: host buffers and random fill; device buffers, upload and poison; the
 * forward plus a synchronize; the reference (CPU float64 or GPU fp32); download; compare. Every driver
 * call goes through the context's table between fj_context_push / fj_context_pop.
 */
#include "check.h"
#include "variants.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "context.h"
#include "base/error.h"
#include "half.h"
#include "reference.h"

#define CHECK_TOL_BF16 1e-2     /* rel L2 of O, bf16 */
#define CHECK_TOL_F16 2e-3      /* rel L2 of O, f16 */
#define CHECK_ROW_FACTOR 4.0    /* worst row rel error <= 4 x rel L2 tolerance */
#define CHECK_TOL_LSE 1e-3      /* max abs error of LSE (natural log) */
#define CHECK_CPU_MAX_MACS 2147483648.0 /* 2^31 multiply-adds: above, the GPU reference */
#define CHECK_GUARD_BYTES 4096  /* poisoned bytes after O and after LSE */
#define CHECK_POISON16 0xFFFFu
#define CHECK_LEN_TILE 64       /* seqlens: one sequence of every five has a multiple of this many keys */

fj_check_problem fj_check_problem_default(void)
{
    fj_check_problem p;
    memset(&p, 0, sizeof p);
    p.batch = p.heads_q = p.heads_kv = 1;
    p.seqlen_q = p.seqlen_k = 128;
    p.head_dim = 128;
    p.dtype = FAJIT_DTYPE_BF16;
    return p;
}

/* ---------------------------------------------------------------------------------------------------
 * Random numbers: splitmix64 (one stream per tensor)
 * ------------------------------------------------------------------------------------------------- */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0. */
static double rng_open01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1p-53; }

static uint64_t check_fresh_seed(void)
{
    static atomic_ullong counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    s ^= (uint64_t)getpid() << 32;
    s += atomic_fetch_add(&counter, 1) * 0x2545f4914f6cdd1dull;
    uint64_t seed = splitmix64(&s);
    return seed ? seed : 1;
}

/* Scale of key row r (rows counted over the whole K tensor) under FJ_FILL_GROWING; 1 otherwise. */
static double key_row_scale(const fj_check_problem *p, int64_t r)
{
    if (p->fill != FJ_FILL_GROWING) return 1.0;
    int64_t j = p->layout == FJ_LAYOUT_BNHD ? (r / p->heads_kv) % p->seqlen_k : r % p->seqlen_k;
    return (1.0 + 3.0 * (double)j / p->seqlen_k) * (j % 61 == 37 ? 8.0 : 1.0);
}

/* Fill `rows` rows of `dim` values spaced `ld` apart; the ld - dim padding words get NaN. `keys`: the
 * rows are K's (FJ_FILL_GROWING scales them by position). */
static void check_fill(uint16_t *x, int64_t rows, int dim, int ld, const fj_check_problem *p, uint64_t seed, int keys)
{
    uint16_t nan16 = p->dtype == FAJIT_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
    double spare = 0.0;
    int have_spare = 0;
    for (int64_t r = 0; r < rows; r++) {
        uint16_t *row = x + r * ld;
        double scale = keys ? key_row_scale(p, r) : 1.0;
        for (int d = 0; d < dim; d++) {
            double val;
            if (p->fill == FJ_FILL_UNIFORM) {
                val = 2.0 * rng_open01(&seed) - 1.0;
            } else if (have_spare) { /* Box-Muller gives two normals per draw */
                val = spare;
                have_spare = 0;
            } else {
                double rad = sqrt(-2.0 * log(rng_open01(&seed))), ang = 6.283185307179586 * rng_open01(&seed);
                val = rad * cos(ang);
                spare = rad * sin(ang);
                have_spare = 1;
            }
            row[d] = fj_half_from_f32(p->dtype, (float)(val * scale));
        }
        for (int d = dim; d < ld; d++) row[d] = nan16;
    }
}

/* ---------------------------------------------------------------------------------------------------
 * Problem -> args
 * ------------------------------------------------------------------------------------------------- */
static void check_strides(const fj_check_problem *p, int heads, int seqlen, int64_t st[3])
{
    int64_t ld = p->head_dim + p->row_pad;
    if (p->layout == FJ_LAYOUT_BNHD) {
        st[0] = (int64_t)seqlen * heads * ld;
        st[1] = ld;
        st[2] = (int64_t)heads * ld;
    } else {
        st[0] = (int64_t)heads * seqlen * ld;
        st[1] = (int64_t)seqlen * ld;
        st[2] = ld;
    }
}

static fajit_status check_problem_args(const fj_check_problem *p, fajit_attention_args *a)
{
    if (p->row_pad < 0 || p->row_pad % 8 != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check: row_pad = %d: must be a multiple of 8, >= 0", p->row_pad);
    if (p->kv8 < 0 || p->kv8 > 2 || (p->kv8 && p->row_pad % 16))
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check: kv8 = %d, row_pad = %d: kv8 0, 1 or 2; with e4m3 rows row_pad "
                                                   "a multiple of 16", p->kv8, p->row_pad);
    if (p->layout != FJ_LAYOUT_BHND && p->layout != FJ_LAYOUT_BNHD)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check: layout = %d: must be BHND (0) or BNHD (1)", (int)p->layout);
    memset(a, 0, sizeof *a);
    a->dtype = p->dtype;
    a->batch = p->batch;
    a->heads_q = p->heads_q;
    a->heads_kv = p->heads_kv;
    a->seqlen_q = p->seqlen_q;
    a->seqlen_k = p->seqlen_k;
    a->head_dim = p->head_dim;
    a->causal = p->causal;
    check_strides(p, p->heads_q, p->seqlen_q, a->q_stride);
    check_strides(p, p->heads_kv, p->seqlen_k, a->k_stride);
    check_strides(p, p->heads_kv, p->seqlen_k, a->v_stride);
    check_strides(p, p->heads_q, p->seqlen_q, a->o_stride);
    a->struct_size = sizeof *a; /* the paged fields are read */
    a->window = p->window;
    a->window_left = p->window_left;
    a->window_right = p->window_right;
    a->softcap = p->softcap;
    a->attention_chunk = p->attention_chunk;
    fajit_status st = fj_check_variant_rules(p);
    if (st != FAJIT_OK) return st;
    if (p->page_size < 0 || p->page_size % 16)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check: page_size = %d: must be 0 or a multiple of 16", p->page_size);
    return fj_reference_check_args(a, 0);
}

static void check_tolerances(const fj_check_problem *p, const fj_check_options *o, fj_check_result *r)
{
    double dtype_tol = p->dtype == FAJIT_DTYPE_F16 ? CHECK_TOL_F16 : CHECK_TOL_BF16;
    r->tol_rel_l2 = o && o->tol_rel_l2 > 0 ? o->tol_rel_l2 : dtype_tol;
    r->tol_row_rel = o && o->tol_row_rel > 0 ? o->tol_row_rel : CHECK_ROW_FACTOR * r->tol_rel_l2;
    r->tol_lse = o && o->tol_lse > 0 ? o->tol_lse : CHECK_TOL_LSE;
}

/* ---------------------------------------------------------------------------------------------------
 * Compare
 * ------------------------------------------------------------------------------------------------- */
typedef struct check_acc {
    double diff2, ref2;
} check_acc;

/* One row of O: accumulates into acc and res; returns the row's relative error. */
static double check_row(const fj_check_view *vw, int64_t row, uint16_t *orow, check_acc *acc, fj_check_result *res)
{
    const int dim = vw->args->head_dim;
    double rd2 = 0.0, rr2 = 0.0;
    for (int d = 0; d < dim; d++) {
        double got = fj_half_to_f32(vw->args->dtype, orow[d]);
        double ref = vw->ref_o_d ? vw->ref_o_d[row * dim + d] : (double)vw->ref_o_f[row * dim + d];
        orow[d] = CHECK_POISON16;
        if (!isfinite(got)) {
            res->nan_count++;
            continue;
        }
        double e = got - ref;
        rd2 += e * e;
        rr2 += ref * ref;
        if (fabs(e) > res->max_abs || isnan(e)) res->max_abs = fabs(e);
    }
    acc->diff2 += rd2;
    acc->ref2 += rr2;
    return rr2 > 0.0 ? sqrt(rd2 / rr2) : sqrt(rd2);
}

static void check_lse_row(const fj_check_view *vw, int64_t row, fj_check_result *res)
{
    float got = vw->lse[row];
    double ref = vw->ref_lse_d ? vw->ref_lse_d[row] : (double)vw->ref_lse_f[row];
    memset(&vw->lse[row], 0xff, sizeof(float));
    if (isnan(got) || got == INFINITY) {
        res->nan_count++;
    } else if ((got == -INFINITY) != (ref == -INFINITY)) {
        res->lse_inf_mismatch++;
    } else if (got != -INFINITY) {
        double e = fabs((double)got - ref);
        if (e > res->lse_max_abs || isnan(e)) res->lse_max_abs = e;
    }
}

/* Words still holding poison after the valid elements were overwritten with it. */
static void check_count_oob(const fj_check_view *vw, fj_check_result *res)
{
    for (int64_t w = 0; w < vw->o_words; w++) res->oob_writes += vw->o[w] != CHECK_POISON16;
    for (int64_t w = 0; vw->lse && w < vw->lse_words; w++) {
        uint32_t bits;
        memcpy(&bits, &vw->lse[w], sizeof bits);
        res->oob_writes += bits != 0xffffffffu;
    }
}

static void check_verdict(fj_check_result *r)
{
    size_t n = sizeof r->why;
    r->why[0] = '\0';
    if (r->nan_count) snprintf(r->why, n, "%lld NaN/Inf/unwritten outputs", (long long)r->nan_count);
    else if (r->oob_writes) snprintf(r->why, n, "%lld words written outside O/LSE", (long long)r->oob_writes);
    else if (r->lse_inf_mismatch)
        snprintf(r->why, n, "%lld rows with LSE -inf on one side only", (long long)r->lse_inf_mismatch);
    else if (!(r->rel_l2 <= r->tol_rel_l2)) snprintf(r->why, n, "rel L2 %.3g > %.3g", r->rel_l2, r->tol_rel_l2);
    else if (!(r->worst_row_rel <= r->tol_row_rel))
        snprintf(r->why, n, "row %lld rel error %.3g > %.3g", (long long)r->worst_row, r->worst_row_rel,
                 r->tol_row_rel);
    else if (!(r->lse_max_abs <= r->tol_lse)) snprintf(r->why, n, "LSE error %.3g > %.3g", r->lse_max_abs, r->tol_lse);
    r->pass = r->why[0] == '\0';
}

void fj_check_compare(const fj_check_view *vw, fj_check_result *res)
{
    const fajit_attention_args *a = vw->args;
    check_acc acc = {0.0, 0.0};
    res->rel_l2 = res->worst_row_rel = res->max_abs = res->lse_max_abs = 0.0;
    res->nan_count = res->lse_inf_mismatch = res->oob_writes = 0;
    res->worst_row = -1;
    res->elements = (int64_t)a->batch * a->heads_q * a->seqlen_q * a->head_dim;
    for (int b = 0; b < a->batch; b++) {
        for (int h = 0; h < a->heads_q; h++) {
            for (int64_t i = 0; i < a->seqlen_q; i++) {
                int64_t row = ((int64_t)b * a->heads_q + h) * a->seqlen_q + i;
                uint16_t *orow = vw->o + b * a->o_stride[0] + h * a->o_stride[1] + i * a->o_stride[2];
                double rel = check_row(vw, row, orow, &acc, res);
                if (rel > res->worst_row_rel || (isnan(rel) && !isnan(res->worst_row_rel))) {
                    res->worst_row_rel = rel;
                    res->worst_row = row;
                }
                if (vw->lse) check_lse_row(vw, row, res);
            }
        }
    }
    res->rel_l2 = acc.ref2 > 0.0 ? sqrt(acc.diff2 / acc.ref2) : sqrt(acc.diff2);
    check_count_oob(vw, res);
    check_verdict(res);
}

/* ---------------------------------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------------------------------- */
typedef struct check_run {
    fajit_context *ctx;
    const fj_cuda_api *cu;
    const fj_check_problem *prob;
    fajit_attention_args args;
    int64_t q_words, kv_words, o_words, lse_words; /* allocation sizes, guards included */
    int64_t out_elems, rows;                        /* contiguous reference sizes */
    uint16_t *hq, *hk, *hv, *ho;
    uint8_t *hk8, *hv8;                             /* kv8: K and V in e4m3 (hk / hv: their dequantized values) */
    float *hdesc;                                   /* kv8 = 2: k then v descales, [batch][heads_kv] each */
    fj_CUdeviceptr dk8, dv8, ddesc;
    float *hlse;
    int32_t *hlens;                                 /* per-sequence KV lengths, or NULL */
    float *hsinks, *halibi;                         /* attention variants' sinks / slopes, or NULL */
    fj_CUdeviceptr dsinks, dalibi;
    double *ref_o_d, *ref_lse_d;
    float *ref_o_f, *ref_lse_f;
    fj_CUdeviceptr dq, dk, dv, do_, dlse, dref_o, dref_lse, dlens, dws;
    fj_CUdeviceptr dpool_k, dpool_v, dtable;        /* paged K/V */
    fajit_attention_args ref_args;                  /* the references' view (K/V laid out as usual) */
    uint64_t seed;                                  /* the problem's seed */
    char kernel[448];                               /* fajit_last_forward() after the forward */
    const fajit_config *cfg;                        /* the forward's config, or NULL */
} check_run;

static fajit_status check_cuda(fj_CUresult rc, const char *call)
{
    return rc == 0 ? FAJIT_OK : fj_fail_context(fj_cuda_fail(rc, call), "check");
}

static fajit_status check_alloc(check_run *r, fj_CUdeviceptr *p, int64_t bytes, const char *what)
{
    fj_CUresult rc = r->cu->cuMemAlloc(p, (size_t)bytes);
    if (rc != 0) {
        *p = 0;
        return fj_fail_context(fj_cuda_fail(rc, "cuMemAlloc"), "check: %s (%lld bytes)", what, (long long)bytes);
    }
    return FAJIT_OK;
}

static void check_free(check_run *r)
{
    fj_CUdeviceptr *dev[] = {&r->dq,   &r->dk,   &r->dv,    &r->do_,     &r->dlse,    &r->dref_o,
                             &r->dref_lse, &r->dlens, &r->dws, &r->dpool_k, &r->dpool_v, &r->dtable,
                             &r->dsinks, &r->dalibi, &r->dk8, &r->dv8, &r->ddesc};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        if (*dev[i] && r->cu) r->cu->cuMemFree(*dev[i]);
        *dev[i] = 0;
    }
    void *host[] = {r->hq,      r->hk,      r->hv,      r->ho,     r->hlse,   r->hlens,
                    r->ref_o_d, r->ref_lse_d, r->ref_o_f, r->ref_lse_f, r->hsinks, r->halibi,
                    r->hk8,     r->hv8,     r->hdesc};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* Per-sequence KV lengths by b % 5: 1, a multiple of CHECK_LEN_TILE, Nk, random in [1, Nk], and for 4 by b / 5 % 3:
 * 0, past the capacity (Nk + 1..1000) and negative (fajit.h: the kernel clamps them to [0, Nk]; so do the
 * references). Batches below 10 get the first five only. */
static fajit_status check_lens(check_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->prob;
    int nk = p->seqlen_k;
    r->hlens = malloc(sizeof(int32_t) * (size_t)p->batch);
    if (!r->hlens) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: %d sequence lengths", p->batch);
    for (int b = 0; b < p->batch; b++) {
        int tiles = nk / CHECK_LEN_TILE, len;
        switch (b % 5) {
        case 0: len = 1; break;
        case 1: len = tiles ? CHECK_LEN_TILE * (1 + (int)(splitmix64(&seed) % (uint64_t)tiles)) : nk; break;
        case 2: len = nk; break;
        case 3: len = 1 + (int)(splitmix64(&seed) % (uint64_t)nk); break;
        default:
            len = (b / 5) % 3 == 0 ? 0 : (b / 5) % 3 == 1 ? nk + 1 + (int)(splitmix64(&seed) % 1000) : -7;
            break;
        }
        r->hlens[b] = len;
    }
    return FAJIT_OK;
}

/* nan_past_len: K and V rows n >= lens[b] of every KV head become NaN (head_dim words each). */
static void check_nan_past_len(check_run *r)
{
    const fj_check_problem *p = r->prob;
    uint16_t nan16 = p->dtype == FAJIT_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
    int64_t st[3];
    check_strides(p, p->heads_kv, p->seqlen_k, st);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_kv; h++)
            for (int n = r->hlens[b] > 0 ? r->hlens[b] : 0; n < p->seqlen_k; n++) {
                int64_t at = b * st[0] + h * st[1] + n * st[2];
                for (int d = 0; d < p->head_dim; d++) r->hk[at + d] = r->hv[at + d] = nan16;
            }
}

/* Host arrays, random inputs. */
/* The sinks / slopes (fj_check_variant_values) of the problem's batch. */
static fajit_status check_variant_values(check_run *r, uint64_t seed)
{
    return fj_check_variant_values(r->prob, r->prob->batch, seed, &r->hsinks, &r->halibi,
                                   &r->args.alibi_slopes_batch_stride);
}

/* Upload the sinks / slopes of check_variant_values. */
static fajit_status check_variant_upload(check_run *r)
{
    const fj_check_problem *p = r->prob;
    fajit_status st = FAJIT_OK;
    size_t sb = sizeof(float) * (size_t)p->heads_q, ab = sb * (size_t)(p->alibi == 2 ? p->batch : 1);
    if (r->hsinks && (st = check_alloc(r, &r->dsinks, (int64_t)sb, "sinks")) == FAJIT_OK)
        st = check_cuda(r->cu->cuMemcpyHtoD(r->dsinks, r->hsinks, sb), "cuMemcpyHtoD(sinks)");
    if (st == FAJIT_OK && r->halibi && (st = check_alloc(r, &r->dalibi, (int64_t)ab, "alibi slopes")) == FAJIT_OK)
        st = check_cuda(r->cu->cuMemcpyHtoD(r->dalibi, r->halibi, ab), "cuMemcpyHtoD(alibi slopes)");
    r->args.sinks = r->dsinks;
    r->args.alibi_slopes = r->dalibi;
    return st;
}

/* kv8: the descales (kv8 = 2: 2^k, k uniform in -2..2, per (batch, KV head), K's then V's), then every K / V
 * element x (padding words included: NaN stays NaN) quantized to e4m3 as x / descale, and hk / hv replaced by
 * the dequantized values e4m3 x descale, which bf16 and f16 hold exactly (|e4m3| <= 448, descale 1/4..4). */
static fajit_status check_kv8_quantize(check_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->prob;
    size_t heads = (size_t)p->batch * (size_t)p->heads_kv;
    r->hk8 = malloc((size_t)r->kv_words);
    r->hv8 = malloc((size_t)r->kv_words);
    r->hdesc = malloc(2 * heads * sizeof(float));
    if (!r->hk8 || !r->hv8 || !r->hdesc) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: e4m3 K / V");
    for (size_t i = 0; i < 2 * heads; i++) r->hdesc[i] = p->kv8 == 2 ? (float)ldexp(1.0, (int)(splitmix64(&seed) % 5) - 2) : 1.0f;
    int64_t st[3];
    check_strides(p, p->heads_kv, p->seqlen_k, st);
    int ld = p->head_dim + p->row_pad;
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads_kv; h++)
            for (int n = 0; n < p->seqlen_k; n++) {
                int64_t at = b * st[0] + h * st[1] + n * st[2];
                for (int x = 0; x < 2; x++) {
                    uint16_t *w = (x ? r->hv : r->hk) + at;
                    uint8_t *q = (x ? r->hv8 : r->hk8) + at;
                    double d = r->hdesc[(size_t)x * heads + (size_t)b * p->heads_kv + h];
                    for (int e = 0; e < ld; e++) {
                        q[e] = fj_e4m3_from_f64(fj_half_to_f32(p->dtype, w[e]) / d);
                        if (e < p->head_dim) w[e] = fj_half_from_f32(p->dtype, (float)(fj_e4m3_to_f64(q[e]) * d));
                    }
                }
            }
    return FAJIT_OK;
}

/* kv8: upload the e4m3 K / V (and the descales) and point the forward's args at them; the references keep the
 * 16-bit dequantized copies (r->ref_args, set after). */
static fajit_status check_kv8_upload(check_run *r)
{
    const fj_check_problem *p = r->prob;
    size_t heads = (size_t)p->batch * (size_t)p->heads_kv, db = 2 * heads * sizeof(float);
    fajit_status st = check_alloc(r, &r->dk8, r->kv_words, "e4m3 K");
    if (st == FAJIT_OK) st = check_alloc(r, &r->dv8, r->kv_words, "e4m3 V");
    if (st == FAJIT_OK) st = check_cuda(r->cu->cuMemcpyHtoD(r->dk8, r->hk8, (size_t)r->kv_words), "cuMemcpyHtoD(K8)");
    if (st == FAJIT_OK) st = check_cuda(r->cu->cuMemcpyHtoD(r->dv8, r->hv8, (size_t)r->kv_words), "cuMemcpyHtoD(V8)");
    if (st == FAJIT_OK && p->kv8 == 2 && (st = check_alloc(r, &r->ddesc, (int64_t)db, "descales")) == FAJIT_OK)
        st = check_cuda(r->cu->cuMemcpyHtoD(r->ddesc, r->hdesc, db), "cuMemcpyHtoD(descales)");
    fajit_attention_args *a = &r->args;
    a->kv_dtype = FAJIT_DTYPE_E4M3;
    a->k = r->dk8, a->v = r->dv8;
    if (r->ddesc) {
        a->k_descale = r->ddesc, a->v_descale = r->ddesc + heads * sizeof(float);
        a->descale_batch_stride = p->heads_kv;
    }
    return st;
}

static fajit_status check_host_setup(check_run *r, uint64_t seed)
{
    r->seed = seed;
    const fj_check_problem *p = r->prob;
    const int ld = p->head_dim + p->row_pad;
    int64_t q_rows = (int64_t)p->batch * p->heads_q * p->seqlen_q;
    int64_t kv_rows = (int64_t)p->batch * p->heads_kv * p->seqlen_k;
    r->q_words = q_rows * ld;
    r->kv_words = kv_rows * ld;
    r->o_words = r->q_words + CHECK_GUARD_BYTES / 2;
    r->rows = q_rows;
    r->lse_words = p->no_lse ? 0 : q_rows + CHECK_GUARD_BYTES / 4;
    r->out_elems = q_rows * p->head_dim;
    r->hq = malloc((size_t)r->q_words * 2);
    r->hk = malloc((size_t)r->kv_words * 2);
    r->hv = malloc((size_t)r->kv_words * 2);
    r->ho = malloc((size_t)r->o_words * 2);
    r->hlse = p->no_lse ? NULL : malloc((size_t)r->lse_words * 4);
    if (!r->hq || !r->hk || !r->hv || !r->ho || (!p->no_lse && !r->hlse))
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: host buffers for %lld + 2 x %lld elements",
                       (long long)r->q_words, (long long)r->kv_words);
    uint64_t s = seed;
    check_fill(r->hq, q_rows, p->head_dim, ld, p, splitmix64(&s), 0);
    check_fill(r->hk, kv_rows, p->head_dim, ld, p, splitmix64(&s), 1);
    check_fill(r->hv, kv_rows, p->head_dim, ld, p, splitmix64(&s), 0);
    fajit_status st = p->seqlens ? check_lens(r, splitmix64(&s)) : FAJIT_OK;
    if (st == FAJIT_OK && p->seqlens && p->nan_past_len) check_nan_past_len(r);
    if (st == FAJIT_OK && p->kv8) st = check_kv8_quantize(r, splitmix64(&s));
    if (st == FAJIT_OK) st = check_variant_values(r, splitmix64(&s));
    return st;
}

/* nan_past_len, paged: the block-table entries of sequence b's pages wholly past its length name the first spare
 * page (all NaN), as an entry a cache has not filled may name any page: a kernel must neither need them nor
 * let what they name reach O. */
static void check_table_past_len(const check_run *r, int32_t *table, int max_pages)
{
    const fj_check_problem *p = r->prob;
    if (!p->nan_past_len || !r->hlens) return;
    for (int b = 0; b < p->batch; b++)
        for (int i = 0; i < max_pages; i++)
            if ((long long)i * p->page_size >= (long long)r->hlens[b])
                table[b * max_pages + i] = table[p->batch * max_pages];
}

/* Paged K/V: pools of max_pages x batch + 2 pages (a random permutation gives sequence b's page i), filled
 * with NaN, then every logical row of K and V copied into its page; the forward's args then point at the
 * pools. The references keep the usual layout (r->ref_args). */
static fajit_status check_paged_setup(check_run *r, uint64_t seed)
{
    const fj_check_problem *p = r->prob;
    const fajit_attention_args *a = &r->ref_args;
    int ps = p->page_size, hkv = p->heads_kv, dim = p->head_dim, max_pages = (p->seqlen_k + ps - 1) / ps;
    int pages = p->batch * max_pages + 2;
    size_t page_elems = (size_t)ps * (size_t)hkv * (size_t)dim, elems = page_elems * (size_t)pages;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)pages);
    size_t esz = p->kv8 ? 1 : 2; /* kv8: the pools hold the e4m3 bytes */
    uint16_t *pool = malloc(2 * elems);
    uint8_t *pool8 = (uint8_t *)pool;
    fajit_status st = table && pool ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: paged pools (%zu elements)", elems);
    for (int i = 0; st == FAJIT_OK && i < pages; i++) table[i] = i;
    for (int i = pages - 1; st == FAJIT_OK && i > 0; i--) { /* Fisher-Yates */
        int j = (int)(splitmix64(&seed) % (uint64_t)(i + 1)), t = table[i];
        table[i] = table[j], table[j] = t;
    }
    if (st == FAJIT_OK) check_table_past_len(r, table, max_pages);
    fj_CUdeviceptr *dst[2] = {&r->dpool_k, &r->dpool_v};
    const uint16_t *src[2] = {r->hk, r->hv};
    const int64_t *stride[2] = {a->k_stride, a->v_stride};
    for (int x = 0; x < 2 && st == FAJIT_OK; x++) {
        uint16_t nan16 = p->dtype == FAJIT_DTYPE_F16 ? 0x7e00u : 0x7fc0u;
        const uint8_t *src8 = x ? r->hv8 : r->hk8;
        for (size_t e = 0; e < elems; e++) esz == 1 ? (void)(pool8[e] = 0x7F) : (void)(pool[e] = nan16);
        for (int b = 0; b < p->batch; b++)
            for (int h = 0; h < hkv; h++)
                for (int j = 0; j < p->seqlen_k; j++) {
                    size_t page = (size_t)table[b * max_pages + j / ps];
                    size_t to = page * page_elems + ((size_t)(j % ps) * hkv + h) * dim;
                    int64_t from = b * stride[x][0] + h * stride[x][1] + j * stride[x][2];
                    if (esz == 1) memcpy(pool8 + to, src8 + from, (size_t)dim);
                    else memcpy(pool + to, src[x] + from, 2 * (size_t)dim);
                }
        if ((st = check_alloc(r, dst[x], (int64_t)(esz * elems), x ? "V pool" : "K pool")) == FAJIT_OK)
            st = check_cuda(r->cu->cuMemcpyHtoD(*dst[x], pool, esz * elems), "cuMemcpyHtoD(pool)");
    }
    size_t table_bytes = sizeof(int32_t) * (size_t)p->batch * (size_t)max_pages;
    if (st == FAJIT_OK) st = check_alloc(r, &r->dtable, (int64_t)table_bytes, "block table");
    if (st == FAJIT_OK) st = check_cuda(r->cu->cuMemcpyHtoD(r->dtable, table, table_bytes), "cuMemcpyHtoD(table)");
    free(table);
    free(pool);
    if (st != FAJIT_OK) return st;
    fajit_attention_args *f = &r->args;
    f->k = r->dpool_k, f->v = r->dpool_v;
    f->block_table = r->dtable, f->max_pages = max_pages, f->page_size = ps;
    int64_t s[3] = {(int64_t)page_elems, dim, (int64_t)hkv * dim};
    memcpy(f->k_stride, s, sizeof s);
    memcpy(f->v_stride, s, sizeof s);
    return FAJIT_OK;
}

/* The decode fields: the lengths uploaded, the splits, paged K/V, the caller's workspace when asked for. */
static fajit_status check_decode_setup(check_run *r)
{
    const fj_check_problem *p = r->prob;
    fajit_status st;
    r->ref_args = r->args;
    if (p->kv8) { /* the references: the dequantized 16-bit K / V */
        r->ref_args.kv_dtype = 0, r->ref_args.k = r->dk, r->ref_args.v = r->dv;
        r->ref_args.k_descale = r->ref_args.v_descale = 0, r->ref_args.descale_batch_stride = 0;
    }
    if (p->page_size > 0 && (st = check_paged_setup(r, (uint64_t)p->seqlen_k * 0x9e3779b97f4a7c15ull + r->seed)) != FAJIT_OK)
        return st;
    r->args.num_splits = p->num_splits;
    if (r->hlens) {
        size_t bytes = sizeof(int32_t) * (size_t)p->batch;
        if ((st = check_alloc(r, &r->dlens, (int64_t)bytes, "seqlens_k")) != FAJIT_OK) return st;
        if ((st = check_cuda(r->cu->cuMemcpyHtoD(r->dlens, r->hlens, bytes), "cuMemcpyHtoD(seqlens_k)")) != FAJIT_OK)
            return st;
        r->args.seqlens_k = r->dlens;
        r->ref_args.seqlens_k = r->dlens;
    }
    if (!p->own_workspace) return FAJIT_OK;
    size_t ws = 0;
    if ((st = fajit_attention_workspace_size(r->ctx, &r->args, r->cfg, &ws)) != FAJIT_OK) return st;
    if (ws == 0) return FAJIT_OK;
    if ((st = check_alloc(r, &r->dws, (int64_t)ws, "workspace")) != FAJIT_OK) return st;
    r->args.workspace = r->dws;
    r->args.workspace_bytes = ws;
    return FAJIT_OK;
}

/* Device buffers: upload Q, K, V; poison O and LSE (guards included). */
static fajit_status check_device_setup(check_run *r)
{
    struct {
        fj_CUdeviceptr *dev;
        int64_t bytes;
        const void *host; /* NULL: fill with 0xFF bytes */
        const char *name;
    } bufs[] = {{&r->dq, r->q_words * 2, r->hq, "Q"},   {&r->dk, r->kv_words * 2, r->hk, "K"},
                {&r->dv, r->kv_words * 2, r->hv, "V"},  {&r->do_, r->o_words * 2, NULL, "O"},
                {&r->dlse, r->lse_words * 4, NULL, "LSE"}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        fajit_status st;
        if (bufs[i].bytes == 0) continue; /* no LSE */
        if ((st = check_alloc(r, bufs[i].dev, bufs[i].bytes, bufs[i].name)) != FAJIT_OK) return st;
        fj_CUresult rc = bufs[i].host ? r->cu->cuMemcpyHtoD(*bufs[i].dev, bufs[i].host, (size_t)bufs[i].bytes)
                                      : r->cu->cuMemsetD8(*bufs[i].dev, 0xff, (size_t)bufs[i].bytes);
        if (rc != 0)
            return fj_fail_context(fj_cuda_fail(rc, bufs[i].host ? "cuMemcpyHtoD" : "cuMemsetD8"), "check: %s",
                                   bufs[i].name);
    }
    r->args.q = r->dq;
    r->args.k = r->dk;
    r->args.v = r->dv;
    r->args.o = r->do_;
    r->args.lse = r->dlse;
    fajit_status st = check_variant_upload(r);
    if (st == FAJIT_OK && r->prob->kv8) st = check_kv8_upload(r);
    return st == FAJIT_OK ? check_decode_setup(r) : st;
}

/* ---------------------------------------------------------------------------------------------------
 * Forward, reference, download
 * ------------------------------------------------------------------------------------------------- */
static fajit_status check_forward(check_run *r, const fajit_config *cfg)
{
    fajit_status st = fajit_attention_forward(r->ctx, &r->args, cfg);
    if (st != FAJIT_OK) return fj_fail_context(st, "check: fajit_attention_forward");
    snprintf(r->kernel, sizeof r->kernel, "%s", fajit_last_forward());
    return check_cuda(r->cu->cuCtxSynchronize(), "cuCtxSynchronize after fajit_attention_forward");
}

static fajit_status check_download(check_run *r)
{
    fajit_status st = check_cuda(r->cu->cuMemcpyDtoH(r->ho, r->do_, (size_t)r->o_words * 2), "cuMemcpyDtoH(O)");
    if (st == FAJIT_OK && r->dlse)
        st = check_cuda(r->cu->cuMemcpyDtoH(r->hlse, r->dlse, (size_t)r->lse_words * 4), "cuMemcpyDtoH(LSE)");
    return st;
}

static fajit_status check_reference_cpu(check_run *r)
{
    r->ref_o_d = malloc((size_t)r->out_elems * sizeof(double));
    r->ref_lse_d = malloc((size_t)r->rows * sizeof(double));
    if (!r->ref_o_d || !r->ref_lse_d)
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: reference output of %lld doubles", (long long)r->out_elems);
    return fj_reference_cpu_variants(&r->ref_args, r->hlens, r->hsinks, r->halibi, r->hq, r->hk, r->hv, r->ref_o_d,
                                     r->ref_lse_d);
}

static fajit_status check_reference_gpu(check_run *r)
{
    fajit_status st;
    if (fj_variant_mods(&r->args))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "check: the GPU reference does not know the attention variants; use the "
                                              "CPU one (a smaller problem)");
    r->ref_o_f = malloc((size_t)r->out_elems * sizeof(float));
    r->ref_lse_f = malloc((size_t)r->rows * sizeof(float));
    if (!r->ref_o_f || !r->ref_lse_f)
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: reference output of %lld floats", (long long)r->out_elems);
    if ((st = check_alloc(r, &r->dref_o, r->out_elems * 4, "reference O")) != FAJIT_OK) return st;
    if ((st = check_alloc(r, &r->dref_lse, r->rows * 4, "reference LSE")) != FAJIT_OK) return st;
    if ((st = fj_reference_gpu(r->ctx, &r->ref_args, r->dref_o, r->dref_lse)) != FAJIT_OK) return st;
    st = check_cuda(r->cu->cuMemcpyDtoH(r->ref_o_f, r->dref_o, (size_t)r->out_elems * 4), "cuMemcpyDtoH(ref O)");
    if (st == FAJIT_OK)
        st = check_cuda(r->cu->cuMemcpyDtoH(r->ref_lse_f, r->dref_lse, (size_t)r->rows * 4), "cuMemcpyDtoH(ref LSE)");
    return st;
}

static fj_check_ref check_pick_reference(const fj_check_problem *p, const fj_check_options *o)
{
    double macs = (double)p->batch * p->heads_q * p->seqlen_q * (double)p->seqlen_k * p->head_dim;
    double limit = o && o->cpu_max_macs > 0 ? o->cpu_max_macs : CHECK_CPU_MAX_MACS;
    if (o && o->reference != FJ_REF_AUTO) return o->reference;
    if (fj_check_has_variants(p)) return FJ_REF_CPU;
    return macs <= limit ? FJ_REF_CPU : FJ_REF_GPU;
}

/* Everything after the context is current. */
static fajit_status check_steps(check_run *r, const fajit_config *cfg, fj_check_result *res)
{
    fajit_status st;
    if ((st = check_host_setup(r, res->seed)) != FAJIT_OK) return st;
    if ((st = check_device_setup(r)) != FAJIT_OK) return st;
    if ((st = check_forward(r, cfg)) != FAJIT_OK) return st;
    if ((st = check_download(r)) != FAJIT_OK) return st;
    st = res->reference == FJ_REF_CPU ? check_reference_cpu(r) : check_reference_gpu(r);
    if (st != FAJIT_OK) return st;
    fj_check_view vw = {&r->args, r->ho, r->o_words, r->hlse, r->lse_words,
                        r->ref_o_d, r->ref_o_f, r->ref_lse_d, r->ref_lse_f};
    fj_check_compare(&vw, res);
    snprintf(res->kernel, sizeof res->kernel, "%s", r->kernel);
    return FAJIT_OK;
}

fajit_status fj_check_run(fajit_context *ctx, const fajit_config *cfg, const fj_check_problem *prob,
                          const fj_check_options *opts, fj_check_result *res)
{
    fajit_status st;
    check_run r;
    if (!prob || !res) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_check_run: prob and res must not be NULL");
    memset(res, 0, sizeof *res);
    memset(&r, 0, sizeof r);
    if ((st = fj_context_require_device(ctx, "fj_check_run")) != FAJIT_OK) return st;
    if ((st = check_problem_args(prob, &r.args)) != FAJIT_OK) return st;
    r.ctx = ctx;
    r.cu = ctx->cu;
    r.prob = prob;
    r.cfg = cfg;
    check_tolerances(prob, opts, res);
    res->reference = check_pick_reference(prob, opts);
    res->seed = prob->seed ? prob->seed : check_fresh_seed();
    if ((st = fj_context_push(ctx)) != FAJIT_OK) return st;
    st = check_steps(&r, cfg, res);
    check_free(&r);
    fj_context_pop(ctx);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * Pieces the varlen check (check_varlen.c) shares
 * ------------------------------------------------------------------------------------------------- */
uint64_t fj_check_seed(uint64_t seed) { return seed ? seed : check_fresh_seed(); }

uint64_t fj_check_rand(uint64_t *state) { return splitmix64(state); }

void fj_check_fill_rows(uint16_t *x, int64_t rows, int dim, int ld, const fj_check_problem *p, uint64_t seed, int keys)
{
    check_fill(x, rows, dim, ld, p, seed, keys);
}

void fj_check_tolerances(const fj_check_problem *p, const fj_check_options *o, fj_check_result *r)
{
    check_tolerances(p, o, r);
}

void fj_check_judge(fj_check_result *r) { check_verdict(r); }

int fj_check_has_variants(const fj_check_problem *p)
{
    return p->window || p->softcap != 0.0f || p->attention_chunk || p->sinks || p->alibi;
}

fajit_status fj_check_variant_rules(const fj_check_problem *p)
{
    if (p->sinks < 0 || p->sinks > 1 || p->alibi < 0 || p->alibi > 2)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "check: sinks = %d, alibi = %d: sinks 0 or 1, alibi 0, 1 or 2",
                       p->sinks, p->alibi);
    return FAJIT_OK;
}

/* Sinks U(-2, 4) per query head; ALiBi slopes 2^(-8 (h + 1) / Hq), per batch times (b + 1) / B. */
fajit_status fj_check_variant_values(const fj_check_problem *p, int batch, uint64_t seed, float **sinks, float **alibi,
                                     int64_t *alibi_stride)
{
    uint64_t s = seed;
    *sinks = *alibi = NULL;
    if (p->sinks) {
        if (!(*sinks = malloc(sizeof(float) * (size_t)p->heads_q)))
            return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: sinks");
        for (int h = 0; h < p->heads_q; h++) (*sinks)[h] = (float)(-2.0 + 6.0 * rng_open01(&s));
    }
    if (p->alibi) {
        int rows = p->alibi == 2 ? batch : 1;
        if (!(*alibi = malloc(sizeof(float) * (size_t)rows * (size_t)p->heads_q)))
            return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "check: alibi slopes");
        for (int b = 0; b < rows; b++)
            for (int h = 0; h < p->heads_q; h++)
                (*alibi)[b * p->heads_q + h] =
                    (float)(pow(2.0, -8.0 * (h + 1) / p->heads_q) * (p->alibi == 2 ? (b + 1.0) / batch : 1.0));
        *alibi_stride = p->alibi == 2 ? p->heads_q : 0;
    }
    return FAJIT_OK;
}
