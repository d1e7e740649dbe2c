/*
 * test_kv8_frag.c - FP8 K/V decode with the MMA fragments straight from the e4m3 tiles (codegen/kv8_frag.c, decode
 * variant kv8direct), proved on the CPU: a small warp interpreter of ldmatrix.x4 (.trans), prmt, cvt.rn.f16x2.e4m3x2,
 * the integer widening (prmt with sign replication, shl, and) and mma.sync.m16n8k16 as the PTX ISA defines them
 * (ldmatrix: lane 8m + r gives the address of row r of matrix m, lane 4r + w receives word w of that row, or with
 * .trans the b16 elements (2w, r), (2w + 1, r); mma m16n8k16 A a0..a7 at (g, 2t..) (g + 8, 2t..) (g, 2t + 8..)
 * (g + 8, 2t + 8..), B b0..b3 at (2t.., g) (2t + 8.., g), C c0..c3 at (g, 2t..) (g + 8, 2t..)) runs the fragment
 * sequence the emitter issues - its lane patterns, swizzle, XOR-at-use addresses, prmt selectors and Q's permuted
 * loads from kv8_frag.h, O's columns from the plan's fragment descriptor - over random e4m3 K / V tiles, and S = QK^T
 * and O = PV must equal a float64 reference exactly (every input and product is exact; sums of at most 256 such
 * terms too). For d64 / d128 / d256, one warp and warp pairs, block_n 32 / 64, cvt and integer widening.
 * Run: ctest --test-dir build -R test_kv8_frag
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/backend.h"
#include "codegen/kv8_frag.h"

#define MAXD 256
#define MAXN 64

static uint64_t g_seed = 0x5eed1234abcdull;
static uint32_t rnd(void)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_seed >> 33);
}

static double e4m3_value(unsigned b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

static double f16_value(unsigned h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return s ? -v : v;
}

/* PTX prmt.b32 (default mode): byte i of d is byte (nibble i & 7) of {b, a}, or its sign in all 8 bits (nibble & 8). */
static uint32_t prmt(uint32_t a, uint32_t b, unsigned sel)
{
    uint64_t x = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        unsigned s = (sel >> (4 * i)) & 15, byte = (unsigned)(x >> (8 * (s & 7))) & 255;
        if (s & 8) byte = byte & 128 ? 255 : 0;
        d |= (uint32_t)byte << (8 * i);
    }
    return d;
}

/* One 16-bit pair register as two doubles (low, high). cvt: cvt.rn.f16x2.e4m3x2 of the b16 half `half` of w (its
 * low byte -> the low f16); integer: kv8.c's f16 widening of prmt(w, 0, sel), x 2^8 (the unit it folds away). */
typedef struct pair {
    double lo, hi;
} pair;

static pair cvt_half(uint32_t w, int half)
{
    unsigned b = (w >> (16 * half)) & 0xFFFF;
    return (pair){e4m3_value(b & 255), e4m3_value(b >> 8)};
}

static pair widen_int(uint32_t w, unsigned sel)
{
    uint32_t d = (prmt(w, 0, sel) << 7) & 0xBF80BF80u;
    return (pair){f16_value(d & 0xFFFF) * 256.0, f16_value(d >> 16) * 256.0};
}

/* ldmatrix.x4 (.trans): out[lane][m] from the row addresses lanes give (addr[lane]), smem bytes. */
static void ldmatrix_x4(const unsigned char *smem, const uint32_t addr[32], int trans, uint32_t out[32][4])
{
    for (int m = 0; m < 4; m++)
        for (int lane = 0; lane < 32; lane++) {
            int r = lane / 4, w = lane % 4;
            if (!trans) {
                const unsigned char *row = smem + addr[8 * m + r] + 4 * w;
                out[lane][m] = (uint32_t)row[0] | (uint32_t)row[1] << 8 | (uint32_t)row[2] << 16 | (uint32_t)row[3] << 24;
            } else { /* elements (2w, r), (2w + 1, r): b16 r of rows 2w, 2w + 1 */
                const unsigned char *r0 = smem + addr[8 * m + 2 * w] + 2 * r, *r1 = smem + addr[8 * m + 2 * w + 1] + 2 * r;
                out[lane][m] = (uint32_t)r0[0] | (uint32_t)r0[1] << 8 | (uint32_t)r1[0] << 16 | (uint32_t)r1[1] << 24;
            }
        }
}

/* mma.sync.m16n8k16 of a warp: a[lane][4] and b[lane][2] as pairs, c[lane][4] accumulated. */
static void mma(const pair a[32][4], const pair b[32][2], double c[32][4])
{
    double A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; i++) {
            int row = g + 8 * (i & 1), col = 2 * t + 8 * (i >> 1);
            A[row][col] = a[lane][i].lo, A[row][col + 1] = a[lane][i].hi;
        }
        for (int i = 0; i < 2; i++) B[2 * t + 8 * i][g] = b[lane][i].lo, B[2 * t + 8 * i + 1][g] = b[lane][i].hi;
    }
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; i++) {
            int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
            for (int kk = 0; kk < 16; kk++) c[lane][i] += A[row][kk] * B[kk][col];
        }
    }
}

