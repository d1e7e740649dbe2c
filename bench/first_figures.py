"""first_figures.py - fajit's first figures next to PyTorch SDPA (FlashAttention-2 and cuDNN backends).

Shapes (as in shared/bench/sdpa_peers.py): BF16 forward, D in {64, 128, 256}, N in {4096, 16384},
B*N = 16384 tokens, H*D = 2048, causal and not. For each shape, in the same process and on the same
inputs: fajit's output is first compared with SDPA flash (relative L2 error), then fajit, SDPA flash
(FlashAttention-2) and SDPA cuDNN are timed the same way: warm-up calls, then `--reps` calls each
between two CUDA events, median reported (as triton.testing.do_bench does), with the inputs rotated
over enough Q/K/V/O sets to span 256 MB (5x the H100's 50 MB L2) instead of do_bench's L2 flush.
TFLOP/s = 4*B*H*N*N*D / t, halved for causal. fajit's config is the library heuristic's choice for
the shape (printed), compiled into a fresh cache directory, so "first call" is a cold compile + run.
Latencies (PTX generation, cold compile, disk-cache and memory-cache hits) come from
`fagen bench --latency` when the fagen binary is found, else from the library directly.

Usage (on the GPU machine, from the repository root, after building into ./build):
    python3 bench/first_figures.py --out bench/results/first_figures.md
    python3 bench/first_figures.py --lib build/libfajit.so --fagen build/tools/fagen/fagen --reps 50 --out f.md
"""
import argparse
import ctypes
import datetime
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fajit_ctypes import DTYPE_BF16, Config, Fajit, FajitError, find_library  # noqa: E402

ROTATE_BYTES = 256 * 1024 * 1024
MATCH_TOL = 2e-2  # rel L2 of fajit vs SDPA flash, both bf16 outputs: above this the row is flagged


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", help="path of libfajit.so (default: $FAJIT_LIB or build/libfajit.so)")
    p.add_argument("--fagen", help="path of the fagen binary for the latency table (default: build/tools/fagen/fagen)")
    p.add_argument("--out", help="write the markdown report here")
    p.add_argument("--reps", type=int, default=30, help="timed calls per measurement (>= 20)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first")
    p.add_argument("--dims", default="64,128,256", help="head dims")
    p.add_argument("--seqlens", default="4096,16384", help="sequence lengths (B = 16384 / N)")
    for f in ("br", "bc", "stages", "swizzle", "warps"):
        p.add_argument("--" + f, type=int, default=0, help="fajit config field (0 = heuristic)")
    a = p.parse_args()
    if a.reps < 20:
        p.error("--reps must be >= 20")
    return a


# ---- timing -----------------------------------------------------------------------------------------
def bench(calls, warmup, reps):
    """Median ms of calls[i % len(calls)](), each timed between two CUDA events on the current stream."""
    for i in range(warmup):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        start[i].record()
        calls[(warmup + i) % len(calls)]()
        end[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(start, end))


def make_sets(b, h, n, d):
    """Enough (q, k, v, o) sets, BHND bf16 N(0,1), to span ROTATE_BYTES."""
    set_bytes = 4 * b * h * n * d * 2
    count = max(2, math.ceil(ROTATE_BYTES / set_bytes))
    sets = []
    for _ in range(count):
        q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
        sets.append((q, torch.randn_like(q), torch.randn_like(q), torch.empty_like(q)))
    return sets


def rel_err(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm()).item()


# ---- one shape ----------------------------------------------------------------------------------------
def sdpa_call(backend, q, k, v, causal):
    """One SDPA call restricted to `backend` (for the correctness comparison)."""
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def measure_sdpa(backend, sets, causal, a):
    """Median ms of one SDPA backend over the rotated sets, or None (with the reason) if it cannot run."""
    try:
        with sdpa_kernel([backend]):
            calls = [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                     for q, k, v, _ in sets]
            calls[0]()
            return bench(calls, a.warmup, a.reps), ""
    except Exception as e:  # the backend refuses this shape on this GPU
        return None, repr(e)[:120]


