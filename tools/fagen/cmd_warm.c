/*
 * cmd_warm.c - fagen warm: compile many kernels at once on every core (fajit_warm), into the disk cache
 * and, with a GPU, into a context; without a GPU (--sm) it compiles to disk only, for CI and image builds.
 *
 *   fagen warm [config flags] [--seqlen N] [--batch B] [--heads H] [--file FILE] [--sm SM] [--device N]
 *              [--threads N] [--cache-dir DIR] [--list] [-q]
 *
 * Kernels come from the config flags (one) and --file (one a line: canonical text or config flags). A
 * progress bar goes to stderr when it is a terminal, else a line per kernel; the summary goes to stdout.
 * Exit status: 0 every kernel warmed, 1 one failed (the others are still warmed), 2 usage or a bad config.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "runtime/compile.h"
#include "base/error.h"
#include "runtime/tune_file.h"
#include "runtime/warm.h"

#define WARM_LINE_MAX 1024
#define WARM_LINE_WORDS 48

typedef struct warm_cli {
    fajit_config cfg; /* the config flags */
    int cfg_given;
    int seqlen, batch, heads, device, threads, list, quiet, help;
    const char *file, *sm, *cache_dir;
} warm_cli;

typedef struct warm_list {
    fajit_config *cfgs;
    int n, cap;
} warm_list;

static void warm_usage(FILE *f)
{
    fputs("usage: fagen warm [config flags] [--seqlen N] [--batch B] [--heads H] [--file FILE] [--sm SM]\n"
          "                  [--device N] [--threads N] [--cache-dir DIR] [--list] [-q]\n"
          "Compile many kernels at once, one thread per CPU (fajit_warm), so that later calls find them cached.\n"
          "With a GPU they are loaded into a context of --device and stored in the disk cache; with --sm no GPU\n"
          "is used: they are compiled for that GPU into the disk cache only (CI, container images), where a\n"
          "process on such a GPU with the same fajit build and compiler library finds them.\n\n"
          "  config flags                   one kernel (fagen ptx --help lists them); zero fields are filled as\n"
          "                                 fajit_config_fill fills them (the GPU's path, the tuned winner)\n"
          "  --file FILE                    kernels, one a line: a canonical config text (\"sm_90a bf16 d128 br128\n"
          "                                 bc128 s2 sw128 w12 ov pp noncausal\") or config flags (\"--headdim 64\n"
          "                                 --causal\"); '#' starts a comment; - reads stdin\n"
          "  --seqlen N, --batch B, --heads H  the shape every config is filled for (default: none)\n"
          "  --sm SM                        compile without a GPU, for SM's GPU: sm_90a or sm_90 (H100, H200:\n"
          "                                 the sm_90a path for --arch auto), sm_80, sm_86, sm_89, ...\n"
          "  --device N                     the GPU to load into (default 0; not with --sm)\n"
          "  --threads N                    compile threads, 0 = one per CPU (default)\n"
          "  --cache-dir DIR                the disk cache (default: $FAJIT_CACHE_DIR, else ~/.cache/fajit)\n"
          "  --list                         print the distinct filled configs and stop (nothing compiled)\n"
          "  -q                             no progress bar or per-kernel lines\n\n"
          "The repository's bench/warm100-sm90a.txt lists 100 distinct sm_90a kernels (--file).\n\n"
          "examples:\n"
          "  fagen warm --sm sm_90a --headdim 64 --causal --cache-dir fj-cache\n",
          f);
}

/* ---- flags ------------------------------------------------------------------------------------ */

static int warm_int_flag(int argc, char **argv, int *i, warm_cli *o)
{
    static const fagen_int_flag k_ints[] = {
        {"--seqlen", offsetof(warm_cli, seqlen), 1, 1 << 24},
        {"--batch", offsetof(warm_cli, batch), 1, 65535},
        {"--heads", offsetof(warm_cli, heads), 1, 65535},
        {"--device", offsetof(warm_cli, device), 0, 1023},
        {"--threads", offsetof(warm_cli, threads), 0, FAJIT_WARM_MAX_THREADS},
    };
    return fagen_parse_int_flag(argc, argv, i, k_ints, sizeof k_ints / sizeof k_ints[0], o);
}

static int warm_word_flag(int argc, char **argv, int *i, warm_cli *o)
{
    char flag[64];
    const char *w = argv[*i];
    if (strcmp(w, "--list") == 0) return o->list = 1, FAGEN_ARG_TAKEN;
    if (strcmp(w, "-q") == 0) return o->quiet = 1, FAGEN_ARG_TAKEN;
    const char **dst = fagen_flag_is(w, "--file") ? &o->file : fagen_flag_is(w, "--sm") ? &o->sm
                       : fagen_flag_is(w, "--cache-dir") ? &o->cache_dir : NULL;
    if (!dst) return FAGEN_ARG_NOT_MINE;
    const char *val = fagen_flag_value(argc, argv, i, flag, sizeof flag);
    if (!val) return FAGEN_ARG_ERROR;
    *dst = val;
    return FAGEN_ARG_TAKEN;
}

