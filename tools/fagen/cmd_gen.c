/*
 * cmd_gen.c - the fagen subcommands that need no GPU: `ptx` (generated PTX), `cubin` (PTX compiled
 * with nvJitLink, or NVRTC for whole-program sm_90a kernels, through fajit_compile_cubin) and `explain`
 *
 * Each parses the shared flags (args.h), completes the config with the library's heuristic, calls
 * one library function and writes its result to stdout or -o FILE. Output depends only on the
 * command line, so repeated runs give byte-identical files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "codegen/codegen.h"
#include "runtime/compile.h"

_Static_assert(FAGEN_VARLEN_BITS == (FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K), "args.h: the varlen bits");

/* ---- output ----------------------------------------------------------------------------------- */

/* Write len bytes to `path` ("-" or NULL = stdout). Returns an exit status (message printed). */
static int write_output(const char *path, const void *data, size_t len)
{
    int to_stdout = !path || strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    int ok;
    if (!f) {
        fprintf(stderr, "fagen: -o %s: cannot open for writing: %s\n", path, strerror(errno));
        return FAGEN_EXIT_FAIL;
    }
    ok = fwrite(data, 1, len, f) == len;
    ok = (to_stdout ? fflush(f) : fclose(f)) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "fagen: %s: write failed: %s\n", to_stdout ? "stdout" : path, strerror(errno));
        return FAGEN_EXIT_FAIL;
    }
    return FAGEN_EXIT_OK;
}

/* Parse flags and complete the config. Returns -1 to go on, else the exit status (help printed,
 * or a message). */
static int parse_and_finish(int argc, char **argv, unsigned opts, fagen_args *a, void (*usage)(FILE *))
{
    int rc = fagen_args_parse(argc, argv, opts, a);
    if (rc != FAGEN_EXIT_OK) return rc;
    if (a->help) {
        usage(stdout);
        return FAGEN_EXIT_OK;
    }
    rc = fagen_config_finish_for(&a->cfg, a->sm, a->variant);
    return rc != FAGEN_EXIT_OK ? rc : -1;
}

#define PTX_OPTS (FAGEN_OPT_VERBOSE | FAGEN_OPT_OUTPUT | FAGEN_OPT_VARIANT | FAGEN_OPT_VARLEN)
#define EXPLAIN_OPTS (FAGEN_OPT_OUTPUT | FAGEN_OPT_VARIANT | FAGEN_OPT_VARLEN)
#define CUBIN_OPTS (FAGEN_OPT_VERBOSE | FAGEN_OPT_OUTPUT | FAGEN_OPT_SM | FAGEN_OPT_VARIANT | FAGEN_OPT_VARLEN)
#define VARLEN_HELP                                                                                                  \
    "  --varlen                       the varlen kernel: queries and keys packed by cu_seqlens (FlashAttention's\n"   \
    "                                 varlen API; --variant varlen, or varlenq for packed queries only)\n"

/* ---- fagen ptx -------------------------------------------------------------------------------- */

static void ptx_usage(FILE *f)
{
    fputs("usage: fagen ptx [config flags] [-v 0|1|2] [-o FILE]\n"
          "Print the PTX of one forward-attention kernel (no GPU needed).\n\n"
          "config flags (omitted ones are chosen by the library's heuristic):\n",
          f);
    fagen_print_config_help(f);
    fputs("  -v 0|1|2                       comments: 0 none, 1 per block, 2 teaching view (bare -v = 1)\n"
          "  -o FILE                        write to FILE instead of stdout\n"
          "  --variant V                    a decode variant: seqlens (per-sequence KV lengths),\n"
          "                                 split (split-KV partials), packgqa (GQA packing), paged (paged K/V),\n"
          "                                 gather (with paged: tiles gathered from 16-row page segments), ahead\n"
          "                                 (with paged, 2+ stages: each tile's pages read a tile ahead), joined\n"
          "                                 with + (seqlens+split), or combine (the split partials' combine\n"
          "                                 kernel; only --dtype and --headdim count). sm_90a takes seqlens, split,\n"
          "                                 packgqa and paged (paged: TMA boxes from the pool's pages); the runtime\n"
          "                                 picks the path per call (README: Decode on the sm_90a kernel);\n"
          "                                 varlen (packed queries and keys), varlenq (packed queries; with\n"
          "                                 seqlens and / or paged) on both paths; kv8intk / kv8intv (with\n"
          "                                 --kv-dtype e4m3: K / V widened by integer ops instead of cvt), kv8direct\n"
          "                                 (with --kv-dtype e4m3: MMA fragments straight from the e4m3 tiles)\n" VARLEN_HELP "\n"
          "example: fagen ptx --headdim 128 --dtype f16 --causal -v 2 -o fa.ptx\n",
          f);
}

int fagen_args_ptx(int argc, char **argv)
{
    fagen_args a;
    int rc = parse_and_finish(argc, argv, PTX_OPTS, &a, ptx_usage);
    return rc >= 0 ? rc : FAGEN_EXIT_OK;
}

int fagen_cmd_ptx(int argc, char **argv)
{
    fagen_args a;
    char *ptx = NULL;
    size_t len = 0;
    fajit_status st;
    int rc = parse_and_finish(argc, argv, PTX_OPTS, &a, ptx_usage);
    if (rc >= 0) return rc;
    if (a.variant) {
        fj_plan plan;
        st = fj_plan_build_variant(&a.cfg, a.variant, &plan);
        if (st == FAJIT_OK) st = fj_generate_ptx_plan(&plan, a.verbosity, &ptx, &len);
    } else {
        st = fajit_generate_ptx(&a.cfg, a.verbosity, &ptx, &len);
    }
    if (st != FAJIT_OK) return fagen_report_status(st, "generate PTX");
    rc = write_output(a.out_path, ptx, len);
    fajit_free(ptx);
    return rc;
}

