/*
 * test_fp8_args.c - unit tests of the FP8 plumbing, without a GPU: FAJIT_DTYPE_E4M3, the config's kv_dtype /
 * out_dtype (canonical text both ways, plain text unchanged, fj_config_same), the plan's refusals (sm_80, head
 * dims, block_n, swizzle), fajit_attention_args' SIZE_4 block (kv_dtype, out_dtype, descales, their batch stride:
 * each rule broken once, the message checked for the field, the value and the rule), and FAJIT_ERR_UNSUPPORTED for
 * what the FP8 kernels do not take yet (an FP8 K/V cache, decode features, attention variants). Run: ctest --test-dir build -R test_fp8_args
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/backend.h"
#include "codegen/codegen.h"
#include "fajit.h"
#include "codegen/kernel_abi.h"
#include "codegen/fp8_ws.h"
#include "codegen/kv8.h"
#include "codegen/emit.h"
#include "runtime/compile.h"
#include "runtime/forward.h"
#include "runtime/half.h"
#include "test_support.h"

static fajit_config sm90(fajit_dtype dtype, int head_dim)
{
    fajit_config c = {0};
    c.arch = FAJIT_ARCH_SM90A, c.dtype = dtype, c.head_dim = head_dim, c.block_m = 128, c.block_n = 128;
    c.stages = 2, c.swizzle = 128, c.warps = 12, c.col_warps = 1, c.overlap = 1, c.pingpong = 1;
    return c;
}

static void test_config_text(void **state)
{
    (void)state;
    char buf[160];
    fajit_config c = sm90(FAJIT_DTYPE_BF16, 128);
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal"); /* plain: unchanged */
    c.kv_dtype = FAJIT_DTYPE_BF16, c.out_dtype = FAJIT_DTYPE_BF16; /* the defaults written out: same text */
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal");
    c = sm90(FAJIT_DTYPE_E4M3, 128);
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a e4m3 d128 br128 bc128 s2 sw128 w12 ov pp noncausal");
    c.out_dtype = FAJIT_DTYPE_F16;
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a e4m3,o=f16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal");
    c = sm90(FAJIT_DTYPE_BF16, 128);
    c.kv_dtype = FAJIT_DTYPE_E4M3;
    fajit_config_format(&c, buf, sizeof buf);
    assert_string_equal(buf, "sm_90a bf16,kv=e4m3 d128 br128 bc128 s2 sw128 w12 ov pp noncausal");
}

