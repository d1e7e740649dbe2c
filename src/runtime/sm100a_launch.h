/*
 * sm100a_launch.h - the rule for launching the sm_100a path's kernels (sm100a_launch.c), kept apart from the device so
 * it is unit-tested without a GPU (tests/test_sm100a_launch.c). No sm_100a kernel has run on hardware (the path is
 * checked by ptxas, SASS and the pipeline simulator only); on a compute capability 10.0 GPU libfajit launches them
 * anyway, so a B200 runs them by default, and FAJIT_SM100A_LAUNCH=0 turns that off:
 *   FAJIT_SM100A_LAUNCH  unset, "" or 1: on (the default) | 0: off - the automatic path takes sm_80 on a 10.0 GPU and
 *                        a kernel asked for on sm_100a is refused (FAJIT_ERR_UNSUPPORTED, saying why and how)
 * Any other value fails the context's creation with FAJIT_ERR_INVALID_ARGUMENT (like the FP8 K/V knobs).
 */
#ifndef FJ_SM100A_LAUNCH_H
#define FJ_SM100A_LAUNCH_H

#include "fajit.h"

/* FAJIT_SM100A_LAUNCH's value (NULL = unset) -> *on (1 or 0); FAJIT_ERR_INVALID_ARGUMENT on another value. */
fajit_status fj_sm100a_launch_parse(const char *value, int *on);

/* The path FAJIT_ARCH_AUTO tries first on a device of compute capability major.minor: sm_90a on 9.0, sm_100a on 10.0
 * when launching it is on, else sm_80 (the caller falls back to sm_80 when the first path cannot take a problem). */
fajit_arch fj_auto_path(int major, int minor, int sm100a_on);

/* Whether an sm_100a kernel may run on device `device` (name, compute capability major.minor) with launching `on`:
 * FAJIT_OK, or FAJIT_ERR_UNSUPPORTED with the reason (off by FAJIT_SM100A_LAUNCH=0; not a 10.0 device: sm_100a code
 * runs on compute capability 10.0 only). */
fajit_status fj_sm100a_launch_check(int major, int minor, int on, int device, const char *name);

#endif
