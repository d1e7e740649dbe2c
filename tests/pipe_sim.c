/*
 * pipe_sim.c - the pipeline simulator (see pipe_sim.h and docs/pipeline-sim.md): each warp of a warp-specialized
 * kernel run by its lane 0, with lane 31 in step while the two agree, through ptx_sim.c's interpreter one instruction
 * at a time, the warps interleaved at random; this file runs the synchronizing instructions itself (PTX ISA sections
 * named):
 *   mbarrier.init / arrive / arrive.expect_tx / try_wait.parity    (mbarrier) pending arrivals, transaction bytes and a
 *       phase number per barrier; a phase completes when both reach 0
 *   cp.async.bulk.tensor global -> shared                         (cp.async.bulk.tensor) a load completes its box's
 *       bytes on its mbarrier at a random later time
 *   bar.sync / bar.arrive (id, thread count)                      (bar, barrier) each warp counts 32 threads
 *   wgmma.mma_async / commit_group / wait_group                   (asynchronous warpgroup matrix instructions)
 *       descriptor operands read shared memory from the issue to the wait_group that retires their group
 *   st.shared; cp.async.bulk.tensor shared -> global, bulk commit_group / wait_group(.read): the O epilogue's staging
 *   tcgen05.alloc / dealloc / relinquish, ld / st / wait, mma / commit, fence::before / after_thread_sync    (tensor
 *       memory, sm_100a) its cells and allocation in pipe_tmem.c
 *   atom.global.add.u32 / red.global.max.u32 (the lpt schedule's tile counter, sched.c): one counter for the run that
 *       hands out tiles in order, at random skipping some (as if other CTAs took them); st.shared / ld.shared of the
 *       schedule's slots (pipe_opts slot_off) keep and return their 4-byte values, a read checked like a wgmma's
 *       against the writes that reached the reader
 * Ordering is tracked with vector clocks: one clock per warp and one per mbarrier (its completed TMA loads). A release
 * (an arrive, bar.arrive, bar.sync) carries the warp's clock; a wait that passes on phase k acquires what phase k
 * collected; a named barrier joins its participants. A read is early when the slot's last load has not completed or its
 * completion is not in the reader's clock; a write (a load, st.shared) is early when a read of the slot is not retired
 * or its retirement is not in the writer's clock.
 * An arrive run by lane 0 alone counts one arrival (the generator elects lane 0, or thread 0 of the producer), by
 * lanes 0 and 31 32; a shfl.sync.idx from lane 0 gives lane 31 lane 0's value; float data is unknown, and a barrier under a guard that depends on it is reported as not modelled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe_sim.h"
#include "pipe_tmem.h"

#include "codegen/sched.h"

#define PS_W 16                  /* warps (512 threads) */
#define PS_A (PS_W + MAX_BARS)   /* clocks: the warps, then each mbarrier's TMA completions */
_Static_assert(TM_WARPS == PS_W, "pipe_tmem.h's TM_WARPS is PS_W");
#define PS_OPS 256               /* TMA loads in flight */
#define PS_REGIONS 128           /* shared-memory boxes loaded by TMA */
#define PS_READS 4096            /* a warp's wgmma reads not yet retired */
#define PS_NBARS 16              /* named barriers */
#define PS_CHUNK 128             /* bytes of a chunk */
#define PS_CHUNKS 2048           /* 256 KiB of shared memory */

typedef struct vclock {
    int c[PS_A];
} vclock;

static void vc_join(vclock *a, const vclock *b)
{
    for (int i = 0; i < PS_A; i++)
        if (b->c[i] > a->c[i]) a->c[i] = b->c[i];
}

typedef struct mbar {
    uint32_t addr;
    int count, pending, phase, line; /* line: its init */
    int tma_clock;                   /* its completed loads */
    int64_t tx;
    vclock acc, last; /* this phase's releases; the last completed phase's */
} mbar;

typedef struct region {
    uint32_t lo, hi;
    int loaded, done, bar, stamp, line; /* the last load: completed, on which mbarrier, its clock there, its line */
    int pending[PS_W], end[PS_W];       /* per warp: wgmma reads not retired; the clock of its last retired one */
    int stores;                         /* st.shared into it since the load (its chunks say whose) */
} region;

/* 128 bytes of shared memory: st.shared into it and TMA stores reading it, per warp */
typedef struct chunk {
    int wrote[PS_W], wline[PS_W];  /* the clock of the warp's last st.shared here since the last load; its line */
    int spend[PS_W], send[PS_W];   /* TMA store reads not retired; the clock of the last retired one */
    int sline[PS_W];
} chunk;

typedef struct pending_read {
    int region, lo, hi, bulk, group; /* a wgmma's box, or a TMA store's chunks (bulk) */
} pending_read;

typedef struct tma_op {
    int region, bar, bytes, line;
} tma_op;

typedef struct nbar {
    int expected, arrived, gen, line;
    vclock acc, last;
} nbar;

enum { W_RUN, W_MBAR, W_NBAR, W_DONE };

typedef struct warp {
    thread t, u;            /* lane 0, which the warp follows, and lane 31, in step with it while they agree */
    int lockstep, twin_pc;  /* lane 31 in step; else where it waits for lane 0 to come (-1: it has exited) */
    int state, wait_bar, wait_parity, wait_gen;
    vclock vc;
    int seen[MAX_BARS];     /* the last phase each mbarrier's wait passed on here (-2: none yet) */
    int committed, bulk_committed; /* wgmma groups, bulk (TMA store) groups committed */
    int n_reads;
    pending_read reads[PS_READS];
    vclock tvc;             /* sm_100a: the clock its tensor memory accesses are ordered by (taken at each
                               tcgen05.fence::after_thread_sync) */
    int unfenced;           /* a tcgen05.wait completed accesses at clock c + 1, published at fence::before_thread_sync */
} warp;

typedef struct sim {
    const prog *p;
    world *w;
    const pipe_opts *o;
    pipe_report *r;
    warp wp[PS_W];
    int n_warps;
    mbar bars[MAX_BARS];
    int n_bars;
    region reg[PS_REGIONS];
    int n_regions;
    chunk chunks[PS_CHUNKS];
    tma_op ops[PS_OPS];
    int n_ops;
    nbar nb[PS_NBARS];
    uint64_t rng;
    tm_state tm;            /* sm_100a tensor memory */
    uint32_t counter;       /* the lpt schedule's tile counter */
    uint32_t slot_val[64];  /* the lpt slots' words (pipe_opts slot_off), */
    int slot_warp[64], slot_stamp[64], slot_line[64]; /* and their last writer: its warp, its clock then, the line */
} sim;

const char *pipe_kind_name(int kind)
{
    static const char *const names[] = {"ok",
                                        "deadlock",
                                        "phase aliasing",
                                        "read before the load's arrival",
                                        "overwritten before the readers' release",
                                        "barrier misuse",
                                        "work left at exit",
                                        "not modelled",
                                        "tensor memory misuse"};
    return kind >= 0 && kind <= PIPE_TMEM ? names[kind] : "?";
}

static unsigned rnd(sim *s, unsigned n)
{
    s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(s->rng >> 33) % n;
}

/* The first fault wins; returns 0 so callers can `return fault(...)`. */
__attribute__((format(printf, 3, 4))) static int fault(sim *s, int kind, const char *fmt, ...)
{
    if (s->r->kind != PIPE_OK) return 0;
    s->r->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->r->text, sizeof s->r->text, fmt, ap);
    va_end(ap);
    return 0;
}

