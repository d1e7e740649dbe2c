/*
 * test_kv8_frag_ptx.c - the kv8direct kernels' shared-memory addresses as emitted (no GPU): the PTX of FP8 K/V decode
 * configs with decode variant kv8direct runs through ptx_sim's interpreter for every thread of one CTA over 2 x stages
 * + 1 KV tiles (the last one partial); each cp.async must put K / V row r, chunk c of tile j at stage j % stages, row
 * r % block_n, chunk fj_kv8d_chunk(d, r, c), and each ldmatrix must address, lane by lane, the rows and chunks
 * kv8_frag.h's lane patterns give (K: the warp's keys, chunk pairs in order; V: its own keys then the partner's, its
 * head dims) - the layout test_kv8_frag.c proves to give exact S and O.
 * Run: ctest --test-dir build -R test_kv8_frag_ptx
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kv8_frag.h"
#include "ptx_sim.h"

typedef struct frag_tile {
    int d, block_m, block_n, stages, warps, col_warps;
} frag_tile;

static const frag_tile k_tiles[] = {
    {128, 16, 32, 4, 2, 2}, {128, 16, 64, 3, 1, 1}, {128, 64, 64, 4, 4, 1},
    {64, 16, 32, 4, 2, 2},  {256, 16, 32, 2, 2, 2}, {64, 64, 64, 2, 4, 1},
};

static uint64_t tile_addr(const fj_plan *pl, int stage, int which, int row, int chunk)
{
    int d = pl->cfg.head_dim, bn = pl->cfg.block_n;
    return (uint64_t)(pl->kv8_off + (2 * stage + which) * bn * d + row * d + fj_kv8d_chunk(d, row, chunk) * 16);
}

static void run_tile(const frag_tile *tc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_F16, .kv_dtype = FAJIT_DTYPE_E4M3,
                        .head_dim = tc->d, .block_m = tc->block_m, .block_n = tc->block_n, .stages = tc->stages,
                        .warps = tc->warps, .col_warps = tc->col_warps,
                        .swizzle = tc->d == 64 && tc->col_warps == 2 ? 64 : 128};
    fj_plan pl;
    char what[200];
    if (fj_plan_build_variant(&cfg, FJ_VARIANT_KV8_DIRECT, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);
    int d = tc->d, bn = tc->block_n, n_kv = 2 * tc->stages + 1, nk = n_kv * bn - 5, pairs = tc->col_warps == 2;
    world *wd = calloc(1, sizeof *wd);
    assert_non_null(wd);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_F16, a.kv_dtype = FAJIT_DTYPE_E4M3, a.batch = 1, a.heads_q = 1, a.heads_kv = 1;
    a.head_dim = d, a.seqlen_q = 1, a.seqlen_k = nk;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    fajit_args_set_bhnd_strides(&a);
    wd->batch = 1, wd->hkv = 1, wd->group = 1, wd->splits = 1, wd->dim = d, wd->cta_b = 0;
    fj_forward_params(&a, &pl, &wd->prm.base);
    wd->prm.splits = 1, wd->prm.batch = 1;
    wd->cap = 1 << 16;
    uint64_t *ld = calloc((size_t)wd->cap, 8), *cs = calloc((size_t)wd->cap, 8), *cg = calloc((size_t)wd->cap, 8);
    wd->k_reads = calloc((size_t)wd->cap, 8), wd->v_reads = calloc((size_t)wd->cap, 8);
    assert_true(ld && cs && cg && wd->k_reads && wd->v_reads);
    wd->smem_ld = ld, wd->smem_cp = cs, wd->gmem_cp = cg;
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1), .nctaid_x = 1};
    assert_true(t.val && t.known);
    int copies = 0, lds = 0, own = pl.k_steps_pv / pl.col_warps;
    for (unsigned tid = 0; tid < (unsigned)pl.threads; tid++) {
        wd->n_ld = wd->n_cp = wd->n_gcp = wd->n_k = wd->n_v = 0;
        t.tid = tid;
        if (!run_thread(&p, &t, wd)) fail_msg("%s: thread %u: %s", what, tid, wd->why);
        for (int i = 0; i < wd->n_cp; i++) { /* global K / V [row][d] bytes -> the ring (Q's copies left out) */
            if (cg[i] < BASE_K) continue;
            copies++;
            int which = cg[i] >= BASE_V, off = (int)(cg[i] - (which ? BASE_V : BASE_K)), row = off / d;
            uint64_t want = tile_addr(&pl, row / bn % tc->stages, which, row % bn, off % d / 16);
            if (row >= nk || cs[i] != want)
                fail_msg("%s: thread %u: cp.async of %s row %d chunk %d to %llu, want %llu", what, tid, which ? "V" : "K",
                         row, off % d / 16, (unsigned long long)cs[i], (unsigned long long)want);
        }
        int lane = (int)tid % 32, h = pairs ? (int)tid / 32 % 2 : 0, i = 0;
        for (int j = 0; j < (nk + bn - 1) / bn; j++) {
            int s = j % tc->stages, kr, kcb, vr, vcb;
            fj_kv8d_k_lane(lane, &kr, &kcb);
            fj_kv8d_v_lane(lane, &vr, &vcb);
            for (int kp = 0; kp < d / 32; kp++)
                for (int np = 0; np < pl.n_frags_s / 2; np++, i++) {
                    uint64_t want = tile_addr(&pl, s, 0, h * bn / 2 + 16 * np + kr, 2 * kp + kcb);
                    if (i >= wd->n_ld || ld[i] != want)
                        fail_msg("%s: thread %u tile %d: K ldmatrix %d (keys %d.., chunk %d) at %llu, want %llu", what, tid,
                                 j, i, h * bn / 2 + 16 * np, 2 * kp, i < wd->n_ld ? (unsigned long long)ld[i] : 0ull,
                                 (unsigned long long)want);
                }
            for (int ks = 0; ks < pl.k_steps_pv; ks++)
                for (int cp = 0; cp < pl.n_frags_o / 4; cp++, i++) {
                    int kh = ks < own ? h : 1 - h, row = kh * bn / 2 * pairs + 16 * (ks % own) + vr;
                    uint64_t want = tile_addr(&pl, s, 1, row, h * d / 32 * pairs + 2 * cp + vcb);
                    if (i >= wd->n_ld || ld[i] != want)
                        fail_msg("%s: thread %u tile %d: V ldmatrix %d (k-step %d, chunk %d) at %llu, want %llu", what, tid,
                                 j, i, ks, 2 * cp, i < wd->n_ld ? (unsigned long long)ld[i] : 0ull,
                                 (unsigned long long)want);
                }
        }
        if (wd->n_ld != i) fail_msg("%s: thread %u: %d ldmatrix, want %d", what, tid, wd->n_ld, i);
        lds += i;
    }
    int want_copies = 2 * nk * d / 16; /* every 16-byte chunk of K and V once */
    if (copies != want_copies) fail_msg("%s: %d copies, want %d", what, copies, want_copies);
    printf("%s: %d cp.async and %d ldmatrix addresses as kv8_frag.h says (%d KV tiles, Nk %d)\n", what, copies, lds, n_kv,
           nk);
    free(ld), free(cs), free(cg), free(wd->k_reads), free(wd->v_reads), free(t.val), free(t.known), free(wd), free(p.v);
}

static void test_addresses(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_tiles / sizeof k_tiles[0]; i++) run_tile(&k_tiles[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_addresses)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
