"""test_bench_selftest.py - bench/decode_compare.py without a GPU or torch: its command line, grid and writers
(md, csv, json) on fake numbers, read back and checked by its --selftest; and a bad option exits 2 naming it.
Skipped when the tests run outside a source tree (no bench/ next to python/).
"""
from _bench_script import bench_script, run

SCRIPT, pytestmark = bench_script("decode_compare.py")


def _run(*args):
    return run(SCRIPT, *args, timeout=120)


def test_decode_compare_selftest(tmp_path):
    out = _run("--selftest", "--out", str(tmp_path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "decode_compare selftest ok: 39 shapes in the grid (9 paged)" in out.stdout
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".csv", ".json", ".md"]


def test_decode_compare_bad_options():
    for args, text in ((["--rows", "7"], "rows are 1..5"), (["--page-sizes", "24"], "multiples of 16"),
                       (["--reps", "3"], "--reps 3: must be >= 10")):
        out = _run("--selftest", *args)
        assert out.returncode == 2 and text in out.stderr, (args, out.stderr)