static int line_of(const sim *s, const warp *x) { return x->t.pc < s->p->n ? s->p->v[x->t.pc].line : 0; }

/* ---- operands ------------------------------------------------------------------------------------------------ */
/* A [reg+imm] shared-memory address (fj_smem is 0 here). */
static int mem_addr(sim *s, warp *x, const operand *o, uint32_t *addr)
{
    uint64_t v;
    if (o->kind != O_MEM || !sim_value(s->p, &x->t, s->w, &(operand){.kind = O_REG, .reg = o->reg}, &v))
        return fault(s, PIPE_MODEL, "line %d: an address the simulator cannot work out", line_of(s, x));
    *addr = (uint32_t)(v + (uint64_t)o->imm);
    return 1;
}

static mbar *bar_at(sim *s, warp *x, uint32_t addr, int *index)
{
    for (int i = 0; i < s->n_bars; i++)
        if (s->bars[i].addr == addr) {
            if (index) *index = i;
            return &s->bars[i];
        }
    fault(s, PIPE_BARRIER, "line %d: warp %d uses mbarrier +%u, never initialized (or not yet)", line_of(s, x),
          (int)(x - s->wp), addr);
    return NULL;
}

/* A phase completes when its arrivals and bytes are all in: its clock is kept for the waiters. */
static void bar_try_complete(sim *s, mbar *b)
{
    (void)s;
    if (b->pending != 0 || b->tx != 0) return;
    b->last = b->acc;
    memset(&b->acc, 0, sizeof b->acc);
    b->phase++, b->pending = b->count;
    s->r->phases++;
    if (b->phase > s->r->max_phase) s->r->max_phase = b->phase;
}

/* ---- mbarriers ----------------------------------------------------------------------------------------------- */
static int do_init(sim *s, warp *x, const insn *in)
{
    uint32_t addr = 0;
    uint64_t count;
    if (!mem_addr(s, x, &in->a[0], &addr)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &in->a[1], &count))
        return fault(s, PIPE_MODEL, "line %d: mbarrier count", in->line);
    for (int i = 0; i < s->n_bars; i++)
        if (s->bars[i].addr == addr)
            return fault(s, PIPE_BARRIER, "line %d: mbarrier +%u initialized again (line %d)", in->line, addr,
                         s->bars[i].line);
    if (s->n_bars == MAX_BARS) return fault(s, PIPE_MODEL, "more than %d mbarriers", MAX_BARS);
    mbar *b = &s->bars[s->n_bars++];
    memset(b, 0, sizeof *b);
    b->addr = addr, b->count = b->pending = (int)count, b->line = in->line;
    return 1;
}

static int do_arrive(sim *s, warp *x, const insn *in, int lanes)
{
    int expect = strstr(in->op, "expect_tx") != NULL, i;
    int commit = strncmp(in->op, "tcgen05.commit", 14) == 0; /* its barrier is its first operand */
    uint32_t addr = 0;
    if (!mem_addr(s, x, &in->a[commit ? 0 : 1], &addr)) return 0;
    mbar *b = bar_at(s, x, addr, &i);
    if (!b) return 0;
    uint64_t bytes = 0;
    if (expect) {
        if (!sim_value(s->p, &x->t, s->w, &in->a[2], &bytes))
            return fault(s, PIPE_MODEL, "line %d: expect_tx of unknown bytes", in->line);
    }
    for (int l = 0; l < lanes; l++) { /* each lane: its bytes, then its arrival */
        if (expect) b->tx += (int64_t)bytes;
        if (b->pending == 0)
            return fault(s, PIPE_BARRIER, "line %d: warp %d arrives on mbarrier +%u (count %d, line %d) in phase %d "
                                          "with no arrival pending (its bytes are not all in)",
                         in->line, (int)(x - s->wp), addr, b->count, b->line, b->phase);
        vc_join(&b->acc, &x->vc);
        b->pending--;
        bar_try_complete(s, b);
    }
    return 1;
}

/* try_wait.parity P passes when the barrier's current phase has the other parity: the phase before it is complete. */
static int do_wait(sim *s, warp *x, const insn *in)
{
    uint32_t addr = 0;
    uint64_t par;
    int i;
    if (!mem_addr(s, x, &in->a[1], &addr)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &in->a[2], &par))
        return fault(s, PIPE_MODEL, "line %d: a wait parity the simulator cannot work out", in->line);
    mbar *b = bar_at(s, x, addr, &i);
    if (!b) return 0;
    s->r->waits++;
    if ((b->phase & 1) == (int)(par & 1)) { /* not yet: the warp sleeps until the barrier moves */
        if (x->state != W_MBAR) s->r->blocked_waits++;
        x->state = W_MBAR, x->wait_bar = i, x->wait_parity = (int)(par & 1);
        return 1;
    }
    int k = b->phase - 1, seen = x->seen[i], w = (int)(x - s->wp);
    if (seen == -2 ? k > 0 : k != seen + 1) {
        if (k <= seen)
            return fault(s, PIPE_PHASE_ALIAS, "line %d: warp %d passes its wait (parity %d) on mbarrier +%u (line %d) "
                                              "on phase %d, which it had passed already (the barrier is in phase %d)",
                         in->line, w, (int)(par & 1), addr, b->line, k, b->phase);
        return fault(s, PIPE_PHASE_ALIAS, "line %d: warp %d passes its wait (parity %d) on mbarrier +%u (line %d) on "
                                          "phase %d, having passed phase %d last: phase %d went by unseen",
                     in->line, w, (int)(par & 1), addr, b->line, k, seen, seen + 1);
    }
    x->seen[i] = k;
    if (k >= 0) vc_join(&x->vc, &b->last);
    x->state = W_RUN;
    sim_set(&x->t, &in->a[0], 1, 1);
    x->t.pc++;
    return 1;
}

/* ---- TMA loads and wgmma reads ------------------------------------------------------------------------------- */
static int region_at(sim *s, uint32_t addr)
{
    for (int i = 0; i < s->n_regions; i++)
        if (addr >= s->reg[i].lo && addr < s->reg[i].hi) return i;
    return -1;
}

/* The 128-byte chunks [lo, hi) of a byte range (st.shared and the O store's staging are followed by chunk). */
static void chunk_span(uint32_t addr, uint32_t bytes, int *lo, int *hi)
{
    *lo = (int)(addr / PS_CHUNK), *hi = (int)((addr + bytes + PS_CHUNK - 1) / PS_CHUNK);
    if (*hi > PS_CHUNKS) *hi = PS_CHUNKS;
    if (*lo > *hi) *lo = *hi;
}

/* Whether warp x may write chunks [lo, hi) now: every TMA store read of them retired and released to x; with
 * `writes`, every other warp's st.shared into them ordered before x too (a load overwrites them all; st.shared by
 * warps at once write rows of their own, so they are not checked against each other). */
static int chunks_writable(sim *s, warp *x, int lo, int hi, const insn *in, const char *verb, int writes)
{
    int w = (int)(x - s->wp);
    for (int c = lo; c < hi; c++)
        for (int u = 0; u < s->n_warps; u++) {
            chunk *k = &s->chunks[c];
            if (k->spend[u] || k->send[u] > x->vc.c[u])
                return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d %s +%d before warp %d's TMA store (line %d) has "
                                                  "read it (%s)",
                             in->line, w, verb, c * PS_CHUNK, u, k->sline[u],
                             k->spend[u] ? "no bulk wait_group yet" : "no arrive after its bulk wait_group reached it");
            if (writes && u != w && k->wrote[u] > x->vc.c[u])
                return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d %s +%d unordered with warp %d's st.shared "
                                                  "(line %d)",
                             in->line, w, verb, c * PS_CHUNK, u, k->wline[u]);
        }
    return 1;
}

