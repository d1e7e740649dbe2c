/*
 * pipe_mutate.c - inject one pipeline bug into an sm_90a kernel's PTX text (see pipe_mutate.h). The edits find their
 * place by the code, not by comments, so they work at every verbosity:
 *   the consumers' section starts at the label $L_consumer; their first mbarrier wait is Q's, the second the first
 *   K tile's; their first wgmma.wait_group followed by an mbarrier.arrive is the S GEMM's and its K-empty release;
 *   the producer's second expect_tx is its first K tile's; a wrap-around flips a parity with xor.b32 %rN, %rN, 1.
 * No cmocka here: the GPU test uses it in a child process.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe_mutate.h"

static const char *const bug_names[BUG_COUNT] = {"none",          "drop-release", "flip-parity",    "wrong-barrier",
                                                 "shrink-tx",     "early-release", "stuck-parity", "stuck-producer",
                                                 "unelected",     "no-store-wait"};

const char *pipe_bug_name(int bug) { return bug >= 0 && bug < BUG_COUNT ? bug_names[bug] : NULL; }

int pipe_bug_find(const char *name)
{
    for (int i = 0; i < BUG_COUNT; i++)
        if (strcmp(name, bug_names[i]) == 0) return i;
    return -1;
}

/* ---- the text as lines ------------------------------------------------------------------------------------------ */
typedef struct text {
    char **line; /* each malloc'd, without its newline; NULL: deleted */
    int n;
} text;

static int split(text *t, const char *ptx)
{
    int cap = 1024;
    t->n = 0, t->line = malloc((size_t)cap * sizeof *t->line);
    for (const char *s = ptx; t->line && *s;) {
        size_t n = strcspn(s, "\n");
        if (t->n == cap) {
            char **v = realloc(t->line, (size_t)(cap *= 2) * sizeof *v);
            if (!v) return 0;
            t->line = v;
        }
        t->line[t->n] = malloc(n + 1);
        if (!t->line[t->n]) return 0;
        memcpy(t->line[t->n], s, n), t->line[t->n++][n] = '\0';
        s += n + (s[n] == '\n');
    }
    return t->line != NULL;
}

static char *join(const text *t)
{
    size_t len = 1;
    for (int i = 0; i < t->n; i++) len += t->line[i] ? strlen(t->line[i]) + 1 : 0;
    char *out = malloc(len), *o = out;
    for (int i = 0; out && i < t->n; i++)
        if (t->line[i]) o += sprintf(o, "%s\n", t->line[i]);
    if (out) *o = '\0';
    return out;
}

static void drop(text *t)
{
    for (int i = 0; i < t->n; i++) free(t->line[i]);
    free(t->line);
}

/* The first line at or after `from` holding s (-1: none). */
static int find(const text *t, int from, const char *s)
{
    for (int i = from < 0 ? 0 : from; i < t->n; i++)
        if (t->line[i] && strstr(t->line[i], s)) return i;
    return -1;
}

/* The nth (1-based) line at or after `from` holding s. */
static int find_nth(const text *t, int from, const char *s, int nth)
{
    int i = from - 1;
    while (nth-- > 0 && (i = find(t, i + 1, s)) >= 0) {
    }
    return i;
}

/* Replace line i by a formatted one. */
__attribute__((format(printf, 3, 4))) static int put(text *t, int i, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(t->line[i]);
    t->line[i] = strdup(buf);
    return t->line[i] != NULL;
}

