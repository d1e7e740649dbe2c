"""_bench_script.py - a bench/ script the tests run as a subprocess without a GPU (its --selftest, its usage errors),
for test_bench_selftest.py, test_tile_cost.py and test_ncu_source_summary.py. Not a test module."""
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_script(name):
    """(path of bench/<name>, a pytestmark that skips the module when the tests run outside the source tree)"""
    path = BENCH / name
    return path, pytest.mark.skipif(not path.is_file(), reason=f"{path} not found (tests run outside the source tree)")


def run(path, *args, timeout=60):
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout)
