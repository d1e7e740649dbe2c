/*
 * test_variants.c - the attention variants without a GPU (label unit): the argument rules of fajit.h
 * ("Attention variants") with messages naming the field, the args -> kernel mapping (FAJIT_MOD_* bits, the
 * fj_fwd_params_mods block: unbounded sides, causal, softcap units), the canonical config text and its parse
 * (a plain config's text unchanged), the plan's parameter block, and the CPU float64 reference against a direct
 * evaluation of the definitions on a small problem (window, causal, chunk, softcap, ALiBi, sinks, empty rows).
 *   ctest --test-dir build -R test_variants
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
#include "runtime/forward.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "runtime/tune_file.h"
#include "runtime/variants.h"
#include "test_support.h"

static fajit_attention_args args16(void)
{
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 1, 2, 2, 64, 64, 128);
    a.q = a.k = a.v = a.o = 0x10000;
    return a;
}

static void expect_bad(fajit_attention_args a, fajit_status want, const char *field, const char *rule)
{
    fajit_status st = fj_forward_validate(&a, NULL);
    assert_true(fj_test_status_says(st, want, field, rule, NULL));
}

static void test_rules(void **state)
{
    (void)state;
    fajit_attention_args a = args16();
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.window = 2;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->window = 2", "must be 0");
    a = args16(), a.window = 1, a.window_left = -2;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->window_left = -2", ">= -1");
    a = args16(), a.window = 1, a.window_right = -5;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->window_right = -5", ">= -1");
    a = args16(), a.window_left = 128;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->window_left = 128", "window = 0");
    a = args16(), a.softcap = -1.0f;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->softcap = -1", ">= 0");
    a = args16(), a.softcap = NAN;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->softcap = nan", "finite");
    a = args16(), a.softcap = INFINITY;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->softcap = inf", "finite");
    a = args16(), a.sinks = 0x10002;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->sinks = 0x10002", "4-byte aligned");
    a = args16(), a.alibi_slopes = 0x10001;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->alibi_slopes = 0x10001", "4-byte aligned");
    a = args16(), a.alibi_slopes = 0x10000, a.alibi_slopes_batch_stride = -2;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->alibi_slopes_batch_stride = -2", ">= 0");
    a = args16(), a.alibi_slopes_batch_stride = 2;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->alibi_slopes_batch_stride = 2", "alibi_slopes = 0");
    a = args16(), a.attention_chunk = -1;
    expect_bad(a, FAJIT_ERR_INVALID_ARGUMENT, "args->attention_chunk = -1", ">= 0");
    a = args16(), a.cu_seqlens_q = 0x10000, a.num_splits = 2; /* varlen is built (test_varlen_args), its split not */
    expect_bad(a, FAJIT_ERR_UNSUPPORTED, "args->num_splits = 2", "cu_seqlens_q");
    /* every variant at once is valid; a struct_size that does not reach them reads them as off */
    a = args16(), a.window = 1, a.window_left = 100, a.window_right = -1, a.softcap = 30.0f, a.sinks = 0x10000;
    a.alibi_slopes = 0x10000, a.alibi_slopes_batch_stride = 2, a.attention_chunk = 64;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    assert_int_equal(fj_variant_mods(&a), FAJIT_MOD_ALL);
    a.struct_size = FAJIT_ATTENTION_ARGS_SIZE_2;
    assert_int_equal(fj_variant_mods(&a), 0);
    /* a config for other variants than the arguments' is refused, naming both */
    a = args16(), a.sinks = 0x10000;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fajit_status st = fj_forward_validate(&a, &c);
    assert_true(fj_test_status_says(st, FAJIT_ERR_INVALID_ARGUMENT, "cfg->mods = 0", "mods = 4", "sink"));
}

