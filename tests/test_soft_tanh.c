/*
 * test_soft_tanh.c - softcap's tanh on the FMA units (src/codegen/soft_tanh.h; emitted by softmax.c / mask.c for
 * sm_90a softcap kernels) without a GPU (label unit): a C model performing the emitted fp32 operations in their order
 * (the coefficients folded with cs, then mul, fma, fma, mul a score) against tanh in double over the whole interval the
 * kernel's vote admits, for softmax scales and caps from tiny to huge; the result increasing there; and the plan and
 * PTX: D64 softcap kernels carry the vote, the bound and every coefficient, f16 takes the exact-max form; wider head
 * dims (measured no faster), softcap with ALiBi and kernels without softcap none of it.
 *   ctest --test-dir build -R test_soft_tanh
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/soft_tanh.h"
#include "fajit.h"
#include "test_support.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fj_emit_softcap_poly_coefs, then fj_emit_softcap_poly_value: one C operation per PTX instruction. */
static void coefs(float cs, float b[3])
{
    float c2 = cs * cs;
    b[0] = cs * from_bits(fj_soft_tanh_coef[0]);
    b[1] = cs * c2;
    b[2] = b[1] * c2;
    b[1] = b[1] * from_bits(fj_soft_tanh_coef[1]);
    b[2] = b[2] * from_bits(fj_soft_tanh_coef[2]);
}

static float model(const float b[3], float s)
{
    float u = s * s;
    float q = fmaf(u, b[2], b[1]);
    q = fmaf(q, u, b[0]);
    return q * s;
}

/* Every admitted score (|s| x cs <= BOUND in fp32, as the vote computes it) of a dense grid: |t - tanh(s cs)| <=
 * MAX_ABS against double, t non-decreasing in s, and t odd. cs from the smallest the vote admits to 1. */
static void test_accuracy(void **state)
{
    (void)state;
    const float bound = from_bits(FJ_SOFT_TANH_BOUND_BITS), cs_min = from_bits(FJ_SOFT_TANH_CS_MIN_BITS);
    const float scales[] = {1.0f, 0.125f, 0.08838835f, 0.0625f, 0.051031036f, 0.001f};
    const float caps[] = {0.5f, 1.0f, 10.0f, 30.0f, 50.0f, 1000.0f, 30000.0f};
    double worst = 0.0;
    int n_cs = 0;
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++)
        for (size_t j = 0; j < sizeof caps / sizeof caps[0]; j++) {
            float cs = scales[i] / caps[j];
            if (!(cs >= cs_min)) continue;
            n_cs++;
            float b[3];
            coefs(cs, b);
            const int n = 200000;
            float prev = -INFINITY;
            for (int k = -n; k <= n; k++) {
                float s = (float)((double)k / n * (bound / cs) * 1.0001);
                if (!(fabsf(s) * cs <= bound)) continue;
                float t = model(b, s);
                double err = fabs((double)t - tanh((double)s * (double)cs));
                if (err > worst) worst = err;
                assert_true(err <= FJ_SOFT_TANH_MAX_ABS);
                assert_true(t >= prev);
                assert_true(model(b, -s) == -t);
                prev = t;
            }
        }
    printf("%d values of cs, max |t - tanh| = %.3g (bound %.3g)\n", n_cs, worst, FJ_SOFT_TANH_MAX_ABS);
    assert_true(n_cs >= 30);
    /* the smallest cs admitted keeps cs^5 a normal number */
    float b[3];
    coefs(cs_min, b);
    assert_true(b[2] != 0.0f && fabsf(b[2]) >= 1.17549435e-38f);
}

static void test_plan_and_ptx(void **state)
{
    (void)state;
    const struct {
        int d, dtype, mods, want;
    } cases[] = {{64, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP, 1},
                 {64, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP | FAJIT_MOD_WINDOW, 1},
                 {64, FAJIT_DTYPE_F16, FAJIT_MOD_SOFTCAP, 2},
                 {64, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI, 0},
                 {96, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP, 0}, /* measured no faster from D96 up: sm90.c */
                 {128, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP, 0},
                 {256, FAJIT_DTYPE_BF16, FAJIT_MOD_SOFTCAP, 0},
                 {64, FAJIT_DTYPE_BF16, 0, 0},
                 {64, FAJIT_DTYPE_BF16, FAJIT_MOD_WINDOW, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = cases[i].dtype, .head_dim = cases[i].d, .causal = 1,
                          .mods = cases[i].mods};
        fajit_shape shape = {2, 16, 16, 8192, 8192};
        const fajit_config given = c;
        fj_config_heuristic(&c, &given, &shape, 0);
        fj_plan p;
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        assert_int_equal(p.cap_poly, cases[i].want);
        char *ptx = NULL;
        size_t len = 0;
        assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
        char bound[32];
        snprintf(bound, sizeof bound, "0f%08X,", FJ_SOFT_TANH_BOUND_BITS);
        int votes = fj_test_count(ptx, "vote.sync.all.pred"), bounds = fj_test_count(ptx, bound);
        printf("d%d dtype %d mods %d: cap_poly %d, %d vote.all, %d bound compares\n", cases[i].d, cases[i].dtype,
               cases[i].mods, p.cap_poly, votes, bounds);
        if (!cases[i].want) {
            assert_int_equal(bounds, 0);
        } else {
            assert_true(votes >= 1);
            assert_int_equal(bounds, votes * 2 * cases[i].want); /* a compare a row (and its min: f16) per vote */
            for (int k = 0; k < 3; k++) {
                char co[32];
                snprintf(co, sizeof co, "0f%08X;", fj_soft_tanh_coef[k]);
                assert_int_equal(fj_test_count(ptx, co), votes);
            }
        }
        free(ptx);
    }
    /* FP8 has no variants; a softcap FP8 config is refused before any plan (fp8_ws.c), so none to check here */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_plan_and_ptx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
