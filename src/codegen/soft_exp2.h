/*
 * soft_exp2.h - 2^x on the FMA units instead of the MUFU (special function) unit, for the softmax of kernels
 * whose MUFU is the busiest unit (softcap: tanh and ex2 per score, softmax.c). The constants live here so that
 * the emitter (softmax.c: emit_soft_exp2) and its CPU model (tests/test_soft_exp2.c) read the same bits.
 *
 * Per value, fp32, round to nearest (the model in the test repeats these operations in this order):
 *   x = max(x, CLAMP)                      clamp: -inf (a masked score) and underflow stay finite
 *   r = x + ROUND                          1.5 x 2^23: the low bits of r hold n = round(x)
 *   n = r - ROUND;  f = x - n              both exact; f in [-0.5, 0.5]
 *   p = c6; p = fma(p, f, c_i), i = 5..0   minimax for 2^f on [-0.5, 0.5], relative error 1.9e-9 before
 *                                          rounding; 0.93 ulp at most after the fp32 rounding (the test)
 *   bits(2^x) = bits(p) + (bits(r) << 23)  adds n to the exponent (bits(ROUND) << 23 is 0 mod 2^32)
 * 11 issue slots (1 max, 3 add, 6 fma, 1 shift-add; FJ_SOFT_EXP2_DEG=3: 8) for the 8 MUFU cycles (per warp,
 * per SM sub-partition) of ex2.approx. CLAMP = -126.5 keeps the exponent field >= 0: x <= -126.5 (also -inf) gives a subnormal
 * below 2^-126, where ex2.approx.ftz gives 0; the row sums add with .ftz, so a row that saw only masked
 * scores still sums to l = 0 (softmax.c), and a subnormal P times V is below anything O can resolve.
 */
#ifndef FJ_SOFT_EXP2_H
#define FJ_SOFT_EXP2_H

#include <stdint.h>

#ifndef FJ_SOFT_EXP2_DEG
#define FJ_SOFT_EXP2_DEG 6 /* -DFJ_SOFT_EXP2_DEG=3: the short polynomial below, for an A/B (bench/softcap_ab.sh) */
#endif
#define FJ_SOFT_EXP2_CLAMP_BITS 0xC2FD0000u /* -126.5f */
#define FJ_SOFT_EXP2_ROUND_BITS 0x4B400000u /* 12582912.0f = 1.5 x 2^23 */

#if FJ_SOFT_EXP2_DEG == 6
/* c_0 .. c_6, fp32 bits: 1, 0.69314718, 0.24022646, 0.055503286, 0.0096184891, 0.001339993, 0.00015345792 */
static const uint32_t fj_soft_exp2_coef[FJ_SOFT_EXP2_DEG + 1] = {
    0x3F800000u, 0x3F317218u, 0x3E75FDEDu, 0x3D63576Au, 0x3C1D96DEu, 0x3AAFA2B4u, 0x3920E98Cu,
};
#define FJ_SOFT_EXP2_MAX_REL 1.1920928955078125e-7 /* 2^-23: within 1 ulp (tests/test_soft_exp2.c) */
#elif FJ_SOFT_EXP2_DEG == 3
/* Degree 3, minimax in relative error on [-0.5, 0.5] (fit 2026-11-27, Lawson iteration in double, rounded to fp32):
 * 7.5e-5 (2^-13.7) at most, under bf16's rounding of P (2^-9) and tanh.approx.f32's 2^-10.99 in a softcap kernel.
 * 8 SASS instructions a value (FMNMX, 3 FADD, 3 FFMA, LEA) against the degree-6 form's 11: for softcap, whose
 * MUFU runs a tanh and an ex2 per score (bench/results/softcap-sass-vs-fa3-2026-11-27.md). c_0 is not 1: the
 * error is spread over [-0.5, 0.5], so 2^0 comes out 0.99993. */
static const uint32_t fj_soft_exp2_coef[FJ_SOFT_EXP2_DEG + 1] = {0x3F7FFB4Au, 0x3F31798Du, 0x3E786EF8u, 0x3D61FB72u};
#define FJ_SOFT_EXP2_MAX_REL 7.6e-5
#else
#error "FJ_SOFT_EXP2_DEG: 3 or 6"
#endif

#endif
