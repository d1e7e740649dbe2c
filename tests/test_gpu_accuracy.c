/*
 * test_gpu_accuracy.c - fajit's error against FlashAttention's arithmetic, seed by seed, on both paths
 * (label gpu; issue 21 item 10).
 *
 * For BF16, B 1, H 8, D 128, non-causal, N 1500 and 1536, contiguous (BHND) and strided (BNHD) inputs,
 * and FJ_ACCURACY_SEEDS seeds (default 12) of fresh N(0, 1) inputs:
 *     ratio = max|O_fajit - O_fp64| / max|O_fa2 - O_fp64|           (over every element of O)
 * O_fp64: the CPU float64 reference (reference.h) on the same bf16 inputs. O_fa2: FlashAttention-2's
 * arithmetic emulated on the CPU (fa2_rows below): 64-key tiles, S in fp32, the running max moved on
 * every new max with l and O rescaled, P = 2^(fp32(S * scale_log2) - m * scale_log2) as PyTorch's build
 * of FA2 computes it, l summed from the fp32 P by the four lanes of a row, P rounded to bf16 (RN) for
 * the PV product, O = bf16(O * (1 / l)). The tensor cores' fp32 accumulation is modelled as one fp32
 * rounding per tile: its error (~2^-23) is far below bf16's 2^-9, which sets this metric (SDPA itself is
 * not callable from C; scripts/softmax_numerics.py checks the emulation's choices). Per path, N and
 * layout it prints every seed's ratio and asserts mean <= 1.6 and max <= 2.8: today's default kernels (the
 * weight test is off, plan.rescale_weight_log2 = 0), a guard against getting worse; and, with config accurate = 1
 * (the weight test with a held threshold, fajit.h) on the tile the fill gives it, FlashAttention-3's spread
 * against FA2: mean <= 1.05, max <= 1.3. The goal, FlashAttention-3's
 * spread against FA2 (mean <= 1.05, max <= 1.3), was met on an H200 with the weight test on (rescale_weight_log2
 * -2) at a 2-3.5% speed cost, so it is not the default yet (bench/results/h200-accuracy-ab-2026-11-26.md). Both paths: sm_80 forced, and the GPU's best when it is
 * sm_90a. Without libcuda or a device, prints "SKIP: <reason>" and exits 77. FJ_ACCURACY_BOUND=goal asserts the
 * issue's bound instead (mean <= 1.05, max <= 1.3), for a build with a candidate fix on (bench/acc_ab.sh's
 * variants: -DFJ_SM80_RESCALE_WEIGHT_LOG2=-2 -DFJ_SM90_RESCALE_WEIGHT_LOG2=-2 [-DFJ_RESCALE_WEIGHT_EST=1]).
 *
 *   build/tests/test_gpu_accuracy          (or ctest --test-dir build -R test_gpu_accuracy -V)
 *   FJ_ACCURACY_BOUND=goal build/tests/test_gpu_accuracy
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "runtime/tune.h"
#include "test_support.h"

#define ACC_HEADS 8
#define ACC_D 128
#define ACC_FA2_BLOCK_N 64 /* FA2's key tile for D 128 */
#define ACC_MEAN_MAX 1.6 /* FA3's spread: 1.05 (the goal, not met by the default kernels) */
#define ACC_RATIO_MAX 2.8 /* FA3's spread: 1.3 */
#define ACC_GOAL_MEAN_MAX 1.05 /* FJ_ACCURACY_BOUND=goal: the bound, FlashAttention-3's spread */
#define ACC_GOAL_RATIO_MAX 1.3
#define ACC_THREADS 16
#define LOG2E 1.4426950408889634

static fajit_context *g_ctx;

static float bf16_round(float x) { return fj_bf16_to_f32(fj_f32_to_bf16(x)); }

/* ---- FlashAttention-2's arithmetic on the CPU ----------------------------------------------------- */

typedef struct fa2_job {
    const float *q, *k, *v;    /* the bf16 inputs as floats, BHND, contiguous: [H][N][D] */
    float *o;                  /* [H][N][D]: bf16 values as floats */
    int n, next;               /* rows per head; next row to take (under lock) */
    float scale_log2;
    pthread_mutex_t lock;
} fa2_job;

