/*
 * fp8_ws.c - FP8 (e4m3) attention on the sm_90a warp-specialized kernel (ws_frame.c, sm90_roles.c, sm90.c). PTX ISA 8.0,
 * .target sm_90a; ISA sections 9.7.15 (wgmma .e4m3, k = 32, register and smem layouts), 9.7.14.5.15-16
 * (ldmatrix / stmatrix), 9.7.9.21 (cvt .e4m3x2), 9.7.8.7 (prmt).
 *
 * What differs from the 16-bit kernel:
 *   - Q, K, V are 1-byte elements: a TMA box row of the swizzle span holds that many elements; S = Q K^T runs
 *     wgmma m64nBc k32 steps (32 bytes along the rows, the same byte offsets as k16 of 16-bit elements).
 *   - FP8 wgmma reads B only K-major, so O += P V needs V transposed: the producer's warps 1-3 (thread 0 of warp 0
 *     still issues every TMA load; with the vt4 knob warp 0 joins them once it has issued tile j's) wait for V(j) in
 *     stage s, transpose it into the Vt ring ([head_dim][block_n]
 *     bytes, K-major, boxes of vt_swizzle bytes) with ldmatrix.trans + prmt + stmatrix, fence the generic writes
 *     for the async proxy, arrive on VT full[s] and free V's stage (V empty[s]). The consumers wait on VT full and
 *     free VT empty instead of V's barriers. The transpose writes Vt's keys in fj_fp8_p_key's order.
 *   - P goes to the A fragments without moving bytes between threads: a cvt per pair of scores, in the k order
 *     fj_fp8_p_key (fp8_layout.h; tests/test_fp8_layout.c proves the order against the ISA's layouts).
 *   - Descales (FlashAttention-3's q / k / v_descale, float32 [batch][heads_kv]): q x k folded into the softmax's
 *     scale per work tile, v into the epilogue's 1/l. O is BF16 or F16 (cfg.out_dtype), rows of 2 x head_dim bytes.
 */
#include "fp8_ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "fp8_layout.h"
#include "kernel_abi.h"
#include "mask.h"
#include "sm90.h"
#include "ptx_templates/common.h"
#include "ptx_templates/sm90.h"
#include "base/env_word.h"
#include "base/error.h"

#define R(reg) fj_r(k->e, reg)
#define CFG_FAIL(...) fj_fail(FAJIT_ERR_INVALID_CONFIG, __VA_ARGS__)
#define FJ_FP8_TRANSPOSE_WARPS 3
/* occ2: O + S + P accumulator registers a consumer thread that ptxas 13.0 assembles under the 128-register launch
 * bound (2026-11-29, br64 w8 s2: D64 bc192 = 152 and D128 bc128 = 144 assemble with no spill; D64 bc224 = 172 and
 * bc256 fail with "Insufficient registers") */
#define FJ_FP8_OCC2_ACC_MAX 152

/* ---- plan ----------------------------------------------------------------------------------------------------- */
static const fj_env_word k_knob_words[] = {{"regs", FJ_FP8_KNOB_REGS, NULL},
                                           {"vt", FJ_FP8_KNOB_VT, NULL},
                                           {"ostage", FJ_FP8_KNOB_OSTAGE, NULL},
                                           {"vt4", FJ_FP8_KNOB_VT4, NULL},
                                           {"poff", FJ_FP8_KNOB_POFF, NULL},
                                           {"occ2", FJ_FP8_KNOB_OCC2, NULL},
                                           {"all", FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_VT | FJ_FP8_KNOB_OSTAGE, NULL},
                                           {"none", 0, NULL},
                                           {NULL, 0, NULL}};

unsigned fj_fp8_knobs_default(int head_dim, int local)
{
    if (FJ_FP8_D256_FA3 && FJ_FP8_VT4_D256 && head_dim == 256 && !local) /* FA3's set with the lean vt4 (fp8_ws.h) */
        return FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_VT4 | FJ_FP8_KNOB_OSTAGE | (FJ_FP8_POFF ? FJ_FP8_KNOB_POFF : 0u);
    return FJ_FP8_KNOB_VT | (FJ_FP8_VT4 || (FJ_FP8_VT4_D128 && head_dim == 128) ? FJ_FP8_KNOB_VT4 : 0u) |
           (FJ_FP8_D256_FA3 && head_dim == 256 ? FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_OSTAGE : 0u) |
           (FJ_FP8_POFF ? FJ_FP8_KNOB_POFF : 0u);
}

fajit_status fj_fp8_knobs_parse(const char *value, int head_dim, int local, unsigned *bits)
{
    return fj_env_list_parse("FAJIT_FP8_KNOBS", value, k_knob_words, fj_fp8_knobs_default(head_dim, local),
                             FJ_FP8_D256_FA3 ? "vt, poff; vt4 at head dim 128; regs, vt4, ostage, poff at head dim 256" : "vt, poff, vt4 at head dim 128", bits);
}

