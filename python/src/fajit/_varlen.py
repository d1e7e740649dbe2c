"""_varlen.py - fajit.varlen_attention: FlashAttention's varlen call (sequences packed along one token dim, no
padding) on torch tensors, as two torch custom ops with fake implementations (imported with fajit._torch):
    fajit::varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k?, max_seqlen_q, max_seqlen_k, causal, scale,
        return_lse, config, seqused_k?, block_table?, num_splits, <variant>, <fp8>) -> (O, LSE)
    fajit::varlen_attention_out(q, k, v, out, lse?, cu_seqlens_q, ...) -> ()        (writes out, lse)
where <variant> is (window_left, window_right, softcap, alibi_slopes?, sinks?, attention_chunk) and <fp8>
(q_descale?, k_descale?, v_descale?), as for fajit::attention. FP8 (e4m3 q, k and v; _fp8.py) takes varlen batches as
the library does: packed queries and keys (cu_seqlens_q and cu_seqlens_k), one descale row per sequence, no
seqused_k, paged K/V or split-KV; an FP8 K/V cache under 16-bit queries is not taken here. The real implementation
fills the varlen fields of fajit_attention_args (fajit.h: cu_seqlens_q / cu_seqlens_k, q / o as [total_q, Hq, D],
k / v as [total_k, Hkv, D] or page pools) from the tensors' pointers and strides and launches through
fajit._torch.launch. The lengths are never read on the host: max_seqlen_q / max_seqlen_k are Python ints the caller
gives (FlashAttention's), so a call can be traced by torch.compile and captured in a CUDA graph. What cannot be
checked without reading the tensors (cu_seqlens non-decreasing from 0, the last entry within the tokens, the
max_seqlen bounds, block table entries inside the pools) is documented in fajit.varlen_attention and left to the
caller.
"""
from typing import Optional, Tuple

import torch

from . import _fp8 as F8
from . import _torch as T
from . import _variants as V
from ._lib import Args_c


