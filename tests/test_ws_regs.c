/*
 * test_ws_regs.c - every register a warp-specialized (sm_90a) kernel reads is written somewhere in it: a whole-kernel
 * def-use check of the generated PTX over the frame's tile schedules (static, varlen skip, the dynamic LPT one) and
 * the roles' loop heads (producer, consumers with and without ping-pong, ALiBi consumers, which decode the heads in
 * the loop head). A register read and never written is undefined in PTX: ptxas assembles it without a word.
 * This found the varlen ping-pong consumers' l->last and next schedule round never computed when ALiBi consumers
 * asked for the heads (the loop head tested !DECODE_HEADS for "not the producer"; FJ_WS_TILE_LAST now says it).
 * label unit (no ptxas, no GPU). Run: ctest --test-dir build -R test_ws_regs --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "fajit.h"

/* A register name %<letters and _><digits>, as the emitter's banks write them. */
typedef struct reg_set {
    char (*name)[24];
    int n, cap;
} reg_set;

static int set_has(const reg_set *s, const char *r)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], r) == 0) return 1;
    return 0;
}

static void set_add(reg_set *s, const char *r)
{
    if (set_has(s, r)) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->name = realloc(s->name, (size_t)s->cap * sizeof *s->name);
        assert_non_null(s->name);
    }
    snprintf(s->name[s->n++], sizeof s->name[0], "%s", r);
}

/* Add every register named in text[0, len) to s. */
static void add_regs(reg_set *s, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '%') continue;
        size_t j = i + 1;
        while (j < len && (islower((unsigned char)text[j]) || text[j] == '_')) j++;
        size_t d = j;
        while (j < len && isdigit((unsigned char)text[j])) j++;
        if (d == i + 1 || j == d || j - i >= 24) continue; /* %tid.x, %ctaid.x, a name without a number */
        char r[24];
        memcpy(r, text + i, j - i);
        r[j - i] = 0;
        set_add(s, r);
        i = j - 1;
    }
}

/* Instructions whose first operand is not a destination (stores, reductions, barriers, copies, fences, branches). */
static int first_not_written(const char *op)
{
    static const char *const k_ops[] = {"st.",         "red.",         "bar.",       "barrier.",      "cp.",
                                        "stmatrix",    "prefetch",     "fence",      "bra",           "ret",
                                        "setmaxnreg",  "wgmma.fence",  "wgmma.commit", "wgmma.wait",  "mbarrier.init",
                                        "mbarrier.expect", "tcgen05",  "membar",     "trap",          "exit"};
    for (size_t i = 0; i < sizeof k_ops / sizeof k_ops[0]; i++)
        if (strncmp(op, k_ops[i], strlen(k_ops[i])) == 0) return 1;
    return 0;
}

/* The registers ptx reads and never writes (written: the first operand of an instruction that has a destination,
 * a register list in braces included; an over-estimate, so what is left is certainly never written): their count,
 * the first in first[]. */
static int never_written(const char *ptx, char *first, size_t size)
{
    reg_set used = {0}, written = {0};
    first[0] = 0;
    for (const char *ln = ptx; *ln;) {
        const char *end = strchr(ln, '\n');
        size_t n = end ? (size_t)(end - ln) : strlen(ln);
        const char *c = ln, *stop = ln + n;
        for (const char *q = ln; q + 1 < stop; q++)
            if (q[0] == '/' && q[1] == '/') { stop = q; break; }
        while (c < stop && isspace((unsigned char)*c)) c++;
        if (c < stop && *c != '.' && *c != '{' && *c != '}' && stop[-1] != ':') {
            if (*c == '@') { /* the guard is read */
                const char *g = c;
                while (c < stop && !isspace((unsigned char)*c)) c++;
                add_regs(&used, g, (size_t)(c - g));
                while (c < stop && isspace((unsigned char)*c)) c++;
            }
            const char *op = c;
            while (c < stop && !isspace((unsigned char)*c) && *c != ';') c++;
            char opname[64];
            snprintf(opname, sizeof opname, "%.*s", (int)(c - op), op);
            add_regs(&used, c, (size_t)(stop - c));
            while (c < stop && isspace((unsigned char)*c)) c++;
            if (!first_not_written(opname) && c < stop && *c != '[') {
                const char *d = c;
                if (*c == '{') {
                    while (c < stop && *c != '}') c++;
                } else {
                    while (c < stop && *c != ',' && *c != ';') c++;
                }
                add_regs(&written, d, (size_t)(c - d));
            }
        }
        if (!end) break;
        ln = end + 1;
    }
    int bad = 0;
    for (int i = 0; i < used.n; i++)
        if (!set_has(&written, used.name[i])) {
            if (!bad++) snprintf(first, size, "%s", used.name[i]);
        }
    free(used.name);
    free(written.name);
    return bad;
}

