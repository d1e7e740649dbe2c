/*
 * test_fp8_ptx.c - the FP8 kernel's V transpose as emitted (no GPU): the PTX of sm_90a e4m3 configs runs through
 * ptx_sim's interpreter for every thread of the transposing producer warps (1-3) of one CTA over a work tile of
 * several KV tiles; each ldmatrix / stmatrix address must be the one codegen/fp8_layout.c's layout gives (proved by
 * test_fp8_layout.c to make P V exact): V(stage s) row 16 kg + fj_fp8_ld_key(lane) at head-dim byte 32 dg +
 * fj_fp8_ld_col(lane), Vt(stage s) row 32 dg + fj_fp8_st_dim(lane) at key byte 16 kg, both swizzled as TMA / wgmma
 * store them (fj_fp8_swizzled), block b = (kg, dg) by warp b % 3, stages in ring order. Also: every config assembles
 * its plan's registers and smem as the plan says (ptxas is the ptxas label's job).
 * Run: ctest --test-dir build -R test_fp8_ptx
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/fp8_layout.h"
#include "ptx_sim.h"

typedef struct fp8_tile {
    int d, block_m, block_n, stages, swizzle, causal;
} fp8_tile;

static const fp8_tile k_tiles[] = {
    {128, 128, 128, 2, 128, 0}, /* the d128 default */
    {128, 128, 192, 2, 128, 1}, /* Vt in 64-byte boxes */
    {256, 128, 64, 2, 128, 0},  /* the d256 default: two V boxes a row */
    {256, 128, 96, 2, 128, 1},  /* Vt in 32-byte boxes */
    {64, 192, 128, 2, 64, 0},   /* the d64 default: 64-byte V rows */
    {64, 128, 160, 3, 64, 1},   /* three stages, Vt in 32-byte boxes */
};

static void run_tile(const fp8_tile *tc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = tc->d, .block_m = tc->block_m,
                        .block_n = tc->block_n, .stages = tc->stages, .swizzle = tc->swizzle,
                        .warps = 4 * (tc->block_m / 64 + 1), .col_warps = 1, .overlap = 1, .pingpong = 1,
                        .causal = tc->causal};
    fj_plan pl;
    char what[200];
    if (fj_plan_build(&cfg, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);
    /* one work tile (B1 H1, Nq = block_m) of 2 x stages + 1 KV tiles: every stage used, the ring wrapping */
    int n_kv = 2 * tc->stages + 1, nk = n_kv * tc->block_n, d = tc->d, bn = tc->block_n, w = tc->swizzle;
    world *wd = calloc(1, sizeof *wd);
    assert_non_null(wd);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_E4M3, a.batch = 1, a.heads_q = 1, a.heads_kv = 1, a.head_dim = d;
    a.seqlen_q = tc->causal ? nk : tc->block_m, a.seqlen_k = nk, a.causal = tc->causal;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    fajit_args_set_bhnd_strides(&a);
    wd->batch = 1, wd->hkv = 1, wd->group = 1, wd->splits = 1, wd->dim = d, wd->cta_b = -1;
    fj_forward_params(&a, &pl, &wd->prm.base);
    unsigned tiles = ws_setup(wd, &pl, &a);
    wd->cap = 1 << 16;
    uint64_t *ld = calloc((size_t)wd->cap, 8), *st = calloc((size_t)wd->cap, 8);
    assert_true(ld && st);
    wd->smem_ld = ld, wd->smem_st = st;
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1)};
    assert_true(t.val && t.known);
    /* causal: the CTA's one work tile is the last query block (all KV tiles); tiles beyond 1 belong to other CTAs */
    t.ctaid[0] = 0, t.ctaid[1] = t.ctaid[2] = 0, t.nctaid_x = tiles;
    int n_kg = bn / 16, n_blocks = n_kg * (d / 32), wv = pl.vt_swizzle, checked = 0;
    for (unsigned tid = 32; tid < 128; tid++) {
        wd->n_ld = wd->n_st = 0;
        t.tid = tid;
        if (!run_thread(&p, &t, wd)) fail_msg("%s: transposer thread %u: %s", what, tid, wd->why);
        int lane = (int)tid % 32, tw = (int)tid / 32 - 1, i = 0;
        for (int j = 0; j < n_kv; j++) {
            int s = j % tc->stages;
            for (int b = tw; b < n_blocks; b += 3, i++) {
                int kg = b % n_kg, dg = b / n_kg;
                uint64_t want_ld = (uint64_t)(pl.v_off + s * pl.kv_tile_bytes +
                                              fj_fp8_swizzled(16 * kg + fj_fp8_ld_key(lane), 32 * dg + fj_fp8_ld_col(lane),
                                                              bn, w));
                uint64_t want_st = (uint64_t)(pl.vt_off + s * pl.kv_tile_bytes +
                                              fj_fp8_swizzled(32 * dg + fj_fp8_st_dim(lane), 16 * kg, d, wv));
                if (i >= wd->n_ld || i >= wd->n_st)
                    fail_msg("%s: thread %u: %d ldmatrix / %d stmatrix, fewer than the %d blocks of its warp", what, tid,
                             wd->n_ld, wd->n_st, i + 1);
                if (ld[i] != want_ld || st[i] != want_st)
                    fail_msg("%s: thread %u, KV tile %d (stage %d), block %d (keys %d.., dims %d..): ldmatrix at %llu "
                             "(want %llu), stmatrix at %llu (want %llu)",
                             what, tid, j, s, b, 16 * kg, 32 * dg, (unsigned long long)ld[i],
                             (unsigned long long)want_ld, (unsigned long long)st[i], (unsigned long long)want_st);
                checked++;
            }
        }
        if (wd->n_ld != i || wd->n_st != i)
            fail_msg("%s: thread %u: %d ldmatrix / %d stmatrix, want %d", what, tid, wd->n_ld, wd->n_st, i);
    }
    printf("%s: %d transposer block addresses as fp8_layout.c says (%d KV tiles)\n", what, checked, n_kv);
    free(ld), free(st), free(t.val), free(t.known), free(wd);
    free(p.v);
}

/* The three-warp form (knob vt; D128's default now adds vt4, whose four-warp split this model does not describe). */
static void test_transpose_addresses(void **state)
{
    (void)state;
    setenv("FAJIT_FP8_KNOBS", "vt", 1);
    for (size_t i = 0; i < sizeof k_tiles / sizeof k_tiles[0]; i++) run_tile(&k_tiles[i]);
    unsetenv("FAJIT_FP8_KNOBS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_transpose_addresses)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
