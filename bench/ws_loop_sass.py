#!/usr/bin/env python3
"""ws_loop_sass.py - the consumers' KV loop of an sm_90a warp-specialized kernel in its SASS (no GPU): its
instruction count and opcode mix, to compare two compiles of one kernel (ptxas options, loop shapes).

The loop is the shortest backward branch whose body holds HGMMA instructions and no EXIT (the consumers' KV
loop: S = QK^T and O += PV; the producer's loops have none, the work-tile loop around it is longer, and ptxas
puts the mbarrier waits' retry paths after the EXIT, branching back into the code); its body is the
instructions from the branch target to the branch.
With the rolled loop (config roll) that is one KV tile; unrolled, one tile per K/V stage. Prints the loop's
size, instructions per KV tile, and opcode counts; with two files, both side by side and what differs.

  usage: fagen cubin --arch sm_90a ... -o k.cubin && nvdisasm -c k.cubin > k.sass &&
         bench/ws_loop_sass.py k.sass [other.sass] [--tiles N]   (N: KV tiles per loop pass, default 1)
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kv_loop_sass import opcode as full_opcode  # noqa: E402
from kv_loop_sass import parse  # noqa: E402  (nvdisasm -c text -> instructions, label positions)


def opcode(text):
    """The opcode without its modifiers (HGMMA, not HGMMA.64x128x16...)."""
    return full_opcode(text).split('.')[0]


def kv_loop(ins, labels):
    best = None
    for i, t in enumerate(ins):
        m = re.search(r'BRA\s+`\((\.L_x_\d+)\)', t)
        if not m or labels.get(m.group(1), len(ins)) >= i:
            continue
        start = labels[m.group(1)]
        body = ins[start:i + 1]
        n_gmma = sum(1 for x in body if opcode(x) == 'HGMMA')
        if any(opcode(x) == 'EXIT' for x in body):
            continue
        if n_gmma and (best is None or len(body) < len(best[1])):
            best = (n_gmma, body)
    return best[1] if best else []


def summary(path):
    ins, labels = parse(path)
    body = kv_loop(ins, labels)
    return len(ins), body, collections.Counter(opcode(x) for x in body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('sass', nargs='+')
    ap.add_argument('--tiles', type=int, default=1, help='KV tiles per pass of the loop (unrolled: the stages)')
    a = ap.parse_args()
    rows = [summary(p) for p in a.sass]
    for p, (total, body, ops) in zip(a.sass, rows):
        print(f'{p}: {total} instructions; KV loop {len(body)} ({len(body) / a.tiles:.0f} per KV tile), '
              f'{ops["HGMMA"]} HGMMA, {ops["WARPGROUP"]} WARPGROUP, {ops["MUFU"]} MUFU')
    if len(rows) == 2:
        (_, b0, o0), (_, b1, o1) = rows
        diff = {k: (o0[k], o1[k]) for k in set(o0) | set(o1) if o0[k] != o1[k]}
        print('same opcode counts in the KV loop' if not diff else
              'opcodes that differ (first, second): ' +
              ', '.join(f'{k} {v[0]}/{v[1]}' for k, v in sorted(diff.items())))
        print('identical KV loop text' if b0 == b1 else 'KV loop text differs')
    else:
        print(', '.join(f'{k} {v}' for k, v in rows[0][2].most_common()))


if __name__ == '__main__':
    main()