/* One query row (head h, row i) the way FA2 computes it. */
static void fa2_row(const fa2_job *jb, int h, int i, float *s, double *acc)
{
    const int n = jb->n, d = ACC_D;
    const float *q = jb->q + ((size_t)h * n + i) * d, *kh = jb->k + (size_t)h * n * d, *vh = jb->v + (size_t)h * n * d;
    float o[ACC_D], l[4] = {0, 0, 0, 0}, m = -INFINITY, c = jb->scale_log2;
    for (int x = 0; x < d; x++) o[x] = 0;
    for (int j0 = 0; j0 < n; j0 += ACC_FA2_BLOCK_N) {
        int j1 = j0 + ACC_FA2_BLOCK_N < n ? j0 + ACC_FA2_BLOCK_N : n;
        float mt = -INFINITY;
        for (int j = j0; j < j1; j++) { /* S in fp32: exact products, one rounding */
            double dot = 0;
            for (int x = 0; x < d; x++) dot += (double)q[x] * kh[(size_t)j * d + x];
            s[j - j0] = (float)dot;
            mt = fmaxf(mt, s[j - j0]);
        }
        float mnew = fmaxf(m, mt);
        if (m != -INFINITY && mnew > m) { /* rescale l and O by 2^((m_old - m_new) * scale_log2) */
            float corr = (float)exp2((double)((m - mnew) * c));
            for (int t = 0; t < 4; t++) l[t] *= corr;
            for (int x = 0; x < d; x++) o[x] *= corr;
        }
        m = mnew;
        float max_scaled = m * c;
        for (int x = 0; x < d; x++) acc[x] = 0;
        float part[4] = {0, 0, 0, 0};
        for (int j = j0; j < j1; j++) {
            float p = (float)exp2((double)(s[j - j0] * c - max_scaled)); /* fp32(S * c), then the subtraction */
            part[(j % 8) / 2] += p;                                         /* the lane of the m16n8 C layout */
            double pb = bf16_round(p);
            for (int x = 0; x < d; x++) acc[x] += pb * vh[(size_t)j * d + x];
        }
        for (int t = 0; t < 4; t++) l[t] += part[t];
        for (int x = 0; x < d; x++) o[x] = (float)(o[x] + acc[x]);
    }
    float inv = 1.0f / ((l[0] + l[1]) + (l[2] + l[3]));
    float *out = jb->o + ((size_t)h * n + i) * d;
    for (int x = 0; x < d; x++) out[x] = bf16_round(o[x] * inv);
}

static void *fa2_worker(void *arg)
{
    fa2_job *jb = arg;
    float s[ACC_FA2_BLOCK_N];
    double acc[ACC_D];
    for (;;) {
        pthread_mutex_lock(&jb->lock);
        int r = jb->next;
        jb->next += 16;
        pthread_mutex_unlock(&jb->lock);
        if (r >= ACC_HEADS * jb->n) return NULL;
        for (int i = r; i < r + 16 && i < ACC_HEADS * jb->n; i++) fa2_row(jb, i / jb->n, i % jb->n, s, acc);
    }
}

static void fa2_reference(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n, float *o)
{
    size_t elems = (size_t)ACC_HEADS * n * ACC_D;
    float *f[3] = {malloc(4 * elems), malloc(4 * elems), malloc(4 * elems)};
    const uint16_t *src[3] = {q, k, v};
    assert_true(f[0] && f[1] && f[2]);
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < elems; i++) f[t][i] = fj_bf16_to_f32(src[t][i]);
    fa2_job jb = {f[0], f[1], f[2], o, n, 0, (float)(1.0 / sqrt((double)ACC_D) * LOG2E), PTHREAD_MUTEX_INITIALIZER};
    pthread_t tid[ACC_THREADS];
    int started = 0;
    for (int t = 0; t < ACC_THREADS; t++) started += pthread_create(&tid[started], NULL, fa2_worker, &jb) == 0;
    fa2_worker(&jb);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    free(f[0]), free(f[1]), free(f[2]);
}

/* ---- one problem: inputs, references, fajit on each path and layout -------------------------------- */

typedef struct acc_problem {
    int n;
    uint16_t *q, *k, *v;    /* BHND host inputs */
    double *ref;            /* fp64 reference, BHND */
    double fa2_err;         /* max|O_fa2 - O_fp64| */
} acc_problem;

static void args_for(fajit_attention_args *a, int n, int bnhd)
{
    fajit_attention_args_init(a);
    a->dtype = FAJIT_DTYPE_BF16, a->batch = 1, a->heads_q = a->heads_kv = ACC_HEADS;
    a->seqlen_q = a->seqlen_k = n, a->head_dim = ACC_D;
    if (bnhd) fajit_args_set_bnhd_strides(a);
    else fajit_args_set_bhnd_strides(a);
}

