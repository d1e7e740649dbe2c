/*
 * fuzz_tune_file.c - libFuzzer target: the tune file reader (fj_tune_stream_read, what fj_tune_file_read
 * runs on the opened tuned-v1.txt). The input is the file. Checks: no crash, leak, overread or hang; every
 * record read follows the rules (a config of its class that builds a plan, positive finite TFLOP/s), and
 * formats to a line (fj_tune_format_line, what a merge writes back) that parses to the same key and config
 * (decode lines: the same split count and tile).
 * Build and run: tests/fuzz/README.md.
 */
#include <math.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fuzz.h"
#include "runtime/tune_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_record(const fj_tune_record *r)
{
    char line[FJ_TUNE_LINE_MAX];
    fj_tune_record back;
    fj_plan plan;
    FUZZ_CHECK(isfinite(r->tflops) && r->tflops > 0);
    if (r->key.decode) { /* a decode line: a split count and a tile, no config */
        FUZZ_CHECK(r->splits >= 1 && r->splits <= FAJIT_MAX_SPLITS && r->tile_m >= 16 && r->tile_n >= 16);
        FUZZ_CHECK(r->key.seqlen_q >= 1 && r->key.seqlen_q <= 128 && r->key.kv_heads >= 1 && r->key.group >= 1);
    } else {
        FUZZ_CHECK(r->cfg.dtype == r->key.dtype && r->cfg.head_dim == r->key.head_dim &&
                   r->cfg.causal == r->key.causal);
        FUZZ_CHECK(fj_plan_build(&r->cfg, &plan) == FAJIT_OK);
    }
    int n = fj_tune_format_line(r, line, sizeof line);
    FUZZ_CHECK(n > 0 && n < (int)sizeof line);
    FUZZ_CHECK(fj_tune_parse_line(line, &back) == NULL);
    FUZZ_CHECK(fj_tune_key_equal(&back.key, &r->key));
    FUZZ_CHECK(memcmp(&back.cfg, &r->cfg, sizeof back.cfg) == 0);
    FUZZ_CHECK(back.splits == r->splits && back.tile_m == r->tile_m && back.tile_n == r->tile_n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fj_tune_list list = {0};
    int bad = 0;
    if (size == 0) return 0; /* fmemopen wants a buffer; an empty file is covered by the unit tests */
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) return 0;
    int rc = fj_tune_stream_read(f, &list, &bad);
    fclose(f);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(bad >= 0);
    for (int i = 0; i < list.n; i++) check_record(&list.v[i]);
    fj_tune_list_free(&list);
    return 0;
}
