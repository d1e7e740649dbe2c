/*
 * test_gpu_decode.c - decode and long-context forwards on a GPU against the references (label gpu):
 * per-sequence KV lengths (seqlens_k; by sequence: 1, a multiple of 64, the capacity, random, 0, and with
 * B 15 past the capacity and negative: clamped),
 * split-KV forced to 1..64 splits (more splits than KV tiles included: empty splits) and chosen by the
 * heuristic, the caller's workspace and the context's, paged K/V (pages of 16..256 rows, shuffled in a pool
 * with spare pages, unused rows NaN), GQA 1/4/8 and MQA, Nq 1/4/16 (and 100, 300)
 * with and without the causal mask, D 64/96/128/256, BF16 and FP16, scores growing along the keys
 * (every rescale path, across split boundaries), and one long problem against the GPU reference.
 * Each case runs with the forward's own choice (on an H100/H200 the default path rule, fj_decode_auto_sm90:
 * the sm_90a kernel's decode variants or the sm_80 kernel's, said by fajit_last_forward and checked here) and
 * with the sm_80 path forced (GQA packing on, the default); then all again with packing off (FAJIT_PACK_GQA=0), and the paged
 * ones with the page-segment gather forced on and off (FAJIT_DECODE_GATHER=1 / 0) and with each tile's pages
 * read at its copy instead of a tile ahead (FAJIT_DECODE_PAGE_AHEAD=0; the kernel text says which), those two
 * on the sm_80 kernel (FAJIT_DECODE_SM90=0: the gather and the read-ahead are its own).
 * test_sm90_decode (sm_90a GPUs only): the cases again in a context made with FAJIT_DECODE_SM90=1, where
 * seqlens_k, split-KV and GQA packing (group x Nq within one row block) run on the sm_90a kernel's own
 * decode variants, with packing on (larger groups fall back, saying "GQA packing of group") and off
 * (FAJIT_PACK_GQA=0: every case runs on sm_90a), paged K/V included (TMA boxes from the pool's pages). There K and V hold NaN past each sequence's
 * length and, paged, the table entries of pages past it name a spare NaN page (fj_check_problem.nan_past_len). Tolerances are the check harness's (check.h): rel L2 <= 1e-2 bf16 / 2e-3 f16, worst row
 * <= 4x that, LSE abs <= 1e-3, no NaN, no write outside O / LSE. One line per run.
 * Without libcuda or a device, prints "SKIP: <reason>" and exits 77.
 *   ctest --test-dir build -L gpu -R test_gpu_decode --output-on-failure
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
#include "runtime/decode.h"
#include "runtime/context.h"
#include "runtime/tune.h"
#include "test_support.h"

static fajit_context *g_ctx;
/* test_paged_gather: 1 = run the paged cases only, each kernel text must say " gather"; 0 = must not */
static int g_gather = -1;
/* test_paged_no_ahead: run the paged cases only */
static int g_paged_only;
/* test_sm90_decode: the context has FAJIT_DECODE_SM90=1 */
static int g_sm90;

typedef struct decode_case {
    const char *name;
    fajit_dtype dtype;
    int b, hq, hkv, nq, nk, d, causal;
    int seqlens, splits, own_ws;
    fj_check_fill fill;
    fj_check_layout layout;
    fj_check_ref ref;
    int page; /* paged K/V with pages of this many rows (0: contiguous) */
} decode_case;

#define BF FAJIT_DTYPE_BF16
#define FH FAJIT_DTYPE_F16
#define NORM FJ_FILL_NORMAL
#define UNI FJ_FILL_UNIFORM
#define GROW FJ_FILL_GROWING
#define BHND FJ_LAYOUT_BHND
#define BNHD FJ_LAYOUT_BNHD
#define AUTO FJ_REF_AUTO

