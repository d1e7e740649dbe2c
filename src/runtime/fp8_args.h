/*
 * fp8_args.h - the FP8 arguments of fajit_attention_forward on the host side: the SIZE_4 fields of
 * fajit_attention_args (kv_dtype, out_dtype, q_descale / k_descale / v_descale, descale_batch_stride) read
 * through struct_size, and their rules (fajit.h, "FP8").
 */
#ifndef FJ_FP8_ARGS_H
#define FJ_FP8_ARGS_H

#include "fajit.h"

/* The FP8 fields as this library reads them (zeros where the caller's struct_size does not reach), with the
 * defaults resolved: kv_dtype = dtype when 0, out_dtype = BF16 for e4m3 inputs and dtype otherwise. */
typedef struct fj_fp8_args {
    fajit_dtype kv_dtype, out_dtype;
    fajit_dtype kv_dtype_given, out_dtype_given; /* as the caller wrote them (0 = default) */
    uint64_t q_descale, k_descale, v_descale;
    int64_t descale_batch_stride;
} fj_fp8_args;
void fj_fp8_read(const fajit_attention_args *args, fj_fp8_args *f);

/* 1 when the call reads or writes FP8 anywhere (dtype or kv_dtype e4m3). */
int fj_fp8_any(const fajit_attention_args *args);

/* Elements a row of tensor `which` ('q', 'k', 'v', 'o') must be aligned to: 16 bytes of its dtype. */
int fj_fp8_row_align(const fajit_attention_args *args, char which);

/* The rules of fajit.h's "FP8" (dtype values, head_dim, descales): FAJIT_ERR_INVALID_ARGUMENT naming the field,
 * the value and the rule. Strides are check_strides' (forward.c) with fj_fp8_row_align. */
fajit_status fj_fp8_validate(const fajit_attention_args *args);

/* An FP8 call (fj_fp8_any) the kernels cannot serve: FAJIT_ERR_UNSUPPORTED naming why (decode features, attention
 * variants; dtype e4m3), else FAJIT_OK. */
fajit_status fj_fp8_unsupported(const fajit_attention_args *args);
/* An FP8 K/V cache call (kv_dtype e4m3, dtype f16 / bf16) the kernels cannot serve: FAJIT_ERR_UNSUPPORTED naming
 * why (attention variants, varlen batches), else FAJIT_OK. */
fajit_status fj_fp8_kv_unsupported(const fajit_attention_args *args);

#endif
