/*
 * fajit.h - public C API of libfajit, a run-time generator of FlashAttention-class kernels.
 *
 * libfajit writes PTX for one attention configuration (tile sizes, pipeline depth, smem swizzle, head
 * dim, dtype, mask, arch path), compiles it to a cubin with nvJitLink, caches the result in memory and
 * on disk, and launches it on caller-owned device memory.
 *
 * This header does not include cuda.h: device pointers are uint64_t and streams are void * (a CUstream
 * or cudaStream_t; NULL is the legacy default stream). Code generation needs no GPU and no CUDA
 * library; libcuda, nvJitLink and NVRTC are loaded with dlopen the first time a call needs them, and
 * their absence is reported as FAJIT_ERR_LIBRARY_MISSING.
 *
 * Conventions
 *  - Every function returns a fajit_status. On failure, fajit_errmsg() gives a message for the
 *    calling thread that names the field, the value and the rule that was broken.
 *  - The library never prints, exits or aborts on a caller's mistake.
 *  - Objects come in create/destroy pairs; destroy accepts NULL.
 *  - Buffers returned through `char **` / `void **` are allocated by the library and released by the
 *    caller with fajit_free().
 *
 * Attention semantics (forward)
 *    O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:] . K[b,h/g,j,:]) V[b,h/g,j,:],   g = Hq / Hkv
 *  - Q is [B, Hq, Nq, D]; K and V are [B, Hkv, Nk, D]; O is like Q. Each tensor is addressed through
 *    element strides for its batch, head and sequence dims; the head-dim stride is 1. Both the BHND
 *    (contiguous [B,H,N,D]) and BNHD ([B,N,H,D]) layouts work without copies.
 *  - Causal masking with Nq != Nk is aligned to the bottom right, as in FlashAttention-2: query i sees
 *    keys j <= i + (Nk - Nq). A query row that sees no key gets O = 0 and LSE = -inf.
 *  - LSE (optional, fp32, [B, Hq, Nq] contiguous) is the natural-log log-sum-exp of the scaled scores.
 *  - Any Nq, Nk >= 1: tails are masked inside the kernel; nothing needs padding.
 */
#ifndef FAJIT_H
#define FAJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAJIT_VERSION_MAJOR 0
#define FAJIT_VERSION_MINOR 1
#define FAJIT_VERSION_PATCH 0
#define FAJIT_VERSION "0.1.0"
/* Encoded as major * 10000 + minor * 100 + patch; matches fajit_version_number() at run time. */
#define FAJIT_VERSION_NUMBER (FAJIT_VERSION_MAJOR * 10000 + FAJIT_VERSION_MINOR * 100 + FAJIT_VERSION_PATCH)

/* Version of the library actually linked (static string / number). */
const char *fajit_version(void);
int fajit_version_number(void);

/* ---------------------------------------------------------------------------------------------------
 * Status codes and messages
 * ------------------------------------------------------------------------------------------------- */
typedef enum fajit_status {
    FAJIT_OK = 0,
    FAJIT_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, a bad shape or stride, an unknown enum value */
    FAJIT_ERR_INVALID_CONFIG = 2,   /* a kernel config breaks a rule (tile sizes, smem or register budget) */
    FAJIT_ERR_UNSUPPORTED = 3,      /* valid request that this build or this GPU cannot serve */
    FAJIT_ERR_OUT_OF_MEMORY = 4,    /* host allocation failed */
    FAJIT_ERR_LIBRARY_MISSING = 5,  /* libcuda, nvJitLink or NVRTC could not be loaded */
    FAJIT_ERR_COMPILE = 6,          /* nvJitLink or NVRTC rejected the generated code (a bug in fajit) */
    FAJIT_ERR_CUDA = 7,             /* a CUDA driver call failed */
    FAJIT_ERR_NO_DEVICE = 8,        /* no usable CUDA device */
    FAJIT_ERR_IO = 9,               /* a file could not be written or read */
    FAJIT_ERR_INTERNAL = 10         /* a bug in fajit; the message says where */
} fajit_status;

/* Static name of a status, e.g. "FAJIT_ERR_INVALID_CONFIG". Never NULL. */
const char *fajit_status_name(fajit_status status);

/* Message of the most recent failing fajit call on the calling thread ("" if none). The pointer stays
 * valid until the next fajit call on this thread; copy it to keep it. */
const char *fajit_errmsg(void);

/* Release a buffer the library returned (PTX text, cubin bytes, logs). Accepts NULL. */
void fajit_free(void *ptr);

