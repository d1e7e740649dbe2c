/*
 * test_tune_gpu.c - fajit_tune on a real GPU, kept tiny (3 candidates of one small class): every
 * candidate reaches the progress callback, the tune file is written, fajit_config_fill (in this
 * context and in a new one) returns the winner, the forward's cached choice for the class is reset
 * to it, and a tune with persist = 0 stays in its context. Then a decode class (fj_tune_decode, what
 * fagen tune --grid decode runs; B1 Hq8/Hkv1 Nq1 Nk32k): its winner is saved, the split choice of this
 * context and of a new one returns it, a forward with num_splits = 0 runs it (fajit_last_forward) and
 * fajit_attention_workspace_size sizes it. Skips (exit 77) without a GPU.
 * Run: ctest --test-dir build -L gpu -R test_tune_gpu --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fajit.h"
#include "runtime/context.h"
#include "runtime/decode.h"
#include "runtime/forward.h"
#include "runtime/half.h"
#include "runtime/tune.h"
#include "test_support.h"

static char *g_dir;

typedef struct progress_log {
    int candidates, skipped, notes, total, finals;
} progress_log;

static void on_progress(void *user, int index, int total, const fajit_config *cfg, double tflops, const char *note)
{
    progress_log *l = user;
    char text[128];
    assert_non_null(note);
    if (index < 0) {
        assert_null(cfg);
        l->notes++;
        print_message("  note: %s\n", note);
        return;
    }
    assert_non_null(cfg);
    assert_true(index < total);
    l->total = total;
    if (strncmp(note, "final:", 6) == 0) { /* a finalist reported again after the final round */
        assert_true(tflops > 0);
        l->finals++;
        print_message("  %d/%d %s\n", index + 1, total, note);
        return;
    }
    l->candidates++;
    l->skipped += tflops < 0;
    fajit_config_format(cfg, text, sizeof text);
    print_message("  %d/%d %-48s %s%.1f  %s\n", index + 1, total, text, tflops < 0 ? "skip " : "", tflops, note);
}

static fajit_context *context_new(void)
{
    fajit_context *ctx = NULL;
    fajit_status st = fj_test_context_in(g_dir, &ctx);
    if (st != FAJIT_OK) print_error("fajit_context_create: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    return ctx;
}

static int same_tiles(const fajit_config *a, const fajit_config *b)
{
    return a->arch == b->arch && a->block_m == b->block_m && a->block_n == b->block_n && a->stages == b->stages &&
           a->swizzle == b->swizzle && a->warps == b->warps;
}

static fajit_config filled(fajit_context *ctx, const fajit_shape *shape, int causal)
{
    fajit_config c;
    memset(&c, 0, sizeof c);
    c.dtype = FAJIT_DTYPE_BF16;
    c.head_dim = 64;
    c.causal = causal;
    assert_int_equal(fajit_config_fill(ctx, shape, &c), FAJIT_OK);
    return c;
}

/* ---- a forward on small random buffers, to see which config it chose ---------------------------- */
typedef struct problem {
    fajit_attention_args a;
    fj_CUdeviceptr mem[4];
} problem;

static void problem_make(fajit_context *ctx, const fajit_shape *s, problem *p)
{
    memset(p, 0, sizeof *p);
    p->a.dtype = FAJIT_DTYPE_BF16;
    p->a.batch = s->batch, p->a.heads_q = s->heads_q, p->a.heads_kv = s->heads_kv;
    p->a.seqlen_q = s->seqlen_q, p->a.seqlen_k = s->seqlen_k, p->a.head_dim = 64;
    fajit_args_set_bhnd_strides(&p->a);
    size_t elems = (size_t)s->batch * s->heads_q * s->seqlen_q * 64;
    uint16_t *host = malloc(elems * 2);
    assert_non_null(host);
    for (size_t i = 0; i < elems; i++)
        host[i] = fj_half_from_f32(FAJIT_DTYPE_BF16, (float)((i * 37) % 17) / 17.0f - 0.5f);
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(ctx->cu->cuMemAlloc(&p->mem[t], elems * 2), 0);
        assert_int_equal(ctx->cu->cuMemcpyHtoD(p->mem[t], host, elems * 2), 0);
    }
    fj_context_pop(ctx);
    free(host);
    p->a.q = p->mem[0], p->a.k = p->mem[1], p->a.v = p->mem[2], p->a.o = p->mem[3];
}

