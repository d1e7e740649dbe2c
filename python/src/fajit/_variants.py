"""_variants.py - the attention variants' arguments of fajit.attention and fajit.varlen_attention (FlashAttention's
keyword names), checked in Python and written into a fajit_attention_args (imported with fajit._torch).

    window_size=(left, right)  sliding window, -1 = that side unbounded; (-1, -1) = off (FlashAttention's)
    softcap=c                  s = c * tanh(s / c) on the scaled scores; 0.0 = off
    alibi_slopes               float32 [Hq] or [B, Hq]: bias -slope * |i + Nk - Nq - j|
    learnable_sink / sinks     one logit a query head (float32 [Hq]; other float dtypes are converted) that joins
                               each row's softmax denominator and adds no value (gpt-oss)
    attention_chunk=n          query i sees only keys of its own chunk of n keys (Llama 4); 0 = off

A Variant is the checked, normalized form: plain Python numbers and tensors (float32, contiguous), so it can be
passed to the custom ops and be part of the eager path's plan key. Values inside the tensors are never read here.
"""
import math
from typing import NamedTuple, Optional

import torch

from ._lib import Args_c

FIELDS = {f for f, _ in Args_c._fields_}
# the SIZE_3 fields of fajit.h (varlen and the variants); an older header has none of them
HAVE_VARIANTS = {"window", "window_left", "window_right", "softcap", "sinks", "alibi_slopes",
                 "alibi_slopes_batch_stride", "attention_chunk"} <= FIELDS
HAVE_VARLEN = {"cu_seqlens_q", "cu_seqlens_k"} <= FIELDS


class Variant(NamedTuple):
    window_left: int = -1      # -1: unbounded on that side
    window_right: int = -1
    softcap: float = 0.0
    alibi_slopes: Optional[torch.Tensor] = None  # float32 [Hq] or [B, Hq], last dim contiguous
    sinks: Optional[torch.Tensor] = None         # float32 [Hq], contiguous
    attention_chunk: int = 0

    @property
    def window(self):
        return self.window_left != -1 or self.window_right != -1

    def is_plain(self):
        return not self.window and self.softcap == 0.0 and self.alibi_slopes is None and self.sinks is None and \
            self.attention_chunk == 0


PLAIN = Variant()


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check_window(window_size):
    """(left, right) from window_size: a pair of ints >= -1 (None reads as -1, FlashAttention-4's (None, None))."""
    if window_size is None:
        return -1, -1
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise ValueError(f"window_size: {window_size!r}: must be a pair (left, right) of ints >= -1 "
                         "((-1, -1) = no window)")
    left, right = (-1 if w is None else w for w in window_size)
    for side, w in (("left", left), ("right", right)):
        if not _int(w):
            raise ValueError(f"window_size: {tuple(window_size)!r}: the {side} side {w!r} is not an int")
        if w < -1:
            raise ValueError(f"window_size: {tuple(window_size)!r}: the {side} side {w} must be -1 (unbounded) or >= 0")
    return left, right


def check_softcap(softcap):
    if softcap is None:
        return 0.0
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"softcap: {softcap!r}: must be a finite number >= 0 (0.0 = off)")
    return float(softcap)


def check_chunk(attention_chunk):
    if attention_chunk is None:
        return 0
    if not _int(attention_chunk) or attention_chunk < 0:
        raise ValueError(f"attention_chunk: {attention_chunk!r}: must be an int >= 0 (0 = off)")
    return attention_chunk


def _check_f32(t, name, q, shape_text):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a float32 torch.Tensor {shape_text} or None, got {type(t).__name__}")
    if t.device != q.device:
        raise ValueError(f"{name}: on {t.device}, q on {q.device}: it must be on q's CUDA device")


