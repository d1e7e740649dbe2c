/*
 * ptx_sim.c - the test harness that runs generated PTX without a GPU (see ptx_sim.h): a parser of the kernels'
 * PTX, the device memory a decode / varlen kernel sees (parameters, cu_seqlens, seqlens_k, block tables; Q / K / V
 * copies and TMA boxes, O and LSE stores recorded), and an interpreter of the PTX's integer subset.
 * Used by tests/test_paged_reads.c and tests/test_varlen_reads.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_sim.h"

/* ---- the PTX, parsed -------------------------------------------------------------------------------- */





static int reg_index(const prog *p, const char *s, int *len)
{
    int i = 0;
    while (isalpha((unsigned char)s[i]) || s[i] == '_') i++;
    for (int b = 0; b < p->n_banks; b++) {
        if ((int)strlen(p->banks[b].name) != i || strncmp(s, p->banks[b].name, (size_t)i) != 0) continue;
        if (!isdigit((unsigned char)s[i])) continue;
        char *end;
        long n = strtol(s + i, &end, 10);
        if (n >= p->banks[b].count) fail_msg("register %.*s%ld past its bank", i, s, n);
        *len = (int)(end - s);
        return p->banks[b].base + (int)n;
    }
    return -1;
}

static void parse_operand(prog *p, insn *in, const char *s, operand *o)
{
    int len;
    memset(o, 0, sizeof *o);
    o->reg = -1;
    while (*s == ' ') s++;
    if (*s == '!') o->neg = 1, s++;
    if (*s == '[') {
        if (strncmp(s + 1, "fajit_fwd_param_0", 17) == 0) {
            o->kind = O_PARAM;
            o->imm = s[18] == '+' ? strtol(s + 19, NULL, 10) : 0;
            return;
        }
        o->kind = O_MEM;
        if (s[1] != '%' || (o->reg = reg_index(p, s + 2, &len)) < 0) {
            o->kind = O_OTHER;
            return;
        }
        const char *c = strchr(s, '{'); /* a TMA load's [map, {coordinates}] */
        for (int i = 0; c && i < 4; i++) {
            c = strchr(c, '%');
            if (!c || (in->coord[i] = reg_index(p, c + 1, &len)) < 0) fail_msg("TMA coordinates: %s", s);
            c += 1 + len;
        }
        o->imm = s[2 + len] == '+' ? strtol(s + 3 + len, NULL, 10) : 0;
        return;
    }
    if (*s == '%') {
        static const char *const sp[] = {"%tid.x", "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%laneid"};
        for (int i = 0; i < 6; i++)
            if (strcmp(s, sp[i]) == 0) {
                o->kind = O_SPECIAL, o->imm = i;
                return;
            }
        o->reg = reg_index(p, s + 1, &len);
        o->kind = o->reg >= 0 ? O_REG : O_OTHER;
        return;
    }
    if (*s == '$') {
        o->kind = O_LABEL;
        snprintf(in->label, sizeof in->label, "%s", s);
        return;
    }
    if (strcmp(s, "fajit_fwd_param_0") == 0) { /* the parameter block's address (the ws kernel's tensor maps) */
        o->kind = O_PBASE;
        return;
    }
    if (strcmp(s, "fj_smem") == 0) {
        o->kind = O_SMEM;
        return;
    }
    if ((isdigit((unsigned char)*s) || *s == '-') && !(s[0] == '0' && (s[1] == 'f' || s[1] == 'd'))) {
        /* unsigned above INT64_MAX too (a wgmma descriptor's 0x8000... constant) */
        o->kind = O_IMM, o->imm = *s == '-' ? strtoll(s, NULL, 0) : (int64_t)strtoull(s, NULL, 0);
        return;
    }
    o->kind = O_OTHER;
}

/* Operands split at top-level commas ({...} and [...] kept whole). */
static void parse_operands(prog *p, insn *in, char *s)
{
    int depth = 0;
    char *start = s;
    for (char *c = s;; c++) {
        if (*c == '{' || *c == '[') depth++;
        if (*c == '}' || *c == ']') depth--;
        if ((*c == ',' && depth == 0) || *c == '\0') {
            int end = *c == '\0';
            *c = '\0';
            while (*start == ' ') start++;
            if (*start && in->n < 6) parse_operand(p, in, start, &in->a[in->n++]);
            if (end) return;
            start = c + 1;
        }
    }
}

static void parse_reg_decl(prog *p, const char *s)
{
    char type[16], name[16];
    int count;
    if (sscanf(s, ".reg .%15s %%%15[a-z_]<%d>;", type, name, &count) != 3) fail_msg("bad .reg: %s", s);
    bank *b = &p->banks[p->n_banks++];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->base = p->n_regs, b->count = count, b->is_pred = strcmp(type, "pred") == 0;
    p->n_regs += count;
}

