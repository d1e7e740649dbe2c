/*
 * first_call.c - how long a process's first fajit_attention_forward takes, and (with --tuned) how long until
 * a tuned winner that was not compiled yet takes over from its stand-in. One run per process: the driver
 * script bench/first_call.sh starts one for each case with the caches it says, and prints the table.
 *
 *   build/bench_first_call [--headdim D] [--causal 0|1] [--dtype bf16|f16|e4m3] [--n N] [--nq N] [--batch B]
 *                          [--heads H] [--heads-kv H] [--tuned]
 *
 * --nq: seqlen_q when it is not --n (a decode step: --nq 1); --heads-kv: K/V heads (default --heads). e4m3: Q, K, V
 * of e4m3 bytes (descales 1), O bf16 - FlashAttention-3's FP8 inputs, on the sm_90a FP8 kernel.
 *
 * The context is made first and timed apart (in Python it exists before the call: torch's context). The call
 * is timed to its return and to the end of its kernel (cuCtxSynchronize). --tuned files a tuned winner for the
 * class in the context's table before the call (block_n other than the default's, what fagen tune would save):
 * the first call then runs a stand-in while the winner compiles on the worker thread; calls every 2 ms then
 * time when the winner serves (fajit_last_forward names it). The fajit disk cache is $FAJIT_CACHE_DIR (the
 * script gives each case a fresh one); FAJIT_PREBUILT=0 and FAJIT_JIT=sync are read as usual.
 * Prints one line: "RESULT key=value ...".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fajit.h"
#include "runtime/context.h"
#include "runtime/tune.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static const char *source_name(fajit_cache_source s)
{
    static const char *const names[] = {"memory", "disk", "compiled", "prebuilt", "fallback"};
    return (unsigned)s < 5 ? names[s] : "?";
}

static int die(const char *what)
{
    fprintf(stderr, "first_call: %s: %s\n", what, fajit_errmsg());
    return 1;
}

/* File a winner for a's class: the table's config with another block_n. */
static int put_winner(fajit_context *ctx, const fajit_attention_args *a, char *text, size_t size)
{
    fajit_shape shape = {a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k};
    fajit_config c = {.dtype = a->dtype, .head_dim = a->head_dim, .causal = a->causal};
    if (fajit_config_fill(ctx, &shape, &c) != FAJIT_OK) return die("fajit_config_fill");
    static const int tries[] = {96, 112, 64, 144, 48, 32};
    fajit_config w = c;
    int ok = 0;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0] && !ok; i++)
        for (int stages = c.stages; stages >= 1 && !ok; stages--) {
            w = c;
            w.block_n = tries[i], w.stages = stages;
            ok = w.block_n != c.block_n && fajit_config_check(&w) == FAJIT_OK;
        }
    if (!ok) return die("no winner config");
    fj_tune_record rec;
    memset(&rec, 0, sizeof rec);
    fj_tune_key_make(ctx, w.dtype, w.head_dim, w.causal, fj_tune_seqlen_class(&shape), &rec.key);
    rec.cfg = w;
    rec.tflops = 1;
    fj_tune_table_put(ctx, &rec);
    fajit_config_format(&w, text, size);
    return 0;
}

