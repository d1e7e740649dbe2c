/*
 * fuzz_strides.c - libFuzzer target: fajit_args_set_bhnd_strides / _bnhd_strides on arbitrary shapes, then
 * the forward's argument checks (issue 21 item 2: heads or lengths near INT_MAX overflowed signed int in
 * the helpers). Input: byte 0 picks the layout (bit 0: BNHD) and whether the rest of the input overwrites
 * the grown fields (bit 1); then six raw int32s: batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
 * then, with bit 1, bytes copied over fajit_attention_args from struct_size on (decode, paged, varlen and
 * variant fields as later versions add them).
 * Checks: no crash or UB; the strides equal the exact products computed in 128 bits, or, when one of those
 * does not fit in 64 bits, every stride is INT64_MIN and the forward's checks refuse the args with a
 * message; args the checks accept have at most 2^32 - 1 query rows, heads and batch within the grid, and
 * fajit_attention_workspace_size (no context) returns a status without crashing.
 * Build and run: tests/fuzz/README.md.
 */
#include <stdint.h>
#include <string.h>

#include "fajit.h"
#include "fuzz.h"
#include "base/error.h"
#include "runtime/forward.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int32_t take_i32(const uint8_t **p, size_t *left)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        v = (v << 8) | (*left ? **p : 0u);
        if (*left) (*p)++, (*left)--;
    }
    return (int32_t)v;
}

__extension__ typedef __int128 wide; /* |int32|^3 < 2^93: exact */

/* The exact strides {n1 * n2 * d, n2 * d, d}; 0 when one leaves int64. */
static int exact(wide n1, wide n2, wide d, int64_t s[3])
{
    wide v[3] = {n1 * n2 * d, n2 * d, d};
    for (int i = 0; i < 3; i++) {
        if (v[i] > INT64_MAX || v[i] < INT64_MIN) return 0;
        s[i] = (int64_t)v[i];
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    int bnhd = data[0] & 1, grown = data[0] & 2;
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16;
    a.batch = take_i32(&p, &left), a.heads_q = take_i32(&p, &left), a.heads_kv = take_i32(&p, &left);
    a.seqlen_q = take_i32(&p, &left), a.seqlen_k = take_i32(&p, &left), a.head_dim = take_i32(&p, &left);
    a.q = 0x7f0000000000ull, a.k = 0x7f1000000000ull, a.v = 0x7f2000000000ull, a.o = 0x7f3000000000ull;
    (bnhd ? fajit_args_set_bnhd_strides : fajit_args_set_bhnd_strides)(&a);

    int64_t q[3], k[3];
    int fits = exact(bnhd ? a.seqlen_q : a.heads_q, bnhd ? a.heads_q : a.seqlen_q, a.head_dim, q) &&
               exact(bnhd ? a.seqlen_k : a.heads_kv, bnhd ? a.heads_kv : a.seqlen_k, a.head_dim, k);
    if (fits) {
        const int64_t wq[3] = {q[0], bnhd ? q[2] : q[1], bnhd ? q[1] : q[2]};
        const int64_t wk[3] = {k[0], bnhd ? k[2] : k[1], bnhd ? k[1] : k[2]};
        FUZZ_CHECK(memcmp(a.q_stride, wq, sizeof wq) == 0 && memcmp(a.o_stride, wq, sizeof wq) == 0);
        FUZZ_CHECK(memcmp(a.k_stride, wk, sizeof wk) == 0 && memcmp(a.v_stride, wk, sizeof wk) == 0);
    } else {
        for (int i = 0; i < 3; i++)
            FUZZ_CHECK(a.q_stride[i] == INT64_MIN && a.k_stride[i] == INT64_MIN && a.v_stride[i] == INT64_MIN &&
                       a.o_stride[i] == INT64_MIN);
    }
    if (grown && left) {
        size_t from = offsetof(fajit_attention_args, struct_size), n = sizeof a - from;
        memcpy((char *)&a + from, p, left < n ? left : n);
    }
    /* in a zeroed block as large as struct_size may say: bytes past the struct are read (a newer header's) */
    static _Alignas(16) unsigned char block[4096];
    memset(block, 0, sizeof block);
    memcpy(block, &a, sizeof a);
    const fajit_attention_args *in_block = (const fajit_attention_args *)(void *)block;
    fj_clear_error();
    fajit_status st = fj_forward_validate(in_block, NULL);
    if (!fits) FUZZ_CHECK(st != FAJIT_OK);
    if (st != FAJIT_OK) {
        FUZZ_CHECK(st == FAJIT_ERR_INVALID_ARGUMENT || st == FAJIT_ERR_UNSUPPORTED);
        FUZZ_CHECK(fajit_errmsg()[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(a.batch >= 1 && a.batch <= FJ_GRID_YZ_MAX && a.heads_q >= 1 && a.heads_q <= FJ_GRID_YZ_MAX);
    FUZZ_CHECK((long long)a.batch * a.heads_q * a.seqlen_q <= FJ_QUERY_ROWS_MAX);
    size_t bytes = 0;
    fajit_status ws = fajit_attention_workspace_size(NULL, in_block, NULL, &bytes);
    FUZZ_CHECK(ws == FAJIT_OK || fajit_errmsg()[0] != '\0');
    return 0;
}
