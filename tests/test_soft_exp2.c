/*
 * test_soft_exp2.c - the softmax's software 2^x (src/codegen/soft_exp2.h; emitted by softmax.c for softcap
 * kernels on sm_90a) without a GPU (label unit): a C model that performs the emitted fp32 operations in their
 * order (max, add.rn, sub.rn, sub.rn, fma.rn x 6, shift-add on the bits) against exp2 in double, its treatment of
 * -inf and underflow, the plan's choice of the share, and the PTX carrying exactly the header's constants.
 * test_soft_exp2_deg3 is this file compiled with -DFJ_SOFT_EXP2_DEG=3 (the short polynomial, a build knob): the model
 * only, against the header's bound for that degree.
 *   ctest --test-dir build -R test_soft_exp2
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/soft_exp2.h"
#include "fajit.h"
#include "test_support.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The emitted sequence, one C operation per PTX instruction (fp32, round to nearest; fmaf is one rounding).
 * volatile keeps the compiler from reassociating (x + R) - R. */
static float model(float x)
{
    const float round = from_bits(FJ_SOFT_EXP2_ROUND_BITS);
    x = fmaxf(x, from_bits(FJ_SOFT_EXP2_CLAMP_BITS));
    volatile float r = x + round;
    volatile float n = r - round;
    volatile float f = x - n;
    float p = from_bits(fj_soft_exp2_coef[FJ_SOFT_EXP2_DEG]);
    for (int i = FJ_SOFT_EXP2_DEG - 1; i >= 0; i--) p = fmaf(p, f, from_bits(fj_soft_exp2_coef[i]));
    return from_bits(to_bits(p) + (to_bits(r) << 23));
}

/* Error of g against 2^x in units of the last place of the exact value's binade (fp32, 24-bit significand). */
static double ulps(float g, float x)
{
    double t = exp2((double)x);
    return fabs((double)g - t) / ldexp(1.0, ilogb(t) - 23);
}

/* Over [-126, 64] (scores reach the softmax as s * scale - m <= the lazy-rescale slack, far below 64): every
 * float in [-1, 1] with a stride, a uniform sweep of the whole range, and the points next to each integer and
 * half-integer (where the rounding to n switches). The bound: at most 1 ulp and 2^-23 relative error, under the 2
 * ulp that the CUDA math documentation gives for exp2f (nvcc's exp2f is this MUFU.EX2) - measured 0.93 ulp. */
static void test_accuracy(void **state)
{
    (void)state;
    double worst = 0.0, worst_rel = 0.0;
    float at = 0.0f;
    long n = 0;
    for (uint32_t u = 0; u < 0x3F800000u; u += 997) { /* |x| in [0, 1), both signs */
        for (int s = 0; s < 2; s++) {
            float x = s ? -from_bits(u) : from_bits(u);
            double e = ulps(model(x), x);
            if (e > worst) worst = e, at = x;
            double rel = fabs(model(x) - exp2((double)x)) / exp2((double)x);
            if (rel > worst_rel) worst_rel = rel;
            n++;
        }
    }
    for (int i = 0; i <= 4000000; i++) {
        float x = -126.0f + 190.0f * (float)i / 4000000.0f;
        double e = ulps(model(x), x);
        if (e > worst) worst = e, at = x;
        double rel = fabs(model(x) - exp2((double)x)) / exp2((double)x);
        /* degree 3: 2^0 is 0.99993, so x = -126 lands in the subnormals (2x the bound there, on a P of 1e-38) */
        if (rel > worst_rel && (FJ_SOFT_EXP2_DEG == 6 || model(x) >= FLT_MIN)) worst_rel = rel;
        n++;
    }
    for (int k = -252; k <= 128; k++) {
        float up = (float)k / 2.0f, down = up;
        for (int step = 0; step < 64; step++) {
            const float xs[2] = {up, down};
            for (int j = 0; j < 2; j++) {
                if (xs[j] < -126.0f) continue;
                double e = ulps(model(xs[j]), xs[j]);
                if (e > worst) worst = e, at = xs[j];
                n++;
            }
            up = nextafterf(up, INFINITY);
            down = nextafterf(down, -INFINITY);
        }
    }
    printf("soft exp2: %ld points, max %.3f ulp (at x = %.9g), max relative error %.3g (2^-23 = %.3g)\n", n, worst,
           (double)at, worst_rel, ldexp(1.0, -23));
#if FJ_SOFT_EXP2_DEG == 6
    assert_true(worst <= 1.0);
#endif
    assert_true(worst_rel <= FJ_SOFT_EXP2_MAX_REL);
}

