/*
 * prebuilt_set.c - which kernels the build compiles into the library (prebuilt.h): what the default paths
 * launch on an sm_80 GPU (A100 class: 166912 B of shared memory a block) and an sm_90 GPU (H100 / H200) when
 * no config is given and nothing was tuned.
 *
 *   forward  fj_config_fill_default for each dtype, head dim and mask over the sequence-length classes whose
 *            configs differ (the heuristic's rules: short queries, short causal D=64, long sequences), causal
 *            also with grouped-query heads (Hq 32 / Hkv 8: the lpt schedule at head dim <= 128)
 *   decode   the sm_80 path's variants of a decode step with GQA packing, with and without per-sequence lengths
 *            and split-KV (head dims 64, 128, 256; 16-bit and FP8 e4m3 K/V caches), and the combine kernel of
 *            every dtype and head dim
 *   FP8      (sm_90 only) e4m3 Q, K, V: the forward's configs as above (head dims 64, 128, 256), and a decode step's
 *            sm_90a FP8 kernel with its variants (GQA packing, with and without per-sequence lengths and split-KV)
 *
 * The set is made by the same policy code the runtime runs (a context given the GPU's identity, no device), so
 * a config the runtime picks is in it by construction; test_prebuilt checks a sample.
 */
#include <string.h>

#include "config_fill.h"
#include "context.h"
#include "decode.h"
#include "prebuilt.h"

typedef struct set_gpu {
    const char *sm, *name;
    int smem_optin;
} set_gpu;

static const set_gpu k_gpus[] = {{"sm_80", "A100 (prebuilt set)", 166912}, {"sm_90", "H100 (prebuilt set)", 232448}};
static const int k_head_dims[] = {64, 96, 128, 192, 256};
static const int k_decode_head_dims[] = {64, 128, 256};
static const int k_seqlens[] = {0, 64, 512, 1024, 4096, 8192, 16384}; /* 0: no shape */

typedef struct set_out {
    fj_prebuilt_item *items;
    int max, n;
} set_out;

/* Add (cfg, variant) for ctx's device unless it is there already. */
static void set_add(set_out *o, fajit_context *ctx, const fajit_config *cfg, unsigned variant)
{
    fj_plan plan;
    const fj_arch_info *target = NULL;
    if (fj_plan_build_variant(cfg, variant, &plan) != FAJIT_OK || fj_context_target(ctx, &plan, &target) != FAJIT_OK)
        return;
    for (int i = 0; i < o->n && i < o->max; i++)
        if (o->items[i].variant == variant && strcmp(o->items[i].target, target->name) == 0 &&
            memcmp(&o->items[i].cfg, cfg, sizeof *cfg) == 0)
            return;
    if (o->n < o->max) {
        fj_prebuilt_item *it = &o->items[o->n];
        memset(it, 0, sizeof *it);
        it->cfg = *cfg;
        it->variant = variant;
        snprintf(it->target, sizeof it->target, "%s", target->name);
    }
    o->n++;
}

static void set_forward(set_out *o, fajit_context *ctx, fajit_dtype dtype, int d, int causal)
{
    for (size_t s = 0; s < sizeof k_seqlens / sizeof k_seqlens[0]; s++)
        for (int gqa = 0; gqa <= causal; gqa++) { /* causal grouped-query heads: the heuristic's lpt schedule */
            int n = k_seqlens[s];
            fajit_shape shape = {1, gqa ? 32 : 16, gqa ? 8 : 16, n, n};
            fajit_config cfg = {.dtype = dtype, .head_dim = d, .causal = causal};
            if (fj_config_fill_default(ctx, n ? &shape : NULL, &cfg) == FAJIT_OK) set_add(o, ctx, &cfg, 0);
        }
}

/* A decode step: one query of 32 heads over 8 K/V heads, 4096 keys; the sm_80 path's kernel and its variants.
 * kv_dtype: 0, or FAJIT_DTYPE_E4M3 for an FP8 K/V cache (kv8.c). */
