/*
 * emit.h - the PTX emitter: a growable text buffer with a sticky error, role-named register banks,
 * labels, and comments filtered by verbosity.
 *
 * Emission code never checks return values: the first failure (out of memory, a bank overflow) is
 * remembered in the buffer and every later call is a no-op; fj_emit_finish() reports it.
 *
 * Registers live in banks named by role (`%acc_o17`, `%row_m1`, `%rd3`, `%p2`). A bank is declared
 * once, with PTX's `%name<N>` range syntax, in the function prologue that fj_emit_finish() writes in
 * front of the body, so the body can allocate registers as it goes.
 *
 * Verbosity: 0 = instructions only, 1 = a comment per block, 2 = the teaching view (banners per
 * phase and comments that explain why). Output depends only on what is emitted: byte-identical for
 * the same calls.
 */
#ifndef FJ_EMIT_H
#define FJ_EMIT_H

#include <stdarg.h>
#include <stddef.h>

#include "../base/error.h"

/* Smallest s with (1 << s) >= n, for n >= 1: the shift that divides by n when n is a power of two. */
static inline int fj_log2_ceil(int n)
{
    int s = 0;
    while ((1 << s) < n) s++;
    return s;
}

/* ---- text buffer ---------------------------------------------------------------------------- */
typedef struct fj_buf {
    char *data;
    size_t len, cap;
    int failed; /* sticky: set on allocation failure */
} fj_buf;

void fj_buf_init(fj_buf *b);
void fj_buf_free(fj_buf *b);
void fj_buf_puts(fj_buf *b, const char *s);
void fj_buf_printf(fj_buf *b, const char *fmt, ...) FJ_PRINTF(2, 3);
void fj_buf_vprintf(fj_buf *b, const char *fmt, va_list ap) FJ_PRINTF(2, 0);
/* Hand the text to the caller (NUL-terminated, malloc'd) and reset the buffer. NULL if it failed. */
char *fj_buf_take(fj_buf *b, size_t *len);

/* ---- register banks ------------------------------------------------------------------------- */
#define FJ_MAX_BANKS 48

typedef struct fj_bank {
    char name[24];  /* "acc_o" -> registers %acc_o0 .. %acc_oN */
    char type[8];   /* PTX type: "f32", "b32", "b64", "pred", ... */
    int count;      /* registers handed out so far */
} fj_bank_t;

/* A register is a bank index plus a number; fj_reg() formats it into a rotating static slot. */
typedef struct fj_reg_t {
    short bank;
    short idx;
} fj_reg_t;

typedef struct fj_emit {
    fj_buf body;
    fj_bank_t banks[FJ_MAX_BANKS];
    int n_banks;
    int verbosity;
    int label_seq;
    int indent;            /* 0 or 1: instructions inside the entry are indented */
    char err[256];         /* first error, if any */
} fj_emit;

void fj_emit_init(fj_emit *e, int verbosity);
void fj_emit_free(fj_emit *e);

/* Declare (or find) a bank; returns its index. */
int fj_bank(fj_emit *e, const char *name, const char *type);
/* Allocate n consecutive registers of a bank; returns the first. */
fj_reg_t fj_alloc(fj_emit *e, int bank, int n);
/* Register i past r, same bank. */
fj_reg_t fj_at(fj_reg_t r, int i);
/* "%acc_o17": formatted into one of 16 rotating buffers, valid for the next 15 calls. */
/* The string lives in one of 16 rotating per-thread slots: use it in the fj_ins call at hand, and never
 * call an emitting function (fj_param_*, fj_emit_*) inside that call's argument list - C leaves the order
 * of argument evaluation open, and with left-to-right (clang) the nested emission's own fj_r calls can
 * overwrite a slot before it is printed. */
const char *fj_r(const fj_emit *e, fj_reg_t r);

/* ---- instructions and text ------------------------------------------------------------------ */
/* One instruction per call, without the trailing ';': fj_ins(e, "add.s32 %s, %s, 1", ...). */
void fj_ins(fj_emit *e, const char *fmt, ...) FJ_PRINTF(2, 3);
/* A raw line, written as is (directives, braces). */
void fj_line(fj_emit *e, const char *fmt, ...) FJ_PRINTF(2, 3);
/* A comment shown at verbosity >= level. */
void fj_comment(fj_emit *e, int level, const char *fmt, ...) FJ_PRINTF(3, 4);
/* A phase banner (verbosity >= 1: one line; 2: boxed, with the explanation lines). */
void fj_banner(fj_emit *e, const char *title, const char *why);
/* A fresh label "$L_<stem>_<n>" (copied into buf). */
const char *fj_label_new(fj_emit *e, const char *stem, char *buf, size_t size);
void fj_label(fj_emit *e, const char *label);
/* Record an error (first one wins); emission continues as no-ops. */
void fj_emit_error(fj_emit *e, const char *fmt, ...) FJ_PRINTF(2, 3);

/* Write the register declarations of every bank into out (one ".reg .type %name<N>;" per bank). */
void fj_emit_declare_banks(const fj_emit *e, fj_buf *out);

#endif
