/*
 * test_cache.c - unit tests of the disk cache (src/runtime/disk_cache.c) and its hashes (hash.c).
 *
 * Covers: XXH64 / FNV-1a against published vectors; miss then hit; truncated, corrupted and
 * mismatched entries detected, deleted and reported as misses; invalidation; a store that cannot be
 * written (kept as a diagnostic, not a failure); forked processes storing one key at once leave a valid
 * entry and no temp files; FAJIT_CACHE and the directory resolution order (also through the public
 * fajit_context_cache_dir); the compiler stamps (compiler_stamp.c): a new process reads the compiler's
 * identity from the stamp without loading the library, and loads it again when the stamped file changes or
 * the environment that picks the library does. Run: ctest --test-dir build -R test_cache
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
#include "runtime/compiler_stamp.h"
#include "runtime/cuda_api.h"
#include "runtime/disk_cache.h"
#include "runtime/hash.h"
#include "cache_fixture.h"
#include "test_support.h"

/* ---------------------------------------------------------------------------------------------------
 * Helpers: a fresh cache in a temp directory, entry files, environment
 * ------------------------------------------------------------------------------------------------- */

static const char *k_key = "fajit kernel\nconfig: sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal\n";


static void entry_path(fixture *f, const char *key, char *buf, size_t size)
{
    fj_disk_cache_entry_path(&f->cache, key, "cubin", buf, size);
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of names in dir starting with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static void store_sample(fixture *f, const char *key)
{
    static const char payload[] = "\x7f" "ELF pretend cubin bytes 0123456789";
    assert_int_equal(fj_disk_cache_store(&f->cache, key, "cubin", 0, payload, sizeof payload), 0);
}

static void expect_discarded_miss(fixture *f, const char *key, const char *why)
{
    char path[2048];
    void *data = NULL;
    size_t size = 0;
    fj_disk_cache_stats s;
    entry_path(f, key, path, sizeof path);
    assert_int_equal(fj_disk_cache_load(&f->cache, key, "cubin", 0, &data, &size), 0);
    assert_null(data);
    assert_false(file_exists(path));
    fj_disk_cache_stats_get(&f->cache, &s);
    assert_int_equal(s.discarded, 1);
    assert_non_null(strstr(s.last_error, why));
}

/* ---------------------------------------------------------------------------------------------------
 * Hashes
 * ------------------------------------------------------------------------------------------------- */
static void test_hash_vectors(void **state)
{
    (void)state;
    const char *nobody = "Nobody inspects the spammish repetition";
    assert_true(fj_xxh64("", 0, 0) == 0xEF46DB3751D8E999ull);
    assert_true(fj_xxh64("", 0, 1) == 0xD5AFBA1336A3BE4Bull);
    assert_true(fj_xxh64("a", 1, 0) == 0xD24EC4F1A98C6E5Bull);
    assert_true(fj_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
    assert_true(fj_xxh64("Call me Ishmael.", 16, 0) == 0x6D04390FC9D61A90ull);
    assert_true(fj_xxh64(nobody, strlen(nobody), 0) == 0xFBCEA83C8A378BF1ull);
    assert_true(fj_fnv1a64("", 0) == 0xCBF29CE484222325ull);
    assert_true(fj_fnv1a64("a", 1) == 0xAF63DC4C8601EC8Cull);
    char hex[FJ_HASH128_HEX_SIZE];
    fj_hash128_hex(fj_hash128_of("a", 1), hex);
    assert_string_equal(hex, "d24ec4f1a98c6e5baf63dc4c8601ec8c");
}

static void test_key_text(void **state)
{
    (void)state;
    char key[FJ_DISK_CACHE_KEY_MAX];
    int n = fj_disk_cache_key(key, sizeof key, "sm_80 bf16 d128", "sm_90", "nvJitLink 13.0");
    assert_true(n > 0 && n < (int)sizeof key);
    assert_non_null(strstr(key, "config: sm_80 bf16 d128\n"));
    assert_non_null(strstr(key, "codegen: " FJ_CODEGEN_VERSION ", sources "));
    assert_non_null(strstr(key, "target: sm_90\n"));
    assert_non_null(strstr(key, "compiler: nvJitLink 13.0\n"));
    assert_null(strchr(key, '/')); /* no paths in the key */
}

/* ---------------------------------------------------------------------------------------------------
 * Load / store
 * ------------------------------------------------------------------------------------------------- */
static void test_miss_then_hit(void **state)
{
    fixture *f = *state;
    void *data = NULL;
    size_t size = 0;
    fj_disk_cache_stats s;
    assert_int_equal(fj_disk_cache_load(&f->cache, k_key, "cubin", 0, &data, &size), 0);
    store_sample(f, k_key);
    assert_int_equal(fj_disk_cache_load(&f->cache, k_key, "cubin", 0, &data, &size), 1);
    assert_int_equal(size, sizeof "\x7f" "ELF pretend cubin bytes 0123456789");
    assert_memory_equal(data, "\x7f" "ELF pretend cubin bytes 0123456789", size);
    free(data);
    /* another kind under the same key is a separate entry */
    assert_int_equal(fj_disk_cache_load(&f->cache, k_key, "ptx", 0, &data, &size), 0);
    assert_int_equal(fj_disk_cache_store(&f->cache, k_key, "ptx", 0, "", 0), 0);
    assert_int_equal(fj_disk_cache_load(&f->cache, k_key, "ptx", 0, &data, &size), 1);
    assert_int_equal(size, 0);
    free(data);
    fj_disk_cache_stats_get(&f->cache, &s);
    assert_int_equal(s.hits, 2);
    assert_int_equal(s.misses, 2);
    assert_int_equal(s.stores, 2);
    assert_int_equal(s.discarded, 0);
    assert_string_equal(s.last_error, "");
}

static void test_truncated_entry(void **state)
{
    static const off_t lengths[] = {0, 7, 39, 40, -1}; /* -1: one byte short of whole; the header is 40 B */
    fixture *f = *state;
    char path[2048];
    struct stat st;
    for (int i = 0; i < 5; i++) {
        store_sample(f, k_key);
        entry_path(f, k_key, path, sizeof path);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(truncate(path, lengths[i] >= 0 ? lengths[i] : st.st_size - 1), 0);
        f->cache.stats.discarded = 0;
        expect_discarded_miss(f, k_key, lengths[i] >= 0 && lengths[i] < 40 ? "truncated header"
                                                                            : "file size disagrees");
    }
}

static void flip_byte(const char *path, long offset_from_end_or_start)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fseek(fp, offset_from_end_or_start, offset_from_end_or_start < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, -1, SEEK_CUR);
    fputc(c ^ 0x20, fp);
    fclose(fp);
}

static void test_corrupt_bytes(void **state)
{
    static const struct {
        long offset;
        const char *why;
    } cases[] = {{-3, "checksum"}, {0, "bad magic"}, {8, "format version"}, {12, "key length"},
                 {16, "file size"}, {26, "checksum"}, {40, "stored key differs"}};
    fixture *f = *state;
    char path[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        store_sample(f, k_key);
        entry_path(f, k_key, path, sizeof path);
        flip_byte(path, cases[i].offset);
        f->cache.stats.discarded = 0;
        expect_discarded_miss(f, k_key, cases[i].why);
    }
}

/* A file holding another key's entry at this key's path (what a hash collision would look like). */
static void test_key_mismatch(void **state)
{
    fixture *f = *state;
    const char *other = "fajit kernel\nconfig: sm_80 f16 d64 br64 bc64 s2 sw128 w4 causal\n";
    char path_a[2048], path_b[2048], cmd[4200];
    store_sample(f, other);
    entry_path(f, other, path_a, sizeof path_a);
    entry_path(f, k_key, path_b, sizeof path_b);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path_a, path_b);
    assert_int_equal(system(cmd), 0);
    expect_discarded_miss(f, k_key, "key");
    assert_true(file_exists(path_a)); /* the genuine entry is untouched */
}

