/*
 * combine.c - the combine kernel of split-KV: the fp32 partials of S splits (kernel_abi.h,
 * fj_fwd_params_decode) reduced into O and LSE, written with the same emitter as the forward kernels.
 *
 * FJ_COMBINE_WARPS warps per CTA, W of them per output row (b, h, i) (kernel_abi.h:
 * fj_combine_warps_per_row(splits): 1 up to 8 splits, doubling to 8 warps past 32), rows in (b, h, i)
 * order. With LSE_s the natural-log LSE of split s (-inf when it saw no key) and O_s its O normalized
 * by its own l:
 *     LSE = log sum_s exp(LSE_s)          (every warp of the row: max over the splits first, lanes taking
 *                                          splits lane, lane + 32, ...)
 *     O   = sum_s exp(LSE_s - LSE) O_s    (warp w of the row takes splits w, w + W, ...; each lane owns
 *                                          head_dim / 32 adjacent columns; the W sums meet in shared memory)
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

typedef struct combine_ctx {
    fj_emit *e;
    const fj_plan *p;
    int b_r, b_rd, b_f, b_p, b_h;
    int cols;         /* columns per lane: head_dim / 32 */
    fj_reg_t lane, row, splits, step, idx0; /* u32 */
    fj_reg_t warp, wsub, nw;                /* u32: warp in the CTA, its index among the row's W, W */
    fj_reg_t m, lse;  /* f32: max of the LSE_s, then the row's LSE */
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

static void warp_reduce(combine_ctx *c, const char *op, fj_reg_t v)
{
    fj_reg_t t = fj_alloc(c->e, c->b_f, 1);
    for (int x = 16; x >= 1; x /= 2) {
        fj_ins(c->e, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1", R(t), R(v), x);
        fj_ins(c->e, "%s %s, %s, %s", op, R(v), R(v), R(t));
    }
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

/* A loop over the splits s = first, first + stride, ... < splits: loop_open emits the head, loop_close
 * the step and the back edge. */
static void loop_open(combine_ctx *c, fj_reg_t s, fj_reg_t first, const char *top, const char *done)
{
    fj_reg_t pr = fj_alloc(c->e, c->b_p, 1);
    fj_ins(c->e, "mov.u32 %s, %s", R(s), R(first));
    fj_label(c->e, top);
    fj_ins(c->e, "setp.ge.u32 %s, %s, %s", R(pr), R(s), R(c->splits));
    fj_ins(c->e, "@%s bra %s", R(pr), done); /* lanes part ways where a loop starts at the lane */
}

static void loop_close(combine_ctx *c, fj_reg_t s, const char *stride, const char *top, const char *done)
{
    fj_ins(c->e, "add.u32 %s, %s, %s", R(s), R(s), stride);
    fj_ins(c->e, "bra %s", top);
    fj_label(c->e, done);
}

/* m = max_s LSE_s; lse = m + ln(sum_s exp(LSE_s - m)), -inf when every LSE_s is -inf. */
static void combine_lse(combine_ctx *c, fj_reg_t ws_lse)
{
    fj_emit *e = c->e;
    char top[48], done[48];
    fj_reg_t s = fj_alloc(e, c->b_r, 1), a = fj_alloc(e, c->b_rd, 1), x = fj_alloc(e, c->b_f, 1);
    fj_reg_t sum = fj_alloc(e, c->b_f, 1), muse = fj_alloc(e, c->b_f, 1), pr = fj_alloc(e, c->b_p, 1);
    c->m = fj_alloc(e, c->b_f, 1);
    c->lse = fj_alloc(e, c->b_f, 1);
    fj_comment(e, 1, "m = max over the splits of LSE_s (lane takes splits lane, lane + 32, ...)");
    fj_ins(e, "mov.f32 %s, " PTX_F32_NEG_INF, R(c->m));
    fj_label_new(e, "max_loop", top, sizeof top);
    fj_label_new(e, "max_done", done, sizeof done);
    loop_open(c, s, c->lane, top, done);
    split_addr(c, a, ws_lse, 4, s);
    fj_ins(e, "ld.global.f32 %s, [%s]", R(x), R(a));
    fj_ins(e, "max.f32 %s, %s, %s", R(c->m), R(c->m), R(x));
    loop_close(c, s, "32", top, done);
    warp_reduce(c, "max.f32", c->m);
    fj_comment(e, 1, "sum = sum_s 2^((LSE_s - m) log2 e); a row with m = -inf subtracts 0 (every term is 0)");
    fj_ins(e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pr), R(c->m));
    fj_ins(e, "selp.f32 %s, " PTX_F32_ZERO ", %s, %s", R(muse), R(c->m), R(pr));
    fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(sum));
    fj_label_new(e, "sum_loop", top, sizeof top);
    fj_label_new(e, "sum_done", done, sizeof done);
    loop_open(c, s, c->lane, top, done);
    split_addr(c, a, ws_lse, 4, s);
    fj_ins(e, "ld.global.f32 %s, [%s]", R(x), R(a));
    fj_ins(e, "sub.f32 %s, %s, %s", R(x), R(x), R(muse));
    fj_ins(e, "mul.f32 %s, %s, " PTX_F32_LOG2E, R(x), R(x));
    fj_ins(e, "ex2.approx.ftz.f32 %s, %s", R(x), R(x));
    fj_ins(e, "add.f32 %s, %s, %s", R(sum), R(sum), R(x));
    loop_close(c, s, "32", top, done);
    warp_reduce(c, "add.f32", sum);
    fj_comment(e, 1, "LSE = m + ln(sum), -inf when no split saw a key");
    fj_ins(e, "setp.gt.f32 %s, %s, " PTX_F32_ZERO, R(pr), R(sum));
    fj_ins(e, "lg2.approx.ftz.f32 %s, %s", R(x), R(sum));
    fj_ins(e, "fma.rn.f32 %s, %s, " PTX_F32_LN2 ", %s", R(c->lse), R(x), R(muse));
    fj_ins(e, "selp.f32 %s, %s, " PTX_F32_NEG_INF ", %s", R(c->lse), R(c->lse), R(pr));
}

