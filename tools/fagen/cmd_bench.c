/*
 * cmd_bench.c - fagen bench: time forward kernels on the GPU, and the latency of getting one.
 *
 *   fagen bench [--batch B --heads H --heads-kv H --seqlen N --seqlen-k N --layout bhnd|bnhd]
 *               [config flags] [--reps N] [--warmup N] [--device N] [--untuned]
 *   fagen bench --grid first [config flags]   D 64/128/256 x N 4k/16k (B*N = 16384, H*D = 2048), both masks
 *   fagen bench --latency [config flags]      getting a kernel: cold in a new process, then a disk hit in another
 *   fagen bench --grid decode [--splits N]    the decode table of issue 11 (B/Hq/Hkv/Nk 1/32/32/32k, 1/32/8/128k,
 *                                             8/32/8/8k, 64/32/8/2k, 1/8/1/512k) x Nq 1, 4, 16; D 128 (or --headdim)
 *   fagen bench --varlen L1,L2,... [--heads H --heads-kv H] [config flags]
 *                                             one varlen batch (cu_seqlens, packed Q/K/V/O) of those sequence
 *                                             lengths; TFLOP/s counts each sequence's own (causal: half) pairs
 *
 * Timing: `warmup` calls, calls until ~settle_ms of GPU time (clocks settle under the power cap), then a
 * queue-ahead kernel (it sleeps on the GPU for twice the host's time to enqueue the timed calls), then `reps`
 * (>= 20) calls each between two CUDA events on the default stream, so the events time GPU work and no host
 * time; the median is reported. Inputs rotate over as many Q/K/V/O sets as it takes to pass 256 MB
 * (5x the H100's 50 MB L2), so no call finds its inputs in L2. Inputs are N(0, 1), distinct per tensor and set.
 * TFLOP/s = 4 * B * Hq * Nq * Nk * D / t; with the causal mask, half of that when Nq == Nk (the
 * convention of FlashAttention's benchmarks), else the exact count of visible (query, key) pairs.
 * Without tile flags the config is the library's choice for the shape: the tuned winner of its class
 * when `fagen tune` saved one for this GPU (tuned-v1.txt in the cache directory), else the built-in
 * heuristic; the last column says which: "tuned", "heuristic", "flags+tuned" (tile flags, the rest
 * from the winner) or "flags" (tile flags, the rest from the heuristic). --untuned ignores the
 * winners (the context is made without a disk cache, hence without the tune file), to compare the two.
 * Decode shapes (--grid decode, or any run with --splits or --page-size) report GB/s of K + V read, each KV head counted
 * once (2 x B x Hkv x Nk x D x 2 bytes / t), and the kernel(s) the forward ran (fajit_last_forward: the
 * decode variant, its splits and the combine kernel; on sm_90a the sm_80 fallback).
 */
#include <ftw.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "codegen/codegen.h"
#include "runtime/context.h"
#include "runtime/cuda_api.h"
#include "runtime/forward.h"
#include "base/error.h"
#include "runtime/half.h"
#include "runtime/tune.h"

#define BENCH_ROTATE_BYTES (256.0 * 1024 * 1024) /* rotate input sets until they span this much */
#define BENCH_MAX_SETS 64
#define BENCH_MIN_REPS 20
#define BENCH_SETTLE_MS 300 /* default --settle-ms */

typedef struct bench_cli {
    fajit_config user; /* config flags; zeros = heuristic */
    int batch, heads, heads_kv, seqlen, seqlen_k, bnhd;
    int reps, warmup, settle_ms, device, grid_first, latency, untuned, help;
    int splits, grid_decode; /* --splits: args->num_splits, -1 = not given (the heuristic); --grid decode */
    int page_size;           /* --page-size: paged K/V (0 = contiguous) */
    int page_linear;         /* --page-order linear: block table entry i = page i (default: shuffled) */
    int varlen_n;            /* --varlen: sequence lengths of one packed batch (0 = none) */
    int varlen[FAGEN_VARLEN_MAX];
} bench_cli;

typedef struct bench_shape {
    int b, hq, hkv, nq, nk, d, causal;
    fajit_dtype dtype;
    int bnhd;
    int splits; /* args->num_splits */
    int page_size; /* paged K/V: pools of pages of this many rows, shuffled (0 = contiguous) */
    int page_linear; /* the block table in pool order instead of shuffled */
    int varlen_n;    /* a varlen batch of these b = varlen_n sequence lengths (nq = nk = the longest), or 0 */
    const int *varlen;
    int mods;        /* FAJIT_MOD_* of the config flags: the arguments get the values of --window etc. */
    int kv8;         /* --kv-dtype e4m3: K and V are e4m3 bytes (an FP8 K/V cache; descales 0, i.e. 1.0) */
} bench_shape;

typedef struct bench_result {
    double median_ms, min_ms, tflops;
    int sets;
    fajit_config cfg;
    const char *source; /* "tuned", "heuristic", "flags+tuned" or "flags" */
    fajit_kernel_info info;
    char ran[448]; /* fajit_last_forward() after the timed calls */
} bench_result;

/* ---- flags ------------------------------------------------------------------------------------ */