static void test_config_parse_dtype(void **state)
{
    (void)state;
    fajit_config c = {0};
    assert_int_equal(fj_config_parse_dtype("e4m3,o=f16", &c), 0);
    assert_true(c.dtype == FAJIT_DTYPE_E4M3 && c.kv_dtype == 0 && c.out_dtype == FAJIT_DTYPE_F16);
    assert_int_equal(fj_config_parse_dtype("bf16,kv=e4m3", &c), 0);
    assert_true(c.dtype == FAJIT_DTYPE_BF16 && c.kv_dtype == FAJIT_DTYPE_E4M3 && c.out_dtype == 0);
    assert_int_equal(fj_config_parse_dtype("f16", &c), 0);
    assert_true(c.dtype == FAJIT_DTYPE_F16 && c.kv_dtype == 0 && c.out_dtype == 0);
    const char *bad[] = {"", "e4m", "e4m3,", "e4m3,o=", "e4m3,o=f16,kv=e4m3", "bf16,kv=e4m3x", ",kv=e4m3", "fp8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(fj_config_parse_dtype(bad[i], &c), -1);
    fajit_config a = sm90(FAJIT_DTYPE_E4M3, 128), b = a;
    b.out_dtype = FAJIT_DTYPE_BF16; /* the default, written out */
    assert_true(fj_config_same(&a, &b));
    b.out_dtype = FAJIT_DTYPE_F16;
    assert_false(fj_config_same(&a, &b));
}

static void test_plan_rules(void **state)
{
    (void)state;
    fajit_config c = sm90(FAJIT_DTYPE_E4M3, 128);
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    c.block_n = 112;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "block_n (--bc) = 112",
                                    "multiple of 32", NULL));
    c = sm90(FAJIT_DTYPE_E4M3, 64);
    c.block_m = 192, c.warps = 16;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "swizzle = 128",
                                    "64 bytes", "use 64"));
    c.swizzle = 64;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    c.mods = FAJIT_MOD_ALIBI; /* the variants but ALiBi are built for FP8 */
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_UNSUPPORTED, "mods = 8 with dtype e4m3",
                                    "ALiBi has no FP8 kernel", NULL));
    c.mods = FAJIT_MOD_SOFTCAP; /* br192's three consumer warpgroups have no registers left for the cap */
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "registers", "lower block_m",
                                    NULL));
    c.block_m = 128, c.warps = 12;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    c.mods = FAJIT_MOD_WINDOW | FAJIT_MOD_SINKS | FAJIT_MOD_CHUNK;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    { /* varlen batches plan on the FP8 kernel (static schedule), and the frame's decode variants (seqlens_k, split,
       * packing, paged; test_fp8_ptxas assembles them); lpt, gathered pages and read-ahead are refused, named */
        fj_plan p;
        c.mods = 0;
        assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K, &p), FAJIT_OK);
        assert_true(p.fp8 && (p.variant & FJ_VARIANT_VARLEN));
        assert_true(fj_test_status_says(fj_plan_build_variant(&c, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K |
                                                                      FJ_VARIANT_LPT, &p),
                                        FAJIT_ERR_UNSUPPORTED, "with dtype e4m3", "static schedule", NULL));
        assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS, &p), FAJIT_OK);
        assert_true(p.fp8 && p.vtail_bar);
        assert_true(fj_test_status_says(fj_plan_build_variant(&c, FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, &p),
                                        FAJIT_ERR_UNSUPPORTED, "with dtype e4m3", "gathered pages", NULL));
    }
    c = sm90(FAJIT_DTYPE_BF16, 128);
    c.kv_dtype = FAJIT_DTYPE_E4M3;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_UNSUPPORTED, "kv_dtype e4m3 on the sm_90a path",
                                    "use arch sm_80", NULL)); /* the FP8 K/V cache kernels are sm_80's (kv8.c) */
    c = sm90(FAJIT_DTYPE_E4M3, 128);
    c.head_dim = 96;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "head_dim = 96",
                                    "64, 128 or 256", NULL));
    c = sm90(FAJIT_DTYPE_E4M3, 128);
    c.out_dtype = FAJIT_DTYPE_E4M3;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "out_dtype = 3", "bf16", "f16"));
    c = sm90(FAJIT_DTYPE_BF16, 128);
    c.out_dtype = FAJIT_DTYPE_F16;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "out_dtype = 1",
                                    "with dtype bf16", "e4m3 inputs only"));
    c.out_dtype = 0, c.kv_dtype = FAJIT_DTYPE_F16;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "kv_dtype = 1", "e4m3", NULL));
    fajit_config s = {FAJIT_ARCH_SM80, FAJIT_DTYPE_E4M3, 128, 64, 64, 2, 128, 4, 0, 1, -1, -1, 0, 0, 0, 0, 0, 0, 0};
    assert_true(fj_test_status_says(fajit_config_check(&s), FAJIT_ERR_INVALID_CONFIG, "dtype = e4m3 on the sm_80 path",
                                    "sm_90a only", NULL));
}

/* ---- fajit_attention_args ------------------------------------------------------------------------------------- */
static fajit_attention_args fp8_args(void)
{
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_E4M3, 2, 8, 2, 100, 300, 128);
    a.q_descale = 0x7f0000900000ull, a.k_descale = 0x7f0000900100ull, a.v_descale = 0x7f0000900200ull;
    a.descale_batch_stride = 2;
    return a;
}

static void expect_invalid(const fajit_attention_args *a, const char *f1, const char *f2, const char *f3)
{
    assert_true(fj_test_status_says(fj_forward_validate(a, NULL), FAJIT_ERR_INVALID_ARGUMENT, f1, f2, f3));
}

