/*
 * sched.h - the dynamic longest-first work-tile schedule of the sm_90a persistent kernel for varlen batches
 * (decode variant FJ_VARIANT_LPT, with VARLEN; and plain causal kernels under FAJIT_CAUSAL_SCHED=lpt, plan.lpt,
 * sm90.c): which work tile a CTA runs next, in which order, and how the producer hands it to the consumers. The frame (ws_frame.c) calls it from its tile schedule, beside the static
 * round-robin; the role bodies ask the frame (fj_ws_sched_static, fj_ws_wait_q, ...) and call nothing here.
 *
 * Order. The work tiles are virtual: n_mblocks (the longest sequence's query blocks) x heads_q per sequence, so a
 * tile's coordinates follow from its index without reading any length:
 *   sequence b = t / (n_mblocks x heads_q), r = the rest
 *   L2 section s = r / (S x n_mblocks) of S = sched_heads query heads (the last may hold fewer, nh), w = the rest
 *   i = w / nh, head h = s x S + w % nh, query block mb = n_mblocks - 1 - i
 * so each section runs its query blocks from the last (the longest causal rows) down, its nh heads side by side
 * (a KV head's K/V is read by its group's heads and all their blocks while it stays in L2: S is chosen on the host
 * so a section's K/V fits an L2 budget, fj_sched_section_heads). A sequence of nblk < n_mblocks blocks has its
 * empty tiles (mb >= nblk) at the start of each section: i < n_mblocks - nblk, one contiguous run.
 *
 * Assignment. A u32 counter in global memory (fj_fwd_params_tma.tile_count, zeroed in the launch's stream before
 * each launch; no host sync, capture-safe) hands out the tiles: the producer thread takes the next index with
 * atom.add; an index inside an empty run moves the counter past the run for every CTA (atom.max) and takes again.
 * It claims each tile's successor once the tile's last K/V load is issued (ws_frame.c fj_ws_next_round: the ring's
 * depth before the consumers finish the tile, so the atom and the next Q load are hidden, while a CTA holds a claimed
 * tile for no longer than that), then writes the tile's index into
 * slot round % FJ_SCHED_SLOTS of shared memory (plan.sched_off) before it arrives on the tile's Q full barrier;
 * the consumers read it after their Q full wait (mbarrier release / acquire). With no tile left the producer
 * writes FJ_SCHED_NONE and arrives on Q full without a load; the consumers leave.
 * A slot is rewritten FJ_SCHED_SLOTS rounds later, after Q empty of a round past it (q_bufs <= 2 < SLOTS): the
 * consumers read their tile's slot again in the epilogue instead of keeping the index live across the KV loop.
 *
 * Coordinates in the slot (build macro FJ_LPT_COORDS, default 1 since session 10: issue 20's varlen batch, fagen
 * bench 3 interleaved rounds, H200 +1.0-1.9% (582-583 against 571-577 TFLOP/s); H100 equal within noise, 599-606
 * against 601-612: bench/results/h200-session10-2026-11-27.md). Off (0), a slot holds the index alone and the
 * consumers decode it (3-4 dependent u32 divisions) and read cu_seqlens_q / _k (two dependent global loads) in their
 * loop head, before the work tile's first wgmma, and again in the epilogue -
 * work the producer has just done. On, a slot holds FJ_SCHED_WORDS words (enum below): the producer writes the
 * decoded tile and its sequence's bounds there as it decodes the tile, and every other role reads them after its Q
 * full wait (fj_sched_emit_take_coords) instead (FlashAttention-3's varlen scheduler likewise hands its consumers
 * (block, head, batch) through shared memory). The words are written at round r's decode, before its Q empty wait:
 * safe, since the producer has then waited (in round r - 1) for Q empty of round r - 1 - q_bufs >= r - FJ_SCHED_SLOTS
 * + 1, which every consumer warp arrives on after its last read of slot r - FJ_SCHED_SLOTS (that round's epilogue).
 */
#ifndef FJ_SCHED_H
#define FJ_SCHED_H

#include "backend.h"

#define FJ_SCHED_SLOTS 4
#define FJ_SCHED_NONE 0xffffffffu

#ifndef FJ_LPT_COORDS
#define FJ_LPT_COORDS 1
#endif
/* Who reads a slot (build macro FJ_LPT_SLOT_LANE0). 1 (the default): lane 0 reads, shfl.sync gives the word to its
 * warp. 0 (for an A/B): every thread of a reading warp; then compute-sanitizer racecheck counts a hazard per launch
 * once a CTA runs more rounds than FJ_SCHED_SLOTS (H200, session 11, bench/results/h200-session11-2026-11-27.md):
 * lanes 1-31's reads are ordered before the producer's rewrite of the slot only through lane 0's later Q empty
 * arrival, which the memory model does not extend to them without a warp barrier (bar.warp.sync assembles to a NOP
 * there, invisible to racecheck). With 1 every read is lane 0's own, ordered before its arrival by program order:
 * racecheck 0 hazards with 3 CTAs (H200, session 12: lpt GQA D128 N1000, and with a window), the speed within 0.5%
 * (H100: GQA causal N8k 664 against 668 TFLOP/s; bench/results/h200-session12-2026-11-28.md). */
