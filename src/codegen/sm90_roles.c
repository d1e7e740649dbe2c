/*
 * sm90_roles.c - the sm_90a role bodies of the warp-specialized frame (ws_frame.c): what the producer, the FP8
 * transposer and the consumer warpgroups do per work tile. The frame has dispatched each role's warps and set their
 * registers; the table (plan.roles, sm90.c fj_sm90_roles) says which rings each role fills and drains.
 *
 *   producer (LOAD, warpgroup 0): one thread walks the CTA's work tiles: for each, Q into its buffer once the
 *       consumers have freed it, then for each KV tile j the TMA loads of K(j) and V(j) into the next stage of the
 *       ring once the consumers have freed it
 *   transposer (TRANSPOSE, FP8: producer warps 1..): V(j) -> Vt(j) for the K-major FP8 wgmma (fp8_ws.c); with the
 *       vt4 knob (plan.fp8_vt4) the producer's whole warp 0 joins them: its lane 0 loads K(j + 1) and V(j + 1)
 *       (producer_tile_vt4), then the warp transposes its quarter of V(j)
 *   consumers (SOFTMAX, warpgroups 1.., 64 query rows of each work tile each): per work tile: for each KV tile wait
 *       for K(j), S = Q K^T (wgmma), free K's stage, mask, online softmax, wait for V(j), O += P V (wgmma, P from
 *       registers), free V's stage; then free Q and run the epilogue while the producer is already loading the next
 *       work tile
 * The loop over KV tiles is written once per stage (stage offsets and barriers are immediates; the frame's
 * fj_ws_ring_dispatch enters it at the stage the last work tile left), or once for every stage with
 * plan.roll_stages (overlapped: the work tile's first KV tile joins the body at its softmax half, no peeled copy;
 * consumer_loop_overlap_rolled). With plan.overlap a consumer issues S(j + 1) = Q K(j + 1)^T and O += P(j) V(j) together and
 * exponentiates S(j + 1) while the PV product runs (FlashAttention-3, section 3.2); with plan.pingpong the consumer
 * warpgroups take turns issuing their GEMMs (named barriers 1 + warpgroup), so one's softmax overlaps another's
 * GEMMs (section 3.1).
 * Decode variants (fj_plan.variant): per-sequence lengths (SEQLENS), split-KV (SPLIT: work tiles per split, fp32
 * partials), GQA packing (PACK: one Q box of group x Nq rows) and paged K/V (PAGED: each K/V tile as TMA boxes
 * from the pool's pages, producer_paged); a sequence's last V tile is zero-filled past its length
 * (producer_v_tail).
 * The KV range and the mask are mask.c's, the softmax softmax.c's, the epilogue epilogue.c's; the MMAs are the
 * backend's (mma_qk, mma_pv, and the event async->mma_wait); the TMA and mbarrier pieces async.c's.
 */
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "fp8_ws.h"
#include "mask.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm90.h"
#include "seqlen.h"
#include "sm90.h"
#include "ws_frame.h"

#define R(reg) fj_r(k->e, reg)
#define TMA_OFF(field) ((int)offsetof(fj_fwd_params_tma, field))

/* Named barriers of the ping-pong schedule: consumer warpgroup c waits on 1 + c. */
#define FJ_PINGPONG_BAR0 1

/* ---- producer ---------------------------------------------------------------------------------- */

/* O staged in the V ring (plan.o_stage 2): a work tile's first V load (j = 0, or kv_first of a local variant's
 * range) in round r > 0 waits until
 * every consumer warpgroup's TMA store of round r - 1 has read its O staging (O free, phase r - 1: parity
 * (r - 1) & 1). The parity names one phase: this load follows round r's Q load, which waited until every
 * consumer warp freed Q in round r - 1, so phase r - 2 (their round r - 2 epilogue) has completed, and
 * phase r cannot complete before this V arrives. */
static void producer_wait_o_free(fj_kctx *k, const fj_ws_loop *l, fj_reg_t round)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), par = fj_alloc(e, k->b_r, 1);
    fj_label_new(e, "o_free", skip, sizeof skip);
    fj_comment(e, 2, "O is staged in the V ring: a work tile's first V waits until the last tile's O stores read it");
    if (k->p->kv_desc) { /* its first tile walked: n_end - 1 */
        fj_reg_t t = fj_alloc(e, k->b_r, 1);
        fj_ins(e, "add.s32 %s, %s, 1", R(t), R(k->j));
        fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(t), R(l->n_end));
    } else if (fj_mods_local(k->p)) { /* its first tile */
        fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(k->j), R(k->kv_first));
    } else fj_ins(e, "setp.ne.s32 %s, %s, 0", R(pr), R(k->j));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(pr), R(round));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    fj_ins(e, "sub.u32 %s, %s, 1", R(par), R(round));
    fj_ins(e, "and.b32 %s, %s, 1", R(par), R(par));
    fj_emit_mbar_wait(k, fj_ws_bar(k->p, FJ_BAR_O_FREE, 0), par);
    fj_label(e, skip);
}

/* tab = the work tile's block-table row: block_table + b x max_pages x 4 (t: a u32 scratch register). */
static void page_table_row(fj_kctx *k, fj_reg_t tab, fj_reg_t t)
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1);
    fj_comment(k->e, 2, "the sequence's block-table row: block_table + b x max_pages x 4");
    fj_ins(k->e, PTX_LD_PARAM_U32, R(t), FJ_DEC_OFF(k, max_pages));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(t), R(k->b), R(t));
    fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(a), R(t));
    fj_ins(k->e, PTX_LD_PARAM_U64, R(tab), FJ_DEC_OFF(k, block_table));
    fj_ins(k->e, "add.u64 %s, %s, %s", R(tab), R(tab), R(a));
}

/* PAGED: K or V (`tensor`) of the KV tile at sequence row `row` from the pool into smem_off, completing the barrier
 * at bar_off. The map (tensor_map.c) describes the pool as (head_dim, page_size, Hkv, pages) with a box of
 * box = min(page_size, block_n) rows, so the tile comes in block_n / box segments (block_n divides the page size,
 * or the page size divides block_n: decode.c), segment i = one box per 64 columns at (column, (row + i x box) %
 * page_size, hkv, block_table[b][(row + i x box) / page_size]) into its rows of the stage's [boxes][block_n]
 * [swizzle bytes] layout (at + i x box x swizzle bytes: a multiple of 2048, so the 128B swizzle pattern lines up).
 * Segments from the length (k->seqlen_k) on are not loaded and their table entries are not read (they may be
 * garbage): the barrier expects only the bytes of the segments loaded. K rows past the length are masked; V's are
 * zero-filled (producer_v_tail). One thread, a loop over the segments: each entry is read where it is used unless
 * it is the one read a tile ahead (l->pg_idx: producer_page_ahead). */
