/*
 * cuda_api.h - libcuda, nvJitLink and NVRTC, loaded with dlopen on first use.
 *
 * libfajit never links against CUDA libraries: code generation must work on a machine without them,
 * and their absence must be an error message, not a loader failure. Each library is a table of
 * function pointers filled by fj_cuda_load() / fj_nvjitlink_load() / fj_nvrtc_load() (thread-safe,
 * once per process; a failed load is remembered and reported again with the same message).
 *
 * The types below mirror the driver API's handles as opaque pointers so this header does not need
 * cuda.h; values of enums used (attributes, JIT options) are the documented constants of cuda.h and
 * are checked against it in runtime/cuda_api.c, which does include cuda.h.
 */
#ifndef FJ_CUDA_API_H
#define FJ_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "fajit.h"

typedef int fj_CUresult;         /* CUresult */
typedef int fj_CUdevice;         /* CUdevice */
typedef struct fj_CUctx_st *fj_CUcontext;
typedef struct fj_CUmod_st *fj_CUmodule;
typedef struct fj_CUfunc_st *fj_CUfunction;
typedef struct fj_CUstream_st *fj_CUstream;
typedef struct fj_CUevent_st *fj_CUevent;
typedef uint64_t fj_CUdeviceptr;

/* cuLaunchKernelEx's config and attribute (CUlaunchConfig, CUlaunchAttribute: the attribute's id, padded to 8
 * bytes, then a 64-byte value union; layouts checked against cuda.h in cuda_api.c) */
typedef struct fj_CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char pad[64];
        int programmatic_stream_serialization_allowed; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
    } value;
} fj_CUlaunchAttribute;
typedef struct fj_CUlaunchConfig {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, smem_bytes;
    fj_CUstream stream;
    fj_CUlaunchAttribute *attrs;
    unsigned n_attrs;
} fj_CUlaunchConfig;

typedef struct fj_cuda_api {
    fj_CUresult (*cuInit)(unsigned flags);
    fj_CUresult (*cuDriverGetVersion)(int *version);
    fj_CUresult (*cuDeviceGetCount)(int *count);
    fj_CUresult (*cuDeviceGet)(fj_CUdevice *dev, int ordinal);
    fj_CUresult (*cuDeviceGetName)(char *name, int len, fj_CUdevice dev);
    fj_CUresult (*cuDeviceGetAttribute)(int *value, int attrib, fj_CUdevice dev);
    fj_CUresult (*cuDevicePrimaryCtxRetain)(fj_CUcontext *ctx, fj_CUdevice dev);
    fj_CUresult (*cuDevicePrimaryCtxRelease)(fj_CUdevice dev);
    fj_CUresult (*cuCtxPushCurrent)(fj_CUcontext ctx);
    fj_CUresult (*cuCtxPopCurrent)(fj_CUcontext *ctx);
    fj_CUresult (*cuCtxSynchronize)(void);
    fj_CUresult (*cuModuleLoadData)(fj_CUmodule *mod, const void *image);
    fj_CUresult (*cuModuleLoadDataEx)(fj_CUmodule *mod, const void *image, unsigned n, int *options, void **values);
    fj_CUresult (*cuModuleUnload)(fj_CUmodule mod);
    fj_CUresult (*cuModuleGetFunction)(fj_CUfunction *f, fj_CUmodule mod, const char *name);
    fj_CUresult (*cuFuncGetAttribute)(int *value, int attrib, fj_CUfunction f);
    fj_CUresult (*cuFuncSetAttribute)(fj_CUfunction f, int attrib, int value);
    fj_CUresult (*cuLaunchKernel)(fj_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned smem, fj_CUstream stream, void **params, void **extra);
    fj_CUresult (*cuMemAlloc)(fj_CUdeviceptr *ptr, size_t bytes);
    fj_CUresult (*cuMemFree)(fj_CUdeviceptr ptr);
    fj_CUresult (*cuMemcpyHtoD)(fj_CUdeviceptr dst, const void *src, size_t bytes);
    fj_CUresult (*cuMemcpyDtoH)(void *dst, fj_CUdeviceptr src, size_t bytes);
    fj_CUresult (*cuMemsetD8)(fj_CUdeviceptr dst, unsigned char value, size_t bytes);
    fj_CUresult (*cuMemsetD32Async)(fj_CUdeviceptr dst, unsigned value, size_t n, fj_CUstream stream);
    fj_CUresult (*cuStreamSynchronize)(fj_CUstream stream);
    fj_CUresult (*cuStreamCreate)(fj_CUstream *stream, unsigned flags); /* (the tests' streams) */
    fj_CUresult (*cuStreamDestroy)(fj_CUstream stream);
    fj_CUresult (*cuEventCreate)(fj_CUevent *ev, unsigned flags);
    fj_CUresult (*cuEventDestroy)(fj_CUevent ev);
    fj_CUresult (*cuEventRecord)(fj_CUevent ev, fj_CUstream stream);
    fj_CUresult (*cuEventSynchronize)(fj_CUevent ev);
    fj_CUresult (*cuEventElapsedTime)(float *ms, fj_CUevent start, fj_CUevent end);
    fj_CUresult (*cuGetErrorName)(fj_CUresult err, const char **str);
    fj_CUresult (*cuGetErrorString)(fj_CUresult err, const char **str);
    /* Optional (drivers for CUDA 12.0 and later): NULL when the driver lacks it; the TMA paths then
     * report FAJIT_ERR_UNSUPPORTED. tensor_map is a 64-byte aligned 128-byte CUtensorMap. */
    fj_CUresult (*cuTensorMapEncodeTiled)(void *tensor_map, int data_type, uint32_t rank, void *global_address,
                                          const uint64_t *global_dim, const uint64_t *global_strides,
                                          const uint32_t *box_dim, const uint32_t *element_strides, int interleave,
                                          int swizzle, int l2_promotion, int oob_fill);
    /* Optional (CUDA 10.0 and later): NULL when the driver lacks it, and then no stream is taken for one
     * capturing a CUDA graph. *status: FJ_CU_STREAM_CAPTURE_STATUS_* */
    fj_CUresult (*cuStreamIsCapturing)(fj_CUstream stream, int *status);
    /* Optional (CUDA 11.8 and later): NULL when the driver lacks it; the combine kernel of split-KV then waits for
     * the split kernel as any stream-ordered launch (no programmatic dependent launch: decode.c). */
    fj_CUresult (*cuLaunchKernelEx)(const fj_CUlaunchConfig *config, fj_CUfunction f, void **params, void **extra);
} fj_cuda_api;

