/*
 * test_decode_ws_ptx.c - the warp-specialized (sm_90a) kernel's decode variants (per-sequence KV lengths,
 * split-KV, both) compile with the runtime's compiler for sm_90a (fj_compile_kernel: NVRTC whole-program
 * for the setmaxnreg kernels, as the runtime does): no error, no warning, no spill or stack, no
 * "Potential Performance Loss" (wgmma serialized; fj_test_ptxas_log), over the heuristic's sm_90a tiles
 * for head dims 64 / 128 / 256 (two and three consumer warpgroups, O staged in its own buffer and in the V
 * ring), causal and not. Structure: the variant reads the decode fields at kernel_abi.h's offsets in
 * fj_fwd_params_tma_decode, the split writes fp32 partials (st.global.v2.f32) and never the O tensor map,
 * the seqlens variant zero-fills a sequence's last V tile past its length before V full,
 * the plain kernel reads no decode field; paged K/V (over page sizes 16-256, the block_n the runtime picks for
 * each) loads TMA boxes at block-table pages with a register byte count; the plan refuses gathered segments and
 * pages read ahead on sm_90a. tests/test_gpu_decode.c runs them on a GPU (FAJIT_DECODE_SM90=1 and the default rule).
 * label ptxas; skips without NVRTC / nvJitLink. Run: ctest --test-dir build -R test_decode_ws_ptx --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/async.h"
#include "codegen/codegen.h"
#include "codegen/kernel_abi.h"
#include "fajit.h"
#include "runtime/compile.h"
#include "runtime/cuda_api.h"
#include "test_support.h"

/* The sm_90a heuristic's tile for a decode-like shape (B1 Hq8 Hkv1, Nq 16, Nk 512k), head_dim d. */
static fajit_config ws_config(int d, int causal, int block_m)
{
    fajit_config c = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = d, .causal = causal,
                      .block_m = block_m};
    fajit_shape shape = {1, 8, 1, 16, 512 * 1024};
    fj_config_heuristic(&c, &c, &shape, 0);
    return c;
}

/* "ld.param.<type> %reg, [fajit_fwd_param_0+<off>]" appears in ptx. */
static int reads_param(const char *ptx, int off)
{
    char needle[64];
    snprintf(needle, sizeof needle, "[" FJ_FWD_PARAM_NAME "+%d]", off);
    return strstr(ptx, needle) != NULL;
}

#define DEC_OFF(field) ((int)offsetof(fj_fwd_params_tma_decode, dec.field))

static char *gen(const fj_plan *p, size_t *len)
{
    char *ptx = NULL;
    if (fj_generate_ptx_plan(p, 0, &ptx, len) != FAJIT_OK) fail_msg("generate: %s", fajit_errmsg());
    return ptx;
}

/* Compile with the runtime's compiler; 1 when clean (printed either way). */
static int compiles_clean(const fj_plan *p, const char *ptx, size_t len, const char *text)
{
    void *cubin = NULL;
    size_t size = 0;
    char *log = NULL;
    fajit_status st = fj_compile_kernel(p, ptx, len, "sm_90a", &cubin, &size, &log);
    free(cubin);
    fj_ptxas_report rep = fj_test_ptxas_log(log ? log : "");
    int ok = st == FAJIT_OK && rep.entries > 0 && !rep.bad;
    printf("%s %s: %d registers, spill %d, stack %d%s\n", ok ? "ok  " : "FAIL", text, rep.registers, rep.spill,
           rep.stack, st != FAJIT_OK ? fajit_errmsg() : rep.warned ? " (warning / Potential Performance Loss)" : "");
    if (!ok && log) printf("%s\n", log);
    free(log);
    return ok;
}

/* The tile a decode variant runs on: c, or c with block_n lowered by 16 until the variant's registers fit
 * (what the runtime does: decode.c). 0 when none plans. */
static int variant_tile(fajit_config *c, unsigned variant, fj_plan *p)
{
    for (; c->block_n >= 16; c->block_n -= 16)
        if (fj_plan_build_variant(c, variant, p) == FAJIT_OK) return 1;
    return 0;
}

