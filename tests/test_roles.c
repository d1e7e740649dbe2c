/*
 * test_roles.c - unit tests of the role table (src/codegen/roles.h) the sm_90a plans carry (sm90.c fj_sm90_roles):
 *   - roles: their warps lie in the CTA and do not overlap, a register group's roles are consecutive and the group
 *     starts on a warpgroup, the setmaxnreg budgets are the plan's;
 *   - rings: every barrier the table names is the one async.h's map gives (fj_ws_bar, plan.vtail_bar), all of them
 *     distinct, inside the barrier area, as many as the plan counts; each part's producer and consumer roles exist
 *     and say so in their produces / consumes bits;
 *   - the sm_100a table (sm100.c fj_sm100_roles): its roles cover the CTA's 12 warps by register group, its rings are
 *     sm100.h's barriers and async.h's Q / K / V ones (distinct, inside the barrier area), the MMA completes them by
 *     tcgen05.commit (FJ_MMA_EVENT_MBARRIER), tensor memory is the plan's, allocated and freed by the MMA warp;
 *   - the sm_80 path has no role table.
 * Over dense, causal, FP8, O-in-the-V-ring and decode-variant (V tail) plans, and every sm_100a default. Run: ctest --test-dir build -R test_roles
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/async.h"
#include "codegen/codegen.h"
#include "codegen/sm100.h"
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

/* The roles: inside the CTA, no warp twice, groups on warpgroups, consecutive; returns the warps used (a bit each). */
static unsigned check_roles(const fj_plan *p)
{
    const fj_role_table *t = &p->roles;
    assert_true(t->n_roles >= 2 && t->n_roles <= FJ_MAX_ROLES);
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
    return used;
}

/* The rings: each barrier where `map` says (the arch's map), 8-aligned, inside smem, distinct; returns how many. */
static int check_rings(const fj_plan *p, int (*map)(const fj_plan *, const char *, int, int))
{
    const fj_role_table *t = &p->roles;
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
                    assert_int_equal(off, map(p, part->name, s, empty));
                    assert_true(off % 8 == 0 && off < p->smem_bytes);
                    assert_true(off >= p->bar_off || off == p->vtail_bar);
                    for (int i = 0; i < n_bars; i++) assert_int_not_equal(offs[i], off);
                    assert_true(n_bars < 64);
                    offs[n_bars++] = off;
                }
        }
    }
    return n_bars;
}

static void check_table(const fj_plan *p)
{
    const fj_role_table *t = &p->roles;
    assert_int_equal(t->mma_event, FJ_MMA_EVENT_GROUP);
    assert_int_equal(t->tmem_cols, 0);
    check_roles(p);
    assert_int_equal(t->role[0].regs, p->producer_regs);
    assert_int_equal(t->role[t->n_roles - 1].regs, p->consumer_regs);
    assert_int_equal(t->role[t->n_roles - 1].instances, p->consumer_wgs);
    assert_int_equal(check_rings(p, map_bar), p->n_bars + (p->vtail_bar != 0));
}

/* sm100.h's barrier of ring part `name` (slot s), or async.h's for Q / K / V; -1 for an unknown name. */
static int map_bar_sm100(const fj_plan *p, const char *name, int s, int empty)
{
    static const struct {
        const char *name;
        int which;
    } own[] = {{"S", FJ_SB_S_FULL},       {"P", FJ_SB_P_FULL},     {"O ready", FJ_SB_O_READY}, {"corr", FJ_SB_CORR_FULL},
               {"O full", FJ_SB_O_FULL}, {"O free", FJ_SB_O_FREE}, {"stats", FJ_SB_STATS_FULL}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(name, own[i].name)) return empty ? -1 : p->sm100_bar + 8 * (own[i].which + s);
    return map_bar(p, name, s, empty);
}

