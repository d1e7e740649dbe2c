/*
 * half.c - bf16 / f16 <-> float conversions, round-to-nearest-even (see half.h).
 *
 * Works on the IEEE-754 bit patterns so the result does not depend on the host's rounding mode or on
 * compiler support for _Float16.
 */
#include "half.h"

#include <math.h>

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of a float: add half an ulp (less one when the kept lsb is even) and cut. */
uint16_t fj_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float fj_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

/* f16 subnormal (|x| < 2^-14): the result counts units of 2^-24; round the shifted significand. */
static uint16_t f16_subnormal(uint32_t a)
{
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    if (e < 102) return 0; /* below 2^-25: rounds to zero (2^-25 itself is a tie, handled below) */
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)q; /* q == 0x400 is the smallest normal, which is the right encoding */
}

uint16_t fj_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (tie above 65504) -> inf */
    if (a < 0x38800000u) return (uint16_t)(sign | f16_subnormal(a));
    a += 0xfffu + ((a >> 13) & 1u);                           /* round at bit 13, ties to even */
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));      /* rebias exponent 127 -> 15 */
}

float fj_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float mag = (float)m * 0x1p-24f; /* zero or subnormal, exact */
        return sign ? -mag : mag;
    }
    if (e == 31) return f32_from_bits(sign | 0x7f800000u | (m << 13));
    return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t fj_half_from_f32(fajit_dtype dtype, float f)
{
    return dtype == FAJIT_DTYPE_F16 ? fj_f32_to_f16(f) : fj_f32_to_bf16(f);
}

float fj_half_to_f32(fajit_dtype dtype, uint16_t h)
{
    return dtype == FAJIT_DTYPE_F16 ? fj_f16_to_f32(h) : fj_bf16_to_f32(h);
}

double fj_half_unit_roundoff(fajit_dtype dtype) { return dtype == FAJIT_DTYPE_F16 ? 0x1p-11 : 0x1p-9; }

void fj_half_fill_normal(fajit_dtype dtype, uint16_t *dst, size_t n, uint64_t seed)
{
    uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i += 2) {
        double u[2];
        for (int j = 0; j < 2; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u[j] = ((double)(x >> 11) + 0.5) * 0x1p-53; /* (0, 1) */
        }
        double r = sqrt(-2.0 * log(u[0])), a = 6.283185307179586 * u[1];
        float z[2] = {(float)(r * cos(a)), (float)(r * sin(a))};
        for (int j = 0; j < 2 && i + (size_t)j < n; j++)
            dst[i + (size_t)j] = fj_half_from_f32(dtype, fabsf(z[j]) < 1e-3f ? 0.5f : z[j]);
    }
}

uint8_t fj_e4m3_from_f64(double x)
{
    if (x != x) return 0x7F;
    uint8_t s = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    if (a >= 448.0) return s | 0x7E;
    if (a < 0x1p-6) return s | (uint8_t)nearbyint(a * 512.0); /* subnormal m x 2^-9 (8 is 2^-6, the first normal) */
    int e;
    double fr = frexp(a, &e); /* a = 1.m x 2^(e - 1), biased exponent e + 6 */
    int m = (int)nearbyint((2.0 * fr - 1.0) * 8.0), be = e + 6;
    if (m == 8) m = 0, be++;
    return (uint8_t)(s | be << 3 | m); /* a < 448: be <= 15, and 15 with m = 7 (480) is never reached */
}

double fj_e4m3_to_f64(uint8_t b)
{
    int be = (b >> 3) & 15, m = b & 7;
    if (be == 15 && m == 7) return NAN;
    double v = be ? ldexp(1.0 + m / 8.0, be - 7) : ldexp(m / 8.0, -6);
    return b & 0x80 ? -v : v;
}

uint8_t fj_f32_to_e4m3(float f) { return fj_e4m3_from_f64((double)f); }

float fj_e4m3_to_f32(uint8_t b) { return (float)fj_e4m3_to_f64(b); }
