/*
 * test_gpu_forward.c - fajit_attention_forward on a GPU against the references (label gpu).
 *
 * Odd shapes through the check harness (runtime/check.h): N = 1, 17, 1000; Nq != Nk both ways, with
 * and without the causal mask (rows that see no key must give O = 0, LSE = -inf); D = 96; GQA
 * (Hq 8, Hkv 2) and MQA (Hkv 1); BNHD strides and padded rows; both dtypes; one problem checked
 * against the GPU reference instead of the CPU one. Tolerances are the harness defaults (check.h):
 * rel L2 <= 1e-2 bf16 / 2e-3 f16, worst row <= 4x that, LSE abs <= 1e-3, no NaN, no stray writes.
 * The GPU reference itself is first checked against the CPU float64 one (rel L2 <= 1e-5, LSE 1e-4).
 * Scores that rise along the keys and spike (FJ_FILL_GROWING) take every rescale path of the online
 * softmax (lazy rescale included). Every case prints one line. Without libcuda or a device, prints "SKIP: <reason>" and exits 77.
 *
 *   ctest --test-dir build -L gpu --output-on-failure      (or run build/tests/test_gpu_forward)
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
#include <time.h>

#include "runtime/check.h"
#include "runtime/context.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "runtime/tune.h"
#include "test_support.h"

static fajit_context *g_ctx;

typedef struct gpu_case {
    const char *name;
    fajit_dtype dtype;
    int b, hq, hkv, nq, nk, d, causal;
    fj_check_layout layout;
    int row_pad;
    fj_check_ref ref;
} gpu_case;

#define BF FAJIT_DTYPE_BF16
#define FH FAJIT_DTYPE_F16
#define BHND FJ_LAYOUT_BHND
#define BNHD FJ_LAYOUT_BNHD

static const gpu_case k_cases[] = {
    /* name                       dtype  B  Hq Hkv   Nq    Nk    D causal layout pad reference */
    {"N=1", BF, 1, 2, 2, 1, 1, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"N=1 causal f16", FH, 1, 2, 2, 1, 1, 64, 1, BHND, 0, FJ_REF_AUTO},
    {"N=17", FH, 2, 3, 3, 17, 17, 64, 0, BHND, 0, FJ_REF_AUTO},
    {"N=17 causal", BF, 1, 2, 2, 17, 17, 256, 1, BHND, 0, FJ_REF_AUTO},
    {"N=1000", BF, 1, 2, 2, 1000, 1000, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"N=1000 causal f16", FH, 1, 2, 2, 1000, 1000, 128, 1, BHND, 0, FJ_REF_AUTO},
    {"Nq<Nk", BF, 1, 2, 2, 100, 1000, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"Nq<Nk causal", FH, 1, 2, 2, 100, 1000, 64, 1, BHND, 0, FJ_REF_AUTO},
    {"Nq>Nk", FH, 1, 2, 2, 1000, 100, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"Nq>Nk causal (no-key rows)", BF, 1, 2, 2, 1000, 100, 128, 1, BHND, 0, FJ_REF_AUTO},
    {"Nq=1 Nk=777 causal", BF, 2, 2, 2, 1, 777, 64, 1, BHND, 0, FJ_REF_AUTO},
    {"D=96", BF, 1, 3, 3, 333, 333, 96, 0, BHND, 0, FJ_REF_AUTO},
    {"D=96 causal f16", FH, 1, 3, 3, 333, 200, 96, 1, BHND, 0, FJ_REF_AUTO},
    {"D=192", BF, 1, 2, 2, 300, 300, 192, 1, BHND, 0, FJ_REF_AUTO},
    {"GQA 8/2", BF, 2, 8, 2, 257, 257, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"GQA 8/2 causal f16", FH, 1, 8, 2, 130, 300, 64, 1, BHND, 0, FJ_REF_AUTO},
    {"MQA 8/1", FH, 1, 8, 1, 200, 200, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"MQA 8/1 causal", BF, 1, 8, 1, 300, 129, 256, 1, BHND, 0, FJ_REF_AUTO},
    {"BNHD", BF, 2, 4, 4, 250, 250, 128, 0, BNHD, 0, FJ_REF_AUTO},
    {"BNHD GQA causal f16", FH, 2, 4, 2, 250, 190, 64, 1, BNHD, 0, FJ_REF_AUTO},
    {"BNHD padded rows", BF, 1, 4, 2, 100, 300, 96, 0, BNHD, 8, FJ_REF_AUTO},
    {"BHND padded rows causal", FH, 1, 2, 1, 300, 100, 256, 1, BHND, 16, FJ_REF_AUTO},
    {"large, GPU reference", BF, 2, 8, 8, 2048, 2048, 128, 1, BHND, 0, FJ_REF_GPU},
};

