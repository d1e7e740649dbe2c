/*
 * fwd_kernel.c - the forward-attention kernel skeleton of the sm_80 path: every warp loads and computes.
 *
 *   parameters -> block indices and tile pointers -> KV range (causal bounds, which tiles need a
 *   mask) -> start Q copy -> pipeline prologue -> main loop over KV tiles:
 *       wait for tile j, prefetch tile j + stages - 1, S = QK^T, score hook, mask (edge tiles only),
 *       online softmax, O += PV
 *   -> epilogue (1/l, LSE) -> store O.
 * The arch-specific steps are calls through fj_backend and its sync protocol (backend.h); the algorithm lives here.
 * The setup and epilogue pieces it shares with the warp-specialized frame are kernel_common.c's.
 */
#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "kv8.h"
#include "mask.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"
#include "seqlen.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) FJ_DEC_OFF(k, field)

/* Per-sequence lengths: seqlen_k (already in k->seqlen_k) becomes this sequence's length for the KV range. */
static void emit_seq_len(fj_kctx *k, fj_reg_t b)
{
    fj_comment(k->e, 1, "per-sequence KV length: seqlens_k[b], clamped to [0, seqlen_k]");
    fj_emit_seq_len(k, b, k->seqlen_k, k->seqlen_k);
}


/* Paged K/V: pg = j / page_size (j >> page_shift for a power-of-two page) and j (u32) = j mod page_size,
 * the key's row in its page; k->page_split_how may name the way when the caller has branched already. */
static void page_split(fj_kctx *k, fj_reg_t j, fj_reg_t pg)
{
    fj_reg_t ps = fj_param_s32(k, DOFF(page_size)), sh = fj_param_s32(k, DOFF(page_shift));
    if (k->page_split_how == FJ_PAGE_SPLIT_DIV) {
        fj_ins(k->e, "div.u32 %s, %s, %s", R(pg), R(j), R(ps));
    } else if (k->page_split_how == FJ_PAGE_SPLIT_SHIFT) {
        fj_ins(k->e, "shr.u32 %s, %s, %s", R(pg), R(j), R(sh));
    } else {
        fj_reg_t pow2 = fj_alloc(k->e, k->b_p, 1);
        fj_ins(k->e, "setp.ne.u32 %s, %s, 0", R(pow2), R(sh));
        if (k->p->variant & FJ_VARIANT_AHEAD) { /* a branch: predicated, ptxas runs the division always */
            char shift[48], done[48];
            fj_label_new(k->e, "page_shift", shift, sizeof shift);
            fj_label_new(k->e, "page_split", done, sizeof done);
            fj_ins(k->e, "@%s bra.uni %s", R(pow2), shift);
            fj_ins(k->e, "div.u32 %s, %s, %s", R(pg), R(j), R(ps));
            fj_ins(k->e, "bra.uni %s", done);
            fj_label(k->e, shift);
            fj_ins(k->e, "shr.u32 %s, %s, %s", R(pg), R(j), R(sh));
            fj_label(k->e, done);
        } else {
            fj_ins(k->e, "@%s shr.u32 %s, %s, %s", R(pow2), R(pg), R(j), R(sh));
            fj_ins(k->e, "@!%s div.u32 %s, %s, %s", R(pow2), R(pg), R(j), R(ps));
        }
    }
    fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(ps), R(pg), R(ps));
    fj_ins(k->e, "sub.u32 %s, %s, %s", R(j), R(j), R(ps));
}

/* Paged K/V: phys = block_table[b][j / page_size] (under pred when use_pred), j (clobbered) = j mod
 * page_size. b is worked out again from %ctaid at each use (kept live across the loop, it makes the
 * d128 128-row tiles spill); AHEAD keeps the sequence's block-table row (k->page_tab) instead. */
static void page_lookup(fj_kctx *k, fj_reg_t j, fj_reg_t phys, int use_pred, fj_reg_t pred)
{
    fj_reg_t pg = fj_alloc(k->e, k->b_r, 1), a = fj_alloc(k->e, k->b_rd, 1), b = fj_alloc(k->e, k->b_r, 1);
    if (k->p->variant & FJ_VARIANT_AHEAD) {
        page_split(k, j, pg);
        fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(a), R(pg));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(k->page_tab));
    } else {
        fj_emit_batch(k, b, 0);
        page_split(k, j, pg);
        {
            fj_reg_t prm = fj_param_s32(k, DOFF(max_pages));
            fj_ins(k->e, "mad.lo.u32 %s, %s, %s, %s", R(pg), R(b), R(prm), R(pg));
        }
        fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(a), R(pg));
        {
            fj_reg_t prm = fj_param_u64(k, DOFF(block_table));
            fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(prm));
        }
    }
    if (use_pred) fj_ins(k->e, "@%s ld.global.nc.u32 %s, [%s]", R(pred), R(phys), R(a));
    else fj_ins(k->e, "ld.global.nc.u32 %s, [%s]", R(phys), R(a));
}

