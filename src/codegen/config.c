/*
 * config.c - the config calls of the code generator: check, canonical text, and the heuristic that
 * fills zero fields (fj_config_heuristic: a table per path, head dim and mask, then shrunk until the
 * plan fits the shared memory it is given). Choosing for a device - the path the GPU runs best, its
 * tuned winners, its shared-memory limit - is the runtime's (runtime/config_fill.c: fajit_config_fill).
 */
#include <stdio.h>
#include <string.h>

#include "codegen.h"
#include "base/error.h"
#include "fp8_ws.h"
#include "sm100.h"

fajit_status fajit_config_check(const fajit_config *cfg)
{
    fj_plan plan;
    fj_clear_error();
    return fj_plan_build(cfg, &plan);
}

static const char *dtype_name(fajit_dtype d)
{
    return d == FAJIT_DTYPE_F16    ? "f16"
           : d == FAJIT_DTYPE_BF16 ? "bf16"
           : d == FAJIT_DTYPE_E4M3 ? "e4m3"
           : d == FAJIT_DTYPE_AUTO ? "auto"
                                   : "dtype?";
}

/* The dtype word of the canonical text: the dtype, then ",kv=<dtype>" when K/V differ from it and ",o=<dtype>" when
 * O is not the default (fajit.h); plain configs' word is the dtype alone. */