static void producer_paged(fj_kctx *k, fj_ws_loop *l, int tensor, int smem_off, fj_reg_t row, int bar_off)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int bn = p->cfg.block_n;
    char top[48];
    fj_reg_t ps = fj_alloc(e, k->b_r, 1), box = fj_alloc(e, k->b_r, 1), n = fj_alloc(e, k->b_r, 1);
    fj_reg_t t = fj_alloc(e, k->b_r, 1), srow = fj_alloc(e, k->b_r, 1), page = fj_alloc(e, k->b_r, 1);
    fj_reg_t dst = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_reg_t tab = fj_alloc(e, k->b_rd, 1), a = fj_alloc(e, k->b_rd, 1);
    fj_label_new(e, "page_seg", top, sizeof top);
    fj_comment(e, 2, "paged: segments of box = min(page_size, %d) rows; n = min(%d / box, ceil((len - row) / box)) of "
                     "them are loaded, n x box x %d bytes expected",
               bn, bn, p->row_bytes);
    fj_ins(e, PTX_LD_PARAM_U32, R(ps), FJ_DEC_OFF(k, page_size));
    fj_ins(e, "min.u32 %s, %s, %d", R(box), R(ps), bn);
    fj_ins(e, "sub.s32 %s, %s, %s", R(t), R(k->seqlen_k), R(row));
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(t), R(box));
    fj_ins(e, "sub.s32 %s, %s, 1", R(t), R(t));
    fj_ins(e, "div.u32 %s, %s, %s", R(t), R(t), R(box));
    fj_ins(e, "mov.u32 %s, %d", R(n), bn);
    fj_ins(e, "div.u32 %s, %s, %s", R(n), R(n), R(box));
    fj_ins(e, "min.u32 %s, %s, %s", R(n), R(n), R(t));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(t), R(n), R(box));
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(t), R(t), p->row_bytes);
    fj_ins(e, PTX_MBAR_ARRIVE_EXPECT_TX_REG, R(k->smem), bar_off, R(t));
    page_table_row(k, tab, t);
    fj_ins(e, "mov.u32 %s, %s", R(srow), R(row));
    fj_ins(e, "mov.u32 %s, %s", R(dst), R(k->smem));
    fj_label(e, top);
    fj_comment(e, 2, "segment at srow: page block_table[b][srow / page_size] (the entry read ahead when it is that one), "
                     "its row srow %% page_size");
    fj_ins(e, "div.u32 %s, %s, %s", R(page), R(srow), R(ps));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(t), R(page), R(ps));
    fj_ins(e, "sub.u32 %s, %s, %s", R(t), R(srow), R(t));
    fj_ins(e, "setp.eq.u32 %s, %s, %s", R(pr), R(page), R(l->pg_idx));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(a), R(page));
    fj_ins(e, "add.u64 %s, %s, %s", R(a), R(tab), R(a));
    fj_ins(e, "@!%s ld.global.nc.u32 %s, [%s]", R(pr), R(page), R(a));
    fj_ins(e, "@%s mov.u32 %s, %s", R(pr), R(page), R(l->pg_ent));
    fj_emit_tma_boxes(k, tensor, dst, smem_off, bn, t, k->hkv, page, k->smem, bar_off);
    fj_ins(e, "add.u32 %s, %s, %s", R(srow), R(srow), R(box));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(dst), R(box), p->cfg.swizzle, R(dst));
    fj_ins(e, "sub.u32 %s, %s, 1", R(n), R(n));
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(n));
    fj_ins(e, "@%s bra.uni %s", R(pr), top);
}

/* PAGED: once tile j's (at `row`) K and V are issued, the next tile's first page entry into l->pg_idx / pg_ent
 * (when the work tile has one: below n_end, so below the length - an entry past it is never read), so its copies
 * need not wait for the table. The load returns while the producer waits for the next stage to be freed; with
 * pages of block_n rows or more it is the next tile's only entry. */
static void producer_page_ahead(fj_kctx *k, fj_ws_loop *l, fj_reg_t row)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t next = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_reg_t tab = fj_alloc(e, k->b_rd, 1), a = fj_alloc(e, k->b_rd, 1);
    fj_label_new(e, "page_ahead", skip, sizeof skip);
    fj_comment(e, 2, "paged: the next tile's first page entry, read ahead (when the work tile has a next tile, j + 1 < "
                     "n_end: its row is below the length)");
    if (k->p->kv_desc) { /* descending: the next tile is j - 1, its row row - block_n */
        fj_ws_kv_not_last(k, l, next, pr);
        fj_ins(e, "@!%s bra.uni %s", R(pr), skip);
        fj_ins(e, "sub.s32 %s, %s, %d", R(next), R(row), k->p->cfg.block_n);
    } else {
        fj_ins(e, "add.s32 %s, %s, 1", R(next), R(k->j));
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(next), R(l->n_end));
        fj_ins(e, "@%s bra.uni %s", R(pr), skip);
        fj_ins(e, "add.s32 %s, %s, %d", R(next), R(row), k->p->cfg.block_n);
    }
    fj_ins(e, PTX_LD_PARAM_U32, R(t), FJ_DEC_OFF(k, page_size));
    fj_ins(e, "div.u32 %s, %s, %s", R(next), R(next), R(t));
    fj_ins(e, "setp.eq.u32 %s, %s, %s", R(pr), R(next), R(l->pg_idx));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    page_table_row(k, tab, t);
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(a), R(next));
    fj_ins(e, "add.u64 %s, %s, %s", R(a), R(tab), R(a));
    fj_ins(e, "ld.global.nc.u32 %s, [%s]", R(l->pg_ent), R(a));
    fj_ins(e, "mov.u32 %s, %s", R(l->pg_idx), R(next));
    fj_label(e, skip);
}

/* K or V of the KV tile at `row` into smem_off, completing the barrier at bar_off: a whole tile's bytes and its
 * TMA boxes, or (PAGED) its pages' (producer_paged). */
/* The TMA row and 4th coordinate of K / V tile rows from `row`: packed keys (VARLEN_K) shift the row into the
 * sequence and take the sequence as the 4th coordinate (seqlen.h; the map clips at its end), the rest the batch. */
static fj_reg_t kv_tma_row(fj_kctx *k, fj_reg_t row, fj_reg_t *batch)
{
    *batch = k->b;
    if (!(k->p->variant & FJ_VARIANT_VARLEN_K)) return row;
    fj_reg_t r = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(r), R(row), R(k->kv_tma_delta));
    *batch = k->kv_tma_seq;
    return r;
}

static void producer_kv(fj_kctx *k, fj_ws_loop *l, int tensor, int smem_off, fj_reg_t row, int bar_off)
{
    const fj_plan *p = k->p;
    if (p->variant & FJ_VARIANT_PAGED) {
        producer_paged(k, l, tensor, smem_off, row, bar_off);
        return;
    }
    fj_emit_mbar_expect_tx(k, bar_off, p->kv_tile_bytes);
    fj_reg_t batch, r = kv_tma_row(k, row, &batch);
    fj_emit_tma_boxes(k, tensor, k->smem, smem_off, p->cfg.block_n, r, k->hkv, batch, k->smem, bar_off);
}

/* fj_sm90_kv_prefetch: the work tile's first K and V tile (j) into the L2 now; their loads wait for a free stage. */
static void producer_prefetch_first(fj_kctx *k)
{
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), batch;
    fj_comment(k->e, 1, "the tile's first K and V into the L2 while their stage is still in use (a prefetch: no smem)");
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(row), R(k->j), k->p->cfg.block_n);
    fj_reg_t r = kv_tma_row(k, row, &batch);
    fj_emit_tma_prefetch(k, FJ_TMA_K, r, k->hkv, batch);
    fj_emit_tma_prefetch(k, FJ_TMA_V, r, k->hkv, batch);
}

/* SEQLENS / PAGED: a V tile that reaches past the sequence's length (in k->seqlen_k) lands on the V-tail barrier
 * instead of V full[s]; then this thread zero-fills its rows past the length in every box (TMA loaded them as
 * stored, or - paged - left the stage's old rows where it loaded no page: a NaN there would reach O through
 * P = 0 x NaN), makes the writes visible to wgmma
 * (fence.proxy.async) and arrives on V full[s] itself, and branches to `done`. A whole tile falls through to
 * the plain V load that follows (producer_tile). */
