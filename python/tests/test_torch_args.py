"""test_torch_args.py - fajit.attention's argument checks and its fake (meta) implementation, with torch
but without a GPU: CUDA tensors are made under torch's FakeTensorMode (shapes, strides and devices, no
memory), so nothing reaches the library. Also: torch.export (strict, i.e. traced by Dynamo, as
torch.compile(fullgraph=True) traces) keeps fajit::attention in one graph. Skipped without torch.
"""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: fajit.attention's checks need it")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import fajit  # noqa: E402


@pytest.fixture
def fake():
    with FakeTensorMode() as mode:
        yield mode


def _qkv(hq=8, hkv=2, nq=100, nk=77, d=64, dtype=torch.bfloat16, b=2):
    q = torch.empty(b, hq, nq, d, dtype=dtype, device="cuda")
    k = torch.empty(b, hkv, nk, d, dtype=dtype, device="cuda")
    return q, k, torch.empty_like(k)


def test_fake_shapes(fake):
    q, k, v = _qkv()
    o, lse = fajit.attention(q, k, v, causal=True, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous()
    assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
    o = fajit.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), layout="bnhd")
    assert o.shape == (2, 100, 8, 64) and o.is_contiguous()
    out = torch.empty_like(q)
    assert fajit.attention(q, k, v, out=out) is out
    o, lse = fajit.attention(q, k, v, out=out, return_lse=True)
    assert o is out and lse.shape == (2, 8, 100)
    assert fajit.scaled_dot_product_attention(q, k, v, enable_gqa=True).shape == q.shape


def _expect(exc, text, *args, **kwargs):
    with pytest.raises(exc, match=text):
        fajit.attention(*args, **kwargs)


def test_dtype_errors(fake):
    q, k, v = _qkv()
    _expect(TypeError, r"q: dtype torch.float32 is not supported", q.float(), k, v)
    _expect(TypeError, r"k: dtype torch.float16 differs from q's torch.bfloat16", q, k.half(), v)
    _expect(TypeError, r"q: expected a torch.Tensor, got list", [1], k, v)


def test_rank_and_shape_errors(fake):
    q, k, v = _qkv()
    _expect(ValueError, r"q: expected a 4-d tensor", q[0], k, v)
    _expect(ValueError, r"v: expected a 4-d tensor", q, k, v[0])
    _expect(ValueError, r"k: batch 1 differs from q's 2", q, k[:1], v[:1])
    _expect(ValueError, r"k: head dim 128 differs from q's 64", *(_qkv()[0], *_qkv(d=128)[1:]))
    _expect(ValueError, r"v: \(B, H, N, D\) \(2, 2, 76, 64\) differs", q, k, v[:, :, :76])
    _expect(ValueError, r"k: 3 heads; q's head count 8 must be a multiple", *(_qkv()[0], *_qkv(hkv=3)[1:]))
    _expect(ValueError, r"out: shape \(2, 8, 99, 64\) differs", q, k, v, out=q[:, :, :99])
    _expect(ValueError, r"layout: 'nhd'", q, k, v, layout="nhd")


def test_strides_and_devices(fake):
    q, k, v = _qkv()
    k_t = torch.empty(2, 2, 64, 77, dtype=torch.bfloat16, device="cuda").transpose(2, 3)
    _expect(ValueError, r"k: the last dim must be contiguous \(stride 1\)", q, k_t, v)
    o = fajit.attention(q[:, :, ::2], k[:, :, 1:], v[:, :, 1:])  # gaps in the other dims are fine
    assert o.shape == (2, 8, 50, 64)


def test_scale_and_config_errors(fake):
    q, k, v = _qkv()
    _expect(ValueError, r"scale: 0", q, k, v, scale=0)
    _expect(ValueError, r"scale: nan", q, k, v, scale=float("nan"))
    _expect(TypeError, r"config: expected a fajit.Config", q, k, v, config=3)


def test_cpu_tensors_are_refused():
    q = torch.zeros(1, 2, 16, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"q: on cpu; fajit runs on CUDA tensors"):
        fajit.attention(q, q, q)