typedef struct setup {
    int d, bn, pairs, cvt;
    fj_plan plan;
    unsigned char k8[MAXN][MAXD], v8[MAXN][MAXD];
    double q[16][MAXD], p[16][MAXN];
    unsigned char ksm[MAXN * MAXD], vsm[MAXN * MAXD]; /* the e4m3 tiles as the copies lay them out */
    unsigned char qsm[16 * 2 * MAXD];                 /* the 16-bit Q tile (sm80.c's swizzle), f16 */
} setup;

/* A random e4m3 byte, NaN patterns (0x7F, 0xFF) excluded. */
static unsigned char rnd_e4m3(void)
{
    unsigned b;
    do b = rnd() & 255;
    while ((b & 127) == 127);
    return (unsigned char)b;
}

/* A random f16 value with 4 significant bits (exact in every product here), as its bits. */
static unsigned rnd_f16(double *v)
{
    int m = (int)(rnd() % 16), e = (int)(rnd() % 6) - 3, s = rnd() & 1;
    double x = ldexp(1.0 + m / 16.0, e) * (s ? -1 : 1);
    *v = x;
    int ex = e + 15;
    return (unsigned)(s << 15 | ex << 10 | m << 6);
}

static void fill(setup *s)
{
    int d = s->d, m = s->plan.swz_mask, rb = 2 * d;
    for (int r = 0; r < s->bn; r++)
        for (int c = 0; c < d; c++) {
            s->k8[r][c] = rnd_e4m3(), s->v8[r][c] = rnd_e4m3();
            int pc = fj_kv8d_chunk(d, r, c / 16);
            s->ksm[r * d + pc * 16 + c % 16] = s->k8[r][c];
            s->vsm[r * d + pc * 16 + c % 16] = s->v8[r][c];
        }
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < d; c++) { /* chunk c / 8 of row r at (c / 8) ^ (r & m), as sm80.c copies Q */
            unsigned h = rnd_f16(&s->q[r][c]);
            int off = r * rb + (((c / 8) ^ (r & m)) * 16) + 2 * (c % 8);
            s->qsm[off] = (unsigned char)(h & 255), s->qsm[off + 1] = (unsigned char)(h >> 8);
        }
        for (int c = 0; c < s->bn; c++) rnd_f16(&s->p[r][c]);
    }
}

/* The XOR-at-use address of chunk constant c from lane base L (sm80.c's trick, kv8_frag.c's xor_addr). */
static uint32_t at(uint32_t L, int c, int mask, int imm) { return (L ^ (uint32_t)((c & mask) << 4)) + (uint32_t)(imm + (c - (c & mask)) * 16); }

/* Q's A fragments of k-step ks for every lane, as fj_kv8d_q_frag loads them (ld.shared.v2 {a0a1, a4a5} of rows g,
 * g + 8), checked against fj_kv8d_q_dim. */
static void q_frags(const setup *s, int ks, pair a[32][4])
{
    int m = s->plan.swz_mask, rb = 2 * s->d;
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4;
        uint32_t L = (uint32_t)(g * rb + ((((t >> 1) ^ (g & m)) << 4) | (t & 1) * 8));
        for (int h = 0; h < 2; h++) {
            uint32_t addr = at(L, 2 * ks, m, h * 8 * rb);
            for (int v = 0; v < 2; v++) { /* v = 0: register h (a0a1 / a2a3), v = 1: register h + 2 */
                const unsigned char *x = s->qsm + addr + 4 * v;
                pair pr = {f16_value((unsigned)x[0] | (unsigned)x[1] << 8), f16_value((unsigned)x[2] | (unsigned)x[3] << 8)};
                int reg = h + 2 * v, row = g + 8 * h;
                assert_true(pr.lo == s->q[row][16 * ks + fj_kv8d_q_dim(t, reg, 0)]);
                assert_true(pr.hi == s->q[row][16 * ks + fj_kv8d_q_dim(t, reg, 1)]);
                a[lane][reg] = pr;
            }
        }
    }
}