static void test_ws_variants_compile(void **state)
{
    (void)state;
    enum { L = FJ_VARIANT_SEQLENS, S = FJ_VARIANT_SPLIT, P = FJ_VARIANT_PACK };
    static const unsigned variants[] = {L, S, L | S, P, L | P, L | S | P};
    /* the heuristic's tiles (block_n 0) and a few others: 3 stages, a narrow block_n, 3 consumer warpgroups */
    static const int tiles[][4] = {{64, 128, 0, 0},  {128, 128, 0, 0}, {256, 128, 0, 0}, {64, 192, 0, 0},
                                   {128, 128, 128, 3}, {128, 128, 64, 2}, {128, 192, 64, 2}};
    int failures = 0, n = 0, staged_in_ring = 0, own_stage = 0;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
                fajit_config c = ws_config(tiles[t][0], causal, tiles[t][1]);
                if (tiles[t][2]) c.block_n = tiles[t][2], c.stages = tiles[t][3];
                fj_plan p;
                char text[200];
                fajit_config_format(&c, text, sizeof text);
                if (fj_plan_build(&c, &p) != FAJIT_OK) fail_msg("plain plan %s: %s", text, fajit_errmsg());
                if (!variant_tile(&c, variants[v], &p)) fail_msg("no block_n plans %s 0x%x", text, variants[v]);
                fj_plan_format(&p, text, sizeof text);
                assert_int_equal(p.params_bytes, (int)sizeof(fj_fwd_params_tma_decode));
                staged_in_ring += fj_ws_o_staged(&p) == 2; /* the seqlens-only ones: a TMA-store epilogue */
                own_stage += fj_ws_o_staged(&p) == 1;
                size_t len = 0;
                char *ptx = gen(&p, &len);
                failures += !compiles_clean(&p, ptx, len, text);
                free(ptx);
                n++;
            }
    printf("%d sm_90a decode variants compiled (O through a TMA store staged in its own buffer: %d, in the V ring: %d; "
           "the others store from registers), %d failed\n", n, own_stage, staged_in_ring, failures);
    assert_int_equal(n, 84);
    assert_true(own_stage > 0 && staged_in_ring > 0);
    assert_int_equal(failures, 0);
}

/* The split variant reads splits / seqlens_k / part_o / part_lse at fj_fwd_params_tma_decode's offsets, writes
 * fp32 partial rows and not through the O tensor map; the plain kernel reads none of the decode fields. */
static void test_ws_split_structure(void **state)
{
    (void)state;
    fajit_config c = ws_config(128, 1, 128);
    fj_plan plain, split;
    assert_int_equal(fj_plan_build(&c, &plain), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_SEQLENS | FJ_VARIANT_SPLIT, &split), FAJIT_OK);
    size_t la = 0, lb = 0;
    char *a = gen(&plain, &la), *b = gen(&split, &lb);
    int offs[] = {DEC_OFF(seqlens_k), DEC_OFF(part_o), DEC_OFF(part_lse), DEC_OFF(splits)};
    for (size_t i = 0; i < 4; i++) {
        assert_true(reads_param(b, offs[i]));
        assert_false(reads_param(a, offs[i]));
    }
    assert_int_equal(DEC_OFF(seqlens_k), (int)sizeof(fj_fwd_params_tma) + (int)sizeof(fj_fwd_params));
    assert_non_null(strstr(b, "st.global.v2.f32"));
    assert_null(strstr(a, "st.global.v2.f32"));
    assert_non_null(strstr(a, "cp.async.bulk.tensor.4d.global.shared"));
    assert_null(strstr(b, "cp.async.bulk.tensor.4d.global.shared")); /* no TMA store: partials from registers */
    assert_non_null(strstr(b, "ld.global.nc.u32")); /* seqlens_k[b] */
    /* the V tail: a sequence's last V tile on its own barrier (+ smem_bytes - 8), zero-filled past the length by
     * the producer (16-byte stores), fenced for wgmma, then V full by a plain arrive */
    char init[96];
    snprintf(init, sizeof init, "+%d], 1;", split.vtail_bar);
    /* (a split stores O from registers: the plain kernel's O staging is not planned - its own buffer, or here, with O
     * in the V ring, the O free barrier - so the split's smem is the plain kernel's less that, plus the V tail's
     * barrier) */
    assert_int_equal(plain.o_stage, 2);
    assert_int_equal(split.o_stage, 0);
    assert_int_equal(split.vtail_bar, plain.smem_bytes - 8);
    assert_int_equal(split.smem_bytes, split.vtail_bar + 8);
    assert_non_null(strstr(b, init));
    assert_non_null(strstr(b, "st.shared.v4.b32"));
    assert_null(strstr(a, "st.shared.v4.b32"));
    assert_non_null(strstr(b, "fence.proxy.async.shared::cta;\n\tmbarrier.arrive.shared::cta.b64"));
    assert_int_equal(plain.vtail_bar, 0);
    free(a);
    free(b);
}