static void test_sm100_tables(void **state)
{
    (void)state;
    static const int dims[] = {64, 96, 128, 192, 256};
    for (int di = 0; di < 5; di++)
        for (int causal = 0; causal < 2; causal++)
            for (int pp = 0; pp < 2; pp++) {
                if (pp && dims[di] > 128) continue; /* two query tiles' O do not fit tensor memory */
                fajit_config c = {0};
                c.arch = FAJIT_ARCH_SM100A, c.dtype = FAJIT_DTYPE_BF16, c.head_dim = dims[di], c.causal = causal;
                c.pingpong = pp ? 1 : -1;
                fj_config_heuristic(&c, NULL, NULL, 0);
                fj_plan p;
                assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
                const fj_role_table *t = &p.roles;
                assert_int_equal(t->mma_event, FJ_MMA_EVENT_MBARRIER);
                assert_non_null(p.backend->async->mma_commit);
                int tiles = pp ? 2 : 1;
                assert_int_equal(p.pingpong, pp);
                assert_int_equal(check_roles(&p), (1u << (pp ? FJ_SM100_PP_WARPS : FJ_SM100_WARPS)) - 1); /* every warp */
                assert_int_equal(t->role[FJ_SM100_ROLE_SOFTMAX].instances, tiles);
                assert_int_equal(t->role[FJ_SM100_ROLE_SOFTMAX].warps, 4 * tiles);
                assert_true(p.tmem_cols <= 512 && p.tmem_p_col + p.cfg.block_n <= p.tmem_cols);
                assert_int_equal(p.tmem_p_col - p.tmem_o_col, tiles * p.cfg.head_dim);
                assert_int_equal(t->n_roles, FJ_SM100_ROLES);
                assert_int_equal(t->role[FJ_SM100_ROLE_SOFTMAX].kind, FJ_ROLE_SOFTMAX);
                assert_int_equal(t->role[FJ_SM100_ROLE_CORR].kind, FJ_ROLE_CORRECTION);
                assert_int_equal(t->role[FJ_SM100_ROLE_MMA].kind, FJ_ROLE_MMA);
                assert_int_equal(t->role[FJ_SM100_ROLE_LOAD].kind, FJ_ROLE_LOAD);
                /* 128 threads a warpgroup: the budgets of the CTA's warpgroups fit the register file */
                int regs = 0;
                for (int i = 0; i < t->n_roles; i++)
                    if (i == 0 || t->role[i].group != t->role[i - 1].group) {
                        int wgs = 0; /* the group's warpgroups */
                        for (int q = i; q < t->n_roles && t->role[q].group == t->role[i].group; q++)
                            wgs += t->role[q].warps;
                        wgs = (wgs + 3) / 4;
                        regs += 128 * wgs * (t->role[i].regs_how == FJ_REGS_KEEP ? 65536 / p.threads : t->role[i].regs);
                    }
                assert_true(regs <= 65536);
                /* tensor memory: the plan's columns, allocated and freed by the MMA warp, not touched by the load role */
                assert_int_equal(t->tmem_cols, p.tmem_cols);
                assert_int_equal(t->tmem_slot, p.tmem_slot);
                const fj_role *mma = &t->role[FJ_SM100_ROLE_MMA];
                assert_true(t->tmem_warp >= mma->first_warp && t->tmem_warp < mma->first_warp + mma->warps);
                assert_true(t->tmem_roles >> FJ_SM100_ROLE_MMA & 1);
                assert_false(t->tmem_roles >> FJ_SM100_ROLE_LOAD & 1);
                assert_true(t->tmem_bar > 0 && t->tmem_bar < 16);
                /* every barrier of the plan but Q full / empty [1] (one Q buffer) and, with one query tile, O full /
                 * O free [1] is a ring's */
                assert_int_equal(p.q_bufs, 1);
                assert_int_equal(check_rings(&p, map_bar_sm100), p.n_bars - 2 - 2 * (2 - tiles));
                /* the MMA's commits complete the K / V empties, S full and O full; the load fills Q, K, V */
                for (int g = 0; g < t->n_rings; g++)
                    for (int q = 0; q < t->ring[g].n_parts; q++) {
                        const fj_ring_part *part = &t->ring[g].part[q];
                        if (part->producer == FJ_SM100_ROLE_MMA) assert_int_equal(part->full_count, 1);
                        if (part->consumer == FJ_SM100_ROLE_MMA && part->empty_count) assert_int_equal(part->empty_count, 1);
                        if (part->producer == FJ_SM100_ROLE_LOAD) assert_true(part->tx_bytes > 0);
                    }
            }
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
        assert_int_equal(p.roles.role[1].warps, p.transpose_warps - p.fp8_vt4); /* vt4: warp 0 is the producer */
        assert_int_equal(p.roles.role[1].group, 0); /* the producer's registers */
        assert_int_equal(p.roles.ring[1].part[1].consumer, 1); /* V is drained by the transposer */
    }
    /* FAJIT_FP8_KNOBS=vt4: warp 0 transposes too (in the producer's body), so the transposer role keeps warps 1-3
     * while V empty and VT full count the 4 warps' 128 threads */
    setenv("FAJIT_FP8_KNOBS", "vt4", 1);
    for (int di = 0; di < 3; di++) {
        fajit_config c = sm90(FAJIT_DTYPE_E4M3, dims[di], di == 2);
        fj_plan p;
        assert_int_equal(fj_plan_build(&c, &p), FAJIT_OK);
        check_table(&p);
        assert_int_equal(p.fp8_vt4, 1);
        assert_int_equal(p.transpose_warps, 4);
        assert_int_equal(p.roles.role[1].first_warp, 1);
        assert_int_equal(p.roles.role[1].warps, 3);
        assert_int_equal(p.roles.ring[1].part[1].empty_count, 128); /* V empty */
        assert_int_equal(p.roles.ring[2].part[0].full_count, 128);  /* VT full */
    }
    unsetenv("FAJIT_FP8_KNOBS");
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
        cmocka_unit_test(test_sm100_tables),
        cmocka_unit_test(test_sm80_no_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
