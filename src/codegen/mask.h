/*
 * mask.h - masking and score modification, one arch-neutral module that both forward skeletons
 * (fwd_kernel.c: sm_80; sm90_roles.c: sm_90a) call, over the fragment descriptor of backend.h.
 *
 * It owns: the KV-tile range of a query block (first tile, last tile, which tiles need the per-element
 * mask), the per-element mask (end of K, causal, sliding window, chunk), the score modifications
 * (softcap, ALiBi) and the attention sinks' share of the softmax denominator. A plain kernel
 * (fajit_config.mods = 0) gets exactly the code it had before this module; the variants
 * (FAJIT_MOD_*) read their per-call values from the fj_fwd_params_mods block (kernel_abi.h).
 */
#ifndef FJ_MASK_H
#define FJ_MASK_H

#include "backend.h"

/* The variant bounds each row's keys from both sides with values read from the parameters (WINDOW or
 * CHUNK): the local mask and range replace the causal one. */
int fj_mods_local(const fj_plan *p);
/* The KV loop starts at k->kv_first (set by fj_emit_kv_range) rather than at tile 0: split-KV or local. */
int fj_kv_has_first(const fj_plan *p);

/* n_end = KV tiles to visit (the loop ends there), mask_from = first tile past the unmasked ones. With a
 * local variant also k->kv_first (first tile any row of the query block sees) and k->kv_mask_below (tiles
 * below it need the mask); with SPLIT, split k->split's part [kv_first, n_end) of the range, cut in splits
 * parts of ceil(tiles / splits) (a part past the end is empty: kv_first >= n_end). Reads k->seqlen_k (the
 * sequence's keys), k->seqlen_q and k->m0. */
void fj_emit_kv_range(fj_kctx *k, fj_reg_t n_end, fj_reg_t mask_from);
/* Branch to `nomask` when tile k->j needs no per-element mask (pr: a scratch predicate). */
void fj_emit_mask_skip(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from, const char *nomask);
/* Scores of tile k->j that a row does not see -> -inf (end of K, causal or local bounds). */
void fj_emit_mask(fj_kctx *k);
/* Score modifications of every tile, before the mask: softcap, ALiBi (comments only for a plain kernel). */
void fj_emit_score_hook(fj_kctx *k);
/* Softcap's factor on a raw score before its tanh: the parameter cap_scale = softmax_scale / c, or for FP8 the work
 * tile's register of it times q_descale x k_descale (fp8_ws.c: the e4m3 scores are the true ones over the descales) */
fj_reg_t fj_cap_scale(fj_kctx *k);
/* Softcap's tanh on the FMA units (soft_tanh.h), for tiles whose scores all satisfy |s| x cap_scale <= its bound (the
 * caller's vote): b[0..2] = the polynomial's coefficients folded with cap_scale (once a tile); then x = tanh(x x
 * cap_scale) for one register, or for every score of the tile. */
void fj_emit_softcap_poly_coefs(fj_kctx *k, fj_reg_t b);
void fj_emit_softcap_poly_value(fj_kctx *k, fj_reg_t b, fj_reg_t x);
void fj_emit_softcap_poly(fj_kctx *k, fj_reg_t b);
/* Once per work tile / CTA, before the KV loop: state the score hook keeps across it (ALiBi: each row's
 * -slope x score_unit in k->alibi_nslope). h: the tile's (first) query head, b: its batch (u32). */
void fj_emit_mods_start(fj_kctx *k, fj_reg_t h, fj_reg_t b);
/* ALiBi's causal form (mask.c) keeps each row's constant bias out of the KV loop: in the epilogue, before anything
 * reads row r's m (fj_emit_normalize), this adds it back. Emits nothing for other configs. */
void fj_emit_alibi_row_shift(fj_kctx *k, int r);

/* ALiBi's causal form, folded (mask.c; FJ_ALIBI_FOLD, on by default): the score hook leaves the part of the bias that
 * all of the thread's scores of the tile share out of S and in k->alibi_tile (f32); the softmax adds it to the
 * thread's row maxima before the quad reduction and, times scale_log2, to each row's exponent constant. */
#ifndef FJ_ALIBI_FOLD
#define FJ_ALIBI_FOLD 1
#endif
int fj_alibi_folded(const fj_plan *p);
/* ALiBi's lookahead (FJ_ALIBI_LOOKAHEAD = G > 0, log2 units; 0, the default: off). With causal ALiBi the KV loop's
 * ascending tiles raise each row's max by about slope x block_n x log2 e per tile, so a lazy rebase (slack 8) runs
 * on most tiles of the steeper heads (BLOOM's slopes, 16 heads: ~69% of the tiles). The rebase then sets
 * m = max(m, mx + g), g = clamp(the bias still to rise from the tile's last key to the row's diagonal, 0, G), in
 * the exp2 domain: a reference max up to G above the row's true max, which only scales P, l and O alike by 2^-g
 * (the largest P >= 2^-G; f16 kernels take G <= 8, so an f16 P keeps its range; bf16 / f32 have f32's exponent
 * range). Rebased tiles (a numpy model, i.i.d. scores, N 8k, block_n 128): G 0 69%, 8 57%, 16 50%, 32 39%,
 * 64 28%, 128 16% (the KV tiles visited from the diagonal down, as FlashAttention does: 3%; what the sm_90a path
 * does for causal ALiBi since issue 20, plan.kv_desc, which leaves the lookahead nothing to do).
 * fj_alibi_lookahead: whether the config has it; fj_emit_alibi_lookahead: g (f32) for this tile (in the rebase). */
#ifndef FJ_ALIBI_LOOKAHEAD
#define FJ_ALIBI_LOOKAHEAD 0
#endif
int fj_alibi_lookahead(const fj_plan *p);
void fj_emit_alibi_lookahead(fj_kctx *k, fj_reg_t scale, fj_reg_t g);

/* Attention sinks, in the epilogue (softmax.c: fj_emit_normalize): fj_emit_sinks_prep once, then per row r
 * after l is reduced: m' = max(m, sink x log2 e), corr = 2^(m - m'), l = l x corr + 2^(sink x log2 e - m'),
 * m = m' (O is then scaled by corr / l). With SPLIT only split 0 adds the sink. */
void fj_emit_sinks_prep(fj_kctx *k);
void fj_emit_sink_fold(fj_kctx *k, int r, fj_reg_t corr);

/* Offset of a field of fj_fwd_params_mods in the kernel's parameter block. */
#define FJ_MODS_OFF(k, field) ((k)->p->mods_off + (int)offsetof(fj_fwd_params_mods, field))

#endif