static void set_decode(set_out *o, fajit_context *ctx, fajit_dtype dtype, int d, int causal, fajit_dtype kv_dtype)
{
    static const unsigned variants[] = {FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                        FJ_VARIANT_SEQLENS | FJ_VARIANT_PACK};
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = dtype, a.kv_dtype = kv_dtype;
    a.batch = 8, a.heads_q = 32, a.heads_kv = 8, a.seqlen_q = 1, a.seqlen_k = 4096, a.head_dim = d, a.causal = causal;
    fajit_shape shape = {8, 32, 8, 1, 4096};
    fajit_config k80 = {.arch = FAJIT_ARCH_SM80, .dtype = dtype, .head_dim = d, .causal = causal,
                        .kv_dtype = kv_dtype};
    if (fj_config_fill_default(ctx, &shape, &k80) != FAJIT_OK) return;
    set_add(o, ctx, &k80, 0); /* fj_decode_run loads the sm_80 path's plain kernel first (sm80_base) */
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        fajit_config c = k80;
        if (fj_decode_variant_config(&a, variants[v], &c) == FAJIT_OK) set_add(o, ctx, &c, variants[v]);
    }
}

/* A decode step with e4m3 queries (FlashAttention-3's FP8 kvcache inputs): the sm_90a FP8 kernel the forward loads
 * for the shape (its decode tile), then the variants decode.c's fp8_run takes on it (ws_choose: no block_n change
 * without pages). */
static void set_decode_fp8(set_out *o, fajit_context *ctx, int d, int causal)
{
    static const unsigned variants[] = {0, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                        FJ_VARIANT_SEQLENS | FJ_VARIANT_PACK, FJ_VARIANT_SPLIT | FJ_VARIANT_PACK,
                                        FJ_VARIANT_PACK};
    fajit_shape shape = {8, 32, 8, 1, 4096};
    fajit_config cfg = {.dtype = FAJIT_DTYPE_E4M3, .head_dim = d, .causal = causal};
    if (fj_config_fill_default(ctx, &shape, &cfg) != FAJIT_OK) return; /* (no FP8 kernel on this GPU) */
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) set_add(o, ctx, &cfg, variants[v]);
}

int fj_prebuilt_set(fj_prebuilt_item *items, int max)
{
    set_out o = {items, max, 0};
    fajit_context_options opts = {-1, 0, NULL};
    for (size_t g = 0; g < sizeof k_gpus / sizeof k_gpus[0]; g++) {
        fajit_context *ctx = NULL;
        if (fajit_context_create(&opts, &ctx) != FAJIT_OK) return -1;
        fj_context_set_identity(ctx, k_gpus[g].sm, k_gpus[g].name, 13000, k_gpus[g].smem_optin);
        for (int t = 0; t < 2; t++) {
            fajit_dtype dtype = t ? FAJIT_DTYPE_BF16 : FAJIT_DTYPE_F16;
            for (size_t h = 0; h < sizeof k_head_dims / sizeof k_head_dims[0]; h++) {
                for (int causal = 0; causal <= 1; causal++) set_forward(&o, ctx, dtype, k_head_dims[h], causal);
                fajit_config cc = {.arch = FAJIT_ARCH_SM80, .dtype = dtype, .head_dim = k_head_dims[h]};
                set_add(&o, ctx, &cc, FJ_VARIANT_COMBINE);
            }
            for (size_t h = 0; h < sizeof k_decode_head_dims / sizeof k_decode_head_dims[0]; h++)
                for (int causal = 0; causal <= 1; causal++)
                    for (int kv8 = 0; kv8 <= 1; kv8++)
                        set_decode(&o, ctx, dtype, k_decode_head_dims[h], causal, kv8 ? FAJIT_DTYPE_E4M3 : 0);
        }
        for (size_t h = 0; h < sizeof k_decode_head_dims / sizeof k_decode_head_dims[0]; h++)
            for (int causal = 0; causal <= 1; causal++) {
                set_forward(&o, ctx, FAJIT_DTYPE_E4M3, k_decode_head_dims[h], causal);
                set_decode_fp8(&o, ctx, k_decode_head_dims[h], causal);
            }
        fajit_context_destroy(ctx);
    }
    return o.n;
}