static void problem_free(fajit_context *ctx, problem *p)
{
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    assert_int_equal(ctx->cu->cuCtxSynchronize(), 0);
    for (int t = 0; t < 4; t++) ctx->cu->cuMemFree(p->mem[t]);
    fj_context_pop(ctx);
}

/* The config the forward chose for p's shape class (NULL-config forward first). */
static int forward_choice(fajit_context *ctx, problem *p, fajit_config *cfg)
{
    char key[FJ_CHOICE_KEY_MAX];
    fajit_shape cls;
    fj_forward_class(&p->a, key, sizeof key, &cls);
    return fj_context_choice_find(ctx, key, cfg) != NULL;
}

/* ---- the test ----------------------------------------------------------------------------------- */
static void test_tiny_tune(void **state)
{
    (void)state;
    fajit_context *ctx = context_new();
    fajit_shape shape = {2, 4, 4, 1024, 1024};
    fajit_config best, chosen, c;
    fajit_tune_result res;
    progress_log log = {0};
    problem p;
    problem_make(ctx, &shape, &p);
    assert_int_equal(fajit_attention_forward(ctx, &p.a, NULL), FAJIT_OK);
    assert_true(forward_choice(ctx, &p, &chosen));

    fajit_tune_options opt = fajit_tune_options_default();
    opt.max_candidates = 3;
    opt.progress = on_progress;
    opt.progress_user = &log;
    fajit_status st = fajit_tune(ctx, &shape, FAJIT_DTYPE_BF16, 64, 0, &opt, &best, &res);
    if (st != FAJIT_OK) print_error("fajit_tune: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    print_message("winner %.1f TFLOP/s (heuristic %.1f), %d timed, %d skipped of %d, space %d (%d pruned), %.2f s\n",
                  res.tflops, res.heuristic_tflops, res.timed, res.skipped, res.candidates, res.space, res.pruned,
                  res.seconds);
    assert_int_equal(res.found, 1);
    assert_int_equal(res.candidates, 3);
    assert_int_equal(log.total, 3);
    assert_int_equal(log.candidates, res.timed + res.skipped);
    assert_true(log.finals == 0 || (log.finals >= 2 && log.finals <= res.timed));
    assert_int_equal(log.skipped, res.skipped);
    assert_true(res.timed >= 1 && res.tflops > 0 && res.heuristic_tflops > 0 && log.notes >= 1);
    assert_int_equal(res.seqlen_class, 1024);
    assert_int_equal(res.saved, 1);
    assert_memory_equal(&best, &res.best, sizeof best);

    /* the file holds the winner for its class */
    char text[128], *file = fj_test_read_file(fajit_context_tune_file(ctx), NULL);
    assert_non_null(file);
    print_message("%s", file);
    fajit_config_format(&best, text, sizeof text);
    assert_non_null(strstr(file, "| bf16 d64 noncausal n1024 | "));
    assert_non_null(strstr(file, text));
    free(file);

    /* fill and the forward use it; the forward's old choice was reset */
    c = filled(ctx, &shape, 0);
    assert_true(same_tiles(&c, &best));
    assert_false(forward_choice(ctx, &p, &chosen));
    assert_int_equal(fajit_attention_forward(ctx, &p.a, NULL), FAJIT_OK);
    assert_true(forward_choice(ctx, &p, &chosen));
    assert_true(same_tiles(&chosen, &best));

    /* persist = 0: this context only */
    fajit_config best_causal;
    opt.persist = 0;
    opt.max_candidates = 2;
    assert_int_equal(fajit_tune(ctx, &shape, FAJIT_DTYPE_BF16, 64, 1, &opt, &best_causal, &res), FAJIT_OK);
    assert_int_equal(res.saved, 0);
    c = filled(ctx, &shape, 1);
    assert_true(same_tiles(&c, &best_causal));
    problem_free(ctx, &p);
    fajit_context_destroy(ctx);

    /* a new context reads the file: the saved winner, not the unsaved one */
    ctx = context_new();
    c = filled(ctx, &shape, 0);
    assert_true(same_tiles(&c, &best));
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 64, 0, &res), FAJIT_OK);
    assert_int_equal(res.found, 1);
    assert_int_equal(fajit_tune_lookup(ctx, &shape, FAJIT_DTYPE_BF16, 64, 1, &res), FAJIT_OK);
    assert_int_equal(res.found, 0);
    fajit_context_destroy(ctx);
}