/* Line i's instruction without its leading whitespace. */
static const char *body(const text *t, int i)
{
    const char *s = t->line[i];
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* ---- the bugs --------------------------------------------------------------------------------------------------- */
/* The consumers' S GEMM wait_group and its K-empty release right after it: the release's line, or -1. */
static int s_release(const text *t)
{
    int c = find(t, 0, "$L_consumer:");
    for (int i = find(t, c, "wgmma.wait_group"); c >= 0 && i >= 0; i = find(t, i + 1, "wgmma.wait_group"))
        if (i + 1 < t->n && strstr(t->line[i + 1], "mbarrier.arrive.shared")) return i + 1;
    return -1;
}

/* The consumers' first K-full wait (their second wait), or -1. */
static int k_wait(const text *t)
{
    int c = find(t, 0, "$L_consumer:");
    return c < 0 ? -1 : find_nth(t, c, "mbarrier.try_wait.parity", 2);
}

static int flip_parity(text *t, char *what, size_t size)
{
    int i = k_wait(t), r = find(t, 0, ".reg ");
    char *comma = i >= 0 ? strrchr(t->line[i], ',') : NULL;
    if (!comma || r < 0 || i < 1 || strncmp(body(t, i - 1), "$L_", 3) != 0) return snprintf(what, size, "no K wait"), 0;
    char par[64], old[512];
    snprintf(par, sizeof par, "%.*s", (int)strcspn(comma + 2, ";"), comma + 2);
    snprintf(old, sizeof old, "%s", body(t, i));
    *comma = '\0';
    char head[512];
    snprintf(head, sizeof head, "%s", t->line[i]);
    if (par[0] == '%') {
        if (!put(t, i, "%s, %%pipe_mut0;", head) ||
            !put(t, i - 1, "\txor.b32 %%pipe_mut0, %s, 1; // pipe_mutate flip-parity\n%s", par, t->line[i - 1]) ||
            !put(t, r, "\t.reg .b32 %%pipe_mut<1>;\n%s", t->line[r]))
            return 0;
    } else if (!put(t, i, "%s, %d; // pipe_mutate flip-parity", head, atoi(par) ^ 1)) {
        return 0;
    }
    snprintf(what, size, "line %d: %s waits with the parity %s xor 1", i + 1, old, par);
    return 1;
}

static int wrong_barrier(text *t, char *what, size_t size)
{
    int i = k_wait(t);
    const char *plus = i >= 0 ? strstr(t->line[i], "+") : NULL;
    if (!plus) return snprintf(what, size, "no K wait"), 0;
    long off = strtol(plus + 1, NULL, 10);
    char key[64];
    snprintf(key, sizeof key, "+%ld],", off);
    int init = -1;
    for (int j = find(t, 0, "mbarrier.init"); j >= 0 && init < 0; j = find(t, j + 1, "mbarrier.init"))
        if (strstr(t->line[j], key)) init = j;
    if (init < 0) return snprintf(what, size, "no init of +%ld", off), 0;
    const char *count = strrchr(t->line[init], ',');
    for (int j = find(t, init + 1, "mbarrier.init"); j >= 0; j = find(t, j + 1, "mbarrier.init")) {
        const char *c = strrchr(t->line[j], ',');
        if (strcmp(c, count) != 0) continue;
        long to = strtol(strstr(t->line[j], "+") + 1, NULL, 10);
        char head[512];
        snprintf(head, sizeof head, "%.*s", (int)(plus - t->line[i]), t->line[i]);
        snprintf(what, size, "line %d: %s waits on +%ld (the next barrier of count%s) instead", i + 1, body(t, i), to,
                 count + 1);
        return put(t, i, "%s+%ld%s // pipe_mutate wrong-barrier", head, to, strchr(plus, ']'));
    }
    return snprintf(what, size, "no other barrier of count%s", count + 1), 0;
}

static int shrink_tx(text *t, char *what, size_t size)
{
    int i = find_nth(t, 0, "mbarrier.arrive.expect_tx", 2);
    char *comma = i >= 0 ? strrchr(t->line[i], ',') : NULL;
    if (!comma) return snprintf(what, size, "no second expect_tx"), 0;
    long bytes = strtol(comma + 1, NULL, 10);
    snprintf(what, size, "line %d: %s announces %ld bytes", i + 1, body(t, i), bytes / 2);
    *comma = '\0';
    char head[512];
    snprintf(head, sizeof head, "%s", t->line[i]);
    return put(t, i, "%s, %ld; // pipe_mutate shrink-tx", head, bytes / 2);
}

/* The consumers' (or the producer's, before $L_consumer) last parity flip deleted. */
static int stuck_parity(text *t, int producer, char *what, size_t size)
{
    int c = find(t, 0, "$L_consumer:"), last = -1;
    for (int i = find(t, producer ? 0 : c, "xor.b32"); c >= 0 && i >= 0 && (!producer || i < c);
         i = find(t, i + 1, "xor.b32")) {
        char a[32], b[32];
        if (sscanf(body(t, i), "xor.b32 %31[^,], %31[^,], 1;", a, b) == 2 && strcmp(a, b) == 0 && a[1] == 'r') last = i;
    }
    if (last < 0) return snprintf(what, size, "no parity flip in the %s", producer ? "producer" : "consumers"), 0;
    snprintf(what, size, "line %d: %s deleted", last + 1, body(t, last));
    return put(t, last, "\t// pipe_mutate stuck-%s: %s", producer ? "producer" : "parity", body(t, last));
}

char *pipe_mutate(const char *ptx, int bug, char *what, size_t size)
{
    text t;
    char *out = NULL;
    snprintf(what, size, "%s", "nothing");
    if (!split(&t, ptx)) goto done;
    int ok = 0, i;
    switch (bug) {
    case BUG_NONE: ok = 1; break;
    case BUG_DROP_RELEASE:
    case BUG_EARLY_RELEASE:
    case BUG_UNELECTED:
        if ((i = s_release(&t)) < 0) {
            snprintf(what, size, "no wgmma.wait_group followed by an mbarrier.arrive in the consumers");
            break;
        }
        if (bug == BUG_UNELECTED) {
            const char *m = strstr(t.line[i], "mbarrier.arrive");
            if (body(&t, i)[0] != '@') {
                snprintf(what, size, "line %d: %s has no guard", i + 1, body(&t, i));
                break;
            }
            snprintf(what, size, "line %d: %s loses its guard", i + 1, body(&t, i));
            ok = put(&t, i, "\t%s // pipe_mutate unelected", m);
        } else if (bug == BUG_DROP_RELEASE) {
            snprintf(what, size, "line %d: %s deleted", i + 1, body(&t, i));
            ok = put(&t, i, "\t// pipe_mutate drop-release: %s", body(&t, i));
        } else {
            snprintf(what, size, "line %d: %s moved above %s", i + 1, body(&t, i), body(&t, i - 1));
            char *x = t.line[i];
            t.line[i] = t.line[i - 1], t.line[i - 1] = x;
            ok = 1;
        }
        break;
    case BUG_FLIP_PARITY: ok = flip_parity(&t, what, size); break;
    case BUG_WRONG_BARRIER: ok = wrong_barrier(&t, what, size); break;
    case BUG_SHRINK_TX: ok = shrink_tx(&t, what, size); break;
    case BUG_STUCK_PARITY: ok = stuck_parity(&t, 0, what, size); break;
    case BUG_STUCK_PRODUCER: ok = stuck_parity(&t, 1, what, size); break;
    case BUG_NO_STORE_WAIT:
        if ((i = find(&t, 0, "cp.async.bulk.wait_group.read")) < 0) {
            snprintf(what, size, "no cp.async.bulk.wait_group.read");
            break;
        }
        snprintf(what, size, "line %d: %s deleted", i + 1, body(&t, i));
        ok = put(&t, i, "\t// pipe_mutate no-store-wait: %s", body(&t, i));
        break;
    default: snprintf(what, size, "no bug %d", bug);
    }
    if (ok) out = join(&t);
done:
    drop(&t);
    return out;
}
