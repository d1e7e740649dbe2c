"""fp8_compare.py - fajit's FP8 (e4m3) forward next to FlashAttention-3's FP8 forward (`flash_attn_func` of the fa3-fwd
wheel, with q_descale / k_descale / v_descale) on the same GPU, in one process: speed and error.

Grid (issue 22): B x N = 16k, H x D = 2048, N 4k and 16k, causal and not, D 64 / 128 / 256; [B, N, H, D] e4m3 inputs
(both systems' native layout), quantized per (batch, KV head) from N(0, 1) values (--outliers: head dims 3, 17, D - 5
of Q and K times 20), descale = amax / 448, as float32 [B, H]; O in bf16 from both.
TFLOP/s = 4 x B x H x D x (unmasked (query, key) pairs) / t. Timing is compare.Bench.time_systems: warm-up, settle
to each system's clocks, a spin kernel ahead of each window, CUDA events per call, 5 interleaved rounds, medians;
inputs rotate over sets spanning >= 512 MB, so no call finds them in L2.

Error: both outputs (fajit's written over NaN) against a float64 reference on the dequantized inputs over a slice
(batch 0, heads 0 and H - 1, up to 256 query rows spread over N, every key): max |err| and RMS err, and their ratios
fajit / FA3 (the issue's rule: <= 1.1). fajit also against a stated bound: rel L2 <= 3e-2 (check ok / FAIL).
--hadamard (incoherent processing): per cell, also fajit's error against float64 attention on the original float32
inputs (input rounding included) when they are quantized plainly and after fajit.fp8_quantize(hadamard=True), and the
cost of that quantization (median of 10, CUDA events) next to the attention's time.

Attention variants (--window L,R, --softcap C, --sinks, --chunk C; fajit.h's definitions): both systems get them
where they take them (FA3: window_size, softcap; a peer that refuses one is n/a with its reason; FA3 takes no sinks
or chunk here), the reference applies them, and TFLOP/s counts the (query, key) pairs the mask keeps. --plain also
times fajit without the variant in the same rounds (fajit_plain, its own pair count): what the variant costs.

Usage (GPU machine, repository root, libfajit built into ./build; FA3 from ../shared/bench/peer-wheels.sh):
    PYTHONPATH=python/src:/tmp/peers-site FAJIT_LIB=build/libfajit.so python3 bench/fp8_compare.py --out DIR
    ... --dims 128 --n 4096 --reps 30 --outliers
"""
import argparse
import math
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

DEVICE = "cuda"
TOL = 3e-2
TOKENS, WIDTH = 16384, 2048


