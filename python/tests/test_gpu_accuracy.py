"""test_gpu_accuracy.py - how much accuracy fajit's softmax arithmetic loses next to FlashAttention's, over many seeds,
on both code paths (the hardening issue's item 10).

Per seed: Q, K, V ~ N(0, 1) in BF16 (contiguous, or strided views), the float64 reference O_ref, and
    ratio = max|O_fajit - O_ref| / max|O_sdpa_flash - O_ref|
with SDPA's FlashAttention-2 kernel on the same inputs (bench/accuracy_ratio.py computes it; that script also times
FlashAttention-3 when it is importable: its ratio is 1.00-1.04 on average, at most 1.12-1.18 on an H100 / H200).
Bound, per (path, shape, layout) over the seeds: today's shipped arithmetic (the lazy rescale without the weight test,
src/codegen/softmax.c "Accuracy of the lazy rescale") gives means of 1.1-1.5 and maxima up to 2.6 (H200, session 17),
so by default the test holds it to mean <= 1.6, max <= 3.0: a change that loses more accuracy fails. With
FAJIT_TEST_ACCURACY_STRICT=1 (a library built with the weight test, bench/acc_ab.sh's w3est / w3held) it asks for
FlashAttention-3's range, mean <= 1.05 and max <= 1.3 (the hardening issue's item 10, open: the weight test meets it
but costs 1-4% of speed). Skipped (with the reason) without torch or a CUDA GPU.
"""
import os
import statistics
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import fajit  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import accuracy_ratio  # noqa: E402

STRICT = os.environ.get("FAJIT_TEST_ACCURACY_STRICT", "") not in ("", "0")
MEAN_BOUND, MAX_BOUND = (1.05, 1.3) if STRICT else (1.6, 3.0)
# (head dim, causal, seeds): the shape (D128 non-causal) with its 12 seeds, then D64 with fewer. Not causal: there
# every system's max error is the BF16 rounding of the first rows' O (one key or a few), the ratio 1.000 on every seed
CASES = [(128, False, 12), (64, False, 8)]


@pytest.mark.parametrize("d,causal,seeds", CASES, ids=[f"d{d}{'-causal' if c else ''}" for d, c, _ in CASES])
@pytest.mark.parametrize("n", [1500, 1536])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_error_ratio_to_flash_attention(d, causal, seeds, n, layout):
    rs = accuracy_ratio.ratios(fajit, n, layout, seeds, heads=8, d=d, causal=causal)
    bad = []
    for path, r in rs.items():
        line = f"{path} D{d} N{n} {layout}{' causal' if causal else ''}: mean {statistics.mean(r):.3f} " \
               f"max {max(r):.3f} over {len(r)} seeds ({' '.join(f'{x:.2f}' for x in r)})"
        print(line)
        if not (statistics.mean(r) <= MEAN_BOUND and max(r) <= MAX_BOUND):  # NaN fails too
            bad.append(line)
    assert not bad, f"error ratio to SDPA flash over the bound (mean <= {MEAN_BOUND}, max <= {MAX_BOUND}): " + \
        "; ".join(bad)
