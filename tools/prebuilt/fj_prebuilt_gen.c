/*
 * fj_prebuilt_gen.c - build-time tool: compiles the prebuilt set (src/runtime/prebuilt_set.c) and writes the
 * blob prebuilt.c serves (format in src/runtime/prebuilt.h). Needs nvJitLink and NVRTC, never a GPU.
 *
 *   fj_prebuilt_gen OUT.bin [--jobs N]   compile the set on N threads (default 2) and write OUT.bin
 *   fj_prebuilt_gen --list               print the set, one kernel a line (target, canonical text)
 *
 * Run by the build when FAJIT_PREBUILT is ON (CMakeLists.txt). The blob's entries are in the set's order, so
 * the same sources and compiler give the same bytes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "runtime/compile.h"
#include "runtime/context.h"
#include "runtime/disk_cache.h"
#include "runtime/hash.h"
#include "runtime/prebuilt.h"

#define SET_MAX 1024

typedef struct gen_job {
    fj_prebuilt_item item;
    char text[FJ_CONFIG_TEXT_MAX];
    unsigned char *entry; /* the encoded entry, NULL until compiled */
    size_t entry_len, cubin_len;
    double seconds;
    char error[512];
} gen_job;

typedef struct gen_state {
    gen_job *jobs;
    int n, next;
    pthread_mutex_t lock;
} gen_state;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Generate, compile and encode one kernel. */
static void gen_one(gen_job *j)
{
    fj_plan plan;
    char *ptx = NULL;
    void *cubin = NULL;
    size_t ptx_len = 0, size = 0;
    char key[512];
    double t0 = now_s();
    fajit_status st = fj_plan_build_variant(&j->item.cfg, j->item.variant, &plan);
    /* as the runtime's store (kernel_store.c store_create) plans a kernel for its device: the cubin served for a
     * text and target is the one the runtime would compile (FP8 K/V cvt widening, griddepcontrol) */
    if (st == FAJIT_OK) fj_plan_for_target(&plan, fj_arch_find(j->item.target));
    if (st == FAJIT_OK) fj_plan_format(&plan, j->text, sizeof j->text);
    if (st == FAJIT_OK) st = fj_generate_ptx_plan(&plan, 0, &ptx, &ptx_len);
    if (st == FAJIT_OK) st = fj_compile_kernel(&plan, ptx, ptx_len, j->item.target, &cubin, &size, NULL);
    if (st != FAJIT_OK) {
        snprintf(j->error, sizeof j->error, "%s", fajit_errmsg());
    } else {
        fj_prebuilt_key(key, sizeof key, j->text, j->item.target);
        j->entry = fj_disk_cache_entry_encode(key, FJ_PREBUILT_KIND, fj_source_hash(ptx, ptx_len), cubin, size,
                                              &j->entry_len);
        j->cubin_len = size;
        if (!j->entry) snprintf(j->error, sizeof j->error, "out of memory encoding the entry");
    }
    j->seconds = now_s() - t0;
    free(ptx);
    free(cubin);
}

static void *gen_worker(void *arg)
{
    gen_state *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int i = s->next < s->n ? s->next++ : -1;
        pthread_mutex_unlock(&s->lock);
        if (i < 0) return NULL;
        gen_one(&s->jobs[i]);
    }
}

static int write_blob(const char *path, const gen_job *jobs, int n)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return perror(tmp), 1;
    for (int i = 0; i < n; i++)
        if (fwrite(jobs[i].entry, 1, jobs[i].entry_len, f) != jobs[i].entry_len) return perror(tmp), fclose(f), 1;
    if (fclose(f) != 0 || rename(tmp, path) != 0) return perror(path), 1;
    return 0;
}

int main(int argc, char **argv)
{
    static fj_prebuilt_item items[SET_MAX];
    const char *out = NULL;
    int jobs_n = 2, list = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) jobs_n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--list") == 0) list = 1;
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else return fprintf(stderr, "usage: fj_prebuilt_gen OUT.bin [--jobs N] | --list\n"), 2;
    }
    if (!out && !list) return fprintf(stderr, "usage: fj_prebuilt_gen OUT.bin [--jobs N] | --list\n"), 2;
    int n = fj_prebuilt_set(items, SET_MAX);
    if (n < 0 || n > SET_MAX)
        return fprintf(stderr, "fj_prebuilt_gen: the set has %d kernels (at most %d)\n", n, SET_MAX), 1;
    gen_state s = {calloc((size_t)n, sizeof(gen_job)), n, 0, PTHREAD_MUTEX_INITIALIZER};
    if (!s.jobs) return fprintf(stderr, "fj_prebuilt_gen: out of memory\n"), 1;
    for (int i = 0; i < n; i++) s.jobs[i].item = items[i];
    if (list) {
        for (int i = 0; i < n; i++) {
            fj_plan plan;
            char text[FJ_CONFIG_TEXT_MAX] = "?";
            if (fj_plan_build_variant(&items[i].cfg, items[i].variant, &plan) == FAJIT_OK)
                fj_plan_format(&plan, text, sizeof text);
            printf("%-7s %s\n", items[i].target, text);
        }
        free(s.jobs);
        return 0;
    }
    if (jobs_n < 1) jobs_n = 1;
    if (jobs_n > 64) jobs_n = 64;
    double t0 = now_s();
    pthread_t threads[64];
    for (int t = 0; t < jobs_n; t++) pthread_create(&threads[t], NULL, gen_worker, &s);
    for (int t = 0; t < jobs_n; t++) pthread_join(threads[t], NULL);
    size_t bytes = 0, cubins = 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (s.jobs[i].error[0]) {
            fprintf(stderr, "fj_prebuilt_gen: %s %s: %s\n", s.jobs[i].item.target, s.jobs[i].text, s.jobs[i].error);
            failed++;
        }
        bytes += s.jobs[i].entry_len;
        cubins += s.jobs[i].cubin_len;
    }
    if (failed) {
        fprintf(stderr, "fj_prebuilt_gen: %d of %d kernels failed; build with -DFAJIT_PREBUILT=OFF to skip the "
                        "prebuilt kernels (nvJitLink and NVRTC are needed to build them)\n", failed, n);
        return 1;
    }
    int rc = write_blob(out, s.jobs, n);
    if (rc == 0)
        printf("fj_prebuilt_gen: %d kernels (sm_80, sm_90, sm_90a), %zu bytes of cubins, blob %zu bytes, %.1f s on %d "
               "threads\n", n, cubins, bytes, now_s() - t0, jobs_n);
    for (int i = 0; i < n; i++) free(s.jobs[i].entry);
    free(s.jobs);
    return rc;
}
