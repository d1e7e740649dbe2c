/*
 * fp8_ws.h - the FP8 (e4m3) parts of the sm_90a warp-specialized kernel (fp8_ws.c): plan rules and smem map, the
 * V transpose of the producer's warps, P's A fragments, the descales.
 */
#ifndef FJ_FP8_WS_H
#define FJ_FP8_WS_H

#include "backend.h"

/* Knobs of the FP8 kernel (issue 22), one bit each. The default set depends on the head dim (fj_fp8_knobs_default);
 * the environment variable FAJIT_FP8_KNOBS (a comma list of the words below; "all" = every one; set but empty = none)
 * replaces it for GPU A/B runs. They change the generated PTX, and a set other than the default names itself in the
 * plan's text (" fp8knobs=...", fj_fp8_knobs_words), which the kernel caches key on (bench/fp8_ab2.sh). A setting
 * without regs takes the heuristic back to D256's earlier tiles (config.c drops the overlap 232 registers do not
 * hold): FAJIT_FP8_KNOBS=vt is the default before 2026-11-27 at every head dim.
 *   regs  FlashAttention-3's register splits: with 2 consumer warpgroups the producer warpgroup (loader and
 *         transposers) keeps 24 registers and the consumers get 240 (not 40 / 232), with 3: 32 / 160 (not 40 / 152);
 *         the register model then admits D256 bc128 with the overlap and D128 bc224 (FA3's FP8 tiles). Before
 *         2026-11-27 it split 32 / 240, past the 384-thread CTA's pool (384 x 168): the consumers hung (sm90.c)
 *   vt    the V transpose two blocks a branch (not one): two ldmatrix in flight before the first's prmt / stmatrix
 *   ostage  where no O staging buffer fits (D256 bc128 and wider), O is staged in the V ring (plan.o_stage 2) for a
 *         TMA store, as FlashAttention-3 does, instead of st.global from registers
 *   vt4   the V transpose on all 4 producer warps as straight code (FlashAttention-3's form; plan.fp8_vt4): warp 0's
 *         lane 0 issues K(j + 1) and V(j + 1) (a tile ahead, as FA3 loads K, so neither waits for this warp's
 *         transpose), then the whole warp joins warps 1-3 on V(j); each warp owns a fixed
 *         quarter of the blocks (2 x 2 over keys x head dims, the warp's offsets folded into its lane terms), no
 *         branch, the next block's ldmatrix issued before this block's prmt / stmatrix. Replaces vt's form.
 *   poff  P = 2^(s x scale - (m - 8)), in (0, 256] instead of (0, 1] (plan.p_offset; FlashAttention-3's FP8 softmax
 *         subtracts the same 8): e4m3's normal range starts at 2^-6, so P below 2^-6 of the row max lost bits and
 *         below 2^-9 became 0; shifted, they keep 3 significant bits down to 2^-14. O and l carry the same 2^8 and
 *         it cancels in O / l; the LSE takes the 8 back off.
 * An unknown word is an error (FAJIT_ERR_INVALID_ARGUMENT from the plan and from fajit_context_create: fajit_errmsg
 * names it). */
#define FJ_FP8_KNOB_REGS 1u
#define FJ_FP8_KNOB_VT 2u
#define FJ_FP8_KNOB_OSTAGE 4u
#define FJ_FP8_KNOB_VT4 8u
#define FJ_FP8_KNOB_POFF 16u
/*   occ2  two CTAs an SM (plan.min_ctas 2) for a one-consumer tile (block_m 64, warps 8): .minnctapersm 2 (a 128-register
 *         launch), producer 40 / consumers 216 by setmaxnreg, smem within half an SM's (a decode tile: bc96 s2, bc64
 *         s3, bc128 s2 without an O buffer), the persistent grid twice the SMs - the consumer warps of two CTAs take
 *         turns on each scheduler. Head dims 64 and 128. */
