/*
 * tune.c - autotuning: shape classes, the search space of the sm_80 path, the context's table of
 * tuned winners (read from the tune file once, under the context's lock) with the hook
 * fajit_config_fill calls, and fajit_tune / fajit_tune_lookup.
 *
 * fajit_tune, step by step:
 *   1. the shape to time (zeros filled as in the issue-3 workload) and its sequence-length class
 *   2. the heuristic's config for it (without tuned winners): the first candidate and the baseline
 *   3. the search space, pruned by the plan rules and the device's shared memory, ordered by
 *      distance from the heuristic's config, cut at max_candidates
 *   4. inputs (tune_time.c); for each candidate: fajit_kernel_get (compile or cache), one checked run,
 *      then warm-up and timed calls; any failure skips the candidate with its reason
 *   5. the fastest is filed in the context's table and, when asked, merged into the tune file
 */
#include "tune.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "base/error.h"
#include "config_fill.h"
#include "forward.h"
#include "warm.h"

/* ---------------------------------------------------------------------------------------------------
 * Classes and keys
 * ------------------------------------------------------------------------------------------------- */
int fj_tune_seqlen_class(const fajit_shape *shape)
{
    if (!shape) return 0;
    int n = shape->seqlen_q > shape->seqlen_k ? shape->seqlen_q : shape->seqlen_k;
    if (n <= 0) return 0;
    int c = FJ_TUNE_CLASS_MIN;
    while (c < n && c < FJ_TUNE_CLASS_MAX) c *= 2;
    return c;
}

void fj_tune_key_make(const fajit_context *ctx, fajit_dtype dtype, int head_dim, int causal, int seqlen_class,
                      fj_tune_key *key)
{
    memset(key, 0, sizeof *key);
    fj_tune_clean_text(key->gpu, sizeof key->gpu, ctx->device_name);
    key->driver = ctx->driver_version;
    snprintf(key->codegen, sizeof key->codegen, "%s", FJ_CODEGEN_VERSION);
    key->dtype = dtype;
    key->head_dim = head_dim;
    key->causal = causal;
    key->seqlen_class = seqlen_class;
}

/* ---------------------------------------------------------------------------------------------------
 * The context's table of winners
 * ------------------------------------------------------------------------------------------------- */

/* Read the tune file into ctx->tuned, keeping the lines of this GPU, driver and codegen. Lock held. */
static void tuned_load_locked(fajit_context *ctx)
{
    fj_tune_list all = {0};
    fj_tune_key mine;
    ctx->tuned_loaded = 1;
    if (!ctx->tune_path[0]) return;
    fj_tune_key_make(ctx, FAJIT_DTYPE_BF16, 0, 0, 0, &mine);
    (void)fj_tune_file_read(ctx->tune_path, &all, NULL); /* a bad or unreadable file is an empty one */
    for (int i = 0; i < all.n; i++) {
        const fj_tune_key *k = &all.v[i].key;
        if (strcmp(k->gpu, mine.gpu) == 0 && k->driver == mine.driver && strcmp(k->codegen, mine.codegen) == 0)
            (void)fj_tune_list_put(&ctx->tuned, &all.v[i]);
    }
    fj_tune_list_free(&all);
}

int fj_tune_table_find(fajit_context *ctx, const fj_tune_key *key, fj_tune_record *rec)
{
    int found = 0;
    /* no identity, no winners: this test comes before the lock (see heuristic_config) */
    if (!ctx || !ctx->device_name[0]) return 0;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->tuned_loaded) tuned_load_locked(ctx);
    const fj_tune_record *r = fj_tune_list_find(&ctx->tuned, key);
    if (r) *rec = *r, found = 1;
    pthread_mutex_unlock(&ctx->lock);
    return found;
}

/* The winner for a class on ctx's GPU: 1 and *rec filled, or 0. */
static int tuned_find(fajit_context *ctx, const fajit_shape *shape, fajit_dtype dtype, int head_dim, int causal,
                      fj_tune_record *rec)
{
    fj_tune_key key;
    int cls = fj_tune_seqlen_class(shape);
    if (!ctx || !ctx->device_name[0] || !cls) return 0;
    fj_tune_key_make(ctx, dtype, head_dim, causal, cls, &key);
    return fj_tune_table_find(ctx, &key, rec);
}