/* ---- fagen explain ---------------------------------------------------------------------------- */

static void explain_usage(FILE *f)
{
    fputs("usage: fagen explain [config flags] [-o FILE]\n"
          "Print the plan derived from a config: tiles, smem map with byte offsets, warp roles,\n"
          "fragment layout and register budget.\n\n"
          "config flags (omitted ones are chosen by the library's heuristic):\n",
          f);
    fagen_print_config_help(f);
    fputs("  -o FILE                        write to FILE instead of stdout\n"
          "  --variant V                    a kernel variant's plan (fagen ptx --help lists them)\n" VARLEN_HELP "\n"
          "example: fagen explain --headdim 256 --stages 1\n",
          f);
}

int fagen_args_explain(int argc, char **argv)
{
    fagen_args a;
    int rc = parse_and_finish(argc, argv, EXPLAIN_OPTS, &a, explain_usage);
    return rc >= 0 ? rc : FAGEN_EXIT_OK;
}

int fagen_cmd_explain(int argc, char **argv)
{
    fagen_args a;
    char *text = NULL;
    fajit_status st;
    int rc = parse_and_finish(argc, argv, EXPLAIN_OPTS, &a, explain_usage);
    if (rc >= 0) return rc;
    st = fj_explain_variant(&a.cfg, a.variant, &text);
    if (st != FAJIT_OK) return fagen_report_status(st, "explain");
    rc = write_output(a.out_path, text, text ? strlen(text) : 0);
    fajit_free(text);
    return rc;
}

/* ---- fagen cubin ------------------------------------------------------------------------------ */

static void cubin_usage(FILE *f)
{
    fputs("usage: fagen cubin [config flags] [--sm SM] [-o FILE] [-v]\n"
          "Compile one kernel to a cubin (loaded at run time, no GPU needed): nvJitLink, or NVRTC for\n"
          "the warp-specialized sm_90a kernels, whose setmaxnreg only a whole-program compile keeps.\n\n"
          "config flags (omitted ones are chosen by the library's heuristic):\n",
          f);
    fagen_print_config_help(f);
    fputs("  --sm SM                        GPU to build for: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, ...\n"
          "                                 (default: the --arch path's own target)\n"
          "  -o FILE                        output file (default: fajit_<config>.cubin in the current\n"
          "                                 directory; - for stdout)\n"
          "  -v                             print the compiler's info log (ptxas -v) on stderr\n"
          "  --variant V                    a kernel variant (fagen ptx --help lists them)\n" VARLEN_HELP "\n"
          "example: fagen cubin --headdim 64 --sm sm_90a -o fa_d64.cubin -v\n",
          f);
}

/* sm name of a (filled) config's code-generation path: the first word of its canonical text. */
static void path_sm(const fajit_config *cfg, char *sm, size_t size)
{
    char canon[160];
    fajit_config_format(cfg, canon, sizeof canon);
    snprintf(sm, size, "%.*s", (int)strcspn(canon, " "), canon);
}

/* fajit_<canonical with '_' for ' '>[_<sm>].cubin; the sm is added when it differs from the path's. */
static void default_cubin_name(const fajit_config *cfg, const char *sm, char *name, size_t size)
{
    char canon[160], own[32];
    fajit_config_format(cfg, canon, sizeof canon);
    for (char *p = canon; *p; p++)
        if (*p == ' ') *p = '_';
    path_sm(cfg, own, sizeof own);
    if (strcmp(own, sm) == 0)
        snprintf(name, size, "fajit_%s.cubin", canon);
    else
        snprintf(name, size, "fajit_%s_%s.cubin", canon, sm);
}

int fagen_args_cubin(int argc, char **argv)
{
    fagen_args a;
    int rc = parse_and_finish(argc, argv, CUBIN_OPTS, &a, cubin_usage);
    return rc >= 0 ? rc : FAGEN_EXIT_OK;
}

int fagen_cmd_cubin(int argc, char **argv)
{
    fagen_args a;
    char sm[32], name[256];
    void *cubin = NULL;
    size_t size = 0;
    char *log = NULL;
    fajit_status st;
    int rc = parse_and_finish(argc, argv, CUBIN_OPTS, &a, cubin_usage);
    if (rc >= 0) return rc;
    if (a.sm)
        snprintf(sm, sizeof sm, "%s", a.sm);
    else
        path_sm(&a.cfg, sm, sizeof sm);
    st = fj_compile_cubin_variant(&a.cfg, a.variant, sm, &cubin, &size, &log);
    /* the info log goes to stderr with -v, and always when the compile failed */
    if (log && log[0] && (a.verbosity > 0 || st != FAJIT_OK))
        fprintf(stderr, "%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
    fajit_free(log);
    if (st != FAJIT_OK) return fagen_report_status(st, "compile cubin");
    if (!a.out_path) {
        default_cubin_name(&a.cfg, sm, name, sizeof name);
        a.out_path = name;
    }
    rc = write_output(a.out_path, cubin, size);
    fajit_free(cubin);
    if (rc == FAGEN_EXIT_OK && strcmp(a.out_path, "-") != 0)
        fprintf(stderr, "fagen: wrote %s (%zu bytes, %s)\n", a.out_path, size, sm);
    return rc;
}
