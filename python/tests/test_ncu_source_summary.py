"""test_ncu_source_summary.py - bench/ncu_source_summary.py without a GPU: its --selftest (samples grouped by how
often each instruction ran, shares and stall reasons of a made-up source page), and a missing input is a usage
error. Skipped outside a source tree."""
from _bench_script import bench_script, run

SCRIPT, pytestmark = bench_script("ncu_source_summary.py")


def _run(*args):
    return run(SCRIPT, *args)


def test_ncu_source_summary_selftest():
    out = _run("--selftest")
    assert out.returncode == 0 and "selftest ok" in out.stdout, out.stdout + out.stderr


def test_ncu_source_summary_needs_an_input():
    out = _run()
    assert out.returncode == 2 and "CSV" in out.stderr, out.stderr