/* Whether p's tile, with its knobs and occ2, fits half an SM's smem (a V-tail barrier's 8 bytes spared) and
 * block_n <= 128 (ptxas 13.0 refuses D64 br64 bc224 s2 under the 128-register launch bound: "Insufficient registers
 * (128)"; the tune space's br64 tiles up to bc128 assemble). */
static int occ2_fits(const fj_plan *p)
{
    if (p->cfg.block_n > 128) return 0;
    fj_plan t = *p;
    t.min_ctas = 2;
    t.fp8_knobs |= FJ_FP8_KNOB_OCC2;
    fj_fp8_smem_map(&t);
    return t.smem_bytes + 8 <= fj_plan_smem_limit(&t);
}

/* FlashAttention-3's register split where a plain tile is wider than 40 producer registers leave room for
 * (fp8_ws.h FJ_FP8_REGS_WIDE) */
static int regs_wide(const fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (!FJ_FP8_REGS_WIDE || fj_mods_local(p)) return 0;
    return (c->head_dim == 64 && p->consumer_wgs == 3 && c->block_n > 128) ||
           (c->head_dim == 128 && p->consumer_wgs == 2 && c->block_n > 192);
}

unsigned fj_fp8_plan_knobs_default(const fj_plan *p)
{
    unsigned def = fj_fp8_knobs_default(p->cfg.head_dim, fj_mods_local(p));
    int occ2 = FJ_FP8_OCC2_DECODE && p->consumer_wgs == 1 && p->cfg.head_dim <= 128 && occ2_fits(p);
    if (!regs_wide(p)) return def | (occ2 ? FJ_FP8_KNOB_OCC2 : 0u);
    def |= FJ_FP8_KNOB_REGS;
    /* the lean vt4 form (two consumer warpgroups: 24 producer registers) does not hold the V-tail fill of seqlens_k /
     * paged K/V (plan.c); the three-warp vt form does (ptxas 13.0, D128 bc224: 0 spills) */
    if (p->consumer_wgs == 2 && (p->variant_wanted & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED))) def &= ~FJ_FP8_KNOB_VT4;
    return def;
}

int fj_fp8_knobs_words(const fj_plan *p, char *buf, size_t size)
{
    char words[64];
    if (size) buf[0] = '\0';
    if (p->fp8_knobs == fj_fp8_plan_knobs_default(p)) return 0;
    fj_env_list_format(k_knob_words, p->fp8_knobs, words, sizeof words);
    return snprintf(buf, size, " fp8knobs=%s", words);
}

/* The Vt ring's box width: the widest swizzle span that divides a row of block_n bytes. */
static int vt_swizzle_of(int block_n) { return block_n % 128 == 0 ? 128 : block_n % 64 == 0 ? 64 : 32; }

/* ---- the vt4 block split ---------------------------------------------------------------------------------------
 * A transposed block is 16 keys (key, a multiple of 16) x 32 head dims (col, a multiple of 32). Its ldmatrix reads
 * V at smem offset v_tile + ld_imm + (lane term ^ ld_xor), its stmatrix writes Vt at vt_tile + st_imm + (lane term
 * ^ st_xor) (w: V's swizzle span; wv: Vt's box width). vt4 gives warp (kw, dw) = (warp & 1, warp >> 1) the blocks
 * key = 32 a + 16 kw, col = 64 c + 32 dw, and folds the warp's part (key 16 kw, col 32 dw) into its lane terms once:
 * so each block's address needs the warp's offset to add to the block's immediate and its XOR to combine with the
 * block's by XOR (no carry between them), which vt4_split_ok checks for every block of the tile. */
static int ld_imm(int w, int bn, int key, int col) { return col / w * bn * w + key * w; }
static int ld_xor(int w, int col) { return 16 * (col % w / 16); }
static int st_imm(int wv, int d, int key, int col) { return key / wv * d * wv + col * wv; }
static int st_xor(int wv, int key) { return 16 * (key % wv / 16); }

static int vt4_split_ok(int d, int bn, int w)
{
    int wv = vt_swizzle_of(bn);
    if (bn % 32 != 0 || d % 64 != 0) return 0;
    for (int kw = 0; kw < 2; kw++)
        for (int dw = 0; dw < 2; dw++)
            for (int key = 0; key < bn; key += 32)
                for (int col = 0; col < d; col += 64) {
                    int kt = key + 16 * kw, ct = col + 32 * dw;
                    if (ld_imm(w, bn, kt, ct) != ld_imm(w, bn, key, col) + ld_imm(w, bn, 16 * kw, 32 * dw) ||
                        ld_xor(w, ct) != (ld_xor(w, col) ^ ld_xor(w, 32 * dw)) ||
                        st_imm(wv, d, kt, ct) != st_imm(wv, d, key, col) + st_imm(wv, d, 16 * kw, 32 * dw) ||
                        st_xor(wv, kt) != (st_xor(wv, key) ^ st_xor(wv, 16 * kw)))
                        return 0;
                }
    return 1;
}

