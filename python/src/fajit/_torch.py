"""_torch.py - fajit.attention on torch tensors, as torch custom ops (imported on the first call).

Two ops are registered with torch.library, each with a fake (meta) implementation that gives the output
shapes without running anything, so torch.compile(fullgraph=True) keeps them in its graph:
    fajit::attention(q, k, v, causal, scale, bnhd, return_lse, config, seqlens_k?, block_table?,
        num_splits) -> (O, LSE)                      (LSE is empty when not asked for)
    fajit::attention_out(q, k, v, out, lse?, causal, scale, bnhd, config, seqlens_k?, block_table?,
        num_splits) -> ()                            (writes out, lse)
The real implementation fills a fajit_attention_args from the tensors' pointers, shapes and element
strides (no copies) and calls fajit_attention_forward on torch's current stream of the tensors'
device, through that device's fajit context (created on first use). The forward only launches kernels
(after its first call per shape class has compiled or loaded one), so calls can be captured in CUDA graphs.
A call that splits the KV range (split-KV decode) gets its workspace from torch's caching allocator on
the current stream (a graph capture takes it from the graph's pool), never the context's shared buffer.
Arguments are checked here, in Python, before anything reaches the library or the GPU; the values inside
seqlens_k and block_table are not read on the host (that would synchronize): see fajit.attention.
"""
import ctypes
import math
import threading
from typing import Optional, Tuple

import torch

from . import _config, _lib
from . import _fp8 as F8
from . import _variants as V
from ._lib import Args_c, lib

_DTYPES = {torch.float16: _lib.DTYPE["FAJIT_DTYPE_F16"], torch.bfloat16: _lib.DTYPE["FAJIT_DTYPE_BF16"]}
_ARG_FIELDS = {f for f, _ in Args_c._fields_}
_ARGS_SIZE = ctypes.sizeof(Args_c)
# split-KV workspace from torch's allocator (stream-ordered, capturable) when the library has one
_WORKSPACE = {"workspace", "workspace_bytes"} <= _ARG_FIELDS and "fajit_attention_workspace_size" in _lib.H.prototypes \
    and "fajit_attention_workspace_size" not in _lib.UNDECLARED
# the decode fields (seqlens_k, split-KV, paged K/V: fajit.h's fajit_attention_args since 0.2)
_DECODE = {"struct_size", "seqlens_k", "num_splits", "block_table", "max_pages", "page_size"} <= _ARG_FIELDS
MAX_SPLITS = _lib.H.defines.get("FAJIT_MAX_SPLITS", 128)
_configs = {}  # canonical text -> checked fajit_config
# the device type fajit.attention takes: "cuda" (tests and bench/python_overhead_host.py set "cpu", with the
# device-less context, to run the Python side of a call on CPU tensors without a GPU)
_DEVICE_TYPE = "cuda"


# the current stream of a CUDA device as an integer handle: torch's C accessor (torch.cuda.current_stream()
# builds a Stream object per call), else that
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
    (lambda device_index: torch.cuda.current_stream(device_index).cuda_stream)


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
    """dtype (one fajit takes; the pairs' rules are _fp8.check_dtypes'), device, a contiguous last dim (any rank:
    _varlen's packed tensors too)."""
    if not F8.supported(t.dtype):
        raise TypeError(f"{name}: dtype {t.dtype} is not supported (torch.float16 or torch.bfloat16" +
                        (", or torch.float8_e4m3fn)" if F8.HAVE_FP8 else ")"))
    if t.device.type != _DEVICE_TYPE:
        raise ValueError(f"{name}: on {t.device}; fajit runs on CUDA tensors")
    if t.device != q.device:
        raise ValueError(f"{name}: on {t.device}, q on {q.device}")
    if t.stride(-1) != 1:
        raise ValueError(f"{name}: the last dim must be contiguous (stride 1); got strides {tuple(t.stride())}")


