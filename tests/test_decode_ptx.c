/*
 * test_decode_ptx.c - the decode kernels' PTX assembles (label ptxas; no GPU): the combine kernel for
 * every head dim and dtype, and the sm_80 forward's decode variants (per-sequence lengths, split-KV, paged
 * K/V, paged K/V gathered from 16-row page segments, either with its pages read a tile ahead (AHEAD, 2+
 * stages), combinations; each again with GQA packing) over tile shapes that take each schedule (2-3 stages, one stage, the pipelined S, warp pairs),
 * causal and not, each with ptxas -v for sm_80 and sm_90a: exit 0, no warning, no spill on sm_90a; the FP8 K/V cache
 * kernels (d64/128/256, both widenings: integer under .target sm_80, cvt for sm_90a / sm_100a) with no spill
 * and the smaller FP8 K/V decode tiles (br16 / br32) with both widenings (sm_80 spills are printed; the plain grid allows a few bytes at the causal 255-register edge,
 * test_ptxas_grid.c). Also: the variant PTX reads its parameter block where kernel_abi.h puts the
 * decode fields, and the plain kernel's text has none of them.
 * Skips without ptxas. Run: ctest --test-dir build -R test_decode_ptx --output-on-failure
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
#include "codegen/kernel_abi.h"
#include "fajit.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif

static char *g_ptxas, *g_dir;

/* Assemble `ptx` for arch with -v; returns the spill-store bytes (0..), or -1 when ptxas failed or warned. */
static int assemble(const char *ptx, size_t len, const char *arch, const char *what)
{
    fj_ptxas_report rep;
    char *text;
    int code = fj_test_ptxas(g_ptxas, g_dir, ptx, len, arch, &rep, &text);
    int bad = code != 0 || !text || rep.warned;
    if (bad) printf("FAIL %s on %s: ptxas exit %d\n%s\n", what, arch, code, text ? text : "(no log)");
    free(text);
    return bad ? -1 : rep.spill;
}

static void gen(const fajit_config *cfg, unsigned variant, char **ptx, size_t *len, char *text, size_t size)
{
    fj_plan p;
    fajit_status st = fj_plan_build_variant(cfg, variant, &p);
    if (st != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&p, text, size);
    st = fj_generate_ptx_plan(&p, variant == FJ_VARIANT_COMBINE ? 2 : 0, ptx, len);
    if (st != FAJIT_OK) fail_msg("%s: %s", text, fajit_errmsg());
}

static void test_combine(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    int failures = 0;
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
        for (size_t i = 0; i < 5; i++) {
            fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = (fajit_dtype)dt, .head_dim = dims[i]};
            char *ptx, text[160];
            size_t len;
            gen(&c, FJ_VARIANT_COMBINE, &ptx, &len, text, sizeof text);
            assert_non_null(strstr(ptx, ".entry " FJ_COMBINE_KERNEL_NAME "("));
            for (int a = 0; a < 2; a++) {
                const char *arch = a ? "sm_90a" : "sm_80";
                int spill = assemble(ptx, len, arch, text);
                printf("%s %-28s %s spill %d\n", spill == 0 ? "PASS" : "FAIL", text, arch, spill);
                failures += spill != 0;
            }
            fajit_free(ptx);
        }
    assert_int_equal(failures, 0);
}

/* The PTX has a predicated block-table read ("@%p.. ld.global.nc.u32"): AHEAD's next-tile pages. */
static int has_guarded_load(const char *ptx)
{
    for (const char *s = strstr(ptx, "ld.global.nc.u32"); s; s = strstr(s + 1, "ld.global.nc.u32")) {
        const char *b = s;
        while (b > ptx && b[-1] != '\n') b--;
        while (*b == ' ' || *b == '\t') b++;
        if (*b == '@') return 1;
    }
    return 0;
}

#define T80(br, bc, st, sw, w, cw)                                                                                   \
    {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .block_m = br, .block_n = bc, .stages = st, .swizzle = sw,  \
     .warps = w, .col_warps = cw, .overlap = -1, .pingpong = -1}