/* The checker itself: a read of a register that nothing writes is found; a written one is not. */
static void test_checker(void **state)
{
    (void)state;
    char first[24];
    assert_int_equal(never_written("\tmov.u32 %r1, 0;\n\tadd.u32 %r2, %r1, %r3;\n\t@%p1 bra $L_x;\n", first,
                                   sizeof first),
                     2);
    assert_string_equal(first, "%r3");
    const char *ok = "\tsetp.eq.u32 %p1, %r1, 0; // %r9\n\tld.param.u32 %r1, [p+4];\n"
                     "\t@%p1 st.shared.u32 [%r1], %r1;\n\tmbarrier.try_wait.shared.b64 %p2, [%r1], %r1;\n";
    assert_int_equal(never_written(ok, first, sizeof first), 0);
    assert_int_equal(never_written("\tst.shared.u32 [%r1], %r2;\n", first, sizeof first), 2);
}

enum { V = FJ_VARIANT_VARLEN, VK = FJ_VARIANT_VARLEN_K, L = FJ_VARIANT_SEQLENS, S = FJ_VARIANT_SPLIT,
       PK = FJ_VARIANT_PACK, PG = FJ_VARIANT_PAGED, LPT = FJ_VARIANT_LPT };

/* Generate the kernel of c with variant (when it plans) and check it: 1 checked, 0 not planned; *failed counts. */
static int check_kernel(fajit_config c, unsigned variant, int *failed)
{
    fj_plan p;
    char *ptx = NULL, text[256], first[24];
    size_t len;
    fj_config_heuristic(&c, &c, NULL, 0);
    if (fj_plan_build_variant(&c, variant, &p) != FAJIT_OK) return 0;
    assert_int_equal(fj_generate_ptx_plan(&p, 0, &ptx, &len), FAJIT_OK);
    int bad = never_written(ptx, first, sizeof first);
    if (bad) {
        fj_plan_format(&p, text, sizeof text);
        printf("FAIL %s: %d registers read and never written (first %s)\n", text, bad, first);
        (*failed)++;
    }
    free(ptx);
    return 1;
}

/* sm_90a kernels: head dims, causal or not, ping-pong / overlap, rolled or not, mods, the frame's schedules. */
static void test_sm90_kernels(void **state)
{
    (void)state;
    static const unsigned variants[] = {0, V | VK, V, V | VK | LPT, V | LPT, V | L, L | S, PK, PG, L | S | PK};
    static const int mods[] = {0, FAJIT_MOD_ALIBI, FAJIT_MOD_ALIBI | FAJIT_MOD_SOFTCAP, FAJIT_MOD_SOFTCAP};
    int kernels = 0, failed = 0;
    for (int d = 64; d <= 128; d += 64)
        for (int causal = 0; causal <= 1; causal++)
            for (int pp = -1; pp <= 1; pp += 2)
                for (int roll = -1; roll <= 1; roll += 2)
                    for (size_t mi = 0; mi < sizeof mods / sizeof mods[0]; mi++)
                        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
                            fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = d,
                                              .causal = causal, .pingpong = pp, .overlap = pp == 1 ? 1 : 0,
                                              .roll = roll, .mods = mods[mi]};
                            kernels += check_kernel(c, variants[vi], &failed);
                        }
    printf("%d sm_90a kernels, %d with a register read and never written\n", kernels, failed);
    assert_true(kernels >= 300);
    assert_int_equal(failed, 0);
}

/* Plain causal kernels on the dynamic schedule (FAJIT_CAUSAL_SCHED=lpt, plan.lpt): the producer takes the tiles from
 * the counter, the consumers read them from the slots (no varlen run search). */
static void test_sm90_causal_lpt(void **state)
{
    (void)state;
    static const int mods[] = {0, FAJIT_MOD_SINKS, FAJIT_MOD_SOFTCAP, FAJIT_MOD_ALIBI};
    int kernels = 0, failed = 0;
    setenv("FAJIT_CAUSAL_SCHED", "lpt", 1);
    for (int d = 64; d <= 256; d *= 2)
        for (int pp = -1; pp <= 1; pp += 2)
            for (int roll = -1; roll <= 1; roll += 2)
                for (size_t mi = 0; mi < sizeof mods / sizeof mods[0]; mi++) {
                    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .causal = 1,
                                      .pingpong = pp, .overlap = pp == 1 ? 1 : 0, .roll = roll, .mods = mods[mi]};
                    fj_plan p;
                    fj_config_heuristic(&c, &c, NULL, 0);
                    if (fj_plan_build_variant(&c, 0, &p) != FAJIT_OK) continue;
                    assert_int_equal(p.lpt, 1);
                    kernels += check_kernel(c, 0, &failed);
                }
    unsetenv("FAJIT_CAUSAL_SCHED");
    printf("%d causal sm_90a kernels on the lpt schedule, %d with a register read and never written\n", kernels, failed);
    assert_true(kernels >= 40);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_checker), cmocka_unit_test(test_sm90_kernels),
                                       cmocka_unit_test(test_sm90_causal_lpt)};
    return cmocka_run_group_tests_name("ws_regs", tests, NULL, NULL);
}