static void dtype_word(const fajit_config *c, char *buf, size_t size)
{
    fajit_dtype kv = fj_config_kv_dtype(c), out = fj_config_out_dtype(c);
    int n = snprintf(buf, size, "%s", dtype_name(c->dtype));
    if (kv != c->dtype && n >= 0 && (size_t)n < size) n += snprintf(buf + n, size - (size_t)n, ",kv=%s", dtype_name(kv));
    if (c->out_dtype && out != (c->dtype == FAJIT_DTYPE_E4M3 ? FAJIT_DTYPE_BF16 : c->dtype) && n >= 0 &&
        (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ",o=%s", dtype_name(out));
}

fajit_dtype fj_config_kv_dtype(const fajit_config *c) { return c->kv_dtype ? c->kv_dtype : c->dtype; }

fajit_dtype fj_config_out_dtype(const fajit_config *c)
{
    if (c->out_dtype) return c->out_dtype;
    return c->dtype == FAJIT_DTYPE_E4M3 ? FAJIT_DTYPE_BF16 : c->dtype;
}

int fj_config_parse_dtype(const char *word, fajit_config *c)
{
    static const struct {
        const char *name;
        fajit_dtype dtype;
    } names[] = {{"f16", FAJIT_DTYPE_F16}, {"bf16", FAJIT_DTYPE_BF16}, {"e4m3", FAJIT_DTYPE_E4M3}};
    const size_t n_names = sizeof names / sizeof names[0];
    fajit_dtype got[3] = {FAJIT_DTYPE_AUTO, FAJIT_DTYPE_AUTO, FAJIT_DTYPE_AUTO}; /* dtype, kv, out */
    const char *prefix[3] = {"", ",kv=", ",o="};
    for (int part = 0; part < 3 && *word; part++) {
        size_t plen = strlen(prefix[part]);
        if (strncmp(word, prefix[part], plen) != 0) continue;
        size_t i = 0, len = 0;
        for (; i < n_names; i++) {
            len = strlen(names[i].name);
            if (strncmp(word + plen, names[i].name, len) == 0 && (word[plen + len] == '\0' || word[plen + len] == ','))
                break;
        }
        if (i == n_names) return -1;
        got[part] = names[i].dtype;
        word += plen + len;
    }
    if (*word || !got[0]) return -1;
    c->dtype = got[0];
    c->kv_dtype = got[1];
    c->out_dtype = got[2];
    return 0;
}

int fajit_config_format(const fajit_config *c, char *buf, size_t size)
{
    if (!buf) size = 0; /* the length only, as snprintf(NULL, 0, ...) */
    if (!c) return snprintf(buf, size, "(null)");
    char sw[16];
    if (c->swizzle == FAJIT_SWIZZLE_NONE) snprintf(sw, sizeof sw, "none");
    else snprintf(sw, sizeof sw, "%d", c->swizzle);
    char cw[16] = "";
    if (c->col_warps > 1) snprintf(cw, sizeof cw, " cw%d", c->col_warps);
    char dt[32];
    dtype_word(c, dt, sizeof dt);
    char mods[40] = "";
    if (c->mods)
        snprintf(mods, sizeof mods, "%s%s%s%s%s%s", c->mods & FAJIT_MOD_WINDOW ? " win" : "",
                 c->mods & FAJIT_MOD_SOFTCAP ? " cap" : "", c->mods & FAJIT_MOD_SINKS ? " sink" : "",
                 c->mods & FAJIT_MOD_ALIBI ? " alibi" : "", c->mods & FAJIT_MOD_CHUNK ? " chunk" : "",
                 c->mods & ~FAJIT_MOD_ALL ? " mods?" : "");
    return snprintf(buf, size, "%s %s d%d br%d bc%d s%d sw%s w%d%s%s%s%s%s%s%s %s%s", fj_arch_path_name(c->arch),
                    dt, c->head_dim, c->block_m, c->block_n, c->stages, sw, c->warps, cw,
                    c->overlap == 1 ? " ov" : "", c->pingpong == 1 ? " pp" : "", c->roll == 1 ? " roll" : "",
                    c->sched == 1 ? " lpt" : "", c->cross_tile == 1 ? " xt" : "", c->accurate == 1 ? " acc" : "",
                    c->causal ? "causal" : "noncausal",
                    mods);
}

/* The variant words of the canonical text, in fajit_config_format's order. */
static const struct {
    const char *word;
    int bit;
} k_mod_words[] = {{"win", FAJIT_MOD_WINDOW}, {"cap", FAJIT_MOD_SOFTCAP}, {"sink", FAJIT_MOD_SINKS},
                   {"alibi", FAJIT_MOD_ALIBI}, {"chunk", FAJIT_MOD_CHUNK}};

int fj_config_parse_mods(const char *text, int *mods)
{
    int m = 0, last = -1;
    char word[16];
    int n = 0;
    while (sscanf(text, " %15s%n", word, &n) == 1) {
        int found = -1;
        for (int i = 0; i < (int)(sizeof k_mod_words / sizeof k_mod_words[0]); i++)
            if (strcmp(word, k_mod_words[i].word) == 0) found = i;
        if (found < 0 || found <= last) return -1; /* unknown, repeated or out of order: not canonical */
        m |= k_mod_words[found].bit;
        last = found;
        text += n;
    }
    *mods = m;
    return 0;
}

void fj_config_overlay(fajit_config *dst, const fajit_config *src)
{
    if (!dst->block_m) dst->block_m = src->block_m;
    if (!dst->block_n) dst->block_n = src->block_n;
    if (!dst->stages) dst->stages = src->stages;
    if (!dst->swizzle) dst->swizzle = src->swizzle;
    if (!dst->warps) dst->warps = src->warps;
    if (!dst->col_warps) dst->col_warps = src->col_warps;
    if (!dst->overlap) dst->overlap = src->overlap;
    if (!dst->pingpong) dst->pingpong = src->pingpong;
    if (!dst->roll) dst->roll = src->roll;
    if (!dst->sched) dst->sched = src->sched;
    if (!dst->cross_tile) dst->cross_tile = src->cross_tile;
    if (!dst->accurate) dst->accurate = src->accurate;
}

static int flag_read(int v) { return v == 1; }

int fj_config_same(const fajit_config *a, const fajit_config *b)
{
    return a->arch == b->arch && a->dtype == b->dtype && a->head_dim == b->head_dim && a->block_m == b->block_m &&
           a->block_n == b->block_n && a->stages == b->stages && a->swizzle == b->swizzle && a->warps == b->warps &&
           a->causal == b->causal && (a->col_warps ? a->col_warps : 1) == (b->col_warps ? b->col_warps : 1) &&
           flag_read(a->overlap) == flag_read(b->overlap) && flag_read(a->pingpong) == flag_read(b->pingpong) &&
           flag_read(a->roll) == flag_read(b->roll) && flag_read(a->sched) == flag_read(b->sched) &&
           flag_read(a->cross_tile) == flag_read(b->cross_tile) && flag_read(a->accurate) == flag_read(b->accurate) &&
           a->mods == b->mods && fj_config_kv_dtype(a) == fj_config_kv_dtype(b) &&
           fj_config_out_dtype(a) == fj_config_out_dtype(b);
}

/* Defaults of the sm_80 path per head dim and mask: block_m, block_n, warps, stages. Measured on an
 * H100 (bench/sweep.sh, BF16, B*N = 16384, H*D = 2048; bench/results/h100-sweep-2026-11-22.md).
 * Two 16-row fragments per warp (block_m = 32 * warps) halve the K/V shared-memory reads per MMA.
 * Non-causal d128 takes br128 bc64 s2 (FlashAttention-2's shape) since codegen 7 fits it in 255
 * registers: +4% to +5% over br128 bc32 (bench/results/h100-ab-bc64-2026-11-22.md). Causal d128 takes
 * it too since codegen 8, whose KV range lives in uniform registers (ptxas's sm_90 allocation has no
 * spills with the mask; bench/results/h100-ab-causal-bc64-2026-11-22.md).
 * d96 and d192 were not swept: they take the shape of their neighbours. */
typedef struct sm80_default {
    int head_dim, causal, block_m, block_n, warps, stages, col_warps;
} sm80_default;

static const sm80_default k_sm80_defaults[] = {
    {64, 0, 128, 64, 4, 2, 1},  {64, 1, 128, 64, 4, 2, 1},  {96, 0, 128, 32, 4, 2, 1}, {96, 1, 64, 64, 4, 3, 1},
    {128, 0, 128, 64, 4, 2, 1}, {128, 1, 128, 64, 4, 2, 1}, {192, 0, 64, 64, 4, 1, 1}, {192, 1, 64, 64, 4, 1, 1},
    {256, 0, 64, 64, 4, 1, 2},  {256, 1, 64, 64, 4, 1, 1},
};

/* An FP8 K/V cache's tiles (kv8.c) keep 4 stages of e4m3 bytes in flight: its ring costs half a 16-bit stage
 * and the 16-bit tiles take one slot, so d128 br64 bc64 s4 is 112 KB, two CTAs an SM like the BF16 decode's
 * s2 (80 KB), with 3 x 16 KB of loads in flight a CTA instead of 1 x 16 KB at s2: decode is latency-bound on
 * the bytes in flight (H100: s2 read 1.8 TB/s of e4m3). */
#define FJ_KV8_STAGES 4

/* FP8 K/V decode (fj_config_kv8_decode_tile): the tile by the query rows a KV head's CTA holds. */
#define FJ_KV8_DECODE_MAX_SEQLEN_Q 128 /* decode.h's FJ_SPLIT_AUTO_MAX_SEQLEN_Q: the calls that pack GQA heads */
#define FJ_KV8_DECODE_STAGES 3

long long fj_config_kv8_decode_rows(const fajit_shape *shape)
{
    if (!shape || shape->seqlen_q < 1 || shape->heads_kv < 1) return 0;
    int pack = shape->heads_q > shape->heads_kv && shape->seqlen_q <= FJ_KV8_DECODE_MAX_SEQLEN_Q;
    return (pack ? (long long)shape->heads_q / shape->heads_kv : 1) * shape->seqlen_q;
}

int fj_config_kv8_decode_tile(fajit_config *c, const fajit_shape *shape)
{
    long long rows = fj_config_kv8_decode_rows(shape);
    if (fj_config_kv_dtype(c) != FAJIT_DTYPE_E4M3 || rows < 1 || rows > 32) return 0;
    if (c->block_m || c->warps || c->col_warps) return 0; /* the caller's rows and warps: the table's fill */
    fajit_config t = *c;
    t.block_m = rows <= 16 ? 16 : 32;
    t.warps = rows <= 16 ? 2 : 4;
    t.col_warps = 2;
    /* one 16-row fragment at head dim 128: 32-key tiles, 4 stages (H200, session 18 call 7, fagen bench, 2 rounds, Nq
     * 1, time against bc64 s3, whose per-call times were bimodal: B1 H32/32 32k -9%, B1 H32/8 128k -11%, B1 H8/1 512k
     * -4%, B8 H32/8 8k -2%, B64 H32/8 2k +1.5%); other head dims unmeasured: bc64 s3 */
    int narrow = t.block_m == 16 && t.head_dim == 128;
    if (!t.block_n) t.block_n = narrow ? 32 : 64;
    if (!t.stages) t.stages = narrow && t.block_n == 32 ? 4 : FJ_KV8_DECODE_STAGES;
    if (!t.swizzle) t.swizzle = t.head_dim / 16 % 8 == 0 ? 128 : t.head_dim / 16 % 4 == 0 ? 64 : 32; /* fill_sm80's */
    if (!t.overlap) t.overlap = -1;
    if (!t.pingpong) t.pingpong = -1;
    fj_plan p;
    if (fj_plan_build(&t, &p) != FAJIT_OK) return 0; /* d256 causal: 266 registers at 1-2 warps; the table's tile */
    c->block_m = t.block_m, c->warps = t.warps, c->col_warps = t.col_warps, c->block_n = t.block_n;
    c->stages = t.stages;
    return 1;
}

static void fill_sm80(fajit_config *c, const fajit_shape *shape)
{
    fj_config_kv8_decode_tile(c, shape);
    const sm80_default *d = &k_sm80_defaults[4];
    for (size_t i = 0; i < sizeof k_sm80_defaults / sizeof k_sm80_defaults[0]; i++)
        if (k_sm80_defaults[i].head_dim == c->head_dim && k_sm80_defaults[i].causal == c->causal)
            d = &k_sm80_defaults[i];
    if (!c->col_warps) c->col_warps = c->warps && c->warps < d->col_warps ? 1 : d->col_warps;
    int cw = c->col_warps > 0 ? c->col_warps : 1; /* the check reports a bad one */
    if (!c->warps) {
        c->warps = d->warps < cw ? cw : d->warps;
        /* a given block_m decides the warps: whole 16-row fragments per warp row, at most 2 per warp */
        while (c->block_m && c->warps > cw && c->block_m % (16 * c->warps / cw) != 0) c->warps /= 2;
        while (c->block_m && c->warps < 8 && c->block_m / (16 * c->warps / cw) > 2) c->warps *= 2;
    }
    int rows16 = 16 * (c->warps / cw > 0 ? c->warps / cw : 1); /* rows of one 16-row fragment per warp row */
    if (!c->block_m) {
        c->block_m = d->block_m;
        /* short queries: do not waste a CTA on rows that do not exist */
        if (shape && shape->seqlen_q > 0 && shape->seqlen_q <= 64 && 64 % rows16 == 0) c->block_m = 64;
        if (c->block_m % rows16 != 0 || c->block_m / rows16 > 2) c->block_m = rows16;
    }
    /* the accurate softmax's weight test (accurate = 1) takes 9 registers that the D128 br128 bc64 tile does not
     * have (sm80.c FJ_SM80_REG_ACCURATE): half the KV tile keeps the 128 query rows - 0.95x / 0.92x the default's
     * speed (non-causal / causal, H200 D128 N4k) where the br64 bc64 the fill's search found ran 0.84x / 0.88x, at
     * the same accuracy (session 24, bench/results/h200-session24-2026-11-29.md) */
    if (!c->block_n && c->accurate == 1 && c->head_dim == 128 && c->block_m == 128 && d->block_n == 64 &&
        fj_config_kv_dtype(c) != FAJIT_DTYPE_E4M3)
        c->block_n = 32;
    if (!c->block_n) c->block_n = d->block_n;
    if (!c->stages) c->stages = fj_config_kv_dtype(c) == FAJIT_DTYPE_E4M3 ? FJ_KV8_STAGES : d->stages;
    if (!c->swizzle) {
        /* the largest span whose chunk group divides the part of a row one warp reads (half with pairs) */
        int chunks = c->head_dim / 8 / cw;
        c->swizzle = chunks % 8 == 0 ? 128 : chunks % 4 == 0 ? 64 : 32;
    }
}

/* Defaults of the sm_90a path per head dim and mask: block_m (64 per consumer warpgroup), block_n (and
 * block_n from seqlen_long up), stages, overlap, pingpong. From the first sweep on the H100 (fagen bench,
 * BF16, B*N = 16384, H*D = 2048, N 4k and 16k): D=64 takes three consumer warpgroups (br192 bc128:
 * 538-556 TFLOP/s against 460-484 for br128); D=128 bc128 at 4k (686) but bc176 from 8k (707-721 at 16k
 * against 665-686); D=256 bc80 without ping-pong (761 / 799 causal at 16k against 740 / 758 with it).
 * D=96 and D=192 take their neighbours' shapes (not swept). fagen tune searches around them.
 * Short causal D=64 (N <= 1024) takes two consumer warpgroups without ping-pong instead: the tuner's winner
 * at N 1024 in both dtypes (+7.6% BF16, +12.9% FP16 over br192 pp in its timing; H100, 2026-11-22). */
typedef struct sm90_default {
    int head_dim, block_m, block_n, block_n_long, stages, overlap, pingpong;
} sm90_default;

#define FJ_SM90_SEQLEN_LONG 8192
#define FJ_SM90_SEQLEN_SHORT 1024

static const sm90_default k_sm90_defaults[] = {
    {64, 192, 128, 128, 2, 1, 1}, {96, 192, 96, 96, 2, 1, 1}, {128, 128, 128, 176, 2, 1, 1},
    {192, 128, 96, 96, 2, 1, 1},  {256, 128, 80, 80, 2, 1, -1},
};

/* FP8 (e4m3) defaults: block_n a multiple of 32 (k32 steps), P a quarter of S's registers. From the first sweep
 * (fagen bench, H100, non-causal N16k, 2026-11-26; bench/results/h100-fp8-tiles-2026-11-26.md): D64 br192 bc128
 * (640 TFLOP/s; bc192 585), D128 bc192 (915 against 853 at bc128). D256 takes FlashAttention-3's tile, br128 bc128
 * with the overlap and ping-pong, O staged in the V ring (the default knobs regs, vt, ostage of fj_fp8_knobs_default
 * give the consumers the 240 registers it needs): H100, bench/fp8_ab2.sh, 2026-11-27, N 4k / 16k, 1038-1099 / 1136
 * TFLOP/s against 945 / 1004 for bc128 without the overlap, causal (no ping-pong: fit_fp8_regs) 964 / 1098 against
 * 851 / 1017. fagen tune --dtype e4m3 covers the class. */
static const sm90_default k_sm90_fp8_defaults[] = {
    {64, 192, 128, 128, 2, 1, 1}, {128, 128, 192, 192, 2, 1, 1}, {256, 128, 128, 128, 2, 1, 1},
};

static void fill_sm90(fajit_config *c, const fajit_shape *shape)
{
    const sm90_default *d = &k_sm90_defaults[2];
    for (size_t i = 0; i < sizeof k_sm90_defaults / sizeof k_sm90_defaults[0]; i++)
        if (k_sm90_defaults[i].head_dim == c->head_dim) d = &k_sm90_defaults[i];
    if (c->dtype == FAJIT_DTYPE_E4M3) {
        d = &k_sm90_fp8_defaults[1];
        for (size_t i = 0; i < sizeof k_sm90_fp8_defaults / sizeof k_sm90_fp8_defaults[0]; i++)
            if (k_sm90_fp8_defaults[i].head_dim == c->head_dim) d = &k_sm90_fp8_defaults[i];
        if (!c->swizzle) c->swizzle = c->head_dim >= 128 ? 128 : 64; /* a row is head_dim bytes */
    }
    if (c->dtype == FAJIT_DTYPE_E4M3 && c->head_dim == 256 && (c->mods & FAJIT_MOD_SOFTCAP)) {
        /* FP8 softcap at D256: bc96 holds the overlap, which bc128 cannot (H200, session 16, fp8_compare --configs,
         * causal softcap 50, N4k / N16k TFLOP/s: bc128 without it 770 / 863, bc96 ov 837 / 896, bc64 ov 834 / 882,
         * bc64 ov pp 828 / 872) */
        if (!c->block_n) c->block_n = 96;
        if (!c->pingpong) c->pingpong = -1;
    }
    int n = shape ? (shape->seqlen_q > shape->seqlen_k ? shape->seqlen_q : shape->seqlen_k) : 0;
    int short_causal = c->head_dim == 64 && c->causal && n > 0 && n <= FJ_SM90_SEQLEN_SHORT;
    if (!c->col_warps) c->col_warps = 1;
    /* FP8 decode: a KV head's rows (Nq x the GQA group, packed) fit one consumer warpgroup's 64. One warpgroup, no
     * setmaxnreg: the transposing producer keeps its registers, so its V-tail fill fits at every head dim, and the
     * softmax of the rows no query fills is not computed twice. H200, session 20, bench/kv8_compare.py, Nq 1 D128,
     * the decode table's five rows: br64 bc192 w8 0.545-0.610 of fajit's BF16 decode time, br128 bc192 w12 (the
     * prefill tile) 0.637-0.770 */
    long long fp8_rows = c->dtype == FAJIT_DTYPE_E4M3 && shape && shape->heads_kv > 0 &&
                                 shape->heads_q % shape->heads_kv == 0
                             ? (long long)shape->seqlen_q * (shape->heads_q / shape->heads_kv)
                             : 0;
    if (!c->block_m && !c->warps && fp8_rows > 0 && fp8_rows <= 64) {
        c->block_m = 64;
        /* two CTAs an SM at head dim 64 / 128 (occ2 joins the default knobs of a one-consumer tile that fits half an
         * SM's smem, fp8_ws.h): bc64 s3 (H200, session 20: 1-11% faster than bc192 s2 at one CTA on four of the five
         * decode rows, 512k 1.5% slower; bc96 s2 and bc128 s2 between). Head dim 64's bc128 s2 fits two as it is
         * (not timed); 256 runs one (fp8_ws.c) */
        if (FJ_FP8_OCC2_DECODE && c->head_dim == 128 && !c->block_n && !c->stages) c->block_n = 64, c->stages = 3;
    }
    if (!c->block_m)
        c->block_m = c->warps >= 8 && c->warps % 4 == 0 ? 64 * (c->warps / 4 - 1) : short_causal ? 128 : d->block_m;
    if (!c->warps) c->warps = 4 * (c->block_m / 64 + 1);
    /* FP8 prefill at head dim 64 without an attention variant: FlashAttention-3's br192 bc160 under its register
     * split (knob regs joins the tile's default set: fp8_ws.h FJ_FP8_REGS_WIDE, with the measurements) */
    if (FJ_FP8_REGS_WIDE && c->dtype == FAJIT_DTYPE_E4M3 && !c->mods && !c->block_n && c->head_dim == 64 &&
        c->block_m == 192)
        c->block_n = 160;
    /* (FP8 variants keep the FP8 tile of their head dim: the sweeps below are 16-bit kernels') */
    if (c->head_dim == 128 && c->dtype != FAJIT_DTYPE_E4M3 &&
        (c->mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI | FAJIT_MOD_CHUNK))) {
        /* D=128 variants (fagen bench, 2026-11-26): softcap doubles the MUFU work of a score and runs best at
         * bc128 (H200: 546 TFLOP/s causal N8k against 528 at bc176), ALiBi too (H100: 615 against 603); a window
         * or a chunk restarts the KV stream at every row block and runs best at bc128 with 3 stages (H200: 648
         * for window (4096, 0) at N32k against 620 at bc176 s2; H100: chunk 8192 685 against 660) */
        if (!c->block_n) c->block_n = 128;
        if (!c->stages && (c->mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_CHUNK)))
            /* (a window under the dynamic schedule, which the runtime gives long windows, runs best with 2:
             * H200, window (4096, 0) N32k lpt, 611 against 602 TFLOP/s with 3, 2 rounds) */
            c->stages = c->sched == 1 && (c->mods & FAJIT_MOD_WINDOW) ? 2 : 3;
    }
    /* The lpt schedule (H100, session 9, claiming each tile at the end of the last and sections of at least the
     * grid; lpt / static, 2 rounds of fagen bench --sched): grouped-query causal (Hq >= 4 Hkv) 1.03-1.06x at N8k,
     * D64-D256; multi-head causal at N4k 1.00-1.06x (D64 / D128 / D256), softcap 50 at N8k 1.07-1.10x (D128 /
     * D256); but multi-head at N16k 0.98-0.99x: static stays there (queries shorter than 4096 not measured) */
    /* Chunked attention (its causal triangles are a chunk long, the chunk is a call's value): lpt at any Nq >= 4096
     * (H100: chunk 8192 at N32k 0.94-0.95x plain causal fajit of the same work with static, which lpt made faster) */
    /* A sliding window's schedule depends on its length, which the shape does not carry: the runtime decides
     * (forward.c fj_forward_window_lpt), static here. */
    if (!c->sched && shape && shape->seqlen_q >= 4096 && fj_config_lpt_can(c) && !(c->mods & FAJIT_MOD_WINDOW) &&
        shape->heads_kv > 0 &&
        shape->heads_q % shape->heads_kv == 0 &&
        (shape->heads_q >= 4 * shape->heads_kv || shape->seqlen_q <= 8192 || (c->mods & FAJIT_MOD_CHUNK)))
        c->sched = 1;
    /* ... whose dynamic schedule wants the shorter tile: D128 bc128 against the long-sequence bc176 (H100, session 9,
     * lpt): issue 20's varlen batch (24 documents of 471-5301 tokens, class 8192) 597-602 against 551-562 TFLOP/s,
     * GQA causal N8k 668 against 652-658 */
    if (!c->block_n && c->sched == 1) c->block_n = d->block_n;
    if (!c->block_n) c->block_n = n >= FJ_SM90_SEQLEN_LONG ? d->block_n_long : d->block_n;
    if (!c->stages) c->stages = d->stages;
    if (!c->swizzle) c->swizzle = c->head_dim % 64 == 0 ? 128 : 64;
    if (!c->overlap) c->overlap = d->overlap ? 1 : -1;
    if (!c->pingpong) c->pingpong = d->pingpong == 1 && !short_causal && c->block_m >= 128 && c->overlap == 1 ? 1 : -1;
}

