/*
 * test_gpu_varlen.c - varlen (packed) batches on a GPU against the CPU float64 reference (label gpu):
 * FlashAttention's varlen API (cu_seqlens_q / cu_seqlens_k), batches with empty and length-1 sequences, 17 and
 * 1000 rows, Nq != Nk both ways, causal (bottom-right per sequence) and not, MHA / GQA / MQA, BF16 and FP16, D 64
 * to 256, packed or batched keys, seqused_k, paged K/V with packed queries (chunked prefill: each sequence's queries
 * against its pages, pages shuffled, a spare NaN page, rows past each sequence's keys NaN), a seqlen_q cap below
 * the longest sequence (its rows past the cap must keep their poison), row padding, and attention variants (per-batch
 * ALiBi slopes with an empty sequence and one of no keys; sinks with a sliding window).
 * Every case runs with the forward's own choice, with the sm_80 path forced (an sm_80 config) and, on sm_90a GPUs,
 * in a context made with FAJIT_DECODE_SM90=1 (the sm_90a kernel's varlen variant for every case); the kernel text
 * (fajit_last_forward) must name the varlen variant, and on sm_90a say which path ran. On sm_90a GPUs the cases run
 * again with the dynamic longest-first schedule (FAJIT_VARLEN_SCHED=lpt: the kernel text of the cases it takes - packed
 * keys, no seqused_k or pages, D <= 192 - must end in " lpt"), with
 * every SM and with FAJIT_PERSISTENT_CTAS=3 (each CTA takes many tiles and skips many runs past a sequence's end).
 * Harness: fj_check_varlen_run (check.h): O and LSE ([Hq, total_q]) poisoned with NaN and guards, every element of
 * every sequence's rows compared (CPU float64 reference; the last case's size takes the GPU fp32 one), every other
 * word must keep its poison; rel L2 <= 1e-2 bf16 / 2e-3 f16, worst row
 * <= 4x that, LSE abs <= 1e-3, no NaN. One line per run. Without libcuda or a device: "SKIP: <reason>", exit 77.
 *   ctest --test-dir build -L gpu -R test_gpu_varlen --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/check.h"
#include "runtime/context.h"
#include "runtime/tune.h"
#include "test_support.h"

/* the case table below leaves the variant fields of most cases to their zero defaults */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static fajit_context *g_ctx;
static int g_sm90; /* the context has FAJIT_DECODE_SM90=1 */
static int g_lpt;  /* ... and FAJIT_VARLEN_SCHED=lpt */

#define MAXSEQ 12
typedef struct varlen_case {
    const char *name;
    fajit_dtype dtype;
    int hq, hkv, d, causal;
    int n;
    int len_q[MAXSEQ], len_k[MAXSEQ]; /* len_k all 0: self-attention (len_q) */
    int packed_k, seqused, page, q_cap, row_pad;
    fj_check_fill fill;
    int window, wl, wr, sinks, alibi; /* attention variants (fj_check_problem's; alibi 2: [B][Hq] slopes) */
} varlen_case;

#define BF FAJIT_DTYPE_BF16
#define FH FAJIT_DTYPE_F16
#define NORM FJ_FILL_NORMAL
#define UNI FJ_FILL_UNIFORM
#define GROW FJ_FILL_GROWING

