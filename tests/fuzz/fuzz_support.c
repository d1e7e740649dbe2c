/*
 * fuzz_support.c - fuzz.h: the report stream, silencing, and input as text. Linked into every fuzz target
 * and every replay driver.
 */
#include "fuzz.h"

#include <string.h>

static FILE *g_report;

FILE *fuzz_report(void) { return g_report ? g_report : stderr; }

void fuzz_quiet(void)
{
    if (g_report) return;
    g_report = stderr;
    FILE *null = fopen("/dev/null", "w");
    if (!null) return;
    stdout = null; /* glibc: the standard streams are assignable variables */
    stderr = null;
}

char *fuzz_text(const uint8_t *data, size_t size, size_t max)
{
    size_t n = 0;
    while (n < size && n < max && data[n]) n++;
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}
