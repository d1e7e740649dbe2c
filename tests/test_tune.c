/*
 * test_tune.c - unit tests of autotuning without a GPU: the tune file (src/runtime/tune_file.c) and the
 * way fajit_config_fill uses its winners (src/runtime/tune.c), through a context given a fake GPU
 * identity with fj_context_set_identity (tests only).
 *
 * Covers: line format <-> parse round trip; corrupt lines rejected with a reason and ignored when
 * reading (never failing a fill); merge (replace by key, keep other keys, drop corrupt lines, no temp
 * files left, concurrent writers keep each other's lines); winners of another GPU, driver or codegen
 * version ignored; fill prefers a matching winner for the shape's class and keeps the caller's fields; the file is read once per context;
 * sequence-length classes; the search space is pruned by the plan and the device's shared memory;
 * fajit_tune's argument errors. Run: ctest --test-dir build -R test_tune
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/context.h"
#include "runtime/config_fill.h"
#include "runtime/tune.h"
#include "runtime/tune_file.h"
#include "test_support.h"

#define GPU "NVIDIA Test GPU 80GB"
#define DRIVER 13000

/* A winner for bf16 d128 noncausal that the heuristic would not pick. */
static const char *k_winner_cfg = "sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal";

/* ---------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------- */
static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static fj_tune_record record(const char *gpu, int driver, const char *codegen, int cls, const char *cfg_text,
                             double tflops)
{
    fj_tune_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.key.gpu, sizeof r.key.gpu, "%s", gpu);
    r.key.driver = driver;
    snprintf(r.key.codegen, sizeof r.key.codegen, "%s", codegen);
    assert_null(fj_tune_parse_config(cfg_text, &r.cfg));
    r.key.dtype = r.cfg.dtype;
    r.key.head_dim = r.cfg.head_dim;
    r.key.causal = r.cfg.causal;
    r.key.seqlen_class = cls;
    r.tflops = tflops;
    snprintf(r.note, sizeof r.note, "B4 H16/16 N4096/4096, test");
    return r;
}

/* A context with no GPU that looks like one on GPU (sm_90, 227 KiB of smem) with its cache in dir. */
static fajit_context *fake_context(const char *dir, const char *gpu, int driver)
{
    fajit_context *ctx = fj_test_fake_context(dir, gpu, driver);
    assert_non_null(ctx);
    return ctx;
}

