/*
 * test_paged_reads.c - which global memory the paged decode kernels read (label unit; no GPU, no ptxas).
 *
 * The sm_80 decode variants' PTX is run, thread by thread, CTA by CTA, by a small interpreter of its integer
 * subset (address and loop arithmetic, predicates, branches, ld.param, the block-table and seqlens_k loads,
 * cp.async); float, MMA and shared-memory instructions only make their destinations unknown. An address or
 * copy size built from an unknown value fails the test. Checked per CTA, for paged K/V (plain and gathered
 * from 16-row segments, pages read at each copy or a tile ahead (AHEAD), 2-3 stages, split-KV with empty
 * splits, per-sequence lengths 0, 1, exact page and tile multiples, partial last pages, clamped ones):
 *   - every block-table entry read is in the CTA's own row and below ceil(len / page_size) (no read of a page
 *     the sequence has not filled), every seqlens_k read is the CTA's batch;
 *   - the K and V rows copied with a non-zero size are exactly the split's keys [first, end) x all 16-byte
 *     chunks, each once, each from the page the block table names for it (address = pool + page x page
 *     stride + KV head x head stride + row in page x row stride).
 * The sm_90a kernel's paged variants (test_sm90) the same way, for the producer thread of one CTA per work tile:
 * its TMA boxes (coordinates column, row in the page, KV head, page) count as the rows they load - the split's
 * keys up to the length rounded up to the box (min(page_size, block_n) rows) - each box must land at its
 * logical row's place in the stage, and every mbarrier's expect_tx bytes must equal the bytes its boxes load
 * (at each wait of the producer and at the end).
 * Run: ctest --test-dir build -R test_paged_reads --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_sim.h"

/* ---- one launch ----------------------------------------------------------------------------------------- */
/* The chunks split s of batch b, KV head h must copy from pool `base`, sorted. */
static int expected(const world *w, const fj_plan *pl, int b, int h, int s, uint64_t base, const int64_t *st,
                    uint64_t *out)
{
    int len = seq_len(w, b), bn = pl->cfg.block_n, n = 0;
    int tiles = (len + bn - 1) / bn, first = 0, end = tiles;
    if (w->splits > 1) {
        int per = (tiles + w->splits - 1) / w->splits;
        first = s * per, end = first + per < tiles ? first + per : tiles;
    }
    int lim = w->ws ? (len + w->box - 1) / w->box * w->box : len; /* sm_90a: whole boxes (rows past len masked) */
    for (int j = first * bn; j < end * bn && j < lim; j++) {
        int64_t page = w->table[b][j / w->page], row = j % w->page;
        for (int c = 0; c < w->dim / 8; c++)
            out[n++] = base + (uint64_t)(2 * (page * st[0] + h * st[1] + row * st[2]) + 16 * c);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_u64);
    return n;
}

static void check_cta(world *w, const fj_plan *pl, int b, int h, int s, uint64_t *want, const char *what)
{
    const uint64_t bases[2] = {BASE_K, BASE_V};
    const int64_t *strides[2] = {w->prm.base.k_stride, w->prm.base.v_stride};
    uint64_t *got[2] = {w->k_reads, w->v_reads};
    int ngot[2] = {w->n_k, w->n_v};
    for (int x = 0; x < 2; x++) {
        int n = expected(w, pl, b, h, s, bases[x], strides[x], want);
        qsort(got[x], (size_t)ngot[x], sizeof(uint64_t), cmp_u64);
        int bad = n != ngot[x];
        for (int i = 0; !bad && i < n; i++) bad = want[i] != got[x][i];
        if (bad) {
            int i = 0;
            while (i < n && i < ngot[x] && want[i] == got[x][i]) i++;
            fail_msg("%s: batch %d head %d split %d (len %d): %s copied %d chunks, want %d; first difference at "
                     "#%d: got 0x%llx want 0x%llx", what, b, h, s, seq_len(w, b),
                     x ? "V" : "K", ngot[x], n, i, i < ngot[x] ? (unsigned long long)got[x][i] : 0ull,
                     i < n ? (unsigned long long)want[i] : 0ull);
        }
    }
}

