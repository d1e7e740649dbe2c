/*
 * test_varlen_args.c - unit tests (no GPU) of varlen batches (fajit.h: cu_seqlens_q / cu_seqlens_k): the argument
 * rules and their messages, what a varlen call asks of the decode path (no GQA packing, no split), the variant
 * plans and their refusals, the packed TMA maps of the sm_90a kernel (dims, strides, the base moved back, the
 * fallback when it would pass address 0), and the CPU varlen reference against the dense one on equal lengths
 * (packed [B x L, H, D] is the BNHD layout of [B, L, H, D]).
 * Run: ctest --test-dir build -R test_varlen_args
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

#include "codegen/codegen.h"
#include "fajit.h"
#include "runtime/context.h"
#include "runtime/decode.h"
#include "runtime/forward.h"
#include "runtime/half.h"
#include "runtime/reference.h"
#include "runtime/tensor_map.h"
#include "test_support.h"

/* A valid varlen problem: 5 sequences, Hq 8, Hkv 2, longest 1000 queries / 1200 keys, packed [T, H, D] strides. */
static fajit_attention_args varlen_args(void)
{
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, 5, 8, 2, 1000, 1200, 128);
    int64_t q[3] = {0, 128, 8 * 128}, k[3] = {0, 128, 2 * 128};
    memcpy(a.q_stride, q, sizeof q), memcpy(a.o_stride, q, sizeof q);
    memcpy(a.k_stride, k, sizeof k), memcpy(a.v_stride, k, sizeof k);
    a.cu_seqlens_q = 0x7f0000400000ull;
    a.cu_seqlens_k = 0x7f0000400100ull;
    return a;
}

static void expect_status(const fajit_attention_args *a, fajit_status want, const char *f1, const char *f2,
                          const char *f3)
{
    assert_true(fj_test_status_says(fj_forward_validate(a, NULL), want, f1, f2, f3));
}

static void test_rules(void **state)
{
    (void)state;
    fajit_attention_args a = varlen_args();
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.q_stride[0] = a.o_stride[0] = 3, a.k_stride[0] = -5; /* stride[0] of packed tensors is not read */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a = varlen_args();
    a.cu_seqlens_k = 0; /* packed queries against a batched K/V: k_stride[0] is read again */
    a.k_stride[0] = 3;
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->k_stride[0] = 3", "multiple of 8", "");
    a.k_stride[0] = 1200 * 2 * 128;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a = varlen_args();
    a.cu_seqlens_q += 2;
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->cu_seqlens_q = 0x7f0000400002", "4-byte aligned", "[batch + 1]");
    a = varlen_args();
    a.cu_seqlens_k += 1;
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->cu_seqlens_k = 0x7f0000400101", "4-byte aligned", "");
    a = varlen_args();
    a.cu_seqlens_q = 0;
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->cu_seqlens_k", "cu_seqlens_q = 0", "packed keys need");
    a = varlen_args();
    a.block_table = 0x10000, a.max_pages = 20, a.page_size = 64;
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->cu_seqlens_k", "block table", "seqlens_k");
    a.cu_seqlens_k = 0; /* paged keys with packed queries: chunked prefill */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a = varlen_args();
    a.num_splits = 4;
    expect_status(&a, FAJIT_ERR_UNSUPPORTED, "args->num_splits = 4", "cu_seqlens_q", "not built");
    a.num_splits = 1;
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a = varlen_args();
    a.softcap = 30.0f, a.window = 1, a.window_left = 128; /* the attention variants go with varlen */
    assert_int_equal(fj_forward_validate(&a, NULL), FAJIT_OK);
    a.window_left = -2; /* and keep their own rules */
    expect_status(&a, FAJIT_ERR_INVALID_ARGUMENT, "args->window_left = -2", ">= -1", "");
    a = varlen_args(); /* a struct of the SIZE_2 layout never reads the varlen fields */
    a.struct_size = FAJIT_ATTENTION_ARGS_SIZE_2;
    assert_int_equal(fj_decode_varlen(&a), 0);
    a.struct_size = sizeof a;
    assert_int_equal(fj_decode_varlen(&a), 1);
}

/* A varlen call takes the decode path, never packs GQA heads; the public call checks before the device. */
static void test_decode_path(void **state)
{
    (void)state;
    fajit_attention_args a = varlen_args();
    a.seqlen_q = 16; /* decode-sized: GQA packing would apply without varlen */
    assert_true(fj_decode_wanted(NULL, &a));
    fajit_context_options o = fajit_context_options_default();
    o.device = -1, o.disk_cache = 0;
    fajit_context *ctx = NULL;
    assert_int_equal(fajit_context_create(&o, &ctx), FAJIT_OK);
    ctx->pack_gqa = 1;
    assert_int_equal(fj_decode_packs(ctx, &a), 0);
    a.cu_seqlens_q = a.cu_seqlens_k = 0, a.q_stride[0] = a.o_stride[0] = 16 * 8 * 128, a.k_stride[0] = 1200 * 256;
    a.v_stride[0] = a.k_stride[0];
    assert_int_equal(fj_decode_packs(ctx, &a), 1);
    a = varlen_args();
    a.cu_seqlens_q = 6;
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fajit_errmsg(), "args->cu_seqlens_q = 0x6"));
    a = varlen_args();
    assert_int_equal(fajit_attention_forward(ctx, &a, NULL), FAJIT_ERR_NO_DEVICE);
    fajit_context_destroy(ctx);
}

