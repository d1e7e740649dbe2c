/*
 * context.c - fajit_context: the device binding, the context's settings, its notes and its workspace.
 *
 * What a context holds and who works on it: the kernel store (kernel_store.c: memory, prebuilt, disk, compiler)
 * fills its list of loaded kernels; the policy (policy.c) its shape-class choices; the worker (jit_worker.c)
 * compiles in the background. Destroying a context stops the worker first.
 */
#include "context.h"

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "base/error.h"
#include "kernel_store.h"
#include "env.h"
#include "sm100a_launch.h"

/* ---------------------------------------------------------------------------------------------------
 * Push / pop and small accessors
 * ------------------------------------------------------------------------------------------------- */
fajit_status fj_context_push(const fajit_context *ctx)
{
    fj_CUresult rc = ctx->cu->cuCtxPushCurrent(ctx->cu_ctx);
    return rc == FJ_CUDA_SUCCESS ? FAJIT_OK : fj_cuda_fail(rc, "cuCtxPushCurrent");
}

void fj_context_pop(const fajit_context *ctx)
{
    fj_CUcontext popped;
    (void)ctx->cu->cuCtxPopCurrent(&popped);
}

fajit_status fj_context_require_device(const fajit_context *ctx, const char *what)
{
    if (ctx->cu) return FAJIT_OK;
    return fj_fail(FAJIT_ERR_NO_DEVICE, "%s needs a GPU, but the context was created with device = -1 (code "
                                        "generation only); create it with a device ordinal", what);
}

fajit_context_options fajit_context_options_default(void)
{
    fajit_context_options o = {0, -1, NULL};
    return o;
}

const char *fajit_context_cache_dir(const fajit_context *ctx) { return ctx && ctx->disk.enabled ? ctx->disk.dir : ""; }

const char *fajit_context_sm(const fajit_context *ctx) { return ctx ? ctx->sm : ""; }

const char *fajit_context_tune_file(const fajit_context *ctx) { return ctx ? ctx->tune_path : ""; }

void fj_context_set_identity(fajit_context *ctx, const char *sm, const char *device_name, int driver_version,
                             int smem_optin)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->arch = fj_arch_find(sm);
    ctx->cc_major = ctx->arch ? ctx->arch->sm / 10 : 0, ctx->cc_minor = ctx->arch ? ctx->arch->sm % 10 : 0;
    snprintf(ctx->sm, sizeof ctx->sm, "%s", ctx->arch ? ctx->arch->name : "");
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", device_name);
    ctx->driver_version = driver_version;
    ctx->smem_optin = smem_optin;
    fj_tune_list_free(&ctx->tuned); /* another identity: read the tune file again */
    ctx->tuned_loaded = 0;
    pthread_mutex_unlock(&ctx->lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Device binding
 * ------------------------------------------------------------------------------------------------- */

/* cuInit with the two "no GPU here" results turned into plain words. */
static fajit_status device_init_driver(const fj_cuda_api *cu)
{
    fj_CUresult rc = cu->cuInit(0);
    if (rc == FJ_CUDA_ERROR_STUB_LIBRARY)
        return fj_fail(FAJIT_ERR_NO_DEVICE, "cuInit: the libcuda.so.1 found is the CUDA toolkit's stub library "
                                            "(CUDA_ERROR_STUB_LIBRARY, 34), not a driver: no NVIDIA driver is "
                                            "installed on this machine");
    if (rc == FJ_CUDA_ERROR_NO_DEVICE)
        return fj_fail(FAJIT_ERR_NO_DEVICE, "cuInit: no CUDA device is visible (CUDA_ERROR_NO_DEVICE, 100); check "
                                            "the driver and CUDA_VISIBLE_DEVICES");
    return rc == FJ_CUDA_SUCCESS ? FAJIT_OK : fj_cuda_fail(rc, "cuInit");
}

/* Read the facts kept in the context: name, compute capability, SMs, shared-memory limit. */
static fajit_status device_query(fajit_context *ctx)
{
    const fj_cuda_api *cu = ctx->cu;
    fj_CUresult rc;
    if ((rc = cu->cuDeviceGetName(ctx->device_name, (int)sizeof ctx->device_name, ctx->cu_device)) ||
        (rc = cu->cuDeviceGetAttribute(&ctx->cc_major, FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       ctx->cu_device)) ||
        (rc = cu->cuDeviceGetAttribute(&ctx->cc_minor, FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       ctx->cu_device)) ||
        (rc = cu->cuDeviceGetAttribute(&ctx->sm_count, FJ_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->cu_device)) ||
        (rc = cu->cuDeviceGetAttribute(&ctx->smem_optin, FJ_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                       ctx->cu_device)) ||
        (rc = cu->cuDriverGetVersion(&ctx->driver_version)))
        return fj_cuda_fail(rc, "cuDeviceGetName / cuDeviceGetAttribute / cuDriverGetVersion");
    if (ctx->persistent_ctas <= 0) ctx->persistent_ctas = ctx->sm_count; /* unless $FAJIT_PERSISTENT_CTAS */
    ctx->arch = fj_arch_for_device(ctx->cc_major, ctx->cc_minor);
    if (!ctx->arch) {
        char names[256];
        fj_compile_list_targets(names, sizeof names);
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "device %d (%s) has compute capability %d.%d, which is not in fajit's "
                                              "target table (%s); fajit needs 8.0 or newer",
                       ctx->device, ctx->device_name, ctx->cc_major, ctx->cc_minor, names);
    }
    snprintf(ctx->sm, sizeof ctx->sm, "%s", ctx->arch->name);
    return FAJIT_OK;
}

