/*
 * test_pipe_sim.c - the pipeline simulator (pipe_sim.c) over the sm_90a warp-specialized kernels (label unit; no GPU,
 * no ptxas): every default (each head dim, causal or not) and hand-picked schedules (1-3 consumer warpgroups, 2-4
 * stages, ping-pong and overlap on and off, the split / seqlens / GQA-packed / paged decode variants), each over
 * several work tiles per CTA and several ring wrap-arounds, under several interleavings, must run to the end with no
 * fault; and each pipeline bug of pipe_mutate.c, injected into the PTX, must be reported, as the kind it causes.
 * With --ptxas (ctest test_pipe_mutate_ptxas, label ptxas): every mutated kernel still assembles with ptxas for sm_90a
 * (d128: also with the runtime's compiler), so test_gpu_pipe_bugs runs what the simulator judged.
 * Run: ctest --test-dir build -R test_pipe_sim --output-on-failure   (FAJIT_TEST_VERBOSE=1: a line per run;
 * FAJIT_PIPE_SIM_SEEDS=N: N interleavings per CTA instead of 3; FAJIT_PIPE_SIM_DUMP=file: a failing run's PTX;
 * FAJIT_PIPE_SIM_ONLY=pattern: only the tests whose names match, e.g. "test_sm100*")
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe_mutate.h"
#include "pipe_sim.h"
#include "codegen/sm100.h"
#include "runtime/compile.h"
#include "test_support.h"

#define MAX_SEEDS 64

/* Interleavings per CTA: 3, or FAJIT_PIPE_SIM_SEEDS (up to 64) for a deeper search by hand. */
static int seeds(void)
{
    const char *e = getenv("FAJIT_PIPE_SIM_SEEDS");
    int n = e && *e ? atoi(e) : 3;
    return n < 1 ? 1 : n > MAX_SEEDS ? MAX_SEEDS : n;
}

typedef struct sim_case {
    int dim, causal, block_m, block_n, stages, overlap, pingpong; /* 0: the heuristic's; overlap, pingpong -1: off */
    unsigned variant;                                             /* FJ_VARIANT_* (decode) or 0 */
    int mods, win_left, win_right, chunk;                         /* attention variants (FAJIT_MOD_*) */
    int seqlen_q, seqlen_k;                                       /* 0: 3 row blocks - 5, 6 KV tiles + 7 */
    int sm100;                                                    /* 1: the sm_100a kernel (sm100_roles.c) */
    const char *fp8;                                              /* FP8 (e4m3): FAJIT_FP8_KNOBS ("-": unset) */
    int roll;                                                     /* config roll: 1 rolled KV loop, -1 unrolled (issue 23) */
    int kv_desc;                                                  /* 1: KV tiles descending (FAJIT_KV_ORDER=desc) */
    int sched;                                                    /* config sched: 1 the lpt schedule (sched.c) */
    int cross_tile;                                               /* config cross_tile: 1 the cross-tile tail */
} sim_case;

typedef struct built {
    fj_plan pl;
    char *ptx;
    char what[200];
} built;

static int verbose(void) { return getenv("FAJIT_TEST_VERBOSE") && *getenv("FAJIT_TEST_VERBOSE") == '1'; }

static void build(const sim_case *c, built *b)
{
    fajit_config cfg = {.arch = c->sm100 ? FAJIT_ARCH_SM100A : FAJIT_ARCH_SM90A,
                        .dtype = c->fp8 ? FAJIT_DTYPE_E4M3 : FAJIT_DTYPE_BF16, .head_dim = c->dim, .causal = c->causal,
                        .block_m = c->block_m, .block_n = c->block_n, .stages = c->stages,
                        .overlap = c->overlap, .pingpong = c->pingpong, .mods = c->mods, .roll = c->roll,
                        .sched = c->sched, .cross_tile = c->cross_tile};
    if (c->fp8 && strcmp(c->fp8, "-") != 0) setenv("FAJIT_FP8_KNOBS", c->fp8, 1);
    if (c->kv_desc) setenv("FAJIT_KV_ORDER", "desc", 1);
    fj_config_heuristic(&cfg, &cfg, NULL, 0);
    fajit_status st = fj_plan_build_variant(&cfg, c->variant, &b->pl);
    unsetenv("FAJIT_FP8_KNOBS");
    unsetenv("FAJIT_KV_ORDER");
    if (st == FAJIT_OK && c->kv_desc && !c->sm100 && !b->pl.kv_desc) fail_msg("kv_desc asked for, plan ascending");
    if (st != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&b->pl, b->what, sizeof b->what);
    size_t len;
    if (fj_generate_ptx_plan(&b->pl, 0, &b->ptx, &len) != FAJIT_OK) fail_msg("%s: %s", b->what, fajit_errmsg());
}

/* The world of one problem: B 2, Hq 2, Hkv 1 (GQA), the case's lengths; decode fields for the variants (seqlens_k
 * per batch, 2 splits, pages of block_n x 2 rows in a scrambled pool). The grid: 2 CTAs, so each takes every other
 * work tile. */
static world *make_world(const sim_case *c, const fj_plan *pl, pipe_opts *o)
{
    int bm = pl->cfg.block_m, bn = pl->cfg.block_n, d = c->dim;
    int nq = c->seqlen_q ? c->seqlen_q : 3 * bm - 5, nk = c->seqlen_k ? c->seqlen_k : 6 * bn + 7;
    int batch = 2, hq = 2, hkv = 1;
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = c->fp8 ? FAJIT_DTYPE_E4M3 : FAJIT_DTYPE_BF16, a.batch = batch, a.heads_q = hq, a.heads_kv = hkv, a.seqlen_q = nq, a.seqlen_k = nk;
    a.head_dim = d, a.causal = c->causal;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    a.window = (c->mods & FAJIT_MOD_WINDOW) != 0, a.window_left = c->win_left, a.window_right = c->win_right;
    a.softcap = c->mods & FAJIT_MOD_SOFTCAP ? 30.0f : 0.0f, a.attention_chunk = c->chunk;
    a.sinks = c->mods & FAJIT_MOD_SINKS ? BASE_WS : 0, a.alibi_slopes = c->mods & FAJIT_MOD_ALIBI ? BASE_WS + 4096 : 0;
    int64_t qs[3] = {(int64_t)hq * nq * d, (int64_t)nq * d, d}, ks[3] = {(int64_t)hkv * nk * d, (int64_t)nk * d, d};
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, ks, sizeof ks);
    if (!c->variant) {
        world *w = pipe_world_dense(pl, &a, 2, o);
        if (pl->fp8) o->vt_off = pl->vt_off, o->vt_bytes = pl->kv_tile_bytes, o->vt_stages = pl->cfg.stages;
        return w;
    }
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->batch = batch, w->hkv = hkv, w->group = hq / hkv, w->splits = 1, w->dim = d, w->cta_b = -1;
    w->page = bn, w->pages_per_seq = 1;
    fj_forward_params(&a, pl, &w->prm.base);
    w->splits = c->variant & FJ_VARIANT_SPLIT ? 2 : 1;
    w->use_lens = (c->variant & FJ_VARIANT_SEQLENS) != 0, w->packed = (c->variant & FJ_VARIANT_PACK) != 0;
    w->lens[0] = nk - bn - 3, w->lens[1] = nk;
    w->prm.seqlens_k = w->use_lens ? BASE_LENS : 0;
    w->prm.part_o = BASE_WS, w->prm.part_lse = BASE_WS + (1u << 30);
    w->prm.splits = (uint32_t)w->splits, w->prm.batch = (uint32_t)batch;
    if (c->variant & FJ_VARIANT_PAGED) {
        w->page = 2 * bn, w->pages_per_seq = (nk + w->page - 1) / w->page;
        w->prm.block_table = BASE_TABLE, w->prm.max_pages = (uint32_t)w->pages_per_seq;
        w->prm.page_size = (uint32_t)w->page;
        while ((1 << w->prm.page_shift) < w->page) w->prm.page_shift++;
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < MAX_PAGES; i++)
                w->table[b][i] = i < w->pages_per_seq ? (b * w->pages_per_seq + i) * 3 % (batch * w->pages_per_seq)
                                                      : -1;
    }
    ws_setup(w, pl, &a);
    *o = (pipe_opts){.nctaid = 2, .threads = pl->threads, .q_map_off = offsetof(fj_fwd_params_tma, tmap_q),
                     .k_map_off = offsetof(fj_fwd_params_tma, tmap_k), .v_map_off = offsetof(fj_fwd_params_tma, tmap_v),
                     .q_box_bytes = w->q_box_bytes, .kv_box_bytes = w->box * 128, /* ws_setup: 128-byte swizzle */
                     .o_box_bytes = 64 * 128};
    if (pl->fp8) /* rows of head_dim bytes in boxes of the swizzle span; V transposed into the Vt ring */
        o->kv_box_bytes = w->box * pl->cfg.swizzle, o->vt_off = pl->vt_off, o->vt_bytes = pl->kv_tile_bytes,
        o->vt_stages = pl->cfg.stages;
    return w;
}

