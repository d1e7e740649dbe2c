#!/usr/bin/env python3
"""sm90_loop_sass.py - count what an sm_90a attention kernel's consumer KV loop issues per tile, from SASS (no GPU).

Reads `cuobjdump -sass` (or nvdisasm) text of ONE kernel. Lists the loops that hold wgmma (HGMMA; QGMMA for FP8) (backward branches
whose range has one), then walks the steady-state path of the chosen loop once, from its top to its backward
branch, and counts the instructions a consumer thread issues on that path, by class and by opcode, divided by
the KV tiles one trip covers (--tiles; fajit's unrolled sm_90a loop has one body per stage: 2 at 2 stages).

Path rule: a conditional forward branch whose target lies inside the loop is taken when the instructions it
skips hold no HGMMA (an optional block: the diagonal tile's mask, the lazy O rescale, the Q release, a wait
whose try_wait already passed), else it falls through (the loop's tail exit); a branch out of the loop (a
retry stub, the exit) falls through. --take / --fall ADDR override that for one branch. The skipped blocks are
listed with their sizes, so "mask only on the diagonal" and "rescale skipped by vote" show up as such.

  usage: fagen cubin --arch sm_90a --sm sm_90a --headdim 128 --causal -o k.cubin &&
         cuobjdump -sass k.cubin > k.sass && bench/sm90_loop_sass.py k.sass --tiles 2
         bench/sm90_loop_sass.py k.sass --list           (the loops, to pick one with --top ADDR)
         bench/sm90_loop_sass.py k.sass --mufu 12        (also the MUFU stream: runs and gaps of > 12 slots)
"""
import argparse
import collections
import re

CLASSES = [  # (name, opcode prefixes), first match wins
    ('HGMMA/QGMMA', ('HGMMA', 'QGMMA', 'IGMMA')),
    ('MUFU', ('MUFU',)),
    ('FFMA/FMUL/FADD', ('FFMA', 'FMUL', 'FADD')),
    ('FMNMX', ('FMNMX',)),
    ('FSEL/FSETP', ('FSEL', 'FSETP', 'FCHK')),
    ('F2FP/PRMT', ('F2FP', 'PRMT')),
    ('SHFL', ('SHFL',)),
    ('R2UR/S2UR', ('R2UR', 'S2UR', 'S2R', 'CS2R')),
    ('uniform U*', ('U',)),
    ('int IADD3/IMAD/LOP3/...', ('IADD3', 'IMAD', 'LOP3', 'SHF', 'LEA', 'SEL', 'VIADD', 'IMNMX', 'MOV', 'IABS',
                                 'VIADDMNMX', 'I2F', 'F2I', 'POPC', 'FLO', 'BREV', 'IDP')),
    ('ISETP/PLOP3/P2R/R2P', ('ISETP', 'PLOP3', 'P2R', 'R2P')),
    ('SYNCS (mbarrier)', ('SYNCS',)),
    ('BAR (named)', ('BAR',)),
    ('WARPGROUP', ('WARPGROUP',)),
    ('branch/vote', ('BRA', 'VOTE', 'WARPSYNC', 'BSSY', 'BSYNC', 'EXIT', 'JMP', 'RET', 'CALL')),
    ('LDS/STS/STSM/LDSM', ('LDS', 'STS', 'STSM', 'LDSM')),
    ('LDG/STG/LDC/LDL/STL', ('LDG', 'STG', 'LDC', 'ULDC', 'LDL', 'STL')),
    ('NOP', ('NOP',)),
]


def parse(path):
    ins = []
    for line in open(path):
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    return ins


def opcode(text):
    return re.sub(r'^@!?U?P[T0-9]+\s+', '', text).split()[0]


def predicated(text):
    return re.match(r'^@!?U?P[0-9]', text) is not None


def branch_target(text):
    m = re.search(r'\bBRA(?:\.[A-Z.]+)?\s+(?:`\()?(?:\.L_x_\d+|0x([0-9a-f]+))', text)
    return int(m.group(1), 16) if m and m.group(1) else None


def is_gmma(text):
    return opcode(text).startswith(('HGMMA', 'QGMMA', 'IGMMA'))


def klass(op):
    for name, prefixes in CLASSES:
        if op.startswith(prefixes) and not (name == 'uniform U*' and op in ('ULDC', 'ULDC.64')):
            return name
    return 'other'


def loops(ins, at):
    out = []
    for i, (a, t) in enumerate(ins):
        tg = branch_target(t)
        if tg is not None and tg <= a and tg in at:
            s = at[tg]
            hg = sum(1 for k in range(s, i + 1) if is_gmma(ins[k][1]))
            if hg:
                out.append((s, i, hg))
    return out


def walk(ins, at, top, back, take, fall):
    """Indices of the steady path from top to back (inclusive), and the optional blocks skipped."""
    path, skipped, k, steps = [], [], top, 0
    while True:
        steps += 1
        if steps > 20000:
            raise SystemExit('sm90_loop_sass: the path does not come back to the loop top')
        a, t = ins[k]
        path.append(k)
        if k == back:
            return path, skipped
        tg = branch_target(t)
        if tg is None or opcode(t) != 'BRA' and not opcode(t).startswith('BRA'):
            k += 1
            continue
        inside = tg in at and ins[top][0] <= tg <= ins[back][0]
        if not predicated(t):
            if not inside:
                raise SystemExit(f'sm90_loop_sass: unconditional branch at {a:#x} leaves the loop')
            k = at[tg]
            continue
        forward = tg > a
        skips = range(k + 1, at[tg]) if inside and forward else range(0)
        hg = any(is_gmma(ins[j][1]) for j in skips)
        go = (a in take) or (a not in fall and inside and forward and not hg)
        if go:
            if len(skips):
                skipped.append((a, len(skips), collections.Counter(klass(opcode(ins[j][1])) for j in skips)))
            k = at[tg]
        else:
            k += 1