static void bench_usage(FILE *f)
{
    fputs("usage: fagen bench [shape flags] [config flags] [--reps N] [--warmup N] [--device N] [--untuned]\n"
          "       fagen bench --grid first [config flags]\n"
          "       fagen bench --latency [config flags]\n"
          "Time forward attention on the GPU: median of >= 20 calls between CUDA events, queued behind a\n"
          "sleeping kernel so that no host time is in them; inputs rotated\n"
          "over enough buffer sets to exceed 256 MB, TFLOP/s = 4*B*H*Nq*Nk*D/t (x0.5 causal).\n\n"
          "  --batch B                      default 16384 / seqlen (at least 1)\n"
          "  --heads H                      query heads, default 2048 / headdim\n"
          "  --heads-kv H                   kv heads (GQA), default = --heads\n"
          "  --seqlen N                     query length, default 4096\n"
          "  --seqlen-k N                   key length, default = --seqlen\n"
          "  --layout bhnd|bnhd             tensor layout, default bhnd\n"
          "  --reps N                       timed calls (>= 20, default 30)\n"
          "  --warmup N                     untimed calls first (default 10)\n"
          "  --settle-ms T                  then untimed calls until about T ms of GPU time have run (default 300): the\n"
          "                                 clocks settle under the power cap, as in a long run (0: no settling)\n"
          "  --grid first                   D 64/128/256 x N 4096/16384, B*N = 16384, H*D = 2048, both masks\n"
          "  --grid decode                  B/Hq/Hkv/Nk 1/32/32/32k, 1/32/8/128k, 8/32/8/8k, 64/32/8/2k, 1/8/1/512k x\n"
          "                                 Nq 1, 4, 16 (D 128 unless --headdim; --causal for causal; --seqlen 1, 4\n"
          "                                 or 16: that Nq only): GB/s of K + V\n"
          "  --splits N                     split-KV: 0 the heuristic (default), 1 none, 2..1024 forced; reports GB/s\n"
          "  --page-size N                  paged K/V: pools of N-row pages (a multiple of 16) in a shuffled block table\n"
          "  --page-order shuffled|linear   the block table's order (default shuffled; linear: entry i is page i, the\n"
          "                                 K/V bytes then lie as in a contiguous cache: the paging cost without the\n"
          "                                 scattered reads)\n"
          "  --varlen L1,L2,...             one varlen batch (cu_seqlens_q = cu_seqlens_k, packed [T, H, D]) of these\n"
          "                                 sequence lengths (heads from --heads / --heads-kv; TFLOP/s of each\n"
          "                                 sequence's own pairs)\n"
          "  --latency                      time getting a kernel: a new process with empty caches (PTX generation,\n"
          "                                 compiler load, compile), then a disk-cache hit in another new process\n"
          "  --untuned                      ignore tuned winners (fagen tune): the built-in heuristic only\n"
          "  --device N                     CUDA device ordinal (default 0)\n\n"
          "config flags (omitted ones: the library heuristic for the shape):\n",
          f);
    fagen_print_config_help(f);
    fputs("\nexample: fagen bench --headdim 128 --seqlen 16384 --causal\n", f);
}

/* An int flag of bench's own: returns FAGEN_ARG_NOT_MINE if argv[*i] is none of them. */
static int bench_int_flag(int argc, char **argv, int *i, bench_cli *o)
{
    static const fagen_int_flag k_ints[] = {
        {"--batch", offsetof(bench_cli, batch), 1, 65535},
        {"--heads", offsetof(bench_cli, heads), 1, 65535},
        {"--heads-kv", offsetof(bench_cli, heads_kv), 1, 65535},
        {"--seqlen", offsetof(bench_cli, seqlen), 1, 1 << 24},
        {"--seqlen-k", offsetof(bench_cli, seqlen_k), 1, 1 << 24},
        {"--reps", offsetof(bench_cli, reps), BENCH_MIN_REPS, 100000},
        {"--warmup", offsetof(bench_cli, warmup), 0, 100000},
        {"--settle-ms", offsetof(bench_cli, settle_ms), 0, 60000},
        {"--device", offsetof(bench_cli, device), 0, 1023},
        {"--splits", offsetof(bench_cli, splits), 0, FAJIT_MAX_SPLITS},
        {"--page-size", offsetof(bench_cli, page_size), 16, 1 << 20},
    };
    return fagen_parse_int_flag(argc, argv, i, k_ints, sizeof k_ints / sizeof k_ints[0], o);
}

/* --grid and --layout take a word. */
static int bench_word_flag(int argc, char **argv, int *i, bench_cli *o)
{
    char flag[64];
    int is_grid = fagen_flag_is(argv[*i], "--grid");
    int is_layout = fagen_flag_is(argv[*i], "--layout");
    int is_order = fagen_flag_is(argv[*i], "--page-order");
    if (!is_grid && !is_layout && !is_order) return FAGEN_ARG_NOT_MINE;
    const char *val = fagen_flag_value(argc, argv, i, flag, sizeof flag);
    if (!val) return FAGEN_ARG_ERROR;
    if (is_grid && strcmp(val, "first") == 0) o->grid_first = 1;
    else if (is_grid && strcmp(val, "decode") == 0) o->grid_decode = 1;
    else if (is_layout && strcmp(val, "bhnd") == 0) o->bnhd = 0;
    else if (is_layout && strcmp(val, "bnhd") == 0) o->bnhd = 1;
    else if (is_order && strcmp(val, "shuffled") == 0) o->page_linear = 0;
    else if (is_order && strcmp(val, "linear") == 0) o->page_linear = 1;
    else {
        fprintf(stderr, "fagen: %s %s: must be %s\n", flag, val,
                is_grid ? "first or decode" : is_layout ? "bhnd or bnhd" : "shuffled or linear");
        return FAGEN_ARG_ERROR;
    }
    return FAGEN_ARG_TAKEN;
}

