/*
 * softmax.c - online softmax and the epilogue normalization, written once for every arch path over the
 * fragment descriptor (backend.h). Nothing here knows which MMA produced the scores. (Masking, score
 * modification and the attention sinks' share of the denominator: mask.c.)
 *
 * Online softmax in the exp2 domain (FlashAttention-2, with the scale folded into one FMA), in two
 * steps the skeleton calls in turn (it may issue the next tile's S = QK^T between them):
 *   rebase:  mx = rowmax(S) * scale_log2; when the plan's test says so, for every row
 *            m_new = max(m, mx), c = 2^(m - m_new), l *= c, O *= c, m = m_new
 *   exp:     P = 2^(S * scale_log2 - m)                  one FMA + one ex2 per score
 *            l += rowsum(P)                              (l stays per-thread until the epilogue)
 * plan.rescale_slack picks the test: < 0 rebases every tile; >= 0 rebases (all rows of the warp,
 * one vote) only when some row's mx > m + slack. With slack > 0 ("lazy rescale") m is a reference
 * a little below the true running max: P <= 2^slack, and since O, l and LSE all use the same m the
 * result is unchanged - only the rare tiles that raise a max by more than 2^slack pay the O multiplies.
 * A row that has seen only masked scores keeps m = -inf; it subtracts 0 instead, so every P is
 * 2^-inf = 0 and no inf - inf NaN appears. The epilogue gives such a row O = 0 and LSE = -inf.
 *
 * Accuracy of the lazy rescale, and the weight test (plan.rescale_weight_log2 < 0). Rebasing on every
 * new max (FlashAttention-2/3) puts a row's largest score at P = 2^0 = 1, which bf16 / f16 hold with no
 * error, and its neighbours just under 1, where their relative step is finest. With slack alone m stays
 * at an earlier, lower max, so the largest P is 2^f for any f and carries a full rounding error - and in
 * the rows where one key dominates that term sets the error of O: about 1.3x FlashAttention's max error
 * on random inputs (scripts/softmax_numerics.py emulates both; issue 21 item 10). The weight test moves m
 * also when the new max would weigh more than about tau = 2^rescale_weight_log2 of the lane's partial l:
 * rebase when max over the thread's rows of (mx - m) > T, T = clamp(floor(log2 min l) + log2 tau, 0,
 * slack), from l before this tile's P (floor: tau/2 to tau). That is 3 (two rows a thread) to 7 (four)
 * SASS instructions per tile more than the slack test and no register kept across the loop; the cost is
 * the rebases it adds, mostly in a row block's first tiles, where l is still small: 1.7-3.5% of dense speed at
 * N <= 4096 on an H200, so both paths leave it off (rescale_weight_log2 0) for now (docs/ARCHITECTURE.md).
 * What matters is the key's weight in the row's FINAL l, not in the partial l of the first tiles: with
 * plan.rescale_weight_est the test uses l x 2^(floor log2 J - floor log2 j), J the work tile's KV tiles
 * and j those done (bfind of each; 3-5 integer instructions per tile, not per row), which drops about half
 * of the extra rebases (emulated: 24% of (tile, warp) steps at N 1500 on sm_90a against 54%, ratio to FA2
 * mean 1.03 max 1.18; scripts/softmax_numerics.py est80 / est90). Counting the tile's largest P rounded in l
 * does not help: the error is the near-max P's position in their binade, not one dominant key (fajit*_l16,
 * corr*: ratio unchanged).
 * plan.rescale_weight_held keeps T in a register, recomputed (from l with the tile's row sums) only at the end of a
 * tile whose vote moved m, behind that vote's branch: a tile that moves nothing issues what the slack test issues
 * (2 sub + max + setp against 2 add + 2 setp). Emulated (sa90 / sa80) the accuracy and the rebases of the per-tile
 * test; on an H200 (bench/results/h200-session17-2026-11-28.md) the ratio to FA2 fell from mean 1.47 / max 2.56 to
 * 1.02 / 1.16 (sm_90a) and 1.00 / 1.09 (sm_80), but the added rebases (at Nk 1024 43% of steps against 12%) cost
 * 1-4% at N 1024 and 0-2% at N 4096 on sm_90a, 2-5% on sm_80 (where D128's extra register also spills): off.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "mask.h"
#include "ptx_templates/common.h"
#include "soft_exp2.h"
#include "soft_tanh.h"

#define R(reg) fj_r(k->e, reg)

/* Tree reduction of n registers (op "max.f32" / "add.f32") into dst. Uses scratch registers. */
static void reduce_row(fj_kctx *k, const char *op, fj_reg_t dst, fj_reg_t src, const int *idx, int n)
{
    fj_reg_t t = fj_alloc(k->e, k->b_f, n);
    for (int i = 0; i < n / 2; i++) fj_ins(k->e, "%s %s, %s, %s", op, R(fj_at(t, i)), R(fj_at(src, idx[2 * i])), R(fj_at(src, idx[2 * i + 1])));
    if (n % 2) fj_ins(k->e, "mov.f32 %s, %s", R(fj_at(t, n / 2)), R(fj_at(src, idx[n - 1])));
    int m = (n + 1) / 2;
    while (m > 1) {
        for (int i = 0; i < m / 2; i++) fj_ins(k->e, "%s %s, %s, %s", op, R(fj_at(t, i)), R(fj_at(t, 2 * i)), R(fj_at(t, 2 * i + 1)));
        if (m % 2) fj_ins(k->e, "mov.f32 %s, %s", R(fj_at(t, m / 2)), R(fj_at(t, m - 1)));
        m = (m + 1) / 2;
    }
    fj_ins(k->e, "mov.f32 %s, %s", R(dst), R(t));
}

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void quad_reduce(fj_kctx *k, const char *op, fj_reg_t v)
{
    fj_reg_t t = fj_alloc(k->e, k->b_f, 1);
    for (int i = 0; i < k->frag.n_shuffles; i++) {
        fj_ins(k->e, PTX_SHFL_BFLY, R(t), R(v), k->frag.shuffle_xor[i]);
        fj_ins(k->e, "%s %s, %s, %s", op, R(v), R(v), R(t));
    }
}

