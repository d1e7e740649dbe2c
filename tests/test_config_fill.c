/*
 * test_config_fill.c - (unit) fajit_config_fill keeps the fields a caller sets and returns a config that
 * passes its own check, or fails naming a field the caller set (issue 21 items 6 and 9).
 *
 * The walk (fill_walk.c): the sm_80 and sm_90a paths, an A100 and an H100 (fake contexts), the sm_80
 * decode variants; head dims x masks; every field alone over the range fagen accepts and pairs of fields.
 * Each result must pass fajit_config_check, its variant's plan and its device's checks (register
 * allocation of the target, shared memory), keep every field given, and have no zero field; each refusal
 * must be INVALID_CONFIG or UNSUPPORTED and start with a field the caller set ("block_m (--br) = 1024"),
 * never one it did not. test_fill_ptxas assembles the results. Run: ctest --test-dir build -R test_config_fill
 * (FAJIT_FILL_WALK=full: the whole --br / --bc ranges at every head dim).
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
#include "codegen/sm90.h"
#include "fill_walk.h"
#include "runtime/config_fill.h"
#include "runtime/context.h"
#include "runtime/tune_file.h"

typedef struct tally {
    int filled, refused, bad;
} tally;

static int bad(tally *t, const fill_case *c, const char *why)
{
    char g[160], o[160];
    fajit_config_format(&c->given, g, sizeof g);
    fajit_config_format(&c->out, o, sizeof o);
    if (t->bad++ < 20) printf("FAIL %s: given \"%s\": %s (got \"%s\", %s: %s)\n", c->goal->name, g, why, o,
                              fajit_status_name(c->st), c->msg);
    return 0;
}

static int check_filled(tally *t, const fill_case *c)
{
    fj_plan plan;
    const fajit_config *o = &c->out;
    t->filled++;
    if (fajit_config_check(o) != FAJIT_OK) return bad(t, c, "fails fajit_config_check");
    if (fj_plan_build_variant(o, c->goal->variant, &plan) != FAJIT_OK) return bad(t, c, "fails its variant's plan");
    for (int f = 0; f < FILL_WALK_FIELDS; f++) {
        int g = fill_walk_field(&c->given, f);
        if (g && fill_walk_field(o, f) != g) return bad(t, c, "changed a field given");
        if (!fill_walk_field(o, f)) return bad(t, c, "left a field 0");
    }
    if (o->head_dim != c->given.head_dim || o->causal != c->given.causal || o->dtype != c->given.dtype)
        return bad(t, c, "changed the problem");
    if (c->goal->sm) {
        const fj_arch_info *dev = fj_arch_find(c->goal->sm);
        if (plan.smem_bytes > c->goal->smem) return bad(t, c, "exceeds the device's shared memory");
        if (fj_plan_check_target(&plan, dev) != FAJIT_OK) return bad(t, c, "the device's compiler would spill it");
    }
    return 1;
}

static int check_refused(tally *t, const fill_case *c)
{
    t->refused++;
    if (c->st != FAJIT_ERR_INVALID_CONFIG && c->st != FAJIT_ERR_UNSUPPORTED) return bad(t, c, "wrong status");
    for (int f = 0; f < FILL_WALK_FIELDS; f++) {
        const char *name = fill_walk_field_name(f);
        size_t n = strlen(name);
        if (fill_walk_field(&c->given, f) && strncmp(c->msg, name, n) == 0 && strncmp(c->msg + n, " = ", 3) == 0)
            return 1;
    }
    return bad(t, c, "the refusal does not start with a field given");
}

static void on_case(void *user, const fill_case *c)
{
    tally *t = user;
    int given = 0;
    for (int f = 1; f < FILL_WALK_FIELDS; f++) given |= fill_walk_field(&c->given, f) != 0;
    if (c->st == FAJIT_OK) (void)check_filled(t, c);
    else if (!given) (void)bad(t, c, "no field given, yet refused");
    else (void)check_refused(t, c);
}

static void test_walk(void **state)
{
    (void)state;
    const char *env = getenv("FAJIT_FILL_WALK");
    tally t = {0, 0, 0};
    int n = fill_walk(env && strcmp(env, "full") == 0, on_case, &t);
    assert_true(n > 0);
    print_message("%d fills: %d filled, %d refused naming a given field, %d wrong\n", n, t.filled, t.refused, t.bad);
    assert_int_equal(t.bad, 0);
}

/* ---- the probes of issue 21 ------------------------------------------------------------------------- */

