/*
 * sched.c - the dynamic longest-first work-tile schedule of the sm_90a persistent kernel for varlen batches (see
 * sched.h for the order, the counter and the hand-over). PTX ISA: atom / red .global (9.7.13), mbarrier's release
 * and acquire order the slot's st.shared / ld.shared (9.7.13.15).
 */
#include "sched.h"

#include "ptx_templates/common.h"
#include "seqlen.h"

#define R(reg) fj_r(k->e, reg)
#define TMA_OFF(field) ((int)offsetof(fj_fwd_params_tma, field))

_Static_assert((FJ_SCHED_SLOTS & (FJ_SCHED_SLOTS - 1)) == 0, "the slot of a round is round & (FJ_SCHED_SLOTS - 1)");

/* ---- host -------------------------------------------------------------------------------------------------------- */

int fj_sched_section_heads(int heads_q, int heads_kv, int seqlen_k, int head_dim, unsigned n_mblocks, unsigned ctas)
{
    if (heads_q < 1 || heads_kv < 1 || heads_q % heads_kv) return heads_q > 0 ? heads_q : 1;
    long long one = 4LL * (seqlen_k > 0 ? seqlen_k : 1) * (head_dim > 0 ? head_dim : 1); /* K and V, 2 bytes */
    long long group = heads_q / heads_kv;
    int kv = 16;
    while (kv > 1 && kv * one > FJ_SCHED_L2_BYTES) kv /= 2;
    while (kv < heads_kv && kv * group * n_mblocks < ctas) kv *= 2; /* a section at least the grid's tiles */
    if (kv > heads_kv) kv = heads_kv;
    return kv * (int)group;
}

void fj_sched_tile(unsigned t, unsigned n_mblocks, unsigned heads_q, unsigned section_heads, unsigned nblk,
                   unsigned *b, unsigned *h, unsigned *mb, unsigned *skip_end)
{
    unsigned per_b = n_mblocks * heads_q, r = t % per_b, sec_size = section_heads * n_mblocks;
    unsigned sec = r / sec_size, w = r % sec_size, h0 = sec * section_heads;
    unsigned nh = heads_q - h0 < section_heads ? heads_q - h0 : section_heads, i = w / nh;
    unsigned skip = n_mblocks - (nblk < n_mblocks ? nblk : n_mblocks);
    *b = t / per_b;
    *h = h0 + w % nh;
    *mb = n_mblocks - 1 - i;
    *skip_end = i >= skip ? t : t - w + skip * nh;
}

/* ---- device ------------------------------------------------------------------------------------------------------ */

/* The pieces of tile's index (sched.h): sequence b, position w in its section, the section's first head h0 and
 * heads nh, block step i (mb = n_mblocks - 1 - i); nmb = n_mblocks. */
typedef struct tile_parts {
    fj_reg_t nmb, b, w, h0, nh, i;
} tile_parts;

