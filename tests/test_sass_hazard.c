/*
 * test_sass_hazard.c - (label ptxas) no instruction of an sm_90a kernel's SASS writes a register that a wgmma in
 * flight still reads (its A operand from registers) or writes (its accumulators) (sass_hazard.c: every path of the
 * control flow, loops to a fixed point). PTX cannot say which SASS registers ptxas picks: in session 24 ptxas 13.0 gave
 * the FP8 rolled loop's early-packed P the registers of the P that the PV in flight read (scattered NaN rows on the
 * H200 at D256 with the overlap). Checked: the checker itself on SASS fragments (a hazard across a loop's back edge,
 * the same fixed, an accumulator written before its wait), then the SASS of the FP8 (e4m3) defaults of issue 22's
 * cells (D 64 / 128 / 256, causal and not) unrolled and rolled, the rolled D256 one with ping-pong off and on, and
 * the 16-bit sm_90a defaults (rolled since session 12) of every head dim, both masks, and a sample of the attention,
 * varlen and decode variants of both dtypes.
 * Tools: ptxas ($FAJIT_PTXAS, CMake's, /usr/local/cuda/bin, $PATH) and nvdisasm (likewise, or the pip wheel's in
 * .whl/); without either the kernel checks skip with the reason. About a minute on the 2-core machine.
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
#include "sass_hazard.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif
#ifndef FAJIT_NVDISASM_DEFAULT
#define FAJIT_NVDISASM_DEFAULT ""
#endif

static char *g_ptxas, *g_nvdisasm, *g_dir;

/* The checker on fragments shaped like ptxas's output. */
static void test_checker(void **state)
{
    (void)state;
    char why[512];
    /* the session-24 kernel's shape: the loop's PV issues with P in R216..R219 and waits for S only (DEPBAR 1); at the
     * top of the next pass P(j) is packed into R216 before the DEPBAR 0 that lets the PV go (racy), or after it (the
     * fix) */
    static const char pack[] = "        /*0100*/                   F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R216, R153, R152, RZ ;\n",
                      wait0[] = "        /*0110*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n",
                      body[] = "        /*0120*/                   WARPGROUP.ARRIVE ;\n"
                               "        /*0130*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R152, gdesc[UR8], RZ, !UPT, gsb0 ;\n"
                               "        /*0140*/                   WARPGROUP.ARRIVE ;\n"
                               "        /*0150*/                   QGMMA.64x256x32.F32.E4M3.E4M3 R24, R216, gdesc[UR8], R24, gsb0 ;\n"
                               "        /*0160*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;\n"
                               "        /*0170*/               @P0 BRA `(.L_x_1) ;\n"
                               "        /*0180*/                   EXIT ;\n";
    char loop[2048];
    snprintf(loop, sizeof loop, ".L_x_1:\n%s%s%s", pack, wait0, body);
    assert_int_equal(fj_sass_wgmma_hazards(loop, why, sizeof why), 1);
    assert_non_null(strstr(why, "R216"));
    snprintf(loop, sizeof loop, ".L_x_1:\n%s%s%s", wait0, pack, body);
    assert_int_equal(fj_sass_wgmma_hazards(loop, why, sizeof why), 0);
    /* an accumulator (R24..R151 of a 64x256 F32 group) scaled before its wait; the same after the wait is fine; a
     * branch around the wait does not hide it */
    static const char acc[] = "        /*0100*/                   WARPGROUP.ARRIVE ;\n"
                              "        /*0110*/                   HGMMA.64x256x16.F32.BF16 R24, R4, gdesc[UR8], R24, gsb0 ;\n"
                              "        /*0120*/               @P1 BRA `(.L_x_2) ;\n"
                              "        /*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
                              ".L_x_2:\n"
                              "        /*0140*/                   FMUL R100, R100, R3 ;\n"
                              "        /*0150*/                   EXIT ;\n";
    assert_int_equal(fj_sass_wgmma_hazards(acc, why, sizeof why), 1);
    assert_non_null(strstr(why, "R100"));
    static const char acc_ok[] = "        /*0100*/                   WARPGROUP.ARRIVE ;\n"
                                 "        /*0110*/                   HGMMA.64x256x16.F32.BF16 R24, R4, gdesc[UR8], R24, gsb0 ;\n"
                                 "        /*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n"
                                 "        /*0140*/                   FMUL R100, R100, R3 ;\n"
                                 "        /*0150*/                   MOV R4, R5 ;\n"
                                 "        /*0160*/                   EXIT ;\n";
    assert_int_equal(fj_sass_wgmma_hazards(acc_ok, why, sizeof why), 0);
    assert_int_equal(fj_sass_wgmma_hazards("        /*0000*/                   EXIT ;\n", why, sizeof why), -1);
}

