/*
 * decode.h - the decode / long-context part of fajit_attention_forward: the grown fields of
 * fajit_attention_args (struct_size, seqlens_k, num_splits, workspace), the split-KV heuristic, the
 * workspace, and the launch of the decode variants (per-sequence KV lengths, split-KV + combine).
 *
 * fajit_attention_forward validates through fj_decode_validate (no driver call), then, when
 * fj_decode_wanted says the call may use a decode feature, hands its kernel to fj_decode_run, which
 * either launches the decode variant or says the plain path should run (*handled = 0).
 */
#ifndef FJ_DECODE_H
#define FJ_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "fajit.h"

/* seqlen_q up to which the heuristic (num_splits = 0) considers splitting: decode and short chunks of
 * queries against a long cache; prefill shapes keep their unsplit kernels. */
#define FJ_SPLIT_AUTO_MAX_SEQLEN_Q 128
/* Splits the heuristic takes at most (a caller may force up to FAJIT_MAX_SPLITS; it also takes at most one
 * split per SM for a row block). About two CTAs per SM is its aim; a B = 1, one-KV-head call has one or two
 * row blocks: there one full wave (132 splits on 132 SMs) measured best on the H200 (B1 Hq8 Hkv1 Nk512k:
 * 132 > 128 > 264 splits at Nq 1 and 4; 132 = 128 > 66 at Nq 16). */
#define FJ_SPLIT_AUTO_MAX_SPLITS 512

/* The grown fields as this library reads them (struct_size applied: zeros where the caller's struct
 * does not have them). */
typedef struct fj_decode_args {
    uint64_t seqlens_k;
    int num_splits;
    uint64_t workspace;
    size_t workspace_bytes;
    uint64_t block_table; /* paged K/V (0 when struct_size does not cover it) */
    int max_pages, page_size;
    uint64_t cu_seqlens_q, cu_seqlens_k; /* varlen (0 when struct_size does not cover them) */
} fj_decode_args;
/* 1 when the call packs its batch (cu_seqlens_q set and covered by struct_size). */
int fj_decode_varlen(const fajit_attention_args *args);
/* How much of *args the caller's build knows: struct_size, or FAJIT_ATTENTION_ARGS_SIZE_1 for 0 (a zeroed struct). */
size_t fj_args_size(const fajit_attention_args *args);
void fj_decode_read(const fajit_attention_args *args, fj_decode_args *d);

/* struct_size, reserved0, the seqlens_k pointer, num_splits' range and the grid limit, the workspace
 * pointer and size given together, the paged-K/V fields, the varlen fields (alignment; cu_seqlens_k only with
 * cu_seqlens_q and without a block table; no split-KV: FAJIT_ERR_UNSUPPORTED). FAJIT_ERR_INVALID_ARGUMENT naming
 * the field, the value and the rule. */
fajit_status fj_decode_validate(const fajit_attention_args *args);

/* 1 when the call packs GQA query heads: the context does (the default; $FAJIT_PACK_GQA=0 turns it off),
 * heads_q > heads_kv and seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q. ctx may be NULL (no). */
int fj_decode_packs(const fajit_context *ctx, const fajit_attention_args *args);

/* 1 when the call may use a decode feature: seqlens_k, num_splits >= 2, the heuristic may split, it packs
 * GQA heads, or K/V are paged; or an FP8 K/V call under $FAJIT_KV8_WIDEN / $FAJIT_KV8_DIRECT=1 (decode variant bits,
 * so such a call always runs the decode variant), or an FP8 K/V decode call that takes kv8direct by default. */
int fj_decode_wanted(const fajit_context *ctx, const fajit_attention_args *args);

/* The splits a call runs with, for a kernel of block_m x block_n tiles on sm_count SMs (packed: GQA packing,
 * row blocks of group x seqlen_q rows per KV head): num_splits when the caller forced it, else the
 * heuristic (1 unless seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q and the grid of row blocks x heads x batch
 * fills less than 80% of the SMs; then about two CTAs per SM, with the best wave efficiency, at least 2 KV
 * tiles per split). Untuned: no GPU measured it yet. */
int fj_decode_splits(const fajit_attention_args *args, int packed, int block_m, int block_n, int sm_count);

