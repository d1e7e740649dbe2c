/*
 * check.h - numerical check of fajit_attention_forward on a GPU against a reference, used by
 * `fagen check` and the gpu tests.
 *
 * One call: allocate device buffers for one problem, fill Q, K, V with fresh random values (a new
 * seed per call unless one is given; row padding, if any, holds NaN so a kernel that reads it is
 * caught), poison O and LSE with 0xFF bytes (NaN) plus a guard region after each, run the forward,
 * synchronize, run a reference (CPU float64 when the problem is small, else the GPU fp32 kernel of
 * reference.h with the comparison done in double on the host), and compare every element.
 *
 * Pass criteria (all must hold; the defaults are stated here and in check.c):
 *   rel L2    ||O - ref|| / ||ref|| over all of O          <= 1e-2 (bf16), 2e-3 (f16)
 *   row rel   the worst single row's ||O_i - ref_i|| / ||ref_i|| (absolute for rows whose reference
 *             is 0)                                         <= 4 x the rel L2 tolerance
 *             (a wrong row or tile is diluted in the global norm of a large problem; not here)
 *   LSE       max |LSE - ref| over rows where both are finite  <= 1e-3 (natural log)
 *   counts    0 NaN/Inf/unwritten elements of O or LSE, 0 rows where exactly one of LSE and ref is
 *             -inf, 0 writes outside O / LSE (row padding and guard bytes keep their poison)
 * The max abs error of O is reported, not judged.
 *
 * Errors of the run itself (a driver failure, a config the library rejects) are returned as a
 * fajit_status with the thread's message; a numerical failure is FAJIT_OK with res->pass = 0.
 * Nothing is printed.
 */
#ifndef FJ_CHECK_H
#define FJ_CHECK_H

#include <stdint.h>

#include "fajit.h"

typedef enum fj_check_layout {
    FJ_LAYOUT_BHND = 0, /* [B, H, N, D] */
    FJ_LAYOUT_BNHD = 1  /* [B, N, H, D] */
} fj_check_layout;

typedef enum fj_check_fill {
    FJ_FILL_NORMAL = 0,  /* N(0, 1) */
    FJ_FILL_UNIFORM = 1, /* U(-1, 1) */
    /* N(0, 1), but key j's row of K is scaled by 1 + 3 j / Nk, and by 8 more when j % 61 == 37: the
     * row maxima keep rising along the keys and jump by far more than 2^8 at the spikes, so every
     * path of the online softmax's rescale (every tile, lazy, skipped) is taken */
    FJ_FILL_GROWING = 2
} fj_check_fill;

typedef enum fj_check_ref {
    FJ_REF_AUTO = 0, /* CPU when B*Hq*Nq*Nk*D <= cpu_max_macs, else GPU */
    FJ_REF_CPU = 1,  /* float64 on the host */
    FJ_REF_GPU = 2   /* fp32 NVRTC kernel */
} fj_check_ref;

typedef struct fj_check_problem {
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    fajit_dtype dtype;
    int causal;
    fj_check_layout layout;
    int row_pad;          /* extra elements after each row of every tensor (multiple of 8; 0 = tight) */
    fj_check_fill fill;
    int no_lse;           /* 1: pass lse = 0 to the forward and check O only */
    uint64_t seed;        /* 0 = a fresh seed for this call (reported in the result) */
    /* decode (fajit_attention_args' grown fields) */
    int seqlens;          /* 1: per-sequence KV lengths (seqlens_k), sequence b's by b % 5: 1, a multiple of 64
                             (at least 64 when seqlen_k allows), seqlen_k, random in [1, seqlen_k], and for b % 5 = 4 by
                             b / 5 % 3: 0, past seqlen_k (seqlen_k + 1..1000), -7 (the kernel clamps to [0, seqlen_k]) */
    int num_splits;       /* args->num_splits: 0 heuristic, 1 none, 2.. forced */
    int own_workspace;    /* 1: pass a workspace of fajit_attention_workspace_size bytes (else the context's) */
    int page_size;        /* > 0: paged K/V - the forward reads K and V from pools of pages of this many rows
                             ([pages, page_size, Hkv, D], pages shuffled, two spare pages, unused rows NaN) through
                             a block table; the references read the same values laid out as usual */
    int nan_past_len;     /* 1 (with seqlens): K and V rows past each sequence's length are NaN, as an unfilled
                             cache may hold; paged, the table entries of pages wholly past it also name a spare (NaN)
                             page; no output may depend on them (the references skip them) */
    int kv8;              /* FP8 K/V cache (args->kv_dtype e4m3): 1 = K and V quantized to e4m3 (round to nearest even,
                             saturating), descales 0; 2 = K / d and V / d' quantized with d, d' random powers of two
                             2^-2..2^2 per (batch, KV head), passed as k_descale / v_descale ([batch][heads_kv]). The
                             references read the dequantized values (exact in bf16 / f16), so the tolerances stay the
                             dtype's; the forward reads the e4m3 bytes (rows padded as the 16-bit ones: row_pad 0 or a
                             multiple of 16) */
    /* attention variants (fajit.h "Attention variants"): copied into the args; the CPU reference is used */
    int window, window_left, window_right;
    float softcap;
    int attention_chunk;
    int sinks;            /* 1: a random sink logit per query head, U(-2, 4), uploaded as args->sinks */
    int alibi;            /* 1: slopes 2^(-8 (h + 1) / Hq) per head ([Hq]); 2: those times (b + 1) / B per batch
                             ([B][Hq], alibi_slopes_batch_stride = Hq) */
} fj_check_problem;

