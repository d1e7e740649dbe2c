/*
 * tensor_map.c - the TMA tensor maps of a warp-specialized launch (kernel_abi.h, fj_fwd_params_tma),
 * and a per-context cache of them.
 *
 * Each of Q, K, V (and O, for the TMA-store epilogue) gets a 4-D map, innermost first: (head_dim, seqlen,
 * heads, batch), the tensor's byte strides, a box of (swizzle bytes / 2 columns, block_m, block_n or 64
 * rows, 1, 1), the plan's swizzle, zero fill past the ends (and no writes past them). cuTensorMapEncodeTiled is a host call of a few microseconds; a steady stream of
 * forwards on the same tensors finds its maps in the cache instead (keyed by every input of the encode,
 * so a hit is the same map), which keeps the encode off the per-call path.
 * Paged K/V (the PAGED variant): K and V are pools [pages, page_size, Hkv, D] whose strides map the same way
 * (k_stride[0] the page step in the batch's place, [1] the head step, [2] the row step), so their maps are
 * (head_dim, page_size, Hkv, FJ_TMAP_PAGES) with a box of min(page_size, block_n) rows: the kernel loads one
 * box per page segment at (column, row in the page, head, block_table entry) (sm90_roles.c, producer_paged). The
 * pool's page count is not in the arguments; FJ_TMAP_PAGES says why its extent is safe.
 * Varlen (packed) Q / O (the VARLEN variant) and K / V (VARLEN_K) clip at each sequence's end (codegen/seqlen.h):
 * (head_dim, cap, H, FJ_TMAP_PAGES) with the token stride on dimensions 1 and 3 and the base cap rows before the
 * tensor (cap = seqlen_q / seqlen_k, the longest sequence), so element (r + cap - len, start + len) is packed row
 * start + r, in bounds exactly for r < len: loads zero-fill and stores skip the rows past the sequence's end, and no
 * row before the tensor or past the packed rows is ever touched. Only the host's arithmetic is needed (no length).
 */
#include "tensor_map.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen/kernel_abi.h"
#include "context.h"
#include "base/error.h"

static const char *const k_names[4] = {"q", "k", "v", "o"};
/* The extent of a paged pool's page dimension, which the arguments do not give: every page coordinate a kernel
 * passes is a block_table entry (int32), so with 2^31 - 1 no in-range entry is clipped. TMA's bounds check then
 * guards nothing in that dimension - as on the sm_80 path, which reads whatever pages the table names: the kernel
 * reads only the entries of pages that hold rows below the sequence's length (the caller's to make valid), and
 * a page named there is read whole (page_size rows, all inside the pool's page). */
#define FJ_TMAP_PAGES 0x7fffffffu
enum { TM_Q = 0, TM_K = 1, TM_V = 2, TM_O = 3 };

/* The encode inputs of one tensor; 0 when it can be described, else -1 with the reason in why. */
static int tmap_key(const fajit_attention_args *a, const fj_plan *p, int tensor, fj_tmap_key *key, char *why,
                    size_t size)
{
    const int64_t *s = tensor == TM_Q ? a->q_stride : tensor == TM_K ? a->k_stride : tensor == TM_V ? a->v_stride
                                                                                           : a->o_stride;
    uint64_t ptr = tensor == TM_Q ? a->q : tensor == TM_K ? a->k : tensor == TM_V ? a->v : a->o;
    int kv = tensor == TM_K || tensor == TM_V, paged = kv && (p->variant & FJ_VARIANT_PAGED);
    int eb = p->fp8 && tensor != TM_O ? 1 : 2; /* bytes an element: e4m3 Q, K, V; O 16-bit */
    uint64_t extent[3] = {(uint64_t)(kv ? a->seqlen_k : a->seqlen_q), (uint64_t)(kv ? a->heads_kv : a->heads_q),
                          (uint64_t)a->batch};
    if (paged) extent[0] = (uint64_t)a->page_size, extent[2] = FJ_TMAP_PAGES; /* (D, rows of a page, Hkv, pages) */
    int packed = (p->variant & (kv ? FJ_VARIANT_VARLEN_K : FJ_VARIANT_VARLEN)) != 0;
    if (packed) { /* (D, cap, H, sequence coordinate): see the file comment */
        uint64_t back = extent[0] * (uint64_t)(eb * s[2]);
        extent[2] = FJ_TMAP_PAGES;
        if (s[2] <= 0 || ptr < back) {
            snprintf(why, size, "%s = 0x%" PRIx64 " is less than %" PRIu64 " rows x %" PRId64 " bytes: the packed map's "
                     "base would lie before address 0", k_names[tensor], ptr, extent[0], eb * s[2]);
            return -1;
        }
        ptr -= back;
    }
    memset(key, 0, sizeof *key);
    key->ptr = ptr;
    key->dims[0] = (uint64_t)a->head_dim;
    for (int i = 0; i < 3; i++) {
        key->dims[i + 1] = extent[i];
        int64_t bytes = eb * s[packed && i == 2 ? 2 : 2 - i];
        /* a dimension of extent 1 is never stepped over: any legal stride describes it */
        if (extent[i] == 1 && bytes == 0) bytes = 16;
        if (bytes <= 0 || bytes % 16 != 0 || bytes >= ((int64_t)1 << 40)) {
            snprintf(why, size, "%s's %s stride is %" PRId64 " bytes; TMA needs a multiple of 16 in (0, 2^40)",
                     k_names[tensor], i == 0 ? "sequence" : i == 1 ? "head" : paged ? "page" : "batch", bytes);
            return -1;
        }
        key->strides[i] = (uint64_t)bytes;
    }
    if (ptr % 16 != 0) {
        snprintf(why, size, "%s = 0x%" PRIx64 " is not 16-byte aligned, which TMA needs", k_names[tensor], ptr);
        return -1;
    }
    key->box[0] = (uint32_t)(tensor == TM_O ? p->o_box_cols : p->tma_box_cols);
    key->box[1] = (uint32_t)(tensor == TM_Q ? p->cfg.block_m : kv ? p->cfg.block_n : 64);
    if (paged && a->page_size < p->cfg.block_n) key->box[1] = (uint32_t)a->page_size; /* one box per page */
    key->box[2] = key->box[3] = 1;
    if (tensor == TM_Q && (p->variant & FJ_VARIANT_PACK)) { /* decode.c: group x seqlen_q <= block_m */
        key->box[1] = (uint32_t)a->seqlen_q;
        key->box[2] = (uint32_t)(a->heads_q / a->heads_kv);
    }
    fajit_dtype dt = tensor == TM_O ? fj_config_out_dtype(&p->cfg) : a->dtype;
    key->dtype = dt == FAJIT_DTYPE_E4M3   ? FJ_CU_TENSOR_MAP_DATA_TYPE_UINT8
                 : dt == FAJIT_DTYPE_BF16 ? FJ_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                          : FJ_CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    key->swizzle = p->cfg.swizzle == 128 ? FJ_CU_TENSOR_MAP_SWIZZLE_128B
                   : p->cfg.swizzle == 64 ? FJ_CU_TENSOR_MAP_SWIZZLE_64B
                                          : FJ_CU_TENSOR_MAP_SWIZZLE_32B;
    return 0;
}

