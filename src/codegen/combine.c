/*
 * combine.c - the combine kernel of split-KV: the fp32 partials of S splits (kernel_abi.h,
 * fj_fwd_params_decode) reduced into O and LSE, written with the same emitter as the forward kernels.
 *
 * FJ_COMBINE_WARPS warps per CTA, W of them per output row (b, h, i) (kernel_abi.h:
 * fj_combine_warps_per_row(splits): 1 up to 8 splits, doubling to 16 warps past 64), rows in (b, h, i)
 * order. With LSE_s the natural-log LSE of split s (-inf when it saw no key) and O_s its O normalized
 * by its own l:
 *     LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s
 * Warp w of the row takes splits w, w + W, ... in one pass (an online max and rescaled sums, as the forward
 * kernels' softmax; each lane owns head_dim / 32 adjacent columns); the W warps' shares meet in shared memory.
 * The partials are a few hundred KB at most (L2-resident after the split kernel): the kernel is bound by
 * load latency, not bytes, so its time goes with the splits one lane walks in a chain. One warp per row
 * walked all of them: 19-22 us of a 90 us call at 110-132 splits (H200, ncu; B1 Hq8 Hkv1 Nk512k).
 * A row no split saw a key of gets O = 0 and LSE = -inf, as in the unsplit kernel. The exponentials
 * are ex2 of (x - y) x log2(e), the forward kernels' approximation.
 */
#include <stddef.h>

#include "backend.h"
#include "ptx_templates/common.h"

#define R(reg) fj_r(c->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))
#define DOFF(field) ((int)offsetof(fj_fwd_params_decode, field))
#define PTX_F32_LOG2E "0f3FB8AA3B"
#define COMBINE_UNROLL 4 /* splits a lane loads per step of its loop */

typedef struct combine_ctx {
    fj_emit *e;
    const fj_plan *p;
    int b_r, b_rd, b_f, b_p, b_h;
    int cols;         /* columns per lane: head_dim / 32 */
    fj_reg_t lane, row, splits, step, idx0; /* u32 */
    fj_reg_t warp, wsub, nw;                /* u32: warp in the CTA, its index among the row's W, W */
    fj_reg_t m, l, lse; /* f32: max of this warp's LSE_s, its sum of weights, then the row's LSE */
    fj_reg_t acc;     /* f32 x cols */
} combine_ctx;

static fj_reg_t param_u32(combine_ctx *c, int off)
{
    fj_reg_t r = fj_alloc(c->e, c->b_r, 1);
    fj_ins(c->e, PTX_LD_PARAM_U32, R(r), off);
    return r;
}

static fj_reg_t param_u64(combine_ctx *c, int off)
{
    fj_reg_t r = fj_alloc(c->e, c->b_rd, 1);
    fj_ins(c->e, PTX_LD_PARAM_U64, R(r), off);
    return r;
}

/* addr = base + scale x (idx0 + s x step) for split s */
static void split_addr(combine_ctx *c, fj_reg_t addr, fj_reg_t base, int scale, fj_reg_t s)
{
    fj_reg_t t = fj_alloc(c->e, c->b_r, 1), w = fj_alloc(c->e, c->b_rd, 1);
    fj_ins(c->e, "mad.lo.u32 %s, %s, %s, %s", R(t), R(s), R(c->step), R(c->idx0));
    fj_ins(c->e, "mul.wide.u32 %s, %s, %d", R(w), R(t), scale);
    fj_ins(c->e, "add.u64 %s, %s, %s", R(addr), R(base), R(w));
}

/* Row indices: i = row % Nq, h = (row / Nq) % Hq, b = row / (Nq x Hq); idx0 = ((b x S) x Hq + h) x Nq + i,
 * the partial row of split 0; step = Hq x Nq rows between splits. Returns b, h, i in out[0..2]. */
