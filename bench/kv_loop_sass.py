#!/usr/bin/env python3
"""kv_loop_sass.py - count what an sm_80-path kernel's KV loop issues, from its SASS (no GPU).

The KV loop is taken as the longest backward branch (its body may hold one tile per stage slot: two at
2 stages, so per-tile numbers are half the loop's). Division blocks on the paged page split (a forward
conditional branch over a block holding I2F, closed by an unconditional branch: the page_shift == 0 path)
are left out, so the counts are those of the power-of-two page path. Prints the loop's instruction
count, then per copy (each group of LDGSTS of one tile) the instructions from the BAR.SYNC before it to
its last LDGSTS and from there to the read-ahead's last block-table LDG, then opcode counts.

  usage: fagen ptx --arch sm_80 ... > k.ptx && ptxas -arch=sm_90 k.ptx -o k.cubin &&
         nvdisasm -c k.cubin > k.sass && bench/kv_loop_sass.py k.sass [--ldgsts-per-copy N]
"""
import argparse
import collections
import re


def parse(path):
    ins, labels = [], {}
    for line in open(path):
        m = re.match(r'^(\.L_x_\d+):', line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r'\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;', line)
        if m:
            ins.append(m.group(1))
    return ins, labels


def opcode(text):
    return re.sub(r'^@!?U?P[T0-9]+\s+', '', text).split()[0]


def kv_loop(ins, labels):
    best = None
    for i, t in enumerate(ins):
        m = re.search(r'BRA `\((\.L_x_\d+)\)', t)
        if m and labels.get(m.group(1), len(ins)) < i:
            top = labels[m.group(1)]
            if best is None or i - top > best[1] - best[0]:
                best = (top, i)
    if best is None:
        raise SystemExit('kv_loop_sass: no backward branch (no loop) in the SASS')
    return best


def shift_path(ins, labels, top, back):
    skip = set()
    for i in range(top, back):
        m = re.match(r'@!?P\d BRA `\((\.L_x_\d+)\)', ins[i])
        j = labels.get(m.group(1), -1) if m else -1
        if i < j <= back and ins[j - 1].startswith('BRA `(') and any('I2F' in t for t in ins[i:j]):
            skip.update(range(i + 1, j))
    return [k for k in range(top, back + 1) if k not in skip]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('sass')
    ap.add_argument('--ldgsts-per-copy', type=int, default=16, help='LDGSTS of one tile per thread (default 16)')
    a = ap.parse_args()
    ins, labels = parse(a.sass)
    top, back = kv_loop(ins, labels)
    path = shift_path(ins, labels, top, back)
    print(f'KV loop: {back - top + 1} instructions, {len(path)} on the power-of-two page path')
    pos = {k: n for n, k in enumerate(path)}
    ld = [k for k in path if opcode(ins[k]).startswith('LDGSTS')]
    bars = [k for k in path if opcode(ins[k]).startswith('BAR.SYNC')]
    n = a.ldgsts_per_copy
    for c in range(len(ld) // n):
        first, last = ld[c * n], ld[c * n + n - 1]
        bar = max((k for k in bars if k < first), default=top)
        end = ld[c * n + n] if c * n + n < len(ld) else back + 1
        ldg = [k for k in path if last < k < end and opcode(ins[k]).startswith('LDG.')]
        after = pos[ldg[-1]] - pos[last] if ldg else 0
        print(f'copy {c}: {pos[last] - pos[bar]} instructions from BAR.SYNC to its last LDGSTS; '
              f'{after} more to its {len(ldg)} block-table LDG')
    counts = collections.Counter(opcode(ins[k]) for k in path)
    print('opcodes:', ', '.join(f'{k} {v}' for k, v in counts.most_common()))


if __name__ == '__main__':
    main()
