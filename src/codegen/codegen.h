/*
 * codegen.h - internal interface of the code generator: config -> plan -> PTX.
 *
 * fj_plan_build() checks a config against its arch path and derives everything the emitter needs
 * (warp roles, fragment counts, smem map, copy layout, register budget). fj_generate_ptx_plan()
 * walks the kernel skeleton for that plan. Both are pure functions of the config: no GPU, no CUDA
 * library, byte-identical output for the same input.
 */
#ifndef FJ_CODEGEN_H
#define FJ_CODEGEN_H

#include <stddef.h>

#include "arch.h"
#include "fajit.h"
#include "roles.h"

/* Bumped whenever generated code can change for the same config: part of every cache key. */
#define FJ_CODEGEN_VERSION "fajit-codegen-13"

/* Issue 23: whether a config's roll = 0 (the default) takes the rolled KV loop on the sm_90a path where it can (BF16 /
 * F16, 2+ stages, no attention or decode variant; else unrolled, as roll = -1; roll = 1 rolls those too). 1 since the H200 A/B of 2026-11-26 (bench/results/
 * h200-session4-final-2026-11-26.md: speed within -1.5..+1.6% on D64/128/256 cells, cold compile of the D128
 * default 329 / 385 / 488 ms against 690-994 unrolled); tests follow it: test_roll_config, test_rolled_ptx. */
#define FJ_SM90_ROLL_DEFAULT 1 /* an edit, not a -D knob: the disk-cache key's source digest must see it */

/* plan.lean bits: sm_90a consumer-loop trims (sm90.c fj_sm90_lean_parse, FAJIT_SM90_LEAN; bench/lean_ab.sh) */
#define FJ_LEAN_WG_UNIFORM 1u /* the warpgroup index broadcast from lane 0 (shfl.sync.idx): ptxas keeps it, the Q
                                 descriptor and the named-barrier ids in uniform registers (no R2UR per wgmma) */
#define FJ_LEAN_ALL FJ_LEAN_WG_UNIFORM

