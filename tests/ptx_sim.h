/*
 * ptx_sim.h - run the decode and varlen kernels' PTX without a GPU (ptx_sim.c): parse it, then run one thread at a
 * time through an interpreter of its integer subset (address and loop arithmetic, predicates, branches, ld.param,
 * the cu_seqlens / seqlens_k / block-table loads, cp.async, TMA loads and stores, st.global); float, MMA and
 * shared-memory instructions only make their destinations unknown (ldmatrix / stmatrix record their address when
 * the world asks), and an address or copy size built from an unknown value fails. What a thread reads and writes is recorded in a `world` for the tests to compare with what it must.
 */
#ifndef FJ_PTX_SIM_H
#define FJ_PTX_SIM_H

#include <stdint.h>

#include "codegen/codegen.h"
#include "codegen/kernel_abi.h"
#include "fajit.h"
#include "base/error.h"
#include "runtime/forward.h"
#include "runtime/variants.h"

/* ---- the PTX, parsed -------------------------------------------------------------------------------- */
enum { O_NONE, O_REG, O_IMM, O_SPECIAL, O_SMEM, O_MEM, O_PARAM, O_PBASE, O_LABEL, O_OTHER };
enum { SP_TID, SP_CTAID_X, SP_CTAID_Y, SP_CTAID_Z, SP_NCTAID_X, SP_LANEID };

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
    int line;             /* its line in the PTX text (1-based) */
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
    int line; /* parse_prog: the line being parsed */
} prog;

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
/* varlen tests: packed tensors of head_dim VL_DIM */
#define VL_DIM 64

typedef struct world {
    fj_fwd_params_decode prm;
    /* the sm_90a kernel (ws): its parameter block, the K/V box rows, the tile; TMA bytes per barrier */
    int ws, box, block_n, kv_tile_bytes, k_off, v_off, q_box_bytes;
    /* the FP8 kernel (ws_setup): 1-byte elements, boxes of rows of fp8_span (the swizzle span) bytes; 0 elsewhere */
    int fp8_span;
    fj_fwd_params_tma_decode tprm;
    /* a variant kernel's whole block (fj_variant_params: its own block, then the mods): read instead when pblk is set */
    fj_param_block blk;
    const unsigned char *pblk;
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
    /* FP8 (test_fp8_ptx): the shared addresses of each ldmatrix / stmatrix, in order, when the lists are set */
    uint64_t *smem_ld, *smem_st;
    int n_ld, n_st;
    /* kv8direct (test_kv8_frag_ptx): each cp.async's shared and global addresses (copies of src-size 0 left out);
     * FP8 (fp8_span set): each K / V TMA box's shared address and the global address of its first byte */
    uint64_t *smem_cp, *gmem_cp;
    int n_cp, n_gcp;
    char why[256];
} world;

/* ---- the interpreter ------------------------------------------------------------------------------------ */
typedef struct thread {
    uint64_t *val;
    unsigned char *known;
    unsigned tid, ctaid[3], nctaid_x;
    int pc;     /* the next instruction (sim_step) */
    long steps; /* instructions run (a thread stops past 5M) */
} thread;

/* Parse the kernel's .entry body. */
void parse_prog(prog *p, const char *ptx);
/* Run one thread to `ret`; 0 when it stopped on something not modelled (w->why says what). */
int run_thread(const prog *p, thread *t, world *w);
/* One instruction at t->pc, then t->pc on to the next: SIM_OK, SIM_RET (it ran `ret`) or SIM_STOP (on something not
 * modelled or a failed check: w->why says what). run_thread is a loop of these; tests/pipe_sim.c interleaves threads
 * with it, running the synchronizing instructions itself. */
enum { SIM_OK, SIM_RET, SIM_STOP };
int sim_step(const prog *p, thread *t, world *w);
/* 1 when in's guard lets it run (or it has none), 0 when not, -1 when the guard's value is unknown. */
int sim_guard(const thread *t, const insn *in);
/* An operand's value into *v; 1 when it is known. */
int sim_value(const prog *p, thread *t, world *w, const operand *o, uint64_t *v);
/* Set a register operand (nothing for other kinds). */
void sim_set(thread *t, const operand *d, uint64_t v, int known);
/* Batch b's keys as the kernel takes them: seqlens_k[b] clamped to [0, seqlen_k], or seqlen_k. */
int seq_len(const world *w, int b);
/* The first failure's text into w->why (later ones are dropped). */
void why(world *w, const char *fmt, ...) FJ_PRINTF(2, 3);
/* Append addr to a recorded list (fails past w->cap). */
void push(world *w, uint64_t **v, int *n, uint64_t addr);
/* A K / V chunk read (Q too in varlen runs): recorded. */
void record_copy(world *w, uint64_t addr);
/* The transaction bytes barrier `addr` still waits for. */
int64_t *bar_slot(world *w, uint64_t addr);
/* qsort order of uint64_t. */
int cmp_u64(const void *x, const void *y);
/* The sm_90a kernel's parameter block from a (and w's decode fields) and what the TMA model needs; the work tiles. */
unsigned ws_setup(world *w, const fj_plan *pl, const fajit_attention_args *a);

#endif