static int warm_parse(int argc, char **argv, warm_cli *o)
{
    int device_given = 0;
    memset(o, 0, sizeof *o);
    fagen_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            o->help = 1;
            return FAGEN_EXIT_OK;
        }
        if (fagen_flag_once(&seen, w) != FAGEN_ARG_TAKEN) return FAGEN_EXIT_USAGE;
        device_given |= fagen_flag_is(w, "--device");
        int r = warm_int_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE) r = warm_word_flag(argc, argv, &i, o);
        if (r == FAGEN_ARG_NOT_MINE && (r = fagen_parse_config_flag(argc, argv, &i, &o->cfg)) == FAGEN_ARG_TAKEN)
            o->cfg_given = 1;
        if (r == FAGEN_ARG_NOT_MINE) {
            fprintf(stderr, "fagen: %s: unknown flag for 'warm' (see fagen warm --help)\n", w);
            return FAGEN_EXIT_USAGE;
        }
        if (r == FAGEN_ARG_ERROR) return FAGEN_EXIT_USAGE;
    }
    if (o->sm && !fj_arch_find(o->sm)) {
        char names[256];
        fj_compile_list_targets(names, sizeof names);
        fprintf(stderr, "fagen: --sm %s: not a known GPU; known ones are %s\n", o->sm, names);
        return FAGEN_EXIT_USAGE;
    }
    if (o->sm && device_given) {
        fprintf(stderr, "fagen: warm --sm compiles without a GPU and --device loads into one: give one of them\n");
        return FAGEN_EXIT_USAGE;
    }
    return FAGEN_EXIT_OK;
}

/* ---- kernels ------------------------------------------------------------------------------------ */

static int list_add(warm_list *l, const fajit_config *c)
{
    if (l->n == FAJIT_WARM_MAX_CONFIGS) {
        fprintf(stderr, "fagen: warm: more than %d kernels; split the file\n", FAJIT_WARM_MAX_CONFIGS);
        return -1;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        fajit_config *p = realloc(l->cfgs, (size_t)cap * sizeof *p);
        if (!p) return fprintf(stderr, "fagen: warm: out of memory\n"), -1;
        l->cfgs = p, l->cap = cap;
    }
    fajit_config c0 = *c;
    if (c0.head_dim == 0) c0.head_dim = 128; /* as every fagen command */
    l->cfgs[l->n++] = c0;
    return 0;
}

/* One line of --file: canonical text, or config flags; blank and comment lines give nothing (1). */
static int line_config(char *line, const char *where, fajit_config *c)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *words[WARM_LINE_WORDS + 1];
    int n = 1;
    words[0] = "warm";
    for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n > WARM_LINE_WORDS) return fprintf(stderr, "fagen: %s: more than %d words\n", where, WARM_LINE_WORDS), -1;
        words[n++] = t;
    }
    if (n == 1) return 1;
    memset(c, 0, sizeof *c);
    if (words[1][0] != '-') { /* canonical text: put the words back together */
        char text[WARM_LINE_MAX];
        size_t used = 0;
        for (int i = 1; i < n; i++) used += (size_t)snprintf(text + used, sizeof text - used, "%s ", words[i]);
        const char *bad = fj_tune_parse_config(text, c);
        if (bad) return fprintf(stderr, "fagen: %s: %s\n", where, bad), -1;
        return 0;
    }
    fagen_seen seen = {0};
    for (int i = 1; i < n; i++) {
        if (fagen_flag_once(&seen, words[i]) != FAGEN_ARG_TAKEN) return -1;
        int r = fagen_parse_config_flag(n, words, &i, c);
        if (r == FAGEN_ARG_NOT_MINE) fprintf(stderr, "fagen: %s: %s: not a config flag\n", where, words[i]);
        if (r != FAGEN_ARG_TAKEN) return -1;
    }
    return 0;
}

static int file_read(const char *path, warm_list *l)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) return fprintf(stderr, "fagen: --file %s: %s\n", path, strerror(errno)), -1;
    char line[WARM_LINE_MAX], where[WARM_LINE_MAX + 32];
    int rc = 0;
    for (int no = 1; rc == 0 && fgets(line, sizeof line, f); no++) {
        fajit_config c;
        snprintf(where, sizeof where, "%s:%d", path, no);
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "fagen: %s: line longer than %d characters\n", where, WARM_LINE_MAX - 2);
            rc = -1;
            break;
        }
        int r = line_config(line, where, &c);
        if (r < 0 || (r == 0 && list_add(l, &c) != 0)) rc = -1;
    }
    if (f != stdin) fclose(f);
    return rc;
}

/* ---- progress --------------------------------------------------------------------------------- */

typedef struct warm_view {
    int tty, quiet, list, failed;
    double t0;
} warm_view;

static void bar_draw(const warm_view *v, int done, int total)
{
    char bar[41];
    int fill = total ? (int)((long long)done * 40 / total) : 40;
    for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
    bar[40] = '\0';
    fprintf(stderr, "\r\033[Kfagen warm: [%s] %d/%d  %d failed  %.1f s", bar, done, total, v->failed,
            fj_warm_now() - v->t0);
    fflush(stderr);
}