typedef struct fj_plan {
    fajit_config cfg;            /* the checked config (no zero fields) */
    const fj_arch_info *arch;    /* PTX target of the code-generation path */
    const struct fj_backend *backend;

    /* threads and warp roles */
    int threads;                 /* warps * 32 */
    int ws;                      /* warp-specialized (the frame ws_frame.c and plan.roles): a producer warpgroup loads, consumer warpgroups
                                    compute; else every warp does both (fwd_kernel.c) */
    int col_warps;               /* warps sharing a row block (1, or 2: a warp pair splits S's keys and O's
                                    head dims and exchanges row maxima, P and l through smem) */
    int row_warps;               /* warps / col_warps: row blocks per CTA */
    int m_frags;                 /* 16-row MMA fragments per warp: block_m = 16 * m_frags * row_warps */
    int n_frags_s;               /* n8 fragments of S per warp: block_n / 8 / col_warps */
    int n_frags_o;               /* n8 fragments of O per warp: head_dim / 8 / col_warps */
    int k_steps_qk;              /* head_dim / 16 */
    int k_steps_pv;              /* block_n / 16 (a warp's P covers the whole tile after the exchange) */
    int q_in_regs;               /* Q fragments stay in registers for the whole KV loop */
    int rescale_slack;           /* O rescale: -1 every tile; >= 0 behind a warp vote, only when a row max
                                    passes the reference max by more than 2^slack (softmax.c) */
    int rescale_weight_log2;     /* with rescale_slack > 0, < 0 turns on the weight test: the reference max
                                    also moves when a new row max would weigh more than 2^this of the lane's
                                    partial l, so the largest P of a row is 2^0 = 1, exact in bf16 / f16
                                    (softmax.c); 0: off (warp pairs, whose two warps hold different l) */
    int rescale_weight_est;      /* with the weight test: weigh the new max against an estimate of the row's final
                                    l, the lane's l x 2^(floor log2 J - floor log2 j) (J KV tiles in the work
                                    tile, j done), not the partial l: fewer rebases in the first tiles (softmax.c) */
    int rescale_weight_held;     /* with the weight test: its threshold T is a register, set from l at the end of a tile
                                    whose vote rebased (not recomputed on every tile), so a tile that moves no max
                                    pays the slack test's instructions only (softmax.c) */
    int rescale_weight_lag;      /* with the weight test: weigh it against l as it was one KV tile earlier (a copy
                                    kept beside l), so the vote does not wait for the last tile's row sums */
    int o_rescale_late;          /* overlapped sm_90a schedule: the O rescale a tile's softmax asks for is done in the
                                    next step, after S(j+1) = Q K(j+1)^T is issued and before O += P(j) V(j), so its
                                    multiplies run under that GEMM (as FlashAttention-3 orders them) instead of
                                    between the wait for PV(j-1) and the next issue (sm90_roles.c) */
    int soft_exp2;               /* of every 8 values of a row, how many the softmax exponentiates on the FMA
                                    units (soft_exp2.h) instead of the MUFU; 0: all on the MUFU. Softcap kernels,
                                    whose MUFU also runs a tanh per score (sm90.c) */
    int cap_poly;                /* softcap (sm_90a consumers, the unmasked tile): tanh on the FMA units for a warp's
                                    tile whose scores all lie where the polynomial holds (soft_tanh.h; a vote, else
                                    tanh.approx). 1: the vote and the tile's row max from max |s| (an upper bound of
                                    the capped max, fine for bf16's P); 2: from max s and min s (the exact max: f16's
                                    P would underflow below an upper bound); 0: off (softmax.c) */
    int cap_poly_share;          /* with cap_poly: of every 8 scores of a row, how many take the polynomial (the rest
                                    tanh.approx, which the polynomial's row max bounds within its error) */
    int pipeline_qk;             /* S(j+1) = Q K(j+1)^T issued next to softmax(S(j)): two S register sets */
    int lean_regs;               /* registers are tight: m0 and the thread geometry are recomputed in the mask
                                    and the epilogue instead of kept live across the KV loop */

    /* shared memory map (bytes); every tile is [rows][head_dim] of 2-byte elements, rows of row_bytes */
    int row_bytes;               /* head_dim * 2 */
    int swz_mask;                /* 16-byte chunk index is XORed with (row & swz_mask): 0, 1, 3 or 7 */
    int q_off, q_bytes;
    int k_off, v_off, kv_tile_bytes; /* kv_slots tiles each for K and V */
    int kv_slots;                    /* 16-bit K / V tiles in smem: stages; 1 with kv8 (its ring holds the stages) */
    int xchg_off, xchg_warp_bytes; /* col_warps = 2: per-warp exchange area (row stats, then P), else 0 */
    int smem_bytes;

    /* global->shared copy layout: each thread moves 16-byte chunks */
    int copy_tpr;                /* threads per tile row */
    int copy_rows_per_pass;      /* threads / copy_tpr */
    int copy_chunks_per_thread_row; /* (head_dim / 8) / copy_tpr */

    /* register budget (32-bit registers per thread, an estimate checked against ptxas in the tests) */
    int reg_acc_o, reg_acc_s, reg_q, reg_misc, reg_s_next, reg_total;
    int reg_p;                   /* ws: P's A-operand registers (live beside S with overlap) */
    int reg_limit;               /* what reg_total must fit: 255, or the consumers' setmaxnreg budget */
    int reg_headroom;            /* registers the check keeps free above reg_total where the estimate is known
                                    to run short (sm80.c): reg_total + reg_headroom <= reg_limit */
    int min_target_sm;           /* 0, or the oldest sm this portable PTX compiles for without spilling (sm80.c:
                                    causal configs near the limit need sm_90's allocation); fj_plan_check_target */
    int min_target_regs;         /* with min_target_sm: what reg_total + reg_headroom may be below it */

    /* warp-specialized paths (ws = 1; sm_90a). Warpgroup 0 is the producer (one thread issues the TMA
     * loads), warpgroups 1..consumer_wgs own 64 query rows each. */
    int consumer_wgs;
    int producer_regs, consumer_regs; /* setmaxnreg budgets (registers per thread) */
    int min_ctas;                /* CTAs an SM the kernel is built for: 0 / 1 = one (.minnctapersm 1, the arch's smem);
                                    2 = two (FP8 knob occ2: .minnctapersm 2, a 128-register launch, half an SM's smem,
                                    the persistent grid twice the SMs) */
    int overlap, pingpong;       /* 1 / 0: the config's schedule flags, resolved */
    int whole_program;           /* the PTX uses setmaxnreg, which only a whole-program compile keeps
                                    (runtime/compile.c: NVRTC; nvJitLink and the driver's linker drop it) */
    int roll_stages;             /* 1: the consumers' KV loop is written once for every stage of the ring (stage,
                                    its barrier addresses and descriptor offsets in registers) instead of once
                                    per stage (immediates): under half the PTX and 40% of ptxas's time for
                                    2 stages (issue 23). The config's roll = 1 (fajit.h; text " roll"), or roll
                                    = 0 where FJ_SM90_ROLL_DEFAULT takes it */
    int kv_desc;                 /* 1: every role walks a work tile's KV tiles from the last (the diagonal's, for
                                    causal) down to the first, as FlashAttention-3 does; 0: ascending. Causal ALiBi
                                    takes it (sm90.c plan_kv_order: the diagonal tile holds each row's largest bias,
                                    so later tiles rarely move the lazy rescale's reference max); FAJIT_KV_ORDER
                                    (asc, desc, auto) overrides it for GPU A/B runs (the plan's text then says
                                    " kvorder=...": fj_plan_format) */
    int tma_box_cols;            /* elements in one TMA box row: the swizzle span / 2 */
    int tma_boxes;               /* boxes per tile row: head_dim / tma_box_cols; a tile is stored box by box,
                                    [tma_boxes][rows][swizzle bytes] (the canonical wgmma layout) */
    int q_bufs;                  /* Q buffers (1 or 2: two when they fit, so the producer loads the next work
                                    tile's Q while the consumers finish this one) */
    int o_stage, o_off;          /* 1: O is staged in its own smem buffer at o_off (block_m rows, TMA box
                                    layout) and written by TMA stores that run while the warpgroup goes on;
                                    2: staged the same way in the V ring (o_off = v_off; the O free barrier
                                    orders it with the next work tile's V loads); 0: st.global from
                                    registers (neither fits) */
    int o_row_bytes, o_bytes;    /* O's rows in the staging buffer (head_dim x 2 bytes) and its block_m rows: row_bytes
                                    and q_bytes but for FP8 inputs, whose O is 16-bit */
    int o_box_cols, o_boxes;     /* O's TMA boxes: swizzle / 2 columns, head_dim / that of them a row */
    /* FP8 (cfg.dtype e4m3, sm_90a; fp8_ws.c): Q, K, V are 1-byte elements (row_bytes = head_dim, tma_box_cols =
     * swizzle); wgmma k = 32; V is transposed by the producer's warps 1..transpose_warps (fp8_vt4: 0..3) into the Vt ring at
     * vt_off (stages tiles of [head_dim][block_n] bytes, K-major, boxes of vt_swizzle bytes), with VT full[s] at
     * vt_bar + vt_bar_stride s (count 32 x transpose_warps) and VT empty[s] 8 bytes after it (count consumer warps);
     * V empty[s] then counts the transposing threads (they free the TMA-loaded V). vt_bar_stride is 16, or with the
     * rolled consumer loop (config roll = 1) the K / V barrier block's 8 x FJ_WS_BARS_PER_STAGE, so that one
     * register offset (stage x that stride, fj_ws_ring_point) reaches a stage's K, V and Vt barriers alike. */
    int fp8;
    int vt_off, vt_swizzle, vt_bar, vt_bar_stride, transpose_warps;
    int fp8_vt4;                 /* FJ_FP8_KNOB_VT4: warps 0-3 transpose (transpose_warps 4; warp 0 loads first, the
                                    transposer role is warps 1-3), straight code, two ldmatrix in flight */
    unsigned lean;               /* FJ_LEAN_* (sm90.c): sm_90a consumer-loop trims, read from FAJIT_SM90_LEAN at
                                    planning for GPU A/B runs (unset: all on; "0": the kernels before them; other
                                    than all: the text says " sm90lean=...") */
    int fp8_p_early;             /* FP8: P packed before the wait that precedes its PV (fp8_ws.h FJ_FP8_P_EARLY); not in
                                    the rolled overlapped loop, where a PV is in flight then (sm90_roles.c) */
    int p_offset;                /* P = 2^(s * scale - m + p_offset): 8 lifts FP8's P into (0, 256], where e4m3 keeps
                                    3 significant bits down to 2^-6 x 2^-8 of the row max (FJ_FP8_KNOB_POFF); 0 else */
    unsigned fp8_knobs;          /* FJ_FP8_KNOB_* (fp8_ws.h): experiments read from FAJIT_FP8_KNOBS for GPU A/B runs
                                    (unset: fj_fp8_knobs_default; another set: the text says " fp8knobs=...") */
    /* FP8 K/V cache (kv8: cfg.kv_dtype e4m3 under f16 / bf16 queries; sm_80 path, sm80.c "FP8 K/V"): K and V
     * tiles are copied as e4m3 bytes into their own ring at kv8_off (stages x K and V tiles of block_n x head_dim
     * bytes, laid out by copying thread), and each thread widens what it copied into the one 16-bit K / V slot
     * between two barriers. kv8_tpr threads copy a row in 16-element chunks, kv8_rows_per_pass rows a pass
     * (copy_chunks_per_thread_row chunks each). fp8_off: the fj_fwd_params_fp8 block (descales) in the
     * parameters, after the others (kernel_abi.h); 0 when the kernel reads no descale. */
    int kv8, kv8_off, kv8_tpr, kv8_rows_per_pass;
    /* kv8 under bf16 queries with Q in registers: the MMAs run in f16 - Q converted once (x 2^a a warp, folded into
     * the softmax scale; kv8.c fj_kv8_q_to_f16), K / V widened to f16 (no multiply), P packed as f16 */
    int kv8_f16;
    /* kv8 with f16 MMAs, compiled for a target with cvt.rn.f16x2.e4m3x2 (fj_kv8_for_target: the runtime's device,
     * fagen cubin's --sm): K / V widen with one cvt a pair, exact (no 2^-8 unit), and arch is that target's row
     * (its .target and PTX ISA). fagen ptx / explain, with no target, show the integer widening. */
    int kv8_cvt;
    /* Programmatic dependent launch (fj_plan_for_target, where the target has griddepcontrol): a SPLIT kernel lets the
     * combine kernel launch as soon as its own CTAs have started (griddepcontrol.launch_dependents, first in the
     * body: generate.c); the COMBINE kernel waits for the split kernel's grid and its memory before it reads a
     * partial (griddepcontrol.wait: combine.c). The runtime launches the combine with the programmatic
     * serialization attribute only when its plan has this (decode.c); launched without it, wait returns at once. */
    int griddep;
    /* kv8 with decode variant KV8_DIRECT (kv8_frag.c): the e4m3 ring holds [rows][head_dim] swizzled tiles and the
     * MMA fragments are built from them in registers (ldmatrix of byte pairs + conversion); no 16-bit K / V tile */
    int kv8_direct;
    /* kv8direct: S = QK^T accumulated in this many independent chains (kv8_frag.c: even k-steps into S, odd ones into
     * a second set added at the end). 2 on the one-fragment decode tiles, where a warp's S tile is the critical path
     * between two KV tiles (one warp a scheduler: nothing else to issue while its MMAs wait on each other); else 1 */
    int qk_chains;
    int fp8_off;
    int bar_off, n_bars;         /* mbarriers, 8 B each (async.h): Q full[2], Q empty[2], then per stage K full,
                                    V full, K empty, V empty */
    int vtail_bar;               /* sm_90a SEQLENS / PAGED variants: offset of the V-tail mbarrier (the producer's
                                    own, after the others: a sequence's last, partial V tile lands there and is
                                    zero-filled past the length before V full), else 0 */
    /* warp-specialized paths: the roles (warps, register budgets) and the mbarrier rings between them, which the
     * frame (ws_frame.c) emits the setup, the dispatch and the register split from (roles.h; filled last, by the
     * backend's async->roles). Zero on the sm_80 path. */
    fj_role_table roles;
    /* sm_100a (sm100.c, sm100_roles.c): tensor memory columns (fp32 words of all 128 lanes) of S[0] and S[1] (block_n each,
     * the QK^T accumulators a KV tile alternates between), O (head_dim) and P[0], P[1] (block_n / 2 each: two 16-bit
     * values a column, the PV MMA's A operand), tmem_cols of them allocated; sm100_bar: the offset of the sm_100a
     * barriers after the Q / K / V ones (sm100.h lists them); tmem_slot, corr_off, stats_off: the allocated
     * address, the rows' rescale factors [2][block_m] and final (l, m) [2][2][block_m], fp32 */
    int tmem_s_col, tmem_o_col, tmem_p_col, tmem_cols;
    int sm100_bar, tmem_slot, corr_off, stats_off;
    int sched_off;               /* sm_90a LPT variant: offset of the work-tile slots (sched.c: FJ_SCHED_SLOTS u32, the
                                    producer's tile of each round for the consumers), else 0 */
    int lpt;                     /* 1: the persistent CTAs take their work tiles from the dynamic longest-first schedule
                                    (sched.c) instead of the static round-robin: the LPT variant (varlen), or a plain
                                    causal sm_90a plan under FAJIT_CAUSAL_SCHED=lpt (sm90.c plan_causal_sched) */
    unsigned variant;            /* FJ_VARIANT_* bits: decode features of this kernel (0 = the plain kernel) */
    unsigned variant_wanted;     /* the bits fj_plan_build_variant adds once the plan is built (variant is 0 until
                                    then), for the one default that depends on them: the FP8 knobs (fp8_ws.c) */
    int params_bytes;            /* size of the kernel's parameter block (kernel_abi.h) */
    int params_align;            /* its alignment: 8, or 64 when it carries tensor maps */
    int mods_off;                /* attention variants (cfg.mods): offset of the fj_fwd_params_mods block, after the
                                    kernel's own block (kernel_abi.h); 0 for a plain kernel */
} fj_plan;

