/*
 * context.c - fajit_context (device binding, memory cache of kernels) and fajit_kernel_get.
 *
 * fajit_kernel_get looks in three places, cheapest first:
 *   memory  the context's list of loaded kernels, keyed by the config's canonical text
 *   disk    a cubin stored by an earlier process (disk_cache.c); one the driver refuses is deleted
 *   build   fj_plan_build -> fj_generate_ptx_plan -> nvJitLink for the device's sm -> stored to disk
 * Compiling runs outside the lock, so threads asking for different kernels do not wait on each other;
 * two threads building the same kernel at once both succeed and the first one inserted is kept.
 */
#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/kernel_abi.h"
#include "compile.h"
#include "compiler_stamp.h"
#include "error.h"
#include "hash.h"

#define SMEM_DEFAULT_LIMIT (48 * 1024) /* above this a kernel must opt in to dynamic shared memory */

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
    ctx->persistent_ctas = ctx->sm_count;
    const char *cap = getenv("FAJIT_PERSISTENT_CTAS");
    if (cap && atoi(cap) > 0) ctx->persistent_ctas = atoi(cap);
    const char *pack = getenv("FAJIT_PACK_GQA");
    ctx->pack_gqa = !(pack && strcmp(pack, "0") == 0);
    const char *gather = getenv("FAJIT_DECODE_GATHER");
    ctx->paged_gather = gather && strcmp(gather, "0") == 0 ? 0 : gather && strcmp(gather, "1") == 0 ? 2 : 1;
    const char *ahead = getenv("FAJIT_DECODE_PAGE_AHEAD");
    ctx->page_ahead = !(ahead && strcmp(ahead, "0") == 0);
    const char *div = getenv("FAJIT_DECODE_PAGE_DIV");
    ctx->page_div = div && strcmp(div, "1") == 0;
    const char *sm90 = getenv("FAJIT_DECODE_SM90");
    ctx->decode_sm90 = sm90 && strcmp(sm90, "1") == 0 ? 1 : sm90 && strcmp(sm90, "0") == 0 ? 0 : -1;
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
    ctx->device = o.device;
    fajit_status st = fj_disk_cache_init(&ctx->disk, o.disk_cache, o.cache_dir);
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
    int pushed = ctx->cu && fj_context_push(ctx) == FAJIT_OK;
    for (fajit_kernel *k = ctx->kernels, *next; k; k = next) {
        next = k->next;
        if (pushed && k->module) ctx->cu->cuModuleUnload(k->module);
        free(k);
    }
    if (pushed && ctx->workspace) ctx->cu->cuMemFree(ctx->workspace);
    if (pushed) fj_context_pop(ctx);
    if (ctx->cu) ctx->cu->cuDevicePrimaryCtxRelease(ctx->cu_device);
    for (fj_choice *c = ctx->choices, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    fj_tune_list_free(&ctx->tuned);
    fj_disk_cache_fini(&ctx->disk);
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
    *target_out = code; /* an arch-specific path: build for exactly its target (sm_90a) */
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Kernels: loading a cubin into the context
 * ------------------------------------------------------------------------------------------------- */

/* Load a cubin, find the entry, opt in to its shared memory and read its attributes. */
static fajit_status kernel_load_module(fajit_context *ctx, fajit_kernel *k, const void *cubin, size_t size)
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

/* The disk-cache key of a kernel (needs the compiler identity: from the cache's stamp, else by loading the
 * compiler; compiler_stamp.c). */
static fajit_status kernel_disk_key(fajit_context *ctx, const fajit_kernel *k, char *key, size_t size)
{
    return fj_kernel_disk_key(&ctx->disk, &k->plan, k->config_text, k->target, key, size);
}

/* The hash of the PTX a disk entry must have been compiled from: 0 (not checked) unless FAJIT_CACHE_VERIFY=1,
 * which generates the PTX again to check it (about 1 ms a kernel; the key's source digest already pins the
 * PTX, so this checks the key rather than the entry). */
static uint64_t kernel_ptx_hash(const fajit_context *ctx, const fajit_kernel *k)
{
    char *ptx = NULL;
    size_t len = 0;
    if (!ctx->disk.verify || fj_generate_ptx_plan(&k->plan, 0, &ptx, &len) != FAJIT_OK) return 0;
    uint64_t h = fj_source_hash(ptx, len);
    free(ptx);
    return h;
}

/* Try the disk cache: 1 = loaded, 0 = not there or refused (then invalidated). */
static int kernel_from_disk(fajit_context *ctx, fajit_kernel *k, const char *key)
{
    void *cubin = NULL;
    size_t size = 0;
    if (!fj_disk_cache_load(&ctx->disk, key, "cubin", kernel_ptx_hash(ctx, k), &cubin, &size)) return 0;
    fajit_status st = kernel_load_module(ctx, k, cubin, size);
    free(cubin);
    if (st == FAJIT_OK) return 1;
    fj_disk_cache_invalidate(&ctx->disk, key, "cubin", fajit_errmsg());
    fj_disk_cache_invalidate(&ctx->disk, key, "ptx", "its cubin was refused");
    fj_clear_error();
    return 0;
}

/* Generate, compile for k->target, store to disk (best effort, when key), load. */
static fajit_status kernel_compile(fajit_context *ctx, fajit_kernel *k, const char *key)
{
    char *ptx = NULL;
    void *cubin = NULL;
    size_t ptx_len = 0, size = 0;
    fajit_status st = fj_generate_ptx_plan(&k->plan, 0, &ptx, &ptx_len);
    if (st == FAJIT_OK) st = fj_compile_kernel(&k->plan, ptx, ptx_len, k->target, &cubin, &size, NULL);
    if (st == FAJIT_OK && key) {
        if (fj_disk_cache_store(&ctx->disk, key, "cubin", fj_source_hash(ptx, ptx_len), cubin, size) == 0)
            (void)fj_disk_cache_store(&ctx->disk, key, "ptx", 0, ptx, ptx_len);
    }
    if (st == FAJIT_OK) st = kernel_load_module(ctx, k, cubin, size);
    free(ptx);
    free(cubin);
    return st;
}

/* Fill k's module from disk or by compiling it. */
static fajit_status kernel_build(fajit_context *ctx, fajit_kernel *k, fajit_cache_source *source)
{
    char key[FJ_DISK_CACHE_KEY_MAX];
    int use_disk = ctx->disk.enabled;
    if (use_disk) {
        fajit_status st = kernel_disk_key(ctx, k, key, sizeof key);
        if (st != FAJIT_OK) return st;
        if (kernel_from_disk(ctx, k, key)) {
            *source = FAJIT_SOURCE_DISK;
            return FAJIT_OK;
        }
    }
    *source = FAJIT_SOURCE_COMPILED;
    return kernel_compile(ctx, k, use_disk ? key : NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Kernels: the memory cache and fajit_kernel_get
 * ------------------------------------------------------------------------------------------------- */
static fajit_kernel *kernel_find(fajit_context *ctx, const char *text)
{
    for (fajit_kernel *k = ctx->kernels; k; k = k->next)
        if (strcmp(k->config_text, text) == 0) return k;
    return NULL;
}

/* Insert k unless a kernel of the same config got there first; returns the one to use. */
static fajit_kernel *kernel_insert(fajit_context *ctx, fajit_kernel *k)
{
    pthread_mutex_lock(&ctx->lock);
    fajit_kernel *old = kernel_find(ctx, k->config_text);
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

/* Plan and memory-cache key of a config (and decode variant); *found is the cached kernel or NULL. */
static fajit_status kernel_lookup(fajit_context *ctx, const fajit_config *cfg, unsigned variant, fj_plan *plan,
                                  char *text, fajit_kernel **found)
{
    fajit_status st = fj_plan_build_variant(cfg, variant, plan);
    if (st != FAJIT_OK) return st;
    if (fj_plan_format(plan, text, FJ_CONFIG_TEXT_MAX) >= FJ_CONFIG_TEXT_MAX)
        return fj_fail(FAJIT_ERR_INTERNAL, "context.c: canonical config text longer than %d", FJ_CONFIG_TEXT_MAX - 1);
    pthread_mutex_lock(&ctx->lock);
    *found = kernel_find(ctx, text);
    pthread_mutex_unlock(&ctx->lock);
    return FAJIT_OK;
}

/* A kernel not yet in memory: checked against the device, loaded from disk or built, inserted. */
static fajit_status kernel_create(fajit_context *ctx, const fj_plan *plan, const char *text, fajit_kernel **out,
                                  fajit_cache_source *source)
{
    const fj_arch_info *target = NULL;
    fajit_status st = fj_context_target(ctx, plan, &target);
    if (st != FAJIT_OK) return st;
    fajit_kernel *k = calloc(1, sizeof *k);
    if (!k) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_kernel: out of host memory");
    k->plan = *plan;
    fj_kv8_for_target(&k->plan, target); /* an FP8 K/V cache: cvt where the device has it */
    snprintf(k->config_text, sizeof k->config_text, "%s", text);
    snprintf(k->target, sizeof k->target, "%s", target->name);
    st = kernel_build(ctx, k, source);
    if (st != FAJIT_OK) {
        free(k);
        return st;
    }
    *out = kernel_insert(ctx, k);
    return FAJIT_OK;
}

fajit_status fajit_kernel_get(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **kernel_out,
                              fajit_cache_source *source_out)
{
    return fj_kernel_get_variant(ctx, cfg, 0, kernel_out, source_out);
}

fajit_status fj_kernel_get_variant(fajit_context *ctx, const fajit_config *cfg, unsigned variant,
                                   fajit_kernel **kernel_out, fajit_cache_source *source_out)
{
    fajit_kernel *k = NULL;
    fajit_cache_source source = FAJIT_SOURCE_MEMORY;
    fj_plan plan;
    char text[FJ_CONFIG_TEXT_MAX];
    fj_clear_error();
    if (!ctx || !cfg || !kernel_out)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = NULL: fajit_kernel_get needs ctx, cfg and kernel_out",
                       !ctx ? "ctx" : !cfg ? "cfg" : "kernel_out");
    *kernel_out = NULL;
    fajit_status st = fj_context_require_device(ctx, "fajit_kernel_get");
    if (st == FAJIT_OK) st = kernel_lookup(ctx, cfg, variant, &plan, text, &k);
    if (st == FAJIT_OK && !k) st = kernel_create(ctx, &plan, text, &k, &source);
    if (st != FAJIT_OK) return st;
    *kernel_out = k;
    if (source_out) *source_out = source;
    return FAJIT_OK;
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

/* ---------------------------------------------------------------------------------------------------
 * Shape-class choices (used by forward.c)
 * ------------------------------------------------------------------------------------------------- */
fajit_kernel *fj_context_choice_find(fajit_context *ctx, const char *key, fajit_config *cfg_out)
{
    fajit_kernel *k = NULL;
    pthread_mutex_lock(&ctx->lock);
    for (fj_choice *c = ctx->choices; c; c = c->next) {
        if (strcmp(c->key, key) != 0) continue;
        k = c->kernel;
        if (cfg_out) *cfg_out = c->cfg;
        break;
    }
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

void fj_context_choices_clear(fajit_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    fj_choice *c = ctx->choices;
    ctx->choices = NULL;
    pthread_mutex_unlock(&ctx->lock);
    for (fj_choice *next; c; c = next) { /* kernels stay: they belong to the kernel list */
        next = c->next;
        free(c);
    }
}

fajit_status fj_context_choice_add(fajit_context *ctx, const char *key, const fajit_config *cfg,
                                   fajit_kernel *kernel)
{
    fj_choice *c = calloc(1, sizeof *c);
    if (!c) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_choice: out of host memory");
    snprintf(c->key, sizeof c->key, "%s", key);
    c->cfg = *cfg;
    c->kernel = kernel;
    pthread_mutex_lock(&ctx->lock);
    fj_choice *old = ctx->choices;
    while (old && strcmp(old->key, key) != 0) old = old->next;
    if (!old) {
        c->next = ctx->choices;
        ctx->choices = c;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (old) free(c);
    return FAJIT_OK;
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
