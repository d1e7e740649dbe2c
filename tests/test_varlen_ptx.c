/*
 * test_varlen_ptx.c - the varlen (packed batch) kernels of both paths compile with the runtime's compiler: sm_80
 * kernels with nvJitLink for sm_80 and sm_90 (the GPUs the library builds them for), sm_90a kernels with NVRTC
 * whole-program (setmaxnreg) for sm_90a; no error, no warning, no spill, no stack (fj_test_ptxas_log). The tiles are
 * the ones the runtime takes (decode.c: the heuristic's, else 64-row tiles with block_n lowered until the variant
 * plans; sm_90a: block_n lowered by 16), over head dims 64-256, causal and not, and the varlen variants the runtime
 * asks for: packed queries and keys, packed queries with batched keys and seqused_k, packed keys with seqused_k,
 * packed queries with paged keys (+ seqused_k). Structure: a varlen kernel reads cu_seqlens_q (and only with packed
 * keys cu_seqlens_k) at kernel_abi.h's offsets, the sm_80 one leaves early for a row block past its sequence; the
 * plain kernel reads neither. tests/test_gpu_varlen.c runs them on a GPU. Also the plain causal kernels on the
 * dynamic longest-first schedule (FAJIT_CAUSAL_SCHED=lpt), which share the varlen kernels' scheduler (sched.c).
 * label ptxas; skips without NVRTC / nvJitLink. Run: ctest --test-dir build -R test_varlen_ptx --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/kernel_abi.h"
#include "codegen/sched.h"
#include "fajit.h"
#include "runtime/compile.h"
#include "runtime/cuda_api.h"
#include "test_support.h"

enum { V = FJ_VARIANT_VARLEN, VK = FJ_VARIANT_VARLEN_K, L = FJ_VARIANT_SEQLENS, P = FJ_VARIANT_PAGED };
enum { LPT = FJ_VARIANT_LPT };
static const unsigned k_variants[] = {V | VK, V, V | L, V | VK | L, V | P, V | P | L};
/* the sm_90a kernel's longest-first schedule (sched.c): varlen alone, head_dim <= 192 (plan.c refuses the rest) */
static const unsigned k_variants_lpt[] = {V | VK | LPT, V | LPT};

static int reads_param(const char *ptx, int off)
{
    char needle[64];
    snprintf(needle, sizeof needle, "[" FJ_FWD_PARAM_NAME "+%d]", off);
    return strstr(ptx, needle) != NULL;
}

static char *gen(const fj_plan *p, size_t *len)
{
    char *ptx = NULL;
    if (fj_generate_ptx_plan(p, 0, &ptx, len) != FAJIT_OK) fail_msg("generate: %s", fajit_errmsg());
    return ptx;
}

static int compiles_clean(const fj_plan *p, const char *ptx, size_t len, const char *sm, const char *text)
{
    void *cubin = NULL;
    size_t size = 0;
    char *log = NULL;
    fajit_status st = fj_compile_kernel(p, ptx, len, sm, &cubin, &size, &log);
    free(cubin);
    fj_ptxas_report rep = fj_test_ptxas_log(log ? log : "");
    int ok = st == FAJIT_OK && rep.entries > 0 && !rep.bad;
    printf("%s %s %s: %d registers, spill %d, stack %d%s\n", ok ? "ok  " : "FAIL", sm, text, rep.registers, rep.spill,
           rep.stack, st != FAJIT_OK ? fajit_errmsg() : rep.warned ? " (warning)" : "");
    if (!ok && log) printf("%s\n", log);
    free(log);
    return ok;
}