static fajit_status fill80(fajit_config *c, unsigned variant)
{
    c->arch = FAJIT_ARCH_AUTO;
    c->head_dim = c->head_dim ? c->head_dim : 128;
    return fj_config_fill_for(NULL, NULL, NULL, variant, c);
}

static void test_readme_probes(void **state)
{
    (void)state;
    fajit_config c = {0};
    assert_int_equal(fill80(&c, FJ_VARIANT_SPLIT), FAJIT_OK); /* fagen ptx --variant split */
    memset(&c, 0, sizeof c);
    assert_int_equal(fill80(&c, FJ_VARIANT_SEQLENS), FAJIT_OK); /* --variant seqlens */
    memset(&c, 0, sizeof c);
    c.swizzle = FAJIT_SWIZZLE_NONE; /* --swizzle none */
    assert_int_equal(fill80(&c, 0), FAJIT_OK);
    assert_int_equal(c.swizzle, FAJIT_SWIZZLE_NONE);
    memset(&c, 0, sizeof c);
    c.warps = 2; /* --warps 2 */
    assert_int_equal(fill80(&c, 0), FAJIT_OK);
    assert_int_equal(c.warps, 2);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    memset(&c, 0, sizeof c);
    c.head_dim = 256;
    c.stages = 4; /* was "block_n = 16 with col_warps = 2" */
    assert_int_equal(fill80(&c, 0), FAJIT_OK);
    assert_int_equal(c.stages, 4);
}

static void test_refusals_name_the_field(void **state)
{
    (void)state;
    fajit_config c = {0};
    c.block_m = 1024; /* was "block_n = 0" */
    assert_int_equal(fill80(&c, 0), FAJIT_ERR_INVALID_CONFIG);
    assert_true(strncmp(fajit_errmsg(), "block_m (--br) = 1024", 21) == 0);
    memset(&c, 0, sizeof c);
    c.warps = 5000;
    assert_int_not_equal(fill80(&c, 0), FAJIT_OK);
    assert_true(strncmp(fajit_errmsg(), "warps = 5000", 12) == 0);
    memset(&c, 0, sizeof c);
    c.stages = 100000;
    assert_int_not_equal(fill80(&c, 0), FAJIT_OK);
    assert_true(strncmp(fajit_errmsg(), "stages = 100000", 15) == 0);
    memset(&c, 0, sizeof c);
    c.block_m = 256;
    c.warps = 2; /* each fine alone, not together */
    assert_int_equal(fill80(&c, 0), FAJIT_ERR_INVALID_CONFIG);
    assert_non_null(strstr(fajit_errmsg(), "block_m (--br) = 256 with warps = 2: no sm_80 config"));
    memset(&c, 0, sizeof c);
    c.arch = FAJIT_ARCH_SM90A;
    c.head_dim = 128;
    assert_int_not_equal(fj_config_fill_for(NULL, NULL, NULL, FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, &c), FAJIT_OK);
    assert_true(strncmp(fajit_errmsg(), "arch = sm_90a: no sm_90a config", 31) == 0);
}

