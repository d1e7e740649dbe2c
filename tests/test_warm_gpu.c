/*
 * test_warm_gpu.c - fajit_warm on a GPU (issue 23): kernels warmed into a context with a fresh disk cache are
 * then found by fajit_kernel_get in memory (what a forward without a config gets for the shape), and a second
 * context on the same cache finds them on disk and loads them. Skips without a GPU.
 *   ctest --test-dir build -R test_warm_gpu --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static char *g_dir;

static fajit_context *context_on(const char *dir)
{
    fajit_context_options o = fajit_context_options_default();
    fajit_context *ctx = NULL;
    o.device = 0;
    o.disk_cache = 1;
    o.cache_dir = dir;
    setenv("FAJIT_PREBUILT", "0", 1); /* the counts below are of compiles and disk hits, not prebuilt kernels */
    fajit_status st = fajit_context_create(&o, &ctx);
    unsetenv("FAJIT_PREBUILT");
    fj_test_skip_without_gpu(st);
    if (st != FAJIT_OK) print_error("fajit_context_create: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return ctx;
}

/* Three kernels: the defaults of D 64 causal and D 128 for the shape (the device's path), and sm_80's D 64. */
static int warm_set(fajit_config c[3], fajit_shape s[3])
{
    memset(c, 0, 3 * sizeof c[0]);
    for (int i = 0; i < 3; i++) s[i] = (fajit_shape){2, 16, 16, 2048, 2048};
    c[0].head_dim = 64, c[0].causal = 1;
    c[1].head_dim = 128;
    c[2].head_dim = 64, c[2].arch = FAJIT_ARCH_SM80;
    return 3;
}

static void expect_in_memory(fajit_context *ctx, const fajit_config *given, const fajit_shape *shape)
{
    fajit_config c = *given;
    fajit_kernel *k = NULL;
    fajit_cache_source src = FAJIT_SOURCE_COMPILED;
    assert_int_equal(fajit_config_fill(ctx, shape, &c), FAJIT_OK);
    assert_int_equal(fajit_kernel_get(ctx, &c, &k, &src), FAJIT_OK);
    assert_int_equal(src, FAJIT_SOURCE_MEMORY);
}

static void test_warm_then_memory(void **state)
{
    fajit_config c[3];
    fajit_shape s[3];
    fajit_warm_result r;
    (void)state;
    int n = warm_set(c, s);
    fajit_context *ctx = context_on(g_dir);
    fajit_status st = fajit_warm(ctx, c, s, n, NULL, &r);
    if (st != FAJIT_OK) print_error("fajit_warm: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    print_message("warmed %d kernels (%d compiled) on %d threads in %.2f s\n", r.total, r.compiled, r.threads, r.seconds);
    assert_int_equal(r.total, 3);
    assert_int_equal(r.compiled, 3);
    for (int i = 0; i < n; i++) expect_in_memory(ctx, &c[i], &s[i]);
    fajit_context_destroy(ctx);

    /* a new context on the same cache: on disk, loaded by the warm */
    ctx = context_on(g_dir);
    assert_int_equal(fajit_warm(ctx, c, s, n, NULL, &r), FAJIT_OK);
    assert_int_equal(r.compiled, 0);
    assert_int_equal(r.cached, 3);
    for (int i = 0; i < n; i++) expect_in_memory(ctx, &c[i], &s[i]);
    /* and again in the same context: memory */
    assert_int_equal(fajit_warm(ctx, c, s, n, NULL, &r), FAJIT_OK);
    assert_int_equal(r.cached, 3);
    fajit_context_destroy(ctx);
}

/* With a device, opts->sm may only name the device's own GPU. */
static void test_sm_must_match(void **state)
{
    fajit_config c[3];
    fajit_shape s[3];
    fajit_warm_options o = fajit_warm_options_default();
    (void)state;
    warm_set(c, s);
    fajit_context *ctx = context_on(g_dir);
    o.sm = strcmp(fajit_context_sm(ctx), "sm_80") == 0 ? "sm_90" : "sm_80";
    assert_true(fj_test_status_says(fajit_warm(ctx, c, s, 1, &o, NULL), FAJIT_ERR_INVALID_ARGUMENT, "opts->sm",
                                    fajit_context_sm(ctx), NULL));
    fajit_context_destroy(ctx);
}

static int setup(void **state)
{
    (void)state;
    g_dir = fj_test_make_temp_dir("fajit-warm-gpu");
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fj_test_remove_dir(g_dir);
    free(g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_then_memory),
        cmocka_unit_test(test_sm_must_match),
    };
    return cmocka_run_group_tests_name("warm_gpu", tests, setup, teardown);
}
