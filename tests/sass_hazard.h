/*
 * sass_hazard.h - a register hazard check of sm_90a SASS (nvdisasm -c output) around asynchronous warpgroup MMAs.
 *
 * A wgmma (HGMMA / QGMMA) with its A operand in registers reads those registers, and writes its accumulators, after
 * it issues: until a WARPGROUP.DEPBAR lets its group go, no other instruction may write either. PTX says the same of
 * the PTX registers, but the register allocator picks the SASS ones: in session 24 ptxas 13.0 gave the FP8 rolled
 * loop's early-packed P(j) the registers of P(j-1), which the PV in flight still read (F2FP into the QGMMA's A
 * registers ahead of its DEPBAR, across the loop's back edge; NaN rows on the H200). This check follows every path
 * of the control flow graph (branches to labels, fall-through, loops to a fixed point): the committed groups still
 * in flight (gsb0 closes one, DEPBAR.LE gsb0, N keeps the N newest) and the registers each reads (A) or writes
 * (accumulators); an instruction whose destination register is among them is a hazard.
 * Destination widths: 1 register, 2 for .64 / .WIDE opcodes, 4 for .128 (enough for what ptxas puts near wgmma; a
 * wider store of a destination it does not see is missed, never invented).
 */
#ifndef FJ_SASS_HAZARD_H
#define FJ_SASS_HAZARD_H

#include <stddef.h>

/* The number of hazards found in `sass` (-1: no wgmma in it, or text it cannot read: `why` says which); the first one
 * is described in `why` (its address, instruction and the wgmma it races). */
int fj_sass_wgmma_hazards(const char *sass, char *why, size_t why_len);

#endif
