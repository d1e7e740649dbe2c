/*
 * kv8_knobs.c - the FP8 K/V cache decode knobs (kv8_knobs.h): parsing with their rules, and the tile by rows.
 */
#include "kv8_knobs.h"

#include <string.h>

#include "base/env_word.h"
#include "base/error.h"
#include "codegen/codegen.h"

static const fj_env_word k_widen[] = {{"cvt", 0, "the default"},
                                      {"int", FJ_VARIANT_KV8_INT_K | FJ_VARIANT_KV8_INT_V, "K and V widened by integer ops"},
                                      {"intk", FJ_VARIANT_KV8_INT_K, "K only"},
                                      {"intv", FJ_VARIANT_KV8_INT_V, "V only"},
                                      {NULL, 0, NULL}};
static const fj_env_word k_direct[] = {{"0", 0, "the widening kernel: K / V widened into a 16-bit tile"},
                                       {"1", 1, "kv8direct on every FP8 K/V call; refused for head dims other than 64, "
                                                "128, 256"},
                                       {NULL, 0, NULL}};

fajit_status fj_kv8_knobs_parse(const char *widen, const char *direct, const char *tile, fj_kv8_knobs *out)
{
    int bits = 0;
    memset(out, 0, sizeof *out);
    fajit_status st = fj_env_word_parse("FAJIT_KV8_WIDEN", widen, k_widen, 0, "cvt", &bits);
    if (st == FAJIT_OK) /* unset: kv8direct where its plan takes the call's head_dim and tile (decode.c) */
        st = fj_env_word_parse("FAJIT_KV8_DIRECT", direct, k_direct, -1, "kv8direct where its plan takes the call",
                               &out->direct);
    if (st != FAJIT_OK) return st;
    out->variant = (unsigned)bits | (out->direct == 1 ? (unsigned)FJ_VARIANT_KV8_DIRECT : 0u);
    if (tile && *tile)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "FAJIT_KV8_TILE = '%s': the knob is gone - the FP8 K/V decode tile "
                                                   "by the rows a CTA holds is the heuristic's own "
                                                   "(fj_config_kv8_decode_tile); unset it, and give a config (fagen "
                                                   "--br/--warps/--col-warps) to run another tile",
                       tile);
    return FAJIT_OK;
}
