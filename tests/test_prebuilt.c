/*
 * test_prebuilt.c - unit tests of the kernel pipeline's parts that need no GPU: the store's order of sources,
 * the prebuilt blob (lookup, a damaged entry refused, the linked blob checked entry by entry and covering the
 * heuristic's configs), the policy's decision table, and the background worker with a fake compiler (a
 * pending choice switches to the compiled kernel; a failed compile leaves the stand-in; destroying the context
 * while a compile runs waits for it). Run: ctest --test-dir build -R test_prebuilt
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/config_fill.h"
#include "runtime/context.h"
#include "runtime/disk_cache.h"
#include "runtime/hash.h"
#include "runtime/kernel_store.h"
#include "runtime/policy.h"
#include "runtime/prebuilt.h"
#include "test_support.h"

/* ---------------------------------------------------------------------------------------------------
 * The store's sources
 * ------------------------------------------------------------------------------------------------- */
static void test_store_order(void **state)
{
    (void)state;
    int n = 0;
    const fj_kernel_source *const *s = fj_store_sources(&n);
    assert_int_equal(n, 3);
    assert_string_equal(s[0]->name, "prebuilt");
    assert_string_equal(s[1]->name, "disk");
    assert_string_equal(s[2]->name, "compiler");
    assert_int_equal(s[0]->tag, FAJIT_SOURCE_PREBUILT);
    assert_int_equal(s[1]->tag, FAJIT_SOURCE_DISK);
    assert_int_equal(s[2]->tag, FAJIT_SOURCE_COMPILED);
    assert_int_equal(s[0]->compiles || s[1]->compiles, 0); /* a capture may ask these two */
    assert_int_equal(s[2]->compiles, 1);
    assert_non_null(s[1]->keep); /* the disk keeps what the compiler made */
    assert_null(s[0]->keep);
}

/* ---------------------------------------------------------------------------------------------------
 * A blob of two made-up entries
 * ------------------------------------------------------------------------------------------------- */
static unsigned char *blob_append(unsigned char *blob, size_t *len, const char *text, const char *target,
                                  const char *payload)
{
    char key[512];
    size_t elen = 0;
    fj_prebuilt_key(key, sizeof key, text, target);
    unsigned char *e = fj_disk_cache_entry_encode(key, FJ_PREBUILT_KIND, 0, payload, strlen(payload), &elen);
    assert_non_null(e);
    blob = realloc(blob, *len + elen);
    assert_non_null(blob);
    memcpy(blob + *len, e, elen);
    *len += elen;
    free(e);
    return blob;
}

static const char *k_text1 = "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal";
static const char *k_text2 = "sm_80 f16 d64 br128 bc64 s2 sw128 w4 causal";

static void test_blob_lookup(void **state)
{
    (void)state;
    size_t len = 0, size = 0;
    unsigned char *blob = blob_append(NULL, &len, k_text1, "sm_90a", "cubin one");
    blob = blob_append(blob, &len, k_text2, "sm_80", "cubin two, longer");
    const unsigned char *cubin = NULL;
    const char *why = NULL;
    fj_prebuilt_set_blob(blob, len);
    assert_int_equal(fj_prebuilt_find(k_text1, "sm_90a", &cubin, &size, &why), 1);
    assert_int_equal(size, 9);
    assert_memory_equal(cubin, "cubin one", 9);
    assert_int_equal(fj_prebuilt_find(k_text2, "sm_80", &cubin, &size, &why), 1);
    assert_memory_equal(cubin, "cubin two, longer", size);
    /* another target, another config: plain misses */
    assert_int_equal(fj_prebuilt_find(k_text2, "sm_86", &cubin, &size, &why), 0);
    assert_string_equal(why, "");
    assert_int_equal(fj_prebuilt_find("sm_80 f16 d64 br64 bc64 s2 sw128 w4 causal", "sm_80", &cubin, &size, &why), 0);
    int entries = 0;
    size_t bytes = 0;
    fj_prebuilt_stats(&entries, &bytes);
    assert_int_equal(entries, 2);
    assert_int_equal(bytes, len);

    /* one byte of the second payload flipped: refused with a reason; the first still served */
    blob[len - 3] ^= 0x20;
    assert_int_equal(fj_prebuilt_find(k_text2, "sm_80", &cubin, &size, &why), 0);
    print_message("damaged entry: %s\n", why);
    assert_true(why[0] != '\0');
    assert_int_equal(fj_prebuilt_find(k_text1, "sm_90a", &cubin, &size, &why), 1);
    /* truncated in the middle of the second entry: its header's length runs past the end, so the walk stops */
    fj_prebuilt_set_blob(blob, len - 5);
    assert_int_equal(fj_prebuilt_find(k_text2, "sm_80", &cubin, &size, &why), 0);
    assert_int_equal(fj_prebuilt_find(k_text1, "sm_90a", &cubin, &size, &why), 1);
    /* a length field blown up: no read past the blob */
    blob[16] = 0xff, blob[17] = 0xff, blob[18] = 0xff, blob[23] = 0x7f;
    fj_prebuilt_set_blob(blob, len);
    assert_int_equal(fj_prebuilt_find(k_text1, "sm_90a", &cubin, &size, &why), 0);
    fj_prebuilt_set_blob(NULL, 0);
    free(blob);
}

