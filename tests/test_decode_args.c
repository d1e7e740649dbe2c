/*
 * test_decode_args.c - unit tests (no GPU) of the grown fajit_attention_args: struct_size and
 * fajit_attention_args_init, per-sequence lengths, splits, the workspace rules and sizes, the split
 * heuristic, and the decode plans (variant text, the sm_90a refusal, plain plans unchanged).
 * Every rule is broken once and the message is checked for the field, the value and the rule.
 * Run: ctest --test-dir build -R test_decode_args
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
#include "runtime/forward.h"
#include "runtime/tensor_map.h"
#include "test_support.h"

/* A valid decode problem (B 4, Hq 32, Hkv 8, Nq 1, Nk 4096) on made-up aligned device addresses. */
static fajit_attention_args decode_args(void) { return fj_test_args(FAJIT_DTYPE_BF16, 4, 32, 8, 1, 4096, 128); }

/* fj_forward_validate fails with INVALID_ARGUMENT and the message holds every fragment. */
static void expect_invalid(const fajit_attention_args *a, const char *f1, const char *f2, const char *f3)
{
    assert_true(fj_test_status_says(fj_forward_validate(a, NULL), FAJIT_ERR_INVALID_ARGUMENT, f1, f2, f3));
}

/* The 0.1 fields keep their offsets (new ones are appended); init sets struct_size and zeroes the rest. */
static void test_layout_and_init(void **state)
{
    (void)state;
    assert_int_equal(offsetof(fajit_attention_args, struct_size),
                     (offsetof(fajit_attention_args, stream) + sizeof(void *) + 7) / 8 * 8);
    assert_true(offsetof(fajit_attention_args, seqlens_k) > offsetof(fajit_attention_args, struct_size));
    assert_true(offsetof(fajit_attention_args, workspace_bytes) > offsetof(fajit_attention_args, workspace));
    assert_int_equal(FAJIT_ATTENTION_ARGS_SIZE_1, offsetof(fajit_attention_args, block_table));
    assert_true(FAJIT_ATTENTION_ARGS_SIZE_2 <= offsetof(fajit_attention_args, cu_seqlens_q));
    assert_true(FAJIT_ATTENTION_ARGS_SIZE_3 <= offsetof(fajit_attention_args, kv_dtype));
    assert_int_equal(FAJIT_ATTENTION_ARGS_SIZE_4, sizeof(fajit_attention_args));
    fajit_attention_args a;
    memset(&a, 0x5a, sizeof a);
    fajit_attention_args_init(&a);
    assert_int_equal(a.struct_size, sizeof a);
    assert_int_equal(a.seqlens_k, 0);
    assert_int_equal(a.num_splits, 0);
    assert_int_equal(a.workspace, 0);
    assert_int_equal(a.batch, 0);
    fajit_attention_args_init(NULL); /* accepted */
}

static void test_struct_size(void **state)
{
    (void)state;
    fajit_attention_args a = decode_args();
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.struct_size = 0; /* a zeroed struct: the first grown layout */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.struct_size = 64;
    expect_invalid(&a, "args->struct_size = 64", "at least", "fajit_attention_args_init");
    /* a newer caller's struct: longer, its unknown tail all zero is fine, a set byte is refused */
    unsigned char *big = calloc(1, sizeof a + 16);
    assert_non_null(big);
    a.struct_size = sizeof a + 16;
    memcpy(big, &a, sizeof a);
    assert_int_equal(fj_forward_validate((const fajit_attention_args *)big, NULL), FAJIT_OK);
    big[sizeof a + 5] = 1;
    expect_invalid((const fajit_attention_args *)big, "args->struct_size", "is not 0", "newer fajit.h");
    free(big);
    a = decode_args();
    a.reserved0 = 3;
    expect_invalid(&a, "args->reserved0 = 3", "must be 0", "");
}

