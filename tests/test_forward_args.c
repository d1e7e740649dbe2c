/*
 * test_forward_args.c - unit tests of fajit_attention_forward's argument handling, without a GPU.
 *
 * Every rule of fj_forward_validate (src/runtime/forward.c) is broken once and the message is checked
 * for the field, the value and the rule. Also: the stride helpers, the parameter block (scale_log2,
 * group), the launch grid, the shape class, and the public call on a codegen-only context (bad
 * arguments are reported before the missing device). Run: ctest --test-dir build -R test_forward_args
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fajit.h"
#include "runtime/context.h"
#include "runtime/forward.h"
#include "test_support.h"

/* A valid BHND problem on made-up (aligned) device addresses. */
static fajit_attention_args valid_args(void) { return fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 100, 300, 128); }

/* The call fails with INVALID_ARGUMENT and the message holds every fragment. */
static void expect_invalid(const fajit_attention_args *a, const fajit_config *cfg, const char *f1, const char *f2,
                           const char *f3)
{
    assert_true(fj_test_status_says(fj_forward_validate(a, cfg), FAJIT_ERR_INVALID_ARGUMENT, f1, f2, f3));
}

static void test_valid(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.lse = 0x7f0000400004ull; /* fp32: 4-byte alignment is enough */
    a.softmax_scale = 0.5f;
    a.causal = 1;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    fajit_args_set_bnhd_strides(&a);
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
}

static void test_null_and_dtype(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    assert_int_equal(fj_forward_validate(NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "args = NULL"));
    a.dtype = FAJIT_DTYPE_AUTO;
    expect_invalid(&a, NULL, "args->dtype", "= 0 (auto)", "FAJIT_DTYPE_F16");
    a.dtype = (fajit_dtype)7;
    expect_invalid(&a, NULL, "args->dtype", "= 7", "FAJIT_DTYPE_BF16");
}

static void test_dims(void **state)
{
    (void)state;
    static const char *const fields[] = {"batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k"};
    for (int i = 0; i < 5; i++) {
        fajit_attention_args a = valid_args();
        int *dims[] = {&a.batch, &a.heads_q, &a.heads_kv, &a.seqlen_q, &a.seqlen_k};
        char field[32], value[16];
        *dims[i] = i == 2 ? -3 : 0;
        snprintf(field, sizeof field, "args->%s", fields[i]);
        snprintf(value, sizeof value, "= %d", *dims[i]);
        expect_invalid(&a, NULL, field, value, ">= 1");
    }
}

static void test_head_dim_and_groups(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.head_dim = 80;
    expect_invalid(&a, NULL, "args->head_dim", "= 80", "64, 96, 128, 192, 256");
    a = valid_args();
    a.heads_kv = 3;
    expect_invalid(&a, NULL, "heads_q = 8", "heads_kv = 3", "multiple of heads_kv");
}

static void test_grid_limits(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.heads_q = 65536;
    a.heads_kv = 1;
    expect_invalid(&a, NULL, "args->heads_q", "= 65536", "<= 65535");
    a = valid_args();
    a.batch = 70000;
    expect_invalid(&a, NULL, "args->batch", "= 70000", "<= 65535");
    a = valid_args();
    a.heads_q = 65535;
    a.heads_kv = 5;
    a.batch = 65535;
    a.seqlen_q = 1; /* B x Hq x Nq within 2^32 - 1 query rows (test_size_limits) */
    fajit_args_set_bhnd_strides(&a);
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
}

static void test_causal_and_scale(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.causal = 2;
    expect_invalid(&a, NULL, "args->causal", "= 2", "0 or 1");
    a = valid_args();
    a.softmax_scale = NAN;
    expect_invalid(&a, NULL, "args->softmax_scale", "nan", "finite");
    a.softmax_scale = INFINITY;
    expect_invalid(&a, NULL, "args->softmax_scale", "inf", "finite");
    a.softmax_scale = -0.125f;
    expect_invalid(&a, NULL, "args->softmax_scale", "-0.125", ">= 0");
}

