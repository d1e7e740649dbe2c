/*
 * env_word.c - environment values against tables of accepted words (env_word.h): switches, comma lists of bits and
 * counts, each refusal naming the variable, its value and the rule.
 */
#include "env_word.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* "w1 (means), w2 (means)" of a table, into buf. */
static const char *words_text(const fj_env_word *words, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const fj_env_word *w = words; w->word && n < size; w++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s%s%s%s", n ? ", " : "", w->word, w->means ? " (" : "",
                              w->means ? w->means : "", w->means ? ")" : "");
    return buf;
}

static const fj_env_word *word_find(const fj_env_word *words, const char *s, size_t len)
{
    for (const fj_env_word *w = words; w->word; w++)
        if (strlen(w->word) == len && strncmp(w->word, s, len) == 0) return w;
    return NULL;
}

fajit_status fj_env_word_parse(const char *name, const char *value, const fj_env_word *words, int unset_value,
                               const char *unset_means, int *out)
{
    *out = unset_value;
    if (!value || !*value) return FAJIT_OK;
    const fj_env_word *w = word_find(words, value, strlen(value));
    if (w) {
        *out = w->value;
        return FAJIT_OK;
    }
    char list[512];
    return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = '%.64s': use %s, or unset (%s)", name, value,
                   words_text(words, list, sizeof list), unset_means);
}

fajit_status fj_env_list_parse(const char *name, const char *value, const fj_env_word *words, unsigned unset_bits,
                               const char *unset_means, unsigned *out)
{
    *out = unset_bits;
    if (!value) return FAJIT_OK;
    unsigned bits = 0;
    for (const char *s = value; *s;) {
        size_t n = strcspn(s, ",");
        const fj_env_word *w = n ? word_find(words, s, n) : NULL;
        if (n && !w) {
            char list[512];
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = '%.64s': unknown word '%.*s'; use a comma list of %s "
                                                       "(set but empty: none; unset: %s)",
                           name, value, (int)(n < 64 ? n : 64), s, words_text(words, list, sizeof list), unset_means);
        }
        if (w) bits |= (unsigned)w->value;
        s += n + (s[n] == ',');
    }
    *out = bits;
    return FAJIT_OK;
}

void fj_env_list_format(const fj_env_word *words, unsigned bits, char *buf, size_t size)
{
    size_t n = 0;
    unsigned done = 0;
    if (size) buf[0] = '\0';
    for (const fj_env_word *w = words; w->word && n < size; w++) {
        unsigned b = (unsigned)w->value;
        if (b && !(b & (b - 1)) && (bits & b) && !(done & b))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", done ? "," : "", w->word), done |= b;
    }
    if (!bits && size) snprintf(buf, size, "none");
}

fajit_status fj_env_int_parse(const char *name, const char *value, int min, int max, int unset_value,
                              const char *unset_means, int *out)
{
    *out = unset_value;
    if (!value || !*value) return FAJIT_OK;
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    int digits = (value[0] >= '0' && value[0] <= '9') || (value[0] == '-' && value[1] >= '0' && value[1] <= '9');
    if (digits && errno == 0 && *end == '\0' && v >= min && v <= max) {
        *out = (int)v;
        return FAJIT_OK;
    }
    return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "%s = '%.64s': use a whole number from %d to %d, or unset (%s)", name,
                   value, min, max, unset_means);
}
