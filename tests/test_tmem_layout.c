/*
 * test_tmem_layout.c - a small interpreter of the sm_100a kernel's data layouts (label unit), no GPU: it follows
 * one KV tile through the layouts sm100_roles.c uses and checks each hand-over against a float64 reference.
 *   TMA      Q, K, V tiles land in shared memory as boxes of [rows][W bytes], 16-byte chunks swizzled by the
 *            address bits (Swizzle<log2(W/16), 4, 3>: bits 4.. ^= bits 7..), at the plan's offsets
 *   MMA      S = Q K^T and O = P V, each operand read through its descriptor as the PTX ISA's canonical layouts
 *            say (9.7.16.3.3: K-major ((8,m),(T,2k)):((8T,SBO),(1,T)); MN-major ((T,S,m),(8,k)):((1,T,LBO),(ST,SBO)),
 *            then the swizzle), the descriptors built by tc05.c's encoder and decoded from its bit fields, the
 *            k-steps from sm100.c (fj_sm100_qk_step / pv_step); D fp32 in tensor memory, row i = lane i (layout D)
 *   ld / st  tcgen05.ld / st .32x32b: thread i of warp w moves lane lane_base(w) + i (refused outside the warp's
 *            quarter, 9.7.16.8.1), registers r = columns col + r
 *   P        the softmax thread's P values packed two a column into P[b] (low half first) and read by the TS MMA
 *            as A (row m = lane m, element k = column k / 2, half k % 2)
 * Checked: each softmax thread receives its own row of S, the P it stores is the A operand the PV MMA multiplies,
 * and each correction / epilogue thread reads its own row of O = P V, for every default head dim and both dtypes'
 * packing, and with two query tiles in flight (pingpong: Q rows 128 t.., S[t], P[t], O[t]) for D64-128 (values small integers, so bf16 / f16 hold them exactly and every comparison is exact).
 *   ctest --test-dir build -R test_tmem_layout
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/sm100.h"
#include "codegen/tc05.h"
#include "fajit.h"

#define SMEM_BYTES (232448 + 1024)
#define LANES 128
#define COLS 512

static uint8_t g_smem[SMEM_BYTES];
static uint32_t g_tmem[LANES][COLS];
static int g_bad_lane;

/* ---- 16-bit values (bf16: the top half of the float; f16 via the C conversion of small integers) ---------- */
static uint16_t to16(float x, int bf16)
{
    if (bf16) {
        uint32_t u;
        memcpy(&u, &x, 4);
        return (uint16_t)(u >> 16);
    }
    /* small integers: exact in f16; sign, exponent, 10-bit mantissa */
    if (x == 0) return 0;
    uint16_t s = x < 0 ? 0x8000 : 0;
    float a = fabsf(x);
    int e = ilogbf(a);
    uint16_t mant = (uint16_t)((a / ldexpf(1.0f, e) - 1.0f) * 1024.0f);
    return (uint16_t)(s | (uint16_t)((e + 15) << 10) | mant);
}

static float from16(uint16_t h, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf(1.0f + m / 1024.0f, e - 15) : ldexpf(m / 1024.0f, -14);
    return h & 0x8000 ? -v : v;
}

/* ---- shared memory: the swizzle, TMA boxes ------------------------------------------------------------ */
/* Swizzle<B, 4, 3> of a span of W bytes: address bits 4 .. 4 + B - 1 ^= bits 7 .. 7 + B - 1 (B = log2(W / 16)). */
static uint32_t swz(uint32_t a, int w)
{
    uint32_t mask = (uint32_t)(w / 16 - 1);
    return a ^ (((a >> 7) & mask) << 4);
}

/* TMA: element (r, c) of a [rows][cols] tile at smem offset base, as boxes of W / 2 columns. */
static void tma_tile(uint32_t base, int rows, int cols, int w, const float *src, int bf16)
{
    int bc = w / 2;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            uint32_t a = base + (uint32_t)((c / bc) * rows * w + r * w + (c % bc) * 2);
            uint16_t v = to16(src[r * cols + c], bf16);
            memcpy(&g_smem[swz(a, w)], &v, 2);
        }
}

/* ---- descriptors, decoded from their bits (Table 40) --------------------------------------------------- */
typedef struct sdesc {
    uint32_t start, lbo, sbo;
    int w; /* swizzle span */
} sdesc;

