"""test_gpu.py - fajit.attention on a GPU: numerics against a float64 reference over odd shapes, torch's
own SDPA error next to it, strided inputs, streams, errors the library raises, torch.compile
(fullgraph=True, also mode="reduce-overhead") and CUDA-graph capture and replay, and the eager fast path
(a cached plan per call signature) against the op: identical outputs, also after stride changes, and not
taken under torch.compile.
Skipped (with the reason) without torch or without a CUDA GPU.

Check, per case: O is written into a NaN-filled buffer (out=) and LSE into a NaN-filled one; every
element is compared with a float64 reference computed on the GPU from the same (rounded) inputs. Pass:
no NaN/Inf anywhere, relative L2 of O <= 1e-2 (bf16) / 2e-3 (f16), worst row's relative error <= 4x
that, |LSE - ref| <= 1e-3, and rows that see no key (causal, Nq > Nk) exactly O = 0 and LSE = -inf -
the tolerances of the C GPU tests (src/runtime/check.c). Each case's errors, and torch SDPA's (same dtype,
same inputs, explicit bottom-right mask) relative L2 against the same reference, are appended to
$FAJIT_TEST_REPORT (default: not written) and printed with -s.
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import fajit  # noqa: E402

from _gpu_check import TOL, check_against, report as _report, rel_l2 as _rel_l2  # noqa: E402


def _make(b, hq, hkv, nq, nk, d, dtype, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def t(h, n):
        x = torch.randn(b, h, n, d, device="cuda", dtype=torch.float32, generator=g).to(dtype)
        return x if layout == "bhnd" else x.transpose(1, 2).contiguous()
    return t(hq, nq), t(hkv, nk), t(hkv, nk)


def _bhnd(x, layout):
    return x if layout == "bhnd" else x.transpose(1, 2)


def _mask(nq, nk):
    """Bottom-right causal mask: query i sees keys j <= i + nk - nq."""
    i = torch.arange(nq, device="cuda")[:, None]
    j = torch.arange(nk, device="cuda")[None, :]
    return j <= i + (nk - nq)


def _reference(q, k, v, causal, scale, layout):
    """O and LSE in float64, [B, Hq, Nq, D] / [B, Hq, Nq]; fully masked rows give O = 0, LSE = -inf."""
    q, k, v = (_bhnd(x, layout).double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~_mask(q.shape[2], k.shape[2]), -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])
    return torch.matmul(p, v), lse


def _sdpa_error(q, k, v, causal, scale, layout, ref_o):
    """torch SDPA's relative L2 against the same reference (rows that see a key only), or None."""
    qb, kb, vb = (_bhnd(x, layout) for x in (q, k, v))
    g = qb.shape[1] // kb.shape[1]
    kb, vb = kb.repeat_interleave(g, dim=1), vb.repeat_interleave(g, dim=1)
    mask = _mask(qb.shape[2], kb.shape[2]) if causal else None
    try:
        o = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale)
    except RuntimeError:
        return None
    rows = mask.any(dim=-1) if causal else torch.ones(qb.shape[2], dtype=torch.bool, device="cuda")
    return _rel_l2(o[:, :, rows], ref_o[:, :, rows])


def _check(case, q, k, v, causal, layout, o, lse, scale=None):
    d = q.shape[-1]
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    ref_o, ref_lse = _reference(q, k, v, causal, scale, layout)
    torch_rel = _sdpa_error(q, k, v, causal, scale, layout, ref_o)
    check_against(case, _bhnd(o, layout), lse, ref_o, ref_lse,
                  note=f" (torch SDPA {'n/a' if torch_rel is None else f'{torch_rel:.3e}'})", kernel=fajit.last_forward())


