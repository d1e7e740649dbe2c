/*
 * test_ptxas_grid.c - (label ptxas) every config of a representative grid that fajit_config_check
 * accepts must generate PTX that `ptxas -v` assembles for sm_80 and sm_90a with no spills, a zero-byte
 * stack frame and no "Potential Performance Loss" (C7518: wgmma serialized by a compiler-inserted
 * warpgroup wait; test_support.c's log parser); one cubin per dtype is disassembled to check for HMMA and no local memory.
 * A config whose plan needs a newer target than sm_80 (plan.min_target_sm: causal configs near the
 * register limit, sm80.c) is assembled for sm_90a only, and fj_plan_check_target must refuse sm_80.
 *
 * Grid: both dtypes x all five head dims x causal / not x a list of tile choices (Br, Bc, stages,
 * swizzle, warps), plus the heuristic's own pick for each. FAJIT_PTXAS_GRID=full crosses every tile
 * field instead (slow). The two archs assemble in parallel.
 *
 * Tools: ptxas from $FAJIT_PTXAS, else the one CMake found, else /usr/local/cuda/bin, else $PATH
 * (absent: the whole test skips). nvdisasm from $FAJIT_NVDISASM, else CMake's, else
 * /usr/local/cuda/bin, else $PATH (absent: the SASS test skips with the reason).
 * FAJIT_TEST_VERBOSE=1 prints a line per config.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "fajit.h"
#include "test_support.h"

#ifndef FAJIT_PTXAS_DEFAULT
#define FAJIT_PTXAS_DEFAULT ""
#endif
#ifndef FAJIT_NVDISASM_DEFAULT
#define FAJIT_NVDISASM_DEFAULT ""
#endif

#define N_ARCHS 2
static const char *const k_archs[N_ARCHS] = {"sm_80", "sm_90a"};

typedef struct tile {
    int br, bc, stages, swizzle, warps;
} tile;

/* Default grid: tile choices crossed with dtype x head dim x causal. */
static const tile k_tiles[] = {
    {64, 64, 2, 128, 4},   {128, 64, 2, 128, 4},  {128, 32, 3, 64, 8}, {64, 32, 1, FAJIT_SWIZZLE_NONE, 4},
    {128, 128, 2, 128, 8}, {64, 128, 4, 32, 4},   {16, 16, 1, 32, 1},  {256, 64, 2, 128, 8},
    {32, 32, 2, 64, 2},    {64, 64, 3, FAJIT_SWIZZLE_NONE, 4}, {128, 64, 1, 32, 8}, {64, 16, 4, 128, 4},
    {32, 64, 2, 128, 1},   {128, 128, 1, 64, 8},  {128, 64, 3, 128, 8}, {64, 64, 4, 64, 4},
    {128, 32, 2, FAJIT_SWIZZLE_NONE, 8}, {64, 32, 2, 32, 2}, {256, 32, 2, 64, 8}, {16, 64, 2, 128, 1},
};

/* Warp pairs (col_warps = 2): block_m, block_n, stages, swizzle, warps. A swizzle wider than half a
 * row allows is rejected by the check (d96 at 64, d192 at 128) and counted as such. */
static const tile k_pair_tiles[] = {
    {64, 64, 1, 128, 4}, {128, 64, 2, 128, 8}, {128, 32, 3, 64, 8}, {64, 64, 2, 64, 4}, {64, 32, 2, 32, 4},
};

/* sm_90a (warp-specialized, assembled for sm_90a only): block_m, block_n, stages, swizzle, overlap,
 * pingpong (warps follow from block_m). Each sits at or near a register or smem edge of the model. */
typedef struct tile90 {
    int br, bc, stages, swizzle, overlap, pingpong;
} tile90;
static const tile90 k_tiles90[] = {
    {128, 128, 2, 128, 1, 1},  {128, 176, 2, 128, 1, 1},  {128, 80, 2, 128, 1, -1}, {192, 128, 2, 128, 1, 1},
    {192, 96, 3, 64, 1, 1},    {64, 64, 2, 32, -1, -1},   {64, 112, 4, 128, 1, -1}, {128, 112, 1, 64, 1, 1},
    {128, 192, 1, 128, -1, -1}, {128, 144, 1, 128, -1, -1}, {192, 112, 2, 32, 1, -1}, {128, 64, 3, 128, 1, 1},
};

static const int k_head_dims[] = {64, 96, 128, 192, 256};

