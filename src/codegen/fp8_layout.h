/*
 * fp8_layout.h - the register and shared-memory layouts of the FP8 (e4m3) wgmma path on sm_90a, as data the
 * emitter (fp8_ws.c) reads and tests/test_fp8_layout.c checks against models of the PTX ISA's fragment figures.
 *
 * Two facts of wgmma.mma_async ... .e4m3.e4m3 (k = 32; PTX ISA 9.7.15.5.1):
 *  1. Both shared-memory operands must be K-major. O += P V has K = the keys, so V (TMA-loaded as [keys][head
 *     dims], head dims contiguous) is transposed in shared memory into Vt ([head dims][keys], keys contiguous)
 *     by the producer warpgroup: ldmatrix.trans (16-bit pairs) + prmt (the 2 x 2 byte blocks) + stmatrix.
 *  2. P comes from registers in the A layout of m64nNk32 for 8-bit types: thread (warp w, lane 4g + t) holds
 *     register 0 = row 16w + g, k = 4t .. 4t + 3 (bytes low to high); 1 = row + 8, same k; 2 = row, k = 16 + 4t
 *     .. 16 + 4t + 3; 3 = row + 8, likewise. S's fp32 accumulator gives the thread columns 8i + 2t, 8i + 2t + 1
 *     of the same rows instead. Rather than move bytes between threads, the k order of the PV product is
 *     permuted: A's k position p of a 32-key chunk holds key fj_fp8_p_key(p) = the key the thread already has,
 *     and Vt's key order is permuted the same way when it is written (its k position p holds that key's
 *     values). The product sums over k, so P V is unchanged; P costs one cvt per pair, V nothing extra.
 */
#ifndef FJ_FP8_LAYOUT_H
#define FJ_FP8_LAYOUT_H

/* The key (0..31, within a 32-key chunk of the KV tile) at k position p (0..31) of P's A fragment and of Vt. */
int fj_fp8_p_key(int p);

/* P's A register `reg` (0..3) of 32-key chunk `chunk`, byte `byte` (0..3, low to high): the index of the S
 * accumulator register (wgmma's m64nN f32 layout: register 4i + 2r + c = row g + 8r, column 8i + 2t + c) it is
 * converted from. */
int fj_fp8_p_src(int chunk, int reg, int byte);

/* The V transpose of one block of 16 keys x 32 head dims by one warp:
 *   ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {a0, a1, a2, a3}: lane l gives the address of row
 *     fj_fp8_ld_key(l) (a key, 0..15) at head-dim byte fj_fp8_ld_col(l) (0 or 16) of the block in V;
 *   d0 = prmt(a0, a1, FJ_FP8_PRMT_EVEN), d1 = prmt(a0, a1, FJ_FP8_PRMT_ODD), d2, d3 likewise from a2, a3;
 *   stmatrix.sync.aligned.m8n8.x4.shared.b16 {d0, d1, d2, d3}: lane l gives the address of Vt row
 *     fj_fp8_st_dim(l) (a head dim, 0..31) at key byte 0 of the block (16 bytes: k positions 0..15 of the block's
 *     16 keys, in fj_fp8_p_key's order within their 32-key chunk). */
int fj_fp8_ld_key(int lane);
int fj_fp8_ld_col(int lane);
int fj_fp8_st_dim(int lane);
#define FJ_FP8_PRMT_EVEN 0x6420
#define FJ_FP8_PRMT_ODD 0x7531

/* The byte offset of element (row, col) in a tile stored as TMA writes it with a swizzle span of `w` bytes (32, 64
 * or 128) and rows of `row_bytes` bytes: boxes of [rows][w] bytes, row r's 16-byte chunk c at r * w + 16 (c ^
 * ((r * w / 128) & (w / 16 - 1))) within its box. It is also wgmma's K-major canonical layout of that swizzle
 * mode (rows = M or N, columns = K bytes). */
int fj_fp8_swizzled(int row, int col, int rows, int w);

#endif