def check_args(q, k, v, out, layout, paged=False):
    """(B, Hq, Hkv, Nq, Nk, D); TypeError / ValueError naming the argument when they do not fit. paged: k
    and v are page pools ([pages, Hkv, page_size, D] in "bhnd", [pages, page_size, Hkv, D] in "bnhd"),
    so their first dim is not the batch and Nk is the page size (check_decode gives the capacity)."""
    if layout not in ("bhnd", "bnhd"):
        raise ValueError(f"layout: {layout!r}: must be 'bhnd' ([B, H, N, D]) or 'bnhd' ([B, N, H, D])")
    b, hq, nq, d = _dims(q, "q", layout)
    bk, hkv, nk, dk = _dims(k, "k", layout)
    vdims = _dims(v, "v", layout)
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _check_tensor(t, name, q)
    if bk != b and not paged:
        raise ValueError(f"k: batch {bk} differs from q's {b}")
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")
    if vdims != (bk, hkv, nk, dk):
        what = "(pages, H, page_size, D)" if paged else "(B, H, N, D)"
        raise ValueError(f"v: {what} {vdims} differs from k's {(bk, hkv, nk, dk)}")
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"k: {hkv} heads; q's head count {hq} must be a multiple of it (GQA / MQA)")
    if out is not None:
        _dims(out, "out", layout)
        _check_tensor(out, "out", q)
        if out.shape != q.shape:
            raise ValueError(f"out: shape {tuple(out.shape)} differs from q's {tuple(q.shape)}")
    F8.check_dtypes(q, k, v, out)
    return b, hq, hkv, nq, nk, d


def _check_int32(t, name, q, shape_text):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected an int32 torch.Tensor {shape_text} or None, got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: dtype {t.dtype}: must be torch.int32 {shape_text}")
    if t.device != q.device:
        raise ValueError(f"{name}: on {t.device}, q on {q.device}: it must be on q's CUDA device")


def check_block_table(block_table, q, b, b_is):
    """block_table: int32 [b, max_pages >= 1], contiguous, on q's device; b_is says where b comes from."""
    _check_int32(block_table, "block_table", q, f"[B, max_pages] = [{b}, max_pages]")
    if block_table.dim() != 2 or block_table.shape[0] != b or block_table.shape[1] < 1:
        raise ValueError(f"block_table: shape {tuple(block_table.shape)}: must be [B, max_pages] with B = {b} "
                         f"({b_is}) and max_pages >= 1")
    if block_table.stride(1) != 1 or (b > 1 and block_table.stride(0) != block_table.shape[1]):
        raise ValueError(f"block_table: strides {tuple(block_table.stride())}: must be contiguous "
                         "(use .contiguous())")


def check_decode(q, layout, b, nk, seqlens_k, block_table, page_size, num_splits):
    """The decode arguments of fajit.attention: (seqlen_k capacity, num_splits as an int); TypeError /
    ValueError naming the argument. Values inside the tensors are not read (no host synchronization)."""
    if seqlens_k is not None:
        _check_int32(seqlens_k, "seqlens_k", q, f"[B] = [{b}]")
        if tuple(seqlens_k.shape) != (b,):
            raise ValueError(f"seqlens_k: shape {tuple(seqlens_k.shape)}: must be [B] = [{b}] (q's batch)")
        if b > 1 and seqlens_k.stride(0) != 1:
            raise ValueError(f"seqlens_k: stride {seqlens_k.stride(0)}: must be contiguous (use .contiguous())")
    if block_table is None:
        if page_size is not None:
            raise ValueError(f"page_size: {page_size!r} without block_table: paged K/V needs the block table")
    else:
        check_block_table(block_table, q, b, "q's batch")
        if page_size is not None and (isinstance(page_size, bool) or page_size != nk):
            raise ValueError(f"page_size: {page_size!r} differs from the page pools' rows per page {nk} (k's "
                             f"{'dim 2' if layout == 'bhnd' else 'dim 1'}); leave it None to take the pools'")
        if nk < 16 or nk % 16:
            raise ValueError(f"k: {nk} rows per page: the page size must be a positive multiple of 16")
        nk = block_table.shape[1] * nk  # the capacity: max_pages x page_size keys
    if num_splits is None:
        num_splits = 0
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or not 0 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits: {num_splits!r}: must be None or 0 (the library's heuristic), 1 (no split) or "
                         f"2..{MAX_SPLITS}")
    if num_splits and not _DECODE:
        raise ValueError(f"num_splits: {num_splits}: this libfajit has no split-KV fields in fajit_attention_args")
    if (seqlens_k is not None or block_table is not None) and not _DECODE:
        raise ValueError("seqlens_k / block_table: this libfajit has no decode fields in fajit_attention_args")
    return nk, num_splits


def check_scale(scale, d, name="scale"):
    if scale is None:
        return 1.0 / math.sqrt(d) if d > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale == 0:
        raise ValueError(f"{name}: {scale!r}: must be a finite non-zero number (None: 1/sqrt(head dim))")
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


