/*
 * pipe_sim.h - the pipeline simulator (pipe_sim.c): runs the synchronization skeleton of a warp-specialized kernel's
 * PTX (parsed by ptx_sim.c) warp by warp (lane 0, and lane 31 while it keeps step), interleaved by a seeded random
 * scheduler that blocks a warp on mbarrier waits and named barriers, and completes TMA loads asynchronously. It reports
 * the first pipeline fault it sees: a deadlock, a waiter passing on a phase it had passed or skipping one (phase
 * aliasing), a ring slot read before its TMA load completed for the reader, or written (by a load or st.shared) before
 * every earlier reader released it; on sm_100a the same for tensor memory (pipe_tmem.c) and its allocation. FP8: ldmatrix reads a loaded box (V) and is retired at once, stmatrix writes like
 * st.shared (Vt, a ring of boxes no TMA load fills).
 * docs/pipeline-sim.md describes the model; tests/test_pipe_sim.c runs it over the sm_90a kernels.
 */
#ifndef FJ_PIPE_SIM_H
#define FJ_PIPE_SIM_H

#include "ptx_sim.h"

/* What a run found. */
enum {
    PIPE_OK,
    PIPE_DEADLOCK,      /* every live warp waits and no TMA load is in flight */
    PIPE_PHASE_ALIAS,   /* a wait passed on a phase the warp had already passed, or skipped a phase */
    PIPE_EARLY_READ,    /* wgmma read a slot whose last load had not completed for it (no wait on that phase) */
    PIPE_EARLY_WRITE,   /* a TMA load into a slot that a warp's wgmma read had not released to the producer */
    PIPE_BARRIER,       /* a misused barrier: uninitialized, more arrivals than its count, thread counts that differ */
    PIPE_LEFTOVER,      /* the CTA ended with a TMA load in flight, an mbarrier mid-phase, a named barrier part full */
    PIPE_MODEL,         /* something the simulator does not model (an unknown guard on a barrier, an unknown address) */
    PIPE_TMEM           /* tensor memory misused: used unallocated or outside its columns, allocated twice, freed with
                           the wrong address or columns or before every access completed, never freed or relinquished */
};
const char *pipe_kind_name(int kind);

typedef struct pipe_opts {
    unsigned seed;           /* the interleaving (0 is a seed too) */
    unsigned ctaid, nctaid;  /* this CTA and the grid: the persistent schedule gives it tiles ctaid, + nctaid, ... */
    int threads;             /* the block (plan.threads) */
    /* a TMA load's bytes by the tensor map it names (offset in the parameter block): Q's box and K / V's */
    int q_map_off, k_map_off, v_map_off;
    int q_box_bytes, kv_box_bytes;
    int o_box_bytes;         /* the O store's box (its staging read): 0 = not followed */
    /* FP8: the Vt ring (plan.vt_off, stages of plan.kv_tile_bytes), boxes written by the transposers' stmatrix and
     * read by wgmma; 0 stages = none */
    int vt_off, vt_bytes, vt_stages;
    /* the lpt schedule (plan.lpt): its work-tile slots [slot_off, slot_off + slot_bytes) in shared memory, whose
     * 4-byte words the simulator keeps the values of; 0 bytes = a static schedule */
    int slot_off, slot_bytes;
    long max_steps;          /* instructions over all warps (0: 50M) */
} pipe_opts;

typedef struct pipe_report {
    int kind;                /* PIPE_* */
    char text[768];          /* what and where (PTX line numbers) */
    /* what ran */
    long steps;
    int warps, tma_loads, wgmma_reads, phases, max_phase, waits, blocked_waits, named_syncs;
    int tmem_reads, tmem_writes, tmem_freed; /* sm_100a: tcgen05.ld / st / mma accesses checked; 1 when freed */
} pipe_report;

/* The world and options of a non-decode warp-specialized kernel of plan pl on problem a (its pointers are not
 * read): the tensor-map block (and an attention variant's mods block, from a's variant fields), the TMA boxes (swizzle-wide: block_m rows of Q, block_n of K / V); CTA 0 of a grid of
 * nctaid. Free the world with free(). */
world *pipe_world_dense(const fj_plan *pl, const fajit_attention_args *a, unsigned nctaid, pipe_opts *o);

/* Run one CTA of the kernel p with the parameter block, maps and loaded data of w (w->ws set: the tensor-map block
 * in w->tprm). Returns r->kind. */
int pipe_run(const prog *p, world *w, const pipe_opts *o, pipe_report *r);

#endif
