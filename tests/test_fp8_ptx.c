/*
 * test_fp8_ptx.c - the FP8 kernel's V transpose as emitted (no GPU): the PTX of sm_90a e4m3 configs runs through
 * ptx_sim's interpreter for every thread of the transposing producer warps (1-3; vt4: 0-3) of one CTA over a work tile of
 * several KV tiles; each ldmatrix / stmatrix address must be the one codegen/fp8_layout.c's layout gives (proved by
 * test_fp8_layout.c to make P V exact): V(stage s) row 16 kg + fj_fp8_ld_key(lane) at head-dim byte 32 dg +
 * fj_fp8_ld_col(lane), Vt(stage s) row 32 dg + fj_fp8_st_dim(lane) at key byte 16 kg, both swizzled as TMA / wgmma
 * store them (fj_fp8_swizzled), block b = (kg, dg) by warp b % 3, stages in ring order (knob vt). The vt4 form
 * (FAJIT_FP8_KNOBS vt4, D128's default): threads 0-127, warp (kw, dw) = (warp & 1, warp >> 1) transposes blocks
 * i = 0, 1, .. at keys 32 (i % (block_n / 32)) + 16 kw, head dims 64 (i / (block_n / 32)) + 32 dw (fp8_ws.c's
 * "vt4 block split"), and lane 0 of warp 0 issues the K / V TMA boxes a tile ahead: K(j) then V(j) of each KV tile
 * walked, into stage (walk index % stages), box c (head-dim bytes c x swizzle..) at c x block_n x swizzle in the
 * stage; no other thread loads. Varlen (cu_seqlens) tiles too: the transposers walk the varlen schedule from its first
 * round as the loader does (a schedule register left unset reads cu_seqlens at an unknown address: caught here, checked
 * by removing the transposer's fj_ws_sched_start). Also: every config assembles its plan's registers and smem as the plan says
 * (ptxas is the ptxas label's job). And P's pack comes before the wait that precedes its PV
 * (test_p_packed_before_waits).
 * Run: ctest --test-dir build -R test_fp8_ptx
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/fp8_layout.h"
#include "codegen/fp8_ws.h"
#include "ptx_sim.h"

typedef struct fp8_tile {
    int d, block_m, block_n, stages, swizzle, causal;
    int no_pp;  /* 1: ping-pong off (the register model refuses D256 bc128 causal with it) */
    int varlen; /* 1: the varlen variant (cu_seqlens_q / _k; one sequence of the work tile's rows and keys) */
} fp8_tile;

static const fp8_tile k_tiles[] = {
    {128, 128, 128, 2, 128, 0, 0, 0}, /* d128 (its default tile is bc192, in k_vt4_tiles) */
    {128, 128, 192, 2, 128, 1, 0, 0}, /* Vt in 64-byte boxes */
    {256, 128, 64, 2, 128, 0, 0, 0},  /* d256: two V boxes a row */
    {256, 128, 96, 2, 128, 1, 0, 0},  /* Vt in 32-byte boxes */
    {64, 192, 128, 2, 64, 0, 0, 0},   /* the d64 default before session 21: 64-byte V rows */
    {64, 128, 160, 3, 64, 1, 0, 0},   /* three stages, Vt in 32-byte boxes */
    {128, 128, 128, 2, 128, 0, 0, 1}, /* varlen (the three-warp form), as in k_vt4_tiles */
};

/* The blocks (kg, dg) a transposing warp visits, in order, into v[] (their count returned): form vt, warp tw of 1-3
 * (3 warps, block b = kg + dg x block_n / 16 by warp b % 3); form vt4, warp tw of 0-3 (its quarter, see above). */
