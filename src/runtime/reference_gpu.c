/*
 * reference_gpu.c - GPU fp32 reference forward attention, CUDA C compiled at run time with NVRTC
 * (see reference.h).
 *
 * The kernel is deliberately plain: one CTA of 256 threads per 32 query rows of one (batch, head);
 * Q, K and V tiles are converted to fp32 in shared memory; thread t owns query row t / 8 and every
 * 8th score column and output column of it, so a row's online-softmax reductions are shuffles among
 * 8 lanes of one warp and P goes through shared memory with a __syncwarp. It shares no code with the
 * generated kernels. Compiled once per process for each (sm, head_dim) (-DHEAD_DIM); the module is
 * loaded around each call, which is therefore synchronous.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "compile.h"
#include "cuda_api.h"
#include "base/error.h"
#include "reference.h"

/* ---------------------------------------------------------------------------------------------------
 * The kernel
 * ------------------------------------------------------------------------------------------------- */
/* The source in pieces (ISO C limits one literal to 4095 chars); fj_reference_gpu_source() joins them. */
static const char *const k_ref_source_parts[] = {
    "/* fajit GPU reference attention, fp32 math. Build with -DHEAD_DIM=<multiple of 8, <= 256>. */\n"
    "#define NT 256\n"
    "#define BM 32\n"
    "#define BN (HEAD_DIM > 128 ? 16 : 32)\n"
    "#define DPT (HEAD_DIM / 8) /* output columns per thread */\n"
    "#define KPT (BN / 8)       /* score columns per thread */\n"
    "#define QLD (HEAD_DIM + 1) /* padded smem rows: no bank conflicts */\n"
    "#define NEG_INF (-__int_as_float(0x7f800000))\n"
    "struct fj_ref_params {\n"
    "    unsigned long long q, k, v, o, lse, lens;\n"
    "    long long qs[3], ks[3], vs[3];\n"
    "    int nq, nk, hq, group;\n"
    "    float scale;\n"
    "    int causal, bf16, pad;\n"
    "};\n"
    "__device__ __forceinline__ float ld_elem(const unsigned short *p, int bf16)\n"
    "{\n"
    "    unsigned short h = *p;\n"
    "    if (bf16) return __uint_as_float((unsigned)h << 16);\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "    return f;\n"
    "}\n"
    "__device__ __forceinline__ float row_max8(float x)\n"
    "{\n"
    "    for (int o = 1; o < 8; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));\n"
    "    return x;\n"
    "}\n"
    "__device__ __forceinline__ float row_sum8(float x)\n"
    "{\n"
    "    for (int o = 1; o < 8; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);\n"
    "    return x;\n"
    "}\n",
    "extern \"C\" __global__ void __launch_bounds__(NT) fj_ref_fwd(const struct fj_ref_params p)\n"
    "{\n"
    "    extern __shared__ float smem[];\n"
    "    float *qs = smem;                /* [BM][QLD] */\n"
    "    float *ks = qs + BM * QLD;       /* [BN][QLD] */\n"
    "    float *vs = ks + BN * QLD;       /* [BN][HEAD_DIM] */\n"
    "    float *ps = vs + BN * HEAD_DIM;  /* [BM][BN + 1] */\n"
    "    const int t = threadIdx.x, r = t >> 3, c8 = t & 7;\n"
    "    const int b = blockIdx.z, h = blockIdx.y, hk = h / p.group;\n"
    "    const long long i0 = (long long)blockIdx.x * BM, i = i0 + r;\n"
    "    const unsigned short *qg = (const unsigned short *)p.q + b * p.qs[0] + h * p.qs[1];\n"
    "    const unsigned short *kg = (const unsigned short *)p.k + b * p.ks[0] + hk * p.ks[1];\n"
    "    const unsigned short *vg = (const unsigned short *)p.v + b * p.vs[0] + hk * p.vs[1];\n"
    "    for (int e = t; e < BM * HEAD_DIM; e += NT) {\n"
    "        int rr = e / HEAD_DIM, d = e % HEAD_DIM;\n"
    "        qs[rr * QLD + d] = i0 + rr < p.nq ? ld_elem(qg + (i0 + rr) * p.qs[2] + d, p.bf16) : 0.f;\n"
    "    }\n"
    "    /* keys seen: row i sees j < i + nk - nq + 1 under the causal mask (bottom-right aligned) */\n"
    "    long long nk = p.nk; /* this sequence's keys: lens[b] clamped to [0, nk] */\n"
    "    if (p.lens) { long long L = ((const int *)p.lens)[b]; nk = L < 0 ? 0 : (L > nk ? nk : L); }\n"
    "    const long long shift = nk - p.nq;\n"
    "    long long row_end = nk, blk_end = nk;\n"
    "    if (p.causal) {\n"
    "        long long last = (i0 + BM < p.nq ? i0 + BM : p.nq) - 1;\n"
    "        row_end = i + shift + 1 < 0 ? 0 : (i + shift + 1 > nk ? nk : i + shift + 1);\n"
    "        blk_end = last + shift + 1 < 0 ? 0 : (last + shift + 1 > nk ? nk : last + shift + 1);\n"
    "    }\n"
    "    if (i >= p.nq) row_end = 0;\n"
    "    float m = NEG_INF, l = 0.f, acc[DPT];\n"
    "    for (int dd = 0; dd < DPT; dd++) acc[dd] = 0.f;\n",
    "    for (long long j0 = 0; j0 < blk_end; j0 += BN) {\n"
    "        __syncthreads();\n"
    "        for (int e = t; e < BN * HEAD_DIM; e += NT) {\n"
    "            int jr = e / HEAD_DIM, d = e % HEAD_DIM;\n"
    "            long long j = j0 + jr;\n"
    "            ks[jr * QLD + d] = j < nk ? ld_elem(kg + j * p.ks[2] + d, p.bf16) : 0.f;\n"
    "            vs[jr * HEAD_DIM + d] = j < nk ? ld_elem(vg + j * p.vs[2] + d, p.bf16) : 0.f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        float s[KPT];\n"
    "        for (int kk = 0; kk < KPT; kk++) s[kk] = 0.f;\n"
    "        for (int d = 0; d < HEAD_DIM; d++) {\n"
    "            float qv = qs[r * QLD + d];\n"
    "            for (int kk = 0; kk < KPT; kk++) s[kk] = fmaf(qv, ks[(c8 + 8 * kk) * QLD + d], s[kk]);\n"
    "        }\n"
    "        float tmax = NEG_INF;\n"
    "        for (int kk = 0; kk < KPT; kk++) {\n"
    "            s[kk] = j0 + c8 + 8 * kk < row_end ? s[kk] * p.scale : NEG_INF;\n"
    "            tmax = fmaxf(tmax, s[kk]);\n"
    "        }\n"
    "        float mnew = fmaxf(m, row_max8(tmax));\n"
    "        float alpha = mnew == NEG_INF ? 1.f : expf(m - mnew);\n"
    "        float psum = 0.f;\n"
    "        for (int kk = 0; kk < KPT; kk++) {\n"
    "            float pv = s[kk] == NEG_INF ? 0.f : expf(s[kk] - mnew);\n"
    "            ps[r * (BN + 1) + c8 + 8 * kk] = pv;\n"
    "            psum += pv;\n"
    "        }\n"
    "        l = l * alpha + row_sum8(psum);\n"
    "        m = mnew;\n"
    "        __syncwarp();\n"
    "        for (int dd = 0; dd < DPT; dd++) acc[dd] *= alpha;\n"
    "        for (int c = 0; c < BN; c++) {\n"
    "            float pv = ps[r * (BN + 1) + c];\n"
    "            for (int dd = 0; dd < DPT; dd++) acc[dd] = fmaf(pv, vs[c * HEAD_DIM + c8 + 8 * dd], acc[dd]);\n"
    "        }\n"
    "    }\n"
    "    if (i < p.nq) {\n"
    "        long long row = ((long long)b * p.hq + h) * p.nq + i;\n"
    "        float *og = (float *)p.o + row * HEAD_DIM;\n"
    "        float inv = l > 0.f ? 1.f / l : 0.f;\n"
    "        for (int dd = 0; dd < DPT; dd++) og[c8 + 8 * dd] = acc[dd] * inv;\n"
    "        if (p.lse && c8 == 0) ((float *)p.lse)[row] = l > 0.f ? m + logf(l) : NEG_INF;\n"
    "    }\n"
    "}\n",
};