/* Registers of one S accumulator set in the m16n8 C layout (four f32 per fragment): the sm_80 kernels' S, and the
 * count the FP8 K/V decode's second QK chain doubles (kernel_common.c, kv8_frag.c). */
static inline int fj_plan_acc_s_count(const fj_plan *p) { return 4 * p->m_frags * p->n_frags_s; }

/* Check cfg and derive its plan. On failure the thread's message says which rule failed. */
fajit_status fj_plan_build(const fajit_config *cfg, fj_plan *plan);

/* Decode variants of a kernel (fj_plan.variant; the runtime picks them from the forward's arguments):
 *   SEQLENS  per-sequence KV lengths read from fj_fwd_params_decode.seqlens_k
 *   SPLIT    the KV range of each row block split over gridDim.z / batch CTAs writing fp32 partials
 *   COMBINE  not a forward kernel: the combine kernel of the split partials (combine.c); of the config
 *            only dtype and head_dim count (the rest is zeroed), its PTX targets the sm_80 path
 *   PACK     GQA packing: a CTA takes the heads_q / heads_kv query heads of one KV head, their rows
 *            stacked in the M tile (packed row r = g x seqlen_q + i for query head hkv x group + g)
 *   PAGED    K/V in pages of a pool through a block table: each tile's address from its page's entry
 *            (sm_80: the page size a multiple of block_n; sm_90a: that, or block_n a multiple of the page
 *            size - the tile then comes as block_n / page_size TMA boxes, one per page)
 *   GATHER   with PAGED: a K/V tile gathered from 16-row segments, each from its own page's entry, so
 *            any page size that is a multiple of 16 takes the full block_n tile (sm_80 copies only)
 *   AHEAD    with PAGED and 2+ stages: each copy reads the next tile's page(s) from the block table into
 *            registers, so a tile's copies never wait on the block table (its first tile's excepted)
 * The sm_90a (warp-specialized) kernel takes SEQLENS, SPLIT, PACK and PAGED (sm90_roles.c); GATHER and AHEAD are
 * the sm_80 path's only (FAJIT_ERR_UNSUPPORTED on sm_90a). */
