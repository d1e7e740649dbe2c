/*
 * ws_frame.h - the warp-specialized frame (ws_frame.c): what every warp-specialized kernel has around its roles,
 * emitted from the plan's role table (roles.h), and the helpers the arch's role bodies build on.
 *
 * fj_emit_fwd_ws_kernel (backend.h) emits, for a plan whose backend has the async protocol:
 *   setup       thread geometry, the smem base; thread 0 initializes every ring's barriers; a CTA barrier
 *   dispatch    warps go to their register group by warpgroup, then to their role by warp
 *   registers   setmaxnreg.dec / .inc per group (roles.h: regs, regs_how)
 *   role bodies backend->async->role_body(k, loop, role), one per role, in table order
 * and offers the role bodies the persistent tile schedule (a CTA's work tiles, their decode, the varlen skip, or the
 * dynamic longest-first schedule of varlen batches, sched.c),
 * the Q buffers' barriers and the K/V ring's stage dispatch, phase flips and releases - unrolled (a body per stage,
 * barriers as immediates) or rolled (one body, the stage in a register).
 */
#ifndef FJ_WS_FRAME_H
#define FJ_WS_FRAME_H

#include "backend.h"
#include "roles.h"

#define FJ_MAX_STAGES 4

/* A role's loop state besides the kctx registers (the frame allocates them; each role sets what it uses). */
typedef struct fj_ws_loop {
    fj_reg_t ring;      /* u32: the stage the next KV tile goes to (0 .. stages - 1) */
    fj_reg_t tile;      /* u32: the current work tile, 0 .. n_tiles - 1 */
    fj_reg_t round;     /* u32: how many work tiles this CTA has started before this one */
    fj_reg_t n_end, mask_from; /* s32: KV tiles of the work tile, first one that needs a mask */
    fj_reg_t qbar;      /* u32: smem + 8 * (Q buffer index): its Q full / Q empty barriers */
    fj_reg_t qpar;      /* u32: parity of this use of the Q buffer */
    fj_reg_t last;      /* pred: this is the CTA's last work tile */
    fj_reg_t vtail_par; /* u32, producer, plan.vtail_bar: parity of the V-tail barrier's next phase */
    fj_reg_t pg_idx, pg_ent; /* u32, producer, PAGED: a page index of the work tile's sequence (~0: none) and its
                                block-table entry, read a tile ahead (producer_page_ahead) */
    fj_reg_t sched, sched_next; /* u32, VARLEN: the schedule round of the work tile (round counts the tiles run, which
                                   skip those past their sequence's end); ping-pong consumers: the next one's;
                                   LPT, the producer: sched_next = the next tile's index, fetched a tile ahead */
    fj_reg_t group_pred; /* pred: allocated by the frame for a register group of several roles (its branch by warp);
                            the group's first role takes it as its first scratch predicate */
    int has_group_pred;
    char stage_label[FJ_MAX_STAGES][48]; /* entry of the loop body for each stage */
    char next_tile[48]; /* where a work tile's loop leaves */
} fj_ws_loop;

/* ---- the tile schedule ---------------------------------------------------------------------------------------- */
/* What fj_ws_decode_tile computes: the query block (m0), the KV range and the Q buffer; the head, batch and KV head.
 * What a role's loop head needs besides (fj_ws_tile_loop_head's `what`): TILE_PRODUCER, the role that loads Q takes
 * the tiles from the schedule and hands them to the others (a dynamic schedule's source); TILE_LAST, l->last: the
 * role must know whether a tile is the CTA's last (ping-pong consumers; a static schedule only). */
enum { FJ_WS_DECODE_ROWS = 1, FJ_WS_DECODE_HEADS = 2, FJ_WS_TILE_PRODUCER = 4, FJ_WS_TILE_LAST = 8 };
/* dst = this CTA's work tile in round `round` (persistent: tile = round x G + cta, causal odd rounds backwards). */
void fj_ws_tile_of_round(fj_kctx *k, fj_reg_t dst, fj_reg_t round);
/* Decode l->tile into k->m0, the KV range [kv_first,) n_end / mask_from and the Q buffer (ROWS), and k->h, b, hkv
 * (HEADS); the split with SPLIT, the sequence's lengths with SEQLENS / VARLEN. */
void fj_ws_decode_tile(fj_kctx *k, fj_ws_loop *l, int what);
/* The tile loop's head: label `top`, the next work tile (varlen: skipping those past their sequence's end), `exit`
 * when there is none, then fj_ws_decode_tile(what). */
void fj_ws_tile_loop_head(fj_kctx *k, fj_ws_loop *l, const char *top, int what, const char *exit);
/* The same, `top` NULL for no label: the tile of round l->round (lpt: its Q waited for) into l->tile and its decode,
 * or a branch to `exit` when there is none (also the cross-tile overlap's look at the next work tile). waited (NULL:
 * none): a label after lpt's wait for the round's Q, for a role that waited for it already. */
void fj_ws_round_tile(fj_kctx *k, fj_ws_loop *l, const char *top, int what, const char *exit, const char *waited);
/* The schedule's state before the first loop head (the varlen round; LPT, TILE_PRODUCER: the first tile's fetch). */
void fj_ws_sched_start(fj_kctx *k, fj_ws_loop *l, int what);
/* After the loop (its `exit`: the same as the loop head's): LPT, TILE_PRODUCER: no tile left, so the other roles are
 * told (their Q full completes with the slot FJ_SCHED_NONE), then `exit`. Nothing for a static schedule. */
