/*
 * test_paged_reads.c - which global memory the paged decode kernels read (label unit; no GPU, no ptxas).
 *
 * The sm_80 decode variants' PTX is run, thread by thread, CTA by CTA, by a small interpreter of its integer
 * subset (address and loop arithmetic, predicates, branches, ld.param, the block-table and seqlens_k loads,
 * cp.async); float, MMA and shared-memory instructions only make their destinations unknown. An address or
 * copy size built from an unknown value fails the test. Checked per CTA, for paged K/V (plain and gathered
 * from 16-row segments, pages read at each copy or a tile ahead (AHEAD), 2-3 stages, split-KV with empty
 * splits, per-sequence lengths 0, 1, exact page and tile multiples, partial last pages, clamped ones):
 *   - every block-table entry read is in the CTA's own row and below ceil(len / page_size) (no read of a page
 *     the sequence has not filled), every seqlens_k read is the CTA's batch;
 *   - the K and V rows copied with a non-zero size are exactly the split's keys [first, end) x all 16-byte
 *     chunks, each once, each from the page the block table names for it (address = pool + page x page
 *     stride + KV head x head stride + row in page x row stride).
 * The sm_90a kernel's paged variants (test_sm90) the same way, for the producer thread of one CTA per work tile:
 * its TMA boxes (coordinates column, row in the page, KV head, page) count as the rows they load - the split's
 * keys up to the length rounded up to the box (min(page_size, block_n) rows) - each box must land at its
 * logical row's place in the stage, and every mbarrier's expect_tx bytes must equal the bytes its boxes load
 * (at each wait of the producer and at the end).
 * Varlen batches (test_varlen): the sm_80 kernel, every thread of every CTA - its Q / K / V copies and its O and LSE
 * stores are exactly its sequence's rows (empty, length-1, clamped and decreasing-pair sequences, packed or batched keys);
 * the sm_90a kernel over a persistent grid of 3 CTAs, producer and consumers - its Q / K / V boxes through the packed
 * maps (clipped at each sequence's end as TMA clips) exactly each tile's rows, its O TMA stores and LSE stores exactly
 * the sequences' rows, the tiles past their sequence's end skipped, every barrier's bytes.
 * Run: ctest --test-dir build -R test_paged_reads --output-on-failure
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

#include "codegen/codegen.h"
#include "runtime/error.h"
#include "codegen/kernel_abi.h"
#include "fajit.h"
#include "runtime/forward.h"

/* ---- the PTX, parsed -------------------------------------------------------------------------------- */
enum { O_NONE, O_REG, O_IMM, O_SPECIAL, O_SMEM, O_MEM, O_PARAM, O_PBASE, O_LABEL, O_OTHER };
enum { SP_TID, SP_CTAID_X, SP_CTAID_Y, SP_CTAID_Z, SP_NCTAID_X };

typedef struct operand {
    int kind, reg, neg; /* reg: register index (O_REG, O_MEM base); neg: !%p */
    int64_t imm;        /* O_IMM value, O_MEM / O_PARAM offset, O_SPECIAL which, O_LABEL instruction index */
} operand;

typedef struct insn {
    char op[64];
    int guard, guard_neg; /* guard register or -1 */
    int n;
    operand a[6];
    char label[64];       /* O_LABEL operand's name, resolved after parsing */
    int coord[4];         /* a TMA load's coordinates {column, row, head, batch or page}: registers */
} insn;

typedef struct bank {
    char name[16];
    int base, count, is_pred;
} bank;

typedef struct prog {
    insn *v;
    int n, cap;
    bank banks[24];
    int n_banks, n_regs;
    char labels[2048][64];
    int label_at[2048], n_labels;
} prog;

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
        static const char *const sp[] = {"%tid.x", "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x"};
        for (int i = 0; i < 5; i++)
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
        o->kind = O_IMM, o->imm = strtoll(s, NULL, 0);
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
    in->guard = -1;
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