#define FJ_MAX_ROW_VALS 512

/* idx[v] = the S register index of value v of row r. */
static void row_indices(fj_kctx *k, int r, int *idx)
{
    for (int v = 0; v < k->frag.s_vals; v++) idx[v] = k->frag.s_reg(k->p, r, v);
}

/* 1 if a row's values fit the index arrays above; else the emitter's sticky error is set. */
static int row_vals_fit(fj_kctx *k)
{
    if (k->frag.s_vals <= FJ_MAX_ROW_VALS) return 1;
    fj_emit_error(k->e, "online softmax: %d values per row exceed %d", k->frag.s_vals, FJ_MAX_ROW_VALS);
    return 0;
}

/* Row maxima of this tile, already scaled: mx[r] = max over the row's values and the quad * scale. */
static void tile_row_max(fj_kctx *k, int *idx, fj_reg_t scale, fj_reg_t mx)
{
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t x = fj_at(mx, r);
        row_indices(k, r, idx);
        fj_comment(k->e, 2, "row %d: tile max over the thread's values, then the quad", r);
        reduce_row(k, "max.f32", x, k->acc_s, idx, k->frag.s_vals);
        if (fj_alibi_folded(k->p)) {
            fj_comment(k->e, 2, "ALiBi folded: the thread's share of the bias, left out of S (mask.c)");
            fj_ins(k->e, "add.f32 %s, %s, %s", R(x), R(x), R(k->alibi_tile));
        }
        quad_reduce(k, "max.f32", x);
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(x), R(x), R(scale));
    }
    if (k->p->col_warps > 1) {
        fj_comment(k->e, 1, "the pair's other warp holds the other half of each row: max with its tile maxima");
        fj_emit_pair_reduce(k, "max.f32", mx, k->frag.rows);
    }
}

/* Softcap's row max ahead of its tanh. tanh is increasing and c > 0, so the row max of c tanh(s / c) is
 * c tanh(max s / c): the max of the raw scores needs no tanh result. Taken before the score hook, its
 * reduction (max.f32 tree, quad shuffles) sits in the basic block of the tanh.approx instructions and runs
 * while the MUFU works through them, instead of waiting for all of them; the tile's two remaining tanh.approx
 * (one a row) follow. A tile that needs the per-element mask takes the max of the capped, masked scores as
 * before (a masked -inf has no raw counterpart). Off with ALiBi (its bias joins after the cap), warp pairs
 * (the pair's exchange runs once a tile), FP8 (its scale is computed in the kernel) and on the sm_80 path, where
 * the runtime's compile for an sm_80 GPU (nvJitLink, whose ptxas 13.0 works as `ptxas -c`) keeps the raw and the
 * capped scores live at once: the heuristic's softcap tiles spilled 328 bytes (D64 br128 bc64 w4) and 192 (D128
 * br64 bc64 w4) with it, 0 without (229 / 201 registers). tanh.approx.f32 is
 * monotone to within its error: the max taken this way may sit an ulp under the capped scores' own, so a P
 * may be 2^(an ulp) > 1, which the lazy rescale's P <= 2^slack already allows. */
#ifndef FJ_SOFTCAP_EARLY_MAX
#define FJ_SOFTCAP_EARLY_MAX 1 /* -DFJ_SOFTCAP_EARLY_MAX=0: the max after the tanh, for an A/B (bench/softcap_ab.sh) */
#endif

int fj_softmax_early_max(const fj_plan *p)
{
    return FJ_SOFTCAP_EARLY_MAX && (p->cfg.mods & (FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI)) == FAJIT_MOD_SOFTCAP && p->col_warps <= 1 &&
           p->cfg.arch == FAJIT_ARCH_SM90A &&
           !p->fp8_off && !p->fp8;
}

/* Row maxima of the tile, unscaled (before the softmax scale): max over the thread's values, then the quad; of the
 * scores themselves (op NULL) or of op(s), op = abs.f32 (|s|) or neg.f32 (-s) (softcap's polynomial tile). idx:
 * scratch for a row's register indices. */
static void tile_row_max_raw(fj_kctx *k, int *idx, const char *op, fj_reg_t mx)
{
    int seq[FJ_MAX_ROW_VALS];
    fj_reg_t src = op ? fj_alloc(k->e, k->b_f, k->frag.s_vals) : k->acc_s;
    for (int v = 0; op && v < k->frag.s_vals; v++) seq[v] = v;
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t x = fj_at(mx, r);
        row_indices(k, r, idx);
        for (int v = 0; op && v < k->frag.s_vals; v++)
            fj_ins(k->e, "%s %s, %s", op, R(fj_at(src, v)), R(fj_at(k->acc_s, idx[v])));
        reduce_row(k, "max.f32", x, src, op ? seq : idx, k->frag.s_vals);
        quad_reduce(k, "max.f32", x);
    }
}