static void test_seqlens_and_splits(void **state)
{
    (void)state;
    fajit_attention_args a = decode_args();
    a.seqlens_k = 0x7f0000500000ull;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.seqlens_k = 0x7f0000500002ull;
    expect_invalid(&a, "args->seqlens_k = 0x7f0000500002", "4-byte aligned", "int32");
    a = decode_args();
    a.num_splits = -1;
    expect_invalid(&a, "args->num_splits = -1", "0 (the heuristic)", "2..1024");
    a.num_splits = FAJIT_MAX_SPLITS + 1;
    expect_invalid(&a, "args->num_splits = 1025", "1 (no split)", "2..1024");
    a.num_splits = FAJIT_MAX_SPLITS;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.batch = 100;
    a.num_splits = 1024;
    expect_invalid(&a, "args->num_splits = 1024", "batch = 100", "<= 65535");
}

/* Paged K/V: the fields go together, the pages cover seqlen_k, and a struct_size of the first grown layout
 * (or 0) does not read them at all. */
static void test_paged_rules(void **state)
{
    (void)state;
    fajit_attention_args a = decode_args(); /* Nk 4096 */
    a.block_table = 0x7f0000700000ull, a.max_pages = 64, a.page_size = 64;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.page_size = 24;
    expect_invalid(&a, "args->page_size = 24", "multiple of 16", "");
    a.page_size = 64, a.max_pages = 63;
    expect_invalid(&a, "args->max_pages = 63", "page_size = 64", "less than seqlen_k = 4096");
    a.max_pages = 0;
    expect_invalid(&a, "args->max_pages = 0", ">= 1", "block table");
    a.max_pages = 64, a.block_table = 0x7f0000700002ull;
    expect_invalid(&a, "args->block_table = 0x7f0000700002", "4-byte aligned", "max_pages");
    a.block_table = 0;
    expect_invalid(&a, "args->max_pages = 64, page_size = 64", "block_table = 0", "leave both 0");
    /* the older layouts do not have these fields: they are not read (not even checked) */
    a.block_table = 0x7f0000700002ull;
    a.struct_size = FAJIT_ATTENTION_ARGS_SIZE_1;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    fj_decode_args d;
    fj_decode_read(&a, &d);
    assert_int_equal(d.block_table, 0);
    a.struct_size = 0;
    fj_decode_read(&a, &d);
    assert_int_equal(d.page_size, 0);
    assert_int_equal(fj_decode_wanted(NULL, &a), 1); /* seqlen_q 1: the split heuristic may still split */
}

static void test_workspace_rules(void **state)
{
    (void)state;
    fajit_attention_args a = decode_args();
    a.workspace_bytes = 4096;
    expect_invalid(&a, "args->workspace_bytes = 4096", "args->workspace = 0", "both");
    a.workspace_bytes = 0;
    a.workspace = 0x7f0000600000ull;
    expect_invalid(&a, "args->workspace = 0x7f0000600000", "workspace_bytes = 0", "fajit_attention_workspace_size");
    a.workspace = 0x7f0000600080ull;
    a.workspace_bytes = 1 << 20;
    expect_invalid(&a, "args->workspace = 0x7f0000600080", "256-byte aligned", "");
    /* size: 4 splits x B 4 x Hq 32 x Nq 1 rows of 128 fp32 (256-aligned), then their LSE */
    a = decode_args();
    size_t lse_off = 0, need = fj_decode_workspace_bytes(&a, 4, &lse_off);
    assert_int_equal(lse_off, 4 * 4 * 32 * 128 * 4);
    assert_int_equal(need, lse_off + 4 * 4 * 32 * 4);
    assert_int_equal(fj_decode_workspace_bytes(&a, 1, NULL), 0);
    a.num_splits = 4;
    size_t got = 0;
    assert_int_equal(fajit_attention_workspace_size(NULL, &a, NULL, &got), FAJIT_OK); /* forced: no device needed */
    assert_int_equal(got, need);
    a.workspace = 0x7f0000600000ull;
    a.workspace_bytes = need - 1;
    assert_int_equal(fj_decode_check_workspace(&a, 4), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "args->workspace_bytes ="));
    char want[64];
    snprintf(want, sizeof want, "need %zu bytes", need);
    assert_non_null(strstr(fajit_errmsg(), want));
    a.workspace_bytes = need;
    assert_int_equal(fj_decode_check_workspace(&a, 4), FAJIT_OK);
    a.num_splits = 1; /* no split, no workspace */
    assert_int_equal(fajit_attention_workspace_size(NULL, &a, NULL, &got), FAJIT_OK);
    assert_int_equal(got, 0);
    a.num_splits = 0; /* the heuristic needs the device */
    a.workspace = 0, a.workspace_bytes = 0;
    assert_int_equal(fajit_attention_workspace_size(NULL, &a, NULL, &got), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "num_splits"));
}

