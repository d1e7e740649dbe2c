/*
 * test_spill_space.c - (label ptxas) the register and smem model held to account: a config that
 * fajit_config_check accepts must compile without spills and with a zero-byte stack frame, with the
 * compilers the runtime uses, for every target its path runs on. No GPU needed.
 *
 * Compilers and targets, per config (each PTX is generated once, at verbosity 0):
 *   sm_80 path:  nvJitLink for sm_80 (A100) and sm_90 (H100/H200: the runtime builds the portable path for
 *                the device's plain sm, fj_arch_for_device), and the ptxas binary for sm_80 and sm_90a
 *   sm_90a path: the runtime's compiler for sm_90a (fj_compile_kernel: NVRTC whole-program with 2-3
 *                consumer warpgroups, nvJitLink with one) and the ptxas binary for sm_90a
 *
 * The space: what fagen can ask for, which holds the tuner's (runtime/tune.c). sm_80 path: both dtypes,
 * all head dims, both masks, warps 1/2/4/8 with col_warps 1/2 and one or two 16-row fragments per warp
 * (block_m), block_n 16..256 in steps of 16, stages 1-4, swizzle none/32/64/128. sm_90a: 1-3 consumer
 * warpgroups, block_n 16..256, stages 1-4, swizzle 32/64/128, overlap and pingpong on/off. About 6,700 +
 * 13,600 configs are accepted (20,200 on the sm_80 path before sm80.c's headroom): too many for CI.
 *
 * Edges. Within a family (every field but block_n) the model's register count grows with block_n, but
 * the plan's discrete choices (sm_80: Q in registers, the pipelined S, lean registers, copy chunks per
 * thread; sm_90a: the O staging buffer and the second Q buffer) split the block_n range into runs. The
 * largest block_n of a run is an edge: the config of the run nearest the register limit. That the
 * compiler needs no more registers for a narrower tile of the same run is assumed, not checked (only
 * the "all" mode would); the edges are what the model's limit is measured at.
 *
 * Modes (FAJIT_SPILL_SPACE):
 *   unset, "ci"  a deterministic sample of the edges: sorted by register slack (tightest first; ties by a
 *                hash of the config text), an edge is taken while it covers a key no earlier pick covered
 *                (cover_keys: every dtype / head dim / mask / swizzle / stages combination, every warp
 *                layout and schedule with every stage count and swizzle, every plan regime); plus the
 *                heuristic's pick per problem class, the tuner's recorded winners (bench/results/
 *                h100-tuned-*.txt) and the configs issue 13 found spilling
 *   "edges"      every edge (the full mode; run by hand, see README)
 *   "all"        every accepted config (many hours)
 * FAJIT_SPILL_FILTER=text keeps the configs whose canonical text contains it (e.g. "sm_80 bf16 d128").
 * FAJIT_SPILL_JOBS=1|2: worker processes (default 2). FAJIT_SPILL_PTXAS=0|1: the ptxas binary too
 * (default: in the edges and all modes; CI compiles with the runtime's compilers only, to stay in time).
 * FAJIT_TEST_VERBOSE=1 prints every compile. A failure keeps its PTX and log in the temporary folder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/compile.h"
#include "runtime/cuda_api.h"
#include "base/error.h"
#include "runtime/tune_file.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif
#ifndef FAJIT_SOURCE_DIR
#define FAJIT_SOURCE_DIR "."
#endif

#define MAX_JOBS 2
#define COVER_SLOTS (1 << 16)

enum { ORIGIN_EDGE = 1, ORIGIN_HEURISTIC = 2, ORIGIN_WINNER = 4, ORIGIN_ISSUE = 8 };

typedef struct cand {
    fajit_config cfg;
    int slack;  /* reg_limit - reg_total of the plan */
    unsigned hash;
    int origin; /* ORIGIN_* bits */
} cand;

typedef struct cand_list {
    cand *v;
    int n, cap;
} cand_list;

static struct {
    char *ptxas, *dir;
    int use_ptxas, jobs;
    const char *mode, *filter;
    cand_list space;   /* every accepted config of the enumeration, edges marked */
    cand_list chosen;  /* what is compiled */
    int accepted[2], edges[2], rejected_winners;
} g;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_on(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? strcmp(v, "0") != 0 : dflt;
}

