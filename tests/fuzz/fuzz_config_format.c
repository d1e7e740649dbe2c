/*
 * fuzz_config_format.c - libFuzzer target: fajit_config_format with arbitrary configs, buffers and sizes
 * (issue 21 item 1: a NULL buffer with a size wrote through NULL). Input: byte 0 picks the buffer (0xff:
 * NULL; 0xfe: the config is NULL; else that many bytes, allocated exactly so ASan sees any write past them),
 * byte 1 the size passed (a NULL buffer: byte 1 itself, 2 meaning SIZE_MAX; else 0: the buffer's own,
 * 1: 0, otherwise the buffer's size minus byte 1 % 8, at least 0), then up to sizeof(fajit_config) bytes of the config (the rest zero).
 * Checks: no crash or overwrite; the return value is the full text's length whatever the buffer; a buffer
 * of size > 0 holds the text's first size - 1 characters and a NUL; nothing is written with size 0.
 * Build and run: tests/fuzz/README.md.
 */
#include <stdint.h>
#include <string.h>

#include "fajit.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    fajit_config cfg;
    memset(&cfg, 0, sizeof cfg);
    size_t n_cfg = size - 2 < sizeof cfg ? size - 2 : sizeof cfg;
    memcpy(&cfg, data + 2, n_cfg);
    const fajit_config *c = data[0] == 0xfe ? NULL : &cfg;
    char full[512];
    int n = fajit_config_format(c, full, sizeof full);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof full && strlen(full) == (size_t)n);
    FUZZ_CHECK(fajit_config_format(c, NULL, 0) == n);

    size_t cap = data[0] >= 0xfe ? 0 : data[0];
    char *buf = data[0] == 0xff ? NULL : malloc(cap ? cap : 1);
    if (data[0] != 0xff && !buf) abort();
    size_t pass = !buf ? (data[1] == 2 ? SIZE_MAX : data[1]) /* a NULL buffer with any size */
                  : data[1] == 0 ? cap : data[1] == 1 ? 0 : cap >= (size_t)(data[1] % 8) ? cap - (size_t)(data[1] % 8) : 0;
    if (buf) memset(buf, 'Z', cap ? cap : 1);
    FUZZ_CHECK(fajit_config_format(c, buf, pass) == n);
    if (buf && pass == 0) FUZZ_CHECK(buf[0] == 'Z');
    if (buf && pass > 0) {
        size_t kept = (size_t)n < pass - 1 ? (size_t)n : pass - 1;
        FUZZ_CHECK(buf[kept] == '\0' && memcmp(buf, full, kept) == 0);
        for (size_t i = pass; i < cap; i++) FUZZ_CHECK(buf[i] == 'Z');
    }
    free(buf);
    return 0;
}