/* FAJIT_PIPE_SIM_DUMP=file: the PTX of a failing run is written there (its line numbers are the report's). */
static void dump(const char *ptx)
{
    const char *path = getenv("FAJIT_PIPE_SIM_DUMP");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (f) fputs(ptx, f), fclose(f), printf("PTX written to %s\n", path);
}

/* Run both CTAs of c's kernel (ptx: mutated or not) under seeds() interleavings; the reports in r[cta][seed]. */
static void run_all(const sim_case *c, const built *b, const char *ptx, pipe_report r[2][MAX_SEEDS])
{
    prog p;
    parse_prog(&p, ptx);
    pipe_opts o;
    world *w = make_world(c, &b->pl, &o);
    for (unsigned cta = 0; cta < 2; cta++)
        for (unsigned seed = 0; seed < (unsigned)seeds(); seed++) {
            o.ctaid = cta, o.seed = seed;
            pipe_run(&p, w, &o, &r[cta][seed]);
        }
    free(w), free(p.v);
}

/* ---- clean kernels ------------------------------------------------------------------------------------------ */
static void expect_clean(const sim_case *c)
{
    built b;
    build(c, &b);
    static pipe_report r[2][MAX_SEEDS];
    run_all(c, &b, b.ptx, r);
    for (int cta = 0; cta < 2; cta++)
        for (int s = 0; s < seeds(); s++) {
            const pipe_report *x = &r[cta][s];
            if (x->kind != PIPE_OK) dump(b.ptx);
            if (x->kind != PIPE_OK)
                fail_msg("%s (Nq %d Nk %d): CTA %d seed %d: %s: %s", b.what, c->seqlen_q, c->seqlen_k, cta, s,
                         pipe_kind_name(x->kind), x->text);
            /* it ran the pipeline: loads, reads, and each ring slot's barriers through several phases */
            if (x->tma_loads < 4 || x->wgmma_reads < 4 || x->max_phase < 3)
                fail_msg("%s: CTA %d seed %d ran too little: %d loads, %d reads, phase %d", b.what, cta, s,
                         x->tma_loads, x->wgmma_reads, x->max_phase);
            /* sm_100a: tensor memory allocated, written, read and freed (pipe_tmem.c checked each access) */
            if (c->sm100 && (x->tmem_reads < 16 || x->tmem_writes < 16 || !x->tmem_freed))
                fail_msg("%s: CTA %d seed %d: tensor memory %d reads, %d writes, %s", b.what, cta, s, x->tmem_reads,
                         x->tmem_writes, x->tmem_freed ? "freed" : "never freed");
        }
    const pipe_report *x = &r[0][0];
    if (verbose())
        printf("PASS %-70s %2d warps: %5ld steps, %3d loads, %4d reads, %3d phases (max %d), %d waits (%d slept), "
               "tensor memory %d reads %d writes\n",
               b.what, x->warps, x->steps, x->tma_loads, x->wgmma_reads, x->phases, x->max_phase, x->waits,
               x->blocked_waits, x->tmem_reads, x->tmem_writes);
    fajit_free(b.ptx);
}

/* Every default the heuristic picks for the sm_90a path: each head dim, causal or not. */
static void test_defaults(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++)
        for (int causal = 0; causal < 2; causal++) expect_clean(&(sim_case){.dim = dims[i], .causal = causal});
}

/* The sm_100a kernel (sm100_roles.c on the frame; tcgen05.commit arrives on its barriers, tcgen05.mma reads K / V through its
 * descriptors until the commit): every default, 2-4 stages, one KV tile, causal Nq > Nk (rows with no key), a long
 * sequence (16 KV tiles a work tile) - no fault. */
static void test_sm100(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++)
        for (int causal = 0; causal < 2; causal++)
            expect_clean(&(sim_case){.dim = dims[i], .causal = causal, .sm100 = 1});
    expect_clean(&(sim_case){.dim = 128, .stages = 3, .sm100 = 1, .block_n = 64});
    expect_clean(&(sim_case){.dim = 64, .stages = 4, .causal = 1, .sm100 = 1});
    expect_clean(&(sim_case){.dim = 128, .sm100 = 1, .seqlen_q = 300, .seqlen_k = 100});
    expect_clean(&(sim_case){.dim = 128, .causal = 1, .sm100 = 1, .seqlen_q = 700, .seqlen_k = 200});
    expect_clean(&(sim_case){.dim = 64, .sm100 = 1, .seqlen_q = 200, .seqlen_k = 16 * 128 - 3});
    /* two query tiles in flight (pingpong): every head dim whose two tiles fit tensor memory, the edges */
    static const int pp_dims[] = {64, 96, 128};
    for (int i = 0; i < 3; i++)
        for (int causal = 0; causal < 2; causal++)
            expect_clean(&(sim_case){.dim = pp_dims[i], .causal = causal, .sm100 = 1, .pingpong = 1});
    expect_clean(&(sim_case){.dim = 128, .stages = 3, .sm100 = 1, .pingpong = 1, .block_n = 32});
    expect_clean(&(sim_case){.dim = 128, .sm100 = 1, .pingpong = 1, .seqlen_q = 300, .seqlen_k = 60});
    expect_clean(&(sim_case){.dim = 64, .causal = 1, .sm100 = 1, .pingpong = 1, .seqlen_q = 700, .seqlen_k = 200});
    expect_clean(&(sim_case){.dim = 64, .sm100 = 1, .pingpong = 1, .seqlen_q = 500, .seqlen_k = 16 * 128 - 3});
}

