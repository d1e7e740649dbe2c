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
 *  - Decode / long context (fields appended to fajit_attention_args, set up by fajit_attention_args_init):
 *    per-sequence KV lengths (seqlens_k: sequence b sees keys [0, seqlens_k[b]), causal bottom-right per
 *    sequence), split-KV (num_splits, workspace) and paged K/V (block_table). They run on the sm_80 or
 *    the sm_90a path's kernels as the runtime picks per call (e4m3 queries: the sm_90a FP8 kernel).
 *  - Varlen batches (cu_seqlens_q / cu_seqlens_k, FlashAttention's varlen API): sequences packed along one token
 *    dim, with paged K/V for chunked prefill; both paths (see the fields).
 */
#ifndef FAJIT_H
#define FAJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAJIT_VERSION_MAJOR 0
#define FAJIT_VERSION_MINOR 2
#define FAJIT_VERSION_PATCH 0
#define FAJIT_VERSION "0.2.0"
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
    FAJIT_DTYPE_BF16 = 2,
    FAJIT_DTYPE_E4M3 = 3  /* float8 e4m3 (OCP FP8, torch.float8_e4m3fn): Q/K/V of the sm_90a path's FP8 kernels, or
                             an FP8 K/V cache (kv_dtype); accumulation is fp32, O is BF16 or F16 (out_dtype) */
} fajit_dtype;

/* Code-generation path. A path's PTX runs on every GPU at or above it, unless it is an "a" path. */
typedef enum fajit_arch {
    FAJIT_ARCH_AUTO = 0,   /* pick the best path for the device (or sm_80 when there is none) */
    FAJIT_ARCH_SM80 = 80,  /* mma.sync + ldmatrix + cp.async: runs on sm_80, 86, 89, 90, 100, 120 */
    FAJIT_ARCH_SM90A = 90, /* wgmma + TMA + mbarrier, warp-specialized: runs on sm_90 (H100, H200) only */
    FAJIT_ARCH_SM100A = 100 /* tcgen05 + tensor memory: never run on hardware (checked by ptxas, SASS and a pipeline
                                simulator only); launched on a compute capability 10.0 GPU, where AUTO takes it, unless
                                FAJIT_SM100A_LAUNCH=0 (then AUTO takes sm_80 and this path is FAJIT_ERR_UNSUPPORTED) */
} fajit_arch;

