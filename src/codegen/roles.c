/*
 * roles.c - filling a role table (roles.h): the helpers every arch's roles hook (sm90.c fj_sm90_roles, sm100.c
 * fj_sm100_roles) builds its table with. Nothing here emits code.
 */
#include <string.h>

#include "roles.h"

fj_role *fj_role_add(fj_role_table *t, const char *name, int kind, int first_warp, int warps, int group)
{
    fj_role *r = &t->role[t->n_roles++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->kind = kind;
    r->first_warp = first_warp;
    r->warps = warps;
    r->instances = 1;
    r->group = group;
    return r;
}

/* A ring of `slots` slots whose barriers lie at full_off / empty_off (slot 0) + slot x stride. */
fj_ring *fj_ring_add(fj_role_table *t, const char *name, int slots, int stride)
{
    fj_ring *g = &t->ring[t->n_rings];
    memset(g, 0, sizeof *g);
    g->name = name;
    g->slots = slots;
    g->slot_stride = stride;
    return g;
}

void fj_ring_add_part(fj_role_table *t, fj_ring *g, const char *name, int producer, int consumer, int full_count,
                      int tx_bytes, int empty_count, int full_off, int empty_off)
{
    fj_ring_part *q = &g->part[g->n_parts++];
    q->name = name;
    q->producer = producer;
    q->consumer = consumer;
    q->full_count = full_count;
    q->tx_bytes = tx_bytes;
    q->empty_count = empty_count;
    q->full_off = full_off;
    q->empty_off = empty_off;
    t->role[producer].produces |= 1u << t->n_rings;
    t->role[consumer].consumes |= 1u << t->n_rings;
}