static tile_parts tile_split(fj_kctx *k, fj_reg_t tile)
{
    fj_emit *e = k->e;
    tile_parts t;
    fj_reg_t hq = fj_alloc(e, k->b_r, 1), s = fj_alloc(e, k->b_r, 1), x = fj_alloc(e, k->b_r, 1);
    t.nmb = fj_alloc(e, k->b_r, 1), t.b = fj_alloc(e, k->b_r, 1), t.w = fj_alloc(e, k->b_r, 1);
    t.h0 = fj_alloc(e, k->b_r, 1), t.nh = fj_alloc(e, k->b_r, 1), t.i = fj_alloc(e, k->b_r, 1);
    fj_comment(e, 1, "lpt order: b = tile / (n_mblocks x Hq); section of S heads, w = place in it; i = w / nh (the block "
                     "from the last), head h0 + w %% nh");
    fj_ins(e, PTX_LD_PARAM_U32, R(t.nmb), TMA_OFF(n_mblocks));
    fj_ins(e, PTX_LD_PARAM_U32, R(hq), FJ_PARAM_OFF(heads_q));
    fj_ins(e, PTX_LD_PARAM_U32, R(s), TMA_OFF(sched_heads));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(x), R(t.nmb), R(hq));
    fj_ins(e, "div.u32 %s, %s, %s", R(t.b), R(tile), R(x));
    fj_ins(e, "rem.u32 %s, %s, %s", R(t.w), R(tile), R(x)); /* r: the place in the sequence */
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(x), R(s), R(t.nmb));
    fj_ins(e, "div.u32 %s, %s, %s", R(t.h0), R(t.w), R(x)); /* the section */
    fj_ins(e, "rem.u32 %s, %s, %s", R(t.w), R(t.w), R(x));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(t.h0), R(t.h0), R(s));
    fj_ins(e, "sub.u32 %s, %s, %s", R(t.nh), R(hq), R(t.h0));
    fj_ins(e, "min.u32 %s, %s, %s", R(t.nh), R(t.nh), R(s));
    fj_ins(e, "div.u32 %s, %s, %s", R(t.i), R(t.w), R(t.nh));
    return t;
}

void fj_sched_emit_decode(fj_kctx *k, fj_reg_t tile, fj_reg_t mb, fj_reg_t hb)
{
    fj_emit *e = k->e;
    tile_parts t = tile_split(k, tile);
    fj_reg_t hq = fj_param_s32(k, FJ_PARAM_OFF(heads_q));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(mb), R(t.i), R(t.nh));
    fj_ins(e, "sub.u32 %s, %s, %s", R(hb), R(t.w), R(mb)); /* h = h0 + w - i x nh */
    fj_ins(e, "add.u32 %s, %s, %s", R(hb), R(hb), R(t.h0));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(hb), R(t.b), R(hq), R(hb));
    fj_ins(e, "sub.u32 %s, %s, %s", R(mb), R(t.nmb), R(t.i));
    fj_ins(e, "sub.u32 %s, %s, 1", R(mb), R(mb));
}

/* a = the tile counter's address (a u64 register). */
static void counter_address(fj_kctx *k, fj_reg_t a)
{
    fj_ins(k->e, PTX_LD_PARAM_U64, R(a), TMA_OFF(tile_count));
}

void fj_sched_emit_fetch(fj_kctx *k, fj_reg_t dst)
{
    fj_reg_t a = fj_alloc(k->e, k->b_rd, 1);
    counter_address(k, a);
    fj_ins(k->e, "atom.global.add.u32 %s, [%s], 1", R(dst), R(a));
}