fajit_status fj_fp8_tiles(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    if (c->block_n % 32 != 0)
        return CFG_FAIL("block_n (--bc) = %d with dtype e4m3: FP8 wgmma takes 32 keys a k step; use a multiple of 32",
                        c->block_n);
    if (c->head_dim % c->swizzle != 0)
        return CFG_FAIL("swizzle = %d with dtype e4m3: a row of head_dim %d is %d bytes, and the swizzle span (the TMA "
                        "box row) must divide it; use %d",
                        c->swizzle, c->head_dim, c->head_dim, c->head_dim >= 128 ? 128 : 64);
    if (c->mods & FAJIT_MOD_ALIBI)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "mods = %d with dtype e4m3: ALiBi has no FP8 kernel (its bias is in "
                                              "the true score's units, which the e4m3 scores reach only through "
                                              "q / k_descale; FlashAttention-3 has no FP8 ALiBi either); window, "
                                              "softcap, sinks and chunk do", c->mods);
    p->fp8 = 1;
    const char *env = getenv("FAJIT_FP8_KNOBS");
    fajit_status st = fj_fp8_knobs_parse(env, c->head_dim, fj_mods_local(p), &p->fp8_knobs);
    if (st != FAJIT_OK) return st;
    if (!env) p->fp8_knobs = fj_fp8_plan_knobs_default(p); /* occ2 where the one-consumer tile fits it */
    if (p->fp8_knobs & FJ_FP8_KNOB_OCC2) {
        if (p->consumer_wgs != 1)
            return CFG_FAIL("FAJIT_FP8_KNOBS occ2 with block_m (--br) = %d: two CTAs an SM take a one-consumer tile "
                            "(block_m 64, warps 8)", c->block_m);
        if (c->head_dim > 128) /* ptxas 13.0: "Insufficient registers (128)" under the two-CTA launch bound */
            return fj_fail(FAJIT_ERR_UNSUPPORTED, "FAJIT_FP8_KNOBS occ2 with head_dim %d: two CTAs an SM take head_dim "
                                                  "64 and 128 (ptxas cannot fit head_dim 256 in a 128-register launch)",
                           c->head_dim);
        int acc = fj_sm90_acc_o_regs(c) + fj_sm90_acc_s_regs(c) + fj_sm90_p_regs(c); /* a consumer thread's */
        if (acc > FJ_FP8_OCC2_ACC_MAX)
            return CFG_FAIL("FAJIT_FP8_KNOBS occ2 with head_dim %d, block_n (--bc) %d: O, S and P take %d registers a "
                            "consumer thread, past the %d that ptxas 13.0 fits beside the rest under two CTAs' "
                            "128-register launch (head_dim 64: block_n <= 192; 128: <= 128)",
                            c->head_dim, c->block_n, acc, FJ_FP8_OCC2_ACC_MAX);
        p->min_ctas = 2;
    }
    if (!(p->fp8_knobs & FJ_FP8_KNOB_VT4)) return FAJIT_OK;
    if (!vt4_split_ok(c->head_dim, c->block_n, c->swizzle))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "FAJIT_FP8_KNOBS vt4 with head_dim %d, block_n (--bc) %d, swizzle %d: the "
                                              "4-warp transpose needs an even number of 16-key and of 32-dim block "
                                              "rows and the warps' offsets apart from the blocks'; drop vt4",
                       c->head_dim, c->block_n, c->swizzle);
    return FAJIT_OK;
}

