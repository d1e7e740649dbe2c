/*
 * source_disk.c - the disk source of the kernel store: cubins an earlier process stored (disk_cache.c), under a
 * key that names the compiler (compiler_stamp.c). A cubin the driver refuses is deleted with its PTX; a kernel
 * the compiler made is stored with the PTX it came from.
 */
#include <stdio.h>
#include <stdlib.h>

#include "compiler_stamp.h"
#include "context.h"
#include "base/error.h"
#include "hash.h"
#include "kernel_store.h"

/* The request's disk-cache key (fj_kernel_disk_key, the key fajit_warm stores under; a quick request takes it
 * only from the compiler stamp, never by loading the compiler). 1 = made, 0 = the disk cache is off (or, quick,
 * no stamp: a miss here, the worker or the compile path looks again), -1 = failed (the status in *st). */
static int disk_key(fj_kernel_req *r, fajit_status *st)
{
    *st = FAJIT_OK;
    if (r->disk_key_state) return r->disk_key_state == 1;
    if (!r->ctx->disk.enabled) return r->disk_key_state = -1, 0;
    if (r->quick) {
        if (!fj_kernel_disk_key_cheap(&r->ctx->disk, r->plan, r->text, r->target, r->disk_key, sizeof r->disk_key))
            return r->disk_key_state = -1, 0;
        return r->disk_key_state = 1;
    }
    *st = fj_kernel_disk_key(&r->ctx->disk, r->plan, r->text, r->target, r->disk_key, sizeof r->disk_key);
    return *st == FAJIT_OK ? (r->disk_key_state = 1) : -1;
}

/* The hash of the PTX a disk entry must have been compiled from: 0 (not checked) unless FAJIT_CACHE_VERIFY=1,
 * which generates the PTX again to check it (about 1 ms a kernel; the key's source digest already pins the
 * PTX, so this checks the key rather than the entry). */
static uint64_t disk_ptx_hash(const fj_kernel_req *r)
{
    char *ptx = NULL;
    size_t len = 0;
    if (!r->ctx->disk.verify || fj_generate_ptx_plan(r->plan, 0, &ptx, &len) != FAJIT_OK) return 0;
    uint64_t h = fj_source_hash(ptx, len);
    free(ptx);
    return h;
}

static fajit_status disk_fetch(fj_kernel_req *r, const void **cubin, size_t *size)
{
    fajit_status st;
    void *payload = NULL;
    int made = disk_key(r, &st);
    if (made <= 0) return st; /* off: FAJIT_OK, a miss */
    if (fj_disk_cache_load(&r->ctx->disk, r->disk_key, "cubin", disk_ptx_hash(r), &payload, size)) *cubin = payload;
    return FAJIT_OK;
}

static void disk_release(fj_kernel_req *r, const void *cubin)
{
    (void)r;
    free((void *)cubin);
}

static void disk_refused(fj_kernel_req *r, const char *why)
{
    fj_disk_cache_invalidate(&r->ctx->disk, r->disk_key, "cubin", why);
    fj_disk_cache_invalidate(&r->ctx->disk, r->disk_key, "ptx", "its cubin was refused");
}

/* A kernel a later source made (the compiler: r->ptx is its PTX): store it, best effort. */
static void disk_keep(fj_kernel_req *r, const void *cubin, size_t size)
{
    fajit_status st;
    if (!r->ptx || disk_key(r, &st) != 1) {
        fj_clear_error();
        return;
    }
    if (fj_disk_cache_store(&r->ctx->disk, r->disk_key, "cubin", fj_source_hash(r->ptx, r->ptx_len), cubin, size) == 0)
        (void)fj_disk_cache_store(&r->ctx->disk, r->disk_key, "ptx", 0, r->ptx, r->ptx_len);
}

const fj_kernel_source fj_source_disk = {"disk", FAJIT_SOURCE_DISK, 0, disk_fetch, disk_release, disk_refused,
                                         disk_keep};
