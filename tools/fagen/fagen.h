/*
 * fagen.h - shared pieces of the fagen command-line tool.
 *
 * Exit status of every subcommand: 0 success, 1 a failure found (a check failed, a GPU error),
 * 2 bad usage or an impossible config (one message naming the field, the value and the rule).
 */
#ifndef FAGEN_H
#define FAGEN_H

#include <stdio.h>

#include "fajit.h"

enum { FAGEN_EXIT_OK = 0, FAGEN_EXIT_FAIL = 1, FAGEN_EXIT_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. */
int fagen_cmd_ptx(int argc, char **argv);
int fagen_cmd_cubin(int argc, char **argv);
int fagen_cmd_explain(int argc, char **argv);
int fagen_cmd_check(int argc, char **argv);  /* tools/fagen/cmd_check.c */
int fagen_cmd_bench(int argc, char **argv);  /* tools/fagen/cmd_bench.c */
int fagen_cmd_tune(int argc, char **argv);   /* tools/fagen/cmd_tune.c */
int fagen_cmd_warm(int argc, char **argv);   /* tools/fagen/cmd_warm.c */

/* The flag parsing of each subcommand alone: all that its run function does before it opens a GPU, loads
 * a compiler or writes a file (for ptx, cubin and explain that includes completing and checking the
 * config). Returns the exit status run would return for a command line that stops there (--help is
 * printed, a bad flag explained on stderr), or FAGEN_EXIT_OK when run would go on. */
int fagen_args_ptx(int argc, char **argv);
int fagen_args_cubin(int argc, char **argv);
int fagen_args_explain(int argc, char **argv);
int fagen_args_check(int argc, char **argv);
int fagen_args_bench(int argc, char **argv);
int fagen_args_tune(int argc, char **argv);
int fagen_args_warm(int argc, char **argv);

/* One subcommand (commands.c). */
typedef struct fagen_command {
    const char *name;
    int (*run)(int argc, char **argv);
    int (*parse)(int argc, char **argv); /* the fagen_args_* above */
    const char *summary;
} fagen_command;

/* The subcommand called `name`, or NULL. */
const fagen_command *fagen_command_find(const char *name);

/* `fagen --help`: the commands and examples. */
void fagen_usage(FILE *f);

#endif