/* Whether warp x may write box g now: every wgmma read of it retired and released to x (and, for a load, the chunks
 * as chunks_writable says). A fault when not; then the box forgets what is ordered before. */
static int writable(sim *s, warp *x, region *g, const insn *in, const char *verb, uint32_t addr, int load)
{
    int w = (int)(x - s->wp), lo, hi;
    for (int u = 0; u < s->n_warps; u++) {
        if (g->pending[u])
            return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d %s +%u (box +%u) while warp %d still reads it (not "
                                              "retired by a wait_group)",
                         in->line, w, verb, addr, g->lo, u);
        if (g->end[u] > x->vc.c[u])
            return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d %s +%u (box +%u) before warp %d released its read (no "
                                              "arrive after its wait_group reached this warp)",
                         in->line, w, verb, addr, g->lo, u);
    }
    memset(g->end, 0, sizeof g->end);
    if (!load) return 1;
    chunk_span(g->lo, g->hi - g->lo, &lo, &hi);
    if (!chunks_writable(s, x, lo, hi, in, verb, 1)) return 0;
    for (int c = lo; c < hi; c++) memset(&s->chunks[c], 0, sizeof s->chunks[c]);
    g->stores = 0;
    return 1;
}

/* Whether warp x may read box g now: its load landed and reached x. */
static int readable(sim *s, warp *x, region *g, const insn *in, const char *who, uint32_t addr)
{
    int w = (int)(x - s->wp);
    if (g->loaded && !g->done)
        return fault(s, PIPE_EARLY_READ, "line %d: warp %d's %s reads +%u (box +%u) while its load (line %d) is in "
                                         "flight",
                     in->line, w, who, addr, g->lo, g->line);
    if (g->loaded && x->vc.c[PS_W + g->bar] < g->stamp)
        return fault(s, PIPE_EARLY_READ, "line %d: warp %d's %s reads +%u (box +%u) without having waited for its "
                                         "load (line %d) on mbarrier +%u",
                     in->line, w, who, addr, g->lo, g->line, s->bars[g->bar].addr);
    return 1;
}

/* Whether warp x may read chunks [lo, hi) now: every other warp's st.shared into them reached x. */
static int chunks_readable(sim *s, warp *x, int lo, int hi, const insn *in, const char *who)
{
    int w = (int)(x - s->wp);
    for (int c = lo; c < hi; c++)
        for (int u = 0; u < s->n_warps; u++)
            if (u != w && s->chunks[c].wrote[u] > x->vc.c[u])
                return fault(s, PIPE_EARLY_READ, "line %d: warp %d's %s reads +%d before warp %d's st.shared into it "
                                                 "(line %d) reached it",
                             in->line, w, who, c * PS_CHUNK, u, s->chunks[c].wline[u]);
    return 1;
}

/* A read not yet retired: box ri (a wgmma's) or chunks [lo, hi) (a TMA store's, `bulk`). */
static int add_read(sim *s, warp *x, int ri, int lo, int hi, int bulk, int line)
{
    int w = (int)(x - s->wp);
    if (x->n_reads == PS_READS) return fault(s, PIPE_MODEL, "warp %d: more than %d reads pending", w, PS_READS);
    pending_read *r = &x->reads[x->n_reads++];
    *r = (pending_read){.region = ri, .lo = lo, .hi = hi, .bulk = bulk,
                        .group = bulk ? x->bulk_committed : x->committed};
    if (!bulk) s->reg[ri].pending[w]++;
    for (int c = lo; c < hi; c++) s->chunks[c].spend[w]++, s->chunks[c].sline[w] = line;
    return 1;
}

static int do_tma_load(sim *s, warp *x, const insn *in)
{
    uint32_t dst = 0, baddr = 0;
    uint64_t map;
    int bi, w = (int)(x - s->wp);
    if (!mem_addr(s, x, &in->a[0], &dst) || !mem_addr(s, x, &in->a[2], &baddr)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &map))
        return fault(s, PIPE_MODEL, "line %d: TMA load through an unknown map", in->line);
    int off = (int)(map + (uint64_t)in->a[1].imm - BASE_PARAMS);
    int bytes = off == s->o->q_map_off ? s->o->q_box_bytes
                : off == s->o->k_map_off || off == s->o->v_map_off ? s->o->kv_box_bytes : 0;
    if (!bytes) return fault(s, PIPE_MODEL, "line %d: TMA load through the map at +%d", in->line, off);
    if (!bar_at(s, x, baddr, &bi)) return 0;
    int ri = region_at(s, dst);
    if (ri < 0) {
        if (s->n_regions == PS_REGIONS || region_at(s, dst + (uint32_t)bytes - 1) >= 0)
            return fault(s, PIPE_MODEL, "line %d: a TMA box at +%u overlapping another", in->line, dst);
        ri = s->n_regions++;
        memset(&s->reg[ri], 0, sizeof s->reg[ri]);
        s->reg[ri].lo = dst, s->reg[ri].hi = dst + (uint32_t)bytes;
    }
    region *g = &s->reg[ri];
    if (g->lo != dst || g->hi != dst + (uint32_t)bytes)
        return fault(s, PIPE_MODEL, "line %d: a TMA box at +%u inside the box at +%u", in->line, dst, g->lo);
    if (g->loaded && !g->done)
        return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d loads into +%u while its load of line %d is in flight",
                     in->line, w, dst, g->line);
    if (!writable(s, x, g, in, "loads into", dst, 1)) return 0;
    if (s->n_ops == PS_OPS) return fault(s, PIPE_MODEL, "more than %d TMA loads in flight", PS_OPS);
    g->loaded = 1, g->done = 0, g->bar = bi, g->line = in->line;
    s->ops[s->n_ops++] = (tma_op){.region = ri, .bar = bi, .bytes = bytes, .line = in->line};
    s->r->tma_loads++;
    return 1;
}

/* A load lands: its bytes complete on its mbarrier, stamped with that barrier's clock. */
static void tma_complete(sim *s, int i)
{
    tma_op op = s->ops[i];
    s->ops[i] = s->ops[--s->n_ops];
    mbar *b = &s->bars[op.bar];
    int stamp = ++b->tma_clock; /* in the barrier's own slot of the clocks */
    b->acc.c[PS_W + op.bar] = stamp;
    region *g = &s->reg[op.region];
    g->done = 1, g->stamp = stamp;
    b->tx -= op.bytes;
    bar_try_complete(s, b);
}