/* Scores that rise along the keys and spike (FJ_FILL_GROWING): every rescale path of the online softmax. */
static const gpu_case k_growing[] = {
    {"growing scores", BF, 1, 2, 2, 1000, 1000, 128, 0, BHND, 0, FJ_REF_AUTO},
    {"growing scores causal f16", FH, 1, 2, 2, 1000, 1000, 128, 1, BHND, 0, FJ_REF_AUTO},
    {"growing scores d64 GQA", FH, 1, 4, 2, 777, 1500, 64, 0, BNHD, 0, FJ_REF_AUTO},
    {"growing scores d256 causal", BF, 1, 2, 2, 600, 900, 256, 1, BHND, 0, FJ_REF_AUTO},
    {"growing scores d96", BF, 1, 2, 2, 500, 2000, 96, 0, BHND, 0, FJ_REF_AUTO},
};

static fj_check_problem case_problem(const gpu_case *c)
{
    fj_check_problem p = fj_check_problem_default();
    p.dtype = c->dtype;
    p.batch = c->b;
    p.heads_q = c->hq;
    p.heads_kv = c->hkv;
    p.seqlen_q = c->nq;
    p.seqlen_k = c->nk;
    p.head_dim = c->d;
    p.causal = c->causal;
    p.layout = c->layout;
    p.row_pad = c->row_pad;
    return p;
}

/* Run the cases with the heuristic's config for `arch` (AUTO: the forward's own choice, cfg NULL - the
 * GPU's best path). */
static int run_cases(const gpu_case *cases, size_t n, int growing, fajit_arch arch)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const gpu_case *c = &cases[i];
        fj_check_problem p = case_problem(c);
        fj_check_options opts = {0};
        fj_check_result r;
        opts.reference = c->ref;
        p.fill = growing ? FJ_FILL_GROWING : i % 2 ? FJ_FILL_UNIFORM : FJ_FILL_NORMAL;
        fajit_config cfg = {0};
        char text[128] = "heuristic";
        fajit_shape shape = {c->b, c->hq, c->hkv, c->nq, c->nk};
        if (arch != FAJIT_ARCH_AUTO) {
            if (fj_test_path_config(g_ctx, arch, &shape, c->dtype, c->d, c->causal, &cfg) != FAJIT_OK) {
                printf("FAIL %-28s fajit_config_fill: %s\n", c->name, fajit_errmsg());
                failures++;
                continue;
            }
            fajit_config_format(&cfg, text, sizeof text);
        }
        fajit_status st = fj_check_run(g_ctx, arch != FAJIT_ARCH_AUTO ? &cfg : NULL, &p, &opts, &r);
        if (st != FAJIT_OK) {
            printf("FAIL %-28s %s: %s: %s\n", c->name, text, fajit_status_name(st), fajit_errmsg());
            failures++;
            if (st == FAJIT_ERR_CUDA) break; /* the CUDA context is likely unusable now */
            continue;
        }
        printf("%s %-28s %s B%d H%d/%d N%d/%d D%d%s%s ref=%s relL2 %.2e row %.2e maxabs %.2e lse %.2e seed %llu [%s] %s\n",
               r.pass ? "PASS" : "FAIL", c->name, c->dtype == FH ? "f16 " : "bf16", c->b, c->hq, c->hkv, c->nq, c->nk,
               c->d, c->causal ? " causal" : "", c->layout == BNHD ? " bnhd" : "",
               r.reference == FJ_REF_CPU ? "cpu" : "gpu", r.rel_l2, r.worst_row_rel, r.max_abs, r.lse_max_abs,
               (unsigned long long)r.seed, text, r.why);
        failures += !r.pass;
    }
    fflush(stdout);
    return failures;
}

