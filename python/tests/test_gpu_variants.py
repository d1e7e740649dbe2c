"""test_gpu_variants.py - the attention variants (sliding window, softcap, sinks, ALiBi, chunked) through
fajit.attention, and fajit.varlen_attention (packed sequences, seqused_k, paged K/V with varlen queries), on a GPU
against the float64 reference of _reference.py; then varlen under torch.compile(fullgraph=True) and in a CUDA graph.
Skipped (with the reason) without torch or without a CUDA GPU.

Check, per case (the rule of _gpu_check.py, the C GPU tests' tolerances): O and LSE are written into NaN-filled
buffers, every element is compared with the reference computed on the GPU from the same rounded inputs: no
NaN/Inf, relative L2 of O <= 1e-2 (bf16) / 2e-3 (f16), worst row <= 4x that, |LSE - ref| <= 1e-3, rows that see no
key exactly O = 0 (and LSE = -inf, or the sink logit with sinks). Varlen outputs are compared as one
[1, Hq, total, D] batch. FP8 (e4m3) cases, through fajit.attention and fajit.varlen_attention, are checked on the
dequantized inputs with their own bound (stated above FP8_CASES).
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import fajit  # noqa: E402

import _reference as ref  # noqa: E402
from _gpu_check import TOL, check_against, rel_l2  # noqa: E402

BF16, F16 = torch.bfloat16, torch.float16


def _seed(name):
    return zlib.crc32(name.encode()) % 100000


def _randn(shape, dtype, g):
    return torch.randn(*shape, device="cuda", dtype=torch.float32, generator=g).to(dtype)


def _variant_tensors(v, b, hq, g):
    """alibi ('h' = [Hq], 'bh' = [B, Hq]) and sinks tensors of a case's variant dict."""
    alibi = sinks = None
    if v.get("alibi"):
        shape = (hq,) if v["alibi"] == "h" else (b, hq)
        alibi = (torch.rand(*shape, device="cuda", generator=g) * 0.5 + 0.01).float()
    if v.get("sinks"):
        sinks = torch.randn(hq, device="cuda", generator=g).float() * 2
    return alibi, sinks


def _name(c):
    dt, b, hq, hkv, nq, nk, d, causal, layout, v = c
    var = ",".join(f"{k}={x}" for k, x in v.items())
    return (f"{'bf16' if dt == BF16 else 'f16'}-B{b}-H{hq}x{hkv}-N{nq}x{nk}-D{d}-{'causal' if causal else 'full'}-"
            f"{layout}-{var}")