def check_alibi(alibi_slopes, q, batch, heads_q):
    """alibi_slopes as given (float32 [Hq] or [B, Hq], last dim contiguous), else TypeError / ValueError."""
    if alibi_slopes is None:
        return None
    shape_text = f"[Hq] = [{heads_q}] or [B, Hq] = [{batch}, {heads_q}]"
    _check_f32(alibi_slopes, "alibi_slopes", q, shape_text)
    if alibi_slopes.dtype != torch.float32:
        raise TypeError(f"alibi_slopes: dtype {alibi_slopes.dtype}: must be torch.float32 {shape_text}")
    if tuple(alibi_slopes.shape) not in ((heads_q,), (batch, heads_q)):
        raise ValueError(f"alibi_slopes: shape {tuple(alibi_slopes.shape)}: must be {shape_text}")
    if heads_q > 1 and alibi_slopes.stride(-1) != 1:
        raise ValueError(f"alibi_slopes: strides {tuple(alibi_slopes.stride())}: the head dim must be contiguous")
    return alibi_slopes


def check_sinks(sinks, q, heads_q, name="learnable_sink"):
    """sinks as a contiguous float32 [Hq] tensor (float16 / bfloat16 are converted, as gpt-oss keeps its sinks in
    the model's dtype), else TypeError / ValueError naming the argument."""
    if sinks is None:
        return None
    _check_f32(sinks, name, q, f"[Hq] = [{heads_q}]")
    if not sinks.dtype.is_floating_point:
        raise TypeError(f"{name}: dtype {sinks.dtype}: must be a floating dtype (float32; float16 / bfloat16 are "
                        "converted)")
    if tuple(sinks.shape) != (heads_q,):
        raise ValueError(f"{name}: shape {tuple(sinks.shape)}: must be [Hq] = [{heads_q}] (one logit a query head)")
    if sinks.dtype != torch.float32:
        sinks = sinks.to(torch.float32)
    return sinks if sinks.is_contiguous() else sinks.contiguous()


def pick(a_name, a, b_name, b, default=None):
    """One keyword of two spellings (scale / softmax_scale, learnable_sink / sinks): ValueError when both are given."""
    if a is not None and b is not None:
        raise ValueError(f"{a_name} and {b_name}: both given; they are two names of one argument, pass one")
    return a if a is not None else b if b is not None else default


def check(q, batch, heads_q, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, sinks=None, attention_chunk=0,
          sinks_name="learnable_sink"):
    """The checked Variant of a call (PLAIN when every variant is off)."""
    left, right = check_window(window_size)
    v = Variant(left, right, check_softcap(softcap), check_alibi(alibi_slopes, q, batch, heads_q),
                check_sinks(sinks, q, heads_q, sinks_name), check_chunk(attention_chunk))
    if v.is_plain():
        return PLAIN
    if not HAVE_VARIANTS:
        raise ValueError("window_size / softcap / alibi_slopes / learnable_sink / attention_chunk: this libfajit's "
                         "fajit.h has no attention-variant fields in fajit_attention_args")
    return v


def set_fields(a, variant, alibi_ptr=None, sinks_ptr=None):
    """Write a Variant into fajit_attention_args `a` (every field stays 0 when it is off, as fajit.h asks).
    alibi_ptr / sinks_ptr: the tensors' data pointers when the caller has them already."""
    if not HAVE_VARIANTS:
        return
    if variant.window:
        a.window, a.window_left, a.window_right = 1, variant.window_left, variant.window_right
    else:
        a.window, a.window_left, a.window_right = 0, 0, 0
    a.softcap = variant.softcap
    a.attention_chunk = variant.attention_chunk
    al, sk = variant.alibi_slopes, variant.sinks
    a.sinks = (sinks_ptr if sinks_ptr is not None else sk.data_ptr()) if sk is not None else 0
    if al is not None:
        a.alibi_slopes = alibi_ptr if alibi_ptr is not None else al.data_ptr()
        a.alibi_slopes_batch_stride = al.stride(0) if al.dim() == 2 and al.shape[0] > 1 else 0
    else:
        a.alibi_slopes, a.alibi_slopes_batch_stride = 0, 0


def op_args(variant):
    """The variant as the custom ops' trailing arguments (window_left, window_right, softcap, alibi_slopes, sinks,
    attention_chunk)."""
    return (variant.window_left, variant.window_right, variant.softcap, variant.alibi_slopes, variant.sinks,
            variant.attention_chunk)


def from_op(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk):
    """The Variant from the custom ops' trailing arguments (already checked by the entry point)."""
    v = Variant(window_left, window_right, softcap, alibi_slopes, sinks, attention_chunk)
    return PLAIN if v.is_plain() else v
