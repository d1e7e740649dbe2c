"""fajit - FlashAttention-class forward kernels written as PTX at run time, from Python.

    import fajit
    print(fajit.ptx(head_dim=128)[:200])                 # no GPU, no torch
    cfg = fajit.config(head_dim=128, causal=True)        # the heuristic's config (sm_80 without a device)
    o = fajit.attention(q, k, v, causal=True)            # CUDA torch tensors [B, H, N, D]

The package wraps libfajit.so (shipped inside it) with ctypes; the struct layouts and prototypes are read
from the fajit.h it was built from (fajit/_header.py). `import fajit` needs no compiler, GPU or torch;
torch is imported by the first call of fajit.attention / fajit.scaled_dot_product_attention.

Errors from the library raise FajitError (.status, .status_name, .message); those that mean the input was
wrong (FAJIT_ERR_INVALID_ARGUMENT, FAJIT_ERR_INVALID_CONFIG) are FajitInputError, also a ValueError.
Arguments that do not fit (dtype, device, rank, shapes, a non-contiguous last dim) raise TypeError or
ValueError naming the argument, before anything reaches the library.
"""
import sys

from . import _config, _lib
from ._config import Config, TuneResult
from ._lib import FajitError, FajitInputError

__all__ = ["attention", "scaled_dot_product_attention", "config", "ptx", "explain", "tune", "cache_dir",
           "last_forward", "kernel_info", "Config", "TuneResult", "FajitError", "FajitInputError", "__version__"]

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
        _torch_module = module
    return _torch_module


if "torch" in sys.modules:  # torch already loaded: register the ops now, not inside a torch.compile trace
    _torch_api()


def attention(q, k, v, *, causal=False, scale=None, layout="bhnd", return_lse=False, out=None, config=None,
              seqlens_k=None, block_table=None, page_size=None, num_splits=None):
    """Forward attention on CUDA tensors: O = softmax(scale * Q K^T) V, per (batch, query head).

    q: [B, Hq, Nq, D] (layout "bhnd") or [B, Nq, Hq, D] ("bnhd"); k, v: [B, Hkv, Nk, D] likewise, with
    Hq a multiple of Hkv (GQA / MQA). float16 or bfloat16, on one CUDA device; any strides with a
    contiguous last dim (no copies are made). causal: bottom-right aligned when Nq != Nk (query i sees
    keys j <= i + Nk - Nq; a row that sees no key gets O = 0 and LSE = -inf). scale: None = 1/sqrt(D).
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

    Runs asynchronously on torch's current stream. A torch custom op (fajit::attention, or
    fajit::attention_out with out=) with a fake implementation: torch.compile(fullgraph=True) keeps it in
    the graph, and it can be captured in a CUDA graph once the shape has run (the first call per shape
    class compiles or loads a kernel). Forward only (no autograd).
    Returns O, or (O, LSE) with return_lse.
    """
    return (_torch_module or _torch_api()).attention(q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k,
                                                     block_table, page_size, num_splits)  # positional: cheaper


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """The common arguments of torch.nn.functional.scaled_dot_product_attention on 4-d [B, H, L, E] CUDA
    tensors: is_causal, scale, enable_gqa. attn_mask and dropout are refused (ValueError), and so is
    is_causal with L != S (SDPA aligns that mask to the top left; fajit.attention's causal=True is
    bottom-right)."""
    return _torch_api().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                 enable_gqa)


def config(spec=None, *, head_dim=None, dtype=None, arch=None, causal=False, block_m=None, block_n=None, stages=None,
           swizzle=None, warps=None, col_warps=None, overlap=None, pingpong=None, shape=None, device=None, fill=True):
    """A checked kernel config (fajit.Config; str() is its canonical text).

    spec: a canonical text ("sm_80 bf16 d128 br64 bc64 s2 sw128 w4 noncausal") or a Config: parsed and
    checked. Otherwise the fields: head_dim (required), dtype ("bf16", "f16" or a torch dtype; None =
    bf16), arch ("sm_80", "sm_90a", "sm_100a"; None = the device's path, sm_80 without one), causal,
    block_m, block_n, stages, swizzle (bytes, or "none"), warps, col_warps, overlap / pingpong (True,
    False); what is left None is chosen by fajit_config_fill (fill=True) for `shape` (a dict or tuple of
    batch, heads_q, heads_kv, seqlen_q, seqlen_k) on `device` (None: no GPU is touched; an int or
    "cuda:N": that GPU's path and its tuned winners). fill=False only checks (every field must be set).
    Raises FajitInputError (a ValueError) with the rule that was broken, e.g. the shared-memory arithmetic.
    """
    return _config.make_config(spec, head_dim=head_dim, dtype=dtype, arch=arch, causal=causal, block_m=block_m,
                               block_n=block_n, stages=stages, swizzle=swizzle, warps=warps, col_warps=col_warps,
                               overlap=overlap, pingpong=pingpong, shape=shape, device=device, fill=fill)


def ptx(spec=None, *, verbosity=0, **fields):
    """PTX text of a kernel (fajit_generate_ptx), for a config given as in fajit.config (spec or fields).
    verbosity 0 (instructions only), 1 (a comment per block) or 2 (the teaching view). No GPU needed."""
    return _config.ptx(spec, verbosity=verbosity, **fields)


def explain(spec=None, **fields):
    """The plan of a kernel in words (fajit_explain): tiles, shared-memory map, warp roles, registers."""
    return _config.explain(spec, **fields)


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


def cache_dir(device=None):
    """The directory of fajit's disk cache (kernels, tune file): "" when it is off (FAJIT_CACHE=0).
    device None: without touching a GPU."""
    return _config.cache_dir(device)


def kernel_info(spec, *, device=None):
    """Load (or compile) the kernel of a config on a GPU: ({registers, smem_bytes, threads, spill_bytes,
    cubin_bytes}, source) where source is "memory", "disk" or "compiled"."""
    c = config(spec)
    return _lib.context(_config.device_index(device if device is not None else "cuda")).kernel_info(c._c)


def last_forward():
    """What the calling thread's last forward launched: its config's canonical text, and "; fell back
    from sm_90a: <why>" when the sm_80 kernel stood in for the TMA one ("" before the first)."""
    return _lib.lib.fajit_last_forward().decode()