static int warp_blocks(int vt4, int tw, int bn, int d, int v[][2])
{
    int n = 0, n_kg = bn / 16;
    if (!vt4) {
        for (int b = tw - 1; b < n_kg * (d / 32); b += 3, n++) v[n][0] = b % n_kg, v[n][1] = b / n_kg;
        return n;
    }
    int kw = tw & 1, dw = tw >> 1, n_a = bn / 32;
    for (int i = 0; i < n_a * (d / 64); i++, n++) {
        int key = 32 * (i % n_a) + 16 * kw, col = 64 * (i / n_a) + 32 * dw;
        v[n][0] = key / 16, v[n][1] = col / 32;
    }
    return n;
}

/* vt4: lane 0 of warp 0's K / V boxes (wd->smem_cp / gmem_cp, in order): K(j) then V(j) of each KV tile j walked
 * (ascending, or descending from the last with plan.kv_desc), walk index i into stage i % stages, d / swizzle boxes a
 * tile. */
static void check_loads(const world *wd, const fj_plan *pl, int n_kv, const char *what)
{
    int bn = pl->cfg.block_n, d = pl->cfg.head_dim, w = pl->cfg.swizzle, n_box = d / w, at = 0;
    for (int i = 0; i < n_kv; i++) {
        int j = pl->kv_desc ? n_kv - 1 - i : i, s = i % pl->cfg.stages;
        for (int v = 0; v < 2; v++)
            for (int c = 0; c < n_box; c++, at++) {
                uint64_t want_s = (uint64_t)((v ? pl->v_off : pl->k_off) + s * pl->kv_tile_bytes + c * bn * w);
                uint64_t want_g = (v ? BASE_V : BASE_K) + (uint64_t)(j * bn * d + c * w);
                if (at >= wd->n_cp)
                    fail_msg("%s: thread 0 issued %d K / V boxes, want %d", what, wd->n_cp, 2 * n_kv * n_box);
                if (wd->smem_cp[at] != want_s || wd->gmem_cp[at] != want_g)
                    fail_msg("%s: thread 0's box %d: shared %llu from %c + %llu, want %c(%d) box %d (walk %d, "
                             "stage %d): shared %llu from %c + %llu",
                             what, at, (unsigned long long)wd->smem_cp[at], wd->gmem_cp[at] >= BASE_V ? 'V' : 'K',
                             (unsigned long long)(wd->gmem_cp[at] - (wd->gmem_cp[at] >= BASE_V ? BASE_V : BASE_K)),
                             v ? 'V' : 'K', j, c, i, s, (unsigned long long)want_s, v ? 'V' : 'K',
                             (unsigned long long)(want_g - (v ? BASE_V : BASE_K)));
            }
    }
    if (wd->n_cp != at) fail_msg("%s: thread 0 issued %d K / V boxes, want %d", what, wd->n_cp, at);
}

