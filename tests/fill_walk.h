/*
 * fill_walk.h - the walk of fajit_config_fill's inputs shared by test_config_fill (unit: every result
 * passes its own check and keeps the fields given, every refusal names a field given) and
 * test_fill_ptxas (ptxas: the results assemble with no spills).
 *
 * Goals: the sm_80 and sm_90a paths without a device, an sm_80 GPU (A100: its register allocation and
 * 163 KiB of shared memory), an sm_90 GPU with the path left to fill, and the sm_80 path with decode
 * variants. Per goal: head dims x masks, each field alone over its whole range as fagen accepts it
 * (--br / --bc 1..1024 in full at d128 noncausal on each path, their multiples of 16 and a few others elsewhere), and pairs of
 * fields over a few values each.
 */
#ifndef FJ_FILL_WALK_H
#define FJ_FILL_WALK_H

#include "fajit.h"

typedef struct fill_goal_desc {
    const char *name;  /* "sm_80 path", "A100", ... */
    fajit_arch arch;   /* the arch given (AUTO: fill picks) */
    const char *sm;    /* the device's sm (a fake context), or NULL: no device */
    int smem;          /* its per-block shared memory */
    unsigned variant;  /* FJ_VARIANT_* bits (fj_config_fill_for), 0 = plain */
} fill_goal_desc;

/* One fill: the goal, the config given (zero fields free), what came back. */
typedef struct fill_case {
    const fill_goal_desc *goal;
    fajit_config given;
    fajit_config out;
    fajit_status st;
    const char *msg; /* fajit_errmsg() of a failure (valid during the callback) */
} fill_case;

typedef void (*fill_walk_fn)(void *user, const fill_case *c);

/* The goals, and the walk over them (full: the whole ranges at every head dim). Returns the fills made,
 * or -1 when a fake context could not be made. */
const fill_goal_desc *fill_walk_goals(int *n);
int fill_walk(int full, fill_walk_fn fn, void *user);

/* "block_m (--br)" / "warps" spellings of a field as the library's messages start them (k_fields order:
 * arch, block_m, block_n, stages, swizzle, warps, col_warps, overlap, pingpong). */
int fill_walk_field(const fajit_config *c, int f);
const char *fill_walk_field_name(int f);
#define FILL_WALK_FIELDS 9

#endif