static void parse_prog(prog *p, const char *ptx)
{
    memset(p, 0, sizeof *p);
    const char *body = strstr(ptx, ".entry fajit_fwd");
    assert_non_null(body);
    char line[512];
    for (const char *s = body; *s;) {
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
#define BASE_Q 0x100000000ull
#define BASE_K 0x200000000ull
#define BASE_V 0x300000000ull
#define BASE_O 0x400000000ull
#define BASE_LENS 0x500000000ull
#define BASE_TABLE 0x600000000ull
#define BASE_WS 0x700000000ull
#define BASE_PARAMS 0x800000000ull
#define BASE_CUQ 0x900000000ull
#define BASE_CUK 0xa00000000ull
#define BASE_LSE 0xb00000000ull
#define MAX_B 5
#define MAX_PAGES 64
#define MAX_BARS 64

typedef struct world {
    fj_fwd_params_decode prm;
    /* the sm_90a kernel (ws): its parameter block, the K/V box rows, the tile; TMA bytes per barrier */
    int ws, box, block_n, kv_tile_bytes, k_off, v_off, q_box_bytes;
    fj_fwd_params_tma_decode tprm;
    uint32_t bar_addr[MAX_BARS];
    int64_t bar_bytes[MAX_BARS];
    int n_bars;
    int batch, hkv, group, packed, splits, page, pages_per_seq, dim;
    int lens[MAX_B], use_lens;
    int32_t table[MAX_B][MAX_PAGES];
    /* varlen (test_varlen): cu_seqlens at BASE_CUQ / BASE_CUK; Q copies and boxes, O and LSE stores recorded */
    int varlen, varlen_k, cap_q, cap_k, total_q, o_chunks;
    int32_t cu_q[MAX_B + 1], cu_k[MAX_B + 1];
    uint64_t *q_reads, *o_writes, *lse_writes;
    int n_q, n_o, n_lse;
    /* what one CTA did */
    int cta_b; /* -1: any (the sm_90a producer walks every sequence's tiles) */
    long table_reads, bad_reads;
    uint64_t *k_reads, *v_reads;
    int n_k, n_v, cap;
    char why[256];
} world;

/* Batch b's keys as the kernel takes them: seqlens_k[b] clamped to [0, seqlen_k], or seqlen_k. */
static int seq_len(const world *w, int b)
{
    int n = w->use_lens ? w->lens[b] : (int)w->prm.base.seqlen_k;
    return n < 0 ? 0 : n > (int)w->prm.base.seqlen_k ? (int)w->prm.base.seqlen_k : n;
}

static void why(world *w, const char *fmt, ...) FJ_PRINTF(2, 3);

static void why(world *w, const char *fmt, ...)
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
        if (b != w->cta_b) why(w, "seqlens_k[%d] read by a CTA of batch %d", b, w->cta_b);
        return (uint32_t)w->lens[b];
    }
    if (addr >= BASE_TABLE && addr < BASE_TABLE + 4ull * MAX_B * MAX_PAGES && addr % 4 == 0) {
        int e = (int)((addr - BASE_TABLE) / 4), b = e / w->pages_per_seq, i = e % w->pages_per_seq;
        int len = seq_len(w, b);
        int filled = (len + w->page - 1) / w->page;
        w->table_reads++;
        if (b != w->cta_b || i >= filled) {
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

static void push(world *w, uint64_t **v, int *n, uint64_t addr)
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

static void record_copy(world *w, uint64_t addr)
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
static int64_t *bar_slot(world *w, uint64_t addr)
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

/* ---- the interpreter ------------------------------------------------------------------------------------ */
typedef struct thread {
    uint64_t *val;
    unsigned char *known;
    unsigned tid, ctaid[3], nctaid_x;
} thread;

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
        *v = o->imm == SP_TID ? t->tid : o->imm == SP_NCTAID_X ? t->nctaid_x : t->ctaid[o->imm - SP_CTAID_X];
        return 1;
    case O_PARAM: {
        uint64_t x = 0;
        const char *blk = w->ws ? (const char *)&w->tprm : (const char *)&w->prm;
        size_t size = w->ws ? sizeof w->tprm : sizeof w->prm;
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
    else return 0;
    if (strncmp(op, "mul.wide", 8) != 0 && strncmp(op, "cvt", 3) != 0) *r &= m;
    return 1;
}

/* Run one thread to `ret`; 0 when it stopped on something the test does not model (w->why says what). */
static int run_thread(const prog *p, thread *t, world *w)
{
    memset(t->known, 0, (size_t)p->n_regs);
    long steps = 0;
    for (int pc = 0; pc < p->n;) {
        const insn *in = &p->v[pc++];
        const char *op = in->op;
        if (++steps > 5000000) return why(w, "thread %u ran over 5M instructions", t->tid), 0;
        if (in->guard >= 0) {
            if (!t->known[in->guard]) {
                /* a guard from float values (the rescale vote): only float work or a local branch depends on it */
                if (strncmp(op, "bra", 3) == 0) continue;
                if (strncmp(op, "ld.global", 9) == 0 || strncmp(op, "cp.async.cg", 11) == 0 ||
                    (w->varlen && strncmp(op, "st.global", 9) == 0))
                    return why(w, "%s under an unknown guard (pc %d)", op, pc - 1), 0;
                set(t, &in->a[0], 0, 0);
                continue;
            }
            if ((t->val[in->guard] != 0) == in->guard_neg) continue;
        }
        if (strcmp(op, "ret") == 0 || strcmp(op, "ret;") == 0) return 1;
        if (strncmp(op, "bra", 3) == 0) {
            pc = (int)in->a[0].imm;
            continue;
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
            if (in->a[1].kind != O_MEM) return why(w, "ld.global.nc.u32 of a form not modelled (pc %d)", pc - 1), 0;
            if (!src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &addr))
                return why(w, "block-table / seqlens_k load from an unknown address (pc %d)", pc - 1), 0;
            set(t, &in->a[0], load_u32(w, addr + (uint64_t)in->a[1].imm), 1);
        } else if (w->varlen && strncmp(op, "st.global", 9) == 0) {
            uint64_t addr;
            if (in->a[0].kind != O_MEM || !src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[0].reg}, &addr))
                return why(w, "%s to an unknown address (pc %d)", op, pc - 1), 0;
            record_store(w, addr + (uint64_t)in->a[0].imm, op);
        } else if (run_async(p, t, w, in, pc - 1)) {
        } else if (strcmp(op, "cp.async.cg.shared.global") == 0) {
            uint64_t addr;
            if (in->a[1].kind != O_MEM) return why(w, "cp.async of a form not modelled (pc %d)", pc - 1), 0;
            if (!src(p, t, w, &(operand){.kind = O_REG, .reg = in->a[1].reg}, &addr) || !kc)
                return why(w, "cp.async with an unknown address or size (pc %d)", pc - 1), 0;
            if (c) record_copy(w, addr + (uint64_t)in->a[1].imm);
        } else {
            int res = alu(op, a, b, c, &r);
            if (res < 0 && ka && kb) return why(w, "division by zero (pc %d)", pc - 1), 0;
            if (res > 0) set(t, &in->a[0], r, ka && kb && kc);
            else if (in->n && in->a[0].kind == O_REG) set(t, &in->a[0], 0, 0); /* float, MMA, shared: unknown */
        }
        if (w->why[0]) return 0;
    }
    return why(w, "fell off the end"), 0;
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

/* ---- one launch ----------------------------------------------------------------------------------------- */
static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The chunks split s of batch b, KV head h must copy from pool `base`, sorted. */
static int expected(const world *w, const fj_plan *pl, int b, int h, int s, uint64_t base, const int64_t *st,
                    uint64_t *out)
{
    int len = seq_len(w, b), bn = pl->cfg.block_n, n = 0;
    int tiles = (len + bn - 1) / bn, first = 0, end = tiles;
    if (w->splits > 1) {
        int per = (tiles + w->splits - 1) / w->splits;
        first = s * per, end = first + per < tiles ? first + per : tiles;
    }
    int lim = w->ws ? (len + w->box - 1) / w->box * w->box : len; /* sm_90a: whole boxes (rows past len masked) */
    for (int j = first * bn; j < end * bn && j < lim; j++) {
        int64_t page = w->table[b][j / w->page], row = j % w->page;
        for (int c = 0; c < w->dim / 8; c++)
            out[n++] = base + (uint64_t)(2 * (page * st[0] + h * st[1] + row * st[2]) + 16 * c);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_u64);
    return n;
}

static void check_cta(world *w, const fj_plan *pl, int b, int h, int s, uint64_t *want, const char *what)
{
    const uint64_t bases[2] = {BASE_K, BASE_V};
    const int64_t *strides[2] = {w->prm.base.k_stride, w->prm.base.v_stride};
    uint64_t *got[2] = {w->k_reads, w->v_reads};
    int ngot[2] = {w->n_k, w->n_v};
    for (int x = 0; x < 2; x++) {
        int n = expected(w, pl, b, h, s, bases[x], strides[x], want);
        qsort(got[x], (size_t)ngot[x], sizeof(uint64_t), cmp_u64);
        int bad = n != ngot[x];
        for (int i = 0; !bad && i < n; i++) bad = want[i] != got[x][i];
        if (bad) {
            int i = 0;
            while (i < n && i < ngot[x] && want[i] == got[x][i]) i++;
            fail_msg("%s: batch %d head %d split %d (len %d): %s copied %d chunks, want %d; first difference at "
                     "#%d: got 0x%llx want 0x%llx", what, b, h, s, seq_len(w, b),
                     x ? "V" : "K", ngot[x], n, i, i < ngot[x] ? (unsigned long long)got[x][i] : 0ull,
                     i < n ? (unsigned long long)want[i] : 0ull);
        }
    }
}

typedef struct launch_case {
    int ws; /* the sm_90a kernel (the heuristic's warps and schedule for the tile), else sm_80 */
    int block_m, block_n, stages, warps, dim;
    unsigned variant; /* PAGED and more; SPLIT added when splits > 1 */
    int batch, hkv, group, page, pages_per_seq, splits, seqlen_k;
    int lens[MAX_B]; /* used with FJ_VARIANT_SEQLENS */
} launch_case;

/* The sm_90a kernel's parameter block and what record_box needs; grid: one CTA per work tile (each takes one). */
static unsigned ws_setup(world *w, const fj_plan *pl, const fajit_attention_args *a)
{
    fj_fwd_params_tma *t = &w->tprm.tma;
    fj_forward_params_tma(a, pl, t);
    w->tprm.dec = w->prm;
    if (w->packed) t->n_mblocks = 1, t->heads_batch = (uint32_t)(w->hkv * w->batch);
    t->n_tiles = t->n_mblocks * t->heads_batch * (uint32_t)w->splits;
    w->ws = 1, w->box = w->page < pl->cfg.block_n ? w->page : pl->cfg.block_n, w->block_n = pl->cfg.block_n;
    w->kv_tile_bytes = pl->kv_tile_bytes, w->k_off = pl->k_off, w->v_off = pl->v_off;
    w->q_box_bytes = (w->packed ? w->group * a->seqlen_q : pl->cfg.block_m) * 128;
    assert_int_equal(pl->cfg.swizzle, 128);
    return t->n_tiles;
}

/* The sm_90a kernel: the producer thread (thread 0) of CTA x, which takes work tile x (query block fastest, then
 * the split, the head - the KV head when packed - and the batch); every barrier's bytes loaded by the end. */
static void run_ws_ctas(const prog *p, world *w, thread *t, const fj_plan *pl, unsigned n_tiles, uint64_t *want,
                        const char *what)
{
    unsigned nmb = w->tprm.tma.n_mblocks, heads = w->packed ? (unsigned)w->hkv : (unsigned)(w->hkv * w->group);
    for (unsigned x = 0; x < n_tiles; x++) {
        unsigned hb = x / nmb / (unsigned)w->splits, split = x / nmb % (unsigned)w->splits, h = hb % heads;
        w->cta_b = (int)(hb / heads), w->n_k = w->n_v = 0, w->n_bars = 0;
        t->ctaid[0] = x, t->ctaid[1] = t->ctaid[2] = 0, t->nctaid_x = n_tiles, t->tid = 0;
        if (!run_thread(p, t, w)) fail_msg("%s: CTA %u (tile of batch %d): %s", what, x, w->cta_b, w->why);
        for (int i = 0; i < w->n_bars; i++)
            if (w->bar_bytes[i]) fail_msg("%s: CTA %u: barrier +%u ends %lld bytes off", what, x, w->bar_addr[i],
                                          (long long)w->bar_bytes[i]);
        check_cta(w, pl, w->cta_b, (int)(w->packed ? h : h / (unsigned)w->group), (int)split, want, what);
    }
}

static void run_case(const launch_case *lc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = lc->dim, .block_m = lc->block_m,
                        .block_n = lc->block_n, .stages = lc->stages, .swizzle = 128, .warps = lc->warps, .col_warps = 1,
                        .overlap = -1, .pingpong = -1};
    if (lc->ws) {
        cfg = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = lc->dim,
                             .block_m = lc->block_m, .block_n = lc->block_n, .stages = lc->stages};
        fj_config_heuristic(&cfg, &cfg, NULL, 0);
    }
    unsigned variant = lc->variant | (lc->splits > 1 ? FJ_VARIANT_SPLIT : 0);
    fj_plan pl;
    char what[200];
    if (fj_plan_build_variant(&cfg, variant, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);

    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->batch = lc->batch, w->hkv = lc->hkv, w->group = lc->group, w->splits = lc->splits, w->page = lc->page;
    w->pages_per_seq = lc->pages_per_seq, w->dim = lc->dim, w->use_lens = (variant & FJ_VARIANT_SEQLENS) != 0;
    w->packed = (variant & FJ_VARIANT_PACK) != 0;
    memcpy(w->lens, lc->lens, sizeof w->lens);
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    int hq = lc->hkv * lc->group, pool_pages = lc->batch * lc->pages_per_seq;
    a.dtype = FAJIT_DTYPE_BF16, a.batch = lc->batch, a.heads_q = hq, a.heads_kv = lc->hkv, a.seqlen_q = 1;
    a.seqlen_k = lc->seqlen_k, a.head_dim = lc->dim;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O;
    int64_t qs[3] = {(int64_t)hq * lc->dim, lc->dim, lc->dim};
    int64_t ks[3] = {(int64_t)lc->hkv * lc->page * lc->dim, (int64_t)lc->page * lc->dim, lc->dim}; /* [pages][H][ps][D] */
    int64_t vs[3] = {(int64_t)lc->page * lc->hkv * lc->dim, lc->dim, (int64_t)lc->hkv * lc->dim}; /* [pages][ps][H][D] */
    (void)pool_pages;
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, vs, sizeof vs);
    fj_forward_params(&a, &pl, &w->prm.base);
    w->prm.seqlens_k = w->use_lens ? BASE_LENS : 0;
    w->prm.ws_o = BASE_WS, w->prm.ws_lse = BASE_WS + (1u << 30);
    w->prm.splits = (uint32_t)lc->splits, w->prm.batch = (uint32_t)lc->batch;
    w->prm.block_table = BASE_TABLE, w->prm.max_pages = (uint32_t)lc->pages_per_seq;
    w->prm.page_size = (uint32_t)lc->page;
    for (int b = 0; b < lc->batch; b++) /* pages of the pool in a scrambled order; -1 past what is filled */
        for (int i = 0; i < MAX_PAGES; i++) {
            int filled = (seq_len(w, b) + lc->page - 1) / lc->page;
            w->table[b][i] = i < filled ? (b * lc->pages_per_seq + i) * 7 % (lc->batch * lc->pages_per_seq) : -1;
        }
    while ((lc->page & (lc->page - 1)) == 0 && (1 << w->prm.page_shift) < lc->page) w->prm.page_shift++;

    w->cap = 1 << 16;
    w->k_reads = calloc((size_t)w->cap, 8), w->v_reads = calloc((size_t)w->cap, 8);
    uint64_t *want = calloc((size_t)w->cap, 8);
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1), .nctaid_x = 1};
    assert_true(w->k_reads && w->v_reads && want && t.val && t.known);
    int heads_grid = w->packed ? lc->hkv : hq;
    if (lc->ws) run_ws_ctas(&p, w, &t, &pl, ws_setup(w, &pl, &a), want, what);
    for (int z = 0; z < lc->batch * lc->splits && !lc->ws; z++)
        for (int y = 0; y < heads_grid; y++) {
            w->cta_b = z / lc->splits, w->n_k = w->n_v = 0;
            t.ctaid[0] = 0, t.ctaid[1] = (unsigned)y, t.ctaid[2] = (unsigned)z;
            for (unsigned tid = 0; tid < (unsigned)pl.threads; tid++) {
                t.tid = tid;
                if (!run_thread(&p, &t, w)) fail_msg("%s: CTA (0, %d, %d) thread %u: %s", what, y, z, tid, w->why);
            }
            check_cta(w, &pl, z / lc->splits, w->packed ? y : y / lc->group, z % lc->splits, want, what);
        }
    printf("PASS %-62s B%d splits %d page %d: %ld block-table reads\n", what, lc->batch, lc->splits, lc->page,
           w->table_reads);
    assert_int_equal(w->bad_reads, 0);
    free(t.val), free(t.known), free(want), free(w->k_reads), free(w->v_reads), free(w), free(p.v);
}


