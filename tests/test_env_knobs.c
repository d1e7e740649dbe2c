/*
 * test_env_knobs.c - unit tests (no GPU) of fajit's environment variables: every FAJIT_* switch a context reads
 * (runtime/env.c) refuses a value it does not know at fajit_context_create, with FAJIT_ERR_INVALID_ARGUMENT naming
 * the variable, the value and the accepted values, and maps each accepted value to its setting; the knobs that
 * change the generated PTX (FAJIT_SM90_LEAN, FAJIT_KV_ORDER, FAJIT_FP8_KNOBS, FAJIT_CAUSAL_SCHED) put a setting other
 * than the default into the plan's canonical text (fj_plan_format), which the memory, prebuilt and disk caches key on, so two
 * settings never share a cached kernel, while an unset environment (or one naming the defaults) keeps today's text,
 * key and PTX. Contexts are made with device -1 (no driver call).
 * Run: ctest --test-dir build -R test_env_knobs --output-on-failure
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
#include "runtime/context.h"
#include "runtime/disk_cache.h"
#include "test_support.h"

static const char *const k_vars[] = {
    "FAJIT_PERSISTENT_CTAS", "FAJIT_PACK_GQA",     "FAJIT_DECODE_GATHER", "FAJIT_DECODE_PAGE_AHEAD",
    "FAJIT_DECODE_PAGE_DIV", "FAJIT_DECODE_SM90",  "FAJIT_VARLEN_SCHED",  "FAJIT_PREBUILT",
    "FAJIT_JIT",             "FAJIT_SM100A_LAUNCH", "FAJIT_KV8_WIDEN",    "FAJIT_KV8_DIRECT",
    "FAJIT_KV8_TILE",        "FAJIT_SM90_LEAN",    "FAJIT_KV_ORDER",      "FAJIT_FP8_KNOBS",
    "FAJIT_PTXAS_OPTS",      "FAJIT_CACHE",        "FAJIT_CACHE_VERIFY", "FAJIT_CAUSAL_SCHED",
    "FAJIT_PDL",
};

static int unset_all(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) unsetenv(k_vars[i]);
    return 0;
}

/* A context without a device, made with name = value (NULL: unset); the variable is unset again afterwards. The disk
 * cache setting -1 reads FAJIT_CACHE (nothing is written: directories are made on the first store). */
static fajit_status context_with(const char *name, const char *value, int disk_cache, fajit_context **ctx)
{
    fajit_context_options o = fajit_context_options_default();
    o.device = -1, o.disk_cache = disk_cache;
    if (value) setenv(name, value, 1);
    *ctx = NULL;
    fajit_status st = fajit_context_create(&o, ctx);
    unsetenv(name);
    return st;
}

/* ---- every switch: a bad value fails the context, named ------------------------------------------------------- */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value, *accepted; /* accepted: a fragment of the rule the message must give */
    } bad[] = {
        {"FAJIT_PERSISTENT_CTAS", "0", "whole number from 1"},
        {"FAJIT_PERSISTENT_CTAS", "8x", "whole number from 1"},
        {"FAJIT_PERSISTENT_CTAS", " 8", "whole number from 1"},
        {"FAJIT_PERSISTENT_CTAS", "99999999999", "whole number from 1"},
        {"FAJIT_PACK_GQA", "2", "use 1 ("},
        {"FAJIT_PACK_GQA", "off", "0 (they do not)"},
        {"FAJIT_DECODE_GATHER", "yes", "1 (gathers every"},
        {"FAJIT_DECODE_PAGE_AHEAD", "on", "0 (read them at"},
        {"FAJIT_DECODE_PAGE_DIV", "true", "1 (pages found by division"},
        {"FAJIT_DECODE_SM90", "auto", "or unset (a rule picks"},
        {"FAJIT_VARLEN_SCHED", "LPT", "lpt (the dynamic"},
        {"FAJIT_VARLEN_SCHED", "rr", "static (the static"},
        {"FAJIT_PREBUILT", "off", "0 (skip them)"},
        {"FAJIT_JIT", "synch", "sync (compile"},
        {"FAJIT_PDL", "on", "0 (it starts after"},
        {"FAJIT_SM100A_LAUNCH", "yes", "0 (never"},
        {"FAJIT_KV8_WIDEN", "fp16", "intk (K only)"},
        {"FAJIT_KV8_DIRECT", "auto", "or unset (kv8direct where"},
        {"FAJIT_KV8_TILE", "rows", "gone"},
        {"FAJIT_SM90_LEAN", "wgu,fast", "unknown word 'fast'"},
        {"FAJIT_KV_ORDER", "down", "desc (descending)"},
        {"FAJIT_CAUSAL_SCHED", "dynamic", "lpt (the dynamic"},
        {"FAJIT_FP8_KNOBS", "vt,regz", "unknown word 'regz'"},
        {"FAJIT_PTXAS_OPTS", "-O4", "not an accepted ptxas option"},
        {"FAJIT_CACHE", "maybe", "0 (off)"},
        {"FAJIT_CACHE_VERIFY", "yes", "1 (and generates"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fajit_context *ctx = NULL;
        char said[96];
        snprintf(said, sizeof said, "%s = '%s'", bad[i].name, bad[i].value);
        if (strcmp(bad[i].name, "FAJIT_PTXAS_OPTS") == 0) snprintf(said, sizeof said, "FAJIT_PTXAS_OPTS = \"-O4\"");
        fajit_status st = context_with(bad[i].name, bad[i].value, -1, &ctx);
        if (!fj_test_status_says(st, FAJIT_ERR_INVALID_ARGUMENT, said, bad[i].accepted, NULL))
            fail_msg("%s = '%s' was not refused as it should be", bad[i].name, bad[i].value);
        assert_null(ctx);
    }
    fajit_context *ctx = NULL; /* and with every variable unset again, a context is made */
    assert_int_equal(context_with("FAJIT_JIT", NULL, -1, &ctx), FAJIT_OK);
    fajit_context_destroy(ctx);
}

