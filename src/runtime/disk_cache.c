/*
 * disk_cache.c - the persistent kernel cache (format and rules in disk_cache.h).
 *
 * POSIX only: open/read/write/fsync/rename/mkstemp. Nothing here fails a kernel request: loads report
 * hit or miss, stores report 0 or -1, and every failure is recorded in the stats for diagnostics.
 */
#include "disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "error.h"
#include "hash.h"

#define HEADER_BYTES 32
#define PAYLOAD_MAX ((uint64_t)1 << 30) /* larger lengths are corruption: cubins are ~100 KiB */
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
static int env_says_off(void)
{
    const char *v = getenv("FAJIT_CACHE");
    if (!v) return 0;
    return strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0 ||
           strcmp(v, "OFF") == 0 || strcmp(v, "FALSE") == 0 || strcmp(v, "NO") == 0;
}

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
    if (n < 0 || (size_t)n >= size) return *why = "the cache directory path is too long", -1;
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
    if (dir && dir[0] && strlen(dir) + sizeof "/kernels" > sizeof c->dir)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cache_dir = \"%.64s...\": %zu characters, longer than %zu",
                       dir, strlen(dir), sizeof c->dir - sizeof "/kernels");
    if (setting == 0 || (setting == -1 && env_says_off())) return FAJIT_OK;
    if (dir && dir[0]) snprintf(c->dir, sizeof c->dir, "%s", dir);
    else if (cache_default_dir(c->dir, sizeof c->dir - sizeof "/kernels", &why) != 0) {
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
    return snprintf(buf, size, "fajit kernel\nformat: %u\nconfig: %s\ncodegen: %s\ntarget: %s\ncompiler: %s\n",
                    FJ_DISK_CACHE_FORMAT, config_text, FJ_CODEGEN_VERSION, target_sm, compiler);
}

void fj_disk_cache_entry_path(const fj_disk_cache *c, const char *key, const char *kind, char *buf, size_t size)
{
    char hex[FJ_HASH128_HEX_SIZE];
    fj_hash128_hex(fj_hash128_of(key, strlen(key)), hex);
    snprintf(buf, size, "%s/%s.%s", c->entries_dir, hex, kind);
}

void fj_disk_cache_stats_get(fj_disk_cache *c, fj_disk_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Load: verify everything, discard what fails
 * ------------------------------------------------------------------------------------------------- */

/* The stored key: key text, newline, kind (malloc'd). */
static char *entry_key(const char *key, const char *kind)
{
    size_t n = strlen(key) + strlen(kind) + 2;
    char *full = malloc(n);
    if (full) snprintf(full, n, "%s\n%s", key, kind);
    return full;
}

/* Delete a bad entry, unless the path meanwhile holds another file (a writer's fresh rename). */
static void entry_discard(fj_disk_cache *c, const char *path, const struct stat *opened, const char *why)
{
    struct stat now;
    if (stat(path, &now) == 0 && now.st_ino == opened->st_ino && now.st_dev == opened->st_dev) unlink(path);
    cache_note(c, &c->stats.discarded, "discarded %s: %s", path, why);
}

/* Check the header and key of an open entry; on success *payload_len / *checksum are set. */
static const char *entry_check_header(int fd, const struct stat *st, const char *full_key, uint64_t *payload_len,
                                      uint64_t *checksum)
{
    unsigned char h[HEADER_BYTES];
    size_t key_len = strlen(full_key);
    if ((uint64_t)st->st_size < HEADER_BYTES) return "truncated header";
    if (read_all(fd, h, sizeof h) != 0) return "header unreadable";
    if (memcmp(h, k_magic, sizeof k_magic) != 0) return "bad magic";
    if (get_le(h + 8, 4) != FJ_DISK_CACHE_FORMAT) return "unknown format version";
    if (get_le(h + 12, 4) != key_len) return "key length differs from the requested key";
    *payload_len = get_le(h + 16, 8);
    *checksum = get_le(h + 24, 8);
    if (*payload_len > PAYLOAD_MAX) return "payload length out of range";
    if ((uint64_t)st->st_size != HEADER_BYTES + key_len + *payload_len) return "file size disagrees with header";
    char *stored = malloc(key_len + 1);
    if (!stored) return "out of memory";
    int same = read_all(fd, stored, key_len) == 0 && memcmp(stored, full_key, key_len) == 0;
    free(stored);
    return same ? NULL : "stored key differs from the requested key";
}

/* Read and verify an open entry. Returns NULL and fills *payload and *size, or the reason it is bad. */
static const char *entry_read(int fd, const struct stat *st, const char *full_key, void **payload, size_t *size)
{
    uint64_t len = 0, sum = 0;
    const char *bad = entry_check_header(fd, st, full_key, &len, &sum);
    if (bad) return bad;
    unsigned char *data = malloc((size_t)len + 1);
    if (!data) return "out of memory";
    bad = read_all(fd, data, (size_t)len) != 0                ? "payload unreadable"
          : fj_checksum64(data, (size_t)len) != sum ? "payload checksum mismatch"
                                                    : NULL;
    if (bad) {
        free(data);
        return bad;
    }
    data[len] = 0;
    *payload = data;
    *size = (size_t)len;
    return NULL;
}

/* counted = 0: a metadata entry (compiler stamp), left out of the hit/miss/store counters. */
#define COUNTER(c, field, counted) ((counted) ? &(c)->stats.field : NULL)

static int cache_load(fj_disk_cache *c, const char *key, const char *kind, void **payload, size_t *size, int counted)
{
    char path[FJ_DISK_CACHE_PATH_MAX + 64], ebuf[128];
    struct stat st;
    if (!c->enabled) return 0;
    fj_disk_cache_entry_path(c, key, kind, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT) cache_note(c, COUNTER(c, misses, counted), NULL);
        else cache_note(c, COUNTER(c, misses, counted), "cannot open %s: %s", path, fj_errno_text(err, ebuf, sizeof ebuf));
        return 0;
    }
    char *full = entry_key(key, kind);
    const char *bad = !full ? "out of memory" : fstat(fd, &st) != 0 ? "fstat failed"
                                                                     : entry_read(fd, &st, full, payload, size);
    close(fd);
    free(full);
    if (!bad) {
        cache_note(c, COUNTER(c, hits, counted), NULL);
        return 1;
    }
    if (strcmp(bad, "out of memory") == 0 || strcmp(bad, "fstat failed") == 0)
        cache_note(c, NULL, "cannot read %s: %s", path, bad);
    else
        entry_discard(c, path, &st, bad);
    cache_note(c, COUNTER(c, misses, counted), NULL);
    return 0;
}

