/*
 * kv8.c - FP8 K/V cache on the sm_80 path (plan.kv8: cfg.kv_dtype e4m3 under f16 / bf16 queries): the e4m3
 * tile copies, their widening to the 16-bit K / V tiles the MMAs read, and the descales.
 *
 * Decode is memory-bound: the point is to read one byte per K / V element. The copies (cp.async, 16 bytes =
 * 16 elements a thread) land in a ring of their own at plan.kv8_off, laid out by copying thread
 * ([stage][K, V][pass][chunk][thread][16 B]), so after cp.async.wait_group a thread finds its own bytes
 * without a barrier. Each thread then widens them into the two 16-byte chunks of the 16-bit tile (the
 * swizzled [rows][head_dim] layout of sm80.c) those 16 elements cover, before the tile's barrier
 * (wait_sm80): the ldmatrix / mma.sync path after it is the 16-bit kernel's, unchanged.
 * The stages live in the e4m3 ring only: the 16-bit K / V tiles are one slot (plan.kv_slots), widened into after
 * a first barrier (every warp done with the previous tile's MMAs), so 4 stages of d128 bc64 fit 112 KB, two CTAs
 * an SM, with three tiles' loads in flight a CTA (decode is bound by the bytes in flight).
 * Under bf16 queries (plan.kv8_f16, Q in registers) the MMAs run in f16: Q is converted once (fj_kv8_q_to_f16),
 * K / V widen as for f16 queries (3 instructions per 2 elements instead of 4) and P is packed as f16.
 *
 * Widening without a conversion instruction (PTX ISA 7.0 integer ops; cvt.rn.f16x2.e4m3x2 needs .target
 * sm_89 and PTX 8.1): e4m3 is s.eeee.mmm with bias 7. prmt with the sign-replicating selector nibble puts each byte b
 * in the low byte of a 16-bit lane and its sign in all 8 bits of the high byte; then
 *   f16:   (lane << 7) & 0xBF80  = s.0eeee.mmm0000000      = value x 2^-8  (subnormals too: 2^-14 x 0.mmm)
 *   bf16:  (lane << 4) & 0x87F0  = s.0000eeee.mmm0000      = value x 2^-120, then fma.rn.bf16x2 x 2^120
 * (the 32-bit shift moves one lane's sign byte into the other's masked-off bits). The f16 factor 2^-8 is
 * folded into the softmax scale (K) and O's final factor (V); bf16's 2^-120 is undone at once (fma.rn.bf16x2
 * keeps subnormals), as a product that small would underflow in the MMAs (bf16 widening: only bf16 queries
 * whose Q does not stay in registers). Per 16 bytes: ld.shared.v4, 8 x (prmt, shl, and [, fma]), 2
 * st.shared.v4 (SASS sm_90a: LDS, 8 PRMT, 8 IMAD.SHL, 8 LOP3 [, 8 HMUL2], 2 STS). e4m3's NaN bytes (0x7F,
 * 0xFF) read as +-480 here.
 * Compiled for a target with cvt.rn.f16x2.e4m3x2 (.target sm_90+; sm_89 would need PTX 8.1), the f16 widening is
 * that cvt instead (plan.kv8_cvt, fj_kv8_for_target): exact values (no 2^-8 unit), NaN bytes NaN, per 16 bytes
 * LDS, 8 F2FP.F16.E4M3.UNPACK_B, 2 STS. Decode variant KV8_DIRECT (kv8_frag.c) skips the 16-bit tile: the ring holds
 * row-major swizzled tiles and the MMA fragments are built from them in registers, with these conversions. The decode variant bits KV8_INT_K / KV8_INT_V (codegen.h) keep the
 * integer widening for K / V on such a target (a knob for timing one against the other: F2FP issues once per pair
 * on the conversion pipe, the integer form three times per pair on the integer pipes).
 */
#include "kv8.h"
#include "kv8_frag.h"

#include <stddef.h>

#include "ptx_templates/common.h"
#include "base/error.h"