typedef struct fj_check_options {
    double tol_rel_l2;    /* 0 = 1e-2 for bf16, 2e-3 for f16 */
    double tol_row_rel;   /* 0 = 4 x tol_rel_l2 */
    double tol_lse;       /* 0 = 1e-3 */
    fj_check_ref reference;
    double cpu_max_macs;  /* 0 = 2^31: the FJ_REF_AUTO limit for the CPU reference */
} fj_check_options;

typedef struct fj_check_result {
    int pass;
    double rel_l2, worst_row_rel, max_abs, lse_max_abs;
    int64_t nan_count;          /* NaN / Inf / unwritten elements of O and LSE */
    int64_t lse_inf_mismatch;   /* rows where exactly one of LSE and its reference is -inf */
    int64_t oob_writes;         /* 16-bit words of padding / guard that changed */
    int64_t elements;           /* elements of O compared */
    int64_t worst_row;          /* index b*Hq*Nq + h*Nq + i of the worst row */
    double tol_rel_l2, tol_row_rel, tol_lse; /* the tolerances applied */
    fj_check_ref reference;     /* FJ_REF_CPU or FJ_REF_GPU: which one was used */
    uint64_t seed;              /* the seed used */
    char kernel[448];           /* fajit_last_forward() after the run: which kernel(s) ran */
    char why[160];              /* on failure, the first failed criterion in words; else "" */
} fj_check_result;

/* Default problem: B=1, H=1, N=128, D=128, bf16, non-causal, BHND, normal fill, fresh seed. */
fj_check_problem fj_check_problem_default(void);

/*
 * Run one check on ctx's device. cfg may be NULL (the forward's heuristic picks). opts may be NULL
 * (defaults above). res receives the measurements whenever the return is FAJIT_OK.
 */
fajit_status fj_check_run(fajit_context *ctx, const fajit_config *cfg, const fj_check_problem *prob,
                          const fj_check_options *opts, fj_check_result *res);

/* Compare O (16-bit, with args' strides) and LSE (fp32, may be NULL) against a reference given as
 * double (ref_o_d) or float (ref_o_f) arrays, exactly one non-NULL, likewise for the LSE reference.
 * Exposed for the unit tests; fj_check_run calls it. The tolerances come from res->tol_*; sets
 * every measurement and res->pass / res->why. The valid elements of o and lse are overwritten with
 * poison (0xFF bytes) as they are read, so that afterwards o_words / lse_words of poison can be
 * counted to find writes outside the tensor (res->oob_writes). */
typedef struct fj_check_view {
    const fajit_attention_args *args; /* shape, dtype, o_stride */
    uint16_t *o;          /* host copy of the O allocation (o_words 16-bit words) */
    int64_t o_words;
    float *lse;           /* host copy of the LSE allocation (lse_words floats), or NULL */
    int64_t lse_words;
    const double *ref_o_d;
    const float *ref_o_f;
    const double *ref_lse_d;
    const float *ref_lse_f;
} fj_check_view;
void fj_check_compare(const fj_check_view *view, fj_check_result *res);