/* AHEAD: out = k->page_base (K and V at the CTA's KV head; gathered, plus the thread's column bytes) + phys x
 * page stride + row x row stride. The page stride is in elements: phys is doubled in 32 bits (block-table
 * entries are int32 >= 0, so 2 x phys < 2^32), which lets each pointer be two 64-bit multiply-adds of 32-bit
 * operands (IMAD.WIDE.U32 + IMAD each) with no 64-bit shift. */
static void page_row_ptrs_kept(fj_kctx *k, fj_reg_t phys, fj_reg_t row, const fj_reg_t out[2])
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), t = fj_alloc(k->e, k->b_rd, 1), r = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t p2 = fj_alloc(k->e, k->b_r, 1);
    const int stride_off[2] = {OFF(k_stride), OFF(v_stride)}, row_off[2] = {OFF(k_row_bytes), OFF(v_row_bytes)};
    if (k->p->kv8) fj_ins(k->e, "mov.u32 %s, %s", R(p2), R(phys)); /* FP8 K/V: 1-byte elements */
    else fj_ins(k->e, "shl.b32 %s, %s, 1", R(p2), R(phys));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(p2));
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(r), R(row));
    for (int x = 0; x < 2; x++) {
        {
            fj_reg_t prm = fj_param_u64(k, stride_off[x]);
            fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(a), R(t), R(prm), R(fj_at(k->page_base, x)));
        }
        {
            fj_reg_t prm = fj_param_u64(k, row_off[x]);
            fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(out[x]), R(r), R(prm), R(a));
        }
    }
}

/* Paged K/V: out = base + hkv x head stride + phys x page stride + row x row stride (bytes) for row `row`
 * of pool page phys. The KV head is worked out again from %ctaid (see page_lookup). */
static void page_row_ptrs(fj_kctx *k, fj_reg_t phys, fj_reg_t row, const fj_reg_t out[2])
{
    if (k->p->variant & FJ_VARIANT_AHEAD) {
        page_row_ptrs_kept(k, phys, row, out);
        return;
    }
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1), t = fj_alloc(k->e, k->b_rd, 1), hkv = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mov.u32 %s, %%ctaid.y", R(hkv));
    if (!(k->p->variant & FJ_VARIANT_PACK)) {
        fj_reg_t prm = fj_param_s32(k, OFF(group));
        fj_ins(k->e, "div.u32 %s, %s, %s", R(hkv), R(hkv), R(prm));
    }
    const int ptr_off[2] = {OFF(k), OFF(v)}, stride_off[2] = {OFF(k_stride), OFF(v_stride)};
    const int row_off[2] = {OFF(k_row_bytes), OFF(v_row_bytes)};
    for (int x = 0; x < 2; x++) {
        fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(phys));
        {
            fj_reg_t prm = fj_param_u64(k, stride_off[x]);
            fj_ins(k->e, "mul.lo.s64 %s, %s, %s", R(a), R(t), R(prm));
        }
        fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(hkv));
        {
            fj_reg_t prm = fj_param_u64(k, stride_off[x] + 8);
            fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(a), R(t), R(prm), R(a));
        }
        if (!k->p->kv8) fj_ins(k->e, "shl.b64 %s, %s, 1", R(a), R(a)); /* FP8 K/V: 1-byte elements */
        fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(row));
        {
            fj_reg_t prm = fj_param_u64(k, row_off[x]);
            fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(a), R(t), R(prm), R(a));
        }
        {
            fj_reg_t prm = fj_param_u64(k, ptr_off[x]);
            fj_ins(k->e, "add.u64 %s, %s, %s", R(out[x]), R(a), R(prm));
        }
    }
}

int fj_paged_seg_passes(const fj_plan *p)
{
    int rpp = p->copy_rows_per_pass;
    return rpp < 16 ? 16 / rpp : 1;
}

