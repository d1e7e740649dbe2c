/*
 * test_fp8_layout.c - proves the FP8 wgmma layouts of codegen/fp8_layout.c (no GPU): models of the PTX ISA's
 * fragment layouts (wgmma m64nN f32 accumulator, m64nNk32 8-bit A from registers, from CUTLASS's decoded
 * CLayout_64xN / ALayout_64x32 and ISA 9.7.15.5.1) and of ldmatrix.x4.trans / prmt / stmatrix.x4 run the
 * emitter's V transpose and P packing on random tiles, and check that
 *   - P's A fragment holds, at k position p of a 32-key chunk, the score of key fj_fp8_p_key(p) (same row),
 *   - Vt (K-major, swizzled as the wgmma descriptor reads it) holds V[fj_fp8_p_key(p)][n] at (n, p),
 *   - so sum_p A[m][p] Vt[n][p] = sum_key P[m][key] V[key][n]: P V exactly, for every row and head dim.
 * Run: ctest --test-dir build -R test_fp8_layout
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "codegen/fp8_layout.h"

/* ---- models of the ISA ------------------------------------------------------------------------------------ */
/* wgmma m64nN f32 accumulator: thread tid (0..127), register v -> (row, column) */
static void acc_pos(int tid, int v, int *m, int *n)
{
    int lane = tid % 32;
    *m = 16 * (tid / 32) + lane / 4 + 8 * ((v / 2) % 2);
    *n = 2 * (lane % 4) + v % 2 + 8 * (v / 4);
}

/* wgmma m64nNk32 A from registers, 8-bit: thread tid, register r (0..3), byte b -> (row, k) */
static void a_pos(int tid, int r, int b, int *m, int *k)
{
    int lane = tid % 32;
    *m = 16 * (tid / 32) + lane / 4 + 8 * (r % 2);
    *k = 4 * (lane % 4) + b + 16 * (r / 2);
}

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lane l's register m = {M[2t][g], M[2t + 1][g]} (16-bit
 * elements, low half first) of matrix m, whose row i is 8 16-bit elements at addr[8m + i]. */
static void ldmatrix_x4_trans(const uint8_t *smem, const int addr[32], uint32_t reg[32][4])
{
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < 4; m++) {
            int g = l / 4, t = l % 4;
            const uint8_t *r0 = smem + addr[8 * m + 2 * t], *r1 = smem + addr[8 * m + 2 * t + 1];
            reg[l][m] = (uint32_t)r0[2 * g] | (uint32_t)r0[2 * g + 1] << 8 | (uint32_t)r1[2 * g] << 16 |
                        (uint32_t)r1[2 * g + 1] << 24;
        }
}

/* stmatrix.sync.aligned.m8n8.x4.shared.b16: lane l's register m goes to row g of matrix m (address addr[8m + g]),
 * 16-bit elements 2t, 2t + 1: bytes 4t .. 4t + 3. */
static void stmatrix_x4(uint8_t *smem, const int addr[32], uint32_t reg[32][4])
{
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < 4; m++)
            for (int b = 0; b < 4; b++) smem[addr[8 * m + l / 4] + 4 * (l % 4) + b] = (uint8_t)(reg[l][m] >> (8 * b));
}

/* prmt.b32 d, a, b, sel (default mode): byte k of d is byte (sel >> 4k) & 7 of {b, a} (a = bytes 0-3) */
static uint32_t prmt(uint32_t a, uint32_t b, unsigned sel)
{
    uint64_t ab = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (int k = 0; k < 4; k++) d |= (uint32_t)((ab >> (8 * ((sel >> (4 * k)) & 7))) & 0xff) << (8 * k);
    return d;
}

/* ---- the checks ----------------------------------------------------------------------------------------- */
static int key_of(int p) { return 32 * (p / 32) + fj_fp8_p_key(p % 32); }

static void test_p_key_is_a_permutation(void **state)
{
    (void)state;
    int seen[32] = {0};
    for (int p = 0; p < 32; p++) {
        int key = fj_fp8_p_key(p);
        assert_true(key >= 0 && key < 32);
        seen[key]++;
    }
    for (int key = 0; key < 32; key++) assert_int_equal(seen[key], 1);
    for (int l = 0; l < 32; l++) { /* ldmatrix rows: 16-byte aligned, within one 16-byte chunk of a row */
        assert_true(fj_fp8_ld_key(l) >= 0 && fj_fp8_ld_key(l) < 16);
        assert_int_equal(fj_fp8_ld_col(l) % 16, 0);
        assert_true(fj_fp8_st_dim(l) >= 0 && fj_fp8_st_dim(l) < 32);
    }
}

