"""test_variant_args.py - the attention variants' keywords of fajit.attention and fajit.varlen_attention without a
GPU: their checks (ValueError / TypeError naming the argument), the fake implementations' shapes (CUDA tensors under
FakeTensorMode), the fajit_attention_args fields the launch writes (CPU tensors, the library's forward replaced by a
recorder, as in test_eager_path.py), the eager fast path with variants, and the float64 reference itself against
torch's SDPA with explicit masks. Skipped without torch.
"""
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fajit.attention needs it")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import fajit  # noqa: E402
from fajit import _lib, _torch, _variants  # noqa: E402

import _reference as ref  # noqa: E402

if not (_variants.HAVE_VARIANTS and _variants.HAVE_VARLEN):
    pytest.skip("this fajit.h has no varlen / variant fields (SIZE_3)", allow_module_level=True)


@pytest.fixture
def fake():
    with FakeTensorMode() as mode:
        yield mode


def _qkv(b=2, hq=8, hkv=2, nq=100, nk=77, d=64, device="cuda"):
    q = torch.empty(b, hq, nq, d, dtype=torch.bfloat16, device=device)
    k = torch.empty(b, hkv, nk, d, dtype=torch.bfloat16, device=device)
    return q, k, torch.empty_like(k)


def _packed(tq=300, tk=250, hq=8, hkv=2, d=64, b=3, device="cuda"):
    q = torch.empty(tq, hq, d, dtype=torch.bfloat16, device=device)
    k = torch.empty(tk, hkv, d, dtype=torch.bfloat16, device=device)
    cu = torch.empty(b + 1, dtype=torch.int32, device=device)
    return q, k, torch.empty_like(k), cu, cu.clone()


def _expect(exc, text, fn, *args, **kwargs):
    with pytest.raises(exc, match=text):
        fn(*args, **kwargs)


# ---- shapes and checks (FakeTensorMode: nothing reaches the library) ---------------------------------------------
def test_variant_fake_shapes(fake):
    q, k, v = _qkv()
    sinks, alibi = torch.empty(8, device="cuda"), torch.empty(2, 8, device="cuda")
    o, lse = fajit.attention(q, k, v, causal=True, return_lse=True, window_size=(16, 0), softcap=30.0,
                             alibi_slopes=alibi, learnable_sink=sinks, attention_chunk=64, softmax_scale=0.1)
    assert o.shape == q.shape and lse.shape == (2, 8, 100)
    assert fajit.attention(q, k, v, sinks=sinks.to(torch.bfloat16), window_size=(None, None)).shape == q.shape


def test_varlen_fake_shapes(fake):
    q, k, v, cu_q, cu_k = _packed()
    o, lse = fajit.varlen_attention(q, k, v, cu_q, cu_k, 120, 100, causal=True, return_lse=True)
    assert o.shape == q.shape and lse.shape == (8, 300) and lse.dtype == torch.float32
    out = torch.empty_like(q)
    o, lse = fajit.varlen_attention(q, k, v, cu_q, cu_k, 120, 100, out=out, return_lse=True, learnable_sink=
                                    torch.empty(8, device="cuda"), window_size=(5, 5))
    assert o is out and lse.shape == (8, 300)
    pool = torch.empty(20, 16, 2, 64, dtype=torch.bfloat16, device="cuda")
    table = torch.empty(3, 4, dtype=torch.int32, device="cuda")
    used = torch.empty(3, dtype=torch.int32, device="cuda")
    assert fajit.varlen_attention(q, pool, pool, cu_q, None, 120, 64, block_table=table, seqused_k=used).shape == \
        q.shape


