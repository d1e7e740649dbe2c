/*
 * test_softcap_ptx.c - the shape of softcap's tile in the sm_90a consumers (softmax.c: fj_emit_softmax_split): the
 * overlapped schedule emits the tile twice, masked and unmasked, and the unmasked copy is one basic block (no branch,
 * no label between $L_cap_fast and $L_cap_done) holding the two capped row maxima and the scores' tanh.approx, the
 * warp's vote with the rows' rebase under its predicate, and one ex2.approx per score; so ptxas can queue the ex2
 * behind the last tanh on the MUFU (bench/results/softcap-sass-vs-fa3-2026-11-27.md). The serial schedule, sm_80,
 * softcap with ALiBi and kernels without softcap keep one copy (no $L_cap_fast). At D64 (plan.cap_poly) the unmasked
 * copy is preceded by the polynomial's (soft_tanh.h): a vote, a branch to the tanh.approx copy when it fails, then one
 * block without tanh.approx that jumps to $L_cap_done. PTX text only (no ptxas, no GPU);
 * numerics: fagen check --softcap on a GPU (bench/softcap_ab.sh).
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

typedef struct cap_case {
    int arch, head_dim, overlap, causal, mods; /* overlap -1: the serial schedule; 0: the heuristic's */
    int split;                                 /* 1: the unmasked copy is expected */
    int poly;                                  /* 1: the polynomial's copy before it (D64: sm90.c plan_cap_poly) */
} cap_case;

#define SM90 FAJIT_ARCH_SM90A
#define CAP FAJIT_MOD_SOFTCAP

/* The heuristic's tiles for issue 20's shape class (B2 N8k): D128 128 x 128 ping-pong, D256 128 x 80, D64 128 x 128. */
static const cap_case k_cases[] = {
    {SM90, 128, 0, 1, CAP, 1, 0}, {SM90, 128, 0, 0, CAP, 1, 0}, {SM90, 256, 0, 1, CAP, 1, 0},
    {SM90, 256, 0, 0, CAP, 1, 0}, {SM90, 64, 0, 1, CAP, 1, 1},  {SM90, 64, 0, 0, CAP, 1, 1},
    {SM90, 128, 0, 1, CAP | FAJIT_MOD_WINDOW, 1, 0}, {SM90, 64, 0, 1, CAP | FAJIT_MOD_WINDOW, 1, 1},
    {SM90, 128, -1, 1, CAP, 0, 0},              /* serial: the O rescale is not deferred */
    {SM90, 128, 0, 1, CAP | FAJIT_MOD_ALIBI, 0, 0}, /* no early max with ALiBi */
    {SM90, 128, 0, 1, 0, 0, 0},
    {FAJIT_ARCH_SM80, 128, 0, 1, CAP, 0, 0},
};

/* Occurrences of needle in [s, end). */
static int count_in(const char *s, const char *end, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = s; (p = strstr(p, needle)) && p + len <= end; p += len) n++;
    return n;
}

static char *generate(const cap_case *c, int *block_n)
{
    fajit_shape shape = {2, 16, 16, 8192, 8192};
    fajit_config cfg = {.arch = c->arch, .dtype = FAJIT_DTYPE_BF16, .head_dim = c->head_dim, .causal = c->causal,
                        .overlap = c->overlap, .mods = c->mods};
    const fajit_config given = cfg;
    fj_config_heuristic(&cfg, &given, &shape, 0);
    fj_plan plan;
    fajit_status st = fj_plan_build(&cfg, &plan);
    if (st != FAJIT_OK) print_error("d%d mods %d: %s\n", c->head_dim, c->mods, fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    char *ptx = NULL;
    size_t n = 0;
    assert_int_equal(fj_generate_ptx_plan(&plan, 0, &ptx, &n), FAJIT_OK);
    *block_n = cfg.block_n;
    return ptx;
}

static void test_softcap_unmasked_block(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const cap_case *c = &k_cases[i];
        int block_n = 0;
        char *ptx = generate(c, &block_n);
        const char *fast = strstr(ptx, "$L_cap_fast");
        print_message("arch %d d%d bc%d overlap %d causal %d mods %d: %s\n", c->arch, c->head_dim, block_n, c->overlap,
                      c->causal, c->mods, fast ? "two copies" : "one copy");
        if (!c->split) {
            assert_null(fast);
            free(ptx);
            continue;
        }
        assert_non_null(fast);
        /* the label itself: "$L_cap_fast_N:" at a line start; the block runs to "$L_cap_done_N:" */
        const char *body = strstr(ptx, "\n$L_cap_fast");
        assert_non_null(body);
        body = strchr(body + 1, '\n');
        assert_non_null(body);
        const char *end = strstr(body, "\n$L_cap_done");
        assert_non_null(end);
        int scores = block_n / 2; /* per thread: 64 rows x Bc over 128 threads */
        const char *mufu = strstr(body, "\n$L_cap_mufu");
        print_message("  softcap's polynomial tile first (plan.cap_poly): %s\n", mufu && mufu < end ? "yes" : "no");
        assert_int_equal(mufu && mufu < end, c->poly);
        if (c->poly) {
            /* the polynomial's copy: the vote, its branch to the tanh.approx copy, then one block to its jump to the
             * end: no tanh.approx, an ex2 a score and the rows' two rebase ex2 */
            assert_int_equal(count_in(body, mufu, "vote.sync.all.pred"), 1);
            assert_int_equal(count_in(body, mufu, "bra"), 2);
            assert_int_equal(count_in(body, mufu, "\n$"), 0);
            assert_int_equal(count_in(body, mufu, "tanh.approx.f32"), 0);
            assert_int_equal(count_in(body, mufu, "\tex2.approx.ftz.f32"), scores);
            assert_int_equal(count_in(body, mufu, " ex2.approx.ftz.f32"), 2);
            body = strchr(mufu + 1, '\n');
            assert_non_null(body);
        }
        assert_int_equal(count_in(body, end, "\n$"), 0);  /* no label inside */
        assert_int_equal(count_in(body, end, "bra"), 0);  /* no branch */
        assert_int_equal(count_in(body, end, "tanh.approx.f32"), scores + 2); /* + the two capped row maxima */
        assert_int_equal(count_in(body, end, "\tex2.approx.ftz.f32"), scores);
        assert_int_equal(count_in(body, end, "vote.sync.any.pred"), 1);
        /* the rows' rebase: each correction's ex2 under the vote's predicate */
        assert_int_equal(count_in(body, end, " ex2.approx.ftz.f32"), 2);
        assert_int_equal(count_in(body, end, "@"), 3 * 2); /* ex2, mov m, mul l a row */
        free(ptx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_softcap_unmasked_block)};
    return cmocka_run_group_tests_name("softcap_ptx", tests, NULL, NULL);
}