static void test_pointers(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.v = 0;
    expect_invalid(&a, NULL, "args->v", "= 0", "required");
    a = valid_args();
    a.o += 8;
    expect_invalid(&a, NULL, "args->o", "0x7f0000300008", "16-byte aligned");
    a = valid_args();
    a.k += 1;
    expect_invalid(&a, NULL, "args->k", "0x7f0000100001", "16-byte aligned");
    a = valid_args();
    a.lse = 0x7f0000400002ull;
    expect_invalid(&a, NULL, "args->lse", "0x7f0000400002", "4-byte aligned");
}

static void test_strides(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.q_stride[2] = 132;
    expect_invalid(&a, NULL, "args->q_stride[2]", "= 132", "multiple of 8");
    a = valid_args();
    a.v_stride[0] = -128;
    expect_invalid(&a, NULL, "args->v_stride[0]", "= -128", "non-negative");
    a = valid_args();
    a.k_stride[2] = 64; /* rows shorter than head_dim 128 */
    expect_invalid(&a, NULL, "args->k_stride[2]", "= 64", "at least head_dim (128)");
    a = valid_args();
    memset(a.q_stride, 0, sizeof a.q_stride); /* strides never set */
    expect_invalid(&a, NULL, "args->q_stride[2]", "= 0", "fajit_args_set_bhnd_strides");
    a = valid_args();
    a.o_stride[1] = 0;
    expect_invalid(&a, NULL, "args->o_stride[1]", "= 0", "overlap");
    a = valid_args();
    a.k_stride[0] = 0; /* K shared across the batch: allowed for inputs */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
}

