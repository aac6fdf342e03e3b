"""summarize.py on the inputs a GPU run produces, made here from the real producers.

The runner's JSON comes from ``ffpa_device_check --dry-run`` (then marked as run, with
errors), the Python bench's JSON from ``save_results`` of python/bench/ffpa_bench.py, so a change to
either format breaks this test before it breaks the one GPU run.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# summarize.py beside this file; the Python bench, a tool of the repository, in python/bench/.
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "python" / "bench")]

import summarize  # noqa: E402

RUNNER = os.environ.get("FFPA_DEVICE_CHECK_RUNNER")


LOWP_IMPLS = set(summarize.LOWP_IMPLS)


def _runner_report(tmp_path: Path, fail_case: int | None = None, fail_lowp: bool = False) -> dict:
    """The runner's dry-run plan, marked as run: every case within its bounds but
    fail_case (a 16-bit miss) and, with fail_lowp, the first low-precision case (cos
    below its bound, the other metrics inside)."""
    if not RUNNER:
        pytest.skip("FFPA_DEVICE_CHECK_RUNNER is not set (CTest sets it)")
    path = tmp_path / "plan.json"
    subprocess.run([RUNNER, "--dry-run", "--json", str(path)], check=True, capture_output=True)
    report = json.loads(path.read_text())
    lowp_failed = False
    for i, case in enumerate(report["cases"]):
        bad = i == fail_case
        if case["expect_error"] != "ok":  # an argument check: refused, nothing measured
            case.update({"ran": True, "pass": True, "impl_used": "auto", "error_kind": case["expect_error"],
                         "abs_err": None, "rel_err": None, "lse_err": None, "max_ref": 0, "error": "refused"})
            continue
        used = {"auto": "mma", "fp8": report["lowp"]["fp8_resolves_to"], "fp4": "cute_tma_fp4"}.get(case["impl"],
                                                                                                    case["impl"])
        if case["impl"] in LOWP_IMPLS:
            bad = fail_lowp and not lowp_failed
            lowp_failed |= bad
            case.update({"ran": True, "pass": not bad, "impl_used": used, "error_kind": "ok", "abs_err": 0.11,
                         "rel_err": 0.04, "lse_err": 0.02, "max_ref": 2.5, "cos": 0.9971 if bad else 0.99912,
                         "rel_l1": 0.045, "gain": 0.996,
                         "error": "outside the fp8 bounds: cos < min_cos" if bad else ""})
            continue
        case.update({"ran": True, "pass": not bad, "impl_used": used,
                     "error_kind": "ok", "abs_err": 0.5 if bad else 1e-3, "rel_err": 0.2 if bad else 4e-4,
                     "lse_err": 1e-5, "max_ref": 2.5, "error": ""})
        if case["impl"] == "bwd":  # the backward: max rel and rel L1 per gradient, no LSE
            case.update({"lse_err": None, "rel_l1": 2e-4})
    report.update({"status": "done", "ran": len(report["cases"]),
                   "failed": int(fail_case is not None) + int(lowp_failed), "groups_done": report["groups_total"]})
    return report


def _py_result(bench, d: int, causal: bool, **extra):
    """A bench.Result by field name; "accum" only when this bench has it."""
    values = dict(backend="cuda", direction="fwd", dtype="fp16", impl="mma", B=1, Hq=32, Hkv=32, Nq=8192, Nkv=8192,
                  D=d, causal=causal, err=1e-3, atol=2e-2, allclose=True, ffpa_ms=10.0,
                  sdpa_ms=20.0 if d >= 320 else 16.0, ffpa_tflops=100.0, sdpa_tflops=50.0 if d >= 320 else 160.0,
                  accum="fp32")
    values.update(extra)
    names = {f.name for f in dataclasses.fields(bench.Result)}
    if "baselines" in names and "baselines" not in extra:
        # As on the H200: FA2 takes D <= 256 only; the default dispatch is the efficient
        # kernel at D >= 320.
        big = d >= 320
        values["baselines"] = [
            bench.Baseline("sdpa-flash", None, None, reason="refused by torch: head dim > 256") if big
            else bench.Baseline("sdpa-flash", 12.0, 200.0),
            bench.Baseline("sdpa-efficient", 20.0, 50.0 if big else 120.0),
            bench.Baseline("sdpa-default", values["sdpa_ms"], values["sdpa_tflops"],
                           kernel="fmha_cutlassF_f16_aligned_64x128_rf_sm80" if big else "cudnn_sdpa_sm90")]
    return bench.Result(**{k: v for k, v in values.items() if k in names})


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    (state / "env.txt").write_text("gpu=NVIDIA H200\ndriver=580.1\narch=90\nnvcc=13.0\ntorch=2.11\nmode=gpu\n"
                                   "binding=yes (cp312)\ncommit=abc\n")
    (state / "phases.tsv").write_text("configure\tok\t4\tlogs/configure.log\nbuild\tok\t31\tlogs/build.log\n")
    return state


def test_gpu_run_with_binding(tmp_path):
    import ffpa_bench as bench

    state = _state(tmp_path)
    (state / "correctness.json").write_text(json.dumps(_runner_report(tmp_path, fail_case=3)))
    for name, causal in (("bench_py", False), ("bench_py_causal", True)):
        results = [_py_result(bench, d, causal) for d in (64, 128, 320, 512)]
        bench.save_results(results, str(state / name), {"case": name}, lambda m: None)
    out = tmp_path / "out"
    assert summarize.main([str(state), str(out), "--status", "failed", "--exit-code", "1", "--plot"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["env"]["gpu"] == "NVIDIA H200"
    corr = summary["correctness"]
    assert corr["failed"] == 1 and len(corr["failed_cases"]) == 1
    assert corr["failed_cases"][0]["rel_err"] == 0.2
    assert sum(g["failed"] for g in corr["by_group"].values()) == 1
    assert sum(g["failed"] for g in corr["by_path"]) == 1
    # The runner's dry run plans TMA when the build holds TMA code (an arch >= 90; the
    # dev tree's 89 has none: then it says why) and fp16 accumulation (fp16 compiled).
    report = json.loads((state / "correctness.json").read_text())
    tma = report["tma"]["planned"]
    group = next(c["group"] for c in report["cases"] if c["dtype"] == "fp16")
    paths = {(g["group"], g["impl"], g["accum"]) for g in corr["by_path"]}
    want = {("mma", "fp32"), ("simt", "fp32"), ("mma", "fp16")} | ({("tma", "fp32"), ("tma", "fp16")} if tma else set())
    # The CuTe paths, as the runner's "cute" block plans them (a dry run: cute wherever the
    # CuTe kernels are compiled, cute_tma where tma is planned too).
    cute = report["cute"]
    want |= {("cute", "fp32"), ("cute", "fp16")} if cute["planned"] else set()
    want |= {("cute_tma", "fp32"), ("cute_tma", "fp16")} if cute["cute_tma"] else set()
    assert {(g, i, a) for g, i, a in paths if g == group} == {(group, i, a) for i, a in want}
    assert not any(i == "simt" and a == "fp16" for g, i, a in paths if g != "api")  # api: refused
    assert (("long", "tma", "fp32") in paths) == tma
    tma_cases = [c for c in report["cases"] if c["impl"] == "tma" and c["expect_error"] == "ok"]
    assert corr["tma"]["cases"] == len(tma_cases) and corr["tma"]["ran"] == len(tma_cases)
    if tma:
        assert tma_cases and corr["tma"]["status"].startswith(f"ran: {len(tma_cases)} cases, all passed")
    else:
        assert not tma_cases and corr["tma"]["status"].startswith("skipped: this build has no TMA code")
        # impl=tma is then refused, naming the compiled archs: an api argument check.
        assert any(c["impl"] == "tma" and c["expect_error"] == "impl" for c in report["cases"])
    assert corr["f16_acc"]["planned"] and corr["f16_acc"]["failed"] == 0 and corr["f16_acc"]["cases"] > 0
    # The one tolerance table, row by row (its names; the low-precision rows with their bounds).
    assert set(corr["tolerances"]) == summarize.tolerance_table_names(HERE.parents[1]) >= {"fp16", "bf16", "fp16_acc", "fp8", "fp4"}
    assert {"min_cos", "max_rel_l1", "abs", "lse", "max_gain_err"} <= set(corr["tolerances"]["fp8"])
    rows = summary["bench"]["rows"]
    assert len(rows) == 8 and {r["causal"] for r in rows} == {False, True}
    by_d = {(r["D"], r["causal"]): r for r in rows}
    assert by_d[(512, False)]["ratio"] == pytest.approx(2.0)
    results = {(t["target"][:8], t["D"], t["baseline"], t["result"]) for t in summary["bench"]["targets"]}
    # Each target's ratio is to its named baseline: FA2 at D = 64/128 (200: 0.5x), the
    # efficient kernel at D = 320/512 (50: 2.0x), FA2's D = 128 rate at every D.
    assert results == {("D = 64/1", 64, "FA2(sdpa-flash)", "MISS"), ("D = 64/1", 128, "FA2(sdpa-flash)", "MISS"),
                       ("D = 320/", 320, "sdpa-efficient", "PASS"), ("D = 320/", 512, "sdpa-efficient", "PASS"),
                       *{("every D ", d, "FA2(sdpa-flash) at D = 128", "MISS") for d in (64, 128, 320, 512)}}
    assert {r["sdpa_backend"] for r in rows} == {"sdpa-default[cudnn_sdpa_sm90]",
                                                 "sdpa-default[fmha_cutlassF_f16_aligned_64x128_rf_sm80]"}
    assert by_d[(512, False)]["ratios"] == {"sdpa-flash": None, "sdpa-efficient": 2.0, "sdpa-default": 2.0}
    named = {(x["D"], x["causal"], x["baseline"]): x for x in summary["bench"]["baselines"]}
    assert named[(512, False, "sdpa-flash")]["status"] == "n/a"
    assert named[(512, False, "sdpa-flash")]["reason"] == "refused by torch: head dim > 256"
    assert len(named) == 4 * 2 * 3  # each shape's baselines once, not once per path
    md = (out / "summary.md").read_text()
    assert f"| {group} | mma | fp32 |" in md and f"| {group} | mma | fp16 |" in md and "FAILED: " in md
    assert (f"| {group} | tma | fp16 |" in md) == tma
    assert "| 512 | fp16 | False | mma | fp32 | py | 10.000 | 100.0 | n/a | 2.00 | 2.00 |" in md
    assert "| 512 | fp16 | False | FA2(sdpa-flash) |  | n/a | n/a | n/a: refused by torch: head dim > 256 |" in md
    assert "x FA2(sdpa-flash) | x sdpa-efficient | x sdpa-default |" in md
    assert "fp16_acc: rel 0.03, abs 0.05, lse 0.05" in md
    assert "TMA cases (impl=tma): " + ("ran: " if tma else "skipped: ") in md
    assert "fp16-accumulated cases (accum=fp16): ran: " in md
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
        handle.write("ffpa-cpp,512,fp16,0,1,32,8192,mma,40.0000,110.00,fp32\n"
                     "ffpa-cpp,512,fp16,1,1,32,8192,mma,25.0,88.0,fp32\n")
    (state / "sdpa.csv").write_text("source,D,dtype,causal,B,H,N,backend,ms,tflops\n"
                                    "sdpa,512,fp16,0,1,32,8192,default,80.0,55.00\n")
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "running"])
    summary = json.loads((out / "summary.json").read_text())
    rows = {(r["D"], r["causal"]): r for r in summary["bench"]["rows"]}
    assert rows[(512, False)]["ratio"] == pytest.approx(2.0)
    assert rows[(512, False)]["sdpa_backend"] == "sdpa-default"  # an older sdpa_bench.py: kernel not recorded
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


def test_tma_and_fp16_acc_paths_from_both_benches(tmp_path):
    """Python bench rows (with and without its accum column) and the runner's rows of
    every path in one table: each row names its kernel, accumulator and source; the
    runner's rows take SDPA from the python row of the same shape; targets per path."""
    import ffpa_bench as bench

    state = _state(tmp_path)
    results = [_py_result(bench, 512, False), _py_result(bench, 320, False, accum="fp16")]
    bench.save_results(results, str(state / "bench_py"), {}, lambda m: None)
    data = json.loads((state / "bench_py" / "bench.json").read_text())
    data["results"][0].pop("accum", None)  # a bench before the accum column: fp32
    (state / "bench_py" / "bench.json").write_text(json.dumps(data))
    if not RUNNER:
        pytest.skip("FFPA_DEVICE_CHECK_RUNNER is not set (CTest sets it)")
    subprocess.run([RUNNER, "--dry-run", "--bench-csv", str(state / "bench_cpp.csv")], check=True,
                   capture_output=True)
    header = (state / "bench_cpp.csv").read_text().splitlines()[0]
    assert header == "source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum"
    with open(state / "bench_cpp.csv", "a") as handle:
        for kernel, accum, tflops in (("mma", "fp32", 101.0), ("tma", "fp32", 120.0), ("mma", "fp16", 130.0),
                                      ("tma", "fp16", 150.0)):
            handle.write(f"ffpa-cpp,512,fp16,0,1,32,8192,{kernel},10.0,{tflops},{accum}\n")
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["bench"]["rows"]
    by = {(r["D"], r["kernel"], r["accum"], r["origin"]): r for r in rows}
    assert by[(512, "mma", "fp32", "py")]["ratio"] == pytest.approx(2.0)
    has_accum = "accum" in {f.name for f in dataclasses.fields(bench.Result)}
    assert (320, "mma", "fp16" if has_accum else "fp32", "py") in by
    for kernel, accum, tflops in (("tma", "fp32", 120.0), ("mma", "fp16", 130.0), ("tma", "fp16", 150.0)):
        r = by[(512, kernel, accum, "cpp")]
        assert r["sdpa_tflops"] == 50.0 and r["ratio"] == pytest.approx(tflops / 50.0)
        assert "python bench's row" in r["source"]
    assert summary["bench"]["paths"] == ["mma/fp32", "tma/fp32", "mma/fp16", "tma/fp16"]
    targets = {(t["D"], t["kernel"], t["accum"]): t for t in summary["bench"]["targets"]
               if t["baseline"] == "sdpa-efficient"}
    assert targets[(512, "mma", "fp32")]["origin"] == "py" and targets[(512, "mma", "fp32")]["result"] == "PASS"
    assert targets[(512, "tma", "fp16")]["ratio"] == pytest.approx(3.0)
    md = (out / "summary.md").read_text()
    assert "| 512 | fp16 | False | tma | fp16 | cpp |" in md
    assert "| 512 | tma | fp32 | sdpa-efficient | 2.40 | PASS |" in md
    with open(out / "bench.csv", newline="") as handle:
        assert {(r["kernel"], r["accum"]) for r in csv.DictReader(handle)} >= {("tma", "fp16"), ("mma", "fp32")}


