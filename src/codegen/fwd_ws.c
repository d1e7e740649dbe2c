/*
 * fwd_ws.c - the warp-specialized forward skeleton (sm_90a; the sm_100a path takes the same shape).
 *
 *   all threads: mbarrier init (thread 0), CTA barrier
 *   warpgroup 0, the producer: gives registers back (setmaxnreg.dec); one thread walks the CTA's work
 *       tiles: for each, Q into its buffer once the consumers have freed it, then for each KV tile j the
 *       TMA loads of K(j) and V(j) into the next stage of the ring once the consumers have freed it
 *   warpgroups 1.., the consumers (64 query rows of each work tile): take registers (setmaxnreg.inc);
 *       per work tile: for each KV tile wait for K(j), S = Q K^T (wgmma), free K's stage, mask, online
 *       softmax, wait for V(j), O += P V (wgmma, P from registers), free V's stage; then free Q and run
 *       the epilogue while the producer is already loading the next work tile
 * Work tiles are (query block, head, batch), query blocks varying fastest (a head's blocks run close
 * together in time, so its K/V stays in L2), for causal kernels from the last block down (the longest
 * rows first). Launches are persistent: the grid is min(work tiles, SMs) CTAs and CTA c takes tile
 * round * G + c in each round, so the producer loads the next tile's Q and K/V while the consumers
 * finish one, and the TMA-store epilogue of one tile runs under the next. Causal tiles differ in length;
 * odd rounds run the CTAs backwards (G - 1 - c), which pairs long tiles with short ones along the
 * diagonal (a plain round-robin gave some CTAs the long tile of every round: 1.3-1.4x slower on the
 * H100; ordering all heads' longest tiles first instead loses the K/V reuse in L2).
 * The K/V ring runs on across work tiles: the loop over KV tiles is written once per stage (stage offsets
 * and barriers are immediates) and each work tile enters it at the stage the last one left (a short
 * dispatch on a register).
 * With plan.overlap a consumer issues S(j + 1) = Q K(j + 1)^T and O += P(j) V(j) together and
 * exponentiates S(j + 1) while the PV product runs (FlashAttention-3, section 3.2); with plan.pingpong
 * the consumer warpgroups take turns issuing their GEMMs (named barriers 1 + warpgroup), so one's
 * softmax overlaps another's GEMMs (section 3.1).
 * Decode variants (fj_plan.variant): per-sequence lengths (SEQLENS), split-KV (SPLIT: work tiles per split, fp32
 * partials), GQA packing (PACK: one Q box of group x Nq rows) and paged K/V (PAGED: each K/V tile as TMA boxes
 * from the pool's pages, producer_paged); a sequence's last V tile is zero-filled past its length
 * (producer_v_tail).
 * The KV range and the mask are mask.c's, the softmax and the epilogue fwd_kernel.c's and softmax.c's; the MMAs are
 * the backend's (mma_qk, mma_pv, mma_wait); the pipeline is async.c's.
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
#include "sched.h"
#include "seqlen.h"

#define R(reg) fj_r(k->e, reg)
#define TMA_OFF(field) ((int)offsetof(fj_fwd_params_tma, field))

/* Named barriers of the ping-pong schedule: consumer warpgroup c waits on 1 + c. */
#define FJ_PINGPONG_BAR0 1
#define FJ_MAX_STAGES 4

/* Per-role loop state besides the kctx registers. */
typedef struct ws_loop {
    fj_reg_t ring;      /* u32: the stage the next KV tile goes to (0 .. stages - 1) */
    fj_reg_t tile;      /* u32: the current work tile, 0 .. n_tiles - 1 */
    fj_reg_t round;     /* u32: how many work tiles this CTA has started before this one */
    fj_reg_t n_end, mask_from; /* s32: KV tiles of the work tile, first one that needs a mask */
    fj_reg_t qbar;      /* u32: smem + 8 * (Q buffer index): its Q full / Q empty barriers */
    fj_reg_t qpar;      /* u32: parity of this use of the Q buffer */
    fj_reg_t last;      /* pred: this is the CTA's last work tile */
    fj_reg_t vtail_par; /* u32, producer, plan.vtail_bar: parity of the V-tail barrier's next phase */
    fj_reg_t pg_idx, pg_ent; /* u32, producer, PAGED: a page index of the work tile's sequence (~0: none) and its
                                block-table entry, read a tile ahead (producer_page_ahead) */
    fj_reg_t sched, sched_next; /* u32, VARLEN: the schedule round of the work tile (round counts the tiles run, which
                                   skip those past their sequence's end); ping-pong consumers: the next one's */
    char stage_label[FJ_MAX_STAGES][48]; /* entry of the loop body for each stage */
    char next_tile[48]; /* where a work tile's loop leaves */
} ws_loop;

/* ---- the work-tile schedule ------------------------------------------------------------------ */

/* dst = this CTA's work tile in round `round` (see the file comment); may be >= n_tiles (none). */
static void tile_of_round(fj_kctx *k, fj_reg_t dst, fj_reg_t round)
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
static void schedule_tile(fj_kctx *k, ws_loop *l, fj_reg_t n_tiles)
{
    fj_emit *e = k->e;
    fj_reg_t next = fj_alloc(e, k->b_r, 1), r1 = fj_alloc(e, k->b_r, 1);
    tile_of_round(k, l->tile, l->round);
    fj_ins(e, "add.u32 %s, %s, 1", R(r1), R(l->round));
    tile_of_round(k, next, r1);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(l->last), R(next), R(n_tiles));
}

/* dst = the shared address of Q buffer (round % q_bufs)'s barriers (Q full / Q empty add their offsets). */
static void q_barriers(fj_kctx *k, fj_reg_t round, fj_reg_t dst)
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
static void q_buffer(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    q_barriers(k, l->round, l->qbar);
    if (p->q_bufs == 1) {
        fj_ins(k->e, "mov.u32 %s, 0", R(k->q_buf));
        return;
    }
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "and.b32 %s, %s, 1", R(t), R(l->round));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(k->q_buf), R(t), p->q_bytes);
}

/* What decode_tile computes: the query block (m0), the KV range and the Q buffer; the head, batch and
 * KV head. The consumers need the heads only in the epilogue and compute them there, so that they are
 * not live across the KV loop. */
enum { DECODE_ROWS = 1, DECODE_HEADS = 2, TILE_PRODUCER = 4 /* tile_loop_head: the producer's loop */ };

