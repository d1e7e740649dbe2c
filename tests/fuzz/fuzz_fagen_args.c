/*
 * fuzz_fagen_args.c - libFuzzer target: fagen's command line. The input is argv: words separated by NUL
 * bytes, the first naming the subcommand (ptx, cubin, explain, check, bench, tune); its flag parser
 * (fagen_args_*, the part of each subcommand that runs before a GPU, a compiler or a file is touched;
 * for ptx / cubin / explain it also completes and checks the config) must return 0 or 2 (1 only when
 * memory runs out) and never crash, leak or read out of bounds.
 * Build and run: tests/fuzz/README.md.
 */
#include <string.h>

#include "fagen.h"
#include "fuzz.h"

#define MAX_WORDS 40
#define MAX_WORD 256

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet(); /* usage and error lines */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[MAX_WORDS + 1];
    int argc = 0;
    size_t at = 0;
    while (at < size && argc < MAX_WORDS) { /* each word exactly as long as it is: ASan sees overreads */
        size_t len = 0;
        while (at + len < size && data[at + len] != 0) len++;
        argv[argc++] = fuzz_text(data + at, len, MAX_WORD);
        at += len + 1;
    }
    argv[argc] = NULL;
    const fagen_command *cmd = argc > 0 ? fagen_command_find(argv[0]) : NULL;
    if (cmd) {
        int rc = cmd->parse(argc, argv);
        FUZZ_CHECK(rc == FAGEN_EXIT_OK || rc == FAGEN_EXIT_USAGE);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    return 0;
}
