"""variants_compare.py - fajit's attention variants (sliding window, softcap, sinks, ALiBi, chunked, varlen) next to
FlashAttention-3 (`fa3_fwd_interface`) and FlashAttention-4 (`flash_attn.cute`) on the same GPU, in one process.

The cases are the ones the variants issue is judged by (BF16, [B, N, H, D] inputs, the peers' native layout):
  window     sliding window (4096, 0) causal, B1 H16 N32k D128               fajit vs FA4 (and FA3 if its wheel has it)
  softcap    softcap 50 causal B2 N8k: D128 H16 and D256 H8                   fajit vs FA3, FA4
  sinks      learnable sinks, causal, B1 D64 Hq64/Hkv8 N8k                    fajit vs FA4 and fajit without sinks
  sinkwin    sinks + window (128, 0), same shape                              fajit vs FA4
  varlen     24 documents of 200-6000 tokens (T ~ 68k), D128 Hq32/Hkv8 causal fajit vs FA3, FA4
  alibi      ALiBi causal B2 H16 N8k D128                                     fajit vs plain causal fajit
  chunk      attention_chunk 8192 causal B1 H16 N32k D128                     fajit vs plain causal fajit over the same
                                                                              unmasked work (B4 N8k causal)
TFLOP/s = 4 * H * D * (unmasked (query, key) pairs) / t, summed over batches and documents (exact counts, so
causal is about half of 4 * B * H * N^2 * D). Timing is compare.Bench.time_systems: warm-up, settle to each
system's own clocks, a spin kernel ahead of each window, CUDA events per call, 5 interleaved rounds, medians; inputs
rotate over sets spanning >= 512 MB so no call finds them in L2.

Check: fajit's output (written over NaN) against a float32 torch reference on a slice (batch 0, heads 0 and H-1,
up to 256 query rows spread over N, every key, the variant applied explicitly), relative L2 <= 2e-2 (bf16); and
against each peer's output over the whole tensor (reported, not judged).

Usage (GPU machine, repository root, libfajit built into ./build; peers from ../shared/bench/peer-wheels.sh):
    PYTHONPATH=python/src:/tmp/peers-site FAJIT_LIB=build/libfajit.so python3 bench/variants_compare.py --out DIR
    ... --cases window,softcap --reps 50
"""
import argparse
import contextlib
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

DEVICE = "cuda"
TOL = 2e-2
CASES = ["window", "softcap", "sinks", "sinkwin", "varlen", "alibi", "chunk"]