static int do_read(sim *s, warp *x, const insn *in, const operand *o)
{
    uint64_t d;
    int lo, hi;
    if (o->kind != O_REG) return 1; /* A from registers */
    if (!sim_value(s->p, &x->t, s->w, o, &d))
        return fault(s, PIPE_MODEL, "line %d: an unknown wgmma descriptor", in->line);
    uint32_t addr = (uint32_t)(d & 0x3fff) << 4;
    int ri = region_at(s, addr), w = (int)(x - s->wp);
    if (ri < 0)
        return fault(s, PIPE_EARLY_READ, "line %d: warp %d's wgmma reads +%u, which no TMA load has filled",
                     in->line, w, addr);
    region *g = &s->reg[ri];
    chunk_span(g->lo, g->hi - g->lo, &lo, &hi);
    if (!g->loaded && !g->stores)
        return fault(s, PIPE_EARLY_READ, "line %d: warp %d's wgmma reads +%u (box +%u), which nothing has written yet",
                     in->line, w, addr, g->lo);
    if (!readable(s, x, g, in, "wgmma", addr) || (g->stores && !chunks_readable(s, x, lo, hi, in, "wgmma")) ||
        !add_read(s, x, ri, 0, 0, 0, in->line))
        return 0;
    s->r->wgmma_reads++;
    return 1;
}

/* ldmatrix (FP8's V transpose) by lane 0 (and lane 31 when in step): a read of the loaded box holding its address,
 * done when the instruction is (its registers hold the data): retired at once, released by the warp's next arrive. */
static int do_ldmatrix(sim *s, warp *x, const insn *in)
{
    int w = (int)(x - s->wp);
    for (int lane = 0; lane < 2; lane++) {
        thread *t = lane ? &x->u : &x->t;
        uint64_t v;
        if (lane && (!x->lockstep || sim_guard(&x->u, in) != 1)) break;
        if (in->a[1].kind != O_MEM || !sim_value(s->p, t, s->w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &v))
            return fault(s, PIPE_MODEL, "line %d: ldmatrix from an address the simulator cannot work out", in->line);
        uint32_t addr = (uint32_t)(v + (uint64_t)in->a[1].imm);
        int ri = region_at(s, addr), lo, hi;
        if (ri < 0 || !s->reg[ri].loaded)
            return fault(s, PIPE_EARLY_READ, "line %d: warp %d's ldmatrix reads +%u, which no TMA load has filled",
                         in->line, w, addr);
        region *g = &s->reg[ri];
        chunk_span(g->lo, g->hi - g->lo, &lo, &hi);
        if (!readable(s, x, g, in, "ldmatrix", addr) || (g->stores && !chunks_readable(s, x, lo, hi, in, "ldmatrix")))
            return 0;
        g->end[w] = ++x->vc.c[w];
        s->r->wgmma_reads += lane == 0;
    }
    return 1;
}

/* The TMA store of O (cp.async.bulk.tensor global <- shared): it reads its staging box until a
 * cp.async.bulk.wait_group(.read) retires its bulk group. */
static int do_tma_store(sim *s, warp *x, const insn *in)
{
    uint32_t src = 0, n = (uint32_t)s->o->o_box_bytes;
    int lo, hi;
    if (!n) return 1;
    if (!mem_addr(s, x, &in->a[1], &src)) return 0;
    for (int ri = 0; ri < s->n_regions; ri++) /* a load box it overlaps: loaded and waited for */
        if (s->reg[ri].hi > src && s->reg[ri].lo < src + n && !readable(s, x, &s->reg[ri], in, "TMA store", src))
            return 0;
    chunk_span(src, n, &lo, &hi);
    return chunks_readable(s, x, lo, hi, in, "TMA store") && add_read(s, x, -1, lo, hi, 1, in->line);
}

/* st.shared by lane 0 (and lane 31 when in step): a write of its chunk, and of the load box holding it. */
static int do_st_shared(sim *s, warp *x, const insn *in)
{
    for (int lane = 0; lane < 2; lane++) {
        thread *t = lane ? &x->u : &x->t;
        uint64_t v;
        if (lane && (!x->lockstep || sim_guard(&x->u, in) != 1)) break;
        if (in->a[0].kind != O_MEM || !sim_value(s->p, t, s->w, &(operand){.kind = O_REG, .reg = in->a[0].reg}, &v))
            return fault(s, PIPE_MODEL, "line %d: st.shared to an address the simulator cannot work out", in->line);
        uint32_t addr = (uint32_t)(v + (uint64_t)in->a[0].imm);
        int ri = region_at(s, addr), w = (int)(x - s->wp), lo, hi;
        chunk_span(addr, 1, &lo, &hi);
        if (lo == hi) return fault(s, PIPE_MODEL, "line %d: st.shared to +%u, past shared memory", in->line, addr);
        if (ri >= 0) {
            region *g = &s->reg[ri];
            if (g->loaded && !g->done)
                return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d writes +%u (box +%u) while a load into it (line "
                                                  "%d) is in flight",
                             in->line, w, addr, g->lo, g->line);
            if (g->loaded && x->vc.c[PS_W + g->bar] < g->stamp)
                return fault(s, PIPE_EARLY_WRITE, "line %d: warp %d writes +%u (box +%u) unordered with its load (line "
                                                  "%d)",
                             in->line, w, addr, g->lo, g->line);
            if (!writable(s, x, g, in, "writes", addr, 0)) return 0;
            g->stores++;
        }
        if (!chunks_writable(s, x, lo, hi, in, "writes", 0)) return 0;
        s->chunks[lo].wrote[w] = ++x->vc.c[w], s->chunks[lo].wline[w] = in->line;
    }
    return 1;
}

/* wait_group N (wgmma's, or the bulk groups' with `bulk`): every group but the newest N is done; its reads end at
 * the warp's next clock. */
static void retire(sim *s, warp *x, int keep, int bulk)
{
    int w = (int)(x - s->wp), n = 0, committed = bulk ? x->bulk_committed : x->committed;
    x->vc.c[w]++;
    for (int i = 0; i < x->n_reads; i++) {
        pending_read *r = &x->reads[i];
        if (r->bulk == bulk && r->group < committed - keep) {
            if (!bulk) s->reg[r->region].pending[w]--, s->reg[r->region].end[w] = x->vc.c[w];
            for (int c = r->lo; c < r->hi; c++) s->chunks[c].spend[w]--, s->chunks[c].send[w] = x->vc.c[w];
            continue;
        }
        x->reads[n++] = *r;
    }
    x->n_reads = n;
}

/* ---- named barriers ------------------------------------------------------------------------------------------ */
static int do_bar(sim *s, warp *x, const insn *in)
{
    uint64_t id, count = (uint64_t)s->o->threads;
    int arrive = strncmp(in->op, "bar.arrive", 10) == 0, w = (int)(x - s->wp);
    if (!sim_value(s->p, &x->t, s->w, &in->a[0], &id) ||
        (in->n > 1 && !sim_value(s->p, &x->t, s->w, &in->a[1], &count)))
        return fault(s, PIPE_MODEL, "line %d: a named barrier the simulator cannot work out", in->line);
    if (id >= PS_NBARS) return fault(s, PIPE_BARRIER, "line %d: named barrier %llu", in->line, (unsigned long long)id);
    nbar *b = &s->nb[id];
    if (b->arrived && b->expected != (int)count)
        return fault(s, PIPE_BARRIER, "line %d: warp %d gives named barrier %d a count of %d threads; line %d gave %d",
                     in->line, w, (int)id, (int)count, b->line, b->expected);
    b->expected = (int)count, b->line = in->line, b->arrived += 32;
    x->vc.c[w]++;
    vc_join(&b->acc, &x->vc);
    x->t.pc++;
    if (!arrive) x->state = W_NBAR, x->wait_bar = (int)id, x->wait_gen = b->gen;
    else s->r->named_syncs++;
    if (b->arrived > b->expected)
        return fault(s, PIPE_BARRIER, "line %d: named barrier %d: %d threads arrive for %d", in->line, (int)id,
                     b->arrived, b->expected);
    if (b->arrived == b->expected) {
        b->last = b->acc, b->gen++, b->arrived = 0;
        memset(&b->acc, 0, sizeof b->acc);
    }
    return 1;
}