void fj_sched_emit_resolve(fj_kctx *k, fj_reg_t tile, fj_reg_t n)
{
    fj_emit *e = k->e;
    if (!(k->p->variant & FJ_VARIANT_VARLEN)) return; /* a dense batch has no empty tiles (the caller checks < n) */
    char find[48], found[48];
    fj_reg_t pr = fj_alloc(e, k->b_p, 1), nmb = fj_alloc(e, k->b_r, 1), x = fj_alloc(e, k->b_r, 1);
    fj_reg_t b = fj_alloc(e, k->b_r, 1), start = fj_alloc(e, k->b_r, 1), len = fj_alloc(e, k->b_r, 1);
    fj_reg_t skip = fj_alloc(e, k->b_r, 1), w = fj_alloc(e, k->b_r, 1), nh = fj_alloc(e, k->b_r, 1);
    fj_reg_t a = fj_alloc(e, k->b_rd, 1);
    fj_label_new(e, "lpt_find", find, sizeof find);
    fj_label_new(e, "lpt_found", found, sizeof found);
    fj_comment(e, 1, "lpt: a tile past its sequence's end starts a run of them (its section's first n_mblocks - nblk "
                     "block steps): move the counter past the run for every CTA, take again");
    fj_label(e, find);
    (void)n; /* read again here: one register fewer across the loop on the producer's budget */
    fj_ins(e, PTX_LD_PARAM_U32, R(x), TMA_OFF(n_tiles));
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(tile), R(x));
    fj_ins(e, "@%s bra.uni %s", R(pr), found);
    fj_comment(e, 2, "(the order of sched.h, computed in the order that keeps the fewest values live: the producer "
                     "runs on few registers)");
    fj_ins(e, PTX_LD_PARAM_U32, R(nmb), TMA_OFF(n_mblocks));
    fj_ins(e, PTX_LD_PARAM_U32, R(x), FJ_PARAM_OFF(heads_q));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(x), R(x), R(nmb));
    fj_ins(e, "div.u32 %s, %s, %s", R(b), R(tile), R(x));
    fj_seqlen_q_bounds(k, b, start, len);
    fj_ins(e, "add.u32 %s, %s, %d", R(len), R(len), k->p->cfg.block_m - 1);
    fj_ins(e, "div.u32 %s, %s, %d", R(len), R(len), k->p->cfg.block_m); /* nblk <= n_mblocks (len <= seqlen_q) */
    fj_ins(e, "sub.u32 %s, %s, %s", R(skip), R(nmb), R(len));
    fj_ins(e, "rem.u32 %s, %s, %s", R(w), R(tile), R(x)); /* the place in the sequence */
    fj_ins(e, PTX_LD_PARAM_U32, R(x), TMA_OFF(sched_heads));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(nmb), R(nmb), R(x)); /* a section's tiles */
    fj_ins(e, "div.u32 %s, %s, %s", R(nh), R(w), R(nmb));
    fj_ins(e, "rem.u32 %s, %s, %s", R(w), R(w), R(nmb));
    fj_ins(e, "mul.lo.u32 %s, %s, %s", R(nh), R(nh), R(x)); /* h0 */
    fj_ins(e, PTX_LD_PARAM_U32, R(len), FJ_PARAM_OFF(heads_q));
    fj_ins(e, "sub.u32 %s, %s, %s", R(nh), R(len), R(nh));
    fj_ins(e, "min.u32 %s, %s, %s", R(nh), R(nh), R(x));
    fj_ins(e, "div.u32 %s, %s, %s", R(len), R(w), R(nh)); /* i */
    fj_ins(e, "setp.ge.u32 %s, %s, %s", R(pr), R(len), R(skip));
    fj_ins(e, "@%s bra.uni %s", R(pr), found);
    fj_comment(e, 2, "the run ends at tile - w + skip x nh");
    fj_ins(e, "sub.u32 %s, %s, %s", R(start), R(tile), R(w));
    fj_ins(e, "mad.lo.u32 %s, %s, %s, %s", R(start), R(skip), R(nh), R(start));
    counter_address(k, a);
    fj_ins(e, "red.global.max.u32 [%s], %s", R(a), R(start));
    fj_ins(e, "atom.global.add.u32 %s, [%s], 1", R(tile), R(a));
    fj_ins(e, "bra.uni %s", find);
    fj_label(e, found);
}

/* a = the shared address of slot round % FJ_SCHED_SLOTS (add plan.sched_off). */
static void slot_address(fj_kctx *k, fj_reg_t round, fj_reg_t a)
{
    fj_ins(k->e, "and.b32 %s, %s, %d", R(a), R(round), FJ_SCHED_SLOTS - 1);
    fj_ins(k->e, "mad.lo.u32 %s, %s, %d, %s", R(a), R(a), FJ_SCHED_SLOT_BYTES, R(k->smem));
}

void fj_sched_emit_publish(fj_kctx *k, fj_reg_t round, fj_reg_t tile)
{
    fj_reg_t a = fj_alloc(k->e, k->b_r, 1);
    fj_comment(k->e, 1, "lpt: the round's tile for the consumers (read after their Q full wait)");
    slot_address(k, round, a);
    fj_ins(k->e, "st.shared.u32 [%s+%d], %s", R(a), k->p->sched_off, R(tile));
}

