/*
 * args.c - fagen's shared flag parser (see args.h): a table of kernel-config flags, each with its
 * value rule, plus -v / -o / --sm, and the step that completes a config with the library's heuristic.
 *
 * Every rule the command line can check without the library (enumerations, ranges, whole numbers)
 * is checked here with a message naming the flag, the value and the rule; rules that need the plan
 * (tile multiples, smem and register budgets) are left to fajit_config_fill / fajit_config_check,
 * whose message is passed through unchanged.
 */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/config_fill.h"
#include "base/error.h"

/* ---- value rules ------------------------------------------------------------------------------ */

typedef struct choice {
    const char *text;
    int value;
} choice;

static const choice k_arch_choices[] = {
    {"sm_80", FAJIT_ARCH_SM80}, {"sm_90a", FAJIT_ARCH_SM90A}, {"sm_100a", FAJIT_ARCH_SM100A},
    {"auto", FAJIT_ARCH_AUTO}, {NULL, 0}};
static const choice k_dtype_choices[] = {
    {"f16", FAJIT_DTYPE_F16}, {"bf16", FAJIT_DTYPE_BF16}, {"e4m3", FAJIT_DTYPE_E4M3}, {NULL, 0}};
static const choice k_kv_dtype_choices[] = {{"e4m3", FAJIT_DTYPE_E4M3}, {NULL, 0}};
static const choice k_out_dtype_choices[] = {{"f16", FAJIT_DTYPE_F16}, {"bf16", FAJIT_DTYPE_BF16}, {NULL, 0}};
static const choice k_headdim_choices[] = {{"64", 64}, {"96", 96}, {"128", 128}, {"192", 192}, {"256", 256},
                                           {NULL, 0}};
static const choice k_swizzle_choices[] = {{"none", FAJIT_SWIZZLE_NONE}, {"32", 32}, {"64", 64}, {"128", 128},
                                           {NULL, 0}};
static const choice k_on_off_choices[] = {{"on", 1}, {"off", -1}, {NULL, 0}};
/* FJ_VARIANT_* of codegen.h: 1 seqlens, 2 split, 4 combine, 8 packgqa, 16 paged, 32 gather, 64 ahead, 1024 varlen
 * queries (varlenq), 1024 + 2048 varlen queries and keys (varlen), 4096 / 8192 the integer widening of e4m3 K / V
 * (kv8intk / kv8intv, with --kv-dtype e4m3), 16384 the varlen longest-first schedule (lpt), 32768 the MMA fragments straight from
 * the e4m3 tiles (kv8direct) (joined with '+') */
static const choice k_variant_choices[] = {{"seqlens", 1}, {"split", 2},      {"combine", 4},       {"packgqa", 8},
                                           {"paged", 16},  {"gather", 32},    {"ahead", 64},        {"varlen", FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K},
                                           {"varlenq", FJ_VARIANT_VARLEN}, {"kv8intk", FJ_VARIANT_KV8_INT_K},
                                           {"kv8intv", FJ_VARIANT_KV8_INT_V}, {"lpt", FJ_VARIANT_LPT},
                                           {"kv8direct", FJ_VARIANT_KV8_DIRECT}, {NULL, 0}};


/* Look `text` up in a NULL-terminated choice list; the rule text lists the accepted spellings. */
static int parse_choice(const char *flag, const char *text, const choice *list, const char *rule, int *out)
{
    for (const choice *c = list; c->text; c++) {
        if (strcmp(c->text, text) == 0) {
            *out = c->value;
            return FAGEN_ARG_TAKEN;
        }
    }
    fprintf(stderr, "fagen: %s %s: must be %s\n", flag, text, rule);
    return FAGEN_ARG_ERROR;
}

#define VARIANT_RULE                                                                                           \
    "seqlens, split, packgqa and paged, joined with + in any combination (seqlens+split+paged), gather and "    \
    "ahead only with paged (paged+gather+ahead), varlen (packed queries and keys) or varlenq (packed queries) "  \
    "with seqlens and (varlenq) paged and lpt (sm_90a: the dynamic longest-first schedule), or combine alone; "  \
    "with --kv-dtype e4m3 also kv8intk / kv8intv (K / V "                                                       \
    "widened by integer ops instead of cvt) and kv8direct (MMA fragments straight from the e4m3 tiles)"