/* Generate and assemble one variant kernel (sm_80 and sm_90a; no spill on sm_90a); counts the gathered
 * and the read-ahead kernels. Returns the failures. */
static int check_variant(const fajit_config *c, unsigned v, int *gathers, int *aheads)
{
    char *ptx, text[160];
    size_t len;
    int failures = 0;
    gen(c, v, &ptx, &len, text, sizeof text);
    char splits[64];
    snprintf(splits, sizeof splits, "[fajit_fwd_param_0+%d]", (int)offsetof(fj_fwd_params_decode, splits));
    if (v & FJ_VARIANT_SPLIT) assert_non_null(strstr(ptx, splits));
    if (v & FJ_VARIANT_GATHER) *gathers += strstr(text, " paged gather") != NULL;
    if (v & FJ_VARIANT_AHEAD) *aheads += strstr(text, " ahead") != NULL && has_guarded_load(ptx);
    for (int a = 0; a < 2; a++) {
        const char *arch = a ? "sm_90a" : "sm_80";
        int spill = assemble(ptx, len, arch, text);
        int ok = spill == 0 || (spill > 0 && !a);
        printf("%s %-58s %s spill %d\n", ok ? "PASS" : "FAIL", text, arch, spill);
        failures += !ok;
    }
    fajit_free(ptx);
    return failures;
}

/* The kernels of a split-KV call planned for an sm_90 device (fj_plan_for_target: programmatic dependent launch,
 * griddepcontrol in the split kernel and the combine kernel, .target sm_90) assemble for it with no spill. */