/* The flags into *o; --help prints the usage (then o->help is set and FAGEN_EXIT_OK returned). */
static int bench_parse(int argc, char **argv, bench_cli *o)
{
    memset(o, 0, sizeof *o);
    o->splits = -1;
    o->reps = 30;
    o->warmup = 10;
    o->settle_ms = BENCH_SETTLE_MS;
    fagen_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        int r;
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            o->help = 1;
            bench_usage(stdout);
            return FAGEN_EXIT_OK;
        }
        if (fagen_flag_once(&seen, w) != FAGEN_ARG_TAKEN) return FAGEN_EXIT_USAGE;
        if (strcmp(w, "--latency") == 0) {
            o->latency = 1;
            continue;
        }
        if (strcmp(w, "--untuned") == 0) {
            o->untuned = 1;
            continue;
        }
        if (fagen_flag_is(w, "--varlen")) {
            char flag[64];
            const char *val = fagen_flag_value(argc, argv, &i, flag, sizeof flag);
            if (!val || fagen_parse_int_list(flag, val, 0, 1 << 24, o->varlen, FAGEN_VARLEN_MAX, &o->varlen_n))
                return FAGEN_EXIT_USAGE;
            continue;
        }
        r = bench_int_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE) r = bench_word_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE) r = fagen_parse_config_flag(argc, argv, &i, &o->user);
        if (r == FAGEN_ARG_NOT_MINE) {
            fprintf(stderr, "fagen: %s: unknown flag for 'bench' (see fagen bench --help)\n", w);
            return FAGEN_EXIT_USAGE;
        }
        if (r == FAGEN_ARG_ERROR) return FAGEN_EXIT_USAGE;
    }
    if ((o->grid_first || o->grid_decode) && o->latency) {
        fprintf(stderr, "fagen: --grid and --latency: give one of them\n");
        return FAGEN_EXIT_USAGE;
    }
    if (o->grid_decode && o->seqlen && o->seqlen != 1 && o->seqlen != 4 && o->seqlen != 16) {
        fprintf(stderr, "fagen: --seqlen %d with --grid decode: must be 1, 4 or 16 (the table's Nq; omit it for all "
                        "three)\n", o->seqlen);
        return FAGEN_EXIT_USAGE;
    }
    if (o->varlen_n && (o->grid_first || o->grid_decode || o->latency || o->page_size || o->splits >= 0)) {
        fprintf(stderr, "fagen: --varlen times one packed batch: not with --grid, --latency, --page-size or --splits\n");
        return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

/* ---- buffers ---------------------------------------------------------------------------------- */

typedef struct bench_sets {
    int n;
    fajit_attention_args args[BENCH_MAX_SETS];
    fj_CUdeviceptr mem[BENCH_MAX_SETS][4]; /* q, k, v, o (paged: k, v are the pools) */
    fj_CUdeviceptr table;                  /* paged: one shuffled block table for every set; varlen: cu_seqlens */
    fj_CUdeviceptr mods_mem;               /* --sinks / --alibi: float32 sinks [Hq] then slopes [Hq] */
} bench_sets;

static void bench_sets_free(const fj_cuda_api *cu, bench_sets *s)
{
    for (int i = 0; i < s->n; i++)
        for (int t = 0; t < 4; t++)
            if (s->mem[i][t]) cu->cuMemFree(s->mem[i][t]);
    if (s->table) cu->cuMemFree(s->table);
    if (s->mods_mem) cu->cuMemFree(s->mods_mem);
    s->table = 0, s->mods_mem = 0;
    s->n = 0;
}

static fajit_attention_args bench_args(const bench_shape *s)
{
    fajit_attention_args a;
    memset(&a, 0, sizeof a);
    a.dtype = s->dtype;
    a.batch = s->b, a.heads_q = s->hq, a.heads_kv = s->hkv;
    a.seqlen_q = s->nq, a.seqlen_k = s->nk, a.head_dim = s->d, a.causal = s->causal;
    if (s->bnhd) fajit_args_set_bnhd_strides(&a);
    else fajit_args_set_bhnd_strides(&a);
    a.num_splits = s->splits;
    a.kv_dtype = s->kv8 ? FAJIT_DTYPE_E4M3 : 0;
    const fagen_mod_values *mv = fagen_mods();
    a.struct_size = sizeof a;
    a.window = s->mods & FAJIT_MOD_WINDOW ? 1 : 0;
    a.window_left = a.window ? mv->window_left : 0, a.window_right = a.window ? mv->window_right : 0;
    a.softcap = s->mods & FAJIT_MOD_SOFTCAP ? mv->softcap : 0.0f;
    a.attention_chunk = s->mods & FAJIT_MOD_CHUNK ? mv->chunk : 0;
    return a;
}

/* --sinks / --alibi: one device buffer of sinks (0.5 each: a sink about as heavy as one key) and ALiBi slopes
 * 2^(-8 (h + 1) / Hq) (BLOOM's), shared by every set. */
static fajit_status bench_mods(const fj_cuda_api *cu, const bench_shape *s, bench_sets *sets)
{
    if (!(s->mods & (FAJIT_MOD_SINKS | FAJIT_MOD_ALIBI))) return FAJIT_OK;
    size_t n = (size_t)s->hq;
    float *h = malloc(2 * n * sizeof *h);
    if (!h) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "bench: sinks / slopes of %d heads", s->hq);
    for (size_t i = 0; i < n; i++) h[i] = 0.5f, h[n + i] = (float)pow(2.0, -8.0 * (double)(i + 1) / (double)n);
    fj_CUresult rc = cu->cuMemAlloc(&sets->mods_mem, 2 * n * sizeof *h);
    if (rc == 0) rc = cu->cuMemcpyHtoD(sets->mods_mem, h, 2 * n * sizeof *h);
    free(h);
    if (rc != 0) return fj_cuda_fail(rc, "cuMemAlloc / cuMemcpyHtoD (bench sinks and slopes)");
    for (int i = 0; i < sets->n; i++) {
        if (s->mods & FAJIT_MOD_SINKS) sets->args[i].sinks = sets->mods_mem;
        if (s->mods & FAJIT_MOD_ALIBI) sets->args[i].alibi_slopes = sets->mods_mem + n * sizeof(float);
    }
    return FAJIT_OK;
}

/* Paged K/V: one block table (a shuffled permutation of the pool's pages, or pool order with --page-order
 * linear) for every set, whose args then read K and V as pools of [pages, page_size, Hkv, D]. The context is
 * current. */
