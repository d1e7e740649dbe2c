/*
 * tune_time.c - measuring candidates for fajit_tune: input sets, the output check, CUDA-event timing.
 *
 * Inputs: Q, K and V hold N(0, 1) values (a 4 MiB block of random halves copied over each tensor,
 * from a different offset per tensor, so filling 100s of MB costs copies, not host arithmetic); O
 * starts zeroed. There are as many sets as it takes to span FJ_TUNE_ROTATE_BYTES, at least 2 (fewer
 * only when device memory runs out) and at most FJ_TUNE_MAX_SETS; timed calls rotate over them so no
 * call finds its inputs in L2.
 * Check: O of set 0 is poisoned with 0xFF bytes (NaN in f16 and bf16), the candidate runs once, and
 * 256 KiB at each end of O (the first rows of the first head, the last rows of the last head: the
 * shortest and the longest causal rows) are compared with the first candidate that passed.
 * Timing (fj_timer_run, also fagen bench's): warm-up calls, then more until FJ_TUNE_SETTLE_MS of the candidate's own
 * GPU time has run (clocks settle to its power draw: measured on an H100, a window right after another kernel read up
 * to 11% off), then the queue-ahead kernel and each call between two CUDA events on the legacy default stream, the
 * median kept. TFLOP/s = 4 * B * Hq * Nq * Nk * D / t, half for causal with
 * Nq == Nk, else the exact count of visible (query, key) pairs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked.h"
#include "base/error.h"
#include "half.h"
#include "tune.h"

#define FILL_BLOCK_ELEMS ((size_t)2 << 20) /* 2 Mi random halves = 4 MiB */
#define FILL_SHIFT ((size_t)4099)          /* elements between the offsets used for Q, K and V */
#define SLICE_BYTES ((size_t)256 * 1024)
#define FJ_TUNE_SETTLE_MS 100.0         /* GPU time of a candidate's own calls before its timed ones */
#define FJ_TUNE_SETTLE_MAX_CALLS 10000

/* ---------------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------------- */
double fj_attention_flops(int64_t batch, int64_t heads_q, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                          int causal)
{
    double pairs = (double)seqlen_q * seqlen_k;
    if (causal && seqlen_q == seqlen_k) {
        pairs *= 0.5;
    } else if (causal) {
        pairs = 0;
        for (int64_t i = 0; i < seqlen_q; i++) {
            int64_t n = i + seqlen_k - seqlen_q + 1;
            pairs += (double)(n < 0 ? 0 : n > seqlen_k ? seqlen_k : n);
        }
    }
    return 4.0 * batch * heads_q * (double)head_dim * pairs;
}

static int cmp_double(const void *pa, const void *pb)
{
    double x = *(const double *)pa, y = *(const double *)pb;
    return (x > y) - (x < y);
}

double fj_sort_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Standard-normal halves (like torch.randn), never exactly zero, from a fixed seed; for e4m3 the same values as
 * e4m3 bytes, two to each 16-bit slot (the fill copies bytes). */
static uint16_t *random_block(fajit_dtype dtype)
{
    size_t n = FILL_BLOCK_ELEMS + 3 * FILL_SHIFT;
    uint16_t *h = malloc(n * sizeof *h);
    if (h && dtype != FAJIT_DTYPE_E4M3) fj_half_fill_normal(dtype, h, n, 0x9e3779b97f4a7c15ull);
    if (h && dtype == FAJIT_DTYPE_E4M3) {
        uint16_t *t = malloc(2 * n * sizeof *t);
        if (!t) {
            free(h);
            return NULL;
        }
        fj_half_fill_normal(FAJIT_DTYPE_BF16, t, 2 * n, 0x9e3779b97f4a7c15ull);
        for (size_t i = 0; i < n; i++)
            h[i] = (uint16_t)(fj_f32_to_e4m3(fj_bf16_to_f32(t[2 * i])) |
                              fj_f32_to_e4m3(fj_bf16_to_f32(t[2 * i + 1])) << 8);
        free(t);
    }
    return h;
}