#define R(reg) fj_r(k->e, reg)
#define OFF(field) ((int)offsetof(fj_fwd_params, field))

/* bk[] slots (sm80.c uses 0..17) */
enum {
    BK8_STG = 18, /* u32: smem + kv8_off + tid x 16, this thread's bytes of pass 0, chunk 0 */
    BK8_R0 = 19,  /* s32: the thread's first copy row */
    BK8_C16 = 20, /* u64: its first 16-element chunk in bytes */
    BK8_DST = 21  /* u32 x 2 x chunks: the 16-bit tile's chunk 2e, 2e + 1 of the thread's chunk e (row r0) */
};

#define KV8_SEL_LO 0x9180 /* lanes {b0, sign(b0)}, {b1, sign(b1)} */
#define KV8_SEL_HI 0xB3A2 /* lanes {b2, sign(b2)}, {b3, sign(b3)} */

/* 1 when tensor which (1 K, 2 V) widens with cvt.rn.f16x2.e4m3x2: the plan's target has it (kv8_cvt) and the
 * variant does not ask for the integer form. */
int fj_kv8_widen_cvt(const fj_plan *p, int which)
{
    return p->kv8_cvt && !(p->variant & (which == 1 ? FJ_VARIANT_KV8_INT_K : FJ_VARIANT_KV8_INT_V));
}

int fj_kv8_unit_log2_of(const fj_plan *p, int which)
{
    return (p->cfg.dtype == FAJIT_DTYPE_F16 || p->kv8_f16) && !fj_kv8_widen_cvt(p, which) ? -8 : 0;
}

int fj_kv8_unit_log2(const fj_plan *p) { return fj_kv8_unit_log2_of(p, 1); }

void fj_kv8_for_target(fj_plan *p, const fj_arch_info *target)
{
    const unsigned both = FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V;
    if (!p->kv8 || p->ws || !target || !(target->caps & FJ_CAP_CVT_E4M3)) return;
    if (p->cfg.dtype != FAJIT_DTYPE_F16 && !p->kv8_f16) return; /* the bf16 widening has no cvt */
    if ((p->variant & both) == both) return;                   /* neither tensor takes the cvt */
    p->kv8_cvt = 1;
    p->arch = target;
}

void fj_kv8_plan_copy(fj_plan *p)
{
    p->kv8_tpr = p->copy_tpr / 2;
    p->kv8_rows_per_pass = p->kv8_tpr ? p->threads / p->kv8_tpr : 0;
}

int fj_kv8_copy_fits(const fj_plan *p, int tpr)
{
    int rpp8 = tpr % 2 ? 0 : p->threads / (tpr / 2);
    return rpp8 > 0 && p->cfg.block_n % rpp8 == 0;
}

void fj_kv8_smem(fj_plan *p)
{
    p->kv8_off = (p->smem_bytes + 127) / 128 * 128;
    p->smem_bytes = p->kv8_off + p->cfg.stages * 2 * p->cfg.block_n * p->cfg.head_dim;
}

