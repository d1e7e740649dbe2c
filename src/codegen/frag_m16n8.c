/*
 * frag_m16n8.c - accumulators in the m16n8 C layout, shared by the sm_80 path (mma.sync.m16n8k16) and
 * the sm_90a path (wgmma.m64nNk16, whose accumulator gives each warp of the warpgroup 16 rows in exactly
 * this layout, repeated along N): the fragment descriptor the online softmax runs over, the repack of
 * P from the S accumulators into A-operand registers, and the store of O.
 *
 * Layout (PTX ISA 9.7.13.4.8 for mma.sync, 9.7.15.5.1 for wgmma): lane = 4g + t holds, for each n8 tile
 * i of a 16-row fragment, c[4i+0], c[4i+1] at row g, columns 8i + 2t, 8i + 2t + 1, and c[4i+2], c[4i+3]
 * at row g + 8. The A operand of a k16 step (m16k16, 16-bit) holds rows g / g + 8 and columns 2t.. and
 * 2t + 8.. in four 32-bit registers: the C layout of two adjacent n8 tiles, packed in pairs.
 */
#include "backend.h"
#include "ptx_templates/common.h"

#define R(reg) fj_r(k->e, reg)

/* Thread-local row r = 2 * mf + h (h: the upper or lower 8 rows of fragment mf), value v = 2 * tile + e. */
static int s_reg(const fj_plan *p, int r, int v) { return ((r / 2) * p->n_frags_s + v / 2) * 4 + (r % 2) * 2 + v % 2; }
static int o_reg(const fj_plan *p, int r, int v) { return ((r / 2) * p->n_frags_o + v / 2) * 4 + (r % 2) * 2 + v % 2; }
/* FP8 K/V fragments from e4m3 (kv8_frag.c): value v = 4c + j of a row is dim 16c + j past col_base_o = 4t, held by
 * n8 tile 2c + (j & 1) (the even / odd dims' MMA), its value j >> 1. */
static int o_reg_kv8d(const fj_plan *p, int r, int v)
{
    return ((r / 2) * p->n_frags_o + 2 * (v / 4) + v % 2) * 4 + (r % 2) * 2 + (v % 4) / 2;
}
static int o_col_off_kv8d(const fj_plan *p, int v) { (void)p; return (v / 4) * 16 + v % 4; }
static int row_off(const fj_plan *p, int r) { (void)p; return (r / 2) * 16 + (r % 2) * 8; }
static int col_off(const fj_plan *p, int v) { (void)p; return (v / 2) * 8 + v % 2; }

void fj_frag_desc_m16n8(const fj_plan *p, fj_frag_desc *d)
{
    d->rows = 2 * p->m_frags;
    d->s_vals = 2 * p->n_frags_s;
    d->o_vals = 2 * p->n_frags_o;
    d->n_shuffles = 2;
    d->shuffle_xor[0] = 1;
    d->shuffle_xor[1] = 2;
    d->s_reg = s_reg;
    d->o_reg = o_reg;
    d->row_off = row_off;
    d->s_col_off = col_off;
    d->o_col_off = col_off;
    if (p->kv8_direct) {
        d->o_reg = o_reg_kv8d;
        d->o_col_off = o_col_off_kv8d;
    }
}

const char *fj_dtype_ptx(const fj_plan *p) { return p->cfg.dtype == FAJIT_DTYPE_BF16 ? "bf16" : "f16"; }
const char *fj_mma_dtype_ptx(const fj_plan *p) { return p->kv8_f16 ? "f16" : fj_dtype_ptx(p); }

const char *fj_out_dtype_ptx(const fj_plan *p)
{
    return fj_config_out_dtype(&p->cfg) == FAJIT_DTYPE_BF16 ? "bf16" : "f16";
}

void fj_emit_pack_p_m16n8(fj_kctx *k)
{
    const fj_plan *p = k->p;
    const char *dt = fj_mma_dtype_ptx(p);
    fj_comment(k->e, 2, "P (f32 in the S accumulators) -> %s pairs: the m16n8 C layout of two adjacent n8 tiles is "
                        "the m16k16 A layout",
               dt);
    for (int mf = 0; mf < p->m_frags; mf++)
        for (int ks = 0; ks < p->k_steps_pv / p->col_warps; ks++)
            for (int i = 0; i < 4; i++) {
                /* a0: row g, tile 2ks; a1: row g+8, tile 2ks; a2: row g, tile 2ks+1; a3: row g+8, tile 2ks+1 */
                int tile = 2 * ks + i / 2, h = i % 2;
                fj_reg_t s = fj_at(k->acc_s, (mf * p->n_frags_s + tile) * 4 + 2 * h);
                fj_ins(k->e, PTX_CVT_PACK, dt, R(fj_at(k->frag_p, (mf * p->k_steps_pv + ks) * 4 + i)), R(fj_at(s, 1)),
                       R(s));
            }
}

void fj_emit_store_o_m16n8(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1), v = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), cb = fj_alloc(k->e, k->b_rd, 1), rw = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "mul.wide.u32 %s, %s, 2", R(cb), R(k->col_base_o));
    for (int r = 0; r < k->frag.rows; r++) {
        char skip[48];
        fj_label_new(k->e, "store_skip", skip, sizeof skip);
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), row_off(p, r));
        fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(row), R(k->q_rows));
        fj_ins(k->e, "@%s bra %s", R(pr), skip);
        if (p->variant & FJ_VARIANT_PACK) { /* packed rows: head g, row i */
            fj_emit_packed_row_offset(k, row, FJ_PARAM_OFF(o_stride), FJ_PARAM_OFF(o_row_bytes), a);
            fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(cb));
        } else {
            fj_ins(k->e, "cvt.u64.u32 %s, %s", R(rw), R(row));
            {
                fj_reg_t prm = fj_param_u64(k, FJ_PARAM_OFF(o_row_bytes));
                fj_ins(k->e, "mad.lo.u64 %s, %s, %s, %s", R(a), R(rw), R(prm), R(cb));
            }
        }
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(k->o_ptr));
        for (int t = 0; t < p->n_frags_o; t++) { /* values 2t, 2t + 1: adjacent columns */
            fj_reg_t o0 = fj_at(k->acc_o, k->frag.o_reg(p, r, 2 * t)), o1 = fj_at(k->acc_o, k->frag.o_reg(p, r, 2 * t + 1));
            fj_ins(k->e, PTX_CVT_PACK, fj_out_dtype_ptx(p), R(v), R(o1), R(o0));
            fj_ins(k->e, "st.global.b32 [%s+%d], %s", R(a), 2 * k->frag.o_col_off(p, 2 * t), R(v));
        }
        fj_label(k->e, skip);
    }
}
