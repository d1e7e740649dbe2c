/*
 * test_fagen_cli.c - runs the built fagen binary (FAGEN_PATH, set by tests/CMakeLists.txt) and checks
 * its contract: exit 0 / 1 / 2, exactly one "fagen: ..." line on stderr naming the flag, the value
 * and the rule for a bad command line, the library's smem arithmetic for a config that does not fit,
 * byte-identical PTX across runs, and a cubin that is an ELF file (skipped without nvJitLink).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fagen.h"
#include "test_support.h"

#ifndef FAGEN_PATH
#error "FAGEN_PATH must name the fagen binary"
#endif

typedef struct run_result {
    int code;
    char *out, *err;
    size_t out_len;
} run_result;

static char *g_dir; /* scratch directory for captured output */

static void result_free(run_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* Run fagen with the NULL-terminated argument list; capture exit status, stdout and stderr. */
static run_result run_fagen(const char *first, ...)
{
    char *argv[32];
    char out_path[4096], err_path[4096];
    run_result r = {0};
    int n = 0;
    va_list ap;
    argv[n++] = FAGEN_PATH;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *)) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    snprintf(out_path, sizeof out_path, "%s/stdout", g_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", g_dir);
    r.code = fj_test_run(argv, out_path, err_path);
    r.out = fj_test_read_file(out_path, &r.out_len);
    r.err = fj_test_read_file(err_path, NULL);
    assert_non_null(r.out);
    assert_non_null(r.err);
    return r;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A usage error: exit 2, nothing on stdout, one "fagen: " line on stderr holding every `want`. */
static void expect_usage_error(const run_result *r, const char *const *want)
{
    if (r->code != FAGEN_EXIT_USAGE || count_lines(r->err) != 1 || strncmp(r->err, "fagen: ", 7) != 0)
        print_error("exit %d, stderr: %s", r->code, r->err);
    assert_int_equal(r->code, FAGEN_EXIT_USAGE);
    assert_int_equal(r->out_len, 0);
    assert_int_equal(count_lines(r->err), 1);
    assert_true(strncmp(r->err, "fagen: ", 7) == 0);
    for (; *want; want++) {
        if (!strstr(r->err, *want)) print_error("stderr lacks '%s': %s", *want, r->err);
        assert_non_null(strstr(r->err, *want));
    }
}

/* ---- a bad FAJIT_* value ------------------------------------------------------------------------ */

/* Any command with a bad environment variable: a usage error naming the variable, the value and the accepted words,
 * before any work (main.c reads the environment through a device-less context), not a config-fill failure. */
static void test_bad_environment(void **state)
{
    static const struct {
        const char *name, *value, *cmd, *want;
    } cases[] = {
        {"FAJIT_KV_ORDER", "bogus", "ptx", "asc"},
        {"FAJIT_KV_ORDER", "bogus", "explain", "desc"},
        {"FAJIT_PACK_GQA", "off", "cubin", "unset (1)"},
        {"FAJIT_FP8_KNOBS", "vt,regz", "explain", "unknown word 'regz'"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char named[128];
        snprintf(named, sizeof named, "%s = '%s'", cases[i].name, cases[i].value);
        const char *const want[] = {named, cases[i].want, NULL};
        setenv(cases[i].name, cases[i].value, 1);
        run_result r = run_fagen(cases[i].cmd, "--arch", "sm_90a", NULL);
        unsetenv(cases[i].name);
        expect_usage_error(&r, want);
        result_free(&r);
    }
}

/* ---- help, version, dispatch ------------------------------------------------------------------ */

static void test_help_and_version(void **state)
{
    static const char *const subs[] = {"ptx", "cubin", "explain", "check", "bench", "tune", "warm"};
    run_result r;
    (void)state;
    r = run_fagen(NULL);
    assert_int_equal(r.code, FAGEN_EXIT_USAGE);
    assert_non_null(strstr(r.err, "usage: fagen"));
    result_free(&r);

    r = run_fagen("--help", NULL);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(r.out, "usage: fagen"));
    result_free(&r);

    r = run_fagen("--version", NULL);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(r.out, FAJIT_VERSION));
    result_free(&r);

    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "fagen %s", subs[i]);
        r = run_fagen(subs[i], "--help", NULL);
        if (r.code != 0 || !strstr(r.out, want)) print_error("%s --help: exit %d\n%s%s", subs[i], r.code, r.out, r.err);
        assert_int_equal(r.code, FAGEN_EXIT_OK);
        assert_non_null(strstr(r.out, want));
        result_free(&r);
    }

    r = run_fagen("nosuch", NULL);
    expect_usage_error(&r, (const char *const[]){"nosuch", "unknown command", NULL});
    result_free(&r);
}