# ---- argument checks -----------------------------------------------------------------------------------------
def _tensor(t, name, q, rank, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != rank:
        raise ValueError(f"{name}: expected a {rank}-d tensor {what}, got shape {tuple(t.shape)}")
    T._check_tensor(t, name, q)  # dtype, device, last dim; the dtypes' pairs are _fp8.check_dtypes'


def _fp8_refusals(q, k, seqused_k, block_table):
    """What varlen adds to _fp8.check_dtypes' rules: no FP8 K/V cache under 16-bit queries, and for e4m3 inputs none
    of what the library's FP8 kernels refuse (fp8_args.c: FAJIT_ERR_UNSUPPORTED), refused here before anything is
    launched, naming the argument (num_splits: in check, once it is an int)."""
    if F8.is_fp8(k.dtype) and not F8.is_fp8(q.dtype):
        raise TypeError(f"k: dtype {k.dtype} under {q.dtype} queries: an FP8 K/V cache takes batched K/V "
                        "(fajit.attention with seqlens_k / block_table), not varlen batches; FP8 varlen needs e4m3 q, "
                        "k and v")
    if not F8.is_fp8(q.dtype):
        return
    why = "e4m3 varlen batches take packed queries and keys (cu_seqlens_q and cu_seqlens_k) only"
    if block_table is not None:
        raise ValueError(f"block_table: the FP8 kernels take no paged K/V: {why}")
    if seqused_k is not None:
        raise ValueError(f"seqused_k: the FP8 kernels take no per-sequence key counts: {why}")


def _lengths(t, name, q, n, what):
    """An int32 [n] tensor on q's device, contiguous."""
    T._check_int32(t, name, q, f"[{what}]")
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(f"{name}: shape {tuple(t.shape)}: must be [{what}] = [{n}]")
    if n > 1 and t.stride(0) != 1:
        raise ValueError(f"{name}: stride {t.stride(0)}: must be contiguous (use .contiguous())")


def _max_len(x, name, bound, bound_text):
    if isinstance(x, bool) or not isinstance(x, (int, torch.SymInt)):
        raise TypeError(f"{name}: {x!r}: must be a Python int (the longest sequence's length; fajit reads no lengths "
                        "on the host, so a tensor is not taken)")
    if x < 0 or x > bound:
        raise ValueError(f"{name}: {x}: must be in 0..{bound} ({bound_text})")


def check(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table, out,
          num_splits, q_descale=None, k_descale=None, v_descale=None):
    """(batch, Hq, num_splits as an int, the checked _fp8.Fp8 or None) of a varlen call; TypeError / ValueError
    naming the argument."""
    _tensor(q, "q", q, 3, "[total_q, Hq, D]")
    paged = block_table is not None
    kv_what = "[pages, page_size, Hkv, D] (a page pool, with block_table)" if paged else "[total_k, Hkv, D]"
    _tensor(k, "k", q, 4 if paged else 3, kv_what)
    _tensor(v, "v", q, 4 if paged else 3, kv_what)
    F8.check_dtypes(q, k, v, None)  # out's dtype with the descales, below
    _fp8_refusals(q, k, seqused_k, block_table)
    total_q, hq, d = q.shape
    hkv, dk = k.shape[-2], k.shape[-1]
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")
    if v.shape != k.shape:
        raise ValueError(f"v: shape {tuple(v.shape)} differs from k's {tuple(k.shape)}")
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"k: {hkv} heads; q's head count {hq} must be a multiple of it (GQA / MQA)")
    if not isinstance(cu_seqlens_q, torch.Tensor):
        raise TypeError(f"cu_seqlens_q: expected an int32 torch.Tensor [B + 1], got {type(cu_seqlens_q).__name__}")
    if cu_seqlens_q.dim() != 1 or cu_seqlens_q.shape[0] < 1:
        raise ValueError(f"cu_seqlens_q: shape {tuple(cu_seqlens_q.shape)}: must be [B + 1] (B >= 0 sequences)")
    batch = cu_seqlens_q.shape[0] - 1
    _lengths(cu_seqlens_q, "cu_seqlens_q", q, batch + 1, "B + 1")
    if paged:
        if cu_seqlens_k is not None:
            raise ValueError("cu_seqlens_k: must be None with block_table (sequence b's keys are its pages, "
                             "seqused_k[b] of them)")
        if seqused_k is None:
            raise ValueError("seqused_k: required with block_table (the keys each sequence has in its pages)")
        T.check_block_table(block_table, q, batch, "len(cu_seqlens_q) - 1")
        page_size = k.shape[1]
        if page_size < 16 or page_size % 16:
            raise ValueError(f"k: {page_size} rows per page: the page size must be a positive multiple of 16")
        keys, keys_text = block_table.shape[1] * page_size, "max_pages x page_size, the pages a sequence can hold"
    else:
        if cu_seqlens_k is None:
            raise ValueError("cu_seqlens_k: None: required unless K/V are paged (block_table)")
        _lengths(cu_seqlens_k, "cu_seqlens_k", q, batch + 1, "B + 1")
        keys, keys_text = k.shape[0], "k's tokens"
    if seqused_k is not None:
        _lengths(seqused_k, "seqused_k", q, batch, "B")
    _max_len(max_seqlen_q, "max_seqlen_q", total_q, "q's tokens")
    _max_len(max_seqlen_k, "max_seqlen_k", keys, keys_text)
    if out is not None:
        _tensor(out, "out", q, 3, "[total_q, Hq, D]")
        if out.shape != q.shape:
            raise ValueError(f"out: shape {tuple(out.shape)} differs from q's {tuple(q.shape)}")
    if num_splits is None:
        num_splits = 0
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or not 0 <= num_splits <= T.MAX_SPLITS:
        raise ValueError(f"num_splits: {num_splits!r}: must be None or 0 (the library's heuristic), 1 (no split) or "
                         f"2..{T.MAX_SPLITS}")
    if num_splits >= 2 and F8.is_fp8(q.dtype):
        raise ValueError(f"num_splits: {num_splits}: the FP8 kernels do not split the keys (no split-KV with e4m3 "
                         "inputs); pass None, 0 or 1")
    if not V.HAVE_VARLEN:
        raise ValueError("cu_seqlens_q: this libfajit's fajit.h has no varlen fields in fajit_attention_args")
    # descale row b is sequence b: [B, Hkv] with B = len(cu_seqlens_q) - 1 (fajit.h: "b is then the sequence")
    fp8 = F8.check(q, k, v, out, batch, hkv, q_descale, k_descale, v_descale)
    return batch, hq, num_splits, fp8