static fajit_config filled(fajit_context *ctx, int seqlen, const fajit_config *given)
{
    fajit_shape shape = {4, 16, 16, seqlen, seqlen};
    fajit_config c;
    if (given) c = *given;
    else memset(&c, 0, sizeof c);
    c.dtype = FAJIT_DTYPE_BF16;
    c.head_dim = 128;
    if (!c.arch) c.arch = FAJIT_ARCH_SM80; /* these winners are sm_80 ones (test_fill_sm90a: the default path) */
    fajit_status st = fajit_config_fill(ctx, seqlen ? &shape : NULL, &c);
    if (st != FAJIT_OK) print_error("fajit_config_fill: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return c;
}

static void assert_config_text(const fajit_config *c, const char *want)
{
    char text[128];
    fajit_config_format(c, text, sizeof text);
    if (strcmp(text, want) != 0) print_error("config \"%s\", want \"%s\"\n", text, want);
    assert_string_equal(text, want);
}

/* ---------------------------------------------------------------------------------------------------
 * Lines
 * ------------------------------------------------------------------------------------------------- */
static void test_line_round_trip(void **state)
{
    (void)state;
    fj_tune_record a = record(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg, 312.4), b;
    char line[FJ_TUNE_LINE_MAX], again[FJ_TUNE_LINE_MAX];
    int n = fj_tune_format_line(&a, line, sizeof line);
    print_message("%s\n", line);
    assert_true(n > 0 && n < (int)sizeof line);
    assert_non_null(strstr(line, "| bf16 d128 noncausal n4096 |"));
    assert_non_null(strstr(line, k_winner_cfg));
    assert_null(fj_tune_parse_line(line, &b));
    assert_true(fj_tune_key_equal(&a.key, &b.key));
    assert_memory_equal(&a.cfg, &b.cfg, sizeof a.cfg);
    assert_true(b.tflops > 312.39 && b.tflops < 312.41);
    assert_string_equal(a.note, b.note);
    fj_tune_format_line(&b, again, sizeof again);
    assert_string_equal(line, again);
    /* with a trailing newline and no note; causal; f16; swizzle none */
    fj_tune_record c = record("GPU | with bar", 12080, "fajit-codegen-7", 128,
                              "sm_80 f16 d64 br64 bc64 s1 swnone w4 causal", 9.5);
    c.note[0] = '\0';
    fj_tune_format_line(&c, line, sizeof line);
    assert_true(strncmp(line, "GPU   with bar | 12080 | ", 25) == 0); /* '|' in a name became a space */
    strcat(line, "\n");
    assert_null(fj_tune_parse_line(line, &b));
    assert_string_equal(b.key.gpu, "GPU   with bar");
    assert_int_equal(b.key.causal, 1);
    assert_int_equal(b.cfg.swizzle, FAJIT_SWIZZLE_NONE);
    assert_int_equal(b.key.dtype, FAJIT_DTYPE_F16);
    assert_string_equal(b.note, "");
    /* a warp-pair winner: "cw2" after the warps, read back; without it col_warps is 1 */
    fj_tune_record d = record(GPU, DRIVER, FJ_CODEGEN_VERSION, 1024, "sm_80 bf16 d256 br64 bc64 s1 sw128 w4 cw2 noncausal",
                              318.0);
    assert_int_equal(d.cfg.col_warps, 2);
    fj_tune_format_line(&d, line, sizeof line);
    assert_non_null(strstr(line, "| sm_80 bf16 d256 br64 bc64 s1 sw128 w4 cw2 noncausal |"));
    assert_null(fj_tune_parse_line(line, &b));
    assert_memory_equal(&d.cfg, &b.cfg, sizeof d.cfg);
    assert_int_equal(a.cfg.col_warps, 1);
    assert_non_null(fj_tune_parse_config("sm_80 bf16 d256 br64 bc64 s1 sw128 w4 cw2", &b.cfg)); /* no mask */
}

static void test_corrupt_lines(void **state)
{
    static const char *const bad[] = {
        "garbage",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal",
        "A | x13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4000 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 sideways n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 f16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 causal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w8 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_75 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | -3",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | nan",
        "A | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1 | n | x",
        " | 13000 | fajit-codegen-1 | bf16 d128 noncausal n4096 | sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal | 1.0",
    };
    fj_tune_record r;
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = fj_tune_parse_line(bad[i], &r);
        if (!why) print_error("accepted: %s\n", bad[i]);
        assert_non_null(why);
        assert_string_not_equal(why, "comment");
        if (getenv("FAJIT_TEST_VERBOSE")) print_message("%-40s <- %.60s\n", why, bad[i]);
    }
    assert_string_equal(fj_tune_parse_line("# a comment", &r), "comment");
    assert_string_equal(fj_tune_parse_line("   \n", &r), "comment");
    assert_string_equal(fajit_errmsg(), ""); /* a rejected config leaves no message behind */
}

/* ---------------------------------------------------------------------------------------------------
 * The file
 * ------------------------------------------------------------------------------------------------- */
