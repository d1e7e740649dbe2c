/*
 * context.h - internals of fajit_context and fajit_kernel, for the runtime, fagen and the tests.
 *
 * A context binds one device (or none: device -1) and owns the kernels loaded into the device's
 * primary CUDA context. The settings below from $FAJIT_* variables are read once, when it is made, with or
 * without a device (env.c: a value the library does not know fails the creation). Fields are read-only outside context.c; the lists are guarded by `lock`.
 * Every driver call on the context's behalf is made between fj_context_push() and fj_context_pop(),
 * so the calling thread's current CUDA context is left as it was.
 */
#ifndef FJ_CONTEXT_H
#define FJ_CONTEXT_H

#include <pthread.h>
#include <stddef.h>

#include "codegen/arch.h"
#include "codegen/codegen.h"
#include "cuda_api.h"
#include "disk_cache.h"
#include "base/error.h"
#include "fajit.h"
#include "tensor_map.h"
#include "tune_file.h"

#define FJ_CONFIG_TEXT_MAX 192 /* fajit_config_format() text */
#define FJ_CHOICE_KEY_MAX 128

struct fajit_kernel {
    struct fajit_kernel *next;
    char config_text[FJ_CONFIG_TEXT_MAX]; /* the memory-cache key: the plan's canonical text (fj_plan_format) */
    char target[16];                      /* the sm the cubin was built for ("sm_90", "sm_90a") */
    fj_plan plan;                         /* threads, smem_bytes, block_m for the launcher */
    fj_CUmodule module;
    fj_CUfunction function;
    int grid_key[4];   /* forward.c: the (batch, heads_q, seqlen_q, seqlen_k) of grid_x (under the lock) */
    unsigned grid_x;   /* its grid, for a causal warp-specialized kernel (the balance check is O(tiles)) */
    int registers;   /* CU_FUNC_ATTRIBUTE_NUM_REGS */
    int spill_bytes; /* CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES */
    size_t cubin_bytes;
};

/* The config chosen for one shape class by fajit_attention_forward (policy.c), and the kernel that serves it:
 * its own, or while `pending` a stand-in (a loaded or prebuilt kernel of the same problem) until the worker
 * (jit_worker.c) has compiled cfg. */
typedef struct fj_choice {
    struct fj_choice *next;
    char key[FJ_CHOICE_KEY_MAX];
    fajit_config cfg;
    fajit_kernel *kernel;
    int pending; /* kernel is a stand-in; cfg's own kernel is not loaded yet */
    int queued;  /* cfg's compile was queued (a capture adds a pending choice without queuing it) */
} fj_choice;

/* A background compile (jit_worker.c). */
typedef struct fj_jit_job {
    struct fj_jit_job *next;
    fajit_config cfg;
} fj_jit_job;

/* How a call whose chosen kernel is not loaded gets one (FAJIT_JIT): */
enum {
    FJ_JIT_ASYNC = 0, /* run a stand-in, compile on the worker thread (default) */
    FJ_JIT_SYNC = 1   /* compile now, on the calling thread */
};

/* The worker's compile: fj_store_get by default; tests put a fake one in (fj_jit_set_compiler). */
typedef fajit_status (*fj_jit_compile_fn)(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **kernel_out);

