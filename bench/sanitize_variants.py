"""sanitize_variants.py - a small sample of every attention variant and of varlen, on both code paths, for
compute-sanitizer (memcheck / racecheck / synccheck) to watch. Small shapes: the tools slow kernels 10-100x.
Each call's output is compared with the float64 reference of python/tests/_reference.py (rel L2 <= 2e-2).

    PYTHONPATH=python/src FAJIT_LIB=build/libfajit.so compute-sanitizer --tool memcheck python3 bench/sanitize_variants.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "tests"))
import fajit  # noqa: E402
import _reference as ref  # noqa: E402

torch.manual_seed(0)
dev, bf16 = "cuda", torch.bfloat16
B, HQ, HKV, N, D = 2, 4, 2, 300, 128
bad = 0


def check(name, out, want):
    global bad
    err = ((out.double() - want).norm() / want.norm().clamp_min(1e-30)).item()
    ok = err <= 2e-2
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rel L2 {err:.2e}  [{fajit.last_forward()}]", flush=True)


q = torch.randn(B, N, HQ, D, device=dev, dtype=bf16)
k = torch.randn(B, N, HKV, D, device=dev, dtype=bf16)
v = torch.randn(B, N, HKV, D, device=dev, dtype=bf16)
sinks = torch.randn(HQ, device=dev, dtype=torch.float32)
slopes = torch.rand(HQ, device=dev, dtype=torch.float32) * 0.1
# (fajit keywords, reference keywords, the config's mod words)
cases = {
    "window 64,0": (dict(window_size=(64, 0)), dict(window=(64, 0)), "win"),
    "softcap 20": (dict(softcap=20.0), dict(softcap=20.0), "cap"),
    "sinks": (dict(learnable_sink=sinks), dict(sinks=sinks), "sink"),
    "alibi": (dict(alibi_slopes=slopes), dict(alibi=slopes), "alibi"),
    "chunk 128": (dict(attention_chunk=128), dict(chunk=128), "chunk"),
    "window + sinks": (dict(window_size=(32, 0), learnable_sink=sinks), dict(window=(32, 0), sinks=sinks), "win sink"),
}
SM80 = "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal "  # the tile test_gpu_variants runs the variants on
for arch in ("default", "sm_80"):
    for name, (kw, rkw, words) in cases.items():
        cfg = SM80 + words if arch == "sm_80" else None
        out = fajit.attention(q, k, v, causal=True, layout="bnhd", config=cfg, **kw)
        want, _ = ref.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, **rkw)
        check(f"{arch} {name}", out.transpose(1, 2), want)

lens = [0, 1, 17, 300, 64]
cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device=dev, dtype=torch.int32)
T = sum(lens)
qp = torch.randn(T, HQ, D, device=dev, dtype=bf16)
kp = torch.randn(T, HKV, D, device=dev, dtype=bf16)
vp = torch.randn(T, HKV, D, device=dev, dtype=bf16)
for kw, rkw in (({}, {}), ({"window_size": (16, 0), "learnable_sink": sinks}, {"window": (16, 0), "sinks": sinks})):
    out = fajit.varlen_attention(qp, kp, vp, cu, cu, max(lens), max(lens), causal=True, **kw)
    want, _ = ref.varlen(qp, kp, vp, cu.tolist(), cu.tolist(), causal=True, **rkw)
    check(f"varlen {sorted(kw)}", out, want)
torch.cuda.synchronize()
print(f"{bad} failed", flush=True)
sys.exit(1 if bad else 0)