/* The heuristic: forced counts win; prefill shapes and full grids do not split; decode shapes fill the SMs. */
/* The default path rule for decode calls on an sm_90a device (fj_decode_auto_sm90) on issue 11's rows, 132
 * SMs, what the H200 measured (decode.h): sm_90a for the 512k MQA rows at Nq 1/4/16 (the sm_80 grid has one CTA
 * per SM), sm_80 for the rows whose sm_80 grid has 256+ CTAs; sm_90a when the rows of a KV head pass the sm_80
 * tile (a prefill with seqlens_k, or GQA 16 x Nq 16 packed). */
static void test_auto_sm90(void **state)
{
    (void)state;
    static const int rows[5][4] = {{1, 32, 32, 32768}, {1, 32, 8, 131072}, {8, 32, 8, 8192}, {64, 32, 8, 2048},
                                   {1, 8, 1, 524288}};
    for (int r = 0; r < 5; r++)
        for (int nq = 1; nq <= 16; nq *= 4) {
            fajit_attention_args a = decode_args();
            a.batch = rows[r][0], a.heads_q = rows[r][1], a.heads_kv = rows[r][2], a.seqlen_k = rows[r][3];
            a.seqlen_q = nq, a.causal = nq > 1;
            int packed = a.heads_q > a.heads_kv, want = r == 4;
            printf("B%d Hq%d Hkv%d Nk%d Nq%d: %s\n", a.batch, a.heads_q, a.heads_kv, a.seqlen_k, nq,
                   fj_decode_auto_sm90(&a, packed, 132) ? "sm_90a" : "sm_80");
            assert_int_equal(fj_decode_auto_sm90(&a, packed, 132), want);
            a.num_splits = r == 4 ? 264 : 1; /* a forced count does not move the shape (fagen tune times counts) */
            assert_int_equal(fj_decode_auto_sm90(&a, packed, 132), want);
        }
    fajit_attention_args a = decode_args();
    a.batch = 4, a.heads_q = 32, a.heads_kv = 32, a.seqlen_q = 4096, a.seqlen_k = 4096; /* prefill with seqlens_k */
    assert_int_equal(fj_decode_auto_sm90(&a, 0, 132), 1);
    a.seqlen_q = 16, a.heads_kv = 2; /* GQA 16 x 16 packed rows: two sm_80 row blocks */
    assert_int_equal(fj_decode_auto_sm90(&a, 1, 132), 1);
    a.block_table = 256, a.max_pages = 256, a.page_size = 16; /* pages under 64 rows: the sm_80 gather */
    assert_int_equal(fj_decode_auto_sm90(&a, 1, 132), 0);
    a.page_size = 64;
    assert_int_equal(fj_decode_auto_sm90(&a, 1, 132), 1);
}