void fj_fp8_smem_map(fj_plan *p)
{
    const fajit_config *c = &p->cfg;
    int limit = fj_plan_smem_limit(p), d = c->head_dim, bn = c->block_n;
    p->fp8 = 1;
    p->fp8_vt4 = (p->fp8_knobs & FJ_FP8_KNOB_VT4) != 0;
    p->p_offset = p->fp8_knobs & FJ_FP8_KNOB_POFF ? 8 : 0;
    p->fp8_p_early = FJ_FP8_P_EARLY || (FJ_FP8_P_EARLY_D256 && d == 256);
    p->transpose_warps = FJ_FP8_TRANSPOSE_WARPS + p->fp8_vt4;
    p->row_bytes = d;
    p->q_off = 0;
    p->q_bytes = c->block_m * d;
    p->kv_tile_bytes = bn * d;
    p->o_row_bytes = 2 * d;
    p->o_bytes = c->block_m * 2 * d;
    p->vt_swizzle = vt_swizzle_of(bn);
    /* every tile is a multiple of 2048 bytes (rows of >= 64 bytes, 32-row multiples), so each starts on a whole
     * swizzle pattern (1024 bytes at the 128-byte span) */
    /* the Vt ring's barriers: full and empty a stage, 16 bytes apart, or the K / V block's stride for the rolled
     * consumer loop (codegen.h vt_bar_stride) */
    p->vt_bar_stride = fj_sm90_rolled(p) ? 8 * FJ_WS_BARS_PER_STAGE : 16;
    int bars = fj_ws_bar_count(c->stages, 0) + p->vt_bar_stride / 8 * c->stages;
    int base = p->q_bytes + 3 * c->stages * p->kv_tile_bytes + 8 * bars;
    /* a split's or a packed tile's epilogue stores O from registers (fj_ws_o_in_regs): no staging buffer is planned
     * (16 KB at D128 br64; before 2026-11-29 the decode tile's smem held one it never used) */
    int staged = !fj_ws_o_in_regs(p);
    p->o_stage = staged && base + p->o_bytes <= limit ? 1 : 0; /* not in the V ring: the transposers own it */
    /* FJ_FP8_KNOB_OSTAGE: no own buffer fits (D256), so O is staged in the V ring (FlashAttention-3 stages O in V's
     * smem): only the transposers read V, and a consumer warpgroup's epilogue comes after its wait on the work tile's
     * last VT full, so every V of the tile has been read; the producer loads the next tile's first V after O free */
    if (staged && !p->o_stage && (p->fp8_knobs & FJ_FP8_KNOB_OSTAGE) && c->stages * p->kv_tile_bytes >= p->o_bytes &&
        base + 8 <= limit)
        p->o_stage = 2, bars++;
    p->q_bufs = base + 8 * (p->o_stage == 2) + (p->o_stage == 1 ? p->o_bytes : 0) + p->q_bytes <= limit ? 2 : 1;
    p->n_bars = bars;
    p->k_off = p->q_off + p->q_bufs * p->q_bytes;
    p->v_off = p->k_off + c->stages * p->kv_tile_bytes;
    p->vt_off = p->v_off + c->stages * p->kv_tile_bytes;
    p->o_off = p->o_stage == 2 ? p->v_off : p->vt_off + c->stages * p->kv_tile_bytes;
    p->bar_off = p->vt_off + c->stages * p->kv_tile_bytes + (p->o_stage == 1 ? p->o_bytes : 0);
    p->vt_bar = p->bar_off + 8 * fj_ws_bar_count(c->stages, p->o_stage); /* after O free when there is one */
    p->smem_bytes = p->bar_off + 8 * bars;
    p->xchg_off = p->xchg_warp_bytes = 0;
}

/* ---- P -------------------------------------------------------------------------------------------------------- */
/* P -> e4m3 A fragments in dst (k_steps_pv x 4 b32 registers). */
static void pack_p_into(fj_kctx *k, fj_reg_t dst)
{
    const fj_plan *p = k->p;
    int bh = fj_bank(k->e, "h", "b16");
    fj_reg_t h = fj_alloc(k->e, bh, 2);
    fj_comment(k->e, 2, "P (f32 in the S accumulators) -> e4m3 A fragments: register r of 32-key chunk c holds the "
                        "four scores fj_fp8_p_src(c, r, 0..3), k order fj_fp8_p_key (Vt's keys are in the same order)");
    for (int c = 0; c < p->k_steps_pv; c++)
        for (int r = 0; r < 4; r++) {
            for (int half = 0; half < 2; half++)
                fj_ins(k->e, PTX_CVT_E4M3X2, R(fj_at(h, half)), R(fj_at(k->acc_s, fj_fp8_p_src(c, r, 2 * half + 1))),
                       R(fj_at(k->acc_s, fj_fp8_p_src(c, r, 2 * half))));
            fj_ins(k->e, "mov.b32 %s, {%s, %s}", R(fj_at(dst, 4 * c + r)), R(h), R(fj_at(h, 1)));
        }
}

void fj_fp8_emit_pack_p(fj_kctx *k) { pack_p_into(k, k->frag_p); }

fj_reg_t fj_fp8_emit_pack_p_early(fj_kctx *k)
{
    int n = 4 * k->p->k_steps_pv;
    fj_reg_t t = fj_alloc(k->e, fj_bank(k->e, "frag_pe", "b32"), n);
    fj_comment(k->e, 1, "P(j) -> e4m3 in registers of its own while PV(j-1) still reads P(j-1) (so ptxas merges each "
                        "register's two cvt into F2FP.MERGE_C, no PRMT)");
    pack_p_into(k, t);
    return t;
}

void fj_fp8_emit_pack_p_take(fj_kctx *k, fj_reg_t t)
{
    fj_comment(k->e, 1, "P(j)'s A fragments (ptxas allocates them in place: no MOV)");
    for (int i = 0; i < 4 * k->p->k_steps_pv; i++)
        fj_ins(k->e, "mov.b32 %s, %s", R(fj_at(k->frag_p, i)), R(fj_at(t, i)));
}

