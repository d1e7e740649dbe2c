/*
 * test_warm.c - fajit_warm without a GPU: its argument checks (each refused before anything is compiled, the
 * message naming the argument), and the compile-to-disk path of a context with device -1: kernels land in
 * the disk cache under the key a context on that GPU looks up (fj_kernel_disk_key with the target it would
 * use), configs giving one kernel are merged, a second call finds them cached, the progress callback runs on
 * the calling thread once per kernel, and a kernel that cannot be stored fails alone with its configs[i].
 * The compile tests skip without nvJitLink and NVRTC. Loading into a device context is the gpu tests' part.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "runtime/compiler_stamp.h"
#include "runtime/config_fill.h"
#include "runtime/context.h"
#include "runtime/cuda_api.h"
#include "runtime/warm.h"
#include "test_support.h"

typedef struct warm_fixture {
    char *dir;
    fajit_context *ctx; /* device -1, disk cache on in dir */
} warm_fixture;

static int setup(void **state)
{
    warm_fixture *f = calloc(1, sizeof *f);
    fajit_context_options o = fajit_context_options_default();
    if (!f || !(f->dir = fj_test_make_temp_dir("fajit-warm"))) return -1;
    o.device = -1;
    o.disk_cache = 1;
    o.cache_dir = f->dir;
    if (fajit_context_create(&o, &f->ctx) != FAJIT_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    warm_fixture *f = *state;
    fajit_context_destroy(f->ctx);
    fj_test_remove_dir(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static fajit_config cfg_of(fajit_arch arch, int head_dim, int causal)
{
    fajit_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.dtype = FAJIT_DTYPE_BF16;
    c.head_dim = head_dim;
    c.causal = causal;
    return c;
}

/* Files named *.cubin under <dir>/kernels. */
static int cubins_in(const char *dir)
{
    char cmd[4200], path[4096];
    snprintf(path, sizeof path, "%s/kernels", dir);
    if (access(path, F_OK) != 0) return 0;
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.cubin$'", path);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (!p || fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

/* ---- arguments ------------------------------------------------------------------------------------ */

static void test_arguments(void **state)
{
    warm_fixture *f = *state;
    fajit_config c[2] = {cfg_of(FAJIT_ARCH_SM80, 64, 0), cfg_of(FAJIT_ARCH_SM80, 100, 0)};
    fajit_warm_options o = fajit_warm_options_default();
    fajit_warm_result r;
    assert_int_equal(o.threads, 0);
    assert_null(o.sm);
    assert_null(o.progress);
    o.sm = "sm_90a";

    assert_true(fj_test_status_says(fajit_warm(NULL, c, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT, "ctx = NULL",
                                    NULL, NULL));
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, -1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT, "count = -1",
                                    "0..10000", NULL));
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, FAJIT_WARM_MAX_CONFIGS + 1, &o, &r),
                                    FAJIT_ERR_INVALID_ARGUMENT, "count = 10001", NULL, NULL));
    assert_true(fj_test_status_says(fajit_warm(f->ctx, NULL, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "configs = NULL", "count = 1", NULL));
    o.threads = -1;
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "opts->threads = -1", "256", NULL));
    o.threads = FAJIT_WARM_MAX_THREADS + 1;
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "opts->threads = 257", NULL, NULL));
    o.threads = 0;
    o.sm = "sm_91";
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "opts->sm = \"sm_91\"", "sm_90a", NULL));
    o.sm = NULL;
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 1, &o, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "opts->sm = NULL", "without a device", NULL));
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 1, NULL, &r), FAJIT_ERR_INVALID_ARGUMENT,
                                    "opts->sm = NULL", NULL, NULL));
    o.sm = "sm_90a";

    /* a config that cannot be filled fails the call, naming its position, with nothing compiled */
    assert_true(fj_test_status_says(fajit_warm(f->ctx, c, NULL, 2, &o, &r), FAJIT_ERR_INVALID_CONFIG, "configs[1]",
                                    "head_dim = 100", NULL));
    assert_int_equal(r.total, 0);
    assert_int_equal(r.compiled, 0);
    assert_int_equal(cubins_in(f->dir), 0);

    /* count 0: nothing to do */
    assert_int_equal(fajit_warm(f->ctx, NULL, NULL, 0, &o, &r), FAJIT_OK);
    assert_int_equal(r.total, 0);
    assert_int_equal(fajit_errmsg()[0], '\0');
}