static void test_griddep_kernels(void **state)
{
    (void)state;
    const fj_arch_info *sm90 = fj_arch_find("sm_90");
    const fajit_config cfgs[] = {{.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16},
                                 T80(64, 64, 2, 128, 4, 1), T80(16, 64, 3, 128, 2, 2)};
    const unsigned variants[] = {FJ_VARIANT_COMBINE, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                 FJ_VARIANT_SPLIT | FJ_VARIANT_SEQLENS | FJ_VARIANT_PACK};
    int failures = 0;
    for (size_t i = 0; i < 3; i++) {
        fajit_config c = cfgs[i];
        c.head_dim = 128;
        fj_plan p;
        char *ptx, text[160];
        size_t len;
        if (fj_plan_build_variant(&c, variants[i], &p) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
        fj_plan_for_target(&p, sm90);
        assert_int_equal(p.griddep, 1);
        fj_plan_format(&p, text, sizeof text);
        if (fj_generate_ptx_plan(&p, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", text, fajit_errmsg());
        assert_non_null(strstr(ptx, "griddepcontrol."));
        int spill = assemble(ptx, len, "sm_90", text);
        printf("%s %-58s sm_90 (griddep) spill %d\n", spill == 0 ? "PASS" : "FAIL", text, spill);
        failures += spill != 0;
        fajit_free(ptx);
    }
    assert_int_equal(failures, 0);
}

static void test_forward_variants(void **state)
{
    (void)state;
    static const fajit_config tiles[] = {
        T80(64, 64, 2, 128, 4, 1),  /* the decode heuristic's d128 shape */
        T80(128, 32, 1, 64, 8, 1),  /* one stage: K a tile ahead of V */
        T80(64, 32, 3, 64, 4, 1),   /* pipelined S */
        T80(128, 64, 1, 64, 8, 2),  /* warp pairs */
    };
    static const int dims[] = {64, 128, 256};
    static const unsigned variants[] = {
        FJ_VARIANT_SEQLENS, FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT,
        FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, FJ_VARIANT_PACK | FJ_VARIANT_PAGED, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
        FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED,
        FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED | FJ_VARIANT_GATHER};
    int failures = 0, ran = 0, gathers = 0, aheads = 0;
    for (int pack = 0; pack <= 1; pack++) {
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
            for (size_t d = 0; d < 3; d++) {
                fajit_config c = tiles[t];
                c.head_dim = dims[d];
                c.causal = (int)((t + d) % 2);
                c.dtype = d == 1 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16;
                fj_plan p;
                if (fj_plan_build(&c, &p) != FAJIT_OK) continue; /* a tile shape a head dim does not take */
                unsigned v = variants[(t + d) % 4 + 4 * pack];
                if ((v & FJ_VARIANT_GATHER) && fj_plan_build_variant(&c, v, &p) != FAJIT_OK)
                    v &= ~(unsigned)FJ_VARIANT_GATHER; /* a tile at the register edge: GATHER's registers refuse it */
                if ((v & FJ_VARIANT_PAGED) && c.stages >= 2 && d != 1 &&
                    fj_plan_build_variant(&c, v | FJ_VARIANT_AHEAD, &p) == FAJIT_OK) /* d 128: as before */
                    v |= FJ_VARIANT_AHEAD;
                failures += check_variant(&c, v, &gathers, &aheads);
                ran++;
            }
    }
    for (size_t t = 0; t < 4; t += 2) /* the 2- and 3-stage tiles: gathered with pages read ahead */
        for (size_t d = 0; d < 3; d++) {
            fajit_config c = tiles[t];
            c.head_dim = dims[d];
            c.causal = (int)(d % 2);
            unsigned v = FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED | FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD |
                         (d == 1 ? 0 : FJ_VARIANT_PACK);
            fj_plan p;
            if (fj_plan_build_variant(&c, v, &p) != FAJIT_OK) continue; /* the variants' registers refuse the tile */
            failures += check_variant(&c, v, &gathers, &aheads);
            ran++;
        }
    assert_true(ran >= 20);
    assert_true(gathers >= 7); /* the gathered paged copies (GATHER) took part */
    assert_true(aheads >= 7);  /* and pages read a tile ahead (AHEAD), gathered or not */
    assert_int_equal(failures, 0);
}

/* FP8 K/V cache kernels (kv8.c), the heuristic's decode tiles (4 e4m3 stages) with seqlens + split + GQA packing +
 * paged: the integer widenings under .target sm_80 (assembled for sm_80 and sm_90a) and the cvt one for its own
 * target (sm_90a, sm_100a): exit 0, no warning, no spill, and the cvt where the plan says. */
static void test_kv8(void **state)
{
    (void)state;
    const unsigned v = FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED;
    const fajit_dtype dts[2] = {FAJIT_DTYPE_BF16, FAJIT_DTYPE_F16};
    const int dims[3] = {64, 128, 256};
    const char *targets[3] = {NULL, "sm_90a", "sm_100a"};
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (int t = 0; t < 2; t++)
            for (int g = 0; g < 3; g++) {
                fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = dts[t], .kv_dtype = FAJIT_DTYPE_E4M3,
                                  .head_dim = dims[d], .block_m = 64};
                const fajit_config given = c;
                fajit_shape s = {1, 32, 8, 1, 131072};
                fj_config_heuristic(&c, &given, &s, 232448);
                fj_plan p;
                assert_int_equal(fj_plan_build_variant(&c, v, &p), FAJIT_OK);
                if (targets[g]) fj_kv8_for_target(&p, fj_arch_find(targets[g]));
                if (targets[g] && !p.kv8_cvt) continue; /* the bf16 widening: the sm_80 PTX above */
                char *ptx, text[256];
                size_t len;
                fj_plan_format(&p, text, sizeof text);
                assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
                assert_true((strstr(ptx, "cvt.rn.f16x2.e4m3x2") != NULL) == p.kv8_cvt);
                const char *archs[2] = {targets[g] ? targets[g] : "sm_80", targets[g] ? NULL : "sm_90a"};
                for (int a = 0; a < 2 && archs[a]; a++) {
                    int spill = assemble(ptx, len, archs[a], text);
                    printf("%-70s %-8s %s: spill %d\n", text, archs[a], p.kv8_cvt ? "cvt" : "int", spill);
                    bad += spill != 0;
                }
                free(ptx);
            }
    assert_int_equal(bad, 0);
}

/* FP8 K/V cache decode on smaller query tiles (one or two 16-row row blocks: a GQA group's rows pad to 16, not 64),
 * keys split over a warp pair or whole tiles in one warp, d128, with seqlens + split + GQA packing + paged (+ pages
 * read ahead where the registers allow it): for sm_90a with cvt, with the integer widening of both tensors
 * (KV8_INT_K + KV8_INT_V) and of V only; exit 0, no warning, no spill. The tiles of bench/kv8_sweep.sh. */
static void test_kv8_small_tiles(void **state)
{
    (void)state;
    static const int tiles[][5] = {/* block_m, block_n, stages, warps, col_warps */
                                   {32, 64, 4, 4, 2}, {32, 32, 4, 4, 2}, {16, 64, 4, 2, 2}, {16, 32, 4, 2, 2},
                                   {16, 32, 3, 2, 2}, {16, 128, 2, 2, 2}, {16, 32, 4, 1, 1}, {16, 64, 3, 1, 1}};
    const unsigned widen[3] = {0, FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V, FJ_VARIANT_KV8_INT_V};
    const unsigned base = FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED;
    int bad = 0, ran = 0, aheads = 0;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
        for (int w = 0; w < 3; w++) {
            fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = w == 2 && t % 2 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16,
                              .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = 128, .block_m = tiles[t][0],
                              .block_n = tiles[t][1], .stages = tiles[t][2], .warps = tiles[t][3],
                              .col_warps = tiles[t][4], .swizzle = 128, .causal = (int)((t + (size_t)w) % 2)};
            fj_plan p;
            unsigned v = base | widen[w];
            if (fj_plan_build_variant(&c, v | FJ_VARIANT_AHEAD, &p) == FAJIT_OK) v |= FJ_VARIANT_AHEAD, aheads++;
            assert_int_equal(fj_plan_build_variant(&c, v, &p), FAJIT_OK);
            fj_kv8_for_target(&p, fj_arch_find("sm_90a"));
            assert_int_equal(p.kv8_cvt, w != 1); /* both tensors integer: no cvt, .target sm_80 */
            char *ptx, text[256];
            size_t len;
            fj_plan_format(&p, text, sizeof text);
            assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
            assert_true((strstr(ptx, "cvt.rn.f16x2.e4m3x2") != NULL) == (w != 1));
            assert_true((strstr(ptx, "prmt.b32") != NULL) == (w != 0)); /* the integer widening's byte permutes */
            int spill = assemble(ptx, len, "sm_90a", text);
            printf("%-100s sm_90a: spill %d\n", text, spill);
            bad += spill != 0;
            ran++;
            free(ptx);
        }
    assert_int_equal(ran, 24);
    assert_true(aheads >= 12);
    assert_int_equal(bad, 0);
}

/* kv8direct (kv8_frag.c: the MMA fragments straight from the e4m3 tiles): the heuristic's d64 / d128 decode tiles, d256
 * br32 w4 cw2 (the heuristic's d256 tile is refused for kv8direct: its registers; the runtime takes a smaller one)
 * and the small tiles of bench/kv8_sweep.sh (br32 cw2, br16 cw2, br16 w1), bf16 and f16, contiguous / seqlens + split /
 * GQA packing + paged (+ pages read ahead where the registers allow it), with cvt for sm_90a and the integer widening
 * of both tensors (.target sm_80, assembled for sm_80 and sm_90a) or of V only: exit 0, no warning, no spill, no 16-bit
 * K / V tile (no st.shared), and ldmatrix.trans + prmt where the plan says. */
static void test_kv8_direct(void **state)
{
    (void)state;
    static const int tiles[][6] = {/* head_dim, block_m, block_n, stages, warps, col_warps (0: the heuristic's) */
                                   {64, 64, 0, 0, 0, 0},    {128, 64, 0, 0, 0, 0},  {256, 32, 64, 2, 4, 2},
                                   {128, 32, 64, 4, 4, 2},  {128, 16, 32, 4, 2, 2}, {128, 16, 64, 4, 2, 2},
                                   {128, 16, 32, 4, 1, 1},  {128, 16, 64, 3, 1, 1}, {64, 16, 32, 4, 2, 2},
                                   {256, 16, 32, 2, 2, 2}};
    const unsigned widen[3] = {0, FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V, FJ_VARIANT_KV8_INT_V};
    const unsigned feats[3] = {0, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT,
                               FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED};
    int bad = 0, ran = 0, aheads = 0;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
        for (int w = 0; w < 3; w++) {
            int f = (int)((t + (size_t)w) % 3);
            fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = (t + (size_t)w) % 2 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16,
                              .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = tiles[t][0], .block_m = tiles[t][1],
                              .block_n = tiles[t][2], .stages = tiles[t][3], .warps = tiles[t][4],
                              .col_warps = tiles[t][5], .causal = (int)(t % 2)};
            if (!c.block_n) {
                const fajit_config given = c;
                fajit_shape sh = {1, 32, 8, 1, 131072};
                fj_config_heuristic(&c, &given, &sh, 232448);
            } else {
                c.swizzle = c.head_dim == 64 && c.col_warps == 2 ? 64 : 128;
            }
            fj_plan p;
            unsigned v = feats[f] | widen[w] | FJ_VARIANT_KV8_DIRECT;
            if (f == 2 && fj_plan_build_variant(&c, v | FJ_VARIANT_AHEAD, &p) == FAJIT_OK) v |= FJ_VARIANT_AHEAD, aheads++;
            if (fj_plan_build_variant(&c, v, &p) != FAJIT_OK) fail_msg("d%d tile %zu: %s", c.head_dim, t, fajit_errmsg());
            assert_int_equal(p.kv_slots, 0);
            const char *target = w == 1 ? NULL : "sm_90a";
            if (target) fj_kv8_for_target(&p, fj_arch_find(target));
            char *ptx, text[256];
            size_t len;
            fj_plan_format(&p, text, sizeof text);
            assert_non_null(strstr(text, " kv8direct"));
            assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
            assert_true((strstr(ptx, "cvt.rn.f16x2.e4m3x2") != NULL) == p.kv8_cvt);
            if (p.col_warps == 1) assert_null(strstr(ptx, "st.shared")); /* nothing widened into a 16-bit tile */
            assert_non_null(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
            assert_non_null(strstr(ptx, "prmt.b32"));
            const char *archs[2] = {target ? target : "sm_80", target ? NULL : "sm_90a"};
            for (int a = 0; a < 2 && archs[a]; a++) {
                int spill = assemble(ptx, len, archs[a], text);
                printf("%-110s %-7s %s: spill %d\n", text, archs[a], p.kv8_cvt ? "cvt" : "int", spill);
                bad += spill != 0;
            }
            ran++;
            free(ptx);
        }
    assert_int_equal(ran, 30);
    assert_true(aheads >= 3);
    assert_int_equal(bad, 0);
}

/* The plain kernel reads none of the decode fields. */
static void test_plain_untouched(void **state)
{
    (void)state;
    fajit_config c = T80(64, 64, 2, 128, 4, 1);
    c.head_dim = 128;
    char *ptx;
    size_t len;
    assert_int_equal(fajit_generate_ptx(&c, 0, &ptx, &len), FAJIT_OK);
    char f[64];
    snprintf(f, sizeof f, "fajit_fwd_param_0[%d]", (int)sizeof(fj_fwd_params));
    assert_non_null(strstr(ptx, f));
    snprintf(f, sizeof f, "+%d]", (int)sizeof(fj_fwd_params));
    assert_null(strstr(ptx, f));
    fajit_free(ptx);
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
    g_dir = fj_test_make_temp_dir("fajit_decode_ptx");
    assert_non_null(g_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_combine),
        cmocka_unit_test(test_griddep_kernels),
        cmocka_unit_test(test_forward_variants),
        cmocka_unit_test(test_plain_untouched),
        cmocka_unit_test(test_kv8),
        cmocka_unit_test(test_kv8_small_tiles),
        cmocka_unit_test(test_kv8_direct),
    };
    int rc = cmocka_run_group_tests_name("decode_ptx", tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    free(g_dir);
    free(g_ptxas);
    return rc;
}