static void test_split_heuristic(void **state)
{
    (void)state;
    fajit_attention_args a = decode_args();
    a.num_splits = 7;
    assert_int_equal(fj_decode_splits(&a, 0, 64, 64, 132), 7);
    a.num_splits = 0;
    a.batch = 1, a.heads_q = 32, a.heads_kv = 32, a.seqlen_k = 32768; /* 32 CTAs on 132 SMs */
    int s = fj_decode_splits(&a, 0, 64, 64, 132);
    printf("B1 Hq32 Nk32k on 132 SMs: %d splits\n", s);
    assert_true(s >= 4 && s <= 16);
    a.heads_q = 8, a.heads_kv = 1, a.seqlen_k = 512 * 1024;
    s = fj_decode_splits(&a, 0, 64, 64, 132);
    printf("B1 Hq8 Nk512k on 132 SMs: %d splits\n", s);
    assert_true(s >= 17 && s <= FJ_SPLIT_AUTO_MAX_SPLITS);
    /* one packed row block: one split an SM for 16-bit K/V, two for an FP8 K/V cache (its CTA fits twice) */
    assert_int_equal(fj_decode_splits(&a, 1, 64, 64, 132), 132);
    a.kv_dtype = FAJIT_DTYPE_E4M3;
    assert_int_equal(fj_decode_splits(&a, 1, 64, 64, 132), 264);
    /* the FP8 K/V cache's br16 tile (two warps a CTA): four CTAs an SM, packed or not */
    a.heads_q = 32, a.heads_kv = 8, a.seqlen_k = 131072; /* 8 CTAs */
    assert_int_equal(fj_decode_splits(&a, 1, 16, 32, 132), 66);
    assert_int_equal(fj_decode_splits(&a, 1, 64, 64, 132), 33);
    a.batch = 8, a.seqlen_k = 8192; /* 64 CTAs */
    assert_int_equal(fj_decode_splits(&a, 1, 16, 32, 132), 8);
    a.batch = 1, a.heads_kv = 32, a.seqlen_k = 32768; /* 32 CTAs, unpacked */
    assert_int_equal(fj_decode_splits(&a, 0, 16, 32, 132), 16);
    assert_int_equal(fj_decode_splits(&a, 0, 64, 64, 132), 8);
    a.kv_dtype = 0;
    a.heads_q = 8, a.heads_kv = 1, a.seqlen_k = 512 * 1024;
    assert_int_equal(fj_decode_splits(&a, 1, 16, 32, 132), 132); /* 16-bit K/V: two an SM, one split an SM */
    a.heads_q = 32, a.heads_kv = 8, a.seqlen_k = 131072; /* GQA 4: packed, 8 CTAs (one per KV head) instead of 32 */
    int unpacked = fj_decode_splits(&a, 0, 64, 64, 132), packed = fj_decode_splits(&a, 1, 64, 64, 132);
    printf("B1 Hq32 Hkv8 Nk128k on 132 SMs: %d splits, packed %d\n", unpacked, packed);
    assert_true(packed > unpacked);
    a.batch = 64, a.heads_q = 32, a.heads_kv = 8, a.seqlen_k = 2048; /* 2048 CTAs: full */
    assert_int_equal(fj_decode_splits(&a, 0, 64, 64, 132), 1);
    a.batch = 1, a.seqlen_q = 1000; /* prefill: never by the heuristic */
    assert_int_equal(fj_decode_splits(&a, 0, 64, 64, 132), 1);
    a.seqlen_q = 1, a.seqlen_k = 100; /* too few KV tiles */
    assert_int_equal(fj_decode_splits(&a, 0, 64, 64, 132), 1);
    assert_int_equal(fj_decode_wanted(NULL, &a), 1);
    a.seqlen_q = 1000;
    assert_int_equal(fj_decode_wanted(NULL, &a), 0);
    a.num_splits = 2;
    assert_int_equal(fj_decode_wanted(NULL, &a), 1);
}

