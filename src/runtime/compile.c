/*
 * compile.c - generated PTX -> cubin with nvJitLink: fajit_compile_cubin (public) and fj_compile_ptx.
 *
 * nvJitLink reports PTX errors from nvJitLinkAddData (nvJitLinkComplete may then still "succeed" with
 * an empty image), so every step's result is checked and the error log is read on the first failure.
 * Logs are put in the message truncated at a line boundary; the whole log goes to the caller's
 * log buffer when one is given.
 */
#include "compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "cuda_api.h"
#include "error.h"

/* Log bytes quoted in an error message (the message itself holds 2 KiB). */
#define LOG_QUOTE_MAX 1200

void fj_compile_list_targets(char *buf, size_t size)
{
    int n;
    const fj_arch_info *t = fj_arch_table(&n);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used + 1 < size; i++) {
        int w = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", t[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

fajit_status fj_compile_check_target(const fj_arch_info *code, const fj_arch_info *target)
{
    size_t len = strlen(code->name);
    int arch_specific = code->name[len - 1] == 'a';
    if (arch_specific ? strcmp(code->name, target->name) == 0 : target->sm >= code->sm) return FAJIT_OK;
    if (arch_specific)
        return fj_fail(FAJIT_ERR_UNSUPPORTED,
                       "target %s: PTX for the %s path uses arch-specific instructions and compiles only for %s",
                       target->name, code->name, code->name);
    return fj_fail(FAJIT_ERR_UNSUPPORTED, "target %s: PTX for the %s path needs %s or newer", target->name,
                   code->name, code->name);
}

fajit_status fj_compiler_identity(char *buf, size_t size)
{
    const fj_nvjitlink_api *jl;
    unsigned major = 0, minor = 0;
    fajit_status st = fj_nvjitlink_load(&jl);
    if (st != FAJIT_OK) return st;
    int rc = jl->version(&major, &minor);
    if (rc != FJ_NVJITLINK_SUCCESS)
        return fj_fail(FAJIT_ERR_COMPILE, "nvJitLinkVersion: %s (%d)", fj_nvjitlink_result_name(rc), rc);
    snprintf(buf, size, "nvJitLink %u.%u", major, minor);
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * nvJitLink session
 * ------------------------------------------------------------------------------------------------- */

/* One log of a handle (error or info), malloc'd and NUL-terminated; "" when empty or unreadable. */
static char *jl_log(const fj_nvjitlink_api *jl, void *h, int error_log)
{
    size_t n = 0;
    int rc = error_log ? jl->get_error_log_size(h, &n) : jl->get_info_log_size(h, &n);
    char *log = malloc(n + 1);
    if (!log) return NULL;
    log[0] = '\0';
    if (rc == FJ_NVJITLINK_SUCCESS && n > 0) {
        rc = error_log ? jl->get_error_log(h, log) : jl->get_info_log(h, log);
        log[rc == FJ_NVJITLINK_SUCCESS ? n : 0] = '\0';
    }
    return log;
}

/* The failure of one nvJitLink step: the message quotes the start of the error log. */
static fajit_status jl_fail(const fj_nvjitlink_api *jl, void *h, int rc, const char *step, const char *sm,
                            char **log_out)
{
    char *log = h ? jl_log(jl, h, 1) : NULL;
    size_t len = log ? strlen(log) : 0;
    while (len > 0 && log[len - 1] == '\n') len--;
    size_t quote = len;
    if (quote > LOG_QUOTE_MAX) { /* cut after a whole line when there is one in the second half */
        quote = LOG_QUOTE_MAX;
        while (quote > LOG_QUOTE_MAX / 2 && log[quote - 1] != '\n') quote--;
        if (log[quote - 1] != '\n') quote = LOG_QUOTE_MAX;
        while (quote > 0 && log[quote - 1] == '\n') quote--;
    }
    fj_fail(FAJIT_ERR_COMPILE, "nvJitLink %s for %s failed: %s (%d)%s%.*s%s", step, sm,
            fj_nvjitlink_result_name(rc), rc, quote ? "\n" : "", (int)quote, log ? log : "",
            quote < len ? "\n... (log truncated; the whole log is returned in the log buffer)" : "");
    if (log_out) *log_out = log;
    else free(log);
    return FAJIT_ERR_COMPILE;
}

/* Complete a session and take its cubin. */
static fajit_status jl_finish(const fj_nvjitlink_api *jl, void *h, const char *sm, void **cubin, size_t *size,
                              char **info_log)
{
    size_t n = 0;
    int rc = jl->complete(h);
    if (rc != FJ_NVJITLINK_SUCCESS) return jl_fail(jl, h, rc, "nvJitLinkComplete", sm, info_log);
    rc = jl->get_linked_cubin_size(h, &n);
    if (rc != FJ_NVJITLINK_SUCCESS || n == 0) return jl_fail(jl, h, rc, "nvJitLinkGetLinkedCubinSize", sm, info_log);
    void *image = malloc(n);
    if (!image) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "cubin of %zu bytes: out of host memory", n);
    rc = jl->get_linked_cubin(h, image);
    if (rc != FJ_NVJITLINK_SUCCESS) {
        free(image);
        return jl_fail(jl, h, rc, "nvJitLinkGetLinkedCubin", sm, info_log);
    }
    if (info_log && !(*info_log = jl_log(jl, h, 0))) {
        free(image);
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "nvJitLink info log: out of host memory");
    }
    *cubin = image;
    *size = n;
    return FAJIT_OK;
}