static const decode_case k_cases[] = {
    /* name                          dt  B  Hq Hkv Nq    Nk    D  causal lens splits ws fill layout ref page */
    {"MHA Nq1 lens splits1", BF, 5, 4, 4, 1, 1000, 128, 0, 1, 1, 0, NORM, BHND, AUTO, 0},
    {"GQA4 Nq1 lens splits2 causal", FH, 5, 8, 2, 1, 1024, 128, 1, 1, 2, 0, UNI, BHND, AUTO, 0},
    {"GQA8 Nq1 lens splits3 own ws", BF, 5, 16, 2, 1, 777, 128, 0, 1, 3, 1, GROW, BHND, AUTO, 0},
    {"MQA Nq1 lens splits7 causal d64", FH, 5, 8, 1, 1, 2048, 64, 1, 1, 7, 0, NORM, BNHD, AUTO, 0},
    {"GQA4 Nq4 lens splits16 causal", BF, 5, 8, 2, 4, 1500, 128, 1, 1, 16, 0, GROW, BHND, AUTO, 0},
    {"GQA8 Nq16 lens splits64 causal", FH, 5, 16, 2, 16, 4096, 128, 1, 1, 64, 1, UNI, BHND, AUTO, 0},
    {"Nq16 splits64 > tiles causal", BF, 5, 4, 1, 16, 200, 128, 1, 1, 64, 0, NORM, BHND, AUTO, 0},
    {"MQA Nq4 splits33 no lens", FH, 2, 8, 1, 4, 3000, 256, 0, 0, 33, 0, GROW, BHND, AUTO, 0},
    {"auto splits long MQA", BF, 1, 8, 1, 1, 16384, 128, 0, 0, 0, 0, NORM, BHND, AUTO, 0},
    {"auto splits lens GQA4 own ws", FH, 5, 32, 8, 1, 4096, 128, 1, 1, 0, 1, UNI, BHND, AUTO, 0},
    {"Nq16 d256 lens no split causal", BF, 3, 4, 2, 16, 513, 256, 1, 1, 1, 0, NORM, BHND, AUTO, 0},
    {"Nq4 d96 splits5", FH, 2, 6, 3, 4, 900, 96, 0, 0, 5, 0, GROW, BNHD, AUTO, 0},
    {"Nq100 causal splits4 (2 row blocks)", BF, 2, 4, 2, 100, 2000, 128, 1, 0, 4, 0, NORM, BHND, AUTO, 0},
    {"Nq300>Nk causal splits3 lens", BF, 5, 2, 2, 300, 100, 64, 1, 1, 3, 0, UNI, BHND, AUTO, 0},
    {"lens exact tiles GPU ref", FH, 5, 8, 2, 4, 640, 128, 1, 1, 6, 0, NORM, BHND, FJ_REF_GPU, 0},
    {"long Nq16 causal lens GPU ref", BF, 2, 32, 8, 16, 32768, 128, 1, 1, 8, 0, GROW, BHND, AUTO, 0},
    {"paged p16 lens splits3", BF, 5, 8, 2, 1, 1000, 128, 0, 1, 3, 0, NORM, BHND, AUTO, 16},
    {"paged p64 lens causal Nq4 MQA", FH, 5, 8, 1, 4, 1024, 128, 1, 1, 0, 0, UNI, BHND, AUTO, 64},
    {"paged p128 GQA8 Nq16 splits8", BF, 5, 16, 2, 16, 2048, 128, 1, 1, 8, 1, GROW, BHND, AUTO, 128},
    {"paged p256 MQA d64 no lens", FH, 3, 8, 1, 1, 3000, 64, 0, 0, 0, 0, NORM, BHND, AUTO, 256},
    {"paged p32 d256 causal Nq16", BF, 2, 4, 2, 16, 700, 256, 1, 1, 5, 0, UNI, BHND, AUTO, 32},
    {"paged p48 d96 lens", FH, 5, 6, 3, 1, 500, 96, 0, 1, 2, 0, NORM, BHND, AUTO, 48},
    {"paged p64 long GPU ref", BF, 2, 32, 8, 16, 32768, 128, 1, 1, 0, 0, GROW, BHND, FJ_REF_GPU, 64},
    {"paged p32 MHA Nq1 lens splits4", FH, 5, 4, 4, 1, 1100, 128, 0, 1, 4, 0, NORM, BHND, AUTO, 32},
    {"paged p16 GQA8 Nq16 causal lens d64", BF, 5, 16, 2, 16, 900, 64, 1, 1, 0, 0, UNI, BHND, AUTO, 16},
    {"paged p128 MHA Nq4 causal d256 pages", FH, 5, 4, 4, 4, 1280, 256, 1, 1, 2, 0, GROW, BHND, AUTO, 128},
    {"paged p48 GQA4 lens splits6 pages", BF, 5, 8, 2, 1, 960, 128, 0, 1, 6, 0, NORM, BHND, AUTO, 48},
    /* B 15: sequences 9 and 14 have lengths past the capacity and below 0 (clamped; the KV range once was not) */
    {"lens past capacity causal Nq4", BF, 15, 8, 2, 4, 700, 128, 1, 1, 3, 0, GROW, BHND, AUTO, 0},
    {"paged p16 lens past capacity", FH, 15, 8, 2, 1, 1000, 128, 0, 1, 3, 0, NORM, BHND, AUTO, 16},
    {"paged p64 lens past capacity auto", BF, 15, 8, 1, 1, 640, 64, 0, 1, 0, 0, UNI, BHND, AUTO, 64},
};