static void test_invalidate(void **state)
{
    fixture *f = *state;
    store_sample(f, k_key);
    fj_disk_cache_invalidate(&f->cache, k_key, "cubin", "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE");
    expect_discarded_miss(f, k_key, "CUDA_ERROR_INVALID_IMAGE");
}

/* A cache directory below a regular file cannot be made: the store fails softly, with a reason. */
static void test_store_failure_is_soft(void **state)
{
    fixture *f = *state;
    char file[2048], dir[2100];
    fj_disk_cache c;
    fj_disk_cache_stats s;
    snprintf(file, sizeof file, "%s/plain-file", f->root);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(dir, sizeof dir, "%s/sub", file);
    assert_int_equal(fj_disk_cache_init(&c, 1, dir), FAJIT_OK);
    assert_int_equal(fj_disk_cache_store(&c, k_key, "cubin", 0, "x", 1), -1);
    fj_disk_cache_stats_get(&c, &s);
    assert_int_equal(s.store_failures, 1);
    assert_non_null(strstr(s.last_error, "create directory"));
    assert_non_null(strstr(s.last_error, dir));
    fj_disk_cache_fini(&c);
}

/* ---------------------------------------------------------------------------------------------------
 * Concurrent writers (processes)
 * ------------------------------------------------------------------------------------------------- */
