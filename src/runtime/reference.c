/*
 * reference.c - CPU float64 reference forward attention (see reference.h).
 *
 * Work is cut into items of REF_ROWS query rows of one (batch, query head), ordered so that
 * consecutive items share a kv head; worker threads take items from an atomic counter and keep the
 * current kv head's K and V converted to float (exact for f16 / bf16) in a private buffer. Products of
 * two floats are exact in double, so the only rounding is the double accumulation itself.
 */
#include "reference.h"
#include "variants.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "half.h"

enum {
    REF_ROWS = 32,      /* query rows per work item */
    REF_MAX_THREADS = 64
};
#define REF_SERIAL_MACS (1ll << 22) /* below this many multiply-adds, one thread */

/* ---------------------------------------------------------------------------------------------------
 * Arguments
 * ------------------------------------------------------------------------------------------------- */
fajit_status fj_reference_check_args(const fajit_attention_args *a, int max_head_dim)
{
    if (!a) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "reference: args is NULL");
    if (a->dtype != FAJIT_DTYPE_F16 && a->dtype != FAJIT_DTYPE_BF16)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "reference: dtype = %d: must be F16 (1) or BF16 (2)", (int)a->dtype);
    if (a->batch < 1 || a->heads_q < 1 || a->heads_kv < 1 || a->seqlen_q < 1 || a->seqlen_k < 1 || a->head_dim < 1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT,
                       "reference: batch %d, heads_q %d, heads_kv %d, seqlen_q %d, seqlen_k %d, head_dim %d: "
                       "all must be >= 1",
                       a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k, a->head_dim);
    if (a->heads_q % a->heads_kv != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "reference: heads_q = %d is not a multiple of heads_kv = %d",
                       a->heads_q, a->heads_kv);
    if (max_head_dim > 0 && a->head_dim > max_head_dim)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "reference: head_dim = %d: at most %d", a->head_dim, max_head_dim);
    return FAJIT_OK;
}

double fj_reference_scale(const fajit_attention_args *a)
{
    return a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->head_dim);
}

/* ---------------------------------------------------------------------------------------------------
 * One query row
 * ------------------------------------------------------------------------------------------------- */
typedef struct ref_job {
    const fajit_attention_args *a;
    const uint16_t *q, *k, *v;
    const int32_t *lens; /* per-sequence KV lengths, or NULL */
    fj_variant_args var; /* attention variants (fajit.h), read from the args */
    const float *sinks;  /* host [Hq], or NULL */
    const float *alibi;  /* host slopes (alibi_slopes_batch_stride apart per batch), or NULL */
    double *o, *lse;
    double scale;
    int64_t items_per_head; /* ceil(Nq / REF_ROWS) */
    int64_t n_items;
    atomic_llong next;
    atomic_int failed;
} ref_job;

typedef struct ref_scratch {
    float *kf, *vf; /* [Nk][D] of the current kv head */
    float *qf;      /* [D] */
    double *s;      /* [Nk] */
    int cur_b, cur_hk;
} ref_scratch;

/* Keys of sequence b: lens[b] clamped to [0, Nk], or Nk. */
static int64_t ref_seq_keys(const ref_job *job, int b)
{
    int64_t nk = job->a->seqlen_k;
    if (!job->lens) return nk;
    int64_t n = job->lens[b];
    return n < 0 ? 0 : (n > nk ? nk : n);
}

static int64_t floor_div(int64_t x, int64_t y) { return x >= 0 ? x / y : -((-x + y - 1) / y); }

/* Keys query row i of sequence b sees: [lo, hi) - fajit.h's definition, written out: the sequence's keys,
 * intersected with causal (j <= a), the window (a - left <= j <= a + right) and a's chunk, a = i + L - Nq. */
static void ref_keys_seen(const ref_job *job, int b, int64_t i, int64_t *lo, int64_t *hi)
{
    const fj_variant_args *v = &job->var;
    int64_t len = ref_seq_keys(job, b), a = i + len - job->a->seqlen_q;
    *lo = 0;
    *hi = len;
    if (job->a->causal && a + 1 < *hi) *hi = a + 1;
    if (v->window && v->window_left >= 0 && a - v->window_left > *lo) *lo = a - v->window_left;
    if (v->window && v->window_right >= 0 && !job->a->causal && a + v->window_right + 1 < *hi)
        *hi = a + v->window_right + 1;
    if (v->attention_chunk > 0) {
        int64_t c0 = floor_div(a, v->attention_chunk) * v->attention_chunk;
        if (c0 > *lo) *lo = c0;
        if (c0 + v->attention_chunk < *hi) *hi = c0 + v->attention_chunk;
    }
    if (*hi < *lo) *hi = *lo;
}

