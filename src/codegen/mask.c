/*
 * mask.c - masking and score modification for every arch path (mask.h): the KV-tile range of a query
 * block, the per-element mask, softcap, ALiBi and the attention sinks. Written over the fragment
 * descriptor (backend.h), so nothing here knows which MMA produced the scores; both skeletons
 * (fwd_kernel.c, sm90_roles.c) call it. A plain kernel's code is what it was before the variants existed.
 *
 * Positions: a thread's score value v of row r is key column j * block_n + col_base_s + s_col_off(v) of
 * query row m0 + row_base + row_off(r); the row's diagonal key is a = i + Nk - Nq (bottom-right aligned).
 * Local variants (window, chunk) bound a row's keys by [lo(a), hi(a)] with lo and hi non-decreasing in a,
 * so a query block's first and last rows bound its tile range and its unmasked tiles.
 * PTX: integer setp/min/max/div, cvt.rn.f32.s32, tanh.approx.f32 (sm_75+), ex2.approx, ld.global.nc.
 */
#include <stdint.h>
#include <string.h>

#include "mask.h"
#include "seqlen.h"
#include "soft_tanh.h"
#include "ptx_templates/common.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) FJ_DEC_OFF(k, field)
#define MOFF(field) FJ_MODS_OFF(k, field)
#define F32_LOG2E "0f3FB8AA3B"

int fj_mods_local(const fj_plan *p) { return (p->cfg.mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_CHUNK)) != 0; }

int fj_kv_has_first(const fj_plan *p) { return (p->variant & FJ_VARIANT_SPLIT) || fj_mods_local(p); }

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* ---- KV range --------------------------------------------------------------------------------------- */

/* dst = src / block_n for src >= 0: a shift when block_n is a power of two, which keeps the KV range on
 * ptxas's uniform datapath (uniform registers, not the 255 per-thread ones); div.s32 otherwise. */
static void div_block_n(fj_kctx *k, fj_reg_t dst, fj_reg_t src)
{
    int bc = k->p->cfg.block_n, sh = fj_log2_ceil(bc);
    if ((1 << sh) == bc) fj_ins(k->e, "shr.u32 %s, %s, %d", R(dst), R(src), sh);
    else fj_ins(k->e, "div.s32 %s, %s, %d", R(dst), R(src), bc);
}

/* A register of the work tile's KV range (k->kv_first, bit 1; k->kv_mask_below, bit 2): allocated at the range's first
 * emission and written again by every later one (each role's decode, the epilogue's, the sm_90a cross-tile tail's
 * decode of the next tile), so code emitted before a later decode - the KV loop body before that tail - reads what
 * the later decode wrote. */
static fj_reg_t range_reg(fj_kctx *k, fj_reg_t *r, unsigned bit)
{
    if (!(k->kv_range_made & bit)) *r = fj_alloc(k->e, k->b_r, 1), k->kv_range_made |= bit;
    return *r;
}

/* Split-KV: narrow [0, n_end) to split k->split's part [kv_first, n_end). */
static void kv_range_split(fj_kctx *k, fj_reg_t n_end)
{
    fj_emit *e = k->e;
    fj_reg_t per = fj_alloc(e, k->b_r, 1), n = fj_param_s32(k, DOFF(splits)), t = fj_alloc(e, k->b_r, 1);
    range_reg(k, &k->kv_first, 1);
    fj_comment(e, 1, "split-KV: this CTA takes tiles [s * per, min(n_end, (s + 1) * per)), per = ceil(n_end / splits)");
    fj_comment(e, 2, "(a split past the end is empty: no iteration runs, its partial is O = 0, LSE = -inf)");
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(n_end), R(n));
    fj_ins(e, "sub.s32 %s, %s, 1", R(t), R(t));
    fj_ins(e, "div.u32 %s, %s, %s", R(per), R(t), R(n));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(k->kv_first), R(k->split), R(per));
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(k->kv_first), R(per));
    fj_ins(e, "min.s32 %s, %s, %s", R(n_end), R(n_end), R(t));
}

/* Split-KV of a local range: [kv_first, n_end) cut in splits parts of ceil((n_end - kv_first) / splits). */
static void kv_range_split_local(fj_kctx *k, fj_reg_t n_end)
{
    fj_emit *e = k->e;
    fj_reg_t per = fj_alloc(e, k->b_r, 1), n = fj_param_s32(k, DOFF(splits)), t = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "split-KV: this CTA takes tiles [first + s * per, min(n_end, first + (s + 1) * per)), per = "
                     "ceil((n_end - first) / splits)");
    fj_ins(e, "sub.s32 %s, %s, %s", R(t), R(n_end), R(k->kv_first));
    fj_ins(e, "max.s32 %s, %s, 0", R(t), R(t));
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(t), R(n));
    fj_ins(e, "sub.s32 %s, %s, 1", R(t), R(t));
    fj_ins(e, "div.u32 %s, %s, %s", R(per), R(t), R(n));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(k->kv_first), R(k->split), R(per), R(k->kv_first));
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(k->kv_first), R(per));
    fj_ins(e, "min.s32 %s, %s, %s", R(n_end), R(n_end), R(t));
}

/* GQA packing, causal: a tile's rows hold several query heads, so its rows' positions i can be anything
 * in [0, Nq): the range is that of rows 0 .. Nq - 1 (tiles up to the last row's limit, masks from the
 * first row's). The mask then works out each row's i (fj_emit_mask). */
