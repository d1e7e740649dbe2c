/*
 * test_kv8_knobs.c - unit tests (no GPU) of the FP8 K/V decode knobs (src/runtime/kv8_knobs.c) and the heuristic's
 * FP8 K/V decode tile (codegen.h fj_config_kv8_decode_tile): every accepted value of FAJIT_KV8_WIDEN /
 * FAJIT_KV8_DIRECT and its variant bits and direct mode (unset -1: kv8direct where legal; 0 off; 1 forced), each
 * unknown value refused with INVALID_ARGUMENT naming the variable, the value and the accepted ones, FAJIT_KV8_TILE
 * refused whatever its value (the knob is gone); the heuristic's tile for the rows of the decode table (1, 4, 8 rows a
 * KV head at Nq 1) and its edges, fields the caller gave kept; those tiles plan with the decode variants a call takes
 * (seqlens + split + GQA packing, paged, with kv8direct at D 64/128/256), and the odd head dims with the widening.
 * Run: ctest --test-dir build -R test_kv8_knobs
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
#include "runtime/kv8_knobs.h"
#include "test_support.h"

static void test_parse_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *widen, *direct;
        unsigned variant;
        int direct_mode;
    } ok[] = {
        {NULL, NULL, 0, -1},
        {"", "", 0, -1},
        {"cvt", "0", 0, 0},
        {"int", NULL, FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V, -1},
        {"intk", "0", FJ_VARIANT_KV8_INT_K, 0},
        {"intv", "1", FJ_VARIANT_KV8_INT_V | FJ_VARIANT_KV8_DIRECT, 1},
        {NULL, "1", FJ_VARIANT_KV8_DIRECT, 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fj_kv8_knobs k;
        assert_int_equal(fj_kv8_knobs_parse(ok[i].widen, ok[i].direct, NULL, &k), FAJIT_OK);
        assert_int_equal(k.variant, ok[i].variant);
        assert_int_equal(k.direct, ok[i].direct_mode);
    }
    fj_kv8_knobs k;
    assert_int_equal(fj_kv8_knobs_parse(NULL, NULL, "", &k), FAJIT_OK); /* set but empty: unset */
}

