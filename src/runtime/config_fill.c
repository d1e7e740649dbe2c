/*
 * config_fill.c - fajit_config_fill: the config for a device. Runtime policy on top of the code
 * generator's pure heuristic (codegen/config.c): which path the GPU runs best (sm_90a on compute
 * capability 9.0, sm_80 elsewhere), the tuned winner of the shape's class (tune.c), the device's own
 * shared-memory limit and register allocation. The generator never calls up into this layer.
 *
 * A fill keeps every field the caller set. The heuristic fills the zero fields from its tables; when
 * that config breaks a rule next to the caller's fields (warps = 1 with the table's tile, swizzle none at
 * the register edge, a decode variant's registers, the device's compiler), the zero fields are searched
 * instead: every value each may take, ordered by distance from the heuristic's choice, the first that
 * passes wins. When none passes, the caller's fields are tried alone and in pairs to name the one (or
 * two) that rule every config out, with the nearest config's own refusal.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/backend.h"
#include "codegen/codegen.h"
#include "compile.h"
#include "config_fill.h"
#include "context.h"
#include "base/error.h"
#include "sm100a_launch.h"
#include "tune.h"

fajit_arch fj_best_path(const fajit_context *ctx)
{
    /* an "a" path runs on its own compute capability only; sm_100a's unless FAJIT_SM100A_LAUNCH=0 */
    return ctx ? fj_auto_path(ctx->cc_major, ctx->cc_minor, ctx->sm100a_launch) : FAJIT_ARCH_SM80;
}

/* ---- the goal: what a filled config must pass ------------------------------------------------- */

typedef struct fill_goal {
    unsigned variant;           /* FJ_VARIANT_* bits the plan must take */
    const fj_arch_info *target; /* the GPU it is compiled for, or NULL (the path's own limits) */
} fill_goal;

static fajit_status goal_accepts(const fill_goal *g, const fajit_config *c)
{
    fj_plan plan;
    fajit_status st = g->variant ? fj_plan_build_variant(c, g->variant, &plan) : fj_plan_build(c, &plan);
    if (st != FAJIT_OK || !g->target) return st;
    /* an "a" path's code runs on its own compute capability, built for exactly its target (the device
     * "sm_90" takes "sm_90a"); a portable path's is built for the device's own sm */
    int own = plan.arch->name[strlen(plan.arch->name) - 1] == 'a' && plan.arch->sm == g->target->sm;
    if (!own && (st = fj_compile_check_target(plan.arch, g->target)) != FAJIT_OK) return st;
    if (plan.smem_bytes > g->target->smem_per_block)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "smem %d B exceeds %d B, what a CTA gets on %s; lower stages, block_n "
                                              "(--bc) or block_m (--br)",
                       plan.smem_bytes, g->target->smem_per_block, g->target->name);
    return fj_plan_check_target(&plan, g->target);
}

/* ---- the fields a caller may fix ---------------------------------------------------------------- */

typedef struct fill_field {
    const char *name; /* as fajit_config spells it */
    const char *flag; /* as fagen spells it */
    size_t offset;
} fill_field;

static const fill_field k_fields[] = {
    {"arch", "--arch", offsetof(fajit_config, arch)},
    {"block_m", "--br", offsetof(fajit_config, block_m)},
    {"block_n", "--bc", offsetof(fajit_config, block_n)},
    {"stages", "--stages", offsetof(fajit_config, stages)},
    {"swizzle", "--swizzle", offsetof(fajit_config, swizzle)},
    {"warps", "--warps", offsetof(fajit_config, warps)},
    {"col_warps", "--col-warps", offsetof(fajit_config, col_warps)},
    {"overlap", "--overlap", offsetof(fajit_config, overlap)},
    {"pingpong", "--pingpong", offsetof(fajit_config, pingpong)},
    {"roll", "--roll", offsetof(fajit_config, roll)},
    {"sched", "--sched", offsetof(fajit_config, sched)},
    {"cross_tile", "--cross-tile", offsetof(fajit_config, cross_tile)},
    {"accurate", "--accurate", offsetof(fajit_config, accurate)},
};
#define N_FIELDS ((int)(sizeof k_fields / sizeof k_fields[0]))