/* ---------------------------------------------------------------------------------------------------
 * The blob linked into this build
 * ------------------------------------------------------------------------------------------------- */
typedef struct check_all {
    int n, bad;
} check_all;

static int check_entry(const char *text, const char *target, void *arg)
{
    check_all *c = arg;
    const unsigned char *cubin;
    size_t size;
    const char *why = "";
    c->n++;
    if (!fj_prebuilt_find(text, target, &cubin, &size, &why) || size < 64 || memcmp(cubin, "\177ELF", 4) != 0) {
        print_error("prebuilt %s \"%s\": %s\n", target, text, why);
        c->bad++;
    }
    return 0;
}

static int linked_blob_or_skip(void)
{
    int entries = 0;
    size_t bytes = 0;
    fj_prebuilt_set_blob(NULL, 0);
    fj_prebuilt_stats(&entries, &bytes);
    print_message("linked prebuilt blob: %d kernels, %zu bytes\n", entries, bytes);
    return entries;
}

static void test_linked_blob(void **state)
{
    (void)state;
    if (!linked_blob_or_skip()) skip(); /* built with FAJIT_PREBUILT=OFF */
    check_all c = {0, 0};
    fj_prebuilt_each(check_entry, &c);
    assert_true(c.n > 0);
    assert_int_equal(c.bad, 0);
}

/* A copy of the linked blob with one byte of one cubin flipped: that kernel is refused, its neighbours not. */
static void test_linked_blob_damaged(void **state)
{
    (void)state;
    if (!linked_blob_or_skip()) skip();
    const unsigned char *data;
    size_t len, size;
    fj_prebuilt_blob(&data, &len);
    const unsigned char *cubin = NULL;
    const char *why = "";
    char text[256];
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128};
    assert_int_equal(fj_config_fill_default(NULL, NULL, &cfg), FAJIT_OK);
    fajit_config_format(&cfg, text, sizeof text);
    assert_int_equal(fj_prebuilt_find(text, "sm_90a", &cubin, &size, &why), 1);
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, data, len);
    copy[(size_t)(cubin - data) + size / 2] ^= 1;
    fj_prebuilt_set_blob(copy, len);
    assert_int_equal(fj_prebuilt_find(text, "sm_90a", &cubin, &size, &why), 0);
    print_message("damaged \"%s\": %s\n", text, why);
    assert_non_null(strstr(why, "checksum"));
    check_all c = {0, 0};
    fj_prebuilt_each(check_entry, &c);
    assert_int_equal(c.bad, 1);
    fj_prebuilt_set_blob(NULL, 0);
    free(copy);
}

/* Each kernel of the blob was compiled from the PTX the runtime generates for its config and target: the store plans
 * a kernel (fj_plan_build_variant), fits the plan to the device's row (fj_plan_for_target: FP8 K/V cvt, split-KV's
 * griddepcontrol) and generates its PTX; the entry's source hash must be that PTX's. (Until 2026-11-29 the generator
 * skipped the fitting, so a prebuilt FP8 K/V kernel for sm_90 ran another widening than the same text compiled.) */