static int lpt(const fj_plan *p) { return (p->variant & FJ_VARIANT_LPT) != 0; }

/* l->qbar / k->q_buf: the round's Q buffer; l->qpar: the parity of its use. */
static void q_round(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_comment(k->e, 1, "Q buffer round %% %d, its use round / %d (parity)", p->q_bufs, p->q_bufs);
    q_buffer(k, l);
    if (p->q_bufs == 2) fj_ins(k->e, "shr.u32 %s, %s, 1", R(l->qpar), R(l->round));
    else fj_ins(k->e, "mov.u32 %s, %s", R(l->qpar), R(l->round));
    fj_ins(k->e, "and.b32 %s, %s, 1", R(l->qpar), R(l->qpar));
}

/* Decode l->tile (see the file comment). */
static void decode_tile(fj_kctx *k, ws_loop *l, int what)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
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
    if ((what & DECODE_HEADS) && (p->variant & FJ_VARIANT_PACK)) {
        fj_reg_t grp = fj_param_s32(k, FJ_PARAM_OFF(group));
        fj_comment(e, 1, "GQA packing: head-batch counts KV heads, hkv = hb %% Hkv, b = hb / Hkv; the tile's query heads "
                         "are hkv x group + g (packed row g x Nq + i)");
        fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
        fj_ins(e, "div.u32 %s, %s, %s", R(hq), R(hq), R(grp));
        fj_ins(e, "rem.u32 %s, %s, %s", R(k->hkv), R(hb), R(hq));
        fj_ins(e, "div.u32 %s, %s, %s", R(k->b), R(hb), R(hq));
        fj_ins(e, "mul.lo.u32 %s, %s, %s", R(k->h), R(k->hkv), R(grp));
    } else if (what & DECODE_HEADS) {
        fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
        fj_ins(e, "rem.u32 %s, %s, %s", R(k->h), R(hb), R(hq));
        fj_ins(e, "div.u32 %s, %s, %s", R(k->b), R(hb), R(hq));
        {
            fj_reg_t prm = fj_param_s32(k, FJ_PARAM_OFF(group));
            fj_ins(e, "div.u32 %s, %s, %s", R(k->hkv), R(k->h), R(prm));
        }
    }
    fj_ins(e, "mul.lo.u32 %s, %s, %d", R(k->m0), R(mb), p->cfg.block_m);
    if (!(what & DECODE_ROWS)) return;
    if (p->variant & (FJ_VARIANT_SEQLENS | FJ_VARIANT_VARLEN)) {
        /* the batch: decoded above with the heads (the producer), else here (the consumers keep no heads) */
        fj_reg_t b = k->b;
        if (!(p->variant & FJ_VARIANT_VARLEN))
            fj_comment(e, 1, "per-sequence KV length: seqlens_k[b], clamped to [0, seqlen_k] (keys past it are masked; "
                             "TMA may load them inside the capacity)");
        if (!(what & DECODE_HEADS)) {
            b = fj_alloc(e, k->b_r, 1);
            fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
            if (p->variant & FJ_VARIANT_PACK) { /* head-batch counts KV heads */
                fj_reg_t grp = fj_param_s32(k, FJ_PARAM_OFF(group));
                fj_ins(e, "div.u32 %s, %s, %s", R(hq), R(hq), R(grp));
            }
            fj_ins(e, "div.u32 %s, %s, %s", R(b), R(hb), R(hq));
        }
        if (p->variant & FJ_VARIANT_VARLEN) fj_seqlen_tile(k, b, what & DECODE_HEADS);
        else fj_emit_seq_len(k, b, fj_param_s32(k, FJ_PARAM_OFF(seqlen_k)), k->seqlen_k);
    }
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

/* j = the work tile's first KV tile: 0, or its split's first. */
static void first_kv_tile(fj_kctx *k)
{
    if (fj_kv_has_first(k->p)) fj_ins(k->e, "mov.u32 %s, %s", R(k->j), R(k->kv_first));
    else fj_ins(k->e, "mov.u32 %s, 0", R(k->j));
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
static void varlen_skip(fj_kctx *k, fj_reg_t sched, fj_reg_t tile, fj_reg_t n)
{
    fj_emit *e = k->e;
    char find[48], found[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "varlen_find", find, sizeof find);
    fj_label_new(e, "varlen_found", found, sizeof found);
    fj_comment(e, 1, "varlen: skip this CTA's work tiles that lie past their sequence's end");
    fj_label(e, find);
    tile_of_round(k, tile, sched);
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
static void varlen_schedule_tile(fj_kctx *k, ws_loop *l, fj_reg_t n, int last)
{
    varlen_skip(k, l->sched, l->tile, n);
    if (!last) return;
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->sched_next), R(l->sched));
    varlen_skip(k, l->sched_next, t, n);
    fj_ins(k->e, "setp.ge.u32 %s, %s, %s", R(l->last), R(t), R(n));
}

/* After a work tile: its round done, on to the next schedule round (ping-pong consumers: the one found ahead). */
static void next_round(fj_kctx *k, ws_loop *l, int ahead)
{
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->round), R(l->round));
    if (!(k->p->variant & FJ_VARIANT_VARLEN) || lpt(k->p)) return;
    if (ahead) fj_ins(k->e, "mov.u32 %s, %s", R(l->sched), R(l->sched_next));
    else fj_ins(k->e, "add.u32 %s, %s, 1", R(l->sched), R(l->sched));
}

/* LPT schedule (sched.c): the producer takes the tile fetched a tile ahead (l->sched_next) past the empty runs and
 * fetches the next; the consumers wait for the round's Q (full) and read the tile the producer left in its slot
 * (FJ_SCHED_NONE, >= n: none). */
static void lpt_schedule_tile(fj_kctx *k, ws_loop *l, fj_reg_t n, int producer)
{
    if (producer) {
        fj_ins(k->e, "mov.u32 %s, %s", R(l->tile), R(l->sched_next));
        fj_sched_emit_resolve(k, l->tile, n);
        fj_comment(k->e, 1, "lpt: the next tile's index, taken while this one's loads run");
        fj_sched_emit_fetch(k, l->sched_next);
        return;
    }
    q_round(k, l);
    fj_comment(k->e, 1, "lpt: wait for this work tile's Q, then read which tile it is");
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(k->p, FJ_BAR_Q_FULL, 0), l->qpar);
    fj_sched_emit_take(k, l->round, l->tile);
}

