/*
 * explain.c - the plan in words: config, tiles, smem map with byte offsets, warp roles, fragment
 * layout, register budget. Printed by `fagen explain` and, prefixed with "// ", as the header of
 * the teaching view (-v 2).
 */
#include "backend.h"
#include "sched.h"

void fj_plan_describe(const fj_plan *p, fj_buf *out, const char *pf)
{
    const fajit_config *c = &p->cfg;
    char cfg[160];
    fajit_config_format(c, cfg, sizeof cfg);
    fj_buf_printf(out, "%sconfig: %s\n", pf, cfg);
    fj_buf_printf(out, "%starget: %s (PTX ISA %d.%d), backend %s, %d threads (%d warps) per CTA\n", pf, p->arch->name,
                  p->arch->ptx_isa_major, p->arch->ptx_isa_minor, p->backend->name, p->threads, c->warps);
    if (p->ws && p->lpt)
        fj_buf_printf(out, "%stiles: Q %d x %d per work tile; K, V %d x %d per stage, %d stage%s; work tiles (query block "
                           "of %d rows, head, batch) in the longest-first order of sched.h (per sequence, sections of "
                           "heads whose K/V fit the L2 budget, each section's last query blocks first, its heads side by "
                           "side); persistent grid: min(work tiles, SMs) CTAs, the producer of each takes its next tile "
                           "from a global counter (atom.add) and hands it to the consumers through a smem slot\n",
                      pf, c->block_m, c->head_dim, c->block_n, c->head_dim, c->stages, c->stages > 1 ? "s" : "",
                      c->block_m);
    else if (p->ws)
        fj_buf_printf(out, "%stiles: Q %d x %d per work tile; K, V %d x %d per stage, %d stage%s; work tiles (query block "
                           "of %d rows, head, batch), query blocks fastest (causal: the last block first); persistent "
                           "grid: min(work tiles, SMs) CTAs, CTA c takes tiles c, c + G, c + 2G, ... (causal: odd "
                           "rounds backwards, c -> G - 1 - c; one CTA per tile when that would not balance)\n",
                      pf, c->block_m, c->head_dim, c->block_n, c->head_dim, c->stages, c->stages > 1 ? "s" : "",
                      c->block_m);
    else
        fj_buf_printf(out, "%stiles: Q %d x %d per CTA; K, V %d x %d per stage, %d stage%s; grid (ceil(Nq/%d), Hq, B)\n",
                      pf, c->block_m, c->head_dim, c->block_n, c->head_dim, c->stages, c->stages > 1 ? "s" : "",
                      c->block_m);
    /* an "a" path runs on its own GPUs only: no later ones to name. The PTX header (pf "// ") keeps its
     * words, so that generated PTX stays byte-identical (scripts/plain-ptx-diff.sh). */
    int later = fj_arch_path_smem_max(c->arch);
    if (p->min_ctas > 1)
        fj_buf_printf(out, "%ssmem map (%d B total; %d CTAs an SM: each up to %d B):\n", pf, p->smem_bytes, p->min_ctas,
                      fj_plan_smem_limit(p));
    else if (later > p->arch->smem_per_block || pf[0])
        fj_buf_printf(out, "%ssmem map (%d B total; %s GPUs give a CTA up to %d B, up to %d B on later GPUs):\n", pf,
                      p->smem_bytes, p->arch->name, p->arch->smem_per_block, later);
    else
        fj_buf_printf(out, "%ssmem map (%d B total; %s GPUs give a CTA up to %d B):\n", pf, p->smem_bytes,
                      p->arch->name, p->arch->smem_per_block);
    for (int b = 0; b < (p->ws ? p->q_bufs : 1); b++)
        fj_buf_printf(out, "%s  [%6d, %6d)  Q%s  %d rows x %d B%s\n", pf, p->q_off + b * p->q_bytes,
                      p->q_off + (b + 1) * p->q_bytes, p->ws ? (b ? "[1]" : "[0]") : "   ", c->block_m, p->row_bytes,
                      p->ws && p->q_bufs == 2 ? (b ? " (work tiles 1, 3, ...)" : " (work tiles 0, 2, ...)") : "");
    for (int s = 0; s < (p->ws ? c->stages : p->kv_slots); s++)
        fj_buf_printf(out, "%s  [%6d, %6d)  K[%d]  %d rows x %d B\n", pf, p->k_off + s * p->kv_tile_bytes,
                      p->k_off + (s + 1) * p->kv_tile_bytes, s, c->block_n, p->row_bytes);
    for (int s = 0; s < (p->ws ? c->stages : p->kv_slots); s++)
        fj_buf_printf(out, "%s  [%6d, %6d)  V[%d]  %d rows x %d B\n", pf, p->v_off + s * p->kv_tile_bytes,
                      p->v_off + (s + 1) * p->kv_tile_bytes, s, c->block_n, p->row_bytes);
    for (int s = 0; p->fp8 && s < c->stages; s++)
        fj_buf_printf(out, "%s  [%6d, %6d)  Vt[%d] %d rows x %d B (V transposed: head dims x keys, boxes of %d B)\n", pf,
                      p->vt_off + s * p->kv_tile_bytes, p->vt_off + (s + 1) * p->kv_tile_bytes, s, c->head_dim,
                      c->block_n, p->vt_swizzle);
    if (p->xchg_warp_bytes)
        fj_buf_printf(out, "%s  [%6d, %6d)  warp-pair exchange, %d B per warp\n", pf, p->xchg_off,
                      p->xchg_off + c->warps * p->xchg_warp_bytes, p->xchg_warp_bytes);
    if (p->kv8 && !p->fp8) /* (an e4m3 Q, K, V kernel reads its K and V as they are) */
        fj_buf_printf(out, "%s  [%6d, %6d)  e4m3 K, V ring: %d stages x 2 x %d rows x %d B, %s\n", pf, p->kv8_off,
                      p->smem_bytes, c->stages, c->block_n, c->head_dim,
                      p->kv8_direct ? "read by the MMAs straight (kv8direct)" : "widened into K[0], V[0]");
    if (p->ws && p->o_stage)
        fj_buf_printf(out, "%s  [%6d, %6d)  O     %d rows x %d B: the TMA-store epilogue's staging, 64 rows per consumer "
                           "warpgroup%s\n",
                      pf, p->o_off, p->o_off + p->o_bytes, c->block_m, p->o_row_bytes,
                      p->o_stage == 2 ? " (in the V ring, between a work tile's last PV and the next one's first V)"
                                      : "");
    if (p->n_bars)
        fj_buf_printf(out, "%s  [%6d, %6d)  mbarriers: Q full[2], Q empty[2], then per stage K full, V full, K empty, "
                           "V empty%s\n",
                      pf, p->bar_off, p->bar_off + 8 * p->n_bars,
                      p->o_stage == 2 ? (p->fp8 ? ", then O free, then per stage VT full, VT empty" : ", then O free")
                      : p->fp8        ? ", then per stage VT full, VT empty"
                                      : "");
    if (p->ws && p->lpt)
        fj_buf_printf(out, "%s  [%6d, %6d)  work-tile slots: %d of %d B (round %% %d: the tile the producer took)\n", pf,
                      p->sched_off, p->smem_bytes, FJ_SCHED_SLOTS, FJ_SCHED_SLOT_BYTES, FJ_SCHED_SLOTS);
    if (p->ws)
        fj_buf_printf(out, "%sswizzle: %d B - each tile is stored as %d TMA box%s of [rows][%d B]; 16-byte chunk c of "
                           "row r sits at chunk c ^ (r %% %d) of its box (the copy engine writes it so, the wgmma "
                           "descriptors read it so)\n",
                      pf, c->swizzle, p->tma_boxes, p->tma_boxes > 1 ? "es" : "", c->swizzle, c->swizzle / 16);
    else if (p->swz_mask)
        fj_buf_printf(out, "%sswizzle: %d B - 16-byte chunk c of row r is stored at chunk c ^ (r & %d), so the 8 rows "
                           "one ldmatrix 8x8 reads fall in %d different bank groups\n",
                      pf, c->swizzle, p->swz_mask, p->swz_mask + 1);
    else
        fj_buf_printf(out, "%sswizzle: none - rows are stored as is (ldmatrix reads conflict when the row pitch is a "
                           "multiple of 128 B)\n",
                      pf);
    p->backend->describe(p, out, pf);
    if (p->roles.tmem_cols) {
        /* sm_100a: describe_sm100 gives each role's budget (S and O live in tensor memory) */
    } else if (p->ws)
        fj_buf_printf(out, "%sregister budget (estimate, 32-bit regs per consumer thread): O acc %d + S acc %d + P %d + "
                           "addressing/softmax ~%d = %d of %d\n",
                      pf, p->reg_acc_o, p->reg_acc_s, p->reg_p, p->reg_misc, p->reg_total, p->reg_limit);
    else
        fj_buf_printf(out, "%sregister budget (estimate, 32-bit regs/thread): O acc %d + S acc %d + next S %d + Q frags "
                           "%d + addressing/softmax ~%d = %d, + headroom %d = %d of 255\n",
                      pf, p->reg_acc_o, p->reg_acc_s, p->reg_s_next, p->reg_q, p->reg_misc, p->reg_total,
                      p->reg_headroom, p->reg_total + p->reg_headroom);
    fj_buf_printf(out, "%sschedule: %s; O rescale %s\n", pf,
                  p->ws && p->overlap
                      ? (p->pingpong ? "producer/consumer; each consumer issues S(j) = QK(j)^T and O += P(j-1)V(j-1) "
                                       "together and exponentiates S(j) while PV runs; ping-pong: consumer warpgroups "
                                       "take turns issuing their GEMMs (named barriers 1..), so one's softmax overlaps "
                                       "another's GEMMs"
                                     : "producer/consumer; each consumer issues S(j) = QK(j)^T and O += P(j-1)V(j-1) "
                                       "together and exponentiates S(j) while PV runs (intra-warpgroup overlap)")
                  : p->ws ? "producer/consumer; each consumer runs S = QK^T, softmax, O += PV in turn while the "
                            "producer keeps the K/V ring full"
                  : p->pipeline_qk ? "software-pipelined - S(j+1) = QK(j+1)^T is issued beside softmax(S(j)), K one "
                                     "tile ahead of V"
                  : c->stages == 1 ? "S = QK^T, softmax, O += PV in turn; one stage, K a tile ahead of V (V(j) is "
                                     "copied during QK(j), K(j+1) during softmax and PV)"
                                   : "S = QK^T, softmax, O += PV in turn",
                  p->rescale_slack < 0   ? "every tile"
                  : p->rescale_slack > 0 ? "lazy - only when a row max passes the reference max by more than 2^slack (warp vote)"
                                         : "skipped by warp vote when no row max moved");
    if (p->rescale_weight_log2 < 0)
        fj_buf_printf(out, "%saccuracy: the reference max also moves when a new row max would weigh more than 2^%d of "
                           "the row's %s sum (so the largest P sit just under 1, where bf16 / f16 round them finest)%s\n",
                      pf, p->rescale_weight_log2, p->rescale_weight_est ? "estimated final" : "partial",
                      p->rescale_weight_held ? "; its threshold held in a register, set after a tile that moved it" : "");
    if (p->variant & FJ_VARIANT_VARLEN)
        fj_buf_printf(out, "%svarlen: queries%s packed by cu_seqlens (seqlen.c); %s\n", pf,
                      p->variant & FJ_VARIANT_VARLEN_K ? " and keys" : "",
                      p->ws ? "work tiles cover seqlen_q (the longest); a tile past its sequence's end loads nothing "
                              "and visits no KV tile; TMA maps clip Q, K, V and O at each sequence's end"
                            : "the grid covers seqlen_q (the longest); a CTA past its sequence's end returns at once; "
                              "Q loads and O stores are bounded by the sequence's rows");
}
