/*
 * variants.h - the attention variants of fajit_attention_forward on the host side: the SIZE_3 argument
 * fields (window, softcap, sinks, alibi_slopes, attention_chunk) read through struct_size, their rules, the
 * FAJIT_MOD_* bits of the kernel they need, and that kernel's fj_fwd_params_mods block (kernel_abi.h).
 * The code they generate is codegen/mask.c's.
 */
#ifndef FJ_VARIANTS_H
#define FJ_VARIANTS_H

#include "codegen/codegen.h"
#include "codegen/kernel_abi.h"
#include "fajit.h"

/* The variant fields as this library reads them (zeros where the caller's struct_size does not reach). */
typedef struct fj_variant_args {
    int window, window_left, window_right;
    float softcap;
    uint64_t sinks, alibi_slopes;
    int64_t alibi_slopes_batch_stride;
    int attention_chunk;
} fj_variant_args;
void fj_variant_read(const fajit_attention_args *args, fj_variant_args *v);

/* The rules of fajit.h's "Attention variants": FAJIT_ERR_INVALID_ARGUMENT naming the field, its value and the
 * rule. (cu_seqlens_q / cu_seqlens_k, varlen: decode.c's check_varlen_fields.) */
fajit_status fj_variant_validate(const fajit_attention_args *args);

/* The FAJIT_MOD_* bits a call needs (0: plain attention). */
int fj_variant_mods(const fajit_attention_args *args);

/* The scale the softmax exponentiates with (fj_fwd_params.scale_log2): softmax_scale x log2(e), or with a
 * softcap c, c x log2(e) (the kernel's scores are then tanh(s / c); kernel_abi.h). */
float fj_variant_scale_log2(const fajit_attention_args *args, double softmax_scale);

/* The parameter block of a launch of a kernel planned as `plan`: `own` (own_size bytes: the kernel's own
 * struct) itself for a plain kernel; for a variant kernel a copy of it in *blk with the fj_fwd_params_mods block
 * at plan->mods_off, and for an FP8 kernel the fj_fwd_params_fp8 block (descales) at plan->fp8_off. Returns what
 * kernelParams[0] points at. */
typedef struct fj_param_block {
    _Alignas(64) unsigned char bytes[sizeof(fj_fwd_params_tma_decode) + sizeof(fj_fwd_params_mods) +
                                     sizeof(fj_fwd_params_fp8) + 64];
} fj_param_block;
void *fj_variant_params(const fj_plan *plan, const fajit_attention_args *args, const void *own, size_t own_size,
                        fj_param_block *blk);

#endif
