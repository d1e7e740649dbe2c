/*
 * tune_decode.c - the split count of decode classes (issue 11): the class key, the lookup that
 * fj_decode_splits_for (decode.c) makes for a call with num_splits = 0, the candidates and the timing
 * run that `fagen tune --grid decode` drives (fj_tune_decode). Line format: tune_file.h.
 *
 * The class is what sets the split-KV grid and the work of one split: B x Hkv (CTAs per row block),
 * the GQA group and whether it is packed (rows per CTA, CTAs per KV head), Nq (row blocks), Nk (KV tiles
 * per split), plus dtype, head dim and the mask (the tile). B x Hkv, Nq and Nk are bucketed at powers of
 * two: within a bucket the CTA count and the KV length change by less than 2x, which moves the best
 * count by less than the candidates' spacing. A winner also names the tile it was timed on, and is used
 * only on that tile.
 *
 * fj_tune_decode, step by step: the heuristic's choice for the shape (fj_decode_heuristic: tile, splits,
 * packing); the candidates (fj_tune_decode_candidates); inputs (tune_time.c); each candidate checked once
 * against the first (rel L2 of both ends of O); then FJ_TUNE_DECODE_ROUNDS rounds, each timing every
 * candidate once (its own >= 100 ms settle, then the timed calls; tune_time.c), the order rotated per
 * round, so clock drift hits every candidate alike; the winner is the best median over the rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "decode.h"
#include "base/error.h"
#include "tune.h"

#define FJ_TUNE_DECODE_ROUNDS 3
#define FJ_TUNE_DECODE_KCLASS_MIN 128

/* ---------------------------------------------------------------------------------------------------
 * Class key and lookup
 * ------------------------------------------------------------------------------------------------- */
static int pow2_at_least(long long v, int lo)
{
    long long c = lo;
    while (c < v && c < (1LL << 30)) c *= 2;
    return (int)c;
}

void fj_tune_decode_key(const fajit_context *ctx, const fajit_attention_args *a, int packed, fj_tune_key *key)
{
    fajit_dtype dtype = a->dtype == FAJIT_DTYPE_AUTO ? FAJIT_DTYPE_BF16 : a->dtype;
    fj_tune_key_make(ctx, dtype, a->head_dim, a->causal && a->seqlen_q > 1, pow2_at_least(a->seqlen_k,
                     FJ_TUNE_DECODE_KCLASS_MIN), key);
    key->decode = 1;
    key->kv_heads = pow2_at_least((long long)a->batch * a->heads_kv, 1);
    key->group = a->heads_kv > 0 ? a->heads_q / a->heads_kv : 1;
    key->seqlen_q = pow2_at_least(a->seqlen_q, 1);
    key->packed = packed && key->group > 1;
}

int fj_tune_decode_find(fajit_context *ctx, const fajit_attention_args *a, int packed, int block_m, int block_n,
                        int *splits)
{
    fj_tune_key key;
    fj_tune_record rec;
    if (!ctx || !ctx->device_name[0]) return 0; /* no identity, no winners (and no lock taken) */
    fj_tune_decode_key(ctx, a, packed, &key);
    if (!fj_tune_table_find(ctx, &key, &rec) || rec.tile_m != block_m || rec.tile_n != block_n) return 0;
    *splits = rec.splits;
    return 1;
}

/* ---------------------------------------------------------------------------------------------------
 * Candidates
 * ------------------------------------------------------------------------------------------------- */
static void cand_add(const fajit_attention_args *a, long long tiles, long long s, int *out, int *n, int cap)
{
    if (s < 1 || s > tiles || !fj_decode_split_fits(a, (int)s) || *n >= cap) return;
    for (int i = 0; i < *n; i++)
        if (out[i] == s) return;
    out[(*n)++] = (int)s;
}

static int int_compare(const void *pa, const void *pb) { return *(const int *)pa - *(const int *)pb; }

int fj_tune_decode_candidates(const fajit_attention_args *a, int packed, int block_m, int block_n, int sm_count,
                              int heuristic, int *out, int cap)
{
    long long ctas = fj_decode_ctas(a, packed, block_m), tiles = ((long long)a->seqlen_k + block_n - 1) / block_n;
    int n = 0;
    if (ctas < 1) ctas = 1;
    if (tiles < 1) tiles = 1;
    cand_add(a, tiles, heuristic, out, &n, cap); /* first, so a cap never drops it */
    cand_add(a, tiles, 1, out, &n, cap);
    cand_add(a, tiles, heuristic / 2, out, &n, cap);
    cand_add(a, tiles, 2LL * heuristic, out, &n, cap);
    for (int per_sm = 1; per_sm <= 3 && sm_count > 0; per_sm++) /* 1, 2, 3 CTAs per SM in one wave */
        cand_add(a, tiles, (per_sm * (long long)sm_count + ctas - 1) / ctas, out, &n, cap);
    qsort(out, (size_t)n, sizeof *out, int_compare);
    return n;
}