/* acc = sum_s 2^((LSE_s - LSE) log2 e) O_s over this lane's columns (skipped when LSE = -inf: acc = 0). */
static void combine_o(combine_ctx *c, fj_reg_t ws_o, fj_reg_t ws_lse)
{
    fj_emit *e = c->e;
    const int cols = c->cols, d = c->p->cfg.head_dim;
    char top[48], done[48];
    fj_reg_t s = fj_alloc(e, c->b_r, 1), zero = fj_alloc(e, c->b_r, 1), a = fj_alloc(e, c->b_rd, 1);
    fj_reg_t lo = fj_alloc(e, c->b_rd, 1), x = fj_alloc(e, c->b_f, 1), v = fj_alloc(e, c->b_f, cols);
    fj_reg_t pr = fj_alloc(e, c->b_p, 1);
    c->acc = fj_alloc(e, c->b_f, cols);
    fj_comment(e, 1, "O = sum_s 2^((LSE_s - LSE) log2 e) O_s; this lane's %d columns start at %d x lane", cols, cols);
    for (int i = 0; i < cols; i++) fj_ins(e, "mov.f32 %s, " PTX_F32_ZERO, R(fj_at(c->acc, i)));
    fj_ins(e, "mul.wide.u32 %s, %s, %d", R(lo), R(c->lane), 4 * cols);
    fj_ins(e, "mov.u32 %s, 0", R(zero));
    fj_label_new(e, "o_loop", top, sizeof top);
    fj_label_new(e, "o_done", done, sizeof done);
    fj_ins(e, "setp.eq.f32 %s, %s, " PTX_F32_NEG_INF, R(pr), R(c->lse));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    loop_open(c, s, c->wsub, top, done);
    split_addr(c, a, ws_lse, 4, s);
    fj_ins(e, "ld.global.f32 %s, [%s]", R(x), R(a));
    fj_ins(e, "sub.f32 %s, %s, %s", R(x), R(x), R(c->lse));
    fj_ins(e, "mul.f32 %s, %s, " PTX_F32_LOG2E, R(x), R(x));
    fj_ins(e, "ex2.approx.ftz.f32 %s, %s", R(x), R(x));
    split_addr(c, a, ws_o, 4 * d, s);
    fj_ins(e, "add.u64 %s, %s, %s", R(a), R(a), R(lo));
    for (int i = 0; i < cols; i += cols % 2 ? 1 : 2) {
        if (cols % 2) fj_ins(e, "ld.global.f32 %s, [%s+%d]", R(fj_at(v, i)), R(a), 4 * i);
        else fj_ins(e, "ld.global.v2.f32 {%s, %s}, [%s+%d]", R(fj_at(v, i)), R(fj_at(v, i + 1)), R(a), 4 * i);
    }
    for (int i = 0; i < cols; i++)
        fj_ins(e, "fma.rn.f32 %s, %s, %s, %s", R(fj_at(c->acc, i)), R(x), R(fj_at(v, i)), R(fj_at(c->acc, i)));
    loop_close(c, s, R(c->nw), top, done);
}

