/*
 * test_roll_config.c - unit tests of the config's roll field (fajit.h; issue 23's rolled sm_90a KV loop), without a
 * GPU or ptxas: the canonical text gains " roll" only when it is 1 and reads back (tune files), fj_config_same and
 * fj_config_overlay see it, roll 0 and -1 write the same PTX as a config from before the field, roll 1 a different
 * and shorter one (FP8 too, where roll 0 stays unrolled), and the check refuses what the rolled loop does not take
 * (values outside -1..1, the sm_80 path, one stage), naming the field, the value and the rule. Run: ctest --test-dir build -R test_roll_config
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/tune_file.h"
#include "test_support.h"

static fajit_config d128(int causal)
{
    fajit_config c = {0};
    c.arch = FAJIT_ARCH_SM90A, c.dtype = FAJIT_DTYPE_BF16, c.head_dim = 128, c.block_m = 128, c.block_n = 128;
    c.stages = 2, c.swizzle = 128, c.warps = 12, c.col_warps = 1, c.overlap = 1, c.pingpong = 1, c.causal = causal;
    return c;
}

static void test_text(void **state)
{
    (void)state;
    char buf[160];
    fajit_config c = d128(1);
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp causal");
    c.roll = -1;
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp causal");
    c.roll = 1;
    c.mods = FAJIT_MOD_SOFTCAP;
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp roll causal cap");
    fajit_config back;
    assert_null(fj_tune_parse_config(buf, &back));
    assert_int_equal(back.roll, 1);
    assert_true(fj_config_same(&c, &back));
    assert_null(fj_tune_parse_config("sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp causal", &back));
    assert_int_equal(back.roll, 0);
    assert_false(fj_config_same(&c, &back));
    back.roll = -1;
    assert_false(fj_config_same(&c, &back));
    c.roll = 0;
    c.mods = 0;
    assert_true(fj_config_same(&c, &back)); /* 0 reads as -1 */
    fajit_config given = {0}, winner = d128(1);
    winner.roll = 1;
    fj_config_overlay(&given, &winner);
    assert_int_equal(given.roll, 1); /* a tuned winner's roll fills a zero */
    given.roll = -1;
    fj_config_overlay(&given, &winner);
    assert_int_equal(given.roll, -1); /* and never a set one */
}

static void expect_refused(const fajit_config *c, const char *a, const char *b)
{
    assert_int_equal(fajit_config_check(c), FAJIT_ERR_INVALID_CONFIG);
    const char *m = fajit_errmsg();
    if (!strstr(m, a) || !strstr(m, b)) print_error("message: %s\n", m);
    assert_non_null(strstr(m, a));
    assert_non_null(strstr(m, b));
}

static void test_refusals(void **state)
{
    (void)state;
    fajit_config c = d128(0);
    c.roll = 2;
    expect_refused(&c, "roll = 2", "must be 1");
    c.roll = 1;
    c.stages = 1;
    expect_refused(&c, "roll = 1 with stages = 1", "one loop body");
    c = d128(0);
    c.roll = 1;
    c.dtype = FAJIT_DTYPE_E4M3, c.block_n = 192;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK); /* FP8 takes it since 2026-11-29 (opt-in) */
    fajit_config s = {0};
    s.arch = FAJIT_ARCH_SM80, s.dtype = FAJIT_DTYPE_BF16, s.head_dim = 128, s.block_m = 128, s.block_n = 64;
    s.stages = 2, s.swizzle = 128, s.warps = 4, s.col_warps = 1, s.roll = 1;
    expect_refused(&s, "roll = 1", "sm_80 path");
    s.roll = -1;
    assert_int_equal(fajit_config_check(&s), FAJIT_OK);
    c = d128(1);
    c.roll = 1;
    c.stages = 3, c.block_n = 64;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
}

static void test_ptx(void **state)
{
    (void)state;
    for (int causal = 0; causal < 2; causal++) {
        fajit_config c = d128(causal);
        char *p0 = NULL, *pm = NULL, *p1 = NULL;
        size_t n0 = 0, nm = 0, n1 = 0;
        assert_int_equal(fajit_generate_ptx(&c, 0, &p0, &n0), FAJIT_OK);
        c.roll = -1;
        assert_int_equal(fajit_generate_ptx(&c, 0, &pm, &nm), FAJIT_OK);
        c.roll = 1;
        assert_int_equal(fajit_generate_ptx(&c, 0, &p1, &n1), FAJIT_OK);
        assert_true(n1 * 4 < nm * 3); /* at least a quarter shorter */
        assert_non_null(strstr(p1, " roll "));
        assert_null(strstr(p0, " roll ")); /* roll 0's text: no " roll" either way */
        if (FJ_SM90_ROLL_DEFAULT) { /* roll 0 is the rolled loop: the PTX of roll 1 but for the header's text */
            const char *b0 = strstr(p0, ".version"), *b1 = strstr(p1, ".version");
            assert_true(b0 && b1);
            assert_string_equal(b0, b1);
        } else { /* roll 0 is roll -1, byte for byte */
            assert_int_equal(n0, nm);
            assert_memory_equal(p0, pm, n0);
        }
        fajit_free(p0);
        fajit_free(pm);
        fajit_free(p1);
    }
    /* FP8: roll 0 stays the unrolled loop (opt-in until a GPU has run the rolled one), roll 1 is shorter */
    fajit_config f = d128(1);
    f.dtype = FAJIT_DTYPE_E4M3, f.block_n = 192;
    char *f0 = NULL, *fm = NULL, *f1 = NULL;
    size_t m0 = 0, mm = 0, m1 = 0;
    assert_int_equal(fajit_generate_ptx(&f, 0, &f0, &m0), FAJIT_OK);
    f.roll = -1;
    assert_int_equal(fajit_generate_ptx(&f, 0, &fm, &mm), FAJIT_OK);
    f.roll = 1;
    assert_int_equal(fajit_generate_ptx(&f, 0, &f1, &m1), FAJIT_OK);
    assert_int_equal(m0, mm);
    assert_memory_equal(f0, fm, m0);
    assert_true(m1 * 4 < mm * 3);
    assert_non_null(strstr(f1, " roll "));
    fajit_free(f0);
    fajit_free(fm);
    fajit_free(f1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_text), cmocka_unit_test(test_refusals),
                                       cmocka_unit_test(test_ptx)};
    return cmocka_run_group_tests_name("roll_config", tests, NULL, NULL);
}