static void kv_range_packed_causal(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from, fj_reg_t tiles, fj_reg_t full,
                                   fj_reg_t off)
{
    fj_emit *e = k->e;
    fj_reg_t t = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "packed rows: tiles up to row Nq - 1's last key, ceil((max(Nk - 1, -1) + 1) / block_n), masks from row 0's");
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(k->seqlen_q), R(off));
    fj_ins(e, "max.s32 %s, %s, 0", R(t), R(t));
    fj_ins(e, "add.s32 %s, %s, %d", R(t), R(t), k->p->cfg.block_n - 1);
    div_block_n(k, t, t);
    fj_ins(e, "min.s32 %s, %s, %s", R(n_end), R(t), R(tiles));
    fj_ins(e, "add.s32 %s, %s, 1", R(t), R(off));
    fj_ins(e, "max.s32 %s, %s, 0", R(t), R(t));
    div_block_n(k, t, t);
    fj_ins(e, "min.s32 %s, %s, %s", R(mask_from), R(full), R(t));
}

static void kv_range_tiles(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int bc = p->cfg.block_n;
    fj_banner(e, "Phase 1: KV range",
              p->cfg.causal ? "Causal, bottom-right aligned: query row i sees keys j <= i + Nk - Nq.\n"
                              "Tiles past the last row's limit are skipped; only tiles that cross a row's limit\n"
                              "(or the end of K) are masked - the others run the unmasked path."
                            : "All ceil(Nk / block_n) tiles; only the last one, if partial, is masked.");
    fj_reg_t tiles = fj_alloc(e, k->b_r, 1), full = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "tiles = ceil(Nk / block_n); full tiles = floor(Nk / block_n) (all operands >= 0)");
    fj_ins(e, "add.s32 %s, %s, %d", R(tiles), R(k->seqlen_k), bc - 1);
    div_block_n(k, tiles, tiles);
    div_block_n(k, full, k->seqlen_k);
    if (!p->cfg.causal) {
        fj_ins(e, "mov.s32 %s, %s", R(n_end), R(tiles));
        fj_ins(e, "mov.s32 %s, %s", R(mask_from), R(full));
        return;
    }
    fj_reg_t off = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "sub.s32 %s, %s, %s", R(off), R(k->seqlen_k), R(k->seqlen_q));
    if (p->variant & FJ_VARIANT_PACK) {
        kv_range_packed_causal(k, n_end, mask_from, tiles, full, off);
        return;
    }
    fj_comment(e, 1, "tiles up to the last visible key of the CTA's last row, m0 + block_m - 1 + Nk - Nq:");
    fj_comment(e, 1, "ceil((max(that, -1) + 1) / block_n)");
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(k->m0), R(off));
    fj_ins(e, "add.s32 %s, %s, %d", R(t), R(t), p->cfg.block_m - 1);
    fj_ins(e, "max.s32 %s, %s, -1", R(t), R(t));
    fj_ins(e, "add.s32 %s, %s, %d", R(t), R(t), bc);
    div_block_n(k, t, t);
    fj_ins(e, "min.s32 %s, %s, %s", R(n_end), R(t), R(tiles));
    fj_comment(e, 1, "first tile crossing the first row's limit: floor(max(m0 + Nk - Nq + 1, 0) / block_n)");
    fj_ins(e, "add.s32 %s, %s, %s", R(t), R(k->m0), R(off));
    fj_ins(e, "add.s32 %s, %s, 1", R(t), R(t));
    fj_ins(e, "max.s32 %s, %s, 0", R(t), R(t));
    div_block_n(k, t, t);
    fj_ins(e, "min.s32 %s, %s, %s", R(mask_from), R(full), R(t));
}

/* cs = the first key of the chunk of diagonal a: floor(max(a, 0) / C) x C. */
static void chunk_first(fj_kctx *k, fj_reg_t a, fj_reg_t cs)
{
    fj_reg_t c = fj_param_s32(k, MOFF(chunk));
    fj_ins(k->e, "max.s32 %s, %s, 0", R(cs), R(a));
    fj_ins(k->e, "div.u32 %s, %s, %s", R(cs), R(cs), R(c));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %s", R(cs), R(cs), R(c));
}

/* lo = max(lo, first key of a's chunk); hi = min(hi, its last key), or -1 for a < 0 (no key: the chunk of a
 * negative diagonal ends at or before key 0). */
static void chunk_clip(fj_kctx *k, fj_reg_t a, fj_reg_t lo, fj_reg_t hi)
{
    fj_reg_t cs = fj_alloc(k->e, k->b_r, 1), ce = fj_alloc(k->e, k->b_r, 1), neg = fj_alloc(k->e, k->b_p, 1);
    chunk_first(k, a, cs);
    if (lo.bank >= 0) fj_ins(k->e, "max.s32 %s, %s, %s", R(lo), R(lo), R(cs));
    if (hi.bank >= 0) {
        fj_reg_t c = fj_param_s32(k, MOFF(chunk));
        fj_ins(k->e, "add.s32 %s, %s, %s", R(ce), R(cs), R(c));
        fj_ins(k->e, "sub.s32 %s, %s, 1", R(ce), R(ce));
        fj_ins(k->e, "setp.lt.s32 %s, %s, 0", R(neg), R(a));
        fj_ins(k->e, "@%s mov.s32 %s, -1", R(neg), R(ce));
        fj_ins(k->e, "min.s32 %s, %s, %s", R(hi), R(hi), R(ce));
    }
}

static const fj_reg_t NO_REG = {-1, 0};

/* lo = max(a - left, 0) (and the chunk's first key): the first key row a sees. */
static void key_lo(fj_kctx *k, fj_reg_t a, fj_reg_t lo)
{
    fj_reg_t l = fj_param_s32(k, MOFF(win_left));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(lo), R(a), R(l));
    fj_ins(k->e, "max.s32 %s, %s, 0", R(lo), R(lo));
    if (k->p->cfg.mods & FAJIT_MOD_CHUNK) chunk_clip(k, a, lo, NO_REG);
}

