/*
 * backend.h - the interface an arch path fills, and the kernel-emission context they share.
 *
 * The skeletons own the algorithm: block indices, the KV loop and its bounds, the pipeline schedule; online
 * softmax is softmax.c's, masking and score modification mask.c's, the shared setup kernel_common.c's, the
 * epilogue epilogue.c's. A backend owns what the hardware decides: how tiles move global->shared, how
 * S = QK^T and O += PV are issued, which accumulator register holds which (row, column) - the fragment
 * descriptor - and how O is stored.
 *
 *   sm_80  (sm80.c)   cp.async + ldmatrix + mma.sync.m16n8k16        every warp loads and computes
 *   sm_90a (sm90.c)   TMA + mbarrier + wgmma, warp-specialized         producer / consumer warpgroups
 *   sm_100a (sm100.c) TMA + tcgen05.mma into tensor memory, warp-specialized: load, MMA, softmax, correction
 * A backend fills exactly one protocol table: sync (fj_sync_proto: the skeleton fwd_kernel.c, all warps alike)
 * or async (fj_async_proto: the warp-specialized frame ws_frame.c, which emits the setup, the role dispatch,
 * the register split and the tile schedule from the plan's role table (roles.h) around the arch's role
 * bodies - sm_90a: sm90_roles.c, sm_100a: sm100_roles.c).
 */
#ifndef FJ_BACKEND_H
#define FJ_BACKEND_H

#include <stddef.h>

#include "codegen.h"
#include "emit.h"
#include "kernel_abi.h"

/*
 * Fragment descriptor: where a thread's share of a Br x Bc score tile (and a Br x D output tile)
 * lives. A thread owns `rows` rows; in each it owns `s_vals` score values and `o_vals` output
 * values. Rows are reduced across the `n_shuffles` lanes xor-masks in `shuffle_xor` (a quad for
 * mma.sync and wgmma; none when a thread owns a whole row, as after tcgen05.ld).
 * Positions are relative to per-thread bases kept in registers (fj_kctx.row_base, col_base_s, col_base_o).
 */
typedef struct fj_frag_desc {
    int rows;
    int s_vals, o_vals;
    int n_shuffles;
    int shuffle_xor[4];
    int (*s_reg)(const fj_plan *p, int row, int val);  /* index in the S accumulator bank */
    int (*o_reg)(const fj_plan *p, int row, int val);  /* index in the O accumulator bank */
    int (*row_off)(const fj_plan *p, int row);         /* + row_base = row within the CTA tile */
    int (*s_col_off)(const fj_plan *p, int val);       /* + col_base_s = column within the KV tile */
    int (*o_col_off)(const fj_plan *p, int val);       /* + col_base_o = column within head_dim */
} fj_frag_desc;