static void parse_line(prog *p, char *s)
{
    char *c = strstr(s, "//");
    if (c) *c = '\0';
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ';')) s[--n] = '\0';
    if (!n || *s == '{' || *s == '}') return;
    if (strncmp(s, ".reg", 4) == 0) {
        strcat(s, ";");
        parse_reg_decl(p, s);
        return;
    }
    if (*s == '.') return;
    if (*s == '$' && s[n - 1] == ':') {
        s[n - 1] = '\0';
        assert_true(p->n_labels < 2048);
        snprintf(p->labels[p->n_labels], sizeof p->labels[0], "%s", s);
        p->label_at[p->n_labels++] = p->n;
        return;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4096;
        p->v = realloc(p->v, (size_t)p->cap * sizeof *p->v);
        assert_non_null(p->v);
    }
    insn *in = &p->v[p->n++];
    memset(in, 0, sizeof *in);
    in->guard = -1, in->line = p->line;
    if (*s == '@') {
        int len;
        s++;
        if (*s == '!') in->guard_neg = 1, s++;
        in->guard = reg_index(p, s + 1, &len);
        assert_true(in->guard >= 0);
        s += 1 + len;
        while (*s == ' ') s++;
    }
    size_t w = strcspn(s, " \t");
    snprintf(in->op, sizeof in->op, "%.*s", (int)w, s);
    parse_operands(p, in, s + w);
}

void parse_prog(prog *p, const char *ptx)
{
    memset(p, 0, sizeof *p);
    const char *body = strstr(ptx, ".entry fajit_fwd");
    assert_non_null(body);
    char line[4096]; /* a wgmma line lists 64+ accumulators */
    p->line = 1;
    for (const char *s = ptx; s < body; s++) p->line += *s == '\n';
    for (const char *s = body; *s; p->line++) {
        size_t n = strcspn(s, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), s);
        parse_line(p, line);
        s += n + (s[n] == '\n');
    }
    for (int i = 0; i < p->n; i++) {
        insn *in = &p->v[i];
        for (int j = 0; j < in->n; j++) {
            if (in->a[j].kind != O_LABEL) continue;
            int k = 0;
            while (k < p->n_labels && strcmp(p->labels[k], in->label) != 0) k++;
            if (k == p->n_labels) fail_msg("label %s not defined", in->label);
            in->a[j].imm = p->label_at[k];
        }
    }
}

/* ---- the device memory the kernel sees ---------------------------------------------------------------- */


/* Batch b's keys as the kernel takes them: seqlens_k[b] clamped to [0, seqlen_k], or seqlen_k. */
int seq_len(const world *w, int b)
{
    int n = w->use_lens ? w->lens[b] : (int)w->prm.base.seqlen_k;
    return n < 0 ? 0 : n > (int)w->prm.base.seqlen_k ? (int)w->prm.base.seqlen_k : n;
}

