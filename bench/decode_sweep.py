"""decode_sweep.py - fajit's decode heuristic against forced candidates on the issue-11 rows that were short of
FA3 on the H200 (bench/results/h200-decode-compare-2026-11-24.md), each candidate checked against a float64
reference before it is timed. Through the Python package (fajit.attention, layout "bnhd"), BF16, D = 128.

Sections (each one process, so that the FAJIT_DECODE_* variables read at context creation apply):
  long    B1 Hq8 Hkv1 Nk512k, Nq 1 / 4 / 16 (Nq > 1 causal): the heuristic; br64 bc64 s2 with 128 / 264 / 396 /
          528 splits (1-4 CTAs per SM on 132 SMs: hypothesis b, bytes in flight per SM; registers let 2 such
          CTAs be resident per SM, so 396 / 528 are extra waves); s3 / s4 and bc128 at 128 splits, s3 at 264
          (more bytes in flight per CTA); Nq 16 also br128 w8 (all 8 x 16 packed rows in one CTA: hypothesis
          a, K/V read once per KV head; 1 CTA per SM by registers) at 128 / 264 splits, and with s3 / s4 /
          bc128 at 128
  b8      B8 Hq32 Hkv8 Nk8k, Nq 16 causal: the heuristic; br64 at 1 / 2 / 3 / 4 / 6 / 8 splits; br128 w8 at 1 / 2 /
          4 / 8 splits (hypothesis a); at 4 splits br64 s3, br64 bc128, br64 bc32 s3 / s4
  paged   B1 Hq32 Hkv32 Nk32k and B8 Hq32 Hkv8 Nk8k at Nq 1: contiguous, then pages of 16 / 64 / 256 rows
          (shuffled in one pool), with the heuristic's tile; pages of 64 also with s3 and s4, contiguous
          also with s3 (hypothesis c: the block-table lookup's latency) - run four times, one process each:
          FAJIT_DECODE_GATHER unset (pages smaller than block_n gathered from 16-row segments, the new
          default), =0 (the old rule: block_n divides the page, bc16 for pages of 16), =1 (every paged tile
          gathered), and FAJIT_DECODE_PAGE_DIV=1 (the page found by a division, as before the power-of-two
          shift: the lookup's arithmetic)
GB/s = bytes of K + V read (each KV head once) / median time of --reps calls between CUDA events. Timing (the
method of bench/decode_compare.py): the candidates of one shape are checked, then each gets --warmup calls
(timed as a block, to size its settle), then --rounds interleaved rounds (the order rotated per round): in
each, a candidate runs >= --settle-ms (default 100) and >= 5 calls of its own work untimed, then its share of
the --reps timed calls. Without the settle, the first candidates of a process ran at idle clocks (the same
kernel read 1716 GB/s as a section's first row and 3404 GB/s later in it). K/V sets rotate so that
consecutive calls read >= 256 MB. The check: fajit's output (poisoned
with NaN first) against a float64 reference of every sequence, head and row; rel L2 <= 1e-2 (bf16) and the
worst row's rel L2 <= 4e-2; a NaN fails. A failing candidate is marked FAIL and makes the exit status 1.
fajit.last_forward() gives the kernel each candidate ran (tile, variant, splits).

Usage (GPU machine, repository root):
    bench/run_gpu.sh build decode-sweep    (the package from the source tree on $BUILD/libfajit.so)
    PYTHONPATH=python/src FAJIT_LIB=build/libfajit.so python3 bench/decode_sweep.py [--out DIR] [--sections ...]
    python3 bench/decode_sweep.py --list   (the candidates; no GPU, no torch)
About 3-4 minutes on an H200 (kernel compiles included; the settle adds ~0.1 s per candidate and round); no
shape starts after --budget-s seconds (default 260; those left are listed as not run). Exit status: 0 when every candidate that ran passed its check, 1 otherwise.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

FA3_H200 = {  # FA3 kvcache GB/s, num_splits=0, bench/results/h200-decode-compare-2026-11-24.md (tree 74cc624)
    ("long", 1): 3281, ("long", 4): 3188, ("long", 16): 3081, ("b8", 16): 3564}
D = 128
TOL_L2, TOL_ROW = 1e-2, 4e-2
ROTATE_BYTES = 256 << 20
SETTLE_CALLS = 5  # at least this many untimed calls before each timed window (and >= --settle-ms)
# (name, FAJIT_DECODE_GATHER, FAJIT_DECODE_PAGE_DIV) of the paged sections
GATHER_MODES = (("auto", None, None), ("off", "0", None), ("on", "1", None), ("div", None, "1"))


def cfg_text(br, bc, st, w, causal):
    return f"sm_80 bf16 d{D} br{br} bc{bc} s{st} sw128 w{w} {'causal' if causal else 'noncausal'}"


def candidates(section):
    """[(shape, label, config or None, num_splits or None)]; shape = (B, Hq, Hkv, Nk, Nq, page)."""
    out = []
    if section == "long":
        for nq in (1, 4, 16):
            s, c = (1, 8, 1, 524288, nq, 0), nq > 1
            out.append((s, "heuristic", None, None))
            for sp in (128, 264, 396, 528):
                out.append((s, f"br64 s2 {sp} splits", cfg_text(64, 64, 2, 4, c), sp))
            out.append((s, "br64 s3 128 splits", cfg_text(64, 64, 3, 4, c), 128))
            out.append((s, "br64 s3 264 splits", cfg_text(64, 64, 3, 4, c), 264))
            out.append((s, "br64 s4 128 splits", cfg_text(64, 64, 4, 4, c), 128))
            out.append((s, "br64 bc128 128 splits", cfg_text(64, 128, 2, 4, c), 128))
            if nq == 16:
                for sp in (128, 264):
                    out.append((s, f"br128 w8 {sp} splits", cfg_text(128, 64, 2, 8, c), sp))
                out.append((s, "br128 w8 s3 128 splits", cfg_text(128, 64, 3, 8, c), 128))
                out.append((s, "br128 w8 s4 128 splits", cfg_text(128, 64, 4, 8, c), 128))
                out.append((s, "br128 w8 bc128 128 splits", cfg_text(128, 128, 2, 8, c), 128))
    elif section == "b8":
        s = (8, 32, 8, 8192, 16, 0)
        out.append((s, "heuristic", None, None))
        for sp in (1, 2, 4, 8):
            out.append((s, f"br64 {sp} splits", cfg_text(64, 64, 2, 4, True), sp))
        for sp in (1, 2, 4, 8):
            out.append((s, f"br128 w8 {sp} splits", cfg_text(128, 64, 2, 8, True), sp))
        out.append((s, "br64 s3 4 splits", cfg_text(64, 64, 3, 4, True), 4))
        for sp in (3, 6):
            out.append((s, f"br64 {sp} splits", cfg_text(64, 64, 2, 4, True), sp))
        out.append((s, "br64 bc128 4 splits", cfg_text(64, 128, 2, 4, True), 4))
        out.append((s, "br64 bc32 s3 4 splits", cfg_text(64, 32, 3, 4, True), 4))
        out.append((s, "br64 bc32 s4 4 splits", cfg_text(64, 32, 4, 4, True), 4))
    elif section.startswith("paged"):
        for b, hq, hkv, nk in ((1, 32, 32, 32768), (8, 32, 8, 8192)):
            if section == "paged-auto":
                out.append(((b, hq, hkv, nk, 1, 0), "contiguous", None, None))
                out.append(((b, hq, hkv, nk, 1, 0), "contiguous bc64 s3", cfg_text(64, 64, 3, 4, False), None))
            for page in (16, 64, 256):
                out.append(((b, hq, hkv, nk, 1, page), "heuristic", None, None))
            if section == "paged-auto":
                for st in (3, 4):
                    out.append(((b, hq, hkv, nk, 1, 64), f"bc64 s{st}", cfg_text(64, 64, st, 4, False), None))
    return out


# ---- one section, in this process ------------------------------------------------------------------------
class Runner:
    def __init__(self, a):
        import torch
        import fajit
        self.torch, self.fajit, self.a = torch, fajit, a
        torch.manual_seed(1234)
        torch.backends.cuda.matmul.allow_tf32 = False
        self.kv, self.ref_key, self.ref = None, None, None

    def inputs(self, shape):
        """q [B, Nq, Hq, D] and rotating K/V sets [B, Nk, Hkv, D] (kept while B, Hkv, Nk stay)."""
        torch = self.torch
        b, hq, hkv, nk, nq, _ = shape
        key = (b, hkv, nk)
        if self.kv is None or self.kv[0] != key:
            self.kv = None
            torch.cuda.empty_cache()
            one = 2 * b * nk * hkv * D * 2
            n = max(1, math.ceil(ROTATE_BYTES / one))
            self.kv = (key, [tuple(torch.randn(b, nk, hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                             for _ in range(n)])
        return self.kv[1]

    def q_for(self, shape):
        b, hq, hkv, nk, nq, _ = shape
        g = self.torch.Generator(device="cuda").manual_seed(hash((b, hq, hkv, nk, nq)) % (1 << 31))
        return self.torch.randn(b, nq, hq, D, device="cuda", dtype=self.torch.bfloat16, generator=g)

    def reference(self, shape, q, k, v):
        """O [B, Nq, Hq, D] in float64 (bottom-right causal when Nq > 1), cached per (shape without page)."""
        torch = self.torch
        key = shape[:5]
        if self.ref_key == key:
            return self.ref
        b, hq, hkv, nk, nq, _ = shape
        g = hq // hkv
        o = torch.empty(b, nq, hq, D, device="cuda", dtype=torch.float64)
        for bi in range(b):
            for h in range(hkv):
                kk, vv = k[bi, :, h].double(), v[bi, :, h].double()
                qh = q[bi, :, h * g:(h + 1) * g].double().permute(1, 0, 2).reshape(g * nq, D)  # rows (head, i)
                sc = qh @ kk.t() / math.sqrt(D)
                if nq > 1:
                    i = torch.arange(nq, device="cuda").repeat(g)[:, None]
                    sc = sc.masked_fill(torch.arange(nk, device="cuda")[None, :] > i + (nk - nq), -math.inf)
                o[bi, :, h * g:(h + 1) * g] = (torch.softmax(sc, dim=-1) @ vv).view(g, nq, D).permute(1, 0, 2)
                del kk, vv, sc
        self.ref_key, self.ref = key, o
        return o

    def paged(self, k, v, page, seed):
        torch = self.torch
        b, nk, hkv, d = k.shape
        mp = nk // page
        perm = torch.randperm(b * mp, generator=torch.Generator().manual_seed(seed)).to("cuda")
        pools = []
        for x in (k, v):
            pool = torch.empty(b * mp, page, hkv, d, device="cuda", dtype=x.dtype)
            pool[perm] = x.reshape(b * mp, page, hkv, d)
            pools.append(pool)
        return pools[0], pools[1], perm.view(b, mp).to(torch.int32)

    def check(self, out, ref):
        """(rel L2, worst row rel L2), NaN when out has one."""
        torch = self.torch
        diff = out.double() - ref
        if not torch.isfinite(out).all():
            return float("nan"), float("nan")
        l2 = (diff.norm() / ref.norm()).item()
        rows = (diff.norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)).max().item()
        return l2, rows

    def prepare(self, shape, label, config, splits):
        """(row, call or None): the candidate checked against the float64 reference; call(i) runs it on set i."""
        torch, fajit = self.torch, self.fajit
        b, hq, hkv, nk, nq, page = shape
        kvs = self.inputs(shape)
        q = self.q_for(shape)
        sets = []
        for i, (k, v) in enumerate(kvs):
            kk, vv, t = self.paged(k, v, page, seed=i) if page else (k, v, None)
            sets.append((kk, vv, t))
        o = torch.empty_like(q)
        row = {"B": b, "Hq": hq, "Hkv": hkv, "Nk": nk, "Nq": nq, "page": page, "label": label, "config": config,
               "num_splits": splits, "gather_env": os.environ.get("FAJIT_DECODE_GATHER", ""),
               "page_div_env": os.environ.get("FAJIT_DECODE_PAGE_DIV", "")}

        def call(i):
            k, v, t = sets[i % len(sets)]
            fajit.attention(q, k, v, causal=nq > 1, layout="bnhd", out=o, block_table=t, config=config,
                            num_splits=splits)
        try:
            with torch.inference_mode():
                o.fill_(float("nan"))
                call(0)
                torch.cuda.synchronize()
                row["kernel"] = fajit.last_forward().split("; fell back")[0]
                ref = self.reference(shape, q, kvs[0][0], kvs[0][1])
                row["err"], row["err_row"] = self.check(o, ref)
                row["check"] = "ok" if row["err"] <= TOL_L2 and row["err_row"] <= TOL_ROW else "FAIL"
        except Exception as e:  # a candidate the library refuses (or a CUDA error): reported, not fatal
            row["check"], row["error"] = "FAIL", f"{type(e).__name__}: {str(e)[:200]}"
            return row, None
        return row, call

    def settle_calls(self, call):
        """--warmup calls timed as one block; the calls that make >= --settle-ms of this candidate's work."""
        torch, a = self.torch, self.a
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for i in range(a.warmup):
            call(i)
        e1.record()
        torch.cuda.synchronize()
        per_call = max(e0.elapsed_time(e1) / max(a.warmup, 1), 1e-3)
        return max(SETTLE_CALLS, math.ceil(a.settle_ms / per_call))

    def time_group(self, items):
        """items: [(row, call)] of one shape, checked. Interleaved rounds, each window after its settle calls;
        the median over all of a candidate's timed calls into row['ms'] / row['gbs']."""
        torch, a = self.torch, self.a
        live = []
        with torch.inference_mode():
            for row, call in items:
                try:
                    live.append((row, call, self.settle_calls(call), []))
                except Exception as e:
                    row["check"], row["error"] = "FAIL", f"{type(e).__name__}: {str(e)[:200]}"
            per = max(1, math.ceil(a.reps / a.rounds))
            for r in range(a.rounds):
                order = live[r % len(live):] + live[:r % len(live)] if live else []
                for row, call, settle, events in order:
                    if "error" in row:
                        continue
                    try:
                        base = a.warmup + r * (settle + per)
                        for i in range(settle):
                            call(base + i)
                        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                                 for _ in range(per)]
                        for i, (e0, e1) in enumerate(pairs):
                            e0.record()
                            call(base + settle + i)
                            e1.record()
                        torch.cuda.synchronize()
                        events += pairs
                    except Exception as e:
                        row["check"], row["error"] = "FAIL", f"{type(e).__name__}: {str(e)[:200]}"
        for row, call, settle, events in live:
            if "error" in row or not events:
                continue
            ts = sorted(e0.elapsed_time(e1) for e0, e1 in events[:max(a.reps, 1)])
            ms = ts[len(ts) // 2]
            row["ms"], row["settle_calls"] = ms, settle
            row["gbs"] = 2 * row["B"] * row["Nk"] * row["Hkv"] * D * 2 / 1e9 / (ms * 1e-3)


def groups(cands):
    """The candidates in runs of one shape (the unit of interleaving), in order."""
    out = []
    for c in cands:
        if out and out[-1][0][0] == c[0]:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def child(a):
    r = Runner(a)
    start = time.time()
    for group in groups(candidates(a.child)):
        if time.time() - start > a.budget_s:
            for shape, label, config, splits in group:
                print(json.dumps({"label": label, "shape": shape, "check": "not run", "error": "--budget-s"}),
                      flush=True)
            continue
        items = [r.prepare(*c) for c in group]
        r.time_group([(row, call) for row, call in items if call is not None])
        for row, _ in items:
            print(json.dumps(row), flush=True)


# ---- the parent: a process per section, then the table ----------------------------------------------------
def fmt_row(r):
    if "shape" in r:
        return f"| {r.get('section', '')} | {r['shape']} | {r['label']} | - | not run ({r.get('error')}) | | | |"
    shape = f"B{r['B']} Hq{r['Hq']}/{r['Hkv']} Nk{r['Nk'] // 1024}k Nq{r['Nq']}" + (f" p{r['page']}" if r["page"] else "")
    gbs = f"{r['gbs']:.0f}" if r.get("gbs") else "-"
    fa3 = FA3_H200.get((r.get("section"), r["Nq"])) if not r["page"] else None
    vs = f"{r['gbs'] / fa3:.2f}" if fa3 and r.get("gbs") else "-"
    err = f"{r['err']:.1e}" if "err" in r else "-"
    kern = r.get("kernel", r.get("error", ""))
    kern = kern.replace("sm_80 bf16 d128 ", "").replace(" + sm_80 bf16 d128 combine", " +combine")
    return f"| {r['section']} | {shape} | {r['label']} | {kern} | {gbs} | {vs} | {err} | {r['check']} |"


def parent(a):
    sections = []
    for s in a.sections:
        if s == "paged":
            sections += [(f"paged-{m}", gather, div) for m, gather, div in GATHER_MODES]
        else:
            sections.append((s, None, None))
    rows, rc, start = [], 0, time.time()
    for name, gather, div in sections:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("FAJIT_DECODE_GATHER", None)
        env.pop("FAJIT_DECODE_PAGE_DIV", None)
        if gather is not None:
            env["FAJIT_DECODE_GATHER"] = gather
        if div is not None:
            env["FAJIT_DECODE_PAGE_DIV"] = div
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--reps", str(a.reps), "--warmup",
               str(a.warmup), "--rounds", str(a.rounds), "--settle-ms", str(a.settle_ms),
               "--budget-s", str(max(0.0, a.budget_s - (time.time() - start)))]
        print(f"== {name}" + (f" (FAJIT_DECODE_GATHER={gather})" if gather else "") +
              (f" (FAJIT_DECODE_PAGE_DIV={div})" if div else ""), flush=True)
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            try:
                r = json.loads(line)
            except ValueError:
                print(line, end="")
                continue
            r["section"] = name.split("-")[0] if name.startswith("paged") else name
            mode = name.split("-")[1] if name.startswith("paged") else ""
            if mode and r.get("page"):
                r["label"] += " [page div]" if mode == "div" else f" [gather {mode}]"
            rows.append(r)
            print(fmt_row(r), flush=True)
        if p.wait() != 0:
            print(f"!!! section {name}: exit status {p.returncode}")
            rc = 1
    head = ["| section | shape | candidate | kernel (tile, variant, splits) | GB/s | /FA3 | err | check |",
            "|---|---|---|---|---|---|---|---|"]
    table = "\n".join(head + [fmt_row(r) for r in rows])
    print("\n" + table)
    print(f"\nFA3 kvcache on the H200 (2026-11-24 table): {FA3_H200}; check: float64 reference, rel L2 <= {TOL_L2}, "
          f"worst row <= {TOL_ROW}, NaN fails")
    bad = [r for r in rows if r.get("check") == "FAIL"]
    if bad:
        print(f"{len(bad)} candidate(s) FAILED their check")
        rc = 1
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "decode-sweep.md"), "w") as f:
            f.write(f"# decode_sweep.py\n\n- command: {' '.join(sys.argv)}\n- reps {a.reps}, warmup {a.warmup}, "
                    f"{a.rounds} interleaved rounds per shape, >= {a.settle_ms:g} ms and >= {SETTLE_CALLS} calls of "
                    f"settle before each timed window\n\n")
            f.write(table + "\n")
        with open(os.path.join(a.out, "decode-sweep.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return rc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sections", default="long,b8,paged", help="comma-separated: long, b8, paged (default all)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="calls timed as one block to size the settle (>= 1)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per shape (default 3)")
    p.add_argument("--settle-ms", type=float, default=100.0,
                   help="untimed work of the same candidate before each timed window, ms (default 100)")
    p.add_argument("--budget-s", type=float, default=260.0,
                   help="start no shape after this many seconds in all (default 260; the rest: 'not run')")
    p.add_argument("--out", help="directory for decode-sweep.md / .json")
    p.add_argument("--list", action="store_true", help="print the candidates and exit (no GPU, no torch)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.warmup < 1 or a.rounds < 1 or a.settle_ms < 0:
        p.error("--warmup and --rounds must be >= 1, --settle-ms >= 0")
    if a.list:
        for sec in ("long", "b8") + tuple(f"paged-{m[0]}" for m in GATHER_MODES):
            for shape, label, config, splits in candidates(sec):
                print(f"{sec:11} B{shape[0]} Hq{shape[1]}/{shape[2]} Nk{shape[3]} Nq{shape[4]} page {shape[5]:3}  "
                      f"{label:24} config={config} num_splits={splits}")
        return 0
    if a.child:
        child(a)
        return 0
    a.sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = [s for s in a.sections if s not in ("long", "b8", "paged")]
    if bad:
        p.error(f"--sections: unknown {bad} (long, b8, paged)")
    return parent(a)


if __name__ == "__main__":
    sys.exit(main())