/* "word+word+...": the sum of the words' values (each once), in a combination the kernels have. */
static int parse_variant(const char *flag, const char *text, unsigned *out)
{
    char word[32];
    *out = 0;
    for (const char *p = text;;) {
        size_t n = strcspn(p, "+");
        int v = 0;
        if (n == 0) {
            fprintf(stderr, "fagen: %s '%s': %s; must be %s\n", flag, text,
                    !text[0] ? "empty" : "an empty word (a leading, trailing or doubled +)", VARIANT_RULE);
            return FAGEN_ARG_ERROR;
        }
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), p);
        if (parse_choice(flag, word, k_variant_choices, VARIANT_RULE, &v) != FAGEN_ARG_TAKEN) return FAGEN_ARG_ERROR;
        if (*out & (unsigned)v) {
            fprintf(stderr, "fagen: %s %s: %s twice\n", flag, text, word);
            return FAGEN_ARG_ERROR;
        }
        *out |= (unsigned)v;
        if (!p[n]) break;
        p += n + 1;
    }
    const char *why = NULL;
    if ((*out & FJ_VARIANT_COMBINE) && *out != FJ_VARIANT_COMBINE)
        why = "combine is the split partials' own kernel and takes no other word";
    else if ((*out & (FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD)) && !(*out & FJ_VARIANT_PAGED))
        why = *out & FJ_VARIANT_GATHER ? "gather reads pages: it needs paged" : "ahead reads pages: it needs paged";
    else if ((*out & FJ_VARIANT_VARLEN) &&
             (*out & (FJ_VARIANT_SPLIT | FJ_VARIANT_PACK | FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD)))
        why = "varlen goes without split, packgqa, gather and ahead";
    else if ((*out & FJ_VARIANT_VARLEN_K) && (*out & FJ_VARIANT_PAGED))
        why = "varlen packs the keys; with paged keys use varlenq";
    else if ((*out & FJ_VARIANT_LPT) && !(*out & FJ_VARIANT_VARLEN))
        why = "lpt schedules varlen batches: it needs varlen or varlenq";
    if (why) {
        fprintf(stderr, "fagen: %s %s: no such kernel (%s); the variants are %s\n", flag, text, why, VARIANT_RULE);
        return FAGEN_ARG_ERROR;
    }
    return FAGEN_ARG_TAKEN;
}

int fagen_parse_int_list(const char *flag, const char *text, int lo, int hi, int *out, int max, int *n)
{
    char word[32];
    *n = 0;
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        if (*n >= max) {
            fprintf(stderr, "fagen: %s %s: at most %d values\n", flag, text, max);
            return FAGEN_ARG_ERROR;
        }
        snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), p);
        if (len >= sizeof word || fagen_parse_int(flag, word, lo, hi, &out[*n]) != FAGEN_ARG_TAKEN)
            return FAGEN_ARG_ERROR;
        ++*n;
        p += len;
        if (!*p) return FAGEN_ARG_TAKEN;
    }
}

int fagen_parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    char *end = NULL;
    long v;
    /* strtol would skip leading blanks and accept a sign: only plain digits are a number here */
    if (text[0] < '0' || text[0] > '9') {
        fprintf(stderr, "fagen: %s %s: not a whole number (must be %d..%d)\n", flag, text, lo, hi);
        return FAGEN_ARG_ERROR;
    }
    errno = 0;
    v = strtol(text, &end, 10);
    if (*end != '\0') {
        fprintf(stderr, "fagen: %s %s: not a whole number (must be %d..%d)\n", flag, text, lo, hi);
        return FAGEN_ARG_ERROR;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "fagen: %s %s: must be %d..%d\n", flag, text, lo, hi);
        return FAGEN_ARG_ERROR;
    }
    *out = (int)v;
    return FAGEN_ARG_TAKEN;
}

/* ---- the config flags --------------------------------------------------------------------------- */

typedef int (*config_setter)(const char *flag, const char *text, fajit_config *cfg);

