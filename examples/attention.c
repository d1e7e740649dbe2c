/*
 * attention.c - the smallest complete use of an installed libfajit, built against the installed package
 * (see examples/CMakeLists.txt for find_package(fajit), examples/Makefile for pkg-config).
 *
 *  1. Without a GPU: fill a config for head dim 128 (the heuristic's tiles, sm_80 path) and generate
 *     its PTX.
 *  2. With a GPU: run one forward, BF16, B=1 H=2 Nq=100 Nk=77 D=64, causal, on device memory (the CUDA
 *     driver API is loaded with dlopen, as libfajit does, so this builds with no CUDA headers), and
 *     compare every element of O with a double-precision reference on the CPU computed from the same
 *     bf16 inputs: |O - ref| <= 2e-2 (output rounding to bf16 and P rounded to bf16 in the kernel).
 *     Without a GPU this part prints "SKIP: <reason>" and the program still succeeds.
 *
 * Exit status: 0 success (or the GPU part skipped), 1 a failure, with the library's message.
 *   usage: ./fajit_example
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fajit.h>

/* ---- bf16 <-> float (round to nearest even) ------------------------------------------------------- */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- 1. PTX, no GPU ----------------------------------------------------------------------------- */
static int generate_ptx(void)
{
    fajit_config cfg = {0};
    cfg.head_dim = 128;
    char *ptx = NULL, text[160];
    size_t len = 0;
    if (fajit_config_fill(NULL, NULL, &cfg) != FAJIT_OK || fajit_generate_ptx(&cfg, 1, &ptx, &len) != FAJIT_OK) {
        fprintf(stderr, "ptx: %s\n", fajit_errmsg());
        return 1;
    }
    fajit_config_format(&cfg, text, sizeof text);
    const char *entry = strstr(ptx, ".entry");
    printf("ptx: %zu bytes for \"%s\", %s\n", len, text, entry ? "has an .entry" : "NO .entry");
    fajit_free(ptx);
    return entry ? 0 : 1;
}

/* ---- 2. one forward on a GPU -------------------------------------------------------------------- */
enum { B = 1, H = 2, NQ = 100, NK = 77, D = 64 };

struct cuda {
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*primary_retain)(void **, int);
    int (*ctx_set)(void *);
    int (*alloc)(uint64_t *, size_t);
    int (*free)(uint64_t);
    int (*htod)(uint64_t, const void *, size_t);
    int (*dtoh)(void *, uint64_t, size_t);
    int (*sync)(void);
};

static int cuda_load(struct cuda *cu)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 0;
    *(void **)&cu->init = dlsym(h, "cuInit");
    *(void **)&cu->device_get = dlsym(h, "cuDeviceGet");
    *(void **)&cu->primary_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&cu->ctx_set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu->alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&cu->free = dlsym(h, "cuMemFree_v2");
    *(void **)&cu->htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&cu->dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    *(void **)&cu->sync = dlsym(h, "cuCtxSynchronize");
    return cu->init && cu->device_get && cu->primary_retain && cu->ctx_set && cu->alloc && cu->free && cu->htod &&
           cu->dtoh && cu->sync;
}

/* O[b,h,i,:] in double from the bf16 inputs ([B,H,N,D] contiguous), causal bottom-right aligned. */
static double reference(const uint16_t *q, const uint16_t *k, const uint16_t *v, int bh, int i, int d, double scale)
{
    double s[NK], m = -INFINITY, l = 0, o = 0;
    int last = i + (NK - NQ); /* query i sees keys j <= i + Nk - Nq */
    if (last < 0) return 0.0;  /* no key: O = 0 */
    const uint16_t *qi = q + ((size_t)bh * NQ + i) * D;
    for (int j = 0; j <= last && j < NK; j++) {
        const uint16_t *kj = k + ((size_t)bh * NK + j) * D;
        s[j] = 0;
        for (int c = 0; c < D; c++) s[j] += (double)bf16_to_f32(qi[c]) * bf16_to_f32(kj[c]);
        s[j] *= scale;
        m = s[j] > m ? s[j] : m;
    }
    for (int j = 0; j <= last && j < NK; j++) {
        double p = exp(s[j] - m);
        l += p;
        o += p * bf16_to_f32(v[((size_t)bh * NK + j) * D + d]);
    }
    return o / l;
}

