/*
 * test_varlen_variants.c - unit test (no GPU) of the CPU varlen reference with the attention variants
 * (fj_reference_cpu_varlen_variants, reference.h): a packed batch with an empty sequence, a length-1 sequence and a
 * sequence of no keys, GQA, causal or not, sinks, per-batch ALiBi slopes ([B][Hq]), a window, softcap and chunks.
 * Every element of every sequence's rows is compared with (1) one dense fj_reference_cpu_variants call per sequence
 * (its own slopes row; a sequence of no keys as a dense one whose seqlens_k is 0: O = 0, LSE = the sink) and (2) the
 * definitions of fajit.h "Attention variants" evaluated key by key here; NaN fails, and the NULL / NULL case is
 * fj_reference_cpu_varlen bit for bit. Then a seqlen_q cap, seqused_k of 0 and a refused variant field.
 * Run: ctest --test-dir build -R test_varlen_variants
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

#include "fajit.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "test_support.h"

enum { B = 6, HQ = 4, HK = 2, D = 32, POISON = 7 };

/* Sequence lengths: empty (0 queries), length 1, a sequence of no keys, Nq < Nk, Nq > Nk, Nq = Nk. */
static const int k_lq[B] = {0, 1, 9, 12, 30, 21}, k_lk[B] = {5, 1, 0, 40, 17, 21};

typedef struct vv_case {
    const char *name;
    int causal, window, wl, wr, chunk, sinks, alibi; /* alibi: 1 [Hq], 2 [B][Hq] */
    float cap;
} vv_case;

static const vv_case k_cases[] = {
    {"causal sinks alibi[B,Hq] win 6,0 cap 3", 1, 1, 6, 0, 0, 1, 2, 3.0f},
    {"win 4,3 chunk 8 sinks", 0, 1, 4, 3, 8, 1, 0, 0.0f},
    {"causal alibi[Hq] cap 2", 1, 0, 0, 0, 0, 0, 1, 2.0f},
    {"alibi[B,Hq] win -1,2 sinks", 0, 1, -1, 2, 0, 1, 2, 0.0f},
    {"plain causal", 1, 0, 0, 0, 0, 0, 0, 0.0f},
};

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float next_unit(void) /* U(-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) * 0x1p-52 - 1.0);
}

static int same(double got, double want, double tol)
{
    if (isnan(got) || isnan(want)) return 0;
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= tol * (1.0 + fabs(want));
}

/* fajit.h's definitions, key by key (test_support.c), for query row i of sequence b and head h of the packed batch. */
static void direct_row(const fajit_attention_args *a, const float *sinks, const float *alibi, int64_t stride_b,
                       const int32_t *cu_q, const int32_t *cu_k, const uint16_t *q, const uint16_t *k,
                       const uint16_t *v, int b, int h, int i, double *o, double *lse)
{
    int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b], g = HQ / HK;
    int64_t kv0 = ((int64_t)cu_k[b] * HK + h / g) * D;
    fj_test_direct_row(a, sinks ? sinks[h] : -INFINITY, alibi ? alibi[b * stride_b + h] : 0.0, (long)i + lk - lq, lk,
                       q + ((int64_t)(cu_q[b] + i) * HQ + h) * D, k + kv0, HK * D, v + kv0, HK * D, o, lse);
}

