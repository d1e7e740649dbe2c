/*
 * test_sm100_ptxas.c - the sm_100a kernels through ptxas -arch=sm_100a and nvdisasm (label ptxas; no GPU): every
 * default (head dim 64, 96, 128, 192, 256; causal or not; bf16 and f16; one query tile, and up to D128 two in flight:
 * pingpong) and a small tile grid (block_n 32-128, 2-4
 * stages) and the software exp2 shares 0-4 of 8 assemble with no spill, no stack and no warning; in the SASS of each
 * default: the tensor-core MMA
 * (UTCHMMA), its commit (UTCBAR), tensor memory loads and stores (LDTM, STTM), TMA loads (UTMALDG), setmaxnreg
 * (USETMAXREG), and no local memory (LDL / STL). Nothing here runs on a GPU: no sm_100a kernel has.
 * ptxas from $FAJIT_PTXAS or CMake's (absent: the test skips); nvdisasm from $FAJIT_NVDISASM, CMake's or the pip wheel
 * nvidia-cuda-nvdisasm (absent: the SASS checks skip with the reason).
 *   ctest --test-dir build -R test_sm100_ptxas --output-on-failure
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

static char *g_ptxas, *g_nvdisasm, *g_dir;

static int count(const char *text, const char *op)
{
    int n = 0;
    size_t l = strlen(op);
    for (const char *s = strstr(text, op); s; s = strstr(s + l, op))
        if (s[l] == ' ' || s[l] == '.') n++;
    return n;
}

/* Assemble cfg (soft_exp2 >= 0: with that share of software exponentials instead of the plan's); with sass,
 * disassemble and check the instructions. */
