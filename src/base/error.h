/*
 * error.h - the library's status/message channel (all of libfajit: codegen and runtime).
 *
 * Every failing internal function calls fj_fail(), which stores a message for the calling thread and
 * returns the status, so a failure is reported and propagated in one line:
 *     if (cfg->head_dim != 64) return fj_fail(FAJIT_ERR_INVALID_CONFIG, "head_dim = %d: ...", d);
 * Public entry points call fj_clear_error() first. Nothing here prints.
 */
#ifndef FJ_ERROR_H
#define FJ_ERROR_H

#include <stddef.h>

#include "fajit.h"

#if defined(__GNUC__)
#define FJ_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define FJ_PRINTF(fmt_idx, arg_idx)
#endif

/* Store "fmt..." as this thread's message and return status. */
fajit_status fj_fail(fajit_status status, const char *fmt, ...) FJ_PRINTF(2, 3);
/* Prepend "prefix: " to this thread's current message (adds context while propagating); returns status. */
fajit_status fj_fail_context(fajit_status status, const char *fmt, ...) FJ_PRINTF(2, 3);
void fj_clear_error(void);
/* While muted (on = 1), fj_fail returns its status without writing a message: for searches that try
 * thousands of configs and keep none of their refusals (config_fill.c). Returns the previous setting. */
int fj_error_mute(int on);

/* The text of errno value err (strerror_r, GNU or POSIX flavour), in buf or in static storage. */
const char *fj_errno_text(int err, char *buf, size_t size);

#endif