/* ---- tensor memory (sm_100a; pipe_tmem.c) --------------------------------------------------------------------- */
static int tm_fault(sim *s, int kind, const char *why)
{
    return kind ? fault(s, kind, "%s", why) : 1;
}

/* A [taddr+imm] operand (or a register) as lane and column. */
static int taddr_of(sim *s, warp *x, const operand *o, int *lane, int *col)
{
    uint64_t v;
    if ((o->kind != O_MEM && o->kind != O_REG) ||
        !sim_value(s->p, &x->t, s->w, &(operand){.kind = O_REG, .reg = o->reg}, &v))
        return fault(s, PIPE_MODEL, "line %d: a tensor memory address the simulator cannot work out (kind %d reg %d)",
                     s->p->v[x->t.pc].line, o->kind, o->reg);
    uint32_t a = (uint32_t)(v + (uint64_t)(o->kind == O_MEM ? o->imm : 0));
    *lane = (int)(a >> 16), *col = (int)(a & 0xffff) - (int)TM_BASE;
    return 1;
}

static int do_tm_alloc(sim *s, warp *x, const insn *in)
{
    uint64_t cols;
    uint32_t slot = 0;
    if (!mem_addr(s, x, &in->a[0], &slot)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &in->a[1], &cols)) return fault(s, PIPE_MODEL, "line %d: alloc columns", in->line);
    if (s->tm.allocated || s->tm.freed)
        return fault(s, PIPE_TMEM, "line %d: warp %d allocates tensor memory again (line %d)", in->line,
                     (int)(x - s->wp), s->tm.alloc_line);
    if (cols < 32 || cols > 512 || (cols & (cols - 1)))
        return fault(s, PIPE_TMEM, "line %d: tcgen05.alloc of %llu columns (a power of two, 32..512)", in->line,
                     (unsigned long long)cols);
    s->tm.allocated = 1, s->tm.cols = (int)cols, s->tm.alloc_line = in->line, s->tm.slot = slot;
    return 1;
}

static int do_tm_dealloc(sim *s, warp *x, const insn *in)
{
    int lane = 0, col = 0, w = (int)(x - s->wp);
    uint64_t cols;
    char why[512];
    if (!taddr_of(s, x, &in->a[0], &lane, &col)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &in->a[1], &cols)) return fault(s, PIPE_MODEL, "line %d: dealloc columns", in->line);
    if (!s->tm.allocated)
        return fault(s, PIPE_TMEM, "line %d: warp %d frees tensor memory with none allocated", in->line, w);
    if (lane || col || (int)cols != s->tm.cols)
        return fault(s, PIPE_TMEM, "line %d: warp %d frees %llu columns at lane %d column %d; line %d allocated %d at "
                                   "lane 0 column 0",
                     in->line, w, (unsigned long long)cols, lane, col, s->tm.alloc_line, s->tm.cols);
    if (!tm_fault(s, tm_quiet(&s->tm, w, x->tvc.c, s->n_warps, in->line, why, sizeof why), why)) return 0;
    s->tm.allocated = 0, s->tm.freed = 1, s->r->tmem_freed = 1;
    return 1;
}

/* tcgen05.ld / st .32x32b.xN: the warp's 32 lanes from the address's lane, N columns. */
static int do_tm_ldst(sim *s, warp *x, const insn *in, int st)
{
    int lane = 0, col = 0, w = (int)(x - s->wp), cols = 0;
    char why[512];
    const char *xn = strstr(in->op, ".32x32b.x");
    if (!xn || sscanf(xn + 9, "%d", &cols) != 1)
        return fault(s, PIPE_MODEL, "line %d: %s: only the 32x32b shape is modelled", in->line, in->op);
    if (!taddr_of(s, x, &in->a[st ? 0 : 1], &lane, &col)) return 0;
    if (lane != 32 * (w % 4))
        return fault(s, PIPE_TMEM, "line %d: warp %d reaches tensor memory lanes %d..%d; a warp w reaches lanes 32 (w "
                                   "%% 4) .. + 31 only",
                     in->line, w, lane, lane + 31);
    s->r->tmem_reads += !st, s->r->tmem_writes += st;
    int k = st ? tm_write(&s->tm, w, x->tvc.c, s->n_warps, TM_ST, lane, 32, col, cols, in->line, why, sizeof why)
               : tm_read(&s->tm, w, x->tvc.c, s->n_warps, TM_LD, lane, 32, col, cols, in->line, why, sizeof why);
    return tm_fault(s, k, why);
}

/* tcgen05.mma (M 128, cta_group::1): D's N columns (the instruction descriptor's bits 17-22) of every lane written,
 * and read when it accumulates (enable-input-d not 0); A read from 8 columns (K 16 of 16 bits) when in tensor memory. */
static int do_tm_mma(sim *s, warp *x, const insn *in)
{
    int lane = 0, col = 0, w = (int)(x - s->wp), k;
    uint64_t idesc, en;
    char why[512];
    if (!sim_value(s->p, &x->t, s->w, &in->a[3], &idesc))
        return fault(s, PIPE_MODEL, "line %d: an instruction descriptor the simulator cannot work out", in->line);
    int n = (int)((idesc >> 17) & 0x3f) << 3;
    s->r->tmem_writes++;
    if (in->a[1].kind == O_MEM) {
        if (!taddr_of(s, x, &in->a[1], &lane, &col)) return 0;
        k = tm_read(&s->tm, w, x->tvc.c, s->n_warps, TM_MMA, lane, 128, col, 8, in->line, why, sizeof why);
        if (k) return tm_fault(s, k, why);
    }
    if (!taddr_of(s, x, &in->a[0], &lane, &col)) return 0;
    if (!sim_value(s->p, &x->t, s->w, &in->a[4], &en) || en) {
        k = tm_read(&s->tm, w, x->tvc.c, s->n_warps, TM_MMA, lane, 128, col, n, in->line, why, sizeof why);
        if (k) return tm_fault(s, k, why);
    }
    k = tm_write(&s->tm, w, x->tvc.c, s->n_warps, TM_MMA, lane, 128, col, n, in->line, why, sizeof why);
    return tm_fault(s, k, why);
}

/* tcgen05.wait::ld / ::st: the warp's loads / stores complete, at its next clock, which its next
 * tcgen05.fence::before_thread_sync publishes (an arrive without the fence does not carry them). */
static void tm_wait(sim *s, warp *x, int kinds)
{
    int w = (int)(x - s->wp);
    tm_retire(&s->tm, w, kinds, x->vc.c[w] + 1);
    x->unfenced = 1;
}

static void tm_fence(sim *s, warp *x, int after)
{
    int w = (int)(x - s->wp);
    if (after) x->tvc = x->vc;
    else if (x->unfenced) x->vc.c[w]++, x->unfenced = 0;
    x->tvc.c[w] = x->vc.c[w];
}

/* Whether in is the load of the tensor memory address from the allocation's slot (before it runs): the simulator
 * gives its destination TM_BASE (it models no shared memory data). */
