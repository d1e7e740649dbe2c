/*
 * test_tune_decode.c - unit tests of the decode classes of the tuner without a GPU (src/runtime/tune_decode.c,
 * the decode lines of src/runtime/tune_file.c, fj_decode_splits_for in src/runtime/decode.c), through a
 * context given a fake GPU identity (fj_context_set_identity) and an SM count.
 *
 * Covers: decode line format <-> parse round trip; corrupt decode lines rejected with a reason and ignored
 * when reading; decode and forward lines side by side in one file through a merge; the class key (buckets,
 * GQA group, packing, the mask only with Nq > 1); a recorded winner used by the split choice for a call with
 * num_splits = 0 of its class on its tile, and not for a forced count, another class, another tile, another
 * GPU, or a count the call cannot run; the candidate split counts. Run: ctest --test-dir build -R test_tune_decode
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/context.h"
#include "runtime/decode.h"
#include "runtime/tune.h"
#include "runtime/tune_file.h"
#include "test_support.h"

#define GPU "NVIDIA Test GPU 141GB"
#define DRIVER 13000
#define SMS 132

/* ---------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------- */
static fajit_attention_args shape(int b, int hq, int hkv, int nq, int nk, int causal)
{
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16;
    a.batch = b, a.heads_q = hq, a.heads_kv = hkv, a.seqlen_q = nq, a.seqlen_k = nk, a.head_dim = 128;
    a.causal = causal;
    return a;
}

/* A decode record of GPU / DRIVER / this codegen for shape a (packed as given). */
static fj_tune_record decode_record(const fajit_context *ctx, const fajit_attention_args *a, int packed, int splits,
                                    int tile_m, int tile_n)
{
    fj_tune_record r;
    memset(&r, 0, sizeof r);
    fj_tune_decode_key(ctx, a, packed, &r.key);
    r.splits = splits, r.tile_m = tile_m, r.tile_n = tile_n;
    r.tflops = 2950.0;
    snprintf(r.note, sizeof r.note, "B%d H%d/%d, test", a->batch, a->heads_q, a->heads_kv);
    return r;
}

/* fj_test_fake_context with an H200's SM count. */
static fajit_context *fake_context(const char *dir, const char *gpu)
{
    fajit_context *ctx = fj_test_fake_context(dir, gpu, DRIVER);
    assert_non_null(ctx);
    ctx->sm_count = SMS;
    return ctx;
}

static char *tune_path(const char *dir)
{
    size_t n = strlen(dir) + strlen(FJ_TUNE_FILE_NAME) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, FJ_TUNE_FILE_NAME);
    return p;
}

/* Append text to the file at path, read it: want_bad lines ignored, want_n records. */
static void append_then_read(const char *path, const char *text, int want_bad, int want_n)
{
    fj_tune_list list = {0};
    int bad = -1;
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(fj_tune_file_read(path, &list, &bad), 0);
    assert_int_equal(bad, want_bad);
    assert_int_equal(list.n, want_n);
    fj_tune_list_free(&list);
}

/* ---------------------------------------------------------------------------------------------------
 * Lines
 * ------------------------------------------------------------------------------------------------- */
static void test_decode_line_round_trip(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tuned-");
    fajit_context *ctx = fake_context(root, GPU);
    fajit_attention_args a = shape(1, 32, 8, 1, 131072, 0);
    fj_tune_record r = decode_record(ctx, &a, 1, 64, 64, 64), back;
    char line[FJ_TUNE_LINE_MAX], again[FJ_TUNE_LINE_MAX];
    int n = fj_tune_format_line(&r, line, sizeof line);
    print_message("%s\n", line);
    assert_true(n > 0 && n < (int)sizeof line);
    assert_non_null(
        strstr(line, "| decode bf16 d128 noncausal bkv8 g4 q1 k131072 packed | splits 64 br64 bc64 | 2950.0 |"));
    assert_null(fj_tune_parse_line(line, &back));
    assert_true(fj_tune_key_equal(&r.key, &back.key));
    assert_int_equal(back.splits, 64);
    assert_int_equal(back.tile_m, 64);
    assert_int_equal(back.tile_n, 64);
    assert_true(back.tflops > 2949.9 && back.tflops < 2950.1);
    fj_tune_format_line(&back, again, sizeof again);
    assert_string_equal(line, again);
    /* a decode key never equals a forward key of the same dtype, head dim and mask */
    fj_tune_key fwd;
    fj_tune_key_make(ctx, FAJIT_DTYPE_BF16, 128, 0, 131072, &fwd);
    assert_false(fj_tune_key_equal(&fwd, &r.key));
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);
}

