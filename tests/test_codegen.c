/*
 * test_codegen.c - unit tests of the code generator (no GPU, no CUDA library):
 *   - the emitter: role-named register banks and their declarations, labels, comments filtered by
 *     verbosity, the sticky error;
 *   - config rules: accepted configs, and rejected ones with the field, value and rule in the message
 *     (smem and register arithmetic included);
 *   - the shared-memory swizzle against brute force: a bijection per row, ldmatrix's 8-row reads
 *     conflict-free at 128 B, and the generator's addressing identity
 *     base + row * row_bytes + ((c ^ (row & m)) << 4)  ==  L ^ ((c & m) << 4) + immediate
 *     for every lane, pattern and chunk the sm_80 backend uses;
 *   - PTX text: byte-identical for the same config, different across verbosity, one entry;
 *   - FAJIT_SM90_LEAN: the sm_90a trims on by default, off with 0, never in sm_80 kernels.
 * Run: ctest --test-dir build -R test_codegen
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/codegen.h"
#include "codegen/emit.h"
#include "fajit.h"

/* ---- emitter ------------------------------------------------------------------------------------ */
static void test_emit_banks_and_text(void **state)
{
    (void)state;
    fj_emit e;
    fj_emit_init(&e, 1);
    int acc = fj_bank(&e, "acc_o", "f32"), p = fj_bank(&e, "p", "pred");
    assert_int_equal(fj_bank(&e, "acc_o", "f32"), acc); /* found again, not redeclared */
    fj_reg_t a = fj_alloc(&e, acc, 4), b = fj_alloc(&e, acc, 2), q = fj_alloc(&e, p, 1);
    assert_string_equal(fj_r(&e, a), "%acc_o0");
    assert_string_equal(fj_r(&e, fj_at(a, 3)), "%acc_o3");
    assert_string_equal(fj_r(&e, b), "%acc_o4");
    assert_string_equal(fj_r(&e, q), "%p0");
    char l1[32], l2[32];
    fj_label_new(&e, "kv_loop", l1, sizeof l1);
    fj_label_new(&e, "kv_loop", l2, sizeof l2);
    assert_string_not_equal(l1, l2);
    assert_non_null(strstr(l1, "$L_kv_loop"));
    fj_ins(&e, "add.f32 %s, %s, %s", fj_r(&e, a), fj_r(&e, a), fj_r(&e, b));
    fj_comment(&e, 1, "shown at 1");
    fj_comment(&e, 2, "hidden at 1");
    fj_label(&e, l1);
    assert_non_null(strstr(e.body.data, "\tadd.f32 %acc_o0, %acc_o0, %acc_o4;\n"));
    assert_non_null(strstr(e.body.data, "// shown at 1"));
    assert_null(strstr(e.body.data, "hidden at 1"));
    assert_non_null(strstr(e.body.data, l1));
    fj_buf decl;
    fj_buf_init(&decl);
    fj_emit_declare_banks(&e, &decl);
    assert_non_null(strstr(decl.data, ".reg .f32 %acc_o<6>;"));
    assert_non_null(strstr(decl.data, ".reg .pred %p<1>;"));
    fj_buf_free(&decl);
    fj_emit_free(&e);
}

static void test_emit_sticky_error(void **state)
{
    (void)state;
    fj_emit e;
    fj_emit_init(&e, 0);
    fj_alloc(&e, 7, 1); /* no such bank */
    assert_true(e.err[0] != '\0');
    char first[sizeof e.err];
    memcpy(first, e.err, sizeof first);
    size_t len = e.body.len;
    fj_ins(&e, "mov.u32 %%r0, 1");  /* no-op after an error */
    fj_emit_error(&e, "second error"); /* the first one wins */
    assert_int_equal(e.body.len, len);
    assert_string_equal(e.err, first);
    fj_emit_free(&e);
}

