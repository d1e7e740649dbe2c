/*
 * pipe_mutate.h - pipeline bugs injected on purpose into an sm_90a warp-specialized kernel's PTX text (pipe_mutate.c),
 * for the tests that show the pipeline simulator catches them (test_pipe_sim.c) and that the GPU hangs or computes
 * garbage with them (test_gpu_pipe_bugs.c). Test-only: the library never mutates its PTX.
 */
#ifndef FJ_PIPE_MUTATE_H
#define FJ_PIPE_MUTATE_H

#include <stddef.h>

enum {
    BUG_NONE,
    BUG_DROP_RELEASE,  /* the consumers' K-empty arrive after the first KV tile's S is deleted */
    BUG_FLIP_PARITY,   /* the consumers' first K-full wait uses the other parity */
    BUG_WRONG_BARRIER, /* ... waits on stage 0's V-full barrier instead of K-full */
    BUG_SHRINK_TX,     /* the producer's first K expect_tx announces half the tile's bytes */
    BUG_EARLY_RELEASE, /* the consumers' K-empty arrive moves above the wgmma.wait_group that retires the S GEMM */
    BUG_STUCK_PARITY,  /* the consumers' steady KV loop does not flip its parity when the ring wraps to stage 0 */
    BUG_STUCK_PRODUCER, /* the producer's KV loop does not flip its parity when the ring wraps to stage 0 */
    BUG_UNELECTED,     /* the consumers' K-empty arrive after S loses its lane-0 guard: every lane arrives */
    BUG_NO_STORE_WAIT, /* the epilogue writes O staging without waiting for its last TMA store to have read it */
    BUG_COUNT
};

/* The bug's short name ("drop-release", ...), or NULL past BUG_COUNT. */
const char *pipe_bug_name(int bug);
/* The bug's number by its short name, or -1. */
int pipe_bug_find(const char *name);

/* A malloc'd copy of ptx with the bug injected (BUG_NONE: a plain copy); what it changed into what (the PTX lines).
 * NULL when the kernel lacks the code the bug changes (what says which). */
char *pipe_mutate(const char *ptx, int bug, char *what, size_t size);

#endif
