#!/usr/bin/env python3
"""kv8_compare.py - FP8 (e4m3) K/V-cache decode side by side: fajit BF16, fajit FP8 K/V, FA3 BF16 and FA3 FP8
kvcache on the decode table's rows (Nq 1, D128; decode_compare.py's ROWS), one process, one GPU.

  PYTHONPATH=build/py-gpu:/tmp/peers-site python3 bench/kv8_compare.py [--rows 1,2,3,4,5] [--config TEXT] [--reps N]
      [--fp8-splits 4,8,16] [--q8-configs "TEXT|TEXT"] [--q8-splits 8,16]

Inputs, the float32 reference, the timing (compare.Bench.time_systems: CUDA events, warm-up, settle, 5 interleaved
rounds, medians) and FA3's loading are decode_compare.py's DecodeBench; this file only adds the FP8 calls:
  fajit FP8   fajit.attention(q bf16, k / v torch.float8_e4m3fn, k_descale / v_descale float32 [B, Hkv]), config=
              --config when given (a canonical text such as "sm_80 bf16,kv=e4m3 d128 br16 bc32 s4 sw128 w2 cw2"),
              else the library's choice (the br16 / br32 warp-pair tile by rows with kv8direct at D 64/128/256);
              $FAJIT_KV8_WIDEN / $FAJIT_KV8_DIRECT are read by the library as usual (FAJIT_KV8_DIRECT=0: the widening)
  FA3 FP8     flash_attn_with_kvcache(q, k_cache, v_cache all float8_e4m3fn, q_descale / k_descale / v_descale
              [B, Hkv], num_splits=0): FA3's FP8 path takes e4m3 Q too (its anchors in the notes are all-FP8); Q's
              descale is one per (batch, KV head), over the group's query heads
  fajit FP8 Q  fajit.attention(q, k, v all float8_e4m3fn, the same q_descale / k_descale / v_descale as FA3 FP8): the
              sm_90a FP8 kernel's decode variant (wgmma e4m3, TMA), the library's choice, or each config of
              --q8-configs ('|'-separated canonical texts; an empty item is the library's choice), one line each;
              --q8-splits S,...: also with num_splits = S
K / V are quantized per (batch, KV head) with descale = amax / 448; Q for FA3 FP8 likewise. Both FP8 outputs are
checked against the float32 reference on the dequantized K / V (and Q for FA3); the BF16 ones on the BF16 inputs.
--fp8-splits S,...: fajit FP8 also with num_splits = S (each timed in the same interleaved rounds, one more line per
row: ms and the ratio to fajit BF16), to see the split heuristic's choice against its neighbours.
Prints one line per row: the four medians (ms), fajit FP8 / fajit BF16 (issue 22's target <= 0.60) and fajit FP8 /
FA3 FP8 (target < 1.00), and each system's relative L2 error. Exit 1 when a fajit output fails its tolerance.
"""
import argparse
import contextlib
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import decode_compare as dc  # noqa: E402
from compare_report import log  # noqa: E402

SYSTEMS = ("fajit_bf16", "fajit_fp8", "fa3_bf16", "fa3_fp8", "fajit_q8")
# relative L2 against the reference of the inputs each one read (e4m3 Q: FA3 FP8's inputs; both show 2.5e-2 on the
# decode rows, H200, session 20: Q's rounding and P in e4m3)
TOL = {"fajit_bf16": 2e-2, "fajit_fp8": 2e-2, "fajit_q8": 4e-2}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", help="fajit FP8's config text (default: the library's choice)")
    p.add_argument("--rows", default="1,2,3,4,5", help="decode_compare.py's ROWS, 1-based (default all five)")
    p.add_argument("--fp8-splits", default="", help="also time fajit FP8 at these num_splits (comma list, >= 1)")
    p.add_argument("--q8-configs", default="", help="fajit FP8 Q: configs to time ('|'-separated; '' = the library's)")
    p.add_argument("--q8-splits", default="", help="also time fajit FP8 Q at these num_splits (comma list, >= 1)")
    mine, rest = p.parse_known_args(argv)
    lists = {}
    for flag in ("fp8_splits", "q8_splits"):
        text = getattr(mine, flag)
        try:
            lists[flag] = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            p.error(f"--{flag.replace('_', '-')} {text!r}: expected a comma list of integers >= 1")
        if any(x < 1 for x in lists[flag]):
            p.error(f"--{flag.replace('_', '-')} {text!r}: each value must be >= 1")
    splits = lists["fp8_splits"]
    a = dc.parse_args(["--rows", mine.rows, "--nq", "1", "--dtypes", "bf16", "--paged-rows", "none"] + rest)
    a.config = mine.config
    a.fp8_splits = splits
    a.q8_splits = lists["q8_splits"]
    a.q8_configs = [c.strip() or None for c in mine.q8_configs.split("|")] if mine.q8_configs else [None]
    return a