void why(world *w, const char *fmt, ...)
{
    if (w->why[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
}

static uint32_t load_u32(world *w, uint64_t addr)
{
    if (addr >= BASE_LENS && addr < BASE_LENS + 4u * (unsigned)w->batch && addr % 4 == 0) {
        int b = (int)((addr - BASE_LENS) / 4);
        if (w->cta_b >= 0 && b != w->cta_b) why(w, "seqlens_k[%d] read by a CTA of batch %d", b, w->cta_b);
        return (uint32_t)w->lens[b];
    }
    if (addr >= BASE_TABLE && addr < BASE_TABLE + 4ull * MAX_B * MAX_PAGES && addr % 4 == 0) {
        int e = (int)((addr - BASE_TABLE) / 4), b = e / w->pages_per_seq, i = e % w->pages_per_seq;
        int len = seq_len(w, b);
        int filled = (len + w->page - 1) / w->page;
        w->table_reads++;
        if ((w->cta_b >= 0 && b != w->cta_b) || i >= filled) {
            w->bad_reads++;
            why(w, "block_table[%d][%d] read by a CTA of batch %d (len %d: %d filled pages)", b, i, w->cta_b, len,
                filled);
        }
        return (uint32_t)w->table[b][i];
    }
    for (int x = 0; w->varlen && x < 2; x++) { /* cu_seqlens_q / _k: the CTA's sequence's entries (and total_q) */
        uint64_t base = x ? BASE_CUK : BASE_CUQ;
        if (addr < base || addr >= base + 4u * (unsigned)(w->batch + 1) || addr % 4) continue;
        int i = (int)((addr - base) / 4);
        if (w->cta_b >= 0 && i != w->cta_b && i != w->cta_b + 1 && (x || i != w->batch))
            why(w, "cu_seqlens_%c[%d] read by a CTA of sequence %d", x ? 'k' : 'q', i, w->cta_b);
        return (uint32_t)(x ? w->cu_k[i] : w->cu_q[i]);
    }
    why(w, "ld.global.nc.u32 of 0x%llx: neither seqlens_k nor the block table", (unsigned long long)addr);
    return 0;
}

void push(world *w, uint64_t **v, int *n, uint64_t addr)
{
    if (*n == w->cap) fail_msg("more than %d recorded accesses in one run", w->cap);
    (*v)[(*n)++] = addr;
}

/* varlen: an st.global to O (4-byte words) or to LSE (floats); anything else fails. */
static void record_store(world *w, uint64_t addr, const char *op)
{
    if (addr >= BASE_O && addr < BASE_LENS && strcmp(op, "st.global.b32") == 0) push(w, &w->o_writes, &w->n_o, addr);
    else if (addr >= BASE_LSE && addr < BASE_LSE + (1ull << 32) && strcmp(op, "st.global.f32") == 0)
        push(w, &w->lse_writes, &w->n_lse, addr);
    else why(w, "%s to 0x%llx: neither O nor LSE", op, (unsigned long long)addr);
}

void record_copy(world *w, uint64_t addr)
{
    if (addr >= BASE_Q && addr < BASE_K) { /* Q: only the varlen test's business */
        if (w->varlen) push(w, &w->q_reads, &w->n_q, addr);
        return;
    }
    uint64_t **v = addr >= BASE_V && addr < BASE_O ? &w->v_reads : &w->k_reads;
    int *n = v == &w->v_reads ? &w->n_v : &w->n_k;
    if (!(addr >= BASE_K && addr < BASE_O)) {
        why(w, "cp.async from 0x%llx: not Q, K or V", (unsigned long long)addr);
        return;
    }
    if (*n == w->cap) fail_msg("more than %d K or V chunk copies in one CTA", w->cap);
    (*v)[(*n)++] = addr;
}

/* The sm_90a kernel: the transaction bytes a barrier still waits for (expect_tx adds, each TMA box takes its bytes). */
int64_t *bar_slot(world *w, uint64_t addr)
{
    for (int i = 0; i < w->n_bars; i++)
        if (w->bar_addr[i] == (uint32_t)addr) return &w->bar_bytes[i];
    if (w->n_bars == MAX_BARS) fail_msg("more than %d mbarriers", MAX_BARS);
    w->bar_addr[w->n_bars] = (uint32_t)addr, w->bar_bytes[w->n_bars] = 0;
    return &w->bar_bytes[w->n_bars++];
}

/* A TMA box load through the map at parameter offset `off`: Q's only takes its bytes; a K or V box of w->box rows
 * at (col, row in the page, head, page) is recorded chunk by chunk like the sm_80 copies, and its place in the
 * stage must be its logical row's (the row the table gives the page, modulo block_n; 128-byte box rows). */
static void record_box_varlen(world *w, uint64_t off, const uint64_t c[4], uint64_t bar);

/* An FP8 K / V box (dense [B, Hkv, Nk, D] bytes): block_n rows of fp8_span bytes from (col, row, head, batch); its
 * bytes counted on the barrier, its shared and first global byte's addresses recorded when the lists are set. */
static void record_box_fp8(world *w, int v, uint64_t dst, const uint64_t c[4], uint64_t bar)
{
    *bar_slot(w, bar) -= (int64_t)w->block_n * w->fp8_span;
    const int64_t *st = v ? w->prm.base.v_stride : w->prm.base.k_stride;
    int64_t col = (int32_t)c[0], row = (int32_t)c[1], head = (int32_t)c[2], b = (int32_t)c[3];
    if (col < 0 || col % w->fp8_span || col >= w->dim || head < 0 || b < 0 || b >= w->batch) {
        why(w, "%c box at (col %lld, row %lld, head %lld, batch %lld): outside the tensor", v ? 'V' : 'K',
            (long long)col, (long long)row, (long long)head, (long long)b);
        return;
    }
    if (w->smem_cp) {
        push(w, &w->smem_cp, &w->n_cp, dst);
        uint64_t first = (uint64_t)(b * st[0] + head * st[1] + row * st[2] + col); /* 1-byte elements */
        push(w, &w->gmem_cp, &w->n_gcp, (v ? BASE_V : BASE_K) + first);
    }
}

static void record_box(world *w, uint64_t off, uint64_t dst, const uint64_t c[4], uint64_t bar)
{
    if (w->varlen) {
        record_box_varlen(w, off, c, bar);
        return;
    }
    int v = off == offsetof(fj_fwd_params_tma, tmap_v);
    if (off == offsetof(fj_fwd_params_tma, tmap_q)) {
        *bar_slot(w, bar) -= w->q_box_bytes;
        return;
    }
    if (!v && off != offsetof(fj_fwd_params_tma, tmap_k)) {
        why(w, "TMA load through map +%llu", (unsigned long long)off);
        return;
    }
    if (w->fp8_span) {
        record_box_fp8(w, v, dst, c, bar);
        return;
    }
    *bar_slot(w, bar) -= (int64_t)w->box * 128;
    int col = (int)c[0], row = (int)c[1], head = (int)c[2], page = (int)c[3], i = 0;
    while (i < w->pages_per_seq && w->table[w->cta_b][i] != page) i++;
    if (i == w->pages_per_seq) {
        why(w, "TMA load of page %d: none of batch %d's", page, w->cta_b);
        return;
    }
    int64_t lrow = (int64_t)i * w->page + row;
    uint64_t want = (uint64_t)((col / 64) * w->block_n * 128 + lrow % w->block_n * 128);
    uint64_t got = (dst - (uint64_t)(v ? w->v_off : w->k_off)) % (uint64_t)w->kv_tile_bytes;
    if (row < 0 || row + w->box > w->page || col % 64 || got != want) {
        why(w, "%c box (col %d, row %d of page %d = key %lld) at stage offset %llu, want %llu", v ? 'V' : 'K', col, row,
            page, (long long)lrow, (unsigned long long)got, (unsigned long long)want);
        return;
    }
    const int64_t *st = v ? w->prm.base.v_stride : w->prm.base.k_stride;
    for (int r = 0; r < w->box; r++)
        for (int ch = col / 8; ch < col / 8 + 8; ch++)
            record_copy(w, (v ? BASE_V : BASE_K) + (uint64_t)(2 * (page * st[0] + head * st[1] + (row + r) * st[2]) +
                                                               16 * ch));
}

/* The sm_90a producer's TMA and mbarrier instructions: 1 when `op` is one (run), 0 when not. */
static int run_async(const prog *p, thread *t, world *w, const insn *in, int pc);

static int is_signed(const char *op) { return strstr(op, ".s32") != NULL || strstr(op, ".s64") != NULL; }
static int is_64(const char *op) { return strstr(op, "64") != NULL; }

static int src(const prog *p, thread *t, world *w, const operand *o, uint64_t *v)
{
    (void)p;
    switch (o->kind) {
    case O_REG:
        *v = t->val[o->reg];
        if (o->neg) *v = !*v;
        return t->known[o->reg];
    case O_IMM: *v = (uint64_t)o->imm; return 1;
    case O_SMEM: *v = 0; return 1;
    case O_PBASE: *v = BASE_PARAMS; return 1;
    case O_SPECIAL:
        *v = o->imm == SP_TID      ? t->tid
             : o->imm == SP_LANEID ? t->tid % 32u /* one-dimensional CTAs */
             : o->imm == SP_NCTAID_X ? t->nctaid_x
                                     : t->ctaid[o->imm - SP_CTAID_X];
        return 1;
    case O_PARAM: {
        uint64_t x = 0;
        const char *blk = w->pblk ? (const char *)w->pblk : w->ws ? (const char *)&w->tprm : (const char *)&w->prm;
        size_t size = w->pblk ? sizeof w->blk : w->ws ? sizeof w->tprm : sizeof w->prm;
        size_t n = size - (size_t)o->imm < 8 ? size - (size_t)o->imm : 8;
        memcpy(&x, blk + o->imm, n); /* the op's width trims it */
        *v = x;
        return 1;
    }
    default: return 0;
    }
}

static void set(thread *t, const operand *d, uint64_t v, int known)
{
    if (d->kind != O_REG) return;
    t->val[d->reg] = v;
    t->known[d->reg] = (unsigned char)known;
}

static int64_t sx32(uint64_t v) { return (int64_t)(int32_t)(uint32_t)v; }

static int compare(const char *op, uint64_t a, uint64_t b)
{
    int s = is_signed(op), w64 = is_64(op);
    int64_t x = s ? (w64 ? (int64_t)a : sx32(a)) : 0, y = s ? (w64 ? (int64_t)b : sx32(b)) : 0;
    uint64_t ux = w64 ? a : (uint32_t)a, uy = w64 ? b : (uint32_t)b;
    if (strncmp(op, "setp.lt", 7) == 0) return s ? x < y : ux < uy;
    if (strncmp(op, "setp.le", 7) == 0) return s ? x <= y : ux <= uy;
    if (strncmp(op, "setp.gt", 7) == 0) return s ? x > y : ux > uy;
    if (strncmp(op, "setp.ge", 7) == 0) return s ? x >= y : ux >= uy;
    if (strncmp(op, "setp.eq", 7) == 0) return ux == uy;
    if (strncmp(op, "setp.ne", 7) == 0) return ux != uy;
    fail_msg("setp %s not modelled", op);
    return 0;
}

/* The integer ALU ops: 1 and *r when op is one, else 0. */
static int alu(const char *op, uint64_t a, uint64_t b, uint64_t c, uint64_t *r)
{
    int s = is_signed(op), w64 = is_64(op) && strncmp(op, "mul.wide", 8) != 0;
    uint64_t m = w64 ? ~0ull : 0xffffffffull;
    if (strncmp(op, "mov.", 4) == 0) *r = a;
    else if (strncmp(op, "add.", 4) == 0) *r = a + b;
    else if (strncmp(op, "sub.", 4) == 0) *r = a - b;
    else if (strncmp(op, "mul.lo.", 7) == 0) *r = a * b;
    else if (strncmp(op, "mad.lo.", 7) == 0) *r = a * b + c;
    else if (strcmp(op, "mul.wide.u32") == 0) *r = (uint64_t)(uint32_t)a * (uint32_t)b;
    else if (strcmp(op, "mul.wide.s32") == 0) *r = (uint64_t)(sx32(a) * sx32(b));
    else if (strncmp(op, "div.", 4) == 0) {
        if ((uint32_t)b == 0) return -1;
        *r = s ? (uint64_t)(sx32(a) / sx32(b)) : (uint32_t)a / (uint32_t)b;
    } else if (strncmp(op, "shr.", 4) == 0) *r = s ? (uint64_t)(sx32(a) >> (b & 31)) : (a & m) >> (b & 63);
    else if (strncmp(op, "shl.", 4) == 0) *r = a << (b & 63);
    else if (strncmp(op, "and.", 4) == 0) *r = a & b;
    else if (strncmp(op, "or.b", 4) == 0) *r = a | b;
    else if (strncmp(op, "xor.", 4) == 0) *r = a ^ b;
    else if (strncmp(op, "min.", 4) == 0) *r = s ? (uint64_t)(sx32(a) < sx32(b) ? sx32(a) : sx32(b)) : (a < b ? a : b);
    else if (strncmp(op, "max.", 4) == 0) *r = s ? (uint64_t)(sx32(a) > sx32(b) ? sx32(a) : sx32(b)) : (a > b ? a : b);
    else if (strcmp(op, "bfe.u32") == 0) *r = ((uint32_t)a >> b) & ((1u << c) - 1);
    else if (strcmp(op, "cvt.u64.u32") == 0) *r = (uint32_t)a;
    else if (strcmp(op, "cvt.s64.s32") == 0) *r = (uint64_t)sx32(a);
    else if (strncmp(op, "rem.", 4) == 0) {
        if ((uint32_t)b == 0) return -1;
        *r = s ? (uint64_t)(sx32(a) % sx32(b)) : (uint32_t)a % (uint32_t)b;
    } else if (strcmp(op, "cvta.param.u64") == 0) *r = a;
    /* lane 0's value to every lane: this lane's own, exact for lane 0 and for a warp-uniform value (the one use: the
     * warp-specialized frame's warpgroup index, FJ_LEAN_WG_UNIFORM) */
    else if (strcmp(op, "shfl.sync.idx.b32") == 0 && b == 0) *r = a;
    else return 0;
    if (strncmp(op, "mul.wide", 8) != 0 && strncmp(op, "cvt", 3) != 0) *r &= m;
    return 1;
}

/* 1 when in's guard lets it run, 0 when not, -1 when the guard's value is unknown (from float data). */
int sim_guard(const thread *t, const insn *in)
{
    if (in->guard < 0) return 1;
    if (!t->known[in->guard]) return -1;
    return (t->val[in->guard] != 0) != in->guard_neg;
}

int sim_value(const prog *p, thread *t, world *w, const operand *o, uint64_t *v) { return src(p, t, w, o, v); }

void sim_set(thread *t, const operand *d, uint64_t v, int known) { set(t, d, v, known); }

/* One instruction at t->pc (see ptx_sim.h). */
int sim_step(const prog *p, thread *t, world *w)
{
    if (t->pc < 0 || t->pc >= p->n) return why(w, "fell off the end"), SIM_STOP;
    const insn *in = &p->v[t->pc++];
    const char *op = in->op;
    int pc = t->pc;
    if (++t->steps > 5000000) return why(w, "thread %u ran over 5M instructions", t->tid), SIM_STOP;
    int g = sim_guard(t, in);
    if (g < 0) {
        /* a guard from float values (the rescale vote): only float work or a local branch depends on it */
        if (strncmp(op, "bra", 3) == 0) return SIM_OK;
        if (strncmp(op, "ld.global", 9) == 0 || strncmp(op, "cp.async.cg", 11) == 0 ||
            (w->varlen && strncmp(op, "st.global", 9) == 0))
            return why(w, "%s under an unknown guard (pc %d)", op, pc - 1), SIM_STOP;
        set(t, &in->a[0], 0, 0);
        return SIM_OK;
    }
    if (!g) return SIM_OK;
    if (strcmp(op, "ret") == 0 || strcmp(op, "ret;") == 0) return SIM_RET;
    if (strncmp(op, "bra", 3) == 0) {
        t->pc = (int)in->a[0].imm;
        return SIM_OK;
    }
    uint64_t a = 0, b = 0, c = 0, r = 0;
    int ka = in->n > 1 ? src(p, t, w, &in->a[1], &a) : 1, kb = in->n > 2 ? src(p, t, w, &in->a[2], &b) : 1;
    int kc = in->n > 3 ? src(p, t, w, &in->a[3], &c) : 1;
    if (strncmp(op, "ld.param.", 9) == 0) {
        set(t, &in->a[0], strstr(op, "u64") ? a : (uint32_t)a, strstr(op, "f32") == NULL);
    } else if (strncmp(op, "setp.", 5) == 0) {
        int v = compare(op, a, b), k = ka && kb;
        if (strstr(op, ".and.")) v = v && c, k = k && kc;
        set(t, &in->a[0], (uint64_t)v, k);
    } else if (strcmp(op, "or.pred") == 0 || strcmp(op, "and.pred") == 0) {
        set(t, &in->a[0], op[0] == 'o' ? (a || b) : (a && b), ka && kb);
    } else if (strncmp(op, "selp.", 5) == 0) {
        if (!kc) set(t, &in->a[0], 0, 0);
        else set(t, &in->a[0], c ? a : b, c ? ka : kb);
    } else if (strcmp(op, "ld.global.nc.u32") == 0) {
        uint64_t addr;
        if (in->a[1].kind != O_MEM) return why(w, "ld.global.nc.u32 of a form not modelled (pc %d)", pc - 1), SIM_STOP;
        if (!src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &addr))
            return why(w, "block-table / seqlens_k load from an unknown address (pc %d)", pc - 1), SIM_STOP;
        set(t, &in->a[0], load_u32(w, addr + (uint64_t)in->a[1].imm), 1);
    } else if (w->varlen && strncmp(op, "st.global", 9) == 0) {
        uint64_t addr;
        if (in->a[0].kind != O_MEM || !src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[0].reg}, &addr))
            return why(w, "%s to an unknown address (pc %d)", op, pc - 1), SIM_STOP;
        record_store(w, addr + (uint64_t)in->a[0].imm, op);
    } else if ((w->smem_ld || w->smem_st) && (strncmp(op, "ldmatrix", 8) == 0 || strncmp(op, "stmatrix", 8) == 0)) {
        int m = in->a[0].kind == O_MEM ? 0 : 1, ld = op[0] == 'l';
        uint64_t addr;
        if (in->a[m].kind != O_MEM || !src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[m].reg}, &addr))
            return why(w, "%s with an unknown address (pc %d)", op, pc - 1), SIM_STOP;
        if (ld ? w->smem_ld != NULL : w->smem_st != NULL)
            push(w, ld ? &w->smem_ld : &w->smem_st, ld ? &w->n_ld : &w->n_st, addr + (uint64_t)in->a[m].imm);
    } else if (run_async(p, t, w, in, pc - 1)) {
    } else if (strcmp(op, "cp.async.cg.shared.global") == 0) {
        uint64_t addr;
        if (in->a[1].kind != O_MEM) return why(w, "cp.async of a form not modelled (pc %d)", pc - 1), SIM_STOP;
        if (!src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &addr) || !kc)
            return why(w, "cp.async with an unknown address or size (pc %d)", pc - 1), SIM_STOP;
        if (c) record_copy(w, addr + (uint64_t)in->a[1].imm);
        if (c && w->smem_cp) {
            uint64_t s;
            if (in->a[0].kind != O_MEM || !src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[0].reg}, &s))
                return why(w, "cp.async to an unknown shared address (pc %d)", pc - 1), SIM_STOP;
            push(w, &w->smem_cp, &w->n_cp, s + (uint64_t)in->a[0].imm);
            push(w, &w->gmem_cp, &w->n_gcp, addr + (uint64_t)in->a[1].imm);
        }
    } else {
        int res = alu(op, a, b, c, &r);
        if (res < 0 && ka && kb) return why(w, "division by zero (pc %d)", pc - 1), SIM_STOP;
        if (res > 0) set(t, &in->a[0], r, ka && kb && kc);
        else if (in->n && in->a[0].kind == O_REG) set(t, &in->a[0], 0, 0); /* float, MMA, shared: unknown */
    }
    return w->why[0] ? SIM_STOP : SIM_OK;
}