def _rows_keys(q, k, bnhd, block_table):
    """(B x Hq x Nq, Nk) of a launch: its query rows, and the keys of a sequence (paged: the capacity)."""
    b, x, y, _ = q.shape
    nk = k.shape[1] if bnhd else k.shape[2]
    return b * x * y, nk * block_table.shape[1] if block_table is not None else nk


def _args(q, k, v, o, causal, scale, bnhd, seqlens_k, block_table, num_splits):
    """The fajit_attention_args of a launch from the tensors' pointers, shapes and element strides (no copies),
    all but lse, the stream and the workspace."""
    b, x, y, d = q.shape
    hq, nq = (y, x) if bnhd else (x, y)
    hkv, nk = (k.shape[2], k.shape[1]) if bnhd else (k.shape[1], k.shape[2])
    page_size = 0
    if block_table is not None:  # k, v are page pools: nk is the page size, the capacity is max_pages of them
        page_size, nk = nk, block_table.shape[1] * nk
    a = Args_c()
    if "struct_size" in _ARG_FIELDS:
        a.struct_size = _ARGS_SIZE
    a.dtype, a.batch, a.heads_q, a.heads_kv = F8.dtype_code(q.dtype), b, hq, hkv
    a.seqlen_q, a.seqlen_k, a.head_dim = nq, nk, d
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    a.q_stride[:], a.k_stride[:] = _strides(q, bnhd), _strides(k, bnhd)  # paged: (page, head, row) strides
    a.v_stride[:], a.o_stride[:] = _strides(v, bnhd), _strides(o, bnhd)
    a.softmax_scale, a.causal = scale, int(causal)
    if _DECODE:
        a.seqlens_k = seqlens_k.data_ptr() if seqlens_k is not None else 0
        a.num_splits = num_splits
        if block_table is not None:
            a.block_table, a.max_pages, a.page_size = block_table.data_ptr(), block_table.shape[1], page_size
    return a


def _no_keys(o, lse, variant):
    """The result of rows that see no key: O = 0, LSE = -inf, or the sink logit when there is one (fajit.h)."""
    o.zero_()
    if lse is not None:
        if variant.sinks is None:
            lse.fill_(-math.inf)
        else:  # lse is [B, Hq, Nq] or (varlen) [Hq, total]: the head dim is the one before the rows
            lse.copy_(variant.sinks[:, None].expand(lse.shape[-2:]).expand(lse.shape))


def _forward(q, k, v, o, lse, causal, scale, bnhd, config, seqlens_k=None, block_table=None, num_splits=0,
             variant=V.PLAIN, fp8=None):
    """Launch fajit_attention_forward on o (and lse) on the current stream; shapes already checked."""
    rows, keys = _rows_keys(q, k, bnhd, block_table)
    if rows == 0:
        return
    if keys == 0:  # no key for any row: O = 0, LSE = -inf (as the kernel gives a fully masked row)
        _no_keys(o, lse, variant)
        return
    a = _args(q, k, v, o, causal, scale, bnhd, seqlens_k, block_table, num_splits)
    V.set_fields(a, variant)
    F8.set_fields(a, q.dtype, fp8)
    launch(q.device, a, lse, config)


def launch(device, a, lse, config):
    """fajit_attention_forward with filled args `a` on the current stream of `device` (the workspace of a split
    from torch's allocator); raises the library's error."""
    dev = device.index
    ctx = _lib.context(dev)
    a.lse = lse.data_ptr() if lse is not None else 0
    a.stream = _raw_stream(dev)
    cfg = ctypes.byref(_checked_config(config)) if config else None
    size = _workspace_size(ctx, a, cfg, config) if _WORKSPACE else 0
    workspace = _workspace(a, size, device) if size else None
    status = lib.fajit_attention_forward(ctx.handle, ctypes.byref(a), cfg)
    del workspace  # the launch is queued: torch's allocator hands the buffer out again only in stream order
    if status:
        raise _lib.error(status)