static int compare(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o)
{
    double worst = 0, tol = 2e-2;
    long bad = 0;
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < NQ; i++)
            for (int d = 0; d < D; d++) {
                double got = bf16_to_f32(o[((size_t)bh * NQ + i) * D + d]);
                double err = fabs(got - reference(q, k, v, bh, i, d, 1.0 / sqrt(D)));
                if (!(err <= tol)) bad++; /* NaN fails too */
                if (err > worst || err != err) worst = err;
            }
    printf("forward: %s, max |O - ref| = %.3g over %d elements (tolerance %.0e): %s\n", fajit_last_forward(), worst,
           B * H * NQ * D, tol, bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}

static int run_forward(void)
{
    fajit_context *ctx = NULL;
    fajit_status st = fajit_context_create(NULL, &ctx);
    struct cuda cu;
    if (st == FAJIT_ERR_LIBRARY_MISSING || st == FAJIT_ERR_NO_DEVICE) {
        printf("SKIP: forward: no GPU (%s): %s\n", fajit_status_name(st), fajit_errmsg());
        return 0;
    }
    if (st != FAJIT_OK || !cuda_load(&cu)) {
        fprintf(stderr, "forward: %s\n", st != FAJIT_OK ? fajit_errmsg() : "libcuda.so.1 lacks a driver call");
        fajit_context_destroy(ctx);
        return 1;
    }
    size_t nq = (size_t)B * H * NQ * D, nk = (size_t)B * H * NK * D;
    uint16_t *h[4] = {malloc(nq * 2), malloc(nk * 2), malloc(nk * 2), malloc(nq * 2)}; /* q k v o */
    size_t n[4] = {nq, nk, nk, nq};
    uint64_t dev[4] = {0};
    void *pctx = NULL;
    int dev0 = 0;
    int ok = h[0] && h[1] && h[2] && h[3] && cu.init(0) == 0 && cu.device_get(&dev0, 0) == 0 &&
             cu.primary_retain(&pctx, dev0) == 0 && cu.ctx_set(pctx) == 0;
    srand(1);
    for (int t = 0; t < 4 && ok; t++) {
        for (size_t e = 0; e < n[t]; e++) h[t][e] = f32_to_bf16(t < 3 ? (float)rand() / RAND_MAX * 2 - 1 : NAN);
        ok = cu.alloc(&dev[t], n[t] * 2) == 0 && cu.htod(dev[t], h[t], n[t] * 2) == 0; /* O poisoned with NaN */
    }
    fajit_attention_args a = {0};
    a.dtype = FAJIT_DTYPE_BF16;
    a.batch = B, a.heads_q = H, a.heads_kv = H, a.seqlen_q = NQ, a.seqlen_k = NK, a.head_dim = D;
    a.q = dev[0], a.k = dev[1], a.v = dev[2], a.o = dev[3];
    a.causal = 1;
    fajit_args_set_bhnd_strides(&a);
    int rc = 1;
    if (!ok) fprintf(stderr, "forward: a CUDA driver call failed while setting up the inputs\n");
    else if (fajit_attention_forward(ctx, &a, NULL) != FAJIT_OK) fprintf(stderr, "forward: %s\n", fajit_errmsg());
    else if (cu.sync() != 0 || cu.dtoh(h[3], dev[3], nq * 2) != 0) fprintf(stderr, "forward: reading O back failed\n");
    else rc = compare(h[0], h[1], h[2], h[3]);
    for (int t = 0; t < 4; t++) {
        if (dev[t]) cu.free(dev[t]);
        free(h[t]);
    }
    fajit_context_destroy(ctx);
    return rc;
}

int main(void)
{
    printf("fajit %s (header %s)\n", fajit_version(), FAJIT_VERSION);
    int rc = generate_ptx();
    return rc ? rc : run_forward();
}
