/*
 * prebuilt.h - the kernels built with the library (FAJIT_PREBUILT, on by default): the blob, its entries, and
 * the set of configs the build compiles (prebuilt_set.c, tools/prebuilt).
 *
 * The blob is a run of disk-cache entries (disk_cache.h's format: magic, lengths, key text, XXH64 checksum of
 * the whole entry, payload), one per kernel, built at build time by tools/prebuilt/fj_prebuilt_gen from the same
 * generator and compiled with nvJitLink / NVRTC (no GPU). An entry's key (fj_prebuilt_key) names the config's
 * canonical text, the target sm and the codegen version with the digest of its sources, so a blob left from
 * other sources matches nothing. Every served entry is checked in full first (key text, lengths, checksum):
 * a damaged entry is a miss, and the kernel comes from the next source (disk or the compiler), never from it.
 */
#ifndef FJ_PREBUILT_H
#define FJ_PREBUILT_H

#include <stddef.h>
#include <stdint.h>

#include "fajit.h"

struct fajit_context;

#define FJ_PREBUILT_KIND "cubin"

/* The key text of the prebuilt entry of (canonical config text, target sm); returns the length, like snprintf. */
int fj_prebuilt_key(char *buf, size_t size, const char *config_text, const char *target);

/* The blob linked into this library ({NULL, 0} when it was built with FAJIT_PREBUILT=OFF). */
void fj_prebuilt_blob(const unsigned char **data, size_t *len);
/* Tests only: serve from another blob (NULL: the linked one again). Not thread-safe. */
void fj_prebuilt_set_blob(const unsigned char *data, size_t len);

/* The payload of the entry of (config text, target) in the current blob, checked in full. 1 = found and
 * valid: *cubin points into the blob (not aligned; copy it before loading). 0 = not there, or refused (a
 * damaged entry: *why, when not NULL, says what was wrong; "" for a plain miss). */
int fj_prebuilt_find(const char *config_text, const char *target, const unsigned char **cubin, size_t *size,
                     const char **why);

/* 1 when the entry of (config text, target) is there, valid, and was compiled from PTX of source hash `source`
 * (hash.h fj_source_hash; tests: the blob holds what the runtime's own plan for that target generates); else 0,
 * *why saying why when the entry is there. */
int fj_prebuilt_source_is(const char *config_text, const char *target, uint64_t source, const char **why);

/* Call fn(config_text, target, arg) for each entry of the current blob (their key texts only; the payloads are
 * not checked here). Stops when fn returns nonzero and returns that; 0 after the last. */
int fj_prebuilt_each(int (*fn)(const char *config_text, const char *target, void *arg), void *arg);

/* Entries and payload bytes of the current blob (fagen and the tests report them). */
void fj_prebuilt_stats(int *entries, size_t *bytes);

/* ---- the set the build compiles (prebuilt_set.c) -------------------------------------------------- */
typedef struct fj_prebuilt_item {
    fajit_config cfg;
    unsigned variant;  /* FJ_VARIANT_* bits (0: the plain kernel) */
    char target[16];   /* "sm_80", "sm_90", "sm_90a" */
} fj_prebuilt_item;

/* The kernels the default paths launch on an A100-class sm_80 and an H100/H200-class sm_90 GPU: the
 * heuristic's config of every dtype, head dim and mask over the sequence-length classes its rules tell
 * apart, the decode variants a call without num_splits runs, and the combine kernel. Writes at most `max`
 * items (no duplicates) and returns how many there are. */
int fj_prebuilt_set(fj_prebuilt_item *items, int max);

#endif