static void test_disk_off(void **state)
{
    warm_fixture *f = *state;
    fajit_context_options co = fajit_context_options_default();
    fajit_context *ctx = NULL;
    fajit_config c = cfg_of(FAJIT_ARCH_SM80, 64, 0);
    fajit_warm_options o = fajit_warm_options_default();
    (void)f;
    co.device = -1;
    co.disk_cache = 0;
    assert_int_equal(fajit_context_create(&co, &ctx), FAJIT_OK);
    o.sm = "sm_80";
    assert_true(fj_test_status_says(fajit_warm(ctx, &c, NULL, 1, &o, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                                    "disk cache", "off", NULL));
    fajit_context_destroy(ctx);
}

/* ---- compile to disk -------------------------------------------------------------------------------- */

typedef struct progress_log {
    pthread_t caller;
    int calls, last_done, total, on_caller, failed;
    char notes[8][256];
} progress_log;

static void on_progress(void *user, int done, int total, int index, const fajit_config *cfg, fajit_status status,
                        const char *note)
{
    progress_log *p = user;
    assert_non_null(cfg);
    assert_non_null(note);
    assert_true(index >= 0);
    assert_int_equal(done, p->last_done + 1);
    p->last_done = done;
    p->total = total;
    p->on_caller += pthread_equal(pthread_self(), p->caller) != 0;
    p->failed += status != FAJIT_OK;
    if (p->calls < 8) snprintf(p->notes[p->calls], sizeof p->notes[0], "%s", note);
    p->calls++;
}

/* The key a context on an sm_90 GPU would look up for a filled config, and whether its cubin is there. */
static int entry_is_cubin(fajit_context *ctx, const fajit_config *filled, const char *target)
{
    fj_plan plan;
    char text[FJ_CONFIG_TEXT_MAX], key[FJ_DISK_CACHE_KEY_MAX];
    void *payload = NULL;
    size_t size = 0;
    assert_int_equal(fj_plan_build(filled, &plan), FAJIT_OK);
    assert_true(fj_plan_format(&plan, text, sizeof text) < (int)sizeof text);
    assert_int_equal(fj_kernel_disk_key(&ctx->disk, &plan, text, target, key, sizeof key), FAJIT_OK);
    if (!fj_disk_cache_load(&ctx->disk, key, "cubin", 0, &payload, &size)) return 0;
    int elf = size > 4 && memcmp(payload, "\177ELF", 4) == 0;
    free(payload);
    return elf;
}

static void require_compilers(void)
{
    if (fj_nvjitlink_load(NULL) != FAJIT_OK || fj_nvrtc_load(NULL) != FAJIT_OK) {
        print_message("SKIP: nvJitLink or NVRTC not loadable: %s\n", fajit_errmsg());
        skip();
    }
}

static void test_compile_to_disk(void **state)
{
    warm_fixture *f = *state;
    require_compilers();
    /* an sm_80-path kernel (nvJitLink, built for the device's sm_90), the sm_90a default of arch AUTO on an
     * sm_90 GPU (NVRTC, setmaxnreg), and the first one again, spelled out: 2 kernels */
    fajit_config c[3] = {cfg_of(FAJIT_ARCH_SM80, 64, 1), cfg_of(FAJIT_ARCH_AUTO, 64, 0), cfg_of(FAJIT_ARCH_SM80, 64, 1)};
    assert_int_equal(fj_config_fill_for(NULL, NULL, fj_arch_find("sm_90"), 0, &c[2]), FAJIT_OK);
    fajit_warm_options o = fajit_warm_options_default();
    fajit_warm_result r;
    progress_log log = {pthread_self(), 0, 0, 0, 0, 0, {{0}}};
    o.sm = "sm_90";
    o.threads = 8; /* more than the kernels: capped at 2 */
    o.progress = on_progress;
    o.progress_user = &log;
    fajit_status st = fajit_warm(f->ctx, c, NULL, 3, &o, &r);
    if (st != FAJIT_OK) print_error("%s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    assert_int_equal(r.total, 2);
    assert_int_equal(r.compiled, 2);
    assert_int_equal(r.cached, 0);
    assert_int_equal(r.failed, 0);
    assert_int_equal(r.threads, 2);
    assert_true(r.seconds > 0);
    assert_int_equal(log.calls, 2);
    assert_int_equal(log.total, 2);
    assert_int_equal(log.on_caller, 2);
    assert_non_null(strstr(log.notes[0], "compiled in"));
    assert_int_equal(cubins_in(f->dir), 2);

    /* under the keys a context on an H100 / H200 uses: sm_80 code built for sm_90, sm_90a code for sm_90a */
    fajit_config sm90a = cfg_of(FAJIT_ARCH_SM90A, 64, 0);
    assert_int_equal(fj_config_fill_for(NULL, NULL, fj_arch_find("sm_90"), 0, &sm90a), FAJIT_OK);
    assert_true(entry_is_cubin(f->ctx, &c[2], "sm_90"));
    assert_true(entry_is_cubin(f->ctx, &sm90a, "sm_90a"));
    assert_false(entry_is_cubin(f->ctx, &c[2], "sm_90a"));

    /* again, naming the GPU by its "a" target: both found on disk, nothing compiled */
    memset(&log, 0, sizeof log);
    log.caller = pthread_self();
    o.sm = "sm_90a";
    o.threads = 1;
    assert_int_equal(fajit_warm(f->ctx, c, NULL, 3, &o, &r), FAJIT_OK);
    assert_int_equal(r.total, 2);
    assert_int_equal(r.compiled, 0);
    assert_int_equal(r.cached, 2);
    assert_int_equal(r.threads, 1);
    assert_string_equal(log.notes[0], "disk");
    assert_int_equal(cubins_in(f->dir), 2);
}

/* A kernel that cannot be stored fails alone: the others are still compiled, the call names configs[i]. */
static void test_store_failure(void **state)
{
    warm_fixture *f = *state;
    char kernels[4096];
    require_compilers();
    /* <dir>/kernels as a plain file: no entry can be written (refused even for root) */
    snprintf(kernels, sizeof kernels, "%s/kernels", f->dir);
    FILE *k = fopen(kernels, "w");
    assert_non_null(k);
    fclose(k);
    fajit_config c = cfg_of(FAJIT_ARCH_SM80, 64, 0);
    fajit_warm_options o = fajit_warm_options_default();
    fajit_warm_result r;
    progress_log log = {pthread_self(), 0, 0, 0, 0, 0, {{0}}};
    o.sm = "sm_80";
    o.progress = on_progress;
    o.progress_user = &log;
    assert_true(fj_test_status_says(fajit_warm(f->ctx, &c, NULL, 1, &o, &r), FAJIT_ERR_IO, "1 of 1 kernels failed",
                                    "configs[0]", "disk cache"));
    assert_int_equal(r.total, 1);
    assert_int_equal(r.failed, 1);
    assert_int_equal(r.compiled, 0);
    assert_int_equal(log.failed, 1);
}

/* fj_warm_run's deadline (the tuner's time budget): kernels not started are reported, not compiled. */
static void test_deadline(void **state)
{
    warm_fixture *f = *state;
    fajit_config c[2] = {cfg_of(FAJIT_ARCH_SM80, 64, 0), cfg_of(FAJIT_ARCH_SM80, 128, 0)};
    fajit_warm_result r;
    progress_log log = {pthread_self(), 0, 0, 0, 0, 0, {{0}}};
    fj_warm_request rq = {f->ctx, c, NULL, 2, 1, fj_arch_find("sm_80"), 1e-9, 0, 0, on_progress, &log};
    assert_int_equal(fj_warm_run(&rq, &r), FAJIT_OK);
    assert_int_equal(r.total, 2);
    assert_int_equal(r.compiled + r.cached + r.failed, 0);
    assert_int_equal(log.calls, 2);
    assert_non_null(strstr(log.notes[0], "not started"));
    assert_int_equal(cubins_in(f->dir), 0);
    assert_true(fj_warm_cpus() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_to_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_failure, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
