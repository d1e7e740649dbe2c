/*
 * jit_worker.c - background specialization: one worker thread per context compiles the configs the policy
 * (policy.c) chose but found no kernel for, while their calls run a stand-in; each finished kernel takes over
 * every choice that waits for it.
 *
 * Locking: the queue, the flags and the choices are under ctx->lock, which the worker never holds while it
 * compiles (the store inserts the kernel under the lock itself). fajit_context_destroy calls fj_jit_stop
 * first: the compile under way finishes (the compilers cannot be interrupted), the rest of the queue is
 * dropped, and the thread is joined before anything it could touch is freed.
 */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "base/error.h"
#include "kernel_store.h"

static fajit_status jit_compile_default(fajit_context *ctx, const fajit_config *cfg, fajit_kernel **kernel_out)
{
    return fj_store_get(ctx, cfg, 0, 0, kernel_out, NULL);
}

void fj_jit_set_compiler(fajit_context *ctx, fj_jit_compile_fn fn)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->jit_compile = fn;
    pthread_mutex_unlock(&ctx->lock);
}

/* The finished kernel of cfg (NULL: its compile failed) for every choice waiting for it; under the lock. A
 * failed compile leaves the stand-in serving as the choice's kernel for good (no longer pending: it is not
 * tried again in this context, and calls report the stand-in's own source; the reason is in the note). */
static void jit_finish_locked(fajit_context *ctx, const fajit_config *cfg, fajit_kernel *k)
{
    for (fj_choice *c = ctx->choices; c; c = c->next) {
        if (!c->pending || memcmp(&c->cfg, cfg, sizeof *cfg) != 0) continue;
        if (k) c->kernel = k;
        c->pending = 0;
    }
    if (k) ctx->jit_done++;
    else ctx->jit_failed++;
}

static void *jit_main(void *arg)
{
    fajit_context *ctx = arg;
    pthread_mutex_lock(&ctx->lock);
    for (;;) {
        while (!ctx->jit_stop && !ctx->jit_jobs) pthread_cond_wait(&ctx->jit_cond, &ctx->lock);
        if (ctx->jit_stop) break;
        fj_jit_job *job = ctx->jit_jobs;
        ctx->jit_jobs = job->next;
        ctx->jit_busy = 1;
        fj_jit_compile_fn compile = ctx->jit_compile ? ctx->jit_compile : jit_compile_default;
        pthread_mutex_unlock(&ctx->lock);
        fajit_kernel *k = NULL;
        char text[FJ_CONFIG_TEXT_MAX];
        if (compile(ctx, &job->cfg, &k) != FAJIT_OK || !k) {
            fajit_config_format(&job->cfg, text, sizeof text);
            fj_context_note(ctx, "background compile of \"%s\" failed (its stand-in keeps serving): %s", text,
                            fajit_errmsg());
            k = NULL;
        }
        pthread_mutex_lock(&ctx->lock);
        jit_finish_locked(ctx, &job->cfg, k);
        ctx->jit_busy = 0;
        free(job);
        pthread_cond_broadcast(&ctx->jit_cond);
    }
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

fajit_status fj_jit_enqueue(fajit_context *ctx, const fajit_config *cfg)
{
    fj_jit_job *job = calloc(1, sizeof *job);
    if (!job) return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "background compile: out of host memory");
    job->cfg = *cfg;
    fajit_status st = FAJIT_OK;
    pthread_mutex_lock(&ctx->lock);
    fj_jit_job **tail = &ctx->jit_jobs;
    int dup = 0;
    for (; *tail; tail = &(*tail)->next) dup |= memcmp(&(*tail)->cfg, cfg, sizeof *cfg) == 0;
    if (!dup && !ctx->jit_stop && !ctx->jit_started) {
        if (pthread_create(&ctx->jit_thread, NULL, jit_main, ctx) == 0) ctx->jit_started = 1;
        else st = fj_fail(FAJIT_ERR_INTERNAL, "background compile: pthread_create failed");
    }
    if (!dup && st == FAJIT_OK && !ctx->jit_stop) {
        *tail = job;
        job = NULL;
        pthread_cond_broadcast(&ctx->jit_cond);
    }
    pthread_mutex_unlock(&ctx->lock);
    free(job);
    return st;
}

void fj_jit_wait_idle(fajit_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    while (ctx->jit_started && !ctx->jit_stop && (ctx->jit_jobs || ctx->jit_busy))
        pthread_cond_wait(&ctx->jit_cond, &ctx->lock);
    pthread_mutex_unlock(&ctx->lock);
}

void fj_jit_stop(fajit_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->jit_stop = 1;
    fj_jit_job *jobs = ctx->jit_jobs;
    ctx->jit_jobs = NULL;
    int started = ctx->jit_started;
    pthread_cond_broadcast(&ctx->jit_cond);
    pthread_mutex_unlock(&ctx->lock);
    if (started) pthread_join(ctx->jit_thread, NULL);
    for (fj_jit_job *next; jobs; jobs = next) {
        next = jobs->next;
        free(jobs);
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->jit_started = 0;
    pthread_mutex_unlock(&ctx->lock);
}
