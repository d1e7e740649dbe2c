"""python_overhead.py - what the Python package adds per fajit.attention call, next to the raw C call.

At small shapes (default B=1, H=8, N=128, D=64, BF16, causal: a few microseconds of GPU work) the
host-side cost of a call is what a user pays. Each row times one way of issuing the same forward:

  C, prepared args (ctypes)       fajit_attention_forward through ctypes with a fajit_attention_args built
                                  once: the library's own cost (checks, config lookup, tensor maps, launch)
                                  plus one ctypes call - the floor any Python binding has
  torch.empty of O                torch.empty(q.shape, dtype, device): the allocation the allocating form
                                  adds (no launch; for scale)
  fajit.attention(out=o), eager   the public call with an output buffer, eager fast path: its signature's
                                  plan (checked once, args prebuilt) sets the pointers and the stream and
                                  calls the library, without torch's dispatcher
  fajit.attention(q, k, v), eager the same, allocating O
  fajit._torch._forward           the custom op's implementation: args filled from the tensors per call
  torch.ops.fajit.attention_out   the custom op through torch's dispatcher (out= given): what
                                  torch.compile graphs and CUDA graphs of compiled code call
  torch.ops.fajit.attention       the allocating custom op through the dispatcher
  fajit.attention(out=o), no plan the public call with the fast path off (fajit._torch._EAGER = False):
                                  the argument checks every call, then the op - the path before the plans
  torch SDPA                      torch.nn.functional.scaled_dot_product_attention, for scale

Method: per row, 50 warm-up calls (kernels loaded, the allocator primed, the eager rows' plans made),
then 20 rounds of 200 calls; a round's host time (perf_counter around the issuing loop, the GPU queue
not full: 200 launches) / 200 is one sample; the median and the 10th-90th percentiles of the rounds are
reported, with the GPU time per call from CUDA events around a round (kernel-bound when it exceeds the
host time). "overhead" = a row's median minus the C row's median. The header says how many plans the
eager rows made (2: one per form; more would mean a timed call missed its plan).

    python3 bench/python_overhead.py [--batch 1 --heads 8 --seqlen 128 --headdim 64 --dtype bf16]
                                     [--no-causal] [--out FILE.md]
Needs the fajit package (pip install ./python), torch and a CUDA GPU.
"""
import argparse
import ctypes
import statistics
import sys
import time

import torch

import fajit
from fajit import _lib, _torch


