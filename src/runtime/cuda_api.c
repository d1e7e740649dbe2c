/*
 * cuda_api.c - loads libcuda, nvJitLink and NVRTC with dlopen and fills the tables of cuda_api.h.
 *
 * Each library is opened once per process (pthread_once). A failure is remembered with its message
 * (every name tried and the loader's reason) and returned again on every later call, so a missing
 * library costs one dlopen attempt, not one per call. Handles are never closed.
 *
 * Symbols: the driver's versioned entry points are used where cuda.h maps a name to one (cuMemAlloc ->
 * cuMemAlloc_v2, ...), with the plain name as a fallback for old drivers where that is safe;
 * nvJitLink's are the versioned __nvJitLink*_13_0 symbols its header wraps, then the plain names.
 * When cuda.h is available (FAJIT_HAVE_CUDA_HEADERS), the constants mirrored in cuda_api.h are checked
 * against it at the end of this file.
 */
#include "cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym results are stored as function pointers");

#define LIB_MSG_SIZE 1536
#define LIB_TRIED_SIZE 1024 /* the loader's reasons, quoted inside the message */

/* One library: its load state, shared by every thread after pthread_once. */
typedef struct lib_state {
    pthread_once_t once;
    fajit_status status;
    char message[LIB_MSG_SIZE];
    void *handle;
    atomic_int ready; /* set last, once the table is filled: lets a caller ask without loading */
} lib_state;

/* A table field and the symbol names that may fill it, preferred first. */
typedef struct sym_entry {
    size_t offset;
    const char *name;
    const char *fallback; /* NULL: none */
} sym_entry;

/* ---------------------------------------------------------------------------------------------------
 * Opening a library and resolving its symbols
 * ------------------------------------------------------------------------------------------------- */

/* Append "; text" (or "text" first) to the list of reasons, truncating quietly. */
static void tried_append(char *tried, const char *text)
{
    size_t used = strlen(tried);
    if (used > 0) {
        if (used + 3 > LIB_TRIED_SIZE) return;
        memcpy(tried + used, "; ", 2);
        used += 2;
    }
    size_t n = strnlen(text, LIB_TRIED_SIZE - 1 - used);
    memcpy(tried + used, text, n);
    tried[used + n] = '\0';
}

static void *lib_try(const char *path, char *tried)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        tried_append(tried, why ? why : path);
    }
    return h;
}

/*
 * Open the first of: each soname through the loader's search path, then in $CUDA_HOME/lib64 and
 * /usr/local/cuda/lib64 (when search_toolkit). Sonames are tried in order across all places, so a
 * versioned library in the toolkit wins over an unversioned one on the search path.
 */
static void *lib_open(const char *const *sonames, int n, int search_toolkit, char *tried)
{
    const char *cuda_home = getenv("CUDA_HOME");
    const char *dirs[2] = {cuda_home && cuda_home[0] ? cuda_home : NULL, "/usr/local/cuda"};
    char path[1024];
    for (int i = 0; i < n; i++) {
        void *h = lib_try(sonames[i], tried);
        if (h) return h;
        for (int d = 0; search_toolkit && d < 2; d++) {
            if (!dirs[d]) continue;
            if (snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], sonames[i]) >= (int)sizeof path) continue;
            h = lib_try(path, tried);
            if (h) return h;
        }
    }
    return NULL;
}

/* Fill table (of `size` bytes) from syms; on a missing symbol, say which and return nonzero. */
static int lib_resolve(void *handle, const sym_entry *syms, int n, void *table, char *msg, const char *lib)
{
    for (int i = 0; i < n; i++) {
        void *sym = dlsym(handle, syms[i].name);
        if (!sym && syms[i].fallback) sym = dlsym(handle, syms[i].fallback);
        if (!sym) {
            snprintf(msg, LIB_MSG_SIZE, "%s has no symbol %s%s%s (the library is older than fajit supports)", lib,
                     syms[i].name, syms[i].fallback ? " or " : "", syms[i].fallback ? syms[i].fallback : "");
            return 1;
        }
        memcpy((char *)table + syms[i].offset, &sym, sizeof sym);
    }
    return 0;
}