def test_variant_errors(fake):
    q, k, v = _qkv()
    a = fajit.attention
    _expect(ValueError, r"window_size: \(-2, 0\): the left side -2 must be -1", a, q, k, v, window_size=(-2, 0))
    _expect(ValueError, r"window_size: 5: must be a pair", a, q, k, v, window_size=5)
    _expect(ValueError, r"window_size: \(1.5, 0\): the left side 1.5 is not an int", a, q, k, v, window_size=(1.5, 0))
    _expect(ValueError, r"window_size: \(True, 0\)", a, q, k, v, window_size=(True, 0))
    _expect(ValueError, r"softcap: -1.0: must be a finite number >= 0", a, q, k, v, softcap=-1.0)
    _expect(ValueError, r"softcap: nan", a, q, k, v, softcap=float("nan"))
    _expect(ValueError, r"attention_chunk: -4", a, q, k, v, attention_chunk=-4)
    _expect(TypeError, r"alibi_slopes: dtype torch.float16: must be torch.float32", a, q, k, v,
            alibi_slopes=torch.empty(8, dtype=torch.float16, device="cuda"))
    _expect(ValueError, r"alibi_slopes: shape \(4,\): must be \[Hq\] = \[8\] or \[B, Hq\] = \[2, 8\]", a, q, k, v,
            alibi_slopes=torch.empty(4, device="cuda"))
    _expect(ValueError, r"alibi_slopes: on cpu, q on cuda", a, q, k, v, alibi_slopes=torch.zeros(8))
    _expect(ValueError, r"learnable_sink: shape \(2,\): must be \[Hq\] = \[8\]", a, q, k, v,
            learnable_sink=torch.empty(2, device="cuda"))
    _expect(ValueError, r"sinks: shape \(8, 1\)", a, q, k, v, sinks=torch.empty(8, 1, device="cuda"))
    _expect(TypeError, r"sinks: dtype torch.int32", a, q, k, v, sinks=torch.empty(8, dtype=torch.int32, device="cuda"))
    _expect(TypeError, r"learnable_sink: expected a float32 torch.Tensor", a, q, k, v, learnable_sink=[0.0] * 8)
    s = torch.empty(8, device="cuda")
    _expect(ValueError, r"learnable_sink and sinks: both given", a, q, k, v, learnable_sink=s, sinks=s)
    _expect(ValueError, r"scale and softmax_scale: both given", a, q, k, v, scale=0.1, softmax_scale=0.1)
    _expect(ValueError, r"softmax_scale: nan", a, q, k, v, softmax_scale=float("nan"))


