/*
 * cmd_tune.c - fagen tune: time kernel configs on the GPU per problem class and save the winners
 * (fajit_tune), which fajit_config_fill, fajit_attention_forward and fagen bench then use.
 *
 *   fagen tune [--dtype f16|bf16|e4m3] [--headdim D] [--causal] [--seqlen N] [--batch B] [--heads H]
 *              [--max-candidates N] [--reps N] [--budget S] [--device N] [--no-save]
 *   fagen tune --grid issue3 [the same filters and options]
 *       D 64/128/256 x bf16/f16 x causal/not x N 512..16384, B*N = 16384, H*D = 2048 (72 classes);
 *       --dtype, --headdim, --causal and --seqlen given with --grid keep only the matching classes.
 *   fagen tune --grid decode [--dtype] [--headdim D] [--causal] [--seqlen NQ] [--reps N] [--device N] [--no-save]
 *       the split count of split-KV on issue 11's rows (B/Hq/Hkv/Nk 1/32/32/32k, 1/32/8/128k, 8/32/8/8k,
 *       64/32/8/2k, 1/8/1/512k) x Nq 1/4/16 (--seqlen keeps one Nq): 15 decode classes (tune_decode.c), a
 *       few seconds each; --causal applies to Nq > 1.
 *
 * Output: a line per candidate as it finishes (index/total, config, TFLOP/s or why it was skipped), the
 * winner of each class and where it was saved, then a table of every class and the total time.
 * Exit status: 0 every class tuned, 1 a class failed (the others are still tuned and saved), 2 usage.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "runtime/context.h"
#include "runtime/tune.h"

#define TUNE_MAX_CLASSES 128

typedef struct tune_cli {
    fajit_config filter; /* --dtype, --headdim, --causal */
    int seqlen, batch, heads;
    int max_candidates, reps, budget, device, no_save, grid_issue3, grid_decode, help;
} tune_cli;

typedef struct tune_class {
    fajit_dtype dtype;
    int head_dim, causal;
    fajit_shape shape;
    fajit_tune_result res;
    fj_tune_decode_result dres; /* --grid decode */
    int ok;
} tune_class;

static const char *dtype_text(fajit_dtype d)
{
    return d == FAJIT_DTYPE_F16 ? "f16" : d == FAJIT_DTYPE_E4M3 ? "e4m3" : "bf16";
}

/* ---- flags ------------------------------------------------------------------------------------ */

static void tune_usage(FILE *f)
{
    fputs("usage: fagen tune [--dtype f16|bf16|e4m3] [--headdim D] [--causal] [--seqlen N] [--batch B] [--heads H]\n"
          "                  [--max-candidates N] [--reps N] [--budget S] [--device N] [--no-save]\n"
          "       fagen tune --grid issue3 [filters and options as above]\n"
          "       fagen tune --grid decode [--dtype] [--headdim] [--causal] [--seqlen NQ] [--reps] [--no-save]\n"
          "Time the kernel configs of a problem class on the GPU and keep the fastest: fajit_config_fill,\n"
          "fajit_attention_forward and fagen bench use it from then on. A class is (dtype, head dim, mask,\n"
          "sequence-length class = the power of two >= max(Nq, Nk), 128..16384) on one GPU, driver and fajit\n"
          "version. Winners go to tuned-v1.txt in the cache directory (text; safe to edit or delete).\n\n"
          "  --dtype f16|bf16|e4m3          default bf16 (with --grid: only this dtype; e4m3: the FP8 kernels,\n"
          "                                 sm_90a, head dims 64 / 128 / 256)\n"
          "  --headdim 64|96|128|192|256    default 128 (with --grid: only this head dim)\n"
          "  --causal                       causal mask (with --grid: only the causal classes)\n"
          "  --seqlen N                     sequence length timed, default 4096 (with --grid: only this N)\n"
          "  --batch B                      default 16384 / N (at least 1)\n"
          "  --heads H                      default 2048 / headdim\n"
          "  --grid issue3                  D 64/128/256 x bf16/f16 x causal/not x N 512..16384, B*N = 16384,\n"
          "                                 H*D = 2048: 72 classes\n"
          "  --grid decode                  split-KV's split count on issue 11's decode rows (B/Hq/Hkv/Nk\n"
          "                                 1/32/32/32k, 1/32/8/128k, 8/32/8/8k, 64/32/8/2k, 1/8/1/512k) x Nq\n"
          "                                 1/4/16 (--seqlen: one Nq): 15 classes; calls with num_splits = 0\n"
          "                                 then use the winner of their class\n"
          "  --max-candidates N             configs timed per class, 1..1000 (default 16)\n"
          "  --reps N                       timed calls per config, median kept, >= 10 (default 10)\n"
          "  --budget S                     seconds per class after which no new config starts (default none)\n"
          "  --device N                     CUDA device ordinal (default 0)\n"
          "  --no-save                      do not write the tune file (winners last for this run only)\n\n"
          "example: fagen tune --headdim 128 --causal --seqlen 8192\n",
          f);
}

