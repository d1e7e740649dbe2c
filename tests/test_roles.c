/*
 * test_roles.c - unit tests of the role table (src/codegen/roles.h) the sm_90a plans carry (sm90.c fj_sm90_roles):
 *   - roles: their warps lie in the CTA and do not overlap, a register group's roles are consecutive and the group
 *     starts on a warpgroup, the setmaxnreg budgets are the plan's;
 *   - rings: every barrier the table names is the one async.h's map gives (fj_ws_bar, plan.vtail_bar), all of them
 *     distinct, inside the barrier area, as many as the plan counts; each part's producer and consumer roles exist
 *     and say so in their produces / consumes bits;
 *   - the sm_80 path has no role table.
 * Over dense, causal, FP8, O-in-the-V-ring and decode-variant (V tail) plans. Run: ctest --test-dir build -R test_roles
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/async.h"
#include "codegen/codegen.h"
#include "fajit.h"

static fajit_config sm90(fajit_dtype dt, int d, int causal)
{
    fajit_config c = {0};
    c.arch = FAJIT_ARCH_SM90A;
    c.dtype = dt;
    c.head_dim = d;
    c.causal = causal;
    fj_config_heuristic(&c, NULL, NULL, 0);
    return c;
}

/* The async.h barrier of ring part `name` (slot s), as fj_ws_bar gives it; -1 for an unknown name. */
static int map_bar(const fj_plan *p, const char *name, int s, int empty)
{
    if (!strcmp(name, "Q")) return fj_ws_bar(p, empty ? FJ_BAR_Q_EMPTY : FJ_BAR_Q_FULL, s);
    if (!strcmp(name, "K")) return fj_ws_bar(p, empty ? FJ_BAR_K_EMPTY : FJ_BAR_K_FULL, s);
    if (!strcmp(name, "V")) return fj_ws_bar(p, empty ? FJ_BAR_V_EMPTY : FJ_BAR_V_FULL, s);
    if (!strcmp(name, "Vt")) return fj_ws_bar(p, empty ? FJ_BAR_VT_EMPTY : FJ_BAR_VT_FULL, s);
    if (!strcmp(name, "O free")) return empty ? -1 : fj_ws_bar(p, FJ_BAR_O_FREE, 0);
    if (!strcmp(name, "V tail")) return empty ? -1 : p->vtail_bar;
    return -1;
}

static void check_table(const fj_plan *p)
{
    const fj_role_table *t = &p->roles;
    assert_true(t->n_roles >= 2 && t->n_roles <= FJ_MAX_ROLES);
    assert_int_equal(t->mma_event, FJ_MMA_EVENT_GROUP);
    unsigned used = 0; /* warps */
    for (int i = 0; i < t->n_roles; i++) {
        const fj_role *r = &t->role[i];
        assert_true(r->warps >= 1 && r->first_warp >= 0 && r->first_warp + r->warps <= p->cfg.warps);
        for (int w = r->first_warp; w < r->first_warp + r->warps; w++) {
            assert_false(used & (1u << w));
            used |= 1u << w;
        }
        assert_true(r->instances >= 1 && r->warps % r->instances == 0);
        assert_true(r->title && r->why && r->name);
        if (i == 0) {
            assert_int_equal(r->group, 0);
            assert_null(r->label);
        } else {
            assert_non_null(r->label);
            assert_true(r->group == t->role[i - 1].group || r->group == t->role[i - 1].group + 1);
        }
        if (i == 0 || r->group != t->role[i - 1].group) assert_int_equal(r->first_warp % 4, 0); /* a warpgroup */
    }
    assert_int_equal(t->role[0].regs, p->producer_regs);
    assert_int_equal(t->role[t->n_roles - 1].regs, p->consumer_regs);
    assert_int_equal(t->role[t->n_roles - 1].instances, p->consumer_wgs);
    int n_bars = 0, offs[64];
    for (int g = 0; g < t->n_rings; g++) {
        const fj_ring *ring = &t->ring[g];
        assert_true(ring->slots >= 1 && ring->n_parts >= 1);
        for (int q = 0; q < ring->n_parts; q++) {
            const fj_ring_part *part = &ring->part[q];
            assert_true(part->producer < t->n_roles && part->consumer < t->n_roles);
            assert_true(t->role[part->producer].produces & (1u << g));
            assert_true(t->role[part->consumer].consumes & (1u << g));
            for (int s = 0; s < ring->slots; s++)
                for (int empty = 0; empty < 1 + (part->empty_count > 0); empty++) {
                    int off = fj_ring_bar(ring, q, s, empty);
                    assert_int_equal(off, map_bar(p, part->name, s, empty));
                    assert_true(off % 8 == 0 && off < p->smem_bytes);
                    assert_true(off >= p->bar_off || off == p->vtail_bar);
                    for (int i = 0; i < n_bars; i++) assert_int_not_equal(offs[i], off);
                    assert_true(n_bars < 64);
                    offs[n_bars++] = off;
                }
        }
    }
    assert_int_equal(n_bars, p->n_bars + (p->vtail_bar != 0));
}