int fj_config_lpt_can(const fajit_config *c)
{
    return c->causal && c->dtype != FAJIT_DTYPE_E4M3 && fj_config_kv_dtype(c) != FAJIT_DTYPE_E4M3;
}

/* The smem map multiplies the tile fields in int: only sizes a rule could accept are mapped (fuzz_config
 * found block_n 3014657 overflowing it; the check then reports such a field). */
static int tiles_in_range(const fajit_config *c)
{
    return c->head_dim > 0 && c->head_dim <= 256 && c->block_m > 0 && c->block_m <= 1024 && c->block_n > 0 &&
           c->block_n <= 256 && c->stages > 0 && c->stages <= 4 && c->warps > 0 && c->warps <= 32;
}
int fj_block_n_half(int block_n) { return block_n / 2 / 16 * 16 > 16 ? block_n / 2 / 16 * 16 : 16; }

/* Shrink stages, then block_n, until the smem map fits `limit` bytes (only fields the caller left 0). */
static void fit_smem(fajit_config *c, const fajit_config *given, int limit)
{
    while (tiles_in_range(c)) {
        fj_plan map;
        memset(&map, 0, sizeof map); /* (the FP8 map reads plan.fp8_knobs: none here, O staged nowhere extra) */
        map.cfg = *c;
        fj_plan_smem_map(&map);
        if (map.smem_bytes <= limit) return;
        if (!given->stages && c->stages > 1) c->stages--;
        else if (!given->block_n && c->block_n > 16) c->block_n = fj_block_n_half(c->block_n);
        else return; /* the check reports it */
    }
}