static void producer_v_tail(fj_kctx *k, fj_ws_loop *l, int s, fj_reg_t row, const char *done)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int w = p->cfg.swizzle, bn = p->cfg.block_n, tile = p->v_off + s * p->kv_tile_bytes;
    char whole[48], top[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), end = fj_alloc(e, k->b_r, 1), r = fj_alloc(e, k->b_r, 1);
    fj_reg_t a = fj_alloc(e, k->b_addr, 1), z = fj_alloc(e, k->b_r, 1);
    fj_label_new(e, "v_whole", whole, sizeof whole);
    fj_label_new(e, "v_zero", top, sizeof top);
    fj_ins(e, "add.s32 %s, %s, %d", R(end), R(row), bn);
    fj_ins(e, "setp.le.s32 %s, %s, %s", R(pr), R(end), R(k->seqlen_k));
    fj_ins(e, "@%s bra.uni %s", R(pr), whole);
    fj_comment(e, 1, "the sequence's last V tile: onto the V-tail barrier, rows from its length on zeroed, then V full");
    producer_kv(k, l, FJ_TMA_V, tile, row, p->vtail_bar);
    fj_emit_mbar_wait(k, p->vtail_bar, l->vtail_par);
    fj_ins(e, "xor.b32 %s, %s, 1", R(l->vtail_par), R(l->vtail_par));
    fj_ins(e, "sub.s32 %s, %s, %s", R(r), R(k->seqlen_k), R(row));
    fj_ins(e, "mov.u32 %s, 0", R(z));
    fj_label(e, top);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(r), w, R(k->smem));
    for (int box = 0; box < p->tma_boxes; box++)
        for (int c = 0; c < w; c += 16)
            fj_ins(e, "st.shared.v4.b32 [%s+%d], {%s, %s, %s, %s}", R(a), tile + box * bn * w + c, R(z), R(z), R(z),
                   R(z));
    fj_ins(e, "add.s32 %s, %s, 1", R(r), R(r));
    fj_ins(e, "setp.lt.s32 %s, %s, %d", R(pr), R(r), bn);
    fj_ins(e, "@%s bra.uni %s", R(pr), top);
    fj_ins(e, PTX_FENCE_PROXY_ASYNC_SMEM);
    fj_ins(e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_V_FULL, s));
    fj_ins(e, "bra.uni %s", done);
    fj_label(e, whole);
}

/* V of the tile at key `row` into stage s, completing V full[s]: through producer_v_tail when the variant has a V
 * tail (seqlens / paged: a sequence's last, partial tile zero-filled past its length), else the plain V load. Every
 * V load of a producer goes through here (producer_tile, producer_tile_vt4). */
static void producer_v(fj_kctx *k, fj_ws_loop *l, int s, fj_reg_t row)
{
    const fj_plan *p = k->p;
    char done[48] = "";
    if (p->vtail_bar) {
        fj_label_new(k->e, "v_done", done, sizeof done);
        producer_v_tail(k, l, s, row, done);
    }
    producer_kv(k, l, FJ_TMA_V, p->v_off + s * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_V_FULL, s));
    if (p->vtail_bar) fj_label(k->e, done);
}

/* Tile j (register) into stage s: wait until the consumers freed it (parity `empty_parity`), then K and V. */
static void producer_tile(fj_kctx *k, fj_ws_loop *l, int s, fj_reg_t empty_parity)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(row), R(k->j), p->cfg.block_n);
    fj_comment(k->e, 2, "K(j) -> stage %d once every consumer warp has freed it; the copy completes K full[%d]", s, s);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_EMPTY, s), empty_parity);
    producer_kv(k, l, FJ_TMA_K, p->k_off + s * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_K_FULL, s));
    fj_comment(k->e, 2, "V(j) -> stage %d likewise (V full[%d])", s, s);
    if (fj_ws_o_staged(p) == 2) producer_wait_o_free(k, l, l->round);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, s), empty_parity);
    producer_v(k, l, s, row);
    if (p->variant & FJ_VARIANT_PAGED) producer_page_ahead(k, l, row);
}

/* GQA packing: the Q map's box is (columns, Nq, group, 1) (the runtime's, per call; group x Nq <= block_m, one
 * row block), so each box load fills packed rows r = g x Nq + i of the tile from head h0 = hkv x group, row 0;
 * its bytes, group x Nq x row bytes, come from the parameters. Rows past group x Nq keep what the buffer held:
 * their S, P and O rows are never stored (each row's softmax is its own). */
static void producer_packed_q(fj_kctx *k, fj_ws_loop *l, fj_reg_t dst)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t bytes = fj_alloc(e, k->b_r, 1), zero = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "GQA packing: Q box (%d columns, Nq, group, 1) from head hkv x group, row 0: group x Nq x %d bytes",
               p->tma_box_cols, p->row_bytes);
    fj_ins(e, PTX_LD_PARAM_U32, R(bytes), FJ_PARAM_OFF(seqlen_q));
    {
        fj_reg_t grp = fj_param_s32(k, FJ_PARAM_OFF(group));
        fj_ins(e, "mul.lo.u32 %s, %s, %s", R(bytes), R(bytes), R(grp));
    }
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(bytes), R(bytes), p->row_bytes);
    fj_ins(e, PTX_MBAR_ARRIVE_EXPECT_TX_REG, R(l->qbar), fj_ws_bar(p, FJ_BAR_Q_FULL, 0), R(bytes));
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    fj_emit_tma_tile(k, FJ_TMA_Q, dst, p->q_off, p->cfg.block_m, zero, k->h, l->qbar, fj_ws_bar(p, FJ_BAR_Q_FULL, 0));
}

/* FP8: V(j) in stage s -> Vt's stage s by this warp's share of the blocks, once V full[s] (parity k->phase) and VT
 * empty[s] (not_phase); then every thread arrives on VT full[s] and V empty[s]. */
static void transpose_stage(fj_kctx *k, const fj_fp8_lanes *ln, int s, fj_reg_t not_phase)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_FULL, s), k->phase);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_VT_EMPTY, s), not_phase);
    fj_ins(e, "bar.warp.sync -1"); /* the lanes leave the waits' loops together: ldmatrix / stmatrix are .aligned */
    fj_fp8_emit_transpose_tile(k, ln, s);
    fj_ins(e, PTX_FENCE_PROXY_ASYNC_SMEM);
    fj_ins(e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_VT_FULL, s));
    fj_ins(e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_V_EMPTY, s));
}

/* Stage s of a KV loop: pr (the walk is done) leaves for `next` with the ring's stage s recorded for the next work
 * tile. The lean vt4 form (fj_fp8_vt4_lean) branches to done_at[s], which sets it past the loop (ring_exits), so the
 * ring's register is not live through the loop as a predicated mov in it keeps it. */
static void kv_loop_exit(fj_kctx *k, fj_ws_loop *l, fj_reg_t pr, int s, char done_at[][48], const char *next)
{
    if (fj_fp8_vt4_lean(k->p)) {
        fj_ins(k->e, "@%s bra.uni %s", R(pr), done_at[s]);
        return;
    }
    fj_ins(k->e, "@%s mov.u32 %s, %d", R(pr), R(l->ring), s);
    fj_ins(k->e, "@%s bra.uni %s", R(pr), next);
}

/* done_at[s]: the labels kv_loop_exit branches to and ring_exits places (lean vt4 only). */
static void ring_exit_labels(fj_kctx *k, char done_at[][48])
{
    for (int s = 0; s < k->p->cfg.stages && fj_fp8_vt4_lean(k->p); s++)
        fj_label_new(k->e, "ring_exit", done_at[s], sizeof done_at[s]);
}

static void ring_exits(fj_kctx *k, fj_ws_loop *l, char done_at[][48], const char *next)
{
    if (!fj_fp8_vt4_lean(k->p)) return;
    fj_comment(k->e, 1, "the walk is done: the stage it stopped at, for the next work tile");
    for (int s = 0; s < k->p->cfg.stages; s++) {
        fj_label(k->e, done_at[s]);
        fj_ins(k->e, "mov.u32 %s, %d", R(l->ring), s);
        fj_ins(k->e, "bra.uni %s", next);
    }
}

/* plan.fp8_vt4: warp 0 runs the loader's loop with all its lanes; lane 0 alone does what the loader's thread does
 * (`lead`: a branch of the others past it), then the warp transposes its share of V(j) (transpose_stage). */
static void lead_begin(fj_kctx *k, fj_reg_t lead, char *skip, size_t n)
{
    fj_label_new(k->e, "lead_done", skip, n);
    fj_ins(k->e, "@!%s bra %s", R(lead), skip);
}

