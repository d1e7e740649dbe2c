/*
 * sm90.h - PTX instruction forms of the warp-specialized paths (PTX ISA 8.0+, .target sm_90a):
 *   mbarrier.init / arrive / arrive.expect_tx / try_wait.parity   (ISA 9.7.13.15)
 *   cp.async.bulk.tensor (TMA tile loads completing on an mbarrier)  (ISA 9.7.9.25.5)
 *   wgmma.mma_async, wgmma.fence / commit_group / wait_group       (ISA 9.7.15)
 *   setmaxnreg.inc / dec                                           (ISA 9.7.19.5)
 *   fence.mbarrier_init, named barriers bar.sync / bar.arrive      (ISA 9.7.13.4, 9.7.13.1)
 * The mbarrier and TMA forms are shared with sm_100a (async.c); the wgmma forms are sm_90a only.
 * A wgmma operand list (N / 2 or D / 2 accumulator registers) is built by a loop in sm90.c, not
 * written out per N: the format strings below take it as one %s.
 */
#ifndef FJ_PTX_SM90_H
#define FJ_PTX_SM90_H

/* ---- mbarrier (8-byte objects in shared memory; addresses are 32-bit shared-window addresses) ---- */
#define PTX_MBAR_INIT "mbarrier.init.shared::cta.b64 [%s+%d], %d"
/* arrive and set the expected transaction bytes of the current phase (the TMA copies complete them) */
#define PTX_MBAR_ARRIVE_EXPECT_TX "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s+%d], %d"
/* the same with the byte count in a register (a box whose size the call decides: GQA-packed Q) */
#define PTX_MBAR_ARRIVE_EXPECT_TX_REG "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s+%d], %s"
#define PTX_MBAR_ARRIVE "mbarrier.arrive.shared::cta.b64 _, [%s+%d]"
/* true once the phase of the given parity has completed (a fresh barrier counts parity 1 as done) */
#define PTX_MBAR_TRY_WAIT_PARITY "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s+%d], %s"
/* makes mbarrier.init visible to the async proxy (TMA) and to the other threads after the barrier */
#define PTX_FENCE_MBAR_INIT "fence.mbarrier_init.release.cluster"

/* ---- TMA: one box of a 4-D tensor map (col, row, head, batch) -> shared memory, completing on an mbarrier */
#define PTX_TMA_LOAD_4D                                                                                            \
    "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s+%d], [%s, {%s, %s, %s, %s}], " \
    "[%s+%d]"
/* the same box into the L2 only (no shared memory, no barrier): a hint that the copy above will soon want it */
#define PTX_TMA_PREFETCH_4D "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%s, {%s, %s, %s, %s}]"
/* TMA store of one box from shared memory (rows past the tensor's end are not written), its bulk group */
#define PTX_TMA_STORE_4D "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%s, {%s, %s, %s, %s}], [%s+%d]"
#define PTX_BULK_COMMIT "cp.async.bulk.commit_group"
#define PTX_BULK_WAIT_READ "cp.async.bulk.wait_group.read %d" /* the source smem may be written again */
#define PTX_BULK_WAIT "cp.async.bulk.wait_group %d"           /* the writes are done */
/* generic-proxy smem writes (st.shared) made visible to the async proxy (a TMA store reads them) */
#define PTX_FENCE_PROXY_ASYNC_SMEM "fence.proxy.async.shared::cta"
/* the tensor maps live in the kernel parameter block: a generic address of it */
#define PTX_CVTA_PARAM "cvta.param.u64 %s, %s"

/* ---- wgmma: S = Q K^T with both operands in shared memory (descriptors) ------------------------- */
/* wgmma.mma_async.sync.aligned.m64n<N>k16.f32.<t>.<t> {d...}, descA, descB, scale-d, 1, 1, transA, transB */
#define PTX_WGMMA_SS "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, %s, %s, %d, 1, 1, 0, %d"
/* O += P V with P (A) from registers: ..., {a0, a1, a2, a3}, descB, scale-d, 1, 1, transB */
#define PTX_WGMMA_RS "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, {%s, %s, %s, %s}, %s, %d, 1, 1, %d"
/* FP8: k = 32, both smem operands K-major (no transpose arguments for 8-bit types), A or B from descriptors /
 * A from four b32 registers of four e4m3 each */
#define PTX_WGMMA_SS_E4M3 "wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3 {%s}, %s, %s, %d, 1, 1"
#define PTX_WGMMA_RS_E4M3 "wgmma.mma_async.sync.aligned.m64n%dk32.f32.e4m3.e4m3 {%s}, {%s, %s, %s, %s}, %s, 1, 1, 1"
/* two f32 -> two e4m3 in a b16 (the first operand in the high byte), saturating to +-448 */
#define PTX_CVT_E4M3X2 "cvt.rn.satfinite.e4m3x2.f32 %s, %s, %s"
/* the V transpose (fp8_layout.h): 16-bit 8x8 matrices, byte permutes */
#define PTX_LDMATRIX_X4_TRANS_SM90 "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%s, %s, %s, %s}, [%s+%d]"
#define PTX_STMATRIX_X4 "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%s+%d], {%s, %s, %s, %s}"
#define PTX_PRMT "prmt.b32 %s, %s, %s, 0x%04X"
#define PTX_WGMMA_FENCE "wgmma.fence.sync.aligned"
#define PTX_WGMMA_COMMIT "wgmma.commit_group.sync.aligned"
#define PTX_WGMMA_WAIT "wgmma.wait_group.sync.aligned %d"

/* ---- registers per warpgroup (needs .maxntid + .minnctapersm on the entry, and a whole-program compile) */
#define PTX_SETMAXNREG_INC "setmaxnreg.inc.sync.aligned.u32 %d"
#define PTX_SETMAXNREG_DEC "setmaxnreg.dec.sync.aligned.u32 %d"

/* ---- named barriers: id 0 is the CTA's; 1.. are for groups of warps (a multiple of 32 threads) */
#define PTX_BAR_SYNC_N "bar.sync %d, %d"
#define PTX_BAR_ARRIVE_N "bar.arrive %d, %d"

#endif
