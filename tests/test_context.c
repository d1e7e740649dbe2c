/*
 * test_context.c - unit tests of fajit_context on a machine that may have no GPU or no driver.
 *
 * With device 0 the call must fail cleanly (FAJIT_ERR_LIBRARY_MISSING without libcuda.so.1,
 * FAJIT_ERR_NO_DEVICE with the toolkit's stub or no visible GPU) with a message, no context and no
 * crash, and fail the same way again (the failed load is remembered). On a machine with a GPU it must
 * succeed and report an sm name. The test registered as test_context_stub runs this with the
 * toolkit's stub libcuda on LD_LIBRARY_PATH and FJ_TEST_EXPECT=stub, where cuInit returns
 * CUDA_ERROR_STUB_LIBRARY. Run: ctest --test-dir build -R test_context
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fajit.h"
#include "runtime/context.h"

static void test_options_default(void **state)
{
    (void)state;
    fajit_context_options o = fajit_context_options_default();
    assert_int_equal(o.device, 0);
    assert_int_equal(o.disk_cache, -1);
    assert_null(o.cache_dir);
}

static void test_device_0(void **state)
{
    (void)state;
    const char *expect = getenv("FJ_TEST_EXPECT");
    fajit_context *ctx = (fajit_context *)&ctx; /* must be reset to NULL on failure */
    char first[2048];
    fajit_context_options o = fajit_context_options_default();
    o.disk_cache = 0;
    fajit_status st = fajit_context_create(&o, &ctx);
    if (st == FAJIT_OK) { /* a machine with a GPU */
        assert_non_null(ctx);
        assert_true(strncmp(fajit_context_sm(ctx), "sm_", 3) == 0);
        assert_true(expect == NULL);
        fajit_context_destroy(ctx);
        return;
    }
    print_message("fajit_context_create(device 0): %s: %s\n", fajit_status_name(st), fajit_errmsg());
    assert_true(st == FAJIT_ERR_LIBRARY_MISSING || st == FAJIT_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_true(strlen(fajit_errmsg()) > 20);
    if (st == FAJIT_ERR_LIBRARY_MISSING) assert_non_null(strstr(fajit_errmsg(), "libcuda.so.1"));
    if (expect && strcmp(expect, "stub") == 0) {
        assert_int_equal(st, FAJIT_ERR_NO_DEVICE);
        assert_non_null(strstr(fajit_errmsg(), "stub"));
    }
    strcpy(first, fajit_errmsg());
    assert_int_equal(fajit_context_create(&o, &ctx), st); /* remembered, same words */
    assert_string_equal(fajit_errmsg(), first);
    assert_int_equal(fajit_context_create(NULL, &ctx), st); /* NULL options = defaults = device 0 */
}

static void test_bad_options(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    assert_int_equal(fajit_context_create(&o, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "ctx_out"));
    o.device = -2;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "device = -2"));
    o.device = -1;
    o.disk_cache = 5;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "disk_cache = 5"));
    assert_null(ctx);
}

static void test_codegen_only(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_kernel *k = (fajit_kernel *)&k;
    fajit_config cfg = {FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 128, 64, 64, 2, 128, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    fajit_kernel_info info;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_sm(ctx), "");
    assert_string_equal(fajit_context_cache_dir(ctx), "");
    assert_null(ctx->cu);
    assert_int_equal(fajit_kernel_get(ctx, &cfg, &k, NULL), FAJIT_ERR_NO_DEVICE);
    assert_null(k);
    assert_non_null(strstr(fajit_errmsg(), "device = -1"));
    assert_int_equal(fajit_kernel_get(ctx, NULL, &k, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "cfg = NULL"));
    assert_int_equal(fajit_kernel_get_info(NULL, &info), FAJIT_ERR_INVALID_ARGUMENT);
    fajit_context_destroy(ctx);
    fajit_context_destroy(NULL);
    assert_string_equal(fajit_context_sm(NULL), "");
    assert_string_equal(fajit_context_cache_dir(NULL), "");
}

static void test_choices(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_config a = {FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 128, 64, 64, 2, 128, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, b = a, got;
    fajit_kernel *fake = (fajit_kernel *)&a;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_null(fj_context_choice_find(ctx, "class-1", &got));
    assert_int_equal(fj_context_choice_add(ctx, "class-1", &a, fake), FAJIT_OK);
    b.block_m = 128;
    assert_int_equal(fj_context_choice_add(ctx, "class-1", &b, NULL), FAJIT_OK); /* first one wins */
    assert_ptr_equal(fj_context_choice_find(ctx, "class-1", &got), fake);
    assert_int_equal(got.block_m, 64);
    fajit_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_default), cmocka_unit_test(test_device_0), cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_codegen_only),    cmocka_unit_test(test_choices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