# (dtype, B, Hq, Hkv, Nq, Nk, D, causal, layout)
CASES = [
    (torch.bfloat16, 1, 2, 2, 1, 1, 64, False, "bhnd"),
    (torch.float16, 2, 4, 4, 17, 17, 64, True, "bhnd"),
    (torch.bfloat16, 2, 4, 4, 1000, 1000, 128, True, "bhnd"),
    (torch.float16, 2, 4, 4, 1000, 1000, 128, False, "bnhd"),
    (torch.bfloat16, 1, 8, 2, 17, 1000, 96, True, "bnhd"),     # GQA, Nq < Nk
    (torch.float16, 1, 8, 1, 1000, 17, 128, True, "bhnd"),     # MQA, Nq > Nk: rows with no key
    (torch.bfloat16, 2, 4, 4, 1000, 17, 256, False, "bnhd"),
    (torch.float16, 1, 4, 2, 1, 1000, 256, True, "bhnd"),      # decode-like
    (torch.bfloat16, 1, 4, 4, 300, 129, 192, True, "bhnd"),
    (torch.float16, 2, 6, 3, 1000, 1000, 96, False, "bnhd"),
    (torch.bfloat16, 3, 2, 1, 33, 65, 128, False, "bhnd"),
    (torch.float16, 1, 2, 2, 1000, 1, 64, True, "bnhd"),       # one key: only the last row sees it
    (torch.bfloat16, 1, 16, 1, 257, 257, 64, True, "bnhd"),    # MQA, 16 query heads
]
CASES += [(dt, 2, 4, 2, 257, 300, d, True, "bhnd") for dt in (torch.float16, torch.bfloat16)
          for d in (64, 96, 128, 192, 256)]


def _name(c):
    dt, b, hq, hkv, nq, nk, d, causal, layout = c
    kind = "causal" if causal else "full"
    return f"{'bf16' if dt == torch.bfloat16 else 'f16'}-B{b}-H{hq}x{hkv}-N{nq}x{nk}-D{d}-{kind}-{layout}"


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_against_float64(case):
    dt, b, hq, hkv, nq, nk, d, causal, layout = case
    q, k, v = _make(b, hq, hkv, nq, nk, d, dt, layout, seed=zlib.crc32(_name(case).encode()) % 1000)
    o = torch.full_like(q, float("nan"))
    o2, lse = fajit.attention(q, k, v, causal=causal, layout=layout, return_lse=True, out=o)
    assert o2 is o
    torch.cuda.synchronize()
    _check(_name(case), q, k, v, causal, layout, o, lse)


def test_new_output_and_scale():
    q, k, v = _make(2, 4, 4, 200, 300, 128, torch.bfloat16, "bhnd", seed=1)
    o = fajit.attention(q, k, v, scale=0.3)
    o2, lse = fajit.attention(q, k, v, scale=0.3, return_lse=True)
    assert o.is_contiguous() and torch.equal(o, o2)
    _check("new-output scale 0.3", q, k, v, False, "bhnd", o, lse, scale=0.3)


def test_strided_inputs_packed_qkv():
    b, n, h, d = 2, 333, 4, 128
    qkv = torch.randn(b, n, 3, h, d, device="cuda", dtype=torch.float16)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, N, H, D] views, row stride 3*H*D
    o = torch.full((b, n, h, d), float("nan"), device="cuda", dtype=torch.float16)
    _, lse = fajit.attention(q, k, v, causal=True, layout="bnhd", out=o, return_lse=True)
    _check("packed qkv views (bnhd)", q, k, v, True, "bnhd", o, lse)


def test_sdpa_drop_in_matches_torch():
    q, k, v = _make(2, 8, 2, 512, 512, 64, torch.bfloat16, "bhnd", seed=2)
    o = fajit.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert _rel_l2(o, ref.double()) <= 2 * TOL[torch.bfloat16]


def test_side_stream():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q, k, v = _make(1, 4, 4, 1000, 1000, 128, torch.float16, "bhnd", seed=3)
        o = torch.full_like(q, float("nan"))
        _, lse = fajit.attention(q, k, v, causal=True, out=o, return_lse=True)
    s.synchronize()
    _check("side stream", q, k, v, True, "bhnd", o, lse)


def test_zero_keys_and_zero_rows():
    q, k, v = _make(1, 2, 2, 5, 1, 64, torch.bfloat16, "bhnd", seed=4)
    o, lse = fajit.attention(q, k[:, :, :0], v[:, :, :0], return_lse=True)
    assert (o == 0).all() and (lse == -math.inf).all()
    assert fajit.attention(q[:, :, :0], k, v).shape == (1, 2, 0, 64)


def test_library_errors_are_raised():
    q, k, v = _make(1, 2, 2, 64, 64, 64, torch.float16, "bhnd", seed=5)
    wide = torch.randn(1, 2, 64, 68, device="cuda", dtype=torch.float16)[..., :64]  # row stride 68 elements
    with pytest.raises(fajit.FajitInputError, match="q_stride"):
        fajit.attention(wide, k, v)
    flat = torch.randn(1 + 2 * 64 * 64, device="cuda", dtype=torch.float16)
    shifted = flat[1:].view(1, 2, 64, 64)  # 2 bytes off a 16-byte boundary
    with pytest.raises(fajit.FajitInputError, match="must be 16-byte aligned"):
        fajit.attention(shifted, k, v)
    with pytest.raises(fajit.FajitInputError, match="head_dim"):
        fajit.attention(*_make(1, 2, 2, 64, 64, 80, torch.float16, "bhnd", seed=6))