static void ref_row(const ref_job *job, ref_scratch *sc, int b, int h, int64_t i, double *orow, double *lse)
{
    const int dim = job->a->head_dim;
    const fj_variant_args *var = &job->var;
    int64_t j0, j1;
    ref_keys_seen(job, b, i, &j0, &j1);
    double sink = job->sinks ? (double)job->sinks[h] : -INFINITY;
    double slope = job->alibi ? (double)job->alibi[b * var->alibi_slopes_batch_stride + h] : 0.0;
    int64_t a = i + ref_seq_keys(job, b) - job->a->seqlen_q;
    if (j0 == j1) { /* sees no key: O = 0, LSE = -inf (or the sink) */
        memset(orow, 0, sizeof(double) * (size_t)dim);
        if (lse) *lse = sink;
        return;
    }
    double m = sink;
    for (int64_t j = j0; j < j1; j++) {
        const float *kr = sc->kf + j * dim;
        double acc[4] = {0.0, 0.0, 0.0, 0.0}; /* four chains: the adds need not wait on each other */
        int d = 0;
        for (; d + 4 <= dim; d += 4)
            for (int u = 0; u < 4; u++) acc[u] += (double)sc->qf[d + u] * (double)kr[d + u];
        for (; d < dim; d++) acc[0] += (double)sc->qf[d] * (double)kr[d];
        double sj = job->scale * ((acc[0] + acc[1]) + (acc[2] + acc[3]));
        if (var->softcap > 0.0f) sj = (double)var->softcap * tanh(sj / (double)var->softcap);
        if (job->alibi) sj -= slope * (double)(a > j ? a - j : j - a);
        sc->s[j] = sj;
        if (sc->s[j] > m) m = sc->s[j];
    }
    double l = job->sinks ? exp(sink - m) : 0.0;
    for (int64_t j = j0; j < j1; j++) {
        sc->s[j] = exp(sc->s[j] - m);
        l += sc->s[j];
    }
    memset(orow, 0, sizeof(double) * (size_t)dim);
    for (int64_t j = j0; j < j1; j++) {
        const float *vr = sc->vf + j * dim;
        for (int d = 0; d < dim; d++) orow[d] += sc->s[j] * (double)vr[d];
    }
    for (int d = 0; d < dim; d++) orow[d] /= l;
    if (lse) *lse = m + log(l);
}

/* ---------------------------------------------------------------------------------------------------
 * Work items
 * ------------------------------------------------------------------------------------------------- */
static void ref_load_kv(const ref_job *job, ref_scratch *sc, int b, int hk)
{
    const fajit_attention_args *a = job->a;
    const int dim = a->head_dim;
    if (sc->cur_b == b && sc->cur_hk == hk) return;
    for (int64_t j = 0; j < a->seqlen_k; j++) {
        const uint16_t *kr = job->k + b * a->k_stride[0] + hk * a->k_stride[1] + j * a->k_stride[2];
        const uint16_t *vr = job->v + b * a->v_stride[0] + hk * a->v_stride[1] + j * a->v_stride[2];
        for (int d = 0; d < dim; d++) {
            sc->kf[j * dim + d] = fj_half_to_f32(a->dtype, kr[d]);
            sc->vf[j * dim + d] = fj_half_to_f32(a->dtype, vr[d]);
        }
    }
    sc->cur_b = b;
    sc->cur_hk = hk;
}

static void ref_item(const ref_job *job, ref_scratch *sc, int64_t item)
{
    const fajit_attention_args *a = job->a;
    const int dim = a->head_dim, group = a->heads_q / a->heads_kv;
    int64_t unit = item / job->items_per_head; /* b * Hq + h */
    int b = (int)(unit / a->heads_q), h = (int)(unit % a->heads_q);
    int64_t i0 = (item % job->items_per_head) * REF_ROWS;
    int64_t i1 = i0 + REF_ROWS < a->seqlen_q ? i0 + REF_ROWS : a->seqlen_q;
    ref_load_kv(job, sc, b, h / group);
    for (int64_t i = i0; i < i1; i++) {
        const uint16_t *qr = job->q + b * a->q_stride[0] + h * a->q_stride[1] + i * a->q_stride[2];
        for (int d = 0; d < dim; d++) sc->qf[d] = fj_half_to_f32(a->dtype, qr[d]);
        int64_t row = unit * a->seqlen_q + i;
        ref_row(job, sc, b, h, i, job->o + row * dim, job->lse ? job->lse + row : NULL);
    }
}