/* hi = min(a + right, Nk - 1) (and the chunk's last key): the last key row a sees (< lo: none). */
static void key_hi(fj_kctx *k, fj_reg_t a, fj_reg_t nk, fj_reg_t hi)
{
    fj_reg_t r = fj_param_s32(k, MOFF(win_right)), t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(hi), R(a), R(r));
    fj_ins(k->e, "sub.s32 %s, %s, 1", R(t), R(nk));
    fj_ins(k->e, "min.s32 %s, %s, %s", R(hi), R(hi), R(t));
    if (k->p->cfg.mods & FAJIT_MOD_CHUNK) chunk_clip(k, a, NO_REG, hi);
}

/* Local variants: every bound comes from the query block's first row (diagonal a_lo) or last row (a_hi).
 *   first tile  floor(lo(a_lo) / Bc)           n_end       ceil((hi(a_hi) + 1) / Bc)
 *   unmasked    [ceil(lo(a_hi) / Bc), floor((hi(a_lo) + 1) / Bc)): every key of those tiles is seen by every row */
static void kv_range_local(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int bc = p->cfg.block_n;
    fj_banner(e, "Phase 1: KV range (local: window / chunk)",
              "Query row i (diagonal a = i + Nk - Nq) sees keys lo(a) <= j <= hi(a): lo = max(a - left, chunk start),\n"
              "hi = min(a + right, Nk - 1, chunk end), both non-decreasing in a. Tiles outside [lo(first row),\n"
              "hi(last row)] are neither loaded nor computed; tiles inside [lo(last row), hi(first row)] skip the mask.");
    fj_reg_t alo = fj_alloc(e, k->b_r, 1), ahi = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1);
    fj_reg_t u = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "sub.s32 %s, %s, %s", R(alo), R(k->seqlen_k), R(k->seqlen_q));
    if (p->variant & FJ_VARIANT_PACK) {
        fj_comment(e, 1, "packed rows: positions 0 .. Nq - 1 of several heads: a in [Nk - Nq, Nk - 1]");
        fj_ins(e, "add.s32 %s, %s, %s", R(ahi), R(alo), R(k->seqlen_q));
        fj_ins(e, "sub.s32 %s, %s, 1", R(ahi), R(ahi));
    } else {
        fj_ins(e, "add.s32 %s, %s, %s", R(alo), R(alo), R(k->m0));
        fj_ins(e, "add.s32 %s, %s, %d", R(ahi), R(alo), p->cfg.block_m - 1);
    }
    range_reg(k, &k->kv_first, 1);
    range_reg(k, &k->kv_mask_below, 2);
    fj_comment(e, 1, "first tile: floor(lo(first row) / block_n); n_end: ceil((hi(last row) + 1) / block_n)");
    key_lo(k, alo, t);
    div_block_n(k, k->kv_first, t);
    key_hi(k, ahi, k->seqlen_k, u);
    fj_ins(e, "add.s32 %s, %s, 1", R(u), R(u));
    fj_ins(e, "max.s32 %s, %s, 0", R(u), R(u));
    fj_ins(e, "add.s32 %s, %s, %d", R(u), R(u), bc - 1);
    div_block_n(k, n_end, u);
    fj_comment(e, 1, "unmasked tiles: [ceil(lo(last row) / block_n), floor((hi(first row) + 1) / block_n))");
    key_lo(k, ahi, t);
    fj_ins(e, "add.s32 %s, %s, %d", R(t), R(t), bc - 1);
    div_block_n(k, k->kv_mask_below, t);
    key_hi(k, alo, k->seqlen_k, u);
    fj_ins(e, "add.s32 %s, %s, 1", R(u), R(u));
    fj_ins(e, "max.s32 %s, %s, 0", R(u), R(u));
    div_block_n(k, mask_from, u);
}

void fj_emit_kv_range(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from)
{
    if (fj_mods_local(k->p)) {
        kv_range_local(k, n_end, mask_from);
        if (k->p->variant & FJ_VARIANT_SPLIT) kv_range_split_local(k, n_end);
        return;
    }
    kv_range_tiles(k, n_end, mask_from);
    if (k->p->variant & FJ_VARIANT_SPLIT) kv_range_split(k, n_end);
}

void fj_emit_mask_skip(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from, const char *nomask)
{
    fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(k->j), R(mask_from));
    if (fj_mods_local(k->p))
        fj_ins(k->e, "setp.ge.and.s32 %s, %s, %s, %s", R(pr), R(k->j), R(k->kv_mask_below), R(pr));
    fj_ins(k->e, "@%s bra.uni %s", R(pr), nomask);
}

/* ---- per-element mask --------------------------------------------------------------------------- */

/* -inf where column >= lim (a register) for row r's values. */
static void mask_row(fj_kctx *k, int r, fj_reg_t lim, fj_reg_t pr)
{
    for (int v = 0; v < k->frag.s_vals; v++) {
        fj_ins(k->e, "setp.lt.s32 %s, %s, %d", R(pr), R(lim), k->frag.s_col_off(k->p, v));
        fj_ins(k->e, "@%s mov.f32 %s, " PTX_F32_NEG_INF, R(pr), R(fj_at(k->acc_s, k->frag.s_reg(k->p, r, v))));
    }
}

/* GQA packing, causal: row r's position is i = (m0 + row) mod Nq (fj_emit_packed_row); its limit,
 * relative to the thread's first column, is min(last, i + Nk - Nq - j * block_n - col_base). */
static void mask_packed_causal(fj_kctx *k, fj_reg_t last, fj_reg_t rel, fj_reg_t pr)
{
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), g = fj_alloc(k->e, k->b_r, 1), i = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "packed rows: each row's position i = (m0 + row) mod Nq gives its limit");
    for (int r = 0; r < k->frag.rows; r++) {
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(k->p, r));
        fj_emit_packed_row(k, row, g, i);
        fj_ins(k->e, "add.s32 %s, %s, %s", R(rel), R(i), R(last));
        {
            fj_reg_t prm = fj_param_s32(k, OFF(seqlen_q));
            fj_ins(k->e, "sub.s32 %s, %s, %s", R(rel), R(rel), R(prm));
        }
        fj_ins(k->e, "add.s32 %s, %s, 1", R(rel), R(rel));
        fj_ins(k->e, "min.s32 %s, %s, %s", R(rel), R(rel), R(last));
        mask_row(k, r, rel, pr);
    }
}