void fj_tune_table_put(fajit_context *ctx, const fj_tune_record *rec)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->tuned_loaded) tuned_load_locked(ctx);
    (void)fj_tune_list_put(&ctx->tuned, rec);
    pthread_mutex_unlock(&ctx->lock);
}

/* cfg passes the plan rules and fits the device's shared memory (when the context knows it). */
static int config_fits(const fajit_context *ctx, const fajit_config *cfg)
{
    fj_plan plan;
    if (fj_plan_build(cfg, &plan) != FAJIT_OK) {
        fj_clear_error();
        return 0;
    }
    return ctx->smem_optin <= 0 || plan.smem_bytes <= ctx->smem_optin;
}

int fj_tune_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg)
{
    fj_tune_record rec;
    if (!ctx || !cfg || !tuned_find(ctx, shape, cfg->dtype, cfg->head_dim, cfg->causal, &rec)) return 0;
    if (cfg->arch != rec.cfg.arch) return 0;
    fajit_config m = *cfg;
    fj_config_overlay(&m, &rec.cfg);
    if (!config_fits(ctx, &m)) return 0; /* the caller's fields and the winner's do not go together */
    *cfg = m;
    return 1;
}

/* ---------------------------------------------------------------------------------------------------
 * The search space
 * ------------------------------------------------------------------------------------------------- */
typedef struct space_entry {
    fajit_config cfg;
    int dist, order;
} space_entry;

/* |log2(a / b)| for powers of two. */
static int log2_dist(int a, int b)
{
    int d = 0;
    while (a > b) a /= 2, d++;
    while (b > a) b /= 2, d++;
    return d;
}

/* The largest swizzle span whose 16-byte-chunk group divides the part of a head_dim row one warp reads
 * (all of it, or half with col_warps = 2; see plan.c). */
static int swizzle_max(int head_dim, int col_warps)
{
    int chunks = head_dim / 8 / col_warps;
    return chunks % 8 == 0 ? 128 : chunks % 4 == 0 ? 64 : chunks % 2 == 0 ? 32 : FAJIT_SWIZZLE_NONE;
}

static int swizzle_next(int sw) { return sw == 128 ? 64 : sw == 64 ? 32 : FAJIT_SWIZZLE_NONE; }

/* Steps from the heuristic's config. sm_80: one per doubling of a tile or the warps, one per stage, one
 * for the other column split. sm_90a: one per consumer warpgroup, per 32 keys of block_n, per stage and
 * per schedule flag. Two priors push configs that rarely win behind the other neighbours: a single stage
 * (no copy/math overlap) when the heuristic pipelines, +3; a smaller swizzle than the heuristic's (bank
 * conflicts), +4. */
static int distance(const fajit_config *a, const fajit_config *h)
{
    int priors = abs(a->stages - h->stages) + 3 * (a->stages == 1 && h->stages > 1) + 4 * (a->swizzle != h->swizzle);
    if (a->arch == FAJIT_ARCH_SM90A)
        return abs(a->block_m - h->block_m) / 64 + abs(a->block_n - h->block_n) / 32 + (a->overlap != h->overlap) +
               (a->pingpong != h->pingpong) + priors;
    return log2_dist(a->block_m, h->block_m) + log2_dist(a->block_n, h->block_n) + log2_dist(a->warps, h->warps) +
           log2_dist(a->col_warps, h->col_warps) + priors;
}

static int entry_compare(const void *pa, const void *pb)
{
    const space_entry *a = pa, *b = pb;
    if (a->dist != b->dist) return a->dist - b->dist;
    return a->order - b->order;
}


/* Add c to the space unless it is there already; prune it when it breaks a rule or the device's limit. */
static void space_add(const fajit_context *ctx, const fajit_config *c, const fajit_config *h, space_entry *e, int *n,
                      int *space, int *pruned)
{
    fj_plan plan;
    const fj_arch_info *target;
    for (int i = 0; i < *n; i++)
        if (fj_config_same(&e[i].cfg, c)) return;
    (*space)++;
    if (fj_plan_build(c, &plan) != FAJIT_OK || fj_context_target(ctx, &plan, &target) != FAJIT_OK) {
        fj_clear_error();
        (*pruned)++;
        return;
    }
    if (*n >= FJ_TUNE_SPACE_MAX) return;
    e[*n].cfg = *c;
    e[*n].dist = fj_config_same(c, h) ? -1 : distance(c, h); /* the heuristic's own config goes first */
    e[*n].order = *n;
    (*n)++;
}

