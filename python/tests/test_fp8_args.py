"""test_fp8_args.py - the FP8 arguments of fajit.attention and fajit.varlen_attention without a GPU: float8_e4m3fn
tensors and the q_descale / k_descale / v_descale keywords (FlashAttention-3's names): their checks (TypeError /
ValueError naming the argument), the fake implementations' output dtype, the fajit_attention_args fields the launch
writes (CPU tensors, the library's forward replaced by a recorder, as in test_variant_args.py), what the library
answers to FP8 varlen args (a context without a device), and FP8 configs' canonical text. Skipped without torch or
without torch.float8_e4m3fn.
"""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fajit.attention needs it")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import fajit  # noqa: E402
from fajit import _fp8, _lib, _torch, _variants, _varlen  # noqa: E402

if not _fp8.HAVE_FP8:
    pytest.skip("no torch.float8_e4m3fn or no FP8 fields (SIZE_4) in this fajit.h", allow_module_level=True)

E4M3 = torch.float8_e4m3fn
DT = _lib.DTYPE


def _qkv(b=2, hq=8, hkv=2, nq=100, nk=77, d=128, dtype=E4M3, kv_dtype=None, device="cuda"):
    q = torch.empty(b, hq, nq, d, dtype=dtype, device=device)
    k = torch.empty(b, hkv, nk, d, dtype=kv_dtype or dtype, device=device)
    return q, k, torch.empty_like(k)


def test_fp8_fake_output_dtype():
    with FakeTensorMode():
        q, k, v = _qkv()
        ds = torch.empty(2, 2, device="cuda")
        o, lse = fajit.attention(q, k, v, causal=True, return_lse=True, q_descale=ds, k_descale=ds, v_descale=ds)
        assert o.dtype == torch.bfloat16 and o.shape == q.shape and lse.shape == (2, 8, 100)


def test_fp8_checks():
    with FakeTensorMode():
        q, k, v = _qkv()
        with pytest.raises(TypeError, match="v: dtype torch.bfloat16 differs from k's"):
            fajit.attention(q, k, v.to(torch.bfloat16))
        with pytest.raises(TypeError, match="k: dtype torch.bfloat16: e4m3 queries need e4m3 k and v"):
            fajit.attention(q, k.to(torch.bfloat16), v.to(torch.bfloat16))
        with pytest.raises(TypeError, match="out: dtype torch.float8_e4m3fn: O must be torch.bfloat16 or"):
            fajit.attention(q, k, v, out=torch.empty_like(q))
        with pytest.raises(TypeError, match="q_descale: dtype torch.float16: must be torch.float32"):
            fajit.attention(q, k, v, q_descale=torch.empty(2, 2, dtype=torch.float16, device="cuda"))
        with pytest.raises(ValueError, match=r"k_descale: shape \(2, 8\): must be \[B, Hkv\] = \[2, 2\]"):
            fajit.attention(q, k, v, k_descale=torch.empty(2, 8, device="cuda"))
        qh, kh, vh = _qkv(dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="q_descale: a descale applies to e4m3 tensors only"):
            fajit.attention(qh, kh, vh, q_descale=torch.empty(2, 2, device="cuda"))
        qb, k8, v8 = _qkv(dtype=torch.bfloat16, kv_dtype=E4M3)  # an FP8 K/V cache: accepted, but no q_descale
        with pytest.raises(ValueError, match="q_descale: a descale applies to e4m3 tensors only"):
            fajit.attention(qb, k8, v8, q_descale=torch.empty(2, device="cuda"))


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


def _launch(q, k, v, out=None, **descales):
    """What fajit.attention's op does on a GPU, on CPU tensors: the checks, then _forward (the op itself has no
    CPU kernel; fajit.attention's eager plan is checked against it in test_fp8_eager_plan)."""
    b, hq, hkv, nq, nk, d = _torch.check_args(q, k, v, out, "bhnd")
    fp8 = _fp8.check(q, k, v, out, b, hkv, **descales)
    o = out if out is not None else torch.empty(q.shape, dtype=_fp8.out_dtype(q.dtype))
    _torch._forward(q, k, v, o, None, True, 0.1, False, "", fp8=fp8)
    return o


