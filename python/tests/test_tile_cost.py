"""test_tile_cost.py - bench/tile_cost.py without a GPU: its --selftest (the fit recovers a known per-work-tile cost),
the fit on the repository's H200 grid (fajit's BF16 D128 line within bounds the session-10 analysis quotes), and a
missing input is a usage error. Skipped outside a source tree."""
import pytest
from _bench_script import BENCH, bench_script, run

SCRIPT, pytestmark = bench_script("tile_cost.py")
GRID = BENCH / "results" / "h200-sm90a-compare-tuned-2026-11-24.csv"


def _run(*args):
    return run(SCRIPT, *args)


def test_tile_cost_selftest():
    out = _run("--selftest")
    assert out.returncode == 0 and "tile_cost selftest ok" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(not GRID.is_file(), reason=f"{GRID} not in this tree")
def test_tile_cost_on_the_h200_grid():
    out = _run("--csv", str(GRID))
    assert out.returncode == 0, out.stderr
    rows = {tuple(l.split()[:4]): l.split() for l in out.stdout.splitlines()[1:]}
    for mask, lo, hi in (("noncausal", 1.3, 1.7), ("causal", 2.4, 3.0)):
        x = float(rows[("bf16", "128", mask, "fajit")][5])
        assert lo <= x <= hi, (mask, x)


def test_tile_cost_needs_an_input():
    out = _run()
    assert out.returncode == 2 and "--csv" in out.stderr, out.stderr