struct fajit_context {
    int device;                /* ordinal, or -1: no device (the fields below stay zero / NULL) */
    const fj_cuda_api *cu;     /* driver table, NULL without a device */
    fj_CUdevice cu_device;
    fj_CUcontext cu_ctx;       /* the device's primary context, retained */
    int cc_major, cc_minor;    /* compute capability */
    int sm_count;              /* multiprocessors */
    int persistent_ctas;       /* CTAs of a persistent (warp-specialized) launch at most: sm_count, or
                                  $FAJIT_PERSISTENT_CTAS when set (tests force several work tiles per CTA; 0 without
                                  a device when unset) */
    int smem_optin;            /* largest dynamic shared memory per block after opt-in, bytes */
    int pack_gqa;              /* decode calls pack GQA query heads (decode.c): on, unless $FAJIT_PACK_GQA=0
                                  (2.2-4.3x the K/V bandwidth of unpacked calls at Nq = 1 on the H200) */
    int paged_gather;          /* paged K/V with pages smaller than the tile's block_n (decode.c): 1 (default)
                                  gathers the tile from 16-row page segments, 0 ($FAJIT_DECODE_GATHER=0) takes a
                                  block_n dividing the page size, 2 ($FAJIT_DECODE_GATHER=1) gathers always */
    int page_ahead;            /* paged K/V: read each tile's pages a tile ahead (variant AHEAD; default 1,
                                  $FAJIT_DECODE_PAGE_AHEAD=0 reads them at the tile's copy, as before) */
    int page_div;              /* paged K/V: 1 ($FAJIT_DECODE_PAGE_DIV=1) finds pages by division for power-of-two
                                  pages too (what ran before the shift; for measuring it), else 0 */
    int decode_sm90;           /* which path's decode variants an sm_90a device runs (decode.c): -1 (default) the
                                  sm_90a kernel's where fj_decode_auto_sm90 says, 1 ($FAJIT_DECODE_SM90=1) the
                                  sm_90a kernel's whenever they take the call, 0 ($FAJIT_DECODE_SM90=0) sm_80's */
    int pdl;                   /* split-KV's combine kernel goes in by programmatic dependent launch where its plan
                                  has griddep and the driver has cuLaunchKernelEx (decode.c): 1 (default), 0 with
                                  $FAJIT_PDL=0 (a stream-ordered launch, as before) */
    int varlen_lpt;            /* varlen calls on the sm_90a kernel take the dynamic longest-first schedule (variant LPT,
                                  sched.c): 1 (default, since the H100 A/B of 2026-11-26, bench/varlen_ab.sh; or
                                  $FAJIT_VARLEN_SCHED=lpt), 0 with $FAJIT_VARLEN_SCHED=static (static round-robin) */
    unsigned kv8_widen;        /* FP8 K/V cache decode variants: FJ_VARIANT_KV8_INT_K / _V bits ($FAJIT_KV8_WIDEN=int
                                  both, intk K, intv V: the integer widening where the device has cvt; default 0,
                                  cvt for both), for timing one against the other; and FJ_VARIANT_KV8_DIRECT
                                  ($FAJIT_KV8_DIRECT=1 forces it: the MMA fragments straight from the e4m3 tiles, kv8_frag.c);
                                  kv8_knobs.c parses them */
    int kv8_direct;            /* $FAJIT_KV8_DIRECT: -1 (unset, the default) FP8 K/V decode calls take kv8direct where
                                  legal (decode.c), 0 never, 1 always (the bit is in kv8_widen then) */
    int sm100a_launch;         /* 1 (default): sm_100a kernels launch on a compute capability 10.0 GPU and the automatic
                                  path takes them there; 0 ($FAJIT_SM100A_LAUNCH=0): never (sm100a_launch.h) */
    char device_name[128];
    const fj_arch_info *arch;  /* the device's row of the arch table (plain, e.g. sm_90) */
    char sm[16];               /* arch->name, or "" */
    int driver_version;        /* cuDriverGetVersion (13000 = CUDA 13.0), 0 without a device */
    fj_disk_cache disk;
    char tune_path[FJ_DISK_CACHE_PATH_MAX]; /* <disk.dir>/tuned-v1.txt, "" when the disk cache is off */
    pthread_mutex_t lock;      /* guards kernels, choices and the tuned winners */
    fajit_kernel *kernels;
    fj_choice *choices;
    fj_tune_list tuned;        /* winners for this GPU, driver and codegen version (tune.c) */
    fj_tmap_cache tmaps;       /* TMA tensor maps of recent warp-specialized launches (tensor_map.c) */
    int tuned_loaded;          /* the tune file has been read into `tuned` */
    fj_CUdeviceptr workspace;  /* split-KV partials of forwards without a workspace of their own (decode.c), */
    size_t workspace_bytes;    /* grown on demand under `lock`, freed with the context */
    fj_CUdeviceptr stream_counters; /* the lpt schedule's tile counters (u32), one per stream (FJ_STREAM_COUNTERS), */
    void **counter_streams;         /* and the stream holding each; both made on first need, under `lock` */
    int counter_streams_used;
    int prebuilt;              /* the prebuilt source is asked: 1, unless $FAJIT_PREBUILT=0 when it was made */
    int jit_mode;              /* FJ_JIT_ASYNC, or FJ_JIT_SYNC ($FAJIT_JIT=sync when it was made) */
    char note[256];            /* the last thing a source refused (under `lock`; fj_context_note) */
    /* the background compiles (jit_worker.c), under `lock`: */
    pthread_cond_t jit_cond;   /* a job was queued, one finished, or the worker must stop */
    pthread_t jit_thread;
    int jit_started, jit_stop, jit_busy;
    fj_jit_job *jit_jobs;
    fj_jit_compile_fn jit_compile;
    unsigned jit_done, jit_failed; /* compiles the worker finished / that failed */
};