/* Fill bytes of device memory with the random block, starting `shift` elements into it. */
static fj_CUresult fill_random(const fj_cuda_api *cu, fj_CUdeviceptr dst, size_t bytes, const uint16_t *block,
                               size_t shift)
{
    const size_t chunk = FILL_BLOCK_ELEMS * sizeof *block;
    fj_CUresult rc = FJ_CUDA_SUCCESS;
    for (size_t off = 0; off < bytes && rc == FJ_CUDA_SUCCESS; off += chunk)
        rc = cu->cuMemcpyHtoD(dst + off, block + shift, bytes - off < chunk ? bytes - off : chunk);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Open and close
 * ------------------------------------------------------------------------------------------------- */

/* One set: allocate Q, K, V, O; fill Q, K, V; zero O. On failure the set's memory is released. */
static fj_CUresult set_make(fj_tune_bench *b, int i, const size_t bytes[4], const uint16_t *block)
{
    const fj_cuda_api *cu = b->ctx->cu;
    fj_CUresult rc = FJ_CUDA_SUCCESS;
    for (int t = 0; t < 4 && rc == FJ_CUDA_SUCCESS; t++) rc = cu->cuMemAlloc(&b->mem[i][t], bytes[t]);
    for (int t = 0; t < 3 && rc == FJ_CUDA_SUCCESS; t++)
        rc = fill_random(cu, b->mem[i][t], bytes[t], block, (size_t)t * FILL_SHIFT);
    if (rc == FJ_CUDA_SUCCESS) rc = cu->cuMemsetD8(b->mem[i][3], 0, bytes[3]);
    if (rc == FJ_CUDA_SUCCESS) return rc;
    for (int t = 0; t < 4; t++)
        if (b->mem[i][t]) cu->cuMemFree(b->mem[i][t]), b->mem[i][t] = 0;
    return rc;
}

/* Input sets until they span FJ_TUNE_ROTATE_BYTES (at least 2); fewer when memory runs out, but one. */
static fajit_status sets_make(fj_tune_bench *b, const fajit_attention_args *a)
{
    int64_t q64 = 0, kv64 = 0; /* bytes, checked: the shape is the caller's (fajit_tune's shape) */
    int eb = a->dtype == FAJIT_DTYPE_E4M3 ? 1 : 2; /* bytes of a Q / K / V element; O is 16-bit */
    if (fj_mul3_i64(a->batch, a->heads_q, a->seqlen_q, &q64) || fj_mul3_i64(q64, a->head_dim, 2, &q64) ||
        fj_mul3_i64(a->batch, a->heads_kv, a->seqlen_k, &kv64) || fj_mul3_i64(kv64, a->head_dim, eb, &kv64) ||
        (uint64_t)q64 > SIZE_MAX / 4 || (uint64_t)kv64 > SIZE_MAX / 4)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fajit_tune: B%d Hq%d Hkv%d Nq%d Nk%d D%d: the inputs' sizes do "
                                                   "not fit in 64 bits", a->batch, a->heads_q, a->heads_kv,
                       a->seqlen_q, a->seqlen_k, a->head_dim);
    size_t q = (size_t)q64, kv = (size_t)kv64;
    const size_t bytes[4] = {q / 2 * (size_t)eb, kv, kv, q};
    double set_bytes = (double)(bytes[0] + 2 * kv + q);
    int want = (int)ceil(FJ_TUNE_ROTATE_BYTES / set_bytes);
    want = want < 2 ? 2 : want > FJ_TUNE_MAX_SETS ? FJ_TUNE_MAX_SETS : want;
    uint16_t *block = random_block(a->dtype);
    if (!block) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_tune: host buffer of %zu bytes", FILL_BLOCK_ELEMS * 2);
    fj_CUresult rc = FJ_CUDA_SUCCESS;
    for (int i = 0; i < want; i++) {
        if ((rc = set_make(b, i, bytes, block)) != FJ_CUDA_SUCCESS) break;
        b->args[i] = *a;
        fajit_args_set_bhnd_strides(&b->args[i]);
        b->args[i].q = b->mem[i][0], b->args[i].k = b->mem[i][1];
        b->args[i].v = b->mem[i][2], b->args[i].o = b->mem[i][3];
        b->n_sets = i + 1;
    }
    free(block);
    b->o_bytes = q;
    if (b->n_sets == 0) {
        fj_cuda_fail(rc, "cuMemAlloc / cuMemcpyHtoD");
        return fj_fail_context(FAJIT_ERR_CUDA, "fajit_tune: inputs of %.0f MB for B%d H%d/%d N%d/%d D%d",
                               set_bytes / 1e6, a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k,
                               a->head_dim);
    }
    return FAJIT_OK;
}

