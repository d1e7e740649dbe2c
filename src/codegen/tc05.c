/*
 * tc05.c - tcgen05 descriptor encoders and emitters (see tc05.h for the PTX ISA sections each follows).
 */
#include "tc05.h"

#include "ptx_templates/sm100.h"

#define R(reg) fj_r(k->e, reg)

uint32_t fj_tc05_idesc_f16(int m, int n, int bf16, int a_mn, int b_mn)
{
    int n_step = m == 64 ? 8 : 16;
    if ((m != 64 && m != 128) || n < n_step || n > 256 || n % n_step) return 0;
    uint32_t d = 0;
    d |= 1u << 4;                       /* 4-5   D type: F32 = 1 */
    d |= (uint32_t)(bf16 ? 1 : 0) << 7; /* 7-9   A type: F16 = 0, BF16 = 1 */
    d |= (uint32_t)(bf16 ? 1 : 0) << 10; /* 10-12 B type */
    d |= (uint32_t)(a_mn ? 1 : 0) << 15; /* 15    transpose A (M-major) */
    d |= (uint32_t)(b_mn ? 1 : 0) << 16; /* 16    transpose B (N-major) */
    d |= (uint32_t)(n >> 3) << 17;      /* 17-22 N >> 3 */
    d |= (uint32_t)(m >> 4) << 24;      /* 24-28 M >> 4 */
    return d;                           /* 0-3 dense, no saturate; 13-14 no negate; 30-31 no .ws shift */
}

int fj_tc05_swizzle_field(int swizzle)
{
    switch (swizzle) {
    case 0: return 0;
    case 128: return 2;
    case 64: return 4;
    case 32: return 6;
    default: return -1;
    }
}

uint64_t fj_tc05_sdesc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle)
{
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFFu) >> 4);         /* 0-13  start address */
    d |= (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16;    /* 16-29 leading dimension byte offset */
    d |= (uint64_t)((sbo & 0x3FFFFu) >> 4) << 32;    /* 32-45 stride dimension byte offset */
    d |= 1ull << 46;                                 /* 46-48 fixed 0b001 */
    d |= (uint64_t)fj_tc05_swizzle_field(swizzle) << 61; /* 61-63 swizzle; 49-51 base offset 0, 52 relative LBO */
    return d;
}

int fj_tc05_alloc_cols(int used)
{
    int n = 32;
    while (n < used) n *= 2;
    return n > 512 ? 0 : n;
}

void fj_tc05_alloc(fj_kctx *k, fj_reg_t smem, int off, int ncols)
{
    fj_ins(k->e, PTX_TC05_ALLOC, R(smem), off, ncols);
    fj_ins(k->e, PTX_TC05_RELINQUISH);
}

void fj_tc05_dealloc(fj_kctx *k, fj_reg_t taddr, int ncols) { fj_ins(k->e, PTX_TC05_DEALLOC, R(taddr), ncols); }

void fj_tc05_mma_ss(fj_kctx *k, fj_reg_t tmem, int dcol, fj_reg_t adesc, fj_reg_t bdesc, fj_reg_t idesc,
                    const char *enable)
{
    fj_ins(k->e, PTX_TC05_MMA_SS, R(tmem), dcol, R(adesc), R(bdesc), R(idesc), enable);
}

void fj_tc05_mma_ts(fj_kctx *k, fj_reg_t tmem, int dcol, int acol, fj_reg_t bdesc, fj_reg_t idesc, const char *enable)
{
    fj_ins(k->e, PTX_TC05_MMA_TS, R(tmem), dcol, R(tmem), acol, R(bdesc), R(idesc), enable);
}

void fj_tc05_commit(fj_kctx *k, fj_reg_t smem, int off) { fj_ins(k->e, PTX_TC05_COMMIT, R(smem), off); }

static void reg_list(fj_kctx *k, fj_reg_t r, int n, fj_buf *out)
{
    for (int i = 0; i < n; i++) fj_buf_printf(out, "%s%s", i ? ", " : "", R(fj_at(r, i)));
}

void fj_tc05_ld(fj_kctx *k, fj_reg_t r, int n, fj_reg_t taddr, int off)
{
    fj_buf l;
    fj_buf_init(&l);
    reg_list(k, r, n, &l);
    fj_ins(k->e, PTX_TC05_LD_32X32B, n, l.data ? l.data : "", R(taddr), off);
    fj_buf_free(&l);
}

void fj_tc05_st(fj_kctx *k, fj_reg_t taddr, int off, fj_reg_t r, int n)
{
    fj_buf l;
    fj_buf_init(&l);
    reg_list(k, r, n, &l);
    fj_ins(k->e, PTX_TC05_ST_32X32B, n, R(taddr), off, l.data ? l.data : "");
    fj_buf_free(&l);
}
