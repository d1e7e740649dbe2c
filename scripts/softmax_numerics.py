#!/usr/bin/env python3
"""softmax_numerics.py - CPU emulation of the online-softmax arithmetic of fajit's forward kernels and of
FlashAttention-2's, against a float64 reference: where fajit loses accuracy and what wins it back
(issue 21 item 10). Needs numpy only, no GPU.

Run:  python3 scripts/softmax_numerics.py                       # the issue's table: 12 seeds, N 1500 and 1536
      python3 scripts/softmax_numerics.py --seeds 4 --heads 2   # a quick look (~1 minute on 2 cores)
      python3 scripts/softmax_numerics.py --fire --n 4096 16384 # how often each rule rescales O (speed cost)

Printed per variant: the mean and max over seeds of
    ratio = max|O_variant - O_fp64| / max|O_fa2 - O_fp64|     (max over all heads, rows and columns)
for BF16 D128 non-causal, Q K V ~ N(0, 1) rounded to bf16, scale 1/sqrt(D), and the share of (KV tile,
warp) steps that rescale O.

What is modelled (exactly, in fp32 or bf16 round-to-nearest-even, except where said):
  S    = Q K^T: exact products summed in float64, rounded to fp32 once (the tensor core's fp32
         accumulator errs near 2^-23, far below bf16's 2^-9: one rounding stands for it);
  mx   = rowmax(S) * scale_log2 (fp32 mul); P = 2^(fma(S, scale_log2, -m)) with 2^ exact then rounded to
         fp32 (ex2.approx.ftz errs by ~2 ulp of fp32: nothing next to bf16); FA2 as PyTorch builds it
         (UNFUSE_FMA) rounds S * scale_log2 first;
  the rescale rule: eager (FA2, FA3: m = the running max, moved on every new max) or lazy (fajit: m moves
         only when a warp's vote says so; l, O *= 2^(m_old - m_new) in fp32);
  P16  = bf16(P) (cvt.rn.bf16x2.f32), the PV MMA's A operand; O += P16 V (exact products, one fp32
         rounding per tile);
  l    = four fp32 partial sums per row, one per lane of the row's quad (the m16n8 C layout gives lane t
         the columns 8i + 2t, 8i + 2t + 1), of the fp32 P (or of P16 with --l-from p16), summed over the
         quad at the end; out = bf16(O * fp32(1 / l)).

Root cause this shows: the eager rule puts the row's largest score at P = 2^0 = 1 exactly (bf16 holds it
with no error) and its neighbours just under 1, where bf16's relative step is finest. With the lazy rule
the reference m stays at an earlier, lower max, so the largest P - the term that dominates the rows with
the worst error - is 2^f for an arbitrary f and carries a full bf16 rounding error (up to 2^-9 of the
largest weight). The "weight test" moves m also when a new max would carry more than tau of the lane's
running l, which is the case that matters, at a fraction of the eager rule's rescales.

Candidates for a cheaper fix (issue 21 item 10; 12 seeds x 8 heads, ratio mean / max, share of steps rescaled):
  N 1500            sm_90a                      sm_80
  today             1.334 / 1.834  0.083        1.193 / 1.771  0.042
  l = sum bf16 P    1.333 / 1.834  (no help)    1.159 / 1.771
  l += bf16(Pmax)-Pmax (corr*)  1.332 / 1.834   1.153 / 1.771
  weight tau 1/4    1.007 / 1.058  0.538        1.002 / 1.027  0.632
  tau 1             1.155 / 1.619  0.200        1.168 / 1.619  0.223
  tau 4             1.290 / 1.834  0.090        1.241 / 1.771  0.087
  tau 1/4 vs l*J/j  1.026 / 1.176  0.239        1.006 / 1.098  0.341   (est*: the estimated final l)
  (6 seeds x 4 heads, ratio to fa2_fma:) held T (T recomputed only after a tile that moved m, as
  plan.rescale_weight_held), vs l*J/j:  sa90_t0.25 1.058 / 1.176  0.261   sa80_t0.125 1.022 / 1.085  0.720
  held T set at the rebase, before the tile's sums:  st90_t0.25 1.088 / 1.179  0.326 (worse: not built)
No key dominates these rows (largest weight ~5%): the error is the near-max P's position in their bf16 binade
(just under 2^0 with the eager rule, anywhere with the lazy one), so rounding only the largest P's share of l
changes nothing; only moving m to the new max does.
"""
import argparse
import sys

import numpy as np

LOG2E = 1.4426950408889634


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def bf16(x):
    """fp32 -> bf16 (round to nearest even), returned as fp32 values."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = r.astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(a), out, a)


def floor_log2(x):
    """floor(log2 x) from the fp32 exponent field (x >= 0; 0 gives -127): the kernel's shr / or / sub."""
    bits = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)
    return (bits >> 23).astype(np.float64) - 127.0


