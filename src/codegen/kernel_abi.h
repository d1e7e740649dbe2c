/*
 * kernel_abi.h - the contract between generated forward kernels and the launcher.
 *
 * Every generated forward kernel is one .entry named FJ_FWD_KERNEL_NAME taking a single parameter, a
 * byte array laid out exactly as struct fj_fwd_params (the code generator reads fields with
 * ld.param at offsetof() of this struct, so the two cannot drift apart). The launcher passes a
 * pointer to one filled struct as kernelParams[0].
 *
 * Launch geometry (all arch paths):
 *   grid  = (ceil(seqlen_q / block_m), heads_q, batch)   block = plan.threads   smem = plan.smem_bytes
 * Causal kernels visit query blocks in reverse (the longest rows first).
 */
#ifndef FJ_KERNEL_ABI_H
#define FJ_KERNEL_ABI_H

#include <stdint.h>

#define FJ_FWD_KERNEL_NAME "fajit_fwd"

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