static void row_indices(combine_ctx *c, fj_reg_t out[3])
{
    fj_emit *e = c->e;
    fj_reg_t nq = param_u32(c, OFF(seqlen_q)), hq = param_u32(c, OFF(heads_q)), t = fj_alloc(e, c->b_r, 1);
    for (int i = 0; i < 3; i++) out[i] = fj_alloc(e, c->b_r, 1);
    fj_ins(e, "div.u32 %s, %s, %s", R(t), R(c->row), R(nq));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(out[2]), R(t), R(nq));
    fj_ins(e, "sub.u32 %s, %s, %s", R(out[2]), R(c->row), R(out[2]));
    fj_ins(e, "div.u32 %s, %s, %s", R(out[0]), R(t), R(hq));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(out[1]), R(out[0]), R(hq));
    fj_ins(e, "sub.u32 %s, %s, %s", R(out[1]), R(t), R(out[1]));
    c->step = fj_alloc(e, c->b_r, 1);
    c->idx0 = fj_alloc(e, c->b_r, 1);
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(c->step), R(hq), R(nq));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(t), R(out[0]), R(c->splits));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(t), R(t), R(hq), R(out[1]));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(c->idx0), R(t), R(nq), R(out[2]));
}

/* The head of a loop over the splits s = first, first + step, ... < splits (the caller emits the step and the
 * back edge). */
static void loop_open(combine_ctx *c, fj_reg_t s, fj_reg_t first, const char *top, const char *done)
{
    fj_reg_t pr = fj_alloc(c->e, c->b_p, 1);
    fj_ins(c->e, "mov.u32 %s, %s", R(s), R(first));
    fj_label(c->e, top);
    fj_ins(c->e, "setp.ge.u32 %s, %s, %s", R(pr), R(s), R(c->splits));
    fj_ins(c->e, "@%s bra %s", R(pr), done); /* lanes part ways where a loop starts at the lane */
}

/* 2^((x - m) log2 e) into out, with m = -inf read as 0 (so -inf - -inf gives -inf, not NaN: 2^-inf = 0). */
static void exp_from(combine_ctx *c, fj_reg_t out, fj_reg_t x, fj_reg_t m)
{
    fj_reg_t mu = fj_alloc(c->e, c->b_f, 1), pr = fj_alloc(c->e, c->b_p, 1);
    fj_ins(c->e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pr), R(m));
    fj_ins(c->e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(mu), R(m), R(pr));
    fj_ins(c->e, "sub.f32 %s, %s, %s", R(out), R(x), R(mu));
    fj_ins(c->e, "mul.f32 %s, %s, " PTX_F32_LOG2E, R(out), R(out));
    fj_ins(c->e, "ex2.approx.ftz.f32 %s, %s", R(out), R(out));
}

/* This warp's splits s = wsub, wsub + W, ... in one pass, as the forward kernels' online softmax, COMBINE_UNROLL
 * splits per step (their loads issued together; one past the last split reads as LSE -inf, O 0): m = max of their
 * LSE_s, l = sum_s 2^((LSE_s - m) log2 e), acc = sum_s 2^((LSE_s - m) log2 e) O_s over this lane's columns,
 * rescaled when m grows. A split that saw no key has LSE_s = -inf and weighs 0. */
