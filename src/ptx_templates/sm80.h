/*
 * sm80.h - PTX instruction forms of the sm_80 path (PTX ISA 7.0+, .target sm_80):
 *   mma.sync.aligned.m16n8k16   (warp-level MMA, f16/bf16 in, f32 accumulate)   ISA 9.7.13.3
 *   ldmatrix.sync.aligned.m8n8  (four 8x8 b16 matrices from shared memory)       ISA 9.7.13.4.15
 *   cp.async.cg.shared.global   (16-byte async copy with zero fill, groups)       ISA 9.7.9.25
 * Each form assembles with ptxas 13.0 for sm_80 and sm_90a (checked by the ptxas test grid).
 */
#ifndef FJ_PTX_SM80_H
#define FJ_PTX_SM80_H

/* D = A * B + C; dtype string is "bf16" or "f16" (both operands) */
#define PTX_MMA_16816 \
    "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s}"

/* four 8x8 matrices; lane i supplies the row address of matrix i/8, row i%8 */
#define PTX_LDMATRIX_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%s, %s, %s, %s}, [%s+%d]"
#define PTX_LDMATRIX_X4_TRANS "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%s, %s, %s, %s}, [%s+%d]"

/* 16 bytes global -> shared; src_size < 16 zero-fills the rest (0 = a row past the tensor's end) */
#define PTX_CP_ASYNC_16 "cp.async.cg.shared.global [%s+%d], [%s+%d], 16, %s"
#define PTX_CP_ASYNC_COMMIT "cp.async.commit_group"
#define PTX_CP_ASYNC_WAIT "cp.async.wait_group %d"

#endif
