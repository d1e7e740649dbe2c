/*
 * test_store_gpu.c - the kernel pipeline on a GPU (skips without one): a first call in a fresh cache runs a
 * prebuilt kernel; a tuned winner that is not compiled runs a stand-in (source FALLBACK) while the worker
 * compiles it, then serves; FAJIT_JIT=sync compiles first; a CUDA-graph capture never compiles (a loaded kernel
 * is captured, a kernel that would need compiling fails with FAJIT_ERR_UNSUPPORTED naming the config); a
 * damaged prebuilt entry is rebuilt, never launched. Outputs are checked against the float64 CPU reference on
 * fresh random inputs (output poisoned first, every element, NaN fails; |err| <= 2e-2 for bf16, 4e-3 for f16).
 * Run: ctest --test-dir build -R test_store_gpu --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fajit.h"
#include "runtime/context.h"
#include "runtime/half.h"
#include "runtime/prebuilt.h"
#include "runtime/reference.h"
#include "runtime/tune.h"
#include "test_support.h"

static char *g_dir;

static fajit_context *fresh_context(const char *jit)
{
    fajit_context *ctx = NULL;
    if (jit) setenv("FAJIT_JIT", jit, 1);
    fajit_status st = fj_test_context_in(g_dir, &ctx);
    unsetenv("FAJIT_JIT");
    if (st != FAJIT_OK) fail_msg("context: %s", fajit_errmsg());
    return ctx;
}

/* One problem on the device: inputs, the poisoned output, and the reference. */
typedef struct problem {
    fajit_attention_args a;
    uint16_t *q, *k, *v, *o;
    double *ref;
    size_t nq, nk;
} problem;

static uint64_t dev_copy(fajit_context *ctx, const void *host, size_t bytes)
{
    fj_CUdeviceptr p = 0;
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuMemAlloc(&p, bytes), 0);
    if (host) assert_int_equal(ctx->cu->cuMemcpyHtoD(p, host, bytes), 0);
    fj_context_pop(ctx);
    return p;
}

static void problem_make(fajit_context *ctx, problem *p, fajit_dtype dtype, int d, int causal, int n, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    fajit_attention_args_init(&p->a);
    p->a.dtype = dtype;
    p->a.batch = 1, p->a.heads_q = 4, p->a.heads_kv = 2, p->a.seqlen_q = n, p->a.seqlen_k = n, p->a.head_dim = d;
    p->a.causal = causal;
    fajit_args_set_bhnd_strides(&p->a);
    p->nq = (size_t)4 * n * d;
    p->nk = (size_t)2 * n * d;
    p->q = malloc(p->nq * 2), p->k = malloc(p->nk * 2), p->v = malloc(p->nk * 2), p->o = malloc(p->nq * 2);
    p->ref = malloc(p->nq * sizeof(double));
    assert_true(p->q && p->k && p->v && p->o && p->ref);
    fj_half_fill_normal(dtype, p->q, p->nq, seed);
    fj_half_fill_normal(dtype, p->k, p->nk, seed + 1);
    fj_half_fill_normal(dtype, p->v, p->nk, seed + 2);
    assert_int_equal(fj_reference_cpu(&p->a, p->q, p->k, p->v, p->ref, NULL), FAJIT_OK);
    p->a.q = dev_copy(ctx, p->q, p->nq * 2);
    p->a.k = dev_copy(ctx, p->k, p->nk * 2);
    p->a.v = dev_copy(ctx, p->v, p->nk * 2);
    p->a.o = dev_copy(ctx, NULL, p->nq * 2);
}

/* Poison O, run the forward (cfg NULL: the library's choice), check every element. */
static void problem_run_check(fajit_context *ctx, problem *p)
{
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuMemsetD8(p->a.o, 0xff, p->nq * 2), 0); /* NaN in f16 and bf16 */
    fj_context_pop(ctx);
    fajit_status st = fajit_attention_forward(ctx, &p->a, NULL);
    if (st != FAJIT_OK) fail_msg("forward: %s", fajit_errmsg());
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuCtxSynchronize(), 0);
    assert_int_equal(ctx->cu->cuMemcpyDtoH(p->o, p->a.o, p->nq * 2), 0);
    fj_context_pop(ctx);
    double worst = 0, tol = p->a.dtype == FAJIT_DTYPE_BF16 ? 2e-2 : 4e-3;
    for (size_t i = 0; i < p->nq; i++) {
        double err = fabs(fj_half_to_f32(p->a.dtype, p->o[i]) - p->ref[i]);
        if (!(err <= worst)) worst = err;
    }
    print_message("  %s [%d]: max |err| %.3g (tol %.g)\n", fajit_last_forward(), (int)fajit_last_forward_source(),
                  worst, tol);
    assert_true(worst <= tol);
}

static void problem_free(fajit_context *ctx, problem *p)
{
    if (fj_context_push(ctx) == FAJIT_OK) {
        ctx->cu->cuMemFree(p->a.q), ctx->cu->cuMemFree(p->a.k), ctx->cu->cuMemFree(p->a.v), ctx->cu->cuMemFree(p->a.o);
        fj_context_pop(ctx);
    }
    free(p->q), free(p->k), free(p->v), free(p->o), free(p->ref);
}