# (dtype, B, Hq, Hkv, Nq, Nk, D, causal, layout, variant)
CASES = [
    (BF16, 2, 4, 4, 1000, 1000, 128, True, "bhnd", dict(window=(64, 0))),
    (F16, 2, 4, 2, 1000, 1000, 64, False, "bnhd", dict(window=(17, 33))),
    (BF16, 1, 8, 2, 17, 1000, 96, True, "bhnd", dict(window=(100, 0))),       # Nq < Nk
    (F16, 1, 4, 1, 1000, 17, 128, True, "bhnd", dict(window=(5, 0))),         # Nq > Nk: rows with no key
    (BF16, 1, 4, 4, 257, 300, 256, False, "bnhd", dict(window=(-1, 3))),
    (F16, 2, 2, 2, 300, 300, 192, False, "bhnd", dict(window=(0, 0))),
    (BF16, 2, 8, 4, 1000, 1000, 128, True, "bnhd", dict(softcap=30.0)),
    (F16, 1, 4, 4, 333, 1000, 256, False, "bhnd", dict(softcap=5.0)),
    (BF16, 2, 8, 4, 1000, 1000, 256, True, "bnhd", dict(softcap=50.0, window=(128, 0))),   # Gemma 2
    (BF16, 2, 8, 2, 1000, 1000, 64, True, "bhnd", dict(sinks=1)),
    (F16, 1, 16, 2, 1, 1000, 64, True, "bnhd", dict(sinks=1)),                # decode-like
    (BF16, 2, 8, 2, 1000, 1000, 64, True, "bnhd", dict(sinks=1, window=(127, 0))),        # gpt-oss
    (F16, 1, 4, 4, 1000, 17, 128, True, "bhnd", dict(sinks=1)),               # no-key rows: LSE = sink
    (BF16, 2, 4, 4, 1000, 1000, 128, True, "bhnd", dict(alibi="h")),
    (F16, 2, 8, 2, 300, 1000, 64, False, "bnhd", dict(alibi="bh")),
    (BF16, 1, 4, 2, 1000, 1000, 128, True, "bhnd", dict(chunk=256)),
    (F16, 2, 4, 4, 300, 1000, 96, False, "bnhd", dict(chunk=100)),
    (BF16, 1, 4, 4, 17, 17, 64, True, "bhnd", dict(chunk=16, sinks=1, softcap=20.0)),
]
CASES += [(dt, 2, 4, 2, 257, 300, d, True, "bhnd", dict(window=(31, 0), sinks=1)) for dt in (F16, BF16)
          for d in (64, 96, 128, 192, 256)]


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_variant_against_float64(case):
    dt, b, hq, hkv, nq, nk, d, causal, layout, v = case
    name = _name(case)
    g = torch.Generator(device="cuda").manual_seed(_seed(name))
    q, k, vv = _randn((b, hq, nq, d), dt, g), _randn((b, hkv, nk, d), dt, g), _randn((b, hkv, nk, d), dt, g)
    alibi, sinks = _variant_tensors(v, b, hq, g)
    window, softcap, chunk = v.get("window", (-1, -1)), v.get("softcap", 0.0), v.get("chunk", 0)
    args = (q, k, vv) if layout == "bhnd" else tuple(x.transpose(1, 2).contiguous() for x in (q, k, vv))
    o = torch.full_like(args[0], float("nan"))
    _, lse = fajit.attention(*args, causal=causal, layout=layout, return_lse=True, out=o, window_size=window,
                             softcap=softcap, alibi_slopes=alibi, learnable_sink=sinks, attention_chunk=chunk)
    torch.cuda.synchronize()
    ref_o, ref_lse = ref.attention(q, k, vv, causal, None, window, softcap, alibi, sinks, chunk)
    o = o if layout == "bhnd" else o.transpose(1, 2)
    check_against(name, o, lse, ref_o, ref_lse, kernel=fajit.last_forward())


# FP8 (e4m3 q, k, v with FlashAttention-3's descales; sm_90 only) with the variants it takes: against the float64
# reference on the dequantized inputs. Tolerance: P is rounded to e4m3 (3 mantissa bits) before PV, so O carries
# about 2-3% relative L2 on these shapes (bench/results: fajit and FA3 FP8 alike): rel L2 <= 5e-2, worst row 4x, LSE
# (the tensor cores' short FP8 accumulation moves every score) <= 5e-2; a wrong mask or scale is off by O(1).
FP8_CASES = [
    (2, 4, 4, 1000, 1000, 128, True, dict(window=(128, 0))),
    (1, 8, 2, 300, 1000, 64, False, dict(window=(100, 20))),
    (1, 4, 4, 1000, 1000, 128, True, dict(softcap=30.0)),
    (1, 8, 2, 1000, 1000, 64, True, dict(window=(127, 0), sinks=1)),         # gpt-oss
    (1, 4, 4, 1000, 300, 128, True, dict(sinks=1)),                          # rows with no key: LSE = sink
    (1, 4, 2, 1000, 1000, 256, True, dict(softcap=50.0, window=(512, 0))),   # Gemma 2
    (1, 4, 4, 1000, 1000, 128, True, dict(chunk=256)),
]


def _fp8_name(c):
    b, hq, hkv, nq, nk, d, causal, v = c
    return f"e4m3-B{b}-H{hq}x{hkv}-N{nq}x{nk}-D{d}-{'causal' if causal else 'full'}-" + ",".join(
        f"{k}={x}" for k, x in v.items())