static void test_config_must_match(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    fajit_config c = {FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 128, 64, 64, 2, 128, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(fj_forward_validate(&a, &c), FAJIT_OK);
    c.dtype = FAJIT_DTYPE_F16;
    expect_invalid(&a, &c, "cfg->dtype = f16", "args->dtype = bf16", "must match");
    c.dtype = FAJIT_DTYPE_BF16;
    c.head_dim = 64;
    expect_invalid(&a, &c, "cfg->head_dim = 64", "args->head_dim = 128", "must match");
    c.head_dim = 128;
    c.causal = 1;
    expect_invalid(&a, &c, "cfg->causal = 1", "args->causal = 0", "must match");
}

static void test_stride_helpers(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args(); /* B 2, Hq 8, Hkv 2, Nq 100, Nk 300, D 128 */
    assert_true(a.q_stride[0] == 8 * 100 * 128 && a.q_stride[1] == 100 * 128 && a.q_stride[2] == 128);
    assert_true(a.k_stride[0] == 2 * 300 * 128 && a.k_stride[1] == 300 * 128 && a.k_stride[2] == 128);
    assert_memory_equal(a.o_stride, a.q_stride, sizeof a.q_stride);
    assert_memory_equal(a.v_stride, a.k_stride, sizeof a.k_stride);
    fajit_args_set_bnhd_strides(&a);
    assert_true(a.q_stride[0] == 100 * 8 * 128 && a.q_stride[1] == 128 && a.q_stride[2] == 8 * 128);
    assert_true(a.k_stride[0] == 300 * 2 * 128 && a.k_stride[1] == 128 && a.k_stride[2] == 2 * 128);
    fajit_args_set_bhnd_strides(NULL); /* no-op, no crash */
}

/* Issue 21 item 2: the helpers multiplied caller ints without a check (UBSan: signed overflow at heads or
 * lengths near INT_MAX). Now a product that overflows 64 bits leaves INT64_MIN in every stride, which the
 * forward refuses naming the helper; the largest legal shape still gets exact strides. */
static void test_stride_helpers_overflow(void **state)
{
    (void)state;
    void (*const helpers[2])(fajit_attention_args *) = {fajit_args_set_bhnd_strides, fajit_args_set_bnhd_strides};
    for (int h = 0; h < 2; h++) {
        fajit_attention_args a = valid_args();
        a.heads_q = a.heads_kv = a.seqlen_q = a.seqlen_k = a.head_dim = INT_MAX;
        helpers[h](&a);
        for (int i = 0; i < 3; i++)
            assert_true(a.q_stride[i] == INT64_MIN && a.k_stride[i] == INT64_MIN && a.v_stride[i] == INT64_MIN &&
                        a.o_stride[i] == INT64_MIN);
        fajit_attention_args b = valid_args(); /* a legal shape with the poisoned strides: refused, named */
        memcpy(b.q_stride, a.q_stride, sizeof b.q_stride);
        expect_invalid(&b, NULL, "args->q_stride[0] = INT64_MIN", "overflow 64 bits", "fajit_args_set_bhnd_strides");
        a = valid_args(); /* negative sizes: strides that the forward refuses, no overflow */
        a.heads_q = a.seqlen_q = INT_MIN;
        a.head_dim = -1;
        helpers[h](&a);
        a = valid_args(); /* the largest shape the forward takes: exact */
        a.batch = 1, a.heads_q = a.heads_kv = 65535, a.seqlen_q = 65536, a.seqlen_k = INT_MAX, a.head_dim = 256;
        helpers[h](&a);
        int64_t kv = (int64_t)INT_MAX * 65535 * 256;
        assert_true(a.k_stride[0] == kv && a.v_stride[0] == kv);
        assert_true(a.q_stride[0] == (int64_t)65536 * 65535 * 256);
    }
}

/* The kernels index query rows with 32 bits (the LSE row, the work-tile count): more rows are refused, and a
 * stride whose tensor would span past 2^62 bytes too. */
static void test_size_limits(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    a.batch = 65535, a.heads_q = a.heads_kv = 65535, a.seqlen_q = 2;
    fajit_args_set_bhnd_strides(&a);
    expect_invalid(&a, NULL, "args->batch = 65535, heads_q = 65535, seqlen_q = 2", "query rows", "32 bits");
    a.seqlen_q = 1;
    fajit_args_set_bhnd_strides(&a);
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a = valid_args();
    a.k_stride[0] = INT64_MAX - 7; /* a multiple of 8 whose product with batch - 1 = 1 stays in range */
    expect_invalid(&a, NULL, "args->k_stride = {", "extents {2, 2, 300}", "2^62 bytes");
    a = valid_args();
    a.v_stride[1] = (INT64_C(1) << 61);
    expect_invalid(&a, NULL, "args->v_stride = {", "2^62 bytes past args->v", "");
}

static void test_params_and_grid(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args();
    fj_fwd_params p;
    fj_plan plan;
    unsigned grid[3];
    assert_int_equal(sizeof(fj_fwd_params) % 8, 0);
    memset(&plan, 0, sizeof plan);
    plan.cfg.block_n = 64;
    plan.copy_rows_per_pass = 16;
    fj_forward_params(&a, &plan, &p);
    assert_true(p.q == a.q && p.k == a.k && p.v == a.v && p.o == a.o && p.lse == 0);
    assert_memory_equal(p.k_stride, a.k_stride, sizeof p.k_stride);
    assert_int_equal(p.seqlen_q, 100);
    assert_int_equal(p.seqlen_k, 300);
    assert_int_equal(p.heads_q, 8);
    assert_int_equal(p.group, 4);
    assert_true(fabsf(p.scale_log2 - (float)(1.4426950408889634 / sqrt(128.0))) < 1e-7f);
    /* derived on the host: bytes per row, per KV tile, per copy pass */
    assert_true(p.k_row_bytes == 2 * a.k_stride[2] && p.q_row_bytes == 2 * a.q_stride[2]);
    assert_true(p.k_tile_bytes == 64 * p.k_row_bytes && p.v_tile_bytes == 64 * p.v_row_bytes);
    assert_true(p.q_pass_bytes == 16 * p.q_row_bytes && p.v_pass_bytes == 16 * p.v_row_bytes);
    a.softmax_scale = 0.25f;
    fj_forward_params(&a, &plan, &p);
    assert_true(fabsf(p.scale_log2 - 0.25f * 1.4426950408889634f) < 1e-7f);
    plan.cfg.block_m = 64;
    fj_forward_grid(&a, &plan, 132, grid);
    assert_true(grid[0] == 2 && grid[1] == 8 && grid[2] == 2); /* ceil(100 / 64) */
    a.seqlen_q = 128;
    fj_forward_grid(&a, &plan, 132, grid);
    assert_int_equal(grid[0], 2);
    /* warp-specialized: persistent, min(work tiles, SMs) CTAs; the schedule's counts in the parameters */
    plan.ws = 1;
    plan.cfg.block_m = 128;
    a.seqlen_q = 1000;                       /* 8 query blocks x 8 heads x 2 = 128 work tiles */
    fj_forward_grid(&a, &plan, 132, grid);
    assert_true(grid[0] == 128 && grid[1] == 1 && grid[2] == 1);
    fj_forward_grid(&a, &plan, 100, grid);
    assert_int_equal(grid[0], 100);
    fj_fwd_params_tma pt;
    fj_forward_params_tma(&a, &plan, &pt);
    assert_int_equal(pt.n_mblocks, 8);
    assert_int_equal(pt.heads_batch, 16);
    assert_int_equal(pt.n_tiles, 128);
    assert_int_equal(pt.base.seqlen_q, 1000);
    /* causal: persistent where the alternating rounds pair long and short tiles evenly (8 query blocks a
     * head on 132 CTAs: every CTA's pair of rounds sums to the same), one CTA per tile where they do not
     * (128 blocks a head on 132 CTAs: the pairs wrap around the head and some CTAs get twice the work) */
    plan.cfg.causal = 1, plan.cfg.block_n = 128;
    a.causal = 1, a.batch = 16, a.heads_q = 16, a.heads_kv = 16, a.seqlen_q = a.seqlen_k = 1024;
    fj_forward_grid(&a, &plan, 132, grid);
    assert_int_equal(grid[0], 132);
    a.batch = 1, a.seqlen_q = a.seqlen_k = 16384;
    fj_forward_grid(&a, &plan, 132, grid);
    assert_int_equal(grid[0], 128 * 16);
}

/* The window's schedule (fj_forward_window_lpt) on the cells it was measured on (H200, 132 SMs; forward.c): lpt
 * where the static schedule's heaviest CTA is over 4% above the mean and work tiles are long, static elsewhere. */
static int window_lpt(int b, int hq, int n, int d, int left, int bm, int bn)
{
    fajit_attention_args a = valid_args();
    a.batch = b, a.heads_q = hq, a.heads_kv = hq, a.seqlen_q = a.seqlen_k = n, a.head_dim = d, a.causal = 1;
    a.struct_size = sizeof a;
    a.window = 1, a.window_left = left, a.window_right = 0;
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .block_m = bm,
                      .block_n = bn, .causal = 1, .mods = FAJIT_MOD_WINDOW};
    return fj_forward_window_lpt(&a, &c, 132);
}

