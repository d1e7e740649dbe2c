/*
 * compile.h - PTX -> cubin with nvJitLink (internal; the public entry is fajit_compile_cubin).
 *
 * Needs nvJitLink, never a GPU. Used by the context (kernels for its device) and by fagen.
 */
#ifndef FJ_COMPILE_H
#define FJ_COMPILE_H

#include <stddef.h>

#include "codegen/arch.h"
#include "fajit.h"

/*
 * Compile PTX text (ptx[len] need not be a NUL) to a cubin for `sm`, a name of the arch table
 * ("sm_80", "sm_90a", ...), with "-arch=<sm> -O3 -verbose". On success *cubin / *size receive a
 * malloc'd image and *info_log (may be NULL) the compiler's info log ("" if empty; registers, spills).
 * On failure: FAJIT_ERR_INVALID_ARGUMENT for an unknown sm (the message lists the valid ones),
 * FAJIT_ERR_COMPILE with the start of the error log in the message, and *info_log (when not NULL)
 * receives the whole error log. Every returned buffer is freed with free() / fajit_free().
 */
fajit_status fj_compile_ptx(const char *ptx, size_t len, const char *sm, void **cubin, size_t *size,
                            char **info_log);

/* The compiler's identity for cache keys, e.g. "nvJitLink 13.0" (loads nvJitLink). */
fajit_status fj_compiler_identity(char *buf, size_t size);

/* fajit_compile_cubin of a variant's kernel (FJ_VARIANT_* bits; fagen cubin --varlen / --variant); 0 = the plain one. */
fajit_status fj_compile_cubin_variant(const fajit_config *cfg, unsigned variant, const char *sm, void **cubin_out,
                                      size_t *size_out, char **log_out);

/* A plan's PTX -> cubin by the path it needs: whole-program (NVRTC, fj_compile_ptx_whole) when
 * plan->whole_program (setmaxnreg), else nvJitLink (fj_compile_ptx). Same contract as fj_compile_ptx. */
struct fj_plan;
fajit_status fj_compile_kernel(const struct fj_plan *plan, const char *ptx, size_t len, const char *sm, void **cubin,
                               size_t *size, char **info_log);
/* Whole-program compile of generated PTX: its entry body wrapped in CUDA C (compile.c), compiled by NVRTC
 * with --gpu-architecture=<sm> -Xptxas=-v; *info_log receives NVRTC's log (ptxas -v lines). */
fajit_status fj_compile_ptx_whole(const struct fj_plan *plan, const char *ptx, size_t len, const char *sm,
                                  void **cubin, size_t *size, char **info_log);
/* The CUDA C source fj_compile_ptx_whole gives NVRTC: the PTX entry's body as one inline-asm statement (appended
 * to src; bench/cold_breakdown.c times NVRTC's front end on it). */
struct fj_buf;
fajit_status fj_compile_whole_source(const struct fj_plan *plan, const char *ptx, size_t len, struct fj_buf *src);

/* FAJIT_PTXAS_OPTS: ptxas options, separated by spaces, added to every compile of a generated kernel (both
 * paths; an -O level replaces the default -O3) - issue 23's A/B of a cheaper ptxas. Only options that change the
 * compile's effort are accepted (compile.c's list: -O0..-O3, --allow-expensive-optimizations=true|false); any
 * other word is FAJIT_ERR_INVALID_ARGUMENT naming it and the list. Disk-cache keys name them (compiler_stamp.c);
 * the prebuilt kernels do not follow them (FAJIT_PREBUILT=0 compiles the defaults too). */
#define FJ_PTXAS_OPTS_MAX 4
typedef struct fj_ptxas_opts {
    int n;
    const char *opt[FJ_PTXAS_OPTS_MAX]; /* static strings of the accepted list */
    char text[128];                     /* the options in canonical form ("" when none) */
} fj_ptxas_opts;
/* Read and check $FAJIT_PTXAS_OPTS (unset or blank: none). */
fajit_status fj_ptxas_opts_read(fj_ptxas_opts *o);

/* The identity of the compiler a plan's path uses, for cache keys ("nvJitLink 13.0", "NVRTC 13.0
 * whole-program"); loads that library. */
fajit_status fj_compiler_identity_for(const struct fj_plan *plan, char *buf, size_t size);

/* CUDA C source -> cubin with NVRTC. opts[0] should name the architecture (it is quoted in messages).
 * On failure FAJIT_ERR_COMPILE quotes the start of the log; *log_out (may be NULL) receives the whole
 * log either way (free()). */
fajit_status fj_nvrtc_cubin(const char *src, const char *name, const char *const *opts, int n_opts, void **cubin,
                            size_t *size, char **log_out);

/*
 * Whether PTX written for code-generation target `code` (plan.arch) may be compiled for `target`:
 * an "a" target (sm_90a) only for itself; a plain one for any row at or above it. On refusal returns
 * FAJIT_ERR_UNSUPPORTED with a message naming both.
 */
fajit_status fj_compile_check_target(const fj_arch_info *code, const fj_arch_info *target);

/* "sm_80, sm_86, ..." : every name of the arch table, for messages. */
void fj_compile_list_targets(char *buf, size_t size);

#endif