/* The tile loop's head: label `top`, the next work tile, or `exit` when there is none. */
static void tile_loop_head(fj_kctx *k, ws_loop *l, const char *top, int what, const char *exit)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1), n = fj_alloc(k->e, k->b_r, 1);
    fj_label(k->e, top);
    fj_ins(k->e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(n), TMA_OFF(n_tiles));
    if (lpt(k->p))
        lpt_schedule_tile(k, l, n, what & TILE_PRODUCER);
    else if (k->p->variant & FJ_VARIANT_VARLEN)
        varlen_schedule_tile(k, l, n, k->p->pingpong && !(what & DECODE_HEADS));
    else
        schedule_tile(k, l, n);
    fj_ins(k->e, "setp.ge.u32 %s, %s, %s", R(pr), R(l->tile), R(n));
    fj_ins(k->e, "@%s bra.uni %s", R(pr), exit);
    decode_tile(k, l, what);
}

/* Jump to the loop body of stage l->ring (the stage the last work tile left the ring at). */
static void dispatch_ring(fj_kctx *k, ws_loop *l, char labels[][48])
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
static void next_stage(fj_kctx *k, int s, char labels[][48])
{
    if (s + 1 < k->p->cfg.stages) return; /* falls through into the next stage's body */
    fj_comment(k->e, 1, "stage 0 again: the barriers' next phase");
    fj_ins(k->e, "xor.b32 %s, %s, 1", R(k->phase), R(k->phase));
    fj_ins(k->e, "bra.uni %s", labels[0]);
}

/* ---- producer ---------------------------------------------------------------------------------- */

/* O staged in the V ring (plan.o_stage 2): a work tile's first V load (j = 0, or kv_first of a local variant's
 * range) in round r > 0 waits until
 * every consumer warpgroup's TMA store of round r - 1 has read its O staging (O free, phase r - 1: parity
 * (r - 1) & 1). The parity names one phase: this load follows round r's Q load, which waited until every
 * consumer warp freed Q in round r - 1, so phase r - 2 (their round r - 2 epilogue) has completed, and
 * phase r cannot complete before this V arrives. */
static void producer_wait_o_free(fj_kctx *k, fj_reg_t round)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), par = fj_alloc(e, k->b_r, 1);
    fj_label_new(e, "o_free", skip, sizeof skip);
    fj_comment(e, 2, "O is staged in the V ring: a work tile's first V waits until the last tile's O stores read it");
    if (fj_mods_local(k->p)) fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(k->j), R(k->kv_first)); /* its first tile */
    else fj_ins(e, "setp.ne.s32 %s, %s, 0", R(pr), R(k->j));
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
static void producer_paged(fj_kctx *k, ws_loop *l, int tensor, int smem_off, fj_reg_t row, int bar_off)
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
static void producer_page_ahead(fj_kctx *k, ws_loop *l, fj_reg_t row)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t next = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_reg_t tab = fj_alloc(e, k->b_rd, 1), a = fj_alloc(e, k->b_rd, 1);
    fj_label_new(e, "page_ahead", skip, sizeof skip);
    fj_comment(e, 2, "paged: the next tile's first page entry, read ahead (when the work tile has a next tile, j + 1 < "
                     "n_end: its row is below the length)");
    fj_ins(e, "add.s32 %s, %s, 1", R(next), R(k->j));
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(next), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    fj_ins(e, "add.s32 %s, %s, %d", R(next), R(row), k->p->cfg.block_n);
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
static void producer_kv(fj_kctx *k, ws_loop *l, int tensor, int smem_off, fj_reg_t row, int bar_off)
{
    const fj_plan *p = k->p;
    if (p->variant & FJ_VARIANT_PAGED) {
        producer_paged(k, l, tensor, smem_off, row, bar_off);
        return;
    }
    fj_emit_mbar_expect_tx(k, bar_off, p->kv_tile_bytes);
    if (p->variant & FJ_VARIANT_VARLEN_K) { /* packed keys: the map clips at the sequence's end (seqlen.h) */
        fj_reg_t r = fj_alloc(k->e, k->b_r, 1);
        fj_ins(k->e, "add.s32 %s, %s, %s", R(r), R(row), R(k->kv_tma_delta));
        fj_emit_tma_boxes(k, tensor, k->smem, smem_off, p->cfg.block_n, r, k->hkv, k->kv_tma_seq, k->smem, bar_off);
        return;
    }
    fj_emit_tma_tile(k, tensor, k->smem, smem_off, p->cfg.block_n, row, k->hkv, k->smem, bar_off);
}

/* SEQLENS / PAGED: a V tile that reaches past the sequence's length (in k->seqlen_k) lands on the V-tail barrier
 * instead of V full[s]; then this thread zero-fills its rows past the length in every box (TMA loaded them as
 * stored, or - paged - left the stage's old rows where it loaded no page: a NaN there would reach O through
 * P = 0 x NaN), makes the writes visible to wgmma
 * (fence.proxy.async) and arrives on V full[s] itself, and branches to `done`. A whole tile falls through to
 * the plain V load that follows (producer_tile). */
static void producer_v_tail(fj_kctx *k, ws_loop *l, int s, fj_reg_t row, const char *done)
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

/* Tile j (register) into stage s: wait until the consumers freed it (parity `empty_parity`), then K and V. */
static void producer_tile(fj_kctx *k, ws_loop *l, int s, fj_reg_t empty_parity)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(row), R(k->j), p->cfg.block_n);
    fj_comment(k->e, 2, "K(j) -> stage %d once every consumer warp has freed it; the copy completes K full[%d]", s, s);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_EMPTY, s), empty_parity);
    producer_kv(k, l, FJ_TMA_K, p->k_off + s * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_K_FULL, s));
    fj_comment(k->e, 2, "V(j) -> stage %d likewise (V full[%d])", s, s);
    if (fj_ws_o_staged(p) == 2) producer_wait_o_free(k, l->round);
    fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_EMPTY, s), empty_parity);
    char done[48] = "";
    if (p->vtail_bar) {
        fj_label_new(k->e, "v_done", done, sizeof done);
        producer_v_tail(k, l, s, row, done);
    }
    producer_kv(k, l, FJ_TMA_V, p->v_off + s * p->kv_tile_bytes, row, fj_ws_bar(p, FJ_BAR_V_FULL, s));
    if (p->vtail_bar) fj_label(k->e, done);
    if (p->variant & FJ_VARIANT_PAGED) producer_page_ahead(k, l, row);
}

