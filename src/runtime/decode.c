/*
 * decode.c - per-sequence KV lengths and split-KV for fajit_attention_forward (see decode.h): the grown
 * argument fields and their rules, the split heuristic, the workspace, and the launches of the decode
 * variant and the combine kernel. On an sm_90a device a call runs the sm_90a kernel's own decode variants or
 * the sm_80 path's, as ctx->decode_sm90 and fj_decode_auto_sm90 decide (GQA packing past one row block always
 * on sm_80), and fajit_last_forward says which and why.
 */
#include "decode.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen/kernel_abi.h"
#include "codegen/sched.h"
#include "codegen/kv8_frag.h"
#include "context.h"
#include "tensor_map.h"
#include "base/error.h"
#include "policy.h"
#include "forward.h"
#include "fp8_args.h"
#include "tune.h"
#include "variants.h"

#define BAD(...) fj_fail(FAJIT_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define FJ_GRID_Z_MAX 65535
#define FJ_PART_ALIGN 256
/* The lpt schedule's tile counter (one u32) in a workspace: what fajit_attention_workspace_size asks for. */
#define FJ_LPT_WORKSPACE_BYTES 256
#define FJ_ARGS_STRUCT_SIZE_MAX 4096 /* struct_size at most (fajit.h) */

void fajit_attention_args_init(fajit_attention_args *args)
{
    if (!args) return;
    memset(args, 0, sizeof *args);
    args->struct_size = sizeof *args;
}

/* ---------------------------------------------------------------------------------------------------
 * The grown fields
 * ------------------------------------------------------------------------------------------------- */
size_t fj_args_size(const fajit_attention_args *a)
{
    return a->struct_size ? a->struct_size : FAJIT_ATTENTION_ARGS_SIZE_1;
}

void fj_decode_read(const fajit_attention_args *a, fj_decode_args *d)
{
    size_t n = fj_args_size(a);
    d->seqlens_k = a->seqlens_k;
    d->num_splits = a->num_splits;
    d->workspace = a->workspace;
    d->workspace_bytes = a->workspace_bytes;
    int paged = n >= FAJIT_ATTENTION_ARGS_SIZE_2;
    d->block_table = paged ? a->block_table : 0;
    d->max_pages = paged ? a->max_pages : 0;
    d->page_size = paged ? a->page_size : 0;
    int size3 = n >= FAJIT_ATTENTION_ARGS_SIZE_3;
    d->cu_seqlens_q = size3 ? a->cu_seqlens_q : 0;
    d->cu_seqlens_k = size3 ? a->cu_seqlens_k : 0;
}

int fj_decode_varlen(const fajit_attention_args *a)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    return d.cu_seqlens_q != 0;
}

/* The varlen variant bits of a call: VARLEN with cu_seqlens_q, VARLEN_K with cu_seqlens_k. */
static unsigned varlen_bits(const fj_decode_args *d)
{
    return (d->cu_seqlens_q ? FJ_VARIANT_VARLEN : 0u) | (d->cu_seqlens_k ? FJ_VARIANT_VARLEN_K : 0u);
}

/* cu_seqlens_q / cu_seqlens_k: aligned; keys packed only with packed queries and without a block table; no split-KV.
 * Not checkable without reading device memory (so not checked): the arrays hold batch + 1 non-decreasing entries
 * from 0, the last the packed tensors' row count, and no sequence is longer than seqlen_q / seqlen_k. The kernels
 * clamp each length to [0, seqlen_q] / [0, seqlen_k] (a decreasing pair is an empty sequence) and read or write at
 * most that many rows from the sequence's first (fajit.h). */
static fajit_status check_varlen_fields(const fajit_attention_args *a, const fj_decode_args *d)
{
    if (d->cu_seqlens_q % 4)
        return BAD("args->cu_seqlens_q = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to int32 [batch + 1]) "
                   "or 0", d->cu_seqlens_q);
    if (d->cu_seqlens_k % 4)
        return BAD("args->cu_seqlens_k = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to int32 [batch + 1]) "
                   "or 0", d->cu_seqlens_k);
    if (d->cu_seqlens_k && !d->cu_seqlens_q)
        return BAD("args->cu_seqlens_k = 0x%" PRIx64 " with args->cu_seqlens_q = 0: packed keys need packed queries "
                   "(give cu_seqlens_q too; for per-sequence key counts of a batched K/V use seqlens_k)",
                   d->cu_seqlens_k);
    if (d->cu_seqlens_k && d->block_table)
        return BAD("args->cu_seqlens_k = 0x%" PRIx64 " with a block table: paged keys are the pages; leave "
                   "cu_seqlens_k 0 and give each sequence's key count in seqlens_k", d->cu_seqlens_k);
    if (d->cu_seqlens_q && d->num_splits >= 2)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->num_splits = %d with cu_seqlens_q: split-KV of varlen batches is "
                                              "not built; use 0 (the library's choice) or 1", d->num_splits);
    (void)a;
    return FAJIT_OK;
}

/* block_table, max_pages, page_size: all or none, and the pages cover seqlen_k. */
static fajit_status check_paged_fields(const fajit_attention_args *a, const fj_decode_args *d)
{
    if (!d->block_table) {
        if (d->max_pages || d->page_size)
            return BAD("args->max_pages = %d, page_size = %d with args->block_table = 0: paged K/V needs the block "
                       "table (or leave both 0)", d->max_pages, d->page_size);
        return FAJIT_OK;
    }
    if (d->block_table % 4)
        return BAD("args->block_table = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to int32 "
                   "[batch][max_pages])", d->block_table);
    if (d->max_pages < 1) return BAD("args->max_pages = %d: must be >= 1 with a block table", d->max_pages);
    if (d->page_size < 16 || d->page_size % 16)
        return BAD("args->page_size = %d: must be a positive multiple of 16 keys", d->page_size);
    if ((long long)d->max_pages * d->page_size < a->seqlen_k)
        return BAD("args->max_pages = %d x page_size = %d = %lld keys: less than seqlen_k = %d", d->max_pages,
                   d->page_size, (long long)d->max_pages * d->page_size, a->seqlen_k);
    if ((long long)a->batch * d->max_pages > INT32_MAX)
        return BAD("args->max_pages = %d with batch = %d: the block table's %lld entries exceed 2^31 - 1", d->max_pages,
                   a->batch, (long long)a->batch * d->max_pages);
    return FAJIT_OK;
}