static void run_case(const vv_case *c, const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu_q,
                     const int32_t *cu_k, int max_q, int max_k)
{
    const int total_q = cu_q[B];
    const float sinks[HQ] = {0.5f, -1.5f, 3.0f, 1.25f};
    float slopes[B * HQ];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++) slopes[b * HQ + h] = (float)(pow(2.0, -8.0 * (h + 1) / HQ) * (b + 1.0) / B);
    const float *sk = c->sinks ? sinks : NULL, *al = c->alibi ? slopes : NULL;
    int64_t stride_b = c->alibi == 2 ? HQ : 0;

    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, B, HQ, HK, max_q, max_k, D);
    int64_t sq[3] = {0, D, HQ * D}, skv[3] = {0, D, HK * D};
    memcpy(a.q_stride, sq, sizeof sq), memcpy(a.o_stride, sq, sizeof sq);
    memcpy(a.k_stride, skv, sizeof skv), memcpy(a.v_stride, skv, sizeof skv);
    a.causal = c->causal, a.window = c->window, a.window_left = c->wl, a.window_right = c->wr;
    a.attention_chunk = c->chunk, a.softcap = c->cap;
    if (al) a.alibi_slopes = 0x7f0000500000ull, a.alibi_slopes_batch_stride = stride_b; /* device side: not read */
    if (sk) a.sinks = 0x7f0000600000ull;

    size_t n_o = (size_t)total_q * HQ * D, n_l = (size_t)total_q * HQ;
    double *o = malloc(8 * n_o), *lse = malloc(8 * n_l);
    assert_true(o && lse);
    for (size_t i = 0; i < n_o; i++) o[i] = POISON;
    for (size_t i = 0; i < n_l; i++) lse[i] = POISON;
    assert_int_equal(fj_reference_cpu_varlen_variants(&a, cu_q, cu_k, NULL, sk, al, q, k, v, o, lse), FAJIT_OK);
    if (!sk && !al) { /* the NULL / NULL case is fj_reference_cpu_varlen, bit for bit */
        double *o2 = malloc(8 * n_o), *l2 = malloc(8 * n_l);
        assert_true(o2 && l2);
        assert_int_equal(fj_reference_cpu_varlen(&a, cu_q, cu_k, NULL, q, k, v, o2, l2), FAJIT_OK);
        assert_memory_equal(o, o2, 8 * n_o);
        assert_memory_equal(lse, l2, 8 * n_l);
        free(o2), free(l2);
    }

    int64_t checked = 0;
    for (int b = 0; b < B; b++) {
        int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
        if (lq == 0) continue;
        /* (1) the dense reference on this sequence alone: batch 1, its slopes row; no keys: seqlens_k = 0 */
        fajit_attention_args s = fj_test_args(FAJIT_DTYPE_BF16, 1, HQ, HK, lq, lk > 0 ? lk : 1, D);
        memcpy(s.q_stride, sq, sizeof sq), memcpy(s.o_stride, sq, sizeof sq);
        memcpy(s.k_stride, skv, sizeof skv), memcpy(s.v_stride, skv, sizeof skv);
        s.causal = a.causal, s.window = a.window, s.window_left = a.window_left, s.window_right = a.window_right;
        s.attention_chunk = a.attention_chunk, s.softcap = a.softcap;
        const int32_t no_keys[1] = {0};
        double *so = malloc(8 * (size_t)HQ * lq * D), *sl = malloc(8 * (size_t)HQ * lq), dr[D], dl;
        assert_true(so && sl);
        assert_int_equal(fj_reference_cpu_variants(&s, lk > 0 ? NULL : no_keys, sk, al ? al + b * stride_b : NULL,
                                                   q + (int64_t)cu_q[b] * HQ * D, k + (int64_t)cu_k[b] * HK * D,
                                                   v + (int64_t)cu_k[b] * HK * D, so, sl),
                         FAJIT_OK);
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < lq; i++) {
                const double *row = o + ((int64_t)(cu_q[b] + i) * HQ + h) * D;
                double got_l = lse[(int64_t)h * total_q + cu_q[b] + i];
                /* (2) the definitions */
                direct_row(&a, sk, al, stride_b, cu_q, cu_k, q, k, v, b, h, i, dr, &dl);
                for (int d = 0; d < D; d++) {
                    if (!same(row[d], so[((int64_t)h * lq + i) * D + d], 0.0) || !same(row[d], dr[d], 1e-12))
                        fail_msg("%s: seq %d head %d row %d d %d: O %.17g, dense %.17g, direct %.17g", c->name, b, h,
                                 i, d, row[d], so[((int64_t)h * lq + i) * D + d], dr[d]);
                    checked++;
                }
                if (!same(got_l, sl[(int64_t)h * lq + i], 0.0) || !same(got_l, dl, 1e-12))
                    fail_msg("%s: seq %d head %d row %d: LSE %.17g, dense %.17g, direct %.17g", c->name, b, h, i, got_l,
                             sl[(int64_t)h * lq + i], dl);
                if (lk == 0) { /* no keys: O = 0, LSE = the sink (-inf without) */
                    for (int d = 0; d < D; d++) assert_true(row[d] == 0.0);
                    assert_true(sk ? got_l == (double)sk[h] : isinf(got_l) && got_l < 0);
                }
            }
        free(so), free(sl);
    }
    assert_int_equal(checked, (int64_t)total_q * HQ * D); /* every row is owned (the empty sequence has none) */
    printf("%-42s %lld elements match\n", c->name, (long long)checked);
    free(o), free(lse);
}

