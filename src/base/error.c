/*
 * error.c - per-thread status messages (see error.h) and the version / status-name calls.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FJ_MSG_SIZE 2048

static _Thread_local char t_message[FJ_MSG_SIZE];
static _Thread_local int t_muted;

int fj_error_mute(int on)
{
    int was = t_muted;
    t_muted = on;
    return was;
}

fajit_status fj_fail(fajit_status status, const char *fmt, ...)
{
    va_list ap;
    if (t_muted) return status;
    va_start(ap, fmt);
    vsnprintf(t_message, sizeof t_message, fmt, ap);
    va_end(ap);
    return status;
}

fajit_status fj_fail_context(fajit_status status, const char *fmt, ...)
{
    char old[FJ_MSG_SIZE];
    va_list ap;
    memcpy(old, t_message, sizeof old);
    va_start(ap, fmt);
    int n = vsnprintf(t_message, sizeof t_message, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    size_t used = (size_t)n < sizeof t_message ? (size_t)n : sizeof t_message - 1;
    size_t room = sizeof t_message - used;
    if (room > 3) {
        memcpy(t_message + used, ": ", 2);
        size_t len = strnlen(old, room - 3);
        memcpy(t_message + used + 2, old, len);
        t_message[used + 2 + len] = '\0';
    }
    return status;
}

void fj_clear_error(void) { t_message[0] = '\0'; }

const char *fj_errno_text(int err, char *buf, size_t size)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(err, buf, size);
#else
    if (strerror_r(err, buf, size) != 0) snprintf(buf, size, "errno %d", err);
    return buf;
#endif
}

const char *fajit_errmsg(void) { return t_message; }

const char *fajit_version(void) { return FAJIT_VERSION; }

int fajit_version_number(void) { return FAJIT_VERSION_NUMBER; }

void fajit_free(void *ptr) { free(ptr); }

const char *fajit_status_name(fajit_status status)
{
    switch (status) {
    case FAJIT_OK: return "FAJIT_OK";
    case FAJIT_ERR_INVALID_ARGUMENT: return "FAJIT_ERR_INVALID_ARGUMENT";
    case FAJIT_ERR_INVALID_CONFIG: return "FAJIT_ERR_INVALID_CONFIG";
    case FAJIT_ERR_UNSUPPORTED: return "FAJIT_ERR_UNSUPPORTED";
    case FAJIT_ERR_OUT_OF_MEMORY: return "FAJIT_ERR_OUT_OF_MEMORY";
    case FAJIT_ERR_LIBRARY_MISSING: return "FAJIT_ERR_LIBRARY_MISSING";
    case FAJIT_ERR_COMPILE: return "FAJIT_ERR_COMPILE";
    case FAJIT_ERR_CUDA: return "FAJIT_ERR_CUDA";
    case FAJIT_ERR_NO_DEVICE: return "FAJIT_ERR_NO_DEVICE";
    case FAJIT_ERR_IO: return "FAJIT_ERR_IO";
    case FAJIT_ERR_INTERNAL: return "FAJIT_ERR_INTERNAL";
    }
    return "FAJIT_ERR_UNKNOWN";
}
