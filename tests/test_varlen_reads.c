/*
 * test_varlen_reads.c - which global memory the varlen kernels read and write (label unit; no GPU, no ptxas), through
 * the PTX interpreter of ptx_sim.c: the sm_80 kernel, every thread of every CTA - its Q / K / V copies and its O and LSE
 * stores are exactly its sequence's rows (empty, length-1, clamped and decreasing-pair sequences, packed or batched keys);
 * the sm_90a kernel over a persistent grid of 3 CTAs, producer and consumers - its Q / K / V boxes through the packed
 * maps (clipped at each sequence's end as TMA clips) exactly each tile's rows, its O TMA stores and LSE stores exactly
 * the sequences' rows, the tiles past their sequence's end skipped, every barrier's bytes.
 * Run: ctest --test-dir build -R test_varlen_reads --output-on-failure
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

static int vl_len(const int32_t *cu, int b, int cap)
{
    int n = cu[b + 1] - cu[b];
    return n < 0 ? 0 : n > cap ? cap : n;
}

/* The KV tiles row block m0 of sequence b visits (the kernels' KV range): n_end. */
static int vl_n_end(const world *w, const fj_plan *pl, int b, int m0, int lq, int lk)
{
    int bn = pl->cfg.block_n, tiles = (lk + bn - 1) / bn;
    if (!pl->cfg.causal) return tiles;
    int last = m0 + pl->cfg.block_m - 1 + lk - lq, n = ((last < -1 ? -1 : last) + 1 + bn - 1) / bn;
    (void)w, (void)b;
    return n < tiles ? n : tiles;
}

/* Append what row block mb of (b, h) must touch: its Q rows, the K / V rows of its KV range (the sm_90a kernel's
 * batched keys: whole tiles within the capacity), its O words and LSE floats. */
static void vl_expect(const world *w, const fj_plan *pl, int b, int h, int mb, uint64_t *q, int *nq, uint64_t *k,
                      int *nk, uint64_t *o, int *no, uint64_t *l, int *nl)
{
    const fj_fwd_params *pr = &w->prm.base;
    int bm = pl->cfg.block_m, lq = vl_len(w->cu_q, b, w->cap_q), m0 = mb * bm, hkv = h / w->group;
    int lk = w->varlen_k ? vl_len(w->cu_k, b, w->cap_k) : w->cap_k;
    if (m0 >= lq) return;
    for (int r = m0; r < m0 + bm && r < lq; r++) {
        int64_t t = w->cu_q[b] + r;
        for (int c = 0; c < VL_DIM / 8; c++) q[(*nq)++] = BASE_Q + (uint64_t)(2 * (t * pr->q_stride[2] + h * pr->q_stride[1]) + 16 * c);
        for (int c = 0; c < VL_DIM; c += w->o_chunks ? 8 : 2) /* 16-byte chunks of a TMA store, else 4-byte words */
            o[(*no)++] = BASE_O + (uint64_t)(2 * (t * pr->o_stride[2] + h * pr->o_stride[1] + c));
        l[(*nl)++] = BASE_LSE + 4 * (uint64_t)(h * w->total_q + t);
    }
    int end = vl_n_end(w, pl, b, m0, lq, lk) * pl->cfg.block_n;
    int lim = w->ws && !w->varlen_k ? end : lk; /* batched keys on sm_90a: whole boxes inside the capacity */
    for (int j = 0; j < end && j < lim && j < w->cap_k; j++)
        for (int c = 0; c < VL_DIM / 8; c++) {
            int64_t e = w->varlen_k ? (w->cu_k[b] + j) * pr->k_stride[2] + hkv * pr->k_stride[1]
                                    : b * pr->k_stride[0] + hkv * pr->k_stride[1] + j * pr->k_stride[2];
            k[(*nk)++] = BASE_K + (uint64_t)(2 * e + 16 * c);
        }
}

/* got (sorted here) == want (sorted here): else fail naming what. */
static void vl_same(uint64_t *got, int ngot, uint64_t *want, int nwant, const char *what, const char *which)
{
    qsort(got, (size_t)ngot, sizeof *got, cmp_u64);
    qsort(want, (size_t)nwant, sizeof *want, cmp_u64);
    int i = 0;
    while (i < ngot && i < nwant && got[i] == want[i]) i++;
    if (i != ngot || i != nwant)
        fail_msg("%s: %s: %d accesses, want %d; first difference at #%d: got 0x%llx want 0x%llx", what, which, ngot,
                 nwant, i, i < ngot ? (unsigned long long)got[i] : 0ull, i < nwant ? (unsigned long long)want[i] : 0ull);
}

