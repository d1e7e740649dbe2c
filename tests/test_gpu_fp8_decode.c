/*
 * test_gpu_fp8_decode.c - FP8 K/V cache decode on a GPU (label gpu): K and V in float8 e4m3 (args->kv_dtype),
 * Q and O in bf16 / f16, against the float64 CPU reference (the GPU fp32 one for the large cases) computed on the
 * dequantized K / V (check.h, fj_check_problem.kv8: random e4m3 values from normal / uniform / growing fills, with
 * descales 1 or random powers of two 2^-2..2^2 per (batch, KV head), so the dequantized values are exact in 16
 * bits). O and LSE poisoned first, every element compared, NaN failing; tolerances the harness's (check.h): rel
 * L2 <= 1e-2 bf16 / 2e-3 f16, worst row <= 4x that, LSE abs <= 1e-3, no write outside O / LSE: the kernels widen
 * e4m3 exactly, so the 16-bit kernels' tolerances hold.
 * Shapes: Nq 1 / 4 / 16, Nk 1 / 17 / 1000 / 4099, MHA, GQA 4 / 8, MQA, D 64 / 96 / 128 / 256, causal or not,
 * seqlens_k (lengths 1, tile multiples, Nk, random, 0, past Nk and negative), split-KV (forced and the
 * heuristic's), paged K/V (pages 16 / 64 / 256, shuffled pool), with GQA packing (the default). The defaults: the
 * heuristic's tile by rows (br16 w2 cw2 up to 16 rows a KV head's CTA, br32 w4 cw2 up to 32; config.c) and kv8direct
 * at D 64 / 128 / 256 (the MMA fragments straight from the e4m3 tiles, kv8_frag.c), the widening at D96: the kernel
 * text must name the tile and say kv8direct exactly where expected. Then a few cases without GQA packing, with
 * $FAJIT_KV8_DIRECT=0 (the widening kernel, with $FAJIT_KV8_WIDEN=int / intv too: the text naming kv8intk / kv8intv),
 * on other tiles than the heuristic's (given configs: br64 s4 w4, br32 cw2, one warp, bc128 s2, br128 w8), and
 * $FAJIT_KV8_DIRECT=1 (forced: runs at D128, refused with FAJIT_ERR_UNSUPPORTED at D96). Each case is one
 * compile-and-run; the list keeps one case per feature combination (issue 22: the test took > 40 s with every case
 * repeated under each knob). The kernel text must say "kv=e4m3". On an sm_90+ GPU K / V
 * widen with cvt.rn.f16x2.e4m3x2 (kv8.c), but under bf16 queries that do not stay in registers (d256: integer ops
 * to bf16); the integer f16 widening under bf16 Q (kv8_f16 without cvt) runs on sm_80 .. sm_89 GPUs only.
 * Without libcuda or a device, prints "SKIP: <reason>" and exits 77.
 *   ctest --test-dir build -L gpu -R test_gpu_fp8_decode --output-on-failure
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
#include "runtime/check.h"
#include "runtime/context.h"
#include "test_support.h"

static fajit_context *g_ctx;

typedef struct kv8_case {
    const char *name;
    fajit_dtype dtype;
    int b, hq, hkv, nq, nk, d, causal;
    int seqlens, splits, page, kv8;
    fj_check_fill fill;
    fj_check_ref ref;
} kv8_case;

#define BF FAJIT_DTYPE_BF16
#define FH FAJIT_DTYPE_F16
#define NORM FJ_FILL_NORMAL
#define UNI FJ_FILL_UNIFORM
#define GROW FJ_FILL_GROWING
#define AUTO FJ_REF_AUTO

static const kv8_case k_cases[] = {
    /* name                          dt  B  Hq Hkv Nq  Nk    D  causal lens splits page kv8 fill ref */
    {"MHA Nq1 Nk1", BF, 2, 4, 4, 1, 1, 128, 0, 0, 0, 0, 1, NORM, AUTO},
    {"GQA4 Nq1 Nk17 descales", FH, 3, 8, 2, 1, 17, 128, 0, 0, 0, 0, 2, UNI, AUTO},
    {"GQA8 Nq1 Nk1000 lens splits3", BF, 5, 16, 2, 1, 1000, 128, 0, 1, 3, 0, 2, NORM, AUTO},
    {"MQA Nq4 Nk4099 causal lens", FH, 5, 8, 1, 4, 4099, 128, 1, 1, 0, 0, 2, GROW, AUTO},
    {"GQA4 Nq16 Nk4099 splits16 causal", BF, 2, 8, 2, 16, 4099, 128, 1, 0, 16, 0, 1, GROW, AUTO},
    {"MHA Nq16 Nk1000 d64 splits5", FH, 2, 4, 4, 16, 1000, 64, 0, 0, 5, 0, 2, NORM, AUTO},
    {"GQA4 Nq4 Nk1000 d256 lens", BF, 5, 8, 2, 4, 1000, 256, 1, 1, 2, 0, 2, UNI, AUTO},
    {"MQA Nq1 Nk4099 auto splits", FH, 1, 8, 1, 1, 4099, 128, 0, 0, 0, 0, 1, NORM, AUTO},
    {"paged p16 GQA4 Nq1 lens splits3", BF, 5, 8, 2, 1, 1000, 128, 0, 1, 3, 16, 2, NORM, AUTO},
    {"paged p64 MQA Nq4 causal lens", FH, 5, 8, 1, 4, 4099, 128, 1, 1, 0, 64, 2, UNI, AUTO},
    {"paged p256 GQA8 Nq16 splits4", BF, 3, 16, 2, 16, 4099, 128, 1, 0, 4, 256, 1, GROW, AUTO},
    {"paged p64 MHA Nq1 Nk17 d64", FH, 2, 4, 4, 1, 17, 64, 0, 0, 0, 64, 2, NORM, AUTO},
    {"paged p256 GQA4 Nq16 d256 lens", BF, 5, 8, 2, 16, 1000, 256, 0, 1, 0, 256, 2, NORM, AUTO},
    {"long GQA4 Nq1 lens GPU ref", BF, 4, 32, 8, 1, 32768, 128, 0, 1, 0, 0, 2, NORM, FJ_REF_GPU},
    {"long paged p64 Nq16 GPU ref", FH, 2, 16, 2, 16, 16384, 128, 1, 1, 0, 64, 2, GROW, FJ_REF_GPU},
    {"paged p64 GQA4 Nq1 lens splits3", BF, 5, 8, 2, 1, 4099, 128, 0, 1, 3, 64, 2, NORM, AUTO},
    {"paged p64 GQA8 Nq1 causal lens auto splits", FH, 2, 16, 2, 1, 4099, 128, 1, 1, 0, 64, 2, UNI, AUTO},
    {"GQA4 Nq1 Nk1000 d96 lens splits3", BF, 5, 8, 2, 1, 1000, 96, 0, 1, 3, 0, 2, NORM, AUTO},
    {"paged p64 MQA Nq1 Nk17 d96", FH, 2, 8, 1, 1, 17, 96, 1, 0, 0, 64, 2, UNI, AUTO},
};
#define N_CASES (int)(sizeof k_cases / sizeof k_cases[0])
#define CASE_D96 17

