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
 * 11 issue slots (1 max, 3 add, 6 fma, 1 shift-add) for the 8 MUFU cycles (per warp, per SM sub-partition)
 * of ex2.approx. CLAMP = -126.5 keeps the exponent field >= 0: x <= -126.5 (also -inf) gives a subnormal
 * below 2^-126, where ex2.approx.ftz gives 0; the row sums add with .ftz, so a row that saw only masked
 * scores still sums to l = 0 (softmax.c), and a subnormal P times V is below anything O can resolve.
 */
#ifndef FJ_SOFT_EXP2_H
#define FJ_SOFT_EXP2_H

#include <stdint.h>

#define FJ_SOFT_EXP2_DEG 6
#define FJ_SOFT_EXP2_CLAMP_BITS 0xC2FD0000u /* -126.5f */
#define FJ_SOFT_EXP2_ROUND_BITS 0x4B400000u /* 12582912.0f = 1.5 x 2^23 */

/* c_0 .. c_6, fp32 bits: 1, 0.69314718, 0.24022646, 0.055503286, 0.0096184891, 0.001339993, 0.00015345792 */
static const uint32_t fj_soft_exp2_coef[FJ_SOFT_EXP2_DEG + 1] = {
    0x3F800000u, 0x3F317218u, 0x3E75FDEDu, 0x3D63576Au, 0x3C1D96DEu, 0x3AAFA2B4u, 0x3920E98Cu,
};

#endif
