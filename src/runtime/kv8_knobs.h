/*
 * kv8_knobs.h - the FP8 K/V cache decode knobs a context reads from the environment at creation (kv8_knobs.c),
 * validated: a value the library does not know fails the context with FAJIT_ERR_INVALID_ARGUMENT naming the
 * variable, the value and the accepted ones. They pick between decode kernels for timing (bench/kv8_sweep.sh):
 *   FAJIT_KV8_WIDEN   cvt (or unset: the default) | int | intk | intv   decode variant bits KV8_INT_K / KV8_INT_V
 *   FAJIT_KV8_DIRECT  0 (or unset) | 1                                  decode variant bit KV8_DIRECT (kv8_frag.c)
 *   FAJIT_KV8_TILE    heuristic (or unset) | rows                       the decode tile by the rows a CTA holds
 * With WIDEN or DIRECT set, every FP8 K/V call runs the decode variant (decode.c), so the bits reach each call.
 */
#ifndef FJ_KV8_KNOBS_H
#define FJ_KV8_KNOBS_H

#include "fajit.h"

typedef struct fj_kv8_knobs {
    unsigned variant; /* FJ_VARIANT_KV8_INT_K / _INT_V / _DIRECT bits */
    int tile_rows;    /* 1: FAJIT_KV8_TILE=rows (fj_kv8_rows_tile), 0: the plain heuristic's tile */
} fj_kv8_knobs;

/* The three variables' values (NULL = unset) -> *out; FAJIT_ERR_INVALID_ARGUMENT on an unknown value. */
fajit_status fj_kv8_knobs_parse(const char *widen, const char *direct, const char *tile, fj_kv8_knobs *out);

/* FAJIT_KV8_TILE=rows: the sm_80 decode tile for `rows` query rows a KV head's CTA holds (the GQA group x seqlen_q
 * when packed, else seqlen_q). rows <= 16: br16 w2 cw2 (one 16-row fragment, a warp pair splitting the keys); rows
 * <= 32: br32 w4 cw2; both bc64 s4. Nq 1 decode of the table's rows has 1, 4 or 8 rows: a br64 tile runs 4 warps of
 * which 3 hold no row, each reading (widening: LDSM) or converting (kv8direct: F2FP) the whole K / V tile again. Sets
 * block_m, block_n, stages, warps, col_warps and clears the swizzle (the heuristic fills it); returns 0 and leaves
 * cfg alone for more rows. */
int fj_kv8_rows_tile(long long rows, fajit_config *cfg);

#endif