/* vt4, lane 0 of warp 0, KV tile j in stage s: the loads a tile ahead (FlashAttention-3 loads K one ahead; here V too):
 * K(j) and V(j) only when j is the work tile's first walked (else the last body loaded them), then K(j + 1) and
 * V(j + 1) into the next stage unless j is the last walked. The warp's transpose of V(j) that follows waits for VT
 * empty, so the next tile's loads leave before that wait. V(j + 1)'s V empty wait needs every warp's transpose of
 * V(j + 1 - stages), done by this warp already when stages >= 2; with one stage V(j) waits for the body of j. */
static void producer_tile_vt4(fj_kctx *k, fj_ws_loop *l, int s, fj_reg_t empty_parity)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int n = (s + 1) % p->cfg.stages, v_ahead = p->cfg.stages >= 2;
    char not_first[48], last[48];
    fj_reg_t row = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1), t = fj_alloc(e, k->b_r, 1);
    fj_label_new(e, "kv_loaded", not_first, sizeof not_first);
    fj_label_new(e, "kv_last", last, sizeof last);
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(row), R(k->j), p->cfg.block_n);
    if (p->kv_desc) {
        fj_ins(e, "add.s32 %s, %s, 1", R(t), R(k->j));
        fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(t), R(l->n_end));
    } else if (fj_kv_has_first(p)) fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(k->j), R(k->kv_first));
    else fj_ins(e, "setp.ne.s32 %s, %s, 0", R(pr), R(k->j));
    fj_ins(e, "@%s bra %s", R(pr), not_first);
    fj_comment(e, 2, "the work tile's first K(j)%s -> stage %d", v_ahead ? " and V(j)" : "", s);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_EMPTY, s), empty_parity);
    producer_kv(k, l, FJ_TMA_K, p->k_off + s * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_K_FULL, s));
    if (v_ahead) {
        if (fj_ws_o_staged(p) == 2) producer_wait_o_free(k, l, l->round);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, s), empty_parity);
        producer_v(k, l, s, row);
    }
    fj_label(e, not_first);
    if (!v_ahead) {
        fj_comment(e, 2, "V(j) -> stage %d (one stage: its V empty waits for this warp's transpose of V(j - 1))", s);
        if (fj_ws_o_staged(p) == 2) producer_wait_o_free(k, l, l->round);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, s), empty_parity);
        producer_v(k, l, s, row);
    }
    fj_ws_kv_not_last(k, l, t, pr);
    fj_ins(e, "@!%s bra %s", R(pr), last);
    fj_comment(e, 2, "K(j + 1)%s -> stage %d%s", v_ahead ? " and V(j + 1)" : "", n,
               n == 0 ? ": the ring's next pass, the other parity" : "");
    fj_ins(e, "%s.s32 %s, %s, %d", p->kv_desc ? "sub" : "add", R(row), R(row), p->cfg.block_n);
    if (n == 0) fj_ins(e, "xor.b32 %s, %s, 1", R(t), R(empty_parity));
    fj_reg_t par = n == 0 ? t : empty_parity;
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_EMPTY, n), par);
    producer_kv(k, l, FJ_TMA_K, p->k_off + n * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_K_FULL, n));
    if (v_ahead) {
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, n), par);
        producer_v(k, l, n, row);
    }
    fj_label(e, last);
}

static void role_producer(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48];
    fj_reg_t pr = l->has_group_pred ? l->group_pred : fj_alloc(e, k->b_p, 1), not_phase = fj_alloc(e, k->b_r, 1), dst = fj_alloc(e, k->b_r, 1);
    const int what = FJ_WS_DECODE_ROWS | FJ_WS_DECODE_HEADS | FJ_WS_TILE_PRODUCER;
    fj_fp8_lanes ln = {.loader = 1};
    fj_reg_t lead = {0, 0};
    char skip[48], done_at[FJ_MAX_STAGES][48];
    /* (the frame has emitted the banner, the setmaxnreg and, with FP8, the branch of warps 1.. to the transposer) */
    if (p->fp8_vt4) {
        fj_comment(e, 1, "vt4: all of warp 0 stays; lane 0 issues the loads, then the warp transposes with warps 1-3");
        lead = fj_alloc(e, k->b_p, 1);
        fj_ins(e, "setp.eq.u32 %s, %s, 0", R(lead), R(k->tid));
        fj_fp8_emit_transpose_setup(k, &ln);
    } else {
        fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
        fj_ins(e, "@%s bra $L_exit", R(pr));
    }
    fj_ins(e, "mov.u64 %s, " FJ_FWD_PARAM_NAME, R(k->params));
    fj_ins(e, PTX_CVTA_PARAM, R(k->params), R(k->params));
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_ws_sched_start(k, l, what);
    if (p->vtail_bar) fj_ins(e, "mov.u32 %s, 0", R(l->vtail_par));
    fj_label_new(e, "prod_tile", top, sizeof top);
    fj_label_new(e, "prod_next", l->next_tile, sizeof l->next_tile);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "prod_stage", l->stage_label[s], sizeof l->stage_label[s]);
    ring_exit_labels(k, done_at);
    fj_ws_tile_loop_head(k, l, top, what, "$L_exit");
    if (p->variant & FJ_VARIANT_PAGED) fj_ins(e, "mov.u32 %s, -1", R(l->pg_idx)); /* a new sequence: no entry read */
    fj_comment(e, 1, "Q: %d rows from m0 into its buffer (rows past Nq arrive as zeros) once its last use is done",
               p->cfg.block_m);
    if (p->fp8_vt4) lead_begin(k, lead, skip, sizeof skip);
    fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(l->qpar));
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0), not_phase);
    fj_ws_publish_tile(k, l);
    if (p->variant & FJ_VARIANT_PACK) {
        fj_ins(e, "add.u32 %s, %s, %s", R(dst), R(k->smem), R(k->q_buf));
        producer_packed_q(k, l, dst);
    } else {
        fj_ins(e, PTX_MBAR_ARRIVE_EXPECT_TX, R(l->qbar), fj_ws_bar(p, FJ_BAR_Q_FULL, 0), p->q_bytes);
        fj_ins(e, "add.u32 %s, %s, %s", R(dst), R(k->smem), R(k->q_buf));
        if (p->variant & FJ_VARIANT_VARLEN) /* packed: rows past the sequence's end (all, past it) arrive as zeros */
            fj_emit_tma_boxes(k, FJ_TMA_Q, dst, p->q_off, p->cfg.block_m, k->q_tma_row, k->h, k->q_tma_seq, l->qbar,
                              fj_ws_bar(p, FJ_BAR_Q_FULL, 0));
        else
            fj_emit_tma_tile(k, FJ_TMA_Q, dst, p->q_off, p->cfg.block_m, k->m0, k->h, l->qbar,
                             fj_ws_bar(p, FJ_BAR_Q_FULL, 0));
    }
    if (p->fp8_vt4) fj_label(e, skip);
    fj_ws_first_kv_tile(k, l);
    if (fj_sm90_kv_prefetch(p)) producer_prefetch_first(k);
    fj_ws_ring_dispatch(k, l, l->stage_label);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j -> stage %d ----", s);
        fj_ws_kv_done(k, l, pr);
        kv_loop_exit(k, l, pr, s, done_at, l->next_tile);
        fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(k->phase));
        if (p->fp8_vt4) {
            lead_begin(k, lead, skip, sizeof skip);
            producer_tile_vt4(k, l, s, not_phase);
            fj_label(e, skip);
            transpose_stage(k, &ln, s, not_phase);
        } else producer_tile(k, l, s, not_phase);
        fj_ws_kv_next(k);
        fj_ws_ring_next_stage(k, s, l->stage_label);
    }
    ring_exits(k, l, done_at, l->next_tile);
    fj_label(e, l->next_tile);
    fj_ws_next_round(k, l, what);
    fj_ins(e, "bra.uni %s", top);
    fj_ws_tile_loop_end(k, l, what, "$L_exit");
}