int fj_paged_lookups(const fj_plan *p)
{
    if (!(p->variant & FJ_VARIANT_GATHER)) return 1;
    int passes = p->cfg.block_n / p->copy_rows_per_pass, sp = fj_paged_seg_passes(p);
    return passes > sp ? (passes + sp - 1) / sp : 1;
}

/* Paged K/V: k_ptr / v_ptr at the tile's first key (a tile never straddles pages: page_size is a multiple
 * of block_n). */
static void paged_tile_ptrs(fj_kctx *k, fj_reg_t tile)
{
    fj_reg_t j = fj_alloc(k->e, k->b_r, 1);
    const fj_reg_t out[2] = {k->k_ptr, k->v_ptr};
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(j), R(tile), k->p->cfg.block_n);
    fj_emit_paged_key_ptrs(k, j, 0, out);
}

void fj_emit_paged_key_ptrs(fj_kctx *k, fj_reg_t key, int lookup, const fj_reg_t out[2])
{
    if ((k->p->variant & FJ_VARIANT_AHEAD) && !k->page_sync) {
        fj_reg_t pg = fj_alloc(k->e, k->b_r, 1);
        fj_comment(k->e, 1, "paged K/V: the key's page as read a tile ahead, its row j mod page_size");
        page_split(k, key, pg);
        page_row_ptrs(k, fj_at(k->page_next, lookup), key, out);
        return;
    }
    fj_reg_t phys = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "paged K/V: the key's page from block_table[b][j / page_size], its row j mod page_size");
    page_lookup(k, key, phys, 0, phys);
    page_row_ptrs(k, phys, key, out);
}

void fj_emit_paged_seg_ptrs(fj_kctx *k, int lookup, const fj_reg_t out[2])
{
    fj_comment(k->e, 1, "paged K/V gathered: the segment's page and row in it, both worked out a tile ahead");
    page_row_ptrs_kept(k, fj_at(k->page_next, lookup), fj_at(k->page_row, lookup), out);
}

void fj_emit_paged_key_page(fj_kctx *k, fj_reg_t key, int lookup)
{
    page_lookup(k, key, fj_at(k->page_next, lookup), 1, k->page_more);
}

/* AHEAD: what every page lookup of the CTA shares, kept in registers across the loop (recomputed per
 * lookup it was two divisions and a 64-bit multiply-add per K and V on the copies' path): page_tab =
 * &block_table[b][0], page_base = K and V at KV head hkv (page 0, row 0). */
static void paged_kept(fj_kctx *k, fj_reg_t b, fj_reg_t hkv, fj_reg_t zero)
{
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    k->page_tab = fj_alloc(k->e, k->b_rd, 1);
    k->page_base = fj_alloc(k->e, k->b_rd, 2);
    fj_comment(k->e, 1, "paged K/V, pages read ahead: the sequence's block-table row and K/V at the KV head, kept");
    {
        fj_reg_t prm = fj_param_s32(k, DOFF(max_pages));
        fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(t), R(b), R(prm));
    }
    fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(k->page_tab), R(t));
    {
        fj_reg_t prm = fj_param_u64(k, DOFF(block_table));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(k->page_tab), R(k->page_tab), R(prm));
    }
    fj_emit_tensor_ptr(k, OFF(k), OFF(k_stride), zero, hkv, zero, fj_at(k->page_base, 0));
    fj_emit_tensor_ptr(k, OFF(v), OFF(v_stride), zero, hkv, zero, fj_at(k->page_base, 1));
}