static unsigned fnv1a(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void list_push(cand_list *l, const cand *c)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    l->v[l->n++] = *c;
}

/* ---- the space and its edges -------------------------------------------------------------------- */

/* The plan's discrete choices that change the kernel's register needs at a given block_n. */
static int regime(const fj_plan *p)
{
    if (p->ws) return p->o_stage | p->q_bufs << 2;
    return p->q_in_regs | p->pipeline_qk << 1 | p->lean_regs << 2 | p->copy_chunks_per_thread_row << 3;
}

/* One family: cfg with block_n from 256 down to 16; the accepted ones go to the space, the largest of
 * each run of equal regime marked as an edge. */
static void add_family(fajit_config cfg)
{
    int prev = -1, path = cfg.arch == FAJIT_ARCH_SM90A;
    for (cfg.block_n = 256; cfg.block_n >= 16; cfg.block_n -= 16) {
        fj_plan plan;
        if (fj_plan_build(&cfg, &plan) != FAJIT_OK) continue;
        cand c = {.cfg = cfg, .slack = plan.reg_limit - plan.reg_total - plan.reg_headroom};
        char canon[160];
        fajit_config_format(&cfg, canon, sizeof canon);
        c.hash = fnv1a(canon);
        if (regime(&plan) != prev) c.origin = ORIGIN_EDGE, g.edges[path]++;
        prev = regime(&plan);
        g.accepted[path]++;
        list_push(&g.space, &c);
    }
}

static void enumerate_space(void)
{
    static const int head_dims[] = {64, 96, 128, 192, 256}, swizzles[] = {FAJIT_SWIZZLE_NONE, 32, 64, 128};
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
        for (int h = 0; h < 5; h++)
            for (int causal = 0; causal <= 1; causal++) {
                fajit_config base = {.dtype = (fajit_dtype)dt, .head_dim = head_dims[h], .causal = causal,
                                     .overlap = -1, .pingpong = -1};
                for (int w = 1; w <= 8; w *= 2)
                    for (int cw = 1; cw <= 2 && cw <= w; cw++)
                        for (int mf = 1; mf <= 2; mf++)
                            for (int st = 1; st <= 4; st++)
                                for (int s = 0; s < 4; s++) {
                                    fajit_config c = base;
                                    c.arch = FAJIT_ARCH_SM80, c.warps = w, c.col_warps = cw;
                                    c.block_m = 16 * (w / cw) * mf, c.stages = st, c.swizzle = swizzles[s];
                                    add_family(c);
                                }
                for (int wg = 1; wg <= 3; wg++)
                    for (int st = 1; st <= 4; st++)
                        for (int s = 1; s < 4; s++)
                            for (int ov = -1; ov <= 1; ov += 2)
                                for (int pp = -1; pp <= ov; pp += 2) {
                                    fajit_config c = base;
                                    c.arch = FAJIT_ARCH_SM90A, c.warps = 4 * (wg + 1), c.col_warps = 1;
                                    c.block_m = 64 * wg, c.stages = st, c.swizzle = swizzles[s];
                                    c.overlap = ov, c.pingpong = pp;
                                    add_family(c);
                                }
            }
}

/* ---- the CI sample ----------------------------------------------------------------------------- */

/* Keys a config covers: each is a combination of fields the sample must see at least once. */
static int cover_keys(const cand *c, char keys[][96])
{
    const fajit_config *f = &c->cfg;
    fj_plan p;
    assert_int_equal(fj_plan_build(f, &p), FAJIT_OK);
    int n = 0, reg = regime(&p), path = f->arch == FAJIT_ARCH_SM90A;
    int layout = path ? f->block_m / 64 * 10 + (f->overlap == 1) * 2 + (f->pingpong == 1)
                      : f->warps * 100 + f->col_warps * 10 + p.m_frags;
    snprintf(keys[n++], 96, "a%d %d %d %d", path, f->dtype, f->head_dim, f->causal);
    snprintf(keys[n++], 96, "b%d %d %d %d %d", path, f->head_dim, f->causal, f->swizzle, f->stages);
    snprintf(keys[n++], 96, "c%d %d %d %d", path, f->head_dim, layout, f->causal);
    snprintf(keys[n++], 96, "d%d %d %d %d", path, layout, f->stages, f->swizzle);
    snprintf(keys[n++], 96, "e%d %d %d %d", path, f->head_dim, f->causal, reg);
    snprintf(keys[n++], 96, "f%d %d %d", path, layout, f->block_n);
    return n;
}