/* Everything the skeleton and a backend share while emitting one kernel. */
typedef struct fj_kctx {
    fj_emit *e;
    const fj_plan *p;
    fj_frag_desc frag;

    /* banks */
    int b_r, b_rd, b_f, b_p;          /* scratch: b32, b64, f32, pred */
    int b_acc_o, b_acc_s, b_row_m, b_row_l, b_frag_q, b_frag_p, b_frag_b, b_addr;

    /* accumulators and row statistics */
    fj_reg_t acc_o, acc_s, row_m, row_l, frag_q, frag_p;
    fj_reg_t acc_s_set[2];            /* with plan.pipeline_qk: the two S sets acc_s alternates between */

    /* thread geometry */
    fj_reg_t tid, warp, lane;
    fj_reg_t row_base;                /* s32: first row this thread owns, within the CTA tile */
    fj_reg_t col_base_s;              /* s32: first column this thread owns within the KV tile (S) */
    fj_reg_t col_base_o;              /* s32: first column this thread owns within head_dim (O); the same
                                         register as col_base_s unless col_warps splits the columns */

    /* col_warps = 2: warps 2i and 2i+1 own the same rows (fwd_kernel.c, fj_emit_pair_*) */
    fj_reg_t pair_bar;                /* u32: named barrier of the pair, 1 + warp / 2 */
    fj_reg_t xchg_own, xchg_peer;     /* u32: this lane's 16-byte slot in this warp's / the partner's
                                         exchange area (plan.xchg_off) */

    /* warp-specialized frame (ws_frame.c) and role bodies (sm90_roles.c) */
    fj_reg_t wg;                      /* u32: consumer warpgroup 0.. (warpgroup - 1) */
    fj_reg_t phase;                   /* u32: parity of the current pass over the stage ring (0 / 1) */
    fj_reg_t ring_desc_k, ring_desc_v; /* u64, rolled loop (plan.roll_stages): the K / V stage's descriptor offset
                                          (stage x kv_tile_bytes / 16), read by mma_qk / mma_pv for FJ_SLOT_RING */
    fj_reg_t b, h, hkv;               /* u32: batch, query head, KV head: the TMA coordinates */
    fj_reg_t params;                  /* u64: generic address of the parameter block (its tensor maps) */
    fj_reg_t q_buf;                   /* u32: the current work tile's Q buffer, as bytes past plan.q_off */
    fj_reg_t wg_leader;               /* pred: thread 0 of the consumer warpgroup (issues its TMA stores) */
    fj_reg_t leader;                  /* pred: lane 0 of the warp (arrives on the K/V empty barriers) */
    fj_reg_t tmem;                    /* u32, a role table with tensor memory (roles.h tmem_cols): its base address
                                         (lane 0, the first allocated column), read by the frame's setup */
    int defer_o_rescale;              /* softmax rebase leaves O alone: the factors stay in corr and
                                         fj_emit_softmax_rescale_o applies them (O is an in-flight
                                         wgmma accumulator meanwhile) */
    int o_zero;                       /* O is known to be 0 here (a work tile's first KV tile): the
                                         rebase skips O *= c */
    fj_reg_t corr;                    /* f32 x frag.rows: the rescale factors of the last rebase */
    fj_reg_t weight_t;                /* f32: the weight test's held threshold T (plan.rescale_weight_held), else unset */
    fj_reg_t weight_any;              /* pred: this tile's vote rebased (plan.rescale_weight_held), else unset */
    fj_reg_t row_l_lag;               /* f32 x frag.rows: l one KV tile ago (plan.rescale_weight_lag), else unset */
    fj_reg_t score_scale;             /* f32, FP8 (plan.fp8): the work tile's scale_log2 x q_descale x k_descale, which
                                         the softmax uses instead of the parameter (fp8_ws.c) */
    fj_reg_t o_scale;                 /* f32, FP8 epilogue: v_descale, O's factor beside 1/l */
    fj_reg_t cap_scale;               /* f32, FP8 with softcap: the work tile's cap_scale x q_descale x k_descale (the
                                         tanh's argument is the true score; fj_cap_scale), else unset */
    fj_reg_t rescale_pred;            /* pred: the last rebase moved a reference max (O needs corr) */
    fj_reg_t tile_mx;                 /* f32 x frag.rows, with tile_mx_ready: the tile's row maxima (unscaled),
                                         found by fj_emit_scores ahead of the softcap's tanh (softmax.c) */
    int tile_mx_ready;                /* 1: fj_emit_softmax_rebase takes tile_mx instead of reducing S again */

    /* problem */
    fj_reg_t seqlen_q, seqlen_k;      /* s32, valid during setup only: later phases re-read the params */
    fj_reg_t m0;                      /* s32: first query row of this CTA */
    fj_reg_t j;                       /* s32: KV tile being computed; its first key row is j * block_n */
    fj_reg_t kv_end;                  /* s32: the work tile's KV tiles end here (the loop's bound), where has_kv_end */
    int has_kv_end;                   /* kv_end is set: the weight test may estimate the row's final l (softmax.c) */
    fj_reg_t f_zero;                  /* f32 0, the C operand of a first MMA */
    fj_reg_t q_ptr, o_ptr, k_ptr, v_ptr;        /* u64: Q/O at row m0; K/V at the next tile to load */
    fj_reg_t lse_ptr;                 /* u64: &LSE[b, h, m0] or 0 */
    fj_reg_t smem;                    /* u32: shared address of the dynamic smem base */
    fj_reg_t q_rows;                  /* s32: seqlen_q - m0, rows of this CTA that exist (set in the
                                         prologue and again in the epilogue, not kept across the loop) */
    /* decode variants (plan.variant) */
    fj_reg_t split;                   /* u32, SPLIT: this CTA's split, 0..splits-1 (set before the KV range) */
    fj_reg_t kv_first;                /* s32, SPLIT or local variants: the first KV tile of this CTA's (split's) range
                                         (set by the KV range, mask.c) */
    /* attention variants (plan.cfg.mods, mask.c) */
    fj_reg_t kv_mask_below;           /* s32, local: tiles below it need the per-element mask */
    unsigned kv_range_made;           /* which of kv_first (1), kv_mask_below (2) the KV range has allocated: one
                                         register each per kernel, written by every emission of the range (mask.c) */
    fj_reg_t alibi_nslope;            /* f32 (x frag.rows with PACK), ALIBI: -slope x score_unit of the rows */
    fj_reg_t alibi_tile;              /* f32, ALIBI folded (mask.h): the tile's bias share of the thread's scores,
                                         set by the score hook, read by the softmax */
    fj_reg_t alibi_diag;              /* s32, ALIBI lookahead (mask.h): the tile's first key to the diagonal of the
                                         thread's first row, set by the score hook, read by the rebase */
    fj_reg_t sink_h;                  /* u32, SINKS (epilogue): the tile's (first) query head */
    fj_reg_t sink_on;                 /* pred, SINKS: this CTA adds the sink (split 0, or no split) */
    fj_reg_t kv_tile;                 /* s32, PAGED: the KV tile load_kv copies (set before each load_kv) */
    fj_reg_t page_next;               /* u32 x fj_paged_lookups, AHEAD: the pool pages of the next tile to
                                         copy (its segments', gathered), read by the previous copy */
    fj_reg_t page_row;                /* u32 x fj_paged_lookups, AHEAD + GATHER: each segment's row in its page
                                         (key mod page_size), worked out with page_next */
    fj_reg_t page_more;               /* pred, AHEAD: the tile after the one being copied exists */
    int page_sync;                    /* AHEAD: this copy reads its own pages (the first one) */
    int page_split_how;               /* FJ_PAGE_SPLIT_*: how a key's page is found (a caller that emits
                                         several lookups branches once on page_shift around them) */
    int page_ready;                   /* AHEAD, not gathered: k_ptr / v_ptr hold the copy's tile already */
    fj_reg_t page_tab;                /* u64, AHEAD: &block_table[b][0] of the CTA's sequence */
    fj_reg_t page_base;               /* u64 x 2, AHEAD: K and V at the CTA's KV head, page 0 row 0 (GATHER:
                                         plus the thread's first column in bytes, added by the backend) */
    /* varlen batches (seqlen.c) */
    fj_reg_t q_tma_row, q_tma_seq;    /* s32, sm_90a VARLEN producer: the work tile's Q box coordinates */
    fj_reg_t kv_tma_delta, kv_tma_seq; /* s32, sm_90a VARLEN_K producer: key row r of the sequence is TMA row
                                         r + kv_tma_delta of sequence coordinate kv_tma_seq (kept per work tile) */

    int kv8_slot;                     /* FP8 K/V (plan.kv8): 1 + the stage the next wait widens from e4m3, 0 none */

    /* backend-private registers (per-lane address terms, ...) */
    fj_reg_t bk[28];
} fj_kctx;

