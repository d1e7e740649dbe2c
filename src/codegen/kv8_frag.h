/*
 * kv8_frag.h - FP8 K/V cache decode with the MMA fragments built straight from the e4m3 tiles (kv8_frag.c; decode
 * variant KV8_DIRECT). The layout facts are functions and constants here so that tests/test_kv8_frag.c checks the
 * very numbers the emitter uses against the mma.sync / ldmatrix fragment layouts of the PTX ISA.
 */
#ifndef FJ_KV8_FRAG_H
#define FJ_KV8_FRAG_H

#include "backend.h"

/* prmt selectors (PTX ISA prmt: nibble i picks byte i of d from {a, b} bytes 0-7; bit 3 of a nibble replicates
 * the picked byte's sign bit). V's ldmatrix.trans word of keys (2t, 2t + 1) holds bytes {V[2t][2g], V[2t][2g + 1],
 * V[2t + 1][2g], V[2t + 1][2g + 1]}: the even-d MMA takes bytes 0 and 2, the odd-d MMA bytes 1 and 3. */
#define FJ_KV8D_SEL_V_EVEN_CVT 0x6420 /* {lo.b0, lo.b2, hi.b0, hi.b2}: keys 0-7's pair in the low half, 8-15's high */
#define FJ_KV8D_SEL_V_ODD_CVT 0x7531  /* {lo.b1, lo.b3, hi.b1, hi.b3} */
#define FJ_KV8D_SEL_V_EVEN_INT 0xA280 /* lanes {b0, sign(b0)}, {b2, sign(b2)} (kv8.c's integer widening) */
#define FJ_KV8D_SEL_V_ODD_INT 0xB391  /* lanes {b1, sign(b1)}, {b3, sign(b3)} */
#define FJ_KV8D_SEL_K_LO_INT 0x9180   /* K: lanes {b0, sign(b0)}, {b1, sign(b1)} */
#define FJ_KV8D_SEL_K_HI_INT 0xB3A2   /* K: lanes {b2, sign(b2)}, {b3, sign(b3)} */

/* The e4m3 tile: [rows][head_dim] bytes, the 16-byte chunk c of row r at chunk fj_kv8d_chunk(d, r, c). The XOR
 * term of row r (fj_kv8d_swz) makes 8 consecutive rows of one chunk hit 8 different 16-byte bank groups. */
int fj_kv8d_swz(int head_dim, int row);
int fj_kv8d_chunk(int head_dim, int row, int chunk);
/* The XOR term's mask (3 for d64's 64-byte rows, else 7): the part of a chunk index that is XORed in a lane base. */
int fj_kv8d_swz_mask(int head_dim);

/* ldmatrix lane patterns (lane i gives the row address of matrix i / 8, row i % 8): the tile row and chunk bit
 * lane `lane` addresses. K (.x4, no .trans): matrices (keys 0-7, chunk c), (0-7, c + 1), (8-15, c), (8-15, c + 1).
 * V (.x4.trans): (keys 0-7, chunk c), (8-15, c), (0-7, c + 1), (8-15, c + 1). */
void fj_kv8d_k_lane(int lane, int *row, int *chunk_bit);
void fj_kv8d_v_lane(int lane, int *row, int *chunk_bit);

/* Q's head-dim permutation: the A fragment register reg (0-3; m16n8k16's a0..a7 in pairs) of lane 4g + t holds, in
 * its half h (0 low, 1 high), Q[row g or g + 8][16 ks + fj_kv8d_q_dim(t, reg, h)] - the dim the B fragment built
 * from K's byte quad 4t..4t + 3 carries at that k index. */
int fj_kv8d_q_dim(int t, int reg, int half);

/* 1 for the head dims kv8direct is built for: 64, 128 and 256 (XOR-swizzled rows of a power of two bytes). */
int fj_kv8_direct_dim(int head_dim);

/* Plan: head_dim 64, 128 or 256 (else FAJIT_ERR_UNSUPPORTED), kv8_direct set, the smem map again (no 16-bit K / V
 * tile). */
fajit_status fj_kv8_direct_plan(fj_plan *p);

/* After the decode variant's registers are counted (plan.c): plan.qk_chains, 2 where a second S accumulator set fits
 * (the one-fragment decode tiles), else 1. */
void fj_kv8_direct_chains(fj_plan *p);

/* Kernel: the copy destinations and lane bases (after fj_kv8_setup_copy's r0 / c0), a copy's shared address
 * (register + immediate) for pass i, chunk j of tensor which (1 K, 2 V) in stage slot, Q's A fragments of fragment
 * mf and k-step ks into dst (4 registers, permuted dims), S = QK^T and O += PV from stage slot. */
void fj_kv8d_setup(fj_kctx *k, fj_reg_t r0, fj_reg_t c0);
fj_reg_t fj_kv8d_copy_dst(fj_kctx *k, int slot, int which, int i, int j, int *imm);
void fj_kv8d_q_frag(fj_kctx *k, fj_reg_t dst, int mf, int ks);
void fj_kv8d_mma_qk(fj_kctx *k, int slot);
void fj_kv8d_mma_pv(fj_kctx *k, int slot, int keys);

#endif
