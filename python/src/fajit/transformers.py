"""fajit.transformers - fajit as an attention implementation of Hugging Face transformers.

    import fajit.transformers
    fajit.transformers.register()        # "fajit" joins transformers' AttentionInterface (and its mask interface)
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fajit", dtype=torch.bfloat16)

What transformers passes an attention function, and what fajit makes of it (query / key / value [B, H, N, D];
the result is (attn_output [B, N, Hq, D], None), as the interface expects):
  - is_causal (else module.is_causal): fajit's causal, bottom-right aligned, so a cached decode step works;
  - scaling: the softmax scale; GQA / MQA: K and V keep their Hkv heads (no repeat);
  - sliding_window=W (Mistral, Gemma 2, gpt-oss): a key j is seen from query i when i - W < j <= i, which is
    window_size (W - 1, 0) (causal) or (W - 1, W - 1);
  - softcap (Gemma 2): softcap; s_aux (gpt-oss's sinks, [Hq] in the model's dtype): learnable_sink, as float32;
  - a 2-D padding mask (the mask function registered with "fajit" is transformers' flash_attention_mask: the
    [B, kv_len] mask when some token is padding, else None): each row's attended tokens and its padding become
    two sequences of one varlen call (real tokens first, in order, then padding, which reads no key: seqused_k
    0), from a per-row stable sort on the GPU, without host synchronization; queries are the last Nq positions
    of the mask, keys all of them (a static cache's unfilled tail, past the mask, is padding);
  - packed batches without padding (DataCollatorWithFlattening): cu_seq_lens_q / cu_seq_lens_k with
    max_length_q / max_length_k (the collator's return_flash_attn_kwargs=True) go to fajit.varlen_attention as
    they are; without them, position_ids that restart (0, 1, 2, 0, 1, ...) are turned into cu_seqlens once per
    forward (one host synchronization, as transformers' own flash-attention path does), outside torch.compile
    only: under torch.compile pass the collator's cu_seq_lens kwargs for packed batches.
  - dropout must be 0 (fajit has none): a training module with attention dropout is refused (ValueError).
What fajit does not run falls back to transformers' own sdpa_attention_forward, with a warning once per reason
(register(fallback=False) raises ValueError instead): a 4-D mask (a custom mask transformers passes as it is),
head dims fajit has no kernel for (64, 96, 128, 192 and 256 only), a value head dim unlike the query's, dtypes
other than float16 / bfloat16, tensors not on a CUDA device. sdpa cannot apply a softcap or sinks, so a fallback
call with either raises ValueError, whatever register was told.
"""
import logging
import weakref

import torch

import fajit as _fajit

NAME = "fajit"
HEAD_DIMS = (64, 96, 128, 192, 256)
# what the fajit path takes; CPU tests swap these (and the fajit calls) to run the mapping without a GPU
_DEVICE_TYPE = "cuda"
_DTYPES = (torch.float16, torch.bfloat16)

logger = logging.getLogger(__name__)
_warned = set()
_strict = {}  # registered name -> True when fallback is refused
# id(position_ids) -> (weak reference, version, shape, (cu_seqlens, longest) or None); a few entries, newest last
# (a WeakKeyDictionary would compare tensors with ==)
_packed_cache = {}
_PACKED_CACHE_SIZE = 8