/* ---- the V transpose ------------------------------------------------------------------------------------------ */
int fj_fp8_vt4_lean(const fj_plan *p) { return p->fp8_vt4 && p->producer_regs > 0 && p->producer_regs < 32; }

/* dst = 16 x the chunk XOR of a row (TMA / wgmma swizzle of span w, fp8_layout.c) whose index mod 8 comes from
 * `row8` (a register holding row mod 8 x w / 128 ... as bits): x = (row x w / 128) & (w / 16 - 1). */
static void lane_xor(fj_kctx *k, fj_reg_t row, int w, fj_reg_t dst)
{
    fj_ins(k->e, "mul.lo.u32 %s, %s, %d", R(dst), R(row), w);
    fj_ins(k->e, "shr.u32 %s, %s, 7", R(dst), R(dst));
    fj_ins(k->e, "and.b32 %s, %s, %d", R(dst), R(dst), w / 16 - 1);
    fj_ins(k->e, "shl.b32 %s, %s, 4", R(dst), R(dst));
}

/* vt4: warp (kw, dw) = (warp & 1, warp >> 1) transposes the blocks at key 16 kw and col 32 dw past the ones its
 * straight code names (vt4_split_ok): their offsets into ld_base / st_base, their XORs into ld_x / st_x. */
static void vt4_warp_terms(fj_kctx *k, fj_fp8_lanes *ln, fj_reg_t kw, fj_reg_t dw)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int w = p->cfg.swizzle, wv = p->vt_swizzle, bn = p->cfg.block_n, d = p->cfg.head_dim;
    fj_reg_t t = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "vt4: warp (kw, dw) = (warp & 1, warp >> 1) takes the blocks at keys 32 a + 16 kw, head dims "
                     "64 c + 32 dw: its part of their addresses, once");
    fj_ins(e, "and.b32 %s, %s, 1", R(kw), R(k->warp));
    fj_ins(e, "shr.u32 %s, %s, 1", R(dw), R(k->warp));
    struct {
        fj_reg_t base, x, bit;
        int add, xr;
    } terms[] = {{ln->ld_base, ln->ld_x, kw, ld_imm(w, bn, 16, 0), 0},
                 {ln->ld_base, ln->ld_x, dw, ld_imm(w, bn, 0, 32), ld_xor(w, 32)},
                 {ln->st_base, ln->st_x, kw, st_imm(wv, d, 16, 0), st_xor(wv, 16)},
                 {ln->st_base, ln->st_x, dw, st_imm(wv, d, 0, 32), 0}};
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++) {
        if (terms[i].add)
            fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(terms[i].base), R(terms[i].bit), terms[i].add, R(terms[i].base));
        if (terms[i].xr) {
            fj_ins(e, "mul.lo.u32 %s, %s, %d", R(t), R(terms[i].bit), terms[i].xr);
            fj_ins(e, "xor.b32 %s, %s, %s", R(terms[i].x), R(terms[i].x), R(t));
        }
    }
}

void fj_fp8_emit_transpose_setup(fj_kctx *k, fj_fp8_lanes *ln)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int w = p->cfg.swizzle, wv = p->vt_swizzle;
    fj_reg_t m = fj_alloc(e, k->b_r, 1), i = fj_alloc(e, k->b_r, 1), t = fj_alloc(e, k->b_r, 1);
    ln->tw = fj_alloc(e, k->b_r, 1);
    ln->ld_base = fj_alloc(e, k->b_r, 1);
    ln->ld_x = fj_alloc(e, k->b_r, 1);
    ln->st_base = fj_alloc(e, k->b_r, 1);
    ln->st_x = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "V transpose lanes (fp8_layout.h): matrix m = lane / 8, row i = lane %% 8; ldmatrix row = key "
                     "8 (m & 1) + i at head-dim byte 16 (m >> 1) of the block; stmatrix row = Vt row 16 (m >> 1) + 2 i "
                     "+ (m & 1)");
    if (p->fp8_vt4) fj_ins(e, "mov.u32 %s, %s", R(ln->tw), R(k->warp));
    else fj_ins(e, "sub.u32 %s, %s, 1", R(ln->tw), R(k->warp));
    fj_ins(e, "shr.u32 %s, %s, 3", R(m), R(k->lane));
    fj_ins(e, "and.b32 %s, %s, 7", R(i), R(k->lane));
    /* ldmatrix: key kl = 8 (m & 1) + i; V's box row kl x w; the chunk XOR of key kl (the block's 16 keys keep it) */
    fj_ins(e, "and.b32 %s, %s, 1", R(t), R(m));
    fj_ins(e, "mad.lo.u32 %s, %s, 8, %s", R(t), R(t), R(i));
    lane_xor(k, t, w, ln->ld_x);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ln->ld_base), R(t), w, R(k->smem));
    fj_ins(e, "shr.u32 %s, %s, 1", R(t), R(m)); /* m >> 1: the block's second 16-byte chunk of head dims */
    fj_ins(e, "shl.b32 %s, %s, 4", R(t), R(t));
    fj_ins(e, "xor.b32 %s, %s, %s", R(ln->ld_x), R(ln->ld_x), R(t));
    /* stmatrix: Vt row n = 16 (m >> 1) + 2 i + (m & 1), its box row n x wv, its chunk XOR */
    fj_ins(e, "shr.u32 %s, %s, 1", R(t), R(m));
    fj_ins(e, "shl.b32 %s, %s, 4", R(t), R(t));
    fj_ins(e, "mad.lo.u32 %s, %s, 2, %s", R(t), R(i), R(t));
    fj_ins(e, "and.b32 %s, %s, 1", R(m), R(m));
    fj_ins(e, "add.u32 %s, %s, %s", R(t), R(t), R(m));
    lane_xor(k, t, wv, ln->st_x);
    fj_ins(e, "mad.lo.u32 %s, %s, %d, %s", R(ln->st_base), R(t), wv, R(k->smem));
    if (p->fp8_vt4) vt4_warp_terms(k, ln, m, t);
    if (fj_fp8_vt4_lean(p)) {
        fj_comment(e, 1, "lean vt4: one address a direction, base | XOR (the bases' bits below the swizzle span are "
                         "0)");
        fj_ins(e, "add.u32 %s, %s, %s", R(ln->ld_base), R(ln->ld_base), R(ln->ld_x));
        fj_ins(e, "add.u32 %s, %s, %s", R(ln->st_base), R(ln->st_base), R(ln->st_x));
    }
}

