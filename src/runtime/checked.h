/*
 * checked.h - overflow-checked 64-bit arithmetic for sizes computed from caller values (shapes, strides,
 * byte counts). Each returns 0 and stores the result, or returns 1 (overflow) and leaves *out alone.
 * gcc and clang builtins: no undefined behaviour, whatever the operands.
 */
#ifndef FJ_CHECKED_H
#define FJ_CHECKED_H

#include <stdint.h>

static inline int fj_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return 1;
    *out = r;
    return 0;
}

static inline int fj_add_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return 1;
    *out = r;
    return 0;
}

/* a * b * c */
static inline int fj_mul3_i64(int64_t a, int64_t b, int64_t c, int64_t *out)
{
    int64_t ab;
    return fj_mul_i64(a, b, &ab) || fj_mul_i64(ab, c, out);
}

#endif