static void problem_make(acc_problem *p, int n, uint64_t seed)
{
    size_t elems = (size_t)ACC_HEADS * n * ACC_D;
    p->n = n;
    p->q = malloc(2 * elems), p->k = malloc(2 * elems), p->v = malloc(2 * elems);
    p->ref = malloc(8 * elems);
    float *fa2 = malloc(4 * elems);
    assert_true(p->q && p->k && p->v && p->ref && fa2);
    fj_half_fill_normal(FAJIT_DTYPE_BF16, p->q, elems, seed * 3 + 1);
    fj_half_fill_normal(FAJIT_DTYPE_BF16, p->k, elems, seed * 3 + 2);
    fj_half_fill_normal(FAJIT_DTYPE_BF16, p->v, elems, seed * 3 + 3);
    fajit_attention_args a;
    args_for(&a, n, 0);
    assert_int_equal(fj_reference_cpu(&a, p->q, p->k, p->v, p->ref, NULL), FAJIT_OK);
    fa2_reference(p->q, p->k, p->v, n, fa2);
    p->fa2_err = 0;
    for (size_t i = 0; i < elems; i++) p->fa2_err = fmax(p->fa2_err, fabs(fa2[i] - p->ref[i]));
    free(fa2);
}

static void problem_free(acc_problem *p) { free(p->q), free(p->k), free(p->v), free(p->ref); }

/* BHND host array -> the layout's order ([H][N][D] or [N][H][D]). */
static void relayout(const uint16_t *src, uint16_t *dst, int n, int bnhd)
{
    for (int h = 0; h < ACC_HEADS; h++)
        for (int i = 0; i < n; i++) {
            size_t to = bnhd ? ((size_t)i * ACC_HEADS + h) * ACC_D : ((size_t)h * n + i) * ACC_D;
            memcpy(dst + to, src + ((size_t)h * n + i) * ACC_D, 2 * ACC_D);
        }
}

/* max|O_fajit - O_fp64| with the path's default config (accurate: with config accurate = 1, the fill's tile for it);
 * -1 on a failure (printed). */
static double fajit_error(const acc_problem *p, fajit_arch arch, int bnhd, int accurate, char *cfg_text, size_t cfg_len)
{
    const fj_cuda_api *cu = g_ctx->cu;
    size_t elems = (size_t)ACC_HEADS * p->n * ACC_D, bytes = 2 * elems;
    fajit_shape shape = {1, ACC_HEADS, ACC_HEADS, p->n, p->n};
    fajit_config cfg = {.arch = arch, .dtype = FAJIT_DTYPE_BF16, .head_dim = ACC_D, .accurate = accurate};
    if (fajit_config_fill(g_ctx, &shape, &cfg) != FAJIT_OK) {
        printf("FAIL fajit_config_fill: %s\n", fajit_errmsg());
        return -1;
    }
    fajit_config_format(&cfg, cfg_text, cfg_len);
    uint16_t *host = malloc(bytes), *o = malloc(bytes);
    assert_true(host && o);
    fj_CUdeviceptr d[4] = {0, 0, 0, 0};
    const uint16_t *src[3] = {p->q, p->k, p->v};
    double err = -1;
    fajit_attention_args a;
    args_for(&a, p->n, bnhd);
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    for (int t = 0; t < 4; t++) assert_int_equal(cu->cuMemAlloc(&d[t], bytes), 0);
    for (int t = 0; t < 3; t++) {
        relayout(src[t], host, p->n, bnhd);
        assert_int_equal(cu->cuMemcpyHtoD(d[t], host, bytes), 0);
    }
    assert_int_equal(cu->cuMemsetD8(d[3], 0xff, bytes), 0); /* O poisoned: NaN where not written */
    a.q = d[0], a.k = d[1], a.v = d[2], a.o = d[3];
    if (fajit_attention_forward(g_ctx, &a, &cfg) != FAJIT_OK) {
        printf("FAIL %s: fajit_attention_forward: %s\n", cfg_text, fajit_errmsg());
    } else if (cu->cuCtxSynchronize() == 0 && cu->cuMemcpyDtoH(o, d[3], bytes) == 0) {
        err = 0;
        for (int h = 0; h < ACC_HEADS; h++)
            for (int i = 0; i < p->n; i++) {
                size_t at = bnhd ? ((size_t)i * ACC_HEADS + h) * ACC_D : ((size_t)h * p->n + i) * ACC_D;
                const double *r = p->ref + ((size_t)h * p->n + i) * ACC_D;
                for (int x = 0; x < ACC_D; x++) {
                    double e = fabs(fj_bf16_to_f32(o[at + x]) - r[x]);
                    err = e == e ? fmax(err, e) : INFINITY; /* NaN: unwritten or wrong */
                }
            }
    } else {
        printf("FAIL %s: the forward's run or its download failed\n", cfg_text);
    }
    for (int t = 0; t < 4; t++) cu->cuMemFree(d[t]);
    fj_context_pop(g_ctx);
    free(host), free(o);
    return err;
}

