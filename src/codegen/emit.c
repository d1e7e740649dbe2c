/*
 * emit.c - text buffer, register banks, labels and comments for PTX emission (see emit.h).
 */
#include "emit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffer ---------------------------------------------------------------------------- */
void fj_buf_init(fj_buf *b) { memset(b, 0, sizeof *b); }

void fj_buf_free(fj_buf *b)
{
    free(b->data);
    fj_buf_init(b);
}

static int buf_reserve(fj_buf *b, size_t extra)
{
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void fj_buf_puts(fj_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (!buf_reserve(b, n)) return;
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

void fj_buf_vprintf(fj_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void fj_buf_printf(fj_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fj_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *fj_buf_take(fj_buf *b, size_t *len)
{
    if (b->failed || !buf_reserve(b, 0)) {
        fj_buf_free(b);
        return NULL;
    }
    char *p = b->data;
    if (len) *len = b->len;
    fj_buf_init(b);
    return p;
}

/* ---- emitter -------------------------------------------------------------------------------- */
void fj_emit_init(fj_emit *e, int verbosity)
{
    memset(e, 0, sizeof *e);
    fj_buf_init(&e->body);
    e->verbosity = verbosity;
    e->indent = 1;
}

void fj_emit_free(fj_emit *e) { fj_buf_free(&e->body); }

void fj_emit_error(fj_emit *e, const char *fmt, ...)
{
    if (e->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    if (!e->err[0]) snprintf(e->err, sizeof e->err, "emitter error");
}

int fj_bank(fj_emit *e, const char *name, const char *type)
{
    for (int i = 0; i < e->n_banks; i++)
        if (strcmp(e->banks[i].name, name) == 0) return i;
    if (e->n_banks == FJ_MAX_BANKS || strlen(name) >= sizeof e->banks[0].name) {
        fj_emit_error(e, "register bank '%s': too many banks or name too long", name);
        return 0;
    }
    fj_bank_t *b = &e->banks[e->n_banks];
    snprintf(b->name, sizeof b->name, "%s", name);
    snprintf(b->type, sizeof b->type, "%s", type);
    b->count = 0;
    return e->n_banks++;
}

fj_reg_t fj_alloc(fj_emit *e, int bank, int n)
{
    fj_reg_t r = {(short)bank, 0};
    if (bank < 0 || bank >= e->n_banks) {
        fj_emit_error(e, "fj_alloc: bad bank %d", bank);
        return r;
    }
    r.idx = (short)e->banks[bank].count;
    e->banks[bank].count += n;
    if (e->banks[bank].count > 30000) fj_emit_error(e, "register bank %s overflow", e->banks[bank].name);
    return r;
}

fj_reg_t fj_at(fj_reg_t r, int i)
{
    r.idx = (short)(r.idx + i);
    return r;
}

const char *fj_r(const fj_emit *e, fj_reg_t r)
{
    static _Thread_local char slots[16][40];
    static _Thread_local unsigned next;
    char *s = slots[next++ & 15];
    snprintf(s, sizeof slots[0], "%%%s%d", e->banks[r.bank].name, r.idx);
    return s;
}

FJ_PRINTF(4, 0)
static void emit_vline(fj_emit *e, const char *prefix, const char *suffix, const char *fmt, va_list ap)
{
    if (e->err[0]) return;
    if (e->indent) fj_buf_puts(&e->body, "\t");
    fj_buf_puts(&e->body, prefix);
    fj_buf_vprintf(&e->body, fmt, ap);
    fj_buf_puts(&e->body, suffix);
}

void fj_ins(fj_emit *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_vline(e, "", ";\n", fmt, ap);
    va_end(ap);
}

void fj_line(fj_emit *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_vline(e, "", "\n", fmt, ap);
    va_end(ap);
}

void fj_comment(fj_emit *e, int level, const char *fmt, ...)
{
    if (e->verbosity < level) return;
    va_list ap;
    va_start(ap, fmt);
    emit_vline(e, "// ", "\n", fmt, ap);
    va_end(ap);
}

void fj_banner(fj_emit *e, const char *title, const char *why)
{
    if (e->verbosity < 1 || e->err[0]) return;
    if (e->verbosity == 1) {
        fj_buf_printf(&e->body, "\n\t// ---- %s ----\n", title);
        return;
    }
    fj_buf_puts(&e->body, "\n\t// ==================================================================================\n");
    fj_buf_printf(&e->body, "\t// %s\n", title);
    if (why && *why) {
        /* explanation lines are separated by '\n' in `why` */
        const char *p = why;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            fj_buf_printf(&e->body, "\t//   %.*s\n", (int)n, p);
            p += n + (nl ? 1 : 0);
        }
    }
    fj_buf_puts(&e->body, "\t// ==================================================================================\n");
}

const char *fj_label_new(fj_emit *e, const char *stem, char *buf, size_t size)
{
    snprintf(buf, size, "$L_%s_%d", stem, e->label_seq++);
    return buf;
}

void fj_label(fj_emit *e, const char *label)
{
    if (e->err[0]) return;
    fj_buf_printf(&e->body, "%s:\n", label);
}

void fj_emit_declare_banks(const fj_emit *e, fj_buf *out)
{
    for (int i = 0; i < e->n_banks; i++) {
        const fj_bank_t *b = &e->banks[i];
        if (b->count == 0) continue;
        fj_buf_printf(out, "\t.reg .%s %%%s<%d>;\n", b->type, b->name, b->count);
    }
}