void fj_kv8_setup_copy(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int tpr8 = p->kv8_tpr, kc = p->copy_chunks_per_thread_row;
    fj_comment(k->e, 1, "FP8 K/V copies: thread -> (row r0 = tid / %d, 16-element chunks e = c0 + %d*j), %d rows a pass; "
                        "its bytes land at kv8 ring + tid x 16, widened into 16-bit chunks 2e, 2e + 1",
               tpr8, tpr8, p->kv8_rows_per_pass);
    fj_reg_t r0 = fj_alloc(k->e, k->b_r, 1), c0 = fj_alloc(k->e, k->b_r, 1), x = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t rb = fj_alloc(k->e, k->b_r, 1), ch = fj_alloc(k->e, k->b_r, 1);
    fj_ins(k->e, "shr.u32 %s, %s, %d", R(r0), R(k->tid), fj_log2_ceil(tpr8));
    fj_ins(k->e, "and.b32 %s, %s, %d", R(c0), R(k->tid), tpr8 - 1);
    fj_ins(k->e, "and.b32 %s, %s, %d", R(x), R(r0), p->swz_mask);
    k->bk[BK8_R0] = r0;
    if (!p->kv8_direct) {
        k->bk[BK8_STG] = fj_alloc(k->e, k->b_addr, 1);
        fj_ins(k->e, "mad.lo.u32 %s, %s, 16, %s", R(k->bk[BK8_STG]), R(k->tid), R(k->smem));
        fj_ins(k->e, "add.u32 %s, %s, %d", R(k->bk[BK8_STG]), R(k->bk[BK8_STG]), p->kv8_off);
    }
    k->bk[BK8_C16] = fj_alloc(k->e, k->b_rd, 1);
    fj_ins(k->e, "mul.wide.u32 %s, %s, 16", R(k->bk[BK8_C16]), R(c0));
    if (p->kv8_direct) { /* row-major swizzled tiles the MMAs read (kv8_frag.c) */
        fj_kv8d_setup(k, r0, c0);
        return;
    }
    k->bk[BK8_DST] = fj_alloc(k->e, k->b_addr, 2 * kc);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(rb), R(r0), p->row_bytes, R(k->smem));
    for (int j = 0; j < kc; j++)
        for (int h = 0; h < 2; h++) { /* 16-bit chunk 2 (c0 + tpr8 j) + h, swizzled by the row */
            fj_ins(k->e, "mad.lo.u32 %s, %s, 2, %d", R(ch), R(c0), 2 * tpr8 * j + h);
            fj_ins(k->e, "xor.b32 %s, %s, %s", R(ch), R(ch), R(x));
            fj_ins(k->e, "shl.b32 %s, %s, 4", R(ch), R(ch));
            fj_ins(k->e, "add.u32 %s, %s, %s", R(fj_at(k->bk[BK8_DST], 2 * j + h)), R(rb), R(ch));
        }
}

/* Byte offset of (stage, tensor which: 1 K / 2 V, pass i, chunk j) in the ring, past BK8_STG. */
static int ring_off(const fj_plan *p, int slot, int which, int i, int j)
{
    int kc = p->copy_chunks_per_thread_row;
    return (2 * slot + which - 1) * p->cfg.block_n * p->cfg.head_dim + (i * kc + j) * p->threads * 16;
}

void fj_kv8_copy_tile(fj_kctx *k, int slot, int which, fj_reg_t gptr, fj_reg_t rows_valid)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, rpp = p->kv8_rows_per_pass;
    const int row_off = which == 1 ? OFF(k_row_bytes) : OFF(v_row_bytes);
    const int pass_off = which == 1 ? OFF(k_pass_bytes) : OFF(v_pass_bytes);
    fj_reg_t g = fj_alloc(k->e, k->b_rd, 1), gs = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), sz = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mul.wide.u32 %s, %s, %d", R(g), R(k->bk[BK8_R0]), 1);
    {
        fj_reg_t prm = fj_param_u64(k, row_off);
        fj_ins(k->e, "mad.lo.u64 %s, %s, %s, %s", R(g), R(g), R(prm), R(k->bk[BK8_C16]));
    }
    fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(g), R(gptr));
    for (int i = 0; i < p->cfg.block_n / rpp; i++) {
        if (i) {
            fj_reg_t prm = fj_param_u64(k, pass_off);
            fj_ins(k->e, "add.u64 %s, %s, %s", R(g), R(g), R(prm));
        }
        fj_ins(k->e, "add.s32 %s, %s, %d", R(row), R(k->bk[BK8_R0]), i * rpp);
        fj_ins(k->e, "setp.lt.s32 %s, %s, %s", R(pr), R(row), R(rows_valid));
        fj_ins(k->e, "selp.u32 %s, 16, 0, %s", R(sz), R(pr));
        fj_ins(k->e, "selp.b64 %s, %s, %s, %s", R(gs), R(g), R(gptr), R(pr)); /* never form an address past the end */
        for (int j = 0; j < kc; j++) {
            int imm = 0;
            fj_reg_t dst = p->kv8_direct ? fj_kv8d_copy_dst(k, slot, which, i, j, &imm) : k->bk[BK8_STG];
            if (!p->kv8_direct) imm = ring_off(p, slot, which, i, j);
            fj_ins(k->e, "cp.async.cg.shared.global [%s+%d], [%s+%d], 16, %s", R(dst), imm, R(gs), j * p->kv8_tpr * 16,
                   R(sz));
        }
    }
}

