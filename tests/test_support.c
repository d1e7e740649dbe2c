/*
 * test_support.c - process, file and tool helpers for the tests (see test_support.h). POSIX only.
 */
#include "test_support.h"

#include "runtime/context.h"
#include "runtime/half.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *fj_test_find_tool(const char *env_var, const char *name, ...)
{
    const char *env = env_var ? getenv(env_var) : NULL;
    const char *path = getenv("PATH");
    const char *fallback;
    va_list ap;
    if (env && env[0]) return dup_str(env);
    va_start(ap, name);
    while ((fallback = va_arg(ap, const char *)) != NULL) {
        if (fallback[0] && access(fallback, X_OK) == 0) {
            va_end(ap);
            return dup_str(fallback);
        }
    }
    va_end(ap);
    while (path && *path) {
        size_t n = strcspn(path, ":");
        char buf[4096];
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, name);
            if (access(buf, X_OK) == 0) return dup_str(buf);
        }
        path += n + (path[n] == ':');
    }
    return NULL;
}

int fj_test_spawn(char *const argv[], const char *out_path, const char *err_path)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int rc;
    const int flags = O_WRONLY | O_CREAT | O_TRUNC;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null", flags, 0644);
    if (err_path && out_path && strcmp(err_path, out_path) == 0)
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, err_path ? err_path : "/dev/null", flags, 0644);
    rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? (int)pid : -1;
}