void fj_ws_tile_loop_end(fj_kctx *k, fj_ws_loop *l, int what, const char *exit);
/* 1: every role computes the CTA's tiles itself (round-robin; varlen skips); 0: the dynamic LPT schedule (sched.c),
 * where which tile is a CTA's last is known only when the producer finds none (l->last stays 0). */
int fj_ws_sched_static(const fj_plan *p);
/* TILE_PRODUCER, after its Q empty wait and before its Q full arrive: hand l->tile to the other roles (LPT). */
void fj_ws_publish_tile(fj_kctx *k, fj_ws_loop *l);
/* The other roles: wait for the work tile's Q full (LPT: nothing, the loop head waited to read the tile). */
void fj_ws_wait_q(fj_kctx *k, fj_ws_loop *l);
/* l->tile = the current work tile again (not kept live across the KV loop). */
void fj_ws_tile_again(fj_kctx *k, fj_ws_loop *l);
/* pr = this CTA runs a work tile at all (t, l->n_end: scratch); LPT, not known before the producer takes one: pr = 1
 * and l->last = 0. */
void fj_ws_cta_has_tile(fj_kctx *k, fj_ws_loop *l, fj_reg_t t, fj_reg_t pr);
/* After a work tile: on to the next round. what: FJ_WS_TILE_LAST for ping-pong consumers (they took the next one's
 * schedule round ahead); FJ_WS_TILE_PRODUCER for the role that loads (LPT: it claims the next tile now, when this
 * tile's loads are all issued). */
void fj_ws_next_round(fj_kctx *k, fj_ws_loop *l, int what);
/* VARLEN: from schedule round `sched` on (in place), the next tile not past its sequence's end (or >= n). */
void fj_ws_varlen_skip(fj_kctx *k, fj_reg_t sched, fj_reg_t tile, fj_reg_t n);
/* The KV tile order (plan.kv_desc; ws_frame.c): j = the first tile walked (ascending 0 or kv_first, descending
 * n_end - 1); pr = j has left the range; j = the next tile walked; pr = j is not the last tile walked. */
void fj_ws_first_kv_tile(fj_kctx *k, const fj_ws_loop *l);
void fj_ws_kv_done(fj_kctx *k, const fj_ws_loop *l, fj_reg_t pr);
void fj_ws_kv_next(fj_kctx *k);
void fj_ws_kv_not_last(fj_kctx *k, const fj_ws_loop *l, fj_reg_t t, fj_reg_t pr);
/* dst = smem + the barriers of Q buffer (round % q_bufs) (Q full / Q empty add their offsets). */
void fj_ws_q_barriers(fj_kctx *k, fj_reg_t round, fj_reg_t dst);

/* ---- the K/V ring, unrolled: a loop body per stage, the stage's barriers as immediates ------------------------- */
/* Jump to the body of stage l->ring (where the last work tile left the ring). */
void fj_ws_ring_dispatch(fj_kctx *k, fj_ws_loop *l, char labels[][48]);
/* At the end of stage s's body: fall through to s + 1, or after the last stage flip the phase and go to 0. */
void fj_ws_ring_next_stage(fj_kctx *k, int s, char labels[][48]);
/* This warp is done with barrier `which` (async.h FJ_BAR_*) of stage s: lane 0 arrives on it. */
void fj_ws_release(fj_kctx *k, int which, int s);

/* ---- the K/V ring, rolled: one body, the stage in l->ring (plan.roll_stages) ------------------------------------ */
typedef struct fj_ws_ring_regs {
    fj_reg_t sp;            /* u32: the stage of tile j - 1 */
    fj_reg_t bar_s, bar_sp; /* u32: smem + the barrier block of stage s / sp */
} fj_ws_ring_regs;
fj_ws_ring_regs fj_ws_ring_regs_alloc(fj_kctx *k);
/* bar = smem + the barrier block of `stage`; desc = the stage's descriptor offset (u64). */
void fj_ws_ring_point(fj_kctx *k, fj_reg_t stage, fj_reg_t bar, fj_reg_t desc);
/* sp = s; s = s + 1, and after the last stage 0 with the barriers' next phase. */
void fj_ws_ring_advance(fj_kctx *k, fj_ws_loop *l, const fj_ws_ring_regs *rr);

/* ---- a stage of the K/V ring as a step of a role body addresses it, unrolled or rolled -------------------------- */
typedef struct fj_ws_stage {
    int slot;     /* >= 0: that stage (barriers and descriptors by immediates); FJ_SLOT_RING: the stage in registers */
    fj_reg_t bar; /* FJ_SLOT_RING: smem + the stage's barrier block (fj_ws_ring_point; descriptors in k->ring_desc_*) */
} fj_ws_stage;
fj_ws_stage fj_ws_stage_imm(int s);
fj_ws_stage fj_ws_stage_ring(fj_reg_t bar);
/* Wait for barrier `which` (async.h FJ_BAR_*) of the stage to complete phase `parity`. */
void fj_ws_stage_wait(fj_kctx *k, fj_ws_stage st, int which, fj_reg_t parity);
/* This warp is done with barrier `which` of the stage: lane 0 arrives on it. */
void fj_ws_stage_release(fj_kctx *k, fj_ws_stage st, int which);

#endif