/* The forward's own choice (the GPU's best path), then, on a GPU whose best path is not sm_80, the
 * sm_80 path forced. */
static int run_both_paths(const gpu_case *cases, size_t n, int growing)
{
    int failures = run_cases(cases, n, growing, FAJIT_ARCH_AUTO);
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM80) failures += run_cases(cases, n, growing, FAJIT_ARCH_SM80);
    return failures;
}

static void test_cases(void **state)
{
    (void)state;
    assert_int_equal(run_both_paths(k_cases, sizeof k_cases / sizeof k_cases[0], 0), 0);
}

static void test_growing_scores(void **state)
{
    (void)state;
    assert_int_equal(run_both_paths(k_growing, sizeof k_growing / sizeof k_growing[0], 1), 0);
}

/* The warp-specialized path's persistent schedule with few CTAs (FAJIT_PERSISTENT_CTAS=3, read when a
 * context is made): every CTA runs many work tiles of these small shapes, so the K/V ring, the Q buffers
 * and the ping-pong turns carry over from tile to tile. Skipped where the GPU's best path is sm_80. */
static void test_persistent_few_ctas(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) == FAJIT_ARCH_SM80) {
        printf("SKIP: persistent schedule: the GPU's best path is sm_80\n");
        skip();
    }
    fajit_context *saved = g_ctx, *few = NULL;
    assert_int_equal(fj_test_context_with_env("FAJIT_PERSISTENT_CTAS", "3", 0, &few), FAJIT_OK);
    assert_int_equal(few->persistent_ctas, 3);
    g_ctx = few;
    int failures = run_cases(k_cases, sizeof k_cases / sizeof k_cases[0], 0, FAJIT_ARCH_AUTO) +
                   run_cases(k_growing, sizeof k_growing / sizeof k_growing[0], 1, FAJIT_ARCH_AUTO);
    g_ctx = saved;
    fajit_context_destroy(few);
    assert_int_equal(failures, 0);
}

/* Plain causal kernels on the dynamic longest-first schedule (FAJIT_CAUSAL_SCHED=lpt, read at planning: the kernels'
 * text says " causalsched=lpt", so the caches keep them apart from the static ones), with one CTA per SM and with 3
 * CTAs (many tiles a CTA, handed out by the counter). B x Hq >= 112 keeps these calls off the decode path (split-KV
 * below 80% of the SMs), so each must launch an lpt kernel (fajit_last_forward). GPU reference (checked against the
 * CPU one in test_gpu_reference), harness tolerances. */
static const gpu_case k_lpt[] = {
    {"lpt d64 GQA 112/16", BF, 1, 112, 16, 700, 700, 64, 1, BHND, 0, FJ_REF_GPU},
    {"lpt d64 Nq<Nk f16", FH, 1, 128, 128, 300, 900, 64, 1, BNHD, 0, FJ_REF_GPU},
    {"lpt d64 Nq>Nk (no-key rows)", BF, 2, 64, 8, 900, 250, 64, 1, BHND, 0, FJ_REF_GPU},
    {"lpt d128 B2", FH, 2, 64, 64, 500, 500, 128, 1, BHND, 0, FJ_REF_GPU},
    {"lpt d256 GQA 32/8", BF, 4, 32, 8, 333, 333, 256, 1, BHND, 0, FJ_REF_GPU},
};
static const gpu_case k_lpt_growing[] = {
    {"lpt growing d64", BF, 1, 120, 120, 800, 800, 64, 1, BHND, 0, FJ_REF_GPU},
};

/* Whether the last forward ran the lpt schedule: under the knob (" causalsched=lpt"), or the config's own sched = 1
 * (its text's " lpt" word, before " xt" and the mask: the heuristic's for GQA) */
static int ran_lpt(void)
{
    const char *t = fajit_last_forward();
    return strstr(t, " causalsched=lpt") != NULL || strstr(t, " lpt ") != NULL;
}

static int run_lpt(const gpu_case *cases, size_t n, int growing, int *lpt_runs)
{
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        failures += run_cases(&cases[i], 1, growing, FAJIT_ARCH_AUTO);
        int lpt = ran_lpt();
        if (!lpt) printf("FAIL %-28s not an lpt kernel: %s\n", cases[i].name, fajit_last_forward());
        failures += !lpt;
        *lpt_runs += lpt;
    }
    return failures;
}