/*
 * One kernel. Fields left 0 are chosen by fajit_config_fill(); fajit_config_check() rejects zeros.
 * Python's keywords are these names; fagen's flags too (--stages, --col-warps), except --br / --bc for
 * block_m / block_n (messages say "block_m (--br) = 100" for both audiences).
 *  block_m   Br, query rows per CTA (multiple of 16 * warps / col_warps)
 *  block_n   Bc, key rows per K/V tile (multiple of 16)
 *  stages    K/V tiles in flight (1..4; 1 = no overlap of copy and math)
 *  swizzle   smem XOR swizzle span in bytes: -1 = none, 32, 64 or 128 (0 = pick)
 *  warps     warps per CTA
 *  causal    0 or 1
 *  col_warps warps that share one block of query rows, each computing 1/col_warps of its columns
 *            (of S: keys; of O: head dims): 1 (FlashAttention-2: a warp owns whole rows) or 2 (warp
 *            pairs exchange row maxima and P through smem; halves O's registers per row, so a warp can
 *            own twice the rows and read K/V from smem half as often per MMA - what D >= 192 needs).
 *            0 = pick in fajit_config_fill; fajit_config_check reads 0 as 1, so configs written before
 *            this field existed keep their meaning. sm_80 path only (sm_90a: 1).
 *  overlap   sm_90a: 1 = each consumer warpgroup issues S(j+1) = Q K(j+1)^T before the softmax of S(j)
 *            and O += P(j) V(j) after it, so the tensor cores work while it exponentiates (intra-warpgroup
 *            overlap, FlashAttention-3 section 3.2); -1 = off (S, softmax, PV in turn).
 *  pingpong  sm_90a with two or more consumer warpgroups: 1 = named barriers take the warpgroups through
 *            their GEMMs in turn, so one's softmax runs while another's GEMMs do (FlashAttention-3
 *            section 3.1); -1 = off.
 *            For both: 0 = pick in fajit_config_fill; fajit_config_check reads 0 as off. On sm_80
 *            only 0 and -1 are accepted.
 *
 * On sm_90a a CTA is one producer warpgroup (TMA loads) and block_m / 64 consumer warpgroups of 64
 * query rows each: warps = 4 * (block_m / 64 + 1); swizzle 32, 64 or 128 (the TMA box width in bytes).
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
    int col_warps;
    int overlap;
    int pingpong;
    /* Attention variants the kernel is generated for (FAJIT_MOD_* bits, 0 = plain attention; see "Attention
     * variants" above fajit_attention_forward). Part of the cache key and the canonical text ("... causal win cap
     * sink alibi chunk"); a plain kernel (0) is unchanged. The per-call values (window sizes, softcap, chunk,
     * sink and slope pointers) are kernel parameters, not part of the config. Appended in 0.2: a config zeroed
     * with = {0} or memset is plain. */
    int mods;
    /* FP8 (appended in 0.2; 0 = as before, so a zeroed config keeps its meaning and its text):
     *  kv_dtype   dtype of K and V when it differs from dtype: FAJIT_DTYPE_E4M3 with dtype BF16 / F16 is an FP8
     *             K/V cache read by BF16 / F16 queries (decode). 0 (or dtype itself) = K and V are dtype.
     *  out_dtype  dtype of O when dtype is FAJIT_DTYPE_E4M3: FAJIT_DTYPE_BF16 (0 = BF16) or FAJIT_DTYPE_F16.
     *             For dtype F16 / BF16 O is dtype: 0 or dtype itself.
     * Canonical text: the dtype word gains ",kv=e4m3" / ",o=f16" when they are set and not the default
     * ("sm_90a e4m3,o=f16 d128 ...", "sm_80 bf16,kv=e4m3 d128 ..."). FP8 dtype (E4M3 Q/K/V) runs on the sm_90a
     * path only, head_dim 64, 128 or 256. */
    fajit_dtype kv_dtype;
    fajit_dtype out_dtype;
    /* roll (appended in 0.2; 0 = the default, so a zeroed config keeps its meaning and its text): sm_90a path, BF16 /
     * F16 / e4m3, stages >= 2. 1 = the consumers' KV loop is written once for every stage of the K/V ring (the stage, its
     * barrier addresses and descriptor offsets in registers) instead of once per stage: about half the PTX and a
     * shorter compile (issue 23), a few more registers; -1 = one loop body per stage (unrolled). 0 reads as 1
     * where it can (BF16 / F16, 2+ stages, attention variants and varlen batches included, no decode variant -
     * seqlens_k, split-KV, paged K/V, GQA packing: the rolled loop measured as fast on the H200 and H100), else as -1
     * (e4m3 too: its rolled loop, about half the compile time, is opt-in; on the H200 it ran D128 1.00-1.07x the
     * unrolled kernel, session 24); fajit_config_fill leaves it. Canonical text: " roll" after the schedule flags when 1 ("... w12 ov pp
     * roll noncausal"). Python's keyword and fagen's flag: roll (--roll on|off). */
    int roll;
    /* sched (appended in 0.2; 0 = static, so a zeroed config keeps its meaning and its text): how the sm_90a
     * persistent kernel hands out the work tiles of a causal BF16 / F16 attention.
     * -1 or 0 = static (every CTA walks a fixed round-robin of the tiles); 1 = lpt, the dynamic longest-first
     * schedule (each CTA takes its next tile from a global counter, the longest first, in sections of heads whose
     * K/V fit the L2): the launch zeroes a 4-byte counter in the call's stream first (the call's workspace when it
     * gives one, else a counter the context keeps for that stream: see workspace below). fajit_config_fill picks
     * 1 at seqlen_q >= 4096 for grouped-query shapes (heads_q >= 4 x heads_kv), for other shapes up to
     * seqlen_q 8192, and for chunked attention (H100: 1.00-1.10x over static there), and leaves 0 elsewhere
     * (multi-head at 16384: static measured 1-2% faster; shorter queries: not measured). It leaves a sliding
     * window's 0: a call without a config then takes 1 where, for its window length, the static schedule would
     * leave its busiest SM over 4% above the mean and work tiles average 8 KV tiles or more (H200: +3-20% there,
     * 1-6% slower for shorter windows). Decode and varlen calls
     * keep their own schedule whatever sched
     * says. Canonical text: " lpt" after the schedule flags when 1. fagen's flag: --sched static|lpt. */
    int sched;
    /* cross_tile (appended in 0.2; 0 = off unless fajit_config_fill picks it, so a zeroed config keeps its meaning and
     * its text): sm_90a path, BF16 / F16, ping-pong with the overlap and the rolled loop, no ALiBi. 1 = a work tile's
     * last O += P V goes to the tensor cores together with the CTA's next work tile's first S = Q K^T, and the tile's
     * epilogue runs under that S (docs/ARCHITECTURE.md, "cross-tile"); -1 = off. Measured on the H200 (session 15):
     * +0.1-2% for causal head_dim 64 with grouped-query heads, +4-5% with a window of 128 keys and sinks; 1-3% slower
     * with longer windows or without the sinks, 1-2% slower non-causal, multi-head at 16k keys and softcap, level at
     * head_dim 128. So fajit_config_fill picks 1 for causal head_dim <= 64 grouped-query shapes (heads_q >= 4 x
     * heads_kv) without softcap, window or chunk; a call without a config also takes it for a causal window of at
     * most 128 keys on the left with sinks (gpt-oss's local layers). Decode and varlen calls run without it whatever
     * it says. Canonical text: " xt" after " lpt" when 1. fagen's flag: --cross-tile on|off; Python's keyword:
     * cross_tile. */
    int cross_tile;
    /* accurate (appended in 0.2; 0 = off, so a zeroed config keeps its meaning and its text): sm_80 and sm_90a paths,
     * BF16 / F16 queries and K/V, no warp pairs (col_warps 1). 1 = the online softmax also moves its reference max when
     * a new row max would weigh more than about 1/4 (sm_80: 1/8) of the row's estimated final sum, so the row's
     * largest weights sit just under 1, where bf16 / f16 round P most finely, as FlashAttention's eager rescale puts
     * them: max error against a float64 reference 1.00-1.02x FlashAttention-2's (mean of 12 seeds; 1.09-1.16x on the
     * worst), where the default's lazy rescale gives 1.1-1.5x (2.6x on single seeds). On sm_90a it costs 0-6% of
     * speed at N 2k-8k (the most at N 2k and D64 causal); on the sm_80 path 0-4% at D64 and, at D128, where the fill
     * halves the KV tile under it (br128 bc32: br128 bc64 spills), 5-8% at N 4k (H200,
     * bench/results/h200-session23-2026-11-29.md and h200-session24-2026-11-29.md), so
     * fajit_config_fill and calls without a config never pick it; -1 = off. A call given such a config keeps it where
     * the runtime runs an sm_80 kernel in its place (tensors TMA cannot describe, the decode features' sm_80
     * kernels). Canonical text: " acc" after " xt" when 1. fagen's flag: --accurate on|off; Python's keyword:
     * accurate. */
    int accurate;
} fajit_config;