/* Shared body of the three loaders (run inside pthread_once). */
static void lib_load(lib_state *st, const char *what, const char *const *sonames, int n, int search_toolkit,
                     const sym_entry *syms, int n_syms, void *table, const char *hint)
{
    char tried[LIB_TRIED_SIZE] = "";
    st->handle = lib_open(sonames, n, search_toolkit, tried);
    if (!st->handle) {
        st->status = FAJIT_ERR_LIBRARY_MISSING;
        snprintf(st->message, sizeof st->message, "%s could not be loaded (%s). %s", what, tried, hint);
        return;
    }
    if (lib_resolve(st->handle, syms, n_syms, table, st->message, what)) {
        st->status = FAJIT_ERR_LIBRARY_MISSING;
        return;
    }
    st->status = FAJIT_OK;
    atomic_store(&st->ready, 1);
}

/* The file the loader mapped for a loaded library (its search result, not the soname): "" if unknown. */
static void lib_path(const lib_state *st, const void *table, char *buf, size_t size)
{
    void *sym;
    Dl_info info;
    buf[0] = '\0';
    if (!atomic_load(&st->ready)) return;
    memcpy(&sym, table, sizeof sym); /* the table's first function */
    if (dladdr(sym, &info) && info.dli_fname) snprintf(buf, size, "%s", info.dli_fname);
}

static fajit_status lib_result(const lib_state *st)
{
    if (st->status == FAJIT_OK) return FAJIT_OK;
    return fj_fail(st->status, "%s", st->message);
}

/* ---------------------------------------------------------------------------------------------------
 * libcuda
 * ------------------------------------------------------------------------------------------------- */
#define CU_SYM(field, name, fallback) {offsetof(fj_cuda_api, field), name, fallback}

