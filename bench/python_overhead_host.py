"""python_overhead_host.py - the Python side of a fajit.attention call, timed on the host alone (no GPU).

CPU tensors stand in for CUDA ones (fajit._torch._DEVICE_TYPE = "cpu", with the context that has no
device), torch's current-stream accessor is replaced by a Python function returning 0, and the library's
fajit_attention_forward by a C function of the same prototype that returns 0 (compiled here with cc). What
is timed is then Python, torch's tensor accessors, torch.empty of host memory and one ctypes call: the part
of bench/python_overhead.py's rows that is not the library's own work, without a GPU. Rows:

  no-op C call, prepared args    the stand-in called through ctypes with a fajit_attention_args built
                                 once: the ctypes part of python_overhead.py's "C, prepared args" row
  eager path, out=o              fajit.attention(q, k, v, out=o) with its signature's plan cached
  eager path, allocating O       fajit.attention(q, k, v)
  torch.empty of O               torch.empty(q.shape, dtype, device): the allocation the row above adds
  the argument checks            check_args + check_decode + check_scale + config_text (what a cached
                                 signature skips)
  _key (the cache key)           the key alone
  _forward (the op's launch)     fajit._torch._forward: args filled per call (what the custom op runs)

Method: per row 2,000 warm-up calls, then 30 rounds of 2,000 calls (--rounds, --calls) timed with
perf_counter; the median round / 2,000 is reported with the 10th-90th percentiles, and "over C" is a row's median minus the
no-op row's. Host-dependent: the H200 machine's CPU is another; python_overhead.py measures there.

    PYTHONPATH=python/src python3 bench/python_overhead_host.py [--batch 1 --heads 8 --seqlen 128 --headdim 64
                                                    --dtype bf16] [--no-causal] [--rounds 30 --calls 2000]
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import fajit
from fajit import _lib, _torch
from python_overhead import shape_options  # bench/ is sys.path[0] when this script runs


def _noop_forward(tmp):
    """A C function with fajit_attention_forward's prototype that returns 0 (FAJIT_OK)."""
    src, so = os.path.join(tmp, "noop.c"), os.path.join(tmp, "libnoop.so")
    with open(src, "w") as f:
        f.write("int noop_forward(void *ctx, const void *args, const void *cfg)\n"
                "{ (void)ctx; (void)args; (void)cfg; return 0; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    fn = ctypes.CDLL(so).noop_forward
    real = _lib.lib.fajit_attention_forward
    fn.argtypes, fn.restype = real.argtypes, real.restype
    return fn


def _time(rows, rounds=30, calls=2000):
    out = []
    for name, fn in rows:
        for _ in range(calls):
            fn()
        per = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per.append((time.perf_counter() - t0) / calls * 1e6)
        per.sort()
        out.append((name, statistics.median(per), per[len(per) // 10], per[(len(per) * 9) // 10]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    shape_options(p)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=2000, help="calls per round")
    a = p.parse_args(argv)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    q, k, v = (torch.zeros(a.batch, a.heads, a.seqlen, a.headdim, dtype=dt) for _ in range(3))
    o = torch.empty_like(q)
    scale = a.headdim ** -0.5

    ctx = _lib.context(-1)
    _torch._DEVICE_TYPE = "cpu"
    _lib.context = lambda device: ctx
    _torch._raw_stream = lambda device: 0
    with tempfile.TemporaryDirectory() as tmp:
        noop = _noop_forward(tmp)
    _lib.lib.fajit_attention_forward = noop  # what _forward and the plans call
    args = _torch._args(q, k, v, o, a.causal, scale, False, None, None, 0)
    handle, ref = ctx.handle, ctypes.byref(args)

    def c_call():
        st = noop(handle, ref, None)
        if st:
            raise _lib.error(st)

    def checks():
        b, _, _, _, nk, d = _torch.check_args(q, k, v, o, "bhnd")
        _torch.check_decode(q, "bhnd", b, nk, None, None, None, None)
        _torch.check_scale(None, d), _torch.config_text(None)

    plans = _torch._local.plans
    fajit.attention(q, k, v, causal=a.causal, out=o)
    fajit.attention(q, k, v, causal=a.causal)
    assert len(plans) == 2, "the eager path did not cache its plans"
    rows = [
        ("no-op C call, prepared args", c_call),
        ("eager path, out=o", lambda: fajit.attention(q, k, v, causal=a.causal, out=o)),
        ("eager path, allocating O", lambda: fajit.attention(q, k, v, causal=a.causal)),
        ("torch.empty of O", lambda: torch.empty(q.shape, dtype=dt, device=q.device)),
        ("the argument checks", checks),
        ("_key (the cache key)", lambda: _torch._key(q, k, v, a.causal, None, "bhnd", False, o, None, None, None,
                                                     None, None)),
        ("_forward (the op's launch)", lambda: _torch._forward(q, k, v, o, None, a.causal, scale, False, "")),
    ]
    res = _time(rows, a.rounds, a.calls)
    assert len(plans) == 2, "a timed call missed the plan cache"
    base = res[0][1]
    print(f"fajit {fajit.__version__}, torch {torch.__version__}, python {sys.version.split()[0]}, host only "
          f"(CPU tensors, no-op forward), B={a.batch} H={a.heads} N={a.seqlen} D={a.headdim} {a.dtype} "
          f"{'causal' if a.causal else 'full'}\n")
    print("| call | host us/call (median) | p10-p90 | over C (us) |\n|---|---|---|---|")
    for name, med, lo, hi in res:
        print(f"| {name} | {med:.2f} | {lo:.2f}-{hi:.2f} | {med - base:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