/* A kernel for a config and decode variant (FJ_VARIANT_* of codegen.h; 0 = fajit_kernel_get). */
fajit_status fj_kernel_get_variant(fajit_context *ctx, const fajit_config *cfg, unsigned variant,
                                   fajit_kernel **kernel_out, fajit_cache_source *source_out);

/* The context's workspace, grown to at least `bytes` (freeing the old one first: cuMemFree waits for the
 * device). Not stream-ordered: forwards on several streams that use it at once race (fajit.h). */
fajit_status fj_context_workspace(fajit_context *ctx, size_t bytes, fj_CUdeviceptr *ptr_out);

/* Streams a context keeps an lpt tile counter for (fj_context_stream_counter). */
#define FJ_STREAM_COUNTERS 4096

/* The lpt schedule's tile counter of `stream` (4 bytes of device memory that only launches on that stream use, so
 * launches on different streams never share one; the launch zeroes it in the stream first; the per-thread default
 * stream handle counts as one stream per thread). The first call on a new
 * stream takes a free counter; past FJ_STREAM_COUNTERS streams, an error that asks for a workspace of the call's
 * own. Not in a CUDA graph capture on first need (it allocates). */
fajit_status fj_context_stream_counter(fajit_context *ctx, void *stream, fj_CUdeviceptr *ptr_out);

/* Make the context's CUDA context current on this thread (push) / restore the previous one (pop). */
fajit_status fj_context_push(const fajit_context *ctx);
void fj_context_pop(const fajit_context *ctx);

/* The driver table of a context with a device; FAJIT_ERR_NO_DEVICE (message names `what`) without. */
fajit_status fj_context_require_device(const fajit_context *ctx, const char *what);

/* The kernel chosen for a shape-class key, or NULL; *cfg_out (may be NULL) receives its config. */
fajit_kernel *fj_context_choice_find(fajit_context *ctx, const char *key, fajit_config *cfg_out);
/* Remember a choice (first writer wins; a later add of the same key is ignored). */
fajit_status fj_context_choice_add(fajit_context *ctx, const char *key, const fajit_config *cfg,
                                   fajit_kernel *kernel);

/* Keep a note of what a source refused (why a kernel came from a later one): fj_context_note_get reads it. */
void fj_context_note(fajit_context *ctx, const char *fmt, ...) FJ_PRINTF(2, 3);
void fj_context_note_get(fajit_context *ctx, char *buf, size_t size);

/* ---- background compiles (jit_worker.c) ---- */
/* Queue cfg's compile (once: a config already queued or compiling is not queued again); the worker thread
 * starts on the first. When it finishes, every pending choice of cfg serves the new kernel. Call under no lock. */
fajit_status fj_jit_enqueue(fajit_context *ctx, const fajit_config *cfg);
/* Wait until the queue is empty and the worker idle (tests, bench, fagen). */
void fj_jit_wait_idle(fajit_context *ctx);
/* Stop the worker: the compile under way finishes, queued ones are dropped; joins the thread. */
void fj_jit_stop(fajit_context *ctx);
/* Tests only: the worker's compile (NULL: fj_store_get). */
void fj_jit_set_compiler(fajit_context *ctx, fj_jit_compile_fn fn);

/* Forget every shape-class choice (after a tune, so the next forward asks fajit_config_fill again). */
void fj_context_choices_clear(fajit_context *ctx);

/* Tests only: give a context made with device -1 the identity of a GPU (sm name, device name, driver
 * version, per-block shared memory) so fajit_config_fill and the tune file can be tested without one.
 * No driver call is made and the context still cannot load or launch kernels. */
void fj_context_set_identity(fajit_context *ctx, const char *sm, const char *device_name, int driver_version,
                             int smem_optin);

/* The target a plan is compiled for on this context's device ("sm_90", or "sm_90a" for the sm_90a path),
 * after checking the plan's shared memory against the device limit. FAJIT_ERR_UNSUPPORTED with the
 * arithmetic when the device cannot run it. */
fajit_status fj_context_target(const fajit_context *ctx, const fj_plan *plan, const fj_arch_info **target_out);

#endif