/* The sm_80 tiles: 4 or 8 warps with one or two 16-row fragments each, block_n 32..128, 1..4 stages, the
 * widest swizzle a row allows and the next, warp pairs from FJ_TUNE_COL_SPLIT_MIN_D. */
static void space_sm80(const fajit_context *ctx, const fajit_config *first, space_entry *e, int *n, int *space,
                       int *pruned)
{
    static const int warps[] = {4, 8}, m_frags[] = {1, 2}, block_n[] = {64, 128, 32};
    /* warp pairs (col_warps 2) only where a warp's O for two 16-row fragments needs more than half the
     * registers (head_dim >= 192): below it one warp owns those rows whole, with no exchange */
    int col_splits = first->head_dim >= FJ_TUNE_COL_SPLIT_MIN_D ? 2 : 1;
    for (int cw = 1; cw <= col_splits; cw++) {
        int sw0 = swizzle_max(first->head_dim, cw);
        const int swizzles[2] = {sw0, swizzle_next(sw0)};
        for (int wi = 0; wi < 2; wi++)
            for (int mi = 0; mi < 2; mi++)
                for (int ni = 0; ni < 3; ni++)
                    for (int stages = 1; stages <= 4; stages++)
                        for (int si = 0; si < 2; si++) {
                            fajit_config c = *first;
                            c.warps = warps[wi];
                            c.col_warps = cw;
                            c.block_m = 16 * warps[wi] / cw * m_frags[mi];
                            c.block_n = block_n[ni];
                            c.stages = stages;
                            c.swizzle = swizzles[si];
                            space_add(ctx, &c, first, e, n, space, pruned);
                        }
    }
}

/* The sm_90a tiles: 1-3 consumer warpgroups, block_n 64..192 in steps of 16 (and 256), 1..3 stages,
 * overlap and ping-pong on or off, the widest swizzle the row allows. The register and smem budgets
 * prune most of the large ones. */
static void space_sm90(const fajit_context *ctx, const fajit_config *first, space_entry *e, int *n, int *space,
                       int *pruned)
{
    static const int block_n[] = {64, 80, 96, 112, 128, 144, 160, 176, 192, 256};
    static const int block_n_fp8[] = {64, 96, 128, 160, 192, 224, 256, 0, 0, 0}; /* k32: multiples of 32 */
    static const int flags[][2] = {{1, 1}, {1, -1}, {-1, -1}};
    const int *bns = first->dtype == FAJIT_DTYPE_E4M3 ? block_n_fp8 : block_n;
    for (int wg = 1; wg <= 3; wg++)
        for (size_t ni = 0; ni < sizeof block_n / sizeof block_n[0] && bns[ni]; ni++)
            for (int stages = 1; stages <= 3; stages++)
                for (int fi = 0; fi < 3; fi++) {
                    fajit_config c = *first;
                    c.block_m = 64 * wg;
                    c.warps = 4 * (wg + 1);
                    c.block_n = bns[ni];
                    c.stages = stages;
                    c.overlap = flags[fi][0];
                    c.pingpong = wg > 1 ? flags[fi][1] : -1;
                    space_add(ctx, &c, first, e, n, space, pruned);
                }
}

int fj_tune_space(const fajit_context *ctx, const fajit_config *first, fajit_config *out, int cap, int *space,
                  int *pruned)
{
    space_entry *e = calloc(FJ_TUNE_SPACE_MAX, sizeof *e);
    int n = 0;
    *space = *pruned = 0;
    if (!e) return 0;
    space_add(ctx, first, first, e, &n, space, pruned);
    if (first->arch == FAJIT_ARCH_SM90A) space_sm90(ctx, first, e, &n, space, pruned);
    else space_sm80(ctx, first, e, &n, space, pruned);
    qsort(e, (size_t)n, sizeof *e, entry_compare);
    int count = n < cap ? n : cap;
    for (int i = 0; i < count; i++) out[i] = e[i].cfg;
    free(e);
    return count;
}

/* ---------------------------------------------------------------------------------------------------
 * fajit_tune: arguments
 * ------------------------------------------------------------------------------------------------- */
fajit_tune_options fajit_tune_options_default(void)
{
    fajit_tune_options o;
    memset(&o, 0, sizeof o);
    o.max_candidates = FJ_TUNE_DEFAULT_CANDIDATES;
    o.reps = FJ_TUNE_MIN_REPS;
    o.warmup = FJ_TUNE_DEFAULT_WARMUP;
    o.persist = 1;
    return o;
}

