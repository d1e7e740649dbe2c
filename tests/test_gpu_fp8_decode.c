/*
 * test_gpu_fp8_decode.c - FP8 K/V cache decode on a GPU (label gpu): K and V in float8 e4m3 (args->kv_dtype),
 * Q and O in bf16 / f16, against the float64 CPU reference (the GPU fp32 one for the large cases) computed on the
 * dequantized K / V (check.h, fj_check_problem.kv8: random e4m3 values from normal / uniform / growing fills, with
 * descales 1 or random powers of two 2^-2..2^2 per (batch, KV head), so the dequantized values are exact in 16
 * bits). O and LSE poisoned first, every element compared, NaN failing; tolerances the harness's (check.h): rel
 * L2 <= 1e-2 bf16 / 2e-3 f16, worst row <= 4x that, LSE abs <= 1e-3, no write outside O / LSE: the kernels widen
 * e4m3 exactly, so the 16-bit kernels' tolerances hold.
 * Shapes: Nq 1 / 4 / 16, Nk 1 / 17 / 1000 / 4099, MHA, GQA 4 / 8, MQA, D 64 / 128 / 256, causal or not,
 * seqlens_k (lengths 1, tile multiples, Nk, random, 0, past Nk and negative), split-KV (forced and the
 * heuristic's), paged K/V (pages 16 / 64 / 256, shuffled pool), each with GQA packing (the default) and again
 * without (FAJIT_PACK_GQA=0); then 8 of them again on other tiles than the heuristic's (s2, s3, bc128, br128 w8,
 * warp pairs br32 cw2) and on the smaller query tiles of bench/kv8_sweep.sh (br16 with a warp pair or one warp, br32
 * cw2 bc32) with paged + seqlens + split-KV + GQA packing, the kernel text naming the tile; then some with
 * $FAJIT_KV8_WIDEN=int / intv (the integer widening on a cvt device, the text naming kv8intk / kv8intv); then all of it again
 * (and more tiles) with $FAJIT_KV8_DIRECT=1 (the MMA fragments straight from the e4m3 tiles, kv8_frag.c, the text naming
 * kv8direct); then the Nq 1 cases with $FAJIT_KV8_TILE=rows (br16 / br32 warp pairs by the rows a CTA holds). The kernel text must say "kv=e4m3". On an sm_90+ GPU K / V
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
};

/* Tiles other than the heuristic's (d128 br64 bc64 s4 w4): the one 16-bit K / V slot behind 2 or 3 e4m3 stages,
 * warp pairs (br32 cw2), a wider block_n and 8 warps, as fagen bench --grid decode may be asked to time them. */
typedef struct kv8_tile {
    int case_index;
    int block_m, block_n, stages, warps, col_warps;
} kv8_tile;

static const kv8_tile k_tiles[] = {
    {2, 64, 64, 2, 4, 1},  {4, 64, 64, 3, 4, 1},   {3, 32, 64, 4, 4, 2},  {9, 32, 64, 4, 4, 2},
    {13, 32, 64, 4, 4, 2}, {10, 64, 128, 3, 4, 1}, {14, 128, 64, 4, 8, 1}, {7, 32, 64, 3, 4, 2},
    /* the smaller query tiles of bench/kv8_sweep.sh: one 16-row block (br16) with a warp pair or one warp, two
     * (br32 cw2) with bc32; each on paged + seqlens + split-KV + GQA packing, and the other decode cases */
    {15, 16, 32, 4, 2, 2}, {15, 16, 64, 4, 2, 2},  {15, 16, 32, 3, 2, 2},  {15, 16, 64, 3, 1, 1},
    {15, 32, 32, 4, 4, 2}, {16, 16, 32, 4, 2, 2},  {16, 16, 32, 4, 1, 1},  {10, 16, 64, 4, 2, 2},
    {10, 16, 128, 2, 2, 2}, {9, 16, 32, 4, 2, 2},  {2, 16, 32, 3, 2, 2},   {13, 16, 128, 2, 2, 2},
    {14, 16, 64, 4, 2, 2}, {7, 16, 32, 4, 1, 1},   {3, 16, 32, 4, 2, 2},   {4, 16, 64, 4, 2, 2},
};