static void test_causal_lpt(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the lpt causal schedule is the sm_90a kernel's; the GPU's best path is not sm_90a\n");
        skip();
    }
    fajit_context *saved = g_ctx, *few = NULL;
    assert_int_equal(fj_test_context_with_env("FAJIT_PERSISTENT_CTAS", "3", 0, &few), FAJIT_OK);
    setenv("FAJIT_CAUSAL_SCHED", "lpt", 1);
    int failures = 0, lpt_runs = 0;
    for (int pass = 0; pass < 2; pass++) {
        g_ctx = pass ? few : saved;
        printf("FAJIT_CAUSAL_SCHED=lpt%s\n", pass ? " FAJIT_PERSISTENT_CTAS=3" : "");
        failures += run_lpt(k_lpt, sizeof k_lpt / sizeof k_lpt[0], 0, &lpt_runs) +
                    run_lpt(k_lpt_growing, sizeof k_lpt_growing / sizeof k_lpt_growing[0], 1, &lpt_runs);
    }
    unsetenv("FAJIT_CAUSAL_SCHED");
    g_ctx = saved;
    fajit_context_destroy(few);
    printf("%d runs on an lpt kernel\n", lpt_runs);
    assert_int_equal(failures, 0);
}


/* ---- explicit configs: tails of every block size ------------------------------------------------- */

/* A few tile shapes; those the library rejects or the device cannot fit are skipped (printed). */
#define T80 FJ_CHECK_T80
#define T90 FJ_CHECK_T90
static const fajit_config k_tiles[] = {
    T80(64, 64, 2, 128, 4, 1),  T80(128, 64, 2, 128, 4, 1),  T80(128, 32, 1, 64, 8, 1),     T80(64, 32, 3, 32, 4, 1),
    T80(128, 128, 2, 128, 8, 1), T80(128, 64, 1, 64, 8, 2),  T80(64, 32, 3, 32, 4, 2),
    T90(128, 128, 2, 128, -1, -1), T90(64, 64, 1, 128, 1, -1), T90(192, 64, 3, 64, 1, 1),   T90(128, 80, 2, 32, 1, 1),
    T90(128, 112, 4, 64, 1, 1),
};

/* 1 if cfg passes fajit_config_check and fits the device; else prints why and returns 0. */
static int config_usable(const fajit_config *cfg, const char *text)
{
    fj_plan plan;
    const fj_arch_info *target;
    if (fajit_config_check(cfg) != FAJIT_OK || fj_plan_build(cfg, &plan) != FAJIT_OK ||
        fj_context_target(g_ctx, &plan, &target) != FAJIT_OK) {
        printf("skip %-44s %s\n", text, fajit_errmsg());
        return 0;
    }
    return 1;
}

static void test_explicit_configs(void **state)
{
    (void)state;
    static const int dims[] = {64, 128, 256};
    int failures = 0, ran = 0;
    for (size_t di = 0; di < 3; di++)
        for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
            for (size_t t = 0; t < sizeof k_tiles / sizeof k_tiles[0]; t++) {
                fajit_config cfg = k_tiles[t];
                cfg.dtype = (fajit_dtype)dt, cfg.head_dim = dims[di], cfg.causal = (int)(t % 2);
                char text[128];
                fajit_config_format(&cfg, text, sizeof text);
                if (!config_usable(&cfg, text)) continue;
                gpu_case c = {"cfg", (fajit_dtype)dt, 1, 4, 2, 301, 509, dims[di], (int)(t % 2), BHND, 0, FJ_REF_AUTO};
                fj_check_problem p = case_problem(&c);
                fj_check_result r;
                fajit_status st = fj_check_run(g_ctx, &cfg, &p, NULL, &r);
                ran++;
                if (st != FAJIT_OK) {
                    printf("FAIL %-44s %s: %s\n", text, fajit_status_name(st), fajit_errmsg());
                    failures++;
                    if (st == FAJIT_ERR_CUDA) goto done;
                    continue;
                }
                printf("%s %-44s Nq 301 Nk 509 GQA 4/2 relL2 %.2e row %.2e lse %.2e %s\n", r.pass ? "PASS" : "FAIL",
                       text, r.rel_l2, r.worst_row_rel, r.lse_max_abs, r.why);
                failures += !r.pass;
            }
done:
    fflush(stdout);
    assert_true(ran > 0);
    assert_int_equal(failures, 0);
}

