/*
 * roles.h - a warp-specialized kernel's roles and pipelines as data: the role table of a plan (plan.roles).
 *
 * A warp-specialized kernel is a frame (ws_frame.c) plus this table. The table says which warps play which
 * role, what register budget each role's warpgroups take (setmaxnreg), and which pipelines - rings of
 * mbarriers in shared memory - each role fills and drains. The frame reads it to emit the barrier setup, the
 * role dispatch, the register reallocation; the arch's role bodies (sm_90a: sm90_roles.c; sm_100a: its own
 * file) emit what each role does per work tile. The arch's plan hook fills the table (sm90.c:
 * fj_sm90_roles); nothing here depends on an arch.
 *
 *   role   warps [first_warp, first_warp + warps), in `instances` equal parts (sm_90a: consumer warpgroups,
 *          each owning 64 rows of the work tile; sm_100a: the two softmax warpgroups of the ping-pong)
 *   group  consecutive roles sharing a register budget (setmaxnreg acts per warpgroup, so a group spans
 *          whole warpgroups): roles of one group are told apart by warp, groups by warpgroup
 *   ring   `slots` slots, each with one full and (when empty_count > 0) one empty barrier per part; a part
 *          is one buffer of the slot (the K/V ring: a K part and a V part) with its own producer and consumer
 *          role; phase u of a slot's barriers completes with its u-th use (the rule of async.h)
 *
 * The MMA completion is an event: FJ_MMA_EVENT_GROUP (sm_90a: wgmma groups, waited for by count) or
 * FJ_MMA_EVENT_MBARRIER (sm_100a: tcgen05.commit arrives on a ring's full barrier, which the next role waits on
 * like any other ring).
 */
#ifndef FJ_ROLES_H
#define FJ_ROLES_H

#define FJ_MAX_ROLES 8
#define FJ_MAX_RINGS 8
#define FJ_MAX_RING_PARTS 2

/* What a role does; the arch's role bodies are looked up by it (fj_async_proto.role_body). */
typedef enum fj_role_kind {
    FJ_ROLE_LOAD = 0,    /* TMA copies into the rings (one elected thread issues them) */
    FJ_ROLE_TRANSPOSE,   /* FP8 on sm_90a: producer warps that transpose V into the Vt ring */
    FJ_ROLE_MMA,         /* issues the tensor-core MMAs (sm_100a: one thread; on sm_90a the consumers do) */
    FJ_ROLE_SOFTMAX,     /* the online softmax of S (sm_90a: with the MMAs and the epilogue - the consumers) */
    FJ_ROLE_CORRECTION,  /* rescales O when a row maximum moved (sm_100a, O in tensor memory) */
    FJ_ROLE_EPILOGUE,    /* normalizes and stores O */
    FJ_ROLE_KINDS
} fj_role_kind;

/* How the MMA's completion is observed (fj_role_table.mma_event). */
enum { FJ_MMA_EVENT_GROUP = 0, FJ_MMA_EVENT_MBARRIER = 1 };

/* Register budget of a role's warpgroups: leave the launch's allocation, or setmaxnreg.dec / .inc to regs. */
enum { FJ_REGS_KEEP = 0, FJ_REGS_DEC = 1, FJ_REGS_INC = 2 };

typedef struct fj_role {
    const char *name;      /* "producer", "consumers", ...: comments, explain */
    int kind;              /* FJ_ROLE_* */
    int first_warp, warps; /* the warps [first_warp, first_warp + warps) of the CTA */
    int instances;         /* equal parts the warps form (their index: k->wg, from 0); 1 for most roles */
    int group;             /* register group (roles of a group are consecutive and share regs / regs_how) */
    int regs, regs_how;    /* setmaxnreg budget (registers per thread) and FJ_REGS_*; set on a group's first role */
    const char *label;     /* the role's entry label ("consumer" -> $L_consumer); NULL for the CTA's first role */
    const char *title;     /* banner of the role's code (verbosity >= 1) */
    const char *why;       /* its explanation (verbosity 2) */
    char note[160];        /* for a group's later roles: the comment at the branch that sends warps to it */
    unsigned produces;     /* bit r: fills ring r (arrives on its full barriers, or its copies complete them) */
    unsigned consumes;     /* bit r: drains ring r (waits on its full barriers, arrives on its empties) */
} fj_role;

typedef struct fj_ring_part {
    const char *name;      /* "K", "V", ... */
    int producer, consumer; /* role indices */
    int full_count;        /* arrivals that complete a full barrier (TMA: 1, the expect_tx arrive) */
    int tx_bytes;          /* transaction bytes of one fill (TMA copies), 0: arrivals only */
    int empty_count;       /* arrivals that complete an empty barrier; 0: the ring has no empty barriers */
    int full_off, empty_off; /* smem byte offsets of slot 0's barriers (from the smem base) */
} fj_ring_part;

typedef struct fj_ring {
    const char *name;      /* "Q", "K/V", "Vt", "O free", "V tail" */
    int slots;             /* stages (buffers) of the ring; its barriers are initialized for every slot */
    int slot_stride;       /* bytes from one slot's barriers to the next's */
    int n_parts;
    fj_ring_part part[FJ_MAX_RING_PARTS];
    char note[320];        /* the comment of its barrier initialization (verbosity >= 1) */
} fj_ring;

typedef struct fj_role_table {
    int n_roles, n_rings;
    fj_role role[FJ_MAX_ROLES];
    fj_ring ring[FJ_MAX_RINGS];
    int mma_event;         /* FJ_MMA_EVENT_* */
    const char *setup_why; /* the frame's setup banner: the warp roles in a sentence or three */
    /* Tensor memory (sm_100a; tmem_cols 0: none). In the setup warp tmem_warp allocates tmem_cols columns (the
     * address lands at smem + tmem_slot; every thread reads it into k->tmem after the CTA barrier); after the body of
     * each role in tmem_roles (bit i: role i) the frame emits the teardown: those roles' warps meet at named barrier
     * tmem_bar (no tensor memory access is left in flight) and warp tmem_warp frees the columns. */
    int tmem_cols, tmem_slot, tmem_warp, tmem_bar;
    unsigned tmem_roles;
} fj_role_table;

/* Filling a table (roles.c), in the order the frame initializes the barriers: fj_role_add appends a role (one
 * instance, no register change, no label); fj_ring_add starts ring t->n_rings (the caller adds its parts with
 * fj_ring_add_part, which sets the roles' produces / consumes bits, then counts it: t->n_rings++). */
fj_role *fj_role_add(fj_role_table *t, const char *name, int kind, int first_warp, int warps, int group);
fj_ring *fj_ring_add(fj_role_table *t, const char *name, int slots, int stride);
void fj_ring_add_part(fj_role_table *t, fj_ring *g, const char *name, int producer, int consumer, int full_count,
                      int tx_bytes, int empty_count, int full_off, int empty_off);

/* Byte offset of the full (empty = 0) or empty (empty = 1) barrier of ring part `part`, slot `slot`. */
static inline int fj_ring_bar(const fj_ring *r, int part, int slot, int empty)
{
    return (empty ? r->part[part].empty_off : r->part[part].full_off) + slot * r->slot_stride;
}

#endif
