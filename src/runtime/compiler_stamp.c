/*
 * compiler_stamp.c - the compiler identity of a disk-cache key, without loading the compiler.
 *
 * Every disk-cache key names the compiler that made the cubin ("NVRTC 13.0 whole-program"). Asking a
 * library its version means loading it first: 25-45 ms with a warm page cache, seconds with a cold one
 * (each is about 100 MB), and a new process whose kernels are all on disk would pay that for nothing.
 * So the cache directory keeps one stamp per compiler, a metadata entry of the disk cache:
 *
 *     key      "compiler stamp <name>" + the LD_LIBRARY_PATH and CUDA_HOME it was written under
 *              (the two settings that decide which file the loader picks)
 *     payload  "<file the loader mapped>\n<its size>\n<its mtime>\n<identity>\n"
 *
 * A process that has not loaded the compiler uses the stamp's identity when the stamped file still has
 * that size and mtime; otherwise it loads the compiler, asks it, and writes a new stamp. A process that
 * has loaded it asks it directly and rewrites a stamp that disagrees.
 *
 * What a stamp cannot see: another library found by other means (ld.so.conf edited, a new file earlier
 * on the same search path) while the stamped file is unchanged. Then a cubin of the stamped compiler is
 * served: still a cubin of the same config and codegen version, checked by the driver when loaded (one
 * it refuses is deleted and compiled again). The first compile of that process corrects the stamp.
 */
#include "compiler_stamp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/codegen.h"
#include "compile.h"
#include "cuda_api.h"
#include "base/error.h"

#define STAMP_KIND "stamp"
#define STAMP_MAX 2048

typedef struct compiler_ref {
    const char *name;
    int (*loaded)(void);
    void (*path)(char *buf, size_t size);
} compiler_ref;

static const compiler_ref k_nvrtc = {"NVRTC", fj_nvrtc_loaded, fj_nvrtc_path};
static const compiler_ref k_nvjitlink = {"nvJitLink", fj_nvjitlink_loaded, fj_nvjitlink_path};

/* The stamp's key; 0 when the environment does not fit in a key (then no stamp is used). */
static int stamp_key(const compiler_ref *c, char *buf, size_t size)
{
    const char *lib_path = getenv("LD_LIBRARY_PATH"), *cuda_home = getenv("CUDA_HOME");
    int n = snprintf(buf, size, "compiler stamp %s\nLD_LIBRARY_PATH=%s\nCUDA_HOME=%s", c->name, lib_path ? lib_path : "",
                     cuda_home ? cuda_home : "");
    return n > 0 && (size_t)n < size;
}

/* "<path>\n<size>\n<mtime>\n" of a file; 0 when it cannot be stat'ed or does not fit. */
static int file_signature(const char *path, char *buf, size_t size)
{
    struct stat st;
    if (!path[0] || stat(path, &st) != 0) return 0;
    int n = snprintf(buf, size, "%s\n%lld\n%lld.%09ld\n", path, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                     (long)st.st_mtim.tv_nsec);
    return n > 0 && (size_t)n < size;
}

