/*
 * epilogue.c - the epilogue both kernel skeletons share (fwd_kernel.c on sm_80, the warp-specialized consumers on
 * sm_90a): O and LSE pointers recomputed from the CTA's (or the work tile's) indices and the parameters - the
 * tensor's rows, a varlen sequence's packed rows, or split-KV's fp32 partial rows -, l reduced and O scaled by 1/l
 * (softmax.c), then the store (the backend's store_o, or the partial rows' fj_emit_store_o_partial).
 */
#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"
#include "seqlen.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) FJ_DEC_OFF(k, field)

/* q_rows = rows of the tile that exist: Nq - m0, or with GQA packing group x Nq - m0. */
static void emit_out_rows(fj_kctx *k, fj_reg_t nq)
{
    if (k->p->variant & FJ_VARIANT_PACK) {
        {
            fj_reg_t prm = fj_param_s32(k, OFF(group));
            fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(k->q_rows), R(nq), R(prm));
        }
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(k->q_rows), R(k->q_rows), R(k->m0));
    } else {
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(k->q_rows), R(nq), R(k->m0));
    }
}

/* Split-KV: this CTA's rows of the partials, row index (%ctaid.z x Hq + h) x Nq + m0 (kernel_abi.h):
 * o_ptr = part_o + 4 x head_dim x index, lse_ptr = part_lse + 4 x index. */
static void emit_partial_ptrs(fj_kctx *k)
{
    fj_emit *e = k->e;
    fj_reg_t z = fj_alloc(e, k->b_r, 1), h = fj_alloc(e, k->b_r, 1), idx = fj_alloc(e, k->b_r, 1);
    fj_reg_t w = fj_alloc(e, k->b_rd, 1), nq = fj_param_s32(k, OFF(seqlen_q));
    /* (the text keeps the fields' old names, ws_o / ws_lse: the PTX stays as it was until the next codegen version) */
    fj_comment(e, 1, "split-KV partials: row (z x Hq + h) x Nq + m0 of ws_o (fp32 rows of head_dim) and ws_lse, z = b x "
                     "splits + split");
    if (k->p->ws) { /* the persistent CTA's work tile: its batch, split and head (ws_frame.c: fj_ws_decode_tile) */
        fj_reg_t prm = fj_param_s32(k, DOFF(splits));
        fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(z), R(k->b), R(prm), R(k->split));
        fj_ins(e, "mov.u32 %s, %s", R(h), R(k->h));
    } else {
        fj_ins(e, "mov.u32 %s, %%ctaid.z", R(z));
        fj_emit_out_head(k, h);
    }
    {
        fj_reg_t prm = fj_param_s32(k, OFF(heads_q));
        fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(z), R(prm), R(h));
    }
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(idx), R(nq), R(k->m0));
    emit_out_rows(k, nq);
    fj_ins(e, "mul.wide.u32 %s, %s, %d", R(w), R(idx), 4 * k->p->cfg.head_dim);
    fj_ins(e, PTX_LD_PARAM_U64, R(k->o_ptr), DOFF(part_o));
    fj_ins(e, "add.u64 %s, %s, %s", R(k->o_ptr), R(k->o_ptr), R(w));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(w), R(idx));
    fj_ins(e, PTX_LD_PARAM_U64, R(k->lse_ptr), DOFF(part_lse));
    fj_ins(e, "add.u64 %s, %s, %s", R(k->lse_ptr), R(k->lse_ptr), R(w));
}

/* VARLEN: O at packed row start + m0 of head h (stride[0] not read), LSE at h x total_q + start + m0. */
static void emit_out_ptrs_varlen(fj_kctx *k, fj_reg_t b, fj_reg_t h)
{
    fj_emit *e = k->e;
    fj_reg_t row0 = fj_alloc(e, k->b_r, 1), lrow = fj_alloc(e, k->b_r, 1), zero = fj_alloc(e, k->b_r, 1);
    fj_reg_t w = fj_alloc(e, k->b_rd, 1), has = fj_alloc(e, k->b_p, 1);
    fj_seqlen_out_rows(k, b, h, row0, lrow);
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    fj_emit_tensor_ptr(k, OFF(o), OFF(o_stride), zero, h, row0, k->o_ptr);
    fj_ins(e, PTX_LD_PARAM_U64, R(k->lse_ptr), OFF(lse));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(w), R(lrow));
    fj_ins(e, "setp.ne.u64 %s, %s, 0", R(has), R(k->lse_ptr));
    fj_ins(e, "@%s add.u64 %s, %s, %s", R(has), R(k->lse_ptr), R(k->lse_ptr), R(w));
}

/* O and LSE pointers, computed in the epilogue from %ctaid and the parameters: kept live across
 * the KV loop instead, ptxas spills them. */
static void emit_out_ptrs(fj_kctx *k)
{
    fj_emit *e = k->e;
    if (k->p->variant & FJ_VARIANT_SPLIT) {
        emit_partial_ptrs(k);
        return;
    }
    fj_reg_t h = k->h, b = k->b; /* a persistent (warp-specialized) CTA: its current work tile's */
    fj_reg_t row0 = k->m0;
    if (!k->p->ws) {
        h = fj_alloc(e, k->b_r, 1), b = fj_alloc(e, k->b_r, 1);
        fj_emit_out_head(k, h);
        fj_ins(e, "mov.u32 %s, %%ctaid.z", R(b));
    }
    if (k->p->variant & FJ_VARIANT_VARLEN) {
        emit_out_ptrs_varlen(k, b, h);
        return;
    }
    if (k->p->variant & FJ_VARIANT_PACK) { /* rows are addressed one by one (fj_emit_packed_row_offset) */
        row0 = fj_alloc(e, k->b_r, 1);
        fj_ins(e, "mov.u32 %s, 0", R(row0));
    }
    fj_emit_tensor_ptr(k, OFF(o), OFF(o_stride), b, h, row0, k->o_ptr);
    fj_comment(e, 1, "LSE row pointer: lse + 4 * ((b * Hq + h) * Nq + m0), or 0");
    fj_reg_t hq = fj_alloc(e, k->b_r, 1), idx = fj_alloc(e, k->b_r, 1), w = fj_alloc(e, k->b_rd, 1);
    fj_reg_t has = fj_alloc(e, k->b_p, 1);
    fj_ins(e, PTX_LD_PARAM_U64, R(k->lse_ptr), OFF(lse));
    fj_ins(e, PTX_LD_PARAM_U32, R(hq), OFF(heads_q));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(b), R(hq), R(h));
    fj_reg_t nq = fj_param_s32(k, OFF(seqlen_q));
    emit_out_rows(k, nq);
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(idx), R(nq), R(k->m0));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(w), R(idx));
    fj_ins(e, "setp.ne.u64 %s, %s, 0", R(has), R(k->lse_ptr));
    fj_ins(e, "@%s add.u64 %s, %s, %s", R(has), R(k->lse_ptr), R(k->lse_ptr), R(w));
}

void fj_emit_epilogue(fj_kctx *k)
{
    emit_out_ptrs(k);
    fj_emit_normalize(k);
    if (k->p->variant & FJ_VARIANT_SPLIT) fj_emit_store_o_partial(k);
    else k->p->backend->store_o(k);
}