/* Is key hash h in the open-addressing set? With add, put it there. */
static int cover_has(unsigned *set, unsigned h, int add)
{
    unsigned i = h & (COVER_SLOTS - 1);
    while (set[i] && set[i] != h) i = (i + 1) & (COVER_SLOTS - 1);
    if (set[i] == h) return 1;
    if (add) set[i] = h;
    return 0;
}

static int by_slack(const void *pa, const void *pb)
{
    const cand *a = *(const cand *const *)pa, *b = *(const cand *const *)pb;
    if (a->slack != b->slack) return a->slack - b->slack;
    return a->hash < b->hash ? -1 : a->hash > b->hash;
}

#define MAX_KEYS 8

/* Greedy set cover of the edges' keys: take the edge that covers the most keys no earlier pick covered
 * (the tightest first among equals: edges are sorted by slack, then by hash), until every key is. */
static void choose_sample(void)
{
    cand **order = calloc((size_t)g.space.n, sizeof *order);
    unsigned *set = calloc(COVER_SLOTS, sizeof *set), (*keys)[MAX_KEYS];
    int n = 0, *nk;
    assert_true(order && set);
    for (int i = 0; i < g.space.n; i++)
        if (g.space.v[i].origin & ORIGIN_EDGE) order[n++] = &g.space.v[i];
    qsort(order, (size_t)n, sizeof *order, by_slack);
    keys = calloc((size_t)n, sizeof *keys);
    nk = calloc((size_t)n, sizeof *nk);
    assert_true(keys && nk);
    for (int i = 0; i < n; i++) {
        char text[MAX_KEYS][96];
        nk[i] = cover_keys(order[i], text);
        for (int j = 0; j < nk[i]; j++) keys[i][j] = fnv1a(text[j]) | 1u;
    }
    for (;;) {
        int best = -1, best_new = 0;
        for (int i = 0; i < n; i++) {
            int fresh = 0;
            for (int j = 0; j < nk[i]; j++) fresh += !cover_has(set, keys[i][j], 0);
            if (fresh > best_new) best = i, best_new = fresh;
        }
        if (best < 0) break;
        for (int j = 0; j < nk[best]; j++) cover_has(set, keys[best][j], 1);
        list_push(&g.chosen, order[best]);
    }
    free(keys);
    free(nk);
    free(order);
    free(set);
}

/* ---- configs that are always compiled ------------------------------------------------------------ */

static void add_chosen(const fajit_config *cfg, int origin)
{
    for (int i = 0; i < g.chosen.n; i++)
        if (fj_config_same(&g.chosen.v[i].cfg, cfg)) {
            g.chosen.v[i].origin |= origin;
            return;
        }
    fj_plan plan;
    assert_int_equal(fj_plan_build(cfg, &plan), FAJIT_OK);
    cand c = {.cfg = *cfg, .slack = plan.reg_limit - plan.reg_total - plan.reg_headroom, .origin = origin};
    list_push(&g.chosen, &c);
}

/* The heuristic's pick of every problem class, both paths, and on sm_90a also for a long sequence. */
static void add_heuristic_picks(void)
{
    static const int head_dims[] = {64, 96, 128, 192, 256};
    static const fajit_shape long_seq = {.batch = 1, .heads_q = 16, .heads_kv = 16, .seqlen_q = 16384, .seqlen_k = 16384};
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
        for (int h = 0; h < 5; h++)
            for (int causal = 0; causal <= 1; causal++)
                for (int v = 0; v < 3; v++) {
                    fajit_config cfg = {.arch = v ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80, .dtype = (fajit_dtype)dt,
                                        .head_dim = head_dims[h], .causal = causal};
                    if (fajit_config_fill(NULL, v == 2 ? &long_seq : NULL, &cfg) != FAJIT_OK) {
                        print_error("heuristic: no config for %s d%d: %s\n", dt == 1 ? "f16" : "bf16", head_dims[h],
                                    fajit_errmsg());
                        fail();
                    }
                    add_chosen(&cfg, ORIGIN_HEURISTIC);
                }
}

