/*
 * kv8_frag.c - FP8 K/V cache decode on the sm_80 path with the MMA fragments built straight from the e4m3 tiles in
 * shared memory (decode variant KV8_DIRECT, plan.kv8_direct): no 16-bit K / V tile, no STS of widened values, no
 * second barrier. PTX ISA 7.0 (ldmatrix 9.7.13.4.15, mma.sync m16n8k16 9.7.13.4.8, prmt 9.7.8.7), cvt.rn.f16x2.e4m3x2
 * (8.1, .target sm_89+) where the plan's target has it (kv8.c), else kv8.c's integer widening.
 *
 * The ring (kv8.c's, at plan.kv8_off: [stage][K, V][block_n rows][head_dim bytes]) holds each tile row-major, the
 * 16-byte chunk c of row r at chunk c ^ swz(r) (swz = r & 7; d64's 64-byte rows: (r >> 1) & 3), copied by cp.async
 * 16 bytes a thread (kv8_tpr threads a row, kv8_rows_per_pass rows a pass).
 *
 * K (S = QK^T, B operand [k = head dim][n = key]): ldmatrix.x4 of the e4m3 rows as b16 (byte pairs). A matrix of 8
 * keys x one 16-byte chunk (16 dims) gives lane 4g + t the word K[key g][16c + 4t .. 4t + 3]; its bytes 0, 1 widen to
 * the B register of k = 2t, 2t + 1, bytes 2, 3 to that of k = 2t + 8, 2t + 9. So one matrix is one whole B fragment
 * of one k-step, with the k index carrying dim 16c + perm(k): perm(2t + e) = 4t + e, perm(2t + 8 + e) = 4t + 2 + e.
 * Q's A fragments take the same permutation (fj_kv8d_q_dim): a lane reads Q[g][16ks + 4t .. 4t + 3] (8 bytes of the
 * 16-bit Q tile) as its registers a0a1 and a4a5 with one ld.shared.v2 - once per CTA when Q stays in registers.
 * S's columns (keys) keep their order, so mask, softmax and P are the 16-bit kernel's.
 *
 * V (O += PV, B operand [k = key][n = head dim]): ldmatrix.x4.trans of the e4m3 rows as b16. A matrix of 8 keys x
 * one chunk gives lane 4g + t the word {V[2t][2g], V[2t][2g + 1], V[2t + 1][2g], V[2t + 1][2g + 1]} (bytes 0-3):
 * the two keys of one B register for two head dims. prmt takes bytes 0, 2 (even dim 16c + 2g) or 1, 3 (odd dim
 * 16c + 2g + 1); the matrices of keys 0-7 and 8-15 give the two registers. Each 16-dim chunk is two MMAs: the even
 * one into O's n8 tile 2c, the odd one into 2c + 1, whose column 2t + e is dim 16c + 4t + 2e (+ 1 for the odd tile).
 * So a lane holds dims 16c + 4t .. 4t + 3 of its rows: the fragment descriptor's o_col_off (frag_m16n8.c) names
 * them so, col_base_o is 4t, and the stores write them in place.
 *
 * Shared-memory bytes a key moves (d128, CTA of W warps, R row warps): the copy's 2 x 128 (cp.async writes) + the
 * ldmatrix reads of K and V, 2 x 128 per row warp = 256 (1 + R) B, against the 16-bit round trip's 256 (e4m3 reads
 * back) + 512 (STS) + 512 R (LDSM) more.
 */
#include "kv8_frag.h"

#include <stddef.h>

#include "kv8.h"
#include "ptx_templates/sm80.h"
#include "base/error.h"

#define R(reg) fj_r(k->e, reg)

/* bk[] slots (sm80.c uses 0..17, kv8.c 18..23 without this variant) */
enum {
    BKD_COPY = 18,    /* u32 x patterns x chunks: the copy's shared addresses (stage 0, K, pass p < patterns) */
    BKD_K = 21,       /* lane base of K's ldmatrix (its rows; warp pairs: its half of the keys) */
    BKD_V_OWN = 22,   /* lane base of V's ldmatrix.trans, this warp's keys (and head dims) */
    BKD_V_PEER = 23,  /* warp pairs: the partner's keys, this warp's head dims */
    BKD_Q = 24        /* lane base of Q's ld.shared.v2 (16-bit tile, permuted dims) */
};