static void test_window_schedule(void **state)
{
    (void)state;
    assert_int_equal(window_lpt(1, 16, 32768, 128, 4096, 128, 128), 1); /* 1.064x the mean, 31 KV tiles: +3-4% */
    assert_int_equal(window_lpt(2, 8, 8192, 256, 4096, 128, 80), 1);    /* 1.37x: +20% */
    assert_int_equal(window_lpt(1, 16, 32768, 128, 2048, 128, 128), 0); /* 1.03x: lpt -1.5% */
    assert_int_equal(window_lpt(1, 16, 32768, 128, 1024, 128, 128), 0); /* lpt -3% */
    assert_int_equal(window_lpt(1, 64, 8192, 64, 128, 128, 128), 0);    /* 2 KV tiles a work tile: lpt -6% */
    assert_int_equal(window_lpt(1, 16, 32768, 128, -1, 128, 128), 0);   /* no left bound: plain causal */
    assert_int_equal(window_lpt(1, 16, 32768, 128, 40000, 128, 128), 0); /* a bound past Nk: the same */
    /* not a causal window, not sm_90a, FP8: never */
    fajit_attention_args a = valid_args();
    a.batch = 1, a.heads_q = a.heads_kv = 16, a.seqlen_q = a.seqlen_k = 32768, a.head_dim = 128;
    a.struct_size = sizeof a;
    a.window = 1, a.window_left = 4096, a.window_right = 0;
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 128,
                      .block_n = 128, .causal = 1, .mods = FAJIT_MOD_WINDOW};
    assert_int_equal(fj_forward_window_lpt(&a, &c, 132), 0); /* a non-causal call */
    a.causal = 1;
    assert_int_equal(fj_forward_window_lpt(&a, &c, 132), 1);
    c.arch = FAJIT_ARCH_SM80;
    assert_int_equal(fj_forward_window_lpt(&a, &c, 132), 0);
    c.arch = FAJIT_ARCH_SM90A, c.dtype = FAJIT_DTYPE_E4M3;
    assert_int_equal(fj_forward_window_lpt(&a, &c, 132), 0);
    c.dtype = FAJIT_DTYPE_BF16;
    assert_int_equal(fj_forward_window_lpt(&a, &c, 100000), 0); /* one CTA per tile: one round */
    /* the call's fill (policy.c, fagen bench): a long window takes lpt and the 2 stages fill gives it; a short one,
     * or a caller's own sched, stays as fajit_config_fill leaves it */
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    ctx->persistent_ctas = 132; /* (no device here: the H200's SMs) */
    a.window_left = 4096;
    fajit_shape sh = {1, 16, 16, 32768, 32768};
    fajit_config f = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1,
                      .mods = FAJIT_MOD_WINDOW};
    assert_int_equal(fj_forward_fill(ctx, &sh, &a, &f), FAJIT_OK);
    assert_int_equal(f.sched, 1);
    assert_int_equal(f.stages, 2);
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW, .sched = -1};
    assert_int_equal(fj_forward_fill(ctx, &sh, &a, &f), FAJIT_OK);
    assert_int_equal(f.sched, -1);
    a.window_left = 1024;
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW};
    assert_int_equal(fj_forward_fill(ctx, &sh, &a, &f), FAJIT_OK);
    assert_int_equal(f.sched, 0);
    assert_int_equal(f.stages, 3);
    /* the cross-tile tail (forward.c window_cross_tile): a window of <= 128 keys on the left with sinks at head_dim
     * <= 64 (H200: +4-5%), not a longer one (1024: -1..-3%), not without sinks, not at head_dim 128, not with
     * softcap, nor when given off */
    fajit_shape sh64 = {1, 64, 64, 8192, 8192};
    a.heads_q = a.heads_kv = 64, a.seqlen_q = a.seqlen_k = 8192, a.head_dim = 64;
    const int lefts[] = {128, 0, 129, 1024, -1}, picks[] = {1, 1, 0, 0, 0};
    for (int i = 0; i < 5; i++) {
        a.window_left = lefts[i];
        f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1,
                           .mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS};
        assert_int_equal(fj_forward_fill(ctx, &sh64, &a, &f), FAJIT_OK);
        if (f.cross_tile != picks[i]) fail_msg("window_left %d: cross_tile %d, want %d", lefts[i], f.cross_tile, picks[i]);
    }
    a.window_left = 128;
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS, .cross_tile = -1};
    assert_int_equal(fj_forward_fill(ctx, &sh64, &a, &f), FAJIT_OK);
    assert_int_equal(f.cross_tile, -1);
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS | FAJIT_MOD_SOFTCAP};
    assert_int_equal(fj_forward_fill(ctx, &sh64, &a, &f), FAJIT_OK);
    assert_int_equal(f.cross_tile, 0);
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 64, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW};
    assert_int_equal(fj_forward_fill(ctx, &sh64, &a, &f), FAJIT_OK);
    assert_int_equal(f.cross_tile, 0); /* no sinks */
    a.head_dim = 128;
    f = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1,
                       .mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS};
    assert_int_equal(fj_forward_fill(ctx, &sh64, &a, &f), FAJIT_OK);
    assert_int_equal(f.cross_tile, 0);
    a.heads_q = a.heads_kv = 16, a.seqlen_q = a.seqlen_k = 32768;
    fajit_context_destroy(ctx);
    a.window_left = 4096;
    /* the window's length is part of the shape class, so each length keeps its own choice */
    char k1[128], k2[128];
    fajit_shape s;
    fj_forward_class(&a, k1, sizeof k1, &s);
    a.window_left = 1024;
    fj_forward_class(&a, k2, sizeof k2, &s);
    assert_string_not_equal(k1, k2);
    assert_non_null(strstr(k1, " wl4096"));
}

