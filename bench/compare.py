"""compare.py - fajit next to FlashAttention-2 and cuDNN (PyTorch SDPA's backends), FlashAttention-3 and
FlashAttention-4 (when their wheels are importable): the benchmark every fajit code-generation path is
judged by.

Grid (defaults): BF16 and FP16 forward; head dim D in {64, 128, 256}; N in {512, ..., 16384}; B*N = 16384
tokens and H*D = 2048 (so B = 16384 / N, H = 2048 / D); causal and not; BHND layout, Nq = Nk, no GQA.
For each shape, in one process, on the same inputs:

 1. Check. fajit's output (written over a NaN-filled buffer) is compared with SDPA flash's output over the
    whole tensor (relative L2, ||O - O_FA2|| / ||O_FA2||) and with a float32 SDPA math reference on a slice
    (batch 0, the first and last heads, 256 query rows spread over N, all keys, causal mask given
    explicitly). fajit fails the check above 2e-2 (bf16) / 5e-3 (f16); the row is marked FAIL, the failure
    is printed at once and the exit status is 1 (the shape is still timed). FA2's and cuDNN's own errors
    against the reference are recorded too.
 2. Time. fajit (the library's choice for the GPU: sm_90a on an H100), fajit's sm_80 path (forced, where
    the default path is another), SDPA flash (FlashAttention-2), SDPA cuDNN, FlashAttention-3 (`import
    fa3_fwd_interface`) and FlashAttention-4 (`from flash_attn.cute import flash_attn_func`; its first call
    per kernel JIT-compiles, during the check, untimed) - the last two on [B, N, H, D] copies of the same
    inputs, their native layout: `--warmup` calls each, then `--reps`
    calls each in 5 interleaved rounds (fajit, FA2, cuDNN, ..., then FA2, cuDNN, ..., fajit), every call between
    two CUDA events on the current stream; the median is reported. Each window is preceded by >= --settle
    calls and >= --settle-ms of the same system, then a spin kernel (torch.cuda._sleep) of about twice the
    host time to enqueue the window's calls, so they run back to back and their events time GPU work only,
    not a Python wrapper's host side (queue_ahead); the window ends with a synchronize; NVML's SM clock and board
    power, sampled every 2 ms in a thread, give each system's median clock and power over its windows. Inputs rotate over several Q/K/V sets
    spanning >= 512 MB (the H100's L2 is 50 MB), so no call finds its inputs in L2.
    TFLOP/s = 4*B*H*N*N*D / t, halved for causal.

fajit's config per shape is the library heuristic's (fajit_config_fill), or a config from the file given
with --config-from-tune; kernels are compiled into a fresh cache directory, so the first use of each
config is a cold compile (its time is recorded). A peer that cannot run a shape shows "n/a" with the
reason. Outputs (with --out DIR): DIR/<gpu-slug>-<path>.md (report), .png (TFLOP/s vs N), .csv and .json
(raw numbers, every timed call in the json); <path> is fajit's code-generation path, e.g. sm80;
--quick adds "-quick" to the names.

Usage (GPU machine, repository root, libfajit built into ./build):
    python3 bench/compare.py --out bench/results                      # the full grid (72 shapes)
    python3 bench/compare.py --quick                                  # 4 shapes, a smoke test
    python3 bench/compare.py --dtypes bf16 --headdims 128 --seqlens 4096,16384 --causal yes --reps 100
    python3 bench/compare.py --config-from-tune --out /tmp/r         # configs from fagen tune's winners
    python3 bench/compare.py --selftest-writers [--out DIR]           # no GPU, no torch: writers on fake data

--config-from-tune [FILE]: take fajit's configs from a file instead of the heuristic. FILE (default: the
tune file in fajit's cache directory, $FAJIT_CACHE_DIR, else $XDG_CACHE_HOME/fajit, else ~/.cache/fajit,
/tuned-v1.txt) is either
  - a tune file as `fagen tune` / fajit_tune write it: lines "gpu | driver | codegen | class | config |
    TFLOP/s | note" (src/runtime/tune_file.h). A shape uses the line with this GPU's name and the shape's
    dtype, head dim, mask and sequence-length class (the power of two at or above N, 128..16384); among
    several, the one measured with this driver. Lines that do not parse are skipped, as libfajit does.
  - JSON: a list of {"config": "<canonical config text>", "N": 4096} entries (N optional), or an object
    with that list under "rows" (compare.py's own .json: this replays that run's configs) or "configs".
    A shape uses the entry with its dtype, head dim and mask and its N, else one without N.
Shapes with no entry use the heuristic; each row records where its config came from. Every config in
the file must pass fajit_config_check, or nothing runs (exit status 2). Without this option the
heuristic's configs are used: the kernels go to a fresh cache directory, where no tuned winner is found.
"""
import argparse
import bisect
import contextlib
import csv
import ctypes
import datetime
import json
import math
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import LABEL, PEERS, SYSTEMS, fmt, print_table, ratio, write_outputs  # noqa: E402

TOKENS = 16384            # B * N
HIDDEN = 2048             # H * D
ROTATE_BYTES = 512 << 20  # Q, K, V sets span at least this (>= 10x the H100's 50 MB L2)
TOL = {"bf16": 2e-2, "f16": 5e-3}  # rel L2 of fajit vs FA2 and vs the fp32 reference
REF_ROWS = 256            # query rows in the reference slice
ROUNDS = 5                # timing rounds, systems interleaved
DEVICE = "cuda"           # where tensors live (a CPU dry run of the logic may set "cpu")
DTYPE_ALIASES = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16"}
# --quick: both dtypes, every head dim, causal and not, short and long N
QUICK_SHAPES = (("bf16", 128, 4096, False), ("bf16", 256, 16384, True), ("f16", 64, 1024, False),
                ("f16", 128, 2048, True))


fajit = None  # the package, imported by load_fajit() once the command line is read


def load_fajit(lib=None):
    """The fajit package: the installed one (pip install ./python), else the source tree's python/src with
    build/libfajit.so. --lib PATH: the source tree's package with that library ($FAJIT_LIB)."""
    global fajit
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "src")
    if lib:
        os.environ["FAJIT_LIB"] = os.path.abspath(lib)
        sys.path.insert(0, src)
    try:
        import fajit as module
    except ImportError:
        sys.path.insert(0, src)
        import fajit as module
    fajit = module
    return module