def print_mufu_stream(ins, path, gap):
    """The MUFU instructions in path order as runs (kind x count), and each stretch of more than gap other
    instructions between two of them (its size and what it holds that gates the next MUFU: waits, votes,
    shuffles, branches). A MUFU instruction of a warp takes the sub-partition's MUFU 8 cycles (16 lanes / clk / SM),
    so a stretch of issue slots the MUFU does not cover is a bubble in its stream unless another warp fills it."""
    mu = [(n, opcode(ins[k][1])) for n, k in enumerate(path) if opcode(ins[k][1]).startswith('MUFU')]
    if not mu:
        print('  MUFU stream: none')
        return
    out, run, prev = [], None, None
    for n, op in mu:
        kind = op.split('.')[1] if '.' in op else op
        if prev is not None and n - prev - 1 > gap:
            out.append(f'{run[0]} x{run[1]}')
            mid = [opcode(ins[path[j]][1]).split('.')[0] for j in range(prev + 1, n)]
            keys = collections.Counter(o for o in mid if o in ('SHFL', 'VOTE', 'BRA', 'WARPGROUP', 'SYNCS', 'BAR', 'FFMA',
                                                              'FSETP', 'FMNMX', 'HGMMA'))
            out.append(f'[{n - prev - 1} slots: ' + ', '.join(f'{v} {o}' for o, v in keys.most_common()) + ']')
            run = None
        if run and run[0] == kind:
            run[1] += 1
        else:
            if run:
                out.append(f'{run[0]} x{run[1]}')
            run = [kind, 1]
        prev = n
    out.append(f'{run[0]} x{run[1]}')
    print(f'  MUFU stream (path slots {mu[0][0]}..{mu[-1][0]} of {len(path)}): ' + ' '.join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('sass')
    ap.add_argument('--list', action='store_true', help='list the loops holding HGMMA and stop')
    ap.add_argument('--top', type=lambda s: int(s, 16), help='loop top address (hex); default: the loop whose '
                    'steady path has the most HGMMA, outermost on a tie')
    ap.add_argument('--tiles', type=int, default=1, help='KV tiles per loop trip (default 1)')
    ap.add_argument('--take', type=lambda s: int(s, 16), action='append', default=[], help='branch address (hex) to take')
    ap.add_argument('--fall', type=lambda s: int(s, 16), action='append', default=[], help='branch address (hex) to fall through')
    ap.add_argument('--opcodes', action='store_true', help='also print counts per opcode')
    ap.add_argument('--mufu', type=int, metavar='GAP', help='also print the steady path\'s MUFU stream: runs of MUFU '
                    'instructions and the stretches of more than GAP other instructions between two of them')
    a = ap.parse_args()
    ins = parse(a.sass)
    at = {addr: i for i, (addr, _) in enumerate(ins)}
    cands = loops(ins, at)
    if a.list:
        for s, e, hg in cands:
            print(f'loop {ins[s][0]:#06x}..{ins[e][0]:#06x}: {e - s + 1} instructions in range, {hg} wgmma (HGMMA/QGMMA)')
        return
    best = None
    for s, e, _ in cands:
        if a.top is not None and ins[s][0] != a.top:
            continue
        try:
            path, skipped = walk(ins, at, s, e, set(a.take), set(a.fall))
        except SystemExit:
            continue
        hg = sum(1 for k in path if is_gmma(ins[k][1]))
        key = (hg, -len(path))
        if best is None or key > best[0]:
            best = (key, s, e, path, skipped)
    if best is None:
        raise SystemExit('sm90_loop_sass: no loop with HGMMA on a closed path (try --list and --top)')
    _, s, e, path, skipped = best
    n = a.tiles
    print(f'loop {ins[s][0]:#x}..{ins[e][0]:#x}: steady path {len(path)} instructions = {len(path) / n:.1f} per tile '
          f'({n} tile(s) a trip)')
    cls = collections.Counter(klass(opcode(ins[k][1])) for k in path)
    for name, _ in CLASSES + [('other', ())]:
        if cls[name]:
            print(f'  {name:26s} {cls[name] / n:7.1f}')
    pred = sum(1 for k in path if predicated(ins[k][1]))
    print(f'  {"(of which predicated)":26s} {pred / n:7.1f}')
    for addr, size, c in skipped:
        what = ', '.join(f'{v} {k}' for k, v in c.most_common(4))
        print(f'  skipped at {addr:#x}: {size} instructions ({what})')
    if a.mufu is not None:
        print_mufu_stream(ins, path, a.mufu)
    if a.opcodes:
        ops = collections.Counter(opcode(ins[k][1]) for k in path)
        for op, v in ops.most_common():
            print(f'    {op:32s} {v / n:7.1f}')


if __name__ == '__main__':
    main()
