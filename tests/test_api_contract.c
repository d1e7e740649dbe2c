/*
 * test_api_contract.c - the promise of fajit.h, walked: "the library never prints, exits or aborts on a
 * caller's mistake". Every function declared in include/fajit.h is called with NULL for each pointer,
 * 0 / negative / INT_MAX for each integer and garbage enum values, and must return a status it documents
 * (with a message) or its documented value, without crashing. The structs it takes are walked word by word
 * (every 4-byte word of fajit_config, fajit_shape, fajit_attention_args and the plain fields of the option
 * structs gets each garbage value in turn), so fields appended later are walked without editing this file.
 * Calls that need a GPU get ctx NULL and a context with no device (device = -1). No GPU, no files.
 * test_every_function_walked fails when fajit.h declares a function this file does not name.
 * Run under ASan + UBSan as CI does (scripts/test-sanitize.sh; build-san):
 *   cmake -S . -B build-san -DCMAKE_C_COMPILER=clang -DFAJIT_SANITIZE=address,undefined
 *   cmake --build build-san -j2 --target test_api_contract && build-san/tests/test_api_contract
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fajit.h"
#include "test_support.h"

static const int k_ints[] = {0, 1, -1, 2, 3, 7, 17, 100, 1000, 12345, 65536, 1 << 20, INT_MAX, INT_MAX - 7, INT_MIN,
                             INT_MIN + 1, -128};
static const int64_t k_i64s[] = {0, 1, -1, 8, INT64_MAX, INT64_MIN, INT64_MAX - 7, (int64_t)1 << 40, 0x7f0000000001LL};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------------------------------
 * The contract
 * ------------------------------------------------------------------------------------------------- */
/* A status the header declares, and a message when it is a failure; never FAJIT_ERR_INTERNAL (a bug). */
static void expect_status(fajit_status st, const char *what)
{
    if ((int)st < FAJIT_OK || (int)st > FAJIT_ERR_INTERNAL || st == FAJIT_ERR_INTERNAL ||
        (st != FAJIT_OK && !fajit_errmsg()[0])) {
        printf("%s: status %d (%s), message \"%s\"\n", what, (int)st, fajit_status_name(st), fajit_errmsg());
        fail();
    }
}

static void expect_failure(fajit_status st, fajit_status want, const char *what)
{
    expect_status(st, what);
    if (st != want) {
        printf("%s: %s, wanted %s (\"%s\")\n", what, fajit_status_name(st), fajit_status_name(want), fajit_errmsg());
        fail();
    }
}

static fajit_context *nodev_context(void)
{
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    return ctx;
}

static fajit_config valid_config(void)
{
    fajit_config c;
    memset(&c, 0, sizeof c); /* fields appended later: 0 */
    c.arch = FAJIT_ARCH_SM80, c.dtype = FAJIT_DTYPE_BF16, c.head_dim = 128, c.block_m = 64, c.block_n = 64;
    c.stages = 2, c.swizzle = 128, c.warps = 4, c.causal = 0, c.col_warps = 1;
    return c;
}

/* ---------------------------------------------------------------------------------------------------
 * Status, messages, version, free
 * ------------------------------------------------------------------------------------------------- */
