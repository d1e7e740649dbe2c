"""fajit - FlashAttention-class forward kernels written as PTX at run time, from Python.

    import fajit
    print(fajit.ptx(head_dim=128)[:200])                 # no GPU, no torch
    cfg = fajit.config(head_dim=128, causal=True)        # the heuristic's config (sm_80 without a device)
    o = fajit.attention(q, k, v, causal=True)            # CUDA torch tensors [B, H, N, D]
    o = fajit.varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)   # packed [total, H, D]

The package wraps libfajit.so (shipped inside it) with ctypes; the struct layouts and prototypes are read
from the fajit.h it was built from (fajit/_header.py). `import fajit` needs no compiler, GPU or torch;
torch is imported by the first call of fajit.attention / fajit.varlen_attention /
fajit.scaled_dot_product_attention. fajit.transformers registers "fajit" as a Hugging Face transformers attention
implementation.

Errors from the library raise FajitError (.status, .status_name, .message); those that mean the input was
wrong (FAJIT_ERR_INVALID_ARGUMENT, FAJIT_ERR_INVALID_CONFIG) are FajitInputError, also a ValueError.
Arguments that do not fit (dtype, device, rank, shapes, a non-contiguous last dim) raise TypeError or
ValueError naming the argument, before anything reaches the library.
"""
import sys

from . import _config, _lib
from ._config import Config, TuneResult, WarmResult
from ._lib import FajitError, FajitInputError

__all__ = ["attention", "varlen_attention", "scaled_dot_product_attention", "config", "ptx", "explain", "tune", "warm",
           "cache_dir", "fp8_quantize", "last_forward", "last_forward_source", "kernel_info", "Config", "TuneResult",
           "WarmResult", "FajitError", "FajitInputError", "__version__"]

__version__ = _lib.lib.fajit_version().decode()
_torch_module = None


def _torch_api():
    """fajit._torch (imports torch and registers the fajit:: custom ops), imported on first use."""
    global _torch_module
    if _torch_module is None:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise ImportError("fajit.attention needs PyTorch (pip install torch); the rest of fajit does not") from e
        from . import _torch as module
        from . import _varlen  # noqa: F401  (registers the fajit::varlen_attention ops)
        _torch_module = module
    return _torch_module


if "torch" in sys.modules:  # torch already loaded: register the ops now, not inside a torch.compile trace
    _torch_api()


