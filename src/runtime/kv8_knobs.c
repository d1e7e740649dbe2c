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
    out->direct = -1; /* kv8direct where its plan takes the call's head_dim and tile (decode.c) */
    if (unset(direct))
        ;
    else if (strcmp(direct, "0") == 0)
        out->direct = 0;
    else if (strcmp(direct, "1") == 0)
        out->direct = 1, out->variant |= FJ_VARIANT_KV8_DIRECT;
    else
        return BAD("FAJIT_KV8_DIRECT = '%s': must be 0 (the widening kernel: K / V widened into a 16-bit tile), 1 "
                   "(kv8direct on every FP8 K/V call; refused for head dims other than 64, 128, 256), or unset (the "
                   "default: kv8direct where its plan takes the call)", direct);
    if (!unset(tile))
        return BAD("FAJIT_KV8_TILE = '%s': the knob is gone - the FP8 K/V decode tile by the rows a CTA holds is the "
                   "heuristic's own (fj_config_kv8_decode_tile); unset it, and give a config (fagen --br/--warps/"
                   "--col-warps) to run another tile", tile);
    return FAJIT_OK;
}