/* How a paged lookup splits a key into page and row: on page_shift at the lookup, or a division / a shift
 * (the caller branched on page_shift already). */
enum { FJ_PAGE_SPLIT_BRANCH = 0, FJ_PAGE_SPLIT_DIV = 1, FJ_PAGE_SPLIT_SHIFT = 2 };

/* The slot of mma_qk / mma_pv in the rolled sm_90a loop (plan.roll_stages): the stage whose descriptor offset is
 * in k->ring_desc_k / ring_desc_v. */
#define FJ_SLOT_RING (-1)

/* Which keys of a tile an mma_pv call covers. */
enum { FJ_KEYS_ALL = 0, FJ_KEYS_OWN = 1, FJ_KEYS_PEER = 2 };

/* Slots (512 B each: 16 B per lane) of a warp's exchange area: row statistics (the tile maxima, and l
 * in the epilogue), then P. Slot 1 is unused: it was l's in a dropped one-barrier variant, and goes
 * with the next codegen version (removing it changes every pair kernel's smem size). */
enum { FJ_XCHG_SLOT_ROWS = 0, FJ_XCHG_SLOT_P = 2 };

/* Which tiles a load_kv call copies. */
enum { FJ_KV_K = 1, FJ_KV_V = 2, FJ_KV_BOTH = 3 };

