/*
 * fuzz.h - shared pieces of the libFuzzer targets in tests/fuzz: the entry points, a check that aborts
 * (libFuzzer and the replay driver both report an abort as a failure), and silencing of stdout/stderr
 * for code that prints (fagen's parsers) while keeping the check messages visible.
 */
#ifndef FJ_FUZZ_H
#define FJ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Where check failures go: the process's original stderr (stays valid after fuzz_quiet). */
FILE *fuzz_report(void);

/* Send what the code under test writes to stdout and stderr to /dev/null (the FILE objects libFuzzer
 * and fuzz_report hold keep writing to the real stderr). */
void fuzz_quiet(void);

#define FUZZ_CHECK(cond)                                                                                          \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(fuzz_report(), "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
            fflush(fuzz_report());                                                                                \
            abort();                                                                                              \
        }                                                                                                         \
    } while (0)

/* The input as a NUL-terminated string (malloc'd; the caller frees): bytes up to the first NUL, at most max. */
char *fuzz_text(const uint8_t *data, size_t size, size_t max);

#endif