static void emit_indices(fj_kctx *k)
{
    fj_emit *e = k->e;
    fj_banner(e, "Phase 0: block indices and tile pointers",
              "grid = (ceil(Nq / block_m), Hq, B); one CTA computes block_m query rows of one head.\n"
              "GQA: query head h reads KV head h / (Hq / Hkv).\n"
              "Causal CTAs run in reverse order so the longest rows start first.");
    fj_reg_t h = fj_alloc(e, k->b_r, 1), b = fj_alloc(e, k->b_r, 1);
    fj_reg_t hkv = fj_alloc(e, k->b_r, 1), grp = fj_alloc(e, k->b_r, 1), zero = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "mov.u32 %s, %%tid.x", R(k->tid));
    fj_ins(e, "shr.u32 %s, %s, 5", R(k->warp), R(k->tid));
    fj_ins(e, "and.b32 %s, %s, 31", R(k->lane), R(k->tid));
    fj_emit_m0(k);
    fj_ins(e, "mov.u32 %s, %%ctaid.y", R(h));
    fj_emit_batch(k, b, 1);
    fj_reg_t q_row = k->m0, k_row = zero, nb = b;
    if (k->p->variant & FJ_VARIANT_VARLEN) { /* packed rows: sequence b's from its cu_seqlens entries */
        q_row = fj_alloc(e, k->b_r, 1), k_row = fj_alloc(e, k->b_r, 1);
        fj_seqlen_cta(k, b, q_row, k_row);
        fj_ins(e, "add.s32 %s, %s, %s", R(q_row), R(q_row), R(k->m0));
        nb = zero; /* stride[0] is not read (zero is set below) */
    } else {
        fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_q), OFF(seqlen_q));
        fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_k), OFF(seqlen_k));
        if (k->p->variant & FJ_VARIANT_SEQLENS) emit_seq_len(k, b);
    }
    fj_ins(e, PTX_LD_PARAM_U32, R(grp), OFF(group));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(k->f_zero));
    if (k->p->variant & FJ_VARIANT_PACK) {
        fj_comment(e, 1, "GQA packing: %%ctaid.y is the KV head; the tile's rows are (query head hkv x group + g, row i)");
        fj_comment(e, 1, "at packed row g x Nq + i; Q and O are addressed per row from head hkv x group, row 0");
        fj_ins(e, "mov.u32 %s, %s", R(hkv), R(h));
        fj_ins(e, "mul.lo.u32 %s, %s, %s", R(h), R(hkv), R(grp));
        fj_ins(e, "mul.lo.u32 %s, %s, %s", R(k->q_rows), R(k->seqlen_q), R(grp));
        fj_ins(e, "sub.s32 %s, %s, %s", R(k->q_rows), R(k->q_rows), R(k->m0));
    } else {
        fj_ins(e, "div.u32 %s, %s, %s", R(hkv), R(h), R(grp));
        fj_ins(e, "sub.s32 %s, %s, %s", R(k->q_rows), R(k->seqlen_q), R(k->m0));
    }
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    fj_emit_tensor_ptr(k, OFF(q), OFF(q_stride), nb, h, k->p->variant & FJ_VARIANT_PACK ? zero : q_row, k->q_ptr);
    if (k->p->kv8) fj_kv8_descales(k, b, hkv);
    if (k->p->variant & FJ_VARIANT_VARLEN_K) {
        fj_emit_tensor_ptr(k, OFF(k), OFF(k_stride), zero, hkv, k_row, k->k_ptr);
        fj_emit_tensor_ptr(k, OFF(v), OFF(v_stride), zero, hkv, k_row, k->v_ptr);
    } else if (!(k->p->variant & FJ_VARIANT_PAGED)) { /* paged: each tile's pointers from its page (paged_tile_ptrs) */
        fj_emit_tensor_ptr(k, OFF(k), OFF(k_stride), b, hkv, zero, k->k_ptr);
        fj_emit_tensor_ptr(k, OFF(v), OFF(v_stride), b, hkv, zero, k->v_ptr);
    } else if (k->p->variant & FJ_VARIANT_AHEAD) {
        paged_kept(k, b, hkv, zero);
    }
    fj_ins(e, "mov.u32 %s, fj_smem", R(k->smem));
}

/* Paged K/V: copy tile `tile` from its page (gathered: each segment's, GATHER). AHEAD: the copies take
 * the page(s) read by the previous tile's copy (the first tile, k->page_sync, reads its own), then the
 * next tile's page(s) are read into k->page_next, when that tile exists (k->page_more) - a whole
 * iteration before they are used, so the block table's latency is off the copies' path. Non-gathered
 * here; gathered in the backend's load_kv, which knows each thread's segments. Non-gathered, the loop's
 * copies find k_ptr / v_ptr worked out already (k->page_ready: paged_next_ptrs at the end of the
 * iteration before), as the contiguous kernel's. */