/* ---------------------------------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------------------------------- */
typedef struct decode_run {
    fajit_context *ctx;
    fajit_tune_options o;
    fj_tune_decode_result *res;
    int cands[FJ_TUNE_DECODE_MAX_CANDIDATES], n;
    double ms[FJ_TUNE_DECODE_MAX_CANDIDATES][FJ_TUNE_DECODE_ROUNDS];
    int ok[FJ_TUNE_DECODE_MAX_CANDIDATES];
    double kv_bytes;
} decode_run;

/* A note of run r: dnote(r, index, gbs, fmt, ...); no config (the progress callback gets cfg NULL). */
#define dnote(r, index, ...) fj_tune_note(&(r)->o, (r)->n, index, NULL, __VA_ARGS__)

static void set_splits(fj_tune_bench *b, int splits)
{
    for (int i = 0; i < b->n_sets; i++) b->args[i].num_splits = splits;
}

static double gbs_at(const decode_run *r, double ms) { return r->kv_bytes / (ms * 1e-3) / 1e9; }

/* Check every candidate once against the first that ran cleanly; a wrong or failing one is dropped. */
static fajit_status check_all(decode_run *r, fj_tune_bench *b)
{
    for (int i = 0; i < r->n; i++) {
        double err = 0;
        set_splits(b, r->cands[i]);
        fajit_status st = fj_tune_bench_check(b, NULL, &err);
        if (st == FAJIT_OK && err >= 0 && err <= b->tol) {
            r->ok[i] = 1;
            continue;
        }
        if (st != FAJIT_OK && fj_tune_bench_alive(b) != FAJIT_OK)
            return fj_fail(FAJIT_ERR_CUDA, "fj_tune_decode: the CUDA context is unusable after %d splits (%s)",
                           r->cands[i], fajit_errmsg());
        if (st != FAJIT_OK) dnote(r, i, -1.0, "%d splits: skip: %s", r->cands[i], fajit_errmsg());
        else
            dnote(r, i, -1.0, "%d splits: skip: wrong result (rel err %.2e, tolerance %.0e)", r->cands[i], err, b->tol);
    }
    return FAJIT_OK;
}

/* The rounds: each checked candidate timed once per round, the order rotated; then the medians. */
static fajit_status time_rounds(decode_run *r, fj_tune_bench *b)
{
    for (int round = 0; round < FJ_TUNE_DECODE_ROUNDS; round++)
        for (int j = 0; j < r->n; j++) {
            int i = (j + round) % r->n;
            if (!r->ok[i]) continue;
            set_splits(b, r->cands[i]);
            fajit_status st = fj_tune_bench_time(b, NULL, r->o.warmup, &r->ms[i][round]);
            if (st == FAJIT_OK) continue;
            if (fj_tune_bench_alive(b) != FAJIT_OK) return st;
            dnote(r, i, -1.0, "%d splits: skip: %s", r->cands[i], fajit_errmsg());
            r->ok[i] = 0;
        }
    fj_tune_decode_result *res = r->res;
    for (int i = 0; i < r->n; i++) {
        if (!r->ok[i]) continue;
        double m = fj_sort_median(r->ms[i], FJ_TUNE_DECODE_ROUNDS), gbs = gbs_at(r, m);
        int heuristic = r->cands[i] == res->heuristic_splits;
        res->timed++;
        if (heuristic) res->heuristic_gbs = gbs;
        if (!res->found || gbs > res->gbs) res->found = 1, res->splits = r->cands[i], res->gbs = gbs;
        dnote(r, i, gbs, "%4d splits: %6.0f GB/s, median of %d rounds %.4f ms%s", r->cands[i], gbs,
              FJ_TUNE_DECODE_ROUNDS, m, heuristic ? " (heuristic)" : "");
    }
    if (!res->found) return fj_fail(FAJIT_ERR_INTERNAL, "fj_tune_decode: none of the %d split counts ran", r->n);
    return FAJIT_OK;
}

/* File the winner in the context and, when asked, in the tune file. */
static void decode_keep(decode_run *r, const fajit_attention_args *a)
{
    fj_tune_record rec;
    char when[32], why[512];
    time_t t = time(NULL);
    struct tm tm;
    memset(&rec, 0, sizeof rec);
    rec.key = r->res->key;
    rec.splits = r->res->splits, rec.tile_m = r->res->tile_m, rec.tile_n = r->res->tile_n;
    rec.tflops = r->res->gbs;
    if (!gmtime_r(&t, &tm) || !strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm)) snprintf(when, sizeof when, "?");
    snprintf(rec.note, sizeof rec.note, "B%d H%d/%d N%d/%d, splits %d..%d timed, heuristic %d splits %.0f GB/s, %s",
             a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k, r->cands[0], r->cands[r->n - 1],
             r->res->heuristic_splits, r->res->heuristic_gbs, when);
    fj_tune_table_put(r->ctx, &rec);
    if (!r->o.persist) return;
    if (!r->ctx->tune_path[0]) {
        dnote(r, -1, -1.0, "not saved: the disk cache is off, so there is no tune file");
    } else if (fj_tune_file_merge(r->ctx->tune_path, &rec, 1, why, sizeof why) != NULL) {
        dnote(r, -1, -1.0, "not saved: %s", why);
    } else {
        r->res->saved = 1;
    }
}