def measure_shape(fa, d, n, causal, a):
    b, h = max(1, 16384 // n), 2048 // d
    row = {"D": d, "N": n, "B": b, "H": h, "causal": causal}
    flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
    sets = make_sets(b, h, n, d)
    cfg = Config(dtype=DTYPE_BF16, head_dim=d, causal=int(causal), block_m=a.br, block_n=a.bc, stages=a.stages,
                 swizzle=a.swizzle, warps=a.warps)
    try:
        fa.config_fill(cfg, (b, h, h, n, n))
        row["config"] = fa.config_text(cfg)
        args = [fa.make_args(q, k, v, o, causal=causal) for q, k, v, o in sets]
        t0 = time.perf_counter()
        fa.forward_args(args[0], cfg)
        torch.cuda.synchronize()
        row["first_call_ms"] = (time.perf_counter() - t0) * 1e3
        info, _ = fa.kernel(cfg)
        row["regs"], row["smem"], row["spill"] = info.registers, info.smem_bytes, info.spill_bytes
        q, k, v, o = sets[0]
        try:
            row["err_fa2"] = rel_err(o, sdpa_call(SDPBackend.FLASH_ATTENTION, q, k, v, causal))
        except RuntimeError as e:
            row["err_error"] = "comparison with SDPA flash failed: " + repr(e)[:120]
        row["fajit_ms"] = bench([lambda x=x: fa.forward_args(x, cfg) for x in args], a.warmup, a.reps)
    except (FajitError, RuntimeError) as e:  # RuntimeError: torch saw a CUDA error after fajit's kernel
        row["config"] = row.get("config", "?")
        row["fajit_error"] = str(e)[:200]
    for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        row[name + "_ms"], why = measure_sdpa(backend, sets, causal, a)
        if why:
            row[name + "_error"] = why
    for name in ("fajit", "fa2", "cudnn"):
        ms = row.get(name + "_ms")
        row[name] = round(flops / ms / 1e9, 1) if ms else None
    del sets
    torch.cuda.empty_cache()
    return row


# ---- environment and latency ---------------------------------------------------------------------
def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        return f"CUDA driver API {v.value // 1000}.{v.value % 1000 // 10}"
    except OSError:
        return "?"


def environment(fa, lib_path):
    p = torch.cuda.get_device_properties(0)
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "gpu": f"{p.name} ({p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB), {fa.sm}",
        "driver": driver_version(),
        "cuda": f"torch built with CUDA {torch.version.cuda}",
        "torch": torch.__version__,
        "cudnn": str(torch.backends.cudnn.version()),
        "fajit": f"{fa.version} ({lib_path})",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }


def latency_fagen(fagen):
    out = subprocess.run([fagen, "bench", "--latency", "--headdim", "128"], capture_output=True, text=True, timeout=600)
    return f"$ {fagen} bench --latency --headdim 128\n" + out.stdout + out.stderr


def latency_direct(lib_path):
    """The same steps as fagen bench --latency, through the library (nvJitLink may already be loaded)."""
    lines = []
    dirs = [tempfile.mkdtemp(prefix="fajit-lat-") for _ in range(2)]
    try:
        with Fajit(lib_path, disk_cache=1, cache_dir=dirs[0]) as fa:
            cfg = fa.config_fill(Config(dtype=DTYPE_BF16, head_dim=128))
            lines.append(f"latency of {fa.config_text(cfg)} (library calls from Python)")
            t0 = time.perf_counter()
            fa.generate_ptx(cfg)
            lines.append(f"  PTX generation           {(time.perf_counter() - t0) * 1e3:9.3f} ms")
        fa_b = Fajit(lib_path, disk_cache=1, cache_dir=dirs[1])
        for label, ctx in (("cold compile", fa_b), ("memory-cache hit", fa_b)):
            t0 = time.perf_counter()
            _, src = ctx.kernel(cfg)
            lines.append(f"  {label:24} {(time.perf_counter() - t0) * 1e3:9.3f} ms  ({src})")
        fa_b.close()
        with Fajit(lib_path, disk_cache=1, cache_dir=dirs[1]) as fa_c:
            t0 = time.perf_counter()
            _, src = fa_c.kernel(cfg)
            lines.append(f"  {'disk-cache hit':24} {(time.perf_counter() - t0) * 1e3:9.3f} ms  ({src})")
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    return "\n".join(lines) + "\n"


def latency(a, lib_path):
    fagen = a.fagen or os.path.join(os.path.dirname(lib_path), "tools", "fagen", "fagen")
    try:
        if os.access(fagen, os.X_OK):
            return latency_fagen(fagen)
        return latency_direct(lib_path)
    except (OSError, subprocess.SubprocessError, FajitError) as e:
        return f"latency measurement failed: {e}\n"


