/*
 * test_fp8_ptxas.c - the FP8 (e4m3) sm_90a kernels assemble with ptxas -v for sm_90a with no spill, no stack use and
 * no warning: the heuristic's tile for head dims 64 / 128 / 256, causal and not, N 4k and 16k, and every tile of the
 * FP8 tune space that plans (block_m 64 / 128 / 192, block_n 32..256 in steps of 32, 1-3 stages, ping-pong on / off)
 * for one mask per head dim. The register model (sm90.c, plan.reg_total) must hold them all: a tile it accepts that
 * spills fails here. The FAJIT_FP8_KNOBS experiments (fp8_ws.h) likewise: the grid's defaults with each knob set (vt;
 * regs,vt; regs,vt,ostage: O staged in the V ring at D256; vt4: the 4-warp transpose; regs,vt4 and regs,vt4,ostage: its
 * lean form at 24 producer registers), the tiles bench/fp8_ab.sh and fp8_ab2.sh time with them, and what the 'regs' register model admits at D128 / D256 (block_n 64..256, both
 * masks, ping-pong on / off). label ptxas; skips without ptxas. Run: ctest --test-dir build -R test_fp8_ptxas
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
#include "fajit.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif

static char *g_ptxas, *g_dir;

/* 1 when the PTX (freed here) assembles for sm_90a with no spill, no stack and no warning (one line printed). */
static int ptx_assembles_clean(const char *text, char *ptx, size_t len)
{
    char src[1024], out[1024], log[1024];
    snprintf(src, sizeof src, "%s/k.ptx", g_dir);
    snprintf(out, sizeof out, "%s/k.cubin", g_dir);
    snprintf(log, sizeof log, "%s/k.log", g_dir);
    FILE *f = fopen(src, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ptx, 1, len, f), len);
    fclose(f);
    fajit_free(ptx);
    char arch[] = "-arch=sm_90a", v[] = "-v", o[] = "-o";
    char *argv[] = {g_ptxas, arch, v, src, o, out, NULL};
    int code = fj_test_run(argv, log, log);
    char *ptxas_log = fj_test_read_file(log, NULL);
    fj_ptxas_report rep = fj_test_ptxas_log(ptxas_log ? ptxas_log : "");
    int ok = code == 0 && ptxas_log && rep.entries > 0 && !rep.bad && !strstr(ptxas_log, "warning");
    printf("%s %s: spill %d, stack %d\n", ok ? "ok  " : "FAIL", text, rep.spill, rep.stack);
    if (!ok) printf("%s\n", ptxas_log ? ptxas_log : "(no log)");
    free(ptxas_log);
    return ok;
}

/* 1 when the config's PTX assembles for sm_90a with no spill, no stack and no warning (one line printed). */
static int assembles_clean(const fajit_config *c)
{
    char text[192];
    char *ptx = NULL;
    size_t len = 0;
    fajit_config_format(c, text, sizeof text);
    if (fajit_generate_ptx(c, 0, &ptx, &len) != FAJIT_OK) {
        printf("FAIL %s: generate: %s\n", text, fajit_errmsg());
        return 0;
    }
    return ptx_assembles_clean(text, ptx, len);
}

/* The heuristic's FP8 configs of issue 22's cells (D 64/128/256 x causal x N 4k/16k): failures. */
static int defaults_assemble(void)
{
    int failures = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int causal = 0; causal < 2; causal++)
            for (int n = 4096; n <= 16384; n *= 4) {
                fajit_shape shape = {16384 / n, 2048 / d, 2048 / d, n, n};
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal};
                if (fajit_config_fill(NULL, &shape, &c) != FAJIT_OK) {
                    printf("FAIL fill d%d causal %d N%d: %s\n", d, causal, n, fajit_errmsg());
                    failures++;
                    continue;
                }
                failures += !assembles_clean(&c);
            }
    return failures;
}

static void test_defaults(void **state)
{
    (void)state;
    assert_int_equal(defaults_assemble(), 0);
}