enum { FJ_VARIANT_SEQLENS = 1, FJ_VARIANT_SPLIT = 2, FJ_VARIANT_COMBINE = 4, FJ_VARIANT_PACK = 8, FJ_VARIANT_PAGED = 16,
       FJ_VARIANT_GATHER = 32, FJ_VARIANT_AHEAD = 64 };
/* Varlen (packed) batches (seqlen.c; bits 10-11, the attention variants take the bits between):
 *   VARLEN    queries packed by cu_seqlens_q: Q / O [total_q, Hq, D] (stride[0] not read), LSE [Hq, total_q];
 *             sequence b's rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]), its length clamped to [0, seqlen_q]
 *   VARLEN_K  with VARLEN: keys packed by cu_seqlens_k likewise (K / V [total_k, Hkv, D]); without it K / V stay
 *             batched by stride[0] (or paged) and SEQLENS gives the lengths
 * Both paths take them (no SPLIT, PACK, GATHER or AHEAD with VARLEN). */
enum { FJ_VARIANT_VARLEN = 1 << 10, FJ_VARIANT_VARLEN_K = 1 << 11 };
/* FP8 K/V cache widening (kv8.c; bits 12-13, kv_dtype e4m3 only): KV8_INT_K / KV8_INT_V widen K / V with the
 * integer ops (prmt, shl, and: f16 x 2^-8, the factor folded into the softmax scale / O's factor) even where the
 * target has cvt.rn.f16x2.e4m3x2 - a knob to time one against the other (the runtime: $FAJIT_KV8_WIDEN). */