/* GQA packing: the Q map's box is (columns, Nq, group, 1) (the runtime's, per call; group x Nq <= block_m, one
 * row block), so each box load fills packed rows r = g x Nq + i of the tile from head h0 = hkv x group, row 0;
 * its bytes, group x Nq x row bytes, come from the parameters. Rows past group x Nq keep what the buffer held:
 * their S, P and O rows are never stored (each row's softmax is its own). */
static void producer_packed_q(fj_kctx *k, ws_loop *l, fj_reg_t dst)
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

/* LPT: no tile left. Once the round's Q buffer is free, its slot says so (FJ_SCHED_NONE) and Q full completes without
 * a load: the consumers read it and leave. */
static void producer_none(fj_kctx *k, ws_loop *l)
{
    fj_reg_t not_phase = fj_alloc(k->e, k->b_r, 1);
    fj_label(k->e, "$L_prod_none");
    q_round(k, l);
    fj_ins(k->e, "xor.b32 %s, %s, 1", R(not_phase), R(l->qpar));
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(k->p, FJ_BAR_Q_EMPTY, 0), not_phase);
    fj_ins(k->e, "mov.u32 %s, %u", R(l->tile), FJ_SCHED_NONE);
    fj_sched_emit_publish(k, l->round, l->tile);
    fj_ins(k->e, PTX_MBAR_ARRIVE, R(l->qbar), fj_ws_bar(k->p, FJ_BAR_Q_FULL, 0));
    fj_ins(k->e, "bra.uni $L_exit");
}

static void emit_producer(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), not_phase = fj_alloc(e, k->b_r, 1), dst = fj_alloc(e, k->b_r, 1);
    fj_banner(e, "Producer warpgroup: TMA loads",
              "One thread issues every copy; the other 127 have nothing to do and leave once the\n"
              "warpgroup has handed its registers to the consumers. Per work tile: Q into its buffer once\n"
              "the consumers have freed it (Q empty), then K(j) and V(j) to the next stage of the ring when\n"
              "the consumers have freed it (its empty barriers); the copies complete the full barriers.");
    if (p->producer_regs) {
        fj_comment(e, 1, "registers: %d per thread here, so the consumers can take %d", p->producer_regs, p->consumer_regs);
        fj_ins(e, PTX_SETMAXNREG_DEC, p->producer_regs);
    }
    if (p->fp8) {
        fj_comment(e, 1, "FP8: warps 1-%d transpose V (below); thread 0 of warp 0 loads", p->transpose_warps);
        fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->warp));
        fj_ins(e, "@%s bra.uni $L_transposer", R(pr));
    }
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
    fj_ins(e, "@%s bra $L_exit", R(pr));
    fj_ins(e, "mov.u64 %s, " FJ_FWD_PARAM_NAME, R(k->params));
    fj_ins(e, PTX_CVTA_PARAM, R(k->params), R(k->params));
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    if (p->variant & FJ_VARIANT_VARLEN) fj_ins(e, "mov.u32 %s, 0", R(l->sched));
    if (lpt(p)) {
        fj_comment(e, 1, "lpt: the first tile's index from the counter");
        fj_sched_emit_fetch(k, l->sched_next);
    }
    if (p->vtail_bar) fj_ins(e, "mov.u32 %s, 0", R(l->vtail_par));
    fj_label_new(e, "prod_tile", top, sizeof top);
    fj_label_new(e, "prod_next", l->next_tile, sizeof l->next_tile);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "prod_stage", l->stage_label[s], sizeof l->stage_label[s]);
    tile_loop_head(k, l, top, DECODE_ROWS | DECODE_HEADS | TILE_PRODUCER, lpt(p) ? "$L_prod_none" : "$L_exit");
    if (p->variant & FJ_VARIANT_PAGED) fj_ins(e, "mov.u32 %s, -1", R(l->pg_idx)); /* a new sequence: no entry read */
    fj_comment(e, 1, "Q: %d rows from m0 into its buffer (rows past Nq arrive as zeros) once its last use is done",
               p->cfg.block_m);
    fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(l->qpar));
    fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0), not_phase);
    if (lpt(p)) fj_sched_emit_publish(k, l->round, l->tile);
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
    first_kv_tile(k);
    dispatch_ring(k, l, l->stage_label);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j -> stage %d ----", s);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
        fj_ins(e, "@%s mov.u32 %s, %d", R(pr), R(l->ring), s);
        fj_ins(e, "@%s bra.uni %s", R(pr), l->next_tile);
        fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(k->phase));
        producer_tile(k, l, s, not_phase);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        next_stage(k, s, l->stage_label);
    }
    fj_label(e, l->next_tile);
    next_round(k, l, 0);
    fj_ins(e, "bra.uni %s", top);
    if (lpt(p)) producer_none(k, l);
}

/* FP8: the producer's warps 1..transpose_warps walk the work tiles and KV tiles as the loader does; per KV tile,
 * once V(j) is in stage s (V full) and the consumers have freed Vt's stage s (VT empty), they transpose it into
 * Vt (fp8_ws.c), make their writes visible to wgmma (fence.proxy.async), and every thread arrives on VT full[s]
 * and on V empty[s] (V's stage may be loaded again). */
static void emit_transposer(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], next[48], stage[FJ_MAX_STAGES][48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), not_phase = fj_alloc(e, k->b_r, 1);
    fj_fp8_lanes ln;
    fj_banner(e, "Producer warps 1..: the V transpose (FP8)",
              "FP8 wgmma reads B K-major only: V(j) [keys][head dims] becomes Vt(j) [head dims][keys] in its own\n"
              "ring, by ldmatrix.trans + prmt + stmatrix, keys in P's k order (fp8_layout.h).");
    fj_label(e, "$L_transposer");
    fj_fp8_emit_transpose_setup(k, &ln);
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    fj_label_new(e, "vt_tile", top, sizeof top);
    fj_label_new(e, "vt_next", next, sizeof next);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "vt_stage", stage[s], sizeof stage[s]);
    tile_loop_head(k, l, top, DECODE_ROWS, "$L_exit");
    first_kv_tile(k);
    dispatch_ring(k, l, stage);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, stage[s]);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
        fj_ins(e, "@%s mov.u32 %s, %d", R(pr), R(l->ring), s);
        fj_ins(e, "@%s bra.uni %s", R(pr), next);
        fj_ins(e, "xor.b32 %s, %s, 1", R(not_phase), R(k->phase));
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_V_FULL, s), k->phase);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_VT_EMPTY, s), not_phase);
        fj_ins(e, "bar.warp.sync -1"); /* the lanes leave the waits' loops together: ldmatrix / stmatrix are .aligned */
        fj_fp8_emit_transpose_tile(k, &ln, s);
        fj_ins(e, PTX_FENCE_PROXY_ASYNC_SMEM);
        fj_ins(e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_VT_FULL, s));
        fj_ins(e, PTX_MBAR_ARRIVE, R(k->smem), fj_ws_bar(p, FJ_BAR_V_EMPTY, s));
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        next_stage(k, s, stage);
    }
    fj_label(e, next);
    next_round(k, l, 0);
    fj_ins(e, "bra.uni %s", top);
}