static char g_ref_source[8192];
static pthread_once_t g_ref_source_once = PTHREAD_ONCE_INIT;

static void ref_source_join(void)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof k_ref_source_parts / sizeof k_ref_source_parts[0]; i++) {
        size_t len = strlen(k_ref_source_parts[i]);
        if (n + len >= sizeof g_ref_source) break; /* cannot happen: the parts are fixed */
        memcpy(g_ref_source + n, k_ref_source_parts[i], len);
        n += len;
    }
    g_ref_source[n] = '\0';
}

const char *fj_reference_gpu_source(void)
{
    pthread_once(&g_ref_source_once, ref_source_join);
    return g_ref_source;
}

/* Host mirror of struct fj_ref_params above (same order, sizes and alignment). */
typedef struct ref_params {
    uint64_t q, k, v, o, lse, lens;
    int64_t qs[3], ks[3], vs[3];
    int32_t nq, nk, hq, group;
    float scale;
    int32_t causal, bf16, pad;
} ref_params;

enum { REF_THREADS = 256, REF_BM = 32, REF_MAX_DIM = 256 };

/* Dynamic smem bytes of the kernel for head_dim (mirrors the layout in the source). */
static int ref_smem_bytes(int dim)
{
    int bn = dim > 128 ? 16 : 32;
    return (REF_BM * (dim + 1) + bn * (dim + 1) + bn * dim + REF_BM * (bn + 1)) * (int)sizeof(float);
}