#define FJ_KV8D_REGS 4
#define FJ_KV8D_REGS_Q_SMEM 8

/* ---- layout facts ----------------------------------------------------------------------------------------- */
int fj_kv8d_swz_mask(int head_dim) { return head_dim == 64 ? 3 : 7; }

int fj_kv8d_swz(int head_dim, int row) { return head_dim == 64 ? (row >> 1) & 3 : row & 7; }

int fj_kv8d_chunk(int head_dim, int row, int chunk) { return chunk ^ fj_kv8d_swz(head_dim, row); }

void fj_kv8d_k_lane(int lane, int *row, int *chunk_bit)
{
    *row = (lane & 7) + 8 * (lane >> 4);
    *chunk_bit = (lane >> 3) & 1;
}

void fj_kv8d_v_lane(int lane, int *row, int *chunk_bit)
{
    *row = lane & 15;
    *chunk_bit = lane >> 4;
}

int fj_kv8d_q_dim(int t, int reg, int half) { return 4 * t + (reg >= 2 ? 2 : 0) + half; }

/* Rows of the copy's swizzle period (8) a thread's passes go through: 1 pattern when a pass is 8 rows or more. */
static int copy_patterns(const fj_plan *p) { return p->kv8_rows_per_pass >= 8 ? 1 : 8 / p->kv8_rows_per_pass; }

int fj_kv8_direct_dim(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

fajit_status fj_kv8_direct_plan(fj_plan *p)
{
    int d = p->cfg.head_dim;
    if (!fj_kv8_direct_dim(d))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "decode variant kv8direct with head_dim %d: the fragments straight from the "
                                              "e4m3 tiles are built for head_dim 64, 128 and 256 (XOR-swizzled rows of "
                                              "a power of two bytes); use the widening kernel (no kv8direct)",
                       d);
    if (p->kv8_rows_per_pass <= 0 || (p->kv8_rows_per_pass < 8 && 8 % p->kv8_rows_per_pass))
        return fj_fail(FAJIT_ERR_INVALID_CONFIG, "decode variant kv8direct: %d e4m3 rows a copy pass do not tile the "
                                                 "swizzle's 8-row period", p->kv8_rows_per_pass);
    /* registers past the widening kernel's: an ldmatrix.x4's 4 words become 8 B registers (it held 4), and Q re-read
     * from smem takes two k-steps' A fragments a load. ptxas 13.0 sm_90a: d256 br64 w4 cw2 bf16 (Q in smem, model
     * 254 + 0 headroom) spilled 4 bytes without them; the tiles of test_decode_ptx test_kv8_direct do not with them. */
    int extra = FJ_KV8D_REGS + (p->q_in_regs ? 0 : FJ_KV8D_REGS_Q_SMEM * p->m_frags);
    if (p->reg_total + extra + p->reg_headroom > p->reg_limit)
        return fj_fail(FAJIT_ERR_INVALID_CONFIG, "registers: about %d per thread + %d for kv8direct's fragments (%s) + "
                                                 "headroom %d exceed %d; lower block_n or block_m, or use more warps",
                       p->reg_total, extra, p->q_in_regs ? "8 B registers a load" : "B registers, Q's two k-steps",
                       p->reg_headroom, p->reg_limit);
    p->reg_misc += extra;
    p->reg_total += extra;
    p->kv8_direct = 1;
    p->backend->smem_map(p); /* again: no 16-bit K / V tile (sm80.c) */
    return FAJIT_OK;
}

/* A second S chain where it costs few registers (n_frags_s <= 4: up to 16) and the budget, with everything else the
 * plan holds (the decode variant's registers included: plan.c calls this last), has them. */
void fj_kv8_direct_chains(fj_plan *p)
{
    int chain = fj_plan_acc_s_count(p);
    p->qk_chains = 1;
#ifndef FJ_KV8_QK_ONE_CHAIN /* build knob for the A/B (bench/ab_builds.sh): one chain, as before session 19 */
    if (p->kv8_direct && p->m_frags == 1 && p->n_frags_s <= 4 && p->k_steps_qk >= 4 &&
        p->reg_total + chain + p->reg_headroom <= p->reg_limit) {
        p->qk_chains = 2;
        p->reg_misc += chain;
        p->reg_total += chain;
    }
#else
    (void)chain;
#endif
}