/* ---- the GPU reference against the CPU one ------------------------------------------------------ */

static void upload_random(const fj_cuda_api *cu, fj_CUdeviceptr *dptr, uint16_t **host, int64_t n, fajit_dtype dt,
                          uint64_t *seed)
{
    *host = malloc(2 * (size_t)n);
    assert_non_null(*host);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        (*host)[i] = fj_half_from_f32(dt, (float)((double)(*seed >> 11) * 0x1p-53 * 6.0 - 3.0));
    }
    assert_int_equal(cu->cuMemAlloc(dptr, 2 * (size_t)n), 0);
    assert_int_equal(cu->cuMemcpyHtoD(*dptr, *host, 2 * (size_t)n), 0);
}

/* The GPU reference against the CPU one on one problem; prints a line, returns 1 if they agree. */
static int gpu_ref_one(const gpu_case *c, uint64_t seed)
{
    const fj_cuda_api *cu = g_ctx->cu;
    fj_check_problem p = case_problem(c);
    int64_t nq = (int64_t)c->b * c->hq * c->nq * c->d, nk = (int64_t)c->b * c->hkv * c->nk * c->d;
    int64_t rows = (int64_t)c->b * c->hq * c->nq;
    fajit_attention_args a = {0};
    a.dtype = c->dtype, a.batch = c->b, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.seqlen_q = c->nq, a.seqlen_k = c->nk, a.head_dim = c->d, a.causal = c->causal;
    if (p.layout == BNHD) fajit_args_set_bnhd_strides(&a);
    else fajit_args_set_bhnd_strides(&a);
    uint16_t *hq, *hk, *hv;
    fj_CUdeviceptr dq, dk, dv, dout, dlse;
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    upload_random(cu, &dq, &hq, nq, c->dtype, &seed);
    upload_random(cu, &dk, &hk, nk, c->dtype, &seed);
    upload_random(cu, &dv, &hv, nk, c->dtype, &seed);
    assert_int_equal(cu->cuMemAlloc(&dout, 4 * (size_t)nq), 0);
    assert_int_equal(cu->cuMemAlloc(&dlse, 4 * (size_t)rows), 0);
    a.q = dq, a.k = dk, a.v = dv;
    fajit_status st = fj_reference_gpu(g_ctx, &a, dout, dlse);
    if (st != FAJIT_OK) fail_msg("%s: fj_reference_gpu: %s", c->name, fajit_errmsg());
    float *go = malloc(4 * (size_t)nq), *gl = malloc(4 * (size_t)rows);
    double *ro = malloc(8 * (size_t)nq), *rl = malloc(8 * (size_t)rows);
    assert_true(go && gl && ro && rl);
    assert_int_equal(cu->cuMemcpyDtoH(go, dout, 4 * (size_t)nq), 0);
    assert_int_equal(cu->cuMemcpyDtoH(gl, dlse, 4 * (size_t)rows), 0);
    fj_CUdeviceptr all[] = {dq, dk, dv, dout, dlse};
    for (int i = 0; i < 5; i++) cu->cuMemFree(all[i]);
    fj_context_pop(g_ctx);
    assert_int_equal(fj_reference_cpu(&a, hq, hk, hv, ro, rl), FAJIT_OK);
    double d2 = 0, r2 = 0, lse_err = 0;
    for (int64_t i = 0; i < nq; i++) d2 += (go[i] - ro[i]) * (go[i] - ro[i]), r2 += ro[i] * ro[i];
    int inf_mismatch = 0;
    for (int64_t i = 0; i < rows; i++) {
        if (isinf(rl[i]) || isinf(gl[i])) inf_mismatch += !(isinf(rl[i]) && isinf(gl[i]) && gl[i] < 0);
        else lse_err = fmax(lse_err, fabs(gl[i] - rl[i]));
    }
    double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
    int pass = rel <= 1e-5 && lse_err <= 1e-4 && inf_mismatch == 0;
    printf("%s GPU reference vs CPU: %-26s relL2 %.2e lse %.2e -inf mismatches %d\n", pass ? "PASS" : "FAIL", c->name,
           rel, lse_err, inf_mismatch);
    free(hq), free(hk), free(hv), free(go), free(gl), free(ro), free(rl);
    return pass;
}