def test_fp8_fields(rec):
    q, k, v = (torch.zeros(2, h, n, 128).to(E4M3) for h, n in ((8, 100), (2, 77), (2, 77)))
    qd, kd, vd = torch.ones(2, 2), torch.ones(2, 2), torch.ones(2)
    o = _launch(q, k, v, q_descale=qd, k_descale=kd, v_descale=vd)
    a = rec.launches[-1]
    assert o.dtype == torch.bfloat16
    assert (a.dtype, a.kv_dtype, a.out_dtype) == (DT["FAJIT_DTYPE_E4M3"], 0, DT["FAJIT_DTYPE_BF16"])
    assert (a.q_descale, a.k_descale, a.descale_batch_stride) == (qd.data_ptr(), kd.data_ptr(), 2)
    assert a.v_descale not in (0, vd.data_ptr())  # [Hkv] broadcast to the others' [B, Hkv]: a copy
    out = torch.empty(2, 8, 100, 128, dtype=torch.float16)
    _launch(q, k, v, out=out)
    a = rec.launches[-1]
    assert (a.out_dtype, a.q_descale, a.k_descale, a.v_descale, a.descale_batch_stride) == (DT["FAJIT_DTYPE_F16"], 0,
                                                                                            0, 0, 0)
    qb = torch.zeros(2, 8, 100, 128, dtype=torch.bfloat16)  # an FP8 K/V cache under bf16 queries
    _launch(qb, k, v, k_descale=kd[0], v_descale=kd[0])
    a = rec.launches[-1]
    assert (a.dtype, a.kv_dtype, a.out_dtype, a.descale_batch_stride) == (DT["FAJIT_DTYPE_BF16"],
                                                                          DT["FAJIT_DTYPE_E4M3"], 0, 0)
    fajit.attention(qb, qb[:, :2], qb[:, :2])  # plain (through the eager plan): every FP8 field 0
    a = rec.launches[-1]
    assert (a.kv_dtype, a.out_dtype, a.q_descale, a.k_descale, a.v_descale) == (0,) * 5


def test_fp8_eager_plan(rec):
    # a repeated FP8 signature takes the eager plan (no checks, no dispatcher): the args the op's launch writes, with
    # each call's own descale pointers; descales the checks would copy, or that require grad, take the op instead
    q, k, v = (torch.zeros(2, h, n, 128).to(E4M3) for h, n in ((8, 100), (2, 77), (2, 77)))
    qd, kd, vd = torch.ones(2, 2), torch.ones(2, 2), torch.ones(2, 2)
    o = fajit.attention(q, k, v, causal=True, scale=0.1, q_descale=qd, k_descale=kd, v_descale=vd)
    assert len(_torch._local.plans) == 1 and o.dtype == torch.bfloat16 and o.shape == q.shape
    _launch(q, k, v, out=o, q_descale=qd, k_descale=kd, v_descale=vd)  # the op's args for the same call
    assert bytes(rec.launches[-2]) == bytes(rec.launches[-1])
    qd2, kd2, vd2 = torch.full((2, 2), 2.0), torch.full((2, 2), 3.0), torch.full((2, 2), 4.0)
    out = torch.empty(2, 8, 100, 128, dtype=torch.float16)
    for _ in range(2):  # the first call makes the out= signature's plan, the second takes it
        assert fajit.attention(q, k, v, causal=True, scale=0.1, out=out, q_descale=qd2, k_descale=kd2,
                               v_descale=vd2) is out
    assert len(_torch._local.plans) == 2
    a = rec.launches[-1]
    assert (a.o, a.q_descale, a.k_descale, a.v_descale, a.descale_batch_stride, a.out_dtype) == (
        out.data_ptr(), qd2.data_ptr(), kd2.data_ptr(), vd2.data_ptr(), 2, DT["FAJIT_DTYPE_F16"])
    _launch(q, k, v, out=out, q_descale=qd2, k_descale=kd2, v_descale=vd2)
    assert bytes(a) == bytes(rec.launches[-1])
    qb = torch.zeros(2, 8, 100, 128, dtype=torch.bfloat16)  # an FP8 K/V cache under bf16 queries, [Hkv] descales
    for _ in range(2):
        ob = fajit.attention(qb, k, v, causal=True, scale=0.1, k_descale=kd[0], v_descale=vd[1])
    assert len(_torch._local.plans) == 3 and ob.dtype == torch.bfloat16
    a = rec.launches[-1]
    assert (a.kv_dtype, a.q_descale, a.k_descale, a.v_descale, a.descale_batch_stride) == (
        DT["FAJIT_DTYPE_E4M3"], 0, kd[0].data_ptr(), vd[1].data_ptr(), 0)
    # what takes the op: a [Hkv] descale beside [B, Hkv] ones (broadcast into a copy), a non-contiguous one, grad
    for ds in ((qd, kd, vd[0]), (qd, kd, torch.ones(2, 2).t()), (qd, kd, torch.ones(2, 2, requires_grad=True))):
        key = _torch._descale_key(*ds)
        plannable = key is not False and _torch._fp8_plannable(_fp8.check(q, k, v, None, 2, 2, *ds), *ds)
        assert not plannable, f"a plan for descales {[tuple(t.shape) for t in ds]}"
    assert _torch._fp8_plannable(_fp8.check(q, k, v, None, 2, 2, qd, kd, vd), qd, kd, vd)