/* S = QK^T of warp h's keys (h x bn / 2.. with pairs), as fj_kv8d_mma_qk issues it; compared with the reference. */
static void check_qk(const setup *s, int h)
{
    int d = s->d, m8 = fj_kv8d_swz_mask(d), nfs = s->plan.n_frags_s, key0 = h * s->bn / 2;
    static double acc[16][32][4];
    memset(acc, 0, sizeof acc);
    uint32_t L[32];
    for (int lane = 0; lane < 32; lane++) {
        int row, cb;
        fj_kv8d_k_lane(lane, &row, &cb);
        row += key0;
        L[lane] = (uint32_t)(row * d + ((cb ^ fj_kv8d_swz(d, row)) << 4));
    }
    for (int kp = 0; kp < d / 32; kp++) {
        int c = 2 * kp;
        pair qa[2][32][4];
        q_frags(s, c, qa[0]), q_frags(s, c + 1, qa[1]);
        for (int np = 0; np < nfs / 2; np++) {
            uint32_t addr[32], raw[32][4];
            for (int lane = 0; lane < 32; lane++) addr[lane] = at(L[lane], c, m8, np * 16 * d);
            ldmatrix_x4(s->ksm, addr, 0, raw);
            for (int mm = 0; mm < 4; mm++) { /* matrix mm: n8 tile 2np + mm / 2, k-step c + mm % 2 */
                pair b[32][2];
                for (int lane = 0; lane < 32; lane++) {
                    b[lane][0] = s->cvt ? cvt_half(raw[lane][mm], 0) : widen_int(raw[lane][mm], FJ_KV8D_SEL_K_LO_INT);
                    b[lane][1] = s->cvt ? cvt_half(raw[lane][mm], 1) : widen_int(raw[lane][mm], FJ_KV8D_SEL_K_HI_INT);
                }
                mma((const pair(*)[4])qa[mm % 2], (const pair(*)[2])b, acc[2 * np + mm / 2]);
            }
        }
    }
    for (int nt = 0; nt < nfs; nt++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
                int row = lane / 4 + 8 * (i >> 1), key = key0 + 8 * nt + 2 * (lane % 4) + (i & 1);
                double ref = 0;
                for (int x = 0; x < d; x++) ref += s->q[row][x] * e4m3_value(s->k8[key][x]);
                if (acc[nt][lane][i] != ref)
                    fail_msg("d%d bn%d pairs %d %s warp %d: S[%d][%d] = %g, want %g", d, s->bn, s->pairs,
                             s->cvt ? "cvt" : "int", h, row, key, acc[nt][lane][i], ref);
            }
}

/* O += PV of warp h (its dims h x d / 2.. with pairs; every key, its own k-steps first) as fj_kv8d_mma_pv issues it;
 * each value's column from the plan's fragment descriptor (what the stores write), compared with the reference. */
static void check_pv(const setup *s, int h)
{
    const fj_plan *p = &s->plan;
    int d = s->d, m8 = fj_kv8d_swz_mask(d), nfo = p->n_frags_o, own = p->k_steps_pv / p->col_warps;
    static double acc[32][32][4];
    memset(acc, 0, sizeof acc);
    for (int ks = 0; ks < p->k_steps_pv; ks++) {
        int kh = ks < own ? h : 1 - h, key0 = kh * s->bn / 2 * s->pairs + 16 * (ks % own);
        uint32_t L[32];
        for (int lane = 0; lane < 32; lane++) {
            int row, cb;
            fj_kv8d_v_lane(lane, &row, &cb);
            row += kh * s->bn / 2 * s->pairs;
            L[lane] = (uint32_t)(row * d + (((cb + h * s->pairs * d / 32) ^ fj_kv8d_swz(d, row)) << 4));
        }
        pair pa[32][4]; /* P's A fragment of keys key0.. (the 16-bit kernel's packing) */
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
                int row = lane / 4 + 8 * (i & 1), col = key0 + 2 * (lane % 4) + 8 * (i >> 1);
                pa[lane][i] = (pair){s->p[row][col], s->p[row][col + 1]};
            }
        for (int cp = 0; cp < nfo / 4; cp++) {
            int c = 2 * cp;
            uint32_t addr[32], raw[32][4];
            for (int lane = 0; lane < 32; lane++) addr[lane] = at(L[lane], c, m8, (ks % own) * 16 * d);
            ldmatrix_x4(s->vsm, addr, 1, raw);
            for (int sx = 0; sx < 2; sx++)
                for (int odd = 0; odd < 2; odd++) {
                    pair b[32][2];
                    for (int lane = 0; lane < 32; lane++) {
                        uint32_t lo = raw[lane][2 * sx], hi = raw[lane][2 * sx + 1];
                        if (s->cvt) {
                            uint32_t w = prmt(lo, hi, odd ? FJ_KV8D_SEL_V_ODD_CVT : FJ_KV8D_SEL_V_EVEN_CVT);
                            b[lane][0] = cvt_half(w, 0), b[lane][1] = cvt_half(w, 1);
                        } else {
                            unsigned sel = odd ? FJ_KV8D_SEL_V_ODD_INT : FJ_KV8D_SEL_V_EVEN_INT;
                            b[lane][0] = widen_int(lo, sel), b[lane][1] = widen_int(hi, sel);
                        }
                    }
                    mma((const pair(*)[4])pa, (const pair(*)[2])b, acc[2 * (c + sx) + odd]);
                }
        }
    }
    fj_frag_desc fd;
    fj_frag_desc_m16n8(p, &fd);
    static int seen[16][MAXD];
    memset(seen, 0, sizeof seen);
    for (int lane = 0; lane < 32; lane++) {
        int g = lane / 4, t = lane % 4, col_base = 4 * t + h * d / 2;
        for (int r = 0; r < fd.rows; r++)
            for (int v = 0; v < fd.o_vals; v++) {
                int reg = fd.o_reg(p, r, v), row = g + fd.row_off(p, r), col = col_base + fd.o_col_off(p, v);
                if (v % 2 == 0) assert_int_equal(fd.o_col_off(p, v + 1), fd.o_col_off(p, v) + 1); /* stores' pairs */
                double ref = 0;
                for (int key = 0; key < s->bn; key++) ref += s->p[row][key] * e4m3_value(s->v8[key][col]);
                seen[row][col]++;
                if (acc[reg / 4][lane][reg % 4] != ref)
                    fail_msg("d%d bn%d pairs %d %s warp %d: O[%d][%d] = %g, want %g", d, s->bn, s->pairs,
                             s->cvt ? "cvt" : "int", h, row, col, acc[reg / 4][lane][reg % 4], ref);
            }
    }
    for (int row = 0; row < 16; row++)
        for (int col = h * d / 2 * s->pairs; col < (s->pairs ? (h + 1) * d / 2 : d); col++) assert_int_equal(seen[row][col], 1);
}