/* ---- consumers ---------------------------------------------------------------------------------- */

/* This warp is done with the K or V tile of stage s: lane 0 arrives on its empty barrier. */
static void release(fj_kctx *k, int which, int s)
{
    fj_emit_mbar_arrive(k, fj_ws_bar(k->p, which, s), k->leader);
}

/* Q is read by S = Q K^T only: once the work tile's last S (tile j = n_end - 1) has completed, lane 0 of
 * each warp frees Q, so the producer loads the next work tile's Q (and, behind it, that tile's first K/V)
 * under this tile's last softmax, last PV and epilogue instead of after them. A work tile with no KV tile
 * frees Q in the epilogue (emit_consumer). */
static void release_q_if_last(fj_kctx *k, ws_loop *l)
{
    fj_emit *e = k->e;
    char skip[48];
    fj_reg_t t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "q_kept", skip, sizeof skip);
    fj_comment(e, 1, "the work tile's last S done (j + 1 = n_end): Q is free for the next work tile");
    fj_ins(e, "add.s32 %s, %s, 1", R(t), R(k->j));
    fj_ins(e, "setp.ne.s32 %s, %s, %s", R(pr), R(t), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), skip);
    q_barriers(k, l->round, t); /* not kept live across the loop: registers are tight with 3 warpgroups */
    fj_emit_mbar_arrive_at(k, t, fj_ws_bar(k->p, FJ_BAR_Q_EMPTY, 0), k->leader);
    fj_label(e, skip);
}

/* Mask (edge tiles only) and the online softmax of the S accumulators for tile j. */
static void consumer_softmax(fj_kctx *k, fj_reg_t mask_from)
{
    fj_emit *e = k->e;
    char nomask[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_emit_score_hook(k);
    fj_label_new(e, "no_mask", nomask, sizeof nomask);
    fj_emit_mask_skip(k, pr, mask_from, nomask);
    fj_emit_mask(k);
    fj_label(e, nomask);
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

/* Serial schedule: per KV tile S = QK^T, softmax, O += PV, each waited for before the next. */
static void consumer_loop_serial(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    dispatch_ring(k, l, l->stage_label);
    for (int s = 0; s < p->cfg.stages; s++) {
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j in stage %d ----", s);
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
        fj_ins(e, "@%s mov.u32 %s, %d", R(pr), R(l->ring), s);
        fj_ins(e, "@%s bra.uni %s", R(pr), l->next_tile);
        fj_comment(e, 1, "wait for K(j); S = Q K^T; then the stage's K is free");
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_FULL, s), k->phase);
        p->backend->mma_qk(k, s);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_K_EMPTY, s);
        release_q_if_last(k, l);
        consumer_softmax(k, l->mask_from);
        fj_comment(e, 1, "wait for V(j); O += P V; then the stage's V is free");
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_PV_FULL(p), s), k->phase);
        p->backend->pack_p(k);
        p->backend->mma_pv(k, s, FJ_KEYS_ALL);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_PV_EMPTY(p), s);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        next_stage(k, s, l->stage_label);
    }
}

/* Overlapped schedule (FlashAttention-3, Algorithm 2): the work tile's first KV tile - in stage s0, the
 * ring's current one - gets S and its softmax and P first (one prologue per stage, reached by the
 * dispatch); then the body of stage s issues S(j) = Q K(j)^T and O += P(j-1) V(j-1) (V in the stage
 * before), waits for S(j) only, exponentiates it while the PV product runs, waits for that, rescales O
 * when the softmax says so and packs P(j). The loop leaves through one tail per stage, which runs the
 * last PV. */
static void consumer_loop_overlap(fj_kctx *k, ws_loop *l, const turns *tn)
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
    dispatch_ring(k, l, pro);
    for (int s = 0; s < stages; s++) {
        fj_label(e, pro[s]);
        fj_comment(e, 1, "first KV tile of the work tile, in stage %d: S, its softmax and P", s);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_FULL, s), k->phase);
        turn_wait(k, tn);
        p->backend->mma_qk(k, s);
        turn_pass(k, tn, 0);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_K_EMPTY, s);
        release_q_if_last(k, l);
        k->defer_o_rescale = 0;
        k->o_zero = 1; /* O is still 0: no rescale */
        consumer_softmax(k, l->mask_from);
        k->o_zero = 0;
        p->backend->pack_p(k);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        if (s + 1 < stages) fj_ins(e, "bra.uni %s", l->stage_label[s + 1]);
        else next_stage(k, s, l->stage_label);
    }
    for (int s = 0; s < stages; s++) {
        int sp = (s + stages - 1) % stages;
        fj_label(e, l->stage_label[s]);
        fj_comment(e, 1, "---- KV tile j in stage %d; PV of tile j - 1 from stage %d ----", s, sp);
        if (s == 0) fj_ins(e, "xor.b32 %s, %s, 1", R(vph), R(k->phase)); /* tile j - 1 was the last pass's */
        else fj_ins(e, "mov.u32 %s, %s", R(vph), R(k->phase));
        fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
        fj_ins(e, "@%s bra.uni %s", R(pr), tail[sp]);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_K_FULL, s), k->phase);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_PV_FULL(p), sp), vph);
        turn_wait(k, tn);
        fj_comment(e, 1, "issue S(j) = Q K(j)^T, then O += P(j-1) V(j-1); wait for S(j) only");
        p->backend->mma_qk(k, s);
        p->backend->mma_pv(k, sp, FJ_KEYS_ALL);
        turn_pass(k, tn, 0);
        p->backend->mma_wait(k, 1);
        release(k, FJ_BAR_K_EMPTY, s);
        release_q_if_last(k, l);
        k->defer_o_rescale = 1;
        consumer_softmax(k, l->mask_from);
        fj_comment(e, 1, "PV(j-1) done: its V stage is free, O may be rescaled and P(j) packed");
        /* one wait for the whole warpgroup before the branch on the rescale vote: the vote is per warp, and
         * wgmma.wait_group is .aligned (every warp of the warpgroup at the same instruction). Waiting in each
         * arm instead let ptxas keep the ex2 block ahead of the wait, but compute-sanitizer synccheck reported
         * it ("mismatching warpgroup instruction pc between warps"), and it measured within +-1% on the H200 */
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_PV_EMPTY(p), sp);
        fj_emit_softmax_rescale_o(k);
        k->defer_o_rescale = 0;
        p->backend->pack_p(k);
        fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
        next_stage(k, s, l->stage_label);
    }
    for (int sp = 0; sp < stages; sp++) {
        fj_label(e, tail[sp]);
        fj_comment(e, 1, "last KV tile: its V is in stage %d; the ring goes on at stage %d", sp, (sp + 1) % stages);
        fj_emit_mbar_wait(k, fj_ws_bar(p, FJ_BAR_PV_FULL(p), sp), vph);
        turn_wait(k, tn);
        p->backend->mma_pv(k, sp, FJ_KEYS_ALL);
        turn_pass(k, tn, 1);
        p->backend->mma_wait(k, 0);
        release(k, FJ_BAR_PV_EMPTY(p), sp);
        fj_ins(e, "mov.u32 %s, %d", R(l->ring), (sp + 1) % stages);
        fj_ins(e, "bra.uni %s", l->next_tile);
    }
}

