/*
 * ws_frame.c - the warp-specialized frame: a kernel of roles linked by mbarrier rings, emitted from the plan's role
 * table (roles.h) with the arch's role bodies (backend->async->role_body; sm_90a: sm90_roles.c, sm_100a:
 * sm100_roles.c). See ws_frame.h.
 *
 *   all threads: geometry, the smem base; thread 0 initializes every ring's barriers (the table's counts and
 *       offsets, slot by slot: each part's full barrier, then its empty one), a proxy fence; a CTA barrier
 *   dispatch: by warpgroup to a register group (from the last down), then by warp to a role of the group
 *   per group: its first role's banner, setmaxnreg (.dec gives registers back, .inc takes them), its roles' bodies
 *   tensor memory (roles.h tmem_cols, sm_100a): allocated by one warp before the CTA barrier, its address read by
 *       every thread after it; freed after the bodies of the roles that use it have met at a named barrier
 * The persistent schedule (below) is every role's: work tiles are (query block, head, batch), query blocks varying
 * fastest (a head's blocks run close together in time, so its K/V stays in L2), for causal kernels from the last
 * block down (the longest rows first). The grid is min(work tiles, SMs) CTAs and CTA c takes tile round x G + c in
 * each round; causal tiles differ in length, so odd rounds run the CTAs backwards (G - 1 - c), which pairs long
 * tiles with short ones along the diagonal (a plain round-robin gave some CTAs the long tile of every round:
 * 1.3-1.4x slower on the H100; ordering all heads' longest tiles first instead loses the K/V reuse in L2).
 * The K/V ring runs on across work tiles: each work tile enters the loop at the stage the last one left.
 * Varlen batches (and plain causal kernels under FAJIT_CAUSAL_SCHED=lpt: plan.lpt) may take the dynamic longest-first
 * schedule instead (FJ_VARIANT_LPT, sched.c): the Q ring's producer
 * takes each tile from a global counter and hands it to the other roles through a smem slot beside its Q full
 * barrier; the roles ask the frame (fj_ws_sched_static, fj_ws_wait_q, fj_ws_tile_again, fj_ws_tile_loop_end) and
 * need not know which schedule runs.
 * PTX ISA: mbarrier (9.7.13.15), setmaxnreg (9.7.19.5), bar.sync.
 */
#include <stdio.h>
#include <string.h>

#include "async.h"
#include "kernel_abi.h"
#include "mask.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm100.h"
#include "ptx_templates/sm90.h"
#include "sched.h"
#include "tc05.h"
#include "seqlen.h"
#include "ws_frame.h"

#define R(reg) fj_r(k->e, reg)
#define TMA_OFF(field) ((int)offsetof(fj_fwd_params_tma, field))

/* ---- the work-tile schedule ------------------------------------------------------------------ */

/* dst = this CTA's work tile in round `round` (see the file comment); may be >= n_tiles (none). */
void fj_ws_tile_of_round(fj_kctx *k, fj_reg_t dst, fj_reg_t round)
{
    fj_emit *e = k->e;
    fj_reg_t cta = fj_alloc(e, k->b_r, 1), g = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "mov.u32 %s, %%ctaid.x", R(cta));
    fj_ins(e, "mov.u32 %s, %%nctaid.x", R(g));
    if (k->p->cfg.causal) {
        fj_reg_t t = fj_alloc(e, k->b_r, 1), odd = fj_alloc(e, k->b_p, 1);
        fj_comment(e, 2, "causal: odd rounds run the CTAs backwards, tile = round * G + (round odd ? G - 1 - cta : cta)");
        fj_ins(e, "and.b32 %s, %s, 1", R(t), R(round));
        fj_ins(e, "setp.ne.u32 %s, %s, 0", R(odd), R(t));
        fj_ins(e, "sub.u32 %s, %s, %s", R(t), R(g), R(cta));
        fj_ins(e, "sub.u32 %s, %s, 1", R(t), R(t));
        fj_ins(e, "selp.u32 %s, %s, %s, %s", R(cta), R(t), R(cta), R(odd));
    }
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(dst), R(round), R(g), R(cta));
}

/* l->tile = this CTA's work tile of round l->round; l->last = it has none in the next round (n_tiles: the
 * parameter, in a register). */
static void schedule_tile(fj_kctx *k, fj_ws_loop *l, fj_reg_t n_tiles)
{
    fj_emit *e = k->e;
    fj_reg_t next = fj_alloc(e, k->b_r, 1), r1 = fj_alloc(e, k->b_r, 1);
    fj_ws_tile_of_round(k, l->tile, l->round);
    fj_ins(e, "add.u32 %s, %s, 1", R(r1), R(l->round));
    fj_ws_tile_of_round(k, next, r1);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(l->last), R(next), R(n_tiles));
}

/* dst = the shared address of Q buffer (round % q_bufs)'s barriers (Q full / Q empty add their offsets). */
void fj_ws_q_barriers(fj_kctx *k, fj_reg_t round, fj_reg_t dst)
{
    if (k->p->q_bufs == 1) {
        fj_ins(k->e, "mov.u32 %s, %s", R(dst), R(k->smem));
        return;
    }
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(t), R(round));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 8, %s", R(dst), R(t), R(k->smem));
}

/* l->qbar = Q buffer (l->round % q_bufs)'s barriers, k->q_buf = that buffer's offset past plan.q_off. */
static void q_buffer(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_ws_q_barriers(k, l->round, l->qbar);
    if (p->q_bufs == 1) {
        fj_ins(k->e, "mov.u32 %s, 0", R(k->q_buf));
        return;
    }
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(t), R(l->round));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(k->q_buf), R(t), p->q_bytes);
}