/* FP8: the producer's warps 1..transpose_warps walk the work tiles and KV tiles as the loader does; per KV tile,
 * once V(j) is in stage s (V full) and the consumers have freed Vt's stage s (VT empty), they transpose it into
 * Vt (fp8_ws.c), make their writes visible to wgmma (fence.proxy.async), and every thread arrives on VT full[s]
 * and on V empty[s] (V's stage may be loaded again). */
static void role_transposer(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], next[48], stage[FJ_MAX_STAGES][48], done_at[FJ_MAX_STAGES][48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), not_phase = fj_alloc(e, k->b_r, 1);
    fj_fp8_lanes ln = {.loader = 0};
    fj_fp8_emit_transpose_setup(k, &ln);
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_ws_sched_start(k, l, FJ_WS_DECODE_ROWS); /* (varlen: the schedule's first round, as the loader's) */
    fj_label_new(e, "vt_tile", top, sizeof top);
    fj_label_new(e, "vt_next", next, sizeof next);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "vt_stage", stage[s], sizeof stage[s]);
    ring_exit_labels(k, done_at);
    fj_ws_tile_loop_head(k, l, top, FJ_WS_DECODE_ROWS, "$L_exit");
    fj_ws_first_kv_tile(k, l);
    fj_ws_ring_dispatch(k, l, stage);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, stage[s]);
        fj_ws_kv_done(k, l, pr);
        kv_loop_exit(k, l, pr, s, done_at, next);
        fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(k->phase));
        transpose_stage(k, &ln, s, not_phase);
        fj_ws_kv_next(k);
        fj_ws_ring_next_stage(k, s, stage);
    }
    ring_exits(k, l, done_at, next);
    fj_label(e, next);
    fj_ws_next_round(k, l, 0);
    fj_ins(e, "bra.uni %s", top);
}

/* ---- consumers ---------------------------------------------------------------------------------- */

/* Q is read by S = Q K^T only: once the work tile's last S (tile j = n_end - 1) has completed, lane 0 of
 * each warp frees Q, so the producer loads the next work tile's Q (and, behind it, that tile's first K/V)
 * under this tile's last softmax, last PV and epilogue instead of after them. A work tile with no KV tile
 * frees Q in the epilogue (role_consumers). */
static void release_q_if_last(fj_kctx *k, fj_ws_loop *l)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "q_kept", skip, sizeof skip);
    fj_comment(e, 1, "the work tile's last S done (%s): Q is free for the next work tile",
               k->p->kv_desc ? "j = the range's first" : "j + 1 = n_end");
    fj_ws_kv_not_last(k, l, t, pr);
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    fj_ws_q_barriers(k, l->round, t); /* not kept live across the loop: registers are tight with 3 warpgroups */
    fj_emit_mbar_arrive_at(k, t, fj_ws_bar(k->p, FJ_BAR_Q_EMPTY, 0), k->leader);
    fj_label(e, skip);
}

/* Mask (edge tiles only) and the online softmax of the S accumulators for tile j. */
static void consumer_softmax(fj_kctx *k, fj_reg_t mask_from)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    if (fj_softmax_split(k)) {
        fj_emit_softmax_split(k, pr, mask_from);
        return;
    }
    fj_emit_scores(k, pr, mask_from, NULL);
    fj_emit_softmax_rebase(k);
    fj_emit_softmax_exp(k);
}

/* Ping-pong turns (see emit_consumer). */
typedef struct turns {
    fj_reg_t my_bar, next_bar; /* u32: named barriers 1 + this warpgroup, 1 + the next */
    fj_reg_t pass;             /* pred: this turn is passed on (all but the last warpgroup's last turn) */
} turns;

static void turn_wait(fj_kctx *k, const turns *tn)
{
    if (k->p->pingpong) fj_ins(k->e, "bar.sync %s, %d", R(tn->my_bar), 32 * 4 * 2);
}

static void turn_pass(fj_kctx *k, const turns *tn, int last_of_tile)
{
    if (!k->p->pingpong) return;
    if (last_of_tile) fj_ins(k->e, "@%s bar.arrive %s, %d", R(tn->pass), R(tn->next_bar), 32 * 4 * 2);
    else fj_ins(k->e, "bar.arrive %s, %d", R(tn->next_bar), 32 * 4 * 2);
}

/* ---- one KV tile's steps, shared by the unrolled loops and the rolled ones -------------------------------------
 * A step addresses its stage through the frame's fj_ws_stage: an immediate stage of the ring (the unrolled loops)
 * or the stage in registers (the rolled loops, plan.roll_stages: its barrier block and descriptors from
 * fj_ws_ring_point). */

/* Serial schedule, KV tile j in stage st: S = QK^T, softmax, O += PV, each waited for before the next. */
static void serial_step(fj_kctx *k, fj_ws_loop *l, fj_ws_stage st)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_comment(e, 1, "wait for K(j); S = Q K^T; then the stage's K is free");
    fj_ws_stage_wait(k, st, FJ_BAR_K_FULL, k->phase);
    p->backend->mma_qk(k, st.slot);
    p->backend->async->mma_wait(k, 0);
    fj_ws_stage_release(k, st, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    consumer_softmax(k, l->mask_from);
    int early = p->fp8 && p->fp8_p_early; /* FP8: P packed before the wait for V (fp8_ws.h) */
    if (early) p->backend->pack_p(k);
    fj_comment(e, 1, "wait for V(j); O += P V; then the stage's V is free");
    fj_ws_stage_wait(k, st, FJ_BAR_PV_FULL(p), k->phase);
    if (!early) p->backend->pack_p(k);
    p->backend->mma_pv(k, st.slot, FJ_KEYS_ALL);
    p->backend->async->mma_wait(k, 0);
    fj_ws_stage_release(k, st, FJ_BAR_PV_EMPTY(p));
    fj_emit_softmax_weight_update(k, 0);
    fj_ws_kv_next(k);
}

