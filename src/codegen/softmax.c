/*
 * softmax.c - masking, online softmax and the epilogue normalization, written once for every arch
 * path over the fragment descriptor (backend.h). Nothing here knows which MMA produced the scores.
 *
 * Online softmax in the exp2 domain (FlashAttention-2, with the scale folded into one FMA):
 *   m_new = max(m, rowmax(S) * scale_log2)            running max, already scaled
 *   c     = 2^(m - m_new)                              rescale of what was summed before
 *   P     = 2^(S * scale_log2 - m_new)                 one FMA + one ex2 per score
 *   l     = l * c + rowsum(P)    O = O * c              (l stays per-thread until the epilogue)
 * A row that has seen only masked scores keeps m = -inf; it subtracts 0 instead, so every P is
 * 2^-inf = 0 and no inf - inf NaN appears. The epilogue gives such a row O = 0 and LSE = -inf.
 */
#include "backend.h"
#include "ptx_templates/common.h"

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

static void quad_reduce(fj_kctx *k, const char *op, fj_reg_t v)
{
    fj_reg_t t = fj_alloc(k->e, k->b_f, 1);
    for (int i = 0; i < k->frag.n_shuffles; i++) {
        fj_ins(k->e, PTX_SHFL_BFLY, R(t), R(v), k->frag.shuffle_xor[i]);
        fj_ins(k->e, "%s %s, %s, %s", op, R(v), R(v), R(t));
    }
}

void fj_emit_score_hook(fj_kctx *k)
{
    fj_comment(k->e, 2, "score hook: softcap, ALiBi, sliding windows and user score functions are emitted here");
    fj_comment(k->e, 2, "(none for this config: S is used as computed)");
}

/* Scores whose column is past the row's last visible key become -inf. The limit is recomputed here,
 * on the (few) masked tiles, rather than kept live across the loop: live, ptxas spills it. */
void fj_emit_mask(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t rel = fj_alloc(k->e, k->b_r, 1), last = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_comment(k->e, 1, "last visible key: %s",
               p->cfg.causal ? "min(Nk - 1, row + Nk - Nq) (causal, bottom-right aligned)" : "Nk - 1");
    fj_comment(k->e, 2, "compared as (limit - n0 - col_base) < column offset of each value: one setp per score");
    fj_reg_t nk = fj_param_s32(k, FJ_PARAM_OFF(seqlen_k));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(last), R(nk), R(k->n0));
    fj_ins(k->e, "sub.s32 %s, %s, %s", R(last), R(last), R(k->col_base));
    fj_ins(k->e, "add.s32 %s, %s, -1", R(last), R(last));
    fj_reg_t diag = fj_alloc(k->e, k->b_r, 1);
    if (p->cfg.causal) {
        /* row + Nk - Nq - n0 - col_base, for row = m0 + row_base + row_off(r) */
        fj_ins(k->e, "add.s32 %s, %s, %s", R(diag), R(k->m0), R(k->row_base));
        fj_ins(k->e, "add.s32 %s, %s, %s", R(diag), R(diag), R(last));
        fj_ins(k->e, "sub.s32 %s, %s, %s", R(diag), R(diag), R(fj_param_s32(k, FJ_PARAM_OFF(seqlen_q))));
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

/* One row: new running max, P = exp2(S * scale - m), l update; corr receives 2^(m_old - m_new) and,
 * with plan.rescale_skip, `changed` is or-ed with (m_new != m_old). O is rescaled by the caller. */
static void softmax_row(fj_kctx *k, int r, int *idx, fj_reg_t scale, fj_reg_t corr, fj_reg_t changed)
{
    const fj_plan *p = k->p;
    fj_reg_t mx = fj_alloc(k->e, k->b_f, 1), mnew = fj_alloc(k->e, k->b_f, 1), muse = fj_alloc(k->e, k->b_f, 1);
    fj_reg_t sum = fj_alloc(k->e, k->b_f, 1), pinf = fj_alloc(k->e, k->b_p, 1), moved = fj_alloc(k->e, k->b_p, 1);
    fj_reg_t m = fj_at(k->row_m, r), l = fj_at(k->row_l, r);
    for (int v = 0; v < k->frag.s_vals; v++) idx[v] = k->frag.s_reg(p, r, v);
    fj_comment(k->e, 1, "row %d: max, rescale, exponentiate, sum", r);
    reduce_row(k, "max.f32", mx, k->acc_s, idx, k->frag.s_vals);
    quad_reduce(k, "max.f32", mx);
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(mx), R(mx), R(scale));
    fj_ins(k->e, "max.f32 %s, %s, %s", R(mnew), R(m), R(mx));
    fj_ins(k->e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pinf), R(mnew));
    fj_ins(k->e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(muse), R(mnew), R(pinf));
    fj_ins(k->e, "sub.f32 %s, %s, %s", R(corr), R(m), R(muse));
    fj_ins(k->e, "ex2.approx.ftz.f32 %s, %s", R(corr), R(corr));
    if (p->rescale_skip) {
        fj_ins(k->e, "setp.neu.f32 %s, %s, %s", R(moved), R(m), R(mnew));
        fj_ins(k->e, "or.pred %s, %s, %s", R(changed), R(changed), R(moved));
    }
    fj_ins(k->e, "mov.f32 %s, %s", R(m), R(mnew));
    fj_ins(k->e, "neg.f32 %s, %s", R(muse), R(muse));
    for (int v = 0; v < k->frag.s_vals; v++) {
        const char *s = R(fj_at(k->acc_s, idx[v]));
        fj_ins(k->e, "fma.rn.ftz.f32 %s, %s, %s, %s", s, s, R(scale), R(muse));
        fj_ins(k->e, "ex2.approx.ftz.f32 %s, %s", s, s);
    }
    reduce_row(k, "add.f32", sum, k->acc_s, idx, k->frag.s_vals);
    fj_ins(k->e, "fma.rn.ftz.f32 %s, %s, %s, %s", R(l), R(l), R(corr), R(sum));
}