/* Variant plans: their text, the parameter block, the sm_90a refusal, and variant 0 = the plain plan. */
static void test_variant_plans(void **state)
{
    (void)state;
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_F16, .head_dim = 128, .block_m = 64, .block_n = 64,
                      .stages = 2, .swizzle = 128, .warps = 4, .causal = 1};
    fj_plan p0, p1;
    char text[160];
    assert_int_equal(fj_plan_build(&c, &p0), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&c, 0, &p1), FAJIT_OK);
    assert_memory_equal(&p0, &p1, sizeof p0);
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, &p1), FAJIT_OK);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_80 f16 d128 br64 bc64 s2 sw128 w4 causal seqlens split");
    assert_int_equal(p1.params_bytes, (int)sizeof(fj_fwd_params_decode));
    assert_int_equal(p1.reg_total, p0.reg_total + 17); /* plan.c: FJ_VARIANT_REGS */
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_PAGED, &p1), FAJIT_OK);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_80 f16 d128 br64 bc64 s2 sw128 w4 causal split packgqa paged");
    fajit_config edge = c; /* the causal d128 128-row tile at the register edge: refused for the variants */
    edge.block_m = 128;
    assert_int_equal(fj_plan_build(&edge, &p1), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&edge, FJ_VARIANT_SEQLENS, &p1), FAJIT_ERR_INVALID_CONFIG);
    assert_non_null(strstr(fajit_errmsg(), "decode variant"));
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_COMBINE, &p1), FAJIT_OK);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_80 f16 d128 combine");
    assert_string_equal(fj_plan_entry(&p1), FJ_COMBINE_KERNEL_NAME);
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_COMBINE | FJ_VARIANT_SPLIT, &p1), FAJIT_ERR_INTERNAL);
    fajit_config w = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 128,
                      .block_n = 128, .stages = 2, .swizzle = 128, .warps = 12, .overlap = 1, .pingpong = 1};
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, &p1),
                     FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "variant gather"));
    assert_non_null(strstr(fajit_errmsg(), "sm_80 path"));
    /* seqlens_k, split-KV, GQA packing and paged K/V plan on sm_90a: the tensor-map block + the decode fields */
    assert_int_equal(fj_plan_build(&w, &p0), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED, &p1), FAJIT_OK);
    /* paged: the V tail's zero fill, with or without seqlens_k, after the plan's smem; a split's epilogue stores from
     * registers, so the plain kernel's O staging buffer is not planned */
    assert_int_equal(p1.vtail_bar + 8, p1.smem_bytes);
    assert_int_equal(p0.o_stage, 1);
    assert_int_equal(p1.o_stage, 0);
    assert_int_equal(p1.vtail_bar, p0.smem_bytes - p0.o_bytes);
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, &p1), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, &p1), FAJIT_OK);
    assert_int_equal(p1.params_bytes, (int)sizeof(fj_fwd_params_tma_decode));
    assert_int_equal(p1.params_align, 64);
    assert_int_equal(p1.reg_total, p0.reg_total + 4); /* plan.c: FJ_VARIANT_WS_REGS */
    fj_plan_format(&p1, text, sizeof text);
    assert_non_null(strstr(text, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal seqlens split"));
}

/* PTX text of plan p (verbosity 1), or fails the test. The caller frees it. */
static char *plan_ptx(const fj_plan *p)
{
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(p, 1, &ptx, &len) != FAJIT_OK) fail_msg("generate: %s", fajit_errmsg());
    return ptx;
}

/* Offset of the first line holding `what` as an instruction (not a comment), or -1. */
static long first_ins(const char *text, const char *what)
{
    long n = (long)strlen(text), w = (long)strlen(what);
    for (long i = 0; i + w <= n; i++) {
        if (strncmp(text + i, what, (size_t)w) != 0) continue;
        long b = i;
        while (b > 0 && text[b - 1] != '\n') b--;
        while (text[b] == ' ' || text[b] == '\t') b++;
        if (text[b] != '/' || text[b + 1] != '/') return i;
    }
    return -1;
}

/* Programmatic dependent launch (fj_plan_for_target): for a target with griddepcontrol (sm_90 and later rows) the
 * split kernel lets its dependents launch before its first load and the combine kernel waits before its first
 * load of a partial, on both paths; an sm_80 target, the plain kernels and a plan without a target get neither
 * (their PTX byte-identical to the untargeted plan's). */