static int set_arch(const char *f, const char *t, fajit_config *c)
{
    int v = 0;
    int r = parse_choice(f, t, k_arch_choices, "sm_80, sm_90a, sm_100a or auto", &v);
    if (r == FAGEN_ARG_TAKEN) c->arch = (fajit_arch)v;
    return r;
}
static int set_dtype(const char *f, const char *t, fajit_config *c)
{
    int v = 0;
    int r = parse_choice(f, t, k_dtype_choices, "f16, bf16 or e4m3", &v);
    if (r == FAGEN_ARG_TAKEN) c->dtype = (fajit_dtype)v;
    return r;
}
static int set_kv_dtype(const char *f, const char *t, fajit_config *c)
{
    int v = 0;
    int r = parse_choice(f, t, k_kv_dtype_choices, "e4m3", &v);
    if (r == FAGEN_ARG_TAKEN) c->kv_dtype = (fajit_dtype)v;
    return r;
}
static int set_out_dtype(const char *f, const char *t, fajit_config *c)
{
    int v = 0;
    int r = parse_choice(f, t, k_out_dtype_choices, "bf16 or f16", &v);
    if (r == FAGEN_ARG_TAKEN) c->out_dtype = (fajit_dtype)v;
    return r;
}
static int set_headdim(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_headdim_choices, "64, 96, 128, 192 or 256", &c->head_dim);
}
static int set_br(const char *f, const char *t, fajit_config *c) { return fagen_parse_int(f, t, 1, 1024, &c->block_m); }
static int set_bc(const char *f, const char *t, fajit_config *c) { return fagen_parse_int(f, t, 1, 1024, &c->block_n); }
static int set_stages(const char *f, const char *t, fajit_config *c) { return fagen_parse_int(f, t, 1, 4, &c->stages); }
static int set_warps(const char *f, const char *t, fajit_config *c) { return fagen_parse_int(f, t, 1, 32, &c->warps); }
static int set_col_warps(const char *f, const char *t, fajit_config *c)
{
    return fagen_parse_int(f, t, 1, 2, &c->col_warps);
}
static int set_swizzle(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_swizzle_choices, "none, 32, 64 or 128", &c->swizzle);
}
static int set_overlap(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_on_off_choices, "on or off", &c->overlap);
}
static int set_pingpong(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_on_off_choices, "on or off", &c->pingpong);
}
static int set_roll(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_on_off_choices, "on or off", &c->roll);
}
static int set_sched(const char *f, const char *t, fajit_config *c)
{
    static const choice k_sched_choices[] = {{"static", -1}, {"lpt", 1}, {NULL, 0}};
    return parse_choice(f, t, k_sched_choices, "static or lpt", &c->sched);
}
static int set_cross_tile(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_on_off_choices, "on or off", &c->cross_tile);
}
static int set_accurate(const char *f, const char *t, fajit_config *c)
{
    return parse_choice(f, t, k_on_off_choices, "on or off", &c->accurate);
}
static int set_causal(const char *f, const char *t, fajit_config *c)
{
    (void)f;
    (void)t;
    c->causal = 1;
    return FAGEN_ARG_TAKEN;
}

/* The attention variants' per-call values (fagen check / bench read them; ptx / explain use the bits only). */
static fagen_mod_values g_mod_values = {-1, -1, 0.0f, 0};

const fagen_mod_values *fagen_mods(void) { return &g_mod_values; }