def _workspace_size(ctx, a, cfg, config):
    """Bytes of split-KV partials this call needs, 0 when it does not split (cached per shape: it does not
    depend on the values in seqlens_k or the block table, only on whether they are given; fajit.tune drops
    the cache, ctx.choices_changed, as a winner can change the tile and so the split count)."""
    key = (a.dtype, getattr(a, "kv_dtype", 0), a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_k, a.head_dim,
           a.causal, config)  # kv_dtype: an e4m3 K/V cache takes another tile, so another split count
    if _DECODE:
        key += (a.num_splits, bool(a.seqlens_k), bool(a.block_table), a.page_size)
    if V.HAVE_VARIANTS:  # a window or a chunk changes the keys a row block reads, so the split count
        key += (a.window, a.window_left, a.window_right, a.attention_chunk, a.softcap, bool(a.sinks),
                bool(a.alibi_slopes))
    if V.HAVE_VARLEN:
        key += (bool(a.cu_seqlens_q), bool(a.cu_seqlens_k))
    sizes = ctx.workspace_sizes  # once: a size asked before a concurrent choices_changed lands in the old dict
    size = sizes.get(key)
    if size is None:
        n = ctypes.c_size_t()
        _lib.check(lib.fajit_attention_workspace_size(ctx.handle, ctypes.byref(a), cfg, ctypes.byref(n)))
        size = sizes[key] = n.value
    return size


def _workspace(a, size, device):
    """A torch buffer of `size` bytes for the split-KV partials, set in the args; the caller keeps it until
    the launch is queued."""
    buf = torch.empty(size, dtype=torch.uint8, device=device)
    a.workspace, a.workspace_bytes = buf.data_ptr(), size
    return buf


# ---- custom ops --------------------------------------------------------------------------------------------
def _lse_shape(q, bnhd):
    b, x, y, _ = q.shape
    return (b, y, x) if bnhd else (b, x, y)


# The variant arguments come last, with defaults (off), so the ops' earlier schema still calls as it did; the FP8
# descales after them (q, k, v of dtype float8_e4m3fn need no argument of their own).
@torch.library.custom_op("fajit::attention", mutates_args=(), device_types="cuda")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, bnhd: bool,
                 return_lse: bool, config: str, seqlens_k: Optional[torch.Tensor] = None,
                 block_table: Optional[torch.Tensor] = None, num_splits: int = 0, window_left: int = -1,
                 window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                 sinks: Optional[torch.Tensor] = None, attention_chunk: int = 0,
                 q_descale: Optional[torch.Tensor] = None, k_descale: Optional[torch.Tensor] = None,
                 v_descale: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    o = q.new_empty(q.shape, dtype=F8.out_dtype(q.dtype))
    lse = q.new_empty(_lse_shape(q, bnhd) if return_lse else (0,), dtype=torch.float32)
    variant = V.from_op(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk)
    fp8 = F8.from_op(q, k, o, q_descale, k_descale, v_descale)
    _forward(q, k, v, o, lse if return_lse else None, causal, scale, bnhd, config, seqlens_k, block_table, num_splits,
             variant, fp8)
    return o, lse


@attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, bnhd, return_lse, config, seqlens_k=None, block_table=None, num_splits=0,
                    window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None, sinks=None, attention_chunk=0,
                    q_descale=None, k_descale=None, v_descale=None):
    return q.new_empty(q.shape, dtype=F8.out_dtype(q.dtype)), q.new_empty(_lse_shape(q, bnhd) if return_lse else (0,),
                                             dtype=torch.float32)


@torch.library.custom_op("fajit::attention_out", mutates_args=("out", "lse"), device_types="cuda")
def attention_out_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: Optional[torch.Tensor],
                     causal: bool, scale: float, bnhd: bool, config: str, seqlens_k: Optional[torch.Tensor] = None,
                     block_table: Optional[torch.Tensor] = None, num_splits: int = 0, window_left: int = -1,
                     window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                     sinks: Optional[torch.Tensor] = None, attention_chunk: int = 0,
                     q_descale: Optional[torch.Tensor] = None, k_descale: Optional[torch.Tensor] = None,
                     v_descale: Optional[torch.Tensor] = None) -> None:
    variant = V.from_op(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk)
    fp8 = F8.from_op(q, k, out, q_descale, k_descale, v_descale)
    _forward(q, k, v, out, lse, causal, scale, bnhd, config, seqlens_k, block_table, num_splits, variant, fp8)


@attention_out_op.register_fake
def _attention_out_fake(q, k, v, out, lse, causal, scale, bnhd, config, seqlens_k=None, block_table=None,
                        num_splits=0, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None, sinks=None,
                        attention_chunk=0, q_descale=None, k_descale=None, v_descale=None):
    return None