# ---- report -------------------------------------------------------------------------------------------
HEADER = ["D", "N", "B", "H", "causal", "fajit config", "err vs FA2", "first call ms", "fajit", "FA2", "cuDNN",
          "fajit/FA2", "fajit/cuDNN"]


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def table_rows(rows):
    out = []
    for r in rows:
        err = r.get("err_fa2")
        flag = "" if err is None or err <= MATCH_TOL else " MISMATCH"
        out.append([str(r["D"]), str(r["N"]), str(r["B"]), str(r["H"]), "y" if r["causal"] else "n",
                    r.get("config", "?") if "fajit_error" not in r else "error: " + r["fajit_error"],
                    fmt(err, ".2e") + flag, fmt(r.get("first_call_ms"), ".0f"),
                    fmt(r["fajit"], ".1f"), fmt(r["fa2"], ".1f"), fmt(r["cudnn"], ".1f"),
                    fmt(r["fajit"] / r["fa2"], ".2f") if r["fajit"] and r["fa2"] else "-",
                    fmt(r["fajit"] / r["cudnn"], ".2f") if r["fajit"] and r["cudnn"] else "-"])
    return out


def markdown(env, rows, lat, a):
    lines = [f"# fajit first figures: {env['gpu'].split(' (')[0]}", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "BF16 forward, B*N = 16384 tokens, H*D = 2048, BHND. TFLOP/s = 4*B*H*N*N*D / t (x0.5 causal); "
              f"median of {a.reps} calls after {a.warmup} warm-up calls, CUDA events, inputs rotated over sets "
              "spanning 256 MB. FA2 = SDPA flash backend, cuDNN = SDPA cuDNN backend, same process and inputs. "
              "'err vs FA2' = ||O_fajit - O_FA2|| / ||O_FA2||; 'first call' = cold compile + first run.", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(rows)]
    errors = [f"- D={r['D']} N={r['N']} causal={r['causal']} {k}: {r[k]}" for r in rows for k in
              ("fajit_error", "err_error", "fa2_error", "cudnn_error") if k in r]
    if errors:
        lines += ["", "Errors:", ""] + errors
    lines += ["", "## Latency of getting a kernel", "", "```", lat.rstrip(), "```", ""]
    return "\n".join(lines)


def print_table(rows):
    body = table_rows(rows)
    widths = [max(len(HEADER[i]), *(len(r[i]) for r in body)) for i in range(len(HEADER))]
    print("  ".join(h.ljust(w) for h, w in zip(HEADER, widths)))
    for r in body:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def main():
    a = parse_args()
    lib_path = find_library(a.lib)
    torch.manual_seed(0)
    torch.cuda.init()
    lat = latency(a, lib_path)  # first, so a fagen subprocess or this process loads nvJitLink cold
    print(lat)
    cache = tempfile.mkdtemp(prefix="fajit-figures-")
    fa = Fajit(lib_path, disk_cache=1, cache_dir=cache)
    env = environment(fa, lib_path)
    for k, v in env.items():
        print(f"{k}: {v}")
    rows = []
    for d in (int(x) for x in a.dims.split(",")):
        for n in (int(x) for x in a.seqlens.split(",")):
            for causal in (False, True):
                try:
                    rows.append(measure_shape(fa, d, n, causal, a))
                except Exception as e:  # a CUDA error poisons the context: report what we have
                    rows.append({"D": d, "N": n, "B": 0, "H": 0, "causal": causal, "fajit": None, "fa2": None,
                                 "cudnn": None, "fajit_error": "aborted: " + repr(e)[:200]})
                    print(rows[-1]["fajit_error"], flush=True)
                    break
                r = rows[-1]
                print(f"D={d} N={n} causal={causal}: fajit {r['fajit']} FA2 {r['fa2']} cuDNN {r['cudnn']} TFLOP/s"
                      f" err {r.get('err_fa2')} {r.get('fajit_error', '')}", flush=True)
    fa.close()
    shutil.rmtree(cache, ignore_errors=True)
    print()
    print_table(rows)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(markdown(env, rows, lat, a))
        print("wrote", a.out)
    bad = [r for r in rows if "fajit_error" in r or (r.get("err_fa2") or 0) > MATCH_TOL]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
