/*
 * tensor_map.h - TMA tensor maps for warp-specialized launches (tensor_map.c), cached per context.
 */
#ifndef FJ_TENSOR_MAP_H
#define FJ_TENSOR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "fajit.h"

#define FJ_TMAP_CACHE_SLOTS 48

/* Everything cuTensorMapEncodeTiled is given for one tensor (so equal keys give equal maps). */
typedef struct fj_tmap_key {
    uint64_t ptr;
    uint64_t dims[4];    /* head_dim, seqlen, heads, batch */
    uint64_t strides[3]; /* bytes: sequence, head, batch */
    uint32_t box[4];     /* columns, rows, heads, batch (heads > 1: GQA-packed Q, rows = seqlen_q) */
    int dtype, swizzle;  /* CUtensorMapDataType, CUtensorMapSwizzle */
} fj_tmap_key;

typedef struct fj_tmap_cache {
    int n, next;
    struct {
        fj_tmap_key key;
        _Alignas(64) uint8_t map[128];
    } entries[FJ_TMAP_CACHE_SLOTS];
} fj_tmap_cache;

struct fj_plan;
struct fj_fwd_params_tma;

/* Fill params->tmap_q/k/v (and O's for a TMA-store epilogue) for validated args and a warp-specialized plan
 * (a GQA-packing variant: Q's box is (columns, seqlen_q, heads_q / heads_kv, 1), which fills the packed rows
 * h x seqlen_q + n of one row block), from the context's cache or
 * by encoding them. 0 on success; -1 when TMA cannot describe a tensor (a stride or alignment it does
 * not take, a driver without tensor maps), with the reason in why: the caller then runs a path that
 * does not use TMA. Thread-safe (the context's lock guards the cache). */
int fj_tensor_maps(fajit_context *ctx, const struct fj_plan *p, const fajit_attention_args *a,
                   struct fj_fwd_params_tma *params, char *why, size_t size);

#endif