# ---- the eager fast path ------------------------------------------------------------------------------------
# A call whose signature (see _key) passed the checks before launches through a prebuilt
# fajit_attention_args: per call only the data pointers and the stream are set, and the library is called
# directly, not through torch's dispatcher. Why skipping the dispatcher is correct: for plain dense CUDA
# tensors that do not require grad, in eager mode, torch.ops.fajit.attention(_out) runs the Autograd
# kernel (nothing to record), ADInplaceOrView (bumps the version counter of the mutated out), the CUDA
# kernel (attention_op / attention_out_op: _forward) and custom_op's check that the outputs alias no
# input. The plan does that work itself: the same args on the same stream, a new O and LSE, and the
# version bump of out. Whatever else the dispatcher could do comes from state the fast path refuses:
#   - torch.compile / torch.export tracing: torch.compiler.is_compiling() is True in Dynamo's trace; it
#     is tested first, so Dynamo folds the branch and traces the op, never the rest;
#   - a TorchDispatchMode on the stack, infra modes included (FakeTensorMode, make_fx's and AOTAutograd's
#     proxy tracing, FunctionalTensorMode): torch._C._len_torch_dispatch_stack() > 0;
#   - a TorchFunctionMode (make_fx, `with torch.device(...)`): torch._C._is_torch_function_mode_enabled();
#   - functorch transforms (vmap, grad, jvp, torch.func.functionalize): a dynamic layer on functorch's stack;
#   - the autograd profiler while it records (so its trace names the fajit:: op);
#   - tensor subclasses (FakeTensor, FunctionalTensor, DTensor, Parameter, ...): type(t) is not torch.Tensor;
#   - a tensor that requires grad, in any grad mode: the op, as before the fast path existed;
#   - C++ wrappers of type torch.Tensor outside their transform (functionalization's, functorch's):
#     data_ptr() raises or is 0 (a real tensor with elements never has address 0): the op is called.
# Under a CUDA graph capture of eager code the plan's launch is captured, as the op's would be (same
# kernels, O and the workspace from the graph's pool). The checks run once per signature and thread; a
# call with a bad argument never has a plan (its key is one no checked call had), so it is checked, and
# refused, every time. Plans are per thread (the args struct is written per call); at most _MAX_PLANS a
# thread, the oldest dropped first.
_MAX_PLANS = 256
_EAGER_GUARDS = ("_len_torch_dispatch_stack", "_is_torch_function_mode_enabled")
_EAGER = all(hasattr(torch._C, n) for n in _EAGER_GUARDS) and hasattr(torch._C, "_increment_version") and \
    hasattr(torch._C, "_functorch") and hasattr(torch._C._functorch, "get_dynamic_layer_stack_depth") and \
    hasattr(torch._C, "_autograd") and hasattr(torch._C._autograd, "_profiler_enabled")
if _EAGER:
    _is_compiling = torch.compiler.is_compiling
    _dispatch_modes, _function_modes = torch._C._len_torch_dispatch_stack, torch._C._is_torch_function_mode_enabled
    _transforms = torch._C._functorch.get_dynamic_layer_stack_depth
    _profiling = torch._C._autograd._profiler_enabled
    try:  # out's version counter: a sequence of tensors (torch >= 2.5), else one tensor
        torch._C._increment_version((torch.empty(0),))
        _bump = torch._C._increment_version
    except TypeError:
        def _bump(tensors):
            torch._C._increment_version(tensors[0])
_Tensor = torch.Tensor


class _Plans(threading.local):
    def __init__(self):
        self.plans = {}  # _key(...) -> _plan(...)


_local = _Plans()


def _tensor_key(t):
    """A decode tensor's part of the key (see _key): None, its shape, strides, dtype and device, or False when
    it is not a plain torch.Tensor."""
    if t is None:
        return None
    return (t.shape, t.stride(), t.dtype, t.device) if type(t) is _Tensor else False


_NO_WINDOW = (-1, -1)


