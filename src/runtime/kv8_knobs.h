/*
 * kv8_knobs.h - the FP8 K/V cache decode knobs a context reads from the environment at creation (kv8_knobs.c),
 * validated: a value the library does not know fails the context with FAJIT_ERR_INVALID_ARGUMENT naming the
 * variable, the value and the accepted ones. They pick between decode kernels for timing (bench/kv8_sweep.sh):
 *   FAJIT_KV8_WIDEN   cvt (or unset: the default) | int | intk | intv   decode variant bits KV8_INT_K / KV8_INT_V
 *   FAJIT_KV8_DIRECT  unset (default) | 0 | 1                          decode variant bit KV8_DIRECT (kv8_frag.c):
 *                     unset: on where legal (head_dim 64 / 128 / 256 and the tile plans with it), else the widening
 *                     kernel; 0: off (the widening kernel everywhere); 1: on for every FP8 K/V call, refused
 *                     (FAJIT_ERR_UNSUPPORTED) where illegal
 *   FAJIT_KV8_TILE    gone: any value fails (the decode tile by rows is the heuristic's, codegen.h
 *                     fj_config_kv8_decode_tile); a config picks another tile
 * With WIDEN or DIRECT=1 set, every FP8 K/V call runs the decode variant (decode.c), so the bits reach each call.
 */
#ifndef FJ_KV8_KNOBS_H
#define FJ_KV8_KNOBS_H

#include "fajit.h"

typedef struct fj_kv8_knobs {
    unsigned variant; /* FJ_VARIANT_KV8_INT_K / _INT_V / _DIRECT bits */
    int direct;       /* FAJIT_KV8_DIRECT: -1 unset (kv8direct where legal), 0 off, 1 forced (the bit in variant) */
} fj_kv8_knobs;

/* The three variables' values (NULL = unset) -> *out; FAJIT_ERR_INVALID_ARGUMENT on an unknown value. */
fajit_status fj_kv8_knobs_parse(const char *widen, const char *direct, const char *tile, fj_kv8_knobs *out);

#endif