/* The lean-register geometry (sm_80: row_base, col_base_s and m0 are recomputed where they are needed). */
static void lean_geometry(fj_kctx *k, int want_m0)
{
    if (!k->p->lean_regs) return;
    fj_comment(k->e, 2, "lean registers: the thread geometry%s recomputed here, not kept live across the loop",
               want_m0 ? " and m0 are" : " is");
    k->p->backend->geometry(k);
    if (want_m0) fj_emit_m0(k);
}

/* a (s32) = the diagonal of row r minus base: i + Nk - Nq - base for i = m0 + row_base + row_off(r), or with GQA
 * packing i = (m0 + row_base + row_off(r)) mod Nq. a0 = m0 + row_base + Nk - Nq - base (unpacked). */
static void row_diag(fj_kctx *k, int r, fj_reg_t a0, fj_reg_t nk_minus_base, fj_reg_t a)
{
    if (!(k->p->variant & FJ_VARIANT_PACK)) {
        fj_ins(k->e, "add.s32 %s, %s, %d", R(a), R(a0), k->frag.row_off(k->p, r));
        return;
    }
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), g = fj_alloc(k->e, k->b_r, 1), i = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(k->p, r));
    fj_emit_packed_row(k, row, g, i);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(a), R(i), R(nk_minus_base));
    {
        fj_reg_t prm = fj_param_s32(k, OFF(seqlen_q));
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(a), R(a), R(prm));
    }
}

/* Bases of the rows' diagonals for tile k->j: nmb = Nk - j x block_n - col_base_s; a0 = m0 + row_base + nmb - Nq. */
static void diag_bases(fj_kctx *k, fj_reg_t nk, fj_reg_t base, fj_reg_t nmb, fj_reg_t a0)
{
    fj_ins(k->e, "mul.lo.s32 %s, %s, %d", R(base), R(k->j), k->p->cfg.block_n);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(base), R(base), R(k->col_base_s));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(nmb), R(nk), R(base));
    if (k->p->variant & FJ_VARIANT_PACK) return;
    fj_ins(k->e, "add.s32 %s, %s, %s", R(a0), R(k->m0), R(k->row_base));
    fj_ins(k->e, "add.s32 %s, %s, %s", R(a0), R(a0), R(nmb));
    {
        fj_reg_t prm = fj_seqlen_q_len(k); /* the sequence's (varlen), else the parameter */
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(a0), R(a0), R(prm));
    }
}

/* Local variants: row r sees columns [lo - base, hi - base] of the thread's (column offsets of its values). */
static void mask_local(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t base = fj_alloc(e, k->b_r, 1), nmb = fj_alloc(e, k->b_r, 1), a0 = fj_alloc(e, k->b_r, 1);
    fj_reg_t a = fj_alloc(e, k->b_r, 1), lo = fj_alloc(e, k->b_r, 1), hi = fj_alloc(e, k->b_r, 1);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_comment(e, 1, "local mask: row a = i + Nk - Nq sees keys [max(a - left, 0%s), min(a + right, Nk - 1%s)]%s",
               p->cfg.mods & FAJIT_MOD_CHUNK ? ", chunk start" : "", p->cfg.mods & FAJIT_MOD_CHUNK ? ", chunk end" : "",
               p->variant & FJ_VARIANT_SEQLENS ? ", Nk = this sequence's length" : "");
    fj_comment(e, 2, "both bounds made relative to the thread's first column: two setp and one mov per score");
    lean_geometry(k, 1);
    fj_reg_t nk = fj_emit_kv_len(k);
    diag_bases(k, nk, base, nmb, a0);
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t rel = fj_alloc(e, k->b_r, 1);
        row_diag(k, r, a0, nmb, rel);
        fj_ins(e, "add.s32 %s, %s, %s", R(a), R(rel), R(base)); /* the row's diagonal key */
        key_lo(k, a, lo);
        key_hi(k, a, nk, hi);
        fj_ins(e, "sub.s32 %s, %s, %s", R(lo), R(lo), R(base));
        fj_ins(e, "sub.s32 %s, %s, %s", R(hi), R(hi), R(base));
        for (int v = 0; v < k->frag.s_vals; v++) {
            int col = k->frag.s_col_off(p, v);
            fj_ins(e, "setp.lt.s32 %s, %s, %d", R(pr), R(hi), col);
            fj_ins(e, "setp.gt.or.s32 %s, %s, %d, %s", R(pr), R(lo), col, R(pr));
            fj_ins(e, "@%s mov.f32 %s, " PTX_F32_NEG_INF, R(pr), R(fj_at(k->acc_s, k->frag.s_reg(p, r, v))));
        }
    }
}

/* Scores whose column is past the row's last visible key become -inf. The limit is recomputed here,
 * on the (few) masked tiles, rather than kept live across the loop: live, ptxas spills it. */