/* Given tiles other than the heuristic's: the table's br64 w4 (the FP8 K/V default before the tile by rows), a 16-bit
 * K / V slot behind 2 or 3 e4m3 stages, warp pairs br32 cw2, one warp, a wider block_n and 8 warps. */
typedef struct kv8_tile {
    int case_index;
    int block_m, block_n, stages, warps, col_warps;
} kv8_tile;

static const kv8_tile k_tiles[] = {
    {2, 64, 64, 4, 4, 1}, {4, 64, 64, 3, 4, 1},  {3, 32, 64, 4, 4, 2},   {9, 32, 64, 4, 4, 2},
    {15, 16, 64, 3, 1, 1}, {10, 16, 128, 2, 2, 2}, {14, 128, 64, 4, 8, 1}, {17, 16, 32, 4, 2, 2},
};

/* The words the kernel text must hold besides kv=e4m3 ($FAJIT_KV8_WIDEN's variant bits), "" for none. */
static const char *g_want = "";
/* 1: a run on the heuristic's config checks the default tile by rows and kv8direct (contexts without knobs). */
static int g_defaults = 1;
/* A word the kernel text must not hold ("" none). */
static const char *g_unwant = "";

/* One case; cfg NULL (the heuristic) or its tile. 1 when it failed, 2 when CUDA failed. */
static int run_case(const kv8_case *c, const kv8_tile *t)
{
    fj_check_problem p = fj_check_problem_default();
    p.dtype = c->dtype;
    p.batch = c->b, p.heads_q = c->hq, p.heads_kv = c->hkv, p.seqlen_q = c->nq, p.seqlen_k = c->nk;
    p.head_dim = c->d, p.causal = c->causal, p.fill = c->fill, p.seqlens = c->seqlens;
    p.num_splits = c->splits, p.page_size = c->page, p.kv8 = c->kv8;
    fj_check_options opts = {0};
    opts.reference = c->ref;
    fj_check_result r;
    fajit_config cfg = {0};
    fajit_status st = FAJIT_OK;
    if (t) {
        fajit_shape shape = {c->b, c->hq, c->hkv, c->nq, c->nk};
        cfg.arch = FAJIT_ARCH_SM80, cfg.dtype = c->dtype, cfg.kv_dtype = FAJIT_DTYPE_E4M3, cfg.head_dim = c->d;
        cfg.causal = c->causal, cfg.block_m = t->block_m, cfg.block_n = t->block_n, cfg.stages = t->stages;
        cfg.warps = t->warps, cfg.col_warps = t->col_warps;
        st = fajit_config_fill(g_ctx, &shape, &cfg);
    }
    if (st == FAJIT_OK) st = fj_check_run(g_ctx, t ? &cfg : NULL, &p, &opts, &r);
    if (st != FAJIT_OK) {
        printf("FAIL %-36s %s: %s\n", c->name, fajit_status_name(st), fajit_errmsg());
        return st == FAJIT_ERR_CUDA ? 2 : 1;
    }
    char tile[64] = "", warps[16] = "";
    if (t) { /* the tile asked for ran (the swizzle between them follows the head dim: sw32 at D96) */
        snprintf(tile, sizeof tile, "br%d bc%d s%d ", t->block_m, t->block_n, t->stages);
        snprintf(warps, sizeof warps, " w%d%s", t->warps, t->col_warps == 2 ? " cw2" : "");
    }
    int text_ok = strstr(r.kernel, "kv=e4m3") != NULL && strstr(r.kernel, tile) != NULL &&
                  strstr(r.kernel, warps) != NULL && strstr(r.kernel, g_want);
    if (g_unwant[0] && strstr(r.kernel, g_unwant)) text_ok = 0;
    if (g_defaults && !t && (!c->page || c->page % 64 == 0)) { /* the heuristic's tile by rows and kv8direct where
                                                                  legal (pages under bc64: decode.c's own tile) */
        fajit_config h = {.arch = FAJIT_ARCH_SM80, .dtype = c->dtype, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = c->d,
                          .causal = c->causal};
        fajit_shape shape = {c->b, c->hq, c->hkv, c->nq, c->nk};
        fj_config_heuristic(&h, &h, &shape, 0); /* the tile by rows where it plans (config.c), else the table's */
        char br[48] = "";
        if (h.block_m <= 32) snprintf(br, sizeof br, "br%d bc%d s%d ", h.block_m, h.block_n, h.stages);
        int direct = (c->d == 64 || c->d == 128 || c->d == 256) && h.block_m <= 32;
        text_ok = text_ok && strstr(r.kernel, br) &&
                  (h.block_m > 32 || (strstr(r.kernel, "kv8direct") != NULL) == direct);
    }
    printf("%s %-36s %s B%d H%d/%d N%d/%d D%d%s kv8=%d ref=%s relL2 %.2e row %.2e max %.2e lse %.2e seed %llu "
           "[%s] %s\n",
           r.pass && text_ok ? "PASS" : "FAIL", c->name, c->dtype == FH ? "f16 " : "bf16", c->b, c->hq, c->hkv,
           c->nq, c->nk, c->d, c->causal ? " causal" : "", c->kv8, r.reference == FJ_REF_CPU ? "cpu" : "gpu",
           r.rel_l2, r.worst_row_rel, r.max_abs, r.lse_max_abs, (unsigned long long)r.seed, r.kernel,
           text_ok ? r.why : "the kernel text lacks kv=e4m3, the tile (asked for or by rows), kv8direct (or has it) or the variant words");
    return !(r.pass && text_ok);
}