static fajit_status bench_paged(const fj_cuda_api *cu, const bench_shape *s, int max_pages, bench_sets *sets)
{
    size_t n = (size_t)s->b * (size_t)max_pages;
    int32_t *table = malloc(sizeof(int32_t) * n);
    if (!table) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "bench: block table of %zu entries", n);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) table[i] = (int32_t)i;
    for (size_t i = n - 1; i > 0 && !s->page_linear; i--) { /* Fisher-Yates, xorshift */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t j = (size_t)(x % (i + 1));
        int32_t t = table[i];
        table[i] = table[j], table[j] = t;
    }
    fj_CUresult rc = cu->cuMemAlloc(&sets->table, sizeof(int32_t) * n);
    if (rc == 0) rc = cu->cuMemcpyHtoD(sets->table, table, sizeof(int32_t) * n);
    free(table);
    if (rc != 0) return fj_cuda_fail(rc, "bench: the block table");
    int64_t st[3] = {(int64_t)s->page_size * s->hkv * s->d, s->d, (int64_t)s->hkv * s->d};
    for (int i = 0; i < sets->n; i++) {
        fajit_attention_args *a = &sets->args[i];
        a->struct_size = sizeof *a;
        a->block_table = sets->table, a->max_pages = max_pages, a->page_size = s->page_size;
        memcpy(a->k_stride, st, sizeof st);
        memcpy(a->v_stride, st, sizeof st);
    }
    return FAJIT_OK;
}

/* Varlen: packed rows [T, H, D] and one cu_seqlens array (queries and keys alike) for every set. */
static int64_t varlen_rows(const bench_shape *s)
{
    int64_t t = 0;
    for (int i = 0; i < s->varlen_n; i++) t += s->varlen[i];
    return t;
}

static fajit_status bench_varlen(const fj_cuda_api *cu, const bench_shape *s, bench_sets *sets)
{
    int32_t cu_host[FAGEN_VARLEN_MAX + 1];
    cu_host[0] = 0;
    for (int i = 0; i < s->varlen_n; i++) cu_host[i + 1] = cu_host[i] + s->varlen[i];
    size_t bytes = sizeof(int32_t) * (size_t)(s->varlen_n + 1);
    fj_CUresult rc = cu->cuMemAlloc(&sets->table, bytes);
    if (rc == 0) rc = cu->cuMemcpyHtoD(sets->table, cu_host, bytes);
    if (rc != 0) return fj_cuda_fail(rc, "bench: cu_seqlens");
    int64_t q[3] = {0, s->d, (int64_t)s->hq * s->d}, k[3] = {0, s->d, (int64_t)s->hkv * s->d};
    for (int i = 0; i < sets->n; i++) {
        fajit_attention_args *a = &sets->args[i];
        a->struct_size = sizeof *a;
        a->cu_seqlens_q = a->cu_seqlens_k = sets->table;
        memcpy(a->q_stride, q, sizeof q), memcpy(a->o_stride, q, sizeof q);
        memcpy(a->k_stride, k, sizeof k), memcpy(a->v_stride, k, sizeof k);
    }
    return FAJIT_OK;
}

/* n e4m3 bytes of N(0, 1) values (seed): a byte a draw from a 65536-entry table of the normal's quantiles in e4m3
 * (the sorted e4m3 roundings of 65536 normal samples), about 1 ns a byte. Box-Muller and the rounding a byte cost
 * ~60 ns on the 2-core CI machine: the decode grid's e4m3 rows (1-byte K / V, so twice the sets to span the
 * rotation) made 1.5e9 of them, ~45-90 s of host time a `fagen bench --grid decode --kv-dtype e4m3` run, which
 * hit the 60 s limit of the session-5 sweep on its last row (B1 H8/1 N512k: 3 sets of 2 x 64 MB). */
static int e4m3_cmp(const void *a, const void *b)
{
    double x = fj_e4m3_to_f64(*(const uint8_t *)a), y = fj_e4m3_to_f64(*(const uint8_t *)b);
    return (x > y) - (x < y);
}

static void bench_fill_e4m3(uint8_t *dst, size_t n, uint64_t seed)
{
    enum { Q = 65536 };
    static uint8_t table[Q];
    static int made;
    if (!made) {
        uint16_t *h = malloc(Q * sizeof *h);
        if (!h) { /* the slow way */
            for (size_t i = 0; i < n; i++) dst[i] = 0x38; /* 1.0 */
            return;
        }
        fj_half_fill_normal(FAJIT_DTYPE_F16, h, Q, 0x5851f42d4c957f2dull);
        for (int i = 0; i < Q; i++) table[i] = fj_e4m3_from_f64(fj_half_to_f32(FAJIT_DTYPE_F16, h[i]));
        free(h);
        qsort(table, Q, 1, e4m3_cmp);
        made = 1;
    }
    uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        dst[i] = table[x >> 48];
    }
}

/* Allocate and fill sets until they span BENCH_ROTATE_BYTES (at least one; fewer if memory runs out).
 * The context is current. */
