/*
 * test_sched.c - the varlen longest-first schedule's order and hand-out (src/codegen/sched.h) on the CPU: the host
 * mirror of the device's tile decode is a bijection onto (sequence, head, query block) with each section's blocks
 * from the last down; the empty tiles of a sequence form one run at the start of each section, which skip_end
 * names; and the counter protocol the producer threads run (atom.add, atom.max past an empty run, one tile taken
 * ahead), played over many CTAs in random interleavings, runs every tile that has rows exactly once and no other.
 * The section size (fj_sched_section_heads) holds whole GQA groups within the L2 budget.
 * label unit. Run: ctest --test-dir build -R test_sched --output-on-failure
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "codegen/sched.h"

static void test_section_heads(void **state)
{
    (void)state;
    /* 5301 keys of d128: 2.7 MB of K and V per KV head, 2 in 8 MB; x group 4 */
    /* (64 query blocks and a grid of 1 CTA: the L2 budget alone) */
    assert_int_equal(fj_sched_section_heads(32, 8, 5301, 128, 64, 1), 8);
    assert_int_equal(fj_sched_section_heads(32, 32, 1024, 64, 64, 1), 16);   /* short: 16 KV heads at most */
    assert_int_equal(fj_sched_section_heads(8, 8, 1024, 64, 64, 1), 8);      /* never more than heads_q */
    assert_int_equal(fj_sched_section_heads(64, 8, 1 << 20, 256, 64, 1), 8); /* one KV head when none fits: its group */
    assert_int_equal(fj_sched_section_heads(12, 4, 8192, 128, 64, 1), 6);    /* 2 KV heads x 3 */
    /* a section holds at least the grid's tiles: D256 N4k MHA (4 MB a head: 2 in the budget) of 32 blocks on 132
     * CTAs takes 8 heads (256 tiles), D128 N16k (8 MB: 1) of 128 blocks 2; never past every head */
    assert_int_equal(fj_sched_section_heads(8, 8, 4096, 256, 32, 132), 8);
    assert_int_equal(fj_sched_section_heads(16, 16, 4096, 256, 32, 132), 8);
    assert_int_equal(fj_sched_section_heads(16, 16, 16384, 128, 128, 132), 2);
    assert_int_equal(fj_sched_section_heads(16, 16, 16384, 128, 128, 128), 1);
    assert_int_equal(fj_sched_section_heads(4, 4, 4096, 256, 32, 1000), 4);
    assert_int_equal(fj_sched_section_heads(64, 8, 8192, 64, 43, 132), 32); /* GQA: the budget's 4 KV heads suffice */
    for (int hkv = 1; hkv <= 16; hkv++)
        for (int g = 1; g <= 8; g++)
            for (unsigned ctas = 1; ctas <= 1024; ctas *= 4) {
                int s = fj_sched_section_heads(hkv * g, hkv, 3000, 128, 24, ctas);
                assert_true(s >= g && s <= hkv * g && s % g == 0);
                assert_true(s == hkv * g || (unsigned)s * 24 >= ctas);
            }
}

/* The order: every (b, h, mb) once; within a section mb does not increase with t, and the heads of a block step
 * are side by side; tiles past a sequence's nblk blocks come first in their section and skip_end is the first that
 * runs. */