static void test_args_valid_and_unsupported(void **state)
{
    (void)state;
    fajit_attention_args a = fp8_args();
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.seqlens_k = 0x7f0000a00000ull, a.num_splits = 3; /* the decode variants: built (sm_90a, decode.c) */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    fajit_attention_args p = a;
    p.block_table = 0x7f0000b00000ull, p.max_pages = 5, p.page_size = 64;
    assert_int_equal(fj_forward_validate(&p, NULL), FAJIT_OK);
    a.head_dim = 256, p.head_dim = 256; /* D256 too (its decode tile, br64 w8, has no lean producer: plan.c) */
    fajit_args_set_bhnd_strides(&a);
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    p.k_stride[2] = p.v_stride[2] = 256, p.q_stride[2] = p.o_stride[2] = 256, p.q_stride[1] = p.o_stride[1] = 256 * 100;
    p.q_stride[0] = p.o_stride[0] = 8 * 256 * 100;
    assert_int_equal(fj_forward_validate(&p, NULL), FAJIT_OK);
    a = fp8_args();
    a.softcap = 30.0f, a.window = 1, a.window_left = 100, a.window_right = -1, a.attention_chunk = 64;
    a.sinks = 0x7f0000a00100ull;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK); /* window, softcap, sinks, chunk: built */
    a = fp8_args();
    a.cu_seqlens_q = 0x7f0000a00200ull, a.cu_seqlens_k = 0x7f0000a00300ull; /* varlen batches: built */
    a.q_stride[1] = a.o_stride[1] = a.k_stride[1] = a.v_stride[1] = a.head_dim;
    a.q_stride[2] = a.o_stride[2] = (int64_t)a.heads_q * a.head_dim, a.k_stride[2] = a.v_stride[2] = (int64_t)a.heads_kv * a.head_dim;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    fajit_attention_args t = a; /* paged varlen batches: not for FP8 */
    t.cu_seqlens_k = 0, t.block_table = 0x7f0000b00000ull, t.max_pages = 5, t.page_size = 64, t.seqlen_k = 300;
    assert_true(fj_test_status_says(fj_forward_validate(&t, NULL), FAJIT_ERR_UNSUPPORTED, "cu_seqlens_q and a block "
                                    "table", "not built for FP8", NULL));
    t = a; /* seqused_k of varlen batches: not for FP8 */
    t.seqlens_k = 0x7f0000a00400ull;
    assert_true(fj_test_status_says(fj_forward_validate(&t, NULL), FAJIT_ERR_UNSUPPORTED, "cu_seqlens_q and seqlens_k",
                                    "whole key range", NULL));
    a.cu_seqlens_k = 0; /* packed queries against batched K / V: not for FP8 */
    assert_true(fj_test_status_says(fj_forward_validate(&a, NULL), FAJIT_ERR_UNSUPPORTED, "cu_seqlens_q but no "
                                    "cu_seqlens_k", NULL, NULL));
    a = fp8_args();
    a.alibi_slopes = 0x7f0000a00100ull;
    assert_true(fj_test_status_says(fj_forward_validate(&a, NULL), FAJIT_ERR_UNSUPPORTED, "dtype = e4m3 with alibi_slopes",
                                    "no ALiBi", NULL));
    a = fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 1, 300, 128); /* an FP8 K/V cache under bf16 queries: built */
    a.kv_dtype = FAJIT_DTYPE_E4M3, a.k_descale = 0x7f0000900100ull;
    a.k_stride[2] = a.v_stride[2] = 128, a.k_stride[1] = a.v_stride[1] = 128 * 300, a.k_stride[0] = a.v_stride[0] = 2 * 128 * 300;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    fajit_attention_args w = a;
    w.window = 1, w.window_left = 8, w.window_right = -1;
    assert_true(fj_test_status_says(fj_forward_validate(&w, NULL), FAJIT_ERR_UNSUPPORTED, "kv_dtype = e4m3",
                                    "attention variant", NULL));
    w = a;
    w.cu_seqlens_q = 0x7f0000a00000ull;
    assert_true(fj_test_status_says(fj_forward_validate(&w, NULL), FAJIT_ERR_UNSUPPORTED, "kv_dtype = e4m3",
                                    "cu_seqlens", NULL));
}

/* The FP8 K/V cache's plan rules: the sm_80 path's kernels, 2+ stages, no attention variant. */
static void test_kv8_plan_rules(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3, .head_dim = 128,
                      .block_m = 64, .block_n = 64, .stages = 2, .warps = 4, .swizzle = 128};
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_true(p.kv8 && p.fp8_off >= (int)sizeof(fj_fwd_params) && !p.pipeline_qk);
    /* one 16-bit K / V slot, widened into from the e4m3 ring's stages */
    assert_int_equal(p.kv_slots, 1);
    assert_true(p.kv8_f16 && strcmp(fj_mma_dtype_ptx(&p), "f16") == 0); /* bf16 Q: the MMAs in f16 */
    assert_true(p.smem_bytes >= p.kv8_off + 2 * 2 * 64 * 128 && p.kv8_off >= p.v_off + p.kv_tile_bytes);
    {   /* the heuristic's decode tile: 4 stages in 112 KB, two CTAs an SM (2 x (112 + 1) KB <= 228 KB) */
        fajit_config h = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .kv_dtype = FAJIT_DTYPE_E4M3,
                          .head_dim = 128, .block_m = 64};
        fajit_shape s = {1, 32, 8, 1, 131072};
        fj_config_heuristic(&h, &h, &s, 0);
        assert_int_equal(h.stages, 4);
        assert_int_equal(fj_plan_build(&h, &p), FAJIT_OK);
        assert_int_equal(p.smem_bytes, 114688);
        h.dtype = FAJIT_DTYPE_F16; /* f16 Q: f16 MMAs as ever, no Q conversion */
        assert_int_equal(fj_plan_build(&h, &p), FAJIT_OK);
        assert_true(!p.kv8_f16 && strcmp(fj_mma_dtype_ptx(&p), "f16") == 0);
    }
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, &p), FAJIT_OK);
    assert_true(p.fp8_off >= (int)sizeof(fj_fwd_params_decode));
    assert_true(fj_test_status_says(fj_plan_build_variant(&c, FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, &p),
                                    FAJIT_ERR_UNSUPPORTED, "gather", "kv_dtype e4m3", NULL));
    c.stages = 1;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_INVALID_CONFIG, "stages = 1", "2+ stages", NULL));
    c.stages = 2, c.mods = FAJIT_MOD_SOFTCAP;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_UNSUPPORTED, "attention variants", NULL, NULL));
    c.mods = 0, c.arch = FAJIT_ARCH_SM90A, c.block_m = 128, c.block_n = 128, c.warps = 12;
    assert_true(fj_test_status_says(fajit_config_check(&c), FAJIT_ERR_UNSUPPORTED, "kv_dtype e4m3 on the sm_90a",
                                    "sm_80", NULL));
}