static int lpt(const fj_plan *p) { return p->lpt; }

int fj_ws_sched_static(const fj_plan *p) { return !lpt(p); }

/* l->qbar / k->q_buf: the round's Q buffer; l->qpar: the parity of its use. */
static void q_round(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_comment(k->e, 1, "Q buffer round %% %d, its use round / %d (parity)", p->q_bufs, p->q_bufs);
    q_buffer(k, l);
    if (p->q_bufs == 2) fj_ins(k->e, "shr.u32 %s, %s, 1", R(l->qpar), R(l->round));
    else fj_ins(k->e, "mov.u32 %s, %s", R(l->qpar), R(l->round));
    fj_ins(k->e, "and.b32 %s, %s, 1", R(l->qpar), R(l->qpar));
}

/* The work tile's KV range from its m0 and lengths (l->n_end, l->mask_from, k->kv_first), then its Q round. */
static void decode_kv_range(fj_kctx *k, fj_ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_emit_kv_range(k, l->n_end, l->mask_from);
    if (p->variant & FJ_VARIANT_VARLEN) fj_seqlen_no_rows(k, l->n_end);
    if (fj_kv_has_first(p)) {
        fj_reg_t pr = fj_alloc(e, k->b_p, 1);
        int split = p->variant & FJ_VARIANT_SPLIT;
        fj_comment(e, 1, "%s: tiles [kv_first, n_end); an empty %s becomes [0, 0), so the loops start at j = "
                         "kv_first and 'no KV tile' stays n_end <= 0",
                   split ? "split-KV" : "local", split ? "split" : "range");
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->kv_first), R(l->n_end));
        fj_ins(e, "@%s mov.s32 %s, 0", R(pr), R(k->kv_first));
        fj_ins(e, "@%s mov.s32 %s, 0", R(pr), R(l->n_end));
    }
    q_round(k, l);
}

/* Decode l->tile (see the file comment). LPT with coordinates in the slot (sched.h FJ_LPT_COORDS): the producer
 * decodes it and writes them, the other roles read them. */
void fj_ws_decode_tile(fj_kctx *k, fj_ws_loop *l, int what)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    if (fj_sched_coords(p) && !(what & FJ_WS_TILE_PRODUCER)) {
        fj_sched_emit_take_coords(k, l->round, what & FJ_WS_DECODE_HEADS, what & FJ_WS_DECODE_ROWS);
        if (what & FJ_WS_DECODE_ROWS) decode_kv_range(k, l);
        return;
    }
    fj_reg_t nmb = fj_alloc(e, k->b_r, 1), hb = fj_alloc(e, k->b_r, 1), mb = fj_alloc(e, k->b_r, 1);
    fj_reg_t hq = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(nmb), TMA_OFF(n_mblocks));
    if (lpt(p)) {
        fj_sched_emit_decode(k, l->tile, mb, hb);
    } else {
        fj_comment(e, 1, "head-batch tile / n_mblocks, query block tile %% n_mblocks%s (a head's blocks run together: "
                         "its K/V stays in L2)",
                   p->cfg.causal ? " counted from the last (longest rows first)" : "");
        fj_ins(e, "rem.u32 %s, %s, %s", R(mb), R(l->tile), R(nmb));
        fj_ins(e, "div.u32 %s, %s, %s", R(hb), R(l->tile), R(nmb));
    }
    if (p->variant & FJ_VARIANT_SPLIT) {
        fj_reg_t n = fj_param_s32(k, FJ_DEC_OFF(k, splits));
        fj_comment(e, 1, "split-KV: then the split, split = rest %% splits, head-batch = rest / splits");
        fj_ins(e, "rem.u32 %s, %s, %s", R(k->split), R(hb), R(n));
        fj_ins(e, "div.u32 %s, %s, %s", R(hb), R(hb), R(n));
    }
    if (p->cfg.causal && !lpt(p)) {
        fj_ins(e, "sub.u32 %s, %s, %s", R(mb), R(nmb), R(mb));
        fj_ins(e, "sub.u32 %s, %s, 1", R(mb), R(mb));
    }
    if ((what & FJ_WS_DECODE_HEADS) && (p->variant & FJ_VARIANT_PACK)) {
        fj_reg_t grp = fj_param_s32(k, FJ_PARAM_OFF(group));
        fj_comment(e, 1, "GQA packing: head-batch counts KV heads, hkv = hb %% Hkv, b = hb / Hkv; the tile's query heads "
                         "are hkv x group + g (packed row g x Nq + i)");
        fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
        fj_ins(e, "div.u32 %s, %s, %s", R(hq), R(hq), R(grp));
        fj_ins(e, "rem.u32 %s, %s, %s", R(k->hkv), R(hb), R(hq));
        fj_ins(e, "div.u32 %s, %s, %s", R(k->b), R(hb), R(hq));
        fj_ins(e, "mul.lo.u32 %s, %s, %s", R(k->h), R(k->hkv), R(grp));
    } else if (what & FJ_WS_DECODE_HEADS) {
        fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
        fj_ins(e, "rem.u32 %s, %s, %s", R(k->h), R(hb), R(hq));
        fj_ins(e, "div.u32 %s, %s, %s", R(k->b), R(hb), R(hq));
        {
            fj_reg_t prm = fj_param_s32(k, FJ_PARAM_OFF(group));
            fj_ins(e, "div.u32 %s, %s, %s", R(k->hkv), R(k->h), R(prm));
        }
    }
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(k->m0), R(mb), p->cfg.block_m);
    if (!(what & FJ_WS_DECODE_ROWS)) return;
    if (p->variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_VARLEN)) {
        /* the batch: decoded above with the heads (the producer), else here (the consumers keep no heads) */
        fj_reg_t b = k->b;
        if (!(p->variant & FJ_VARIANT_VARLEN))
            fj_comment(e, 1, "per-sequence KV length: seqlens_k[b], clamped to [0, seqlen_k] (keys past it are masked; "
                             "TMA may load them inside the capacity)");
        if (!(what & FJ_WS_DECODE_HEADS)) {
            b = fj_alloc(e, k->b_r, 1);
            fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
            if (p->variant & FJ_VARIANT_PACK) { /* head-batch counts KV heads */
                fj_reg_t grp = fj_param_s32(k, FJ_PARAM_OFF(group));
                fj_ins(e, "div.u32 %s, %s, %s", R(hq), R(hq), R(grp));
            }
            fj_ins(e, "div.u32 %s, %s, %s", R(b), R(hb), R(hq));
        }
        if (p->variant & FJ_VARIANT_VARLEN) fj_seqlen_tile(k, b, what & FJ_WS_DECODE_HEADS);
        else fj_emit_seq_len(k, b, fj_param_s32(k, FJ_PARAM_OFF(seqlen_k)), k->seqlen_k);
    }
    decode_kv_range(k, l);
    if (fj_sched_coords(p) && (what & FJ_WS_TILE_PRODUCER)) fj_sched_emit_publish_coords(k, l->round);
}