/* The sm_80 protocol (fwd_kernel.c: every warp loads and computes): asynchronous copies in groups, waited for by
 * count, with CTA barriers between the stages. */
typedef struct fj_sync_proto {
    /* Start the async copy of the Q tile (rows >= seqlen_q zero-filled). */
    void (*load_q)(fj_kctx *k);
    /* Start the async copy of the K tile at k_ptr and/or the V tile at v_ptr (parts: FJ_KV_*) into
     * stage `slot`; rows >= rows_valid are zero-filled. The KV loop is unrolled by the number of
     * stages, so a stage is a constant. */
    void (*load_kv)(fj_kctx *k, int slot, int parts, fj_reg_t rows_valid);
    /* Close the current group of async copies. */
    void (*commit)(fj_kctx *k);
    /* Wait until at most `pending` groups are in flight, then a CTA barrier. */
    void (*wait)(fj_kctx *k, int pending);
    /* Move Q from smem to registers (only when plan.q_in_regs). */
    void (*q_to_regs)(fj_kctx *k);
    /* Warp pairs: this warp's packed P to its exchange area (get = 0), or the partner's from its area
     * into frag_p (get = 1; after a pair barrier that follows the partner's put). */
    void (*xchg_p)(fj_kctx *k, int get);
} fj_sync_proto;

struct fj_ws_loop;
struct fj_role;

/* The warp-specialized protocol (ws_frame.c: a frame, the plan's role table, the arch's role bodies): roles
 * linked by mbarrier rings, the MMAs asynchronous, their completion an event (roles.h: FJ_MMA_EVENT_*). */
typedef struct fj_async_proto {
    /* Fill plan.roles (roles.h) from the plan's fields; fj_plan_build and fj_plan_build_variant call it last. */
    void (*roles)(fj_plan *p);
    /* Emit the body of role `r` (the frame has dispatched the role's warps to it and set their registers). */
    void (*role_body)(fj_kctx *k, struct fj_ws_loop *l, const struct fj_role *r);
    /* FJ_MMA_EVENT_GROUP (sm_90a): mma_qk / mma_pv issue asynchronously and close one group each; this waits
     * until at most `pending` groups of this warpgroup are in flight (their results readable). */
    void (*mma_wait)(fj_kctx *k, int pending);
    /* FJ_MMA_EVENT_MBARRIER (sm_100a): make the barrier at shared address base + off track the MMAs issued so far
     * (tcgen05.commit); the consumer of that ring waits on it as on any full barrier. NULL for FJ_MMA_EVENT_GROUP. */
    void (*mma_commit)(fj_kctx *k, fj_reg_t base, int off);
    /* At the start of each work tile: per-tile operand state (k->q_buf is set). */
    void (*tile_start)(fj_kctx *k);
    /* Before a consumer warpgroup leaves: wait for what it left in flight (its asynchronous O stores). */
    void (*finish)(fj_kctx *k);
} fj_async_proto;

/* An arch path: its plan rules, fragment layout and MMAs, and exactly one protocol - sync (the sm_80
 * skeleton, fwd_kernel.c) or async (the warp-specialized frame, ws_frame.c) - the other NULL. */