# ---- the launch --------------------------------------------------------------------------------------------
def _args(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, seqused_k, block_table,
          num_splits):
    """The varlen fajit_attention_args of a launch (all but lse, the stream and the workspace)."""
    a = Args_c()
    a.struct_size = T._ARGS_SIZE
    a.dtype, a.batch, a.heads_q, a.heads_kv = F8.dtype_code(q.dtype), cu_seqlens_q.shape[0] - 1, q.shape[1], k.shape[-2]
    a.seqlen_q, a.seqlen_k, a.head_dim = int(max_seqlen_q), int(max_seqlen_k), q.shape[2]
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    # stride[0] (the batch's) is not read with cu_seqlens; [1] = head, [2] = token
    a.q_stride[:], a.o_stride[:] = (0, q.stride(1), q.stride(0)), (0, o.stride(1), o.stride(0))
    if block_table is None:
        a.k_stride[:], a.v_stride[:] = (0, k.stride(1), k.stride(0)), (0, v.stride(1), v.stride(0))
    else:  # [pages, page_size, Hkv, D] pools: (page, head, row) strides
        a.k_stride[:], a.v_stride[:] = (k.stride(0), k.stride(2), k.stride(1)), (v.stride(0), v.stride(2), v.stride(1))
        a.block_table, a.max_pages, a.page_size = block_table.data_ptr(), block_table.shape[1], k.shape[1]
    a.softmax_scale, a.causal = scale, int(causal)
    a.seqlens_k = seqused_k.data_ptr() if seqused_k is not None else 0
    a.num_splits = num_splits
    a.cu_seqlens_q = cu_seqlens_q.data_ptr()
    a.cu_seqlens_k = cu_seqlens_k.data_ptr() if cu_seqlens_k is not None else 0
    return a


def _forward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, config,
             seqused_k=None, block_table=None, num_splits=0, variant=V.PLAIN, fp8=None):
    """Launch a checked varlen call on o (and lse) on the current stream."""
    if q.shape[0] == 0 or cu_seqlens_q.shape[0] < 2 or max_seqlen_q == 0:
        return
    if max_seqlen_k == 0:  # no sequence has a key: every row gets O = 0 (LSE = -inf, or the sink)
        T._no_keys(o, lse, variant)
        return
    a = _args(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, seqused_k,
              block_table, num_splits)
    V.set_fields(a, variant)
    F8.set_fields(a, q.dtype, fp8)
    T.launch(q.device, a, lse, config)


def _lse_shape(q, return_lse):
    return (q.shape[1], q.shape[0]) if return_lse else (0,)


# The FP8 descales come last, with defaults (None), so the ops' earlier schema still calls as it did (fajit::attention's
# order); e4m3 q, k and v need no argument of their own, and O is bfloat16 for them (_fp8.out_dtype).
@torch.library.custom_op("fajit::varlen_attention", mutates_args=(), device_types="cuda")
def varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
              cu_seqlens_k: Optional[torch.Tensor], max_seqlen_q: int, max_seqlen_k: int, causal: bool, scale: float,
              return_lse: bool, config: str, seqused_k: Optional[torch.Tensor] = None,
              block_table: Optional[torch.Tensor] = None, num_splits: int = 0, window_left: int = -1,
              window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
              sinks: Optional[torch.Tensor] = None, attention_chunk: int = 0,
              q_descale: Optional[torch.Tensor] = None, k_descale: Optional[torch.Tensor] = None,
              v_descale: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    o = q.new_empty(q.shape, dtype=F8.out_dtype(q.dtype))
    lse = q.new_empty(_lse_shape(q, return_lse), dtype=torch.float32)
    variant = V.from_op(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk)
    fp8 = F8.from_op(q, k, o, q_descale, k_descale, v_descale)
    _forward(q, k, v, o, lse if return_lse else None, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
             scale, config, seqused_k, block_table, num_splits, variant, fp8)
    return o, lse