/* 1 when K / V widen to bf16 (bf16 queries whose Q does not stay in registers), else to f16. */
static int widen_bf16(const fj_plan *p) { return p->cfg.dtype == FAJIT_DTYPE_BF16 && !p->kv8_f16; }

/* Two e4m3 bytes of w (sel: which two) -> one f16x2 / bf16x2 register d (see the top of the file). */
static void widen_pair(fj_kctx *k, fj_reg_t d, fj_reg_t w, int sel, fj_reg_t unit, fj_reg_t negz)
{
    int f16 = !widen_bf16(k->p);
    fj_ins(k->e, "prmt.b32 %s, %s, 0, 0x%04X", R(d), R(w), sel);
    fj_ins(k->e, "shl.b32 %s, %s, %d", R(d), R(d), f16 ? 7 : 4);
    fj_ins(k->e, "and.b32 %s, %s, %s", R(d), R(d), f16 ? "0xBF80BF80" : "0x87F087F0");
    if (!f16) fj_ins(k->e, "fma.rn.bf16x2 %s, %s, %s, %s", R(d), R(d), R(unit), R(negz));
}

void fj_kv8_widen_pair(fj_kctx *k, fj_reg_t d, fj_reg_t w, int sel, fj_reg_t unit)
{
    widen_pair(k, d, w, sel, unit, fj_at(unit, 1));
}

/* bf16 widening's constants: unit = 2^120 (bf16x2), unit + 1 = -0 (bf16x2). */
static void unit_consts(fj_kctx *k, fj_reg_t unit)
{
    fj_ins(k->e, "mov.b32 %s, 0x7B807B80", R(unit));         /* bf16x2 2^120 */
    fj_ins(k->e, "mov.b32 %s, 0x80008000", R(fj_at(unit, 1))); /* -0 + x keeps x's sign for x = +-0 */
}

fj_reg_t fj_kv8_unit_regs(fj_kctx *k)
{
    fj_reg_t unit = fj_alloc(k->e, k->b_r, 2);
    if (widen_bf16(k->p)) unit_consts(k, unit);
    return unit;
}

void fj_kv8_cvt_word(fj_kctx *k, fj_reg_t d0, fj_reg_t d1, fj_reg_t w)
{
    fj_line(k->e, "{");
    fj_line(k->e, ".reg .b16 %%kv8_h<2>;");
    fj_ins(k->e, "mov.b32 {%%kv8_h0, %%kv8_h1}, %s", R(w));
    fj_ins(k->e, "cvt.rn.f16x2.e4m3x2 %s, %%kv8_h0", R(d0));
    fj_ins(k->e, "cvt.rn.f16x2.e4m3x2 %s, %%kv8_h1", R(d1));
    fj_line(k->e, "}");
}