void fj_emit_scores(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from, const char *comment)
{
    int idx[FJ_MAX_ROW_VALS];
    char nomask[48], join[48];
    int early = fj_softmax_early_max(k->p) && row_vals_fit(k);
    k->tile_mx_ready = 0;
    if (early) {
        k->tile_mx = fj_alloc(k->e, k->b_f, k->frag.rows);
        fj_comment(k->e, 1, "softcap: the row max of the raw scores first (tanh is increasing: max c tanh(s / c) =");
        fj_comment(k->e, 2, "c tanh(max s / c)), so the reduction overlaps the tanh.approx below (softmax.c)");
        tile_row_max_raw(k, idx, NULL, k->tile_mx);
    }
    fj_emit_score_hook(k);
    fj_label_new(k->e, "no_mask", nomask, sizeof nomask);
    if (comment) fj_comment(k->e, 1, "%s", comment);
    fj_emit_mask_skip(k, pr, mask_from, nomask);
    fj_emit_mask(k);
    if (early) {
        fj_label_new(k->e, "tile_max", join, sizeof join);
        fj_comment(k->e, 1, "masked tile: the row max of the capped, masked scores");
        tile_row_max_raw(k, idx, NULL, k->tile_mx);
        fj_ins(k->e, "bra.uni %s", join);
    }
    fj_label(k->e, nomask);
    if (early) {
        fj_reg_t cs = fj_cap_scale(k);
        fj_comment(k->e, 1, "unmasked tile: cap the raw row max like the scores");
        for (int r = 0; r < k->frag.rows; r++) {
            fj_ins(k->e, "mul.f32 %s, %s, %s", R(fj_at(k->tile_mx, r)), R(fj_at(k->tile_mx, r)), R(cs));
            fj_ins(k->e, "tanh.approx.f32 %s, %s", R(fj_at(k->tile_mx, r)), R(fj_at(k->tile_mx, r)));
        }
        fj_label(k->e, join);
        k->tile_mx_ready = 1;
    }
}

static void scale_o(fj_kctx *k, fj_reg_t corr);

static int weight_test(const fj_plan *p) { return p->rescale_slack > 0 && p->rescale_weight_log2 < 0; }
int fj_weight_lag(const fj_plan *p) { return weight_test(p) && p->rescale_weight_lag && !p->rescale_weight_held; }
int fj_weight_held(const fj_plan *p) { return weight_test(p) && p->rescale_weight_held; }

/* t = the weight test's T = clamp(floor(log2 min_r l_r) + rescale_weight_log2 [+ the estimate's shift], 0, slack)
 * (top of this file), from rl (row_l, or row_l_lag). floor(log2 l) is l's exponent field, made a float by or-ing it
 * into 2^23's significand (l >= 0; l = 0 gives -127). done: 0 = the tiles before k->j were summed into l (the vote
 * ahead of this tile's P), 1 = tile k->j's too (the held threshold, set after the tile's row sums). */
static void weight_threshold(fj_kctx *k, fj_reg_t rl, fj_reg_t t, int done)
{
    const fj_plan *p = k->p;
    fj_reg_t e = fj_alloc(k->e, k->b_r, 1), l = fj_at(rl, 0);
    for (int r = 1; r < k->frag.rows; r++) {
        fj_ins(k->e, "min.f32 %s, %s, %s", R(t), R(l), R(fj_at(rl, r)));
        l = t;
    }
    fj_ins(k->e, "shr.b32 %s, %s, 23", R(e), R(l));
    if (p->rescale_weight_est && k->has_kv_end) {
        fj_reg_t a = fj_alloc(k->e, k->b_r, 1), b = fj_alloc(k->e, k->b_r, 1);
        int first = fj_kv_has_first(p);
        fj_comment(k->e, 2, "against the row's final l, estimated l x 2^(floor log2 J - floor log2 j): J tiles, j done");
        fj_reg_t n = k->j; /* tiles before this one (ascending from 0), adjusted below */
        int adj = done;
        if (p->kv_desc) { /* walked from kv_end - 1 down: kv_end - j tiles with this one */
            fj_ins(k->e, "sub.s32 %s, %s, %s", R(a), R(k->kv_end), R(k->j));
            n = a, adj = done - 1;
        } else if (first) {
            fj_ins(k->e, "sub.s32 %s, %s, %s", R(a), R(k->j), R(k->kv_first));
            n = a;
        }
        if (adj) fj_ins(k->e, "add.s32 %s, %s, %d", R(a), R(n), adj), n = a;
        fj_ins(k->e, "bfind.u32 %s, %s", R(a), R(n));
        if (first) fj_ins(k->e, "sub.s32 %s, %s, %s", R(b), R(k->kv_end), R(k->kv_first));
        fj_ins(k->e, "bfind.u32 %s, %s", R(b), R(first ? b : k->kv_end));
        fj_comment(k->e, 2, "(j = 0 gives bfind = -1: a larger T, and m = -inf rebases anyway; 0 <= J - j < 2^23)");
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(b), R(b), R(a));
        fj_ins(k->e, "add.s32 %s, %s, %s", R(e), R(e), R(b));
    }
    fj_ins(k->e, "or.b32 %s, %s, 0x4B000000", R(e), R(e));
    fj_ins(k->e, "sub.f32 %s, %s, 0f%08X", R(t), R(e), 0x4B000000u + (uint32_t)(127 - p->rescale_weight_log2));
    fj_ins(k->e, "max.f32 %s, %s, " PTX_F32_ZERO, R(t), R(t));
    fj_ins(k->e, "min.f32 %s, %s, 0f%08X", R(t), R(t), f32_bits((float)p->rescale_slack));
}

/* moved = some row of the thread needs a new reference max: max_r (mx_r - m_r) > T, the weight test's T
 * (weight_threshold: from l before this tile, or the held register). A row still at m = -inf gives +inf (any key
 * seen) or NaN, which max.f32 drops (nothing seen). */
