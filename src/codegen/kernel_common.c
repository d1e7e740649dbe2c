/*
 * kernel_common.c - the setup pieces both kernel skeletons share (fwd_kernel.c, sm_80: every warp
 * alike; the warp-specialized frame ws_frame.c and its role bodies): register banks and accumulators, parameter
 * loads at their point of use, tensor pointers from element strides, the query block and the sequence lengths,
 * GQA-packed rows, and the warp-pair exchange the softmax reduces through. The lowest layer of the emitting code:
 * it calls nothing but the emitter (the sequence bounds are seqlen.c's, the epilogue epilogue.c's).
 */
#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "kernel_abi.h"
#include "mask.h"
#include "ptx_templates/common.h"
#include "seqlen.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) FJ_DEC_OFF(k, field)

void fj_emit_alloc_banks(fj_kctx *k)
{
    fj_emit *e = k->e;
    const fj_plan *p = k->p;
    k->b_p = fj_bank(e, "p", "pred");
    k->b_r = fj_bank(e, "r", "b32");
    k->b_rd = fj_bank(e, "rd", "b64");
    k->b_f = fj_bank(e, "f", "f32");
    k->b_addr = fj_bank(e, "sa", "b32");
    k->b_acc_o = fj_bank(e, "acc_o", "f32");
    k->b_acc_s = fj_bank(e, "acc_s", "f32");
    k->b_row_m = fj_bank(e, "row_m", "f32");
    k->b_row_l = fj_bank(e, "row_l", "f32");
    k->b_frag_q = fj_bank(e, "frag_q", "b32");
    k->b_frag_p = fj_bank(e, "frag_p", "b32");
    k->b_frag_b = fj_bank(e, "frag_kv", "b32");
    k->acc_o = fj_alloc(e, k->b_acc_o, p->m_frags * p->n_frags_o * 4);
    k->acc_s = fj_alloc(e, k->b_acc_s, fj_plan_acc_s_count(p));
    k->acc_s_set[0] = k->acc_s;
    k->acc_s_set[1] = p->pipeline_qk ? fj_alloc(e, k->b_acc_s, fj_plan_acc_s_count(p)) : k->acc_s;
    k->row_m = fj_alloc(e, k->b_row_m, k->frag.rows);
    k->row_l = fj_alloc(e, k->b_row_l, k->frag.rows);
    if (fj_weight_lag(p)) k->row_l_lag = fj_alloc(e, k->b_row_l, k->frag.rows);
    if (fj_weight_held(p)) k->weight_t = fj_alloc(e, k->b_row_l, 1), k->weight_any = fj_alloc(e, k->b_p, 1);
    k->frag_p = fj_alloc(e, k->b_frag_p, p->m_frags * p->k_steps_pv * 4);
    if (p->q_in_regs) k->frag_q = fj_alloc(e, k->b_frag_q, p->m_frags * p->k_steps_qk * 4);
    k->tid = fj_alloc(e, k->b_r, 1);
    k->warp = fj_alloc(e, k->b_r, 1);
    k->lane = fj_alloc(e, k->b_r, 1);
    k->row_base = fj_alloc(e, k->b_r, 1);
    k->col_base_s = fj_alloc(e, k->b_r, 1);
    k->col_base_o = p->col_warps > 1 || p->kv8_direct ? fj_alloc(e, k->b_r, 1) : k->col_base_s;
    if (p->col_warps > 1) {
        k->pair_bar = fj_alloc(e, k->b_r, 1);
        k->xchg_own = fj_alloc(e, k->b_addr, 1);
        k->xchg_peer = fj_alloc(e, k->b_addr, 1);
    }
    k->seqlen_q = fj_alloc(e, k->b_r, 1);
    k->seqlen_k = fj_alloc(e, k->b_r, 1);
    k->m0 = fj_alloc(e, k->b_r, 1);
    k->j = fj_alloc(e, k->b_r, 1);
    k->q_rows = fj_alloc(e, k->b_r, 1);
    k->smem = fj_alloc(e, k->b_r, 1);
    k->f_zero = fj_alloc(e, k->b_f, 1);
    fj_reg_t *u64s[] = {&k->q_ptr, &k->o_ptr, &k->k_ptr, &k->v_ptr, &k->lse_ptr};
    for (size_t i = 0; i < sizeof u64s / sizeof u64s[0]; i++) *u64s[i] = fj_alloc(e, k->b_rd, 1);
}

fj_reg_t fj_param_u64(fj_kctx *k, int offset)
{
    fj_reg_t r = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, PTX_LD_PARAM_U64, R(r), offset);
    return r;
}