/* ---- config rules ------------------------------------------------------------------------------- */
static fajit_config base_config(void)
{
    fajit_config c = {FAJIT_ARCH_SM80, FAJIT_DTYPE_BF16, 128, 64, 64, 2, 128, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    return c;
}

static void expect_reject(fajit_config c, fajit_status want, const char *const *parts)
{
    fajit_status st = fajit_config_check(&c);
    if (st != want) print_error("status %s, message: %s\n", fajit_status_name(st), fajit_errmsg());
    assert_int_equal(st, want);
    for (; *parts; parts++) {
        if (!strstr(fajit_errmsg(), *parts)) print_error("'%s' not in: %s\n", *parts, fajit_errmsg());
        assert_non_null(strstr(fajit_errmsg(), *parts));
    }
}

static void test_config_accepted(void **state)
{
    (void)state;
    const int dims[] = {64, 96, 128, 192, 256};
    const fajit_arch archs[] = {FAJIT_ARCH_AUTO, FAJIT_ARCH_SM90A};
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 5; i++)
            for (int causal = 0; causal < 2; causal++)
                for (int dt = 1; dt <= 2; dt++) {
                    fajit_config c = {0};
                    c.arch = archs[a];
                    c.head_dim = dims[i];
                    c.causal = causal;
                    c.dtype = (fajit_dtype)dt;
                    assert_int_equal(fajit_config_fill(NULL, NULL, &c), FAJIT_OK); /* every default is valid */
                    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
                    assert_int_equal(c.arch, a ? FAJIT_ARCH_SM90A : FAJIT_ARCH_SM80); /* no GPU: sm_80 */
                }
    fajit_config c = base_config();
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    c.swizzle = FAJIT_SWIZZLE_NONE;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
}

static void test_config_rejected(void **state)
{
    (void)state;
    fajit_config c = base_config();
    c.head_dim = 100;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"head_dim = 100", "64, 96, 128, 192 or 256", NULL});
    c = base_config();
    c.block_m = 48;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_m (--br) = 48", "multiple of 16 x warps = 64", NULL});
    c = base_config();
    c.block_n = 24;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_n (--bc) = 24", "multiple of 16", NULL});
    c = base_config();
    c.stages = 5;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"stages = 5", "1..4", NULL});
    c = base_config();
    c.head_dim = 96; /* 12 chunks per row cannot be permuted in groups of 8 */
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"swizzle = 128", "head_dim 96", "12", NULL});
    c = base_config();
    c.head_dim = 256, c.block_m = 128, c.block_n = 128, c.stages = 4, c.warps = 8;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG,
                  (const char *[]){"smem 589824 B", "Q 65536", "4 stages x 2 x 65536", "232448", NULL});
    c = base_config();
    c.block_m = 128, c.block_n = 128; /* two fragments per warp with a 128-wide S: too many registers */
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"registers: about", "O acc 128", "S acc 128", NULL});
    c = base_config();
    c.block_m = 192;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"at most 2", NULL});
    c = base_config();
    c.arch = FAJIT_ARCH_SM100A;
    c.block_m = 64; /* the sm_100a path takes one M = 128 tile (sm100.c) */
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_m (--br) = 64", "128 on sm_100a", NULL});
    c = base_config();
    c.arch = FAJIT_ARCH_SM100A, c.block_m = 128, c.warps = 12, c.head_dim = 256, c.block_n = 128;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"tensor memory needs", "= 640", "block_n <= 80", NULL});
    c = base_config();
    c.overlap = 1; /* a warp-specialized schedule flag on the sm_80 path */
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"overlap = 1", "sm_80 path", NULL});
    c = base_config();
    c.arch = FAJIT_ARCH_AUTO;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"arch = auto", NULL});
    assert_int_equal(fajit_config_check(NULL), FAJIT_ERR_INVALID_ARGUMENT);
}

/* Warp pairs: their rules, and the PTX shape of the exchange (named pair barrier, v4 smem slots). */
/* The sm_80 register check: estimate + headroom (sm80.c), and the causal configs that need sm_90's
 * register allocation (plan.min_target_sm, fj_plan_check_target). */
static void test_register_headroom(void **state)
{
    (void)state;
    fajit_config c = base_config();
    c.block_m = 128, c.swizzle = FAJIT_SWIZZLE_NONE; /* issue 13: spilled 4-8 bytes */
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG,
                  (const char *[]){"about 239", "headroom 20", "12 with a swizzle narrower than 128", "= 259 exceed 255",
                                   NULL});
    c.swizzle = 128, c.block_n = 80;
    expect_reject(c, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"80 (S acc again) with block_n not a power of two", "= 343", NULL});
    c.block_n = 64;
    fj_plan plan;
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    assert_int_equal(plan.reg_total + plan.reg_headroom, 247);
    assert_int_equal(plan.min_target_sm, 0);
    c.causal = 1; /* the causal default: 4 bytes of spills built for sm_80 / sm_86, none for sm_90 */
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    assert_int_equal(plan.min_target_sm, 90);
    assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_80")), FAJIT_ERR_UNSUPPORTED);
    const char *parts[] = {"target sm_80", "needs sm_90 or newer", "about 239", "headroom 8 = 247", "exceed 243", NULL};
    for (int i = 0; parts[i]; i++) {
        if (!strstr(fajit_errmsg(), parts[i])) print_error("missing \"%s\" in: %s\n", parts[i], fajit_errmsg());
        assert_non_null(strstr(fajit_errmsg(), parts[i]));
    }
    assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_86")), FAJIT_ERR_UNSUPPORTED);
    assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_90")), FAJIT_OK);
    c.block_n = 32; /* what fajit_config_fill takes on an sm_8x GPU */
    assert_int_equal(fj_plan_build(&c, &plan), FAJIT_OK);
    assert_int_equal(fj_plan_check_target(&plan, fj_arch_find("sm_80")), FAJIT_OK);
}

