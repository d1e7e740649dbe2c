/*
 * args.h - the flag parser every fagen subcommand shares: kernel-config flags into a fajit_config,
 * plus -v, -o and --sm.
 *
 * Flags take their value as the next word or after '=' (--stages 2, --stages=2). A parser prints at
 * most one line on stderr ("fagen: --stages 7: must be 1..4") and returns FAGEN_EXIT_USAGE; nothing
 * here exits the process.
 */
#ifndef FAGEN_ARGS_H
#define FAGEN_ARGS_H

#include <stdio.h>

#include "fagen.h"

/* Which optional flags a subcommand accepts (config flags and --help are always accepted). */
enum {
    FAGEN_OPT_VERBOSE = 1u << 0, /* -v [0|1|2] */
    FAGEN_OPT_OUTPUT = 1u << 1,  /* -o FILE */
    FAGEN_OPT_SM = 1u << 2,      /* --sm sm_XX */
    FAGEN_OPT_VARIANT = 1u << 3, /* --variant seqlens+split+packgqa (any of them) or combine (FJ_VARIANT_* bits) */
    FAGEN_OPT_VARLEN = 1u << 4   /* --varlen: the varlen (packed batch) kernel, FAGEN_VARLEN_BITS */
};
/* FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K (codegen.h): queries and keys packed by cu_seqlens */
#define FAGEN_VARLEN_BITS (1024u | 2048u)

typedef struct fagen_args {
    fajit_config cfg;     /* fields not given on the command line stay 0 */
    int verbosity;        /* -v N (bare -v = 1); 0 if not given */
    const char *out_path; /* -o FILE, or NULL */
    const char *sm;       /* --sm NAME, or NULL */
    unsigned variant;     /* --variant: FJ_VARIANT_* bits (codegen.h), 0 = the plain kernel */
    int help;             /* --help / -h was given */
} fagen_args;

/* The attention variants' values given with the config flags (--window L,R, --softcap C, --chunk N); the flags
 * also set the FAJIT_MOD_* bits of the config. Unset: window -1,-1, softcap 0, chunk 0. */
typedef struct fagen_mod_values {
    int window_left, window_right;
    float softcap;
    int chunk;
} fagen_mod_values;
const fagen_mod_values *fagen_mods(void);

/* The flags a parse has met, for refusing a repeated one (a second --stages would silently win). */
typedef struct fagen_seen {
    int n;
    char names[48][32];
} fagen_seen;

/*
 * Note the flag argv word `word` names (call it at each flag, before parsing it; words not starting with
 * '-' are ignored). Spellings of one flag count as one (--br / --block-m, -v2 / --verbose, -o / --output).
 * FAGEN_ARG_ERROR with "fagen: --stages: given twice; give each flag once" when it was met before, else
 * FAGEN_ARG_TAKEN.
 */
int fagen_flag_once(fagen_seen *seen, const char *word);

/* Result of offering one argv word to a parser. */
enum { FAGEN_ARG_TAKEN = 0, FAGEN_ARG_NOT_MINE = 1, FAGEN_ARG_ERROR = 2 };

/*
 * Parse argv[1..argc-1] (argv[0] is the subcommand name) into *a, accepting the config flags and the
 * optional ones in `opts`. Returns FAGEN_EXIT_OK or FAGEN_EXIT_USAGE (message printed).
 */
int fagen_args_parse(int argc, char **argv, unsigned opts, fagen_args *a);

/*
 * Offer argv[*i] to the config-flag parser (for subcommands with flags of their own). On
 * FAGEN_ARG_TAKEN, *i is left on the last word consumed. FAGEN_ARG_ERROR means a message was printed.
 */
int fagen_parse_config_flag(int argc, char **argv, int *i, fajit_config *cfg);

/*
 * The value of the flag at argv[*i]: the text after '=' or the next word (then *i advances).
 * `flag` receives the flag's name without any "=value". NULL (message printed) if there is none.
 */
const char *fagen_flag_value(int argc, char **argv, int *i, char *flag, size_t flag_size);

/* Parse a whole decimal int in [lo, hi] for `flag`; prints "fagen: FLAG TEXT: RULE" on failure. */
int fagen_parse_int(const char *flag, const char *text, int lo, int hi, int *out);

/* A comma-separated list of up to max ints in [lo, hi] for `flag` ("200,6000,17"): *n of them into out. */
#define FAGEN_VARLEN_MAX 256
int fagen_parse_int_list(const char *flag, const char *text, int lo, int hi, int *out, int max, int *n);

/* 1 when `word` is the flag `name` itself or `name=VALUE`. */
int fagen_flag_is(const char *word, const char *name);

/* An int flag of a subcommand: its name, the offset of its int field in the options struct, its range. */
typedef struct fagen_int_flag {
    const char *name;
    size_t offset;
    int lo, hi;
} fagen_int_flag;

/*
 * Offer argv[*i] to a table of n int flags; the one it names gets its value parsed into the int at
 * (char *)opts + offset. FAGEN_ARG_NOT_MINE when it names none of them.
 */
int fagen_parse_int_flag(int argc, char **argv, int *i, const fagen_int_flag *table, size_t n, void *opts);

/*
 * Complete a command-line config: head_dim 128 and bf16 when not given, other zeros from
 * fajit_config_fill(NULL, NULL, cfg), then fajit_config_check. Returns FAGEN_EXIT_OK, or the exit
 * status for the library's status (message printed).
 */
int fagen_config_finish(fajit_config *cfg);
/* The same for a compile target (--sm; NULL: the path's own) and a decode variant (--variant bits; 0 =
 * the plain kernel): the zeros are filled so that the variant plans and the target compiles it. */
int fagen_config_finish_for(fajit_config *cfg, const char *sm, unsigned variant);

/* Exit status for a library failure, after printing "fagen: <fajit_errmsg()>" on stderr. */
int fagen_report_status(fajit_status st, const char *what);

/* Help text for the config flags, one line each (for the subcommands' --help). */
void fagen_print_config_help(FILE *f);

/* 1 when a config flag that picks the kernel's tiles was given (--arch --br --bc --stages --swizzle
 * --warps --col-warps), as opposed to the problem's --dtype, --headdim, --causal. */
int fagen_config_has_tiles(const fajit_config *c);

#endif
