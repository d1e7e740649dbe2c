/*
 * tune.h - autotuning internals (public calls in fajit.h: fajit_tune, fajit_tune_lookup).
 *
 *   tune.c       shape classes, the search space, the context's table of winners and the hook
 *                fajit_config_fill calls (fj_tune_fill), fajit_tune's control flow
 *   tune_time.c  inputs, the correctness check and CUDA-event timing of one candidate
 *   tune_file.c  the tune file (format in tune_file.h)
 *   tune_decode.c  decode classes: the split count of split-KV (issue 11)
 *
 * The sequence-length class of a shape is the power of two at or above max(seqlen_q, seqlen_k),
 * clamped to FJ_TUNE_CLASS_MIN..FJ_TUNE_CLASS_MAX: tile choices change with the length of the KV loop
 * and the number of CTAs, and a power-of-two bucket is what the forward's choice cache (forward.h)
 * already uses. Batch and heads are not in the class.
 */
#ifndef FJ_TUNE_H
#define FJ_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "cuda_api.h"
#include "base/error.h"
#include "fajit.h"
#include "tune_file.h"

#define FJ_TUNE_CLASS_MIN 128
#define FJ_TUNE_CLASS_MAX 16384
#define FJ_TUNE_SPACE_MAX 256       /* configs the enumeration can produce (it makes ~100, ~200 with pairs) */
#define FJ_TUNE_COL_SPLIT_MIN_D 192 /* warp pairs (col_warps 2) are searched from this head dim up */
#define FJ_TUNE_DEFAULT_CANDIDATES 16
#define FJ_TUNE_MIN_REPS 10
#define FJ_TUNE_DEFAULT_WARMUP 3
#define FJ_TUNE_ROTATE_BYTES (256.0 * 1024 * 1024) /* input sets span at least this (5x an H100's L2) */
#define FJ_TUNE_MAX_SETS 64
#define FJ_TUNE_FINALISTS 3       /* candidates timed again, interleaved, after the first pass */
#define FJ_TUNE_FINAL_WITHIN 0.10 /* ... those within this fraction of the first pass's best time */
#define FJ_TUNE_FINAL_ROUNDS 3

/* The code-generation path fajit_config_fill picks for ctx's device (config_fill.c): sm_90a on a
 * compute-capability 9.0 GPU, sm_80 elsewhere and without a device. */
fajit_arch fj_best_path(const fajit_context *ctx);

/* The sequence-length class of a shape, or 0 when shape is NULL or has no sequence length. */
int fj_tune_seqlen_class(const fajit_shape *shape);

/* The key of a class on ctx's GPU (identity from the context, codegen version of this build). */
void fj_tune_key_make(const fajit_context *ctx, fajit_dtype dtype, int head_dim, int causal, int seqlen_class,
                      fj_tune_key *key);

/* The winner filed under key in ctx's table (the tune file, read on first use, plus winners tuned in this
 * context): 1 and *rec filled, or 0 (also without a device identity). Takes the context's lock. */
int fj_tune_table_find(fajit_context *ctx, const fj_tune_key *key, fj_tune_record *rec);

/* File a winner in ctx's table (after the file is read, so a fresh tune wins over an old line). */
void fj_tune_table_put(fajit_context *ctx, const fj_tune_record *rec);

/*
 * The hook of fajit_config_fill: when ctx has a device identity, shape has sequence lengths and the
 * context's table (the tune file, read on first use, plus winners tuned in this context) holds a
 * winner for cfg's dtype, head_dim, causal and arch on shape's class, fill cfg's zero fields from it,
 * provided the result passes fj_plan_build and fits the device's shared memory. Otherwise cfg is left
 * alone. Returns 1 when the winner was used. Never fails.
 */
int fj_tune_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg);

/* The config fajit_tune starts from and compares against (its "heuristic"): cfg's zero fields (dtype, head_dim and
 * causal set) filled by the built-in table for ctx's device, never from a tuned winner. */
fajit_status fj_tune_heuristic(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg);

/*
 * The search space in try order: `first` (the heuristic's config), then the sm_80 tiles ordered by
 * distance from it. Configs that fail fj_plan_build or fj_context_target(ctx) are left out and counted
 * in *pruned; *space receives the number of distinct configs considered. Returns the count written to
 * out (at most cap).
 */
int fj_tune_space(const fajit_context *ctx, const fajit_config *first, fajit_config *out, int cap, int *space,
                  int *pruned);

/* The progress callback of o (when set) with the text of fmt: index -1 for notes about the tune as a
 * whole, else the candidate's index of total; rate: TFLOP/s (decode: GB/s), or -1. */
void fj_tune_note(const fajit_tune_options *o, int total, int index, const fajit_config *cfg, double rate,
                  const char *fmt, ...) FJ_PRINTF(6, 7);

/* ---- decode classes: the split count (tune_decode.c; line format in tune_file.h) ----------------- */
#define FJ_TUNE_DECODE_MAX_CANDIDATES 8

/* The decode class of a call on ctx's GPU (packed: the call packs GQA heads, fj_decode_packs). */
void fj_tune_decode_key(const fajit_context *ctx, const fajit_attention_args *args, int packed, fj_tune_key *key);

/* The tuned split count of the call's decode class when ctx's table holds one timed on this tile
 * (block_m x block_n): 1 and *splits, else 0. No identity: 0, without taking the lock. */
int fj_tune_decode_find(fajit_context *ctx, const fajit_attention_args *args, int packed, int block_m, int block_n,
                        int *splits);