/* The words the kernel text must hold besides kv=e4m3 ($FAJIT_KV8_WIDEN's variant bits), "" for none. */
static const char *g_want = "";
/* The kernel text of the last run_case that ran. */
static char g_last_kernel[512];

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
    char tile[64] = "";
    if (t) /* the tile asked for ran */
        snprintf(tile, sizeof tile, "br%d bc%d s%d sw128 w%d%s", t->block_m, t->block_n, t->stages, t->warps,
                 t->col_warps == 2 ? " cw2" : "");
    snprintf(g_last_kernel, sizeof g_last_kernel, "%s", r.kernel);
    int text_ok = strstr(r.kernel, "kv=e4m3") != NULL && strstr(r.kernel, tile) != NULL && strstr(r.kernel, g_want);
    printf("%s %-36s %s B%d H%d/%d N%d/%d D%d%s kv8=%d ref=%s relL2 %.2e row %.2e max %.2e lse %.2e seed %llu "
           "[%s] %s\n",
           r.pass && text_ok ? "PASS" : "FAIL", c->name, c->dtype == FH ? "f16 " : "bf16", c->b, c->hq, c->hkv,
           c->nq, c->nk, c->d, c->causal ? " causal" : "", c->kv8, r.reference == FJ_REF_CPU ? "cpu" : "gpu",
           r.rel_l2, r.worst_row_rel, r.max_abs, r.lse_max_abs, (unsigned long long)r.seed, r.kernel,
           text_ok ? r.why : "the kernel text lacks kv=e4m3, the tile asked for or the widening's variant words");
    return !(r.pass && text_ok);
}

static int run_cases(void)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        int rc = run_case(&k_cases[i], NULL);
        failures += rc != 0;
        if (rc == 2) break;
    }
    fflush(stdout);
    return failures;
}

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

static void test_kv8_decode(void **state)
{
    (void)state;
    assert_int_equal(run_cases(), 0);
}

static void test_kv8_decode_unpacked(void **state)
{
    (void)state;
    fajit_context *saved = g_ctx, *ctx = NULL;
    assert_int_equal(fj_test_context_with_env("FAJIT_PACK_GQA", "0", -1, &ctx), FAJIT_OK);
    assert_int_equal(ctx->pack_gqa, 0);
    printf("FAJIT_PACK_GQA=0\n");
    g_ctx = ctx;
    int failures = run_cases();
    g_ctx = saved;
    fajit_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* $FAJIT_KV8_WIDEN=int / intv: the integer widening of K and V (or V only) where the device has cvt (kv8.c), on the
 * heuristic's tile and the smaller ones, with paged + seqlens + split + GQA packing; the kernel text names the bits. */
static void test_kv8_decode_widen(void **state)
{
    (void)state;
    static const kv8_tile tiles[] = {{15, 0, 0, 0, 0, 0},   {15, 16, 32, 4, 2, 2}, {16, 32, 64, 4, 4, 2},
                                     {10, 16, 64, 4, 2, 2}, {3, 16, 32, 4, 1, 1},  {6, 0, 0, 0, 0, 0}};
    const char *modes[2][2] = {{"int", "kv8intk kv8intv"}, {"intv", "kv8intv"}};
    int failures = 0;
    fajit_context *saved = g_ctx;
    for (int m = 0; m < 2; m++) {
        fajit_context *ctx = NULL;
        assert_int_equal(fj_test_context_with_env("FAJIT_KV8_WIDEN", modes[m][0], -1, &ctx), FAJIT_OK);
        g_ctx = ctx, g_want = modes[m][1];
        for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
            const kv8_tile *t = &tiles[i];
            printf("FAJIT_KV8_WIDEN=%s tile br%d bc%d s%d w%d cw%d: ", modes[m][0], t->block_m, t->block_n, t->stages,
                   t->warps, t->col_warps);
            int rc = run_case(&k_cases[t->case_index], t->block_m ? t : NULL);
            failures += rc != 0;
            if (rc == 2) break;
        }
        g_ctx = saved, g_want = "";
        fajit_context_destroy(ctx);
    }
    fflush(stdout);
    assert_int_equal(failures, 0);
}

/* $FAJIT_KV8_DIRECT=1 (decode variant kv8direct, kv8_frag.c: the MMA fragments straight from the e4m3 tiles): every
 * case above on the heuristic's tile (contiguous, seqlens_k, split-KV forced and the heuristic's, paged 16 / 64 / 256
 * with pages read ahead, GQA packing, MQA, d64 / 128 / 256, Nk 1 / 17 / 1000 / 4099, causal), then the smaller tiles,
 * then some without GQA packing and with $FAJIT_KV8_WIDEN=int / intv as well; the kernel text names kv8direct. */
