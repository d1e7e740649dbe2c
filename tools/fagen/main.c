/*
 * main.c - fagen, the command-line face of libfajit: `fagen --help`, `fagen --version` and the dispatch
 * to a subcommand of the table in commands.c.
 *
 *   fagen ptx|cubin|explain [flags]   code generation, no GPU needed (cmd_gen.c)
 *   fagen check|bench|tune [flags]    run on a GPU (cmd_check.c, cmd_bench.c, cmd_tune.c)
 *
 * Exit status: 0 success, 1 a failure found, 2 bad usage or an impossible config (fagen.h).
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "fagen.h"

/* A bad FAJIT_* value is the user's mistake whatever the command: say it plainly before any work (exit 2). A context
 * without a device or disk cache reads and checks every variable (src/runtime/env.c) and touches nothing else. */
static int environment_ok(void)
{
    fajit_context_options o = fajit_context_options_default();
    fajit_context *ctx = NULL;
    o.device = -1, o.disk_cache = 0;
    fajit_status st = fajit_context_create(&o, &ctx);
    if (ctx) fajit_context_destroy(ctx);
    return st == FAJIT_ERR_INVALID_ARGUMENT ? fagen_report_status(st, "environment") : FAGEN_EXIT_OK;
}

static int unknown_command(const char *name)
{
    fprintf(stderr, "fagen: '%s': unknown command (see fagen --help)\n", name);
    return FAGEN_EXIT_USAGE;
}


int main(int argc, char **argv)
{
    const fagen_command *cmd;
    if (argc < 2) {
        fagen_usage(stderr);
        return FAGEN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        if (argc > 2) { /* fagen help ptx */
            char *help_argv[] = {argv[2], "--help", NULL};
            cmd = fagen_command_find(argv[2]);
            return cmd ? cmd->run(2, help_argv) : unknown_command(argv[2]);
        }
        fagen_usage(stdout);
        return FAGEN_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("fagen %s (libfajit %s)\n", FAJIT_VERSION, fajit_version());
        return FAGEN_EXIT_OK;
    }
    cmd = fagen_command_find(argv[1]);
    if (!cmd) return unknown_command(argv[1]);
    int rc = environment_ok();
    return rc != FAGEN_EXIT_OK ? rc : cmd->run(argc - 1, argv + 1);
}