int fj_test_wait(int pid)
{
    int status;
    if (pid < 0) return -1;
    while (waitpid((pid_t)pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

int fj_test_run(char *const argv[], const char *out_path, const char *err_path)
{
    return fj_test_wait(fj_test_spawn(argv, out_path, err_path));
}

char *fj_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    size_t n = 0, cap = 0, got;
    if (!f) return NULL;
    do {
        if (cap - n < 4096) {
            char *grown = realloc(data, cap = cap * 2 + 8192);
            if (!grown) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = grown;
        }
        got = fread(data + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    data[n] = '\0';
    if (len) *len = n;
    return data;
}

fj_ptxas_report fj_test_ptxas_log(const char *log)
{
    fj_ptxas_report rep = {0};
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *p;
        int stack, st, ld, regs;
        if ((p = strstr(line, "bytes stack frame")) != NULL && (!end || p < end)) {
            rep.entries++;
            /* "ptxas . N bytes stack frame, ..." (nvJitLink) or "    N bytes stack frame, ..." (ptxas) */
            while (line < p && (*line < '0' || *line > '9')) line++;
            if (sscanf(line, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &stack, &st, &ld) != 3)
                rep.bad = 1, stack = st = ld = 0;
            if (stack || st || ld) rep.bad = 1;
            if (stack > rep.stack) rep.stack = stack;
            if (st > rep.spill) rep.spill = st;
            if (ld > rep.spill) rep.spill = ld;
        }
        if ((p = strstr(line, "Used ")) != NULL && (!end || p < end) && sscanf(p, "Used %d registers", &regs) == 1 &&
            regs > rep.registers)
            rep.registers = regs;
        if ((p = strstr(line, "warning")) != NULL && (!end || p < end)) rep.bad = rep.warned = 1;
        /* an info line, not a warning: ptxas serialized the wgmma instructions (C7518 and kin: a
         * compiler-inserted warpgroup wait, e.g. with a wgmma in flight across a divergent branch) */
        if ((p = strstr(line, "Potential Performance Loss")) != NULL && (!end || p < end)) rep.bad = rep.warned = 1;
        line = end ? end + 1 : NULL;
    }
    return rep;
}

const char *fj_test_ptxas_mode(const char *arch)
{
    size_t n = arch ? strlen(arch) : 0;
    return n && arch[n - 1] == 'a' ? "-O3" : "-c";
}

int fj_test_ptxas(const char *ptxas, const char *dir, const char *ptx, size_t len, const char *arch,
                  fj_ptxas_report *rep, char **log_text)
{
    char src[1024], out[1024], log[1024], flag[64];
    snprintf(src, sizeof src, "%s/k.ptx", dir);
    snprintf(out, sizeof out, "%s/k.cubin", dir);
    snprintf(log, sizeof log, "%s/k.log", dir);
    snprintf(flag, sizeof flag, "-arch=%s", arch);
    memset(rep, 0, sizeof *rep);
    if (log_text) *log_text = NULL;
    FILE *f = fopen(src, "wb");
    if (!f) return -1;
    size_t wrote = fwrite(ptx, 1, len, f);
    if (fclose(f) != 0 || wrote != len) return -1;
    char *argv[] = {(char *)ptxas, flag, (char *)fj_test_ptxas_mode(arch), "-v", src, "-o", out, NULL};
    int code = fj_test_run(argv, log, log);
    char *text = fj_test_read_file(log, NULL);
    *rep = fj_test_ptxas_log(text ? text : "");
    if (log_text) *log_text = text;
    else free(text);
    return code;
}

char *fj_test_make_temp_dir(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", prefix);
    return mkdtemp(buf) ? dup_str(buf) : NULL;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int fj_test_remove_dir(const char *dir)
{
    if (!dir) return 0;
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 || errno == ENOENT ? 0 : -1;
}

void fj_test_skip_all(const char *fmt, ...)
{
    va_list ap;
    printf("SKIP: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(FJ_TEST_SKIP_CODE);
}

void fj_test_skip_without_gpu(fajit_status st)
{
    if (st == FAJIT_ERR_LIBRARY_MISSING || st == FAJIT_ERR_NO_DEVICE)
        fj_test_skip_all("no GPU for the gpu tests (%s): %s", fajit_status_name(st), fajit_errmsg());
}

fajit_status fj_test_context_in(const char *cache_dir, fajit_context **ctx_out)
{
    fajit_context_options o = fajit_context_options_default();
    o.disk_cache = 1;
    o.cache_dir = cache_dir;
    return fajit_context_create(&o, ctx_out);
}

fajit_context *fj_test_fake_context(const char *cache_dir, const char *gpu, int driver)
{
    fajit_context *ctx = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.device = -1;
    o.disk_cache = 1;
    o.cache_dir = cache_dir;
    if (fajit_context_create(&o, &ctx) != FAJIT_OK) return NULL;
    fj_context_set_identity(ctx, "sm_90", gpu, driver, 232448);
    return ctx;
}

void fj_test_require_gpu(void)
{
    fajit_context *probe = NULL;
    fajit_context_options o = fajit_context_options_default();
    o.disk_cache = 0;
    fj_test_skip_without_gpu(fajit_context_create(&o, &probe));
    fajit_context_destroy(probe);
}

fajit_context *fj_test_gpu_context(void)
{
    fajit_context *ctx = NULL;
    fajit_context_options opts = fajit_context_options_default();
    fajit_status st = fajit_context_create(&opts, &ctx);
    fj_test_skip_without_gpu(st);
    if (st != FAJIT_OK) printf("FAIL: fajit_context_create: %s: %s\n", fajit_status_name(st), fajit_errmsg());
    return st == FAJIT_OK ? ctx : NULL;
}

int fj_test_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

int fj_test_status_says(fajit_status st, fajit_status want, const char *f1, const char *f2, const char *f3)
{
    const char *msg = fajit_errmsg(), *frag[3] = {f1, f2, f3};
    int ok = st == want;
    for (int i = 0; i < 3; i++) ok = ok && (!frag[i] || strstr(msg, frag[i]));
    if (!ok)
        printf("status %s (wanted %s), message \"%s\"; expected \"%s\", \"%s\", \"%s\"\n", fajit_status_name(st),
               fajit_status_name(want), msg, f1 ? f1 : "", f2 ? f2 : "", f3 ? f3 : "");
    return ok;
}

fajit_attention_args fj_test_args(fajit_dtype dtype, int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k,
                                  int head_dim)
{
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = dtype;
    a.batch = batch, a.heads_q = heads_q, a.heads_kv = heads_kv;
    a.seqlen_q = seqlen_q, a.seqlen_k = seqlen_k, a.head_dim = head_dim;
    a.q = 0x7f0000000000ull;
    a.k = 0x7f0000100000ull;
    a.v = 0x7f0000200000ull;
    a.o = 0x7f0000300000ull;
    fajit_args_set_bhnd_strides(&a);
    return a;
}

fajit_status fj_test_path_config(fajit_context *ctx, fajit_arch arch, const fajit_shape *shape, fajit_dtype dtype,
                                 int head_dim, int causal, fajit_config *cfg)
{
    return fj_test_path_config_mods(ctx, arch, shape, dtype, head_dim, causal, 0, cfg);
}

fajit_status fj_test_path_config_mods(fajit_context *ctx, fajit_arch arch, const fajit_shape *shape, fajit_dtype dtype,
                                      int head_dim, int causal, int mods, fajit_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->arch = arch, cfg->dtype = dtype, cfg->head_dim = head_dim, cfg->causal = causal, cfg->mods = mods;
    return fajit_config_fill(ctx, shape, cfg);
}

fajit_status fj_test_context_with_env(const char *name, const char *value, int disk_cache, fajit_context **ctx_out)
{
    fajit_context_options opts = fajit_context_options_default();
    opts.disk_cache = disk_cache;
    setenv(name, value, 1);
    fajit_status st = fajit_context_create(&opts, ctx_out);
    unsetenv(name);
    return st;
}

void fj_test_direct_row(const fajit_attention_args *a, double sink, double slope, long ad, int lk, const uint16_t *q,
                        const uint16_t *k, int64_t k_row, const uint16_t *v, int64_t v_row, double *o, double *lse)
{
    double s[FJ_TEST_DIRECT_KEYS];
    int vis[FJ_TEST_DIRECT_KEYS];
    const int dim = a->head_dim;
    if (lk > FJ_TEST_DIRECT_KEYS) { /* past the buffers: a NaN row, which every comparison fails */
        for (int d = 0; d < dim; d++) o[d] = NAN;
        *lse = NAN;
        return;
    }
    const double scale = 1.0 / sqrt((double)dim);
    double mx = sink, l = 0.0;
    for (int j = 0; j < lk; j++) {
        int ok = 1;
        if (a->causal && j > ad) ok = 0;
        if (a->window && a->window_left >= 0 && j < ad - a->window_left) ok = 0;
        if (a->window && a->window_right >= 0 && j > ad + a->window_right) ok = 0;
        if (a->attention_chunk > 0) {
            long c0 = (long)floor((double)ad / a->attention_chunk) * a->attention_chunk;
            if (j < c0 || j >= c0 + a->attention_chunk) ok = 0;
        }
        double x = 0.0;
        for (int d = 0; d < dim; d++)
            x += (double)fj_half_to_f32(a->dtype, q[d]) * fj_half_to_f32(a->dtype, k[(int64_t)j * k_row + d]);
        x *= scale;
        if (a->softcap > 0.0f) x = a->softcap * tanh(x / a->softcap);
        x -= slope * fabs((double)(ad - j));
        s[j] = x, vis[j] = ok;
        if (ok && x > mx) mx = x;
    }
    if (sink > -INFINITY) l = exp(sink - mx);
    for (int j = 0; j < lk; j++) l += vis[j] ? exp(s[j] - mx) : 0.0;
    for (int d = 0; d < dim; d++) {
        double acc = 0.0;
        for (int j = 0; j < lk; j++)
            if (vis[j]) acc += exp(s[j] - mx) * fj_half_to_f32(a->dtype, v[(int64_t)j * v_row + d]);
        o[d] = l > 0.0 ? acc / l : 0.0;
    }
    *lse = l > 0.0 ? mx + log(l) : -INFINITY;
}