/* ---- varlen batches ------------------------------------------------------------------------------------------- */
/* Packed tensors [T, H, D] (D 64): row t of head h at 2 x (t x H + h) x 64 bytes from the base. Sequence b's
 * queries are packed rows [cu_q[b], +len), clamped to seqlen_q (cap_q); keys likewise by cu_k (VARLEN_K), else batched
 * [B, Hkv, cap_k, D] by stride[0]. */
#define VL_DIM 64

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
    int rows = q ? w->q_box_bytes / 128 : w->block_n, cap = q ? w->cap_q : w->cap_k, packed = q || w->varlen_k;
    int col = (int)c[0], head = (int)c[2];
    int64_t i0 = (int32_t)c[1], seq = (int32_t)c[3];
    *bar_slot(w, bar) -= (int64_t)rows * 128;
    const int64_t *st = q ? w->prm.base.q_stride : v ? w->prm.base.v_stride : w->prm.base.k_stride;
    uint64_t base = q ? BASE_Q : v ? BASE_V : BASE_K;
    for (int r = 0; r < rows; r++) {
        int64_t i = i0 + r;
        if (i < 0 || i >= cap || seq < 0) continue; /* out of bounds: zero-filled, nothing read */
        int64_t e = packed ? (i + seq - cap) * st[2] + head * st[1] : seq * st[0] + head * st[1] + i * st[2];
        for (int ch = col / 8; ch < col / 8 + 8; ch++) {
            if (q) push(w, &w->q_reads, &w->n_q, base + (uint64_t)(2 * e + 16 * ch));
            else record_copy(w, base + (uint64_t)(2 * e + 16 * ch));
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

static int vl_len(const int32_t *cu, int b, int cap)
{
    int n = cu[b + 1] - cu[b];
    return n < 0 ? 0 : n > cap ? cap : n;
}

/* The KV tiles row block m0 of sequence b visits (the kernels' KV range): n_end. */
static int vl_n_end(const world *w, const fj_plan *pl, int b, int m0, int lq, int lk)
{
    int bn = pl->cfg.block_n, tiles = (lk + bn - 1) / bn;
    if (!pl->cfg.causal) return tiles;
    int last = m0 + pl->cfg.block_m - 1 + lk - lq, n = ((last < -1 ? -1 : last) + 1 + bn - 1) / bn;
    (void)w, (void)b;
    return n < tiles ? n : tiles;
}

/* Append what row block mb of (b, h) must touch: its Q rows, the K / V rows of its KV range (the sm_90a kernel's
 * batched keys: whole tiles within the capacity), its O words and LSE floats. */
static void vl_expect(const world *w, const fj_plan *pl, int b, int h, int mb, uint64_t *q, int *nq, uint64_t *k,
                      int *nk, uint64_t *o, int *no, uint64_t *l, int *nl)
{
    const fj_fwd_params *pr = &w->prm.base;
    int bm = pl->cfg.block_m, lq = vl_len(w->cu_q, b, w->cap_q), m0 = mb * bm, hkv = h / w->group;
    int lk = w->varlen_k ? vl_len(w->cu_k, b, w->cap_k) : w->cap_k;
    if (m0 >= lq) return;
    for (int r = m0; r < m0 + bm && r < lq; r++) {
        int64_t t = w->cu_q[b] + r;
        for (int c = 0; c < VL_DIM / 8; c++) q[(*nq)++] = BASE_Q + (uint64_t)(2 * (t * pr->q_stride[2] + h * pr->q_stride[1]) + 16 * c);
        for (int c = 0; c < VL_DIM; c += w->o_chunks ? 8 : 2) /* 16-byte chunks of a TMA store, else 4-byte words */
            o[(*no)++] = BASE_O + (uint64_t)(2 * (t * pr->o_stride[2] + h * pr->o_stride[1] + c));
        l[(*nl)++] = BASE_LSE + 4 * (uint64_t)(h * w->total_q + t);
    }
    int end = vl_n_end(w, pl, b, m0, lq, lk) * pl->cfg.block_n;
    int lim = w->ws && !w->varlen_k ? end : lk; /* batched keys on sm_90a: whole boxes inside the capacity */
    for (int j = 0; j < end && j < lim && j < w->cap_k; j++)
        for (int c = 0; c < VL_DIM / 8; c++) {
            int64_t e = w->varlen_k ? (w->cu_k[b] + j) * pr->k_stride[2] + hkv * pr->k_stride[1]
                                    : b * pr->k_stride[0] + hkv * pr->k_stride[1] + j * pr->k_stride[2];
            k[(*nk)++] = BASE_K + (uint64_t)(2 * e + 16 * c);
        }
}

/* got (sorted here) == want (sorted here): else fail naming what. */
static void vl_same(uint64_t *got, int ngot, uint64_t *want, int nwant, const char *what, const char *which)
{
    qsort(got, (size_t)ngot, sizeof *got, cmp_u64);
    qsort(want, (size_t)nwant, sizeof *want, cmp_u64);
    int i = 0;
    while (i < ngot && i < nwant && got[i] == want[i]) i++;
    if (i != ngot || i != nwant)
        fail_msg("%s: %s: %d accesses, want %d; first difference at #%d: got 0x%llx want 0x%llx", what, which, ngot,
                 nwant, i, i < ngot ? (unsigned long long)got[i] : 0ull, i < nwant ? (unsigned long long)want[i] : 0ull);
}

typedef struct varlen_case {
    int ws, causal, varlen_k, batch, group, hkv, cap_q, cap_k, ctas; /* ctas: the sm_90a persistent grid */
    int len_q[MAX_B], len_k[MAX_B];
} varlen_case;

static void run_varlen(const varlen_case *vc)
{
    fajit_config cfg = {.arch = FAJIT_ARCH_SM80, .dtype = FAJIT_DTYPE_BF16, .head_dim = VL_DIM, .block_m = 64,
                        .block_n = 32, .stages = 2, .swizzle = 128, .warps = 4, .col_warps = 1, .overlap = -1,
                        .pingpong = -1, .causal = vc->causal};
    if (vc->ws) {
        cfg = (fajit_config){.arch = FAJIT_ARCH_SM90A, .dtype = FAJIT_DTYPE_BF16, .head_dim = VL_DIM, .block_m = 128,
                             .block_n = 64, .stages = 2, .causal = vc->causal};
        fj_config_heuristic(&cfg, &cfg, NULL, 0);
    }
    unsigned variant = FJ_VARIANT_VARLEN | (vc->varlen_k ? FJ_VARIANT_VARLEN_K : 0);
    fj_plan pl;
    char what[200];
    if (fj_plan_build_variant(&cfg, variant, &pl) != FAJIT_OK) fail_msg("plan: %s", fajit_errmsg());
    fj_plan_format(&pl, what, sizeof what);
    char *ptx = NULL;
    size_t len = 0;
    if (fj_generate_ptx_plan(&pl, 0, &ptx, &len) != FAJIT_OK) fail_msg("%s: %s", what, fajit_errmsg());
    prog p;
    parse_prog(&p, ptx);
    fajit_free(ptx);

    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    int hq = vc->hkv * vc->group;
    w->varlen = 1, w->varlen_k = vc->varlen_k, w->batch = vc->batch, w->hkv = vc->hkv, w->group = vc->group;
    w->cap_q = vc->cap_q, w->cap_k = vc->cap_k, w->dim = VL_DIM, w->splits = 1;
    for (int b = 0; b < vc->batch; b++)
        w->cu_q[b + 1] = w->cu_q[b] + vc->len_q[b], w->cu_k[b + 1] = w->cu_k[b] + vc->len_k[b];
    w->total_q = w->cu_q[vc->batch];
    fajit_attention_args a;
    fajit_attention_args_init(&a);
    a.dtype = FAJIT_DTYPE_BF16, a.batch = vc->batch, a.heads_q = hq, a.heads_kv = vc->hkv, a.head_dim = VL_DIM;
    a.seqlen_q = vc->cap_q, a.seqlen_k = vc->cap_k, a.causal = vc->causal;
    a.q = BASE_Q, a.k = BASE_K, a.v = BASE_V, a.o = BASE_O, a.lse = BASE_LSE;
    int64_t qs[3] = {0, VL_DIM, (int64_t)hq * VL_DIM}, ks[3] = {0, VL_DIM, (int64_t)vc->hkv * VL_DIM};
    if (!vc->varlen_k) ks[0] = (int64_t)vc->cap_k * vc->hkv * VL_DIM; /* batched [B, cap_k, Hkv, D] */
    memcpy(a.q_stride, qs, sizeof qs), memcpy(a.o_stride, qs, sizeof qs);
    memcpy(a.k_stride, ks, sizeof ks), memcpy(a.v_stride, ks, sizeof ks);
    fj_forward_params(&a, &pl, &w->prm.base);
    w->prm.cu_seqlens_q = BASE_CUQ, w->prm.cu_seqlens_k = vc->varlen_k ? BASE_CUK : 0;
    w->prm.splits = 1, w->prm.batch = (uint32_t)vc->batch;

    w->cap = 1 << 20;
    uint64_t *buf[9];
    for (int i = 0; i < 9; i++) assert_non_null(buf[i] = calloc((size_t)w->cap, 8));
    w->k_reads = buf[0], w->v_reads = buf[1], w->q_reads = buf[2], w->o_writes = buf[3], w->lse_writes = buf[4];
    uint64_t *wq = buf[5], *wk = buf[6], *wo = buf[7], *wl = buf[8];
    int nq = 0, nk = 0, no = 0, nl = 0, bm = pl.cfg.block_m, nmb = (vc->cap_q + bm - 1) / bm;
    thread t = {.val = calloc((size_t)p.n_regs, 8), .known = calloc((size_t)p.n_regs, 1)};
    assert_true(t.val && t.known);
    if (!vc->ws) { /* every thread of every CTA (ceil(cap_q / block_m), Hq, B); causal blocks reversed */
        for (int z = 0; z < vc->batch; z++)
            for (int y = 0; y < hq; y++)
                for (int x = 0; x < nmb; x++) {
                    w->cta_b = z, w->n_k = w->n_v = w->n_q = w->n_o = w->n_lse = 0, nq = nk = no = nl = 0;
                    t.ctaid[0] = (unsigned)x, t.ctaid[1] = (unsigned)y, t.ctaid[2] = (unsigned)z, t.nctaid_x = (unsigned)nmb;
                    for (unsigned tid = 0; tid < (unsigned)pl.threads; tid++) {
                        t.tid = tid;
                        if (!run_thread(&p, &t, w)) fail_msg("%s: CTA (%d, %d, %d) thread %u: %s", what, x, y, z, tid, w->why);
                    }
                    vl_expect(w, &pl, z, y, vc->causal ? nmb - 1 - x : x, wq, &nq, wk, &nk, wo, &no, wl, &nl);
                    vl_same(w->q_reads, w->n_q, wq, nq, what, "Q chunks");
                    vl_same(w->k_reads, w->n_k, wk, nk, what, "K chunks");
                    vl_same(w->o_writes, w->n_o, wo, no, what, "O words");
                    vl_same(w->lse_writes, w->n_lse, wl, nl, what, "LSE floats");
                    for (int i = 0; i < nk; i++) wk[i] += BASE_V - BASE_K;
                    vl_same(w->v_reads, w->n_v, wk, nk, what, "V chunks");
                }
    } else { /* the producer thread of each of `ctas` persistent CTAs: every tile's loads, each once, over them all */
        ws_setup(w, &pl, &a);
        w->block_n = pl.cfg.block_n, w->cta_b = -1;
        for (int c = 0; c < vc->ctas; c++) {
            w->n_bars = 0;
            t.ctaid[0] = (unsigned)c, t.ctaid[1] = t.ctaid[2] = 0, t.nctaid_x = (unsigned)vc->ctas, t.tid = 0;
            if (!run_thread(&p, &t, w)) fail_msg("%s: CTA %d: %s", what, c, w->why);
            for (int i = 0; i < w->n_bars; i++)
                if (w->bar_bytes[i]) fail_msg("%s: CTA %d: barrier +%u ends %lld bytes off", what, c, w->bar_addr[i],
                                              (long long)w->bar_bytes[i]);
        }
        w->o_chunks = pl.o_stage != 0;
        for (int c = 0; c < vc->ctas; c++) /* the consumers: the epilogue's O and LSE stores */
            for (unsigned tid = 128; tid < (unsigned)pl.threads; tid++) {
                w->n_bars = 0;
                t.ctaid[0] = (unsigned)c, t.tid = tid;
                if (!run_thread(&p, &t, w)) fail_msg("%s: CTA %d consumer thread %u: %s", what, c, tid, w->why);
            }
        for (int z = 0; z < vc->batch; z++)
            for (int y = 0; y < hq; y++)
                for (int mb = 0; mb < nmb; mb++) vl_expect(w, &pl, z, y, mb, wq, &nq, wk, &nk, wo, &no, wl, &nl);
        vl_same(w->q_reads, w->n_q, wq, nq, what, "Q rows loaded");
        vl_same(w->o_writes, w->n_o, wo, no, what, w->o_chunks ? "O rows stored (TMA)" : "O words stored");
        vl_same(w->lse_writes, w->n_lse, wl, nl, what, "LSE floats stored");
        vl_same(w->k_reads, w->n_k, wk, nk, what, "K rows loaded");
        for (int i = 0; i < nk; i++) wk[i] += BASE_V - BASE_K;
        vl_same(w->v_reads, w->n_v, wk, nk, what, "V rows loaded");
    }
    printf("PASS %-62s B%d cap %d/%d%s\n", what, vc->batch, vc->cap_q, vc->cap_k, vc->ws ? " (every warpgroup)" : "");
    for (int i = 0; i < 9; i++) free(buf[i]);
    free(t.val), free(t.known), free(w), free(p.v);
}

/* Varlen: sequences of 0, 1, 17, a block and more, Nq != Nk both ways, a length past the cap (clamped) and a
 * decreasing pair (empty); packed or batched keys; sm_80 (every thread: Q / K / V copies, O and LSE stores exactly the
 * sequence's) and the sm_90a producer over a persistent grid of 3 CTAs (Q / K / V boxes, clipped by the packed maps,
 * exactly each tile's rows; the tiles past their sequence's end skipped; every barrier's bytes). */
static void test_varlen(void **state)
{
    (void)state;
    for (int ws = 0; ws <= 1; ws++)
        for (int causal = 0; causal <= 1; causal++) {
            varlen_case vc = {.ws = ws, .causal = causal, .varlen_k = 1, .batch = 5, .group = 2, .hkv = 1, .cap_q = 140,
                              .cap_k = 150, .ctas = 3, .len_q = {0, 1, 17, 140, 64}, .len_k = {5, 1, 150, 140, 0}};
            run_varlen(&vc);
            vc.len_q[0] = 200, vc.len_k[0] = 300; /* past the caps: clamped to 140 / 150 rows */
            vc.len_q[4] = 33, vc.len_k[4] = 70, vc.group = 1, vc.hkv = 2;
            vc.len_q[1] = -3, vc.len_k[1] = -1; /* a decreasing pair: an empty sequence (the next starts 3 rows back) */
            run_varlen(&vc);
            vc.varlen_k = 0; /* packed queries against a batched K / V of cap_k keys */
            run_varlen(&vc);
        }
}

/* ---- the cases -------------------------------------------------------------------------------------------- */
#define PAGED FJ_VARIANT_PAGED
#define LENS FJ_VARIANT_SEQLENS
#define GATHER (FJ_VARIANT_PAGED | FJ_VARIANT_GATHER)
#define AHEAD FJ_VARIANT_AHEAD

/* Whole-tile pages (page a multiple of block_n): lengths 0, 1, a tile, a page, page + 1, pages x 3 - 1; 2 and 3
 * stages; split counts that leave empty splits; read at the copy and a tile ahead. */
static void test_whole_pages(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++)
        for (int stages = 2; stages <= 3; stages++) {
            launch_case lc = {.block_m = 64, .block_n = 32, .stages = stages, .warps = 4, .dim = 64,
                              .variant = PAGED | LENS | (ahead ? AHEAD : 0), .batch = 4, .hkv = 2, .group = 1,
                              .page = 64, .pages_per_seq = 4, .splits = 3, .seqlen_k = 256,
                              .lens = {0, 1, 64, 191}};
            run_case(&lc);
            lc.lens[0] = 32, lc.lens[1] = 65, lc.lens[2] = 256, lc.lens[3] = 33;
            run_case(&lc);
            lc.splits = 1;
            run_case(&lc);
            lc.lens[0] = -3, lc.lens[1] = 1000, lc.splits = 2; /* clamped to 0 and to seqlen_k */
            run_case(&lc);
            lc.variant &= ~(unsigned)LENS, lc.splits = 5, lc.seqlen_k = 160; /* one length: 5 tiles in 5 splits */
            run_case(&lc);
        }
}

/* Gathered from 16-row segments (pages smaller than the tile, partial last pages), a segment per pass and
 * several passes per segment (rows per pass 8 with 4 warps at d128), pages read at the copy and ahead (each
 * segment's page and row in it worked out a tile before its copy), pages of 16, 48 and 80 rows. */
static void test_gathered(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++)
        for (int dim = 64; dim <= 128; dim += 64) {
            launch_case lc = {.block_m = 64, .block_n = 64, .stages = 2, .warps = 4, .dim = dim,
                              .variant = GATHER | LENS | (ahead ? AHEAD : 0), .batch = 4, .hkv = 1, .group = 1,
                              .page = 16, .pages_per_seq = 12, .splits = 2, .seqlen_k = 192,
                              .lens = {1, 17, 64, 150}};
            run_case(&lc);
            lc.splits = 1, lc.lens[0] = 100, lc.lens[1] = 79, lc.lens[2] = 145, lc.lens[3] = 191; /* partial last tiles */
            run_case(&lc);                                                     /* copied after a full one */
            lc.splits = 2;
            lc.page = 48, lc.pages_per_seq = 4, lc.lens[0] = 0, lc.lens[1] = 48, lc.lens[2] = 129, lc.lens[3] = 192;
            run_case(&lc); /* pages of 48 (not a power of two: the division path) */
            lc.stages = dim == 64 ? 3 : 2, lc.splits = 4; /* d128 s3 with the gather ahead has no registers */
            run_case(&lc);
            lc.page = 80, lc.pages_per_seq = 3, lc.splits = 3; /* a page past the tile, straddled: rows in it to 79 */
            run_case(&lc);
        }
}