def test_skipped_tma_is_said_and_never_counted_as_passed(tmp_path):
    """A device that loads no TMA code: the runner plans no TMA case and says why."""
    state = _state(tmp_path)
    report = _runner_report(tmp_path)
    report["cases"] = [c for c in report["cases"] if c["impl"] != "tma"]
    reason = "the device (sm_80) loads none of this build's TMA code (TMA archs 90)"
    report["tma"] = {"planned": False, "reason": reason}
    (state / "correctness.json").write_text(json.dumps(report))
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    corr = json.loads((out / "summary.json").read_text())["correctness"]
    assert corr["tma"]["cases"] == 0 and corr["tma"]["status"].startswith("skipped: " + reason)
    assert not any(g["impl"] == "tma" for g in corr["by_path"])
    md = (out / "summary.md").read_text()
    assert f"TMA cases (impl=tma): skipped: {reason} (not run, not counted as passed)" in md


def test_report_of_an_older_runner(tmp_path):
    """No accum, tma or f16_acc fields (GPU run 1): fp32 paths, the extras n/a."""
    state = _state(tmp_path)
    case = {"case": "c", "group": "D64-fp16", "impl": "mma", "ran": True, "pass": True, "impl_used": "mma",
            "abs_err": 1e-3, "rel_err": 1e-4, "lse_err": 1e-6}
    (state / "correctness.json").write_text(json.dumps({"status": "done", "cases": [case], "total": 1, "ran": 1,
                                                        "failed": 0, "groups_done": 1, "groups_total": 1}))
    (state / "bench_cpp.csv").write_text("source,D,dtype,causal,B,H,N,kernel,ms,tflops\n"
                                         "ffpa-cpp,64,fp16,0,1,32,8192,mma,2.7,204.1\n")
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["correctness"]["by_path"][0]["accum"] == "fp32"
    assert summary["correctness"]["tma"]["status"].startswith("n/a")
    assert summary["bench"]["rows"][0]["accum"] == "fp32" and summary["bench"]["rows"][0]["ratio"] is None