def test_explicit_config_and_kernel_info():
    q, k, v = _make(1, 4, 4, 512, 512, 128, torch.bfloat16, "bhnd", seed=7)
    cfg = fajit.config(head_dim=128, dtype="bf16", arch="sm_80", block_m=64, block_n=64, stages=2, warps=4)
    o = torch.full_like(q, float("nan"))
    _, lse = fajit.attention(q, k, v, out=o, config=cfg, return_lse=True)
    assert fajit.last_forward().startswith(cfg.text)
    _check("explicit sm_80 config", q, k, v, False, "bhnd", o, lse)
    info, source = fajit.kernel_info(cfg)
    assert info["registers"] > 0 and source == "memory"
    with pytest.raises(fajit.FajitInputError, match="causal"):  # a config must match the call
        fajit.attention(q, k, v, causal=True, config=cfg)


def test_other_devices():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU: the per-device contexts are exercised on cuda:0 only")
    q, k, v = (x.to("cuda:1") for x in _make(1, 4, 4, 300, 300, 64, torch.float16, "bhnd", seed=8))
    o = torch.full_like(q, float("nan"))
    with torch.cuda.device(1):
        _, lse = fajit.attention(q, k, v, out=o, return_lse=True)
    torch.cuda.synchronize(1)
    ref_o, _ = _reference(q, k, v, False, 1 / 8.0, "bhnd")
    assert _rel_l2(o, ref_o) <= TOL[torch.float16]


def test_opcheck():
    # torch's own checks of a custom op: schema, fake implementation vs real outputs, AOT dispatch
    q, k, v = _make(2, 4, 2, 129, 200, 64, torch.float16, "bhnd", seed=12)
    torch.library.opcheck(torch.ops.fajit.attention.default, (q, k, v, True, 0.125, False, True, ""))
    torch.library.opcheck(torch.ops.fajit.attention.default, (q, k, v, False, 0.125, False, False, ""))
    o, lse = torch.empty_like(q), torch.empty(2, 4, 129, device="cuda")
    torch.library.opcheck(torch.ops.fajit.attention_out.default, (q, k, v, o, lse, True, 0.125, False, ""))


# ---- the eager fast path (a plan per checked call signature) against the op ---------------------------------
def _strided_variants(q, k, v):
    """The same values in other strides: [B, N, H, D] storage seen as [B, H, N, D], and rows of 136 elements."""
    def bnhd_storage(x):
        return x.transpose(1, 2).contiguous().transpose(1, 2)

    def wide_rows(x):
        w = torch.empty(*x.shape[:3], x.shape[3] + 8, device="cuda", dtype=x.dtype)[..., :x.shape[3]]
        return w.copy_(x)
    return [("contiguous", q, k, v), ("k, v from bnhd storage", q, bnhd_storage(k), bnhd_storage(v)),
            ("q with wide rows", wide_rows(q), k, v), ("all strided", wide_rows(q), bnhd_storage(k), wide_rows(v))]


def test_fast_path_matches_the_op():
    from fajit import _torch
    q, k, v = _make(2, 8, 2, 300, 400, 128, torch.bfloat16, "bhnd", seed=13)
    _torch._local.plans.clear()
    scale = 1.0 / math.sqrt(128)  # as check_scale computes the default
    for name, q2, k2, v2 in _strided_variants(q, k, v):
        o_op, lse_op = torch.ops.fajit.attention(q2, k2, v2, True, scale, False, True, "", None, None, 0)
        plans = len(_torch._local.plans)
        for rep in range(2):  # the first call makes the signature's plans, the second takes them
            o, lse = fajit.attention(q2, k2, v2, causal=True, return_lse=True)
            out = torch.full_like(q2, float("nan"))
            o2 = fajit.attention(q2, k2, v2, causal=True, out=out)
            assert o2 is out
            assert torch.equal(o, o_op) and torch.equal(lse, lse_op) and torch.equal(out, o_op), f"{name}, call {rep}"
        assert len(_torch._local.plans) == plans + 2, f"{name}: a stride change did not make its own plans"
    _check("fast path, all strided", q2, k2, v2, True, "bhnd", o, lse)  # the last variant's


