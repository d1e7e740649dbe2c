/*
 * env_word.h - the values of fajit's environment variables, checked against a table of the accepted words
 * (env_word.c). Nothing here reads the environment: the runtime reads each variable once, when a context is made
 * (runtime/env.c), and the code generator's knobs pass their text to the same parsers, so every variable refuses an
 * unknown value the same way - FAJIT_ERR_INVALID_ARGUMENT with a message naming the variable, the value and what
 * each accepted word means. docs/environment.md lists every variable.
 */
#ifndef FJ_ENV_WORD_H
#define FJ_ENV_WORD_H

#include "fajit.h"

/* One accepted value: the word as written, what it sets, and what it means (for the message). A table ends with a
 * NULL word. */
typedef struct fj_env_word {
    const char *word;
    int value;
    const char *means;
} fj_env_word;

/* A switch: value (NULL or "" = unset: *out = unset_value) must be one of words' words (case-sensitive).
 * FAJIT_ERR_INVALID_ARGUMENT otherwise: "NAME = 'value': use w1 (means), w2 (means), or unset (unset_means)". */
fajit_status fj_env_word_parse(const char *name, const char *value, const fj_env_word *words, int unset_value,
                               const char *unset_means, int *out);

/* A comma list of words whose values are OR'ed bits: NULL = unset (*out = unset_bits); "" or only commas = 0; each
 * non-empty word must be in words, else FAJIT_ERR_INVALID_ARGUMENT naming the variable, the value, the unknown word
 * and the accepted ones. */
fajit_status fj_env_list_parse(const char *name, const char *value, const fj_env_word *words, unsigned unset_bits,
                               const char *unset_means, unsigned *out);

/* bits in words (the single-bit entries of the table, in its order; "none" for 0), comma-separated, into buf. */
void fj_env_list_format(const fj_env_word *words, unsigned bits, char *buf, size_t size);

/* A count: NULL or "" = unset (*out = unset_value); else a decimal integer in [min, max], nothing after it. */
fajit_status fj_env_int_parse(const char *name, const char *value, int min, int max, int unset_value,
                              const char *unset_means, int *out);

#endif