/* 1 when a call (packed: GQA packing) runs faster on the sm_90a kernel's decode variants than on the sm_80
 * kernel's, by the default rule (ctx->decode_sm90 = -1): its rows per KV head (group x seqlen_q packed, else
 * seqlen_q) exceed the sm_80 heuristic tile's block_m (the sm_80 kernel would read K/V once per row block and
 * run its mma.sync at 128+ rows), or the sm_80 decode grid (row blocks x heads x batch x its heuristic splits,
 * also when the call forces num_splits, so that a shape's path does not change with the count fagen tune
 * times) has at most one CTA per SM. H200, BF16 D128, issue 11's rows: the 512k MQA rows (132 CTAs) ran 5% (Nq 1, 4)
 * and 35-40% (Nq 16) faster on sm_90a; the rows with 256-512 sm_80 CTAs ran 3-9% faster on sm_80. Paged K/V
 * with pages under FJ_WS_PAGE_MIN_AUTO rows stay on sm_80, whose tiles gather 16-row page segments: the sm_90a
 * producer issues one TMA box per page (11 per 176-row tile at 16-row pages) and read B1 Hq8 Hkv1 512k at
 * 2427 GB/s against sm_80's 2850 with 16-row pages, 3416 against 3248 with 64-row pages. */
#define FJ_WS_PAGE_MIN_AUTO 64
int fj_decode_auto_sm90(const fajit_attention_args *args, int packed, int sm_count);

/* CTAs of one split of the call's grid: row blocks (of group x seqlen_q rows when packed) x heads x batch. */
long long fj_decode_ctas(const fajit_attention_args *args, int packed, int block_m);

/* 1 when a call may run with `splits`: 1..FAJIT_MAX_SPLITS, batch x splits within the grid's z dimension,
 * the partial rows within 2^31 - 1 (fj_decode_validate's rules for a forced count). */
int fj_decode_split_fits(const fajit_attention_args *args, int splits);

/* The splits a call runs with on ctx: num_splits when forced; else, when seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q,
 * the call looks at splitting at all (a decode feature, or B x Hq below 80% of the SMs: fj_decode_run) and
 * ctx's tuned table holds a decode winner for the call's class timed on this tile (tune.h:
 * fj_tune_decode_find) that fits the call, that winner; else fj_decode_splits on ctx's SM count x ctas_per_sm (the
 * kernel's CTAs an SM, plan.min_ctas; 1 for most). *from_tune (may be
 * NULL) says which: 1 the tuned winner. fajit_last_forward() then reads "(N splits, tuned)". */
int fj_decode_splits_for(fajit_context *ctx, const fajit_attention_args *args, int packed, int block_m,
                         int block_n, int ctas_per_sm, int *from_tune);

/* What a call with num_splits = 0 runs without a tuned winner (fagen tune's baseline): the heuristic's splits,
 * the decode tile and whether it packs GQA heads. Needs a device; compiles the kernels the choice needs. */
fajit_status fj_decode_heuristic(fajit_context *ctx, const fajit_attention_args *args, int *splits,
                                 int *block_m, int *block_n, int *packed);

/* Workspace bytes for `splits` (0 when splits <= 1): fp32 partial O [B][S][Hq][Nq][D], then at the next
 * 256 bytes the partial LSE [B][S][Hq][Nq]. *lse_offset (may be NULL) receives the LSE part's offset. */
size_t fj_decode_workspace_bytes(const fajit_attention_args *args, int splits, size_t *lse_offset);

/* The caller's workspace against the bytes `splits` needs (no workspace given: OK, the context's). */
fajit_status fj_decode_check_workspace(const fajit_attention_args *args, int splits);

/* Run the decode variant of a call whose plain kernel is k (sm_90a kernels fall back to the sm_80 path's
 * variant). *handled = 0 (and nothing launched) when the call turns out not to need one: no seqlens_k
 * and the heuristic chose 1 split. */
/* The tile decode variant `variant` (no paging) runs on for a call whose sm_80 kernel's config is *cfg: *cfg
 * itself when its plan takes the variant, else the tile fj_decode_run would pick (prebuilt_set.c). */
fajit_status fj_decode_variant_config(const fajit_attention_args *args, unsigned variant, fajit_config *cfg);

/* Run the decode variant of a call whose plain kernel is k (given: the caller passed its config; the tile is k's
 * either way); see the comment above fj_decode_variant_config. An FP8 K/V decode call (seqlen_q <= 128, head_dim
 * 64 / 128 / 256, $FAJIT_KV8_DIRECT unset) runs the variant with kv8direct wherever k's tile plans with it. */
/* The dynamic longest-first schedule (sched.h; the varlen LPT variant, a plain causal plan with plan.lpt): p's section
 * heads and its tile counter - the caller's workspace when it has room, else the context's - zeroed in the call's
 * stream before the launch (a memset node in a captured graph; no host sync). Launches of such kernels on several
 * streams at once must each pass a workspace of their own: the context's one counter would serve them all. */
struct fj_fwd_params_tma;
fajit_status fj_lpt_counter(fajit_context *ctx, const fajit_attention_args *a, struct fj_fwd_params_tma *p);

struct fajit_kernel;
fajit_status fj_decode_run(fajit_context *ctx, struct fajit_kernel *k, const fajit_attention_args *args,
                           int given, int *handled);

#endif
