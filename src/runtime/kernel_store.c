/*
 * kernel_store.c - fajit_kernel_get: the memory cache, then the sources of kernel_store.h in order, then
 * loading the cubin into the context.
 */
#include "kernel_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "base/error.h"

#define SMEM_DEFAULT_LIMIT (48 * 1024) /* above this a kernel must opt in to dynamic shared memory */

/* The sources after memory, in the order they are asked. */
static const fj_kernel_source *const k_sources[] = {&fj_source_prebuilt, &fj_source_disk, &fj_source_compiler};
#define N_SOURCES ((int)(sizeof k_sources / sizeof k_sources[0]))

const fj_kernel_source *const *fj_store_sources(int *n)
{
    *n = N_SOURCES;
    return k_sources;
}

/* ---------------------------------------------------------------------------------------------------
 * Memory: the context's list of loaded kernels, under ctx->lock
 * ------------------------------------------------------------------------------------------------- */
static fajit_kernel *memory_find(fajit_context *ctx, const char *text)
{
    for (fajit_kernel *k = ctx->kernels; k; k = k->next)
        if (strcmp(k->config_text, text) == 0) return k;
    return NULL;
}

static fajit_kernel *memory_lookup(fajit_context *ctx, const char *text)
{
    pthread_mutex_lock(&ctx->lock);
    fajit_kernel *k = memory_find(ctx, text);
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

/* Insert k unless a kernel of the same config got there first; returns the one to use. */
static fajit_kernel *memory_insert(fajit_context *ctx, fajit_kernel *k)
{
    pthread_mutex_lock(&ctx->lock);
    fajit_kernel *old = memory_find(ctx, k->config_text);
    if (!old) {
        k->next = ctx->kernels;
        ctx->kernels = k;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (!old) return k;
    if (fj_context_push(ctx) == FAJIT_OK) {
        ctx->cu->cuModuleUnload(k->module);
        fj_context_pop(ctx);
    }
    free(k);
    return old;
}

void fj_store_free_all(fajit_context *ctx)
{
    int pushed = ctx->cu && fj_context_push(ctx) == FAJIT_OK;
    for (fajit_kernel *k = ctx->kernels, *next; k; k = next) {
        next = k->next;
        if (pushed && k->module) ctx->cu->cuModuleUnload(k->module);
        free(k);
    }
    ctx->kernels = NULL;
    if (pushed) fj_context_pop(ctx);
}

/* ---------------------------------------------------------------------------------------------------
 * Loading a cubin into the context
 * ------------------------------------------------------------------------------------------------- */
/* Load a cubin, find the entry, opt in to its shared memory and read its attributes. */
static fajit_status kernel_load(fajit_context *ctx, fajit_kernel *k, const void *cubin, size_t size)
{
    const fj_cuda_api *cu = ctx->cu;
    fj_CUmodule mod = NULL;
    fj_CUfunction fn = NULL;
    fajit_status st = fj_context_push(ctx);
    if (st != FAJIT_OK) return st;
    fj_CUresult rc = cu->cuModuleLoadData(&mod, cubin);
    if (rc != FJ_CUDA_SUCCESS) st = fj_cuda_fail(rc, "cuModuleLoadData");
    else if ((rc = cu->cuModuleGetFunction(&fn, mod, fj_plan_entry(&k->plan))) != FJ_CUDA_SUCCESS)
        st = fj_cuda_fail(rc, "cuModuleGetFunction");
    else if (k->plan.smem_bytes > SMEM_DEFAULT_LIMIT &&
             (rc = cu->cuFuncSetAttribute(fn, FJ_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          k->plan.smem_bytes)) != FJ_CUDA_SUCCESS)
        st = fj_cuda_fail(rc, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    else if ((rc = cu->cuFuncGetAttribute(&k->registers, FJ_CU_FUNC_ATTRIBUTE_NUM_REGS, fn)) != FJ_CUDA_SUCCESS ||
             (rc = cu->cuFuncGetAttribute(&k->spill_bytes, FJ_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn)) !=
                 FJ_CUDA_SUCCESS)
        st = fj_cuda_fail(rc, "cuFuncGetAttribute");
    if (st != FAJIT_OK && mod) cu->cuModuleUnload(mod);
    fj_context_pop(ctx);
    if (st != FAJIT_OK) return st;
    k->module = mod;
    k->function = fn;
    k->cubin_bytes = size;
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * The sources, in order
 * ------------------------------------------------------------------------------------------------- */
/* Ask source i for k's cubin and load it. 1 = loaded, 0 = a miss or a cubin the driver refused (told to the
 * source), -1 = the request failed (the status in *st). */
static int source_try(const fj_kernel_source *s, fj_kernel_req *req, fajit_kernel *k, fajit_status *st)
{
    const void *cubin = NULL;
    size_t size = 0;
    if ((*st = s->fetch(req, &cubin, &size)) != FAJIT_OK) return -1;
    if (!cubin) return 0;
    *st = kernel_load(req->ctx, k, cubin, size);
    if (*st == FAJIT_OK) {
        for (int i = 0; i < N_SOURCES && k_sources[i] != s; i++) /* earlier sources that keep kernels */
            if (k_sources[i]->keep) k_sources[i]->keep(req, cubin, size);
    } else if (s->refused) {
        s->refused(req, fajit_errmsg());
    }
    if (s->release) s->release(req, cubin);
    if (*st == FAJIT_OK) return 1;
    if (s->compiles) return -1; /* a cubin compiled now and refused: nothing later to ask */
    fj_clear_error();
    *st = FAJIT_OK;
    return 0;
}

/* A kernel not in memory: checked against the device, from the first source that has it, inserted. */
static fajit_status store_create(fajit_context *ctx, const fj_plan *plan, const char *text, int flags,
                                 fajit_kernel **out, fajit_cache_source *source)
{
    const fj_arch_info *target = NULL;
    fajit_status st = fj_context_target(ctx, plan, &target);
    if (st != FAJIT_OK) return st;
    fajit_kernel *k = calloc(1, sizeof *k);
    if (!k) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_kernel: out of host memory");
    k->plan = *plan;
    fj_plan_for_target(&k->plan, target); /* FP8 K/V cvt, griddepcontrol: where the device has them */
    snprintf(k->config_text, sizeof k->config_text, "%s", text);
    snprintf(k->target, sizeof k->target, "%s", target->name);
    fj_kernel_req req = {.ctx = ctx, .plan = &k->plan, .text = k->config_text, .target = k->target,
                         .quick = (flags & FJ_STORE_NO_COMPILE) != 0};
    int got = 0;
    for (int i = 0; i < N_SOURCES && got == 0; i++) {
        if (k_sources[i]->compiles && (flags & FJ_STORE_NO_COMPILE)) continue;
        got = source_try(k_sources[i], &req, k, &st);
        if (got == 1) *source = k_sources[i]->tag;
    }
    free(req.ptx);
    if (got != 1) {
        free(k);
        return got < 0 ? st : FAJIT_OK; /* 0: only the compiler has it, and it was not asked */
    }
    *out = memory_insert(ctx, k);
    return FAJIT_OK;
}

fajit_status fj_store_get(fajit_context *ctx, const fajit_config *cfg, unsigned variant, int flags,
                          fajit_kernel **kernel_out, fajit_cache_source *source_out)
{
    fj_plan plan;
    char text[FJ_CONFIG_TEXT_MAX];
    fajit_cache_source source = FAJIT_SOURCE_MEMORY;
    *kernel_out = NULL;
    fajit_status st = fj_plan_build_variant(cfg, variant, &plan);
    if (st != FAJIT_OK) return st;
    if (fj_plan_format(&plan, text, sizeof text) >= (int)sizeof text)
        return fj_fail(FAJIT_ERR_INTERNAL, "kernel_store.c: canonical config text longer than %d",
                       FJ_CONFIG_TEXT_MAX - 1);
    fajit_kernel *k = memory_lookup(ctx, text);
    if (!k && (st = store_create(ctx, &plan, text, flags, &k, &source)) != FAJIT_OK) return st;
    *kernel_out = k;
    if (source_out) *source_out = source;
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Public calls
 * ------------------------------------------------------------------------------------------------- */
fajit_status fajit_kernel_get(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **kernel_out,
                              fajit_cache_source *source_out)
{
    return fj_kernel_get_variant(ctx, cfg, 0, kernel_out, source_out);
}

fajit_status fj_kernel_get_variant(fajit_context *ctx, const fajit_config *cfg, unsigned variant,
                                   fajit_kernel **kernel_out, fajit_cache_source *source_out)
{
    fj_clear_error();
    if (!ctx || !cfg || !kernel_out)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = NULL: fajit_kernel_get needs ctx, cfg and kernel_out",
                       !ctx ? "ctx" : !cfg ? "cfg" : "kernel_out");
    *kernel_out = NULL;
    fajit_status st = fj_context_require_device(ctx, "fajit_kernel_get");
    return st == FAJIT_OK ? fj_store_get(ctx, cfg, variant, 0, kernel_out, source_out) : st;
}

fajit_status fajit_kernel_get_info(const fajit_kernel *kernel, fajit_kernel_info *info_out)
{
    fj_clear_error();
    if (!kernel || !info_out)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = NULL: fajit_kernel_get_info needs both arguments",
                       !kernel ? "kernel" : "info_out");
    info_out->registers = kernel->registers;
    info_out->smem_bytes = kernel->plan.smem_bytes;
    info_out->threads = kernel->plan.threads;
    info_out->spill_bytes = kernel->spill_bytes;
    info_out->cubin_bytes = kernel->cubin_bytes;
    return FAJIT_OK;
}
