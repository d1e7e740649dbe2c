/*
 * cmd_check.c - fagen check: run forward kernels on the GPU over a grid of configs x shapes and compare
 * every output element with a reference (the harness of src/runtime/check.h).
 *
 *   fagen check [--quick] [--dtype f16|bf16] [--headdim D] [--causal] [--br N --bc N --stages N
 *               --swizzle S --warps N --arch A] [--device N] [--seed S]
 *               [--batch B --heads-q H --heads-kv H --seqlen-q N --seqlen-k N] [--splits S] [--seqlens] [--workspace]
 *               [--page-size N] [--varlen L1,L2,...]
 *
 * Grid: dtype {f16, bf16} x D {64, 96, 128, 192, 256} x {non-causal, causal} x configs (the heuristic
 * and a list of tile shapes, or the one config given by tile flags) x shapes (N = 1, 17, 1000,
 * Nq < Nk, Nq > Nk, GQA 8/2, BNHD with padded rows, B=2 H=8 N=2048 with the GPU reference, and scores
 * growing along the keys with spikes, FJ_FILL_GROWING, which takes every rescale path).
 * Configs that fajit_config_check rejects or the device cannot fit are skipped and counted. One line
 * per run, then a summary with the worst errors. Exit 0 all passed, 1 a failure (or no GPU), 2 bad flags.
 * Decode: a shape flag replaces the shapes by one (unset ones: B 5, Hq 8, Hkv 2, Nq 1, Nk 4096); --splits,
 * --seqlens (per-sequence KV lengths: 1, a multiple of 64, Nk, random, 0 by sequence; from the 10th also past
 * Nk and negative) and --workspace (the caller's workspace) apply to every shape; each line then names the
 * kernel(s) the forward ran.
 * FP8 K/V cache: --kv-dtype e4m3 gives every shape K and V in e4m3 with random power-of-two descales per (batch, KV
 * head) (fj_check_problem.kv8 = 2), the references on the dequantized values; under $FAJIT_KV8_DIRECT=1 (kv8direct
 * forced) head dims other than 64 / 128 / 256 are skipped with a line saying why (the library refuses them there).
 * Varlen: --varlen L1,L2,... runs one packed batch of those sequence lengths (cu_seqlens_q = cu_seqlens_k, 0 and 1
 * welcome) instead of the shapes, heads from --heads-q / --heads-kv (8 / 2); with --page-size the keys are paged
 * (chunked prefill), with --seqlens each sequence uses a random count of its keys (seqused_k); the variant flags
 * (--window, --softcap, --sinks, --alibi, --chunk) apply to the varlen batch as to the shapes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "runtime/check.h"
#include "codegen/codegen.h"
#include "codegen/kv8_frag.h"
#include "runtime/context.h"

/* ---- the grid --------------------------------------------------------------------------------- */

typedef struct check_shape {
    const char *name;
    int b, hq, hkv, nq, nk;
    fj_check_layout layout;
    int row_pad;
    int quick;   /* part of --quick */
    int big;     /* run only for the first two configs of each (dtype, D, causal) */
    int growing; /* K scaled up along the keys, with spikes (FJ_FILL_GROWING): every rescale path */
} check_shape;

static const check_shape k_shapes[] = {
    /* name          B  Hq Hkv    Nq    Nk  layout          pad quick big growing */
    {"N=1", 1, 2, 2, 1, 1, FJ_LAYOUT_BHND, 0, 1, 0, 0},
    {"N=17", 2, 3, 3, 17, 17, FJ_LAYOUT_BHND, 0, 1, 0, 0},
    {"N=1000", 1, 2, 2, 1000, 1000, FJ_LAYOUT_BHND, 0, 0, 0, 0},
    {"Nq<Nk", 1, 2, 2, 100, 1000, FJ_LAYOUT_BHND, 0, 1, 0, 0},
    {"Nq>Nk", 1, 2, 2, 1000, 100, FJ_LAYOUT_BHND, 0, 1, 0, 0},
    {"GQA 8/2", 1, 8, 2, 257, 257, FJ_LAYOUT_BHND, 0, 1, 0, 0},
    {"BNHD pad8", 2, 4, 2, 300, 200, FJ_LAYOUT_BNHD, 8, 0, 0, 0},
    {"large", 2, 8, 8, 2048, 2048, FJ_LAYOUT_BHND, 0, 0, 1, 0},
    {"growing", 1, 2, 2, 700, 1300, FJ_LAYOUT_BHND, 0, 1, 0, 1},
};
#define N_SHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))

