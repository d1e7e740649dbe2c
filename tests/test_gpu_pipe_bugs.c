/*
 * test_gpu_pipe_bugs.c - the pipeline bugs of pipe_mutate.c on the GPU (label gpu; skips without an sm_90a GPU): each
 * bug is injected into the sm_90a kernel's PTX, the pipeline simulator's verdict on that PTX is printed, and the
 * kernel is compiled and launched in a child process that the parent kills after a timeout (a hang), so no run can
 * hang the test. The unmutated kernel must match the float64 CPU reference (|O - ref| <= 2e-2 for every element,
 * O poisoned with NaN first, fresh random inputs); drop-release (a deadlock in the simulator) must hang; every other
 * bug's outcome (hang, wrong output, driver error, or none) is printed next to the simulator's verdict, and with
 * FAJIT_PIPE_BUGS_STRICT=1 each must hang or go wrong (early-release and no-store-wait, races, excepted).
 * Problem: bf16, B 2, Hq 4, Hkv 2, Nq 600, Nk 1100, 8 CTAs (5 work tiles each, 9 KV tiles a tile: the rings wrap).
 * Environment: FAJIT_PIPE_BUG=name[,name] (only these; see pipe_mutate.h), FAJIT_PIPE_BUG_CONFIG=d128 (default: d128
 * non-causal) | d64c (d64 causal) | all, FAJIT_PIPE_BUG_TIMEOUT=seconds a launch may take (default 20),
 * FAJIT_PIPE_BUG_DUMP=dir (each kernel's PTX written to dir/<config>-<bug>.ptx), FAJIT_PIPE_BUG_DRY=1 (no GPU: the
 * mutations, the simulator's verdicts and the reference only).
 * Run: ctest --test-dir build -R test_gpu_pipe_bugs --output-on-failure   (or build/tests/test_gpu_pipe_bugs)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pipe_mutate.h"
#include "pipe_sim.h"
#include "runtime/compile.h"
#include "runtime/context.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "runtime/tensor_map.h"
#include "runtime/tune.h"
#include "test_support.h"

#define TOL 2e-2
#define NCTAS 8

enum { GPU_CORRECT, GPU_WRONG, GPU_ERROR, GPU_HANG, GPU_SETUP, GPU_SKIP, GPU_DRY };
static const char *const outcome_names[] = {"correct",      "WRONG OUTPUT", "DRIVER ERROR", "HANG (killed)",
                                            "setup failed", "skipped",      "not run (dry run)"};
static int g_dry; /* FAJIT_PIPE_BUG_DRY=1: the mutations, the simulator and the reference only (no GPU needed) */

typedef struct problem {
    const char *name;
    fajit_config cfg;
    fj_plan pl;
    fajit_attention_args a; /* host-side: strides and sizes (pointers set in the child) */
    uint16_t *q, *k, *v;
    double *ref;
    size_t nq, nk, no;
} problem;

/* ---- the child: compile, launch, compare ------------------------------------------------------------------- */
static int child_fail(const char *what, fajit_status st)
{
    printf("  child: %s: %s: %s\n", what, fajit_status_name(st), fajit_errmsg());
    return GPU_SETUP;
}

static int cu_fail(const fj_cuda_api *cu, const char *what, fj_CUresult rc)
{
    const char *name = "?";
    cu->cuGetErrorName(rc, &name);
    printf("  child: %s: %s\n", what, name);
    return GPU_ERROR;
}

