/*
 * config_fill.h - fajit_config_fill's machinery for the callers inside fajit that know more than the
 * public call can be told: a compile target without a device (fagen cubin --sm sm_80) and a decode
 * variant (fagen ptx --variant split). See config_fill.c.
 */
#ifndef FJ_CONFIG_FILL_H
#define FJ_CONFIG_FILL_H

#include "codegen/arch.h"
#include "fajit.h"

/*
 * fajit_config_fill with a goal beyond the plain kernel on ctx's device:
 *   target   the GPU the config will be compiled for (its register allocation, its shared memory), or
 *            NULL for ctx's device (none without a ctx: the path's own limits)
 *   variant  FJ_VARIANT_* bits of codegen.h the plan must take (0 = the plain kernel; combine alone reads
 *            as 0, its plan takes any tile)
 * Fields the caller set are kept; zero fields are filled with the heuristic's choice, or when that breaks
 * a rule, with the nearest config that passes. When none keeps the fields the caller set, fails naming
 * the field (or fields) that rule every config out, with the nearest config's own refusal.
 */
fajit_status fj_config_fill_for(fajit_context *ctx, const fajit_shape *shape, const fj_arch_info *target,
                                unsigned variant, fajit_config *cfg);

/* fajit_config_fill from the built-in table alone, never a tuned winner: the config a call would run without
 * fagen tune, which is what the prebuilt kernels were built from (prebuilt_set.c, policy.c). */
fajit_status fj_config_fill_default(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg);

#endif