static void test_decode_corrupt_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        /* causal with q1; bkv 6; k below 128; q above 128; packed with g1 */
        "G | 13000 | c | decode bf16 d128 causal bkv8 g4 q1 k131072 packed | splits 64 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv6 g4 q1 k131072 packed | splits 64 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k100 packed | splits 64 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q256 k1024 packed | splits 4 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g1 q1 k1024 packed | splits 4 br64 bc64 | 1.0",
        /* splits 0 and above FAJIT_MAX_SPLITS; br 8; no bc; no packing word */
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | splits 0 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | splits 2000 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | splits 4 br8 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | splits 4 br64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 | splits 4 br64 bc64 | 1.0",
        /* a forward config in a decode class, a decode config in a forward class; GB/s 0 */
        ("G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | sm_80 bf16 d128 br64 bc64 s2 sw128 "
         "w4 noncausal | 1.0"),
        "G | 13000 | c | bf16 d128 noncausal n4096 | splits 4 br64 bc64 | 1.0",
        "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k1024 packed | splits 4 br64 bc64 | 0",
    };
    fj_tune_record r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = fj_tune_parse_line(bad[i], &r);
        if (!why) print_error("parsed, should not: %s\n", bad[i]);
        assert_non_null(why);
        assert_string_not_equal(why, "comment");
    }
    assert_null(fj_tune_parse_line("G | 13000 | c | decode f16 d64 causal bkv512 g4 q16 k2048 packed | splits 2 br64 "
                                   "bc32 | 1.5",
                                   &r));
    assert_int_equal(r.key.causal, 1);
    assert_int_equal(r.key.dtype, FAJIT_DTYPE_F16);
}

/* A corrupt line is ignored and the good one next to it is used; a merge keeps decode and forward lines. */
static void test_decode_file_merge_and_bad_line(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tuned-"), *path = tune_path(root);
    fajit_context *ctx = fake_context(root, GPU);
    fajit_attention_args a = shape(1, 32, 8, 1, 131072, 0);
    fj_tune_record recs[2];
    recs[0] = decode_record(ctx, &a, 1, 77, 64, 64);
    memset(&recs[1], 0, sizeof recs[1]);
    fj_tune_key_make(ctx, FAJIT_DTYPE_BF16, 128, 0, 4096, &recs[1].key);
    assert_null(fj_tune_parse_config("sm_80 bf16 d128 br64 bc32 s3 sw128 w4 noncausal", &recs[1].cfg));
    recs[1].tflops = 200.0;
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k131072 packed | splits 9999 br64 bc64 | 1.0\n", f);
    fclose(f);
    assert_null(fj_tune_file_merge(path, recs, 2, NULL, 0));
    fj_tune_list list = {0};
    int bad = -1;
    assert_int_equal(fj_tune_file_read(path, &list, &bad), 0);
    assert_int_equal(bad, 0); /* the corrupt line was dropped by the merge */
    assert_int_equal(list.n, 2);
    const fj_tune_record *d = fj_tune_list_find(&list, &recs[0].key);
    assert_non_null(d);
    assert_int_equal(d->splits, 77);
    assert_non_null(fj_tune_list_find(&list, &recs[1].key));
    fj_tune_list_free(&list);
    /* a corrupt line next to a good one: counted, ignored */
    append_then_read(path, "G | 13000 | c | decode bf16 d128 noncausal bkv8 g4 q1 k131072 packed | splits -3 br64 bc64 "
                           "| 1.0\n", 1, 2);
    /* and the split choice of a fresh context reads the good line */
    fajit_context_destroy(ctx);
    ctx = fake_context(root, GPU);
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, NULL), 77);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(path);
    free(root);
}

/* ---------------------------------------------------------------------------------------------------
 * The class key
 * ------------------------------------------------------------------------------------------------- */