static fajit_status check_struct_size(const fajit_attention_args *a)
{
    size_t n = a->struct_size;
    if (n == 0) return FAJIT_OK;
    if (n < FAJIT_ATTENTION_ARGS_SIZE_1)
        return BAD("args->struct_size = %zu: must be 0 or at least %zu (FAJIT_ATTENTION_ARGS_SIZE_1); call "
                   "fajit_attention_args_init() to set it", n, (size_t)FAJIT_ATTENTION_ARGS_SIZE_1);
    /* the bytes past our struct are read (a newer header's fields must be 0): only as far as a struct can grow,
     * so a garbage size is refused instead of read past the caller's memory (test_api_contract) */
    if (n > FJ_ARGS_STRUCT_SIZE_MAX)
        return BAD("args->struct_size = %zu: more than %d, larger than any fajit_attention_args; call "
                   "fajit_attention_args_init() to set it", n, FJ_ARGS_STRUCT_SIZE_MAX);
    const unsigned char *bytes = (const unsigned char *)a;
    for (size_t i = sizeof *a; i < n; i++)
        if (bytes[i] != 0)
            return BAD("args->struct_size = %zu: byte %zu is not 0, but this libfajit knows the first %zu bytes "
                       "only (a field of a newer fajit.h; upgrade libfajit or leave it 0)", n, i, sizeof *a);
    return FAJIT_OK;
}

/* workspace and workspace_bytes: both or neither, an aligned pointer. */
static fajit_status check_workspace_fields(const fj_decode_args *d)
{
    if (d->workspace == 0 && d->workspace_bytes != 0)
        return BAD("args->workspace_bytes = %zu with args->workspace = 0: give both (the caller's workspace) or "
                   "neither (the context's)", d->workspace_bytes);
    if (d->workspace != 0 && d->workspace_bytes == 0)
        return BAD("args->workspace = 0x%" PRIx64 " with args->workspace_bytes = 0: give its size "
                   "(fajit_attention_workspace_size)", d->workspace);
    if (d->workspace % FJ_PART_ALIGN)
        return BAD("args->workspace = 0x%" PRIx64 ": must be %d-byte aligned", d->workspace, FJ_PART_ALIGN);
    return FAJIT_OK;
}

fajit_status fj_decode_validate(const fajit_attention_args *a)
{
    fajit_status st = check_struct_size(a);
    if (st != FAJIT_OK) return st;
    fj_decode_args d;
    fj_decode_read(a, &d);
    if (a->reserved0 != 0) return BAD("args->reserved0 = %d: must be 0", a->reserved0);
    if (d.seqlens_k % 4)
        return BAD("args->seqlens_k = 0x%" PRIx64 ": must be 4-byte aligned (a device pointer to int32 [batch]) or 0",
                   d.seqlens_k);
    if (d.num_splits < 0 || d.num_splits > FAJIT_MAX_SPLITS)
        return BAD("args->num_splits = %d: must be 0 (the heuristic), 1 (no split) or 2..%d", d.num_splits,
                   FAJIT_MAX_SPLITS);
    if ((long long)a->batch * (d.num_splits ? d.num_splits : 1) > FJ_GRID_Z_MAX)
        return BAD("args->num_splits = %d with batch = %d: batch x num_splits must be <= %d (the grid's z dimension)",
                   d.num_splits, a->batch, FJ_GRID_Z_MAX);
    if (d.num_splits >= 2 && (long long)a->batch * d.num_splits * a->heads_q * a->seqlen_q > INT32_MAX)
        return BAD("args->num_splits = %d: batch x num_splits x heads_q x seqlen_q = %lld partial rows exceed "
                   "2^31 - 1; use fewer splits",
                   d.num_splits, (long long)a->batch * d.num_splits * a->heads_q * a->seqlen_q);
    if ((st = check_workspace_fields(&d)) != FAJIT_OK) return st;
    if ((st = fj_variant_validate(a)) != FAJIT_OK) return st;
    if ((st = check_paged_fields(a, &d)) != FAJIT_OK) return st;
    return check_varlen_fields(a, &d);
}

int fj_decode_packs(const fajit_context *ctx, const fajit_attention_args *a)
{
    return ctx && ctx->pack_gqa && a->heads_q > a->heads_kv && a->seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q &&
           !fj_decode_varlen(a);
}

/* $FAJIT_KV8_WIDEN / $FAJIT_KV8_DIRECT (ctx->kv8_widen) name decode variant bits of the FP8 K/V kernels: with one
 * set, an FP8 K/V call runs the decode variant also where the plain kernel would (one split and no decode feature,
 * e.g. MHA Nk 1), so the knob reaches every call it names (test_gpu_fp8_decode expects its words in each text). */
/* 1 for a call with F16 / BF16 queries and an e4m3 K/V cache. */
static int kv8_cache(const fajit_attention_args *a)
{
    if (a->dtype == FAJIT_DTYPE_E4M3) return 0;
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    return f.kv_dtype == FAJIT_DTYPE_E4M3;
}

static int kv8_knob(const fajit_context *ctx, const fajit_attention_args *a)
{
    return ctx && ctx->kv8_widen && kv8_cache(a);
}

/* kv8direct by default ($FAJIT_KV8_DIRECT unset): an FP8 K/V decode call (seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q) at
 * a head dim kv8_frag.c builds takes the decode variant with the bit wherever its tile plans with it (decode_choose),
 * also where the plain kernel would run. Elsewhere (head_dim 96, ..., or no registers) the widening kernel. */
static int kv8_direct_auto(const fajit_context *ctx, const fajit_attention_args *a)
{
    return ctx && ctx->kv8_direct == -1 && a->seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q && fj_kv8_direct_dim(a->head_dim) &&
           kv8_cache(a);
}

int fj_decode_wanted(const fajit_context *ctx, const fajit_attention_args *a)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    return kv8_knob(ctx, a) || kv8_direct_auto(ctx, a) || a->seqlens_k != 0 || a->num_splits >= 2 || (a->num_splits == 0 && a->seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q) ||
           fj_decode_packs(ctx, a) || d.block_table != 0 || d.cu_seqlens_q != 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Splits and workspace
 * ------------------------------------------------------------------------------------------------- */