/* The split counts fj_tune_decode times, ascending, at most cap: the heuristic's (always, cap >= 1), 1, half
 * and double the heuristic's, and the counts that give 1, 2 and 3 CTAs per SM in one wave on sm_count SMs;
 * each kept only when it is at most the KV tiles of block_n keys and fj_decode_split_fits. */
int fj_tune_decode_candidates(const fajit_attention_args *args, int packed, int block_m, int block_n, int sm_count,
                              int heuristic, int *out, int cap);

typedef struct fj_tune_decode_result {
    fj_tune_key key;          /* the class */
    int tile_m, tile_n;       /* the decode tile the counts ran on */
    int heuristic_splits;     /* what num_splits = 0 ran before (fj_decode_splits) */
    int candidates, timed;
    int found, splits;        /* the winner */
    double gbs, heuristic_gbs; /* GB/s of K + V, median over the rounds */
    int saved;                /* merged into the tune file */
    double seconds;
} fj_tune_decode_result;

/*
 * Time the split counts of one decode shape (dtype, batch, heads, seqlens, head_dim, causal of `shape`;
 * seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q) on ctx's GPU and keep the fastest for its class: in ctx's table,
 * so calls with num_splits = 0 use it, and (opts->persist) in the tune file. opts: reps, warmup,
 * max_candidates (capped at FJ_TUNE_DECODE_MAX_CANDIDATES), persist, progress (called with cfg NULL and the
 * GB/s in the tflops argument). Internal: fagen tune --grid decode is its caller.
 */
fajit_status fj_tune_decode(fajit_context *ctx, const fajit_attention_args *shape, const fajit_tune_options *opts,
                            fj_tune_decode_result *res);

/* ---- timing (tune_time.c) ------------------------------------------------------------------------ */
/*
 * Floating-point operations of one forward, as fajit_tune and fagen bench count them:
 * 4 * B * Hq * Nq * Nk * D; with the causal mask half of that when Nq == Nk (the convention of
 * FlashAttention's benchmarks), else the exact count of visible (query, key) pairs (bottom-right aligned).
 */
double fj_attention_flops(int64_t batch, int64_t heads_q, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                          int causal);

/* Sort v[0..n) ascending (n >= 1) and return its median. */
double fj_sort_median(double *v, int n);
/* The monotonic clock in milliseconds (host timing of the tuner, fagen bench and fagen tune). */
double fj_now_ms(void);

/* The timing loop of fajit_tune and fagen bench (tune_time.c): reps calls, each between two CUDA events. */
typedef struct fj_timer {
    fj_CUevent *events; /* 2 * reps */
    int reps;
    fj_CUmodule spin_mod; /* the queue-ahead kernel's module */
    fj_CUfunction spin;
} fj_timer;

/* Create the events and load the queue-ahead kernel; the context must be current. */
fajit_status fj_timer_open(fajit_context *ctx, int reps, fj_timer *t);
void fj_timer_close(fajit_context *ctx, fj_timer *t);
/* warmup calls (timed as a block), then untimed ones until settle_ms of GPU time has run (at most settle_max), then
 * the queue-ahead kernel (it holds the stream for twice the timed calls' host enqueue time, so each call's events
 * bracket GPU work only), then t->reps calls between events rotating over sets[0 .. n_sets): ms[i] in milliseconds.
 * The context must be current. */
fajit_status fj_timer_run(fajit_context *ctx, fj_timer *t, const fajit_attention_args *sets, int n_sets,
                          const fajit_config *cfg, int warmup, double settle_ms, long settle_max, double *ms);

typedef struct fj_tune_bench {
    fajit_context *ctx;
    int n_sets;
    fajit_attention_args args[FJ_TUNE_MAX_SETS];
    fj_CUdeviceptr mem[FJ_TUNE_MAX_SETS][4]; /* q, k, v, o */
    size_t o_bytes;
    int reps;
    fj_timer timer;
    double *ms;           /* reps */
    size_t slice_elems;   /* elements compared at each end of O */
    uint16_t *ref, *got;  /* 2 * slice_elems each: the reference output, this candidate's */
    int have_ref;
    double tol;           /* rel L2 tolerance of the output check */
    double flops;         /* of one call */
} fj_tune_bench;

/* Allocate and fill the input sets (random U(-1, 1), never all zero) and the events. The context must
 * have a device. On failure everything is released. */
fajit_status fj_tune_bench_open(fajit_context *ctx, const fajit_attention_args *shape_args, int reps,
                                fj_tune_bench *b);
void fj_tune_bench_close(fj_tune_bench *b);

/*
 * Run cfg once on set 0 with O poisoned, and compare both ends of O with the reference (the first
 * candidate that passed becomes it). *rel_err receives ||O - ref|| / ||ref|| (0 for the first), or a
 * negative number when O holds NaN/Inf or unwritten elements. Returns a driver or library failure;
 * a wrong result is FAJIT_OK with *rel_err > tol or < 0.
 */
fajit_status fj_tune_bench_check(fj_tune_bench *b, const fajit_config *cfg, double *rel_err);

/* warmup untimed calls, then b->reps calls between events, rotating over the sets; the median in ms. */
fajit_status fj_tune_bench_time(fj_tune_bench *b, const fajit_config *cfg, int warmup, double *median_ms);

/* 0 when the context's CUDA context still works (cuCtxSynchronize succeeds), else the failure. */
fajit_status fj_tune_bench_alive(fj_tune_bench *b);

#endif