def fp64_reference(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return (p @ v.astype(np.float64)) / p.sum(axis=1, keepdims=True)


class Arith:
    """One variant of the kernel arithmetic."""

    def __init__(self, desc, slack=None, fma=True, l_from="p32", block_n=64, vote_rows=32, tau=None,
                 thread_rows=4, round_out=True, est=False, stale=False, after=False):
        self.desc = desc
        self.slack = slack              # None: eager; a number: lazy, m moves when mx > m + slack
        self.fma = fma                  # P = 2^fma(S, c, -m) (fajit, FA2 as built by its repo) or
        #                                 2^(fp32(S * c) - m) (FA2 as PyTorch builds it: UNFUSE_FMA)
        self.l_from = l_from            # "p32": l sums the fp32 P (FA2, FA3, fajit); "p16": the bf16 P
        self.block_n = block_n
        self.vote_rows = vote_rows      # rows of one warp, one vote: 32 on sm_80 br128 w4, 16 on sm_90a
        self.tau = tau                  # weight test (lazy only): see run()
        self.thread_rows = thread_rows  # rows a lane holds (4 on sm_80 br128 w4, 2 on sm_90a)
        self.round_out = round_out      # False: return the fp32 O, before the bf16 store
        self.est = est                  # weight test against an estimate of the row's final l: the lane's
        #                                 l * 2^(floor log2 J - floor log2 j), J tiles in all, j done
        self.stale = stale              # weight test whose threshold is recomputed only when the warp rebases
        #                                 (from the rescaled l before the tile's P) and kept in a register
        self.after = after              # with stale: T from l after the tile's P (the rebasing warps, at the tile's end)
        self.fired = 0                  # (tile, warp) steps that rescaled O, of ...
        self.steps = 0

    def run(self, q, k, v, scale_log2):
        nq0, nk = q.shape[0], k.shape[0]
        vr = self.vote_rows
        nq = nq0 + (-nq0 % vr)                          # whole warps; padded rows are copies of row 0
        if nq != nq0:
            q = np.concatenate([q, np.repeat(q[:1], nq - nq0, axis=0)])
        sc = np.float64(np.float32(scale_log2))
        s_all = f32(q.astype(np.float64) @ k.astype(np.float64).T)
        m = np.full(nq, -np.inf, dtype=np.float32)      # reference max, exp2 domain
        lt = np.zeros((nq, 4), dtype=np.float32)         # the quad's four partial sums of l
        o = np.zeros((nq, v.shape[1]), dtype=np.float32)
        v64 = v.astype(np.float64)
        lane_of_col = (np.arange(nk) % 8) // 2
        groups = nq // vr
        g_of_row = (np.arange(nq) % vr) % 8             # lane group g holding row r (rows g, g+8, ...)
        ntiles = -(-nk // self.block_n)
        thr = np.full((groups, 8, 4), np.float32(self.slack if self.slack is not None else 0.0))
        for j0 in range(0, nk, self.block_n):
            s = s_all[:, j0:j0 + self.block_n]
            cols = lane_of_col[j0:j0 + self.block_n]
            mx = f32(s.max(axis=1).astype(np.float64) * sc)
            if self.slack is None:
                move = mx > m
            else:
                if self.tau is not None and self.stale:
                    pass                                                          # thr set at the last rebase
                elif self.tau is not None:
                    # weight test, per lane (g, t): T = clamp(floor(log2 min l) + log2 tau, 0, slack) over
                    # the lane's rows, from l before this tile's P; floor(log2) is l's exponent field
                    lmin = lt.reshape(groups, vr // 8, 8, 4).min(axis=1)          # (groups, g, t)
                    lg = floor_log2(lmin) + np.log2(self.tau)
                    if self.est and j0 > 0:
                        jt = j0 // self.block_n
                        lg = lg + (np.floor(np.log2(ntiles)) - np.floor(np.log2(jt)))
                    thr = np.clip(lg, 0.0, self.slack).astype(np.float32)
                # per row: the smallest threshold of the lanes holding it (any lane's vote moves the warp)
                t_row = thr.min(axis=2)[np.arange(nq) // vr, g_of_row]
                move = mx > f32(m.astype(np.float64) + t_row)
                mv = move.reshape(groups, vr).any(axis=1)
                self.fired += int(mv.sum())
                self.steps += mv.size
                move = np.repeat(mv, vr)
            mnew = np.where(move, np.maximum(m, mx), m)
            muse = np.where(mnew == -np.inf, np.float32(0), mnew)
            with np.errstate(invalid="ignore"):
                d = f32(m.astype(np.float64) - muse.astype(np.float64))
            c = np.where(move, f32(np.exp2(d.astype(np.float64))), np.float32(1))
            lt = f32(lt.astype(np.float64) * c[:, None])
            o = f32(o.astype(np.float64) * c[:, None])
            m = mnew
            if self.slack is not None and self.tau is not None and self.stale and not self.after:
                # the rebasing warps' lanes recompute T from l (rescaled, before this tile's P), for the next tiles
                lmin = lt.reshape(groups, vr // 8, 8, 4).min(axis=1)
                lg = floor_log2(lmin) + np.log2(self.tau)
                if self.est:
                    jt = j0 // self.block_n
                    lg = lg + (np.floor(np.log2(ntiles)) - (np.floor(np.log2(jt)) if jt > 0 else -1.0))
                new = np.clip(lg, 0.0, self.slack).astype(np.float32)
                thr = np.where(mv[:, None, None], new, thr)
            mu = np.where(m == -np.inf, np.float32(0), m).astype(np.float64)[:, None]
            if self.fma:
                x = f32(s.astype(np.float64) * sc - mu)
            else:
                x = f32(f32(s.astype(np.float64) * sc).astype(np.float64) - mu)
            p = f32(np.exp2(x.astype(np.float64)))
            p16 = bf16(p)
            src = (p if self.l_from != "p16" else p16).astype(np.float64)
            for t in range(4):
                lt[:, t] = f32(lt[:, t].astype(np.float64) + f32(src[:, cols == t].sum(axis=1)))
            if self.l_from == "corr":
                # the tile's largest P, 2^(mx - m), enters O rounded to bf16 but l unrounded: every lane of
                # the quad adds a quarter of the difference, l += (bf16(pm) - pm) / 4 (one FMA)
                with np.errstate(invalid="ignore"):
                    pm = f32(np.exp2(f32(mx.astype(np.float64) - mu[:, 0]).astype(np.float64)))
                dlt = f32(bf16(pm).astype(np.float64) - pm)
                dlt = np.where(np.isfinite(dlt), dlt, np.float32(0))
                lt = f32(lt.astype(np.float64) + 0.25 * dlt.astype(np.float64)[:, None])
            o = f32(o.astype(np.float64) + p16.astype(np.float64) @ v64[j0:j0 + self.block_n])
            if self.slack is not None and self.tau is not None and self.stale and self.after:
                lmin = lt.reshape(groups, vr // 8, 8, 4).min(axis=1)
                lg = floor_log2(lmin) + np.log2(self.tau)
                if self.est:
                    jt = j0 // self.block_n + 1                                   # tiles done after this one
                    lg = lg + (np.floor(np.log2(ntiles)) - np.floor(np.log2(jt)))
                new = np.clip(lg, 0.0, self.slack).astype(np.float32)
                thr = np.where(mv[:, None, None], new, thr)
        l = f32(f32(lt[:, 0].astype(np.float64) + lt[:, 1]).astype(np.float64)
                + f32(lt[:, 2].astype(np.float64) + lt[:, 3]))
        inv = f32(1.0 / l.astype(np.float64))
        out = f32(o.astype(np.float64) * inv.astype(np.float64)[:, None])[:nq0]
        return bf16(out) if self.round_out else out


def variants(tau):
    sm80 = dict(block_n=64, vote_rows=32, thread_rows=4)
    sm90 = dict(block_n=128, vote_rows=16, thread_rows=2)
    out = {
        "fa2": Arith("FA2 (PyTorch's build): eager, unfused S*c - m, l = sum fp32 P", fma=False),
        "fa2_fma": Arith("eager, FMA (FA2's repo, FA3)"),
        "fajit80": Arith("fajit sm_80 today: lazy slack 8, bc 64, 32-row vote", slack=8.0, **sm80),
        "fajit90": Arith("fajit sm_90a today: lazy slack 8, bc 128, 16-row vote", slack=8.0, **sm90),
        "fajit80_l16": Arith("fajit sm_80 with l = sum bf16 P", slack=8.0, l_from="p16", **sm80),
        "lazy0_80": Arith("sm_80, slack 0 (rescale on every moved max)", slack=0.0, **sm80),
        "fix80": Arith(f"sm_80 + weight test tau {tau:g}", slack=8.0, tau=tau, **sm80),
        "fix90": Arith(f"sm_90a + weight test tau {tau:g}", slack=8.0, tau=tau, **sm90),
        "fajit90_l16": Arith("fajit sm_90a with l = sum bf16 P", slack=8.0, l_from="p16", **sm90),
        "corr80": Arith("sm_80, l += (bf16(Pmax) - Pmax) / 4 per lane and tile", slack=8.0, l_from="corr", **sm80),
        "corr90": Arith("sm_90a, l += (bf16(Pmax) - Pmax) / 4 per lane and tile", slack=8.0, l_from="corr", **sm90),
        "est80": Arith(f"sm_80 + weight test tau {tau:g} against l * J / j", slack=8.0, tau=tau, est=True, **sm80),
        "est90": Arith(f"sm_90a + weight test tau {tau:g} against l * J / j", slack=8.0, tau=tau, est=True, **sm90),
    }
    for t in (0.125, 0.25, 0.5, 1.0):
        out[f"st80_t{t:g}"] = Arith(f"sm_80 weight tau {t:g} vs l*J/j, T set at rebases", slack=8.0, tau=t, est=True,
                                    stale=True, **sm80)
        out[f"st90_t{t:g}"] = Arith(f"sm_90a weight tau {t:g} vs l*J/j, T set at rebases", slack=8.0, tau=t, est=True,
                                    stale=True, **sm90)
    for t in (0.125, 0.25, 0.5, 1.0):
        out[f"sa80_t{t:g}"] = Arith(f"sm_80 weight tau {t:g} vs l*J/j, T set after rebasing tiles", slack=8.0, tau=t,
                                    est=True, stale=True, after=True, **sm80)
        out[f"sa90_t{t:g}"] = Arith(f"sm_90a weight tau {t:g} vs l*J/j, T set after rebasing tiles", slack=8.0, tau=t,
                                    est=True, stale=True, after=True, **sm90)
    for t in (0.5, 1.0, 2.0, 4.0):
        out[f"fix80_t{t:g}"] = Arith(f"sm_80 + weight test tau {t:g}", slack=8.0, tau=t, **sm80)
        out[f"fix90_t{t:g}"] = Arith(f"sm_90a + weight test tau {t:g}", slack=8.0, tau=t, **sm90)
    return out


def inputs(rng, nq, nk, d, vmean):
    q = bf16(rng.standard_normal((nq, d), dtype=np.float32))
    k = bf16(rng.standard_normal((nk, d), dtype=np.float32))
    v = bf16(rng.standard_normal((nk, d), dtype=np.float32) + np.float32(vmean))
    return q, k, v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--n", type=int, nargs="+", default=[1500, 1536])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--tau", type=float, default=0.25, help="weight test: rebase when 2^(mx-m) > ~tau * l_lane")
    ap.add_argument("--vmean", type=float, default=0.0, help="mean added to V (default 0: V ~ N(0, 1))")
    ap.add_argument("--variants", default="all", help="comma list; the first is the ratio's base")
    ap.add_argument("--fire", action="store_true", help="only the rescale rates, 256 query rows vs N keys")
    a = ap.parse_args()
    vs = variants(a.tau)
    names = list(vs) if a.variants == "all" else a.variants.split(",")
    scale = 1.0 / np.sqrt(a.d)
    scale_log2 = np.float32(scale * LOG2E)
    if a.fire:
        for n in a.n:
            q, k, v = inputs(np.random.default_rng(7), 256, n, a.d, a.vmean)
            for nm in names:
                vs[nm].fired = vs[nm].steps = 0
                vs[nm].run(q, k, v, scale_log2)
            print(f"Nk {n}: O rescaled in this share of (KV tile, warp) steps: " +
                  ", ".join(f"{nm} {vs[nm].fired / max(1, vs[nm].steps):.3f}" for nm in names))
        return
    for n in a.n:
        err = {nm: [] for nm in names}
        for nm in names:
            vs[nm].fired = vs[nm].steps = 0
        for seed in range(a.seeds):
            rng = np.random.default_rng(seed)
            e = {nm: 0.0 for nm in names}
            for _ in range(a.heads):
                q, k, v = inputs(rng, n, n, a.d, a.vmean)
                ref = fp64_reference(q, k, v, scale)
                for nm in names:
                    out = vs[nm].run(q, k, v, scale_log2)
                    e[nm] = max(e[nm], float(np.abs(out.astype(np.float64) - ref).max()))
            for nm in names:
                err[nm].append(e[nm])
        base = np.array(err[names[0]])
        print(f"N {n}, {a.seeds} seeds x {a.heads} heads, D {a.d}: ratio to {names[0]} mean / max, "
              f"error mean, O rescaled")
        for nm in names:
            r = np.array(err[nm]) / base
            print(f"  {nm:12s} {r.mean():.3f} / {r.max():.3f}   {np.mean(err[nm]):.3e}   "
                  f"{vs[nm].fired / max(1, vs[nm].steps):.3f}   {vs[nm].desc}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
