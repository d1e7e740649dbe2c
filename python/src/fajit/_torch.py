"""_torch.py - fajit.attention on torch tensors, as torch custom ops (imported on the first call).

Two ops are registered with torch.library, each with a fake (meta) implementation that gives the output
shapes without running anything, so torch.compile(fullgraph=True) keeps them in its graph:
    fajit::attention(q, k, v, causal, scale, bnhd, return_lse, config) -> (O, LSE)   (LSE is empty
        when not asked for)
    fajit::attention_out(q, k, v, out, lse?, causal, scale, bnhd, config) -> ()      (writes out, lse)
The real implementation fills a fajit_attention_args from the tensors' pointers, shapes and element
strides (no copies) and calls fajit_attention_forward on torch's current stream of the tensors'
device, through that device's fajit context (created on first use). The forward only launches kernels
(after its first call per shape class has compiled or loaded one), so calls can be captured in CUDA graphs.
Arguments are checked here, in Python, before anything reaches the library or the GPU.
"""
import ctypes
import math
from typing import Optional, Tuple

import torch

from . import _config, _lib
from ._lib import Args_c, lib

_DTYPES = {torch.float16: _lib.DTYPE["FAJIT_DTYPE_F16"], torch.bfloat16: _lib.DTYPE["FAJIT_DTYPE_BF16"]}
_ARG_FIELDS = {f for f, _ in Args_c._fields_}
_ARGS_SIZE = ctypes.sizeof(Args_c)
# split-KV workspace from torch's allocator (stream-ordered, capturable) when the library has one
_WORKSPACE = {"workspace", "workspace_bytes"} <= _ARG_FIELDS and "fajit_attention_workspace_size" in _lib.H.prototypes \
    and "fajit_attention_workspace_size" not in _lib.UNDECLARED
_configs = {}  # canonical text -> checked fajit_config


def _raw_stream(device_index):
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return get(device_index) if get is not None else torch.cuda.current_stream(device_index).cuda_stream


