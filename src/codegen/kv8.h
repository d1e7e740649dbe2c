/*
 * kv8.h - FP8 K/V cache on the sm_80 path (kv8.c): e4m3 K / V copies into their own ring, widened by each
 * copying thread into the 16-bit tiles before the tile's barrier, and the per-(batch, KV head) descales.
 */
#ifndef FJ_KV8_H
#define FJ_KV8_H

#include "backend.h"

/* log2 of the widened values' unit: -8 for f16 (folded into the softmax scale and O's factor), 0 for bf16. */
int fj_kv8_unit_log2(const fj_plan *p);
/* The same for tensor which (1 K, 2 V): they differ when a decode variant bit (KV8_INT_K / KV8_INT_V) keeps one
 * tensor's integer widening on a cvt target; fj_kv8_unit_log2 is K's. */
int fj_kv8_unit_log2_of(const fj_plan *p, int which);

/* Plan: 1 when copy_tpr threads a row (16-bit chunks) give an e4m3 layout (tpr / 2 threads a row of 16-element
 * chunks, whole passes in block_n); fj_kv8_plan_copy sets kv8_tpr / kv8_rows_per_pass; fj_kv8_smem appends the
 * e4m3 ring (stages x K, V tiles of block_n x head_dim bytes) to the plan's shared memory. */
int fj_kv8_copy_fits(const fj_plan *p, int tpr);
void fj_kv8_plan_copy(fj_plan *p);
void fj_kv8_smem(fj_plan *p);

/* Kernel: the per-thread copy terms (once, after the 16-bit layout's), the copy of K (which 1) or V (2) of
 * stage slot from gptr (rows >= rows_valid zero-filled), the widening of stage slot's K and V (after the
 * thread's cp.async.wait_group, before the barrier), and k->score_scale / k->o_scale from the descales. */
void fj_kv8_setup_copy(fj_kctx *k);
void fj_kv8_copy_tile(fj_kctx *k, int slot, int which, fj_reg_t gptr, fj_reg_t rows_valid);
void fj_kv8_widen(fj_kctx *k, int slot);
void fj_kv8_descales(fj_kctx *k, fj_reg_t b, fj_reg_t hkv);

/* Conversions kv8_frag.c shares: 1 when tensor which (1 K, 2 V) takes cvt.rn.f16x2.e4m3x2; the integer widening of
 * w's bytes picked by prmt selector sel into d (unit: fj_kv8_unit_regs, 2 registers, set for the bf16 widening);
 * the two b16 halves of w (e4m3 pairs) -> d0, d1 by cvt. */
int fj_kv8_widen_cvt(const fj_plan *p, int which);
fj_reg_t fj_kv8_unit_regs(fj_kctx *k);
void fj_kv8_widen_pair(fj_kctx *k, fj_reg_t d, fj_reg_t w, int sel, fj_reg_t unit);
void fj_kv8_cvt_word(fj_kctx *k, fj_reg_t d0, fj_reg_t d1, fj_reg_t w);
/* plan.kv8_f16: the bf16 Q fragments in registers -> f16 x 2^a (a from the warp's largest |q|), k->score_scale x 2^-a;
 * after fj_kv8_descales and the Q fragments' loads. */
void fj_kv8_q_to_f16(fj_kctx *k);

#endif