/* GQA packing: a CTA per KV head (its pages at that head's offset in the pool); and GQA without packing. */
static void test_packed(void **state)
{
    (void)state;
    for (int ahead = 0; ahead < 2; ahead++) {
        launch_case lc = {.block_m = 64, .block_n = 64, .stages = 2, .warps = 4, .dim = 128,
                          .variant = PAGED | FJ_VARIANT_PACK | LENS | (ahead ? AHEAD : 0), .batch = 2, .hkv = 2,
                          .group = 4, .page = 64, .pages_per_seq = 5, .splits = 2, .seqlen_k = 320,
                          .lens = {200, 320}};
        run_case(&lc);
        lc.variant |= FJ_VARIANT_GATHER, lc.page = 32, lc.pages_per_seq = 10;
        run_case(&lc);
        lc.variant &= ~(unsigned)FJ_VARIANT_PACK; /* not packed: a CTA per query head, KV head = h / group */
        run_case(&lc);
    }
}

/* The sm_90a kernel (producer thread only; TMA boxes of min(page, block_n) rows): pages of a tile or more (one
 * box at the row in the page) and pages smaller than the tile (a box per page), partial and empty last tiles,
 * lengths 0, 1, clamped, split-KV with empty splits, GQA packed and not, seqlens_k or the capacity only. */