/* An int flag of tune's own: FAGEN_ARG_NOT_MINE if argv[*i] is none of them. */
static int tune_int_flag(int argc, char **argv, int *i, tune_cli *o)
{
    static const fagen_int_flag k_ints[] = {
        {"--seqlen", offsetof(tune_cli, seqlen), 1, 1 << 24},
        {"--batch", offsetof(tune_cli, batch), 1, 65535},
        {"--heads", offsetof(tune_cli, heads), 1, 65535},
        {"--max-candidates", offsetof(tune_cli, max_candidates), 1, 1000},
        {"--reps", offsetof(tune_cli, reps), 10, 100000},
        {"--budget", offsetof(tune_cli, budget), 1, 86400},
        {"--device", offsetof(tune_cli, device), 0, 1023},
    };
    return fagen_parse_int_flag(argc, argv, i, k_ints, sizeof k_ints / sizeof k_ints[0], o);
}

/* --grid WORD and --no-save. */
static int tune_word_flag(int argc, char **argv, int *i, tune_cli *o)
{
    char flag[64];
    if (strcmp(argv[*i], "--no-save") == 0) {
        o->no_save = 1;
        return FAGEN_ARG_TAKEN;
    }
    if (!fagen_flag_is(argv[*i], "--grid")) return FAGEN_ARG_NOT_MINE;
    const char *val = fagen_flag_value(argc, argv, i, flag, sizeof flag);
    if (!val) return FAGEN_ARG_ERROR;
    if (strcmp(val, "issue3") == 0) o->grid_issue3 = 1;
    else if (strcmp(val, "decode") == 0) o->grid_decode = 1;
    else {
        fprintf(stderr, "fagen: %s %s: must be issue3 or decode\n", flag, val);
        return FAGEN_ARG_ERROR;
    }
    return FAGEN_ARG_TAKEN;
}