/* The widening for a target: cvt.rn.f16x2.e4m3x2 (one F2FP a pair) and the target's .target where it has it (sm_90+),
 * the integer ops under .target sm_80 where not (sm_80 .. sm_89) and for the bf16 widening (Q not in registers). */
static void test_kv8_cvt_target(void **state)
{
    (void)state;
    const struct {
        const char *sm;
        fajit_dtype dtype;
        int head_dim, cvt;
    } cases[] = {{"sm_90a", FAJIT_DTYPE_BF16, 128, 1}, {"sm_90", FAJIT_DTYPE_F16, 128, 1}, {"sm_100a", FAJIT_DTYPE_BF16, 64, 1},
                 {"sm_120", FAJIT_DTYPE_F16, 128, 1},  {"sm_89", FAJIT_DTYPE_BF16, 128, 0}, {"sm_86", FAJIT_DTYPE_F16, 128, 0},
                 {"sm_90a", FAJIT_DTYPE_BF16, 256, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = cases[i].dtype, .kv_dtype = FAJIT_DTYPE_E4M3,
                          .head_dim = cases[i].head_dim, .block_m = 64};
        fajit_shape s = {1, 32, 8, 1, 131072};
        const fajit_config given = c; /* stages left to the heuristic: d256 fits 3 */
        fj_config_heuristic(&c, &given, &s, 232448);
        fj_plan p;
        assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, &p), FAJIT_OK);
        fj_kv8_for_target(&p, fj_arch_find(cases[i].sm));
        char *ptx = NULL, want[32];
        size_t n = 0;
        assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &n), FAJIT_OK);
        snprintf(want, sizeof want, ".target %s\n", cases[i].cvt ? cases[i].sm : "sm_80");
        printf("%s %s d%d: kv8_cvt %d, kv8_f16 %d\n", cases[i].sm, cases[i].dtype == FAJIT_DTYPE_F16 ? "f16" : "bf16",
               cases[i].head_dim, p.kv8_cvt, p.kv8_f16);
        assert_int_equal(p.kv8_cvt, cases[i].cvt);
        assert_non_null(strstr(ptx, want));
        assert_true((strstr(ptx, "cvt.rn.f16x2.e4m3x2") != NULL) == cases[i].cvt);
        assert_true((strstr(ptx, "prmt.b32") != NULL) == !cases[i].cvt);
        assert_int_equal(fj_kv8_unit_log2(&p), cases[i].cvt || (!p.kv8_f16 && cases[i].dtype == FAJIT_DTYPE_BF16) ? 0 : -8);
        free(ptx);
    }
}

/* The host's e4m3 conversions (check harness, references): every byte round-trips, halfway values go to even,
 * large values saturate. */
static void test_e4m3_host(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7F) == 0x7F) {
            assert_true(isnan(fj_e4m3_to_f64((uint8_t)b)));
            continue;
        }
        assert_int_equal(fj_e4m3_from_f64(fj_e4m3_to_f64((uint8_t)b)), b == 0x80 ? 0x80 : b);
    }
    assert_int_equal(fj_e4m3_to_f64(0x7E), 448.0);
    assert_int_equal(fj_e4m3_from_f64(1000.0), 0x7E);
    assert_int_equal(fj_e4m3_from_f64(-1000.0), 0xFE);
    assert_int_equal(fj_e4m3_from_f64(1.0 + 1.0 / 16), 0x38); /* halfway 1 and 1.125: even (1) */
    assert_int_equal(fj_e4m3_from_f64(1.0 + 3.0 / 16), 0x3A); /* halfway 1.125 and 1.25: even (1.25) */
    assert_true(fj_e4m3_to_f64(0x01) == 0x1p-9 && fj_e4m3_to_f64(0x08) == 0x1p-6);
}