/* The stamp's payload as a string (malloc'd), or NULL when there is none. */
static char *stamp_load(fj_disk_cache *cache, const char *key)
{
    void *payload = NULL;
    size_t size = 0;
    if (!fj_disk_cache_load_meta(cache, key, STAMP_KIND, &payload, &size)) return NULL;
    char *text = realloc(payload, size + 1);
    if (!text) {
        free(payload);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

/* 1 and the identity in buf (the file in path[1024]) when the stamp names a file that is unchanged. */
static int stamp_read(fj_disk_cache *cache, const char *key, char *buf, size_t size, char *path)
{
    char *text = stamp_load(cache, key), sig[STAMP_MAX];
    if (!text) return 0;
    char *eol = strchr(text, '\n');
    int ok = 0;
    if (eol) {
        *eol = '\0';
        int have = file_signature(text, sig, sizeof sig);
        *eol = '\n';
        size_t n = strlen(sig);
        if (have && strncmp(text, sig, n) == 0) {
            const char *id = text + n;
            size_t len = strcspn(id, "\n");
            if (len > 0 && id[len] == '\n' && id[len + 1] == '\0' && len < size) {
                memcpy(buf, id, len);
                buf[len] = '\0';
                snprintf(path, 1024, "%.*s", (int)strcspn(text, "\n"), text);
                ok = 1;
            }
        }
    }
    free(text);
    return ok;
}

/* After the compiler is loaded: write the stamp unless it already says the same (best effort). */
static void stamp_refresh(fj_disk_cache *cache, const char *key, const compiler_ref *c, const char *identity)
{
    char path[1024], want[STAMP_MAX];
    c->path(path, sizeof path);
    if (!file_signature(path, want, sizeof want)) return;
    size_t n = strlen(want);
    if (snprintf(want + n, sizeof want - n, "%s\n", identity) >= (int)(sizeof want - n)) return;
    char *have = stamp_load(cache, key);
    if (!have || strcmp(have, want) != 0) (void)fj_disk_cache_store_meta(cache, key, STAMP_KIND, want, strlen(want));
    free(have);
}

/* Append " (<file name>, <size> B)" of the compiler's library file: a patch release keeps the version the
 * library reports but not its size, and its cubins may differ. Nothing is appended when the file is unknown. */
static void identity_add_file(const char *path, char *buf, size_t size)
{
    struct stat st;
    if (!path[0] || stat(path, &st) != 0) return;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, " (%s, %lld B)", base, (long long)st.st_size);
}

fajit_status fj_compiler_identity_stamped(fj_disk_cache *cache, const fj_plan *plan, char *buf, size_t size)
{
    const compiler_ref *c = plan->whole_program ? &k_nvrtc : &k_nvjitlink;
    char key[FJ_DISK_CACHE_KEY_MAX], path[1024] = "";
    int keyed = cache->enabled && stamp_key(c, key, sizeof key);
    fajit_status st = FAJIT_OK;
    if (!keyed || c->loaded() || !stamp_read(cache, key, buf, size, path)) {
        st = fj_compiler_identity_for(plan, buf, size); /* loads the compiler */
        if (st == FAJIT_OK && keyed) stamp_refresh(cache, key, c, buf);
        c->path(path, sizeof path);
    }
    if (st == FAJIT_OK) identity_add_file(path, buf, size);
    return st;
}

int fj_compiler_identity_cheap(fj_disk_cache *cache, const fj_plan *plan, char *buf, size_t size)
{
    const compiler_ref *c = plan->whole_program ? &k_nvrtc : &k_nvjitlink;
    char key[FJ_DISK_CACHE_KEY_MAX], path[1024] = "";
    int keyed = cache->enabled && stamp_key(c, key, sizeof key);
    if (!c->loaded() && !(keyed && stamp_read(cache, key, buf, size, path))) return 0; /* would load it */
    if (c->loaded()) {
        if (fj_compiler_identity_stamped(cache, plan, buf, size) != FAJIT_OK) return 0;
        return 1;
    }
    identity_add_file(path, buf, size);
    return 1;
}

/* " ptxas <options>" after the compiler's identity when FAJIT_PTXAS_OPTS gives any (compile.h). */
static fajit_status identity_add_ptxas_opts(char *buf, size_t size)
{
    fj_ptxas_opts po;
    fajit_status st = fj_ptxas_opts_read(&po);
    size_t n = strlen(buf);
    if (st == FAJIT_OK && po.n) snprintf(buf + n, size - n, " ptxas %s", po.text);
    return st;
}

fajit_status fj_kernel_disk_key(fj_disk_cache *cache, const fj_plan *plan, const char *config_text,
                                const char *target, char *key, size_t size)
{
    char compiler[320];
    fajit_status st = fj_compiler_identity_stamped(cache, plan, compiler, sizeof compiler);
    if (st == FAJIT_OK) st = identity_add_ptxas_opts(compiler, sizeof compiler);
    if (st != FAJIT_OK) return st;
    if (fj_disk_cache_key(key, size, config_text, target, compiler) >= (int)size)
        return fj_fail(FAJIT_ERR_INTERNAL, "compiler_stamp.c: disk-cache key of \"%s\" longer than %zu", config_text,
                       size);
    return FAJIT_OK;
}

int fj_kernel_disk_key_cheap(fj_disk_cache *cache, const fj_plan *plan, const char *config_text, const char *target,
                             char *key, size_t size)
{
    char compiler[320];
    if (!fj_compiler_identity_cheap(cache, plan, compiler, sizeof compiler)) return 0;
    if (identity_add_ptxas_opts(compiler, sizeof compiler) != FAJIT_OK) return 0; /* the compile path says why */
    return fj_disk_cache_key(key, size, config_text, target, compiler) < (int)size;
}