static void warm_progress(void *user, int done, int total, int index, const fajit_config *cfg, fajit_status status,
                          const char *note)
{
    warm_view *v = user;
    char text[256];
    fajit_config_format(cfg, text, sizeof text);
    if (v->list) {
        printf("%s\n", text);
        return;
    }
    if (status != FAJIT_OK) v->failed++;
    if (v->quiet && status == FAJIT_OK) return;
    if (v->tty && status == FAJIT_OK) {
        bar_draw(v, done, total);
        return;
    }
    if (v->tty) fputs("\r\033[K", stderr);
    if (status != FAJIT_OK)
        fprintf(stderr, "[%*d/%d] FAILED configs[%d] %s: %s\n", total > 999 ? 5 : 3, done, total, index, text, note);
    else
        fprintf(stderr, "[%*d/%d] %s: %s\n", total > 999 ? 5 : 3, done, total, text, note);
    if (v->tty && !v->quiet) bar_draw(v, done, total);
}

/* ---- run -------------------------------------------------------------------------------------- */

static int warm_collect(const warm_cli *o, warm_list *l)
{
    if (o->cfg_given && list_add(l, &o->cfg) != 0) return -1;
    if (o->file && file_read(o->file, l) != 0) return -1;
    if (!o->cfg_given && !o->file && list_add(l, &o->cfg) != 0) return -1; /* the default kernel of D 128 */
    return 0;
}

int fagen_args_warm(int argc, char **argv)
{
    warm_cli o;
    int rc = warm_parse(argc, argv, &o);
    if (rc == FAGEN_EXIT_OK && o.help) warm_usage(stdout);
    return rc;
}

static int warm_run(const warm_cli *o, warm_list *l)
{
    fajit_context_options co = fajit_context_options_default();
    fajit_context *ctx = NULL;
    co.device = o->sm ? -1 : o->device;
    co.cache_dir = o->cache_dir;
    fajit_status st = fajit_context_create(&co, &ctx);
    if (st != FAJIT_OK) {
        int r = fagen_report_status(st, "context");
        if (!o->sm) fprintf(stderr, "fagen: (to compile without a GPU, give --sm SM)\n");
        return r;
    }
    fajit_shape shape = {o->batch, o->heads, o->heads, o->seqlen, o->seqlen};
    fajit_shape *shapes = NULL;
    if (o->seqlen || o->batch || o->heads) {
        shapes = malloc((size_t)l->n * sizeof *shapes);
        for (int i = 0; shapes && i < l->n; i++) shapes[i] = shape;
    }
    warm_view v = {isatty(2), o->quiet, o->list, 0, fj_warm_now()};
    const fj_arch_info *device = fajit_context_sm(ctx)[0] ? fj_arch_find(fajit_context_sm(ctx)) : NULL;
    if (o->sm && fj_arch_find(o->sm)) device = fj_arch_find(o->sm);
    fajit_warm_result res;
    if (o->list && device) { /* fill and merge only */
        fj_warm_request rq = {ctx, l->cfgs, shapes, l->n, 0, fj_arch_for_device(device->sm / 10, device->sm % 10),
                              0.0, 1, 1, warm_progress, &v};
        st = fj_warm_run(&rq, &res);
    } else {
        fajit_warm_options wo = fajit_warm_options_default();
        wo.threads = o->threads;
        wo.sm = o->sm;
        wo.progress = warm_progress;
        wo.progress_user = &v;
        st = fajit_warm(ctx, l->cfgs, shapes, l->n, &wo, &res);
    }
    if (v.tty && !o->quiet && !o->list && res.total) fputc('\n', stderr);
    int rc = FAGEN_EXIT_OK;
    if (st != FAJIT_OK && res.total == 0) rc = fagen_report_status(st, "warm"); /* nothing ran: a usage error */
    else if (st != FAJIT_OK) rc = FAGEN_EXIT_FAIL;
    if (res.total && !o->list)
        printf("fagen warm: %d kernel%s (%d compiled, %d cached, %d failed) on %d thread%s in %.2f s; disk cache %s\n",
               res.total, res.total == 1 ? "" : "s", res.compiled, res.cached, res.failed, res.threads,
               res.threads == 1 ? "" : "s", res.seconds,
               fajit_context_cache_dir(ctx)[0] ? fajit_context_cache_dir(ctx) : "off");
    if (st != FAJIT_OK && res.total) fprintf(stderr, "fagen: %s\n", fajit_errmsg());
    free(shapes);
    fajit_context_destroy(ctx);
    return rc;
}

int fagen_cmd_warm(int argc, char **argv)
{
    warm_cli o;
    warm_list l = {NULL, 0, 0};
    int rc = warm_parse(argc, argv, &o);
    if (rc != FAGEN_EXIT_OK) return rc;
    if (o.help) {
        warm_usage(stdout);
        return FAGEN_EXIT_OK;
    }
    rc = warm_collect(&o, &l) == 0 ? warm_run(&o, &l) : FAGEN_EXIT_USAGE;
    free(l.cfgs);
    return rc;
}