static void test_fragments(void **state)
{
    (void)state;
    static setup s;
    int runs = 0;
    for (int di = 0; di < 3; di++)
        for (int pairs = 0; pairs < 2; pairs++)
            for (int bn = 32; bn <= 64; bn *= 2)
                for (int cvt = 0; cvt < 2; cvt++) {
                    memset(&s, 0, sizeof s);
                    s.d = 64 << di, s.bn = bn, s.pairs = pairs, s.cvt = cvt;
                    /* d256 without pairs plans with 4 row warps (O's 128 registers); warp 0 is simulated */
                    int warps = pairs ? 2 : s.d == 256 ? 4 : 1;
                    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_F16, .kv_dtype = FAJIT_DTYPE_E4M3,
                                      .head_dim = s.d, .block_m = 16 * warps / (pairs + 1), .block_n = bn, .stages = 2,
                                      .warps = warps, .col_warps = pairs ? 2 : 1, .swizzle = s.d == 64 && pairs ? 64 : 128};
                    if (fj_plan_build_variant(&c, FJ_VARIANT_KV8_DIRECT, &s.plan) != FAJIT_OK)
                        fail_msg("d%d bn%d pairs %d: %s", s.d, bn, pairs, fajit_errmsg());
                    assert_int_equal(s.plan.kv8_direct, 1);
                    assert_int_equal(s.plan.kv_slots, 0); /* no 16-bit K / V tile */
                    fill(&s);
                    for (int h = 0; h <= pairs; h++) check_qk(&s, h), check_pv(&s, h);
                    runs++;
                }
    printf("kv8direct fragments: %d configs (d64/128/256 x 1 warp / pairs x bn 32/64 x cvt / integer), S and O exact\n",
           runs);
    assert_int_equal(runs, 24);
}

/* The swizzle puts 8 consecutive rows of one chunk in 8 different 16-byte bank groups (ldmatrix without conflicts), and
 * the copy and the reads agree on it (one function). */
static void test_swizzle_banks(void **state)
{
    (void)state;
    for (int d = 64; d <= 256; d *= 2)
        for (int r0 = 0; r0 < 64; r0 += 8)
            for (int c = 0; c < d / 16; c++) {
                int used = 0;
                for (int r = r0; r < r0 + 8; r++) {
                    int grp = ((r * d + fj_kv8d_chunk(d, r, c) * 16) / 16) % 8;
                    assert_false(used & (1 << grp));
                    used |= 1 << grp;
                }
            }
}

/* kv8direct is refused without an FP8 K/V cache and for head dims other than 64 / 128 / 256, with the reason. */
static void test_refused(void **state)
{
    (void)state;
    fj_plan p;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 64, .block_n = 64,
                      .stages = 2, .warps = 4, .swizzle = 128};
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_KV8_DIRECT, &p), FAJIT_ERR_INVALID_CONFIG);
    assert_non_null(strstr(fajit_errmsg(), "kv8direct"));
    c.kv_dtype = FAJIT_DTYPE_E4M3, c.head_dim = 96, c.swizzle = 64;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_KV8_DIRECT, &p), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "head_dim 96"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swizzle_banks),
        cmocka_unit_test(test_fragments),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