/* The heuristic's test of a grid: splitting pays when the CTAs fill less than 80% of the SMs. */
static int grid_underfills(long long ctas, int sm_count) { return ctas * 5 < (long long)sm_count * 4; }

/* Whether a call with num_splits = 0 looks at splitting at all (fj_decode_run): it uses a decode feature
 * (seqlens_k, packed GQA heads, paged K/V), or one row block per (batch, head) leaves SMs idle. Otherwise
 * the plain kernel runs without asking for the sm_80 one (on sm_90a that would compile it). */
static int split_considered(const fajit_context *ctx, const fajit_attention_args *a, int packed)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    return a->seqlens_k || packed || d.block_table || d.cu_seqlens_q ||
           grid_underfills((long long)a->heads_q * a->batch, ctx ? ctx->sm_count : 0);
}

long long fj_decode_ctas(const fajit_attention_args *a, int packed, int block_m)
{
    long long group = packed ? a->heads_q / a->heads_kv : 1;
    return (group * a->seqlen_q + block_m - 1) / block_m * (a->heads_q / group) * a->batch;
}

int fj_decode_split_fits(const fajit_attention_args *a, int splits)
{
    return splits >= 1 && splits <= FAJIT_MAX_SPLITS && (long long)a->batch * splits <= FJ_GRID_Z_MAX &&
           (long long)a->batch * splits * a->heads_q * a->seqlen_q <= INT32_MAX;
}

int fj_decode_splits(const fajit_attention_args *a, int packed, int block_m, int block_n, int sm_count)
{
    if (a->num_splits >= 1) return a->num_splits;
    if (a->seqlen_q > FJ_SPLIT_AUTO_MAX_SEQLEN_Q || sm_count < 1 || block_m < 1 || block_n < 1) return 1;
    long long ctas = fj_decode_ctas(a, packed, block_m);
    long long tiles = (a->seqlen_k + block_n - 1) / block_n;
    if (!grid_underfills(ctas, sm_count) || tiles < 4) return 1;
    long long max_s = tiles / 2, rows = (long long)a->batch * a->heads_q * a->seqlen_q;
    if (max_s > FJ_SPLIT_AUTO_MAX_SPLITS) max_s = FJ_SPLIT_AUTO_MAX_SPLITS;
    /* at most one split per SM for a row block: on the H200, B1 Hq8 Hkv1 Nk512k ran 4.5% slower at 264 splits
     * (two CTAs per SM) than at 128 and 3.7-4.6% slower than at 132 (fagen tune --grid decode). An FP8 K/V
     * cache's CTA (kv8.c: a third of the bytes a 16-bit tile's has in flight) takes two an SM: it needs the
     * second one's loads (B1 Hq8 Hkv1 512k: 264 splits 0.0454 ms, 132 0.0749, 528 0.0536; session 19) */
    int kv8 = kv8_cache(a), fp8 = a->dtype == FAJIT_DTYPE_E4M3;
    long long per_sm = kv8 ? 2 : 1;
    if (max_s > per_sm * sm_count) max_s = per_sm * sm_count;
    if (max_s > FJ_GRID_Z_MAX / a->batch) max_s = FJ_GRID_Z_MAX / a->batch;
    if (max_s > INT32_MAX / rows) max_s = INT32_MAX / rows;
    /* about two CTAs an SM; four for an FP8 K/V cache's one-fragment tile (br16: two warps a CTA, so the same
     * eight warps an SM). H200, bnhd, Nq 1 D128, fagen bench, 2-3 rounds (bench/results/h200-session19-2026-11-29.md):
     * GQA-packed B1 Hq32 Hkv8 128k 66 splits 0.0751 / 0.0751 ms against 33's 0.0771 / 0.0776, B8 Hq32 Hkv8 8k 8 splits
     * 0.0426 / 0.0424 against 4's 0.0429 / 0.0430; MHA B1 H16 64k 33 against 16 -4.7%, B1 H32 8k 16 against 8 -2.5%,
     * B2 H32 16k 8 against 4 -0.5%, B1 H32 32k 16 against 8 level in median but bimodal (0.0755 / 0.0781 / 0.0806
     * against 0.078); eight an SM (132, 16, 66 splits) was 3-8% slower than either */
    long long target = kv8 && block_m <= 16 ? 4 : 2;
    /* e4m3 queries: the sm_90a FP8 kernel, one persistent CTA an SM (its smem), so one work tile an SM */
    if (fp8) target = 1;
    long long s0 = (target * sm_count + ctas - 1) / ctas;
    if (s0 > max_s) s0 = max_s;
    int best = 1;
    double best_eff = 0.0;
    for (long long s = s0 / 2 > 1 ? s0 / 2 : 1; s <= s0; s++) { /* ties go to more splits */
        long long n = ctas * s, waves = (n + sm_count - 1) / sm_count;
        double eff = (double)n / (double)(waves * sm_count);
        if (eff >= best_eff) best_eff = eff, best = (int)s;
    }
    return best;
}