def test_varlen_errors(fake):
    q, k, v, cu_q, cu_k = _packed()
    f = fajit.varlen_attention
    _expect(ValueError, r"q: expected a 3-d tensor \[total_q, Hq, D\]", f, q[None], k, v, cu_q, cu_k, 10, 10)
    _expect(ValueError, r"k: expected a 3-d tensor", f, q, k[None], v, cu_q, cu_k, 10, 10)
    _expect(TypeError, r"v: dtype torch.float16 differs", f, q, k, v.half(), cu_q, cu_k, 10, 10)
    _expect(ValueError, r"k: 3 heads; q's head count 8", f, q, k[:, :1].expand(250, 3, 64), v[:, :1].expand(250, 3, 64),
            cu_q, cu_k, 10, 10)
    _expect(TypeError, r"cu_seqlens_q: dtype torch.int64: must be torch.int32", f, q, k, v, cu_q.long(), cu_k, 10, 10)
    _expect(TypeError, r"cu_seqlens_q: expected an int32 torch.Tensor", f, q, k, v, [0, 10], cu_k, 10, 10)
    _expect(ValueError, r"cu_seqlens_k: shape \(3,\): must be \[B \+ 1\] = \[4\]", f, q, k, v, cu_q, cu_k[:3], 10, 10)
    _expect(ValueError, r"cu_seqlens_k: None: required", f, q, k, v, cu_q, None, 10, 10)
    _expect(ValueError, r"cu_seqlens_q: stride 2", f, q, k, v, torch.empty(8, dtype=torch.int32, device="cuda")[::2],
            cu_k, 10, 10)
    _expect(TypeError, r"max_seqlen_q: .*must be a Python int", f, q, k, v, cu_q, cu_k, torch.tensor(10), 10)
    _expect(ValueError, r"max_seqlen_q: 301: must be in 0..300", f, q, k, v, cu_q, cu_k, 301, 10)
    _expect(ValueError, r"max_seqlen_k: 251: must be in 0..250", f, q, k, v, cu_q, cu_k, 10, 251)
    _expect(ValueError, r"seqused_k: shape \(4,\): must be \[B\] = \[3\]", f, q, k, v, cu_q, cu_k, 10, 10,
            seqused_k=cu_q)
    _expect(ValueError, r"out: shape \(299, 8, 64\) differs", f, q, k, v, cu_q, cu_k, 10, 10, out=q[:299])
    _expect(ValueError, r"window_size: \(0, -3\)", f, q, k, v, cu_q, cu_k, 10, 10, window_size=(0, -3))
    _expect(ValueError, r"alibi_slopes: shape \(2, 8\): must be \[Hq\] = \[8\] or \[B, Hq\] = \[3, 8\]", f, q, k, v,
            cu_q, cu_k, 10, 10, alibi_slopes=torch.empty(2, 8, device="cuda"))
    pool = torch.empty(20, 16, 2, 64, dtype=torch.bfloat16, device="cuda")
    table = torch.empty(3, 4, dtype=torch.int32, device="cuda")
    used = torch.empty(3, dtype=torch.int32, device="cuda")
    _expect(ValueError, r"cu_seqlens_k: must be None with block_table", f, q, pool, pool, cu_q, cu_k, 10, 10,
            block_table=table, seqused_k=used)
    _expect(ValueError, r"seqused_k: required with block_table", f, q, pool, pool, cu_q, None, 10, 10,
            block_table=table)
    _expect(ValueError, r"max_seqlen_k: 65: must be in 0..64 \(max_pages x page_size", f, q, pool, pool, cu_q, None,
            10, 65, block_table=table, seqused_k=used)
    _expect(ValueError, r"block_table: shape \(2, 4\)", f, q, pool, pool, cu_q, None, 10, 10, block_table=table[:2],
            seqused_k=used)
    _expect(ValueError, r"k: expected a 4-d tensor", f, q, k, v, cu_q, None, 10, 10, block_table=table,
            seqused_k=used)


def test_varlen_cpu_tensors_are_refused():
    q, k, v, cu_q, cu_k = _packed(device="cpu")
    _expect(ValueError, r"q: on cpu; fajit runs on CUDA tensors", fajit.varlen_attention, q, k, v, cu_q, cu_k, 1, 1)


_EXPORT = r"""
import torch, fajit
from torch._subclasses.fake_tensor import FakeTensorMode

class M(torch.nn.Module):
    def forward(self, q, k, v, cu, sinks, qb, kb):
        o = fajit.varlen_attention(q, k, v, cu, cu, 128, 128, causal=True, window_size=(63, 0), learnable_sink=sinks)
        o2, lse = fajit.varlen_attention(q, k, v, cu, cu, 128, 128, out=torch.empty_like(q), return_lse=True)
        o3 = fajit.attention(qb, kb, kb, causal=True, softcap=30.0, learnable_sink=sinks)
        return o + o2, lse.sum(), o3

with FakeTensorMode():
    q = torch.empty(300, 8, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.empty(300, 2, 64, dtype=torch.bfloat16, device="cuda")
    cu = torch.empty(4, dtype=torch.int32, device="cuda")
    sinks = torch.empty(8, device="cuda")
    qb = torch.empty(2, 8, 100, 64, dtype=torch.bfloat16, device="cuda")
    kb = torch.empty(2, 2, 100, 64, dtype=torch.bfloat16, device="cuda")
    ep = torch.export.export(M(), (q, k, torch.empty_like(k), cu, sinks, qb, kb), strict=True)
print(ep.graph_module.code)
"""