enum { FJ_VARIANT_KV8_INT_K = 1 << 12, FJ_VARIANT_KV8_INT_V = 1 << 13 };
/* Varlen scheduling (sched.c; bit 14):
 *   LPT       with VARLEN, sm_90a only: the persistent CTAs take their work tiles from a global counter in a
 *             longest-first order per sequence (sched.c) instead of the static round-robin; the sm_80 kernel has
 *             no persistent loop (the hardware's block scheduler hands out its CTAs) and refuses it. */
enum { FJ_VARIANT_LPT = 1 << 14 };
/* KV8_DIRECT (kv8_frag.c; bit 15, kv_dtype e4m3, head_dim 64 / 128 / 256): the MMA fragments straight from the e4m3
 * tiles in shared memory - K by ldmatrix + conversion with Q's head dims permuted to match, V by ldmatrix.trans + prmt
 * into even-d and odd-d MMAs, O's columns un-permuted by the store - instead of widening each tile into a 16-bit
 * tile first (the runtime: $FAJIT_KV8_DIRECT=1). Takes the widening bits too (cvt or integer, per tensor). */
enum { FJ_VARIANT_KV8_DIRECT = 1 << 15 };
fajit_status fj_plan_build_variant(const fajit_config *cfg, unsigned variant, fj_plan *plan);
/* Paged K/V on the sm_90a kernel (sm90_roles.c): 1 when a K/V tile of block_n rows is one TMA box inside a page
 * (block_n divides page_size) or block_n / page_size whole-page boxes (page_size divides block_n), a box of at
 * most 256 rows; 1 for page_size 0 (not paged). The runtime lowers block_n until it fits (decode.c). */