/* ---- bad command lines ------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *args[6];
    const char *want[4];
} bad_case;

static const bad_case k_bad_cases[] = {
    {{"ptx", "--bogus"}, {"--bogus", "unknown flag"}},
    {{"ptx", "--stages", "9"}, {"--stages 9", "1..4"}},
    {{"ptx", "--stages=0"}, {"--stages 0", "1..4"}},
    {{"ptx", "--headdim", "100"}, {"--headdim 100", "64, 96, 128, 192 or 256"}},
    {{"ptx", "--swizzle", "48"}, {"--swizzle 48", "none, 32, 64 or 128"}},
    {{"ptx", "--br", "0"}, {"--br 0", "must be"}},
    {{"ptx", "--bc", "12x"}, {"--bc 12x", "not a whole number"}},
    {{"ptx", "--br", "-64"}, {"--br -64", "not a whole number"}},
    {{"ptx", "--warps", "99999999999"}, {"--warps 99999999999", "must be"}},
    {{"ptx", "--br"}, {"--br", "missing value"}},
    {{"ptx", "--br", "--bc", "64"}, {"--br", "missing value"}},
    {{"ptx", "--dtype", "fp32"}, {"--dtype fp32", "f16, bf16 or e4m3"}},
    {{"ptx", "--arch", "sm_75"}, {"--arch sm_75", "sm_80"}},
    {{"ptx", "-v", "3"}, {"-v 3", "0..2"}},
    {{"ptx", "--causal=1"}, {"--causal=1", "takes no value"}},
    {{"ptx", "stray"}, {"stray", "unexpected argument"}},
    {{"explain", "--sm", "sm_80"}, {"--sm", "unknown flag"}},
    {{"cubin", "--sm"}, {"--sm", "missing value"}},
    {{"tune", "--grid", "first"}, {"--grid first", "issue3 or decode"}},
    {{"tune", "--grid", "decode", "--batch", "4"}, {"--grid decode", "--batch"}},
    {{"tune", "--grid", "decode", "--seqlen", "8"}, {"no class", "decode"}},
    {{"tune", "--reps", "5"}, {"--reps 5", "10..100000"}},
    {{"tune", "--max-candidates=0"}, {"--max-candidates 0", "1..1000"}},
    {{"tune", "--br", "64"}, {"tune chooses", "--br"}},
    {{"tune", "--grid", "issue3", "--headdim", "96"}, {"no class", "issue3"}},
    {{"tune", "--nosave"}, {"--nosave", "unknown flag"}},
    {{"bench", "--page-order", "random"}, {"--page-order random", "shuffled or linear"}},
    {{"bench", "--layout", "nhd"}, {"--layout nhd", "bhnd or bnhd"}},
    {{"bench", "--grid", "issue3"}, {"--grid issue3", "first or decode"}},
    /* issue 21 item 7: --variant words, their combinations, repeated flags */
    {{"ptx", "--variant", ""}, {"--variant ''", "empty", "combine alone"}},
    {{"ptx", "--variant", "seqlens+"}, {"--variant 'seqlens+'", "empty word"}},
    {{"ptx", "--variant", "+split"}, {"--variant '+split'", "empty word"}},
    {{"ptx", "--variant", "gather"}, {"--variant gather", "needs paged", "paged+gather+ahead"}},
    {{"ptx", "--variant", "ahead"}, {"--variant ahead", "needs paged"}},
    {{"ptx", "--variant", "combine+seqlens"}, {"--variant combine+seqlens", "combine", "the variants are"}},
    {{"ptx", "--stages", "2", "--stages", "3"}, {"--stages", "given twice"}},
    {{"ptx", "--br", "64", "--block-m", "64"}, {"--br", "given twice"}},
    {{"ptx", "--causal", "--causal"}, {"--causal", "given twice"}},
    {{"ptx", "--variant", "split", "--variant", "seqlens"}, {"--variant", "given twice"}},
    {{"ptx", "-v", "1", "--verbose=2"}, {"-v", "given twice"}},
    {{"cubin", "-o", "a", "--output", "b"}, {"-o", "given twice"}},
    {{"bench", "--seqlen", "4", "--seqlen", "8"}, {"--seqlen", "given twice"}},
    {{"check", "--quick", "--quick"}, {"--quick", "given twice"}},
    /* check's reference quantizes K / V only: e4m3 Q, K, V is refused, not run as zero configs and a bare FAIL */
    {{"check", "--dtype", "e4m3", "--headdim", "256"}, {"--dtype e4m3", "tests/test_gpu_fp8"}},
    /* varlen batches take 16-bit K/V only: refused before a GPU is looked for, not checked as bf16 K/V */
    {{"check", "--varlen", "1,17", "--kv-dtype", "e4m3"}, {"--varlen with --kv-dtype e4m3", "16-bit K/V"}},
    {{"tune", "--headdim", "64", "--headdim", "64"}, {"--headdim", "given twice"}},
    /* item 6: a field given that rules every config out is named, as the user wrote it */
    {{"ptx", "--br", "1024"}, {"block_m (--br) = 1024"}},
    {{"ptx", "--warps", "3"}, {"warps = 3"}},
    {{"ptx", "--br", "256", "--warps", "2"}, {"block_m (--br) = 256 with warps = 2"}},
    {{"ptx", "--arch", "sm_90a", "--variant", "paged+gather"}, {"arch = sm_90a", "gather"}},
    /* issue 23: fagen warm */
    {{"warm", "--threads", "999"}, {"--threads 999", "0..256"}},
    {{"warm", "--sm", "sm_90a", "--device", "0"}, {"--sm", "--device", "give one of them"}},
    {{"warm", "--file", "/nonexistent/warm.txt"}, {"--file /nonexistent/warm.txt", "No such file"}},
    {{"warm", "--sm", "sm_91", "--headdim", "64"}, {"--sm sm_91", "not a known GPU", "sm_90a"}},
    {{"warm", "--sm", "sm_80", "--br", "1024"}, {"configs[0]", "block_m (--br) = 1024"}},
    {{"warm", "--bogus"}, {"--bogus", "unknown flag for 'warm'"}},
    {{"ptx", "--accurate", "maybe"}, {"--accurate maybe", "must be on or off"}},
    {{"ptx", "--arch", "sm_100a", "--accurate", "on"}, {"accurate = 1 on sm_100a"}},
};

