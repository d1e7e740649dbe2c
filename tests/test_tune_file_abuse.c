/*
 * test_tune_file_abuse.c - the tune file (src/runtime/tune_file.c) against what a hostile or broken cache
 * directory holds, and at scale (issue 21 items 3, 4, 5):
 *   - a FIFO, a symbolic link (to /dev/zero, to a good file), a directory, a file past the size cap, a lock
 *     file that is a FIFO or a link: every read returns at once with a reason (the FIFO made fopen block and
 *     the link to /dev/zero made the reader loop, both with the context's lock held); each attack runs in a
 *     child process that the test kills after 10 s, so a hang fails instead of stalling ctest;
 *   - 20,000 lines load in well under 2 s, straight and through a context (a linear search per line took 76 s);
 *   - a cache directory longer than FJ_DISK_CACHE_DIR_MAX is refused when the context is made, naming the
 *     limit, and one at the limit saves its tune file (1011-1015 characters were accepted, then every save
 *     failed).
 * Run: ctest --test-dir build -R test_tune_file_abuse
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/context.h"
#include "runtime/tune_file.h"
#include "test_support.h"

#define GPU "NVIDIA Test GPU 80GB"
#define DRIVER 13000
#define CHILD_SECONDS 10
/* Time bounds are multiplied by this: 5 in a sanitizer build (tests/CMakeLists.txt), where 20k lines read in
 * about 1 s alone and over 2 s beside other tests. The bound, 10 s, is 20x the 0.5 s of an idle gcc build and
 * still far under the 76 s the quadratic reader took, so a loaded CI machine does not fail it by chance. */
#ifndef FJ_TEST_TIME_SCALE
#define FJ_TEST_TIME_SCALE 1
#endif
#define LOAD_BOUND_S (10.0 * FJ_TEST_TIME_SCALE)

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A forward line for (driver, class) in canonical form. */
static void forward_line(char *buf, size_t size, const char *gpu, int driver, int cls, double tflops)
{
    fj_tune_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.key.gpu, sizeof r.key.gpu, "%s", gpu);
    r.key.driver = driver;
    snprintf(r.key.codegen, sizeof r.key.codegen, "%s", FJ_CODEGEN_VERSION);
    r.key.dtype = FAJIT_DTYPE_BF16;
    r.key.head_dim = 128;
    r.key.seqlen_class = cls;
    assert_null(fj_tune_parse_config("sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal", &r.cfg));
    r.tflops = tflops;
    int n = fj_tune_format_line(&r, buf, size);
    assert_true(n > 0 && (size_t)n < size);
}

/* ---------------------------------------------------------------------------------------------------
 * Item 3: what lies at the tune path
 * ------------------------------------------------------------------------------------------------- */
typedef enum { READ_FILE, MERGE_FILE, CONTEXT_LOOKUP } attack_call;

/* In a child: the call on `dir`'s tune file; exit 0 when it returned at once with the expected outcome. */
static int child_call(const char *dir, attack_call call, const char *why_has)
{
    char *path = path_in(dir, FJ_TUNE_FILE_NAME), why[2048] = "";
    int ok = 0;
    if (call == READ_FILE) {
        fj_tune_list l = {0};
        int bad = 0;
        ok = fj_tune_file_load(path, &l, &bad, why, sizeof why) == -1 && l.n == 0 && strstr(why, why_has);
        fj_tune_list_free(&l);
    } else if (call == MERGE_FILE) {
        fj_tune_record r;
        char line[FJ_TUNE_LINE_MAX];
        forward_line(line, sizeof line, GPU, DRIVER, 4096, 100.0);
        assert_null(fj_tune_parse_line(line, &r));
        const char *step = fj_tune_file_merge(path, &r, 1, why, sizeof why);
        ok = step && strcmp(step, "read the existing file") == 0 && strstr(why, why_has);
    } else { /* the public path: the context reads the file under its lock, on the first lookup */
        fajit_context *ctx = fj_test_fake_context(dir, GPU, DRIVER);
        fajit_shape shape = {1, 8, 8, 4096, 4096};
        fajit_tune_result res;
        ok = ctx && fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 128, 0, &res) == FAJIT_OK && res.found == 0;
        fajit_context_destroy(ctx);
    }
    if (!ok) printf("call %d on %s: why \"%s\", expected \"%s\"\n", (int)call, path, why, why_has);
    free(path);
    return ok ? 0 : 1;
}

/* Run child_call in a child process; kill it after CHILD_SECONDS (a hang fails the test). */
static void expect_returns(const char *dir, attack_call call, const char *why_has, const char *what)
{
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(child_call(dir, call, why_has));
    int status = 0;
    double t0 = now_s();
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_s() - t0 < CHILD_SECONDS) usleep(10000);
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        printf("%s: call %d still running after %d s (hung)\n", what, (int)call, CHILD_SECONDS);
        fail();
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) printf("%s: call %d failed (status 0x%x)\n", what, (int)call, status);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void attack_all(const char *dir, const char *why_has, const char *what)
{
    expect_returns(dir, READ_FILE, why_has, what);
    expect_returns(dir, MERGE_FILE, why_has, what);
    expect_returns(dir, CONTEXT_LOOKUP, why_has, what);
}