int fj_ws_page_fits(int page_size, int block_n);
/* The canonical text of a plan's kernel: fajit_config_format of its config, then " seqlens", " split"
 * for the variants, then the words of environment knobs that gave the plan other code than their defaults
 * (fj_backend.env_words: sm_90a's " sm90lean=none", " kvorder=desc", " fp8knobs=vt,regs"); "sm_80 bf16 d128
 * combine" for the combine kernel. The kernel caches' key (memory, prebuilt, disk), so a kernel made under one
 * setting is never served under another, and a plan of the defaults keeps the text it always had. */
int fj_plan_format(const fj_plan *plan, char *buf, size_t size);
/* The .entry name of the plan's kernel (FJ_FWD_KERNEL_NAME, or FJ_COMBINE_KERNEL_NAME). */
const char *fj_plan_entry(const fj_plan *plan);

/* An FP8 K/V cache plan compiled for target (a device row): the cvt widening where the target has it (kv8_cvt). */
void fj_kv8_for_target(fj_plan *p, const fj_arch_info *target);
/* A plan compiled for target (a device row; the runtime's device, fagen cubin's --sm): fj_kv8_for_target, and for
 * the split and combine kernels programmatic dependent launch where the target has it (griddep; the sm_80 path's
 * PTX then takes the target's row as its .target, as kv8_cvt does). NULL target: the plan as built. */