/* ---- every switch: its accepted values and defaults ------------------------------------------------------------ */
static fajit_context *made(const char *name, const char *value)
{
    fajit_context *ctx = NULL;
    fajit_status st = context_with(name, value, 0, &ctx);
    if (st != FAJIT_OK) fail_msg("%s = '%s': %s", name, value ? value : "(unset)", fajit_errmsg());
    return ctx;
}

/* The field `field` of a context made with name = value must be `want`. */
#define EXPECT(name, value, field, want)                                                                             \
    do {                                                                                                             \
        fajit_context *c_ = made(name, value);                                                                       \
        if ((long)c_->field != (long)(want))                                                                         \
            fail_msg("%s = '%s': %s = %ld, want %ld", name, value ? value : "(unset)", #field, (long)c_->field,      \
                     (long)(want));                                                                                  \
        fajit_context_destroy(c_);                                                                                   \
    } while (0)

static void test_accepted(void **state)
{
    (void)state;
    fajit_context *d = made("FAJIT_JIT", NULL); /* the defaults */
    assert_int_equal(d->persistent_ctas, 0);     /* no device: the SM count comes with one */
    assert_int_equal(d->pack_gqa, 1);
    assert_int_equal(d->paged_gather, 1);
    assert_int_equal(d->page_ahead, 1);
    assert_int_equal(d->page_div, 0);
    assert_int_equal(d->decode_sm90, -1);
    assert_int_equal(d->varlen_lpt, 1);
    assert_int_equal(d->prebuilt, 1);
    assert_int_equal(d->jit_mode, FJ_JIT_ASYNC);
    assert_int_equal(d->sm100a_launch, 1);
    assert_int_equal(d->kv8_widen, 0);
    assert_int_equal(d->kv8_direct, -1);
    assert_int_equal(d->pdl, 1);
    fajit_context_destroy(d);
    EXPECT("FAJIT_PERSISTENT_CTAS", "3", persistent_ctas, 3);
    EXPECT("FAJIT_PERSISTENT_CTAS", "", persistent_ctas, 0);
    EXPECT("FAJIT_PACK_GQA", "0", pack_gqa, 0);
    EXPECT("FAJIT_PACK_GQA", "1", pack_gqa, 1);
    EXPECT("FAJIT_PACK_GQA", "", pack_gqa, 1);
    EXPECT("FAJIT_DECODE_GATHER", "0", paged_gather, 0);
    EXPECT("FAJIT_DECODE_GATHER", "1", paged_gather, 2);
    EXPECT("FAJIT_DECODE_PAGE_AHEAD", "0", page_ahead, 0);
    EXPECT("FAJIT_DECODE_PAGE_AHEAD", "1", page_ahead, 1);
    EXPECT("FAJIT_DECODE_PAGE_DIV", "1", page_div, 1);
    EXPECT("FAJIT_DECODE_PAGE_DIV", "0", page_div, 0);
    EXPECT("FAJIT_DECODE_SM90", "1", decode_sm90, 1);
    EXPECT("FAJIT_DECODE_SM90", "0", decode_sm90, 0);
    EXPECT("FAJIT_VARLEN_SCHED", "static", varlen_lpt, 0);
    EXPECT("FAJIT_VARLEN_SCHED", "lpt", varlen_lpt, 1);
    EXPECT("FAJIT_PREBUILT", "0", prebuilt, 0);
    EXPECT("FAJIT_PREBUILT", "1", prebuilt, 1);
    EXPECT("FAJIT_JIT", "sync", jit_mode, FJ_JIT_SYNC);
    EXPECT("FAJIT_JIT", "async", jit_mode, FJ_JIT_ASYNC);
    EXPECT("FAJIT_SM100A_LAUNCH", "0", sm100a_launch, 0);
    EXPECT("FAJIT_PDL", "0", pdl, 0);
    EXPECT("FAJIT_PDL", "1", pdl, 1);
    EXPECT("FAJIT_KV8_WIDEN", "intk", kv8_widen, FJ_VARIANT_KV8_INT_K);
    EXPECT("FAJIT_KV8_DIRECT", "1", kv8_direct, 1);
    EXPECT("FAJIT_KV8_DIRECT", "1", kv8_widen, FJ_VARIANT_KV8_DIRECT);
    /* the knobs read later pass creation with their accepted values */
    static const struct {
        const char *name, *value;
    } later[] = {{"FAJIT_SM90_LEAN", "0"},      {"FAJIT_SM90_LEAN", "none"}, {"FAJIT_SM90_LEAN", "wgu,all"},
                 {"FAJIT_SM90_LEAN", ""},       {"FAJIT_KV_ORDER", "asc"},   {"FAJIT_KV_ORDER", "auto"},
                 {"FAJIT_FP8_KNOBS", "regs,,ostage"}, {"FAJIT_FP8_KNOBS", ""}, {"FAJIT_FP8_KNOBS", "none"},
                 {"FAJIT_PTXAS_OPTS", "-O1"}, {"FAJIT_CAUSAL_SCHED", "static"}, {"FAJIT_CAUSAL_SCHED", "lpt"}};
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) fajit_context_destroy(made(later[i].name, later[i].value));
    /* the disk cache's: FAJIT_CACHE's words turn it on / off, FAJIT_CACHE_VERIFY=1 checks loads */
    static const struct {
        const char *value;
        int on;
    } cache[] = {{"0", 0}, {"off", 0}, {"NO", 0}, {"1", 1}, {"yes", 1}, {"TRUE", 1}};
    setenv("FAJIT_CACHE_DIR", "/tmp/fajit-test-env-knobs-never-written", 1);
    for (size_t i = 0; i < sizeof cache / sizeof cache[0]; i++) {
        fajit_context *c = NULL;
        assert_int_equal(context_with("FAJIT_CACHE", cache[i].value, -1, &c), FAJIT_OK);
        assert_int_equal(c->disk.enabled, cache[i].on);
        fajit_context_destroy(c);
    }
    fajit_context *c = NULL;
    assert_int_equal(context_with("FAJIT_CACHE_VERIFY", "1", -1, &c), FAJIT_OK);
    assert_int_equal(c->disk.verify, 1);
    fajit_context_destroy(c);
    unsetenv("FAJIT_CACHE_DIR");
}