static fajit_status options_resolve(const fajit_tune_options *in, fajit_tune_options *o)
{
    *o = in ? *in : fajit_tune_options_default();
    if (o->max_candidates == 0) o->max_candidates = FJ_TUNE_DEFAULT_CANDIDATES;
    if (o->reps == 0) o->reps = FJ_TUNE_MIN_REPS;
    if (o->warmup == 0) o->warmup = FJ_TUNE_DEFAULT_WARMUP;
    if (o->warmup == -1) o->warmup = 0;
    if (o->max_candidates < 1 || o->max_candidates > 1000)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->max_candidates = %d: must be 1..1000 (0 = %d)",
                       o->max_candidates, FJ_TUNE_DEFAULT_CANDIDATES);
    if (o->reps < FJ_TUNE_MIN_REPS || o->reps > 100000)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->reps = %d: must be %d..100000 (a median of fewer calls is "
                                                   "noise; 0 = %d)", o->reps, FJ_TUNE_MIN_REPS, FJ_TUNE_MIN_REPS);
    if (o->warmup < 0 || o->warmup > 100000)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->warmup = %d: must be 0..100000 (0 = %d, -1 = none)",
                       o->warmup, FJ_TUNE_DEFAULT_WARMUP);
    if (!(o->time_budget_s >= 0.0) || !isfinite(o->time_budget_s))
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->time_budget_s = %g: must be >= 0 (0 = no limit)",
                       o->time_budget_s);
    if (o->persist != 0 && o->persist != 1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->persist = %d: must be 0 or 1", o->persist);
    return FAJIT_OK;
}

static fajit_status check_problem(fajit_dtype dtype, int head_dim, int causal)
{
    if (dtype != FAJIT_DTYPE_F16 && dtype != FAJIT_DTYPE_BF16 && dtype != FAJIT_DTYPE_E4M3)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "dtype = %d: must be FAJIT_DTYPE_F16 (1), FAJIT_DTYPE_BF16 (2), "
                                                   "FAJIT_DTYPE_E4M3 (3) or AUTO (0, = bf16)", (int)dtype);
    if (dtype == FAJIT_DTYPE_E4M3 && head_dim != 64 && head_dim != 128 && head_dim != 256)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "head_dim = %d with dtype e4m3: must be 64, 128 or 256", head_dim);
    if (head_dim != 64 && head_dim != 96 && head_dim != 128 && head_dim != 192 && head_dim != 256)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "head_dim = %d: must be 64, 96, 128, 192 or 256", head_dim);
    if (causal != 0 && causal != 1) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "causal = %d: must be 0 or 1", causal);
    return FAJIT_OK;
}

/* The shape to time: zeros as in the issue-3 workload (B * N = 16384 tokens, H * D = 2048). */
static fajit_status tune_shape(const fajit_shape *in, int head_dim, fajit_shape *s)
{
    if (in) *s = *in;
    else memset(s, 0, sizeof *s);
    if (s->batch < 0 || s->heads_q < 0 || s->heads_kv < 0 || s->seqlen_q < 0 || s->seqlen_k < 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "shape: negative size (batch %d, heads %d/%d, seqlen %d/%d)",
                       s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k);
    if (!s->seqlen_q && !s->seqlen_k) s->seqlen_q = s->seqlen_k = 4096;
    if (!s->seqlen_q) s->seqlen_q = s->seqlen_k;
    if (!s->seqlen_k) s->seqlen_k = s->seqlen_q;
    int n = s->seqlen_q > s->seqlen_k ? s->seqlen_q : s->seqlen_k;
    if (!s->batch) s->batch = 16384 / n > 1 ? 16384 / n : 1;
    if (!s->heads_q) s->heads_q = 2048 / head_dim;
    if (!s->heads_kv) s->heads_kv = s->heads_q;
    if (s->heads_q % s->heads_kv != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "shape: heads_q = %d is not a multiple of heads_kv = %d",
                       s->heads_q, s->heads_kv);
    /* the forward's limits (grid, 32-bit row counts), so the sizes of the timed inputs cannot overflow */
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16, a.head_dim = head_dim;
    a.batch = s->batch, a.heads_q = s->heads_q, a.heads_kv = s->heads_kv, a.seqlen_q = s->seqlen_q;
    a.seqlen_k = s->seqlen_k;
    a.q = a.k = a.v = a.o = 256; /* stand-ins: only the shape is checked */
    fajit_args_set_bhnd_strides(&a);
    fajit_status st = fj_forward_validate(&a, NULL);
    return st == FAJIT_OK ? FAJIT_OK : fj_fail_context(st, "fajit_tune: shape");
}