/* fajit_config.mods bits. WINDOW and CHUNK bound each query row's keys (a local mask read from the kernel's
 * parameters: window_left / window_right, attention_chunk); SOFTCAP caps the scores; SINKS adds a per-head sink
 * logit to each row's softmax denominator; ALIBI adds a per-head linear distance bias. */
#define FAJIT_MOD_WINDOW 1
#define FAJIT_MOD_SOFTCAP 2
#define FAJIT_MOD_SINKS 4
#define FAJIT_MOD_ALIBI 8
#define FAJIT_MOD_CHUNK 16
#define FAJIT_MOD_ALL 31

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
 * `ctx` (may be NULL: no GPU is assumed, arch AUTO becomes sm_80). head_dim must be set (0 is
 * FAJIT_ERR_INVALID_ARGUMENT). With a ctx on a GPU and a shape with sequence lengths, the tuned winner
 * of the shape's class (see Autotuning below: fajit_tune, the tune file) fills the zero fields when there
 * is one and it fits the fields the caller set; otherwise the built-in table does. Every field the
 * caller set is kept: when the table's choice breaks a rule beside them (or, with a ctx, would spill
 * or not fit on that GPU), the nearest config that passes is taken instead. When none keeps them, the
 * call fails naming the field (or two) that rules every config out, e.g. "block_m (--br) = 1024: no
 * sm_80 config for head_dim 128 keeps it; the nearest, ..., fails: <its rule>". *cfg is changed only
 * on success. A returned config passes fajit_config_check.
 */
typedef struct fajit_context fajit_context;
fajit_status fajit_config_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg);

/* Check every rule a config must follow for its arch path (no zeros allowed). On failure the message
 * names the field, the value and the rule, with the arithmetic for smem and register budgets. */
fajit_status fajit_config_check(const fajit_config *cfg);

/* Canonical text of a config, e.g. "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal" or
 * "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal" (ov / pp: overlap / pingpong on), then the
 * variants of mods in this order when set: " win", " cap", " sink", " alibi", " chunk"; written
 * into buf (always NUL-terminated when size > 0). Returns the length it needed, like snprintf. buf NULL (any
 * size) writes nothing and returns the length; cfg NULL gives "(null)". */
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
 * with nvJitLink, or with NVRTC (a whole-program compile) for the warp-specialized sm_90a kernels, whose
 * setmaxnreg nvJitLink would drop. Needs that library, not a GPU. *cubin_out is owned by the caller (fajit_free);
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
    const char *cache_dir; /* NULL = $FAJIT_CACHE_DIR, else $XDG_CACHE_HOME/fajit, else ~/.cache/fajit; at
                              most 960 characters (a longer one: FAJIT_ERR_INVALID_ARGUMENT; from the
                              environment: the disk cache is off) */
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
    FAJIT_SOURCE_COMPILED = 2, /* generated and compiled now (and stored, if the disk cache is on) */
    FAJIT_SOURCE_PREBUILT = 3, /* built with the library (a checked entry of its prebuilt kernels) */
    FAJIT_SOURCE_FALLBACK = 4  /* fajit_last_forward_source only: the call's chosen config was not compiled yet;
                                  a loaded or prebuilt kernel of the same problem ran while it compiles */
} fajit_cache_source;

/*
 * A loaded kernel for a checked config on the context's device. Looked up in the memory cache, then
 * the kernels built into the library (each checked against its key and checksum first; FAJIT_PREBUILT=0
 * when the context is made skips them), then the disk cache (entries that are truncated, corrupt or
 * rejected by the driver are discarded and rebuilt), then generated and compiled. The kernel is owned by the context and lives until the
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
 * Warm-up: many kernels compiled at once, before the calls that need them
 * ------------------------------------------------------------------------------------------------- */
#define FAJIT_WARM_MAX_THREADS 256
#define FAJIT_WARM_MAX_CONFIGS 10000

/* Called on the thread that called fajit_warm, once per distinct kernel as it finishes (in the order they
 * finish):
 *   done / total  kernels finished so far (this one included) / distinct kernels of the call
 *   index         the first position in configs[] that gives this kernel
 *   cfg           its config, every field filled (valid for the call only)
 *   status        FAJIT_OK, or why it failed
 *   note          never NULL (valid for the call only): "compiled in 0.71 s", "disk", "memory", or the
 *                 failure's message
 * It must not call fajit_warm. */
typedef void (*fajit_warm_progress_fn)(void *user, int done, int total, int index, const fajit_config *cfg,
                                       fajit_status status, const char *note);

typedef struct fajit_warm_options {
    int threads;    /* compile threads: 0 = one per online CPU; at most FAJIT_WARM_MAX_THREADS (never more than
                       the distinct kernels) */
    const char *sm; /* the GPU to compile for when ctx has no device (device -1): "sm_90" / "sm_90a" (H100,
                       H200: the sm_90a path for arch AUTO), "sm_80", "sm_86", ...; required then. With a
                       device: NULL, or that device's own sm (a check) */
    fajit_warm_progress_fn progress; /* may be NULL */
    void *progress_user;
} fajit_warm_options;

