/*
 * test_runtime_gpu.c - the runtime on a real GPU: kernel sources (compiled, memory, disk), a cubin the
 * driver refuses (invalidated and rebuilt), a cubin entry of other PTX (refused under FAJIT_CACHE_VERIFY=1),
 * launches through fajit_attention_forward checked against a
 * small float64 reference (both layouts, GQA, causal with Nq != Nk, LSE), the caller's current CUDA
 * context left alone, and threads building one kernel at once. Skips (exit 77) without a GPU.
 * Run: ctest --test-dir build -L gpu -R test_runtime_gpu --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/compile.h"
#include "runtime/compiler_stamp.h"
#include "runtime/context.h"
#include "runtime/disk_cache.h"
#include "test_support.h"

static char *g_dir;

static fajit_context *context_new(void)
{
    fajit_context *ctx = NULL;
    fajit_status st = fj_test_context_in(g_dir, &ctx);
    if (st != FAJIT_OK) print_error("fajit_context_create: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return ctx;
}

static fajit_config config_for(fajit_context *ctx, fajit_dtype dtype, int head_dim, int causal)
{
    fajit_config c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype;
    c.head_dim = head_dim;
    c.causal = causal;
    fajit_status st = fajit_config_fill(ctx, NULL, &c);
    if (st != FAJIT_OK) print_error("fajit_config_fill: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return c;
}

static fajit_cache_source get(fajit_context *ctx, const fajit_config *c, fajit_kernel **k)
{
    fajit_cache_source src = (fajit_cache_source)-1;
    fajit_status st = fajit_kernel_get(ctx, c, k, &src);
    if (st != FAJIT_OK) print_error("fajit_kernel_get: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return src;
}

/* ---------------------------------------------------------------------------------------------------
 * Kernel sources and the disk cache
 * ------------------------------------------------------------------------------------------------- */
static void test_sources(void **state)
{
    (void)state;
    fajit_context *a = context_new(), *b;
    fajit_kernel *k1, *k2;
    fajit_kernel_info info;
    fajit_config c = config_for(a, FAJIT_DTYPE_BF16, 128, 0);
    print_message("device %s (%s), cache %s\n", a->device_name, fajit_context_sm(a), fajit_context_cache_dir(a));
    assert_int_equal(get(a, &c, &k1), FAJIT_SOURCE_COMPILED);
    assert_int_equal(get(a, &c, &k2), FAJIT_SOURCE_MEMORY);
    assert_ptr_equal(k1, k2);
    assert_int_equal(fajit_kernel_get_info(k1, &info), FAJIT_OK);
    print_message("%s: %d registers, %d spill bytes, %d threads, smem %d B, cubin %zu B\n", k1->config_text,
                  info.registers, info.spill_bytes, info.threads, info.smem_bytes, info.cubin_bytes);
    assert_true(info.registers > 0 && info.threads == k1->plan.threads && info.cubin_bytes > 0);
    b = context_new();
    assert_int_equal(get(b, &c, &k2), FAJIT_SOURCE_DISK);
    fajit_context_destroy(b);
    fajit_context_destroy(a);
}

/* A valid entry whose payload is not a cubin: the driver refuses it, it is deleted and rebuilt. */
/* The disk-cache key context.c gives config c on ctx's device. */
static void disk_key_of(fajit_context *ctx, const fajit_config *c, char *key, size_t size)
{
    char text[FJ_CONFIG_TEXT_MAX], compiler[160];
    fj_plan plan;
    fajit_config_format(c, text, sizeof text);
    assert_int_equal(fj_plan_build(c, &plan), FAJIT_OK);
    /* NVRTC on sm_90a; the identity as the context keys it (with the library file) */
    assert_int_equal(fj_compiler_identity_stamped(&ctx->disk, &plan, compiler, sizeof compiler), FAJIT_OK);
    const fj_arch_info *target = NULL; /* the kernel's target: sm_90a for the sm_90a path on an sm_90 GPU */
    assert_int_equal(fj_context_target(ctx, &plan, &target), FAJIT_OK);
    fj_disk_cache_key(key, size, text, target->name, compiler);
}

