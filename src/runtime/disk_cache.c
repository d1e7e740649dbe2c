/*
 * disk_cache.c - the persistent kernel cache (format and rules in disk_cache.h).
 *
 * POSIX only: openat/read/write/fsync/renameat on a checked directory descriptor. Nothing here fails a
 * kernel request: loads report hit or miss, stores report 0 or -1, and every failure is recorded in the
 * stats for diagnostics.
 */
#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fj_source_digest.h"
#include "base/env_word.h"
#include "base/error.h"
#include "hash.h"

#define HEADER_BYTES 40
#define CHECKSUM_AT 32
#define WHY_MAX (FJ_DISK_CACHE_PATH_MAX + 256) /* a reason naming a path */
#define PAYLOAD_MAX ((uint64_t)1 << 30) /* larger lengths are corruption: cubins are ~100 KiB */
#define ENTRY_MAX (HEADER_BYTES + FJ_DISK_CACHE_KEY_MAX + 64 + PAYLOAD_MAX)
static const unsigned char k_magic[8] = {'F', 'A', 'J', 'I', 'T', 'K', 'C', '\n'};

/* ---------------------------------------------------------------------------------------------------
 * Small helpers: stats notes, little-endian fields, whole reads and writes
 * ------------------------------------------------------------------------------------------------- */
/* Count one event (counter may be NULL) and, when fmt is given, keep it as the last error. */
static void cache_note(fj_disk_cache *c, unsigned *counter, const char *fmt, ...) FJ_PRINTF(3, 4);
static void cache_note(fj_disk_cache *c, unsigned *counter, const char *fmt, ...)
{
    pthread_mutex_lock(&c->lock);
    if (counter) (*counter)++;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->stats.last_error, sizeof c->stats.last_error, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&c->lock);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int write_all(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        size -= (size_t)w;
    }
    return 0;
}

/* Read exactly size bytes; -1 on error or early end of file. */
static int read_all(int fd, void *data, size_t size)
{
    char *p = data;
    while (size > 0) {
        ssize_t r = read(fd, p, size);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        size -= (size_t)r;
    }
    return 0;
}

int fj_disk_cache_mkdirs(const char *path)
{
    char buf[FJ_DISK_CACHE_PATH_MAX];
    struct stat st;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    if (stat(buf, &st) != 0) return -1;
    return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

/* ---------------------------------------------------------------------------------------------------
 * Setup: where the cache lives
 * ------------------------------------------------------------------------------------------------- */
/* FAJIT_CACHE's words (unset: on) and FAJIT_CACHE_VERIFY's (unset: 0). */
static const fj_env_word k_cache_words[] = {
    {"1", 1, "on"}, {"on", 1, NULL}, {"true", 1, NULL}, {"yes", 1, NULL}, {"ON", 1, NULL}, {"TRUE", 1, NULL},
    {"YES", 1, NULL}, {"0", 0, "off"}, {"off", 0, NULL}, {"false", 0, NULL}, {"no", 0, NULL}, {"OFF", 0, NULL},
    {"FALSE", 0, NULL}, {"NO", 0, NULL}, {NULL, 0, NULL}};
static const fj_env_word k_verify_words[] = {{"0", 0, "a load checks the entry"},
                                             {"1", 1, "and generates the PTX again to check its hash"},
                                             {NULL, 0, NULL}};

/* The default root: $FAJIT_CACHE_DIR, $XDG_CACHE_HOME/fajit (absolute only), $HOME/.cache/fajit. */
static int cache_default_dir(char *buf, size_t size, const char **why)
{
    const char *v = getenv("FAJIT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (v && v[0]) n = snprintf(buf, size, "%s", v);
    else if (xdg && xdg[0] == '/') {
        int len = (int)strlen(xdg);
        while (len > 0 && xdg[len - 1] == '/') len--;
        n = snprintf(buf, size, "%.*s/fajit", len, xdg);
    }
    else if (home && home[0]) n = snprintf(buf, size, "%s/.cache/fajit", home);
    else return *why = "none of FAJIT_CACHE_DIR, XDG_CACHE_HOME (absolute) or HOME is set", -1;
    if (n < 0 || (size_t)n >= size) /* FJ_DISK_CACHE_DIR_MAX */
        return *why = "the cache directory path is longer than the 960 characters a cache directory may have", -1;
    return 0;
}

fajit_status fj_disk_cache_init(fj_disk_cache *c, int setting, const char *dir)
{
    const char *why = NULL;
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    if (setting < -1 || setting > 1)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "disk_cache = %d: must be -1 (from FAJIT_CACHE), 0 (off) or 1 (on)",
                       setting);
    if (dir && dir[0] && strlen(dir) > FJ_DISK_CACHE_DIR_MAX)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cache_dir = \"%.64s...\": %zu characters, more than the %d a cache "
                                                   "directory may have (the paths of its files must fit in %d bytes)",
                       dir, strlen(dir), FJ_DISK_CACHE_DIR_MAX, FJ_DISK_CACHE_PATH_MAX);
    int on = 1;
    fajit_status st = setting == -1 ? fj_env_word_parse("FAJIT_CACHE", getenv("FAJIT_CACHE"), k_cache_words, 1, "on", &on)
                                    : FAJIT_OK;
    if (st != FAJIT_OK || setting == 0 || !on) return st;
    st = fj_env_word_parse("FAJIT_CACHE_VERIFY", getenv("FAJIT_CACHE_VERIFY"), k_verify_words, 0, "0", &c->verify);
    if (st != FAJIT_OK) return st;
    if (dir && dir[0]) snprintf(c->dir, sizeof c->dir, "%s", dir);
    else if (cache_default_dir(c->dir, FJ_DISK_CACHE_DIR_MAX + 1, &why) != 0) {
        c->dir[0] = '\0';
        snprintf(c->stats.last_error, sizeof c->stats.last_error, "disk cache off: %s", why);
        return FAJIT_OK;
    }
    size_t len = strlen(c->dir);
    while (len > 1 && c->dir[len - 1] == '/') c->dir[--len] = '\0';
    int n = snprintf(c->entries_dir, sizeof c->entries_dir, "%s/kernels", strcmp(c->dir, "/") == 0 ? "" : c->dir);
    c->enabled = n > 0 && (size_t)n < sizeof c->entries_dir; /* always: the room was checked above */
    return FAJIT_OK;
}