static fajit_status decode_measure(decode_run *r, const fajit_attention_args *a)
{
    fj_tune_bench *b = calloc(1, sizeof *b);
    if (!b) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_tune_decode: out of host memory");
    fajit_status st = fj_tune_bench_open(r->ctx, a, r->o.reps, b);
    if (st == FAJIT_OK) {
        dnote(r, -1, -1.0, "B%d H%d/%d Nq%d Nk%d d%d on %s: tile br%d bc%d, %s, %d input sets; heuristic %d splits; "
                           "%d candidates, %d interleaved rounds", a->batch, a->heads_q, a->heads_kv, a->seqlen_q,
              a->seqlen_k, a->head_dim, r->ctx->device_name, r->res->tile_m, r->res->tile_n,
              r->res->key.packed ? "GQA packed" : "not packed", b->n_sets, r->res->heuristic_splits, r->n,
              FJ_TUNE_DECODE_ROUNDS);
        st = check_all(r, b);
        if (st == FAJIT_OK) st = time_rounds(r, b);
        fj_tune_bench_close(b);
    }
    free(b);
    return st;
}

static fajit_status decode_shape_check(const fajit_attention_args *a)
{
    if (a->seqlen_q < 1 || a->seqlen_q > FJ_SPLIT_AUTO_MAX_SEQLEN_Q || a->seqlen_k < 1 || a->batch < 1 ||
        a->heads_kv < 1 || a->heads_q < 1 || a->heads_q % a->heads_kv)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_tune_decode: shape B%d H%d/%d Nq%d Nk%d: a decode class needs "
                                                   "1 <= Nq <= %d, Nk >= 1, Hq a multiple of Hkv",
                       a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k, FJ_SPLIT_AUTO_MAX_SEQLEN_Q);
    return FAJIT_OK;
}

fajit_status fj_tune_decode(fajit_context *ctx, const fajit_attention_args *shape, const fajit_tune_options *opts,
                            fj_tune_decode_result *res)
{
    fajit_attention_args a;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(res, 0, sizeof *res);
    fajit_attention_args_init(&a);
    a.dtype = shape->dtype == FAJIT_DTYPE_AUTO ? FAJIT_DTYPE_BF16 : shape->dtype;
    a.batch = shape->batch, a.heads_q = shape->heads_q, a.heads_kv = shape->heads_kv;
    a.seqlen_q = shape->seqlen_q, a.seqlen_k = shape->seqlen_k, a.head_dim = shape->head_dim, a.causal = shape->causal;
    fajit_args_set_bhnd_strides(&a);
    decode_run *r = calloc(1, sizeof *r);
    if (!r) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_tune_decode: out of host memory");
    r->ctx = ctx, r->res = res;
    r->o = opts ? *opts : fajit_tune_options_default();
    if (r->o.reps < FJ_TUNE_MIN_REPS) r->o.reps = FJ_TUNE_MIN_REPS;
    if (r->o.warmup <= 0) r->o.warmup = FJ_TUNE_DEFAULT_WARMUP; /* the settle step needs a warm-up to size it */
    r->kv_bytes = 2.0 * a.batch * a.heads_kv * (double)a.seqlen_k * a.head_dim * 2.0;
    fajit_status st = decode_shape_check(&a);
    if (st == FAJIT_OK) st = fj_context_require_device(ctx, "fj_tune_decode");
    int packed = 0;
    if (st == FAJIT_OK)
        st = fj_decode_heuristic(ctx, &a, &res->heuristic_splits, &res->tile_m, &res->tile_n, &packed);
    if (st == FAJIT_OK) {
        fj_tune_decode_key(ctx, &a, packed, &res->key);
        int cap = r->o.max_candidates > 0 && r->o.max_candidates < FJ_TUNE_DECODE_MAX_CANDIDATES
                      ? r->o.max_candidates : FJ_TUNE_DECODE_MAX_CANDIDATES;
        r->n = res->candidates = fj_tune_decode_candidates(&a, packed, res->tile_m, res->tile_n, ctx->sm_count,
                                                           res->heuristic_splits, r->cands, cap);
        st = decode_measure(r, &a);
    }
    if (st == FAJIT_OK) decode_keep(r, &a);
    free(r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return st;
}