void fj_kv8_widen(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, rpp = p->kv8_rows_per_pass;
    fj_reg_t w = fj_alloc(k->e, k->b_r, 4), h = fj_alloc(k->e, k->b_r, 8), unit = fj_alloc(k->e, k->b_r, 2);
    fj_reg_t negz = fj_at(unit, 1);
    fj_comment(k->e, 1, "FP8 K/V: widen this thread's e4m3 bytes of stage %d into the 16-bit K and V tiles", slot);
    if (widen_bf16(p)) unit_consts(k, unit);
    for (int which = 1; which <= 2; which++) {
        int tile = which == 1 ? p->k_off : p->v_off; /* the one 16-bit slot (plan.kv_slots) */
        for (int i = 0; i < p->cfg.block_n / rpp; i++)
            for (int j = 0; j < kc; j++) {
                fj_ins(k->e, "ld.shared.v4.b32 {%s, %s, %s, %s}, [%s+%d]", R(w), R(fj_at(w, 1)), R(fj_at(w, 2)),
                       R(fj_at(w, 3)), R(k->bk[BK8_STG]), ring_off(p, slot, which, i, j));
                for (int q = 0; q < 4; q++) {
                    if (fj_kv8_widen_cvt(p, which)) { /* bytes 0, 1 -> h[2q] (byte 0 in the low half), bytes 2, 3 -> h[2q + 1] */
                        fj_kv8_cvt_word(k, fj_at(h, 2 * q), fj_at(h, 2 * q + 1), fj_at(w, q));
                        continue;
                    }
                    widen_pair(k, fj_at(h, 2 * q), fj_at(w, q), KV8_SEL_LO, unit, negz);
                    widen_pair(k, fj_at(h, 2 * q + 1), fj_at(w, q), KV8_SEL_HI, unit, negz);
                }
                for (int half = 0; half < 2; half++)
                    fj_ins(k->e, "st.shared.v4.b32 [%s+%d], {%s, %s, %s, %s}", R(fj_at(k->bk[BK8_DST], 2 * j + half)),
                           tile + i * rpp * p->row_bytes, R(fj_at(h, 4 * half)), R(fj_at(h, 4 * half + 1)),
                           R(fj_at(h, 4 * half + 2)), R(fj_at(h, 4 * half + 3)));
            }
    }
}

/* The factor of (b, KV head) of the descale at parameter offset `off` into out (1.0 when the pointer is 0),
 * times 2^unit_log2. */
static void load_descale(fj_kctx *k, int off, fj_reg_t idx, int unit_log2, fj_reg_t out)
{
    fj_reg_t ptr = fj_param_u64(k, k->p->fp8_off + off), a = fj_alloc(k->e, k->b_rd, 1);
    fj_reg_t on = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mov.f32 %s, 0f3F800000", R(out));
    fj_ins(k->e, "setp.ne.u64 %s, %s, 0", R(on), R(ptr));
    fj_ins(k->e, "mad.wide.u32 %s, %s, 4, %s", R(a), R(idx), R(ptr));
    fj_ins(k->e, "@%s ld.global.nc.f32 %s, [%s]", R(on), R(out), R(a));
    if (unit_log2) fj_ins(k->e, "mul.f32 %s, %s, 0f%08X", R(out), R(out), (unsigned)(127 - unit_log2) << 23);
}

void fj_kv8_descales(fj_kctx *k, fj_reg_t b, fj_reg_t hkv)
{
    const fj_plan *p = k->p;
    int u = fj_kv8_unit_log2_of(p, 1), uv = fj_kv8_unit_log2_of(p, 2);
    fj_reg_t idx = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "FP8 K/V: the softmax scale x k_descale[b][hkv]%s and O's factor v_descale[b][hkv]%s",
               u ? " x 2^8" : "", uv ? " x 2^8 (the f16 widening's 2^-8)" : "");
    {
        fj_reg_t st = fj_param_s32(k, p->fp8_off + (int)offsetof(fj_fwd_params_fp8, descale_stride));
        fj_ins(k->e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(b), R(st), R(hkv));
    }
    k->score_scale = fj_alloc(k->e, k->b_f, 1);
    k->o_scale = fj_alloc(k->e, k->b_f, 1);
    load_descale(k, (int)offsetof(fj_fwd_params_fp8, k_descale), idx, u, k->score_scale);
    {
        fj_reg_t sc = fj_param_f32(k, OFF(scale_log2));
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(k->score_scale), R(k->score_scale), R(sc));
    }
    load_descale(k, (int)offsetof(fj_fwd_params_fp8, v_descale), idx, uv, k->o_scale);
}