/* -inf (a masked score) and x below -126.5 give a non-negative value below FLT_MIN: subnormal or 0, which the
 * row sums (add.ftz) flush, so a row that saw only masked keys keeps l = 0; ex2.approx.ftz gives 0 there. */
static void test_underflow(void **state)
{
    (void)state;
    const float xs[] = {-INFINITY, -1e30f, -1000.0f, -127.0f, -126.75f, -126.5f, -126.25f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        float g = model(xs[i]);
        assert_false(isnan(g));
        assert_true(g >= 0.0f);
        if (xs[i] <= -126.5f) assert_true(g < FLT_MIN);
        else assert_true(g < 2.0f * FLT_MIN);
    }
    assert_true(model(-INFINITY) < FLT_MIN);
    /* small positive exponents (P <= 2^slack) and exact powers of two */
    for (int k = -20; k <= 20; k++) {
        double t = exp2((double)k);
        assert_true(FJ_SOFT_EXP2_DEG == 6 ? ulps(model((float)k), (float)k) <= 1.0
                                          : fabs(model((float)k) - t) <= FJ_SOFT_EXP2_MAX_REL * t);
    }
}

#ifndef FJ_SOFT_EXP2_MODEL_ONLY
static fajit_config softcap_cfg(int head_dim, int mods)
{
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = head_dim, .causal = 1,
                      .mods = mods};
    fajit_shape shape = {2, 16, 16, 8192, 8192};
    const fajit_config given = c;
    fj_config_heuristic(&c, &given, &shape, 0);
    return c;
}

/* The plan takes no exponential off the MUFU (measured slower on an H100: sm90.c plan_soft_exp2); with a share set
 * by hand (4 of 8 at d <= 128, 2 of 8 above: the shares that were measured) the PTX holds the header's clamp and
 * every coefficient, once per software exponential, and a plain kernel none. */
static void test_plan_and_ptx(void **state)
{
    (void)state;
    const struct {
        int d, mods, share;
    } cases[] = {{64, FAJIT_MOD_SOFTCAP, 4},  {128, FAJIT_MOD_SOFTCAP, 4}, {256, FAJIT_MOD_SOFTCAP, 2},
                 {128, 0, 0},                 {128, FAJIT_MOD_ALIBI, 0},   {128, FAJIT_MOD_SOFTCAP | FAJIT_MOD_WINDOW, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_config c = softcap_cfg(cases[i].d, cases[i].mods);
        fj_plan p;
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        assert_int_equal(p.soft_exp2, 0);
        p.soft_exp2 = cases[i].mods & FAJIT_MOD_SOFTCAP ? cases[i].share : 0; /* the emitter honours any share */
        char *ptx = NULL;
        size_t len = 0;
        assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
        char clamp[64];
        snprintf(clamp, sizeof clamp, "0f%08X;", FJ_SOFT_EXP2_CLAMP_BITS);
        int soft = fj_test_count(ptx, clamp);
        int per_row = 0, vals = c.block_n / 4; /* a consumer thread's values of one row: block_n / 8 x 2 */
        for (int v = 0; v < vals; v++) per_row += (v + 1) * cases[i].share / 8 > v * cases[i].share / 8;
        printf("d%d mods %d: share %d/8, %d software exp2 in the PTX (%d per row and softmax)\n", cases[i].d,
               cases[i].mods, p.soft_exp2, soft, per_row);
        if (!cases[i].share) {
            assert_int_equal(soft, 0);
        } else {
            assert_true(soft > 0);
            assert_int_equal(soft % (2 * per_row), 0); /* two rows per thread, per softmax copy */
            for (int k = 0; k < FJ_SOFT_EXP2_DEG; k++) {
                char co[64];
                snprintf(co, sizeof co, "0f%08X;", fj_soft_exp2_coef[k]);
                assert_true(fj_test_count(ptx, co) >= soft);
            }
        }
        free(ptx);
    }
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_underflow),
#ifndef FJ_SOFT_EXP2_MODEL_ONLY /* test_soft_exp2_deg3: the header's degree differs from the library's */
        cmocka_unit_test(test_plan_and_ptx),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
