/*
 * pipe_tmem.c - sm_100a tensor memory in the pipeline simulator (see pipe_tmem.h; pipe_sim.c runs the tcgen05
 * instructions and calls these). PTX ISA 9.1 sections: 9.7.16.6 (the tcgen05 memory consistency model: a tcgen05.ld
 * is complete at tcgen05.wait::ld, a tcgen05.st at tcgen05.wait::st, a tcgen05.mma when the mbarrier of a later
 * tcgen05.commit of its thread arrives), 9.7.16.7 (alloc / dealloc / relinquish_alloc_permit).
 * Two tcgen05.mma of one thread into the same accumulator are ordered (9.7.16.6.2): the MMA warp's own reads and
 * writes are not checked against each other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "pipe_sim.h"
#include "pipe_tmem.h"

static const char *kind_name(int kind) { return kind == TM_LD ? "tcgen05.ld" : kind == TM_ST ? "tcgen05.st" : "tcgen05.mma"; }
static const char *done_by(int kind)
{
    return kind == TM_LD ? "tcgen05.wait::ld" : kind == TM_ST ? "tcgen05.wait::st" : "tcgen05.commit";
}

void tm_init(tm_state *m)
{
    memset(m, 0, sizeof *m);
    for (int q = 0; q < TM_QUARTERS; q++)
        for (int c = 0; c < TM_CELLS; c++) m->cell[q][c].wlast = -1;
}

/* Cell q, c now holds a pending access of warp w: tm_retire looks there. */
static void pending_at(tm_state *m, int w, int q, int c)
{
    int i = q * TM_CELLS + c;
    if (m->phi[w] == 0) m->plo[w] = i, m->phi[w] = i + 1;
    if (i < m->plo[w]) m->plo[w] = i;
    if (i >= m->phi[w]) m->phi[w] = i + 1;
}

/* The cells of an access, or a fault: inside the allocation, whole lane quarters. */
static int span(const tm_state *m, int w, int lane, int nlanes, int col, int ncols, int line, int *q0, int *q1, int *c0,
                int *c1, char *why, size_t n)
{
    if (!m->allocated) return snprintf(why, n, "line %d: warp %d uses tensor memory with none allocated", line, w), PIPE_TMEM;
    if (col < 0 || ncols <= 0 || col + ncols > m->cols || lane < 0 || lane % 32 || nlanes % 32 || lane + nlanes > 128)
        return snprintf(why, n, "line %d: warp %d uses tensor memory lanes %d..%d, columns %d..%d outside the %d columns "
                                "allocated (line %d)",
                        line, w, lane, lane + nlanes - 1, col, col + ncols - 1, m->cols, m->alloc_line),
               PIPE_TMEM;
    *q0 = lane / 32, *q1 = (lane + nlanes) / 32, *c0 = col / TM_GRAIN, *c1 = (col + ncols + TM_GRAIN - 1) / TM_GRAIN;
    return 0;
}

int tm_read(tm_state *m, int w, const int *vc, int nw, int kind, int lane, int nlanes, int col, int ncols, int line,
            char *why, size_t n)
{
    int q0, q1, c0, c1, f = span(m, w, lane, nlanes, col, ncols, line, &q0, &q1, &c0, &c1, why, n);
    (void)nw;
    if (f) return f;
    for (int q = q0; q < q1; q++)
        for (int c = c0; c < c1; c++) {
            tm_cell *x = &m->cell[q][c];
            int u = x->wlast, own_mma = u == w && kind == TM_MMA && x->wkind == TM_MMA;
            if (u < 0)
                return snprintf(why, n, "line %d: warp %d's %s reads tensor memory lanes %d.., column %d, which "
                                        "nothing has written since the allocation (line %d)",
                                line, w, kind_name(kind), 32 * q, c * TM_GRAIN, m->alloc_line),
                       PIPE_EARLY_READ;
            if (u >= 0 && !own_mma && x->wpend)
                return snprintf(why, n, "line %d: warp %d's %s reads tensor memory lanes %d.., column %d while warp "
                                        "%d's %s (line %d) writing it is not complete (no %s yet)",
                                line, w, kind_name(kind), 32 * q, c * TM_GRAIN, u, kind_name(x->wkind), x->wline,
                                done_by(x->wkind)),
                       PIPE_EARLY_READ;
            if (u >= 0 && u != w && x->wend > vc[u])
                return snprintf(why, n, "line %d: warp %d's %s reads tensor memory lanes %d.., column %d before warp "
                                        "%d's %s (line %d) writing it reached it (%s, a fence::before_thread_sync, an "
                                        "arrive, the wait, a fence::after_thread_sync)",
                                line, w, kind_name(kind), 32 * q, c * TM_GRAIN, u, kind_name(x->wkind), x->wline,
                                done_by(x->wkind)),
                       PIPE_EARLY_READ;
            x->rpend[w] |= (unsigned char)kind, x->rline[w] = line;
            pending_at(m, w, q, c);
        }
    return 0;
}