static void paged_copy(fj_kctx *k, int slot, int parts, fj_reg_t tile, fj_reg_t valid, fj_reg_t n_end)
{
    int ahead = k->p->variant & FJ_VARIANT_AHEAD, gather = k->p->variant & FJ_VARIANT_GATHER;
    fj_reg_t next = ahead ? fj_alloc(k->e, k->b_r, 1) : k->kv_tile;
    if (ahead) {
        fj_ins(k->e, "add.s32 %s, %s, 1", R(next), R(tile));
        fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(k->page_more), R(next), R(n_end));
    }
    k->kv_tile = tile;
    if (!gather && !k->page_ready) paged_tile_ptrs(k, tile);
    k->p->backend->sync->load_kv(k, slot, parts, valid);
    if (ahead && !gather) {
        fj_comment(k->e, 1, "paged K/V: the next tile's page, read now for its copy");
        fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(next), R(next), k->p->cfg.block_n);
        fj_emit_paged_key_page(k, next, 0);
    }
    k->page_sync = 0;
}

/* AHEAD, not gathered: k_ptr / v_ptr of tile `tile` (the loop's next copy) from k->page_next, read by the
 * copy before; past n_end they are never used (its page was not read). From here on the copies find them
 * ready. */
static void paged_next_ptrs(fj_kctx *k, fj_reg_t tile)
{
    if ((k->p->variant & (FJ_VARIANT_AHEAD | FJ_VARIANT_GATHER)) != FJ_VARIANT_AHEAD) return;
    fj_comment(k->e, 1, "paged K/V: K and V pointers of the next tile to copy, from its page read ahead");
    paged_tile_ptrs(k, tile);
    k->page_ready = 1;
}

/* Issue the K and/or V tile (parts) `tile` if it exists (uniform branch), then always close a copy
 * group so the wait counts stay the same on every path. */
static void prefetch_kv(fj_kctx *k, int slot, int parts, fj_reg_t tile, fj_reg_t n_end)
{
    char skip[48];
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    fj_label_new(k->e, "no_prefetch", skip, sizeof skip);
    fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(tile), R(n_end));
    fj_ins(k->e, "@%s bra.uni %s", R(pr), skip);
    fj_reg_t valid = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mul.lo.s32 %s, %s, %d", R(valid), R(tile), -k->p->cfg.block_n);
    {
        fj_reg_t prm = fj_emit_kv_len(k);
        fj_ins(k->e, "add.s32 %s, %s, %s", R(valid), R(valid), R(prm));
    }
    if (k->p->variant & FJ_VARIANT_PAGED) { /* the tile's page (gathered: each segment's); no running pointers */
        paged_copy(k, slot, parts, tile, valid, n_end);
        fj_label(k->e, skip);
        k->p->backend->sync->commit(k);
        return;
    }
    k->p->backend->sync->load_kv(k, slot, parts, valid);
    if (parts & FJ_KV_K)
        {
            fj_reg_t prm = fj_param_u64(k, OFF(k_tile_bytes));
            fj_ins(k->e, "add.u64 %s, %s, %s", R(k->k_ptr), R(k->k_ptr), R(prm));
        }
    if (parts & FJ_KV_V)
        {
            fj_reg_t prm = fj_param_u64(k, OFF(v_tile_bytes));
            fj_ins(k->e, "add.u64 %s, %s, %s", R(k->v_ptr), R(k->v_ptr), R(prm));
        }
    fj_label(k->e, skip);
    k->p->backend->sync->commit(k);
}

