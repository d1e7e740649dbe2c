#!/usr/bin/env python3
"""ncu_source_summary.py - where a kernel's warps spend their time, by how often each piece of code runs.

Input: the SASS source page of an Nsight Compute report with source counters, as CSV:

    ncu --section SourceCounters --section WarpStateStats -k fajit_fwd -s 2 -c 1 -o rep fagen bench ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > rep.sass.csv

Each SASS instruction carries its warp-state samples (one sample = one warp seen in one state at one sampling
tick) and how many times it executed. Instructions that execute equally often belong to the same loop level:
in a fajit forward kernel the most-executed class is the consumers' per-KV-tile code (the softmax, the GEMM
issue and waits), a class executed once per work tile and consumer warp is the prologue and epilogue, and the
producer's loops have classes of their own. The summary prints, per class, its share of all samples and its
main stall reasons, then the instructions with the most samples.

    python3 bench/ncu_source_summary.py rep.sass.csv [--top 20] [--classes 8]
    python3 bench/ncu_source_summary.py --selftest
"""
import argparse
import collections
import csv
import io
import sys


def load(text):
    """[(offset, sass, samples, executed, {stall: samples})] from the CSV text (offsets from the first)."""
    rows = list(csv.reader(io.StringIO(text)))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[head]
    ix = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    out, base = [], None
    for r in rows[head + 1:]:
        if len(r) < len(hdr):
            continue
        a = int(r[0], 16)
        base = a if base is None else base
        st = {h[6:]: int(r[ix[h]] or 0) for h in stalls}
        out.append((a - base, r[1].strip(), int(r[ix["Warp Stall Sampling (All Samples)"]] or 0),
                    int(r[ix["Instructions Executed"]] or 0), st))
    return out


def summary(ins, top=20, classes=8):
    total = sum(i[2] for i in ins) or 1
    by = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for _, _, samp, ex, st in ins:
        b = by[ex]
        b[0] += samp
        b[1] += 1
        b[2].update(st)
    lines = [f"samples {total}, instructions {len(ins)}", "class (times executed) | instructions | samples | share | "
             "main stall reasons"]
    for ex, (s, n, st) in sorted(by.items(), key=lambda x: -x[1][0])[:classes]:
        why = ", ".join(f"{k} {v}" for k, v in st.most_common(4) if v)
        lines.append(f"{ex} | {n} | {s} | {100.0 * s / total:.1f}% | {why}")
    lines.append(f"top {top} instructions: offset samples executed sass [stalls]")
    for off, src, samp, ex, st in sorted(ins, key=lambda i: -i[2])[:top]:
        why = ", ".join(f"{k} {v}" for k, v in sorted(st.items(), key=lambda x: -x[1])[:2] if v)
        lines.append(f"{off:6x} {samp:6d} {ex:9d} {src[:60]} [{why}]")
    return "\n".join(lines)


def selftest():
    hdr = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait",'
           '"stall_barrier","stall_wait (Not Issued)"')
    rows = ['"0x100","  FFMA R1, R2, R3, R4","30","640","20","10","0"',
            '"0x110","  MUFU.EX2 R1, R1","50","640","50","0","0"',
            '"0x120","  BAR.SYNC 0x1","20","10","0","20","0"']
    text = '"Kernel Name","k",\n' + hdr + "\n" + "\n".join(rows) + "\n"
    ins = load(text)
    assert [i[0] for i in ins] == [0, 0x10, 0x20], ins
    s = summary(ins, top=2)
    assert "samples 100, instructions 3" in s, s
    assert "640 | 2 | 80 | 80.0% | wait 70, barrier 10" in s, s
    assert "10 | 1 | 20 | 20.0% | barrier 20" in s, s
    assert s.splitlines()[-2].split()[1] == "50", s
    print("selftest ok")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", nargs="?")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--selftest", action="store_true")
    a = p.parse_args(argv)
    if a.selftest:
        selftest()
        return 0
    if not a.csv:
        p.error("a CSV file (or --selftest)")
    with open(a.csv) as f:
        print(summary(load(f.read()), a.top, a.classes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