static void test_args_rules(void **state)
{
    (void)state;
    fajit_attention_args a = fp8_args();
    a.head_dim = 96;
    fajit_args_set_bhnd_strides(&a);
    expect_invalid(&a, "args->head_dim = 96", "with dtype e4m3", "64, 128 or 256");
    a = fp8_args();
    a.kv_dtype = FAJIT_DTYPE_BF16;
    expect_invalid(&a, "args->kv_dtype = 2 (bf16)", "with dtype e4m3", "FAJIT_DTYPE_E4M3");
    a = fp8_args();
    a.out_dtype = FAJIT_DTYPE_E4M3;
    expect_invalid(&a, "args->out_dtype = 3 (e4m3)", "with dtype e4m3", "FAJIT_DTYPE_BF16");
    a = fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 100, 300, 128);
    a.out_dtype = FAJIT_DTYPE_F16;
    expect_invalid(&a, "args->out_dtype = 1 (f16)", "with dtype bf16", "e4m3 inputs only");
    a = fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 100, 300, 128);
    a.q_descale = 0x7f0000900000ull;
    expect_invalid(&a, "args->q_descale = 0x7f0000900000", "e4m3 queries", "leave it 0");
    a = fp8_args();
    a.v_descale += 2;
    expect_invalid(&a, "args->v_descale = 0x7f0000900202", "4-byte aligned", "[batch][heads_kv]");
    a = fp8_args();
    a.descale_batch_stride = 1;
    expect_invalid(&a, "args->descale_batch_stride = 1", "less than heads_kv = 2", "0 = one row");
    a.descale_batch_stride = -2;
    expect_invalid(&a, "args->descale_batch_stride = -2", "0..2^31-1", NULL);
    a = fp8_args();
    a.q_descale = a.k_descale = a.v_descale = 0;
    expect_invalid(&a, "args->descale_batch_stride = 2", "no descale pointer", NULL);
    a = fp8_args(); /* FP8 rows: 16-byte aligned, so strides are multiples of 16 elements */
    a.k_stride[2] = 136;
    expect_invalid(&a, "args->k_stride[2] = 136", "multiple of 16 elements", "e4m3");
    a = fp8_args();
    a.o_stride[2] = 136; /* O is bf16: 8 elements are 16 bytes */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
}

static void test_args_size_gates(void **state)
{
    (void)state;
    /* a caller built against the SIZE_3 header: the FP8 block is not read (here: garbage past its end) */
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 100, 300, 128);
    a.struct_size = FAJIT_ATTENTION_ARGS_SIZE_3;
    a.q_descale = 3, a.kv_dtype = (fajit_dtype)9;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    assert_true(FAJIT_ATTENTION_ARGS_SIZE_4 > FAJIT_ATTENTION_ARGS_SIZE_3);
    assert_true(FAJIT_ATTENTION_ARGS_SIZE_4 <= sizeof(fajit_attention_args));
}

static void test_config_must_match(void **state)
{
    (void)state;
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 2, 8, 2, 100, 300, 128);
    fajit_config c = sm90(FAJIT_DTYPE_BF16, 128);
    c.kv_dtype = FAJIT_DTYPE_E4M3;
    assert_true(fj_test_status_says(fj_forward_validate(&a, &c), FAJIT_ERR_INVALID_ARGUMENT,
                                    "cfg->kv_dtype / out_dtype = e4m3 / bf16", "are bf16 / bf16", "must match"));
}

/* The host's e4m3 conversions (the GPU test's inputs and reference): every code round-trips, ties go to the even
 * mantissa, large values saturate to 448 (cvt.rn.satfinite), NaN is 0x7F. */
static void test_e4m3_host_f32(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f) {
            assert_true(fj_e4m3_to_f32((uint8_t)b) != fj_e4m3_to_f32((uint8_t)b)); /* NaN */
            continue;
        }
        assert_int_equal(fj_f32_to_e4m3(fj_e4m3_to_f32((uint8_t)b)), b);
    }
    assert_true(fj_e4m3_to_f32(0x7e) == 448.0f && fj_e4m3_to_f32(0x38) == 1.0f && fj_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_int_equal(fj_f32_to_e4m3(1.0625f), 0x38); /* tie between 1 and 1.125: even */
    assert_int_equal(fj_f32_to_e4m3(1.1875f), 0x3a); /* tie between 1.125 and 1.25: even */
    assert_int_equal(fj_f32_to_e4m3(1.07f), 0x39);
    assert_int_equal(fj_f32_to_e4m3(464.0f), 0x7e);
    assert_int_equal(fj_f32_to_e4m3(1e9f), 0x7e);
    assert_int_equal(fj_f32_to_e4m3(-1e9f), 0xfe);
    assert_int_equal(fj_f32_to_e4m3(0x1p-10f), 0x00); /* half the smallest subnormal: tie to 0 */
    assert_int_equal(fj_f32_to_e4m3(0x1.8p-10f), 0x01);
    assert_int_equal(fj_f32_to_e4m3(NAN), 0x7f);
}

/* FAJIT_FP8_KNOBS (fp8_ws.h): unset, the head dim's default (D256: regs, vt, ostage; D64 / D128: vt; poff at every
 * head dim); the words set
 * their bits; an unknown word is refused, named; empty words pass. */
