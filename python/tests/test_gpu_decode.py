"""test_gpu_decode.py - fajit.attention's decode arguments on a GPU: per-sequence KV lengths (seqlens_k),
paged K/V (block_table, pages shuffled in a shared pool), split-KV (num_splits: the heuristic and forced),
GQA / MQA, Nq 1 / 4 / 16 with the bottom-right causal rule per sequence; then CUDA-graph replay with new
lengths, torch.compile(fullgraph=True) and torch.library.opcheck with those arguments.
Skipped (with the reason) without torch or without a CUDA GPU.

Check, per case: O is written into a NaN-filled buffer and LSE into a NaN-filled one; every element is
compared with a float64 reference computed on the GPU from the same (rounded) inputs, per sequence over its
first seqlens_k[b] keys. Pass: no NaN/Inf, relative L2 of O <= 1e-2 (bf16) / 2e-3 (f16), worst row's
relative error <= 4x that, |LSE - ref| <= 1e-3, rows that see no key exactly O = 0 and LSE = -inf (the
rule of _gpu_check.py, shared with test_gpu.py). Errors per case go to $FAJIT_TEST_REPORT (and -s).
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import fajit  # noqa: E402
from _gpu_check import check_against  # noqa: E402


def _reference(q, k, v, lens, causal, scale):
    """O [B, Hq, Nq, D] and LSE [B, Hq, Nq] in float64 from [B, H, N, D] tensors; sequence b sees keys
    [0, lens[b]), causal bottom-right per sequence; rows that see no key: O = 0, LSE = -inf."""
    b, hq, nq, d = q.shape
    g = hq // k.shape[1]
    o = torch.zeros(b, hq, nq, d, dtype=torch.float64, device="cuda")
    lse = torch.full((b, hq, nq), -math.inf, dtype=torch.float64, device="cuda")
    for i, n in enumerate(lens):
        kb = k[i, :, :n].double().repeat_interleave(g, dim=0)
        vb = v[i, :, :n].double().repeat_interleave(g, dim=0)
        s = torch.matmul(q[i].double(), kb.transpose(-1, -2)) * scale
        if causal:
            rows = torch.arange(nq, device="cuda")[:, None]
            s = s.masked_fill(torch.arange(n, device="cuda")[None, :] > rows + (n - nq), -math.inf)
        lse_b = torch.logsumexp(s, dim=-1) if n else lse[i]
        if n:
            p = torch.exp(s - torch.where(torch.isinf(lse_b), torch.zeros_like(lse_b), lse_b)[..., None])
            o[i], lse[i] = torch.matmul(p, vb), lse_b
    return o, lse


def _check(case, q, k, v, lens, causal, o, lse):
    """q, o: [B, Hq, Nq, D]; k, v: the logical [B, Hkv, Nk, D] cache."""
    ref_o, ref_lse = _reference(q, k, v, lens, causal, 1.0 / math.sqrt(q.shape[-1]))
    check_against(case, o, lse, ref_o, ref_lse, kernel=fajit.last_forward())


def _inputs(dt, b, hq, hkv, nq, nk, d, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def t(h, n):
        return torch.randn(b, h, n, d, device="cuda", dtype=torch.float32, generator=g).to(dt)
    return t(hq, nq), t(hkv, nk), t(hkv, nk)


def _paged(k, v, lens, page, layout, seed, poison=False):
    """k, v [B, Hkv, Nk, D] as page pools (every sequence's pages, shuffled, plus 3 spare pages) and the
    block table [B, ceil(Nk / page)]. Entries past a sequence's filled pages point at a spare page; with
    poison the spare pages and the rows past lens[b] are NaN (nothing there may be read)."""
    b, hkv, nk, d = k.shape
    max_pages = -(-nk // page)
    pages = b * max_pages + 3
    perm = torch.randperm(pages, generator=torch.Generator().manual_seed(seed))
    pools = []
    for x in (k, v):
        x = x.clone()
        if poison:
            for i, n in enumerate(lens):
                x[i, :, n:] = float("nan")
        pool = torch.full((pages, hkv, page, d), float("nan") if poison else 0.5, dtype=x.dtype, device="cuda")
        padded = torch.zeros(b, hkv, max_pages * page, d, dtype=x.dtype, device="cuda")
        padded[:, :, :nk] = x
        for i in range(b):
            for p in range(max_pages):
                pool[perm[i * max_pages + p]] = padded[i, :, p * page:(p + 1) * page]
        pools.append(pool if layout == "bhnd" else pool.transpose(1, 2).contiguous())
    table = perm[:b * max_pages].view(b, max_pages).to(torch.int32)
    spare = int(perm[-1])
    for i, n in enumerate(lens):
        table[i, -(-n // page):] = spare
    return pools[0], pools[1], table.cuda()


# (dtype, B, Hq, Hkv, Nq, Nk capacity, D, causal, lens (None: all Nk), page size (0: contiguous), splits, layout)
CASES = [
    (torch.bfloat16, 3, 8, 2, 1, 1000, 128, False, [1, 517, 1000], 0, None, "bhnd"),       # GQA 4
    (torch.float16, 3, 8, 2, 1, 1000, 128, False, [1, 517, 1000], 0, None, "bnhd"),
    (torch.bfloat16, 2, 16, 2, 4, 3000, 128, True, [1, 2999], 0, None, "bhnd"),            # GQA 8, Nq 4
    (torch.bfloat16, 2, 8, 1, 16, 2048, 128, True, [16, 2048], 0, None, "bnhd"),           # MQA, Nq 16
    (torch.float16, 4, 32, 8, 16, 1024, 128, True, [1, 15, 16, 1024], 0, 3, "bhnd"),       # rows with no key
    (torch.bfloat16, 1, 4, 4, 1, 32768, 128, False, None, 0, 1, "bhnd"),                   # MHA, no split
    (torch.bfloat16, 1, 4, 4, 1, 32768, 128, False, None, 0, 7, "bhnd"),
    (torch.bfloat16, 1, 4, 4, 1, 32768, 128, False, None, 0, 64, "bhnd"),
    (torch.bfloat16, 1, 8, 1, 1, 65536, 128, False, [65000], 0, None, "bnhd"),             # MQA long
    (torch.bfloat16, 3, 8, 2, 1, 256, 128, False, [1, 64, 200], 64, None, "bnhd"),         # paged, a page multiple
    (torch.float16, 2, 8, 1, 4, 160, 128, True, [33, 160], 16, None, "bhnd"),              # paged 16, MQA, causal
    (torch.bfloat16, 2, 32, 4, 16, 1024, 128, True, [1000, 300], 256, 5, "bnhd"),          # paged 256, GQA 8
    (torch.bfloat16, 2, 8, 8, 1, 4096, 64, False, None, 64, None, "bnhd"),                 # paged, no lens
]


def _name(c):
    dt, b, hq, hkv, nq, nk, d, causal, lens, page, splits, layout = c
    return (f"{'bf16' if dt == torch.bfloat16 else 'f16'}-B{b}-H{hq}x{hkv}-Nq{nq}-Nk{nk}-D{d}-"
            f"{'causal' if causal else 'full'}-lens{'-'.join(map(str, lens)) if lens else 'all'}-"
            f"{'page' + str(page) if page else 'contig'}-splits{splits}-{layout}")


def _run(case, poison=False):
    dt, b, hq, hkv, nq, nk, d, causal, lens, page, splits, layout = case
    seed = zlib.crc32(_name(case).encode()) % 1000
    q, k, v = _inputs(dt, b, hq, hkv, nq, nk, d, seed)
    lens_list = lens if lens is not None else [nk] * b
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda") if lens is not None else None
    kw = dict(seqlens_k=seqlens, num_splits=splits)
    if page:
        kk, vv, kw["block_table"] = _paged(k, v, lens_list, page, layout, seed, poison)
    else:
        kk, vv = k, v
        if poison:
            kk, vv = k.clone(), v.clone()
            for i, n in enumerate(lens_list):
                kk[i, :, n:], vv[i, :, n:] = float("nan"), float("nan")
        if layout == "bnhd":
            kk, vv = kk.transpose(1, 2).contiguous(), vv.transpose(1, 2).contiguous()
    qq = q if layout == "bhnd" else q.transpose(1, 2).contiguous()
    o = torch.full_like(qq, float("nan"))
    o2, lse = fajit.attention(qq, kk, vv, causal=causal, layout=layout, out=o, return_lse=True, **kw)
    assert o2 is o
    torch.cuda.synchronize()
    _check(_name(case) + (" poisoned" if poison else ""), q, k, v, lens_list, causal,
           o if layout == "bhnd" else o.transpose(1, 2), lse)


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_decode_against_float64(case):
    _run(case)


@pytest.mark.parametrize("case", [CASES[0], CASES[4], CASES[9], CASES[10]], ids=_name)
def test_decode_reads_only_the_filled_keys(case):
    # rows past seqlens_k[b] and pages the table does not reach hold NaN: reading any of them shows in O
    _run(case, poison=True)


def test_decode_new_output_matches_out():
    q, k, v = _inputs(torch.bfloat16, 2, 8, 2, 1, 3000, 128, seed=21)
    lens = torch.tensor([1, 2500], dtype=torch.int32, device="cuda")
    o = fajit.attention(q, k, v, seqlens_k=lens)
    o2 = fajit.attention(q, k, v, seqlens_k=lens, out=torch.empty_like(q))
    assert torch.equal(o, o2)


def test_decode_cuda_graph_replay_with_new_lengths():
    b, hq, hkv, nq, nk, d = 4, 32, 8, 1, 8192, 128
    q, k, v = _inputs(torch.bfloat16, b, hq, hkv, nq, nk, d, seed=22)
    lens = torch.tensor([nk, 1, 4000, 17], dtype=torch.int32, device="cuda")
    o = torch.empty_like(q)
    fajit.attention(q, k, v, seqlens_k=lens, out=o)  # warm-up: kernels loaded, workspace size known
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _, lse = fajit.attention(q, k, v, seqlens_k=lens, out=o, return_lse=True)  # splits by the heuristic
    for new in ([3, 8192, 100, 5000], [1, 1, 1, 1]):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        o.fill_(float("nan")), lse.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        _check(f"CUDA graph replay, lens {new}", q, k, v, new, False, o, lse)


def test_decode_torch_compile_fullgraph():
    q, k, v = _inputs(torch.bfloat16, 2, 16, 2, 4, 2048, 128, seed=23)
    lens = torch.tensor([7, 2000], dtype=torch.int32, device="cuda")

    def f(q, k, v, lens):
        return fajit.attention(q * 1.0, k, v, causal=True, seqlens_k=lens, num_splits=4) * 2.0
    eager = f(q, k, v, lens)
    explained = torch._dynamo.explain(f)(q, k, v, lens)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained
    out = torch.compile(f, fullgraph=True)(q, k, v, lens)
    assert torch.equal(out, eager)


def test_decode_opcheck():
    q, k, v = _inputs(torch.float16, 2, 8, 2, 4, 700, 64, seed=24)
    lens = torch.tensor([3, 700], dtype=torch.int32, device="cuda")
    kp, vp, table = _paged(k, v, [3, 700], 64, "bhnd", seed=24)
    torch.library.opcheck(torch.ops.fajit.attention.default, (q, k, v, True, 0.125, False, True, "", lens, None, 5))
    torch.library.opcheck(torch.ops.fajit.attention.default, (q, kp, vp, True, 0.125, False, True, "", lens, table, 0))
    o, lse = torch.empty_like(q), torch.empty(2, 8, 4, device="cuda")
    torch.library.opcheck(torch.ops.fajit.attention_out.default,
                          (q, k, v, o, lse, False, 0.125, False, "", lens, None, 0))


# e4m3 q, k, v (FlashAttention-3's FP8 kvcache inputs; sm_90 only) with seqlens_k, split-KV and paged K/V: the sm_90a
# FP8 kernel's decode variants, against the float64 reference on the dequantized inputs, rows past each length and
# pages the table does not reach NaN. Tolerance as the FP8 variants' (test_gpu_variants.py: P rounded to e4m3):
# rel L2 <= 5e-2, worst row 4x, LSE <= 5e-2.
FP8_CASES = [  # (B, Hq, Hkv, Nq, Nk, D, causal, lens, page, splits, layout)
    (3, 8, 2, 1, 1000, 128, False, [1, 517, 1000], 0, 3, "bnhd"),
    (3, 16, 2, 4, 1000, 64, True, [5, 1000, 0], 64, None, "bnhd"),
    (2, 8, 8, 16, 3000, 128, True, [2999, 16], 0, None, "bhnd"),
]


def _deq(x8, ds):
    """float64 values of e4m3 codes [B, H, N, D] under descales [B, Hkv] (head h takes row h // (H / Hkv))."""
    return x8.double() * ds.double().repeat_interleave(x8.shape[1] // ds.shape[1], dim=1)[:, :, None, None]


def _skip_unless_sm90():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 kernels are sm_90a's (H100 / H200); this GPU is sm_%d%d" % torch.cuda.get_device_capability())


def _fp8_name(c):
    b, hq, hkv, nq, nk, d, causal, lens, page, splits, layout = c
    return (f"e4m3-B{b}-H{hq}x{hkv}-Nq{nq}-Nk{nk}-D{d}-{'causal' if causal else 'full'}-lens{'-'.join(map(str, lens))}"
            f"-{'page' + str(page) if page else 'contig'}-splits{splits}-{layout}")


@pytest.mark.parametrize("case", FP8_CASES, ids=_fp8_name)
def test_fp8_decode_against_float64(case):
    _skip_unless_sm90()
    b, hq, hkv, nq, nk, d, causal, lens, page, splits, layout = case
    seed = zlib.crc32(_fp8_name(case).encode()) % 1000
    q, k, v = _inputs(torch.bfloat16, b, hq, hkv, nq, nk, d, seed)
    q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q, k, v)  # [B, H, N, D] codes, [B, Hkv] descales
    kw = dict(seqlens_k=torch.tensor(lens, dtype=torch.int32, device="cuda"), num_splits=splits)
    if page:  # pools of NaN past each length and in the spare pages (float32, then back to e4m3: NaN stays NaN)
        kp, vp, kw["block_table"] = _paged(k8.float(), v8.float(), lens, page, layout, seed, poison=True)
        kk, vv = kp.to(k8.dtype), vp.to(v8.dtype)
    else:
        kk, vv = k8.float(), v8.float()
        for i, n in enumerate(lens):
            kk[i, :, n:], vv[i, :, n:] = float("nan"), float("nan")
        kk, vv = kk.to(k8.dtype), vv.to(v8.dtype)
        if layout == "bnhd":
            kk, vv = kk.transpose(1, 2).contiguous(), vv.transpose(1, 2).contiguous()
    qq = q8 if layout == "bhnd" else q8.transpose(1, 2).contiguous()
    o = torch.full(qq.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
    _, lse = fajit.attention(qq, kk, vv, causal=causal, layout=layout, out=o, return_lse=True, q_descale=qd,
                             k_descale=kd, v_descale=vd, **kw)
    torch.cuda.synchronize()
    kernel = fajit.last_forward()
    assert "sm_90a e4m3" in kernel and "decode variant" in kernel, kernel
    ref_o, ref_lse = _reference(_deq(q8, qd), _deq(k8, kd), _deq(v8, vd), lens, causal, 1.0 / math.sqrt(d))
    check_against(_fp8_name(case), o if layout == "bhnd" else o.transpose(1, 2), lse, ref_o, ref_lse, kernel=kernel,
                  tol=5e-2, tol_lse=5e-2)


def test_fp8_decode_cuda_graph_replay_with_new_lengths():
    # e4m3 q, k, v with descales and seqlens_k, the split count the heuristic gives: captured once, replayed with new
    # lengths written into the same tensor (the kernel reads them on the GPU)
    _skip_unless_sm90()
    b, hq, hkv, nk, d = 4, 32, 8, 8192, 128
    q, k, v = _inputs(torch.bfloat16, b, hq, hkv, 1, nk, d, seed=25)
    q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q, k, v)
    lens = torch.tensor([nk, 1, 4000, 17], dtype=torch.int32, device="cuda")
    o = torch.empty(q.shape, device="cuda", dtype=torch.bfloat16)
    kw = dict(seqlens_k=lens, out=o, q_descale=qd, k_descale=kd, v_descale=vd)
    fajit.attention(q8, k8, v8, **kw)  # warm-up: kernels loaded, workspace size known
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _, lse = fajit.attention(q8, k8, v8, return_lse=True, **kw)
    kernel = fajit.last_forward()
    assert "sm_90a e4m3" in kernel and "split" in kernel, kernel
    for new in ([3, 8192, 100, 5000], [1, 1, 1, 1]):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        o.fill_(float("nan")), lse.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref_o, ref_lse = _reference(_deq(q8, qd), _deq(k8, kd), _deq(v8, vd), new, False, 1.0 / math.sqrt(d))
        check_against(f"FP8 CUDA graph replay, lens {new}", o, lse, ref_o, ref_lse, kernel=kernel, tol=5e-2,
                      tol_lse=5e-2)


def test_fp8_decode_torch_compile_fullgraph():
    _skip_unless_sm90()
    q, k, v = _inputs(torch.bfloat16, 2, 16, 2, 4, 2048, 128, seed=26)
    q8, k8, v8, qd, kd, vd = fajit.fp8_quantize(q, k, v)
    lens = torch.tensor([7, 2000], dtype=torch.int32, device="cuda")

    def f(q8, k8, v8, lens, qd, kd, vd):
        return fajit.attention(q8, k8, v8, causal=True, seqlens_k=lens, num_splits=4, q_descale=qd, k_descale=kd,
                               v_descale=vd) * 2.0
    eager = f(q8, k8, v8, lens, qd, kd, vd)
    explained = torch._dynamo.explain(f)(q8, k8, v8, lens, qd, kd, vd)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained
    out = torch.compile(f, fullgraph=True)(q8, k8, v8, lens, qd, kd, vd)
    assert out.dtype == torch.bfloat16 and torch.equal(out, eager)