def test_sdpa_refusals(fake):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="enable_gqa=True"):
        fajit.scaled_dot_product_attention(q, k, v)
    with pytest.raises(ValueError, match="is_causal with L 100 != S 77"):
        fajit.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    with pytest.raises(ValueError, match="attn_mask"):
        fajit.scaled_dot_product_attention(q, k, v, attn_mask=q, enable_gqa=True)
    with pytest.raises(ValueError, match="dropout_p"):
        fajit.scaled_dot_product_attention(q, k, v, dropout_p=0.1, enable_gqa=True)


_EXPORT = r"""
import torch, fajit
from torch._subclasses.fake_tensor import FakeTensorMode

cfg = fajit.config(head_dim=64, dtype="bf16", causal=True)

class M(torch.nn.Module):
    def forward(self, q, k, v, lens):
        o, lse = fajit.attention(q * 2, k, v, causal=True, return_lse=True)
        o2 = fajit.attention(q, k, v, out=torch.empty_like(q), scale=0.5)
        o3 = fajit.attention(q, k, v, causal=True, config=cfg)
        o4 = fajit.attention(q, k, v, causal=True, seqlens_k=lens, num_splits=3)  # decode arguments
        return o + o2 + o3 + o4, lse.sum()

with FakeTensorMode():
    q = torch.empty(2, 8, 100, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.empty(2, 2, 77, 64, dtype=torch.bfloat16, device="cuda")
    lens = torch.empty(2, dtype=torch.int32, device="cuda")
    ep = torch.export.export(M(), (q, k, torch.empty_like(k), lens), strict=True)
print(ep.graph_module.code)
"""


@pytest.mark.parametrize("torch_first", [True, False], ids=["torch-imported-first", "fajit-imported-first"])
def test_dynamo_keeps_the_op_in_the_graph(torch_first):
    # a fresh process, so the first fajit.attention call happens inside Dynamo's trace
    code = _EXPORT if torch_first else _EXPORT.replace("import torch, fajit", "import fajit, torch")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("torch.ops.fajit.attention.default(") == 3, out.stdout
    assert "torch.ops.fajit.attention_out.default(" in out.stdout
    assert "'sm_80 bf16 d64 br128 bc64 s2 sw128 w4 causal'" in out.stdout  # a Config passes as its text


# ---- the launch path's fajit_attention_args, filled from real (CPU) tensors and checked by the library ------
@pytest.fixture
def no_device(monkeypatch):
    """fajit._torch._forward on CPU tensors through the context without a device: the library checks every
    field of the args, then stops with FAJIT_ERR_NO_DEVICE; nothing is launched."""
    from fajit import _lib, _torch
    ctx = _lib.context(-1)
    monkeypatch.setattr(_lib, "context", lambda device: ctx)
    monkeypatch.setattr(_torch, "_raw_stream", lambda device: 0)
    return _torch._forward


def _cpu(shape, d=64):
    return torch.zeros(*shape[:-1], d, dtype=torch.bfloat16)[..., :shape[-1]]


def test_launch_args_reach_the_library(no_device):
    q, k = _cpu((2, 8, 100, 64)), _cpu((2, 2, 77, 64))
    with pytest.raises(fajit.FajitError) as e:
        no_device(q, k, k, torch.empty_like(q), torch.empty(2, 8, 100), True, 0.125, False, "")
    assert e.value.status_name == "FAJIT_ERR_NO_DEVICE", e.value
    # the same in [B, N, H, D]
    qb, kb = _cpu((2, 100, 8, 64)), _cpu((2, 77, 2, 64))
    with pytest.raises(fajit.FajitError) as e:
        no_device(qb, kb, kb, torch.empty_like(qb), None, False, 0.125, True, "")
    assert e.value.status_name == "FAJIT_ERR_NO_DEVICE", e.value