def _time_rows(rows, rounds=20, calls=200):
    out = []
    for name, fn, eager in rows:
        _torch._EAGER = eager
        try:
            for _ in range(50):  # warm-up: kernels loaded, allocator primed, plans made
                fn()
            torch.cuda.synchronize()
            host, gpu = [], []
            for _ in range(rounds):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                t1 = time.perf_counter()
                end.record()
                end.synchronize()
                host.append((t1 - t0) / calls * 1e6)
                gpu.append(start.elapsed_time(end) * 1e3 / calls)
        finally:
            _torch._EAGER = _EAGER
        host.sort()
        out.append((name, statistics.median(host), host[len(host) // 10], host[(len(host) * 9) // 10],
                    statistics.median(gpu)))
    return out


_EAGER = _torch._EAGER


def shape_options(p, fp8=False):
    """The call's options (also python_overhead_host.py's, which has no FP8 rows)."""
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seqlen", type=int, default=128)
    p.add_argument("--headdim", type=int, default=64)
    p.add_argument("--dtype", choices=("bf16", "f16", "e4m3") if fp8 else ("bf16", "f16"), default="bf16",
                   help="e4m3: float8_e4m3fn q, k, v with float32 [B, H] descales (FlashAttention-3's keywords), "
                        "O bfloat16" if fp8 else None)
    p.add_argument("--no-causal", dest="causal", action="store_false")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    shape_options(p, fp8=True)
    p.add_argument("--out", help="also write the table (markdown) to this file")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU")
        return 77
    fp8 = a.dtype == "e4m3"
    dt = torch.float16 if a.dtype == "f16" else torch.bfloat16
    q, k, v = (torch.randn(a.batch, a.heads, a.seqlen, a.headdim, device="cuda", dtype=dt) for _ in range(3))
    o = torch.empty_like(q)
    scale = a.headdim ** -0.5
    ds = {}  # FP8: the descales, as keywords
    if fp8:
        q, k, v, qd, kd, vd = fajit.fp8_quantize(q, k, v)
        ds = {"q_descale": qd, "k_descale": kd, "v_descale": vd}

    fajit.attention(q, k, v, causal=a.causal, out=o, **ds)  # context, kernel, config choice
    ctx = _lib.context(q.device.index)
    args = _lib.Args_c()
    if "struct_size" in dict(_lib.Args_c._fields_):
        args.struct_size = ctypes.sizeof(_lib.Args_c)
    args.dtype = _lib.DTYPE[{"bf16": "FAJIT_DTYPE_BF16", "f16": "FAJIT_DTYPE_F16", "e4m3": "FAJIT_DTYPE_E4M3"}[a.dtype]]
    if fp8:
        args.q_descale, args.k_descale, args.v_descale = qd.data_ptr(), kd.data_ptr(), vd.data_ptr()
        args.descale_batch_stride = a.heads if a.batch > 1 else 0
    args.batch, args.heads_q, args.heads_kv = a.batch, a.heads, a.heads
    args.seqlen_q, args.seqlen_k, args.head_dim = a.seqlen, a.seqlen, a.headdim
    args.q, args.k, args.v, args.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    _lib.lib.fajit_args_set_bhnd_strides(ctypes.byref(args))
    args.causal, args.softmax_scale = int(a.causal), scale
    args.stream = torch.cuda.current_stream().cuda_stream
    fwd, handle, ref = _lib.lib.fajit_attention_forward, ctx.handle, ctypes.byref(args)

    def c_call():
        st = fwd(handle, ref, None)
        if st:
            raise _lib.error(st)

    shape, dev, c = q.shape, q.device, a.causal
    f8 = _torch.F8.check(q, k, v, o, a.batch, a.heads, **ds)  # the op's trailing arguments (FP8 only)
    extra = (-1, -1, 0.0, None, None, 0) + _torch.F8.op_args(f8) if fp8 else ()  # no variant, then the descales
    rows = [  # (name, call, fast path on)
        ("C, prepared args (ctypes)", c_call, _EAGER),
        ("torch.empty of O", lambda: torch.empty(shape, dtype=o.dtype, device=dev), _EAGER),
        ("fajit.attention(out=o), eager", lambda: fajit.attention(q, k, v, causal=c, out=o, **ds), _EAGER),
        ("fajit.attention(q, k, v), eager", lambda: fajit.attention(q, k, v, causal=c, **ds), _EAGER),
        ("fajit._torch._forward", lambda: _torch._forward(q, k, v, o, None, c, scale, False, "", fp8=f8), _EAGER),
        ("torch.ops.fajit.attention_out", lambda: torch.ops.fajit.attention_out(q, k, v, o, None, c, scale, False, "",
                                                                                None, None, 0, *extra), _EAGER),
        ("torch.ops.fajit.attention", lambda: torch.ops.fajit.attention(q, k, v, c, scale, False, False, "", None,
                                                                        None, 0, *extra), _EAGER),
        ("fajit.attention(out=o), no plan", lambda: fajit.attention(q, k, v, causal=c, out=o, **ds), False),
    ]
    if not fp8:
        rows.append(("torch SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=c),
                     _EAGER))
    _torch._local.plans.clear()
    res = _time_rows(rows)
    base = res[0][1]
    lines = [f"fajit {fajit.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
             f"B={a.batch} H={a.heads} N={a.seqlen} D={a.headdim} {a.dtype} {'causal' if a.causal else 'full'}; "
             f"kernel: {fajit.last_forward()}; eager fast path {'on' if _EAGER else 'OFF (this torch lacks a guard)'}, "
             f"plans made by the eager rows: {len(_torch._local.plans)}",
             "",
             "| call | host us/call (median) | p10-p90 | overhead vs C (us) | GPU us/call |",
             "|---|---|---|---|---|"]
    for name, med, lo, hi, gpu in res:
        lines.append(f"| {name} | {med:.2f} | {lo:.2f}-{hi:.2f} | {med - base:+.2f} | {gpu:.2f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