static void test_decode_key(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tuned-");
    fajit_context *ctx = fake_context(root, GPU);
    fj_tune_key k, k2;
    fajit_attention_args a = shape(8, 32, 8, 16, 8192, 1);
    fj_tune_decode_key(ctx, &a, 1, &k);
    assert_int_equal(k.decode, 1);
    assert_int_equal(k.kv_heads, 64);
    assert_int_equal(k.group, 4);
    assert_int_equal(k.seqlen_q, 16);
    assert_int_equal(k.seqlen_class, 8192);
    assert_int_equal(k.causal, 1);
    assert_int_equal(k.packed, 1);
    assert_string_equal(k.gpu, GPU);
    /* within the buckets: B x Hkv 6 x 8 = 48 -> 64, Nq 13 -> 16, Nk 5000 -> 8192: the same class */
    a = shape(6, 24, 8, 13, 5000, 1);
    a.heads_q = 32;
    fj_tune_decode_key(ctx, &a, 1, &k2);
    assert_true(fj_tune_key_equal(&k, &k2));
    /* each of B x Hkv, group, Nq, Nk, packing, mask, dtype and head dim moves it */
    const fajit_attention_args base = shape(8, 32, 8, 16, 8192, 1);
    for (int field = 0; field < 8; field++) {
        fajit_attention_args b = base;
        int packed = 1;
        if (field == 0) b.batch = 16;
        if (field == 1) b.heads_q = 64;
        if (field == 2) b.seqlen_q = 17;
        if (field == 3) b.seqlen_k = 8193;
        if (field == 4) packed = 0;
        if (field == 5) b.causal = 0;
        if (field == 6) b.dtype = FAJIT_DTYPE_F16;
        if (field == 7) b.head_dim = 64;
        fj_tune_decode_key(ctx, &b, packed, &k2);
        if (fj_tune_key_equal(&k, &k2)) print_error("field %d does not move the key\n", field);
        assert_false(fj_tune_key_equal(&k, &k2));
    }
    /* Nq 1: the mask does not matter (one row sees every key); MHA is never packed; AUTO is bf16 */
    a = shape(1, 32, 32, 1, 32768, 1);
    a.dtype = FAJIT_DTYPE_AUTO;
    fj_tune_decode_key(ctx, &a, 1, &k);
    assert_int_equal(k.causal, 0);
    assert_int_equal(k.packed, 0);
    assert_int_equal(k.group, 1);
    assert_int_equal(k.dtype, FAJIT_DTYPE_BF16);
    assert_int_equal(k.kv_heads, 32);
    a = shape(1, 8, 1, 1, 524288, 0);
    fj_tune_decode_key(ctx, &a, 1, &k);
    assert_int_equal(k.seqlen_class, 524288);
    assert_int_equal(k.kv_heads, 1);
    a.seqlen_k = 100;
    fj_tune_decode_key(ctx, &a, 1, &k);
    assert_int_equal(k.seqlen_class, 128);
    fajit_context_destroy(ctx);
    fj_test_remove_dir(root);
    free(root);
}

/* ---------------------------------------------------------------------------------------------------
 * The split choice uses the winner
 * ------------------------------------------------------------------------------------------------- */