static int set_window(const char *f, const char *t, fajit_config *c)
{
    int l = 0, r = 0, n = 0;
    if (sscanf(t, "%d,%d%n", &l, &r, &n) != 2 || t[n] != '\0' || l < -1 || r < -1) {
        fprintf(stderr, "fagen: %s %s: must be LEFT,RIGHT with each >= -1 (-1 = unbounded), e.g. 4096,0\n", f, t);
        return FAGEN_ARG_ERROR;
    }
    g_mod_values.window_left = l, g_mod_values.window_right = r;
    c->mods |= FAJIT_MOD_WINDOW;
    return FAGEN_ARG_TAKEN;
}
static int set_softcap(const char *f, const char *t, fajit_config *c)
{
    char *end = NULL;
    double v = strtod(t, &end);
    if (!end || *end != '\0' || !(v > 0.0) || v > 1e30) {
        fprintf(stderr, "fagen: %s %s: must be a number > 0 (Gemma 2: 50)\n", f, t);
        return FAGEN_ARG_ERROR;
    }
    g_mod_values.softcap = (float)v;
    c->mods |= FAJIT_MOD_SOFTCAP;
    return FAGEN_ARG_TAKEN;
}
static int set_chunk(const char *f, const char *t, fajit_config *c)
{
    if (fagen_parse_int(f, t, 1, 1 << 30, &g_mod_values.chunk) != FAGEN_ARG_TAKEN) return FAGEN_ARG_ERROR;
    c->mods |= FAJIT_MOD_CHUNK;
    return FAGEN_ARG_TAKEN;
}
static int set_sinks(const char *f, const char *t, fajit_config *c)
{
    (void)f, (void)t;
    c->mods |= FAJIT_MOD_SINKS;
    return FAGEN_ARG_TAKEN;
}
static int set_alibi(const char *f, const char *t, fajit_config *c)
{
    (void)f, (void)t;
    c->mods |= FAJIT_MOD_ALIBI;
    return FAGEN_ARG_TAKEN;
}

typedef struct config_flag {
    const char *name;
    const char *alias;   /* the fajit_config field's spelling, accepted too (--block-m for --br), or NULL */
    const char *metavar; /* NULL: the flag takes no value */
    config_setter set;
    const char *help;
} config_flag;

static const config_flag k_config_flags[] = {
    {"--arch", NULL, "sm_80|sm_90a|sm_100a|auto", set_arch,
     "code-generation path; auto (the default) = the GPU's best: sm_90a on an H100/H200, sm_100a on a compute "
     "capability 10.0 GPU (never run on hardware; FAJIT_SM100A_LAUNCH=0: sm_80 there), sm_80 on other GPUs and "
     "without one"},
    {"--dtype", NULL, "f16|bf16|e4m3", set_dtype,
     "element type of Q, K, V and O (default: bf16); e4m3: FP8 Q, K, V (sm_90a, head dim 64/128/256), O per --out-dtype"},
    {"--kv-dtype", NULL, "e4m3", set_kv_dtype, "K/V element type when it differs from --dtype: an FP8 K/V cache"},
    {"--out-dtype", NULL, "bf16|f16", set_out_dtype, "O's element type with --dtype e4m3 (default: bf16)"},
    {"--headdim", "--head-dim", "64|96|128|192|256", set_headdim, "head dimension D (default: 128)"},
    {"--br", "--block-m", "N", set_br, "Br, query rows per CTA (default: heuristic)"},
    {"--bc", "--block-n", "N", set_bc, "Bc, key rows per K/V tile (default: heuristic)"},
    {"--stages", NULL, "1..4", set_stages, "K/V tiles in flight (default: heuristic)"},
    {"--swizzle", NULL, "none|32|64|128", set_swizzle, "smem XOR swizzle span in bytes (default: heuristic)"},
    {"--warps", NULL, "N", set_warps, "warps per CTA (default: heuristic)"},
    {"--col-warps", NULL, "1|2", set_col_warps, "warps sharing a row block, splitting S's keys and O's head dims (default: heuristic)"},
    {"--overlap", NULL, "on|off", set_overlap,
     "sm_90a: S(j+1) = QK^T issued with PV(j), exponentiating while it runs (default: heuristic)"},
    {"--pingpong", NULL, "on|off", set_pingpong,
     "sm_90a: consumer warpgroups take turns issuing their GEMMs (default: heuristic)"},
    {"--roll", NULL, "on|off", set_roll,
     "sm_90a: one consumer KV loop body for every K/V stage (on: about half the PTX, a faster compile) or one per "
     "stage (off); without the flag: on where it can (16-bit; e4m3: off, on only when asked)"},
    {"--sched", NULL, "static|lpt", set_sched,
     "sm_90a causal: work tiles handed out by a fixed round-robin (static) or a global counter, longest first (lpt); "
     "default: heuristic (lpt at Nq >= 4096 for grouped-query heads (Hq >= 4 Hkv), other heads up to Nq 8192, and "
     "chunked attention; with --window, fagen bench: lpt where static would leave the busiest SM > 4% over the mean "
     "and work tiles average >= 8 KV tiles)"},
    {"--cross-tile", NULL, "on|off", set_cross_tile,
     "sm_90a: a work tile's last PV goes in with the next work tile's first S, its epilogue under that S; default: "
     "heuristic (on for causal head dim <= 64 with grouped-query heads, or with sinks and a window of <= 128 keys "
     "on the left)"},
    {"--accurate", NULL, "on|off", set_accurate,
     "sm_80 / sm_90a, 16-bit: the softmax's reference max also follows a new row max heavy in the row's sum "
     "(FlashAttention-3's accuracy; H200: 0-6% slower on sm_90a, 5-8% on sm_80's D128 tile); default: off"},
    {"--causal", NULL, NULL, set_causal, "causal mask, bottom-right aligned when Nq != Nk"},
    {"--window", NULL, "L,R", set_window,
     "sliding window: keys i + Nk - Nq - L .. + R (-1 = unbounded side; with --causal R is 0)"},
    {"--softcap", NULL, "C", set_softcap, "softcap: s = C tanh(s / C) on the scaled scores (Gemma 2)"},
    {"--sinks", NULL, NULL, set_sinks, "attention sinks: one fp32 logit per query head in the softmax denominator (gpt-oss)"},
    {"--alibi", NULL, NULL, set_alibi, "ALiBi: s -= slope[h] |i + Nk - Nq - j| (fp32 slopes per head)"},
    {"--chunk", NULL, "N", set_chunk, "chunked attention: a query sees only keys in its own chunk of N (Llama 4)"},
};
#define N_CONFIG_FLAGS ((int)(sizeof k_config_flags / sizeof k_config_flags[0]))