static void test_not_regular_files(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tfa-"), *path = path_in(root, FJ_TUNE_FILE_NAME);
    char *good = path_in(root, "good.txt"), line[FJ_TUNE_LINE_MAX];

    assert_int_equal(mkfifo(path, 0644), 0); /* fopen blocked for a writer that never came */
    attack_all(root, "is a FIFO, not a regular file", "FIFO");
    unlink(path);

    assert_int_equal(symlink("/dev/zero", path), 0); /* read_line looped on NUL bytes forever */
    attack_all(root, "is a symbolic link: not followed", "symlink to /dev/zero");
    unlink(path);

    FILE *f = fopen(good, "w"); /* a link to a good file is not followed either: fajit writes no links */
    assert_non_null(f);
    forward_line(line, sizeof line, GPU, DRIVER, 4096, 100.0);
    fprintf(f, "%s\n", line);
    fclose(f);
    assert_int_equal(symlink(good, path), 0);
    attack_all(root, "symbolic link", "symlink to a good file");
    unlink(path);

    assert_int_equal(mkdir(path, 0755), 0);
    attack_all(root, "is a directory", "directory");
    rmdir(path);

    int fd = open(path, O_WRONLY | O_CREAT, 0644); /* sparse: past the cap without writing it */
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)FJ_TUNE_FILE_MAX_BYTES + 1), 0);
    close(fd);
    attack_all(root, "larger than the tune file limit", "oversized file");
    unlink(path);

    /* the lock file as a FIFO, then as a link to /dev/zero: the merge neither blocks nor follows it */
    char *lock = path_in(root, FJ_TUNE_FILE_NAME ".lock");
    unlink(lock); /* the regular one the merges above made */
    for (int kind = 0; kind < 2; kind++) {
        assert_int_equal(kind ? symlink("/dev/zero", lock) : mkfifo(lock, 0644), 0);
        rename(good, path);
        pid_t pid = fork();
        if (pid == 0) {
            fj_tune_record r;
            forward_line(line, sizeof line, GPU, DRIVER, 8192, 50.0);
            _exit(fj_tune_parse_line(line, &r) || fj_tune_file_merge(path, &r, 1, NULL, 0));
        }
        int status = 0;
        double t0 = now_s();
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (now_s() - t0 > CHILD_SECONDS) {
                kill(pid, SIGKILL);
                fail_msg("merge with a %s lock file hung", kind ? "symlink" : "FIFO");
            }
            usleep(10000);
        }
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        fj_tune_list l = {0};
        assert_int_equal(fj_tune_file_read(path, &l, NULL), 0);
        assert_int_equal(l.n, 2);
        fj_tune_list_free(&l);
        struct stat st;
        assert_int_equal(lstat(lock, &st), 0);
        assert_true(kind ? S_ISLNK(st.st_mode) : S_ISFIFO(st.st_mode)); /* left as it was */
        unlink(lock);
        rename(path, good);
    }
    free(lock);
    fj_test_remove_dir(root);
    free(good), free(path), free(root);
}

/* ---------------------------------------------------------------------------------------------------
 * Item 4: 20,000 lines
 * ------------------------------------------------------------------------------------------------- */
#define MANY 20000