/* ---- the KV tile order (plan.kv_desc) -----------------------------------------------------------------------------
 * A work tile's KV tiles are [first, n_end), first = kv_first (split-KV, local variants) or 0. Ascending, every role
 * walks j = first .. n_end - 1; descending, j = n_end - 1 .. first (FlashAttention-3's order: the diagonal's masked
 * tiles first). j is always the tile's position (its rows in K and V, its mask and bias), so the producer, the
 * transposers and the consumers agree on a tile by walking the same order; only the loop's start, step and end
 * tests below and the 'first / last tile walked' tests differ. An empty range (n_end <= first, made [0, 0) for
 * kv_first) runs no iteration either way: descending starts at j = n_end - 1 < first. */

/* j = the first KV tile walked: first (ascending), n_end - 1 (descending). */
void fj_ws_first_kv_tile(fj_kctx *k, const fj_ws_loop *l)
{
    if (k->p->kv_desc) {
        fj_comment(k->e, 1, "KV tiles descending: j = n_end - 1 down to the range's first");
        fj_ins(k->e, "sub.s32 %s, %s, 1", R(k->j), R(l->n_end));
    } else if (fj_kv_has_first(k->p)) fj_ins(k->e, "mov.u32 %s, %s", R(k->j), R(k->kv_first));
    else fj_ins(k->e, "mov.u32 %s, 0", R(k->j));
}

/* pr = j has left the work tile's range (no tile left to walk). */
void fj_ws_kv_done(fj_kctx *k, const fj_ws_loop *l, fj_reg_t pr)
{
    if (!k->p->kv_desc) fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
    else if (fj_kv_has_first(k->p)) fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(k->j), R(k->kv_first));
    else fj_ins(k->e, "setp.lt.s32 %s, %s, 0", R(pr), R(k->j));
}

/* j = the next tile walked. */
void fj_ws_kv_next(fj_kctx *k)
{
    fj_ins(k->e, "%s.s32 %s, %s, 1", k->p->kv_desc ? "sub" : "add", R(k->j), R(k->j));
}

/* pr = j is not the last tile walked (t: a u32 scratch register). */
void fj_ws_kv_not_last(fj_kctx *k, const fj_ws_loop *l, fj_reg_t t, fj_reg_t pr)
{
    if (!k->p->kv_desc) {
        fj_ins(k->e, "add.s32 %s, %s, 1", R(t), R(k->j));
        fj_ins(k->e, "setp.ne.s32 %s, %s, %s", R(pr), R(t), R(l->n_end));
    } else if (fj_kv_has_first(k->p)) fj_ins(k->e, "setp.ne.s32 %s, %s, %s", R(pr), R(k->j), R(k->kv_first));
    else fj_ins(k->e, "setp.ne.s32 %s, %s, 0", R(pr), R(k->j));
}

/* ---- varlen: the work tiles past their sequence's end are skipped ------------------------------------------------
 * The tiles cover the longest sequence's row blocks for every (head, sequence); a shorter sequence's blocks past its
 * end have nothing to compute. Producer and consumers walk the same schedule and skip the same tiles before either
 * touches a barrier, so the Q buffers, their parities and the O-free phases count the tiles run (l->round) while the
 * schedule counts its rounds (l->sched). A skipped tile costs its test: the decode and two cached loads. */