static void check_share(fajit_config c, int sass, int soft_exp2)
{
    fj_config_heuristic(&c, &c, NULL, 0);
    char what[200], ptx[512], cubin[512], log[512], dis[512];
    fajit_config_format(&c, what, sizeof what);
    char *text = NULL;
    size_t len;
    fj_plan pl;
    if (fj_plan_build(&c, &pl) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    if (soft_exp2 >= 0) pl.soft_exp2 = soft_exp2;
    snprintf(what + strlen(what), sizeof what - strlen(what), " soft exp2 %d/8", pl.soft_exp2);
    if (fj_generate_ptx_plan(&pl, 0, &text, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    snprintf(ptx, sizeof ptx, "%s/k.ptx", g_dir);
    snprintf(cubin, sizeof cubin, "%s/k.cubin", g_dir);
    snprintf(log, sizeof log, "%s/k.log", g_dir);
    snprintf(dis, sizeof dis, "%s/k.sass", g_dir);
    FILE *f = fopen(ptx, "w");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
    fajit_free(text);
    char *argv[] = {g_ptxas, "-arch=sm_100a", "-v", "-o", cubin, ptx, NULL};
    int rc = fj_test_run(argv, log, log);
    char *out = fj_test_read_file(log, NULL);
    fj_ptxas_report r = fj_test_ptxas_log(out ? out : "");
    if (rc != 0 || r.bad || r.entries != 1) fail_msg("%s: ptxas rc %d:\n%s", what, rc, out ? out : "");
    free(out);
    if (!sass) return;
    char *dargv[] = {g_nvdisasm, cubin, NULL};
    assert_int_equal(fj_test_run(dargv, dis, NULL), 0);
    char *s = fj_test_read_file(dis, NULL);
    assert_non_null(s);
    /* S = QK^T: head_dim / 16 MMAs, O += PV: block_n / 16, written up to three times (S(0), S(1), S(j + 2)) */
    int mma = count(s, "UTCHMMA"), bar = count(s, "UTCBAR"), ldtm = count(s, "LDTM"), sttm = count(s, "STTM");
    int tma = count(s, "UTMALDG"), regs = count(s, "USETMAXREG"), local = count(s, "LDL") + count(s, "STL");
    if (mma < c.head_dim / 16 + c.block_n / 16 || bar < 4 || ldtm < 2 || sttm < 2 || tma < 3 || regs < 2 || local)
        fail_msg("%s: SASS has UTCHMMA %d, UTCBAR %d, LDTM %d, STTM %d, UTMALDG %d, USETMAXREG %d, LDL/STL %d", what,
                 mma, bar, ldtm, sttm, tma, regs, local);
    /* the softmax row's exponentials on the MUFU: block_n less the software share, + the rescale factor's (and
     * nothing else: the epilogue's lg2 / rcp are other MUFU ops) */
    int ex2 = count(s, "MUFU.EX2"), want = c.block_n - c.block_n * pl.soft_exp2 / 8 + 1;
    if (ex2 != want) fail_msg("%s: SASS has %d MUFU.EX2, expected %d (soft exp2 %d of 8)", what, ex2, want, pl.soft_exp2);
    if (getenv("FAJIT_TEST_VERBOSE"))
        printf("%-60s UTCHMMA %3d UTCBAR %2d LDTM %2d STTM %2d UTMALDG %2d, %d registers\n", what, mma, bar, ldtm,
               sttm, tma, r.registers);
    free(s);
}

static void check(fajit_config c, int sass) { check_share(c, sass, -1); }

static void test_defaults(void **state)
{
    (void)state;
    if (!g_nvdisasm)
        printf("SKIP: SASS checks: nvdisasm not found (set FAJIT_NVDISASM, or pip install nvidia-cuda-nvdisasm)\n");
    const int dims[5] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++)
        for (int causal = 0; causal < 2; causal++)
            for (int dt = 0; dt < 2; dt++)
                for (int pp = 0; pp < 1 + (dims[i] <= 128); pp++) /* two query tiles: the head dims that fit */
                    check((fajit_config){.arch = FAJIT_ARCH_SM100A, .head_dim = dims[i], .causal = causal,
                                         .dtype = dt ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, .pingpong = pp ? 1 : -1},
                          g_nvdisasm != NULL);
}

static void test_grid(void **state)
{
    (void)state;
    const int dims[3] = {64, 128, 256}, bns[3] = {32, 64, 128};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 3; b++)
            for (int s = 2; s <= 4; s++) {
                fajit_config c = {.arch = FAJIT_ARCH_SM100A, .dtype = FAJIT_DTYPE_BF16, .head_dim = dims[i],
                                  .block_n = bns[b], .stages = s, .causal = (b + s) % 2, .pingpong = s == 3 ? 1 : -1};
                fj_plan p;
                fajit_config f = c;
                fj_config_heuristic(&f, &c, NULL, 0);
                if (fj_plan_build(&f, &p) != FAJIT_OK) continue; /* tensor memory or smem: refused with the reason */
                check(c, 0);
            }
}

/* Software exp2 (plan.soft_exp2, soft_exp2.h) in the softmax role: every share 0-4 of 8 assembles with no spill at
 * head dims 64, 128, 256; the SASS has the MUFU.EX2 count that share leaves (with nvdisasm). */
static void test_soft_exp2(void **state)
{
    (void)state;
    const int dims[3] = {64, 128, 256};
    for (int i = 0; i < 3; i++)
        for (int share = 0; share <= 4; share++)
            check_share((fajit_config){.arch = FAJIT_ARCH_SM100A, .dtype = FAJIT_DTYPE_BF16, .head_dim = dims[i],
                                       .causal = share % 2},
                        g_nvdisasm != NULL, share);
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
    g_nvdisasm =
        fj_test_find_tool("FAJIT_NVDISASM", "nvdisasm", FAJIT_NVDISASM_DEFAULT, "/usr/local/cuda/bin/nvdisasm", NULL);
    g_dir = fj_test_make_temp_dir("fj_sm100_");
    if (!g_dir) fj_test_skip_all("no temporary directory");
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_defaults), cmocka_unit_test(test_grid),
                                       cmocka_unit_test(test_soft_exp2)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    return rc;
}
