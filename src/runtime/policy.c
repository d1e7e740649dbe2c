/*
 * policy.c - which kernel a forward without a config runs, in one place:
 *
 *   1. the shape class (forward.c: fj_forward_class) and its remembered choice, if any
 *   2. the config: fajit_config_fill (the tuned winner of the class, else the built-in table)
 *   3. its kernel from the store (kernel_store.c) without compiling: memory, prebuilt, disk
 *   4. if none, fj_policy_decide: a stand-in while the worker compiles (async), a compile now (sync, or no
 *      stand-in), or a refusal (a CUDA-graph capture, which never compiles)
 *
 * Stand-ins serve forwards without a config that are not decode calls (a decode call's split count and
 * workspace follow its tile); those, a given config and the decode variants compile first, as before, except
 * in a capture. The stand-in is a kernel of the same problem - dtype, head dim, mask, no attention variants -
 * that loads without compiling: the built-in table's config for the class (what the prebuilt kernels are),
 * else any prebuilt entry of the problem for the device. Every tile of a problem computes the same function,
 * so the stand-in's results are the chosen kernel's within rounding (not bitwise).
 *
 * Choices live in ctx->choices under ctx->lock; the worker (jit_worker.c) swaps a pending choice's stand-in for
 * the compiled kernel.
 */
#include "policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fill.h"
#include "context.h"
#include "decode.h"
#include "base/error.h"
#include "forward.h"
#include "fp8_args.h"
#include "kernel_store.h"
#include "prebuilt.h"
#include "tune_file.h"
#include "variants.h"

fj_policy_action fj_policy_decide(int have_chosen, int have_standin, int async, int capturing)
{
    if (have_chosen) return FJ_POLICY_SERVE;
    if (capturing) return have_standin ? FJ_POLICY_STANDIN : FJ_POLICY_REFUSE;
    if (async && have_standin) return FJ_POLICY_STANDIN_COMPILE;
    return FJ_POLICY_COMPILE;
}

/* ---------------------------------------------------------------------------------------------------
 * Shape-class choices
 * ------------------------------------------------------------------------------------------------- */
