/* sass_hazard.c - see sass_hazard.h. */
#include "sass_hazard.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 8 /* committed groups tracked; older ones are kept in the last slot (never dropped unwaited) */

typedef struct regset {
    uint64_t w[4]; /* R0..R255 */
} regset;

typedef struct state {
    regset open;         /* issued, not yet committed (no gsb0 yet) */
    regset slot[SLOTS];  /* committed groups in flight, newest first */
    int seen;
} state;

typedef struct sinsn {
    unsigned addr;
    char text[200]; /* the instruction as printed, for the message */
    char op[64];
    int pred;        /* guarded by a predicate */
    int target;      /* branch target instruction, -1 none */
    char label[32];  /* branch target label */
    int dest, dest_n; /* destination register and count (dest_n 0: none) */
    int wgmma, acc, acc_n, a, gsb0; /* wgmma: accumulators acc..+acc_n, A registers a..a+3 (a -1: from smem) */
    int depbar;      /* WARPGROUP.DEPBAR.LE gsb0, N: N; -1 otherwise */
} sinsn;

static void set_range(regset *s, int r, int n)
{
    for (int i = r; i < r + n && i < 256; i++)
        if (i >= 0) s->w[i / 64] |= 1ull << (i % 64);
}

static int has(const regset *s, int r) { return r >= 0 && r < 256 && (s->w[r / 64] >> (r % 64) & 1); }

static int reg_at(const char *p)
{
    if (p[0] != 'R' || !isdigit((unsigned char)p[1])) return -1;
    return atoi(p + 1);
}

/* One instruction line (address comment, optional predicate, opcode, operands, ';') into x; 0 when it is not one. */
static int parse_line(const char *line, sinsn *x)
{
    const char *p = strstr(line, "/*");
    if (!p || !isxdigit((unsigned char)p[2])) return 0;
    memset(x, 0, sizeof *x);
    x->target = -1, x->a = -1, x->depbar = -1;
    x->addr = (unsigned)strtoul(p + 2, NULL, 16);
    p = strstr(p, "*/");
    if (!p) return 0;
    p += 2;
    while (*p == ' ' || *p == '\t') p++;
    snprintf(x->text, sizeof x->text, "%.*s", (int)strcspn(p, ";\n"), p);
    if (*p == '@') {
        x->pred = 1;
        while (*p && *p != ' ') p++;
        while (*p == ' ') p++;
    }
    size_t n = strcspn(p, " ;");
    if (n == 0 || n >= sizeof x->op) return 0;
    memcpy(x->op, p, n);
    p += n;
    while (*p == ' ') p++;
    const char *ops = p; /* the operands */
    const char *lab = strstr(ops, "`(");
    if (lab) snprintf(x->label, sizeof x->label, "%.*s", (int)strcspn(lab + 2, ")"), lab + 2);
    if (strncmp(x->op, "HGMMA", 5) == 0 || strncmp(x->op, "QGMMA", 5) == 0 || strncmp(x->op, "IGMMA", 5) == 0 ||
        strncmp(x->op, "BGMMA", 5) == 0) {
        const char *shape = strchr(x->op, '.');
        int m = 0, nn = 0;
        if (!shape || sscanf(shape + 1, "%dx%d", &m, &nn) != 2) return 0;
        x->wgmma = 1;
        x->acc = reg_at(ops);
        x->acc_n = strstr(x->op, ".F16.") && !strstr(x->op, ".F32") ? nn / 4 : nn / 2;
        const char *second = strchr(ops, ',');
        if (second) {
            second++;
            while (*second == ' ') second++;
            x->a = reg_at(second);
        }
        x->gsb0 = strstr(ops, "gsb0") != NULL;
        return 1;
    }
    if (strncmp(x->op, "WARPGROUP.DEPBAR", 16) == 0) {
        const char *c = strchr(ops, ',');
        x->depbar = c ? (int)strtol(c + 1, NULL, 0) : 0;
        return 1;
    }
    int r = reg_at(ops);
    if (r >= 0 && (ops[1 + strspn(ops + 1, "0123456789")] == ',' || ops[1 + strspn(ops + 1, "0123456789")] == ' ')) {
        x->dest = r;
        x->dest_n = strstr(x->op, ".128") ? 4 : strstr(x->op, ".64") || strstr(x->op, ".WIDE") ? 2 : 1;
        if (strncmp(x->op, "LDSM", 4) == 0) /* LDSM.16.M88.4: 4 registers, .2: 2 */
            x->dest_n = strstr(x->op, ".4") ? 4 : strstr(x->op, ".2") ? 2 : 1;
    }
    return 1;
}

