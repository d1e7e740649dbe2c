/*
 * test_reg_pool.c - every sm_90a warp-specialized kernel's setmaxnreg split fits the CTA's register pool (no GPU, no
 * ptxas). setmaxnreg moves registers inside the CTA's launch allocation (PTX ISA, setmaxnreg: a per-CTA pool;
 * setmaxnreg.inc blocks until the pool holds enough), and ptxas gives a CTA of T threads (.maxntid T, .minnctapersm 1)
 * the 8-register step under 65536 / T: 168 at 384 threads, 128 at 512 (ptxas -v, 13.0). A split past it - the FP8
 * 'regs' knob's 32 / 240 at 384 threads, 65536 > 64512 - leaves the consumers' USETMAXREG.TRY_ALLOC looping forever
 * (the hang of bench/fp8_ab.sh on the H100, 2026-11-26). The check reads the PTX as emitted: .maxntid, each
 * setmaxnreg.dec (the producer warpgroup) and setmaxnreg.inc (every consumer warpgroup).
 * Run: ctest --test-dir build -R test_reg_pool
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
#include "codegen/sm90.h"
#include "fajit.h"

/* 1 when the PTX of c holds a split that fits; -1 when it has no setmaxnreg; 0 (printed) when it does not fit. */
static int split_fits(const fajit_config *c)
{
    char text[192], *ptx = NULL;
    size_t len = 0;
    fajit_config_format(c, text, sizeof text);
    if (fajit_generate_ptx(c, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", text, fajit_errmsg());
    const char *m = strstr(ptx, ".maxntid "), *dec = strstr(ptx, "setmaxnreg.dec.sync.aligned.u32 "),
               *inc = strstr(ptx, "setmaxnreg.inc.sync.aligned.u32 ");
    int r = -1;
    if (dec || inc) {
        if (!m || !dec || !inc)
            fail_msg("%s: .maxntid %s, setmaxnreg.dec %s, .inc %s: want all three", text, m ? "found" : "missing",
                     dec ? "found" : "missing", inc ? "found" : "missing");
        int threads = atoi(m + 9), p = atoi(dec + 32), q = atoi(inc + 32), wgs = threads / 128 - 1;
        int pool = threads * fj_sm90_launch_regs(threads), need = 128 * p + 128 * wgs * q;
        r = need <= pool;
        if (!r) printf("FAIL %s: %d threads, producer %d + %d x 128 x %d = %d registers, pool %d x %d = %d\n", text,
                       threads, 128 * p, wgs, q, need, threads, fj_sm90_launch_regs(threads), pool);
    }
    fajit_free(ptx);
    return r;
}

/* The launch allocation as ptxas -v reports it (Used 168 registers at .maxntid 384, 128 at 512). */
static void test_launch_regs(void **state)
{
    (void)state;
    assert_int_equal(fj_sm90_launch_regs(384), 168);
    assert_int_equal(fj_sm90_launch_regs(512), 128);
    assert_int_equal(fj_sm90_launch_regs(256), 255);
    assert_false(fj_sm90_reg_pool_ok(2, 32, 240)); /* the old 'regs' split */
    assert_true(fj_sm90_reg_pool_ok(2, 24, 240));
    assert_true(fj_sm90_reg_pool_ok(3, 32, 160));
}

/* Defaults and the FA3 tiles for BF16 and FP8 (each knob set), 2 and 3 consumer warpgroups. */
static void test_splits(void **state)
{
    (void)state;
    static const char *knobs[] = {NULL, "", "vt", "regs", "regs,vt", "all"};
    static const struct {
        int d, bm, bn, pp;
    } tiles[] = {{0, 0, 0, 0}, {64, 192, 128, -1}, {128, 128, 224, 1}, {256, 128, 128, 1}, {256, 128, 128, -1}};
    int bad = 0, checked = 0;
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
        if (knobs[k]) setenv("FAJIT_FP8_KNOBS", knobs[k], 1);
        else unsetenv("FAJIT_FP8_KNOBS");
        for (int dt = 0; dt < 2; dt++)
            for (int d = 64; d <= 256; d *= 2)
                for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
                    for (int causal = 0; causal < 2; causal++) {
                        if (tiles[t].d && tiles[t].d != d) continue;
                        fajit_config c = {.arch = FAJIT_ARCH_SM90A, .head_dim = d, .causal = causal,
                                          .dtype = dt ? FAJIT_DTYPE_E4M3 : FAJIT_DTYPE_BF16};
                        if (tiles[t].d)
                            c.block_m = tiles[t].bm, c.block_n = tiles[t].bn, c.stages = 2, c.overlap = 1,
                            c.pingpong = tiles[t].pp, c.warps = 4 * (tiles[t].bm / 64 + 1), c.col_warps = 1;
                        fajit_shape shape = {4, 2048 / d, 2048 / d, 4096, 4096};
                        fajit_status st = fajit_config_fill(NULL, &shape, &c);
                        if (st == FAJIT_ERR_INVALID_CONFIG) continue; /* the register model refuses the tile */
                        if (st != FAJIT_OK) fail_msg("d%d causal %d tile %zu: %s", d, causal, t, fajit_errmsg());
                        int r = split_fits(&c);
                        if (r >= 0) checked++, bad += !r;
                    }
    }
    unsetenv("FAJIT_FP8_KNOBS");
    printf("%d kernels with setmaxnreg checked, %d over the pool\n", checked, bad);
    assert_true(checked >= 40);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_launch_regs), cmocka_unit_test(test_splits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