def test_sdpa_script_rows_per_baseline(tmp_path):
    """sdpa_bench.py's CSV (no binding): one row per shape and named baseline, refusals
    with an empty time and the reason; the runner's rows take their ratios from it."""
    state = _state(tmp_path)
    (state / "bench_cpp.csv").write_text("source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum\n"
                                         "ffpa-cpp,128,fp16,0,1,32,8192,tma,5.0,300.0,fp32\n")
    with open(state / "sdpa.csv", "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["source", "D", "dtype", "causal", "B", "H", "N", "backend", "ms", "tflops", "label", "kernel",
                    "reason"])
        w.writerow(["sdpa", 128, "fp16", 0, 1, 32, 8192, "sdpa-flash", "4.0", "375.00", "FA2(sdpa-flash)", "", ""])
        w.writerow(["sdpa", 128, "fp16", 0, 1, 32, 8192, "sdpa-cudnn", "", "", "sdpa-cudnn", "",
                    "refused by torch (sdpa_kernel(SDPBackend.CUDNN_ATTENTION)): no, it says"])
        w.writerow(["sdpa", 128, "fp16", 0, 1, 32, 8192, "sdpa-default", "2.0", "600.00",
                    "sdpa-default[cudnn_sdpa_sm90]", "cudnn_sdpa_sm90", ""])
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    summary = json.loads((out / "summary.json").read_text())
    (row,) = summary["bench"]["rows"]
    assert row["ratios"] == {"sdpa-flash": pytest.approx(0.8), "sdpa-cudnn": None, "sdpa-default": pytest.approx(0.5)}
    assert row["sdpa_backend"] == "sdpa-default[cudnn_sdpa_sm90]"
    fa2 = [t for t in summary["bench"]["targets"] if t["target"].startswith("D = 64/128")]
    assert [(t["ratio"], t["result"]) for t in fa2] == [(pytest.approx(0.8), "MISS")]
    md = (out / "summary.md").read_text()
    assert "| 128 | fp16 | False | sdpa-cudnn |  | n/a | n/a | n/a: refused by torch" in md
    with open(out / "bench.csv", newline="") as handle:
        (r,) = list(csv.DictReader(handle))
    assert r["ratio_sdpa_flash"] == "0.8" and r["ratio_sdpa_cudnn"] == "" and r["tflops_sdpa_default"] == "600.0"