/* ---------------------------------------------------------------------------------------------------
 * NVRTC: one cubin per (sm, head_dim), kept for the life of the process
 * ------------------------------------------------------------------------------------------------- */
typedef struct ref_cubin {
    char sm[24];
    int dim;
    void *image;
    size_t size;
} ref_cubin;

enum { REF_CACHE_SLOTS = 32 };
static ref_cubin g_ref_cache[REF_CACHE_SLOTS];
static int g_ref_cache_n;
static pthread_mutex_t g_ref_lock = PTHREAD_MUTEX_INITIALIZER;

/* Compile the reference source for sm with HEAD_DIM = dim; *image is malloc'd. */
static fajit_status ref_nvrtc_compile(const char *sm, int dim, void **image, size_t *size)
{
    char arch[48], hd[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", sm);
    snprintf(hd, sizeof hd, "-DHEAD_DIM=%d", dim);
    const char *opts[] = {arch, hd, "--std=c++17"};
    fajit_status st = fj_nvrtc_cubin(fj_reference_gpu_source(), "fj_reference.cu", opts, 3, image, size, NULL);
    return st == FAJIT_OK ? FAJIT_OK : fj_fail_context(st, "reference kernel, HEAD_DIM %d", dim);
}

/* The cached cubin for (sm, dim), compiling it on first use. The image lives until process exit. */
static fajit_status ref_get_cubin(const char *sm, int dim, const void **image)
{
    fajit_status st = FAJIT_OK;
    pthread_mutex_lock(&g_ref_lock);
    for (int i = 0; i < g_ref_cache_n; i++) {
        if (g_ref_cache[i].dim == dim && strcmp(g_ref_cache[i].sm, sm) == 0) {
            *image = g_ref_cache[i].image;
            pthread_mutex_unlock(&g_ref_lock);
            return FAJIT_OK;
        }
    }
    if (g_ref_cache_n == REF_CACHE_SLOTS || strlen(sm) >= sizeof g_ref_cache[0].sm) {
        st = fj_fail(FAJIT_ERR_INTERNAL, "reference: cubin cache full or sm name '%s' too long", sm);
    } else {
        ref_cubin *c = &g_ref_cache[g_ref_cache_n];
        st = ref_nvrtc_compile(sm, dim, &c->image, &c->size);
        if (st == FAJIT_OK) {
            snprintf(c->sm, sizeof c->sm, "%s", sm);
            c->dim = dim;
            *image = c->image;
            g_ref_cache_n++;
        }
    }
    pthread_mutex_unlock(&g_ref_lock);
    return st;
}

fajit_status fj_reference_gpu_prepare(const char *sm, int head_dim)
{
    const void *image;
    if (!sm || head_dim < 8 || head_dim > REF_MAX_DIM || head_dim % 8 != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT,
                       "fj_reference_gpu_prepare: sm '%s', head_dim %d: need an sm name and a multiple of 8 in 8..%d",
                       sm ? sm : "(null)", head_dim, REF_MAX_DIM);
    return ref_get_cubin(sm, head_dim, &image);
}

/* ---------------------------------------------------------------------------------------------------
 * Launch
 * ------------------------------------------------------------------------------------------------- */
static ref_params ref_params_from(const fajit_attention_args *a, uint64_t o, uint64_t lse)
{
    ref_params p;
    memset(&p, 0, sizeof p);
    p.q = a->q;
    p.k = a->k;
    p.v = a->v;
    p.o = o;
    p.lse = lse;
    p.lens = a->seqlens_k;
    memcpy(p.qs, a->q_stride, sizeof p.qs);
    memcpy(p.ks, a->k_stride, sizeof p.ks);
    memcpy(p.vs, a->v_stride, sizeof p.vs);
    p.nq = a->seqlen_q;
    p.nk = a->seqlen_k;
    p.hq = a->heads_q;
    p.group = a->heads_q / a->heads_kv;
    p.scale = (float)fj_reference_scale(a);
    p.causal = a->causal != 0;
    p.bf16 = a->dtype == FAJIT_DTYPE_BF16;
    return p;
}

/* Load the module, launch on args->stream, wait, unload. The context is current. */
static fajit_status ref_launch(const fj_cuda_api *cu, const void *image, const fajit_attention_args *a,
                               uint64_t o, uint64_t lse)
{
    fj_CUmodule mod = NULL;
    fj_CUfunction fn = NULL;
    ref_params p = ref_params_from(a, o, lse);
    void *params[] = {&p};
    int smem = ref_smem_bytes(a->head_dim);
    unsigned gx = (unsigned)((a->seqlen_q + REF_BM - 1) / REF_BM);
    fj_CUresult rc = cu->cuModuleLoadData(&mod, image);
    if (rc != 0) return fj_fail_context(fj_cuda_fail(rc, "cuModuleLoadData"), "reference kernel");
    rc = cu->cuModuleGetFunction(&fn, mod, "fj_ref_fwd");
    const char *call = "cuModuleGetFunction";
    if (rc == 0) {
        call = "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)";
        rc = cu->cuFuncSetAttribute(fn, FJ_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
    }
    if (rc == 0) {
        call = "cuLaunchKernel";
        rc = cu->cuLaunchKernel(fn, gx, (unsigned)a->heads_q, (unsigned)a->batch, REF_THREADS, 1, 1, (unsigned)smem,
                                (fj_CUstream)a->stream, params, NULL);
    }
    if (rc == 0) {
        call = "cuStreamSynchronize";
        rc = cu->cuStreamSynchronize((fj_CUstream)a->stream);
    }
    fajit_status st = rc == 0 ? FAJIT_OK : fj_fail_context(fj_cuda_fail(rc, call), "reference kernel");
    cu->cuModuleUnload(mod);
    return st;
}

fajit_status fj_reference_gpu(fajit_context *ctx, const fajit_attention_args *args, uint64_t o_f32,
                              uint64_t lse_f32)
{
    fajit_status st = fj_reference_check_args(args, REF_MAX_DIM);
    if (st != FAJIT_OK) return st;
    if (args->head_dim % 8 != 0)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "reference: head_dim = %d: the GPU reference needs a multiple of 8",
                       args->head_dim);
    if (!ctx || !args->q || !args->k || !args->v || !o_f32)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_reference_gpu: ctx, q, k, v and o must be set");
    if (args->batch > 65535 || args->heads_q > 65535)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_reference_gpu: batch %d, heads_q %d: grid limit 65535",
                       args->batch, args->heads_q);
    st = fj_context_require_device(ctx, "the GPU reference");
    if (st != FAJIT_OK) return st;
    const char *sm = ctx->sm;

    const void *image = NULL;
    st = ref_get_cubin(sm, args->head_dim, &image);
    if (st != FAJIT_OK) return st;
    st = fj_context_push(ctx);
    if (st != FAJIT_OK) return st;
    st = ref_launch(ctx->cu, image, args, o_f32, lse_f32);
    fj_context_pop(ctx);
    return st;
}

