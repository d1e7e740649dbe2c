"""_fp8.py - the FP8 arguments of fajit.attention (FlashAttention-3's names), checked in Python and written into a
fajit_attention_args (imported with fajit._torch).

    q, k, v as torch.float8_e4m3fn     FP8 attention (sm_90a): O is bfloat16, or float16 / bfloat16 through out=
    k, v as torch.float8_e4m3fn with   an FP8 K/V cache read by float16 / bfloat16 queries
      q float16 / bfloat16
    q_descale, k_descale, v_descale    float32 [B, Hkv] (or [Hkv], [1, Hkv]: one row for every batch) factors that
                                       dequantize q, k and v: scores use scale * q_descale * k_descale, O v_descale

An Fp8 is the checked, normalized form: torch dtypes and float32 contiguous descale tensors of one batch stride.
Values inside the tensors are never read here.
"""
from typing import NamedTuple, Optional

import torch

from . import _lib
from ._lib import Args_c

E4M3 = getattr(torch, "float8_e4m3fn", None)
FIELDS = {f for f, _ in Args_c._fields_}
# the SIZE_4 fields of fajit.h (FP8); an older header has none of them
HAVE_FP8 = E4M3 is not None and "FAJIT_DTYPE_E4M3" in _lib.DTYPE and \
    {"kv_dtype", "out_dtype", "q_descale", "k_descale", "v_descale", "descale_batch_stride"} <= FIELDS
_HALF = (torch.float16, torch.bfloat16)
_CODE = {torch.float16: _lib.DTYPE["FAJIT_DTYPE_F16"], torch.bfloat16: _lib.DTYPE["FAJIT_DTYPE_BF16"]}
if HAVE_FP8:
    _CODE[E4M3] = _lib.DTYPE["FAJIT_DTYPE_E4M3"]


class Fp8(NamedTuple):
    kv_dtype: torch.dtype
    out_dtype: torch.dtype
    q_descale: Optional[torch.Tensor] = None  # float32, contiguous, [B, Hkv] or [Hkv]
    k_descale: Optional[torch.Tensor] = None
    v_descale: Optional[torch.Tensor] = None

    def batch_stride(self):
        """descale_batch_stride of fajit.h: Hkv when the descales are [B, Hkv] with B > 1, else 0."""
        for t in (self.q_descale, self.k_descale, self.v_descale):
            if t is not None and t.dim() == 2 and t.shape[0] > 1:
                return t.shape[1]
        return 0


def is_fp8(dtype):
    return E4M3 is not None and dtype == E4M3


def dtype_code(dtype):
    return _CODE[dtype]


def supported(dtype):
    return dtype in _CODE


def out_dtype(q_dtype):
    """O's dtype of a call without out=: bfloat16 for e4m3 queries, else q's."""
    return torch.bfloat16 if is_fp8(q_dtype) else q_dtype


def check_dtypes(q, k, v, out):
    """The dtype rules of q, k, v and out (each already one fajit takes); TypeError naming the argument."""
    if is_fp8(q.dtype) and not is_fp8(k.dtype):
        raise TypeError(f"k: dtype {k.dtype}: e4m3 queries need e4m3 k and v (torch.float8_e4m3fn)")
    if not is_fp8(k.dtype) and k.dtype != q.dtype:
        raise TypeError(f"k: dtype {k.dtype} differs from q's {q.dtype}")
    if v.dtype != k.dtype:
        raise TypeError(f"v: dtype {v.dtype} differs from " + (f"k's {k.dtype}" if is_fp8(k.dtype) else
                                                                 f"q's {q.dtype}"))
    if out is not None:
        want = _HALF if is_fp8(q.dtype) else (q.dtype,)
        if out.dtype not in want:
            raise TypeError(f"out: dtype {out.dtype}: O must be " +
                            ("torch.bfloat16 or torch.float16 for e4m3 inputs" if is_fp8(q.dtype) else f"q's {q.dtype}"))


def _descale(t, name, q, b, hkv, applies):
    if t is None:
        return None
    shape_text = f"[B, Hkv] = [{b}, {hkv}] (or [Hkv])"
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a float32 torch.Tensor {shape_text} or None, got {type(t).__name__}")
    if not applies:
        raise ValueError(f"{name}: a descale applies to e4m3 tensors only (torch.float8_e4m3fn); leave it None")
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: dtype {t.dtype}: must be torch.float32 {shape_text}")
    if t.device != q.device:
        raise ValueError(f"{name}: on {t.device}, q on {q.device}: it must be on q's CUDA device")
    if tuple(t.shape) not in ((b, hkv), (1, hkv), (hkv,)):
        raise ValueError(f"{name}: shape {tuple(t.shape)}: must be {shape_text}")
    return t.reshape(-1, hkv) if t.dim() == 2 and t.shape[0] > 1 else t.reshape(hkv)


