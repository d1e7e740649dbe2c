/*
 * warm.c - fajit_warm: many kernels compiled at once, on a thread per CPU, before the calls that need them.
 *
 * Three steps:
 *   prepare  on the calling thread: every config filled (fajit_config_fill's rules, for the context's
 *            device or the GPU named by opts->sm), planned and given its target; configs that give the
 *            same kernel (canonical text) are merged
 *   compile  worker threads take kernels off a shared counter. With a device: fj_kernel_get_variant
 *            (memory, disk, else compiled, stored and loaded into the context). Without: generate, compile
 *            (compile.c) and store in the disk cache under fj_kernel_disk_key, the key a context on that
 *            GPU looks up. A compile holds no lock and no CUDA context; nvJitLink and NVRTC get a handle
 *            per compile (both libraries are thread-safe for distinct handles)
 *   report   the calling thread waits on a condition variable and calls the progress callback for each
 *            finished kernel, in the order they finish
 */
#include "warm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "compile.h"
#include "compiler_stamp.h"
#include "config_fill.h"
#include "context.h"
#include "base/error.h"
#include "hash.h"

#define NOTE_MAX 2048

typedef struct warm_item {
    int index;                        /* first position in configs[] */
    fajit_config cfg;                 /* filled */
    fj_plan plan;
    char text[FJ_CONFIG_TEXT_MAX];    /* canonical text: the memory cache's key */
    const fj_arch_info *target;       /* what it is compiled for */
    int prepared;                     /* 0: the fill or plan failed (status, note say why) */
    fajit_status status;
    int source;                       /* fajit_cache_source, or -1: not started (deadline) */
    char note[NOTE_MAX];
} warm_item;

typedef struct warm_run {
    const fj_warm_request *rq;
    warm_item *items;
    int n;                  /* distinct kernels */
    int next;               /* next item a worker takes */
    int *order, n_done;     /* items in the order they finished */
    pthread_mutex_t lock;
    pthread_cond_t cond;
} warm_run;

double fj_warm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int fj_warm_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---------------------------------------------------------------------------------------------------
 * Prepare: fill, plan, target
 * ------------------------------------------------------------------------------------------------- */

/* configs[i] filled for the context's device, or (no device) for rq->device, whose best path is tried
 * first for arch AUTO as fajit_config_fill does on a device. */
static fajit_status warm_fill(const fj_warm_request *rq, int i, fajit_config *cfg)
{
    const fajit_shape *shape = rq->shapes ? &rq->shapes[i] : NULL;
    *cfg = rq->configs[i];
    if (rq->ctx->cu) return fj_config_fill_for(rq->ctx, shape, NULL, 0, cfg);
    const fj_arch_info *sm90a = fj_arch_of_path(FAJIT_ARCH_SM90A);
    if (cfg->arch == FAJIT_ARCH_AUTO && sm90a && sm90a->sm == rq->device->sm) {
        fajit_config c = *cfg;
        c.arch = FAJIT_ARCH_SM90A;
        if (fj_config_fill_for(rq->ctx, shape, rq->device, 0, &c) == FAJIT_OK) {
            *cfg = c;
            return FAJIT_OK;
        }
    }
    return fj_config_fill_for(rq->ctx, shape, rq->device, 0, cfg);
}

/* What a plan is compiled for: the context's rule with a device; without, the same rule for rq->device
 * (an "a" path for exactly its own target, a portable one for the device's sm). */
static fajit_status warm_target(const fj_warm_request *rq, const fj_plan *plan, const fj_arch_info **out)
{
    if (rq->ctx->cu) return fj_context_target(rq->ctx, plan, out);
    const fj_arch_info *code = plan->arch, *dev = rq->device;
    if (plan->smem_bytes > dev->smem_per_block)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "smem %d B exceeds %d B, what a CTA gets on %s", plan->smem_bytes,
                       dev->smem_per_block, dev->name);
    if (code->name[strlen(code->name) - 1] == 'a') {
        if (code->sm != dev->sm)
            return fj_fail(FAJIT_ERR_UNSUPPORTED, "the %s path runs only on compute capability %d.%d, not on %s",
                           code->name, code->sm / 10, code->sm % 10, dev->name);
        *out = code;
        return FAJIT_OK;
    }
    fajit_status st = fj_compile_check_target(code, dev);
    if (st == FAJIT_OK) st = fj_plan_check_target(plan, dev);
    if (st == FAJIT_OK) *out = dev;
    return st;
}