static void run_tile(const fp8_tile *tc, int vt4, int lean)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = tc->d, .block_m = tc->block_m,
                        .block_n = tc->block_n, .stages = tc->stages, .swizzle = tc->swizzle,
                        .warps = 4 * (tc->block_m / 64 + 1), .col_warps = 1, .overlap = 1,
                        .pingpong = tc->no_pp ? -1 : 1, .causal = tc->causal};
    fj_plan pl;
    char what[200];
    unsigned variant = tc->varlen ? FJ_VARIANT_VARLEN | FJ_VARIANT_VARLEN_K : 0;
    if ((variant ? fj_plan_build_variant(&cfg, variant, &pl) : fj_plan_build(&cfg, &pl)) != FAJIT_OK)
        fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    if (pl.fp8_vt4 != vt4) fail_msg("%s: plan.fp8_vt4 %d, want %d (FAJIT_FP8_KNOBS)", what, pl.fp8_vt4, vt4);
    if (fj_fp8_vt4_lean(&pl) != lean)
        fail_msg("%s: the lean vt4 form %d, want %d (producer registers %d)", what, fj_fp8_vt4_lean(&pl), lean,
                 pl.producer_regs);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);
    /* one work tile (B1 H1, Nq = block_m) of 2 x stages + 1 KV tiles: every stage used, the ring wrapping */
    int n_kv = 2 * tc->stages + 1, nk = n_kv * tc->block_n, d = tc->d, bn = tc->block_n, w = tc->swizzle;
    world *wd = calloc(1, sizeof *wd);
    assert_non_null(wd);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_E4M3, a.batch = 1, a.heads_q = 1, a.heads_kv = 1, a.head_dim = d;
    a.seqlen_q = tc->causal ? nk : tc->block_m, a.seqlen_k = nk, a.causal = tc->causal;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    fajit_args_set_bhnd_strides(&a);
    wd->batch = 1, wd->hkv = 1, wd->group = 1, wd->splits = 1, wd->dim = d, wd->cta_b = -1;
    if (tc->varlen) { /* one packed sequence [total, 1, D] of the same rows and keys; its tiles are the batch's */
        int64_t s[3] = {0, d, d};
        memcpy(a.q_stride, s, sizeof s), memcpy(a.o_stride, s, sizeof s);
        memcpy(a.k_stride, s, sizeof s), memcpy(a.v_stride, s, sizeof s);
        wd->varlen = wd->varlen_k = 1, wd->cap_q = a.seqlen_q, wd->cap_k = a.seqlen_k, wd->total_q = a.seqlen_q;
        wd->cu_q[1] = a.seqlen_q, wd->cu_k[1] = a.seqlen_k;
    }
    fj_forward_params(&a, &pl, &wd->prm.base);
    if (tc->varlen) wd->prm.cu_seqlens_q = BASE_CUQ, wd->prm.cu_seqlens_k = BASE_CUK, wd->prm.batch = 1;
    unsigned tiles = ws_setup(wd, &pl, &a);
    wd->cap = 1 << 16;
    uint64_t *ld = calloc((size_t)wd->cap, 8), *st = calloc((size_t)wd->cap, 8);
    uint64_t *cs = calloc((size_t)wd->cap, 8), *cg = calloc((size_t)wd->cap, 8);
    int(*blk)[2] = calloc((size_t)(bn / 16) * (size_t)(d / 32), sizeof *blk);
    assert_true(ld && st && cs && cg && blk);
    wd->smem_ld = ld, wd->smem_st = st, wd->smem_cp = cs, wd->gmem_cp = cg;
    uint64_t *vl_rec[5] = {NULL, NULL, NULL, NULL, NULL}; /* varlen: the interpreter records boxes by rows (ptx_sim.c) */
    if (tc->varlen) {
        for (int i = 0; i < 5; i++) assert_non_null(vl_rec[i] = calloc((size_t)wd->cap, 8));
        wd->q_reads = vl_rec[0], wd->k_reads = vl_rec[1], wd->v_reads = vl_rec[2], wd->o_writes = vl_rec[3];
        wd->lse_writes = vl_rec[4];
    }
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1)};
    assert_true(t.val && t.known);
    /* causal: the CTA's one work tile is the last query block (all KV tiles); tiles beyond 1 belong to other CTAs */
    t.ctaid[0] = 0, t.ctaid[1] = t.ctaid[2] = 0, t.nctaid_x = tiles;
    int wv = pl.vt_swizzle, checked = 0;
    for (unsigned tid = vt4 ? 0 : 32; tid < 128; tid++) {
        wd->n_ld = wd->n_st = wd->n_cp = wd->n_gcp = 0;
        wd->n_q = wd->n_k = wd->n_v = wd->n_o = wd->n_lse = 0;
        t.tid = tid;
        if (!run_thread(&p, &t, wd)) fail_msg("%s: transposer thread %u: %s", what, tid, wd->why);
        if (tid == 0 && !tc->varlen) check_loads(wd, &pl, n_kv, what); /* (varlen boxes: test_varlen_reads' model) */
        else if (wd->n_cp) fail_msg("%s: thread %u issued %d K / V boxes (only thread 0 loads)", what, tid, wd->n_cp);
        int lane = (int)tid % 32, n_wb = warp_blocks(vt4, (int)tid / 32, bn, d, blk), i = 0;
        for (int j = 0; j < n_kv; j++) {
            int s = j % tc->stages;
            for (int q = 0; q < n_wb; q++, i++) {
                int kg = blk[q][0], dg = blk[q][1];
                uint64_t want_ld = (uint64_t)(pl.v_off + s * pl.kv_tile_bytes +
                                              fj_fp8_swizzled(16 * kg + fj_fp8_ld_key(lane), 32 * dg + fj_fp8_ld_col(lane),
                                                              bn, w));
                uint64_t want_st = (uint64_t)(pl.vt_off + s * pl.kv_tile_bytes +
                                              fj_fp8_swizzled(32 * dg + fj_fp8_st_dim(lane), 16 * kg, d, wv));
                if (i >= wd->n_ld || i >= wd->n_st)
                    fail_msg("%s: thread %u: %d ldmatrix / %d stmatrix, fewer than the %d blocks of its warp", what, tid,
                             wd->n_ld, wd->n_st, i + 1);
                if (ld[i] != want_ld || st[i] != want_st)
                    fail_msg("%s: thread %u, KV tile %d (stage %d), its block %d (keys %d.., dims %d..): ldmatrix at "
                             "%llu (want %llu), stmatrix at %llu (want %llu)",
                             what, tid, j, s, q, 16 * kg, 32 * dg, (unsigned long long)ld[i],
                             (unsigned long long)want_ld, (unsigned long long)st[i], (unsigned long long)want_st);
                checked++;
            }
        }
        if (wd->n_ld != i || wd->n_st != i)
            fail_msg("%s: thread %u: %d ldmatrix / %d stmatrix, want %d", what, tid, wd->n_ld, wd->n_st, i);
    }
    printf("%s: %d transposer block addresses as fp8_layout.c says (%d KV tiles, %s)%s%s\n", what, checked, n_kv,
           vt4 ? "warps 0-3" : "warps 1-3", vt4 && !tc->varlen ? "; thread 0's K / V boxes in order" : "",
           lean ? "; the lean form (24-register producer)" : "");
    free(ld), free(st), free(cs), free(cg), free(blk), free(t.val), free(t.known), free(wd);
    for (int i = 0; i < 5; i++) free(vl_rec[i]);
    free(p.v);
}