/* Causal GQA forwards with the lpt schedule (config sched = 1, filled for the shape as the heuristic fills it at
 * Nq >= 4096), whose tile counter the context keeps per stream: forwards on two streams at once, each with inputs of its own, the output poisoned (NaN) first, must each
 * match the GPU reference (rel L2 <= 1e-2, LSE within 1e-2; a counter shared between the streams hands tiles of one
 * launch to the other's CTAs and leaves NaN rows). The same stream gets the same counter, another stream another. */
static void test_lpt_streams(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the lpt schedule is the sm_90a kernel's; the GPU's best path is not sm_90a\n");
        skip();
    }
    const fj_cuda_api *cu = g_ctx->cu;
    enum { NS = 2, B = 1, HQ = 16, HKV = 2, N = 1500, D = 64, REPS = 3 };
    const int64_t nq = (int64_t)B * HQ * N * D, nk = (int64_t)B * HKV * N * D, rows = (int64_t)B * HQ * N;
    fj_CUstream s[NS];
    fj_CUdeviceptr dq[NS], dk[NS], dv[NS], dout[NS], dlse[NS], rout[NS], rlse[NS], c0, c1, c2;
    uint16_t *hq[NS], *hk[NS], *hv[NS];
    fajit_attention_args a[NS];
    uint64_t seed = 0x5eed5eedull ^ (uint64_t)time(NULL);
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    for (int i = 0; i < NS; i++) {
        assert_int_equal(cu->cuStreamCreate(&s[i], 1 /* non-blocking */), 0);
        upload_random(cu, &dq[i], &hq[i], nq, FAJIT_DTYPE_BF16, &seed);
        upload_random(cu, &dk[i], &hk[i], nk, FAJIT_DTYPE_BF16, &seed);
        upload_random(cu, &dv[i], &hv[i], nk, FAJIT_DTYPE_BF16, &seed);
        assert_int_equal(cu->cuMemAlloc(&dout[i], 2 * (size_t)nq), 0);
        assert_int_equal(cu->cuMemAlloc(&dlse[i], 4 * (size_t)rows), 0);
        assert_int_equal(cu->cuMemAlloc(&rout[i], 4 * (size_t)nq), 0);
        assert_int_equal(cu->cuMemAlloc(&rlse[i], 4 * (size_t)rows), 0);
        assert_int_equal(cu->cuMemsetD8(dout[i], 0xff, 2 * (size_t)nq), 0); /* bf16 0xffff: NaN */
        a[i] = (fajit_attention_args){0};
        a[i].dtype = FAJIT_DTYPE_BF16, a[i].batch = B, a[i].heads_q = HQ, a[i].heads_kv = HKV, a[i].seqlen_q = N;
        a[i].seqlen_k = N, a[i].head_dim = D, a[i].causal = 1;
        fajit_args_set_bhnd_strides(&a[i]);
        a[i].q = dq[i], a[i].k = dk[i], a[i].v = dv[i], a[i].o = dout[i], a[i].lse = dlse[i], a[i].stream = s[i];
    }
    fj_context_pop(g_ctx);
    fajit_shape shape = {B, HQ, HKV, N, N};
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = D, .causal = 1, .sched = 1};
    assert_int_equal(fajit_config_fill(g_ctx, &shape, &cfg), FAJIT_OK);
    assert_int_equal(fj_context_stream_counter(g_ctx, s[0], &c0), FAJIT_OK);
    assert_int_equal(fj_context_stream_counter(g_ctx, s[1], &c1), FAJIT_OK);
    assert_int_equal(fj_context_stream_counter(g_ctx, s[0], &c2), FAJIT_OK);
    assert_true(c0 != c1 && c0 == c2);
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < NS; i++) {
            assert_int_equal(fajit_attention_forward(g_ctx, &a[i], &cfg), FAJIT_OK);
            if (!ran_lpt()) fail_msg("not an lpt kernel: %s", fajit_last_forward());
        }
    int failures = 0;
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    for (int i = 0; i < NS; i++) assert_int_equal(cu->cuStreamSynchronize(s[i]), 0);
    fj_context_pop(g_ctx);
    for (int i = 0; i < NS; i++) {
        fajit_attention_args ra = a[i];
        ra.stream = NULL;
        if (fj_reference_gpu(g_ctx, &ra, rout[i], rlse[i]) != FAJIT_OK) fail_msg("fj_reference_gpu: %s", fajit_errmsg());
        uint16_t *o = malloc(2 * (size_t)nq);
        float *ro = malloc(4 * (size_t)nq), *l = malloc(4 * (size_t)rows), *rl = malloc(4 * (size_t)rows);
        assert_true(o && ro && l && rl);
        assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
        assert_int_equal(cu->cuMemcpyDtoH(o, dout[i], 2 * (size_t)nq), 0);
        assert_int_equal(cu->cuMemcpyDtoH(ro, rout[i], 4 * (size_t)nq), 0);
        assert_int_equal(cu->cuMemcpyDtoH(l, dlse[i], 4 * (size_t)rows), 0);
        assert_int_equal(cu->cuMemcpyDtoH(rl, rlse[i], 4 * (size_t)rows), 0);
        fj_context_pop(g_ctx);
        double d2 = 0, r2 = 0, lse = 0;
        int64_t nan = 0;
        for (int64_t e = 0; e < nq; e++) {
            double x = fj_half_to_f32(FAJIT_DTYPE_BF16, o[e]);
            if (isnan(x)) nan++;
            else d2 += (x - ro[e]) * (x - ro[e]);
            r2 += (double)ro[e] * ro[e];
        }
        for (int64_t e = 0; e < rows; e++) lse = fmax(lse, isnan(l[e]) ? INFINITY : fabs((double)l[e] - rl[e]));
        double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
        int pass = nan == 0 && rel <= 1e-2 && lse <= 1e-2;
        printf("%s lpt stream %d of %d: B%d H%d/%d N%d D%d causal, %d forwards a stream at once: relL2 %.2e lse %.2e "
               "NaN %lld\n", pass ? "PASS" : "FAIL", i, NS, B, HQ, HKV, N, D, REPS, rel, lse, (long long)nan);
        failures += !pass;
        free(o), free(ro), free(l), free(rl);
    }
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    for (int i = 0; i < NS; i++) {
        fj_CUdeviceptr all[] = {dq[i], dk[i], dv[i], dout[i], dlse[i], rout[i], rlse[i]};
        for (int j = 0; j < 7; j++) cu->cuMemFree(all[j]);
        cu->cuStreamDestroy(s[i]);
        free(hq[i]), free(hk[i]), free(hv[i]);
    }
    fj_context_pop(g_ctx);
    assert_int_equal(failures, 0);
}