static void test_head_dim_required(void **state)
{
    (void)state;
    fajit_config c = {0};
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "head_dim = 0: must be set"));
    assert_int_equal(c.block_m, 0); /* untouched */
    c.head_dim = 100;
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_ERR_INVALID_CONFIG);
    assert_non_null(strstr(fajit_errmsg(), "head_dim = 100"));
    assert_int_equal(fajit_config_fill(NULL, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
}

/* Item 9: on an A100 the default grid's fills compile there (the register allocation of sm_80-sm_89). */
static void test_a100_defaults(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    fj_context_set_identity(ctx, "sm_80", "NVIDIA A100-SXM4-80GB", 13000, 166912);
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int dt = 1; dt <= 2; dt++)
        for (size_t d = 0; d < 5; d++)
            for (int causal = 0; causal <= 1; causal++) {
                fajit_config c = {.dtype = (fajit_dtype)dt, .head_dim = dims[d], .causal = causal};
                fj_plan plan;
                assert_int_equal(fajit_config_fill(ctx, NULL, &c), FAJIT_OK);
                assert_int_equal(c.arch, FAJIT_ARCH_SM80);
                assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
                assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_80")), FAJIT_OK);
            }
    /* the compile target alone (fagen cubin --sm sm_80), without a device */
    fajit_config c = {.head_dim = 128, .causal = 1};
    assert_int_equal(fj_config_fill_for(NULL, NULL, fj_arch_find("sm_80"), 0, &c), FAJIT_OK);
    fj_plan plan;
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_80")), FAJIT_OK);
    fajit_context_destroy(ctx);
}

/* The sm_90a defaults on an H100 are the heuristic's table, untouched by the search. */
static void test_h100_defaults_kept(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    fj_context_set_identity(ctx, "sm_90", "NVIDIA H100 80GB HBM3", 13000, 232448);
    fajit_config c = {.dtype = FAJIT_DTYPE_BF16, .head_dim = 128}, h = c;
    assert_int_equal(fajit_config_fill(ctx, NULL, &c), FAJIT_OK);
    h.arch = FAJIT_ARCH_SM90A;
    fj_config_heuristic(&h, &h, NULL, 232448);
    assert_true(fj_config_same(&c, &h));
    fajit_context_destroy(ctx);
}

/* sched (fajit.h): the heuristic picks lpt for causal 16-bit sm_90a shapes at Nq >= 4096 - grouped-query heads at any
 * length, other heads up to Nq 8192, chunked attention - and nowhere else; lpt names itself in the text (" lpt", parsed back); the rules refuse it where the schedule cannot run, naming
 * the field. */
static int heuristic_sched(fajit_arch arch, fajit_dtype dt, int d, int causal, int mods, int hq, int hkv, int n)
{
    fajit_shape shape = {1, hq, hkv, n, n};
    fajit_config c = {.arch = arch, .dtype = dt, .head_dim = d, .causal = causal, .mods = mods};
    fj_config_heuristic(&c, &c, &shape, 0);
    return c.sched;
}

static void expect_sched_refused(fajit_config c, const char *part)
{
    assert_int_equal(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG);
    if (!strstr(fajit_errmsg(), part)) fail_msg("message \"%s\" lacks \"%s\"", fajit_errmsg(), part);
}