/* Defaults: one thread per CPU, no sm, no progress callback. */
fajit_warm_options fajit_warm_options_default(void);

typedef struct fajit_warm_result {
    int total;      /* distinct kernels (configs that fill to the same kernel count once) */
    int compiled;   /* compiled by this call */
    int cached;     /* found in the context's memory or in the disk cache */
    int failed;     /* failed to compile, store or load */
    int threads;    /* threads that compiled */
    double seconds; /* wall time of the call */
} fajit_warm_result;

/*
 * Compile many kernels at once, on `threads` threads, so that later calls find them in a cache.
 * configs[0..count): fields left 0 are filled as fajit_config_fill(ctx, shapes ? &shapes[i] : NULL, ...)
 * fills them (head_dim must be set): with a device, the device's path and the tuned winner of the shape's
 * class, so that warming a shape warms what fajit_attention_forward without a config will pick for it;
 * without one, the path and limits of opts->sm's GPU. shapes may be NULL. Configs that fill to the same
 * kernel are compiled once.
 *  - ctx with a device: each kernel is loaded into ctx (as fajit_kernel_get does: memory, disk, else
 *    compiled and stored to disk), so later calls on ctx find it in memory and later processes on disk.
 *  - ctx without a device (compile only, e.g. CI or an image build): opts->sm is required and the disk
 *    cache must be on; each kernel is compiled and stored in it under the key a context on such a GPU
 *    looks up (same fajit build and compiler library), ready for a later process.
 * Every config is filled and checked before anything is compiled: a config that cannot be filled fails
 * the call (its status, the message starting "configs[i]: ") with nothing compiled. Then every kernel is
 * attempted; a kernel that fails does not stop the others, and the call returns the status of the failure
 * of the lowest index, its message naming configs[i] and its config. result_out (may be NULL) is filled
 * either way. opts may be NULL (defaults). count 0 does nothing.
 * Errors: FAJIT_ERR_INVALID_ARGUMENT (ctx or configs NULL, count outside 0..FAJIT_WARM_MAX_CONFIGS, threads
 * outside 0..FAJIT_WARM_MAX_THREADS, an unknown opts->sm or one that is not the device's, no sm without a
 * device, no disk cache without a device), a config's fill status, else the first kernel's failure.
 * Thread-safe; the compilers (nvJitLink, NVRTC) run one handle per thread.
 */
