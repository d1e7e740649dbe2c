/*
 * test_support.h - helpers shared by the cmocka tests: finding external tools (ptxas, nvdisasm),
 * running a program with its output captured in files, reading files, temporary directories, and
 * skipping visibly (also when there is no GPU).
 *
 * Skipping: a test binary that cannot run here (no ptxas, no GPU) prints one line saying why and
 * exits with FJ_TEST_SKIP_CODE, which ctest reports as "Skipped" (SKIP_RETURN_CODE in
 * tests/CMakeLists.txt). Inside a cmocka group, print the reason and call cmocka's skip().
 */
#ifndef FJ_TEST_SUPPORT_H
#define FJ_TEST_SUPPORT_H

#include <stddef.h>

#include "fajit.h"

#define FJ_TEST_SKIP_CODE 77

/*
 * Path of a tool: $env_var if set and non-empty (env_var may be NULL), else the first of the
 * NULL-terminated fallback paths that is executable, else `name` found on $PATH. Returns a malloc'd
 * path, or NULL when the tool is nowhere.
 */
char *fj_test_find_tool(const char *env_var, const char *name, ...);

/*
 * Run argv[0] (a path) with stdout and stderr sent to out_path and err_path (either may be NULL:
 * /dev/null; both the same path: one file), and wait. Returns the exit status, 128 + signal if it
 * was killed, or -1 if it could not be started.
 */
int fj_test_run(char *const argv[], const char *out_path, const char *err_path);

/* Start such a run without waiting; returns the pid or -1. fj_test_wait gives the exit status. */
int fj_test_spawn(char *const argv[], const char *out_path, const char *err_path);
int fj_test_wait(int pid);

/* Whole file as a NUL-terminated malloc'd string (length in *len if non-NULL), or NULL. */
char *fj_test_read_file(const char *path, size_t *len);

/* mkdtemp under $TMPDIR (or /tmp) with the given prefix; malloc'd path or NULL. */
char *fj_test_make_temp_dir(const char *prefix);
/* Remove a directory made by fj_test_make_temp_dir and everything under it (rm -rf); 0 when it is gone. */
int fj_test_remove_dir(const char *dir);

/* What a `ptxas -v` log says (the ptxas binary's, or the info log of nvJitLink / NVRTC with -v): the
 * largest register count, stack frame and spill stores of its entries. */
typedef struct fj_ptxas_report {
    int registers; /* max "Used N registers" */
    int entries;   /* "bytes stack frame" lines seen */
    int stack;     /* largest stack frame (bytes) */
    int spill;     /* largest spill stores or loads (bytes) */
    int warned;    /* a line with "warning" */
    int bad;       /* a nonzero stack frame, a spill, a warning, or a stack line that does not parse */
} fj_ptxas_report;
fj_ptxas_report fj_test_ptxas_log(const char *log);

/* ptxas's mode flag for a kernel assembled for arch as the runtime compiles it: "-c" (relocatable) for the targets the
 * runtime links with nvJitLink, whose ptxas works so (sm_80, sm_86, sm_90 ...: the sm_80 path), "-O3" (whole program, the
 * default) for the "a" targets, whose warp-specialized kernels NVRTC compiles as a whole program (setmaxnreg). The
 * two can differ: softcap's early max on the sm_80 path assembled with 198 registers whole-program and spilled 204
 * bytes at 255 under nvJitLink (ptxas 13.0, session 17). */
const char *fj_test_ptxas_mode(const char *arch);
/* Write ptx (len bytes) to dir/k.ptx and run `ptxas -arch=<arch> <fj_test_ptxas_mode(arch)> -v` on it into
 * dir/k.cubin. Returns ptxas's exit status (-1 when the file could not be written or ptxas not started); *rep gets
 * what its log says and *log_text (when not NULL) the log itself, for the caller to print and free. */