static int count_dir_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_merge(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tune-"), *dir = path_in(root, "sub/cache");
    char *path = path_in(dir, FJ_TUNE_FILE_NAME);
    fj_tune_record a = record(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg, 100.0);
    fj_tune_record b = record(GPU, DRIVER, FJ_CODEGEN_VERSION, 8192, k_winner_cfg, 200.0);
    const char *other_cfg = "sm_80 bf16 d128 br128 bc64 s3 sw128 w8 noncausal";
    fj_tune_record a2 = record(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, other_cfg, 150.0);
    fj_tune_list l = {0};
    int bad = -1;
    char why[256];
    assert_null(fj_tune_file_merge(path, &a, 1, why, sizeof why)); /* creates sub/cache */
    assert_null(fj_tune_file_merge(path, &b, 1, why, sizeof why));
    assert_null(fj_tune_file_merge(path, &a2, 1, why, sizeof why));
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(bad, 0);
    assert_int_equal(l.n, 2);
    const fj_tune_record *r = fj_tune_list_find(&l, &a.key);
    assert_non_null(r);
    assert_memory_equal(&r->cfg, &a2.cfg, sizeof r->cfg);
    assert_non_null(fj_tune_list_find(&l, &b.key));
    fj_tune_list_free(&l);
    /* sorted by class; a header for people; nothing left over but the file and its lock */
    char *text = fj_test_read_file(path, NULL);
    assert_non_null(text);
    print_message("%s", text);
    assert_true(text[0] == '#');
    assert_true(strstr(text, "n4096") < strstr(text, "n8192"));
    free(text);
    assert_int_equal(count_dir_entries(dir), 2);

    /* a corrupt line is ignored when reading and dropped by the next merge; the good one stays */
    FILE *f = fopen(path, "a");
    fputs("this line is corrupt | 1 | 2\n", f);
    fclose(f);
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(bad, 1);
    assert_int_equal(l.n, 2);
    fj_tune_list_free(&l);
    fj_tune_record c = record("Other GPU", DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg, 50.0);
    assert_null(fj_tune_file_merge(path, &c, 1, why, sizeof why));
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(bad, 0);
    assert_int_equal(l.n, 3);
    fj_tune_list_free(&l);

    /* a line holding a NUL byte is corrupt, and the line after it is still read (fgets took it for the
     * rest of the corrupt one) */
    f = fopen(path, "a");
    fwrite("bad\0line\n", 1, 9, f);
    fclose(f);
    fj_tune_record d = record("Third GPU", DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg, 0.04);
    char line[FJ_TUNE_LINE_MAX];
    fj_tune_format_line(&d, line, sizeof line);
    assert_non_null(strstr(line, "| 0.040")); /* not "0.0", which would not read back */
    f = fopen(path, "a");
    fprintf(f, "%s\n", line);
    fclose(f);
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(bad, 1);
    assert_int_equal(l.n, 4);
    assert_non_null(fj_tune_list_find(&l, &d.key));
    fj_tune_list_free(&l);

    /* a missing file is an empty one */
    char *missing = path_in(root, "none.txt");
    assert_int_equal(fj_tune_file_read(missing, &l, &bad), 0);
    assert_int_equal(l.n, 0);
    free(missing);
    fj_test_remove_dir(root);
    free(path), free(dir), free(root);
}

/* Processes merging different classes at once: the lock keeps every line. */
static void test_merge_concurrent(void **state)
{
    enum { PROCS = 6 };
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tune-"), *path = path_in(root, FJ_TUNE_FILE_NAME);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            int bad = 0;
            for (int k = 0; k < 5; k++) {
                fj_tune_record r = record(GPU, DRIVER + k, FJ_CODEGEN_VERSION, 128 << i, k_winner_cfg, 1.0 + i);
                bad |= fj_tune_file_merge(path, &r, 1, NULL, 0) != NULL;
            }
            _exit(bad);
        }
    }
    for (int i = 0; i < PROCS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    fj_tune_list l = {0};
    int bad = -1;
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(bad, 0);
    assert_int_equal(l.n, PROCS * 5);
    fj_tune_list_free(&l);
    assert_int_equal(count_dir_entries(root), 2); /* the file and its lock: no temporary files left */
    fj_test_remove_dir(root);
    free(path), free(root);
}

/* A cache dir holding a tune file with the given lines. */
static char *cache_with(const char *lines)
{
    char *root = fj_test_make_temp_dir("fajit-tune-"), *path = path_in(root, FJ_TUNE_FILE_NAME);
    write_text(path, lines);
    free(path);
    return root;
}

static char *line_of(const char *gpu, int driver, const char *codegen, int cls, const char *cfg)
{
    static char buf[8][FJ_TUNE_LINE_MAX];
    static int next;
    fj_tune_record r = record(gpu, driver, codegen, cls, cfg, 123.0);
    char *line = buf[next++ % 8];
    fj_tune_format_line(&r, line, FJ_TUNE_LINE_MAX - 1);
    strcat(line, "\n");
    return line;
}

/* ---------------------------------------------------------------------------------------------------
 * fajit_config_fill and the winners
 * ------------------------------------------------------------------------------------------------- */