/* Varlen: one launch per sequence on its rows (device pointers moved to them), its outputs at its own block. A
 * sequence that sees no key gets O = 0 (memset) and LSE = -inf (copied from the host). */
fajit_status fj_reference_gpu_varlen(fajit_context *ctx, const fajit_attention_args *args, const int32_t *cu_q,
                                     const int32_t *cu_k, const int32_t *lens, uint64_t o_f32, uint64_t lse_f32)
{
    fajit_status st = fj_reference_check_args(args, REF_MAX_DIM);
    if (st != FAJIT_OK) return st;
    if (!ctx || !cu_q) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "fj_reference_gpu_varlen: ctx and cu_q must be set");
    const int64_t hq = args->heads_q, dim = args->head_dim;
    for (int b = 0; b < args->batch && st == FAJIT_OK; b++) {
        int64_t qs = cu_q[b] < 0 ? 0 : cu_q[b], lq = (int64_t)cu_q[b + 1] - cu_q[b], ks = 0, lk = args->seqlen_k;
        lq = lq < 0 ? 0 : lq > args->seqlen_q ? args->seqlen_q : lq;
        if (cu_k) {
            ks = cu_k[b] < 0 ? 0 : cu_k[b], lk = (int64_t)cu_k[b + 1] - cu_k[b];
            lk = lk < 0 ? 0 : lk > args->seqlen_k ? args->seqlen_k : lk;
        }
        if (lens) lk = lens[b] < 0 ? 0 : lens[b] < lk ? lens[b] : lk;
        if (lq == 0) continue;
        uint64_t o = o_f32 + 4 * (uint64_t)(qs * hq * dim), l = lse_f32 ? lse_f32 + 4 * (uint64_t)(qs * hq) : 0;
        if (lk == 0) {
            if ((st = fj_context_push(ctx)) != FAJIT_OK) return st;
            fj_CUresult rc = ctx->cu->cuMemsetD8(o, 0, (size_t)(4 * lq * hq * dim));
            for (int64_t i = 0; rc == 0 && l && i < lq * hq; i++) {
                const float ninf = -INFINITY;
                rc = ctx->cu->cuMemcpyHtoD(l + 4 * (uint64_t)i, &ninf, 4);
            }
            fj_context_pop(ctx);
            if (rc != 0) return fj_fail_context(fj_cuda_fail(rc, "cuMemsetD8 / cuMemcpyHtoD"), "GPU varlen reference");
            continue;
        }
        fajit_attention_args s = *args;
        s.batch = 1, s.seqlen_q = (int)lq, s.seqlen_k = (int)lk, s.seqlens_k = 0;
        s.q = args->q + 2 * (uint64_t)(qs * args->q_stride[2]);
        s.k = args->k + 2 * (uint64_t)(cu_k ? ks * args->k_stride[2] : b * args->k_stride[0]);
        s.v = args->v + 2 * (uint64_t)(cu_k ? ks * args->v_stride[2] : b * args->v_stride[0]);
        st = fj_reference_gpu(ctx, &s, o, l);
    }
    return st;
}
