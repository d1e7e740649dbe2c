/*
 * pipe_tmem.h - the pipeline simulator's model of sm_100a tensor memory (pipe_tmem.c; pipe_sim.c drives it): the
 * allocated columns as cells (a lane quarter x 8 columns) with their last writer and their readers, each access an
 * event of a warp that completes later (tcgen05.ld at the warp's tcgen05.wait::ld, tcgen05.st at wait::st,
 * tcgen05.mma's reads and writes at the thread's next tcgen05.commit), ordered by the warps' vector clocks the way
 * shared memory is. A read is early when the cell's last write has not completed or its completion has not reached the
 * reader; a write is early when a read or write of another warp has not completed or not reached the writer.
 * Test-only.
 */
#ifndef FJ_PIPE_TMEM_H
#define FJ_PIPE_TMEM_H

#include <stddef.h>
#include <stdint.h>

#define TM_WARPS 16               /* pipe_sim.c's PS_W */
#define TM_QUARTERS 4             /* lanes 0-31, 32-63, 64-95, 96-127 */
#define TM_GRAIN 8                /* columns a cell (P's k-step, the smallest access) */
#define TM_CELLS (512 / TM_GRAIN) /* cells a quarter */

/* what an access is (and what a wait completes) */
enum { TM_LD = 1, TM_ST = 2, TM_MMA = 4 };

typedef struct tm_cell {
    unsigned char rpend[TM_WARPS]; /* per warp: kinds of reads not completed */
    int rend[TM_WARPS];            /* per warp: the clock of its last completed read (0: none since the last write) */
    int rline[TM_WARPS];
    int wlast, wpend, wkind, wend, wline; /* the last write: warp (-1 none), not completed, kind, clock, line */
} tm_cell;

typedef struct tm_state {
    int allocated, cols, alloc_line, relinquished, freed; /* the allocation (columns), its line */
    uint32_t slot;                                         /* the shared address the allocation's address went to */
    int plo[TM_WARPS], phi[TM_WARPS]; /* per warp: the cells [plo, phi) (q x TM_CELLS + c) holding its pending accesses */
    tm_cell cell[TM_QUARTERS][TM_CELLS];
} tm_state;

/* The fake tensor memory address tcgen05.alloc hands out (lane 0, column 0). */
#define TM_BASE 0u

void tm_init(tm_state *m);
/* An access by warp w (vc: the clock it orders tensor memory by, nw warps) of lanes [lane, lane + nlanes) and columns
 * [col, col + ncols): 0 when fine, else a PIPE_* kind with what into why. */
int tm_read(tm_state *m, int w, const int *vc, int nw, int kind, int lane, int nlanes, int col, int ncols, int line,
            char *why, size_t n);
int tm_write(tm_state *m, int w, const int *vc, int nw, int kind, int lane, int nlanes, int col, int ncols, int line,
             char *why, size_t n);
/* Warp w's accesses of the kinds in `kinds` complete at its clock `clock`. */
void tm_retire(tm_state *m, int w, int kinds, int clock);
/* Whether warp w (clock vc) may free the columns now: every access of every warp completed and reached it. */
int tm_quiet(const tm_state *m, int w, const int *vc, int nw, int line, char *why, size_t n);

#endif