/* config (+ decode / varlen variant bits) -> PTX -> cubin -> SASS -> hazards (printed; -1 when a step failed). */
static int variant_hazards(const fajit_config *c, unsigned variant)
{
    char text[192], why[512] = "", cubin[4096], sass_path[4096];
    char *ptx = NULL, *log = NULL;
    size_t len = 0;
    fj_plan plan;
    if (fj_plan_build_variant(c, variant, &plan) != FAJIT_OK || fj_plan_format(&plan, text, sizeof text) < 0 ||
        fj_generate_ptx_plan(&plan, 0, &ptx, &len) != FAJIT_OK) {
        fajit_config_format(c, text, sizeof text);
        printf("FAIL %s variant 0x%x: plan / generate: %s\n", text, variant, fajit_errmsg());
        return -1;
    }
    fj_ptxas_report rep;
    int code = fj_test_ptxas(g_ptxas, g_dir, ptx, len, "sm_90a", &rep, &log);
    fajit_free(ptx);
    free(log);
    if (code != 0) {
        printf("FAIL %s: ptxas exit %d\n", text, code);
        return -1;
    }
    snprintf(cubin, sizeof cubin, "%s/k.cubin", g_dir);
    snprintf(sass_path, sizeof sass_path, "%s/k.sass", g_dir);
    char c_flag[] = "-c";
    char *argv[] = {g_nvdisasm, c_flag, cubin, NULL};
    if (fj_test_run(argv, sass_path, NULL) != 0) {
        printf("FAIL %s: nvdisasm\n", text);
        return -1;
    }
    char *sass = fj_test_read_file(sass_path, NULL);
    int h = sass ? fj_sass_wgmma_hazards(sass, why, sizeof why) : -1;
    free(sass);
    printf("%s %-64s %d hazards%s%s\n", h == 0 ? "ok  " : "FAIL", text, h, why[0] ? ": " : "", why);
    return h;
}

static int kernel_hazards(const fajit_config *c) { return variant_hazards(c, 0); }

static void need_tools(void)
{
    if (!g_ptxas || !g_nvdisasm) {
        printf("SKIP: %s not found (set FAJIT_PTXAS / FAJIT_NVDISASM, or pip install nvidia-cuda-nvdisasm)\n",
               !g_ptxas ? "ptxas" : "nvdisasm");
        skip();
    }
}

static void test_fp8_kernels(void **state)
{
    (void)state;
    need_tools();
    int bad = 0, n = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int causal = 0; causal < 2; causal++)
            for (int roll = -1; roll <= 1; roll += 2) {
                fajit_shape shape = {4, 2048 / d, 2048 / d, 4096, 4096};
                fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal,
                                  .roll = roll};
                assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
                bad += kernel_hazards(&c) != 0, n++;
            }
    /* the failing kernel of session 24 (D256 overlap without ping-pong, rolled) and its ping-pong twin */
    for (int pp = -1; pp <= 1; pp += 2) {
        fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 256, .block_m = 128,
                          .block_n = 128, .stages = 2, .swizzle = 128, .warps = 12, .overlap = 1, .pingpong = pp,
                          .roll = 1};
        bad += kernel_hazards(&c) != 0, n++;
    }
    printf("%d FP8 kernels, %d with hazards or failed\n", n, bad);
    assert_int_equal(bad, 0);
}

static void test_16bit_kernels(void **state)
{
    (void)state;
    need_tools();
    static const int dims[] = {64, 96, 128, 192, 256};
    int bad = 0, n = 0;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            fajit_shape shape = {4, 2048 / dims[i], 2048 / dims[i], 4096, 4096};
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = i % 2 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16,
                              .head_dim = dims[i], .causal = causal};
            assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
            bad += kernel_hazards(&c) != 0, n++;
        }
    printf("%d 16-bit sm_90a kernels, %d with hazards or failed\n", n, bad);
    assert_int_equal(bad, 0);
}

/* The attention variants (rolled for 16-bit kernels), a varlen batch and the sm_90a decode variants (split + GQA
 * packing, seqlens + paged), 16-bit and FP8, at head dim 128 (and FP8's D256 with a window: its early P pack). */
static void test_variant_kernels(void **state)
{
    (void)state;
    need_tools();
    static const struct {
        fajit_dtype dtype;
        int d, causal, mods;
        unsigned variant;
    } k[] = {
        {FAJIT_DTYPE_BF16, 128, 1, FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP, 0},
        {FAJIT_DTYPE_BF16, 128, 1, FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, 0},
        {FAJIT_DTYPE_F16, 128, 0, FAJIT_MOD_ALIBI, 0},
        {FAJIT_DTYPE_BF16, 128, 1, FAJIT_MOD_CHUNK, 0},
        {FAJIT_DTYPE_BF16, 128, 1, 0, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K},
        {FAJIT_DTYPE_BF16, 128, 0, 0, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK},
        {FAJIT_DTYPE_BF16, 128, 1, 0, FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED},
        {FAJIT_DTYPE_E4M3, 128, 1, FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, 0},
        {FAJIT_DTYPE_E4M3, 256, 1, FAJIT_MOD_WINDOW, 0},
        {FAJIT_DTYPE_E4M3, 128, 0, 0, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK},
        {FAJIT_DTYPE_E4M3, 128, 1, 0, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        fajit_shape shape = {4, 16, 16, 4096, 4096};
        fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = k[i].dtype, .head_dim = k[i].d, .causal = k[i].causal,
                          .mods = k[i].mods};
        assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
        bad += variant_hazards(&c, k[i].variant) != 0;
    }
    printf("%zu variant kernels, %d with hazards or failed\n", sizeof k / sizeof k[0], bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    g_nvdisasm =
        fj_test_find_tool("FAJIT_NVDISASM", "nvdisasm", FAJIT_NVDISASM_DEFAULT, "/usr/local/cuda/bin/nvdisasm", NULL);
    g_dir = fj_test_make_temp_dir("fajit_sass_hazard");
    assert_non_null(g_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker),
        cmocka_unit_test(test_fp8_kernels),
        cmocka_unit_test(test_16bit_kernels),
        cmocka_unit_test(test_variant_kernels),
    };
    int rc = cmocka_run_group_tests_name("sass_hazard", tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    free(g_dir);
    free(g_ptxas);
    free(g_nvdisasm);
    return rc;
}