def test_sweep_table_and_winners(tmp_path):
    """The sweep's rows as the runner writes them: the fastest correct configuration per
    head dim and path wins; a wrong or refused one never does, however fast."""
    state = _state(tmp_path)
    (state / "env.txt").write_text((state / "env.txt").read_text() + "sweep=full\n")
    (state / "sweep.csv").write_text(
        "source,D,path,config,default,ms,tflops,max_diff,status\n"
        "ffpa-sweep,128,tma,Br=64 Bc=64 Bd=64 (split-D) warps=4x1 stages=3,1,4.0,280.0,0,ok\n"
        "ffpa-sweep,128,tma,Br=64 Bc=64 Bd=64 (split-D) warps=4x1 stages=4,0,3.5,320.0,0.000488,ok\n"
        "ffpa-sweep,128,tma,Br=64 Bc=64 Bd=64 (split-D) warps=4x2 stages=3,0,2.0,560.0,0.5,wrong: differs\n"
        "ffpa-sweep,128,cute_tma,Br=64 Bc=64 Bd=128 (persist-D) warps=4x1 stages=2 box=64x64/64x64,1,3.9,290.0,0,ok\n"
        "ffpa-sweep,128,cute_tma,Br=128 Bc=64 Bd=128 (persist-D) warps=8x1 stages=2 box=128x64/64x64,0,,,,"
        "refused: too much shared memory\n"
        "ffpa-sweep,512,tma,Br=64 Bc=64 Bd=64 (split-D) warps=4x2 stages=3,1,28.0,190.0,0,ok\n")
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    sweep = json.loads((out / "summary.json").read_text())["sweep"]
    assert len(sweep["rows"]) == 6 and sweep["mode"] == "full"
    win = {(w["D"], w["scope"]): w for w in sweep["winners"]}
    assert win[(128, "tma")]["config"].endswith("stages=4") and win[(128, "tma")]["x_default"] == pytest.approx(320 / 280)
    assert win[(128, "cute_tma")]["default"] is True  # the refused variant does not win
    assert win[(128, "any path")]["path"] == "tma" and win[(128, "any path")]["tflops"] == 320.0  # not the wrong 560
    assert win[(512, "any path")]["default"] and win[(512, "any path")]["arch"] == "90"
    md = (out / "summary.md").read_text()
    assert "| 128 | any path | tma | Br=64 Bc=64 Bd=64 (split-D) warps=4x1 stages=4 | 320.0 | 1.14 | no |" in md
    assert "| refused: too much shared memory |" in md