static void weight_vote_pred(fj_kctx *k, fj_reg_t mx, fj_reg_t moved)
{
    const fj_plan *p = k->p;
    fj_reg_t d = fj_alloc(k->e, k->b_f, 1), t = fj_alloc(k->e, k->b_f, 1);
    fj_comment(k->e, 1, "lazy rescale with the weight test: move m when some row's max passes m + T, T = 0..%d "
                        "grows with log2 l (top of softmax.c)", p->rescale_slack);
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t dst = r ? t : d;
        fj_ins(k->e, "sub.f32 %s, %s, %s", R(dst), R(fj_at(mx, r)), R(fj_at(k->row_m, r)));
        if (r) fj_ins(k->e, "max.f32 %s, %s, %s", R(d), R(d), R(t));
    }
    if (fj_weight_held(p)) {
        fj_comment(k->e, 2, "(T as the last tile that moved m left it: set after that tile's row sums, below)");
        fj_ins(k->e, "setp.gt.f32 %s, %s, %s", R(moved), R(d), R(k->weight_t));
        return;
    }
    if (fj_weight_lag(p)) fj_comment(k->e, 2, "(l as it was one KV tile ago: the vote need not wait for the last row sums)");
    weight_threshold(k, fj_weight_lag(p) ? k->row_l_lag : k->row_l, t, 0);
    fj_ins(k->e, "setp.gt.f32 %s, %s, %s", R(moved), R(d), R(t));
}

/* New reference max for every row: m = max(m, mx); l *= c and O *= c with c = 2^(m_old - m_new).
 * A row whose max is still -inf subtracts 0 instead (c = 2^-inf = 0 on its all-zero O and l).
 * ALiBi's lookahead (mask.h) sets m up to g above the tile's max, m = max(m, mx + g).
 * guard (a predicate; bank -1: none): each write runs under it instead of behind a branch on it, so m, l and corr keep
 * their values where it is false (corr is read only under rescale_pred = guard). Guarded callers (fj_emit_softmax_split)
 * have the O rescale deferred or O still 0, so O is never scaled here for them. */
static void rebase_rows(fj_kctx *k, fj_reg_t mx, fj_reg_t scale, fj_reg_t guard)
{
    char pre[32] = "";
    if (guard.bank >= 0) snprintf(pre, sizeof pre, "@%s ", R(guard));
    fj_reg_t mnew = fj_alloc(k->e, k->b_f, 1), muse = fj_alloc(k->e, k->b_f, 1), pinf = fj_alloc(k->e, k->b_p, 1);
    fj_reg_t corr = k->defer_o_rescale ? k->corr : fj_alloc(k->e, k->b_f, k->frag.rows);
    fj_reg_t g = {-1, 0}, up = {-1, 0};
    int ahead = fj_alibi_lookahead(k->p);
    if (ahead) {
        g = fj_alloc(k->e, k->b_f, 1), up = fj_alloc(k->e, k->b_f, 1);
        fj_emit_alibi_lookahead(k, scale, g);
    }
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t m = fj_at(k->row_m, r), c = fj_at(corr, r);
        if (ahead) {
            fj_ins(k->e, "add.f32 %s, %s, %s", R(up), R(fj_at(mx, r)), R(g));
            fj_ins(k->e, "max.f32 %s, %s, %s", R(mnew), R(m), R(up));
        } else {
            fj_ins(k->e, "max.f32 %s, %s, %s", R(mnew), R(m), R(fj_at(mx, r)));
        }
        fj_ins(k->e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pinf), R(mnew));
        fj_ins(k->e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(muse), R(mnew), R(pinf));
        fj_ins(k->e, "sub.f32 %s, %s, %s", R(c), R(m), R(muse));
        fj_ins(k->e, "%sex2.approx.ftz.f32 %s, %s", pre, R(c), R(c));
        fj_ins(k->e, "%smov.f32 %s, %s", pre, R(m), R(mnew));
        fj_ins(k->e, "%smul.f32 %s, %s, %s", pre, R(fj_at(k->row_l, r)), R(fj_at(k->row_l, r)), R(c));
    }
    if (k->defer_o_rescale) return; /* fj_emit_softmax_rescale_o, once O is no longer an MMA in flight */
    if (k->o_zero) return;          /* 0 * c = 0 */
    scale_o(k, corr);
}

/* O *= corr, row by row. */
static void scale_o(fj_kctx *k, fj_reg_t corr)
{
    for (int r = 0; r < k->frag.rows; r++)
        for (int v = 0; v < k->frag.o_vals; v++) {
            const char *o = R(fj_at(k->acc_o, k->frag.o_reg(k->p, r, v)));
            fj_ins(k->e, "mul.f32 %s, %s, %s", o, o, R(fj_at(corr, r)));
        }
}

/* x = 2^x on the FMA units (soft_exp2.h gives the steps and the constants). */
static void emit_soft_exp2(fj_kctx *k, fj_reg_t x)
{
    fj_emit *e = k->e;
    fj_reg_t r = fj_alloc(e, k->b_f, 1), n = fj_alloc(e, k->b_f, 1), f = fj_alloc(e, k->b_f, 1);
    fj_reg_t p = fj_alloc(e, k->b_f, 1), rb = fj_alloc(e, k->b_r, 1), pb = fj_alloc(e, k->b_r, 1);
    fj_ins(e, "max.f32 %s, %s, 0f%08X", R(x), R(x), FJ_SOFT_EXP2_CLAMP_BITS);
    fj_ins(e, "add.rn.f32 %s, %s, 0f%08X", R(r), R(x), FJ_SOFT_EXP2_ROUND_BITS);
    fj_ins(e, "sub.rn.f32 %s, %s, 0f%08X", R(n), R(r), FJ_SOFT_EXP2_ROUND_BITS);
    fj_ins(e, "sub.rn.f32 %s, %s, %s", R(f), R(x), R(n));
    fj_ins(e, "mov.b32 %s, 0f%08X", R(p), fj_soft_exp2_coef[FJ_SOFT_EXP2_DEG]);
    for (int i = FJ_SOFT_EXP2_DEG - 1; i >= 0; i--)
        fj_ins(e, "fma.rn.f32 %s, %s, %s, 0f%08X", R(p), R(p), R(f), fj_soft_exp2_coef[i]);
    fj_ins(e, "mov.b32 %s, %s", R(rb), R(r));
    fj_ins(e, "mov.b32 %s, %s", R(pb), R(p));
    fj_ins(e, "shl.b32 %s, %s, 23", R(rb), R(rb));
    fj_ins(e, "add.s32 %s, %s, %s", R(pb), R(pb), R(rb));
    fj_ins(e, "mov.b32 %s, %s", R(x), R(pb));
}

