#!/usr/bin/env python3
"""alibi_kv_order.py - CPU model of the lazy O rescale of fajit's sm_90a kernels under causal ALiBi: how many
(KV tile, warp) steps rebase the reference max when the KV tiles are walked ascending (tile 0 first, fajit's
order until issue 20) or descending (the diagonal tile first, FlashAttention-3's order). Needs numpy only.

Run:  python3 scripts/alibi_kv_order.py                  # B1 N8192 H16 D128, block 128 x 128, slack 8
      python3 scripts/alibi_kv_order.py --n 2048 --blocks 4 --slack 8

Modelled: Q, K ~ N(0, 1) in float64, S = Q K^T / sqrt(D), ALiBi's bias -slope x (i - j) for j <= i (BLOOM's
slopes 2^(-8 (h + 1) / H)), all in log2 units (x log2 e). A warp holds 16 query rows (wgmma m64: a warpgroup of
4 warps takes 64 rows); per KV tile each row's max mx over its visible keys, and the warp rebases (softmax.c: the
vote) when some row has mx > m + slack; m = max(m, mx) for its rows then. The work tile's first KV tile sets m
from -inf and is not counted (O is still 0 there). Printed: the share of the remaining (tile, warp) steps that
rebase, per head and over all heads, for both orders.
"""
import argparse

import numpy as np

LOG2E = 1.4426950408889634


def rebases(s_log2, block_n, order, slack):
    """s_log2: (rows, keys) scores of one warp with -inf where masked; the steps after the first that rebase."""
    tiles = (s_log2.shape[1] + block_n - 1) // block_n
    walk = range(tiles) if order == "asc" else range(tiles - 1, -1, -1)
    m = np.full(s_log2.shape[0], -np.inf)
    count = steps = 0
    for t, j in enumerate(walk):
        mx = s_log2[:, j * block_n:(j + 1) * block_n].max(axis=1)
        vote = np.any(mx > m + slack)
        if t > 0:
            steps += 1
            count += int(vote)
        if vote:
            m = np.maximum(m, mx)
    return count, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8192, help="Nq = Nk")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--block-m", type=int, default=128)
    ap.add_argument("--block-n", type=int, default=128)
    ap.add_argument("--blocks", type=int, default=6, help="query blocks sampled per head (spread over N)")
    ap.add_argument("--slack", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    nblk = a.n // a.block_m
    picks = sorted(set(int(x) for x in np.linspace(1, nblk - 1, a.blocks)))
    tot = {"asc": [0, 0], "desc": [0, 0]}
    print(f"N {a.n} H {a.heads} D {a.dim} block {a.block_m} x {a.block_n} slack {a.slack}; query blocks {picks}")
    print("head  slope      asc rebased   desc rebased")
    for h in range(a.heads):
        slope = 2.0 ** (-8.0 * (h + 1) / a.heads)
        per = {"asc": [0, 0], "desc": [0, 0]}
        for b in picks:
            m0 = b * a.block_m
            keys = m0 + a.block_m  # causal: keys 0 .. the block's last row
            q = rng.standard_normal((a.block_m, a.dim))
            k = rng.standard_normal((keys, a.dim))
            s = (q @ k.T) / np.sqrt(a.dim)
            i = np.arange(m0, m0 + a.block_m)[:, None]
            j = np.arange(keys)[None, :]
            s = np.where(j <= i, (s - slope * (i - j)) * LOG2E, -np.inf)
            for w in range(0, a.block_m, 16):
                for order in ("asc", "desc"):
                    c, n = rebases(s[w:w + 16], a.block_n, order, a.slack)
                    per[order][0] += c
                    per[order][1] += n
        for order in per:
            tot[order][0] += per[order][0]
            tot[order][1] += per[order][1]
        print(f"{h:4d}  {slope:.5f}  {per['asc'][0] / per['asc'][1]:12.1%}  {per['desc'][0] / per['desc'][1]:12.1%}")
    print(f"all         {tot['asc'][0] / tot['asc'][1]:12.1%}  {tot['desc'][0] / tot['desc'][1]:12.1%}   "
          f"((tile, warp) steps after each work tile's first: {tot['asc'][1]})")


if __name__ == "__main__":
    main()