void fj_emit_mask(fj_kctx *k)
{
    const fj_plan *p = k->p;
    if (fj_mods_local(p)) {
        mask_local(k);
        return;
    }
    fj_reg_t rel = fj_alloc(k->e, k->b_r, 1), last = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_comment(k->e, 1, "last visible key: %s%s",
               p->cfg.causal ? "min(Nk - 1, row + Nk - Nq) (causal, bottom-right aligned)" : "Nk - 1",
               p->variant & FJ_VARIANT_VARLEN    ? ", Nq and Nk = this sequence's lengths"
               : p->variant & FJ_VARIANT_SEQLENS ? ", Nk = this sequence's length"
                                                 : "");
    fj_comment(k->e, 2, "compared as (limit - j * block_n - col_base_s) < column offset of each value: one setp per score");
    if (p->lean_regs) {
        fj_comment(k->e, 2, "lean registers: the thread geometry%s recomputed here, not kept live across the loop",
                   p->cfg.causal ? " and m0 are" : " is");
        p->backend->geometry(k);
        if (p->cfg.causal) fj_emit_m0(k);
    }
    fj_reg_t nk = fj_emit_kv_len(k);
    fj_ins(k->e, "mul.lo.s32 %s, %s, %d", R(last), R(k->j), p->cfg.block_n);
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(last), R(nk), R(last));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(last), R(last), R(k->col_base_s));
    fj_ins(k->e, "add.s32 %s, %s, -1", R(last), R(last));
    fj_reg_t diag = fj_alloc(k->e, k->b_r, 1);
    if (p->cfg.causal && (p->variant & FJ_VARIANT_PACK)) {
        mask_packed_causal(k, last, rel, pr);
        return;
    }
    if (p->cfg.causal) {
        /* row + Nk - Nq - n0 - col_base, for row = m0 + row_base + row_off(r) */
        fj_ins(k->e, "add.s32 %s, %s, %s", R(diag), R(k->m0), R(k->row_base));
        fj_ins(k->e, "add.s32 %s, %s, %s", R(diag), R(diag), R(last));
        {
            fj_reg_t prm = fj_seqlen_q_len(k);
            fj_ins(k->e, "sub.s32 %s, %s, %s", R(diag), R(diag), R(prm));
        }
        fj_ins(k->e, "add.s32 %s, %s, 1", R(diag), R(diag));
    }
    for (int r = 0; r < k->frag.rows; r++) {
        if (p->cfg.causal) {
            fj_ins(k->e, "add.s32 %s, %s, %d", R(rel), R(diag), k->frag.row_off(p, r));
            fj_ins(k->e, "min.s32 %s, %s, %s", R(rel), R(rel), R(last));
        } else if (r == 0) {
            fj_ins(k->e, "mov.s32 %s, %s", R(rel), R(last));
        }
        for (int v = 0; v < k->frag.s_vals; v++) {
            fj_ins(k->e, "setp.lt.s32 %s, %s, %d", R(pr), R(rel), k->frag.s_col_off(p, v));
            fj_ins(k->e, "@%s mov.f32 %s, " PTX_F32_NEG_INF, R(pr), R(fj_at(k->acc_s, k->frag.s_reg(p, r, v))));
        }
    }
}

/* ---- score modifications ---------------------------------------------------------------------- */

fj_reg_t fj_cap_scale(fj_kctx *k)
{
    return k->p->fp8 ? k->cap_scale : fj_param_f32(k, MOFF(cap_scale));
}

/* S = tanh(S x softmax_scale / c): the cap; the softmax's scale_log2 = c x log2(e) puts the c back. */
static void hook_softcap(fj_kctx *k)
{
    fj_reg_t cs = fj_cap_scale(k);
    fj_comment(k->e, 1, "softcap: S = tanh(S * scale / c) (c x log2 e is the softmax's scale: s = c tanh(s / c))");
    for (int r = 0; r < k->frag.rows; r++)
        for (int v = 0; v < k->frag.s_vals; v++) {
            const char *s = R(fj_at(k->acc_s, k->frag.s_reg(k->p, r, v)));
            fj_ins(k->e, "mul.f32 %s, %s, %s", s, s, R(cs));
            fj_ins(k->e, "tanh.approx.f32 %s, %s", s, s);
        }
}

/* b = A1 cs, A3 cs^3, A5 cs^5 (soft_tanh.h), cs = cap_scale: 5 multiplies a tile. */
void fj_emit_softcap_poly_coefs(fj_kctx *k, fj_reg_t b)
{
    fj_reg_t cs = fj_cap_scale(k), c2 = fj_alloc(k->e, k->b_f, 1);
    fj_comment(k->e, 2, "the polynomial's coefficients folded with cs = scale / c: A1 cs, A3 cs^3, A5 cs^5 (soft_tanh.h)");
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(c2), R(cs), R(cs));
    fj_ins(k->e, "mul.f32 %s, %s, 0f%08X", R(fj_at(b, 0)), R(cs), fj_soft_tanh_coef[0]);
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(fj_at(b, 1)), R(cs), R(c2));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(fj_at(b, 2)), R(fj_at(b, 1)), R(c2));
    fj_ins(k->e, "mul.f32 %s, %s, 0f%08X", R(fj_at(b, 1)), R(fj_at(b, 1)), fj_soft_tanh_coef[1]);
    fj_ins(k->e, "mul.f32 %s, %s, 0f%08X", R(fj_at(b, 2)), R(fj_at(b, 2)), fj_soft_tanh_coef[2]);
}

void fj_emit_softcap_poly_value(fj_kctx *k, fj_reg_t b, fj_reg_t x)
{
    fj_reg_t u = fj_alloc(k->e, k->b_f, 1), q = fj_alloc(k->e, k->b_f, 1);
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(u), R(x), R(x));
    fj_ins(k->e, "fma.rn.f32 %s, %s, %s, %s", R(q), R(u), R(fj_at(b, 2)), R(fj_at(b, 1)));
    fj_ins(k->e, "fma.rn.f32 %s, %s, %s, %s", R(q), R(q), R(u), R(fj_at(b, 0)));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(x), R(q), R(x));
}