void fj_plan_for_target(fj_plan *p, const fj_arch_info *target);

/* Fill the smem map of p (row_bytes, q/k/v offsets, kv_tile_bytes, smem_bytes) from p->cfg, unchecked
 * (the config's arch path decides the layout; an unknown path leaves smem_bytes 0). The one place the
 * layout is defined; the heuristic sizes configs with it too. */
void fj_plan_smem_map(fj_plan *p);
/* The smem a CTA of the plan may use: the arch path's most, or with min_ctas 2 half of an sm_90 SM's
 * (FJ_SM90_SMEM_PER_SM) less the 1 KiB the hardware keeps for each CTA. */
#define FJ_SM90_SMEM_PER_SM 233472
int fj_plan_smem_limit(const fj_plan *p);
/* The CTAs an SM the plan is built for: plan.min_ctas, 1 when 0. */
static inline int fj_plan_ctas_per_sm(const fj_plan *p) { return p->min_ctas > 1 ? p->min_ctas : 1; }

/* Fill the zero fields of dst from src (the tile and schedule fields; arch, dtype, head_dim, causal are
 * left alone). The one place a partial config is completed from another (tuned winners, fagen flags). */
void fj_config_overlay(fajit_config *dst, const fajit_config *src);
/* The variant words that end a canonical config text (" win cap sink alibi chunk", any subset in that order;
 * "" = 0) as FAJIT_MOD_* bits; -1 when a word is unknown, repeated or out of order. */
int fj_config_parse_mods(const char *text, int *mods);
/* K/V's and O's dtype of a config (kv_dtype / out_dtype, 0 = the default: dtype; O of an E4M3 config BF16). */
fajit_dtype fj_config_kv_dtype(const fajit_config *c);
/* Whether c's work tiles can take the lpt schedule (config sched = 1, FAJIT_CAUSAL_SCHED=lpt): causal, BF16 / F16 Q
 * and K/V, no window or chunk (whose tiles cost alike). The heuristic's rule and the sm_90a plan's share it. */