typedef struct fj_backend {
    const char *name;
    unsigned required_caps;
    /* The path's tile rules (warps, block_m, col_warps, swizzle, schedule flags) and the warp geometry
     * they give (threads, row_warps, m_frags, consumer_wgs...); before the smem map. */
    fajit_status (*tiles)(fj_plan *p);
    /* The smem map of p->cfg (no rules checked): fj_plan_smem_map calls it. */
    void (*smem_map)(fj_plan *p);
    /* Derive the arch-specific plan fields (copy layout, register budget) and check their rules. */
    fajit_status (*plan)(fj_plan *p);
    /* Warp roles and fragment layout in words, for explain and the -v 2 header. */
    void (*describe)(const fj_plan *p, fj_buf *out, const char *prefix);
    void (*frag_desc)(const fj_plan *p, fj_frag_desc *out);
    /* Per-thread setup after the skeleton has loaded parameters: row_base, col_base_s/o, lane terms. */
    void (*setup)(fj_kctx *k);
    /* Recompute row_base and col_base_s/o from %tid (setup does it first; the mask and the epilogue redo
     * it so that neither register stays live across the KV loop). */
    void (*geometry)(fj_kctx *k);
    /* S = Q K^T for the K tile in `slot`. */
    void (*mma_qk)(fj_kctx *k, int slot);
    /* P (the exponentiated S, f32 in acc_s) -> the MMA's A operand registers (frag_p); with warp pairs
     * the P of this warp's keys. */
    void (*pack_p)(fj_kctx *k);
    /* O += P V for the V tile in `slot` over the keys FJ_KEYS_* (all, or with warp pairs this warp's or
     * the partner's half of the tile). */
    void (*mma_pv)(fj_kctx *k, int slot, int keys);
    /* Store the normalized O accumulators (rows >= seqlen_q skipped). */
    void (*store_o)(fj_kctx *k);
    const fj_sync_proto *sync;   /* the sm_80 protocol, or NULL */
    const fj_async_proto *async; /* the warp-specialized protocol, or NULL */
    /* The words (each " name=value") of the environment knobs that gave plan p other code than their defaults
     * would; "" for the defaults. fj_plan_format appends them, so the kernel caches key on them. Returns the
     * length needed (like snprintf). NULL: the path reads no knob. */
    int (*env_words)(const fj_plan *p, char *buf, size_t size);
} fj_backend;

extern const fj_backend fj_backend_sm80;
extern const fj_backend fj_backend_sm90;

/* The backend of a code-generation path, or NULL (not implemented). */
const fj_backend *fj_backend_of(fajit_arch path);

/* Accumulators in the m16n8 C layout (frag_m16n8.c), shared by mma.sync and wgmma: the fragment
 * descriptor, P repacked into A-operand registers (k-steps 0 .. k_steps_pv / col_warps - 1 of frag_p),
 * and the store of O (rows >= q_rows skipped; o_ptr, row_base, col_base_o set). */
void fj_frag_desc_m16n8(const fj_plan *p, fj_frag_desc *d);
void fj_emit_pack_p_m16n8(fj_kctx *k);
void fj_emit_store_o_m16n8(fj_kctx *k);
const char *fj_dtype_ptx(const fj_plan *p); /* "bf16" / "f16" */
const char *fj_mma_dtype_ptx(const fj_plan *p); /* the MMAs' inputs (P's pack): the dtype's, f16 with plan.kv8_f16 */
const char *fj_out_dtype_ptx(const fj_plan *p); /* O's: the dtype's, or with e4m3 inputs cfg.out_dtype's */

/* The forward skeletons: emit the whole entry body for k->p - fwd_kernel.c for a backend with the sync protocol
 * (all warps alike), the warp-specialized frame (ws_frame.c) for one with the async protocol; generate.c picks. */
void fj_emit_fwd_kernel(fj_kctx *k);
void fj_emit_fwd_ws_kernel(fj_kctx *k);