/* The winners of the tune files in bench/results: compiled when still accepted, listed when not. */
static void add_winners(void)
{
    static const char *const files[] = {"h100-tuned-v1-codegen9-2026-11-22.txt"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[4096];
        fj_tune_list list = {0};
        snprintf(path, sizeof path, "%s/bench/results/%s", FAJIT_SOURCE_DIR, files[f]);
        if (fj_tune_file_read(path, &list, NULL) != 0 || list.n == 0) {
            printf("note: no winners read from %s\n", path);
            fj_tune_list_free(&list);
            continue;
        }
        for (int i = 0; i < list.n; i++) {
            char canon[160];
            fajit_config_format(&list.v[i].cfg, canon, sizeof canon);
            if (fajit_config_check(&list.v[i].cfg) == FAJIT_OK) add_chosen(&list.v[i].cfg, ORIGIN_WINNER);
            else printf("winner now rejected (%s): %s: %s\n", files[f], canon, fajit_errmsg()), g.rejected_winners++;
        }
        fj_tune_list_free(&list);
    }
}

/* Issue 13: what `fagen ptx --arch sm_80 --headdim 128 ...` gave with swizzle none at 2-3 stages and
 * with a causal mask at 2 stages spilled 4-8 bytes. Each must now compile clean or be refused by the
 * register rule (the message says the arithmetic). */
static void add_issue_configs(void)
{
    static const int cases[][3] = {/* stages, swizzle, causal */
                                   {2, FAJIT_SWIZZLE_NONE, 0}, {2, FAJIT_SWIZZLE_NONE, 1}, {3, FAJIT_SWIZZLE_NONE, 0},
                                   {3, FAJIT_SWIZZLE_NONE, 1}, {2, 128, 1}};
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = (fajit_dtype)dt, .head_dim = 128,
                                .stages = cases[i][0], .swizzle = cases[i][1], .causal = cases[i][2]};
            char canon[160];
            fajit_status st = fajit_config_fill(NULL, NULL, &cfg);
            fajit_config_format(&cfg, canon, sizeof canon);
            if (st == FAJIT_OK) {
                add_chosen(&cfg, ORIGIN_ISSUE);
                continue;
            }
            printf("issue 13 config refused: %s: %s\n", canon, fajit_errmsg());
            if (!strstr(fajit_errmsg(), "registers: about")) {
                print_error("%s: refused by a rule other than the register budget\n", canon);
                fail();
            }
        }
}

/* ---- compiling --------------------------------------------------------------------------------- */

typedef struct compile_job {
    const char *tool, *target; /* "runtime" (fj_compile_kernel), "ptxas", or "refused" (the plan must refuse
                                  the target: fj_plan_check_target and fajit_compile_cubin); the target */
} compile_job;

static int jobs_of(const fj_plan *plan, compile_job *out)
{
    int n = 0;
    if (plan->ws) {
        out[n++] = (compile_job){"runtime", "sm_90a"};
        if (g.use_ptxas) out[n++] = (compile_job){"ptxas", "sm_90a"};
        return n;
    }
    /* causal configs near the limit need sm_90's register allocation (plan.min_target_sm, sm80.c) */
    int sm80 = fj_plan_check_target(plan, fj_arch_find("sm_80")) == FAJIT_OK;
    out[n++] = (compile_job){sm80 ? "runtime" : "refused", "sm_80"};
    out[n++] = (compile_job){"runtime", "sm_90"};
    if (g.use_ptxas && sm80) out[n++] = (compile_job){"ptxas", "sm_80"};
    if (g.use_ptxas) out[n++] = (compile_job){"ptxas", "sm_90a"};
    return n;
}

/* A target the plan refuses: both the plan's check and fajit_compile_cubin say so, with the arithmetic. */
static int refused_with_reason(const fj_plan *plan, const char *target)
{
    void *cubin = NULL;
    size_t size = 0;
    if (fj_plan_check_target(plan, fj_arch_find(target)) != FAJIT_ERR_UNSUPPORTED) return 0;
    if (fajit_compile_cubin(&plan->cfg, target, &cubin, &size, NULL) != FAJIT_ERR_UNSUPPORTED) {
        free(cubin);
        return 0;
    }
    return strstr(fajit_errmsg(), "registers per thread") != NULL;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        _exit(3);
    }
}