int fj_decode_splits_for(fajit_context *ctx, const fajit_attention_args *a, int packed, int block_m, int block_n,
                         int ctas_per_sm, int *from_tune)
{
    int tuned = 0, found = a->num_splits == 0 && a->seqlen_q <= FJ_SPLIT_AUTO_MAX_SEQLEN_Q &&
                           split_considered(ctx, a, packed) &&
                           fj_tune_decode_find(ctx, a, packed, block_m, block_n, &tuned) &&
                           fj_decode_split_fits(a, tuned);
    if (from_tune) *from_tune = found;
    return found ? tuned : fj_decode_splits(a, packed, block_m, block_n, ctx ? ctx->sm_count * ctas_per_sm : 0);
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t fj_decode_workspace_bytes(const fajit_attention_args *a, int splits, size_t *lse_offset)
{
    if (lse_offset) *lse_offset = 0;
    if (splits <= 1) return 0;
    size_t rows = (size_t)a->batch * (size_t)splits * (size_t)a->heads_q * (size_t)a->seqlen_q;
    size_t o_bytes = align_up(rows * (size_t)a->head_dim * 4, FJ_PART_ALIGN);
    if (lse_offset) *lse_offset = o_bytes;
    return o_bytes + align_up(rows * 4, FJ_PART_ALIGN);
}

fajit_status fj_decode_check_workspace(const fajit_attention_args *a, int splits)
{
    size_t need = fj_decode_workspace_bytes(a, splits, NULL);
    if (a->workspace == 0 || a->workspace_bytes >= need) return FAJIT_OK;
    return BAD("args->workspace_bytes = %zu: %d splits of batch %d x heads_q %d x seqlen_q %d rows need %zu bytes "
               "(fajit_attention_workspace_size)", a->workspace_bytes, splits, a->batch, a->heads_q, a->seqlen_q, need);
}

/* ---------------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------------- */
/* A kernel of the call on its stream. The combine kernel of a split (its plan has griddep: the target's
 * griddepcontrol, fj_plan_for_target) goes in by programmatic dependent launch where the context allows it
 * ($FAJIT_PDL) and the driver has cuLaunchKernelEx: it may start while the split kernel runs (which lets it, first
 * thing) and waits in griddepcontrol.wait for that grid's end and memory before it reads a partial, so the gap
 * between the two kernels and its own start-up overlap the split kernel's tail. */
static fajit_status launch(fajit_context *ctx, fajit_kernel *k, const unsigned grid[3], void *params, void *stream)
{
    void *kernel_params[1] = {params};
    fajit_status st = fj_context_push(ctx);
    if (st != FAJIT_OK) return st;
    fj_CUresult rc;
    const char *call = "cuLaunchKernel";
    if (ctx->pdl && k->plan.griddep && (k->plan.variant & FJ_VARIANT_COMBINE) && ctx->cu->cuLaunchKernelEx) {
        fj_CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = FJ_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_stream_serialization_allowed = 1;
        fj_CUlaunchConfig lc = {grid[0], grid[1], grid[2], (unsigned)k->plan.threads, 1, 1,
                                (unsigned)k->plan.smem_bytes, (fj_CUstream)stream, &attr, 1};
        call = "cuLaunchKernelEx";
        rc = ctx->cu->cuLaunchKernelEx(&lc, k->function, kernel_params, NULL);
    } else {
        rc = ctx->cu->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], (unsigned)k->plan.threads, 1, 1,
                                     (unsigned)k->plan.smem_bytes, (fj_CUstream)stream, kernel_params, NULL);
    }
    fj_context_pop(ctx);
    if (rc == FJ_CUDA_SUCCESS) return FAJIT_OK;
    fj_cuda_fail(rc, call);
    return fj_fail_context(FAJIT_ERR_CUDA, "kernel \"%s\", grid (%u, %u, %u), block %d, smem %d B", k->config_text,
                           grid[0], grid[1], grid[2], k->plan.threads, k->plan.smem_bytes);
}

/* The sm_80 kernel a decode variant starts from: k itself, or for a warp-specialized k the sm_80 path's
 * choice for the shape. */
static fajit_status sm80_base(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a, fajit_kernel **out)
{
    *out = k;
    if (!k->plan.ws) return FAJIT_OK;
    fajit_status st = fj_forward_choose(ctx, a, FAJIT_ARCH_SM80, k->plan.cfg.accurate, out); /* (keeps accurate) */
    return st == FAJIT_OK ? st : fj_fail_context(st, "decode variant: the sm_80 path's kernel");
}

/* The split partials' memory: the caller's workspace or the context's. */
static fajit_status workspace_for(fajit_context *ctx, const fajit_attention_args *a, int splits, fj_fwd_params_decode *p)
{
    size_t lse_off = 0, bytes = fj_decode_workspace_bytes(a, splits, &lse_off);
    fj_CUdeviceptr base = a->workspace;
    fajit_status st = fj_decode_check_workspace(a, splits);
    if (st == FAJIT_OK && !base) st = fj_context_workspace(ctx, bytes, &base);
    p->part_o = base;
    p->part_lse = base + lse_off;
    return st;
}

/* The heuristic's sm_80 config for a, with block_m / block_n given when > 0 (block_n: one column of warps). */
static fajit_config heuristic_sm80(const fajit_attention_args *a, int block_m, int block_n)
{
    fajit_config c = {.arch = FAJIT_ARCH_SM80, .dtype = a->dtype, .head_dim = a->head_dim, .causal = a->causal,
                      .block_m = block_m, .block_n = block_n, .col_warps = block_n ? 1 : 0,
                      .mods = fj_variant_mods(a)};
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    c.kv_dtype = f.kv_dtype_given; /* an FP8 K/V cache: its kernels' tiles (2+ stages, the e4m3 copy layout) */
    fajit_shape shape = {a->batch, a->heads_q, a->heads_kv, a->seqlen_q, a->seqlen_k};
    fj_config_heuristic(&c, &c, &shape, 0);
    return c;
}

/* A tile the variant's plan accepts: cfg itself when it plans (and, paged without gathering, page_size is a
 * multiple of its block_n), else the heuristic's sm_80 config with 64-row tiles and the largest block_n (a
 * multiple of 16, dividing page_size when paged without gathering) that plans with the variant - the
 * variants' registers (plan.c: FJ_VARIANT_REGS) push the widest tiles over the 255-register edge - with the
 * heuristic's warps, else with two or one 16-row fragments per warp (head_dim 96 copies [rows][96] tiles
 * only with fewer warps). */
static fajit_status variant_config(const fajit_attention_args *a, unsigned variant, int page_size, fajit_config *cfg)
{
    fj_plan p;
    int any_n = !page_size || (variant & FJ_VARIANT_GATHER);
    if ((any_n || page_size % cfg->block_n == 0) && fj_plan_build_variant(cfg, variant, &p) == FAJIT_OK)
        return FAJIT_OK;
    int widest = cfg->block_n > 64 ? cfg->block_n : 64;
    for (int bn = widest; bn >= 16; bn -= 16) {
        if (!any_n && page_size % bn) continue;
        for (int frags = 0; frags <= 2; frags++) {
            fajit_config c = heuristic_sm80(a, 64, bn);
            c.accurate = cfg->accurate; /* the given config's softmax, on the narrower tile */
            if (frags) c.warps = c.block_m / (16 * frags);
            if (fj_plan_build_variant(&c, variant, &p) != FAJIT_OK) continue;
            *cfg = c;
            return FAJIT_OK;
        }
    }
    if (page_size)
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->page_size = %d: no sm_80 tile of 16 to %d keys dividing it plans "
                                              "for head_dim %d with the decode features asked for",
                       page_size, widest, a->head_dim);
    return fj_plan_build_variant(cfg, variant, &p); /* its message: the rule the widest tile broke */
}