int fagen_config_has_tiles(const fajit_config *c)
{
    return c->arch || c->block_m || c->block_n || c->stages || c->swizzle || c->warps || c->col_warps || c->overlap ||
           c->pingpong || c->roll || c->sched || c->cross_tile || c->accurate;
}

void fagen_print_config_help(FILE *f)
{
    for (int i = 0; i < N_CONFIG_FLAGS; i++) {
        const config_flag *cf = &k_config_flags[i];
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", cf->name, cf->metavar ? " " : "", cf->metavar ? cf->metavar : "");
        fprintf(f, "  %-30s %s", left, cf->help);
        if (cf->alias) fprintf(f, " (also %s)", cf->alias);
        fputc('\n', f);
    }
}

/* ---- generic flag handling ---------------------------------------------------------------------- */

/* The flag name of a word ("--stages=2" -> "--stages"), copied into name. */
static void flag_name(const char *word, char *name, size_t size)
{
    const char *eq = strncmp(word, "--", 2) == 0 ? strchr(word, '=') : NULL;
    size_t n = eq ? (size_t)(eq - word) : strlen(word);
    if (n >= size) n = size - 1;
    memcpy(name, word, n);
    name[n] = '\0';
}

/* One name for every spelling of a flag. */
static void canonical_flag(const char *word, char *name, size_t size)
{
    flag_name(word, name, size);
    if (strcmp(name, "--verbose") == 0 || (strncmp(name, "-v", 2) == 0 && name[1] == 'v')) {
        snprintf(name, size, "-v");
        return;
    }
    if (strcmp(name, "--output") == 0) {
        snprintf(name, size, "-o");
        return;
    }
    for (int k = 0; k < N_CONFIG_FLAGS; k++)
        if (k_config_flags[k].alias && strcmp(name, k_config_flags[k].alias) == 0)
            snprintf(name, size, "%s", k_config_flags[k].name);
}