/* Overlapped schedule, the work tile's first KV tile (in stage st): S, its softmax and P; O is still 0. */
static void overlap_first(fj_kctx *k, fj_ws_loop *l, const turns *tn, fj_ws_stage st)
{
    const fj_plan *p = k->p;
    fj_ws_stage_wait(k, st, FJ_BAR_K_FULL, k->phase);
    turn_wait(k, tn);
    p->backend->mma_qk(k, st.slot);
    turn_pass(k, tn, 0);
    p->backend->async->mma_wait(k, 0);
    fj_ws_stage_release(k, st, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    k->defer_o_rescale = 0;
    k->o_zero = 1; /* O is still 0: no rescale */
    consumer_softmax(k, l->mask_from);
    k->o_zero = 0;
    if (p->o_rescale_late) /* this softmax's rebase did not set it (o_zero): no rescale before the first PV */
        fj_ins(k->e, "setp.ne.u32 %s, 0, 0", R(k->rescale_pred));
    p->backend->pack_p(k);
    fj_ws_kv_next(k);
}

/* Overlapped schedule, KV tile j in stage s with tile j - 1's V in stage sp (its full barrier's parity vph): the
 * GEMMs' half - wait for K(j) and V(j - 1), issue S(j) = Q K(j)^T and O += P(j-1) V(j-1), wait for S(j) only. */
static void overlap_issue(fj_kctx *k, const turns *tn, fj_ws_stage s, fj_ws_stage sp, fj_reg_t vph)
{
    const fj_plan *p = k->p;
    fj_ws_stage_wait(k, s, FJ_BAR_K_FULL, k->phase);
    fj_ws_stage_wait(k, sp, FJ_BAR_PV_FULL(p), vph);
    turn_wait(k, tn);
    fj_comment(k->e, 1, "issue S(j) = Q K(j)^T, then O += P(j-1) V(j-1); wait for S(j) only");
    p->backend->mma_qk(k, s.slot);
    if (p->o_rescale_late) fj_emit_softmax_rescale_o(k); /* tile j - 1's rescale, under S(j) */
    p->backend->mma_pv(k, sp.slot, FJ_KEYS_ALL);
    turn_pass(k, tn, 0);
    p->backend->async->mma_wait(k, 1);
}

/* The softmax half: free K(j), S(j)'s softmax while PV(j-1) runs, wait for it, free V(j - 1), rescale O, pack P(j).
 * first: a predicate (bank -1: none) under which there is no tile j - 1 (the rolled loop's first KV tile of a work
 * tile, which issued S alone and waited for it): V(j - 1) is not released. O is still 0 then; the deferred rescale
 * multiplies it by c, and 0 x c = 0 (c is 2^-inf = 0 or finite: softmax.c's rebase). */
static void overlap_finish(fj_kctx *k, fj_ws_loop *l, fj_ws_stage s, fj_ws_stage sp, fj_reg_t first)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char no_v[48];
    fj_ws_stage_release(k, s, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    k->defer_o_rescale = 1;
    consumer_softmax(k, l->mask_from);
    /* FP8: P(j) packed before the wait (fp8_ws.h), in the unrolled loop only. In the rolled one ptxas 13.0 gave the
     * early P the registers of P(j-1), which the PV in flight still reads (D256 ov: F2FP into the QGMMA's A registers
     * ahead of its DEPBAR; scattered NaN rows on the H200, session 24; tests/test_sass_hazard). The serial loop packs
     * early rolled too: its PV has been waited for by then. */
    fj_reg_t early = {-1, 0};
    if (p->fp8 && p->fp8_p_early && !p->roll_stages) early = fj_fp8_emit_pack_p_early(k);
    fj_comment(e, 1, "PV(j-1) done: its V stage is free, O may be rescaled and P(j) packed");
    /* one wait for the whole warpgroup before the branch on the rescale vote: the vote is per warp, and
     * wgmma.wait_group is .aligned (every warp of the warpgroup at the same instruction). Waiting in each
     * arm instead let ptxas keep the ex2 block ahead of the wait, but compute-sanitizer synccheck reported
     * it ("mismatching warpgroup instruction pc between warps"), and it measured within +-1% on the H200 */
    p->backend->async->mma_wait(k, 0);
    if (first.bank >= 0) {
        fj_label_new(e, "no_v_release", no_v, sizeof no_v);
        fj_ins(e, "@%s bra.uni %s", R(first), no_v);
    }
    fj_ws_stage_release(k, sp, FJ_BAR_PV_EMPTY(p));
    if (first.bank >= 0) fj_label(e, no_v);
    if (!p->o_rescale_late) fj_emit_softmax_rescale_o(k); /* else before the next PV (overlap_issue, _last_pv) */
    k->defer_o_rescale = 0;
    if (early.bank >= 0) fj_fp8_emit_pack_p_take(k, early);
    else p->backend->pack_p(k);
    fj_emit_softmax_weight_update(k, 1);
    fj_ws_kv_next(k);
}

/* Overlapped schedule, KV tile j in stage s with tile j - 1's V in stage sp (its full barrier's parity vph). */
static void overlap_step(fj_kctx *k, fj_ws_loop *l, const turns *tn, fj_ws_stage s, fj_ws_stage sp, fj_reg_t vph)
{
    fj_reg_t none = {-1, 0};
    overlap_issue(k, tn, s, sp, vph);
    overlap_finish(k, l, s, sp, none);
}

/* Overlapped schedule, after the last KV tile: its PV (V in stage sp, parity vph). */
static void overlap_last_pv(fj_kctx *k, const turns *tn, fj_ws_stage sp, fj_reg_t vph)
{
    const fj_plan *p = k->p;
    fj_ws_stage_wait(k, sp, FJ_BAR_PV_FULL(p), vph);
    if (p->o_rescale_late) fj_emit_softmax_rescale_o(k); /* the last tile's rescale: no S to hide it under */
    turn_wait(k, tn);
    p->backend->mma_pv(k, sp.slot, FJ_KEYS_ALL);
    turn_pass(k, tn, 1);
    p->backend->async->mma_wait(k, 0);
    fj_ws_stage_release(k, sp, FJ_BAR_PV_EMPTY(p));
}

/* ---- the unrolled loops: one body per stage of the ring ------------------------------------------- */

/* Serial schedule: per KV tile S = QK^T, softmax, O += PV, each waited for before the next. */
static void consumer_loop_serial(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_ws_ring_dispatch(k, l, l->stage_label);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j in stage %d ----", s);
        fj_ws_kv_done(k, l, pr);
        fj_ins(e, "@%s mov.u32 %s, %d", R(pr), R(l->ring), s);
        fj_ins(e, "@%s bra.uni %s", R(pr), l->next_tile);
        serial_step(k, l, fj_ws_stage_imm(s));
        fj_ws_ring_next_stage(k, s, l->stage_label);
    }
}

/* Overlapped schedule (FlashAttention-3, Algorithm 2): the work tile's first KV tile - in stage s0, the
 * ring's current one - gets S and its softmax and P first (one prologue per stage, reached by the
 * dispatch); then the body of stage s issues S(j) = Q K(j)^T and O += P(j-1) V(j-1) (V in the stage
 * before), waits for S(j) only, exponentiates it while the PV product runs, waits for that, rescales O
 * when the softmax says so and packs P(j). The loop leaves through one tail per stage, which runs the
 * last PV. */
static void consumer_loop_overlap(fj_kctx *k, fj_ws_loop *l, const turns *tn)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int stages = p->cfg.stages;
    char pro[FJ_MAX_STAGES][48], tail[FJ_MAX_STAGES][48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), vph = fj_alloc(e, k->b_r, 1);
    for (int s = 0; s < stages; s++) {
        fj_label_new(e, "kv_first", pro[s], sizeof pro[s]);
        fj_label_new(e, "kv_tail", tail[s], sizeof tail[s]);
    }
    fj_ws_ring_dispatch(k, l, pro);
    for (int s = 0; s < stages; s++) {
        fj_label(e, pro[s]);
        fj_comment(e, 1, "first KV tile of the work tile, in stage %d: S, its softmax and P", s);
        overlap_first(k, l, tn, fj_ws_stage_imm(s));
        if (s + 1 < stages) fj_ins(e, "bra.uni %s", l->stage_label[s + 1]);
        else fj_ws_ring_next_stage(k, s, l->stage_label);
    }
    for (int s = 0; s < stages; s++) {
        int sp = (s + stages - 1) % stages;
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j in stage %d; PV of tile j - 1 from stage %d ----", s, sp);
        if (s == 0) fj_ins(e, "xor.b32 %s, %s, 1", R(vph), R(k->phase)); /* tile j - 1 was the last pass's */
        else fj_ins(e, "mov.u32 %s, %s", R(vph), R(k->phase));
        fj_ws_kv_done(k, l, pr);
        fj_ins(e, "@%s bra.uni %s", R(pr), tail[sp]);
        overlap_step(k, l, tn, fj_ws_stage_imm(s), fj_ws_stage_imm(sp), vph);
        fj_ws_ring_next_stage(k, s, l->stage_label);
    }
    for (int sp = 0; sp < stages; sp++) {
        fj_label(e, tail[sp]);
        fj_comment(e, 1, "last KV tile: its V is in stage %d; the ring goes on at stage %d", sp, (sp + 1) % stages);
        overlap_last_pv(k, tn, fj_ws_stage_imm(sp), vph);
        fj_ins(e, "mov.u32 %s, %d", R(l->ring), (sp + 1) % stages);
        fj_ins(e, "bra.uni %s", l->next_tile);
    }
}

/* ---- the rolled loops (plan.roll_stages, config roll = 1): one body for every stage (ws_frame.h) ------------- */

