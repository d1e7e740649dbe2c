/*
 * fagen.h - shared pieces of the fagen command-line tool.
 *
 * Exit status of every subcommand: 0 success, 1 a failure found (a check failed, a GPU error),
 * 2 bad usage or an impossible config (one message naming the field, the value and the rule).
 */
#ifndef FAGEN_H
#define FAGEN_H

#include "fajit.h"

enum { FAGEN_EXIT_OK = 0, FAGEN_EXIT_FAIL = 1, FAGEN_EXIT_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. */
int fagen_cmd_ptx(int argc, char **argv);
int fagen_cmd_cubin(int argc, char **argv);
int fagen_cmd_explain(int argc, char **argv);
int fagen_cmd_check(int argc, char **argv);  /* tools/fagen/cmd_check.c */
int fagen_cmd_bench(int argc, char **argv);  /* tools/fagen/cmd_bench.c */
int fagen_cmd_tune(int argc, char **argv);   /* tools/fagen/cmd_tune.c */

#endif