static int field_get(const fajit_config *c, int f)
{
    if (f == 0) return (int)c->arch;
    int v;
    memcpy(&v, (const char *)c + k_fields[f].offset, sizeof v);
    return v;
}

static void field_set(fajit_config *c, int f, int v)
{
    if (f == 0) c->arch = (fajit_arch)v;
    else memcpy((char *)c + k_fields[f].offset, &v, sizeof v);
}

/* "block_m (--br) = 1024", "swizzle = none", "arch (--arch) = sm_90a", "overlap = 1 (on)" */
static int field_text(const fajit_config *c, int f, char *buf, size_t size)
{
    const fill_field *d = &k_fields[f];
    int v = field_get(c, f);
    char name[48], dashed[32];
    snprintf(dashed, sizeof dashed, "%s", d->name);
    for (char *p = dashed; *p; p++)
        if (*p == '_') *p = '-';
    /* the flag beside the field where fagen spells it otherwise: "block_m (--br)" */
    if (strcmp(dashed, d->flag + 2) == 0) snprintf(name, sizeof name, "%s", d->name);
    else snprintf(name, sizeof name, "%s (%s)", d->name, d->flag);
    if (f == 0) return snprintf(buf, size, "%s = %s", name, fj_arch_path_name((fajit_arch)v));
    if (strcmp(d->name, "swizzle") == 0 && v == FAJIT_SWIZZLE_NONE) return snprintf(buf, size, "%s = none", name);
    if ((strcmp(d->name, "overlap") == 0 || strcmp(d->name, "pingpong") == 0 || strcmp(d->name, "roll") == 0 ||
         strcmp(d->name, "cross_tile") == 0 || strcmp(d->name, "accurate") == 0) &&
        (v == 1 || v == -1))
        return snprintf(buf, size, "%s = %d (%s)", name, v, v == 1 ? "on" : "off");
    if (strcmp(d->name, "sched") == 0 && (v == 1 || v == -1))
        return snprintf(buf, size, "%s = %d (%s)", name, v, v == 1 ? "lpt" : "static");
    return snprintf(buf, size, "%s = %d", name, v);
}

/* ---- the search ----------------------------------------------------------------------------------- */

typedef struct fill_cand {
    fajit_config cfg;
    double cost;
    int order;
} fill_cand;

/* How far apart two sizes are: the larger over the smaller, less 1 (0 when either is unset). */
static double size_cost(int a, int b)
{
    if (a <= 0 || b <= 0 || a == b) return 0;
    return a > b ? (double)a / b - 1 : (double)b / a - 1;
}

static int swizzle_rank(int s) { return s == 128 ? 0 : s == 64 ? 1 : s == 32 ? 2 : 3; }

/* Distance of c from the heuristic's h: tiles and warps by ratio (the table's warps weigh most: two 16-row
 * fragments per warp halve its K/V reads), stages and swizzle by steps, the column split and the sm_90a
 * schedule flags by change. */
static double cand_cost(const fajit_config *c, const fajit_config *h)
{
    double cost = 3 * size_cost(c->block_m, h->block_m) + 3 * size_cost(c->block_n, h->block_n) +
                  4 * size_cost(c->warps, h->warps) + 2 * abs(c->stages - h->stages);
    cost += abs(swizzle_rank(c->swizzle) - swizzle_rank(h->swizzle));
    cost += 4 * ((c->col_warps > 1) != (h->col_warps > 1)) + (c->overlap != h->overlap) + (c->pingpong != h->pingpong);
    return cost;
}

/* Nearer first; at equal distance the larger tile, the wider block_n, more stages, then listing order. */
static int cand_compare(const void *pa, const void *pb)
{
    const fill_cand *a = pa, *b = pb;
    if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
    long area_a = (long)a->cfg.block_m * a->cfg.block_n, area_b = (long)b->cfg.block_m * b->cfg.block_n;
    if (area_a != area_b) return area_a > area_b ? -1 : 1;
    if (a->cfg.block_n != b->cfg.block_n) return a->cfg.block_n > b->cfg.block_n ? -1 : 1;
    if (a->cfg.stages != b->cfg.stages) return a->cfg.stages > b->cfg.stages ? -1 : 1;
    return a->order - b->order;
}