/* The kernel's view of the arguments: unbounded sides never reached, causal's right side 0, softcap's units. */
static void test_params(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .mods = FAJIT_MOD_WINDOW};
    fj_config_heuristic(&c, &(fajit_config){0}, NULL, 0);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    fajit_attention_args a = args16();
    a.seqlen_q = 100, a.seqlen_k = 300, a.window = 1, a.window_left = -1, a.window_right = 7;
    fj_fwd_params own = {0};
    fj_param_block blk;
    const unsigned char *b = fj_variant_params(&p, &a, &own, sizeof own, &blk);
    fj_fwd_params_mods m;
    memcpy(&m, b + p.mods_off, sizeof m);
    assert_int_equal(m.win_left, 300); /* unbounded: seqlen_k */
    assert_int_equal(m.win_right, 7);
    a.causal = 1;
    memcpy(&m, (const unsigned char *)fj_variant_params(&p, &a, &own, sizeof own, &blk) + p.mods_off, sizeof m);
    assert_int_equal(m.win_right, 0);
    a.causal = 0, a.window_right = -1, a.softcap = 50.0f;
    memcpy(&m, (const unsigned char *)fj_variant_params(&p, &a, &own, sizeof own, &blk) + p.mods_off, sizeof m);
    assert_int_equal(m.win_right, 100); /* unbounded: seqlen_q */
    assert_float_equal(m.score_unit, 1.0 / 50.0, 1e-9);
    assert_float_equal(m.cap_scale, (1.0 / sqrt(128.0)) / 50.0, 1e-9);
    assert_float_equal(fj_variant_scale_log2(&a, 0.1), 50.0 * 1.4426950408889634, 1e-3);
    /* a plain plan passes its own block */
    c.mods = 0;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_ptr_equal(fj_variant_params(&p, &a, &own, sizeof own, &blk), &own);
}

static void test_config_text(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1};
    fj_config_heuristic(&c, &(fajit_config){0}, NULL, 0);
    char text[192], again[192];
    fajit_config_format(&c, text, sizeof text);
    assert_null(strstr(text, "win")); /* plain: unchanged */
    for (int m = 0; m <= FAJIT_MOD_ALL; m++) {
        fajit_config v = c, back;
        v.mods = m;
        fajit_config_format(&v, text, sizeof text);
        assert_null(fj_tune_parse_config(text, &back));
        assert_int_equal(back.mods, m);
        assert_true(fj_config_same(&v, &back));
        fajit_config_format(&back, again, sizeof again);
        assert_string_equal(text, again);
    }
    c.mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS;
    fajit_config_format(&c, text, sizeof text);
    assert_non_null(strstr(text, " causal win sink"));
    int m = 0;
    assert_int_equal(fj_config_parse_mods(" sink win", &m), -1); /* out of order */
    assert_int_equal(fj_config_parse_mods(" win win", &m), -1);
    assert_int_equal(fj_config_parse_mods(" window", &m), -1);
    assert_int_equal(fj_config_parse_mods(" cap alibi chunk", &m), 0);
    assert_int_equal(m, FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI | FAJIT_MOD_CHUNK);
    c.mods = 64;
    fj_plan p;
    assert_true(fj_test_status_says(fj_plan_build(&c, &p), FAJIT_ERR_INVALID_CONFIG, "mods = 0x40", "unknown", NULL));
}

/* The CPU reference against the definitions evaluated key by key (fajit.h "Attention variants"; test_support.c). */
static void direct(const fajit_attention_args *a, const float *sinks, const float *alibi, const uint16_t *q,
                   const uint16_t *k, const uint16_t *v, double *o, double *lse)
{
    int D = a->head_dim, g = a->heads_q / a->heads_kv;
    for (int h = 0; h < a->heads_q; h++)
        for (int i = 0; i < a->seqlen_q; i++) {
            const uint16_t *kh = k + (int64_t)(h / g) * a->seqlen_k * D, *vh = v + (int64_t)(h / g) * a->seqlen_k * D;
            fj_test_direct_row(a, sinks ? sinks[h] : -INFINITY, alibi ? alibi[h] : 0.0,
                               (long)i + a->seqlen_k - a->seqlen_q, a->seqlen_k, q + ((int64_t)h * a->seqlen_q + i) * D,
                               kh, D, vh, D, o + ((int64_t)h * a->seqlen_q + i) * D, lse + (int64_t)h * a->seqlen_q + i);
        }
}