typedef struct grid_state {
    char *ptxas, *nvdisasm, *dir;
    int tried, accepted, failed, max_regs, max_regs_over, max_regs_under;
    int sm90_only;        /* sm_80-path configs whose plan refuses the sm_80 target (assembled for sm_90a only) */
    char sass_cubin[2][4096]; /* one sm_80 cubin per dtype (f16, bf16), kept for the SASS test */
    char sass90_cubin[2][4096]; /* one warp-specialized sm_90a cubin per dtype */
    int ws_accepted;          /* sm_90a configs accepted (assembled for sm_90a only) */
    double seconds;
} grid_state;

static grid_state g;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int verbose(void)
{
    const char *v = getenv("FAJIT_TEST_VERBOSE");
    return v && v[0] && strcmp(v, "0") != 0;
}

/* ---- one config ------------------------------------------------------------------------------- */

/* Print one failure (a config may print one per arch); the caller counts the config once. */
static void report_failure(const char *canon, const char *what, const char *detail)
{
    printf("FAIL %s: %s\n%s%s", canon, what, detail ? detail : "", detail && detail[0] ? "\n" : "");
}

/* Assemble dir/k.ptx for the given archs at once; returns the max register count, or -1 on failure. */
static int assemble(const char *canon, const char *const *archs, int n_archs)
{
    char ptx[4096], cubin[N_ARCHS][4096], log[N_ARCHS][4096], arch_flag[N_ARCHS][32];
    int pid[N_ARCHS], regs = 0, ok = 1;
    snprintf(ptx, sizeof ptx, "%s/k.ptx", g.dir);
    for (int a = 0; a < n_archs; a++) {
        snprintf(cubin[a], sizeof cubin[a], "%s/k_%s.cubin", g.dir, archs[a]);
        snprintf(log[a], sizeof log[a], "%s/k_%s.log", g.dir, archs[a]);
        snprintf(arch_flag[a], sizeof arch_flag[a], "-arch=%s", archs[a]);
        char *argv[] = {g.ptxas, arch_flag[a], (char *)fj_test_ptxas_mode(archs[a]), "-v", ptx, "-o", cubin[a], NULL};
        pid[a] = fj_test_spawn(argv, log[a], log[a]);
    }
    for (int a = 0; a < n_archs; a++) {
        int code = fj_test_wait(pid[a]);
        char *text = fj_test_read_file(log[a], NULL);
        fj_ptxas_report rep = fj_test_ptxas_log(text);
        char what[128];
        if (code != 0 || rep.bad || rep.entries == 0) {
            snprintf(what, sizeof what, "ptxas %s: exit %d, %s", arch_flag[a], code,
                     code ? "rejected" : rep.entries ? "spills, stack or warnings" : "no -v report");
            report_failure(canon, what, text);
            ok = 0;
        }
        if (rep.registers > regs) regs = rep.registers;
        free(text);
    }
    return ok ? regs : -1;
}

/* Register estimate of the plan against ptxas: reported, not asserted (the plan says "estimate"). */
static void compare_register_estimate(const fj_plan *plan, int regs)
{
    if (regs - plan->reg_total > g.max_regs_over) g.max_regs_over = regs - plan->reg_total;
    if (plan->reg_total - regs > g.max_regs_under) g.max_regs_under = plan->reg_total - regs;
}