static void *ref_worker(void *arg)
{
    ref_job *job = arg;
    const fajit_attention_args *a = job->a;
    size_t kv = (size_t)a->seqlen_k * (size_t)a->head_dim;
    ref_scratch sc = {malloc(kv * sizeof(float)), malloc(kv * sizeof(float)),
                      malloc((size_t)a->head_dim * sizeof(float)), malloc((size_t)a->seqlen_k * sizeof(double)),
                      -1, -1};
    if (!sc.kf || !sc.vf || !sc.qf || !sc.s) {
        atomic_store(&job->failed, 1);
    } else {
        for (;;) {
            int64_t item = atomic_fetch_add(&job->next, 1);
            if (item >= job->n_items || atomic_load(&job->failed)) break;
            ref_item(job, &sc, item);
        }
    }
    free(sc.kf);
    free(sc.vf);
    free(sc.qf);
    free(sc.s);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------------------------------- */
static int ref_thread_count(const fajit_attention_args *a, int64_t n_items)
{
    double macs = (double)a->batch * a->heads_q * a->seqlen_q * (double)a->seqlen_k * a->head_dim;
    if (macs < (double)REF_SERIAL_MACS) return 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = cpus < 1 ? 1 : cpus;
    if (n > REF_MAX_THREADS) n = REF_MAX_THREADS;
    if (n > n_items) n = n_items;
    return (int)n;
}

fajit_status fj_reference_cpu(const fajit_attention_args *args, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, double *o, double *lse)
{
    return fj_reference_cpu_lens(args, NULL, q, k, v, o, lse);
}

fajit_status fj_reference_cpu_lens(const fajit_attention_args *args, const int32_t *lens, const uint16_t *q,
                                   const uint16_t *k, const uint16_t *v, double *o, double *lse)
{
    return fj_reference_cpu_variants(args, lens, NULL, NULL, q, k, v, o, lse);
}

fajit_status fj_reference_cpu_variants(const fajit_attention_args *args, const int32_t *lens, const float *sinks,
                                       const float *alibi, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                       double *o, double *lse)
{
    fajit_status st = fj_reference_check_args(args, 0);
    if (st != FAJIT_OK) return st;
    if (!q || !k || !v || !o)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_reference_cpu: q, k, v and o must not be NULL");
    if ((st = fj_variant_validate(args)) != FAJIT_OK) return st;

    ref_job job = {.a = args, .q = q, .k = k, .v = v, .lens = lens, .o = o, .lse = lse, .scale = fj_reference_scale(args),
                   .sinks = sinks, .alibi = alibi};
    fj_variant_read(args, &job.var);
    job.items_per_head = (args->seqlen_q + REF_ROWS - 1) / REF_ROWS;
    job.n_items = (int64_t)args->batch * args->heads_q * job.items_per_head;
    atomic_init(&job.next, 0);
    atomic_init(&job.failed, 0);

    pthread_t tid[REF_MAX_THREADS];
    int n = ref_thread_count(args, job.n_items), started = 0;
    for (int t = 1; t < n; t++, started++)
        if (pthread_create(&tid[t - 1], NULL, ref_worker, &job) != 0) break;
    ref_worker(&job); /* the calling thread works too */
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (atomic_load(&job.failed))
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_reference_cpu: no memory for K/V scratch (2 x %d x %d floats)",
                       args->seqlen_k, args->head_dim);
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Varlen: one dense reference call per sequence, scattered into the packed outputs
 * ------------------------------------------------------------------------------------------------- */
/* start = max(cu[b], 0), len = clamp(cu[b + 1] - cu[b], 0, cap): the kernels' reading of the arrays. */
static void ref_cu_bounds(const int32_t *cu, int b, int cap, int64_t *start, int64_t *len)
{
    int64_t n = (int64_t)cu[b + 1] - cu[b];
    *start = cu[b] < 0 ? 0 : cu[b];
    *len = n < 0 ? 0 : (n > cap ? cap : n);
}

/* One sequence: its query rows [qs, qs + lq) against lk keys of k0 / v0 (already offset), into the packed o / lse;
 * sinks ([Hq]) and alibi (the sequence's own slopes, [Hq]) host arrays or NULL. */
static fajit_status ref_varlen_seq(const fajit_attention_args *a, int64_t qs, int64_t lq, int64_t lk, int64_t total_q,
                                   const float *sinks, const float *alibi, const uint16_t *q, const uint16_t *k0,
                                   const uint16_t *v0, double *o, double *lse)
{
    const int64_t dim = a->head_dim, hq = a->heads_q;
    if (lk == 0) { /* sees no key: O = 0, LSE = -inf, or the sink (as fj_reference_cpu_variants' rows of no key) */
        for (int64_t i = 0; i < lq; i++)
            for (int64_t h = 0; h < hq; h++) {
                memset(o + ((qs + i) * hq + h) * dim, 0, sizeof(double) * (size_t)dim);
                if (lse) lse[h * total_q + qs + i] = sinks ? (double)sinks[h] : -INFINITY;
            }
        return FAJIT_OK;
    }
    fajit_attention_args s = *a;
    s.batch = 1;
    s.seqlen_q = (int)lq;
    s.seqlen_k = (int)lk;
    s.seqlens_k = 0;
    double *so = malloc(sizeof(double) * (size_t)(hq * lq * dim)), *sl = malloc(sizeof(double) * (size_t)(hq * lq));
    const uint16_t *q0 = q + qs * a->q_stride[2];
    fajit_status st = so && sl ? fj_reference_cpu_variants(&s, NULL, sinks, alibi, q0, k0, v0, so, sl)
                               : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_reference_cpu_varlen: no memory for a sequence");
    for (int64_t h = 0; st == FAJIT_OK && h < hq; h++)
        for (int64_t i = 0; i < lq; i++) {
            memcpy(o + ((qs + i) * hq + h) * dim, so + (h * lq + i) * dim, sizeof(double) * (size_t)dim);
            if (lse) lse[h * total_q + qs + i] = sl[h * lq + i];
        }
    free(so);
    free(sl);
    return st;
}

fajit_status fj_reference_cpu_varlen(const fajit_attention_args *args, const int32_t *cu_q, const int32_t *cu_k,
                                     const int32_t *lens, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                     double *o, double *lse)
{
    return fj_reference_cpu_varlen_variants(args, cu_q, cu_k, lens, NULL, NULL, q, k, v, o, lse);
}

fajit_status fj_reference_cpu_varlen_variants(const fajit_attention_args *args, const int32_t *cu_q,
                                              const int32_t *cu_k, const int32_t *lens, const float *sinks,
                                              const float *alibi, const uint16_t *q, const uint16_t *k,
                                              const uint16_t *v, double *o, double *lse)
{
    fajit_status st = fj_reference_check_args(args, 0);
    if (st != FAJIT_OK) return st;
    if (!cu_q || !q || !k || !v || !o)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_reference_cpu_varlen: cu_q, q, k, v and o must not be NULL");
    if ((st = fj_variant_validate(args)) != FAJIT_OK) return st;
    fj_variant_args var;
    fj_variant_read(args, &var);
    int64_t total_q = cu_q[args->batch];
    for (int b = 0; b < args->batch && st == FAJIT_OK; b++) {
        int64_t qs, lq, ks = 0, lk = args->seqlen_k;
        ref_cu_bounds(cu_q, b, args->seqlen_q, &qs, &lq);
        if (cu_k) ref_cu_bounds(cu_k, b, args->seqlen_k, &ks, &lk);
        if (lens) lk = lens[b] < 0 ? 0 : (lens[b] < lk ? lens[b] : lk);
        if (lq == 0) continue;
        int64_t ko = cu_k ? ks * args->k_stride[2] : b * args->k_stride[0];
        int64_t vo = cu_k ? ks * args->v_stride[2] : b * args->v_stride[0];
        const float *slopes = alibi ? alibi + b * var.alibi_slopes_batch_stride : NULL;
        st = ref_varlen_seq(args, qs, lq, lk, total_q, sinks, slopes, q, k + ko, v + vo, o, lse);
    }
    return st;
}