/* GQA packing: Q comes as one box per 64 columns whose byte count is a register (group x Nq x row bytes from
 * the parameters), from head hkv x group, row 0; O and LSE rows go out from registers (no TMA store). */
static void test_ws_pack_structure(void **state)
{
    (void)state;
    fajit_config c = ws_config(128, 1, 128);
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_PACK, &p), FAJIT_OK);
    size_t len = 0;
    char *ptx = NULL, line[160] = "";
    assert_int_equal(fj_generate_ptx_plan(&p, 1, &ptx, &len), FAJIT_OK);
    const char *q = strstr(ptx, "GQA packing: Q box");
    assert_non_null(q);
    const char *tx = strstr(q, "mbarrier.arrive.expect_tx");
    assert_non_null(tx);
    snprintf(line, sizeof line, "%.*s", (int)strcspn(tx, ";"), tx);
    assert_non_null(strstr(strrchr(line, ','), "%r")); /* the byte count: a register, not an immediate */
    assert_true(reads_param(ptx, (int)offsetof(fj_fwd_params, group)));
    assert_null(strstr(ptx, "cp.async.bulk.tensor.4d.global.shared"));
    assert_non_null(strstr(ptx, "st.global.b32"));
    free(ptx);
}

/* Gathered page segments and pages read ahead stay on the sm_80 kernel: the sm_90a plan refuses them, naming what
 * it takes. */
static void test_ws_refuses_gather(void **state)
{
    (void)state;
    fajit_config c = ws_config(128, 1, 128);
    fj_plan p;
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_PAGED | FJ_VARIANT_GATHER, &p), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "gather"));
    assert_non_null(strstr(fajit_errmsg(), "paged K/V"));
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_PAGED | FJ_VARIANT_AHEAD, &p), FAJIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(fajit_errmsg(), "ahead"));
}

/* The runtime's block_n rule for paged K/V (fj_ws_page_fits): the tile divides the page or the page the tile. */
static void test_ws_page_fits(void **state)
{
    (void)state;
    assert_true(fj_ws_page_fits(0, 176));
    assert_true(fj_ws_page_fits(64, 128) && fj_ws_page_fits(256, 128) && fj_ws_page_fits(16, 128));
    assert_true(fj_ws_page_fits(48, 96) && fj_ws_page_fits(48, 48) && fj_ws_page_fits(48, 16));
    assert_false(fj_ws_page_fits(48, 128) || fj_ws_page_fits(48, 64) || fj_ws_page_fits(96, 64));
    assert_false(fj_ws_page_fits(64, 0));
}

/* The paged variant: K and V come as TMA boxes whose 4th coordinate is a block-table entry (ld.global.nc of
 * block_table + (b x max_pages + page) x 4), the barrier expects a register byte count (only the segments below
 * the length are loaded), and a sequence's last V tile goes through the V-tail barrier (zero fill past the
 * length) even without seqlens_k; the plain kernel reads none of the paged fields. */