/* ---------------------------------------------------------------------------------------------------
 * Kernel configuration
 * ------------------------------------------------------------------------------------------------- */
typedef enum fajit_dtype {
    FAJIT_DTYPE_AUTO = 0, /* only valid in a config given to fajit_config_fill */
    FAJIT_DTYPE_F16 = 1,
    FAJIT_DTYPE_BF16 = 2
} fajit_dtype;

/* Code-generation path. A path's PTX runs on every GPU at or above it, unless it is an "a" path. */
typedef enum fajit_arch {
    FAJIT_ARCH_AUTO = 0,   /* pick the best path for the device (or sm_80 when there is none) */
    FAJIT_ARCH_SM80 = 80,  /* mma.sync + ldmatrix + cp.async: runs on sm_80, 86, 89, 90, 100, 120 */
    FAJIT_ARCH_SM90A = 90, /* wgmma + TMA + mbarrier: not implemented yet (FAJIT_ERR_UNSUPPORTED) */
    FAJIT_ARCH_SM100A = 100 /* tcgen05 + tensor memory: not implemented yet (FAJIT_ERR_UNSUPPORTED) */
} fajit_arch;

/*
 * One kernel. Fields left 0 are chosen by fajit_config_fill(); fajit_config_check() rejects zeros.
 *  block_m   Br, query rows per CTA (multiple of 16 * warps)
 *  block_n   Bc, key rows per K/V tile (multiple of 16)
 *  stages    K/V tiles in flight (1..4; 1 = no overlap of copy and math)
 *  swizzle   smem XOR swizzle span in bytes: -1 = none, 32, 64 or 128 (0 = pick)
 *  warps     warps per CTA
 *  causal    0 or 1
 */
typedef struct fajit_config {
    fajit_arch arch;
    fajit_dtype dtype;
    int head_dim;
    int block_m;
    int block_n;
    int stages;
    int swizzle;
    int warps;
    int causal;
} fajit_config;

#define FAJIT_SWIZZLE_NONE (-1)

/* The shape a kernel will be used for, as seen by the heuristic. Zeros mean "unknown". */
typedef struct fajit_shape {
    int batch;
    int heads_q;
    int heads_kv;
    int seqlen_q;
    int seqlen_k;
} fajit_shape;

/*
 * Fill the zero fields of *cfg with the heuristic's choice for `shape` (may be NULL) on the GPU of
 * `ctx` (may be NULL: no GPU is assumed, arch AUTO becomes sm_80). head_dim must be set. Tuned
 * winners, when present in the cache directory, are preferred. Then checks the result.
 */
typedef struct fajit_context fajit_context;
fajit_status fajit_config_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg);

/* Check every rule a config must follow for its arch path (no zeros allowed). On failure the message
 * names the field, the value and the rule, with the arithmetic for smem and register budgets. */
fajit_status fajit_config_check(const fajit_config *cfg);

/* Canonical text of a config, e.g. "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal", written into
 * buf (always NUL-terminated). Returns the length it needed, like snprintf. */