/* Varlen batches (check_varlen.c): the problem's dtype, heads, head_dim, causal, fill, row_pad (the packed rows'
 * padding, NaN in Q/K/V), no_lse, seed, page_size (paged K/V, cu_seqlens_k then 0) and attention variants (window,
 * softcap, attention_chunk, sinks, alibi as fj_check_run takes them; alibi 2 gives sequence b slopes row b) with
 * these lengths. Q / O are packed [total_q, Hq, D + row_pad]; K / V packed likewise by cu_seqlens_k (packed_k), else
 * batched [B, Hkv, max len_k, D + row_pad] (or paged) with seqlens_k = len_k. O and LSE ([Hq, total_q]) are poisoned
 * with guards after them; every element of every sequence's rows is compared with the CPU float64 reference
 * (fj_reference_cpu_varlen_variants; opts->reference and cpu_max_macs pick the GPU one for large batches as
 * fj_check_run does, never with a variant: the GPU reference has none), and every other word - row padding, rows a
 * sequence does not own (q_cap), guards - must keep its poison (res->oob_writes). Same criteria as fj_check_run. */
typedef struct fj_check_varlen {
    int n;             /* sequences (the batch), >= 1 */
    const int *len_q;  /* n query counts, >= 0 */
    const int *len_k;  /* n key counts, >= 0, or NULL: len_q (self-attention) */
    int packed_k;      /* 1: K / V packed by cu_seqlens_k (page_size must be 0) */
    int seqused;       /* packed_k: seqlens_k (seqused_k) = a random count in [0, len_k] per sequence */
    int q_cap;         /* > 0: seqlen_q passed (a cap below the longest query count: its rows past it stay poison) */
} fj_check_varlen;
fajit_status fj_check_varlen_run(fajit_context *ctx, const fajit_config *cfg, const fj_check_problem *prob,
                                 const fj_check_varlen *vl, const fj_check_options *opts, fj_check_result *res);
/* check.c's pieces the varlen check uses: a fresh seed for 0, splitmix64, the random fill of rows (padding NaN),
 * the tolerances and the verdict (res->pass, res->why). */
uint64_t fj_check_seed(uint64_t seed);
uint64_t fj_check_rand(uint64_t *state);
void fj_check_fill_rows(uint16_t *x, int64_t rows, int dim, int ld, const fj_check_problem *p, uint64_t seed, int keys);
void fj_check_tolerances(const fj_check_problem *p, const fj_check_options *o, fj_check_result *r);
void fj_check_judge(fj_check_result *r);
/* The attention variants both checks share: 1 when the problem asks for any (the GPU references know none, so the
 * CPU one is used); the rules of sinks (0, 1) and alibi (0, 1, 2); and their random values for a batch of `batch`
 * sequences, drawn from seed: sinks ([Hq] U(-2, 4)) when p->sinks, slopes when p->alibi (1: [Hq] 2^(-8 (h + 1) / Hq);
 * 2: [batch][Hq], those times (b + 1) / batch, *alibi_stride = Hq; else *alibi_stride is left as it is). Arrays not
 * asked for are NULL; the caller frees both, also on failure. */
int fj_check_has_variants(const fj_check_problem *p);
fajit_status fj_check_variant_rules(const fj_check_problem *p);
fajit_status fj_check_variant_values(const fj_check_problem *p, int batch, uint64_t seed, float **sinks, float **alibi,
                                     int64_t *alibi_stride);

/* Tile configs for the check grids (fagen check, the GPU tests): an sm_80 one (Br, Bc, stages, swizzle, warps,
 * col_warps) and an sm_90a one (Br, Bc, stages, swizzle, overlap, ping-pong; warps follow from Br). dtype,
 * head_dim and causal are left 0 for the grid to set. */
#define FJ_CHECK_T80(br, bc, st, sw, w, cw)                                                                          \
    {.arch = FAJIT_ARCH_SM80, .block_m = br, .block_n = bc, .stages = st, .swizzle = sw, .warps = w,                \
     .col_warps = cw, .overlap = -1, .pingpong = -1}
#define FJ_CHECK_T90(br, bc, st, sw, ov, pp)                                                                         \
    {.arch = FAJIT_ARCH_SM90A, .block_m = br, .block_n = bc, .stages = st, .swizzle = sw,                           \
     .warps = 4 * ((br) / 64 + 1), .col_warps = 1, .overlap = ov, .pingpong = pp}

#endif