static void test_griddep(void **state)
{
    (void)state;
    const fj_arch_info *sm80 = fj_arch_find("sm_80"), *sm90 = fj_arch_find("sm_90"), *sm90a = fj_arch_find("sm_90a");
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 64,
                      .block_n = 64, .stages = 2, .swizzle = 128, .warps = 4};
    fajit_config w = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 128,
                      .block_n = 128, .stages = 2, .swizzle = 128, .warps = 12, .overlap = 1, .pingpong = 1};
    struct { const fajit_config *cfg; unsigned v; const fj_arch_info *target; int griddep; const char *ins; } k[] = {
        {&c, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK, sm90, 1, "griddepcontrol.launch_dependents"},
        {&c, FJ_VARIANT_COMBINE, sm90, 1, "griddepcontrol.wait"},
        {&w, FJ_VARIANT_SPLIT | FJ_VARIANT_SEQLENS, sm90a, 1, "griddepcontrol.launch_dependents"},
        {&c, FJ_VARIANT_SPLIT, sm80, 0, NULL},
        {&c, FJ_VARIANT_COMBINE, sm80, 0, NULL},
        {&c, FJ_VARIANT_SEQLENS, sm90, 0, NULL},
        {&c, 0, sm90, 0, NULL},
        {&w, 0, sm90a, 0, NULL},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        fj_plan p;
        assert_int_equal(fj_plan_build_variant(k[i].cfg, k[i].v, &p), FAJIT_OK);
        char *untargeted = plan_ptx(&p); /* before fj_plan_for_target */
        fj_plan_for_target(&p, k[i].target);
        assert_int_equal(p.griddep, k[i].griddep);
        char *ptx = plan_ptx(&p);
        assert_int_equal(first_ins(untargeted, "griddepcontrol"), -1);
        if (!k[i].griddep) {
            assert_int_equal(first_ins(ptx, "griddepcontrol"), -1);
            assert_string_equal(ptx, untargeted);
        } else {
            long at = first_ins(ptx, k[i].ins), load = first_ins(ptx, k[i].v & FJ_VARIANT_COMBINE ? "ld.global" : "ld.");
            char target[32];
            snprintf(target, sizeof target, ".target %s", k[i].target->name);
            assert_non_null(strstr(ptx, target)); /* the sm_80 path's PTX takes the device's row */
            assert_true(at >= 0);
            assert_true(load > at); /* before any load of a parameter, a partial or a tile */
            assert_int_equal(first_ins(ptx, k[i].v & FJ_VARIANT_COMBINE ? "griddepcontrol.launch" : "griddepcontrol.wait"),
                             -1);
        }
        fajit_free(ptx);
        fajit_free(untargeted);
    }
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_COMBINE, &p), FAJIT_OK);
    fj_plan_for_target(&p, NULL);
    assert_int_equal(p.griddep, 0);
}

/* Bad decode fields are reported by the public call before the missing device. */
static void test_public_call_without_device(void **state)
{
    (void)state;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 0;
    fajit_context *ctx = NULL;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    fajit_attention_args a = decode_args();
    a.num_splits = 5000;
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "args->num_splits = 5000"));
    a.num_splits = 0;
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_NO_DEVICE);
    fajit_context_destroy(ctx);
}

/* A driver that only encodes tensor maps: each encode's dims, strides and box are kept. */
static struct {
    int n;
    uint64_t dims[16][4], strides[16][3];
    uint32_t box[16][4];
} g_enc;

static fj_CUresult fake_push(fj_CUcontext c)
{
    (void)c;
    return FJ_CUDA_SUCCESS;
}

static fj_CUresult fake_pop(fj_CUcontext *c)
{
    *c = NULL;
    return FJ_CUDA_SUCCESS;
}