/* One compile of config i's PTX (at ptx_path): its ptxas report; log_out gets the log (malloc'd). */
static fj_ptxas_report compile_one(const fj_plan *plan, const char *ptx, size_t len, const char *ptx_path,
                                   const compile_job *job, int i, int *failed, char **log_out)
{
    fj_ptxas_report rep = {0};
    char *log = NULL;
    *failed = 0;
    if (strcmp(job->tool, "refused") == 0) {
        *failed = !refused_with_reason(plan, job->target);
        *log_out = NULL;
        return rep;
    }
    if (strcmp(job->tool, "runtime") == 0) {
        void *cubin = NULL;
        size_t size = 0;
        fajit_status st = fj_compile_kernel(plan, ptx, len, job->target, &cubin, &size, &log);
        free(cubin);
        if (st != FAJIT_OK) {
            size_t n = strlen(fajit_errmsg());
            free(log);
            log = malloc(n + 1);
            memcpy(log, fajit_errmsg(), n + 1);
            *failed = 1;
        }
    } else {
        char arch[32], cubin[4096], log_path[4096];
        snprintf(arch, sizeof arch, "-arch=%s", job->target);
        snprintf(cubin, sizeof cubin, "%s/w%d.cubin", g.dir, i % MAX_JOBS);
        snprintf(log_path, sizeof log_path, "%s/w%d.log", g.dir, i % MAX_JOBS);
        char *argv[] = {g.ptxas, arch, "-v", (char *)ptx_path, "-o", cubin, NULL};
        *failed = fj_test_run(argv, log_path, log_path) != 0;
        log = fj_test_read_file(log_path, NULL);
    }
    rep = fj_test_ptxas_log(log ? log : "");
    if (rep.entries == 0) *failed = 1;
    *log_out = log;
    return rep;
}

/* Worker w: configs w, w + jobs, ...; one result line per compile into dir/result<w>.txt:
 * "index tool target failed bad stack spill registers". Failing PTX and logs are kept. */
static void worker(int w)
{
    char res_path[4096];
    snprintf(res_path, sizeof res_path, "%s/result%d.txt", g.dir, w);
    FILE *res = fopen(res_path, "w");
    if (!res) _exit(3);
    for (int i = w; i < g.chosen.n; i += g.jobs) {
        fj_plan plan;
        char *ptx = NULL, ptx_path[4096];
        size_t len = 0;
        compile_job jobs[4];
        if (fj_plan_build(&g.chosen.v[i].cfg, &plan) != FAJIT_OK ||
            fj_generate_ptx_plan(&plan, 0, &ptx, &len) != FAJIT_OK) {
            fprintf(res, "%d generate - 1 1 0 0 0\n", i);
            continue;
        }
        snprintf(ptx_path, sizeof ptx_path, "%s/w%d.ptx", g.dir, w);
        write_file(ptx_path, ptx, len);
        int n = jobs_of(&plan, jobs), kept = 0;
        for (int j = 0; j < n; j++) {
            int failed;
            char *log;
            fj_ptxas_report rep = compile_one(&plan, ptx, len, ptx_path, &jobs[j], i, &failed, &log);
            fprintf(res, "%d %s %s %d %d %d %d %d\n", i, jobs[j].tool, jobs[j].target, failed, rep.bad, rep.stack,
                    rep.spill, rep.registers);
            fflush(res);
            if (failed || rep.bad) {
                char path[4096];
                snprintf(path, sizeof path, "%s/fail_%d_%s_%s.log", g.dir, i, jobs[j].tool, jobs[j].target);
                write_file(path, log ? log : "", log ? strlen(log) : 0);
                if (!kept++) {
                    snprintf(path, sizeof path, "%s/fail_%d.ptx", g.dir, i);
                    write_file(path, ptx, len);
                }
            }
            free(log);
        }
        free(ptx);
    }
    fclose(res);
}

/* ---- results ----------------------------------------------------------------------------------- */

