/*
 * fp8_layout.c - the FP8 wgmma layouts as data (fp8_layout.h); tests/test_fp8_layout.c proves them against
 * models of the ISA's fragment figures and of ldmatrix / prmt / stmatrix.
 */
#include "fp8_layout.h"

int fj_fp8_p_key(int p)
{
    /* position 16h + 4t + j: the thread (lane 4g + t) holds columns 2t, 2t + 1 of each n8 block; A wants four
     * bytes there: n8 blocks 2h and 2h + 1, two columns each */
    int h = p / 16, t = (p % 16) / 4, j = p % 4;
    return 16 * h + 2 * t + (j & 1) + 8 * (j >> 1);
}

int fj_fp8_p_src(int chunk, int reg, int byte)
{
    int half = reg >> 1, row8 = reg & 1;    /* register 0..3: (k 0-15 | 16-31) x (row g | g + 8) */
    int block = 4 * chunk + 2 * half + (byte >> 1); /* the n8 block of S: key 8 block + 2t + (byte & 1) */
    return 4 * block + 2 * row8 + (byte & 1);
}

/* ldmatrix.x4: lanes 8m .. 8m + 7 address the 8 rows of matrix m. Matrices 0 / 1: keys 0-7 / 8-15 at head-dim
 * bytes 0-15; 2 / 3: the same keys at bytes 16-31. After .trans a lane holds 2 x 2 blocks (keys 2t, 2t + 1 x dims
 * 2g, 2g + 1); the prmt picks one dim's bytes of keys 2t, 2t + 1 (from a0) and 8 + 2t, 9 + 2t (from a1): k
 * positions 4t .. 4t + 3 of fj_fp8_p_key. */
int fj_fp8_ld_key(int lane) { return 8 * ((lane >> 3) & 1) + (lane & 7); }
int fj_fp8_ld_col(int lane) { return 16 * (lane >> 4); }

/* stmatrix.x4: matrix m row i holds d_m of lane group i: dim 2i (d0, d2) or 2i + 1 (d1, d3), +16 for d2, d3. */
int fj_fp8_st_dim(int lane)
{
    int m = lane >> 3, i = lane & 7;
    return 16 * (m >> 1) + 2 * i + (m & 1);
}

int fj_fp8_swizzled(int row, int col, int rows, int w)
{
    int box = col / w, c = (col % w) / 16, x = (row * w / 128) & (w / 16 - 1);
    return box * rows * w + row * w + 16 * (c ^ x) + col % 16;
}
