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
/* Once per work tile / CTA, before the KV loop: state the score hook keeps across it (ALiBi: each row's
 * -slope x score_unit in k->alibi_nslope). h: the tile's (first) query head, b: its batch (u32). */
void fj_emit_mods_start(fj_kctx *k, fj_reg_t h, fj_reg_t b);
/* ALiBi's causal form (mask.c) keeps each row's constant bias out of the KV loop: in the epilogue, before anything
 * reads row r's m (fj_emit_normalize), this adds it back. Emits nothing for other configs. */
void fj_emit_alibi_row_shift(fj_kctx *k, int r);

/* Attention sinks, in the epilogue (softmax.c: fj_emit_normalize): fj_emit_sinks_prep once, then per row r
 * after l is reduced: m' = max(m, sink x log2 e), corr = 2^(m - m'), l = l x corr + 2^(sink x log2 e - m'),
 * m = m' (O is then scaled by corr / l). With SPLIT only split 0 adds the sink. */
void fj_emit_sinks_prep(fj_kctx *k);
void fj_emit_sink_fold(fj_kctx *k, int r, fj_reg_t corr);

/* Offset of a field of fj_fwd_params_mods in the kernel's parameter block. */
#define FJ_MODS_OFF(k, field) ((k)->p->mods_off + (int)offsetof(fj_fwd_params_mods, field))

#endif