/* ---- setup ------------------------------------------------------------------------------------------------ */
/* out = smem + kv8_off + row x head_dim + (((cb + hc) ^ swz(row)) << 4) for row / cb registers, hc a constant. */
static void lane_base(fj_kctx *k, fj_reg_t out, fj_reg_t row, fj_reg_t cb, int hc)
{
    int d = k->p->cfg.head_dim;
    fj_reg_t x = fj_alloc(k->e, k->b_r, 1), rb = fj_alloc(k->e, k->b_r, 1);
    if (d == 64) {
        fj_ins(k->e, "bfe.u32 %s, %s, 1, 2", R(x), R(row));
    } else {
        fj_ins(k->e, "and.b32 %s, %s, 7", R(x), R(row));
    }
    if (hc) {
        fj_reg_t c = fj_alloc(k->e, k->b_r, 1);
        fj_ins(k->e, "add.u32 %s, %s, %d", R(c), R(cb), hc);
        fj_ins(k->e, "xor.b32 %s, %s, %s", R(x), R(x), R(c));
    } else {
        fj_ins(k->e, "xor.b32 %s, %s, %s", R(x), R(x), R(cb));
    }
    fj_ins(k->e, "shl.b32 %s, %s, 4", R(x), R(x));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(rb), R(row), d, R(k->smem));
    fj_ins(k->e, "add.u32 %s, %s, %s", R(rb), R(rb), R(x));
    fj_ins(k->e, "add.u32 %s, %s, %d", R(out), R(rb), k->p->kv8_off);
}

static void setup_copy_dst(fj_kctx *k, fj_reg_t r0, fj_reg_t c0)
{
    const fj_plan *p = k->p;
    int kc = p->copy_chunks_per_thread_row, np = copy_patterns(p);
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), cb = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "FP8 K/V fragments from e4m3: the copies land row-major, chunk c of row r at c ^ swz(r); %d "
                        "address pattern(s) of the 8-row swizzle period x %d chunk(s)", np, kc);
    k->bk[BKD_COPY] = fj_alloc(k->e, k->b_addr, np * kc);
    for (int pat = 0; pat < np; pat++)
        for (int j = 0; j < kc; j++) {
            fj_ins(k->e, "add.u32 %s, %s, %d", R(row), R(r0), pat * p->kv8_rows_per_pass);
            fj_ins(k->e, "add.u32 %s, %s, %d", R(cb), R(c0), j * p->kv8_tpr);
            lane_base(k, fj_at(k->bk[BKD_COPY], pat * kc + j), row, cb, 0);
        }
}

static void setup_lanes(fj_kctx *k)
{
    const fj_plan *p = k->p;
    int d = p->cfg.head_dim, bn = p->cfg.block_n, pairs = p->col_warps > 1;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), cb = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_r, 1);
    fj_reg_t h = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "lane bases: K ldmatrix rows (lane & 7) + 8 (lane >> 4), chunk bit (lane >> 3) & 1; V "
                        "ldmatrix.trans rows lane & 15, chunk bit lane >> 4%s",
               pairs ? "; warp 2i+h: K / V keys h x block_n / 2, V dims h x head_dim / 2" : "");
    if (pairs) fj_ins(k->e, "and.b32 %s, %s, 1", R(h), R(k->warp));
    /* K */
    fj_ins(k->e, "and.b32 %s, %s, 7", R(row), R(k->lane));
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(t), R(k->lane));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 8, %s", R(row), R(t), R(row));
    if (pairs) fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(row), R(h), bn / 2, R(row));
    fj_ins(k->e, "bfe.u32 %s, %s, 3, 1", R(cb), R(k->lane));
    k->bk[BKD_K] = fj_alloc(k->e, k->b_addr, 1);
    lane_base(k, k->bk[BKD_K], row, cb, 0);
    /* V: the warp's dims are a chunk offset hc = h x d / 32 (below the chunk pair's bits, so it is XORed like them) */
    fj_ins(k->e, "shr.u32 %s, %s, 4", R(cb), R(k->lane));
    if (pairs) {
        fj_reg_t hc = fj_alloc(k->e, k->b_r, 1), nh = fj_alloc(k->e, k->b_r, 1);
        fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(hc), R(h), d / 32, R(cb));
        fj_ins(k->e, "xor.b32 %s, %s, 1", R(nh), R(h));
        for (int own = 1; own >= 0; own--) {
            fj_ins(k->e, "and.b32 %s, %s, 15", R(row), R(k->lane));
            fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(row), R(own ? h : nh), bn / 2, R(row));
            fj_reg_t *dst = &k->bk[own ? BKD_V_OWN : BKD_V_PEER];
            *dst = fj_alloc(k->e, k->b_addr, 1);
            lane_base(k, *dst, row, hc, 0);
        }
    } else {
        fj_ins(k->e, "and.b32 %s, %s, 15", R(row), R(k->lane));
        k->bk[BKD_V_OWN] = fj_alloc(k->e, k->b_addr, 1);
        lane_base(k, k->bk[BKD_V_OWN], row, cb, 0);
    }
}