static int join_set(regset *d, const regset *s)
{
    int changed = 0;
    for (int i = 0; i < 4; i++)
        if ((d->w[i] | s->w[i]) != d->w[i]) d->w[i] |= s->w[i], changed = 1;
    return changed;
}

static void join(state *dst, const state *src, int *changed)
{
    *changed |= join_set(&dst->open, &src->open);
    for (int k = 0; k < SLOTS; k++) *changed |= join_set(&dst->slot[k], &src->slot[k]);
    if (!dst->seen) dst->seen = 1, *changed = 1;
}

static int busy(const state *s, int r)
{
    if (has(&s->open, r)) return 1;
    for (int k = 0; k < SLOTS; k++)
        if (has(&s->slot[k], r)) return 1;
    return 0;
}

static void step(const sinsn *x, state *s)
{
    if (x->wgmma) {
        if (x->acc >= 0) set_range(&s->open, x->acc, x->acc_n);
        if (x->a >= 0) set_range(&s->open, x->a, 4);
        if (x->gsb0) {
            for (int i = 0; i < 4; i++) s->slot[SLOTS - 1].w[i] |= s->slot[SLOTS - 2].w[i];
            memmove(&s->slot[1], &s->slot[0], (SLOTS - 2) * sizeof s->slot[0]);
            s->slot[0] = s->open;
            memset(&s->open, 0, sizeof s->open);
        }
    } else if (x->depbar >= 0) {
        for (int k = x->depbar; k < SLOTS; k++) memset(&s->slot[k], 0, sizeof s->slot[k]);
    }
}

int fj_sass_wgmma_hazards(const char *sass, char *why, size_t why_len)
{
    if (why_len) why[0] = '\0';
    size_t cap = 1024, n = 0, nl = 0, lcap = 256;
    sinsn *v = malloc(cap * sizeof *v);
    struct {
        char name[32];
        int at;
    } *labels = malloc(lcap * sizeof *labels);
    int wgmmas = 0, found = 0;
    if (!v || !labels) {
        free(v), free(labels);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    for (const char *line = sass; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (buf[0] == '.' && strncmp(buf, ".L_", 3) == 0 && strchr(buf, ':')) {
            if (nl == lcap) {
                void *t = realloc(labels, (lcap *= 2) * sizeof *labels);
                if (!t) break;
                labels = t;
            }
            snprintf(labels[nl].name, sizeof labels[nl].name, "%.*s", (int)strcspn(buf, ":"), buf);
            labels[nl++].at = (int)n;
        } else {
            if (n == cap) {
                void *t = realloc(v, (cap *= 2) * sizeof *v);
                if (!t) break;
                v = t;
            }
            if (parse_line(buf, &v[n])) wgmmas += v[n++].wgmma;
        }
        line = end ? end + 1 : NULL;
    }
    if (!wgmmas) {
        snprintf(why, why_len, "no wgmma in %zu instructions", n);
        free(v), free(labels);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].label[0])
            for (size_t j = 0; j < nl; j++)
                if (strcmp(labels[j].name, v[i].label) == 0) v[i].target = labels[j].at;
    state *in = calloc(n + 1, sizeof *in);
    int *work = malloc((n + 1) * sizeof *work), *queued = calloc(n + 1, sizeof *queued);
    if (!in || !work || !queued) {
        snprintf(why, why_len, "out of memory");
        found = -1;
        goto done;
    }
    size_t top = 0;
    in[0].seen = 1;
    work[top++] = 0, queued[0] = 1;
    while (top) {
        int i = work[--top];
        queued[i] = 0;
        if ((size_t)i >= n) continue;
        state s = in[i];
        step(&v[i], &s);
        const sinsn *x = &v[i];
        int uncond = !x->pred && (strcmp(x->op, "BRA") == 0 || strcmp(x->op, "EXIT") == 0 || strcmp(x->op, "RET") == 0 ||
                                  strncmp(x->op, "RET.", 4) == 0);
        int succ[2], ns = 0;
        if (!uncond) succ[ns++] = i + 1;
        if (x->target >= 0) succ[ns++] = x->target;
        for (int k = 0; k < ns; k++) {
            int changed = 0;
            join(&in[succ[k]], &s, &changed);
            if (changed && !queued[succ[k]]) work[top++] = succ[k], queued[succ[k]] = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!in[i].seen || !v[i].dest_n) continue;
        for (int r = v[i].dest; r < v[i].dest + v[i].dest_n; r++)
            if (busy(&in[i], r)) {
                if (!found)
                    snprintf(why, why_len, "/*%04x*/ %s writes R%d, which a wgmma in flight %s", v[i].addr, v[i].text, r,
                             "reads (A) or writes (accumulators)");
                found++;
                break;
            }
    }
done:
    free(in), free(work), free(queued), free(v), free(labels);
    return found;
}