/* The W warps of a row add their sums: each writes its columns to shared memory, then the row's first warp
 * (wsub = 0) adds the others' into its own. Every warp of the CTA meets at the barrier. */
static void combine_warps(combine_ctx *c)
{
    fj_emit *e = c->e;
    const int cols = c->cols, d = c->p->cfg.head_dim;
    char top[48], done[48];
    fj_reg_t a = fj_alloc(e, c->b_r, 1), b = fj_alloc(e, c->b_r, 1), j = fj_alloc(e, c->b_r, 1);
    fj_reg_t x = fj_alloc(e, c->b_f, 1), pr = fj_alloc(e, c->b_p, 1);
    fj_comment(e, 1, "the row's W warps add their sums through shared memory (warp x %d x 4 bytes each)", d);
    fj_ins(e, "mov.u32 %s, combine_smem", R(b));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(c->lane), 4 * cols, R(b));
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(c->warp), 4 * d, R(a));
    for (int i = 0; i < cols; i++) fj_ins(e, "st.shared.f32 [%s+%d], %s", R(a), 4 * i, R(fj_at(c->acc, i)));
    fj_ins(e, "bar.sync 0");
    fj_ins(e, "setp.ne.u32 %s, %s, 0", R(pr), R(c->wsub));
    fj_label_new(e, "sum_warps", top, sizeof top);
    fj_label_new(e, "sum_warps_done", done, sizeof done);
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    fj_ins(e, "mov.u32 %s, 1", R(j));
    fj_label(e, top);
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(j), R(c->nw));
    fj_ins(e, "@%s bra.uni %s", R(pr), done);
    fj_ins(e, "add.u32 %s, %s, %d", R(a), R(a), 4 * d);
    for (int i = 0; i < cols; i++) {
        fj_ins(e, "ld.shared.f32 %s, [%s+%d]", R(x), R(a), 4 * i);
        fj_ins(e, "add.f32 %s, %s, %s", R(fj_at(c->acc, i)), R(fj_at(c->acc, i)), R(x));
    }
    fj_ins(e, "add.u32 %s, %s, 1", R(j), R(j));
    fj_ins(e, "bra.uni %s", top);
    fj_label(e, done);
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
    fj_ins(e, ".shared .align 16 .b8 combine_smem[%d]", FJ_COMBINE_WARPS * p->cfg.head_dim * 4);
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
    fj_reg_t ws_lse = param_u64(c, DOFF(ws_lse)), ws_o = param_u64(c, DOFF(ws_o));
    combine_lse(c, ws_lse);
    combine_o(c, ws_o, ws_lse);
    combine_warps(c);
    fj_ins(e, "@!%s bra.uni $L_combine_exit", R(ok));
    combine_store(c, bhi);
    fj_label(e, "$L_combine_exit");
    fj_ins(e, "ret");
}