/* Generate the PTX of a checked config into `path`; 0, or -1 after reporting the failure. */
static int generate_to_file(const fajit_config *cfg, int verbosity, const char *canon, const char *path)
{
    char *ptx = NULL;
    size_t len = 0;
    FILE *f;
    if (fajit_generate_ptx(cfg, verbosity, &ptx, &len) != FAJIT_OK) {
        report_failure(canon, "fajit_generate_ptx failed on a checked config", fajit_errmsg());
        return -1;
    }
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(ptx, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    fajit_free(ptx);
    return 0;
}

/* Keep the first cubin of each path and dtype for the SASS test (sm_80's, or the warp-specialized sm_90a one). */
static void keep_sass_cubin(fajit_dtype dtype, int ws)
{
    char *keep = ws ? g.sass90_cubin[dtype == FAJIT_DTYPE_BF16] : g.sass_cubin[dtype == FAJIT_DTYPE_BF16];
    char from[4096];
    if (keep[0]) return;
    snprintf(from, sizeof from, "%s/k_%s.cubin", g.dir, ws ? "sm_90a" : "sm_80");
    snprintf(keep, sizeof g.sass_cubin[0], "%s/sass%s_%s.cubin", g.dir, ws ? "90" : "", dtype == FAJIT_DTYPE_BF16 ? "bf16" : "f16");
    assert_int_equal(rename(from, keep), 0);
}

static void try_config(const fajit_config *cfg)
{
    char canon[160], path[4096];
    int regs, verbosity = g.accepted % 3; /* comments must assemble too */
    fajit_config_format(cfg, canon, sizeof canon);
    g.tried++;
    if (fajit_config_check(cfg) != FAJIT_OK) {
        if (!fajit_errmsg()[0]) {
            report_failure(canon, "rejected with an empty message", NULL);
            g.failed++;
        }
        if (verbose()) printf("  rejected %s: %s\n", canon, fajit_errmsg());
        return;
    }
    g.accepted++;
    snprintf(path, sizeof path, "%s/k.ptx", g.dir);
    if (generate_to_file(cfg, verbosity, canon, path) != 0) {
        g.failed++;
        return;
    }
    fj_plan plan;
    int planned = fj_plan_build(cfg, &plan) == FAJIT_OK, ws = planned && plan.ws;
    static const char *const sm90a_only[] = {"sm_90a"};
    /* sm_90a PTX (wgmma, setmaxnreg) assembles for sm_90a only; the sm_80 PTX for both, unless its plan
     * needs sm_90 or newer (then sm_80 must be refused) */
    int sm80_ok = !planned || fj_plan_check_target(&plan, fj_arch_find("sm_80")) == FAJIT_OK;
    if (!ws && !sm80_ok) {
        g.sm90_only++;
        if (!strstr(fajit_errmsg(), "needs sm_90")) {
            report_failure(canon, "sm_80 refused without the register arithmetic", fajit_errmsg());
            g.failed++;
            return;
        }
    }
    regs = ws || !sm80_ok ? assemble(canon, sm90a_only, 1) : assemble(canon, k_archs, N_ARCHS);
    g.ws_accepted += ws;
    if (regs < 0) {
        char kept[4096];
        snprintf(kept, sizeof kept, "%s/fail_%d.ptx", g.dir, ++g.failed);
        if (rename(path, kept) == 0) printf("  its PTX (-v %d) is kept in %s\n", verbosity, kept);
        return;
    }
    if (regs > g.max_regs) g.max_regs = regs;
    if (planned) compare_register_estimate(&plan, regs);
    if (verbose()) printf("  ok %s (-v %d): %d registers\n", canon, verbosity, regs);
    keep_sass_cubin(cfg->dtype, ws);
}

/* ---- the grid ---------------------------------------------------------------------------------- */

/* Every tile of a table on top of base, with col_warps. */
static void run_table(fajit_config base, const tile *tiles, size_t n, int col_warps)
{
    for (size_t t = 0; t < n; t++) {
        fajit_config cfg = base;
        cfg.block_m = tiles[t].br;
        cfg.block_n = tiles[t].bc;
        cfg.stages = tiles[t].stages;
        cfg.swizzle = tiles[t].swizzle;
        cfg.warps = tiles[t].warps;
        cfg.col_warps = col_warps;
        try_config(&cfg);
    }
}

/* The sm_90a grid: the heuristic's pick and every k_tiles90 entry, over the base's dtype, head dim, mask. */
static void run_tiles90(fajit_config base)
{
    const char *mode = getenv("FAJIT_PTXAS_GRID");
    fajit_config cfg = base;
    base.arch = cfg.arch = FAJIT_ARCH_SM90A;
    if (fajit_config_fill(NULL, NULL, &cfg) == FAJIT_OK) try_config(&cfg);
    else {
        report_failure("sm_90a heuristic", "fajit_config_fill found no config", fajit_errmsg());
        g.failed++;
    }
    if (mode && strcmp(mode, "full") == 0) { /* the tuner's whole sm_90a space */
        static const int bns[] = {64, 80, 96, 112, 128, 144, 160, 176, 192, 256}, flags[][2] = {{1, 1}, {1, -1}, {-1, -1}};
        for (int wg = 1; wg <= 3; wg++)
            for (int ni = 0; ni < 10; ni++)
                for (int st = 1; st <= 3; st++)
                    for (int fi = 0; fi < 3; fi++) {
                        cfg = base;
                        cfg.block_m = 64 * wg, cfg.warps = 4 * (wg + 1), cfg.block_n = bns[ni], cfg.stages = st;
                        cfg.swizzle = base.head_dim % 64 == 0 ? 128 : 64;
                        cfg.overlap = flags[fi][0], cfg.pingpong = wg > 1 ? flags[fi][1] : -1, cfg.col_warps = 1;
                        try_config(&cfg);
                    }
        return;
    }
    for (size_t t = 0; t < sizeof k_tiles90 / sizeof k_tiles90[0]; t++) {
        cfg = base;
        cfg.block_m = k_tiles90[t].br, cfg.warps = 4 * (k_tiles90[t].br / 64 + 1), cfg.block_n = k_tiles90[t].bc;
        cfg.stages = k_tiles90[t].stages, cfg.swizzle = k_tiles90[t].swizzle, cfg.col_warps = 1;
        cfg.overlap = k_tiles90[t].overlap, cfg.pingpong = k_tiles90[t].pingpong;
        try_config(&cfg);
    }
}

static void run_tiles(fajit_config base)
{
    static const int brs[] = {16, 32, 64, 128, 256}, bcs[] = {16, 32, 64, 128}, sws[] = {FAJIT_SWIZZLE_NONE, 32, 64, 128};
    static const int warps[] = {1, 2, 4, 8};
    const char *mode = getenv("FAJIT_PTXAS_GRID");
    fajit_config cfg = base;
    if (fajit_config_fill(NULL, NULL, &cfg) == FAJIT_OK) { /* the heuristic's pick */
        try_config(&cfg);
    } else {
        char canon[160];
        fajit_config_format(&base, canon, sizeof canon);
        report_failure(canon, "fajit_config_fill found no config", fajit_errmsg());
        g.failed++;
    }
    if (mode && strcmp(mode, "full") == 0) {
        for (size_t i = 0; i < 5 * 4 * 4 * 4 * 4; i++) {
            size_t k = i;
            cfg = base;
            cfg.block_m = brs[k % 5], k /= 5;
            cfg.block_n = bcs[k % 4], k /= 4;
            cfg.stages = 1 + (int)(k % 4), k /= 4;
            cfg.swizzle = sws[k % 4], k /= 4;
            cfg.warps = warps[k % 4];
            try_config(&cfg);
        }
        return;
    }
    run_table(base, k_tiles, sizeof k_tiles / sizeof k_tiles[0], 1);
    run_table(base, k_pair_tiles, sizeof k_pair_tiles / sizeof k_pair_tiles[0], 2);
}

static void test_grid_assembles(void **state)
{
    double t0 = now_seconds();
    (void)state;
    for (int dt = FAJIT_DTYPE_F16; dt <= FAJIT_DTYPE_BF16; dt++)
        for (size_t h = 0; h < sizeof k_head_dims / sizeof k_head_dims[0]; h++)
            for (int causal = 0; causal <= 1; causal++) {
                fajit_config base = {.arch = FAJIT_ARCH_SM80, .dtype = (fajit_dtype)dt,
                                     .head_dim = k_head_dims[h], .causal = causal};
                run_tiles(base);
                run_tiles90(base);
            }
    g.seconds = now_seconds() - t0;
    printf("ptxas grid: %d configs assembled (%d sm_80 configs for sm_80 and sm_90a, %d warp-specialized sm_90a "
           "configs for sm_90a), 0 spills on sm_90a; max registers %d (%d tried, %d rejected by fajit_config_check, %d "
           "accepted configs FAILED; %.1f s, %.2f s per config)\n",
           g.accepted - g.failed, g.accepted - g.ws_accepted, g.ws_accepted, g.max_regs, g.tried, g.tried - g.accepted,
           g.failed, g.seconds, g.accepted ? g.seconds / g.accepted : 0.0);
    printf("register estimate vs ptxas: up to %d over the plan's reg_total, up to %d under\n", g.max_regs_over,
           g.max_regs_under);
    printf("%d sm_80-path configs need sm_90 or newer (plan.min_target_sm): assembled for sm_90a only, sm_80 "
           "refused\n", g.sm90_only);
    fflush(stdout);
    assert_int_equal(g.failed, 0);
    assert_true(g.accepted > 0);
}

/* ---- SASS -------------------------------------------------------------------------------------- */

/* Does the disassembly use instruction `op` (a word after blanks, followed by '.', ' ' or ';')? */
static int has_op(const char *sass, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = strstr(sass, op); p; p = strstr(p + 1, op))
        if (p > sass && (p[-1] == ' ' || p[-1] == '\t') && (p[n] == '.' || p[n] == ' ' || p[n] == ';')) return 1;
    return 0;
}

