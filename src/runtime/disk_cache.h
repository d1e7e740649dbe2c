/*
 * disk_cache.h - the persistent cache of compiled kernels (cubins, and the PTX they came from).
 *
 * An entry is addressed by a key text that says everything the payload depends on (fj_disk_cache_key:
 * config canonical text, FJ_CODEGEN_VERSION and the digest of the sources that write the PTX and call the
 * compiler, target sm, compiler identity with its library file's size; no paths) and a kind ("cubin",
 * "ptx", "stamp"). It lives in <dir>/kernels/<hash128(key)>.<kind>:
 *
 *     offset  size  field
 *          0     8  magic "FAJITKC\n"
 *          8     4  format version (FJ_DISK_CACHE_FORMAT), little-endian
 *         12     4  key length K (the key text + "\n" + kind), little-endian
 *         16     8  payload length P, little-endian
 *         24     8  source hash: XXH64 of what the payload was made from (a cubin: its PTX), 0 = none
 *         32     8  checksum: XXH64 of the whole entry with this field zero, little-endian
 *         40     K  key text + "\n" + kind
 *       40+K     P  payload
 *
 * Entries are written to a fresh temporary file in the same directory, fsync'd and renamed into place, so
 * a reader sees a whole entry or none, and concurrent writers of one key each leave a valid entry. A read
 * verifies everything (magic, version, lengths against the file size, key text, checksum, and the source
 * hash when the caller gives one); an entry that fails is deleted and reported as a miss. The cache is
 * best effort: a failure to read or write never fails the caller; the reason is kept (fj_disk_cache_stats).
 *
 * Trust: entries are read and written only in directories this user owns that no one else can write. The
 * cache root and <root>/kernels must be directories owned by the effective uid without group or other write
 * permission (kernels/ not a symlink); an entry must be a regular file of that uid (not a symlink, FIFO or
 * directory). Anything else is refused with a reason in the stats: a load is a miss, a store a failure.
 * Every entry operation goes through a descriptor of the checked kernels/ directory (openat), so the check
 * and the use see the same directory.
 *
 * Thread-safe: the file operations need no lock; counters and the last error are under a mutex.
 */
#ifndef FJ_DISK_CACHE_H
#define FJ_DISK_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fajit.h"

#define FJ_DISK_CACHE_FORMAT 2u
#define FJ_DISK_CACHE_PATH_MAX 1024 /* bytes of every path fajit makes under the cache directory, with the NUL */
/* Characters a cache directory may have: every path under it then fits in FJ_DISK_CACHE_PATH_MAX, the
 * longest being the tune file's temporary "<dir>/tuned-v1.txt.tmp-XXXXXX" (tune_file.c). One limit, checked
 * when the context is made, so that no later save fails for a path the directory made too long. */
#define FJ_DISK_CACHE_DIR_MAX 960
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
    int verify;                               /* FAJIT_CACHE_VERIFY=1: loads check the source hash too */
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

/* 1 = hit: *payload (malloc'd and NUL-terminated past *size, free()) and *size receive the payload.
 * 0 = miss (absent, refused, or corrupt: then deleted). source: 0 = not checked, else the entry's source
 * hash must equal it (a cubin stored from other PTX is deleted). Never fails. */
int fj_disk_cache_load(fj_disk_cache *cache, const char *key, const char *kind, uint64_t source, void **payload,
                       size_t *size);

/* Store atomically, with the source hash (0 = none). Returns 0, or -1 when the entry could not be written
 * (reason in the stats). */
int fj_disk_cache_store(fj_disk_cache *cache, const char *key, const char *kind, uint64_t source,
                        const void *payload, size_t size);

/* The same for metadata entries (the compiler stamps of compiler_stamp.c): same format and checks, no
 * source hash, left out of the hits/misses/stores counters (a failure still sets last_error). */
int fj_disk_cache_load_meta(fj_disk_cache *cache, const char *key, const char *kind, void **payload, size_t *size);
int fj_disk_cache_store_meta(fj_disk_cache *cache, const char *key, const char *kind, const void *payload,
                             size_t size);

/* Delete an entry whose payload turned out unusable (e.g. the driver rejected a cubin), saying why. */
void fj_disk_cache_invalidate(fj_disk_cache *cache, const char *key, const char *kind, const char *why);

void fj_disk_cache_stats_get(fj_disk_cache *cache, fj_disk_cache_stats *out);

/* mkdir -p (mode 0755); 0 when `path` is a directory afterwards, else -1 with errno set. Also used for the
 * tune file (tune_file.c). */
int fj_disk_cache_mkdirs(const char *path);

/*
 * The entry image in memory (the file's bytes), for the store and the load above and the fuzz target:
 *   encode  a malloc'd image of (key, kind, source, payload); *len its size; NULL when out of memory
 *   decode  NULL when img[0..len) is a valid entry of (key, kind) whose source hash is `source` (0: any);
 *           *payload_off / *payload_len locate the payload in img. Else the reason it is not.
 */
unsigned char *fj_disk_cache_entry_encode(const char *key, const char *kind, uint64_t source, const void *payload,
                                          size_t size, size_t *len);
const char *fj_disk_cache_entry_decode(const unsigned char *img, size_t len, const char *key, const char *kind,
                                       uint64_t source, size_t *payload_off, size_t *payload_len);

#endif