static void test_fill_prefers_winner(void **state)
{
    (void)state;
    char lines[4096];
    snprintf(lines, sizeof lines, "# header\nnot a line\n%s",
             line_of(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg));
    char *root = cache_with(lines);
    fajit_context *ctx = fake_context(root, GPU, DRIVER);
    fajit_config heuristic = filled(NULL, 4096, NULL), c;
    char heuristic_text[128];
    fajit_config_format(&heuristic, heuristic_text, sizeof heuristic_text);
    assert_string_not_equal(heuristic_text, k_winner_cfg);

    assert_config_text((c = filled(ctx, 4096, NULL), &c), k_winner_cfg);
    assert_config_text((c = filled(ctx, 3000, NULL), &c), k_winner_cfg); /* class 4096 too */
    assert_config_text((c = filled(ctx, 8192, NULL), &c), heuristic_text); /* another class */
    assert_config_text((c = filled(ctx, 0, NULL), &c), heuristic_text);    /* no shape: no class */

    /* the caller's fields stay; the winner fills the rest when they go together */
    fajit_config given = {0};
    given.stages = 2;
    assert_config_text((c = filled(ctx, 4096, &given), &c), "sm_80 bf16 d128 br64 bc32 s2 sw128 w4 noncausal");
    memset(&given, 0, sizeof given);
    given.warps = 8; /* the winner's block_m 64 is not a multiple of 16 x 8: the heuristic fills instead */
    c = filled(ctx, 4096, &given);
    assert_int_equal(c.warps, 8);
    assert_int_not_equal(c.block_m, 64);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);

    fajit_tune_result res;
    fajit_shape shape = {1, 8, 8, 4096, 1024};
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_AUTO, 128, 0, &res), FAJIT_OK);
    assert_int_equal(res.found, 1);
    assert_int_equal(res.seqlen_class, 4096);
    assert_config_text(&res.best, k_winner_cfg);
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 128, 1, &res), FAJIT_OK);
    assert_int_equal(res.found, 0);
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 100, 0, &res), FAJIT_ERR_INVALID_ARGUMENT);

    /* read once per context: removing the file now changes nothing here, a new context sees it gone */
    char *path = path_in(root, FJ_TUNE_FILE_NAME);
    assert_int_equal(remove(path), 0);
    assert_config_text((c = filled(ctx, 4096, NULL), &c), k_winner_cfg);
    fajit_context_destroy(ctx);
    ctx = fake_context(root, GPU, DRIVER);
    assert_config_text((c = filled(ctx, 4096, NULL), &c), heuristic_text);
    fajit_context_destroy(ctx);
    free(path);
    fj_test_remove_dir(root);
    free(root);
}

/* On an sm_90 GPU the default path is sm_90a: its winners fill a config that names no path, an sm_80
 * winner of the same class does not, and a config that names sm_80 takes the sm_80 one. */
static void test_fill_sm90a(void **state)
{
    (void)state;
    const char *w90 = "sm_90a bf16 d128 br128 bc176 s2 sw128 w12 ov pp noncausal";
    const char *w80 = "sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal";
    char lines[4096];
    snprintf(lines, sizeof lines, "%s%s", line_of(GPU, DRIVER, FJ_CODEGEN_VERSION, 16384, w90),
             line_of(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, w80));
    char *root = cache_with(lines);
    fajit_context *ctx = fake_context(root, GPU, DRIVER);
    fajit_shape shape = {1, 16, 16, 16384, 16384};
    fajit_config c = {0};
    c.head_dim = 128;
    assert_int_equal(fajit_config_fill(ctx, &shape, &c), FAJIT_OK);
    assert_config_text(&c, w90);
    memset(&c, 0, sizeof c);
    c.head_dim = 128;
    shape.seqlen_q = shape.seqlen_k = 4096; /* the class of the sm_80 winner: not for an sm_90a config */
    assert_int_equal(fajit_config_fill(ctx, &shape, &c), FAJIT_OK);
    assert_int_equal(c.arch, FAJIT_ARCH_SM90A);
    assert_int_equal(c.warps, 4 * (c.block_m / 64 + 1));
    memset(&c, 0, sizeof c);
    c.head_dim = 128;
    c.arch = FAJIT_ARCH_SM80;
    assert_int_equal(fajit_config_fill(ctx, &shape, &c), FAJIT_OK);
    assert_config_text(&c, w80);
    /* the schedule tokens round-trip through the file's parser */
    fajit_config parsed;
    assert_null(fj_tune_parse_config(w90, &parsed));
    assert_int_equal(parsed.overlap, 1);
    assert_int_equal(parsed.pingpong, 1);
    assert_null(fj_tune_parse_config(w80, &parsed));
    assert_int_equal(parsed.overlap, -1);
    assert_int_equal(parsed.pingpong, -1);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);
}

/* fajit_tune's starting config comes from the device's own path and the built-in table, not from a winner: a copy
 * of the context that lacked the compute capability once gave sm_80 configs on sm_90 GPUs, so every tune on an H100
 * or H200 searched the sm_80 space (test_tune_gpu test_tiny_tune caught it on the H200) */