/* The tile the runtime runs a variant on (decode.c variant_config / ws_choose), for a prefill shape; 0 if none. */
static int runtime_tile(fajit_arch arch, int d, int causal, unsigned variant, fj_plan *p)
{
    fajit_shape shape = {8, 16, 4, 2048, 2048};
    fajit_config c = {.arch = arch, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .causal = causal};
    fj_config_heuristic(&c, &c, &shape, 0);
    if (arch == FAJIT_ARCH_SM90A) {
        for (; c.block_n >= 16; c.block_n -= 16)
            if (fj_plan_build_variant(&c, variant, p) == FAJIT_OK) return 1;
        return 0;
    }
    int page = variant & P ? 64 : 0;
    if ((!page || page % c.block_n == 0) && fj_plan_build_variant(&c, variant, p) == FAJIT_OK) return 1;
    for (int bn = c.block_n > 64 ? c.block_n : 64; bn >= 16; bn -= 16) {
        if (page && page % bn) continue;
        for (int frags = 0; frags <= 2; frags++) {
            fajit_config t = {.arch = arch, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .causal = causal, .block_m = 64,
                              .block_n = bn, .col_warps = 1};
            fj_config_heuristic(&t, &t, &shape, 0);
            if (frags) t.warps = t.block_m / (16 * frags);
            if (fj_plan_build_variant(&t, variant, p) == FAJIT_OK) return 1;
        }
    }
    return 0;
}

static int compile_grid(fajit_arch arch, const char *const *sms, int n_sms, const unsigned *variants, size_t n_variants)
{
    static const int dims[] = {64, 96, 128, 192, 256};
    int failures = 0, n = 0, lpt = (variants[0] & LPT) != 0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0] - (size_t)lpt; di++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t v = 0; v < n_variants; v++) {
                fj_plan p;
                char text[200];
                if (!runtime_tile(arch, dims[di], causal, variants[v], &p)) {
                    printf("FAIL d%d causal %d variant 0x%x: no tile plans\n", dims[di], causal, variants[v]);
                    failures++;
                    continue;
                }
                fj_plan_format(&p, text, sizeof text);
                size_t len = 0;
                char *ptx = gen(&p, &len);
                for (int s = 0; s < n_sms; s++) failures += !compiles_clean(&p, ptx, len, sms[s], text), n++;
                free(ptx);
            }
    printf("%d compiles, %d failed\n", n, failures);
    return failures;
}

static void test_sm80_compile(void **state)
{
    (void)state;
    static const char *const sms[] = {"sm_80", "sm_90"};
    assert_int_equal(compile_grid(FAJIT_ARCH_SM80, sms, 2, k_variants, sizeof k_variants / sizeof k_variants[0]), 0);
}

static void test_sm90_compile(void **state)
{
    (void)state;
    static const char *const sms[] = {"sm_90a"};
    assert_int_equal(compile_grid(FAJIT_ARCH_SM90A, sms, 1, k_variants, sizeof k_variants / sizeof k_variants[0]), 0);
}

static void test_sm90_lpt_compile(void **state)
{
    (void)state;
    static const char *const sms[] = {"sm_90a"};
    assert_int_equal(compile_grid(FAJIT_ARCH_SM90A, sms, 1, k_variants_lpt,
                                  sizeof k_variants_lpt / sizeof k_variants_lpt[0]),
                     0);
}

#define TMA(field) ((int)offsetof(fj_fwd_params_tma, field))
#define DEC90_CU_Q ((int)offsetof(fj_fwd_params_tma_decode, dec.cu_seqlens_q))

/* The registers the counter's atom.add writes hold tile indices and nothing else: every instruction that writes one
 * is that atom, an ld.shared (a slot), lane 0's slot word handed to its warp (shfl.sync.idx r, r, 0), a mov from
 * another register or the mov of FJ_SCHED_NONE. (Plain causal lpt
 * kernels once fetched into the Q round's register, which the round's add and mov 0 also write: every role then
 * waited on the wrong Q phase and the kernels hung on the GPU.) Returns the number of offending lines. */