def test_fp8_config_text():
    # the canonical text of an FP8 config round-trips; O's dtype word only when it is not the default
    text = "sm_90a e4m3,o=f16 d128 br128 bc128 s2 sw128 w12 ov pp noncausal"
    c = fajit.config(text)
    assert c.text == text and c.dtype == "e4m3"
    assert fajit.config("sm_90a e4m3 d64 br192 bc128 s2 sw64 w16 ov pp causal").text.startswith("sm_90a e4m3 d64")
    with pytest.raises(_lib.FajitError, match="dtype = e4m3 on the sm_80 path"):
        fajit.config("sm_80 e4m3 d128 br128 bc64 s2 sw128 w4 noncausal")


def test_fp8_quantize_and_hadamard():
    # per (batch, KV head) descales; the Hadamard rotation keeps Q K^T and lowers the rounding error of outliers
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 8, 64, 128), torch.randn(2, 2, 64, 128), torch.randn(2, 2, 64, 128)
    q[..., [3, 17]] *= 20
    k[..., [3, 17]] *= 20
    m = _fp8.hadamard_matrix(128, "cpu", seed=1)
    assert torch.allclose(m @ m.T, torch.eye(128), atol=1e-5)
    ref = q @ k.repeat_interleave(4, 1).transpose(-1, -2)
    errs = []
    for had in (False, True):
        q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q, k, v, hadamard=had, seed=1)
        assert q8.dtype == E4M3 and qd.shape == (2, 2) and kd.shape == (2, 2) and vd.shape == (2, 2)
        assert torch.allclose(vd, v.abs().amax(dim=(2, 3)) / 448)
        qf = q8.float() * qd.repeat_interleave(4, 1)[..., None, None]
        kf = k8.float() * kd[..., None, None]
        got = qf @ kf.repeat_interleave(4, 1).transpose(-1, -2)
        errs.append(((got - ref).pow(2).mean() / ref.pow(2).mean()).sqrt().item())
    assert errs[1] < errs[0]  # incoherent processing helps on outlier channels
    q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), layout="bnhd")
    assert q8.shape == (2, 64, 8, 128) and qd.shape == (2, 2)


# ---- fajit.varlen_attention with e4m3 q, k, v (descale row b = sequence b) -------------------------------------------
def _packed(tq=300, tk=250, hq=8, hkv=2, d=128, b=3, dtype=E4M3, kv_dtype=None, device="cuda"):
    q = torch.empty(tq, hq, d, dtype=dtype, device=device)
    k = torch.empty(tk, hkv, d, dtype=kv_dtype or dtype, device=device)
    cu = torch.zeros(b + 1, dtype=torch.int32, device=device)
    return q, k, torch.empty_like(k), cu, cu.clone()


def test_fp8_varlen_fake_output_dtype():
    with FakeTensorMode():
        q, k, v, cu_q, cu_k = _packed()
        ds = torch.empty(3, 2, device="cuda")
        o, lse = fajit.varlen_attention(q, k, v, cu_q, cu_k, 120, 100, causal=True, return_lse=True, q_descale=ds,
                                        k_descale=ds, v_descale=ds, window_size=(100, 0), softcap=30.0)
        assert o.dtype == torch.bfloat16 and o.shape == q.shape and lse.shape == (8, 300)
        out = torch.empty(q.shape, dtype=torch.float16, device="cuda")
        o, lse = fajit.varlen_attention(q, k, v, cu_q, cu_k, 120, 100, out=out, return_lse=True,
                                        k_descale=ds[0], learnable_sink=torch.empty(8, device="cuda"))
        assert o is out and lse.shape == (8, 300)
        assert fajit.varlen_attention(q, k, v, cu_q, cu_k, 120, 100).dtype == torch.bfloat16  # no descales: 1.0


