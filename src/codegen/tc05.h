/*
 * tc05.h - the sm_100a tensor core (tcgen05) and tensor memory: descriptor encoders (pure functions, unit-tested
 * against values worked out by hand from the PTX ISA tables, tests/test_tc05.c) and one emitter per instruction
 * (src/ptx_templates/sm100.h). PTX ISA 9.1 sections:
 *   9.7.16.1.1   tensor memory address: lane in bits 31-16, column in 15-0; 128 lanes x 512 columns of 32 bits
 *   9.7.16.4.1   shared memory descriptor (Table 40): start >> 4 in 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
 *                0b001 in 46-48 (the sm_100 version field, which wgmma's descriptor lacks), base offset 49-51,
 *                LBO mode 52, swizzle in 61-63 (0 none, 1 128 B with 32 B atoms, 2 128 B, 4 64 B, 6 32 B)
 *   9.7.16.4.2   instruction descriptor of .kind::f16 (Table 42): D type in 4-5 (F32 = 1), A type 7-9 and B type
 *                10-12 (F16 = 0, BF16 = 1), transpose A 15 / B 16 (0 = K-major), N >> 3 in 17-22, M >> 4 in 24-28
 *   9.7.16.3.3   canonical layouts: K-major swizzled ((8,m),(T,2k)):((8T,SBO),(1,T)) - SBO = 8 rows of the swizzle
 *                span, LBO unused ("assumed 1"); MN-major swizzled ((T,S,m),(8,k)):((1,T,LBO),(ST,SBO)) - LBO
 *                between swizzle-span blocks along M / N, SBO between groups of 8 rows along K
 *   9.7.16.8.1   access restriction: warp w % 4 of a warpgroup reaches lanes 32 (w % 4) .. + 31 only
 *   9.7.16.2.3   32x32b: thread i of the warp moves lane (base + i), columns col .. col + x - 1 (one register each)
 *   9.7.16.10.5  layout D (M = 128, cta_group::1): row i of D is lane i, fp32 column j is column j
 * The swizzle field's values put 128 B / 64 B / 32 B at the same bits (62, 63, 62 + 63) as wgmma's 2-bit field
 * at 62-63, so a tile TMA writes for wgmma is read the same way here.
 */
#ifndef FJ_TC05_H
#define FJ_TC05_H

#include <stdint.h>

#include "backend.h"

/* The instruction descriptor of tcgen05.mma.kind::f16 with fp32 D: m 64 or 128, n a multiple of 8 (m 64) or 16
 * (m 128) in 8 / 16 .. 256; bf16 1 for BF16 A and B (0: F16); a_mn / b_mn 1 for an M- / N-major operand (0:
 * K-major; A read from tensor memory must be 0). 0 when the shape is not one the instruction takes. */
uint32_t fj_tc05_idesc_f16(int m, int n, int bf16, int a_mn, int b_mn);

/* The swizzle field (bits 61-63) of a span of `swizzle` bytes (0 = none, 32, 64, 128); -1 for another value. */
int fj_tc05_swizzle_field(int swizzle);

/* The shared memory descriptor of a matrix at shared address addr (16-byte aligned, its swizzle pattern starting
 * on a whole repeat, so base offset 0) with leading / stride byte offsets lbo, sbo (multiples of 16). */
uint64_t fj_tc05_sdesc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle);

/* A tensor memory address: lane << 16 | column. */
static inline uint32_t fj_tc05_taddr(int lane, int col) { return (uint32_t)lane << 16 | (uint32_t)col; }

/* The columns tcgen05.alloc takes for `used` columns: the next power of two from 32; 0 past 512. */
int fj_tc05_alloc_cols(int used);

/* ---- emitters (one instruction each; registers are the caller's) --------------------------------------- */
/* The whole warp: allocate ncols columns, the address written to smem + off; then give up the permit. */
void fj_tc05_alloc(fj_kctx *k, fj_reg_t smem, int off, int ncols);
void fj_tc05_dealloc(fj_kctx *k, fj_reg_t taddr, int ncols);
/* One thread: D[tmem + dcol] (+)= A x B. SS: A from a shared memory descriptor; TS: A from tensor memory at
 * tmem + acol. enable: "0", "1" or a predicate register's name (accumulate when true). */
void fj_tc05_mma_ss(fj_kctx *k, fj_reg_t tmem, int dcol, fj_reg_t adesc, fj_reg_t bdesc, fj_reg_t idesc,
                    const char *enable);
void fj_tc05_mma_ts(fj_kctx *k, fj_reg_t tmem, int dcol, int acol, fj_reg_t bdesc, fj_reg_t idesc, const char *enable);
/* One thread: arrive on the mbarrier at smem + off once its earlier MMAs are done. */
void fj_tc05_commit(fj_kctx *k, fj_reg_t smem, int off);
/* The warp: n (1..128, a power of two) consecutive columns from taddr + off into / out of registers r .. r + n - 1. */
void fj_tc05_ld(fj_kctx *k, fj_reg_t r, int n, fj_reg_t taddr, int off);
void fj_tc05_st(fj_kctx *k, fj_reg_t taddr, int off, fj_reg_t r, int n);

#endif