static int tm_address_load(sim *s, warp *x, const insn *in)
{
    uint64_t v;
    return s->tm.allocated && strncmp(in->op, "ld.shared", 9) == 0 && in->a[1].kind == O_MEM &&
           sim_guard(&x->t, in) == 1 &&
           sim_value(s->p, &x->t, s->w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &v) &&
           (uint32_t)(v + (uint64_t)in->a[1].imm) == s->tm.slot;
}

/* ---- one warp's step ----------------------------------------------------------------------------------------- */
static int is_sync(const char *op)
{
    return strncmp(op, "mbarrier.", 9) == 0 || strncmp(op, "bar.", 4) == 0 || strncmp(op, "barrier.", 8) == 0 ||
           strncmp(op, "cp.async.bulk", 13) == 0 || strncmp(op, "wgmma.", 6) == 0 || strncmp(op, "fence.", 6) == 0 ||
           strncmp(op, "setmaxnreg", 10) == 0 || strncmp(op, "tcgen05.", 8) == 0 || strncmp(op, "st.shared", 9) == 0 ||
           strncmp(op, "ldmatrix", 8) == 0 || strncmp(op, "stmatrix", 8) == 0;
}

/* How many lanes run in: 32 when lane 0 and lane 31 (in step) both do, 1 when only lane 0 does (an elected lane, or
 * a warp whose other lanes branched away), 0 when lane 0 does not; -1 (a fault) when lane 31 does and lane 0 not. */
static int lanes(sim *s, warp *x, const insn *in)
{
    int g0 = sim_guard(&x->t, in), g31 = x->lockstep ? sim_guard(&x->u, in) : 0;
    if (g0 < 0 || g31 < 0)
        return fault(s, PIPE_MODEL, "line %d: %s under a guard that depends on data", in->line, in->op), -1;
    if (g31 && !g0)
        return fault(s, PIPE_MODEL, "line %d: %s run by lane 31 of warp %d but not by lane 0 (which is followed)",
                     in->line, in->op, (int)(x - s->wp)), -1;
    return g0 ? (g31 ? 32 : 1) : 0;
}

/* One instruction of lane 0, and of lane 31 while it is in step: a branch they take apart leaves lane 31 waiting at
 * its target until lane 0 gets there (the warp reconverges). */
static int step_plain(sim *s, warp *x, const insn *in)
{
    int pc = x->t.pc, r = sim_step(s->p, &x->t, s->w);
    if (r == SIM_STOP) return fault(s, PIPE_MODEL, "warp %d: %s", (int)(x - s->wp), s->w->why);
    if (x->lockstep) {
        x->u.pc = pc;
        int ru = sim_step(s->p, &x->u, s->w);
        if (ru == SIM_STOP) return fault(s, PIPE_MODEL, "warp %d lane 31 at line %d: %s", (int)(x - s->wp), in->line,
                                         s->w->why);
        if (ru != r || x->u.pc != x->t.pc) x->lockstep = 0, x->twin_pc = ru == SIM_RET ? -1 : x->u.pc;
    }
    if (r == SIM_RET) x->state = W_DONE;
    return 1;
}

static int step_sync(sim *s, warp *x, const insn *in)
{
    const char *op = in->op;
    int n = lanes(s, x, in), pc = x->t.pc;
    if (n < 0) return 0;
    if (n && x->lockstep == 0 && (strncmp(op, "bar.", 4) == 0 || strncmp(op, "wgmma.", 6) == 0))
        return fault(s, PIPE_BARRIER, "line %d: %s in warp %d with lanes branched away (from line %d)", in->line, op,
                     (int)(x - s->wp), x->twin_pc >= 0 ? s->p->v[x->twin_pc].line : 0);
    if (!n) x->t.pc++;
    else if (strncmp(op, "mbarrier.init", 13) == 0) {
        for (int l = 0; l < n; l++)
            if (!do_init(s, x, in)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "mbarrier.arrive", 15) == 0) {
        if (!do_arrive(s, x, in, n)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "mbarrier.try_wait.parity", 24) == 0) {
        if (!do_wait(s, x, in)) return 0;
    } else if (strncmp(op, "cp.async.bulk.tensor", 20) == 0 && strstr(op, ".shared::cluster.global")) {
        for (int l = 0; l < n; l++)
            if (!do_tma_load(s, x, in)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "bar.sync", 8) == 0 || strncmp(op, "bar.arrive", 10) == 0) {
        if (!do_bar(s, x, in)) return 0;
    } else if (strncmp(op, "wgmma.mma_async", 15) == 0) {
        if (!do_read(s, x, in, &in->a[1]) || !do_read(s, x, in, &in->a[2])) return 0;
        x->t.pc++;
    } else if (strcmp(op, "wgmma.commit_group.sync.aligned") == 0) {
        x->committed++, x->t.pc++;
    } else if (strcmp(op, "wgmma.wait_group.sync.aligned") == 0) {
        uint64_t k;
        if (!sim_value(s->p, &x->t, s->w, &in->a[0], &k))
            return fault(s, PIPE_MODEL, "line %d: wait_group N", in->line);
        retire(s, x, (int)k, 0);
        x->t.pc++;
    } else if (strncmp(op, "cp.async.bulk.tensor", 20) == 0 && strstr(op, ".global.shared::cta")) {
        if (!do_tma_store(s, x, in)) return 0;
        x->t.pc++;
    } else if (strcmp(op, "cp.async.bulk.commit_group") == 0) {
        x->bulk_committed++, x->t.pc++;
    } else if (strncmp(op, "cp.async.bulk.wait_group", 24) == 0) {
        uint64_t k;
        if (!sim_value(s->p, &x->t, s->w, &in->a[0], &k))
            return fault(s, PIPE_MODEL, "line %d: bulk wait_group N", in->line);
        retire(s, x, (int)k, 1);
        x->t.pc++;
    } else if (strncmp(op, "st.shared", 9) == 0 || strncmp(op, "stmatrix", 8) == 0) {
        if (!do_st_shared(s, x, in)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "ldmatrix", 8) == 0) {
        if (!do_ldmatrix(s, x, in)) return 0;
        x->t.pc++;
    } else if (strcmp(op, "bar.warp.sync") == 0) {
        x->t.pc++; /* the warp's lanes meet: lane 0 and lane 31 are in step here (checked above) */
    } else if (strncmp(op, "tcgen05.mma", 11) == 0) {
        /* sm_100a: its shared memory operands (descriptors; A may be in tensor memory) are read until the next
         * tcgen05.commit of the thread, which retires them before its arrive; its tensor memory accesses likewise */
        if ((in->a[1].kind != O_MEM && !do_read(s, x, in, &in->a[1])) || !do_read(s, x, in, &in->a[2])) return 0;
        if (!do_tm_mma(s, x, in)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "tcgen05.commit", 14) == 0) {
        x->committed++;
        retire(s, x, 0, 0);
        tm_retire(&s->tm, (int)(x - s->wp), TM_MMA, x->vc.c[x - s->wp]);
        if (!do_arrive(s, x, in, n)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "tcgen05.alloc", 13) == 0) {
        if (!do_tm_alloc(s, x, in)) return 0; /* the warp's one allocation (.sync.aligned) */
        x->t.pc++;
    } else if (strncmp(op, "tcgen05.relinquish_alloc_permit", 31) == 0) {
        s->tm.relinquished = 1, x->t.pc++;
    } else if (strncmp(op, "tcgen05.dealloc", 15) == 0) {
        if (!do_tm_dealloc(s, x, in)) return 0;
        x->t.pc++;
    } else if (strncmp(op, "tcgen05.ld", 10) == 0 || strncmp(op, "tcgen05.st", 10) == 0) {
        if (!do_tm_ldst(s, x, in, op[8] == 's')) return 0;
        x->t.pc++;
    } else if (strncmp(op, "tcgen05.wait::", 14) == 0) {
        tm_wait(s, x, op[14] == 'l' ? TM_LD : TM_ST), x->t.pc++;
    } else if (strncmp(op, "tcgen05.fence::", 15) == 0) {
        tm_fence(s, x, op[15] == 'a'), x->t.pc++;
    } else if (strncmp(op, "mbarrier.", 9) == 0 || strncmp(op, "barrier.", 8) == 0) {
        return fault(s, PIPE_MODEL, "line %d: %s is not modelled", in->line, op);
    } else {
        x->t.pc++; /* wgmma.fence, fence.*, setmaxnreg, the O store's bulk groups: no ordering the simulator tracks */
    }
    if (x->lockstep && x->t.pc != pc) { /* lane 31 passes it too (a wait: with lane 0's answer) */
        x->u.pc = x->t.pc;
        if (strncmp(op, "mbarrier.try_wait", 17) == 0) sim_set(&x->u, &in->a[0], 1, 1);
    }
    return 1;
}

