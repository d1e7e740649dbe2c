"""decode_compare.py - fajit's decode path (split-KV, GQA packing, per-sequence KV lengths, paged K/V) next to
FlashAttention-3 and torch SDPA on issue 11's decode shapes, through the Python package.

Grid (defaults): issue 11's rows (B / Hq / Hkv / Nk) 1/32/32/32k, 1/32/8/128k, 8/32/8/8k, 64/32/8/2k,
1/8/1/512k at Nq = 1 (non-causal), 4 and 16 (causal, bottom-right), D = 128, BF16, then a paged variant
of rows 1, 3 and 4 at Nq = 1 with pages of 16, 64 and 256 rows (pages shuffled in one pool), then the
contiguous rows in FP16 (fajit and SDPA only: the FA3 wheel has no FP16). Q is [B, Nq, Hq, D] and the KV
cache [B, Nk, Hkv, D] (paged: a [pages, page_size, Hkv, D] pool and a [B, max_pages] int32 block table),
the layout FA3 and vLLM use; fajit reads the same tensors (layout="bnhd"), SDPA their [B, H, N, D] views.

Systems, in one process, on the same inputs:
  fajit       fajit.attention(q, k, v, layout="bnhd", ...) with its default choices (split heuristic, GQA
              packing); its kernel text (fajit.last_forward(): tile, variant, splits) is recorded
  fajit s=1   the same with num_splits=1 (no split-KV), for reference
  fajit contig  (paged rows) fajit on the same K/V unpaged, in the same interleaved rounds as the paged calls:
              fajit paged/contig is the ratio of the two (before, the contiguous row timed minutes earlier was the
              base, and the H200's clock had dropped 5-10% by the paged rows: 1710-1815 vs 1920 MHz)
  FA3 kvcache fa3_fwd_interface.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=..., page_table=...,
              causal=..., num_splits=0)  (its heuristic)
  FA3 func    fa3_fwd_interface.flash_attn_func(q, k, v, causal=..., num_splits=0)  (contiguous rows only)
  SDPA        torch.nn.functional.scaled_dot_product_attention on [B, H, N, D] views, torch's default backend
              choice (enable_gqa=True for GQA; causal rows use torch.nn.attention.bias.causal_lower_right);
              the CUDA kernels that ran are read once per shape with torch.profiler and recorded; where its GQA
              path refuses a shape, SDPA runs on K/V repeated to Hq heads and the row says so
Every peer is optional: one that is missing or refuses a shape gets "n/a: <reason>" in its cell.

Method (as bench/compare.py): 1. Check. Each system's output for the first input set (fajit's written over a
NaN-filled buffer) is compared with a float32 reference computed per KV head on the first and last
sequence (all heads, all query rows, the sequence's filled keys): relative L2. fajit above 2e-2 (bf16) /
5e-3 (f16) marks the row FAIL and the exit status 1 (the row is still timed). 2. Time. --warmup calls each,
then --reps calls each in 5 interleaved rounds, every call between two CUDA events on the current stream,
each window preceded by >= --settle calls and >= --settle-ms of the same system and by a spin kernel that
covers the host time to enqueue the window (compare.queue_ahead: the events time GPU work, not a Python
wrapper's host side - before it, FA3's column swung up to 2.5x between runs); the median is reported,
with NVML's SM clock per system. K/V sets rotate so that the K/V read by consecutive calls spans >= 256 MB
(the H100/H200 L2 is 50 MB; issue 11's rows hold 256-536 MB of K/V each, so they use one set).
GB/s = bytes of K + V read / t, each KV head counted once, over each sequence's filled length (seqlens_k);
fajit / FA3 = fajit's GB/s over FA3 kvcache's.

--lens none (default): no per-sequence lengths, every sequence reads Nk keys (FA3: cache_seqlens=None);
full: seqlens_k = cache_seqlens = Nk for every sequence (what a server passes); uneven: lengths drawn in
[1, Nk] with sequence 0 at 1 key where B > 1 (SDPA n/a: it has no per-sequence lengths).

Usage (GPU machine, repository root; the package installed as bench/run_gpu.sh's python stage does it):
    PYTHONPATH=build/py-gpu python3 bench/decode_compare.py --out DIR          # the whole grid (~3 min)
    python3 bench/decode_compare.py --rows 1 --nq 1 --paged-rows none --dtypes bf16 --lib build/libfajit.so
    python3 bench/decode_compare.py --selftest [--out DIR]                      # no GPU, no torch
Outputs (with --out DIR): DIR/decode-<gpu-slug>.md (report: date, GPU, driver, versions, command, tables,
every n/a with its reason), .csv and .json (every timed call in the json). The table printed last is the
short form. Exit status: 0 when fajit ran and passed the check on every shape, 1 otherwise, 2 for a bad
command line.
"""
import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import random
import shlex
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (timing, NVML clocks, environment helpers: shared with compare.py)
from compare_report import fmt, gpu_slug, log  # noqa: E402

