/*
 * kernel_abi.h - the contract between generated forward kernels and the launcher.
 *
 * Every generated forward kernel is one .entry named FJ_FWD_KERNEL_NAME taking a single parameter,
 * FJ_FWD_PARAM_NAME, a byte array laid out exactly as struct fj_fwd_params (sm_80 path) or struct
 * fj_fwd_params_tma (warp-specialized paths: the same fields, then four TMA tensor maps: Q, K, V, O); the code
 * generator reads fields with ld.param at offsetof() of these structs, so they cannot drift apart.
 * The launcher passes a pointer to one filled struct as kernelParams[0]. The parameter is named as
 * NVVM names the first parameter of an extern "C" kernel, so the same body text also compiles inside
 * the CUDA C wrapper of the whole-program compile (runtime/compile.c).
 *
 * Launch geometry:
 *   sm_80 path:   grid = (ceil(seqlen_q / block_m), heads_q, batch); causal CTAs take query blocks in reverse
 *                 (the longest rows first)
 *   warp-specialized paths (persistent): grid = (min(n_tiles, SMs), 1, 1); each CTA loops over work tiles
 *                 (causal: n_tiles CTAs where that static schedule would not balance; runtime/forward.c)
 *   block = plan.threads   smem = plan.smem_bytes
 */
#ifndef FJ_KERNEL_ABI_H
#define FJ_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#define FJ_FWD_KERNEL_NAME "fajit_fwd"
#define FJ_FWD_PARAM_NAME "fajit_fwd_param_0"

typedef struct fj_fwd_params {
    uint64_t q, k, v, o; /* device pointers (16-byte aligned) */
    uint64_t lse;        /* fp32 [B, Hq, Nq] or 0 */
    int64_t q_stride[3]; /* element strides: batch, head, sequence (head-dim stride is 1) */
    int64_t k_stride[3];
    int64_t v_stride[3];
    int64_t o_stride[3];
    uint32_t seqlen_q, seqlen_k;
    uint32_t heads_q;
    uint32_t group;      /* heads_q / heads_kv */
    float scale_log2;    /* softmax_scale * log2(e): scores are exponentiated with ex2 */
    uint32_t reserved;   /* keeps the size a multiple of 8 */
    /* Derived on the host from the strides and the plan (fj_fwd_params_derive): the kernel reads them
     * from the constant bank where it uses them instead of keeping computed copies in registers. */
    int64_t q_row_bytes, k_row_bytes, v_row_bytes, o_row_bytes; /* 2 * sequence stride */
    int64_t k_tile_bytes, v_tile_bytes; /* block_n rows */
    int64_t q_pass_bytes, k_pass_bytes, v_pass_bytes; /* plan.copy_rows_per_pass rows */
} fj_fwd_params;

/*
 * Warp-specialized kernels (sm_90a): the same fields, then a CUtensorMap (cuTensorMapEncodeTiled, 128
 * bytes, 64-byte aligned) for each of Q, K, V and O. Each map is 4-D, innermost first: (head_dim, seqlen,
 * heads, batch) with the tensor's byte strides, a box of (swizzle bytes / 2, block_m, block_n or 64 rows,
 * 1, 1) and the plan's swizzle; rows past seqlen are zero-filled by loads and not written by stores. The kernel takes the
 * generic address of its parameter block (cvta.param) and passes base + offset to the TMA loads.
 */