static void emit_prologue(fj_kctx *k, fj_reg_t n_end)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int stages = p->cfg.stages;
    fj_banner(e, "Phase 2: start the copies",
              stages > 1 ? "Q tile first (one copy group), then stages - 1 KV tiles, one group each. Groups complete in\n"
                           "order, so 'wait until at most N groups are pending' names exactly which tile has landed."
                         : "Q tile first (one copy group), then K tile 0 (one group). With one stage K runs a tile\n"
                           "ahead of V: each iteration copies V(j) during S = QK(j) and K(j+1) during softmax and PV.");
    p->backend->sync->load_q(k);
    p->backend->sync->commit(k);
    if (p->variant & FJ_VARIANT_AHEAD) {
        fj_comment(e, 1, "paged K/V, pages read a tile ahead: the first tile reads its own");
        k->page_sync = 1;
    }
    fj_reg_t tile = fj_alloc(e, k->b_r, 1);
    int ahead = stages > 1 ? stages - 1 : 1;
    for (int s = 0; s < ahead; s++) {
        fj_comment(e, 1, "prologue: %s tile %d -> stage %d", stages > 1 ? "KV" : "K", s, s);
        if (fj_kv_has_first(p)) fj_ins(e, "add.s32 %s, %s, %d", R(tile), R(k->kv_first), s);
        else fj_ins(e, "mov.u32 %s, %d", R(tile), s);
        prefetch_kv(k, s, stages > 1 ? FJ_KV_BOTH : FJ_KV_K, tile, n_end);
    }
    fj_comment(e, 1, "Q has landed once at most %d groups (the %s prologue) are pending", ahead, stages > 1 ? "KV" : "K");
    p->backend->sync->wait(k, ahead);
    if (p->q_in_regs) {
        fj_comment(e, 1, "Q -> registers, kept for the whole loop");
        p->backend->sync->q_to_regs(k);
        if (p->kv8_f16) fj_kv8_q_to_f16(k);
    }
    if (p->pipeline_qk) {
        fj_comment(e, 1, "software pipeline: tile 0 has landed when at most %d newer groups are pending; S(0) = Q K(0)^T",
                   stages - 2);
        p->backend->sync->wait(k, stages - 2);
        k->acc_s = k->acc_s_set[0];
        p->backend->mma_qk(k, 0);
    }
    if ((p->variant & (FJ_VARIANT_AHEAD | FJ_VARIANT_GATHER)) == FJ_VARIANT_AHEAD) { /* paged_next_ptrs' tile */
        if (fj_kv_has_first(p)) fj_ins(e, "add.s32 %s, %s, %d", R(tile), R(k->kv_first), ahead);
        else fj_ins(e, "mov.u32 %s, %d", R(tile), ahead);
        paged_next_ptrs(k, tile);
    }
    fj_emit_init_accumulators(k);
}

/* Warp pairs: online softmax and O += PV for one tile. Each warp holds S for its half of the keys; the
 * row maxima are exchanged inside the softmax (fj_emit_softmax_rebase), so both warps keep the same
 * reference max m and P of both halves is on one scale. Each warp publishes its P and runs the MMAs
 * of its own keys; after the pair barrier it reads the partner's P for the MMAs of the partner's keys.
 * (A variant with one pair barrier per tile - P computed before the maxima are exchanged, redone on
 * the rare tiles where a row's max moved - measured 0% to -4% on the H100: it has to take the V(j)
 * wait of one stage before the exponentials, out of the branch, where it costs more than the barrier.) */
static void emit_pair_softmax_pv(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_emit_softmax_rebase(k);
    fj_emit_softmax_exp(k);
    if (p->cfg.stages == 1) {
        fj_comment(e, 1, "V(j) has landed when at most 1 newer group (K(j + 1)) is pending");
        p->backend->sync->wait(k, 1);
    }
    fj_comment(e, 1, "O += P V: this warp's P -> its exchange area, then the MMAs of its own keys");
    p->backend->pack_p(k);
    p->backend->sync->xchg_p(k, 0);
    p->backend->mma_pv(k, slot, FJ_KEYS_OWN);
    fj_comment(e, 1, "pair barrier: the partner's P is published; the MMAs of its keys");
    fj_emit_pair_sync(k);
    p->backend->sync->xchg_p(k, 1);
    p->backend->mma_pv(k, slot, FJ_KEYS_PEER);
}

/* One iteration for the tile in stage `slot` (a constant: the loop is unrolled by stages, and by 2
 * more when S is double-buffered: `buf` names the S set holding this tile's scores). */