def register(name=NAME, fallback=True):
    """Register fajit under `name` with transformers' AttentionInterface, and transformers' flash_attention_mask
    as its mask function (so the attention function gets a 2-D padding mask or None). Then build or load a model
    with attn_implementation=name. fallback=False: calls fajit cannot run raise ValueError instead of running
    transformers' sdpa. Returns name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, flash_attention_mask)
    _strict[name] = not fallback
    return name


def _unsupported(query, key, value, attention_mask, kwargs):
    """Why fajit cannot run this call (None when it can)."""
    if attention_mask is not None and attention_mask.dim() != 2:
        return f"a {attention_mask.dim()}-d attention_mask (fajit takes 2-d padding masks; a 4-d mask is custom)"
    if kwargs.get("output_attentions", False):
        return "output_attentions=True (fajit returns no attention weights)"
    if query.device.type != _DEVICE_TYPE:
        return f"tensors on {query.device} (fajit runs on CUDA)"
    if query.dtype not in _DTYPES and not (query.dtype == torch.float32 and
                                           torch.is_autocast_enabled(query.device.type)):
        return f"dtype {query.dtype} (fajit runs float16 / bfloat16; load the model with dtype=torch.bfloat16)"
    if query.shape[-1] not in HEAD_DIMS:
        return f"head dim {query.shape[-1]} (fajit has kernels for {', '.join(map(str, HEAD_DIMS))})"
    if value.shape[-1] != query.shape[-1]:
        return f"value head dim {value.shape[-1]} unlike the query's {query.shape[-1]}"
    return None


def _fallback(reason, module, query, key, value, attention_mask, dropout, scaling, is_causal, softcap, s_aux,
              kwargs):
    name = getattr(getattr(module, "config", None), "_attn_implementation", NAME)
    if softcap or s_aux is not None:
        raise ValueError(f"fajit.transformers: cannot run {reason}, and transformers' sdpa, the fallback, applies "
                         "no softcap / sinks: use attn_implementation='eager' for this model")
    if _strict.get(name, False):
        raise ValueError(f"fajit.transformers: cannot run {reason} (registered with fallback=False)")
    if reason not in _warned:
        _warned.add(reason)
        logger.warning("fajit.transformers: %s: running transformers' sdpa attention instead", reason)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    if attention_mask is not None and attention_mask.dim() == 2:  # sdpa wants the mask as 4-d
        attention_mask = _mask_4d(attention_mask, query.shape[2], key.shape[2], is_causal, kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  is_causal=is_causal, **kwargs)


def _mask_4d(mask2d, nq, nk, causal, kwargs):
    """The boolean [B, 1, Nq, Nk] mask sdpa gets for a 2-D padding mask in a fallback: padding, causal and the
    sliding window, bottom-right aligned."""
    keys = _key_mask(mask2d, nk)
    allowed = keys[:, None, None, :]
    if causal:
        i = torch.arange(nq, device=mask2d.device)[:, None]
        j = torch.arange(nk, device=mask2d.device)[None, :]
        allowed = allowed & (j <= i + nk - nq)
    window = kwargs.get("sliding_window")
    if window:
        i = torch.arange(nq, device=mask2d.device)[:, None]
        j = torch.arange(nk, device=mask2d.device)[None, :]
        allowed = allowed & (j > i + nk - nq - window)
    return allowed


def _key_mask(mask2d, nk):
    """The [B, Nk] boolean key mask: the 2-D mask's last Nk entries, or (a static cache, whose keys outrun the
    mask) the mask followed by padding."""
    m = mask2d.bool()
    if m.shape[1] >= nk:
        return m[:, m.shape[1] - nk:]
    return torch.cat([m, m.new_zeros(m.shape[0], nk - m.shape[1])], dim=1)


def _pack_rows(mask):
    """For a [B, N] boolean mask: (order [B, N], cu_seqlens int32 [2B + 1], lengths [B]): row b's true entries
    first, in order, then its false ones (a stable sort), as sequences 2b (length L_b) and 2b + 1 (N - L_b) of
    the rows laid out row after row."""
    b, n = mask.shape
    order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)
    lengths = mask.sum(dim=1, dtype=torch.int32)
    base = torch.arange(b, device=mask.device, dtype=torch.int32) * n
    cu = torch.stack([base, base + lengths], dim=1).flatten()
    cu = torch.cat([cu, cu.new_full((1,), b * n)])
    return order, cu, lengths


def _padded(q, k, v, mask2d, causal, kw):
    """Attention over a padded batch ([B, N, H, D] views) as one varlen call (see the module's doc)."""
    b, nq, hq, d = q.shape
    nk = k.shape[1]
    qmask = mask2d[:, -nq:].bool() if mask2d.shape[1] >= nq else _key_mask(mask2d, nq)
    kmask = _key_mask(mask2d, nk)
    q_order, cu_q, _ = _pack_rows(qmask)
    k_order, cu_k, k_len = _pack_rows(kmask)
    rows_q = torch.arange(b, device=q.device)[:, None].expand(b, nq)
    rows_k = torch.arange(b, device=q.device)[:, None].expand(b, nk)
    qp = q[rows_q, q_order].reshape(b * nq, hq, d)  # gathers: one copy each
    kp = k[rows_k, k_order].reshape(b * nk, *k.shape[2:])
    vp = v[rows_k, k_order].reshape(b * nk, *v.shape[2:])
    used = torch.stack([k_len, torch.zeros_like(k_len)], dim=1).flatten()  # padding sequences read no key
    op = _fajit.varlen_attention(qp, kp, vp, cu_q, cu_k, nq, nk, causal=causal, seqused_k=used, **kw)
    out = torch.empty_like(qp).view(b, nq, hq, d)
    out[rows_q, q_order] = op.view(b, nq, hq, d)
    return out


def _packed_from_positions(position_ids, b, n):
    """(cu_seqlens int32, longest length) of sequences packed along the rows of position_ids (a new sequence
    wherever a position is not the previous one + 1, and at every row's start), or None when each row is one
    sequence. One host synchronization, cached per position_ids tensor (every layer passes the same one)."""
    if position_ids is None or position_ids.dim() != 2 or position_ids.shape[-1] != n or \
            position_ids.shape[0] not in (1, b):
        return None
    hit = _packed_cache.get(id(position_ids))
    if hit is not None and hit[0]() is position_ids and hit[1] == position_ids._version and hit[2] == (b, n):
        return hit[3]
    pos = position_ids.expand(b, n)
    starts = torch.ones(b, n, dtype=torch.bool, device=pos.device)
    starts[:, 1:] = pos[:, 1:] != pos[:, :-1] + 1
    flat = starts.flatten()
    total = b * n
    idx = torch.where(flat, torch.arange(total, device=pos.device), torch.full_like(flat, total, dtype=torch.long))
    sorted_starts = torch.sort(idx).values
    ends = torch.cat([sorted_starts[1:], sorted_starts.new_full((1,), total)])
    count, longest = torch.stack([flat.sum(), (ends - sorted_starts).max()]).tolist()
    result = None
    if count > b:
        cu = torch.cat([sorted_starts[:count], sorted_starts.new_full((1,), total)]).to(torch.int32)
        result = (cu, int(longest))
    while len(_packed_cache) >= _PACKED_CACHE_SIZE:
        del _packed_cache[next(iter(_packed_cache))]
    _packed_cache[id(position_ids)] = (weakref.ref(position_ids), position_ids._version, (b, n), result)
    return result


def _max_length(x):
    return x if isinstance(x, int) else int(x)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                      softcap=None, is_causal=None, s_aux=None, **kwargs):
    """The attention function registered as "fajit" (see the module's doc). query [B, Hq, Nq, D], key / value
    [B, Hkv, Nk, D]; returns (attn_output [B, Nq, Hq, D], None)."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    reason = _unsupported(query, key, value, attention_mask, kwargs)
    if reason is not None:
        return _fallback(reason, module, query, key, value, attention_mask, dropout, scaling, causal, softcap, s_aux,
                         dict(kwargs, sliding_window=sliding_window))
    if dropout:
        raise ValueError(f"fajit.transformers: dropout {dropout}: fajit has no attention dropout (train with "
                         "attention_dropout=0.0, or run the module in eval mode)")
    dtype = query.dtype
    if dtype not in _DTYPES:  # float32 under autocast
        query, key, value = (x.to(torch.get_autocast_dtype(query.device.type)) for x in (query, key, value))
    b, hq, nq, d = query.shape
    kw = dict(softmax_scale=scaling)
    if sliding_window:
        kw["window_size"] = (sliding_window - 1, 0 if causal else sliding_window - 1)
    if softcap:
        kw["softcap"] = float(softcap)
    if s_aux is not None:
        kw["learnable_sink"] = s_aux.detach().to(torch.float32)
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # [B, N, H, D] views
    if attention_mask is not None:
        out = _padded(q, k, v, attention_mask, causal, kw)
    else:
        packed = None
        cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
        max_q, max_k = kwargs.get("max_length_q"), kwargs.get("max_length_k")
        if cu_q is not None and cu_k is not None and max_q is not None and max_k is not None:
            packed = (cu_q.to(torch.int32), cu_k.to(torch.int32), _max_length(max_q), _max_length(max_k))
        elif nq == k.shape[1] and not torch.compiler.is_compiling():
            found = _packed_from_positions(kwargs.get("position_ids"), b, nq)
            if found is not None:
                packed = (found[0], found[0], found[1], found[1])
        if packed is not None:
            cu_q, cu_k, max_q, max_k = packed
            o = _fajit.varlen_attention(q.reshape(b * nq, hq, d), k.reshape(-1, *k.shape[2:]),
                                        v.reshape(-1, *v.shape[2:]), cu_q, cu_k, max_q, max_k, causal=causal, **kw)
            out = o.view(b, nq, hq, d)
        else:
            out = _fajit.attention(q, k, v, causal=causal, layout="bnhd", **kw)
    return (out if out.dtype == dtype else out.to(dtype)), None