@varlen_op.register_fake
def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, return_lse, config,
                 seqused_k=None, block_table=None, num_splits=0, window_left=-1, window_right=-1, softcap=0.0,
                 alibi_slopes=None, sinks=None, attention_chunk=0, q_descale=None, k_descale=None, v_descale=None):
    return (q.new_empty(q.shape, dtype=F8.out_dtype(q.dtype)),
            q.new_empty(_lse_shape(q, return_lse), dtype=torch.float32))


@torch.library.custom_op("fajit::varlen_attention_out", mutates_args=("out", "lse"), device_types="cuda")
def varlen_out_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: Optional[torch.Tensor],
                  cu_seqlens_q: torch.Tensor, cu_seqlens_k: Optional[torch.Tensor], max_seqlen_q: int,
                  max_seqlen_k: int, causal: bool, scale: float, config: str, seqused_k: Optional[torch.Tensor] = None,
                  block_table: Optional[torch.Tensor] = None, num_splits: int = 0, window_left: int = -1,
                  window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                  sinks: Optional[torch.Tensor] = None, attention_chunk: int = 0,
                  q_descale: Optional[torch.Tensor] = None, k_descale: Optional[torch.Tensor] = None,
                  v_descale: Optional[torch.Tensor] = None) -> None:
    variant = V.from_op(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk)
    fp8 = F8.from_op(q, k, out, q_descale, k_descale, v_descale)
    _forward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, config,
             seqused_k, block_table, num_splits, variant, fp8)


@varlen_out_op.register_fake
def _varlen_out_fake(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, config,
                     seqused_k=None, block_table=None, num_splits=0, window_left=-1, window_right=-1, softcap=0.0,
                     alibi_slopes=None, sinks=None, attention_chunk=0, q_descale=None, k_descale=None, v_descale=None):
    return None


# ---- Python entry point ------------------------------------------------------------------------------------
def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                     softmax_scale=None, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, learnable_sink=None,
                     sinks=None, attention_chunk=0, seqused_k=None, block_table=None, num_splits=None,
                     return_lse=False, out=None, config=None, scale=None, q_descale=None, k_descale=None,
                     v_descale=None):
    """See fajit.varlen_attention: the checks, then the op."""
    batch, hq, splits, fp8 = check(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k,
                                   block_table, out, num_splits, q_descale, k_descale, v_descale)
    scale_name = "scale" if scale is not None and softmax_scale is None else "softmax_scale"
    scale = T.check_scale(V.pick("softmax_scale", softmax_scale, "scale", scale), q.shape[2], scale_name)
    sink_name = "sinks" if learnable_sink is None and sinks is not None else "learnable_sink"
    variant = V.check(q, batch, hq, window_size, softcap, alibi_slopes,
                      V.pick("learnable_sink", learnable_sink, "sinks", sinks), attention_chunk, sink_name)
    text = T.config_text(config)
    rest = (seqused_k, block_table, splits, *V.op_args(variant))
    rest += F8.op_args(fp8) if fp8 is not None else ()  # a 16-bit call's op arguments as before
    if out is None:
        o, lse = torch.ops.fajit.varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                  bool(causal), scale, bool(return_lse), text, *rest)
        return (o, lse) if return_lse else o
    lse = q.new_empty((hq, q.shape[0]), dtype=torch.float32) if return_lse else None
    torch.ops.fajit.varlen_attention_out(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                         bool(causal), scale, text, *rest)
    return (out, lse) if return_lse else out