typedef struct launch_case {
    int ws; /* the sm_90a kernel (the heuristic's warps and schedule for the tile), else sm_80 */
    int block_m, block_n, stages, warps, dim;
    unsigned variant; /* PAGED and more; SPLIT added when splits > 1 */
    int batch, hkv, group, page, pages_per_seq, splits, seqlen_k;
    int lens[MAX_B]; /* used with FJ_VARIANT_SEQLENS */
} launch_case;
/* The sm_90a kernel: the producer thread (thread 0) of CTA x, which takes work tile x (query block fastest, then
 * the split, the head - the KV head when packed - and the batch); every barrier's bytes loaded by the end. */
static void run_ws_ctas(const prog *p, world *w, thread *t, const fj_plan *pl, unsigned n_tiles, uint64_t *want,
                        const char *what)
{
    unsigned nmb = w->tprm.tma.n_mblocks, heads = w->packed ? (unsigned)w->hkv : (unsigned)(w->hkv * w->group);
    for (unsigned x = 0; x < n_tiles; x++) {
        unsigned hb = x / nmb / (unsigned)w->splits, split = x / nmb % (unsigned)w->splits, h = hb % heads;
        w->cta_b = (int)(hb / heads), w->n_k = w->n_v = 0, w->n_bars = 0;
        t->ctaid[0] = x, t->ctaid[1] = t->ctaid[2] = 0, t->nctaid_x = n_tiles, t->tid = 0;
        if (!run_thread(p, t, w)) fail_msg("%s: CTA %u (tile of batch %d): %s", what, x, w->cta_b, w->why);
        for (int i = 0; i < w->n_bars; i++)
            if (w->bar_bytes[i]) fail_msg("%s: CTA %u: barrier +%u ends %lld bytes off", what, x, w->bar_addr[i],
                                          (long long)w->bar_bytes[i]);
        check_cta(w, pl, w->cta_b, (int)(w->packed ? h : h / (unsigned)w->group), (int)split, want, what);
    }
}

static void run_case(const launch_case *lc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = lc->dim, .block_m = lc->block_m,
                        .block_n = lc->block_n, .stages = lc->stages, .swizzle = 128, .warps = lc->warps, .col_warps = 1,
                        .overlap = -1, .pingpong = -1};
    if (lc->ws) {
        cfg = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = lc->dim,
                             .block_m = lc->block_m, .block_n = lc->block_n, .stages = lc->stages};
        fj_config_heuristic(&cfg, &cfg, NULL, 0);
    }
    unsigned variant = lc->variant | (lc->splits > 1 ? FJ_VARIANT_SPLIT : 0);
    fj_plan pl;
    char what[200];
    if (fj_plan_build_variant(&cfg, variant, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);

    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->batch = lc->batch, w->hkv = lc->hkv, w->group = lc->group, w->splits = lc->splits, w->page = lc->page;
    w->pages_per_seq = lc->pages_per_seq, w->dim = lc->dim, w->use_lens = (variant & FJ_VARIANT_SEQLENS) != 0;
    w->packed = (variant & FJ_VARIANT_PACK) != 0;
    memcpy(w->lens, lc->lens, sizeof w->lens);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    int hq = lc->hkv * lc->group, pool_pages = lc->batch * lc->pages_per_seq;
    a.dtype = FAJIT_DTYPE_BF16, a.batch = lc->batch, a.heads_q = hq, a.heads_kv = lc->hkv, a.seqlen_q = 1;
    a.seqlen_k = lc->seqlen_k, a.head_dim = lc->dim;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    int64_t qs[3] = {(int64_t)hq * lc->dim, lc->dim, lc->dim};
    int64_t ks[3] = {(int64_t)lc->hkv * lc->page * lc->dim, (int64_t)lc->page * lc->dim, lc->dim}; /* [pages][H][ps][D] */
    int64_t vs[3] = {(int64_t)lc->page * lc->hkv * lc->dim, lc->dim, (int64_t)lc->hkv * lc->dim}; /* [pages][ps][H][D] */
    (void)pool_pages;
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, vs, sizeof vs);
    fj_forward_params(&a, &pl, &w->prm.base);
    w->prm.seqlens_k = w->use_lens ? BASE_LENS : 0;
    w->prm.part_o = BASE_WS, w->prm.part_lse = BASE_WS + (1u << 30);
    w->prm.splits = (uint32_t)lc->splits, w->prm.batch = (uint32_t)lc->batch;
    w->prm.block_table = BASE_TABLE, w->prm.max_pages = (uint32_t)lc->pages_per_seq;
    w->prm.page_size = (uint32_t)lc->page;
    for (int b = 0; b < lc->batch; b++) /* pages of the pool in a scrambled order; -1 past what is filled */
        for (int i = 0; i < MAX_PAGES; i++) {
            int filled = (seq_len(w, b) + lc->page - 1) / lc->page;
            w->table[b][i] = i < filled ? (b * lc->pages_per_seq + i) * 7 % (lc->batch * lc->pages_per_seq) : -1;
        }
    while ((lc->page & (lc->page - 1)) == 0 && (1 << w->prm.page_shift) < lc->page) w->prm.page_shift++;

    w->cap = 1 << 16;
    w->k_reads = calloc((size_t)w->cap, 8), w->v_reads = calloc((size_t)w->cap, 8);
    uint64_t *want = calloc((size_t)w->cap, 8);
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1), .nctaid_x = 1};
    assert_true(w->k_reads && w->v_reads && want && t.val && t.known);
    int heads_grid = w->packed ? lc->hkv : hq;
    if (lc->ws) run_ws_ctas(&p, w, &t, &pl, ws_setup(w, &pl, &a), want, what);
    for (int z = 0; z < lc->batch * lc->splits && !lc->ws; z++)
        for (int y = 0; y < heads_grid; y++) {
            w->cta_b = z / lc->splits, w->n_k = w->n_v = 0;
            t.ctaid[0] = 0, t.ctaid[1] = (unsigned)y, t.ctaid[2] = (unsigned)z;
            for (unsigned tid = 0; tid < (unsigned)pl.threads; tid++) {
                t.tid = tid;
                if (!run_thread(&p, &t, w)) fail_msg("%s: CTA (0, %d, %d) thread %u: %s", what, y, z, tid, w->why);
            }
            check_cta(w, &pl, z / lc->splits, w->packed ? y : y / lc->group, z % lc->splits, want, what);
        }
    printf("PASS %-62s B%d splits %d page %d: %ld block-table reads\n", what, lc->batch, lc->splits, lc->page,
           w->table_reads);
    assert_int_equal(w->bad_reads, 0);
    free(t.val), free(t.known), free(want), free(w->k_reads), free(w->v_reads), free(w), free(p.v);
}

