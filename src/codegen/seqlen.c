/*
 * seqlen.c - sequence bounds for varlen (packed) batches, written once for the sm_80 and sm_90a skeletons
 * (see seqlen.h for the contract and the TMA coordinates of the packed tensors).
 *
 * Every bound is read from global memory where a phase needs it (ld.global.nc of cu_seqlens_q / _k: two words
 * per sequence, L1 hits after the first CTA of the sequence) rather than kept live across the KV loop, as the
 * per-sequence KV length of the SEQLENS variant is (fj_emit_kv_len, at the end); sm_90a consumers keep the work
 * tile's two lengths.
 */
#include "seqlen.h"

#include "ptx_templates/common.h"
#include "sched.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) FJ_DEC_OFF(k, field)

/* start = max(cu[b], 0), len = min(max(cu[b + 1] - cu[b], 0), cap) for the int32 array at decode field cu_off. */
static void cu_bounds(fj_kctx *k, int cu_off, int cap_off, fj_reg_t b, fj_reg_t start, fj_reg_t len)
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), w = fj_alloc(k->e, k->b_rd, 1), end = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, PTX_LD_PARAM_U64, R(a), cu_off);
    fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(w), R(b));
    fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(w));
    fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(start), R(a));
    fj_ins(k->e, "ld.global.nc.u32 %s, [%s+4]", R(end), R(a));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(len), R(end), R(start));
    fj_ins(k->e, "max.s32 %s, %s, 0", R(len), R(len));
    {
        fj_reg_t cap = fj_param_s32(k, cap_off);
        fj_ins(k->e, "min.s32 %s, %s, %s", R(len), R(len), R(cap));
    }
    fj_ins(k->e, "max.s32 %s, %s, 0", R(start), R(start));
}

void fj_seqlen_q_bounds(fj_kctx *k, fj_reg_t b, fj_reg_t start, fj_reg_t len)
{
    fj_comment(k->e, 1, "varlen queries: rows [cu_seqlens_q[b], +len) of packed Q / O, len = cu_seqlens_q[b + 1] - "
                        "cu_seqlens_q[b] clamped to [0, seqlen_q]");
    cu_bounds(k, DOFF(cu_seqlens_q), OFF(seqlen_q), b, start, len);
}

void fj_seqlen_k_bounds(fj_kctx *k, fj_reg_t b, fj_reg_t start, fj_reg_t len)
{
    if (k->p->variant & FJ_VARIANT_VARLEN_K) {
        fj_comment(k->e, 1, "varlen keys: rows [cu_seqlens_k[b], +len) of packed K / V, len clamped to [0, seqlen_k]");
        cu_bounds(k, DOFF(cu_seqlens_k), OFF(seqlen_k), b, start, len);
    } else {
        fj_ins(k->e, PTX_LD_PARAM_U32, R(len), OFF(seqlen_k));
    }
    if (k->p->variant & FJ_VARIANT_SEQLENS) {
        fj_comment(k->e, 1, "seqused_k: at most seqlens_k[b] of them");
        fj_emit_seq_len(k, b, len, len);
    }
}

/* b = the CTA's batch on the sm_80 path (varlen kernels do not split: %ctaid.z). */
static fj_reg_t cta_batch(fj_kctx *k)
{
    fj_reg_t b = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mov.u32 %s, %%ctaid.z", R(b));
    return b;
}

fj_reg_t fj_seqlen_q_len(fj_kctx *k)
{
    if (!(k->p->variant & FJ_VARIANT_VARLEN)) return fj_param_s32(k, OFF(seqlen_q));
    if (k->p->ws) return k->seqlen_q; /* the work tile's, set per work tile (fj_seqlen_tile) */
    fj_reg_t start = fj_alloc(k->e, k->b_r, 1), len = fj_alloc(k->e, k->b_r, 1);
    fj_seqlen_q_bounds(k, cta_batch(k), start, len);
    return len;
}

void fj_seqlen_cta(fj_kctx *k, fj_reg_t b, fj_reg_t q_start, fj_reg_t k_start)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    fj_seqlen_q_bounds(k, b, q_start, k->seqlen_q);
    fj_seqlen_k_bounds(k, b, k_start, k->seqlen_k);
    fj_comment(k->e, 1, "a row block past its sequence's end (the grid is sized for the longest) has nothing to do");
    fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->m0), R(k->seqlen_q));
    fj_ins(k->e, "@%s ret", R(pr));
}

/* row_delta = cap - len, seq = start + len: sequence row r is TMA row r + row_delta of sequence coordinate seq. */
static void tma_coords(fj_kctx *k, int cap_off, fj_reg_t start, fj_reg_t len, fj_reg_t row_delta, fj_reg_t seq)
{
    fj_reg_t cap = fj_param_s32(k, cap_off);
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(row_delta), R(cap), R(len));
    fj_ins(k->e, "add.s32 %s, %s, %s", R(seq), R(start), R(len));
}