/* ---- the PTX knobs: in the key when they change the kernel, absent when they do not --------------------------- */
/* The plan's canonical text (the caches' key) and PTX of cfg + variant under name = value (NULL: unset). */
static void plan_under(const char *name, const char *value, const fajit_config *cfg, unsigned variant, char *text,
                       size_t size, char **ptx)
{
    fj_plan p;
    if (value) setenv(name, value, 1);
    fajit_status st = fj_plan_build_variant(cfg, variant, &p);
    if (st != FAJIT_OK) fail_msg("%s = '%s': %s", name, value ? value : "(unset)", fajit_errmsg());
    assert_true(fj_plan_format(&p, text, size) < (int)size);
    size_t len = 0;
    if (ptx) assert_int_equal(fj_generate_ptx_plan(&p, 0, ptx, &len), FAJIT_OK);
    unsetenv(name);
}

static fajit_config filled(fajit_arch arch, fajit_dtype dt, int causal, int mods)
{
    fajit_config c = {.arch = arch, .dtype = dt, .head_dim = 128, .causal = causal, .mods = mods};
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK);
    return c;
}

/* Under name = value, cfg's text is today's (fajit_config_format + the variant's words) + `words`; its PTX differs
 * from the unset environment's exactly when words is not "", and so does its disk key. */