static void test_blob_is_runtime_ptx(void **state)
{
    (void)state;
    if (!linked_blob_or_skip()) skip();
    static fj_prebuilt_item items[1024];
    int n = fj_prebuilt_set(items, 1024), checked = 0, bad = 0;
    assert_true(n > 0 && n < 1024);
    for (int i = 0; i < n; i++) {
        fj_plan p;
        char text[256], *ptx = NULL;
        size_t len = 0;
        const char *why = "";
        if (fj_plan_build_variant(&items[i].cfg, items[i].variant, &p) != FAJIT_OK) continue; /* not in the blob */
        fj_plan_format(&p, text, sizeof text);
        fj_plan_for_target(&p, fj_arch_find(items[i].target));
        assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
        if (!fj_prebuilt_source_is(text, items[i].target, fj_source_hash(ptx, len), &why)) {
            if (bad++ < 5) print_message("\"%s\" for %s: %s\n", text, items[i].target, why[0] ? why : "not in the blob");
        }
        checked++;
        fajit_free(ptx);
    }
    print_message("%d of %d prebuilt kernels from the runtime's PTX\n", checked - bad, checked);
    assert_true(checked > 0);
    assert_int_equal(bad, 0);
}

/* The config ctx's default path picks for (dtype, d, causal) and shape is in the blob for its target (sm_90a, or the
 * context's own sm name on the sm_80 path). */
static void expect_prebuilt(fajit_context *ctx, const char *sm, fajit_dtype dtype, int d, int causal,
                            const fajit_shape *shape)
{
    fajit_config cfg = {.dtype = dtype, .head_dim = d, .causal = causal};
    char text[256];
    const unsigned char *cubin;
    size_t size;
    assert_int_equal(fj_config_fill_default(ctx, shape, &cfg), FAJIT_OK);
    fajit_config_format(&cfg, text, sizeof text);
    const char *target = cfg.arch == FAJIT_ARCH_SM90A ? "sm_90a" : sm;
    if (!fj_prebuilt_find(text, target, &cubin, &size, NULL))
        fail_msg("not prebuilt for %s: \"%s\" (Nq %d, Nk %d)", target, text, shape->seqlen_q, shape->seqlen_k);
}

/* The config the runtime picks with nothing tuned is in the blob, for each dtype, head dim, mask and a few
 * sequence lengths, on an sm_90 GPU (sm_90a) and an sm_80 GPU (sm_80); e4m3 Q, K, V on the sm_90 GPU: the forward's
 * tiles and a decode step's (Nq 1, GQA 4). */
static void test_set_covers_defaults(void **state)
{
    (void)state;
    if (!linked_blob_or_skip()) skip();
    static const char *const gpus[] = {"sm_90", "sm_80"};
    static const int seqlens[] = {128, 1024, 2048, 8192, 32768};
    const fajit_shape decode = {8, 32, 8, 1, 4096};
    for (int g = 0; g < 2; g++) {
        fajit_context *ctx = fj_test_fake_context(NULL, "fake GPU", 13000);
        assert_non_null(ctx);
        fj_context_set_identity(ctx, gpus[g], "fake GPU", 13000, g == 0 ? 232448 : 166912);
        for (int t = 1; t <= 2; t++)
            for (int d = 64; d <= 256; d += 32) {
                if (d == 160 || d == 224) continue;
                for (int causal = 0; causal <= 1; causal++)
                    for (size_t s = 0; s < sizeof seqlens / sizeof seqlens[0]; s++) {
                        fajit_shape shape = {2, 16, 16, seqlens[s], seqlens[s]};
                        expect_prebuilt(ctx, gpus[g], (fajit_dtype)t, d, causal, &shape);
                    }
            }
        for (int d = 64; d <= 256 && g == 0; d *= 2)
            for (int causal = 0; causal <= 1; causal++) {
                for (size_t s = 0; s < sizeof seqlens / sizeof seqlens[0]; s++) {
                    fajit_shape shape = {2, 16, 16, seqlens[s], seqlens[s]};
                    expect_prebuilt(ctx, gpus[g], FAJIT_DTYPE_E4M3, d, causal, &shape);
                }
                expect_prebuilt(ctx, gpus[g], FAJIT_DTYPE_E4M3, d, causal, &decode);
            }
        fajit_context_destroy(ctx);
    }
}