typedef struct tally {
    int compiles[2][2], spilled[2][2]; /* [path][runtime = 0 / ptxas = 1] */
    int max_regs[2], failures, configs_failed;
    int refused;                       /* sm_80 targets the plan refuses (checked with the reason) */
    char *failed_cfg;                  /* per chosen config: 1 when any compile failed */
} tally;

static void read_results(tally *t)
{
    t->failed_cfg = calloc((size_t)g.chosen.n + 1, 1);
    assert_non_null(t->failed_cfg);
    for (int w = 0; w < g.jobs; w++) {
        char path[4096], tool[16], target[16];
        int i, failed, bad, stack, spill, regs;
        snprintf(path, sizeof path, "%s/result%d.txt", g.dir, w);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fscanf(f, "%d %15s %15s %d %d %d %d %d", &i, tool, target, &failed, &bad, &stack, &spill, &regs) == 8) {
            assert_true(i >= 0 && i < g.chosen.n);
            const cand *c = &g.chosen.v[i];
            int path_i = c->cfg.arch == FAJIT_ARCH_SM90A, tool_i = strcmp(tool, "ptxas") == 0;
            char canon[160];
            fajit_config_format(&c->cfg, canon, sizeof canon);
            if (strcmp(tool, "refused") == 0) t->refused++;
            else t->compiles[path_i][tool_i]++;
            if (regs > t->max_regs[path_i]) t->max_regs[path_i] = regs;
            if (failed || bad) {
                t->failures++;
                t->spilled[path_i][tool_i] += !failed;
                if (!t->failed_cfg[i]) t->configs_failed++;
                t->failed_cfg[i] = 1;
                printf("FAIL %s (slack %d): %s %s: %s, stack %d B, spill %d B, %d registers (log: %s/fail_%d_%s_%s.log)\n",
                       canon, c->slack, tool, target, strcmp(tool, "refused") == 0 ? "not refused with the register arithmetic"
                       : failed                    ? "compile failed"
                                                   : "spills or stack", stack, spill, regs,
                       g.dir, i, tool, target);
            } else if (env_on("FAJIT_TEST_VERBOSE", 0)) {
                printf("  ok %s (slack %d): %s %s, %d registers\n", canon, c->slack, tool, target, regs);
            }
        }
        fclose(f);
    }
}

static void run_workers(void)
{
    int pids[MAX_JOBS];
    fflush(stdout);
    for (int w = 0; w < g.jobs; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* no orphan keeps compiling when the test is stopped */
            worker(w);
            _exit(0);
        }
    }
    for (int w = 0; w < g.jobs; w++) {
        int status = 0;
        assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("worker %d ended with status 0x%x\n", w, status);
            fail();
        }
    }
}

static void apply_filter(void)
{
    if (!g.filter || !g.filter[0]) return;
    int n = 0;
    for (int i = 0; i < g.chosen.n; i++) {
        char canon[160];
        fajit_config_format(&g.chosen.v[i].cfg, canon, sizeof canon);
        if (strstr(canon, g.filter)) g.chosen.v[n++] = g.chosen.v[i];
    }
    g.chosen.n = n;
}