int fj_config_lpt_can(const fajit_config *c);
/* The cross-tile tail for a filled sm_90a config whose cross_tile is 0: set to 1 when c plans with it, else left 0.
 * Returns 1 when set. (The heuristic's shape rule: fj_config_heuristic; a short window's: forward.c.) */
int fj_config_try_cross_tile(fajit_config *c);
fajit_dtype fj_config_out_dtype(const fajit_config *c);
/* The canonical text's dtype word ("bf16", "e4m3,o=f16", "bf16,kv=e4m3") into c's dtype, kv_dtype, out_dtype
 * (0 where the word has no part for it). 0, or -1 when the word is not in that form. */
int fj_config_parse_dtype(const char *word, fajit_config *c);
/* 1 when two configs describe the same kernel: every field equal once the "pick" zeros a check reads
 * as defaults are read so (col_warps 0 = 1, overlap / pingpong 0 = off). */
int fj_config_same(const fajit_config *a, const fajit_config *b);

/* The heuristic (config.c): fill the zero fields of cfg for its arch path (AUTO must be resolved by the
 * caller) and shape (may be NULL), then shrink stages / block_n (the fields the caller left 0 in `given`)
 * until the smem map fits smem_limit bytes (0 = the path's own limit). Pure: no device, no tune file. */
void fj_config_heuristic(fajit_config *cfg, const fajit_config *given, const fajit_shape *shape, int smem_limit);

/* An FP8 K/V cache's decode tile (the sm_80 heuristic's for kv_dtype e4m3): the query rows a KV head's CTA holds -
 * the GQA group x seqlen_q when the runtime packs (heads_q > heads_kv, seqlen_q <= 128), else seqlen_q; 0 without a
 * shape. A row block of 16 rows (br16 w2 cw2: one 16-row fragment, a warp pair splitting the keys) for <= 16 rows,
 * br32 w4 cw2 for <= 32, both bc64 s3: the table's br64 w4 ran 4 warps of which 3 held no row of Nq 1 decode, each
 * reading or converting the whole K / V tile again (H100, fagen bench --grid decode --seqlen 1, D128: 0.55-0.59x of
 * BF16 decode with kv8direct against 0.79-0.82x for br64 bc64 s4 w4; bench/results/h100-session5-2026-11-27.md, the
 * FP8 K/V decode tile table).
 * fj_config_kv8_decode_tile fills block_m, warps, col_warps and (where 0) block_n and stages when c's K/V are e4m3,
 * the rows are 1..32, the caller left block_m, warps and col_warps 0 and the tile plans (not d256 causal: 266
 * registers a thread at 2 warps); 1 when it did, else 0 (c untouched: the table's tile). */
long long fj_config_kv8_decode_rows(const fajit_shape *shape);
int fj_config_kv8_decode_tile(fajit_config *c, const fajit_shape *shape);

/* The next smaller block_n the heuristic tries: half, a multiple of 16, at least 16. */
int fj_block_n_half(int block_n);

/* Whether the plan's PTX may be compiled for `target` without spilling (plan->min_target_sm): FAJIT_OK,
 * or FAJIT_ERR_UNSUPPORTED with the arithmetic. Which targets a code path's PTX assembles for at all is
 * the runtime's fj_compile_check_target. */
fajit_status fj_plan_check_target(const fj_plan *plan, const fj_arch_info *target);

/* fajit_explain of a variant's plan (fagen explain --varlen / --variant); variant 0 = fajit_explain. */
fajit_status fj_explain_variant(const fajit_config *cfg, unsigned variant, char **text_out);

/* Generate the PTX of a plan. *out is malloc'd (fajit_free / free). */
fajit_status fj_generate_ptx_plan(const fj_plan *plan, int verbosity, char **out, size_t *len);

/* The plan in words: appended to a text buffer (see emit.h). Used by fagen explain and by the -v 2
 * header, where every line is prefixed with "// ". */
struct fj_buf;
void fj_plan_describe(const fj_plan *plan, struct fj_buf *out, const char *line_prefix);

#endif