static void test_refused_cubin(void **state)
{
    (void)state;
    fajit_context *a = context_new();
    fajit_kernel *k;
    fajit_config c = config_for(a, FAJIT_DTYPE_F16, 64, 1);
    char key[FJ_DISK_CACHE_KEY_MAX];
    fj_disk_cache_stats s;
    disk_key_of(a, &c, key, sizeof key);
    assert_int_equal(fj_disk_cache_store(&a->disk, key, "cubin", 0, "not a cubin", 12), 0);
    assert_int_equal(get(a, &c, &k), FAJIT_SOURCE_COMPILED);
    fj_disk_cache_stats_get(&a->disk, &s);
    print_message("last cache note: %s\n", s.last_error);
    assert_int_equal(s.discarded >= 1, 1);
    assert_int_equal(s.stores, 3); /* the bad one, then the rebuilt cubin and its PTX */
    fajit_context_destroy(a);
    a = context_new();
    assert_int_equal(get(a, &c, &k), FAJIT_SOURCE_DISK);
    fajit_context_destroy(a);
}

/* ---------------------------------------------------------------------------------------------------
 * Launches against a float64 reference
 * ------------------------------------------------------------------------------------------------- */
static uint16_t to_half(fajit_dtype t, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t == FAJIT_DTYPE_BF16) return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    /* f16, for |f| < 4 and normal results only (the test's inputs) */
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t m = u & 0x7fffff, s = (u >> 16) & 0x8000;
    if (e <= 0) return (uint16_t)s;
    uint32_t h = s | (uint32_t)e << 10 | m >> 13, rest = m & 0x1fff;
    return (uint16_t)(h + (rest > 0x1000 || (rest == 0x1000 && (h & 1))));
}

static double from_half(fajit_dtype t, uint16_t h)
{
    if (t == FAJIT_DTYPE_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return (h & 0x8000) ? -v : v;
}

/* Uniform in [-1, 1]. */
static float uniform(void) { return (float)(2.0 * rand() / RAND_MAX - 1.0); }

static size_t at(const int64_t s[3], int b, int h, int n) { return (size_t)(b * s[0] + h * s[1] + n * s[2]); }

/* Worst |O - ref| over the problem (and the LSE's worst, into *lse_err). */
static double reference_error(const fajit_attention_args *a, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const uint16_t *o, const float *lse, double *lse_err)
{
    int D = a->head_dim, g = a->heads_q / a->heads_kv;
    double scale = a->softmax_scale ? a->softmax_scale : 1.0 / sqrt(D), worst = 0, *p = malloc(sizeof(double) * (size_t)a->seqlen_k);
    *lse_err = 0;
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads_q; h++)
            for (int i = 0; i < a->seqlen_q; i++) {
                double m = -INFINITY, sum = 0;
                int last = a->causal ? i + a->seqlen_k - a->seqlen_q : a->seqlen_k - 1;
                for (int j = 0; j <= last && j < a->seqlen_k; j++) {
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += from_half(a->dtype, q[at(a->q_stride, b, h, i) + d]) *
                               from_half(a->dtype, k[at(a->k_stride, b, h / g, j) + d]);
                    p[j] = dot * scale;
                    if (p[j] > m) m = p[j];
                }
                for (int j = 0; j <= last && j < a->seqlen_k; j++) sum += (p[j] = exp(p[j] - m));
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j <= last && j < a->seqlen_k; j++)
                        acc += p[j] * from_half(a->dtype, v[at(a->v_stride, b, h / g, j) + d]);
                    double want = last < 0 ? 0 : acc / sum;
                    double err = fabs(from_half(a->dtype, o[at(a->o_stride, b, h, i) + d]) - want);
                    if (!(err <= worst)) worst = err; /* NaN sticks */
                }
                double want_lse = last < 0 ? -INFINITY : m + log(sum);
                float got = lse[((size_t)b * a->heads_q + h) * a->seqlen_q + i];
                double lerr = isinf(want_lse) ? (isinf(got) && got < 0 ? 0 : INFINITY) : fabs(got - want_lse);
                if (!(lerr <= *lse_err)) *lse_err = lerr;
            }
    free(p);
    return worst;
}

static uint64_t dev_alloc(fajit_context *ctx, size_t bytes, const void *host)
{
    fj_CUdeviceptr p = 0;
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuMemAlloc(&p, bytes), 0);
    if (host) assert_int_equal(ctx->cu->cuMemcpyHtoD(p, host, bytes), 0);
    else assert_int_equal(ctx->cu->cuMemsetD8(p, 0xff, bytes), 0);
    fj_context_pop(ctx);
    return p;
}

static void dev_read(fajit_context *ctx, void *host, uint64_t p, size_t bytes)
{
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuCtxSynchronize(), 0);
    assert_int_equal(ctx->cu->cuMemcpyDtoH(host, p, bytes), 0);
    assert_int_equal(ctx->cu->cuMemFree(p), 0);
    fj_context_pop(ctx);
}

/* One forward against the reference. kv_shared: K and V hold one batch that every batch reads (batch
 * stride 0), which TMA cannot encode: the sm_90a path hands the call to the sm_80 kernel. */
