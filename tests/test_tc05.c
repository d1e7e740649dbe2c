/*
 * test_tc05.c - the tcgen05 encoders (src/codegen/tc05.c) against values worked out by hand from the PTX ISA 9.1
 * tables (label unit): the instruction descriptor of .kind::f16 (9.7.16.4.2, Table 42), the shared memory
 * descriptor (9.7.16.4.1, Table 40), tensor memory addresses (9.7.16.1.1) and allocation sizes (9.7.16.7.1).
 *   ctest --test-dir build -R test_tc05
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/tc05.h"

/* Table 42, .kind::f16, fp32 D:
 *   bits 4-5 D type F32 = 1            -> 0x00000010
 *   bits 7-9 A type BF16 = 1           -> 0x00000080
 *   bits 10-12 B type BF16 = 1         -> 0x00000400
 *   bit 16 transpose B (N-major) = 1   -> 0x00010000
 *   bits 17-22 N >> 3: 128 >> 3 = 16   -> 16 << 17 = 0x00200000;  256 >> 3 = 32 -> 0x00400000;  64 -> 0x00100000
 *   bits 24-28 M >> 4: 128 >> 4 = 8    -> 8 << 24 = 0x08000000;   64 >> 4 = 4 -> 0x04000000 */
static void test_idesc(void **state)
{
    (void)state;
    /* S = Q K^T, bf16, M 128, N 128, both K-major: 0x10 + 0x80 + 0x400 + 0x200000 + 0x08000000 */
    assert_int_equal(fj_tc05_idesc_f16(128, 128, 1, 0, 0), 0x08200490u);
    /* O += P V, V N-major (transpose B): + 0x10000 */
    assert_int_equal(fj_tc05_idesc_f16(128, 128, 1, 0, 1), 0x08210490u);
    /* D256: N 256 -> 0x400000 */
    assert_int_equal(fj_tc05_idesc_f16(128, 256, 1, 0, 1), 0x08410490u);
    /* f16 inputs (types 0), N 64: 0x10 + 0x100000 + 0x08000000 */
    assert_int_equal(fj_tc05_idesc_f16(128, 64, 0, 0, 0), 0x08100010u);
    /* M 64, N 8, bf16, A M-major (bit 15 = 0x8000): 0x10 + 0x80 + 0x400 + 0x8000 + (1 << 17) + 0x04000000 */
    assert_int_equal(fj_tc05_idesc_f16(64, 8, 1, 1, 0), 0x04028490u);
    /* shapes the instruction does not take (9.7.16.2.1: N % 16 == 0 for M 128, N <= 256, M 64 / 128 here) */
    assert_int_equal(fj_tc05_idesc_f16(128, 8, 1, 0, 0), 0u);
    assert_int_equal(fj_tc05_idesc_f16(128, 272, 1, 0, 0), 0u);
    assert_int_equal(fj_tc05_idesc_f16(256, 128, 1, 0, 0), 0u);
    assert_int_equal(fj_tc05_idesc_f16(32, 128, 1, 0, 0), 0u);
}

/* Table 40: start >> 4 in 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, 1 << 46, swizzle << 61. */
static void test_sdesc(void **state)
{
    (void)state;
    /* K-major SW128 tile at 0x400: start 0x40, LBO 16 -> 1 << 16, SBO 8 x 128 = 1024 -> 64 << 32 = 0x40_0000_0000,
     * version 1 << 46 = 0x4000_0000_0000, swizzle 2 << 61 = 0x4000_0000_0000_0000 */
    assert_true(fj_tc05_sdesc(0x400, 16, 1024, 128) == 0x4000404000010040ull);
    /* MN-major SW128 V tile at 0x10020 (a k-step inside a tile), LBO = one box of 128 rows x 128 B = 16384 -> 1024 << 16
     * = 0x0400_0000, SBO 1024: start 0x1002 */
    assert_true(fj_tc05_sdesc(0x10020, 16384, 1024, 128) == 0x4000404004001002ull);
    /* SW64 (field 4 -> bit 63), SBO 8 x 64 = 512 -> 32 << 32 */
    assert_true(fj_tc05_sdesc(0, 16, 512, 64) == 0x8000402000010000ull);
    /* SW32 (field 6 -> bits 62, 63), no swizzle (0) */
    assert_true(fj_tc05_sdesc(0, 16, 256, 32) == 0xC000401000010000ull);
    assert_true(fj_tc05_sdesc(0, 16, 256, 0) == 0x0000401000010000ull);
    /* the address field keeps bits 4-17 (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4) */
    assert_true((fj_tc05_sdesc(0x7FFF0, 0, 0, 0) & 0x3FFF) == 0x3FFF);
    /* the same bits as wgmma's 2-bit mode at 62-63 (1 = 128 B, 2 = 64 B, 3 = 32 B), bit 61 clear */
    const int sw[3] = {128, 64, 32};
    for (int i = 0; i < 3; i++) {
        uint64_t d = fj_tc05_sdesc(0, 0, 0, sw[i]);
        assert_true((d >> 62) == (uint64_t)(i + 1));
        assert_true(((d >> 61) & 1) == 0);
    }
    assert_int_equal(fj_tc05_swizzle_field(16), -1);
}

static void test_tmem(void **state)
{
    (void)state;
    /* 9.7.16.1.1: lane in 31-16, column in 15-0 */
    assert_int_equal(fj_tc05_taddr(32, 5), 0x00200005u);
    assert_int_equal(fj_tc05_taddr(96, 511), 0x006001FFu);
    /* 9.7.16.7.1: a power of two, 32..512 columns */
    assert_int_equal(fj_tc05_alloc_cols(1), 32);
    assert_int_equal(fj_tc05_alloc_cols(32), 32);
    assert_int_equal(fj_tc05_alloc_cols(33), 64);
    assert_int_equal(fj_tc05_alloc_cols(384), 512);
    assert_int_equal(fj_tc05_alloc_cols(512), 512);
    assert_int_equal(fj_tc05_alloc_cols(513), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idesc),
        cmocka_unit_test(test_sdesc),
        cmocka_unit_test(test_tmem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