static void test_varlen_variants(void **state)
{
    (void)state;
    int32_t cu_q[B + 1] = {0}, cu_k[B + 1] = {0};
    int max_q = 1, max_k = 1;
    for (int b = 0; b < B; b++) {
        cu_q[b + 1] = cu_q[b] + k_lq[b], cu_k[b + 1] = cu_k[b] + k_lk[b];
        max_q = k_lq[b] > max_q ? k_lq[b] : max_q, max_k = k_lk[b] > max_k ? k_lk[b] : max_k;
    }
    size_t nq = (size_t)cu_q[B] * HQ * D, nk = (size_t)(cu_k[B] + 1) * HK * D; /* + 1 row: a no-key sequence's */
    uint16_t *q = malloc(2 * nq), *k = malloc(2 * nk), *v = malloc(2 * nk);
    assert_true(q && k && v);
    for (size_t i = 0; i < nq; i++) q[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, 2.0f * next_unit());
    for (size_t i = 0; i < nk; i++) k[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, 2.0f * next_unit());
    for (size_t i = 0; i < nk; i++) v[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, next_unit());
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
        run_case(&k_cases[c], q, k, v, cu_q, cu_k, max_q, max_k);
    free(q), free(k), free(v);
}

/* With the variants too: a seqlen_q cap below a sequence's length leaves its rows past the cap as they were, seqused_k
 * (lens) of 0 gives a sequence O = 0 and LSE = the sink, and a bad variant field is refused, naming it. */
static void test_cap_and_lens(void **state)
{
    (void)state;
    enum { L = 5, T = 3 * L };
    const int32_t cu_q[4] = {0, 2 * L, 2 * L, 3 * L}, cu_k[4] = {0, L, 2 * L, 3 * L}, lens[3] = {L, 0, 0};
    static uint16_t q[T * HQ * D], k[T * HK * D], v[T * HK * D];
    for (size_t i = 0; i < sizeof q / 2; i++) q[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, next_unit());
    for (size_t i = 0; i < sizeof k / 2; i++) k[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, next_unit());
    for (size_t i = 0; i < sizeof v / 2; i++) v[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, next_unit());
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 3, HQ, HK, L, L, D); /* seqlen_q L: sequence 0 capped */
    int64_t sq[3] = {0, D, HQ * D}, skv[3] = {0, D, HK * D};
    memcpy(a.q_stride, sq, sizeof sq), memcpy(a.o_stride, sq, sizeof sq);
    memcpy(a.k_stride, skv, sizeof skv), memcpy(a.v_stride, skv, sizeof skv);
    a.causal = 1, a.window = 1, a.window_left = 2, a.softcap = 4.0f;
    a.alibi_slopes = 0x7f0000500000ull, a.alibi_slopes_batch_stride = HQ;
    const float sinks[HQ] = {1, 2, 3, 4}, slopes[3 * HQ] = {0.5f, 0.25f, 0.125f, 0.0625f, 1, 1, 1, 1, 2, 2, 2, 2};
    static double o[T * HQ * D], lse[HQ * T];
    for (size_t i = 0; i < sizeof o / 8; i++) o[i] = POISON;
    for (size_t i = 0; i < sizeof lse / 8; i++) lse[i] = POISON;
    assert_int_equal(fj_reference_cpu_varlen_variants(&a, cu_q, cu_k, lens, sinks, slopes, q, k, v, o, lse), FAJIT_OK);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < HQ; h++) {
            const double *row = o + ((size_t)t * HQ + h) * D;
            double l = lse[h * T + t];
            if (t >= L && t < 2 * L) { /* sequence 0 past the cap: untouched */
                for (int d = 0; d < D; d++) assert_true(row[d] == POISON);
                assert_true(l == POISON);
            } else if (t >= 2 * L) { /* sequence 2: no keys used */
                for (int d = 0; d < D; d++) assert_true(row[d] == 0.0);
                assert_true(l == (double)sinks[h]);
            } else { /* sequence 0: causal, a window of 2 left: every row sees a key */
                for (int d = 0; d < D; d++) assert_true(isfinite(row[d]) && row[d] != POISON);
                assert_true(isfinite(l) && l > (double)sinks[h]);
            }
        }
    a.alibi_slopes = 0;
    assert_true(fj_test_status_says(fj_reference_cpu_varlen_variants(&a, cu_q, cu_k, lens, sinks, slopes, q, k, v, o,
                                                                     lse),
                                    FAJIT_ERR_INVALID_ARGUMENT, "alibi_slopes_batch_stride", NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varlen_variants),
        cmocka_unit_test(test_cap_and_lens),
    };
    return cmocka_run_group_tests_name("varlen_variants", tests, NULL, NULL);
}
