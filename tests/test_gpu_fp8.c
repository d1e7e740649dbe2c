/*
 * test_gpu_fp8.c - the FP8 (e4m3) forward on an sm_90 GPU (H100 / H200) against a CPU float64 reference on the
 * dequantized inputs (label gpu).
 *
 * Inputs: fresh N(0, 1) values (or with outlier channels: head dims 3, 17 and D - 5 of Q and K times 20), quantized
 * to e4m3 per (batch, KV head) as FlashAttention-3's callers do: descale = amax / 448, code = e4m3(x / descale), the
 * descales passed as q_descale / k_descale / v_descale (float32 [B, Hkv]); the reference runs on code x descale in
 * float64. O and LSE are poisoned (0xFF bytes: NaN) first; every element is checked; NaN fails.
 * Tolerance, per element, from what FP8 attention rounds (p_j = exp(s_j - max_j s_j), l = sum p_j, for the row):
 *     |O - O_ref| <= 1.25 (2^-4 sum p|v| / l + 2^-10 sum |v| / l + 2 d sum p|v| / l) + 2^-8 |O_ref| + 1e-4
 *   2^-4: P rounded to e4m3 (half an ulp of 3 mantissa bits, relative; the row's largest P is exactly 1);
 *   2^-10: P below e4m3's normals (absolute); 2^-8: O rounded to bf16 (f16 is finer);
 *   d = 2^-12 x scale x max_j sum_c |q_c k_c|: the score error of the FP8 tensor cores' accumulation.
 *     |LSE - LSE_ref| <= d + h + 1e-4 + 1e-5 |LSE_ref|,  LSE = -inf exactly for a row that sees no key (O = 0 there),
 *   h = sum_j p_j h_j / l, h_j = 2^-8 x scale x sum over the k32 steps t of max_{c in t} |q_c k_jc|: the FP8 tensor
 *   cores add a step's 32 products with a short accumulator aligned to the largest (about 14 bits kept, so up to 32
 *   x 2^-13 of it lost, always the same way), which moves every score of a key the same way - invisible in O, but
 *   LSE takes it first order. With outlier channels this term is 7-15x d, and
 *   it is the hardware's, not fajit's: FlashAttention-3's LSE on the same outlier inputs has the same max error
 *   (H100, bench/fp8_compare.py --lse --outliers, D128 N4k: 2.89e-1 both; bench/results/h100-session6-2026-11-27.md).
 * Shapes: Nq 1, 17, 1000; Nq != Nk both ways (causal rows with no key); D 64, 128, 256; GQA and MQA; BHND and BNHD;
 * O in f16 once; no descale pointers once. Each case prints its max and RMS error and the worst ratio to the bound.
 * Attention variants (fajit.h's definitions, the reference on the dequantized inputs): sliding windows (bottom-right
 * aligned, causal or not, rows with no key), softcap (tanh.approx: the score error d grows by c x 2^-10), sinks
 * (float32 per query head in the denominator; a row with no key has O = 0 and LSE = sink), chunks, and the
 * combinations models use (window + sinks, window + softcap); one window case with more work tiles than SMs. The
 * "roll" cases run the library's config with the rolled consumer loop (config roll = 1, opt-in for FP8).
 * Without libcuda, a device, or on a GPU other than sm_90: prints "SKIP: <reason>" and exits 77.
 *
 *   ctest --test-dir build -R test_gpu_fp8 --output-on-failure   (or run build/tests/test_gpu_fp8)
 *   FAJIT_TEST_FP8_ONLY=window build/tests/test_gpu_fp8            (only the cases whose name has that text)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"
#include "runtime/half.h"
#include "runtime/variants.h"
#include "test_support.h"

/* the case table below leaves trailing fields (the variants) to their zero defaults */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static fajit_context *g_ctx;

typedef struct fp8_case {
    const char *name;
    int b, hq, hkv, nq, nk, d, causal;
    int bnhd, outliers, out_f16, no_descale;
    int win, win_left, win_right; /* a sliding window (fajit.h: window_left / window_right, -1 unbounded) */
    float softcap;                /* > 0: s = c tanh(s / c) */
    int sinks;                    /* one float32 sink logit a query head */
    int chunk;                    /* attention_chunk */
    int roll;                     /* 1: the library's config for the call with roll = 1 (the rolled consumer loop) */
} fp8_case;