int fj_test_ptxas(const char *ptxas, const char *dir, const char *ptx, size_t len, const char *arch,
                  fj_ptxas_report *rep, char **log_text);

/* Occurrences of needle in hay (overlapping ones too): PTX text checks. */
int fj_test_count(const char *hay, const char *needle);

/* Print "SKIP: <reason>" and exit with FJ_TEST_SKIP_CODE. */
void fj_test_skip_all(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* For the gpu tests: when st (from fajit_context_create) says there is no CUDA driver or no device,
 * skip with "no GPU for the gpu tests (<status>): <message>"; otherwise return. */
void fj_test_skip_without_gpu(fajit_status st);
/* The gpu tests' context (device 0, default options): skips without a GPU (fj_test_skip_without_gpu);
 * NULL, with the reason printed as a FAIL line, when it cannot be made otherwise. */
fajit_context *fj_test_gpu_context(void);
/* 1 when st == want and the calling thread's fajit_errmsg() holds every non-NULL fragment; otherwise
 * prints the status, the message and the fragments, and returns 0 (assert on it). */
int fj_test_status_says(fajit_status st, fajit_status want, const char *f1, const char *f2, const char *f3);
/* fajit_attention_args (fajit_attention_args_init, BHND strides) of a problem on made-up, aligned device
 * addresses: for argument checks that never launch. */
fajit_attention_args fj_test_args(fajit_dtype dtype, int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k,
                                  int head_dim);
/* fajit.h's definition of one query row ("Attention variants"), written out key by key in float64, for the unit tests
 * that check the CPU references against it: the row's diagonal key ad (i + Nk - Nq), keys j < lk (k / v row j at
 * j x k_row / v_row elements), the mask and score variants of a (causal, window, attention_chunk, softcap; dtype,
 * head_dim), the row's sink logit (-INFINITY: none) and ALiBi slope (0: none). Writes o[0, head_dim) and *lse (-inf
 * when the row sees neither a key nor a sink); lk > FJ_TEST_DIRECT_KEYS gives a NaN row. */
#define FJ_TEST_DIRECT_KEYS 1024
void fj_test_direct_row(const fajit_attention_args *a, double sink, double slope, long ad, int lk, const uint16_t *q,
                        const uint16_t *k, int64_t k_row, const uint16_t *v, int64_t v_row, double *o, double *lse);
/* The heuristic's config on `arch` for a shape (fajit_config_fill on ctx): what the gpu tests pass when they
 * force a path. */
fajit_status fj_test_path_config(fajit_context *ctx, fajit_arch arch, const fajit_shape *shape, fajit_dtype dtype,
                                 int head_dim, int causal, fajit_config *cfg);
/* The same with the attention variants `mods` (FAJIT_MOD_*) in the config the heuristic fills. */
fajit_status fj_test_path_config_mods(fajit_context *ctx, fajit_arch arch, const fajit_shape *shape, fajit_dtype dtype,
                                      int head_dim, int causal, int mods, fajit_config *cfg);
/* A context made with the environment variable `name` set to `value` (then unset again: contexts read such
 * variables when they are made); disk_cache as in fajit_context_options. */
fajit_status fj_test_context_with_env(const char *name, const char *value, int disk_cache, fajit_context **ctx_out);
/* Create and destroy a context (disk cache off) to see that a GPU is usable: fj_test_skip_without_gpu. */
void fj_test_require_gpu(void);
/* A context on device 0 with the disk cache on in cache_dir; its status (and fajit_errmsg() on failure). */
fajit_status fj_test_context_in(const char *cache_dir, fajit_context **ctx_out);
/* A context without a GPU that looks like one: the disk cache (and so the tune file) in cache_dir, the
 * identity of an sm_90 device named gpu with this driver and 227 KiB of shared memory
 * (fj_context_set_identity). NULL when it cannot be made. */
fajit_context *fj_test_fake_context(const char *cache_dir, const char *gpu, int driver);

#endif
