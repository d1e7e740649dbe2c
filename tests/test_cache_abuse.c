/*
 * test_cache_abuse.c - the disk cache (src/runtime/disk_cache.c) under abuse, on its own API (store, load
 * with and without the source-hash check, invalidate); no GPU: fajit_kernel_get's disk path is this API
 * followed by cuModuleLoadData, which test_runtime_gpu covers with a refused cubin.
 *
 * Covers: every single-bit flip and every truncation of an entry, zero-length entries, another key's entry
 * and an entry of other sources (PTX hash) in an entry's place; a directory, a symlink and a FIFO where an
 * entry should be; a missing, a read-only, a foreign-owned, a group- or world-writable cache folder and a
 * symlinked kernels/ folder; 8 processes x 200 get-or-build calls on 6 shared keys while every process
 * damages entries between its calls. Never a wrong payload, never a crash or hang: a miss (entry deleted),
 * a store failure with its reason in the stats, or a rebuild. Run: ctest --test-dir build -R test_cache_abuse
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/disk_cache.h"
#include "runtime/hash.h"
#include "cache_fixture.h"
#include "test_support.h"

/* ---------------------------------------------------------------------------------------------------
 * Helpers: a cache in a fresh directory, the payload each key must have, raw entry files
 * ------------------------------------------------------------------------------------------------- */

#define N_KEYS 6

static void key_of(int i, char *buf, size_t size)
{
    snprintf(buf, size, "fajit kernel\nformat: 2\nconfig: sm_80 bf16 d128 br64 bc64 s%d sw128 w4 noncausal\n", i);
}

/* The payload key i must have ("the cubin"): 1500 + 97 i pseudo-random bytes from i. */
static unsigned char *payload_of(int i, size_t *size)
{
    *size = 1500 + 97 * (size_t)i;
    unsigned char *p = malloc(*size);
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    for (size_t k = 0; k < *size; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[k] = (unsigned char)x;
    }
    return p;
}

/* The hash of key i's "PTX": what its cubin was made from. */
static uint64_t source_of(int i)
{
    char ptx[64];
    snprintf(ptx, sizeof ptx, "// ptx of key %d", i);
    return fj_source_hash(ptx, strlen(ptx));
}


static void entry_file(fixture *f, int i, char *path, size_t size)
{
    char key[256];
    key_of(i, key, sizeof key);
    fj_disk_cache_entry_path(&f->cache, key, "cubin", path, size);
}

static void store_key(fj_disk_cache *c, int i)
{
    char key[256];
    size_t n;
    unsigned char *p = payload_of(i, &n);
    key_of(i, key, sizeof key);
    assert_int_equal(fj_disk_cache_store(c, key, "cubin", source_of(i), p, n), 0);
    free(p);
}

/* Store key `stored`; the entry files of it and of key `other` (path buffers of 2048). */
static void store_with_paths(fixture *f, int stored, char *stored_path, int other, char *other_path)
{
    store_key(&f->cache, stored);
    entry_file(f, stored, stored_path, 2048);
    entry_file(f, other, other_path, 2048);
}

/* Load key i: 1 with the right payload, 0 on a miss, -1 with a wrong one (no cmocka call: also for children). */
static int load_check(fj_disk_cache *c, int i, uint64_t source)
{
    char key[256];
    void *data = NULL;
    size_t size = 0, n;
    key_of(i, key, sizeof key);
    if (!fj_disk_cache_load(c, key, "cubin", source, &data, &size)) return data == NULL ? 0 : -1;
    unsigned char *want = payload_of(i, &n);
    int same = size == n && memcmp(data, want, n) == 0;
    free(want);
    free(data);
    return same ? 1 : -1;
}

/* The same in the test process: a wrong payload fails the test. */
static int load_key(fj_disk_cache *c, int i, uint64_t source)
{
    int r = load_check(c, i, source);
    assert_true(r >= 0);
    return r;
}

static void write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, size), (ssize_t)size);
    close(fd);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A miss whose note names `why` (NULL: a plain miss with no note). */
static void expect_miss(fixture *f, int i, const char *why)
{
    fj_disk_cache_stats s;
    memset(f->cache.stats.last_error, 0, sizeof f->cache.stats.last_error);
    assert_int_equal(load_key(&f->cache, i, 0), 0);
    fj_disk_cache_stats_get(&f->cache, &s);
    if (why && !strstr(s.last_error, why)) fail_msg("expected a note with \"%s\", got \"%s\"", why, s.last_error);
    if (!why) assert_string_equal(s.last_error, "");
}

/* ---------------------------------------------------------------------------------------------------
 * Damaged entries
 * ------------------------------------------------------------------------------------------------- */
