#!/usr/bin/env python3
"""Write the device check's results from its state directory into OUT.

    summarize.py STATE OUT --status STATUS [--exit-code N]

Reads (all optional, so a run cut short at any point still summarizes):
  STATE/env.txt          key=value lines (GPU, driver, nvcc, torch, commit, mode, arch)
  STATE/phases.tsv       name<TAB>status<TAB>seconds<TAB>detail, one line per phase
  STATE/correctness.json the runner's report (rewritten after every case group)
  STATE/pytest-gpu.json  {"status": ..., "detail": ...} of the Python GPU tests
  STATE/bench_py/bench.json       python/bench/ffpa_bench.py --save-path (binding present)
  STATE/bench_py_causal/bench.json
  STATE/bench_py_bwd/bench.json   python/bench/ffpa_bench.py --no-fwd: forward + backward against the named
                                  SDPA baselines' forward + backward (binding present, GPU mode)
  STATE/bench_cpp.csv    the runner's own timings of every path (mma, tma, fp16 accumulation, cute,
                         cute_tma, and the low-precision cute_fp8 / cute_tma_fp8 / cute_tma_fp4)
  STATE/sdpa.csv         the named SDPA baselines timed by sdpa_bench.py in a separate process (no binding)
  STATE/sweep.csv        the tuning sweep: ffpa_device_check --sweep-csv (FFPA_SWEEP=ON)
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
import re
import sys
from pathlib import Path
from typing import Any

# Performance targets, each a ratio to a baseline named and timed in the same run
# (docs/perf.md "Targets"): fp16, N = 8192, non-causal. "baseline_d": the baseline's
# rate at that head dim (the release GPUs' target: FA2's D = 128 rate at every D).
BASELINE_ORDER = ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math", "sdpa-default")
TARGETS = [
    {"dims": (64, 128), "baseline": "sdpa-flash", "min_ratio": 1.0, "stretch": 1.2,
     "what": "D = 64/128 >= 1.0x FA2(sdpa-flash) (stretch 1.2x)"},
    {"dims": (320, 512), "baseline": "sdpa-efficient", "min_ratio": 2.0, "stretch": 2.6,
     "what": "D = 320/512 >= 2.0x sdpa-efficient (stretch 2.6x, about 340 TFLOPS on the H200)"},
    {"dims": (64, 128, 192, 256, 320, 512), "baseline": "sdpa-flash", "baseline_d": 128, "min_ratio": 0.9,
     "stretch": None, "what": "every D <= 512 >= 0.9x FA2(sdpa-flash) at D = 128 (the release GPUs' target)"},
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


# The kernels' facts (cmake/kernel-facts.json, their one home): the impls and the tolerance
# table's rows.
KERNEL_FACTS = Path(__file__).resolve().parents[2] / "cmake" / "kernel-facts.json"


def kernel_facts(repo: Path | None = None) -> dict[str, Any]:
    """cmake/kernel-facts.json of a source tree (this one by default)."""
    path = KERNEL_FACTS if repo is None else repo / "cmake" / "kernel-facts.json"
    facts: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return facts


def tolerance_table_names(repo: Path | None = None) -> set[str]:
    """The row names of the one tolerance table, for the checks that hold a report's
    "tolerances" to it (test_summarize.py, rehearse.py)."""
    return {row["name"] for row in kernel_facts(repo)["tolerances"]}


# The low-precision impls (those with a precision of their own): judged by the fp8 / fp4
# rows of the tolerance table (the report's "tolerances") on cos, rel_l1, max abs, lse and
# gain, not by the 16-bit rows' rel / abs / lse.
LOWP_IMPLS = tuple(impl["name"] for impl in kernel_facts()["impls"] if impl.get("precision"))
# The 16-bit paths the low-precision bench rows are compared with (fp32 accumulation,
# same shape, same run), besides the SDPA baselines.
LOWP_OURS = ("mma", "tma", "cute_tma")


def _is_lowp(impl: Any) -> bool:
    return str(impl) in LOWP_IMPLS


_LOWP_PRECISION = {impl["name"]: impl["precision"] for impl in kernel_facts()["impls"] if impl.get("precision")}


def _lowp_tolerance_name(case: dict[str, Any]) -> str:
    return str(case.get("tolerance") or _LOWP_PRECISION.get(str(case.get("impl")), "fp8"))


def _is_bwd(impl: Any) -> bool:
    """The backward's cases and bench rows (impl / kernel "bwd": ffpa::backward())."""
    return str(impl) == "bwd"


def _is_error_case(case: dict[str, Any]) -> bool:
    return case.get("expect_error", "ok") not in ("ok", None)


def _new_tally() -> dict[str, Any]:
    return {"cases": 0, "ran": 0, "failed": 0, "max_rel_err": None, "max_abs_err": None, "max_lse_err": None}


def _new_lowp_tally() -> dict[str, Any]:
    return {"min_cos": None, "max_rel_l1": None, "max_gain_err": None}


def _tally(g: dict[str, Any], case: dict[str, Any]) -> None:
    g["cases"] += 1
    if not case.get("ran"):
        return
    g["ran"] += 1
    if not case.get("pass"):
        g["failed"] += 1
    for key in ("rel_err", "abs_err", "lse_err"):
        value = case.get(key)
        # null: not measured (the launch failed, or the case expects an error).
        if isinstance(value, (int, float)):
            g["max_" + key] = max(g["max_" + key] or 0.0, float(value))
    if "bwd_max_rel_l1" in g:  # the backward: the worst gradient's sum |g - ref| / sum |ref|
        rel_l1 = case.get("rel_l1")
        if isinstance(rel_l1, (int, float)):
            g["bwd_max_rel_l1"] = max(g["bwd_max_rel_l1"] or 0.0, float(rel_l1))
        return
    if "min_cos" not in g:
        return
    # The low-precision metrics (null: not measured, or NaN in the output; the case then
    # failed, and the worst value is not a number to report).
    cos, rel_l1, gain = case.get("cos"), case.get("rel_l1"), case.get("gain")
    if isinstance(cos, (int, float)):
        g["min_cos"] = min(g["min_cos"] if g["min_cos"] is not None else 1.0, float(cos))
    if isinstance(rel_l1, (int, float)):
        g["max_rel_l1"] = max(g["max_rel_l1"] or 0.0, float(rel_l1))
    if isinstance(gain, (int, float)):
        g["max_gain_err"] = max(g["max_gain_err"] or 0.0, abs(float(gain) - 1.0))