/* ---- the test ---------------------------------------------------------------------------------------- */

#define ACC_MAX_SEEDS 64
#define ACC_RUNS 16 /* configs (default, accurate) x paths x N x layouts */

static void test_ratio_to_fa2(void **state)
{
    (void)state;
    const char *env = getenv("FJ_ACCURACY_SEEDS");
    int seeds = env && atoi(env) > 0 ? atoi(env) : 12;
    if (seeds > ACC_MAX_SEEDS) seeds = ACC_MAX_SEEDS;
    const char *bound = getenv("FJ_ACCURACY_BOUND");
    int goal = bound && strcmp(bound, "goal") == 0;
    double mean_max = goal ? ACC_GOAL_MEAN_MAX : ACC_MEAN_MAX, ratio_max = goal ? ACC_GOAL_RATIO_MAX : ACC_RATIO_MAX;
    printf("bound: %s (mean <= %.2f, max <= %.2f)\n", goal ? "the issue's goal" : "today's guard", mean_max, ratio_max);
    fajit_arch paths[2] = {FAJIT_ARCH_SM80, FAJIT_ARCH_SM90A};
    int n_paths = fj_best_path(g_ctx) == FAJIT_ARCH_SM90A ? 2 : 1;
    if (n_paths == 1) printf("note: the GPU's best path is not sm_90a: sm_80 only\n");
    static const int sizes[2] = {1500, 1536};
    static double ratio[ACC_RUNS][ACC_MAX_SEEDS];
    char cfg_text[ACC_RUNS][128];
    int failures = 0;
    for (int ni = 0; ni < 2; ni++)
        for (int s = 0; s < seeds; s++) {
            acc_problem p;
            problem_make(&p, sizes[ni], 1000 * (uint64_t)sizes[ni] + (uint64_t)s);
            printf("N %d seed %2d: FA2 arithmetic (CPU) max err %.3e; ratios", p.n, s, p.fa2_err);
            for (int acc = 0; acc < 2; acc++)
                for (int pi = 0; pi < n_paths; pi++)
                    for (int bnhd = 0; bnhd < 2; bnhd++) {
                        int run = ((acc * 2 + pi) * 2 + ni) * 2 + bnhd;
                        double e = fajit_error(&p, paths[pi], bnhd, acc, cfg_text[run], sizeof cfg_text[run]);
                        ratio[run][s] = e < 0 ? INFINITY : e / p.fa2_err;
                        printf(" %s%s/%s %.3f", acc ? "acc " : "", pi ? "sm_90a" : "sm_80", bnhd ? "bnhd" : "bhnd",
                               ratio[run][s]);
                    }
            printf("\n");
            fflush(stdout);
            problem_free(&p);
        }
    for (int acc = 0; acc < 2; acc++)
        for (int pi = 0; pi < n_paths; pi++)
            for (int ni = 0; ni < 2; ni++)
                for (int bnhd = 0; bnhd < 2; bnhd++) {
                    int run = ((acc * 2 + pi) * 2 + ni) * 2 + bnhd;
                    double sum = 0, mx = 0;
                    for (int s = 0; s < seeds; s++) sum += ratio[run][s], mx = fmax(mx, ratio[run][s]);
                    double mean = sum / seeds;
                    double mean_bound = acc ? ACC_GOAL_MEAN_MAX : mean_max, max_bound = acc ? ACC_GOAL_RATIO_MAX : ratio_max;
                    int pass = mean <= mean_bound && mx <= max_bound;
                    printf("%s %-6s N %d %s: ratio to FA2's arithmetic over %d seeds: mean %.3f (<= %.2f), max %.3f (<= %.2f) "
                           "[%s]\n", pass ? "PASS" : "FAIL", pi ? "sm_90a" : "sm_80", sizes[ni], bnhd ? "bnhd" : "bhnd",
                           seeds, mean, mean_bound, mx, max_bound, cfg_text[run]);
                    failures += !pass;
                }
    fflush(stdout);
    assert_int_equal(failures, 0);
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s)\n", g_ctx->device_name, fajit_context_sm(g_ctx));
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ratio_to_fa2)};
    int rc = cmocka_run_group_tests_name("gpu_accuracy", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
