/*
 * test_fill_ptxas.c - (label ptxas) what fajit_config_fill returns assembles with no spills, no stack and
 * no warnings (issue 21 items 6 and 9).
 *
 * Part 1, item 9: on an A100 (a fake sm_80 context) the fill of the default grid (both dtypes x the five
 * head dims x causal / not) assembles with `ptxas -arch=sm_80 -c` (nvJitLink's mode: test_support.h).
 * Part 2, item 6: the distinct configs of test_config_fill's walk (fill_walk.c: each field alone and in
 * pairs, on both paths, an A100, an H100 and the sm_80 decode variants). Assembling all of them would
 * take too long on a 2-core machine (1454 configs, 454 of them within FILL_EDGE registers of their plan's
 * limit: all of those assembled clean when this test was written), so the sample is FILL_SAMPLE configs: half spread
 * over the edge ones (model + headroom within FILL_EDGE of the limit, where spills live; the tightest
 * first), half over the rest (FAJIT_FILL_PTXAS=all: every one). Each is assembled for its device (sm_80 on the A100; sm_90a or sm_90
 * on the H100), else for sm_80 when its plan allows that target, else sm_90 (sm_90a for the sm_90a path).
 *
 * Results are cached by the PTX, the arch and ptxas's version in $FAJIT_FILL_PTXAS_CACHE (default:
 * fill_ptxas_cache beside this binary): a rerun assembles only what changed. Two ptxas run at once.
 * Run: ctest --test-dir build -R test_fill_ptxas (skips without ptxas).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fill_walk.h"
#include "runtime/context.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif

#define FILL_EDGE 8     /* registers from the limit that make a config an edge case */
#define FILL_SAMPLE 110 /* configs assembled in part 2 (edges first, then a spread) */

typedef struct job {
    fajit_config cfg;
    unsigned variant;
    char arch[16];
    int margin; /* registers below the plan's limit */
    char text[200];
} job;

typedef struct fill_state {
    char *ptxas, *dir, *cache;
    unsigned long long version_hash;
    job *jobs;
    int n, cap;
    int assembled, cached, failed;
} fill_state;

static fill_state g;

