/*
 * source_compile.c - the last source of the kernel store: generate the plan's PTX and compile it for the
 * request's target (compile.c: nvJitLink, or NVRTC whole-program for setmaxnreg kernels). The PTX stays in the
 * request for the disk source to store beside the cubin.
 */
#include <stdlib.h>

#include "compile.h"
#include "kernel_store.h"

static fajit_status compile_fetch(fj_kernel_req *r, const void **cubin, size_t *size)
{
    void *out = NULL;
    fajit_status st = fj_generate_ptx_plan(r->plan, 0, &r->ptx, &r->ptx_len);
    if (st == FAJIT_OK) st = fj_compile_kernel(r->plan, r->ptx, r->ptx_len, r->target, &out, size, NULL);
    *cubin = out;
    return st;
}

static void compile_release(fj_kernel_req *r, const void *cubin)
{
    (void)r;
    free((void *)cubin);
}

const fj_kernel_source fj_source_compiler = {"compiler", FAJIT_SOURCE_COMPILED, 1, compile_fetch, compile_release,
                                             NULL, NULL};