/* Load libcuda.so.1 once; on failure returns FAJIT_ERR_LIBRARY_MISSING with the dlerror text. */
fajit_status fj_cuda_load(const fj_cuda_api **api_out);

/* Turn a failed driver call into a status + message: "cuModuleLoadData: CUDA_ERROR_... (code): text". */
fajit_status fj_cuda_fail(fj_CUresult rc, const char *call);

/* Driver attribute and option values used by fajit (checked against cuda.h in cuda_api.c). */
enum {
    FJ_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    FJ_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    FJ_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    FJ_CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    FJ_CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    FJ_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
};

/* cuTensorMapEncodeTiled's enums (checked against cuda.h in cuda_api.c). */
enum {
    FJ_CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, /* e4m3 bytes: TMA only moves them */
    FJ_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
    FJ_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
    FJ_CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    FJ_CU_TENSOR_MAP_SWIZZLE_32B = 1,
    FJ_CU_TENSOR_MAP_SWIZZLE_64B = 2,
    FJ_CU_TENSOR_MAP_SWIZZLE_128B = 3,
    FJ_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
    FJ_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
};

/* cuLaunchKernelEx's attribute ids used (checked against cuda.h in cuda_api.c). */
enum { FJ_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };

/* cuStreamIsCapturing's statuses (checked against cuda.h in cuda_api.c). */
enum {
    FJ_CU_STREAM_CAPTURE_STATUS_NONE = 0,
    FJ_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    FJ_CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
};

/* CUresult values fajit tests for (checked against cuda.h in cuda_api.c). */
enum {
    FJ_CUDA_SUCCESS = 0,
    FJ_CUDA_ERROR_STUB_LIBRARY = 34, /* the libcuda found is the toolkit's link stub: no driver installed */
    FJ_CUDA_ERROR_NO_DEVICE = 100,
    FJ_CUDA_ERROR_INVALID_IMAGE = 200,
    FJ_CUDA_ERROR_NO_BINARY_FOR_GPU = 209
};

/* nvJitLink result and input-type values used (checked against nvJitLink.h in cuda_api.c). */
enum {
    FJ_NVJITLINK_SUCCESS = 0,
    FJ_NVJITLINK_INPUT_PTX = 2
};
/* Static name of an nvJitLinkResult ("NVJITLINK_ERROR_PTX_COMPILE"); "NVJITLINK_ERROR_?" if unknown. */
const char *fj_nvjitlink_result_name(int result);

/* nvJitLink: PTX -> cubin for one sm (no GPU needed). */
typedef struct fj_nvjitlink_api {
    int (*create)(void **handle, uint32_t n_options, const char **options);
    int (*destroy)(void **handle);
    int (*add_data)(void *handle, int input_type, const void *data, size_t size, const char *name);
    int (*complete)(void *handle);
    int (*get_linked_cubin_size)(void *handle, size_t *size);
    int (*get_linked_cubin)(void *handle, void *cubin);
    int (*get_error_log_size)(void *handle, size_t *size);
    int (*get_error_log)(void *handle, char *log);
    int (*get_info_log_size)(void *handle, size_t *size);
    int (*get_info_log)(void *handle, char *log);
    int (*version)(unsigned *major, unsigned *minor);
} fj_nvjitlink_api;
fajit_status fj_nvjitlink_load(const fj_nvjitlink_api **api_out);
/* Whether nvJitLink is loaded in this process (never loads it); the file the loader mapped for it ("" when not
 * loaded). Same pair for NVRTC below. */
int fj_nvjitlink_loaded(void);
void fj_nvjitlink_path(char *buf, size_t size);

/* NVRTC: CUDA C -> PTX or cubin (used for the reference kernel). */
typedef struct fj_nvrtc_api {
    int (*create_program)(void **prog, const char *src, const char *name, int n_headers, const char *const *headers,
                          const char *const *include_names);
    int (*destroy_program)(void **prog);
    int (*compile_program)(void *prog, int n_options, const char *const *options);
    int (*get_cubin_size)(void *prog, size_t *size);
    int (*get_cubin)(void *prog, char *cubin);
    int (*get_program_log_size)(void *prog, size_t *size);
    int (*get_program_log)(void *prog, char *log);
    const char *(*get_error_string)(int result);
    int (*version)(int *major, int *minor);
} fj_nvrtc_api;
fajit_status fj_nvrtc_load(const fj_nvrtc_api **api_out);
int fj_nvrtc_loaded(void);
void fj_nvrtc_path(char *buf, size_t size);

#endif