@pytest.mark.parametrize("case", FP8_CASES, ids=_fp8_name)
def test_fp8_variant_against_float64(case):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 kernels are sm_90a's (H100 / H200); this GPU is sm_%d%d" % torch.cuda.get_device_capability())
    b, hq, hkv, nq, nk, d, causal, v = case
    name = _fp8_name(case)
    g = torch.Generator(device="cuda").manual_seed(_seed(name))
    q, k, vv = _randn((b, hq, nq, d), BF16, g), _randn((b, hkv, nk, d), BF16, g), _randn((b, hkv, nk, d), BF16, g)
    _, sinks = _variant_tensors(v, b, hq, g)
    window, softcap, chunk = v.get("window", (-1, -1)), v.get("softcap", 0.0), v.get("chunk", 0)
    q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q, k, vv)

    def deq(x8, ds):  # [B, H, N, D] e4m3 x its [B, Hkv] descale, each head its KV head's
        heads = x8.shape[1]
        return x8.double() * ds.double().repeat_interleave(heads // ds.shape[1], dim=1)[:, :, None, None]

    o = torch.full((b, hq, nq, d), float("nan"), device="cuda", dtype=BF16)
    _, lse = fajit.attention(q8, k8, v8, causal=True if causal else False, return_lse=True, out=o, q_descale=qd,
                             k_descale=kd, v_descale=vd, window_size=window, softcap=softcap, learnable_sink=sinks,
                             attention_chunk=chunk)
    torch.cuda.synchronize()
    ref_o, ref_lse = ref.attention(deq(q8, qd), deq(k8, kd), deq(v8, vd), causal, None, window, softcap, None, sinks,
                                   chunk)
    check_against(name, o, lse, ref_o, ref_lse, kernel=fajit.last_forward(), tol=5e-2, tol_lse=5e-2)


def test_sinks_in_model_dtype_and_sinks_keyword():
    # gpt-oss keeps its sinks in bf16 and transformers calls the argument s_aux: both spellings, both dtypes
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = _randn((1, 8, 200, 64), BF16, g), _randn((1, 2, 200, 64), BF16, g), _randn((1, 2, 200, 64), BF16, g)
    sinks = torch.randn(8, device="cuda", generator=g).to(BF16)
    o1 = fajit.attention(q, k, v, causal=True, learnable_sink=sinks)
    o2, lse = fajit.attention(q, k, v, causal=True, sinks=sinks.float(), return_lse=True)
    assert torch.equal(o1, o2)
    ref_o, ref_lse = ref.attention(q, k, v, True, sinks=sinks.float())
    check_against("sinks in bf16 / sinks=", o1, lse, ref_o, ref_lse, kernel=fajit.last_forward())


def test_variants_with_decode():
    # per-sequence KV lengths and paged K/V with a window and sinks: bottom-right per sequence
    g = torch.Generator(device="cuda").manual_seed(2)
    b, hq, hkv, nq, cap, d, page = 3, 8, 2, 4, 512, 128, 64
    q = _randn((b, nq, hq, d), BF16, g)
    lens = torch.tensor([512, 37, 300], dtype=torch.int32, device="cuda")
    k, v = _randn((b, cap, hkv, d), BF16, g), _randn((b, cap, hkv, d), BF16, g)
    sinks = torch.randn(hq, device="cuda", generator=g)
    for kw in (dict(window_size=(100, 0), learnable_sink=sinks), dict(softcap=30.0), dict(attention_chunk=128)):
        o = torch.full_like(q, float("nan"))
        _, lse = fajit.attention(q, k, v, causal=True, layout="bnhd", seqlens_k=lens, out=o, return_lse=True, **kw)
        ref_o, ref_lse = ref.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), True, None,
                                       kw.get("window_size", (-1, -1)), kw.get("softcap", 0.0), None,
                                       kw.get("learnable_sink"), kw.get("attention_chunk", 0), seqlens_k=lens)
        check_against(f"decode seqlens_k {kw.keys()}", o.transpose(1, 2), lse, ref_o, ref_lse,
                      kernel=fajit.last_forward())
        # the same cache as pages of a shuffled pool
        pages = cap // page
        perm = torch.randperm(b * pages, device="cuda", generator=g)
        table = perm.view(b, pages).to(torch.int32)
        pool_k = torch.empty(b * pages, page, hkv, d, device="cuda", dtype=BF16)
        pool_v = torch.empty_like(pool_k)
        pool_k[perm] = k.reshape(b * pages, page, hkv, d)
        pool_v[perm] = v.reshape(b * pages, page, hkv, d)
        o.fill_(float("nan"))
        _, lse = fajit.attention(q, pool_k, pool_v, causal=True, layout="bnhd", seqlens_k=lens, block_table=table,
                                 out=o, return_lse=True, **kw)
        check_against(f"decode paged {kw.keys()}", o.transpose(1, 2), lse, ref_o, ref_lse, kernel=fajit.last_forward())


# ---- varlen ----------------------------------------------------------------------------------------------------
def _cu(lens):
    return torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device="cuda")