static void test_ws_paged_structure(void **state)
{
    (void)state;
    fajit_config c = ws_config(128, 0, 128);
    fj_plan plain, paged;
    assert_int_equal(fj_plan_build(&c, &plain), FAJIT_OK);
    assert_int_equal(fj_plan_build_variant(&c, FJ_VARIANT_PAGED, &paged), FAJIT_OK);
    size_t la = 0, lb = 0;
    char *a = gen(&plain, &la), *b = NULL;
    assert_int_equal(fj_generate_ptx_plan(&paged, 2, &b, &lb), FAJIT_OK);
    int offs[] = {DEC_OFF(block_table), DEC_OFF(max_pages), DEC_OFF(page_size)};
    for (size_t i = 0; i < 3; i++) {
        assert_true(reads_param(b, offs[i]));
        assert_false(reads_param(a, offs[i]));
    }
    assert_non_null(strstr(b, "ld.global.nc.u32"));
    assert_null(strstr(a, "ld.global.nc.u32"));
    /* K's segments: the register byte count, then per segment the table entry and its boxes */
    const char *seg = strstr(b, "paged: segments");
    assert_non_null(seg);
    const char *tx = strstr(seg, "mbarrier.arrive.expect_tx"), *entry = strstr(seg, "ld.global.nc.u32"),
               *load = strstr(seg, "cp.async.bulk.tensor.4d.shared::cluster.global");
    assert_true(tx && entry && load && tx < entry && entry < load);
    char line[200], page[16];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(tx, ";"), tx);
    assert_non_null(strstr(strrchr(line, ','), "%r"));
    snprintf(page, sizeof page, "%.*s", (int)strcspn(strchr(entry, '%'), ","), strchr(entry, '%'));
    snprintf(line, sizeof line, "%.*s", (int)strcspn(load, ";"), load);
    assert_non_null(strstr(line, page)); /* the entry is the box's page coordinate */
    int boxes = 0;
    for (const char *q = seg; (q = strstr(q + 1, "cp.async.bulk.tensor.4d.shared::cluster.global")) &&
                              q < strstr(seg, "V(j)");)
        boxes++;
    assert_int_equal(boxes, paged.tma_boxes); /* one box per 64 columns, in a loop over the segments */
    assert_int_equal(paged.vtail_bar, plain.smem_bytes);
    assert_non_null(strstr(b, "st.shared.v4.b32"));
    assert_null(strstr(a, "st.shared.v4.b32"));
    free(a);
    free(b);
}

/* Paged K/V over the page sizes 16 .. 256: each takes the block_n the runtime picks (decode.c: the variant's
 * tile, block_n lowered by 16 until it plans and fj_ws_page_fits); the distinct tiles compile clean. */
static void test_ws_paged_compile(void **state)
{
    (void)state;
    enum { L = FJ_VARIANT_SEQLENS, S = FJ_VARIANT_SPLIT, P = FJ_VARIANT_PACK, G = FJ_VARIANT_PAGED };
    static const unsigned variants[] = {G, L | G, S | G, L | S | G, P | G, L | S | P | G};
    static const int pages[] = {16, 32, 48, 64, 128, 256}, dims[] = {64, 128, 256};
    char done[128][200];
    int n_done = 0, failures = 0, tried = 0;
    for (size_t d = 0; d < 3; d++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
                for (size_t g = 0; g < sizeof pages / sizeof pages[0]; g++) {
                    fajit_config c = ws_config(dims[d], causal, 128);
                    fj_plan p;
                    while (c.block_n >= 16 &&
                           (!fj_ws_page_fits(pages[g], c.block_n) || fj_plan_build_variant(&c, variants[v], &p)))
                        c.block_n -= 16;
                    if (c.block_n < 16) fail_msg("d%d 0x%x page %d: no block_n", dims[d], variants[v], pages[g]);
                    tried++;
                    char text[200];
                    fj_plan_format(&p, text, sizeof text);
                    int seen = 0;
                    for (int i = 0; i < n_done && !seen; i++) seen = !strcmp(done[i], text);
                    if (seen) continue; /* the PTX does not depend on the page size, only the tile does */
                    assert_true(n_done < 128);
                    snprintf(done[n_done++], sizeof done[0], "%s", text);
                    size_t len = 0;
                    char *ptx = gen(&p, &len);
                    failures += !compiles_clean(&p, ptx, len, text);
                    free(ptx);
                }
    printf("%d paged (page size, variant, tile) cases: %d distinct sm_90a kernels compiled, %d failed\n", tried, n_done,
           failures);
    assert_int_equal(tried, 216);
    assert_true(n_done >= 36); /* page 48 takes a narrower tile than the powers of two */
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ws_split_structure),
                                       cmocka_unit_test(test_ws_pack_structure),
                                       cmocka_unit_test(test_ws_refuses_gather),
                                       cmocka_unit_test(test_ws_page_fits),
                                       cmocka_unit_test(test_ws_paged_structure),
                                       cmocka_unit_test(test_ws_variants_compile),
                                       cmocka_unit_test(test_ws_paged_compile)};
    const fj_nvjitlink_api *jl;
    const fj_nvrtc_api *rtc;
    if (fj_nvjitlink_load(&jl) != FAJIT_OK) fj_test_skip_all("nvJitLink not loadable: %s", fajit_errmsg());
    if (fj_nvrtc_load(&rtc) != FAJIT_OK) fj_test_skip_all("NVRTC not loadable: %s", fajit_errmsg());
    return cmocka_run_group_tests_name("decode_ws_ptx", tests, NULL, NULL);
}