void fj_emit_online_softmax(fj_kctx *k)
{
    int idx[512];
    if (k->frag.s_vals > (int)(sizeof idx / sizeof idx[0])) {
        fj_emit_error(k->e, "online softmax: %d values per row exceed %d", k->frag.s_vals, (int)(sizeof idx / sizeof idx[0]));
        return;
    }
    fj_reg_t scale = fj_param_f32(k, FJ_PARAM_OFF(scale_log2));
    fj_reg_t corr = fj_alloc(k->e, k->b_f, k->frag.rows), changed = fj_alloc(k->e, k->b_p, 1);
    fj_reg_t any = fj_alloc(k->e, k->b_p, 1);
    char skip[48];
    if (k->p->rescale_skip) fj_ins(k->e, "setp.ne.s32 %s, 0, 0", R(changed));
    for (int r = 0; r < k->frag.rows; r++) softmax_row(k, r, idx, scale, fj_at(corr, r), changed);
    if (k->p->rescale_skip) {
        fj_comment(k->e, 1, "O *= 2^(m_old - m_new), skipped when no row of the warp moved its max");
        fj_comment(k->e, 2, "(after the first tiles the running max rarely moves; then every factor is 1 and the %d",
                   k->frag.rows * k->frag.o_vals);
        fj_comment(k->e, 2, " multiplies per thread would change nothing: a warp vote skips them)");
        fj_label_new(k->e, "no_rescale", skip, sizeof skip);
        fj_ins(k->e, "vote.sync.any.pred %s, %s, -1", R(any), R(changed));
        fj_ins(k->e, "@!%s bra.uni %s", R(any), skip);
    } else {
        fj_comment(k->e, 1, "O *= 2^(m_old - m_new)");
    }
    for (int r = 0; r < k->frag.rows; r++)
        for (int v = 0; v < k->frag.o_vals; v++) {
            const char *o = R(fj_at(k->acc_o, k->frag.o_reg(k->p, r, v)));
            fj_ins(k->e, "mul.f32 %s, %s, %s", o, o, R(fj_at(corr, r)));
        }
    if (k->p->rescale_skip) fj_label(k->e, skip);
}

void fj_emit_normalize(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t pos = fj_alloc(k->e, k->b_p, 1), inv = fj_alloc(k->e, k->b_f, 1), lse = fj_alloc(k->e, k->b_f, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), pw = fj_alloc(k->e, k->b_p, 1), a = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t has_lse = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "setp.ne.u64 %s, %s, 0", R(has_lse), R(k->lse_ptr));
    fj_ins(k->e, "setp.eq.and.s32 %s, %s, 0, %s", R(has_lse), R(k->col_base), R(has_lse));
    for (int r = 0; r < k->frag.rows; r++) {
        fj_reg_t l = fj_at(k->row_l, r), m = fj_at(k->row_m, r);
        fj_comment(k->e, 1, "row %d: l summed over the quad, O *= 1/l (0 when the row saw no key)", r);
        quad_reduce(k, "add.f32", l);
        fj_ins(k->e, "setp.gt.f32 %s, %s, " PTX_F32_ZERO, R(pos), R(l));
        fj_ins(k->e, "rcp.approx.ftz.f32 %s, %s", R(inv), R(l));
        fj_ins(k->e, "selp.f32 %s, %s, " PTX_F32_ZERO ", %s", R(inv), R(inv), R(pos));
        for (int v = 0; v < k->frag.o_vals; v++) {
            const char *o = R(fj_at(k->acc_o, k->frag.o_reg(p, r, v)));
            fj_ins(k->e, "mul.f32 %s, %s, %s", o, o, R(inv));
        }
        fj_comment(k->e, 2, "LSE = ln(sum exp(s * scale)) = (m + log2 l) * ln 2, -inf for a row with no key");
        fj_ins(k->e, "lg2.approx.ftz.f32 %s, %s", R(lse), R(l));
        fj_ins(k->e, "add.f32 %s, %s, %s", R(lse), R(lse), R(m));
        fj_ins(k->e, "mul.f32 %s, %s, " PTX_F32_LN2, R(lse), R(lse));
        fj_ins(k->e, "selp.f32 %s, %s, " PTX_F32_NEG_INF ", %s", R(lse), R(lse), R(pos));
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->row_base), k->frag.row_off(p, r));
        fj_ins(k->e, "setp.lt.and.s32 %s, %s, %s, %s", R(pw), R(row), R(k->q_rows), R(has_lse));
        fj_ins(k->e, "mul.wide.s32 %s, %s, 4", R(a), R(row));
        fj_ins(k->e, "add.u64 %s, %s, %s", R(a), R(a), R(k->lse_ptr));
        fj_ins(k->e, "@%s st.global.f32 [%s], %s", R(pw), R(a), R(lse));
    }
}