static void check_order(unsigned nmb, unsigned hq, unsigned sect, unsigned batch, const unsigned *nblk)
{
    unsigned n = nmb * hq * batch;
    unsigned char *seen = calloc(n, 1);
    assert_non_null(seen);
    for (unsigned t = 0; t < n; t++) {
        unsigned b, h, mb, end, b2, h2, mb2, end2;
        fj_sched_tile(t, nmb, hq, sect, nblk[t / (nmb * hq)], &b, &h, &mb, &end);
        assert_true(b < batch && h < hq && mb < nmb);
        unsigned id = (b * hq + h) * nmb + mb;
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
        int runs = mb < nblk[b];
        assert_int_equal(end == t, runs);
        if (!runs) { /* every tile in [t, end) is empty and of this sequence and section, end's runs (or ends it) */
            assert_true(end > t);
            for (unsigned u = t; u < end; u++) {
                fj_sched_tile(u, nmb, hq, sect, nblk[b], &b2, &h2, &mb2, &end2);
                assert_true(b2 == b && h2 / sect == h / sect && mb2 >= nblk[b] && end2 == end);
            }
            if (end < n) {
                fj_sched_tile(end, nmb, hq, sect, nblk[end / (nmb * hq)], &b2, &h2, &mb2, &end2);
                if (b2 == b && h2 / sect == h / sect) assert_true(mb2 < nblk[b]); /* the run's end runs */
            }
        }
        if (t + 1 < n) {
            fj_sched_tile(t + 1, nmb, hq, sect, nblk[(t + 1) / (nmb * hq)], &b2, &h2, &mb2, &end2);
            if (b2 == b && h2 / sect == h / sect) assert_true(mb2 <= mb && (mb2 < mb || h2 == h + 1));
        }
    }
    free(seen);
}

static void test_order(void **state)
{
    (void)state;
    const unsigned nblk[] = {3, 0, 1, 7, 7, 2};
    check_order(7, 32, 8, 6, nblk);
    check_order(7, 12, 8, 6, nblk); /* a last section of 4 heads */
    check_order(7, 5, 5, 6, nblk);
    check_order(7, 1, 1, 6, nblk);
    const unsigned one[] = {1};
    check_order(1, 3, 2, 1, one);
}

/* The producers' protocol (ws_frame.c + sched.c): take = atom.add; a tile past its sequence's end moves the counter to
 * its run's end (atom.max) and takes again; each CTA holds one index taken ahead. Random interleavings. */
static void test_protocol(void **state)
{
    (void)state;
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        unsigned batch = 1 + (unsigned)rand() % 9, hq = 1 + (unsigned)rand() % 12, nmb = 1 + (unsigned)rand() % 9;
        unsigned sect = 1 + (unsigned)rand() % hq, g = 1 + (unsigned)rand() % 40, nblk[9];
        for (unsigned b = 0; b < batch; b++) nblk[b] = (unsigned)rand() % 3 == 0 ? 0 : (unsigned)rand() % (nmb + 1);
        nblk[rand() % batch] = nmb; /* the longest sequence fills n_mblocks */
        unsigned n = nmb * hq * batch, counter = 0, ahead[40], done[40] = {0};
        unsigned char *runs = calloc(n, 1);
        assert_non_null(runs);
        for (unsigned c = 0; c < g; c++) ahead[c] = counter++; /* each producer's first fetch */
        for (unsigned live = g; live;) {
            unsigned c = (unsigned)rand() % g;
            if (done[c]) continue;
            unsigned t = ahead[c], b, h, mb, end;
            for (;;) { /* fj_sched_emit_resolve */
                if (t >= n) break;
                fj_sched_tile(t, nmb, hq, sect, nblk[t / (nmb * hq)], &b, &h, &mb, &end);
                if (end == t) break;
                if (counter < end) counter = end;
                t = counter++;
            }
            ahead[c] = counter++; /* the next one, taken ahead */
            if (t >= n) {
                done[c] = 1, live--;
                continue;
            }
            assert_true(mb < nblk[b]);
            assert_int_equal(runs[t], 0);
            runs[t] = 1;
        }
        for (unsigned t = 0; t < n; t++) {
            unsigned b, h, mb, end;
            fj_sched_tile(t, nmb, hq, sect, nblk[t / (nmb * hq)], &b, &h, &mb, &end);
            assert_int_equal(runs[t], mb < nblk[b]); /* every tile with rows ran, once */
        }
        free(runs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_section_heads), cmocka_unit_test(test_order),
                                       cmocka_unit_test(test_protocol)};
    return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