static fajit_status host_alloc(fj_tune_bench *b)
{
    b->ms = calloc((size_t)b->reps, sizeof *b->ms);
    b->ref = calloc(2 * b->slice_elems, sizeof *b->ref);
    b->got = calloc(2 * b->slice_elems, sizeof *b->got);
    if (b->ms && b->ref && b->got) return FAJIT_OK;
    return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_tune: host memory for %d timed calls", b->reps);
}

fajit_status fj_tune_bench_open(fajit_context *ctx, const fajit_attention_args *a, int reps, fj_tune_bench *b)
{
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    b->reps = reps;
    b->flops = fj_attention_flops(a->batch, a->heads_q, a->seqlen_q, a->seqlen_k, a->head_dim, a->causal);
    b->tol = a->dtype == FAJIT_DTYPE_F16 ? 4e-3 : 2e-2; /* twice fagen check's tolerance against a reference */
    if (a->dtype == FAJIT_DTYPE_E4M3) b->tol = 5e-2; /* P in e4m3: candidates' tiles round it differently */
    size_t o_elems = (size_t)a->batch * a->heads_q * a->seqlen_q * a->head_dim;
    b->slice_elems = o_elems / 2 < SLICE_BYTES / 2 ? o_elems / 2 : SLICE_BYTES / 2;
    if (b->slice_elems == 0) b->slice_elems = 1; /* one element: ends overlap, which is harmless */
    fajit_status st = host_alloc(b);
    if (st == FAJIT_OK) st = fj_context_push(ctx);
    if (st != FAJIT_OK) {
        fj_tune_bench_close(b);
        return st;
    }
    st = sets_make(b, a);
    if (st == FAJIT_OK) st = fj_timer_open(ctx, reps, &b->timer);
    fj_context_pop(ctx);
    if (st != FAJIT_OK) fj_tune_bench_close(b);
    return st;
}