static void combine_online(combine_ctx *c, fj_reg_t part_o, fj_reg_t part_lse)
{
    fj_emit *e = c->e;
    const int cols = c->cols, d = c->p->cfg.head_dim, u = COMBINE_UNROLL;
    char top[48], done[48];
    fj_reg_t s = fj_alloc(e, c->b_r, 1), sk = fj_alloc(e, c->b_r, 1), a = fj_alloc(e, c->b_rd, 1);
    fj_reg_t lo = fj_alloc(e, c->b_rd, 1), x = fj_alloc(e, c->b_f, u), mn = fj_alloc(e, c->b_f, 1);
    fj_reg_t sc = fj_alloc(e, c->b_f, 1), w = fj_alloc(e, c->b_f, 1), v = fj_alloc(e, c->b_f, u * cols);
    fj_reg_t pr = fj_alloc(e, c->b_p, 1);
    c->m = fj_alloc(e, c->b_f, 1);
    c->l = fj_alloc(e, c->b_f, 1);
    c->acc = fj_alloc(e, c->b_f, cols);
    fj_comment(e, 1, "one pass over this warp's splits, %d per step: m, l and this lane's %d columns of acc (from %d x "
                     "lane)", u, cols, cols);
    fj_ins(e, "mov.f32 %s, " PTX_F32_NEG_INF, R(c->m));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(c->l));
    for (int i = 0; i < cols; i++) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(c->acc, i)));
    fj_ins(e, "mul.wide.u32 %s, %s, %d", R(lo), R(c->lane), 4 * cols);
    fj_label_new(e, "split_loop", top, sizeof top);
    fj_label_new(e, "split_done", done, sizeof done);
    loop_open(c, s, c->wsub, top, done);
    for (int k = 0; k < u; k++) {
        fj_reg_t xk = fj_at(x, k);
        if (k) fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(sk), R(c->nw), k, R(s));
        else fj_ins(e, "mov.u32 %s, %s", R(sk), R(s));
        fj_ins(e, "setp.lt.u32 %s, %s, %s", R(pr), R(sk), R(c->splits));
        fj_ins(e, "mov.f32 %s, " PTX_F32_NEG_INF, R(xk));
        for (int i = 0; i < cols; i++) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(v, k * cols + i)));
        split_addr(c, a, part_lse, 4, sk);
        fj_ins(e, "@%s ld.global.f32 %s, [%s]", R(pr), R(xk), R(a));
        split_addr(c, a, part_o, 4 * d, sk);
        fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(lo));
        for (int i = 0; i < cols; i += cols % 2 ? 1 : 2) {
            fj_reg_t vi = fj_at(v, k * cols + i);
            if (cols % 2) fj_ins(e, "@%s ld.global.f32 %s, [%s+%d]", R(pr), R(vi), R(a), 4 * i);
            else
                fj_ins(e, "@%s ld.global.v2.f32 {%s, %s}, [%s+%d]", R(pr), R(vi), R(fj_at(v, k * cols + i + 1)), R(a),
                       4 * i);
        }
    }
    fj_ins(e, "max.f32 %s, %s, %s", R(mn), R(c->m), R(fj_at(x, 0)));
    for (int k = 1; k < u; k++) fj_ins(e, "max.f32 %s, %s, %s", R(mn), R(mn), R(fj_at(x, k)));
    exp_from(c, sc, c->m, mn);
    fj_ins(e, "mul.f32 %s, %s, %s", R(c->l), R(c->l), R(sc));
    for (int i = 0; i < cols; i++) fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(c->acc, i)), R(fj_at(c->acc, i)), R(sc));
    for (int k = 0; k < u; k++) {
        exp_from(c, w, fj_at(x, k), mn);
        fj_ins(e, "add.f32 %s, %s, %s", R(c->l), R(c->l), R(w));
        for (int i = 0; i < cols; i++)
            fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(fj_at(c->acc, i)), R(w), R(fj_at(v, k * cols + i)),
                   R(fj_at(c->acc, i)));
    }
    fj_ins(e, "mov.f32 %s, %s", R(c->m), R(mn));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(sk), R(c->nw), u, R(s));
    fj_ins(e, "mov.u32 %s, %s", R(s), R(sk));
    fj_ins(e, "bra %s", top);
    fj_label(e, done);
}

/* The W warps of a row meet: each writes m, l and its columns of acc to shared memory; the row's first warp
 * (wsub = 0) takes M = the max of the W m's, L = sum l 2^((m - M) log2 e), acc likewise, then O = acc / L and
 * LSE = M + ln L (O = 0, LSE = -inf when no split saw a key: L = 0). Every warp of the CTA meets at the
 * barrier. Shared memory: acc [warps][head_dim], then m and l [warps]. */