void fj_disk_cache_fini(fj_disk_cache *c)
{
    if (c) pthread_mutex_destroy(&c->lock);
}

int fj_disk_cache_key(char *buf, size_t size, const char *config_text, const char *target_sm, const char *compiler)
{
    return snprintf(buf, size,
                    "fajit kernel\nformat: %u\nconfig: %s\ncodegen: %s, sources %s\ntarget: %s\ncompiler: %s\n",
                    FJ_DISK_CACHE_FORMAT, config_text, FJ_CODEGEN_VERSION, FJ_SOURCE_DIGEST, target_sm, compiler);
}

/* The file name of an entry inside kernels/ (no directory). */
static void entry_name(const char *key, const char *kind, char *buf, size_t size)
{
    char hex[FJ_HASH128_HEX_SIZE];
    fj_hash128_hex(fj_hash128_of(key, strlen(key)), hex);
    snprintf(buf, size, "%s.%s", hex, kind);
}

void fj_disk_cache_entry_path(const fj_disk_cache *c, const char *key, const char *kind, char *buf, size_t size)
{
    char name[FJ_HASH128_HEX_SIZE + 32];
    entry_name(key, kind, name, sizeof name);
    snprintf(buf, size, "%s/%s", c->entries_dir, name);
}

void fj_disk_cache_stats_get(fj_disk_cache *c, fj_disk_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}

/* ---------------------------------------------------------------------------------------------------
 * The entry image: encode and decode in memory
 * ------------------------------------------------------------------------------------------------- */
/* XXH64 of the image with the checksum field read as zero. */
static uint64_t image_checksum(const unsigned char *img, size_t len)
{
    unsigned char head[HEADER_BYTES];
    memcpy(head, img, HEADER_BYTES);
    memset(head + CHECKSUM_AT, 0, 8);
    uint64_t h = fj_xxh64(head, HEADER_BYTES, 0);
    return fj_xxh64(img + HEADER_BYTES, len - HEADER_BYTES, h);
}