/* What a decode call runs: the variant bits, its tile and the splits on that tile. */
typedef struct decode_choice {
    unsigned variant;
    fajit_config cfg;
    int splits;
    int tuned; /* the splits are a tuned winner's (fagen tune --grid decode) */
    int ctas_per_sm; /* the variant kernel's (fj_plan_ctas_per_sm: 2 for FP8 occ2), which the split heuristic counts */
} decode_choice;

/* The splits of choice c on its tile (tuned: fj_decode_splits_for, the tuned winner first; else
 * fj_decode_splits), then its variant: v, less the split bit when it does not split. */
static void choose_splits(fajit_context *ctx, const fajit_attention_args *a, int packed, int tuned, unsigned v,
                          decode_choice *c)
{
    c->tuned = 0;
    if (v & FJ_VARIANT_VARLEN) { /* varlen batches do not split (check_varlen_fields refuses a forced count) */
        c->splits = 1;
        c->variant = v & ~(unsigned)FJ_VARIANT_SPLIT;
        return;
    }
    c->splits = tuned ? fj_decode_splits_for(ctx, a, packed, c->cfg.block_m, c->cfg.block_n, c->ctas_per_sm, &c->tuned)
                      : fj_decode_splits(a, packed, c->cfg.block_m, c->cfg.block_n, ctx->sm_count * c->ctas_per_sm);
    c->variant = c->splits > 1 ? v : v & ~(unsigned)FJ_VARIANT_SPLIT;
}

/* The choice for a call whose sm_80 kernel is k80: the tile from variant_config (every variant costs the
 * plan the same registers, so the tile does not depend on whether it splits), then the splits for that
 * tile's grid and the split bit (choose_splits).
 * Paged K/V gather their tiles from page segments when the page is smaller than the tile (or always), as
 * ctx->paged_gather says, and read each tile's pages a tile ahead (AHEAD) unless ctx->page_ahead is off or the
 * tile has one stage or no registers for it (the tile stays: the pages are then read at each copy). */
static fajit_status decode_choose(fajit_context *ctx, const fajit_kernel *k80, const fajit_attention_args *a,
                                  int packed, int tuned, int given, decode_choice *c)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    (void)given; /* the tile is k80's: the caller's config, or the heuristic's (its FP8 K/V decode tile: config.c) */
    int page = d.block_table ? d.page_size : 0;
    unsigned vl = varlen_bits(&d);
    unsigned v = (a->seqlens_k ? FJ_VARIANT_SEQLENS : 0) | (vl ? vl : FJ_VARIANT_SPLIT) | (packed ? FJ_VARIANT_PACK : 0) |
                 (page ? FJ_VARIANT_PAGED : 0);
    c->cfg = k80->plan.cfg;
    c->ctas_per_sm = 1;
    if (k80->plan.kv8) v |= ctx->kv8_widen; /* $FAJIT_KV8_WIDEN / _DIRECT=1: decode variant bits */
    if (page && !vl && !k80->plan.kv8 && (ctx->paged_gather == 2 || (ctx->paged_gather == 1 && page % c->cfg.block_n)))
        v |= FJ_VARIANT_GATHER; /* (varlen: whole tiles of a page, block_n dividing it) */
    fajit_status st = variant_config(a, v, page, &c->cfg);
    if (st != FAJIT_OK) return st;
    fj_plan p;
    if (k80->plan.kv8 && kv8_direct_auto(ctx, a) && fj_plan_build_variant(&c->cfg, v | FJ_VARIANT_KV8_DIRECT, &p) == FAJIT_OK)
        v |= FJ_VARIANT_KV8_DIRECT; /* the default where legal: on the variant's tile (else the widening kernel on it) */
    if (page && !vl && ctx->page_ahead && c->cfg.stages >= 2 &&
        fj_plan_build_variant(&c->cfg, v | FJ_VARIANT_AHEAD, &p) == FAJIT_OK) /* else no registers for it */
        v |= FJ_VARIANT_AHEAD;
    choose_splits(ctx, a, packed, tuned, v, c);
    return FAJIT_OK;
}

/* The kernels of a choice: the variant's, and with splits > 1 the combine kernel (else *kc stays NULL). */
static fajit_status variant_kernels(fajit_context *ctx, const decode_choice *ch, const fajit_attention_args *a,
                                    fajit_kernel **kv, fajit_kernel **kc)
{
    fj_fp8_args f;
    fj_fp8_read(a, &f); /* the combine writes O: e4m3 queries' O is out_dtype (bf16 / f16) */
    fajit_config cc = {.arch = FAJIT_ARCH_SM80, .dtype = f.out_dtype, .head_dim = a->head_dim};
    fajit_status st = fj_policy_get(ctx, &ch->cfg, ch->variant, a->stream, kv);
    if (st == FAJIT_OK && ch->splits > 1) st = fj_policy_get(ctx, &cc, FJ_VARIANT_COMBINE, a->stream, kc);
    return st;
}

/* One launch's text for fajit_last_forward: the variant kernel, its splits and the combine kernel. */
static void last_text(const fajit_kernel *kv, const fajit_kernel *kc, const decode_choice *ch, const char *note)
{
    char text[FJ_CONFIG_TEXT_MAX + 320];
    int n = snprintf(text, sizeof text, "%s", kv->config_text);
    if (ch->splits > 1 && n >= 0 && (size_t)n < sizeof text)
        n += snprintf(text + n, sizeof text - (size_t)n, " (%d splits%s) + %s", ch->splits, ch->tuned ? ", tuned" : "",
                      kc->config_text);
    if (note && n >= 0 && (size_t)n < sizeof text) snprintf(text + n, sizeof text - (size_t)n, "%s", note);
    fj_forward_set_last(text);
}