#define WRITERS 4
#define ROUNDS 60

/* A child: store its own self-describing payload ROUNDS times, loading in between; every hit must be
 * a whole payload of some writer. Exit 0 when all reads were whole. */
static int writer_child(fj_disk_cache *cache, int id)
{
    unsigned char payload[4096 + WRITERS];
    size_t n = sizeof payload - (size_t)id; /* writers differ in length and content */
    memset(payload, 'A' + id, n);
    for (int r = 0; r < ROUNDS; r++) {
        void *data = NULL;
        size_t size = 0;
        if (fj_disk_cache_store(cache, k_key, "cubin", 0, payload, n) != 0) return 1;
        if (fj_disk_cache_load(cache, k_key, "cubin", 0, &data, &size)) {
            const unsigned char *d = data;
            int w = d[0] - 'A';
            if (w < 0 || w >= WRITERS || size != sizeof payload - (size_t)w) return 2;
            for (size_t i = 0; i < size; i++)
                if (d[i] != d[0]) return 3;
            free(data);
        }
    }
    return 0;
}

static void test_concurrent_writers(void **state)
{
    fixture *f = *state;
    pid_t pids[WRITERS];
    fj_disk_cache_stats s;
    for (int i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) _exit(writer_child(&f->cache, i));
    }
    for (int i = 0; i < WRITERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(fj_disk_cache_load(&f->cache, k_key, "cubin", 0, &data, &size), 1);
    free(data);
    assert_int_equal(count_prefixed(f->cache.entries_dir, ".tmp-"), 0);
    fj_disk_cache_stats_get(&f->cache, &s);
    assert_int_equal(s.discarded, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Switch and directory resolution
 * ------------------------------------------------------------------------------------------------- */
static void clear_env(void)
{
    unsetenv("FAJIT_CACHE");
    unsetenv("FAJIT_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
}

static void expect_dir(int setting, const char *explicit_dir, const char *want)
{
    fj_disk_cache c;
    assert_int_equal(fj_disk_cache_init(&c, setting, explicit_dir), FAJIT_OK);
    assert_int_equal(c.enabled, want[0] != '\0');
    assert_string_equal(c.dir, want);
    fj_disk_cache_fini(&c);
}

static void test_switch(void **state)
{
    (void)state;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    fj_disk_cache c;
    clear_env();
    setenv("HOME", "/home/someone", 1);
    setenv("FAJIT_CACHE", "0", 1);
    expect_dir(-1, NULL, "");
    expect_dir(1, NULL, "/home/someone/.cache/fajit"); /* explicit on beats the environment */
    setenv("FAJIT_CACHE", "off", 1);
    expect_dir(-1, "/tmp/x", "");
    setenv("FAJIT_CACHE", "1", 1);
    expect_dir(-1, NULL, "/home/someone/.cache/fajit");
    expect_dir(0, NULL, "");
    assert_int_equal(fj_disk_cache_init(&c, 2, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "disk_cache = 2"));
    fj_disk_cache_fini(&c);
    clear_env();
    if (home) setenv("HOME", home, 1);
    free(home);
}

static void test_dir_order(void **state)
{
    (void)state;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    fj_disk_cache c;
    clear_env();
    setenv("HOME", "/home/someone", 1);
    expect_dir(-1, NULL, "/home/someone/.cache/fajit");
    setenv("XDG_CACHE_HOME", "relative/ignored", 1);
    expect_dir(-1, NULL, "/home/someone/.cache/fajit");
    setenv("XDG_CACHE_HOME", "/xdg/", 1);
    expect_dir(-1, NULL, "/xdg/fajit");
    setenv("FAJIT_CACHE_DIR", "/env/dir/", 1);
    expect_dir(-1, NULL, "/env/dir");
    expect_dir(-1, "/explicit", "/explicit");
    expect_dir(-1, "", "/env/dir"); /* "" means the default */
    clear_env();
    unsetenv("HOME");
    assert_int_equal(fj_disk_cache_init(&c, -1, NULL), FAJIT_OK);
    assert_false(c.enabled);
    assert_non_null(strstr(c.stats.last_error, "HOME"));
    fj_disk_cache_fini(&c);
    if (home) setenv("HOME", home, 1);
    free(home);
}

/* The same through the public API of a codegen-only context. */
static void test_context_cache_dir(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    clear_env();
    o.device = -1;
    setenv("FAJIT_CACHE_DIR", "/env/cache", 1);
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_cache_dir(ctx), "/env/cache");
    fajit_context_destroy(ctx);
    o.cache_dir = "/opt/explicit";
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_cache_dir(ctx), "/opt/explicit");
    fajit_context_destroy(ctx);
    setenv("FAJIT_CACHE", "0", 1);
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_string_equal(fajit_context_cache_dir(ctx), "");
    fajit_context_destroy(ctx);
    clear_env();
}

/* ---------------------------------------------------------------------------------------------------
 * Compiler stamps: each step runs in a new process (fork), as a program starting on a warm cache would
 * ------------------------------------------------------------------------------------------------- */
typedef struct stamp_result {
    int status, loaded_before, loaded_after;
    char identity[128];
} stamp_result;

static stamp_result stamp_in_child(const char *root, int whole_program)
{
    stamp_result r = {-1, -1, -1, ""};
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        fj_disk_cache c;
        fj_plan plan;
        char id[128] = "";
        memset(&plan, 0, sizeof plan);
        plan.whole_program = whole_program;
        int before = whole_program ? fj_nvrtc_loaded() : fj_nvjitlink_loaded();
        fajit_status st = fj_disk_cache_init(&c, 1, root);
        if (st == FAJIT_OK) st = fj_compiler_identity_stamped(&c, &plan, id, sizeof id);
        int after = whole_program ? fj_nvrtc_loaded() : fj_nvjitlink_loaded();
        dprintf(fds[1], "%d %d %d %s", (int)st, before, after, id);
        _exit(0);
    }
    close(fds[1]);
    char buf[256] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(n > 0);
    buf[n] = '\0';
    int used = 0;
    assert_int_equal(sscanf(buf, "%d %d %d %n", &r.status, &r.loaded_before, &r.loaded_after, &used), 3);
    snprintf(r.identity, sizeof r.identity, "%s", buf + used);
    return r;
}