int tm_write(tm_state *m, int w, const int *vc, int nw, int kind, int lane, int nlanes, int col, int ncols, int line,
             char *why, size_t n)
{
    int q0, q1, c0, c1, f = span(m, w, lane, nlanes, col, ncols, line, &q0, &q1, &c0, &c1, why, n);
    if (f) return f;
    for (int q = q0; q < q1; q++)
        for (int c = c0; c < c1; c++) {
            tm_cell *x = &m->cell[q][c];
            for (int u = 0; u < nw; u++) {
                if (u == w && (kind == TM_MMA || !(x->rpend[u] & TM_LD))) continue;
                if (x->rpend[u])
                    return snprintf(why, n, "line %d: warp %d's %s writes tensor memory lanes %d.., column %d while "
                                            "warp %d's read (line %d) is not complete",
                                    line, w, kind_name(kind), 32 * q, c * TM_GRAIN, u, x->rline[u]),
                           PIPE_EARLY_WRITE;
                if (u != w && x->rend[u] > vc[u])
                    return snprintf(why, n, "line %d: warp %d's %s writes tensor memory lanes %d.., column %d before "
                                            "warp %d released its read (line %d)",
                                    line, w, kind_name(kind), 32 * q, c * TM_GRAIN, u, x->rline[u]),
                           PIPE_EARLY_WRITE;
            }
            int u = x->wlast;
            if (u >= 0 && u != w && (x->wpend || x->wend > vc[u]))
                return snprintf(why, n, "line %d: warp %d's %s writes tensor memory lanes %d.., column %d unordered "
                                        "with warp %d's %s (line %d)",
                                line, w, kind_name(kind), 32 * q, c * TM_GRAIN, u, kind_name(x->wkind), x->wline),
                       PIPE_EARLY_WRITE;
            memset(x->rend, 0, sizeof x->rend);
            x->wlast = w, x->wpend = 1, x->wkind = kind, x->wline = line;
            pending_at(m, w, q, c);
        }
    return 0;
}

void tm_retire(tm_state *m, int w, int kinds, int clock)
{
    int lo = m->phi[w], hi = m->plo[w]; /* the range still pending after this */
    for (int i = m->plo[w]; i < m->phi[w]; i++) {
        tm_cell *x = &m->cell[i / TM_CELLS][i % TM_CELLS];
        if (x->rpend[w] & kinds) {
            x->rpend[w] &= (unsigned char)~kinds;
            if (!x->rpend[w]) x->rend[w] = clock;
        }
        if (x->wlast == w && x->wpend && (x->wkind & kinds)) x->wpend = 0, x->wend = clock;
        if (x->rpend[w] || (x->wlast == w && x->wpend)) {
            if (i < lo) lo = i;
            if (i + 1 > hi) hi = i + 1;
        }
    }
    if (lo >= hi) lo = hi = 0;
    m->plo[w] = lo, m->phi[w] = hi;
}

int tm_quiet(const tm_state *m, int w, const int *vc, int nw, int line, char *why, size_t n)
{
    for (int q = 0; q < TM_QUARTERS; q++)
        for (int c = 0; c < TM_CELLS; c++) {
            const tm_cell *x = &m->cell[q][c];
            for (int u = 0; u < nw; u++)
                if (x->rpend[u] || (u != w && x->rend[u] > vc[u]))
                    return snprintf(why, n, "line %d: warp %d frees tensor memory before warp %d's read of lanes "
                                            "%d.., column %d (line %d) %s",
                                    line, w, u, 32 * q, c * TM_GRAIN, x->rline[u],
                                    x->rpend[u] ? "is complete" : "reached it"),
                           PIPE_TMEM;
            if (x->wlast >= 0 && (x->wpend || (x->wlast != w && x->wend > vc[x->wlast])))
                return snprintf(why, n, "line %d: warp %d frees tensor memory before warp %d's %s of lanes %d.., "
                                        "column %d (line %d) %s",
                                line, w, x->wlast, kind_name(x->wkind), 32 * q, c * TM_GRAIN, x->wline,
                                x->wpend ? "is complete" : "reached it"),
                       PIPE_TMEM;
        }
    return 0;
}