/* The values a field may take on a path: the caller's when set, else every one a rule could accept. */
typedef struct value_list {
    int n;
    int v[16];
} value_list;

/* sm_100a's own values (sm100.c's rules): one or two 128-row query tiles (pingpong), 12 or 16 warps, block_n 32..128,
 * 2-4 stages, no overlap knob. 0 for the fields it shares with sm_90a. */
static int sm100_values(const char *name, value_list *l)
{
    if (strcmp(name, "block_m") == 0) l->v[l->n++] = 128, l->v[l->n++] = 256;
    else if (strcmp(name, "warps") == 0) l->v[l->n++] = 12, l->v[l->n++] = 16;
    else if (strcmp(name, "block_n") == 0)
        for (int bn = 32; bn <= 128; bn += 16) l->v[l->n++] = bn;
    else if (strcmp(name, "stages") == 0)
        for (int st = 2; st <= 4; st++) l->v[l->n++] = st;
    else if (strcmp(name, "overlap") == 0) l->v[l->n++] = -1;
    return l->n > 0;
}

static value_list values_of(const fajit_config *given, int f, fajit_arch path)
{
    value_list l = {0, {0}};
    int g = field_get(given, f);
    if (g) {
        l.v[l.n++] = g;
        return l;
    }
    const char *name = k_fields[f].name;
    int sm90 = path == FAJIT_ARCH_SM90A || path == FAJIT_ARCH_SM100A; /* warp-specialized: no warp pairs, swizzled */
    if (path == FAJIT_ARCH_SM100A && sm100_values(name, &l)) return l;
    if (strcmp(name, "block_m") == 0) {
        static const int bm80[] = {16, 32, 64, 128, 256}, bm90[] = {64, 128, 192};
        const int *src = sm90 ? bm90 : bm80;
        for (int i = 0, n = sm90 ? 3 : 5; i < n; i++) l.v[l.n++] = src[i];
    } else if (strcmp(name, "block_n") == 0) {
        for (int bn = 16; bn <= 256; bn += 16) l.v[l.n++] = bn;
    } else if (strcmp(name, "stages") == 0) {
        for (int s = 1; s <= 4; s++) l.v[l.n++] = s;
    } else if (strcmp(name, "swizzle") == 0) {
        l.v[l.n++] = 128, l.v[l.n++] = 64, l.v[l.n++] = 32;
        if (!sm90) l.v[l.n++] = FAJIT_SWIZZLE_NONE;
    } else if (strcmp(name, "warps") == 0) {
        static const int w80[] = {1, 2, 4, 8}, w90[] = {8, 12, 16};
        const int *src = sm90 ? w90 : w80;
        for (int i = 0, n = sm90 ? 3 : 4; i < n; i++) l.v[l.n++] = src[i];
    } else if (strcmp(name, "col_warps") == 0) {
        l.v[l.n++] = 1;
        if (!sm90) l.v[l.n++] = 2;
    } else if (strcmp(name, "roll") == 0 || strcmp(name, "sched") == 0 || strcmp(name, "cross_tile") == 0 ||
               strcmp(name, "accurate") == 0) {
        /* not searched: the default unless given */
        l.v[l.n++] = 0;
    } else { /* overlap, pingpong */
        l.v[l.n++] = -1;
        if (sm90) l.v[l.n++] = 1;
    }
    return l;
}

typedef struct fill_result {
    int found;
    fajit_config best;    /* found: the nearest config that passes */
    fajit_config nearest; /* not found: the nearest config tried */
} fill_result;

/* Every combination of the fields' values (given's fields fixed) on `base`'s path, nearest to h first;
 * the first that the goal accepts. FAJIT_ERR_OUT_OF_MEMORY when the list cannot be made. */
