/*
 * source_prebuilt.c - the prebuilt source of the kernel store: the cubins linked into the library (prebuilt.c),
 * for the request's exact target. An entry is checked in full (key, lengths, checksum) before it is served; a
 * damaged one is a miss, noted in the context's disk-cache stats, and the next source builds the kernel.
 * FAJIT_PREBUILT=0 when the context is made turns this source off.
 */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kernel_store.h"
#include "prebuilt.h"

static fajit_status prebuilt_fetch(fj_kernel_req *r, const void **cubin, size_t *size)
{
    const unsigned char *payload = NULL;
    const char *why = "";
    size_t len = 0;
    if (!r->ctx->prebuilt) return FAJIT_OK;
    if (!fj_prebuilt_find(r->text, r->target, &payload, &len, &why)) {
        if (why[0]) fj_context_note(r->ctx, "prebuilt kernel \"%s\" for %s refused: %s", r->text, r->target, why);
        return FAJIT_OK;
    }
    void *copy = malloc(len); /* the blob's payloads are not aligned for the driver's ELF reader */
    if (!copy) return FAJIT_OK;
    memcpy(copy, payload, len);
    *cubin = copy;
    *size = len;
    return FAJIT_OK;
}

static void prebuilt_release(fj_kernel_req *r, const void *cubin)
{
    (void)r;
    free((void *)cubin);
}

static void prebuilt_refused(fj_kernel_req *r, const char *why)
{
    fj_context_note(r->ctx, "prebuilt kernel \"%s\" for %s refused by the driver: %s", r->text, r->target, why);
}

const fj_kernel_source fj_source_prebuilt = {"prebuilt", FAJIT_SOURCE_PREBUILT, 0, prebuilt_fetch, prebuilt_release,
                                             prebuilt_refused, NULL};