int fagen_flag_once(fagen_seen *seen, const char *word)
{
    char name[32];
    if (word[0] != '-') return FAGEN_ARG_TAKEN;
    canonical_flag(word, name, sizeof name);
    for (int k = 0; k < seen->n; k++) {
        if (strcmp(seen->names[k], name) != 0) continue;
        fprintf(stderr, "fagen: %s: given twice; give each flag once\n", name);
        return FAGEN_ARG_ERROR;
    }
    if (seen->n < (int)(sizeof seen->names / sizeof seen->names[0]))
        snprintf(seen->names[seen->n++], sizeof seen->names[0], "%s", name);
    return FAGEN_ARG_TAKEN;
}

const char *fagen_flag_value(int argc, char **argv, int *i, char *flag, size_t flag_size)
{
    const char *word = argv[*i];
    const char *eq = strncmp(word, "--", 2) == 0 ? strchr(word, '=') : NULL;
    flag_name(word, flag, flag_size);
    if (eq) {
        if (eq[1] != '\0') return eq + 1;
    } else if (*i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) {
        *i += 1;
        return argv[*i];
    }
    fprintf(stderr, "fagen: %s: missing value\n", flag);
    return NULL;
}

int fagen_flag_is(const char *word, const char *name)
{
    size_t n = strlen(name);
    return strncmp(word, name, n) == 0 && (word[n] == '\0' || word[n] == '=');
}

int fagen_parse_int_flag(int argc, char **argv, int *i, const fagen_int_flag *table, size_t n, void *opts)
{
    char flag[64];
    for (size_t k = 0; k < n; k++) {
        if (!fagen_flag_is(argv[*i], table[k].name)) continue;
        const char *val = fagen_flag_value(argc, argv, i, flag, sizeof flag);
        if (!val) return FAGEN_ARG_ERROR;
        return fagen_parse_int(flag, val, table[k].lo, table[k].hi, (int *)((char *)opts + table[k].offset));
    }
    return FAGEN_ARG_NOT_MINE;
}

int fagen_parse_config_flag(int argc, char **argv, int *i, fajit_config *cfg)
{
    char flag[64];
    flag_name(argv[*i], flag, sizeof flag);
    for (int k = 0; k < N_CONFIG_FLAGS; k++) {
        const config_flag *cf = &k_config_flags[k];
        const char *value;
        if (strcmp(flag, cf->name) != 0 && !(cf->alias && strcmp(flag, cf->alias) == 0)) continue;
        if (!cf->metavar) {
            if (strcmp(argv[*i], flag) != 0) {
                fprintf(stderr, "fagen: %s: takes no value\n", argv[*i]);
                return FAGEN_ARG_ERROR;
            }
            return cf->set(flag, NULL, cfg);
        }
        value = fagen_flag_value(argc, argv, i, flag, sizeof flag);
        if (!value) return FAGEN_ARG_ERROR;
        return cf->set(flag, value, cfg);
    }
    return FAGEN_ARG_NOT_MINE;
}

/* -v, -vN, -v N, --verbose[=N]: bare means 1; a following word is taken only if it starts with a digit. */
static int parse_verbose(int argc, char **argv, int *i, fagen_args *a)
{
    const char *w = argv[*i];
    const char *text = NULL;
    if (strcmp(w, "-v") == 0 || strcmp(w, "--verbose") == 0) {
        if (*i + 1 < argc && argv[*i + 1][0] >= '0' && argv[*i + 1][0] <= '9') text = argv[++*i];
    } else if (strncmp(w, "--verbose=", 10) == 0) {
        text = w + 10;
    } else if (strncmp(w, "-v", 2) == 0) {
        text = w + 2;
    } else {
        return FAGEN_ARG_NOT_MINE;
    }
    if (!text) {
        a->verbosity = 1;
        return FAGEN_ARG_TAKEN;
    }
    return fagen_parse_int("-v", text, 0, 2, &a->verbosity);
}

