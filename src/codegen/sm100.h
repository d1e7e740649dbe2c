/*
 * sm100.h - the sm_100a path's roles and its barriers beside the Q / K / V ones of async.h. sm100.c plans them and
 * fills the role table (roles.h, plan.roles) that the warp-specialized frame (ws_frame.c) emits the setup, dispatch,
 * register split, tensor memory allocation and teardown from; sm100_roles.c has the role bodies.
 *
 *   warps 0-3   softmax      thread t owns query row t: S row from tensor memory (tcgen05.ld), P back (tcgen05.st)
 *   warps 4-7   correction   thread t rescales O's row t in tensor memory when its max moved; then the epilogue:
 *                            O x 1/l, O and LSE to global memory
 *   warp 8      MMA          one thread issues every tcgen05.mma and tcgen05.commit; the warp allocates tensor memory
 *   warps 9-11  load         one thread issues the TMA loads of Q, K, V; warps 10-11 complete warpgroup 2
 *                            (setmaxnreg acts per warpgroup) and leave
 * With two query tiles in flight (pingpong) the softmax is two warpgroups, the rest moves up one warpgroup (below).
 * Registers (setmaxnreg; 384 threads start at 168): the softmax warpgroup takes FJ_SM100_REGS_SOFTMAX (its row of S,
 * the mask and the exponentials), the correction keeps 168, warpgroup 2 gives back to FJ_SM100_REGS_OTHER:
 * 128 x (232 + 168 + 104) = 64512 of 65536.
 * Each role of the two warpgroups reaches its rows' tensor memory lanes (warp w % 4: lanes 32 (w % 4) ..), which is
 * why the softmax and the correction are whole, aligned warpgroups.
 */
#ifndef FJ_SM100_H
#define FJ_SM100_H

#include "backend.h"

enum {
    FJ_SM100_WARP_SOFTMAX = 0, /* 4 warps */
    FJ_SM100_WARP_CORR = 4,    /* 4 warps */
    FJ_SM100_WARP_MMA = 8,
    FJ_SM100_WARP_LOAD = 9,    /* 3 warps: one thread loads */
    FJ_SM100_WARPS = 12
};
enum { FJ_SM100_REGS_SOFTMAX = 232, FJ_SM100_REGS_START = 168, FJ_SM100_REGS_OTHER = 104 };
/* Two query tiles in flight (config pingpong = 1, plan.pingpong; FlashAttention-4's ping-pong): a work tile of 256 rows,
 * two softmax warpgroups (warps 0-7, role instances: warpgroup i owns query tile i, rows 128 i ..), the correction
 * warpgroup (warps 8-11) for both tiles, the MMA warp 12, the load warps 13-15; 512 threads start at 128 registers:
 * 128 x (2 x 184 + 96 + 48) = 65536. */
enum { FJ_SM100_PP_WARP_CORR = 8, FJ_SM100_PP_WARP_MMA = 12, FJ_SM100_PP_WARP_LOAD = 13, FJ_SM100_PP_WARPS = 16 };
enum { FJ_SM100_PP_REGS_SOFTMAX = 184, FJ_SM100_PP_REGS_CORR = 96, FJ_SM100_PP_REGS_OTHER = 48 };
#define FJ_SM100_TILE_ROWS 128 /* rows of a query tile: one M = 128 tcgen05.mma, a row a lane of tensor memory */
static inline int fj_sm100_warp_corr(const fj_plan *p) { return p->pingpong ? FJ_SM100_PP_WARP_CORR : FJ_SM100_WARP_CORR; }
static inline int fj_sm100_warp_mma(const fj_plan *p) { return p->pingpong ? FJ_SM100_PP_WARP_MMA : FJ_SM100_WARP_MMA; }
static inline int fj_sm100_warp_load(const fj_plan *p) { return p->pingpong ? FJ_SM100_PP_WARP_LOAD : FJ_SM100_WARP_LOAD; }
/* Query tiles in flight per CTA: 1, or 2 with the ping-pong. */
static inline int fj_sm100_tiles(const fj_plan *p) { return p->pingpong ? 2 : 1; }
/* The roles' indices in plan.roles (sm100.c fj_sm100_roles), in the frame's order: by register group. */
enum { FJ_SM100_ROLE_SOFTMAX = 0, FJ_SM100_ROLE_CORR, FJ_SM100_ROLE_MMA, FJ_SM100_ROLE_LOAD, FJ_SM100_ROLES };
/* The named barrier of the tensor memory teardown (roles.h tmem_bar). */
#define FJ_SM100_TEARDOWN_BAR 1

