"""compare_report.py - the writers of bench/compare.py: the markdown report, CSV, JSON, the PNG plot and
the table printed at the end. No torch and no GPU: they render rows (dicts, one per shape, as
compare.py's .json holds them) and the run's settings, so they can be tested on fake numbers
(compare.py --selftest-writers). matplotlib is imported only to draw the plot, with the Agg backend.
"""
import csv
import json
import math
import os
import re

# fajit = the library's own choice for the GPU (its best path: sm_90a on an H100); fajit80 = the sm_80 path
# forced (timed only where the default path is another); FA3 / FA4 when their wheels are importable
SYSTEMS = ("fajit", "fajit80", "fa2", "cudnn", "fa3", "fa4")
LABEL = {"fajit": "fajit", "fajit80": "fajit sm_80", "fa2": "FA2", "cudnn": "cuDNN", "fa3": "FA3", "fa4": "FA4"}
PEERS = ("fa2", "cudnn", "fa3", "fa4")
DTYPE_TITLE = {"bf16": "BF16", "f16": "FP16"}


def log(msg=""):
    print(msg, flush=True)


# ---- report ----------------------------------------------------------------------------------
def gpu_slug(name):
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "gpu"


def path_label(rows):
    """fajit's code-generation path(s) in the rows' configs, e.g. "sm80" (default when none ran)."""
    archs = sorted({r["config"].split()[0].replace("_", "") for r in rows if r.get("config")})
    return "-".join(archs) or "sm80"


def fmt(x, spec, none="n/a"):
    if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)):
        return format(x, spec)
    return "nan" if isinstance(x, float) else none


def ratio(r, a, b):
    if b == "hopper":
        best = max([r[p] for p in ("fa3", "fa4") if r.get(p)], default=None)
        return r[a] / best if r.get(a) and best else None
    return r[a] / r[b] if r.get(a) and r.get(b) else None


def hopper_best(r):
    """'FA3' or 'FA4': the faster of the two in this row, or None."""
    got = [(r[p], LABEL[p]) for p in ("fa3", "fa4") if r.get(p)]
    return max(got)[1] if got else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


TABLE_HEAD = ["D", "N", "B", "H", "causal", "fajit", "fajit sm_80", "FA2", "cuDNN", "FA3", "FA4", "fajit/best(FA3,FA4)",
              "fajit/cuDNN", "fajit/FA2", "MHz fajit, cuDNN, FA3, FA4", "err vs ref", "peers vs ref (FA2, cuDNN, FA3, FA4)",
              "check", "fajit config"]


def table_row(r):
    cfg = r.get("config") or "-"
    best = hopper_best(r)
    return [str(r["D"]), str(r["N"]), str(r["B"]), str(r["H"]), "y" if r["causal"] else "n",
            fmt(r.get("fajit"), ".1f", "error" if "fajit_error" in r else "n/a"), fmt(r.get("fajit80"), ".1f", "-"),
            fmt(r.get("fa2"), ".1f"), fmt(r.get("cudnn"), ".1f"), fmt(r.get("fa3"), ".1f"), fmt(r.get("fa4"), ".1f"),
            fmt(ratio(r, "fajit", "hopper"), ".2f", "-") + (f" ({best})" if best else ""),
            fmt(ratio(r, "fajit", "cudnn"), ".2f", "-"), fmt(ratio(r, "fajit", "fa2"), ".2f", "-"),
            ", ".join(fmt(r.get(n + "_mhz"), ".0f", "-") for n in ("fajit", "cudnn", "fa3", "fa4")),
            fmt(r.get("err_ref"), ".2e", "-"),
            ", ".join(fmt(r.get(f"err_{p}_ref"), ".1e", "-") for p in PEERS),
            r.get("check", "-"), cfg]


SUMMARY_PEERS = (("hopper", "best(FA3,FA4)"), ("cudnn", "cuDNN"), ("fa2", "FA2"), ("fajit80", "fajit sm_80"))