/* A pipeline bug injected into a kernel's PTX text: the first instruction line holding `needle` and `tail` (NULL:
 * "+off]"; with nth, the nth such line after the first) is commented out, or, with `from`, has its first `from`
 * replaced by `to` (no longer than it; the rest of the line stays). */
typedef struct injected_bug {
    const char *name, *needle;
    int off, kind, kind2;
    const char *tail;
    int nth;
    const char *from, *to;
} injected_bug;

/* Each bug in c's kernel must be reported, as kind or kind2, in every run. */
static void expect_injected(const sim_case *c, built *b, const injected_bug *bugs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *ptx = strdup(b->ptx), tail[32];
        assert_non_null(ptx);
        snprintf(tail, sizeof tail, "%s", bugs[i].tail ? bugs[i].tail : "");
        if (!bugs[i].tail) snprintf(tail, sizeof tail, "+%d]", bugs[i].off);
        char *line = ptx, *hit = NULL;
        int skip = bugs[i].nth;
        while (line && *line) { /* the first (nth) instruction line with both */
            char *eol = strchr(line, '\n');
            size_t len = eol ? (size_t)(eol - line) : strlen(line);
            char save = line[len];
            line[len] = 0;
            int match = strstr(line, bugs[i].needle) && strstr(line, tail) && skip-- == 0;
            char *at = match && bugs[i].from ? strstr(line, bugs[i].from) : NULL;
            line[len] = save;
            if (match && bugs[i].from) {
                size_t nf = strlen(bugs[i].from), nt = strlen(bugs[i].to);
                if (!at || nt > nf) fail_msg("%s: no %s in the line, or %s is longer", bugs[i].name, bugs[i].from,
                                             bugs[i].to);
                memset(at, ' ', nf);
                memcpy(at, bugs[i].to, nt);
                hit = line;
                break;
            }
            if (match) {
                hit = line;
                memset(line, ' ', len);
                memcpy(line, "//", 2);
                break;
            }
            line = eol ? eol + 1 : NULL;
        }
        if (!hit) fail_msg("%s: no line with %s and %s", bugs[i].name, bugs[i].needle, tail);
        static pipe_report r[2][MAX_SEEDS];
        run_all(c, b, ptx, r);
        for (int cta = 0; cta < 2; cta++)
            for (int sd = 0; sd < seeds(); sd++)
                if (r[cta][sd].kind != bugs[i].kind && r[cta][sd].kind != bugs[i].kind2)
                    fail_msg("%s: CTA %d seed %d: %s: %s", bugs[i].name, cta, sd, pipe_kind_name(r[cta][sd].kind),
                             r[cta][sd].text);
        if (verbose()) printf("CAUGHT %s: %s\n", bugs[i].name, r[0][0].text);
        free(ptx);
    }
}