/* Runs in the child; its return value is the exit status. Writes 'L' to fd just before the launch. */
static int child_run(const problem *pb, const char *ptx, int fd)
{
    fajit_context *ctx = fj_test_gpu_context(); /* exits 77 without a GPU */
    if (!ctx) return GPU_SETUP;
    if (fj_best_path(ctx) != FAJIT_ARCH_SM90A) {
        printf("SKIP: the GPU (%s) does not run sm_90a kernels\n", ctx->device_name);
        return FJ_TEST_SKIP_CODE;
    }
    void *cubin = NULL;
    size_t size = 0;
    char *log = NULL;
    fajit_status st = fj_compile_kernel(&pb->pl, ptx, strlen(ptx), "sm_90a", &cubin, &size, &log);
    if (st != FAJIT_OK) return child_fail("compile", st);
    if ((st = fj_context_push(ctx)) != FAJIT_OK) return child_fail("push", st);
    const fj_cuda_api *cu = ctx->cu;
    fj_CUmodule mod;
    fj_CUfunction fn;
    fj_CUresult rc;
    if ((rc = cu->cuModuleLoadData(&mod, cubin)) != FJ_CUDA_SUCCESS) return cu_fail(cu, "cuModuleLoadData", rc);
    if ((rc = cu->cuModuleGetFunction(&fn, mod, FJ_FWD_KERNEL_NAME)) != FJ_CUDA_SUCCESS ||
        (rc = cu->cuFuncSetAttribute(fn, FJ_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, pb->pl.smem_bytes)) !=
            FJ_CUDA_SUCCESS)
        return cu_fail(cu, "kernel", rc);
    fj_CUdeviceptr d[4];
    size_t bytes[4] = {2 * pb->nq, 2 * pb->nk, 2 * pb->nk, 2 * pb->no};
    const void *src[3] = {pb->q, pb->k, pb->v};
    for (int i = 0; i < 4; i++) {
        if ((rc = cu->cuMemAlloc(&d[i], bytes[i])) != FJ_CUDA_SUCCESS) return cu_fail(cu, "cuMemAlloc", rc);
        rc = i < 3 ? cu->cuMemcpyHtoD(d[i], src[i], bytes[i]) : cu->cuMemsetD8(d[i], 0xff, bytes[i]); /* O: NaN */
        if (rc != FJ_CUDA_SUCCESS) return cu_fail(cu, "upload", rc);
    }
    fajit_attention_args a = pb->a;
    a.q = d[0], a.k = d[1], a.v = d[2], a.o = d[3];
    fj_fwd_params_tma prm;
    memset(&prm, 0, sizeof prm);
    fj_forward_params_tma(&a, &pb->pl, &prm);
    char why[256];
    if (fj_tensor_maps(ctx, &pb->pl, &a, &prm, why, sizeof why) != 0)
        return printf("  child: maps: %s\n", why), GPU_SETUP;
    void *params[] = {&prm};
    if (write(fd, "L", 1) != 1) return GPU_SETUP;
    rc = cu->cuLaunchKernel(fn, NCTAS, 1, 1, (unsigned)pb->pl.threads, 1, 1, (unsigned)pb->pl.smem_bytes, NULL, params,
                            NULL);
    if (rc == FJ_CUDA_SUCCESS) rc = cu->cuCtxSynchronize();
    if (rc != FJ_CUDA_SUCCESS) return cu_fail(cu, "launch", rc);
    uint16_t *o = malloc(bytes[3]);
    if (!o || cu->cuMemcpyDtoH(o, d[3], bytes[3]) != FJ_CUDA_SUCCESS) return GPU_SETUP;
    size_t bad = 0, nan = 0, worst_i = 0;
    double worst = 0;
    for (size_t i = 0; i < pb->no; i++) {
        double x = fj_half_to_f32(pb->a.dtype, o[i]), e = fabs(x - pb->ref[i]);
        nan += isnan(x) != 0;
        if (isnan(x) || e > TOL) bad++;
        if (isnan(x) || e > worst) worst = isnan(x) ? INFINITY : e, worst_i = i;
    }
    printf("  child: %zu of %zu elements off by more than %g (%zu NaN); worst %g at %zu (got %g, want %g)\n", bad,
           pb->no, TOL, nan, worst, worst_i, fj_half_to_f32(pb->a.dtype, o[worst_i]), pb->ref[worst_i]);
    return bad ? GPU_WRONG : GPU_CORRECT;
}