/* The fills do int arithmetic on the fields a caller gave: they run only when each is small (a rule rejects
 * the others anyway; fuzz_config found warps 134217984 overflowing 16 * warps). */
static int given_small(const fajit_config *c)
{
    const int v[] = {c->head_dim, c->block_m, c->block_n, c->stages, c->warps, c->col_warps};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < -4096 || v[i] > 4096) return 0;
    return 1;
}

/* Attention variants need registers the widest default tiles do not have (plan.c: FJ_MODS_REGS_*): fewer
 * query rows (sm_80: half, down to 64; sm_90a: one consumer warpgroup less, down to 128), then a narrower
 * block_n, where the caller left them to us, until the plan takes the variant. */
static void fit_mods(fajit_config *c, const fajit_config *given)
{
    fj_plan p;
    if (!c->mods || (c->arch != FAJIT_ARCH_SM80 && c->arch != FAJIT_ARCH_SM90A)) return;
    if (c->dtype == FAJIT_DTYPE_E4M3 && (c->mods & FAJIT_MOD_ALIBI)) return; /* no tile holds it: the check says why */
    while (tiles_in_range(c) && fj_plan_build(c, &p) != FAJIT_OK) {
        int rows16 = 16 * c->warps / (c->col_warps > 0 ? c->col_warps : 1);
        if (c->arch == FAJIT_ARCH_SM90A && !given->block_m && !given->warps && c->block_m > 128) {
            c->block_m -= 64;
            c->warps = 4 * (c->block_m / 64 + 1);
        } else if (c->arch == FAJIT_ARCH_SM80 && !given->block_m && !given->warps && c->block_m > 64 &&
                   (c->block_m / 2) % rows16 == 0) {
            c->block_m /= 2;
        } else if (!given->block_n && c->block_n > 16) {
            c->block_n = fj_block_n_half(c->block_n);
        } else {
            return; /* the check reports it */
        }
    }
}

