/*
 * prebuilt.c - the prebuilt-kernel blob linked into the library (format and rules in prebuilt.h).
 *
 * The blob is read in place: a lookup walks the entries' headers (about a hundred, each bounds-checked), and
 * the one whose key text matches is decoded in full by fj_disk_cache_entry_decode, checksum included, before
 * anything of it is returned.
 */
#include "prebuilt.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "disk_cache.h"
#include "fj_source_digest.h"

#define ENTRY_HEADER 40 /* disk_cache.h: magic 8, version 4, key length 4, payload length 8, source 8, checksum 8 */
#define KEY_MAX 512

/* Linked from the generated prebuilt_blob.c, or prebuilt_none.c with FAJIT_PREBUILT=OFF. */
extern const unsigned char fj_prebuilt_data[];
extern const size_t fj_prebuilt_data_size;

static const unsigned char *g_blob_override;
static size_t g_blob_override_len;
static int g_blob_overridden;

void fj_prebuilt_blob(const unsigned char **data, size_t *len)
{
    *data = g_blob_overridden ? g_blob_override : fj_prebuilt_data;
    *len = g_blob_overridden ? g_blob_override_len : fj_prebuilt_data_size;
}

void fj_prebuilt_set_blob(const unsigned char *data, size_t len)
{
    g_blob_overridden = data != NULL;
    g_blob_override = data;
    g_blob_override_len = len;
}

int fj_prebuilt_key(char *buf, size_t size, const char *config_text, const char *target)
{
    return snprintf(buf, size, "fajit prebuilt kernel\nconfig: %s\ntarget: %s\ncodegen: %s, sources %s\n",
                    config_text, target, FJ_CODEGEN_VERSION, FJ_SOURCE_DIGEST);
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The entry at blob[*off]: its bounds, its key text (without "\n<kind>"); advances *off. 0 at the end or where
 * the headers stop making sense (the rest of the blob is then not read). */
typedef struct entry_ref {
    size_t start, len;
    const char *key;
    size_t key_len;
} entry_ref;

static int entry_next(const unsigned char *blob, size_t len, size_t *off, entry_ref *e)
{
    if (*off > len || len - *off < ENTRY_HEADER) return 0;
    const unsigned char *h = blob + *off;
    uint64_t k = le(h + 12, 4), p = le(h + 16, 8), room = len - *off - ENTRY_HEADER;
    if (memcmp(h, "FAJITKC\n", 8) != 0 || k > room || p > room - k) return 0;
    e->start = *off;
    e->len = ENTRY_HEADER + (size_t)k + (size_t)p;
    e->key = (const char *)h + ENTRY_HEADER;
    e->key_len = (size_t)k;
    size_t tail = sizeof FJ_PREBUILT_KIND; /* "\n" + kind */
    if (e->key_len >= tail && e->key[e->key_len - tail] == '\n' &&
        memcmp(e->key + e->key_len - tail + 1, FJ_PREBUILT_KIND, tail - 1) == 0)
        e->key_len -= tail;
    *off += e->len;
    return 1;
}

/* fj_prebuilt_find, the entry's source hash checked against `source` when it is not 0 */
static int find_entry(const char *config_text, const char *target, uint64_t source, const unsigned char **cubin,
                      size_t *size, const char **why)
{
    const unsigned char *blob;
    size_t len, off = 0, key_len;
    char key[KEY_MAX];
    entry_ref e;
    if (why) *why = "";
    fj_prebuilt_blob(&blob, &len);
    int n = fj_prebuilt_key(key, sizeof key, config_text, target);
    if (!blob || n < 0 || n >= (int)sizeof key) return 0;
    key_len = (size_t)n;
    while (entry_next(blob, len, &off, &e)) {
        if (e.key_len != key_len || memcmp(e.key, key, key_len) != 0) continue;
        size_t payload_off = 0, payload_len = 0;
        const char *bad = fj_disk_cache_entry_decode(blob + e.start, e.len, key, FJ_PREBUILT_KIND, source,
                                                     &payload_off, &payload_len);
        if (bad) {
            if (why) *why = bad;
            return 0;
        }
        *cubin = blob + e.start + payload_off;
        *size = payload_len;
        return 1;
    }
    return 0;
}

int fj_prebuilt_find(const char *config_text, const char *target, const unsigned char **cubin, size_t *size,
                     const char **why)
{
    return find_entry(config_text, target, 0, cubin, size, why);
}

int fj_prebuilt_source_is(const char *config_text, const char *target, uint64_t source, const char **why)
{
    const unsigned char *cubin;
    size_t size;
    return find_entry(config_text, target, source, &cubin, &size, why);
}

/* "config: <text>\ntarget: <sm>\n" out of a key, into the two buffers; 0 when the key is not a prebuilt one. */
static int key_fields(const entry_ref *e, char *text, size_t text_size, char *target, size_t target_size)
{
    char key[KEY_MAX];
    if (e->key_len >= sizeof key) return 0;
    memcpy(key, e->key, e->key_len);
    key[e->key_len] = '\0';
    char *c = strstr(key, "\nconfig: "), *t = strstr(key, "\ntarget: ");
    if (!c || !t) return 0;
    c += 9;
    t += 9;
    char *ce = strchr(c, '\n'), *te = strchr(t, '\n');
    if (!ce || !te || (size_t)(ce - c) >= text_size || (size_t)(te - t) >= target_size) return 0;
    snprintf(text, text_size, "%.*s", (int)(ce - c), c);
    snprintf(target, target_size, "%.*s", (int)(te - t), t);
    return 1;
}

int fj_prebuilt_each(int (*fn)(const char *config_text, const char *target, void *arg), void *arg)
{
    const unsigned char *blob;
    size_t len, off = 0;
    entry_ref e;
    char text[256], target[32];
    fj_prebuilt_blob(&blob, &len);
    while (blob && entry_next(blob, len, &off, &e)) {
        if (!key_fields(&e, text, sizeof text, target, sizeof target)) continue;
        int r = fn(text, target, arg);
        if (r) return r;
    }
    return 0;
}

void fj_prebuilt_stats(int *entries, size_t *bytes)
{
    const unsigned char *blob;
    size_t len, off = 0;
    entry_ref e;
    fj_prebuilt_blob(&blob, &len);
    *entries = 0;
    *bytes = 0;
    while (blob && entry_next(blob, len, &off, &e)) {
        (*entries)++;
        *bytes += e.len;
    }
}