def log(msg=""):
    print(msg, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    p.add_argument("--out", help="directory for variants-<gpu>.md and .json")
    compare.add_timing_options(p, reps=60, min_reps=10, warmup=10)
    a = p.parse_args(argv)
    compare.check_timing_options(p, a, min_reps=10)
    a.cases = [c for c in a.cases.split(",") if c]
    for c in a.cases:
        if c not in CASES:
            p.error(f"--cases: {c!r} is not one of {', '.join(CASES)}")
    return a


def doc_lengths(n_docs=24, lo=200, hi=6000, total=68000, seed=0):
    """n_docs lengths in [lo, hi] summing to about total (deterministic)."""
    import random
    rnd = random.Random(seed)
    lens = [rnd.randint(lo, hi) for _ in range(n_docs)]
    scale = total / sum(lens)
    return [max(lo, min(hi, int(x * scale))) for x in lens]


def visible(nq, nk, causal, window=None, chunk=0):
    """Number of unmasked (query, key) pairs, bottom-right aligned (FlashAttention-3's definitions)."""
    total = 0
    left, right = window if window else (-1, -1)
    if causal:
        right = 0 if right < 0 else min(right, 0)
    for i in range(nq):
        d = i + nk - nq
        lo = 0 if left < 0 else max(0, d - left)
        hi = nk - 1 if right < 0 else min(nk - 1, d + right)
        if chunk > 0:
            c0 = (max(d, 0) // chunk) * chunk
            lo, hi = max(lo, c0), min(hi, c0 + chunk - 1)
        total += max(0, hi - lo + 1)
    return total


class VariantBench(compare.Bench):
    def __init__(self, a, fajit):  # noqa: D107 - compare.Bench.__init__ sets up compare.py's grid: not called
        import torch
        self.torch, self.a, self.fajit = torch, a, fajit
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("highest")
        torch.cuda.init()
        torch.empty(1, device=DEVICE)
        self.cache = tempfile.mkdtemp(prefix="fajit-variants-")
        os.environ["FAJIT_CACHE_DIR"], os.environ["FAJIT_CACHE"] = self.cache, "1"
        self.lib_path = str(fajit._lib.LIB_PATH)
        self.clock = compare.ClockSampler()
        self.hopper, self.hopper_error, self.hopper_version = {}, {}, {}
        self.load_hopper_peers()
        self.varlen = {}
        try:
            import fa3_fwd_interface
            self.varlen["fa3"] = fa3_fwd_interface.flash_attn_varlen_func
        except Exception:
            pass
        try:
            from flash_attn.cute import flash_attn_varlen_func
            self.varlen["fa4"] = flash_attn_varlen_func
        except Exception:
            pass

    def close(self):
        import shutil
        self.clock.close()
        shutil.rmtree(self.cache, ignore_errors=True)

    def sets(self, shape_q, shape_kv, dtype):
        torch = self.torch
        one = 2 * (2 * math.prod(shape_q) + 2 * math.prod(shape_kv))
        count = max(2, math.ceil(compare.ROTATE_BYTES / one))
        out = []
        for _ in range(count):
            q = torch.randn(*shape_q, device=DEVICE, dtype=dtype)
            k = torch.randn(*shape_kv, device=DEVICE, dtype=dtype)
            v = torch.randn(*shape_kv, device=DEVICE, dtype=dtype)
            out.append((q, k, v, torch.empty_like(q)))
        return out

    # float32 reference of one (batch, head) slice, variant applied explicitly
    def reference(self, q, k, v, rows, causal, window, softcap, sink, slope, chunk):
        torch = self.torch
        nq, nk = q.shape[0], k.shape[0]
        s = (q[rows].float() @ k.float().T) / math.sqrt(q.shape[-1])
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        i = rows[:, None].to(torch.int64) + (nk - nq)
        j = torch.arange(nk, device=DEVICE)[None, :]
        if slope is not None:
            s = s - slope * (i - j).abs().float()
        ok = torch.ones_like(s, dtype=torch.bool)
        left, right = window if window else (-1, -1)
        if causal:
            right = 0 if right < 0 else min(right, 0)
        if left >= 0:
            ok &= j >= i - left
        if right >= 0:
            ok &= j <= i + right
        if chunk:
            c0 = (i.clamp(min=0) // chunk) * chunk
            ok &= (j >= c0) & (j < c0 + chunk)
        s = s.masked_fill(~ok, float("-inf"))
        if sink is not None:
            s = torch.cat([s, torch.full((s.shape[0], 1), float(sink), device=DEVICE)], 1)
        p = torch.softmax(s, -1).nan_to_num(0.0)
        if sink is not None:
            p = p[:, :-1]
        return p @ v.float()

    def check_slice(self, out, q, k, v, hq, hkv, **var):
        """rel L2 of out against the reference, over batch 0, heads 0 and hq - 1 ([B, N, H, D] tensors)."""
        torch = self.torch
        n = q.shape[1]
        rows = torch.linspace(0, n - 1, min(256, n), device=DEVICE).round().long().unique()
        num = den = 0.0
        for h in sorted({0, hq - 1}):
            kvh = h // (hq // hkv)
            sink = var.get("sinks")
            slopes = var.get("alibi")
            ref = self.reference(q[0, :, h], k[0, :, kvh], v[0, :, kvh], rows, var.get("causal", False),
                                 var.get("window"), var.get("softcap", 0.0),
                                 None if sink is None else sink[h].item(),
                                 None if slopes is None else slopes[h].item(), var.get("chunk", 0))
            got = out[0, rows, h].float()
            num += (got - ref).pow(2).sum().item()
            den += ref.pow(2).sum().item()
        return math.sqrt(num / max(den, 1e-30))

    def run_case(self, name, systems, work, row, check=None):
        """systems: {sys: [call per set]}; work: FLOPs; check: () -> rel L2 of fajit's output."""
        null = contextlib.nullcontext
        ok = {}
        for s, calls in systems.items():
            try:
                calls[0]()
                self.torch.cuda.synchronize()
                ok[s] = (calls, null)
            except Exception as e:
                if not self.alive():
                    raise
                import traceback
                where = traceback.extract_tb(e.__traceback__)[-1]
                row[s + "_error"] = f"{type(e).__name__}: {str(e)[:200]} (at {where.filename}:{where.lineno})"
                log(f"  {s} n/a: {row[s + '_error']}")
        if check is not None and "fajit" in ok:
            row["err_ref"] = check()
            row["kernel"] = self.fajit.last_forward()
            row["check"] = "ok" if row["err_ref"] <= TOL else "FAIL"
        self.time_systems(ok, row)
        for s in systems:
            if s + "_ms" in row:
                row[s + "_tflops"] = work / row[s + "_ms"] / 1e9
        log("  " + "  ".join(f"{s} {row[s + '_ms']:.3f} ms {row[s + '_tflops']:.0f}" for s in systems
                             if s + "_ms" in row) + f"  check {row.get('check', '-')} err {row.get('err_ref', 0):.2e}"
            f"\n  fajit kernel: {row.get('kernel', '-')}")
        return row

    # ---- cases
    def dense_case(self, name, B, Hq, Hkv, N, D, causal=True, window=None, softcap=0.0, sinks=False, alibi=False,
                   chunk=0, peers=("fa3", "fa4"), plain_same=False, plain_shape=None):
        torch, fajit = self.torch, self.fajit
        sets = self.sets((B, N, Hq, D), (B, N, Hkv, D), torch.bfloat16)
        sink_t = (torch.randn(Hq, device=DEVICE, dtype=torch.float32) * 2) if sinks else None
        slopes = torch.tensor([2 ** (-8 * (h + 1) / Hq) for h in range(Hq)], device=DEVICE) if alibi else None
        kw = {}
        if window:
            kw["window_size"] = window
        if softcap:
            kw["softcap"] = softcap
        if sinks:
            kw["learnable_sink"] = sink_t
        if alibi:
            kw["alibi_slopes"] = slopes
        if chunk:
            kw["attention_chunk"] = chunk
        systems = {"fajit": [(lambda s=s: fajit.attention(s[0], s[1], s[2], causal=causal, layout="bnhd", out=s[3],
                                                         **kw)) for s in sets]}
        for p in peers:
            f = self.hopper.get(p)
            if f is None:
                continue
            pk = {k2: v2 for k2, v2 in kw.items() if not (p == "fa3" and k2 == "learnable_sink")}
            systems[p] = [(lambda s=s, f=f, pk=pk: f(s[0], s[1], s[2], causal=causal, **pk)) for s in sets]
        if plain_same:
            systems["fajit_plain"] = [(lambda s=s: fajit.attention(s[0], s[1], s[2], causal=causal, layout="bnhd",
                                                                   out=s[3])) for s in sets]
        if plain_shape:
            pb, pn = plain_shape
            psets = self.sets((pb, pn, Hq, D), (pb, pn, Hkv, D), torch.bfloat16)[:2]
            systems["fajit_plain_same_work"] = [(lambda s=s: fajit.attention(s[0], s[1], s[2], causal=causal,
                                                                              layout="bnhd", out=s[3])) for s in psets]
        work = 4.0 * B * Hq * D * visible(N, N, causal, window, chunk)
        row = dict(case=name, B=B, Hq=Hq, Hkv=Hkv, N=N, D=D, causal=causal, window=window, softcap=softcap,
                   sinks=sinks, alibi=alibi, chunk=chunk, gflop=work / 1e9)
        q, k, v, o = sets[0]

        def check():
            o.fill_(float("nan"))
            systems["fajit"][0]()
            torch.cuda.synchronize()
            return self.check_slice(o, q, k, v, Hq, Hkv, causal=causal, window=window, softcap=softcap,
                                    sinks=sink_t, alibi=slopes, chunk=chunk)
        row = self.run_case(name, systems, work, row, check)
        if plain_shape:
            pb, pn = plain_shape
            pw = 4.0 * pb * Hq * D * visible(pn, pn, causal)
            ms = row.get("fajit_plain_same_work_ms")
            if ms:
                row["fajit_plain_same_work_tflops"] = pw / ms / 1e9
        return row

    def varlen_case(self):
        torch, fajit = self.torch, self.fajit
        lens = doc_lengths()
        T, Hq, Hkv, D = sum(lens), 32, 8, 128
        cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), device=DEVICE, dtype=torch.int32)
        mx = max(lens)
        sets = self.sets((T, Hq, D), (T, Hkv, D), torch.bfloat16)
        systems = {"fajit": [(lambda s=s: fajit.varlen_attention(s[0], s[1], s[2], cu, cu, mx, mx, causal=True,
                                                                out=s[3])) for s in sets]}
        if "fa3" in self.varlen:
            f = self.varlen["fa3"]
            systems["fa3"] = [(lambda s=s: f(s[0], s[1], s[2], cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=mx,
                                             max_seqlen_k=mx, causal=True)) for s in sets]
        if "fa4" in self.varlen:
            f = self.varlen["fa4"]
            systems["fa4"] = [(lambda s=s: f(s[0], s[1], s[2], cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=mx,
                                             max_seqlen_k=mx, causal=True)) for s in sets]
        work = 4.0 * Hq * D * sum(L * (L + 1) // 2 for L in lens)
        row = dict(case="varlen", docs=len(lens), T=T, Hq=Hq, Hkv=Hkv, D=D, causal=True, gflop=work / 1e9)
        q, k, v, o = sets[0]

        def check():
            o.fill_(float("nan"))
            systems["fajit"][0]()
            torch.cuda.synchronize()
            num = den = 0.0
            for b in (0, len(lens) // 2, len(lens) - 1):
                a0, a1 = cu[b].item(), cu[b + 1].item()
                err = self.check_slice(o[None, a0:a1], q[None, a0:a1], k[None, a0:a1], v[None, a0:a1], Hq, Hkv,
                                       causal=True)
                num, den = num + err ** 2, den + 1
            return math.sqrt(num / den)
        return self.run_case("varlen", systems, work, row, check)


def markdown(env, rows):
    lines = ["# fajit attention variants vs FlashAttention-3 / -4", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "| case | shape | fajit TFLOP/s | FA3 | FA4 | fajit plain | fajit/best peer | check |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        peers = [r.get(p + "_tflops") for p in ("fa3", "fa4") if r.get(p + "_tflops")]
        plain = r.get("fajit_plain_tflops") or r.get("fajit_plain_same_work_tflops")
        f = r.get("fajit_tflops")
        ratio = f / max(peers) if f and peers else (f / plain if f and plain else None)
        shape = (f"T{r['T']} ({r['docs']} docs)" if r["case"] == "varlen" else f"B{r['B']} N{r['N']}") + \
            f" Hq{r['Hq']}/{r['Hkv']} D{r['D']}"

        def fmt(x):
            return f"{x:.0f}" if x else "n/a"
        lines.append(f"| {r['case']} | {shape} | {fmt(f)} | {fmt(r.get('fa3_tflops'))} | {fmt(r.get('fa4_tflops'))} | "
                     f"{fmt(plain)} | {ratio:.3f}{'' if peers else ' (vs plain)'} | {r.get('check', '-')} "
                     f"{r.get('err_ref', 0):.1e} |" if ratio else
                     f"| {r['case']} | {shape} | {fmt(f)} | {fmt(r.get('fa3_tflops'))} | {fmt(r.get('fa4_tflops'))} | "
                     f"{fmt(plain)} | - | {r.get('check', '-')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        log("variants_compare.py: needs torch with a CUDA GPU")
        return 1
    fajit = compare.load_fajit(a.lib)
    bench = VariantBench(a, fajit)
    env = compare.peer_env(torch, fajit, argv,
                           peers=", ".join(f"{k} {v}" for k, v in bench.hopper_version.items()))
    rows = []
    cases = {
        "window": lambda: bench.dense_case("window", 1, 16, 16, 32768, 128, window=(4096, 0)),
        "softcap": lambda: [bench.dense_case("softcap", 2, 16, 16, 8192, 128, softcap=50.0),
                            bench.dense_case("softcap", 2, 8, 8, 8192, 256, softcap=50.0)],
        "sinks": lambda: bench.dense_case("sinks", 1, 64, 8, 8192, 64, sinks=True, peers=("fa4",), plain_same=True),
        "sinkwin": lambda: bench.dense_case("sinkwin", 1, 64, 8, 8192, 64, sinks=True, window=(128, 0),
                                            peers=("fa4",)),
        "varlen": bench.varlen_case,
        "alibi": lambda: bench.dense_case("alibi", 2, 16, 16, 8192, 128, alibi=True, peers=(), plain_same=True),
        "chunk": lambda: bench.dense_case("chunk", 1, 16, 16, 32768, 128, chunk=8192, peers=(),
                                          plain_shape=(4, 8192)),
    }
    bad = 0
    for c in a.cases:
        log(f"== {c}")
        r = compare.run_guarded(bench, c, cases[c])
        if r is None:
            bad += 1
            continue
        for x in (r if isinstance(r, list) else [r]):
            x.pop("times", None)
            rows.append(x)
            bad += x.get("check") == "FAIL"
    bench.close()
    text = markdown(env, rows)
    print(text)
    compare.write_report(a.out, "variants", env, rows, text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
