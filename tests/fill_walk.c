/*
 * fill_walk.c - the walk of fajit_config_fill's inputs (see fill_walk.h).
 */
#include "fill_walk.h"

#include <string.h>

#include "codegen/codegen.h"
#include "runtime/config_fill.h"
#include "runtime/context.h"

static const fill_goal_desc k_goals[] = {
    {"sm_80 path, no device", FAJIT_ARCH_SM80, NULL, 0, 0},
    {"sm_90a path, no device", FAJIT_ARCH_SM90A, NULL, 0, 0},
    {"A100 (sm_80 device)", FAJIT_ARCH_AUTO, "sm_80", 166912, 0},
    {"H100 (sm_90 device)", FAJIT_ARCH_AUTO, "sm_90", 232448, 0},
    {"sm_80 path, seqlens+split", FAJIT_ARCH_SM80, NULL, 0, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT},
    {"sm_80 path, paged+gather+ahead", FAJIT_ARCH_SM80, NULL, 0,
     FJ_VARIANT_SPLIT | FJ_VARIANT_PAGED | FJ_VARIANT_GATHER | FJ_VARIANT_AHEAD},
};
#define N_GOALS ((int)(sizeof k_goals / sizeof k_goals[0]))

const fill_goal_desc *fill_walk_goals(int *n)
{
    *n = N_GOALS;
    return k_goals;
}

static const char *const k_names[FILL_WALK_FIELDS] = {"arch",  "block_m (--br)", "block_n (--bc)",
                                                      "stages", "swizzle",        "warps",
                                                      "col_warps", "overlap", "pingpong"};

const char *fill_walk_field_name(int f) { return k_names[f]; }

int fill_walk_field(const fajit_config *c, int f)
{
    switch (f) {
    case 0: return (int)c->arch;
    case 1: return c->block_m;
    case 2: return c->block_n;
    case 3: return c->stages;
    case 4: return c->swizzle;
    case 5: return c->warps;
    case 6: return c->col_warps;
    case 7: return c->overlap;
    default: return c->pingpong;
    }
}

static void field_put(fajit_config *c, int f, int v)
{
    int *p[FILL_WALK_FIELDS] = {NULL,      &c->block_m,   &c->block_n, &c->stages,  &c->swizzle,
                                &c->warps, &c->col_warps, &c->overlap, &c->pingpong};
    if (f == 0) c->arch = (fajit_arch)v;
    else *p[f] = v;
}

/* A field's values as fagen accepts them: all of them (full), or those that can matter and a few others. */
static int values(int f, int full, int *v)
{
    int n = 0;
    switch (f) {
    case 1:
    case 2:
        if (full) {
            for (int x = 1; x <= 1024; x++) v[n++] = x;
        } else {
            for (int x = 16; x <= 256; x += 16) v[n++] = x;
            static const int odd[] = {1, 8, 24, 100, 257, 320, 512, 1024};
            for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) v[n++] = odd[i];
        }
        return n;
    case 3:
        for (int x = 1; x <= 4; x++) v[n++] = x;
        return n;
    case 4:
        v[n++] = FAJIT_SWIZZLE_NONE, v[n++] = 32, v[n++] = 64, v[n++] = 128;
        return n;
    case 5:
        for (int x = 1; x <= 32; x++) v[n++] = x;
        return n;
    case 6: v[n++] = 1, v[n++] = 2; return n;
    default: v[n++] = 1, v[n++] = -1; return n; /* overlap, pingpong: on, off */
    }
}

/* A few values per field for the pairs. */
static int pair_values(int f, int *v)
{
    static const int bm[] = {16, 64, 128, 192, 256}, bn[] = {16, 48, 64, 128, 176, 256}, st[] = {1, 2, 4},
                     sw[] = {FAJIT_SWIZZLE_NONE, 32, 128}, w[] = {1, 2, 4, 8, 12, 16}, cw[] = {1, 2}, on[] = {1, -1};
    const int *src[FILL_WALK_FIELDS] = {NULL, bm, bn, st, sw, w, cw, on, on};
    const int len[FILL_WALK_FIELDS] = {0, 5, 6, 3, 3, 6, 2, 2, 2};
    memcpy(v, src[f], sizeof(int) * (size_t)len[f]);
    return len[f];
}

typedef struct walker {
    const fill_goal_desc *goal;
    fajit_context *ctx;
    fill_walk_fn fn;
    void *user;
    int count;
} walker;

static void one(walker *w, const fajit_config *given)
{
    fill_case c;
    memset(&c, 0, sizeof c);
    c.goal = w->goal;
    c.given = *given;
    c.out = *given;
    c.st = fj_config_fill_for(w->ctx, NULL, NULL, w->goal->variant, &c.out);
    c.msg = c.st == FAJIT_OK ? "" : fajit_errmsg();
    w->fn(w->user, &c);
    w->count++;
}

static void walk_goal(walker *w, int full)
{
    static const int dims[] = {64, 96, 128, 192, 256};
    int v[1024], u[16];
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int causal = 0; causal <= 1; causal++) {
            fajit_config base = {0};
            base.arch = w->goal->arch;
            base.dtype = (d + (size_t)causal) % 2 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16;
            base.head_dim = dims[d];
            base.causal = causal;
            one(w, &base);
            for (int f = 1; f < FILL_WALK_FIELDS; f++) { /* each field alone */
                /* the whole --br / --bc ranges once per path (d128 noncausal), or everywhere when full */
                int n = values(f, full || (dims[d] == 128 && !causal && !w->goal->sm && !w->goal->variant), v);
                for (int i = 0; i < n; i++) {
                    fajit_config g = base;
                    field_put(&g, f, v[i]);
                    one(w, &g);
                }
            }
            if (dims[d] != 128 && dims[d] != 256 && !full) continue;
            for (int f = 1; f < FILL_WALK_FIELDS; f++) /* pairs */
                for (int e = f + 1; e < FILL_WALK_FIELDS; e++) {
                    int n = pair_values(f, v), m = pair_values(e, u);
                    for (int i = 0; i < n; i++)
                        for (int j = 0; j < m; j++) {
                            fajit_config g = base;
                            field_put(&g, f, v[i]);
                            field_put(&g, e, u[j]);
                            one(w, &g);
                        }
                }
        }
}

int fill_walk(int full, fill_walk_fn fn, void *user)
{
    int total = 0;
    for (int i = 0; i < N_GOALS; i++) {
        walker w = {&k_goals[i], NULL, fn, user, 0};
        if (k_goals[i].sm) {
            fajit_context_options o = fajit_context_options_default();
            o.device = -1;
            o.disk_cache = 0;
            if (fajit_context_create(&o, &w.ctx) != FAJIT_OK) return -1;
            fj_context_set_identity(w.ctx, k_goals[i].sm, k_goals[i].name, 13000, k_goals[i].smem);
        }
        walk_goal(&w, full);
        fajit_context_destroy(w.ctx);
        total += w.count;
    }
    return total;
}