def log(msg=""):
    print(msg, flush=True)


# ---- command line -------------------------------------------------------------------------------------
def int_list(text):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers")
    return vals


def dtype_list(text):
    out = []
    for x in text.split(","):
        x = x.strip().lower()
        if x not in DTYPE_ALIASES:
            raise argparse.ArgumentTypeError(f"dtype {x!r}: must be bf16 or f16")
        if DTYPE_ALIASES[x] not in out:
            out.append(DTYPE_ALIASES[x])
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="The module docstring (head of bench/compare.py) describes the method.")
    p.add_argument("--dtypes", type=dtype_list, help="comma-separated: bf16,f16 (default both)")
    p.add_argument("--headdims", type=int_list, help="comma-separated head dims (default 64,128,256)")
    p.add_argument("--seqlens", type=int_list,
                   help="comma-separated N (default 512,1024,2048,4096,8192,16384); B = max(1, 16384 / N)")
    p.add_argument("--causal", choices=("both", "yes", "no"), help="masks to run (default both)")
    p.add_argument("--quick", action="store_true",
                   help="4 shapes instead of the grid: " + ", ".join(f"{t} d{d} N{n} {'causal' if c else 'noncausal'}"
                                                                   for t, d, n, c in QUICK_SHAPES)
                   + " (kept only where --dtypes/--headdims/--seqlens/--causal, when given, allow)")
    add_timing_options(p, reps=50, min_reps=30, warmup=10)
    p.add_argument("--out", help="directory for the .md, .png, .csv and .json (created); nothing is written without it"
                   " (except with --selftest-writers)")
    p.add_argument("--config-from-tune", metavar="FILE", nargs="?", const=default_tune_file(),
                   help="fajit configs from `fagen tune`'s winners file instead of the heuristic (default FILE: "
                        f"{default_tune_file()}), or from a JSON list (format: the module docstring)")
    p.add_argument("--selftest-writers", action="store_true",
                   help="render fake numbers with the report, CSV, JSON and plot writers into --out or a temp "
                        "directory, and check them (no GPU, no torch)")
    a = p.parse_args(argv)
    check_timing_options(p, a, min_reps=30)
    return a


def queue_ahead(torch, host_ms):
    """Keep the GPU busy for about twice host_ms (the host time to enqueue the timed calls) with a spin
    kernel, so the timed calls queue up behind it and run back to back: their events then time the GPU's
    work only. Without it a call whose host side (a Python wrapper's argument handling, several launches)
    outlasts its kernels let the GPU idle between the events: FA3's kvcache call at B8 Hq32/8 Nk8k Nq1
    measured 3622 GB/s in one H200 run and 1429 GB/s in the next. Skipped when torch has no _sleep."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None or host_ms <= 0:
        return
    khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0) or 2000000
    sleep(int(min(2.0 * host_ms + 0.2, 50.0) * khz))  # cycles = ms * kHz; at most 50 ms


def add_timing_options(p, reps, min_reps, warmup):
    """--reps, --warmup, --settle, --settle-ms (Bench.time_systems reads them) and --lib: shared with
    decode_compare.py."""
    p.add_argument("--reps", type=int, default=reps,
                   help=f"timed calls per system and shape (>= {min_reps}; default {reps})")
    p.add_argument("--warmup", type=int, default=warmup,
                   help=f"untimed calls per system and shape first (default {warmup})")
    p.add_argument("--settle", type=int, default=5,
                   help="at least this many untimed calls of a system before each of its timed windows (default 5)")
    p.add_argument("--settle-ms", type=float, default=100.0,
                   help="and at least this much of the system's own GPU time (default 100 ms, sized from the "
                        "warm-up): the clocks settle to that system's power draw, so no system is timed on clocks "
                        "boosted by a lighter predecessor or held down by a heavier one (measured on an H100: with "
                        "5 calls, a kernel timed after cuDNN read 11%% low and cuDNN 27%% high)")
    p.add_argument("--lib", help="libfajit.so, used through the source tree's python/src package (default: the "
                   "installed fajit package, else python/src with build/libfajit.so)")


def check_timing_options(p, a, min_reps):
    if a.reps < min_reps:
        p.error(f"--reps {a.reps}: must be >= {min_reps} (the median of at least {min_reps} calls)")
    if a.warmup < 1:
        p.error(f"--warmup {a.warmup}: must be >= 1")


def build_grid(a):
    """The shapes to run, in order: dicts with dtype, D, N, B, H, causal."""
    dtypes = a.dtypes or ["bf16", "f16"]
    dims = a.headdims or [64, 128, 256]
    seqlens = a.seqlens or [512, 1024, 2048, 4096, 8192, 16384]
    masks = {"both": [False, True], "yes": [True], "no": [False]}[a.causal or "both"]
    if a.quick:
        keep = [s for s in QUICK_SHAPES if (not a.dtypes or s[0] in a.dtypes) and (not a.headdims or s[1] in a.headdims)
                and (not a.seqlens or s[2] in a.seqlens) and (not a.causal or s[3] in masks)]
        combos = sorted(keep, key=lambda s: (dtypes.index(s[0]) if s[0] in dtypes else 9, s[1], s[2], s[3]))
    else:
        combos = [(t, d, n, c) for t in dtypes for d in dims for n in seqlens for c in masks]
    return [{"dtype": t, "D": d, "N": n, "B": max(1, TOKENS // n), "H": max(1, HIDDEN // d), "causal": c}
            for t, d, n, c in combos]


# ---- configs from a file (--config-from-tune) -----------------------------------------------------------
TUNE_FILE_NAME = "tuned-v1.txt"  # src/runtime/tune_file.h
TUNE_CLASS_MIN, TUNE_CLASS_MAX = 128, 16384  # src/runtime/tune.h


def default_tune_file():
    """<cache dir>/tuned-v1.txt, the cache dir found as libfajit finds it."""
    d = os.environ.get("FAJIT_CACHE_DIR")
    if not d:
        xdg = os.environ.get("XDG_CACHE_HOME")
        d = os.path.join(xdg, "fajit") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "fajit")
    return os.path.join(d, TUNE_FILE_NAME)


def seqlen_class(n):
    """fajit_tune's sequence-length class of N: the power of two at or above N, clamped to 128..16384."""
    c = TUNE_CLASS_MIN
    while c < n and c < TUNE_CLASS_MAX:
        c *= 2
    return c