/* pr = work tile `tile` lies past its sequence's end (its query block's first row >= the sequence's length). */
static void varlen_tile_empty(fj_kctx *k, fj_reg_t tile, fj_reg_t pr)
{
    fj_emit *e = k->e;
    fj_reg_t nmb = fj_alloc(e, k->b_r, 1), mb = fj_alloc(e, k->b_r, 1), b = fj_alloc(e, k->b_r, 1);
    fj_reg_t start = fj_alloc(e, k->b_r, 1), len = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(nmb), TMA_OFF(n_mblocks));
    fj_ins(e, "rem.u32 %s, %s, %s", R(mb), R(tile), R(nmb));
    fj_ins(e, "div.u32 %s, %s, %s", R(b), R(tile), R(nmb));
    if (k->p->cfg.causal) {
        fj_ins(e, "sub.u32 %s, %s, %s", R(mb), R(nmb), R(mb));
        fj_ins(e, "sub.u32 %s, %s, 1", R(mb), R(mb));
    }
    {
        fj_reg_t hq = fj_param_s32(k, FJ_PARAM_OFF(heads_q));
        fj_ins(e, "div.u32 %s, %s, %s", R(b), R(b), R(hq));
    }
    fj_seqlen_q_bounds(k, b, start, len);
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(mb), R(mb), k->p->cfg.block_m);
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(mb), R(len));
}

/* From schedule round `sched` on (in place), past the tiles past their sequence's end: tile = this CTA's tile of
 * round sched afterwards, one that is not past its end or >= n (none left). */
void fj_ws_varlen_skip(fj_kctx *k, fj_reg_t sched, fj_reg_t tile, fj_reg_t n)
{
    fj_emit *e = k->e;
    char find[48], found[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "varlen_find", find, sizeof find);
    fj_label_new(e, "varlen_found", found, sizeof found);
    fj_comment(e, 1, "varlen: skip this CTA's work tiles that lie past their sequence's end");
    fj_label(e, find);
    fj_ws_tile_of_round(k, tile, sched);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(tile), R(n));
    fj_ins(e, "@%s bra.uni %s", R(pr), found);
    varlen_tile_empty(k, tile, pr);
    fj_ins(e, "@!%s bra.uni %s", R(pr), found);
    fj_ins(e, "add.u32 %s, %s, 1", R(sched), R(sched));
    fj_ins(e, "bra.uni %s", find);
    fj_label(e, found);
}

/* VARLEN schedule: l->tile = the next tile to run from l->sched on; with `last` (ping-pong consumers) l->last = it is
 * the CTA's last, the next one's round kept in l->sched_next. */
static void varlen_schedule_tile(fj_kctx *k, fj_ws_loop *l, fj_reg_t n, int last)
{
    fj_ws_varlen_skip(k, l->sched, l->tile, n);
    if (!last) return;
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->sched_next), R(l->sched));
    fj_ws_varlen_skip(k, l->sched_next, t, n);
    fj_ins(k->e, "setp.ge.u32 %s, %s, %s", R(l->last), R(t), R(n));
}

#ifndef FJ_LPT_CLAIM_EARLY /* 1: the claim in the loop head, a tile ahead (before session 9; an A/B build knob) */
#define FJ_LPT_CLAIM_EARLY 0
#endif
/* After a work tile: its round done, on to the next schedule round (ping-pong consumers: the one found ahead). LPT,
 * the producer: the next tile is claimed here, after the last K/V load of this one is issued (the ring's depth of KV
 * tiles before the consumers finish it: time for the atom and the next Q load). Claimed in the loop head instead -
 * a whole work tile before the CTA can start it - the order was longest-first in name only: a CTA that had just
 * begun a long tile also held the next one, and the kernel's tail was no better balanced than the static schedule's
 * (session 9 on the H100, ncu: the busiest SM 7.6% above the mean at D128 N4k causal MHA, 21% at D256; static 3.4%
 * and 3.9%). */
void fj_ws_next_round(fj_kctx *k, fj_ws_loop *l, int what)
{
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->round), R(l->round));
    if (lpt(k->p) && (what & FJ_WS_TILE_PRODUCER) && !FJ_LPT_CLAIM_EARLY) {
        fj_comment(k->e, 1, "lpt: claim the next tile now that this one's loads are issued");
        fj_sched_emit_fetch(k, l->sched_next);
    }
    if (!(k->p->variant & FJ_VARIANT_VARLEN) || lpt(k->p)) return;
    if (what & FJ_WS_TILE_LAST) fj_ins(k->e, "mov.u32 %s, %s", R(l->sched), R(l->sched_next));
    else fj_ins(k->e, "add.u32 %s, %s, 1", R(l->sched), R(l->sched));
}

/* ---- the dynamic longest-first schedule (LPT, sched.c) ----------------------------------------------------------
 * The producer takes the tile it claimed at the end of the last one (l->sched_next) past the empty runs; the other
 * roles wait for the round's Q (full) and read the tile the producer left in its slot (FJ_SCHED_NONE, >= n: none). */
static void lpt_schedule_tile(fj_kctx *k, fj_ws_loop *l, fj_reg_t n, int producer, const char *waited)
{
    if (producer) {
        fj_ins(k->e, "mov.u32 %s, %s", R(l->tile), R(l->sched_next));
        fj_sched_emit_resolve(k, l->tile, n);
        if (FJ_LPT_CLAIM_EARLY) fj_sched_emit_fetch(k, l->sched_next);
        return; /* (else the next one is claimed at the end of this one: fj_ws_next_round) */
    }
    q_round(k, l);
    fj_comment(k->e, 1, "lpt: wait for this work tile's Q, then read which tile it is");
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(k->p, FJ_BAR_Q_FULL, 0), l->qpar);
    if (waited) fj_label(k->e, waited);
    fj_sched_emit_take(k, l->round, l->tile);
}

/* The label the producer's loop head leaves to when the LPT schedule has no tile left (fj_ws_tile_loop_end). */
#define LPT_NONE_LABEL "$L_prod_none"