def test_no_sweep_says_so(tmp_path):
    state = _state(tmp_path)
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "running"])
    assert "No sweep results." in (out / "summary.md").read_text()


def test_lowp_cases_planned_judged_and_reported(tmp_path):
    """The runner plans a low-precision group per compiled head dim and dtype with the
    kernels its "lowp" block plans (outlier-K inputs among them), long rows and the api
    group's checks; the summary reports their metrics against the fp8 / fp4 bounds, and a
    case outside them fails with its metrics named."""
    report = _runner_report(tmp_path, fail_lowp=True)
    lowp = report["lowp"]
    kernels = [k for k in ("cute_fp8", "cute_tma_fp8", "cute_tma_fp4") if lowp[k]]
    assert lowp["planned"] == bool(kernels) and lowp["reason"]
    if not kernels:
        pytest.skip("this build has no low-precision code (the dev tree's arch 89 has FP8)")
    cases = report["cases"]
    dims = sorted({c["d"] for c in cases if c["group"].startswith("D")})
    dtypes = sorted({c["dtype"] for c in cases if c["group"].startswith("D")})
    for d in dims:
        for dt in dtypes:
            mine = [c for c in cases if c["group"] == f"lowp-D{d}-{dt}"]
            assert {c["impl"] for c in mine} == set(kernels), (d, dt)
            assert {c["causal"] for c in mine} == {False, True}
            assert {c["inputs"] for c in mine} == {"normal", "outlier-k"}
            assert any(c["hkv"] < c["hq"] for c in mine) and any(c["nq"] % 64 and c["nkv"] % 64 for c in mine)
            assert all(c["tolerance"] == ("fp4" if "fp4" in c["impl"] else "fp8") for c in mine)
    long_lowp = [c for c in cases if c["group"] == "long" and c["impl"] in LOWP_IMPLS]
    assert {c["impl"] for c in long_lowp} == set(kernels) and all(c["nkv"] == 8192 for c in long_lowp)
    assert any(c["inputs"] == "outlier-k" for c in long_lowp)
    api = [c for c in cases if c["group"] == "api"]
    fp8 = [c for c in api if c["impl"] == "fp8" and c["expect_error"] == "ok"]
    assert len(fp8) == 1 and lowp["fp8_resolves_to"] == ("cute_tma_fp8" if lowp["cute_tma_fp8"] else "cute_fp8")
    assert any(c["impl"] == "fp8" and c["accum"] == "fp16" and c["expect_error"] == "impl" for c in api)
    assert any(c["impl"] == "fp8" and "misaligned" in c["case"] and c["expect_error"] == "layout" for c in api)
    if not lowp["cute_tma_fp4"]:
        assert any(c["impl"] == "fp4" and c["expect_error"] == "impl" and "sm_120 family" in c["expect_in_message"]
                   for c in api)

    state = _state(tmp_path)
    (state / "correctness.json").write_text(json.dumps(report))
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "failed", "--exit-code", "1"])
    corr = json.loads((out / "summary.json").read_text())["correctness"]
    n_lowp = sum(1 for c in cases if c["impl"] in LOWP_IMPLS and c["expect_error"] == "ok")
    assert corr["lowp"]["cases"] == n_lowp and corr["lowp"]["failed"] == 1
    assert corr["lowp"]["status"].startswith(f"ran {n_lowp} of {n_lowp} cases, 1 failed")
    rows = {(g["group"], g["impl"]): g for g in corr["lowp_paths"]}
    first = next(c for c in cases if c["impl"] in LOWP_IMPLS and c["expect_error"] == "ok")  # the failed one
    group = first["group"]
    row = rows[(group, first["impl"])]
    assert row["bounds"] == report["tolerances"]["fp8"] and row["tolerance"] == "fp8"
    assert row["min_cos"] == 0.9971 and row["max_rel_l1"] == 0.045 and row["max_gain_err"] == pytest.approx(0.004)
    assert ("long", kernels[0]) in rows and ("api", "fp8") in rows
    assert all(g["impl"] in LOWP_IMPLS for g in corr["lowp_paths"])  # not the refused api checks' rows
    (failed,) = [f for f in corr["failed_cases"] if f["cos"] is not None]
    assert failed["cos"] == 0.9971 and "cos < min_cos" in failed["error"]
    md = (out / "summary.md").read_text()
    b = report["tolerances"]["fp8"]  # the bounds of cmake/kernel-facts.json, as the runner reports them
    assert (f"fp8: cos >= {b['min_cos']:g}, rel L1 <= {b['max_rel_l1']:g}, abs <= {b['abs']:g}, "
            f"lse <= {b['lse']:g}, |gain - 1| <= {b['max_gain_err']:g}") in md
    assert "Low-precision cases (impl=cute_fp8, cute_tma_fp8, cute_tma_fp4): ran " in md
    assert (f"| {group} | {first['impl']} | {row['cases']} | {row['ran']} | 1 | 0.99710 (>= {b['min_cos']:g}) | "
            f"0.0450 (<= {b['max_rel_l1']:g}) | 0.1100 (<= {b['abs']:g}) | 0.0200 (<= {b['lse']:g}) | "
            f"0.0040 (<= {b['max_gain_err']:g}) |") in md
    assert "cos=0.99710 rel_l1=0.0450 gain=0.9960" in md