/* The decode kernels of a default GQA decode step are in the blob, for 16-bit and FP8 (e4m3) K/V caches. */
static int count_decode(const char *text, const char *target, void *arg)
{
    int *n = arg;
    (void)target;
    if (strstr(text, " seqlens split packgqa")) n[strstr(text, ",kv=e4m3") ? 1 : strstr(text, " e4m3 ") ? 3 : 0]++;
    if (strstr(text, " combine")) n[2]++;
    return 0;
}

static void test_set_has_decode(void **state)
{
    (void)state;
    if (!linked_blob_or_skip()) skip();
    int n[4] = {0, 0, 0, 0};
    fj_prebuilt_each(count_decode, n);
    print_message("split decode variants: %d (16-bit K/V), %d (e4m3 K/V), %d (e4m3 Q, K, V); combine kernels %d\n",
                  n[0], n[1], n[3], n[2]);
    assert_true(n[0] >= 24 && n[1] >= 24); /* 2 dtypes x 3 head dims x 2 masks x 2 targets */
    assert_int_equal(n[3], 6);             /* 3 head dims x 2 masks, sm_90a */
    assert_int_equal(n[2], 20);            /* 2 dtypes x 5 head dims x 2 targets */
}

/* ---------------------------------------------------------------------------------------------------
 * The policy's decisions
 * ------------------------------------------------------------------------------------------------- */
static void test_policy_decide(void **state)
{
    (void)state;
    for (int standin = 0; standin <= 1; standin++)
        for (int async = 0; async <= 1; async++)
            for (int cap = 0; cap <= 1; cap++) /* the chosen kernel at hand: always served */
                assert_int_equal(fj_policy_decide(1, standin, async, cap), FJ_POLICY_SERVE);
    assert_int_equal(fj_policy_decide(0, 1, 1, 0), FJ_POLICY_STANDIN_COMPILE);
    assert_int_equal(fj_policy_decide(0, 1, 0, 0), FJ_POLICY_COMPILE); /* FAJIT_JIT=sync */
    assert_int_equal(fj_policy_decide(0, 0, 1, 0), FJ_POLICY_COMPILE); /* no stand-in: a variant */
    assert_int_equal(fj_policy_decide(0, 1, 1, 1), FJ_POLICY_STANDIN); /* capture: never compiles */
    assert_int_equal(fj_policy_decide(0, 1, 0, 1), FJ_POLICY_STANDIN);
    assert_int_equal(fj_policy_decide(0, 0, 1, 1), FJ_POLICY_REFUSE);
    assert_int_equal(fj_policy_decide(0, 0, 0, 1), FJ_POLICY_REFUSE);
}

/* ---------------------------------------------------------------------------------------------------
 * The worker, with a fake compiler
 * ------------------------------------------------------------------------------------------------- */
static fajit_kernel g_standin, g_compiled;
static int g_fake_ms, g_fake_fail, g_fake_calls, g_fake_returned;

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static fajit_status fake_compile(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **out)
{
    (void)ctx;
    (void)cfg;
    __atomic_add_fetch(&g_fake_calls, 1, __ATOMIC_SEQ_CST);
    sleep_ms(g_fake_ms);
    __atomic_store_n(&g_fake_returned, 1, __ATOMIC_SEQ_CST);
    if (g_fake_fail) {
        *out = NULL;
        return FAJIT_ERR_COMPILE;
    }
    *out = &g_compiled;
    return FAJIT_OK;
}