static void test_bad_flags(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_bad_cases / sizeof k_bad_cases[0]; i++) {
        const bad_case *c = &k_bad_cases[i];
        const char *a[6] = {0};
        run_result r;
        memcpy(a, c->args, sizeof a);
        r = run_fagen(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
        expect_usage_error(&r, c->want);
        result_free(&r);
    }
}

/* Issue 21 item 6: the README's own lines and single flags the heuristic's table broke fill the rest around
 * them (the config printed by explain keeps the flag); item 9: the sm_80 default for D128 causal compiles for
 * sm_80 (fill takes a tile that target's register allocation holds). */
static void test_fill_keeps_flags(void **state)
{
    static const char *const lines[][6] = {
        {"ptx", "--variant", "split"},  {"ptx", "--variant", "seqlens"}, {"ptx", "--swizzle", "none"},
        {"ptx", "--warps", "2"},        {"explain", "--swizzle", "none"}, {"explain", "--headdim", "256", "--stages", "4"},
        {"ptx", "--block-m", "64", "--block-n", "32"}, {"ptx", "--head-dim", "64"},
        {"explain", "--arch", "auto"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        run_result r = run_fagen(lines[i][0], lines[i][1], lines[i][2], lines[i][3], lines[i][4], lines[i][5], NULL);
        if (r.code != 0) print_error("fagen %s %s %s: exit %d: %s", lines[i][0], lines[i][1], lines[i][2], r.code, r.err);
        assert_int_equal(r.code, FAGEN_EXIT_OK);
        assert_true(r.out_len > 0);
        result_free(&r);
    }
    run_result r = run_fagen("explain", "--swizzle", "none", NULL);
    assert_non_null(strstr(r.out, " swnone "));
    result_free(&r);
    r = run_fagen("explain", "--arch", "sm_90a", NULL); /* item 14: no "up to 232448 B, up to 232448 B" */
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_null(strstr(r.out, "on later GPUs"));
    result_free(&r);

    char file[4096];
    snprintf(file, sizeof file, "%s/c80.cubin", g_dir);
    r = run_fagen("cubin", "--headdim", "128", "--causal", "--sm", "sm_80", "-o", file, NULL);
    if (r.code == FAGEN_EXIT_FAIL && strstr(r.err, "nvJitLink")) {
        printf("SKIP: fagen cubin --sm sm_80: nvJitLink unavailable here: %s", r.err);
        result_free(&r);
        return;
    }
    if (r.code != 0) print_error("cubin --sm sm_80 D128 causal: exit %d: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    result_free(&r);
}

/* Item 14: without a GPU, check / bench / tune say what works without one (not C advice). */
static void test_no_gpu_advice(void **state)
{
    static const char *const subs[] = {"check", "bench", "tune"};
    (void)state;
    for (size_t i = 0; i < 3; i++) {
        run_result r = run_fagen(subs[i], "--headdim", "64", NULL);
        if (r.code == FAGEN_EXIT_FAIL && strstr(r.err, "needs a GPU")) {
            if (!strstr(r.err, "fagen ptx / explain / cubin")) print_error("%s", r.err);
            assert_non_null(strstr(r.err, "fagen ptx / explain / cubin"));
        }
        result_free(&r);
    }
}

/* Config rules the library checks: smem that does not fit names the arithmetic. */
static void test_smem_too_large(void **state)
{
    run_result r;
    (void)state;
    r = run_fagen("ptx", "--headdim", "256", "--br", "128", "--bc", "128", "--stages", "4", NULL);
    if (r.code != FAGEN_EXIT_USAGE || !strstr(r.err, "smem")) print_error("exit %d, stderr: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_USAGE);
    assert_int_equal(r.out_len, 0);
    assert_non_null(strstr(r.err, "smem"));
    assert_non_null(strpbrk(r.err, "0123456789"));
    result_free(&r);
}

/* Odd but well-formed tile choices: the library accepts or rejects them, fagen never crashes. */
static void test_odd_configs_never_crash(void **state)
{
    static const char *const tiles[][3] = {
        {"16", "16", "1"}, {"48", "16", "3"}, {"1024", "1024", "32"}, {"64", "8", "4"}, {"17", "64", "4"},
        {"256", "128", "8"}, {"128", "32", "2"}, {"32", "256", "1"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        run_result r = run_fagen("ptx", "--br", tiles[i][0], "--bc", tiles[i][1], "--warps", tiles[i][2], NULL);
        if (r.code != 0 && r.code != 2)
            print_error("--br %s --bc %s --warps %s: exit %d: %s", tiles[i][0], tiles[i][1], tiles[i][2], r.code, r.err);
        assert_true(r.code == FAGEN_EXIT_OK || r.code == FAGEN_EXIT_USAGE);
        if (r.code == FAGEN_EXIT_USAGE) assert_int_equal(r.out_len, 0);
        result_free(&r);
    }
}

/* ---- output ----------------------------------------------------------------------------------- */

static void test_ptx_deterministic(void **state)
{
    char file[4096];
    run_result a, b, c;
    char *from_file;
    size_t file_len = 0;
    (void)state;
    a = run_fagen("ptx", "--dtype", "f16", "--causal", "-v", "2", NULL);
    if (a.code != 0) print_error("exit %d: %s", a.code, a.err);
    assert_int_equal(a.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(a.out, ".entry"));
    assert_non_null(strstr(a.out, ".target sm_80"));
    assert_int_equal(a.err[0], '\0');
    b = run_fagen("ptx", "--dtype", "f16", "--causal", "-v", "2", NULL);
    assert_int_equal(b.code, FAGEN_EXIT_OK);
    assert_int_equal(a.out_len, b.out_len);
    assert_memory_equal(a.out, b.out, a.out_len);

    snprintf(file, sizeof file, "%s/k.ptx", g_dir);
    c = run_fagen("ptx", "--dtype", "f16", "--causal", "-v", "2", "-o", file, NULL);
    assert_int_equal(c.code, FAGEN_EXIT_OK);
    assert_int_equal(c.out_len, 0);
    from_file = fj_test_read_file(file, &file_len);
    assert_non_null(from_file);
    assert_int_equal(file_len, a.out_len);
    assert_memory_equal(from_file, a.out, a.out_len);
    free(from_file);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

static void test_explain(void **state)
{
    run_result r;
    (void)state;
    r = run_fagen("explain", "--headdim", "64", NULL);
    if (r.code != 0) print_error("exit %d: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_true(r.out_len > 0);
    result_free(&r);
}

/* Is there a file named fajit_*.cubin in g_dir? */
static int has_default_cubin(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        found |= strncmp(e->d_name, "fajit_", 6) == 0 && n > 12 && strcmp(e->d_name + n - 6, ".cubin") == 0;
    }
    if (d) closedir(d);
    return found;
}

static void test_cubin(void **state)
{
    char file[4096], cwd[4096];
    run_result r;
    char *data;
    size_t len = 0;
    (void)state;
    snprintf(file, sizeof file, "%s/k.cubin", g_dir);
    r = run_fagen("cubin", "--headdim", "64", "--sm", "sm_90a", "-o", file, NULL);
    if (r.code == FAGEN_EXIT_FAIL && strstr(r.err, "nvJitLink")) {
        printf("SKIP: fagen cubin: nvJitLink unavailable here: %s", r.err);
        result_free(&r);
        skip();
    }
    if (r.code != 0) print_error("exit %d: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    result_free(&r);
    data = fj_test_read_file(file, &len);
    assert_non_null(data);
    assert_true(len > 4 && memcmp(data, "\177ELF", 4) == 0);
    free(data);

    /* without -o: a fajit_<config>.cubin in the working directory */
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    r = run_fagen("cubin", "--headdim", "64", NULL);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_true(has_default_cubin());
    result_free(&r);
}

/* fagen ptx / explain / cubin --arch sm_100a for every default (head dims 64-256, causal or not; ptx and explain in
 * both dtypes): the PTX targets sm_100a and issues tcgen05.mma, explain names tensor memory, the cubin is an ELF file
 * (skipped without a compiler). Nothing here runs the kernels: no sm_100a kernel has run on hardware. */
static void test_sm100a_defaults(void **state)
{
    static const char *const dims[] = {"64", "96", "128", "192", "256"};
    char file[4096];
    int cubins = 0;
    (void)state;
    snprintf(file, sizeof file, "%s/k100.cubin", g_dir);
    for (int i = 0; i < 5; i++)
        for (int c = 0; c < 2; c++)
            for (int dt = 0; dt < 2; dt++) {
                const char *causal = c ? "--causal" : NULL, *dtype = dt ? "f16" : "bf16";
                run_result r = run_fagen("ptx", "--arch", "sm_100a", "--dtype", dtype, "--headdim", dims[i], causal, NULL);
                if (r.code != 0) print_error("ptx d%s %s %s: exit %d: %s", dims[i], dtype, c ? "causal" : "", r.code, r.err);
                assert_int_equal(r.code, FAGEN_EXIT_OK);
                assert_non_null(strstr(r.out, ".target sm_100a"));
                assert_non_null(strstr(r.out, "tcgen05.mma.cta_group::1.kind::f16"));
                result_free(&r);
                r = run_fagen("explain", "--arch", "sm_100a", "--dtype", dtype, "--headdim", dims[i], causal, NULL);
                assert_int_equal(r.code, FAGEN_EXIT_OK);
                assert_non_null(strstr(r.out, "tensor memory"));
                result_free(&r);
                if (dt) continue;
                r = run_fagen("cubin", "--arch", "sm_100a", "--headdim", dims[i], "-o", file, causal, NULL);
                if (r.code == FAGEN_EXIT_FAIL && (strstr(r.err, "nvJitLink") || strstr(r.err, "NVRTC"))) {
                    result_free(&r);
                    continue;
                }
                if (r.code != 0) print_error("cubin d%s %s: exit %d: %s", dims[i], c ? "causal" : "", r.code, r.err);
                assert_int_equal(r.code, FAGEN_EXIT_OK);
                result_free(&r);
                size_t len = 0;
                char *data = fj_test_read_file(file, &len);
                assert_non_null(data);
                assert_true(len > 4 && memcmp(data, "\177ELF", 4) == 0);
                free(data);
                cubins++;
            }
    if (!cubins) printf("SKIP: fagen cubin --arch sm_100a: no compiler here (nvJitLink / NVRTC)\n");
}

/* fagen warm without a GPU (--sm): a file of kernels (canonical text, flags, a comment, a duplicate) compiled
 * into the disk cache, found there the second time; --list prints the distinct configs; a bad line is named. */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_warm(void **state)
{
    char list[4096], cache[4096], bad[4096];
    run_result r;
    (void)state;
    snprintf(list, sizeof list, "%s/warm.txt", g_dir);
    snprintf(bad, sizeof bad, "%s/bad.txt", g_dir);
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    write_text(list, "# two kernels, one of them twice\n"
                     "sm_80 bf16 d64 br128 bc64 s2 sw128 w4 noncausal\n"
                     "\n"
                     "--arch sm_80 --headdim 64 --br 128 --bc 64 --stages 2 --swizzle 128 --warps 4   # the same\n"
                     "--arch sm_80 --headdim 64 --causal\n");
    r = run_fagen("warm", "--sm", "sm_80", "--file", list, "--cache-dir", cache, "--list", NULL);
    if (r.code != 0) print_error("exit %d: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(r.out, "sm_80 bf16 d64 br128 bc64 s2 sw128 w4 noncausal\n"));
    assert_non_null(strstr(r.out, " causal\n"));
    assert_int_equal(count_lines(r.out), 2);
    result_free(&r);

    r = run_fagen("warm", "--sm", "sm_80", "--file", list, "--cache-dir", cache, "--threads", "2", NULL);
    if (r.code == FAGEN_EXIT_FAIL && (strstr(r.err, "nvJitLink") || strstr(r.err, "NVRTC"))) {
        printf("SKIP: fagen warm: a compiler is unavailable here: %s", r.err);
        result_free(&r);
        skip();
    }
    if (r.code != 0) print_error("exit %d: %s", r.code, r.err);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(r.out, "2 kernels (2 compiled, 0 cached, 0 failed) on 2 threads"));
    assert_non_null(strstr(r.err, "[  2/2]")); /* not a terminal: a line per kernel */
    result_free(&r);

    r = run_fagen("warm", "--sm", "sm_80", "--file", list, "--cache-dir", cache, "-q", NULL);
    assert_int_equal(r.code, FAGEN_EXIT_OK);
    assert_non_null(strstr(r.out, "2 kernels (0 compiled, 2 cached, 0 failed)"));
    assert_string_equal(r.err, "");
    result_free(&r);

    write_text(bad, "sm_80 bf16 d64 br128 bc64 s2 sw128 w4 noncausal\nsm_80 bf16 d64 nonsense\n");
    r = run_fagen("warm", "--sm", "sm_80", "--file", bad, "--cache-dir", cache, NULL);
    expect_usage_error(&r, (const char *const[]){"bad.txt:2", "canonical form", NULL});
    result_free(&r);
}

static int setup(void **state)
{
    (void)state;
    g_dir = fj_test_make_temp_dir("fagen-cli");
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fj_test_remove_dir(g_dir);
    free(g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version), cmocka_unit_test(test_bad_flags), cmocka_unit_test(test_bad_environment),
        cmocka_unit_test(test_smem_too_large),   cmocka_unit_test(test_odd_configs_never_crash),
        cmocka_unit_test(test_ptx_deterministic), cmocka_unit_test(test_explain),
        cmocka_unit_test(test_cubin),            cmocka_unit_test(test_fill_keeps_flags),
        cmocka_unit_test(test_sm100a_defaults),
        cmocka_unit_test(test_no_gpu_advice),    cmocka_unit_test(test_warm),
    };
    if (access(FAGEN_PATH, X_OK) != 0) fj_test_skip_all("fagen not built at %s", FAGEN_PATH);
    return cmocka_run_group_tests_name("fagen_cli", tests, setup, teardown);
}