static void test_status_and_version(void **state)
{
    (void)state;
    assert_string_equal(fajit_version(), FAJIT_VERSION);
    assert_int_equal(fajit_version_number(), FAJIT_VERSION_NUMBER);
    for (size_t i = 0; i < COUNT(k_ints); i++) { /* garbage statuses: a name, never NULL */
        const char *name = fajit_status_name((fajit_status)k_ints[i]);
        assert_non_null(name);
        assert_true(strncmp(name, "FAJIT_", 6) == 0);
    }
    assert_string_equal(fajit_status_name(FAJIT_ERR_IO), "FAJIT_ERR_IO");
    assert_non_null(fajit_errmsg());
    assert_non_null(fajit_last_forward());
    assert_int_equal(fajit_last_forward_source(), FAJIT_SOURCE_MEMORY); /* before any forward on this thread */
    fajit_free(NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * fajit_config_format: issue 21 item 1 (buf NULL with size 10 wrote through NULL)
 * ------------------------------------------------------------------------------------------------- */
static void format_checked(const fajit_config *c)
{
    char full[256], buf[300];
    int n = fajit_config_format(c, full, sizeof full);
    assert_true(n > 0 && (size_t)n < sizeof full && strlen(full) == (size_t)n);
    static const size_t sizes[] = {0, 1, 2, 5, 10, 64, 255, 256};
    for (size_t i = 0; i < COUNT(sizes); i++) {
        assert_int_equal(fajit_config_format(c, NULL, sizes[i]), n); /* NULL: the length only */
        memset(buf, 'Z', sizeof buf);
        assert_int_equal(fajit_config_format(c, buf, sizes[i]), n);
        if (sizes[i] == 0) {
            assert_int_equal(buf[0], 'Z'); /* nothing written */
            continue;
        }
        size_t kept = (size_t)n < sizes[i] - 1 ? (size_t)n : sizes[i] - 1;
        assert_int_equal(buf[kept], '\0');
        assert_memory_equal(buf, full, kept);
        assert_int_equal(buf[sizes[i]], 'Z'); /* nothing past size */
    }
}

static void test_config_format(void **state)
{
    (void)state;
    fajit_config c = valid_config();
    format_checked(&c);
    format_checked(NULL); /* "(null)" */
    char buf[16];
    assert_int_equal(fajit_config_format(NULL, buf, sizeof buf), 6);
    assert_string_equal(buf, "(null)");
    assert_int_equal(fajit_config_format(NULL, NULL, 10), 6);
    for (size_t w = 0; w < sizeof c / sizeof(int); w++) /* every field garbage: still text, still bounded */
        for (size_t i = 0; i < COUNT(k_ints); i++) {
            fajit_config g = valid_config();
            memcpy((char *)&g + w * sizeof(int), &k_ints[i], sizeof(int));
            format_checked(&g);
        }
}

/* ---------------------------------------------------------------------------------------------------
 * Config calls: check, fill, generate, explain, compile, kernel_get, with every field garbage
 * ------------------------------------------------------------------------------------------------- */
static void config_calls(fajit_context *nodev, const fajit_config *c)
{
    fajit_status check = fajit_config_check(c);
    expect_status(check, "fajit_config_check");
    char *text = NULL;
    size_t len = 0;
    fajit_status st = fajit_generate_ptx(c, 0, &text, &len);
    expect_status(st, "fajit_generate_ptx");
    assert_int_equal(st, check); /* generation refuses exactly what the check refuses */
    assert_true(st == FAJIT_OK ? text != NULL && strlen(text) == len : text == NULL);
    fajit_free(text);
    text = NULL;
    st = fajit_explain(c, &text);
    assert_int_equal(st, check);
    assert_true(st == FAJIT_OK ? text != NULL : text == NULL);
    fajit_free(text);
    if (check != FAJIT_OK) { /* refused before any compiler is loaded */
        void *cubin = NULL;
        size_t size = 0;
        char *log = (char *)&log;
        st = fajit_compile_cubin(c, "sm_90", &cubin, &size, &log);
        expect_status(st, "fajit_compile_cubin");
        assert_true(st != FAJIT_OK && cubin == NULL && log == NULL);
    }
    fajit_kernel *k = (fajit_kernel *)&k;
    st = fajit_kernel_get(nodev, c, &k, NULL);
    expect_status(st, "fajit_kernel_get");
    assert_true(st != FAJIT_OK && k == NULL);
    for (int which = 0; which < 2; which++) { /* fill: ctx NULL and a context without a device */
        fajit_config f = *c;
        fajit_shape shape = {2, 8, 8, 1000, 1000};
        st = fajit_config_fill(which ? nodev : NULL, &shape, &f);
        expect_status(st, "fajit_config_fill");
        if (st == FAJIT_OK) assert_int_equal(fajit_config_check(&f), FAJIT_OK); /* "Then checks the result" */
    }
}

static void test_config_fields(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    config_calls(nodev, &(fajit_config){0});
    for (size_t w = 0; w < sizeof(fajit_config) / sizeof(int); w++)
        for (size_t i = 0; i < COUNT(k_ints); i++) {
            fajit_config g = valid_config();
            memcpy((char *)&g + w * sizeof(int), &k_ints[i], sizeof(int));
            config_calls(nodev, &g);
            memset(&g, 0, sizeof g); /* the same value in a config the fill completes */
            memcpy((char *)&g + w * sizeof(int), &k_ints[i], sizeof(int));
            config_calls(nodev, &g);
        }
    fajit_context_destroy(nodev);
}

static void test_config_null(void **state)
{
    (void)state;
    fajit_config c = valid_config();
    char *text = (char *)&text;
    void *cubin = (void *)&cubin;
    size_t size = 1;
    fajit_kernel *k = (fajit_kernel *)&k;
    fajit_context *nodev = nodev_context();
    expect_failure(fajit_config_check(NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_config_check(NULL)");
    expect_failure(fajit_config_fill(NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_config_fill(cfg NULL)");
    expect_failure(fajit_config_fill(nodev, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_config_fill(cfg NULL)");
    expect_failure(fajit_generate_ptx(NULL, 0, &text, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_generate_ptx(cfg NULL)");
    assert_null(text);
    expect_failure(fajit_generate_ptx(&c, 0, NULL, &size), FAJIT_ERR_INVALID_ARGUMENT, "fajit_generate_ptx(out NULL)");
    static const int verbosity[] = {-1, 3, INT_MAX, INT_MIN};
    for (size_t i = 0; i < COUNT(verbosity); i++) {
        text = (char *)&text;
        expect_failure(fajit_generate_ptx(&c, verbosity[i], &text, &size), FAJIT_ERR_INVALID_ARGUMENT,
                       "fajit_generate_ptx(verbosity)");
        assert_null(text);
    }
    expect_failure(fajit_explain(NULL, &text), FAJIT_ERR_INVALID_ARGUMENT, "fajit_explain(cfg NULL)");
    expect_failure(fajit_explain(&c, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_explain(out NULL)");
    static const char *const sms[] = {NULL, "", "sm_", "sm_0", "sm_9999999999999999999", "SM_90", "sm_90 ", "x"};
    for (size_t i = 0; i < COUNT(sms); i++) {
        char *log = (char *)&log;
        expect_failure(fajit_compile_cubin(&c, sms[i], &cubin, &size, &log), FAJIT_ERR_INVALID_ARGUMENT,
                       "fajit_compile_cubin(sm)");
        assert_null(log);
    }
    expect_failure(fajit_compile_cubin(NULL, "sm_80", &cubin, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                   "fajit_compile_cubin(cfg NULL)");
    expect_failure(fajit_compile_cubin(&c, "sm_80", NULL, &size, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                   "fajit_compile_cubin(cubin_out NULL)");
    expect_failure(fajit_compile_cubin(&c, "sm_80", &cubin, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                   "fajit_compile_cubin(size_out NULL)");
    expect_failure(fajit_kernel_get(NULL, &c, &k, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_kernel_get(ctx NULL)");
    expect_failure(fajit_kernel_get(nodev, NULL, &k, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_kernel_get(cfg NULL)");
    expect_failure(fajit_kernel_get(nodev, &c, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_kernel_get(out NULL)");
    fajit_cache_source src = (fajit_cache_source)-1;
    expect_failure(fajit_kernel_get(nodev, &c, &k, &src), FAJIT_ERR_NO_DEVICE, "fajit_kernel_get(no device)");
    fajit_kernel_info info;
    expect_failure(fajit_kernel_get_info(NULL, &info), FAJIT_ERR_INVALID_ARGUMENT, "fajit_kernel_get_info(NULL)");
    fajit_context_destroy(nodev);
}

/* ---------------------------------------------------------------------------------------------------
 * Shapes: fill, tune, lookup
 * ------------------------------------------------------------------------------------------------- */
static void shape_calls(fajit_context *nodev, const fajit_shape *shape)
{
    fajit_config c = {0};
    c.head_dim = 128;
    for (int which = 0; which < 2; which++) {
        fajit_config f = c;
        fajit_status st = fajit_config_fill(which ? nodev : NULL, shape, &f);
        expect_status(st, "fajit_config_fill(shape)");
        if (st == FAJIT_OK) assert_int_equal(fajit_config_check(&f), FAJIT_OK);
    }
    fajit_tune_result res;
    fajit_config best;
    expect_failure(fajit_tune(NULL, shape, FAJIT_DTYPE_BF16, 128, 0, NULL, &best, &res), FAJIT_ERR_INVALID_ARGUMENT,
                   "fajit_tune(ctx NULL)");
    fajit_status st = fajit_tune(nodev, shape, FAJIT_DTYPE_BF16, 128, 0, NULL, &best, &res);
    expect_status(st, "fajit_tune(no device)");
    assert_int_not_equal(st, FAJIT_OK);
    memset(&res, 0xa5, sizeof res);
    expect_failure(fajit_tune_lookup(nodev, shape, FAJIT_DTYPE_BF16, 128, 0, &res), FAJIT_OK, "fajit_tune_lookup");
    assert_int_equal(res.found, 0); /* no device: no winner */
}

static void test_shape_fields(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    shape_calls(nodev, NULL);
    for (size_t w = 0; w < sizeof(fajit_shape) / sizeof(int); w++)
        for (size_t i = 0; i < COUNT(k_ints); i++) {
            fajit_shape s = {2, 8, 8, 1000, 1000};
            memcpy((char *)&s + w * sizeof(int), &k_ints[i], sizeof(int));
            shape_calls(nodev, &s);
            memset(&s, 0, sizeof s);
            memcpy((char *)&s + w * sizeof(int), &k_ints[i], sizeof(int));
            shape_calls(nodev, &s);
        }
    fajit_context_destroy(nodev);
}

/* dtype, head_dim, causal of fajit_tune / fajit_tune_lookup, and the fields of fajit_tune_options. */
static void test_tune_arguments(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    fajit_shape shape = {1, 8, 8, 1024, 1024};
    fajit_tune_result res;
    for (size_t i = 0; i < COUNT(k_ints); i++) {
        int v = k_ints[i];
        fajit_status want = v == 1 || v == 2 || v == 3 || v == 0 ? FAJIT_OK : FAJIT_ERR_INVALID_ARGUMENT; /* 3: e4m3 */
        expect_failure(fajit_tune_lookup(nodev, &shape, (fajit_dtype)v, 128, 0, &res), want, "lookup dtype");
        want = v == 0 || v == 1 ? FAJIT_OK : FAJIT_ERR_INVALID_ARGUMENT;
        expect_failure(fajit_tune_lookup(nodev, &shape, FAJIT_DTYPE_F16, 64, v, &res), want, "lookup causal");
        expect_failure(fajit_tune_lookup(nodev, &shape, FAJIT_DTYPE_F16, v, 0, &res), FAJIT_ERR_INVALID_ARGUMENT,
                       "lookup head_dim");
        expect_failure(fajit_tune(nodev, &shape, FAJIT_DTYPE_F16, v, 0, NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                       "fajit_tune head_dim");
        expect_status(fajit_tune(nodev, &shape, (fajit_dtype)v, 128, v, NULL, NULL, NULL), "fajit_tune dtype");
    }
    expect_failure(fajit_tune_lookup(NULL, &shape, FAJIT_DTYPE_F16, 64, 0, &res), FAJIT_ERR_INVALID_ARGUMENT,
                   "lookup ctx NULL");
    expect_failure(fajit_tune_lookup(nodev, &shape, FAJIT_DTYPE_F16, 64, 0, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                   "lookup result NULL");
    /* the options' plain fields (not the callback and its pointer, which are the caller's to get right) */
    const size_t plain = offsetof(fajit_tune_options, progress);
    for (size_t w = 0; w + sizeof(int) <= plain; w += sizeof(int))
        for (size_t i = 0; i < COUNT(k_ints); i++) {
            fajit_tune_options o = fajit_tune_options_default();
            memcpy((char *)&o + w, &k_ints[i], sizeof(int));
            fajit_status st = fajit_tune(nodev, &shape, FAJIT_DTYPE_BF16, 128, 0, &o, NULL, NULL);
            expect_status(st, "fajit_tune(options)");
            assert_int_not_equal(st, FAJIT_OK);
        }
    static const double budgets[] = {-1.0, NAN, INFINITY, -INFINITY, 1e300};
    for (size_t i = 0; i < COUNT(budgets); i++) {
        fajit_tune_options o = fajit_tune_options_default();
        o.time_budget_s = budgets[i];
        expect_status(fajit_tune(nodev, &shape, FAJIT_DTYPE_BF16, 128, 0, &o, NULL, NULL), "fajit_tune(budget)");
    }
    fajit_tune_options d = fajit_tune_options_default();
    assert_true(d.max_candidates == 16 && d.reps == 10 && d.warmup == 3 && d.persist == 1 && d.progress == NULL);
    fajit_context_destroy(nodev);
}

/* fajit_warm: its arguments, counts and the options' plain fields. The context has no device and no disk
 * cache, so every call is refused before a config is read or a file written (no GPU, no files). */
static void test_warm_arguments(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    static fajit_config cfgs[16];
    fajit_shape shapes[16];
    fajit_warm_result res;
    for (int i = 0; i < 16; i++) cfgs[i] = valid_config(), shapes[i] = (fajit_shape){1, 8, 8, 1024, 1024};
    fajit_warm_options d = fajit_warm_options_default();
    assert_true(d.threads == 0 && d.sm == NULL && d.progress == NULL && d.progress_user == NULL);
    expect_failure(fajit_warm(NULL, cfgs, NULL, 1, NULL, &res), FAJIT_ERR_INVALID_ARGUMENT, "fajit_warm(ctx NULL)");
    expect_failure(fajit_warm(nodev, NULL, NULL, 1, NULL, &res), FAJIT_ERR_INVALID_ARGUMENT, "fajit_warm(configs NULL)");
    expect_failure(fajit_warm(nodev, cfgs, shapes, 1, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_warm(no sm)");
    for (size_t i = 0; i < COUNT(k_ints); i++) {
        int v = k_ints[i];
        /* refused for the count, or (0..FAJIT_WARM_MAX_CONFIGS, 0 too) for the missing sm */
        expect_failure(fajit_warm(nodev, cfgs, shapes, v, NULL, &res), FAJIT_ERR_INVALID_ARGUMENT, "fajit_warm(count)");
        assert_int_equal(res.total, 0);
    }
    static const char *const sms[] = {"sm_80", "sm_90a", "", "sm_75", "bogus", "sm_90aa"};
    const size_t plain = offsetof(fajit_warm_options, sm); /* threads */
    for (size_t w = 0; w + sizeof(int) <= plain; w += sizeof(int))
        for (size_t i = 0; i < COUNT(k_ints); i++)
            for (size_t s = 0; s < COUNT(sms); s++) {
                fajit_warm_options o = fajit_warm_options_default();
                memcpy((char *)&o + w, &k_ints[i], sizeof(int));
                o.sm = sms[s];
                expect_failure(fajit_warm(nodev, cfgs, shapes, 2, &o, &res), FAJIT_ERR_INVALID_ARGUMENT,
                               "fajit_warm(options)");
            }
    fajit_context_destroy(nodev);
}

/* ---------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------- */
static void test_context_arguments(void **state)
{
    (void)state;
    fajit_context *ctx = (fajit_context *)&ctx;
    expect_failure(fajit_context_create(NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "fajit_context_create(out NULL)");
    for (size_t i = 0; i < COUNT(k_ints); i++) {
        fajit_context_options o = fajit_context_options_default();
        o.disk_cache = 0;
        o.device = k_ints[i]; /* >= 0: a device that is not here (or no driver) is a status, not a crash */
        fajit_status st = fajit_context_create(&o, &ctx);
        expect_status(st, "fajit_context_create(device)");
        if (k_ints[i] < -1) assert_int_equal(st, FAJIT_ERR_INVALID_ARGUMENT);
        assert_true(st == FAJIT_OK ? ctx != NULL : ctx == NULL);
        fajit_context_destroy(ctx);
        o.device = -1;
        o.disk_cache = k_ints[i];
        st = fajit_context_create(&o, &ctx);
        expect_failure(st, k_ints[i] >= -1 && k_ints[i] <= 1 ? FAJIT_OK : FAJIT_ERR_INVALID_ARGUMENT,
                       "fajit_context_create(disk_cache)");
        fajit_context_destroy(ctx);
    }
    size_t long_len = 5000;
    char *long_dir = malloc(long_len + 1);
    assert_non_null(long_dir);
    memset(long_dir, 'd', long_len);
    long_dir[0] = '/';
    long_dir[long_len] = '\0';
    const char *dirs[] = {"", "/", "relative/dir", "/dev/null", "/proc/self/no/such", long_dir};
    for (size_t i = 0; i < COUNT(dirs); i++) {
        fajit_context_options o = fajit_context_options_default();
        o.device = -1;
        o.disk_cache = 1;
        o.cache_dir = dirs[i];
        fajit_status st = fajit_context_create(&o, &ctx);
        expect_status(st, "fajit_context_create(cache_dir)");
        if (dirs[i] == long_dir) assert_int_equal(st, FAJIT_ERR_INVALID_ARGUMENT);
        if (st == FAJIT_OK) { /* documented strings, never NULL */
            assert_non_null(fajit_context_cache_dir(ctx));
            assert_non_null(fajit_context_tune_file(ctx));
            assert_string_equal(fajit_context_sm(ctx), "");
        }
        fajit_context_destroy(ctx);
    }
    free(long_dir);
    fajit_context_destroy(NULL);
    assert_string_equal(fajit_context_cache_dir(NULL), "");
    assert_string_equal(fajit_context_sm(NULL), "");
    assert_string_equal(fajit_context_tune_file(NULL), "");
    fajit_context_options d = fajit_context_options_default();
    assert_true(d.device == 0 && d.disk_cache == -1 && d.cache_dir == NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Forward arguments: every word of fajit_attention_args garbage
 * ------------------------------------------------------------------------------------------------- */
static fajit_attention_args valid_args(void)
{
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16;
    a.batch = 2, a.heads_q = 8, a.heads_kv = 2, a.seqlen_q = 100, a.seqlen_k = 300, a.head_dim = 128;
    a.q = 0x7f0000000000ull, a.k = 0x7f0000100000ull, a.v = 0x7f0000200000ull, a.o = 0x7f0000300000ull;
    fajit_args_set_bhnd_strides(&a);
    return a;
}

/* Args live at the start of a zeroed block as large as struct_size may say (4096 bytes): a garbage struct_size
 * up to that is a caller's newer, longer struct with zero fields the library does not know (they are read). */
#define ARGS_BLOCK 4096

static fajit_attention_args *args_block(const fajit_attention_args *from)
{
    fajit_attention_args *a = calloc(1, ARGS_BLOCK);
    assert_non_null(a);
    *a = *from;
    return a;
}

static void args_calls(fajit_context *nodev, const fajit_attention_args *a)
{
    fajit_config c = valid_config();
    size_t bytes = 1;
    expect_failure(fajit_attention_forward(NULL, a, NULL), FAJIT_ERR_INVALID_ARGUMENT, "forward(ctx NULL)");
    fajit_status st = fajit_attention_forward(nodev, a, NULL);
    expect_status(st, "fajit_attention_forward(no device)");
    assert_int_not_equal(st, FAJIT_OK);
    st = fajit_attention_forward(nodev, a, &c);
    expect_status(st, "fajit_attention_forward(no device, cfg)");
    assert_int_not_equal(st, FAJIT_OK);
    expect_status(fajit_attention_workspace_size(NULL, a, NULL, &bytes), "fajit_attention_workspace_size(ctx NULL)");
    expect_status(fajit_attention_workspace_size(nodev, a, NULL, &bytes), "fajit_attention_workspace_size");
    expect_status(fajit_attention_workspace_size(nodev, a, &c, &bytes), "fajit_attention_workspace_size(cfg)");
    fajit_attention_args *s = args_block(a); /* the helpers on garbage shapes: no overflow, strides refused or taken */
    fajit_args_set_bhnd_strides(s);
    expect_status(fajit_attention_forward(nodev, s, NULL), "forward(bhnd strides)");
    fajit_args_set_bnhd_strides(s);
    expect_status(fajit_attention_forward(nodev, s, NULL), "forward(bnhd strides)");
    free(s);
}

static void test_args_fields(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    const fajit_attention_args valid = valid_args();
    fajit_attention_args *a = args_block(&valid);
    args_calls(nodev, a);
    expect_failure(fajit_attention_forward(nodev, a, NULL), FAJIT_ERR_NO_DEVICE, "forward(valid, no device)");
    for (size_t w = 0; w + sizeof(int) <= sizeof *a; w += sizeof(int))
        for (size_t i = 0; i < COUNT(k_ints); i++) {
            *a = valid;
            memcpy((char *)a + w, &k_ints[i], sizeof(int));
            args_calls(nodev, a);
        }
    for (size_t w = 0; w + sizeof(int64_t) <= sizeof *a; w += sizeof(int64_t))
        for (size_t i = 0; i < COUNT(k_i64s); i++) {
            *a = valid;
            memcpy((char *)a + w, &k_i64s[i], sizeof(int64_t));
            args_calls(nodev, a);
        }
    static const float scales[] = {NAN, INFINITY, -INFINITY, -1.0f, 1e-45f, 3e38f};
    for (size_t i = 0; i < COUNT(scales); i++) {
        *a = valid;
        a->softmax_scale = scales[i];
        args_calls(nodev, a);
    }
    *a = valid; /* struct_size past what may be read: refused before any byte past the struct is */
    a->struct_size = ARGS_BLOCK + 1;
    expect_failure(fajit_attention_forward(nodev, a, NULL), FAJIT_ERR_INVALID_ARGUMENT, "forward(struct_size)");
    assert_non_null(strstr(fajit_errmsg(), "more than 4096"));
    free(a);
    fajit_context_destroy(nodev);
}

static void test_args_null(void **state)
{
    (void)state;
    fajit_context *nodev = nodev_context();
    fajit_attention_args a = valid_args();
    size_t bytes = 1;
    expect_failure(fajit_attention_forward(nodev, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "forward(args NULL)");
    expect_failure(fajit_attention_forward(NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT, "forward(all NULL)");
    expect_failure(fajit_attention_workspace_size(nodev, NULL, NULL, &bytes), FAJIT_ERR_INVALID_ARGUMENT,
                   "workspace_size(args NULL)");
    expect_failure(fajit_attention_workspace_size(nodev, &a, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT,
                   "workspace_size(bytes_out NULL)");
    fajit_attention_args_init(NULL);
    fajit_args_set_bhnd_strides(NULL);
    fajit_args_set_bnhd_strides(NULL);
    fajit_attention_args z;
    memset(&z, 0x5a, sizeof z);
    fajit_attention_args_init(&z);
    assert_int_equal(z.struct_size, sizeof z);
    assert_int_equal(z.batch, 0);
    fajit_context_destroy(nodev);
}

/* ---------------------------------------------------------------------------------------------------
 * Every function of fajit.h is named here
 * ------------------------------------------------------------------------------------------------- */
/* Function names declared in the header: "fajit_x(" after a return type on a line that is not a typedef,
 * a macro or a comment. */
static int header_functions(const char *text, char names[][64], int max)
{
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (*line == ' ' || *line == '/' || *line == '#' || *line == '\n' || *line == '}' ||
            strncmp(line, "typedef", 7) == 0 || strncmp(line, "extern", 6) == 0)
            continue;
        const char *end = strchr(line, '\n'), *p = strstr(line, "fajit_");
        while (p && (!end || p < end)) {
            size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
            if (p[len] == '(' && p > line && (p[-1] == ' ' || p[-1] == '*') && n < max) {
                snprintf(names[n++], 64, "%.*s", (int)len, p);
                break;
            }
            p = strstr(p + 1, "fajit_");
        }
    }
    return n;
}

static void test_every_function_walked(void **state)
{
    (void)state;
    char *header = fj_test_read_file(FAJIT_HEADER_PATH, NULL), *self = fj_test_read_file(CONTRACT_SOURCE_PATH, NULL);
    assert_non_null(header);
    assert_non_null(self);
    static char names[256][64];
    int n = header_functions(header, names, 256), missing = 0;
    printf("fajit.h declares %d functions\n", n);
    assert_true(n >= 28); /* the parser found the declarations (28 in 0.2.0) */
    for (int i = 0; i < n; i++) {
        char call[80];
        snprintf(call, sizeof call, "%.64s(", names[i]);
        if (!strstr(self, call)) printf("fajit.h declares %s, which test_api_contract.c does not call\n", names[i]);
        missing += !strstr(self, call);
    }
    free(header);
    free(self);
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_and_version),  cmocka_unit_test(test_config_format),
        cmocka_unit_test(test_config_null),         cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_shape_fields),        cmocka_unit_test(test_tune_arguments),
        cmocka_unit_test(test_warm_arguments),
        cmocka_unit_test(test_context_arguments),   cmocka_unit_test(test_args_fields),
        cmocka_unit_test(test_args_null),           cmocka_unit_test(test_every_function_walked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
