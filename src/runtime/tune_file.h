/*
 * tune_file.h - the file of tuned winners (fajit_tune), a small text file next to the kernel cache.
 *
 * <cache_dir>/tuned-v1.txt holds one line per winner, fields separated by " | ":
 *
 *     # fajit tuned kernels (format 1), written by fajit_tune / fagen tune; safe to edit or delete.
 *     NVIDIA H100 80GB HBM3 | 13000 | fajit-codegen-1 | bf16 d128 causal n4096 | sm_80 bf16 d128 br128 bc64 s2 sw128 w8 causal | 312.4 | B4 H16/16 N4096/4096, 16 timed, heuristic 301.2 TFLOP/s, 2026-11-23 10:00 UTC
 *
 *   gpu      the device name (cuDeviceGetName; '|' and control characters become spaces)
 *   driver   cuDriverGetVersion (13000 = CUDA 13.0)
 *   codegen  FJ_CODEGEN_VERSION of the fajit that measured it
 *   class    dtype, head dim, mask and the sequence-length class nN (see tune.h)
 *   config   the winner in canonical form (fajit_config_format); its dtype, head dim and mask must
 *            agree with the class and it must pass fj_plan_build
 *   TFLOP/s  measured (4 * B * H * Nq * Nk * D / t, half that for causal with Nq == Nk), 0.01..100000
 *   note     free text for a person: the shape timed and when (kept, never interpreted)
 *
 * Decode lines (fagen tune --grid decode; tune_decode.c) hold the split count of a decode class:
 *
 *     NVIDIA H200 | 13000 | fajit-codegen-12 | decode bf16 d128 noncausal bkv8 g4 q1 k131072 packed | splits 64 br64 bc64 | 2950.0 | ...
 *
 *   class    "decode", dtype, head dim, mask (causal only with Nq > 1: one query row sees every key either
 *            way), then what sets the split-KV grid: bkv = B x Hkv and q = Nq as the powers of two at or
 *            above them, g = Hq / Hkv exactly, k = Nk as the power of two at or above it (>= 128), packed
 *            or unpacked (GQA packing on or off in the context that measured it)
 *   config   "splits S brM bcN": the winning split count and the decode tile (block_m x block_n) it was
 *            timed on; a call whose tile differs (another tile rule, paged K/V of another page size)
 *            does not use it
 *   GB/s     of K + V read (each KV head once) in the TFLOP/s field's place, same range
 * Readers older than decode lines (format 1 without them) skip such a line as one that does not parse
 * (the rule below), so the format number stays 1; their merge drops it, and `fagen tune --grid decode`
 * makes it again.
 *
 * The first four fields are the key. Lines starting with '#' and blank lines are comments; a line
 * that does not parse is ignored (a reader never fails because of one) and dropped on the next write,
 * as are comments other than the header, which every write puts back.
 * Writers take an flock on <file>.lock, read, merge (a record replaces the one with the same key),
 * write a temporary file in the same directory, fsync and rename it into place, so readers see the
 * old file or the new one, and concurrent tuners do not lose each other's lines.
 *
 * Pure C and POSIX; no CUDA. Not thread-safe per list (callers lock); the file calls are.
 */
#ifndef FJ_TUNE_FILE_H
#define FJ_TUNE_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "fajit.h"

#define FJ_TUNE_FILE_NAME "tuned-v1.txt"
#define FJ_TUNE_LINE_MAX 1024
#define FJ_TUNE_GPU_MAX 128
#define FJ_TUNE_CODEGEN_MAX 48
#define FJ_TUNE_NOTE_MAX 256
/* A tune file larger than this is refused (about 50,000 lines; a tune writes one line per class). */
#define FJ_TUNE_FILE_MAX_BYTES (8 * 1024 * 1024)