static void test_reference(void **state)
{
    (void)state;
    enum { HQ = 4, HK = 2, D = 64, NMAX = 40 };
    static const struct {
        int nq, nk, causal, window, wl, wr, chunk, sinks, alibi;
        float cap;
    } cases[] = {
        {40, 40, 1, 1, 5, 0, 0, 0, 0, 0.0f}, {20, 40, 0, 1, 3, 4, 0, 0, 0, 0.0f}, {40, 20, 1, 1, -1, 0, 0, 1, 0, 0.0f},
        {40, 40, 0, 0, 0, 0, 7, 0, 0, 0.0f}, {17, 40, 1, 0, 0, 0, 8, 0, 1, 0.0f}, {40, 17, 0, 1, 9, -1, 0, 1, 1, 3.0f},
        {1, 1, 0, 0, 0, 0, 0, 1, 0, 2.0f},   {40, 40, 1, 1, 6, 0, 16, 1, 1, 5.0f},
    };
    uint16_t q[HQ * NMAX * D], k[HK * NMAX * D], v[HK * NMAX * D];
    uint64_t s = 12345;
    for (size_t i = 0; i < sizeof q / 2; i++) q[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, (float)((s = s * 6364136223846793005ull + 1) >> 40) / (1 << 24) * 4 - 2);
    for (size_t i = 0; i < sizeof k / 2; i++) k[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, (float)((s = s * 6364136223846793005ull + 1) >> 40) / (1 << 24) * 4 - 2);
    for (size_t i = 0; i < sizeof v / 2; i++) v[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, (float)((s = s * 6364136223846793005ull + 1) >> 40) / (1 << 24) * 2 - 1);
    const float sinks[HQ] = {0.5f, -1.0f, 3.0f, 1.5f}, slopes[HQ] = {0.5f, 0.25f, 0.125f, 0.0625f};
    static double o[HQ * NMAX * D], r[HQ * NMAX * D], lse[HQ * NMAX], rl[HQ * NMAX];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 1, HQ, HK, cases[c].nq, cases[c].nk, D);
        fajit_args_set_bhnd_strides(&a);
        a.causal = cases[c].causal, a.window = cases[c].window, a.window_left = cases[c].wl;
        a.window_right = cases[c].wr, a.attention_chunk = cases[c].chunk, a.softcap = cases[c].cap;
        const float *sk = cases[c].sinks ? sinks : NULL, *al = cases[c].alibi ? slopes : NULL;
        assert_int_equal(fj_reference_cpu_variants(&a, NULL, sk, al, q, k, v, o, lse), FAJIT_OK);
        direct(&a, sk, al, q, k, v, r, rl);
        for (int i = 0; i < HQ * cases[c].nq * D; i++) assert_float_equal(o[i], r[i], 1e-12);
        for (int i = 0; i < HQ * cases[c].nq; i++) {
            if (isinf(rl[i])) assert_true(isinf(lse[i]) && lse[i] < 0);
            else assert_float_equal(lse[i], rl[i], 1e-12);
        }
    }
}

/* plan.kv_desc (sm90.c plan_kv_order): descending for causal ALiBi only; FAJIT_KV_ORDER=asc|desc|auto overrides it,
 * and any other value is refused, naming the variable and the value. */
static void test_kv_order(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1,
                      .mods = FAJIT_MOD_ALIBI};
    fajit_config plain = c;
    plain.mods = 0;
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK);
    assert_int_equal(fajit_config_fill(NULL, NULL, &plain), FAJIT_OK);
    fj_plan p;
    unsetenv("FAJIT_KV_ORDER");
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.kv_desc, 1);
    assert_int_equal(fj_plan_build(&plain, &p), FAJIT_OK);
    assert_int_equal(p.kv_desc, 0);
    setenv("FAJIT_KV_ORDER", "asc", 1);
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.kv_desc, 0);
    setenv("FAJIT_KV_ORDER", "desc", 1);
    assert_int_equal(fj_plan_build(&plain, &p), FAJIT_OK);
    assert_int_equal(p.kv_desc, 1);
    setenv("FAJIT_KV_ORDER", "down", 1);
    assert_true(fj_test_status_says(fj_plan_build(&plain, &p), FAJIT_ERR_INVALID_ARGUMENT, "FAJIT_KV_ORDER = 'down'",
                                    "use asc (", "auto ("));
    unsetenv("FAJIT_KV_ORDER");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_config_text),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_kv_order),
    };
    return cmocka_run_group_tests_name("variants", tests, NULL, NULL);
}