/* Tile shapes tried besides the heuristic (dtype, head_dim and causal are the group's). A config that
 * breaks a rule for a head dim (a swizzle wider than its row allows, a register budget) or does not
 * fit the device (sm_90a configs on another GPU) is skipped and counted. */
#define T80 FJ_CHECK_T80
#define T90 FJ_CHECK_T90
static const fajit_config k_tiles[] = {
    T80(64, 64, 2, 128, 4, 1),   T80(128, 64, 2, 128, 4, 1), T80(128, 32, 1, 64, 8, 1),  T80(64, 32, 3, 32, 4, 1),
    T80(128, 128, 2, 128, 8, 1), T80(64, 128, 2, FAJIT_SWIZZLE_NONE, 4, 1), T80(128, 64, 3, 128, 8, 1),
    T80(128, 64, 1, 64, 8, 2),   T80(64, 32, 3, 32, 4, 2),   T80(128, 64, 2, 64, 8, 2),
    T90(128, 128, 2, 128, -1, -1), T90(128, 128, 2, 128, 1, -1), T90(128, 80, 2, 128, 1, 1), T90(64, 64, 2, 64, -1, -1),
    T90(192, 64, 3, 64, 1, 1),   T90(128, 48, 1, 32, 1, 1),  T90(64, 112, 4, 128, 1, -1), T90(128, 96, 2, 64, 1, 1),
};
#define N_TILES ((int)(sizeof k_tiles / sizeof k_tiles[0]))

static const int k_dims[] = {64, 96, 128, 192, 256};
static const int k_quick_dims[] = {64, 128, 256};

typedef struct check_cli {
    fajit_config user; /* config flags; zeros = not given */
    int quick, device, help;
    uint64_t seed;     /* 0 = fresh seeds */
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k; /* one shape instead of the list (0 = not given) */
    int splits;        /* args->num_splits, -1 = not given (0: the heuristic) */
    int seqlens, workspace;
    int page_size;     /* paged K/V (0 = contiguous) */
    int varlen_n;      /* --varlen: a packed batch of these sequence lengths instead of the shapes (0 = none) */
    int varlen[FAGEN_VARLEN_MAX];
} check_cli;

/* ---- results ---------------------------------------------------------------------------------- */

typedef struct check_worst {
    double value;
    char where[192];
} check_worst;

typedef struct check_totals {
    int runs, passed, failed, errors, skipped_configs;
    check_worst rel, row, lse;
    char first_skip[256];
    char first_failure[400];
} check_totals;

static void worst_update(check_worst *w, double v, const char *cfg, const char *shape)
{
    if (v > w->value || (v != v && w->value == w->value)) {
        w->value = v;
        snprintf(w->where, sizeof w->where, "%.100s | %.88s", cfg, shape); /* fits 192 */
    }
}

/* ---- flags ------------------------------------------------------------------------------------ */