def test_fast_path_not_taken_under_torch_compile(monkeypatch):
    # the op's implementation (_forward) is counted: the compiled graph calls the op every time and no
    # plan is made; eager calls of the same function then take a plan and not the op
    from fajit import _torch
    calls = []
    forward = _torch._forward

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)
    monkeypatch.setattr(_torch, "_forward", counted)
    monkeypatch.setattr(_torch._local, "plans", {})
    q, k, v = _make(1, 4, 4, 256, 256, 64, torch.float16, "bhnd", seed=14)

    def f(q, k, v):
        return fajit.attention(q, k, v, causal=True) * 2
    compiled = torch.compile(f, fullgraph=True)
    for _ in range(3):
        out = compiled(q, k, v)
    assert len(calls) >= 3 and not _torch._local.plans, (len(calls), _torch._local.plans)
    n = len(calls)
    eager = [f(q, k, v) for _ in range(2)]
    assert len(calls) == n and len(_torch._local.plans) == 1
    assert torch.equal(out, eager[0]) and torch.equal(eager[0], eager[1])


# ---- torch.compile and CUDA graphs -------------------------------------------------------------------------
class Block(torch.nn.Module):
    def __init__(self, dim=512, heads=8, kv_heads=2):
        super().__init__()
        self.h, self.hkv, self.d = heads, kv_heads, dim // heads
        self.q = torch.nn.Linear(dim, dim, bias=False)
        self.kv = torch.nn.Linear(dim, 2 * kv_heads * self.d, bias=False)
        self.o = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.h, self.d)
        k, v = self.kv(x).view(b, n, 2, self.hkv, self.d).unbind(2)
        y = fajit.attention(q, k, v, causal=True, layout="bnhd")
        return self.o(y.reshape(b, n, -1))


def _block_inputs():
    # fajit is forward-only (no autograd formula): inference, so AOTAutograd traces no backward (with
    # parameters that require grad, torch.compile fails: "no autograd formula was registered"; seen on the H200)
    torch.manual_seed(0)
    m = Block().cuda().to(torch.bfloat16).eval().requires_grad_(False)
    return m, torch.randn(2, 300, 512, device="cuda", dtype=torch.bfloat16)


def test_torch_compile_fullgraph_no_graph_break():
    m, x = _block_inputs()
    eager = m(x)
    explained = torch._dynamo.explain(m)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained
    compiled = torch.compile(m, fullgraph=True)
    out = compiled(x)
    assert _rel_l2(out, eager.double()) <= 2 * TOL[torch.bfloat16]


def test_torch_compile_reduce_overhead():
    m, x = _block_inputs()
    eager = m(x)
    compiled = torch.compile(m, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):  # warm-up, record, replay
        out = compiled(x).clone()
    assert _rel_l2(out, eager.double()) <= 2 * TOL[torch.bfloat16]


def test_cuda_graph_capture_and_replay():
    q, k, v = _make(2, 8, 2, 777, 777, 128, torch.bfloat16, "bnhd", seed=9)
    o = torch.empty_like(q)
    lse = None
    fajit.attention(q, k, v, causal=True, layout="bnhd", out=o)  # warm-up: the kernel is loaded
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _, lse = fajit.attention(q, k, v, causal=True, layout="bnhd", out=o, return_lse=True)
        o_new = fajit.attention(q, k, v, causal=True, layout="bnhd")  # allocated from the graph's pool
    for seed in (10, 11):  # new inputs in the same buffers, then replay
        q2, k2, v2 = _make(2, 8, 2, 777, 777, 128, torch.bfloat16, "bnhd", seed=seed)
        q.copy_(q2), k.copy_(k2), v.copy_(v2)
        o.fill_(float("nan")), lse.fill_(float("nan")), o_new.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        _check(f"CUDA graph replay {seed}", q, k, v, True, "bnhd", o, lse)
        assert torch.equal(o_new, o)


def test_device_config_and_tune():
    cfg = fajit.config(head_dim=64, device=0)
    major = torch.cuda.get_device_capability(0)[0]
    assert cfg.arch == ("sm_90a" if major == 9 else "sm_80"), cfg
    seen = []
    r = fajit.tune(64, dtype="f16", shape=dict(batch=1, heads_q=4, heads_kv=4, seqlen_q=256, seqlen_k=256),
                   max_candidates=2, persist=False, progress=lambda *p: seen.append(p))
    _report(f"tune: {r!r}, {len(seen)} progress calls, cache dir {fajit.cache_dir(0)!r}")
    assert r.timed >= 1 and r.best.head_dim == 64 and r.tflops > 0
    assert any(p[2] is not None and p[3] > 0 for p in seen), seen