static const sym_entry k_cuda_syms[] = {
    CU_SYM(cuInit, "cuInit", NULL),
    CU_SYM(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    CU_SYM(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    CU_SYM(cuDeviceGet, "cuDeviceGet", NULL),
    CU_SYM(cuDeviceGetName, "cuDeviceGetName", NULL),
    CU_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    CU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    CU_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", NULL),
    CU_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2", NULL),
    CU_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2", NULL),
    CU_SYM(cuCtxSynchronize, "cuCtxSynchronize", NULL),
    CU_SYM(cuModuleLoadData, "cuModuleLoadData", NULL),
    CU_SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx", NULL),
    CU_SYM(cuModuleUnload, "cuModuleUnload", NULL),
    CU_SYM(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    CU_SYM(cuFuncGetAttribute, "cuFuncGetAttribute", NULL),
    CU_SYM(cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    CU_SYM(cuLaunchKernel, "cuLaunchKernel", NULL),
    CU_SYM(cuMemAlloc, "cuMemAlloc_v2", NULL),
    CU_SYM(cuMemFree, "cuMemFree_v2", NULL),
    CU_SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
    CU_SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL),
    CU_SYM(cuMemsetD8, "cuMemsetD8_v2", NULL),
    CU_SYM(cuMemsetD32Async, "cuMemsetD32Async", NULL),
    CU_SYM(cuStreamSynchronize, "cuStreamSynchronize", NULL),
    CU_SYM(cuStreamCreate, "cuStreamCreate", NULL),
    CU_SYM(cuStreamDestroy, "cuStreamDestroy_v2", NULL),
    CU_SYM(cuEventCreate, "cuEventCreate", NULL),
    CU_SYM(cuEventDestroy, "cuEventDestroy_v2", NULL),
    CU_SYM(cuEventRecord, "cuEventRecord", NULL),
    CU_SYM(cuEventSynchronize, "cuEventSynchronize", NULL),
    CU_SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"), /* _v2 since 12.8 */
    CU_SYM(cuGetErrorName, "cuGetErrorName", NULL),
    CU_SYM(cuGetErrorString, "cuGetErrorString", NULL),
};

static lib_state g_cuda = {PTHREAD_ONCE_INIT, FAJIT_ERR_INTERNAL, "", NULL, 0};
static fj_cuda_api g_cuda_api;

static void cuda_load_once(void)
{
    /* The driver comes from the system, never from the toolkit (whose lib64/stubs copy cannot run). */
    static const char *const names[] = {"libcuda.so.1"};
    lib_load(&g_cuda, "the CUDA driver (libcuda.so.1)", names, 1, 0, k_cuda_syms,
             (int)(sizeof k_cuda_syms / sizeof k_cuda_syms[0]), &g_cuda_api,
             "Install an NVIDIA driver. Without a GPU, code generation works: PTX, explain and cubins (fagen "
             "ptx / explain / cubin; fajit.ptx / fajit.explain in Python; in C, no context or one with device = -1).");
    if (g_cuda.status == FAJIT_OK) { /* optional: drivers before CUDA 12.0 have no tensor maps */
        void *sym = dlsym(g_cuda.handle, "cuTensorMapEncodeTiled");
        memcpy(&g_cuda_api.cuTensorMapEncodeTiled, &sym, sizeof sym);
        sym = dlsym(g_cuda.handle, "cuStreamIsCapturing");
        memcpy(&g_cuda_api.cuStreamIsCapturing, &sym, sizeof sym);
        sym = dlsym(g_cuda.handle, "cuLaunchKernelEx");
        memcpy(&g_cuda_api.cuLaunchKernelEx, &sym, sizeof sym);
    }
}

fajit_status fj_cuda_load(const fj_cuda_api **api_out)
{
    pthread_once(&g_cuda.once, cuda_load_once);
    fajit_status st = lib_result(&g_cuda);
    if (st == FAJIT_OK && api_out) *api_out = &g_cuda_api;
    return st;
}

fajit_status fj_cuda_fail(fj_CUresult rc, const char *call)
{
    const char *name = NULL, *text = NULL;
    pthread_once(&g_cuda.once, cuda_load_once); /* a no-op after the first load; orders the read below */
    if (g_cuda.status == FAJIT_OK) {
        if (g_cuda_api.cuGetErrorName(rc, &name) != FJ_CUDA_SUCCESS) name = NULL;
        if (g_cuda_api.cuGetErrorString(rc, &text) != FJ_CUDA_SUCCESS) text = NULL;
    }
    fajit_status st = FAJIT_ERR_CUDA;
    if (rc == FJ_CUDA_ERROR_NO_DEVICE || rc == FJ_CUDA_ERROR_STUB_LIBRARY) st = FAJIT_ERR_NO_DEVICE;
    return fj_fail(st, "%s: %s (%d): %s", call, name ? name : "CUDA_ERROR_?", rc,
                   text ? text : "no description from the driver");
}

/* ---------------------------------------------------------------------------------------------------
 * nvJitLink
 * ------------------------------------------------------------------------------------------------- */
#define JL_SYM(field, name) {offsetof(fj_nvjitlink_api, field), "__nvJitLink" name "_13_0", "nvJitLink" name}

static const sym_entry k_nvjitlink_syms[] = {
    JL_SYM(create, "Create"),
    JL_SYM(destroy, "Destroy"),
    JL_SYM(add_data, "AddData"),
    JL_SYM(complete, "Complete"),
    JL_SYM(get_linked_cubin_size, "GetLinkedCubinSize"),
    JL_SYM(get_linked_cubin, "GetLinkedCubin"),
    JL_SYM(get_error_log_size, "GetErrorLogSize"),
    JL_SYM(get_error_log, "GetErrorLog"),
    JL_SYM(get_info_log_size, "GetInfoLogSize"),
    JL_SYM(get_info_log, "GetInfoLog"),
    {offsetof(fj_nvjitlink_api, version), "nvJitLinkVersion", NULL},
};

static lib_state g_nvjitlink = {PTHREAD_ONCE_INIT, FAJIT_ERR_INTERNAL, "", NULL, 0};
static fj_nvjitlink_api g_nvjitlink_api;

static void nvjitlink_load_once(void)
{
    static const char *const names[] = {"libnvJitLink.so.13", "libnvJitLink.so"};
    lib_load(&g_nvjitlink, "nvJitLink", names, 2, 1, k_nvjitlink_syms,
             (int)(sizeof k_nvjitlink_syms / sizeof k_nvjitlink_syms[0]), &g_nvjitlink_api,
             "Install the CUDA 13 nvJitLink library (package cuda-nvjitlink-13-0 or the nvidia-nvjitlink wheel) "
             "or set CUDA_HOME to the toolkit.");
}

fajit_status fj_nvjitlink_load(const fj_nvjitlink_api **api_out)
{
    pthread_once(&g_nvjitlink.once, nvjitlink_load_once);
    fajit_status st = lib_result(&g_nvjitlink);
    if (st == FAJIT_OK && api_out) *api_out = &g_nvjitlink_api;
    return st;
}

int fj_nvjitlink_loaded(void) { return atomic_load(&g_nvjitlink.ready); }
void fj_nvjitlink_path(char *buf, size_t size) { lib_path(&g_nvjitlink, &g_nvjitlink_api, buf, size); }

const char *fj_nvjitlink_result_name(int result)
{
    static const char *const names[] = {
        "NVJITLINK_SUCCESS", "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", "NVJITLINK_ERROR_MISSING_ARCH",
        "NVJITLINK_ERROR_INVALID_INPUT", "NVJITLINK_ERROR_PTX_COMPILE", "NVJITLINK_ERROR_NVVM_COMPILE",
        "NVJITLINK_ERROR_INTERNAL", "NVJITLINK_ERROR_THREADPOOL", "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
        "NVJITLINK_ERROR_FINALIZE", "NVJITLINK_ERROR_NULL_INPUT", "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
        "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE", "NVJITLINK_ERROR_ARCH_MISMATCH", "NVJITLINK_ERROR_OUTDATED_LIBRARY",
        "NVJITLINK_ERROR_MISSING_FATBIN", "NVJITLINK_ERROR_UNRECOGNIZED_ARCH", "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
        "NVJITLINK_ERROR_LTO_NOT_ENABLED",
    };
    if (result < 0 || result >= (int)(sizeof names / sizeof names[0])) return "NVJITLINK_ERROR_?";
    return names[result];
}

/* ---------------------------------------------------------------------------------------------------
 * NVRTC
 * ------------------------------------------------------------------------------------------------- */
#define RTC_SYM(field, name) {offsetof(fj_nvrtc_api, field), name, NULL}

static const sym_entry k_nvrtc_syms[] = {
    RTC_SYM(create_program, "nvrtcCreateProgram"),
    RTC_SYM(destroy_program, "nvrtcDestroyProgram"),
    RTC_SYM(compile_program, "nvrtcCompileProgram"),
    RTC_SYM(get_cubin_size, "nvrtcGetCUBINSize"),
    RTC_SYM(get_cubin, "nvrtcGetCUBIN"),
    RTC_SYM(get_program_log_size, "nvrtcGetProgramLogSize"),
    RTC_SYM(get_program_log, "nvrtcGetProgramLog"),
    RTC_SYM(get_error_string, "nvrtcGetErrorString"),
    RTC_SYM(version, "nvrtcVersion"),
};

static lib_state g_nvrtc = {PTHREAD_ONCE_INIT, FAJIT_ERR_INTERNAL, "", NULL, 0};
static fj_nvrtc_api g_nvrtc_api;

static void nvrtc_load_once(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so"};
    lib_load(&g_nvrtc, "NVRTC", names, 2, 1, k_nvrtc_syms, (int)(sizeof k_nvrtc_syms / sizeof k_nvrtc_syms[0]),
             &g_nvrtc_api,
             "Install the CUDA 13 NVRTC library (package cuda-nvrtc-13-0 or the nvidia-cuda-nvrtc wheel) "
             "or set CUDA_HOME to the toolkit.");
}

fajit_status fj_nvrtc_load(const fj_nvrtc_api **api_out)
{
    pthread_once(&g_nvrtc.once, nvrtc_load_once);
    fajit_status st = lib_result(&g_nvrtc);
    if (st == FAJIT_OK && api_out) *api_out = &g_nvrtc_api;
    return st;
}

int fj_nvrtc_loaded(void) { return atomic_load(&g_nvrtc.ready); }
void fj_nvrtc_path(char *buf, size_t size) { lib_path(&g_nvrtc, &g_nvrtc_api, buf, size); }

/* ---------------------------------------------------------------------------------------------------
 * The mirrored constants, checked against the real headers. Included last: cuda.h #defines names
 * such as cuMemAlloc, which must not rename the table fields used above.
 * ------------------------------------------------------------------------------------------------- */
#ifdef FAJIT_HAVE_CUDA_HEADERS
#define NVJITLINK_NO_INLINE
#include <cuda.h>
#include <nvJitLink.h>

#define SAME_VALUE(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " must equal " #theirs)
SAME_VALUE(FJ_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME_VALUE(FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME_VALUE(FJ_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
           CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
SAME_VALUE(FJ_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
SAME_VALUE(FJ_CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_NUM_REGS);
SAME_VALUE(FJ_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
SAME_VALUE(FJ_CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_CAPTURE_STATUS_NONE);
SAME_VALUE(FJ_CU_STREAM_CAPTURE_STATUS_ACTIVE, CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME_VALUE(FJ_CU_STREAM_CAPTURE_STATUS_INVALIDATED, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME_VALUE(FJ_CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
SAME_VALUE(FJ_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
SAME_VALUE(FJ_CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_INTERLEAVE_NONE);
SAME_VALUE(FJ_CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_32B);
SAME_VALUE(FJ_CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_64B);
SAME_VALUE(FJ_CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_SWIZZLE_128B);
SAME_VALUE(FJ_CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
SAME_VALUE(FJ_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes (FJ_TMAP_BYTES)");
SAME_VALUE(FJ_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
_Static_assert(sizeof(fj_CUlaunchAttribute) == sizeof(CUlaunchAttribute), "CUlaunchAttribute");
_Static_assert(offsetof(fj_CUlaunchAttribute, value) == offsetof(CUlaunchAttribute, value), "CUlaunchAttribute.value");
_Static_assert(sizeof(fj_CUlaunchConfig) == sizeof(CUlaunchConfig), "CUlaunchConfig");
_Static_assert(offsetof(fj_CUlaunchConfig, smem_bytes) == offsetof(CUlaunchConfig, sharedMemBytes), "sharedMemBytes");
_Static_assert(offsetof(fj_CUlaunchConfig, stream) == offsetof(CUlaunchConfig, hStream), "hStream");
_Static_assert(offsetof(fj_CUlaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs), "attrs");
_Static_assert(offsetof(fj_CUlaunchConfig, n_attrs) == offsetof(CUlaunchConfig, numAttrs), "numAttrs");
SAME_VALUE(FJ_CUDA_SUCCESS, CUDA_SUCCESS);
SAME_VALUE(FJ_CUDA_ERROR_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY);
SAME_VALUE(FJ_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME_VALUE(FJ_CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_IMAGE);
SAME_VALUE(FJ_CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME_VALUE(FJ_NVJITLINK_SUCCESS, NVJITLINK_SUCCESS);
SAME_VALUE(FJ_NVJITLINK_INPUT_PTX, NVJITLINK_INPUT_PTX);
SAME_VALUE(18, NVJITLINK_ERROR_LTO_NOT_ENABLED); /* the last name in fj_nvjitlink_result_name */
_Static_assert(sizeof(fj_CUdeviceptr) == sizeof(CUdeviceptr), "CUdeviceptr");
_Static_assert(sizeof(fj_CUdevice) == sizeof(CUdevice), "CUdevice");
_Static_assert(sizeof(fj_CUresult) == sizeof(CUresult), "CUresult");
#endif