static void expect_key(const char *name, const char *value, const fajit_config *cfg, unsigned variant,
                       const char *variant_words, const char *words)
{
    char base[FJ_CONFIG_TEXT_MAX], want[FJ_CONFIG_TEXT_MAX], text[FJ_CONFIG_TEXT_MAX], unset_text[FJ_CONFIG_TEXT_MAX];
    char *ptx0 = NULL, *ptx = NULL;
    fajit_config_format(cfg, base, sizeof base);
    snprintf(want, sizeof want, "%s%s%s", base, variant_words, words);
    plan_under(name, NULL, cfg, variant, unset_text, sizeof unset_text, &ptx0);
    plan_under(name, value, cfg, variant, text, sizeof text, &ptx);
    snprintf(base + strlen(base), sizeof base - strlen(base), "%s", variant_words);
    if (strcmp(unset_text, base) != 0) fail_msg("unset environment: text '%s', want today's '%s'", unset_text, base);
    if (strcmp(text, want) != 0) fail_msg("%s = '%s': text '%s', want '%s'", name, value, text, want);
    int same_ptx = strcmp(ptx0, ptx) == 0;
    if (same_ptx != !*words) fail_msg("%s = '%s' on '%s': PTX %s", name, value, base, same_ptx ? "unchanged" : "changed");
    char k0[FJ_DISK_CACHE_KEY_MAX], k1[FJ_DISK_CACHE_KEY_MAX];
    fj_disk_cache_key(k0, sizeof k0, unset_text, "sm_90a", "nvJitLink 13.0");
    fj_disk_cache_key(k1, sizeof k1, text, "sm_90a", "nvJitLink 13.0");
    assert_int_equal(strcmp(k0, k1) == 0, !*words);
    fajit_free(ptx0);
    fajit_free(ptx);
}