int fj_disk_cache_load(fj_disk_cache *c, const char *key, const char *kind, void **payload, size_t *size)
{
    return cache_load(c, key, kind, payload, size, 1);
}

int fj_disk_cache_load_meta(fj_disk_cache *c, const char *key, const char *kind, void **payload, size_t *size)
{
    return cache_load(c, key, kind, payload, size, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Store: temp file, fsync, rename
 * ------------------------------------------------------------------------------------------------- */

/* Write header, key and payload to fd and make them durable. 0 or -1 (errno set). */
static int entry_write(int fd, const char *full_key, const void *payload, size_t size)
{
    unsigned char h[HEADER_BYTES];
    size_t key_len = strlen(full_key);
    memcpy(h, k_magic, sizeof k_magic);
    put_le(h + 8, FJ_DISK_CACHE_FORMAT, 4);
    put_le(h + 12, key_len, 4);
    put_le(h + 16, size, 8);
    put_le(h + 24, fj_checksum64(payload, size), 8);
    if (write_all(fd, h, sizeof h) != 0 || write_all(fd, full_key, key_len) != 0 ||
        write_all(fd, payload, size) != 0)
        return -1;
    if (fchmod(fd, 0644) != 0) return -1;
    return fsync(fd);
}

/* Make the rename durable (best effort: some file systems refuse fsync on a directory). */
static void dir_sync(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

/* Write a whole entry to a fresh temp file in the entries directory and rename it to path. Returns NULL,
 * or the step that failed (errno set); never leaves the temp file behind. */
static const char *entry_publish(fj_disk_cache *c, const char *path, const char *full_key, const void *payload,
                                 size_t size)
{
    char tmp[FJ_DISK_CACHE_PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", c->entries_dir, strrchr(path, '/') + 1);
    if (fj_disk_cache_mkdirs(c->entries_dir) != 0) return "create directory";
    int fd = mkstemp(tmp);
    if (fd < 0) return "create temporary file";
    const char *step = NULL;
    if (entry_write(fd, full_key, payload, size) != 0) step = "write temporary file";
    int err = errno;
    if (close(fd) != 0 && !step) {
        step = "close temporary file";
        err = errno;
    }
    if (!step && rename(tmp, path) != 0) {
        step = "rename temporary file";
        err = errno;
    }
    if (step) unlink(tmp);
    errno = err;
    return step;
}

static int cache_store(fj_disk_cache *c, const char *key, const char *kind, const void *payload, size_t size,
                       int counted)
{
    char path[FJ_DISK_CACHE_PATH_MAX + 64], ebuf[128];
    if (!c->enabled) return -1;
    fj_disk_cache_entry_path(c, key, kind, path, sizeof path);
    char *full = entry_key(key, kind);
    const char *step = full ? entry_publish(c, path, full, payload, size) : "allocate key";
    int err = full ? errno : ENOMEM;
    free(full);
    if (step) {
        cache_note(c, COUNTER(c, store_failures, counted), "cannot store %s (%s): %s", path, step,
                   fj_errno_text(err, ebuf, sizeof ebuf));
        return -1;
    }
    dir_sync(c->entries_dir);
    cache_note(c, COUNTER(c, stores, counted), NULL);
    return 0;
}

int fj_disk_cache_store(fj_disk_cache *c, const char *key, const char *kind, const void *payload, size_t size)
{
    return cache_store(c, key, kind, payload, size, 1);
}

int fj_disk_cache_store_meta(fj_disk_cache *c, const char *key, const char *kind, const void *payload, size_t size)
{
    return cache_store(c, key, kind, payload, size, 0);
}

void fj_disk_cache_invalidate(fj_disk_cache *c, const char *key, const char *kind, const char *why)
{
    char path[FJ_DISK_CACHE_PATH_MAX + 64];
    if (!c->enabled) return;
    fj_disk_cache_entry_path(c, key, kind, path, sizeof path);
    unlink(path);
    cache_note(c, &c->stats.discarded, "discarded %s: %s", path, why ? why : "invalidated");
}