static int tmap_encode(const fj_cuda_api *cu, const fj_tmap_key *key, uint8_t map[FJ_TMAP_BYTES], int tensor, char *why,
                       size_t size)
{
    const uint32_t unit[4] = {1, 1, 1, 1};
    _Alignas(64) uint8_t tmp[FJ_TMAP_BYTES];
    fj_CUresult rc = cu->cuTensorMapEncodeTiled(tmp, key->dtype, 4, (void *)(uintptr_t)key->ptr, key->dims,
                                                key->strides, key->box, unit, FJ_CU_TENSOR_MAP_INTERLEAVE_NONE, key->swizzle,
                                                FJ_CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                FJ_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (rc != FJ_CUDA_SUCCESS) {
        const char *name = NULL;
        if (cu->cuGetErrorName(rc, &name) != FJ_CUDA_SUCCESS) name = NULL;
        snprintf(why, size, "cuTensorMapEncodeTiled(%s: dims %" PRIu64 "x%" PRIu64 "x%" PRIu64 "x%" PRIu64
                            ", strides %" PRIu64 "/%" PRIu64 "/%" PRIu64 " B) = %s (%d)",
                 k_names[tensor], key->dims[0], key->dims[1], key->dims[2], key->dims[3], key->strides[0],
                 key->strides[1], key->strides[2], name ? name : "?", rc);
        return -1;
    }
    memcpy(map, tmp, FJ_TMAP_BYTES);
    return 0;
}

/* Look a key up in the context's cache (lock held): the map, or NULL. */
static const uint8_t *cache_find(fj_tmap_cache *c, const fj_tmap_key *key)
{
    for (int i = 0; i < c->n; i++)
        if (memcmp(&c->entries[i].key, key, sizeof *key) == 0) return c->entries[i].map;
    return NULL;
}

static void cache_put(fj_tmap_cache *c, const fj_tmap_key *key, const uint8_t map[FJ_TMAP_BYTES])
{
    int slot = c->n < FJ_TMAP_CACHE_SLOTS ? c->n++ : c->next++ % FJ_TMAP_CACHE_SLOTS; /* oldest first */
    c->entries[slot].key = *key;
    memcpy(c->entries[slot].map, map, FJ_TMAP_BYTES);
}

int fj_tensor_maps(fajit_context *ctx, const fj_plan *p, const fajit_attention_args *a, fj_fwd_params_tma *params,
                   char *why, size_t size)
{
    uint8_t *dst[4] = {params->tmap_q, params->tmap_k, params->tmap_v, params->tmap_o};
    int n = p->o_stage ? 4 : 3; /* O's map only for the TMA-store epilogue */
    if (!ctx->cu->cuTensorMapEncodeTiled) {
        snprintf(why, size, "the driver has no cuTensorMapEncodeTiled (it predates CUDA 12.0)");
        return -1;
    }
    for (int t = 0; t < n; t++) {
        fj_tmap_key key;
        if (tmap_key(a, p, t, &key, why, size) != 0) return -1;
        pthread_mutex_lock(&ctx->lock);
        const uint8_t *hit = cache_find(&ctx->tmaps, &key);
        if (hit) memcpy(dst[t], hit, FJ_TMAP_BYTES);
        pthread_mutex_unlock(&ctx->lock);
        if (hit) continue;
        /* the driver encodes for the current context (else CUDA_ERROR_INVALID_CONTEXT) */
        if (fj_context_push(ctx) != FAJIT_OK) {
            snprintf(why, size, "%s", fajit_errmsg());
            return -1;
        }
        int bad = tmap_encode(ctx->cu, &key, dst[t], t, why, size);
        fj_context_pop(ctx);
        if (bad) return -1;
        pthread_mutex_lock(&ctx->lock);
        cache_put(&ctx->tmaps, &key, dst[t]);
        pthread_mutex_unlock(&ctx->lock);
    }
    return 0;
}