def attention(q, k, v, *, causal=False, scale=None, layout="bhnd", return_lse=False, out=None, config=None,
              seqlens_k=None, block_table=None, page_size=None, num_splits=None, softmax_scale=None,
              window_size=(-1, -1), softcap=0.0, alibi_slopes=None, learnable_sink=None, sinks=None,
              attention_chunk=0, q_descale=None, k_descale=None, v_descale=None):
    """Forward attention on CUDA tensors: O = softmax(scale * Q K^T) V, per (batch, query head).

    q: [B, Hq, Nq, D] (layout "bhnd") or [B, Nq, Hq, D] ("bnhd"); k, v: [B, Hkv, Nk, D] likewise, with
    Hq a multiple of Hkv (GQA / MQA). float16 or bfloat16, on one CUDA device; any strides with a
    contiguous last dim (no copies are made). causal: bottom-right aligned when Nq != Nk (query i sees
    keys j <= i + Nk - Nq; a row that sees no key gets O = 0 and LSE = -inf). scale (or FlashAttention's name,
    softmax_scale; not both): None = 1/sqrt(D).
    return_lse: also return the natural-log log-sum-exp of the scaled scores, float32 [B, Hq, Nq].
    out: a tensor shaped like q to write O into, not overlapping q, k or v (else a new one, contiguous
    in q's layout). config: a fajit.Config or its canonical text (None: the tuned winner of the shape's
    class, else the heuristic).

    Decode / KV cache (see the README's "Decode"):
    seqlens_k: int32 CUDA tensor [B] (contiguous), the keys each sequence sees (a cache's fill): sequence
      b attends to keys [0, seqlens_k[b]) of its K/V, whose sequence dim is then the capacity; values are
      clamped to [0, capacity] on the GPU (not read on the host). Causal is bottom-right per sequence; a
      sequence of 0 keys gives O = 0, LSE = -inf.
    block_table: int32 CUDA tensor [B, max_pages] (contiguous): paged K/V. k and v are then page pools,
      [pages, Hkv, page_size, D] ("bhnd") or [pages, page_size, Hkv, D] ("bnhd", vLLM's and
      FlashAttention's layout), and sequence b's page p is pool page block_table[b, p]; the capacity is
      max_pages x page_size (or seqlens_k per sequence). Entries must be valid pool indices (not checked:
      an index out of the pool reads outside it). page_size: None = the pools' rows per page (a multiple
      of 16); when given it must equal that.
    num_splits: None or 0 = the library's heuristic (split-KV when the grid leaves SMs idle), 1 = no
      split, 2..1024 = that many. A call that splits takes its fp32 workspace from torch's caching
      allocator on the current stream (a CUDA graph capture takes it from the graph's pool).

    Attention variants (FlashAttention's keyword names; each is off by default; all align to the bottom right
    like causal: with off = Nk - Nq, query i stands at key position i + off):
    window_size: (left, right): query i sees keys i + off - left <= j <= i + off + right; -1 = that side
      unbounded, (-1, -1) = no window (FlashAttention's). With causal=True the right side is 0 at most.
    softcap: > 0: each scaled score s becomes softcap * tanh(s / softcap) before masking (Gemma 2); 0.0 = off.
    alibi_slopes: float32 CUDA tensor [Hq] or [B, Hq]: -slope * |i + off - j| is added to the scaled scores.
    learnable_sink (FlashAttention-4's name; or sinks, gpt-oss's): a CUDA tensor [Hq], one logit per query
      head that joins each row's softmax denominator and contributes no value; float16 / bfloat16 are converted
      to float32 (a copy per call: pass float32 to avoid it). LSE then counts the sink (see fajit.h).
    attention_chunk: > 0: query i sees only keys of its own chunk, (i + off) // attention_chunk ==
      j // attention_chunk (Llama 4); 0 = off.
    The values inside the tensors are not read on the host.

    FP8 (FlashAttention-3's FP8 forward; sm_90a, head dims 64, 128, 256): q, k and v of dtype
    torch.float8_e4m3fn give O in bfloat16 (or out='s dtype, bfloat16 or float16); k and v alone in e4m3 with
    float16 / bfloat16 queries are an FP8 K/V cache. q_descale, k_descale, v_descale: float32 CUDA tensors
    [B, Hkv] (or [Hkv]: one row for every batch) that dequantize them: the scores use
    scale * q_descale * k_descale and O is multiplied by v_descale; None = 1.0. FP8 queries take seqlens_k, num_splits and
    block_table (FlashAttention-3's FP8 kvcache inputs: the sm_90a FP8 kernel's decode variants) and no ALiBi (window,
    softcap, sinks and attention_chunk they take); the FP8 K/V cache (k, v alone in e4m3) takes seqlens_k, split-KV,
    GQA packing and paged K/V in whole tiles of a page, not varlen batches. What is not supported raises the library's
    FAJIT_ERR_UNSUPPORTED.

    Runs asynchronously on torch's current stream. A torch custom op (fajit::attention, or
    fajit::attention_out with out=) with a fake implementation: torch.compile(fullgraph=True) keeps it in
    the graph, and it can be captured in a CUDA graph once the shape has run (the first call per shape
    class compiles or loads a kernel). Forward only (no autograd).
    Returns O, or (O, LSE) with return_lse.
    """
    return (_torch_module or _torch_api()).attention(q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k,
                                                     block_table, page_size, num_splits, window_size, softcap,
                                                     alibi_slopes, learnable_sink, sinks, attention_chunk,
                                                     softmax_scale, q_descale, k_descale,
                                                     v_descale)  # positional: cheaper


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     softmax_scale=None, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, learnable_sink=None,
                     sinks=None, attention_chunk=0, seqused_k=None, block_table=None, num_splits=None,
                     return_lse=False, out=None, config=None, scale=None, q_descale=None, k_descale=None,
                     v_descale=None):
    """Forward attention over sequences packed along one token dim, without padding (FlashAttention's
    flash_attn_varlen_func keywords).

    q: [total_q, Hq, D]; k, v: [total_k, Hkv, D] (Hq a multiple of Hkv), float16 or bfloat16 CUDA tensors (or all
    three float8_e4m3fn: FP8, below) with a contiguous last dim (any token and head strides). cu_seqlens_q /
    cu_seqlens_k: int32 CUDA tensors [B + 1] (contiguous): sequence b's queries are rows cu_seqlens_q[b] ..
    cu_seqlens_q[b+1] - 1 of q, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1 of k and v.
    max_seqlen_q / max_seqlen_k: Python ints, the longest sequence's query / key count (they size the grid; fajit
    never reads the lengths on the host, so a call is free of host synchronization, traceable by torch.compile and
    capturable in a CUDA graph).
    Not checked, as that would read the tensors: cu_seqlens must start at 0 and not decrease, their last entries
    must not pass total_q / total_k, and no sequence may be longer than max_seqlen_q / max_seqlen_k (a longer
    one is computed only in part). Rows of q past cu_seqlens_q[B] are not written.
    causal: bottom-right aligned per sequence (query i of a sequence of Lq queries and Lk keys sees keys
    j <= i + Lk - Lq). softmax_scale (or scale): None = 1/sqrt(D). window_size, softcap, alibi_slopes ([Hq] or
    [B, Hq]), learnable_sink / sinks, attention_chunk: as in fajit.attention, per sequence.
    seqused_k: int32 [B]: sequence b uses only the first seqused_k[b] keys of its range (FlashAttention's).
    block_table: int32 [B, max_pages] (contiguous): paged K/V, k and v then being pools [pages, page_size, Hkv,
      D] (page_size a multiple of 16); cu_seqlens_k must be None and seqused_k gives each sequence's keys, which
      are its pages' rows in order (a serving engine's chunked prefill: the new queries attend to the cache,
      which holds their own keys already). max_seqlen_k <= max_pages x page_size.
    num_splits: as in fajit.attention. return_lse: also return the LSE, float32 [Hq, total_q]. out: a tensor
    shaped like q to write O into. config: as in fajit.attention.

    FP8 (FlashAttention-3's FP8 varlen forward; sm_90a, head dims 64, 128, 256): q, k and v of dtype
    torch.float8_e4m3fn give O in bfloat16 (or out='s dtype, bfloat16 or float16). q_descale, k_descale, v_descale:
    float32 CUDA tensors [B, Hkv], row b for sequence b (B = len(cu_seqlens_q) - 1), or [Hkv] / [1, Hkv] for every
    sequence, that dequantize them as in fajit.attention; None = 1.0. FP8 varlen takes packed queries and keys
    (cu_seqlens_q and cu_seqlens_k), GQA, causal, window_size, softcap, learnable_sink / sinks and attention_chunk;
    it takes no block_table, seqused_k or num_splits >= 2 (ValueError naming the argument), and no alibi_slopes (the
    library's FAJIT_ERR_UNSUPPORTED, as in fajit.attention). e4m3 k and v under float16 / bfloat16 queries (an FP8
    K/V cache) are not taken by varlen batches (TypeError naming k): fajit.attention takes them.
    A torch custom op (fajit::varlen_attention, fajit::varlen_attention_out with out=). Returns O [total_q, Hq,
    D], or (O, LSE) with return_lse.
    """
    _torch_api()
    from . import _varlen
    return _varlen.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                    softmax_scale, window_size, softcap, alibi_slopes, learnable_sink, sinks,
                                    attention_chunk, seqused_k, block_table, num_splits, return_lse, out, config,
                                    scale, q_descale, k_descale, v_descale)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """The common arguments of torch.nn.functional.scaled_dot_product_attention on 4-d [B, H, L, E] CUDA
    tensors: is_causal, scale, enable_gqa. attn_mask and dropout are refused (ValueError), and so is
    is_causal with L != S (SDPA aligns that mask to the top left; fajit.attention's causal=True is
    bottom-right)."""
    return _torch_api().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                 enable_gqa)