static void require_prebuilt(void)
{
    int entries = 0;
    size_t bytes = 0;
    fj_prebuilt_stats(&entries, &bytes);
    if (!entries) skip(); /* built with FAJIT_PREBUILT=OFF */
}

/* A fresh cache: the default config of each head dim and mask runs prebuilt at once. */
static void test_first_call_prebuilt(void **state)
{
    (void)state;
    require_prebuilt();
    fajit_context *ctx = fresh_context(NULL);
    static const int dims[] = {64, 128, 256};
    for (int i = 0; i < 3; i++)
        for (int causal = 0; causal <= 1; causal++) {
            problem p;
            problem_make(ctx, &p, FAJIT_DTYPE_BF16, dims[i], causal, 200, 11u + (unsigned)i);
            problem_run_check(ctx, &p);
            assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_PREBUILT);
            problem_run_check(ctx, &p);
            assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_MEMORY);
            problem_free(ctx, &p);
        }
    fajit_context_destroy(ctx);
}

/* File a tuned winner (a tile no prebuilt kernel has) for the class of a problem in ctx. */
static void put_winner(fajit_context *ctx, const problem *p, fajit_config *winner)
{
    fajit_shape shape = {p->a.batch, p->a.heads_q, p->a.heads_kv, p->a.seqlen_q, p->a.seqlen_k};
    fajit_config c = {.dtype = p->a.dtype, .head_dim = p->a.head_dim, .causal = p->a.causal};
    assert_int_equal(fajit_config_fill(ctx, &shape, &c), FAJIT_OK);
    /* another block_n (and fewer stages where it needs them): not a default of this head dim */
    static const int tries[] = {96, 112, 64, 144, 48, 32};
    fajit_config w = c;
    int ok = 0;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0] && !ok; i++)
        for (int stages = c.stages; stages >= 1 && !ok; stages--) {
            w = c;
            w.block_n = tries[i], w.stages = stages;
            ok = w.block_n != c.block_n && fajit_config_check(&w) == FAJIT_OK;
        }
    assert_true(ok);
    c = w;
    fj_tune_record rec;
    memset(&rec, 0, sizeof rec);
    fj_tune_key_make(ctx, c.dtype, c.head_dim, c.causal, fj_tune_seqlen_class(&shape), &rec.key);
    rec.cfg = c;
    rec.tflops = 1;
    fj_tune_table_put(ctx, &rec);
    *winner = c;
}

static void test_async_then_switches(void **state)
{
    (void)state;
    require_prebuilt();
    fajit_context *ctx = fresh_context("async");
    problem p;
    fajit_config winner;
    char want[256];
    problem_make(ctx, &p, FAJIT_DTYPE_BF16, 128, 0, 300, 21);
    put_winner(ctx, &p, &winner);
    fajit_config_format(&winner, want, sizeof want);
    problem_run_check(ctx, &p);
    assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_FALLBACK);
    assert_non_null(strstr(fajit_last_forward(), want)); /* "...; while <winner> compiles" */
    fj_jit_wait_idle(ctx);
    problem_run_check(ctx, &p);
    assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_MEMORY);
    assert_string_equal(fajit_last_forward(), want);
    problem_free(ctx, &p);
    fajit_context_destroy(ctx);
}

static void test_sync_compiles_first(void **state)
{
    (void)state;
    fajit_context *ctx = fresh_context("sync");
    problem p;
    fajit_config winner;
    char want[256];
    problem_make(ctx, &p, FAJIT_DTYPE_F16, 64, 1, 300, 31);
    put_winner(ctx, &p, &winner);
    fajit_config_format(&winner, want, sizeof want);
    problem_run_check(ctx, &p);
    fajit_cache_source src = fajit_last_forward_source();
    assert_true(src == FAJIT_SOURCE_COMPILED || src == FAJIT_SOURCE_DISK);
    assert_string_equal(fajit_last_forward(), want);
    problem_free(ctx, &p);
    fajit_context_destroy(ctx);
}

/* Destroying a context right after a call queued a background compile: joins the worker. */
static void test_destroy_during_compile(void **state)
{
    (void)state;
    require_prebuilt();
    fajit_context *ctx = fresh_context("async");
    problem p;
    fajit_config winner;
    problem_make(ctx, &p, FAJIT_DTYPE_BF16, 256, 1, 200, 41); /* seqlen_q > 128: not a decode call */
    put_winner(ctx, &p, &winner);
    problem_run_check(ctx, &p);
    assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_FALLBACK);
    problem_free(ctx, &p);
    fajit_context_destroy(ctx); /* the compile is under way */
}

/* ---- CUDA-graph capture: the driver's capture calls, from libcuda directly ---- */
typedef int (*stream_create_fn)(void **stream, unsigned flags);
typedef int (*begin_fn)(void *stream, int mode);
typedef int (*end_fn)(void *stream, void **graph);
typedef int (*graph_destroy_fn)(void *graph);
typedef int (*stream_destroy_fn)(void *stream);