int main(int argc, char **argv)
{
    int d = 128, causal = 0, n = 4096, nq = 0, batch = 4, heads = 16, heads_kv = 0, tuned = 0;
    fajit_dtype dtype = FAJIT_DTYPE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "0";
        if (strcmp(argv[i], "--headdim") == 0) d = atoi(v), i++;
        else if (strcmp(argv[i], "--causal") == 0) causal = atoi(v), i++;
        else if (strcmp(argv[i], "--n") == 0) n = atoi(v), i++;
        else if (strcmp(argv[i], "--batch") == 0) batch = atoi(v), i++;
        else if (strcmp(argv[i], "--nq") == 0) nq = atoi(v), i++;
        else if (strcmp(argv[i], "--heads") == 0) heads = atoi(v), i++;
        else if (strcmp(argv[i], "--heads-kv") == 0) heads_kv = atoi(v), i++;
        else if (strcmp(argv[i], "--dtype") == 0) {
            if (strcmp(v, "f16") && strcmp(v, "bf16") && strcmp(v, "e4m3"))
                return fprintf(stderr, "first_call: --dtype %s: f16, bf16 or e4m3\n", v), 2;
            dtype = strcmp(v, "f16") == 0 ? FAJIT_DTYPE_F16 : strcmp(v, "e4m3") == 0 ? FAJIT_DTYPE_E4M3 : FAJIT_DTYPE_BF16;
            i++;
        }
        else if (strcmp(argv[i], "--tuned") == 0) tuned = 1;
        else return fprintf(stderr, "first_call: unknown argument %s (see the comment at the top)\n", argv[i]), 2;
    }
    fajit_context *ctx = NULL;
    double t0 = now_ms();
    if (fajit_context_create(NULL, &ctx) != FAJIT_OK) return die("fajit_context_create");
    double ctx_ms = now_ms() - t0;
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = dtype, a.batch = batch, a.heads_q = heads, a.heads_kv = heads_kv ? heads_kv : heads;
    a.seqlen_q = nq ? nq : n, a.seqlen_k = n;
    a.head_dim = d, a.causal = causal;
    fajit_args_set_bhnd_strides(&a);
    size_t bytes = (size_t)batch * heads * n * d * 2; /* (the largest tensor at 2 bytes an element) */
    fj_CUdeviceptr buf[4];
    if (fj_context_push(ctx) != FAJIT_OK) return die("push");
    for (int i = 0; i < 4; i++)
        if (ctx->cu->cuMemAlloc(&buf[i], bytes) || ctx->cu->cuMemsetD8(buf[i], 0x3c, bytes)) return die("cuMemAlloc");
    ctx->cu->cuCtxSynchronize();
    fj_context_pop(ctx);
    a.q = buf[0], a.k = buf[1], a.v = buf[2], a.o = buf[3];
    char winner[256] = "";
    if (tuned && put_winner(ctx, &a, winner, sizeof winner)) return 1;

    t0 = now_ms();
    if (fajit_attention_forward(ctx, &a, NULL) != FAJIT_OK) return die("fajit_attention_forward");
    double ret_ms = now_ms() - t0;
    fajit_cache_source src = fajit_last_forward_source();
    char ran[512];
    snprintf(ran, sizeof ran, "%s", fajit_last_forward());
    fj_context_push(ctx);
    ctx->cu->cuCtxSynchronize();
    fj_context_pop(ctx);
    double sync_ms = now_ms() - t0;

    double serve_ms = -1;
    int standin_calls = 0;
    if (tuned && src == FAJIT_SOURCE_FALLBACK) { /* until the winner serves (at most 60 s) */
        while (now_ms() - t0 < 60000) {
            struct timespec pause = {0, 2000000};
            nanosleep(&pause, NULL);
            if (fajit_attention_forward(ctx, &a, NULL) != FAJIT_OK) return die("fajit_attention_forward");
            if (fajit_last_forward_source() != FAJIT_SOURCE_FALLBACK && strcmp(fajit_last_forward(), winner) == 0) {
                serve_ms = now_ms() - t0;
                break;
            }
            standin_calls++;
            fj_context_push(ctx);
            ctx->cu->cuCtxSynchronize();
            fj_context_pop(ctx);
        }
    }
    printf("RESULT d=%d causal=%d dtype=%s n=%d nq=%d mode=%s ctx_ms=%.1f return_ms=%.2f sync_ms=%.2f source=%s "
           "winner_serves_ms=%.0f standin_calls=%d ran=\"%s\"\n",
           d, causal, dtype == FAJIT_DTYPE_F16 ? "f16" : dtype == FAJIT_DTYPE_E4M3 ? "e4m3" : "bf16", n, a.seqlen_q,
           tuned ? "tuned" : "default", ctx_ms, ret_ms,
           sync_ms, source_name(src), serve_ms, standin_calls, ran);
    fj_context_push(ctx);
    for (int i = 0; i < 4; i++) ctx->cu->cuMemFree(buf[i]);
    fj_context_pop(ctx);
    fajit_context_destroy(ctx);
    return 0;
}