fj_reg_t fj_param_s32(fj_kctx *k, int offset)
{
    fj_reg_t r = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, PTX_LD_PARAM_U32, R(r), offset);
    return r;
}

fj_reg_t fj_param_f32(fj_kctx *k, int offset)
{
    fj_reg_t r = fj_alloc(k->e, k->b_f, 1);
    fj_ins(k->e, PTX_LD_PARAM_F32, R(r), offset);
    return r;
}

/* out = base + 2 * (b * s_b + h * s_h + row * s_n), strides in elements from the parameters. */
void fj_emit_tensor_ptr(fj_kctx *k, int off_ptr, int off_stride, fj_reg_t b, fj_reg_t h, fj_reg_t row, fj_reg_t out)
{
    fj_reg_t s = fj_alloc(k->e, k->b_rd, 3), x = fj_alloc(k->e, k->b_rd, 1), t = fj_alloc(k->e, k->b_rd, 1);
    for (int i = 0; i < 3; i++) fj_ins(k->e, PTX_LD_PARAM_U64, R(fj_at(s, i)), off_stride + 8 * i);
    fj_ins(k->e, PTX_LD_PARAM_U64, R(out), off_ptr);
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(b));
    fj_ins(k->e, "mul.lo.s64 %s, %s, %s", R(x), R(t), R(s));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(h));
    fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(x), R(t), R(fj_at(s, 1)), R(x));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(row));
    fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(x), R(t), R(fj_at(s, 2)), R(x));
    if (!(k->p->kv8 && (off_ptr == OFF(k) || off_ptr == OFF(v)))) /* FP8 K/V: 1-byte elements */
        fj_ins(k->e, "shl.b64 %s, %s, 1", R(x), R(x));
    fj_ins(k->e, "add.u64 %s, %s, %s", R(out), R(out), R(x));
}

void fj_emit_m0(fj_kctx *k)
{
    fj_emit *e = k->e;
    fj_reg_t mb = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "mov.u32 %s, %%ctaid.x", R(mb));
    if (k->p->cfg.causal) {
        fj_reg_t n = fj_alloc(e, k->b_r, 1);
        fj_ins(e, "mov.u32 %s, %%nctaid.x", R(n));
        fj_ins(e, "sub.u32 %s, %s, %s", R(mb), R(n), R(mb));
        fj_ins(e, "sub.u32 %s, %s, 1", R(mb), R(mb));
    }
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(k->m0), R(mb), k->p->cfg.block_m);
}

/* b = the batch of this CTA: %ctaid.z, or with split-KV %ctaid.z / splits (and, when want_split,
 * k->split = the rest). */
void fj_emit_batch(fj_kctx *k, fj_reg_t b, int want_split)
{
    fj_ins(k->e, "mov.u32 %s, %%ctaid.z", R(b));
    if (!(k->p->variant & FJ_VARIANT_SPLIT)) return;
    fj_reg_t z = fj_alloc(k->e, k->b_r, 1), n = fj_param_s32(k, DOFF(splits));
    fj_comment(k->e, 1, "split-KV: %%ctaid.z = batch x splits + split");
    fj_ins(k->e, "mov.u32 %s, %s", R(z), R(b));
    fj_ins(k->e, "div.u32 %s, %s, %s", R(b), R(z), R(n));
    if (!want_split) return;
    k->split = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(k->split), R(b), R(n));
    fj_ins(k->e, "sub.u32 %s, %s, %s", R(k->split), R(z), R(k->split));
}

/* len = max(min(seqlens_k[b], seqlen_k), 0) (the seqlen_k register given, or read from the parameters; len may
 * be that register: the value is loaded into its own register first, so the cap is read before len is written). */
void fj_emit_seq_len(fj_kctx *k, fj_reg_t b, fj_reg_t cap, fj_reg_t len)
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), w = fj_alloc(k->e, k->b_rd, 1), raw = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, PTX_LD_PARAM_U64, R(a), DOFF(seqlens_k));
    fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(w), R(b));
    fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(w));
    fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(raw), R(a));
    fj_ins(k->e, "min.s32 %s, %s, %s", R(len), R(raw), R(cap));
    fj_ins(k->e, "max.s32 %s, %s, 0", R(len), R(len));
}