static void test_sm90_tables(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    int planned = 0, o_in_v = 0;
    for (int di = 0; di < 5; di++)
        for (int causal = 0; causal < 2; causal++)
            for (int dt = 0; dt < 2; dt++) {
                fajit_config c = sm90(dt ? FAJIT_DTYPE_BF16 : FAJIT_DTYPE_F16, dims[di], causal);
                for (int stages = 1; stages <= 4; stages++) {
                    fj_plan p;
                    c.stages = stages;
                    if (fj_plan_build(&c, &p) != FAJIT_OK) continue;
                    check_table(&p);
                    planned++;
                    o_in_v += p.o_stage == 2;
                    for (unsigned v = FJ_VARIANT_SEQLENS; v <= FJ_VARIANT_PAGED; v <<= 1) {
                        if (v == FJ_VARIANT_COMBINE) continue;
                        if (fj_plan_build_variant(&c, v, &p) != FAJIT_OK) continue;
                        check_table(&p);
                        assert_int_equal(!!p.vtail_bar, !!(v & (FJ_VARIANT_SEQLENS | FJ_VARIANT_PAGED)));
                    }
                }
            }
    assert_true(planned >= 20);
    assert_true(o_in_v >= 1); /* the O free ring is covered */
}

static void test_fp8_table(void **state)
{
    (void)state;
    static const int dims[] = {64, 128, 256};
    for (int di = 0; di < 3; di++) {
        fajit_config c = sm90(FAJIT_DTYPE_E4M3, dims[di], di == 1);
        fj_plan p;
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        check_table(&p);
        assert_int_equal(p.roles.n_roles, 3);
        assert_int_equal(p.roles.role[1].kind, FJ_ROLE_TRANSPOSE);
        assert_int_equal(p.roles.role[1].warps, p.transpose_warps);
        assert_int_equal(p.roles.role[1].group, 0); /* the producer's registers */
        assert_int_equal(p.roles.ring[1].part[1].consumer, 1); /* V is drained by the transposer */
    }
}

static void test_sm80_no_table(void **state)
{
    (void)state;
    fajit_config c = {0};
    c.arch = FAJIT_ARCH_SM80;
    c.dtype = FAJIT_DTYPE_BF16;
    c.head_dim = 128;
    fj_config_heuristic(&c, NULL, NULL, 0);
    fj_plan p;
    assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
    assert_int_equal(p.roles.n_roles, 0);
    assert_int_equal(p.roles.n_rings, 0);
    assert_non_null(p.backend->sync);
    assert_null(p.backend->async);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sm90_tables),
        cmocka_unit_test(test_fp8_table),
        cmocka_unit_test(test_sm80_no_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