static const fp8_case k_cases[] = {
    {"d128 N1000", 1, 4, 4, 1000, 1000, 128, 0, 0, 0, 0, 0},
    {"d128 causal N1000 BNHD", 2, 4, 4, 1000, 1000, 128, 1, 1, 0, 0, 0},
    {"d64 N17 GQA", 2, 8, 2, 17, 17, 64, 0, 0, 0, 0, 0},
    {"d256 Nq1 MQA", 3, 4, 1, 1, 1000, 256, 0, 0, 0, 0, 0},
    {"d64 causal Nq>Nk (rows with no key) GQA", 1, 4, 2, 1000, 300, 64, 1, 0, 0, 0, 0},
    {"d128 causal Nq<Nk", 1, 4, 4, 300, 1000, 128, 1, 0, 0, 0, 0},
    {"d256 causal N1000 BNHD", 1, 2, 2, 1000, 1000, 256, 1, 1, 0, 0, 0},
    {"d128 outliers", 1, 4, 4, 1000, 1000, 128, 0, 0, 1, 0, 0},
    {"d64 outliers causal BNHD O f16", 1, 4, 4, 1000, 1000, 64, 1, 1, 1, 1, 0},
    {"d256 outliers GQA", 1, 8, 2, 1000, 1000, 256, 0, 0, 1, 0, 0},
    {"d128 no descales N17 Nk1000", 1, 2, 2, 17, 1000, 128, 0, 0, 0, 0, 1},
    {"d64 N1 Nk1", 1, 2, 2, 1, 1, 64, 0, 0, 0, 0, 0},
    {"d128 N4096 causal", 1, 2, 2, 4096, 4096, 128, 1, 0, 0, 0, 0},
    /* head dim 64's default tile, br192 bc160 under FlashAttention-3's register split (FJ_FP8_REGS_WIDE) */
    {"d64 N1000 GQA", 2, 8, 2, 1000, 1000, 64, 0, 0, 0, 0, 0},
    {"d64 causal N2048 Nk2100 BNHD", 1, 4, 4, 2048, 2100, 64, 1, 1, 0, 0, 0},
    /* attention variants (b hq hkv nq nk d causal bnhd outliers f16 nodesc | win L R | softcap | sinks | chunk) */
    {"d128 causal window (128,0)", 1, 4, 4, 1000, 1000, 128, 1, 0, 0, 0, 0, 1, 128, 0},
    {"d64 window (100,20) Nq<Nk GQA BNHD", 2, 8, 2, 300, 1000, 64, 0, 1, 0, 0, 0, 1, 100, 20},
    {"d64 window (50,-1) Nq>Nk (rows with no key)", 1, 4, 4, 1000, 300, 64, 1, 0, 0, 0, 0, 1, 50, -1},
    {"d256 causal window (256,0) BNHD", 1, 2, 2, 1000, 1000, 256, 1, 1, 0, 0, 0, 1, 256, 0},
    {"d128 causal softcap 30", 1, 4, 4, 1000, 1000, 128, 1, 0, 0, 0, 0, 0, 0, 0, 30.0f},
    {"d256 softcap 50 GQA", 1, 4, 2, 1000, 1000, 256, 0, 0, 0, 0, 0, 0, 0, 0, 50.0f},
    {"d64 softcap 10 sinks N17 GQA O f16", 2, 8, 2, 17, 17, 64, 0, 0, 0, 1, 0, 0, 0, 0, 10.0f, 1},
    {"d128 causal sinks Nq>Nk (rows: LSE = sink)", 1, 4, 4, 1000, 300, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 1},
    {"d64 causal window (128,0) + sinks GQA", 1, 8, 2, 1000, 1000, 64, 1, 0, 0, 0, 0, 1, 128, 0, 0.0f, 1},
    {"d128 causal window (512,0) + softcap 50", 1, 4, 4, 1000, 1000, 128, 1, 1, 0, 0, 0, 1, 512, 0, 50.0f},
    {"d128 causal chunk 256", 1, 4, 4, 1000, 1000, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 256},
    {"d256 chunk 300 (not causal) Nq<Nk", 1, 2, 2, 500, 1000, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 300},
    {"d128 causal window (64,0) + sinks, tiles > SMs", 2, 8, 8, 4096, 4096, 128, 1, 0, 0, 0, 0, 1, 64, 0, 0.0f, 1},
    /* the rolled consumer loop (config roll = 1, opt-in for FP8 since 2026-11-29): the defaults' tiles, odd lengths,
     * rows with no key, GQA, a window with sinks, more work tiles than SMs (the ring across work tiles) */
    {"roll d128 N1000", 1, 4, 4, 1000, 1000, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d64 causal Nq>Nk (rows with no key) GQA", 1, 4, 2, 1000, 300, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d256 causal N1000 BNHD", 1, 2, 2, 1000, 1000, 256, 1, 1, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d256 causal N1000", 1, 2, 2, 1000, 1000, 256, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d256 N1000 GQA", 1, 4, 2, 1000, 1000, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d256 N129 Nk300", 1, 2, 2, 129, 300, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d128 causal Nq<Nk N17 GQA", 2, 8, 2, 17, 1000, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
    {"roll d64 causal window (128,0) + sinks", 1, 8, 2, 1000, 1000, 64, 1, 0, 0, 0, 0, 1, 128, 0, 0.0f, 1, 0, 1},
    {"roll d128 causal N4096, tiles > SMs", 2, 8, 8, 4096, 4096, 128, 1, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 1},
};

/* ---- inputs --------------------------------------------------------------------------------------------------- */
static uint64_t g_rng = 0x243f6a8885a308d3ull;
static double normal(void)
{
    double u[2];
    for (int j = 0; j < 2; j++) {
        g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
        u[j] = ((double)(g_rng >> 11) + 0.5) * 0x1p-53;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* One tensor [B][H][N][D] (logical order): values, quantized per (b, kv head) to codes in the layout, dequantized
 * copy in logical order, descales [B][Hkv]. heads_per_kv: H / Hkv (Q's group; 1 for K and V). */
typedef struct fp8_tensor {
    uint8_t *codes; /* in the layout (BHND or BNHD) */
    double *deq;    /* logical [B][H][N][D] */
    float *descale; /* [B][Hkv] */
} fp8_tensor;

static void tensor_make(const fp8_case *c, int h, int n, int per_kv, int outliers, fp8_tensor *t)
{
    size_t count = (size_t)c->b * h * n * c->d;
    double *x = malloc(count * sizeof *x);
    t->codes = malloc(count), t->deq = malloc(count * sizeof *t->deq);
    t->descale = malloc((size_t)c->b * c->hkv * sizeof *t->descale);
    assert_true(x && t->codes && t->deq && t->descale);
    for (size_t i = 0; i < count; i++) {
        int dim = (int)(i % (size_t)c->d);
        x[i] = normal() * (outliers && (dim == 3 || dim == 17 || dim == c->d - 5) ? 20.0 : 1.0);
    }
    for (int b = 0; b < c->b; b++)
        for (int g = 0; g < h / per_kv; g++) {
            double amax = 0;
            for (int hh = g * per_kv; hh < (g + 1) * per_kv; hh++)
                for (size_t i = 0; i < (size_t)n * c->d; i++)
                    amax = fmax(amax, fabs(x[((size_t)b * h + hh) * n * c->d + i]));
            float ds = c->no_descale ? 1.0f : (float)(amax / 448.0);
            t->descale[b * c->hkv + g] = ds;
            for (int hh = g * per_kv; hh < (g + 1) * per_kv; hh++)
                for (int r = 0; r < n; r++)
                    for (int dim = 0; dim < c->d; dim++) {
                        size_t li = (((size_t)b * h + hh) * n + r) * c->d + dim;
                        size_t at = c->bnhd ? (((size_t)b * n + r) * h + hh) * c->d + dim : li;
                        uint8_t code = fj_f32_to_e4m3((float)(x[li] / ds));
                        t->codes[at] = code;
                        t->deq[li] = (double)fj_e4m3_to_f32(code) * ds;
                    }
        }
    free(x);
}

static void tensor_free(fp8_tensor *t) { free(t->codes), free(t->deq), free(t->descale); }

/* The keys row i sees: [*lo, *hi] (empty when *hi < *lo), fajit.h's rule with a = i + Nk - Nq. */
static void row_keys(const fp8_case *c, int i, int *lo, int *hi)
{
    long a = (long)i + c->nk - c->nq, l = 0, h = c->nk - 1;
    if (c->causal && a < h) h = a;
    if (c->win) {
        if (c->win_left >= 0 && a - c->win_left > l) l = a - c->win_left;
        if (!c->causal && c->win_right >= 0 && a + c->win_right < h) h = a + c->win_right;
    }
    if (c->chunk > 0) {
        if (a < 0) h = -1;
        long c0 = a / c->chunk * c->chunk;
        if (c0 > l) l = c0;
        if (c0 + c->chunk - 1 < h) h = c0 + c->chunk - 1;
    }
    *lo = (int)l, *hi = (int)h;
}

/* ---- reference and check of one row --------------------------------------------------------------------------- */
typedef struct row_check {
    double max_err, sum_sq, worst_ratio, lse_worst;
    long n;
    int nan;
} row_check;

static void check_row(const fp8_case *c, const double *q, const double *k, const double *v, double scale, int i,
                      double sink, const float *o, float lse, row_check *rc)
{
    int d = c->d, first, last;
    row_keys(c, i, &first, &last);
    if (last < first) { /* no key: O = 0, LSE = -inf (or the sink) */
        for (int x = 0; x < d; x++) {
            if (o[x] != 0.0f) rc->nan |= o[x] != o[x], rc->worst_ratio = INFINITY;
        }
        if (c->sinks) rc->lse_worst = fmax(rc->lse_worst, fabs((double)lse - sink) / (1e-4 + 1e-5 * fabs(sink)));
        else if (!(isinf(lse) && lse < 0)) rc->lse_worst = INFINITY;
        if (lse != lse) rc->lse_worst = INFINITY;
        return;
    }
    double *s = malloc((size_t)(last + 1) * sizeof *s), *h = malloc((size_t)(last + 1) * sizeof *h);
    double mx = -INFINITY, dot_abs = 0;
    assert_non_null(s);
    assert_non_null(h);
    for (int j = first; j <= last; j++) {
        double acc = 0, aabs = 0, step_max = 0;
        h[j] = 0;
        for (int x = 0; x < d; x++) {
            double t = fabs(q[x] * k[(size_t)j * d + x]);
            acc += q[x] * k[(size_t)j * d + x], aabs += t, step_max = fmax(step_max, t);
            if (x % 32 == 31 || x == d - 1) h[j] += step_max, step_max = 0;
        }
        h[j] *= 0x1p-8 * scale;
        s[j] = acc * scale;
        if (c->softcap > 0) s[j] = c->softcap * tanh(s[j] / c->softcap);
        mx = fmax(mx, s[j]);
        dot_abs = fmax(dot_abs, aabs * scale);
    }
    if (c->sinks) mx = fmax(mx, sink);
    double l = c->sinks ? exp(sink - mx) : 0, lse_hw = 0;
    for (int j = first; j <= last; j++) s[j] = exp(s[j] - mx), l += s[j], lse_hw += s[j] * h[j];
    lse_hw /= l;
    /* the score error: the FP8 tensor cores' accumulation, and softcap's tanh.approx (about 2^-11 of c, doubled) */
    double delta = 0x1p-12 * dot_abs + (c->softcap > 0 ? 0x1p-10 * c->softcap : 0.0);
    for (int x = 0; x < d; x++) {
        double ref = 0, pv = 0, av = 0;
        for (int j = first; j <= last; j++) {
            double vj = v[(size_t)j * d + x];
            ref += s[j] * vj, pv += s[j] * fabs(vj), av += fabs(vj);
        }
        ref /= l, pv /= l, av /= l;
        double bound = 1.25 * (0x1p-4 * pv + 0x1p-10 * av + 2 * delta * pv) + 0x1p-8 * fabs(ref) + 1e-4;
        double err = fabs((double)o[x] - ref);
        if (o[x] != o[x]) rc->nan = 1, err = INFINITY;
        rc->max_err = fmax(rc->max_err, err);
        rc->sum_sq += err * err;
        rc->n++;
        rc->worst_ratio = fmax(rc->worst_ratio, err / bound);
    }
    double lse_ref = mx + log(l);
    double lse_err = fabs((double)lse - lse_ref);
    if (lse != lse) lse_err = INFINITY;
    rc->lse_worst = fmax(rc->lse_worst, lse_err / (delta + lse_hw + 1e-4 + 1e-5 * fabs(lse_ref)));
    free(s), free(h);
}

/* The forward on the args with config cfg (NULL: the library's choice), then O and LSE downloaded: 0, or 1 with a
 * FAIL line. text gets fajit_last_forward(). */
static int forward_fetch_cfg(const char *name, const fajit_attention_args *a, const fajit_config *cfg, void *o,
                             size_t o_bytes, float *lse, size_t lse_bytes, char *text, size_t size)
{
    const fj_cuda_api *cu = g_ctx->cu;
    int failed = 0;
    fajit_status st = fajit_attention_forward(g_ctx, a, cfg);
    if (st != FAJIT_OK) {
        printf("FAIL %-42s fajit_attention_forward: %s: %s\n", name, fajit_status_name(st), fajit_errmsg());
        failed = 1;
    } else if (cu->cuCtxSynchronize() != 0 || cu->cuMemcpyDtoH(o, a->o, o_bytes) != 0 ||
               cu->cuMemcpyDtoH(lse, a->lse, lse_bytes) != 0) {
        printf("FAIL %-42s the run or its download failed\n", name);
        failed = 1;
    }
    snprintf(text, size, "%s", fajit_last_forward());
    return failed;
}

/* The same with the library's choice. */
static int forward_fetch(const char *name, const fajit_attention_args *a, void *o, size_t o_bytes, float *lse,
                         size_t lse_bytes, char *text, size_t size)
{
    return forward_fetch_cfg(name, a, NULL, o, o_bytes, lse, lse_bytes, text, size);
}

/* The verdict of a case's rows (every ratio to its bound <= 1, no NaN) and its one line: 1 when it failed. */
static int report(const char *name, const row_check *rc, const char *text)
{
    int failed = rc->nan || !(rc->worst_ratio <= 1.0) || !(rc->lse_worst <= 1.0);
    printf("%s %-42s max err %.3e, RMS %.3e, worst err / bound %.3f, worst LSE err / bound %.3f%s  [%s]\n",
           failed ? "FAIL" : "ok  ", name, rc->max_err, rc->n ? sqrt(rc->sum_sq / (double)rc->n) : 0.0, rc->worst_ratio,
           rc->lse_worst, rc->nan ? ", NaN in O" : "", text);
    return failed;
}

/* ---- device buffers ------------------------------------------------------------------------------------------- */
/* A case's device allocations: put copies host bytes up (host NULL: 0xFF bytes, NaN where nothing writes), put_free
 * frees them all. */
typedef struct fp8_dev {
    fj_CUdeviceptr p[16];
    int n;
} fp8_dev;

static fj_CUdeviceptr put(fp8_dev *d, const void *host, size_t bytes)
{
    const fj_cuda_api *cu = g_ctx->cu;
    fj_CUdeviceptr x = 0;
    assert_true(d->n < 16);
    assert_int_equal(cu->cuMemAlloc(&x, bytes), 0);
    if (host) assert_int_equal(cu->cuMemcpyHtoD(x, host, bytes), 0);
    else assert_int_equal(cu->cuMemsetD8(x, 0xff, bytes), 0);
    return d->p[d->n++] = x;
}

static void put_free(fp8_dev *d)
{
    for (int i = 0; i < d->n; i++) g_ctx->cu->cuMemFree(d->p[i]);
    d->n = 0;
}

/* What every batched case puts up, into a's pointers: q's codes, k / v (kv_bytes each: the cache or its page pools),
 * O and LSE poisoned, the q / k / v descales ([B][Hkv], batch stride Hkv) unless ds is NULL, the sinks ([Hq]) unless
 * NULL. */
static void case_inputs(fp8_dev *d, fajit_attention_args *a, const uint8_t *q, const void *k, const void *v,
                        size_t kv_bytes, const float *const ds[3], const float *sinks)
{
    size_t nq_el = (size_t)a->batch * a->heads_q * a->seqlen_q * a->head_dim;
    size_t lse_n = (size_t)a->batch * a->heads_q * a->seqlen_q, ds_bytes = (size_t)a->batch * a->heads_kv * 4;
    a->q = put(d, q, nq_el), a->k = put(d, k, kv_bytes), a->v = put(d, v, kv_bytes);
    a->o = put(d, NULL, nq_el * 2), a->lse = put(d, NULL, lse_n * 4);
    if (ds) {
        a->q_descale = put(d, ds[0], ds_bytes), a->k_descale = put(d, ds[1], ds_bytes);
        a->v_descale = put(d, ds[2], ds_bytes), a->descale_batch_stride = a->heads_kv;
    }
    if (sinks) a->sinks = put(d, sinks, (size_t)a->heads_q * sizeof *sinks);
}

/* ---- one case ------------------------------------------------------------------------------------------------- */
static int run_case(const fp8_case *c)
{
    fp8_tensor q, k, v;
    tensor_make(c, c->hq, c->nq, c->hq / c->hkv, c->outliers, &q);
    tensor_make(c, c->hkv, c->nk, 1, c->outliers, &k);
    tensor_make(c, c->hkv, c->nk, 1, 0, &v);
    size_t nq_el = (size_t)c->b * c->hq * c->nq * c->d, nk_el = (size_t)c->b * c->hkv * c->nk * c->d;
    size_t lse_n = (size_t)c->b * c->hq * c->nq;
    uint16_t *o = malloc(nq_el * 2);
    float *lse = malloc(lse_n * sizeof *lse);
    assert_true(o && lse);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_E4M3, a.batch = c->b, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.seqlen_q = c->nq, a.seqlen_k = c->nk, a.head_dim = c->d, a.causal = c->causal;
    a.out_dtype = c->out_f16 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16;
    if (c->bnhd) fajit_args_set_bnhd_strides(&a);
    else fajit_args_set_bhnd_strides(&a);
    float *sinks = malloc((size_t)c->hq * sizeof *sinks);
    assert_non_null(sinks);
    for (int h = 0; h < c->hq; h++) sinks[h] = (float)(normal() + 1.0); /* near a row's typical max score */
    a.window = c->win, a.window_left = c->win ? c->win_left : 0, a.window_right = c->win ? c->win_right : 0;
    a.softcap = c->softcap, a.attention_chunk = c->chunk;
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    fp8_dev dev = {{0}, 0};
    const float *const ds[3] = {q.descale, k.descale, v.descale};
    case_inputs(&dev, &a, q.codes, k.codes, v.codes, nk_el, c->no_descale ? NULL : ds, c->sinks ? sinks : NULL);
    char text[256];
    int failed = 0;
    if (!c->roll) {
        failed = forward_fetch(c->name, &a, o, nq_el * 2, lse, lse_n * 4, text, sizeof text);
    } else { /* the library's config for the shape (the args' variants' mods), with the rolled consumer loop */
        fajit_config cfg = {.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_E4M3, .out_dtype = a.out_dtype,
                            .head_dim = c->d, .causal = c->causal, .roll = 1, .mods = fj_variant_mods(&a)};
        fajit_shape shape = {c->b, c->hq, c->hkv, c->nq, c->nk};
        if (fajit_config_fill(g_ctx, &shape, &cfg) != FAJIT_OK) {
            printf("FAIL %-42s fajit_config_fill: %s\n", c->name, fajit_errmsg());
            failed = 1;
        } else {
            failed = forward_fetch_cfg(c->name, &a, &cfg, o, nq_el * 2, lse, lse_n * 4, text, sizeof text);
        }
    }
    put_free(&dev);
    fj_context_pop(g_ctx);
    if (!failed) {
        row_check rc = {0, 0, 0, 0, 0, 0};
        double scale = 1.0 / sqrt((double)c->d);
        float *orow = malloc((size_t)c->d * sizeof *orow);
        assert_non_null(orow);
        int g = c->hq / c->hkv;
        for (int b = 0; b < c->b; b++)
            for (int h = 0; h < c->hq; h++)
                for (int i = 0; i < c->nq; i++) {
                    size_t at = c->bnhd ? (((size_t)b * c->nq + i) * c->hq + h) * c->d
                                        : (((size_t)b * c->hq + h) * c->nq + i) * c->d;
                    for (int x = 0; x < c->d; x++)
                        orow[x] = fj_half_to_f32(c->out_f16 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, o[at + x]);
                    const double *qr = q.deq + (((size_t)b * c->hq + h) * c->nq + i) * c->d;
                    size_t kv0 = ((size_t)b * c->hkv + h / g) * c->nk * c->d;
                    check_row(c, qr, k.deq + kv0, v.deq + kv0, scale, i, (double)sinks[h], orow,
                              lse[((size_t)b * c->hq + h) * c->nq + i], &rc);
                }
        free(orow);
        failed = report(c->name, &rc, text);
    }
    tensor_free(&q), tensor_free(&k), tensor_free(&v);
    free(o), free(lse), free(sinks);
    return failed;
}

/* The cases of a table whose entries start with their name (FAJIT_TEST_FP8_ONLY: only those whose name has that
 * text, for compute-sanitizer runs), each by run: the failures, with one line of counts. */
static int run_table(const void *table, size_t n, size_t size, int (*run)(const void *), const char *what)
{
    int failures = 0, ran = 0;
    const char *only = getenv("FAJIT_TEST_FP8_ONLY");
    for (size_t i = 0; i < n; i++) {
        const void *c = (const char *)table + i * size;
        if (!only || strstr(*(const char *const *)c, only)) failures += run(c), ran++;
    }
    printf("%d of %d FP8 %s failed%s%s\n", failures, ran, what, only ? ", FAJIT_TEST_FP8_ONLY=" : "", only ? only : "");
    return failures;
}

static int run_case_any(const void *c) { return run_case(c); }

static void test_fp8_cases(void **state)
{
    (void)state;
    assert_int_equal(run_table(k_cases, sizeof k_cases / sizeof k_cases[0], sizeof k_cases[0], run_case_any, "cases"), 0);
}

/* ---- varlen batches (cu_seqlens_q / cu_seqlens_k) ------------------------------------------------------------
 * Sequences packed along the token dim: q / o [total_q, Hq, D], k / v [total_k, Hkv, D], descales [sequence][Hkv]
 * (FlashAttention-3's varlen FP8 takes one row per sequence). Each sequence's tensors are made and quantized as a
 * batch-1 case of its own lengths, then packed; the reference is that case's check_row, O / LSE rows read from the
 * packed outputs (LSE [Hq, total_q]). Rows of no sequence stay poisoned: every row of O is checked, so a stray
 * write into another sequence's rows fails there. */
typedef struct fp8_varlen_case {
    const char *name;
    int hq, hkv, d, causal, n;
    int lq[8], lk[8];
    int win, win_left, win_right; /* optional window */
    float softcap;
} fp8_varlen_case;

static const fp8_varlen_case k_varlen[] = {
    {"varlen d128 0,17,1000,1,300", 4, 2, 128, 0, 5, {0, 17, 1000, 1, 300}, {0, 17, 1000, 1, 300}},
    {"varlen d128 causal Nq != Nk", 4, 4, 128, 1, 4, {17, 300, 1, 640}, {1000, 300, 5, 129}},
    {"varlen d64 causal GQA", 8, 2, 64, 1, 3, {1000, 33, 257}, {1000, 33, 257}},
    {"varlen d64 0,17,1000,1,2049", 4, 2, 64, 0, 5, {0, 17, 1000, 1, 2049}, {0, 17, 1000, 1, 2049}},
    {"varlen d256 causal", 2, 2, 256, 1, 3, {300, 1, 700}, {300, 1, 700}},
    {"varlen d128 causal window (64,0) + softcap 30", 4, 2, 128, 1, 3, {1000, 17, 300}, {1000, 17, 300}, 1, 64, 0,
     30.0f},
};

static int run_varlen(const fp8_varlen_case *v)
{
    const fj_cuda_api *cu = g_ctx->cu;
    int d = v->d, tq = 0, tk = 0, mq = 1, mk = 1;
    int cq[9] = {0}, ck[9] = {0};
    for (int s = 0; s < v->n; s++) {
        cq[s + 1] = tq += v->lq[s], ck[s + 1] = tk += v->lk[s];
        mq = v->lq[s] > mq ? v->lq[s] : mq, mk = v->lk[s] > mk ? v->lk[s] : mk;
    }
    fp8_tensor q[8], k[8], vv[8];
    fp8_case cs[8];
    uint8_t *hq = calloc((size_t)tq * v->hq * d + 1, 1), *hk = calloc((size_t)tk * v->hkv * d + 1, 1);
    uint8_t *hv = calloc((size_t)tk * v->hkv * d + 1, 1);
    float *ds[3];
    for (int t = 0; t < 3; t++) ds[t] = calloc((size_t)v->n * v->hkv, sizeof(float));
    size_t o_el = (size_t)tq * v->hq * d;
    uint16_t *o = malloc(o_el * 2 + 2);
    float *lse = malloc((size_t)v->hq * tq * sizeof(float) + 4);
    assert_true(hq && hk && hv && ds[0] && ds[1] && ds[2] && o && lse);
    for (int s = 0; s < v->n; s++) {
        cs[s] = (fp8_case){v->name, 1, v->hq, v->hkv, v->lq[s], v->lk[s], d, v->causal, 0, 0, 0, 0,
                           v->win, v->win_left, v->win_right, v->softcap, 0, 0};
        tensor_make(&cs[s], v->hq, v->lq[s], v->hq / v->hkv, 0, &q[s]);
        tensor_make(&cs[s], v->hkv, v->lk[s], 1, 0, &k[s]);
        tensor_make(&cs[s], v->hkv, v->lk[s], 1, 0, &vv[s]);
        for (int h = 0; h < v->hkv; h++) /* (an empty sequence's amax is 0: descale 0, nothing reads it) */
            ds[0][s * v->hkv + h] = q[s].descale[h], ds[1][s * v->hkv + h] = k[s].descale[h],
            ds[2][s * v->hkv + h] = vv[s].descale[h];
        for (int h = 0; h < v->hq; h++) /* [1][H][N][D] -> packed [total][H][D] */
            for (int r = 0; r < v->lq[s]; r++)
                memcpy(hq + ((size_t)(cq[s] + r) * v->hq + h) * d, q[s].codes + ((size_t)h * v->lq[s] + r) * d, (size_t)d);
        for (int h = 0; h < v->hkv; h++)
            for (int r = 0; r < v->lk[s]; r++) {
                memcpy(hk + ((size_t)(ck[s] + r) * v->hkv + h) * d, k[s].codes + ((size_t)h * v->lk[s] + r) * d, (size_t)d);
                memcpy(hv + ((size_t)(ck[s] + r) * v->hkv + h) * d, vv[s].codes + ((size_t)h * v->lk[s] + r) * d, (size_t)d);
            }
    }
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_E4M3, a.batch = v->n, a.heads_q = v->hq, a.heads_kv = v->hkv, a.head_dim = d;
    a.seqlen_q = mq, a.seqlen_k = mk, a.causal = v->causal;
    a.window = v->win, a.window_left = v->win ? v->win_left : 0, a.window_right = v->win ? v->win_right : 0;
    a.softcap = v->softcap;
    a.q_stride[1] = a.o_stride[1] = d, a.q_stride[2] = a.o_stride[2] = (int64_t)v->hq * d;
    a.k_stride[1] = a.v_stride[1] = d, a.k_stride[2] = a.v_stride[2] = (int64_t)v->hkv * d;
    fj_CUdeviceptr dq = 0, dk = 0, dv = 0, dO = 0, dl = 0, dcq = 0, dck = 0, dd[3] = {0, 0, 0};
    size_t ds_bytes = (size_t)v->n * v->hkv * sizeof(float);
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    assert_int_equal(cu->cuMemAlloc(&dq, (size_t)tq * v->hq * d + 16), 0);
    assert_int_equal(cu->cuMemAlloc(&dk, (size_t)tk * v->hkv * d + 16), 0);
    assert_int_equal(cu->cuMemAlloc(&dv, (size_t)tk * v->hkv * d + 16), 0);
    assert_int_equal(cu->cuMemAlloc(&dO, o_el * 2 + 16), 0);
    assert_int_equal(cu->cuMemAlloc(&dl, (size_t)v->hq * tq * 4 + 16), 0);
    assert_int_equal(cu->cuMemAlloc(&dcq, 4 * 9), 0);
    assert_int_equal(cu->cuMemAlloc(&dck, 4 * 9), 0);
    assert_int_equal(cu->cuMemcpyHtoD(dq, hq, (size_t)tq * v->hq * d), 0);
    assert_int_equal(cu->cuMemcpyHtoD(dk, hk, (size_t)tk * v->hkv * d), 0);
    assert_int_equal(cu->cuMemcpyHtoD(dv, hv, (size_t)tk * v->hkv * d), 0);
    assert_int_equal(cu->cuMemcpyHtoD(dcq, cq, 4 * (size_t)(v->n + 1)), 0);
    assert_int_equal(cu->cuMemcpyHtoD(dck, ck, 4 * (size_t)(v->n + 1)), 0);
    assert_int_equal(cu->cuMemsetD8(dO, 0xff, o_el * 2 + 16), 0);
    assert_int_equal(cu->cuMemsetD8(dl, 0xff, (size_t)v->hq * tq * 4 + 16), 0);
    for (int t = 0; t < 3; t++) {
        assert_int_equal(cu->cuMemAlloc(&dd[t], ds_bytes), 0);
        assert_int_equal(cu->cuMemcpyHtoD(dd[t], ds[t], ds_bytes), 0);
    }
    a.q_descale = dd[0], a.k_descale = dd[1], a.v_descale = dd[2], a.descale_batch_stride = v->hkv;
    a.q = dq, a.k = dk, a.v = dv, a.o = dO, a.lse = dl, a.cu_seqlens_q = dcq, a.cu_seqlens_k = dck;
    char text[256];
    int failed = forward_fetch(v->name, &a, o, o_el * 2, lse, (size_t)v->hq * tq * 4, text, sizeof text);
    fj_CUdeviceptr all[] = {dq, dk, dv, dO, dl, dcq, dck, dd[0], dd[1], dd[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cu->cuMemFree(all[i]);
    fj_context_pop(g_ctx);
    if (!failed) {
        row_check rc = {0, 0, 0, 0, 0, 0};
        double scale = 1.0 / sqrt((double)d);
        float *orow = malloc((size_t)d * sizeof *orow);
        assert_non_null(orow);
        int g = v->hq / v->hkv;
        for (int s = 0; s < v->n; s++)
            for (int h = 0; h < v->hq; h++)
                for (int i = 0; i < v->lq[s]; i++) {
                    size_t at = ((size_t)(cq[s] + i) * v->hq + h) * d;
                    for (int x = 0; x < d; x++) orow[x] = fj_half_to_f32(FAJIT_DTYPE_BF16, o[at + x]);
                    const double *qr = q[s].deq + ((size_t)h * v->lq[s] + i) * d;
                    size_t kv0 = (size_t)(h / g) * v->lk[s] * d;
                    check_row(&cs[s], qr, k[s].deq + kv0, vv[s].deq + kv0, scale, i, 0.0, orow,
                              lse[(size_t)h * tq + cq[s] + i], &rc);
                }
        free(orow);
        failed = report(v->name, &rc, text);
    }
    for (int s = 0; s < v->n; s++) tensor_free(&q[s]), tensor_free(&k[s]), tensor_free(&vv[s]);
    for (int t = 0; t < 3; t++) free(ds[t]);
    free(hq), free(hk), free(hv), free(o), free(lse);
    return failed;
}

static int run_varlen_any(const void *v) { return run_varlen(v); }

static void test_fp8_varlen(void **state)
{
    (void)state;
    assert_int_equal(run_table(k_varlen, sizeof k_varlen / sizeof k_varlen[0], sizeof k_varlen[0], run_varlen_any,
                               "varlen cases"), 0);
}

/* ---- decode: seqlens_k, split-KV, GQA packing, paged K/V ----------------------------------------------------
 * A KV cache as engines keep it: Q / O [B, Nq, Hq, D], K / V [B, Nk, Hkv, D] (or pools of pages [pages, page,
 * Hkv, D] behind a shuffled block table), e4m3 with descales [B][Hkv] as above. With lens, sequence b's length is by
 * b % 5: 1, a multiple of 64, Nk, random in [1, Nk], and for b % 5 = 4 by b / 5 % 3: 0, past Nk, -7 (the kernel clamps
 * to [0, Nk]); every K / V byte past a sequence's length is 0x7f (an e4m3 NaN), and paged, the table entries of pages
 * wholly past it name a spare page of NaN bytes: no output may depend on them. The reference is check_row on each
 * sequence's clamped length. want: text fajit_last_forward must hold (the kernel that ran). */
typedef struct fp8_dec_case {
    const char *name;
    int b, hq, hkv, nq, nk, d, causal;
    int lens, splits, page, out_f16, own_ws;
    int win, win_left, win_right, sinks;
    const char *want;
} fp8_dec_case;

static const fp8_dec_case k_decode[] = {
    /* name                                  b  hq hkv nq nk   d  causal lens splits page f16 ws | win L R sinks | want */
    {"dec d128 Nq1 GQA4 lens", 5, 8, 2, 1, 1000, 128, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, "br64 bc64 s3 sw128 w8"},
    {"dec d128 Nq16 GQA4 lens splits2 (64 rows packed)", 3, 8, 2, 16, 1000, 128, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0,
     "w8 ov causal seqlens split packgqa"},
    {"dec d128 Nq1 GQA8 lens splits7 O f16", 5, 16, 2, 1, 4099, 128, 0, 1, 7, 0, 1, 0, 0, 0, 0, 0, "7 splits"},
    {"dec d128 Nq1 MQA Nk17 splits2", 2, 8, 1, 1, 17, 128, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, "2 splits"},
    {"dec d64 Nq4 causal GQA4 lens", 5, 8, 2, 4, 1000, 64, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, "seqlens"},
    {"dec d128 Nq16 causal MHA splits3", 2, 4, 4, 16, 4099, 128, 1, 0, 3, 0, 0, 1, 0, 0, 0, 0, "3 splits"},
    {"dec d128 Nq16 GQA16 unpacked (rows > block)", 2, 32, 2, 16, 1000, 128, 1, 1, 2, 0, 0, 0, 0, 0, 0, 0, "2 splits"},
    {"dec paged p16 d128 Nq1 GQA4 lens", 5, 8, 2, 1, 1000, 128, 0, 1, 0, 16, 0, 0, 0, 0, 0, 0, "paged"},
    {"dec paged p64 d64 Nq1 MQA causal lens splits3", 5, 8, 1, 1, 4099, 64, 1, 1, 3, 64, 0, 0, 0, 0, 0, 0, "paged"},
    {"dec paged p256 d128 Nq4 GQA8 lens", 3, 16, 2, 4, 4099, 128, 1, 1, 0, 256, 1, 1, 0, 0, 0, 0, "paged"},
    {"dec d256 Nq1 GQA4 splits5", 3, 8, 2, 1, 1000, 256, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, "5 splits"},
    {"dec d256 Nq1 MQA heuristic splits", 1, 8, 1, 1, 4099, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "splits"},
    {"dec paged p64 d256 Nq1 GQA4 lens", 5, 8, 2, 1, 1000, 256, 1, 1, 0, 64, 0, 0, 0, 0, 0, 0, "paged"},
    {"dec d128 Nq1 GQA4 window (128,0) + sinks lens splits3", 5, 8, 2, 1, 1000, 128, 1, 1, 3, 0, 0, 0, 1, 128, 0, 1,
     "3 splits"},
    {"dec d128 Nq1 GQA4 Nk32k lens heuristic splits", 4, 32, 8, 1, 32768, 128, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, "splits"},
    /* prefill-sized queries on the wide tile (FJ_FP8_REGS_WIDE): D64 br192 bc160 narrows to a block_n that fits the
     * pages */
    {"dec paged p64 d64 Nq200 GQA2 lens", 2, 4, 2, 200, 1000, 64, 0, 1, 0, 64, 0, 0, 0, 0, 0, 0, "br192"},
};

static int dec_len(int b, int nk)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    int r = (int)(g_rng >> 33);
    switch (b % 5) {
    case 0: return 1;
    case 1: return nk >= 64 ? nk / 64 / 2 * 64 + 64 : nk;
    case 2: return nk;
    case 3: return 1 + r % nk;
    default: return (b / 5) % 3 == 0 ? 0 : (b / 5) % 3 == 1 ? nk + 1 + r % 1000 : -7;
    }
}

static int run_decode(const fp8_dec_case *c)
{
    fp8_case base = {c->name, c->b, c->hq, c->hkv, c->nq, c->nk, c->d, c->causal, 1, 0, c->out_f16, 0,
                     c->win, c->win_left, c->win_right, 0.0f, c->sinks, 0};
    fp8_tensor q, k, v;
    tensor_make(&base, c->hq, c->nq, c->hq / c->hkv, 0, &q); /* codes [B, N, H, D] */
    tensor_make(&base, c->hkv, c->nk, 1, 0, &k);
    tensor_make(&base, c->hkv, c->nk, 1, 0, &v);
    int d = c->d, *len = malloc((size_t)c->b * sizeof *len), *clamped = malloc((size_t)c->b * sizeof *clamped);
    assert_true(len && clamped);
    size_t row = (size_t)c->hkv * d; /* bytes of one key's row of every KV head */
    for (int b = 0; b < c->b; b++) {
        len[b] = c->lens ? dec_len(b, c->nk) : c->nk;
        clamped[b] = len[b] < 0 ? 0 : len[b] > c->nk ? c->nk : len[b];
        for (int r = clamped[b]; r < c->nk; r++) /* an unfilled cache: e4m3 NaN bytes past the length */
            memset(k.codes + ((size_t)b * c->nk + r) * row, 0x7f, row), memset(v.codes + ((size_t)b * c->nk + r) * row, 0x7f, row);
    }
    /* paged: sequence b's page p is pool page perm[b * max_pages + p]; pages wholly past its length name a spare */
    int max_pages = c->page ? (c->nk + c->page - 1) / c->page : 0, pool_pages = c->b * max_pages + 2;
    int *table = NULL;
    uint8_t *pk = NULL, *pv = NULL;
    size_t page_bytes = (size_t)c->page * row, kv_bytes = (size_t)c->b * c->nk * row;
    if (c->page) {
        int n = c->b * max_pages, *perm = malloc((size_t)n * sizeof *perm);
        table = malloc((size_t)n * sizeof *table);
        pk = malloc((size_t)pool_pages * page_bytes), pv = malloc((size_t)pool_pages * page_bytes);
        assert_true(perm && table && pk && pv);
        memset(pk, 0x7f, (size_t)pool_pages * page_bytes), memset(pv, 0x7f, (size_t)pool_pages * page_bytes);
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
            int j = (int)((g_rng >> 33) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int b = 0; b < c->b; b++)
            for (int pg = 0; pg < max_pages; pg++) {
                int at = perm[b * max_pages + pg], rows = c->nk - pg * c->page < c->page ? c->nk - pg * c->page : c->page;
                table[b * max_pages + pg] = pg * c->page >= clamped[b] ? n + pg % 2 : at;
                memcpy(pk + (size_t)at * page_bytes, k.codes + ((size_t)b * c->nk + (size_t)pg * c->page) * row, (size_t)rows * row);
                memcpy(pv + (size_t)at * page_bytes, v.codes + ((size_t)b * c->nk + (size_t)pg * c->page) * row, (size_t)rows * row);
            }
        kv_bytes = (size_t)pool_pages * page_bytes;
        free(perm);
    }
    size_t nq_el = (size_t)c->b * c->hq * c->nq * d, lse_n = (size_t)c->b * c->hq * c->nq;
    uint16_t *o = malloc(nq_el * 2);
    float *lse = malloc(lse_n * sizeof *lse), *sinks = malloc((size_t)c->hq * sizeof *sinks);
    assert_true(o && lse && sinks);
    for (int h = 0; h < c->hq; h++) sinks[h] = (float)(normal() + 1.0);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_E4M3, a.batch = c->b, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.seqlen_q = c->nq, a.seqlen_k = c->nk, a.head_dim = d, a.causal = c->causal;
    a.out_dtype = c->out_f16 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16;
    a.window = c->win, a.window_left = c->win ? c->win_left : 0, a.window_right = c->win ? c->win_right : 0;
    fajit_args_set_bnhd_strides(&a);
    a.num_splits = c->splits;
    assert_int_equal(fj_context_push(g_ctx), FAJIT_OK);
    fp8_dev dev = {{0}, 0};
    const float *const ds[3] = {q.descale, k.descale, v.descale};
    case_inputs(&dev, &a, q.codes, c->page ? pk : k.codes, c->page ? pv : v.codes, kv_bytes, ds, c->sinks ? sinks : NULL);
    if (c->lens) a.seqlens_k = put(&dev, len, (size_t)c->b * 4);
    if (c->page) {
        a.block_table = put(&dev, table, (size_t)c->b * max_pages * 4), a.max_pages = max_pages, a.page_size = c->page;
        a.k_stride[0] = a.v_stride[0] = (int64_t)c->page * c->hkv * d; /* [pages, page, Hkv, D] */
    }
    int failed = 0;
    if (c->own_ws) { /* the caller's workspace, of the size the library asks for */
        size_t bytes = 0;
        fajit_status st = fajit_attention_workspace_size(g_ctx, &a, NULL, &bytes);
        if (st != FAJIT_OK || (c->splits >= 2 && bytes == 0)) {
            printf("FAIL %-42s fajit_attention_workspace_size: %s, %zu bytes: %s\n", c->name, fajit_status_name(st),
                   bytes, fajit_errmsg());
            failed = 1;
        } else if (bytes) {
            a.workspace = put(&dev, NULL, bytes), a.workspace_bytes = bytes;
        }
    }
    char text[256];
    if (!failed) failed = forward_fetch(c->name, &a, o, nq_el * 2, lse, lse_n * 4, text, sizeof text);
    put_free(&dev);
    fj_context_pop(g_ctx);
    if (!failed && (!strstr(text, "sm_90a decode variant") || !strstr(text, c->want) || !strstr(text, "e4m3"))) {
        printf("FAIL %-42s ran \"%s\": expected the sm_90a FP8 decode variant with \"%s\"\n", c->name, text, c->want);
        failed = 1;
    }
    if (!failed) {
        row_check rc = {0, 0, 0, 0, 0, 0};
        double scale = 1.0 / sqrt((double)d);
        float *orow = malloc((size_t)d * sizeof *orow);
        assert_non_null(orow);
        int g = c->hq / c->hkv;
        for (int b = 0; b < c->b; b++) {
            fp8_case cb = base; /* sequence b: its clamped length (bottom-right causal on it) */
            cb.nk = clamped[b];
            for (int h = 0; h < c->hq; h++)
                for (int i = 0; i < c->nq; i++) {
                    size_t at = (((size_t)b * c->nq + i) * c->hq + h) * d;
                    for (int x = 0; x < d; x++)
                        orow[x] = fj_half_to_f32(c->out_f16 ? FAJIT_DTYPE_F16 : FAJIT_DTYPE_BF16, o[at + x]);
                    const double *qr = q.deq + (((size_t)b * c->hq + h) * c->nq + i) * d;
                    size_t kv0 = ((size_t)b * c->hkv + h / g) * c->nk * d;
                    check_row(&cb, qr, k.deq + kv0, v.deq + kv0, scale, i, (double)sinks[h], orow,
                              lse[((size_t)b * c->hq + h) * c->nq + i], &rc);
                }
        }
        free(orow);
        failed = report(c->name, &rc, text);
    }
    tensor_free(&q), tensor_free(&k), tensor_free(&v);
    free(o), free(lse), free(sinks), free(len), free(clamped), free(table), free(pk), free(pv);
    return failed;
}

static int run_decode_any(const void *c) { return run_decode(c); }

static void test_fp8_decode(void **state)
{
    (void)state;
    assert_int_equal(run_table(k_decode, sizeof k_decode / sizeof k_decode[0], sizeof k_decode[0], run_decode_any,
                               "decode cases"), 0);
}

int main(void)
{
    if (!(g_ctx = fj_test_gpu_context())) return 1;
    if (strcmp(fajit_context_sm(g_ctx), "sm_90") != 0) {
        char sm[32];
        snprintf(sm, sizeof sm, "%s", fajit_context_sm(g_ctx));
        fajit_context_destroy(g_ctx);
        fj_test_skip_all("the FP8 kernels need an sm_90 GPU (H100 / H200); this one is %s", sm);
    }
    printf("device: %s (%s)\n", g_ctx->device_name, fajit_context_sm(g_ctx));
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fp8_cases), cmocka_unit_test(test_fp8_varlen),
                                       cmocka_unit_test(test_fp8_decode)};
    int rc = cmocka_run_group_tests_name("gpu_fp8", tests, NULL, NULL);
    fajit_context_destroy(g_ctx);
    return rc;
}