fajit_status fajit_warm(fajit_context *ctx, const fajit_config *configs, const fajit_shape *shapes, int count,
                        const fajit_warm_options *opts, fajit_warm_result *result_out);

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

    /* ---- growth: every field below was added after 0.1. Fields are only ever appended. ---------
     * struct_size says how much of this struct the caller's build knows: fajit_attention_args_init()
     * sets it to sizeof(fajit_attention_args) of the header the caller compiled against. 0 (a struct
     * zeroed with = {0} or memset) reads as FAJIT_ATTENTION_ARGS_SIZE_1, the layout that ends with
     * workspace_bytes, so zeroed structs keep working when later fields are appended. A size past the
     * library's own (at most 4096) is accepted when the bytes the library does not know are all zero;
     * those bytes are read, so struct_size must not exceed the caller's struct. Every field
     * below is off when 0. (Binaries built against the 0.1 header, which had no struct_size, must be
     * rebuilt; their source compiles unchanged.) */
    size_t struct_size;
    /* Per-sequence KV lengths (the cache fill of each sequence, vLLM's seq_lens / FlashAttention's
     * cache_seqlens): a device pointer to int32 [batch], 4-byte aligned, or 0 (every sequence has
     * seqlen_k keys). Sequence b attends to keys [0, seqlens_k[b]) of K/V; seqlen_k is the capacity
     * (the extent of the K/V tensors' sequence dim). Values are clamped to [0, seqlen_k] in the kernel.
     * Causal is bottom-right aligned per sequence: query i of sequence b sees keys
     * j <= i + seqlens_k[b] - seqlen_q. Rows that see no key give O = 0, LSE = -inf. */
    uint64_t seqlens_k;
    /* Split-KV: each row block's KV range is cut into num_splits parts computed by different CTAs into
     * fp32 partial O and LSE in a workspace, then a combine kernel reduces them (LSE-weighted) into O
     * and LSE. 0 = the library's choice: the split count `fagen tune --grid decode` measured for the
     * call's decode class on this GPU when there is one, else the heuristic (splits only when
     * seqlen_q <= 128 and the grid of batch x heads_q x row blocks leaves SMs idle); 1 = never split; 2..FAJIT_MAX_SPLITS = exactly
     * that many (splits beyond the KV tiles are empty and cost a CTA each). batch x num_splits must
     * be <= 65535 (the grid's z dimension). */
    int num_splits;
    int reserved0;          /* must be 0 */
    /* Device memory for the split partials (256-byte aligned) and its size in bytes, or 0 / 0 for the
     * context's own buffer (allocated with cuMemAlloc on first need, grown as needed, freed with the
     * context; shared by every forward of the context, so forwards that split on different streams at
     * once need workspaces of their own, and a forward that grows it must not be captured in a CUDA
     * graph). fajit_attention_workspace_size() gives the size a call needs (0 when it does not split; 256
     * for a varlen call with the longest-first schedule, the default (FAJIT_VARLEN_SCHED=static turns it off), whose tile counter it holds).
     * The longest-first schedule's tile counter (varlen calls, and causal calls whose config has sched = 1) is
     * this workspace when one is given, else a counter the context keeps for the call's stream: forwards on
     * different streams never share one (the first lpt call on a stream allocates the context's counters if no
     * stream has yet: not inside a CUDA graph capture; past 4096 streams a call needs its own workspace). */
    uint64_t workspace;
    size_t workspace_bytes;
    /* ---- read only when struct_size covers them (fajit_attention_args_init) ----
     * Paged KV (vLLM's / FlashAttention's block tables): K and V are pools of pages of page_size rows and
     * sequence b's logical page p is pool page block_table[b * max_pages + p]. k / v point at the pools; the
     * strides become k_stride[0] = elements from one page to the next, [1] = from one KV head to the next,
     * [2] = from one row of a page to the next (a [pages, page_size, Hkv, D] pool: page_size x Hkv x D, D,
     * Hkv x D). seqlen_k (the capacity) must be <= max_pages x page_size; with seqlens_k, sequence b reads
     * its first seqlens_k[b] rows only. Runs on the sm_80 path's kernels (pages smaller than the key tile
     * gathered from 16-row segments) or on the sm_90a kernel's (TMA boxes per page, a tile that divides the
     * page or that the page divides), as fajit_last_forward describes; pages under 64 rows run the sm_80
     * kernel unless FAJIT_DECODE_SM90=1. Speed: pages of 16, 64 and 256 rows read within 5% of a contiguous
     * cache on the H200 (README, "Decode"); 64+ rows leave the most margin. Only the entries of pages holding
     * rows below a sequence's length are read. 0 = not paged. */
    uint64_t block_table;   /* device pointer to int32 [batch][max_pages] (4-byte aligned), or 0 */
    int max_pages;          /* entries per row of block_table, >= 1 */
    int page_size;          /* keys per page: a multiple of 16 */
    /* ---- read only when struct_size >= FAJIT_ATTENTION_ARGS_SIZE_3 (fajit_attention_args_init) ----
     * Varlen (FlashAttention's varlen API): batch sequences packed along one token dim, no padding.
     * cu_seqlens_q / cu_seqlens_k: device pointers to int32 [batch + 1] (4-byte aligned), non-decreasing, from 0;
     * sequence b's queries are rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o, its keys rows
     * [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v. q / o are then [total_q, Hq, D] and k / v [total_k, Hkv, D]
     * (stride[0] is not read, stride[1] = head, stride[2] = token), lse is [Hq, total_q] (total_q =
     * cu_seqlens_q[batch], read by the kernel). seqlen_q / seqlen_k are then the longest sequence's lengths
     * (max_seqlen_q / max_seqlen_k of FlashAttention, >= 1), used to size the grid; lengths are never read on the
     * host. Causal masking is bottom-right aligned per sequence (query i of b sees keys j <= i + Nk_b - Nq_b); a
     * sequence of 0 queries writes nothing, one of 0 keys gives its rows O = 0, LSE = -inf. Rows of o and lse that
     * belong to no sequence are never written. seqlens_k (above) is FlashAttention's seqused_k: with it, sequence b
     * uses the first seqlens_k[b] keys of its range. cu_seqlens_q alone (cu_seqlens_k 0): packed queries against a
     * batched K / V ([B, Hkv, Nk, D] by the strides, seqlens_k for the lengths). With a block table, cu_seqlens_k
     * must be 0 and sequence b's keys are its pages (seqlens_k[b] of them, bottom-right causal against its
     * queries): a serving engine's chunked prefill. Not with num_splits >= 2 (FAJIT_ERR_UNSUPPORTED). 0 = not varlen.
     * Not checked (that would need a host sync): monotone entries, the last one = the packed row count, lengths <=
     * seqlen_q / seqlen_k. The kernels clamp each sequence's length to [0, seqlen_q] / [0, seqlen_k] (a decreasing
     * pair is an empty sequence) and a negative start to 0, and touch at most that many rows from the sequence's
     * start; entries past the tensors' rows read or write out of bounds, as block-table entries do. */
    uint64_t cu_seqlens_q;
    uint64_t cu_seqlens_k;
    /* Attention variants. Every field is off when 0. See "Attention variants" above fajit_attention_forward
     * for the exact definitions (FlashAttention-3's). */
    int window;             /* 1 = sliding window of window_left / window_right keys (-1 = unbounded side) */
    int window_left, window_right;
    float softcap;          /* > 0: s = softcap * tanh(s / softcap) on the scaled scores, before masking */
    uint64_t sinks;         /* device pointer to float32 [heads_q] (4-byte aligned): one learnable sink logit a head */
    uint64_t alibi_slopes;  /* device pointer to float32 [heads_q] or [batch][heads_q] */
    int64_t alibi_slopes_batch_stride; /* elements between batches' slopes: 0 = one [heads_q] row for every batch */
    int attention_chunk;    /* > 0: query i sees only keys in its own chunk of attention_chunk keys (Llama 4) */
    int reserved1;          /* must be 0 */
    /* ---- read only when struct_size >= FAJIT_ATTENTION_ARGS_SIZE_4 (fajit_attention_args_init) ----
     * FP8 (float8 e4m3, FAJIT_DTYPE_E4M3; FlashAttention-3's FP8 forward). dtype = E4M3: Q, K and V are e4m3 (one
     * byte an element, rows 16-byte aligned: strides multiples of 16 elements), O is out_dtype; sm_90a path only,
     * head_dim 64, 128 or 256. kv_dtype = E4M3 with dtype BF16 / F16: an FP8 K/V cache read by BF16 / F16 queries.
     * The descales are device pointers to float32 [batch][heads_kv] (4-byte aligned; 0 = every factor 1.0):
     * q_descale[b * descale_batch_stride + h / g] for query head h (g = heads_q / heads_kv), k_descale and
     * v_descale at [b * descale_batch_stride + kv head]. The scores become softmax_scale * q_descale * k_descale *
     * (q . k) and O is multiplied by v_descale: FlashAttention-3's q_descale / k_descale / v_descale.
     * dtype = E4M3 takes the attention variants but alibi_slopes (softcap caps the true, descaled score), varlen
     * batches (cu_seqlens_q with cu_seqlens_k; b is then the sequence; not with seqlens_k or a block table) and the
     * decode features of batched K/V: seqlens_k, split-KV, GQA packing and paged K/V (FlashAttention-3's FP8 kvcache
     * inputs), on the sm_90a FP8 kernel (a one-consumer tile, block_m 64, for up to 64 rows a KV head; head_dim 256
     * takes seqlens_k / a block table on that tile only). What it does not take: FAJIT_ERR_UNSUPPORTED naming it. */
    fajit_dtype kv_dtype;   /* 0 = dtype; FAJIT_DTYPE_E4M3 with dtype F16 / BF16: FP8 K/V cache */
    fajit_dtype out_dtype;  /* dtype of O with dtype E4M3: 0 = BF16, FAJIT_DTYPE_BF16 or FAJIT_DTYPE_F16; else 0 or dtype */
    uint64_t q_descale, k_descale, v_descale;
    int64_t descale_batch_stride; /* elements between batches' rows of the descales: 0 = one [heads_kv] row for
                                     every batch; a contiguous [batch][heads_kv] tensor has heads_kv */
} fajit_attention_args;