/* tune.h. The fill on ctx itself, so its compute capability picks the path: a context copy that carried only some of
 * the device's identity once made every tune on an H100 / H200 search the sm_80 space. */
fajit_status fj_tune_heuristic(fajit_context *ctx, const fajit_shape *shape, fajit_config *c)
{
    return fj_config_fill_default(ctx, shape, c);
}

/* ---------------------------------------------------------------------------------------------------
 * fajit_tune: the run
 * ------------------------------------------------------------------------------------------------- */
typedef struct tune_run {
    fajit_context *ctx;
    fajit_tune_options o;
    fajit_tune_result res;
    fajit_shape shape;
    fajit_config *cands;
    int n;
    int first_is_heuristic; /* cands[0] is the heuristic's config (not pruned by the device) */
    double t0;
    double *first_ms;       /* first-pass median per candidate, 0 when it was not timed */
    fajit_status first_fail;
    char first_msg[512];
} tune_run;

void fj_tune_note(const fajit_tune_options *o, int total, int index, const fajit_config *cfg, double rate,
                  const char *fmt, ...)
{
    char text[768];
    va_list ap;
    if (!o->progress) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    o->progress(o->progress_user, index, total, cfg, rate, text);
}

/* A note of run r: note(r, index, cfg, tflops, fmt, ...). */
#define note(r, ...) fj_tune_note(&(r)->o, (r)->n, __VA_ARGS__)

/* Skip candidate i: tell the callback, remember the first failure. */
static void skip(tune_run *r, int i, fajit_status st, const char *why)
{
    r->res.skipped++;
    if (r->first_fail == FAJIT_OK) {
        r->first_fail = st == FAJIT_OK ? FAJIT_ERR_INTERNAL : st;
        snprintf(r->first_msg, sizeof r->first_msg, "%s", why);
    }
    note(r, i, &r->cands[i], -1.0, "%s", why);
}

static double tflops_at(const fj_tune_bench *b, double ms) { return b->flops / (ms * 1e-3) / 1e12; }

/* One candidate: kernel, checked run, timing. 0 = timed or skipped, -1 = the CUDA context died. */
static int run_candidate(tune_run *r, fj_tune_bench *b, int i)
{
    const fajit_config *c = &r->cands[i];
    fajit_kernel *k = NULL;
    fajit_kernel_info info;
    double err = 0, ms = 0;
    char msg[512];
    fajit_status st = fajit_kernel_get(r->ctx, c, &k, NULL);
    if (st == FAJIT_OK) {
        fajit_kernel_get_info(k, &info);
        if (info.spill_bytes > 0) {
            /* the register model (plan) admits it, but ptxas spilled: never a winner */
            snprintf(msg, sizeof msg, "spills: %d bytes of local memory per thread (ptxas), %d registers", info.spill_bytes,
                     info.registers);
            skip(r, i, FAJIT_ERR_INVALID_CONFIG, msg);
            return 0;
        }
    }
    if (st == FAJIT_OK) st = fj_tune_bench_check(b, c, &err);
    if (st == FAJIT_OK && (err < 0 || err > b->tol)) {
        if (err < 0) snprintf(msg, sizeof msg, "wrong result: NaN, Inf or unwritten elements in O");
        else snprintf(msg, sizeof msg, "wrong result: ||O - O_first|| / ||O_first|| = %.2e > %.0e", err, b->tol);
        skip(r, i, FAJIT_ERR_INTERNAL, msg);
        return 0;
    }
    if (st == FAJIT_OK) st = fj_tune_bench_time(b, c, r->o.warmup, &ms);
    if (st != FAJIT_OK) {
        snprintf(msg, sizeof msg, "%s", fajit_errmsg());
        skip(r, i, st, msg);
        return st == FAJIT_ERR_CUDA && fj_tune_bench_alive(b) != FAJIT_OK ? -1 : 0;
    }
    double tflops = tflops_at(b, ms);
    r->res.timed++;
    r->first_ms[i] = ms;
    int heuristic = i == 0 && r->first_is_heuristic;
    if (heuristic) r->res.heuristic_tflops = tflops;
    if (!r->res.found || ms < r->res.median_ms) {
        r->res.found = 1;
        r->res.best = *c;
        r->res.median_ms = ms;
        r->res.tflops = tflops;
    }
    note(r, i, c, tflops, "%.3f ms, %d regs%s", ms, info.registers, heuristic ? " (heuristic)" : "");
    return 0;
}