static void test_ptx_knobs_keyed(void **state)
{
    (void)state;
    fajit_config plain = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 1, 0);
    fajit_config alibi = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 1, FAJIT_MOD_ALIBI);
    fajit_config fp8 = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_E4M3, 0, 0);
    fajit_config s80 = filled(FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 1, 0);
    fajit_config fp8c = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_E4M3, 1, 0);
    expect_key("FAJIT_SM90_LEAN", "all", &plain, 0, "", "");
    expect_key("FAJIT_SM90_LEAN", "wgu", &plain, 0, "", "");
    expect_key("FAJIT_SM90_LEAN", "0", &plain, 0, "", " sm90lean=none");
    expect_key("FAJIT_SM90_LEAN", "none", &alibi, 0, "", " sm90lean=none");
    expect_key("FAJIT_SM90_LEAN", "", &plain, FJ_VARIANT_SPLIT, " split", " sm90lean=none");
    expect_key("FAJIT_KV_ORDER", "auto", &alibi, 0, "", "");
    expect_key("FAJIT_KV_ORDER", "desc", &alibi, 0, "", "");
    expect_key("FAJIT_KV_ORDER", "asc", &alibi, 0, "", " kvorder=asc");
    expect_key("FAJIT_KV_ORDER", "asc", &plain, 0, "", "");
    expect_key("FAJIT_KV_ORDER", "desc", &plain, 0, "", " kvorder=desc");
    expect_key("FAJIT_KV_ORDER", "desc", &plain, FJ_VARIANT_SEQLENS, " seqlens", " kvorder=desc");
    expect_key("FAJIT_KV_ORDER", "desc", &fp8, 0, "", ""); /* FP8 kernels stay ascending */
    expect_key("FAJIT_FP8_KNOBS", "vt,vt4,poff", &fp8c, 0, "", "");  /* D128's default on bc192 */
    expect_key("FAJIT_FP8_KNOBS", "vt,vt4", &fp8c, 0, "", " fp8knobs=vt,vt4"); /* D128's default before poff */
    expect_key("FAJIT_FP8_KNOBS", "vt", &fp8c, 0, "", " fp8knobs=vt"); /* D128's earlier default */
    expect_key("FAJIT_FP8_KNOBS", "", &fp8c, 0, "", " fp8knobs=none");
    expect_key("FAJIT_FP8_KNOBS", "vt,regs", &fp8c, 0, "", " fp8knobs=regs,vt");
    fajit_config fp8w = fp8; /* FlashAttention-3's D128 tile: regs in its default set (FJ_FP8_REGS_WIDE) */
    fp8w.block_n = 224;
    expect_key("FAJIT_FP8_KNOBS", "regs,vt,vt4,poff", &fp8w, 0, "", "");
    expect_key("FAJIT_FP8_KNOBS", "vt,regs,poff", &fp8w, FJ_VARIANT_SEQLENS, " seqlens", ""); /* ... with the V tail */
    expect_key("FAJIT_FP8_KNOBS", "regs,vt,vt4,poff", &fp8w, FJ_VARIANT_SPLIT, " split", "");
    expect_key("FAJIT_FP8_KNOBS", "regs", &plain, 0, "", ""); /* 16-bit kernels read no FP8 knob */
    /* the causal schedule: causal 16-bit sm_90a kernels (windows and chunks too); a decode variant keeps its own */
    fajit_config nc = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 0, 0);
    fajit_config win = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 1, FAJIT_MOD_WINDOW);
    fajit_config sinks = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 1, FAJIT_MOD_SINKS);
    expect_key("FAJIT_CAUSAL_SCHED", "static", &plain, 0, "", "");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &plain, 0, "", " causalsched=lpt");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &sinks, 0, "", " causalsched=lpt");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &nc, 0, "", "");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &win, 0, "", " causalsched=lpt"); /* a window can take it */
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &fp8c, 0, "", "");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &plain, FJ_VARIANT_SPLIT, " split", "");
    expect_key("FAJIT_CAUSAL_SCHED", "lpt", &s80, 0, "", "");
    /* sm_80 kernels read none of them: the same text and PTX */
    expect_key("FAJIT_SM90_LEAN", "0", &s80, 0, "", "");
    expect_key("FAJIT_KV_ORDER", "desc", &s80, 0, "", "");
    /* several at once, in a fixed order; the longest text (every variant word the sm_90a kernel takes with them)
     * fits the caches' key buffer */
    char text[FJ_CONFIG_TEXT_MAX], base[FJ_CONFIG_TEXT_MAX], want[FJ_CONFIG_TEXT_MAX + 32];
    setenv("FAJIT_KV_ORDER", "desc", 1);
    plan_under("FAJIT_SM90_LEAN", "0", &plain, 0, text, sizeof text, NULL);
    fajit_config_format(&plain, base, sizeof base);
    snprintf(want, sizeof want, "%s sm90lean=none kvorder=desc", base);
    assert_string_equal(text, want);
    fajit_config all = filled(FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 1,
                              FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP | FAJIT_MOD_SINKS | FAJIT_MOD_ALIBI);
    setenv("FAJIT_KV_ORDER", "asc", 1);
    plan_under("FAJIT_SM90_LEAN", "0", &all, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED,
               text, sizeof text, NULL);
    unsetenv("FAJIT_KV_ORDER");
    assert_non_null(strstr(text, " seqlens split packgqa paged sm90lean=none kvorder=asc"));
    print_message("longest text, %zu of %d characters: %s\n", strlen(text), FJ_CONFIG_TEXT_MAX - 1, text);
}

/* The context knobs that choose a kernel do it through decode variant bits, which are in the text too. */
static void test_variant_knobs_keyed(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = 128};
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK);
    static const unsigned bits[] = {0, FJ_VARIANT_KV8_INT_K, FJ_VARIANT_KV8_INT_V, FJ_VARIANT_KV8_DIRECT};
    char text[4][FJ_CONFIG_TEXT_MAX];
    for (int i = 0; i < 4; i++) {
        fj_plan p;
        assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | bits[i], &p), FAJIT_OK);
        fj_plan_format(&p, text[i], sizeof text[i]);
        for (int j = 0; j < i; j++) assert_string_not_equal(text[i], text[j]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_refused, unset_all),
        cmocka_unit_test_setup(test_accepted, unset_all),
        cmocka_unit_test_setup(test_ptx_knobs_keyed, unset_all),
        cmocka_unit_test_setup(test_variant_knobs_keyed, unset_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