fajit_status fj_compile_ptx(const char *ptx, size_t len, const char *sm, void **cubin, size_t *size,
                            char **info_log)
{
    const fj_nvjitlink_api *jl;
    char arch_opt[32], names[256];
    void *h = NULL;
    if (info_log) *info_log = NULL;
    if (!ptx || !cubin || !size) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_compile_ptx: NULL ptx or output");
    if (!sm || !fj_arch_find(sm)) {
        fj_compile_list_targets(names, sizeof names);
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "sm = \"%s\": not a known target; valid targets are %s",
                       sm ? sm : "(null)", names);
    }
    fajit_status st = fj_nvjitlink_load(&jl);
    if (st != FAJIT_OK) return st;
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", sm);
    const char *opts[] = {arch_opt, "-O3", "-verbose"};
    int rc = jl->create(&h, 3, opts);
    if (rc != FJ_NVJITLINK_SUCCESS) st = jl_fail(jl, h, rc, "nvJitLinkCreate", sm, info_log);
    else if ((rc = jl->add_data(h, FJ_NVJITLINK_INPUT_PTX, ptx, len, "fajit.ptx")) != FJ_NVJITLINK_SUCCESS)
        st = jl_fail(jl, h, rc, "nvJitLinkAddData (PTX assembly)", sm, info_log);
    else
        st = jl_finish(jl, h, sm, cubin, size, info_log);
    if (h) jl->destroy(&h);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * Public: config -> cubin
 * ------------------------------------------------------------------------------------------------- */
fajit_status fajit_compile_cubin(const fajit_config *cfg, const char *sm, void **cubin_out, size_t *size_out,
                                 char **log_out)
{
    fj_plan plan;
    char *ptx = NULL, names[256];
    size_t ptx_len = 0;
    fj_clear_error();
    if (log_out) *log_out = NULL;
    if (!cfg) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cfg = NULL: a config is required");
    if (!cubin_out || !size_out)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "cubin_out / size_out = NULL: both outputs are required");
    const fj_arch_info *target = sm ? fj_arch_find(sm) : NULL;
    if (!target) {
        fj_compile_list_targets(names, sizeof names);
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "sm = \"%s\": not a known target; valid targets are %s",
                       sm ? sm : "(null)", names);
    }
    fajit_status st = fj_plan_build(cfg, &plan);
    if (st == FAJIT_OK) st = fj_compile_check_target(plan.arch, target);
    if (st == FAJIT_OK) st = fj_generate_ptx_plan(&plan, 0, &ptx, &ptx_len);
    if (st == FAJIT_OK) st = fj_compile_ptx(ptx, ptx_len, target->name, cubin_out, size_out, log_out);
    free(ptx);
    return st;
}