/* The model's block split covers each block of a tile once: 3 warps (vt) or 4 (vt4). */
static void check_split(int vt4, int bn, int d)
{
    int n_kg = bn / 16, n = n_kg * (d / 32);
    int(*v)[2] = calloc((size_t)n, sizeof *v), *hit = calloc((size_t)n, sizeof *hit);
    assert_true(v && hit);
    for (int tw = vt4 ? 0 : 1; tw < 4; tw++) {
        int m = warp_blocks(vt4, tw, bn, d, v);
        for (int q = 0; q < m; q++) hit[v[q][0] + n_kg * v[q][1]]++;
    }
    for (int b = 0; b < n; b++)
        if (hit[b] != 1)
            fail_msg("bc %d, d %d: block %d visited %d times by the %s model", bn, d, b, hit[b], vt4 ? "vt4" : "vt");
    free(v), free(hit);
}

/* The three-warp form (knob vt). */
static void test_transpose_addresses(void **state)
{
    (void)state;
    setenv("FAJIT_FP8_KNOBS", "vt", 1);
    for (size_t i = 0; i < sizeof k_tiles / sizeof k_tiles[0]; i++) {
        check_split(0, k_tiles[i].block_n, k_tiles[i].d);
        run_tile(&k_tiles[i], 0, 0);
    }
    unsetenv("FAJIT_FP8_KNOBS");
    /* the d64 default (knobs unset: regs, vt, poff): br192 bc160 on three consumer warpgroups, Vt in 32-byte boxes */
    for (int causal = 0; causal < 2; causal++) run_tile(&(fp8_tile){64, 192, 160, 2, 64, causal, 0, 0}, 0, 0);
}