unsigned char *fj_disk_cache_entry_encode(const char *key, const char *kind, uint64_t source, const void *payload,
                                          size_t size, size_t *len)
{
    size_t key_len = strlen(key), kind_len = strlen(kind), full = key_len + 1 + kind_len;
    unsigned char *img = malloc(HEADER_BYTES + full + size);
    if (!img) return NULL;
    memcpy(img, k_magic, sizeof k_magic);
    put_le(img + 8, FJ_DISK_CACHE_FORMAT, 4);
    put_le(img + 12, full, 4);
    put_le(img + 16, size, 8);
    put_le(img + 24, source, 8);
    memcpy(img + HEADER_BYTES, key, key_len);
    img[HEADER_BYTES + key_len] = '\n';
    memcpy(img + HEADER_BYTES + key_len + 1, kind, kind_len);
    if (size) memcpy(img + HEADER_BYTES + full, payload, size);
    *len = HEADER_BYTES + full + size;
    put_le(img + CHECKSUM_AT, image_checksum(img, *len), 8);
    return img;
}

const char *fj_disk_cache_entry_decode(const unsigned char *img, size_t len, const char *key, const char *kind,
                                       uint64_t source, size_t *payload_off, size_t *payload_len)
{
    size_t key_len = strlen(key), kind_len = strlen(kind), full = key_len + 1 + kind_len;
    if (len < HEADER_BYTES) return "truncated header";
    if (memcmp(img, k_magic, sizeof k_magic) != 0) return "bad magic";
    if (get_le(img + 8, 4) != FJ_DISK_CACHE_FORMAT) return "unknown format version";
    if (get_le(img + 12, 4) != full) return "key length differs from the requested key";
    uint64_t payload = get_le(img + 16, 8);
    if (payload > PAYLOAD_MAX) return "payload length out of range";
    if ((uint64_t)len != HEADER_BYTES + full + payload) return "file size disagrees with header";
    const unsigned char *k = img + HEADER_BYTES;
    if (memcmp(k, key, key_len) != 0 || k[key_len] != '\n' || memcmp(k + key_len + 1, kind, kind_len) != 0)
        return "stored key differs from the requested key";
    if (get_le(img + CHECKSUM_AT, 8) != image_checksum(img, len)) return "checksum mismatch";
    if (source && get_le(img + 24, 8) != source) return "made from another source (its PTX hash differs)";
    *payload_off = HEADER_BYTES + full;
    *payload_len = (size_t)payload;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Trust: the directories and files entries live in
 * ------------------------------------------------------------------------------------------------- */
/* 0 when fd is a directory of this user that no one else may write; else -1 and why[] says what it is. */
static int dir_check(int fd, const char *path, char *why, size_t size)
{
    struct stat st;
    unsigned uid = (unsigned)geteuid();
    if (fstat(fd, &st) != 0) snprintf(why, size, "cache directory %s cannot be examined: not used", path);
    else if (!S_ISDIR(st.st_mode)) snprintf(why, size, "cache directory %s is not a directory: not used", path);
    else if (st.st_uid != uid)
        snprintf(why, size, "cache directory %s is owned by uid %u, not by this user (uid %u): not used", path,
                 (unsigned)st.st_uid, uid);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, size, "cache directory %s is writable by %s (mode %03o): not used", path,
                 st.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st.st_mode & 0777));
    else return 0;
    return -1;
}

/*
 * A descriptor of <root>/kernels after checking both directories (trust rules in disk_cache.h); create: make
 * them when missing. -1 when they are absent (*reason NULL: a plain miss) or refused / unusable (*reason =
 * why, which says so).
 */
static int entries_open(fj_disk_cache *c, int create, char *why, size_t size, const char **reason)
{
    char ebuf[128];
    *reason = why;
    if (create && fj_disk_cache_mkdirs(c->entries_dir) != 0) {
        snprintf(why, size, "create directory %s: %s", c->entries_dir, fj_errno_text(errno, ebuf, sizeof ebuf));
        return -1;
    }
    int root = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1;
    if (root < 0) {
        if (errno == ENOENT) *reason = NULL;
        snprintf(why, size, "open %s: %s", c->dir, fj_errno_text(errno, ebuf, sizeof ebuf));
        return -1;
    }
    if (dir_check(root, c->dir, why, size) == 0) {
        fd = openat(root, "kernels", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) *reason = NULL;
        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
            snprintf(why, size, "cache directory %s is a symbolic link or not a directory: not used", c->entries_dir);
        else if (fd < 0) snprintf(why, size, "open %s: %s", c->entries_dir, fj_errno_text(errno, ebuf, sizeof ebuf));
        else if (dir_check(fd, c->entries_dir, why, size) != 0) close(fd), fd = -1;
    }
    close(root);
    if (fd >= 0) *reason = NULL;
    return fd;
}