/* The sm_100a barriers after async.h's Q full[2], Q empty[2] and per-stage K / V full / empty, 8 bytes each, at
 * plan.sm100_bar + 8 x index (counts: arrivals that complete a phase). Each is a ring of the role table. */
enum fj_sm100_bar {
    FJ_SB_S_FULL = 0,      /* [2] 1: tcgen05.commit after S[b] = Q K^T; the softmax waits */
    FJ_SB_P_FULL = 2,      /* [2] 4: lane 0 of each softmax warp, P[b] stored; the MMA waits before O += P V */
    FJ_SB_O_READY = 4,     /* [2] 4: lane 0 of each correction warp, O rescaled for O += P[b] V; the MMA waits */
    FJ_SB_CORR_FULL = 6,   /* [2] 4: softmax warps, the rows' factors in corr[b] */
    FJ_SB_O_FULL = 8,      /* [tiles] 1: tcgen05.commit after each O += P V; the correction and the epilogue wait */
    FJ_SB_O_FREE = 10,     /* [tiles] 4: correction warps, once the epilogue has read O; the MMA waits before a work
                              tile's first PV */
    FJ_SB_STATS_FULL = 12, /* [2] 4: softmax warps, a work tile's l and m in stats[b] */
    FJ_SB_COUNT = 14
};
/* Which of the [2] barriers and buffers a KV tile uses: one query tile: b = it % 2 (S, P and the factors double
 * buffered; the parity of its use (it / 2) & 1; the stats b = round % 2, parity (round / 2) & 1); two query tiles:
 * b = the query tile (each tile's S and P single-buffered; parity it & 1; stats parity round & 1). it: the CTA's KV
 * tiles so far; round: its work tiles. */

extern const fj_backend fj_backend_sm100;

/* The config fields the heuristic leaves to the path (config.c): 128-row tile, 10 warps, block_n and stages
 * by head dim. */
void fj_sm100_fill(fajit_config *c);

/* The layouts the kernel uses, as data (sm100_roles.c emits them; tests/test_tmem_layout.c interprets them):
 *   k-step ks of S = Q K^T: the A (Q) and B (K) descriptors' start, bytes past the Q tile / the K tile
 *   k-step ks of O += P V: P's first tensor memory column past P[b]'s, V's descriptor start past the V tile
 *   lane base of warp w's tcgen05.ld / st (rows 32 (w % 4) ..: the warp's own quarter, 9.7.16.8.1)
 *   S value i of a row is P element i: P[b] column i / 2, low half for even i (two 16-bit values a 32-bit column) */
void fj_sm100_qk_step(const fj_plan *p, int ks, int *q_off, int *k_off);
void fj_sm100_pv_step(const fj_plan *p, int ks, int *p_col, int *v_off);
static inline int fj_sm100_lane_base(int warp) { return 32 * (warp % 4); }
/* Two query tiles (pingpong): query tile `tile`'s rows start tile x 128 rows into each Q box (the A descriptors add
 * this), its O is O[tile] at this column; one query tile: tile 0. */
static inline int fj_sm100_q_tile_off(const fj_plan *p, int tile) { return tile * FJ_SM100_TILE_ROWS * p->cfg.swizzle; }
static inline int fj_sm100_o_col(const fj_plan *p, int tile) { return p->tmem_o_col + tile * p->cfg.head_dim; }
/* LBO / SBO of the Q and K descriptors (K-major) and of V's (N-major). */
void fj_sm100_desc_strides(const fj_plan *p, int v, int *lbo, int *sbo);

/* The role table (roles.h) of an sm_100a plan, and the role bodies (sm100_roles.c) the frame emits from it. */
struct fj_ws_loop;
void fj_sm100_roles(fj_plan *p);
void fj_sm100_role_body(fj_kctx *k, struct fj_ws_loop *l, const fj_role *r);

#endif
