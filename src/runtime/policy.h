/*
 * policy.h - which kernel a call without a config runs (policy.c), as a decision that needs no GPU.
 */
#ifndef FJ_POLICY_H
#define FJ_POLICY_H

/* What a call does when the kernel of its chosen config is not loaded (fj_policy_decide). */
typedef enum fj_policy_action {
    FJ_POLICY_SERVE,           /* the chosen kernel is at hand (memory, prebuilt, disk): run it */
    FJ_POLICY_STANDIN_COMPILE, /* run the stand-in; the worker compiles the chosen config */
    FJ_POLICY_STANDIN,         /* run the stand-in; nothing is compiled (a CUDA-graph capture) */
    FJ_POLICY_COMPILE,         /* compile the chosen config now, on the calling thread, and run it */
    FJ_POLICY_REFUSE           /* a capture with neither: fail, naming the config */
} fj_policy_action;

/*
 * have_chosen: the chosen config's kernel is loaded or loads without compiling; have_standin: a kernel of the
 * same problem (dtype, head dim, mask, variants) does; async: FAJIT_JIT is not "sync"; capturing: the call's
 * stream is capturing a CUDA graph. A capture never compiles; a synchronous context never runs a stand-in.
 */
fj_policy_action fj_policy_decide(int have_chosen, int have_standin, int async, int capturing);

#include "fajit.h"

/* The kernel of a given config (variant: FJ_VARIANT_* bits, 0 = plain) for a call on `stream`: memory, prebuilt,
 * disk, else compiled now - except while the stream captures a CUDA graph: then FAJIT_ERR_UNSUPPORTED naming the
 * kernel. Its source is recorded for fajit_last_forward_source (not the combine kernel's). */
struct fajit_kernel;
fajit_status fj_policy_get(fajit_context *ctx, const fajit_config *cfg, unsigned variant, void *stream,
                           struct fajit_kernel **k);

#endif