def _packed(lens_q, lens_k, hq, hkv, d, dtype, g):
    q = _randn((sum(lens_q), hq, d), dtype, g)
    k, v = _randn((sum(lens_k), hkv, d), dtype, g), _randn((sum(lens_k), hkv, d), dtype, g)
    return q, k, v, _cu(lens_q), _cu(lens_k)


def _check_varlen(name, o, lse, ref_o, ref_lse, **tols):
    check_against(name, o.transpose(0, 1)[None], lse[None], ref_o.transpose(0, 1)[None], ref_lse[None],
                  kernel=fajit.last_forward(), **tols)


# (name, dtype, lens_q, lens_k, Hq, Hkv, D, causal, variant)
VARLEN = [
    ("self", BF16, [1000, 17, 1, 300], None, 8, 2, 128, True, {}),
    ("self-empty", F16, [0, 5, 0, 1000, 1], None, 4, 4, 64, False, {}),
    ("q<k", BF16, [1, 17, 200], [300, 1000, 200], 8, 8, 96, True, {}),
    ("q>k", F16, [300, 1000, 17], [17, 1, 300], 4, 1, 256, True, {}),          # rows with no key
    ("window", BF16, [1000, 200, 33], None, 8, 2, 128, True, dict(window=(64, 0))),
    ("window-full", F16, [500, 7, 900], [700, 9, 900], 4, 2, 64, False, dict(window=(20, 40))),
    ("softcap+window", BF16, [1000, 300], None, 8, 4, 256, True, dict(softcap=50.0, window=(127, 0))),
    ("sinks+window", BF16, [1000, 1, 257, 64], None, 16, 2, 64, True, dict(sinks=1, window=(127, 0))),
    ("alibi-bh", F16, [300, 1000, 5], None, 4, 4, 128, True, dict(alibi="bh")),
    ("chunk", BF16, [1000, 300, 129], None, 4, 2, 192, True, dict(chunk=128)),
]


@pytest.mark.parametrize("case", VARLEN, ids=lambda c: c[0])
def test_varlen_against_float64(case):
    name, dt, lens_q, lens_k, hq, hkv, d, causal, v = case
    lens_k = lens_k or lens_q
    g = torch.Generator(device="cuda").manual_seed(_seed(name))
    q, k, vv, cu_q, cu_k = _packed(lens_q, lens_k, hq, hkv, d, dt, g)
    alibi, sinks = _variant_tensors(v, len(lens_q), hq, g)
    window, softcap, chunk = v.get("window", (-1, -1)), v.get("softcap", 0.0), v.get("chunk", 0)
    o = torch.full_like(q, float("nan"))
    _, lse = fajit.varlen_attention(q, k, vv, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, out=o,
                                    return_lse=True, window_size=window, softcap=softcap, alibi_slopes=alibi,
                                    learnable_sink=sinks, attention_chunk=chunk)
    torch.cuda.synchronize()
    ref_o, ref_lse = ref.varlen(q, k, vv, cu_q, cu_k, causal, None, window, softcap, alibi, sinks, chunk)
    _check_varlen(f"varlen {name}", o, lse, ref_o, ref_lse)


# FP8 varlen (e4m3 q, k, v packed; descales [B, Hkv] with row b for sequence b; sm_90 only): against the float64
# reference on the dequantized inputs, per sequence. Tolerance: test_fp8_variant_against_float64's (rel L2 <= 5e-2,
# worst row 4x, LSE <= 5e-2). (name, lens_q, lens_k, Hq, Hkv, D, causal, variant)
FP8_VARLEN = [
    ("e4m3 d128 full", [1000, 17, 0, 1], [300, 1000, 5, 17], 8, 2, 128, False, {}),
    ("e4m3 d64 causal", [17, 1000, 1, 0, 300], [1000, 600, 1, 17, 300], 8, 2, 64, True, {}),  # 1000 > 600: no-key rows
    ("e4m3 d128 causal window+softcap", [1000, 1, 17, 0], [1000, 17, 1000, 1], 8, 2, 128, True,
     dict(window=(100, 0), softcap=30.0)),
]