/* ---------------------------------------------------------------------------------------------------
 * Load: verify everything, discard what fails
 * ------------------------------------------------------------------------------------------------- */
/* Delete a bad entry, unless the name meanwhile holds another file (a writer's fresh rename). An empty
 * directory in an entry's place is removed too; anything else that is not a file is left and reported. */
static void entry_discard(fj_disk_cache *c, int dir, const char *name, const struct stat *opened, const char *why)
{
    struct stat now;
    if (fstatat(dir, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == opened->st_ino &&
        now.st_dev == opened->st_dev)
        (void)unlinkat(dir, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
    cache_note(c, &c->stats.discarded, "discarded %s/%s: %s", c->entries_dir, name, why);
}

/* Open an entry for reading: its descriptor and stat, or -1 with *why (NULL: absent). A symlink, FIFO,
 * device or directory is never opened for reading (O_NOFOLLOW, O_NONBLOCK, then the type). */
static int entry_open(int dir, const char *name, struct stat *st, const char **why)
{
    *why = NULL;
    if (fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW) != 0) return -1; /* absent (or gone): a miss */
    if (S_ISLNK(st->st_mode)) return *why = "a symbolic link, not an entry", -1;
    if (S_ISDIR(st->st_mode)) return *why = "a directory, not an entry", -1;
    if (!S_ISREG(st->st_mode)) return *why = "not a regular file", -1;
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return *why = errno == ENOENT ? NULL : "cannot be opened", -1; /* ENOENT: removed meanwhile */
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) *why = "not a regular file";
    else if (st->st_uid != geteuid()) *why = "owned by another user";
    else if ((uint64_t)st->st_size > ENTRY_MAX) *why = "larger than any entry";
    if (*why) close(fd);
    return *why ? -1 : fd;
}

/* Read and verify an open entry: NULL and the payload (moved to the front of the malloc'd image, NUL
 * after it), or the reason it is bad. */
static const char *entry_read(int fd, const struct stat *st, const char *key, const char *kind, uint64_t source,
                              void **payload, size_t *size)
{
    size_t len = (size_t)st->st_size, off = 0, n = 0;
    unsigned char *img = malloc(len + 1);
    if (!img) return "out of memory";
    const char *bad = read_all(fd, img, len) != 0 ? "shorter than its size (truncated while read)"
                                                   : fj_disk_cache_entry_decode(img, len, key, kind, source, &off, &n);
    if (bad) {
        free(img);
        return bad;
    }
    memmove(img, img + off, n);
    img[n] = '\0';
    *payload = img;
    *size = n;
    return NULL;
}

/* counted = 0: a metadata entry (compiler stamp), left out of the hit/miss/store counters. */
#define COUNTER(c, field, counted) ((counted) ? &(c)->stats.field : NULL)

static int cache_load(fj_disk_cache *c, const char *key, const char *kind, uint64_t source, void **payload,
                      size_t *size, int counted)
{
    char name[FJ_HASH128_HEX_SIZE + 32], why[WHY_MAX];
    const char *refused = NULL, *bad = NULL;
    struct stat st;
    if (!c->enabled) return 0;
    int dir = entries_open(c, 0, why, sizeof why, &refused);
    if (dir < 0) {
        cache_note(c, COUNTER(c, misses, counted), refused ? "%s" : NULL, why);
        return 0;
    }
    entry_name(key, kind, name, sizeof name);
    int fd = entry_open(dir, name, &st, &bad);
    if (fd >= 0) {
        bad = entry_read(fd, &st, key, kind, source, payload, size);
        close(fd);
    }
    if (fd >= 0 && !bad) cache_note(c, COUNTER(c, hits, counted), NULL);
    else if (bad && strcmp(bad, "out of memory") == 0) cache_note(c, NULL, "cannot read %s/%s: %s", c->entries_dir, name, bad);
    else if (bad) entry_discard(c, dir, name, &st, bad);
    if (fd < 0 || bad) cache_note(c, COUNTER(c, misses, counted), NULL);
    close(dir);
    return fd >= 0 && !bad;
}