#define FJ_FP8_KNOB_OCC2 32u
/* FJ_FP8_OCC2_DECODE 1 (the default): occ2 is in the default set of a one-consumer tile (block_m 64, the heuristic's
 * FP8 decode tile, config.c) at head dim 64 / 128 that fits it. H200, session 20, bench/kv8_compare.py, two machines, three runs
 * (bench/results/h200-session20-2026-11-29.md): br64 bc64 s3 with occ2 against br64 bc192 s2 without it, the decode
 * rows' e4m3-Q times 32k -1.1 / -2.0%, 128k -2.7 / -3.5%, B8 8k -0.5 / -1.9%, B64 2k -3.2 / -6.8 / -11%, 512k +1.4 /
 * +1.6%. 0: one CTA an SM (br64 bc192 s2). */
#ifndef FJ_FP8_OCC2_DECODE
#define FJ_FP8_OCC2_DECODE 1
#endif
/* FJ_FP8_REGS_WIDE 1 (the default): regs joins the default set of a tile wider than 40 producer registers leave the
 * consumers room for - head dim 64 on three consumer warpgroups past block_n 128 (32 / 160), head dim 128 on two past
 * block_n 192 (24 / 240, the lean vt4 form; the three-warp vt form where seqlens_k / paged K/V need the V-tail fill) -
 * in a kernel without a window or chunk. The heuristic's D64 tile is then br192 bc160 (config.c), FlashAttention-3's:
 * H200, session 21, bench/fp8_compare.py --configs, each against br192 bc128 in the same rounds (TFLOP/s, N4k / N16k),
 * two machines: non-causal 607 / 668 against 593 / 644 and 607 / 668 against 599 / 652, causal 514 / 613 against
 * 510 / 592 and 519 / 617 against 513 / 598. D128 keeps bc192: FA3's bc224 under regs read 847 / 872 against bc192
 * under regs 813 / 863 on one machine, but 821 / 859 against bc192 with its own 40 / 232 split 845 / 865 on another
 * (non-causal; causal 720 / 841 against 737 / 850). 0: the earlier D64 tile and knobs. */
#ifndef FJ_FP8_REGS_WIDE
#define FJ_FP8_REGS_WIDE 1
#endif
/* The knobs of a head_dim kernel when FAJIT_FP8_KNOBS is unset: vt everywhere (H100 A/B of 2026-11-26: +1-13%,
 * bench/results/h100-session3-ab-2026-11-26.md); regs and ostage too at head dim 256, where they let the heuristic
 * take FlashAttention-3's tiles (bc128 with the overlap, O staged in the V ring: H100, bench/fp8_ab2.sh, 2026-11-27,
 * +8-16% over br128 bc128 without the overlap). At D64 / D128 regs measured 0.96-1.00x, so they keep 40 / 232. */
/* FJ_FP8_D256_FA3 1 (the default): D256 takes regs and ostage (FlashAttention-3's tile set, with the heuristic's ov /
 * pp): +7% on an H200 and +8-16% on an H100 (bench/results/h100-session5-2026-11-27.md). Its numerics ran on an H100
 * (tests/test_gpu_fp8 of a -DFJ_FP8_D256_FA3=1 build, 2026-11-27, bench/results/h100-session6-2026-11-27.md): every
 * D256 case within its bound, the same as the earlier tile's. 0 gives the earlier vt tile back at D256 (so does
 * FAJIT_FP8_KNOBS=vt per process). */
#ifndef FJ_FP8_D256_FA3
#define FJ_FP8_D256_FA3 1
#endif
/* FJ_FP8_VT4_D128 1 (the default): vt4 joins the default set at head dim 128. H100 (2026-11-27, bench/fp8_ab2.sh
 * VARIANTS="base vt4", bench/results/h100-session6-2026-11-27.md): D128 N4k / N16k 1.011 / 1.011, causal 1.037 / 1.029;
 * D64 0.993-0.999 (so not there); tests/test_gpu_fp8 with FAJIT_FP8_KNOBS=vt4: the same cases pass as without it.
 * D256 keeps regs,vt (24 producer registers; regs,vt4 takes the lean form there, fj_fp8_vt4_lean, not GPU-run).
 * FJ_FP8_VT4 1: at every head dim (a build knob for A/B runs). */