def test_fp8_bench_rows_against_our_paths_and_sdpa(tmp_path):
    """The runner's FP8 rows: ratios to our fp32-accumulated mma / tma / cute_tma rows of
    the same shape and to each named SDPA baseline; no 16-bit target holds them; on sm_90
    the summary says they time the HMMA lowering."""
    if not RUNNER:
        pytest.skip("FFPA_DEVICE_CHECK_RUNNER is not set (CTest sets it)")
    state = _state(tmp_path)  # env: arch 90
    proc = subprocess.run([RUNNER, "--dry-run", "--bench-csv", str(state / "bench_cpp.csv")], check=True,
                          capture_output=True, text=True)
    # The plan's low-precision rows: those the runner's "Low-precision cases" line plans.
    planned = set(re.findall(r"^bench plan: D=\d+ fp16 causal=[01] impl=(cute_fp8|cute_tma_fp8|cute_tma_fp4) ",
                             proc.stdout, re.M))
    info_line = next(line for line in proc.stdout.splitlines() if line.startswith("Low-precision cases: "))
    for k in ("cute_fp8", "cute_tma_fp8", "cute_tma_fp4"):
        assert (k in planned) == (f"{k} planned" in info_line), (k, info_line)
    with open(state / "bench_cpp.csv", "a") as handle:  # rows as the runner prints them on the H200
        for kernel, tflops in (("mma", 200.0), ("tma", 250.0), ("cute_tma", 280.0), ("cute_fp8", 180.0),
                               ("cute_tma_fp8", 210.0)):
            handle.write(f"ffpa-cpp,128,fp16,0,1,32,8192,{kernel},5.0,{tflops},fp32\n")
        handle.write("ffpa-cpp,128,fp16,1,1,32,8192,cute_tma_fp8,3.0,190.0,fp32\n")  # no 16-bit row: n/a
    with open(state / "sdpa.csv", "w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["source", "D", "dtype", "causal", "B", "H", "N", "backend", "ms", "tflops", "label", "kernel",
                    "reason"])
        w.writerow(["sdpa", 128, "fp16", 0, 1, 32, 8192, "sdpa-flash", "4.0", "350.00", "FA2(sdpa-flash)", "", ""])
        w.writerow(["sdpa", 128, "fp16", 0, 1, 32, 8192, "sdpa-default", "2.0", "700.00",
                    "sdpa-default[cudnn_sdpa_sm90]", "cudnn_sdpa_sm90", ""])
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    bench = json.loads((out / "summary.json").read_text())["bench"]
    lowp = {(x["kernel"], x["causal"]): x for x in bench["lowp"]}
    assert set(lowp) == {("cute_fp8", False), ("cute_tma_fp8", False), ("cute_tma_fp8", True)}
    x = lowp[("cute_tma_fp8", False)]
    assert x["x_ours"] == {"mma": pytest.approx(1.05), "tma": pytest.approx(0.84), "cute_tma": pytest.approx(0.75)}
    assert x["x_baselines"] == {"sdpa-flash": pytest.approx(0.6), "sdpa-default": pytest.approx(0.3)}
    assert lowp[("cute_tma_fp8", True)]["x_ours"] == {"mma": None, "tma": None, "cute_tma": None}
    assert bench["paths"][-2:] == ["cute_fp8/fp32", "cute_tma_fp8/fp32"]
    assert not any(t["kernel"] in LOWP_IMPLS for t in bench["targets"])
    md = (out / "summary.md").read_text()
    assert "### Low-precision rows against our 16-bit paths and SDPA" in md
    assert "lowers the FP8 mma to fp16 HMMA" in md
    assert "| 128 | fp16 | False | cute_tma_fp8 | cpp | 210.0 | 1.05 | 0.84 | 0.75 | 0.60 | 0.30 |" in md
    with open(out / "bench.csv", newline="") as handle:
        by = {(r["kernel"], r["causal"]): r for r in csv.DictReader(handle)}
    assert by[("cute_fp8", "False")]["ratio_ffpa_mma"] == "0.9" and by[("mma", "False")]["ratio_ffpa_mma"] == ""