/* ---- the rolled loop (plan.roll_stages) ---------------------------------------------------------
 * One body serves every stage of the ring: l->ring holds the stage of tile j (s), `sp` that of tile j - 1;
 * their barriers are addressed from registers (smem + 8 x FJ_WS_BARS_PER_STAGE x stage, then each barrier's
 * stage-0 offset) and their wgmma descriptors from k->ring_desc_k / ring_desc_v (mma_* with FJ_SLOT_RING).
 * The schedule is the unrolled one's, stage for stage: about half the PTX, a few more registers. */
typedef struct ring_regs {
    fj_reg_t sp;            /* u32: the stage of tile j - 1 */
    fj_reg_t bar_s, bar_sp; /* u32: smem + the barrier block of stage s / sp */
} ring_regs;

/* bar = smem + the barrier block of `stage`; desc = the stage's descriptor offset (u64). */
static void ring_point(fj_kctx *k, fj_reg_t stage, fj_reg_t bar, fj_reg_t desc)
{
    fj_reg_t t = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(bar), R(stage), 8 * FJ_WS_BARS_PER_STAGE, R(k->smem));
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(t), R(stage), k->p->kv_tile_bytes >> 4);
    fj_ins(k->e, "cvt.u64.u32 %s, %s", R(desc), R(t));
}

/* sp = s; s = s + 1, and after the last stage 0 with the barriers' next phase. */
static void ring_advance(fj_kctx *k, ws_loop *l, const ring_regs *rr)
{
    fj_reg_t pr = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mov.u32 %s, %s", R(rr->sp), R(l->ring));
    fj_ins(k->e, "add.u32 %s, %s, 1", R(l->ring), R(l->ring));
    fj_ins(k->e, "setp.eq.u32 %s, %s, %d", R(pr), R(l->ring), k->p->cfg.stages);
    fj_ins(k->e, "@%s mov.u32 %s, 0", R(pr), R(l->ring));
    fj_ins(k->e, "@%s xor.b32 %s, %s, 1", R(pr), R(k->phase), R(k->phase));
}

static void ring_wait(fj_kctx *k, fj_reg_t bar, int which, fj_reg_t parity)
{
    fj_emit_mbar_wait_at(k, bar, fj_ws_bar(k->p, which, 0), parity);
}

static void ring_release(fj_kctx *k, fj_reg_t bar, int which)
{
    fj_emit_mbar_arrive_at(k, bar, fj_ws_bar(k->p, which, 0), k->leader);
}

static ring_regs ring_regs_alloc(fj_kctx *k)
{
    ring_regs rr = {fj_alloc(k->e, k->b_r, 1), fj_alloc(k->e, k->b_r, 1), fj_alloc(k->e, k->b_r, 1)};
    k->ring_desc_k = fj_alloc(k->e, k->b_rd, 1);
    k->ring_desc_v = fj_alloc(k->e, k->b_rd, 1);
    return rr;
}

/* consumer_loop_serial, rolled. */
static void consumer_loop_serial_rolled(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char body[48];
    ring_regs rr = ring_regs_alloc(k);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_label_new(e, "kv_ring", body, sizeof body);
    fj_label(e, body);
    fj_comment(e, 1, "---- KV tile j in stage ring (rolled: one body for every stage) ----");
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), l->next_tile);
    ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    fj_ins(e, "mov.b64 %s, %s", R(k->ring_desc_v), R(k->ring_desc_k));
    fj_comment(e, 1, "wait for K(j); S = Q K^T; then the stage's K is free");
    ring_wait(k, rr.bar_s, FJ_BAR_K_FULL, k->phase);
    p->backend->mma_qk(k, FJ_SLOT_RING);
    p->backend->mma_wait(k, 0);
    ring_release(k, rr.bar_s, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    consumer_softmax(k, l->mask_from);
    fj_comment(e, 1, "wait for V(j); O += P V; then the stage's V is free");
    ring_wait(k, rr.bar_s, FJ_BAR_V_FULL, k->phase);
    p->backend->pack_p(k);
    p->backend->mma_pv(k, FJ_SLOT_RING, FJ_KEYS_ALL);
    p->backend->mma_wait(k, 0);
    ring_release(k, rr.bar_s, FJ_BAR_V_EMPTY);
    fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    ring_advance(k, l, &rr);
    fj_ins(e, "bra.uni %s", body);
}