static void test_heuristic_path(void **state)
{
    (void)state;
    const char *w90 = "sm_90a bf16 d64 br64 bc64 s3 sw128 w8 noncausal";
    char *root = cache_with(line_of(GPU, DRIVER, FJ_CODEGEN_VERSION, 1024, w90));
    fajit_context *ctx = fake_context(root, GPU, DRIVER);
    fajit_shape shape = {2, 4, 4, 1024, 1024};
    fajit_config h = {0}, d = {0}, f = {0};
    h.dtype = d.dtype = f.dtype = FAJIT_DTYPE_BF16;
    h.head_dim = d.head_dim = f.head_dim = 64;
    assert_int_equal(fj_tune_heuristic(ctx, &shape, &h), FAJIT_OK);
    assert_int_equal(h.arch, FAJIT_ARCH_SM90A);
    assert_int_equal(fj_config_fill_default(ctx, &shape, &d), FAJIT_OK);
    assert_memory_equal(&h, &d, sizeof h);
    assert_int_equal(fajit_config_fill(ctx, &shape, &f), FAJIT_OK); /* the fill takes the winner, the heuristic not */
    assert_config_text(&f, w90);
    assert_memory_not_equal(&h, &f, sizeof h);
    fj_context_set_identity(ctx, "sm_89", GPU, DRIVER, 101376);
    memset(&h, 0, sizeof h);
    h.head_dim = 64;
    assert_int_equal(fj_tune_heuristic(ctx, &shape, &h), FAJIT_OK);
    assert_int_equal(h.arch, FAJIT_ARCH_SM80);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);
}

static void test_other_identity_ignored(void **state)
{
    (void)state;
    char lines[4096];
    snprintf(lines, sizeof lines, "%s%s%s", line_of("Another GPU", DRIVER, FJ_CODEGEN_VERSION, 4096, k_winner_cfg),
             line_of(GPU, DRIVER + 10, FJ_CODEGEN_VERSION, 4096, k_winner_cfg),
             line_of(GPU, DRIVER, "fajit-codegen-0", 4096, k_winner_cfg));
    char *root = cache_with(lines);
    fajit_config heuristic = filled(NULL, 4096, NULL), c;
    char heuristic_text[128];
    fajit_config_format(&heuristic, heuristic_text, sizeof heuristic_text);
    fajit_context *ctx = fake_context(root, GPU, DRIVER);
    assert_config_text((c = filled(ctx, 4096, NULL), &c), heuristic_text);
    fajit_context_destroy(ctx);
    /* each line is used by its own identity */
    ctx = fake_context(root, GPU, DRIVER + 10);
    assert_config_text((c = filled(ctx, 4096, NULL), &c), k_winner_cfg);
    fajit_context_destroy(ctx);
    /* without an identity (device -1, nothing set) the file is not consulted */
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.cache_dir = root;
    o.disk_cache = 1;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_config_text((c = filled(ctx, 4096, NULL), &c), heuristic_text);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);
}

/* A winner that does not fit the device's shared memory, an unreadable file, no disk cache. */
static void test_bad_sources_never_fail(void **state)
{
    (void)state;
    const char *big = "sm_80 bf16 d128 br128 bc64 s4 sw128 w8 noncausal"; /* 16 + 4 x 2 x 16 KiB = 160 KiB */
    char *root = cache_with(line_of(GPU, DRIVER, FJ_CODEGEN_VERSION, 4096, big));
    fajit_context *ctx = fake_context(root, GPU, DRIVER);
    fajit_config c = filled(ctx, 4096, NULL);
    assert_config_text(&c, big);
    fj_context_set_identity(ctx, "sm_89", GPU, DRIVER, 101376); /* an L40-sized smem: the winner does not fit */
    c = filled(ctx, 4096, NULL);
    fj_plan plan;
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    assert_true(plan.smem_bytes <= 101376);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);

    /* the tune file is a directory: unreadable, ignored */
    root = fj_test_make_temp_dir("fajit-tune-");
    char *path = path_in(root, FJ_TUNE_FILE_NAME);
    assert_int_equal(mkdir(path, 0755), 0);
    ctx = fake_context(root, GPU, DRIVER);
    c = filled(ctx, 4096, NULL);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(path), free(root);

    /* disk cache off: no tune file */
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_tune_file(ctx), "");
    fj_context_set_identity(ctx, "sm_90", GPU, DRIVER, 232448);
    c = filled(ctx, 4096, NULL);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    fajit_context_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------------
 * Classes, the search space, arguments
 * ------------------------------------------------------------------------------------------------- */
