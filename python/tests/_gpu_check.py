"""_gpu_check.py - the pass rule of the GPU numerics tests (test_gpu.py, test_gpu_decode.py), written once:
an output against its float64 reference, every element. Imported by those tests (pytest puts this folder
on sys.path); not a test module itself.

Pass: no NaN/Inf in O, no NaN or +inf in LSE, LSE -inf exactly where the reference's is and O = 0 there
(rows that see no key), relative L2 of O <= 1e-2 (bf16) / 2e-3 (f16), worst row's relative error <= 4x
that, |LSE - ref| <= 1e-3: the tolerances of the C GPU tests (src/runtime/check.c). Each case's errors
are appended to $FAJIT_TEST_REPORT (default: not written) and printed (pytest -s shows them).
"""
import math
import os

import torch

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
TOL_LSE = 1e-3
ROW_FACTOR = 4.0


def report(line):
    print(line)
    path = os.environ.get("FAJIT_TEST_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def rel_l2(got, ref):
    return (got.double() - ref).norm().item() / max(ref.norm().item(), 1e-30)


def check_against(case, o, lse, ref_o, ref_lse, note="", kernel="", tol=None, tol_lse=None):
    """Assert the pass rule for O [B, H, N, D] and LSE [B, H, N] against float64 ref_o / ref_lse; `note`
    follows the relative L2 in the report line, `kernel` (fajit.last_forward()) ends it. tol / tol_lse: other
    bounds than the 16-bit rule's (FP8 inputs: the caller states its own)."""
    assert torch.isfinite(o).all(), f"{case}: {(~torch.isfinite(o)).sum().item()} NaN/Inf/unwritten outputs"
    assert not torch.isnan(lse).any() and not (lse == math.inf).any(), f"{case}: NaN or +inf in LSE"
    empty = torch.isinf(ref_lse)
    assert torch.equal(torch.isinf(lse), empty), f"{case}: LSE -inf rows differ from the reference's"
    assert not empty.any() or (o[empty] == 0).all(), f"{case}: a row with no key has O != 0"
    rel = rel_l2(o, ref_o)
    diff = (o.double() - ref_o).flatten(0, 2)
    row_rel = (diff.norm(dim=-1) / ref_o.flatten(0, 2).norm(dim=-1).clamp_min(1e-30))[~empty.flatten()]
    worst = row_rel.max().item() if row_rel.numel() else 0.0
    lse_err = (lse[~empty].double() - ref_lse[~empty]).abs().max().item() if (~empty).any() else 0.0
    tol = tol if tol is not None else TOL[o.dtype]
    tol_lse = tol_lse if tol_lse is not None else TOL_LSE
    report(f"{case}: rel L2 {rel:.3e}{note}, worst row {worst:.3e}, LSE {lse_err:.2e}, empty rows {int(empty.sum())}, "
           f"kernel: {kernel}")
    assert rel <= tol, f"{case}: rel L2 {rel:.3e} > {tol}"
    assert worst <= ROW_FACTOR * tol, f"{case}: worst row rel {worst:.3e} > {ROW_FACTOR * tol}"
    assert lse_err <= tol_lse, f"{case}: LSE error {lse_err:.3e} > {tol_lse}"