ROWS = ((1, 32, 32, 32768), (1, 32, 8, 131072), (8, 32, 8, 8192), (64, 32, 8, 2048), (1, 8, 1, 524288))
HEAD_DIM = 128
ROTATE_BYTES = 256 << 20  # K + V read by consecutive calls span at least this (>= 5x a 50 MB L2)
TOL = {"bf16": 2e-2, "f16": 5e-3}
SYSTEMS = ("fajit", "fajit_s1", "fajit_contig", "fa3_kvcache", "fa3_func", "sdpa")
LABEL = {"fajit": "fajit", "fajit_s1": "fajit s=1", "fajit_contig": "fajit contig", "fa3_kvcache": "FA3 kvcache", "fa3_func": "FA3 func",
         "sdpa": "SDPA"}
DEVICE = "cuda"


# ---- command line and grid ---------------------------------------------------------------------------
def _ints(text, lo=1):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers")
    if not vals or min(vals) < lo:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers >= {lo}")
    return vals


def _rows(text):
    if text == "none":
        return []
    vals = _ints(text)
    if max(vals) > len(ROWS):
        raise argparse.ArgumentTypeError(f"{text!r}: rows are 1..{len(ROWS)} (issue 11's table, in order)")
    return vals


def _dtypes(text):
    out = [compare.DTYPE_ALIASES.get(x.strip().lower()) for x in text.split(",") if x.strip()]
    if not out or None in out:
        raise argparse.ArgumentTypeError(f"{text!r}: expected bf16 and/or f16")
    return list(dict.fromkeys(out))


def _pages(text):
    vals = _ints(text)
    bad = [p for p in vals if p % 16]
    if bad:
        raise argparse.ArgumentTypeError(f"{text!r}: page sizes must be multiples of 16 (fajit's rule), got {bad}")
    return vals


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="The module docstring (head of bench/decode_compare.py) describes the method.")
    p.add_argument("--rows", type=_rows, default=list(range(1, len(ROWS) + 1)),
                   help="issue 11's rows to run, 1-based: " + ", ".join(f"{i + 1}: B{b} Hq{hq} Hkv{hkv} Nk{nk}"
                                                                        for i, (b, hq, hkv, nk) in enumerate(ROWS)))
    p.add_argument("--nq", type=_ints, default=[1, 4, 16], help="query rows per sequence (default 1,4,16; Nq > 1 is causal)")
    p.add_argument("--dtypes", type=_dtypes, default=["bf16", "f16"],
                   help="bf16,f16 (default both; f16 runs the contiguous rows after everything in bf16)")
    p.add_argument("--paged-rows", type=_rows, default=[1, 3, 4], help="rows also run paged, at Nq = 1, bf16 (default "
                   "1,3,4; 'none')")
    p.add_argument("--page-sizes", type=_pages, default=[16, 64, 256], help="default 16,64,256")
    p.add_argument("--lens", choices=("none", "full", "uneven"), default="none",
                   help="per-sequence KV lengths given to fajit and FA3 (default none; see the docstring)")
    compare.add_timing_options(p, reps=30, min_reps=10, warmup=5)
    p.add_argument("--budget-s", type=float, default=200.0,
                   help="start no new shape after this many seconds (default 200); the rest are listed as not run")
    p.add_argument("--no-profile", action="store_true", help="do not read SDPA's kernel names with torch.profiler")
    p.add_argument("--out", help="directory for the .md, .csv and .json (created); nothing is written without it "
                   "(except with --selftest)")
    p.add_argument("--selftest", action="store_true",
                   help="no GPU, no torch: the grid, fake rows through the writers (into --out or a temp directory), "
                        "read back and checked")
    a = p.parse_args(argv)
    compare.check_timing_options(p, a, min_reps=10)
    return a


def build_grid(a):
    """Shapes in run order: bf16 contiguous rows, bf16 paged rows, then the other dtypes' contiguous rows."""
    def shape(dt, row, nq, page):
        b, hq, hkv, nk = ROWS[row - 1]
        return {"dtype": dt, "row": row, "B": b, "Hq": hq, "Hkv": hkv, "Nk": nk, "Nq": nq, "D": HEAD_DIM,
                "causal": nq > 1, "page": page, "lens": a.lens}
    grid = []
    for dt in a.dtypes:
        grid += [shape(dt, r, nq, 0) for r in a.rows for nq in a.nq]
        if dt == "bf16":
            grid += [shape(dt, r, 1, ps) for r in a.paged_rows for ps in a.page_sizes if ROWS[r - 1][3] % ps == 0]
    return grid


