/*
 * fuzz_config_text.c - libFuzzer target: the canonical config text parser (fj_tune_parse_config, which
 * reads the config column of the tune file). The input is the text. Checks: no crash, leak or overread;
 * what parses formats back (fajit_config_format) to text that parses again to the same text (a fixed
 * point after one round), and a parsed config either builds a plan or is refused with a message.
 * Build and run: tests/fuzz/README.md.
 */
#include <string.h>

#include "codegen/codegen.h"
#include "fuzz.h"
#include "base/error.h"
#include "runtime/tune_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size, 512), once[256], twice[256];
    fajit_config a, b;
    fj_plan plan;
    if (fj_tune_parse_config(text, &a) == NULL) {
        int n = fajit_config_format(&a, once, sizeof once);
        FUZZ_CHECK(n > 0 && n < (int)sizeof once);
        FUZZ_CHECK(fj_tune_parse_config(once, &b) == NULL);
        fajit_config_format(&b, twice, sizeof twice);
        FUZZ_CHECK(strcmp(once, twice) == 0);
        fj_clear_error();
        if (fj_plan_build(&a, &plan) != FAJIT_OK) FUZZ_CHECK(fajit_errmsg()[0] != '\0');
    }
    free(text);
    return 0;
}