static void test_warp_pairs(void **state)
{
    (void)state;
    fajit_config c = base_config();
    c.head_dim = 256, c.block_m = 64, c.block_n = 64, c.stages = 1, c.warps = 4, c.col_warps = 2;
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    char text[160];
    fajit_config_format(&c, text, sizeof text);
    assert_string_equal(text, "sm_80 bf16 d256 br64 bc64 s1 sw128 w4 cw2 noncausal");
    char *ptx = NULL;
    size_t len = 0;
    assert_int_equal(fajit_generate_ptx(&c, 0, &ptx, &len), FAJIT_OK);
    assert_non_null(strstr(ptx, "bar.sync %r"));                 /* the pair's named barrier */
    assert_non_null(strstr(ptx, ", 64;"));                       /* ... over 64 threads */
    assert_non_null(strstr(ptx, "st.shared.v4.b32"));            /* P out */
    assert_non_null(strstr(ptx, "ld.shared.v4.b32"));            /* the partner's P in */
    assert_non_null(strstr(ptx, "st.shared.v4.f32"));            /* row maxima and l */
    fajit_free(ptx);
    fajit_config one = c;
    one.col_warps = 1;
    assert_int_equal(fajit_generate_ptx(&one, 0, &ptx, &len), FAJIT_OK);
    assert_null(strstr(ptx, "st.shared")); /* one warp per row block exchanges nothing */
    fajit_free(ptx);
    fajit_config bad = c;
    bad.col_warps = 3;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"col_warps = 3", "1 or 2", NULL});
    bad = c;
    bad.block_n = 48;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_n (--bc) = 48", "col_warps = 2", "multiple of 32", NULL});
    bad = c;
    bad.head_dim = 192; /* half a row is 12 chunks: not whole groups of 8 */
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"swizzle = 128", "col_warps = 2", "12", NULL});
    bad = c;
    bad.block_m = 48;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_m (--br) = 48", "16 x warps / col_warps = 32", NULL});
    bad = c;
    bad.warps = 1;
    bad.block_m = 16;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"col_warps = 2 with warps = 1", NULL});
}

/* ---- the sm_90a path ------------------------------------------------------------------------------ */
static fajit_config sm90_config(void)
{
    fajit_config c = {FAJIT_ARCH_SM90A, FAJIT_DTYPE_BF16, 128, 128, 128, 2, 128, 12, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    return c;
}

/* Its rules, with their messages, and what a default kernel is made of. */
static void test_sm90_rules(void **state)
{
    (void)state;
    fajit_config c = sm90_config();
    assert_int_equal(fajit_config_check(&c), FAJIT_OK);
    char text[160];
    fajit_config_format(&c, text, sizeof text);
    assert_string_equal(text, "sm_90a bf16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal");
    fajit_config bad = c;
    bad.block_m = 96;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"block_m (--br) = 96", "64, 128 or 192", NULL});
    bad = c;
    bad.warps = 8;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"warps = 8", "one producer warpgroup", "= 12", NULL});
    bad = c;
    bad.swizzle = FAJIT_SWIZZLE_NONE;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"swizzle = none", "32, 64 or 128", NULL});
    bad = c;
    bad.block_m = 64, bad.warps = 8;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"pingpong = 1 with block_m (--br) = 64", NULL});
    bad = c;
    bad.overlap = -1;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"pingpong = 1 with overlap", NULL});
    bad = c;
    bad.col_warps = 2;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"col_warps = 2", "no warp pairs", NULL});
    bad = c;
    bad.head_dim = 128, bad.block_n = 240, bad.stages = 1; /* O 64 + S 120 + P 60 + 36 */
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"registers: about 280", "exceed 240", NULL});
    bad = c;
    bad.head_dim = 256, bad.block_n = 128;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"smem", "mbarriers", "232448", NULL});
    bad = c;
    bad.overlap = 2;
    expect_reject(bad, FAJIT_ERR_INVALID_CONFIG, (const char *[]){"overlap = 2", "1 (on), -1 (off) or 0", NULL});
    /* three consumer warpgroups split the registers 160 / 32 */
    fajit_config three = c;
    three.head_dim = 64, three.block_m = 192, three.warps = 16;
    fj_plan plan;
    assert_int_equal(fj_plan_build(&three, &plan), FAJIT_OK);
    assert_int_equal(plan.consumer_wgs, 3);
    assert_int_equal(plan.consumer_regs, 160);
    assert_int_equal(plan.producer_regs, 32);
    assert_true(plan.whole_program);
    assert_int_equal(128 * plan.producer_regs + 384 * plan.consumer_regs, 65536);
}