/* Cases by index (-1 ends the list) on the heuristic's config; the failures. */
static int run_list(const int *idx, const char *label)
{
    int failures = 0;
    for (int i = 0; idx[i] >= 0; i++) {
        printf("%s", label);
        int rc = run_case(&k_cases[idx[i]], NULL);
        failures += rc != 0;
        if (rc == 2) break;
    }
    fflush(stdout);
    return failures;
}

/* A context with name=value (and FAJIT_KV8_DIRECT=direct when not NULL) as g_ctx for the cases idx (want: the words
 * the kernel text must hold); the failures. */
static int run_with_env(const char *name, const char *value, const char *direct, const char *want, const int *idx)
{
    fajit_context *saved = g_ctx, *ctx = NULL;
    if (direct) setenv("FAJIT_KV8_DIRECT", direct, 1); /* read beside the other one at context creation */
    fajit_status st = fj_test_context_with_env(name, value, -1, &ctx);
    if (direct) unsetenv("FAJIT_KV8_DIRECT");
    if (st != FAJIT_OK) {
        printf("FAIL context with %s=%s: %s\n", name, value, fajit_errmsg());
        return 1;
    }
    char label[128];
    snprintf(label, sizeof label, "%s=%s%s%s: ", name, value, direct ? " FAJIT_KV8_DIRECT=" : "", direct ? direct : "");
    g_ctx = ctx, g_want = want, g_defaults = 0;
    int failures = run_list(idx, label);
    g_ctx = saved, g_want = "", g_defaults = 1;
    fajit_context_destroy(ctx);
    return failures;
}