static fajit_status search(const fill_goal *goal, const fajit_config *base, const fajit_config *given,
                           const fajit_config *h, fill_result *out)
{
    value_list lists[N_FIELDS];
    size_t total = 1;
    memset(out, 0, sizeof *out);
    for (int f = 1; f < N_FIELDS; f++) {
        lists[f] = values_of(given, f, base->arch);
        total *= (size_t)lists[f].n;
    }
    fill_cand *cands = malloc(total * sizeof *cands);
    if (!cands) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fajit_config_fill: %zu candidates", total);
    int idx[N_FIELDS] = {0};
    for (size_t k = 0; k < total; k++) {
        fill_cand *c = &cands[k];
        c->cfg = *base;
        for (int f = 1; f < N_FIELDS; f++) field_set(&c->cfg, f, lists[f].v[idx[f]]);
        c->cost = cand_cost(&c->cfg, h);
        c->order = (int)k;
        for (int f = N_FIELDS - 1; f >= 1; f--) { /* the next combination, last field fastest */
            if (++idx[f] < lists[f].n) break;
            idx[f] = 0;
        }
    }
    qsort(cands, total, sizeof *cands, cand_compare);
    out->nearest = cands[0].cfg;
    int was = fj_error_mute(1); /* the refusals are not kept: fail_naming asks the nearest's again */
    for (size_t k = 0; k < total && !out->found; k++) {
        if (goal_accepts(goal, &cands[k].cfg) != FAJIT_OK) continue;
        out->found = 1;
        out->best = cands[k].cfg;
    }
    fj_error_mute(was);
    free(cands);
    return FAJIT_OK;
}

/* ---- one path ----------------------------------------------------------------------------------- */

typedef struct fill_request {
    fajit_context *ctx;
    const fajit_shape *shape;
    fill_goal goal;
    fajit_config given; /* the caller's config, dtype resolved, arch as given (AUTO or a path) */
    int untuned;        /* 1: the built-in table only, never a tuned winner (fj_config_fill_default) */
} fill_request;

/* The paths to try for given's arch: the caller's, or the best for the device then sm_80. */
static int paths_of(const fill_request *r, fajit_arch paths[2])
{
    if (r->given.arch != FAJIT_ARCH_AUTO) {
        paths[0] = r->given.arch;
        return 1;
    }
    if (r->given.dtype == FAJIT_DTYPE_E4M3) { /* FP8 is sm_90a's only (its plan says so on other targets) */
        paths[0] = FAJIT_ARCH_SM90A;
        return 1;
    }
    if (r->given.kv_dtype == FAJIT_DTYPE_E4M3) { /* an FP8 K/V cache: the sm_80 path's kernels (kv8.c) */
        paths[0] = FAJIT_ARCH_SM80;
        return 1;
    }
    paths[0] = fj_best_path(r->ctx);
    paths[1] = FAJIT_ARCH_SM80;
    return paths[0] == FAJIT_ARCH_SM80 ? 1 : 2;
}

/* The heuristic's config on a path for `given`: the tuned winner or the table, shrunk to the target's
 * shared memory, then (what the runtime has always done on an sm_8x GPU) block_n halved while the
 * target's register allocation refuses it. */
static fajit_config heuristic_on(const fill_request *r, const fajit_config *given, fajit_arch path)
{
    fajit_config c = *given;
    c.arch = path;
    if (!r->goal.variant && !r->untuned) fj_tune_fill(r->ctx, r->shape, &c); /* zero fields from the tuned winner, if any */
    const fj_arch_info *t = r->goal.target;
    fj_config_heuristic(&c, given, r->shape, t ? t->smem_per_block : 0);
    fj_plan plan;
    while (t && !given->block_n && c.block_n > 16 && fj_plan_build(&c, &plan) == FAJIT_OK &&
           fj_plan_check_target(&plan, t) != FAJIT_OK)
        c.block_n = fj_block_n_half(c.block_n);
    return c;
}

