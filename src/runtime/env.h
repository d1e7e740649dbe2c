/*
 * env.h - the environment a context reads once, when it is made (env.c): every FAJIT_* switch, each checked
 * against its accepted values. A value the library does not know fails fajit_context_create with
 * FAJIT_ERR_INVALID_ARGUMENT naming the variable, the value and the accepted values (base/env_word.h), so a typo
 * never runs the default silently. docs/environment.md lists them all.
 *
 * Besides the switches below, creation checks the code generator's knobs, which planning reads (FAJIT_SM90_LEAN,
 * FAJIT_KV_ORDER, FAJIT_FP8_KNOBS, FAJIT_CAUSAL_SCHED: their settings other than the defaults name themselves in the
 * kernels' cache key, fj_plan_format), FAJIT_PTXAS_OPTS (read at each compile, in the disk key through the compiler
 * stamp), and the disk cache's FAJIT_CACHE / FAJIT_CACHE_VERIFY (disk_cache.c).
 */
#ifndef FJ_ENV_H
#define FJ_ENV_H

#include "fajit.h"

typedef struct fj_env {
    int persistent_ctas; /* FAJIT_PERSISTENT_CTAS: CTAs of a persistent launch at most; 0 (unset) = the SM count */
    int pack_gqa;        /* FAJIT_PACK_GQA: 1 (unset) or 0 */
    int paged_gather;    /* FAJIT_DECODE_GATHER: 1 (unset: where pages are smaller than the tile), 0 never, 2 always */
    int page_ahead;      /* FAJIT_DECODE_PAGE_AHEAD: 1 (unset) or 0 */
    int page_div;        /* FAJIT_DECODE_PAGE_DIV: 0 (unset) or 1 */
    int decode_sm90;     /* FAJIT_DECODE_SM90: -1 (unset: fj_decode_auto_sm90's rule), 1 or 0 */
    int varlen_lpt;      /* FAJIT_VARLEN_SCHED: 1 (unset or lpt) or 0 (static) */
    unsigned kv8_widen;  /* FAJIT_KV8_WIDEN / FAJIT_KV8_DIRECT=1: decode variant bits (kv8_knobs.h) */
    int kv8_direct;      /* FAJIT_KV8_DIRECT: -1 (unset), 0 or 1 */
    int sm100a_launch;   /* FAJIT_SM100A_LAUNCH: 1 (unset) or 0 (sm100a_launch.h) */
    int prebuilt;        /* FAJIT_PREBUILT: 1 (unset) or 0 */
    int jit_sync;        /* FAJIT_JIT: 0 (unset or async) or 1 (sync) */
    int pdl;             /* FAJIT_PDL: 1 (unset) or 0 */
} fj_env;

/* Read and check every variable above, and the code generator's and the compiler's knobs. FAJIT_OK, or
 * FAJIT_ERR_INVALID_ARGUMENT for the first bad value (the message names it). */
fajit_status fj_env_read(fj_env *env);

#endif
