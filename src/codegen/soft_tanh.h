/*
 * soft_tanh.h - softcap's tanh on the FMA units for scores near zero, so that the MUFU (special function unit) runs
 * one instruction a score (the exponential) instead of two. The constants live here so that the emitter (softmax.c:
 * fj_emit_softmax_split, mask.c: fj_emit_softcap_poly) and its CPU model (tests/test_soft_tanh.c) read the same bits.
 *
 * Softcap replaces a score s by c tanh(s x scale / c); with y = s x cs (cs = scale / c, the kernel's cap_scale):
 *   tanh(y) ~= y (A1 + A3 y^2 + A5 y^4)   for |y| <= BOUND (odd, minimax in absolute error on [0, BOUND])
 * folded into s so that no multiply by cs is left per score (b1 = A1 cs, b3 = A3 cs^3, b5 = A5 cs^5, once a tile):
 *   u = s s;  q = fma(u, b5, b3);  q = fma(q, u, b1);  t = q s           2 FMUL + 2 FFMA a score
 * against mul + tanh.approx.f32 (1 FMUL + 1 MUFU, 8 MUFU cycles a warp on its sub-partition).
 * Absolute error of t: 1.74e-5 at most over |y| <= BOUND in fp32 for cs from 2^-20 up (the test), an order under
 * tanh.approx.f32's (relative 2^-10.99, so up to 2.7e-4 at t = 0.54); t is increasing on the interval, so the row max
 * of the raw scores still gives the row max of t.
 * Outside the interval the polynomial is wrong: the kernel takes it for a warp's tile only when every score of the
 * warp satisfies |s| x cs <= BOUND (a vote), and cs >= CS_MIN (so that cs^5 stays a normal fp32 number); else the
 * tile runs tanh.approx as before. BOUND = 0.6 is |s x scale| <= 30 at Gemma 2's c = 50.
 */
#ifndef FJ_SOFT_TANH_H
#define FJ_SOFT_TANH_H

#include <stdint.h>

/* A1, A3, A5 as fp32 bits: 0.99979379, -0.32855241, 0.10491173 (fit 2026-11-28: Lawson iteration in double on
 * 6001 Chebyshev points of [0, 0.6], rounded to fp32) */
static const uint32_t fj_soft_tanh_coef[3] = {0x3F7FF27Cu, 0xBEA83805u, 0x3DD6DBF5u};
#define FJ_SOFT_TANH_BOUND_BITS 0x3F19999Au  /* 0.6f */
#define FJ_SOFT_TANH_CS_MIN_BITS 0x35800000u /* 2^-20 */
#define FJ_SOFT_TANH_MAX_ABS 1.8e-5          /* tests/test_soft_tanh.c */

#endif
