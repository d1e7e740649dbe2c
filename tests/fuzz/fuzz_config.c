/*
 * fuzz_config.c - libFuzzer target: fajit_config_check, fajit_config_fill, fajit_generate_ptx and
 * fajit_explain on arbitrary config structs. Each field takes one input byte: below 0xf0 it picks a value
 * from a list of the field's meaningful and edge values, else the next four bytes are the raw int.
 * Checks: no crash, leak, overread or hang; a refused config has a message and is refused by
 * fajit_generate_ptx too; an accepted one gives NUL-terminated PTX with an entry point at the verbosity
 * the input picks, and an explanation; what fajit_config_fill completes passes fajit_config_check.
 * Build and run: tests/fuzz/README.md.
 */
#include <string.h>

#include "fajit.h"
#include "fuzz.h"

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static int take_byte(reader *r)
{
    if (!r->left) return 0;
    r->left--;
    return *r->p++;
}

/* One field: a listed value, or (byte >= 0xf0) four raw bytes. */
static int take_field(reader *r, const int *list, int n)
{
    int b = take_byte(r);
    if (b < 0xf0) return list[b % n];
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = (v << 8) | (uint32_t)take_byte(r);
    return (int)v;
}

#define FIELD(r, ...) take_field(r, (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void config_read(reader *r, fajit_config *c)
{
    memset(c, 0, sizeof *c);
    c->arch = (fajit_arch)FIELD(r, 80, 90, 0, 100, 89, -1, 1);
    c->dtype = (fajit_dtype)FIELD(r, 2, 1, 0, 3, -1);
    c->head_dim = FIELD(r, 128, 64, 96, 192, 256, 0, 32, 16, 8, 512, -64, 1, 100, 160);
    c->block_m = FIELD(r, 64, 128, 16, 32, 48, 80, 96, 112, 192, 256, 0, 8, 1, -16, 1024, 4096);
    c->block_n = FIELD(r, 64, 128, 16, 32, 48, 80, 96, 112, 176, 192, 256, 0, 8, 1, -16, 1024);
    c->stages = FIELD(r, 2, 1, 3, 4, 0, 5, -1);
    c->swizzle = FIELD(r, 128, -1, 32, 64, 0, 16, 256, -2);
    c->warps = FIELD(r, 4, 8, 12, 16, 2, 1, 0, 3, 6, 32, 64, -4);
    c->causal = FIELD(r, 0, 1, 2, -1);
    c->col_warps = FIELD(r, 1, 2, 0, 3, 4, -1);
    c->overlap = FIELD(r, -1, 0, 1, 2);
    c->pingpong = FIELD(r, -1, 0, 1, 2);
}

static void check_accepted(const fajit_config *c, int verbosity)
{
    char *ptx = NULL, *text = NULL;
    size_t len = 0;
    FUZZ_CHECK(fajit_generate_ptx(c, verbosity, &ptx, &len) == FAJIT_OK);
    FUZZ_CHECK(ptx && strlen(ptx) == len && strstr(ptx, ".entry") != NULL);
    fajit_free(ptx);
    FUZZ_CHECK(fajit_explain(c, &text) == FAJIT_OK && text && text[0]);
    fajit_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    fajit_config c, filled;
    char *ptx = NULL;
    config_read(&r, &c);
    int verbosity = take_byte(&r) % 4; /* 3 is out of range: must be refused */
    if (fajit_config_check(&c) == FAJIT_OK && verbosity <= 2) {
        check_accepted(&c, verbosity);
    } else {
        if (verbosity <= 2) FUZZ_CHECK(fajit_errmsg()[0] != '\0');
        FUZZ_CHECK(fajit_generate_ptx(&c, verbosity, &ptx, NULL) != FAJIT_OK);
        FUZZ_CHECK(ptx == NULL && fajit_errmsg()[0] != '\0');
    }
    filled = c;
    if (fajit_config_fill(NULL, NULL, &filled) == FAJIT_OK) FUZZ_CHECK(fajit_config_check(&filled) == FAJIT_OK);
    else FUZZ_CHECK(fajit_errmsg()[0] != '\0');
    return 0;
}