void fj_emit_packed_row(fj_kctx *k, fj_reg_t row, fj_reg_t g, fj_reg_t i)
{
    fj_reg_t nq = fj_param_s32(k, OFF(seqlen_q));
    fj_ins(k->e, "add.s32 %s, %s, %s", R(i), R(k->m0), R(row));
    fj_ins(k->e, "div.u32 %s, %s, %s", R(g), R(i), R(nq));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(nq), R(g), R(nq));
    fj_ins(k->e, "sub.u32 %s, %s, %s", R(i), R(i), R(nq));
}

void fj_emit_packed_row_offset(fj_kctx *k, fj_reg_t row, int off_stride, int off_row_bytes, fj_reg_t out)
{
    fj_reg_t g = fj_alloc(k->e, k->b_r, 1), i = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_rd, 1);
    fj_emit_packed_row(k, row, g, i);
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(g));
    {
        fj_reg_t prm = fj_param_u64(k, off_stride + 8);
        fj_ins(k->e, "mul.lo.s64 %s, %s, %s", R(out), R(t), R(prm));
    }
    fj_ins(k->e, "shl.b64 %s, %s, 1", R(out), R(out));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(i));
    {
        fj_reg_t prm = fj_param_u64(k, off_row_bytes);
        fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(out), R(t), R(prm), R(out));
    }
}

void fj_emit_init_accumulators(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_comment(e, 1, "O = 0, m = -inf, l = 0");
    for (int i = 0; i < p->m_frags * p->n_frags_o * 4; i++) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(k->acc_o, i)));
    for (int r = 0; r < k->frag.rows; r++) {
        fj_ins(e, "mov.f32 %s, " PTX_F32_NEG_INF, R(fj_at(k->row_m, r)));
        fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(k->row_l, r)));
        if (fj_weight_lag(p)) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(k->row_l_lag, r)));
    }
    if (fj_weight_held(p)) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(k->weight_t)); /* m = -inf rebases anyway */
}

/* The CTA's (first) query head: %ctaid.y, or with GQA packing %ctaid.y x group (the KV head's first). */
void fj_emit_out_head(fj_kctx *k, fj_reg_t h)
{
    fj_ins(k->e, "mov.u32 %s, %%ctaid.y", R(h));
    if (k->p->variant & FJ_VARIANT_PACK) {
        fj_reg_t prm = fj_param_s32(k, OFF(group));
        fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(h), R(h), R(prm));
    }
}

void fj_emit_pair_sync(fj_kctx *k) { fj_ins(k->e, "bar.sync %s, 64", R(k->pair_bar)); }

static void vec_list(fj_kctx *k, fj_reg_t r, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", R(fj_at(r, i)));
}

/* st.shared / ld.shared of n (1, 2 or 4) registers at this lane's slot of an exchange area. */
static void pair_move(fj_kctx *k, int store, fj_reg_t area, int slot, fj_reg_t r, int n, const char *type)
{
    static const char *const vec[] = {"", "", ".v2", "", ".v4"};
    char list[160];
    if (n != 1 && n != 2 && n != 4) {
        fj_emit_error(k->e, "pair exchange of %d registers: 1, 2 or 4", n);
        return;
    }
    int off = k->p->xchg_off + slot * 512;
    vec_list(k, r, n, list, sizeof list);
    const char *open = n > 1 ? "{" : "", *close = n > 1 ? "}" : "";
    if (store) fj_ins(k->e, "st.shared%s.%s [%s+%d], %s%s%s", vec[n], type, R(area), off, open, list, close);
    else fj_ins(k->e, "ld.shared%s.%s %s%s%s, [%s+%d]", vec[n], type, open, list, close, R(area), off);
}

void fj_emit_pair_put(fj_kctx *k, int slot, fj_reg_t src, int n, const char *type)
{
    pair_move(k, 1, k->xchg_own, slot, src, n, type);
}

void fj_emit_pair_get(fj_kctx *k, int slot, fj_reg_t dst, int n, const char *type)
{
    pair_move(k, 0, k->xchg_peer, slot, dst, n, type);
}

void fj_emit_pair_reduce(fj_kctx *k, const char *op, fj_reg_t v, int n)
{
    fj_reg_t t = fj_alloc(k->e, k->b_f, n);
    fj_emit_pair_put(k, FJ_XCHG_SLOT_ROWS, v, n, "f32");
    fj_emit_pair_sync(k);
    fj_emit_pair_get(k, FJ_XCHG_SLOT_ROWS, t, n, "f32");
    for (int i = 0; i < n; i++) fj_ins(k->e, "%s %s, %s, %s", op, R(fj_at(v, i)), R(fj_at(v, i)), R(fj_at(t, i)));
}