def config(spec=None, *, head_dim=None, dtype=None, arch=None, causal=False, block_m=None, block_n=None, stages=None,
           swizzle=None, warps=None, col_warps=None, overlap=None, pingpong=None, roll=None, sched=None,
           cross_tile=None, accurate=None, shape=None, device=None, fill=True):
    """A checked kernel config (fajit.Config; str() is its canonical text).

    spec: a canonical text ("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal") or a Config: parsed and
    checked. Otherwise the fields: head_dim (required), dtype ("bf16", "f16" or a torch dtype; None =
    bf16), arch ("sm_80", "sm_90a", "sm_100a"; None = the device's path, sm_80 without one), causal,
    block_m, block_n, stages, swizzle (bytes, or "none"), warps, col_warps, overlap / pingpong / roll (True,
    False; roll: the sm_90a KV loop written once for every stage, a faster compile), sched ("lpt" or "static":
    the sm_90a causal work-tile schedule; None: the heuristic's, lpt at Nq >= 4096 for grouped-query shapes, other
    shapes up to Nq 8192 and chunked attention), cross_tile (True / False: a work tile's last PV beside the next
    one's first S; None: the heuristic's, on for causal head_dim <= 64 with grouped-query heads), accurate (True: the
    softmax's reference max also follows a new row max heavy in the row's sum - FlashAttention-3's accuracy, 0-6%
    slower on sm_90a, 5-8% on the sm_80 path at D128; sm_80 / sm_90a, 16-bit; None / False: off); what is left None is chosen by fajit_config_fill (fill=True) for `shape` (a dict or tuple of
    batch, heads_q, heads_kv, seqlen_q, seqlen_k) on `device` (None: no GPU is touched; an int or
    "cuda:N": that GPU's path and its tuned winners). fill=False only checks (every field must be set).
    Raises FajitInputError (a ValueError) with the rule that was broken, e.g. the shared-memory arithmetic.
    """
    return _config.make_config(spec, head_dim=head_dim, dtype=dtype, arch=arch, causal=causal, block_m=block_m,
                               block_n=block_n, stages=stages, swizzle=swizzle, warps=warps, col_warps=col_warps,
                               overlap=overlap, pingpong=pingpong, roll=roll, sched=sched, cross_tile=cross_tile,
                               accurate=accurate, shape=shape, device=device, fill=fill)