void fj_seqlen_tile(fj_kctx *k, fj_reg_t b, int coords)
{
    fj_reg_t qs = fj_alloc(k->e, k->b_r, 1), ks = fj_alloc(k->e, k->b_r, 1);
    fj_seqlen_q_bounds(k, b, qs, k->seqlen_q);
    fj_seqlen_k_bounds(k, b, ks, k->seqlen_k);
    if (!coords) return;
    fj_comment(k->e, 1, "TMA coordinates in the packed maps, which clip at the sequence's end: row r + cap - len of "
                        "sequence coordinate start + len");
    tma_coords(k, OFF(seqlen_q), qs, k->seqlen_q, k->q_tma_row, k->q_tma_seq);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(k->q_tma_row), R(k->q_tma_row), R(k->m0));
    if (k->p->variant & FJ_VARIANT_VARLEN_K) tma_coords(k, OFF(seqlen_k), ks, k->seqlen_k, k->kv_tma_delta, k->kv_tma_seq);
}

void fj_seqlen_no_rows(fj_kctx *k, fj_reg_t n_end)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    fj_comment(k->e, 1, "varlen: a row block past its sequence's end (the tiles cover the longest) visits no KV tile");
    fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->m0), R(k->seqlen_q));
    fj_ins(k->e, "@%s mov.s32 %s, 0", R(pr), R(n_end));
}

void fj_seqlen_out_rows(fj_kctx *k, fj_reg_t b, fj_reg_t h, fj_reg_t row0, fj_reg_t lse_row)
{
    fj_reg_t len = k->p->ws ? k->seqlen_q : fj_alloc(k->e, k->b_r, 1), a = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t w = fj_alloc(k->e, k->b_rd, 1), total = fj_alloc(k->e, k->b_r, 1);
    if (fj_sched_coords(k->p)) {
        fj_comment(k->e, 1, "varlen: the sequence's first row in packed O, start = (start + len) - len from the lpt slot");
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(row0), R(k->q_tma_seq), R(len));
        fj_ins(k->e, PTX_LD_PARAM_U64, R(a), DOFF(cu_seqlens_q));
    } else if (k->p->ws) {
        fj_comment(k->e, 1, "varlen: the sequence's first row in packed O (its length is the work tile's)");
        fj_ins(k->e, PTX_LD_PARAM_U64, R(a), DOFF(cu_seqlens_q));
        fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(w), R(b));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(w), R(a), R(w));
        fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(row0), R(w));
        fj_ins(k->e, "max.s32 %s, %s, 0", R(row0), R(row0));
    } else {
        fj_seqlen_q_bounds(k, b, row0, len);
        fj_ins(k->e, PTX_LD_PARAM_U64, R(a), DOFF(cu_seqlens_q));
    }
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(k->q_rows), R(len), R(k->m0));
    fj_ins(k->e, "add.s32 %s, %s, %s", R(row0), R(row0), R(k->m0));
    fj_comment(k->e, 1, "LSE is [Hq, total_q], total_q = cu_seqlens_q[batch]: element h x total_q + row");
    {
        fj_reg_t nb = fj_param_s32(k, DOFF(batch));
        fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(w), R(nb));
    }
    fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(w));
    fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(total), R(a));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %s, %s", R(lse_row), R(h), R(total), R(row0));
}

void fj_seqlen_tma_store_coords(fj_kctx *k, fj_reg_t row, fj_reg_t seq)
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), w = fj_alloc(k->e, k->b_rd, 1), t = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "varlen: O's row coordinate r + cap - len of sequence coordinate start + len (the map clips "
                        "the rows past the sequence's end)");
    if (fj_sched_coords(k->p)) {
        fj_ins(k->e, "mov.s32 %s, %s", R(seq), R(k->q_tma_seq)); /* start + len, from the lpt slot */
    } else {
        fj_ins(k->e, PTX_LD_PARAM_U64, R(a), DOFF(cu_seqlens_q));
        fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(w), R(k->b));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(w));
        fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(seq), R(a));
        fj_ins(k->e, "max.s32 %s, %s, 0", R(seq), R(seq));
        fj_ins(k->e, "add.s32 %s, %s, %s", R(seq), R(seq), R(k->seqlen_q));
    }
    {
        fj_reg_t cap = fj_param_s32(k, OFF(seqlen_q));
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(t), R(cap), R(k->seqlen_q));
    }
    fj_ins(k->e, "add.s32 %s, %s, %s", R(row), R(row), R(t));
}

/* With per-sequence lengths the length is read again where it is used (the copies' zero fill, the mask):
 * kept live across the loop, it makes the causal d128 128-row tiles spill (nvJitLink, sm_90). */
fj_reg_t fj_emit_kv_len(fj_kctx *k)
{
    if (!(k->p->variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_VARLEN_K))) return fj_param_s32(k, OFF(seqlen_k));
    if (k->p->ws) return k->seqlen_k; /* the work tile's sequence length, set per work tile (ws_frame.c) */
    fj_reg_t b = fj_alloc(k->e, k->b_r, 1), len = fj_alloc(k->e, k->b_r, 1);
    fj_emit_batch(k, b, 0);
    if (k->p->variant & FJ_VARIANT_VARLEN_K) {
        fj_reg_t start = fj_alloc(k->e, k->b_r, 1);
        fj_seqlen_k_bounds(k, b, start, len);
        return len;
    }
    fj_emit_seq_len(k, b, fj_param_s32(k, OFF(seqlen_k)), len);
    return len;
}