static void test_knobs_env(void **state)
{
    (void)state;
    fajit_config c = sm90(FAJIT_DTYPE_E4M3, 256);
    c.overlap = c.pingpong = -1; /* a schedule 232 registers hold too (the knob sets below without regs) */
    fj_plan p;
    unsetenv("FAJIT_FP8_KNOBS");
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
#if FJ_FP8_D256_FA3
    assert_int_equal(p.fp8_knobs,
                     FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_OSTAGE | (FJ_FP8_POFF ? FJ_FP8_KNOB_POFF : 0u) |
                         (FJ_FP8_VT4_D256 ? FJ_FP8_KNOB_VT4
                                          : FJ_FP8_KNOB_VT | (FJ_FP8_VT4 ? FJ_FP8_KNOB_VT4 : 0u)));
    assert_int_equal(p.fp8_vt4, FJ_FP8_VT4 || FJ_FP8_VT4_D256);
    assert_int_equal(p.fp8_p_early, FJ_FP8_P_EARLY || FJ_FP8_P_EARLY_D256);
    assert_int_equal(p.o_stage, 2);
    assert_int_equal(p.consumer_regs, 240);
#else
    assert_int_equal(p.fp8_knobs,
                     FJ_FP8_KNOB_VT | (FJ_FP8_VT4 ? FJ_FP8_KNOB_VT4 : 0u) | (FJ_FP8_POFF ? FJ_FP8_KNOB_POFF : 0u));
    assert_int_equal(p.consumer_regs, 232);
#endif
    const unsigned poff = FJ_FP8_POFF ? FJ_FP8_KNOB_POFF : 0u;
    assert_int_equal(fj_fp8_knobs_default(128, 0),
                     FJ_FP8_KNOB_VT | (FJ_FP8_VT4 || FJ_FP8_VT4_D128 ? FJ_FP8_KNOB_VT4 : 0u) | poff);
    assert_int_equal(fj_fp8_knobs_default(64, 0), FJ_FP8_KNOB_VT | (FJ_FP8_VT4 ? FJ_FP8_KNOB_VT4 : 0u) | poff);
    assert_int_equal(fj_fp8_knobs_default(128, 1), fj_fp8_knobs_default(128, 0)); /* local: only D256 differs */
#if FJ_FP8_D256_FA3
    /* a window or chunk at D256: FA3's register split with the three-warp transpose (the lean vt4 spills there) */
    assert_int_equal(fj_fp8_knobs_default(256, 1), FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_VT | FJ_FP8_KNOB_OSTAGE | poff);
#endif
    assert_int_equal(p.p_offset, FJ_FP8_POFF ? 8 : 0);
    assert_int_equal(p.fp8_vt4, FJ_FP8_VT4 || (FJ_FP8_D256_FA3 && FJ_FP8_VT4_D256));
    setenv("FAJIT_FP8_KNOBS", "regs,vt4", 1); /* vt4: the 4-warp transpose (transpose_warps counts warp 0) */
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.fp8_knobs, FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_VT4);
    assert_int_equal(p.fp8_vt4, 1);
    assert_int_equal(p.transpose_warps, 4);
    setenv("FAJIT_FP8_KNOBS", "regs,,ostage", 1);
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.fp8_knobs, FJ_FP8_KNOB_REGS | FJ_FP8_KNOB_OSTAGE);
    assert_int_equal(p.o_stage, 2); /* D256: no O buffer fits, so O goes to the V ring */
    assert_int_equal(p.o_off, p.v_off);
    assert_true(p.vt_bar >= p.bar_off + 8 * (4 + 4 * c.stages + 1)); /* past O free */
    setenv("FAJIT_FP8_KNOBS", "", 1);
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.fp8_knobs, 0u);
    assert_int_equal(p.o_stage, 0);
    assert_int_equal(p.consumer_regs, 232);
    setenv("FAJIT_FP8_KNOBS", "vt,regz", 1);
    assert_true(fj_test_status_says(fj_plan_build(&c, &p), FAJIT_ERR_INVALID_ARGUMENT, "FAJIT_FP8_KNOBS = 'vt,regz'",
                                    "unknown word 'regz'", "regs, vt, ostage"));
    unsetenv("FAJIT_FP8_KNOBS");
    c = sm90(FAJIT_DTYPE_E4M3, 128);
    c.block_n = 192;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.fp8_knobs, FJ_FP8_KNOB_VT | (FJ_FP8_VT4 || FJ_FP8_VT4_D128 ? FJ_FP8_KNOB_VT4 : 0u) | poff);
    assert_int_equal(p.consumer_regs, 232);
}

/* Two CTAs an SM (knob occ2, fp8_ws.h): in the default set of a one-consumer tile at head dim 64 / 128 that fits half an
 * SM's smem - the D128 decode tile br64 bc64 s3 - with .minnctapersm 2 in the PTX and the whole-program wrapper's
 * __launch_bounds__, a 40 / 216 split of the 256 x 128 launch pool, the persistent grid twice the SMs; not at D256,
 * not where the tile does not fit (br64 bc192 s2 runs one), refused on a two-consumer tile or at D256 when named. */