/* Value v of a row is exponentiated in software when plan.soft_exp2 of each 8 are (spread evenly). */
static int soft_exp2_value(const fj_plan *p, int v) { return (v + 1) * p->soft_exp2 / 8 > v * p->soft_exp2 / 8; }

void fj_emit_exp2_value(fj_kctx *k, fj_reg_t x, int v)
{
    if (k->p->soft_exp2 > 0 && soft_exp2_value(k->p, v)) emit_soft_exp2(k, x);
    else fj_ins(k->e, "ex2.approx.ftz.f32 %s, %s", R(x), R(x));
}

/* P = 2^(S * scale - m) against the reference max m (the running max, or up to 2^slack below the
 * true one), l += rowsum(P). */
static void exponentiate_rows(fj_kctx *k, int *idx, fj_reg_t scale)
{
    fj_reg_t muse = fj_alloc(k->e, k->b_f, 1), sum = fj_alloc(k->e, k->b_f, 1), pinf = fj_alloc(k->e, k->b_p, 1);
    int soft = k->p->soft_exp2 > 0;
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t m = fj_at(k->row_m, r), l = fj_at(k->row_l, r);
        row_indices(k, r, idx);
        fj_comment(k->e, 2, "row %d: P = 2^(s * scale - m), one FMA and one ex2 per score; l += rowsum(P)", r);
        if (soft && r == 0)
            fj_comment(k->e, 1, "%d of every 8 exponentials on the FMA units (soft_exp2.h), the rest on the MUFU; the "
                                "row sums flush subnormals (a masked score's 2^-inf is one)", k->p->soft_exp2);
        fj_ins(k->e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pinf), R(m));
        fj_ins(k->e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(muse), R(m), R(pinf));
        if (k->p->p_offset) /* P = 2^(s * scale - (m - p_offset)): FP8's P in (0, 2^p_offset] (plan.p_offset) */
            fj_ins(k->e, "sub.f32 %s, 0f%08X, %s", R(muse), f32_bits((float)k->p->p_offset), R(muse));
        else
            fj_ins(k->e, "neg.f32 %s, %s", R(muse), R(muse));
        if (fj_alibi_folded(k->p)) /* + the thread's share of the ALiBi bias (mask.c) */
            fj_ins(k->e, "fma.rn.f32 %s, %s, %s, %s", R(muse), R(k->alibi_tile), R(scale), R(muse));
        for (int v = 0; v < k->frag.s_vals; v++) {
            const char *s = R(fj_at(k->acc_s, idx[v]));
            fj_ins(k->e, "fma.rn.ftz.f32 %s, %s, %s, %s", s, s, R(scale), R(muse));
            if (soft && soft_exp2_value(k->p, v)) emit_soft_exp2(k, fj_at(k->acc_s, idx[v]));
            else fj_ins(k->e, "ex2.approx.ftz.f32 %s, %s", s, s);
        }
        reduce_row(k, soft ? "add.ftz.f32" : "add.f32", sum, k->acc_s, idx, k->frag.s_vals);
        if (fj_weight_lag(k->p)) fj_ins(k->e, "mov.f32 %s, %s", R(fj_at(k->row_l_lag, r)), R(l));
        fj_ins(k->e, "add.f32 %s, %s, %s", R(l), R(l), R(sum));
    }
}