/* P packing: S in the accumulator layout -> A registers by fj_fp8_p_src -> A's (row, k) by the A layout. */
static void check_p_pack(int bc)
{
    static int s_val[64][256], a_val[64][256];
    memset(a_val, 0xff, sizeof a_val);
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < bc; n++) s_val[m][n] = rand() % 1000;
    for (int tid = 0; tid < 128; tid++) {
        int acc[128]; /* this thread's S registers */
        for (int v = 0; v < bc / 2; v++) {
            int m, n;
            acc_pos(tid, v, &m, &n);
            acc[v] = s_val[m][n];
        }
        for (int c = 0; c < bc / 32; c++)
            for (int r = 0; r < 4; r++)
                for (int b = 0; b < 4; b++) {
                    int src = fj_fp8_p_src(c, r, b), m, k;
                    assert_true(src >= 0 && src < bc / 2);
                    a_pos(tid, r, b, &m, &k);
                    assert_int_equal(a_val[m][32 * c + k], -1); /* every A element written once */
                    a_val[m][32 * c + k] = acc[src];
                }
    }
    for (int m = 0; m < 64; m++)
        for (int p = 0; p < bc; p++) assert_int_equal(a_val[m][p], s_val[m][key_of(p)]);
}

static void test_p_pack(void **state)
{
    (void)state;
    for (int bc = 32; bc <= 256; bc += 32) check_p_pack(bc);
}

/* V transpose of a [bc][d] tile (TMA layout, swizzle w) into Vt [d][bc] (K-major, swizzle wv), block by block
 * as the producer warps do it; then Vt[n][p] = V[key_of(p)][n] and P V through the permuted k order is exact. */
static void check_transpose(int bc, int d, int w, int wv)
{
    uint8_t *v = malloc((size_t)bc * d), *vs = calloc((size_t)bc * d, 1), *vt = calloc((size_t)bc * d, 1);
    assert_non_null(v);
    assert_non_null(vs);
    assert_non_null(vt);
    for (int i = 0; i < bc * d; i++) v[i] = (uint8_t)(rand() & 0xff);
    for (int key = 0; key < bc; key++)
        for (int n = 0; n < d; n++) vs[fj_fp8_swizzled(key, n, bc, w)] = v[key * d + n];
    for (int kg = 0; kg < bc / 16; kg++)
        for (int dg = 0; dg < d / 32; dg++) {
            int ld[32], st[32];
            uint32_t a[32][4], o[32][4];
            for (int l = 0; l < 32; l++) {
                ld[l] = fj_fp8_swizzled(16 * kg + fj_fp8_ld_key(l), 32 * dg + fj_fp8_ld_col(l), bc, w);
                st[l] = fj_fp8_swizzled(32 * dg + fj_fp8_st_dim(l), 16 * kg, d, wv);
                assert_int_equal(ld[l] % 16, 0);
                assert_int_equal(st[l] % 16, 0);
            }
            ldmatrix_x4_trans(vs, ld, a);
            for (int l = 0; l < 32; l++) {
                o[l][0] = prmt(a[l][0], a[l][1], FJ_FP8_PRMT_EVEN);
                o[l][1] = prmt(a[l][0], a[l][1], FJ_FP8_PRMT_ODD);
                o[l][2] = prmt(a[l][2], a[l][3], FJ_FP8_PRMT_EVEN);
                o[l][3] = prmt(a[l][2], a[l][3], FJ_FP8_PRMT_ODD);
            }
            stmatrix_x4(vt, st, o);
        }
    for (int n = 0; n < d; n++)
        for (int p = 0; p < bc; p++) assert_int_equal(vt[fj_fp8_swizzled(n, p, d, wv)], v[key_of(p) * d + n]);
    /* P V: A (k-permuted P) against Vt read as the wgmma B operand; small integers, so the sums are exact */
    static int pm[64][256];
    for (int m = 0; m < 64; m++)
        for (int key = 0; key < bc; key++) pm[m][key] = rand() % 7 - 3;
    for (int m = 0; m < 64; m += 7)
        for (int n = 0; n < d; n++) {
            long ref = 0, got = 0;
            for (int key = 0; key < bc; key++) ref += (long)pm[m][key] * v[key * d + n];
            for (int p = 0; p < bc; p++) got += (long)pm[m][key_of(p)] * vt[fj_fp8_swizzled(n, p, d, wv)];
            assert_int_equal(got, ref);
        }
    free(v);
    free(vs);
    free(vt);
}

static int span_of(int bytes) { return bytes % 128 == 0 ? 128 : bytes % 64 == 0 ? 64 : 32; }

static void test_v_transpose(void **state)
{
    (void)state;
    const int dims[] = {64, 128, 256};
    for (int i = 0; i < 3; i++)
        for (int bc = 32; bc <= 256; bc += 32) check_transpose(bc, dims[i], span_of(dims[i]), span_of(bc));
    check_transpose(128, 128, 64, 32); /* narrower spans than the plan picks: the formulas are general */
}

int main(void)
{
    srand(22);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p_key_is_a_permutation),
        cmocka_unit_test(test_p_pack),
        cmocka_unit_test(test_v_transpose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
