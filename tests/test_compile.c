/*
 * test_compile.c - unit tests of the nvJitLink path (src/runtime/compile.c, cuda_api.c); no GPU needed.
 *
 * A hand-written PTX kernel compiles to an ELF cubin for sm_80 and sm_90a with an info log; broken PTX
 * gives FAJIT_ERR_COMPILE with the ptxas errors in the message and the whole log in the log buffer; a
 * long log is truncated in the message; unknown targets are refused with the list of valid ones; the
 * path/target compatibility rule; FAJIT_PTXAS_OPTS (read, refused, passed on, in the disk key). Skips (exit 77)
 * when nvJitLink cannot be loaded.
 * Run: ctest --test-dir build -R test_compile
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fajit.h"
#include "codegen/codegen.h"
#include "runtime/compile.h"
#include "runtime/compiler_stamp.h"
#include "runtime/cuda_api.h"
#include "runtime/disk_cache.h"
#include "test_support.h"

static const char k_ptx[] = ".version 8.0\n.target sm_80\n.address_size 64\n"
                            ".visible .entry fajit_fwd(.param .align 8 .b8 p[168])\n{\n"
                            "  .reg .b64 %rd<2>;\n  ld.param.u64 %rd1, [p];\n  ret;\n}\n";

static void test_identity(void **state)
{
    (void)state;
    char id[64];
    assert_int_equal(fj_compiler_identity(id, sizeof id), FAJIT_OK);
    print_message("compiler identity: %s\n", id);
    assert_true(strncmp(id, "nvJitLink ", 10) == 0);
}

static void compile_ok(const char *sm)
{
    void *cubin = NULL;
    char *log = NULL;
    size_t size = 0;
    assert_int_equal(fj_compile_ptx(k_ptx, strlen(k_ptx), sm, &cubin, &size, &log), FAJIT_OK);
    assert_true(size > 64);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);
    assert_non_null(log);
    assert_non_null(strstr(log, "fajit_fwd")); /* -verbose: "Compiling entry function 'fajit_fwd'" */
    fajit_free(cubin);
    fajit_free(log);
}

static void test_compile_ok(void **state)
{
    (void)state;
    compile_ok("sm_80");
    compile_ok("sm_90a");
    void *cubin = NULL;
    size_t size = 0;
    assert_int_equal(fj_compile_ptx(k_ptx, strlen(k_ptx), "sm_86", &cubin, &size, NULL), FAJIT_OK);
    fajit_free(cubin);
}

static void test_compile_error(void **state)
{
    (void)state;
    const char *bad = ".version 8.0\n.target sm_80\n.address_size 64\n"
                      ".visible .entry fajit_fwd()\n{\n  bogus.op %r1;\n  ret;\n}\n";
    void *cubin = NULL;
    char *log = NULL;
    size_t size = 0;
    assert_int_equal(fj_compile_ptx(bad, strlen(bad), "sm_80", &cubin, &size, &log), FAJIT_ERR_COMPILE);
    print_message("%s\n", fajit_errmsg());
    assert_null(cubin);
    assert_non_null(strstr(fajit_errmsg(), "NVJITLINK_ERROR_PTX_COMPILE"));
    assert_non_null(strstr(fajit_errmsg(), "bogus"));
    assert_non_null(strstr(fajit_errmsg(), "sm_80"));
    assert_null(strstr(fajit_errmsg(), "truncated")); /* a short log is quoted whole */
    assert_non_null(log);
    assert_non_null(strstr(log, "line 6"));
    fajit_free(log);
}

/* Hundreds of errors: the message quotes the start and says the log was cut. */
static void test_long_log_truncated(void **state)
{
    (void)state;
    size_t cap = 64 * 1024, used = 0;
    char *bad = malloc(cap);
    used += (size_t)snprintf(bad, cap, ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n");
    for (int i = 0; i < 300; i++) used += (size_t)snprintf(bad + used, cap - used, "  nonsense%d.op %%r%d;\n", i, i);
    snprintf(bad + used, cap - used, "  ret;\n}\n");
    void *cubin = NULL;
    char *log = NULL;
    size_t size = 0;
    assert_int_equal(fj_compile_ptx(bad, strlen(bad), "sm_80", &cubin, &size, &log), FAJIT_ERR_COMPILE);
    assert_non_null(strstr(fajit_errmsg(), "log truncated"));
    assert_true(strlen(fajit_errmsg()) < 2048);
    assert_true(strlen(log) > 4000);
    fajit_free(log);
    free(bad);
}

static void test_unknown_target(void **state)
{
    (void)state;
    void *cubin = NULL;
    size_t size = 0;
    assert_int_equal(fj_compile_ptx(k_ptx, strlen(k_ptx), "sm_81", &cubin, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "sm = \"sm_81\""));
    assert_non_null(strstr(fajit_errmsg(), "sm_80, sm_86"));
    fajit_config cfg = {FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 128, 64, 64, 2, 128, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(fajit_compile_cubin(&cfg, "compute_80", &cubin, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "valid targets are"));
    assert_int_equal(fajit_compile_cubin(NULL, "sm_80", &cubin, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "cfg = NULL"));
}

static void test_target_rule(void **state)
{
    (void)state;
    const fj_arch_info *sm80 = fj_arch_find("sm_80"), *sm86 = fj_arch_find("sm_86"), *sm90 = fj_arch_find("sm_90"),
                       *sm90a = fj_arch_find("sm_90a"), *sm100a = fj_arch_find("sm_100a");
    assert_int_equal(fj_compile_check_target(sm80, sm86), FAJIT_OK);
    assert_int_equal(fj_compile_check_target(sm80, sm90a), FAJIT_OK);
    assert_int_equal(fj_compile_check_target(sm90a, sm90a), FAJIT_OK);
    assert_int_equal(fj_compile_check_target(sm90a, sm90), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "compiles only for sm_90a"));
    assert_int_equal(fj_compile_check_target(sm90a, sm100a), FAJIT_ERR_UNSUPPORTED);
    assert_int_equal(fj_compile_check_target(sm90, sm86), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "needs sm_90 or newer"));
}