/* A context without a device with one pending choice ("class A") of cfg, served by the stand-in. */
static fajit_context *pending_context(const fajit_config *cfg)
{
    fajit_context *ctx = fj_test_fake_context(NULL, "fake GPU", 13000);
    assert_non_null(ctx);
    fj_jit_set_compiler(ctx, fake_compile);
    fj_choice *c = calloc(1, sizeof *c);
    assert_non_null(c);
    snprintf(c->key, sizeof c->key, "class A");
    c->cfg = *cfg;
    c->kernel = &g_standin;
    c->pending = c->queued = 1;
    pthread_mutex_lock(&ctx->lock);
    c->next = ctx->choices;
    ctx->choices = c;
    pthread_mutex_unlock(&ctx->lock);
    return ctx;
}

static void test_worker_switches(void **state)
{
    (void)state;
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_n = 112};
    g_fake_ms = 30, g_fake_fail = 0, g_fake_calls = 0;
    fajit_context *ctx = pending_context(&cfg);
    assert_ptr_equal(fj_context_choice_find(ctx, "class A", NULL), &g_standin);
    assert_int_equal(fj_jit_enqueue(ctx, &cfg), FAJIT_OK);
    fj_jit_wait_idle(ctx);
    assert_int_equal(g_fake_calls, 1);
    assert_ptr_equal(fj_context_choice_find(ctx, "class A", NULL), &g_compiled);
    assert_int_equal(ctx->jit_done, 1);
    assert_int_equal(ctx->choices->pending, 0);
    fajit_context_destroy(ctx);
}

static void test_worker_failure_keeps_standin(void **state)
{
    (void)state;
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_F16, .head_dim = 64, .block_n = 96};
    g_fake_ms = 1, g_fake_fail = 1, g_fake_calls = 0;
    fajit_context *ctx = pending_context(&cfg);
    assert_int_equal(fj_jit_enqueue(ctx, &cfg), FAJIT_OK);
    fj_jit_wait_idle(ctx);
    char note[256];
    fj_context_note_get(ctx, note, sizeof note);
    print_message("note: %s\n", note);
    assert_non_null(strstr(note, "background compile"));
    assert_ptr_equal(fj_context_choice_find(ctx, "class A", NULL), &g_standin);
    assert_int_equal(ctx->jit_failed, 1);
    assert_int_equal(ctx->choices->pending, 0); /* the stand-in serves for good: not queued again */
    fajit_context_destroy(ctx);
}

/* Destroy while the worker compiles: the destroy waits for that compile, drops the queued ones, and nothing
 * runs after it returns (the sanitizer build checks the memory). */
static void test_destroy_while_compiling(void **state)
{
    (void)state;
    fajit_config a = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_n = 112};
    fajit_config b = a;
    b.block_n = 144;
    g_fake_ms = 200, g_fake_fail = 0, g_fake_calls = 0, g_fake_returned = 0;
    fajit_context *ctx = pending_context(&a);
    assert_int_equal(fj_jit_enqueue(ctx, &a), FAJIT_OK);
    assert_int_equal(fj_jit_enqueue(ctx, &b), FAJIT_OK);
    sleep_ms(50); /* the first compile is under way */
    fajit_context_destroy(ctx);
    assert_int_equal(__atomic_load_n(&g_fake_returned, __ATOMIC_SEQ_CST), 1);
    int calls = __atomic_load_n(&g_fake_calls, __ATOMIC_SEQ_CST);
    sleep_ms(250);
    assert_int_equal(__atomic_load_n(&g_fake_calls, __ATOMIC_SEQ_CST), calls); /* nothing after the destroy */
    assert_int_equal(calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_order),
        cmocka_unit_test(test_blob_lookup),
        cmocka_unit_test(test_linked_blob),
        cmocka_unit_test(test_linked_blob_damaged),
        cmocka_unit_test(test_blob_is_runtime_ptx),
        cmocka_unit_test(test_set_covers_defaults),
        cmocka_unit_test(test_set_has_decode),
        cmocka_unit_test(test_policy_decide),
        cmocka_unit_test(test_worker_switches),
        cmocka_unit_test(test_worker_failure_keeps_standin),
        cmocka_unit_test(test_destroy_while_compiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