static fj_choice *choice_find_locked(fajit_context *ctx, const char *key)
{
    for (fj_choice *c = ctx->choices; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    return NULL;
}

fajit_kernel *fj_context_choice_find(fajit_context *ctx, const char *key, fajit_config *cfg_out)
{
    fajit_kernel *k = NULL;
    pthread_mutex_lock(&ctx->lock);
    fj_choice *c = choice_find_locked(ctx, key);
    if (c) {
        k = c->kernel;
        if (cfg_out) *cfg_out = c->cfg;
    }
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

void fj_context_choices_clear(fajit_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    fj_choice *c = ctx->choices;
    ctx->choices = NULL;
    pthread_mutex_unlock(&ctx->lock);
    for (fj_choice *next; c; c = next) { /* kernels stay: they belong to the kernel list */
        next = c->next;
        free(c);
    }
}

/* Remember a choice (first writer wins). pending: kernel is a stand-in for cfg; queued: cfg's compile is queued. */
static fajit_status choice_add(fajit_context *ctx, const char *key, const fajit_config *cfg, fajit_kernel *kernel,
                               int pending, int queued)
{
    fj_choice *c = calloc(1, sizeof *c);
    if (!c) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "fj_choice: out of host memory");
    snprintf(c->key, sizeof c->key, "%s", key);
    c->cfg = *cfg;
    c->kernel = kernel;
    c->pending = pending;
    c->queued = queued;
    pthread_mutex_lock(&ctx->lock);
    fj_choice *old = choice_find_locked(ctx, key);
    if (!old) {
        c->next = ctx->choices;
        ctx->choices = c;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (old) free(c);
    return FAJIT_OK;
}

/* The chosen kernel of key's pending choice, compiled on the calling thread. */
static void choice_settle(fajit_context *ctx, const char *key, fajit_kernel *k)
{
    pthread_mutex_lock(&ctx->lock);
    fj_choice *c = choice_find_locked(ctx, key);
    if (c && c->pending) c->kernel = k, c->pending = 0;
    pthread_mutex_unlock(&ctx->lock);
}

fajit_status fj_context_choice_add(fajit_context *ctx, const char *key, const fajit_config *cfg, fajit_kernel *kernel)
{
    return choice_add(ctx, key, cfg, kernel, 0, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Capture and the stand-in
 * ------------------------------------------------------------------------------------------------- */
/* 1 when the call's stream is capturing a CUDA graph (or its capture was invalidated): nothing may compile. */
static int stream_capturing(fajit_context *ctx, void *stream)
{
    int status = FJ_CU_STREAM_CAPTURE_STATUS_NONE;
    if (!ctx->cu || !ctx->cu->cuStreamIsCapturing || fj_context_push(ctx) != FAJIT_OK) return 0;
    fj_CUresult rc = ctx->cu->cuStreamIsCapturing((fj_CUstream)stream, &status);
    fj_context_pop(ctx);
    return rc == FJ_CUDA_SUCCESS && status != FJ_CU_STREAM_CAPTURE_STATUS_NONE;
}

typedef struct standin_search {
    fajit_context *ctx;
    const fajit_config *want; /* the chosen config: its arch path, dtype, head dim, mask */
    fajit_kernel *found;
} standin_search;

static int standin_try_entry(const char *text, const char *target, void *arg)
{
    standin_search *s = arg;
    fajit_config c;
    fajit_kernel *k = NULL;
    (void)target; /* fj_store_get asks the prebuilt source for the device's target */
    if (fj_tune_parse_config(text, &c) || c.arch != s->want->arch || c.dtype != s->want->dtype ||
        c.head_dim != s->want->head_dim || c.causal != s->want->causal || c.mods ||
        c.kv_dtype != s->want->kv_dtype || c.out_dtype != s->want->out_dtype)
        return 0;
    if (fj_store_get(s->ctx, &c, 0, FJ_STORE_NO_COMPILE, &k, NULL) != FAJIT_OK || !k) {
        fj_clear_error();
        return 0;
    }
    s->found = k;
    return 1;
}

/* A kernel of chosen's problem that loads without compiling, or NULL: the table's config for the class, else
 * any prebuilt entry of the problem. Attention variants and FP8 K/V or output have none (no prebuilt kernel
 * has them). */
static fajit_kernel *standin_find(fajit_context *ctx, const fajit_shape *shape, const fajit_config *chosen)
{
    fajit_kernel *k = NULL;
    if (chosen->mods || chosen->kv_dtype || chosen->out_dtype) return NULL; /* no prebuilt kernel has them */
    fajit_config d = {.arch = chosen->arch, .dtype = chosen->dtype, .head_dim = chosen->head_dim,
                      .causal = chosen->causal};
    if (fj_config_fill_default(ctx, shape, &d) == FAJIT_OK && memcmp(&d, chosen, sizeof d) != 0 &&
        fj_store_get(ctx, &d, 0, FJ_STORE_NO_COMPILE, &k, NULL) == FAJIT_OK && k)
        return k;
    fj_clear_error();
    standin_search s = {ctx, chosen, NULL};
    fj_prebuilt_each(standin_try_entry, &s);
    return s.found;
}

/* ---------------------------------------------------------------------------------------------------
 * The choice of a call without a config
 * ------------------------------------------------------------------------------------------------- */
/* The remembered choice of key: its kernel (a stand-in while pending, whose compile is queued here if it was
 * not yet and the stream is not capturing). 0 when there is none. */
static int choose_remembered(fajit_context *ctx, const char *key, void *stream, fajit_kernel **k)
{
    fajit_config cfg;
    int queue = 0;
    pthread_mutex_lock(&ctx->lock);
    fj_choice *c = choice_find_locked(ctx, key);
    if (c) {
        *k = c->kernel;
        cfg = c->cfg;
        queue = c->pending && !c->queued;
        fj_forward_set_source(c->pending ? FAJIT_SOURCE_FALLBACK : FAJIT_SOURCE_MEMORY, c->pending ? &c->cfg : NULL);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (!c) return 0;
    if (queue && !stream_capturing(ctx, stream) && fj_jit_enqueue(ctx, &cfg) == FAJIT_OK) {
        pthread_mutex_lock(&ctx->lock);
        if ((c = choice_find_locked(ctx, key)) != NULL) c->queued = 1;
        pthread_mutex_unlock(&ctx->lock);
    }
    return 1;
}

/* "config \"...\" is not compiled and ... capturing": the refusal of a capture. */
static fajit_status refuse_in_capture(const fajit_config *cfg, const char *key, void *stream)
{
    char text[FJ_CONFIG_TEXT_MAX];
    fajit_config_format(cfg, text, sizeof text);
    return fj_fail(FAJIT_ERR_UNSUPPORTED, "config \"%s\" (shape class \"%s\") is not compiled, and stream %p is "
                                          "capturing a CUDA graph, where fajit never compiles; run the call once "
                                          "before the capture (or keep the disk cache warm) so that its kernel is "
                                          "loaded",
                   text, key, stream);
}

fajit_status fj_forward_choose(fajit_context *ctx, const fajit_attention_args *a, fajit_arch path, int accurate,
                               fajit_kernel **k)
{
    char key[FJ_CHOICE_KEY_MAX];
    fajit_shape shape;
    fajit_cache_source source = FAJIT_SOURCE_MEMORY;
    int n = fj_forward_class(a, key, sizeof key, &shape);
    if (path != FAJIT_ARCH_AUTO && n >= 0 && (size_t)n < sizeof key)
        n += snprintf(key + n, sizeof key - (size_t)n, " %s", fj_arch_path_name(path));
    if (accurate == 1 && n >= 0 && (size_t)n < sizeof key) snprintf(key + n, sizeof key - (size_t)n, " acc");
    if (choose_remembered(ctx, key, a->stream, k)) return FAJIT_OK;
    fajit_config cfg = {.arch = path, .dtype = a->dtype, .head_dim = a->head_dim, .causal = a->causal,
                        .mods = fj_variant_mods(a), .accurate = accurate == 1};
    fj_fp8_args f;
    fj_fp8_read(a, &f);
    cfg.kv_dtype = f.kv_dtype_given;
    cfg.out_dtype = f.out_dtype_given;
    fajit_status st = fj_forward_fill(ctx, &shape, a, &cfg); /* (a window's length: in the key, fj_forward_class) */
    if (st != FAJIT_OK) return fj_fail_context(st, "choosing a config for shape class \"%s\"", key);
    if ((st = fj_store_get(ctx, &cfg, 0, FJ_STORE_NO_COMPILE, k, &source)) != FAJIT_OK) return st;
    int capturing = !*k && stream_capturing(ctx, a->stream);
    /* a stand-in only for the call's own kernel (not the sm_80 kernel a decode variant or the TMA fallback
     * starts from) and not for decode calls, whose split count and workspace follow the tile: a workspace sized
     * by fajit_attention_workspace_size must fit the call after it (a capture takes one anyway) */
    int async = ctx->jit_mode == FJ_JIT_ASYNC && path == FAJIT_ARCH_AUTO && !fj_decode_wanted(ctx, a);
    fajit_kernel *standin = NULL;
    if (!*k && (capturing || async)) standin = standin_find(ctx, &shape, &cfg);
    switch (fj_policy_decide(*k != NULL, standin != NULL, async, capturing)) {
    case FJ_POLICY_SERVE:
        break;
    case FJ_POLICY_STANDIN_COMPILE:
    case FJ_POLICY_STANDIN:
        /* the choice first, so that the worker finds it whenever it finishes */
        *k = standin;
        if ((st = choice_add(ctx, key, &cfg, standin, 1, !capturing)) != FAJIT_OK) return st;
        if (capturing || fj_jit_enqueue(ctx, &cfg) == FAJIT_OK) {
            fj_forward_set_source(FAJIT_SOURCE_FALLBACK, &cfg);
            return FAJIT_OK;
        }
        fj_clear_error(); /* no worker thread: compile now instead */
        if ((st = fj_store_get(ctx, &cfg, 0, 0, k, &source)) != FAJIT_OK) return st;
        choice_settle(ctx, key, *k);
        fj_forward_set_source(source, NULL);
        return FAJIT_OK;
    case FJ_POLICY_COMPILE:
        if ((st = fj_store_get(ctx, &cfg, 0, 0, k, &source)) != FAJIT_OK) return st;
        break;
    case FJ_POLICY_REFUSE:
        return refuse_in_capture(&cfg, key, a->stream);
    }
    fj_forward_set_source(source, NULL);
    return choice_add(ctx, key, &cfg, *k, 0, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * A given config (and the decode variants' kernels): compiled now, except in a capture
 * ------------------------------------------------------------------------------------------------- */
fajit_status fj_policy_get(fajit_context *ctx, const fajit_config *cfg, unsigned variant, void *stream,
                           fajit_kernel **k)
{
    fajit_cache_source source = FAJIT_SOURCE_MEMORY;
    fajit_status st = fj_store_get(ctx, cfg, variant, FJ_STORE_NO_COMPILE, k, &source);
    if (st == FAJIT_OK && !*k) {
        if (stream_capturing(ctx, stream)) {
            char text[FJ_CONFIG_TEXT_MAX];
            fj_plan plan;
            if (fj_plan_build_variant(cfg, variant, &plan) != FAJIT_OK || fj_plan_format(&plan, text, sizeof text) < 0)
                fajit_config_format(cfg, text, sizeof text);
            return fj_fail(FAJIT_ERR_UNSUPPORTED, "kernel \"%s\" is not compiled, and stream %p is capturing a CUDA "
                                                  "graph, where fajit never compiles; run the call once before the "
                                                  "capture so that its kernel is loaded",
                           text, stream);
        }
        st = fj_store_get(ctx, cfg, variant, 0, k, &source);
    }
    if (st == FAJIT_OK && variant != FJ_VARIANT_COMBINE) fj_forward_set_source(source, NULL);
    return st;
}