void fj_ws_sched_start(fj_kctx *k, fj_ws_loop *l, int what)
{
    if (k->p->variant & FJ_VARIANT_VARLEN) fj_ins(k->e, "mov.u32 %s, 0", R(l->sched));
    if (lpt(k->p) && (what & FJ_WS_TILE_PRODUCER)) {
        fj_comment(k->e, 1, "lpt: the first tile's index from the counter");
        fj_sched_emit_fetch(k, l->sched_next);
    }
}

void fj_ws_publish_tile(fj_kctx *k, fj_ws_loop *l)
{
    if (lpt(k->p)) fj_sched_emit_publish(k, l->round, l->tile);
}

void fj_ws_wait_q(fj_kctx *k, fj_ws_loop *l)
{
    if (lpt(k->p)) return; /* waited for in the loop head, which reads the tile it holds */
    fj_comment(k->e, 1, "wait for this work tile's Q");
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(k->p, FJ_BAR_Q_FULL, 0), l->qpar);
}

void fj_ws_tile_again(fj_kctx *k, fj_ws_loop *l)
{
    if (lpt(k->p)) /* its slot is rewritten only after a later round's Q empty */
        fj_sched_emit_take(k, l->round, l->tile);
    else fj_ws_tile_of_round(k, l->tile, k->p->variant & FJ_VARIANT_VARLEN ? l->sched : l->round);
}

void fj_ws_cta_has_tile(fj_kctx *k, fj_ws_loop *l, fj_reg_t t, fj_reg_t pr)
{
    fj_emit *e = k->e;
    if (lpt(k->p)) {
        fj_ins(e, "setp.ne.u32 %s, %s, %s", R(l->last), R(k->wg), R(k->wg));
        fj_ins(e, "setp.eq.u32 %s, %s, %s", R(pr), R(k->wg), R(k->wg));
        return;
    }
    fj_ins(e, "mov.u32 %s, %%ctaid.x", R(t));
    fj_ins(e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(l->n_end), TMA_OFF(n_tiles));
    if (k->p->variant & FJ_VARIANT_VARLEN) /* the CTA's first tile to run, not merely its first */
        fj_ws_varlen_skip(k, l->sched, t, l->n_end);
    fj_ins(e, "setp.lt.u32 %s, %s, %s", R(pr), R(t), R(l->n_end));
}

/* The tile loop's head: label `top`, the next work tile, or `exit` when there is none. */
void fj_ws_tile_loop_head(fj_kctx *k, fj_ws_loop *l, const char *top, int what, const char *exit)
{
    fj_ws_round_tile(k, l, top, what, exit, NULL);
}

void fj_ws_round_tile(fj_kctx *k, fj_ws_loop *l, const char *top, int what, const char *exit, const char *waited)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1), n = fj_alloc(k->e, k->b_r, 1);
    int producer = what & FJ_WS_TILE_PRODUCER;
    if (top) fj_label(k->e, top);
    fj_ins(k->e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(n), TMA_OFF(n_tiles));
    if (lpt(k->p))
        lpt_schedule_tile(k, l, n, producer, waited);
    else if (k->p->variant & FJ_VARIANT_VARLEN)
        varlen_schedule_tile(k, l, n, what & FJ_WS_TILE_LAST);
    else
        schedule_tile(k, l, n);
    fj_ins(k->e, "setp.ge.u32 %s, %s, %s", R(pr), R(l->tile), R(n));
    fj_ins(k->e, "@%s bra.uni %s", R(pr), lpt(k->p) && producer ? LPT_NONE_LABEL : exit);
    fj_ws_decode_tile(k, l, what);
}

/* LPT, the producer: no tile left. Once the round's Q buffer is free, its slot says so (FJ_SCHED_NONE) and Q full
 * completes without a load: the other roles read it and leave. */
void fj_ws_tile_loop_end(fj_kctx *k, fj_ws_loop *l, int what, const char *exit)
{
    if (!lpt(k->p) || !(what & FJ_WS_TILE_PRODUCER)) return;
    fj_reg_t not_phase = fj_alloc(k->e, k->b_r, 1);
    fj_label(k->e, LPT_NONE_LABEL);
    q_round(k, l);
    fj_ins(k->e, "xor.b32 %s, %s, 1", R(not_phase), R(l->qpar));
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(k->p, FJ_BAR_Q_EMPTY, 0), not_phase);
    fj_ins(k->e, "mov.u32 %s, %u", R(l->tile), FJ_SCHED_NONE);
    fj_sched_emit_publish(k, l->round, l->tile);
    fj_ins(k->e, PTX_MBAR_ARRIVE, R(l->qbar), fj_ws_bar(k->p, FJ_BAR_Q_FULL, 0));
    fj_ins(k->e, "bra.uni %s", exit);
}

/* Jump to the loop body of stage l->ring (the stage the last work tile left the ring at). */
void fj_ws_ring_dispatch(fj_kctx *k, fj_ws_loop *l, char labels[][48])
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    for (int s = 1; s < k->p->cfg.stages; s++) {
        fj_ins(k->e, "setp.eq.u32 %s, %s, %d", R(pr), R(l->ring), s);
        fj_ins(k->e, "@%s bra.uni %s", R(pr), labels[s]);
    }
    fj_ins(k->e, "bra.uni %s", labels[0]);
}

/* At the end of stage s's body: on to stage s + 1, or after the last stage back to 0 in the next pass
 * (the barriers' next phase). */