static fj_check_problem case_problem(const decode_case *c)
{
    fj_check_problem p = fj_check_problem_default();
    p.dtype = c->dtype;
    p.batch = c->b, p.heads_q = c->hq, p.heads_kv = c->hkv, p.seqlen_q = c->nq, p.seqlen_k = c->nk;
    p.head_dim = c->d, p.causal = c->causal, p.layout = c->layout, p.fill = c->fill;
    p.seqlens = c->seqlens, p.num_splits = c->splits, p.own_workspace = c->own_ws, p.page_size = c->page;
    p.nan_past_len = g_sm90; /* the sm_90a variant loads a sequence's last tile whole: its tail must not reach O */
    return p;
}

/* The default rule's answer for case c (decode.h: fj_decode_auto_sm90) on the test's GPU. */
static int auto_wants_sm90(const decode_case *c, int packs)
{
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = c->dtype, a.head_dim = c->d, a.causal = c->causal, a.num_splits = c->splits;
    a.batch = c->b, a.heads_q = c->hq, a.heads_kv = c->hkv, a.seqlen_q = c->nq, a.seqlen_k = c->nk;
    a.block_table = c->page ? 16 : 0, a.page_size = c->page, a.max_pages = c->page ? (c->nk + c->page - 1) / c->page : 0;
    return fj_decode_auto_sm90(&a, packs, g_ctx->sm_count);
}

/* What fajit_last_forward must say after case c on `arch`; prints why and returns 0 when it does not. */
static int kernel_text_ok(const decode_case *c, fajit_arch arch, const char *text)
{
    /* "(N splits) + ... combine": the fallback note's "split-KV" must not count */
    int split = c->splits >= 2 || (c->splits == 0 && strstr(text, " splits) + "));
    const char *need[4] = {c->seqlens ? " seqlens" : NULL, c->splits >= 2 ? " splits) + " : NULL,
                           split ? "combine" : NULL, c->page ? " paged" : NULL};
    for (int i = 0; i < 4; i++)
        if (need[i] && !strstr(text, need[i])) {
            printf("     kernel text lacks \"%s\": %s\n", need[i], text);
            return 0;
        }
    if (g_gather >= 0 && g_gather != (strstr(text, " gather") != NULL)) {
        printf("     paged K/V %s: %s\n", g_gather ? "gathered expected" : "gathering not expected", text);
        return 0;
    }
    /* pages read a tile ahead (AHEAD): only paged on the sm_80 kernel, with the context's default and 2+ stages;
     * and then always up to head_dim 128 (wider tiles near the register edge may have no room for it: plan.c) */
    int on_ws = strstr(text, "(sm_90a decode variant") != NULL;
    int may = c->page && !on_ws && g_ctx->page_ahead && !strstr(text, " s1 "), has = strstr(text, " ahead") != NULL;
    if ((has && !may) || (may && !has && c->d <= 128)) {
        printf("     paged K/V read ahead %s: %s\n", has ? "not expected" : "expected", text);
        return 0;
    }
    int packs = g_ctx->pack_gqa && c->hq > c->hkv && c->nq <= 128;
    if (packs != (strstr(text, " packgqa") != NULL)) {
        printf("     GQA packing %s: %s\n", packs ? "expected" : "not expected", text);
        return 0;
    }
    int fell = strstr(text, "fell back from sm_90a") != NULL, used = c->seqlens || split || packs || c->page;
    if (used && (g_sm90 || (arch == FAJIT_ARCH_AUTO && fj_best_path(g_ctx) == FAJIT_ARCH_SM90A))) {
        /* FAJIT_DECODE_SM90=1: on sm_90a (paged K/V too) unless packed past one row block; the default: where
         * fj_decode_auto_sm90 says, with the same limit; FAJIT_DECODE_SM90=0: never */
        int rows = c->hq / c->hkv * c->nq;
        int want_ws = (g_sm90 || (g_ctx->decode_sm90 == -1 && auto_wants_sm90(c, packs))) &&
                      (!packs || rows <= 64 || (rows <= 192 && !strstr(text, "GQA packing of group")));
        if (want_ws != on_ws || want_ws == fell) {
            printf("     %s: expected %s: %s\n", g_sm90 ? "FAJIT_DECODE_SM90=1" : "default decode path",
                   want_ws ? "the sm_90a decode variant" : "the fallback", text);
            return 0;
        }
    }
    return 1;
}