/* consumer_loop_overlap, rolled: one prologue, one body, one tail. */
static void consumer_loop_overlap_rolled(fj_kctx *k, ws_loop *l, const turns *tn)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char body[48], tail[48];
    ring_regs rr = ring_regs_alloc(k);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), vph = fj_alloc(e, k->b_r, 1);
    fj_label_new(e, "kv_ring", body, sizeof body);
    fj_label_new(e, "kv_tail", tail, sizeof tail);
    fj_comment(e, 1, "first KV tile of the work tile, in stage ring: S, its softmax and P");
    ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    ring_wait(k, rr.bar_s, FJ_BAR_K_FULL, k->phase);
    turn_wait(k, tn);
    p->backend->mma_qk(k, FJ_SLOT_RING);
    turn_pass(k, tn, 0);
    p->backend->mma_wait(k, 0);
    ring_release(k, rr.bar_s, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    k->defer_o_rescale = 0;
    k->o_zero = 1; /* O is still 0: no rescale */
    consumer_softmax(k, l->mask_from);
    k->o_zero = 0;
    p->backend->pack_p(k);
    fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    ring_advance(k, l, &rr);
    fj_label(e, body);
    fj_comment(e, 1, "---- KV tile j in stage ring; PV of tile j - 1 from stage sp (rolled: one body for every stage) ----");
    fj_comment(e, 1, "tile j - 1's V phase: the last pass's when j is in stage 0");
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(pr), R(l->ring));
    fj_ins(e, "xor.b32 %s, %s, 1", R(vph), R(k->phase));
    fj_ins(e, "selp.b32 %s, %s, %s, %s", R(vph), R(vph), R(k->phase), R(pr));
    fj_ins(e, "setp.ge.s32 %s, %s, %s", R(pr), R(k->j), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), tail);
    ring_point(k, l->ring, rr.bar_s, k->ring_desc_k);
    ring_point(k, rr.sp, rr.bar_sp, k->ring_desc_v);
    ring_wait(k, rr.bar_s, FJ_BAR_K_FULL, k->phase);
    ring_wait(k, rr.bar_sp, FJ_BAR_V_FULL, vph);
    turn_wait(k, tn);
    fj_comment(e, 1, "issue S(j) = Q K(j)^T, then O += P(j-1) V(j-1); wait for S(j) only");
    p->backend->mma_qk(k, FJ_SLOT_RING);
    p->backend->mma_pv(k, FJ_SLOT_RING, FJ_KEYS_ALL);
    turn_pass(k, tn, 0);
    p->backend->mma_wait(k, 1);
    ring_release(k, rr.bar_s, FJ_BAR_K_EMPTY);
    release_q_if_last(k, l);
    k->defer_o_rescale = 1;
    consumer_softmax(k, l->mask_from);
    fj_comment(e, 1, "PV(j-1) done: its V stage is free, O may be rescaled and P(j) packed");
    p->backend->mma_wait(k, 0); /* one wait for the whole warpgroup (see consumer_loop_overlap) */
    ring_release(k, rr.bar_sp, FJ_BAR_V_EMPTY);
    fj_emit_softmax_rescale_o(k);
    k->defer_o_rescale = 0;
    p->backend->pack_p(k);
    fj_ins(e, "add.s32 %s, %s, 1", R(k->j), R(k->j));
    ring_advance(k, l, &rr);
    fj_ins(e, "bra.uni %s", body);
    fj_label(e, tail);
    fj_comment(e, 1, "last KV tile: its V is in stage sp; the ring goes on at stage ring");
    ring_point(k, rr.sp, rr.bar_sp, k->ring_desc_v);
    ring_wait(k, rr.bar_sp, FJ_BAR_V_FULL, vph);
    turn_wait(k, tn);
    p->backend->mma_pv(k, FJ_SLOT_RING, FJ_KEYS_ALL);
    turn_pass(k, tn, 1);
    p->backend->mma_wait(k, 0);
    ring_release(k, rr.bar_sp, FJ_BAR_V_EMPTY);
    fj_ins(e, "bra.uni %s", l->next_tile);
}

