"""test_ncu_source_summary.py - bench/ncu_source_summary.py without a GPU: its --selftest (samples grouped by how
often each instruction ran, shares and stall reasons of a made-up source page), and a missing input is a usage
error. Skipped outside a source tree."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "ncu_source_summary.py"
pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason=f"{SCRIPT} not found (tests run outside the source tree)")


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_ncu_source_summary_selftest():
    out = _run("--selftest")
    assert out.returncode == 0 and "selftest ok" in out.stdout, out.stdout + out.stderr


def test_ncu_source_summary_needs_an_input():
    out = _run()
    assert out.returncode == 2 and "CSV" in out.stderr, out.stderr