static void test_sass(void **state)
{
    (void)state;
    if (!g.nvdisasm) {
        printf("SKIP: SASS checks: nvdisasm not found (set FAJIT_NVDISASM, or pip install nvidia-cuda-nvdisasm)\n");
        skip();
    }
    for (int d = 0; d < 2; d++) {
        char out[4096];
        char *sass;
        if (!g.sass_cubin[d][0]) {
            print_error("no %s config assembled: nothing to disassemble\n", d ? "bf16" : "f16");
            fail();
        }
        snprintf(out, sizeof out, "%s/sass_%d.txt", g.dir, d);
        char *argv[] = {g.nvdisasm, g.sass_cubin[d], NULL};
        assert_int_equal(fj_test_run(argv, out, NULL), 0);
        sass = fj_test_read_file(out, NULL);
        assert_non_null(sass);
        if (!has_op(sass, "HMMA") || has_op(sass, "LDL") || has_op(sass, "STL"))
            print_error("%s: HMMA %d, LDL %d, STL %d\n", g.sass_cubin[d], has_op(sass, "HMMA"), has_op(sass, "LDL"),
                        has_op(sass, "STL"));
        assert_true(has_op(sass, "HMMA"));
        assert_false(has_op(sass, "LDL"));
        assert_false(has_op(sass, "STL"));
        printf("SASS %s: HMMA present, no LDL/STL\n", d ? "bf16" : "f16");
        free(sass);
    }
    /* the warp-specialized sm_90a kernels: wgmma, TMA and setmaxnreg survived into the SASS */
    static const char *const must[] = {"HGMMA", "UTMALDG", "USETMAXREG", "SYNCS"};
    for (int d = 0; d < 2; d++) {
        char out[4096];
        if (!g.sass90_cubin[d][0]) {
            print_error("no %s sm_90a config assembled: nothing to disassemble\n", d ? "bf16" : "f16");
            fail();
        }
        snprintf(out, sizeof out, "%s/sass90_%d.txt", g.dir, d);
        char *argv[] = {g.nvdisasm, g.sass90_cubin[d], NULL};
        assert_int_equal(fj_test_run(argv, out, NULL), 0);
        char *sass = fj_test_read_file(out, NULL);
        assert_non_null(sass);
        for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
            if (!has_op(sass, must[i])) print_error("%s: no %s\n", g.sass90_cubin[d], must[i]);
            assert_true(has_op(sass, must[i]));
        }
        assert_false(has_op(sass, "LDL"));
        assert_false(has_op(sass, "STL"));
        assert_false(has_op(sass, "HMMA")); /* no mma.sync fallback inside */
        printf("SASS sm_90a %s: HGMMA, UTMALDG, USETMAXREG, SYNCS present; no HMMA, no LDL/STL\n", d ? "bf16" : "f16");
        free(sass);
    }
}