/* plan.kv8_f16 (bf16 queries): the MMAs run in f16, so K / V widen without the bf16 multiply. Q's bf16 values
 * become f16 x 2^a, a = 141 - (biased exponent of the warp's largest |q|) clamped to -126..126, so that value
 * lands in [2^14, 2^15); k->score_scale takes 2^-a. Exact for every |q| x 2^a >= 2^-17 (8 significant bits fit
 * f16's 11 from there down, subnormals included); smaller ones round to a multiple of 2^-24, an error of at most
 * 2^-25 / 2^14 = 2^-39 of the warp's largest |q| (bf16 itself rounds each q to 2^-9 of its own size). Every lane
 * of the warp takes the same a (a butterfly max), so the rows' softmax is on one scale; warp pairs hold the same
 * Q rows, so both warps of a pair take the same a. Once per CTA: ~8 instructions per Q register. */
void fj_kv8_q_to_f16(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int n = p->m_frags * p->k_steps_qk * 4;
    fj_reg_t mx = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_r, 2), a = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t f = fj_alloc(k->e, k->b_f, 3);
    fj_comment(k->e, 1, "FP8 K/V under bf16 Q: Q -> f16 x 2^a (a from the warp's largest |q|), the softmax scale x 2^-a");
    fj_ins(k->e, "mov.b32 %s, 0", R(mx));
    for (int i = 0; i < n; i++) {
        fj_ins(k->e, "and.b32 %s, %s, 0x7FFF7FFF", R(t), R(fj_at(k->frag_q, i)));
        fj_ins(k->e, "max.bf16x2 %s, %s, %s", R(mx), R(mx), R(t));
    }
    fj_ins(k->e, "shr.u32 %s, %s, 16", R(t), R(mx)); /* |q| patterns order as unsigned integers */
    fj_ins(k->e, "and.b32 %s, %s, 0xFFFF", R(mx), R(mx));
    fj_ins(k->e, "max.u32 %s, %s, %s", R(mx), R(mx), R(t));
    for (int lane = 16; lane >= 1; lane /= 2) {
        fj_ins(k->e, "shfl.sync.bfly.b32 %s, %s, %d, 31, 0xFFFFFFFF", R(t), R(mx), lane);
        fj_ins(k->e, "max.u32 %s, %s, %s", R(mx), R(mx), R(t));
    }
    fj_ins(k->e, "shr.u32 %s, %s, 7", R(a), R(mx));
    fj_ins(k->e, "sub.s32 %s, 141, %s", R(a), R(a));
    fj_ins(k->e, "min.s32 %s, %s, 126", R(a), R(a));
    fj_ins(k->e, "max.s32 %s, %s, -126", R(a), R(a));
    fj_ins(k->e, "add.s32 %s, %s, 127", R(t), R(a)); /* 2^a */
    fj_ins(k->e, "shl.b32 %s, %s, 23", R(t), R(t));
    fj_ins(k->e, "mov.b32 %s, %s", R(f), R(t));
    fj_ins(k->e, "sub.s32 %s, 127, %s", R(t), R(a)); /* 2^-a */
    fj_ins(k->e, "shl.b32 %s, %s, 23", R(t), R(t));
    fj_ins(k->e, "mov.b32 %s, %s", R(fj_at(f, 1)), R(t));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(k->score_scale), R(k->score_scale), R(fj_at(f, 1)));
    fj_reg_t lo = fj_at(f, 1), hi = fj_at(f, 2);
    for (int i = 0; i < n; i++) {
        fj_reg_t q = fj_at(k->frag_q, i);
        fj_ins(k->e, "shl.b32 %s, %s, 16", R(t), R(q));
        fj_ins(k->e, "and.b32 %s, %s, 0xFFFF0000", R(fj_at(t, 1)), R(q));
        fj_ins(k->e, "mov.b32 %s, %s", R(lo), R(t));
        fj_ins(k->e, "mov.b32 %s, %s", R(hi), R(fj_at(t, 1)));
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(lo), R(lo), R(f));
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(hi), R(hi), R(f));
        fj_ins(k->e, "cvt.rn.f16x2.f32 %s, %s, %s", R(q), R(hi), R(lo));
    }
}