#ifndef FJ_LPT_SLOT_LANE0
#define FJ_LPT_SLOT_LANE0 1
#endif
/* The words of a slot with FJ_LPT_COORDS: the index, the query block's first row m0, the query head, the sequence,
 * its query and key lengths (clamped: seqlen.h), its query TMA sequence coordinate (start + len: seqlen.h) and the
 * KV head. */
enum {
    FJ_SCHED_W_TILE,
    FJ_SCHED_W_M0,
    FJ_SCHED_W_H,
    FJ_SCHED_W_B,
    FJ_SCHED_W_LEN_Q,
    FJ_SCHED_W_LEN_K,
    FJ_SCHED_W_SEQ_Q,
    FJ_SCHED_W_HKV,
    FJ_SCHED_WORDS
};
/* Bytes of one slot: the index alone, or FJ_SCHED_WORDS words. */
#define FJ_SCHED_SLOT_BYTES (FJ_LPT_COORDS ? 4 * FJ_SCHED_WORDS : 4)

/* ---- host ---- */

/* L2 budget for one section's K and V (bytes). FlashAttention-3 found an underestimate of the L2 (8 MB of 50) to
 * schedule best; the same here until measured otherwise. A build may set it (issue 20's varlen A/B,
 * bench/varlen_knobs_ab.sh: -DFJ_SCHED_L2_BYTES=33554432 makes one section of every head for issue 20's batch, as
 * FlashAttention-3's per-sequence sections do for its documents of up to 2048 tokens; 8 MB gives 8 query heads). */
#ifndef FJ_SCHED_L2_BYTES
#define FJ_SCHED_L2_BYTES (8 << 20)
#endif

/* Query heads per section: the KV heads whose K and V (seqlen_k rows of head_dim, 2 bytes, both) fit
 * FJ_SCHED_L2_BYTES, a power of two from 1 to 16, times the group (heads_q / heads_kv), at most heads_q - then
 * doubled past the budget until a section holds at least `ctas` work tiles (n_mblocks per head) or every head.
 * A section smaller than the grid has its longest tiles claimed beside the last one's shortest, so the kernel ends
 * on a long tile of the last section: on the H100 (session 9), D256 N4k causal MHA with 2-head sections of 64
 * tiles on 132 CTAs had its busiest SM 10.7% above the mean and ran 0.95x the static schedule. */
int fj_sched_section_heads(int heads_q, int heads_kv, int seqlen_k, int head_dim, unsigned n_mblocks, unsigned ctas);

/* Virtual tile t's coordinates (the order above): sequence *b, head *h, query block *mb; *skip_end = the index of
 * the first tile of t's section that a sequence of nblk query blocks runs (t itself when t runs: mb < nblk; the
 * section's end when nblk = 0). The host mirror of the device code, for tests. */
void fj_sched_tile(unsigned t, unsigned n_mblocks, unsigned heads_q, unsigned section_heads, unsigned nblk,
                   unsigned *b, unsigned *h, unsigned *mb, unsigned *skip_end);

/* ---- device (sm_90a) ---- */

/* mb = tile's query block, hb = b x heads_q + h (what fj_ws_decode_tile reads: ws_frame.c). */
void fj_sched_emit_decode(fj_kctx *k, fj_reg_t tile, fj_reg_t mb, fj_reg_t hb);
/* Producer thread: dst = the counter's next index (atom.add). */
void fj_sched_emit_fetch(fj_kctx *k, fj_reg_t dst);
/* Producer thread: from candidate `tile` on (in place), past the empty runs, to a tile that runs or one >= n (varlen;
 * a dense batch has no empty tiles: nothing to emit). */
void fj_sched_emit_resolve(fj_kctx *k, fj_reg_t tile, fj_reg_t n);
/* Producer thread: slot round % FJ_SCHED_SLOTS = tile (before the Q full arrive of that round). */
void fj_sched_emit_publish(fj_kctx *k, fj_reg_t round, fj_reg_t tile);
/* Consumers: tile = slot round % FJ_SCHED_SLOTS (after the Q full wait of that round). */
void fj_sched_emit_take(fj_kctx *k, fj_reg_t round, fj_reg_t tile);

/* FJ_LPT_COORDS: whether plan p's slots hold the coordinates (a varlen lpt plan of a build with the macro on). */
int fj_sched_coords(const fj_plan *p);
/* Producer thread, after decoding round's tile (k->m0, h, b, hkv, seqlen_q, seqlen_k, q_tma_seq): its words 1.. */
void fj_sched_emit_publish_coords(fj_kctx *k, fj_reg_t round);
/* The other roles, after the round's Q full wait: k->m0; with heads (FJ_WS_DECODE_HEADS) k->h, b, hkv and q_tma_seq
 * (the O store's); with rows (FJ_WS_DECODE_ROWS) k->seqlen_q, seqlen_k. */
void fj_sched_emit_take_coords(fj_kctx *k, fj_reg_t round, int heads, int rows);

#endif