/* guarded = 0: fj_emit_softmax_rebase; 1: the rows' rebase under the vote's predicate (rebase_rows' guard), no branch. */
static void softmax_rebase(fj_kctx *k, int guarded)
{
    const fj_plan *p = k->p;
    int idx[FJ_MAX_ROW_VALS];
    if (!row_vals_fit(k)) return;
    fj_reg_t scale = p->fp8_off ? k->score_scale : fj_param_f32(k, FJ_PARAM_OFF(scale_log2));
    fj_reg_t mx = fj_alloc(k->e, k->b_f, k->frag.rows);
    if (k->tile_mx_ready) { /* fj_emit_scores found them (softcap): scale them */
        for (int r = 0; r < k->frag.rows; r++)
            fj_ins(k->e, "mul.f32 %s, %s, %s", R(fj_at(mx, r)), R(fj_at(k->tile_mx, r)), R(scale));
        k->tile_mx_ready = 0;
    } else {
        tile_row_max(k, idx, scale, mx);
    }
    if (p->rescale_slack < 0) {
        fj_comment(k->e, 1, "new running max m for every row; l and O scaled by 2^(m_old - m_new)");
        if (k->defer_o_rescale) fj_ins(k->e, "setp.eq.u32 %s, 0, 0", R(k->rescale_pred));
        rebase_rows(k, mx, scale, (fj_reg_t){-1, 0});
    } else {
        char skip[48];
        fj_reg_t lim = fj_alloc(k->e, k->b_f, 1), up = fj_alloc(k->e, k->b_p, 1);
        fj_reg_t any = k->defer_o_rescale ? k->rescale_pred : fj_weight_held(p) ? k->weight_any : fj_alloc(k->e, k->b_p, 1);
        fj_reg_t moved = fj_alloc(k->e, k->b_p, 1);
        if (p->rescale_slack > 0) {
            fj_comment(k->e, 1, "lazy rescale: m is a reference max, moved only when a row's max passes m + %d", p->rescale_slack);
            fj_comment(k->e, 2, "(exp2 domain). Until then P = 2^(s*scale - m) <= 2^%d = %d - no overflow in f32 or in",
                       p->rescale_slack, 1 << p->rescale_slack);
            fj_comment(k->e, 2, " f16/bf16 P - and O, l stay consistent with the same m. After the");
            fj_comment(k->e, 2, " first tiles the max almost never jumps by 2^%d: a warp vote skips the %d O multiplies.",
                       p->rescale_slack, k->frag.rows * k->frag.o_vals);
        } else {
            fj_comment(k->e, 1, "O rescale skipped by a warp vote when no row's max moved");
        }
        if (weight_test(p)) {
            weight_vote_pred(k, mx, moved);
        } else {
            fj_ins(k->e, "setp.ne.s32 %s, 0, 0", R(moved));
            for (int r = 0; r < k->frag.rows; r++) {
                fj_ins(k->e, "add.f32 %s, %s, 0f%08X", R(lim), R(fj_at(k->row_m, r)), f32_bits((float)p->rescale_slack));
                fj_ins(k->e, "setp.gt.f32 %s, %s, %s", R(up), R(fj_at(mx, r)), R(lim));
                fj_ins(k->e, "or.pred %s, %s, %s", R(moved), R(moved), R(up));
            }
        }
        if (guarded) {
            fj_comment(k->e, 1, "(no branch: the rows' rebase runs under the vote's predicate, so the tile's tanh, rebase and "
                                "exponentials stay one block for ptxas)");
            fj_ins(k->e, "vote.sync.any.pred %s, %s, -1", R(any), R(moved));
            rebase_rows(k, mx, scale, any);
            return;
        }
        fj_label_new(k->e, "no_rescale", skip, sizeof skip);
        fj_ins(k->e, "vote.sync.any.pred %s, %s, -1", R(any), R(moved));
        fj_ins(k->e, "@!%s bra.uni %s", R(any), skip);
        rebase_rows(k, mx, scale, (fj_reg_t){-1, 0});
        fj_label(k->e, skip);
    }
}

void fj_emit_softmax_rebase(fj_kctx *k) { softmax_rebase(k, 0); }

void fj_emit_softmax_rescale_o(fj_kctx *k)
{
    char skip[48];
    fj_label_new(k->e, "no_rescale_o", skip, sizeof skip);
    fj_comment(k->e, 1, "O *= 2^(m_old - m_new) for the rows whose reference max moved in this tile's rebase");
    fj_ins(k->e, "@!%s bra.uni %s", R(k->rescale_pred), skip);
    scale_o(k, k->corr);
    fj_label(k->e, skip);
}

void fj_emit_softmax_exp(fj_kctx *k)
{
    int idx[FJ_MAX_ROW_VALS];
    if (!row_vals_fit(k)) return;
    exponentiate_rows(k, idx, k->p->fp8_off ? k->score_scale : fj_param_f32(k, FJ_PARAM_OFF(scale_log2)));
    if (fj_weight_held(k->p) && k->o_zero) { /* a work tile's first KV tile: every row with a key rebased */
        fj_comment(k->e, 1, "the weight test's T from l with this tile's row sums, kept until m moves again");
        weight_threshold(k, k->row_l, k->weight_t, 1);
    }
}

void fj_emit_softmax_weight_update(fj_kctx *k, int deferred)
{
    if (!fj_weight_held(k->p) || !row_vals_fit(k)) return;
    char skip[48];
    fj_label_new(k->e, "weight_held", skip, sizeof skip);
    fj_comment(k->e, 1, "if this tile moved m: the weight test's T from l with the tile's row sums, kept until m moves again");
    fj_ins(k->e, "@!%s bra.uni %s", R(deferred ? k->rescale_pred : k->weight_any), skip);
    weight_threshold(k, k->row_l, k->weight_t, 1);
    fj_label(k->e, skip);
}

/* Softcap's tile in two copies (sm_90a consumers). With fj_emit_scores' order the tile is three blocks: the tanh, the
 * mask's branch, the rebase behind the vote's branch, then the exponentials; ptxas schedules each block apart, so the
 * MUFU ran dry between the last tanh and the first ex2 (the row max's two tanh.approx queued behind the tile's 64, then
 * the vote, the branch and the row's 32 FMAs before the first ex2: bench/results/softcap-sass-vs-fa3-2026-11-27.md).
 * Here the branch on the mask comes first and each side is one straight run. The unmasked tile is one block: the raw
 * row max and its tanh (which ptxas then issues among the scores' tanh, not behind them), the scores' tanh, the rebase
 * (its rows' writes under the vote's predicate: rebase_rows' guard) and the exponentials; ptxas interleaves it as
 * FlashAttention-3's one-block softmax, the ex2 queued right behind the last tanh. The masked tile (the diagonal, the
 * end of K) is fj_emit_scores' path. Only where the early max applies (so no ALiBi and its lookahead) and the O
 * rescale is deferred or O is still 0 (fj_softmax_split): the guarded rebase never scales O. */
#ifndef FJ_SOFTCAP_SPLIT
#define FJ_SOFTCAP_SPLIT 1 /* -DFJ_SOFTCAP_SPLIT=0: fj_emit_scores' one copy, for an A/B (bench/softcap_ab.sh) */
#endif