/* The shared address of in's memory operand `o` as lane 0 sees it, when it lies in the lpt slots: its word index
 * (>= 0); -1 when it does not, or no slots; -2 when the address is unknown. */
static int slot_word(sim *s, warp *x, const insn *in, int o)
{
    uint64_t v;
    if (!s->o->slot_bytes || in->a[o].kind != O_MEM) return -1;
    if (!sim_value(s->p, &x->t, s->w, &(operand){.kind = O_REG, .reg = in->a[o].reg}, &v)) return -2;
    uint32_t addr = (uint32_t)(v + (uint64_t)in->a[o].imm);
    if (addr < (uint32_t)s->o->slot_off || addr >= (uint32_t)(s->o->slot_off + s->o->slot_bytes)) return -1;
    int word = (int)(addr - (uint32_t)s->o->slot_off) / 4;
    return word < (int)(sizeof s->slot_val / sizeof s->slot_val[0]) ? word : -2;
}

/* The lpt schedule's instructions (see the file comment); 0 when in is none of them (or faulted: s->r says). */
static int step_lpt(sim *s, warp *x, const insn *in, int *handled)
{
    const char *op = in->op;
    int atom = strcmp(op, "atom.global.add.u32") == 0, red = strcmp(op, "red.global.max.u32") == 0;
    int ld = strcmp(op, "ld.shared.u32") == 0;
    *handled = 0;
    if (!atom && !red && !ld) return 1; /* (a slot's st.shared: do_st_shared, its value kept by step) */
    if (!s->o->slot_bytes && (atom || red))
        return fault(s, PIPE_MODEL, "line %d: %s in a kernel run without lpt slots", in->line, op);
    int word = ld ? slot_word(s, x, in, 1) : -1;
    if (ld && word == -1) return 1; /* another shared word: not the schedule's */
    if (word == -2) return fault(s, PIPE_MODEL, "line %d: %s at an address the simulator cannot work out", in->line, op);
    int n = lanes(s, x, in);
    if (n < 0) return 0;
    *handled = 1;
    if (!n) {
        x->t.pc++;
        if (x->lockstep) x->u.pc = x->t.pc;
        return 1;
    }
    if ((atom || red) && n > 1)
        return fault(s, PIPE_MODEL, "line %d: %s by a whole warp (the counter takes one fetch a producer)", in->line, op);
    uint64_t v = 0;
    if (atom) {
        v = s->counter;
        s->counter += 1 + (rnd(s, 3) == 0); /* now and then a tile another CTA took */
    } else if (red) {
        if (!sim_value(s->p, &x->t, s->w, &in->a[1], &v))
            return fault(s, PIPE_MODEL, "line %d: red.max of an unknown value", in->line);
        if ((uint32_t)v > s->counter) s->counter = (uint32_t)v;
    } else {
        int u = s->slot_warp[word], w = (int)(x - s->wp);
        if (s->slot_stamp[word] && u != w && s->slot_stamp[word] > x->vc.c[u]) /* word by word: the slots share a chunk */
            return fault(s, PIPE_EARLY_READ, "line %d: warp %d's ld.shared of lpt slot word %d before warp %d's st.shared "
                                             "into it (line %d) reached it",
                         in->line, w, word, u, s->slot_line[word]);
        v = s->slot_val[word];
    }
    if (!red) {
        sim_set(&x->t, &in->a[0], v, 1);
        if (x->lockstep && n == 32) sim_set(&x->u, &in->a[0], v, 1);
    }
    x->t.pc++;
    if (x->lockstep) x->u.pc = x->t.pc;
    return 1;
}

static int step(sim *s, warp *x)
{
    const insn *in = &s->p->v[x->t.pc];
    int tm_addr = tm_address_load(s, x, in), lock = x->lockstep, handled = 0;
    int word = s->o->slot_bytes && strcmp(in->op, "st.shared.u32") == 0 ? slot_word(s, x, in, 0) : -1;
    uint64_t stored = 0;
    int known = word >= 0 && sim_guard(&x->t, in) == 1 && sim_value(s->p, &x->t, s->w, &in->a[1], &stored);
    /* shfl.sync.idx from lane 0: lane 31 gets lane 0's value (the interpreter gives each lane its own) */
    uint64_t bcast = 0;
    int shfl0 = x->lockstep && strcmp(in->op, "shfl.sync.idx.b32") == 0 && in->a[2].kind == O_IMM && in->a[2].imm == 0 &&
                sim_guard(&x->t, in) == 1 && sim_value(s->p, &x->t, s->w, &in->a[1], &bcast);
    if (!step_lpt(s, x, in, &handled)) return 0;
    if (handled) return 1;
    int ok = is_sync(in->op) ? step_sync(s, x, in) : step_plain(s, x, in);
    if (ok && shfl0 && x->lockstep) sim_set(&x->u, &in->a[0], bcast, 1);
    if (ok && known) {
        int w = (int)(x - s->wp);
        s->slot_val[word] = (uint32_t)stored;
        s->slot_warp[word] = w, s->slot_stamp[word] = x->vc.c[w], s->slot_line[word] = in->line;
    }
    else if (ok && word >= 0 && sim_guard(&x->t, in) != 0)
        return fault(s, PIPE_MODEL, "line %d: an lpt slot written with a value the simulator does not know", in->line);
    if (ok && tm_addr) {
        sim_set(&x->t, &in->a[0], TM_BASE, 1);
        if (lock) sim_set(&x->u, &in->a[0], TM_BASE, 1);
    }
    if (ok && !x->lockstep && x->t.pc == x->twin_pc) x->lockstep = 1; /* reconverged */
    return ok;
}

static int runnable(const sim *s, const warp *x)
{
    if (x->state == W_RUN) return 1;
    if (x->state == W_MBAR) return (s->bars[x->wait_bar].phase & 1) != x->wait_parity;
    if (x->state == W_NBAR) return s->nb[x->wait_bar].gen != x->wait_gen;
    return 0;
}

/* A warp released by a named barrier takes what the barrier collected; one at an mbarrier runs its wait again. */
static void wake(sim *s, warp *x)
{
    if (x->state == W_MBAR) x->state = W_RUN;
    if (x->state == W_NBAR) {
        vc_join(&x->vc, &s->nb[x->wait_bar].last);
        x->state = W_RUN;
        s->r->named_syncs++;
    }
}

