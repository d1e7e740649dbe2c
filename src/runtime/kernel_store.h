/*
 * kernel_store.h - where a context gets a loaded kernel for a plan: an ordered list of sources.
 *
 *     memory    the context's loaded kernels (kernel_store.c)
 *     prebuilt  cubins built with the library (source_prebuilt.c, prebuilt.c; off with FAJIT_PREBUILT=0)
 *     disk      cubins an earlier process stored (source_disk.c over disk_cache.c and compiler_stamp.c)
 *     compiler  generate the PTX and compile it now (source_compile.c over compile.c)
 *
 * The store asks them in that order; the first that gives a cubin the driver loads wins. A cubin the driver
 * refuses is reported back to the source that gave it (the disk source deletes the entry) and the next source
 * is asked. What a later source made is offered to the earlier ones that keep kernels (the disk source stores
 * a compiled cubin). A source never serves bytes it has not checked: prebuilt entries and disk entries carry
 * their key text and a checksum, and a mismatch is a miss.
 *
 * Compiling runs outside the context's lock, so threads asking for different kernels do not wait on each
 * other; two threads building the same kernel at once both succeed and the first one inserted is kept.
 */
#ifndef FJ_KERNEL_STORE_H
#define FJ_KERNEL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "disk_cache.h"
#include "fajit.h"

/* fj_store_get flags */
enum {
    FJ_STORE_NO_COMPILE = 1 /* ask only the sources that neither compile nor load a compiler (a CUDA-graph
                               capture, the probe before a stand-in): the disk source then needs a stamp */
};

/* One request, as the sources see it: what is asked for, and what a source leaves for the others. */
typedef struct fj_kernel_req {
    fajit_context *ctx;
    const fj_plan *plan;
    const char *text;   /* the plan's canonical text (fj_plan_format: config, variant, knobs): every source's key */
    const char *target; /* the sm the cubin is for ("sm_90a", "sm_86") */
    /* the disk source's key, made once per request (it needs the compiler's identity) */
    char disk_key[FJ_DISK_CACHE_KEY_MAX];
    int disk_key_state; /* 0 not made yet, 1 made, -1 the disk cache is off (or, quick: no stamp) */
    int quick;          /* FJ_STORE_NO_COMPILE: no source may load a compiler library either */
    /* left by the compiler source for the disk source's keep: the PTX the cubin came from */
    char *ptx;
    size_t ptx_len;
} fj_kernel_req;

/* A source of cubins. fetch: FAJIT_OK with *cubin set (a hit) or NULL (a miss); another status fails the
 * request. release frees what fetch gave (NULL: nothing to free). refused: the driver would not load it.
 * keep: a kernel a later source made, offered to this one (NULL: it keeps nothing). */
typedef struct fj_kernel_source {
    const char *name;
    fajit_cache_source tag; /* what fajit_kernel_get reports when this source served */
    int compiles;           /* skipped under FJ_STORE_NO_COMPILE */
    fajit_status (*fetch)(fj_kernel_req *req, const void **cubin, size_t *size);
    void (*release)(fj_kernel_req *req, const void *cubin);
    void (*refused)(fj_kernel_req *req, const char *why);
    void (*keep)(fj_kernel_req *req, const void *cubin, size_t size);
} fj_kernel_source;

extern const fj_kernel_source fj_source_prebuilt; /* source_prebuilt.c */
extern const fj_kernel_source fj_source_disk;     /* source_disk.c */
extern const fj_kernel_source fj_source_compiler; /* source_compile.c */

/*
 * A loaded kernel for a config and decode variant (0 = the plain kernel), from the first source that has
 * it. *source_out (may be NULL) says which. With FJ_STORE_NO_COMPILE and no source but the compiler able to
 * serve, returns FAJIT_OK with *kernel_out NULL. Errors: the plan's rules, the device's limits
 * (fj_context_target), a compile or load failure.
 */
fajit_status fj_store_get(fajit_context *ctx, const fajit_config *cfg, unsigned variant, int flags,
                          fajit_kernel **kernel_out, fajit_cache_source *source_out);

/* The sources after memory, in the order the store asks them (*n receives how many). */
const fj_kernel_source *const *fj_store_sources(int *n);

/* Unload and free every kernel of the context (fajit_context_destroy). */
void fj_store_free_all(fajit_context *ctx);

#endif