int fj_softmax_split(const fj_kctx *k)
{
    return FJ_SOFTCAP_SPLIT && fj_softmax_early_max(k->p) && (k->defer_o_rescale || k->o_zero) &&
           k->frag.s_vals <= FJ_MAX_ROW_VALS;
}

/* The unmasked tile with softcap's tanh on the FMA units (plan.cap_poly, soft_tanh.h), when a warp vote finds every
 * score of the warp's tile inside the polynomial's interval: |s| x cs <= BOUND, and cs >= CS_MIN (NaN fails both, so
 * such a tile keeps tanh.approx's result). The row max of the capped tile: cap_poly 1 takes it from max |s| (the
 * polynomial is odd and increasing, so poly(max |s|) bounds every capped score of the row from above, by at most
 * 2 tanh(BOUND) c log2 e in the exponent: P stays a normal bf16 number); cap_poly 2 from max s, with min s for the
 * vote (the exact max: an f16 P would underflow under the bound). Else the tile falls through to the tanh.approx
 * copy after this one. */
static void softcap_poly_tile(fj_kctx *k, const char *done)
{
    char mufu[48];
    int idx[FJ_MAX_ROW_VALS];
    int exact = k->p->cap_poly == 2, rows = k->frag.rows;
    fj_reg_t cs = fj_cap_scale(k), lo = exact ? fj_alloc(k->e, k->b_f, rows) : k->tile_mx;
    fj_reg_t ok = fj_alloc(k->e, k->b_p, 1), g = fj_alloc(k->e, k->b_f, 1), b = fj_alloc(k->e, k->b_f, 3);
    uint32_t bound_bits = FJ_SOFT_TANH_BOUND_BITS;
    float bound;
    memcpy(&bound, &bound_bits, sizeof bound);
    fj_label_new(k->e, "cap_mufu", mufu, sizeof mufu);
    fj_comment(k->e, 1, "unmasked tile, softcap on the FMA units if every score of the warp has |s| * scale / c <= %g "
                        "(soft_tanh.h; a vote, else the tanh.approx copy below)", (double)bound);
    if (exact) {
        fj_comment(k->e, 2, "the row max of s (the capped max: t is increasing) and of -s (for the vote)");
        tile_row_max_raw(k, idx, NULL, k->tile_mx);
        tile_row_max_raw(k, idx, "neg.f32", lo);
    } else {
        fj_comment(k->e, 2, "the row max of |s|: the vote's bound and, capped, the tile's row max (an upper bound of the");
        fj_comment(k->e, 2, "capped scores' max: the polynomial is odd and increasing)");
        tile_row_max_raw(k, idx, "abs.f32", k->tile_mx);
    }
    fj_ins(k->e, "setp.ge.f32 %s, %s, 0f%08X", R(ok), R(cs), FJ_SOFT_TANH_CS_MIN_BITS);
    for (int r = 0; r < rows; r++) {
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(g), R(fj_at(k->tile_mx, r)), R(cs));
        fj_ins(k->e, "setp.le.and.f32 %s, %s, 0f%08X, %s", R(ok), R(g), FJ_SOFT_TANH_BOUND_BITS, R(ok));
        if (!exact) continue;
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(g), R(fj_at(lo, r)), R(cs));
        fj_ins(k->e, "setp.le.and.f32 %s, %s, 0f%08X, %s", R(ok), R(g), FJ_SOFT_TANH_BOUND_BITS, R(ok));
    }
    fj_ins(k->e, "vote.sync.all.pred %s, %s, -1", R(ok), R(ok));
    fj_ins(k->e, "@!%s bra.uni %s", R(ok), mufu);
    fj_emit_softcap_poly_coefs(k, b);
    for (int r = 0; r < rows; r++) fj_emit_softcap_poly_value(k, b, fj_at(k->tile_mx, r));
    fj_emit_softcap_poly(k, b);
    k->tile_mx_ready = 1;
    softmax_rebase(k, 1);
    fj_emit_softmax_exp(k);
    fj_ins(k->e, "bra.uni %s", done);
    fj_label(k->e, mufu);
}

void fj_emit_softmax_split(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from)
{
    int idx[FJ_MAX_ROW_VALS];
    char fast[48], done[48];
    k->tile_mx = fj_alloc(k->e, k->b_f, k->frag.rows);
    fj_label_new(k->e, "cap_fast", fast, sizeof fast);
    fj_label_new(k->e, "cap_done", done, sizeof done);
    fj_emit_mask_skip(k, pr, mask_from, fast);
    fj_comment(k->e, 1, "masked tile: cap, mask, the row max of the capped, masked scores; rebase, exponentials");
    fj_emit_score_hook(k);
    fj_emit_mask(k);
    tile_row_max_raw(k, idx, NULL, k->tile_mx);
    k->tile_mx_ready = 1;
    softmax_rebase(k, 0);
    fj_emit_softmax_exp(k);
    fj_ins(k->e, "bra.uni %s", done);
    fj_label(k->e, fast);
    if (k->p->cap_poly) softcap_poly_tile(k, done);
    fj_comment(k->e, 1, "unmasked tile, one block: the row max of the raw scores, capped (tanh is increasing: max c tanh(s / c)");
    fj_comment(k->e, 1, "= c tanh(max s / c)); the scores capped; rebase, exponentials");
    tile_row_max_raw(k, idx, NULL, k->tile_mx);
    fj_reg_t cs = fj_cap_scale(k);
    for (int r = 0; r < k->frag.rows; r++) {
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(fj_at(k->tile_mx, r)), R(fj_at(k->tile_mx, r)), R(cs));
        fj_ins(k->e, "tanh.approx.f32 %s, %s", R(fj_at(k->tile_mx, r)), R(fj_at(k->tile_mx, r)));
    }
    fj_emit_score_hook(k);
    k->tile_mx_ready = 1;
    softmax_rebase(k, 1);
    fj_emit_softmax_exp(k);
    fj_label(k->e, done);
}