void fj_tune_bench_close(fj_tune_bench *b)
{
    if (b->ctx && b->ctx->cu && fj_context_push(b->ctx) == FAJIT_OK) {
        for (int i = 0; i < b->n_sets; i++)
            for (int t = 0; t < 4; t++)
                if (b->mem[i][t]) b->ctx->cu->cuMemFree(b->mem[i][t]);
        fj_timer_close(b->ctx, &b->timer);
        fj_context_pop(b->ctx);
    }
    free(b->ms);
    free(b->ref);
    free(b->got);
    memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------------------------------------------
 * Check, time
 * ------------------------------------------------------------------------------------------------- */

/* Run cfg on set 0 with O poisoned and copy both ends of O into b->got. The context is current. */
static fajit_status check_run(fj_tune_bench *b, const fajit_config *cfg)
{
    const fj_cuda_api *cu = b->ctx->cu;
    const size_t slice = b->slice_elems * sizeof *b->got;
    fj_CUdeviceptr o = b->mem[0][3];
    fj_CUresult rc = cu->cuMemsetD8(o, 0xff, b->o_bytes);
    if (rc != FJ_CUDA_SUCCESS) return fj_cuda_fail(rc, "cuMemsetD8 (poison O)");
    fajit_status st = fajit_attention_forward(b->ctx, &b->args[0], cfg);
    if (st != FAJIT_OK) return st;
    if ((rc = cu->cuStreamSynchronize(NULL)) != FJ_CUDA_SUCCESS) return fj_cuda_fail(rc, "cuStreamSynchronize");
    if ((rc = cu->cuMemcpyDtoH(b->got, o, slice)) != FJ_CUDA_SUCCESS ||
        (rc = cu->cuMemcpyDtoH(b->got + b->slice_elems, o + b->o_bytes - slice, slice)) != FJ_CUDA_SUCCESS)
        return fj_cuda_fail(rc, "cuMemcpyDtoH (O)");
    return FAJIT_OK;
}

/* ||got - ref|| / ||ref||, or -1 when got holds a NaN or Inf. */
static double compare(const fj_tune_bench *b, fajit_dtype dtype)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < 2 * b->slice_elems; i++) {
        double g = fj_half_to_f32(dtype, b->got[i]), r = fj_half_to_f32(dtype, b->ref[i]);
        if (!isfinite(g)) return -1.0;
        diff += (g - r) * (g - r);
        norm += r * r;
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

fajit_status fj_tune_bench_check(fj_tune_bench *b, const fajit_config *cfg, double *rel_err)
{
    fajit_status st = fj_context_push(b->ctx);
    if (st != FAJIT_OK) return st;
    st = check_run(b, cfg);
    fj_context_pop(b->ctx);
    if (st != FAJIT_OK) return st;
    if (b->have_ref) {
        *rel_err = compare(b, b->args[0].dtype == FAJIT_DTYPE_E4M3 ? FAJIT_DTYPE_BF16 : b->args[0].dtype);
        return FAJIT_OK;
    }
    memcpy(b->ref, b->got, 2 * b->slice_elems * sizeof *b->ref);
    *rel_err = compare(b, b->args[0].dtype == FAJIT_DTYPE_E4M3 ? FAJIT_DTYPE_BF16 : b->args[0].dtype); /* O: 0, or -1
                                                       when this first run left NaNs: then it is no reference */
    b->have_ref = *rel_err == 0.0;
    return FAJIT_OK;
}

/* The queue-ahead kernel: one thread sleeping until %globaltimer has advanced by its parameter (ns). Launched before
 * the timed calls, it holds the stream while the host enqueues them, so each call's events bracket GPU work only:
 * without it a call shorter than the library's host path (a decode step: tens of microseconds) is timed with the
 * host's enqueue in it (the GPU idles between the start event and the launch). The driver compiles it (JIT). */
static const char k_spin_ptx[] = ".version 6.3\n.target sm_70\n.address_size 64\n"
                                 ".visible .entry fj_queue_ahead(.param .u64 ns)\n{\n"
                                 "  .reg .u64 %t, %end;\n  .reg .pred %p;\n"
                                 "  ld.param.u64 %end, [ns];\n  mov.u64 %t, %globaltimer;\n  add.u64 %end, %end, %t;\n"
                                 "spin:\n  nanosleep.u32 2000;\n  mov.u64 %t, %globaltimer;\n"
                                 "  setp.lt.u64 %p, %t, %end;\n  @%p bra spin;\n  ret;\n}\n";

double fj_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

fajit_status fj_timer_open(fajit_context *ctx, int reps, fj_timer *t)
{
    const fj_cuda_api *cu = ctx->cu;
    memset(t, 0, sizeof *t);
    t->events = calloc(2 * (size_t)reps, sizeof *t->events);
    if (!t->events) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "timing: %d CUDA events", 2 * reps);
    t->reps = reps;
    fj_CUresult rc = cu->cuModuleLoadData(&t->spin_mod, k_spin_ptx);
    if (rc == FJ_CUDA_SUCCESS) rc = cu->cuModuleGetFunction(&t->spin, t->spin_mod, "fj_queue_ahead");
    for (int i = 0; rc == FJ_CUDA_SUCCESS && i < 2 * reps; i++) rc = cu->cuEventCreate(&t->events[i], 0);
    if (rc == FJ_CUDA_SUCCESS) return FAJIT_OK;
    fj_timer_close(ctx, t);
    return fj_cuda_fail(rc, "timing: the queue-ahead kernel or the CUDA events");
}

void fj_timer_close(fajit_context *ctx, fj_timer *t)
{
    for (int i = 0; t->events && i < 2 * t->reps; i++)
        if (t->events[i]) ctx->cu->cuEventDestroy(t->events[i]);
    if (t->spin_mod) ctx->cu->cuModuleUnload(t->spin_mod);
    free(t->events);
    memset(t, 0, sizeof *t);
}