/* Every single-bit flip and every shorter length of an entry is refused and the file deleted. */
static void test_every_flip_and_truncation(void **state)
{
    fixture *f = *state;
    char key[256], path[2048];
    size_t n, len;
    unsigned char *p = payload_of(0, &n);
    key_of(0, key, sizeof key);
    entry_file(f, 0, path, sizeof path);
    unsigned char *img = fj_disk_cache_entry_encode(key, "cubin", source_of(0), p, 40, &len); /* a short payload */
    assert_int_equal(fj_disk_cache_mkdirs(f->cache.entries_dir), 0);
    for (size_t bit = 0; bit < 8 * len; bit++) {
        img[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        write_file(path, img, len);
        assert_int_equal(load_key(&f->cache, 0, 0), 0);
        assert_false(exists(path));
        img[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    for (size_t cut = 0; cut < len; cut++) { /* cut = 0: a zero-length entry */
        write_file(path, img, cut);
        assert_int_equal(load_key(&f->cache, 0, 0), 0);
        assert_false(exists(path));
    }
    fj_disk_cache_stats s;
    fj_disk_cache_stats_get(&f->cache, &s);
    assert_int_equal(s.discarded, 9 * len);
    assert_int_equal(s.hits, 0);
    free(img);
    free(p);
}

/* Another key's entry (a foreign or renamed file) and an entry made from other PTX are refused. */
static void test_wrong_key_and_source(void **state)
{
    fixture *f = *state;
    char a[2048], b[2048], cmd[4200];
    store_with_paths(f, 1, a, 2, b);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
    assert_int_equal(system(cmd), 0);
    expect_miss(f, 2, "stored key differs");
    assert_false(exists(b));
    assert_int_equal(load_key(&f->cache, 1, source_of(1)), 1); /* the genuine one, its source checked */
    /* an entry of the same key compiled from other PTX: served unchecked, refused when the source is checked */
    char key[256];
    key_of(1, key, sizeof key);
    size_t n;
    unsigned char *p = payload_of(1, &n);
    assert_int_equal(fj_disk_cache_store(&f->cache, key, "cubin", source_of(5), p, n), 0);
    free(p);
    assert_int_equal(load_key(&f->cache, 1, source_of(1)), 0);
    expect_miss(f, 1, NULL); /* deleted by the refusal above */
}

/* A directory, a symlink and a FIFO where an entry should be: refused without following or blocking. */
static void test_not_a_file(void **state)
{
    fixture *f = *state;
    char path[2048], other[2048], inner[2100];
    store_with_paths(f, 3, other, 0, path);
    /* an empty directory: removed, then the key stores and loads */
    assert_int_equal(mkdir(path, 0755), 0);
    expect_miss(f, 0, "a directory");
    assert_false(exists(path));
    /* a directory with something in it: left, and a store fails softly naming it */
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(inner, sizeof inner, "%s/x", path);
    write_file(inner, "x", 1);
    expect_miss(f, 0, "a directory");
    char key[256];
    key_of(0, key, sizeof key);
    assert_int_equal(fj_disk_cache_store(&f->cache, key, "cubin", 0, "x", 1), -1);
    assert_non_null(strstr(f->cache.stats.last_error, "rename"));
    unlink(inner);
    rmdir(path);
    /* a symlink to a valid entry (of another key, then of its own key kept elsewhere): never followed */
    assert_int_equal(symlink(other, path), 0);
    expect_miss(f, 0, "symbolic link");
    assert_false(exists(path));
    assert_true(exists(other));
    /* a FIFO: not opened (it would block a reader) */
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_miss(f, 0, "not a regular file");
    assert_false(exists(path));
    store_key(&f->cache, 0);
    assert_int_equal(load_key(&f->cache, 0, source_of(0)), 1);
}

/* ---------------------------------------------------------------------------------------------------
 * The cache folder
 * ------------------------------------------------------------------------------------------------- */
static void test_missing_folder(void **state)
{
    fixture *f = *state;
    char dir[2048];
    fj_disk_cache c;
    snprintf(dir, sizeof dir, "%s/not/yet", f->root);
    assert_int_equal(fj_disk_cache_init(&c, 1, dir), FAJIT_OK);
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(fj_disk_cache_load(&c, "k", "cubin", 0, &data, &size), 0);
    assert_string_equal(c.stats.last_error, ""); /* absent: a plain miss */
    store_key(&c, 4); /* made on the first store */
    assert_int_equal(load_key(&c, 4, source_of(4)), 1);
    fj_disk_cache_fini(&c);
}

/* Directories anyone else can write, or another user owns, are not used: loads miss, stores fail. */
static void expect_refused(fixture *f, const char *why)
{
    char key[256];
    key_of(5, key, sizeof key);
    expect_miss(f, 5, why);
    assert_int_equal(fj_disk_cache_store(&f->cache, key, "cubin", 0, "x", 1), -1);
    assert_non_null(strstr(f->cache.stats.last_error, why));
}

static void test_writable_by_others(void **state)
{
    fixture *f = *state;
    store_key(&f->cache, 5);
    assert_int_equal(chmod(f->root, 0777), 0);
    expect_refused(f, "writable by others (mode 777)");
    assert_int_equal(chmod(f->root, 0775), 0);
    expect_refused(f, "writable by its group (mode 775)");
    assert_int_equal(chmod(f->root, 0755), 0);
    assert_int_equal(chmod(f->cache.entries_dir, 0757), 0);
    expect_refused(f, "kernels is writable by others");
    assert_int_equal(chmod(f->cache.entries_dir, 0755), 0);
    assert_int_equal(load_key(&f->cache, 5, source_of(5)), 1); /* trusted again: the entry is still good */
    /* kernels/ as a symlink to a directory of ours: not followed */
    char real[2100], cmd[4400];
    snprintf(real, sizeof real, "%s/elsewhere", f->root);
    snprintf(cmd, sizeof cmd, "mv '%s' '%s'", f->cache.entries_dir, real);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(symlink(real, f->cache.entries_dir), 0);
    expect_miss(f, 5, "kernels is a symbolic link or not a directory: not used");
}

static void test_foreign_owner(void **state)
{
    fixture *f = *state;
    store_key(&f->cache, 5);
    if (geteuid() == 0) { /* root can give the folder away */
        assert_int_equal(chown(f->root, 65534, 65534), 0);
        expect_refused(f, "owned by uid 65534, not by this user (uid 0)");
        assert_int_equal(chown(f->root, 0, 0), 0);
        assert_int_equal(chown(f->cache.entries_dir, 65534, 65534), 0);
        expect_refused(f, "kernels is owned by uid 65534");
        assert_int_equal(chown(f->cache.entries_dir, 0, 0), 0);
        /* an entry file of another user inside our folder */
        char path[2048];
        entry_file(f, 5, path, sizeof path);
        assert_int_equal(chown(path, 65534, 65534), 0);
        expect_miss(f, 5, "owned by another user");
        return;
    }
    /* not root: "/" is a folder another user (root) owns */
    fj_disk_cache c;
    assert_int_equal(fj_disk_cache_init(&c, 1, "/"), FAJIT_OK);
    void *data = NULL;
    size_t size = 0;
    assert_int_equal(fj_disk_cache_load(&c, "k", "cubin", 0, &data, &size), 0);
    assert_non_null(strstr(c.stats.last_error, "owned by uid 0"));
    fj_disk_cache_fini(&c);
}

/* A read-only folder: entries still load, stores fail softly, a corrupt entry is a miss every time.
 * Root ignores permission bits, so as root this runs in a child that became uid 65534. */
static int read_only_child(const char *root)
{
    fj_disk_cache c;
    char path[2048];
    if (fj_disk_cache_init(&c, 1, root) != FAJIT_OK) return 10;
    if (load_check(&c, 1, source_of(1)) != 1) return 11;
    char key[256];
    key_of(2, key, sizeof key);
    if (fj_disk_cache_store(&c, key, "cubin", 0, "x", 1) != -1) return 12;
    if (!strstr(c.stats.last_error, "create temporary file")) return 13;
    fj_disk_cache_entry_path(&c, key, "cubin", path, sizeof path);
    for (int i = 0; i < 2; i++) /* the corrupt entry cannot be deleted: a miss each time */
        if (load_check(&c, 2, 0) != 0) return 14;
    fj_disk_cache_fini(&c);
    return 0;
}

static void test_read_only_folder(void **state)
{
    fixture *f = *state;
    char path[2048];
    store_key(&f->cache, 1);
    entry_file(f, 2, path, sizeof path);
    write_file(path, "garbage", 7);
    int as_root = geteuid() == 0;
    if (as_root) {
        char cmd[2100];
        snprintf(cmd, sizeof cmd, "chown -R 65534:65534 '%s'", f->root);
        assert_int_equal(system(cmd), 0);
    }
    assert_int_equal(chmod(f->cache.entries_dir, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(as_root && (setgid(65534) != 0 || setuid(65534) != 0) ? 9 : read_only_child(f->root));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(chmod(f->cache.entries_dir, 0755), 0);
    assert_true(exists(path)); /* it could not be deleted */
}

/* ---------------------------------------------------------------------------------------------------
 * 8 processes x 200 get-or-build calls on shared keys, damaging entries in between
 * ------------------------------------------------------------------------------------------------- */
#define PROCS 8
#define CALLS 200

/* Damage key i's entry in one of 7 ways (r picks). */
static void damage(fj_disk_cache *c, int i, unsigned r)
{
    char path[2048], other[2048], key[256];
    key_of(i, key, sizeof key);
    fj_disk_cache_entry_path(c, key, "cubin", path, sizeof path);
    key_of((i + 1) % N_KEYS, key, sizeof key);
    fj_disk_cache_entry_path(c, key, "cubin", other, sizeof other);
    int fd;
    switch (r % 7) {
    case 0: if (truncate(path, (off_t)(r % 300)) != 0) { /* no entry: nothing to damage */ } break;
    case 1: if (truncate(path, 0) != 0) { /* no entry: nothing to damage */ } break;
    case 2:                                                  /* one byte flipped in place */
        if ((fd = open(path, O_RDWR)) >= 0) {
            unsigned char b = 0;
            off_t at = (off_t)(r % 1600);
            if (pread(fd, &b, 1, at) == 1) {
                b ^= (unsigned char)(1u << (r % 8));
                (void)!pwrite(fd, &b, 1, at);
            }
            close(fd);
        }
        break;
    case 3: /* another key's entry renamed into its place */
        if (link(other, path) != 0 && errno == EEXIST) {
            char tmp[2100];
            snprintf(tmp, sizeof tmp, "%s.dmg%d", path, (int)getpid());
            if (link(other, tmp) == 0 && rename(tmp, path) != 0) unlink(tmp);
        }
        break;
    case 4: unlink(path), (void)mkdir(path, 0755); break;     /* an (empty) directory */
    case 5: unlink(path), (void)!symlink(other, path); break; /* a symlink to another entry */
    default: /* garbage of a plausible size */
        if ((fd = open(path, O_WRONLY | O_TRUNC)) >= 0) {
            char junk[512];
            memset(junk, (int)(r & 0xff), sizeof junk);
            (void)!write(fd, junk, sizeof junk);
            close(fd);
        }
        break;
    }
}

/* One process: CALLS get-or-builds; before each, one time in three, a damaged entry. Exit status: 0, or
 * what went wrong (2: a wrong payload, 3: a store that failed for no reason the abuse explains). */
static int abuse_child(const char *root, int id)
{
    fj_disk_cache c;
    unsigned r = 2654435761u * (unsigned)(id + 1);
    if (fj_disk_cache_init(&c, 1, root) != FAJIT_OK) return 1;
    for (int call = 0; call < CALLS; call++) {
        r = r * 1103515245u + 12345u;
        int i = (int)((r >> 8) % N_KEYS);
        if ((r >> 4) % 3 == 0) damage(&c, (int)((r >> 12) % N_KEYS), r >> 16);
        int got = load_check(&c, i, call % 2 ? source_of(i) : 0);
        if (got < 0) return 2;
        if (got == 0) { /* build: the payload the key must have, stored */
            char key[256];
            size_t n;
            unsigned char *want = payload_of(i, &n);
            key_of(i, key, sizeof key);
            int failed = fj_disk_cache_store(&c, key, "cubin", source_of(i), want, n) != 0;
            free(want);
            if (failed && !strstr(c.stats.last_error, "rename")) return 3; /* rename: a directory in its place */
        }
    }
    fj_disk_cache_stats st;
    fj_disk_cache_stats_get(&c, &st);
    printf("process %d: %u hits, %u misses (%u damaged entries discarded), %u rebuilt and stored, %u stores failed\n",
           id, st.hits, st.misses, st.discarded, st.stores, st.store_failures);
    fflush(stdout);
    fj_disk_cache_fini(&c);
    return 0;
}

static int count_temp_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strncmp(e->d_name, ".tmp-", 5) == 0;
    if (d) closedir(d);
    return n;
}

static void test_processes_with_damage(void **state)
{
    fixture *f = *state;
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) _exit(abuse_child(f->root, p));
    }
    for (int p = 0; p < PROCS; p++) {
        int status = 0;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("process %d: %s %d", p, WIFEXITED(status) ? "exit" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    assert_int_equal(count_temp_files(f->cache.entries_dir), 0);
    for (int i = 0; i < N_KEYS; i++) { /* whatever is left is a right entry or a miss; then it heals */
        if (!load_key(&f->cache, i, source_of(i))) {
            char path[2048];
            entry_file(f, i, path, sizeof path);
            rmdir(path); /* a directory left by the last damage (its load reported it) */
            store_key(&f->cache, i);
            assert_int_equal(load_key(&f->cache, i, source_of(i)), 1);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FJ_CACHE_TEST(test_every_flip_and_truncation),
        FJ_CACHE_TEST(test_wrong_key_and_source),
        FJ_CACHE_TEST(test_not_a_file),
        FJ_CACHE_TEST(test_missing_folder),
        FJ_CACHE_TEST(test_writable_by_others),
        FJ_CACHE_TEST(test_foreign_owner),
        FJ_CACHE_TEST(test_read_only_folder),
        FJ_CACHE_TEST(test_processes_with_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