/* Q's lane base: row (the warp's first) + g of the 16-bit tile, 16-bit chunk bit t >> 1, byte (t & 1) x 8 - the
 * 8 bytes of dims 4t .. 4t + 3 of a k-step's 16 (chunk 2 ks + (t >> 1), half t & 1). */
static void setup_q(fj_kctx *k)
{
    const fj_plan *p = k->p;
    fj_reg_t row = fj_alloc(k->e, k->b_r, 1), x = fj_alloc(k->e, k->b_r, 1), t = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "Q's permuted A fragments: lane 4g + t reads dims 16 ks + 4t .. 4t + 3 of rows g, g + 8 "
                        "(ld.shared.v2: a0a1, a4a5)");
    if (p->col_warps > 1) fj_ins(k->e, "shr.u32 %s, %s, 1", R(row), R(k->warp));
    else fj_ins(k->e, "mov.u32 %s, %s", R(row), R(k->warp));
    fj_ins(k->e, "shr.u32 %s, %s, 2", R(t), R(k->lane));
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(row), R(row), 16 * p->m_frags, R(t));
    fj_ins(k->e, "and.b32 %s, %s, %d", R(x), R(row), p->swz_mask);
    fj_ins(k->e, "bfe.u32 %s, %s, 1, 1", R(t), R(k->lane));
    fj_ins(k->e, "xor.b32 %s, %s, %s", R(x), R(x), R(t));
    fj_ins(k->e, "shl.b32 %s, %s, 4", R(x), R(x));
    fj_ins(k->e, "and.b32 %s, %s, 1", R(t), R(k->lane));
    fj_ins(k->e, "mad.lo.u32 %s, %s, 8, %s", R(x), R(t), R(x));
    k->bk[BKD_Q] = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(k->bk[BKD_Q]), R(row), p->row_bytes, R(k->smem));
    fj_ins(k->e, "add.u32 %s, %s, %s", R(k->bk[BKD_Q]), R(k->bk[BKD_Q]), R(x));
}

void fj_kv8d_setup(fj_kctx *k, fj_reg_t r0, fj_reg_t c0)
{
    setup_copy_dst(k, r0, c0);
    setup_lanes(k);
    setup_q(k);
}

/* ---- copies ----------------------------------------------------------------------------------------------- */
fj_reg_t fj_kv8d_copy_dst(fj_kctx *k, int slot, int which, int i, int j, int *imm)
{
    const fj_plan *p = k->p;
    int np = copy_patterns(p), pat = i % np, d = p->cfg.head_dim;
    *imm = (2 * slot + which - 1) * p->cfg.block_n * d + (i - pat) * p->kv8_rows_per_pass * d;
    return fj_at(k->bk[BKD_COPY], pat * p->copy_chunks_per_thread_row + j);
}

/* ---- MMA -------------------------------------------------------------------------------------------------- */
/* A lane base XORed with the constant part of chunk index c (c & mask), or the base itself. */
static fj_reg_t xor_addr(fj_kctx *k, fj_reg_t base, int lo)
{
    if (!lo) return base;
    fj_reg_t t = fj_alloc(k->e, k->b_addr, 1);
    fj_ins(k->e, "xor.b32 %s, %s, %d", R(t), R(base), lo << 4);
    return t;
}