/*
 * Attention variants (fields of the SIZE_3 block; FlashAttention-3's definitions, alibi FlashAttention-2's)
 * Let Nk_b be sequence b's keys (seqlens_k[b], else seqlen_k) and a = i + Nk_b - Nq the key on query row i's
 * diagonal (bottom-right alignment; a = i when Nq = Nk). Row i of sequence b sees key j when all of these hold:
 *    0 <= j < Nk_b
 *    causal:              j <= a
 *    window (window = 1): a - window_left <= j <= a + window_right   (a side of -1 is unbounded; causal sets
 *                         the right side to 0, so window (L, -1) + causal is window (L, 0))
 *    attention_chunk C:   floor(a / C) * C <= j < floor(a / C) * C + C   (floor rounds down: a row with a < 0
 *                         sees no key); combined with causal / window by intersection (Llama 4)
 * The scores, for the keys a row sees (s = softmax_scale * q . k):
 *    softcap c > 0:       s = c * tanh(s / c)        (Gemma 2; the scale is applied before the cap)
 *    alibi_slopes:        s = s - slope[b][h] * |a - j|   (after the cap; slope = alibi_slopes[b *
 *                         alibi_slopes_batch_stride + h], float32, FlashAttention-2's bias)
 * then O[i] = sum_j exp(s_j) V[j] / (sum_j exp(s_j) + exp(sink[h])), where sink[h] = sinks[h] (float32 per query
 * head, in the units of s) when sinks is set and -inf otherwise: the sink joins each row's denominator and adds
 * no value (gpt-oss). LSE = log(sum_j exp(s_j) + exp(sink[h])): with sinks the LSE includes the sink, so a row
 * that sees no key gets O = 0 and LSE = sink[h] (without sinks O = 0 and LSE = -inf, as before).
 * Keys in no row's range of a CTA's query block are neither loaded nor computed (time grows with the window,
 * not with Nk). softcap uses the GPU's tanh.approx (about 2^-11 relative error of tanh); the others are exact.
 * Rules (FAJIT_ERR_INVALID_ARGUMENT, naming the field): window 0 or 1; window_left / window_right >= -1 and 0
 * unless window = 1; softcap finite and >= 0; sinks 4-byte aligned; alibi_slopes 4-byte aligned;
 * alibi_slopes_batch_stride >= 0 and 0 without alibi_slopes; attention_chunk >= 0. Slope and sink values are not
 * read on the host.
 */

/* Splits at most (args->num_splits; the heuristic stays at 128 or fewer). */
#define FAJIT_MAX_SPLITS 1024
/* sizeof the args as of the first grown layout (through workspace_bytes): what struct_size 0 reads as. */
#define FAJIT_ATTENTION_ARGS_SIZE_1 (offsetof(fajit_attention_args, workspace_bytes) + sizeof(size_t))
/* ... and through page_size (paged KV): fajit_attention_args_init's struct_size in this version. */
#define FAJIT_ATTENTION_ARGS_SIZE_2 (offsetof(fajit_attention_args, page_size) + sizeof(int))
/* ... and through reserved1 (varlen and attention variants). */
#define FAJIT_ATTENTION_ARGS_SIZE_3 (offsetof(fajit_attention_args, reserved1) + sizeof(int))
/* ... and through descale_batch_stride (FP8). */
#define FAJIT_ATTENTION_ARGS_SIZE_4 (offsetof(fajit_attention_args, descale_batch_stride) + sizeof(int64_t))

/* Zero *args and set struct_size = sizeof(fajit_attention_args). Fill the fields after it. */
void fajit_attention_args_init(fajit_attention_args *args);

/* Fill strides for contiguous BHND ([B,H,N,D]) or BNHD ([B,N,H,D]) tensors from the shape fields. args NULL
 * is a no-op. The products are computed in 64 bits; when one overflows (only shapes the forward refuses
 * anyway, e.g. head_dim near INT_MAX), every stride is set to INT64_MIN, which fajit_attention_forward
 * refuses with a message saying so. */