/* Fill `given` on each of its paths: the heuristic's config when the goal accepts it, else the search's
 * nearest. 1 and *out filled when one passes; else 0 and *nearest (may be NULL) the first path's nearest. */
static int fill_given(const fill_request *r, const fajit_config *given, fajit_config *out, fajit_config *nearest,
                      fajit_status *oom)
{
    fajit_arch paths[2];
    int n = paths_of(r, paths);
    for (int i = 0; i < n; i++) {
        fajit_config h = heuristic_on(r, given, paths[i]);
        if (goal_accepts(&r->goal, &h) == FAJIT_OK) {
            *out = h;
            return 1;
        }
        fajit_config base = *given;
        base.arch = paths[i];
        fill_result res;
        if ((*oom = search(&r->goal, &base, given, &h, &res)) != FAJIT_OK) return 0;
        if (res.found) {
            *out = res.best;
            return 1;
        }
        if (i == 0 && nearest) *nearest = res.nearest;
    }
    return 0;
}

/* ---- naming the field that rules every config out --------------------------------------------- */

/* given with only the fields in `keep` (a bit per k_fields index) set. */
static fajit_config only_fields(const fajit_config *given, unsigned keep)
{
    fajit_config c = *given;
    for (int f = 0; f < N_FIELDS; f++)
        if (!(keep & (1u << f))) field_set(&c, f, 0);
    return c;
}

/* The smallest set of the caller's fields (one, else two, else all) that no config passes with. */
static unsigned find_culprits(const fill_request *r, unsigned set, fajit_status *oom)
{
    fajit_config out;
    int n = 0;
    for (int f = 0; f < N_FIELDS; f++) n += (set >> f) & 1;
    if (n <= 1) return set;
    for (int f = 0; f < N_FIELDS; f++) {
        if (!(set & (1u << f))) continue;
        fajit_config g = only_fields(&r->given, 1u << f);
        if (!fill_given(r, &g, &out, NULL, oom) && *oom == FAJIT_OK) return 1u << f;
    }
    for (int f = 0; f < N_FIELDS; f++)
        for (int e = f + 1; e < N_FIELDS; e++) {
            unsigned pair = (1u << f) | (1u << e);
            if ((set & pair) != pair) continue;
            fajit_config g = only_fields(&r->given, pair);
            if (!fill_given(r, &g, &out, NULL, oom) && *oom == FAJIT_OK) return pair;
        }
    return set;
}

static void variant_text(unsigned v, char *buf, size_t size)
{
    static const char *const words[] = {"seqlens", "split", "combine", "packgqa", "paged", "gather", "ahead"};
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < 7; i++)
        if ((v >> i) & 1) n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? "+" : "", words[i]);
}

/* The refusal: the culprits, what was asked, and the nearest config's own reason (its message as is when
 * it already names the single culprit: "warps = 3: must be 1, 2, 4 or 8"). */
static fajit_status fail_naming(const fill_request *r, unsigned culprits, const fajit_config *nearest)
{
    char who[256] = "", reason[1024], canon[160], what[160], vt[64];
    size_t n = 0;
    int count = 0;
    for (int f = 0; f < N_FIELDS; f++) {
        if (!(culprits & (1u << f))) continue;
        char one[64];
        field_text(&r->given, f, one, sizeof one);
        n += (size_t)snprintf(who + n, n < sizeof who ? sizeof who - n : 0, "%s%s", count++ ? " with " : "", one);
    }
    fajit_status st = goal_accepts(&r->goal, nearest);
    if (st == FAJIT_OK) st = FAJIT_ERR_INTERNAL; /* the search would have taken it */
    snprintf(reason, sizeof reason, "%s", fajit_errmsg());
    if (!count) snprintf(who, sizeof who, "fajit_config_fill");
    if (count == 1 && strncmp(reason, who, strcspn(who, "=")) == 0 && strstr(reason, who) == reason)
        return fj_fail(st, "%s", reason);
    fajit_config_format(nearest, canon, sizeof canon);
    variant_text(r->goal.variant, vt, sizeof vt);
    fajit_arch paths[2];
    int np = paths_of(r, paths);
    snprintf(what, sizeof what, "%s%s%s config for head_dim %d%s%s%s%s", fj_arch_path_name(paths[0]),
             np > 1 ? " or " : "", np > 1 ? fj_arch_path_name(paths[1]) : "", r->given.head_dim,
             vt[0] ? " with the decode variant " : "", vt, r->goal.target ? " on " : "",
             r->goal.target ? r->goal.target->name : "");
    return fj_fail(st, "%s: no %s keeps %s; the nearest, \"%s\", fails: %s", who, what,
                   count > 1 ? "them" : "it", canon, reason);
}