static int teardown(void **state)
{
    (void)state;
    if (!g.failed) fj_test_remove_dir(g.dir); /* else the failing PTX stays there */
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_grid_assembles), cmocka_unit_test(test_sass)};
    g.ptxas = fj_test_find_tool("FAJIT_PTXAS", "ptxas", FAJIT_PTXAS_DEFAULT, "/usr/local/cuda/bin/ptxas", NULL);
    if (!g.ptxas) fj_test_skip_all("ptxas not found (set FAJIT_PTXAS or install the CUDA toolkit in /usr/local/cuda)");
    if (access(g.ptxas, X_OK) != 0) {
        printf("ptxas %s (from FAJIT_PTXAS) is not an executable file\n", g.ptxas);
        return 1;
    }
    g.nvdisasm =
        fj_test_find_tool("FAJIT_NVDISASM", "nvdisasm", FAJIT_NVDISASM_DEFAULT, "/usr/local/cuda/bin/nvdisasm", NULL);
    g.dir = fj_test_make_temp_dir("fajit-ptxas");
    if (!g.dir) fj_test_skip_all("cannot make a temporary directory");
    printf("ptxas: %s\nnvdisasm: %s\n", g.ptxas, g.nvdisasm ? g.nvdisasm : "(none)");
    return cmocka_run_group_tests_name("ptxas_grid", tests, NULL, teardown);
}
