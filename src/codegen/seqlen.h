/*
 * seqlen.h - the bounds of a CTA's (sm_80) or work tile's (sm_90a) sequence, for both skeletons: its query and key
 * lengths and, with varlen batches (FJ_VARIANT_VARLEN / VARLEN_K), where its rows start in the packed tensors.
 *
 * A varlen sequence b owns rows [start, start + len) of the packed tensor with start = cu_seqlens[b] and
 * len = clamp(cu_seqlens[b + 1] - start, 0, cap), cap = seqlen_q / seqlen_k of the parameters (the longest
 * sequence's length, what the grid is sized for). The clamp is what the kernel does with arrays that break the
 * rules no host code can check without a sync (non-decreasing, last entry = total): a sequence never reads or
 * writes more than cap rows from its start, and a decreasing pair gives an empty sequence.
 *
 * On sm_90a the packed tensors are read and written through TMA maps that clip at each sequence's end
 * (runtime/tensor_map.c): (D, cap, H, 2^31 - 1) with the token stride on both the second and the fourth dimension
 * and the base moved back by cap rows, so sequence row r is element (r + cap - len, start + len): in bounds exactly
 * while r < len. fj_seqlen_tma_coords gives that pair.
 */
#ifndef FJ_SEQLEN_H
#define FJ_SEQLEN_H

#include "backend.h"

/* start / len of sequence b's queries (VARLEN): cu_seqlens_q, the length capped at seqlen_q. */
void fj_seqlen_q_bounds(fj_kctx *k, fj_reg_t b, fj_reg_t start, fj_reg_t len);

/* start (VARLEN_K; else not written) / len of sequence b's keys: cu_seqlens_k capped at seqlen_k with VARLEN_K, else
 * seqlen_k; then with SEQLENS at most seqlens_k[b] (FlashAttention's seqused_k). */
void fj_seqlen_k_bounds(fj_kctx *k, fj_reg_t b, fj_reg_t start, fj_reg_t len);

/* The sequence's query length where it is used (the causal diagonal, the rows that exist): seqlen_q from the
 * parameters; VARLEN: sm_90a the work tile's (k->seqlen_q, kept), sm_80 read again for %ctaid.z. */
fj_reg_t fj_seqlen_q_len(fj_kctx *k);

/* sm_80 prologue (VARLEN): k->seqlen_q / k->seqlen_k = this CTA's sequence's lengths, q_start / k_start (k_start
 * with VARLEN_K only) its first rows; a CTA whose first row m0 is past its sequence's end returns here (it has no
 * row to compute or store: every thread leaves before any barrier). */
void fj_seqlen_cta(fj_kctx *k, fj_reg_t b, fj_reg_t q_start, fj_reg_t k_start);

/* sm_90a work tile (VARLEN): k->seqlen_q / k->seqlen_k of sequence b; with coords (the producer), the TMA
 * coordinates of its queries (k->q_tma_row = m0's row coordinate, k->q_tma_seq) and keys (VARLEN_K:
 * k->kv_tma_delta added to a key row, k->kv_tma_seq). */
void fj_seqlen_tile(fj_kctx *k, fj_reg_t b, int coords);

/* A CTA / work tile whose rows all lie past its sequence's end visits no KV tile: n_end = 0 when m0 >= len. */
void fj_seqlen_no_rows(fj_kctx *k, fj_reg_t n_end);

/* VARLEN epilogue of batch b, head h: row0 = the packed row of m0 (start + m0), lse_row = the LSE element of m0
 * (h x total_q + start + m0, total_q = cu_seqlens_q[batch]), k->q_rows = len - m0. */
void fj_seqlen_out_rows(fj_kctx *k, fj_reg_t b, fj_reg_t h, fj_reg_t row0, fj_reg_t lse_row);

/* sm_90a VARLEN O store of batch k->b: row (m0-relative, in place) -> its row coordinate, seq = its sequence
 * coordinate (see the file comment). */
void fj_seqlen_tma_store_coords(fj_kctx *k, fj_reg_t row, fj_reg_t seq);

#endif