static fajit_status warm_prepare_one(const fj_warm_request *rq, int i, warm_item *it)
{
    it->index = i;
    it->source = -1;
    fajit_status st = warm_fill(rq, i, &it->cfg);
    if (st == FAJIT_OK) st = fj_plan_build(&it->cfg, &it->plan);
    if (st == FAJIT_OK && fj_plan_format(&it->plan, it->text, sizeof it->text) >= (int)sizeof it->text)
        st = fj_fail(FAJIT_ERR_INTERNAL, "warm.c: canonical config text longer than %zu", sizeof it->text - 1);
    if (st == FAJIT_OK) st = warm_target(rq, &it->plan, &it->target);
    if (st == FAJIT_OK) fj_plan_for_target(&it->plan, it->target); /* as store_create (kernel_store.c) does */
    it->prepared = st == FAJIT_OK;
    it->status = st;
    if (st != FAJIT_OK) snprintf(it->note, sizeof it->note, "%s", fajit_errmsg());
    return st;
}

static int item_cmp(const void *a, const void *b)
{
    const warm_item *x = a, *y = b;
    if (x->prepared != y->prepared) return x->prepared ? -1 : 1;
    int c = x->prepared ? strcmp(x->text, y->text) : 0;
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Fill every item; merge those of one kernel (the lowest index stays). Strict: the first config that
 * cannot be filled fails the call. Returns the distinct count in *n_out. */
static fajit_status warm_prepare(const fj_warm_request *rq, warm_item *items, int *n_out)
{
    for (int i = 0; i < rq->count; i++) {
        fajit_status st = warm_prepare_one(rq, i, &items[i]);
        if (st != FAJIT_OK && rq->strict) return fj_fail(st, "configs[%d]: %s", i, items[i].note);
    }
    qsort(items, (size_t)rq->count, sizeof *items, item_cmp);
    int n = 0;
    for (int i = 0; i < rq->count; i++)
        if (i == 0 || !items[i].prepared || !items[n - 1].prepared || strcmp(items[i].text, items[n - 1].text) != 0)
            items[n++] = items[i];
    *n_out = n;
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Compile
 * ------------------------------------------------------------------------------------------------- */

/* No device: compile and store in the disk cache, unless an entry is there already. */
static fajit_status warm_to_disk(fajit_context *ctx, warm_item *it)
{
    char key[FJ_DISK_CACHE_KEY_MAX];
    char *ptx = NULL;
    void *cubin = NULL;
    size_t ptx_len = 0, size = 0;
    fajit_status st = fj_kernel_disk_key(&ctx->disk, &it->plan, it->text, it->target->name, key, sizeof key);
    if (st != FAJIT_OK) return st;
    if (fj_disk_cache_load(&ctx->disk, key, "cubin", 0, &cubin, &size)) {
        free(cubin);
        it->source = FAJIT_SOURCE_DISK;
        return FAJIT_OK;
    }
    st = fj_generate_ptx_plan(&it->plan, 0, &ptx, &ptx_len);
    if (st == FAJIT_OK) st = fj_compile_kernel(&it->plan, ptx, ptx_len, it->target->name, &cubin, &size, NULL);
    if (st == FAJIT_OK) {
        if (fj_disk_cache_store(&ctx->disk, key, "cubin", fj_source_hash(ptx, ptx_len), cubin, size) == 0) {
            (void)fj_disk_cache_store(&ctx->disk, key, "ptx", 0, ptx, ptx_len);
        } else {
            fj_disk_cache_stats stats;
            fj_disk_cache_stats_get(&ctx->disk, &stats);
            st = fj_fail(FAJIT_ERR_IO, "the disk cache in %s refused the cubin: %s", ctx->disk.dir, stats.last_error);
        }
    }
    free(ptx);
    free(cubin);
    if (st == FAJIT_OK) it->source = FAJIT_SOURCE_COMPILED;
    return st;
}

static void warm_one(const fj_warm_request *rq, warm_item *it)
{
    double t0 = fj_warm_now();
    fajit_status st;
    fj_clear_error();
    if (rq->ctx->cu) {
        fajit_kernel *k = NULL;
        fajit_cache_source src = FAJIT_SOURCE_COMPILED;
        st = fj_kernel_get_variant(rq->ctx, &it->cfg, 0, &k, &src);
        if (st == FAJIT_OK) it->source = (int)src;
    } else {
        st = warm_to_disk(rq->ctx, it);
    }
    it->status = st;
    if (st != FAJIT_OK) snprintf(it->note, sizeof it->note, "%s", fajit_errmsg());
    else if (it->source == FAJIT_SOURCE_COMPILED) snprintf(it->note, sizeof it->note, "compiled in %.2f s", fj_warm_now() - t0);
    else
        snprintf(it->note, sizeof it->note, "%s",
                 it->source == FAJIT_SOURCE_DISK       ? "disk"
                 : it->source == FAJIT_SOURCE_PREBUILT ? "prebuilt"
                                                       : "memory");
}

static void warm_finish(warm_run *run, int i)
{
    pthread_mutex_lock(&run->lock);
    run->order[run->n_done++] = i;
    pthread_cond_signal(&run->cond);
    pthread_mutex_unlock(&run->lock);
}

static void *warm_worker(void *arg)
{
    warm_run *run = arg;
    for (;;) {
        pthread_mutex_lock(&run->lock);
        int i = run->next < run->n ? run->next++ : -1;
        pthread_mutex_unlock(&run->lock);
        if (i < 0) return NULL;
        warm_item *it = &run->items[i];
        if (!it->prepared) { /* failed in prepare (not strict): reported as is */
        } else if (run->rq->list_only) {
            snprintf(it->note, sizeof it->note, "listed");
        } else if (run->rq->deadline > 0 && fj_warm_now() > run->rq->deadline) {
            snprintf(it->note, sizeof it->note, "not started: the time budget was spent");
        } else {
            warm_one(run->rq, it);
        }
        warm_finish(run, i);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------------------------------- */

static void warm_report(const warm_run *run, int i, int done)
{
    const warm_item *it = &run->items[i];
    const fj_warm_request *rq = run->rq;
    if (rq->progress) rq->progress(rq->progress_user, done, run->n, it->index, &it->cfg, it->status, it->note);
}

/* Wait for the workers, reporting each finished kernel on this thread. */
static void warm_wait(warm_run *run)
{
    int reported = 0;
    pthread_mutex_lock(&run->lock);
    while (reported < run->n) {
        while (run->n_done == reported) pthread_cond_wait(&run->cond, &run->lock);
        int upto = run->n_done;
        pthread_mutex_unlock(&run->lock);
        for (; reported < upto; reported++) warm_report(run, run->order[reported], reported + 1);
        pthread_mutex_lock(&run->lock);
    }
    pthread_mutex_unlock(&run->lock);
}

/* The tallies, and the call's status: the failure of the lowest index, naming it. */
static fajit_status warm_tally(const warm_run *run, fajit_warm_result *res)
{
    const warm_item *first = NULL;
    for (int i = 0; i < run->n; i++) {
        const warm_item *it = &run->items[i];
        if (it->status != FAJIT_OK) {
            res->failed++;
            if (!first || it->index < first->index) first = it;
        } else if (it->source == FAJIT_SOURCE_COMPILED) {
            res->compiled++;
        } else if (it->source >= 0) {
            res->cached++;
        }
    }
    if (!first) return FAJIT_OK;
    char text[FJ_CONFIG_TEXT_MAX];
    fajit_config_format(&first->cfg, text, sizeof text);
    return fj_fail(first->status, "fajit_warm: %d of %d kernels failed; the first, configs[%d] (\"%s\"): %s", res->failed,
                   run->n, first->index, first->prepared ? text : "not filled", first->note);
}

fajit_status fj_warm_run(const fj_warm_request *rq, fajit_warm_result *res)
{
    double t0 = fj_warm_now();
    memset(res, 0, sizeof *res);
    if (rq->count == 0) return FAJIT_OK;
    warm_run run = {rq, calloc((size_t)rq->count, sizeof(warm_item)), 0, 0, calloc((size_t)rq->count, sizeof(int)), 0,
                    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    fajit_status st = run.items && run.order ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_warm: out of host memory");
    if (st == FAJIT_OK) st = warm_prepare(rq, run.items, &run.n);
    if (st == FAJIT_OK) {
        int want = rq->list_only ? 0 : rq->threads > 0 ? rq->threads : fj_warm_cpus();
        if (want > run.n) want = run.n;
        if (want > FAJIT_WARM_MAX_THREADS) want = FAJIT_WARM_MAX_THREADS;
        pthread_t *t = want > 0 ? calloc((size_t)want, sizeof *t) : NULL;
        int started = 0;
        for (int i = 0; t && i < want; i++) started += pthread_create(&t[started], NULL, warm_worker, &run) == 0;
        if (started == 0) warm_worker(&run); /* no thread could start: this one does the work */
        warm_wait(&run);
        for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
        free(t);
        res->total = run.n;
        res->threads = started ? started : 1;
        st = warm_tally(&run, res);
    }
    res->seconds = fj_warm_now() - t0;
    pthread_cond_destroy(&run.cond);
    pthread_mutex_destroy(&run.lock);
    free(run.items);
    free(run.order);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * Public
 * ------------------------------------------------------------------------------------------------- */

fajit_warm_options fajit_warm_options_default(void)
{
    fajit_warm_options o = {0, NULL, NULL, NULL};
    return o;
}

/* The GPU compiled for: opts->sm's plain row; checked against the device when there is one. */
static fajit_status warm_device(const fajit_context *ctx, const char *sm, const fj_arch_info **out)
{
    char names[256];
    const fj_arch_info *row = sm ? fj_arch_find(sm) : NULL;
    if (sm && !row) {
        fj_compile_list_targets(names, sizeof names);
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->sm = \"%s\": not a known GPU; known ones are %s", sm, names);
    }
    if (row) row = fj_arch_for_device(row->sm / 10, row->sm % 10);
    if (ctx->cu) {
        if (row && row != ctx->arch)
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->sm = \"%s\": the context's device %d (%s) is %s; leave "
                                                       "opts->sm NULL with a device",
                           sm, ctx->device, ctx->device_name, ctx->sm);
        *out = ctx->arch;
        return FAJIT_OK;
    }
    if (!row)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->sm = NULL: a context without a device (device -1) compiles "
                                                   "for the GPU opts->sm names (\"sm_90a\", \"sm_80\", ...); set it");
    if (!ctx->disk.enabled)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fajit_warm without a device keeps its kernels only in the disk "
                                                   "cache, which is off for this context; turn it on "
                                                   "(fajit_context_options.disk_cache = 1, FAJIT_CACHE unset)");
    *out = row;
    return FAJIT_OK;
}

fajit_status fajit_warm(fajit_context *ctx, const fajit_config *configs, const fajit_shape *shapes, int count,
                        const fajit_warm_options *opts, fajit_warm_result *result_out)
{
    fajit_warm_options o = opts ? *opts : fajit_warm_options_default();
    fajit_warm_result res;
    fj_clear_error();
    memset(&res, 0, sizeof res);
    if (result_out) *result_out = res;
    if (!ctx) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "ctx = NULL: fajit_warm needs a context");
    if (count < 0 || count > FAJIT_WARM_MAX_CONFIGS)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "count = %d: must be 0..%d (FAJIT_WARM_MAX_CONFIGS)", count,
                       FAJIT_WARM_MAX_CONFIGS);
    if (!configs && count > 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "configs = NULL with count = %d: pass count configs", count);
    if (o.threads < 0 || o.threads > FAJIT_WARM_MAX_THREADS)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "opts->threads = %d: must be 0 (one per CPU) .. %d", o.threads,
                       FAJIT_WARM_MAX_THREADS);
    const fj_arch_info *device = NULL;
    fajit_status st = warm_device(ctx, o.sm, &device);
    if (st != FAJIT_OK) return st;
    fj_warm_request rq = {ctx, configs, shapes, count, o.threads, device, 0.0, 1, 0, o.progress, o.progress_user};
    st = fj_warm_run(&rq, &res);
    if (result_out) *result_out = res;
    return st;
}