/* What a winner is valid for: the machine and fajit that measured it, and the problem class. */
typedef struct fj_tune_key {
    char gpu[FJ_TUNE_GPU_MAX];
    int driver;
    char codegen[FJ_TUNE_CODEGEN_MAX];
    fajit_dtype dtype;
    int head_dim;
    int causal;
    int seqlen_class; /* forward: the sequence-length class; decode: the Nk bucket */
    /* decode lines only (all 0 on forward lines) */
    int decode;       /* 1: a decode class (the split count), 0: a forward class (a config) */
    int kv_heads;     /* B x Hkv, the power of two at or above it */
    int group;        /* Hq / Hkv */
    int seqlen_q;     /* Nq, the power of two at or above it, 1..128 */
    int packed;       /* GQA packing on (1) or off (0) */
} fj_tune_key;

/* One line of the file. */
typedef struct fj_tune_record {
    fj_tune_key key;
    fajit_config cfg;  /* forward lines */
    int splits;        /* decode lines: the split count, and the tile it was timed on */
    int tile_m, tile_n;
    double tflops;     /* forward: TFLOP/s; decode: GB/s of K + V */
    char note[FJ_TUNE_NOTE_MAX];
} fj_tune_record;

/* A growable array of records, sorted by key with no key twice (zero-initialize; release with
 * fj_tune_list_free). Put and find are binary searches. */
typedef struct fj_tune_list {
    fj_tune_record *v;
    int n, cap;
} fj_tune_list;

/* Copy text for a field: '|' and control characters become spaces, outer spaces are trimmed. */
void fj_tune_clean_text(char *dst, size_t size, const char *src);

/* 1 when two keys are equal in every field. */
int fj_tune_key_equal(const fj_tune_key *a, const fj_tune_key *b);

/* Parse canonical config text ("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal"); NULL on success,
 * else a static reason. Does not check the plan rules. */
const char *fj_tune_parse_config(const char *text, fajit_config *cfg);

/* Parse one line. NULL on success, else a static reason ("comment" for comments and blank lines). */
const char *fj_tune_parse_line(const char *line, fj_tune_record *rec);

/* Format one record as a line without the newline; returns the length needed, like snprintf. */
int fj_tune_format_line(const fj_tune_record *rec, char *buf, size_t size);

/* Replace the record with the same key, or append. 0, or -1 when out of memory. */
int fj_tune_list_put(fj_tune_list *list, const fj_tune_record *rec);
/* The record with this key, or NULL. */
const fj_tune_record *fj_tune_list_find(const fj_tune_list *list, const fj_tune_key *key);
void fj_tune_list_free(fj_tune_list *list);

/*
 * Put every line of `path` that parses into *list (a later line with the same key wins; O(n log n)).
 * *bad (may be NULL) receives the number of lines ignored as corrupt. A missing file is an empty one.
 * Only a regular file of at most FJ_TUNE_FILE_MAX_BYTES is read, and `path` itself is not followed when
 * it is a symbolic link (the directories above it are); nothing blocks (a FIFO is refused, not opened
 * for waiting). Returns 0, or -1 when the file exists but is not such a file, cannot be read or memory
 * runs out; fj_tune_file_load then says why in `why` (may be NULL).
 */
int fj_tune_file_read(const char *path, fj_tune_list *list, int *bad);
int fj_tune_file_load(const char *path, fj_tune_list *list, int *bad, char *why, size_t why_size);

/* The same from an open stream (what fj_tune_file_read does after fopen; the fuzz target reads from
 * memory): *bad is incremented per corrupt line. 0, or -1 on a read error or out of memory. */
int fj_tune_stream_read(FILE *f, fj_tune_list *list, int *bad);

/*
 * Merge recs into the file at `path` (its directory is created): under the lock, read what is there,
 * put each record, write everything back atomically, sorted by key. Returns NULL on success, else the
 * failing step with errno's text in why (why may be NULL).
 */
const char *fj_tune_file_merge(const char *path, const fj_tune_record *recs, int n, char *why, size_t why_size);

#endif
