"""test_transformers.py - fajit.transformers (attn_implementation="fajit") on small randomly initialised models built
from transformers' config classes (no download): Llama, Mistral (sliding window), Gemma 2 (softcap + alternating
window), gpt-oss (sinks + alternating window) and Qwen 2, 4 layers, hidden size 256, head dim 64 - batched with
left and right padding, and padding-free packed (DataCollatorWithFlattening style: position_ids that restart, and
its cu_seq_lens / max_length kwargs).

Two halves:
  - without a GPU (CPU, float32): the mapping alone. fajit.attention / fajit.varlen_attention are replaced by the
    float64 reference (_reference.py), which also asserts that the max_seqlen bounds hold, so what is checked is
    how fajit.transformers turns transformers' arguments into calls (masks, windows, softcap, sinks, padding as
    varlen, packing): logits at the real tokens match the eager model's within 1e-4 (relative L2).
  - on a GPU (bfloat16): the real kernels. The truth is the eager model in float32 (same weights; for packed
    batches, each sequence run alone, as transformers' own bf16 baselines are too); fajit's bf16
    logits must be within 2x the error of transformers' own bf16 attention (eager, and sdpa where sdpa computes
    the same function: not for softcap or sinks) + 2e-3, relative L2 over the real tokens. Each case prints its
    numbers (pytest -s).
Skipped (with the reason) without torch or transformers; the GPU half without CUDA.
"""
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

import fajit  # noqa: E402
import fajit.transformers as ft  # noqa: E402

import _reference as ref  # noqa: E402

NAME = ft.register()


def _config(family, **extra):
    from transformers import Gemma2Config, GptOssConfig, LlamaConfig, MistralConfig, Qwen2Config
    common = dict(vocab_size=128, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1, **extra)
    if family == "llama":
        return LlamaConfig(**common)
    if family == "mistral":
        return MistralConfig(**common, sliding_window=8)
    if family == "gemma2":
        return Gemma2Config(**common, head_dim=64, sliding_window=8, attn_logit_softcapping=2.0,
                            query_pre_attn_scalar=64)
    if family == "gpt_oss":
        common["intermediate_size"] = 256
        return GptOssConfig(**common, head_dim=64, sliding_window=8, num_local_experts=4, num_experts_per_tok=2)
    if family == "qwen2":
        return Qwen2Config(**common)
    raise ValueError(family)


FAMILIES = ["llama", "mistral", "gemma2", "gpt_oss", "qwen2"]