static int counter_regs_private(const char *ptx)
{
    char regs[8][16];
    int n = 0, bad = 0;
    for (const char *at = ptx; n < 8 && (at = strstr(at, "atom.global.add.u32 ")) != NULL; at++) {
        char r[16];
        if (sscanf(at + 20, "%15[^,]", r) != 1) return 1;
        int seen = 0;
        for (int i = 0; i < n; i++) seen |= strcmp(regs[i], r) == 0;
        if (!seen) snprintf(regs[n++], sizeof regs[0], "%s", r);
    }
    if (n == 0) return 1;
    for (const char *line = ptx; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        char op[48], dst[16], src[32];
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '@') s = strchr(s, ' ') ? strchr(s, ' ') + 1 : s; /* a guard */
        if (sscanf(s, "%47s %15[^,], %31[^;]", op, dst, src) != 3) continue;
        for (int i = 0; i < n; i++) {
            if (strcmp(dst, regs[i]) != 0) continue;
            char own[24]; /* the slot word lane 0 read, handed to its warp (sched.h FJ_LPT_SLOT_LANE0) */
            snprintf(own, sizeof own, "%s, 0,", dst);
            int ok = strncmp(op, "atom.global.add", 15) == 0 || strncmp(op, "ld.shared", 9) == 0 ||
                     (strcmp(op, "mov.u32") == 0 && (src[0] == '%' || strtoul(src, NULL, 0) == FJ_SCHED_NONE)) ||
                     (strcmp(op, "shfl.sync.idx.b32") == 0 && strncmp(src, own, strlen(own)) == 0);
            if (!ok) {
                const char *end = strchr(line, '\n');
                printf("counter register %s written by: %.*s\n", dst, end ? (int)(end - line) : 80, line);
                bad++;
            }
        }
    }
    return bad;
}

/* LPT: the kernel takes its tiles from the counter (atom.add, the runs past a sequence's end skipped with red.max) and
 * hands them to the consumers through shared slots; the static varlen kernel reads neither field; sm_80 refuses it. */
static void test_lpt_structure(void **state)
{
    (void)state;
    fj_plan p;
    size_t len;
    for (int causal = 0; causal <= 1; causal++) {
        assert_true(runtime_tile(FAJIT_ARCH_SM90A, 128, causal, V | VK | LPT, &p));
        assert_true(p.sched_off > 0 && p.sched_off % 16 == 0 && p.smem_bytes >= p.sched_off + 16);
        char *ptx = gen(&p, &len);
        assert_true(reads_param(ptx, TMA(tile_count)) && reads_param(ptx, TMA(sched_heads)));
        assert_non_null(strstr(ptx, "atom.global.add.u32"));
        assert_non_null(strstr(ptx, "red.global.max.u32"));
        assert_non_null(strstr(ptx, "st.shared.u32"));
        assert_non_null(strstr(ptx, "$L_prod_none"));
        assert_int_equal(counter_regs_private(ptx), 0);
        free(ptx);
        assert_true(runtime_tile(FAJIT_ARCH_SM90A, 128, causal, V | VK, &p));
        assert_int_equal(p.sched_off, 0);
        ptx = gen(&p, &len);
        assert_false(reads_param(ptx, TMA(tile_count)) || reads_param(ptx, TMA(sched_heads)));
        assert_null(strstr(ptx, "atom.global"));
        free(ptx);
    }
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = 128, .causal = 1};
    fj_config_heuristic(&c, &c, NULL, 0);
    assert_int_equal(fj_plan_build_variant(&c, V | VK | LPT, &p), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "persistent loop"));
    c.arch = FAJIT_ARCH_SM90A;
    c.block_m = c.block_n = c.stages = c.swizzle = c.warps = c.col_warps = c.overlap = c.pingpong = 0;
    fj_config_heuristic(&c, &c, NULL, 0);
    assert_int_equal(fj_plan_build_variant(&c, LPT, &p), FAJIT_ERR_INTERNAL); /* lpt without varlen */
    assert_int_equal(fj_plan_build_variant(&c, V | L | LPT, &p), FAJIT_ERR_UNSUPPORTED); /* producer registers */
    assert_int_equal(fj_plan_build_variant(&c, V | P | LPT, &p), FAJIT_ERR_UNSUPPORTED);
}

/* Plain causal kernels under FAJIT_CAUSAL_SCHED=lpt (plan.lpt, sm90.c): the heuristic's tile of D64 / D128 / D256, with
 * and without sinks, takes its tiles from the counter and the slots (no varlen run search: no red.max, no cu_seqlens)
 * and compiles clean for sm_90a; unset, the same config keeps the static schedule (no slots, no counter). */