static int run_cases(fajit_arch arch)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const decode_case *c = &k_cases[i];
        if ((g_gather >= 0 || g_paged_only) && !c->page) continue;
        fj_check_problem p = case_problem(c);
        fj_check_options opts = {0};
        fj_check_result r;
        opts.reference = c->ref;
        fajit_config cfg = {0};
        fajit_shape shape = {c->b, c->hq, c->hkv, c->nq, c->nk};
        if (arch != FAJIT_ARCH_AUTO) {
            if (fj_test_path_config(g_ctx, arch, &shape, c->dtype, c->d, c->causal, &cfg) != FAJIT_OK) {
                printf("FAIL %-36s fajit_config_fill: %s\n", c->name, fajit_errmsg());
                failures++;
                continue;
            }
        }
        fajit_status st = fj_check_run(g_ctx, arch != FAJIT_ARCH_AUTO ? &cfg : NULL, &p, &opts, &r);
        /* without the gather a tile must divide the page: for 48-row pages at head_dim 96 none plans (the
         * gather exists for such pages), so the refusal is the expected answer there */
        if (st == FAJIT_ERR_UNSUPPORTED && g_gather == 0 && c->page == 48 && strstr(fajit_errmsg(), "page_size = 48")) {
            printf("PASS %-36s refused without the gather, as it must be: %s\n", c->name, fajit_errmsg());
            continue;
        }
        if (st != FAJIT_OK) {
            printf("FAIL %-36s %s: %s\n", c->name, fajit_status_name(st), fajit_errmsg());
            failures++;
            if (st == FAJIT_ERR_CUDA) break;
            continue;
        }
        int text_ok = kernel_text_ok(c, arch, r.kernel);
        printf("%s %-36s %s B%d H%d/%d N%d/%d D%d%s ref=%s relL2 %.2e row %.2e lse %.2e seed %llu [%s] %s\n",
               r.pass && text_ok ? "PASS" : "FAIL", c->name, c->dtype == FH ? "f16 " : "bf16", c->b, c->hq, c->hkv,
               c->nq, c->nk, c->d, c->causal ? " causal" : "", r.reference == FJ_REF_CPU ? "cpu" : "gpu", r.rel_l2,
               r.worst_row_rel, r.lse_max_abs, (unsigned long long)r.seed, r.kernel, r.why);
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

/* The same cases without GQA packing (FAJIT_PACK_GQA=0, read when a context is made; packing is the
 * default): the GQA and MQA cases with Nq <= 128 then run one query head per CTA (checked in the kernel
 * text), the others as before. */
/* The cases in a context made with env name=0, with the forward's choice and the sm_80 path forced; or
 * (paged_only) the paged ones with the forward's choice only (paged K/V runs the sm_80 kernel either way).
 * The context's field at flag_off is the one the env sets, which must read 0. */