static void test_sched_field(void **state)
{
    (void)state;
    const fajit_arch S90 = FAJIT_ARCH_SM90A;
    const int N8 = 8192, N16 = 16384;
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, 0, 64, 8, N8), 1);
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_F16, 128, 1, FAJIT_MOD_SINKS, 32, 8, N8), 1);
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, 0, 32, 1, N16), 1);                /* MQA */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 256, 1, 0, 16, 4, N16), 1);               /* head_dim 256 */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, 0, 32, 32, N8), 1);                /* multi-head */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 128, 1, FAJIT_MOD_SOFTCAP, 16, 16, N8), 1);
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, 0, 32, 32, N16), 0);               /* ... long */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, 0, 32, 16, N16), 0);               /* group 2 */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 128, 1, FAJIT_MOD_CHUNK, 16, 16, 32768), 1); /* chunk */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 0, 0, 64, 8, N8), 0);                 /* not causal */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_BF16, 64, 1, FAJIT_MOD_WINDOW, 64, 8, N8), 0);  /* window: the runtime's */
    assert_int_equal(heuristic_sched(S90, FAJIT_DTYPE_E4M3, 64, 1, 0, 64, 8, N8), 0);                 /* FP8 */
    assert_int_equal(heuristic_sched(FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 64, 1, 0, 64, 8, N8), 0);     /* sm_80 */
    fajit_shape long_gqa = {1, 64, 8, 8192, 8192};
    fajit_config kv8 = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = 128,
                        .causal = 1};
    fj_config_heuristic(&kv8, &kv8, &long_gqa, 0);
    assert_int_equal(kv8.sched, 0); /* an FP8 K/V cache */
    fajit_shape short_gqa = {1, 64, 8, 2048, 8192};
    fajit_config sq = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&sq, &sq, &short_gqa, 0);
    assert_int_equal(sq.sched, 0); /* queries shorter than 4096: not measured */
    fajit_shape shape = {1, 64, 8, 8192, 8192};
    fajit_config c = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1, .mods = FAJIT_MOD_SINKS};
    fj_config_heuristic(&c, &c, &shape, 0);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    char text[FJ_CONFIG_TEXT_MAX], back[FJ_CONFIG_TEXT_MAX];
    fajit_config_format(&c, text, sizeof text);
    assert_non_null(strstr(text, " lpt xt causal sink")); /* (and the cross-tile tail: test_cross_tile_field) */
    fajit_config parsed;
    assert_null(fj_tune_parse_config(text, &parsed));
    assert_int_equal(parsed.sched, 1);
    fajit_config_format(&parsed, back, sizeof back);
    assert_string_equal(back, text);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.lpt, 1);
    fj_plan_format(&p, back, sizeof back);
    assert_null(strstr(back, "causalsched")); /* the config's text says it */
    fajit_config vc = c;
    vc.block_n = 64; /* (bc128 has no registers for varlen's) */
    assert_int_equal(fj_plan_build_variant(&vc, FJ_VARIANT_VARLEN, &p), FAJIT_OK); /* the variant's own schedule */
    assert_int_equal(p.lpt, 0);
    fj_plan_format(&p, back, sizeof back);
    assert_null(strstr(back, "lpt"));
    fajit_config bad = c;
    bad.causal = 0;
    expect_sched_refused(bad, "sched = 1 (lpt) with a non-causal mask");
    /* a window takes lpt when given (the heuristic leaves it static: the runtime picks by the window's length) */
    fajit_config w = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1, .mods = FAJIT_MOD_WINDOW};
    fj_config_heuristic(&w, &w, &shape, 0);
    assert_int_equal(w.sched, 0);
    assert_int_equal(w.stages, 3); /* static: 3 stages; given lpt: 2 (H200, window (4096, 0) N32k) */
    fajit_config wl = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1, .mods = FAJIT_MOD_WINDOW,
                       .sched = 1};
    fj_config_heuristic(&wl, &wl, &shape, 0);
    assert_int_equal(wl.stages, 2);
    w.sched = 1;
    assert_int_equal(fj_plan_build(&w, &p), FAJIT_OK);
    assert_int_equal(p.lpt, 1);
    fajit_config ch = {.arch = S90, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1, .mods = FAJIT_MOD_CHUNK};
    fj_config_heuristic(&ch, &ch, &shape, 0); /* a chunk's causal tiles differ in length: it takes lpt */
    assert_int_equal(ch.sched, 1);
    assert_int_equal(fj_plan_build(&ch, &p), FAJIT_OK);
    assert_int_equal(p.lpt, 1);
    bad = c, bad.sched = 2;
    expect_sched_refused(bad, "sched = 2: must be 1");
    fajit_config s80 = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&s80, &s80, NULL, 0);
    s80.sched = 1;
    expect_sched_refused(s80, "sched = 1: the sm_80 path has no warp specialization");
    c.sched = -1; /* static, given: kept, and the text has no word for it */
    fajit_config_format(&c, text, sizeof text);
    assert_null(strstr(text, "lpt"));
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.lpt, 0);
}