static void combine_warps(combine_ctx *c)
{
    fj_emit *e = c->e;
    const int cols = c->cols, d = c->p->cfg.head_dim, ml = FJ_COMBINE_WARPS * d * 4;
    char top[48], done[48];
    fj_reg_t a = fj_alloc(e, c->b_r, 1), b = fj_alloc(e, c->b_r, 1), j = fj_alloc(e, c->b_r, 1);
    fj_reg_t x = fj_alloc(e, c->b_f, 1), w = fj_alloc(e, c->b_f, 1), big = fj_alloc(e, c->b_f, 1);
    fj_reg_t mb = fj_alloc(e, c->b_r, 1), pr = fj_alloc(e, c->b_p, 1);
    fj_comment(e, 1, "the row's W warps meet in shared memory: acc [warp][%d], m and l [warp]", d);
    fj_ins(e, "mov.u32 %s, combine_smem", R(b));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(c->lane), 4 * cols, R(b));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(c->warp), 4 * d, R(a));
    for (int i = 0; i < cols; i++) fj_ins(e, "st.shared.f32 [%s+%d], %s", R(a), 4 * i, R(fj_at(c->acc, i)));
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(mb), R(c->warp), R(b));
    fj_ins(e, "st.shared.f32 [%s+%d], %s", R(mb), ml, R(c->m));
    fj_ins(e, "st.shared.f32 [%s+%d], %s", R(mb), ml + 4 * FJ_COMBINE_WARPS, R(c->l));
    fj_ins(e, "bar.sync 0");
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(c->wsub));
    fj_label_new(e, "meet", top, sizeof top);
    fj_label_new(e, "meet_done", done, sizeof done);
    fj_ins(e, "@%s bra.uni $L_combine_exit", R(pr));
    fj_comment(e, 1, "the row's first warp: M = max of the W m's, then every warp's share rescaled to it");
    fj_ins(e, "mov.f32 %s, %s", R(big), R(c->m));
    fj_ins(e, "mov.u32 %s, 1", R(j));
    fj_label(e, top);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(j), R(c->nw));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    fj_ins(e, "add.u32 %s, %s, 4", R(mb), R(mb));
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(x), R(mb), ml);
    fj_ins(e, "max.f32 %s, %s, %s", R(big), R(big), R(x));
    fj_ins(e, "add.u32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, done);
    exp_from(c, w, c->m, big);
    fj_ins(e, "mul.f32 %s, %s, %s", R(c->l), R(c->l), R(w));
    for (int i = 0; i < cols; i++) fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(c->acc, i)), R(fj_at(c->acc, i)), R(w));
    fj_label_new(e, "add_warps", top, sizeof top);
    fj_label_new(e, "add_warps_done", done, sizeof done);
    fj_ins(e, "mad.lo.u32 %s, %s, 4, %s", R(mb), R(c->warp), R(b));
    fj_ins(e, "mov.u32 %s, 1", R(j));
    fj_label(e, top);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(j), R(c->nw));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    fj_ins(e, "add.u32 %s, %s, 4", R(mb), R(mb));
    fj_ins(e, "add.u32 %s, %s, %d", R(a), R(a), 4 * d);
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(x), R(mb), ml);
    exp_from(c, w, x, big);
    fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(x), R(mb), ml + 4 * FJ_COMBINE_WARPS);
    fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(c->l), R(x), R(w), R(c->l));
    for (int i = 0; i < cols; i++) {
        fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(x), R(a), 4 * i);
        fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(fj_at(c->acc, i)), R(x), R(w), R(fj_at(c->acc, i)));
    }
    fj_ins(e, "add.u32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, done);
    fj_comment(e, 1, "O = acc / L, LSE = M + ln L; L = 0 (no split saw a key): O = 0, LSE = -inf");
    fj_ins(e, "setp.gt.f32 %s, %s, " PTX_F32_ZERO, R(pr), R(c->l));
    fj_ins(e, "rcp.approx.ftz.f32 %s, %s", R(w), R(c->l));
    fj_ins(e, "selp.f32 %s, %s, " PTX_F32_ZERO ", %s", R(w), R(w), R(pr));
    for (int i = 0; i < cols; i++) fj_ins(e, "mul.f32 %s, %s, %s", R(fj_at(c->acc, i)), R(fj_at(c->acc, i)), R(w));
    c->lse = fj_alloc(e, c->b_f, 1);
    fj_ins(e, "lg2.approx.ftz.f32 %s, %s", R(x), R(c->l));
    fj_ins(e, "fma.rn.f32 %s, %s, " PTX_F32_LN2 ", %s", R(c->lse), R(x), R(big));
    fj_ins(e, "selp.f32 %s, %s, " PTX_F32_NEG_INF ", %s", R(c->lse), R(c->lse), R(pr));
}