void fj_emit_softcap_poly(fj_kctx *k, fj_reg_t b)
{
    int share = k->p->cap_poly_share;
    fj_reg_t cs = share < 8 ? fj_cap_scale(k) : (fj_reg_t){-1, 0};
    fj_comment(k->e, 1, "softcap on the FMA units: S = S (b1 + b3 S^2 + b5 S^4) = tanh(S * scale / c) to 1.8e-5 (soft_tanh.h)");
    if (share < 8) fj_comment(k->e, 2, "(%d of every 8 scores; the others tanh.approx)", share);
    for (int r = 0; r < k->frag.rows; r++)
        for (int v = 0; v < k->frag.s_vals; v++) {
            fj_reg_t x = fj_at(k->acc_s, k->frag.s_reg(k->p, r, v));
            if ((v + 1) * share / 8 > v * share / 8) {
                fj_emit_softcap_poly_value(k, b, x);
            } else {
                fj_ins(k->e, "mul.f32 %s, %s, %s", R(x), R(x), R(cs));
                fj_ins(k->e, "tanh.approx.f32 %s, %s", R(x), R(x));
            }
        }
}

/* The causal form of ALiBi: every key a causal row sees lies at or left of its diagonal (j <= a), so the bias
 * -slope x unit x (a - j) is linear in j. Split a - j = (a0 - c) + (row_off(r) - row_off(0)) with a0 the diagonal of
 * the thread's first row relative to the tile and c the value's column offset: the first part is shared by the
 * thread's rows, the second is a constant of each row across the whole KV loop, which the softmax does not see;
 * fj_emit_alibi_row_shift adds it back to m before the epilogue reads it (LSE, sinks). Near the diagonal, where the
 * scores that matter lie, both parts stay small (no cancellation in fp32).
 * Folded (FJ_ALIBI_FOLD, the default): the first part splits again, ns x (a0 - c) = ns x a0 + ns x (-c), ns = -slope x
 * unit. The hook adds only ns x (-c), one FMA per score with c an immediate (none for c = 0); ns x a0, the same for
 * all the thread's scores of the tile, goes to k->alibi_tile, which the softmax adds to the thread's row maxima before
 * the quad reduction and to each row's exponent constant (fj_alibi_tile_term). Unfolded: one add per column and one
 * FMA per score, the bias complete in S.
 * Keys right of the diagonal (non-causal) need |a - j|; GQA-packed rows differ in head and diagonal: both keep the
 * per-row form. */
static int alibi_linear(const fj_plan *p)
{
    return (p->cfg.mods & FAJIT_MOD_ALIBI) && p->cfg.causal && !(p->variant & FJ_VARIANT_PACK);
}

int fj_alibi_folded(const fj_plan *p) { return FJ_ALIBI_FOLD && alibi_linear(p); }

/* ns x (-c) for every value: the folded form's part of the bias that changes along the thread's columns. */
static void alibi_columns(fj_kctx *k)
{
    fj_comment(k->e, 2, "(the column offset c is an immediate: one FMA per score, none for c = 0)");
    for (int v = 0; v < k->frag.s_vals; v++) {
        int col = k->frag.s_col_off(k->p, v);
        if (col == 0) continue;
        for (int r = 0; r < k->frag.rows; r++) {
            const char *s = R(fj_at(k->acc_s, k->frag.s_reg(k->p, r, v)));
            fj_ins(k->e, "fma.rn.f32 %s, %s, 0f%08X, %s", s, R(k->alibi_nslope), f32_bits((float)-col), s);
        }
    }
}

/* The lookahead's (mask.h) distance from the tile's first key to the diagonal of the thread's first row, the same
 * for every lane of a row (d is relative to the thread's first column). */
static void alibi_keep_diag(fj_kctx *k, fj_reg_t d)
{
    if (!(FJ_ALIBI_LOOKAHEAD > 0)) return;
    k->alibi_diag = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.s32 %s, %s, %s", R(k->alibi_diag), R(d), R(k->col_base_s));
}

/* S += -slope x unit x |a - j| (ALiBi): per row d = a - (j x block_n + col_base_s) as f32, per value
 * |d - column offset| times the row's kept -slope x unit (k->alibi_nslope); causal: the linear form above. */
static void hook_alibi(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t base = fj_alloc(e, k->b_r, 1), nmb = fj_alloc(e, k->b_r, 1), a0 = fj_alloc(e, k->b_r, 1);
    fj_reg_t d = fj_alloc(e, k->b_r, 1), df = fj_alloc(e, k->b_f, 1), x = fj_alloc(e, k->b_f, 1);
    lean_geometry(k, 1);
    fj_reg_t nk = fj_emit_kv_len(k);
    diag_bases(k, nk, base, nmb, a0);
    if (fj_alibi_folded(p)) {
        fj_comment(e, 1, "ALiBi, causal (keys j <= a): S -= slope x unit x (a_0 - key), a_0 the diagonal of the thread's "
                         "first row; the other rows' constant offsets go into m at the end");
        fj_comment(e, 1, "folded: S gets -slope x unit x (-column offset); the thread's share -slope x unit x (a_0 - its "
                         "first key) joins the row max and the exponent (softmax)");
        row_diag(k, 0, a0, nmb, d);
        alibi_keep_diag(k, d);
        fj_ins(e, "cvt.rn.f32.s32 %s, %s", R(df), R(d));
        k->alibi_tile = fj_alloc(e, k->b_f, 1);
        fj_ins(e, "mul.f32 %s, %s, %s", R(k->alibi_tile), R(df), R(k->alibi_nslope));
        alibi_columns(k);
        return;
    }
    if (alibi_linear(p)) {
        fj_comment(e, 1, "ALiBi, causal (keys j <= a): S -= slope x unit x (a_0 - key), a_0 the diagonal of the thread's "
                         "first row; the other rows' constant offsets go into m at the end");
        row_diag(k, 0, a0, nmb, d);
        alibi_keep_diag(k, d);
        fj_ins(e, "cvt.rn.f32.s32 %s, %s", R(df), R(d));
        for (int v = 0; v < k->frag.s_vals; v++) {
            fj_ins(e, "sub.f32 %s, %s, 0f%08X", R(x), R(df), f32_bits((float)k->frag.s_col_off(p, v)));
            for (int r = 0; r < k->frag.rows; r++) {
                const char *s = R(fj_at(k->acc_s, k->frag.s_reg(p, r, v)));
                fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", s, R(x), R(k->alibi_nslope), s);
            }
        }
        return;
    }
    fj_comment(e, 1, "ALiBi: S -= slope x unit x |a - key|, a = i + Nk - Nq the row's diagonal");
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t ns = p->variant & FJ_VARIANT_PACK ? fj_at(k->alibi_nslope, r) : k->alibi_nslope;
        row_diag(k, r, a0, nmb, d);
        fj_ins(e, "cvt.rn.f32.s32 %s, %s", R(df), R(d));
        for (int v = 0; v < k->frag.s_vals; v++) {
            const char *s = R(fj_at(k->acc_s, k->frag.s_reg(p, r, v)));
            fj_ins(e, "sub.f32 %s, %s, 0f%08X", R(x), R(df), f32_bits((float)k->frag.s_col_off(p, v)));
            fj_ins(e, "abs.f32 %s, %s", R(x), R(x));
            fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", s, R(x), R(ns), s);
        }
    }
}