typedef struct varlen_case {
    int ws, causal, varlen_k, batch, group, hkv, cap_q, cap_k, ctas; /* ctas: the sm_90a persistent grid */
    int len_q[MAX_B], len_k[MAX_B];
} varlen_case;

static void run_varlen(const varlen_case *vc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = VL_DIM, .block_m = 64,
                        .block_n = 32, .stages = 2, .swizzle = 128, .warps = 4, .col_warps = 1, .overlap = -1,
                        .pingpong = -1, .causal = vc->causal};
    if (vc->ws) {
        cfg = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = VL_DIM, .block_m = 128,
                             .block_n = 64, .stages = 2, .causal = vc->causal};
        fj_config_heuristic(&cfg, &cfg, NULL, 0);
    }
    unsigned variant = FJ_VARIANT_VARLEN | (vc->varlen_k ? FJ_VARIANT_VARLEN_K : 0);
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
    int hq = vc->hkv * vc->group;
    w->varlen = 1, w->varlen_k = vc->varlen_k, w->batch = vc->batch, w->hkv = vc->hkv, w->group = vc->group;
    w->cap_q = vc->cap_q, w->cap_k = vc->cap_k, w->dim = VL_DIM, w->splits = 1;
    for (int b = 0; b < vc->batch; b++)
        w->cu_q[b + 1] = w->cu_q[b] + vc->len_q[b], w->cu_k[b + 1] = w->cu_k[b] + vc->len_k[b];
    w->total_q = w->cu_q[vc->batch];
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16, a.batch = vc->batch, a.heads_q = hq, a.heads_kv = vc->hkv, a.head_dim = VL_DIM;
    a.seqlen_q = vc->cap_q, a.seqlen_k = vc->cap_k, a.causal = vc->causal;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O, a.lse = BASE_LSE;
    int64_t qs[3] = {0, VL_DIM, (int64_t)hq * VL_DIM}, ks[3] = {0, VL_DIM, (int64_t)vc->hkv * VL_DIM};
    if (!vc->varlen_k) ks[0] = (int64_t)vc->cap_k * vc->hkv * VL_DIM; /* batched [B, cap_k, Hkv, D] */
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, ks, sizeof ks);
    fj_forward_params(&a, &pl, &w->prm.base);
    w->prm.cu_seqlens_q = BASE_CUQ, w->prm.cu_seqlens_k = vc->varlen_k ? BASE_CUK : 0;
    w->prm.splits = 1, w->prm.batch = (uint32_t)vc->batch;

    w->cap = 1 << 20;
    uint64_t *buf[9];
    for (int i = 0; i < 9; i++) assert_non_null(buf[i] = calloc((size_t)w->cap, 8));
    w->k_reads = buf[0], w->v_reads = buf[1], w->q_reads = buf[2], w->o_writes = buf[3], w->lse_writes = buf[4];
    uint64_t *wq = buf[5], *wk = buf[6], *wo = buf[7], *wl = buf[8];
    int nq = 0, nk = 0, no = 0, nl = 0, bm = pl.cfg.block_m, nmb = (vc->cap_q + bm - 1) / bm;
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1)};
    assert_true(t.val && t.known);
    if (!vc->ws) { /* every thread of every CTA (ceil(cap_q / block_m), Hq, B); causal blocks reversed */
        for (int z = 0; z < vc->batch; z++)
            for (int y = 0; y < hq; y++)
                for (int x = 0; x < nmb; x++) {
                    w->cta_b = z, w->n_k = w->n_v = w->n_q = w->n_o = w->n_lse = 0, nq = nk = no = nl = 0;
                    t.ctaid[0] = (unsigned)x, t.ctaid[1] = (unsigned)y, t.ctaid[2] = (unsigned)z, t.nctaid_x = (unsigned)nmb;
                    for (unsigned tid = 0; tid < (unsigned)pl.threads; tid++) {
                        t.tid = tid;
                        if (!run_thread(&p, &t, w)) fail_msg("%s: CTA (%d, %d, %d) thread %u: %s", what, x, y, z, tid, w->why);
                    }
                    vl_expect(w, &pl, z, y, vc->causal ? nmb - 1 - x : x, wq, &nq, wk, &nk, wo, &no, wl, &nl);
                    vl_same(w->q_reads, w->n_q, wq, nq, what, "Q chunks");
                    vl_same(w->k_reads, w->n_k, wk, nk, what, "K chunks");
                    vl_same(w->o_writes, w->n_o, wo, no, what, "O words");
                    vl_same(w->lse_writes, w->n_lse, wl, nl, what, "LSE floats");
                    for (int i = 0; i < nk; i++) wk[i] += BASE_V - BASE_K;
                    vl_same(w->v_reads, w->n_v, wk, nk, what, "V chunks");
                }
    } else { /* the producer thread of each of `ctas` persistent CTAs: every tile's loads, each once, over them all */
        ws_setup(w, &pl, &a);
        w->block_n = pl.cfg.block_n, w->cta_b = -1;
        for (int c = 0; c < vc->ctas; c++) {
            w->n_bars = 0;
            t.ctaid[0] = (unsigned)c, t.ctaid[1] = t.ctaid[2] = 0, t.nctaid_x = (unsigned)vc->ctas, t.tid = 0;
            if (!run_thread(&p, &t, w)) fail_msg("%s: CTA %d: %s", what, c, w->why);
            for (int i = 0; i < w->n_bars; i++)
                if (w->bar_bytes[i]) fail_msg("%s: CTA %d: barrier +%u ends %lld bytes off", what, c, w->bar_addr[i],
                                              (long long)w->bar_bytes[i]);
        }
        w->o_chunks = pl.o_stage != 0;
        for (int c = 0; c < vc->ctas; c++) /* the consumers: the epilogue's O and LSE stores */
            for (unsigned tid = 128; tid < (unsigned)pl.threads; tid++) {
                w->n_bars = 0;
                t.ctaid[0] = (unsigned)c, t.tid = tid;
                if (!run_thread(&p, &t, w)) fail_msg("%s: CTA %d consumer thread %u: %s", what, c, tid, w->why);
            }
        for (int z = 0; z < vc->batch; z++)
            for (int y = 0; y < hq; y++)
                for (int mb = 0; mb < nmb; mb++) vl_expect(w, &pl, z, y, mb, wq, &nq, wk, &nk, wo, &no, wl, &nl);
        vl_same(w->q_reads, w->n_q, wq, nq, what, "Q rows loaded");
        vl_same(w->o_writes, w->n_o, wo, no, what, w->o_chunks ? "O rows stored (TMA)" : "O words stored");
        vl_same(w->lse_writes, w->n_lse, wl, nl, what, "LSE floats stored");
        vl_same(w->k_reads, w->n_k, wk, nk, what, "K rows loaded");
        for (int i = 0; i < nk; i++) wk[i] += BASE_V - BASE_K;
        vl_same(w->v_reads, w->n_v, wk, nk, what, "V rows loaded");
    }
    printf("PASS %-62s B%d cap %d/%d%s\n", what, vc->batch, vc->cap_q, vc->cap_k, vc->ws ? " (every warpgroup)" : "");
    for (int i = 0; i < 9; i++) free(buf[i]);
    free(t.val), free(t.known), free(w), free(p.v);
}