def test_fp8_varlen_checks():
    f = fajit.varlen_attention
    with FakeTensorMode():
        q, k, v, cu_q, cu_k = _packed()
        ds = torch.empty(3, 2, device="cuda")
        with pytest.raises(TypeError, match="k: dtype torch.bfloat16: e4m3 queries need e4m3 k and v"):
            f(q, k.to(torch.bfloat16), v.to(torch.bfloat16), cu_q, cu_k, 10, 10)
        qb, k8, v8, _, _ = _packed(dtype=torch.bfloat16, kv_dtype=E4M3)  # an FP8 K/V cache: fajit.attention's only
        with pytest.raises(TypeError, match="k: dtype torch.float8_e4m3fn under torch.bfloat16 queries: an FP8 K/V"):
            f(qb, k8, v8, cu_q, cu_k, 10, 10)
        with pytest.raises(TypeError, match="out: dtype torch.float8_e4m3fn: O must be torch.bfloat16 or"):
            f(q, k, v, cu_q, cu_k, 10, 10, out=torch.empty_like(q))
        with pytest.raises(ValueError, match=r"q_descale: shape \(4, 2\): must be \[B, Hkv\] = \[3, 2\]"):
            f(q, k, v, cu_q, cu_k, 10, 10, q_descale=torch.empty(4, 2, device="cuda"))  # [B + 1, Hkv]
        with pytest.raises(TypeError, match="v_descale: dtype torch.float16: must be torch.float32"):
            f(q, k, v, cu_q, cu_k, 10, 10, v_descale=ds.half())
        qh, kh, vh, _, _ = _packed(dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="k_descale: a descale applies to e4m3 tensors only"):
            f(qh, kh, vh, cu_q, cu_k, 10, 10, k_descale=ds)
        used = torch.empty(3, dtype=torch.int32, device="cuda")
        with pytest.raises(ValueError, match="seqused_k: the FP8 kernels take no per-sequence key counts"):
            f(q, k, v, cu_q, cu_k, 10, 10, seqused_k=used)
        with pytest.raises(ValueError, match="num_splits: 2: the FP8 kernels do not split the keys"):
            f(q, k, v, cu_q, cu_k, 10, 10, num_splits=2)
        pool = torch.empty(20, 16, 2, 128, dtype=E4M3, device="cuda")
        table = torch.empty(3, 4, dtype=torch.int32, device="cuda")
        with pytest.raises(ValueError, match="block_table: the FP8 kernels take no paged K/V"):
            f(q, pool, pool, cu_q, None, 10, 10, block_table=table, seqused_k=used)
        assert f(q, k, v, cu_q, cu_k, 10, 10, num_splits=1).shape == q.shape  # 1 = no split: taken


def _varlen_launch(q, k, v, cu_q, cu_k, max_q, max_k, out=None, causal=True, descales=None, **variant):
    """What fajit.varlen_attention's op does on a GPU, on CPU tensors: the entry point's checks, then _forward (the op
    has no CPU kernel)."""
    batch, hq, splits, fp8 = _varlen.check(q, k, v, cu_q, cu_k, max_q, max_k, None, None, out, None,
                                           **(descales or {}))
    var = _variants.check(q, batch, hq, **variant)
    o = out if out is not None else torch.empty(q.shape, dtype=_fp8.out_dtype(q.dtype))
    _varlen._forward(q, k, v, o, None, cu_q, cu_k, max_q, max_k, causal, 0.1, "", None, None, splits, var, fp8)
    return o, fp8


def _cpu_packed(b=3, hkv=2):
    q = torch.zeros(300, 8, 128).to(E4M3)
    k = torch.zeros(250, hkv, 128).to(E4M3)
    cu_q = torch.tensor([0, 100, 100, 300][:b + 1], dtype=torch.int32)
    cu_k = torch.tensor([0, 50, 60, 250][:b + 1], dtype=torch.int32)
    return q, k, torch.zeros_like(k), cu_q, cu_k