static void emit_consumer(fj_kctx *k, ws_loop *l)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    char top[48], epi[48];
    turns tn = {fj_alloc(e, k->b_r, 1), fj_alloc(e, k->b_r, 1), fj_alloc(e, k->b_p, 1)};
    fj_reg_t t = fj_alloc(e, k->b_r, 1), pr = fj_alloc(e, k->b_p, 1), not_last_wg = fj_alloc(e, k->b_p, 1);
    fj_banner(e, "Consumer warpgroups: S = QK^T, softmax, O += PV",
              p->overlap ? "Warpgroup c owns query rows [64c, 64c + 64) of each work tile. KV tile j: wait for K(j),\n"
                           "issue S(j) = QK(j)^T and O += P(j-1) V(j-1) (wgmma), wait for S(j), free K's stage,\n"
                           "mask and exponentiate while the PV product runs, wait for it, free V's stage, rescale\n"
                           "O if the reference max moved, pack P(j). The last KV tile's PV runs after the loop."
                         : "Warpgroup c owns query rows [64c, 64c + 64) of each work tile. KV tile j: wait for\n"
                           "K(j), S = QK^T (wgmma, both operands from smem), free K's stage, mask, online softmax,\n"
                           "wait for V(j), O += PV (wgmma, P from registers), free V's stage.");
    if (p->consumer_regs) {
        fj_comment(e, 1, "registers: %d per thread", p->consumer_regs);
        fj_ins(e, PTX_SETMAXNREG_INC, p->consumer_regs);
    }
    p->backend->setup(k);
    fj_ins(e, "and.b32 %s, %s, 31", R(t), R(k->tid));
    fj_ins(e, "setp.eq.u32 %s, %s, 0", R(k->leader), R(t));
    fj_ins(e, "mov.u32 %s, 0", R(l->round));
    fj_ins(e, "mov.u32 %s, 0", R(l->ring));
    fj_ins(e, "mov.u32 %s, 0", R(k->phase));
    if (p->variant & FJ_VARIANT_VARLEN) fj_ins(e, "mov.u32 %s, 0", R(l->sched));
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
        if (lpt(p)) { /* which tile is the last is known only when the producer finds none: see $L_consumer_exit */
            fj_comment(e, 1, "lpt: the last warpgroup always lets warpgroup 0 start and passes every turn; warpgroup 0 "
                             "takes the pass nobody used when it leaves");
            fj_ins(e, "setp.ne.u32 %s, %s, %s", R(l->last), R(k->wg), R(k->wg));
            fj_ins(e, "setp.eq.u32 %s, %s, %s", R(pr), R(k->wg), R(k->wg));
        } else {
            fj_ins(e, "mov.u32 %s, %%ctaid.x", R(t));
            fj_ins(e, "ld.param.u32 %s, [" FJ_FWD_PARAM_NAME "+%d]", R(l->n_end), TMA_OFF(n_tiles));
            if (p->variant & FJ_VARIANT_VARLEN) /* the CTA's first tile to run, not merely its first */
                varlen_skip(k, l->sched, t, l->n_end);
            fj_ins(e, "setp.lt.u32 %s, %s, %s", R(pr), R(t), R(l->n_end));
        }
        fj_ins(e, "@%s bra.uni $L_no_first_turn", R(not_last_wg));
        fj_ins(e, "@%s bar.arrive %d, %d", R(pr), FJ_PINGPONG_BAR0, 32 * 4 * 2);
        fj_label(e, "$L_no_first_turn");
    }
    fj_label_new(e, "tile", top, sizeof top);
    fj_label_new(e, "epilogue", epi, sizeof epi);
    for (int s = 0; s < p->cfg.stages; s++) fj_label_new(e, "kv_stage", l->stage_label[s], sizeof l->stage_label[s]);
    memcpy(l->next_tile, epi, sizeof epi);
    tile_loop_head(k, l, top, DECODE_ROWS | (p->cfg.mods & FAJIT_MOD_ALIBI ? DECODE_HEADS : 0), "$L_consumer_exit");
    fj_emit_mods_start(k, k->h, k->b);
    if (p->fp8) {
        decode_tile(k, l, DECODE_HEADS);
        fj_fp8_emit_score_scale(k);
    }
    if (p->pingpong) fj_ins(e, "or.pred %s, %s, !%s", R(tn.pass), R(not_last_wg), R(l->last));
    p->backend->tile_start(k);
    fj_emit_init_accumulators(k);
    if (!lpt(p)) { /* (lpt: waited for in the loop head, which reads the tile it holds) */
        fj_comment(e, 1, "wait for this work tile's Q");
        fj_emit_mbar_wait_at(k, l->qbar, fj_ws_bar(p, FJ_BAR_Q_FULL, 0), l->qpar);
    }
    first_kv_tile(k);
    fj_ins(e, "setp.le.s32 %s, %s, 0", R(pr), R(l->n_end));
    fj_ins(e, "@%s bra.uni %s", R(pr), epi);
    if (p->roll_stages && p->overlap) consumer_loop_overlap_rolled(k, l, &tn);
    else if (p->roll_stages) consumer_loop_serial_rolled(k, l);
    else if (p->overlap) consumer_loop_overlap(k, l, &tn);
    else consumer_loop_serial(k, l);
    fj_label(e, epi);
    fj_banner(e, "Consumer epilogue",
              "Reduce l over the lanes sharing a row, scale O by 1/l, write LSE, store O (rows past Nq\n"
              "skipped). Then the next work tile. (Q was freed after the tile's last S = QK^T.)");
    fj_comment(e, 1, "a work tile with no KV tile frees Q here (the others did after their last S)");
    fj_ins(e, "setp.le.and.s32 %s, %s, 0, %s", R(pr), R(l->n_end), R(k->leader));
    q_barriers(k, l->round, t);
    fj_emit_mbar_arrive_at(k, t, fj_ws_bar(p, FJ_BAR_Q_EMPTY, 0), pr);
    fj_comment(e, 1, "the work tile, its head and batch again (not kept live across the KV loop)");
    if (lpt(p)) fj_sched_emit_take(k, l->round, l->tile); /* its slot is rewritten only after a later round's Q empty */
    else tile_of_round(k, l->tile, p->variant & FJ_VARIANT_VARLEN ? l->sched : l->round);
    decode_tile(k, l, DECODE_HEADS);
    if (p->fp8) fj_fp8_emit_o_scale(k);
    fj_emit_epilogue(k);
    next_round(k, l, p->pingpong);
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, "$L_consumer_exit");
    if (lpt(p) && p->pingpong) {
        fj_ins(e, "setp.eq.u32 %s, %s, 0", R(pr), R(k->wg));
        fj_ins(e, "@%s bar.sync %d, %d", R(pr), FJ_PINGPONG_BAR0, 32 * 4 * 2);
    }
    p->backend->finish(k);
    fj_ins(e, "bra.uni $L_exit");
}

void fj_emit_fwd_ws_kernel(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    ws_loop l;
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
    k->corr = fj_alloc(e, k->b_f, k->frag.rows);
    k->rescale_pred = fj_alloc(e, k->b_p, 1);
    k->wg_leader = fj_alloc(e, k->b_p, 1);
    if (p->fp8) k->score_scale = fj_alloc(e, k->b_f, 1), k->o_scale = fj_alloc(e, k->b_f, 1);
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
    l.sched = l.sched_next = l.round; /* (the schedule is the round without VARLEN) */
    if (p->variant & FJ_VARIANT_VARLEN) l.sched = fj_alloc(e, k->b_r, 1), l.sched_next = fj_alloc(e, k->b_r, 1);
    if (p->variant & FJ_VARIANT_PAGED) l.pg_idx = fj_alloc(e, k->b_r, 1), l.pg_ent = fj_alloc(e, k->b_r, 1);
    fj_reg_t pr = fj_alloc(e, k->b_p, 1);
    fj_banner(e, "Setup and warp roles",
              "Thread 0 initializes the mbarriers; after a CTA barrier warpgroup 0 becomes the producer\n"
              "and warpgroups 1.. the consumers. setmaxnreg moves registers from the first to the others;\n"
              "no CTA-wide barrier follows (the producer's idle warps leave early).");
    fj_ins(e, "mov.u32 %s, %%tid.x", R(k->tid));
    fj_ins(e, "shr.u32 %s, %s, 5", R(k->warp), R(k->tid));
    fj_ins(e, "and.b32 %s, %s, 31", R(k->lane), R(k->tid));
    fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_q), FJ_PARAM_OFF(seqlen_q));
    fj_ins(e, PTX_LD_PARAM_U32, R(k->seqlen_k), FJ_PARAM_OFF(seqlen_k));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(k->f_zero));
    fj_ins(e, "mov.u32 %s, fj_smem", R(k->smem));
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->tid));
    fj_ins(e, "@%s bra.uni $L_bars_done", R(pr));
    fj_emit_ws_bar_init(k);
    fj_label(e, "$L_bars_done");
    fj_ins(e, "bar.sync 0");
    fj_ins(e, "shr.u32 %s, %s, 2", R(k->wg), R(k->warp));
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(k->wg));
    fj_ins(e, "@%s bra.uni $L_consumer", R(pr));
    emit_producer(k, &l);
    if (p->fp8) emit_transposer(k, &l);
    fj_label(e, "$L_consumer");
    fj_ins(e, "sub.u32 %s, %s, 1", R(k->wg), R(k->wg));
    emit_consumer(k, &l);
    fj_label(e, "$L_exit");
    fj_ins(e, "ret");
}