def test_report_before_the_tolerance_table(tmp_path):
    """A report whose tolerances name fp16 accumulation "fp16-acc" and have no
    low-precision rows (runners before the tolerance table): rendered as it was."""
    state = _state(tmp_path)
    tol = {"fp16": {"rel": 1e-2, "abs": 2e-2, "lse": 2e-2}, "fp16-acc": {"rel": 3e-2, "abs": 5e-2, "lse": 5e-2}}
    case = {"case": "c", "group": "D64-fp16", "impl": "mma", "accum": "fp16", "ran": True, "pass": True,
            "impl_used": "mma", "abs_err": 1e-3, "rel_err": 1e-4, "lse_err": 1e-6}
    (state / "correctness.json").write_text(json.dumps({"status": "done", "cases": [case], "total": 1, "ran": 1,
                                                        "failed": 0, "groups_done": 1, "groups_total": 1,
                                                        "tolerances": tol}))
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["correctness"]["lowp"]["status"].startswith("n/a") and summary["correctness"]["lowp_paths"] == []
    md = (out / "summary.md").read_text()
    assert "fp16-acc: rel 0.03, abs 0.05, lse 0.05" in md and "(fp16-acc: fp16 inputs with accum=fp16" in md
    assert "Low-precision rows (fp8, fp4)" not in md