/* dst = the slot word at [a + off], read by this thread, or (FJ_LPT_SLOT_LANE0) by lane 0 for its warp: sched.h. */
static void slot_load(fj_kctx *k, fj_reg_t dst, fj_reg_t a, int off)
{
    if (!FJ_LPT_SLOT_LANE0) {
        fj_ins(k->e, "ld.shared.u32 %s, [%s+%d]", R(dst), R(a), off);
        return;
    }
    fj_reg_t lane = fj_alloc(k->e, k->b_r, 1), pr = fj_alloc(k->e, k->b_p, 1);
    fj_ins(k->e, "mov.u32 %s, %%laneid", R(lane));
    fj_ins(k->e, "setp.eq.u32 %s, %s, 0", R(pr), R(lane));
    fj_ins(k->e, "@%s ld.shared.u32 %s, [%s+%d]", R(pr), R(dst), R(a), off);
    fj_ins(k->e, "shfl.sync.idx.b32 %s, %s, 0, 31, -1", R(dst), R(dst));
}

void fj_sched_emit_take(fj_kctx *k, fj_reg_t round, fj_reg_t tile)
{
    fj_reg_t a = fj_alloc(k->e, k->b_r, 1);
    slot_address(k, round, a);
    slot_load(k, tile, a, k->p->sched_off);
}

/* ---- coordinates in the slot (FJ_LPT_COORDS, sched.h) ------------------------------------------------------------ */

int fj_sched_coords(const fj_plan *p) { return FJ_LPT_COORDS && (p->variant & FJ_VARIANT_LPT) != 0; }

void fj_sched_emit_publish_coords(fj_kctx *k, fj_reg_t round)
{
    fj_reg_t a = fj_alloc(k->e, k->b_r, 1);
    const struct {
        int word;
        fj_reg_t reg;
    } w[] = {{FJ_SCHED_W_M0, k->m0},         {FJ_SCHED_W_H, k->h},         {FJ_SCHED_W_B, k->b},
             {FJ_SCHED_W_LEN_Q, k->seqlen_q}, {FJ_SCHED_W_LEN_K, k->seqlen_k}, {FJ_SCHED_W_SEQ_Q, k->q_tma_seq},
             {FJ_SCHED_W_HKV, k->hkv}};
    fj_comment(k->e, 1, "lpt: the tile's coordinates and bounds beside its index, so the other roles need not decode it "
                        "(slot round %% %d; its last reader has freed a later round's Q)", FJ_SCHED_SLOTS);
    slot_address(k, round, a);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        fj_ins(k->e, "st.shared.u32 [%s+%d], %s", R(a), k->p->sched_off + 4 * w[i].word, R(w[i].reg));
}

void fj_sched_emit_take_coords(fj_kctx *k, fj_reg_t round, int heads, int rows)
{
    fj_reg_t a = fj_alloc(k->e, k->b_r, 1);
    const struct {
        int word, want;
        fj_reg_t reg;
    } w[] = {{FJ_SCHED_W_M0, 1, k->m0},           {FJ_SCHED_W_H, heads, k->h},         {FJ_SCHED_W_B, heads, k->b},
             {FJ_SCHED_W_LEN_Q, rows, k->seqlen_q}, {FJ_SCHED_W_LEN_K, rows, k->seqlen_k},
             {FJ_SCHED_W_SEQ_Q, heads, k->q_tma_seq}, {FJ_SCHED_W_HKV, heads, k->hkv}};
    fj_comment(k->e, 1, "lpt: the tile's coordinates%s from its slot (the producer decoded it)",
               rows ? " and its sequence's lengths" : "");
    slot_address(k, round, a);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (w[i].want) slot_load(k, w[i].reg, a, k->p->sched_off + 4 * w[i].word);
}
