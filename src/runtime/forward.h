/*
 * forward.h - pieces of fajit_attention_forward, exposed so they can be tested without a GPU.
 *
 * fajit_attention_forward = fj_forward_validate (no driver call) -> a kernel (the given config, or the
 * choice cached for the shape class, see fj_forward_class) -> fj_forward_params + fj_forward_grid ->
 * cuLaunchKernel with kernelParams = { &params } on args->stream.
 */
#ifndef FJ_FORWARD_H
#define FJ_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "codegen/kernel_abi.h"
#include "fajit.h"

#define FJ_GRID_YZ_MAX 65535 /* gridDim.y and gridDim.z limit: heads_q and batch */
/* Query rows (batch x heads_q x seqlen_q) at most: the kernels index LSE rows, and the launchers count work
 * tiles and rows, in 32 bits. */
#define FJ_QUERY_ROWS_MAX 4294967295LL
/* What fajit_args_set_bhnd_strides / _bnhd_strides store in every stride when one overflows 64 bits. */
#define FJ_STRIDE_OVERFLOW INT64_MIN
/* A tensor's last element lies at most this many bytes past its pointer (2^62: no device has more). */
#define FJ_TENSOR_SPAN_MAX (INT64_C(1) << 62)

/* Check every field of args (and that cfg, when given, agrees with them). Returns
 * FAJIT_ERR_INVALID_ARGUMENT with a message naming the field, its value and the rule. Touches no GPU. */
fajit_status fj_forward_validate(const fajit_attention_args *args, const fajit_config *cfg);

/* The kernel parameter block for validated args (scale_log2 = scale * log2(e), group = Hq / Hkv). */
void fj_forward_params(const fajit_attention_args *args, const fj_plan *plan, fj_fwd_params *p);

/* Launch grid: (ceil(seqlen_q / block_m), heads_q, batch); warp-specialized plans: (work tiles, 1, 1)
 * with work tiles = ceil(seqlen_q / block_m) * heads_q * batch, at most max_ctas (0 = no cap; the
 * persistent schedule of ws_frame.c: the launcher gives the SM count) - except for a causal kernel whose
 * uneven tiles that schedule would not share out evenly (the heaviest CTA more than 10% over the mean):
 * then one CTA per tile, balanced by the hardware's block scheduler. */
void fj_forward_grid(const fajit_attention_args *args, const fj_plan *plan, int max_ctas, unsigned grid[3]);
/* CTAs of a persistent launch over `tiles` work tiles: at most max_ctas (0 = no cap). */
unsigned fj_persistent_ctas(int max_ctas, unsigned tiles);
/* The persistent CTAs of a plan built for plan->min_ctas CTAs an SM: max_ctas (one an SM) times that; 0 stays 0 (no
 * cap). */
int fj_plan_max_ctas(const fj_plan *plan, int max_ctas);
/* 1 when a causal sliding window's call should take the dynamic schedule (sched = 1) with cfg's tiles on
 * max_ctas CTAs: the static one would leave its heaviest CTA over 4% above the mean and a work tile averages
 * 8 KV tiles or more (forward.c has the measurements). 0 for every other call and config. */
int fj_forward_window_lpt(const fajit_attention_args *args, const fajit_config *cfg, int max_ctas);
/* fajit_config_fill for a call: then, where fj_forward_window_lpt says so for the filled config (its sched left 0),
 * fill again from *cfg with sched = 1 (the tiles the heuristic gives lpt). The policy's and fagen bench's fill. */
fajit_status fj_forward_fill(fajit_context *ctx, const fajit_shape *shape, const fajit_attention_args *args,
                             fajit_config *cfg);

/* The parameter block of a warp-specialized kernel (the tensor maps are fj_tensor_maps'): the base
 * fields and the persistent schedule's counts. */
void fj_forward_params_tma(const fajit_attention_args *args, const fj_plan *plan, fj_fwd_params_tma *p);

/*
 * The shape class of args, for the per-context cache of heuristic choices: dtype, head_dim, causal and
 * the GQA group exactly, heads_q exactly, batch and both sequence lengths rounded up to powers of two.
 * Writes the key text (returns its length, like snprintf), and into *shape the representative shape
 * given to fajit_config_fill (the rounded-up sizes), so the choice does not depend on which shape of
 * the class came first.
 */
int fj_forward_class(const fajit_attention_args *args, char *key, size_t size, fajit_shape *shape);

/* The kernel for args without a given config on `path` (AUTO: the device's best): the choice cached for
 * the shape class and path, else fajit_config_fill and the kernel store - with a stand-in while the chosen
 * config compiles in the background, and nothing compiled in a CUDA-graph capture (policy.c). accurate = 1: a config
 * with the accurate softmax (fajit.h), for the sm_80 kernel that stands in for a given config that has it (the TMA
 * fallback, the decode features' sm_80 kernels); 0: the library's own choice. */
struct fajit_kernel;
fajit_status fj_forward_choose(fajit_context *ctx, const fajit_attention_args *args, fajit_arch path, int accurate,
                               fajit_kernel **kernel_out);

/* Set the calling thread's fajit_last_forward() text ("; while <config> compiles" appended when a stand-in ran
 * in this call) and its fajit_last_forward_source() (the last kernel fetched in the call; compiling: the config
 * a stand-in runs for, else NULL; a call with a stand-in reports FAJIT_SOURCE_FALLBACK). */
void fj_forward_set_last(const char *text);
void fj_forward_set_source(fajit_cache_source source, const fajit_config *compiling);

#endif