static void test_occ2(void **state)
{
    (void)state;
    unsetenv("FAJIT_FP8_KNOBS");
    fajit_shape decode = {8, 32, 8, 1, 8192};
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 128};
    assert_int_equal(fajit_config_fill(NULL, &decode, &c), FAJIT_OK);
    assert_int_equal(c.block_m, 64);
    assert_int_equal(c.block_n, 64);
    assert_int_equal(c.stages, 3);
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED,
                                           &p), FAJIT_OK);
    assert_int_equal(p.min_ctas, 2);
    assert_true(p.fp8_knobs & FJ_FP8_KNOB_OCC2);
    assert_int_equal(p.fp8_knobs, fj_fp8_plan_knobs_default(&p));
    assert_int_equal(p.producer_regs, 40);
    assert_int_equal(p.consumer_regs, 216);
    assert_true(p.smem_bytes <= FJ_SM90_SMEM_PER_SM / 2 - 1024);
    assert_int_equal(fj_plan_smem_limit(&p), FJ_SM90_SMEM_PER_SM / 2 - 1024);
    char text[256];
    fj_plan_format(&p, text, sizeof text);
    assert_null(strstr(text, "fp8knobs")); /* the default: the text does not name it */
    char *ptx = NULL;
    size_t len = 0;
    assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
    assert_non_null(strstr(ptx, ".maxntid 256, 1, 1\n.minnctapersm 2\n"));
    fj_buf src;
    fj_buf_init(&src);
    assert_int_equal(fj_compile_whole_source(&p, ptx, len, &src), FAJIT_OK);
    assert_non_null(strstr(src.data, "__launch_bounds__(256, 2)"));
    fj_buf_free(&src);
    fajit_free(ptx);
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_E4M3, 8, 32, 8, 1, 8192, 128);
    unsigned grid[3];
    fj_forward_grid(&a, &p, 132, grid);
    assert_int_equal(grid[0], 256); /* 256 work tiles (8 x 32 heads, one row block): under the cap of 2 x 132 */
    assert_int_equal(fj_plan_max_ctas(&p, 132), 264);
    assert_int_equal(fj_plan_max_ctas(&p, 0), 0);
    /* a tile that does not fit two: one CTA an SM, no occ2 */
    fajit_config wide = c;
    wide.block_n = 192, wide.stages = 2;
    assert_int_equal(fj_plan_build(&wide, &p), FAJIT_OK);
    assert_true(p.min_ctas < 2 && !(p.fp8_knobs & FJ_FP8_KNOB_OCC2) && p.producer_regs == 0);
    assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
    assert_non_null(strstr(ptx, ".minnctapersm 1\n"));
    fajit_free(ptx);
    /* head dim 256: one CTA an SM (ptxas cannot fit it in a 128-register launch) */
    fajit_config d256 = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 256};
    assert_int_equal(fajit_config_fill(NULL, &decode, &d256), FAJIT_OK);
    assert_int_equal(fj_plan_build(&d256, &p), FAJIT_OK);
    assert_true(p.min_ctas < 2 && !(p.fp8_knobs & FJ_FP8_KNOB_OCC2));
    setenv("FAJIT_FP8_KNOBS", "vt,poff,occ2", 1);
    assert_true(fj_test_status_says(fj_plan_build(&d256, &p), FAJIT_ERR_UNSUPPORTED, "occ2 with head_dim 256",
                                    "64 and 128", NULL));
    fajit_config two = sm90(FAJIT_DTYPE_E4M3, 128);
    assert_true(fj_test_status_says(fj_plan_build(&two, &p), FAJIT_ERR_INVALID_CONFIG, "occ2 with block_m (--br) = 128",
                                    "one-consumer tile", NULL));
    assert_true(fj_test_status_says(fj_plan_build(&wide, &p), FAJIT_ERR_INVALID_CONFIG, "block_n (--bc) 192",
                                    "O, S and P take 184 registers", "head_dim 64: block_n <= 192"));
    fajit_config deep = c; /* bc128 s3: its registers fit, its smem does not */
    deep.block_n = 128, deep.stages = 3;
    assert_true(fj_test_status_says(fj_plan_build(&deep, &p), FAJIT_ERR_INVALID_CONFIG, "smem", "each of two CTAs",
                                    NULL));
    fajit_config d64 = c; /* head dim 64: ptxas fits bc192 under two CTAs' launch bound, not bc224 */
    d64.head_dim = 64, d64.swizzle = 64, d64.block_n = 192, d64.stages = 2;
    assert_int_equal(fj_plan_build(&d64, &p), FAJIT_OK);
    assert_int_equal(p.min_ctas, 2);
    d64.block_n = 224;
    assert_true(fj_test_status_says(fj_plan_build(&d64, &p), FAJIT_ERR_INVALID_CONFIG, "O, S and P take 172", NULL,
                                    NULL));
    setenv("FAJIT_FP8_KNOBS", "vt,vt4,poff", 1); /* named without occ2: one CTA, and the text says so */
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_true(p.min_ctas < 2);
    fj_plan_format(&p, text, sizeof text);
    assert_non_null(strstr(text, "fp8knobs=vt,vt4,poff"));
    unsetenv("FAJIT_FP8_KNOBS");
}