def _fp8_packed(x, lens, hkv):
    """x [total, H, D] -> (e4m3 codes, float32 descales [B, hkv], the dequantized float64 copy): descale = amax / 448
    per (sequence, KV head's group of heads), 1.0 for an empty sequence."""
    _, h, d = x.shape
    ds = torch.ones(len(lens), hkv, device=x.device)
    start = 0
    for b, n in enumerate(lens):
        if n:
            amax = x[start:start + n].float().view(n, hkv, h // hkv, d).abs().amax(dim=(0, 2, 3))
            ds[b] = amax.clamp_min(1e-12) / 448.0
        start += n
    seq = torch.repeat_interleave(torch.arange(len(lens), device=x.device), torch.tensor(lens, device=x.device))
    scale = ds[seq].repeat_interleave(h // hkv, dim=1)[:, :, None]  # [total, H, 1]: each token's sequence, each head's
    codes = (x.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return codes, ds, codes.double() * scale.double()


@pytest.mark.parametrize("case", FP8_VARLEN, ids=lambda c: c[0])
def test_fp8_varlen_against_float64(case):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 kernels are sm_90a's (H100 / H200); this GPU is sm_%d%d" %
                    torch.cuda.get_device_capability())
    name, lens_q, lens_k, hq, hkv, d, causal, v = case
    g = torch.Generator(device="cuda").manual_seed(_seed(name))
    q, k, vv, cu_q, cu_k = _packed(lens_q, lens_k, hq, hkv, d, torch.float32, g)
    (q8, qd, qr), (k8, kd, kr), (v8, vd, vr) = _fp8_packed(q, lens_q, hkv), _fp8_packed(k, lens_k, hkv), \
        _fp8_packed(vv, lens_k, hkv)
    window, softcap = v.get("window", (-1, -1)), v.get("softcap", 0.0)
    o = torch.full((sum(lens_q), hq, d), float("nan"), device="cuda", dtype=BF16)
    _, lse = fajit.varlen_attention(q8, k8, v8, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, out=o,
                                    return_lse=True, q_descale=qd, k_descale=kd, v_descale=vd, window_size=window,
                                    softcap=softcap)
    torch.cuda.synchronize()
    ref_o, ref_lse = ref.varlen(qr, kr, vr, cu_q, cu_k, causal, None, window, softcap)
    _check_varlen(f"varlen {name}", o, lse, ref_o, ref_lse, tol=5e-2, tol_lse=5e-2)


def test_varlen_seqused_k_and_new_output():
    g = torch.Generator(device="cuda").manual_seed(3)
    lens = [300, 17, 1000]
    q, k, v, cu_q, cu_k = _packed(lens, [400, 40, 1000], 8, 2, 128, BF16, g)
    used = torch.tensor([300, 0, 999], dtype=torch.int32, device="cuda")
    o, lse = fajit.varlen_attention(q, k, v, cu_q, cu_k, 1000, 1000, causal=True, seqused_k=used, return_lse=True,
                                    softmax_scale=0.1)
    ref_o, ref_lse = ref.varlen(q, k, v, cu_q, cu_k, True, 0.1, seqused_k=used)
    _check_varlen("varlen seqused_k", o, lse, ref_o, ref_lse)


def test_varlen_paged_chunked_prefill():
    # each sequence's new queries attend to its paged cache, which already holds their keys (vLLM's chunked prefill)
    g = torch.Generator(device="cuda").manual_seed(4)
    hq, hkv, d, page = 8, 2, 128, 64
    lens_q, cache = [17, 1, 300, 64], [500, 1, 300, 1000]
    max_pages = max(cache) // page + 1
    pool = len(cache) * max_pages
    pool_k, pool_v = _randn((pool, page, hkv, d), BF16, g), _randn((pool, page, hkv, d), BF16, g)
    table = torch.randperm(pool, device="cuda", generator=g).view(len(cache), max_pages).to(torch.int32)
    used = torch.tensor(cache, dtype=torch.int32, device="cuda")
    q, cu_q = _randn((sum(lens_q), hq, d), BF16, g), _cu(lens_q)
    for kw in ({}, dict(window_size=(255, 0), learnable_sink=torch.randn(hq, device="cuda", generator=g))):
        o = torch.full_like(q, float("nan"))
        _, lse = fajit.varlen_attention(q, pool_k, pool_v, cu_q, None, max(lens_q), max(cache), causal=True,
                                        seqused_k=used, block_table=table, out=o, return_lse=True, **kw)
        kp, cu_k = ref.paged_to_packed(pool_k, table, used)
        vp, _ = ref.paged_to_packed(pool_v, table, used)
        ref_o, ref_lse = ref.varlen(q, kp, vp, cu_q, cu_k, True, None, kw.get("window_size", (-1, -1)),
                                    sinks=kw.get("learnable_sink"))
        _check_varlen(f"varlen paged {sorted(kw)}", o, lse, ref_o, ref_lse)


def test_varlen_torch_compile_fullgraph():
    g = torch.Generator(device="cuda").manual_seed(5)
    lens = [100, 300, 7]
    q, k, v, cu_q, cu_k = _packed(lens, lens, 8, 2, 64, BF16, g)
    sinks = torch.randn(8, device="cuda", generator=g)

    def f(q, k, v, cu_q, cu_k):
        o = fajit.varlen_attention(q * 1, k, v, cu_q, cu_k, 300, 300, causal=True, window_size=(63, 0),
                                   learnable_sink=sinks)
        return o * 2
    explained = torch._dynamo.explain(f)(q, k, v, cu_q, cu_k)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained
    out = torch.compile(f, fullgraph=True)(q, k, v, cu_q, cu_k)
    eager = f(q, k, v, cu_q, cu_k)
    assert torch.equal(out, eager)
    ref_o, _ = ref.varlen(q, k, v, cu_q, cu_k, True, None, (63, 0), sinks=sinks)
    assert rel_l2(out / 2, ref_o) <= TOL[BF16]


def test_varlen_cuda_graph_capture_and_replay():
    # new lengths and new values in the same buffers, then replay: the graph reads cu_seqlens on the GPU
    g = torch.Generator(device="cuda").manual_seed(6)
    hq, hkv, d, total = 8, 2, 128, 1500
    q, k, v = _randn((total, hq, d), BF16, g), _randn((total, hkv, d), BF16, g), _randn((total, hkv, d), BF16, g)
    cu = _cu([700, 800])
    o, lse = torch.empty_like(q), torch.empty(hq, total, device="cuda")
    fajit.varlen_attention(q, k, v, cu, cu, 1000, 1000, causal=True, out=o)  # warm-up: the kernel is loaded
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, lse = fajit.varlen_attention(q, k, v, cu, cu, 1000, 1000, causal=True, out=o, return_lse=True)
    for first in (1000, 500):  # max_seqlen 1000 holds for (1000, 500) and (500, 1000)
        cu.copy_(_cu([first, total - first]))
        q.copy_(_randn(q.shape, BF16, g)), k.copy_(_randn(k.shape, BF16, g)), v.copy_(_randn(v.shape, BF16, g))
        o.fill_(float("nan")), lse.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref_o, ref_lse = ref.varlen(q, k, v, cu, cu, True)
        _check_varlen(f"varlen CUDA graph replay {cu.tolist()}", o, lse, ref_o, ref_lse)


def test_varlen_opcheck():
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v, cu_q, cu_k = _packed([30, 70], [50, 70], 4, 2, 64, F16, g)
    torch.library.opcheck(torch.ops.fajit.varlen_attention.default,
                          (q, k, v, cu_q, cu_k, 70, 70, True, 0.125, True, ""))
    o, lse = torch.empty_like(q), torch.empty(4, 100, device="cuda")
    torch.library.opcheck(torch.ops.fajit.varlen_attention_out.default,
                          (q, k, v, o, lse, cu_q, cu_k, 70, 70, False, 0.125, ""))
    sinks = torch.randn(4, device="cuda")
    torch.library.opcheck(torch.ops.fajit.attention.default,
                          (q[None].transpose(1, 2).contiguous(), k[None].transpose(1, 2).contiguous(),
                           v[None].transpose(1, 2).contiguous(), True, 0.125, False, True, "", None, None, 0, 15, 0,
                           20.0, None, sinks, 0))


def test_math_note():
    # the reference itself: a sink of -inf changes nothing, softcap of a huge cap changes nothing
    g = torch.Generator(device="cuda").manual_seed(8)
    q, k, v = _randn((1, 2, 5, 64), F16, g), _randn((1, 2, 7, 64), F16, g), _randn((1, 2, 7, 64), F16, g)
    o1, l1 = ref.attention(q, k, v, True)
    o2, l2 = ref.attention(q, k, v, True, softcap=1e9, sinks=torch.full((2,), -math.inf, device="cuda"))
    assert torch.allclose(o1, o2) and torch.allclose(l1, l2)