/* Pieces both skeletons use (kernel_common.c). (The KV range, mask and score modifications: mask.h.) */
void fj_emit_alloc_banks(fj_kctx *k);
/* out (u64) = the tensor at off_ptr + 2 x (b x s_b + h x s_h + row x s_n), its element strides at off_stride. */
void fj_emit_tensor_ptr(fj_kctx *k, int off_ptr, int off_stride, fj_reg_t b, fj_reg_t h, fj_reg_t row, fj_reg_t out);
/* b = the CTA's batch: %ctaid.z, or with split-KV %ctaid.z / splits (and, when want_split, k->split = the rest). */
void fj_emit_batch(fj_kctx *k, fj_reg_t b, int want_split);
/* h = the CTA's (first) query head: %ctaid.y, with GQA packing x group. */
void fj_emit_out_head(fj_kctx *k, fj_reg_t h);
/* O = 0, m = -inf, l = 0. */
void fj_emit_init_accumulators(fj_kctx *k);
/* Epilogue: O and LSE pointers (recomputed from %ctaid and the parameters), 1/l and LSE, store O. */
void fj_emit_epilogue(fj_kctx *k);

/* m0 = first query row of this CTA, from %ctaid.x (reversed for causal). */
void fj_emit_m0(fj_kctx *k);
/* The number of keys of this CTA's sequence, read at the point of use: seqlen_k from the parameters, or
 * with per-sequence lengths seqlens_k[b] (clamped) from global memory (an L1 hit after the first). */
fj_reg_t fj_emit_kv_len(fj_kctx *k);
/* GQA packing: the tile-relative packed row `row` (s32) of this CTA (m0 + row = g x Nq + i) as query head
 * offset g and position i (u32 registers given); and as a byte offset from the group's first head, row 0:
 * out (u64) = g x 2 x stride[1] + i x row_bytes, with the tensor's strides at off_stride (fj_fwd_params) and
 * its row bytes at off_row_bytes. */
void fj_emit_packed_row(fj_kctx *k, fj_reg_t row, fj_reg_t g, fj_reg_t i);
void fj_emit_packed_row_offset(fj_kctx *k, fj_reg_t row, int off_stride, int off_row_bytes, fj_reg_t out);
/* Paged K/V: out[0] / out[1] (u64) = the global addresses of K / V of key `key` (u32, clobbered) through
 * the block table of this CTA's sequence and KV head: its page read now, or (AHEAD, after the first copy)
 * taken from k->page_next[lookup]. */
void fj_emit_paged_key_ptrs(fj_kctx *k, fj_reg_t key, int lookup, const fj_reg_t out[2]);
/* AHEAD + GATHER, after the first copy: out[0] / out[1] = K / V addresses of segment `lookup` from
 * k->page_next and k->page_row (both set by the previous copy's fj_emit_paged_key_page): no page split. */
void fj_emit_paged_seg_ptrs(fj_kctx *k, int lookup, const fj_reg_t out[2]);
/* AHEAD: k->page_next[lookup] = the page of key `key` (clobbered: key mod page_size), read under k->page_more. */
void fj_emit_paged_key_page(fj_kctx *k, fj_reg_t key, int lookup);
/* GATHER: copy passes per 16-row page segment (1 when a pass spans 16 rows or more), and page lookups
 * per thread and tile (1 without GATHER). */
int fj_paged_seg_passes(const fj_plan *p);
int fj_paged_lookups(const fj_plan *p);
/* Split variant: the epilogue's stores of fp32 partial O rows (row pitch head_dim floats at o_ptr; rows
 * >= q_rows skipped), over the fragment descriptor. */
void fj_emit_store_o_partial(fj_kctx *k);
/* The combine kernel's body (combine.c): reduce the split partials into O and LSE. */
void fj_emit_combine_kernel(fj_emit *e, const fj_plan *p);

/* Shared, arch-neutral phases over the fragment descriptor (softmax.c). */
/* The tile's scores up to the softmax: the score hook (softcap, ALiBi), the branch `nomask` past the per-element
 * mask for tiles that need none (pr: a scratch predicate; comment: a teaching line before the branch, or NULL),
 * the mask. For softcap alone it also takes the row maxima ahead of the tanh (fj_softmax_early_max). */
void fj_emit_scores(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from, const char *comment);
int fj_softmax_early_max(const fj_plan *p);
/* Softcap with the early max, O rescale deferred or O still 0 (sm_90a consumers): the tile's scores, rebase and
 * exponentials in two copies, the unmasked one a single block (softmax.c); replaces fj_emit_scores + rebase + exp. */