def _variant_key(window_size, softcap, alibi_slopes, learnable_sink, sinks, attention_chunk):
    """The variant arguments' part of the key, from the arguments as given: None when all are off, False when the
    call takes the checks and the op (types the checks would have to convert or refuse: a list window, a bool, a
    sink that is not a contiguous float32 tensor, a tensor subclass or one that requires grad)."""
    if window_size is _NO_WINDOW and softcap == 0.0 and alibi_slopes is None and learnable_sink is None and \
            sinks is None and attention_chunk == 0:
        return None
    if type(window_size) is not tuple or len(window_size) != 2 or type(window_size[0]) is not int or \
            type(window_size[1]) is not int or type(softcap) is not float and type(softcap) is not int or \
            type(attention_chunk) is not int:
        return False
    sk = learnable_sink if learnable_sink is not None else sinks
    if sk is not None and (type(sk) is not _Tensor or sk.dtype != torch.float32 or not sk.is_contiguous()):
        return False
    if learnable_sink is not None and sinks is not None:
        return False
    al, sk = _tensor_key(alibi_slopes), _tensor_key(sk)
    if al is False or sk is False or (alibi_slopes is not None and alibi_slopes.requires_grad) or \
            (sk is not None and (learnable_sink if learnable_sink is not None else sinks).requires_grad):
        return False
    return (window_size, softcap, attention_chunk, al, sk)


def _descale_key(q_descale, k_descale, v_descale):
    """The descales' part of the key (FP8 calls): None when none is given, False when the call takes the checks and
    the op (a descale that is not a plain float32 torch.Tensor, or one that requires grad)."""
    if q_descale is None and k_descale is None and v_descale is None:
        return None
    out = []
    for t in (q_descale, k_descale, v_descale):
        if t is not None and (type(t) is not _Tensor or t.dtype != torch.float32 or t.requires_grad):
            return False
        out.append(_tensor_key(t))
    return tuple(out)


def _key(q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k, block_table, page_size, num_splits,
         variant=None):
    """Everything fajit.attention's checks and launch read, as a dict key: each tensor's shape, strides,
    dtype and device, the other arguments by value (what compares equal behaves the same in the checks),
    except that scale and the decode ints must not be bools (True == 1; the checks refuse bools). None:
    the call takes the checks and the op (a tensor subclass or one that requires grad, another argument
    type, a tensor without strides)."""
    T = _Tensor
    if type(q) is not T or type(k) is not T or type(v) is not T or q.requires_grad or k.requires_grad or \
            v.requires_grad or type(causal) is not bool or type(return_lse) is not bool or \
            scale is not None and type(scale) is not float and type(scale) is not int:
        return None
    if config is not None and type(config) is not str:
        if type(config) is not _config.Config:
            return None
        config = config.text
    try:
        decode = None
        if seqlens_k is not None or block_table is not None or page_size is not None or num_splits is not None:
            if page_size is not None and type(page_size) is not int or \
                    num_splits is not None and type(num_splits) is not int:
                return None
            decode = (_tensor_key(seqlens_k), _tensor_key(block_table), page_size, num_splits)
            if decode[0] is False or decode[1] is False:
                return None
        if out is not None:
            if type(out) is not T or out.requires_grad:
                return None
            out = (out.shape, out.stride(), out.dtype, out.device)
        return (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device, v.shape, v.stride(),
                v.dtype, v.device, out, causal, return_lse, scale, layout, config, decode, variant)
    except Exception:  # e.g. a sparse or nested tensor has no strides: the checks say what is wrong
        return None


def _have_data(*tensors):
    """Whether every tensor given (None: not given) has a data pointer: not a C++ wrapper tensor (see above)."""
    try:
        return all(t.data_ptr() for t in tensors if t is not None)
    except RuntimeError:
        return False