/* consumer_loop_serial, rolled. */
static void consumer_loop_serial_rolled(fj_kctx *k, fj_ws_loop *l)
{
    fj_emit *e = k->e;
    char body[48];
    fj_ws_ring_regs rr = fj_ws_ring_regs_alloc(k);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "kv_ring", body, sizeof body);
    fj_label(e, body);
    fj_comment(e, 1, "---- KV tile j in stage ring (rolled: one body for every stage) ----");
    fj_ws_kv_done(k, l, pr);
    fj_ins(e, "@%s bra.uni %s", R(pr), l->next_tile);
    fj_ws_ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    fj_ins(e, "mov.b64 %s, %s", R(k->ring_desc_v), R(k->ring_desc_k));
    serial_step(k, l, fj_ws_stage_ring(rr.bar_s));
    fj_ws_ring_advance(k, l, &rr);
    fj_ins(e, "bra.uni %s", body);
}

/* What the cross-tile tail needs from role_consumers: the loop head's decode flags, the ping-pong pass predicate's
 * inputs. */
typedef struct xt_ctx {
    int what;
    fj_reg_t not_last_wg;
    fj_reg_t waited; /* pred, lpt: the next round's Q was waited for by a tail that found no next tile to overlap */
} xt_ctx;

static void epilogue_body(fj_kctx *k, fj_ws_loop *l);
static void tile_begin(fj_kctx *k, fj_ws_loop *l, const turns *tn, const xt_ctx *x, int q_ready);

/* Cross-tile overlap (fj_sm90_cross_tile), in the rolled loop's tail: V of this work tile's last KV tile is in stage
 * rr->sp (its full barrier's parity vph) and the next KV tile of the ring, the next work tile's first, goes to stage
 * l->ring. When the CTA has a next work tile with KV tiles: find and decode it and wait for its Q and first K (every
 * spin loop before a wgmma is in flight), then issue this tile's last PV and the next tile's S = Q K^T in one
 * ping-pong turn, wait for the PV only, run this tile's epilogue and the next tile's decode while the S runs
 * (branch-free: a divergent branch under an MMA in flight makes ptxas serialize every wgmma, C7518), wait for it,
 * set up the next tile (O, m, l, j) and join the body's softmax half as its first KV tile. Else fall through to the
 * plain tail, the tile's state restored. */
static void xt_tail(fj_kctx *k, fj_ws_loop *l, const turns *tn, const fj_ws_ring_regs *rr, fj_reg_t vph,
                    fj_reg_t first, const char *half, const xt_ctx *x)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char none[48];
    fj_reg_t cur = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "xt_none", none, sizeof none);
    fj_comment(e, 1, "cross-tile: the next work tile's first S = Q K^T goes in with this tile's last PV, and this "
                     "tile's epilogue runs under it");
    fj_ins(e, "mov.u32 %s, %s", R(cur), R(l->tile));
    fj_ins(e, "add.u32 %s, %s, 1", R(l->round), R(l->round));
    fj_ws_round_tile(k, l, NULL, x->what, none, NULL);
    fj_ins(e, "setp.le.s32 %s, %s, 0", R(pr), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), none);
    fj_ws_wait_q(k, l);
    p->backend->async->tile_start(k);
    fj_ws_ring_point(k, l->ring, rr->bar_s, k->ring_desc_k);
    fj_ws_stage_wait(k, fj_ws_stage_ring(rr->bar_s), FJ_BAR_K_FULL, k->phase);
    fj_ws_stage_wait(k, fj_ws_stage_ring(rr->bar_sp), FJ_BAR_PV_FULL(p), vph);
    turn_wait(k, tn);
    fj_comment(e, 1, "this tile's last O += P V, then the next tile's S = Q K^T; wait for the PV only");
    p->backend->mma_pv(k, FJ_SLOT_RING, FJ_KEYS_ALL);
    p->backend->mma_qk(k, FJ_SLOT_RING);
    turn_pass(k, tn, 0);
    p->backend->async->mma_wait(k, 1);
    fj_ws_stage_release(k, fj_ws_stage_ring(rr->bar_sp), FJ_BAR_PV_EMPTY(p));
    fj_comment(e, 1, "this tile's epilogue (its round again), under the next tile's S");
    fj_ins(e, "sub.u32 %s, %s, 1", R(l->round), R(l->round));
    epilogue_body(k, l);
    fj_comment(e, 1, "the next tile: its decode again, O = 0, then its first KV tile's softmax half");
    fj_ws_tile_again(k, l);
    fj_ws_decode_tile(k, l, x->what);
    fj_comment(e, 2, "(the S waited for before O = 0: ptxas serializes every wgmma when an accumulator is set while one "
                     "is in flight, C7515)");
    p->backend->async->mma_wait(k, 0);
    tile_begin(k, l, tn, x, 1);
    fj_ins(e, "setp.eq.u32 %s, 0, 0", R(first));
    fj_ins(e, "bra.uni %s", half);
    fj_label(e, none);
    fj_comment(e, 1, "no next work tile with KV tiles: this one's state again, then the plain tail%s",
               p->lpt ? " (the loop head then skips its wait for the next round's Q: done here)" : "");
    if (p->lpt) fj_ins(e, "setp.eq.u32 %s, 0, 0", R(x->waited));
    fj_ins(e, "sub.u32 %s, %s, 1", R(l->round), R(l->round));
    fj_ins(e, "mov.u32 %s, %s", R(l->tile), R(cur));
    fj_ws_decode_tile(k, l, x->what);
}

/* consumer_loop_overlap, rolled: one body, one tail. The work tile's first KV tile issues S alone, waits for it and
 * joins the body at its softmax half (overlap_finish with `first` set: no V of tile j - 1 to free), so the softmax
 * is written once. */
static void consumer_loop_overlap_rolled(fj_kctx *k, fj_ws_loop *l, const turns *tn, const xt_ctx *x)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char body[48], half[48], tail[48];
    fj_ws_ring_regs rr = fj_ws_ring_regs_alloc(k);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), vph = fj_alloc(e, k->b_r, 1), first = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "kv_ring", body, sizeof body);
    fj_label_new(e, "kv_softmax", half, sizeof half);
    fj_label_new(e, "kv_tail", tail, sizeof tail);
    fj_comment(e, 1, "first KV tile of the work tile, in stage ring: S alone, then the body's softmax half");
    fj_ws_ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    fj_ws_stage_wait(k, fj_ws_stage_ring(rr.bar_s), FJ_BAR_K_FULL, k->phase);
    turn_wait(k, tn);
    p->backend->mma_qk(k, FJ_SLOT_RING);
    turn_pass(k, tn, 0);
    p->backend->async->mma_wait(k, 0);
    fj_ins(e, "setp.eq.u32 %s, 0, 0", R(first));
    fj_ins(e, "bra.uni %s", half);
    fj_label(e, body);
    fj_comment(e, 1, "---- KV tile j in stage ring; PV of tile j - 1 from stage sp (rolled: one body for every stage) ----");
    fj_comment(e, 1, "tile j - 1's V phase: the last pass's when j is in stage 0");
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(pr), R(l->ring));
    fj_ins(e, "xor.b32 %s, %s, 1", R(vph), R(k->phase));
    fj_ins(e, "selp.b32 %s, %s, %s, %s", R(vph), R(vph), R(k->phase), R(pr));
    fj_ws_kv_done(k, l, pr);
    fj_ins(e, "@%s bra.uni %s", R(pr), tail);
    fj_ws_ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    fj_ws_ring_point(k, rr.sp, rr.bar_sp, k->ring_desc_v);
    overlap_issue(k, tn, fj_ws_stage_ring(rr.bar_s), fj_ws_stage_ring(rr.bar_sp), vph);
    fj_ins(e, "setp.ne.u32 %s, 0, 0", R(first));
    fj_label(e, half);
    overlap_finish(k, l, fj_ws_stage_ring(rr.bar_s), fj_ws_stage_ring(rr.bar_sp), first);
    fj_ws_ring_advance(k, l, &rr);
    fj_ins(e, "bra.uni %s", body);
    fj_label(e, tail);
    fj_comment(e, 1, "last KV tile: its V is in stage sp; the ring goes on at stage ring");
    fj_ws_ring_point(k, rr.sp, rr.bar_sp, k->ring_desc_v);
    if (fj_sm90_cross_tile(p)) xt_tail(k, l, tn, &rr, vph, first, half, x);
    overlap_last_pv(k, tn, fj_ws_stage_ring(rr.bar_sp), vph);
    fj_ins(e, "bra.uni %s", l->next_tile);
}