static void test_plans(void **state)
{
    (void)state;
    enum { V = FJ_VARIANT_VARLEN, VK = FJ_VARIANT_VARLEN_K };
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_F16, .head_dim = 128, .block_m = 64, .block_n = 64,
                      .stages = 2, .swizzle = 128, .warps = 4, .causal = 1};
    fj_plan p0, p1;
    char text[200];
    assert_int_equal(fj_plan_build(&c, &p0), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&c, V | VK, &p1), FAJIT_OK);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_80 f16 d128 br64 bc64 s2 sw128 w4 causal varlen varlenk");
    assert_int_equal(p1.params_bytes, (int)sizeof(fj_fwd_params_decode));
    assert_int_equal(p1.reg_total, p0.reg_total + 17 + 2); /* plan.c: FJ_VARIANT_REGS + FJ_VARIANT_VARLEN_REGS */
    assert_int_equal(fj_plan_build_variant(&c, V | FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED, &p1), FAJIT_OK);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_80 f16 d128 br64 bc64 s2 sw128 w4 causal seqlens paged varlen");
    static const unsigned bad[] = {VK, V | FJ_VARIANT_SPLIT, V | FJ_VARIANT_PACK, V | VK | FJ_VARIANT_PAGED,
                                   V | FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, V | FJ_VARIANT_PAGED | FJ_VARIANT_AHEAD};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(fj_plan_build_variant(&c, bad[i], &p1), FAJIT_ERR_INTERNAL);
    fajit_config w = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .block_m = 128,
                      .block_n = 128, .stages = 2, .swizzle = 128, .warps = 12, .overlap = 1, .pingpong = 1, .causal = 1};
    assert_int_equal(fj_plan_build(&w, &p0), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&w, V | VK, &p1), FAJIT_OK);
    assert_int_equal(p1.params_bytes, (int)sizeof(fj_fwd_params_tma_decode));
    assert_int_equal(p1.vtail_bar, 0); /* packed keys: the maps clip at the sequence's end, no V-tail zero fill */
    assert_int_equal(p1.smem_bytes, p0.smem_bytes);
    fj_plan_format(&p1, text, sizeof text);
    assert_string_equal(text, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp causal varlen varlenk");
    assert_int_equal(fj_plan_build_variant(&w, V | FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED, &p1), FAJIT_OK);
    assert_int_equal(p1.vtail_bar, p0.smem_bytes);
    /* the plain plans are untouched by the new bits */
    assert_int_equal(fj_plan_build_variant(&w, 0, &p1), FAJIT_OK);
    assert_memory_equal(&p0, &p1, sizeof p0);
}

/* A driver that only encodes tensor maps: each encode's address, dims, strides and box are kept. */
static struct {
    int n;
    uint64_t addr[8], dims[8][4], strides[8][3];
    uint32_t box[8][4];
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
    (void)type, (void)es, (void)il, (void)sw, (void)l2, (void)oob;
    assert_int_equal(rank, 4);
    assert_true(g_enc.n < 8);
    g_enc.addr[g_enc.n] = (uint64_t)(uintptr_t)addr;
    memcpy(g_enc.dims[g_enc.n], dim, sizeof g_enc.dims[0]);
    memcpy(g_enc.strides[g_enc.n], strides, sizeof g_enc.strides[0]);
    memcpy(g_enc.box[g_enc.n++], box, sizeof g_enc.box[0]);
    memset(map, 0, FJ_TMAP_BYTES);
    return FJ_CUDA_SUCCESS;
}

/* Packed maps (tensor_map.c, codegen/seqlen.h): (D, cap, H, 2^31 - 1), the token stride on dims 1 and 3, the base
 * cap rows before the tensor; a base that would pass address 0 falls back with the reason. */
