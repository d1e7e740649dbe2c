/*
 * main.c - fagen, the command-line face of libfajit: subcommand dispatch, `fagen --help` and
 * `fagen --version`.
 *
 *   fagen ptx|cubin|explain [flags]   code generation, no GPU needed (cmd_gen.c)
 *   fagen check|bench|tune [flags]    run on a GPU (cmd_check.c, cmd_bench.c, cmd_tune.c)
 *
 * Exit status: 0 success, 1 a failure found, 2 bad usage or an impossible config (fagen.h).
 */
#include <stdio.h>
#include <string.h>

#include "fagen.h"

typedef struct fagen_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} fagen_command;

static const fagen_command k_commands[] = {
    {"ptx", fagen_cmd_ptx, "print the PTX of one kernel config (no GPU)"},
    {"cubin", fagen_cmd_cubin, "compile a config to a cubin with nvJitLink (no GPU)"},
    {"explain", fagen_cmd_explain, "print the plan of a config: smem map, warp roles, registers"},
    {"check", fagen_cmd_check, "run kernels on the GPU and compare with a reference"},
    {"bench", fagen_cmd_bench, "time kernels on the GPU"},
    {"tune", fagen_cmd_tune, "time the configs of a problem class on the GPU and save the fastest"},
};
#define N_COMMANDS ((int)(sizeof k_commands / sizeof k_commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: fagen <command> [flags]      (fagen <command> --help for its flags)\n\n"
               "fagen %s: generate, compile and run FlashAttention kernels written by libfajit.\n\n"
               "commands:\n",
            fajit_version());
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", k_commands[i].name, k_commands[i].summary);
    fputs("\nexamples:\n"
          "  fagen ptx --headdim 128 -v 2 | less\n"
          "  fagen explain --headdim 256 --dtype f16 --causal\n"
          "  fagen cubin --headdim 64 --sm sm_90a -o fa.cubin\n\n"
          "exit status: 0 success, 1 failure, 2 bad usage or impossible config\n",
          f);
}

static const fagen_command *find_command(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(k_commands[i].name, name) == 0) return &k_commands[i];
    return NULL;
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
        usage(stderr);
        return FAGEN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        if (argc > 2) { /* fagen help ptx */
            char *help_argv[] = {argv[2], "--help", NULL};
            cmd = find_command(argv[2]);
            return cmd ? cmd->run(2, help_argv) : unknown_command(argv[2]);
        }
        usage(stdout);
        return FAGEN_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("fagen %s (libfajit %s)\n", FAJIT_VERSION, fajit_version());
        return FAGEN_EXIT_OK;
    }
    cmd = find_command(argv[1]);
    return cmd ? cmd->run(argc - 1, argv + 1) : unknown_command(argv[1]);
}
