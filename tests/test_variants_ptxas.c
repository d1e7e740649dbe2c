/*
 * test_variants_ptxas.c - the attention variants (fajit_config.mods: window, softcap, sinks, ALiBi, chunk and
 * their combinations) assemble with ptxas -v on both paths with no spill, no stack use and no warning: the sm_80
 * kernel for sm_90 and sm_80, the sm_90a (warp-specialized) kernel for sm_90a, over the heuristic's tile for every
 * head dim (64, 96, 128, 192, 256; both dtypes), and their decode variants (seqlens + split, + GQA packing, paged).
 * Structure: a variant kernel reads its fj_fwd_params_mods fields at plan.mods_off; a plain kernel reads none.
 * label ptxas; skips without ptxas. Run: ctest --test-dir build -R test_variants_ptxas --output-on-failure
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

/* Assemble ptx for arch with -v: 1 when it assembled with no spill, no stack and no warning (printed). */
static int assembles_clean(const char *ptx, size_t len, const char *arch, const char *what)
{
    fj_ptxas_report rep;
    char *text;
    int code = fj_test_ptxas(g_ptxas, g_dir, ptx, len, arch, &rep, &text);
    int ok = code == 0 && text && rep.entries > 0 && !rep.bad && !rep.warned;
    printf("%s %s on %s: %d registers, spill %d, stack %d\n", ok ? "ok  " : "FAIL", what, arch, rep.registers,
           rep.spill, rep.stack);
    if (!ok) printf("%s\n", text ? text : "(no log)");
    free(text);
    return ok;
}

static const int k_mods[] = {
    FAJIT_MOD_WINDOW, FAJIT_MOD_SOFTCAP, FAJIT_MOD_SINKS, FAJIT_MOD_ALIBI, FAJIT_MOD_CHUNK,
    FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP, FAJIT_MOD_ALL,
};
static const int k_dims[] = {64, 96, 128, 192, 256};

/* Generate the plan's PTX and assemble it for each target; 1 when every one is clean. */
static int check_plan(const fj_plan *p, const char *const *targets, int n_targets)
{
    char *ptx = NULL, text[192];
    size_t len = 0;
    fj_plan_format(p, text, sizeof text);
    if (fj_generate_ptx_plan(p, 0, &ptx, &len) != FAJIT_OK) {
        printf("FAIL %s: generate: %s\n", text, fajit_errmsg());
        return 0;
    }
    int ok = 1;
    /* the variant block is read where kernel_abi.h puts it */
    char needle[64];
    snprintf(needle, sizeof needle, "[" FJ_FWD_PARAM_NAME "+%d]", p->mods_off + (p->cfg.mods & FAJIT_MOD_SINKS
                                                                                     ? (int)offsetof(fj_fwd_params_mods, sinks)
                                                                                     : p->cfg.mods & FAJIT_MOD_SOFTCAP
                                                                                     ? (int)offsetof(fj_fwd_params_mods, cap_scale)
                                                                                     : (int)offsetof(fj_fwd_params_mods, win_left)));
    if (p->cfg.mods && !(p->cfg.mods == FAJIT_MOD_ALIBI) && !strstr(ptx, needle)) {
        printf("FAIL %s: no ld.param at %s\n", text, needle);
        ok = 0;
    }
    for (int t = 0; t < n_targets; t++) ok &= assembles_clean(ptx, len, targets[t], text);
    free(ptx);
    return ok;
}

static void test_prefill_variants(void **state)
{
    (void)state;
    static const char *const t80[] = {"sm_90", "sm_80"}, *const t90[] = {"sm_90a"};
    int failures = 0, n = 0;
    fajit_shape shape = {1, 16, 16, 4096, 4096};
    for (int path = 0; path < 2; path++)
        for (size_t d = 0; d < sizeof k_dims / sizeof k_dims[0]; d++)
            for (size_t m = 0; m < sizeof k_mods / sizeof k_mods[0]; m++) {
                fajit_config c = {.arch = path ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80,
                                  .dtype = (d + m) % 2 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, .head_dim = k_dims[d],
                                  .causal = (int)(m % 2), .mods = k_mods[m]};
                const fajit_config given = c; /* what fajit_config_fill passes: the fields the caller set */
                fj_config_heuristic(&c, &given, &shape, 0);
                fj_plan p;
                if (fj_plan_build(&c, &p) != FAJIT_OK) {
                    printf("FAIL plan: %s\n", fajit_errmsg());
                    failures++;
                    continue;
                }
                /* sm_80 PTX on sm_80 for every variant set (as the runtime compiles it for an A100: softcap's early
                 * max spilled 128-328 bytes there, in both dtypes, and not on sm_90), but for the edge configs, which
                 * need sm_90 (plan.c) */
                int nt = path ? 1 : (!p.min_target_sm ? 2 : 1);
                failures += !check_plan(&p, path ? t90 : t80, nt);
                n++;
            }
    printf("%d variant kernels, %d failed\n", n, failures);
    assert_int_equal(failures, 0);
}

/* The decode variants with window + sinks (gpt-oss decode) and softcap + ALiBi: the tile the runtime would take
 * (decode.c: block_n lowered until the variant plans). */
static void test_decode_variants(void **state)
{
    (void)state;
    static const char *const t80[] = {"sm_90"}, *const t90[] = {"sm_90a"};
    static const unsigned k_dec[] = {FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                     FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED};
    static const int k_dmods[] = {FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI};
    int failures = 0;
    fajit_shape shape = {1, 8, 1, 16, 65536};
    for (int path = 0; path < 2; path++)
        for (int d = 64; d <= 256; d *= 2)
            for (size_t v = 0; v < 3; v++)
                for (size_t m = 0; m < 2; m++) {
                    fajit_config c = {.arch = path ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16,
                                      .head_dim = d, .causal = 1, .mods = k_dmods[m], .block_m = path ? 0 : 64};
                    const fajit_config given = c;
                    fj_config_heuristic(&c, &given, &shape, 0);
                    fj_plan p;
                    while (c.block_n >= 16 && fj_plan_build_variant(&c, k_dec[v], &p) != FAJIT_OK) c.block_n -= 16;
                    if (c.block_n < 16) {
                        printf("FAIL d%d variant 0x%x mods %d: no tile plans (%s)\n", d, k_dec[v], k_dmods[m],
                               fajit_errmsg());
                        failures++;
                        continue;
                    }
                    failures += !check_plan(&p, path ? t90 : t80, 1);
                }
    assert_int_equal(failures, 0);
}

/* A plain kernel has no variant block and reads nothing past its own parameters. */
static void test_plain_untouched(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fj_config_heuristic(&c, &c, NULL, 0);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.mods_off, 0);
    assert_int_equal(p.params_bytes, (int)sizeof(fj_fwd_params));
    c.mods = FAJIT_MOD_SINKS;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.mods_off, (int)sizeof(fj_fwd_params));
    assert_int_equal(p.params_bytes, (int)(sizeof(fj_fwd_params) + sizeof(fj_fwd_params_mods)));
}

int main(void)
{
    g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
    g_dir = fj_test_make_temp_dir("fajit_variants_ptx");
    assert_non_null(g_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_untouched),
        cmocka_unit_test(test_prefill_variants),
        cmocka_unit_test(test_decode_variants),
    };
    int rc = cmocka_run_group_tests_name("variants_ptxas", tests, NULL, NULL);
    fj_test_remove_dir(g_dir);
    free(g_dir);
    free(g_ptxas);
    return rc;
}