static void emit_iteration(fj_kctx *k, int slot, int buf, fj_reg_t j, fj_reg_t n_end, fj_reg_t mask_from,
                           const char *done)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int stages = p->cfg.stages, pipe = p->pipeline_qk;
    fj_reg_t ahead = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_comment(e, 1, "---- KV tile j in stage %d%s ----", slot, pipe ? (buf ? ", scores in S set 1" : ", scores in S set 0") : "");
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(j), R(n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    if (stages >= 2) {
        int pending = pipe ? stages - 3 : stages - 2;
        fj_comment(e, 1, "tile j%s has landed when at most %d newer groups are pending", pipe ? " + 1" : "", pending);
        if (p->kv8 && !p->kv8_direct) k->kv8_slot = slot + 1; /* widened at the wait (sm80.c, kv8.c) */
        p->backend->sync->wait(k, pending);
        fj_comment(e, 1, "prefetch tile j + %d into stage %d (freed by tile j - 1)", stages - 1, (slot + stages - 1) % stages);
        fj_ins(e, "add.s32 %s, %s, %d", R(ahead), R(j), stages - 1);
        prefetch_kv(k, (slot + stages - 1) % stages, FJ_KV_BOTH, ahead, n_end);
    } else {
        fj_comment(e, 1, "one stage, K a tile ahead of V: K(j) has landed (no group pending); the barrier also");
        fj_comment(e, 1, "means every warp is done with V(j - 1), so V(j) is copied into its place during S = QK(j)");
        p->backend->sync->wait(k, 0);
        prefetch_kv(k, 0, FJ_KV_V, j, n_end);
    }
    k->acc_s = k->acc_s_set[buf];
    if (!pipe) {
        fj_comment(e, 1, "S = Q K^T");
        p->backend->mma_qk(k, slot);
    }
    if (stages == 1) {
        fj_comment(e, 1, "every warp is done with K(j): copy K(j + 1) into its place during softmax and PV");
        fj_ins(e, "bar.sync 0");
        fj_ins(e, "add.s32 %s, %s, 1", R(ahead), R(j));
        prefetch_kv(k, 0, FJ_KV_K, ahead, n_end);
    }
    fj_emit_scores(k, pr, mask_from, "mask only the tiles that cross the end of K or the causal diagonal");
    if (p->col_warps > 1) {
        emit_pair_softmax_pv(k, slot);
    } else {
        fj_emit_softmax_rebase(k);
        if (pipe) {
            fj_comment(e, 1, "S(j+1) = Q K(j+1)^T into the other S set, in the same block as the exponentials of S(j)");
            fj_comment(e, 1, "so the scheduler can interleave the MMAs with them (past the last tile it reads a stage");
            fj_comment(e, 1, "nobody uses and the result is dropped)");
            k->acc_s = k->acc_s_set[!buf];
            p->backend->mma_qk(k, (slot + 1) % stages);
            k->acc_s = k->acc_s_set[buf];
        }
        fj_emit_softmax_exp(k);
        if (stages == 1) {
            fj_comment(e, 1, "V(j) has landed when at most 1 newer group (K(j + 1)) is pending");
            p->backend->sync->wait(k, 1);
        }
        fj_comment(e, 1, "O += P V");
        p->backend->pack_p(k);
        p->backend->mma_pv(k, slot, FJ_KEYS_ALL);
        fj_emit_softmax_weight_update(k, 0);
    }
    if (p->variant & FJ_VARIANT_AHEAD) {
        fj_ins(e, "add.s32 %s, %s, %d", R(ahead), R(j), stages);
        paged_next_ptrs(k, ahead);
    }
    fj_ins(e, "add.s32 %s, %s, 1", R(j), R(j));
}

static void emit_loop(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], done[48];
    fj_reg_t j = k->j;
    k->kv_end = n_end, k->has_kv_end = 1;
    fj_banner(e, "Phase 3: main loop over KV tiles",
              "Iteration j: wait for tile j; barrier (all warps are also done with tile j - 1, whose stage\n"
              "is refilled next); prefetch tile j + stages - 1; S = QK^T; mask edge tiles; online softmax;\n"
              "O += PV. The loop body is written once per stage, so every stage's smem offsets are\n"
              "immediates and no register holds a stage index or a stage address.");
    if (fj_kv_has_first(p)) fj_ins(e, "mov.u32 %s, %s", R(j), R(k->kv_first));
    else fj_ins(e, "mov.u32 %s, 0", R(j));
    fj_label_new(e, "kv_loop", top, sizeof top);
    fj_label_new(e, "kv_done", done, sizeof done);
    fj_label(e, top);
    /* unrolled by stages, or by lcm(stages, 2) when S alternates between two register sets */
    int stages = p->cfg.stages, unroll = p->pipeline_qk && stages % 2 ? 2 * stages : stages;
    for (int i = 0; i < unroll; i++) emit_iteration(k, i % stages, p->pipeline_qk ? i % 2 : 0, j, n_end, mask_from, done);
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, done);
}

/* Warp pairs: the named barrier of the pair and this lane's slot in its own and the partner's
 * exchange area. */