static void test_winner_used_by_split_choice(void **state)
{
    (void)state;
    char *root = fj_test_make_temp_dir("fajit-tuned-"), *path = tune_path(root);
    fajit_context *ctx = fake_context(root, GPU);
    fajit_attention_args a = shape(1, 32, 8, 1, 131072, 0), big = shape(64, 32, 8, 1, 2048, 0);
    int heuristic = fj_decode_splits(&a, 1, 64, 64, SMS);
    int from_tune = -1;
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, &from_tune), heuristic); /* no file yet */
    assert_int_equal(from_tune, 0);
    fajit_attention_args full = shape(64, 32, 32, 1, 2048, 0); /* MHA, B x Hq = 2048 CTAs: the plain kernel */
    fj_tune_record recs[3] = {decode_record(ctx, &a, 1, heuristic + 5, 64, 64),
                              decode_record(ctx, &big, 1, 1024, 64, 64), decode_record(ctx, &full, 0, 2, 64, 64)};
    assert_null(fj_tune_file_merge(path, recs, 3, NULL, 0));
    fajit_context_destroy(ctx);
    ctx = fake_context(root, GPU);
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, &from_tune), heuristic + 5);
    assert_int_equal(from_tune, 1);
    fajit_attention_args near = a;
    near.seqlen_k = 100000; /* the same Nk bucket */
    assert_int_equal(fj_decode_splits_for(ctx, &near, 1, 64, 64, 1, NULL), heuristic + 5);
    /* another tile, another class, unpacked, a forced count: not the winner */
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 128, 1, NULL), fj_decode_splits(&a, 1, 64, 128, SMS));
    fajit_attention_args other = a;
    other.seqlen_k = 32768;
    assert_int_equal(fj_decode_splits_for(ctx, &other, 1, 64, 64, 1, NULL), fj_decode_splits(&other, 1, 64, 64, SMS));
    assert_int_equal(fj_decode_splits_for(ctx, &a, 0, 64, 64, 1, NULL), fj_decode_splits(&a, 0, 64, 64, SMS));
    fajit_attention_args forced = a;
    forced.num_splits = 3;
    assert_int_equal(fj_decode_splits_for(ctx, &forced, 1, 64, 64, 1, &from_tune), 3);
    assert_int_equal(from_tune, 0);
    /* a winner the call cannot run (64 x 1024 splits exceed the grid's z): the heuristic */
    assert_int_equal(fj_decode_splits_for(ctx, &big, 1, 64, 64, 1, NULL), fj_decode_splits(&big, 1, 64, 64, SMS));
    /* a call that does not look at splitting (no decode feature, B x Hq fills the SMs) keeps its plain kernel */
    assert_int_equal(fj_decode_splits_for(ctx, &full, 0, 64, 64, 1, NULL), 1);
    ctx->sm_count = 4096; /* on a GPU with SMs to spare the same call looks, and takes the winner */
    assert_int_equal(fj_decode_splits_for(ctx, &full, 0, 64, 64, 1, NULL), 2);
    ctx->sm_count = SMS;
    fajit_context_destroy(ctx);
    /* another GPU's context does not use it; neither does one without a disk cache */
    ctx = fake_context(root, "Another GPU");
    ctx->sm_count = SMS;
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, NULL), heuristic);
    fajit_context_destroy(ctx);
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    fj_context_set_identity(ctx, "sm_90", GPU, DRIVER, 232448);
    ctx->sm_count = SMS;
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, NULL), heuristic);
    /* a winner filed in the context (fagen tune --no-save) is used too */
    fj_tune_table_put(ctx, &recs[0]);
    assert_int_equal(fj_decode_splits_for(ctx, &a, 1, 64, 64, 1, NULL), heuristic + 5);
    fajit_context_destroy(ctx);
    assert_int_equal(fj_decode_splits_for(NULL, &a, 1, 64, 64, 1, NULL), 1); /* no context: no SMs known */
    fj_test_remove_dir(root);
    free(path);
    free(root);
}

/* ---------------------------------------------------------------------------------------------------
 * Candidates
 * ------------------------------------------------------------------------------------------------- */
static void test_candidates(void **state)
{
    (void)state;
    int c[FJ_TUNE_DECODE_MAX_CANDIDATES];
    /* B1 Hq8 Hkv1 Nk512k packed: one CTA, 8192 tiles: 1, 66 (half), 132 (heuristic: one per SM), 264 (double;
     * two per SM), 396 (three per SM) */
    fajit_attention_args a = shape(1, 8, 1, 1, 524288, 0);
    int h = fj_decode_splits(&a, 1, 64, 64, SMS);
    assert_int_equal(h, 132);
    int n = fj_tune_decode_candidates(&a, 1, 64, 64, SMS, h, c, FJ_TUNE_DECODE_MAX_CANDIDATES);
    static const int want[] = {1, 66, 132, 264, 396};
    assert_int_equal(n, 5);
    assert_memory_equal(c, want, sizeof want);
    /* a cap of one keeps the heuristic's */
    assert_int_equal(fj_tune_decode_candidates(&a, 1, 64, 64, SMS, h, c, 1), 1);
    assert_int_equal(c[0], h);
    /* few KV tiles: no count above them (Nk 256, bc64: 4 tiles) */
    a = shape(1, 8, 1, 1, 256, 0);
    n = fj_tune_decode_candidates(&a, 1, 64, 64, SMS, 2, c, FJ_TUNE_DECODE_MAX_CANDIDATES);
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        assert_true(c[i] >= 1 && c[i] <= 4);
        if (i) assert_true(c[i] > c[i - 1]);
    }
    /* B64: batch x splits <= 65535, so no count above 1023 */
    a = shape(64, 32, 8, 1, 1 << 20, 0);
    n = fj_tune_decode_candidates(&a, 1, 64, 64, SMS, 1, c, FJ_TUNE_DECODE_MAX_CANDIDATES);
    for (int i = 0; i < n; i++) assert_true(c[i] <= 1023 && fj_decode_split_fits(&a, c[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_line_round_trip),
        cmocka_unit_test(test_decode_corrupt_lines),
        cmocka_unit_test(test_decode_file_merge_and_bad_line),
        cmocka_unit_test(test_decode_key),
        cmocka_unit_test(test_winner_used_by_split_choice),
        cmocka_unit_test(test_candidates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