/* The first pass times candidates one after another, minutes apart, and the H100's clocks drift with
 * its power and temperature over that span: configs within a few percent can swap places between
 * runs. So the fastest few (within FJ_TUNE_FINAL_WITHIN of the best) are timed again, interleaved -
 * A B C, A B C, ... FJ_TUNE_FINAL_ROUNDS times - and the winner is the best median over the rounds;
 * drift then hits every finalist alike. The window is wide because the first candidate of a class
 * runs on a GPU that idled while the inputs were filled, and has read 7% high (one outlier must not
 * shut the real contenders out). */
static fajit_status final_round(tune_run *r, fj_tune_bench *b)
{
    int fin[FJ_TUNE_FINALISTS], nf = 0;
    double best = r->res.median_ms;
    for (int i = 0; i < r->n; i++) { /* the nf fastest, kept sorted by first-pass time */
        double t = r->first_ms[i];
        if (!(t > 0) || t > best * (1.0 + FJ_TUNE_FINAL_WITHIN)) continue;
        if (nf == FJ_TUNE_FINALISTS && t >= r->first_ms[fin[nf - 1]]) continue;
        int at = nf < FJ_TUNE_FINALISTS ? nf++ : nf - 1;
        for (; at > 0 && r->first_ms[fin[at - 1]] > t; at--) fin[at] = fin[at - 1];
        fin[at] = i;
    }
    if (nf < 2) return FAJIT_OK;
    double ms[FJ_TUNE_FINALISTS][FJ_TUNE_FINAL_ROUNDS];
    note(r, -1, NULL, -1.0, "final round: the %d fastest (within %.0f%% of the best) timed again, interleaved, %d rounds",
         nf, 100.0 * FJ_TUNE_FINAL_WITHIN, FJ_TUNE_FINAL_ROUNDS);
    for (int round = 0; round < FJ_TUNE_FINAL_ROUNDS; round++)
        for (int f = 0; f < nf; f++) {
            fajit_status st = fj_tune_bench_time(b, &r->cands[fin[f]], r->o.warmup, &ms[f][round]);
            if (st != FAJIT_OK) {
                note(r, -1, NULL, -1.0, "final round stopped (%s); the first pass's winner stands", fajit_errmsg());
                if (fj_tune_bench_alive(b) == FAJIT_OK) return FAJIT_OK;
                return fj_fail(FAJIT_ERR_CUDA, "fajit_tune: the CUDA context is unusable after the final round");
            }
        }
    int win = -1;
    double win_ms = 0;
    for (int f = 0; f < nf; f++) {
        double m = fj_sort_median(ms[f], FJ_TUNE_FINAL_ROUNDS);
        const fajit_config *c = &r->cands[fin[f]];
        note(r, fin[f], c, tflops_at(b, m), "final: median of %d rounds %.3f ms (first pass %.3f ms)",
             FJ_TUNE_FINAL_ROUNDS, m, r->first_ms[fin[f]]);
        if (win < 0 || m < win_ms) win = fin[f], win_ms = m;
    }
    r->res.best = r->cands[win];
    r->res.median_ms = win_ms;
    r->res.tflops = tflops_at(b, win_ms);
    return FAJIT_OK;
}

/* Compile ahead: the candidates' kernels are built on every core at once (fajit_warm's engine, warm.c) before
 * any is timed (a whole-program compile takes 0.3-1 s); the timing loop then finds them in the context's
 * memory cache. A failure here is ignored: the candidate's own fajit_kernel_get reports it. The time
 * budget stops the compiling too (the rest compile as they are timed). */