/* The rolled consumer loop (config roll = 1, opt-in for e4m3): every default of issue 22's cells, and the decode tile
 * with split + GQA packing, plan with the Vt barriers on the K / V block's stride (vt_bar_stride 32; 16 unrolled),
 * generate about half the PTX of the unrolled kernel (one consumer body for every stage) and assemble clean. The
 * barrier protocol itself is test_pipe_sim's (test_fp8_rolled). */
static void test_rolled(void **state)
{
    (void)state;
    int failures = 0, n = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int causal = 0; causal < 2; causal++)
            for (int decode = 0; decode < 2; decode++) {
                fajit_shape shape = {decode ? 8 : 4, 32, 8, decode ? 1 : 4096, decode ? 8192 : 4096};
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal};
                unsigned v = decode ? FJ_VARIANT_SPLIT | FJ_VARIANT_PACK : 0;
                assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
                fajit_config r = c;
                r.roll = 1;
                c.roll = -1;
                fj_plan pu, pr;
                char text[192], *ptx_u = NULL, *ptx_r = NULL;
                size_t len_u = 0, len_r = 0;
                fajit_config_format(&r, text, sizeof text);
                fajit_status st = fj_plan_build_variant(&c, v, &pu);
                if (st == FAJIT_OK) st = fj_plan_build_variant(&r, v, &pr);
                if (st == FAJIT_OK) st = fj_generate_ptx_plan(&pu, 0, &ptx_u, &len_u);
                if (st == FAJIT_OK) st = fj_generate_ptx_plan(&pr, 0, &ptx_r, &len_r);
                if (st != FAJIT_OK || !pr.roll_stages || pr.vt_bar_stride != 32 || pu.vt_bar_stride != 16 ||
                    (c.stages >= 2 && 10 * len_r > 7 * len_u)) {
                    printf("FAIL %s variant 0x%x: %s (vt_bar_stride %d / %d, PTX %zu / %zu bytes rolled / unrolled)\n",
                           text, v, st ? fajit_errmsg() : "plan", pr.vt_bar_stride, pu.vt_bar_stride, len_r, len_u);
                    failures++;
                } else {
                    failures += !ptx_assembles_clean(text, ptx_r, len_r); /* (frees the PTX) */
                    ptx_r = NULL;
                    n++;
                }
                fajit_free(ptx_u);
                fajit_free(ptx_r);
            }
    printf("%d rolled FP8 kernels assembled, %d failures\n", n, failures);
    assert_int_equal(failures, 0);
}

static void test_tune_space(void **state)
{
    (void)state;
    int failures = 0, n = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int bm = 64; bm <= 192; bm += 64)
            for (int bn = 32; bn <= 256; bn += 32)
                for (int stages = 1; stages <= 3; stages++)
                    for (int pp = -1; pp <= 1; pp += 2) {
                        fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d,
                                          .block_m = bm, .block_n = bn, .stages = stages,
                                          .swizzle = d >= 128 ? 128 : 64, .warps = 4 * (bm / 64 + 1), .col_warps = 1,
                                          .overlap = 1, .pingpong = pp, .causal = d == 128};
                        fj_plan p;
                        if (fj_plan_build(&c, &p) != FAJIT_OK) continue; /* the plan refuses it: pruned by the tuner */
                        if (stages == 1 && bn % 64) continue;           /* a sample of the one-stage tiles */
                        failures += !assembles_clean(&c);
                        n++;
                    }
    printf("%d FP8 tiles assembled, %d failed\n", n, failures);
    assert_int_equal(failures, 0);
}

/* bench/fp8_ab.sh's tiles besides the defaults: FlashAttention-3's FP8 tiles and schedules (D64 br192 without
 * ping-pong; D128 br128 bc224 ov pp; D256 br128 bc128 ov, pp where the model admits it) */