def test_launch_args_strides_by_layout(no_device):
    k = _cpu((2, 2, 77, 64))
    q_rows = _cpu((2, 8, 100, 64), d=68)  # bhnd: sequence stride 68 elements
    with pytest.raises(fajit.FajitInputError, match=r"q_stride\[2\] = 68"):
        no_device(q_rows, k, k, torch.empty(2, 8, 100, 64, dtype=torch.bfloat16), None, False, 0.125, False, "")
    q_heads = _cpu((2, 100, 8, 64), d=68)  # bnhd: the head stride is the 68
    kb = _cpu((2, 77, 2, 64))
    with pytest.raises(fajit.FajitInputError, match=r"q_stride\[1\] = 68"):
        no_device(q_heads, kb, kb, torch.empty(2, 100, 8, 64, dtype=torch.bfloat16), None, False, 0.125, True, "")


def test_launch_config_must_match(no_device):
    q, k = _cpu((1, 2, 64, 64)), _cpu((1, 2, 64, 64))
    cfg = fajit.config(head_dim=64, dtype="bf16")  # noncausal
    with pytest.raises(fajit.FajitInputError, match="causal"):
        no_device(q, k, k, torch.empty_like(q), None, True, 0.125, False, cfg.text)


def test_launch_without_keys_or_rows(no_device):
    q, k = _cpu((1, 2, 5, 64)), _cpu((1, 2, 0, 64))
    o, lse = torch.full_like(q, float("nan")), torch.full((1, 2, 5), float("nan"))
    no_device(q, k, k, o, lse, False, 0.125, False, "")  # returns before the library: nothing to launch
    assert (o == 0).all() and (lse == float("-inf")).all()
    no_device(q[:, :, :0], _cpu((1, 2, 3, 64)), _cpu((1, 2, 3, 64)), o[:, :, :0], None, False, 0.125, False, "")


# ---- decode arguments: seqlens_k, block_table / page_size, num_splits -----------------------------------------
def _lens(b=2, dtype=torch.int32, device="cuda"):
    return torch.empty(b, dtype=dtype, device=device)


def _pool(pages=10, hkv=2, page=16, d=64, layout="bhnd"):
    shape = (pages, hkv, page, d) if layout == "bhnd" else (pages, page, hkv, d)
    k = torch.empty(*shape, dtype=torch.bfloat16, device="cuda")
    return k, torch.empty_like(k)


def test_decode_fake_shapes(fake):
    q, k, v = _qkv(nq=4, nk=300)
    o, lse = fajit.attention(q, k, v, causal=True, return_lse=True, seqlens_k=_lens(), num_splits=7)
    assert o.shape == q.shape and lse.shape == (2, 8, 4)
    kp, vp = _pool()
    table = torch.empty(2, 5, dtype=torch.int32, device="cuda")
    o = fajit.attention(q, kp, vp, block_table=table, seqlens_k=_lens(), num_splits=None)
    assert o.shape == q.shape
    qb = q.transpose(1, 2)  # [B, Nq, Hq, D] with vLLM-style [pages, page_size, Hkv, D] pools
    kb, vb = _pool(layout="bnhd", page=64)
    o = fajit.attention(qb, kb, vb, layout="bnhd", block_table=table, page_size=64, out=torch.empty_like(qb))
    assert o.shape == qb.shape


def test_decode_seqlens_errors(fake):
    q, k, v = _qkv(nq=1)
    _expect(TypeError, r"seqlens_k: dtype torch.int64: must be torch.int32", q, k, v, seqlens_k=_lens(dtype=torch.int64))
    _expect(TypeError, r"seqlens_k: expected an int32 torch.Tensor", q, k, v, seqlens_k=[3, 4])
    _expect(ValueError, r"seqlens_k: shape \(3,\): must be \[B\] = \[2\]", q, k, v, seqlens_k=_lens(3))
    _expect(ValueError, r"seqlens_k: shape \(2, 1\)", q, k, v, seqlens_k=torch.empty(2, 1, dtype=torch.int32,
                                                                                  device="cuda"))
    _expect(ValueError, r"seqlens_k: stride 2: must be contiguous", q, k, v, seqlens_k=_lens(4)[::2])