static fajit_status bench_sets_make(const fj_cuda_api *cu, const bench_shape *s, bench_sets *sets)
{
    size_t q_bytes = (size_t)s->b * s->hq * s->nq * s->d * 2, kv_bytes = (size_t)s->b * s->hkv * s->nk * s->d * 2;
    int max_pages = s->page_size ? (s->nk + s->page_size - 1) / s->page_size : 0;
    if (s->page_size) kv_bytes = (size_t)s->b * max_pages * s->page_size * s->hkv * s->d * 2; /* whole pages */
    if (s->varlen_n) {
        int64_t t = varlen_rows(s) > 0 ? varlen_rows(s) : 1;
        q_bytes = (size_t)t * s->hq * s->d * 2, kv_bytes = (size_t)t * s->hkv * s->d * 2;
    }
    if (s->kv8) kv_bytes /= 2; /* one byte an element */
    size_t bytes[4] = {q_bytes, kv_bytes, kv_bytes, q_bytes};
    double set_bytes = 2.0 * (double)(q_bytes + kv_bytes);
    int want = (int)(BENCH_ROTATE_BYTES / set_bytes) + 1;
    uint16_t *host = malloc(q_bytes > kv_bytes ? q_bytes : kv_bytes);
    if (!host) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "bench: host buffer of %zu + %zu bytes", q_bytes, kv_bytes);
    memset(sets, 0, sizeof *sets);
    fj_CUresult rc = 0;
    for (int i = 0; i < (want < BENCH_MAX_SETS ? want : BENCH_MAX_SETS) && rc == 0; i++) {
        for (int t = 0; t < 4 && rc == 0; t++) rc = cu->cuMemAlloc(&sets->mem[i][t], bytes[t]);
        /* every tensor of every set gets its own N(0, 1) data: with Q = K the scores' diagonal would
         * dominate, P would be nearly all zeros and the MMAs would run cooler and faster than on real data */
        for (int t = 0; t < 3 && rc == 0; t++) {
            uint64_t seed = 0x2545f4914f6cdd1dull + 7919u * (uint64_t)(4 * i + t);
            /* e4m3 bytes of N(0, 1) values: an FP8 K/V cache's K and V, and all three with --dtype e4m3 (16-bit
             * patterns read as e4m3 would hold NaN bytes, 0x7F / 0xFF, in about one element in 128) */
            if ((t && s->kv8) || s->dtype == FAJIT_DTYPE_E4M3)
                bench_fill_e4m3((uint8_t *)host, bytes[t], seed);
            else
                fj_half_fill_normal(s->dtype, host, bytes[t] / 2, seed);
            rc = cu->cuMemcpyHtoD(sets->mem[i][t], host, bytes[t]);
        }
        if (rc == 0) rc = cu->cuMemsetD8(sets->mem[i][3], 0, bytes[3]);
        sets->n = i + 1;
        if (rc != 0) { /* out of memory: keep the sets made so far */
            for (int t = 0; t < 4; t++)
                if (sets->mem[i][t]) cu->cuMemFree(sets->mem[i][t]), sets->mem[i][t] = 0;
            sets->n = i;
        }
        sets->args[i] = bench_args(s);
        sets->args[i].q = sets->mem[i][0], sets->args[i].k = sets->mem[i][1];
        sets->args[i].v = sets->mem[i][2], sets->args[i].o = sets->mem[i][3];
    }
    free(host);
    if (sets->n == 0) return fj_cuda_fail(rc, "cuMemAlloc (bench inputs)");
    fajit_status st = bench_mods(cu, s, sets);
    if (st != FAJIT_OK) return st;
    if (s->varlen_n) return bench_varlen(cu, s, sets);
    return s->page_size ? bench_paged(cu, s, max_pages, sets) : FAJIT_OK;
}

/* ---- timing ----------------------------------------------------------------------------------- */

/* The config to time: the user's fields, the rest from the tuned winner or the heuristic for this shape;
 * *source says which. */
static fajit_status bench_config(fajit_context *ctx, const bench_cli *o, const bench_shape *s, fajit_config *cfg,
                                 const char **source)
{
    fajit_shape shape = {s->b, s->hq, s->hkv, s->nq, s->nk};
    fajit_tune_result tuned;
    const fajit_config *u = &o->user;
    *cfg = o->user;
    cfg->dtype = s->dtype, cfg->head_dim = s->d, cfg->causal = s->causal;
    fajit_attention_args a = bench_args(s);
    fajit_status st = fj_forward_fill(ctx, &shape, &a, cfg); /* the library's own choice (a window's schedule too) */
    if (st != FAJIT_OK) return st;
    int flags = fagen_config_has_tiles(u);
    int from_tune = fajit_tune_lookup(ctx, &shape, s->dtype, s->d, s->causal, &tuned) == FAJIT_OK && tuned.found;
    if (from_tune) { /* the winner with the flags' fields on top: what fill gives when it used the winner */
        fajit_config w = *u;
        if (!w.arch) w.arch = tuned.best.arch;
        w.dtype = s->dtype, w.head_dim = s->d, w.causal = s->causal;
        fj_config_overlay(&w, &tuned.best);
        from_tune = fj_config_same(&w, cfg);
    }
    *source = from_tune ? (flags ? "flags+tuned" : "tuned") : flags ? "flags" : "heuristic";
    return FAJIT_OK;
}

/* reps timed calls, each between two events, behind the queue-ahead kernel (fj_timer_run, tune_time.c: fajit_tune's
 * loop); *ms receives the per-call times. Context is current. */
static fajit_status bench_loop(fajit_context *ctx, const bench_sets *sets, const fajit_config *cfg, int warmup,
                               int settle_ms, int reps, double *ms)
{
    /* warm-up, then enough untimed calls to fill settle_ms of GPU time: a short burst runs at boost clocks that a
     * long run under the power cap does not keep (H200, D128 causal B2 N8k: 0.80 ms a call after 10 calls, 0.92 ms
     * in a harness that settles first) */
    fj_timer t;
    fajit_status st = fj_timer_open(ctx, reps, &t); /* (a failed open leaves t closed) */
    if (st != FAJIT_OK) return st;
    st = fj_timer_run(ctx, &t, sets->args, sets->n, cfg, warmup, settle_ms, 100000, ms);
    fj_timer_close(ctx, &t);
    return st;
}

/* FLOPs of a window / chunk run: 4 x B x Hq x D x the (query, key) pairs the local mask keeps (fajit.h's
 * definitions, bottom-right aligned), counted row by row. */
static double local_flops(const bench_shape *s)
{
    const fagen_mod_values *mv = fagen_mods();
    double pairs = 0.0;
    for (int i = 0; i < s->nq; i++) {
        long a = (long)i + s->nk - s->nq, lo = 0, hi = s->nk - 1;
        if (s->causal && a < hi) hi = a;
        if (s->mods & FAJIT_MOD_WINDOW) {
            if (mv->window_left >= 0 && a - mv->window_left > lo) lo = a - mv->window_left;
            if (mv->window_right >= 0 && a + mv->window_right < hi) hi = a + mv->window_right;
        }
        if ((s->mods & FAJIT_MOD_CHUNK) && mv->chunk > 0) {
            if (a < 0) continue;
            long c0 = a / mv->chunk * mv->chunk;
            if (c0 > lo) lo = c0;
            if (c0 + mv->chunk - 1 < hi) hi = c0 + mv->chunk - 1;
        }
        if (hi >= lo) pairs += (double)(hi - lo + 1);
    }
    return 4.0 * s->b * s->hq * s->d * pairs;
}

