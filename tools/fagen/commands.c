/*
 * commands.c - fagen's table of subcommands (name, run, flag parser, summary) and `fagen --help`.
 * main.c dispatches through it; the fuzz target tests/fuzz/fuzz_fagen_args.c calls the parsers alone.
 */
#include <stdio.h>
#include <string.h>

#include "fagen.h"

static const fagen_command k_commands[] = {
    {"ptx", fagen_cmd_ptx, fagen_args_ptx, "print the PTX of one kernel config (no GPU)"},
    {"cubin", fagen_cmd_cubin, fagen_args_cubin, "compile a config to a cubin with nvJitLink (no GPU)"},
    {"explain", fagen_cmd_explain, fagen_args_explain, "print the plan of a config: smem map, warp roles, registers"},
    {"check", fagen_cmd_check, fagen_args_check, "run kernels on the GPU and compare with a reference"},
    {"bench", fagen_cmd_bench, fagen_args_bench, "time kernels on the GPU"},
    {"tune", fagen_cmd_tune, fagen_args_tune, "time the configs of a problem class on the GPU and save the fastest"},
    {"warm", fagen_cmd_warm, fagen_args_warm, "compile many kernels at once into the caches (no GPU with --sm)"},
};
#define N_COMMANDS ((int)(sizeof k_commands / sizeof k_commands[0]))

void fagen_usage(FILE *f)
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

const fagen_command *fagen_command_find(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(k_commands[i].name, name) == 0) return &k_commands[i];
    return NULL;
}