/* Every case on the library's choice: the tile by rows, kv8direct at D 64/128/256, the widening at D96. */
static void test_kv8_decode(void **state)
{
    (void)state;
    int all[N_CASES + 1];
    for (int i = 0; i < N_CASES; i++) all[i] = i;
    all[N_CASES] = -1;
    assert_int_equal(run_list(all, ""), 0);
}

/* Without GQA packing (the rows a CTA holds are seqlen_q: the tile by rows still applies to each). */
static void test_kv8_decode_unpacked(void **state)
{
    (void)state;
    const int idx[] = {2, 9, 10, 17, -1};
    assert_int_equal(run_with_env("FAJIT_PACK_GQA", "0", NULL, "kv=e4m3", idx), 0);
}

/* $FAJIT_KV8_DIRECT=0: the widening kernel on the tile by rows (no kv8direct in the text: g_unwant); with $FAJIT_KV8_WIDEN=int / intv the integer widening where the device has cvt. */
static void test_kv8_decode_widen(void **state)
{
    (void)state;
    const int idx[] = {1, 6, 11, 15, -1}, idx_int[] = {5, 16, -1}, idx_intv[] = {3, 8, -1};
    g_unwant = "kv8direct";
    /* (not "br16": case 15, D256 causal, keeps the table's br64 tile - 2 warps would need 266 registers) */
    int failures = run_with_env("FAJIT_KV8_DIRECT", "0", NULL, "kv=e4m3", idx);
    failures += run_with_env("FAJIT_KV8_WIDEN", "int", "0", "kv8intk kv8intv", idx_int);
    g_unwant = "";
    failures += run_with_env("FAJIT_KV8_WIDEN", "intv", NULL, "kv8intv kv8direct", idx_intv); /* both, D128 */
    assert_int_equal(failures, 0);
}

/* Given tiles (the config's tile runs; kv8direct where it plans). */
static void test_kv8_decode_tiles(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof k_tiles / sizeof k_tiles[0]; i++) {
        const kv8_tile *t = &k_tiles[i];
        printf("tile br%d bc%d s%d w%d cw%d: ", t->block_m, t->block_n, t->stages, t->warps, t->col_warps);
        int rc = run_case(&k_cases[t->case_index], t);
        failures += rc != 0;
        if (rc == 2) break;
    }
    fflush(stdout);
    assert_int_equal(failures, 0);
}

/* $FAJIT_KV8_DIRECT=1 forces kv8direct: runs where legal, refused (FAJIT_ERR_UNSUPPORTED naming kv8direct and the
 * head dim) at D96 - where the default falls back to the widening instead. */
static void test_kv8_decode_direct_forced(void **state)
{
    (void)state;
    const int idx[] = {4, 13, -1};
    assert_int_equal(run_with_env("FAJIT_KV8_DIRECT", "1", NULL, "kv8direct", idx), 0);
    fajit_context *ctx = NULL;
    assert_int_equal(fj_test_context_with_env("FAJIT_KV8_DIRECT", "1", -1, &ctx), FAJIT_OK);
    const kv8_case *c = &k_cases[CASE_D96];
    fj_check_problem p = fj_check_problem_default();
    p.dtype = c->dtype, p.batch = c->b, p.heads_q = c->hq, p.heads_kv = c->hkv, p.seqlen_q = c->nq;
    p.seqlen_k = c->nk, p.head_dim = c->d, p.seqlens = c->seqlens, p.num_splits = c->splits, p.kv8 = c->kv8;
    fj_check_result r;
    fajit_status st = fj_check_run(ctx, NULL, &p, NULL, &r);
    printf("FAJIT_KV8_DIRECT=1 d96: %s: %s\n", fajit_status_name(st), fajit_errmsg());
    fajit_context_destroy(ctx);
    assert_int_equal(st, FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "kv8direct"));
    assert_non_null(strstr(fajit_errmsg(), "96"));
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s), %d SMs\n", g_ctx->device_name, fajit_context_sm(g_ctx), g_ctx->sm_count);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv8_decode),
        cmocka_unit_test(test_kv8_decode_unpacked),
        cmocka_unit_test(test_kv8_decode_widen),
        cmocka_unit_test(test_kv8_decode_tiles),
        cmocka_unit_test(test_kv8_decode_direct_forced),
    };
    int rc = cmocka_run_group_tests_name("gpu_fp8_decode", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