/* The heuristic's FP8 tiles (config.c, issue 22's cells): D64 br192 bc160 ov pp (FlashAttention-3's tile, under its
 * register split: knob regs in its default set), D128 br128 bc192 ov pp, D256
 * FlashAttention-3's br128 bc128 ov with ping-pong (causal: without, the register model refuses its 4 registers),
 * O staged in the V ring; FAJIT_FP8_KNOBS without regs gives D256 its earlier tile back (no overlap); a given
 * ping-pong is kept; a tile refused for another reason keeps the heuristic's schedule. */
static void test_heuristic_tiles(void **state)
{
    (void)state;
    static const struct {
        const char *knobs; /* NULL: unset */
        int d, causal, bm, bn, overlap, pingpong;
    } want[] = {
        {NULL, 64, 0, 192, 160, 1, 1},    {NULL, 64, 1, 192, 160, 1, 1},    {NULL, 128, 0, 128, 192, 1, 1},
#if FJ_FP8_D256_FA3
        {NULL, 128, 1, 128, 192, 1, 1},   {NULL, 256, 0, 128, 128, 1, 1},   {NULL, 256, 1, 128, 128, 1, -1},
#else
        {NULL, 128, 1, 128, 192, 1, 1},   {NULL, 256, 0, 128, 128, -1, -1}, {NULL, 256, 1, 128, 128, -1, -1},
        {"regs,vt,ostage", 256, 0, 128, 128, 1, 1}, {"regs,vt,ostage", 256, 1, 128, 128, 1, -1},
#endif
        {"vt", 256, 0, 128, 128, -1, -1}, {"vt", 256, 1, 128, 128, -1, -1}, {"vt", 128, 0, 128, 192, 1, 1},
        {"regs,vt", 256, 1, 128, 128, 1, -1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        for (int n = 4096; n <= 16384; n *= 4) {
            if (want[i].knobs) setenv("FAJIT_FP8_KNOBS", want[i].knobs, 1);
            fajit_shape shape = {16384 / n, 2048 / want[i].d, 2048 / want[i].d, n, n};
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = want[i].d,
                              .causal = want[i].causal};
            assert_int_equal(fajit_config_fill(NULL, &shape, &c), FAJIT_OK);
            char text[160];
            fajit_config_format(&c, text, sizeof text);
            printf("%-8s %s\n", want[i].knobs ? want[i].knobs : "(unset)", text);
            assert_int_equal(c.block_m, want[i].bm);
            assert_int_equal(c.block_n, want[i].bn);
            assert_int_equal(c.stages, 2);
            assert_int_equal(c.overlap, want[i].overlap);
            assert_int_equal(c.pingpong, want[i].pingpong);
            fj_plan p;
            assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
            if (want[i].d == 256 && want[i].overlap == 1 && (!want[i].knobs || strstr(want[i].knobs, "ostage")))
                assert_int_equal(p.o_stage, 2);
            if (!want[i].knobs) /* the wide tiles take FlashAttention-3's split, unnamed in the text (the default) */
                assert_int_equal((p.fp8_knobs & FJ_FP8_KNOB_REGS) != 0, want[i].d == 256 || want[i].d == 64);
            unsetenv("FAJIT_FP8_KNOBS");
        }
    /* a given ping-pong stays (D256 causal: the fill narrows block_n instead); a given overlap off keeps the rest */
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 256, .causal = 1, .pingpong = 1};
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK);
    assert_true(c.pingpong == 1 && c.overlap == 1 && c.block_n < 128);
    c = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 256, .overlap = -1};
    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK);
    assert_true(c.block_n == 128 && c.overlap == -1 && c.pingpong == -1);
    /* block_n 100 (not a multiple of 32): refused for that, the heuristic's overlap and ping-pong left as they were */
    c = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = 256, .block_n = 100};
    fj_config_heuristic(&c, &(fajit_config){.block_n = 100}, NULL, 0);
    assert_true(c.overlap == 1 && c.pingpong == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_host_f32),
        cmocka_unit_test(test_config_text),
        cmocka_unit_test(test_occ2),
        cmocka_unit_test(test_config_parse_dtype),
        cmocka_unit_test(test_plan_rules),
        cmocka_unit_test(test_args_valid_and_unsupported),
        cmocka_unit_test(test_args_rules),
        cmocka_unit_test(test_kv8_plan_rules),
        cmocka_unit_test(test_kv8_cvt_target),
        cmocka_unit_test(test_e4m3_host),
        cmocka_unit_test(test_args_size_gates),
        cmocka_unit_test(test_config_must_match),
        cmocka_unit_test(test_knobs_env),
        cmocka_unit_test(test_heuristic_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
