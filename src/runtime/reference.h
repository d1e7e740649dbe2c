/*
 * reference.h - reference forward attention, for checking generated kernels.
 *
 * Both references take the problem as a fajit_attention_args (dtype, shape, element strides, scale,
 * causal), so they follow exactly the semantics stated in fajit.h: GQA (query head h reads kv head
 * h / (Hq / Hkv)), causal masking aligned to the bottom right (query i sees keys j <= i + Nk - Nq),
 * rows that see no key give O = 0 and LSE = -inf, LSE in natural log of the scaled scores.
 *
 *  - fj_reference_cpu: float64 math over host arrays of f16 / bf16 bit patterns addressed with the
 *    args' strides (args->q/k/v/o/lse are ignored). Exact inputs, double accumulation: the ground
 *    truth. Uses several threads for larger problems.
 *  - fj_reference_gpu: a plain CUDA C kernel (fp32 math, one 8-thread group per query row inside a
 *    32-row tile) compiled at run time with NVRTC for the context's device, reading args->q/k/v on the
 *    device. For problems too large for the CPU (N = 16k, D = 256 takes well under a second).
 *
 * Outputs are always contiguous and unpadded: O is [B, Hq, Nq, D], LSE is [B, Hq, Nq].
 */
#ifndef FJ_REFERENCE_H
#define FJ_REFERENCE_H

#include <stdint.h>

#include "fajit.h"

/* Check the fields the references read: dtype F16/BF16, sizes >= 1, heads_q % heads_kv == 0,
 * head_dim >= 1 (and <= max_head_dim if that is > 0). Message names the field. */
fajit_status fj_reference_check_args(const fajit_attention_args *args, int max_head_dim);

/* The softmax scale the references use: args->softmax_scale, or 1/sqrt(head_dim) when it is 0. */
double fj_reference_scale(const fajit_attention_args *args);

/*
 * CPU float64 reference. q, k, v: host arrays of 16-bit elements (dtype args->dtype) addressed as
 * x[b*stride[0] + h*stride[1] + n*stride[2] + d]. o: B*Hq*Nq*D doubles; lse: B*Hq*Nq doubles, or NULL.
 * Blocks until done. Fails only on bad arguments or a host allocation failure.
 */
fajit_status fj_reference_cpu(const fajit_attention_args *args, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, double *o, double *lse);

/* The same with per-sequence KV lengths (fajit_attention_args.seqlens_k on the host): sequence b sees
 * keys [0, lens[b]) (clamped to [0, seqlen_k]), causal bottom-right aligned per sequence. lens NULL =
 * fj_reference_cpu. args->seqlens_k is ignored. */
fajit_status fj_reference_cpu_lens(const fajit_attention_args *args, const int32_t *lens, const uint16_t *q,
                                   const uint16_t *k, const uint16_t *v, double *o, double *lse);

/* Varlen batches (fajit.h: cu_seqlens_q / cu_seqlens_k) with the arrays on the host: q / o packed [total_q, Hq, D]
 * by cu_q (int32 [batch + 1]); k / v packed by cu_k likewise, or (cu_k NULL) batched by the args' strides (paged
 * caches: give them gathered); lens (NULL = none) is seqused_k. Lengths are clamped as the kernels clamp them
 * (fajit.h). o: total_q x Hq x head_dim doubles, row t of head h at (t x Hq + h) x head_dim; lse (may be NULL):
 * Hq x total_q doubles; total_q = cu_q[batch]. Elements of rows no sequence owns are left as they are. */
fajit_status fj_reference_cpu_varlen(const fajit_attention_args *args, const int32_t *cu_q, const int32_t *cu_k,
                                     const int32_t *lens, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                     double *o, double *lse);
/* The same with the attention variants (fajit.h): window, softcap and attention_chunk are read from args (through
 * struct_size), the sinks ([Hq]) and ALiBi slopes (args->alibi_slopes_batch_stride apart per batch) from the host
 * arrays given (NULL = none; args->sinks / alibi_slopes, device pointers, are not read). fj_reference_cpu and
 * fj_reference_cpu_lens read the args' window, softcap and chunk the same way. */
fajit_status fj_reference_cpu_variants(const fajit_attention_args *args, const int32_t *lens, const float *sinks,
                                       const float *alibi, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                       double *o, double *lse);
/* fj_reference_cpu_varlen with the attention variants: window, softcap and attention_chunk read from args as
 * fj_reference_cpu_variants reads them, sinks ([Hq]) and ALiBi slopes (sequence b's at alibi + b x
 * args->alibi_slopes_batch_stride) from the host arrays given (NULL = none). A sequence of no keys gives its rows
 * O = 0 and LSE = sinks[h] (-inf without sinks), as the dense reference's rows of no key. fj_reference_cpu_varlen
 * is this with sinks = alibi = NULL. */
fajit_status fj_reference_cpu_varlen_variants(const fajit_attention_args *args, const int32_t *cu_q,
                                              const int32_t *cu_k, const int32_t *lens, const float *sinks,
                                              const float *alibi, const uint16_t *q, const uint16_t *k,
                                              const uint16_t *v, double *o, double *lse);

/*
 * GPU fp32 reference on the device of ctx, on args->stream. Reads args->q, k, v (device pointers with
 * args' strides; args->seqlens_k, when set, is read as the per-sequence KV lengths); writes fp32 O (B*Hq*Nq*D floats) to o_f32 and fp32 LSE to lse_f32 (0 = none).
 * head_dim must be a multiple of 8 and at most 256. The NVRTC cubin is compiled once per process for
 * each (sm, head_dim); the module is loaded for the call and unloaded after it, so the call is
 * synchronous (it returns when the results are written). Needs NVRTC and libcuda.
 */
fajit_status fj_reference_gpu(fajit_context *ctx, const fajit_attention_args *args, uint64_t o_f32,
                              uint64_t lse_f32);

/* The GPU reference of a varlen batch (host arrays as fj_reference_cpu_varlen's; args' pointers on the device):
 * sequence b's fp32 outputs in a block of its own, O [Hq, len_b, D] at o_f32 + 4 x cu_q[b] x Hq x D bytes and LSE
 * [Hq, len_b] at lse_f32 + 4 x cu_q[b] x Hq (both sized total_q x Hq (x D)). One synchronous call per sequence. */
fajit_status fj_reference_gpu_varlen(fajit_context *ctx, const fajit_attention_args *args, const int32_t *cu_q,
                                     const int32_t *cu_k, const int32_t *lens, uint64_t o_f32, uint64_t lse_f32);

/* Compile (or find in the per-process cache) the GPU reference cubin for sm ("sm_90", ...) and
 * head_dim. Needs NVRTC only, no GPU: lets tests check the kernel source compiles, and callers warm
 * the cache before timing anything. */
fajit_status fj_reference_gpu_prepare(const char *sm, int head_dim);

/* The CUDA C source of the GPU reference kernel (for fagen explain-style dumps and the tests). */
const char *fj_reference_gpu_source(void);

#endif