void fj_emit_alibi_row_shift(fj_kctx *k, int r)
{
    int off = k->frag.row_off(k->p, r) - k->frag.row_off(k->p, 0);
    if (!alibi_linear(k->p) || off == 0) return;
    fj_reg_t t = fj_alloc(k->e, k->b_f, 1), m = fj_at(k->row_m, r);
    fj_reg_t scale = fj_param_f32(k, FJ_PARAM_OFF(scale_log2));
    fj_comment(k->e, 1, "row %d: ALiBi's causal form left out -slope x unit x %d (its distance past the first row): "
                        "m += that x scale_log2", r, off);
    fj_ins(k->e, "mul.f32 %s, %s, 0f%08X", R(t), R(k->alibi_nslope), f32_bits((float)off));
    fj_ins(k->e, "fma.rn.f32 %s, %s, %s, %s", R(m), R(t), R(scale), R(m));
}

int fj_alibi_lookahead(const fj_plan *p) { return FJ_ALIBI_LOOKAHEAD > 0 && alibi_linear(p); }

void fj_emit_alibi_lookahead(fj_kctx *k, fj_reg_t scale, fj_reg_t g)
{
    const fj_plan *p = k->p;
    int cap = p->cfg.dtype == FAJIT_DTYPE_F16 && FJ_ALIBI_LOOKAHEAD > 8 ? 8 : FJ_ALIBI_LOOKAHEAD;
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1), tf = fj_alloc(k->e, k->b_f, 1);
    fj_comment(k->e, 1, "ALiBi lookahead: m up to g = clamp(slope x unit x scale_log2 x (first row's diagonal - the tile's "
                        "last key), 0, %d) above the max: the bias still to rise before the diagonal (mask.h)", cap);
    fj_ins(k->e, "sub.s32 %s, %s, %d", R(t), R(k->alibi_diag), p->cfg.block_n - 1);
    fj_ins(k->e, "cvt.rn.f32.s32 %s, %s", R(tf), R(t));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(g), R(k->alibi_nslope), R(scale));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(g), R(g), R(tf));
    fj_ins(k->e, "neg.f32 %s, %s", R(g), R(g));
    fj_ins(k->e, "max.f32 %s, %s, " PTX_F32_ZERO, R(g), R(g));
    fj_ins(k->e, "min.f32 %s, %s, 0f%08X", R(g), R(g), f32_bits((float)cap));
}

void fj_emit_score_hook(fj_kctx *k)
{
    int mods = k->p->cfg.mods & (FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI);
    if (!mods) {
        fj_comment(k->e, 2, "score hook: softcap, ALiBi, sliding windows and user score functions are emitted here");
        fj_comment(k->e, 2, "(none for this config: S is used as computed)");
        return;
    }
    fj_comment(k->e, 2, "score hook (mask.c): %s%s%s, before the mask", mods & FAJIT_MOD_SOFTCAP ? "softcap" : "",
               mods == (FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI) ? " then " : "", mods & FAJIT_MOD_ALIBI ? "ALiBi" : "");
    if (mods & FAJIT_MOD_SOFTCAP) hook_softcap(k);
    if (mods & FAJIT_MOD_ALIBI) hook_alibi(k);
}

/* g = min(the packed row's head offset, group - 1) for row r (rows past group x Nq hold no head; clamped so
 * that their loads stay inside the per-head arrays). */
static void packed_head(fj_kctx *k, int r, fj_reg_t g)
{
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), i = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t grp = fj_param_s32(k, OFF(group));
    fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(k->p, r));
    fj_emit_packed_row(k, row, g, i);
    fj_ins(k->e, "sub.u32 %s, %s, 1", R(grp), R(grp));
    fj_ins(k->e, "min.u32 %s, %s, %s", R(g), R(g), R(grp));
}