/* Varlen: sequences of 0, 1, 17, a block and more, Nq != Nk both ways, a length past the cap (clamped) and a
 * decreasing pair (empty); packed or batched keys; sm_80 (every thread: Q / K / V copies, O and LSE stores exactly the
 * sequence's) and the sm_90a producer over a persistent grid of 3 CTAs (Q / K / V boxes, clipped by the packed maps,
 * exactly each tile's rows; the tiles past their sequence's end skipped; every barrier's bytes). */
static void test_varlen(void **state)
{
    (void)state;
    for (int ws = 0; ws <= 2; ws++) {
        if (ws == 2) setenv("FAJIT_KV_ORDER", "desc", 1); /* sm_90a again, KV tiles descending (plan.kv_desc) */
        for (int causal = 0; causal <= 1; causal++) {
            varlen_case vc = {.ws = ws > 0, .causal = causal, .varlen_k = 1, .batch = 5, .group = 2, .hkv = 1,
                              .cap_q = 140, .cap_k = 150, .ctas = 3, .len_q = {0, 1, 17, 140, 64},
                              .len_k = {5, 1, 150, 140, 0}};
            run_varlen(&vc);
            vc.len_q[0] = 200, vc.len_k[0] = 300; /* past the caps: clamped to 140 / 150 rows */
            vc.len_q[4] = 33, vc.len_k[4] = 70, vc.group = 1, vc.hkv = 2;
            vc.len_q[1] = -3, vc.len_k[1] = -1; /* a decreasing pair: an empty sequence (the next starts 3 rows back) */
            run_varlen(&vc);
            vc.varlen_k = 0; /* packed queries against a batched K / V of cap_k keys */
            run_varlen(&vc);
        }
    }
    unsetenv("FAJIT_KV_ORDER");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_varlen)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