/* FP8 on sm_90a: where the register model refuses the heuristic's schedule, ping-pong goes, then the overlap
 * (only fields the caller left 0). D256 causal: ping-pong's 4 registers (sm90.c) pass the 240 of the regs split
 * (ptxas: 4 bytes of spill), so it runs with the overlap alone, FlashAttention-3's causal schedule too. A
 * FAJIT_FP8_KNOBS without regs (232 registers) holds no overlap at D256: br128 bc128 without it, the default before
 * 2026-11-27. given_*: the caller's fields as given (callers may pass cfg itself as given). */
static void fit_fp8_regs(fajit_config *c, int given_overlap, int given_pingpong, int given_rows)
{
    fj_plan p;
    if (c->dtype != FAJIT_DTYPE_E4M3 || c->arch != FAJIT_ARCH_SM90A) return;
    fajit_config first = *c;
    while (tiles_in_range(c) && fj_plan_build(c, &p) == FAJIT_ERR_INVALID_CONFIG) {
        /* an attention variant's registers (window bounds, softcap) on three consumer warpgroups: two keep the
         * overlap, without ping-pong (H200, session 16, bench/fp8_compare.py --configs, D64 causal N16k, TFLOP/s
         * br128 ov / br128 ov pp / br192 without the overlap: window (128, 0) + sinks 132 / 121 / 117, softcap 50
         * 367 / 329 / 359, window (4096, 0) 483 / 420 / 456) */
        if (c->mods && !given_rows && c->block_m > 128) {
            c->block_m = 128, c->warps = 12;
            if (!given_pingpong) c->pingpong = -1;
        }
        else if (!given_pingpong && c->pingpong == 1) c->pingpong = -1;
        else if (!given_overlap && c->pingpong != 1 && c->overlap == 1) c->overlap = -1;
        else {
            *c = first; /* refused for another reason: the check reports it on the heuristic's schedule */
            return;
        }
    }
}

