/*
 * test_reference.c - unit tests (no GPU) of the pieces the numerical checks stand on:
 *   - bf16 / f16 conversions: exact values, ties to even, overflow, subnormals, NaN, round trips of
 *     every 16-bit pattern;
 *   - the CPU float64 reference: a case computed by hand, causal masking aligned bottom-right with
 *     rows that see no key, the GQA head mapping, BNHD strides against BHND, and random problems
 *     against a naive formula written independently here;
 *   - fj_check_compare: it must fail on NaN, on writes outside O, on one wrong row that the global
 *     norm hides, on an LSE -inf mismatch or error, and pass on the reference rounded to the dtype;
 *   - the GPU reference's CUDA C source compiles with NVRTC for sm_80 and sm_90 at every head dim
 *     (skipped when NVRTC cannot be loaded).
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

#include "runtime/check.h"
#include "runtime/half.h"
#include "runtime/reference.h"

#define REF_TOL 1e-12 /* the CPU reference against closed forms: double rounding only */

/* |a - b| <= tol in double (cmocka 1.1's assert_float_equal works in float). */
#define assert_near(a, b, tol)                                                                          \
    do {                                                                                                \
        double a_ = (a), b_ = (b);                                                                      \
        if (!(fabs(a_ - b_) <= (tol)))                                                                  \
            fail_msg("%s = %.17g, %s = %.17g, tolerance %g", #a, a_, #b, b_, (double)(tol));           \
    } while (0)

/* ---- conversions ------------------------------------------------------------------------------ */

static float f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(fj_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(fj_f32_to_bf16(-2.0f), 0xc000);
    assert_int_equal(fj_f32_to_bf16(f32(0x3f808000u)), 0x3f80); /* tie, even below */
    assert_int_equal(fj_f32_to_bf16(f32(0x3f818000u)), 0x3f82); /* tie, even above */
    assert_int_equal(fj_f32_to_bf16(f32(0x3f808001u)), 0x3f81); /* just above the tie */
    assert_int_equal(fj_f32_to_bf16(f32(0x3f807fffu)), 0x3f80);
    assert_int_equal(fj_f32_to_bf16(f32(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    assert_int_equal(fj_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(fj_f32_to_bf16(f32(0x00000001u)), 0x0000); /* tiny denormal */
    uint16_t nan = fj_f32_to_bf16(f32(0x7f800001u)); /* signalling NaN whose payload is in the low bits */
    assert_true((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
    assert_float_equal(fj_bf16_to_f32(0x4049), 3.140625f, 0.0f);
}

static void test_f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(fj_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(fj_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(fj_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(fj_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(fj_f32_to_f16(65520.0f), 0x7c00);           /* tie above the max: even is inf */
    assert_int_equal(fj_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);    /* tie, even below */
    assert_int_equal(fj_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie, even above */
    assert_int_equal(fj_f32_to_f16(0x1p-24f), 0x0001);           /* smallest subnormal */
    assert_int_equal(fj_f32_to_f16(0x1p-25f), 0x0000);           /* tie with 0: even */
    assert_int_equal(fj_f32_to_f16(0x1.8p-25f), 0x0001);
    assert_int_equal(fj_f32_to_f16(0x1.8p-24f), 0x0002);         /* 1.5 units: tie, even above */
    assert_int_equal(fj_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* rounds up into the normals */
    assert_int_equal(fj_f32_to_f16(-INFINITY), 0xfc00);
    uint16_t nan = fj_f32_to_f16(NAN);
    assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
    assert_float_equal(fj_f16_to_f32(0x0001), 0x1p-24f, 0.0f);
    assert_float_equal(fj_f16_to_f32(0xc000), -2.0f, 0.0f);
}

static void test_round_trips(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t b = (uint16_t)h;
        float fb = fj_bf16_to_f32(b), fh = fj_f16_to_f32(b);
        if (!isnan(fb)) assert_int_equal(fj_f32_to_bf16(fb), b);
        else assert_true(isnan(fj_bf16_to_f32(fj_f32_to_bf16(fb))));
        if (!isnan(fh)) assert_int_equal(fj_f32_to_f16(fh), b);
        else assert_true(isnan(fj_f16_to_f32(fj_f32_to_f16(fh))));
    }
}

/* ---- the CPU reference ------------------------------------------------------------------------ */

static fajit_attention_args make_args(fajit_dtype dt, int b, int hq, int hkv, int nq, int nk, int d, int causal)
{
    fajit_attention_args a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.batch = b;
    a.heads_q = hq;
    a.heads_kv = hkv;
    a.seqlen_q = nq;
    a.seqlen_k = nk;
    a.head_dim = d;
    a.causal = causal;
    int64_t *st[4] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
    int heads[4] = {hq, hkv, hkv, hq}, seq[4] = {nq, nk, nk, nq};
    for (int t = 0; t < 4; t++) { /* BHND */
        st[t][0] = (int64_t)heads[t] * seq[t] * d;
        st[t][1] = (int64_t)seq[t] * d;
        st[t][2] = d;
    }
    return a;
}

static void set_vals(uint16_t *x, const float *v, int n, fajit_dtype dt)
{
    for (int i = 0; i < n; i++) x[i] = fj_half_from_f32(dt, v[i]);
}

/* D = 2, one query, two keys, scale 1: scores 1 and 0. */
static void test_hand_case(void **state)
{
    (void)state;
    fajit_attention_args a = make_args(FAJIT_DTYPE_BF16, 1, 1, 1, 1, 2, 2, 0);
    a.softmax_scale = 1.0f;
    const float qv[] = {1, 0}, kv[] = {1, 0, 0, 0}, vv[] = {1, 0, 0, 2};
    uint16_t q[2], k[4], v[4];
    double o[2], lse;
    set_vals(q, qv, 2, a.dtype);
    set_vals(k, kv, 4, a.dtype);
    set_vals(v, vv, 4, a.dtype);
    assert_int_equal(fj_reference_cpu(&a, q, k, v, o, &lse), FAJIT_OK);
    const double e = exp(1.0);
    assert_near(o[0], e / (e + 1), REF_TOL);
    assert_near(o[1], 2 / (e + 1), REF_TOL);
    assert_near(lse, log(e + 1), REF_TOL);

    a.softmax_scale = 0.0f; /* default 1/sqrt(2) */
    assert_int_equal(fj_reference_cpu(&a, q, k, v, o, &lse), FAJIT_OK);
    const double s = 1 / sqrt(2.0), es = exp(s);
    assert_near(o[0], es / (es + 1), REF_TOL);
    assert_near(lse, log(es + 1), REF_TOL);
}

/* Naive formula, written independently of reference.c: logical BHND float inputs, no max shift; lens (may
 * be NULL) are per-sequence key counts, used as given (the tests pass them in [0, Nk]). */
static void naive(const fajit_attention_args *a, const int32_t *lens, const float *q, const float *k, const float *v,
                  double *o, double *lse)
{
    const int d = a->head_dim, g = a->heads_q / a->heads_kv;
    const double scale = a->softmax_scale ? a->softmax_scale : 1 / sqrt((double)d);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->heads_q; h++)
            for (int i = 0; i < a->seqlen_q; i++) {
                int64_t row = ((int64_t)b * a->heads_q + h) * a->seqlen_q + i;
                const float *qr = q + row * d;
                int64_t kvbase = ((int64_t)b * a->heads_kv + h / g) * a->seqlen_k;
                double sum = 0;
                for (int dd = 0; dd < d; dd++) o[row * d + dd] = 0;
                int nk = lens ? lens[b] : a->seqlen_k;
                for (int j = 0; j < nk; j++) {
                    if (a->causal && j - i > nk - a->seqlen_q) continue;
                    double s = 0;
                    for (int dd = 0; dd < d; dd++) s += (double)qr[dd] * k[(kvbase + j) * d + dd];
                    double p = exp(scale * s);
                    sum += p;
                    for (int dd = 0; dd < d; dd++) o[row * d + dd] += p * v[(kvbase + j) * d + dd];
                }
                for (int dd = 0; dd < d && sum > 0; dd++) o[row * d + dd] /= sum;
                lse[row] = log(sum); /* log(0) = -inf for rows that see no key */
            }
}

typedef struct problem_data {
    fajit_attention_args a;
    int64_t nq_elems, nk_elems, rows;
    float *qf, *kf, *vf;        /* logical BHND values, already rounded to the dtype */
    uint16_t *q, *k, *v;        /* BHND 16-bit copies */
    double *o, *lse, *no, *nlse; /* reference and naive outputs */
} problem_data;

static uint64_t g_rng = 0x853c49e6748fea9bull;
static float rnd_sym(float amp)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return amp * (float)((double)(g_rng >> 11) * 0x1p-53 * 2 - 1);
}

static void problem_make(problem_data *p, fajit_attention_args a, float amp)
{
    p->a = a;
    p->nq_elems = (int64_t)a.batch * a.heads_q * a.seqlen_q * a.head_dim;
    p->nk_elems = (int64_t)a.batch * a.heads_kv * a.seqlen_k * a.head_dim;
    p->rows = (int64_t)a.batch * a.heads_q * a.seqlen_q;
    p->qf = malloc(sizeof(float) * (size_t)p->nq_elems);
    p->kf = malloc(sizeof(float) * (size_t)p->nk_elems);
    p->vf = malloc(sizeof(float) * (size_t)p->nk_elems);
    p->q = malloc(2 * (size_t)p->nq_elems);
    p->k = malloc(2 * (size_t)p->nk_elems);
    p->v = malloc(2 * (size_t)p->nk_elems);
    p->o = malloc(sizeof(double) * (size_t)p->nq_elems);
    p->no = malloc(sizeof(double) * (size_t)p->nq_elems);
    p->lse = malloc(sizeof(double) * (size_t)p->rows);
    p->nlse = malloc(sizeof(double) * (size_t)p->rows);
    assert_true(p->qf && p->kf && p->vf && p->q && p->k && p->v && p->o && p->no && p->lse && p->nlse);
    for (int64_t i = 0; i < p->nq_elems; i++) {
        p->q[i] = fj_half_from_f32(a.dtype, rnd_sym(amp));
        p->qf[i] = fj_half_to_f32(a.dtype, p->q[i]);
    }
    for (int64_t i = 0; i < p->nk_elems; i++) {
        p->k[i] = fj_half_from_f32(a.dtype, rnd_sym(amp));
        p->kf[i] = fj_half_to_f32(a.dtype, p->k[i]);
        p->v[i] = fj_half_from_f32(a.dtype, rnd_sym(1.0f));
        p->vf[i] = fj_half_to_f32(a.dtype, p->v[i]);
    }
    assert_int_equal(fj_reference_cpu(&p->a, p->q, p->k, p->v, p->o, p->lse), FAJIT_OK);
    naive(&p->a, NULL, p->qf, p->kf, p->vf, p->no, p->nlse);
}

static void problem_free(problem_data *p)
{
    void *all[] = {p->qf, p->kf, p->vf, p->q, p->k, p->v, p->o, p->lse, p->no, p->nlse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* Reference == naive formula, to 1e-12 relative (O) and absolute (LSE); -inf rows identical. */
static void expect_matches_naive(const problem_data *p)
{
    for (int64_t i = 0; i < p->nq_elems; i++)
        if (fabs(p->o[i] - p->no[i]) > 1e-12 * (1 + fabs(p->no[i])))
            fail_msg("O[%lld] %.17g vs %.17g", (long long)i, p->o[i], p->no[i]);
    for (int64_t r = 0; r < p->rows; r++) {
        if (isinf(p->nlse[r])) assert_true(isinf(p->lse[r]) && p->lse[r] < 0);
        else assert_near(p->lse[r], p->nlse[r], 1e-12);
    }
}

static void test_random_vs_naive(void **state)
{
    (void)state;
    static const int shapes[][8] = {
        /* dtype, B, Hq, Hkv, Nq, Nk, D, causal */
        {FAJIT_DTYPE_BF16, 2, 2, 2, 17, 17, 64, 0}, {FAJIT_DTYPE_F16, 1, 4, 2, 33, 70, 32, 1},
        {FAJIT_DTYPE_BF16, 1, 3, 1, 70, 33, 16, 1}, {FAJIT_DTYPE_F16, 2, 8, 2, 1, 1, 96, 1},
        {FAJIT_DTYPE_BF16, 1, 2, 1, 5, 300, 8, 0},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *x = shapes[s];
        problem_data p;
        problem_make(&p, make_args((fajit_dtype)x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]), 2.0f);
        expect_matches_naive(&p);
        problem_free(&p);
    }
}

/* Per-sequence KV lengths (1, 16, 20, 7, 0 of capacity 20; and -3, 99 clamped to 0 and 20) against the naive
 * formula on the same lengths, with and without the causal mask (bottom-right per sequence). */
static void test_seqlens_vs_naive(void **state)
{
    (void)state;
    static const int32_t lens[5] = {1, 16, 20, 7, 0}, wild[5] = {1, 16, 99, 7, -3};
    for (int causal = 0; causal <= 1; causal++) {
        problem_data p;
        problem_make(&p, make_args(FAJIT_DTYPE_BF16, 5, 4, 2, 3, 20, 16, causal), 2.0f);
        assert_int_equal(fj_reference_cpu_lens(&p.a, lens, p.q, p.k, p.v, p.o, p.lse), FAJIT_OK);
        naive(&p.a, lens, p.qf, p.kf, p.vf, p.no, p.nlse);
        expect_matches_naive(&p);
        for (int64_t r = 4 * 4 * 3; r < 5 * 4 * 3; r++) assert_true(isinf(p.lse[r]) && p.lse[r] < 0); /* b = 4 */
        assert_int_equal(fj_reference_cpu_lens(&p.a, wild, p.q, p.k, p.v, p.o, p.lse), FAJIT_OK);
        expect_matches_naive(&p); /* the same: 99 reads as 20, -3 as 0 */
        problem_free(&p);
    }
}

/* Nq = 3, Nk = 2, causal: row 0 sees nothing (O = 0, LSE = -inf), row 1 only key 0, row 2 both. */
static void test_causal_bottom_right(void **state)
{
    (void)state;
    problem_data p;
    problem_make(&p, make_args(FAJIT_DTYPE_BF16, 1, 1, 1, 3, 2, 8, 1), 1.0f);
    expect_matches_naive(&p);
    for (int d = 0; d < 8; d++) assert_true(p.o[d] == 0.0);
    assert_true(isinf(p.lse[0]) && p.lse[0] < 0);
    double s0 = 0;
    for (int d = 0; d < 8; d++) s0 += (double)p.qf[8 + d] * p.kf[d];
    assert_near(p.lse[1], s0 / sqrt(8.0), REF_TOL);
    for (int d = 0; d < 8; d++) assert_near(p.o[8 + d], p.vf[d], REF_TOL);
    problem_free(&p);

    /* Nq = 2 < Nk = 4: row 0 sees keys 0..2, row 1 all four. Key 3 carries a huge V: row 0 must not see it. */
    problem_make(&p, make_args(FAJIT_DTYPE_F16, 1, 1, 1, 2, 4, 8, 1), 1.0f);
    for (int d = 0; d < 8; d++) p.v[3 * 8 + d] = fj_f32_to_f16(1000.0f);
    assert_int_equal(fj_reference_cpu(&p.a, p.q, p.k, p.v, p.o, p.lse), FAJIT_OK);
    for (int d = 0; d < 8; d++) assert_true(fabs(p.o[d]) <= 1.0 && fabs(p.o[8 + d]) > 10.0);
    problem_free(&p);
}

/* Hq = 4, Hkv = 2: V of kv head 0 is all 1, of kv head 1 all 2, so O of q heads 0,1 is 1 and of 2,3 is 2. */
static void test_gqa_mapping(void **state)
{
    (void)state;
    problem_data p;
    problem_make(&p, make_args(FAJIT_DTYPE_BF16, 2, 4, 2, 5, 7, 16, 0), 1.0f);
    for (int64_t i = 0; i < p.nk_elems; i++) {
        int64_t head = (i / (7 * 16)) % 2;
        p.v[i] = fj_f32_to_bf16(head ? 2.0f : 1.0f);
    }
    assert_int_equal(fj_reference_cpu(&p.a, p.q, p.k, p.v, p.o, p.lse), FAJIT_OK);
    for (int64_t i = 0; i < p.nq_elems; i++) {
        int64_t h = (i / (5 * 16)) % 4;
        assert_near(p.o[i], h < 2 ? 1.0 : 2.0, 1e-14);
    }
    problem_free(&p);
}

/* The same logical tensors laid out BNHD with 8 padding elements per row give the same bits. */
static void test_bnhd_strides(void **state)
{
    (void)state;
    enum { B = 2, HQ = 4, HKV = 2, NQ = 9, NK = 11, D = 16, LD = D + 8 };
    problem_data p;
    problem_make(&p, make_args(FAJIT_DTYPE_F16, B, HQ, HKV, NQ, NK, D, 1), 2.0f);
    fajit_attention_args a = p.a;
    int64_t *st[4] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
    int heads[4] = {HQ, HKV, HKV, HQ}, seq[4] = {NQ, NK, NK, NQ};
    for (int t = 0; t < 4; t++) {
        st[t][0] = (int64_t)seq[t] * heads[t] * LD;
        st[t][1] = LD;
        st[t][2] = (int64_t)heads[t] * LD;
    }
    uint16_t *q = calloc((size_t)B * NQ * HQ * LD, 2), *k = calloc((size_t)B * NK * HKV * LD, 2);
    uint16_t *v = calloc((size_t)B * NK * HKV * LD, 2);
    double *o = malloc(sizeof(double) * (size_t)p.nq_elems), *lse = malloc(sizeof(double) * (size_t)p.rows);
    assert_true(q && k && v && o && lse);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++)
            for (int n = 0; n < NQ; n++)
                memcpy(q + b * a.q_stride[0] + h * a.q_stride[1] + n * a.q_stride[2],
                       p.q + (((int64_t)b * HQ + h) * NQ + n) * D, 2 * D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HKV; h++)
            for (int n = 0; n < NK; n++) {
                int64_t src = (((int64_t)b * HKV + h) * NK + n) * D;
                memcpy(k + b * a.k_stride[0] + h * a.k_stride[1] + n * a.k_stride[2], p.k + src, 2 * D);
                memcpy(v + b * a.v_stride[0] + h * a.v_stride[1] + n * a.v_stride[2], p.v + src, 2 * D);
            }
    assert_int_equal(fj_reference_cpu(&a, q, k, v, o, lse), FAJIT_OK);
    assert_memory_equal(o, p.o, sizeof(double) * (size_t)p.nq_elems);
    assert_memory_equal(lse, p.lse, sizeof(double) * (size_t)p.rows);
    free(q), free(k), free(v), free(o), free(lse);
    problem_free(&p);
}

static void test_bad_args(void **state)
{
    (void)state;
    uint16_t x[64] = {0};
    double o[64], lse[8];
    fajit_attention_args a = make_args(FAJIT_DTYPE_BF16, 1, 3, 2, 1, 1, 8, 0);
    assert_int_equal(fj_reference_cpu(&a, x, x, x, o, lse), FAJIT_ERR_INVALID_ARGUMENT); /* 3 % 2 */
    a = make_args(FAJIT_DTYPE_AUTO, 1, 1, 1, 1, 1, 8, 0);
    assert_int_equal(fj_reference_cpu(&a, x, x, x, o, lse), FAJIT_ERR_INVALID_ARGUMENT);
    a = make_args(FAJIT_DTYPE_F16, 1, 1, 1, 0, 1, 8, 0);
    assert_int_equal(fj_reference_cpu(&a, x, x, x, o, lse), FAJIT_ERR_INVALID_ARGUMENT);
    a = make_args(FAJIT_DTYPE_F16, 1, 1, 1, 1, 1, 8, 0);
    assert_int_equal(fj_reference_cpu(&a, x, x, NULL, o, lse), FAJIT_ERR_INVALID_ARGUMENT);
}

/* ---- fj_check_compare --------------------------------------------------------------------------- */

typedef struct compare_case {
    problem_data p;
    int64_t o_words, lse_words;
    uint16_t *o;  /* the reference rounded to the dtype, rows padded by 8, plus a 64-word guard */
    float *lse;   /* the reference LSE as float, plus a 16-float guard */
} compare_case;

enum { CMP_PAD = 8, CMP_GUARD_O = 64, CMP_GUARD_LSE = 16 };

/* Build "kernel output" = the reference rounded to the dtype, with poison in padding and guards. */
static void compare_make(compare_case *c, fajit_dtype dt, int causal)
{
    problem_make(&c->p, make_args(dt, 2, 2, 1, 40, 30, 64, causal), 1.5f);
    fajit_attention_args *a = &c->p.a;
    const int ld = 64 + CMP_PAD;
    a->o_stride[0] = (int64_t)2 * 40 * ld;
    a->o_stride[1] = (int64_t)40 * ld;
    a->o_stride[2] = ld;
    c->o_words = c->p.rows * ld + CMP_GUARD_O;
    c->lse_words = c->p.rows + CMP_GUARD_LSE;
    c->o = malloc(2 * (size_t)c->o_words);
    c->lse = malloc(4 * (size_t)c->lse_words);
    assert_true(c->o && c->lse);
    memset(c->o, 0xff, 2 * (size_t)c->o_words);
    memset(c->lse, 0xff, 4 * (size_t)c->lse_words);
    for (int64_t r = 0; r < c->p.rows; r++) {
        for (int d = 0; d < 64; d++) c->o[r * ld + d] = fj_half_from_f32(dt, (float)c->p.o[r * 64 + d]);
        c->lse[r] = (float)c->p.lse[r];
    }
}

static fj_check_result compare_run(compare_case *c)
{
    fj_check_result res;
    memset(&res, 0, sizeof res);
    res.tol_rel_l2 = c->p.a.dtype == FAJIT_DTYPE_F16 ? 2e-3 : 1e-2;
    res.tol_row_rel = 4 * res.tol_rel_l2;
    res.tol_lse = 1e-3;
    fj_check_view vw = {&c->p.a, c->o, c->o_words, c->lse, c->lse_words, c->p.o, NULL, c->p.lse, NULL};
    fj_check_compare(&vw, &res);
    return res;
}

static void compare_free(compare_case *c)
{
    free(c->o);
    free(c->lse);
    problem_free(&c->p);
}

static void test_compare_pass(void **state)
{
    (void)state;
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++) {
        compare_case c;
        compare_make(&c, (fajit_dtype)dt, 1);
        fj_check_result r = compare_run(&c);
        if (!r.pass) fail_msg("dtype %d: %s", dt, r.why);
        assert_true(r.rel_l2 > 0 && r.rel_l2 < fj_half_unit_roundoff((fajit_dtype)dt)); /* rounding only */
        assert_int_equal(r.elements, c.p.nq_elems);
        assert_int_equal(r.nan_count + r.oob_writes + r.lse_inf_mismatch, 0);
        compare_free(&c);
    }
}

static void test_compare_failures(void **state)
{
    (void)state;
    compare_case c;
    fj_check_result r;
    const int ld = 64 + CMP_PAD;

    compare_make(&c, FAJIT_DTYPE_BF16, 0); /* one NaN */
    c.o[5 * ld + 3] = 0x7fc0;
    r = compare_run(&c);
    assert_false(r.pass);
    assert_int_equal(r.nan_count, 1);
    compare_free(&c);

    compare_make(&c, FAJIT_DTYPE_BF16, 0); /* a write into the row padding, one into the guard */
    c.o[7 * ld + 64] = 0;
    c.o[c.o_words - 1] = 0;
    r = compare_run(&c);
    assert_false(r.pass);
    assert_int_equal(r.oob_writes, 2);
    compare_free(&c);

    compare_make(&c, FAJIT_DTYPE_BF16, 0); /* one row of 160 off by 6%: hidden in the global norm */
    for (int d = 0; d < 64; d++) c.o[11 * ld + d] = fj_f32_to_bf16((float)(c.p.o[11 * 64 + d] * 1.06));
    r = compare_run(&c);
    assert_false(r.pass);
    assert_true(r.rel_l2 <= r.tol_rel_l2);
    assert_int_equal(r.worst_row, 11);
    assert_true(r.worst_row_rel > r.tol_row_rel);
    assert_non_null(strstr(r.why, "row 11"));
    compare_free(&c);

    compare_make(&c, FAJIT_DTYPE_F16, 1); /* Nq 40 > Nk 30, causal: row 3 sees no key; a finite LSE there */
    assert_true(isinf(c.p.lse[3]));
    c.lse[3] = 0.0f;
    r = compare_run(&c);
    assert_false(r.pass);
    assert_int_equal(r.lse_inf_mismatch, 1);
    compare_free(&c);

    compare_make(&c, FAJIT_DTYPE_F16, 0); /* LSE off by 2e-3 */
    c.lse[20] += 2e-3f;
    r = compare_run(&c);
    assert_false(r.pass);
    assert_true(r.lse_max_abs > 1.9e-3 && r.lse_max_abs < 2.1e-3);
    compare_free(&c);
}

/* ---- the GPU reference source ------------------------------------------------------------------- */

static void test_gpu_reference_compiles(void **state)
{
    (void)state;
    static const char *const sms[] = {"sm_80", "sm_90"};
    static const int dims[] = {64, 96, 128, 192, 256};
    fajit_status st = fj_reference_gpu_prepare("sm_80", 64);
    if (st == FAJIT_ERR_LIBRARY_MISSING) {
        print_message("SKIP: NVRTC not loadable: %s\n", fajit_errmsg());
        skip();
    }
    for (size_t s = 0; s < 2; s++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
            st = fj_reference_gpu_prepare(sms[s], dims[d]);
            if (st != FAJIT_OK) fail_msg("%s D=%d: %s", sms[s], dims[d], fajit_errmsg());
        }
    assert_int_equal(fj_reference_gpu_prepare("sm_90", 100), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fj_reference_gpu_source(), "fj_ref_fwd"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),     cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_round_trips),       cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_random_vs_naive),   cmocka_unit_test(test_causal_bottom_right),
        cmocka_unit_test(test_gqa_mapping),       cmocka_unit_test(test_bnhd_strides),
        cmocka_unit_test(test_seqlens_vs_naive),
        cmocka_unit_test(test_bad_args),          cmocka_unit_test(test_compare_pass),
        cmocka_unit_test(test_compare_failures),  cmocka_unit_test(test_gpu_reference_compiles),
    };
    return cmocka_run_group_tests_name("reference", tests, NULL, NULL);
}