/* Write a stamp for NVRTC by hand, naming `file` with the given identity (the key as compiler_stamp.c makes it). */
static void write_stamp(fj_disk_cache *c, const char *file, const char *identity)
{
    char key[2048], payload[2048];
    struct stat st;
    const char *lp = getenv("LD_LIBRARY_PATH"), *ch = getenv("CUDA_HOME");
    assert_int_equal(stat(file, &st), 0);
    snprintf(key, sizeof key, "compiler stamp NVRTC\nLD_LIBRARY_PATH=%s\nCUDA_HOME=%s", lp ? lp : "", ch ? ch : "");
    snprintf(payload, sizeof payload, "%s\n%lld\n%lld.%09ld\n%s\n", file, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, identity);
    assert_int_equal(fj_disk_cache_store_meta(c, key, "stamp", payload, strlen(payload)), 0);
}

static void test_compiler_stamp(void **state)
{
    fixture *f = *state;
    for (int whole = 1; whole >= 0; whole--) {
        const char *name = whole ? "NVRTC " : "nvJitLink ";
        stamp_result a = stamp_in_child(f->root, whole);
        if (a.status == FAJIT_ERR_LIBRARY_MISSING) {
            printf("SKIP: %slibrary not found, compiler stamps not tested\n", name);
            skip();
        }
        assert_int_equal(a.status, FAJIT_OK);
        assert_int_equal(a.loaded_before, 0);
        assert_int_equal(a.loaded_after, 1); /* no stamp yet: loaded and asked */
        assert_memory_equal(a.identity, name, strlen(name));
        stamp_result b = stamp_in_child(f->root, whole);
        assert_int_equal(b.status, FAJIT_OK);
        assert_int_equal(b.loaded_after, 0); /* the stamp answered */
        assert_string_equal(b.identity, a.identity);
    }
    /* A stamp naming a file of ours: believed while the file is unchanged, dropped once it changes. */
    char lib[512];
    snprintf(lib, sizeof lib, "%s/libfake.so", f->root);
    FILE *fp = fopen(lib, "w");
    assert_non_null(fp);
    fputs("x", fp);
    fclose(fp);
    write_stamp(&f->cache, lib, "NVRTC 99.9 fake");
    stamp_result c = stamp_in_child(f->root, 1);
    assert_int_equal(c.loaded_after, 0);
    assert_string_equal(c.identity, "NVRTC 99.9 fake (libfake.so, 1 B)"); /* the stamped file's name and size */
    fp = fopen(lib, "a");
    assert_non_null(fp);
    fputs("y", fp); /* another size: "the library was upgraded" */
    fclose(fp);
    stamp_result d = stamp_in_child(f->root, 1);
    assert_int_equal(d.status, FAJIT_OK);
    assert_int_equal(d.loaded_after, 1);
    assert_null(strstr(d.identity, "99.9 fake"));
    stamp_result e = stamp_in_child(f->root, 1); /* d wrote the real stamp back */
    assert_int_equal(e.loaded_after, 0);
    assert_string_equal(e.identity, d.identity);
    /* Another CUDA_HOME may pick another library: another stamp, so the compiler is loaded again. */
    char *home = getenv("CUDA_HOME") ? strdup(getenv("CUDA_HOME")) : NULL;
    setenv("CUDA_HOME", "/nonexistent/fajit-test-cuda", 1);
    stamp_result g = stamp_in_child(f->root, 1);
    assert_int_equal(g.status, FAJIT_OK);
    assert_int_equal(g.loaded_after, 1);
    if (home) setenv("CUDA_HOME", home, 1);
    else unsetenv("CUDA_HOME");
    free(home);
    /* Stamps are metadata: the kernel counters of this process's cache did not move. */
    fj_disk_cache_stats s;
    fj_disk_cache_stats_get(&f->cache, &s);
    assert_int_equal(s.hits + s.misses + s.stores + s.store_failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_vectors),
        cmocka_unit_test(test_key_text),
        FJ_CACHE_TEST(test_miss_then_hit),
        FJ_CACHE_TEST(test_truncated_entry),
        FJ_CACHE_TEST(test_corrupt_bytes),
        FJ_CACHE_TEST(test_key_mismatch),
        FJ_CACHE_TEST(test_invalidate),
        FJ_CACHE_TEST(test_store_failure_is_soft),
        FJ_CACHE_TEST(test_concurrent_writers),
        cmocka_unit_test(test_switch),
        cmocka_unit_test(test_dir_order),
        cmocka_unit_test(test_context_cache_dir),
        FJ_CACHE_TEST(test_compiler_stamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