#ifndef FJ_FP8_VT4_D128
#define FJ_FP8_VT4_D128 1
#endif
#ifndef FJ_FP8_VT4
#define FJ_FP8_VT4 0
#endif
/* FJ_FP8_VT4_D256 1 (the default, with FJ_FP8_D256_FA3): head dim 256 takes regs, vt4, ostage (and poff): FA3's tile
 * and register split with the four-warp transpose in its lean form (fj_fp8_vt4_lean: 0 spills at 24 registers). H100
 * (2026-11-27, bench/fp8_ab2.sh VARIANTS="base v4lean", bench/results/h100-session7-2026-11-27.md): N4k 1.01x, causal
 * 1.13x, N16k 1.15x, causal 1.07x the three-warp vt; tests/test_gpu_fp8 under FAJIT_FP8_KNOBS=regs,vt4,ostage,poff
 * 13 of 13. 0: regs, vt, ostage (the default before). */
#ifndef FJ_FP8_VT4_D256
#define FJ_FP8_VT4_D256 1
#endif
/* FJ_FP8_POFF 1 (the default): poff is in every head dim's default set. H100 (2026-11-27, bench/fp8_compare.py, a
 * -DFJ_FP8_POFF=1 build against FA3 on the same e4m3 inputs, bench/results/h100-session7-2026-11-27.md): max error
 * 0.86-1.09x FA3's over the 12 cells (without: up to 1.18x), RMS 0.98-1.01x; speed unchanged (geomean 0.941 vs
 * 0.940); tests/test_gpu_fp8 13 of 13. 0: P in (0, 1] as before. */
#ifndef FJ_FP8_POFF
#define FJ_FP8_POFF 1
#endif
/* local: the config has a window or a chunk (a KV range that starts past key 0). At head dim 256 the lean vt4
 * producer (24 registers) then spills 12 bytes (ptxas 13.0: the range's registers), so those kernels keep
 * FlashAttention-3's register split with the three-warp transpose (regs, vt, ostage, poff), which holds it. */
unsigned fj_fp8_knobs_default(int head_dim, int local);
/* A plan's default set: fj_fp8_knobs_default, and occ2 on the one-consumer tile (block_m 64) at head dim 64 / 128 when
 * its smem fits two CTAs an SM (bc64 s3, bc96 s2, ...; bc192 s2 does not and runs one) and FJ_FP8_OCC2_DECODE is 1
 * (the default). */
unsigned fj_fp8_plan_knobs_default(const fj_plan *p);
/* *bits = the knobs FAJIT_FP8_KNOBS's value names (value NULL = unset: fj_fp8_knobs_default(head_dim, local); "none"
 * or set but empty: 0). Planning passes the variable; the runtime checks it when a context is made. */
fajit_status fj_fp8_knobs_parse(const char *value, int head_dim, int local, unsigned *bits);
/* " fp8knobs=..." when an FP8 plan's knobs are not its head dim's default, else "" (for sm_90a's env_words). */
int fj_fp8_knobs_words(const fj_plan *p, char *buf, size_t size);

/* Rules of an e4m3 config on sm_90a (block_n a multiple of 32, the swizzle span dividing a row of head_dim bytes,
 * no attention variant yet); sets plan.fp8. */
fajit_status fj_fp8_tiles(fj_plan *p);
/* The smem map: Q buffers, the K, V and Vt rings, O staging (16-bit) when it fits, the mbarriers. */
void fj_fp8_smem_map(fj_plan *p);