void fj_ws_ring_next_stage(fj_kctx *k, int s, char labels[][48])
{
    if (s + 1 < k->p->cfg.stages) return; /* falls through into the next stage's body */
    fj_comment(k->e, 1, "stage 0 again: the barriers' next phase");
    fj_ins(k->e, "xor.b32 %s, %s, 1", R(k->phase), R(k->phase));
    fj_ins(k->e, "bra.uni %s", labels[0]);
}

/* This warp is done with the K or V tile of stage s: lane 0 arrives on its empty barrier. */
void fj_ws_release(fj_kctx *k, int which, int s)
{
    fj_emit_mbar_arrive(k, fj_ws_bar(k->p, which, s), k->leader);
}


/* ---- the rolled loops (plan.roll_stages, config roll = 1) -----------------------------------------------------
 * One body serves every stage of the ring: l->ring holds the stage of tile j (s), `sp` that of tile j - 1;
 * their barriers are addressed from registers (smem + 8 x FJ_WS_BARS_PER_STAGE x stage, then each barrier's
 * stage-0 offset) and their wgmma descriptors from k->ring_desc_k / ring_desc_v (mma_* with FJ_SLOT_RING).
 * The schedule is the unrolled one's, stage for stage: about half the PTX, a few more registers. */

/* bar = smem + the barrier block of `stage`; desc = the stage's descriptor offset (u64). */
void fj_ws_ring_point(fj_kctx *k, fj_reg_t stage, fj_reg_t bar, fj_reg_t desc)
{
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(bar), R(stage), 8 * FJ_WS_BARS_PER_STAGE, R(k->smem));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(t), R(stage), k->p->kv_tile_bytes >> 4);
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(desc), R(t));
}

/* sp = s; s = s + 1, and after the last stage 0 with the barriers' next phase. */
void fj_ws_ring_advance(fj_kctx *k, fj_ws_loop *l, const fj_ws_ring_regs *rr)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mov.u32 %s, %s", R(rr->sp), R(l->ring));
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->ring), R(l->ring));
    fj_ins(k->e, "setp.eq.u32 %s, %s, %d", R(pr), R(l->ring), k->p->cfg.stages);
    fj_ins(k->e, "@%s mov.u32 %s, 0", R(pr), R(l->ring));
    fj_ins(k->e, "@%s xor.b32 %s, %s, 1", R(pr), R(k->phase), R(k->phase));
}

fj_ws_stage fj_ws_stage_imm(int s)
{
    fj_ws_stage st = {s, {0, 0}};
    return st;
}

fj_ws_stage fj_ws_stage_ring(fj_reg_t bar)
{
    fj_ws_stage st = {FJ_SLOT_RING, bar};
    return st;
}

void fj_ws_stage_wait(fj_kctx *k, fj_ws_stage st, int which, fj_reg_t parity)
{
    if (st.slot == FJ_SLOT_RING) fj_emit_mbar_wait_at(k, st.bar, fj_ws_bar(k->p, which, 0), parity);
    else fj_emit_mbar_wait(k, fj_ws_bar(k->p, which, st.slot), parity);
}

void fj_ws_stage_release(fj_kctx *k, fj_ws_stage st, int which)
{
    if (st.slot == FJ_SLOT_RING) fj_emit_mbar_arrive_at(k, st.bar, fj_ws_bar(k->p, which, 0), k->leader);
    else fj_ws_release(k, which, st.slot);
}

fj_ws_ring_regs fj_ws_ring_regs_alloc(fj_kctx *k)
{
    fj_ws_ring_regs rr = {fj_alloc(k->e, k->b_r, 1), fj_alloc(k->e, k->b_r, 1), fj_alloc(k->e, k->b_r, 1)};
    k->ring_desc_k = fj_alloc(k->e, k->b_rd, 1);
    k->ring_desc_v = fj_alloc(k->e, k->b_rd, 1);
    return rr;
}

/* ---- setup, barriers, dispatch -------------------------------------------------------------------------------- */

/* Every ring's barriers, slot by slot (each part's full barrier, then each part's empty one), by one thread. */
static void init_rings(fj_kctx *k)
{
    const fj_role_table *t = &k->p->roles;
    for (int g = 0; g < t->n_rings; g++) {
        const fj_ring *r = &t->ring[g];
        if (r->note[0]) fj_comment(k->e, 1, "%s", r->note);
        for (int s = 0; s < r->slots; s++) {
            for (int q = 0; q < r->n_parts; q++)
                fj_ins(k->e, PTX_MBAR_INIT, R(k->smem), fj_ring_bar(r, q, s, 0), r->part[q].full_count);
            for (int q = 0; q < r->n_parts; q++)
                if (r->part[q].empty_count)
                    fj_ins(k->e, PTX_MBAR_INIT, R(k->smem), fj_ring_bar(r, q, s, 1), r->part[q].empty_count);
        }
    }
    fj_ins(k->e, PTX_FENCE_MBAR_INIT);
}

/* pr = reg >= first (reg a warp or warpgroup index; reg != 0 when first is 1 and nothing below remains), then a
 * uniform branch to the role's entry. */
static void branch_from(fj_kctx *k, fj_reg_t pr, fj_reg_t reg, int first, const char *label)
{
    if (first == 1) fj_ins(k->e, "setp.ne.u32 %s, %s, 0", R(pr), R(reg));
    else fj_ins(k->e, "setp.ge.u32 %s, %s, %d", R(pr), R(reg), first);
    fj_ins(k->e, "@%s bra.uni $L_%s", R(pr), label);
}

/* "$L_<label>": a role's entry. */
static const char *entry_label(const fj_role *r, char *buf, size_t size)
{
    snprintf(buf, size, "$L_%s", r->label);
    return buf;
}