/* The four-warp form (knob vt4): D128's default (knobs unset), then FAJIT_FP8_KNOBS as each tile says. */
typedef struct vt4_tile {
    fp8_tile t;
    const char *knobs; /* NULL: unset */
    int lean;          /* the lean form (fj_fp8_vt4_lean: knob regs, two consumer warpgroups, 24 producer registers) */
} vt4_tile;

static const vt4_tile k_vt4_tiles[] = {
    {{128, 128, 192, 2, 128, 0, 0, 0}, NULL, 0},     /* the d128 default (fagen explain --dtype e4m3 --headdim 128) */
    {{128, 128, 192, 2, 128, 1, 0, 0}, NULL, 0},     /* its causal form: KV tiles walked from the diagonal's */
    {{128, 128, 224, 2, 128, 0, 0, 0}, NULL, 1},     /* bc224: regs by default (FJ_FP8_REGS_WIDE), the lean form */
    {{128, 128, 128, 2, 128, 0, 0, 0}, "vt4", 0},    /* two 32-key block rows a warp */
    {{64, 192, 128, 2, 64, 0, 0, 0}, "vt4", 0},      /* the d64 tile before session 21: one 64-dim column */
    {{64, 192, 128, 2, 64, 0, 0, 0}, "regs,vt4", 0}, /* three consumer warpgroups: the producer keeps 32, not lean */
    {{256, 128, 128, 2, 128, 0, 0, 0}, "regs,vt4,ostage", 1},    /* the d256 default's tile, O staged in the V ring */
    {{256, 128, 128, 2, 128, 1, 1, 0}, "regs,vt4,ostage", 1}, /* its causal form (no ping-pong) */
    {{128, 128, 192, 2, 128, 0, 0, 0}, "regs,vt4", 1},           /* D128 with FA3's registers: Vt in 64-byte boxes */
    {{128, 128, 224, 2, 128, 1, 0, 0}, "regs,vt4", 1},           /* FA3's D128 tile, 7 32-key block rows */
    {{256, 128, 64, 1, 128, 0, 0, 0}, "regs,vt4", 1},            /* one stage: a single ring exit */
    /* varlen: the transposers walk the varlen schedule as the loader does (session 16: their schedule register was
     * never set, a GPU hang; here an unknown value the interpreter stops on) */
    {{128, 128, 192, 2, 128, 1, 0, 1}, NULL, 0},
    {{256, 128, 96, 2, 128, 1, 1, 1}, "regs,vt4,ostage", 1},
    {{64, 128, 128, 2, 64, 0, 0, 1}, "vt4", 0}, /* 64-byte rows */
};

static void test_transpose_addresses_vt4(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_vt4_tiles / sizeof k_vt4_tiles[0]; i++) {
        const vt4_tile *vc = &k_vt4_tiles[i];
        if (vc->knobs) setenv("FAJIT_FP8_KNOBS", vc->knobs, 1);
        else unsetenv("FAJIT_FP8_KNOBS");
        check_split(1, vc->t.block_n, vc->t.d);
        run_tile(&vc->t, 1, vc->lean);
    }
    unsetenv("FAJIT_FP8_KNOBS");
}

/* P is packed before the wait that precedes its PV (FJ_FP8_P_EARLY, fp8_ws.h: ptxas then merges each cvt pair into
 * F2FP.MERGE_C, not F2FP + PRMT). Overlapped loop: every run of moves into frag_p from the early registers
 * (frag_pe) has, between the softmax's wgmma.wait_group 1 and PV(j-1)'s wgmma.wait_group 0 before it, two cvt per
 * move (the pack), and no cvt between that wait and the moves. Serial loop (overlap 0): no cvt between a PV's last
 * mbarrier wait (for V) and the PV. */
static int starts(const char *line, const char *word)
{
    while (*line == ' ' || *line == '\t') line++;
    return strncmp(line, word, strlen(word)) == 0;
}