/* A real generated kernel, once the code generator gives one (skipped while it cannot). */
static void test_compile_cubin_config(void **state)
{
    (void)state;
    fajit_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dtype = FAJIT_DTYPE_BF16;
    cfg.head_dim = 128;
    if (fajit_config_fill(NULL, NULL, &cfg) != FAJIT_OK) {
        print_message("SKIP: fajit_config_fill: %s\n", fajit_errmsg());
        skip();
    }
    void *cubin = NULL;
    char *log = NULL;
    size_t size = 0;
    fajit_status st = fajit_compile_cubin(&cfg, "sm_90", &cubin, &size, &log);
    if (st != FAJIT_OK) print_error("%s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);
    fajit_free(cubin);
    fajit_free(log);
}

/* FAJIT_PTXAS_OPTS (compile.h): accepted options read in canonical form, anything else refused naming the word and
 * the list; both compile paths take them (an -O level replaces the default); the disk-cache key names them. */
static void test_ptxas_opts(void **state)
{
    (void)state;
    fj_ptxas_opts o;
    unsetenv("FAJIT_PTXAS_OPTS");
    assert_int_equal(fj_ptxas_opts_read(&o), FAJIT_OK);
    assert_int_equal(o.n, 0);
    assert_string_equal(o.text, "");
    setenv("FAJIT_PTXAS_OPTS", "  -O1   --allow-expensive-optimizations=false ", 1);
    assert_int_equal(fj_ptxas_opts_read(&o), FAJIT_OK);
    assert_int_equal(o.n, 2);
    assert_string_equal(o.text, "-O1 --allow-expensive-optimizations=false");
    setenv("FAJIT_PTXAS_OPTS", "-O1 -Ofc", 1);
    assert_int_equal(fj_ptxas_opts_read(&o), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "FAJIT_PTXAS_OPTS = \"-O1 -Ofc\": \"-Ofc\" is not an accepted"));
    assert_non_null(strstr(fajit_errmsg(), "accepted: -O0, -O1"));
    setenv("FAJIT_PTXAS_OPTS", "-O1 -O2 -O3 -O0 -O1", 1);
    assert_int_equal(fj_ptxas_opts_read(&o), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "more than 4 options"));

    void *cubin = NULL;
    size_t size = 0;
    setenv("FAJIT_PTXAS_OPTS", "-maxrregcount=32", 1); /* refused before nvJitLink sees it */
    assert_int_equal(fj_compile_ptx(k_ptx, strlen(k_ptx), "sm_80", &cubin, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "\"-maxrregcount=32\" is not an accepted ptxas option"));
    setenv("FAJIT_PTXAS_OPTS", "-O1 --allow-expensive-optimizations=false", 1);
    assert_int_equal(fj_compile_ptx(k_ptx, strlen(k_ptx), "sm_80", &cubin, &size, NULL), FAJIT_OK);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);
    free(cubin);

    /* the key of an sm_80 kernel (nvJitLink) with and without them */
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64};
    assert_int_equal(fajit_config_fill(NULL, NULL, &cfg), FAJIT_OK);
    fj_plan plan;
    assert_int_equal(fj_plan_build(&cfg, &plan), FAJIT_OK);
    fj_disk_cache cache;
    assert_int_equal(fj_disk_cache_init(&cache, 0, NULL), FAJIT_OK);
    char key[FJ_DISK_CACHE_KEY_MAX], plain[FJ_DISK_CACHE_KEY_MAX];
    assert_int_equal(fj_kernel_disk_key(&cache, &plan, "cfg", "sm_80", key, sizeof key), FAJIT_OK);
    assert_non_null(strstr(key, " ptxas -O1 --allow-expensive-optimizations=false\n"));
    unsetenv("FAJIT_PTXAS_OPTS");
    assert_int_equal(fj_kernel_disk_key(&cache, &plan, "cfg", "sm_80", plain, sizeof plain), FAJIT_OK);
    assert_null(strstr(plain, "ptxas"));
    assert_string_not_equal(key, plain);
    setenv("FAJIT_PTXAS_OPTS", "-O9", 1);
    assert_int_equal(fj_kernel_disk_key(&cache, &plan, "cfg", "sm_80", key, sizeof key), FAJIT_ERR_INVALID_ARGUMENT);
    unsetenv("FAJIT_PTXAS_OPTS");
    fj_disk_cache_fini(&cache);
}

int main(void)
{
    if (fj_nvjitlink_load(NULL) != FAJIT_OK) fj_test_skip_all("nvJitLink not loadable: %s", fajit_errmsg());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity),        cmocka_unit_test(test_compile_ok),
        cmocka_unit_test(test_compile_error),   cmocka_unit_test(test_long_log_truncated),
        cmocka_unit_test(test_unknown_target),  cmocka_unit_test(test_target_rule),
        cmocka_unit_test(test_compile_cubin_config), cmocka_unit_test(test_ptxas_opts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