static void test_shape_class(void **state)
{
    (void)state;
    fajit_attention_args a = valid_args(), b = valid_args();
    char ka[128], kb[128];
    fajit_shape sa, sb;
    b.seqlen_q = 127; /* same powers of two as 100 */
    b.seqlen_k = 511;
    fj_forward_class(&a, ka, sizeof ka, &sa);
    fj_forward_class(&b, kb, sizeof kb, &sb);
    assert_string_equal(ka, kb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    assert_true(sa.batch == 2 && sa.heads_q == 8 && sa.heads_kv == 2 && sa.seqlen_q == 128 && sa.seqlen_k == 512);
    b.seqlen_k = 513;
    fj_forward_class(&b, kb, sizeof kb, &sb);
    assert_string_not_equal(ka, kb);
    b = valid_args();
    b.causal = 1;
    fj_forward_class(&b, kb, sizeof kb, &sb);
    assert_string_not_equal(ka, kb);
    b.seqlen_q = 0x7fffffff; /* the rounding saturates */
    fj_forward_class(&b, kb, sizeof kb, &sb);
    assert_int_equal(sb.seqlen_q, 0x7fffffff);
}

/* The public call: arguments first, then the device. */
static void test_public_call_without_device(void **state)
{
    (void)state;
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    fajit_attention_args a = valid_args();
    o.device = -1;
    o.disk_cache = 0;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    assert_int_equal(fajit_attention_forward(NULL, &a, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "ctx = NULL"));
    assert_int_equal(fajit_attention_forward(ctx, NULL, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    a.heads_kv = 3;
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "heads_kv = 3"));
    a = valid_args();
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_NO_DEVICE);
    assert_non_null(strstr(fajit_errmsg(), "device = -1"));
    fajit_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_window_schedule),
        cmocka_unit_test(test_null_and_dtype),
        cmocka_unit_test(test_dims),
        cmocka_unit_test(test_head_dim_and_groups),
        cmocka_unit_test(test_grid_limits),
        cmocka_unit_test(test_causal_and_scale),
        cmocka_unit_test(test_pointers),
        cmocka_unit_test(test_strides),
        cmocka_unit_test(test_config_must_match),
        cmocka_unit_test(test_stride_helpers),
        cmocka_unit_test(test_stride_helpers_overflow),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_params_and_grid),
        cmocka_unit_test(test_shape_class),
        cmocka_unit_test(test_public_call_without_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