def _plan(q, k, v, out, causal, scale, bnhd, return_lse, text, seqlens_k, block_table, num_splits, variant=V.PLAIN,
          fp8=None):
    """The launch of every call with this (checked) call's signature: run(q, k, v, out, seqlens_k,
    block_table, alibi_slopes, sinks, q_descale, k_descale, v_descale) returns what fajit.attention returns, or
    None when a tensor has no data pointer (the caller takes the op). None when the call needs no kernel (no rows,
    no keys: the op does those) or a tensor has no data pointer. fp8: the call's checked Fp8, whose descales must be
    the caller's own tensors (views of them, no copy: _fp8_plannable), as the run reads their pointers per call."""
    rows, keys = _rows_keys(q, k, bnhd, block_table)
    if rows == 0 or keys == 0 or not _have_data(q, k, v, out, seqlens_k, block_table, variant.alibi_slopes,
                                                variant.sinks):
        return None
    device, shape, dtype = q.device, q.shape, F8.out_dtype(q.dtype)
    dev, lse_shape = device.index, _lse_shape(q, bnhd)
    ctx = _lib.context(dev)
    o = out if out is not None else torch.empty(shape, dtype=dtype, device=device)  # a sample for the args
    a = _args(q, k, v, o, causal, scale, bnhd, seqlens_k, block_table, num_splits)
    V.set_fields(a, variant)
    F8.set_fields(a, q.dtype, fp8)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=device) if return_lse else None
    a.lse = lse.data_ptr() if return_lse else 0
    cfg = ctypes.byref(_checked_config(text)) if text else None
    gen = ctx.generation
    ws = _workspace_size(ctx, a, cfg, text) if _WORKSPACE else 0
    if ws:
        a.workspace_bytes = ws
    fwd, handle, ref, stream, empty, f32, u8 = lib.fajit_attention_forward, ctx.handle, ctypes.byref(a), \
        _raw_stream, torch.empty, torch.float32, torch.uint8
    bump, has_out, has_lens, has_table = _bump, out is not None, seqlens_k is not None, block_table is not None
    has_alibi, has_sinks = variant.alibi_slopes is not None, variant.sinks is not None
    has_qd, has_kd, has_vd = (fp8 is not None and t is not None for t in F8.op_args(fp8))

    def run(q, k, v, out, seqlens_k, block_table, alibi_slopes=None, sinks=None, q_descale=None, k_descale=None,
            v_descale=None):
        nonlocal gen, ws
        if ctx.generation != gen:  # fajit.tune filed a winner: the tile, so the split count, may differ now
            gen, a.workspace, a.workspace_bytes = ctx.generation, 0, 0
            ws = _workspace_size(ctx, a, cfg, text) if _WORKSPACE else 0
            a.workspace_bytes = ws
        try:
            pq, pk, pv = q.data_ptr(), k.data_ptr(), v.data_ptr()
            po = out.data_ptr() if has_out else 1
            pl = seqlens_k.data_ptr() if has_lens else 1
            pt = block_table.data_ptr() if has_table else 1
            pa = alibi_slopes.data_ptr() if has_alibi else 1
            ps = sinks.data_ptr() if has_sinks else 1
            pqd = q_descale.data_ptr() if has_qd else 1
            pkd = k_descale.data_ptr() if has_kd else 1
            pvd = v_descale.data_ptr() if has_vd else 1
        except RuntimeError:
            return None
        if not (pq and pk and pv and po and pl and pt and pa and ps and pqd and pkd and pvd):
            return None
        if has_out:
            o = out
        else:
            o = empty(shape, dtype=dtype, device=device)
            po = o.data_ptr()
        if return_lse:
            lse = empty(lse_shape, dtype=f32, device=device)
            a.lse = lse.data_ptr()
        if ws:  # split-KV partials, released in stream order once the launch is queued
            buf = empty(ws, dtype=u8, device=device)
            a.workspace = buf.data_ptr()
        if has_lens:
            a.seqlens_k = pl
        if has_table:
            a.block_table = pt
        if has_alibi:
            a.alibi_slopes = pa
        if has_sinks:
            a.sinks = ps
        if has_qd:
            a.q_descale = pqd
        if has_kd:
            a.k_descale = pkd
        if has_vd:
            a.v_descale = pvd
        a.q, a.k, a.v, a.o, a.stream = pq, pk, pv, po, stream(dev)
        status = fwd(handle, ref, cfg)
        if status:
            raise _lib.error(status)
        if has_out:
            bump((out,))
        return (o, lse) if return_lse else o
    return run


def _fp8_plannable(fp8, q_descale, k_descale, v_descale):
    """Whether a checked FP8 call (fp8 None: not FP8) can have a plan: its checked descales are the caller's
    tensors seen through a view (the same first element), not copies that F8.check made (a [Hkv] descale broadcast
    beside [B, Hkv] ones, a non-contiguous one): the plan passes the given tensors' pointers on every call."""
    if fp8 is None:
        return True
    for given, checked in zip((q_descale, k_descale, v_descale), F8.op_args(fp8)):
        if (given is None) != (checked is None):
            return False
        if given is not None and (not given.is_contiguous() or given.data_ptr() != checked.data_ptr()):
            return False
    return True