def shape_name(s):
    return (f"{s['dtype']} B{s['B']} Hq{s['Hq']}/Hkv{s['Hkv']} Nk{s['Nk']} Nq{s['Nq']}"
            f"{' causal' if s['causal'] else ''}{' paged ' + str(s['page']) if s['page'] else ''}"
            f"{' lens ' + s['lens'] if s['lens'] != 'none' else ''}")


def seq_lens(s, seed=0):
    """Each sequence's filled keys (host list)."""
    if s["lens"] != "uneven":
        return [s["Nk"]] * s["B"]
    rng = random.Random(seed * 1000 + s["row"])
    lens = [rng.randint(1, s["Nk"]) for _ in range(s["B"])]
    if s["B"] > 1:
        lens[0] = 1
    return lens


def kv_bytes(s, lens):
    """Bytes of K + V read, each KV head once, over the filled lengths."""
    return 2 * sum(lens) * s["Hkv"] * s["D"] * 2


# ---- the GPU side ---------------------------------------------------------------------------------------
class DecodeBench(compare.Bench):
    """Inputs, the systems' calls, checks and timing (compare.Bench.time_systems) for decode shapes."""

    def __init__(self, a, fajit):  # noqa: D107 - compare.Bench.__init__ sets up compare.py's grid: not called
        import torch
        import torch.nn.functional as F
        self.torch, self.F, self.a, self.fajit = torch, F, a, fajit
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("highest")
        torch.cuda.init()
        torch.empty(1, device=DEVICE)  # torch's primary context exists before fajit binds to it
        self.cache = tempfile.mkdtemp(prefix="fajit-decode-compare-")
        os.environ["FAJIT_CACHE_DIR"], os.environ["FAJIT_CACHE"] = self.cache, "1"
        self.lib_path = str(fajit._lib.LIB_PATH)
        self.dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
        self.clock = compare.ClockSampler()
        self.kv = None  # (key, [(k, v) per set])
        self.fa3, self.fa3_flags, self.fa3_version, self.fa3_error = None, {}, None, None
        self.load_fa3()
        try:
            from torch.nn.attention.bias import causal_lower_right
            self.causal_lower_right = causal_lower_right
        except ImportError:
            self.causal_lower_right = None

    def load_fa3(self):
        from importlib import metadata
        try:
            import fa3_fwd_interface
            self.fa3, self.fa3_version = fa3_fwd_interface, metadata.version("fa3-fwd")
        except Exception as e:  # ImportError (no wheel, no flash_attn_config), or a library that does not load
            self.fa3_error = f"not importable: {type(e).__name__}: {str(e)[:160]}"
            return
        try:
            from fa3_fwd_config import CONFIG
            self.fa3_flags = dict(CONFIG.get("build_flags", {}))
        except Exception:
            self.fa3_flags = {}

    def close(self):
        import shutil
        self.clock.close()
        shutil.rmtree(self.cache, ignore_errors=True)

    # -- inputs
    def kv_sets(self, s):
        """[(k, v)] [B, Nk, Hkv, D] sets for s's row and dtype, enough to span ROTATE_BYTES; kept while the
        row and dtype stay the same (the Nq variants share them)."""
        torch = self.torch
        key = (s["dtype"], s["B"], s["Nk"], s["Hkv"], s["D"])
        if self.kv is None or self.kv[0] != key:
            self.kv = None
            torch.cuda.empty_cache()
            one = 2 * s["B"] * s["Nk"] * s["Hkv"] * s["D"] * 2
            count = max(1, math.ceil(ROTATE_BYTES / one))
            dt = self.dtypes[s["dtype"]]
            self.kv = (key, [tuple(torch.randn(s["B"], s["Nk"], s["Hkv"], s["D"], device=DEVICE, dtype=dt)
                                   for _ in range(2)) for _ in range(count)])
            log(f"  inputs: {count} K/V set(s) of {one / 2**20:.0f} MB ({s['dtype']})")
        return self.kv[1]

    def paged(self, k, v, page, seed):
        """k, v [B, Nk, Hkv, D] as [pages, page, Hkv, D] pools with the pages shuffled, and the [B, Nk / page]
        int32 block table that reads them back in order."""
        torch = self.torch
        b, nk, hkv, d = k.shape
        mp = nk // page
        perm = torch.randperm(b * mp, generator=torch.Generator().manual_seed(seed)).to(DEVICE)
        pools = []
        for x in (k, v):
            pool = torch.empty(b * mp, page, hkv, d, device=DEVICE, dtype=x.dtype)
            pool[perm] = x.reshape(b * mp, page, hkv, d)
            pools.append(pool)
        return pools[0], pools[1], perm.view(b, mp).to(torch.int32)

    # -- calls: one per input set, each returning O as [B, Nq, Hq, D]
    def calls(self, s, sets, lens_t, kvs):
        """{system: [call per set] or 'n/a: reason'} for shape s; sets: [(q, k, v, o, table)]; kvs: the contiguous
        (k, v) of each set (paged rows: fajit contig reads them, timed in the same rounds as the paged calls)."""
        fajit, causal = self.fajit, s["causal"]
        out = {}

        def fj(splits):
            return [lambda q=q, k=k, v=v, o=o, t=t: fajit.attention(
                q, k, v, causal=causal, layout="bnhd", out=o, seqlens_k=lens_t, block_table=t, num_splits=splits)
                for q, k, v, o, t in sets]
        out["fajit"] = fj(None)
        out["fajit_s1"] = fj(1) if not s["page"] else "n/a: not run on paged rows (the contiguous row has it)"
        out["fajit_contig"] = [lambda q=q, k=k, v=v, o=o: fajit.attention(
            q, k, v, causal=causal, layout="bnhd", out=o, seqlens_k=lens_t) for (q, _, _, o, _), (k, v) in
            zip(sets, kvs)] if s["page"] else "n/a: contiguous row"
        out["fa3_kvcache"] = out["fa3_func"] = self.fa3_refusal(s)
        if self.fa3 is not None and not out["fa3_kvcache"]:
            kvc = self.fa3.flash_attn_with_kvcache
            out["fa3_kvcache"] = [lambda q=q, k=k, v=v, t=t: kvc(q, k, v, cache_seqlens=lens_t, page_table=t,
                                                                  causal=causal, num_splits=0) for q, k, v, _, t in sets]
            if s["page"]:
                out["fa3_func"] = "n/a: flash_attn_func takes no page table (paged rows: FA3 kvcache)"
            elif s["lens"] == "uneven":
                out["fa3_func"] = "n/a: flash_attn_func takes no per-sequence KV lengths"
            else:
                func = self.fa3.flash_attn_func
                out["fa3_func"] = [lambda q=q, k=k, v=v: func(q, k, v, causal=causal, num_splits=0)
                                   for q, k, v, _, _ in sets]
        out["sdpa"] = self.sdpa_calls(s, sets)
        for name, c in out.items():
            if isinstance(c, list):  # FA3 returns O or (O, LSE, ...)
                out[name] = [lambda c=c1: _first(c()) for c1 in c]
        return out

    def fa3_refusal(self, s):
        """'n/a: reason' when FA3 cannot run s, else ''."""
        if self.fa3 is None:
            return "n/a: FA3 " + (self.fa3_error or "not importable")
        if s["dtype"] == "f16" and self.fa3_flags.get("FLASHATTENTION_DISABLE_FP16"):
            return "n/a: this fa3-fwd wheel is built without FP16 (FLASHATTENTION_DISABLE_FP16, fa3_fwd_config)"
        if s["page"] and self.fa3_flags.get("FLASHATTENTION_DISABLE_PAGEDKV"):
            return "n/a: this fa3-fwd wheel is built without paged KV (FLASHATTENTION_DISABLE_PAGEDKV, fa3_fwd_config)"
        return ""

    def sdpa_calls(self, s, sets):
        F = self.F
        if s["page"]:
            return "n/a: SDPA has no paged KV"
        if s["lens"] == "uneven":
            return "n/a: SDPA has no per-sequence KV lengths"
        mask = None
        if s["causal"]:
            if self.causal_lower_right is None:
                return "n/a: torch.nn.attention.bias.causal_lower_right is missing (SDPA's is_causal is top-left)"
            mask = self.causal_lower_right(s["Nq"], s["Nk"])
        gqa = s["Hq"] != s["Hkv"]
        return [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=gqa).transpose(1, 2)
            for q, k, v, _, _ in sets]

    def sdpa_expanded(self, s, sets):
        """SDPA's calls with K/V repeated to Hq heads (for when its GQA path refuses a shape)."""
        g = s["Hq"] // s["Hkv"]
        wide = [(q, k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2), o, t) for q, k, v, o, t in sets]
        return [lambda c=c: _first(c()) for c in self.sdpa_calls(dict(s, Hkv=s["Hq"]), wide)]

    def first_call(self, call):
        """(output, None) or (None, reason) for a system's first call (its check)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = call()
                self.torch.cuda.synchronize()
                return out, None
            except Exception as e:
                if not self.alive():
                    raise
                return None, compare.short_reason(e, caught)

    def kernels_of(self, call):
        """Names of the CUDA kernels one call launches (torch.profiler), or a reason."""
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                self.torch.cuda.synchronize()
            names = []
            for e in prof.events():
                if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name not in names:
                    names.append(e.name)
            return "; ".join(n[:90] for n in names) or "? (the profiler saw no kernel)"
        except Exception as e:
            return f"? (profiler: {type(e).__name__}: {str(e)[:100]})"

    # -- check: float32 reference per KV head, first and last sequence
    def reference(self, s, q, k, v, lens):
        """{b: O_ref [Nq, Hq, D] float32} for b in {0, B-1}."""
        torch = self.torch
        g, nq, d = s["Hq"] // s["Hkv"], s["Nq"], s["D"]
        refs = {}
        for b in sorted({0, s["B"] - 1}):
            n = lens[b]
            o = torch.zeros(nq, s["Hq"], d, device=DEVICE)
            for h in range(s["Hkv"]):
                qh = q[b, :, h * g:(h + 1) * g].float().permute(1, 0, 2).reshape(g * nq, d)  # rows (head, i)
                sc = qh @ k[b, :n, h].float().t() / math.sqrt(d)
                if s["causal"]:
                    i = torch.arange(nq, device=DEVICE).repeat(g)[:, None]
                    sc = sc.masked_fill(torch.arange(n, device=DEVICE)[None, :] > i + (n - nq), -math.inf)
                p = torch.softmax(sc, dim=-1).nan_to_num(0.0)  # a row with no key: O = 0
                o[:, h * g:(h + 1) * g] = (p @ v[b, :n, h].float()).view(g, nq, d).permute(1, 0, 2)
            refs[b] = o
        return refs

    def error(self, out, refs):
        num = sum(((out[b].float() - r) ** 2).sum().item() for b, r in refs.items())
        den = sum((r ** 2).sum().item() for r in refs.values())
        return math.sqrt(num / max(den, 1e-30)) if math.isfinite(num) else float("nan")

    # -- one shape
    def measure(self, s):
        torch, fajit = self.torch, self.fajit
        row = dict(s)
        lens = seq_lens(s)
        row["gbytes"] = kv_bytes(s, lens) / 1e9
        dt = self.dtypes[s["dtype"]]
        kvs = self.kv_sets(s)
        lens_t = torch.tensor(lens, dtype=torch.int32, device=DEVICE) if s["lens"] != "none" else None
        sets = []
        for i, (k, v) in enumerate(kvs):
            q = torch.randn(s["B"], s["Nq"], s["Hq"], s["D"], device=DEVICE, dtype=dt)
            kk, vv, table = self.paged(k, v, s["page"], seed=i) if s["page"] else (k, v, None)
            sets.append((q, kk, vv, torch.empty_like(q), table))
        systems = self.calls(s, sets, lens_t, kvs)
        with torch.inference_mode():
            refs = self.reference(s, sets[0][0], kvs[0][0], kvs[0][1], lens)
            timed = {}
            for name in SYSTEMS:
                c = systems[name]
                if isinstance(c, str):
                    row[name + "_error"] = c[len("n/a: "):] if c.startswith("n/a: ") else c
                    continue
                if name.startswith("fajit"):
                    sets[0][3].fill_(float("nan"))
                out, why = self.first_call(c[0])
                if why and name == "sdpa" and s["Hq"] != s["Hkv"]:
                    c = self.sdpa_expanded(s, sets)
                    out, why2 = self.first_call(c[0])
                    row["sdpa_note"] = f"K/V heads repeated to Hq (reads {s['Hq'] // s['Hkv']}x the K/V bytes): with " \
                                       f"enable_gqa it refused: {why}" + (f"; repeated: {why2}" if why2 else "")
                    why = why2 and row["sdpa_note"]
                if why:
                    row[name + "_error"] = why
                    continue
                row["err_" + name] = self.error(out, refs)
                if name == "fajit":
                    row["kernel"] = fajit.last_forward()
                if name == "sdpa" and not self.a.no_profile:
                    row["sdpa_kernels"] = self.kernels_of(c[0])
                timed[name] = (c, contextlib.nullcontext)
            tol = TOL[s["dtype"]]
            bad = [n for n in ("fajit", "fajit_s1", "fajit_contig") if n in timed and not row["err_" + n] <= tol]  # NaN fails
            for n in bad:
                log(f"  !!! FAIL: {LABEL[n]} err vs ref {row['err_' + n]:.3e} > {tol:.0e}")
            if timed:
                self.time_systems(timed, row)
        # fajit's calls that should run (s=1 is not run on paged rows) raised, or gave a wrong output
        ran = ("fajit", "fajit_contig") if s["page"] else ("fajit", "fajit_s1")
        row["check"] = "FAIL" if bad or any(n + "_error" in row for n in ran) else "ok"
        for name in SYSTEMS:
            ms = row.get(name + "_ms")
            row[name] = row["gbytes"] / (ms * 1e-3) if ms else None
        row["sets"] = len(sets)
        return row


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


# ---- report --------------------------------------------------------------------------------------------
def ratio(r, a="fajit", b="fa3_kvcache"):
    return r[a] / r[b] if r.get(a) and r.get(b) else None


def annotate(rows):
    """fajit_paged_vs_contig on paged rows: fajit's GB/s over fajit contig's (the same shape on the contiguous
    cache, timed in the same interleaved rounds); without that column, over the contiguous row of that shape."""
    contig = {(r["dtype"], r["row"], r["Nq"], r["lens"]): r.get("fajit") for r in rows if not r["page"]}
    for r in rows:
        base = (r.get("fajit_contig") or contig.get((r["dtype"], r["row"], r["Nq"], r["lens"]))) if r["page"] else None
        r["fajit_paged_vs_contig"] = r["fajit"] / base if base and r.get("fajit") else None
    return rows


HEAD = ["dtype", "B", "Hq", "Hkv", "Nk", "Nq", "causal", "KV", "fajit", "fajit s=1", "fajit contig", "FA3 kvcache", "FA3 func", "SDPA",
        "fajit/FA3", "fajit paged/contig", "MHz fajit, FA3", "err fajit, s=1, contig, FA3, FA3 func, SDPA", "check",
        "fajit kernel"]


def table_row(r):
    return [r["dtype"], str(r["B"]), str(r["Hq"]), str(r["Hkv"]), str(r["Nk"]), str(r["Nq"]),
            "y" if r["causal"] else "n", f"paged {r['page']}" if r["page"] else "contiguous"] + \
        [fmt(r.get(n), ".0f", "error" if n == "fajit" and "fajit_error" in r else "n/a") for n in SYSTEMS] + \
        [fmt(ratio(r), ".2f", "-"), fmt(r.get("fajit_paged_vs_contig"), ".3f", "-"),
         ", ".join(fmt(r.get(n + "_mhz"), ".0f", "-") for n in ("fajit", "fa3_kvcache")),
         ", ".join(fmt(r.get("err_" + n), ".1e", "-") for n in SYSTEMS), r.get("check", "-"),
         (r.get("kernel") or "-").replace("|", "/")]


def problems(rows):
    out = []
    for r in rows:
        for n in SYSTEMS:
            if n + "_error" in r:
                out.append(f"{shape_name(r)}: {LABEL[n]} n/a: {r[n + '_error']}")
        if r.get("check") == "FAIL":
            out.append(f"{shape_name(r)}: fajit FAILED the check or raised (err {fmt(r.get('err_fajit'), '.3e', '-')}, "
                       f"s=1 {fmt(r.get('err_fajit_s1'), '.3e', '-')}; tolerance {TOL[r['dtype']]:.0e})")
    return out


def markdown(env, settings, rows, skipped):
    out = [f"# fajit decode vs FlashAttention-3 and SDPA: {env.get('gpu', '?')}", ""]
    out += [f"- {k}: {v}" for k, v in env.items()]
    out += [f"- settings: {json.dumps(settings)}", ""]
    out.append("GB/s of K + V read (each KV head once, each sequence's filled keys) = bytes / median time; D = 128; "
               "Nq = 1 non-causal, Nq > 1 causal (bottom-right); Q [B, Nq, Hq, D], K/V cache [B, Nk, Hkv, D] or a "
               "shuffled page pool. Method: the head of bench/decode_compare.py (CUDA events, "
               f"{settings['reps']} calls in {settings['rounds']} interleaved rounds after {settings['warmup']} warm-up "
               f"calls, >= {settings['settle_ms']:g} ms of the same system and a spin kernel covering the window's enqueue time "
               f"before each window; K/V sets rotated past "
               f"{settings['rotate_bytes'] >> 20} MB). err = relative L2 against a float32 reference on the first and "
               f"last sequence; check = fajit's err <= {TOL['bf16']:.0e} (bf16) / {TOL['f16']:.0e} (f16). "
               "fajit/FA3 = fajit / FA3 kvcache (num_splits=0); fajit paged/contig = fajit's GB/s on a paged row over "
               "fajit contig's (the same shape on the contiguous cache, timed in the same interleaved rounds).")
    out.append("")
    fails = [r for r in rows if r.get("check") != "ok"]
    if fails:
        out += [f"**{len(fails)} shape(s) where fajit failed the check or did not run: see below.**", ""]
    if skipped:
        out += [f"**{len(skipped)} shape(s) not run (time budget): " + "; ".join(shape_name(s) for s in skipped) + "**", ""]
    out += ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(table_row(r)) + " |" for r in rows]
    kern = [r for r in rows if r.get("sdpa_kernels") or r.get("sdpa_note")]
    if kern:
        out += ["", "## SDPA: the kernels that ran (torch.profiler, one call)", ""]
        out += [f"- {shape_name(r)}: {r.get('sdpa_kernels', '-')}" + (f" ({r['sdpa_note']})" if r.get("sdpa_note")
                                                                       else "") for r in kern]
    probs = problems(rows)
    if probs:
        out += ["", "## n/a and failures", ""] + [f"- {p}" for p in probs]
    return "\n".join(out) + "\n"


CSV_FIELDS = ["dtype", "row", "B", "Hq", "Hkv", "Nk", "Nq", "D", "causal", "page", "lens", "gbytes"] + \
    [f"{n}{x}" for n in SYSTEMS for x in ("", "_ms", "_mhz", "_watts")] + \
    ["fajit_over_fa3", "fajit_paged_vs_contig"] + ["err_" + n for n in SYSTEMS] + ["check", "kernel", "sdpa_kernels", "sdpa_note"] + \
    [n + "_error" for n in SYSTEMS]


def write_outputs(out_dir, env, settings, rows, skipped):
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, "decode-" + gpu_slug(env.get("gpu", "gpu")))
    paths = {"md": base + ".md", "csv": base + ".csv", "json": base + ".json"}
    with open(paths["md"], "w") as f:
        f.write(markdown(env, settings, rows, skipped))
    with open(paths["csv"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r, fajit_over_fa3=ratio(r)))
    clean = [{k: (None if isinstance(x, float) and not math.isfinite(x) else x) for k, x in r.items()} for r in rows]
    with open(paths["json"], "w") as f:
        json.dump({"env": env, "settings": settings, "rows": clean, "not_run": skipped}, f, indent=1)
    return paths


def print_table(rows):
    head = ["shape", "fajit", "s=1", "contig", "FA3 kv", "FA3 fn", "SDPA", "fajit/FA3", "paged/contig", "check"]
    lines = [[shape_name(r)] + [fmt(r.get(n), ".0f") for n in SYSTEMS] + [
        fmt(ratio(r), ".2f", "-"), fmt(r.get("fajit_paged_vs_contig"), ".3f", "-"), r.get("check", "-")] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    log("\nGB/s of K + V read (median); fajit/FA3 = fajit / FA3 kvcache")
    for cells in [head] + lines:
        log("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))))


def environment(bench, argv):
    fa3 = bench.fa3_version or bench.fa3_error or "?"
    if bench.fa3_flags:
        fa3 += " (built without: " + ", ".join(k.replace("FLASHATTENTION_DISABLE_", "") for k, on in
                                               bench.fa3_flags.items() if on and "DISABLE" in k) + ")"
    env = compare.device_environment(bench.torch)
    env.update({"fa3": fa3, "fajit": f"{bench.fajit.__version__} ({bench.lib_path})",
                "fajit_git": compare.git_revision(), "command": shlex.join(["python3"] + argv)})
    return env


def settings_of(a, seconds):
    return {"reps": a.reps, "warmup": a.warmup, "settle": a.settle, "settle_ms": a.settle_ms, "queue_ahead": True,
            "rounds": compare.ROUNDS,
            "rotate_bytes": ROTATE_BYTES, "tolerance": TOL, "lens": a.lens, "budget_s": a.budget_s,
            "seconds": round(seconds, 1)}


# ---- self-test (no GPU, no torch) ---------------------------------------------------------------------------
def selftest(a, argv):
    grid = build_grid(a)
    rng = random.Random(0)
    rows = []
    for s in grid:
        r = dict(s, gbytes=kv_bytes(s, seq_lens(s)) / 1e9, check="ok", kernel="sm_80 bf16 d128 br64 bc64 s2 sw128 w4 "
                 "noncausal split pack (8 splits) + sm_80 bf16 d128 combine", sets=1)
        for n in SYSTEMS:
            r[n + "_ms"] = r["gbytes"] / (rng.uniform(1000, 4000) * 1e-3)
            r[n] = r["gbytes"] / (r[n + "_ms"] * 1e-3)
            r["err_" + n] = rng.uniform(1e-3, 4e-3)
        rows.append(r)
    rows[1]["fa3_kvcache"] = rows[1]["fa3_kvcache_ms"] = None
    rows[1]["fa3_kvcache_error"] = "FA3 not importable: ModuleNotFoundError: No module named 'flash_attn_config' (fake)"
    rows[2]["check"], rows[2]["err_fajit"] = "FAIL", float("nan")
    annotate(rows)
    paged = [r for r in rows if r["page"]]
    assert not paged or paged[0]["fajit_paged_vs_contig"] is not None, "paged rows find their contiguous row"
    out_dir = a.out or tempfile.mkdtemp(prefix="fajit-decode-selftest-")
    env = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), "gpu": "NVIDIA H200 (fake numbers)",
           "command": shlex.join(["python3"] + argv)}
    paths = write_outputs(out_dir, env, dict(settings_of(a, 0.0), selftest=True), rows, grid[-1:])
    print_table(rows)
    with open(paths["csv"]) as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows) and abs(float(got[0]["fajit"]) - rows[0]["fajit"]) < 1e-6 * rows[0]["fajit"]
    with open(paths["json"]) as f:
        js = json.load(f)
    assert len(js["rows"]) == len(rows) and js["rows"][2]["err_fajit"] is None and len(js["not_run"]) == 1
    md = open(paths["md"]).read()
    assert md.count("\n| ") >= len(rows) + 1 and "FAILED the check" in md and "FA3 kvcache n/a: FA3 not importable" in md
    n_rows = len(a.rows) * len(a.nq) * len(a.dtypes)
    n_paged = sum(1 for r in a.paged_rows for p in a.page_sizes if ROWS[r - 1][3] % p == 0) if "bf16" in a.dtypes else 0
    assert len(grid) == n_rows + n_paged, (len(grid), n_rows, n_paged)
    assert all(s["causal"] == (s["Nq"] > 1) for s in grid)
    assert kv_bytes(grid[0], [32768]) == 2 * 32768 * 32 * 128 * 2 or grid[0]["row"] != 1
    log(f"\ndecode_compare selftest ok: {len(grid)} shapes in the grid ({n_paged} paged), writers checked")
    for k, p in paths.items():
        log(f"  {k:4} {p} ({os.path.getsize(p)} bytes)")
    return 0


# ---- main ----------------------------------------------------------------------------------------------------
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    grid = build_grid(a)
    if not grid:
        log("decode_compare.py: no shape to run (--rows / --paged-rows / --nq / --dtypes leave none)")
        return 2
    if a.selftest:
        return selftest(a, [sys.argv[0]] + argv)
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)")
    except (ImportError, RuntimeError) as e:
        log(f"decode_compare.py: needs torch with a CUDA GPU: {type(e).__name__}: {e} (--selftest runs without)")
        return 1
    fajit = compare.load_fajit(a.lib)
    t_start = time.perf_counter()
    bench = DecodeBench(a, fajit)
    env = environment(bench, [sys.argv[0]] + argv)
    for k, v in env.items():
        log(f"{k}: {v}")
    log(f"{len(grid)} shapes; reps {a.reps}, warm-up {a.warmup}, {compare.ROUNDS} rounds, >= {a.settle_ms:g} ms settle; "
        f"budget {a.budget_s:g} s")
    bench.gpu_warmup()
    rows, skipped, aborted = [], [], None
    for i, s in enumerate(grid):
        if time.perf_counter() - t_start > a.budget_s:
            skipped = grid[i:]
            log(f"time budget ({a.budget_s:g} s) spent: {len(skipped)} shape(s) not run")
            break
        t0 = time.perf_counter()
        log(f"[{i + 1:2}/{len(grid)}] {shape_name(s)}")
        try:
            r = bench.measure(s)
        except Exception as e:  # the CUDA context is broken: nothing more can run in this process
            aborted = f"at {shape_name(s)}: {type(e).__name__}: {str(e)[:300]} (CUDA context lost; later shapes not run)"
            log("  !!! " + aborted)
            rows.append(dict(s, fajit_error=aborted, check="error"))
            skipped = grid[i + 1:]
            break
        rows.append(r)
        log("  " + "  ".join(f"{LABEL[n]} {fmt(r.get(n), '.0f')}" for n in SYSTEMS) + " GB/s"
            f"  fajit/FA3 {fmt(ratio(r), '.2f', '-')}  check {r['check']} ({time.perf_counter() - t0:.1f} s)"
            f"\n  fajit kernel: {r.get('kernel', '-')}")
        for n in SYSTEMS:
            if n + "_error" in r and not (i and "not importable" in r[n + "_error"]):
                log(f"  {LABEL[n]} n/a: {r[n + '_error']}")
    bench.close()
    annotate(rows)
    settings = settings_of(a, time.perf_counter() - t_start)
    if aborted:
        settings["aborted"] = aborted
    if a.out:
        for p in write_outputs(a.out, env, settings, rows, skipped).values():
            log(f"wrote {p}")
    print_table(rows)
    bad = [r for r in rows if r.get("check") != "ok"]
    log(f"\n{len(rows)} shapes in {settings['seconds']} s ({len(skipped)} not run); fajit failed or did not run on "
        f"{len(bad)}" + (": exit status 1" if bad or aborted else ""))
    return 1 if bad or aborted else 0


if __name__ == "__main__":
    sys.exit(main())