static fj_CUresult fake_encode(void *map, int type, uint32_t rank, void *addr, const uint64_t *dim,
                               const uint64_t *strides, const uint32_t *box, const uint32_t *es, int il, int sw, int l2,
                               int oob)
{
    (void)type, (void)addr, (void)es, (void)il, (void)sw, (void)l2, (void)oob;
    assert_int_equal(rank, 4);
    assert_true(g_enc.n < 16);
    memcpy(g_enc.dims[g_enc.n], dim, sizeof g_enc.dims[0]);
    memcpy(g_enc.strides[g_enc.n], strides, sizeof g_enc.strides[0]);
    memcpy(g_enc.box[g_enc.n++], box, sizeof g_enc.box[0]);
    memset(map, 0, FJ_TMAP_BYTES);
    return FJ_CUDA_SUCCESS;
}

/* Paged K/V on sm_90a (tensor_map.c): K and V maps describe the pool as (D, page_size, Hkv, 2^31 - 1 pages) with
 * the pool's row / head / page strides and a box of min(page_size, block_n) rows; the box is part of the cache
 * key (another page size encodes K and V again, Q comes from the cache). */
static void test_paged_tensor_maps(void **state)
{
    (void)state;
    fj_cuda_api cu;
    memset(&cu, 0, sizeof cu);
    cu.cuCtxPushCurrent = fake_push, cu.cuCtxPopCurrent = fake_pop, cu.cuTensorMapEncodeTiled = fake_encode;
    fajit_context *ctx = calloc(1, sizeof *ctx);
    assert_non_null(ctx);
    ctx->cu = &cu;
    pthread_mutex_init(&ctx->lock, NULL);
    fajit_config w = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 128,
                      .block_n = 128, .stages = 2, .swizzle = 128, .warps = 12, .overlap = 1, .pingpong = 1};
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED, &p), FAJIT_OK);
    fajit_attention_args a = decode_args(); /* B4 Hq32 Hkv8 Nq1 Nk4096 D128 */
    static const int pages[3][2] = {{64, 64}, {16, 16}, {256, 128}}; /* page size, box rows */
    static fj_fwd_params_tma_decode prm;
    char why[256] = "";
    for (int i = 0; i < 3; i++) {
        int ps = pages[i][0], first = g_enc.n;
        a.page_size = ps, a.max_pages = 4096 / ps, a.block_table = 0x10000;
        int64_t st[3] = {(int64_t)ps * 8 * 128, 128, 8 * 128}; /* [pages, page_size, Hkv, D] */
        memcpy(a.k_stride, st, sizeof st), memcpy(a.v_stride, st, sizeof st);
        assert_int_equal(fj_tensor_maps(ctx, &p, &a, &prm.tma, why, sizeof why), 0);
        assert_int_equal(g_enc.n - first, i == 0 ? 2 + (p.o_stage ? 2 : 1) : 2); /* later: K and V only */
        for (int t = first + (i == 0); t < first + (i == 0) + 2; t++) { /* K, V (the first time after Q) */
            const uint64_t dims[4] = {128, (uint64_t)ps, 8, 0x7fffffffu};
            const uint64_t strides[3] = {2 * 8 * 128, 2 * 128, 2 * (uint64_t)ps * 8 * 128};
            assert_memory_equal(g_enc.dims[t], dims, sizeof dims);
            assert_memory_equal(g_enc.strides[t], strides, sizeof strides);
            assert_int_equal(g_enc.box[t][0], 64);
            assert_int_equal(g_enc.box[t][1], pages[i][1]);
            assert_int_equal(g_enc.box[t][2], 1);
        }
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_init),   cmocka_unit_test(test_struct_size),
        cmocka_unit_test(test_seqlens_and_splits), cmocka_unit_test(test_workspace_rules),
        cmocka_unit_test(test_paged_rules),
        cmocka_unit_test(test_split_heuristic),   cmocka_unit_test(test_auto_sm90),
        cmocka_unit_test(test_variant_plans),     cmocka_unit_test(test_griddep),
        cmocka_unit_test(test_public_call_without_device), cmocka_unit_test(test_paged_tensor_maps),
    };
    return cmocka_run_group_tests_name("decode_args", tests, NULL, NULL);
}