int fj_config_try_cross_tile(fajit_config *c)
{
    fj_plan p;
    if (c->cross_tile || c->arch != FAJIT_ARCH_SM90A || !tiles_in_range(c)) return 0;
    c->cross_tile = 1;
    if (fj_plan_build(c, &p) == FAJIT_OK) return 1;
    c->cross_tile = 0;
    return 0;
}

/* The cross-tile tail where it measured faster (H200, session 15, fagen bench, 2 interleaved rounds, on / off;
 * bench/results/h200-session15-2026-11-28.md): causal head_dim 64 with grouped-query heads, N 4k-16k: +0.1-2.0%
 * (Hq/Hkv 4 and 8; sinks +1.1-1.8%); multi-head: +1.6% at N4k but -2.5% at N16k, non-causal -1-2%, softcap -1.5%,
 * windows of 1024-4096 keys -1..-3%, head_dim 128 level. Only for a shape, and a 16-bit causal config without a
 * window, chunk, softcap or ALiBi (a short window's rule, which needs the window's length: forward.c). */
static void fit_cross_tile(fajit_config *c, const fajit_shape *shape)
{
    if (!shape || !c->causal || c->head_dim > 64 || !fj_config_lpt_can(c) ||
        (c->mods & (FAJIT_MOD_WINDOW | FAJIT_MOD_CHUNK | FAJIT_MOD_SOFTCAP | FAJIT_MOD_ALIBI)) || shape->heads_kv <= 0 ||
        shape->heads_q % shape->heads_kv != 0 || shape->heads_q < 4 * shape->heads_kv)
        return;
    fj_config_try_cross_tile(c);
}