/* Run one thread to `ret`; 0 when it stopped on something the test does not model (w->why says what). */
int run_thread(const prog *p, thread *t, world *w)
{
    memset(t->known, 0, (size_t)p->n_regs);
    t->pc = 0, t->steps = 0;
    for (;;) {
        int r = sim_step(p, t, w);
        if (r != SIM_OK) return r == SIM_RET;
    }
}

static void record_store_box(world *w, uint64_t off, const uint64_t c[4]);

static int run_async(const prog *p, thread *t, world *w, const insn *in, int pc)
{
    uint64_t a = 0, b = 0, c = 0, x[4];
    const operand *o = in->a;
    int known = 1;
    if (w->varlen && strncmp(in->op, "cp.async.bulk.tensor.4d.global", 30) == 0) { /* the O store (consumers) */
        known = src(p, t, w, &(operand){.kind = O_REG, .reg = o[0].reg}, &a);
        for (int i = 0; i < 4; i++) known = known && src(p, t, w, &(operand){.kind = O_REG, .reg = in->coord[i]}, &x[i]);
        if (!known || o[0].kind != O_MEM) why(w, "TMA store with an unknown operand (pc %d)", pc);
        else record_store_box(w, a + (uint64_t)o[0].imm - BASE_PARAMS, x);
        return 1;
    }
    if (strncmp(in->op, "cp.async.bulk.tensor.4d.shared::cluster", 39) == 0) {
        known = src(p, t, w, &(operand){.kind = O_REG, .reg = o[0].reg}, &a) &&
                src(p, t, w, &(operand){.kind = O_REG, .reg = o[1].reg}, &b) &&
                src(p, t, w, &(operand){.kind = O_REG, .reg = o[2].reg}, &c);
        for (int i = 0; i < 4; i++) known = known && src(p, t, w, &(operand){.kind = O_REG, .reg = in->coord[i]}, &x[i]);
        if (!known || o[0].kind != O_MEM || o[2].kind != O_MEM) why(w, "TMA load with an unknown operand (pc %d)", pc);
        else record_box(w, b - BASE_PARAMS, a + (uint64_t)o[0].imm, x, c + (uint64_t)o[2].imm);
        return 1;
    }
    if (strncmp(in->op, "mbarrier.arrive.expect_tx", 25) == 0) {
        if (!src(p, t, w, &(operand){.kind = O_REG, .reg = o[1].reg}, &a) || !src(p, t, w, &o[2], &b))
            why(w, "expect_tx with an unknown barrier or byte count (pc %d)", pc);
        else *bar_slot(w, a + (uint64_t)o[1].imm) += (int64_t)(uint32_t)b;
        return 1;
    }
    if (strncmp(in->op, "mbarrier.try_wait", 17) == 0) { /* the producer's waits all complete */
        if (!src(p, t, w, &(operand){.kind = O_REG, .reg = o[1].reg}, &a)) why(w, "wait on an unknown barrier");
        else if (*bar_slot(w, a + (uint64_t)o[1].imm))
            why(w, "the producer waits on barrier +%llu with %lld transaction bytes not loaded (pc %d)",
                (unsigned long long)(a + (uint64_t)o[1].imm), (long long)*bar_slot(w, a + (uint64_t)o[1].imm), pc);
        set(t, &o[0], 1, 1);
        return 1;
    }
    return 0;
}

