/*
 * test_sm100a_launch.c - the sm_100a launch rule (src/runtime/sm100a_launch.c) without a GPU (label unit): which path
 * the automatic choice takes by compute capability and FAJIT_SM100A_LAUNCH, when an sm_100a kernel may run, and the
 * same through a context given a device identity (fj_context_set_identity): config fill and the launch target; the
 * precise refusal of sm_100a decode variants and the fill's nearest config for them.
 * Run: ctest --test-dir build -R test_sm100a_launch --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/config_fill.h"
#include "runtime/context.h"
#include "runtime/sm100a_launch.h"
#include "runtime/tune.h"
#include "fajit.h"

static void test_parse(void **state)
{
    (void)state;
    static const char *const on[] = {NULL, "", "1"};
    int v = -1;
    for (int i = 0; i < 3; i++) {
        v = -1;
        assert_int_equal(fj_sm100a_launch_parse(on[i], &v), FAJIT_OK);
        assert_int_equal(v, 1);
    }
    assert_int_equal(fj_sm100a_launch_parse("0", &v), FAJIT_OK);
    assert_int_equal(v, 0);
    assert_int_equal(fj_sm100a_launch_parse("yes", &v), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "FAJIT_SM100A_LAUNCH = 'yes'"));
}

static void test_auto_path(void **state)
{
    (void)state;
    static const struct {
        int major, minor, on;
        fajit_arch path;
    } cases[] = {
        {8, 0, 1, FAJIT_ARCH_SM80},  {8, 9, 1, FAJIT_ARCH_SM80},   {9, 0, 1, FAJIT_ARCH_SM90A},
        {9, 0, 0, FAJIT_ARCH_SM90A}, {10, 0, 1, FAJIT_ARCH_SM100A}, {10, 0, 0, FAJIT_ARCH_SM80},
        {10, 3, 1, FAJIT_ARCH_SM80}, {12, 0, 1, FAJIT_ARCH_SM80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (fj_auto_path(cases[i].major, cases[i].minor, cases[i].on) != cases[i].path)
            fail_msg("CC %d.%d, launch %d: path %d, want %d", cases[i].major, cases[i].minor, cases[i].on,
                     (int)fj_auto_path(cases[i].major, cases[i].minor, cases[i].on), (int)cases[i].path);
}

static void test_check(void **state)
{
    (void)state;
    assert_int_equal(fj_sm100a_launch_check(10, 0, 1, 0, "B200"), FAJIT_OK);
    assert_int_equal(fj_sm100a_launch_check(10, 0, 0, 0, "B200"), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "FAJIT_SM100A_LAUNCH=0"));
    assert_non_null(strstr(fajit_errmsg(), "never run on hardware"));
    assert_int_equal(fj_sm100a_launch_check(9, 0, 1, 1, "H100"), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "device 1 (H100) is 9.0"));
    assert_int_equal(fj_sm100a_launch_check(10, 3, 1, 0, "B300"), FAJIT_ERR_UNSUPPORTED);
}

/* A context with no device, given a GPU's identity, under FAJIT_SM100A_LAUNCH = env (NULL: unset). */
static fajit_context *context_as(const char *sm, const char *env)
{
    if (env) setenv("FAJIT_SM100A_LAUNCH", env, 1);
    else unsetenv("FAJIT_SM100A_LAUNCH");
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1, o.disk_cache = 0;
    fajit_status st = fajit_context_create(&o, &ctx);
    unsetenv("FAJIT_SM100A_LAUNCH");
    if (st != FAJIT_OK) return NULL;
    fj_context_set_identity(ctx, sm, "fake GPU", 13000, 232448);
    return ctx;
}

/* The target of a plain bf16 d128 kernel on `path` in ctx: FAJIT_OK or the refusal. */
static fajit_status target_of(const fajit_context *ctx, fajit_arch path)
{
    fajit_config c = {.arch = path, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fj_plan plan;
    const fj_arch_info *t = NULL;
    fj_config_heuristic(&c, &c, NULL, 0);
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    return fj_context_target(ctx, &plan, &t);
}

static void test_context(void **state)
{
    (void)state;
    /* a 10.0 GPU: the automatic path is sm_100a; a plain config fills on it; its kernels may launch */
    fajit_context *ctx = context_as("sm_100", NULL);
    assert_non_null(ctx);
    assert_int_equal(fj_best_path(ctx), FAJIT_ARCH_SM100A);
    fajit_config c = {.dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    assert_int_equal(fajit_config_fill(ctx, NULL, &c), FAJIT_OK);
    assert_int_equal(c.arch, FAJIT_ARCH_SM100A);
    assert_int_equal(target_of(ctx, FAJIT_ARCH_SM100A), FAJIT_OK);
    /* what sm_100a does not take (an attention variant) falls back to sm_80 */
    fajit_config m = {.dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .mods = FAJIT_MOD_SOFTCAP};
    assert_int_equal(fajit_config_fill(ctx, NULL, &m), FAJIT_OK);
    assert_int_equal(m.arch, FAJIT_ARCH_SM80);
    fajit_context_destroy(ctx);

    /* FAJIT_SM100A_LAUNCH=0: sm_80 there, sm_100a refused with the reason */
    ctx = context_as("sm_100", "0");
    assert_non_null(ctx);
    assert_int_equal(fj_best_path(ctx), FAJIT_ARCH_SM80);
    fajit_config z = {.dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    assert_int_equal(fajit_config_fill(ctx, NULL, &z), FAJIT_OK);
    assert_int_equal(z.arch, FAJIT_ARCH_SM80);
    assert_int_equal(target_of(ctx, FAJIT_ARCH_SM100A), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "FAJIT_SM100A_LAUNCH=0"));
    fajit_context_destroy(ctx);

    /* an H100: sm_90a automatically; sm_100a refused (not 10.0) */
    ctx = context_as("sm_90", NULL);
    assert_non_null(ctx);
    assert_int_equal(fj_best_path(ctx), FAJIT_ARCH_SM90A);
    assert_int_equal(target_of(ctx, FAJIT_ARCH_SM100A), FAJIT_ERR_UNSUPPORTED);
    fajit_context_destroy(ctx);

    /* a value the library does not know fails the context */
    assert_null(context_as("sm_100", "yes"));
    assert_non_null(strstr(fajit_errmsg(), "FAJIT_SM100A_LAUNCH"));
}

/* Decode variants on sm_100a: refused naming what each asked-for bit lacks; the fill's nearest config is one the
 * sm_100a rules take but for the variant (12 warps, not sm_90a's 8). */
static void test_decode_refusal(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM100A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fj_config_heuristic(&c, &c, NULL, 0);
    fj_plan plan;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED, &plan), FAJIT_ERR_UNSUPPORTED);
    const char *m = fajit_errmsg();
    assert_non_null(strstr(m, "seqlens: the roles' KV range"));
    assert_non_null(strstr(m, "paged: the load's TMA boxes"));
    assert_null(strstr(m, "split:"));
    fajit_config f = {.arch = FAJIT_ARCH_SM100A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    assert_int_equal(fj_config_fill_for(NULL, NULL, NULL, FJ_VARIANT_SPLIT, &f), FAJIT_ERR_UNSUPPORTED);
    m = fajit_errmsg();
    assert_non_null(strstr(m, "split: the epilogue's partial O"));
    assert_non_null(strstr(m, " w12 "));
    assert_null(strstr(m, " w8 "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parse), cmocka_unit_test(test_auto_path),
                                       cmocka_unit_test(test_check), cmocka_unit_test(test_context),
                                       cmocka_unit_test(test_decode_refusal)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