/* ---------------------------------------------------------------------------------------------------
 * The sm_90a kernel's decode variants (ctx->decode_sm90: where fj_decode_auto_sm90 says, or forced on / off)
 * ------------------------------------------------------------------------------------------------- */
int fj_decode_auto_sm90(const fajit_attention_args *a, int packed, int sm_count)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    if (d.block_table && d.page_size < FJ_WS_PAGE_MIN_AUTO) return 0;
    fajit_config c = heuristic_sm80(a, 0, 0);
    long long rows = (packed ? (long long)a->heads_q / a->heads_kv : 1) * a->seqlen_q;
    if (rows > c.block_m) return 1;
    fajit_attention_args h = *a; /* the heuristic's splits, also when the call forces a count: a shape keeps */
    h.num_splits = 0;             /* its path whatever split count fagen tune times on it */
    return fj_decode_ctas(&h, packed, c.block_m) * fj_decode_splits(&h, packed, c.block_m, c.block_n, sm_count) <=
           sm_count;
}

/* Whether the context's mode (ctx->decode_sm90) sends call a to the sm_90a variants; 0 with the reason in why. */
static int ws_mode_takes(const fajit_context *ctx, const fajit_attention_args *a, int packed, char *why, size_t size)
{
    if (ctx->decode_sm90 == 1) return 1;
    if (ctx->decode_sm90 == 0)
        return snprintf(why, size, "FAJIT_DECODE_SM90=0 keeps the decode features on the sm_80 path"), 0;
    if (fj_decode_auto_sm90(a, packed, ctx->sm_count)) return 1;
    return snprintf(why, size, "the sm_80 decode kernel's grid fills the %d SMs with its own rows, where it runs "
                               "faster (FAJIT_DECODE_SM90=1 takes the sm_90a variant)", ctx->sm_count), 0;
}

/* The choice for the warp-specialized kernel k: its tile, block_n lowered by 16 until the variant's registers
 * fit (plan.c: FJ_VARIANT_WS_REGS) and, paged, the page size fits it (fj_ws_page_fits), then the splits for that
 * tile as decode_choose takes them. GQA packing only when a KV head's group x seqlen_q rows fit one row block
 * (one Q box: tensor_map.c). 1 when the sm_90a variant takes the call; else 0 with the reason in why. */
static int ws_choose(fajit_context *ctx, const fajit_kernel *k, const fajit_attention_args *a, int packed,
                     int tuned, decode_choice *c, char *why, size_t size)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    fj_plan p;
    int fp8 = a->dtype == FAJIT_DTYPE_E4M3; /* FP8: the sm_90a kernel's variants only (no lpt: plan.c) */
    if (!fp8 && !ws_mode_takes(ctx, a, packed, why, size)) return 0;
    long long rows = (long long)a->heads_q / a->heads_kv * a->seqlen_q;
    if (packed && rows > k->plan.cfg.block_m && fp8)
        packed = 0; /* FP8 has no sm_80 kernel to pack them: query heads of their own */
    if (packed && rows > k->plan.cfg.block_m)
        return snprintf(why, size, "GQA packing of group %d x seqlen_q %d = %lld rows runs on sm_90a only within one "
                                   "row block (block_m %d) so far", a->heads_q / a->heads_kv, a->seqlen_q, rows,
                        k->plan.cfg.block_m), 0;
    int page = d.block_table ? d.page_size : 0;
    unsigned vl = varlen_bits(&d);
    unsigned v = (a->seqlens_k ? FJ_VARIANT_SEQLENS : 0) | (vl ? vl : FJ_VARIANT_SPLIT) | (packed ? FJ_VARIANT_PACK : 0) |
                 (page ? FJ_VARIANT_PAGED : 0);
    /* the sm_90a kernel's only (it has the persistent loop), and not with seqused_k, pages or d256 (plan.c) */
    if (vl && ctx->varlen_lpt && !a->seqlens_k && !page && a->head_dim <= 192 && !fp8) v |= FJ_VARIANT_LPT;
    c->cfg = k->plan.cfg;
    while (c->cfg.block_n >= 16 &&
           (!fj_ws_page_fits(page, c->cfg.block_n) || fj_plan_build_variant(&c->cfg, v, &p) != FAJIT_OK))
        c->cfg.block_n -= 16;
    if (c->cfg.block_n < 16 && page)
        return snprintf(why, size, "page_size %d: no block_n dividing it or divided by it plans with the sm_90a decode "
                                   "variant", page), 0;
    if (c->cfg.block_n < 16) /* (the plan's rule, as the last block_n broke it) */
        return snprintf(why, size, "no block_n of %s plans with the sm_90a decode variant: %s", k->config_text,
                        fajit_errmsg()), 0;
    c->ctas_per_sm = fj_plan_ctas_per_sm(&p);
    choose_splits(ctx, a, packed, tuned, v, c);
    return 1;
}

fajit_status fj_lpt_counter(fajit_context *ctx, const fajit_attention_args *a, fj_fwd_params_tma *p)
{
    fj_CUdeviceptr c = a->workspace_bytes >= FJ_LPT_WORKSPACE_BYTES ? a->workspace : 0;
    fajit_status st = c ? FAJIT_OK : fj_context_stream_counter(ctx, a->stream, &c); /* never another stream's */
    if (st != FAJIT_OK) return st;
    p->sched_heads = (uint32_t)fj_sched_section_heads(a->heads_q, a->heads_kv, a->seqlen_k, a->head_dim, p->n_mblocks,
                                                      fj_persistent_ctas(ctx->persistent_ctas, p->n_tiles));
    p->tile_count = c;
    st = fj_context_push(ctx);
    if (st != FAJIT_OK) return st;
    fj_CUresult rc = ctx->cu->cuMemsetD32Async(c, 0, 1, (fj_CUstream)a->stream);
    fj_context_pop(ctx);
    if (rc == FJ_CUDA_SUCCESS) return FAJIT_OK;
    return fj_fail_context(fj_cuda_fail(rc, "cuMemsetD32Async"), "the lpt schedule's tile counter");
}