void fajit_args_set_bhnd_strides(fajit_attention_args *args);
void fajit_args_set_bnhd_strides(fajit_attention_args *args);

/*
 * Run forward attention asynchronously on args->stream. cfg may be NULL (fajit_config_fill picks: the
 * tuned winner of the class, else the heuristic; the config is then fixed per shape class and cached
 * until a fajit_tune on this context). The context's device must own the pointers.
 */
fajit_status fajit_attention_forward(fajit_context *ctx, const fajit_attention_args *args, const fajit_config *cfg);

/*
 * Bytes of workspace fajit_attention_forward(ctx, args, cfg) needs for its split partials with these
 * args (the splits it would choose: args->num_splits, or the heuristic's on ctx's device), written to
 * *bytes_out; 0 when the call would not split. The same checks as the forward; no launch.
 */
fajit_status fajit_attention_workspace_size(fajit_context *ctx, const fajit_attention_args *args,
                                            const fajit_config *cfg, size_t *bytes_out);

/*
 * The kernel the calling thread's last successful fajit_attention_forward launched: its config's
 * canonical text ("sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal"), followed by
 * "; fell back from sm_90a: <why>" when the TMA path could not describe the tensors (a stride TMA does
 * not take, a driver without tensor maps) and the sm_80 path's kernel ran instead. "" before the first
 * forward. The pointer stays valid for the thread's life; the text changes with its next forward.
 * Decode variants name their features after the config ("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal
 * seqlens split paged (8 splits) + sm_80 bf16 d128 combine"). On an sm_90a device a decode call runs the
 * sm_90a kernel's variants (the text ends in " (sm_90a decode variant)") or the sm_80 kernel's, by a rule
 * from measurements (README "Decode on the sm_90a kernel"; FAJIT_DECODE_SM90=1 / 0 when the context is made
 * forces either), and then says why ("; fell back from sm_90a: the sm_80 decode kernel's grid fills the 132
 * SMs with its own rows, where it runs faster ...").
 */
const char *fajit_last_forward(void);

/*
 * Where the calling thread's last successful fajit_attention_forward got its kernel: FAJIT_SOURCE_MEMORY,
 * _PREBUILT, _DISK or _COMPILED, or FAJIT_SOURCE_FALLBACK when the config chosen for the call (a tuned winner, a
 * tile other than the built-in default) was not compiled yet: with FAJIT_JIT=async (the default) the call ran a
 * loaded or prebuilt kernel of the same problem (fajit_last_forward() then ends in "; while <config> compiles")
 * and the chosen one compiles on the context's worker thread, serving the calls after it is loaded. Where no
 * such kernel is at hand (attention variants), for decode calls (their split count and workspace follow the
 * tile), for calls with a config, and with FAJIT_JIT=sync, the call compiles first, as before. Inside a
 * CUDA-graph capture on args->stream nothing is compiled: a call runs a loaded, prebuilt or disk-cached kernel,
 * or fails with FAJIT_ERR_UNSUPPORTED naming the config. FAJIT_SOURCE_MEMORY before the first forward.
 */
fajit_cache_source fajit_last_forward_source(void);

/* ---------------------------------------------------------------------------------------------------
 * Autotuning
 *
 * fajit_tune times the kernel configs of one problem class on the context's GPU and keeps the
 * fastest as the class's winner, which fajit_config_fill (and so fajit_attention_forward without a
 * config) then prefers to its built-in table.
 *
 * A class is (dtype, head_dim, causal, sequence-length class) on one GPU: the sequence-length class
 * is the power of two at or above max(seqlen_q, seqlen_k), clamped to 128..16384 (so N 3000 is class
 * 4096 and N 65536 is class 16384). Batch and head counts are not part of it. A winner is filed with
 * the GPU's name, the driver's version (cuDriverGetVersion) and the code generator's version, and is
 * used only when all three match: a new driver or a new fajit does not reuse old measurements.
 *
 * Winners are kept in <cache_dir>/tuned-v1.txt (fajit_context_tune_file), a text file a person can
 * read or edit: one line per winner, "gpu | driver | codegen | class | config | TFLOP/s | note".
 * It is written atomically and merged with what is there; a line that does not parse, or whose
 * config breaks a rule, is ignored. With the disk cache off there is no file: winners then live in
 * the context that measured them only.
 * ------------------------------------------------------------------------------------------------- */

/* Called after each candidate, with index -1 for notes about the tune as a whole, and once more for each
 * finalist re-timed in the final round (its note then starts with "final:" and tflops is the final median).
 *   index   0-based candidate number, or -1 (then cfg is NULL)
 *   total   candidates to time in this tune
 *   cfg     the candidate (valid for the call only)
 *   tflops  its measured TFLOP/s, or a negative number when it was skipped
 *   note    never NULL: the skip reason (compile or launch error, wrong result), or the median time and
 *           registers of a timed candidate, or the text of a note (valid for the call only)
 * Runs on the thread that called fajit_tune; it must not call fajit_tune on the same context. */
typedef void (*fajit_tune_progress_fn)(void *user, int index, int total, const fajit_config *cfg, double tflops,
                                       const char *note);

typedef struct fajit_tune_options {
    int max_candidates;     /* configs timed at most, 1..1000 (0 = 16); the heuristic's config is always first */
    double time_budget_s;   /* no new candidate is started after this many seconds (0 = no limit); at least
                               one is always timed */
    int reps;               /* timed calls per candidate, the median is kept: >= 10 (0 = 10) */
    int warmup;             /* untimed calls first (0 = 3; -1 = none) */
    int persist;            /* 1 = merge the winner into the tune file, 0 = keep it in this context only */
    fajit_tune_progress_fn progress; /* may be NULL */
    void *progress_user;
} fajit_tune_options;