static void test_seqlen_class(void **state)
{
    static const int cases[][3] = {{1, 1, 128},        {128, 128, 128},     {129, 1, 256},  {1, 129, 256},
                                   {3000, 3000, 4096}, {4096, 512, 4096},   {16384, 1, 16384},
                                   {100000, 5, 16384}, {0, 700, 1024}};
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_shape s = {1, 1, 1, cases[i][0], cases[i][1]};
        assert_int_equal(fj_tune_seqlen_class(&s), cases[i][2]);
    }
    fajit_shape none = {4, 16, 16, 0, 0};
    assert_int_equal(fj_tune_seqlen_class(&none), 0);
    assert_int_equal(fj_tune_seqlen_class(NULL), 0);
}

static void check_space(fajit_context *ctx, int head_dim, int smem_limit)
{
    fajit_config first = {0}, out[FJ_TUNE_SPACE_MAX];
    fajit_shape shape = {4, 16, 16, 4096, 4096};
    int space = 0, pruned = 0;
    first.dtype = FAJIT_DTYPE_F16;
    first.head_dim = head_dim;
    first.causal = 1;
    assert_int_equal(fajit_config_fill(ctx, &shape, &first), FAJIT_OK);
    int n = fj_tune_space(ctx, &first, out, FJ_TUNE_SPACE_MAX, &space, &pruned);
    print_message("d%d, smem %d: %d configs, %d pruned, %d to try\n", head_dim, smem_limit, space, pruned, n);
    assert_true(n >= 2 && n == space - pruned);
    assert_memory_equal(&out[0], &first, sizeof first);
    for (int i = 0; i < n; i++) {
        fj_plan plan;
        assert_int_equal(fj_plan_build(&out[i], &plan), FAJIT_OK);
        assert_true(plan.smem_bytes <= smem_limit);
        assert_int_equal(out[i].head_dim, head_dim);
        assert_int_equal(out[i].causal, 1);
        for (int j = 0; j < i; j++) assert_memory_not_equal(&out[i], &out[j], sizeof out[i]);
    }
    assert_int_equal(fj_tune_space(ctx, &first, out, 5, &space, &pruned), n < 5 ? n : 5);
}

static void test_space(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    static const int dims[] = {64, 96, 128, 192, 256};
    fj_context_set_identity(ctx, "sm_90", GPU, DRIVER, 232448);
    for (int i = 0; i < 5; i++) check_space(ctx, dims[i], 232448);
    fj_context_set_identity(ctx, "sm_89", GPU, DRIVER, 101376);
    for (int i = 0; i < 5; i++) check_space(ctx, dims[i], 101376);
    fajit_context_destroy(ctx);
}

static void test_tune_arguments(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_tune_options opt = fajit_tune_options_default();
    fajit_tune_result res;
    fajit_context_options o = fajit_context_options_default();
    assert_int_equal(opt.max_candidates, 16);
    assert_int_equal(opt.reps, 10);
    assert_int_equal(opt.persist, 1);
    assert_int_equal(fajit_tune(NULL, NULL, FAJIT_DTYPE_BF16, 128, 0, NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_int_equal(fajit_tune(ctx, NULL, FAJIT_DTYPE_BF16, 100, 0, NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "head_dim = 100"));
    assert_int_equal(fajit_tune(ctx, NULL, FAJIT_DTYPE_BF16, 128, 2, NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_int_equal(fajit_tune(ctx, NULL, FAJIT_DTYPE_BF16, 128, 0, NULL, NULL, &res), FAJIT_ERR_NO_DEVICE);
    assert_non_null(strstr(fajit_errmsg(), "fajit_tune"));
    assert_int_equal(fajit_tune_lookup(ctx, NULL, FAJIT_DTYPE_BF16, 128, 0, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_int_equal(fajit_tune_lookup(ctx, NULL, FAJIT_DTYPE_BF16, 128, 0, &res), FAJIT_OK);
    assert_int_equal(res.found, 0);
    fajit_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_round_trip),
        cmocka_unit_test(test_corrupt_lines),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_concurrent),
        cmocka_unit_test(test_fill_prefers_winner),
        cmocka_unit_test(test_fill_sm90a),
        cmocka_unit_test(test_heuristic_path),
        cmocka_unit_test(test_other_identity_ignored),
        cmocka_unit_test(test_bad_sources_never_fail),
        cmocka_unit_test(test_seqlen_class),
        cmocka_unit_test(test_space),
        cmocka_unit_test(test_tune_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