static const struct {
    int d, bm, bn, pp;
} k_ab_tiles[] = {{64, 192, 128, -1}, {128, 128, 224, 1}, {256, 128, 128, 1}, {256, 128, 128, -1}};

static int knob_grid(const char *knobs)
{
    int failures = 0;
    setenv("FAJIT_FP8_KNOBS", knobs, 1);
    printf("FAJIT_FP8_KNOBS=%s\n", knobs);
    failures += defaults_assemble();
    if (strstr(knobs, "regs"))
        for (size_t i = 0; i < sizeof k_ab_tiles / sizeof k_ab_tiles[0]; i++)
            for (int causal = 0; causal < 2; causal++) {
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = k_ab_tiles[i].d,
                                  .block_m = k_ab_tiles[i].bm, .block_n = k_ab_tiles[i].bn, .stages = 2,
                                  .swizzle = k_ab_tiles[i].d >= 128 ? 128 : 64, .warps = 4 * (k_ab_tiles[i].bm / 64 + 1),
                                  .col_warps = 1, .overlap = 1, .pingpong = k_ab_tiles[i].pp, .causal = causal};
                fj_plan p;
                if (fj_plan_build(&c, &p) != FAJIT_OK) continue; /* D256 pp causal: the model refuses it */
                failures += !assembles_clean(&c);
            }
    unsetenv("FAJIT_FP8_KNOBS");
    return failures;
}

static void test_knobs(void **state)
{
    (void)state;
    /* (regs,vt4: the lean vt4 form at the 24-register producer, fj_fp8_vt4_lean; the plain form spilled 24-100 bytes
     * there, as FlashAttention-3's producer spills) */
    int failures = knob_grid("vt") + knob_grid("regs,vt") + knob_grid("regs,vt,ostage") + knob_grid("vt4") +
                   knob_grid("regs,vt4") + knob_grid("regs,vt4,ostage");
    /* the 'regs' register model (240 registers for two consumer warpgroups) over its wider space */
    setenv("FAJIT_FP8_KNOBS", "regs", 1);
    for (int d = 128; d <= 256; d *= 2)
        for (int bn = 64; bn <= 256; bn += 32)
            for (int causal = 0; causal < 2; causal++)
                for (int pp = -1; pp <= 1; pp += 2) {
                    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d,
                                      .block_m = 128, .block_n = bn, .stages = 2, .swizzle = 128, .warps = 12,
                                      .col_warps = 1, .overlap = 1, .pingpong = pp, .causal = causal};
                    fj_plan p;
                    if (fj_plan_build(&c, &p) != FAJIT_OK) continue;
                    if (bn < (d == 256 ? 96 : 160)) continue; /* below the 232-register limit's widest tiles */
                    failures += !assembles_clean(&c);
                }
    unsetenv("FAJIT_FP8_KNOBS");
    assert_int_equal(failures, 0);
}

/* The attention variants on the FP8 kernels (fajit_config_fill's tile for each): window, softcap, sinks, chunk and the
 * combinations models use, D 64 / 128 / 256, causal and not. ALiBi is refused, naming it (FAJIT_ERR_UNSUPPORTED). */
static void test_variants(void **state)
{
    (void)state;
    static const unsigned mods[] = {FAJIT_MOD_WINDOW, FAJIT_MOD_SOFTCAP, FAJIT_MOD_SINKS, FAJIT_MOD_CHUNK,
                                    FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP,
                                    FAJIT_MOD_SOFTCAP | FAJIT_MOD_SINKS};
    int failures = 0, n = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int causal = 0; causal < 2; causal++) {
            for (size_t m = 0; m < sizeof mods / sizeof mods[0]; m++) {
                fajit_shape shape = {1, 2048 / d, 2048 / d, 8192, 8192};
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d,
                                  .causal = causal, .mods = mods[m]};
                if (fajit_config_fill(NULL, &shape, &c) != FAJIT_OK) {
                    printf("FAIL fill d%d causal %d mods %u: %s\n", d, causal, mods[m], fajit_errmsg());
                    failures++;
                    continue;
                }
                failures += !assembles_clean(&c);
                n++;
            }
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal,
                              .mods = FAJIT_MOD_ALIBI};
            fajit_status st = fajit_config_fill(NULL, NULL, &c);
            if (st == FAJIT_OK) st = fajit_config_check(&c);
            if (st != FAJIT_ERR_UNSUPPORTED || !strstr(fajit_errmsg(), "ALiBi")) {
                printf("FAIL d%d causal %d: ALiBi with e4m3 gave %s: %s\n", d, causal, fajit_status_name(st),
                       fajit_errmsg());
                failures++;
            }
        }
    printf("%d FP8 variant kernels assembled, %d failures\n", n, failures);
    assert_int_equal(failures, 0);
}

