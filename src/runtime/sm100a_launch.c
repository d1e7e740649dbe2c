/*
 * sm100a_launch.c - when libfajit launches sm_100a kernels (see sm100a_launch.h): on a compute capability 10.0 GPU by
 * default, never elsewhere, and not at all with FAJIT_SM100A_LAUNCH=0.
 */
#include "base/env_word.h"
#include "base/error.h"
#include "sm100a_launch.h"

fajit_status fj_sm100a_launch_parse(const char *value, int *on)
{
    static const fj_env_word words[] = {{"1", 1, "launch sm_100a kernels on a compute capability 10.0 GPU"},
                                        {"0", 0, "never; sm_80 there"},
                                        {NULL, 0, NULL}};
    return fj_env_word_parse("FAJIT_SM100A_LAUNCH", value, words, 1, "1", on);
}

fajit_arch fj_auto_path(int major, int minor, int sm100a_on)
{
    if (major == 9 && minor == 0) return FAJIT_ARCH_SM90A;
    if (major == 10 && minor == 0 && sm100a_on) return FAJIT_ARCH_SM100A;
    return FAJIT_ARCH_SM80;
}

fajit_status fj_sm100a_launch_check(int major, int minor, int on, int device, const char *name)
{
    if (major != 10 || minor != 0)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "the sm_100a path runs only on compute capability 10.0; device %d (%s) is "
                                              "%d.%d: use the sm_80 path (or the automatic one)",
                       device, name, major, minor);
    if (!on)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "the sm_100a path is off (FAJIT_SM100A_LAUNCH=0) on device %d (%s): its "
                                              "kernels have never run on hardware (checked by ptxas, SASS and the "
                                              "pipeline simulator only); unset the variable to launch them, or use "
                                              "the sm_80 path",
                       device, name);
    return FAJIT_OK;
}