/* ---- varlen batches ------------------------------------------------------------------------------------------- */
/* Packed tensors [T, H, D] (D 64): row t of head h at 2 x (t x H + h) x 64 bytes from the base. Sequence b's
 * queries are packed rows [cu_q[b], +len), clamped to seqlen_q (cap_q); keys likewise by cu_k (VARLEN_K), else batched
 * [B, Hkv, cap_k, D] by stride[0]. */

/* A TMA box of the sm_90a varlen kernel through the packed maps (tensor_map.c): element (i, s) of the map is packed
 * row i + s - cap, in bounds for 0 <= i < cap; the batched K/V map is (D, cap_k, Hkv, B). Each in-bounds row's 8
 * chunks of the box's 64 columns are recorded as the sm_80 copies would be; the box's bytes always count. */
static void record_box_varlen(world *w, uint64_t off, const uint64_t c[4], uint64_t bar)
{
    int q = off == offsetof(fj_fwd_params_tma, tmap_q), v = off == offsetof(fj_fwd_params_tma, tmap_v);
    if (!q && !v && off != offsetof(fj_fwd_params_tma, tmap_k)) {
        why(w, "TMA load through map +%llu", (unsigned long long)off);
        return;
    }
    /* box rows of 128 bytes of 16-bit elements, or (FP8) fp8_span bytes of 1-byte elements */
    int rb = w->fp8_span ? w->fp8_span : 128, eb = w->fp8_span ? 1 : 2;
    int rows = q ? w->q_box_bytes / rb : w->block_n, cap = q ? w->cap_q : w->cap_k, packed = q || w->varlen_k;
    int col = (int)c[0], head = (int)c[2];
    int64_t i0 = (int32_t)c[1], seq = (int32_t)c[3];
    *bar_slot(w, bar) -= (int64_t)rows * rb;
    const int64_t *st = q ? w->prm.base.q_stride : v ? w->prm.base.v_stride : w->prm.base.k_stride;
    uint64_t base = q ? BASE_Q : v ? BASE_V : BASE_K;
    for (int r = 0; r < rows; r++) {
        int64_t i = i0 + r;
        if (i < 0 || i >= cap || seq < 0) continue; /* out of bounds: zero-filled, nothing read */
        int64_t e = packed ? (i + seq - cap) * st[2] + head * st[1] : seq * st[0] + head * st[1] + i * st[2];
        for (int ch = col * eb / 16; ch < (col * eb + rb) / 16; ch++) {
            if (q) push(w, &w->q_reads, &w->n_q, base + (uint64_t)(eb * e + 16 * ch));
            else record_copy(w, base + (uint64_t)(eb * e + 16 * ch));
        }
    }
}