static void run_case(fajit_context *ctx, fajit_dtype dtype, int B, int Hq, int Hkv, int Nq, int Nk, int D,
                     int causal, int bnhd, int kv_shared)
{
    fajit_attention_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dtype, a.batch = B, a.heads_q = Hq, a.heads_kv = Hkv, a.seqlen_q = Nq, a.seqlen_k = Nk;
    a.head_dim = D, a.causal = causal;
    if (bnhd) fajit_args_set_bnhd_strides(&a);
    else fajit_args_set_bhnd_strides(&a);
    if (kv_shared) a.k_stride[0] = a.v_stride[0] = 0;
    size_t nq = (size_t)B * Hq * Nq * D, nk = (size_t)(kv_shared ? 1 : B) * Hkv * Nk * D, nl = (size_t)B * Hq * Nq;
    uint16_t *q = malloc(2 * nq), *k = malloc(2 * nk), *v = malloc(2 * nk), *o = malloc(2 * nq);
    float *lse = malloc(4 * nl);
    srand(1234);
    for (size_t i = 0; i < nq; i++) q[i] = to_half(dtype, uniform());
    for (size_t i = 0; i < nk; i++) k[i] = to_half(dtype, uniform());
    for (size_t i = 0; i < nk; i++) v[i] = to_half(dtype, uniform());
    a.q = dev_alloc(ctx, 2 * nq, q), a.k = dev_alloc(ctx, 2 * nk, k), a.v = dev_alloc(ctx, 2 * nk, v);
    a.o = dev_alloc(ctx, 2 * nq, NULL), a.lse = dev_alloc(ctx, 4 * nl, NULL);
    fajit_status st = fajit_attention_forward(ctx, &a, NULL);
    if (st != FAJIT_OK) print_error("fajit_attention_forward: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    dev_read(ctx, o, a.o, 2 * nq), dev_read(ctx, lse, a.lse, 4 * nl);
    dev_read(ctx, q, a.q, 2 * nq), dev_read(ctx, k, a.k, 2 * nk), dev_read(ctx, v, a.v, 2 * nk);
    double lse_err, err = reference_error(&a, q, k, v, o, lse, &lse_err);
    double tol = dtype == FAJIT_DTYPE_BF16 ? 1.6e-2 : 4e-3;
    print_message("%s B%d Hq%d Hkv%d Nq%d Nk%d D%d causal%d %s%s: max |O - ref| %.3g, max |LSE - ref| %.3g\n"
                  "  ran: %s\n",
                  dtype == FAJIT_DTYPE_BF16 ? "bf16" : "f16", B, Hq, Hkv, Nq, Nk, D, causal, bnhd ? "bnhd" : "bhnd",
                  kv_shared ? " K/V shared by the batches" : "", err, lse_err, fajit_last_forward());
    assert_true(err < tol);
    assert_true(lse_err < 1e-3);
    free(q), free(k), free(v), free(o), free(lse);
}

static void test_forward(void **state)
{
    (void)state;
    fajit_context *ctx = context_new();
    run_case(ctx, FAJIT_DTYPE_BF16, 2, 4, 2, 77, 130, 64, 0, 0, 0);
    run_case(ctx, FAJIT_DTYPE_BF16, 2, 4, 2, 77, 130, 64, 0, 0, 0); /* choice cached: same kernel */
    run_case(ctx, FAJIT_DTYPE_F16, 1, 6, 3, 130, 77, 128, 1, 1, 0);
    run_case(ctx, FAJIT_DTYPE_BF16, 1, 2, 1, 100, 300, 128, 1, 0, 0);
    assert_non_null(ctx->choices);
    fajit_context_destroy(ctx);
}

/* Tensors TMA cannot describe (here K and V with batch stride 0) run on the sm_80 path's kernel, correctly,
 * and fajit_last_forward says so; on a GPU whose default is sm_80 nothing falls back. */
static void test_tma_fallback(void **state)
{
    (void)state;
    fajit_context *ctx = context_new();
    fajit_config c = config_for(ctx, FAJIT_DTYPE_BF16, 64, 1);
    for (int causal = 0; causal <= 1; causal++) {
        /* Nq 200 > 128: a shorter GQA query would take the decode path (GQA packing), whose fallback text
         * names the decode features instead of the stride */
        run_case(ctx, FAJIT_DTYPE_BF16, 2, 4, 2, 200, 130, 64, causal, 0, 1);
        const char *ran = fajit_last_forward();
        if (c.arch == FAJIT_ARCH_SM90A) {
            assert_non_null(strstr(ran, "fell back from sm_90a"));
            assert_non_null(strstr(ran, "stride"));
            assert_memory_equal(ran, "sm_80 ", 6);
        } else {
            assert_null(strstr(ran, "fell back"));
        }
    }
    run_case(ctx, FAJIT_DTYPE_BF16, 2, 4, 2, 200, 130, 64, 1, 0, 0); /* the same shape with its own K/V: no fallback */
    assert_null(strstr(fajit_last_forward(), "fell back"));
    fajit_context_destroy(ctx);
}

/* fajit's push/pop leave nothing current on this thread (which never made a context current). */
static void test_current_context_untouched(void **state)
{
    (void)state;
    fajit_context *ctx = context_new();
    fajit_kernel *k;
    fajit_config c = config_for(ctx, FAJIT_DTYPE_BF16, 128, 0);
    get(ctx, &c, &k);
    fj_CUcontext cur = NULL;
    assert_int_not_equal(ctx->cu->cuCtxPopCurrent(&cur), 0);
    fajit_context_destroy(ctx);
}

/* Threads asking one fresh context for one kernel at once all get the same kernel. */
typedef struct thread_job {
    fajit_context *ctx;
    fajit_config cfg;
    fajit_kernel *kernel;
    fajit_status status;
} thread_job;

static void *thread_get(void *arg)
{
    thread_job *job = arg;
    job->status = fajit_kernel_get(job->ctx, &job->cfg, &job->kernel, NULL);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    enum { N = 4 };
    fajit_context *ctx = context_new();
    fajit_config c = config_for(ctx, FAJIT_DTYPE_F16, 128, 0);
    thread_job jobs[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (thread_job){ctx, c, NULL, FAJIT_ERR_INTERNAL};
        assert_int_equal(pthread_create(&t[i], NULL, thread_get, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(jobs[i].status, FAJIT_OK);
        assert_ptr_equal(jobs[i].kernel, jobs[0].kernel);
    }
    int n = 0;
    for (fajit_kernel *k = ctx->kernels; k; k = k->next) n++;
    assert_int_equal(n, 1);
    fajit_context_destroy(ctx);
}

/* FAJIT_CACHE_VERIFY=1: a valid cubin whose entry says it came from other PTX is refused and rebuilt; without
 * it the entry is served (the key's source digest is what pins the PTX). */
static void test_verify_source(void **state)
{
    (void)state;
    fajit_context *a = context_new();
    fajit_kernel *k;
    fajit_config c = config_for(a, FAJIT_DTYPE_BF16, 128, 0);
    char key[FJ_DISK_CACHE_KEY_MAX];
    void *cubin = NULL;
    size_t size = 0;
    fj_disk_cache_stats s;
    (void)get(a, &c, &k); /* compiled now or earlier: the entry exists */
    disk_key_of(a, &c, key, sizeof key);
    assert_int_equal(fj_disk_cache_load(&a->disk, key, "cubin", 0, &cubin, &size), 1);
    assert_int_equal(fj_disk_cache_store(&a->disk, key, "cubin", 12345, cubin, size), 0); /* "other PTX" */
    free(cubin);
    fajit_context_destroy(a);
    a = context_new();
    assert_int_equal(get(a, &c, &k), FAJIT_SOURCE_DISK); /* unchecked: served */
    fajit_context_destroy(a);
    setenv("FAJIT_CACHE_VERIFY", "1", 1);
    a = context_new();
    unsetenv("FAJIT_CACHE_VERIFY");
    assert_int_equal(get(a, &c, &k), FAJIT_SOURCE_COMPILED);
    fj_disk_cache_stats_get(&a->disk, &s);
    print_message("last cache note: %s\n", s.last_error);
    assert_non_null(strstr(s.last_error, "made from another source"));
    fajit_context_destroy(a);
    setenv("FAJIT_CACHE_VERIFY", "1", 1);
    a = context_new(); /* the rebuilt entry carries its PTX's hash */
    unsetenv("FAJIT_CACHE_VERIFY");
    assert_int_equal(get(a, &c, &k), FAJIT_SOURCE_DISK);
    fajit_context_destroy(a);
}

int main(void)
{
    setenv("FAJIT_PREBUILT", "0", 1); /* the kernel sources below are the disk cache's and the compiler's */
    fj_test_require_gpu();
    g_dir = fj_test_make_temp_dir("fajit-gpu-cache-");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_refused_cubin),
        cmocka_unit_test(test_verify_source),
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_tma_fallback),
        cmocka_unit_test(test_current_context_untouched),
        cmocka_unit_test(test_threads),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (fj_test_remove_dir(g_dir) != 0) print_message("could not remove %s\n", g_dir);
    free(g_dir);
    return rc;
}
