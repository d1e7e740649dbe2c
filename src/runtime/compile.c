/*
 * compile.c - generated PTX -> cubin: fajit_compile_cubin (public), fj_compile_kernel (a plan's PTX by
 * the compile path it needs), fj_compile_ptx (nvJitLink) and fj_compile_ptx_whole (NVRTC).
 *
 * Two paths. nvJitLink compiles PTX as a relocatable unit and drops setmaxnreg (info C7504), which the
 * warp-specialized kernels need to move registers from the producer warpgroup to the consumers. A
 * whole-program compile keeps it: the entry's body is wrapped as one inline-asm statement in a CUDA C
 * kernel of the same name, parameter block (NVVM names it fajit_fwd_param_0, as the generator does),
 * __launch_bounds__ (.maxntid, .minnctapersm 1) and extern shared window, and NVRTC compiles that to a
 * cubin (its ptxas runs in whole-program mode). The PTX text is the same either way.
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
#include "codegen/emit.h"
#include "codegen/kernel_abi.h"
#include "cuda_api.h"
#include "base/error.h"

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
 * FAJIT_PTXAS_OPTS: extra ptxas options for every kernel fajit compiles (issue 23's compile-time A/B)
 * ------------------------------------------------------------------------------------------------- */
/* The options accepted: ones that change how hard ptxas works, never what the kernel computes. */
static const char *const k_ptxas_accepted[] = {
    "-O0", "-O1", "-O2", "-O3", "--allow-expensive-optimizations=true", "--allow-expensive-optimizations=false",
};
#define N_PTXAS_ACCEPTED (int)(sizeof k_ptxas_accepted / sizeof k_ptxas_accepted[0])

fajit_status fj_ptxas_opts_read(fj_ptxas_opts *o)
{
    const char *env = getenv("FAJIT_PTXAS_OPTS");
    memset(o, 0, sizeof *o);
    if (!env) return FAJIT_OK;
    size_t len = strlen(env);
    if (len >= sizeof o->text)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "FAJIT_PTXAS_OPTS = \"%.40s...\": %zu characters, at most %zu", env, len,
                       sizeof o->text - 1);
    for (const char *w = env; *w;) {
        size_t n = strcspn(w, " ");
        if (n == 0) {
            w++;
            continue;
        }
        int known = -1;
        for (int i = 0; i < N_PTXAS_ACCEPTED && known < 0; i++)
            if (strlen(k_ptxas_accepted[i]) == n && strncmp(w, k_ptxas_accepted[i], n) == 0) known = i;
        if (known < 0 || o->n == FJ_PTXAS_OPTS_MAX) {
            char list[256] = "";
            for (int i = 0; i < N_PTXAS_ACCEPTED; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", k_ptxas_accepted[i]);
            if (known < 0)
                return fj_fail(FAJIT_ERR_INVALID_ARGUMENT,
                               "FAJIT_PTXAS_OPTS = \"%s\": \"%.*s\" is not an accepted ptxas option; accepted: %s "
                               "(separated by spaces)",
                               env, (int)n, w, list);
            return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "FAJIT_PTXAS_OPTS = \"%s\": more than %d options", env,
                           FJ_PTXAS_OPTS_MAX);
        }
        o->opt[o->n++] = k_ptxas_accepted[known];
        w += n;
    }
    for (int i = 0; i < o->n; i++) /* the canonical text, for cache keys */
        snprintf(o->text + strlen(o->text), sizeof o->text - strlen(o->text), "%s%s", i ? " " : "", o->opt[i]);
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
    fj_ptxas_opts po;
    fajit_status st = fj_ptxas_opts_read(&po);
    if (st == FAJIT_OK) st = fj_nvjitlink_load(&jl);
    if (st != FAJIT_OK) return st;
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", sm);
    const char *opts[3 + FJ_PTXAS_OPTS_MAX] = {arch_opt, "-O3", "-verbose"};
    char xopt[FJ_PTXAS_OPTS_MAX][64];
    int n_opts = 3;
    for (int i = 0; i < po.n; i++) { /* to its ptxas; an -O level instead of nvJitLink's -O3 (which takes 0 or 3) */
        snprintf(xopt[i], sizeof xopt[i], "-Xptxas=%s", po.opt[i]), opts[n_opts++] = xopt[i];
        if (po.opt[i][1] == 'O') opts[1] = opts[--n_opts];
    }
    int rc = jl->create(&h, (uint32_t)n_opts, opts);
    if (rc != FJ_NVJITLINK_SUCCESS) st = jl_fail(jl, h, rc, "nvJitLinkCreate", sm, info_log);
    else if ((rc = jl->add_data(h, FJ_NVJITLINK_INPUT_PTX, ptx, len, "fajit.ptx")) != FJ_NVJITLINK_SUCCESS)
        st = jl_fail(jl, h, rc, "nvJitLinkAddData (PTX assembly)", sm, info_log);
    else
        st = jl_finish(jl, h, sm, cubin, size, info_log);
    if (h) jl->destroy(&h);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * NVRTC: CUDA C -> cubin (whole program)
 * ------------------------------------------------------------------------------------------------- */