/* ---- the cases -------------------------------------------------------------------------------------------- */
#define PAGED FJ_VARIANT_PAGED
#define LENS FJ_VARIANT_SEQLENS
#define GATHER (FJ_VARIANT_PAGED | FJ_VARIANT_GATHER)
#define AHEAD FJ_VARIANT_AHEAD

/* Whole-tile pages (page a multiple of block_n): lengths 0, 1, a tile, a page, page + 1, pages x 3 - 1; 2 and 3
 * stages; split counts that leave empty splits; read at the copy and a tile ahead. */
static void test_whole_pages(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++)
        for (int stages = 2; stages <= 3; stages++) {
            launch_case lc = {.block_m = 64, .block_n = 32, .stages = stages, .warps = 4, .dim = 64,
                              .variant = PAGED | LENS | (ahead ? AHEAD : 0), .batch = 4, .hkv = 2, .group = 1,
                              .page = 64, .pages_per_seq = 4, .splits = 3, .seqlen_k = 256,
                              .lens = {0, 1, 64, 191}};
            run_case(&lc);
            lc.lens[0] = 32, lc.lens[1] = 65, lc.lens[2] = 256, lc.lens[3] = 33;
            run_case(&lc);
            lc.splits = 1;
            run_case(&lc);
            lc.lens[0] = -3, lc.lens[1] = 1000, lc.splits = 2; /* clamped to 0 and to seqlen_k */
            run_case(&lc);
            lc.variant &= ~(unsigned)LENS, lc.splits = 5, lc.seqlen_k = 160; /* one length: 5 tiles in 5 splits */
            run_case(&lc);
        }
}

/* Gathered from 16-row segments (pages smaller than the tile, partial last pages), a segment per pass and
 * several passes per segment (rows per pass 8 with 4 warps at d128), pages read at the copy and ahead (each
 * segment's page and row in it worked out a tile before its copy), pages of 16, 48 and 80 rows. */