void fj_config_heuristic(fajit_config *cfg, const fajit_config *given, const fajit_shape *shape, int smem_limit)
{
    if (cfg->head_dim == 0) cfg->head_dim = 128;
    if (cfg->dtype == FAJIT_DTYPE_AUTO) cfg->dtype = FAJIT_DTYPE_BF16;
    if (!given_small(cfg)) return; /* fajit_config_check names the field */
    int given_overlap = given ? given->overlap : 0, given_pingpong = given ? given->pingpong : 0; /* (may be cfg) */
    int given_rows = given ? given->block_m || given->warps : 0;
    if (cfg->arch == FAJIT_ARCH_SM80) {
        fill_sm80(cfg, shape);
        if (!cfg->overlap) cfg->overlap = -1;
        if (!cfg->pingpong) cfg->pingpong = -1;
    } else if (cfg->arch == FAJIT_ARCH_SM90A) {
        fill_sm90(cfg, shape);
    } else if (cfg->arch == FAJIT_ARCH_SM100A) {
        fj_sm100_fill(cfg);
    }
    const fj_arch_info *target = fj_arch_of_path(cfg->arch);
    int limit = smem_limit ? smem_limit : target ? target->smem_per_block : 0;
    if (limit) fit_smem(cfg, given, limit);
    fit_fp8_regs(cfg, given_overlap, given_pingpong, given_rows);
    fit_mods(cfg, given);
    fit_cross_tile(cfg, shape);
}
