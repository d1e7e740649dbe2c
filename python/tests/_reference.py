"""_reference.py - float64 reference attention for every variant and varlen, in plain torch math (any device),
for the GPU tests (test_gpu_variants.py) and the transformers mapping tests. Not a test module.

Definitions (FlashAttention-3's, as fajit.h states them), per (batch or sequence, query head), with Nq queries,
Nk keys, off = Nk - Nq, and query i standing at key position p = i + off (bottom-right alignment):
    s[i, j] = scale * q_i . k_j
    softcap c > 0:   s = c * tanh(s / c)
    alibi slope a:   s -= a * |p - j|
    key j is seen when: causal: j <= p;  window (L, R): p - L <= j (L >= 0), j <= p + R (R >= 0);
                        chunk C > 0: j // C == p // C (floor division)
    sink logit t:    LSE = log(sum_seen exp(s) + exp(t)),  O = sum_seen exp(s - LSE) v_j
                     (without a sink: LSE = log sum_seen exp(s); a row that sees no key: O = 0, LSE = -inf, or
                     LSE = t with a sink)
GQA: query head h reads K/V head h // (Hq / Hkv).
"""
import math

import torch


def allowed(nq, nk, causal=False, window=(-1, -1), chunk=0, device="cpu"):
    """Boolean [nq, nk]: which keys each query sees (bottom-right aligned)."""
    p = torch.arange(nq, device=device)[:, None] + (nk - nq)
    j = torch.arange(nk, device=device)[None, :]
    ok = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if causal:
        ok &= j <= p
    left, right = window
    if left >= 0:
        ok &= j >= p - left
    if right >= 0:
        ok &= j <= p + right
    if chunk > 0:
        ok &= torch.div(j, chunk, rounding_mode="floor") == torch.div(p, chunk, rounding_mode="floor")
    return ok


def attention_one(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None, sinks=None, chunk=0):
    """One sequence: q [Hq, Nq, D], k / v [Hkv, Nk, D] (any dtype) -> float64 O [Hq, Nq, D], LSE [Hq, Nq].
    alibi: [Hq] slopes or None; sinks: [Hq] logits or None."""
    q, k, v = q.double(), k.double(), v.double()
    hq, nq, d = q.shape
    nk = k.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    g = hq // k.shape[0]
    k, v = k.repeat_interleave(g, dim=0), v.repeat_interleave(g, dim=0)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if alibi is not None:
        p = torch.arange(nq, device=q.device)[:, None] + (nk - nq)
        j = torch.arange(nk, device=q.device)[None, :]
        s = s - alibi.double()[:, None, None] * (p - j).abs()
    seen = allowed(nq, nk, causal, window, chunk, q.device)
    s = s.masked_fill(~seen, -math.inf)
    if sinks is not None:
        s = torch.cat([s, sinks.double()[:, None, None].expand(hq, nq, 1)], dim=-1)
    lse = torch.logsumexp(s, dim=-1) if s.shape[-1] else torch.full((hq, nq), -math.inf, dtype=torch.float64,
                                                                     device=q.device)
    finite = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    p = torch.exp(s - finite[..., None])
    if sinks is not None:
        p = p[..., :-1]
    return torch.matmul(p, v), lse


def attention(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None, sinks=None, chunk=0,
              seqlens_k=None):
    """Batched: q [B, Hq, Nq, D], k / v [B, Hkv, Nk, D] -> float64 O [B, Hq, Nq, D], LSE [B, Hq, Nq]. alibi: [Hq]
    or [B, Hq]; seqlens_k: per-batch key counts (a list or tensor; sequence b sees its first seqlens_k[b] keys)."""
    outs, lses = [], []
    lens = [int(x) for x in seqlens_k] if seqlens_k is not None else None
    for b in range(q.shape[0]):
        nk = lens[b] if lens is not None else k.shape[2]
        al = alibi[b] if alibi is not None and alibi.dim() == 2 else alibi
        o, lse = attention_one(q[b], k[b, :, :nk], v[b, :, :nk], causal, scale, window, softcap, al, sinks, chunk)
        outs.append(o)
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


def varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None,
           sinks=None, chunk=0, seqused_k=None):
    """Packed: q [total_q, Hq, D], k / v [total_k, Hkv, D], cu_seqlens [B + 1] -> float64 O [total_q, Hq, D] (rows
    past cu_seqlens_q[-1]: 0) and LSE [Hq, total_q] (there: -inf), looping over the sequences."""
    cq, ck = [int(x) for x in cu_seqlens_q], [int(x) for x in cu_seqlens_k]
    used = [int(x) for x in seqused_k] if seqused_k is not None else None
    o = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), -math.inf, dtype=torch.float64, device=q.device)
    for b in range(len(cq) - 1):
        k0, k1 = ck[b], ck[b + 1]
        if used is not None:
            k1 = k0 + used[b]
        if cq[b + 1] == cq[b]:
            continue
        al = alibi[b] if alibi is not None and alibi.dim() == 2 else alibi
        ob, lb = attention_one(q[cq[b]:cq[b + 1]].transpose(0, 1), k[k0:k1].transpose(0, 1), v[k0:k1].transpose(0, 1),
                               causal, scale, window, softcap, al, sinks, chunk)
        o[cq[b]:cq[b + 1]] = ob.transpose(0, 1)
        lse[:, cq[b]:cq[b + 1]] = lb
    return o, lse


def paged_to_packed(k_pool, block_table, seqused_k):
    """[pages, page_size, Hkv, D] pools and a block table -> ([total_k, Hkv, D] packed keys, cu_seqlens_k) of each
    sequence's first seqused_k[b] rows, for the varlen reference."""
    page = k_pool.shape[1]
    rows, cu = [], [0]
    for b, n in enumerate(int(x) for x in seqused_k):
        pages = [int(p) for p in block_table[b, :(n + page - 1) // page]]
        seq = torch.cat([k_pool[p] for p in pages], dim=0)[:n] if pages else k_pool[:0, 0]
        rows.append(seq)
        cu.append(cu[-1] + n)
    return torch.cat(rows, dim=0), torch.tensor(cu, dtype=torch.int32)