#define FJ_TMAP_BYTES 128
typedef struct fj_fwd_params_tma {
    fj_fwd_params base;
    /* the persistent schedule: CTA c takes work tiles c, c + gridDim.x, ... of n_tiles = n_mblocks x
     * heads_q x batch (ws_frame.c says in which order) */
    uint32_t n_mblocks;  /* ceil(seqlen_q / block_m) */
    uint32_t n_tiles;
    uint32_t heads_batch; /* heads_q x batch */
    /* VARLEN + LPT (sched.c): query heads per L2 section of the dynamic longest-first order, and the device
     * address of its tile counter (one u32, zeroed before each launch in the launch's stream); else 0 */
    uint32_t sched_heads;
    uint64_t tile_count;   /* (the tensor maps follow at byte 256: the fields above fill it exactly) */
    _Alignas(64) uint8_t tmap_q[FJ_TMAP_BYTES];
    uint8_t tmap_k[FJ_TMAP_BYTES];
    uint8_t tmap_v[FJ_TMAP_BYTES];
    uint8_t tmap_o[FJ_TMAP_BYTES]; /* O, box of 64 rows (one consumer warpgroup's): the TMA store epilogue */
} fj_fwd_params_tma;
_Static_assert(offsetof(fj_fwd_params_tma, tile_count) + sizeof(uint64_t) <= 256 &&
                   offsetof(fj_fwd_params_tma, tmap_q) == 256,
               "fj_fwd_params and the schedule fields must fit before the tensor maps, which start at byte 256");

/*
 * Decode variants of the sm_80 kernel (per-sequence KV lengths, split-KV) and the combine kernel take
 * this block: the same fields, then the decode ones. Plain kernels keep struct fj_fwd_params, so their
 * PTX does not change.
 *   split kernel: grid (ceil(seqlen_q / block_m), heads_q, batch x splits), z = b x splits + s; split s
 *     writes rows of partial O (fp32, head_dim each, normalized by its own l) and partial LSE (fp32,
 *     natural log, -inf for a split that saw no key) at row ((z x heads_q + h) x seqlen_q + i) of
 *     part_o / part_lse
 *   combine kernel (FJ_COMBINE_KERNEL_NAME): FJ_COMBINE_WARPS warps per CTA, W = fj_combine_warps_per_row
 *     (splits) of them per output row (b, h, i) (warp w of a row takes splits w, w + W, ...), so
 *     fj_combine_rows_per_cta(splits) rows per CTA, rows in (b, h, i) order;
 *     LSE = log sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s, written to o / lse
 */
#define FJ_COMBINE_WARPS 16
#define FJ_COMBINE_SPLITS_PER_WARP 8 /* a row gets another doubling of warps past this many splits per warp */
static inline unsigned fj_combine_warps_per_row(unsigned splits)
{
    unsigned w = 1;
    while (w < FJ_COMBINE_WARPS && w * FJ_COMBINE_SPLITS_PER_WARP < splits) w *= 2;
    return w;
}
static inline unsigned fj_combine_rows_per_cta(unsigned splits)
{
    return FJ_COMBINE_WARPS / fj_combine_warps_per_row(splits);
}
#define FJ_COMBINE_KERNEL_NAME "fajit_combine"
typedef struct fj_fwd_params_decode {
    fj_fwd_params base;
    uint64_t seqlens_k;  /* int32 [batch] or 0 */
    uint64_t part_o;       /* split partial O, fp32 [batch][splits][heads_q][seqlen_q][head_dim] */
    uint64_t part_lse;     /* split partial LSE, fp32 [batch][splits][heads_q][seqlen_q] */
    uint32_t splits;     /* 1 = no split */
    uint32_t batch;
    uint32_t rows;       /* combine: batch x heads_q x seqlen_q */
    uint32_t page_shift;  /* paged K/V: log2(page_size) when it is a power of two (a shift finds the page), else
                             0 (a division) */
    uint64_t block_table; /* paged K/V: int32 [batch][max_pages] of pool pages, or 0 */
    uint32_t max_pages;
    uint32_t page_size;   /* a multiple of block_n (a K/V tile never straddles pages) */
    uint64_t cu_seqlens_q; /* VARLEN: int32 [batch + 1], the sequences' first query rows in packed Q / O, or 0 */
    uint64_t cu_seqlens_k; /* VARLEN_K: int32 [batch + 1], their first keys in packed K / V, or 0 */
} fj_fwd_params_decode;

/*
 * Decode variants of the warp-specialized (sm_90a) kernel: the
 * tensor-map block unchanged, then a whole fj_fwd_params_decode of which only the decode fields (past its
 * base, which stays unused) are read. Work tiles: n_tiles = n_mblocks x splits x heads_q x batch, the
 * query block fastest, then the split, then the head and the batch (ws_frame.c); the partials go to the
 * rows the sm_80 split kernel uses, z = b x splits + s, so the same combine kernel reduces them.
 */