def extra_systems(a):
    """The timed systems past SYSTEMS: (name, reference key) of each --fp8-splits, --q8-configs (beyond the first,
    which is fajit_q8) and --q8-splits line."""
    out = [(f"fajit_fp8_s{sp}", "fp8") for sp in a.fp8_splits]
    out += [(f"fajit_q8_c{i}", "fa3_fp8") for i in range(1, len(a.q8_configs))]
    return out + [(f"fajit_q8_s{sp}", "fa3_fp8") for sp in a.q8_splits]


class Kv8Bench(dc.DecodeBench):
    def quantize(self, x, hkv=None):
        """x [B, N, H, D] -> (e4m3 tensor, float32 [B, Hkv] descale = amax / 448 per (batch, KV head), dequantized x).
        Hkv = H for K / V; for Q (hkv given) one descale per KV head's group of query heads, as FA3 takes q_descale
        ([B, Hkv]: flash_attn_with_kvcache's q_descale shape is (batch, num_heads_k))."""
        torch = self.torch
        b, n, h, d = x.shape
        g = h // (hkv or h)
        xf = x.float().view(b, n, h // g, g, d)
        ds = xf.abs().amax(dim=(1, 3, 4)).clamp(min=1e-12) / 448.0
        x8 = (xf / ds[:, None, :, None, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        deq = (x8.float() * ds[:, None, :, None, None]).view(b, n, h, d).to(x.dtype)
        return x8.view(b, n, h, d), ds.contiguous(), deq

    def measure(self, s):
        torch, fajit, a = self.torch, self.fajit, self.a
        row = dict(s)
        lens = dc.seq_lens(s)
        row["gbytes"] = dc.kv_bytes(s, lens) / 1e9
        kvs = self.kv_sets(s)
        sets = []  # (q, k, v, o, q8, qd, k8, kd, v8, vd, kq, vq, qq): the BF16 and the FP8 inputs of one set
        for k, v in kvs:
            q = torch.randn(s["B"], s["Nq"], s["Hq"], s["D"], device=dc.DEVICE, dtype=torch.bfloat16)
            q8, qd, qq = self.quantize(q, s["Hkv"])
            k8, kd, kq = self.quantize(k)
            v8, vd, vq = self.quantize(v)
            sets.append((q, k, v, torch.empty_like(q), q8, qd, k8, kd, v8, vd, kq, vq, qq))
        del kvs
        cfg = a.config
        calls = {
            "fajit_bf16": [lambda t=t: fajit.attention(t[0], t[1], t[2], layout="bnhd", out=t[3]) for t in sets],
            "fajit_fp8": [lambda t=t: fajit.attention(t[0], t[6], t[8], layout="bnhd", out=t[3], config=cfg,
                                                      k_descale=t[7], v_descale=t[9]) for t in sets],
        }
        for sp in a.fp8_splits:
            calls[f"fajit_fp8_s{sp}"] = [lambda t=t, sp=sp: fajit.attention(
                t[0], t[6], t[8], layout="bnhd", out=t[3], config=cfg, k_descale=t[7], v_descale=t[9], num_splits=sp)
                for t in sets]
        q8 = lambda t, cfg=None, sp=0: fajit.attention(t[4], t[6], t[8], layout="bnhd", out=t[3], config=cfg,
                                                       q_descale=t[5], k_descale=t[7], v_descale=t[9], num_splits=sp)
        for i, qc in enumerate(a.q8_configs):
            calls["fajit_q8" if i == 0 else f"fajit_q8_c{i}"] = [lambda t=t, qc=qc: q8(t, qc) for t in sets]
        for sp in a.q8_splits:
            calls[f"fajit_q8_s{sp}"] = [lambda t=t, sp=sp: q8(t, a.q8_configs[0], sp) for t in sets]
        why = self.fa3_refusal(s)
        if not why and self.fa3_flags.get("FLASHATTENTION_DISABLE_FP8"):
            why = "n/a: this fa3-fwd wheel is built without FP8 (FLASHATTENTION_DISABLE_FP8, fa3_fwd_config)"
        for name in ("fa3_bf16", "fa3_fp8"):
            calls[name] = why
        if not why:
            kvc = self.fa3.flash_attn_with_kvcache
            calls["fa3_bf16"] = [lambda t=t: dc._first(kvc(t[0], t[1], t[2], num_splits=0)) for t in sets]
            calls["fa3_fp8"] = [lambda t=t: dc._first(kvc(t[4], t[6], t[8], num_splits=0, q_descale=t[5],
                                                          k_descale=t[7], v_descale=t[9])) for t in sets]
        t0 = sets[0]
        with torch.inference_mode():
            refs = {"bf16": self.reference(s, t0[0], t0[1], t0[2], lens),
                    "fp8": self.reference(s, t0[0], t0[10], t0[11], lens),
                    "fa3_fp8": self.reference(s, t0[12], t0[10], t0[11], lens)}
            ref_of = {"fajit_bf16": "bf16", "fa3_bf16": "bf16", "fajit_fp8": "fp8", "fa3_fp8": "fa3_fp8",
                      "fajit_q8": "fa3_fp8"}
            ref_of.update(dict(extra_systems(a)))
            timed = {}
            for name in SYSTEMS + tuple(n for n, _ in extra_systems(a)):
                c = calls[name]
                if isinstance(c, str):
                    row[name + "_error"] = c
                    continue
                t0[3].fill_(float("nan"))
                out, err = self.first_call(c[0])
                if err:
                    row[name + "_error"] = err
                    continue
                row["err_" + name] = self.error(out, refs[ref_of[name]])
                if name.startswith("fajit"):
                    row["kernel_" + name] = fajit.last_forward()
                timed[name] = (c, contextlib.nullcontext)
            if timed:
                self.time_systems(timed, row)
        tol = dict(TOL, **{n: TOL["fajit_q8" if n.startswith("fajit_q8") else "fajit_fp8"] for n, _ in extra_systems(a)})
        row["check"] = "FAIL" if any(not row.get("err_" + n, math.nan) <= t for n, t in tol.items()) else "ok"
        return row


def ms(row, name):
    return row.get(name + "_ms")


def ratio(x, y):
    return f"{x / y:.3f}" if x and y else "n/a"


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    if not torch.cuda.is_available():
        log("kv8_compare.py: needs torch with a CUDA GPU")
        return 1
    fajit = compare.load_fajit(a.lib)
    bench = Kv8Bench(a, fajit)
    for k, v in dc.environment(bench, [sys.argv[0]]).items():
        log(f"{k}: {v}")
    bench.gpu_warmup()
    bad = 0
    print(f"{'shape':<26} {'fajit bf16':>10} {'fajit fp8':>10} {'FA3 bf16':>10} {'FA3 fp8':>10} {'fajit q8':>10}  "
          f"{'fp8/bf16':>8} {'fj/FA3 fp8':>10} {'FA3 fp8/bf16':>12} {'q8/bf16':>8} {'q8/FA3 fp8':>10}  errors (rel L2: "
          f"fj bf16, fj fp8, FA3 bf16, FA3 fp8, fj q8)", flush=True)
    try:
        for s in dc.build_grid(a):
            r = bench.measure(s)
            t = [ms(r, n) for n in SYSTEMS]
            cells = " ".join(f"{x:10.4f}" if x else f"{'n/a':>10}" for x in t)
            errs = ", ".join(f"{r['err_' + n]:.1e}" if "err_" + n in r else "n/a" for n in SYSTEMS)
            print(f"{dc.shape_name(s):<26} {cells}  {ratio(t[1], t[0]):>8} {ratio(t[1], t[3]):>10} "
                  f"{ratio(t[3], t[2]):>12} {ratio(t[4], t[0]):>8} {ratio(t[4], t[3]):>10}  {errs} {r['check']}",
                  flush=True)
            for n in SYSTEMS:
                if n + "_error" in r:
                    print(f"    {n}: {r[n + '_error']}", flush=True)
            print(f"    fajit fp8 ran: {r.get('kernel_fajit_fp8', '?')}", flush=True)
            print(f"    fajit q8 ran: {r.get('kernel_fajit_q8', '?')}", flush=True)
            for n, _ in extra_systems(a):
                x = ms(r, n)
                print(f"    {n}: " + (f"{x:.4f} ms, /fajit bf16 {ratio(x, t[0])}, /FA3 fp8 {ratio(x, t[3])} ran "
                      f"{r.get('kernel_' + n, '?')}" if x else r.get(n + "_error", "n/a")), flush=True)
            bad += r["check"] != "ok"
    finally:
        bench.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