/* The first role of the group after role i (n_roles when none). */
static int next_group(const fj_role_table *t, int i)
{
    int g = t->role[i].group;
    while (i < t->n_roles && t->role[i].group == g) i++;
    return i;
}

/* The register reallocation of a group (its first role's budget). */
static void group_regs(fj_kctx *k, const fj_role *r)
{
    const fj_role_table *t = &k->p->roles;
    if (r->regs_how == FJ_REGS_DEC) {
        const fj_role *taker = r;
        for (int i = 0; i < t->n_roles; i++)
            if (t->role[i].regs_how == FJ_REGS_INC) {
                taker = &t->role[i];
                break;
            }
        fj_comment(k->e, 1, "registers: %d per thread here, so the %s can take %d", r->regs, taker->name, taker->regs);
        fj_ins(k->e, PTX_SETMAXNREG_DEC, r->regs);
    } else if (r->regs_how == FJ_REGS_INC) {
        fj_comment(k->e, 1, "registers: %d per thread", r->regs);
        fj_ins(k->e, PTX_SETMAXNREG_INC, r->regs);
    }
}

/* Tensor memory (roles.h tmem_cols), before the CTA barrier: warp tmem_warp allocates the columns (their address to
 * smem + tmem_slot); the fence orders the allocation before the barrier. */
static void tmem_alloc(fj_kctx *k, fj_reg_t pr)
{
    const fj_role_table *t = &k->p->roles;
    fj_comment(k->e, 1, "tensor memory: warp %d allocates %d columns (the address lands in shared memory)", t->tmem_warp,
               t->tmem_cols);
    fj_ins(k->e, "setp.ne.u32 %s, %s, %d", R(pr), R(k->warp), t->tmem_warp);
    fj_ins(k->e, "@%s bra.uni $L_tmem_done", R(pr));
    fj_tc05_alloc(k, k->smem, t->tmem_slot, t->tmem_cols);
    fj_label(k->e, "$L_tmem_done");
    fj_ins(k->e, PTX_TC05_FENCE_BEFORE);
}

/* After the CTA barrier: every thread reads the tensor memory address. */
static void tmem_address(fj_kctx *k)
{
    fj_ins(k->e, PTX_TC05_FENCE_AFTER);
    fj_ins(k->e, "ld.shared.u32 %s, [%s+%d]", R(k->tmem), R(k->smem), k->p->roles.tmem_slot);
}

/* After the body of a role that touches tensor memory: the roles of tmem_roles meet (none has a tensor memory access
 * in flight), then the allocating warp frees the columns; the role's warps leave. */
static void tmem_teardown(fj_kctx *k, const fj_role *r)
{
    const fj_role_table *t = &k->p->roles;
    int threads = 0;
    for (int i = 0; i < t->n_roles; i++)
        if (t->tmem_roles >> i & 1) threads += 32 * t->role[i].warps;
    fj_comment(k->e, 1, "teardown: the tensor memory roles meet (%d threads), warp %d frees the columns", threads,
               t->tmem_warp);
    fj_ins(k->e, PTX_TC05_FENCE_BEFORE);
    fj_ins(k->e, PTX_BAR_SYNC_N, t->tmem_bar, threads);
    if (t->tmem_warp >= r->first_warp && t->tmem_warp < r->first_warp + r->warps) {
        if (r->warps > 1) {
            fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
            fj_ins(k->e, "setp.ne.u32 %s, %s, %d", R(pr), R(k->warp), t->tmem_warp);
            fj_ins(k->e, "@%s ret", R(pr));
        }
        fj_ins(k->e, PTX_TC05_FENCE_AFTER);
        fj_tc05_dealloc(k, k->tmem, t->tmem_cols);
    }
    fj_ins(k->e, "ret");
}

/* Roles [first, end) of one register group: the entry (not for the CTA's first group), the warpgroup index made
 * the role's instance index, the banner, the registers, the branch by warp to the group's later roles, the bodies. */
static void emit_group(fj_kctx *k, fj_ws_loop *l, int first, int end)
{
    const fj_plan *p = k->p;
    const fj_role_table *t = &p->roles;
    const fj_role *r = &t->role[first];
    int wg0 = r->first_warp / 4;
    char entry[48];
    if (first > 0) fj_label(k->e, entry_label(r, entry, sizeof entry));
    if (wg0 > 0) fj_ins(k->e, "sub.u32 %s, %s, %d", R(k->wg), R(k->wg), wg0);
    l->has_group_pred = end - first > 1;
    if (l->has_group_pred) l->group_pred = fj_alloc(k->e, k->b_p, 1);
    fj_banner(k->e, r->title, r->why);
    group_regs(k, r);
    for (int i = end - 1; i > first; i--) {
        fj_comment(k->e, 1, "%s", t->role[i].note);
        branch_from(k, l->group_pred, k->warp, t->role[i].first_warp, t->role[i].label);
    }
    p->backend->async->role_body(k, l, r);
    if (t->tmem_roles >> first & 1) tmem_teardown(k, r);
    for (int i = first + 1; i < end; i++) {
        fj_banner(k->e, t->role[i].title, t->role[i].why);
        fj_label(k->e, entry_label(&t->role[i], entry, sizeof entry));
        p->backend->async->role_body(k, l, &t->role[i]);
        if (t->tmem_roles >> i & 1) tmem_teardown(k, &t->role[i]);
    }
}