def check(q, k, v, out, b, hkv, q_descale=None, k_descale=None, v_descale=None):
    """The checked Fp8 of a call, or None when it has no FP8 tensor and no descale."""
    check_dtypes(q, k, v, out)
    if not is_fp8(k.dtype) and q_descale is None and k_descale is None and v_descale is None:
        return None
    if not HAVE_FP8:
        raise ValueError("float8_e4m3fn tensors / descales: this libfajit's fajit.h has no FP8 fields")
    ds = [_descale(q_descale, "q_descale", q, b, hkv, is_fp8(q.dtype)),
          _descale(k_descale, "k_descale", q, b, hkv, is_fp8(k.dtype)),
          _descale(v_descale, "v_descale", q, b, hkv, is_fp8(k.dtype))]
    if any(t is not None and t.dim() == 2 for t in ds):  # one batch stride for all: broadcast the [Hkv] ones
        ds = [t if t is None or t.dim() == 2 else t.expand(b, hkv) for t in ds]
    ds = [t if t is None or t.is_contiguous() else t.contiguous() for t in ds]
    o = out.dtype if out is not None else out_dtype(q.dtype)
    return Fp8(k.dtype, o, *ds)


def set_fields(a, q_dtype, fp8):
    """Write an Fp8 (None: all off) into fajit_attention_args `a` (fields stay 0 when off, as fajit.h asks)."""
    if not HAVE_FP8:
        return
    if fp8 is None:
        a.kv_dtype = a.out_dtype = a.q_descale = a.k_descale = a.v_descale = a.descale_batch_stride = 0
        return
    a.kv_dtype = _CODE[fp8.kv_dtype] if fp8.kv_dtype != q_dtype else 0
    a.out_dtype = _CODE[fp8.out_dtype] if is_fp8(q_dtype) else 0
    a.q_descale, a.k_descale, a.v_descale = (t.data_ptr() if t is not None else 0
                                             for t in (fp8.q_descale, fp8.k_descale, fp8.v_descale))
    a.descale_batch_stride = fp8.batch_stride()


def op_args(fp8):
    """The Fp8 as the custom ops' trailing arguments (q_descale, k_descale, v_descale)."""
    return (fp8.q_descale, fp8.k_descale, fp8.v_descale) if fp8 is not None else (None, None, None)


def from_op(q, k, o, q_descale, k_descale, v_descale):
    """The Fp8 from the custom ops' arguments (already checked by the entry point; None when nothing is FP8)."""
    if not is_fp8(k.dtype) and q_descale is None and k_descale is None and v_descale is None:
        return None
    return Fp8(k.dtype, o.dtype, q_descale, k_descale, v_descale)


# ---- quantization for callers (fajit.fp8_quantize) --------------------------------------------------------------
def hadamard_matrix(d, device, seed=0):
    """The d x d orthonormal randomized Hadamard matrix H diag(s) / sqrt(d) (s = +-1 from `seed`; d a power of two),
    float32. Q H and K H keep Q K^T and spread a channel's outliers over every channel (incoherent processing)."""
    if d & (d - 1) or d < 1:
        raise ValueError(f"hadamard: head dim {d} is not a power of two")
    h = torch.ones(1, 1)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 2, (d,), generator=g).float() * 2 - 1
    return (h * s[None, :] / d ** 0.5).to(device)


def _quantize(x, layout, groups):
    """x [B, H, N, D] ("bhnd") or [B, N, H, D]: e4m3 codes of x / descale, descale = amax / 448 per (batch, group of
    H / groups heads) as float32 [B, groups]."""
    xf = x.float()
    hd = 1 if layout == "bhnd" else 2
    b, h = xf.shape[0], xf.shape[hd]
    xg = xf.movedim(hd, 1).reshape(b, groups, h // groups, -1)
    amax = xg.abs().amax(dim=(2, 3)).clamp(min=1e-12)
    ds = (amax / 448.0).float()
    shape = [b, 1, 1, 1]
    scale = ds.repeat_interleave(h // groups, 1)
    shape[hd] = h
    codes = (xf / scale.reshape(shape)).clamp(-448.0, 448.0).to(E4M3)
    return codes, ds.contiguous()


def quantize(q, k, v, layout="bhnd", hadamard=False, seed=0):
    """(q8, k8, v8, q_descale, k_descale, v_descale): e4m3 tensors (same layout) and float32 [B, Hkv] descales, per
    (batch, KV head) as FlashAttention-3 takes them; with hadamard, Q and K are first multiplied along D by a
    randomized Hadamard matrix (hadamard_matrix(D, seed)), which leaves Q K^T unchanged and spreads outlier
    channels before the rounding."""
    if not HAVE_FP8:
        raise ValueError("fp8_quantize: torch has no float8_e4m3fn or this fajit.h no FP8 fields")
    if layout not in ("bhnd", "bnhd"):
        raise ValueError(f"layout: {layout!r}: must be 'bhnd' or 'bnhd'")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or not t.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a 4-d floating torch.Tensor")
    hd = 1 if layout == "bhnd" else 2
    hkv = k.shape[hd]
    if q.shape[hd] % hkv:
        raise ValueError(f"q: {q.shape[hd]} heads, not a multiple of k's {hkv}")
    if hadamard:
        m = hadamard_matrix(q.shape[-1], q.device, seed)
        q, k = q.float() @ m, k.float() @ m
    q8, qd = _quantize(q, layout, hkv)
    k8, kd = _quantize(k, layout, hkv)
    v8, vd = _quantize(v, layout, hkv)
    return q8, k8, v8, qd, kd, vd