void fj_kv8d_q_frag(fj_kctx *k, fj_reg_t dst, int mf, int ks)
{
    const fj_plan *p = k->p;
    int c = 2 * ks, lo = p->swz_mask >= 1 ? c & p->swz_mask : 0;
    fj_reg_t a = xor_addr(k, k->bk[BKD_Q], lo);
    int off = p->q_off + mf * 16 * p->row_bytes + (c - lo) * 16;
    for (int h = 0; h < 2; h++) /* rows g, g + 8: {a0a1, a4a5} = regs {h, h + 2} */
        fj_ins(k->e, "ld.shared.v2.b32 {%s, %s}, [%s+%d]", R(fj_at(dst, h)), R(fj_at(dst, h + 2)), R(a),
               off + h * 8 * p->row_bytes);
}

static void mma(fj_kctx *k, fj_reg_t d, fj_reg_t a, fj_reg_t b0, fj_reg_t b1, int c_zero)
{
    const char *dt = fj_mma_dtype_ptx(k->p), *c[4];
    for (int i = 0; i < 4; i++) c[i] = c_zero ? R(k->f_zero) : R(fj_at(d, i));
    fj_ins(k->e, PTX_MMA_16816, dt, dt, R(d), R(fj_at(d, 1)), R(fj_at(d, 2)), R(fj_at(d, 3)), R(a), R(fj_at(a, 1)),
           R(fj_at(a, 2)), R(fj_at(a, 3)), R(b0), R(b1), c[0], c[1], c[2], c[3]);
}

void fj_kv8d_mma_qk(fj_kctx *k, int slot)
{
    const fj_plan *p = k->p;
    int d = p->cfg.head_dim, m8 = fj_kv8d_swz_mask(d), cvt = fj_kv8_widen_cvt(p, 1);
    int tile = 2 * slot * p->cfg.block_n * d; /* past the lane base, which holds kv8_off */
    fj_reg_t raw = fj_alloc(k->e, k->b_frag_b, 4), bf = fj_alloc(k->e, k->b_frag_b, 8);
    fj_reg_t qf = p->q_in_regs ? k->frag_q : fj_alloc(k->e, k->b_frag_q, 8 * p->m_frags);
    fj_reg_t unit = fj_kv8_unit_regs(k);
    int chains = p->qk_chains == 2, n_acc = fj_plan_acc_s_count(p);
    fj_reg_t odd = chains ? fj_alloc(k->e, k->b_f, n_acc) : k->acc_s; /* the odd k-steps' chain */
    fj_comment(k->e, 1, "S = Q K^T from the e4m3 K tile: ldmatrix.x4 (b16 = byte pairs) + %s, two k-steps a load%s",
               cvt ? "cvt" : "integer widening",
               chains ? "; even k-steps into S, odd ones into a second set added at the end (two MMA chains of half "
                        "the depth)" : "");
    for (int kp = 0; kp < p->k_steps_qk / 2; kp++) {
        int c = 2 * kp, lo = c & m8;
        if (!p->q_in_regs)
            for (int mf = 0; mf < p->m_frags; mf++)
                for (int s = 0; s < 2; s++) fj_kv8d_q_frag(k, fj_at(qf, mf * 8 + 4 * s), mf, c + s);
        fj_reg_t a = xor_addr(k, k->bk[BKD_K], lo);
        for (int np = 0; np < p->n_frags_s / 2; np++) {
            fj_ins(k->e, PTX_LDMATRIX_X4, R(raw), R(fj_at(raw, 1)), R(fj_at(raw, 2)), R(fj_at(raw, 3)), R(a),
                   tile + np * 16 * d + (c - lo) * 16);
            for (int m = 0; m < 4; m++) { /* matrix m: n8 tile 2np + m / 2, k-step c + m % 2 */
                fj_reg_t b = fj_at(bf, 2 * m);
                if (cvt) fj_kv8_cvt_word(k, b, fj_at(b, 1), fj_at(raw, m));
                else {
                    fj_kv8_widen_pair(k, b, fj_at(raw, m), FJ_KV8D_SEL_K_LO_INT, unit);
                    fj_kv8_widen_pair(k, fj_at(b, 1), fj_at(raw, m), FJ_KV8D_SEL_K_HI_INT, unit);
                }
            }
            for (int mf = 0; mf < p->m_frags; mf++)
                for (int h = 0; h < 2; h++)
                    for (int s = 0; s < 2; s++) {
                        int ks = c + s;
                        fj_reg_t q = p->q_in_regs ? fj_at(qf, (mf * p->k_steps_qk + ks) * 4) : fj_at(qf, mf * 8 + 4 * s);
                        fj_reg_t b = fj_at(bf, 2 * (2 * h + s));
                        fj_reg_t acc = chains && s ? odd : k->acc_s;
                        mma(k, fj_at(acc, (mf * p->n_frags_s + 2 * np + h) * 4), q, b, fj_at(b, 1), ks < 1 + chains);
                    }
        }
    }
    for (int i = 0; chains && i < n_acc; i++)
        fj_ins(k->e, "add.f32 %s, %s, %s", R(fj_at(k->acc_s, i)), R(fj_at(k->acc_s, i)), R(fj_at(odd, i)));
}