# ---- argument checks (before anything reaches the GPU) ------------------------------------------------
def _dims(t, name, layout):
    """(B, H, N, D) of tensor `t` given as argument `name` in `layout`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{name}: expected a 4-d tensor ({'[B, H, N, D]' if layout == 'bhnd' else '[B, N, H, D]'}, "
                         f"layout {layout!r}), got shape {tuple(t.shape)}")
    b, x, y, d = t.shape
    return (b, x, y, d) if layout == "bhnd" else (b, y, x, d)


def _check_tensor(t, name, q):
    if t.dtype not in _DTYPES:
        raise TypeError(f"{name}: dtype {t.dtype} is not supported (torch.float16 or torch.bfloat16)")
    if t.dtype != q.dtype:
        raise TypeError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}")
    if t.device.type != "cuda":
        raise ValueError(f"{name}: on {t.device}; fajit runs on CUDA tensors")
    if t.device != q.device:
        raise ValueError(f"{name}: on {t.device}, q on {q.device}")
    if t.stride(3) != 1:
        raise ValueError(f"{name}: the last dim must be contiguous (stride 1); got strides {tuple(t.stride())}")


def check_args(q, k, v, out, layout):
    """(B, Hq, Hkv, Nq, Nk, D); TypeError / ValueError naming the argument when they do not fit."""
    if layout not in ("bhnd", "bnhd"):
        raise ValueError(f"layout: {layout!r}: must be 'bhnd' ([B, H, N, D]) or 'bnhd' ([B, N, H, D])")
    b, hq, nq, d = _dims(q, "q", layout)
    bk, hkv, nk, dk = _dims(k, "k", layout)
    vdims = _dims(v, "v", layout)
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_tensor(t, name, q)
    if bk != b:
        raise ValueError(f"k: batch {bk} differs from q's {b}")
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")
    if vdims != (bk, hkv, nk, dk):
        raise ValueError(f"v: (B, H, N, D) {vdims} differs from k's {(bk, hkv, nk, dk)}")
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"k: {hkv} heads; q's head count {hq} must be a multiple of it (GQA / MQA)")
    if out is not None:
        _dims(out, "out", layout)
        _check_tensor(out, "out", q)
        if out.shape != q.shape:
            raise ValueError(f"out: shape {tuple(out.shape)} differs from q's {tuple(q.shape)}")
    return b, hq, hkv, nq, nk, d


def check_scale(scale, d):
    if scale is None:
        return 1.0 / math.sqrt(d) if d > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale == 0:
        raise ValueError(f"scale: {scale!r}: must be a finite non-zero number (None: 1/sqrt(head dim))")
    return float(scale)


def config_text(config):
    if config is None:
        return ""
    if isinstance(config, _config.Config):
        return config.text
    if isinstance(config, str):
        return config
    raise TypeError(f"config: expected a fajit.Config, its canonical text or None, got {type(config).__name__}")


# ---- the launch ------------------------------------------------------------------------------------------
def _checked_config(text):
    c = _configs.get(text)
    if c is None:
        c = _config.make_config(text)._c  # ValueError / FajitInputError when it is not a valid config
        _configs[text] = c
    return c


def _strides(t, bnhd):
    s = t.stride()
    return (s[0], s[2], s[1]) if bnhd else (s[0], s[1], s[2])


def _forward(q, k, v, o, lse, causal, scale, bnhd, config):
    """Launch fajit_attention_forward on o (and lse) on the current stream; shapes already checked."""
    b, x, y, d = q.shape
    hq, nq = (y, x) if bnhd else (x, y)
    hkv, nk = (k.shape[2], k.shape[1]) if bnhd else (k.shape[1], k.shape[2])
    if b * hq * nq == 0:
        return
    if nk == 0:  # no key for any row: O = 0, LSE = -inf (as the kernel gives a fully masked row)
        o.zero_()
        if lse is not None:
            lse.fill_(-math.inf)
        return
    dev = q.device.index
    ctx = _lib.context(dev)
    a = Args_c()
    if "struct_size" in _ARG_FIELDS:
        a.struct_size = _ARGS_SIZE
    a.dtype, a.batch, a.heads_q, a.heads_kv = _DTYPES[q.dtype], b, hq, hkv
    a.seqlen_q, a.seqlen_k, a.head_dim = nq, nk, d
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    a.lse = lse.data_ptr() if lse is not None else 0
    a.q_stride[:], a.k_stride[:] = _strides(q, bnhd), _strides(k, bnhd)
    a.v_stride[:], a.o_stride[:] = _strides(v, bnhd), _strides(o, bnhd)
    a.softmax_scale, a.causal, a.stream = scale, int(causal), _raw_stream(dev)
    cfg = ctypes.byref(_checked_config(config)) if config else None
    workspace = _workspace(ctx, a, cfg, q.device, config) if _WORKSPACE else None
    status = lib.fajit_attention_forward(ctx.handle, ctypes.byref(a), cfg)
    del workspace  # the launch is queued: torch's allocator hands the buffer out again only in stream order
    if status:
        raise _lib.error(status)


def _workspace(ctx, a, cfg, device, config):
    """A torch buffer for the split-KV partials when this call splits (its size cached per shape)."""
    key = (a.dtype, a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal, config)
    size = ctx.workspace_sizes.get(key)
    if size is None:
        n = ctypes.c_size_t()
        _lib.check(lib.fajit_attention_workspace_size(ctx.handle, ctypes.byref(a), cfg, ctypes.byref(n)))
        size = ctx.workspace_sizes[key] = n.value
    if not size:
        return None
    buf = torch.empty(size, dtype=torch.uint8, device=device)
    a.workspace, a.workspace_bytes = buf.data_ptr(), size
    return buf


# ---- custom ops --------------------------------------------------------------------------------------------
def _lse_shape(q, bnhd):
    b, x, y, _ = q.shape
    return (b, y, x) if bnhd else (b, x, y)


@torch.library.custom_op("fajit::attention", mutates_args=(), device_types="cuda")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, bnhd: bool,
                 return_lse: bool, config: str) -> Tuple[torch.Tensor, torch.Tensor]:
    o = q.new_empty(q.shape)
    lse = q.new_empty(_lse_shape(q, bnhd) if return_lse else (0,), dtype=torch.float32)
    _forward(q, k, v, o, lse if return_lse else None, causal, scale, bnhd, config)
    return o, lse


@attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, bnhd, return_lse, config):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, bnhd) if return_lse else (0,),
                                             dtype=torch.float32)


@torch.library.custom_op("fajit::attention_out", mutates_args=("out", "lse"), device_types="cuda")
def attention_out_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: Optional[torch.Tensor],
                     causal: bool, scale: float, bnhd: bool, config: str) -> None:
    _forward(q, k, v, out, lse, causal, scale, bnhd, config)


@attention_out_op.register_fake
def _attention_out_fake(q, k, v, out, lse, causal, scale, bnhd, config):
    return None


# ---- Python entry points ------------------------------------------------------------------------------------
def attention(q, k, v, *, causal=False, scale=None, layout="bhnd", return_lse=False, out=None, config=None):
    """See fajit.attention."""
    b, hq, _, nq, _, d = check_args(q, k, v, out, layout)
    scale, text, bnhd = check_scale(scale, d), config_text(config), layout == "bnhd"
    if out is None:
        o, lse = torch.ops.fajit.attention(q, k, v, bool(causal), scale, bnhd, bool(return_lse), text)
        return (o, lse) if return_lse else o
    lse = q.new_empty((b, hq, nq), dtype=torch.float32) if return_lse else None
    torch.ops.fajit.attention_out(q, k, v, out, lse, bool(causal), scale, bnhd, text)
    return (out, lse) if return_lse else out


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """See fajit.scaled_dot_product_attention."""
    if attn_mask is not None:
        raise ValueError("attn_mask: fajit takes no mask tensor (is_causal only)")
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: {dropout_p!r}: fajit has no dropout (0.0 only)")
    _, hq, hkv, nq, nk, _ = check_args(query, key, value, None, "bhnd")
    if hq != hkv and not enable_gqa:
        raise ValueError(f"key: {hkv} heads, query {hq}: pass enable_gqa=True for grouped-query attention")
    if is_causal and nq != nk:
        raise ValueError(f"is_causal with L {nq} != S {nk}: SDPA aligns the mask to the top left, fajit to the bottom "
                         "right; call fajit.attention(..., causal=True) for the bottom-right mask")
    return attention(query, key, value, causal=is_causal, scale=scale)