/* W = fj_combine_warps_per_row(splits) (kernel_abi.h), as its thresholds: log2 W steps up past 8, 16, 32
 * splits; the row's warp index wsub = warp mod W; row = ctaid.x x (warps / W) + warp / W, clamped to the
 * last row (its warps then repeat that row's work and store nothing: *ok is 0 for them and for wsub != 0). */
static void combine_rows(combine_ctx *c, fj_reg_t ok)
{
    fj_emit *e = c->e;
    fj_reg_t lw = fj_alloc(e, c->b_r, 1), t = fj_alloc(e, c->b_r, 1), rows = param_u32(c, DOFF(rows));
    fj_reg_t pr = fj_alloc(e, c->b_p, 1);
    c->wsub = fj_alloc(e, c->b_r, 1);
    c->nw = fj_alloc(e, c->b_r, 1);
    fj_comment(e, 1, "W warps per row (more splits, more warps: a lane walks at most %d of them past W = 1)",
               FJ_COMBINE_SPLITS_PER_WARP);
    fj_ins(e, "mov.u32 %s, 0", R(lw));
    for (int l = 1; (1 << l) <= FJ_COMBINE_WARPS; l++) {
        fj_ins(e, "setp.gt.u32 %s, %s, %d", R(pr), R(c->splits), (1 << (l - 1)) * FJ_COMBINE_SPLITS_PER_WARP);
        fj_ins(e, "@%s mov.u32 %s, %d", R(pr), R(lw), l);
    }
    fj_ins(e, "shl.b32 %s, 1, %s", R(c->nw), R(lw));
    fj_ins(e, "sub.u32 %s, %s, 1", R(t), R(c->nw));
    fj_ins(e, "and.b32 %s, %s, %s", R(c->wsub), R(c->warp), R(t));
    fj_ins(e, "shr.u32 %s, %d, %s", R(t), FJ_COMBINE_WARPS, R(lw));
    fj_ins(e, "mov.u32 %s, %%ctaid.x", R(c->row));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(c->row), R(c->row), R(t));
    fj_ins(e, "shr.u32 %s, %s, %s", R(t), R(c->warp), R(lw));
    fj_ins(e, "add.u32 %s, %s, %s", R(c->row), R(c->row), R(t));
    fj_ins(e, "setp.lt.u32 %s, %s, %s", R(ok), R(c->row), R(rows));
    fj_ins(e, "setp.eq.and.u32 %s, %s, 0, %s", R(ok), R(c->wsub), R(ok));
    fj_ins(e, "sub.u32 %s, %s, 1", R(t), R(rows));
    fj_ins(e, "min.u32 %s, %s, %s", R(c->row), R(c->row), R(t));
}