int fajit_config_format(const fajit_config *cfg, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------------------
 * Code generation (no GPU needed)
 * ------------------------------------------------------------------------------------------------- */
/*
 * Generate PTX for a checked config. verbosity: 0 = instructions only, 1 = comments per block,
 * 2 = teaching view (config and plan header, smem map, warp roles, fragment layout, register budget,
 * a banner per phase). The same config and verbosity give byte-identical text.
 * *ptx_out receives a NUL-terminated string owned by the caller (fajit_free); *len_out (may be NULL)
 * its length without the NUL.
 */
fajit_status fajit_generate_ptx(const fajit_config *cfg, int verbosity, char **ptx_out, size_t *len_out);

/* The derived plan in words (tiles, smem map with byte offsets, warp roles, fragment layout, register
 * budget), as fagen explain prints it. Owned by the caller (fajit_free). */
fajit_status fajit_explain(const fajit_config *cfg, char **text_out);

/*
 * Compile a config to a cubin for `sm` ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", ...)
 * with nvJitLink. Needs nvJitLink, not a GPU. *cubin_out is owned by the caller (fajit_free);
 * *log_out (may be NULL) receives the compiler's info log, also owned by the caller.
 */
fajit_status fajit_compile_cubin(const fajit_config *cfg, const char *sm, void **cubin_out, size_t *size_out,
                                 char **log_out);

/* ---------------------------------------------------------------------------------------------------
 * Context: device binding, kernel caches
 * ------------------------------------------------------------------------------------------------- */
typedef struct fajit_context_options {
    int device;            /* CUDA device ordinal; -1 = no device (code generation and cubins only) */
    int disk_cache;        /* -1 = from the environment (FAJIT_CACHE=0 turns it off), 0 = off, 1 = on */
    const char *cache_dir; /* NULL = $FAJIT_CACHE_DIR, else $XDG_CACHE_HOME/fajit, else ~/.cache/fajit */
} fajit_context_options;

/* Default options: device 0, disk cache from the environment, default directory. */
fajit_context_options fajit_context_options_default(void);

/*
 * Create a context. opts may be NULL (defaults). With a device, the device's primary CUDA context is
 * retained and kernels are loaded into it (the one PyTorch and the runtime API use); libcuda is
 * loaded here, so FAJIT_ERR_LIBRARY_MISSING / FAJIT_ERR_NO_DEVICE come from this call.
 * A context is thread-safe. Destroy with fajit_context_destroy (accepts NULL).
 */
fajit_status fajit_context_create(const fajit_context_options *opts, fajit_context **ctx_out);
void fajit_context_destroy(fajit_context *ctx);

/* Where the disk cache lives for this context ("" when it is off). Static for the context's life. */
const char *fajit_context_cache_dir(const fajit_context *ctx);

/* The device's sm name ("sm_90", ...), or "" with no device. Static for the context's life. */
const char *fajit_context_sm(const fajit_context *ctx);

/* Where a kernel came from on its last fajit_kernel_get. */
typedef enum fajit_cache_source {
    FAJIT_SOURCE_MEMORY = 0,   /* found in this context's memory cache */
    FAJIT_SOURCE_DISK = 1,     /* loaded from a valid disk-cache entry */
    FAJIT_SOURCE_COMPILED = 2  /* generated and compiled now (and stored, if the disk cache is on) */
} fajit_cache_source;

/*
 * A loaded kernel for a checked config on the context's device. Looked up in the memory cache, then
 * the disk cache (entries that are truncated, corrupt or rejected by the driver are discarded and
 * rebuilt), then generated and compiled. The kernel is owned by the context and lives until the
 * context is destroyed; do not free it. source_out may be NULL.
 */
typedef struct fajit_kernel fajit_kernel;
fajit_status fajit_kernel_get(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **kernel_out,
                              fajit_cache_source *source_out);

typedef struct fajit_kernel_info {
    int registers;        /* per thread, from the driver */
    int smem_bytes;       /* dynamic shared memory per CTA */
    int threads;          /* per CTA */
    int spill_bytes;      /* local memory per thread reported by the driver (0 is the goal) */
    size_t cubin_bytes;
} fajit_kernel_info;
fajit_status fajit_kernel_get_info(const fajit_kernel *kernel, fajit_kernel_info *info_out);

/* ---------------------------------------------------------------------------------------------------
 * Forward attention
 * ------------------------------------------------------------------------------------------------- */
typedef struct fajit_attention_args {
    fajit_dtype dtype;
    int batch, heads_q, heads_kv; /* heads_q % heads_kv == 0 (GQA / MQA) */
    int seqlen_q, seqlen_k;       /* >= 1 */
    int head_dim;                 /* 64, 96, 128, 192 or 256 */
    uint64_t q, k, v, o;          /* device pointers, 16-byte aligned */
    uint64_t lse;                 /* device pointer to fp32 [B, Hq, Nq], or 0 for none */
    /* element strides of the batch, head and sequence dims; the head-dim stride is 1. Row strides
     * (stride[2]) and the others must be multiples of 8 elements (16-byte rows). */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    float softmax_scale; /* 0 = 1/sqrt(head_dim) */
    int causal;          /* bottom-right aligned when seqlen_q != seqlen_k */
    void *stream;        /* CUstream / cudaStream_t, NULL = default stream */
} fajit_attention_args;

/* Fill strides for contiguous BHND ([B,H,N,D]) or BNHD ([B,N,H,D]) tensors from the shape fields. */
void fajit_args_set_bhnd_strides(fajit_attention_args *args);
void fajit_args_set_bnhd_strides(fajit_attention_args *args);

/*
 * Run forward attention asynchronously on args->stream. cfg may be NULL (the heuristic picks; the
 * config is then fixed per shape class and cached). The context's device must own the pointers.
 */
fajit_status fajit_attention_forward(fajit_context *ctx, const fajit_attention_args *args, const fajit_config *cfg);

#ifdef __cplusplus
}
#endif
#endif /* FAJIT_H */