def parse_tune_line(line):
    """One line of a tune file ("gpu | driver | codegen | class | config | TFLOP/s | note") as an entry
    dict, or None for a comment, a blank line or a line that does not parse (as libfajit ignores them)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    f = [x.strip() for x in line.split("|")]
    if not 6 <= len(f) <= 7:
        return None
    m = re.match(r"^(f16|bf16) d(\d+) (causal|noncausal) n(\d+)$", f[3])
    try:
        cfg, driver, tflops = fajit.config(f[4]), int(f[1]), float(f[5])
    except ValueError:  # also a config that breaks a rule (fajit.FajitInputError)
        return None
    if not m or (cfg.dtype, cfg.head_dim, bool(cfg.causal)) != (m.group(1), int(m.group(2)),
                                                                               m.group(3) == "causal"):
        return None
    return {"cfg": cfg, "gpu": f[0], "driver": driver, "codegen": f[2], "class": int(m.group(4)),
            "tflops": tflops, "note": f[6] if len(f) > 6 else ""}


def load_config_file(path):
    """Entries {cfg, and N, or class with gpu, driver, codegen, tflops} from a tune file or a JSON file
    (formats: module docstring). Raises OSError or ValueError (naming the file and entry) when unusable."""
    with open(path) as f:
        text = f.read()
    if text.lstrip()[:1] not in ("[", "{"):  # a tune file
        entries = [e for e in (parse_tune_line(x) for x in text.splitlines()) if e]
        if not entries:
            raise ValueError(f"{path}: no usable line (expected 'gpu | driver | codegen | class | config | "
                             "TFLOP/s | note' lines, as fagen tune writes them)")
        return entries
    data = json.loads(text)
    if isinstance(data, dict):
        data = data.get("rows", data.get("configs"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of entries, or an object with a 'rows' or 'configs' list")
    entries = []
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise ValueError(f"{path}: entry {i}: expected an object with a 'config' text")
        text = e.get("config")
        if text in (None, "", "?"):  # a compare.py row whose config could not be made
            continue
        try:
            cfg = fajit.config(text)
        except ValueError as err:
            raise ValueError(f"{path}: entry {i}: {err}") from None
        n = e.get("N", e.get("seqlen"))
        entries.append({"cfg": cfg, "N": int(n) if n is not None else None})
    return entries


def pick_config(entries, shape, gpu=None, driver=None):
    """(Config, where it came from) for a shape from the file's entries, or (None, None).
    Tune-file lines: same dtype, head dim, mask and sequence-length class, and this GPU's name; among
    several, the one measured with this driver, else the last. JSON entries: the same N, else no N."""
    key = (shape["dtype"], shape["D"], shape["causal"])
    mine = [e for e in entries or [] if (e["cfg"].dtype, e["cfg"].head_dim, bool(e["cfg"].causal)) == key]
    tuned = [e for e in mine if e.get("class") == seqlen_class(shape["N"]) and (gpu is None or e["gpu"] == gpu)]
    if tuned:
        e = ([t for t in tuned if t["driver"] == driver] or tuned)[-1]
        return e["cfg"], (f"tune file: class n{e['class']}, driver {e['driver']}, {e['codegen']}, "
                          f"{e['tflops']:g} TFLOP/s when tuned")
    for n in (shape["N"], None):
        hit = [e for e in mine if "class" not in e and e["N"] == n]
        if hit:
            return hit[-1]["cfg"], "file" + (f" (N={n})" if n else "")
    return None, None


# ---- measuring (GPU; torch is imported here) ------------------------------------------------------------
def rel_l2(x, ref):
    """||x - ref|| / ||ref|| in float32 (NaN when x has NaN)."""
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm()).item()


def short_reason(exc, caught):
    """One line: the exception's first line, then the warnings SDPA gave while refusing."""
    parts = [f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"]
    for w in caught:
        text = " ".join(str(w.message).split())
        if text and text not in parts:
            parts.append(text)
    return "; ".join(parts)[:300]


class ClockSampler:
    """SM clock (MHz) and board power (W) read through NVML (libnvidia-ml, ctypes) every `period` s in a
    background thread, so each timed window can report the clock it ran at. Optional: without NVML the
    columns read n/a. Power is NVML's reading (on H100 an average over about a second)."""

    def __init__(self, period=0.002):
        import threading
        self.times, self.samples, self.period, self.stop = [], [], period, threading.Event()
        self.nvml = self.handle = None
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            if nvml.nvmlInit_v2() != 0 or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
                return
            self.nvml, self.handle = nvml, handle
        except OSError:
            return
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        mhz, mw = ctypes.c_uint(), ctypes.c_uint()
        while not self.stop.is_set():
            ok_c = self.nvml.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(mhz)) == 0  # NVML_CLOCK_SM
            ok_p = self.nvml.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)) == 0
            # sample first, then its time: a reader that sees n times always finds n samples
            self.samples.append((mhz.value if ok_c else None, mw.value / 1000 if ok_p else None))
            self.times.append(time.perf_counter())
            time.sleep(self.period)

    def window(self, t0, t1):
        """Median clock and power of the samples taken in [t0, t1]; (None, None) without samples."""
        n = len(self.times)  # samples are in time order: bisect instead of scanning the whole run
        got = self.samples[bisect.bisect_left(self.times, t0, 0, n):bisect.bisect_right(self.times, t1, 0, n)]
        clk = [c for c, _ in got if c is not None]
        pw = [w for _, w in got if w is not None]
        return (statistics.median(clk) if clk else None, statistics.median(pw) if pw else None)

    def close(self):
        self.stop.set()
        if self.nvml is not None:
            self.thread.join()