/* O row (b, h, i) at o + 2 (b s_b + h s_h + i s_n) + this lane's columns; LSE by lane 0 when lse != 0. */
static void combine_store(combine_ctx *c, const fj_reg_t bhi[3])
{
    fj_emit *e = c->e;
    const int cols = c->cols;
    const char *dt = c->p->cfg.dtype == FAJIT_DTYPE_BF16 ? "bf16" : "f16";
    fj_reg_t a = param_u64(c, OFF(o)), t = fj_alloc(e, c->b_rd, 1), w = fj_alloc(e, c->b_r, 1);
    fj_reg_t h16 = fj_alloc(e, c->b_h, 1), pr = fj_alloc(e, c->b_p, 1);
    fj_comment(e, 1, "store O (%s), then LSE from lane 0", dt);
    for (int i = 0; i < 3; i++) {
        fj_ins(e, "cvt.u64.u32 %s, %s", R(t), R(bhi[i]));
        fj_ins(e, "mul.lo.s64 %s, %s, %s", R(t), R(t), R(param_u64(c, OFF(o_stride) + 8 * i)));
        fj_ins(e, "shl.b64 %s, %s, 1", R(t), R(t));
        fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(t));
    }
    fj_ins(e, "mul.wide.u32 %s, %s, %d", R(t), R(c->lane), 2 * cols);
    fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(t));
    for (int i = 0; i < cols; i += cols % 2 ? 1 : 2) {
        if (cols % 2) {
            fj_ins(e, "cvt.rn.%s.f32 %s, %s", dt, R(h16), R(fj_at(c->acc, i)));
            fj_ins(e, "st.global.b16 [%s+%d], %s", R(a), 2 * i, R(h16));
        } else {
            fj_ins(e, PTX_CVT_PACK, dt, R(w), R(fj_at(c->acc, i + 1)), R(fj_at(c->acc, i)));
            fj_ins(e, "st.global.b32 [%s+%d], %s", R(a), 2 * i, R(w));
        }
    }
    fj_reg_t lse = param_u64(c, OFF(lse));
    fj_ins(e, "setp.ne.u64 %s, %s, 0", R(pr), R(lse));
    fj_ins(e, "setp.eq.and.u32 %s, %s, 0, %s", R(pr), R(c->lane), R(pr));
    fj_ins(e, "mul.wide.u32 %s, %s, 4", R(t), R(c->row));
    fj_ins(e, "add.u64 %s, %s, %s", R(t), R(t), R(lse));
    fj_ins(e, "@%s st.global.f32 [%s], %s", R(pr), R(t), R(c->lse));
}

void fj_emit_combine_kernel(fj_emit *e, const fj_plan *p)
{
    combine_ctx cc = {.e = e, .p = p, .cols = p->cfg.head_dim / 32}, *c = &cc;
    c->b_p = fj_bank(e, "p", "pred");
    c->b_r = fj_bank(e, "r", "b32");
    c->b_rd = fj_bank(e, "rd", "b64");
    c->b_f = fj_bank(e, "f", "f32");
    c->b_h = fj_bank(e, "h", "b16");
    fj_banner(e, "Combine: split-KV partials -> O, LSE",
              "W warps per output row (b, h, i): LSE = log sum_s exp(LSE_s), O = sum_s exp(LSE_s - LSE) O_s,\n"
              "over the fp32 partials the split kernel wrote (kernel_abi.h: fj_fwd_params_decode).");
    fj_ins(e, ".shared .align 16 .b8 combine_smem[%d]", FJ_COMBINE_WARPS * (p->cfg.head_dim + 2) * 4);
    fj_reg_t tid = fj_alloc(e, c->b_r, 1), ok = fj_alloc(e, c->b_p, 1);
    c->lane = fj_alloc(e, c->b_r, 1);
    c->warp = fj_alloc(e, c->b_r, 1);
    c->row = fj_alloc(e, c->b_r, 1);
    fj_ins(e, "mov.u32 %s, %%tid.x", R(tid));
    fj_ins(e, "shr.u32 %s, %s, 5", R(c->warp), R(tid));
    fj_ins(e, "and.b32 %s, %s, 31", R(c->lane), R(tid));
    c->splits = param_u32(c, DOFF(splits));
    combine_rows(c, ok);
    fj_reg_t bhi[3];
    row_indices(c, bhi);
    fj_reg_t part_lse = param_u64(c, DOFF(part_lse)), part_o = param_u64(c, DOFF(part_o));
    if (p->griddep) {
        fj_comment(e, 1, "launched early (programmatic dependent launch): wait for the split kernel's grid to end and "
                         "its partials to be visible");
        fj_ins(e, "griddepcontrol.wait");
    }
    combine_online(c, part_o, part_lse);
    combine_warps(c);
    fj_ins(e, "@!%s bra.uni $L_combine_exit", R(ok));
    combine_store(c, bhi);
    fj_label(e, "$L_combine_exit");
    fj_ins(e, "ret");
}
