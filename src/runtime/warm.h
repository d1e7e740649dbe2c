/*
 * warm.h - fajit_warm's engine (warm.c), for the tuner and fagen: many kernels compiled on many threads.
 *
 * With a device each kernel goes through fj_kernel_get_variant (memory, disk, else compiled, stored and
 * loaded); without one it is compiled (compile.c) and stored in the disk cache under fj_kernel_disk_key,
 * the key a context on that GPU will look up. Compiling needs no CUDA context, so the threads share
 * nothing but the work list: nvJitLink and NVRTC get one handle per compile.
 */
#ifndef FJ_WARM_H
#define FJ_WARM_H

#include "codegen/arch.h"
#include "fajit.h"

typedef struct fj_warm_request {
    fajit_context *ctx;
    const fajit_config *configs; /* count of them; zero fields filled as fajit_warm says */
    const fajit_shape *shapes;   /* NULL, or count of them */
    int count;
    int threads;                 /* 0 = one per CPU this process may run on */
    const fj_arch_info *device;  /* ctx without a device: the GPU compiled for (a plain row, "sm_90") */
    double deadline;             /* fj_warm_now() after which no kernel is started (0 = none); the ones left
                                    are reported with status FAJIT_OK and the note "not started: ..." */
    int strict;                  /* 1: a config that cannot be filled fails the call before anything is
                                    compiled (fajit_warm); 0: it fails alone (the tuner) */
    int list_only;               /* 1: fill and merge only; each distinct kernel is reported with the note "listed"
                                    and nothing is compiled (fagen warm --list) */
    fajit_warm_progress_fn progress;
    void *progress_user;
} fj_warm_request;

/* Run a request; same result and status as fajit_warm (the arguments are the caller's to check). */
fajit_status fj_warm_run(const fj_warm_request *rq, fajit_warm_result *res);

/* The CPUs this process may run on (sched_getaffinity, else the online CPUs), at least 1. */
int fj_warm_cpus(void);

/* CLOCK_MONOTONIC seconds. */
double fj_warm_now(void);

#endif
