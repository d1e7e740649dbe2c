/*
 * half.h - bf16 / f16 <-> float conversions on the host, round-to-nearest-even.
 *
 * Used by the references and the check harness to fill inputs and read results; the kernels never
 * call these. Conversions to float are exact; conversions from float round to nearest, ties to even,
 * overflow to infinity (f16 above 65504), keep NaNs quiet and produce f16 subnormals. Pure C, no CUDA.
 */
#ifndef FJ_HALF_H
#define FJ_HALF_H

#include <stdint.h>

#include "fajit.h"

uint16_t fj_f32_to_bf16(float f);
float fj_bf16_to_f32(uint16_t h);
uint16_t fj_f32_to_f16(float f);
float fj_f16_to_f32(uint16_t h);

/* By dtype (FAJIT_DTYPE_F16 or FAJIT_DTYPE_BF16; anything else is treated as BF16). */
uint16_t fj_half_from_f32(fajit_dtype dtype, float f);
float fj_half_to_f32(fajit_dtype dtype, uint16_t h);

/* The same in float (fj_e4m3_from_f64 / fj_e4m3_to_f64 below): the FP8 forward's tests and tuner inputs. */
uint8_t fj_f32_to_e4m3(float f);
float fj_e4m3_to_f32(uint8_t b);

/* Unit roundoff of the dtype: 2^-9 for bf16 (8 significant bits), 2^-11 for f16 (11 bits). */
double fj_half_unit_roundoff(fajit_dtype dtype);

/* n standard-normal values (xorshift64 + Box-Muller, from `seed`; never exactly 0) as dtype halves: the
 * inputs benchmarks time on, distributed like torch.randn's so fajit and its peers see alike data. */
void fj_half_fill_normal(fajit_dtype dtype, uint16_t *dst, size_t n, uint64_t seed);

/* float8 e4m3 (OCP FP8 e4m3fn: bias 7, no infinities, 0x7F / 0xFF NaN): from a double, round to nearest even,
 * saturating to +-448 (NaN in gives NaN); to a double, exact. */
uint8_t fj_e4m3_from_f64(double x);
double fj_e4m3_to_f64(uint8_t b);

#endif