/* The O TMA store of a consumer warpgroup: a box of 64 rows through the packed O map, rows past the sequence's end
 * not written; each written row's 8 chunks of the box's 64 columns recorded. */
static void record_store_box(world *w, uint64_t off, const uint64_t c[4])
{
    if (off != offsetof(fj_fwd_params_tma, tmap_o)) {
        why(w, "TMA store through map +%llu", (unsigned long long)off);
        return;
    }
    const int64_t *st = w->prm.base.o_stride;
    int64_t i0 = (int32_t)c[1], seq = (int32_t)c[3];
    for (int r = 0; r < 64; r++) {
        int64_t i = i0 + r;
        if (i < 0 || i >= w->cap_q || seq < 0) continue;
        for (int ch = (int)c[0] / 8; ch < (int)c[0] / 8 + 8; ch++)
            push(w, &w->o_writes, &w->n_o, BASE_O + (uint64_t)(2 * ((i + seq - w->cap_q) * st[2] + (int64_t)c[2] * st[1]) + 16 * ch));
    }
}

int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The sm_90a kernel's parameter block and what record_box needs; grid: one CTA per work tile (each takes one). */
unsigned ws_setup(world *w, const fj_plan *pl, const fajit_attention_args *a)
{
    fj_fwd_params_tma *t = &w->tprm.tma;
    fj_forward_params_tma(a, pl, t);
    w->tprm.dec = w->prm;
    if (w->packed) t->n_mblocks = 1, t->heads_batch = (uint32_t)(w->hkv * w->batch);
    t->n_tiles = t->n_mblocks * t->heads_batch * (uint32_t)w->splits;
    w->ws = 1, w->box = w->page < pl->cfg.block_n ? w->page : pl->cfg.block_n, w->block_n = pl->cfg.block_n;
    w->kv_tile_bytes = pl->kv_tile_bytes, w->k_off = pl->k_off, w->v_off = pl->v_off;
    w->q_box_bytes = (w->packed ? w->group * a->seqlen_q : pl->cfg.block_m) * 128;
    w->fp8_span = pl->fp8 ? pl->cfg.swizzle : 0;
    if (pl->fp8) w->q_box_bytes = (w->packed ? w->group * a->seqlen_q : pl->cfg.block_m) * pl->cfg.swizzle;
    else assert_int_equal(pl->cfg.swizzle, 128);
    return t->n_tiles;
}