static void test_gathered(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++)
        for (int dim = 64; dim <= 128; dim += 64) {
            launch_case lc = {.block_m = 64, .block_n = 64, .stages = 2, .warps = 4, .dim = dim,
                              .variant = GATHER | LENS | (ahead ? AHEAD : 0), .batch = 4, .hkv = 1, .group = 1,
                              .page = 16, .pages_per_seq = 12, .splits = 2, .seqlen_k = 192,
                              .lens = {1, 17, 64, 150}};
            run_case(&lc);
            lc.splits = 1, lc.lens[0] = 100, lc.lens[1] = 79, lc.lens[2] = 145, lc.lens[3] = 191; /* partial last tiles */
            run_case(&lc);                                                     /* copied after a full one */
            lc.splits = 2;
            lc.page = 48, lc.pages_per_seq = 4, lc.lens[0] = 0, lc.lens[1] = 48, lc.lens[2] = 129, lc.lens[3] = 192;
            run_case(&lc); /* pages of 48 (not a power of two: the division path) */
            lc.stages = dim == 64 ? 3 : 2, lc.splits = 4; /* d128 s3 with the gather ahead has no registers */
            run_case(&lc);
            lc.page = 80, lc.pages_per_seq = 3, lc.splits = 3; /* a page past the tile, straddled: rows in it to 79 */
            run_case(&lc);
        }
}

/* GQA packing: a CTA per KV head (its pages at that head's offset in the pool); and GQA without packing. */
static void test_packed(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++) {
        launch_case lc = {.block_m = 64, .block_n = 64, .stages = 2, .warps = 4, .dim = 128,
                          .variant = PAGED | FJ_VARIANT_PACK | LENS | (ahead ? AHEAD : 0), .batch = 2, .hkv = 2,
                          .group = 4, .page = 64, .pages_per_seq = 5, .splits = 2, .seqlen_k = 320,
                          .lens = {200, 320}};
        run_case(&lc);
        lc.variant |= FJ_VARIANT_GATHER, lc.page = 32, lc.pages_per_seq = 10;
        run_case(&lc);
        lc.variant &= ~(unsigned)FJ_VARIANT_PACK; /* not packed: a CTA per query head, KV head = h / group */
        run_case(&lc);
    }
}

/* The sm_90a kernel (producer thread only; TMA boxes of min(page, block_n) rows): pages of a tile or more (one
 * box at the row in the page) and pages smaller than the tile (a box per page), partial and empty last tiles,
 * lengths 0, 1, clamped, split-KV with empty splits, GQA packed and not, seqlens_k or the capacity only. */
static void sm90_cases(void)
{
    static const int pages[][3] = {{64, 64, 4}, {128, 64, 2}, {16, 128, 16}, {48, 96, 6}, {32, 64, 8}};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        launch_case lc = {.ws = 1, .block_m = 128, .block_n = pages[i][1], .stages = 2, .dim = 128,
                          .variant = PAGED | LENS, .batch = 4, .hkv = 2, .group = 1, .page = pages[i][0],
                          .pages_per_seq = pages[i][2], .splits = 3, .seqlen_k = pages[i][0] * pages[i][2] - 5,
                          .lens = {0, 1, 129, 1000}};
        run_case(&lc);
        lc.lens[0] = 17, lc.lens[1] = -4, lc.lens[2] = pages[i][0], lc.lens[3] = 2 * pages[i][0] + 1, lc.splits = 1;
        run_case(&lc);
        lc.variant = PAGED | FJ_VARIANT_PACK | LENS, lc.group = 4, lc.splits = 2;
        run_case(&lc);
        lc.variant = PAGED, lc.dim = 64, lc.group = 2, lc.splits = 4; /* capacity only: the last tile's tail */
        run_case(&lc);
    }
}

static void test_sm90(void **state)
{
    (void)state;
    unsetenv("FAJIT_KV_ORDER");
    sm90_cases();
}

/* The same with the KV tiles walked descending (plan.kv_desc, FAJIT_KV_ORDER=desc): the same rows and pages, each
 * box at its row's place, the page read ahead for the tile below. */
static void test_sm90_desc(void **state)
{
    (void)state;
    setenv("FAJIT_KV_ORDER", "desc", 1);
    sm90_cases();
    unsetenv("FAJIT_KV_ORDER");
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sm90),
        cmocka_unit_test(test_sm90_desc),
        cmocka_unit_test(test_whole_pages),
        cmocka_unit_test(test_gathered),
        cmocka_unit_test(test_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