/* ---- entry points ------------------------------------------------------------------------------- */

/* The fields fill never chooses: head_dim set and known, dtype, causal, and an arch that is a path. */
static fajit_status check_problem(const fajit_config *c)
{
    if (c->head_dim == 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "head_dim = 0: must be set to 64, 96, 128, 192 or 256 "
                                                   "(fajit_config_fill does not choose the head dimension)");
    if (c->head_dim != 64 && c->head_dim != 96 && c->head_dim != 128 && c->head_dim != 192 && c->head_dim != 256)
        return fj_fail(FAJIT_ERR_INVALID_CONFIG, "head_dim = %d: must be 64, 96, 128, 192 or 256",
                       c->head_dim);
    if (c->dtype != FAJIT_DTYPE_AUTO && c->dtype != FAJIT_DTYPE_F16 && c->dtype != FAJIT_DTYPE_BF16 &&
        c->dtype != FAJIT_DTYPE_E4M3)
        return fj_fail(FAJIT_ERR_INVALID_CONFIG, "dtype = %d: must be f16 (1), bf16 (2), e4m3 (3) or auto (0: bf16)",
                       (int)c->dtype);
    if (c->causal != 0 && c->causal != 1) return fj_fail(FAJIT_ERR_INVALID_CONFIG, "causal = %d: must be 0 or 1", c->causal);
    if (c->arch != FAJIT_ARCH_AUTO && (!fj_arch_of_path(c->arch) || !fj_backend_of(c->arch))) {
        fj_plan plan;
        return fj_plan_build(c, &plan); /* its first rule is the arch's */
    }
    return FAJIT_OK;
}

static fajit_status fill_for(fajit_context *ctx, const fajit_shape *shape, const fj_arch_info *target,
                             unsigned variant, int untuned, fajit_config *cfg)
{
    if (!cfg) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    fajit_status st = check_problem(cfg);
    if (st != FAJIT_OK) return st;
    fill_request r = {ctx, shape, {variant == FJ_VARIANT_COMBINE ? 0 : variant, NULL}, *cfg, untuned};
    r.goal.target = target ? target : ctx ? fj_arch_find(fajit_context_sm(ctx)) : NULL;
    if (r.given.dtype == FAJIT_DTYPE_AUTO) r.given.dtype = FAJIT_DTYPE_BF16;
    fajit_config out, nearest;
    if (fill_given(&r, &r.given, &out, &nearest, &st)) {
        *cfg = out;
        fj_clear_error(); /* the refusals the search got past */
        return FAJIT_OK;
    }
    if (st != FAJIT_OK) return st;
    unsigned set = 0;
    for (int f = 0; f < N_FIELDS; f++)
        if (field_get(&r.given, f)) set |= 1u << f;
    unsigned culprits = find_culprits(&r, set, &st);
    if (st != FAJIT_OK) return st;
    return fail_naming(&r, culprits, &nearest);
}

fajit_status fj_config_fill_for(fajit_context *ctx, const fajit_shape *shape, const fj_arch_info *target,
                                unsigned variant, fajit_config *cfg)
{
    return fill_for(ctx, shape, target, variant, 0, cfg);
}

fajit_status fj_config_fill_default(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg)
{
    return fill_for(ctx, shape, NULL, 0, 1, cfg);
}

fajit_status fajit_config_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg)
{
    fj_clear_error();
    return fj_config_fill_for(ctx, shape, NULL, 0, cfg);
}
