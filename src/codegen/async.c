/*
 * async.c - mbarrier rings and TMA tile loads (sm_90+, PTX ISA 8.0): the pieces a warp-specialized
 * frame (ws_frame.c) and its role bodies build its producer / consumer pipeline from. Nothing here depends on the MMA
 * the consumers issue, so the sm_100a path (tcgen05) takes them as they are. See async.h for the
 * barrier map and the phase rule.
 */
#include "async.h"

#include <stddef.h>
#include <stdio.h>

#include "kernel_abi.h"
#include "ptx_templates/sm90.h"

#define R(reg) fj_r(k->e, reg)

int fj_ws_o_in_regs(const fj_plan *p) { return (p->variant_wanted & (FJ_VARIANT_SPLIT | FJ_VARIANT_PACK)) != 0; }

int fj_ws_o_staged(const fj_plan *p) { return fj_ws_o_in_regs(p) ? 0 : p->o_stage; }

int fj_ws_bar_count(int stages, int o_stage) { return 4 + FJ_WS_BARS_PER_STAGE * stages + (o_stage == 2); }

int fj_ws_bar(const fj_plan *p, int which, int index)
{
    if (which == FJ_BAR_Q_FULL || which == FJ_BAR_Q_EMPTY) return p->bar_off + 8 * (2 * which + index);
    if (which == FJ_BAR_O_FREE) return p->bar_off + 8 * (4 + FJ_WS_BARS_PER_STAGE * p->cfg.stages);
    if (which == FJ_BAR_VT_FULL || which == FJ_BAR_VT_EMPTY)
        return p->vt_bar + p->vt_bar_stride * index + 8 * (which == FJ_BAR_VT_EMPTY);
    return p->bar_off + 8 * (4 + FJ_WS_BARS_PER_STAGE * index + (which - FJ_BAR_K_FULL));
}

void fj_emit_mbar_wait_at(fj_kctx *k, fj_reg_t base, int off, fj_reg_t parity)
{
    char again[48];
    fj_reg_t done = fj_alloc(k->e, k->b_p, 1);
    fj_label_new(k->e, "mbar_wait", again, sizeof again);
    fj_label(k->e, again);
    fj_ins(k->e, PTX_MBAR_TRY_WAIT_PARITY, R(done), R(base), off, R(parity));
    fj_ins(k->e, "@!%s bra %s", R(done), again);
}

void fj_emit_mbar_wait(fj_kctx *k, int off, fj_reg_t parity) { fj_emit_mbar_wait_at(k, k->smem, off, parity); }

void fj_emit_mbar_arrive_at(fj_kctx *k, fj_reg_t base, int off, fj_reg_t pred)
{
    fj_ins(k->e, "@%s " PTX_MBAR_ARRIVE, R(pred), R(base), off);
}

void fj_emit_mbar_arrive(fj_kctx *k, int off, fj_reg_t pred) { fj_emit_mbar_arrive_at(k, k->smem, off, pred); }

void fj_emit_mbar_expect_tx(fj_kctx *k, int off, int bytes)
{
    fj_ins(k->e, PTX_MBAR_ARRIVE_EXPECT_TX, R(k->smem), off, bytes);
}

static int tmap_offset(int tensor)
{
    switch (tensor) {
    case FJ_TMA_Q: return (int)offsetof(fj_fwd_params_tma, tmap_q);
    case FJ_TMA_K: return (int)offsetof(fj_fwd_params_tma, tmap_k);
    default: return (int)offsetof(fj_fwd_params_tma, tmap_v);
    }
}

/* The boxes of one tile: loaded into dst + smem_off completing on bar + bar_off, or (dst.bank < 0, from
 * fj_emit_tma_prefetch) prefetched into the L2 only. */
void fj_emit_tma_boxes(fj_kctx *k, int tensor, fj_reg_t dst, int smem_off, int rows, fj_reg_t row, fj_reg_t head,
                       fj_reg_t batch, fj_reg_t bar, int bar_off)
{
    const fj_plan *p = k->p;
    int box_bytes = rows * p->cfg.swizzle; /* a box row is the swizzle span */
    fj_reg_t map = fj_alloc(k->e, k->b_rd, 1), col = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.u64 %s, %s, %d", R(map), R(k->params), tmap_offset(tensor));
    for (int box = 0; box < p->tma_boxes; box++) {
        fj_ins(k->e, "mov.u32 %s, %d", R(col), box * p->tma_box_cols);
        if (dst.bank < 0) fj_ins(k->e, PTX_TMA_PREFETCH_4D, R(map), R(col), R(row), R(head), R(batch));
        else
            fj_ins(k->e, PTX_TMA_LOAD_4D, R(dst), smem_off + box * box_bytes, R(map), R(col), R(row), R(head),
                   R(batch), R(bar), bar_off);
    }
}

void fj_emit_tma_prefetch(fj_kctx *k, int tensor, fj_reg_t row, fj_reg_t head, fj_reg_t batch)
{
    fj_reg_t none = {-1, 0};
    fj_emit_tma_boxes(k, tensor, none, 0, 0, row, head, batch, none, 0);
}

void fj_emit_tma_tile(fj_kctx *k, int tensor, fj_reg_t dst, int smem_off, int rows, fj_reg_t row, fj_reg_t head,
                      fj_reg_t bar, int bar_off)
{
    fj_emit_tma_boxes(k, tensor, dst, smem_off, rows, row, head, k->b, bar, bar_off);
}