static char *rtc_log(const fj_nvrtc_api *rtc, void *prog)
{
    size_t n = 0;
    char *log = rtc->get_program_log_size(prog, &n) == 0 ? calloc(1, n + 1) : NULL;
    if (log && n > 0 && rtc->get_program_log(prog, log) != 0) log[0] = '\0';
    return log;
}

fajit_status fj_nvrtc_cubin(const char *src, const char *name, const char *const *opts, int n_opts, void **cubin,
                            size_t *size, char **log_out)
{
    const fj_nvrtc_api *rtc;
    void *prog = NULL;
    if (log_out) *log_out = NULL;
    fajit_status st = fj_nvrtc_load(&rtc);
    if (st != FAJIT_OK) return st;
    int rc = rtc->create_program(&prog, src, name, 0, NULL, NULL);
    if (rc != 0) return fj_fail(FAJIT_ERR_COMPILE, "%s: nvrtcCreateProgram: %s", name, rtc->get_error_string(rc));
    rc = rtc->compile_program(prog, n_opts, opts);
    char *log = rtc_log(rtc, prog);
    if (rc != 0) {
        int len = log ? (int)strlen(log) : 0;
        st = fj_fail(FAJIT_ERR_COMPILE, "%s: NVRTC (%s): %s: %.*s%s", name, opts[0], rtc->get_error_string(rc),
                     len > LOG_QUOTE_MAX ? LOG_QUOTE_MAX : len, log ? log : "(no log)",
                     len > LOG_QUOTE_MAX ? "\n... (log truncated; the whole log is returned in the log buffer)" : "");
    } else if (rtc->get_cubin_size(prog, size) != 0 || *size == 0 || !(*cubin = malloc(*size))) {
        st = fj_fail(FAJIT_ERR_COMPILE, "%s: NVRTC gave no cubin (%s)", name, opts[0]);
    } else if (rtc->get_cubin(prog, *cubin) != 0) {
        free(*cubin);
        *cubin = NULL;
        st = fj_fail(FAJIT_ERR_COMPILE, "%s: nvrtcGetCUBIN failed (%s)", name, opts[0]);
    }
    rtc->destroy_program(&prog);
    if (log_out) *log_out = log;
    else free(log);
    return st;
}

/* The body of the generated entry: from after its opening "{" line to before the closing "}". */
static int entry_body(const char *ptx, size_t len, const char **body, size_t *body_len)
{
    const char *entry = strstr(ptx, ".entry " FJ_FWD_KERNEL_NAME "(");
    const char *open = entry ? strstr(entry, "\n{\n") : NULL;
    if (!open) return -1;
    const char *start = open + 3, *end = ptx + len;
    while (end > start && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\0')) end--;
    if (end <= start || end[-1] != '}') return -1;
    *body = start;
    *body_len = (size_t)(end - 1 - start);
    return 0;
}

/* The CUDA C wrapper of a whole-program kernel (see the file comment). */
fajit_status fj_compile_whole_source(const fj_plan *plan, const char *ptx, size_t len, fj_buf *src)
{
    const char *body;
    size_t n;
    if (entry_body(ptx, len, &body, &n) != 0)
        return fj_fail(FAJIT_ERR_INTERNAL, "compile.c: no \".entry %s(\" body in the generated PTX", FJ_FWD_KERNEL_NAME);
    fj_buf_printf(src,
                  "// fajit whole-program wrapper: the PTX body of %s as one inline-asm statement\n"
                  "struct __align__(%d) fj_params_t { unsigned char bytes[%d]; };\n"
                  "extern \"C\" __shared__ __align__(1024) unsigned char fj_smem[];\n"
                  "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(const __grid_constant__ fj_params_t p)\n"
                  "{\n"
                  "    asm volatile(\"\" ::\"l\"(fj_smem)); /* keeps fj_smem declared for the body */\n"
                  "    asm volatile(\"{\\n\"\n\"",
                  FJ_FWD_KERNEL_NAME, plan->params_align, plan->params_bytes, plan->threads,
                  fj_plan_ctas_per_sm(plan), FJ_FWD_KERNEL_NAME);
    for (size_t i = 0; i < n; i++) {
        char c = body[i];
        if (c == '\n') fj_buf_puts(src, "\\n\"\n\"");
        else if (c == '"' || c == '\\') fj_buf_printf(src, "\\%c", c);
        else if (c == '\t') fj_buf_puts(src, " ");
        else fj_buf_printf(src, "%c", c);
    }
    fj_buf_puts(src, "\\n}\" ::: \"memory\"); /* its own scope: the body's registers shadow NVVM's */\n}\n");
    return src->failed ? fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "compile.c: out of host memory") : FAJIT_OK;
}