def test_decode_seqlens_on_the_wrong_device():
    q = torch.zeros(1, 2, 16, 64, dtype=torch.float16)
    # q on the CPU is refused first (naming q); a CPU seqlens_k next to CUDA tensors names seqlens_k
    with FakeTensorMode():
        qc = torch.empty(2, 2, 1, 64, dtype=torch.float16, device="cuda")
        with pytest.raises(ValueError, match=r"seqlens_k: on cpu, q on cuda"):
            fajit.attention(qc, qc, qc, seqlens_k=torch.empty(2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"q: on cpu"):
        fajit.attention(q, q, q, seqlens_k=torch.zeros(1, dtype=torch.int32))


def test_decode_paged_errors(fake):
    q, _, _ = _qkv(nq=1)
    kp, vp = _pool()
    table = torch.empty(2, 5, dtype=torch.int32, device="cuda")
    _expect(TypeError, r"block_table: dtype torch.int64", q, kp, vp, block_table=table.long())
    _expect(ValueError, r"block_table: shape \(3, 5\): must be \[B, max_pages\] with B = 2", q, kp, vp,
            block_table=torch.empty(3, 5, dtype=torch.int32, device="cuda"))
    _expect(ValueError, r"block_table: shape \(2, 0\)", q, kp, vp,
            block_table=torch.empty(2, 0, dtype=torch.int32, device="cuda"))
    _expect(ValueError, r"block_table: shape \(10,\)", q, kp, vp,
            block_table=torch.empty(10, dtype=torch.int32, device="cuda"))
    _expect(ValueError, r"block_table: strides \(1, 2\): must be contiguous", q, kp, vp,
            block_table=torch.empty(5, 2, dtype=torch.int32, device="cuda").t())
    _expect(ValueError, r"page_size: 32 differs from the page pools' rows per page 16", q, kp, vp, block_table=table,
            page_size=32)
    _expect(ValueError, r"page_size: 16 without block_table", q, *_qkv()[1:], page_size=16)
    _expect(ValueError, r"k: 24 rows per page: the page size must be a positive multiple of 16", q,
            *_pool(page=24), block_table=table)
    _expect(ValueError, r"v: \(pages, H, page_size, D\) \(9, 2, 16, 64\) differs", q, kp, vp[:9], block_table=table)
    _expect(ValueError, r"k: 3 heads", q, *_pool(hkv=3), block_table=table)


def test_decode_num_splits_errors(fake):
    q, k, v = _qkv(nq=1)
    _expect(ValueError, r"num_splits: 1025: must be None or 0 \(the library's heuristic\), 1 \(no split\) or 2..1024",
            q, k, v, num_splits=1025)
    _expect(ValueError, r"num_splits: -1", q, k, v, num_splits=-1)
    _expect(ValueError, r"num_splits: 2.0", q, k, v, num_splits=2.0)
    _expect(ValueError, r"num_splits: True", q, k, v, num_splits=True)


def test_decode_launch_args_reach_the_library(no_device):
    # paged with per-sequence lengths, from CPU tensors: the library reads every field and stops at the missing
    # device; forced splits out of range and a page size that is not a multiple of 16 (which pass Python only
    # here, calling _forward directly) are named by the library too
    q, kp = _cpu((2, 8, 1, 64)), _cpu((6, 2, 16, 64))
    lens, table = torch.zeros(2, dtype=torch.int32), torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(fajit.FajitError) as e:
        no_device(q, kp, kp, torch.empty_like(q), None, True, 0.125, False, "", lens, table, 0)
    assert e.value.status_name == "FAJIT_ERR_NO_DEVICE", e.value
    with pytest.raises(fajit.FajitInputError, match=r"num_splits = 1025"):
        no_device(q, kp, kp, torch.empty_like(q), None, True, 0.125, False, "", lens, table, 1025)
    k8 = _cpu((6, 2, 8, 64))
    with pytest.raises(fajit.FajitInputError, match=r"page_size = 8"):
        no_device(q, k8, k8, torch.empty_like(q), None, False, 0.125, False, "", None, table, 0)
