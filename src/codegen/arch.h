/*
 * arch.h - facts about GPU targets, in one table.
 *
 * Code asks for a capability bit, never compares sm numbers. Two kinds of rows share the table:
 * code-generation paths (FAJIT_ARCH_SM80 / SM90A / SM100A: which PTX target and ISA the generator
 * writes for) and devices a cubin can be built for or a kernel launched on (sm_86, sm_89, ...), whose
 * shared-memory limit decides whether a plan fits.
 */
#ifndef FJ_ARCH_H
#define FJ_ARCH_H

#include "fajit.h"

enum fj_cap {
    FJ_CAP_MMA_SYNC = 1u << 0,   /* mma.sync.m16n8k16 with f16/bf16 inputs (sm_80+) */
    FJ_CAP_CP_ASYNC = 1u << 1,   /* cp.async 16-byte global->shared copies (sm_80+) */
    FJ_CAP_LDMATRIX = 1u << 2,   /* ldmatrix (sm_75+) */
    FJ_CAP_STMATRIX = 1u << 3,   /* stmatrix (sm_90+) */
    FJ_CAP_TMA = 1u << 4,        /* cp.async.bulk.tensor + mbarrier expect_tx (sm_90+) */
    FJ_CAP_WGMMA = 1u << 5,      /* wgmma.mma_async (sm_90a only) */
    FJ_CAP_SETMAXNREG = 1u << 6, /* setmaxnreg (sm_90a, sm_100a) */
    FJ_CAP_TCGEN05 = 1u << 7,    /* tcgen05.* and tensor memory (sm_100a, sm_103a) */
    FJ_CAP_CVT_E4M3 = 1u << 8,   /* cvt.rn.f16x2.e4m3x2 at the row's PTX ISA (sm_90+; sm_89 has it from ISA 8.1 only,
                                  * its row writes 7.8) */
    FJ_CAP_GRIDDEP = 1u << 9     /* griddepcontrol.launch_dependents / .wait: programmatic dependent launch (PTX ISA
                                  * 7.8, sm_90+) */
};

typedef struct fj_arch_info {
    const char *name;        /* "sm_80", "sm_90a", ... as ptxas / nvJitLink spell it */
    int sm;                  /* 80, 90, 100, ... (major * 10 + minor) */
    int ptx_isa_major, ptx_isa_minor; /* .version written for this target */
    int smem_per_block;      /* largest dynamic shared memory per CTA after opt-in, bytes */
    unsigned caps;
    fajit_arch path;         /* the code-generation path whose .target this is, else AUTO */
} fj_arch_info;

/* The row for an sm name ("sm_80", "sm_90a", ...), or NULL. */
const fj_arch_info *fj_arch_find(const char *name);
/* The row for a device of compute capability major.minor (plain, no "a"), or NULL. */
const fj_arch_info *fj_arch_for_device(int major, int minor);
/* The PTX target of a code-generation path, or NULL if the path is unknown. */
const fj_arch_info *fj_arch_of_path(fajit_arch path);
/* "sm_80", "sm_90a", "sm_100a" for a path; "auto" for AUTO; "?" otherwise. */
const char *fj_arch_path_name(fajit_arch path);
/* The largest per-CTA shared memory of any device that runs the path's PTX (for sm_80: an sm_90 or
 * sm_100 GPU). A plan is checked against this; a smaller device rejects it when the kernel is loaded. */
int fj_arch_path_smem_max(fajit_arch path);
/* Every row, for listing (count in *n). */
const fj_arch_info *fj_arch_table(int *n);

#endif