typedef struct fj_fwd_params_tma_decode {
    fj_fwd_params_tma tma;
    fj_fwd_params_decode dec;
} fj_fwd_params_tma_decode;

/* Parameter offset of a decode field (its offsetof in fj_fwd_params_decode) in a kernel's block: the same for the
 * sm_80 variants, inside .dec when the block begins with the tensor-map block (tma_block: the warp-specialized
 * kernels, fj_fwd_params_tma_decode). */
static inline int fj_decode_param_off(int tma_block, int field_off)
{
    return tma_block ? (int)offsetof(fj_fwd_params_tma_decode, dec) + field_off : field_off;
}

/*
 * Attention variants (fajit_config.mods != 0): this block follows the kernel's own block (fj_fwd_params, the
 * tensor-map block or a decode block) at fj_plan.mods_off (its size rounded up to 8), so plain kernels keep
 * their parameters and PTX. A variant kernel's scores S are the natural (scaled) scores times score_unit; the
 * softmax exponentiates S x base.scale_log2 with scale_log2 = log2(e) / score_unit, where
 *   no softcap:  S = q . k (raw), score_unit = 1 / softmax_scale
 *   softcap c:   S = tanh(q . k x cap_scale), cap_scale = softmax_scale / c, score_unit = 1 / c
 * so the ALiBi bias enters S as -slope x score_unit x |a - j| and the sink as sinks[h] x log2(e) (mask.c).
 */
typedef struct fj_fwd_params_mods {
    int32_t win_left;    /* WINDOW / CHUNK: keys j >= a - win_left (the host writes seqlen_k for an unbounded side) */
    int32_t win_right;   /* ... and j <= a + win_right (seqlen_q for unbounded; 0 causal) */
    uint32_t chunk;      /* CHUNK: attention_chunk (> 0) */
    float cap_scale;     /* SOFTCAP: softmax_scale / softcap */
    float score_unit;    /* ALIBI: the slopes are multiplied by it (see above) */
    uint32_t reserved;
    uint64_t sinks;      /* SINKS: float32 [heads_q] */
    uint64_t alibi;      /* ALIBI: float32 slopes, slope of (b, h) at alibi + 4 x (b x alibi_stride + h) */
    int64_t alibi_stride; /* elements between batches' slopes (0: one row for all) */
} fj_fwd_params_mods;

/*
 * FP8 kernels (fajit_config.dtype e4m3, fj_plan.fp8): this block follows the kernel's own (and the variants') at
 * fj_plan.fp8_off. The descales are float32 [batch][heads_kv] (0 = 1.0), the factor of (b, kv head) at
 * + 4 x (b x descale_stride + kv head); the scores are exponentiated with base.scale_log2 x q_descale x k_descale
 * and O is multiplied by v_descale (FlashAttention-3's).
 */
typedef struct fj_fwd_params_fp8 {
    uint64_t q_descale, k_descale, v_descale;
    int64_t descale_stride;
} fj_fwd_params_fp8;

/* Fill the derived fields from the strides and the plan's block_n / copy_rows_per_pass. */
static inline void fj_fwd_params_derive(fj_fwd_params *p, int block_n, int copy_rows_per_pass)
{
    p->q_row_bytes = 2 * p->q_stride[2];
    p->k_row_bytes = 2 * p->k_stride[2];
    p->v_row_bytes = 2 * p->v_stride[2];
    p->o_row_bytes = 2 * p->o_stride[2];
    p->k_tile_bytes = block_n * p->k_row_bytes;
    p->v_tile_bytes = block_n * p->v_row_bytes;
    p->q_pass_bytes = copy_rows_per_pass * p->q_row_bytes;
    p->k_pass_bytes = copy_rows_per_pass * p->k_row_bytes;
    p->v_pass_bytes = copy_rows_per_pass * p->v_row_bytes;
}

#endif