/* -v / -o / --sm, when the subcommand accepts them. */
static int parse_common_flag(int argc, char **argv, int *i, unsigned opts, fagen_args *a)
{
    char flag[64];
    flag_name(argv[*i], flag, sizeof flag);
    if ((opts & FAGEN_OPT_VERBOSE) && (strncmp(flag, "-v", 2) == 0 || strcmp(flag, "--verbose") == 0))
        return parse_verbose(argc, argv, i, a);
    if ((opts & FAGEN_OPT_OUTPUT) && (strcmp(flag, "-o") == 0 || strcmp(flag, "--output") == 0)) {
        a->out_path = fagen_flag_value(argc, argv, i, flag, sizeof flag);
        return a->out_path ? FAGEN_ARG_TAKEN : FAGEN_ARG_ERROR;
    }
    if ((opts & FAGEN_OPT_SM) && strcmp(flag, "--sm") == 0) {
        a->sm = fagen_flag_value(argc, argv, i, flag, sizeof flag);
        return a->sm ? FAGEN_ARG_TAKEN : FAGEN_ARG_ERROR;
    }
    if ((opts & FAGEN_OPT_VARIANT) && strcmp(flag, "--variant") == 0) {
        const char *t = fagen_flag_value(argc, argv, i, flag, sizeof flag);
        unsigned keep = a->variant & FAGEN_VARLEN_BITS; /* --varlen given before */
        int rc = t ? parse_variant(flag, t, &a->variant) : FAGEN_ARG_ERROR;
        a->variant |= keep;
        return rc;
    }
    if ((opts & FAGEN_OPT_VARLEN) && strcmp(argv[*i], "--varlen") == 0) {
        a->variant |= FAGEN_VARLEN_BITS;
        return FAGEN_ARG_TAKEN;
    }
    return FAGEN_ARG_NOT_MINE;
}

static int is_help(const char *w) { return strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0; }

int fagen_args_parse(int argc, char **argv, unsigned opts, fagen_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) { /* --help wins over anything else on the line */
        if (is_help(argv[i])) {
            a->help = 1;
            return FAGEN_EXIT_OK;
        }
    }
    fagen_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        if (fagen_flag_once(&seen, argv[i]) != FAGEN_ARG_TAKEN) return FAGEN_EXIT_USAGE;
        int r = fagen_parse_config_flag(argc, argv, &i, &a->cfg);
        if (r == FAGEN_ARG_NOT_MINE) r = parse_common_flag(argc, argv, &i, opts, a);
        if (r == FAGEN_ARG_ERROR) return FAGEN_EXIT_USAGE;
        if (r == FAGEN_ARG_TAKEN) continue;
        if (argv[i][0] == '-')
            fprintf(stderr, "fagen: %s: unknown flag for '%s' (see fagen %s --help)\n", argv[i], argv[0], argv[0]);
        else
            fprintf(stderr, "fagen: '%s': unexpected argument for '%s' (see fagen %s --help)\n", argv[i], argv[0],
                    argv[0]);
        return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

/* ---- completing a config ------------------------------------------------------------------------ */

int fagen_report_status(fajit_status st, const char *what)
{
    const char *msg = fajit_errmsg();
    if (msg && msg[0])
        fprintf(stderr, "fagen: %s\n", msg);
    else
        fprintf(stderr, "fagen: %s: %s\n", what, fajit_status_name(st));
    switch (st) {
    case FAJIT_OK: return FAGEN_EXIT_OK;
    case FAJIT_ERR_INVALID_ARGUMENT:
    case FAJIT_ERR_INVALID_CONFIG:
    case FAJIT_ERR_UNSUPPORTED: return FAGEN_EXIT_USAGE;
    default: return FAGEN_EXIT_FAIL;
    }
}

int fagen_config_finish(fajit_config *cfg) { return fagen_config_finish_for(cfg, NULL, 0); }

int fagen_config_finish_for(fajit_config *cfg, const char *sm, unsigned variant)
{
    fajit_status st;
    if (cfg->head_dim == 0) cfg->head_dim = 128;
    if (cfg->dtype == FAJIT_DTYPE_AUTO) cfg->dtype = FAJIT_DTYPE_BF16;
    /* fills the other zeros for the target and variant, keeping the flags given, then checks every rule; an
     * unknown --sm is left to the compile's message */
    fj_clear_error();
    st = fj_config_fill_for(NULL, NULL, sm ? fj_arch_find(sm) : NULL, variant, cfg);
    if (st != FAJIT_OK) return fagen_report_status(st, "config");
    return FAGEN_EXIT_OK;
}