def test_backward_cases_planned_judged_and_reported(tmp_path):
    """The runner plans a backward group per backward instance of the build (GQA, both
    causal alignments, ragged Nq != Nkv both ways, a strided view), each case judged by the
    bwd_fp16 / bwd_bf16 row; the summary reports them against those bounds, and a bench
    row "bwd" gets no forward baseline and no forward target line."""
    report = _runner_report(tmp_path)
    bwd = report["bwd"]
    cases = [c for c in report["cases"] if c["impl"] == "bwd"]
    assert bwd["planned"] == bool(cases) and bwd["reason"]
    if not cases:
        pytest.skip("this build has no backward kernels")
    for group in sorted({c["group"] for c in cases}):
        mine = [c for c in cases if c["group"] == group]
        dt = mine[0]["dtype"]
        assert group == f"bwd-D{mine[0]['d']}-{dt}" and all(c["tolerance"] == f"bwd_{dt}" for c in mine)
        assert {(c["causal"], c["top_left"]) for c in mine} == {(False, False), (True, False), (True, True)}
        assert any(c["hkv"] < c["hq"] for c in mine) and any(c["layout"] == "bnhd" for c in mine)
        assert any(c["nq"] > c["nkv"] for c in mine) and any(c["nq"] < c["nkv"] for c in mine)
        # NaN where the bottom-right mask hides it: in dO of a row that sees no key, in K, in V.
        assert {c["inputs"] for c in mine if c["inputs"] != "normal"} >= {"nan-dout[4]"}
        assert all(c["causal"] and not c["top_left"] and c["nq"] > c["nkv"]
                   for c in mine if c["inputs"].startswith("nan-"))
    assert set(report["tolerances"]["bwd_fp16"]) == {"max_rel", "max_rel_l1"}
    state = _state(tmp_path)
    (state / "correctness.json").write_text(json.dumps(report))
    with open(state / "bench_cpp.csv", "w") as handle:
        handle.write("source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum\n"
                     "ffpa-cpp,512,fp16,0,1,32,8192,mma,20.0,110.0,fp32\n"
                     "ffpa-cpp,512,fp16,0,1,32,8192,bwd,60.0,91.6,fp32\n")
    (state / "sdpa.csv").write_text("D,dtype,causal,backend,label,kernel,ms,tflops,reason\n"
                                    "512,fp16,0,sdpa-efficient,sdpa-efficient,k,40.0,55.0,\n")
    # The python bench's forward + backward rows (direction "bwd"), baselines in its process.
    (state / "bench_py_bwd").mkdir()
    base = {"direction": "bwd", "dtype": "fp16", "causal": False, "Nq": 8192, "Hq": 32, "impl": "mma", "err": 1e-3}
    (state / "bench_py_bwd" / "bench.json").write_text(json.dumps({"results": [
        {**base, "D": 512, "ffpa_ms": 100.0, "ffpa_tflops": 153.9, "baselines": [
            {"name": "sdpa-efficient", "label": "sdpa-efficient", "ms": 300.0, "tflops": 51.3},
            {"name": "sdpa-flash", "label": "FA2(sdpa-flash)", "ms": None, "tflops": None, "reason": "refused"},
            {"name": "sdpa-default", "label": "sdpa-default", "ms": 300.0, "tflops": 51.3}]},
        {**base, "D": 320, "ffpa_ms": 100.0, "ffpa_tflops": 60.0, "baselines": [
            {"name": "sdpa-default", "label": "sdpa-default", "ms": 120.0, "tflops": 50.0}]},
        {**base, "direction": "fwd", "D": 512, "ffpa_ms": 1.0, "ffpa_tflops": 1.0, "baselines": []},
        # The backward alone (direction "bwd-only"): judged against sdpa-efficient / FA2's alone.
        {**base, "direction": "bwd-only", "D": 512, "ffpa_ms": 60.0, "ffpa_tflops": 183.3, "baselines": [
            {"name": "sdpa-efficient", "label": "sdpa-efficient", "ms": 250.0, "tflops": 44.0},
            {"name": "sdpa-default", "label": "sdpa-default", "ms": 250.0, "tflops": 44.0}]},
        {**base, "direction": "bwd-only", "D": 128, "ffpa_ms": 10.0, "ffpa_tflops": 80.0, "baselines": [
            {"name": "sdpa-flash", "label": "FA2(sdpa-flash)", "ms": 8.0, "tflops": 100.0}]}]}))
    out = tmp_path / "out"
    summarize.main([str(state), str(out), "--status", "passed", "--exit-code", "0"])
    summary = json.loads((out / "summary.json").read_text())
    bw = summary["bench"]["backward"]
    assert [(x["D"], x["x_forward_time"]) for x in bw["cpp"]] == [(512, 3.0)]
    assert [r["D"] for r in bw["fwd_bwd"]] == [320, 512]  # the forward row is not one of them
    assert bw["fwd_bwd"][1]["ratios"]["sdpa-efficient"] == pytest.approx(3.0)
    assert [r["D"] for r in bw["bwd_only"]] == [128, 512]
    assert [(t["D"], t["baseline"], t["result"]) for t in bw["targets"]] == [
        (320, "sdpa-default", "MISS"), (512, "sdpa-default", "PASS"),
        (512, "sdpa-efficient", "PASS (stretch)"), (128, "FA2(sdpa-flash)", "MISS")]
    assert bw["unmeasured"] is None
    corr = summary["correctness"]
    assert corr["bwd"]["cases"] == len(cases) and corr["bwd"]["failed"] == 0
    assert corr["f16_acc"]["cases"] == sum(1 for c in report["cases"] if c["accum"] == "fp16"
                                           and c["expect_error"] == "ok" and c["impl"] != "bwd")
    row = next(g for g in corr["bwd_paths"] if g["group"] == cases[0]["group"])
    assert row["bwd_max_rel_l1"] == 2e-4 and row["bounds"] == report["tolerances"][cases[0]["tolerance"]]
    md = (out / "summary.md").read_text()
    b = report["tolerances"]["bwd_fp16"]
    assert f"bwd_fp16: per gradient max |g - ref| / max |ref| <= {b['max_rel']:g}, rel L1 <= {b['max_rel_l1']:g}" in md
    assert "### Backward cases" in md and "### Backward (fp16, B=1, H=32, N=8192)" in md
    assert "| D = 320/512 forward + backward >= 2.0x SDPA's (its own dispatch) | 512 | sdpa-default | 3.00 | PASS |" in md
    assert "| D = 64/128 backward alone >= 0.9x FA2(sdpa-flash)'s backward alone | 128 | FA2(sdpa-flash) | 0.80 | MISS |" in md
    assert "Backward alone (python bench" in md and "Not in this run" not in md
    rows = summary["bench"]["rows"]
    (bwd_row,) = [r for r in rows if r["kernel"] == "bwd"]
    (fwd_row,) = [r for r in rows if r["kernel"] == "mma"]
    assert bwd_row["baselines"] == {} and "bench-bwd phase" in bwd_row["source"]
    assert fwd_row["baselines"]["sdpa-efficient"]["tflops"] == 55.0
    assert all(t["kernel"] != "bwd" for t in summary["bench"]["targets"])