static void precompile_all(tune_run *r)
{
    fajit_warm_result w;
    double budget = r->o.time_budget_s;
    fj_warm_request rq = {r->ctx, r->cands, NULL, r->n, 0, NULL, budget > 0 ? r->t0 + budget : 0.0, 0, 0, NULL, NULL};
    if (r->n < 2) return;
    if (fj_warm_run(&rq, &w) != FAJIT_OK) fj_clear_error();
    note(r, -1, NULL, -1.0, "%d candidates compiled (or found in the caches) on %d threads in %.1f s", r->n,
         w.threads, w.seconds);
}

/* Time the candidates in order until done, out of budget, or the CUDA context fails. */
static fajit_status run_all(tune_run *r, fj_tune_bench *b)
{
    precompile_all(r);
    for (int i = 0; i < r->n; i++) {
        double spent = fj_now_ms() / 1e3 - r->t0;
        if (r->o.time_budget_s > 0 && spent > r->o.time_budget_s && r->res.timed > 0) {
            note(r, -1, NULL, -1.0, "time budget of %.1f s spent after %d of %d candidates", r->o.time_budget_s, i,
                 r->n);
            break;
        }
        if (run_candidate(r, b, i) != 0) {
            r->res.found = 0;
            return fj_fail(FAJIT_ERR_CUDA, "fajit_tune: the CUDA context is unusable after candidate %d (%s); no "
                                           "winner is kept", i + 1, r->first_msg);
        }
    }
    if (r->res.found) return final_round(r, b);
    return fj_fail(r->first_fail, "fajit_tune: none of the %d candidates could be timed; the first failed with: %s",
                   r->n, r->first_msg);
}

/* The record of the winner, with a note for a person. */
static void winner_record(const tune_run *r, fajit_dtype dtype, int head_dim, int causal, fj_tune_record *rec)
{
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    memset(rec, 0, sizeof *rec);
    fj_tune_key_make(r->ctx, dtype, head_dim, causal, r->res.seqlen_class, &rec->key);
    rec->cfg = r->res.best;
    rec->tflops = r->res.tflops;
    if (!gmtime_r(&t, &tm) || !strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm)) snprintf(when, sizeof when, "?");
    snprintf(rec->note, sizeof rec->note, "B%d H%d/%d N%d/%d, %d timed, heuristic %.1f TFLOP/s, %s", r->shape.batch,
             r->shape.heads_q, r->shape.heads_kv, r->shape.seqlen_q, r->shape.seqlen_k, r->res.timed,
             r->res.heuristic_tflops, when);
}

/* File the winner in the context and, when asked, in the tune file. */
static void winner_keep(tune_run *r, fajit_dtype dtype, int head_dim, int causal)
{
    fj_tune_record rec;
    char why[512];
    winner_record(r, dtype, head_dim, causal, &rec);
    fj_tune_table_put(r->ctx, &rec);
    fj_context_choices_clear(r->ctx);
    if (!r->o.persist) return;
    if (!r->ctx->tune_path[0]) {
        note(r, -1, NULL, -1.0, "not saved: the disk cache is off, so there is no tune file");
        return;
    }
    if (fj_tune_file_merge(r->ctx->tune_path, &rec, 1, why, sizeof why) != NULL) {
        note(r, -1, NULL, -1.0, "not saved: %s", why);
        return;
    }
    r->res.saved = 1;
}

static fajit_status tune_prepare(tune_run *r, const fajit_shape *shape, fajit_dtype dtype, int head_dim, int causal,
                                 fajit_config *heuristic)
{
    fajit_status st = tune_shape(shape, head_dim, &r->shape);
    if (st != FAJIT_OK) return st;
    r->res.seqlen_class = fj_tune_seqlen_class(&r->shape);
    memset(heuristic, 0, sizeof *heuristic);
    heuristic->dtype = dtype;
    heuristic->head_dim = head_dim;
    heuristic->causal = causal;
    if ((st = fj_tune_heuristic(r->ctx, &r->shape, heuristic)) != FAJIT_OK)
        return fj_fail_context(st, "fajit_tune: the heuristic's config");
    r->cands = calloc(FJ_TUNE_SPACE_MAX, sizeof *r->cands);
    r->first_ms = calloc(FJ_TUNE_SPACE_MAX, sizeof *r->first_ms);
    if (!r->cands || !r->first_ms) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_tune: out of host memory");
    r->n = fj_tune_space(r->ctx, heuristic, r->cands, r->o.max_candidates, &r->res.space, &r->res.pruned);
    r->res.candidates = r->n;
    r->first_is_heuristic = r->n > 0 && fj_config_same(&r->cands[0], heuristic);
    if (r->n == 0)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "fajit_tune: every config of the space (%d) breaks a rule or exceeds "
                                              "the device's %d B of shared memory", r->res.space, r->ctx->smem_optin);
    return FAJIT_OK;
}