def log(msg=""):
    print(msg, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", default="64,128,256", help="head dims (default 64,128,256)")
    p.add_argument("--n", default="4096,16384", help="sequence lengths (default 4096,16384)")
    p.add_argument("--masks", default="noncausal,causal", help="noncausal,causal (default both)")
    p.add_argument("--outliers", action="store_true", help="outlier channels in Q and K (x20 on 3 head dims)")
    p.add_argument("--hadamard", action="store_true", help="also measure incoherent processing (see above)")
    p.add_argument("--lse", action="store_true", help="also the LSE's max error of both systems over the same slice "
                   "(one more untimed call each, return_lse / FA3's softmax_lse, against float64 logsumexp)")
    p.add_argument("--out", help="directory for fp8-<gpu>.md and .json")
    p.add_argument("--window", help="a sliding window L,R (-1: unbounded side)")
    p.add_argument("--softcap", type=float, default=0.0, help="softcap c > 0")
    p.add_argument("--sinks", action="store_true", help="a float32 sink logit per head (N(0, 1) + 1)")
    p.add_argument("--chunk", type=int, default=0, help="attention_chunk")
    p.add_argument("--plain", action="store_true", help="also time fajit without the variant (fajit_plain)")
    p.add_argument("--configs", default="", help="'|'-separated config texts: fajit with each, the variant's work "
                   "(systems cfg1, cfg2, ...: tile sweeps in the same rounds)")
    compare.add_timing_options(p, reps=60, min_reps=10, warmup=10)
    a = p.parse_args(argv)
    compare.check_timing_options(p, a, min_reps=10)
    try:
        a.window = tuple(int(x) for x in a.window.split(",")) if a.window else None
        assert a.window is None or (len(a.window) == 2 and min(a.window) >= -1)
    except (ValueError, AssertionError):
        p.error(f"--window {a.window!r}: expected L,R with each >= -1")
    if a.softcap < 0 or a.chunk < 0:
        p.error("--softcap and --chunk must be >= 0")
    a.variant = bool(a.window or a.softcap or a.sinks or a.chunk)
    a.dims = [int(x) for x in a.dims.split(",") if x]
    a.n = [int(x) for x in a.n.split(",") if x]
    a.masks = [m == "causal" for m in a.masks.split(",") if m]
    return a


def load_fa3():
    """FA3's flash_attn_func (the fa3-fwd wheel's module is flash_attn_interface, older builds fa3_fwd_interface),
    its version, or (None, reason)."""
    from importlib import metadata
    errors = []
    for name in ("flash_attn_interface", "fa3_fwd_interface"):
        try:
            mod = __import__(name)
            try:
                version = metadata.version("fa3-fwd")
            except Exception:
                version = "?"
            return mod.flash_attn_func, f"{name} {version}", None
        except Exception as e:
            errors.append(f"{name}: {type(e).__name__}: {str(e)[:120]}")
    return None, None, "; ".join(errors)


class Fp8Bench(compare.Bench):
    def __init__(self, a, fajit):  # noqa: D107 - compare.Bench.__init__ sets up compare.py's grid: not called
        import torch
        self.torch, self.a, self.fajit = torch, a, fajit
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("highest")
        torch.cuda.init()
        torch.empty(1, device=DEVICE)
        self.cache = tempfile.mkdtemp(prefix="fajit-fp8-")
        os.environ["FAJIT_CACHE_DIR"], os.environ["FAJIT_CACHE"] = self.cache, "1"
        self.lib_path = str(fajit._lib.LIB_PATH)
        self.clock = compare.ClockSampler()
        self.fa3, self.fa3_version, self.fa3_error = load_fa3()

    def close(self):
        import shutil
        self.clock.close()
        shutil.rmtree(self.cache, ignore_errors=True)

    def quantize(self, x):
        """x float32 [B, N, H, D] -> (e4m3 tensor, descale float32 [B, H]): per (batch, head) amax / 448."""
        torch = self.torch
        amax = x.abs().amax(dim=(1, 3)).clamp(min=1e-12)
        ds = (amax / 448.0).float()
        q8 = (x / ds[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        return q8, ds.contiguous()

    def make_set(self, B, N, H, D):
        torch = self.torch
        out = []
        for t in range(3):
            x = torch.randn(B, N, H, D, device=DEVICE, dtype=torch.float32)
            if self.a.outliers and t < 2:
                x[..., [3, 17, D - 5]] *= 20.0
            out += list(self.quantize(x))
            del x
        q, qd, k, kd, v, vd = out
        return q, k, v, qd, kd, vd, torch.empty(B, N, H, D, device=DEVICE, dtype=torch.bfloat16)

    def reference_errors(self, outs, s, causal, lses=None):
        """{system: (max err, RMS err)} over batch 0, heads 0 and H - 1, <= 256 rows, float64 on dequantized inputs.
        lses ({system: float32 [B, H, N] natural-log LSE}): their max |LSE - LSE_fp64| over the same rows go into
        self.lse_err[system]."""
        self.lse_err = {}
        torch = self.torch
        q, k, v, qd, kd, vd, _ = s
        N, H, D = q.shape[1], q.shape[2], q.shape[3]
        rows = torch.linspace(0, N - 1, min(256, N), device=DEVICE).round().long().unique()
        errs = {name: [0.0, 0.0, 0] for name in outs}
        for h in sorted({0, H - 1}):
            qf = q[0, rows, h].double() * qd[0, h].double()
            kf = k[0, :, h].double() * kd[0, h].double()
            vf = v[0, :, h].double() * vd[0, h].double()
            sc = (qf @ kf.T) / math.sqrt(D)
            if self.a.softcap:
                sc = self.a.softcap * torch.tanh(sc / self.a.softcap)
            sc = sc.masked_fill(~self.visible(rows, N, causal), float("-inf"))
            if self.sinks is not None:
                sc = torch.cat([sc, self.sinks[h].double().expand(len(rows), 1)], dim=-1)
            ref = torch.softmax(sc, -1)
            ref = (ref[:, :-1] if self.sinks is not None else ref) @ vf
            lref = torch.logsumexp(sc, -1)
            for name, l in (lses or {}).items():
                d = (l[0, h, rows].double() - lref).abs()
                d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
                self.lse_err[name] = max(self.lse_err.get(name, 0.0), d.max().item())
            for name, o in outs.items():
                d = (o[0, rows, h].double() - ref)
                d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
                e = errs[name]
                e[0] = max(e[0], d.abs().max().item())
                e[1] += d.pow(2).sum().item()
                e[2] += d.numel()
                if name == "fajit":
                    e.append((d.pow(2).sum() / ref.pow(2).sum().clamp(min=1e-300)).sqrt().item())
        return {n: (e[0], math.sqrt(e[1] / max(e[2], 1)), (e[3] if len(e) > 3 else None)) for n, e in errs.items()}

    def visible(self, rows, N, causal):
        """[len(rows), N] bool: the keys each query row sees (fajit.h's rule, Nq = Nk)."""
        torch, a = self.torch, self.a
        j = torch.arange(N, device=rows.device)[None, :]
        i = rows[:, None]
        ok = torch.ones(len(rows), N, dtype=torch.bool, device=rows.device)
        if causal:
            ok &= j <= i
        if a.window:
            if a.window[0] >= 0:
                ok &= j >= i - a.window[0]
            if a.window[1] >= 0 and not causal:
                ok &= j <= i + a.window[1]
        if a.chunk:
            ok &= torch.div(j, a.chunk, rounding_mode="floor") == torch.div(i, a.chunk, rounding_mode="floor")
        return ok

    def pairs(self, N, causal):
        """(query, key) pairs the mask keeps, summed over the rows (in blocks of rows)."""
        torch = self.torch
        total = 0
        for r0 in range(0, N, 1024):
            rows = torch.arange(r0, min(N, r0 + 1024), device=DEVICE)
            total += int(self.visible(rows, N, causal).sum().item())
        return total

    def variant_kw(self, fa3=False):
        a, kw = self.a, {}
        if a.window:
            kw["window_size"] = a.window
        if a.softcap:
            kw["softcap"] = a.softcap
        if not fa3:
            if a.sinks:
                kw["learnable_sink"] = self.sinks
            if a.chunk:
                kw["attention_chunk"] = a.chunk
        return kw

    def case(self, N, D, causal):
        torch, fajit, a = self.torch, self.fajit, self.a
        B, H = TOKENS // N, WIDTH // D
        one = 3 * B * N * H * D
        sets = [self.make_set(B, N, H, D) for _ in range(max(2, math.ceil(compare.ROTATE_BYTES / one)))]
        self.sinks = torch.randn(H, device=DEVICE).float() + 1.0 if a.sinks else None
        kw = self.variant_kw()
        systems = {"fajit": [(lambda s=s: fajit.attention(s[0], s[1], s[2], causal=causal, layout="bnhd", out=s[6],
                                                         q_descale=s[3], k_descale=s[4], v_descale=s[5], **kw))
                             for s in sets]}
        row = dict(B=B, N=N, H=H, D=D, causal=causal, outliers=a.outliers)
        if self.fa3 is not None and not (a.sinks or a.chunk):
            f, fkw = self.fa3, self.variant_kw(fa3=True)
            systems["fa3"] = [(lambda s=s: f(s[0], s[1], s[2], causal=causal, q_descale=s[3], k_descale=s[4],
                                             v_descale=s[5], **fkw)) for s in sets]
        else:
            row["fa3_error"] = self.fa3_error or "FA3 takes no sinks / attention_chunk here"
        work = 4.0 * B * H * D * (self.pairs(N, causal) if a.variant else (N * (N + 1) // 2 if causal else N * N))
        ok, outs = {}, {}
        s0 = sets[0]
        for name, calls in systems.items():
            try:
                if name == "fajit":
                    s0[6].fill_(float("nan"))
                r = calls[0]()
                torch.cuda.synchronize()
                if name == "fajit":  # where its kernel came from at the first call (prebuilt, disk, compiled, ...)
                    row["fajit_source"] = fajit.last_forward_source()
                outs[name] = s0[6] if name == "fajit" else (r[0] if isinstance(r, (tuple, list)) else r)
                ok[name] = (calls, __import__("contextlib").nullcontext)
            except Exception as e:
                if not self.alive():
                    raise
                row[name + "_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                log(f"  {name} n/a: {row[name + '_error']}")
        lses = {}
        if a.lse and outs:
            try:
                lses["fajit"] = fajit.attention(s0[0], s0[1], s0[2], causal=causal, layout="bnhd", return_lse=True,
                                                q_descale=s0[3], k_descale=s0[4], v_descale=s0[5], **kw)[1]
                if "fa3" in outs:  # flash_attn_func returns (out, softmax_lse [B, H, N]) with return_attn_probs
                    r = self.fa3(s0[0], s0[1], s0[2], causal=causal, q_descale=s0[3], k_descale=s0[4],
                                 v_descale=s0[5], return_attn_probs=True, **self.variant_kw(fa3=True))
                    if isinstance(r, (tuple, list)) and len(r) > 1:
                        lses["fa3"] = r[1]
                torch.cuda.synchronize()
            except Exception as e:
                if not self.alive():
                    raise
                row["lse_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if outs:
            for name, (mx, rms, rel) in self.reference_errors(outs, s0, causal, lses).items():
                row[name + "_max_err"], row[name + "_rms_err"] = mx, rms
                if rel is not None:
                    row["fajit_rel_l2"] = rel
            for name, e in self.lse_err.items():
                row[name + "_lse_err"] = e
            if "fajit" in outs:
                row["kernel"] = fajit.last_forward()
                row["check"] = "ok" if row.get("fajit_rel_l2", math.inf) <= TOL else "FAIL"
            del outs
        for i, text in enumerate(x for x in a.configs.split("|") if x.strip()):
            ok[f"cfg{i + 1}"] = ([(lambda s=s, t=text.strip(): fajit.attention(
                s[0], s[1], s[2], causal=causal, layout="bnhd", out=s[6], q_descale=s[3], k_descale=s[4],
                v_descale=s[5], config=t, **kw)) for s in sets], __import__("contextlib").nullcontext)
            row[f"cfg{i + 1}"] = text.strip()
            ok[f"cfg{i + 1}"][0][0]()  # its first call: where its kernel came from
            torch.cuda.synchronize()
            row[f"cfg{i + 1}_source"] = fajit.last_forward_source()
        if a.plain and a.variant:
            ok["fajit_plain"] = ([(lambda s=s: fajit.attention(s[0], s[1], s[2], causal=causal, layout="bnhd",
                                                              out=s[6], q_descale=s[3], k_descale=s[4],
                                                              v_descale=s[5])) for s in sets],
                                 __import__("contextlib").nullcontext)
        self.time_systems(ok, row)
        plain_work = 4.0 * B * H * D * (N * (N + 1) // 2 if causal else N * N)
        for name in ok:  # the timed systems (the compared ones, then cfg1.. and fajit_plain)
            if name + "_ms" in row:
                row[name + "_tflops"] = (plain_work if name == "fajit_plain" else work) / row[name + "_ms"] / 1e9
        row.pop("times", None)
        if a.hadamard:
            self.hadamard_errors(B, N, H, D, causal, row)
        log("  " + "  ".join(f"{s} {row[s + '_ms']:.3f} ms {row[s + '_tflops']:.0f} TFLOP/s" for s in ok
                             if s + "_ms" in row) +
            "  err max/RMS " + "  ".join(f"{s} {row.get(s + '_max_err', math.nan):.2e}/{row.get(s + '_rms_err', math.nan):.2e}"
                                          for s in systems) + f"  check {row.get('check', '-')}" +
            ("  LSE max err " + "  ".join(f"{s} {row.get(s + '_lse_err', math.nan):.2e}" for s in systems)
             if a.lse else "") +
            f"\n  fajit kernel: {row.get('kernel', '-')} (first call: {row.get('fajit_source', '-')})" +
            "".join(f"; {key[:-len('_source')]} first call: {src}" for key, src in row.items()
                    if key.startswith("cfg") and key.endswith("_source")))
        del sets
        torch.cuda.empty_cache()
        return row


    def hadamard_errors(self, B, N, H, D, causal, row):
        """Incoherent processing on one set: fajit's max / RMS error against float64 attention on the original inputs,
        quantized plainly and with the Hadamard rotation; the quantization's time (ms, median of 10) both ways."""
        torch, fajit = self.torch, self.fajit
        x = [torch.randn(B, N, H, D, device=DEVICE, dtype=torch.float32) for _ in range(3)]
        if self.a.outliers:
            for t in x[:2]:
                t[..., [3, 17, D - 5]] *= 20.0
        rows = torch.linspace(0, N - 1, min(256, N), device=DEVICE).round().long().unique()
        refs = {}
        for h in sorted({0, H - 1}):
            sc = (x[0][0, rows, h].double() @ x[1][0, :, h].double().T) / math.sqrt(D)
            if causal:
                sc = sc.masked_fill(torch.arange(N, device=DEVICE)[None, :] > rows[:, None], float("-inf"))
            refs[h] = torch.softmax(sc, -1) @ x[2][0, :, h].double()
        for had in (False, True):
            tag = "had" if had else "plain"
            q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(x[0], x[1], x[2], layout="bnhd", hadamard=had)
            o = fajit.attention(q8, k8, v8, causal=causal, layout="bnhd", q_descale=qd, k_descale=kd, v_descale=vd)
            torch.cuda.synchronize()
            mx = ss = cnt = 0
            for h, ref in refs.items():
                d = o[0, rows, h].double() - ref
                mx, ss, cnt = max(mx, d.abs().max().item()), ss + d.pow(2).sum().item(), cnt + d.numel()
            row[f"{tag}_orig_max_err"], row[f"{tag}_orig_rms_err"] = mx, math.sqrt(ss / cnt)
            ts = []
            for _ in range(10):
                s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s0.record()
                fajit.fp8_quantize(x[0], x[1], x[2], layout="bnhd", hadamard=had)
                s1.record()
                torch.cuda.synchronize()
                ts.append(s0.elapsed_time(s1))
            row[f"{tag}_quantize_ms"] = statistics.median(ts)
        log(f"  incoherent processing: error vs the original inputs max/RMS plain {row['plain_orig_max_err']:.2e}/"
            f"{row['plain_orig_rms_err']:.2e}, hadamard {row['had_orig_max_err']:.2e}/{row['had_orig_rms_err']:.2e}; "
            f"quantize {row['plain_quantize_ms']:.3f} ms, with hadamard {row['had_quantize_ms']:.3f} ms")


def markdown(env, rows):
    def fmt(x, f="{:.0f}"):
        return f.format(x) if isinstance(x, (int, float)) and x == x else "n/a"
    lines = ["# fajit FP8 (e4m3) forward vs FlashAttention-3 FP8", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "| D | N | mask | fajit TFLOP/s | FA3 | fajit / FA3 | max err fajit / FA3 | RMS err fajit / FA3 | "
              "check |", "|---|---|---|---|---|---|---|---|---|"]
    speed = []
    for r in rows:
        f, p = r.get("fajit_tflops"), r.get("fa3_tflops")
        ratio = f / p if f and p else None
        if ratio:
            speed.append(ratio)
        emax = r["fajit_max_err"] / r["fa3_max_err"] if r.get("fa3_max_err") else None
        erms = r["fajit_rms_err"] / r["fa3_rms_err"] if r.get("fa3_rms_err") else None
        if r.get("fajit_plain_tflops"):
            r["check"] = f"{r.get('check', '-')}; plain {r['fajit_plain_tflops']:.0f}"
        lines.append(f"| {r['D']} | {r['N']} | {'causal' if r['causal'] else 'noncausal'} | {fmt(f)} | {fmt(p)} | "
                     f"{fmt(ratio, '{:.3f}')} | {fmt(r.get('fajit_max_err'), '{:.2e}')} / "
                     f"{fmt(r.get('fa3_max_err'), '{:.2e}')} ({fmt(emax, '{:.2f}')}x) | "
                     f"{fmt(r.get('fajit_rms_err'), '{:.2e}')} / {fmt(r.get('fa3_rms_err'), '{:.2e}')} "
                     f"({fmt(erms, '{:.2f}')}x) | {r.get('check', '-')} |")
    if speed:
        g = math.exp(statistics.mean(math.log(x) for x in speed))
        lines += ["", f"geometric mean fajit / FA3: {g:.3f} over {len(speed)} cells; lowest {min(speed):.3f}"]
    had = [r for r in rows if "had_orig_rms_err" in r]
    if had:
        lines += ["", "Incoherent processing (fajit's error against float64 on the original float32 inputs):", "",
                  "| D | N | mask | max err plain / hadamard | RMS err plain / hadamard | quantize ms plain / hadamard | "
                  "fajit ms |", "|---|---|---|---|---|---|---|"]
        for r in had:
            lines.append(f"| {r['D']} | {r['N']} | {'causal' if r['causal'] else 'noncausal'} | "
                         f"{r['plain_orig_max_err']:.2e} / {r['had_orig_max_err']:.2e} | "
                         f"{r['plain_orig_rms_err']:.2e} / {r['had_orig_rms_err']:.2e} | "
                         f"{r['plain_quantize_ms']:.3f} / {r['had_quantize_ms']:.3f} | {fmt(r.get('fajit_ms'), '{:.3f}')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        log("fp8_compare.py: needs torch with a CUDA GPU")
        return 1
    fajit = compare.load_fajit(a.lib)
    bench = Fp8Bench(a, fajit)
    env = compare.peer_env(torch, fajit, argv, fa3=bench.fa3_version or f"not loaded ({bench.fa3_error})",
                           outliers=a.outliers)
    if a.variant:
        env["variant"] = ", ".join(f"{k}={v}" for k, v in (("window", a.window), ("softcap", a.softcap),
                                                          ("sinks", a.sinks), ("chunk", a.chunk)) if v)
    rows, bad = [], 0
    for D in a.dims:
        for N in a.n:
            for causal in a.masks:
                log(f"== D{D} N{N} {'causal' if causal else 'noncausal'}")
                r = compare.run_guarded(bench, f"D{D} N{N}", lambda: bench.case(N, D, causal))
                if r is None:
                    bad += 1
                    continue
                rows.append(r)
                bad += r.get("check") == "FAIL"
    bench.close()
    text = markdown(env, rows)
    print(text)
    compare.write_report(a.out, "fp8", env, rows, text, "-outliers" if a.outliers else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