def test_dynamo_keeps_the_varlen_op_in_the_graph():
    out = subprocess.run([sys.executable, "-c", _EXPORT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("torch.ops.fajit.varlen_attention.default(") == 1, out.stdout
    assert out.stdout.count("torch.ops.fajit.varlen_attention_out.default(") == 1, out.stdout
    assert out.stdout.count("torch.ops.fajit.attention.default(") == 1, out.stdout


# ---- the args the launch writes (CPU tensors, the library's forward replaced by a recorder) ----------------------
class Recorder:
    def __init__(self, monkeypatch):
        self.launches = []
        ctx = _lib.context(-1)
        monkeypatch.setattr(_torch, "_DEVICE_TYPE", "cpu")
        monkeypatch.setattr(_lib, "context", lambda device: ctx)
        monkeypatch.setattr(_torch, "_raw_stream", lambda device: 0)
        monkeypatch.setattr(_torch._local, "plans", {})
        monkeypatch.setattr(_lib.lib, "fajit_attention_forward", self._record)
        monkeypatch.setattr(_lib.lib, "fajit_attention_workspace_size", self._no_split)

    @staticmethod
    def _no_split(handle, args_ref, cfg, n_ref):
        n_ref._obj.value = 0
        return 0

    def _record(self, handle, ref_, cfg):
        self.launches.append(_lib.Args_c.from_buffer_copy(bytes(ref_._obj)))
        return 0


@pytest.fixture
def rec(monkeypatch):
    return Recorder(monkeypatch)


def _cpu_qkv(b=2, hq=8, hkv=2, nq=100, nk=77, d=64):
    return (torch.zeros(b, hq, nq, d, dtype=torch.bfloat16), torch.zeros(b, hkv, nk, d, dtype=torch.bfloat16),
            torch.zeros(b, hkv, nk, d, dtype=torch.bfloat16))


def test_variant_fields(rec):
    q, k, v = _cpu_qkv()
    sinks, alibi = torch.zeros(8), torch.zeros(2, 8)
    fajit.attention(q, k, v, causal=True, window_size=(16, 0), softcap=30.0, alibi_slopes=alibi, learnable_sink=sinks,
                    attention_chunk=64)
    a = rec.launches[-1]
    assert (a.window, a.window_left, a.window_right, a.softcap, a.attention_chunk) == (1, 16, 0, 30.0, 64)
    assert (a.sinks, a.alibi_slopes, a.alibi_slopes_batch_stride) == (sinks.data_ptr(), alibi.data_ptr(), 8)
    assert a.struct_size == _lib.H.defines.get("FAJIT_ATTENTION_ARGS_SIZE_3", a.struct_size) or a.struct_size > 0
    fajit.attention(q, k, v, window_size=(-1, 7), alibi_slopes=alibi[0])
    a = rec.launches[-1]
    assert (a.window, a.window_left, a.window_right, a.alibi_slopes_batch_stride, a.sinks) == (1, -1, 7, 0, 0)
    fajit.attention(q, k, v)  # plain: every variant field 0, as fajit.h asks
    a = rec.launches[-1]
    assert (a.window, a.window_left, a.window_right, a.softcap, a.sinks, a.alibi_slopes, a.attention_chunk,
            a.cu_seqlens_q, a.cu_seqlens_k) == (0,) * 9


def test_variant_plans(rec):
    # a repeated variant call takes its plan (with the new tensors' pointers); another window misses
    q, k, v = _cpu_qkv()
    s1, s2 = torch.zeros(8), torch.ones(8)
    fajit.attention(q, k, v, causal=True, window_size=(16, 0), learnable_sink=s1)
    assert len(_torch._local.plans) == 1
    fajit.attention(q, k, v, causal=True, window_size=(16, 0), learnable_sink=s2)
    assert len(_torch._local.plans) == 1 and rec.launches[-1].sinks == s2.data_ptr()
    assert rec.launches[-1].window_left == 16
    fajit.attention(q, k, v, causal=True, window_size=(17, 0), learnable_sink=s2)
    assert len(_torch._local.plans) == 2 and rec.launches[-1].window_left == 17
    launches = len(rec.launches)
    with pytest.raises(NotImplementedError, match="fajit::attention"):  # the op (CUDA only: CPU tensors here)
        fajit.attention(q, k, v, causal=True, window_size=(17, 0), learnable_sink=s2.to(torch.bfloat16))
    assert len(_torch._local.plans) == 2 and len(rec.launches) == launches, \
        "a bf16 sink (converted per call) must take the op, not a plan"
    with pytest.raises(ValueError, match=r"window_size: \(True, 0\)"):  # True == 1: must not hit a (1, 0) plan
        fajit.attention(q, k, v, window_size=(1, 0))
        fajit.attention(q, k, v, window_size=(True, 0))


def test_varlen_fields(rec):
    # the op is registered for CUDA only: its implementation (_varlen._forward) is called as the op would call it,
    # after the entry point's checks
    from fajit import _varlen

    def varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=False, softmax_scale=None, seqused_k=None, block_table=None,
               return_lse=False, **variant):
        _varlen.check(q, k, v, cu_q, cu_k, max_q, max_k, seqused_k, block_table, None, 0)
        o = torch.empty_like(q)
        lse = torch.empty(q.shape[1], q.shape[0]) if return_lse else None
        var = _variants.check(q, cu_q.shape[0] - 1, q.shape[1], **variant)
        scale = softmax_scale or q.shape[-1] ** -0.5
        _varlen._forward(q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal, scale, "", seqused_k, block_table, 0, var)
        return (o, lse) if return_lse else o
    q = torch.zeros(300, 8, 64, dtype=torch.bfloat16)
    kv = torch.zeros(250, 2, 3, 64, dtype=torch.bfloat16)  # packed K and V in one buffer: strides (384, 64)
    k, v = kv[:, :, 0], kv[:, :, 1]
    cu_q, cu_k = torch.tensor([0, 100, 300], dtype=torch.int32), torch.tensor([0, 50, 250], dtype=torch.int32)
    used, alibi = torch.tensor([40, 200], dtype=torch.int32), torch.zeros(2, 8)
    o, lse = varlen(q, k, v, cu_q, cu_k, 200, 200, causal=True, seqused_k=used, return_lse=True,
                    alibi_slopes=alibi, softcap=5.0)
    a = rec.launches[-1]
    assert (a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim) == (2, 8, 2, 200, 200, 64)
    assert (a.cu_seqlens_q, a.cu_seqlens_k, a.seqlens_k) == (cu_q.data_ptr(), cu_k.data_ptr(), used.data_ptr())
    assert tuple(a.q_stride)[1:] == (64, 512) and tuple(a.k_stride)[1:] == (192, 384) and a.causal == 1
    assert (a.o, a.lse) == (o.data_ptr(), lse.data_ptr()) and lse.shape == (8, 300)
    assert (a.alibi_slopes, a.alibi_slopes_batch_stride, a.softcap, a.block_table) == (alibi.data_ptr(), 8, 5.0, 0)
    assert a.softmax_scale == pytest.approx(0.125)
    pool = torch.zeros(20, 16, 2, 64, dtype=torch.bfloat16)  # [pages, page_size, Hkv, D]
    table = torch.zeros(2, 4, dtype=torch.int32)
    varlen(q, pool, pool, cu_q, None, 200, 64, block_table=table, seqused_k=used, softmax_scale=0.5)
    a = rec.launches[-1]
    assert (a.block_table, a.max_pages, a.page_size, a.cu_seqlens_k, a.seqlen_k) == (table.data_ptr(), 4, 16, 0, 64)
    assert tuple(a.k_stride) == (16 * 2 * 64, 64, 128) and a.softmax_scale == 0.5


def test_launch_args_reach_the_library(monkeypatch):
    # the library reads the SIZE_3 fields: it refuses them (FAJIT_ERR_UNSUPPORTED, before varlen and the variants
    # are built) or checks them and stops at the missing device (FAJIT_ERR_NO_DEVICE)
    ctx = _lib.context(-1)
    monkeypatch.setattr(_lib, "context", lambda device: ctx)
    monkeypatch.setattr(_torch, "_raw_stream", lambda device: 0)
    q, k, v = _cpu_qkv()
    variant = _variants.Variant(16, 0, 30.0, None, torch.zeros(8), 0)
    with pytest.raises(fajit.FajitError) as e:
        _torch._forward(q, k, v, torch.empty_like(q), None, True, 0.125, False, "", variant=variant)
    assert e.value.status_name in ("FAJIT_ERR_UNSUPPORTED", "FAJIT_ERR_NO_DEVICE"), e.value
    if e.value.status_name == "FAJIT_ERR_UNSUPPORTED":
        assert "variant" in e.value.message or "window" in e.value.message, e.value


def test_no_key_rows_with_sinks():
    q, k, v = _cpu_qkv(nk=0)
    o, lse = torch.full_like(q, float("nan")), torch.full((2, 8, 100), float("nan"))
    sinks = torch.arange(8, dtype=torch.float32)
    _torch._forward(q, k, v, o, lse, False, 0.125, False, "", variant=_variants.Variant(sinks=sinks))
    assert (o == 0).all() and torch.equal(lse, sinks[None, :, None].expand(2, 8, 100))


# ---- the reference against torch's SDPA with explicit masks (float64, CPU) --------------------------------------
@pytest.mark.parametrize("nq,nk,causal,window,chunk", [(7, 7, True, (2, 0), 0), (5, 9, False, (3, 1), 0),
                                                       (9, 5, True, (-1, -1), 0), (12, 12, True, (-1, -1), 4),
                                                       (6, 11, False, (-1, 2), 3)])
def test_reference_masks(nq, nk, causal, window, chunk):
    g = torch.Generator().manual_seed(nq * 100 + nk)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g, dtype=torch.float64) for n in (nq, nk, nk))
    o, lse = ref.attention(q, k, v, causal, 0.3, window, chunk=chunk)
    mask = torch.zeros(nq, nk, dtype=torch.bool)
    for i in range(nq):
        p = i + nk - nq
        for j in range(nk):
            ok = (not causal or j <= p) and (window[0] < 0 or j >= p - window[0]) and (window[1] < 0 or j <= p + window[1])
            ok = ok and (chunk == 0 or j // chunk == p // chunk)
            mask[i, j] = ok
    rows = mask.any(-1)
    sd = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    assert torch.allclose(o[:, :, rows], sd[:, :, rows], atol=1e-10)
    assert (o[:, :, ~rows] == 0).all() and torch.isinf(lse[:, :, ~rows]).all()


def test_reference_sinks_softcap_alibi():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64) for _ in range(3))
    sinks, slopes = torch.tensor([0.5, -1.0]), torch.tensor([0.25, 0.5])
    o, lse = ref.attention(q, k, v, True, 1.0, softcap=2.0, alibi=slopes, sinks=sinks)
    s = 2.0 * torch.tanh(q @ k.transpose(-1, -2) / 2.0)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    s = s - slopes.double()[:, None, None] * (i - j).abs()
    s = s.masked_fill(j > i, -math.inf)
    full = torch.cat([s, sinks.double()[None, :, None, None].expand(1, 2, 6, 1)], -1)  # gpt-oss's eager formula
    p = torch.softmax(full, -1)[..., :-1]
    assert torch.allclose(o, p @ v) and torch.allclose(lse, torch.logsumexp(full, -1))