static const varlen_case k_cases[] = {
    /* name, dtype, Hq, Hkv, D, causal, n, len_q, len_k, packed_k, seqused, page, q_cap, row_pad, fill */
    {"self empty/1/17/1000 causal", BF, 4, 4, 128, 1, 6, {0, 1, 17, 1000, 0, 130}, {0}, 1, 0, 0, 0, 0, NORM},
    {"self empty/1/17/1000", FH, 4, 4, 128, 0, 6, {17, 0, 1000, 1, 64, 0}, {0}, 1, 0, 0, 0, 0, UNI},
    {"GQA4 Nq<Nk causal", BF, 8, 2, 128, 1, 5, {1, 17, 100, 0, 333}, {50, 17, 1000, 7, 400}, 1, 0, 0, 0, 0, GROW},
    {"MQA Nq>Nk causal d64", FH, 8, 1, 64, 1, 5, {300, 17, 1, 129, 64}, {100, 1, 0, 200, 63}, 1, 0, 0, 0, 0, NORM},
    {"GQA2 d256 causal", BF, 4, 2, 256, 1, 4, {257, 1, 17, 0}, {0}, 1, 0, 0, 0, 0, UNI},
    {"MHA d256", FH, 2, 2, 256, 0, 3, {100, 511, 3}, {0}, 1, 0, 0, 0, 0, GROW},
    {"d96 GQA3", BF, 6, 2, 96, 1, 4, {90, 0, 200, 33}, {0}, 1, 0, 0, 0, 0, NORM},
    {"d192 MQA", FH, 4, 1, 192, 0, 3, {70, 150, 1}, {80, 20, 300}, 1, 0, 0, 0, 0, UNI},
    {"seqused causal GQA4", BF, 8, 2, 128, 1, 5, {40, 17, 200, 1, 0}, {300, 17, 900, 64, 5}, 1, 1, 0, 0, 0, NORM},
    {"batched K seqlens causal", FH, 4, 2, 128, 1, 5, {1, 17, 160, 0, 40}, {500, 17, 160, 3, 0}, 0, 0, 0, 0, 0, GROW},
    {"paged p64 chunked prefill causal", BF, 8, 2, 128, 1, 5, {16, 1, 200, 0, 64}, {1000, 1, 700, 5, 64}, 0, 0, 64, 0, 0,
     NORM},
    {"paged p256 MQA d64", FH, 8, 1, 64, 1, 4, {128, 17, 3, 0}, {2000, 17, 900, 33}, 0, 0, 256, 0, 0, UNI},
    {"paged p128 d256 noncausal", BF, 4, 4, 256, 0, 3, {50, 130, 1}, {300, 129, 1}, 0, 0, 128, 0, 0, GROW},
    {"q_cap below longest causal", FH, 4, 2, 128, 1, 4, {300, 17, 90, 1}, {0}, 1, 0, 0, 100, 0, NORM},
    {"row padding causal", BF, 4, 2, 64, 1, 4, {17, 200, 1, 0}, {0}, 1, 0, 0, 0, 16, UNI},
    {"many short causal", BF, 4, 1, 128, 1, 12, {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 0}, {0}, 1, 0, 0, 0, 0, NORM},
    /* attention variants: per-batch ALiBi with an empty sequence and a sequence of no keys; sinks + a window */
    {"alibi [B,Hq] empty causal GQA2", BF, 4, 2, 128, 1, 5, {0, 17, 200, 1, 64}, {0, 30, 300, 1, 0}, 1, 0, 0, 0, 0,
     NORM, 0, 0, 0, 0, 2},
    {"sinks win 64,0 causal GQA4", FH, 8, 2, 64, 1, 5, {1, 300, 0, 17, 90}, {0}, 1, 0, 0, 0, 0, UNI, 1, 64, 0, 1, 0},
    /* past the CPU reference's limit (2^31 MACs): the GPU one (fj_reference_gpu_varlen) */
    {"long docs GQA4 causal GPU ref", BF, 32, 8, 128, 1, 6, {200, 6000, 17, 0, 3000, 1}, {0}, 1, 0, 0, 0, 0, NORM},
};

/* What fajit_last_forward must say: the varlen variant, and (packed keys) varlenk; on the sm_90a context, the
 * sm_90a variant. */
static int kernel_text_ok(const varlen_case *c, fajit_arch arch, const char *text)
{
    if (!strstr(text, " varlen")) return printf("     kernel text lacks \" varlen\": %s\n", text), 0;
    if (c->packed_k != (strstr(text, " varlenk") != NULL))
        return printf("     packed keys %s: %s\n", c->packed_k ? "expected" : "not expected", text), 0;
    int on_ws = strstr(text, "(sm_90a decode variant") != NULL;
    if (arch == FAJIT_ARCH_SM80 && on_ws) return printf("     sm_80 forced but: %s\n", text), 0;
    if (g_sm90 && arch == FAJIT_ARCH_AUTO && !on_ws)
        return printf("     FAJIT_DECODE_SM90=1: the sm_90a varlen variant expected: %s\n", text), 0;
    /* lpt takes packed keys without seqused_k or pages, head_dim <= 192 (plan.c); the rest keep the static one */
    int lpt = g_lpt && c->packed_k && !c->seqused && !c->page && c->d <= 192;
    if (on_ws && lpt != (strstr(text, " lpt") != NULL))
        return printf("     the lpt schedule %s: %s\n", lpt ? "expected" : "not expected", text), 0;
    return 1;
}

