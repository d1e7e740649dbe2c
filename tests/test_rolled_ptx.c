/*
 * test_rolled_ptx.c - the rolled sm_90a consumer loop (config roll = 1, plan.roll_stages; issue 23's faster cold
 * compile): for
 * sm_90a configs of both schedules (overlap, serial), 2-4 stages, head dims 64 / 128 / 256, causal or not, the
 * decode, varlen and paged variants and the attention variants, the PTX with the loop rolled assembles with
 * ptxas for sm_90a without spills or stack, keeps setmaxnreg (two USETMAXREG in the SASS when nvdisasm is
 * there), and is shorter than the unrolled PTX (roll -1). Needs ptxas (skips without it). Numerics of the rolled
 * kernels: fagen check --arch sm_90a --roll on on a GPU.
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
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif

typedef struct rolled_case {
    int head_dim, block_m, block_n, stages, overlap, pingpong, causal, mods;
    unsigned variant;
} rolled_case;

static const rolled_case k_cases[] = {
    {128, 128, 128, 2, 1, 1, 0, 0, 0}, /* the D128 default */
    {128, 128, 128, 2, 1, 1, 1, 0, 0},
    {128, 128, 128, 2, -1, -1, 0, 0, 0}, /* serial schedule */
    {64, 192, 128, 2, 1, 1, 1, 0, 0},
    {256, 128, 80, 2, 1, -1, 0, 0, 0},
    {128, 128, 64, 3, 1, 1, 1, 0, 0},
    {64, 64, 112, 4, 1, -1, 0, 0, 0},   /* one consumer warpgroup: nvJitLink's path, no setmaxnreg */
    {64, 64, 64, 3, -1, -1, 1, 0, 0},
    {128, 128, 128, 2, 1, 1, 1, FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP | FAJIT_MOD_SINKS, 0},
    {128, 128, 128, 2, 1, 1, 0, 0, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT},
    {128, 128, 128, 2, 1, 1, 1, 0, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K},
    {128, 128, 128, 2, 1, 1, 0, 0, FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS},
};

static char *g_ptxas, *g_nvdisasm, *g_dir;

static int count_lines(const char *s, size_t n)
{
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
    return lines;
}

static void case_text(const rolled_case *c, char *buf, size_t size)
{
    snprintf(buf, size, "d%d br%d bc%d s%d ov%d pp%d causal%d mods%d variant%u", c->head_dim, c->block_m, c->block_n,
             c->stages, c->overlap, c->pingpong, c->causal, c->mods, c->variant);
}

/* Assemble ptx for sm_90a; the number of USETMAXREG in its SASS (-1 without nvdisasm). */
static int assemble(const char *what, const char *ptx, size_t len)
{
    char path[4096], cubin[4096], log[4096], sass[4096];
    snprintf(path, sizeof path, "%s/k.ptx", g_dir);
    snprintf(cubin, sizeof cubin, "%s/k.cubin", g_dir);
    snprintf(log, sizeof log, "%s/k.log", g_dir);
    snprintf(sass, sizeof sass, "%s/k.sass", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(ptx, 1, len, f), len);
    fclose(f);
    char *argv[] = {g_ptxas, "-arch=sm_90a", "-v", path, "-o", cubin, NULL};
    int code = fj_test_run(argv, log, log);
    char *text = fj_test_read_file(log, NULL);
    fj_ptxas_report rep = fj_test_ptxas_log(text);
    if (code != 0 || rep.bad || rep.entries == 0) print_error("%s: ptxas exit %d:\n%s\n", what, code, text ? text : "");
    free(text);
    assert_int_equal(code, 0);
    assert_false(rep.bad);
    if (!g_nvdisasm) return -1;
    char *dis[] = {g_nvdisasm, "-c", cubin, NULL};
    assert_int_equal(fj_test_run(dis, sass, NULL), 0);
    char *s = fj_test_read_file(sass, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, "USETMAXREG")); p++) n++;
    free(s);
    return n;
}

static void test_rolled_assembles(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const rolled_case *c = &k_cases[i];
        char what[160];
        case_text(c, what, sizeof what);
        fajit_config cfg;
        memset(&cfg, 0, sizeof cfg); /* fields appended later: 0 */
        cfg.arch = FAJIT_ARCH_SM90A, cfg.dtype = FAJIT_DTYPE_BF16, cfg.head_dim = c->head_dim;
        cfg.block_m = c->block_m, cfg.block_n = c->block_n, cfg.stages = c->stages, cfg.swizzle = 128;
        cfg.warps = 4 * (c->block_m / 64 + 1), cfg.causal = c->causal, cfg.col_warps = 1;
        cfg.overlap = c->overlap, cfg.pingpong = c->pingpong, cfg.mods = c->mods;
        cfg.roll = -1; /* unrolled whatever FJ_SM90_ROLL_DEFAULT says */
        fj_plan plan;
        fajit_status st = fj_plan_build_variant(&cfg, c->variant, &plan);
        if (st != FAJIT_OK) print_error("%s: %s\n", what, fajit_errmsg());
        assert_int_equal(st, FAJIT_OK);
        assert_int_equal(plan.roll_stages, 0);
        char *unrolled = NULL, *rolled = NULL;
        size_t n_unrolled = 0, n_rolled = 0;
        assert_int_equal(fj_generate_ptx_plan(&plan, 0, &unrolled, &n_unrolled), FAJIT_OK);
        cfg.roll = 1;
        assert_int_equal(fj_plan_build_variant(&cfg, c->variant, &plan), FAJIT_OK);
        assert_int_equal(plan.roll_stages, 1);
        assert_int_equal(fj_generate_ptx_plan(&plan, 0, &rolled, &n_rolled), FAJIT_OK);
        assert_non_null(strstr(rolled, " roll ")); /* the header's canonical text says so */
        int lu = count_lines(unrolled, n_unrolled), lr = count_lines(rolled, n_rolled);
        int usetmaxreg = assemble(what, rolled, n_rolled);
        print_message("%-60s PTX %5d -> %5d lines%s\n", what, lu, lr,
                      usetmaxreg >= 0 ? (usetmaxreg == 2 ? ", setmaxnreg kept" : "") : "");
        assert_true(lr * 4 < lu * 3); /* at least a quarter shorter */
        if (usetmaxreg >= 0) assert_int_equal(usetmaxreg, plan.whole_program ? 2 : 0);
        free(unrolled);
        free(rolled);
    }
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", (char *)NULL);
    if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
    g_nvdisasm = fj_test_find_tool("FAJIT_NVDISASM", "nvdisasm", "/usr/local/cuda/bin/nvdisasm", (char *)NULL);
    g_dir = fj_test_make_temp_dir("fajit-rolled");
    if (!g_dir) fj_test_skip_all("no temporary directory");
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rolled_assembles)};
    int rc = cmocka_run_group_tests_name("rolled_ptx", tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    free(g_dir);
    free(g_ptxas);
    free(g_nvdisasm);
    return rc;
}
