/*
 * generate.c - put a kernel module together: teaching header, PTX module header, entry, register
 * declarations, body. Also the public fajit_generate_ptx / fajit_explain calls.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "kernel_abi.h"
#include "ptx_templates/common.h"

static void module_header(const fj_plan *p, int verbosity, fj_buf *out)
{
    char cfg[192];
    fj_plan_format(p, cfg, sizeof cfg);
    fj_buf_printf(out, "// fajit %s (%s): %s, %s\n", FAJIT_VERSION, FJ_CODEGEN_VERSION,
                  p->variant & FJ_VARIANT_COMBINE ? "split-KV combine" : "forward attention", cfg);
    if (verbosity >= 2 && !(p->variant & FJ_VARIANT_COMBINE)) {
        fj_buf_puts(out, "//\n");
        fj_plan_describe(p, out, "// ");
        fj_buf_printf(out, "//\n// Parameters: one struct %s (src/codegen/kernel_abi.h), read with ld.param.\n",
                      p->variant ? (p->ws ? "fj_fwd_params_tma_decode" : "fj_fwd_params_decode")
                                 : "fj_fwd_params");
    }
    fj_buf_printf(out, PTX_MODULE_HEADER, p->arch->ptx_isa_major, p->arch->ptx_isa_minor, p->arch->name);
    fj_buf_puts(out, "\n");
}

fajit_status fj_generate_ptx_plan(const fj_plan *p, int verbosity, char **out, size_t *len)
{
    if (verbosity < 0 || verbosity > 2)
        return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "verbosity = %d: must be 0, 1 or 2", verbosity);
    fj_emit e;
    fj_kctx k;
    fj_emit_init(&e, verbosity);
    memset(&k, 0, sizeof k);
    k.e = &e;
    k.p = p;
    if (p->griddep && (p->variant & FJ_VARIANT_SPLIT)) {
        fj_comment(&e, 1, "programmatic dependent launch: the combine kernel may start once every CTA of this grid has "
                          "run this (it waits for this grid's end and memory before it reads a partial)");
        fj_ins(&e, "griddepcontrol.launch_dependents");
    }
    if (p->variant & FJ_VARIANT_COMBINE) fj_emit_combine_kernel(&e, p);
    else if (p->backend->async) fj_emit_fwd_ws_kernel(&k); /* the warp-specialized frame (sm_90a, sm_100a) */
    else fj_emit_fwd_kernel(&k);

    fj_buf mod;
    fj_buf_init(&mod);
    module_header(p, verbosity, &mod);
    fj_buf_printf(&mod, PTX_ENTRY_OPEN, fj_plan_entry(p), p->params_align, p->params_bytes, p->threads,
                  fj_plan_ctas_per_sm(p));
    fj_emit_declare_banks(&e, &mod);
    fj_buf_puts(&mod, e.body.data ? e.body.data : "");
    fj_buf_puts(&mod, PTX_ENTRY_CLOSE);
    int body_failed = e.body.failed;
    char err[sizeof e.err];
    memcpy(err, e.err, sizeof err);
    fj_emit_free(&e);
    if (err[0]) {
        fj_buf_free(&mod);
        return fj_fail(FAJIT_ERR_INTERNAL, "code generation: %s", err);
    }
    if (body_failed || mod.failed) {
        fj_buf_free(&mod);
        return fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "code generation: out of memory");
    }
    *out = fj_buf_take(&mod, len);
    return *out ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "code generation: out of memory");
}

fajit_status fajit_generate_ptx(const fajit_config *cfg, int verbosity, char **ptx_out, size_t *len_out)
{
    fj_clear_error();
    if (!ptx_out) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "ptx_out: NULL pointer");
    *ptx_out = NULL;
    fj_plan plan;
    fajit_status st = fj_plan_build(cfg, &plan);
    if (st != FAJIT_OK) return st;
    return fj_generate_ptx_plan(&plan, verbosity, ptx_out, len_out);
}

fajit_status fajit_explain(const fajit_config *cfg, char **text_out) { return fj_explain_variant(cfg, 0, text_out); }

fajit_status fj_explain_variant(const fajit_config *cfg, unsigned variant, char **text_out)
{
    fj_clear_error();
    if (!text_out) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "text_out: NULL pointer");
    *text_out = NULL;
    fj_plan plan;
    fajit_status st = fj_plan_build_variant(cfg, variant, &plan);
    if (st != FAJIT_OK) return st;
    fj_buf b;
    fj_buf_init(&b);
    fj_plan_describe(&plan, &b, "");
    *text_out = fj_buf_take(&b, NULL);
    return *text_out ? FAJIT_OK : fj_fail(FAJIT_ERR_OUT_OF_MEMORY, "explain: out of memory");
}
