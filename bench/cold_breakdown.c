/*
 * cold_breakdown.c - where one cold compile of a kernel goes, in a new process, without a GPU (issue 23): the
 * steps fajit's compile path takes for a whole-program (sm_90a) kernel, each timed alone, wall and CPU time.
 *
 *   build/bench_cold_breakdown [--headdim D] [--causal] [--roll on|off] [--arch sm_90a|sm_80]
 *
 * Steps, in this order (the order a process meets them in):
 *   ptx first        fajit_generate_ptx, the process's first call (plan, heuristic config filled before)
 *   ptx again        the same call again (the median of 5)
 *   compiler load    dlopen + dlsym of the compiler library (NVRTC; nvJitLink for an sm_80 plan)
 *   compile first    the library's compile of the PTX (fj_compile_kernel): the first in the process
 *   compile again    the same compile again (the compiler's one-time setup gone)
 *   front end        NVRTC on the same wrapper to PTX only (--gpu-architecture=compute_90a): the CUDA C front end
 *                    and NVVM, no ptxas; "compile again" minus this is NVRTC's ptxas
 *   disk store       fajit's disk-cache stores of the cubin and the PTX (temp file, fsync, rename) into a fresh dir
 * cuModuleLoadData (the driver loading the cubin) needs a GPU and is not here: fagen bench --latency's "first
 * kernel" line minus these steps is what is left for it. FAJIT_PTXAS_OPTS is honoured (compile.h).
 * Prints "step  wall ms  cpu ms" lines and one "RESULT key=value ..." line for bench/compile_ab.sh --local.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "codegen/emit.h"
#include "fajit.h"
#include "runtime/compile.h"
#include "runtime/cuda_api.h"
#include "runtime/disk_cache.h"

typedef struct stamp {
    double wall, cpu; /* ms */
} stamp;

