/*
 * kv8_knobs.c - the FP8 K/V cache decode knobs (kv8_knobs.h): parsing with their rules, and the tile by rows.
 */
#include "kv8_knobs.h"

#include <string.h>

#include "codegen/codegen.h"
#include "base/error.h"

#define BAD(...) fj_fail(FAJIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* 1 when s is unset (NULL) or empty: the default. */
static int unset(const char *s) { return !s || !*s; }

fajit_status fj_kv8_knobs_parse(const char *widen, const char *direct, const char *tile, fj_kv8_knobs *out)
{
    memset(out, 0, sizeof *out);
    if (unset(widen) || strcmp(widen, "cvt") == 0)
        ;
    else if (strcmp(widen, "int") == 0)
        out->variant |= FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V;
    else if (strcmp(widen, "intk") == 0)
        out->variant |= FJ_VARIANT_KV8_INT_K;
    else if (strcmp(widen, "intv") == 0)
        out->variant |= FJ_VARIANT_KV8_INT_V;
    else
        return BAD("FAJIT_KV8_WIDEN = '%s': must be cvt (the default), int (K and V widened by integer ops), intk "
                   "(K only) or intv (V only), or unset", widen);
    if (unset(direct) || strcmp(direct, "0") == 0)
        ;
    else if (strcmp(direct, "1") == 0)
        out->variant |= FJ_VARIANT_KV8_DIRECT;
    else
        return BAD("FAJIT_KV8_DIRECT = '%s': must be 1 (the MMA fragments straight from the e4m3 tiles) or 0, or unset",
                   direct);
    if (unset(tile) || strcmp(tile, "heuristic") == 0)
        ;
    else if (strcmp(tile, "rows") == 0)
        out->tile_rows = 1;
    else
        return BAD("FAJIT_KV8_TILE = '%s': must be rows (the decode tile by the rows a CTA holds) or heuristic (the "
                   "default), or unset", tile);
    return FAJIT_OK;
}

int fj_kv8_rows_tile(long long rows, fajit_config *cfg)
{
    if (rows < 1 || rows > 32) return 0;
    cfg->block_m = rows <= 16 ? 16 : 32;
    cfg->warps = rows <= 16 ? 2 : 4;
    cfg->col_warps = 2;
    cfg->block_n = 64;
    cfg->stages = 4;
    cfg->swizzle = 0;
    return 1;
}