/* One block (16 keys x 32 head dims) of V(stage) -> Vt(stage): its ldmatrix.trans (into a), or its prmt + stmatrix
 * (a -> o -> smem). */
static void transpose_load_at(fj_kctx *k, const fj_fp8_lanes *ln, int v_tile, int key, int col, fj_reg_t a, fj_reg_t x,
                              fj_reg_t ad)
{
    const fj_plan *p = k->p;
    int w = p->cfg.swizzle, bn = p->cfg.block_n;
    /* ldmatrix row: V box (col / w), row key + kl, chunk ((col % w) / 16 + (m >> 1)) ^ x(kl) */
    if (fj_fp8_vt4_lean(p)) fj_ins(k->e, "xor.b32 %s, %s, %d", R(ad), R(ln->ld_base), ld_xor(w, col));
    else {
        fj_ins(k->e, "xor.b32 %s, %s, %d", R(x), R(ln->ld_x), ld_xor(w, col));
        fj_ins(k->e, "add.u32 %s, %s, %s", R(ad), R(ln->ld_base), R(x));
    }
    fj_ins(k->e, PTX_LDMATRIX_X4_TRANS_SM90, R(a), R(fj_at(a, 1)), R(fj_at(a, 2)), R(fj_at(a, 3)), R(ad),
           v_tile + ld_imm(w, bn, key, col));
}

static void transpose_store_at(fj_kctx *k, const fj_fp8_lanes *ln, int vt_tile, int key, int col, fj_reg_t a,
                               fj_reg_t o, fj_reg_t x, fj_reg_t ad)
{
    const fj_plan *p = k->p;
    int wv = p->vt_swizzle, d = p->cfg.head_dim;
    fj_ins(k->e, PTX_PRMT, R(o), R(a), R(fj_at(a, 1)), FJ_FP8_PRMT_EVEN);
    fj_ins(k->e, PTX_PRMT, R(fj_at(o, 1)), R(a), R(fj_at(a, 1)), FJ_FP8_PRMT_ODD);
    fj_ins(k->e, PTX_PRMT, R(fj_at(o, 2)), R(fj_at(a, 2)), R(fj_at(a, 3)), FJ_FP8_PRMT_EVEN);
    fj_ins(k->e, PTX_PRMT, R(fj_at(o, 3)), R(fj_at(a, 2)), R(fj_at(a, 3)), FJ_FP8_PRMT_ODD);
    /* stmatrix row: Vt box (key / wv), row col + n, chunk ((key % wv) / 16) ^ x(n) */
    if (fj_fp8_vt4_lean(p)) fj_ins(k->e, "xor.b32 %s, %s, %d", R(ad), R(ln->st_base), st_xor(wv, key));
    else {
        fj_ins(k->e, "xor.b32 %s, %s, %d", R(x), R(ln->st_x), st_xor(wv, key));
        fj_ins(k->e, "add.u32 %s, %s, %s", R(ad), R(ln->st_base), R(x));
    }
    fj_ins(k->e, PTX_STMATRIX_X4, R(ad), vt_tile + st_imm(wv, d, key, col), R(o), R(fj_at(o, 1)),
           R(fj_at(o, 2)), R(fj_at(o, 3)));
}