void fj_emit_mods_start(fj_kctx *k, fj_reg_t h, fj_reg_t b)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    if (!(p->cfg.mods & FAJIT_MOD_ALIBI)) return;
    int n = p->variant & FJ_VARIANT_PACK ? k->frag.rows : 1;
    fj_reg_t idx = fj_alloc(e, k->b_rd, 1), t = fj_alloc(e, k->b_rd, 1), a = fj_alloc(e, k->b_rd, 1);
    fj_reg_t hh = fj_alloc(e, k->b_r, 1), g = fj_alloc(e, k->b_r, 1);
    fj_reg_t unit = fj_param_f32(k, MOFF(score_unit));
    k->alibi_nslope = fj_alloc(e, k->b_f, n);
    fj_comment(e, 1, "ALiBi: the slope of (b, h%s), times -unit, kept for the KV loop",
               n > 1 ? " of each packed row" : "");
    for (int r = 0; r < n; r++) {
        fj_reg_t s = fj_at(k->alibi_nslope, r);
        fj_ins(e, "mov.u32 %s, %s", R(hh), R(h));
        if (n > 1) {
            packed_head(k, r, g);
            fj_ins(e, "add.u32 %s, %s, %s", R(hh), R(hh), R(g));
        }
        fj_ins(e, "cvt.u64.u32 %s, %s", R(t), R(b));
        {
            fj_reg_t prm = fj_param_u64(k, MOFF(alibi_stride));
            fj_ins(e, "mul.lo.s64 %s, %s, %s", R(idx), R(t), R(prm));
        }
        fj_ins(e, "cvt.u64.u32 %s, %s", R(t), R(hh));
        fj_ins(e, "add.s64 %s, %s, %s", R(idx), R(idx), R(t));
        fj_ins(e, "shl.b64 %s, %s, 2", R(idx), R(idx));
        {
            fj_reg_t prm = fj_param_u64(k, MOFF(alibi));
            fj_ins(e, "add.u64 %s, %s, %s", R(a), R(idx), R(prm));
        }
        fj_ins(e, "ld.global.nc.f32 %s, [%s]", R(s), R(a));
        fj_ins(e, "mul.f32 %s, %s, %s", R(s), R(s), R(unit));
        fj_ins(e, "neg.f32 %s, %s", R(s), R(s));
    }
}

/* ---- attention sinks ------------------------------------------------------------------------------ */

void fj_emit_sinks_prep(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    if (!(p->cfg.mods & FAJIT_MOD_SINKS)) return;
    k->sink_h = fj_alloc(e, k->b_r, 1);
    k->sink_on = fj_alloc(e, k->b_p, 1);
    fj_comment(e, 1, "attention sinks: the tile's query head%s", p->variant & FJ_VARIANT_SPLIT ? "; split 0 adds the sink" : "");
    if (p->ws) {
        fj_ins(e, "mov.u32 %s, %s", R(k->sink_h), R(k->h));
    } else {
        fj_ins(e, "mov.u32 %s, %%ctaid.y", R(k->sink_h));
        if (p->variant & FJ_VARIANT_PACK) {
            fj_reg_t prm = fj_param_s32(k, OFF(group));
            fj_ins(e, "mul.lo.u32 %s, %s, %s", R(k->sink_h), R(k->sink_h), R(prm));
        }
    }
    if (!(p->variant & FJ_VARIANT_SPLIT)) {
        fj_ins(e, "setp.eq.u32 %s, 0, 0", R(k->sink_on));
        return;
    }
    fj_reg_t s = fj_alloc(e, k->b_r, 1);
    if (p->ws) {
        fj_ins(e, "mov.u32 %s, %s", R(s), R(k->split));
    } else {
        fj_reg_t n = fj_param_s32(k, DOFF(splits));
        fj_ins(e, "mov.u32 %s, %%ctaid.z", R(s));
        fj_ins(e, "rem.u32 %s, %s, %s", R(s), R(s), R(n));
    }
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(k->sink_on), R(s));
}

void fj_emit_sink_fold(fj_kctx *k, int r, fj_reg_t corr)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t h = fj_alloc(e, k->b_r, 1), a = fj_alloc(e, k->b_rd, 1), s2 = fj_alloc(e, k->b_f, 1);
    fj_reg_t mnew = fj_alloc(e, k->b_f, 1), muse = fj_alloc(e, k->b_f, 1), t = fj_alloc(e, k->b_f, 1);
    fj_reg_t pinf = fj_alloc(e, k->b_p, 1);
    fj_reg_t m = fj_at(k->row_m, r), l = fj_at(k->row_l, r);
    fj_comment(e, 1, "row %d: the sink joins the denominator: m' = max(m, sink log2 e), l = l 2^(m - m') + "
                     "2^(sink log2 e - m')", r);
    fj_ins(e, "mov.u32 %s, %s", R(h), R(k->sink_h));
    if (p->variant & FJ_VARIANT_PACK) {
        fj_reg_t g = fj_alloc(e, k->b_r, 1);
        packed_head(k, r, g);
        fj_ins(e, "add.u32 %s, %s, %s", R(h), R(h), R(g));
    }
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(a), R(h));
    {
        fj_reg_t prm = fj_param_u64(k, MOFF(sinks));
        fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(prm));
    }
    fj_ins(e, "ld.global.nc.f32 %s, [%s]", R(s2), R(a));
    fj_ins(e, "mul.f32 %s, %s, " F32_LOG2E, R(s2), R(s2));
    fj_ins(e, "@!%s mov.f32 %s, " PTX_F32_NEG_INF, R(k->sink_on), R(s2));
    fj_ins(e, "max.f32 %s, %s, %s", R(mnew), R(m), R(s2));
    fj_ins(e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pinf), R(mnew));
    fj_ins(e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(muse), R(mnew), R(pinf));
    fj_ins(e, "sub.f32 %s, %s, %s", R(corr), R(m), R(muse));
    fj_ins(e, "ex2.approx.ftz.f32 %s, %s", R(corr), R(corr));
    fj_ins(e, "sub.f32 %s, %s, %s", R(t), R(s2), R(muse));
    if (p->p_offset) { /* l sums P scaled by 2^p_offset (FP8, softmax.c): the sink's term too */
        fj_comment(e, 2, "(the sink's term times 2^%d, as every P of l: FP8's P offset)", p->p_offset);
        fj_ins(e, "add.f32 %s, %s, 0f%08X", R(t), R(t), f32_bits((float)p->p_offset));
    }
    fj_ins(e, "ex2.approx.ftz.f32 %s, %s", R(t), R(t));
    fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(l), R(l), R(corr), R(t));
    fj_ins(e, "mov.f32 %s, %s", R(m), R(mnew));
}