static sdesc decode(uint64_t d)
{
    sdesc s;
    s.start = (uint32_t)(d & 0x3FFF) << 4;
    s.lbo = (uint32_t)((d >> 16) & 0x3FFF) << 4;
    s.sbo = (uint32_t)((d >> 32) & 0x3FFF) << 4;
    assert_int_equal((int)((d >> 46) & 7), 1); /* the sm_100 version field */
    int f = (int)(d >> 61);
    s.w = f == 2 ? 128 : f == 4 ? 64 : f == 6 ? 32 : 0;
    assert_true(s.w != 0);
    return s;
}

/* Element (mn, k) of an operand, k < 16 (one MMA's K): K-major or MN-major canonical layout, then the swizzle. */
static float operand(const sdesc *s, int mn_major, int mn, int k, int bf16)
{
    uint32_t a;
    if (!mn_major) /* ((8,m),(T,2k)):((8T,SBO),(1,T)) in bytes: row mn % 8 at W x (mn % 8), group at SBO */
        a = s->start + (uint32_t)(mn / 8) * s->sbo + (uint32_t)(mn % 8) * (uint32_t)s->w + (uint32_t)k * 2;
    else /* ((T,S,m),(8,k)):((1,T,LBO),(ST,SBO)): W / 2 elements along MN a span, spans at LBO; k rows of W at SBO */
        a = s->start + (uint32_t)(mn / (s->w / 2)) * s->lbo + (uint32_t)(mn % (s->w / 2)) * 2 +
            (uint32_t)(k % 8) * (uint32_t)s->w + (uint32_t)(k / 8) * s->sbo;
    uint16_t v;
    memcpy(&v, &g_smem[swz(a, s->w)], 2);
    return from16(v, bf16);
}

/* tcgen05.mma.kind::f16, M 128, K 16: D[tmem dcol ..] (+)= A x B. A from a descriptor (adesc) or, with acol >= 0,
 * from tensor memory; the shape and majors from the instruction descriptor's bits (Table 42). */
static void mma(int dcol, int acol, uint64_t adesc, uint64_t bdesc, uint32_t idesc, int accumulate)
{
    int n = (int)((idesc >> 17) & 63) << 3, m = (int)((idesc >> 24) & 31) << 4;
    int bf16 = (int)((idesc >> 7) & 7), a_mn = (int)((idesc >> 15) & 1), b_mn = (int)((idesc >> 16) & 1);
    assert_int_equal(m, 128);
    assert_int_equal((int)((idesc >> 4) & 3), 1); /* fp32 D */
    sdesc sa = acol < 0 ? decode(adesc) : (sdesc){0, 0, 0, 0}, sb = decode(bdesc);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            if (accumulate) memcpy(&acc, &g_tmem[i][dcol + j], 4);
            for (int kk = 0; kk < 16; kk++) {
                float a;
                if (acol >= 0) {
                    uint32_t word = g_tmem[i][acol + kk / 2];
                    a = from16((uint16_t)(kk % 2 ? word >> 16 : word & 0xFFFF), bf16);
                } else {
                    a = operand(&sa, a_mn, i, kk, bf16);
                }
                acc += a * operand(&sb, b_mn, j, kk, bf16);
            }
            memcpy(&g_tmem[i][dcol + j], &acc, 4);
        }
}

/* tcgen05.ld / st .32x32b.xN of warp `warp` at tensor memory address (lane << 16 | col): regs[i][r] of thread i. */
static void tmem_ld(int warp, uint32_t taddr, int n, uint32_t regs[32][128])
{
    int lane = (int)(taddr >> 16), col = (int)(taddr & 0xFFFF);
    if (lane != fj_sm100_lane_base(warp)) g_bad_lane = 1;
    for (int i = 0; i < 32; i++)
        for (int r = 0; r < n; r++) regs[i][r] = g_tmem[lane + i][col + r];
}

static void tmem_st(int warp, uint32_t taddr, int n, uint32_t regs[32][128])
{
    int lane = (int)(taddr >> 16), col = (int)(taddr & 0xFFFF);
    if (lane != fj_sm100_lane_base(warp)) g_bad_lane = 1;
    for (int i = 0; i < 32; i++)
        for (int r = 0; r < n; r++) g_tmem[lane + i][col + r] = regs[i][r];
}