static int heuristic_cross_tile(fajit_arch arch, fajit_dtype dt, int d, int causal, int mods, int hq, int hkv, int n)
{
    fajit_shape shape = {1, hq, hkv, n, n};
    fajit_config c = {.arch = arch, .dtype = dt, .head_dim = d, .causal = causal, .mods = mods};
    fj_config_heuristic(&c, &c, &shape, 0);
    if (c.cross_tile == 1) assert_int_equal(fajit_config_check(&c), FAJIT_OK); /* what it picks plans */
    return c.cross_tile;
}

/* cross_tile (fajit.h): the heuristic's pick where it measured faster (config.c fit_cross_tile: causal head_dim <= 64
 * with grouped-query heads), the text's " xt" read back, a given -1 kept, the plan's tail on for the plain kernel and
 * off for a variant's, and each refusal naming the field and what is missing. */
static void test_cross_tile_field(void **state)
{
    (void)state;
    const fajit_arch S90 = FAJIT_ARCH_SM90A;
    const fajit_dtype BF = FAJIT_DTYPE_BF16;
    const int N4 = 4096, N8 = 8192, N16 = 16384;
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 32, 8, N4), 1);
    assert_int_equal(heuristic_cross_tile(S90, FAJIT_DTYPE_F16, 64, 1, FAJIT_MOD_SINKS, 64, 8, N8), 1);
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 8, 1, N16), 1);                       /* MQA */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 32, 8, 2048), 1);                     /* static */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 32, 8, 1024), 0); /* short: no ping-pong, no tail */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 32, 32, N4), 0);                      /* multi-head */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, 0, 32, 16, N8), 0);                      /* group 2 */
    assert_int_equal(heuristic_cross_tile(S90, BF, 128, 1, 0, 32, 8, N8), 0);                      /* head_dim 128 */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 0, 0, 32, 8, N8), 0);                       /* non-causal */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, FAJIT_MOD_SOFTCAP, 32, 8, N8), 0);
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, FAJIT_MOD_WINDOW, 64, 8, N8), 0);        /* the runtime's */
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, FAJIT_MOD_CHUNK, 64, 8, N8), 0);
    assert_int_equal(heuristic_cross_tile(S90, BF, 64, 1, FAJIT_MOD_ALIBI, 64, 8, N8), 0);
    assert_int_equal(heuristic_cross_tile(S90, FAJIT_DTYPE_E4M3, 64, 1, 0, 64, 8, N8), 0);
    assert_int_equal(heuristic_cross_tile(FAJIT_ARCH_SM80, BF, 64, 1, 0, 64, 8, N8), 0);
    fajit_config none = {.arch = S90, .dtype = BF, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&none, &none, NULL, 0);
    assert_int_equal(none.cross_tile, 0); /* no shape: no heads to weigh */
    fajit_shape gqa = {1, 64, 8, N8, N8};
    fajit_config off = {.arch = S90, .dtype = BF, .head_dim = 64, .causal = 1, .cross_tile = -1};
    fj_config_heuristic(&off, &off, &gqa, 0);
    assert_int_equal(off.cross_tile, -1); /* given: kept */
    fajit_config nopp = {.arch = S90, .dtype = BF, .head_dim = 64, .causal = 1, .pingpong = -1};
    fj_config_heuristic(&nopp, &nopp, &gqa, 0);
    assert_int_equal(nopp.cross_tile, 0); /* it needs the ping-pong the caller turned off: not picked */
    fajit_config c = {.arch = S90, .dtype = BF, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&c, &c, &gqa, 0);
    assert_int_equal(c.cross_tile, 1);
    char text[FJ_CONFIG_TEXT_MAX], back[FJ_CONFIG_TEXT_MAX];
    fajit_config_format(&c, text, sizeof text);
    assert_non_null(strstr(text, " pp lpt xt causal"));
    fajit_config parsed;
    assert_null(fj_tune_parse_config(text, &parsed));
    assert_int_equal(parsed.cross_tile, 1);
    assert_true(fj_config_same(&parsed, &c));
    fajit_config_format(&parsed, back, sizeof back);
    assert_string_equal(back, text);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(fj_sm90_cross_tile(&p), 1);
    char *why = NULL; /* fagen explain says so */
    assert_int_equal(fajit_explain(&c, &why), FAJIT_OK);
    assert_non_null(strstr(why, "cross-tile tail (cross_tile"));
    fajit_free(why);
    fajit_config vc = c;
    vc.block_n = 64; /* (bc128 has no registers for varlen's) */
    assert_int_equal(fj_plan_build_variant(&vc, FJ_VARIANT_VARLEN, &p), FAJIT_OK); /* a variant: a plain tail */
    assert_int_equal(fj_sm90_cross_tile(&p), 0);
    fj_plan_format(&p, back, sizeof back);
    assert_null(strstr(back, " xt"));
    fajit_config o = c;
    o.cross_tile = -1; /* off, given: no word for it, the plain tail */
    fajit_config_format(&o, text, sizeof text);
    assert_null(strstr(text, " xt"));
    assert_false(fj_config_same(&o, &c));
    assert_int_equal(fj_plan_build(&o, &p), FAJIT_OK);
    assert_int_equal(fj_sm90_cross_tile(&p), 0);
    assert_int_equal(fajit_explain(&o, &why), FAJIT_OK);
    assert_null(strstr(why, "cross-tile"));
    fajit_free(why);
    fajit_config bad = c;
    bad.cross_tile = 2;
    expect_sched_refused(bad, "cross_tile = 2: must be 1");
    bad = c, bad.pingpong = -1;
    expect_sched_refused(bad, "cross_tile = 1 with pingpong off");
    bad = c, bad.overlap = -1, bad.pingpong = -1;
    expect_sched_refused(bad, "cross_tile = 1 with pingpong off");
    bad = c, bad.roll = -1;
    expect_sched_refused(bad, "cross_tile = 1 with roll off");
    bad = c, bad.sched = 0, bad.mods = FAJIT_MOD_ALIBI;
    expect_sched_refused(bad, "cross_tile = 1 with ALiBi");
    fajit_config f8 = {.arch = S90, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&f8, &f8, &gqa, 0);
    f8.cross_tile = 1;
    expect_sched_refused(f8, "cross_tile = 1 with dtype e4m3");
    fajit_config s80 = {.arch = FAJIT_ARCH_SM80, .dtype = BF, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&s80, &s80, NULL, 0);
    s80.cross_tile = 1;
    expect_sched_refused(s80, "cross_tile = 1: the sm_80 path has no warp specialization");
    fajit_config s100 = {.arch = FAJIT_ARCH_SM100A, .dtype = BF, .head_dim = 64, .causal = 1};
    fj_config_heuristic(&s100, &s100, NULL, 0);
    s100.cross_tile = 1;
    expect_sched_refused(s100, "cross_tile = 1 on sm_100a");
    /* given on where the heuristic would not pick it (multi-head, head_dim 128, non-causal): planned as asked */
    fajit_config d128 = {.arch = S90, .dtype = BF, .head_dim = 128, .causal = 0, .cross_tile = 1};
    fj_config_heuristic(&d128, &d128, NULL, 0);
    assert_int_equal(fj_plan_build(&d128, &p), FAJIT_OK);
    assert_int_equal(fj_sm90_cross_tile(&p), 1);
}

