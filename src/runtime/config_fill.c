/*
 * config_fill.c - fajit_config_fill: the config for a device. Runtime policy on top of the code
 * generator's pure heuristic (codegen/config.c): which path the GPU runs best (sm_90a on compute
 * capability 9.0, sm_80 elsewhere), the tuned winner of the shape's class (tune.c), the device's own
 * shared-memory limit. The generator never calls up into this layer.
 */
#include "codegen/codegen.h"
#include "context.h"
#include "error.h"
#include "tune.h"

fajit_arch fj_best_path(const fajit_context *ctx)
{
    const fj_arch_info *device = ctx ? fj_arch_find(fajit_context_sm(ctx)) : NULL;
    const fj_arch_info *sm90a = fj_arch_of_path(FAJIT_ARCH_SM90A);
    /* an "a" path runs on its own compute capability only */
    if (device && sm90a && device->sm == sm90a->sm) return FAJIT_ARCH_SM90A;
    return FAJIT_ARCH_SM80;
}

fajit_status fajit_config_fill(fajit_context *ctx, const fajit_shape *shape, fajit_config *cfg)
{
    fj_clear_error();
    if (!cfg) return fj_fail(FAJIT_ERR_INVALID_ARGUMENT, "config: NULL pointer");
    const fajit_config given = *cfg;
    const fj_arch_info *device = ctx ? fj_arch_find(fajit_context_sm(ctx)) : NULL;
    if (cfg->head_dim == 0) cfg->head_dim = 128;
    if (cfg->dtype == FAJIT_DTYPE_AUTO) cfg->dtype = FAJIT_DTYPE_BF16;
    if (cfg->arch == FAJIT_ARCH_AUTO) cfg->arch = fj_best_path(ctx);
    fj_tune_fill(ctx, shape, cfg); /* zero fields from the tuned winner of the shape's class, if any */
    /* the device's own limit when there is one (an H100 gives sm_80 code 227 KB), else the path's */
    fj_config_heuristic(cfg, &given, shape, device ? device->smem_per_block : 0);
    fj_plan plan;
    fajit_status st = fj_plan_build(cfg, &plan);
    /* a config the device's compiler would spill (fj_plan_check_target): a narrower KV tile, when the
     * caller left block_n to us */
    while (st == FAJIT_OK && device && !given.block_n && cfg->block_n > 16 &&
           fj_plan_check_target(&plan, device) != FAJIT_OK) {
        cfg->block_n = fj_block_n_half(cfg->block_n);
        st = fj_plan_build(cfg, &plan);
    }
    if (st == FAJIT_OK) fj_clear_error(); /* the refusals the loop got past */
    return st;
}