int fj_disk_cache_load(fj_disk_cache *c, const char *key, const char *kind, uint64_t source, void **payload,
                       size_t *size)
{
    return cache_load(c, key, kind, source, payload, size, 1);
}

int fj_disk_cache_load_meta(fj_disk_cache *c, const char *key, const char *kind, void **payload, size_t *size)
{
    return cache_load(c, key, kind, 0, payload, size, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Store: temp file, fsync, rename - all inside the checked directory
 * ------------------------------------------------------------------------------------------------- */
/* Create a temporary file next to `name` that no one else has opened (O_EXCL, fresh name). */
static int temp_create(int dir, const char *name, char *tmp, size_t size)
{
    static unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned n = __atomic_add_fetch(&counter, 1u, __ATOMIC_RELAXED);
        snprintf(tmp, size, ".tmp-%s-%ld-%u-%lx", name, (long)getpid(), n, (unsigned long)ts.tv_nsec);
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

/* Write the image to a fresh temp file in dir, make it durable and rename it onto name. Returns NULL, or
 * the step that failed (errno set); never leaves the temp file behind. */
static const char *entry_publish(int dir, const char *name, const unsigned char *img, size_t len)
{
    char tmp[FJ_HASH128_HEX_SIZE + 96];
    int fd = temp_create(dir, name, tmp, sizeof tmp);
    if (fd < 0) return "create temporary file";
    const char *step = NULL;
    if (write_all(fd, img, len) != 0 || fchmod(fd, 0644) != 0 || fsync(fd) != 0) step = "write temporary file";
    int err = errno;
    if (close(fd) != 0 && !step) step = "close temporary file", err = errno;
    if (!step && renameat(dir, tmp, dir, name) != 0) step = "rename temporary file", err = errno;
    if (step) unlinkat(dir, tmp, 0);
    else (void)fsync(dir); /* the rename durable (best effort: some file systems refuse) */
    errno = err;
    return step;
}

static int cache_store(fj_disk_cache *c, const char *key, const char *kind, uint64_t source, const void *payload,
                       size_t size, int counted)
{
    char name[FJ_HASH128_HEX_SIZE + 32], why[WHY_MAX], ebuf[128];
    const char *refused = NULL, *step = NULL;
    size_t len = 0;
    if (!c->enabled) return -1;
    entry_name(key, kind, name, sizeof name);
    int dir = entries_open(c, 1, why, sizeof why, &refused);
    if (dir < 0) {
        cache_note(c, COUNTER(c, store_failures, counted), "cannot store %s: %s", name, refused ? why : "no directory");
        return -1;
    }
    unsigned char *img = fj_disk_cache_entry_encode(key, kind, source, payload, size, &len);
    step = img ? entry_publish(dir, name, img, len) : (errno = ENOMEM, "allocate the entry");
    int err = errno;
    free(img);
    close(dir);
    if (step) {
        cache_note(c, COUNTER(c, store_failures, counted), "cannot store %s/%s (%s): %s", c->entries_dir, name, step,
                   fj_errno_text(err, ebuf, sizeof ebuf));
        return -1;
    }
    cache_note(c, COUNTER(c, stores, counted), NULL);
    return 0;
}

int fj_disk_cache_store(fj_disk_cache *c, const char *key, const char *kind, uint64_t source, const void *payload,
                        size_t size)
{
    return cache_store(c, key, kind, source, payload, size, 1);
}

int fj_disk_cache_store_meta(fj_disk_cache *c, const char *key, const char *kind, const void *payload, size_t size)
{
    return cache_store(c, key, kind, 0, payload, size, 0);
}

void fj_disk_cache_invalidate(fj_disk_cache *c, const char *key, const char *kind, const char *why)
{
    char name[FJ_HASH128_HEX_SIZE + 32], buf[WHY_MAX];
    const char *refused = NULL;
    if (!c->enabled) return;
    int dir = entries_open(c, 0, buf, sizeof buf, &refused);
    if (dir < 0) return;
    entry_name(key, kind, name, sizeof name);
    (void)unlinkat(dir, name, 0);
    close(dir);
    cache_note(c, &c->stats.discarded, "discarded %s/%s: %s", c->entries_dir, name, why ? why : "invalidated");
}