# ---- Python entry points ------------------------------------------------------------------------------------
def attention(q, k, v, causal=False, scale=None, layout="bhnd", return_lse=False, out=None, config=None,
              seqlens_k=None, block_table=None, page_size=None, num_splits=None, window_size=_NO_WINDOW, softcap=0.0,
              alibi_slopes=None, learnable_sink=None, sinks=None, attention_chunk=0, softmax_scale=None, q_descale=None,
              k_descale=None, v_descale=None):
    """See fajit.attention. In eager mode a call whose signature was checked before takes that signature's
    plan (the fast path above); any other call is checked, then gets a plan or goes through the op."""
    key = None
    if softmax_scale is not None and scale is None and type(softmax_scale) is float and math.isfinite(softmax_scale) \
            and softmax_scale != 0:  # FlashAttention's name of scale
        scale, softmax_scale = softmax_scale, None
    if _EAGER and not _is_compiling() and not _dispatch_modes() and not _function_modes() and not _transforms() \
            and not _profiling() and softmax_scale is None:
        vkey = _variant_key(window_size, softcap, alibi_slopes, learnable_sink, sinks, attention_chunk)
        dkey = _descale_key(q_descale, k_descale, v_descale)
        if vkey is not False and dkey is not False:
            key = _key(q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k, block_table, page_size,
                       num_splits, vkey)
            if key is not None and dkey is not None:
                key += (dkey,)
        if key is not None:
            try:
                plan = _local.plans.get(key)
            except TypeError:  # an unhashable layout: the checks refuse it
                plan = key = None
            if plan is not None:
                result = plan(q, k, v, out, seqlens_k, block_table, alibi_slopes,
                              learnable_sink if learnable_sink is not None else sinks, q_descale, k_descale, v_descale)
                if result is not None:
                    return result
                key = None  # a tensor without a data pointer: the dispatcher's business
    return _checked(key, q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k, block_table, page_size,
                    num_splits, window_size, softcap, alibi_slopes, learnable_sink, sinks, attention_chunk,
                    softmax_scale, q_descale, k_descale, v_descale)


def _checked(key, q, k, v, causal, scale, layout, return_lse, out, config, seqlens_k, block_table, page_size,
             num_splits, window_size=_NO_WINDOW, softcap=0.0, alibi_slopes=None, learnable_sink=None, sinks=None,
             attention_chunk=0, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None):
    """fajit.attention without a plan: the checks, then (key given) a new plan for the signature, else the op."""
    paged = block_table is not None
    b, hq, hkv, nq, nk, d = check_args(q, k, v, out, layout, paged=paged)
    fp8 = F8.check(q, k, v, out, b, hkv, q_descale, k_descale, v_descale)
    _, splits = check_decode(q, layout, b, nk, seqlens_k, block_table, page_size, num_splits)
    scale_name = "softmax_scale" if scale is None and softmax_scale is not None else "scale"
    scale = check_scale(V.pick("scale", scale, "softmax_scale", softmax_scale), d, scale_name)
    text, bnhd = config_text(config), layout == "bnhd"
    sink_name = "sinks" if learnable_sink is None and sinks is not None else "learnable_sink"
    variant = V.check(q, b, hq, window_size, softcap, alibi_slopes, V.pick("learnable_sink", learnable_sink, "sinks",
                                                                           sinks), attention_chunk, sink_name)
    if key is not None and _fp8_plannable(fp8, q_descale, k_descale, v_descale):
        plan = _plan(q, k, v, out, causal, scale, bnhd, return_lse, text, seqlens_k, block_table, splits, variant, fp8)
        if plan is not None:
            plans = _local.plans
            if len(plans) >= _MAX_PLANS:
                del plans[next(iter(plans))]
            plans[key] = plan
            result = plan(q, k, v, out, seqlens_k, block_table, variant.alibi_slopes, variant.sinks, q_descale,
                          k_descale, v_descale)
            if result is not None:
                return result
    extra = () if variant is V.PLAIN and fp8 is None else V.op_args(variant)  # the ops' schema as before if plain
    extra += F8.op_args(fp8) if fp8 is not None else ()
    if out is None:
        o, lse = torch.ops.fajit.attention(q, k, v, bool(causal), scale, bnhd, bool(return_lse), text, seqlens_k,
                                           block_table, splits, *extra)
        return (o, lse) if return_lse else o
    lse = q.new_empty((b, hq, nq), dtype=torch.float32) if return_lse else None
    torch.ops.fajit.attention_out(q, k, v, out, lse, bool(causal), scale, bnhd, text, seqlens_k, block_table, splits,
                                  *extra)
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