static float fbits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One KV tile of a config through the layouts: S, P, O = P V against a float64 reference; with pp (two query tiles
 * in flight) each query tile through its own S, P, O: Q rows 128 t .., S[t], P[t], O[t]. */
static void run_config(int head_dim, int bf16, int pp)
{
    fajit_config c;
    memset(&c, 0, sizeof c);
    c.arch = FAJIT_ARCH_SM100A;
    c.head_dim = head_dim;
    c.dtype = bf16 ? FAJIT_DTYPE_BF16 : FAJIT_DTYPE_F16;
    c.pingpong = pp ? 1 : -1;
    fj_config_heuristic(&c, &c, NULL, 0);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    int d = head_dim, bq = c.block_m, bm = 128, bn = c.block_n, stage = c.stages - 1;
    int w = c.swizzle;
    float *q = malloc(sizeof(float) * bq * d), *kk = malloc(sizeof(float) * bn * d), *v = malloc(sizeof(float) * bn * d);
    double *s_ref = malloc(sizeof(double) * bm * bn);
    float *pm = malloc(sizeof(float) * bm * bn);
    assert_non_null(q), assert_non_null(kk), assert_non_null(v), assert_non_null(s_ref), assert_non_null(pm);
    srand(head_dim * 4 + bf16 * 2 + pp);
    for (int i = 0; i < bq * d; i++) q[i] = (float)(rand() % 7 - 3);
    for (int i = 0; i < bn * d; i++) kk[i] = (float)(rand() % 7 - 3), v[i] = (float)(rand() % 5 - 2);
    memset(g_smem, 0xEE, sizeof g_smem);
    memset(g_tmem, 0xEE, sizeof g_tmem);
    g_bad_lane = 0;
    uint32_t kv = (uint32_t)(stage * p.kv_tile_bytes);
    tma_tile((uint32_t)p.q_off, bq, d, w, q, bf16);
    tma_tile((uint32_t)p.k_off + kv, bn, d, w, kk, bf16);
    tma_tile((uint32_t)p.v_off + kv, bn, d, w, v, bf16);
    for (int qt = 0; qt < (pp ? 2 : 1); qt++) {
        int b = pp ? qt : 1, ocol = fj_sm100_o_col(&p, qt);
        int softmax0 = pp ? 4 * qt : 0, corr0 = pp ? FJ_SM100_PP_WARP_CORR : FJ_SM100_WARP_CORR;
        /* S[b] = Q K^T: the MMA thread's k-steps */
        int lbo, sbo;
        fj_sm100_desc_strides(&p, 0, &lbo, &sbo);
        uint32_t idesc_qk = fj_tc05_idesc_f16(128, bn, bf16, 0, 0), idesc_pv = fj_tc05_idesc_f16(128, d, bf16, 0, 1);
        for (int ks = 0; ks < p.k_steps_qk; ks++) {
            int qo, ko;
            fj_sm100_qk_step(&p, ks, &qo, &ko);
            qo += fj_sm100_q_tile_off(&p, qt);
            mma(p.tmem_s_col + b * bn, -1, fj_tc05_sdesc((uint32_t)(p.q_off + qo), (uint32_t)lbo, (uint32_t)sbo, w),
                fj_tc05_sdesc((uint32_t)(p.k_off) + kv + (uint32_t)ko, (uint32_t)lbo, (uint32_t)sbo, w), idesc_qk,
                ks > 0);
        }
        for (int i = 0; i < bm; i++)
            for (int j = 0; j < bn; j++) {
                double s = 0;
                for (int x = 0; x < d; x++) s += (double)q[(qt * bm + i) * d + x] * kk[j * d + x];
                s_ref[i * bn + j] = s;
            }

        /* the tile's softmax warps: S row, then P (here P = S mod 5 - 2, small and exact) packed into P[b] */
        static uint32_t regs[32][128];
        for (int warp = softmax0; warp < softmax0 + 4; warp++) {
            uint32_t lanes = fj_tc05_taddr(fj_sm100_lane_base(warp), 0);
            for (int c0 = 0; c0 < bn; c0 += 32) {
                int nc = bn - c0 < 32 ? bn - c0 : 32;
                tmem_ld(warp, lanes + (uint32_t)(p.tmem_s_col + b * bn + c0), nc, regs);
                for (int i = 0; i < 32; i++)
                    for (int r = 0; r < nc; r++) {
                        int row = 32 * (warp % 4) + i, col = c0 + r;
                        assert_true(fbits(regs[i][r]) == (float)s_ref[row * bn + col]); /* thread i: row 32 w + i */
                        pm[row * bn + col] = (float)(((int)s_ref[row * bn + col] % 5 + 5) % 5 - 2);
                    }
            }
            for (int c0 = 0; c0 < bn / 2; c0 += 32) {
                int nc = bn / 2 - c0 < 32 ? bn / 2 - c0 : 32;
                for (int i = 0; i < 32; i++)
                    for (int r = 0; r < nc; r++) {
                        int row = 32 * (warp % 4) + i, e0 = 2 * (c0 + r);
                        regs[i][r] =
                            (uint32_t)to16(pm[row * bn + e0], bf16) | (uint32_t)to16(pm[row * bn + e0 + 1], bf16) << 16;
                    }
                tmem_st(warp, lanes + (uint32_t)(p.tmem_p_col + b * bn / 2 + c0), nc, regs);
            }
        }

        /* O = P V: A from P[b] in tensor memory */
        fj_sm100_desc_strides(&p, 1, &lbo, &sbo);
        for (int ks = 0; ks < p.k_steps_pv; ks++) {
            int pc, vo;
            fj_sm100_pv_step(&p, ks, &pc, &vo);
            mma(ocol, p.tmem_p_col + b * bn / 2 + pc, 0,
                fj_tc05_sdesc((uint32_t)p.v_off + kv + (uint32_t)vo, (uint32_t)lbo, (uint32_t)sbo, w), idesc_pv, ks > 0);
        }

        /* correction / epilogue warps: thread i of warp w reads row 32 (w % 4) + i of the tile's O */
        for (int warp = corr0; warp < corr0 + 4; warp++) {
            uint32_t lanes = fj_tc05_taddr(fj_sm100_lane_base(warp), 0);
            for (int c0 = 0; c0 < d; c0 += 32) {
                tmem_ld(warp, lanes + (uint32_t)(ocol + c0), 32, regs);
                for (int i = 0; i < 32; i++)
                    for (int r = 0; r < 32; r++) {
                        int row = 32 * (warp % 4) + i, col = c0 + r;
                        double o = 0;
                        for (int x = 0; x < bn; x++) o += (double)pm[row * bn + x] * v[x * d + col];
                        assert_true(fbits(regs[i][r]) == (float)o);
                    }
            }
        }
    }
    assert_int_equal(g_bad_lane, 0);
    /* S, O, P columns inside the allocation and apart */
    assert_true(p.tmem_p_col + bn <= p.tmem_cols && p.tmem_cols <= 512);
    assert_true(p.tmem_o_col >= 2 * bn && p.tmem_p_col >= fj_sm100_o_col(&p, pp ? 1 : 0) + d);
    free(q), free(kk), free(v), free(s_ref), free(pm);
}