/* The PTX of a warp-specialized kernel: its instruction forms, and the wgmma descriptors' fixed bits
 * (swizzle mode in 62-63, SBO = 8 rows x 128 B >> 4 = 64 in 32-45, LBO in 16-29: 1 for the K-major Q/K,
 * one box = block_n x 128 B >> 4 for the N-major V). */
static void test_sm90_ptx(void **state)
{
    (void)state;
    fajit_config c = sm90_config();
    c.block_n = 64, c.causal = 1;
    char *a = NULL, *t = NULL;
    size_t la = 0, lt = 0;
    assert_int_equal(fajit_generate_ptx(&c, 0, &a, &la), FAJIT_OK);
    assert_non_null(strstr(a, ".target sm_90a"));
    assert_non_null(strstr(a, ".param .align 64 .b8 fajit_fwd_param_0["));
    assert_non_null(strstr(a, ".maxntid 384, 1, 1"));
    assert_non_null(strstr(a, "setmaxnreg.dec.sync.aligned.u32 24"));
    assert_non_null(strstr(a, "setmaxnreg.inc.sync.aligned.u32 240"));
    assert_non_null(strstr(a, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));  /* S = QK^T, N = Bc */
    assert_non_null(strstr(a, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")); /* O += PV, N = D */
    assert_non_null(strstr(a, "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"));
    assert_non_null(strstr(a, "mbarrier.try_wait.parity.shared::cta.b64"));
    assert_non_null(strstr(a, "wgmma.wait_group.sync.aligned 1")); /* overlap: S(j) waited for before PV(j-1) */
    assert_non_null(strstr(a, "bar.arrive")); /* ping-pong */
    assert_non_null(strstr(a, "0x4000004000010000")); /* Q, K: 128 B swizzle, SBO 64, LBO 1 */
    assert_non_null(strstr(a, "0x4000004002000000")); /* V: LBO = 64 x 128 >> 4 = 0x200 */
    assert_null(strstr(a, "ldmatrix"));
    assert_null(strstr(a, "mma.sync"));
    fajit_free(a);
    c.swizzle = 64;
    assert_int_equal(fajit_generate_ptx(&c, 0, &a, &la), FAJIT_OK);
    assert_non_null(strstr(a, "0x8000002000010000")); /* 64 B swizzle (mode 2), SBO = 8 x 64 >> 4 = 32 */
    fajit_free(a);
    assert_int_equal(fajit_generate_ptx(&c, 2, &t, &lt), FAJIT_OK);
    assert_non_null(strstr(t, "warp roles: warpgroup 0 = producer"));
    assert_non_null(strstr(t, "register split (setmaxnreg)"));
    assert_non_null(strstr(t, "mbarriers at +"));
    assert_non_null(strstr(t, "TMA: 4-D tensor maps"));
    assert_non_null(strstr(t, "Producer warpgroup: TMA loads"));
    fajit_free(t);
}

/* FAJIT_SM90_LEAN (read at planning): unset = every trim, "0" / "none" = none, a word list = those. The uniform
 * warpgroup index is one shfl.sync.idx in the sm_90a frame; sm_80 kernels never change. Restores the variable. */
static int has_wg_broadcast(const fajit_config *c, const char *lean)
{
    if (lean) setenv("FAJIT_SM90_LEAN", lean, 1);
    else unsetenv("FAJIT_SM90_LEAN");
    char *a = NULL;
    size_t la = 0;
    assert_int_equal(fajit_generate_ptx(c, 0, &a, &la), FAJIT_OK);
    int has = strstr(a, "shfl.sync.idx.b32") != NULL;
    fajit_free(a);
    return has;
}

static void test_sm90_lean_env(void **state)
{
    (void)state;
    const char *was = getenv("FAJIT_SM90_LEAN");
    char *saved = was ? strdup(was) : NULL;
    fajit_config c = sm90_config();
    assert_true(has_wg_broadcast(&c, NULL));
    assert_true(has_wg_broadcast(&c, "wgu"));
    assert_true(has_wg_broadcast(&c, "all"));
    assert_false(has_wg_broadcast(&c, "0"));
    assert_false(has_wg_broadcast(&c, "none"));
    c.causal = 1, c.head_dim = 64, c.block_m = 192, c.warps = 16;
    assert_true(has_wg_broadcast(&c, NULL));
    assert_false(has_wg_broadcast(&c, "0"));
    fajit_config s80 = base_config();
    assert_false(has_wg_broadcast(&s80, NULL));
    assert_false(has_wg_broadcast(&s80, "0"));
    if (saved) setenv("FAJIT_SM90_LEAN", saved, 1), free(saved);
    else unsetenv("FAJIT_SM90_LEAN");
}

/* ---- swizzle against brute force ------------------------------------------------------------- */
static int phys_chunk(int row, int chunk, int m) { return chunk ^ (row & m); }

static void test_swizzle_bijection_and_banks(void **state)
{
    (void)state;
    const int dims[] = {64, 96, 128, 192, 256}, masks[] = {0, 1, 3, 7};
    for (int di = 0; di < 5; di++)
        for (int mi = 0; mi < 4; mi++) {
            int chunks = dims[di] / 8, m = masks[mi];
            if (chunks % (m + 1)) continue; /* rejected by the config rules */
            for (int row = 0; row < 64; row++) {
                unsigned char seen[32] = {0};
                for (int c = 0; c < chunks; c++) {
                    int pc = phys_chunk(row, c, m);
                    assert_true(pc >= 0 && pc < chunks); /* stays inside the row */
                    assert_int_equal(seen[pc], 0);       /* bijection */
                    seen[pc] = 1;
                }
            }
            /* ldmatrix 8x8: rows r0..r0+7 (r0 % 8 == 0) of one logical chunk; count the worst number of
             * 16-byte accesses that share a bank group (4 banks) in one 128-byte wavefront */
            int row_bytes = dims[di] * 2, worst = 0;
            for (int r0 = 0; r0 < 64; r0 += 8)
                for (int c = 0; c < chunks; c++) {
                    int hits[8] = {0};
                    for (int r = r0; r < r0 + 8; r++) {
                        int byte = r * row_bytes + phys_chunk(r, c, m) * 16;
                        int group = (byte / 16) % 8; /* 32 banks x 4 B = 8 groups of 16 B */
                        if (++hits[group] > worst) worst = hits[group];
                    }
                }
            if (m == 7) assert_int_equal(worst, 1); /* 128-byte swizzle: conflict-free at every head dim */
            if (m == 0 && row_bytes % 128 == 0) assert_int_equal(worst, 8); /* unswizzled: 8-way */
        }
}

/*
 * The sm_80 backend addresses row r = R0 + lane_row and chunk c = C0 + lane_bit (R0 % 8 == 0, C0 even)
 * as  L ^ ((C0 & m) << 4) + R0 * row_bytes + (C0 - (C0 & m)) * 16  with the per-lane register
 * L = base + lane_row * row_bytes + ((lane_bit ^ (lane_row & m)) << 4). Check it against the direct
 * formula for all lanes of both lane patterns, every swizzle and head dim, and several bases.
 */
static void test_swizzle_xor_addressing(void **state)
{
    (void)state;
    const int dims[] = {64, 96, 128, 192, 256}, masks[] = {0, 1, 3, 7};
    const uint32_t bases[] = {0, 1024, 65536 + 4096, 163840};
    for (int di = 0; di < 5; di++)
        for (int mi = 0; mi < 4; mi++) {
            int chunks = dims[di] / 8, m = masks[mi], row_bytes = dims[di] * 2;
            if (chunks % (m + 1)) continue;
            for (int bi = 0; bi < 4; bi++)
                for (int pattern = 0; pattern < 2; pattern++)
                    for (int lane = 0; lane < 32; lane++) {
                        int lrow = pattern == 0 ? (lane & 15) : (lane & 7) + 8 * (lane >> 4);
                        int lbit = pattern == 0 ? lane >> 4 : (lane >> 3) & 1;
                        uint32_t L = bases[bi] + (uint32_t)(lrow * row_bytes) + (uint32_t)((lbit ^ (lrow & m)) << 4);
                        for (int r0 = 0; r0 + 16 <= 128; r0 += 16)
                            for (int c0 = 0; c0 + 2 <= chunks; c0 += 2) {
                                int lo = m >= 1 ? (c0 & m) : 0;
                                uint32_t got = (L ^ (uint32_t)(lo << 4)) + (uint32_t)(r0 * row_bytes + (c0 - lo) * 16);
                                int r = r0 + lrow, c = c0 + lbit;
                                uint32_t want = bases[bi] + (uint32_t)(r * row_bytes + phys_chunk(r, c, m) * 16);
                                assert_int_equal(got, want);
                            }
                    }
        }
}

/* ---- PTX text ------------------------------------------------------------------------------------ */
static void test_ptx_deterministic(void **state)
{
    (void)state;
    fajit_config c = base_config();
    c.causal = 1;
    char *a = NULL, *b = NULL, *t = NULL;
    size_t la = 0, lb = 0, lt = 0;
    assert_int_equal(fajit_generate_ptx(&c, 1, &a, &la), FAJIT_OK);
    assert_int_equal(fajit_generate_ptx(&c, 1, &b, &lb), FAJIT_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_int_equal(fajit_generate_ptx(&c, 2, &t, &lt), FAJIT_OK);
    assert_true(lt > la); /* the teaching view adds the plan and banners */
    assert_non_null(strstr(t, "smem map"));
    assert_non_null(strstr(t, "Phase 3: main loop over KV tiles"));
    assert_non_null(strstr(a, ".target sm_80"));
    assert_non_null(strstr(a, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    assert_non_null(strstr(a, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
    assert_non_null(strstr(a, "cp.async.cg.shared.global"));
    assert_null(strstr(strstr(a, ".entry") + 1, ".entry")); /* one entry */
    fajit_free(t);
    assert_int_equal(fajit_generate_ptx(&c, 3, &t, &lt), FAJIT_ERR_INVALID_ARGUMENT);
    assert_null(t);
    fajit_free(a);
    fajit_free(b);
}

/* The sm_90a heuristic's shape rules: D=64 takes three consumer warpgroups with ping-pong, except causal
 * at N <= 1024 (two, no ping-pong); D=128 widens block_n from N 8192. Fields the caller gave are kept. */
static void sm90_default(int d, int causal, int n, fajit_config *c)
{
    fajit_shape shape = {1, 8, 8, n, n};
    memset(c, 0, sizeof *c);
    c->arch = FAJIT_ARCH_SM90A, c->head_dim = d, c->causal = causal;
    fajit_config given = *c;
    fj_config_heuristic(c, &given, n ? &shape : NULL, 0);
    assert_int_equal(fajit_config_check(c), FAJIT_OK);
}

static void test_sm90_heuristic_shapes(void **state)
{
    (void)state;
    fajit_config c;
    sm90_default(64, 1, 1024, &c);
    assert_int_equal(c.block_m, 128);
    assert_int_equal(c.pingpong, -1);
    sm90_default(64, 1, 17, &c);
    assert_int_equal(c.block_m, 128);
    sm90_default(64, 1, 2048, &c);
    assert_int_equal(c.block_m, 192);
    assert_int_equal(c.pingpong, 1);
    sm90_default(64, 0, 1024, &c);
    assert_int_equal(c.block_m, 192);
    sm90_default(64, 1, 0, &c); /* no shape: the long-sequence default */
    assert_int_equal(c.block_m, 192);
    sm90_default(128, 0, 4096, &c);
    assert_int_equal(c.block_n, 128);
    sm90_default(128, 0, 8192, &c);
    assert_int_equal(c.block_n, 176);
    sm90_default(256, 1, 4096, &c);
    assert_int_equal(c.pingpong, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emit_banks_and_text),
        cmocka_unit_test(test_emit_sticky_error),
        cmocka_unit_test(test_config_accepted),
        cmocka_unit_test(test_config_rejected),
        cmocka_unit_test(test_register_headroom),
        cmocka_unit_test(test_warp_pairs),
        cmocka_unit_test(test_sm90_heuristic_shapes),
        cmocka_unit_test(test_sm90_rules),
        cmocka_unit_test(test_sm90_ptx),
        cmocka_unit_test(test_sm90_lean_env),
        cmocka_unit_test(test_swizzle_bijection_and_banks),
        cmocka_unit_test(test_swizzle_xor_addressing),
        cmocka_unit_test(test_ptx_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