static void check_usage(FILE *f)
{
    fputs("usage: fagen check [--quick] [config flags] [--device N] [--seed S]\n"
          "Run forward kernels on the GPU over configs x shapes; compare every element of O and LSE with a\n"
          "reference (CPU float64 for small problems, else an fp32 GPU kernel compared in double).\n\n"
          "  --quick                        D 64/128/256 (or --headdim's), the heuristic and one tile shape per path, 6 shapes\n"
          "  --device N                     CUDA device ordinal (default 0)\n"
          "  --seed S                       base seed (default: fresh random inputs on every run)\n"
          "  --batch B --heads-q H --heads-kv H --seqlen-q N --seqlen-k N\n"
          "                                 one shape instead of the list (unset: B 5, Hq 8, Hkv 2, Nq 1, Nk 4096)\n"
          "  --splits S                     split-KV: 0 the heuristic, 1 none, 2..1024 forced (every shape)\n"
          "  --seqlens                      per-sequence KV lengths by sequence: 1, a multiple of 64, Nk, random, 0\n"
          "                                 (from the 10th sequence also past Nk and negative: the kernel clamps them)\n"
          "  --workspace                    pass the caller's workspace (fajit_attention_workspace_size bytes)\n"
          "  --page-size N                  paged K/V: pools of N-row pages (a multiple of 16), shuffled, via a block table\n"
          "  --varlen L1,L2,...             a varlen batch (cu_seqlens) of these sequence lengths instead of the shapes:\n"
          "                                 packed keys, or paged with --page-size; --seqlens: seqused_k; the variant\n"
          "                                 flags (--window --softcap --sinks --alibi --chunk) apply to it too\n\n"
          "config flags restrict the grid: --dtype and --headdim pick one, --causal runs causal only, --arch\n"
          "keeps that path's configs; any tile flag (--br --bc --stages --swizzle --warps --col-warps --overlap\n"
          "--pingpong) replaces the list of configs by that one (its other fields from the heuristic):\n",
          f);
    fagen_print_config_help(f);
    fputs("\npass: rel L2 <= 1e-2 (bf16) / 2e-3 (f16), worst row <= 4x that, |LSE err| <= 1e-3, no NaN,\n"
          "no writes outside O/LSE. exit: 0 all passed, 1 a failure or no GPU, 2 bad flags\n"
          "example: fagen check --quick --dtype bf16\n",
          f);
}

static int check_parse_u64(const char *flag, const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 0);
    if (!text[0] || *end || text[0] == '-') {
        fprintf(stderr, "fagen: %s %s: must be a non-negative integer\n", flag, text);
        return FAGEN_ARG_ERROR;
    }
    *out = (uint64_t)v;
    return FAGEN_ARG_TAKEN;
}

/* The decode shape and split flags. */
static int check_int_flag(int argc, char **argv, int *i, check_cli *o)
{
    static const fagen_int_flag k_ints[] = {
        {"--batch", offsetof(check_cli, batch), 1, 65535},
        {"--heads-q", offsetof(check_cli, heads_q), 1, 65535},
        {"--heads-kv", offsetof(check_cli, heads_kv), 1, 65535},
        {"--seqlen-q", offsetof(check_cli, seqlen_q), 1, 1 << 24},
        {"--seqlen-k", offsetof(check_cli, seqlen_k), 1, 1 << 24},
        {"--splits", offsetof(check_cli, splits), 0, FAJIT_MAX_SPLITS},
        {"--page-size", offsetof(check_cli, page_size), 16, 1 << 20},
    };
    return fagen_parse_int_flag(argc, argv, i, k_ints, sizeof k_ints / sizeof k_ints[0], o);
}