class Bench:
    """Everything that touches the GPU: inputs, the fajit context, the peers, checks and timing."""

    def __init__(self, a, grid, table):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.sdpa_kernel, self.SDPBackend = torch, F, sdpa_kernel, SDPBackend
        self.a, self.grid, self.table = a, grid, table
        torch.manual_seed(0)
        torch.set_float32_matmul_precision("highest")  # the fp32 reference must not use TF32
        torch.cuda.init()
        torch.empty(1, device=DEVICE)  # torch's primary context exists before fajit binds to it
        # kernels go to a fresh cache directory: set before fajit makes the device's context (first use)
        self.cache = tempfile.mkdtemp(prefix="fajit-compare-")
        os.environ["FAJIT_CACHE_DIR"], os.environ["FAJIT_CACHE"] = self.cache, "1"
        self.lib_path = str(fajit._lib.LIB_PATH)
        self.dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
        self.gpu, self.driver = torch.cuda.get_device_properties(0).name, driver_version_number()
        self.flat = None  # (dtype name, elements per tensor, [(q, k, v, o) flat tensors per set])
        self.compiled = {}  # config text -> info on its first use
        self.clock = ClockSampler()
        self.hopper, self.hopper_error, self.hopper_version = {}, {}, {}
        self.load_hopper_peers()
        # the sm_80 path is timed beside the default one where the default is another path
        self.default_path = fajit.config(head_dim=128, dtype="bf16", device=0).arch

    def load_hopper_peers(self):
        """FA3 and FA4 when importable (bench/README.md says how to install them)."""
        from importlib import metadata
        try:
            import fa3_fwd_interface
            self.hopper["fa3"] = fa3_fwd_interface.flash_attn_func
            self.hopper_version["fa3"] = metadata.version("fa3-fwd")
        except Exception as e:  # ImportError, or a library that does not load
            self.hopper_error["fa3"] = f"not importable: {type(e).__name__}: {str(e)[:160]}"
        try:
            from flash_attn.cute import flash_attn_func
            self.hopper["fa4"] = flash_attn_func
            self.hopper_version["fa4"] = metadata.version("flash-attn-4")
        except Exception as e:
            self.hopper_error["fa4"] = f"not importable: {type(e).__name__}: {str(e)[:160]}"

    def close(self):
        self.clock.close()
        shutil.rmtree(self.cache, ignore_errors=True)

    # -- inputs: per dtype, flat N(0,1) buffers viewed as each shape (every shape of the grid has the same size)
    def inputs(self, shape):
        torch = self.torch
        numel = shape["B"] * shape["H"] * shape["N"] * shape["D"]
        if self.flat is None or self.flat[0] != shape["dtype"] or self.flat[1] < numel:
            self.flat = None
            torch.cuda.empty_cache()
            need = max(s["B"] * s["H"] * s["N"] * s["D"] for s in self.grid if s["dtype"] == shape["dtype"])
            elt = 2
            count = max(2, math.ceil(ROTATE_BYTES / (3 * need * elt)))
            dt = self.dtypes[shape["dtype"]]
            sets = [tuple(torch.randn(need, device=DEVICE, dtype=dt) for _ in range(3)) +
                    (torch.empty(need, device=DEVICE, dtype=dt),) for _ in range(count)]
            self.flat = (shape["dtype"], need, sets)
            log(f"inputs: {count} sets of Q, K, V ({shape['dtype']}, {count * 3 * need * elt / 2**20:.0f} MB) "
                f"+ fajit outputs")
        dims = (shape["B"], shape["H"], shape["N"], shape["D"])
        return [tuple(t[:numel].view(dims) for t in s) for s in self.flat[2]]

    # -- fajit
    def fajit_config(self, shape):
        cfg, source = pick_config(self.table, shape, self.gpu, self.driver)
        if cfg is not None:
            return fajit.config(cfg), source
        h = shape["H"]
        cfg = fajit.config(head_dim=shape["D"], dtype=shape["dtype"], causal=shape["causal"],
                           shape=(shape["B"], h, h, shape["N"], shape["N"]), device=0)
        return cfg, "heuristic"

    def fajit_prepare(self, shape, sets, row, sm80=False):
        """Config, kernel (cold compile on first use), and one call per set. Returns the calls. sm80: the
        heuristic's config of the sm_80 path instead (the fajit80 system)."""
        if sm80:
            h = shape["H"]
            cfg = fajit.config(head_dim=shape["D"], dtype=shape["dtype"], arch="sm_80", causal=shape["causal"],
                               shape=(shape["B"], h, h, shape["N"], shape["N"]), device=0)
            source = "heuristic (sm_80 path)"
            row["config80"] = cfg.text
        else:
            cfg, source = self.fajit_config(shape)
        text = cfg.text
        if not sm80:
            row["config"], row["config_source"] = text, source
        t0 = time.perf_counter()
        info, got = fajit.kernel_info(cfg, device=0)
        get_ms = (time.perf_counter() - t0) * 1e3
        if text in self.compiled and source not in self.compiled[text]["source"]:
            self.compiled[text]["source"] += "; " + source
        if text not in self.compiled:
            self.compiled[text] = {"config": text, "source": source, "registers": info["registers"],
                                   "smem_bytes": info["smem_bytes"], "threads": info["threads"],
                                   "spill_bytes": info["spill_bytes"], "cubin_bytes": info["cubin_bytes"],
                                   "kernel_get_ms": round(get_ms, 2), "kernel_from": got, "shapes": 0}
            log(f"  fajit config {text} ({source}): {got} in {get_ms:.1f} ms, {info['registers']} regs, "
                f"{info['smem_bytes']} B smem, {info['threads']} threads, spill {info['spill_bytes']} B")
        self.compiled[text]["shapes"] += 1
        if not sm80:
            row["regs"], row["smem"], row["spill"] = info["registers"], info["smem_bytes"], info["spill_bytes"]
        causal, attention = shape["causal"], fajit.attention
        return [lambda q=q, k=k, v=v, o=o: attention(q, k, v, causal=causal, out=o, config=cfg) for q, k, v, o in sets]

    # -- peers
    def peer_calls(self, sets, causal, name="fa2"):
        """One call of peer `name` per input set, returning O as [B, H, N, D]. SDPA's backend is chosen by
        the context around the calls; FA3 / FA4 take the [B, N, H, D] copies (bnhd_sets)."""
        if name in ("fa3", "fa4"):
            f = self.hopper[name]
            first = lambda out: out[0] if isinstance(out, (tuple, list)) else out  # noqa: E731 (out or (out, lse))
            return [lambda q=q, k=k, v=v: first(f(q, k, v, causal=causal)).transpose(1, 2)
                    for q, k, v in self.bnhd_sets[:len(sets)]]
        F = self.F
        return [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                for q, k, v, _ in sets]

    def peer_context(self, name):
        if name in ("fa3", "fa4"):
            return contextlib.nullcontext
        be = {"fa2": self.SDPBackend.FLASH_ATTENTION, "cudnn": self.SDPBackend.CUDNN_ATTENTION}[name]
        return lambda: self.sdpa_kernel([be])

    def peers_for(self, row):
        """The peers to try on this shape (FA3 / FA4 only when importable; else their reason goes in row)."""
        out = []
        for name in PEERS:
            if name in ("fa3", "fa4") and name not in self.hopper:
                row[name + "_error"] = self.hopper_error[name]
                continue
            out.append(name)
        return out

    def try_peer(self, name, call):
        """(output, None) or (None, reason) for one call of a peer."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with self.peer_context(name)():
                    out = call()
                self.torch.cuda.synchronize()
                return out, None
            except Exception as e:  # RuntimeError "No available kernel" and its warnings, or anything else
                if not self.alive():
                    raise
                return None, short_reason(e, caught)

    def alive(self):
        """False when the CUDA context is broken (a sticky error: nothing more can run)."""
        try:
            self.torch.cuda.synchronize()
            return True
        except RuntimeError:
            return False

    # -- reference: float32 SDPA math on a slice
    def reference(self, q, k, v, causal):
        torch = self.torch
        _, h, n, _ = q.shape
        heads = sorted({0, h - 1})
        rows = torch.linspace(0, n - 1, min(REF_ROWS, n), device=DEVICE).round().long().unique()
        qs = q[0, heads][:, rows].float()
        ks, vs = k[0, heads].float(), v[0, heads].float()
        mask = (torch.arange(n, device=DEVICE)[None, :] <= rows[:, None]) if causal else None
        with self.sdpa_kernel([self.SDPBackend.MATH]):
            ref = self.F.scaled_dot_product_attention(qs[None], ks[None], vs[None], attn_mask=mask)[0]
        return ref, (lambda o: o[0, heads][:, rows])

    def check(self, shape, sets, fajit_calls, row):
        """Outputs of set 0 against each other and the reference; fills row; returns the working peers."""
        q, k, v, o = sets[0]
        o.fill_(float("nan"))
        fajit_calls[0]()
        self.torch.cuda.synchronize()
        ref, pick = self.reference(q, k, v, shape["causal"])
        peers = {}
        for name in self.peers_for(row):
            out, why = self.try_peer(name, self.peer_calls(sets[:1], shape["causal"], name)[0])
            if why:
                row[name + "_error"] = why
                continue
            peers[name] = out
            row[f"err_{name}_ref"] = rel_l2(pick(out), ref)
        row["err_ref"] = rel_l2(pick(o), ref)
        if "fa2" in peers:
            row["err_fa2"] = rel_l2(o, peers["fa2"])
        if "cudnn" in peers:
            row["err_cudnn"] = rel_l2(o, peers["cudnn"])
        tol = TOL[shape["dtype"]]
        bad = [f"vs {what} {row[key]:.3e}" for key, what in (("err_fa2", "FA2"), ("err_ref", "fp32 reference"))
               if key in row and not row[key] <= tol]  # NaN fails
        row["check"] = "FAIL" if bad else "ok"
        if bad:
            log(f"  !!! FAIL: fajit's output differs: {', '.join(bad)} > {tol:.0e} ({shape['dtype']})")
        del peers, ref
        return [n for n in PEERS if n + "_error" not in row]

    # -- timing
    def time_systems(self, systems, row):
        """systems: {name: (calls, context factory)}. Medians (ms) into row[name + '_ms'], all times in
        row['times'][name]. A system that fails while timed gets name + '_error'."""
        torch, a = self.torch, self.a
        names = list(systems)
        settle = {}
        host = {}
        for name in names:
            calls, ctx = systems[name]
            try:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with ctx():
                    t0 = time.perf_counter()
                    start.record()
                    for i in range(a.warmup):
                        calls[i % len(calls)]()
                    end.record()
                    host[name] = (time.perf_counter() - t0) * 1e3 / max(a.warmup, 1)
                torch.cuda.synchronize()
                per_call = max(start.elapsed_time(end) / max(a.warmup, 1), 1e-3)
                settle[name] = max(a.settle, math.ceil(a.settle_ms / per_call))
            except Exception as err:
                if not self.alive():
                    raise
                row[name + "_error"] = "in warm-up: " + short_reason(err, [])
        per = math.ceil(a.reps / ROUNDS)
        events = {n: [] for n in names}
        clocks = {n: [] for n in names}
        for r in range(ROUNDS):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                if name + "_error" in row:
                    continue
                calls, ctx = systems[name]
                pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                         for _ in range(per)]
                base = a.warmup + r * per
                t0 = time.perf_counter()
                try:
                    with ctx():
                        for i in range(settle.get(name, a.settle)):
                            calls[(base + i) % len(calls)]()
                        queue_ahead(torch, per * host.get(name, 0.0))
                        for i, (s, e) in enumerate(pairs):
                            s.record()
                            calls[(base + i) % len(calls)]()
                            e.record()
                except Exception as err:
                    if not self.alive():
                        raise
                    row[name + "_error"] = "while timed: " + short_reason(err, [])
                    continue
                events[name] += pairs
                # the queue was empty, so the window ran from t0 to the end of this synchronize: the
                # clock samples in it are this system's (its settle calls included)
                torch.cuda.synchronize()
                clocks[name].append(self.clock.window(t0, time.perf_counter()))
        torch.cuda.synchronize()
        row["times"] = {}
        for name in names:
            if name + "_error" in row or not events[name]:
                continue
            ts = [s.elapsed_time(e) for s, e in events[name][:a.reps]]
            row[name + "_ms"] = statistics.median(ts)
            row["times"][name] = [round(t, 5) for t in ts]
            mhz = [c for c, _ in clocks[name] if c is not None]
            watts = [w for _, w in clocks[name] if w is not None]
            row[name + "_mhz"] = statistics.median(mhz) if mhz else None
            row[name + "_watts"] = statistics.median(watts) if watts else None

    # -- one shape
    def measure(self, shape):
        torch = self.torch
        row = dict(shape)
        flops = 4.0 * shape["B"] * shape["H"] * shape["N"] * shape["N"] * shape["D"] * (0.5 if shape["causal"] else 1.0)
        row["gflop"] = flops / 1e9
        sets = self.inputs(shape)
        self.bnhd_sets = [tuple(t.transpose(1, 2).contiguous() for t in s[:3]) for s in sets] if self.hopper else []
        systems = {}
        try:
            fajit_calls = self.fajit_prepare(shape, sets, row)
        except Exception as e:  # FajitError (bad config, compile error) or a CUDA error seen by torch
            if not self.alive():
                raise
            row["fajit_error"] = str(e)[:300]
            row.setdefault("config", None)
            fajit_calls = None
        fajit80_calls = None
        if self.default_path != "sm_80":
            try:
                fajit80_calls = self.fajit_prepare(shape, sets, row, sm80=True)
            except Exception as e:
                if not self.alive():
                    raise
                row["fajit80_error"] = str(e)[:300]
        with torch.inference_mode():
            if fajit_calls is not None:
                try:
                    peers = self.check(shape, sets, fajit_calls, row)
                except Exception as e:
                    if not self.alive():
                        raise
                    row["fajit_error"] = "check: " + str(e)[:300]
                    peers = [n for n in PEERS if n + "_error" not in row]
                if "fajit_error" not in row:
                    systems["fajit"] = (fajit_calls, contextlib.nullcontext)
                    row["last_forward"] = fajit.last_forward()
            else:
                peers = []
                for name in self.peers_for(row):
                    _, why = self.try_peer(name, self.peer_calls(sets[:1], shape["causal"], name)[0])
                    if why:
                        row[name + "_error"] = why
                    else:
                        peers.append(name)
            if fajit80_calls is not None:
                systems["fajit80"] = (fajit80_calls, contextlib.nullcontext)
            for name in peers:
                systems[name] = (self.peer_calls(sets, shape["causal"], name), self.peer_context(name))
            # fixed order (SYSTEMS) for the rounds' rotation
            systems = {n: systems[n] for n in SYSTEMS if n in systems}
            if systems:
                self.time_systems(systems, row)
        for name in SYSTEMS:
            ms = row.get(name + "_ms")
            row[name] = flops / ms / 1e9 if ms else None
        self.bnhd_sets = []
        return row

    def gpu_warmup(self, seconds=1.0):
        """Matmuls for about `seconds`, so the first shape does not run at idle clocks."""
        torch = self.torch
        x = torch.randn(4096, 4096, device=DEVICE, dtype=torch.bfloat16)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(20):
                x @ x
            torch.cuda.synchronize()


# ---- environment -----------------------------------------------------------------------------------------
def run_text(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def driver_version_number():
    """cuDriverGetVersion (13000 = CUDA 13.0), or None."""
    try:
        v = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0:
            return v.value
    except (OSError, AttributeError):
        pass
    return None


def driver_cuda_version():
    v = driver_version_number()
    return f"{v // 1000}.{v % 1000 // 10}" if v else "?"


def nvjitlink_version():
    names = ["libnvJitLink.so.13"] + [os.path.join(d, "lib64", "libnvJitLink.so.13")
                                      for d in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda") if d]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            major, minor = ctypes.c_uint(), ctypes.c_uint()
            if lib.nvJitLinkVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
                return f"{major.value}.{minor.value}"
        except (OSError, AttributeError):
            continue
    return "?"


def device_environment(torch):
    """Date, GPU, driver, CUDA and torch versions: the head of a report's environment (shared with
    decode_compare.py)."""
    p = torch.cuda.get_device_properties(0)
    smi = run_text(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"])
    smi = [x.strip() for x in smi.splitlines()[0].split(",")] if smi else []
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "gpu": p.name,
        "gpu_detail": f"{p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}"
                      + (f", max SM clock {smi[1]}, power limit {smi[2]}" if len(smi) >= 3 else ""),
        "driver": (smi[0] if smi else "?") + f" (CUDA {driver_cuda_version()})",
        "cuda": f"torch built with CUDA {torch.version.cuda}; nvJitLink {nvjitlink_version()}",
        "torch": torch.__version__,
    }


def git_revision():
    """The repository's short HEAD, with " + uncommitted changes" when tracked files differ; "?" outside git."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rev = run_text(["git", "-C", repo, "rev-parse", "--short", "HEAD"])
    if rev and run_text(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"]):
        rev += " + uncommitted changes"
    return rev or "?"


def environment(bench, argv):
    torch = bench.torch
    try:
        from torch.nn.attention import current_flash_attention_impl
        impl = current_flash_attention_impl() or "FA2 (PyTorch's built-in flash backend)"
    except ImportError:
        impl = "FA2 (PyTorch's built-in flash backend)"
    env = device_environment(torch)
    env.update({
        "cudnn": str(torch.backends.cudnn.version()),
        "flash_impl": impl,
        "fa3": bench.hopper_version.get("fa3") or bench.hopper_error.get("fa3", "?"),
        "fa4": bench.hopper_version.get("fa4") or bench.hopper_error.get("fa4", "?"),
        "fajit": f"{fajit.__version__} ({bench.lib_path})",
        "fajit_git": git_revision(),
        "command": shlex.join(["python3"] + argv),
    })
    return env


def peer_env(torch, fajit, argv, **extra):
    """The header every side-by-side script (fp8_compare.py, variants_compare.py) prints first and stores in
    its JSON: GPU, torch, driver, fajit, date, command, then the script's own entries (peers, inputs)."""
    env = {"gpu": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
           "driver": driver_version_number(), "fajit": fajit.__version__}
    env.update(extra)
    env.update({"date": time.strftime("%Y-%m-%d"), "command": " ".join([sys.argv[0]] + (argv or sys.argv[1:]))})
    for k, v in env.items():
        log(f"{k}: {v}")
    return env


def run_guarded(bench, label, fn):
    """fn() for one case; an exception is logged and counted (None back) unless the GPU context is gone
    (bench.alive() false), which ends the run."""
    try:
        return fn()
    except Exception as e:
        if not bench.alive():
            raise
        log(f"  !!! {label}: {type(e).__name__}: {str(e)[:300]}")
        return None


def write_report(out, stem, env, rows, text, suffix=""):
    """Markdown and JSON of a side-by-side run into directory out as <stem>-<gpu slug><suffix>.md/.json."""
    if not out:
        return
    import json
    os.makedirs(out, exist_ok=True)
    slug = stem + "-" + env["gpu"].lower().replace(" ", "-") + suffix
    with open(os.path.join(out, slug + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, slug + ".json"), "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1, default=str)


def run_settings(a, sets, seconds):
    """The method's numbers, as the report states them and the .json keeps them."""
    return {"tokens": TOKENS, "hidden": HIDDEN, "reps": a.reps, "warmup": a.warmup, "settle": a.settle, "settle_ms": a.settle_ms, "queue_ahead": True, "rounds": ROUNDS, "sets": sets,
            "rotate_bytes": ROTATE_BYTES, "tolerance": TOL, "ref_rows": REF_ROWS, "quick": a.quick,
            "config_from_tune": a.config_from_tune, "seconds": round(seconds, 1)}


# ---- self-test of the writers ----------------------------------------------------------------------------
def fake_rows(grid, seed=0):
    """Rows shaped like measured ones, with made-up numbers, one of each kind of trouble."""
    rng = random.Random(seed)
    rows = []
    for s in grid:
        r = dict(s)
        flops = 4.0 * s["B"] * s["H"] * s["N"] ** 2 * s["D"] * (0.5 if s["causal"] else 1.0)
        r["gflop"] = flops / 1e9
        base = {"fajit": 600, "fajit80": 330, "fa2": 310, "cudnn": 520, "fa3": 640, "fa4": 650}
        for name in SYSTEMS:
            tf = base[name] * (0.75 + 0.25 * min(1, s["N"] / 4096)) * (0.85 if s["causal"] else 1) * rng.uniform(.95, 1.05)
            r[name + "_ms"] = flops / tf / 1e9
            r[name] = tf
        r["config"] = f"sm_80 {s['dtype']} d{s['D']} br{128 if s['D'] < 256 else 64} bc64 s2 sw128 w{8 if s['D'] == 128 else 4} " \
                      f"{'causal' if s['causal'] else 'noncausal'}"
        r["config_source"], r["regs"], r["smem"], r["spill"] = "heuristic", 255, 65536, 0
        r["err_fa2"], r["err_ref"], r["err_cudnn"] = 3e-3 * rng.uniform(.5, 1), 2.9e-3, 3.1e-3
        r["err_fa2_ref"], r["err_cudnn_ref"], r["err_fa3_ref"], r["err_fa4_ref"] = 2.8e-3, 2.8e-3, 2.9e-3, 2.9e-3
        r["check"] = "ok"
        r["times"] = {n: [r[n + "_ms"]] * 3 for n in SYSTEMS}
        rows.append(r)
    rows[1]["cudnn"] = rows[1]["cudnn_ms"] = None
    rows[1]["cudnn_error"] = "RuntimeError: No available kernel. Aborting execution.; cuDNN attention ... (fake)"
    rows[2]["check"], rows[2]["err_fa2"] = "FAIL", float("nan")
    rows[3]["fajit"] = rows[3]["fajit_ms"] = None
    rows[3]["fajit_error"] = "FAJIT_ERR_INVALID_CONFIG: smem ... (fake)"
    return rows


def selftest_writers(a):
    out_dir = a.out or tempfile.mkdtemp(prefix="fajit-compare-selftest-")
    grid = build_grid(a)
    rows = fake_rows(grid)
    env = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
           "gpu": "NVIDIA H100 80GB HBM3 (fake numbers)", "driver": "?", "cuda": "?", "torch": "?",
           "cudnn": "?", "fajit": "selftest", "command": shlex.join(["python3"] + sys.argv)}
    settings = run_settings(a, 3, 0.0)
    settings["selftest"] = True
    configs = []
    for r in rows:
        if r.get("config") and r["config"] not in [c["config"] for c in configs]:
            configs.append({"config": r["config"], "source": "heuristic", "registers": 255, "smem_bytes": 65536,
                            "threads": 256, "spill_bytes": 0, "cubin_bytes": 40000, "kernel_get_ms": 3.1,
                            "kernel_from": "compiled", "shapes": 1})
    paths = write_outputs(out_dir, env, settings, rows, configs, a.quick)
    print_table(rows, settings["tolerance"])
    # checks: every file there, the numbers round-trip, the config file reader accepts our own json
    assert set(paths) == {"md", "png", "csv", "json"}, f"missing outputs: {paths}"
    with open(paths["csv"]) as f:
        got = list(csv.DictReader(f))
    assert len(got) == len(rows) and float(got[0]["fajit"]) == rows[0]["fajit"], "csv does not round-trip"
    with open(paths["json"]) as f:
        js = json.load(f)
    assert len(js["rows"]) == len(rows) and js["rows"][2]["err_fa2"] is None, "json does not round-trip"
    md = open(paths["md"]).read()
    assert md.count("\n| ") >= len(rows) + 2 and "FAILED the check" in md and "n/a: RuntimeError" in md
    with open(paths["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    table = load_config_file(paths["json"])
    cfg = pick_config(table, rows[0])[0]
    assert cfg is not None and cfg.head_dim == rows[0]["D"] and bool(cfg.causal) == rows[0]["causal"]
    extra = os.path.join(out_dir, "tune-selftest.json")
    with open(extra, "w") as f:
        json.dump([{"config": "sm_80 f16 d64 br64 bc64 s2 sw128 w4 causal"},
                   {"config": "sm_80 f16 d64 br128 bc64 s3 sw128 w4 causal", "N": 1024}], f)
    t2 = load_config_file(extra)
    os.remove(extra)
    s = {"dtype": "f16", "D": 64, "causal": True}
    assert pick_config(t2, dict(s, N=1024))[0].block_m == 128 and pick_config(t2, dict(s, N=512))[0].block_m == 64
    assert pick_config(t2, dict(s, causal=False, N=512))[0] is None
    tune = os.path.join(out_dir, "tuned-selftest.txt")
    with open(tune, "w") as f:
        f.write("# fajit tuned kernels (format 1)\n"
                "NVIDIA H100 80GB HBM3 | 13000 | fajit-codegen-1 | bf16 d128 causal n4096 | "
                "sm_80 bf16 d128 br128 bc64 s3 sw128 w8 causal | 312.4 | B4 H16/16 N4096/4096\n"
                "NVIDIA H100 80GB HBM3 | 12080 | fajit-codegen-1 | bf16 d128 causal n4096 | "
                "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal | 300 | older driver\n"
                "NVIDIA H100 80GB HBM3 | 13000 | fajit-codegen-1 | bf16 d128 causal n4096 | not a config | 1 | x\n"
                "NVIDIA H100 80GB HBM3 | 13000 | fajit-codegen-1 | bf16 d64 causal n4096 | "
                "sm_80 bf16 d128 br64 bc64 s2 sw128 w4 causal | 300 | class and config disagree\n"
                "NVIDIA A100 | 13000 | fajit-codegen-1 | f16 d64 noncausal n128 | "
                "sm_80 f16 d64 br64 bc64 s2 sw128 w4 noncausal | 200 | other gpu\n")
    t3 = load_config_file(tune)
    os.remove(tune)
    assert len(t3) == 3, t3
    s = {"dtype": "bf16", "D": 128, "causal": True}
    cfg, src = pick_config(t3, dict(s, N=3000), "NVIDIA H100 80GB HBM3", 13000)
    assert cfg.block_m == 128 and cfg.stages == 3 and "n4096" in src, src
    assert pick_config(t3, dict(s, N=3000), "NVIDIA H100 80GB HBM3", 12080)[0].block_m == 64
    assert pick_config(t3, dict(s, N=8192), "NVIDIA H100 80GB HBM3", 13000)[0] is None
    assert pick_config(t3, {"dtype": "f16", "D": 64, "causal": False, "N": 64}, "NVIDIA H100 80GB HBM3")[0] is None
    assert pick_config(t3, {"dtype": "f16", "D": 64, "causal": False, "N": 64}, "NVIDIA A100")[0] is not None
    assert seqlen_class(512) == 512 and seqlen_class(513) == 1024 and seqlen_class(65536) == 16384 \
        and seqlen_class(1) == 128
    log(f"\nselftest-writers ok: {len(rows)} fake rows; config files (JSON and tune file) read as expected")
    for k, p in paths.items():
        log(f"  {k:4} {p} ({os.path.getsize(p)} bytes)")
    return 0


# ---- main ------------------------------------------------------------------------------------------------
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    a = parse_args(argv)
    load_fajit(a.lib)
    grid = build_grid(a)
    if not grid:
        log("compare.py: no shape left to run (the --quick shapes and the grid options exclude each other)")
        return 2
    if a.selftest_writers:
        return selftest_writers(a)
    try:
        table = load_config_file(a.config_from_tune) if a.config_from_tune else None
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        log(f"compare.py: --config-from-tune: {e}")
        return 2
    t_start = time.perf_counter()
    bench = Bench(a, grid, table)
    if table is not None:  # every config in the file must pass the library's check before anything runs
        for e in table:
            try:
                fajit.config(e["cfg"])
            except fajit.FajitError as err:
                log(f"compare.py: --config-from-tune {a.config_from_tune}: {e['cfg'].text}: {err}")
                bench.close()
                return 2
        used = sum(1 for sh in grid if pick_config(table, sh, bench.gpu, bench.driver)[0] is not None)
        log(f"configs from {a.config_from_tune}: {len(table)} entries; {used} of {len(grid)} shapes use one, "
            "the others the heuristic")
        if not used:
            log(f"  !!! no entry fits any shape on this GPU ({bench.gpu}): the run is the heuristic's")
    env = environment(bench, [sys.argv[0]] + argv)
    for k, v in env.items():
        log(f"{k}: {v}")
    log(f"{len(grid)} shapes; reps {a.reps}, warm-up {a.warmup}, {ROUNDS} rounds, each window after >= {a.settle} calls and >= {a.settle_ms:g} ms of the same system")
    bench.gpu_warmup()
    rows, aborted = [], None
    for i, shape in enumerate(grid):
        t0 = time.perf_counter()
        where = (f"{shape['dtype']} D={shape['D']} N={shape['N']} B={shape['B']} H={shape['H']} "
                 f"{'causal' if shape['causal'] else 'noncausal'}")
        log(f"[{i + 1:2}/{len(grid)}] {where}")
        try:
            r = bench.measure(shape)
        except Exception as e:  # the CUDA context is broken: nothing more can run in this process
            aborted = f"at {where}: {type(e).__name__}: {str(e)[:300]} (CUDA context lost; later shapes not run)"
            log("  !!! " + aborted)
            rows.append(dict(shape, fajit_error=aborted))
            break
        rows.append(r)
        errs = f"err vs FA2 {fmt(r.get('err_fa2'), '.1e', '-')}, vs ref {fmt(r.get('err_ref'), '.1e', '-')}"
        log(f"  check {r.get('check', '-')} ({errs})  " + "  ".join(f"{LABEL[n]} {fmt(r.get(n), '.1f')}" for n in SYSTEMS)
            + f" TFLOP/s  fajit/best(FA3,FA4) {fmt(ratio(r, 'fajit', 'hopper'), '.2f', '-')}"
            f"  fajit/cuDNN {fmt(ratio(r, 'fajit', 'cudnn'), '.2f', '-')}  ({time.perf_counter() - t0:.1f} s)")
        for name in SYSTEMS:
            if name + "_error" in r and not (i and "not importable" in r[name + "_error"]):
                log(f"  {LABEL[name]} n/a: {r[name + '_error']}")
    sets = len(bench.flat[2]) if bench.flat else 0
    configs = list(bench.compiled.values())
    bench.close()
    settings = run_settings(a, sets, time.perf_counter() - t_start)
    print_table(rows, settings["tolerance"])
    if a.out:
        paths = write_outputs(a.out, env, settings, rows, configs, a.quick, aborted)
        for p in paths.values():
            log(f"wrote {p}")
    bad = [r for r in rows if r.get("check") != "ok" or "fajit_error" in r]
    log(f"\n{len(rows)} shapes in {settings['seconds']} s; fajit failed or did not run on {len(bad)}"
        + ("" if not bad else ": exit status 1"))
    return 1 if bad or aborted else 0


if __name__ == "__main__":
    sys.exit(main())