def test_fp8_varlen_fields(rec):
    q, k, v, cu_q, cu_k = _cpu_packed()
    qd, kd, vd = torch.ones(3, 2), torch.ones(3, 2), torch.ones(3, 2)
    sinks = torch.zeros(8)
    o, fp8 = _varlen_launch(q, k, v, cu_q, cu_k, 200, 190, descales=dict(q_descale=qd, k_descale=kd, v_descale=vd),
                            window_size=(100, 0), softcap=30.0, sinks=sinks)
    a = rec.launches[-1]
    assert o.dtype == torch.bfloat16 and o.shape == q.shape
    assert (a.dtype, a.kv_dtype, a.out_dtype) == (DT["FAJIT_DTYPE_E4M3"], 0, DT["FAJIT_DTYPE_BF16"])
    # descale row b is sequence b: [B, Hkv] with B = 3 sequences, so Hkv elements between rows
    assert (a.q_descale, a.k_descale, a.v_descale) == (qd.data_ptr(), kd.data_ptr(), vd.data_ptr())
    assert a.descale_batch_stride == 2
    assert (a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim) == (3, 8, 2, 200, 190, 128)
    assert (a.cu_seqlens_q, a.cu_seqlens_k, a.seqlens_k, a.block_table, a.num_splits) == (cu_q.data_ptr(),
                                                                                          cu_k.data_ptr(), 0, 0, 0)
    assert tuple(a.q_stride)[1:] == (128, 1024) and tuple(a.k_stride)[1:] == (128, 256)
    assert (a.window, a.window_left, a.window_right, a.softcap, a.sinks) == (1, 100, 0, 30.0, sinks.data_ptr())
    out = torch.empty(300, 8, 128, dtype=torch.float16)
    _varlen_launch(q, k, v, cu_q, cu_k, 200, 190, out=out, descales=dict(k_descale=kd[0], v_descale=vd[:1]))
    a = rec.launches[-1]  # [Hkv] and [1, Hkv]: one row for every sequence
    assert (a.o, a.out_dtype, a.q_descale, a.descale_batch_stride) == (out.data_ptr(), DT["FAJIT_DTYPE_F16"], 0, 0)
    assert (a.k_descale, a.v_descale) == (kd.data_ptr(), vd.data_ptr())
    _varlen_launch(q, k, v, cu_q, cu_k, 200, 190, descales=dict(q_descale=qd, v_descale=vd[0]))
    a = rec.launches[-1]  # one [B, Hkv] descale: the [Hkv] one is broadcast to it (a copy), one stride for all
    assert (a.q_descale, a.k_descale, a.descale_batch_stride) == (qd.data_ptr(), 0, 2)
    assert a.v_descale not in (0, vd.data_ptr())
    qb = torch.zeros(300, 8, 128, dtype=torch.bfloat16)  # 16-bit varlen: every FP8 field 0
    _varlen_launch(qb, qb[:250, :2], qb[:250, :2], cu_q, cu_k, 200, 190)
    a = rec.launches[-1]
    assert (a.dtype, a.kv_dtype, a.out_dtype, a.q_descale, a.k_descale, a.v_descale, a.descale_batch_stride) == \
        (DT["FAJIT_DTYPE_BF16"], 0, 0, 0, 0, 0, 0)


def test_fp8_varlen_args_reach_the_library(monkeypatch):
    # the library itself (a context without a device) takes the FP8 varlen fields as written (it stops at the missing
    # device) and refuses ALiBi with e4m3 naming alibi_slopes, as it does for fajit.attention (Python leaves that to it)
    ctx = _lib.context(-1)
    monkeypatch.setattr(_torch, "_DEVICE_TYPE", "cpu")
    monkeypatch.setattr(_lib, "context", lambda device: ctx)
    monkeypatch.setattr(_torch, "_raw_stream", lambda device: 0)
    q, k, v, cu_q, cu_k = _cpu_packed()
    ds = dict(q_descale=torch.ones(3, 2), k_descale=torch.ones(3, 2), v_descale=torch.ones(2))
    with pytest.raises(fajit.FajitError) as e:
        _varlen_launch(q, k, v, cu_q, cu_k, 200, 190, descales=ds, window_size=(100, 0), softcap=30.0)
    assert e.value.status_name == "FAJIT_ERR_NO_DEVICE", e.value
    with pytest.raises(fajit.FajitError) as e:
        _varlen_launch(q, k, v, cu_q, cu_k, 200, 190, descales=ds, alibi_slopes=torch.zeros(3, 8))
    assert e.value.status_name == "FAJIT_ERR_UNSUPPORTED" and "alibi_slopes" in e.value.message, e.value
