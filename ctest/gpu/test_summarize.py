"""summarize.py on the inputs a GPU run produces, made here from the real producers.

The runner's JSON comes from ``ffpa_device_check --dry-run`` (then marked as run, with
errors), the Python bench's JSON from ``ffpa_attn.bench.save_results``, so a change to
either format breaks this test before it breaks the one GPU run.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import summarize  # noqa: E402

RUNNER = os.environ.get("FFPA_DEVICE_CHECK_RUNNER")


def _runner_report(tmp_path: Path, fail_case: int | None = None) -> dict:
    if not RUNNER:
        pytest.skip("FFPA_DEVICE_CHECK_RUNNER is not set (CTest sets it)")
    path = tmp_path / "plan.json"
    subprocess.run([RUNNER, "--dry-run", "--json", str(path)], check=True, capture_output=True)
    report = json.loads(path.read_text())
    for i, case in enumerate(report["cases"]):
        bad = i == fail_case
        case.update({"ran": True, "pass": not bad, "impl_used": case["impl"] if case["impl"] != "auto" else "mma",
                     "abs_err": 0.5 if bad else 1e-3, "rel_err": 0.2 if bad else 4e-4, "lse_err": 1e-5,
                     "max_ref": 2.5, "error": ""})
    report.update({"status": "done", "ran": len(report["cases"]), "failed": int(fail_case is not None),
                   "groups_done": report["groups_total"]})
    return report


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    (state / "env.txt").write_text("gpu=NVIDIA H200\ndriver=580.1\narch=90\nnvcc=13.0\ntorch=2.11\nmode=gpu\n"
                                   "binding=yes (cp312)\ncommit=abc\n")
    (state / "phases.tsv").write_text("configure\tok\t4\tlogs/configure.log\nbuild\tok\t31\tlogs/build.log\n")
    return state


def test_gpu_run_with_binding(tmp_path):
    from ffpa_attn import bench

    state = _state(tmp_path)
    (state / "correctness.json").write_text(json.dumps(_runner_report(tmp_path, fail_case=3)))
    for name, causal in (("bench_py", False), ("bench_py_causal", True)):
        results = [bench.Result("cuda", "fwd", "fp16", "mma", 1, 32, 32, 8192, 8192, d, causal, 1e-3, 2e-2, True,
                                10.0, 20.0 if d >= 320 else 16.0, 100.0, 50.0 if d >= 320 else 160.0)
                   for d in (64, 128, 320, 512)]
        bench.save_results(results, str(state / name), {"case": name}, lambda m: None)
    out = tmp_path / "out"
    assert summarize.main([str(state), str(out), "--status", "failed", "--exit-code", "1", "--plot"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["env"]["gpu"] == "NVIDIA H200"
    corr = summary["correctness"]
    assert corr["failed"] == 1 and len(corr["failed_cases"]) == 1
    assert corr["failed_cases"][0]["rel_err"] == 0.2
    assert sum(g["failed"] for g in corr["by_group"].values()) == 1
    rows = summary["bench"]["rows"]
    assert len(rows) == 8 and {r["causal"] for r in rows} == {False, True}
    by_d = {(r["D"], r["causal"]): r for r in rows}
    assert by_d[(512, False)]["ratio"] == pytest.approx(2.0)
    results = {(t["D"], t["result"]) for t in summary["bench"]["targets"]}
    assert results == {(320, "PASS"), (512, "PASS"), (64, "MISS"), (128, "MISS")}
    md = (out / "summary.md").read_text()
    assert "| D64-fp16 |" in md and "FAILED: " in md and "| 512 | fp16 | False | mma |" in md
    with open(out / "bench.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 8
    assert (out / "bench.png").stat().st_size > 1000
    assert sorted(p.name for p in out.iterdir()) == ["bench.csv", "bench.png", "summary.json", "summary.md"]


def test_gpu_run_without_binding_merges_cpp_and_sdpa(tmp_path):
    state = _state(tmp_path)
    if not RUNNER:
        pytest.skip("FFPA_DEVICE_CHECK_RUNNER is not set (CTest sets it)")
    subprocess.run([RUNNER, "--dry-run", "--bench-csv", str(state / "bench_cpp.csv")], check=True,
                   capture_output=True)
    with open(state / "bench_cpp.csv", "a") as handle:  # rows as the runner prints them on a GPU
        handle.write("ffpa-cpp,512,fp16,0,1,32,8192,mma,40.0000,110.00\nffpa-cpp,512,fp16,1,1,32,8192,mma,25.0,88.0\n")
    (state / "sdpa.csv").write_text("source,D,dtype,causal,B,H,N,backend,ms,tflops\n"
                                    "sdpa,512,fp16,0,1,32,8192,default,80.0,55.00\n")
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "running"])
    summary = json.loads((out / "summary.json").read_text())
    rows = {(r["D"], r["causal"]): r for r in summary["bench"]["rows"]}
    assert rows[(512, False)]["ratio"] == pytest.approx(2.0) and rows[(512, False)]["sdpa_backend"] == "default"
    assert rows[(512, True)]["ratio"] is None  # SDPA not timed for it: no ratio, not a zero
    assert summary["correctness"] == {"status": "not run"}
    assert "separate Python process" in (out / "summary.md").read_text()


def test_cut_short_run_still_summarizes(tmp_path):
    """Only env and one phase: a run killed after configure still writes a summary."""
    state = _state(tmp_path)
    (state / "correctness.json").write_text("{ truncated")  # a half-written file is ignored
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "running"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "running" and [p["phase"] for p in summary["phases"]] == ["configure", "build"]
    assert not (out / "bench.csv").exists()