static fajit_status bench_time(fajit_context *ctx, const bench_cli *o, const bench_shape *s, bench_result *res)
{
    bench_sets *sets = calloc(1, sizeof *sets);
    double *ms = calloc((size_t)o->reps, sizeof *ms);
    fajit_kernel *kernel = NULL;
    fajit_status st = sets && ms ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "bench: host memory");
    memset(res, 0, sizeof *res);
    if (st == FAJIT_OK) st = bench_config(ctx, o, s, &res->cfg, &res->source);
    if (st == FAJIT_OK) st = fajit_kernel_get(ctx, &res->cfg, &kernel, NULL);
    if (st == FAJIT_OK) st = fajit_kernel_get_info(kernel, &res->info);
    if (st == FAJIT_OK) st = fj_context_push(ctx);
    if (st != FAJIT_OK) {
        free(sets);
        free(ms);
        return st;
    }
    st = bench_sets_make(ctx->cu, s, sets);
    if (st == FAJIT_OK) st = bench_loop(ctx, sets, &res->cfg, o->warmup, o->settle_ms, o->reps, ms);
    if (st == FAJIT_OK) snprintf(res->ran, sizeof res->ran, "%s", fajit_last_forward());
    if (st == FAJIT_OK) {
        res->sets = sets->n;
        res->median_ms = fj_sort_median(ms, o->reps);
        res->min_ms = ms[0]; /* sorted by fj_sort_median() */
        double flops = s->mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_CHUNK) ? local_flops(s)
                                                                       : fj_attention_flops(s->b, s->hq, s->nq, s->nk, s->d, s->causal);
        if (s->varlen_n) flops = 0.0; /* each sequence's own pairs */
        for (int i = 0; i < s->varlen_n; i++)
            flops += fj_attention_flops(1, s->hq, s->varlen[i], s->varlen[i], s->d, s->causal);
        res->tflops = flops / (res->median_ms * 1e-3) / 1e12;
    }
    bench_sets_free(ctx->cu, sets);
    fj_context_pop(ctx);
    free(sets);
    free(ms);
    return st;
}

static void bench_print_header(void)
{
    printf("%-46s %-28s %9s %9s %8s %4s %6s %5s %4s  %s\n", "config", "shape", "median ms", "min ms", "TFLOP/s",
           "sets", "smem", "regs", "spill", "from");
}

static void bench_print(const bench_shape *s, const bench_result *r)
{
    char cfg[128], shape[96];
    fajit_config_format(&r->cfg, cfg, sizeof cfg);
    snprintf(shape, sizeof shape, "B%d H%d/%d N%d/%d D%d%s%s", s->b, s->hq, s->hkv, s->nq, s->nk, s->d,
             s->causal ? " causal" : "", s->bnhd ? " bnhd" : "");
    if (s->varlen_n)
        snprintf(shape, sizeof shape, "varlen n%d T%lld max%d H%d/%d D%d%s", s->varlen_n, (long long)varlen_rows(s),
                 s->nq, s->hq, s->hkv, s->d, s->causal ? " causal" : "");
    /* a call the decode path took (seqlen_q <= 128 on a small grid) or the sm_80 fallback ran other kernels than
     * the config: say which (fajit_last_forward) */
    int other = strcmp(r->ran, cfg) != 0;
    printf("%-46s %-28s %9.3f %9.3f %8.1f %4d %6d %5d %4d  %s%s%s\n", cfg, shape, r->median_ms, r->min_ms, r->tflops,
           r->sets, r->info.smem_bytes, r->info.registers, r->info.spill_bytes, r->source, other ? "; ran: " : "",
           other ? r->ran : "");
    fflush(stdout);
}

/* Decode shapes: GB/s of K + V (each KV head once) and what ran. */
static void bench_print_decode_header(void)
{
    printf("%-30s %9s %9s %8s %8s  %s\n", "shape", "median ms", "min ms", "GB/s KV", "TFLOP/s", "kernel(s) run");
}

static void bench_print_decode(const bench_shape *s, const bench_result *r)
{
    char shape[96];
    double kv_bytes = 2.0 * s->b * s->hkv * (double)s->nk * s->d * (s->kv8 ? 1.0 : 2.0);
    snprintf(shape, sizeof shape, "B%d H%d/%d N%d/%d D%d%s", s->b, s->hq, s->hkv, s->nq, s->nk, s->d,
             s->causal ? " causal" : "");
    if (s->page_size)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " p%d%s", s->page_size, s->page_linear ? "lin" : "");
    printf("%-30s %9.4f %9.4f %8.0f %8.1f  %s\n", shape, r->median_ms, r->min_ms, kv_bytes / (r->median_ms * 1e-3) / 1e9,
           r->tflops, r->ran);
    fflush(stdout);
}

/* ---- latency ---------------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static const char *source_name(fajit_cache_source s)
{
    return s == FAJIT_SOURCE_MEMORY     ? "memory"
           : s == FAJIT_SOURCE_DISK     ? "disk"
           : s == FAJIT_SOURCE_PREBUILT ? "prebuilt"
                                        : "compiled";
}

/* A new context on o->device with the disk cache in dir; *ms is how long creating it took. */
static fajit_status lat_context(const bench_cli *o, const char *dir, fajit_context **ctx, double *ms)
{
    fajit_context_options opt = fajit_context_options_default();
    opt.device = o->device;
    opt.disk_cache = 1;
    opt.cache_dir = dir;
    double t0 = fj_now_ms();
    fajit_status st = fajit_context_create(&opt, ctx);
    *ms = fj_now_ms() - t0;
    return st;
}