static fajit_status device_open(fajit_context *ctx)
{
    const fj_cuda_api *cu;
    int count = 0;
    fajit_status st = fj_cuda_load(&cu);
    if (st == FAJIT_OK) st = device_init_driver(cu);
    if (st != FAJIT_OK) return st;
    fj_CUresult rc = cu->cuDeviceGetCount(&count);
    if (rc != FJ_CUDA_SUCCESS) return fj_cuda_fail(rc, "cuDeviceGetCount");
    if (count == 0) return fj_fail(FAJIT_ERR_NO_DEVICE, "device = %d: the driver sees no CUDA device", ctx->device);
    if (ctx->device >= count)
        return fj_fail(FAJIT_ERR_NO_DEVICE, "device = %d: this machine has %d CUDA device%s (ordinals 0..%d)",
                       ctx->device, count, count == 1 ? "" : "s", count - 1);
    if ((rc = cu->cuDeviceGet(&ctx->cu_device, ctx->device)) != FJ_CUDA_SUCCESS)
        return fj_cuda_fail(rc, "cuDeviceGet");
    ctx->cu = cu;
    if ((st = device_query(ctx)) != FAJIT_OK) {
        ctx->cu = NULL;
        return st;
    }
    if ((rc = cu->cuDevicePrimaryCtxRetain(&ctx->cu_ctx, ctx->cu_device)) != FJ_CUDA_SUCCESS) {
        ctx->cu = NULL;
        return fj_cuda_fail(rc, "cuDevicePrimaryCtxRetain");
    }
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * The environment, read once (env.c: a bad value fails the creation, naming the variable)
 * ------------------------------------------------------------------------------------------------- */
static fajit_status context_read_env(fajit_context *ctx)
{
    fj_env e;
    fajit_status st = fj_env_read(&e);
    if (st != FAJIT_OK) return st;
    ctx->persistent_ctas = e.persistent_ctas; /* 0: the device's SM count (device_query) */
    ctx->pack_gqa = e.pack_gqa;
    ctx->paged_gather = e.paged_gather;
    ctx->page_ahead = e.page_ahead;
    ctx->page_div = e.page_div;
    ctx->decode_sm90 = e.decode_sm90;
    ctx->varlen_lpt = e.varlen_lpt;
    ctx->pdl = e.pdl;
    ctx->kv8_widen = e.kv8_widen;
    ctx->kv8_direct = e.kv8_direct;
    ctx->sm100a_launch = e.sm100a_launch;
    ctx->prebuilt = e.prebuilt;
    ctx->jit_mode = e.jit_sync ? FJ_JIT_SYNC : FJ_JIT_ASYNC;
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Create / destroy
 * ------------------------------------------------------------------------------------------------- */
fajit_status fajit_context_create(const fajit_context_options *opts, fajit_context **ctx_out)
{
    fj_clear_error();
    if (!ctx_out) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "ctx_out = NULL: an output pointer is required");
    *ctx_out = NULL;
    fajit_context_options o = opts ? *opts : fajit_context_options_default();
    if (o.device < -1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "device = %d: must be a device ordinal (>= 0) or -1 for none",
                       o.device);
    fajit_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_context: out of host memory");
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_cond_init(&ctx->jit_cond, NULL);
    ctx->device = o.device;
    fajit_status st = context_read_env(ctx);
    if (st == FAJIT_OK) st = fj_disk_cache_init(&ctx->disk, o.disk_cache, o.cache_dir);
    if (st == FAJIT_OK && ctx->disk.enabled) /* fits: disk.dir has at most FJ_DISK_CACHE_DIR_MAX characters */
        snprintf(ctx->tune_path, sizeof ctx->tune_path, "%.*s/" FJ_TUNE_FILE_NAME, FJ_DISK_CACHE_DIR_MAX,
                 strcmp(ctx->disk.dir, "/") == 0 ? "" : ctx->disk.dir);
    if (st == FAJIT_OK && o.device >= 0) st = device_open(ctx);
    if (st != FAJIT_OK) {
        fajit_context_destroy(ctx);
        return st;
    }
    *ctx_out = ctx;
    return FAJIT_OK;
}

void fajit_context_destroy(fajit_context *ctx)
{
    if (!ctx) return;
    fj_jit_stop(ctx); /* first: the worker may be loading a kernel into the list */
    fj_store_free_all(ctx);
    int pushed = ctx->cu && (ctx->workspace || ctx->stream_counters) && fj_context_push(ctx) == FAJIT_OK;
    if (pushed && ctx->workspace) ctx->cu->cuMemFree(ctx->workspace);
    if (pushed && ctx->stream_counters) ctx->cu->cuMemFree(ctx->stream_counters);
    if (pushed) fj_context_pop(ctx);
    free(ctx->counter_streams);
    if (ctx->cu) ctx->cu->cuDevicePrimaryCtxRelease(ctx->cu_device);
    for (fj_choice *c = ctx->choices, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    fj_tune_list_free(&ctx->tuned);
    fj_disk_cache_fini(&ctx->disk);
    pthread_cond_destroy(&ctx->jit_cond);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---------------------------------------------------------------------------------------------------
 * Kernels: checks against the device
 * ------------------------------------------------------------------------------------------------- */
/* The device cannot give the plan its shared memory: say so with the arithmetic. */
static fajit_status target_smem_fail(const fajit_context *ctx, const fj_plan *plan)
{
    char text[FJ_CONFIG_TEXT_MAX];
    fajit_config_format(&plan->cfg, text, sizeof text);
    return fj_fail(FAJIT_ERR_UNSUPPORTED, "config \"%s\": smem %d B (Q %d + K,V %d stages x 2 x %d) exceeds %d B, "
                                          "the per-block limit of device %d (%s, %s); lower stages, block_n or block_m",
                   text, plan->smem_bytes, plan->q_bytes, plan->cfg.stages, plan->kv_tile_bytes, ctx->smem_optin,
                   ctx->device, ctx->device_name, ctx->sm);
}

fajit_status fj_context_target(const fajit_context *ctx, const fj_plan *plan, const fj_arch_info **target_out)
{
    const fj_arch_info *code = plan->arch;
    if (plan->smem_bytes > ctx->smem_optin) return target_smem_fail(ctx, plan);
    if (code->name[strlen(code->name) - 1] != 'a') { /* a portable path: build for the device's own sm */
        *target_out = ctx->arch;
        fajit_status st = fj_compile_check_target(code, ctx->arch);
        return st == FAJIT_OK ? fj_plan_check_target(plan, ctx->arch) : st;
    }
    if (!ctx->arch || ctx->arch->sm != code->sm)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "the %s path runs only on compute capability %d.%d; device %d (%s) is "
                                              "%s",
                       code->name, code->sm / 10, code->sm % 10, ctx->device, ctx->device_name,
                       ctx->arch ? ctx->arch->name : "unknown");
    if (code->caps & FJ_CAP_TCGEN05) { /* never run on hardware: on a 10.0 GPU unless FAJIT_SM100A_LAUNCH=0 */
        fajit_status st = fj_sm100a_launch_check(ctx->cc_major, ctx->cc_minor, ctx->sm100a_launch, ctx->device,
                                                 ctx->device_name);
        if (st != FAJIT_OK) return st;
    }
    *target_out = code; /* an arch-specific path: build for exactly its target (sm_90a, sm_100a) */
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Notes: what a source refused
 * ------------------------------------------------------------------------------------------------- */
void fj_context_note(fajit_context *ctx, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&ctx->lock);
    va_start(ap, fmt);
    vsnprintf(ctx->note, sizeof ctx->note, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&ctx->lock);
}

void fj_context_note_get(fajit_context *ctx, char *buf, size_t size)
{
    pthread_mutex_lock(&ctx->lock);
    snprintf(buf, size, "%s", ctx->note);
    pthread_mutex_unlock(&ctx->lock);
}

/* ---------------------------------------------------------------------------------------------------
 * The lpt schedule's tile counters, one per stream
 * ------------------------------------------------------------------------------------------------- */
/* CU_STREAM_PER_THREAD: one handle, a stream of each thread's own; keyed by the thread instead */
#define FJ_STREAM_PER_THREAD ((void *)0x2)
static _Thread_local char t_stream_key;

fajit_status fj_context_stream_counter(fajit_context *ctx, void *stream, fj_CUdeviceptr *ptr_out)
{
    fajit_status st = FAJIT_OK;
    if (stream == FJ_STREAM_PER_THREAD) stream = &t_stream_key;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->stream_counters) {
        fj_CUdeviceptr p = 0;
        void **streams = calloc(FJ_STREAM_COUNTERS, sizeof *streams);
        st = streams ? fj_context_push(ctx)
                     : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "the lpt schedule's stream table (%d entries)", FJ_STREAM_COUNTERS);
        if (st == FAJIT_OK) {
            fj_CUresult rc = ctx->cu->cuMemAlloc(&p, FJ_STREAM_COUNTERS * sizeof(uint32_t));
            fj_context_pop(ctx);
            if (rc != FJ_CUDA_SUCCESS)
                st = fj_fail_context(fj_cuda_fail(rc, "cuMemAlloc"), "the lpt schedule's tile counters (%zu bytes)",
                                     FJ_STREAM_COUNTERS * sizeof(uint32_t));
        }
        if (st == FAJIT_OK) ctx->stream_counters = p, ctx->counter_streams = streams;
        else free(streams);
    }
    int i = 0;
    while (st == FAJIT_OK && i < ctx->counter_streams_used && ctx->counter_streams[i] != stream) i++;
    if (st == FAJIT_OK && i == ctx->counter_streams_used) {
        if (i < FJ_STREAM_COUNTERS) ctx->counter_streams[ctx->counter_streams_used++] = stream;
        else
            st = fj_fail(FAJIT_ERR_UNSUPPORTED, "args->stream = %p: the context keeps the lpt schedule's tile counters "
                         "for %d streams and all are taken; pass args->workspace (256 bytes a call, its own per "
                         "stream) or use fewer streams", stream, FJ_STREAM_COUNTERS);
    }
    if (st == FAJIT_OK) *ptr_out = ctx->stream_counters + (fj_CUdeviceptr)i * sizeof(uint32_t);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * The context's split-KV workspace
 * ------------------------------------------------------------------------------------------------- */
fajit_status fj_context_workspace(fajit_context *ctx, size_t bytes, fj_CUdeviceptr *ptr_out)
{
    fajit_status st = FAJIT_OK;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->workspace_bytes < bytes) {
        size_t want = bytes + bytes / 4; /* grow with room, so a slowly growing cache does not reallocate each call */
        fj_CUdeviceptr p = 0;
        st = fj_context_push(ctx);
        if (st == FAJIT_OK) {
            if (ctx->workspace) ctx->cu->cuMemFree(ctx->workspace); /* waits for the kernels using it */
            ctx->workspace = 0;
            ctx->workspace_bytes = 0;
            fj_CUresult rc = ctx->cu->cuMemAlloc(&p, want);
            if (rc != FJ_CUDA_SUCCESS)
                st = fj_fail_context(fj_cuda_fail(rc, "cuMemAlloc"), "the context's split-KV workspace (%zu bytes)", want);
            else ctx->workspace = p, ctx->workspace_bytes = want;
            fj_context_pop(ctx);
        }
    }
    *ptr_out = ctx->workspace;
    pthread_mutex_unlock(&ctx->lock);
    return st;
}