def summary_rows(rows, min_n=1024):
    """Per dtype and mask, over the shapes with N >= min_n: fajit / peer as geomean (min-max, count)."""
    out = []
    for dt in [d for d in ("bf16", "f16") if any(r["dtype"] == d for r in rows)]:
        for causal in (False, True):
            rs = [r for r in rows if r["dtype"] == dt and r["causal"] == causal and r["N"] >= min_n]
            if not rs:
                continue
            cells = [DTYPE_TITLE[dt], "y" if causal else "n", str(len(rs))]
            for peer, _ in SUMMARY_PEERS:
                xs = [ratio(r, "fajit", peer) for r in rs if ratio(r, "fajit", peer)]
                cells.append(f"{geomean(xs):.2f} ({min(xs):.2f}-{max(xs):.2f}, {len(xs)} shapes)" if xs else "-")
            out.append(cells)
    return out


def problems(rows, tol):
    lines = []
    for r in rows:
        where = f"{r['dtype']} D={r['D']} N={r['N']} {'causal' if r['causal'] else 'noncausal'}"
        if r.get("check") == "FAIL":
            lines.append(f"{where}: fajit FAILED the check (err vs FA2 {fmt(r.get('err_fa2'), '.3e', '-')}, "
                         f"vs ref {fmt(r.get('err_ref'), '.3e', '-')}; tolerance {tol[r['dtype']]:.0e})")
        for name in SYSTEMS:
            if name + "_error" in r:
                lines.append(f"{where}: {LABEL[name]} n/a: {r[name + '_error']}")
    return lines