static int check_pack_order(const fp8_tile *tc, int overlap)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .head_dim = tc->d, .block_m = tc->block_m,
                        .block_n = tc->block_n, .stages = tc->stages, .swizzle = tc->swizzle,
                        .warps = 4 * (tc->block_m / 64 + 1), .col_warps = 1, .overlap = overlap,
                        .pingpong = tc->no_pp ? -1 : overlap, .causal = tc->causal};
    fj_plan pl;
    char what[200];
    if (fj_plan_build(&cfg, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    if (!pl.fp8_p_early) return 0; /* packed after the waits (D64 / D128 by default) */
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    size_t n = 0, cap = 1024;
    char **ln = malloc(cap * sizeof *ln);
    assert_non_null(ln);
    for (char *c = strtok(ptx, "\n"); c; c = strtok(NULL, "\n")) {
        if (n == cap) ln = realloc(ln, (cap *= 2) * sizeof *ln), assert_non_null(ln);
        ln[n++] = c;
    }
    int blocks = 0, pv = 0;
    for (size_t i = 0; i < n; i++) {
        if (overlap && starts(ln[i], "mov.b32 %frag_p") && strstr(ln[i], ", %frag_pe") &&
            !(starts(ln[i - 1], "mov.b32 %frag_p") && strstr(ln[i - 1], ", %frag_pe"))) {
            size_t m = i, w0 = i, w1;
            while (m < n && starts(ln[m], "mov.b32 %frag_p") && strstr(ln[m], ", %frag_pe")) m++;
            while (w0 > 0 && !starts(ln[w0], "wgmma.wait_group.sync.aligned 0")) w0--;
            w1 = w0;
            while (w1 > 0 && !starts(ln[w1], "wgmma.wait_group.sync.aligned 1")) w1--;
            int before = 0, after = 0;
            for (size_t q = w1; q < w0; q++) before += starts(ln[q], "cvt.rn.satfinite.e4m3x2.f32");
            for (size_t q = w0; q < i; q++) after += starts(ln[q], "cvt.rn.satfinite.e4m3x2.f32");
            if (w1 == 0 || before != 2 * (int)(m - i) || after != 0)
                fail_msg("%s: %d moves into frag_p at line %zu; %d cvt between the waits (want %d), %d after the "
                         "wait", what, (int)(m - i), i, before, 2 * (int)(m - i), after);
            blocks++;
        }
        if (!overlap && starts(ln[i], "wgmma.mma_async") && strstr(ln[i], "{%frag_p")) {
            size_t w = i;
            while (w > 0 && !starts(ln[w], "mbarrier.try_wait")) w--;
            for (size_t q = w; q < i; q++)
                if (starts(ln[q], "cvt.rn.satfinite.e4m3x2.f32"))
                    fail_msg("%s: cvt at line %zu, after the wait at line %zu for the PV at line %zu", what, q, w, i);
            pv++;
        }
    }
    if (overlap ? blocks < tc->stages : pv == 0) fail_msg("%s: %d early packs, %d PV found", what, blocks, pv);
    free(ln);
    fajit_free(ptx);
    return 1;
}

static void test_p_packed_before_waits(void **state)
{
    (void)state;
    int checked = 0;
    unsetenv("FAJIT_FP8_KNOBS");
    for (size_t i = 0; i < sizeof k_tiles / sizeof k_tiles[0]; i++)
        for (int overlap = 0; overlap < 2; overlap++) checked += check_pack_order(&k_tiles[i], overlap);
    for (size_t i = 0; i < sizeof k_vt4_tiles / sizeof k_vt4_tiles[0]; i++) { /* under the knobs their tiles need */
        if (k_vt4_tiles[i].knobs) setenv("FAJIT_FP8_KNOBS", k_vt4_tiles[i].knobs, 1);
        else unsetenv("FAJIT_FP8_KNOBS");
        checked += check_pack_order(&k_vt4_tiles[i].t, 1);
    }
    unsetenv("FAJIT_FP8_KNOBS");
    assert_true(checked >= 4); /* the D256 tiles (plan.fp8_p_early) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_transpose_addresses),
                                       cmocka_unit_test(test_transpose_addresses_vt4),
                                       cmocka_unit_test(test_p_packed_before_waits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
