/*
 * sm90.h - the sm_90a path's pieces that live outside sm90.c: its role table (sm90.c) and its role bodies
 * (sm90_roles.c), which the warp-specialized frame (ws_frame.c) runs through fj_backend_sm90.async.
 */
#ifndef FJ_SM90_H
#define FJ_SM90_H

#include "backend.h"

/* Fill plan.roles: the producer warpgroup (TMA loads; with FP8 its warps 1..transpose_warps transpose V, a role of
 * their own in the producer's register group), then the consumer warpgroups (S = QK^T, softmax, O += PV, epilogue: 64 query rows each), and the rings between them. */
void fj_sm90_roles(fj_plan *p);
/* The environment knobs of the sm_90a plan, parsed from their text (value: the variable's, NULL = unset); planning
 * reads the variables, and the runtime checks them when a context is made. FAJIT_ERR_INVALID_ARGUMENT on an unknown
 * word, naming the variable, the value and the accepted words.
 *   FAJIT_SM90_LEAN  plan.lean (FJ_LEAN_* bits, codegen.h): a comma list of wgu, all, none / 0; FJ_LEAN_ALL when unset
 *   FAJIT_KV_ORDER   plan.kv_desc's rule: asc, desc, auto (unset: auto)
 *   FAJIT_CAUSAL_SCHED  plan.lpt of a plain causal plan: static (unset) = 0, lpt = 1 */
enum { FJ_KV_ORDER_AUTO = -1, FJ_KV_ORDER_ASC = 0, FJ_KV_ORDER_DESC = 1 };
fajit_status fj_sm90_lean_parse(const char *value, unsigned *bits);
fajit_status fj_kv_order_parse(const char *value, int *order);
fajit_status fj_causal_sched_parse(const char *value, int *lpt);
/* The body of one sm_90a role (sm90_roles.c), by its kind: LOAD, TRANSPOSE or SOFTMAX. */
struct fj_ws_loop;
void fj_sm90_role_body(fj_kctx *k, struct fj_ws_loop *l, const struct fj_role *r);

/* FJ_FP8_ROLL_D128 1: e4m3 head dim 128 plain prefill (no attention or decode variant) takes the rolled loop when roll
 * = 0. 0 (the default): FP8 rolls only with roll = 1. On the H200 (session 24, bench/results/h200-session24-2026-11-29.md,
 * fp8_compare.py) roll = 1 ran 1.06x / 1.07x the default at D128 N 4k (non-causal / causal) and 1.00x / 1.03x at 16k in
 * two calls; but with this knob at 1 the package's default (config None) then timed like the unrolled kernel
 * (824 / 743 / 883 / 860 TFLOP/s), which the identical PTX does not explain (the default came from the prebuilt
 * blob, the roll text JIT-compiled: FAJIT_PREBUILT=0 separates the two); left off until a run does. */
#ifndef FJ_FP8_ROLL_D128
#define FJ_FP8_ROLL_D128 0
#endif

/* Whether the consumers' KV loop is rolled (plan.roll_stages) for p's config and wanted variant: roll = 1; or, roll
 * = 0, the default's choice: 16-bit kernels of 2+ stages without a decode variant (FJ_SM90_ROLL_DEFAULT), e4m3 head
 * dim 128 plain prefill with FJ_FP8_ROLL_D128. The FP8 smem map reads it for the Vt barriers' stride
 * (plan.vt_bar_stride), so the two always agree. */
int fj_sm90_rolled(const fj_plan *p);

/* The cross-tile overlap of the ping-pong consumers (the config's cross_tile = 1, text " xt"; the build knob
 * FJ_SM90_CROSS_TILE=1 turns it on for every plan that can take it, varlen under lpt included): a work tile's last PV
 * goes in together with the next work tile's first S = QK^T, in one ping-pong turn, and this tile's epilogue runs
 * while that S does (sm90_roles.c). For the rolled, overlapped ping-pong consumers of 16-bit kernels with their own
 * O staging buffer and no ALiBi; the plan refuses the config's 1 elsewhere (sm90.c cross_tile_missing). */
int fj_sm90_cross_tile(const fj_plan *p);

/* The producer's L2 prefetch of each work tile's first K and V tile (build knob FJ_SM90_KV_PREFETCH, 0 = off, the
 * kernels before): issued as soon as the tile's Q load is, so that their TMA loads, which wait for a free stage of
 * the ring, read the L2 instead of HBM at the tile boundary. 16-bit kernels, dense or varlen, not paged. Measured
 * on the H200 (bench/results/h200-session15-2026-11-28.md): level alone, no change under the cross-tile tail. */
int fj_sm90_kv_prefetch(const fj_plan *p);

/* Registers per thread ptxas gives a CTA of `threads` (.maxntid threads, .minnctapersm 1): 8-register steps under
 * 65536 / threads, at most 255. setmaxnreg moves registers inside that allocation (a per-CTA pool). */
int fj_sm90_launch_regs(int threads);
/* ... of `ctas` CTAs an SM (.minnctapersm ctas; plan.min_ctas) */
int fj_sm90_launch_regs_ctas(int threads, int ctas);
/* A consumer thread's accumulator registers, as the register model counts them (plan.reg_acc_o, reg_acc_s, reg_p with
 * the overlap): O head_dim / 2, S block_n / 2, P's A fragments block_n / 4 (16-bit) or / 8 (e4m3). */
int fj_sm90_acc_o_regs(const fajit_config *c);
int fj_sm90_acc_s_regs(const fajit_config *c);
int fj_sm90_p_regs(const fajit_config *c);
/* Whether a split (producer warpgroup at producer_regs, consumer_wgs warpgroups at consumer_regs) fits the pool;
 * one that does not leaves setmaxnreg.inc waiting forever. */
int fj_sm90_reg_pool_ok(int consumer_wgs, int producer_regs, int consumer_regs);

#endif