def ptx(spec=None, *, verbosity=0, **fields):
    """PTX text of a kernel (fajit_generate_ptx), for a config given as in fajit.config (spec or fields).
    verbosity 0 (instructions only), 1 (a comment per block) or 2 (the teaching view). No GPU needed."""
    return _config.ptx(spec, verbosity=verbosity, **fields)


def explain(spec=None, **fields):
    """The plan of a kernel in words (fajit_explain): tiles, shared-memory map, warp roles, registers."""
    return _config.explain(spec, **fields)


def fp8_quantize(q, k, v, *, layout="bhnd", hadamard=False, seed=0):
    """e4m3 copies of q, k, v for fajit.attention's FP8 path, with their descales: (q8, k8, v8, q_descale, k_descale,
    v_descale), descale = amax / 448 per (batch, KV head) as float32 [B, Hkv] (FlashAttention-3's layout). hadamard=True:
    incoherent processing - Q and K are multiplied along the head dim by a randomized Hadamard matrix (orthonormal,
    so Q K^T is unchanged; D a power of two) before rounding, which spreads outlier channels over all channels and
    lowers the FP8 rounding error; it costs a D x D matmul of Q and K per call. Pass the results as
    fajit.attention(q8, k8, v8, q_descale=..., k_descale=..., v_descale=...)."""
    _torch_api()
    from . import _fp8
    return _fp8.quantize(q, k, v, layout, hadamard, seed)