/* ---- a decode class ----------------------------------------------------------------------------- */
static void on_decode_progress(void *user, int index, int total, const fajit_config *cfg, double gbs, const char *note)
{
    int *timed = user;
    assert_null(cfg); /* decode notes carry no config */
    assert_true(index < total);
    *timed += index >= 0 && gbs > 0;
    print_message("  %s\n", note);
}

/* A forward of a with num_splits = 0 on zeroed buffers; fajit_last_forward()'s text into ran. */
static void decode_forward(fajit_context *ctx, fajit_attention_args a, char *ran, size_t size)
{
    size_t q = (size_t)a.batch * a.heads_q * a.seqlen_q * a.head_dim * 2;
    size_t kv = (size_t)a.batch * a.heads_kv * a.seqlen_k * a.head_dim * 2;
    const size_t bytes[4] = {q, kv, kv, q};
    fj_CUdeviceptr mem[4] = {0};
    assert_int_equal(fj_context_push(ctx), FAJIT_OK);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(ctx->cu->cuMemAlloc(&mem[t], bytes[t]), 0);
        assert_int_equal(ctx->cu->cuMemsetD8(mem[t], 0, bytes[t]), 0);
    }
    a.q = mem[0], a.k = mem[1], a.v = mem[2], a.o = mem[3];
    fajit_status st = fajit_attention_forward(ctx, &a, NULL);
    if (st != FAJIT_OK) print_error("forward: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    snprintf(ran, size, "%s", fajit_last_forward());
    assert_int_equal(ctx->cu->cuCtxSynchronize(), 0);
    for (int t = 0; t < 4; t++) ctx->cu->cuMemFree(mem[t]);
    fj_context_pop(ctx);
}

static void test_decode_tune(void **state)
{
    (void)state;
    fajit_context *ctx = context_new();
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 1, 8, 1, 1, 32768, 128);
    fajit_tune_options opt = fajit_tune_options_default();
    fj_tune_decode_result res;
    int timed = 0;
    opt.progress = on_decode_progress;
    opt.progress_user = &timed;
    fajit_status st = fj_tune_decode(ctx, &a, &opt, &res);
    if (st != FAJIT_OK) print_error("fj_tune_decode: %s\n", fajit_errmsg());
    assert_int_equal(st, FAJIT_OK);
    print_message("winner %d splits on br%d bc%d: %.0f GB/s; heuristic %d splits %.0f GB/s; %d of %d timed, %.1f s\n",
                  res.splits, res.tile_m, res.tile_n, res.gbs, res.heuristic_splits, res.heuristic_gbs, res.timed,
                  res.candidates, res.seconds);
    assert_int_equal(res.found, 1);
    assert_true(res.candidates >= 3 && res.timed >= 2 && timed == res.timed);
    assert_true(res.gbs > 0 && res.heuristic_gbs > 0 && res.gbs >= res.heuristic_gbs);
    assert_int_equal(res.saved, 1);
    assert_int_equal(res.key.packed, 1);
    /* the split choice (this context, then a new one reading the file), the forward and the workspace */
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, res.tile_m, res.tile_n, 1, NULL), res.splits);
    size_t bytes = 1;
    assert_int_equal(fajit_attention_workspace_size(ctx, &a, NULL, &bytes), FAJIT_OK);
    assert_int_equal(bytes, fj_decode_workspace_bytes(&a, res.splits, NULL));
    fajit_context_destroy(ctx);
    ctx = context_new();
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, res.tile_m, res.tile_n, 1, NULL), res.splits);
    char ran[512], want[32];
    decode_forward(ctx, a, ran, sizeof ran);
    print_message("forward with num_splits = 0 ran: %s\n", ran);
    snprintf(want, sizeof want, "(%d splits, tuned)", res.splits);
    if (res.splits > 1) assert_non_null(strstr(ran, want));
    else assert_null(strstr(ran, " splits)"));
    fajit_context_destroy(ctx);
}

int main(void)
{
    fj_test_require_gpu();
    g_dir = fj_test_make_temp_dir("fajit-tune-gpu-");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_tune),
        cmocka_unit_test(test_decode_tune),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (fj_test_remove_dir(g_dir) != 0) print_message("could not remove %s\n", g_dir);
    free(g_dir);
    return rc;
}