def _extra_status(report: dict[str, Any], key: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the TMA (key "tma"), fp16-accumulated ("f16_acc"), CuTe ("cute": impl cute
    and cute_tma) or low-precision ("lowp": LOWP_IMPLS) cases ran, and why.

    Cases that expect an error are the api group's argument checks, not runs of the
    path, and are left out of the counts. Skipped cases are never counted as passed.
    """
    block = report.get(key)
    if not isinstance(block, dict):
        return {"planned": None, "reason": "the runner predates these cases", "cases": 0, "ran": 0, "failed": 0,
                "status": "n/a (the runner predates these cases)"}
    planned = bool(block.get("planned"))
    reason = str(block.get("reason") or "")
    total = ran = failed = 0
    for case in cases:
        selected = {"tma": case.get("impl") == "tma", "cute": case.get("impl") in ("cute", "cute_tma"),
                    "lowp": _is_lowp(case.get("impl")), "bwd": _is_bwd(case.get("impl"))}.get(
                        key, case.get("accum") == "fp16" and not _is_bwd(case.get("impl")))
        if case.get("expect_error") in (None, "ok", "") and selected:
            total += 1
            ran += bool(case.get("ran"))
            failed += bool(case.get("ran")) and not case.get("pass")
    if not planned:
        status = f"skipped: {reason} (not run, not counted as passed)"
    elif report.get("status") == "planned":
        status = f"planned (dry run): {total} cases; {reason}"
    elif ran == total and not failed:
        status = f"ran: {ran} cases, all passed; {reason}"
    else:
        status = f"ran {ran} of {total} cases, {failed} failed; {reason}"
    return {"planned": planned, "reason": reason, "cases": total, "ran": ran, "failed": failed, "status": status}


def summarize_correctness(report: Any) -> dict[str, Any]:
    if not isinstance(report, dict):
        return {"status": "not run"}
    cases = report.get("cases", [])
    groups: dict[str, dict[str, Any]] = {}
    paths: dict[tuple[str, str, str], dict[str, Any]] = {}
    failed = []
    for case in cases:
        group = case.get("group", "?")
        # Reports of runners before fp16 accumulation have no "accum": fp32 then.
        impl, accum = case.get("impl", "?"), case.get("accum") or "fp32"
        _tally(groups.setdefault(group, _new_tally()), case)
        lowp = _is_lowp(impl) and not _is_error_case(case)
        # A low-precision path's row carries its metrics and the tolerance row it is judged by.
        extra = {**_new_lowp_tally(), "tolerance": _lowp_tolerance_name(case)} if lowp else {}
        if _is_bwd(impl):  # judged by max rel and rel L1 per gradient (the bwd_* rows)
            extra = {"bwd_max_rel_l1": None, "tolerance": case.get("tolerance")}
        _tally(paths.setdefault((group, impl, accum), {"group": group, "impl": impl, "accum": accum,
                                                       **_new_tally(), **extra}), case)
        if case.get("ran") and not case.get("pass"):
            failed.append({k: case.get(k) for k in ("case", "abs_err", "rel_err", "lse_err", "cos", "rel_l1", "gain",
                                                    "impl_used", "error")})
    tolerances = report.get("tolerances") or {}
    lowp_paths = []
    bwd_paths = []
    for g in paths.values():
        if "min_cos" in g:
            lowp_paths.append({**g, "bounds": tolerances.get(g["tolerance"])})
        if "bwd_max_rel_l1" in g:
            bwd_paths.append({**g, "bounds": tolerances.get(g["tolerance"])})
    return {
        "status": report.get("status"),
        "device": report.get("device"),
        "tolerances": report.get("tolerances"),
        "total": report.get("total"),
        "ran": report.get("ran"),
        "failed": report.get("failed"),
        "groups_done": report.get("groups_done"),
        "groups_total": report.get("groups_total"),
        "tma": _extra_status(report, "tma", cases),
        "f16_acc": _extra_status(report, "f16_acc", cases),
        "cute": _extra_status(report, "cute", cases),
        "lowp": _extra_status(report, "lowp", cases),
        "lowp_paths": lowp_paths,
        "bwd": _extra_status(report, "bwd", cases),
        "bwd_paths": bwd_paths,
        "by_group": groups,
        "by_path": list(paths.values()),
        "failed_cases": failed,
    }


PY_SOURCE = "python/bench/ffpa_bench.py (SDPA in the same process)"
CPP_SOURCE = "C++ runner (CUDA events); SDPA from a separate Python process"
CPP_BWD_SOURCE = ("C++ runner (CUDA events): ffpa::backward() alone, 2.5x the forward's FLOPs; no SDPA ratio: "
                  "SDPA's forward + backward is timed in the bench-bwd phase (the backward section), its backward "
                  "alone nowhere")
CPP_SOURCE_PY_SDPA = "C++ runner (CUDA events); SDPA from the python bench's row of the same shape"
# Table order of the paths: the default path first, then TMA, then fp16 accumulation.
PATH_ORDER = {("mma", "fp32"): 0, ("tma", "fp32"): 1, ("mma", "fp16"): 2, ("tma", "fp16"): 3,
              ("cute", "fp32"): 4, ("cute_tma", "fp32"): 5, ("cute", "fp16"): 6, ("cute_tma", "fp16"): 7,
              ("cute_fp8", "fp32"): 8, ("cute_tma_fp8", "fp32"): 9, ("cute_tma_fp4", "fp32"): 10, ("bwd", "fp32"): 11}
# On sm_90 nvcc 13.0 lowers the FP8 mma (m16n8k32 e4m3) to two fp16 HMMA.16816 (docs/install.md,
# "The scheme"): the rows time that lowering; sm_89 and the sm_120 family have FP8 tensor cores.
LOWP_SM90_NOTE = ("on sm_90 (the H200) nvcc 13.0 lowers the FP8 mma to fp16 HMMA: these rows time that lowering "
                  "(quantisation pass included), not FP8 tensor cores; FP8's speed needs sm_89 or the sm_120 family")


def _baselines_of(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {label, ms, tflops, kernel, reason} of a python bench record; an older bench
    (no "baselines") timed SDPA's default dispatch without recording its kernel."""
    named = r.get("baselines")
    if isinstance(named, list):
        return {b["name"]: {k: b.get(k) for k in ("label", "ms", "tflops", "kernel", "op", "reason")} for b in named
                if isinstance(b, dict) and b.get("name")}
    if r.get("sdpa_tflops") is None:
        return {}
    return {"sdpa-default": {"label": "sdpa-default[kernel not recorded]", "ms": r.get("sdpa_ms"),
                             "tflops": r.get("sdpa_tflops"), "kernel": None, "op": None, "reason": None}}


def _rows_from_py_bench(path: Path) -> list[dict[str, Any]]:
    data = _read_json(path)
    rows = []
    for r in (data or {}).get("results", []):
        if r.get("direction") != "fwd":
            continue
        baselines = _baselines_of(r)
        default = baselines.get("sdpa-default", {})
        # "accum" is a later column of the bench (python/bench/ffpa_bench.py): absent means fp32 accumulation.
        rows.append({"D": r["D"], "dtype": r["dtype"], "causal": bool(r["causal"]), "N": r["Nq"], "H": r["Hq"],
                     "kernel": r.get("impl"), "accum": r.get("accum") or "fp32", "ffpa_ms": r["ffpa_ms"],
                     "sdpa_ms": default.get("ms"), "ffpa_tflops": r["ffpa_tflops"],
                     "sdpa_tflops": default.get("tflops"), "sdpa_backend": default.get("label"),
                     "baselines": baselines, "err_vs_sdpa": r.get("err"),
                     "allclose": r.get("allclose"), "origin": "py", "source": PY_SOURCE})
    return rows


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        return list(csv.DictReader(io.StringIO(path.read_text())))
    except OSError:
        return []


def _truthy(x: Any) -> bool:
    return str(x) in ("1", "True", "true")


def _rows_from_cpp(state: Path, py_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runner's rows; the baselines from the python bench's row of the shape when there
    is one (same process as its own FFPA timing), else from sdpa_bench.py's CSV."""
    sdpa: dict[tuple[int, str, bool], dict[str, Any]] = {}
    for r in _read_csv(state / "sdpa.csv"):
        # sdpa_bench.py: one row per shape and named baseline ("backend"); older ones wrote
        # "flash"/"default" there.
        name = {"flash": "sdpa-flash", "default": "sdpa-default"}.get(r.get("backend") or "", r.get("backend") or "")
        entry = sdpa.setdefault((int(r["D"]), r["dtype"], _truthy(r["causal"])),
                                {"baselines": {}, "source": CPP_SOURCE})
        label = r.get("label") or name
        entry["baselines"][name] = {"label": label, "ms": float(r["ms"]) if r.get("ms") else None,
                                    "tflops": float(r["tflops"]) if r.get("tflops") else None,
                                    "kernel": r.get("kernel") or None, "op": None, "reason": r.get("reason") or None}
    for r in py_rows:
        if r["baselines"]:
            sdpa.setdefault((r["D"], r["dtype"], r["causal"]), {"baselines": r["baselines"],
                                                                "source": CPP_SOURCE_PY_SDPA})
    rows = []
    for r in _read_csv(state / "bench_cpp.csv"):
        key = (int(r["D"]), r["dtype"], _truthy(r["causal"]))
        # The backward rows time ffpa::backward() alone: the forward's baselines of the
        # shape are no baseline for them (SDPA's backward is timed in the torch phase).
        s = {"source": CPP_BWD_SOURCE} if _is_bwd(r["kernel"]) else sdpa.get(key, {})
        baselines = s.get("baselines", {})
        default = baselines.get("sdpa-default", {})
        rows.append({"D": key[0], "dtype": key[1], "causal": key[2], "N": int(r["N"]), "H": int(r["H"]),
                     "kernel": r["kernel"], "accum": r.get("accum") or "fp32", "ffpa_ms": float(r["ms"]),
                     "sdpa_ms": default.get("ms"), "ffpa_tflops": float(r["tflops"]),
                     "sdpa_tflops": default.get("tflops"), "sdpa_backend": default.get("label"),
                     "baselines": baselines, "err_vs_sdpa": None, "allclose": None, "origin": "cpp",
                     "source": s.get("source", CPP_SOURCE)})
    return rows


def _path(r: dict[str, Any]) -> tuple[str, str]:
    return (str(r.get("kernel")), str(r.get("accum") or "fp32"))


def _one_per_path(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (D, dtype, causal, path): the python bench's when both timed it."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        key = (r["D"], r["dtype"], r["causal"], _path(r))
        if key not in best or (best[key]["origin"] != "py" and r["origin"] == "py"):
            best[key] = r
    return list(best.values())


def _ratio(ffpa: float, baseline: dict[str, Any] | None) -> float | None:
    tflops = (baseline or {}).get("tflops")
    return ffpa / tflops if tflops else None


def _target_line(t: dict[str, Any], r: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    name = t["baseline"]
    base = r["baselines"].get(name)
    if t.get("baseline_d"):  # the baseline's rate at another head dim, same dtype/causal, same run
        base = next((x["baselines"].get(name) for x in rows if x["D"] == t["baseline_d"]
                     and x["dtype"] == r["dtype"] and x["causal"] == r["causal"] and x["baselines"].get(name)), None)
    ratio = _ratio(r["ffpa_tflops"], base)
    if ratio is None:
        why = (base or {}).get("reason") or f"{name} not timed in this run"
        result = f"n/a ({why})"
    elif t.get("stretch") and ratio >= t["stretch"]:
        result = "PASS (stretch)"
    else:
        result = "PASS" if ratio >= t["min_ratio"] else "MISS"
    label = (base or {}).get("label") or name
    if t.get("baseline_d"):
        label += f" at D = {t['baseline_d']}"
    return {"target": t["what"], "D": r["D"], "kernel": r["kernel"], "accum": r["accum"], "origin": r["origin"],
            "baseline": label, "ratio": ratio, "result": result}


def summarize_bench(state: Path) -> dict[str, Any]:
    py_rows = _rows_from_py_bench(state / "bench_py" / "bench.json")
    py_rows += _rows_from_py_bench(state / "bench_py_causal" / "bench.json")
    rows = py_rows + _rows_from_cpp(state, py_rows)
    for r in rows:
        r["ratio"] = (r["ffpa_tflops"] / r["sdpa_tflops"]) if r.get("sdpa_tflops") else None
        r["ratios"] = {name: _ratio(r["ffpa_tflops"], b) for name, b in r["baselines"].items()}
    rows.sort(key=lambda r: (r["dtype"], r["causal"], r["D"], PATH_ORDER.get(_path(r), 99), _path(r),
                             r["origin"] != "py"))
    targets = []
    one = _one_per_path(rows)
    for t in TARGETS:  # one line per head dim and path (the python bench's row when both timed it)
        # The targets are the 16-bit paths' (docs/perf.md "Targets"); the low-precision rows
        # have their own table (lowp below).
        picked = [r for r in one if r["D"] in t["dims"] and r["dtype"] == "fp16" and not r["causal"]
                  and not _is_lowp(r["kernel"]) and not _is_bwd(r["kernel"])]
        for r in sorted(picked, key=lambda r: (r["D"], PATH_ORDER.get(_path(r), 99), _path(r))):
            targets.append(_target_line(t, r, rows))
    # The baselines per shape, each once (every path of a shape shares them).
    baselines = []
    seen = set()
    for r in rows:
        for name in sorted(r["baselines"], key=lambda n: (BASELINE_ORDER.index(n) if n in BASELINE_ORDER else 9, n)):
            key = (r["D"], r["dtype"], r["causal"], name)
            if key in seen:
                continue
            seen.add(key)
            b = r["baselines"][name]
            baselines.append({"D": r["D"], "dtype": r["dtype"], "causal": r["causal"], "baseline": name,
                              "label": b.get("label") or name, "kernel": b.get("kernel") or b.get("op"),
                              "ms": b.get("ms"), "tflops": b.get("tflops"),
                              "status": "ran" if b.get("tflops") else "n/a", "reason": b.get("reason")})
    paths = sorted({_path(r) for r in rows}, key=lambda p: (PATH_ORDER.get(p, 99), p))
    return {"rows": rows, "targets": targets, "baselines": baselines, "paths": [f"{k}/{a}" for k, a in paths],
            "lowp": _lowp_bench(rows), "backward": summarize_backward(state, rows)}


# The backward's targets measured in this run (docs/perf.md "The backward kernels"), from the
# python bench's rows (same process as the baselines): forward + backward together against
# SDPA's forward + backward (its own dispatch), and the backward alone (direction
# "bwd-only": torch.autograd.grad on a kept forward graph) against the named backends'
# backward alone.
BWD_TARGETS = [
    {"dims": (320, 512), "baseline": "sdpa-default", "min_ratio": 2.0, "stretch": None, "rows": "fwd_bwd",
     "what": "D = 320/512 forward + backward >= 2.0x SDPA's (its own dispatch)"},
    {"dims": (320, 512), "baseline": "sdpa-efficient", "min_ratio": 3.0, "stretch": 4.0, "rows": "bwd_only",
     "what": "D = 320/512 backward alone >= 3.0x sdpa-efficient's backward alone (stretch 4x)"},
    {"dims": (64, 128), "baseline": "sdpa-flash", "min_ratio": 0.9, "stretch": None, "rows": "bwd_only",
     "what": "D = 64/128 backward alone >= 0.9x FA2(sdpa-flash)'s backward alone"},
]
_BWD_DIRECTIONS = {"fwd_bwd": ("bwd", "fwd+bwd"), "bwd_only": ("bwd-only", "bwd-only")}


def _bwd_rows(path: Path, which: str) -> list[dict[str, Any]]:
    """The python bench's backward rows of one kind: "fwd_bwd" (direction "bwd": forward +
    backward of ffpa_attn_func, its default backward, ours where compiled; TFLOPS count 3.5x
    the forward's FLOPs) or "bwd_only" (direction "bwd-only": the backward alone, 2.5x), each
    with the named baselines timed the same way in the same process."""
    direction, kernel = _BWD_DIRECTIONS[which]
    rows = []
    for r in (_read_json(path) or {}).get("results", []):
        if r.get("direction") != direction:
            continue
        baselines = _baselines_of(r)
        rows.append({"D": r["D"], "dtype": r["dtype"], "causal": bool(r["causal"]), "N": r["Nq"], "H": r["Hq"],
                     "kernel": kernel, "forward": r.get("impl"), "accum": "fp32", "origin": "py",
                     "ffpa_ms": r["ffpa_ms"], "ffpa_tflops": r["ffpa_tflops"], "baselines": baselines,
                     "ratios": {n: _ratio(r["ffpa_tflops"], b) for n, b in baselines.items()},
                     "err_vs_sdpa": r.get("err")})
    return sorted(rows, key=lambda r: (r["dtype"], r["causal"], r["D"]))


def summarize_backward(state: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The backward's bench: the runner's rows (ours alone; with the time of our forward of
    the same shape and run, mma, for scale) and the python bench's forward + backward and
    backward-alone rows against the named baselines, with the targets they judge."""
    cpp = []
    for r in rows:
        if not _is_bwd(r["kernel"]):
            continue
        fwd = next((x for x in rows if x["origin"] == r["origin"] and x["D"] == r["D"] and x["dtype"] == r["dtype"]
                    and x["causal"] == r["causal"] and _path(x) == ("mma", "fp32")), None)
        cpp.append({"D": r["D"], "dtype": r["dtype"], "causal": r["causal"], "ms": r["ffpa_ms"],
                    "tflops": r["ffpa_tflops"], "x_forward_time": r["ffpa_ms"] / fwd["ffpa_ms"] if fwd else None})
    bench = state / "bench_py_bwd" / "bench.json"
    kinds = {which: _bwd_rows(bench, which) for which in _BWD_DIRECTIONS}
    targets = [_target_line(t, r, kinds[t["rows"]]) for t in BWD_TARGETS for r in kinds[t["rows"]]
               if r["D"] in t["dims"] and r["dtype"] == "fp16" and not r["causal"]]
    missing = [what for which, what in (("fwd_bwd", "forward + backward"), ("bwd_only", "backward alone"))
               if not kinds[which]]
    unmeasured = (f"{' and '.join(missing)} against SDPA's: no such rows in the bench-bwd phase's output"
                  if missing else None)
    return {"cpp": cpp, "fwd_bwd": kinds["fwd_bwd"], "bwd_only": kinds["bwd_only"], "targets": targets,
            "unmeasured": unmeasured}


def _lowp_bench(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The low-precision rows against our 16-bit paths (LOWP_OURS, fp32 accumulation) of the
    same shape and source (the same run, the same tensors), and against the named SDPA
    baselines of that shape; one entry per low-precision row."""
    out = []
    for r in rows:
        if not _is_lowp(r["kernel"]):
            continue
        ours: dict[str, float | None] = {}
        for name in LOWP_OURS:
            same = [x for x in rows if x["D"] == r["D"] and x["dtype"] == r["dtype"] and x["causal"] == r["causal"]
                    and _path(x) == (name, "fp32")]
            # The same source first (the runner's rows time every path on one set of tensors).
            same.sort(key=lambda x: x["origin"] != r["origin"])
            ours[name] = r["ffpa_tflops"] / same[0]["ffpa_tflops"] if same and same[0]["ffpa_tflops"] else None
        r["ratios_ours"] = ours
        out.append({"D": r["D"], "dtype": r["dtype"], "causal": r["causal"], "kernel": r["kernel"],
                    "origin": r["origin"], "ffpa_ms": r["ffpa_ms"], "ffpa_tflops": r["ffpa_tflops"],
                    "x_ours": ours, "x_baselines": dict(r["ratios"])})
    return out


def _float(x: Any) -> float | None:
    try:
        return float(x) if x not in (None, "") else None
    except ValueError:
        return None


def summarize_sweep(state: Path, env: dict[str, str]) -> dict[str, Any]:
    """The tuning sweep (STATE/sweep.csv from ffpa_device_check --sweep-csv): one row per
    configuration, and per head dim the fastest correct one of each path and overall.

    A configuration counts only when its status is "ok" (it ran and matched the default);
    a winner that is not the default is the candidate for the one tile table
    (csrc/kernels/ffpa/cute/config.h and kernel_traits.h) with this run as its measurement.
    """
    rows = []
    for r in _read_csv(state / "sweep.csv"):
        rows.append({"D": int(r["D"]), "path": r["path"], "config": r["config"], "default": _truthy(r["default"]),
                     "ms": _float(r.get("ms")), "tflops": _float(r.get("tflops")), "max_diff": _float(r.get("max_diff")),
                     "status": r.get("status") or ""})
    winners = []
    for d in sorted({r["D"] for r in rows}):
        mine = [r for r in rows if r["D"] == d]
        for path in sorted({r["path"] for r in mine}) + [None]:
            pool = [r for r in mine if (path is None or r["path"] == path) and r["status"] == "ok" and r["tflops"]]
            if not pool:
                continue
            best = max(pool, key=lambda r: r["tflops"])
            default = next((r for r in mine if r["default"] and r["path"] == best["path"]), None)
            gain = best["tflops"] / default["tflops"] if default and default.get("tflops") else None
            winners.append({"D": d, "scope": path or "any path", "path": best["path"], "config": best["config"],
                            "default": best["default"], "tflops": best["tflops"], "x_default": gain,
                            "arch": env.get("arch"), "gpu": env.get("gpu"), "commit": env.get("commit")})
    return {"rows": rows, "winners": winners, "mode": env.get("sweep")}


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def _bound(op: str, x: Any) -> str:
    return f"{op} {x:g}" if isinstance(x, (int, float)) else "no bound"


def _tolerance_text(name: str, v: dict[str, Any]) -> str:
    if "max_rel_l1" in v and "min_cos" not in v:  # the backward's rows, per gradient
        return (f"{name}: per gradient max |g - ref| / max |ref| {_bound('<=', v.get('max_rel'))}, "
                f"rel L1 {_bound('<=', v.get('max_rel_l1'))}")
    if "min_cos" in v:
        return (f"{name}: cos {_bound('>=', v.get('min_cos'))}, rel L1 {_bound('<=', v.get('max_rel_l1'))}, "
                f"abs {_bound('<=', v.get('abs'))}, lse {_bound('<=', v.get('lse'))}, "
                f"|gain - 1| {_bound('<=', v.get('max_gain_err'))}")
    return f"{name}: rel {v['rel']:g}, abs {v['abs']:g}, lse {v['lse']:g}"


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
        out.append("Tolerances (cmake/kernel-facts.json): " + "; ".join(_tolerance_text(name, v) for name, v in tol.items()))
        # "fp16-acc": the row's name in reports of runners before the one tolerance table.
        acc = next((n for n in ("fp16_acc", "fp16-acc") if n in tol), None)
        if acc:
            out.append(f"({acc}: fp16 inputs with accum=fp16, on mma, tma, cute and cute_tma.)")
        out.append("rel = max |out - ref| / max |ref| per case; abs = max |out - ref|; lse = max |lse - ref|.")
        if any("min_cos" in v for v in tol.values()):
            out.append("Low-precision rows (fp8, fp4), over the checked rows: cos = cosine similarity of out with ref, "
                       "rel L1 = sum |out - ref| / sum |ref|, gain = sum out * ref / sum ref^2; a case passes when "
                       "all five bounds hold.")
        out.append("")
    out.append(f"Cases: {c.get('ran', 0)} run of {c.get('total', 'n/a')}, {c.get('failed', 'n/a')} failed; "
               f"groups {c.get('groups_done', 'n/a')}/{c.get('groups_total', 'n/a')} ({c.get('status')})")
    for key, what in (("tma", "TMA cases (impl=tma)"), ("f16_acc", "fp16-accumulated cases (accum=fp16)"),
                      ("cute", "CuTe cases (impl=cute, cute_tma)"),
                      ("lowp", "Low-precision cases (impl=cute_fp8, cute_tma_fp8, cute_tma_fp4)"),
                      ("bwd", "Backward cases (ffpa::backward() against float64 gradients)")):
        if c.get(key):
            out.append(f"{what}: {c[key]['status']}")
    out += ["", "| group | impl | accum | cases | ran | failed | max rel | max abs | max lse |",
            "|---|---|---|---|---|---|---|---|---|"]
    for g in c.get("by_path") or []:
        out.append(f"| {g['group']} | {g['impl']} | {g['accum']} | {g['cases']} | {g['ran']} | {g['failed']} | "
                   f"{_fmt(g['max_rel_err'])} | {_fmt(g['max_abs_err'])} | {_fmt(g['max_lse_err'])} |")
    if any(g["group"] == "api" for g in c.get("by_path") or []):
        out.append("")
        out.append("api rows with no errors measured are argument checks: forward() must refuse them with the "
                   "documented error kind.")
    if c.get("lowp_paths"):
        out += ["", "### Low-precision cases (judged by the fp8 / fp4 rows of the tolerance table)", "",
                "Each cell: the worst value over the row's cases (bound).", "",
                "| group | impl | cases | ran | failed | min cos | max rel L1 | max abs | max lse | max abs(gain - 1) |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for g in c["lowp_paths"]:
            b = g.get("bounds") or {}
            out.append(f"| {g['group']} | {g['impl']} | {g['cases']} | {g['ran']} | {g['failed']} | "
                       f"{_fmt(g['min_cos'], '.5f')} ({_bound('>=', b.get('min_cos'))}) | "
                       f"{_fmt(g['max_rel_l1'], '.4f')} ({_bound('<=', b.get('max_rel_l1'))}) | "
                       f"{_fmt(g['max_abs_err'], '.4f')} ({_bound('<=', b.get('abs'))}) | "
                       f"{_fmt(g['max_lse_err'], '.4f')} ({_bound('<=', b.get('lse'))}) | "
                       f"{_fmt(g['max_gain_err'], '.4f')} ({_bound('<=', b.get('max_gain_err'))}) |")
    if c.get("bwd_paths"):
        out += ["", "### Backward cases (dQ, dK, dV against float64; the bwd_fp16 / bwd_bf16 rows)", "",
                "Each cell: the worst gradient over the row's cases (bound). Inputs: the reference's own O and LSE, "
                "so a row judges the backward alone.", "",
                "| group | cases | ran | failed | max rel | max rel L1 | max abs |", "|---|---|---|---|---|---|---|"]
        for g in c["bwd_paths"]:
            b = g.get("bounds") or {}
            out.append(f"| {g['group']} | {g['cases']} | {g['ran']} | {g['failed']} | "
                       f"{_fmt(g['max_rel_err'], '.3g')} ({_bound('<=', b.get('max_rel'))}) | "
                       f"{_fmt(g['bwd_max_rel_l1'], '.3g')} ({_bound('<=', b.get('max_rel_l1'))}) | "
                       f"{_fmt(g['max_abs_err'], '.3g')} |")
    if c.get("failed_cases"):
        out.append("")
    for f in c.get("failed_cases") or []:
        lowp = f.get("cos") is not None or f.get("rel_l1") is not None
        extra = (f" cos={_fmt(f.get('cos'), '.5f')} rel_l1={_fmt(f.get('rel_l1'), '.4f')} "
                 f"gain={_fmt(f.get('gain'), '.4f')}")
        out.append(f"- FAILED: {f['case']} rel={_fmt(f['rel_err'])} abs={_fmt(f['abs_err'])} "
                   f"lse={_fmt(f['lse_err'])}{extra if lowp else ''} ran={f['impl_used']} {f.get('error') or ''}")
    py = summary.get("pytest_gpu") or {"status": "not run (no binding: " + env.get("binding", "n/a") + ")"}
    out += ["", f"Python GPU tests: {py.get('status')} {py.get('detail', '')}".rstrip()]
    b = summary["bench"]
    out += ["", "## Bench: TFLOPS and ratios to named baselines (B=1, H=32, N=8192)", ""]
    if b["rows"]:
        for origin, source in sorted({(r["origin"], r["source"]) for r in b["rows"]}, key=lambda x: x[0] != "py"):
            out.append(f"Source {origin}: {source}.")
        out.append("Paths timed (kernel that ran / accumulator): " + ", ".join(b["paths"]) + ".")
        tma = c.get("tma") or {}
        if tma.get("planned") is False:
            out.append(f"tma not timed: {tma.get('reason')}.")
        out += ["", "Baselines (torch SDPA restricted to one backend with sdpa_kernel, and its default dispatch "
                "with the kernel the profiler saw; n/a: the backend refused the shape):", "",
                "| D | dtype | causal | baseline | kernel | ms | TFLOPS | status |", "|---|---|---|---|---|---|---|---|"]
        for x in b.get("baselines") or []:
            status = x["status"] if x["status"] == "ran" else f"n/a: {x.get('reason') or 'not timed'}"
            out.append(f"| {x['D']} | {x['dtype']} | {x['causal']} | {x['label']} | {x['kernel'] or ''} | "
                       f"{_fmt(x['ms'], '.3f')} | {_fmt(x['tflops'], '.1f')} | {status} |")
        names = [n for n in BASELINE_ORDER if any(n in r["baselines"] for r in b["rows"])]
        heads = ["FA2(sdpa-flash)" if n == "sdpa-flash" else n for n in names]
        out += ["", "| D | dtype | causal | kernel | accum | source | FFPA ms | FFPA TFLOPS | "
                + " | ".join(f"x {h}" for h in heads) + " |", "|---" * (8 + len(names)) + "|"]
        for r in b["rows"]:
            cells = [_fmt(r["ratios"].get(n), ".2f") for n in names]
            out.append(f"| {r['D']} | {r['dtype']} | {r['causal']} | {r['kernel']} | {r['accum']} | {r['origin']} | "
                       f"{_fmt(r['ffpa_ms'], '.3f')} | {_fmt(r['ffpa_tflops'], '.1f')} | " + " | ".join(cells) + " |")
        out += ["", "| target | D | kernel | accum | baseline | ratio | result |", "|---|---|---|---|---|---|---|"]
        for t in b["targets"]:
            out.append(f"| {t['target']} | {t['D']} | {t['kernel']} | {t['accum']} | {t['baseline']} | "
                       f"{_fmt(t['ratio'], '.2f')} | {t['result']} |")
        if b.get("lowp"):
            out += ["", "### Low-precision rows against our 16-bit paths and SDPA", "",
                    "Ratios of TFLOPS (the attention's FLOP count over the time, quantisation pass included) to our "
                    "fp32-accumulated " + ", ".join(LOWP_OURS) + " rows and to the named baselines of the same shape "
                    "and run; no target holds these rows.", ""]
            if str(env.get("arch", "")).startswith("90"):
                out += [f"Note: {LOWP_SM90_NOTE}.", ""]
            out += ["| D | dtype | causal | kernel | source | FFPA TFLOPS | "
                    + " | ".join(f"x {n}" for n in LOWP_OURS) + " | " + " | ".join(f"x {h}" for h in heads) + " |",
                    "|---" * (6 + len(LOWP_OURS) + len(names)) + "|"]
            for x in b["lowp"]:
                cells = [_fmt(x["x_ours"].get(n), ".2f") for n in LOWP_OURS]
                cells += [_fmt(x["x_baselines"].get(n), ".2f") for n in names]
                out.append(f"| {x['D']} | {x['dtype']} | {x['causal']} | {x['kernel']} | {x['origin']} | "
                           f"{_fmt(x['ffpa_tflops'], '.1f')} | " + " | ".join(cells) + " |")
    else:
        out.append("No bench results.")
    bw = b.get("backward") or {}
    if bw.get("cpp") or bw.get("fwd_bwd") or bw.get("bwd_only"):
        out += ["", "### Backward (fp16, B=1, H=32, N=8192)", "",
                "Ours alone (C++ runner, CUDA events; TFLOPS: 2.5x the forward's FLOPs over the time; x forward: "
                "its time over our mma forward's of the same shape and run):", "",
                "| D | causal | ms | TFLOPS | x forward time |", "|---|---|---|---|---|"]
        for x in bw["cpp"]:
            out.append(f"| {x['D']} | {x['causal']} | {_fmt(x['ms'], '.3f')} | {_fmt(x['tflops'], '.1f')} | "
                       f"{_fmt(x['x_forward_time'], '.2f')} |")
        for which, title in (("fwd_bwd", "Forward + backward (python bench, SDPA's in the same process; TFLOPS: "
                                            "3.5x the forward's FLOPs; forward: the kernel ffpa_attn_func ran, then "
                                            "its default backward):"),
                             ("bwd_only", "Backward alone (python bench: torch.autograd.grad on a kept forward "
                                          "graph, each baseline's forward run under its backend; TFLOPS: 2.5x the "
                                          "forward's FLOPs):")):
            picked = bw.get(which) or []
            if not picked:
                continue
            names = [n for n in BASELINE_ORDER if any(n in r["baselines"] for r in picked)]
            out += ["", title, "",
                    "| D | dtype | causal | forward | ms | TFLOPS | " + " | ".join(f"x {n}" for n in names) + " |",
                    "|---" * (6 + len(names)) + "|"]
            for r in picked:
                cells = [_fmt(r["ratios"].get(n), ".2f") for n in names]
                out.append(f"| {r['D']} | {r['dtype']} | {r['causal']} | {r['forward']} | {_fmt(r['ffpa_ms'], '.3f')} "
                           f"| {_fmt(r['ffpa_tflops'], '.1f')} | " + " | ".join(cells) + " |")
        out += ["", "| target | D | baseline | ratio | result |", "|---|---|---|---|---|"]
        for t in bw["targets"]:
            out.append(f"| {t['target']} | {t['D']} | {t['baseline']} | {_fmt(t['ratio'], '.2f')} | {t['result']} |")
        if not bw["targets"]:
            out.append("| the backward against SDPA's | - | - | n/a | n/a (no python bench backward rows) |")
        if bw.get("unmeasured"):
            out += ["", f"Not in this run: {bw['unmeasured']}."]
    sw = summary.get("sweep") or {}
    out += ["", "## Tuning sweep (fp16, fp32 accumulation, B=1, H=32, N=8192, non-causal)", ""]
    if sw.get("rows"):
        out.append(f"Sweep: {sw.get('mode')}; arch {env.get('arch', 'n/a')}. Each variant's output was compared with "
                   "its path's default on two heads (max |diff| <= 2e-2) before it was timed.")
        out += ["", "| D | path | config | default | ms | TFLOPS | max diff | status |",
                "|---|---|---|---|---|---|---|---|"]
        for r in sw["rows"]:
            out.append(f"| {r['D']} | {r['path']} | {r['config']} | {'yes' if r['default'] else ''} | "
                       f"{_fmt(r['ms'], '.3f')} | {_fmt(r['tflops'], '.1f')} | {_fmt(r['max_diff'])} | {r['status']} |")
        out += ["", "Winners (fastest correct configuration; x default: against that path's default in this run):",
                "", "| D | among | path | config | TFLOPS | x default | is the default |", "|---|---|---|---|---|---|---|"]
        for w in sw["winners"]:
            out.append(f"| {w['D']} | {w['scope']} | {w['path']} | {w['config']} | {_fmt(w['tflops'], '.1f')} | "
                       f"{_fmt(w['x_default'], '.2f')} | {'yes' if w['default'] else 'no'} |")
        if not sw["winners"]:
            out.append("(none: no configuration ran; a dry run plans only)")
    else:
        out.append("No sweep results" + (f" (sweep: {sw.get('mode')})." if sw.get("mode") else "."))
    return "\n".join(out) + "\n"


def write_bench_csv(rows: list[dict[str, Any]]) -> str:
    # sdpa_* and ratio: the default dispatch, named by sdpa_backend; then one ratio and one
    # TFLOPS column per named baseline (empty: n/a, the baselines table says why).
    # The low-precision rows also carry one ratio per 16-bit path of ours (LOWP_OURS).
    per = [f"{kind}_{n.replace('-', '_')}" for n in BASELINE_ORDER for kind in ("tflops", "ratio")]
    ours = [f"ratio_ffpa_{n}" for n in LOWP_OURS]
    cols = ["D", "dtype", "causal", "N", "H", "kernel", "accum", "origin", "ffpa_ms", "sdpa_ms", "ffpa_tflops",
            "sdpa_tflops", "ratio", "sdpa_backend", "err_vs_sdpa", "allclose", "source", *per, *ours]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        flat = dict(r)
        for n in BASELINE_ORDER:
            flat[f"tflops_{n.replace('-', '_')}"] = (r["baselines"].get(n) or {}).get("tflops")
            flat[f"ratio_{n.replace('-', '_')}"] = r["ratios"].get(n)
        for n in LOWP_OURS:
            flat[f"ratio_ffpa_{n}"] = (r.get("ratios_ours") or {}).get(n)
        writer.writerow(flat)
    return buf.getvalue()


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fp16 = [r for r in _one_per_path(rows) if r["dtype"] == "fp16"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, causal in zip(axes, (False, True)):
        picked = sorted((r for r in fp16 if r["causal"] == causal), key=lambda r: r["D"])
        for p in sorted({_path(r) for r in picked}, key=lambda p: (PATH_ORDER.get(p, 99), p)):
            line = [r for r in picked if _path(r) == p]
            ax.plot([r["D"] for r in line], [r["ffpa_tflops"] for r in line], marker="o",
                    label=f"FFPA {p[0]}" + (" fp16-acc" if p[1] == "fp16" else ""))
        for name, style in zip(BASELINE_ORDER, ("--", "-.", ":", (0, (1, 3)), (0, (5, 2)))):
            rates: dict[int, float] = {}
            for r in picked:
                t = (r["baselines"].get(name) or {}).get("tflops")
                if t:
                    rates.setdefault(r["D"], t)
            if rates:
                dims = sorted(rates)
                ax.plot(dims, [rates[d] for d in dims], marker="s", linestyle=style, color="black", alpha=0.7,
                        label="FA2(sdpa-flash)" if name == "sdpa-flash" else name)
        ax.set_xlabel("head dim D")
        ax.set_title("causal" if causal else "non-causal")
        ax.grid(True, alpha=0.3)
        if picked:
            ax.legend(fontsize=8)
    axes[0].set_ylabel("TFLOPS (fp16, N = 8192)")
    fig.suptitle("ffpa-attn vs named SDPA baselines")
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
    summary["sweep"] = summarize_sweep(args.state, summary["env"])
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