def _models(family, impls, dtype, device):
    """The same randomly initialised weights under each attention implementation."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(_config(family), attn_implementation="eager")
    state = base.state_dict()
    out = {}
    for impl in impls:
        m = AutoModelForCausalLM.from_config(_config(family), attn_implementation=impl)
        m.load_state_dict(state)
        out[impl] = m.to(device=device, dtype=dtype).eval()
    return out


def _padded_inputs(side, device, lens=(24, 13, 5), n=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 128, (len(lens), n), generator=g)
    mask = torch.zeros(len(lens), n, dtype=torch.long)
    for b, L in enumerate(lens):
        if side == "left":
            mask[b, n - L:] = 1
        else:
            mask[b, :L] = 1
    return dict(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False), mask.bool().to(device)


def _packed_inputs(device, lens=(9, 15, 3, 20), seed=2, flash_kwargs=False):
    g = torch.Generator().manual_seed(seed)
    total = sum(lens)
    ids = torch.randint(0, 128, (1, total), generator=g)
    pos = torch.cat([torch.arange(L) for L in lens])[None]
    kw = dict(input_ids=ids.to(device), position_ids=pos.to(device), use_cache=False)
    if flash_kwargs:  # what DataCollatorWithFlattening(return_flash_attn_kwargs=True) adds
        cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device=device)
        kw.update(cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=max(lens), max_length_k=max(lens))
    return kw, torch.ones(1, total, dtype=torch.bool, device=device)


def _logits(model, kw, real):
    with torch.no_grad():
        return model(**kw).logits[real].double()


def _separately(model, kw):
    """The logits of a packed batch's sequences, each run alone (what packing must give: gpt-oss's eager path, for
    one, builds its masks without position_ids, so it does not see the packing), concatenated."""
    pos = kw["position_ids"][0].tolist()
    starts = [i for i, p in enumerate(pos) if p == 0] + [len(pos)]
    outs = []
    with torch.no_grad():
        for a, b in zip(starts[:-1], starts[1:]):
            outs.append(model(input_ids=kw["input_ids"][:, a:b], use_cache=False).logits[0].double())
    return torch.cat(outs)


def _truth(model, kind, kw, real):
    return _separately(model, kw) if kind.startswith("packed") else _logits(model, kw, real)


def _rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


INPUTS = ["left-padded", "right-padded", "packed-position-ids", "packed-flash-kwargs"]


def _inputs(kind, device):
    if kind == "left-padded":
        return _padded_inputs("left", device)
    if kind == "right-padded":
        return _padded_inputs("right", device)
    return _packed_inputs(device, flash_kwargs=kind == "packed-flash-kwargs")


# ---- CPU: the mapping, with the float64 reference standing in for the kernels ----------------------------------
class ReferenceFajit:
    """fajit.attention / fajit.varlen_attention as the float64 reference (CPU tensors); counts the calls."""

    def __init__(self):
        self.calls = {"attention": 0, "varlen": 0}

    def attention(self, q, k, v, *, causal=False, layout="bhnd", softmax_scale=None, window_size=(-1, -1),
                  softcap=0.0, learnable_sink=None, **rest):
        assert layout == "bnhd" and not rest, rest
        self.calls["attention"] += 1
        o, _ = ref.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal, softmax_scale,
                             window_size, softcap, None, learnable_sink)
        return o.transpose(1, 2).to(q.dtype)

    def varlen_attention(self, q, k, v, cu_q, cu_k, max_q, max_k, *, causal=False, softmax_scale=None,
                         window_size=(-1, -1), softcap=0.0, learnable_sink=None, seqused_k=None, **rest):
        assert not rest, rest
        assert isinstance(max_q, int) and isinstance(max_k, int)
        assert cu_q.dtype == torch.int32 and cu_k.dtype == torch.int32 and int(cu_q[-1]) == q.shape[0]
        assert int(cu_k[-1]) == k.shape[0]
        assert int((cu_q[1:] - cu_q[:-1]).max()) <= max_q and int((cu_k[1:] - cu_k[:-1]).max()) <= max_k
        self.calls["varlen"] += 1
        o, _ = ref.varlen(q, k, v, cu_q, cu_k, causal, softmax_scale, window_size, softcap, None, learnable_sink,
                          0, seqused_k)
        return o.to(q.dtype)


@pytest.fixture
def on_cpu(monkeypatch):
    fake = ReferenceFajit()
    monkeypatch.setattr(ft, "_DEVICE_TYPE", "cpu")
    monkeypatch.setattr(ft, "_DTYPES", (torch.float32, torch.float16, torch.bfloat16))
    monkeypatch.setattr(fajit, "attention", fake.attention)
    monkeypatch.setattr(fajit, "varlen_attention", fake.varlen_attention)
    return fake


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_mapping_matches_eager_on_cpu(on_cpu, family, kind):
    models = _models(family, ("eager", NAME), torch.float32, "cpu")
    kw, real = _inputs(kind, "cpu")
    want = _truth(models["eager"], kind, kw, real)
    got = _logits(models[NAME], kw, real)
    err = _rel(got, want)
    print(f"{family} {kind}: fajit mapping vs eager (float32, CPU): rel L2 {err:.2e}; calls {on_cpu.calls}")
    assert err <= 1e-4, f"{family} {kind}: rel L2 {err:.2e}"
    assert on_cpu.calls["varlen"] > 0, on_cpu.calls  # padding and packing both go through varlen


def test_plain_batch_takes_attention_on_cpu(on_cpu):
    models = _models("mistral", ("eager", NAME), torch.float32, "cpu")
    ids = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(3))
    want = _logits(models["eager"], dict(input_ids=ids), slice(None))
    got = _logits(models[NAME], dict(input_ids=ids), slice(None))
    assert _rel(got, want) <= 1e-4 and on_cpu.calls == {"attention": 4, "varlen": 0}, on_cpu.calls


def test_cached_generation_on_cpu(on_cpu):
    # a left-padded batch decoded token by token with a DynamicCache: Nq = 1 against the cache, with padding
    models = _models("llama", ("eager", NAME), torch.float32, "cpu")
    kw, _ = _padded_inputs("left", "cpu", lens=(10, 6), n=10)
    outs = {}
    for impl, m in models.items():
        with torch.no_grad():
            outs[impl] = m.generate(kw["input_ids"], attention_mask=kw["attention_mask"], max_new_tokens=5,
                                    do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    for a, b in zip(outs["eager"].logits, outs[NAME].logits):
        assert _rel(b.double(), a.double()) <= 1e-4


def test_fallback_and_refusals_on_cpu():
    # without the CPU stand-in: CPU tensors are not fajit's; sdpa runs instead, with a warning once, or (a model
    # with sinks) the call is refused; a 4-d mask falls back the same way
    from transformers import AutoModelForCausalLM
    models = _models("llama", ("eager", NAME), torch.float32, "cpu")
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(4))
    want = _logits(models["eager"], dict(input_ids=ids), slice(None))
    assert _rel(_logits(models[NAME], dict(input_ids=ids), slice(None)), want) <= 1e-4
    torch.manual_seed(0)
    oss = AutoModelForCausalLM.from_config(_config("gpt_oss"), attn_implementation=NAME).eval()
    with pytest.raises(ValueError, match="applies no softcap / sinks"):
        oss(ids)
    strict = ft.register("fajit-strict", fallback=False)
    m = AutoModelForCausalLM.from_config(_config("llama"), attn_implementation=strict).eval()
    with pytest.raises(ValueError, match=r"tensors on cpu \(fajit runs on CUDA\)"):
        m(ids)


def test_packed_positions_helper():
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3]])
    cu, longest = ft._packed_from_positions(pos, 1, 9)
    assert cu.tolist() == [0, 3, 5, 9] and cu.dtype == torch.int32 and longest == 4
    assert ft._packed_from_positions(pos, 1, 9)[0] is cu  # cached for the next layer
    assert ft._packed_from_positions(torch.arange(9)[None], 1, 9) is None
    two = torch.tensor([[0, 1, 2, 3], [5, 6, 0, 1]])  # every row starts a sequence
    cu, longest = ft._packed_from_positions(two, 2, 4)
    assert cu.tolist() == [0, 4, 6, 8] and longest == 4
    order, cu, lens = ft._pack_rows(torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    assert order.tolist() == [[1, 2, 0, 3], [0, 1, 2, 3]] and cu.tolist() == [0, 2, 4, 8, 8] and lens.tolist() == [2, 4]


# ---- GPU: the real kernels in bf16 against the float32 eager model ----------------------------------------------
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (torch.cuda.is_available() is False)")


@gpu
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers_on_gpu(family, kind):
    same_function = family in ("llama", "mistral", "qwen2")  # sdpa applies no softcap or sinks
    impls = ("eager", NAME, "sdpa") if same_function else ("eager", NAME)
    models = _models(family, impls, torch.bfloat16, "cuda")
    truth_model = _models(family, ("eager",), torch.float32, "cuda")["eager"]
    kw, real = _inputs(kind, "cuda")
    truth = _truth(truth_model, kind, kw, real)
    errs = {impl: _rel(_logits(m, kw, real) if impl == NAME else _truth(m, kind, kw, real), truth)
            for impl, m in models.items()}
    theirs = max(e for impl, e in errs.items() if impl != NAME)
    tol = 2 * theirs + 2e-3
    print(f"{family} {kind}: rel L2 vs float32 eager: " + ", ".join(f"{i} {e:.3e}" for i, e in errs.items()) +
          f"; allowed {tol:.3e}; kernel: {fajit.last_forward()}")
    assert math.isfinite(errs[NAME]) and errs[NAME] <= tol, (family, kind, errs)


@gpu
def test_attention_function_compiles_fullgraph_on_gpu():
    # the padded path (per-row sort, gathers, one varlen call, scatter) traced whole: no host synchronization.
    # (A whole model does not compile fullgraph here: transformers' flash_attention_mask branches on mask.all().)
    class Module:
        is_causal = True

        class config:
            _attn_implementation = NAME
    g = torch.Generator(device="cuda").manual_seed(9)
    b, hq, hkv, n, d = 3, 8, 2, 40, 64
    q = torch.randn(b, hq, n, d, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    mask = torch.ones(b, n, dtype=torch.bool, device="cuda")
    mask[1, :15] = False
    mask[2, 30:] = False
    sinks = torch.randn(hq, device="cuda", generator=g)

    def f(q, k, v, mask):
        return ft.attention_forward(Module(), q, k, v, mask, scaling=0.125, sliding_window=8, s_aux=sinks)[0]
    eager = f(q, k, v, mask)
    compiled = torch.compile(f, fullgraph=True)(q, k, v, mask)
    assert torch.equal(compiled[mask], eager[mask])
    o = torch.zeros(b, n, hq, d, dtype=torch.float64, device="cuda")
    for row in range(b):
        idx = mask[row].nonzero().flatten()
        r, _ = ref.attention(q[row:row + 1, :, idx], k[row:row + 1, :, idx], v[row:row + 1, :, idx], True, 0.125,
                             (7, 0), sinks=sinks)
        o[row, idx] = r[0].transpose(0, 1)
    assert _rel(eager[mask].double(), o[mask]) <= 1e-2