/* accurate (fajit.h): off unless given (the heuristic and fill never pick it), the text's " acc" read back, the plan's
 * weight test on both 16-bit paths (sm_80 1/8, sm_90a 1/4 of the estimated final l, threshold held: the build knobs'
 * w3held form that session 17 measured), refused where it was not built or measured, naming the rule */
static void test_accurate_field(void **state)
{
    (void)state;
    fajit_shape shape = {1, 16, 16, 4096, 4096};
    fj_plan p;
    char text[160], back[160];
    for (int arch = 0; arch < 2; arch++) {
        fajit_config c = {.arch = arch ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16,
                          .head_dim = 128, .causal = 1};
        fj_config_heuristic(&c, &c, &shape, 0);
        assert_int_equal(c.accurate, 0); /* never the heuristic's */
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        assert_int_equal(p.rescale_weight_log2, 0);
        fajit_config a = {.arch = c.arch, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1, .accurate = 1};
        assert_int_equal(fajit_config_fill(NULL, &shape, &a), FAJIT_OK);
        assert_int_equal(a.accurate, 1);
        assert_false(fj_config_same(&a, &c));
        assert_int_equal(fj_plan_build(&a, &p), FAJIT_OK);
        assert_int_equal(p.rescale_weight_log2, arch ? -2 : -3);
        assert_int_equal(p.rescale_weight_est, 1);
        assert_int_equal(p.rescale_weight_held, 1);
        fajit_config_format(&a, text, sizeof text);
        assert_non_null(strstr(text, " acc causal"));
        fajit_config parsed;
        assert_null(fj_tune_parse_config(text, &parsed));
        assert_int_equal(parsed.accurate, 1);
        fajit_config_format(&parsed, back, sizeof back);
        assert_string_equal(back, text);
        fajit_config off = c;
        off.accurate = -1; /* off, given: the default's kernel and text */
        fajit_config_format(&off, back, sizeof back);
        fajit_config_format(&c, text, sizeof text);
        assert_string_equal(back, text);
        assert_true(fj_config_same(&off, &c));
        if (!arch) { /* sm_80's D128 tile sits within FJ_SM80_REG_ACCURATE of the limit (ptxas spilled it): another */
            assert_true(a.block_m != c.block_m || a.block_n != c.block_n || a.stages != c.stages);
            /* ... the heuristic's: the 128 query rows kept, half the KV tile (session 24: 0.95x / 0.92x the default's
             * speed where the search's br64 bc64 ran 0.84x / 0.88x) */
            assert_int_equal(a.block_m, 128);
            assert_int_equal(a.block_n, 32);
            c.accurate = 1;
            expect_sched_refused(c, "registers");
        }
    }
    fajit_config given = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_F16, .head_dim = 64, .accurate = 1};
    assert_int_equal(fajit_config_fill(NULL, &shape, &given), FAJIT_OK); /* kept by the fill */
    assert_int_equal(given.accurate, 1);
    assert_int_equal(fajit_config_check(&given), FAJIT_OK);
    fajit_config bad = given;
    bad.accurate = 2;
    expect_sched_refused(bad, "accurate = 2: must be 1");
    bad = given, bad.dtype = FAJIT_DTYPE_E4M3;
    expect_sched_refused(bad, "accurate = 1 with e4m3 Q, K, V");
    fajit_config pair = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 256, .block_m = 128,
                         .block_n = 64, .stages = 2, .swizzle = 64, .warps = 8, .col_warps = 2, .accurate = 1};
    expect_sched_refused(pair, "accurate = 1 with col_warps = 2");
    fajit_config b = {.arch = FAJIT_ARCH_SM100A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .accurate = 1};
    fajit_status st = fajit_config_fill(NULL, &shape, &b);
    assert_int_equal(st, FAJIT_ERR_INVALID_CONFIG);
    if (!strstr(fajit_errmsg(), "accurate")) fail_msg("message \"%s\" does not name accurate", fajit_errmsg());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readme_probes),        cmocka_unit_test(test_refusals_name_the_field),
        cmocka_unit_test(test_head_dim_required),    cmocka_unit_test(test_a100_defaults),
        cmocka_unit_test(test_h100_defaults_kept),   cmocka_unit_test(test_walk),
        cmocka_unit_test(test_sched_field),          cmocka_unit_test(test_cross_tile_field),
        cmocka_unit_test(test_accurate_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