void fj_emit_fwd_ws_kernel(fj_kctx *k)
{
    const fj_plan *p = k->p;
    const fj_role_table *t = &p->roles;
    fj_emit *e = k->e;
    fj_ws_loop l;
    memset(&l, 0, sizeof l);
    p->backend->frag_desc(p, &k->frag);
    fj_emit_alloc_banks(k);
    k->wg = fj_alloc(e, k->b_r, 1);
    k->phase = fj_alloc(e, k->b_r, 1);
    k->params = fj_alloc(e, k->b_rd, 1);
    k->leader = fj_alloc(e, k->b_p, 1);
    k->q_buf = fj_alloc(e, k->b_r, 1);
    k->h = fj_alloc(e, k->b_r, 1);
    k->b = fj_alloc(e, k->b_r, 1);
    k->hkv = fj_alloc(e, k->b_r, 1);
    if (p->variant & FJ_VARIANT_SPLIT) k->split = fj_alloc(e, k->b_r, 1);
    if (p->variant & FJ_VARIANT_VARLEN) k->q_tma_row = fj_alloc(e, k->b_r, 1), k->q_tma_seq = fj_alloc(e, k->b_r, 1);
    if (p->variant & FJ_VARIANT_VARLEN_K)
        k->kv_tma_delta = fj_alloc(e, k->b_r, 1), k->kv_tma_seq = fj_alloc(e, k->b_r, 1);
    /* the softmax roles' state (deferred O rescale, the rescale vote), the store leader, FP8's scales */
    k->corr = fj_alloc(e, k->b_f, k->frag.rows);
    k->rescale_pred = fj_alloc(e, k->b_p, 1);
    k->wg_leader = fj_alloc(e, k->b_p, 1);
    if (p->fp8) k->score_scale = fj_alloc(e, k->b_f, 1), k->o_scale = fj_alloc(e, k->b_f, 1);
    if (p->fp8 && (p->cfg.mods & FAJIT_MOD_SOFTCAP)) k->cap_scale = fj_alloc(e, k->b_f, 1);
    if (t->tmem_cols) k->tmem = fj_alloc(e, k->b_r, 1);
    l.ring = fj_alloc(e, k->b_r, 1);
    l.tile = fj_alloc(e, k->b_r, 1);
    l.round = fj_alloc(e, k->b_r, 1);
    l.n_end = fj_alloc(e, k->b_r, 1);
    l.mask_from = fj_alloc(e, k->b_r, 1);
    l.qbar = fj_alloc(e, k->b_r, 1);
    l.qpar = fj_alloc(e, k->b_r, 1);
    l.last = fj_alloc(e, k->b_p, 1);
    l.vtail_par = p->vtail_bar ? fj_alloc(e, k->b_r, 1) : l.ring; /* (unused without it: no register declared) */
    l.pg_idx = l.pg_ent = l.ring; /* (likewise without PAGED) */
    l.sched = l.sched_next = l.round; /* (the schedule is the round without VARLEN or lpt) */
    if (p->variant & FJ_VARIANT_VARLEN) l.sched = fj_alloc(e, k->b_r, 1), l.sched_next = fj_alloc(e, k->b_r, 1);
    /* a plain lpt plan's producer fetches the next tile into sched_next: a register of its own, not the round
     * (aliased, the fetch overwrote the Q round and every role then waited on the wrong Q phase: the kernels hung) */
    else if (p->lpt) l.sched_next = fj_alloc(e, k->b_r, 1);
    if (p->variant & FJ_VARIANT_PAGED) l.pg_idx = fj_alloc(e, k->b_r, 1), l.pg_ent = fj_alloc(e, k->b_r, 1);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_banner(e, "Setup and warp roles", t->setup_why);
    fj_ins(e, "mov.u32 %s, %%tid.x", R(k->tid));
    fj_ins(e, "shr.u32 %s, %s, 5", R(k->warp), R(k->tid));
    fj_ins(e, "and.b32 %s, %s, 31", R(k->lane), R(k->tid));
    fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_q), FJ_PARAM_OFF(seqlen_q));
    fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_k), FJ_PARAM_OFF(seqlen_k));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(k->f_zero));
    fj_ins(e, "mov.u32 %s, fj_smem", R(k->smem));
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
    fj_ins(e, "@%s bra.uni $L_bars_done", R(pr));
    init_rings(k);
    fj_label(e, "$L_bars_done");
    if (t->tmem_cols) tmem_alloc(k, pr);
    fj_ins(e, "bar.sync 0");
    if (t->tmem_cols) tmem_address(k);
    fj_ins(e, "shr.u32 %s, %s, 2", R(k->wg), R(k->warp));
    if (p->lean & FJ_LEAN_WG_UNIFORM) {
        fj_comment(e, 1, "the warpgroup index from lane 0: ptxas then knows it is warp-uniform and keeps what derives from it "
                         "(descriptors, barrier ids) in uniform registers");
        fj_ins(e, "shfl.sync.idx.b32 %s, %s, 0, 31, -1", R(k->wg), R(k->wg));
    }
    int starts[FJ_MAX_ROLES], n = 0;
    for (int i = 0; i < t->n_roles; i = next_group(t, i)) starts[n++] = i;
    for (int g = n - 1; g > 0; g--) branch_from(k, pr, k->wg, t->role[starts[g]].first_warp / 4, t->role[starts[g]].label);
    for (int g = 0; g < n; g++) emit_group(k, &l, starts[g], g + 1 < n ? starts[g + 1] : t->n_roles);
    fj_label(e, "$L_exit");
    fj_ins(e, "ret");
}