/* Block b (16 keys x 32 head dims, keys fastest) of the round-robin forms. */
static void transpose_load(fj_kctx *k, const fj_fp8_lanes *ln, int v_tile, int b, fj_reg_t a, fj_reg_t x, fj_reg_t ad)
{
    int n_kg = k->p->cfg.block_n / 16;
    transpose_load_at(k, ln, v_tile, 16 * (b % n_kg), 32 * (b / n_kg), a, x, ad);
}

static void transpose_store(fj_kctx *k, const fj_fp8_lanes *ln, int vt_tile, int b, fj_reg_t a, fj_reg_t o,
                            fj_reg_t x, fj_reg_t ad)
{
    int n_kg = k->p->cfg.block_n / 16;
    transpose_store_at(k, ln, vt_tile, 16 * (b % n_kg), 32 * (b / n_kg), a, o, x, ad);
}

/* FJ_FP8_KNOB_VT4: every warp its quarter of the blocks (vt4_warp_terms), straight code with no branch: block i + 1's
 * ldmatrix issued before block i's prmt / stmatrix, so two loads are in flight (a[] alternates); in warp 0 of the
 * lean form (fj_fp8_vt4_lean) block i's ldmatrix comes right before its own prmt / stmatrix, one load in flight. */
static void transpose_tile_straight(fj_kctx *k, const fj_fp8_lanes *ln, int s)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int n_a = p->cfg.block_n / 32, n = n_a * (p->cfg.head_dim / 64), ahead = !(ln->loader && fj_fp8_vt4_lean(p));
    int v_tile = p->v_off + s * p->kv_tile_bytes, vt_tile = p->vt_off + s * p->kv_tile_bytes;
    fj_reg_t a[2] = {fj_alloc(e, k->b_r, 4), fj_alloc(e, k->b_r, 4)}, o = fj_alloc(e, k->b_r, 4);
    fj_reg_t x = fj_alloc(e, k->b_r, 1), ad = fj_alloc(e, k->b_addr, 1);
    fj_comment(e, 1, "V(stage %d) -> Vt(stage %d): %d blocks of 16 keys x 32 head dims a warp, straight code, %s", s,
               s, n, ahead ? "the next block's ldmatrix before this one's prmt / stmatrix"
                     : "one ldmatrix in flight (warp 0 of the lean form)");
    for (int i = -ahead; i < n; i++) {
        int l = i + ahead;
        if (l < n) transpose_load_at(k, ln, v_tile, 32 * (l % n_a), 64 * (l / n_a), a[l & 1], x, ad);
        if (i >= 0) transpose_store_at(k, ln, vt_tile, 32 * (i % n_a), 64 * (i / n_a), a[i & 1], o, x, ad);
    }
}

/* FJ_FP8_KNOB_VT: the blocks of a warp in pairs (b, b + transpose_warps), one branch a pair: both ldmatrix, then
 * each block's prmt and stmatrix, so the second load runs under the first's permute and store (the shipped form
 * branches around every block, one load in flight). Not straight code per warp: ptxas then hoists every block's
 * address out of the tile loop and spills the loop state at 32-40 registers. */
static void transpose_tile_batched(fj_kctx *k, const fj_fp8_lanes *ln, int s)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    int tw = p->transpose_warps, n_blocks = p->cfg.block_n / 16 * (p->cfg.head_dim / 32);
    int v_tile = p->v_off + s * p->kv_tile_bytes, vt_tile = p->vt_off + s * p->kv_tile_bytes;
    fj_reg_t a[2] = {fj_alloc(e, k->b_r, 4), fj_alloc(e, k->b_r, 4)}, o = fj_alloc(e, k->b_r, 4);
    fj_reg_t x = fj_alloc(e, k->b_r, 1), ad = fj_alloc(e, k->b_addr, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_comment(e, 1, "V(stage %d) -> Vt(stage %d): %d blocks of 16 keys x 32 head dims, block b by warp b %% %d, "
                     "two blocks (b, b + %d) a branch",
               s, s, n_blocks, tw, tw);
    for (int b0 = 0; b0 < n_blocks; b0 += 2 * tw)
        for (int b = b0; b < b0 + tw && b < n_blocks; b++) {
            int two = b + tw < n_blocks;
            char skip[48];
            fj_label_new(e, "vt_skip", skip, sizeof skip);
            fj_ins(e, "setp.ne.u32 %s, %s, %d", R(pr), R(ln->tw), b % tw);
            fj_ins(e, "@%s bra.uni %s", R(pr), skip);
            transpose_load(k, ln, v_tile, b, a[0], x, ad);
            if (two) transpose_load(k, ln, v_tile, b + tw, a[1], x, ad);
            transpose_store(k, ln, vt_tile, b, a[0], o, x, ad);
            if (two) transpose_store(k, ln, vt_tile, b + tw, a[1], o, x, ad);
            fj_label(e, skip);
        }
}

