/*
 * test_roll_config.c - unit tests of the config's roll field (fajit.h; issue 23's rolled sm_90a KV loop), without a
 * GPU or ptxas: the canonical text gains " roll" only when it is 1 and reads back (tune files), fj_config_same and
 * fj_config_overlay see it, roll 0 and -1 write the same PTX as a config from before the field, roll 1 a different
 * and shorter one (FP8 too, where roll 0 stays unrolled but for FJ_FP8_ROLL_D128), and the check refuses what the rolled loop does not take
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
#include "codegen/sm90.h"
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
    assert_int_equal(fajit_config_check(&c), FAJIT_OK); /* FP8 takes it since 2026-11-29 */
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

/* The PTX of c with roll 0, -1 and 1 (p[0..2], n[0..2]); roll 1 at least a quarter shorter than -1, its text " roll",
 * roll 0's never. */
static void three_rolls(fajit_config c, char *p[3], size_t n[3])
{
    static const int rolls[3] = {0, -1, 1};
    for (int i = 0; i < 3; i++) {
        c.roll = rolls[i];
        p[i] = NULL, n[i] = 0;
        assert_int_equal(fajit_generate_ptx(&c, 0, &p[i], &n[i]), FAJIT_OK);
    }
    assert_true(n[2] * 4 < n[1] * 3);
    assert_non_null(strstr(p[2], " roll "));
    assert_null(strstr(p[0], " roll ")); /* roll 0's text: no " roll" either way */
}

static void test_ptx(void **state)
{
    (void)state;
    for (int k = 0; k < 5; k++) {
        /* BF16 non-causal and causal; FP8 D128 causal, whose roll 0 is the rolled loop with the build knob
         * FJ_FP8_ROLL_D128 (sm90.h; off by default); FP8 D64 and D256 (the defaults' tiles), whose roll 0 stays
         * unrolled either way */
        fajit_config c = d128(k > 0);
        int rolled0 = k < 2 || (k == 2 && FJ_FP8_ROLL_D128);
        if (k == 2) c.dtype = FAJIT_DTYPE_E4M3, c.block_n = 192;
        if (k >= 3) {
            fajit_shape shape = {4, k == 3 ? 32 : 8, k == 3 ? 32 : 8, 4096, 4096};
            c = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = k == 3 ? 64 : 256,
                               .causal = 1};
            assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
        }
        char *p[3];
        size_t n[3];
        three_rolls(c, p, n);
        if (FJ_SM90_ROLL_DEFAULT && rolled0) { /* roll 0 is the rolled loop: the PTX of roll 1 but for the header's text */
            const char *b0 = strstr(p[0], ".version"), *b1 = strstr(p[2], ".version");
            assert_true(b0 && b1);
            assert_string_equal(b0, b1);
        } else { /* roll 0 is roll -1, byte for byte */
            assert_int_equal(n[0], n[1]);
            assert_memory_equal(p[0], p[1], n[0]);
        }
        for (int i = 0; i < 3; i++) fajit_free(p[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_text), cmocka_unit_test(test_refusals),
                                       cmocka_unit_test(test_ptx)};
    return cmocka_run_group_tests_name("roll_config", tests, NULL, NULL);
}