/* Launch the sm_90a decode variant chosen (ws_choose), then (splits > 1) the combine kernel on the same
 * partial rows as the sm_80 split kernel's. *ran = 0 (and why) when TMA cannot describe the tensors: the
 * caller then takes the sm_80 path. The persistent grid is min(work tiles, the context's persistent CTAs);
 * the causal balance check of plain launches (forward.c) does not look at splits. */
static fajit_status run_variant_ws(fajit_context *ctx, const decode_choice *ch, const fajit_attention_args *a,
                                   int *ran, char *why, size_t size)
{
    int splits = ch->splits;
    fajit_kernel *kv = NULL, *kc = NULL;
    *ran = 0;
    fajit_status st = variant_kernels(ctx, ch, a, &kv, &kc);
    fj_fwd_params_tma_decode p;
    memset(&p, 0, sizeof p);
    if (st == FAJIT_OK && splits > 1) st = workspace_for(ctx, a, splits, &p.dec);
    if (st != FAJIT_OK) return st;
    fj_forward_params_tma(a, &kv->plan, &p.tma);
    if (fj_tensor_maps(ctx, &kv->plan, a, &p.tma, why, size) != 0) return FAJIT_OK;
    if (ch->variant & FJ_VARIANT_PACK) { /* one row block of group x seqlen_q rows per KV head (ws_choose) */
        p.tma.n_mblocks = 1;
        p.tma.heads_batch = (uint32_t)a->heads_kv * (uint32_t)a->batch;
    }
    p.tma.n_tiles = p.tma.n_mblocks * p.tma.heads_batch * (uint32_t)splits; /* row blocks x splits x heads x batch */
    p.dec.base = p.tma.base;
    p.dec.seqlens_k = a->seqlens_k;
    fj_decode_args d;
    fj_decode_read(a, &d);
    p.dec.cu_seqlens_q = d.cu_seqlens_q;
    p.dec.cu_seqlens_k = d.cu_seqlens_k;
    if (ch->variant & FJ_VARIANT_PAGED) { /* sm90_roles.c reads the table, its row length and the page size */
        p.dec.block_table = d.block_table;
        p.dec.max_pages = (uint32_t)d.max_pages;
        p.dec.page_size = (uint32_t)d.page_size;
    }
    p.dec.splits = (uint32_t)splits;
    p.dec.batch = (uint32_t)a->batch;
    p.dec.rows = (uint32_t)a->batch * (uint32_t)a->heads_q * (uint32_t)a->seqlen_q;
    if (ch->variant & FJ_VARIANT_LPT) st = fj_lpt_counter(ctx, a, &p.tma);
    if (st != FAJIT_OK) return st;
    unsigned grid[3] = {fj_persistent_ctas(fj_plan_max_ctas(&kv->plan, ctx->persistent_ctas), p.tma.n_tiles), 1, 1};
    *ran = 1;
    fj_param_block blk;
    st = launch(ctx, kv, grid, fj_variant_params(&kv->plan, a, &p, sizeof p, &blk), a->stream);
    if (st == FAJIT_OK && kc) {
        unsigned rpc = fj_combine_rows_per_cta(p.dec.splits), cgrid[3] = {(p.dec.rows + rpc - 1) / rpc, 1, 1};
        st = launch(ctx, kc, cgrid, &p.dec, a->stream);
    }
    if (st == FAJIT_OK) last_text(kv, kc, ch, " (sm_90a decode variant)");
    return st;
}

/* The decode variant chosen (decode_choose), then (splits > 1) the combine kernel; fajit_last_forward in words. */
static fajit_status run_variant(fajit_context *ctx, const decode_choice *ch, const fajit_attention_args *a,
                                int packed, const char *fell_from, const char *why)
{
    fj_decode_args d;
    fj_decode_read(a, &d);
    int splits = ch->splits;
    fajit_kernel *kv = NULL, *kc = NULL;
    fajit_status st = variant_kernels(ctx, ch, a, &kv, &kc);
    fj_fwd_params_decode p;
    memset(&p, 0, sizeof p);
    if (st == FAJIT_OK && splits > 1) st = workspace_for(ctx, a, splits, &p);
    if (st != FAJIT_OK) return st;
    fj_forward_params(a, &kv->plan, &p.base);
    p.seqlens_k = a->seqlens_k;
    p.cu_seqlens_q = d.cu_seqlens_q;
    p.cu_seqlens_k = d.cu_seqlens_k;
    p.block_table = d.block_table;
    p.max_pages = (uint32_t)d.max_pages;
    p.page_size = (uint32_t)d.page_size;
    while (!ctx->page_div && d.page_size > 0 && (d.page_size & (d.page_size - 1)) == 0 &&
           (1 << p.page_shift) < d.page_size)
        p.page_shift++;
    p.splits = (uint32_t)splits;
    p.batch = (uint32_t)a->batch;
    p.rows = (uint32_t)a->batch * (uint32_t)a->heads_q * (uint32_t)a->seqlen_q;
    unsigned bm = (unsigned)kv->plan.cfg.block_m, group = packed ? (unsigned)(a->heads_q / a->heads_kv) : 1;
    unsigned grid[3] = {(group * (unsigned)a->seqlen_q + bm - 1) / bm, (unsigned)a->heads_q / group,
                        (unsigned)(a->batch * splits)}; /* packed: (packed row blocks, KV heads, ...) */
    fj_param_block blk;
    st = launch(ctx, kv, grid, fj_variant_params(&kv->plan, a, &p, sizeof p, &blk), a->stream);
    if (st == FAJIT_OK && kc) {
        unsigned rpc = fj_combine_rows_per_cta(p.splits), cgrid[3] = {(p.rows + rpc - 1) / rpc, 1, 1};
        st = launch(ctx, kc, cgrid, &p, a->stream);
    }
    if (st != FAJIT_OK) return st;
    char note[320] = "";
    if (fell_from) snprintf(note, sizeof note, "; fell back from %s: %s", fell_from, why);
    last_text(kv, kc, ch, note);
    return FAJIT_OK;
}