static void run_with_env_off(const char *name, size_t flag_off, int paged_only)
{
    fajit_context *saved = g_ctx, *ctx = NULL;
    if (paged_only) setenv("FAJIT_DECODE_SM90", "0", 1); /* the sm_80 kernel's paged modes */
    fajit_status st = fj_test_context_with_env(name, "0", -1, &ctx);
    unsetenv("FAJIT_DECODE_SM90");
    assert_int_equal(st, FAJIT_OK);
    assert_int_equal(*(const int *)((const char *)ctx + flag_off), 0);
    g_ctx = ctx, g_paged_only = paged_only;
    printf("%s=0\n", name);
    int failures = run_cases(FAJIT_ARCH_AUTO);
    if (!paged_only && fj_best_path(g_ctx) != FAJIT_ARCH_SM80) failures += run_cases(FAJIT_ARCH_SM80);
    g_ctx = saved, g_paged_only = 0;
    fajit_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

static void test_gqa_unpacked(void **state)
{
    (void)state;
    run_with_env_off("FAJIT_PACK_GQA", offsetof(fajit_context, pack_gqa), 0);
}

/* The cases with the forward's choice in ctx (destroyed after), *flag = value meanwhile (a mode flag, reset
 * to `reset`); the failures. */
static int cases_in(fajit_context *ctx, int *flag, int value, int reset)
{
    fajit_context *saved = g_ctx;
    g_ctx = ctx, *flag = value;
    int failures = run_cases(FAJIT_ARCH_AUTO);
    g_ctx = saved, *flag = reset;
    fajit_context_destroy(ctx);
    return failures;
}

/* The paged cases with the gather forced on (FAJIT_DECODE_GATHER=1: every paged tile gathered from 16-row
 * page segments, pages of 64-256 too) and off (=0: a block_n dividing the page, the kernel before gathering),
 * each said by the kernel text. The default (gather when the page is smaller than block_n) ran above. */
static void test_paged_gather(void **state)
{
    (void)state;
    static const char *modes[2] = {"0", "1"};
    int failures = 0;
    for (int m = 0; m < 2; m++) {
        fajit_context *ctx = NULL;
        setenv("FAJIT_DECODE_SM90", "0", 1); /* the gather is the sm_80 kernel's */
        fajit_status st = fj_test_context_with_env("FAJIT_DECODE_GATHER", modes[m], -1, &ctx);
        unsetenv("FAJIT_DECODE_SM90");
        assert_int_equal(st, FAJIT_OK);
        assert_int_equal(ctx->paged_gather, m ? 2 : 0);
        printf("FAJIT_DECODE_GATHER=%s\n", modes[m]);
        failures += cases_in(ctx, &g_gather, m, -1);
    }
    assert_int_equal(failures, 0);
}

/* The paged cases with each tile's pages read at its own copy (FAJIT_DECODE_PAGE_AHEAD=0, what ran before
 * AHEAD; the kernel text must not say " ahead"). */
static void test_paged_no_ahead(void **state)
{
    (void)state;
    run_with_env_off("FAJIT_DECODE_PAGE_AHEAD", offsetof(fajit_context, page_ahead), 1);
}

/* FAJIT_DECODE_SM90=1 (sm_90a GPUs): the cases with the forward's choice, with GQA packing on and off. */
static void test_sm90_decode(void **state)
{
    (void)state;
    if (fj_best_path(g_ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the GPU's best path is not sm_90a: the sm_90a decode variants do not run here\n");
        skip();
    }
    int failures = 0;
    for (int pack = 1; pack >= 0; pack--) {
        fajit_context *ctx = NULL;
        if (!pack) setenv("FAJIT_PACK_GQA", "0", 1);
        fajit_status st = fj_test_context_with_env("FAJIT_DECODE_SM90", "1", -1, &ctx);
        unsetenv("FAJIT_PACK_GQA");
        assert_int_equal(st, FAJIT_OK);
        assert_int_equal(ctx->decode_sm90, 1);
        assert_int_equal(ctx->pack_gqa, pack);
        printf("FAJIT_DECODE_SM90=1%s\n", pack ? "" : " FAJIT_PACK_GQA=0");
        failures += cases_in(ctx, &g_sm90, 1, 0);
    }
    assert_int_equal(failures, 0);
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s), %d SMs\n", g_ctx->device_name, fajit_context_sm(g_ctx), g_ctx->sm_count);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_choice),
        cmocka_unit_test(test_sm80_forced),
        cmocka_unit_test(test_gqa_unpacked),
        cmocka_unit_test(test_paged_gather),
        cmocka_unit_test(test_paged_no_ahead),
        cmocka_unit_test(test_sm90_decode),
    };
    int rc = cmocka_run_group_tests_name("gpu_decode", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