/* ---- the parent: fork, watch, kill ---------------------------------------------------------------------------- */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The child's exit status, or -1 when it was still running at `until` (then it is killed). */
static int wait_until(pid_t pid, double until)
{
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : GPU_ERROR; /* a signal: as a driver error */
        if (r < 0 && errno != EINTR) return GPU_SETUP;
        if (now() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
}

static int run_on_gpu(const problem *pb, const char *ptx, double timeout, double *secs)
{
    int fds[2];
    if (g_dry) return GPU_DRY;
    if (pipe(fds) != 0) return GPU_SETUP;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return GPU_SETUP;
    if (pid == 0) {
        close(fds[0]);
        int r = child_run(pb, ptx, fds[1]);
        fflush(stdout);
        _exit(r);
    }
    close(fds[1]);
    /* compiling may take a while: the timeout starts at the launch */
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    char c = 0;
    int launched = poll(&p, 1, 300000) == 1 && read(fds[0], &c, 1) == 1 && c == 'L';
    double t0 = now();
    int r = wait_until(pid, launched ? t0 + timeout : t0 + 5);
    *secs = now() - t0;
    close(fds[0]);
    if (r < 0) return launched ? GPU_HANG : GPU_SETUP;
    if (r == FJ_TEST_SKIP_CODE) return GPU_SKIP;
    return r <= GPU_SETUP ? r : GPU_SETUP;
}

/* ---- the problems ------------------------------------------------------------------------------------------- */
static void make_problem(problem *pb, const char *name, int dim, int causal, uint64_t seed)
{
    memset(pb, 0, sizeof *pb);
    pb->name = name;
    /* roll -1: the mutations (pipe_mutate.c) are written for the unrolled loop, whatever FJ_SM90_ROLL_DEFAULT says */
    pb->cfg = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = dim, .causal = causal,
                             .roll = -1};
    fj_config_heuristic(&pb->cfg, &pb->cfg, NULL, 0);
    if (fj_plan_build(&pb->cfg, &pb->pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    int b = 2, hq = 4, hkv = 2, nq = 600, nk = 1100;
    fajit_attention_args *a = &pb->a;
    fajit_attention_args_init(a);
    a->dtype = FAJIT_DTYPE_BF16, a->batch = b, a->heads_q = hq, a->heads_kv = hkv, a->seqlen_q = nq, a->seqlen_k = nk;
    a->head_dim = dim, a->causal = causal;
    int64_t qs[3] = {(int64_t)hq * nq * dim, (int64_t)nq * dim, dim};
    int64_t ks[3] = {(int64_t)hkv * nk * dim, (int64_t)nk * dim, dim};
    memcpy(a->q_stride, qs, sizeof qs), memcpy(a->o_stride, qs, sizeof qs);
    memcpy(a->k_stride, ks, sizeof ks), memcpy(a->v_stride, ks, sizeof ks);
    pb->nq = pb->no = (size_t)b * hq * nq * dim, pb->nk = (size_t)b * hkv * nk * dim;
    pb->q = malloc(2 * pb->nq), pb->k = malloc(2 * pb->nk), pb->v = malloc(2 * pb->nk);
    pb->ref = malloc(sizeof(double) * pb->no);
    assert_true(pb->q && pb->k && pb->v && pb->ref);
    fj_half_fill_normal(a->dtype, pb->q, pb->nq, seed);
    fj_half_fill_normal(a->dtype, pb->k, pb->nk, seed + 1);
    fj_half_fill_normal(a->dtype, pb->v, pb->nk, seed + 2);
    if (fj_reference_cpu(a, pb->q, pb->k, pb->v, pb->ref, NULL) != FAJIT_OK) fail_msg("reference: %s", fajit_errmsg());
}

static void free_problem(problem *pb) { free(pb->q), free(pb->k), free(pb->v), free(pb->ref); }

/* The simulator's verdict on ptx for CTA 0 and 1 of the launch's grid (2 interleavings each): the first fault. */
static int simulate(const problem *pb, const char *ptx, char *text, size_t size)
{
    prog p;
    parse_prog(&p, ptx);
    pipe_opts o;
    world *w = pipe_world_dense(&pb->pl, &pb->a, NCTAS, &o);
    pipe_report r;
    int kind = PIPE_OK;
    snprintf(text, size, "no fault");
    for (unsigned run = 0; run < 4 && kind == PIPE_OK; run++) {
        o.ctaid = run / 2, o.seed = run;
        if ((kind = pipe_run(&p, w, &o, &r)) != PIPE_OK) snprintf(text, size, "%s", r.text);
    }
    free(w), free(p.v);
    return kind;
}

static int wanted(const char *list, const char *name)
{
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *s = list; (s = strstr(s, name)); s += n)
        if ((s == list || s[-1] == ',') && (s[n] == '\0' || s[n] == ',')) return 1;
    return 0;
}

static int g_skipped;

static void run_problem(problem *pb, double timeout, int strict)
{
    char *ptx = NULL, what[600], sim[800], cfg[200];
    size_t len;
    fj_plan_format(&pb->pl, cfg, sizeof cfg);
    if (fj_generate_ptx_plan(&pb->pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("ptx: %s", fajit_errmsg());
    const char *only = getenv("FAJIT_PIPE_BUG"), *dump = getenv("FAJIT_PIPE_BUG_DUMP");
    printf("%s: %s, %d CTAs, timeout %.0f s\n", pb->name, cfg, NCTAS, timeout);
    int failed = 0;
    for (int bug = 0; bug < BUG_COUNT; bug++) {
        if (bug && !wanted(only, pipe_bug_name(bug))) continue;
        char *m = pipe_mutate(ptx, bug, what, sizeof what);
        if (!m) fail_msg("%s: %s: %s", cfg, pipe_bug_name(bug), what);
        if (dump && *dump) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s-%s.ptx", dump, pb->name, pipe_bug_name(bug));
            FILE *f = fopen(path, "w");
            if (f) fputs(m, f), fclose(f);
        }
        int kind = simulate(pb, m, sim, sizeof sim);
        double secs = 0;
        int out = run_on_gpu(pb, m, timeout, &secs);
        free(m);
        if (out == GPU_SKIP) {
            g_skipped = 1;
            break;
        }
        printf("%-15s simulator: %-40s GPU: %s (%.1f s)\n", pipe_bug_name(bug), pipe_kind_name(kind),
               outcome_names[out], secs);
        if (bug) printf("    %s\n    simulator: %.300s\n", what, sim);
        int bad = g_dry ? bug == BUG_NONE && kind != PIPE_OK
                        : out == GPU_SETUP || (bug == BUG_NONE && (out != GPU_CORRECT || kind != PIPE_OK)) ||
                              (bug == BUG_DROP_RELEASE && out != GPU_HANG) ||
                              (strict && bug != BUG_NONE && bug != BUG_EARLY_RELEASE && bug != BUG_NO_STORE_WAIT &&
                               out == GPU_CORRECT);
        if (bad) printf("    FAIL: %s\n", bug == BUG_NONE ? "the plain kernel must be right" : "the bug must show");
        failed += bad;
        if (bug == BUG_NONE && bad) break; /* nothing to compare the bugs with */
    }
    fajit_free(ptx);
    assert_int_equal(failed, 0);
}

static void test_pipe_bugs(void **state)
{
    (void)state;
    const char *t = getenv("FAJIT_PIPE_BUG_TIMEOUT"), *which = getenv("FAJIT_PIPE_BUG_CONFIG");
    const char *s = getenv("FAJIT_PIPE_BUGS_STRICT");
    double timeout = t && atof(t) > 0 ? atof(t) : 20;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    printf("inputs: seed %llu\n", (unsigned long long)seed);
    problem pb;
    if (!which || !*which) which = "d128";
    if (!strcmp(which, "d128") || !strcmp(which, "all")) {
        make_problem(&pb, "d128", 128, 0, seed);
        run_problem(&pb, timeout, s && *s == '1');
        free_problem(&pb);
    }
    if (!g_skipped && (!strcmp(which, "d64c") || !strcmp(which, "all"))) {
        make_problem(&pb, "d64c", 64, 1, seed + 7);
        run_problem(&pb, timeout, s && *s == '1');
        free_problem(&pb);
    }
}

/* Whether an sm_90a GPU is here, asked in a child (the parent never initializes CUDA: it forks the runs); the child
 * prints the reason when not. */
static int have_gpu(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        fajit_context *ctx = fj_test_gpu_context(); /* exits 77 without a GPU */
        int r = !ctx ? GPU_SETUP : fj_best_path(ctx) == FAJIT_ARCH_SM90A ? 0 : FJ_TEST_SKIP_CODE;
        if (r == FJ_TEST_SKIP_CODE) printf("SKIP: the GPU (%s) does not run sm_90a kernels\n", ctx->device_name);
        fflush(stdout);
        _exit(r);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status) == 0 ? 1 : WEXITSTATUS(status) == FJ_TEST_SKIP_CODE ? 0 : -1;
}

int main(void)
{
    const char *dry = getenv("FAJIT_PIPE_BUG_DRY");
    g_dry = dry && *dry == '1';
    int gpu = g_dry ? 1 : have_gpu();
    if (gpu == 0) return FJ_TEST_SKIP_CODE;
    if (gpu < 0) return printf("FAIL: the GPU probe failed\n"), 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pipe_bugs)};
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    if (g_skipped && r == 0) return FJ_TEST_SKIP_CODE; /* the child said why (SKIP: ...) */
    return r;
}