/* Defaults: 16 candidates, no time limit, 10 reps, 3 warm-up calls, persist, no progress callback. */
fajit_tune_options fajit_tune_options_default(void);

typedef struct fajit_tune_result {
    int found;            /* fajit_tune_lookup: 1 when there is a winner; fajit_tune: 1 on success */
    fajit_config best;    /* the winner (all fields set) */
    double tflops;        /* its TFLOP/s: 4 * B * Hq * Nq * Nk * D / t, half for causal with Nq == Nk */
    double median_ms;     /* fajit_tune: its median time per call */
    int seqlen_class;     /* the class it is filed under */
    /* fajit_tune only: */
    double heuristic_tflops; /* TFLOP/s of the untuned heuristic's config (the first candidate); 0 when it
                                was skipped or does not fit the device */
    int space;            /* configs in the search space */
    int pruned;           /* of them, rejected before compiling (plan rules, the device's shared memory) */
    int candidates;       /* configs that were to be timed (at most max_candidates) */
    int timed, skipped;   /* configs timed / skipped (failed to compile, launch, or gave a wrong result) */
    double seconds;       /* wall time of the whole tune */
    int saved;            /* 1 when the winner was merged into the tune file */
} fajit_tune_result;

/*
 * Tune one class on ctx's GPU, on the path fajit_config_fill picks for it (sm_90a on a compute-capability
 * 9.0 GPU, else sm_80). The sm_90a space: 1..3 consumer warpgroups (block_m 64/128/192), block_n 64..192 in
 * steps of 16 and 256, 1..3 stages, overlap and ping-pong on or off, the widest swizzle the row allows.
 * The sm_80 space: block_m 64..256 (one or two 16-row fragments per warp), block_n 32..128, 4 or 8 warps,
 * 1..4 stages, the largest swizzle a row allows and the next smaller one, and from head_dim 192 up warp
 * pairs (col_warps 2) as well. Configs
 * that break a plan rule (register or shared-memory budget, copy layout) or exceed the device's shared
 * memory are pruned; the rest are ordered by closeness to the heuristic's config (which goes first) and
 * the first max_candidates are compiled (as fajit_warm does: one thread per CPU, so they land
 * in the caches) and timed on the legacy default stream: random inputs,
 * `warmup` calls, then `reps` calls each between two CUDA events, rotating over at least two input
 * sets that together exceed 256 MB (well past L2). The fastest three within 10% of the best are then
 * timed again, interleaved over three rounds (clock drift over the tune hits them alike), and the best
 * median over the rounds wins. Each candidate's output is compared with the first timed one's (a
 * wrong result skips it); one whose kernel spills registers is skipped. A candidate that fails to
 * compile or launch is skipped, its reason passed to the progress callback; the tune goes on.
 *
 * shape (may be NULL) is what is timed; zero fields are filled as in the issue-3 workload: seqlen_q
 * and seqlen_k 4096 (or each other), batch 16384 / max(seqlen_q, seqlen_k) (at least 1), heads_q
 * 2048 / head_dim, heads_kv = heads_q. The winner is filed under that shape's sequence-length class.
 * dtype F16 or BF16 (AUTO = BF16), head_dim 64/96/128/192/256, or E4M3 (the FP8 kernels, sm_90a: head_dim 64/128/256,
 * block_n 64..256 in steps of 32; inputs are random e4m3 values, no descales), causal 0 or 1. opts may be NULL.
 *
 * On success, best_out and result_out (either may be NULL) receive the winner, which this context's
 * fajit_config_fill uses from now on (and, when persisted, every context on the same GPU, driver and
 * fajit version). The forward's per-class choices of this context are reset so they pick it up.
 * A failure to write the tune file is not a failure of the tune: result_out->saved is 0 and the
 * progress callback gets a note saying why.
 * Errors: FAJIT_ERR_INVALID_ARGUMENT (arguments, options), FAJIT_ERR_NO_DEVICE (a context without a
 * device), FAJIT_ERR_CUDA / FAJIT_ERR_OUT_OF_MEMORY (inputs could not be set up), or the status of
 * the first skipped candidate when none could be timed. Takes seconds: about (warmup + reps) calls of
 * each candidate plus its compile. Do not launch other work on the device meanwhile if the timings
 * are to mean anything. Safe to call from one thread per context at a time.
 */
fajit_status fajit_tune(fajit_context *ctx, const fajit_shape *shape, fajit_dtype dtype, int head_dim, int causal,
                        const fajit_tune_options *opts, fajit_config *best_out, fajit_tune_result *result_out);

/*
 * The winner fajit_config_fill would use for (dtype, head_dim, causal) and shape's class on ctx's GPU:
 * result_out->found = 1 and best, tflops, seqlen_class filled; found = 0 when there is none (no device,
 * no tune file or no line for the class, or shape NULL or without sequence lengths). Loads the tune
 * file on the context's first lookup. Thread-safe.
 */
fajit_status fajit_tune_lookup(fajit_context *ctx, const fajit_shape *shape, fajit_dtype dtype, int head_dim,
                               int causal, fajit_tune_result *result_out);

/* Path of the tune file of this context ("" when the disk cache is off). Static for the context's life. */
const char *fajit_context_tune_file(const fajit_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* FAJIT_H */