/* e4m3 queries (fj_decode_wanted): the sm_90a FP8 kernel's decode variant (ws_choose; GQA packing that does not fit
 * one row block runs unpacked), the plain kernel where the choice has no variant bit, or a clear refusal - FP8 has
 * no sm_80 kernel to fall back to. */
static fajit_status fp8_run(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a, int packed,
                            int *handled)
{
    decode_choice ch;
    char why[256] = "";
    if (!k->plan.ws || !ws_choose(ctx, k, a, packed, 1, &ch, why, sizeof why))
        return fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with decode features (seqlens_k, num_splits, a block "
                                              "table, cu_seqlens or GQA packing): no FP8 kernel for %s%s%s",
                       k->config_text, why[0] ? ": " : "", why);
    if (ch.variant == 0) return FAJIT_OK; /* nothing to add: the plain kernel */
    int ran = 0;
    fajit_status st = run_variant_ws(ctx, &ch, a, &ran, why, sizeof why);
    if (st == FAJIT_OK && !ran)
        st = fj_fail(FAJIT_ERR_UNSUPPORTED, "args->dtype = e4m3 with decode features: %s (FP8 has no sm_80 kernel to "
                                            "fall back to)", why);
    *handled = 1;
    return st;
}

fajit_status fj_decode_run(fajit_context *ctx, fajit_kernel *k, const fajit_attention_args *a, int given, int *handled)
{
    fajit_kernel *k80 = NULL;
    *handled = 0;
    fj_decode_args d;
    fj_decode_read(a, &d);
    int knob = kv8_knob(ctx, a), direct = kv8_direct_auto(ctx, a);
    int packed = fj_decode_packs(ctx, a), special = a->seqlens_k || packed || d.block_table || d.cu_seqlens_q || knob;
    decode_choice ch;
    char why[256] = "";
    if (a->num_splits == 0 && !knob && !direct && !split_considered(ctx, a, packed)) return FAJIT_OK;
    if (a->dtype == FAJIT_DTYPE_E4M3) return fp8_run(ctx, k, a, packed, handled);
    if (k->plan.ws && ws_choose(ctx, k, a, packed, 1, &ch, why, sizeof why)) {
        if (!special && ch.splits <= 1) return FAJIT_OK; /* the plain kernel */
        int ran = 0;
        fajit_status st = run_variant_ws(ctx, &ch, a, &ran, why, sizeof why);
        if (st != FAJIT_OK || ran) return *handled = 1, st;
    }
    fajit_status st = sm80_base(ctx, k, a, &k80);
    if (st == FAJIT_OK) st = decode_choose(ctx, k80, a, packed, 1, given, &ch);
    if (st != FAJIT_OK) return st;
    if (!special && ch.splits <= 1 && !(ch.variant & FJ_VARIANT_KV8_DIRECT))
        return FAJIT_OK; /* the plain kernel, on its own path */
    *handled = 1;
    return run_variant(ctx, &ch, a, packed, k->plan.ws ? fj_arch_path_name(k->plan.cfg.arch) : NULL, why);
}

/* decode_choose for a call from its kernel: cfg's, or the library's choice for the shape (tuned: with the
 * tuned split count of its class). */
static fajit_status choice_for(fajit_context *ctx, const fajit_attention_args *a, const fajit_config *cfg, int tuned,
                               const char *who, decode_choice *ch)
{
    fajit_kernel *k = NULL, *k80 = NULL;
    fajit_status st = fj_context_require_device(ctx, who);
    if (st == FAJIT_OK)
        st = cfg ? fajit_kernel_get(ctx, cfg, &k, NULL) : fj_forward_choose(ctx, a, FAJIT_ARCH_AUTO, 0, &k);
    char why[256];
    if (st == FAJIT_OK && k->plan.ws && ws_choose(ctx, k, a, fj_decode_packs(ctx, a), tuned, ch, why, sizeof why))
        return FAJIT_OK; /* the sm_90a variant's splits (if TMA then refuses the tensors, the sm_80 one's may differ) */
    if (st == FAJIT_OK) st = sm80_base(ctx, k, a, &k80);
    if (st == FAJIT_OK) st = decode_choose(ctx, k80, a, fj_decode_packs(ctx, a), tuned, cfg != NULL, ch);
    return st;
}

fajit_status fajit_attention_workspace_size(fajit_context *ctx, const fajit_attention_args *args,
                                            const fajit_config *cfg, size_t *bytes_out)
{
    fj_clear_error();
    if (!bytes_out) return BAD("bytes_out = NULL: an output pointer is required");
    *bytes_out = 0;
    fajit_status st = fj_forward_validate(args, cfg);
    if (st != FAJIT_OK || !fj_decode_wanted(ctx, args)) return st;
    if (args->num_splits >= 1) {
        *bytes_out = fj_decode_workspace_bytes(args, args->num_splits, NULL);
        return FAJIT_OK;
    }
    if (!ctx) return BAD("ctx = NULL: the split heuristic needs the context's device (or force args->num_splits)");
    decode_choice ch;
    st = choice_for(ctx, args, cfg, 1, "fajit_attention_workspace_size", &ch);
    if (st != FAJIT_OK) return st;
    *bytes_out = fj_decode_workspace_bytes(args, ch.splits, NULL);
    if (ch.variant & FJ_VARIANT_LPT) *bytes_out = FJ_LPT_WORKSPACE_BYTES;
    fj_clear_error(); /* a tile probe that failed on the way left its message */
    return FAJIT_OK;
}

fajit_status fj_decode_heuristic(fajit_context *ctx, const fajit_attention_args *args, int *splits, int *block_m,
                                 int *block_n, int *packed)
{
    decode_choice ch;
    fajit_status st = choice_for(ctx, args, NULL, 0, "fj_decode_heuristic", &ch);
    if (st != FAJIT_OK) return st;
    *splits = ch.splits, *block_m = ch.cfg.block_m, *block_n = ch.cfg.block_n;
    *packed = fj_decode_packs(ctx, args);
    return FAJIT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * The prebuilt set (prebuilt_set.c): the tile a decode variant runs on
 * ------------------------------------------------------------------------------------------------- */
fajit_status fj_decode_variant_config(const fajit_attention_args *args, unsigned variant, fajit_config *cfg)
{
    return variant_config(args, variant, 0, cfg);
}