/* One B fragment of V (2 registers into b) for the even (odd = 0) or odd head dims of a chunk, from the
 * ldmatrix.trans words of keys 0-7 (lo) and 8-15 (hi). */
static void v_frag(fj_kctx *k, fj_reg_t b, fj_reg_t lo, fj_reg_t hi, int odd, int cvt, fj_reg_t unit)
{
    if (cvt) {
        fj_reg_t w = fj_alloc(k->e, k->b_r, 1);
        fj_ins(k->e, "prmt.b32 %s, %s, %s, 0x%04X", R(w), R(lo), R(hi), odd ? FJ_KV8D_SEL_V_ODD_CVT : FJ_KV8D_SEL_V_EVEN_CVT);
        fj_kv8_cvt_word(k, b, fj_at(b, 1), w);
        return;
    }
    int sel = odd ? FJ_KV8D_SEL_V_ODD_INT : FJ_KV8D_SEL_V_EVEN_INT;
    fj_kv8_widen_pair(k, b, lo, sel, unit);
    fj_kv8_widen_pair(k, fj_at(b, 1), hi, sel, unit);
}

void fj_kv8d_mma_pv(fj_kctx *k, int slot, int keys)
{
    const fj_plan *p = k->p;
    int d = p->cfg.head_dim, m8 = fj_kv8d_swz_mask(d), cvt = fj_kv8_widen_cvt(p, 2);
    int own = p->k_steps_pv / p->col_warps;
    int ks0 = keys == FJ_KEYS_PEER ? own : 0, ks1 = keys == FJ_KEYS_OWN ? own : p->k_steps_pv;
    int tile = (2 * slot + 1) * p->cfg.block_n * d;
    fj_reg_t raw = fj_alloc(k->e, k->b_frag_b, 4), bf = fj_alloc(k->e, k->b_frag_b, 4);
    fj_reg_t unit = fj_kv8_unit_regs(k);
    fj_comment(k->e, 1, "O += P V from the e4m3 V tile: ldmatrix.x4.trans + prmt (even / odd dims) + %s",
               cvt ? "cvt" : "integer widening");
    for (int ks = ks0; ks < ks1; ks++) {
        fj_reg_t vbase = k->bk[ks < own ? BKD_V_OWN : BKD_V_PEER];
        for (int cp = 0; cp < p->n_frags_o / 4; cp++) {
            int c = 2 * cp, lo = c & m8;
            fj_ins(k->e, PTX_LDMATRIX_X4_TRANS, R(raw), R(fj_at(raw, 1)), R(fj_at(raw, 2)), R(fj_at(raw, 3)),
                   R(xor_addr(k, vbase, lo)), tile + (ks % own) * 16 * d + (c - lo) * 16);
            for (int s = 0; s < 2; s++)
                for (int odd = 0; odd < 2; odd++) {
                    v_frag(k, bf, fj_at(raw, 2 * s), fj_at(raw, 2 * s + 1), odd, cvt, unit);
                    for (int mf = 0; mf < p->m_frags; mf++)
                        mma(k, fj_at(k->acc_o, (mf * p->n_frags_o + 2 * (c + s) + odd) * 4),
                            fj_at(k->frag_p, (mf * p->k_steps_pv + ks) * 4), bf, fj_at(bf, 1), 0);
                }
        }
    }
}