static fajit_status tune_measure(tune_run *r, fajit_dtype dtype, int head_dim, int causal)
{
    fajit_attention_args a;
    fj_tune_bench *b = calloc(1, sizeof *b);
    if (!b) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_tune: out of host memory");
    memset(&a, 0, sizeof a);
    a.dtype = dtype;
    a.batch = r->shape.batch, a.heads_q = r->shape.heads_q, a.heads_kv = r->shape.heads_kv;
    a.seqlen_q = r->shape.seqlen_q, a.seqlen_k = r->shape.seqlen_k, a.head_dim = head_dim, a.causal = causal;
    fajit_status st = fj_tune_bench_open(r->ctx, &a, r->o.reps, b);
    if (st == FAJIT_OK) {
        note(r, -1, NULL, -1.0, "%s d%d %s n%d on %s: B%d H%d/%d N%d/%d, %d input sets; %d candidates of %d "
                                "configs (%d pruned by plan rules or the device's smem)",
             dtype == FAJIT_DTYPE_F16 ? "f16" : dtype == FAJIT_DTYPE_E4M3 ? "e4m3" : "bf16", head_dim,
             causal ? "causal" : "noncausal",
             r->res.seqlen_class, r->ctx->device_name, a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k,
             b->n_sets, r->n, r->res.space, r->res.pruned);
        st = run_all(r, b);
        fj_tune_bench_close(b);
    }
    free(b);
    return st;
}

fajit_status fajit_tune(fajit_context *ctx, const fajit_shape *shape, fajit_dtype dtype, int head_dim, int causal,
                        const fajit_tune_options *opts, fajit_config *best_out, fajit_tune_result *result_out)
{
    fajit_config heuristic;
    tune_run *r;
    fj_clear_error();
    if (!ctx) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "ctx = NULL: fajit_tune needs a context with a device");
    if (dtype == FAJIT_DTYPE_AUTO) dtype = FAJIT_DTYPE_BF16;
    fajit_tune_options o;
    fajit_shape s;
    /* the arguments first, then the device (as the forward does) */
    fajit_status st = check_problem(dtype, head_dim, causal);
    if (st == FAJIT_OK) st = options_resolve(opts, &o);
    if (st == FAJIT_OK) st = tune_shape(shape, head_dim, &s);
    if (st == FAJIT_OK) st = fj_context_require_device(ctx, "fajit_tune");
    if (st != FAJIT_OK) return st;
    if (!(r = calloc(1, sizeof *r))) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_tune: out of host memory");
    r->ctx = ctx;
    r->t0 = fj_now_ms() / 1e3;
    r->o = o;
    st = tune_prepare(r, shape, dtype, head_dim, causal, &heuristic);
    if (st == FAJIT_OK) st = tune_measure(r, dtype, head_dim, causal);
    if (st == FAJIT_OK) winner_keep(r, dtype, head_dim, causal);
    r->res.seconds = fj_now_ms() / 1e3 - r->t0;
    if (st == FAJIT_OK && best_out) *best_out = r->res.best;
    if (result_out) *result_out = r->res;
    free(r->cands);
    free(r->first_ms);
    free(r);
    return st;
}

fajit_status fajit_tune_lookup(fajit_context *ctx, const fajit_shape *shape, fajit_dtype dtype, int head_dim,
                               int causal, fajit_tune_result *out)
{
    fj_tune_record rec;
    fj_clear_error();
    if (!ctx || !out)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = NULL: fajit_tune_lookup needs ctx and result_out",
                       !ctx ? "ctx" : "result_out");
    memset(out, 0, sizeof *out);
    if (dtype == FAJIT_DTYPE_AUTO) dtype = FAJIT_DTYPE_BF16;
    fajit_status st = check_problem(dtype, head_dim, causal);
    if (st != FAJIT_OK) return st;
    if (!tuned_find(ctx, shape, dtype, head_dim, causal, &rec)) return FAJIT_OK;
    out->found = 1;
    out->best = rec.cfg;
    out->tflops = rec.tflops;
    out->seqlen_class = rec.key.seqlen_class;
    return FAJIT_OK;
}