static void role_consumers(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], epi[48];
    turns tn = {fj_alloc(e, k->b_r, 1), fj_alloc(e, k->b_r, 1), fj_alloc(e, k->b_p, 1)};
    fj_reg_t t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1), not_last_wg = fj_alloc(e, k->b_p, 1);
    /* the heads in the loop head only for ALiBi (its slope); else in the epilogue, not live across the KV loop.
     * Ping-pong: l->last, whether this is the CTA's last tile (its last turn is passed to nobody). */
    const int what = FJ_WS_DECODE_ROWS | (p->cfg.mods & FAJIT_MOD_ALIBI ? FJ_WS_DECODE_HEADS : 0) |
                     (p->pingpong ? FJ_WS_TILE_LAST : 0);
    p->backend->setup(k);
    fj_ins(e, "and.b32 %s, %s, 31", R(t), R(k->tid));
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(k->leader), R(t));
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_ws_sched_start(k, l, what);
    if (p->pingpong) {
        fj_comment(e, 1, "ping-pong: warpgroup c issues its GEMMs after bar.sync %d + c and then lets the next one go "
                         "(bar.arrive on its barrier); the last warpgroup lets warpgroup 0 start, and passes its last "
                         "turn of its last work tile to nobody",
                   FJ_PINGPONG_BAR0);
        fj_ins(e, "add.u32 %s, %s, %d", R(tn.my_bar), R(k->wg), FJ_PINGPONG_BAR0);
        fj_ins(e, "add.u32 %s, %s, 1", R(t), R(k->wg));
        fj_ins(e, "rem.u32 %s, %s, %d", R(t), R(t), p->consumer_wgs);
        fj_ins(e, "add.u32 %s, %s, %d", R(tn.next_bar), R(t), FJ_PINGPONG_BAR0);
        fj_ins(e, "setp.ne.u32 %s, %s, %d", R(not_last_wg), R(k->wg), p->consumer_wgs - 1);
        if (!fj_ws_sched_static(p)) /* which tile is the last is known only when the producer finds none */
            fj_comment(e, 1, "lpt: the last warpgroup always lets warpgroup 0 start and passes every turn; warpgroup 0 "
                             "takes the pass nobody used when it leaves");
        fj_ws_cta_has_tile(k, l, t, pr);
        fj_ins(e, "@%s bra.uni $L_no_first_turn", R(not_last_wg));
        fj_ins(e, "@%s bar.arrive %d, %d", R(pr), FJ_PINGPONG_BAR0, 32 * 4 * 2);
        fj_label(e, "$L_no_first_turn");
    }
    fj_label_new(e, "tile", top, sizeof top);
    fj_label_new(e, "epilogue", epi, sizeof epi);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "kv_stage", l->stage_label[s], sizeof l->stage_label[s]);
    memcpy(l->next_tile, epi, sizeof epi);
    char waited[48] = "";
    fj_reg_t xt_waited = {-1, 0};
    if (fj_sm90_cross_tile(p) && p->lpt) {
        xt_waited = fj_alloc(e, k->b_p, 1);
        fj_label_new(e, "tile_q_waited", waited, sizeof waited);
        fj_ins(e, "setp.ne.u32 %s, 0, 0", R(xt_waited));
    }
    fj_ws_round_tile(k, l, top, what, "$L_consumer_exit", waited[0] ? waited : NULL);
    if (xt_waited.bank >= 0) fj_ins(e, "setp.ne.u32 %s, 0, 0", R(xt_waited));
    fj_emit_mods_start(k, k->h, k->b);
    if (p->fp8) {
        fj_ws_decode_tile(k, l, FJ_WS_DECODE_HEADS);
        fj_fp8_emit_score_scale(k);
    }
    xt_ctx x = {what, not_last_wg, xt_waited};
    tile_begin(k, l, &tn, &x, 0);
    fj_ins(e, "setp.le.s32 %s, %s, 0", R(pr), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), epi);
    k->kv_end = l->n_end, k->has_kv_end = 1;
    if (p->roll_stages && p->overlap) consumer_loop_overlap_rolled(k, l, &tn, &x);
    else if (p->roll_stages) consumer_loop_serial_rolled(k, l);
    else if (p->overlap) consumer_loop_overlap(k, l, &tn);
    else consumer_loop_serial(k, l);
    fj_label(e, epi);
    fj_banner(e, "Consumer epilogue",
              "Reduce l over the lanes sharing a row, scale O by 1/l, write LSE, store O (rows past Nq\n"
              "skipped). Then the next work tile. (Q was freed after the tile's last S = QK^T.)");
    fj_comment(e, 1, "a work tile with no KV tile frees Q here (the others did after their last S)");
    fj_ins(e, "setp.le.and.s32 %s, %s, 0, %s", R(pr), R(l->n_end), R(k->leader));
    fj_ws_q_barriers(k, l->round, t);
    fj_emit_mbar_arrive_at(k, t, fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0), pr);
    epilogue_body(k, l);
    if (xt_waited.bank >= 0) fj_ins(e, "@%s bra.uni %s", R(xt_waited), waited);
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, "$L_consumer_exit");
    if (!fj_ws_sched_static(p) && p->pingpong) {
        fj_ins(e, "setp.eq.u32 %s, %s, 0", R(pr), R(k->wg));
        fj_ins(e, "@%s bar.sync %d, %d", R(pr), FJ_PINGPONG_BAR0, 32 * 4 * 2);
    }
    p->backend->async->finish(k);
    fj_ins(e, "bra.uni $L_exit");
}

/* A work tile's start, after its decode: the ping-pong pass predicate, the Q descriptor, O = 0, m = -inf, l = 0, its
 * Q (a static schedule's wait), j = its first KV tile. q_ready: the cross-tile tail set the Q descriptor and waited
 * for Q before its S already. */
static void tile_begin(fj_kctx *k, fj_ws_loop *l, const turns *tn, const xt_ctx *x, int q_ready)
{
    const fj_plan *p = k->p;
    if (p->pingpong) fj_ins(k->e, "or.pred %s, %s, !%s", R(tn->pass), R(x->not_last_wg), R(l->last));
    if (!q_ready) p->backend->async->tile_start(k);
    fj_emit_init_accumulators(k);
    if (!q_ready) fj_ws_wait_q(k, l);
    fj_ws_first_kv_tile(k, l);
}

/* A work tile's epilogue: its head and batch again (not kept live across the KV loop; cross-tile: its rows too, which
 * the next tile's decode overwrote), O / l, LSE, O stored; then the next round. */
static void epilogue_body(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_comment(k->e, 1, "the work tile, its head and batch again (not kept live across the KV loop)");
    fj_ws_tile_again(k, l);
    fj_ws_decode_tile(k, l, FJ_WS_DECODE_HEADS | (fj_sm90_cross_tile(p) ? FJ_WS_DECODE_ROWS : 0));
    if (p->fp8) fj_fp8_emit_o_scale(k);
    fj_emit_epilogue(k);
    fj_ws_next_round(k, l, p->pingpong ? FJ_WS_TILE_LAST : 0);
}

void fj_sm90_role_body(fj_kctx *k, fj_ws_loop *l, const fj_role *r)
{
    switch (r->kind) {
    case FJ_ROLE_LOAD: role_producer(k, l); return;
    case FJ_ROLE_TRANSPOSE: role_transposer(k, l); return;
    case FJ_ROLE_SOFTMAX: role_consumers(k, l); return;
    default: fj_emit_error(k->e, "sm_90a: no body for role %s (kind %d)", r->name, r->kind);
    }
}
