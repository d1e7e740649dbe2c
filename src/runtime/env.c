/*
 * env.c - the environment switches of a context (env.h): one table of accepted words a variable, parsed by
 * base/env_word.c, read once when the context is made.
 */
#include "env.h"

#include <stdlib.h>

#include "base/env_word.h"
#include "codegen/fp8_ws.h"
#include "codegen/sm90.h"
#include "compile.h"
#include "kv8_knobs.h"
#include "sm100a_launch.h"

#define END {NULL, 0, NULL}

static const fj_env_word k_pack_gqa[] = {{"1", 1, "decode calls pack GQA query heads"},
                                            {"0", 0, "they do not"}, END};
static const fj_env_word k_gather[] = {{"0", 0, "paged K/V takes a block_n dividing the page size"},
                                       {"1", 2, "gathers every paged tile from 16-row page segments"}, END};
static const fj_env_word k_page_ahead[] = {{"1", 1, "read each tile's pages a tile ahead"},
                                           {"0", 0, "read them at the tile's copy"}, END};
static const fj_env_word k_page_div[] = {{"0", 0, "power-of-two pages found by shift"},
                                         {"1", 1, "pages found by division always"}, END};
static const fj_env_word k_decode_sm90[] = {{"1", 1, "the sm_90a kernel's decode variants whenever they take the call"},
                                            {"0", 0, "the sm_80 kernel's"}, END};
static const fj_env_word k_varlen_sched[] = {{"lpt", 1, "the dynamic longest-first schedule"},
                                             {"static", 0, "the static round-robin"}, END};
static const fj_env_word k_prebuilt[] = {{"1", 1, "ask the prebuilt kernels"}, {"0", 0, "skip them"}, END};
static const fj_env_word k_pdl[] = {{"1", 1, "split-KV's combine kernel starts while the split kernel runs"},
                                    {"0", 0, "it starts after the split kernel ends"}, END};
static const fj_env_word k_jit[] = {{"async", 0, "a stand-in runs while the chosen config compiles"},
                                    {"sync", 1, "compile the chosen config before the call"}, END};

/* One switch: name's value against its table. */
static fajit_status word(const char *name, const fj_env_word *words, int unset_value, const char *unset_means, int *out)
{
    return fj_env_word_parse(name, getenv(name), words, unset_value, unset_means, out);
}

/* The knobs read elsewhere (planning, each compile): checked here, so a bad one fails the context's creation. */
static fajit_status check_read_later(void)
{
    unsigned bits;
    int order;
    fj_ptxas_opts po;
    fajit_status st = fj_sm90_lean_parse(getenv("FAJIT_SM90_LEAN"), &bits);
    if (st == FAJIT_OK) st = fj_kv_order_parse(getenv("FAJIT_KV_ORDER"), &order);
    if (st == FAJIT_OK) st = fj_causal_sched_parse(getenv("FAJIT_CAUSAL_SCHED"), &order);
    if (st == FAJIT_OK) st = fj_fp8_knobs_parse(getenv("FAJIT_FP8_KNOBS"), 128, 0, &bits);
    if (st == FAJIT_OK) st = fj_ptxas_opts_read(&po);
    return st;
}

fajit_status fj_env_read(fj_env *e)
{
    fj_kv8_knobs kv8;
    fajit_status st = fj_env_int_parse("FAJIT_PERSISTENT_CTAS", getenv("FAJIT_PERSISTENT_CTAS"), 1, 1 << 20, 0,
                                       "one CTA per SM", &e->persistent_ctas);
    if (st == FAJIT_OK) st = word("FAJIT_PACK_GQA", k_pack_gqa, 1, "1", &e->pack_gqa);
    if (st == FAJIT_OK)
        st = word("FAJIT_DECODE_GATHER", k_gather, 1, "gather only where the pages are smaller than the tile",
                  &e->paged_gather);
    if (st == FAJIT_OK) st = word("FAJIT_DECODE_PAGE_AHEAD", k_page_ahead, 1, "1", &e->page_ahead);
    if (st == FAJIT_OK) st = word("FAJIT_DECODE_PAGE_DIV", k_page_div, 0, "0", &e->page_div);
    if (st == FAJIT_OK)
        st = word("FAJIT_DECODE_SM90", k_decode_sm90, -1, "a rule picks per call, fj_decode_auto_sm90",
                  &e->decode_sm90);
    if (st == FAJIT_OK) st = word("FAJIT_VARLEN_SCHED", k_varlen_sched, 1, "lpt", &e->varlen_lpt);
    if (st == FAJIT_OK) st = word("FAJIT_PREBUILT", k_prebuilt, 1, "1", &e->prebuilt);
    if (st == FAJIT_OK) st = word("FAJIT_JIT", k_jit, 0, "async", &e->jit_sync);
    if (st == FAJIT_OK) st = word("FAJIT_PDL", k_pdl, 1, "1", &e->pdl);
    if (st == FAJIT_OK) st = fj_sm100a_launch_parse(getenv("FAJIT_SM100A_LAUNCH"), &e->sm100a_launch);
    if (st == FAJIT_OK)
        st = fj_kv8_knobs_parse(getenv("FAJIT_KV8_WIDEN"), getenv("FAJIT_KV8_DIRECT"), getenv("FAJIT_KV8_TILE"), &kv8);
    if (st == FAJIT_OK) e->kv8_widen = kv8.variant, e->kv8_direct = kv8.direct;
    return st == FAJIT_OK ? check_read_later() : st;
}