static void test_parse_refused(void **state)
{
    (void)state;
    fj_kv8_knobs k;
    assert_true(fj_test_status_says(fj_kv8_knobs_parse("INT", NULL, NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_WIDEN", "'INT'", "intv"));
    assert_true(fj_test_status_says(fj_kv8_knobs_parse(NULL, "yes", NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_DIRECT", "'yes'", "use 0 ("));
    assert_true(fj_test_status_says(fj_kv8_knobs_parse("int", "2", NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_DIRECT", "'2'", "or unset"));
    const char *tiles[] = {"rows", "heuristic", "row"};
    for (int i = 0; i < 3; i++)
        assert_true(fj_test_status_says(fj_kv8_knobs_parse(NULL, "1", tiles[i], &k), FAJIT_ERR_INVALID_ARGUMENT,
                                        "FAJIT_KV8_TILE", tiles[i], "gone"));
}

/* The heuristic's config for an FP8 K/V call of shape (B1, hq, hkv, nq, 32k), from zero tile fields. */
static fajit_config decode_config(fajit_dtype dt, int d, int hq, int hkv, int nq)
{
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = dt, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = d};
    fajit_shape shape = {1, hq, hkv, nq, 32768};
    fj_config_heuristic(&c, &c, &shape, 0);
    return c;
}

/* Rows 1 .. 32 take br16 w2 cw2 / br32 w4 cw2 - at head dim 128 br16 with bc32 s4, else bc64 s3; more rows, or bf16
 * K/V, the table's tile. */
static void test_decode_tile(void **state)
{
    (void)state;
    static const struct {
        int d, hq, hkv, nq, block_m, warps, col_warps, block_n, stages;
    } want[] = {{128, 32, 32, 1, 16, 2, 2, 32, 4},  {128, 32, 8, 1, 16, 2, 2, 32, 4},  {128, 8, 1, 1, 16, 2, 2, 32, 4},
                {128, 8, 1, 2, 16, 2, 2, 32, 4},    {128, 32, 8, 4, 16, 2, 2, 32, 4},  {128, 8, 1, 3, 32, 4, 2, 64, 3},
                {128, 32, 1, 1, 32, 4, 2, 64, 3},   {128, 32, 8, 16, 64, 4, 1, 64, 4}, {128, 32, 32, 33, 64, 4, 1, 64, 4},
                {128, 32, 32, 16, 16, 2, 2, 32, 4}, {128, 32, 1, 200, 128, 4, 1, 64, 4}, {64, 32, 8, 1, 16, 2, 2, 64, 3},
                {256, 32, 8, 1, 16, 2, 2, 64, 3}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fajit_config c = decode_config(FAJIT_DTYPE_BF16, want[i].d, want[i].hq, want[i].hkv, want[i].nq);
        print_message("d%d H%d/%d Nq%d: br%d w%d cw%d bc%d s%d\n", want[i].d, want[i].hq, want[i].hkv, want[i].nq,
                      c.block_m, c.warps, c.col_warps, c.block_n, c.stages);
        assert_int_equal(c.block_m, want[i].block_m);
        assert_int_equal(c.warps, want[i].warps);
        assert_int_equal(c.col_warps, want[i].col_warps);
        assert_int_equal(c.stages, want[i].stages);
        assert_int_equal(c.block_n, want[i].block_n);
    }
    /* 16-bit K/V: the table's tile */
    fajit_config b = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fajit_shape shape = {1, 32, 8, 1, 32768};
    fj_config_heuristic(&b, &b, &shape, 0);
    assert_int_equal(b.block_m, 64);
    assert_int_equal(b.col_warps, 1);
    /* the caller's rows or warps: the table's fill around them; block_n / stages given: kept */
    fajit_config g = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3,
                      .head_dim = 128, .warps = 4};
    fj_config_heuristic(&g, &g, &shape, 0);
    assert_int_equal(g.block_m, 64);
    fajit_config n = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3,
                      .head_dim = 128, .block_n = 128, .stages = 2};
    fj_config_heuristic(&n, &n, &shape, 0);
    assert_int_equal(n.block_m, 16);
    assert_int_equal(n.block_n, 128);
    assert_int_equal(n.stages, 2);
    /* no shape: the table's tile */
    fajit_config z = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = 128};
    fj_config_heuristic(&z, &z, NULL, 0);
    assert_int_equal(z.block_m, 128);
}

/* The heuristic's decode tiles plan with a decode call's variants (seqlens + split + GQA packing, split alone, paged),
 * bf16 and f16 queries: with kv8direct at d64/128/256 (the default there; else decode.c runs the widening kernel on
 * the tile), with the widening at every head dim fajit builds (d96 / d192 included). */
static void test_decode_tile_plans(void **state)
{
    (void)state;
    const unsigned feats[3] = {FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, FJ_VARIANT_SPLIT,
                               FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED};
    const int dims[5] = {64, 96, 128, 192, 256};
    const int hq[2] = {32, 32}, hkv[2] = {8, 1}; /* 4 rows (br16), 32 rows (br32) */
    for (int di = 0; di < 5; di++)
        for (int dt = 0; dt < 2; dt++)
            for (int r = 0; r < 2; r++)
                for (int f = 0; f < 3; f++)
                    for (int direct = 0; direct < 2; direct++) {
                        fj_plan p0;
                        int legal = dims[di] % 64 == 0 && dims[di] != 192;
                        if (direct && !legal) continue;
                        fajit_config c = decode_config(dt ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, dims[di], hq[r], hkv[r], 1);
                        assert_int_equal(c.block_m, r ? 32 : 16);
                        fajit_config cc = c;
                        cc.causal = 1, cc.block_m = 0, cc.warps = 0, cc.col_warps = 0, cc.block_n = 0, cc.stages = 0;
                        fajit_shape shape = {1, hq[r], hkv[r], 1, 32768};
                        fj_config_heuristic(&cc, &cc, &shape, 0); /* causal: the tile by rows where it plans */
                        assert_int_equal(cc.block_m, dims[di] == 256 && !r ? 64 : r ? 32 : 16);
                        assert_int_equal(fj_plan_build(&cc, &p0), FAJIT_OK);
                        fj_plan p;
                        unsigned v = feats[f] | (direct ? FJ_VARIANT_KV8_DIRECT : 0u);
                        fajit_status st = fj_plan_build_variant(&c, v, &p);
                        if (st != FAJIT_OK)
                            print_message("d%d %s br%d variant 0x%x: %s\n", dims[di], dt ? "f16" : "bf16", c.block_m,
                                          v, fajit_errmsg());
                        assert_int_equal(st, FAJIT_OK);
                        assert_int_equal(p.kv8_direct, direct);
                        /* S in two MMA chains on the kv8direct tiles at d64 / d128 (d256's registers hold one) */
                        assert_int_equal(p.qk_chains, direct && dims[di] <= 128 ? 2 : 1);
                    }
}

/* The two chains in the kernel: per KV tile, the odd k-steps' MMAs start from zero into a second set, which is added
 * into S once (4 x n_frags_s adds), and S's own chain starts from zero at k-step 0 only. */
static void test_two_chains_ptx(void **state)
{
    (void)state;
    fajit_config c = decode_config(FAJIT_DTYPE_BF16, 128, 32, 8, 1);
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_KV8_DIRECT, &p), FAJIT_OK);
    assert_int_equal(p.qk_chains, 2);
    char *ptx = NULL;
    size_t len = 0;
    assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
    int adds = 0, zero_c = 0;
    for (const char *q = ptx; (q = strstr(q, "add.f32 %acc_s")) != NULL; q++) adds++;
    for (const char *q = ptx; (q = strstr(q, "mma.sync")) != NULL; q++) { /* C = {x, x, x, x}: one register, zero */
        const char *end = strchr(q, ';'), *cg = end;
        while (cg > q && *cg != '{') cg--;
        char r[4][32];
        if (end && sscanf(cg, "{%31[^,], %31[^,], %31[^,], %31[^}]}", r[0], r[1], r[2], r[3]) == 4 &&
            !strcmp(r[0], r[1]) && !strcmp(r[0], r[2]) && !strcmp(r[0], r[3]))
            zero_c++;
    }
    int per_tile = 4 * p.n_frags_s, tiles = p.cfg.stages; /* the loop is unrolled by stages */
    print_message("two chains: %d adds into S, %d MMAs from a zero C over %d unrolled tiles\n", adds, zero_c, tiles);
    assert_int_equal(adds, per_tile * tiles);
    assert_int_equal(zero_c, 2 * p.n_frags_s * tiles);
    free(ptx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepted),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_decode_tile),
        cmocka_unit_test(test_decode_tile_plans),
        cmocka_unit_test(test_two_chains_ptx),
    };
    return cmocka_run_group_tests_name("kv8_knobs", tests, NULL, NULL);
}