static fajit_status lat_get(fajit_context *ctx, const fajit_config *cfg, const char *what)
{
    fajit_kernel *k;
    fajit_cache_source src = FAJIT_SOURCE_COMPILED;
    double t0 = fj_now_ms();
    fajit_status st = fajit_kernel_get(ctx, cfg, &k, &src);
    double ms = fj_now_ms() - t0;
    if (st == FAJIT_OK) printf("  %-58s %10.3f ms  (%s)\n", what, ms, source_name(src));
    return st;
}

static fajit_status lat_ptx(const fajit_config *cfg)
{
    double times[21];
    size_t len = 0;
    for (int i = 0; i < 21; i++) {
        char *ptx = NULL;
        double t0 = fj_now_ms();
        fajit_status st = fajit_generate_ptx(cfg, 0, &ptx, &len);
        times[i] = fj_now_ms() - t0;
        fajit_free(ptx);
        if (st != FAJIT_OK) return st;
    }
    printf("  %-58s %10.3f ms  (then median %.3f ms; %zu bytes)\n", "PTX generation, first call", times[0],
           fj_sort_median(times + 1, 20), len);
    return FAJIT_OK;
}

/* Whether the compiler of cfg's path is loaded in this process (compile.c: NVRTC for whole-program plans). */
static const char *lat_compiler_state(const fajit_config *cfg)
{
    fj_plan plan;
    if (fj_plan_build(cfg, &plan) != FAJIT_OK) return "?";
    if (plan.whole_program) return fj_nvrtc_loaded() ? "NVRTC loaded" : "NVRTC not loaded";
    return fj_nvjitlink_loaded() ? "nvJitLink loaded" : "nvJitLink not loaded";
}

/*
 * One process of the latency run (a fork of fagen, before it touched CUDA): a context with the disk cache
 * in dir and the driver's JIT cache (where nvJitLink keeps its own) off and empty. cold: the disk cache is
 * empty; the first kernel and a second one (the mask flipped) are compiled. warm: the first process's
 * entries are there; the kernel is read from disk, then from memory.
 */
static fajit_status lat_process(const bench_cli *o, const char *dir, const char *driver_dir, int cold)
{
    fajit_context *ctx = NULL;
    double ms;
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    setenv("CUDA_CACHE_PATH", driver_dir, 1);
    fajit_status st = lat_context(o, dir, &ctx, &ms);
    if (st != FAJIT_OK) return st;
    fajit_config cfg = o->user;
    if (!cfg.head_dim) cfg.head_dim = 128;
    if (!cfg.dtype) cfg.dtype = FAJIT_DTYPE_BF16;
    st = fajit_config_fill(ctx, NULL, &cfg);
    if (st == FAJIT_OK && cold) {
        char text[128];
        fajit_config_format(&cfg, text, sizeof text);
        printf("latency of %s on %s (%s)\n", text, ctx->device_name, ctx->sm);
        printf(" process 1: empty caches\n");
        printf("  %-58s %10.3f ms\n", "context create (loads libcuda, makes the CUDA context)", ms);
        st = lat_ptx(&cfg);
        if (st == FAJIT_OK) st = lat_get(ctx, &cfg, "first kernel: prebuilt, else generate + compile, load");
        fajit_config other = cfg;
        other.causal = !cfg.causal;
        if (st == FAJIT_OK) st = lat_get(ctx, &other, "second kernel (mask flipped): compiler already loaded");
    } else if (st == FAJIT_OK) {
        printf(" process 2: a new process, the disk cache of process 1\n");
        printf("  %-58s %10.3f ms\n", "context create", ms);
        st = lat_get(ctx, &cfg, "disk-cache hit");
        if (st == FAJIT_OK) printf("  %-58s %13s  (%s)\n", "compiler", "", lat_compiler_state(&cfg));
        if (st == FAJIT_OK) st = lat_get(ctx, &cfg, "memory-cache hit");
    }
    fajit_context_destroy(ctx);
    return st;
}

/* Run lat_process in a child; its status (FAJIT_ERR_INTERNAL when it could not be started or died). */
static fajit_status lat_fork(const bench_cli *o, const char *dir, const char *driver_dir, int cold)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return FAJIT_ERR_INTERNAL;
    if (pid == 0) {
        fajit_status st = lat_process(o, dir, driver_dir, cold);
        if (st != FAJIT_OK) fprintf(stderr, "fagen: bench --latency: %s\n", fajit_errmsg());
        fflush(stdout);
        _exit(st == FAJIT_OK ? 0 : 100 + (int)st);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return FAJIT_ERR_INTERNAL;
    int code = WEXITSTATUS(status);
    return code == 0 ? FAJIT_OK : code >= 100 ? (fajit_status)(code - 100) : FAJIT_ERR_INTERNAL;
}