static void test_space_compiles_clean(void **state)
{
    double t0 = now_seconds();
    (void)state;
    enumerate_space();
    if (strcmp(g.mode, "all") == 0 || strcmp(g.mode, "edges") == 0) {
        for (int i = 0; i < g.space.n; i++)
            if (g.mode[0] == 'a' || (g.space.v[i].origin & ORIGIN_EDGE)) list_push(&g.chosen, &g.space.v[i]);
    } else {
        choose_sample();
    }
    add_heuristic_picks();
    add_winners();
    add_issue_configs();
    int chosen = g.chosen.n;
    apply_filter();
    if (env_on("FAJIT_SPILL_LIST", 0)) { /* the list alone, numbered as in the failure files */
        for (int i = 0; i < g.chosen.n; i++) {
            char canon[160];
            fajit_config_format(&g.chosen.v[i].cfg, canon, sizeof canon);
            printf("%d | %s | slack %d origin %d\n", i, canon, g.chosen.v[i].slack, g.chosen.v[i].origin);
        }
        return;
    }
    int per_path[2] = {0, 0};
    for (int i = 0; i < g.chosen.n; i++) per_path[g.chosen.v[i].cfg.arch == FAJIT_ARCH_SM90A]++;
    printf("space: %d sm_80-path and %d sm_90a configs accepted, %d and %d edges; mode %s%s%s: compiling %d sm_80-path "
           "and %d sm_90a configs (of %d chosen) with %d worker%s\n",
           g.accepted[0], g.accepted[1], g.edges[0], g.edges[1], g.mode, g.filter ? ", filter " : "",
           g.filter ? g.filter : "", per_path[0], per_path[1], chosen, g.jobs, g.jobs > 1 ? "s" : "");
    run_workers();
    tally t = {0};
    read_results(&t);
    printf("compiled: sm_80 path %d with nvJitLink (sm_80, sm_90) + %d with the ptxas binary (sm_80, sm_90a); sm_90a "
           "path %d with the runtime's compiler (NVRTC / nvJitLink) + %d with the ptxas binary\n",
           t.compiles[0][0], t.compiles[0][1], t.compiles[1][0], t.compiles[1][1]);
    printf("sm_80 target refused by the plan (needs sm_90+, message checked): %d configs\n", t.refused);
    printf("spills or stack: sm_80 path %d (runtime) + %d (ptxas), sm_90a %d + %d; %d compiles failed in all, %d "
           "configs; max registers %d (sm_80 path), %d (sm_90a); %.1f s\n",
           t.spilled[0][0], t.spilled[0][1], t.spilled[1][0], t.spilled[1][1], t.failures, t.configs_failed,
           t.max_regs[0], t.max_regs[1], now_seconds() - t0);
    if (g.rejected_winners) printf("%d recorded winners are rejected now (listed above)\n", g.rejected_winners);
    fflush(stdout);
    free(t.failed_cfg);
    assert_int_equal(t.failures, 0);
    assert_true(t.compiles[0][0] + t.compiles[1][0] > 0 || (g.filter && g.filter[0]));
}

static int teardown(void **state)
{
    (void)state;
    /* result files are always there; a failure also leaves fail_* files, kept for reading */
    char probe[4096];
    int failed = 0;
    for (int i = 0; i < g.chosen.n && !failed; i++) {
        snprintf(probe, sizeof probe, "%s/fail_%d.ptx", g.dir, i);
        failed = access(probe, F_OK) == 0;
    }
    if (!failed) fj_test_remove_dir(g.dir);
    else printf("failing PTX and logs kept in %s\n", g.dir);
    free(g.space.v);
    free(g.chosen.v);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_space_compiles_clean)};
    const char *jobs = getenv("FAJIT_SPILL_JOBS");
    g.mode = getenv("FAJIT_SPILL_SPACE") && getenv("FAJIT_SPILL_SPACE")[0] ? getenv("FAJIT_SPILL_SPACE") : "ci";
    if (strcmp(g.mode, "ci") != 0 && strcmp(g.mode, "edges") != 0 && strcmp(g.mode, "all") != 0) {
        printf("FAJIT_SPILL_SPACE = \"%s\": must be ci, edges or all\n", g.mode);
        return 1;
    }
    g.filter = getenv("FAJIT_SPILL_FILTER");
    g.jobs = jobs && jobs[0] == '1' ? 1 : MAX_JOBS;
    g.use_ptxas = env_on("FAJIT_SPILL_PTXAS", strcmp(g.mode, "ci") != 0); /* the runtime's compilers only in CI */
    const fj_nvjitlink_api *jl;
    const fj_nvrtc_api *rtc;
    if (fj_nvjitlink_load(&jl) != FAJIT_OK) fj_test_skip_all("nvJitLink not loadable: %s", fajit_errmsg());
    if (fj_nvrtc_load(&rtc) != FAJIT_OK) fj_test_skip_all("NVRTC not loadable: %s", fajit_errmsg());
    g.ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g.ptxas && g.use_ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS, or FAJIT_SPILL_PTXAS=0)");
    g.dir = fj_test_make_temp_dir("fajit-spill");
    if (!g.dir) fj_test_skip_all("cannot make a temporary directory");
    printf("ptxas: %s\n", g.use_ptxas ? g.ptxas : "(left out: FAJIT_SPILL_PTXAS=0)");
    return cmocka_run_group_tests_name("spill_space", tests, NULL, teardown);
}