static void test_capture_never_compiles(void **state)
{
    (void)state;
    fajit_context *ctx = fresh_context("async");
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(cuda);
    stream_create_fn create;
    begin_fn begin;
    end_fn end;
    graph_destroy_fn gdestroy;
    stream_destroy_fn sdestroy;
    void *sym[5] = {dlsym(cuda, "cuStreamCreate"), dlsym(cuda, "cuStreamBeginCapture_v2"),
                    dlsym(cuda, "cuStreamEndCapture"), dlsym(cuda, "cuGraphDestroy"),
                    dlsym(cuda, "cuStreamDestroy_v2")};
    memcpy(&create, &sym[0], sizeof create); /* dlsym's object pointers to function pointers (POSIX) */
    memcpy(&begin, &sym[1], sizeof begin);
    memcpy(&end, &sym[2], sizeof end);
    memcpy(&gdestroy, &sym[3], sizeof gdestroy);
    memcpy(&sdestroy, &sym[4], sizeof sdestroy);
    assert_true(create && begin && end && gdestroy && sdestroy);
    problem p;
    problem_make(ctx, &p, FAJIT_DTYPE_BF16, 128, 1, 256, 51);
    problem_run_check(ctx, &p); /* loaded now (prebuilt or compiled) */
    void *stream = NULL, *graph = NULL;
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(create(&stream, 1), 0);
    p.a.stream = stream;
    assert_int_equal(begin(stream, 2 /* relaxed */), 0);
    fj_context_pop(ctx);
    /* loaded: captured */
    assert_int_equal(fajit_attention_forward(ctx, &p.a, NULL), FAJIT_OK);
    /* a given config no source has: refused, naming it, and nothing compiled */
    fajit_config odd = {.dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1};
    fajit_shape shape = {1, 4, 2, 256, 256};
    assert_int_equal(fajit_config_fill(ctx, &shape, &odd), FAJIT_OK);
    odd.block_n = odd.arch == FAJIT_ARCH_SM90A ? 112 : 48;
    char text[256];
    fajit_config_format(&odd, text, sizeof text);
    unsigned before = ctx->disk.stats.stores;
    fajit_status st = fajit_attention_forward(ctx, &p.a, &odd);
    print_message("  in capture: %s\n", fajit_errmsg());
    assert_true(fj_test_status_says(st, FAJIT_ERR_UNSUPPORTED, text, "capturing a CUDA graph", NULL));
    assert_int_equal(ctx->disk.stats.stores, before);
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(end(stream, &graph), 0);
    gdestroy(graph);
    sdestroy(stream);
    fj_context_pop(ctx);
    p.a.stream = NULL;
    problem_free(ctx, &p);
    fajit_context_destroy(ctx);
}

/* A damaged prebuilt entry: the kernel is compiled, never launched from it. */
static void test_damaged_prebuilt_rebuilt(void **state)
{
    (void)state;
    require_prebuilt();
    fajit_context *ctx = fresh_context(NULL);
    problem p;
    problem_make(ctx, &p, FAJIT_DTYPE_F16, 128, 0, 200, 61);
    fajit_shape shape = {1, 4, 2, 256, 256};
    fajit_config c = {.dtype = FAJIT_DTYPE_F16, .head_dim = 128};
    assert_int_equal(fajit_config_fill(ctx, &shape, &c), FAJIT_OK);
    char text[256];
    fajit_config_format(&c, text, sizeof text);
    const unsigned char *data, *cubin;
    size_t len, size;
    fj_prebuilt_blob(&data, &len);
    assert_int_equal(fj_prebuilt_find(text, c.arch == FAJIT_ARCH_SM90A ? "sm_90a" : fajit_context_sm(ctx), &cubin,
                                      &size, NULL), 1);
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, data, len);
    copy[(size_t)(cubin - data) + size / 3] ^= 0x40;
    fj_prebuilt_set_blob(copy, len);
    problem_run_check(ctx, &p);
    /* refused, never launched: compiled now (FAJIT_JIT=sync), or (async, the default) a stand-in served while the
     * worker rebuilds it */
    fajit_cache_source src = fajit_last_forward_source();
    print_message("  source: %d\n", (int)src);
    assert_true(src == FAJIT_SOURCE_COMPILED || src == FAJIT_SOURCE_FALLBACK);
    char note[256];
    fj_context_note_get(ctx, note, sizeof note);
    print_message("  note: %s\n", note);
    assert_non_null(strstr(note, "refused"));
    fj_prebuilt_set_blob(NULL, 0);
    free(copy);
    problem_free(ctx, &p);
    fajit_context_destroy(ctx);
}

static int setup_dir(void **state)
{
    (void)state;
    g_dir = fj_test_make_temp_dir("fajit-store-gpu");
    return g_dir ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    fj_test_remove_dir(g_dir);
    free(g_dir);
    return 0;
}

int main(void)
{
    fj_test_require_gpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_call_prebuilt, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_async_then_switches, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_sync_compiles_first, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_destroy_during_compile, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_capture_never_compiles, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_damaged_prebuilt_rebuilt, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