static int bench_latency(const bench_cli *o)
{
    char dir[] = "/tmp/fagen-latency-XXXXXX", driver_dir[] = "/tmp/fagen-latency-driver-XXXXXX";
    if (!mkdtemp(dir) || !mkdtemp(driver_dir)) {
        fprintf(stderr, "fagen: bench --latency: cannot make a directory under /tmp\n");
        return FAGEN_EXIT_FAIL;
    }
    fajit_status st = lat_fork(o, dir, driver_dir, 1);
    if (st == FAJIT_OK) st = lat_fork(o, dir, driver_dir, 0);
    if (st == FAJIT_OK)
        printf("caches: fajit's disk cache a fresh directory (%s), its memory cache new with each process;\n"
               "the driver's JIT cache, which also holds nvJitLink's, off (CUDA_CACHE_DISABLE=1) and empty\n"
               "(CUDA_CACHE_PATH=%s); the OS page cache (the compiler's library files) not emptied;\n"
               "the kernels built into libfajit %s\n",
               dir, driver_dir,
               getenv("FAJIT_PREBUILT") && strcmp(getenv("FAJIT_PREBUILT"), "0") == 0
                   ? "not asked (FAJIT_PREBUILT=0)"
                   : "asked first (FAJIT_PREBUILT=0 times the compiler and the disk cache instead)");
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    nftw(driver_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return st == FAJIT_OK ? FAGEN_EXIT_OK : FAGEN_EXIT_FAIL; /* the child said why */
}

/* ---- the command ------------------------------------------------------------------------------ */

static bench_shape shape_from_flags(const bench_cli *o, int d, int n, int causal)
{
    bench_shape s;
    s.d = d;
    s.dtype = o->user.dtype ? o->user.dtype : FAJIT_DTYPE_BF16;
    s.kv8 = o->user.kv_dtype == FAJIT_DTYPE_E4M3;
    s.nq = n;
    s.nk = o->seqlen_k && !o->grid_first ? o->seqlen_k : n;
    s.b = o->batch && !o->grid_first ? o->batch : (16384 / n > 1 ? 16384 / n : 1);
    s.hq = o->heads && !o->grid_first ? o->heads : (2048 / d > 1 ? 2048 / d : 1);
    s.hkv = o->heads_kv && !o->grid_first ? o->heads_kv : s.hq;
    s.causal = causal;
    s.bnhd = o->bnhd;
    s.splits = o->splits > 0 ? o->splits : 0;
    s.page_size = o->page_size;
    s.page_linear = o->page_linear;
    s.varlen_n = o->varlen_n, s.varlen = o->varlen;
    s.mods = o->user.mods;
    if (o->varlen_n) { /* one packed batch: B sequences, seqlen_q = seqlen_k = the longest */
        s.b = o->varlen_n, s.nq = s.nk = 1;
        for (int i = 0; i < o->varlen_n; i++) s.nq = s.nk = o->varlen[i] > s.nq ? o->varlen[i] : s.nq;
    }
    return s;
}

static int bench_one(fajit_context *ctx, const bench_cli *o, const bench_shape *s)
{
    bench_result r;
    fajit_status st = bench_time(ctx, o, s, &r);
    if (st != FAJIT_OK) return fagen_report_status(st, "bench");
    if (o->grid_decode || o->splits >= 0 || o->page_size) bench_print_decode(s, &r);
    else bench_print(s, &r);
    return FAGEN_EXIT_OK;
}

/* The decode rows of issue 11 (B, Hq, Hkv, Nk) x Nq 1, 4, 16 (only Nq = --seqlen when given). */
static int bench_grid_decode(fajit_context *ctx, const bench_cli *o)
{
    static const int rows[][4] = {{1, 32, 32, 32768}, {1, 32, 8, 131072}, {8, 32, 8, 8192}, {64, 32, 8, 2048},
                                  {1, 8, 1, 524288}};
    static const int nqs[] = {1, 4, 16};
    int rc = FAGEN_EXIT_OK;
    for (int ni = 0; ni < 3; ni++)
        for (int ri = 0; ri < 5; ri++) {
            if (o->seqlen && o->seqlen != nqs[ni]) continue;
            bench_shape s = shape_from_flags(o, o->user.head_dim ? o->user.head_dim : 128, nqs[ni], o->user.causal);
            s.b = rows[ri][0], s.hq = rows[ri][1], s.hkv = rows[ri][2], s.nk = rows[ri][3];
            int r = bench_one(ctx, o, &s);
            if (r != FAGEN_EXIT_OK) rc = r;
        }
    return rc;
}

static int bench_grid_first(fajit_context *ctx, const bench_cli *o)
{
    static const int dims[] = {64, 128, 256}, lens[] = {4096, 16384};
    int rc = FAGEN_EXIT_OK;
    for (int di = 0; di < 3; di++)
        for (int ni = 0; ni < 2; ni++)
            for (int causal = 0; causal <= 1; causal++) {
                if ((o->user.head_dim && o->user.head_dim != dims[di]) || (o->user.causal && !causal)) continue;
                bench_shape s = shape_from_flags(o, dims[di], lens[ni], causal);
                int r = bench_one(ctx, o, &s);
                if (r != FAGEN_EXIT_OK) rc = r;
            }
    return rc;
}

int fagen_args_bench(int argc, char **argv)
{
    bench_cli o;
    return bench_parse(argc, argv, &o);
}

int fagen_cmd_bench(int argc, char **argv)
{
    bench_cli o;
    fajit_context *ctx = NULL;
    int rc = bench_parse(argc, argv, &o);
    if (rc != FAGEN_EXIT_OK || o.help) return rc;
    if (o.latency) return bench_latency(&o);
    fajit_context_options opt = fajit_context_options_default();
    opt.device = o.device;
    if (o.untuned) opt.disk_cache = 0; /* no cache directory, no tune file: the heuristic only */
    fajit_status st = fajit_context_create(&opt, &ctx);
    if (st == FAJIT_ERR_INVALID_ARGUMENT) return fagen_report_status(st, "context"); /* e.g. FAJIT_CACHE_DIR too long */
    if (st != FAJIT_OK) {
        fprintf(stderr, "fagen: bench needs a GPU: %s\n", fajit_errmsg());
        return FAGEN_EXIT_FAIL;
    }
    printf("fagen bench on %s (%s): median of %d calls after %d warm-up calls and %d ms of settling\n",
           ctx->device_name, ctx->sm, o.reps, o.warmup, o.settle_ms);
    printf("tuned winners: %s\n", o.untuned ? "ignored (--untuned)"
                                  : fajit_context_tune_file(ctx)[0] ? fajit_context_tune_file(ctx)
                                                                     : "none (the disk cache is off)");
    if (o.grid_decode || o.splits >= 0 || o.page_size) bench_print_decode_header();
    else bench_print_header();
    if (o.grid_decode) {
        rc = bench_grid_decode(ctx, &o);
    } else if (o.grid_first) {
        rc = bench_grid_first(ctx, &o);
    } else {
        bench_shape s = shape_from_flags(&o, o.user.head_dim ? o.user.head_dim : 128, o.seqlen ? o.seqlen : 4096,
                                         o.user.causal);
        rc = bench_one(ctx, &o, &s);
    }
    fajit_context_destroy(ctx);
    return rc;
}