void fj_fp8_emit_transpose_tile(fj_kctx *k, const fj_fp8_lanes *ln, int s)
{
    const fj_plan *p = k->p;
    fj_emit *e = k->e;
    if (p->fp8_vt4) {
        transpose_tile_straight(k, ln, s);
        return;
    }
    if (p->fp8_knobs & FJ_FP8_KNOB_VT) {
        transpose_tile_batched(k, ln, s);
        return;
    }
    int v_tile = p->v_off + s * p->kv_tile_bytes, vt_tile = p->vt_off + s * p->kv_tile_bytes;
    int n_blocks = p->cfg.block_n / 16 * (p->cfg.head_dim / 32);
    fj_reg_t a = fj_alloc(e, k->b_r, 4), o = fj_alloc(e, k->b_r, 4), x = fj_alloc(e, k->b_r, 1);
    fj_reg_t ad = fj_alloc(e, k->b_addr, 1), pr = fj_alloc(e, k->b_p, 1);
    fj_comment(e, 1, "V(stage %d) -> Vt(stage %d): %d blocks of 16 keys x 32 head dims, block b by warp b %% %d", s, s,
               n_blocks, p->transpose_warps);
    for (int b = 0; b < n_blocks; b++) {
        char skip[48];
        fj_label_new(e, "vt_skip", skip, sizeof skip);
        fj_ins(e, "setp.ne.u32 %s, %s, %d", R(pr), R(ln->tw), b % p->transpose_warps);
        fj_ins(e, "@%s bra.uni %s", R(pr), skip);
        transpose_load(k, ln, v_tile, b, a, x, ad);
        transpose_store(k, ln, vt_tile, b, a, o, x, ad);
        fj_label(e, skip);
    }
}

/* ---- descales ------------------------------------------------------------------------------------------------- */
/* dst = descale[b x stride + hkv] from the pointer at parameter offset `off`, 1.0 where the pointer is 0. */
static void load_descale(fj_kctx *k, int off, fj_reg_t idx, fj_reg_t dst)
{
    fj_emit *e = k->e;
    fj_reg_t ptr = fj_param_u64(k, off), has = fj_alloc(e, k->b_p, 1), a = fj_alloc(e, k->b_rd, 1);
    fj_ins(e, "setp.ne.u64 %s, %s, 0", R(has), R(ptr));
    fj_ins(e, "mov.f32 %s, 0f3F800000", R(dst));
    fj_ins(e, "mad.wide.u32 %s, %s, 4, %s", R(a), R(idx), R(ptr));
    fj_ins(e, "@%s ld.global.nc.f32 %s, [%s]", R(has), R(dst), R(a));
}

/* idx = b x descale_stride + hkv */
static fj_reg_t descale_index(fj_kctx *k)
{
    fj_reg_t idx = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t st = fj_param_s32(k, k->p->fp8_off + (int)offsetof(fj_fwd_params_fp8, descale_stride));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %s, %s", R(idx), R(k->b), R(st), R(k->hkv));
    return idx;
}

void fj_fp8_emit_score_scale(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t idx = descale_index(k), qd = fj_alloc(k->e, k->b_f, 1), kd = fj_alloc(k->e, k->b_f, 1);
    fj_comment(k->e, 1, "descales of (b, hkv): the softmax's scale x q_descale x k_descale (1.0 for a null pointer)");
    load_descale(k, p->fp8_off + (int)offsetof(fj_fwd_params_fp8, q_descale), idx, qd);
    load_descale(k, p->fp8_off + (int)offsetof(fj_fwd_params_fp8, k_descale), idx, kd);
    fj_reg_t sc = fj_param_f32(k, FJ_PARAM_OFF(scale_log2));
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(qd), R(qd), R(kd));
    if (p->cfg.mods & FAJIT_MOD_SOFTCAP) {
        /* softcap: tanh takes the true score, S x q_descale x k_descale x scale / c; the softmax's scale_log2 is then
         * c x log2 e (the runtime's), with no descale left in it */
        fj_reg_t cs = fj_param_f32(k, FJ_MODS_OFF(k, cap_scale));
        fj_comment(k->e, 2, "(softcap: the descales go into the tanh's argument, cap_scale x q_descale x k_descale)");
        fj_ins(k->e, "mul.f32 %s, %s, %s", R(k->cap_scale), R(cs), R(qd));
        fj_ins(k->e, "mov.f32 %s, %s", R(k->score_scale), R(sc));
        return;
    }
    fj_ins(k->e, "mul.f32 %s, %s, %s", R(k->score_scale), R(sc), R(qd));
}

void fj_fp8_emit_o_scale(fj_kctx *k)
{
    fj_reg_t idx = descale_index(k);
    fj_comment(k->e, 1, "v_descale of (b, hkv): O's factor beside 1/l");
    load_descale(k, k->p->fp8_off + (int)offsetof(fj_fwd_params_fp8, v_descale), idx, k->o_scale);
}