static void test_many_lines(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tfa-"), *path = path_in(root, FJ_TUNE_FILE_NAME);
    char line[FJ_TUNE_LINE_MAX];
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    /* forward lines, one driver each, in a shuffled order, then the first 1000 again (a later line wins) */
    for (int i = 0; i < MANY; i++) {
        int d = (int)((uint64_t)i * 7919 % MANY);
        forward_line(line, sizeof line, GPU, 100000 + d, 4096, 100.0);
        fprintf(f, "%s\n", line);
    }
    for (int d = 0; d < 1000; d++) {
        forward_line(line, sizeof line, GPU, 100000 + d, 4096, 200.0);
        fprintf(f, "%s\n", line);
    }
    /* decode lines of this context's GPU, driver and codegen: 20,000 classes for the context's own table */
    for (int g = 1; g <= MANY; g++)
        fprintf(f, GPU " | %d | %s | decode bf16 d128 noncausal bkv8 g%d q1 k131072 unpacked | splits 64 br64 bc64 | "
                   "2950.0\n", DRIVER, FJ_CODEGEN_VERSION, g);
    fclose(f);

    fj_tune_list l = {0};
    int bad = -1;
    double t0 = now_s();
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    double t_read = now_s() - t0;
    print_message("%d + 1000 + %d lines read in %.3f s\n", MANY, MANY, t_read);
    assert_int_equal(bad, 0);
    assert_int_equal(l.n, 2 * MANY);
    for (int i = 1; i < l.n; i++) /* sorted, no key twice */
        assert_false(fj_tune_key_equal(&l.v[i - 1].key, &l.v[i].key));
    for (int d = 0; d < MANY; d += 997) {
        fj_tune_record want;
        forward_line(line, sizeof line, GPU, 100000 + d, 4096, 1.0);
        assert_null(fj_tune_parse_line(line, &want));
        const fj_tune_record *r = fj_tune_list_find(&l, &want.key);
        assert_non_null(r);
        assert_true(r->tflops == (d < 1000 ? 200.0 : 100.0));
    }
    fj_tune_list_free(&l);
    assert_true(t_read < LOAD_BOUND_S); /* the linear search per line took 76 s for 20k lines */

    /* through a context: the first lookup reads the file and keeps its 20,000 decode classes */
    fajit_context *ctx = fj_test_fake_context(root, GPU, DRIVER);
    assert_non_null(ctx);
    fajit_shape shape = {1, 8, 8, 4096, 4096};
    fajit_tune_result res;
    t0 = now_s();
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 128, 0, &res), FAJIT_OK);
    double t_ctx = now_s() - t0;
    print_message("context load and lookup: %.3f s, %d winners kept\n", t_ctx, ctx->tuned.n);
    assert_int_equal(ctx->tuned.n, MANY);
    assert_true(t_ctx < LOAD_BOUND_S);

    /* a merge into the big file stays fast and keeps every line */
    fj_tune_record r;
    forward_line(line, sizeof line, "Another GPU", DRIVER, 4096, 10.0);
    assert_null(fj_tune_parse_line(line, &r));
    t0 = now_s();
    assert_null(fj_tune_file_merge(path, &r, 1, NULL, 0));
    double t_merge = now_s() - t0;
    assert_int_equal(fj_tune_file_read(path, &l, &bad), 0);
    assert_int_equal(l.n, 2 * MANY + 1);
    fj_tune_list_free(&l);
    assert_true(t_merge < LOAD_BOUND_S);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(path), free(root);
}

/* ---------------------------------------------------------------------------------------------------
 * Item 5: one limit for the cache directory
 * ------------------------------------------------------------------------------------------------- */
/* root + "/dddd.../dddd..." of exactly len characters (components of at most 200). */
static char *long_dir(const char *root, size_t len)
{
    char *p = malloc(len + 1);
    assert_non_null(p);
    size_t n = strlen(root);
    assert_true(n + 2 < len);
    memcpy(p, root, n);
    while (n < len) {
        p[n++] = '/';
        for (int k = 0; k < 200 && n < len; k++) p[n++] = 'd';
        if (n == len && p[n - 1] == '/') p[n - 1] = 'e';
    }
    p[len] = '\0';
    return p;
}

static void test_cache_dir_limit(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tfa-");
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 1;
    static const size_t refused[] = {FJ_DISK_CACHE_DIR_MAX + 1, 1011, 1015, 1016, 4000};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *dir = long_dir(root, refused[i]);
        o.cache_dir = dir;
        assert_true(fj_test_status_says(fajit_context_create(&o, &ctx), FAJIT_ERR_INVALID_ARGUMENT, "cache_dir",
                                        "more than the 960 a cache directory may have", "1024 bytes"));
        assert_null(ctx);
        free(dir);
    }
    /* at the limit: the context is made and its tune file is saved (directories created on the way) */
    char *dir = long_dir(root, FJ_DISK_CACHE_DIR_MAX);
    o.cache_dir = dir;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_cache_dir(ctx), dir);
    const char *tune = fajit_context_tune_file(ctx);
    assert_int_equal(strlen(tune), FJ_DISK_CACHE_DIR_MAX + strlen("/" FJ_TUNE_FILE_NAME));
    char line[FJ_TUNE_LINE_MAX], why[2048] = "";
    fj_tune_record r;
    forward_line(line, sizeof line, GPU, DRIVER, 4096, 100.0);
    assert_null(fj_tune_parse_line(line, &r));
    const char *step = fj_tune_file_merge(tune, &r, 1, why, sizeof why);
    if (step) print_message("save failed: %s\n", why);
    assert_null(step);
    fj_tune_list l = {0};
    assert_int_equal(fj_tune_file_read(tune, &l, NULL), 0);
    assert_int_equal(l.n, 1);
    fj_tune_list_free(&l);
    fajit_context_destroy(ctx);
    free(dir);

    /* from the environment: too long turns the disk cache off, with the reason in the cache's last error */
    char *env_dir = long_dir(root, 1013);
    setenv("FAJIT_CACHE_DIR", env_dir, 1);
    o.cache_dir = NULL;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_cache_dir(ctx), "");
    assert_string_equal(fajit_context_tune_file(ctx), "");
    assert_non_null(strstr(ctx->disk.stats.last_error, "960"));
    fajit_context_destroy(ctx);
    unsetenv("FAJIT_CACHE_DIR");
    free(env_dir);
    fj_test_remove_dir(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_many_lines),
        cmocka_unit_test(test_cache_dir_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