/* P (f32 S accumulators) -> e4m3 A fragments in fj_fp8_p_key's k order (fp8_layout.h). */
void fj_fp8_emit_pack_p(fj_kctx *k);
/* The same in two steps, for the overlapped loop (sm90_roles.c overlap_finish): _early packs P(j) into registers of
 * its own (returned) before the wait for PV(j-1), which still reads frag_p; _take moves them into frag_p after it.
 * Packed after the wait, ptxas 13.0 hoists the cvt above it into temporaries and joins each pair with PRMT 0x5410:
 * per KV tile 24 PRMT at D128 bc192, 16 at D64 / D256 bc128. Packed before it, each pair becomes F2FP +
 * F2FP.MERGE_C and the moves vanish (ptxas gives both the fragments' registers): 4-5% fewer consumer instructions a
 * tile. The serial loop packs before its wait for V(j) for the same reason. The same cvt on the same values: the
 * numerics cannot change. bench/results/fp8-p-convert-forms-2026-11-27.md has the forms tried. Measured on an H100
 * (2026-11-27, two rounds, bench/results/h100-session7-2026-11-27.md): slower at D64 (-13% N4k, -7% causal) and D128
 * (-4% / -1.5%), +1-4% at D256 non-causal, even at D256 causal, despite the 4-5% fewer instructions: so plan.fp8_p_early
 * is set at D256 only (FJ_FP8_P_EARLY_D256 1); FJ_FP8_P_EARLY 1 sets it at every head dim (a build knob for A/B runs).
 * The rolled loop (config roll = 1) never packs early: there ptxas 13.0 gave the early P the registers the PV in flight
 * read (session 24; test_sass_hazard); its speed packed after the wait, with the shipped knobs, is not measured yet. */
#ifndef FJ_FP8_P_EARLY
#define FJ_FP8_P_EARLY 0
#endif
#ifndef FJ_FP8_P_EARLY_D256
#define FJ_FP8_P_EARLY_D256 1
#endif
fj_reg_t fj_fp8_emit_pack_p_early(fj_kctx *k);
void fj_fp8_emit_pack_p_take(fj_kctx *k, fj_reg_t packed);

/* vt4 under FlashAttention-3's 24-register producer (knob regs, two consumer warpgroups; knob vt4): the lean form.
 * At 24 registers the plain vt4 form spilled 52-160 bytes (ptxas 13.0), its loop state, the block addresses ptxas
 * keeps in registers and two ldmatrix results plus the prmt outputs being more than fit. The lean form: each
 * direction's lane terms folded into one address (base + XOR = base | XOR: the base's bits below the swizzle span are
 * 0, fj_smem being 1024-aligned), so a block's address is one xor; warp 0, which also holds the loader's state, keeps
 * one ldmatrix in flight (warps 1-3 keep two); and the KV loop's exit sets the ring's stage past the loop instead of a
 * predicated mov in it (sm90_roles.c), which had kept the ring's register live through the loop. ptxas -v: 0 spills
 * at D256 bc128 (causal or not), D128 bc192 / bc224. */
int fj_fp8_vt4_lean(const fj_plan *p);

/* The transposing producer warps (1..plan.transpose_warps; with plan.fp8_vt4 0..3): per-lane address terms, set
 * once. */
typedef struct fj_fp8_lanes {
    fj_reg_t tw;                 /* u32: this warp among the transposing ones, 0.. */
    fj_reg_t ld_base, ld_x;      /* u32: smem + this lane's ldmatrix row term; its chunk XOR x 16 */
    fj_reg_t st_base, st_x;      /* u32: smem + this lane's stmatrix row term; its chunk XOR x 16 */
    int loader;                  /* set by the caller: 1 in warp 0's loop (vt4), which also issues the loads */
} fj_fp8_lanes;                  /* (plan.fp8_vt4: the warp's block offsets are in ld_* / st_* too; fj_fp8_vt4_lean:
                                    the XORs too, ld_x / st_x unused) */
void fj_fp8_emit_transpose_setup(fj_kctx *k, fj_fp8_lanes *ln);
/* V of stage s -> Vt of stage s, the blocks of 16 keys x 32 head dims shared round-robin by the warps. */
void fj_fp8_emit_transpose_tile(fj_kctx *k, const fj_fp8_lanes *ln, int s);

/* The work tile's descales (k->b, k->hkv set): k->score_scale = scale_log2 x q_descale x k_descale (the softmax's
 * scale), and in the epilogue k->o_scale = v_descale (O's factor beside 1/l). */
void fj_fp8_emit_score_scale(fj_kctx *k);
void fj_fp8_emit_o_scale(fj_kctx *k);

#endif