fajit_status fj_timer_run(fajit_context *ctx, fj_timer *t, const fajit_attention_args *sets, int n_sets,
                          const fajit_config *cfg, int warmup, double settle_ms, long settle_max, double *ms)
{
    const fj_cuda_api *cu = ctx->cu;
    fj_CUevent *ev = t->events;
    int reps = t->reps;
    fajit_status st = FAJIT_OK;
    fj_CUresult rc = cu->cuEventRecord(ev[0], NULL);
    double host_ms = 0.0; /* the host's time to enqueue one call: the settling calls' mean, else the warm-up's */
    double t0 = fj_now_ms();
    for (int i = 0; rc == FJ_CUDA_SUCCESS && st == FAJIT_OK && i < warmup; i++)
        st = fajit_attention_forward(ctx, &sets[i % n_sets], cfg);
    if (warmup > 0) host_ms = (fj_now_ms() - t0) / warmup;
    if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK) rc = cu->cuEventRecord(ev[1], NULL);
    if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK) rc = cu->cuEventSynchronize(ev[1]);
    long more = 0;
    if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK && warmup > 0 && settle_ms > 0) {
        float warm_ms = 0;
        rc = cu->cuEventElapsedTime(&warm_ms, ev[0], ev[1]);
        double per_call = warm_ms / warmup > 1e-3 ? warm_ms / warmup : 1e-3;
        if (warm_ms < settle_ms) more = (long)ceil((settle_ms - warm_ms) / per_call);
        if (more > settle_max) more = settle_max;
    }
    t0 = fj_now_ms();
    for (long i = 0; rc == FJ_CUDA_SUCCESS && st == FAJIT_OK && i < more; i++)
        st = fajit_attention_forward(ctx, &sets[(warmup + i) % n_sets], cfg);
    if (more > 0) host_ms = (fj_now_ms() - t0) / (double)more; /* steady state: no first-call compile in it */
    long first = warmup + more;
    /* the queue-ahead kernel covers twice the timed calls' enqueue (at least 1 ms, at most 2 s) */
    double cover = 2.0 * host_ms * reps;
    unsigned long long ns = (unsigned long long)((cover < 1.0 ? 1.0 : cover > 2000.0 ? 2000.0 : cover) * 1e6);
    void *params[1] = {&ns};
    if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK) rc = cu->cuLaunchKernel(t->spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    for (int i = 0; rc == FJ_CUDA_SUCCESS && st == FAJIT_OK && i < reps; i++) {
        rc = cu->cuEventRecord(ev[2 * i], NULL);
        if (rc == FJ_CUDA_SUCCESS) st = fajit_attention_forward(ctx, &sets[(first + i) % n_sets], cfg);
        if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK) rc = cu->cuEventRecord(ev[2 * i + 1], NULL);
    }
    if (rc == FJ_CUDA_SUCCESS && st == FAJIT_OK) rc = cu->cuEventSynchronize(ev[2 * reps - 1]);
    for (int i = 0; rc == FJ_CUDA_SUCCESS && st == FAJIT_OK && i < reps; i++) {
        float ms_i = 0;
        rc = cu->cuEventElapsedTime(&ms_i, ev[2 * i], ev[2 * i + 1]);
        ms[i] = ms_i;
    }
    if (st == FAJIT_OK && rc != FJ_CUDA_SUCCESS) st = fj_cuda_fail(rc, "timing: CUDA events");
    return st;
}

fajit_status fj_tune_bench_time(fj_tune_bench *b, const fajit_config *cfg, int warmup, double *median_ms)
{
    fajit_status st = fj_context_push(b->ctx);
    if (st != FAJIT_OK) return st;
    st = fj_timer_run(b->ctx, &b->timer, b->args, b->n_sets, cfg, warmup, FJ_TUNE_SETTLE_MS, FJ_TUNE_SETTLE_MAX_CALLS,
                      b->ms);
    fj_context_pop(b->ctx);
    if (st != FAJIT_OK) return st;
    *median_ms = fj_sort_median(b->ms, b->reps);
    if (!(*median_ms > 0))
        return fj_fail(FAJIT_ERR_CUDA, "fajit_tune: a median of %g ms between CUDA events is not a time", *median_ms);
    return FAJIT_OK;
}

fajit_status fj_tune_bench_alive(fj_tune_bench *b)
{
    char saved[512];
    snprintf(saved, sizeof saved, "%s", fajit_errmsg()); /* keep the candidate's message */
    fajit_status st = fj_context_push(b->ctx);
    if (st == FAJIT_OK) {
        fj_CUresult rc = b->ctx->cu->cuCtxSynchronize();
        fj_context_pop(b->ctx);
        if (rc != FJ_CUDA_SUCCESS) st = FAJIT_ERR_CUDA;
    }
    fj_fail(FAJIT_ERR_CUDA, "%s", saved);
    return st;
}