int fj_softmax_split(const fj_kctx *k);
void fj_emit_softmax_split(fj_kctx *k, fj_reg_t pr, fj_reg_t mask_from);
void fj_emit_softmax_rebase(fj_kctx *k);  /* tile row max; new reference max and O, l rescale when the plan says */
void fj_emit_softmax_exp(fj_kctx *k);     /* P = exp2(S*scale - m), l += rowsum(P) */
void fj_emit_softmax_rescale_o(fj_kctx *k); /* with defer_o_rescale: O *= corr where the rebase moved m */
/* plan.rescale_weight_held: after a tile's softmax (its row sums in l), behind a branch on the tile's vote
 * (deferred: rescale_pred, else weight_any), the weight test's threshold for the next tiles. Placed by the skeleton
 * at the end of the tile's step, where the branch splits no block ptxas interleaves (a first KV tile, o_zero,
 * sets it in fj_emit_softmax_exp). Nothing without the knob. */
void fj_emit_softmax_weight_update(fj_kctx *k, int deferred);
int fj_weight_lag(const fj_plan *p);          /* the weight test reads l one KV tile old (plan.rescale_weight_lag) */
int fj_weight_held(const fj_plan *p);         /* the weight test's T is held in a register (plan.rescale_weight_held) */
void fj_emit_normalize(fj_kctx *k);       /* epilogue: quad-reduce l, O *= 1/l, write LSE */
/* x = 2^x for value v (0-based) of a row: on the FMA units (soft_exp2.h) when plan.soft_exp2 of every 8 values
 * picks v (spread evenly), else ex2.approx.ftz on the MUFU. A row sum of such values adds with .ftz (the software
 * 2^x of a masked score is a subnormal). */
void fj_emit_exp2_value(fj_kctx *k, fj_reg_t x, int v);

/* Warp pairs (plan.col_warps = 2, fwd_kernel.c). Each warp's exchange area holds 16 B per lane per
 * slot (FJ_XCHG_SLOT_*): row statistics, then P. Both warps of a pair run the same sequence of pair
 * barriers; a slot read after a pair barrier is rewritten only after a later barrier (pair or CTA) that
 * the partner reaches after its read: the last tile's maxima are read before its P barrier, which both
 * warps pass before the epilogue writes l into the same slot. */
void fj_emit_pair_sync(fj_kctx *k);       /* bar.sync pair_bar, 64 */
/* Store n (1, 2 or 4) registers of `type` in this lane's `slot` / load the partner's from it (after a
 * fj_emit_pair_sync that follows the partner's store). */
void fj_emit_pair_put(fj_kctx *k, int slot, fj_reg_t src, int n, const char *type);
void fj_emit_pair_get(fj_kctx *k, int slot, fj_reg_t dst, int n, const char *type);
/* v[i] = op(v[i], the partner's v[i]) for n (1, 2 or 4) f32 registers (op "max.f32" / "add.f32"),
 * through the row-statistics slot. */
void fj_emit_pair_reduce(fj_kctx *k, const char *op, fj_reg_t v, int n);

/* Load a field of struct fj_fwd_params (kernel_abi.h) at its point of use: ptxas reads it from the
 * constant bank instead of keeping a register live across the loop. */
#define FJ_PARAM_OFF(field) ((int)offsetof(fj_fwd_params, field))
/* A decode field of struct fj_fwd_params_decode in this kernel's block (kernel_abi.h: fj_decode_param_off). */
#define FJ_DEC_OFF(k, field) fj_decode_param_off((k)->p->ws, (int)offsetof(fj_fwd_params_decode, field))
/* len = min(max(seqlens_k[b], 0), cap): sequence b's KV length (SEQLENS). */
void fj_emit_seq_len(fj_kctx *k, fj_reg_t b, fj_reg_t cap, fj_reg_t len);
fj_reg_t fj_param_u64(fj_kctx *k, int offset);
fj_reg_t fj_param_s32(fj_kctx *k, int offset);
fj_reg_t fj_param_f32(fj_kctx *k, int offset);

#endif
