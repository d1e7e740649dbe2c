/*
 * arch.c - the target table (see arch.h). Shared-memory limits are the per-block opt-in maxima
 * (cudaDevAttrMaxSharedMemoryPerBlockOptin) of each compute capability.
 */
#include "arch.h"

#include <stddef.h>
#include <string.h>

#define CAPS_AMPERE (FJ_CAP_MMA_SYNC | FJ_CAP_CP_ASYNC | FJ_CAP_LDMATRIX)
#define CAPS_HOPPER (CAPS_AMPERE | FJ_CAP_STMATRIX | FJ_CAP_TMA | FJ_CAP_CVT_E4M3 | FJ_CAP_GRIDDEP)

static const fj_arch_info k_arch_table[] = {
    /* name      sm   ISA     smem/block  caps                                              path */
    {"sm_80", 80, 7, 0, 166912, CAPS_AMPERE, FAJIT_ARCH_SM80},
    {"sm_86", 86, 7, 1, 101376, CAPS_AMPERE, FAJIT_ARCH_AUTO},
    {"sm_87", 87, 7, 4, 166912, CAPS_AMPERE, FAJIT_ARCH_AUTO},
    {"sm_89", 89, 7, 8, 101376, CAPS_AMPERE, FAJIT_ARCH_AUTO},
    {"sm_90", 90, 7, 8, 232448, CAPS_HOPPER, FAJIT_ARCH_AUTO},
    {"sm_90a", 90, 8, 0, 232448, CAPS_HOPPER | FJ_CAP_WGMMA | FJ_CAP_SETMAXNREG, FAJIT_ARCH_SM90A},
    {"sm_100", 100, 8, 6, 232448, CAPS_HOPPER, FAJIT_ARCH_AUTO},
    {"sm_100a", 100, 8, 6, 232448, CAPS_HOPPER | FJ_CAP_SETMAXNREG | FJ_CAP_TCGEN05, FAJIT_ARCH_SM100A},
    {"sm_120", 120, 8, 7, 101376, CAPS_AMPERE | FJ_CAP_STMATRIX | FJ_CAP_CVT_E4M3 | FJ_CAP_GRIDDEP, FAJIT_ARCH_AUTO},
};

const fj_arch_info *fj_arch_table(int *n)
{
    if (n) *n = (int)(sizeof k_arch_table / sizeof k_arch_table[0]);
    return k_arch_table;
}

const fj_arch_info *fj_arch_find(const char *name)
{
    int n;
    const fj_arch_info *t = fj_arch_table(&n);
    if (!name) return NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

const fj_arch_info *fj_arch_for_device(int major, int minor)
{
    int n, sm = major * 10 + minor;
    const fj_arch_info *t = fj_arch_table(&n);
    const fj_arch_info *best = NULL;
    /* exact plain row first; else the closest lower plain row of the same major */
    for (int i = 0; i < n; i++) {
        size_t len = strlen(t[i].name);
        if (t[i].name[len - 1] == 'a') continue;
        if (t[i].sm == sm) return &t[i];
        if (t[i].sm / 10 == major && t[i].sm < sm && (!best || t[i].sm > best->sm)) best = &t[i];
    }
    return best;
}

const fj_arch_info *fj_arch_of_path(fajit_arch path)
{
    int n;
    const fj_arch_info *t = fj_arch_table(&n);
    if (path == FAJIT_ARCH_AUTO) return NULL;
    for (int i = 0; i < n; i++)
        if (t[i].path == path) return &t[i];
    return NULL;
}

const char *fj_arch_path_name(fajit_arch path)
{
    const fj_arch_info *a = fj_arch_of_path(path);
    if (path == FAJIT_ARCH_AUTO) return "auto";
    return a ? a->name : "?";
}

int fj_arch_path_smem_max(fajit_arch path)
{
    int n, best = 0;
    const fj_arch_info *t = fj_arch_table(&n), *a = fj_arch_of_path(path);
    if (!a) return 0;
    size_t len = strlen(a->name);
    if (a->name[len - 1] == 'a') return a->smem_per_block; /* "a" targets run on themselves only */
    for (int i = 0; i < n; i++)
        if (t[i].sm >= a->sm && (t[i].caps & a->caps) == a->caps && t[i].smem_per_block > best) best = t[i].smem_per_block;
    return best;
}