def markdown(env, settings, rows, configs, png_name, aborted=None):
    gpu, st = env.get("gpu", "?"), settings
    path = path_label(rows)
    out = [f"# fajit ({path}) vs FlashAttention-2/3/4 and cuDNN: {gpu}", ""]
    out += [f"- {k}: {v}" for k, v in env.items()]
    out += [f"- settings: {json.dumps(settings)}", ""]
    out.append(
        f"Forward attention, BHND, Nq = Nk, Hq = Hkv, B*N = {st['tokens']} tokens, H*D = {st['hidden']}. "
        "TFLOP/s = 4*B*H*N*N*D / t (x0.5 causal); t = median of "
        f"{st['reps']} calls each timed with CUDA events, after {st['warmup']} warm-up calls, in "
        f"{st['rounds']} interleaved rounds, each timed window preceded by >= {st.get('settle', 0)} untimed calls and "
        f">= {st.get('settle_ms', 0):g} ms of the same system (clocks settle to its power draw){' and a spin kernel covering the window' + chr(39) + 's enqueue time (events time GPU work only)' if st.get('queue_ahead') else ''}; inputs rotated over {st['sets']} Q/K/V sets "
        f"(>= {st['rotate_bytes'] >> 20} MB). fajit = the library's choice for this GPU (heuristic or tuned, its "
        "best path), fajit sm_80 = the sm_80 path forced; FA2 = SDPA flash backend, cuDNN = SDPA cuDNN backend, "
        "FA3 = the fa3-fwd wheel, FA4 = the flash-attn-4 wheel (CuTe DSL, its sm90 kernel), FA3 and FA4 on [B, N, H, "
        "D] copies of the same inputs, same process. 'err vs FA2' = ||O_fajit - O_FA2|| / ||O_FA2|| over the whole "
        "output; 'err vs ref' = the "
        f"same against a float32 SDPA math reference on a slice (batch 0, first and last head, {st['ref_rows']} query "
        f"rows), with the peers' own errors against it for scale; check = fajit's two errors <= "
        f"{st['tolerance']['bf16']:.0e} (bf16) / {st['tolerance']['f16']:.0e} (f16). fajit writes no LSE; the peers compute it.")
    out.append("")
    if aborted:
        out += [f"**Run aborted:** {aborted}", ""]
    fails = [r for r in rows if r.get("check") == "FAIL" or "fajit_error" in r]
    if fails:
        out += [f"**{len(fails)} shape(s) where fajit failed the check or did not run: see below.**", ""]
    out += ["## Summary: fajit / peer over the shapes with N >= 1024, geometric mean (min-max)", "",
            "| dtype | causal | shapes | " + " | ".join("fajit/" + label for _, label in SUMMARY_PEERS) + " |",
            "|---|---|---|" + "---|" * len(SUMMARY_PEERS)]
    out += ["| " + " | ".join(c) + " |" for c in summary_rows(rows)]
    out.append("")
    if png_name:
        out += [f"![TFLOP/s vs N]({png_name})", ""]
    for dt in [d for d in ("bf16", "f16") if any(r["dtype"] == d for r in rows)]:
        out += [f"## {DTYPE_TITLE[dt]} (TFLOP/s)", "", "| " + " | ".join(TABLE_HEAD) + " |",
                "|" + "---|" * len(TABLE_HEAD)]
        out += ["| " + " | ".join(table_row(r)) + " |" for r in rows if r["dtype"] == dt]
        out.append("")
    probs = problems(rows, settings["tolerance"])
    if probs:
        out += ["## Not available, errors and failed checks", ""] + [f"- {p}" for p in probs] + [""]
    out += ["## fajit configs used", "",
            "| config | from | registers | smem B | threads | spill B | cubin B | first kernel_get ms | shapes |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in configs:
        out.append(f"| {c['config']} | {c['source']} | {c['registers']} | {c['smem_bytes']} | {c['threads']} | "
                   f"{c['spill_bytes']} | {c['cubin_bytes']} | {c['kernel_get_ms']} ({c['kernel_from']}) | "
                   f"{c['shapes']} |")
    out.append("")
    return "\n".join(out)


CSV_FIELDS = (["dtype", "D", "N", "B", "H", "causal", "gflop"] + list(SYSTEMS) + [n + "_ms" for n in SYSTEMS]
              + [n + "_mhz" for n in SYSTEMS] + [n + "_watts" for n in SYSTEMS]
              + ["fajit_over_best_fa3_fa4", "fajit_over_cudnn", "fajit_over_fa2", "err_fa2", "err_cudnn", "err_ref"]
              + [f"err_{p}_ref" for p in PEERS] + ["check", "config", "config_source", "config80", "regs", "smem",
                                                  "spill", "last_forward"] + [n + "_error" for n in SYSTEMS])


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            d = dict(r, fajit_over_fa2=ratio(r, "fajit", "fa2"), fajit_over_cudnn=ratio(r, "fajit", "cudnn"),
                     fajit_over_best_fa3_fa4=ratio(r, "fajit", "hopper"))
            w.writerow({k: ("" if d.get(k) is None else d[k]) for k in CSV_FIELDS})


def json_safe(x):
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def write_json(path, env, settings, rows, configs, aborted):
    with open(path, "w") as f:
        json.dump(json_safe({"env": env, "settings": settings, "aborted": aborted, "configs": configs,
                             "rows": rows}), f, indent=1)
        f.write("\n")


def write_png(path, env, settings, rows):
    """TFLOP/s vs N: a row of panels per dtype, a panel per head dim; colour = system, dashed = causal."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    dts = [d for d in ("bf16", "f16") if any(r["dtype"] == d for r in rows)]
    dims = sorted({r["D"] for r in rows})
    colors = {"fajit": "tab:blue", "fajit80": "tab:cyan", "fa2": "tab:orange", "cudnn": "tab:green", "fa3": "tab:red",
              "fa4": "tab:purple"}
    shown = [s for s in SYSTEMS if any(r.get(s) for r in rows)]
    fig, axes = plt.subplots(len(dts), len(dims), figsize=(4.6 * len(dims), 3.8 * len(dts)), squeeze=False,
                             sharey=True)
    ymax = max([r[s] for r in rows for s in SYSTEMS if r.get(s)] + [1.0])
    for i, dt in enumerate(dts):
        for j, d in enumerate(dims):
            ax = axes[i][j]
            ns = sorted({r["N"] for r in rows if r["dtype"] == dt and r["D"] == d})
            for causal in (False, True):
                rs = sorted((r for r in rows if r["dtype"] == dt and r["D"] == d and r["causal"] == causal),
                            key=lambda r: r["N"])
                for s in shown:
                    pts = [(r["N"], r[s]) for r in rs if r.get(s)]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[s],
                                linestyle="--" if causal else "-", marker="o", markersize=3.5,
                                linewidth=1.6 if s == "fajit" else 1.2)
            ax.set_xscale("log", base=2)
            if ns:
                ax.set_xticks(ns)
                ax.set_xticklabels([f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n) for n in ns])
            ax.set_ylim(0, ymax * 1.08)
            ax.grid(True, alpha=0.3)
            ax.set_title(f"{DTYPE_TITLE[dt]}, D = {d}", fontsize=10)
            if i == len(dts) - 1:
                ax.set_xlabel(f"N (B = {settings['tokens']} / N, H = {settings['hidden']} / D)")
            if j == 0:
                ax.set_ylabel("TFLOP/s")
    handles = [Line2D([], [], color=colors[s], marker="o", label=LABEL[s] + (" (SDPA flash)" if s == "fa2" else
                                                                            " (SDPA cuDNN)" if s == "cudnn" else ""))
               for s in shown]
    handles += [Line2D([], [], color="gray", linestyle="-", label="non-causal"),
                Line2D([], [], color="gray", linestyle="--", label="causal")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), frameon=False, fontsize=9)
    fig.suptitle(f"fajit ({path_label(rows)}) forward vs FA2/3/4 and cuDNN: {env.get('gpu', '?')}, {env.get('date', '')}",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(out_dir, env, settings, rows, configs, quick, aborted=None):
    """Write the .md, .png, .csv and .json; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{gpu_slug(env.get('gpu', 'gpu'))}-{path_label(rows)}" + ("-quick" if quick else ""))
    paths = {"json": base + ".json", "csv": base + ".csv", "png": base + ".png", "md": base + ".md"}
    write_json(paths["json"], env, settings, rows, configs, aborted)
    write_csv(paths["csv"], rows)
    png = None
    try:
        write_png(paths["png"], env, settings, rows)
        png = os.path.basename(paths["png"])
    except Exception as e:  # no matplotlib: the numbers matter more than the picture
        log(f"plot not written: {e!r}")
        del paths["png"]
    with open(paths["md"], "w") as f:
        f.write(markdown(env, settings, rows, configs, png, aborted))
    return paths


def print_table(rows, tol):
    for dt in [d for d in ("bf16", "f16") if any(r["dtype"] == d for r in rows)]:
        body = [table_row(r) for r in rows if r["dtype"] == dt]
        widths = [max(len(TABLE_HEAD[i]), *(len(b[i]) for b in body)) for i in range(len(TABLE_HEAD))]
        log(f"\n{DTYPE_TITLE[dt]} (TFLOP/s)")
        log("  ".join(h.ljust(w) for h, w in zip(TABLE_HEAD, widths)))
        for b in body:
            log("  ".join(c.ljust(w) for c, w in zip(b, widths)))
    summ = summary_rows(rows)
    if summ:
        log("\nfajit / peer over N >= 1024, geometric mean (min-max)")
        for c in summ:
            log(f"  {c[0]:5} causal={c[1]}  " + "   ".join(f"fajit/{label} {c[3 + i]}"
                                                          for i, (_, label) in enumerate(SUMMARY_PEERS)))
    for p in problems(rows, tol):
        log("  " + p)