static int tune_parse(int argc, char **argv, tune_cli *o)
{
    memset(o, 0, sizeof *o);
    fagen_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            o->help = 1;
            return FAGEN_EXIT_OK;
        }
        if (fagen_flag_once(&seen, w) != FAGEN_ARG_TAKEN) return FAGEN_EXIT_USAGE;
        int r = tune_int_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE) r = tune_word_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE) r = fagen_parse_config_flag(argc, argv, &i, &o->filter);
        if (r == FAGEN_ARG_NOT_MINE) {
            fprintf(stderr, "fagen: %s: unknown flag for 'tune' (see fagen tune --help)\n", w);
            return FAGEN_EXIT_USAGE;
        }
        if (r == FAGEN_ARG_ERROR) return FAGEN_EXIT_USAGE;
    }
    const fajit_config *f = &o->filter;
    if (o->grid_decode && (o->batch || o->heads || o->budget || o->max_candidates)) {
        fprintf(stderr, "fagen: tune --grid decode takes its shapes from the grid: give no --batch, --heads, --budget "
                        "or --max-candidates\n");
        return FAGEN_EXIT_USAGE;
    }
    if (fagen_config_has_tiles(f)) {
        fprintf(stderr, "fagen: tune chooses --arch, --br, --bc, --stages, --swizzle, --warps and --col-warps; give only --dtype, "
                        "--headdim and --causal\n");
        return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

/* ---- classes ---------------------------------------------------------------------------------- */

static tune_class class_make(const tune_cli *o, fajit_dtype dtype, int d, int causal, int n)
{
    tune_class c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype, c.head_dim = d, c.causal = causal;
    c.shape.seqlen_q = c.shape.seqlen_k = n;
    c.shape.batch = o->batch && !o->grid_issue3 ? o->batch : (16384 / n > 1 ? 16384 / n : 1);
    c.shape.heads_q = c.shape.heads_kv = o->heads && !o->grid_issue3 ? o->heads : 2048 / d;
    return c;
}

/* The decode rows of issue 11 (B, Hq, Hkv, Nk; as fagen bench --grid decode) x Nq 1, 4, 16. */
static int classes_decode(const tune_cli *o, tune_class *out)
{
    static const int rows[][4] = {{1, 32, 32, 32768}, {1, 32, 8, 131072}, {8, 32, 8, 8192}, {64, 32, 8, 2048},
                                  {1, 8, 1, 524288}};
    static const int nqs[] = {1, 4, 16};
    const fajit_config *f = &o->filter;
    int n = 0;
    for (int ni = 0; ni < 3; ni++)
        for (int ri = 0; ri < 5; ri++) {
            if (o->seqlen && o->seqlen != nqs[ni]) continue;
            tune_class c;
            memset(&c, 0, sizeof c);
            c.dtype = f->dtype ? f->dtype : FAJIT_DTYPE_BF16;
            c.head_dim = f->head_dim ? f->head_dim : 128;
            c.causal = f->causal && nqs[ni] > 1;
            c.shape = (fajit_shape){rows[ri][0], rows[ri][1], rows[ri][2], nqs[ni], rows[ri][3]};
            out[n++] = c;
        }
    return n;
}

/* The classes to tune: one, or the issue-3 grid less the filtered-out ones, or the decode grid. */
static int classes_make(const tune_cli *o, tune_class *out)
{
    static const int dims[] = {64, 128, 256}, lens[] = {512, 1024, 2048, 4096, 8192, 16384};
    static const fajit_dtype dtypes[] = {FAJIT_DTYPE_BF16, FAJIT_DTYPE_F16};
    const fajit_config *f = &o->filter;
    int n = 0;
    if (o->grid_decode) return classes_decode(o, out);
    if (!o->grid_issue3) {
        out[0] = class_make(o, f->dtype ? f->dtype : FAJIT_DTYPE_BF16, f->head_dim ? f->head_dim : 128, f->causal,
                            o->seqlen ? o->seqlen : 4096);
        return 1;
    }
    for (int di = 0; di < 3; di++)
        for (int ti = 0; ti < 2; ti++)
            for (int causal = 0; causal <= 1; causal++)
                for (int ni = 0; ni < 6; ni++) {
                    if ((f->head_dim && f->head_dim != dims[di]) || (f->dtype && f->dtype != dtypes[ti]) ||
                        (f->causal && !causal) || (o->seqlen && o->seqlen != lens[ni]))
                        continue;
                    out[n++] = class_make(o, dtypes[ti], dims[di], causal, lens[ni]);
                }
    return n;
}

/* ---- progress --------------------------------------------------------------------------------- */

/* The first line of a note, at most 240 characters. */
static void print_note_line(const char *note)
{
    int len = (int)strcspn(note, "\n");
    printf("%.*s%s\n", len > 240 ? 240 : len, note, len > 240 || note[len] ? " ..." : "");
}

static void on_progress(void *user, int index, int total, const fajit_config *cfg, double tflops, const char *note)
{
    char text[128];
    (void)user;
    if (index < 0 || !cfg) { /* decode notes (cfg NULL) carry their own text */
        printf("  ");
        print_note_line(note);
    } else {
        fajit_config_format(cfg, text, sizeof text);
        printf("  %3d/%-3d %-50s ", index + 1, total, text);
        if (tflops >= 0) printf("%7.1f TFLOP/s  ", tflops);
        else printf("skip: ");
        print_note_line(note);
    }
    fflush(stdout);
}

/* ---- the command ------------------------------------------------------------------------------ */

/* A class that failed: the library's message; FAGEN_EXIT_FAIL. */
static int print_failed(void)
{
    printf("  failed: ");
    print_note_line(fajit_errmsg());
    fflush(stdout);
    return FAGEN_EXIT_FAIL;
}

static int tune_one(fajit_context *ctx, const tune_cli *o, tune_class *c, int i, int n)
{
    fajit_tune_options opt = fajit_tune_options_default();
    char text[128];
    opt.max_candidates = o->max_candidates;
    opt.reps = o->reps;
    opt.time_budget_s = o->budget;
    opt.persist = !o->no_save;
    opt.progress = on_progress;
    printf("[%d/%d] %s d%d %s N%d\n", i + 1, n, dtype_text(c->dtype), c->head_dim, c->causal ? "causal" : "noncausal",
           c->shape.seqlen_q);
    fflush(stdout);
    fajit_status st = fajit_tune(ctx, &c->shape, c->dtype, c->head_dim, c->causal, &opt, NULL, &c->res);
    if (st != FAJIT_OK) return print_failed();
    c->ok = 1;
    fajit_config_format(&c->res.best, text, sizeof text);
    double gain = c->res.heuristic_tflops > 0 ? 100.0 * (c->res.tflops / c->res.heuristic_tflops - 1.0) : 0.0;
    printf("  winner: %s  %.1f TFLOP/s (heuristic %.1f, %+.1f%%), %d timed, %d skipped, %.1f s; %s\n", text,
           c->res.tflops, c->res.heuristic_tflops, gain, c->res.timed, c->res.skipped, c->res.seconds,
           c->res.saved ? "saved" : "not saved");
    fflush(stdout);
    return FAGEN_EXIT_OK;
}

/* One decode class: fj_tune_decode, then its winner. */
static int tune_one_decode(fajit_context *ctx, const tune_cli *o, tune_class *c, int i, int n)
{
    fajit_tune_options opt = fajit_tune_options_default();
    const fajit_shape *s = &c->shape;
    fajit_attention_args a;
    memset(&a, 0, sizeof a);
    a.dtype = c->dtype, a.batch = s->batch, a.heads_q = s->heads_q, a.heads_kv = s->heads_kv;
    a.seqlen_q = s->seqlen_q, a.seqlen_k = s->seqlen_k, a.head_dim = c->head_dim, a.causal = c->causal;
    opt.reps = o->reps;
    opt.persist = !o->no_save;
    opt.progress = on_progress;
    printf("[%d/%d] decode %s d%d %s B%d H%d/%d Nq%d Nk%d\n", i + 1, n, dtype_text(c->dtype), c->head_dim,
           c->causal ? "causal" : "noncausal", s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k);
    fflush(stdout);
    fajit_status st = fj_tune_decode(ctx, &a, &opt, &c->dres);
    if (st != FAJIT_OK) return print_failed();
    c->ok = 1;
    const fj_tune_decode_result *r = &c->dres;
    printf("  winner: %d splits on br%d bc%d  %.0f GB/s (heuristic %d splits %.0f GB/s, %+.1f%%), %d timed, %.1f s; "
           "%s\n", r->splits, r->tile_m, r->tile_n, r->gbs, r->heuristic_splits, r->heuristic_gbs,
           r->heuristic_gbs > 0 ? 100.0 * (r->gbs / r->heuristic_gbs - 1.0) : 0.0, r->timed, r->seconds,
           r->saved ? "saved" : "not saved");
    fflush(stdout);
    return FAGEN_EXIT_OK;
}

static void print_summary_decode(const tune_class *cls, int n)
{
    printf("\n%-40s %-6s %8s %9s %8s %7s\n", "decode shape", "tile", "splits", "heuristic", "GB/s", "gain");
    for (int i = 0; i < n; i++) {
        const tune_class *c = &cls[i];
        const fj_tune_decode_result *r = &c->dres;
        char name[64];
        snprintf(name, sizeof name, "B%d H%d/%d Nq%d Nk%d %s d%d%s", c->shape.batch, c->shape.heads_q,
                 c->shape.heads_kv, c->shape.seqlen_q, c->shape.seqlen_k, dtype_text(c->dtype), c->head_dim,
                 c->causal ? " causal" : "");
        if (!c->ok) {
            printf("%-40s (failed)\n", name);
            continue;
        }
        printf("%-40s %2dx%-3d %8d %9d %8.0f %+6.1f%%\n", name, r->tile_m, r->tile_n, r->splits, r->heuristic_splits,
               r->gbs, r->heuristic_gbs > 0 ? 100.0 * (r->gbs / r->heuristic_gbs - 1.0) : 0.0);
    }
}

/* The forward classes' table. */
static void print_summary_forward(const tune_class *cls, int n)
{
    char text[128];
    printf("\n%-26s %-50s %8s %9s %7s\n", "class", "winner", "TFLOP/s", "heuristic", "gain");
    for (int i = 0; i < n; i++) {
        const tune_class *c = &cls[i];
        char name[48];
        snprintf(name, sizeof name, "%s d%d %s n%d", dtype_text(c->dtype), c->head_dim,
                 c->causal ? "causal" : "noncausal", c->res.seqlen_class ? c->res.seqlen_class : c->shape.seqlen_q);
        if (!c->ok) {
            printf("%-26s (failed)\n", name);
            continue;
        }
        fajit_config_format(&c->res.best, text, sizeof text);
        double gain = c->res.heuristic_tflops > 0 ? 100.0 * (c->res.tflops / c->res.heuristic_tflops - 1.0) : 0.0;
        printf("%-26s %-50s %8.1f %9.1f %+6.1f%%\n", name, text, c->res.tflops, c->res.heuristic_tflops, gain);
    }
}

static void print_summary(const fajit_context *ctx, const tune_class *cls, int n, int decode, double seconds,
                          int saved_any)
{
    int ok = 0;
    if (decode) print_summary_decode(cls, n);
    else print_summary_forward(cls, n);
    for (int i = 0; i < n; i++) ok += cls[i].ok;
    printf("total: %d of %d classes tuned in %.1f s", ok, n, seconds);
    if (saved_any) printf("; winners saved to %s\n", fajit_context_tune_file(ctx));
    else printf("; nothing saved\n");
}

/* The flags and the classes they pick (cls: TUNE_MAX_CLASSES). FAGEN_EXIT_OK with *n = 0 after --help
 * (printed), else the exit status of bad flags or a filter that matches no class. */
static int tune_prepare(int argc, char **argv, tune_cli *o, tune_class *cls, int *n)
{
    *n = 0;
    int rc = tune_parse(argc, argv, o);
    if (rc != FAGEN_EXIT_OK || o->help) {
        if (rc == FAGEN_EXIT_OK) tune_usage(stdout);
        return rc;
    }
    if ((*n = classes_make(o, cls)) == 0) {
        fprintf(stderr, "fagen: tune --grid %s: no class of the grid matches the filters\n",
                o->grid_decode ? "decode" : "issue3");
        return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

int fagen_args_tune(int argc, char **argv)
{
    tune_cli o;
    int n = 0;
    tune_class *cls = calloc(TUNE_MAX_CLASSES, sizeof *cls);
    int rc = cls ? tune_prepare(argc, argv, &o, cls, &n) : FAGEN_EXIT_FAIL;
    free(cls);
    return rc;
}

int fagen_cmd_tune(int argc, char **argv)
{
    tune_cli o;
    fajit_context *ctx = NULL;
    int n = 0;
    tune_class *cls = calloc(TUNE_MAX_CLASSES, sizeof *cls);
    int rc = cls ? tune_prepare(argc, argv, &o, cls, &n) : FAGEN_EXIT_FAIL;
    if (rc != FAGEN_EXIT_OK || n == 0) {
        free(cls);
        return rc;
    }
    fajit_context_options opt = fajit_context_options_default();
    opt.device = o.device;
    fajit_status st = fajit_context_create(&opt, &ctx);
    if (st != FAJIT_OK) {
        rc = FAGEN_EXIT_FAIL;
        if (st == FAJIT_ERR_INVALID_ARGUMENT) rc = fagen_report_status(st, "context"); /* e.g. FAJIT_CACHE_DIR too long */
        else fprintf(stderr, "fagen: tune needs a GPU: %s\n", fajit_errmsg());
        free(cls);
        return rc;
    }
    const char *file = fajit_context_tune_file(ctx);
    printf("fagen tune on %s (%s, driver %d): %d %sclass%s, at most %d %s each, median of %d calls\n",
           ctx->device_name, ctx->sm, ctx->driver_version, n, o.grid_decode ? "decode " : "", n == 1 ? "" : "es",
           o.grid_decode ? FJ_TUNE_DECODE_MAX_CANDIDATES : o.max_candidates ? o.max_candidates : 16,
           o.grid_decode ? "split counts" : "configs", o.reps ? o.reps : 10);
    printf("tune file: %s\n", o.no_save ? "(not written: --no-save)"
                              : file[0]  ? file
                                         : "(none: the disk cache is off)");
    fflush(stdout);
    double t0 = fj_now_ms() / 1e3;
    int saved_any = 0;
    for (int i = 0; i < n; i++) {
        int r = o.grid_decode ? tune_one_decode(ctx, &o, &cls[i], i, n) : tune_one(ctx, &o, &cls[i], i, n);
        if (r != FAGEN_EXIT_OK) rc = FAGEN_EXIT_FAIL;
        saved_any |= cls[i].res.saved | cls[i].dres.saved;
    }
    print_summary(ctx, cls, n, o.grid_decode, fj_now_ms() / 1e3 - t0, saved_any);
    fajit_context_destroy(ctx);
    free(cls);
    return rc;
}