static void test_packed_tensor_maps(void **state)
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
    assert_int_equal(fj_plan_build_variant(&w, FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K, &p), FAJIT_OK);
    fajit_attention_args a = varlen_args();
    static fj_fwd_params_tma_decode prm;
    char why[256] = "";
    assert_int_equal(fj_tensor_maps(ctx, &p, &a, &prm.tma, why, sizeof why), 0);
    assert_int_equal(g_enc.n, p.o_stage ? 4 : 3);
    const uint64_t ptr[4] = {a.q, a.k, a.v, a.o}, cap[4] = {1000, 1200, 1200, 1000}, heads[4] = {8, 2, 2, 8};
    const uint32_t rows[4] = {128, 128, 128, 64};
    for (int t = 0; t < g_enc.n; t++) {
        uint64_t row_bytes = 2 * 128 * heads[t];
        const uint64_t dims[4] = {128, cap[t], heads[t], 0x7fffffffu}, strides[3] = {row_bytes, 256, row_bytes};
        assert_int_equal(g_enc.addr[t], ptr[t] - cap[t] * row_bytes);
        assert_memory_equal(g_enc.dims[t], dims, sizeof dims);
        assert_memory_equal(g_enc.strides[t], strides, sizeof strides);
        assert_int_equal(g_enc.box[t][0], 64);
        assert_int_equal(g_enc.box[t][1], rows[t]);
        assert_int_equal(g_enc.box[t][2], 1);
        assert_int_equal(g_enc.box[t][3], 1);
    }
    a.q = 0x1000; /* 1000 rows of 2048 bytes before it would pass 0 */
    assert_int_equal(fj_tensor_maps(ctx, &p, &a, &prm.tma, why, sizeof why), -1);
    assert_non_null(strstr(why, "before address 0"));
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* fj_reference_cpu_varlen on equal lengths L against fj_reference_cpu on the same memory read as BNHD [B, L, H, D]
 * (causal, GQA); then an empty sequence and a decreasing pair (clamped to empty) leave their rows alone, and a
 * sequence of no keys gives O = 0, LSE = -inf. */
static void test_reference(void **state)
{
    (void)state;
    enum { B = 3, L = 37, HQ = 4, HK = 2, D = 64 };
    fajit_attention_args a = fj_test_args(FAJIT_DTYPE_BF16, B, HQ, HK, L, L, D);
    a.causal = 1;
    fajit_args_set_bnhd_strides(&a);
    size_t nq = (size_t)B * L * HQ * D, nk = (size_t)B * L * HK * D;
    uint16_t *q = malloc(2 * nq), *k = malloc(2 * nk), *v = malloc(2 * nk);
    double *o = malloc(8 * nq), *lse = malloc(8 * (size_t)B * HQ * L), *vo = malloc(8 * nq),
           *vl = malloc(8 * (size_t)B * HQ * L);
    assert_true(q && k && v && o && lse && vo && vl);
    uint32_t s = 12345;
    for (size_t i = 0; i < nq; i++) s = s * 1664525u + 1013904223u, q[i] = fj_half_from_f32(a.dtype, (float)(s >> 8) / 16777216.0f - 0.5f);
    for (size_t i = 0; i < nk; i++) s = s * 1664525u + 1013904223u, k[i] = fj_half_from_f32(a.dtype, (float)(s >> 8) / 8388608.0f - 1.0f);
    for (size_t i = 0; i < nk; i++) s = s * 1664525u + 1013904223u, v[i] = fj_half_from_f32(a.dtype, (float)(s >> 8) / 8388608.0f - 1.0f);
    assert_int_equal(fj_reference_cpu(&a, q, k, v, o, lse), FAJIT_OK);
    const int32_t cu[B + 1] = {0, L, 2 * L, 3 * L};
    fajit_attention_args p = a; /* packed: stride[0] unused */
    p.q_stride[0] = p.k_stride[0] = p.v_stride[0] = p.o_stride[0] = 0;
    assert_int_equal(fj_reference_cpu_varlen(&p, cu, cu, NULL, q, k, v, vo, vl), FAJIT_OK);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < L; i++) {
                size_t dense = (((size_t)b * HQ + h) * L + i), t = (size_t)b * L + i;
                for (int d = 0; d < D; d++) assert_true(o[dense * D + d] == vo[(t * HQ + h) * D + d]);
                assert_true(lse[dense] == vl[(size_t)h * B * L + t]);
            }
    /* sequence 1 empty, sequence 2 decreasing (empty), sequence 0 with no keys */
    const int32_t cq[B + 1] = {0, L, L, 2 * L}, ck[B + 1] = {0, 0, L, 2 * L};
    const int32_t cq2[B + 1] = {0, L, L, L - 5};
    for (size_t i = 0; i < nq; i++) vo[i] = 7.0;
    for (size_t i = 0; i < (size_t)B * HQ * L; i++) vl[i] = 7.0;
    assert_int_equal(fj_reference_cpu_varlen(&p, cq, ck, NULL, q, k, v, vo, vl), FAJIT_OK);
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < L; i++) {
            for (int d = 0; d < D; d++) assert_true(vo[((size_t)i * HQ + h) * D + d] == 0.0);
            assert_true(isinf(vl[(size_t)h * 2 * L + i]) && vl[(size_t)h * 2 * L + i] < 0);
        }
    for (size_t i = 0; i < nq; i++) vo[i] = 7.0;
    assert_int_equal(fj_reference_cpu_varlen(&p, cq2, NULL, NULL, q, k, v, vo, NULL), FAJIT_OK);
    for (size_t t = L; t < 2 * (size_t)L; t++) /* rows no sequence owns: untouched */
        for (int e = 0; e < HQ * D; e++) assert_true(vo[t * HQ * D + e] == 7.0);
    free(q), free(k), free(v), free(o), free(lse), free(vo), free(vl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_decode_path),
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_packed_tensor_maps),
        cmocka_unit_test(test_reference),
    };
    return cmocka_run_group_tests_name("varlen_args", tests, NULL, NULL);
}
