#!/usr/bin/env python3
"""tile_cost.py - what a work tile costs beyond its KV loop, from how speed grows with the sequence length.

A persistent attention kernel spends, per work tile (one query block of one head), n KV-tile iterations plus a fixed
part: the epilogue (O / l, the store), the prologue (Q, the first S = QK^T and its softmax, which no PV overlaps) and,
causal, the masked diagonal tile. With t the time of one KV tile and x t the fixed part, the rate at length N is

    rate(N) = R * n / (n + x),   n = KV tiles per work tile in units of 128 keys: N / 128, causal (N / 128 + 1) / 2

so 1 / rate = 1 / R + (x / R) / n is a line in 1 / n: a least-squares fit over the lengths of one (dtype, head dim,
mask, system) gives R (the rate of an endless tile) and x (the fixed part in 128-key tile times). The shapes must keep
the work per launch fixed (compare.py's grid: B x N = 16k, H x D = 2048), so the waves and the L2 behave alike.
On the H200's 2026-11-24 grid (h200-sm90a-compare-tuned-2026-11-24.csv, N 512 .. 16k) BF16 D128 fits x = 1.50
non-causal / 2.70 causal for fajit, 1.67 / 2.83 for FlashAttention-3, 2.48 / 3.78 for FlashAttention-4: issue 20's short
cells (a varlen batch of 14 KV tiles per work tile, a 4096-key window of 33) lose x / (n + x) of R to it
(bench/results/h200-session10-2026-11-27.md).

    python3 bench/tile_cost.py --csv bench/results/h200-session10-dense-noncausal.csv [more.csv ...]
        one line per (dtype, D, mask, system) with >= 3 lengths: R, x, the fit's worst residual, the lengths
    python3 bench/tile_cost.py --fagen build/tools/fagen/fagen --headdim 128 [--causal] [--dtype bf16] [-- FLAGS]
        runs `fagen bench --arch sm_90a --untuned --reps 30` at N = 1k .. 16k (B x N = 16k, H x D = 2048) and fits
        fajit's line (GPU; FLAGS after -- go to every fagen bench call, e.g. -- --bc 128)
    python3 bench/tile_cost.py --selftest      # no GPU: the fit on made-up rates with a known x, and the CSV reader
"""
import argparse
import csv
import math
import re
import subprocess
import sys
import tempfile

SYSTEMS = ("fajit", "fajit80", "fa2", "cudnn", "fa3", "fa4")
LENGTHS = (1024, 2048, 4096, 8192, 16384)


def tiles_per_work_tile(n, causal):
    """KV tiles of 128 keys per work tile of 128 query rows, on average over the query blocks."""
    blocks = n / 128.0
    return (blocks + 1.0) / 2.0 if causal else blocks


def fit(points):
    """points: [(n, rate)] -> (R, x, worst relative residual). Least squares of 1 / rate on 1 / n."""
    if len(points) < 3:
        raise ValueError(f"fit: {len(points)} lengths; at least 3 are needed")
    xs = [1.0 / n for n, _ in points]
    ys = [1.0 / r for _, r in points]
    k = len(xs)
    mx, my = sum(xs) / k, sum(ys) / k
    sxx = sum((a - mx) ** 2 for a in xs)
    if sxx <= 0.0:
        raise ValueError("fit: every length gives the same tile count")
    b = sum((a - mx) * (c - my) for a, c in zip(xs, ys)) / sxx
    a = my - b * mx
    if a <= 0.0:
        raise ValueError(f"fit: 1 / R = {a:.3g} <= 0: the rates do not saturate along these lengths")
    worst = max(abs(1.0 / (a + b / n) / r - 1.0) for n, r in points)
    return 1.0 / a, b / a, worst


def groups_from_csv(paths):
    """compare.py CSVs -> {(dtype, D, causal, system): {N: TFLOP/s}} (the last file wins for a repeated cell)."""
    out = {}
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                causal = row["causal"].strip().lower() in ("true", "1", "y", "yes")
                for s in SYSTEMS:
                    v = row.get(s, "")
                    try:
                        rate = float(v)
                    except ValueError:
                        continue
                    if math.isfinite(rate) and rate > 0:
                        out.setdefault((row["dtype"], int(row["D"]), causal, s), {})[int(row["N"])] = rate
    return out