/* Bugs in the FP8 kernel's transposer protocol and in O staged in the V ring (regs,vt,ostage, FA3's D256 tile). */
static void test_fp8_bugs(void **state)
{
    (void)state;
    sim_case c = {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1,
                  .fp8 = "regs,vt,ostage"};
    built b;
    build(&c, &b);
    const fj_plan *p = &b.pl;
    assert_int_equal(p->o_stage, 2);
    const injected_bug bugs[] = {
        /* a transposer's VT full[0] arrival dropped: the consumers never see Vt's stage 0 */
        {"drop VT full", "mbarrier.arrive", p->vt_bar, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* its V empty[1] arrival dropped: the producer never refills V's stage 1 */
        {"drop V empty", "mbarrier.arrive", p->bar_off + 8 * (4 + 4 * 1 + 3), PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the O free arrival dropped: the producer never loads the next work tile's first V */
        {"drop O free", "mbarrier.arrive", p->bar_off + 8 * (4 + 4 * p->cfg.stages), PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the producer's O free wait dropped: a V load overwrites O before its TMA store has read it */
        {"skip O free wait", "mbarrier.try_wait", p->bar_off + 8 * (4 + 4 * p->cfg.stages), PIPE_EARLY_WRITE,
         PIPE_MODEL, NULL, 0, NULL, NULL},
    };
    expect_injected(&c, &b, bugs, sizeof bugs / sizeof bugs[0]);
    fajit_free(b.ptx);
}

/* Bugs in vt4's protocol (warp 0 loads, then transposes with warps 1-3): its lane 0's VT full arrival dropped (the
 * count of 128 is never met), its V full wait dropped (ldmatrix reads V before the TMA load completed), its VT empty
 * wait dropped (stmatrix overwrites a Vt stage the consumers' wgmma may still read: the simulator reports the wgmma's
 * read racing the write). */
static void test_fp8_vt4_bugs(void **state)
{
    (void)state;
    sim_case c = {.dim = 128, .fp8 = "vt4"};
    built b;
    build(&c, &b);
    const fj_plan *p = &b.pl;
    assert_int_equal(p->fp8_vt4, 1);
    assert_int_equal(p->transpose_warps, 4);
    const injected_bug bugs[] = {
        {"vt4: drop warp 0's VT full", "mbarrier.arrive", p->vt_bar, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        {"vt4: skip warp 0's V full wait", "mbarrier.try_wait", p->bar_off + 8 * (4 + 1), PIPE_EARLY_READ,
         PIPE_EARLY_READ, NULL, 0, NULL, NULL},
        {"vt4: skip warp 0's VT empty wait", "mbarrier.try_wait", p->vt_bar + 8, PIPE_EARLY_READ, PIPE_EARLY_WRITE,
         NULL, 0, NULL, NULL},
    };
    expect_injected(&c, &b, bugs, sizeof bugs / sizeof bugs[0]);
    fajit_free(b.ptx);
}

/* Bugs in the sm_100a kernels' own barriers and the frame's tensor memory teardown, injected into their PTX text, one
 * query tile and two (pingpong): each must be caught in every run. */
static void test_sm100_bugs(void **state)
{
    (void)state;
    sim_case c = {.dim = 128, .sm100 = 1}, pp = {.dim = 128, .sm100 = 1, .pingpong = 1};
    built b;
    build(&c, &b);
    const fj_plan *p = &b.pl;
    const injected_bug bugs[] = {
        /* the epilogue's O free arrival dropped: the MMA waits for it before the next work tile's first PV */
        {"drop O free", "mbarrier.arrive", p->sm100_bar + 8 * FJ_SB_O_FREE, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the MMA's commit to K empty dropped: the producer never refills the stage */
        {"drop K empty commit", "tcgen05.commit", p->bar_off + 8 * 4 + 16, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the softmax's corr full arrival dropped */
        {"drop corr full", "mbarrier.arrive", p->sm100_bar + 8 * FJ_SB_CORR_FULL, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the softmax's P full arrival dropped: the MMA never issues O += P V */
        {"drop P full", "mbarrier.arrive", p->sm100_bar + 8 * FJ_SB_P_FULL, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the correction's O ready arrival dropped */
        {"drop O ready", "mbarrier.arrive", p->sm100_bar + 8 * FJ_SB_O_READY, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the frame's tensor memory teardown: the softmax role leaves without meeting the others (named barrier) */
        {"skip teardown", "bar.sync 1", 0, PIPE_DEADLOCK, PIPE_LEFTOVER, ", 288", 0, NULL, NULL},
        /* tensor memory (pipe_tmem.c): the softmax's S full wait dropped: tcgen05.ld reads S before the MMA's commit */
        {"tmem: skip S full wait", "mbarrier.try_wait", p->sm100_bar + 8 * FJ_SB_S_FULL, PIPE_EARLY_READ,
         PIPE_EARLY_WRITE, NULL, 0, NULL, NULL},
        /* the correction's O full wait dropped: it reads O to rescale it while O += P V may still write it */
        {"tmem: skip O full wait", "mbarrier.try_wait", p->sm100_bar + 8 * FJ_SB_O_FULL, PIPE_EARLY_READ,
         PIPE_EARLY_READ, NULL, 0, NULL, NULL},
        /* P single-buffered (P[0] for every KV tile): softmax(j + 1) writes P while O += P(j) V has not released it */
        {"tmem: one P buffer", "mad.lo.u32", 0, PIPE_EARLY_WRITE, PIPE_EARLY_READ, ", 64, %r", 0, ", 64, ", ", 0, "},
        /* the softmax's tcgen05.wait::ld dropped: S(j + 2) overwrites S[b] while its loads are not complete */
        {"tmem: skip wait::ld", "tcgen05.wait::ld", 0, PIPE_EARLY_WRITE, PIPE_EARLY_WRITE, "", 0, NULL, NULL},
        /* the softmax's fence::before_thread_sync before P full dropped: its stores of P do not reach the MMA */
        {"tmem: skip fence before P full", "tcgen05.fence::before_thread_sync", 0, PIPE_EARLY_READ, PIPE_EARLY_WRITE,
         "", 1, NULL, NULL},
        /* the MMA warp (the allocator) skips the teardown barrier: it frees tensor memory before the others are done */
        {"tmem: dealloc before the last access", "bar.sync 1", 0, PIPE_TMEM, PIPE_TMEM, ", 288", 2, NULL, NULL},
        /* the dealloc names half the columns allocated */
        {"tmem: dealloc 256 of 512 columns", "tcgen05.dealloc", 0, PIPE_TMEM, PIPE_TMEM, "", 0, "512", "256"},
    };
    expect_injected(&c, &b, bugs, sizeof bugs / sizeof bugs[0]);
    fajit_free(b.ptx);
    build(&pp, &b);
    p = &b.pl;
    const injected_bug pp_bugs[] = {
        /* query tile 1's epilogue leaves O[1] without its O free arrival: the next work tile's PV1(0) waits */
        {"pp: drop O free[1]", "mbarrier.arrive", p->sm100_bar + 8 * (FJ_SB_O_FREE + 1), PIPE_DEADLOCK, PIPE_DEADLOCK,
         NULL, 0, NULL, NULL},
        /* the MMA's O full[1] commit dropped: the correction never rescales or stores query tile 1 */
        {"pp: drop O full[1] commit", "tcgen05.commit", p->sm100_bar + 8 * (FJ_SB_O_FULL + 1), PIPE_DEADLOCK,
         PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* K empty is committed after query tile 1's S only (the stage's last reader): dropped, the ring stalls */
        {"pp: drop K empty commit", "tcgen05.commit", p->bar_off + 8 * 4 + 16, PIPE_DEADLOCK, PIPE_DEADLOCK, NULL, 0, NULL, NULL},
        /* the teardown with 13 warps (two softmax warpgroups, the correction, the MMA warp) */
        {"pp: skip teardown", "bar.sync 1", 0, PIPE_DEADLOCK, PIPE_LEFTOVER, ", 416", 0, NULL, NULL},
        /* tensor memory: query tile 0's softmax reads S[0] without waiting for its commit */
        {"pp tmem: skip S full wait", "mbarrier.try_wait", p->sm100_bar + 8 * FJ_SB_S_FULL, PIPE_EARLY_READ,
         PIPE_EARLY_WRITE, NULL, 0, NULL, NULL},
        /* query tile 0's softmax without its tcgen05.wait::ld: S[0](j + 1) overwrites S[0] under its loads (the
         * correction's O full wait is no such case here: the corr full hand-over orders the PV before, S_0(j)'s commit
         * following PV_0(j - 1); dropped, the simulator sees only its phase skipped) */
        {"pp tmem: skip wait::ld", "tcgen05.wait::ld", 0, PIPE_EARLY_WRITE, PIPE_EARLY_WRITE, "", 0, NULL, NULL},
        /* the MMA warp frees tensor memory without the teardown barrier */
        {"pp tmem: dealloc before the last access", "bar.sync 1", 0, PIPE_TMEM, PIPE_TMEM, ", 416", 2, NULL, NULL},
    };
    expect_injected(&pp, &b, pp_bugs, sizeof pp_bugs / sizeof pp_bugs[0]);
    fajit_free(b.ptx);
}

/* Schedules the defaults may not pick: 1-3 consumer warpgroups, 2-4 stages, ping-pong and overlap on / off. */
static void test_schedules(void **state)
{
    (void)state;
    static const sim_case cases[] = {
        {.dim = 128, .block_m = 64, .block_n = 128, .stages = 2},                   /* one consumer warpgroup */
        {.dim = 128, .block_m = 64, .block_n = 64, .stages = 3, .causal = 1},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3},                   /* three */
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 2, .overlap = -1, .pingpong = -1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = 1},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .causal = 1},
        {.dim = 64, .block_m = 128, .block_n = 64, .stages = 4},
        {.dim = 256, .block_m = 128, .block_n = 64, .stages = 2, .causal = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* FP8 (e4m3): the producer's warps 1-3 transpose V (ldmatrix reads of the V ring, stmatrix writes of the Vt ring,
 * VT full / VT empty between them and the consumers): the defaults with each FAJIT_FP8_KNOBS set, FlashAttention-3's
 * tiles (D128 bc224 ov pp, D256 bc128 ov pp / ov), O staged in the V ring (ostage, D256), 3 stages, causal Nq > Nk
 * without O in the V ring (work tiles with no KV tile), one KV tile. */
static void test_fp8(void **state)
{
    (void)state;
    static const char *knobs[] = {"-", "", "regs", "regs,vt,ostage", "vt4", "regs,vt4,ostage"};
    static const int dims[] = {64, 128, 256};
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
        for (int i = 0; i < 3; i++)
            for (int causal = 0; causal < 2; causal++)
                expect_clean(&(sim_case){.dim = dims[i], .causal = causal, .fp8 = knobs[k]});
    static const sim_case cases[] = {
        {.dim = 128, .block_m = 128, .block_n = 224, .stages = 2, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt"},
        {.dim = 128, .block_m = 128, .block_n = 224, .stages = 2, .overlap = 1, .pingpong = 1, .causal = 1,
         .fp8 = "regs"},
        {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt,ostage"},
        {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1, .causal = 1,
         .fp8 = "regs,vt,ostage"},
        {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt"},
        /* (not causal Nq > Nk, work tiles with no KV tile, at D256 with O in the V ring or with ping-pong: the
         * simulator reports the producer's skipped O free wait as a phase gone by unseen, and ping-pong's last pass
         * left in named barrier 1 at exit; the BF16 defaults (D256, D128 causal) do the same - not FP8's) */
        {.dim = 256, .causal = 1, .fp8 = "ostage", .seqlen_q = 700, .seqlen_k = 1300},
        {.dim = 256, .fp8 = "regs,vt,ostage", .seqlen_q = 300, .seqlen_k = 100},
        /* the heuristic's D256 tiles under FlashAttention-3's knob set (regs, vt, ostage: the default with
         * FJ_FP8_D256_FA3) at odd lengths, GQA (the world's Hq 2 over Hkv 1): non-causal Nq > Nk, causal Nq < Nk and
         * Nq ~ Nk; the default with the knobs unset; the earlier tile (FAJIT_FP8_KNOBS=vt) */
        {.dim = 256, .fp8 = "regs,vt,ostage", .seqlen_q = 333, .seqlen_k = 129},
        {.dim = 256, .fp8 = "regs,vt,ostage", .seqlen_q = 257, .seqlen_k = 1001},
        {.dim = 256, .causal = 1, .fp8 = "regs,vt,ostage", .seqlen_q = 301, .seqlen_k = 999},
        {.dim = 256, .causal = 1, .fp8 = "regs,vt,ostage", .seqlen_q = 129, .seqlen_k = 131},
        {.dim = 256, .causal = 1, .fp8 = "-", .seqlen_q = 301, .seqlen_k = 999},
        {.dim = 256, .causal = 1, .fp8 = "vt", .seqlen_q = 301, .seqlen_k = 999},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = -1, .fp8 = "regs"},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = -1, .pingpong = -1, .causal = 1,
         .fp8 = "regs,vt"},
        /* vt4 (warp 0 loads, then transposes with warps 1-3, straight code): bc160 (10 key blocks: 5 a warp by key),
         * FlashAttention-3's tiles (D128 bc224; D256 bc128 with O in the V ring), 3 stages, one stage, odd lengths and
         * causal GQA */
        {.dim = 64, .block_m = 128, .block_n = 160, .stages = 2, .overlap = 1, .pingpong = -1, .fp8 = "vt4"},
        {.dim = 128, .block_m = 128, .block_n = 224, .stages = 2, .overlap = 1, .pingpong = 1, .causal = 1,
         .fp8 = "regs,vt4"},
        {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1,
         .fp8 = "regs,vt4,ostage"},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = -1, .fp8 = "vt4"},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 1, .overlap = -1, .pingpong = -1, .fp8 = "vt4"},
        {.dim = 128, .fp8 = "vt4", .seqlen_q = 300, .seqlen_k = 100},
        {.dim = 256, .causal = 1, .fp8 = "regs,vt4,ostage", .seqlen_q = 301, .seqlen_k = 999},
        {.dim = 64, .causal = 1, .fp8 = "vt4", .seqlen_q = 571, .seqlen_k = 777},
        /* the lean vt4 form (regs with two consumer warpgroups: 24 producer registers; the ring's stage set past the
         * KV loop): 3 stages, one stage, odd lengths over several work tiles */
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt4"},
        {.dim = 256, .block_m = 128, .block_n = 64, .stages = 1, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt4"},
        {.dim = 128, .causal = 1, .fp8 = "regs,vt4", .seqlen_q = 333, .seqlen_k = 1001},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* Lengths that exercise the schedule's edges: one KV tile (no wrap), a causal problem whose first row blocks see no
 * key (Nq > Nk: a work tile with no KV tile), keys shorter than a tile. */
static void test_lengths(void **state)
{
    (void)state;
    expect_clean(&(sim_case){.dim = 128, .seqlen_q = 300, .seqlen_k = 2000});
    expect_clean(&(sim_case){.dim = 128, .causal = 1, .seqlen_q = 700, .seqlen_k = 1300});
    expect_clean(&(sim_case){.dim = 64, .causal = 1, .block_n = 64, .stages = 3, .seqlen_q = 900, .seqlen_k = 1100});
}

/* The sm_90a decode variants: per-sequence lengths, split-KV, GQA packing, paged K/V. */
static void test_decode(void **state)
{
    (void)state;
    static const unsigned variants[] = {FJ_VARIANT_SEQLENS, FJ_VARIANT_SPLIT, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT,
                                        FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS};
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        expect_clean(&(sim_case){.dim = 128, .variant = variants[i], .seqlen_q = 100, .seqlen_k = 1500});
        expect_clean(&(sim_case){.dim = 64, .block_n = 64, .stages = 3, .variant = variants[i], .seqlen_q = 40,
                                 .seqlen_k = 1000});
    }
    /* FP8 (e4m3 Q / K / V) on the decode tile (br64, one consumer warpgroup): split, GQA packing (Q's box: group x Nq
     * rows), seqlens_k, paged K/V, Nq 1 and 4 */
    static const unsigned fp8_variants[] = {FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                            FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                            FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS, FJ_VARIANT_SPLIT};
    for (size_t i = 0; i < sizeof fp8_variants / sizeof *fp8_variants; i++)
        for (int d = 64; d <= 128; d *= 2)
            expect_clean(&(sim_case){.dim = d, .block_m = 64, .block_n = 64, .stages = 3, .overlap = 1, .fp8 = "-",
                                     .variant = fp8_variants[i], .seqlen_q = i == 3 ? 4 : 1, .seqlen_k = 1000});
}

/* The attention variants on the sm_90a kernel: windows (causal, two-sided, left only) move the KV range's start,
 * so loops start past tile 0 and rows see no key; chunks likewise; softcap, sinks and ALiBi change only scores. */
static void test_variants(void **state)
{
    (void)state;
    static const sim_case cases[] = {
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_WINDOW, .win_left = 300, .win_right = -1, .seqlen_q = 700,
         .seqlen_k = 1300},
        {.dim = 128, .mods = FAJIT_MOD_WINDOW, .win_left = 200, .win_right = 100, .seqlen_q = 900, .seqlen_k = 900},
        {.dim = 64, .block_n = 64, .mods = FAJIT_MOD_WINDOW, .win_left = 129, .win_right = -1, .seqlen_q = 500,
         .seqlen_k = 1000},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_CHUNK, .chunk = 256, .seqlen_q = 800, .seqlen_k = 800},
        {.dim = 256, .mods = FAJIT_MOD_SOFTCAP | FAJIT_MOD_SINKS | FAJIT_MOD_ALIBI},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALL, .win_left = 250, .win_right = -1, .chunk = 512,
         .seqlen_q = 1000, .seqlen_k = 1100},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* The rolled KV loop (config roll = 1: one body for every stage, the work tile's first KV tile joining the body at
 * its softmax half): every default with 2+ stages, both schedules, 2-4 stages, 1-3 consumer warpgroups, the lengths'
 * edges (one KV tile, work tiles with none, keys shorter than a tile), decode variants and attention variants. */
static void test_rolled(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++)
        for (int causal = 0; causal < 2; causal++) expect_clean(&(sim_case){.dim = dims[i], .causal = causal, .roll = 1});
    static const sim_case cases[] = {
        {.dim = 128, .block_m = 64, .block_n = 128, .stages = 2, .roll = 1},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .roll = 1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 2, .overlap = -1, .pingpong = -1, .roll = 1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = -1, .pingpong = -1, .causal = 1, .roll = 1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1, .roll = 1},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .causal = 1, .roll = 1},
        {.dim = 64, .block_m = 128, .block_n = 64, .stages = 4, .roll = 1},
        {.dim = 128, .seqlen_q = 300, .seqlen_k = 100, .roll = 1},                 /* one KV tile */
        /* work tiles with no KV tile (Nq > Nk, causal). Not with ping-pong: there the simulator finds a turn passed
         * to warpgroup 0 after the last tile with keys and never taken (named barrier 1 at 128 of 256 threads at
         * exit), unrolled (roll off) the same - the schedule's, not the loop shape's */
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1,
         .seqlen_q = 700, .seqlen_k = 300, .roll = 1},
        {.dim = 64, .causal = 1, .block_n = 64, .stages = 3, .seqlen_q = 900, .seqlen_k = 1100, .roll = 1},
        {.dim = 128, .variant = FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, .seqlen_q = 100, .seqlen_k = 1500, .roll = 1},
        {.dim = 128, .variant = FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS, .seqlen_q = 100, .seqlen_k = 1500, .roll = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALL, .win_left = 250, .win_right = -1, .chunk = 512,
         .seqlen_q = 1000, .seqlen_k = 1100, .roll = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* The FP8 kernels' rolled consumer loop (config roll = 1 with dtype e4m3: one body for every stage; the Vt ring's
 * barriers then stride with the K / V block, codegen.h vt_bar_stride; the producer and the transposers stay one body a
 * stage): every FP8 default of D 64 / 128 / 256, causal and not, with the knob sets of test_fp8, FlashAttention-3's
 * tiles, 3 stages, vt4, O in the V ring, the lengths' edges, and the decode tile's split / packed / paged variants. */
static void test_fp8_rolled(void **state)
{
    (void)state;
    static const char *knobs[] = {"-", "regs,vt,ostage", "vt4"};
    static const int dims[] = {64, 128, 256};
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
        for (int i = 0; i < 3; i++)
            for (int causal = 0; causal < 2; causal++)
                expect_clean(&(sim_case){.dim = dims[i], .causal = causal, .fp8 = knobs[k], .roll = 1});
    static const sim_case cases[] = {
        {.dim = 128, .block_m = 128, .block_n = 224, .stages = 2, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt",
         .roll = 1},
        {.dim = 256, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1, .causal = 1,
         .fp8 = "regs,vt,ostage", .roll = 1},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = -1, .fp8 = "regs", .roll = 1},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = -1, .pingpong = -1, .causal = 1,
         .fp8 = "regs,vt", .roll = 1},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = -1, .fp8 = "vt4", .roll = 1},
        {.dim = 128, .fp8 = "-", .seqlen_q = 300, .seqlen_k = 100, .roll = 1},
        {.dim = 256, .causal = 1, .fp8 = "regs,vt,ostage", .seqlen_q = 301, .seqlen_k = 999, .roll = 1},
        {.dim = 64, .causal = 1, .fp8 = "vt4", .seqlen_q = 571, .seqlen_k = 777, .roll = 1},
        {.dim = 128, .block_m = 64, .block_n = 64, .stages = 3, .overlap = 1, .fp8 = "-",
         .variant = FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, .seqlen_q = 1, .seqlen_k = 3000, .roll = 1},
        {.dim = 128, .block_m = 64, .block_n = 64, .stages = 3, .overlap = 1, .fp8 = "-",
         .variant = FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS, .seqlen_q = 1, .seqlen_k = 1000, .roll = 1},
        /* the lean vt4 producer (regs with two consumer warpgroups; its ring stage set past the KV loop) */
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = 1, .pingpong = 1, .fp8 = "regs,vt4",
         .roll = 1},
        {.dim = 128, .causal = 1, .fp8 = "regs,vt4", .seqlen_q = 333, .seqlen_k = 1001, .roll = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* The lpt schedule of causal kernels (config sched = 1: the producer takes each work tile from a global counter and
 * hands it to the consumers through a shared slot; sched.c): the simulator hands out the tiles in order, now and then
 * skipping one as if another CTA took it, and keeps the slots' values. Every causal default, 1-3 consumer warpgroups,
 * ping-pong and overlap on and off, rolled and not, 2-4 stages, the lengths' edges (one KV tile, Nq > Nk with work
 * tiles that see no key, Nq < Nk), sinks and softcap - no fault. (The hang of session 7, the one-ahead fetch landing in
 * the Q round's register, is reported here as a deadlock: checked on the first default.) */
static void test_lpt(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++) expect_clean(&(sim_case){.dim = dims[i], .causal = 1, .sched = 1});
    static const sim_case cases[] = {
        {.dim = 128, .causal = 1, .block_m = 64, .block_n = 128, .stages = 2, .sched = 1},
        {.dim = 64, .causal = 1, .block_m = 192, .block_n = 64, .stages = 3, .sched = 1},
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 128, .stages = 2, .overlap = -1, .pingpong = -1, .sched = 1},
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 64, .stages = 4, .overlap = 1, .pingpong = -1, .sched = 1},
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .roll = -1,
         .sched = 1},
        {.dim = 128, .causal = 1, .seqlen_q = 300, .seqlen_k = 100, .sched = 1},                      /* one KV tile */
        {.dim = 64, .causal = 1, .block_n = 64, .stages = 3, .seqlen_q = 900, .seqlen_k = 1100, .sched = 1},
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1,
         .seqlen_q = 700, .seqlen_k = 300, .sched = 1},                                              /* no-key tiles */
        {.dim = 64, .causal = 1, .block_m = 128, .mods = FAJIT_MOD_SINKS | FAJIT_MOD_SOFTCAP, .seqlen_q = 1000, .seqlen_k = 1000,
         .sched = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* The cross-tile tail (config cross_tile = 1: a work tile's last PV goes in with the CTA's next work tile's first
 * S, the epilogue under that S; sm90_roles.c xt_tail): both schedules, causal and not, 1 / 2 / 3 stages of the ring
 * where the rolled loop takes them, 2 and 3 consumer warpgroups, the lengths' edges (one KV tile, Nq < Nk), the
 * variants it is picked for (sinks, a window of 128 keys) and its last-tile fallback. */
static void test_cross_tile(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128}; /* (192 and 256 stage O in the V ring: refused, test_config_fill) */
    for (int i = 0; i < 3; i++)
        for (int causal = 0; causal < 2; causal++) {
            sim_case c = {.dim = dims[i], .causal = causal, .block_m = 128, .overlap = 1, .pingpong = 1,
                          .cross_tile = 1};
            expect_clean(&c);
            if (causal) c.sched = 1, expect_clean(&c);
        }
    static const sim_case cases[] = {
        {.dim = 64, .causal = 1, .block_m = 192, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1, .sched = 1,
         .cross_tile = 1},                                                                            /* the pick */
        {.dim = 64, .causal = 1, .block_m = 192, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = 1,
         .cross_tile = 1},
        {.dim = 64, .causal = 1, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .sched = 1,
         .cross_tile = 1},
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 128, .overlap = 1, .pingpong = 1, .seqlen_q = 300,
         .seqlen_k = 100, .sched = 1, .cross_tile = 1},                                              /* one KV tile */
        /* (causal Nq > Nk, work tiles that see no key: the simulator reports ping-pong's last pass left in named
         * barrier 1 at exit, with the tail and without it - test_fp8's note on the BF16 defaults) */
        {.dim = 64, .causal = 1, .block_m = 128, .overlap = 1, .pingpong = 1, .seqlen_q = 571, .seqlen_k = 1301,
         .sched = 1, .cross_tile = 1},
        {.dim = 64, .causal = 1, .block_m = 128, .block_n = 128, .overlap = 1, .pingpong = 1,
         .mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, .win_left = 128, .win_right = 0, .seqlen_q = 1000,
         .seqlen_k = 1000, .cross_tile = 1},
        {.dim = 64, .causal = 1, .block_m = 192, .overlap = 1, .pingpong = 1, .mods = FAJIT_MOD_SINKS,
         .seqlen_q = 1000, .seqlen_k = 1000, .sched = 1, .cross_tile = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* KV tiles walked descending (plan.kv_desc: causal ALiBi's default, FAJIT_KV_ORDER=desc for the rest): every
 * default, both schedules, rolled and unrolled, 1-3 consumer warpgroups, the lengths' edges (one KV tile, work tiles
 * with none, Nq != Nk both ways), the decode variants (split-KV ranges, paged, per-sequence lengths) and the attention
 * variants (local ranges that start past tile 0). */
static void test_kv_desc(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int i = 0; i < 5; i++)
        for (int causal = 0; causal < 2; causal++)
            for (int roll = -1; roll <= 1; roll += 2)
                expect_clean(&(sim_case){.dim = dims[i], .causal = causal, .roll = roll, .kv_desc = 1});
    static const sim_case cases[] = {
        {.dim = 128, .block_m = 64, .block_n = 128, .stages = 2, .causal = 1, .kv_desc = 1},
        {.dim = 64, .block_m = 192, .block_n = 128, .stages = 3, .kv_desc = 1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = -1, .pingpong = -1, .causal = 1,
         .roll = -1, .kv_desc = 1},
        {.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = -1, .pingpong = -1, .causal = 1,
         .roll = 1, .kv_desc = 1},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .causal = 1, .roll = -1,
         .kv_desc = 1},
        {.dim = 128, .block_m = 128, .block_n = 64, .stages = 3, .overlap = 1, .pingpong = 1, .causal = 1, .roll = 1,
         .kv_desc = 1},
        {.dim = 128, .seqlen_q = 300, .seqlen_k = 100, .roll = 1, .kv_desc = 1}, /* one KV tile */
        {.dim = 128, .causal = 1, .block_m = 128, .block_n = 128, .stages = 2, .overlap = 1, .pingpong = -1,
         .seqlen_q = 700, .seqlen_k = 300, .roll = 1, .kv_desc = 1}, /* work tiles with no KV tile */
        {.dim = 64, .causal = 1, .block_n = 64, .stages = 3, .seqlen_q = 900, .seqlen_k = 1100, .roll = -1,
         .kv_desc = 1},
        {.dim = 128, .causal = 1, .seqlen_q = 700, .seqlen_k = 1300, .kv_desc = 1},
        {.dim = 128, .variant = FJ_VARIANT_SEQLENS, .seqlen_q = 100, .seqlen_k = 1500, .kv_desc = 1},
        {.dim = 128, .variant = FJ_VARIANT_SPLIT, .seqlen_q = 100, .seqlen_k = 1500, .kv_desc = 1},
        {.dim = 128, .variant = FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, .seqlen_q = 100, .seqlen_k = 1500, .roll = 1,
         .kv_desc = 1},
        {.dim = 128, .variant = FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS, .seqlen_q = 100, .seqlen_k = 1500, .kv_desc = 1},
        {.dim = 64, .block_n = 64, .stages = 3, .variant = FJ_VARIANT_PAGED | FJ_VARIANT_SEQLENS, .seqlen_q = 40,
         .seqlen_k = 1000, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALIBI, .seqlen_q = 1000, .seqlen_k = 1100, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALIBI, .seqlen_q = 1100, .seqlen_k = 1000, .roll = -1,
         .kv_desc = 1},
        {.dim = 64, .causal = 1, .block_m = 128, .block_n = 128, .stages = 2, .mods = FAJIT_MOD_ALIBI, .seqlen_q = 17,
         .seqlen_k = 1000, .kv_desc = 1},
        {.dim = 256, .causal = 1, .mods = FAJIT_MOD_ALIBI | FAJIT_MOD_SOFTCAP | FAJIT_MOD_SINKS, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_WINDOW, .win_left = 300, .win_right = -1, .seqlen_q = 700,
         .seqlen_k = 1300, .kv_desc = 1},
        {.dim = 128, .mods = FAJIT_MOD_WINDOW, .win_left = 200, .win_right = 100, .seqlen_q = 900, .seqlen_k = 900,
         .roll = -1, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_CHUNK, .chunk = 256, .seqlen_q = 800, .seqlen_k = 800, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALL, .win_left = 250, .win_right = -1, .chunk = 512,
         .seqlen_q = 1000, .seqlen_k = 1100, .roll = 1, .kv_desc = 1},
        {.dim = 128, .causal = 1, .mods = FAJIT_MOD_ALL, .win_left = 250, .win_right = -1, .chunk = 512,
         .seqlen_q = 1000, .seqlen_k = 1100, .roll = -1, .kv_desc = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_clean(&cases[i]);
}

/* ---- injected bugs ------------------------------------------------------------------------------------------ */
/* What each bug must be reported as: a set of PIPE_* bits. */
static const unsigned bug_kinds[BUG_COUNT] = {
    [BUG_DROP_RELEASE] = 1u << PIPE_DEADLOCK,
    [BUG_FLIP_PARITY] = 1u << PIPE_EARLY_READ | 1u << PIPE_PHASE_ALIAS | 1u << PIPE_DEADLOCK,
    [BUG_WRONG_BARRIER] = 1u << PIPE_EARLY_READ | 1u << PIPE_PHASE_ALIAS,
    [BUG_SHRINK_TX] = 1u << PIPE_EARLY_READ | 1u << PIPE_DEADLOCK | 1u << PIPE_BARRIER,
    [BUG_EARLY_RELEASE] = 1u << PIPE_EARLY_WRITE,
    [BUG_STUCK_PARITY] = 1u << PIPE_PHASE_ALIAS | 1u << PIPE_EARLY_READ | 1u << PIPE_DEADLOCK,
    [BUG_STUCK_PRODUCER] = 1u << PIPE_PHASE_ALIAS | 1u << PIPE_EARLY_WRITE | 1u << PIPE_DEADLOCK,
    [BUG_UNELECTED] = 1u << PIPE_DEADLOCK | 1u << PIPE_PHASE_ALIAS | 1u << PIPE_EARLY_WRITE | 1u << PIPE_BARRIER,
    [BUG_NO_STORE_WAIT] = 1u << PIPE_EARLY_WRITE,
};

/* Each bug but those in `skip` (1 << BUG_*: mutations written for the unrolled loop's text) must be reported as its
 * kinds in every run. */
static void expect_caught_but(const sim_case *c, unsigned skip)
{
    built b;
    build(c, &b);
    for (int bug = BUG_DROP_RELEASE; bug < BUG_COUNT; bug++) {
        char what[600];
        if (skip >> bug & 1) continue;
        char *ptx = pipe_mutate(b.ptx, bug, what, sizeof what);
        if (!ptx) fail_msg("%s: %s: %s", b.what, pipe_bug_name(bug), what);
        assert_true(strcmp(ptx, b.ptx) != 0);
        static pipe_report r[2][MAX_SEEDS];
        run_all(c, &b, ptx, r);
        int kinds[PIPE_MODEL + 1] = {0};
        for (int cta = 0; cta < 2; cta++)
            for (int s = 0; s < seeds(); s++) {
                const pipe_report *x = &r[cta][s];
                kinds[x->kind]++;
                if (!(bug_kinds[bug] >> x->kind & 1)) dump(ptx);
                if (!(bug_kinds[bug] >> x->kind & 1))
                    fail_msg("%s with %s (%s): CTA %d seed %d: %s%s%s", b.what, pipe_bug_name(bug), what, cta, s,
                             pipe_kind_name(x->kind), x->kind ? ": " : "", x->text);
            }
        if (verbose()) {
            printf("CAUGHT %-14s %s\n   %s\n   first:", pipe_bug_name(bug), b.what, what);
            for (int k = 0; k <= PIPE_MODEL; k++)
                if (kinds[k]) printf(" %s x%d", pipe_kind_name(k), kinds[k]);
            printf("\n   %s\n", r[0][0].text);
        }
        free(ptx);
    }
    fajit_free(b.ptx);
}

static void expect_caught(const sim_case *c) { expect_caught_but(c, 0); }

static void test_bugs_caught(void **state)
{
    (void)state;
    /* roll -1: the mutations are written for the unrolled loop, whatever FJ_SM90_ROLL_DEFAULT says */
    expect_caught(&(sim_case){.dim = 128, .roll = -1});
    expect_caught(&(sim_case){.dim = 64, .causal = 1, .roll = -1});
    expect_caught(&(sim_case){.dim = 256, .roll = -1});
    expect_caught(&(sim_case){.dim = 128, .block_m = 128, .block_n = 128, .stages = 3, .overlap = -1, .pingpong = -1,
                              .roll = -1});
    expect_caught(&(sim_case){.dim = 128, .block_m = 64, .block_n = 128, .stages = 2, .roll = -1});
    /* the rolled loop (its barriers addressed from registers); stuck-parity looks for the unrolled loop's flip */
    expect_caught_but(&(sim_case){.dim = 128, .roll = 1}, 1u << BUG_STUCK_PARITY);
}

/* The mutations themselves: a plain copy for BUG_NONE, each bug named and found by its name. */
static void test_mutations(void **state)
{
    (void)state;
    built b;
    build(&(sim_case){.dim = 128, .roll = -1}, &b);
    char what[600];
    char *same = pipe_mutate(b.ptx, BUG_NONE, what, sizeof what);
    assert_non_null(same);
    assert_string_equal(same, b.ptx);
    free(same);
    for (int bug = 0; bug < BUG_COUNT; bug++) assert_int_equal(pipe_bug_find(pipe_bug_name(bug)), bug);
    assert_int_equal(pipe_bug_find("no-such-bug"), -1);
    assert_null(pipe_mutate(b.ptx, BUG_COUNT, what, sizeof what));
    fajit_free(b.ptx);
}

/* ---- the mutated kernels assemble (--ptxas) ------------------------------------------------------------------ */
static char *g_ptxas, *g_dir;

/* With `runtime`, each also through the runtime's compiler (NVRTC's whole-program path), as test_gpu_pipe_bugs
 * compiles it. */
static void expect_assembles(const sim_case *c, int runtime)
{
    built b;
    build(c, &b);
    char src[1024], out[1024], log[1024], what[600];
    snprintf(src, sizeof src, "%s/k.ptx", g_dir);
    snprintf(out, sizeof out, "%s/k.cubin", g_dir);
    snprintf(log, sizeof log, "%s/k.log", g_dir);
    for (int bug = 0; bug < BUG_COUNT; bug++) {
        char *ptx = pipe_mutate(b.ptx, bug, what, sizeof what);
        assert_non_null(ptx);
        FILE *f = fopen(src, "w");
        assert_non_null(f);
        fputs(ptx, f), fclose(f);
        void *cubin = NULL;
        size_t size = 0;
        fajit_status st = runtime ? fj_compile_kernel(&b.pl, ptx, strlen(ptx), "sm_90a", &cubin, &size, NULL) : FAJIT_OK;
        free(ptx), free(cubin);
        if (st == FAJIT_ERR_LIBRARY_MISSING) { /* no NVRTC here: ptxas alone */
            printf("SKIP: the runtime's compiler: %s\n", fajit_errmsg());
            runtime = 0;
        } else if (st != FAJIT_OK)
            fail_msg("%s with %s: the runtime's compiler: %s: %s", b.what, pipe_bug_name(bug), fajit_status_name(st),
                     fajit_errmsg());
        char *argv[] = {g_ptxas, "-arch=sm_90a", src, "-o", out, NULL};
        int code = fj_test_run(argv, log, log);
        char *text = fj_test_read_file(log, NULL);
        if (code != 0 || (text && strstr(text, "error")))
            fail_msg("%s with %s (%s): ptxas exit %d\n%s", b.what, pipe_bug_name(bug), what, code, text ? text : "");
        if (verbose()) printf("ASSEMBLES %-14s %s\n", pipe_bug_name(bug), b.what);
        free(text);
    }
    fajit_free(b.ptx);
}

static void test_mutants_assemble(void **state)
{
    (void)state;
    expect_assembles(&(sim_case){.dim = 128, .roll = -1}, 1);
    expect_assembles(&(sim_case){.dim = 64, .causal = 1, .roll = -1}, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ptxas") == 0) {
        g_ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
        if (!g_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS)");
        g_dir = fj_test_make_temp_dir("fajit_pipe_mutate");
        assert_non_null(g_dir);
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_mutants_assemble)};
        int rc = cmocka_run_group_tests_name("pipe_mutate_ptxas", tests, NULL, NULL);
        fj_test_remove_dir(g_dir);
        free(g_dir), free(g_ptxas);
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutations), cmocka_unit_test(test_defaults), cmocka_unit_test(test_sm100), cmocka_unit_test(test_sm100_bugs), cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_lengths),   cmocka_unit_test(test_fp8),      cmocka_unit_test(test_fp8_bugs), cmocka_unit_test(test_fp8_vt4_bugs),      cmocka_unit_test(test_decode),   cmocka_unit_test(test_variants),
        cmocka_unit_test(test_rolled), cmocka_unit_test(test_fp8_rolled),
        cmocka_unit_test(test_lpt),
        cmocka_unit_test(test_cross_tile),
        cmocka_unit_test(test_kv_desc),
        cmocka_unit_test(test_bugs_caught),
    };
    if (getenv("FAJIT_PIPE_SIM_ONLY")) cmocka_set_test_filter(getenv("FAJIT_PIPE_SIM_ONLY")); /* e.g. "test_sm100*" */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