/* The decode variants on the FP8 kernels, D 64 / 128 / 256, causal and not: seqlens_k, split-KV, GQA packing, paged
 * K/V and their combinations plan and assemble clean on the heuristic's two-consumer tile (w12, for more than 64 rows
 * a KV head) and on the decode tile (br64 w8, up to 64 rows; the runtime's default there, config.c); with seqlens_k
 * or paged K/V the producer zero-fills a sequence's last V tile past its length (the v_zero loop: the vt4 producer
 * too, which loaded V without it until session 19); on w12 D256's lean vt4 producer refuses seqlens_k / paged, naming
 * the head dim, and D256 split / packing plan on a narrower K / V tile (bc96) than the plain kernel's. Run on the GPU
 * by test_gpu_fp8 (test_fp8_decode). */
static void test_decode_variants(void **state)
{
    (void)state;
    static const unsigned vs[] = {FJ_VARIANT_SPLIT, FJ_VARIANT_PACK, FJ_VARIANT_SEQLENS, FJ_VARIANT_PAGED,
                                  FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                  FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED};
    int failures = 0, n = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int causal = 0; causal < 2; causal++)
            for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
                fajit_shape shape = {4, 32, 8, 64, 8192}; /* 256 rows a KV head: the two-consumer tile (w12) */
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal};
                assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
                int tail = (vs[i] & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED)) != 0;
                fj_plan p;
                fajit_status st = fj_plan_build_variant(&c, vs[i], &p);
                /* the variant's registers on the plain tile's: narrower K / V tiles until it plans (as fagen's nearest
                 * config: d256 split / packing take bc96) */
                while (st == FAJIT_ERR_INVALID_CONFIG && c.block_n > 32 && !(d == 256 && tail)) {
                    c.block_n -= 32;
                    st = fj_plan_build_variant(&c, vs[i], &p);
                }
                if (d == 256 && tail) {
                    if (st != FAJIT_ERR_UNSUPPORTED || !strstr(fajit_errmsg(), "head_dim 256")) {
                        printf("FAIL d256 variant 0x%x: %s: %s\n", vs[i], fajit_status_name(st), fajit_errmsg());
                        failures++;
                    }
                    continue;
                }
                char text[192], *ptx = NULL;
                size_t len = 0;
                if (st == FAJIT_OK) st = fj_generate_ptx_plan(&p, 0, &ptx, &len);
                snprintf(text, sizeof text, "d%d causal %d bc%d variant 0x%x", d, causal, c.block_n, vs[i]);
                if (st != FAJIT_OK) {
                    printf("FAIL %s: %s\n", text, fajit_errmsg());
                    failures++;
                    continue;
                }
                if (tail != (strstr(ptx, "v_zero") != NULL)) {
                    printf("FAIL %s: the V-tail fill %s\n", text, tail ? "missing" : "where no tail is");
                    failures++;
                }
                failures += !ptx_assembles_clean(text, ptx, len);
                n++;
            }
    /* the decode tile (br64 w8: one consumer warpgroup; two CTAs an SM at D64 / D128 (occ2: producer 40, consumers
     * 216), one with no setmaxnreg at D256; never the lean 24-register producer): every variant at every head dim,
     * D256 seqlens / paged too */
    for (int d = 64; d <= 256; d *= 2)
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .block_m = 64,
                              .warps = 8, .causal = (int)(i % 2)};
            fajit_shape shape = {4, 32, 8, 1, 8192};
            assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
            fj_plan p;
            char text[192], *ptx = NULL;
            size_t len = 0;
            snprintf(text, sizeof text, "br64 w8 d%d bc%d variant 0x%x", d, c.block_n, vs[i]);
            fajit_status st = fj_plan_build_variant(&c, vs[i], &p);
            if (st == FAJIT_OK) st = fj_generate_ptx_plan(&p, 0, &ptx, &len);
            /* no lean producer: no setmaxnreg (one CTA an SM, D256) or occ2's 40 / 216 (two, D64 / D128) */
            if (st != FAJIT_OK || (p.min_ctas == 2 ? p.producer_regs != 40 || d > 128 : p.producer_regs != 0)) {
                printf("FAIL %s: %s\n", text, st ? fajit_errmsg() : "the producer's register budget");
                failures++;
                if (ptx) fajit_free(ptx);
                continue;
            }
            failures += !ptx_assembles_clean(text, ptx, len);
            n++;
        }
    /* split and packed tiles store O from registers, so no O staging buffer is planned for them: at D128 br64 w8 the
     * default decode tile (bc64 s3, whose plain kernel stages O) is 16 KB smaller, and it and the wider tiles (bc64 s4,
     * bc128 s2, whose plain kernels already drop the buffer to keep occ2) plan two CTAs an SM */
    static const int wide[][2] = {{64, 3}, {64, 4}, {128, 2}};
    for (size_t t = 0; t < sizeof wide / sizeof wide[0]; t++)
        for (size_t i = 0; i < 2; i++) {
            unsigned v = i ? FJ_VARIANT_SPLIT | FJ_VARIANT_PACK : FJ_VARIANT_SPLIT;
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 128, .block_m = 64,
                              .block_n = wide[t][0], .stages = wide[t][1], .swizzle = 128, .warps = 8, .overlap = 1};
            fj_plan p0, p;
            char text[192], *ptx = NULL;
            size_t len = 0;
            snprintf(text, sizeof text, "br64 w8 d128 bc%d s%d variant 0x%x", wide[t][0], wide[t][1], v);
            assert_int_equal(fj_plan_build(&c, &p0), FAJIT_OK);
            fajit_status st = fj_plan_build_variant(&c, v, &p);
            if (st == FAJIT_OK) st = fj_generate_ptx_plan(&p, 0, &ptx, &len);
            if (st != FAJIT_OK || p.min_ctas != 2 || p.o_stage != 0 || (t == 0 && p0.o_stage != 1) ||
                p.smem_bytes != p0.smem_bytes - (p0.o_stage == 1 ? p0.o_bytes : 0)) {
                printf("FAIL %s: %s (plain: O staged %d, smem %d B; variant: %d CTAs an SM, O staged %d, smem %d B)\n",
                       text, st ? fajit_errmsg() : "smem map", p0.o_stage, p0.smem_bytes, p.min_ctas, p.o_stage,
                       p.smem_bytes);
                failures++;
                if (ptx) fajit_free(ptx);
                continue;
            }
            failures += !ptx_assembles_clean(text, ptx, len);
            n++;
        }
    printf("%d FP8 decode-variant kernels assembled, %d failures\n", n, failures);
    assert_int_equal(failures, 0);
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
    g_dir = fj_test_make_temp_dir("fajit_fp8_ptx");
    assert_non_null(g_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_rolled),
        cmocka_unit_test(test_tune_space),
        cmocka_unit_test(test_knobs),
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_decode_variants),
    };
    int rc = cmocka_run_group_tests_name("fp8_ptxas", tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    free(g_dir);
    free(g_ptxas);
    return rc;
}
