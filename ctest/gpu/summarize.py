#!/usr/bin/env python3
"""Write the device check's results from its state directory into OUT.

    summarize.py STATE OUT --status STATUS [--exit-code N]

Reads (all optional, so a run cut short at any point still summarizes):
  STATE/env.txt          key=value lines (GPU, driver, nvcc, torch, commit, mode, arch)
  STATE/phases.tsv       name<TAB>status<TAB>seconds<TAB>detail, one line per phase
  STATE/correctness.json the runner's report (rewritten after every case group)
  STATE/pytest-gpu.json  {"status": ..., "detail": ...} of the Python GPU tests
  STATE/bench_py/bench.json       python -m ffpa_attn.bench --save-path (binding present)
  STATE/bench_py_causal/bench.json
  STATE/bench_cpp.csv    the runner's own timings (no binding: no Python.h)
  STATE/sdpa.csv         torch SDPA timed by sdpa_bench.py in a separate process
Writes, atomically: OUT/summary.json, OUT/summary.md, OUT/bench.csv and (with
matplotlib) OUT/bench.png. Standard library only besides the optional plot: a bare
GPU image's python3 is enough.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

# Performance targets (spec/kernels.md, issue "GPU truth"): fp16, N = 8192, non-causal.
TARGETS = [
    {"dims": (320, 512), "min_ratio": 1.5, "what": "D = 320/512 fp16 non-causal >= 1.5x SDPA"},
    {"dims": (64, 128), "min_ratio": 0.7, "what": "D = 64/128 fp16 non-causal >= 0.7x SDPA (flash backend)"},
]


def _atomic_write(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode) as handle:
        handle.write(data)
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_env(state: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    try:
        for line in (state / "env.txt").read_text(errors="replace").splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                env[key.strip()] = value.strip()
    except OSError:
        pass
    return env


def read_phases(state: Path) -> list[dict[str, Any]]:
    phases = []
    try:
        lines = (state / "phases.tsv").read_text(errors="replace").splitlines()
    except OSError:
        return phases
    for line in lines:
        parts = line.split("\t")
        if len(parts) >= 3:
            try:
                seconds: Any = int(parts[2])
            except ValueError:
                seconds = None
            phases.append({"phase": parts[0], "status": parts[1], "seconds": seconds,
                           "detail": parts[3] if len(parts) > 3 else ""})
    return phases


def summarize_correctness(report: Any) -> dict[str, Any]:
    if not isinstance(report, dict):
        return {"status": "not run"}
    cases = report.get("cases", [])
    groups: dict[str, dict[str, Any]] = {}
    failed = []
    for case in cases:
        g = groups.setdefault(case.get("group", "?"), {"cases": 0, "ran": 0, "failed": 0, "max_rel_err": None,
                                                         "max_abs_err": None, "max_lse_err": None})
        g["cases"] += 1
        if not case.get("ran"):
            continue
        g["ran"] += 1
        if not case.get("pass"):
            g["failed"] += 1
            failed.append({k: case.get(k) for k in ("case", "abs_err", "rel_err", "lse_err", "impl_used", "error")})
        for key in ("rel_err", "abs_err", "lse_err"):
            value = case.get(key)
            # null: not measured (the launch failed); the case is counted as failed.
            if isinstance(value, (int, float)):
                g["max_" + key] = max(g["max_" + key] or 0.0, float(value))
    return {
        "status": report.get("status"),
        "device": report.get("device"),
        "tolerances": report.get("tolerances"),
        "total": report.get("total"),
        "ran": report.get("ran"),
        "failed": report.get("failed"),
        "groups_done": report.get("groups_done"),
        "groups_total": report.get("groups_total"),
        "by_group": groups,
        "failed_cases": failed,
    }


def _rows_from_py_bench(path: Path) -> list[dict[str, Any]]:
    data = _read_json(path)
    rows = []
    for r in (data or {}).get("results", []):
        if r.get("direction") != "fwd":
            continue
        rows.append({"D": r["D"], "dtype": r["dtype"], "causal": bool(r["causal"]), "N": r["Nq"], "H": r["Hq"],
                     "kernel": r.get("impl"), "ffpa_ms": r["ffpa_ms"], "sdpa_ms": r.get("sdpa_ms"),
                     "ffpa_tflops": r["ffpa_tflops"], "sdpa_tflops": r.get("sdpa_tflops"),
                     "sdpa_backend": "default", "err_vs_sdpa": r.get("err"), "allclose": r.get("allclose"),
                     "source": "python -m ffpa_attn.bench (SDPA in the same process)"})
    return rows


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        return list(csv.DictReader(io.StringIO(path.read_text())))
    except OSError:
        return []


def _rows_from_cpp(state: Path) -> list[dict[str, Any]]:
    sdpa = {(int(r["D"]), r["dtype"], r["causal"] in ("1", "True", "true")): r for r in _read_csv(state / "sdpa.csv")}
    rows = []
    for r in _read_csv(state / "bench_cpp.csv"):
        key = (int(r["D"]), r["dtype"], r["causal"] in ("1", "True", "true"))
        s = sdpa.get(key, {})
        rows.append({"D": key[0], "dtype": key[1], "causal": key[2], "N": int(r["N"]), "H": int(r["H"]),
                     "kernel": r["kernel"], "ffpa_ms": float(r["ms"]),
                     "sdpa_ms": float(s["ms"]) if s.get("ms") else None, "ffpa_tflops": float(r["tflops"]),
                     "sdpa_tflops": float(s["tflops"]) if s.get("tflops") else None,
                     "sdpa_backend": s.get("backend"), "err_vs_sdpa": None, "allclose": None,
                     "source": "C++ runner (CUDA events); SDPA from a separate Python process"})
    return rows


def summarize_bench(state: Path) -> dict[str, Any]:
    rows = _rows_from_py_bench(state / "bench_py" / "bench.json")
    rows += _rows_from_py_bench(state / "bench_py_causal" / "bench.json")
    if not rows:
        rows = _rows_from_cpp(state)
    for r in rows:
        r["ratio"] = (r["ffpa_tflops"] / r["sdpa_tflops"]) if r.get("sdpa_tflops") else None
    rows.sort(key=lambda r: (r["dtype"], r["causal"], r["D"]))
    targets = []
    for t in TARGETS:
        for r in rows:
            if r["D"] in t["dims"] and r["dtype"] == "fp16" and not r["causal"]:
                ok = None if r["ratio"] is None else r["ratio"] >= t["min_ratio"]
                targets.append({"target": t["what"], "D": r["D"], "ratio": r["ratio"],
                                "result": {None: "n/a", True: "PASS", False: "MISS"}[ok]})
    return {"rows": rows, "targets": targets}


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def render_md(summary: dict[str, Any]) -> str:
    env = summary["env"]
    out = [f"# Device check: {summary['status']}", ""]
    out.append(f"- GPU: {env.get('gpu', 'n/a')} (arch {env.get('arch', 'n/a')}), driver {env.get('driver', 'n/a')}")
    out.append(f"- nvcc {env.get('nvcc', 'n/a')}, torch {env.get('torch', 'n/a')}, python {env.get('python', 'n/a')}")
    out.append(f"- commit {env.get('commit', 'n/a')}, mode {env.get('mode', 'n/a')}, binding {env.get('binding', 'n/a')}")
    out.append(f"- elapsed {summary.get('elapsed_s', 'n/a')} s, exit code {summary.get('exit_code', 'n/a')}")
    out += ["", "## Phases", "", "| phase | status | seconds | detail |", "|---|---|---|---|"]
    for p in summary["phases"]:
        out.append(f"| {p['phase']} | {p['status']} | {_fmt(p['seconds'])} | {p['detail']} |")
    c = summary["correctness"]
    out += ["", "## Correctness (errors vs the fp64-accumulated host reference)", ""]
    if c.get("tolerances"):
        tol = c["tolerances"]
        out.append("Tolerances: " + "; ".join(
            f"{dt}: rel {v['rel']:g}, abs {v['abs']:g}, lse {v['lse']:g}" for dt, v in tol.items()))
        out.append("rel = max |out - ref| / max |ref| per case; abs = max |out - ref|; lse = max |lse - ref|.")
        out.append("")
    out.append(f"Cases: {c.get('ran', 0)} run of {c.get('total', 'n/a')}, {c.get('failed', 'n/a')} failed; "
               f"groups {c.get('groups_done', 'n/a')}/{c.get('groups_total', 'n/a')} ({c.get('status')})")
    out += ["", "| group | cases | ran | failed | max rel | max abs | max lse |", "|---|---|---|---|---|---|---|"]
    for name, g in (c.get("by_group") or {}).items():
        out.append(f"| {name} | {g['cases']} | {g['ran']} | {g['failed']} | {_fmt(g['max_rel_err'])} | "
                   f"{_fmt(g['max_abs_err'])} | {_fmt(g['max_lse_err'])} |")
    for f in c.get("failed_cases") or []:
        out.append(f"- FAILED: {f['case']} rel={_fmt(f['rel_err'])} abs={_fmt(f['abs_err'])} "
                   f"lse={_fmt(f['lse_err'])} ran={f['impl_used']} {f.get('error') or ''}")
    py = summary.get("pytest_gpu") or {"status": "not run (no binding: " + env.get("binding", "n/a") + ")"}
    out += ["", f"Python GPU tests: {py.get('status')} {py.get('detail', '')}".rstrip()]
    b = summary["bench"]
    out += ["", "## Bench: TFLOPS against torch SDPA (B=1, H=32, N=8192)", ""]
    if b["rows"]:
        out.append(f"Source: {b['rows'][0]['source']}.")
        out += ["", "| D | dtype | causal | kernel | FFPA ms | SDPA ms | FFPA TFLOPS | SDPA TFLOPS | ratio |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in b["rows"]:
            out.append(f"| {r['D']} | {r['dtype']} | {r['causal']} | {r['kernel']} | {_fmt(r['ffpa_ms'], '.3f')} | "
                       f"{_fmt(r['sdpa_ms'], '.3f')} | {_fmt(r['ffpa_tflops'], '.1f')} | "
                       f"{_fmt(r['sdpa_tflops'], '.1f')} | {_fmt(r['ratio'], '.2f')} |")
        out += ["", "| target | D | ratio | result |", "|---|---|---|---|"]
        for t in b["targets"]:
            out.append(f"| {t['target']} | {t['D']} | {_fmt(t['ratio'], '.2f')} | {t['result']} |")
    else:
        out.append("No bench results.")
    return "\n".join(out) + "\n"


def write_bench_csv(rows: list[dict[str, Any]]) -> str:
    cols = ["D", "dtype", "causal", "N", "H", "kernel", "ffpa_ms", "sdpa_ms", "ffpa_tflops", "sdpa_tflops", "ratio",
            "sdpa_backend", "err_vs_sdpa", "allclose", "source"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for causal in (False, True):
        picked = [r for r in rows if r["causal"] == causal and r["dtype"] == "fp16"]
        if not picked:
            continue
        dims = [r["D"] for r in picked]
        label = "causal" if causal else "non-causal"
        ax.plot(dims, [r["ffpa_tflops"] for r in picked], marker="o", label=f"FFPA {label}")
        ax.plot(dims, [r["sdpa_tflops"] if r["sdpa_tflops"] is not None else float("nan") for r in picked],
                marker="s", linestyle="--", label=f"SDPA {label}")
    ax.set_xlabel("head dim D")
    ax.set_ylabel("TFLOPS (fp16, N = 8192)")
    ax.set_title("ffpa-attn vs torch SDPA")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--status", required=True)
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--elapsed", type=int, default=None)
    parser.add_argument("--plot", action="store_true", help="also draw OUT/bench.png (matplotlib)")
    args = parser.parse_args(argv)

    summary: dict[str, Any] = {
        "status": args.status,
        "exit_code": args.exit_code,
        "elapsed_s": args.elapsed,
        "env": read_env(args.state),
        "phases": read_phases(args.state),
        "correctness": summarize_correctness(_read_json(args.state / "correctness.json")),
        "pytest_gpu": _read_json(args.state / "pytest-gpu.json"),
        "bench": summarize_bench(args.state),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    _atomic_write(args.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    _atomic_write(args.out / "summary.md", render_md(summary))
    if summary["bench"]["rows"]:
        _atomic_write(args.out / "bench.csv", write_bench_csv(summary["bench"]["rows"]))
        if args.plot:
            plot(summary["bench"]["rows"], args.out / "bench.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
