/*
 * common.h - PTX text shared by every arch path: module header, entry signature, constants.
 * Format strings for fj_ins()/fj_line(); kept here so the PTX the generator writes can be grepped.
 */
#ifndef FJ_PTX_COMMON_H
#define FJ_PTX_COMMON_H

/* .version major.minor, .target, then the dynamic shared memory window */
#define PTX_MODULE_HEADER          \
    ".version %d.%d\n"             \
    ".target %s\n"                 \
    ".address_size 64\n"           \
    "\n"                           \
    ".extern .shared .align 1024 .b8 fj_smem[];\n"

/* one byte-array parameter laid out as struct fj_fwd_params or fj_fwd_params_tma (kernel_abi.h), named
 * as NVVM names an extern "C" kernel's first parameter (FJ_FWD_PARAM_NAME): entry name, alignment, size */
/* .minnctapersm 1: without it ptxas caps registers for occupancy (128 at 128 threads) and spills; with
 * .maxntid it also gives setmaxnreg the register count at entry it needs */
#define PTX_ENTRY_OPEN ".visible .entry %s(\n\t.param .align %d .b8 fajit_fwd_param_0[%d]\n)\n.maxntid %d, 1, 1\n.minnctapersm %d\n{\n"
#define PTX_ENTRY_CLOSE "}\n"

#define PTX_LD_PARAM_U64 "ld.param.u64 %s, [fajit_fwd_param_0+%d]"
#define PTX_LD_PARAM_U32 "ld.param.u32 %s, [fajit_fwd_param_0+%d]"
#define PTX_LD_PARAM_F32 "ld.param.f32 %s, [fajit_fwd_param_0+%d]"

#define PTX_F32_NEG_INF "0fFF800000"
#define PTX_F32_ZERO "0f00000000"
#define PTX_F32_LN2 "0f3F317218" /* ln(2): LSE = (m + log2 l) * ln 2 */

/* butterfly shuffle inside a quad / warp */
#define PTX_SHFL_BFLY "shfl.sync.bfly.b32 %s, %s, %d, 31, -1"
#define PTX_BAR_SYNC "bar.sync 0"

/* two f32 -> packed pair of f16 / bf16; the first source lands in the upper half */
#define PTX_CVT_PACK "cvt.rn.%sx2.f32 %s, %s, %s"

#endif