static void setup_pairs(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_comment(e, 1, "warp pairs: warps 2i and 2i+1 own the same %d rows; warp 2i+h computes keys [h, h+1) * %d of each",
               16 * p->m_frags, p->cfg.block_n / 2);
    fj_comment(e, 1, "tile and head dims [h, h+1) * %d of O. They exchange row maxima, P and l through smem, behind",
               p->cfg.head_dim / 2);
    fj_comment(e, 1, "named barrier 1 + warp / 2 (64 threads); barrier 0 stays the CTA's");
    fj_comment(e, 2, "exchange area of warp w: smem + %d + w * %d; lane i's 16-byte slot s at + s * 512 + 16 * i",
               p->xchg_off, p->xchg_warp_bytes);
    fj_comment(e, 2, "(the registers hold smem + w * %d + 16 * i; the area offset and the slot are immediates)",
               p->xchg_warp_bytes);
    fj_reg_t t = fj_alloc(e, k->b_r, 1), w = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "shr.u32 %s, %s, 1", R(t), R(k->warp));
    fj_ins(e, "add.u32 %s, %s, 1", R(k->pair_bar), R(t));
    fj_ins(e, "shl.b32 %s, %s, 4", R(t), R(k->lane));
    fj_ins(e, "add.u32 %s, %s, %s", R(t), R(t), R(k->smem));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(k->xchg_own), R(k->warp), p->xchg_warp_bytes, R(t));
    fj_ins(e, "xor.b32 %s, %s, 1", R(w), R(k->warp));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(k->xchg_peer), R(w), p->xchg_warp_bytes, R(t));
}

/* Split-KV or a local variant: K and V start at the range's first tile. */
static void emit_split_kv_ptrs(fj_kctx *k)
{
    fj_reg_t t = fj_alloc(k->e, k->b_rd, 1);
    fj_comment(k->e, 1, "K and V from the %s first tile", k->p->variant & FJ_VARIANT_SPLIT ? "split's" : "range's");
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(t), R(k->kv_first));
    {
        fj_reg_t prm = fj_param_u64(k, OFF(k_tile_bytes));
        fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(k->k_ptr), R(t), R(prm), R(k->k_ptr));
    }
    {
        fj_reg_t prm = fj_param_u64(k, OFF(v_tile_bytes));
        fj_ins(k->e, "mad.lo.s64 %s, %s, %s, %s", R(k->v_ptr), R(t), R(prm), R(k->v_ptr));
    }
}

void fj_emit_fwd_kernel(fj_kctx *k)
{
    const fj_plan *p = k->p;
    p->backend->frag_desc(p, &k->frag);
    fj_emit_alloc_banks(k);
    emit_indices(k);
    fj_comment(k->e, 1, "backend setup: thread geometry, per-lane smem address terms, copy layout");
    p->backend->setup(k);
    if (p->col_warps > 1) setup_pairs(k);
    fj_reg_t n_end = fj_alloc(k->e, k->b_r, 1), mask_from = fj_alloc(k->e, k->b_r, 1);
    fj_emit_kv_range(k, n_end, mask_from);
    if (fj_kv_has_first(p) && !(p->variant & FJ_VARIANT_PAGED)) emit_split_kv_ptrs(k);
    if (p->cfg.mods & FAJIT_MOD_ALIBI) {
        fj_reg_t h = fj_alloc(k->e, k->b_r, 1), b = fj_alloc(k->e, k->b_r, 1);
        fj_emit_out_head(k, h);
        fj_emit_batch(k, b, 0);
        fj_emit_mods_start(k, h, b);
    }
    if (p->variant & FJ_VARIANT_AHEAD) {
        int n = fj_paged_lookups(p);
        k->page_next = fj_alloc(k->e, k->b_r, n);
        k->page_more = fj_alloc(k->e, k->b_p, 1);
        for (int i = 0; i < n; i++) fj_ins(k->e, "mov.u32 %s, 0", R(fj_at(k->page_next, i)));
        if (p->variant & FJ_VARIANT_GATHER) {
            k->page_row = fj_alloc(k->e, k->b_r, n);
            for (int i = 0; i < n; i++) fj_ins(k->e, "mov.u32 %s, 0", R(fj_at(k->page_row, i)));
        }
    }
    emit_prologue(k, n_end);
    emit_loop(k, n_end, mask_from);
    fj_banner(k->e, "Phase 4: epilogue",
              "Reduce l over the lanes sharing a row, scale O by 1/l, write LSE, store O (rows past Nq skipped).");
    if (p->lean_regs) {
        fj_comment(k->e, 1, "m0 and the thread geometry again: recomputed rather than kept live across the loop");
        fj_emit_m0(k);
        p->backend->geometry(k);
    }
    fj_emit_epilogue(k);
    fj_ins(k->e, "ret");
}