def tune(head_dim, *, dtype="bf16", causal=False, shape=None, device=None, max_candidates=0, time_budget_s=0.0,
         reps=0, warmup=0, persist=True, progress=None):
    """Time the configs of one problem class on a GPU (fajit_tune) and keep the fastest, which
    fajit.attention then uses for that class. shape: as in fajit.config (zeros: the issue-3 workload,
    N 4096); device: None = torch's current CUDA device (else 0). max_candidates / reps / warmup 0 = the
    library's defaults (16 / 10 / 3). persist: merge the winner into the tune file. progress(index, total,
    config or None, tflops, note) is called per candidate. Returns a TuneResult. Takes seconds."""
    return _config.tune(head_dim, dtype=dtype, causal=causal, shape=shape, device=device,
                        max_candidates=max_candidates, time_budget_s=time_budget_s, reps=reps, warmup=warmup,
                        persist=persist, progress=progress)


def warm(configs, *, shapes=None, device=None, sm=None, threads=0, progress=None):
    """Compile many kernels at once, one thread per CPU (fajit_warm), so that later calls find them cached.

    configs: a list of fajit.Config, canonical texts or dicts of fajit.config's fields (head_dim required;
    the fields left out are filled as fajit.config fills them, for `shapes`: None, one shape for all, or one
    per config). Configs that give the same kernel are compiled once.
    device: the GPU whose context the kernels are loaded into (None = torch's current CUDA device, else 0),
    also storing them in the disk cache. sm: compile without a GPU for that GPU ("sm_90a" / "sm_90": H100,
    H200; "sm_80", ...) into the disk cache only (CI, images), when device is None.
    threads: 0 = one per CPU. progress(done, total, config, ok, note) is called per kernel as it finishes.
    Returns a WarmResult; raises FajitError when a kernel failed (after trying every one) or a config
    cannot be filled (before compiling any)."""
    return _config.warm(configs, shapes=shapes, device=device, sm=sm, threads=threads, progress=progress)


def cache_dir(device=None):
    """The directory of fajit's disk cache (kernels, tune file): "" when it is off (FAJIT_CACHE=0).
    device None: without touching a GPU."""
    return _config.cache_dir(device)


def kernel_info(spec, *, device=None):
    """Load (or compile) the kernel of a config on a GPU: ({registers, smem_bytes, threads, spill_bytes,
    cubin_bytes}, source) where source is "memory", "prebuilt", "disk" or "compiled"."""
    c = config(spec)
    return _lib.context(_config.device_index(device if device is not None else "cuda")).kernel_info(c._c)


def last_forward():
    """What the calling thread's last forward launched: its config's canonical text, and "; fell back
    from sm_90a: <why>" when the sm_80 kernel stood in for the TMA one, "; while <config> compiles" when a
    loaded or prebuilt kernel ran while the chosen one compiles in the background ("" before the first)."""
    return _lib.lib.fajit_last_forward().decode()


def last_forward_source():
    """Where the calling thread's last forward got its kernel: "memory", "prebuilt", "disk", "compiled", or
    "fallback" (a stand-in ran while the chosen config compiles on the worker thread; fajit.h)."""
    v = _lib.lib.fajit_last_forward_source()
    names = {val: n[len("FAJIT_SOURCE_"):].lower() for n, val in _lib.H.enums["fajit_cache_source"].items()}
    return names.get(v, str(v))