static unsigned long long fnv(unsigned long long h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* ---- assembling, two at a time, with a cache ------------------------------------------------------ */

typedef struct slot {
    int pid;
    int job;
    char ok_path[4096], log[4096];
} slot;

static int finish(slot *s)
{
    int code = fj_test_wait(s->pid);
    char *text = fj_test_read_file(s->log, NULL);
    fj_ptxas_report rep = fj_test_ptxas_log(text);
    s->pid = 0;
    if (code != 0 || rep.bad || rep.entries == 0) {
        printf("FAIL %s: ptxas -arch=%s exit %d, spill %d B, stack %d B\n%s\n", g.jobs[s->job].text,
               g.jobs[s->job].arch, code, rep.spill, rep.stack, text ? text : "");
        free(text);
        g.failed++;
        return 0;
    }
    FILE *f = fopen(s->ok_path, "w"); /* cached only when clean */
    if (f) {
        fprintf(f, "%s: %d registers\n", g.jobs[s->job].text, rep.registers);
        fclose(f);
    }
    free(text);
    return 1;
}

static void run_jobs(const int *which, int n)
{
    slot slots[2] = {{0}, {0}};
    for (int k = 0; k < n; k++) {
        job *j = &g.jobs[which[k]];
        fj_plan plan;
        char *ptx = NULL;
        size_t len = 0;
        assert_int_equal(fj_plan_build_variant(&j->cfg, j->variant, &plan), FAJIT_OK);
        assert_int_equal(fj_generate_ptx_plan(&plan, 0, &ptx, &len), FAJIT_OK);
        const char *mode = fj_test_ptxas_mode(j->arch); /* the runtime's compile (test_support.h) */
        unsigned long long h = fnv(fnv(fnv(g.version_hash, ptx, len), j->arch, strlen(j->arch)), mode, strlen(mode));
        slot *s = !slots[0].pid ? &slots[0] : !slots[1].pid ? &slots[1] : NULL;
        if (!s) { /* both busy: wait for the older */
            s = &slots[0];
            finish(s);
        }
        snprintf(s->ok_path, sizeof s->ok_path, "%s/%016llx.ok", g.cache, h);
        if (access(s->ok_path, F_OK) == 0) {
            g.cached++;
            fajit_free(ptx);
            continue;
        }
        char ptx_path[4096], cubin[4096], arch_flag[32];
        int idx = (int)(s - slots);
        snprintf(ptx_path, sizeof ptx_path, "%s/k%d.ptx", g.dir, idx);
        snprintf(cubin, sizeof cubin, "%s/k%d.cubin", g.dir, idx);
        snprintf(s->log, sizeof s->log, "%s/k%d.log", g.dir, idx);
        snprintf(arch_flag, sizeof arch_flag, "-arch=%s", j->arch);
        FILE *f = fopen(ptx_path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(ptx, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
        fajit_free(ptx);
        char *argv[] = {g.ptxas, arch_flag, (char *)mode, "-v", ptx_path, "-o", cubin, NULL};
        s->pid = fj_test_spawn(argv, s->log, s->log);
        assert_true(s->pid > 0);
        s->job = which[k];
        g.assembled++;
    }
    for (int i = 0; i < 2; i++)
        if (slots[i].pid) finish(&slots[i]);
}

/* ---- the jobs ------------------------------------------------------------------------------------- */

static void add_job(const fajit_config *cfg, unsigned variant, const char *device_sm)
{
    fj_plan plan;
    if (fj_plan_build_variant(cfg, variant, &plan) != FAJIT_OK) return; /* test_config_fill's business */
    job j;
    memset(&j, 0, sizeof j);
    j.cfg = *cfg;
    j.variant = variant;
    if (plan.ws) snprintf(j.arch, sizeof j.arch, "sm_90a");
    else if (device_sm) snprintf(j.arch, sizeof j.arch, "%s", device_sm);
    else
        snprintf(j.arch, sizeof j.arch, "%s",
                 fj_plan_check_target(&plan, fj_arch_find("sm_80")) == FAJIT_OK ? "sm_80" : "sm_90");
    j.margin = plan.reg_limit - plan.reg_total - plan.reg_headroom;
    fj_plan_format(&plan, j.text, sizeof j.text);
    for (int i = 0; i < g.n; i++)
        if (strcmp(g.jobs[i].text, j.text) == 0 && strcmp(g.jobs[i].arch, j.arch) == 0) return;
    if (g.n == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 256;
        g.jobs = realloc(g.jobs, (size_t)g.cap * sizeof *g.jobs);
        assert_non_null(g.jobs);
    }
    g.jobs[g.n++] = j;
}

static void on_case(void *user, const fill_case *c)
{
    (void)user;
    if (c->st == FAJIT_OK) add_job(&c->out, c->goal->variant, c->goal->sm);
}

static int by_margin(const void *a, const void *b)
{
    const job *x = a, *y = b;
    if (x->margin != y->margin) return x->margin - y->margin;
    return strcmp(x->text, y->text);
}

/* ---- tests ---------------------------------------------------------------------------------------- */

static void test_a100_default_grid(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    fj_context_set_identity(ctx, "sm_80", "NVIDIA A100-SXM4-80GB", 13000, 166912);
    static const int dims[] = {64, 96, 128, 192, 256};
    int first = g.n;
    for (int dt = 1; dt <= 2; dt++)
        for (int d = 0; d < 5; d++)
            for (int causal = 0; causal <= 1; causal++) {
                fajit_config c = {.dtype = (fajit_dtype)dt, .head_dim = dims[d], .causal = causal};
                assert_int_equal(fajit_config_fill(ctx, NULL, &c), FAJIT_OK);
                add_job(&c, 0, "sm_80");
            }
    fajit_context_destroy(ctx);
    int which[32], n = 0;
    for (int i = first; i < g.n; i++) which[n++] = i;
    g.failed = 0;
    run_jobs(which, n);
    print_message("A100 default grid: %d configs, %d assembled, %d cached, %d failed\n", n, g.assembled, g.cached,
                  g.failed);
    assert_int_equal(g.failed, 0);
}

static void test_walk_sample(void **state)
{
    (void)state;
    const char *env = getenv("FAJIT_FILL_PTXAS");
    int all = env && strcmp(env, "all") == 0;
    int before = g.n;
    assert_true(fill_walk(0, on_case, NULL) > 0);
    job *walk = g.jobs + before;
    int n = g.n - before;
    qsort(walk, (size_t)n, sizeof *walk, by_margin);
    int *which = malloc(sizeof(int) * (size_t)(n ? n : 1)), m = 0, edges = 0;
    assert_non_null(which);
    while (edges < n && walk[edges].margin <= FILL_EDGE) edges++;
    /* half the sample spread over the edge (the tightest first), the rest over the others */
    int k = all || edges < FILL_SAMPLE / 2 ? edges : FILL_SAMPLE / 2;
    for (int j = 0; j < k; j++) which[m++] = before + (int)((long)j * edges / k);
    int rest = n - edges;
    k = all || rest < FILL_SAMPLE - m ? rest : FILL_SAMPLE - m;
    for (int j = 0; j < k; j++) which[m++] = before + edges + (int)((long)j * rest / k);
    g.failed = g.assembled = g.cached = 0;
    run_jobs(which, m);
    print_message("walk: %d distinct configs, %d at the register edge, %d checked: %d assembled, %d cached, "
                  "%d failed\n",
                  n, edges, m, g.assembled, g.cached, g.failed);
    free(which);
    assert_int_equal(g.failed, 0);
}

int main(void)
{
    g.ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g.ptxas) fj_test_skip_all("no ptxas (set FAJIT_PTXAS)");
    g.dir = fj_test_make_temp_dir("fajit_fill_ptxas");
    assert_non_null(g.dir);
    const char *cache = getenv("FAJIT_FILL_PTXAS_CACHE");
    g.cache = strdup(cache && cache[0] ? cache : "fill_ptxas_cache");
    mkdir(g.cache, 0755);
    char vlog[4096];
    snprintf(vlog, sizeof vlog, "%s/version.txt", g.dir);
    char *vargv[] = {g.ptxas, "--version", NULL};
    fj_test_run(vargv, vlog, vlog);
    char *version = fj_test_read_file(vlog, NULL);
    g.version_hash = fnv(14695981039346656037ull, version ? version : "", version ? strlen(version) : 0);
    free(version);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a100_default_grid),
        cmocka_unit_test(test_walk_sample),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fj_test_remove_dir(g.dir);
    free(g.dir);
    free(g.cache);
    free(g.ptxas);
    free(g.jobs);
    return rc;
}
