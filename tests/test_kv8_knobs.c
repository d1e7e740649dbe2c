/*
 * test_kv8_knobs.c - unit tests (no GPU) of the FP8 K/V decode knobs (src/runtime/kv8_knobs.c): every accepted
 * value of FAJIT_KV8_WIDEN / FAJIT_KV8_DIRECT / FAJIT_KV8_TILE and its variant bits, each unknown value refused with
 * INVALID_ARGUMENT naming the variable, the value and the accepted ones; the tile by rows (FAJIT_KV8_TILE=rows) for
 * the rows of the decode table (1, 4, 8 rows a KV head at Nq 1) and its edges, and that those tiles plan with the
 * decode variants a call takes (seqlens + split + GQA packing, with and without kv8direct).
 * Run: ctest --test-dir build -R test_kv8_knobs
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/kv8_knobs.h"
#include "test_support.h"

static void test_parse_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *widen, *direct, *tile;
        unsigned variant;
        int rows;
    } ok[] = {
        {NULL, NULL, NULL, 0, 0},
        {"", "", "", 0, 0},
        {"cvt", "0", "heuristic", 0, 0},
        {"int", NULL, NULL, FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V, 0},
        {"intk", NULL, NULL, FJ_VARIANT_KV8_INT_K, 0},
        {"intv", "1", NULL, FJ_VARIANT_KV8_INT_V | FJ_VARIANT_KV8_DIRECT, 0},
        {NULL, "1", "rows", FJ_VARIANT_KV8_DIRECT, 1},
        {NULL, NULL, "rows", 0, 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fj_kv8_knobs k;
        assert_int_equal(fj_kv8_knobs_parse(ok[i].widen, ok[i].direct, ok[i].tile, &k), FAJIT_OK);
        assert_int_equal(k.variant, ok[i].variant);
        assert_int_equal(k.tile_rows, ok[i].rows);
    }
}

static void test_parse_refused(void **state)
{
    (void)state;
    fj_kv8_knobs k;
    assert_true(fj_test_status_says(fj_kv8_knobs_parse("INT", NULL, NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_WIDEN", "'INT'", "intv"));
    assert_true(fj_test_status_says(fj_kv8_knobs_parse(NULL, "yes", NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_DIRECT", "'yes'", "must be 1"));
    assert_true(fj_test_status_says(fj_kv8_knobs_parse(NULL, "1", "row", &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_TILE", "'row'", "rows"));
    assert_true(fj_test_status_says(fj_kv8_knobs_parse("int", "2", NULL, &k), FAJIT_ERR_INVALID_ARGUMENT,
                                    "FAJIT_KV8_DIRECT", "'2'", "or 0"));
}

/* The tile for rows, filled as decode.c fills it (fj_config_heuristic), for d128 bf16 / f16 queries. */
static fajit_config rows_config(long long rows, fajit_dtype dt, int d, int *taken)
{
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = dt, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = d,
                      .block_m = 64, .block_n = 64, .stages = 4, .warps = 4, .col_warps = 1, .swizzle = 128};
    *taken = fj_kv8_rows_tile(rows, &c);
    fajit_shape shape = {1, 32, 8, 1, 32768};
    fj_config_heuristic(&c, &c, &shape, 0);
    return c;
}

static void test_rows_tile(void **state)
{
    (void)state;
    static const struct {
        long long rows;
        int taken, block_m, warps, col_warps;
    } want[] = {{1, 1, 16, 2, 2},  {4, 1, 16, 2, 2},  {8, 1, 16, 2, 2}, {16, 1, 16, 2, 2},
                {17, 1, 32, 4, 2}, {32, 1, 32, 4, 2}, {33, 0, 64, 4, 1}, {0, 0, 64, 4, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int taken;
        fajit_config c = rows_config(want[i].rows, FAJIT_DTYPE_BF16, 128, &taken);
        assert_int_equal(taken, want[i].taken);
        assert_int_equal(c.block_m, want[i].block_m);
        assert_int_equal(c.warps, want[i].warps);
        assert_int_equal(c.col_warps, want[i].col_warps);
        assert_int_equal(c.block_n, 64);
        assert_int_equal(c.stages, 4);
        assert_int_equal(c.swizzle, 128);
    }
}

/* The tiles by rows plan with a decode call's variants (seqlens + split + GQA packing, paged, kv8direct), bf16 and
 * f16 queries, d64 and d128; d256 br16 cw2 too (else decode.c's variant_config would fall back to 64-row tiles). */
static void test_rows_tile_plans(void **state)
{
    (void)state;
    const unsigned feats[3] = {FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, FJ_VARIANT_SPLIT,
                               FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED};
    const int dims[3] = {64, 128, 256};
    const long long rows[2] = {4, 32};
    for (int di = 0; di < 3; di++)
        for (int dt = 0; dt < 2; dt++)
            for (int r = 0; r < 2; r++)
                for (int f = 0; f < 3; f++)
                    for (int direct = 0; direct < 2; direct++) {
                        int taken;
                        fajit_config c = rows_config(rows[r], dt ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, dims[di], &taken);
                        fj_plan p;
                        unsigned v = feats[f] | (direct ? FJ_VARIANT_KV8_DIRECT : 0u);
                        fajit_status st = fj_plan_build_variant(&c, v, &p);
                        if (st != FAJIT_OK)
                            print_message("d%d %s rows %lld variant 0x%x: %s\n", dims[di], dt ? "f16" : "bf16", rows[r],
                                          v, fajit_errmsg());
                        assert_int_equal(st, FAJIT_OK);
                        assert_int_equal(p.kv8_direct, direct);
                    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepted),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_rows_tile),
        cmocka_unit_test(test_rows_tile_plans),
    };
    return cmocka_run_group_tests_name("kv8_knobs", tests, NULL, NULL);
}