void fj_emit_normalize(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t pos = fj_alloc(k->e, k->b_p, 1), inv = fj_alloc(k->e, k->b_f, 1), lse = fj_alloc(k->e, k->b_f, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), pw = fj_alloc(k->e, k->b_p, 1), a = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t has_lse = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "setp.ne.u64 %s, %s, 0", R(has_lse), R(k->lse_ptr));
    fj_ins(k->e, "setp.eq.and.s32 %s, %s, 0, %s", R(has_lse), R(k->col_base_o), R(has_lse));
    int pairs = p->col_warps > 1;
    if (pairs) {
        fj_comment(k->e, 1, "l summed over the lanes sharing a row, then over the warp pair (each warp summed its keys)");
        for (int r = 0; r < k->frag.rows; r++) quad_reduce(k, "add.f32", fj_at(k->row_l, r));
        fj_emit_pair_reduce(k, "add.f32", k->row_l, k->frag.rows);
    }
    int sinks = p->cfg.mods & FAJIT_MOD_SINKS;
    fj_reg_t corr = sinks ? fj_alloc(k->e, k->b_f, 1) : inv;
    fj_emit_sinks_prep(k);
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t l = fj_at(k->row_l, r), m = fj_at(k->row_m, r);
        fj_comment(k->e, 1, "row %d: %sO *= 1/l (0 when the row saw no key)", r, pairs ? "" : "l summed over the quad, ");
        if (!pairs) quad_reduce(k, "add.f32", l);
        fj_emit_alibi_row_shift(k, r);
        if (sinks) fj_emit_sink_fold(k, r, corr);
        fj_ins(k->e, "setp.gt.f32 %s, %s, " PTX_F32_ZERO, R(pos), R(l));
        fj_ins(k->e, "rcp.approx.ftz.f32 %s, %s", R(inv), R(l));
        fj_ins(k->e, "selp.f32 %s, %s, " PTX_F32_ZERO ", %s", R(inv), R(inv), R(pos));
        if (sinks) fj_ins(k->e, "mul.f32 %s, %s, %s", R(inv), R(inv), R(corr)); /* O was kept against the old m */
        if (p->fp8_off) fj_ins(k->e, "mul.f32 %s, %s, %s", R(inv), R(inv), R(k->o_scale)); /* v_descale */
        for (int v = 0; v < k->frag.o_vals; v++) {
            const char *o = R(fj_at(k->acc_o, k->frag.o_reg(p, r, v)));
            fj_ins(k->e, "mul.f32 %s, %s, %s", o, o, R(inv));
        }
        fj_comment(k->e, 2, "LSE = ln(sum exp(s * scale)) = (m + log2 l) * ln 2, -inf for a row with no key");
        fj_ins(k->e, "lg2.approx.ftz.f32 %s, %s", R(lse), R(l));
        fj_ins(k->e, "add.f32 %s, %s, %s", R(lse), R(lse), R(m));
        if (p->p_offset) /* l summed P scaled by 2^p_offset */
            fj_ins(k->e, "sub.f32 %s, %s, 0f%08X", R(lse), R(lse), f32_bits((float)p->p_offset));
        fj_ins(k->e, "mul.f32 %s, %s, " PTX_F32_LN2, R(lse), R(lse));
        fj_ins(k->e, "selp.f32 %s, %s, " PTX_F32_NEG_INF ", %s", R(lse), R(lse), R(pos));
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(p, r));
        fj_ins(k->e, "setp.lt.and.s32 %s, %s, %s, %s", R(pw), R(row), R(k->q_rows), R(has_lse));
        fj_ins(k->e, "mul.wide.s32 %s, %s, 4", R(a), R(row));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(k->lse_ptr));
        fj_ins(k->e, "@%s st.global.f32 [%s], %s", R(pw), R(a), R(lse));
    }
}

/* fp32 partial O rows for split-KV: row pitch head_dim floats; adjacent values of a row (a column and
 * the next, which m16n8 gives a thread in pairs at even columns) go out as one 8-byte store. */
void fj_emit_store_o_partial(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1), a = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t cb = fj_alloc(k->e, k->b_rd, 1);
    fj_comment(k->e, 1, "store the fp32 partial O rows of this split (rows past Nq skipped)");
    fj_ins(k->e, "mul.wide.u32 %s, %s, 4", R(cb), R(k->col_base_o));
    for (int r = 0; r < k->frag.rows; r++) {
        char skip[48];
        fj_label_new(k->e, "partial_skip", skip, sizeof skip);
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(p, r));
        fj_ins(k->e, "setp.ge.s32 %s, %s, %s", R(pr), R(row), R(k->q_rows));
        fj_ins(k->e, "@%s bra %s", R(pr), skip);
        fj_ins(k->e, "mul.wide.s32 %s, %s, %d", R(a), R(row), 4 * p->cfg.head_dim);
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(cb));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(k->o_ptr));
        for (int v = 0; v < k->frag.o_vals; v++) {
            int col = k->frag.o_col_off(p, v);
            const char *o = R(fj_at(k->acc_o, k->frag.o_reg(p, r, v)));
            if (col % 2 == 0 && v + 1 < k->frag.o_vals && k->frag.o_col_off(p, v + 1) == col + 1) {
                fj_ins(k->e, "st.global.v2.f32 [%s+%d], {%s, %s}", R(a), 4 * col, o,
                       R(fj_at(k->acc_o, k->frag.o_reg(p, r, v + 1))));
                v++;
            } else {
                fj_ins(k->e, "st.global.f32 [%s+%d], %s", R(a), 4 * col, o);
            }
        }
        fj_label(k->e, skip);
    }
}