static void test_sm90_causal_lpt_compile(void **state)
{
    (void)state;
    int failures = 0;
    for (int d = 64; d <= 256; d *= 2)
        for (int sinks = 0; sinks <= 1; sinks++) {
            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .causal = 1,
                              .mods = sinks ? FAJIT_MOD_SINKS : 0};
            fj_plan p;
            char text[200];
            size_t len = 0;
            fj_config_heuristic(&c, &c, NULL, 0);
            assert_int_equal(fj_plan_build_variant(&c, 0, &p), FAJIT_OK);
            assert_int_equal(p.lpt, 0);
            assert_int_equal(p.sched_off, 0);
            char *ptx = gen(&p, &len);
            assert_null(strstr(ptx, "atom.global"));
            free(ptx);
            setenv("FAJIT_CAUSAL_SCHED", "lpt", 1);
            fajit_status st = fj_plan_build_variant(&c, 0, &p);
            unsetenv("FAJIT_CAUSAL_SCHED");
            assert_int_equal(st, FAJIT_OK);
            assert_int_equal(p.lpt, 1);
            assert_true(p.sched_off > 0 && p.sched_off % 16 == 0 && p.smem_bytes >= p.sched_off + 16);
            fj_plan_format(&p, text, sizeof text);
            assert_non_null(strstr(text, " causalsched=lpt"));
            ptx = gen(&p, &len);
            assert_true(reads_param(ptx, TMA(tile_count)) && reads_param(ptx, TMA(sched_heads)));
            assert_non_null(strstr(ptx, "atom.global.add.u32"));
            assert_null(strstr(ptx, "red.global.max.u32"));
            assert_non_null(strstr(ptx, "$L_prod_none"));
            assert_false(reads_param(ptx, DEC90_CU_Q));
            assert_int_equal(counter_regs_private(ptx), 0);
            failures += !compiles_clean(&p, ptx, len, "sm_90a", text);
            free(ptx);
        }
    assert_int_equal(failures, 0);
}

#define DEC80(field) ((int)offsetof(fj_fwd_params_decode, field))
#define DEC90(field) ((int)offsetof(fj_fwd_params_tma_decode, dec.field))

static void test_structure(void **state)
{
    (void)state;
    for (int ws = 0; ws <= 1; ws++) {
        fajit_arch arch = ws ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80;
        int off_q = ws ? DEC90(cu_seqlens_q) : DEC80(cu_seqlens_q), off_k = ws ? DEC90(cu_seqlens_k) : DEC80(cu_seqlens_k);
        fj_plan p;
        size_t len;
        assert_true(runtime_tile(arch, 128, 1, V | VK, &p));
        char *ptx = gen(&p, &len);
        assert_true(reads_param(ptx, off_q) && reads_param(ptx, off_k));
        assert_true(strstr(ptx, "ld.global.nc.u32") != NULL);
        if (!ws) assert_non_null(strstr(ptx, " ret;")); /* a row block past its sequence leaves at once */
        free(ptx);
        assert_true(runtime_tile(arch, 128, 1, V | L, &p));
        ptx = gen(&p, &len);
        assert_true(reads_param(ptx, off_q) && !reads_param(ptx, off_k));
        free(ptx);
        fajit_config c = p.cfg;
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        ptx = gen(&p, &len);
        assert_false(reads_param(ptx, off_q) || reads_param(ptx, off_k));
        free(ptx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_structure), cmocka_unit_test(test_lpt_structure),
                                       cmocka_unit_test(test_sm80_compile), cmocka_unit_test(test_sm90_compile),
                                       cmocka_unit_test(test_sm90_lpt_compile),
                                       cmocka_unit_test(test_sm90_causal_lpt_compile)};
    const fj_nvjitlink_api *jl;
    const fj_nvrtc_api *rtc;
    if (fj_nvjitlink_load(&jl) != FAJIT_OK) fj_test_skip_all("nvJitLink not loadable: %s", fajit_errmsg());
    if (fj_nvrtc_load(&rtc) != FAJIT_OK) fj_test_skip_all("NVRTC not loadable: %s", fajit_errmsg());
    return cmocka_run_group_tests_name("varlen_ptx", tests, NULL, NULL);
}