static int run_cases(fajit_arch arch)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const varlen_case *c = &k_cases[i];
        fj_check_problem p = fj_check_problem_default();
        p.dtype = c->dtype, p.heads_q = c->hq, p.heads_kv = c->hkv, p.head_dim = c->d, p.causal = c->causal;
        p.fill = c->fill, p.page_size = c->page, p.row_pad = c->row_pad;
        p.window = c->window, p.window_left = c->wl, p.window_right = c->wr, p.sinks = c->sinks, p.alibi = c->alibi;
        int self = 1, max_q = 1, max_k = 1;
        for (int b = 0; b < c->n; b++) self &= c->len_k[b] == 0;
        fj_check_varlen vl = {c->n, c->len_q, self ? NULL : c->len_k, c->packed_k, c->seqused, c->q_cap};
        for (int b = 0; b < c->n; b++) {
            max_q = c->len_q[b] > max_q ? c->len_q[b] : max_q;
            int lk = self ? c->len_q[b] : c->len_k[b];
            max_k = lk > max_k ? lk : max_k;
        }
        fajit_config cfg = {0};
        fajit_shape shape = {c->n, c->hq, c->hkv, c->q_cap ? c->q_cap : max_q, max_k};
        int mods = (c->window ? FAJIT_MOD_WINDOW : 0) | (c->sinks ? FAJIT_MOD_SINKS : 0) | (c->alibi ? FAJIT_MOD_ALIBI : 0);
        if (arch != FAJIT_ARCH_AUTO) { /* the path's heuristic config, with the case's variant bits */
            if (fj_test_path_config_mods(g_ctx, arch, &shape, c->dtype, c->d, c->causal, mods, &cfg) != FAJIT_OK) {
                printf("FAIL %-34s fajit_config_fill: %s\n", c->name, fajit_errmsg());
                failures++;
                continue;
            }
        }
        fj_check_result r;
        fajit_status st = fj_check_varlen_run(g_ctx, arch != FAJIT_ARCH_AUTO ? &cfg : NULL, &p, &vl, NULL, &r);
        if (st != FAJIT_OK) {
            printf("FAIL %-34s %s: %s\n", c->name, fajit_status_name(st), fajit_errmsg());
            failures++;
            if (st == FAJIT_ERR_CUDA) break;
            continue;
        }
        int text_ok = kernel_text_ok(c, arch, r.kernel);
        printf("%s %-34s %s n%d H%d/%d D%d%s max %d/%d relL2 %.2e row %.2e lse %.2e oob %lld seed %llu [%s] %s\n",
               r.pass && text_ok ? "PASS" : "FAIL", c->name, c->dtype == FH ? "f16 " : "bf16", c->n, c->hq, c->hkv, c->d,
               c->causal ? " causal" : "", max_q, max_k, r.rel_l2, r.worst_row_rel, r.lse_max_abs,
               (long long)r.oob_writes, (unsigned long long)r.seed, r.kernel, r.why);
        failures += !(r.pass && text_ok);
    }
    fflush(stdout);
    return failures;
}

static void test_forward_choice(void **state)
{
    (void)state;
    assert_int_equal(run_cases(FAJIT_ARCH_AUTO), 0);
}

static void test_sm80_forced(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) == FAJIT_ARCH_SM80) {
        printf("SKIP: the GPU's best path is sm_80: test_forward_choice ran it\n");
        skip();
    }
    assert_int_equal(run_cases(FAJIT_ARCH_SM80), 0);
}

static void test_sm90_varlen(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the GPU's best path is not sm_90a: the sm_90a varlen variant does not run here\n");
        skip();
    }
    fajit_context *ctx = NULL, *saved = g_ctx;
    assert_int_equal(fj_test_context_with_env("FAJIT_DECODE_SM90", "1", -1, &ctx), FAJIT_OK);
    printf("FAJIT_DECODE_SM90=1\n");
    g_ctx = ctx, g_sm90 = 1;
    int failures = run_cases(FAJIT_ARCH_AUTO);
    g_ctx = saved, g_sm90 = 0;
    fajit_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* The sm_90a variant with the lpt schedule (sched.c), in a context made with FAJIT_VARLEN_SCHED=lpt (and ctas > 0:
 * FAJIT_PERSISTENT_CTAS=ctas). */
static int run_lpt(const char *ctas)
{
    fajit_context *ctx = NULL, *saved = g_ctx;
    setenv("FAJIT_VARLEN_SCHED", "lpt", 1);
    if (ctas) setenv("FAJIT_PERSISTENT_CTAS", ctas, 1);
    fajit_status st = fj_test_context_with_env("FAJIT_DECODE_SM90", "1", -1, &ctx);
    setenv("FAJIT_VARLEN_SCHED", "static", 1);
    if (ctas) unsetenv("FAJIT_PERSISTENT_CTAS");
    if (st != FAJIT_OK) return printf("FAIL context: %s\n", fajit_errmsg()), 1;
    printf("FAJIT_DECODE_SM90=1 FAJIT_VARLEN_SCHED=lpt%s%s\n", ctas ? " FAJIT_PERSISTENT_CTAS=" : "", ctas ? ctas : "");
    g_ctx = ctx, g_sm90 = 1, g_lpt = 1;
    int failures = run_cases(FAJIT_ARCH_AUTO);
    g_ctx = saved, g_sm90 = 0, g_lpt = 0;
    fajit_context_destroy(ctx);
    return failures;
}

static void test_sm90_varlen_lpt(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the GPU's best path is not sm_90a: the lpt schedule is the sm_90a kernel's\n");
        skip();
    }
    int failures = run_lpt(NULL);
    failures += run_lpt("3");
    assert_int_equal(failures, 0);
}

int main(void)
{
    /* the static schedule for every context but run_lpt's (longest-first is the library default) */
    setenv("FAJIT_VARLEN_SCHED", "static", 1);
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s), %d SMs\n", g_ctx->device_name, fajit_context_sm(g_ctx), g_ctx->sm_count);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_choice),
        cmocka_unit_test(test_sm80_forced),
        cmocka_unit_test(test_sm90_varlen),
        cmocka_unit_test(test_sm90_varlen_lpt),
    };
    int rc = cmocka_run_group_tests_name("gpu_varlen", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