static void report_deadlock(sim *s)
{
    char buf[sizeof s->r->text];
    int n = snprintf(buf, sizeof buf, "every warp waits:");
    for (int i = 0; i < s->n_warps && n < (int)sizeof buf; i++) {
        const warp *x = &s->wp[i];
        if (x->state == W_MBAR) {
            const mbar *b = &s->bars[x->wait_bar];
            n += snprintf(buf + n, sizeof buf - (size_t)n,
                          " warp %d at line %d on mbarrier +%u (line %d) parity %d: phase %d, %d of %d arrivals "
                          "missing, %lld bytes;",
                          i, line_of(s, x), b->addr, b->line, x->wait_parity, b->phase, b->pending, b->count,
                          (long long)b->tx);
        } else if (x->state == W_NBAR) {
            const nbar *b = &s->nb[x->wait_bar];
            n += snprintf(buf + n, sizeof buf - (size_t)n, " warp %d at line %d on named barrier %d: %d of %d threads;",
                          i, s->p->v[x->t.pc - 1].line, x->wait_bar, b->arrived, b->expected);
        }
    }
    fault(s, PIPE_DEADLOCK, "%s", buf);
}

static void check_leftovers(sim *s)
{
    if (s->n_ops) {
        fault(s, PIPE_LEFTOVER, "the CTA ended with %d TMA loads in flight (line %d)", s->n_ops, s->ops[0].line);
        return;
    }
    for (int i = 0; i < s->n_bars; i++) {
        const mbar *b = &s->bars[i];
        if (b->pending != b->count || b->tx)
            fault(s, PIPE_LEFTOVER, "the CTA ended with mbarrier +%u (line %d) mid-phase %d: %d of %d arrivals, %lld "
                                    "bytes to come",
                  b->addr, b->line, b->phase, b->count - b->pending, b->count, (long long)b->tx);
    }
    if (s->tm.allocated)
        fault(s, PIPE_TMEM, "the CTA ended with the %d tensor memory columns of line %d not freed", s->tm.cols,
              s->tm.alloc_line);
    if ((s->tm.allocated || s->tm.freed) && !s->tm.relinquished)
        fault(s, PIPE_TMEM, "the CTA allocated tensor memory (line %d) and never relinquished the permit",
              s->tm.alloc_line);
    for (int i = 0; i < PS_NBARS; i++)
        if (s->nb[i].arrived)
            fault(s, PIPE_LEFTOVER, "the CTA ended with named barrier %d holding %d of %d threads (line %d)", i,
                  s->nb[i].arrived, s->nb[i].expected, s->nb[i].line);
}

/* ---- set-up ------------------------------------------------------------------------------------------------- */
world *pipe_world_dense(const fj_plan *pl, const fajit_attention_args *a, unsigned nctaid, pipe_opts *o)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    int sw = pl->cfg.swizzle;
    fj_forward_params_tma(a, pl, &w->tprm.tma);
    if (pl->lpt) /* as fj_lpt_counter sets it (the counter's address is not read: the simulator keeps it) */
        w->tprm.tma.sched_heads = (uint32_t)fj_sched_section_heads(a->heads_q, a->heads_kv, a->seqlen_k, a->head_dim,
                                                                   w->tprm.tma.n_mblocks, nctaid);
    if (pl->cfg.mods) w->pblk = fj_variant_params(pl, a, &w->tprm.tma, sizeof w->tprm.tma, &w->blk);
    w->ws = 1, w->cta_b = -1, w->box = w->block_n = pl->cfg.block_n, w->q_box_bytes = pl->cfg.block_m * sw;
    *o = (pipe_opts){.nctaid = nctaid, .threads = pl->threads, .q_map_off = offsetof(fj_fwd_params_tma, tmap_q),
                     .k_map_off = offsetof(fj_fwd_params_tma, tmap_k), .v_map_off = offsetof(fj_fwd_params_tma, tmap_v),
                     .q_box_bytes = w->q_box_bytes, .kv_box_bytes = w->box * sw, .o_box_bytes = 64 * sw,
                     .slot_off = pl->lpt ? pl->sched_off : 0, .slot_bytes = pl->lpt ? FJ_SCHED_SLOT_BYTES * FJ_SCHED_SLOTS : 0};
    return w;
}

/* ---- the scheduler ------------------------------------------------------------------------------------------- */
int pipe_run(const prog *p, world *w, const pipe_opts *o, pipe_report *r)
{
    memset(r, 0, sizeof *r);
    sim *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->p = p, s->w = w, s->o = o, s->r = r, s->rng = o->seed * 2654435761ull + 1;
    tm_init(&s->tm);
    s->n_warps = (o->threads + 31) / 32;
    assert_true(s->n_warps <= PS_W);
    r->warps = s->n_warps;
    w->why[0] = '\0';
    for (int i = 0; i < s->n_warps; i++) {
        warp *x = &s->wp[i];
        x->t.val = calloc((size_t)p->n_regs, 8), x->t.known = calloc((size_t)p->n_regs, 1);
        x->u.val = calloc((size_t)p->n_regs, 8), x->u.known = calloc((size_t)p->n_regs, 1);
        assert_true(x->t.val && x->t.known && x->u.val && x->u.known);
        x->t.tid = 32u * (unsigned)i, x->t.ctaid[0] = o->ctaid, x->t.nctaid_x = o->nctaid;
        x->u.tid = x->t.tid + 31, x->u.ctaid[0] = o->ctaid, x->u.nctaid_x = o->nctaid, x->lockstep = 1;
        for (int j = 0; j < MAX_BARS; j++) x->seen[j] = -2;
    }
    for (int i = 0; i < o->vt_stages && s->n_regions < PS_REGIONS; i++) { /* FP8's Vt ring: boxes no load fills */
        region *g = &s->reg[s->n_regions++];
        memset(g, 0, sizeof *g);
        g->lo = (uint32_t)(o->vt_off + i * o->vt_bytes), g->hi = g->lo + (uint32_t)o->vt_bytes;
    }
    long limit = o->max_steps ? o->max_steps : 50000000;
    int ready[PS_W];
    while (r->kind == PIPE_OK) {
        int n = 0, live = 0;
        for (int i = 0; i < s->n_warps; i++) {
            live += s->wp[i].state != W_DONE;
            if (runnable(s, &s->wp[i])) ready[n++] = i;
        }
        if (!live) break;
        if (s->n_ops && (!n || rnd(s, 4) == 0)) { /* a load lands, at random or when nothing else can move */
            tma_complete(s, (int)rnd(s, (unsigned)s->n_ops));
            continue;
        }
        if (!n) {
            report_deadlock(s);
            break;
        }
        warp *x = &s->wp[ready[rnd(s, (unsigned)n)]];
        wake(s, x);
        for (int q = 1 + (int)rnd(s, 48); q > 0 && x->state == W_RUN && r->kind == PIPE_OK; q--) {
            step(s, x);
            if (++r->steps > limit) fault(s, PIPE_MODEL, "over %ld instructions: a livelock?", limit);
        }
    }
    if (r->kind == PIPE_OK) check_leftovers(s);
    for (int i = 0; i < s->n_warps; i++)
        free(s->wp[i].t.val), free(s->wp[i].t.known), free(s->wp[i].u.val), free(s->wp[i].u.known);
    free(s);
    return r->kind;
}