/* The flags into *o; --help prints the usage (then o->help is set and FAGEN_EXIT_OK returned). */
static int check_parse(int argc, char **argv, check_cli *o)
{
    memset(o, 0, sizeof *o);
    o->splits = -1;
    fagen_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *w = argv[i], *val;
        int r = FAGEN_ARG_TAKEN;
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            o->help = 1;
            check_usage(stdout);
            return FAGEN_EXIT_OK;
        }
        if (fagen_flag_once(&seen, w) != FAGEN_ARG_TAKEN) return FAGEN_EXIT_USAGE;
        if (strcmp(w, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(w, "--seqlens") == 0) {
            o->seqlens = 1;
        } else if (strcmp(w, "--workspace") == 0) {
            o->workspace = 1;
        } else if ((r = check_int_flag(argc, argv, &i, o)) != FAGEN_ARG_NOT_MINE) {
            /* taken or an error, below */
        } else if (fagen_flag_is(w, "--varlen")) {
            val = fagen_flag_value(argc, argv, &i, flag, sizeof flag);
            r = val ? fagen_parse_int_list(flag, val, 0, 1 << 24, o->varlen, FAGEN_VARLEN_MAX, &o->varlen_n)
                    : FAGEN_ARG_ERROR;
        } else if (fagen_flag_is(w, "--device")) {
            val = fagen_flag_value(argc, argv, &i, flag, sizeof flag);
            r = val ? fagen_parse_int(flag, val, 0, 1023, &o->device) : FAGEN_ARG_ERROR;
        } else if (fagen_flag_is(w, "--seed")) {
            val = fagen_flag_value(argc, argv, &i, flag, sizeof flag);
            r = val ? check_parse_u64(flag, val, &o->seed) : FAGEN_ARG_ERROR;
        } else {
            r = fagen_parse_config_flag(argc, argv, &i, &o->user);
            if (r == FAGEN_ARG_NOT_MINE) {
                fprintf(stderr, "fagen: %s: unknown flag for 'check' (see fagen check --help)\n", w);
                return FAGEN_EXIT_USAGE;
            }
        }
        if (r == FAGEN_ARG_ERROR) return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

/* ---- one (dtype, D, causal): its configs ------------------------------------------------------ */

typedef struct check_cfg {
    int heuristic;       /* 1: pass NULL to the forward */
    fajit_config cfg;
    char text[128];
} check_cfg;

/* 1 if cfg passes the rules and fits the device; else counts a skip (first reason kept). */
static int config_usable(fajit_context *ctx, const fajit_config *cfg, check_totals *t)
{
    fj_plan plan;
    const fj_arch_info *target;
    if (fajit_config_check(cfg) == FAJIT_OK && fj_plan_build(cfg, &plan) == FAJIT_OK &&
        fj_context_target(ctx, &plan, &target) == FAJIT_OK)
        return 1;
    if (!t->skipped_configs++) snprintf(t->first_skip, sizeof t->first_skip, "%s", fajit_errmsg());
    return 0;
}

/* The configs to run for (dtype, D, causal); returns how many were written to out. */
static int configs_for(fajit_context *ctx, const check_cli *o, fajit_dtype dt, int dim, int causal, check_cfg *out,
                       check_totals *t)
{
    int n = 0, seen_arch[2] = {0, 0};
    fajit_config tiles_only = o->user;
    tiles_only.arch = FAJIT_ARCH_AUTO; /* --arch alone filters the list below */
    if (fagen_config_has_tiles(&tiles_only)) {
        check_cfg c = {0, o->user, ""};
        c.cfg.dtype = dt, c.cfg.head_dim = dim, c.cfg.causal = causal;
        if (fajit_config_fill(ctx, NULL, &c.cfg) != FAJIT_OK) {
            if (!t->skipped_configs++) snprintf(t->first_skip, sizeof t->first_skip, "%s", fajit_errmsg());
            return 0;
        }
        if (!config_usable(ctx, &c.cfg, t)) return 0;
        fajit_config_format(&c.cfg, c.text, sizeof c.text);
        out[n++] = c;
        return n;
    }
    out[n].heuristic = 1;
    snprintf(out[n].text, sizeof out[n].text, "heuristic %s d%d%s", dt == FAJIT_DTYPE_F16 ? "f16" : "bf16", dim,
             causal ? " causal" : "");
    n++;
    for (int i = 0; i < N_TILES; i++) {
        check_cfg c = {0, k_tiles[i], ""};
        c.cfg.dtype = dt, c.cfg.head_dim = dim, c.cfg.causal = causal;
        c.cfg.mods = o->user.mods; /* the variant flags apply to every tile of the list */
        c.cfg.kv_dtype = o->user.kv_dtype; /* --kv-dtype e4m3: an FP8 K/V cache for every tile */
        if (o->user.arch && c.cfg.arch != o->user.arch) continue;
        if (o->quick && seen_arch[c.cfg.arch == FAJIT_ARCH_SM90A]++) continue; /* quick: the first of each path */
        if (!config_usable(ctx, &c.cfg, t)) continue;
        fajit_config_format(&c.cfg, c.text, sizeof c.text);
        out[n++] = c;
    }
    return n;
}

/* ---- running ---------------------------------------------------------------------------------- */

static uint64_t seed_for(uint64_t base, int run)
{
    uint64_t z = base + 0x9e3779b97f4a7c15ull * (uint64_t)(run + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

static void shape_text(const check_shape *s, char *buf, size_t size)
{
    snprintf(buf, size, "%-11s B%d H%d/%d N%d/%d%s", s->name, s->b, s->hq, s->hkv, s->nq, s->nk,
             s->layout == FJ_LAYOUT_BNHD ? " bnhd" : "");
}

/* Any decode flag given: the lines name what ran. */
static int check_decode_flags(const check_cli *o)
{
    return o->splits >= 0 || o->seqlens || o->workspace || o->seqlen_q || o->page_size || o->varlen_n;
}

/* One run's line and totals (an error, PASS or FAIL; with show_kernel the kernel that ran); 0 to go on, -1 when
 * the CUDA context is no longer usable. */
static int report_run(check_totals *t, const check_cfg *c, const char *shape, fajit_status st,
                      const fj_check_result *r, int show_kernel)
{
    if (st != FAJIT_OK) {
        t->errors++;
        if (!t->first_failure[0])
            snprintf(t->first_failure, sizeof t->first_failure, "%s | %s: %s", c->text, shape, fajit_errmsg());
        printf("%-46s %-30s ERROR %s: %s\n", c->text, shape, fajit_status_name(st), fajit_errmsg());
        fflush(stdout);
        return st == FAJIT_ERR_CUDA ? -1 : 0;
    }
    printf("%-46s %-30s %s %9.2e %9.2e %9.2e %9.2e  %s", c->text, shape, r->reference == FJ_REF_CPU ? "cpu" : "gpu",
           r->rel_l2, r->worst_row_rel, r->max_abs, r->lse_max_abs, r->pass ? "PASS" : "FAIL");
    if (!r->pass) printf(" (%s; seed %" PRIu64 ")", r->why, r->seed);
    if (show_kernel) printf("  ran: %s", r->kernel);
    printf("\n");
    fflush(stdout);
    if (r->pass) t->passed++;
    else t->failed++;
    if (!r->pass && !t->first_failure[0])
        snprintf(t->first_failure, sizeof t->first_failure, "%s | %s: %s (seed %" PRIu64 ")", c->text, shape, r->why,
                 r->seed);
    worst_update(&t->rel, r->rel_l2 / r->tol_rel_l2, c->text, shape);
    worst_update(&t->row, r->worst_row_rel / r->tol_row_rel, c->text, shape);
    worst_update(&t->lse, r->lse_max_abs / r->tol_lse, c->text, shape);
    return 0;
}

/* The attention variants the config flags asked for (the config's mods, the heuristic's from the flags), with
 * their values, into *p. */
static void check_set_variants(const check_cli *o, const check_cfg *c, fj_check_problem *p)
{
    const fagen_mod_values *mv = fagen_mods();
    int mods = c->heuristic ? o->user.mods : c->cfg.mods;
    p->window = mods & FAJIT_MOD_WINDOW ? 1 : 0;
    p->window_left = p->window ? mv->window_left : 0, p->window_right = p->window ? mv->window_right : 0;
    p->softcap = mods & FAJIT_MOD_SOFTCAP ? mv->softcap : 0.0f;
    p->attention_chunk = mods & FAJIT_MOD_CHUNK ? mv->chunk : 0;
    p->sinks = mods & FAJIT_MOD_SINKS ? 1 : 0;
    p->alibi = mods & FAJIT_MOD_ALIBI ? 1 : 0;
}

/* The config a run passes to the forward: the list's, or for the heuristic row NULL (the library picks the path) -
 * with --arch that path's heuristic config for the shape, filled here. */
static fajit_status check_config_for(fajit_context *ctx, const check_cli *o, const check_cfg *c,
                                     const fj_check_problem *p, const fajit_shape *sh, fajit_config *heur,
                                     const fajit_config **use)
{
    *use = c->heuristic ? NULL : &c->cfg;
    if (!c->heuristic || !o->user.arch) return FAJIT_OK;
    memset(heur, 0, sizeof *heur);
    heur->arch = o->user.arch, heur->dtype = p->dtype, heur->head_dim = p->head_dim, heur->causal = p->causal;
    heur->mods = o->user.mods, heur->kv_dtype = o->user.kv_dtype;
    *use = heur;
    return fajit_config_fill(ctx, sh, heur);
}

/* --varlen: the one packed batch of o's lengths with base's dtype, head_dim and causal and the variant flags' variants;
 * 0 to go on, -1 to stop. */
static int check_varlen(fajit_context *ctx, const check_cli *o, const check_cfg *c, const fj_check_problem *base,
                        check_totals *t)
{
    fj_check_problem p = *base;
    fj_check_result r;
    char shape[96];
    p.heads_q = o->heads_q ? o->heads_q : 8;
    p.heads_kv = o->heads_kv ? o->heads_kv : (p.heads_q % 2 ? p.heads_q : 2);
    p.page_size = o->page_size;
    p.seed = o->seed ? seed_for(o->seed, t->runs) : 0;
    check_set_variants(o, c, &p);
    fj_check_varlen vl = {o->varlen_n, o->varlen, NULL, !o->page_size, o->seqlens && !o->page_size, 0};
    snprintf(shape, sizeof shape, "varlen n%d H%d/%d%s", o->varlen_n, p.heads_q, p.heads_kv,
             o->page_size ? " paged" : "");
    t->runs++;
    int longest = 1;
    for (int b = 0; b < o->varlen_n; b++) longest = o->varlen[b] > longest ? o->varlen[b] : longest;
    fajit_config heur;
    const fajit_config *use = NULL;
    fajit_shape sh = {o->varlen_n, p.heads_q, p.heads_kv, longest, longest};
    fajit_status st = check_config_for(ctx, o, c, &p, &sh, &heur, &use);
    if (st == FAJIT_OK) st = fj_check_varlen_run(ctx, use, &p, &vl, NULL, &r);
    return report_run(t, c, shape, st, &r, 1);
}

/* The one shape of the shape flags, or NULL when none was given. */
static const check_shape *custom_shape(const check_cli *o, check_shape *s)
{
    if (!o->batch && !o->heads_q && !o->heads_kv && !o->seqlen_q && !o->seqlen_k) return NULL;
    memset(s, 0, sizeof *s);
    s->name = "flags";
    s->b = o->batch ? o->batch : 5;
    s->hq = o->heads_q ? o->heads_q : 8;
    s->hkv = o->heads_kv ? o->heads_kv : (s->hq % 2 ? s->hq : 2);
    s->nq = o->seqlen_q ? o->seqlen_q : 1;
    s->nk = o->seqlen_k ? o->seqlen_k : 4096;
    s->layout = FJ_LAYOUT_BHND;
    s->quick = 1;
    return s;
}

/* One run: returns 0 to go on, -1 when the CUDA context is no longer usable. */
static int check_one(fajit_context *ctx, const check_cli *o, const check_cfg *c, const check_shape *s,
                     const fj_check_problem *base, check_totals *t)
{
    fj_check_problem p = *base;
    fj_check_result r;
    char shape[96];
    p.batch = s->b, p.heads_q = s->hq, p.heads_kv = s->hkv, p.seqlen_q = s->nq, p.seqlen_k = s->nk;
    p.layout = s->layout, p.row_pad = s->row_pad;
    p.fill = s->growing ? FJ_FILL_GROWING : s->big ? FJ_FILL_UNIFORM : FJ_FILL_NORMAL;
    p.seed = o->seed ? seed_for(o->seed, t->runs) : 0;
    p.num_splits = o->splits > 0 ? o->splits : 0;
    p.seqlens = o->seqlens;
    p.own_workspace = o->workspace;
    p.page_size = o->page_size;
    check_set_variants(o, c, &p);
    shape_text(s, shape, sizeof shape);
    t->runs++;
    fajit_config heur;
    const fajit_config *use = NULL;
    fajit_shape sh = {p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k};
    fajit_status st = check_config_for(ctx, o, c, &p, &sh, &heur, &use);
    if (st == FAJIT_OK) st = fj_check_run(ctx, use, &p, NULL, &r);
    return report_run(t, c, shape, st, &r, check_decode_flags(o));
}

/* $FAJIT_KV8_DIRECT=1 forces kv8direct on every FP8 K/V call, which kv8_frag.c builds for head_dim 64, 128 and 256
 * only (the library refuses the others: FAJIT_ERR_UNSUPPORTED). Unset, those head dims run the widening kernel. So
 * under the knob the grid skips the other head dims with a line saying so (counted as skipped configs) instead of
 * failing every run of them with the refusal. 1 when group (dim) is skipped. */
static int kv8_direct_skips(const fajit_context *ctx, const check_cli *o, int dim, check_totals *t)
{
    if (o->user.kv_dtype != FAJIT_DTYPE_E4M3 || !(ctx->kv8_widen & FJ_VARIANT_KV8_DIRECT) || fj_kv8_direct_dim(dim))
        return 0;
    char why[256];
    snprintf(why, sizeof why, "head_dim %d: FAJIT_KV8_DIRECT=1 forces kv8direct, built for head_dim 64, 128 and 256 "
                              "(unset, this head dim runs the widening kernel)", dim);
    printf("skipped: %s\n", why);
    if (!t->skipped_configs++) snprintf(t->first_skip, sizeof t->first_skip, "%s", why);
    return 1;
}

/* Every config x shape of one (dtype, D, causal). Returns -1 to stop the grid. */
static int check_group(fajit_context *ctx, const check_cli *o, fajit_dtype dt, int dim, int causal, check_totals *t)
{
    check_cfg cfgs[N_TILES + 1];
    if (kv8_direct_skips(ctx, o, dim, t)) return 0;
    int n = configs_for(ctx, o, dt, dim, causal, cfgs, t);
    fj_check_problem base = fj_check_problem_default();
    base.dtype = dt, base.head_dim = dim, base.causal = causal;
    base.kv8 = o->user.kv_dtype == FAJIT_DTYPE_E4M3 ? 2 : 0; /* e4m3 K / V, random power-of-two descales */
    check_shape one;
    const check_shape *custom = custom_shape(o, &one);
    for (int c = 0; c < n && o->varlen_n; c++)
        if (check_varlen(ctx, o, &cfgs[c], &base, t) < 0) return -1;
    if (o->varlen_n) return 0;
    for (int c = 0; c < n && custom; c++)
        if (check_one(ctx, o, &cfgs[c], custom, &base, t) < 0) return -1;
    for (int c = 0; c < n && !custom; c++)
        for (int s = 0; s < N_SHAPES; s++) {
            if ((o->quick && !k_shapes[s].quick) || (k_shapes[s].big && c >= 2)) continue;
            if (check_one(ctx, o, &cfgs[c], &k_shapes[s], &base, t) < 0) return -1;
        }
    return 0;
}

static void check_summary(const check_totals *t)
{
    printf("\n%d runs: %d passed, %d failed, %d errors; %d configs skipped", t->runs, t->passed, t->failed, t->errors,
           t->skipped_configs);
    if (t->skipped_configs) printf(" (first: %s)", t->first_skip);
    printf("\nworst, as a fraction of its tolerance:\n");
    printf("  rel L2   %6.3f  %s\n", t->rel.value, t->rel.where);
    printf("  row rel  %6.3f  %s\n", t->row.value, t->row.where);
    printf("  LSE      %6.3f  %s\n", t->lse.value, t->lse.where);
    if (t->first_failure[0]) printf("first failure: %s\n", t->first_failure);
    printf("%s\n", t->failed || t->errors || !t->runs ? "FAIL" : "PASS");
}

int fagen_args_check(int argc, char **argv)
{
    check_cli o;
    return check_parse(argc, argv, &o);
}

int fagen_cmd_check(int argc, char **argv)
{
    check_cli o;
    check_totals t;
    fajit_context *ctx = NULL;
    int rc = check_parse(argc, argv, &o);
    if (rc != FAGEN_EXIT_OK || o.help) return rc;
    if (o.user.dtype == FAJIT_DTYPE_E4M3) { /* the reference harness (runtime/check.c) quantizes K / V only */
        fprintf(stderr, "fagen: --dtype e4m3: check covers bf16 and f16 attention, with --kv-dtype e4m3 an FP8 "
                        "K/V cache too, but not e4m3 Q, K and V (its reference quantizes K and V only); FP8 kernels are "
                        "checked by tests/test_gpu_fp8 and bench/fp8_compare.py\n");
        return FAGEN_EXIT_USAGE;
    }
    if (o.varlen_n && o.user.kv_dtype == FAJIT_DTYPE_E4M3) { /* the library refuses it (fp8_args.c) */
        fprintf(stderr, "fagen: --varlen with --kv-dtype e4m3: varlen batches take 16-bit K/V only (the FP8 K/V kernels "
                        "take no cu_seqlens yet); drop one of the two flags\n");
        return FAGEN_EXIT_USAGE;
    }
    fajit_context_options copt = fajit_context_options_default();
    copt.device = o.device;
    fajit_status st = fajit_context_create(&copt, &ctx);
    if (st == FAJIT_ERR_INVALID_ARGUMENT) return fagen_report_status(st, "context"); /* e.g. FAJIT_CACHE_DIR too long */
    if (st != FAJIT_OK) {
        fprintf(stderr, "fagen: check needs a GPU: %s\n", fajit_errmsg());
        return FAGEN_EXIT_FAIL;
    }
    memset(&t, 0, sizeof t);
    printf("fagen check on %s (%s), device %d%s\n", ctx->device_name, fajit_context_sm(ctx), o.device,
           o.quick ? ", quick grid" : "");
    printf("%-46s %-30s ref    rel L2   row rel   max abs   LSE err  result\n", "config", "shape");
    /* --quick narrows the head dims to 64/128/256 only when --headdim names none */
    int quick_dims = o.quick && !o.user.head_dim;
    const int *dims = quick_dims ? k_quick_dims : k_dims;
    int n_dims = quick_dims ? 3 : 5, stop = 0;
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16 && !stop; dt++)
        for (int di = 0; di < n_dims && !stop; di++)
            for (int causal = 0; causal <= 1 && !stop; causal++) {
                if ((o.user.dtype && (int)o.user.dtype != dt) || (o.user.head_dim && o.user.head_dim != dims[di]) ||
                    (o.user.causal && !causal))
                    continue;
                stop = check_group(ctx, &o, (fajit_dtype)dt, dims[di], causal, &t) < 0;
            }
    if (stop) printf("stopped: a CUDA error leaves the context unusable\n");
    check_summary(&t);
    fajit_context_destroy(ctx);
    return t.failed || t.errors || !t.runs ? FAGEN_EXIT_FAIL : FAGEN_EXIT_OK;
}