static void test_layouts(void **state)
{
    (void)state;
    const int dims[5] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++) {
        run_config(dims[i], 1, 0);
        run_config(dims[i], 0, 0);
        if (dims[i] <= 128) run_config(dims[i], 1, 1), run_config(dims[i], 0, 1); /* two query tiles in flight */
    }
}

/* The interpreter itself catches a wrong layout: a K-step of 16 B instead of 32 B, a warp reading another
 * warp's lanes. */
static void test_interpreter_catches(void **state)
{
    (void)state;
    g_bad_lane = 0;
    static uint32_t regs[32][128];
    tmem_ld(5, fj_tc05_taddr(0, 0), 1, regs); /* warp 5 may read lanes 32-63 only */
    assert_int_equal(g_bad_lane, 1);
    /* a descriptor off by 16 B reads other elements */
    memset(g_smem, 0, sizeof g_smem);
    float t[8 * 64];
    for (int i = 0; i < 8 * 64; i++) t[i] = (float)(i % 13);
    tma_tile(0, 8, 64, 128, t, 1);
    sdesc good = decode(fj_tc05_sdesc(0, 16, 1024, 128)), off = decode(fj_tc05_sdesc(16, 16, 1024, 128));
    assert_true(operand(&good, 0, 3, 5, 1) == t[3 * 64 + 5]);
    assert_true(operand(&off, 0, 3, 5, 1) != t[3 * 64 + 5]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_interpreter_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