static stamp now(void)
{
    struct timespec t;
    struct rusage ru;
    clock_gettime(CLOCK_MONOTONIC, &t);
    getrusage(RUSAGE_SELF, &ru); /* every thread of the process (a compiler may start its own) */
    stamp s = {(double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6,
               (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3};
    return s;
}

static stamp since(stamp a)
{
    stamp b = now();
    stamp d = {b.wall - a.wall, b.cpu - a.cpu};
    return d;
}

static void row(const char *what, stamp d) { printf("  %-16s %9.1f %9.1f\n", what, d.wall, d.cpu); }

static int die(const char *what)
{
    fprintf(stderr, "cold_breakdown: %s: %s\n", what, fajit_errmsg());
    return 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_cold_breakdown [--headdim D] [--causal] [--roll on|off] [--arch sm_90a|sm_80]\n");
    return 2;
}

static int parse(int argc, char **argv, fajit_config *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--causal") == 0) cfg->causal = 1;
        else if (strcmp(a, "--headdim") == 0 && v) cfg->head_dim = atoi(v), i++;
        else if (strcmp(a, "--roll") == 0 && v && (strcmp(v, "on") == 0 || strcmp(v, "off") == 0))
            cfg->roll = strcmp(v, "on") == 0 ? 1 : -1, i++;
        else if (strcmp(a, "--arch") == 0 && v && (strcmp(v, "sm_90a") == 0 || strcmp(v, "sm_80") == 0))
            cfg->arch = strcmp(v, "sm_90a") == 0 ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80, i++;
        else return -1;
    }
    return 0;
}

/* NVRTC's front end alone on the whole-program wrapper: CUDA C -> PTX for the virtual architecture. */
static int front_end(const fj_plan *plan, const char *ptx, size_t len, stamp *d)
{
    const fj_nvrtc_api *rtc;
    fj_buf src;
    void *prog = NULL;
    const char *opts[] = {"--gpu-architecture=compute_90a"};
    fj_buf_init(&src);
    if (fj_nvrtc_load(&rtc) != FAJIT_OK || fj_compile_whole_source(plan, ptx, len, &src) != FAJIT_OK) return -1;
    stamp t0 = now();
    int rc = rtc->create_program(&prog, src.data, "fajit_fwd.cu", 0, NULL, NULL);
    if (rc == 0) rc = rtc->compile_program(prog, 1, opts);
    *d = since(t0);
    if (prog) rtc->destroy_program(&prog);
    fj_buf_free(&src);
    return rc;
}

/* The disk source's two stores (source_disk.c: the cubin, then the PTX) into a fresh cache directory. */
static int disk_store(const void *cubin, size_t size, const char *ptx, size_t len, stamp *d)
{
    char dir[] = "/tmp/fajit-cold-breakdown-XXXXXX", cmd[96];
    fj_disk_cache cache;
    if (!mkdtemp(dir) || fj_disk_cache_init(&cache, 1, dir) != FAJIT_OK) return -1;
    stamp t0 = now();
    int rc = fj_disk_cache_store(&cache, "cold breakdown key", "cubin", 1, cubin, size);
    if (rc == 0) rc = fj_disk_cache_store(&cache, "cold breakdown key", "ptx", 0, ptx, len);
    *d = since(t0);
    fj_disk_cache_fini(&cache);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cold_breakdown: could not remove %s\n", dir);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    fj_plan plan;
    char *ptx = NULL, text[160];
    size_t len = 0, size = 0;
    void *cubin = NULL;
    stamp d_gen, d_load, d_first, d_again, d_fe = {0, 0}, d_store;
    double again[5];
    if (parse(argc, argv, &cfg) != 0) return usage();
    if (fajit_config_fill(NULL, NULL, &cfg) != FAJIT_OK) return die("fajit_config_fill");
    if (fj_plan_build(&cfg, &plan) != FAJIT_OK) return die("fj_plan_build");
    fajit_config_format(&cfg, text, sizeof text);
    const char *sm = plan.arch->name;

    stamp t0 = now();
    if (fajit_generate_ptx(&cfg, 0, &ptx, &len) != FAJIT_OK) return die("fajit_generate_ptx");
    d_gen = since(t0);
    for (int i = 0; i < 5; i++) {
        char *p2 = NULL;
        size_t l2 = 0;
        t0 = now();
        if (fajit_generate_ptx(&cfg, 0, &p2, &l2) != FAJIT_OK) return die("fajit_generate_ptx");
        again[i] = since(t0).wall;
        fajit_free(p2);
    }
    qsort(again, 5, sizeof again[0], cmp_double);

    t0 = now();
    fajit_status st;
    if (plan.whole_program) {
        const fj_nvrtc_api *rtc;
        st = fj_nvrtc_load(&rtc);
    } else {
        const fj_nvjitlink_api *jl;
        st = fj_nvjitlink_load(&jl);
    }
    if (st != FAJIT_OK) return die("compiler load");
    d_load = since(t0);

    t0 = now();
    if (fj_compile_kernel(&plan, ptx, len, sm, &cubin, &size, NULL) != FAJIT_OK) return die("compile");
    d_first = since(t0);
    free(cubin);
    t0 = now();
    if (fj_compile_kernel(&plan, ptx, len, sm, &cubin, &size, NULL) != FAJIT_OK) return die("compile again");
    d_again = since(t0);
    if (plan.whole_program && front_end(&plan, ptx, len, &d_fe) != 0) return die("NVRTC front end");
    if (disk_store(cubin, size, ptx, len, &d_store) != 0) return die("disk store");

    const char *opts = getenv("FAJIT_PTXAS_OPTS");
    printf("cold compile of %s for %s (%zu B of PTX, %zu B of cubin%s%s)\n", text, sm, len, size,
           opts ? "; FAJIT_PTXAS_OPTS=" : "", opts ? opts : "");
    printf("  %-16s %9s %9s\n", "step", "wall ms", "cpu ms");
    row("ptx first", d_gen);
    printf("  %-16s %9.1f\n", "ptx again", again[2]);
    row("compiler load", d_load);
    row("compile first", d_first);
    row("compile again", d_again);
    if (plan.whole_program) row("front end", d_fe);
    row("disk store", d_store);
    printf("RESULT ptx_ms=%.2f ptx_again_ms=%.2f load_ms=%.2f compile_first_ms=%.1f compile_first_cpu=%.1f "
           "compile_again_ms=%.1f compile_again_cpu=%.1f front_end_ms=%.1f front_end_cpu=%.1f store_ms=%.2f "
           "ptx_bytes=%zu\n",
           d_gen.wall, again[2], d_load.wall, d_first.wall, d_first.cpu, d_again.wall, d_again.cpu, d_fe.wall,
           d_fe.cpu, d_store.wall, len);
    free(cubin);
    fajit_free(ptx);
    return 0;
}