def report(groups, min_lengths=3):
    lines = [f"{'dtype':5} {'D':>3} {'mask':9} {'system':7} {'R (TFLOP/s)':>11} {'x (tiles)':>9} {'worst resid':>11}  "
             "lengths: TFLOP/s"]
    short = sum(1 for cells in groups.values() if len(cells) < min_lengths)
    for (dt, d, causal, s), cells in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2],
                                                                           SYSTEMS.index(kv[0][3]))):
        pts = sorted(cells.items())
        if len(pts) < min_lengths:
            continue
        try:
            big_r, x, worst = fit([(tiles_per_work_tile(n, causal), r) for n, r in pts])
        except ValueError as e:
            lines.append(f"{dt:5} {d:>3} {'causal' if causal else 'noncausal':9} {s:7} {str(e)}")
            continue
        cells_text = ", ".join(f"{n // 1024 if n >= 1024 else n}{'k' if n >= 1024 else ''} {r:.0f}" for n, r in pts)
        lines.append(f"{dt:5} {d:>3} {'causal' if causal else 'noncausal':9} {s:7} {big_r:11.1f} {x:9.2f} "
                     f"{100 * worst:10.1f}%  {cells_text}")
    if short:
        lines.append(f"({short} of {len(groups)} (dtype, D, mask, system) groups have fewer than {min_lengths} lengths: "
                     "not fitted)")
    return "\n".join(lines)


BENCH_RATE = re.compile(r"\s(\d+\.\d{3})\s+(\d+\.\d{3})\s+(\d+\.\d)\s")


def run_fagen(fagen, d, causal, dtype, extra):
    cells = {}
    for n in LENGTHS:
        cmd = [fagen, "bench", "--arch", "sm_90a", "--untuned", "--reps", "30", "--dtype", dtype, "--headdim", str(d),
               "--seqlen", str(n)] + (["--causal"] if causal else []) + list(extra)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        line = next((l for l in out.stdout.splitlines() if l.startswith("sm_")), "")
        m = BENCH_RATE.search(line)
        if out.returncode != 0 or not m:
            sys.exit(f"tile_cost: {' '.join(cmd)}: exit {out.returncode}, no rate in: {line or out.stderr.strip()}")
        print(line)
        cells[n] = float(m.group(3))
    return {(dtype, d, causal, "fajit"): cells}


def selftest():
    for causal in (False, True):
        pts = [(tiles_per_work_tile(n, causal), 700.0 * tiles_per_work_tile(n, causal) /
                (tiles_per_work_tile(n, causal) + 1.6)) for n in LENGTHS]
        big_r, x, worst = fit(pts)
        assert abs(big_r - 700.0) < 1e-6 and abs(x - 1.6) < 1e-9 and worst < 1e-12, (big_r, x, worst)
    try:
        fit([(1.0, 1.0), (2.0, 1.0)])
        raise AssertionError("two lengths were fitted")
    except ValueError:
        pass
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        w = csv.writer(f)
        w.writerow(["dtype", "D", "N", "B", "H", "causal"] + list(SYSTEMS))
        for n in LENGTHS:
            t = tiles_per_work_tile(n, False)
            w.writerow(["bf16", 128, n, 16384 // n, 16, "False", 650.0 * t / (t + 1.5), "n/a", "", 600.0, "nan", 0])
        path = f.name
    g = groups_from_csv([path])
    assert set(g) == {("bf16", 128, False, "fajit"), ("bf16", 128, False, "cudnn")}, sorted(g)
    text = report(g)
    assert "  650.0      1.50" in text and "cudnn" in text, text
    print("tile_cost selftest ok: the fit recovers R and x exactly (both masks), refuses 2 lengths, and the CSV "
          "reader keeps only numeric rates")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                epilog="The module docstring (head of bench/tile_cost.py) gives the model.")
    p.add_argument("--csv", nargs="+", help="compare.py CSV files")
    p.add_argument("--fagen", help="run this fagen's bench over N = 1k .. 16k instead (GPU)")
    p.add_argument("--headdim", type=int, default=128, help="with --fagen (default 128)")
    p.add_argument("--causal", action="store_true", help="with --fagen")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "f16"), help="with --fagen (default bf16)")
    p.add_argument("--selftest", action="store_true", help="no GPU: the fit and the CSV reader on made-up numbers")
    p.add_argument("extra", nargs="*", help="after --: flags for every fagen bench call")
    a = p.parse_args()
    if a.selftest:
        selftest()
        return
    if bool(a.csv) == bool(a.fagen):
        p.error("give one of --csv FILE... or --fagen PATH (or --selftest)")
    groups = groups_from_csv(a.csv) if a.csv else run_fagen(a.fagen, a.headdim, a.causal, a.dtype, a.extra)
    print(report(groups))


if __name__ == "__main__":
    main()