static void test_kv8_decode_direct(void **state)
{
    (void)state;
    static const kv8_tile tiles[] = {{15, 16, 32, 4, 2, 2}, {15, 16, 64, 4, 1, 1}, {16, 32, 64, 4, 4, 2},
                                     {10, 16, 64, 4, 2, 2}, {3, 16, 32, 4, 1, 1},  {9, 16, 128, 2, 2, 2},
                                     {5, 16, 32, 4, 2, 2},  {2, 32, 32, 4, 4, 2},  {7, 64, 64, 3, 4, 1}};
    static const struct {
        const char *name, *value, *want;
        int cases[4];
    } more[] = {{"FAJIT_PACK_GQA", "0", "kv8direct", {1, 2, 9, 15}},
                {"FAJIT_KV8_WIDEN", "int", "kv8intk kv8intv kv8direct", {3, 6, 10, 15}},
                {"FAJIT_KV8_WIDEN", "intv", "kv8intv kv8direct", {4, 5, 8, 16}}};
    int failures = 0;
    fajit_context *saved = g_ctx, *ctx = NULL;
    assert_int_equal(fj_test_context_with_env("FAJIT_KV8_DIRECT", "1", -1, &ctx), FAJIT_OK);
    g_ctx = ctx, g_want = "kv8direct";
    printf("FAJIT_KV8_DIRECT=1\n");
    failures += run_cases();
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        const kv8_tile *t = &tiles[i];
        printf("FAJIT_KV8_DIRECT=1 tile br%d bc%d s%d w%d cw%d: ", t->block_m, t->block_n, t->stages, t->warps,
               t->col_warps);
        int rc = run_case(&k_cases[t->case_index], t);
        failures += rc != 0;
        if (rc == 2) break;
    }
    fajit_context_destroy(ctx);
    for (size_t m = 0; m < sizeof more / sizeof more[0]; m++) {
        ctx = NULL;
        setenv("FAJIT_KV8_DIRECT", "1", 1); /* read beside the other one at context creation */
        fajit_status st = fj_test_context_with_env(more[m].name, more[m].value, -1, &ctx);
        unsetenv("FAJIT_KV8_DIRECT");
        assert_int_equal(st, FAJIT_OK);
        g_ctx = ctx, g_want = more[m].want;
        for (int i = 0; i < 4; i++) {
            printf("FAJIT_KV8_DIRECT=1 %s=%s: ", more[m].name, more[m].value);
            failures += run_case(&k_cases[more[m].cases[i]], NULL) != 0;
        }
        fajit_context_destroy(ctx);
    }
    g_ctx = saved, g_want = "";
    fflush(stdout);
    assert_int_equal(failures, 0);
}

/* $FAJIT_KV8_TILE=rows (kv8_knobs.c): the decode tile by the rows a KV head's CTA holds - br16 w2 cw2 for <= 16 rows,
 * br32 w4 cw2 for <= 32 - on the Nq 1 cases (1, 4 and 8 rows; contiguous, seqlens, splits forced and the
 * heuristic's, pages of 64 rows) and one of 32 rows (MQA Nq 4), with the widening and with $FAJIT_KV8_DIRECT=1; the
 * kernel text names the tile. */
static void test_kv8_decode_rows(void **state)
{
    (void)state;
    static const struct {
        int case_index;
        const char *tile;
    } runs[] = {{0, "br16 "}, {1, "br16 "}, {2, "br16 "}, {7, "br16 "}, {15, "br16 "}, {16, "br16 "}, {3, "br32 "}};
    int failures = 0;
    fajit_context *saved = g_ctx;
    for (int direct = 0; direct < 2; direct++) {
        fajit_context *ctx = NULL;
        if (direct) setenv("FAJIT_KV8_DIRECT", "1", 1);
        fajit_status st = fj_test_context_with_env("FAJIT_KV8_TILE", "rows", -1, &ctx);
        unsetenv("FAJIT_KV8_DIRECT");
        assert_int_equal(st, FAJIT_OK);
        g_ctx = ctx;
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            char want[64];
            snprintf(want, sizeof want, "%s", runs[i].tile);
            g_want = want;
            printf("FAJIT_KV8_TILE=rows%s: ", direct ? " FAJIT_KV8_DIRECT=1" : "");
            int rc = run_case(&k_cases[runs[i].case_index], NULL);
            if (rc == 0 && direct && !strstr(g_last_kernel, "kv8direct")) {
                printf("FAIL the kernel text lacks kv8direct\n");
                rc = 1;
            }
            failures += rc != 0;
            if (rc == 2) break;
        }
        g_ctx = saved, g_want = "";
        fajit_context_destroy(ctx);
    }
    fflush(stdout);
    assert_int_equal(failures, 0);
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    printf("device: %s (%s), %d SMs\n", g_ctx->device_name, fajit_context_sm(g_ctx), g_ctx->sm_count);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv8_decode),
        cmocka_unit_test(test_kv8_decode_unpacked),
        cmocka_unit_test(test_kv8_decode_tiles),
        cmocka_unit_test(test_kv8_decode_widen),
        cmocka_unit_test(test_kv8_decode_direct),
        cmocka_unit_test(test_kv8_decode_rows),
    };
    int rc = cmocka_run_group_tests_name("gpu_fp8_decode", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
