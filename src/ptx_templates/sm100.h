/*
 * sm100.h - PTX instruction forms of the sm_100a path (PTX ISA 8.6+, .target sm_100a): tensor memory and the
 * 5th-generation tensor core (tcgen05). Sections of the PTX ISA 9.1 document:
 *   tcgen05.alloc / dealloc / relinquish_alloc_permit            9.7.16.7.1
 *   tcgen05.mma (kind::f16; A from shared memory or tensor memory) 9.7.16.10.9.1
 *   tcgen05.commit (an mbarrier arrive once prior MMAs complete)   9.7.16.12.1
 *   tcgen05.ld / st / wait (32x32b: a warp's 32 lanes, one each)   9.7.16.8.3-5, shapes 9.7.16.2.3
 *   tcgen05.fence::before_thread_sync / after_thread_sync         9.7.16.11.1
 * Checked with ptxas 13.0 -arch=sm_100a (SASS: UTCATOMSWS, UTCHMMA, UTCBAR, LDTM, STTM). tcgen05 is rejected for
 * sm_100 (no "a"), sm_90a and sm_120a. The mbarrier and TMA forms are sm90.h's (the same on sm_100a).
 */
#ifndef FJ_PTX_SM100_H
#define FJ_PTX_SM100_H

/* One warp allocates ncols (a power of two, 32..512) columns of all 128 lanes; the address goes to smem */
#define PTX_TC05_ALLOC "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%s+%d], %d"
/* the allocating warp gives up the right to allocate again (another CTA on the SM may then allocate) */
#define PTX_TC05_RELINQUISH "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned"
#define PTX_TC05_DEALLOC "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %s, %d"

/* D[tmem] (+)= A[smem desc] x B[smem desc]: [d], a-desc, b-desc, idesc, enable-input-d (pred or immediate) */
#define PTX_TC05_MMA_SS "tcgen05.mma.cta_group::1.kind::f16 [%s+%d], %s, %s, %s, %s"
/* D[tmem] (+)= A[tmem] x B[smem desc]: A's rows on lanes, two 16-bit elements per 32-bit column */
#define PTX_TC05_MMA_TS "tcgen05.mma.cta_group::1.kind::f16 [%s+%d], [%s+%d], %s, %s, %s"
/* one arrive on the mbarrier once every tcgen05.mma this thread issued before has completed
 * (ptxas 13.0 takes .shared::cluster here, not .shared::cta; a CTA's own smem address is valid in the window) */
#define PTX_TC05_COMMIT "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%s+%d]"

/* 32x32b: thread i of the warp reads / writes lane (address lane + i), columns col .. col + N - 1, one b32 a register */
#define PTX_TC05_LD_32X32B "tcgen05.ld.sync.aligned.32x32b.x%d.b32 {%s}, [%s+%d]"
#define PTX_TC05_ST_32X32B "tcgen05.st.sync.aligned.32x32b.x%d.b32 [%s+%d], {%s}"
#define PTX_TC05_WAIT_LD "tcgen05.wait::ld.sync.aligned"
#define PTX_TC05_WAIT_ST "tcgen05.wait::st.sync.aligned"

/* order tcgen05 operations around a thread synchronization (bar.sync, an mbarrier arrive / wait) */
#define PTX_TC05_FENCE_BEFORE "tcgen05.fence::before_thread_sync"
#define PTX_TC05_FENCE_AFTER "tcgen05.fence::after_thread_sync"

/* the lanes of a warp meet (before one of them arrives for the warp) */
#define PTX_BAR_WARP_SYNC "bar.warp.sync -1"
/* one lane of the warp is elected (pred set in it only) */
#define PTX_ELECT_SYNC "elect.sync %s|%s, -1"

#endif