static void test_sm90(void **state)
{
    (void)state;
    static const int pages[][3] = {{64, 64, 4}, {128, 64, 2}, {16, 128, 16}, {48, 96, 6}, {32, 64, 8}};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        launch_case lc = {.ws = 1, .block_m = 128, .block_n = pages[i][1], .stages = 2, .dim = 128,
                          .variant = PAGED | LENS, .batch = 4, .hkv = 2, .group = 1, .page = pages[i][0],
                          .pages_per_seq = pages[i][2], .splits = 3, .seqlen_k = pages[i][0] * pages[i][2] - 5,
                          .lens = {0, 1, 129, 1000}};
        run_case(&lc);
        lc.lens[0] = 17, lc.lens[1] = -4, lc.lens[2] = pages[i][0], lc.lens[3] = 2 * pages[i][0] + 1, lc.splits = 1;
        run_case(&lc);
        lc.variant = PAGED | FJ_VARIANT_PACK | LENS, lc.group = 4, lc.splits = 2;
        run_case(&lc);
        lc.variant = PAGED, lc.dim = 64, lc.group = 2, lc.splits = 4; /* capacity only: the last tile's tail */
        run_case(&lc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sm90),
        cmocka_unit_test(test_whole_pages),
        cmocka_unit_test(test_gathered),
        cmocka_unit_test(test_packed),
        cmocka_unit_test(test_varlen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