fajit_status fj_compile_ptx_whole(const fj_plan *plan, const char *ptx, size_t len, const char *sm, void **cubin,
                                  size_t *size, char **info_log)
{
    char arch_opt[48], xopt[FJ_PTXAS_OPTS_MAX][64];
    fj_buf src;
    fj_ptxas_opts po;
    if (info_log) *info_log = NULL;
    fajit_status st = fj_ptxas_opts_read(&po);
    if (st != FAJIT_OK) return st;
    fj_buf_init(&src);
    st = fj_compile_whole_source(plan, ptx, len, &src);
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", sm);
    const char *opts[2 + FJ_PTXAS_OPTS_MAX] = {arch_opt, "-Xptxas=-v"};
    for (int i = 0; i < po.n; i++) snprintf(xopt[i], sizeof xopt[i], "-Xptxas=%s", po.opt[i]), opts[2 + i] = xopt[i];
    if (st == FAJIT_OK) st = fj_nvrtc_cubin(src.data, "fajit_fwd.cu", opts, 2 + po.n, cubin, size, info_log);
    fj_buf_free(&src);
    return st;
}

fajit_status fj_compile_kernel(const fj_plan *plan, const char *ptx, size_t len, const char *sm, void **cubin,
                               size_t *size, char **info_log)
{
    if (plan->whole_program) return fj_compile_ptx_whole(plan, ptx, len, sm, cubin, size, info_log);
    return fj_compile_ptx(ptx, len, sm, cubin, size, info_log);
}

fajit_status fj_compiler_identity_for(const fj_plan *plan, char *buf, size_t size)
{
    if (!plan->whole_program) return fj_compiler_identity(buf, size);
    const fj_nvrtc_api *rtc;
    int major = 0, minor = 0;
    fajit_status st = fj_nvrtc_load(&rtc);
    if (st != FAJIT_OK) return st;
    if (rtc->version(&major, &minor) != 0) return fj_fail(FAJIT_ERR_COMPILE, "nvrtcVersion failed");
    snprintf(buf, size, "NVRTC %d.%d whole-program", major, minor);
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Public: config -> cubin
 * ------------------------------------------------------------------------------------------------- */
fajit_status fajit_compile_cubin(const fajit_config *cfg, const char *sm, void **cubin_out, size_t *size_out,
                                 char **log_out)
{
    return fj_compile_cubin_variant(cfg, 0, sm, cubin_out, size_out, log_out);
}

fajit_status fj_compile_cubin_variant(const fajit_config *cfg, unsigned variant, const char *sm, void **cubin_out,
                                      size_t *size_out, char **log_out)
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
    fajit_status st = fj_plan_build_variant(cfg, variant, &plan);
    if (st == FAJIT_OK) st = fj_compile_check_target(plan.arch, target);
    if (st == FAJIT_OK) st = fj_plan_check_target(&plan, target);
    if (st == FAJIT_OK) fj_plan_for_target(&plan, target); /* FP8 K/V cvt, griddepcontrol: where the target has them */
    if (st == FAJIT_OK) st = fj_generate_ptx_plan(&plan, 0, &ptx, &ptx_len);
    if (st == FAJIT_OK) st = fj_compile_kernel(&plan, ptx, ptx_len, target->name, cubin_out, size_out, log_out);
    free(ptx);
    return st;
}
