/*
 * disk_cache.h - the persistent cache of compiled kernels (cubins, and the PTX they came from).
 *
 * An entry is addressed by a key text that says everything the payload depends on (fj_disk_cache_key:
 * config canonical text, FJ_CODEGEN_VERSION, target sm, compiler identity; no paths) and a kind
 * ("cubin", "ptx"). It lives in <dir>/kernels/<hash128(key)>.<kind>:
 *
 *     offset  size  field
 *          0     8  magic "FAJITKC\n"
 *          8     4  format version (FJ_DISK_CACHE_FORMAT), little-endian
 *         12     4  key length K (the key text + "\n" + kind), little-endian
 *         16     8  payload length P, little-endian
 *         24     8  payload checksum (fj_checksum64), little-endian
 *         32     K  key text + "\n" + kind
 *       32+K     P  payload
 *
 * Entries are written to a mkstemp file in the same directory, fsync'd and rename()d into place, so a
 * reader sees a whole entry or none, and concurrent writers of one key each leave a valid entry. A read
 * verifies everything (magic, version, lengths against the file size, key text, checksum); an entry
 * that fails is deleted and reported as a miss. The cache is best effort: a failure to write never
 * fails the caller; the reason is kept (fj_disk_cache_stats) for diagnostics.
 *
 * Thread-safe: the file operations need no lock; counters and the last error are under a mutex.
 */
#ifndef FJ_DISK_CACHE_H
#define FJ_DISK_CACHE_H

#include <pthread.h>
#include <stddef.h>

#include "fajit.h"

#define FJ_DISK_CACHE_FORMAT 1u
#define FJ_DISK_CACHE_PATH_MAX 1024
#define FJ_DISK_CACHE_KEY_MAX 1024
#define FJ_DISK_CACHE_ERROR_MAX 512

typedef struct fj_disk_cache_stats {
    unsigned hits, misses;     /* loads that returned an entry / did not (absent or discarded) */
    unsigned discarded;        /* entries deleted because they were corrupt or invalidated */
    unsigned stores, store_failures;
    char last_error[FJ_DISK_CACHE_ERROR_MAX]; /* the most recent failure or discard, "" if none */
} fj_disk_cache_stats;

typedef struct fj_disk_cache {
    int enabled;
    char dir[FJ_DISK_CACHE_PATH_MAX];         /* the cache root ("" when off) */
    char entries_dir[FJ_DISK_CACHE_PATH_MAX]; /* <dir>/kernels */
    pthread_mutex_t lock;                     /* guards stats */
    fj_disk_cache_stats stats;
} fj_disk_cache;

/*
 * Set up a cache (no file is touched; directories are made on the first store).
 *   setting  -1 = from the environment (FAJIT_CACHE=0/off/false/no turns it off), 0 = off, 1 = on
 *   dir      NULL or "" = $FAJIT_CACHE_DIR, else $XDG_CACHE_HOME/fajit, else $HOME/.cache/fajit
 * Fails (FAJIT_ERR_INVALID_ARGUMENT) only for a bad explicit dir or setting. When it is on but no
 * directory can be found (no HOME, a path too long), it is off and stats.last_error says why.
 */
fajit_status fj_disk_cache_init(fj_disk_cache *cache, int setting, const char *dir);
void fj_disk_cache_fini(fj_disk_cache *cache);

/* Key text of a kernel; returns the length needed (like snprintf); fails nothing. */
int fj_disk_cache_key(char *buf, size_t size, const char *config_text, const char *target_sm, const char *compiler);

/* The file of an entry (whether or not it exists). */
void fj_disk_cache_entry_path(const fj_disk_cache *cache, const char *key, const char *kind, char *buf,
                              size_t size);

/* 1 = hit: *payload (malloc'd, free()) and *size receive the payload. 0 = miss (absent, unreadable, or
 * corrupt: then deleted). Never fails. */
int fj_disk_cache_load(fj_disk_cache *cache, const char *key, const char *kind, void **payload, size_t *size);

/* Store atomically. Returns 0, or -1 when the entry could not be written (reason in the stats). */
int fj_disk_cache_store(fj_disk_cache *cache, const char *key, const char *kind, const void *payload, size_t size);

/* The same for metadata entries (the compiler stamps of compiler_stamp.c): same format and checks, left out of
 * the hits/misses/stores counters (a failure still sets last_error). */
int fj_disk_cache_load_meta(fj_disk_cache *cache, const char *key, const char *kind, void **payload, size_t *size);
int fj_disk_cache_store_meta(fj_disk_cache *cache, const char *key, const char *kind, const void *payload,
                             size_t size);

/* Delete an entry whose payload turned out unusable (e.g. the driver rejected a cubin), saying why. */
void fj_disk_cache_invalidate(fj_disk_cache *cache, const char *key, const char *kind, const char *why);

void fj_disk_cache_stats_get(fj_disk_cache *cache, fj_disk_cache_stats *out);

/* mkdir -p (mode 0755); 0 when `path` is a directory afterwards, else -1 with errno set. Also used for the
 * tune file (tune_file.c). */
int fj_disk_cache_mkdirs(const char *path);

#endif