static void test_gpu_reference(void **state)
{
    (void)state;
    static const gpu_case refs[] = {
        {"causal Nq>Nk GQA", BF, 1, 4, 2, 300, 70, 64, 1, BHND, 0, FJ_REF_GPU},
        {"causal Nq<Nk f16 D96", FH, 2, 2, 1, 45, 333, 96, 1, BNHD, 0, FJ_REF_GPU},
        {"D256 f16", FH, 1, 2, 2, 100, 100, 256, 0, BHND, 0, FJ_REF_GPU},
        {"D192 bf16 causal", BF, 1, 1, 1, 129, 129, 192, 1, BNHD, 0, FJ_REF_GPU},
        {"D128 N1", BF, 3, 2, 2, 1, 1, 128, 0, BHND, 0, FJ_REF_GPU},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) failures += !gpu_ref_one(&refs[i], 1234567 + i);
    fflush(stdout);
    assert_int_equal(failures, 0);
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s)\n", g_ctx->device_name, fajit_context_sm(g_ctx));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_reference),
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_growing_scores),
        cmocka_unit_test(test_persistent_few_ctas),
        cmocka_unit_test(test_causal_lpt),
        cmocka_unit_test(test_lpt_streams),
        cmocka_unit_test(test_explicit_configs),
    };
    int rc = cmocka_run_group_tests_name("gpu_forward", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
