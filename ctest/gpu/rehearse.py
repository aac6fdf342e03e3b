#!/usr/bin/env python3
"""The GPU device check rehearsed on a machine without a GPU (CTest label gpu-rehearsal).

    rehearse.py venv   --work DIR                 make the stand-in for the GPU image's python3
    rehearse.py tree   --work DIR --cutlass-dir D --nvcc NVCC
                                                  make the tree the device check is given
    rehearse.py run    --work DIR --case CASE     run ctest/gpu/device_check.sh --no-gpu and check OUT

The GPU image has nvcc, CMake, Ninja and a python3 with numpy, pybind11 and pytest (and
torch); it has no OpenSSL, zlib, nlohmann_json or GTest development packages and no
tools venv, and maybe no Python.h. The stand-in is a fresh venv of a plain CPython with
numpy, pybind11 and pytest at the versions of tools/requirements.txt (no torch: the
bench's SDPA timing reports that it cannot run). Every case configures with
CMAKE_DISABLE_FIND_PACKAGE_{OpenSSL,ZLIB,nlohmann_json,GTest} and a missing tools venv,
so a kernels-only tree that reached for any of them fails here first.

The script runs in a copy of the source tree as the device check is given one on a GPU
machine: the tracked and untracked-not-ignored files (no .git, no .venv, no build
trees) plus the one ignored path it needs, .cutlass/, the CUTLASS header subset made by
`cmake -P cmake/FfpaCutlassSubset.cmake` (docs/perf.md). With the tools venv out of
reach, the kernels-only build can only take CUTLASS from that subset; a second copy
without it must fail at configure, naming the fix.

Cases:
  with-headers  the binding is built; CUTLASS came from the carried subset (gpu-check.txt
                and env.txt say where, which version, how many files); the runner's plan (with the TMA and fp16-accumulated
                cases: the arch-90 build holds TMA code; the low-precision cases of the kernels whose
                code arch 90 holds, cute_fp8 and cute_tma_fp8, and NVFP4's refusal; the bounds of the one
                tolerance table), the binding import, pytest -m gpu (all skipped: exit 77), the bench
                plans (every path: mma, tma, fp16 accum, cute, cute_tma, cute_fp8, cute_tma_fp8)
  no-headers    Python.h hidden (FFPA_PYTHON_INCLUDE_DIR at an empty directory): no
                binding; the C++ runner's plan and bench plan and the SDPA script's plan
  time-limits   the build phase limited to 1 s: it times out, later phases do not run,
                the run fails, and OUT still holds a summary that says so and the logs
  gpu-mode      GPU mode against a stand-in nvidia-smi that reports an H200: every
                GPU-only path of the script (correctness, pytest -m gpu, both bench
                runs) runs and, with no CUDA device behind it, fails cleanly: exit 1,
                each phase named, the summary says failed
  (each of the first four with the sweep's subset: FFPA_DEVICE_CHECK_SWEEP=subset)
  no-cutlass    the carried tree without .cutlass/: configure fails with the message
                naming the subset command, nothing is built, the run fails, the
                summary says so
The cold kernels-only build of the CuTe kernels takes minutes on two cores, so the
runs build one head dim (REHEARSAL_DIMS: a split-D one) and get a larger budget than the
GPU image's default (REHEARSAL_BUDGET); the phases keep their own limits otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import summarize  # beside this file: the summary's reader of the tolerance table

REPO = Path(__file__).resolve().parents[2]
ALLOWED_OUT = {"summary.json", "summary.md", "bench.csv", "bench.png", "logs.tar.gz"}
# The device check's whole input is the source tree and the CUTLASS subset (a bare GPU
# image installs nothing). It stays small so that copying it to the GPU machine is seconds
# of a check whose own budget is FFPA_DEVICE_CHECK_BUDGET: at most 64 MiB.
CARRY_LIMIT = 64 * 1024 * 1024
REHEARSAL_BUDGET = 900
# Head dims the rehearsal builds: one split-D CuTe kernel (320, the 4x2 warp layout). What
# the rehearsal proves is the script (phases, plans, limits, outputs), one head dim as well
# as many; each dim's instances and sweep variants cost minutes on two shared cores, and a
# second dim took the run past its budget under CI's load. The persist-D instances are
# compiled by the ci tree (every release dim, TMA-fed on 120f) and by the GPU run itself.
REHEARSAL_DIMS = (320,)
HIDDEN_PACKAGES = ("OpenSSL", "ZLIB", "nlohmann_json", "GTest")
IMAGE_PACKAGES = ("numpy", "pybind11", "pytest")


def lowp_kernels_with_code(arch: str, facts: dict | None = None) -> set[str]:
    """The low-precision kernels whose code a build for ``arch`` holds: the impls of
    cmake/kernel-facts.json with a precision of their own, less the aliases named after their
    precision (impl="fp8" / "fp4" pick a kernel for the device), each judged by the package's
    own rule (ffpa_attn.validation.impl_has_code: every arch feature the impl needs) over the
    file's arch rules. The package is imported from this tree's python/ (no build-info module
    there: the facts are passed in)."""
    facts = summarize.kernel_facts(REPO) if facts is None else facts
    sys.path.insert(0, str(REPO / "python"))
    try:
        from ffpa_attn import validation
    finally:
        sys.path.remove(str(REPO / "python"))
    return {impl["name"] for impl in facts["impls"]
            if impl.get("precision") and impl["name"] != impl["precision"]
            and validation.impl_has_code(impl["name"], arch, impl["needs"], facts["arch_rules"])}


# The rehearsal's (and the H200's) device-check build is for arch 90: by today's rules FP8
# from sm_89, fed by cp.async below the sm_120 family and by TMA from sm_90 (cute_fp8 and
# cute_tma_fp8), NVFP4 only in the sm_120 family's 120f / 120a.
ARCH90_LOWP = lowp_kernels_with_code("90")


def fail(message: str) -> None:
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)
    print(f"ok: {message}")


def plain_python() -> str:
    """A CPython 3.12 that is not the tools venv (pyenv's binary, else python3.12)."""
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() or os.path.expanduser(
        "~/.pyenv")
    for cand in sorted(Path(root, "versions").glob("3.12*/bin/python3.12"), reverse=True):
        return str(cand)
    found = shutil.which("python3.12") or shutil.which("python3")
    if not found:
        fail("no python3.12 to stand in for the GPU image's python3")
    return found


def pinned(names: tuple[str, ...]) -> list[str]:
    pins = {}
    for line in (REPO / "tools" / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1).lower()] = m.group(0)
    return [pins.get(n, n) for n in names]


def make_venv(work: Path) -> int:
    venv = work / "image-python"
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([plain_python(), "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pinned(IMAGE_PACKAGES)],
                   check=True)
    print(f"image stand-in: {py} with {' '.join(pinned(IMAGE_PACKAGES))}")
    return 0


def make_tree(work: Path, cutlass_dir: str, nvcc: str) -> int:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    files = [f for f in listed if f and (REPO / f).is_file()]
    for name in ("tree", "tree-no-cutlass"):
        dest = work / name
        if dest.exists():
            shutil.rmtree(dest)
        for f in files:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dest / f)
    tree = work / "tree"
    r = subprocess.run(["cmake", f"-DOUT={tree / '.cutlass'}", f"-DFFPA_CUTLASS_DIR={cutlass_dir}", f"-DNVCC={nvcc}",
                        "-P", str(tree / "cmake" / "FfpaCutlassSubset.cmake")], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "cmake -P cmake/FfpaCutlassSubset.cmake made the subset")
    subset = (tree / ".cutlass" / "SUBSET.txt").read_text()
    n = int(re.search(r"^files=(\d+)$", subset, re.M)[1])
    headers = [p for p in (tree / ".cutlass" / "include").rglob("*") if p.is_file()]
    check(n == len(headers) and n > 0, f"SUBSET.txt counts the {len(headers)} headers copied")
    full = sum(1 for p in Path(cutlass_dir).rglob("*") if p.is_file())
    check(n < full, f"only the headers the kernels include: {n} of the {full} files")
    carried = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    check(carried <= CARRY_LIMIT, f"tree + subset = {carried / 2**20:.1f} MiB, within the device check's 64 MiB input")
    print(f"carried tree: {tree} ({len(files)} files) and {tree / '.cutlass'} ({n} headers)")
    return 0


def run_case(work: Path, case: str) -> int:
    py = work / "image-python" / "bin" / "python"
    if not py.exists():
        fail(f"{py} is missing: the fixture gpu.rehearsal.venv did not run")
    tree = work / ("tree-no-cutlass" if case == "no-cutlass" else "tree")
    if not (tree / "ctest" / "gpu" / "device_check.sh").exists():
        fail(f"{tree} is missing: the fixture gpu.rehearsal.tree did not run")
    script = tree / "ctest" / "gpu" / "device_check.sh"
    out = work / case / "out"
    scratch = work / case / "scratch"
    for d in (out, scratch):
        if d.exists():
            shutil.rmtree(d)
    cmake_args = [f"-DCMAKE_DISABLE_FIND_PACKAGE_{p}=ON" for p in HIDDEN_PACKAGES]
    cmake_args.append(f"-DFFPA_TOOLS_PYTHON={work / 'no-tools-venv' / 'bin' / 'python'}")
    if case == "no-headers":
        empty = work / case / "no-python-headers"
        empty.mkdir(parents=True, exist_ok=True)
        cmake_args.append(f"-DFFPA_PYTHON_INCLUDE_DIR={empty}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FFPA_", "VIRTUAL_ENV", "PYTHON"))}
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    env.update({
        "FFPA_DEVICE_PYTHON": str(py),
        "FFPA_DEVICE_CHECK_WORK": str(scratch),
        "FFPA_DEVICE_CHECK_COMMIT": commit.strip() or "unknown",  # the carried tree has no .git
        "FFPA_DEVICE_CHECK_BUDGET": str(REHEARSAL_BUDGET),
        "FFPA_DEVICE_CHECK_TIMEOUTS": f"build={REHEARSAL_BUDGET - 120},sweep-build=400",
        "FFPA_DEVICE_CHECK_DIMS": ";".join(str(d) for d in REHEARSAL_DIMS),
        # The sweep's first variant of each kind per head dim: its build (compiled once,
        # then taken from the compiler cache by the later cases), plan and summary.
        "FFPA_DEVICE_CHECK_SWEEP": "subset",
        "FFPA_DEVICE_CHECK_CMAKE_ARGS": " ".join(cmake_args),
        "FFPA_DEVICE_CHECK_JOBS": os.environ.get("FFPA_DEVICE_CHECK_JOBS", str(os.cpu_count() or 2)),
        # The tools venv must not be reachable through PATH either.
        "PATH": os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p),
    })
    if case == "gpu-mode":
        fake = work / case / "fake-bin"
        fake.mkdir(parents=True, exist_ok=True)
        smi = fake / "nvidia-smi"
        smi.write_text("#!/bin/sh\ncase \"$*\" in\n  -L) echo 'GPU 0: NVIDIA H200 (stand-in)';;\n"
                       "  *name*) echo 'NVIDIA H200';;\n  *driver_version*) echo '580.00';;\n"
                       "  *compute_cap*) echo '9.0';;\nesac\n")
        smi.chmod(0o755)
        env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    if case == "time-limits":
        # No compiler cache: a warm ccache could finish the build inside the limit.
        env["FFPA_DEVICE_CHECK_CMAKE_ARGS"] += " -DFFPA_COMPILER_LAUNCHER=none"
        env["FFPA_DEVICE_CHECK_TIMEOUTS"] = "build=1"
    t0 = time.monotonic()
    mode_args = [] if case == "gpu-mode" else ["--no-gpu", "--arch", "90"]
    proc = subprocess.run(["bash", str(script), *mode_args, str(out)], env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    print(proc.stdout[-6000:])
    print(proc.stderr[-3000:], file=sys.stderr)

    lines = proc.stdout.splitlines()
    first = ("device check (gpu): GPU NVIDIA H200, driver 580.00, arch 90" if case == "gpu-mode"
             else "device check (no-gpu): GPU none, driver none, arch 90")
    check(bool(lines) and lines[0].startswith(first), "the first line names the GPU, driver and arch")
    check(len(lines) > 1 and re.search(r"nvcc [0-9.]+, torch .*, python .*, commit", lines[1]) is not None,
          "the second line names nvcc, torch, python and the commit")

    files = sorted(p.name for p in out.iterdir())
    check(len(files) <= 8, f"OUT holds at most 8 files: {files}")
    check(all(p.is_file() for p in out.iterdir()), "OUT holds plain files only (no build tree, no venv)")
    check(set(files) <= ALLOWED_OUT, f"OUT holds only the documented files: {files}")
    check({"summary.json", "summary.md", "logs.tar.gz"} <= set(files), "summary.json, summary.md, logs.tar.gz exist")
    check((scratch / "build" / "CMakeCache.txt").exists(), "the build went into the scratch directory")

    summary = json.loads((out / "summary.json").read_text())
    phases = {p["phase"]: p for p in summary["phases"]}
    for p in summary["phases"]:
        check(isinstance(p["seconds"], int), f"phase {p['phase']} has its time ({p['seconds']} s)")
    with tarfile.open(out / "logs.tar.gz") as tar:
        members = set(tar.getnames())
    check("./logs/configure.log" in members and "./env.txt" in members, "the tarball holds the logs and env")

    configure_log = (scratch / "state" / "logs" / "configure.log").read_text()
    check("FFPA_COMPONENTS" not in configure_log or "kernels only" in configure_log,
          "configure ran the kernels-only tree")
    # CMake lists the unused variables only at the end of a configure that completed;
    # the no-cutlass case stops at its (expected) error before that.
    if case != "no-cutlass":
        for pkg in HIDDEN_PACKAGES:
            check(f"CMAKE_DISABLE_FIND_PACKAGE_{pkg}" in configure_log,
                  f"configure never asked for {pkg} (CMake lists the unused CMAKE_DISABLE_FIND_PACKAGE_{pkg})")

    env_txt = (scratch / "state" / "env.txt").read_text()
    if case == "no-cutlass":
        check(proc.returncode == 1, f"a tree without the CUTLASS subset fails the run (exit {proc.returncode})")
        check(phases["configure"]["status"].startswith("failed"), f"configure: {phases['configure']['status']}")
        check("build" not in phases and "correctness" not in phases, "nothing is built or run after it")
        flat = " ".join(configure_log.split())  # CMake reflows long messages
        check("the CuTe kernels need CUTLASS" in flat and "cmake -P cmake/FfpaCutlassSubset.cmake" in flat,
              "configure names the missing headers and the command that makes the subset")
        check("cutlass=not found" in env_txt, "env.txt says no CUTLASS headers were found")
        check(summary["status"] == "rehearsal failed", f"summary says the run failed: {summary['status']}")
        return 0
    pin = re.search(r"^nvidia-cutlass==(\d+\.\d+\.\d+)", (REPO / "tools" / "requirements-cutlass.txt").read_text(),
                    re.M)[1]
    n_subset = re.search(r"^files=(\d+)$", (tree / ".cutlass" / "SUBSET.txt").read_text(), re.M)[1]
    gpu_check = (scratch / "build" / "gpu-check.txt").read_text()
    check(f"head_dims={','.join(str(d) for d in REHEARSAL_DIMS)}" in gpu_check.splitlines(),
          "gpu-check.txt: the head dims asked for")
    for line in (f"cutlass={tree / '.cutlass' / 'include'}", f"cutlass_version={pin}", "cutlass_source=subset",
                 f"cutlass_files={n_subset}"):
        check(line in gpu_check.splitlines(), f"gpu-check.txt: {line}")
    check(f"cutlass={tree / '.cutlass' / 'include'} (CUTLASS {pin}, subset, {n_subset} files)" in env_txt,
          "env.txt names the CUTLASS headers the build used")
    if case == "gpu-mode":
        check(proc.returncode == 1, f"no CUDA device behind nvidia-smi fails the run (exit {proc.returncode})")
        check(phases.get("sweep-build", {}).get("status") == "ok", f"the sweep builds: {phases.get('sweep-build')}")
        for name in ("correctness", "python-gpu", "torch-gpu", "bench-cpp", "bench", "bench-causal", "bench-bwd", "sweep"):
            check(phases.get(name, {}).get("status", "").startswith("failed"),
                  f"GPU phase {name} ran and failed cleanly: {phases.get(name)}")
        check(summary["status"] == "failed" and summary["env"]["gpu"] == "NVIDIA H200", "summary: failed, on the H200")
        check("SKIPPED: no CUDA device" in (scratch / "state" / "logs" / "correctness.log").read_text(),
              "the runner says why")
        return 0
    if case == "time-limits":
        check(proc.returncode == 1, f"a timed-out build fails the run (exit {proc.returncode})")
        check(phases["build"]["status"].startswith("timed out"), f"build: {phases['build']['status']}")
        check("correctness" not in phases, "no correctness phase after a failed build")
        check("sweep-build" not in phases, "no sweep without the runner")
        check(summary["status"] == "rehearsal failed" and summary["exit_code"] == 1,
              f"summary says the run failed: {summary['status']}")
        return 0

    check(proc.returncode == 0, f"the rehearsal passes (exit {proc.returncode})")
    check(summary["status"] == "rehearsed" and summary["exit_code"] == 0, "summary status rehearsed, exit code 0")
    check(took < REHEARSAL_BUDGET + 30, f"the run kept its time budget ({took:.0f} s)")
    for name in ("configure", "build", "build-binding", "correctness", "bench-cpp"):
        check(phases.get(name, {}).get("status", "").startswith("ok"), f"phase {name}: {phases.get(name)}")
    corr = summary["correctness"]
    check(corr["status"] == "planned" and corr["ran"] == 0 and corr["total"] > 0,
          f"the runner planned {corr['total']} cases and launched none")
    groups = corr["by_group"]
    matrix = json.loads((REPO / "cmake" / "release-matrix.json").read_text())
    check(set(REHEARSAL_DIMS) <= set(matrix["head_dims"]), f"the rehearsal's head dims {REHEARSAL_DIMS} are release ones")
    dims = [str(d) for d in REHEARSAL_DIMS]
    for d in dims:
        for dt in ("fp16", "bf16"):
            check(f"D{d}-{dt}" in groups, f"group D{d}-{dt} is planned")
    check("long" in groups and "api" in groups, "the long-sequence and api groups are planned")
    rows = summarize.tolerance_table_names(REPO)
    check(set(corr["tolerances"]) == rows and {"fp16", "bf16", "fp16_acc", "fp8", "fp4"} <= rows,
          f"the tolerances are cmake/kernel-facts.json's table, row by row: {sorted(rows)}")
    paths = {(g["group"], g["impl"], g["accum"]) for g in corr["by_path"]}
    impl_accums = (("mma", "fp32"), ("simt", "fp32"), ("tma", "fp32"), ("mma", "fp16"), ("tma", "fp16"),
                   ("cute", "fp32"), ("cute_tma", "fp32"), ("cute", "fp16"), ("cute_tma", "fp16"))
    for d in dims:
        for impl, accum in impl_accums:
            check((f"D{d}-fp16", impl, accum) in paths, f"D{d}-fp16 plans impl={impl} accum={accum}")
        check((f"D{d}-bf16", "tma", "fp32") in paths and (f"D{d}-bf16", "cute_tma", "fp32") in paths
              and (f"D{d}-bf16", "mma", "fp16") not in paths, f"D{d}-bf16 plans tma and cute_tma, no fp16 accumulation")
    check(("long", "tma", "fp32") in paths and ("long", "cute_tma", "fp32") in paths,
          "the long group has tma and cute_tma rows")
    check(corr["cute"]["planned"] and corr["cute"]["cases"] > 0, f"the CuTe cases are planned: {corr['cute']['status']}")
    check(corr["tma"]["planned"] and corr["tma"]["cases"] > 0 and corr["f16_acc"]["planned"],
          f"TMA ({corr['tma']['status']}) and fp16 accumulation ({corr['f16_acc']['status']}) are planned")
    check_lowp(scratch, corr, paths, dims)
    # The backward: a group per backward instance (every compiled head dim and dtype),
    # judged by the bwd_fp16 / bwd_bf16 rows, and a bench row per head dim, causal and not.
    for d in dims:
        for dt in ("fp16", "bf16"):
            check((f"bwd-D{d}-{dt}", "bwd", "fp32") in paths, f"group bwd-D{d}-{dt} is planned")
    check(corr["bwd"]["planned"] and corr["bwd"]["cases"] > 0, f"the backward cases are planned: {corr['bwd']['status']}")
    md = (out / "summary.md").read_text()
    check("TMA cases (impl=tma): planned (dry run)" in md and "fp16_acc: rel " in md,
          "the summary states the TMA status and the fp16_acc tolerances")
    check("Low-precision cases (impl=cute_fp8, cute_tma_fp8, cute_tma_fp4): planned (dry run)" in md
          and "fp8: cos >= " in md, "the summary states the low-precision status and the fp8 bounds")
    state = scratch / "state"
    corr_log = (state / "logs" / "correctness.log").read_text()
    check("TMA cases: planned (" in corr_log, "the runner says whether the TMA cases run, and why")
    check("CuTe cases: planned (cute and cute_tma (CUTLASS " in corr_log, "the runner says the CuTe cases run")
    check("Backward cases: planned (backward instances " in corr_log and "bwd_fp16 max rel <= " in corr_log,
          "the runner says the backward cases run, and their bounds")
    header = (state / "bench_cpp.csv").read_text().splitlines()[0]
    check(header == "source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum", "the runner's bench CSV has its header")
    bench_log = (state / "logs" / "bench-cpp.log").read_text()
    for impl, accum in (("mma", "fp32"), ("tma", "fp32"), ("mma", "fp16"), ("tma", "fp16"), ("cute", "fp32"),
                        ("cute_tma", "fp32"), ("cute_tma", "fp16"), *((k, "fp32") for k in sorted(ARCH90_LOWP))):
        check(len(re.findall(rf"^bench plan: D=\d+ fp16 causal=[01] impl={impl} accum={accum} ", bench_log, re.M))
              == 2 * len(dims), f"the runner plans impl={impl} accum={accum} at every head dim, causal and not")
    check("impl=cute_tma_fp4" not in bench_log, "no NVFP4 bench row: arch 90 has no NVFP4 code")
    check(len(re.findall(r"^bench plan: D=\d+ fp16 causal=[01] backward ", bench_log, re.M)) == 2 * len(dims),
          "the runner plans a backward row at every head dim, causal and not")
    check_sweep(scratch, out, phases, summary)
    if case == "with-headers":
        check("binding=yes" in env_txt, "the binding was built and imports")
        check(phases["binding-import"]["status"] == "ok", "the staged package loads its binding")
        check(phases["python-gpu"]["status"] == "ok (exit 77)", "pytest -m gpu ran and skipped everything")
        check(summary["pytest_gpu"]["status"] == "skipped (no GPU)", "summary reports the GPU tests as skipped")
        check(phases["torch-gpu"]["status"] == "ok (exit 77)", "the torch rows ran and skipped everything")
        check(phases["bench-help"]["status"] == "ok", "python/bench/ffpa_bench.py --help runs")
    else:
        check("binding=no (none: no Python.h under" in env_txt, "no binding without Python.h, and it says why")
        check(phases["bench-sdpa"]["status"] in ("ok", "ok (exit 77)"), "the SDPA script ran its plan")
        check(f"sdpa plan: D={REHEARSAL_DIMS[-1]} fp16 causal=1" in (state / "logs" / "bench-sdpa.log").read_text(),
              "the SDPA script plans the same shapes")
    return 0


def check_lowp(scratch: Path, corr: dict, paths: set, dims: list[str]) -> None:
    """The low-precision cases the dry run plans for the build's arch: a group per head dim
    and dtype with each kernel whose code the arch holds, outlier-K inputs among them, the
    long rows, the api group's checks, and the runner's line saying what runs and why."""
    kernels = ARCH90_LOWP
    check(corr["lowp"]["planned"] and corr["lowp"]["cases"] > 0,
          f"the low-precision cases are planned: {corr['lowp']['status']}")
    report = json.loads((scratch / "state" / "correctness.json").read_text())
    for d in dims:
        for dt in ("fp16", "bf16"):
            group = f"lowp-D{d}-{dt}"
            planned = {i for g, i, a in paths if g == group}
            check(planned == kernels, f"{group} plans {sorted(planned)}")
            mine = [c for c in report["cases"] if c["group"] == group]
            check({c["inputs"] for c in mine} == {"normal", "outlier-k"}
                  and {c["causal"] for c in mine} == {False, True} and all(c["tolerance"] == "fp8" for c in mine),
                  f"{group}: plain and outlier-K inputs, causal and not, judged by the fp8 row")
    check({i for g, i, a in paths if g == "long"} >= kernels, "the long group has the low-precision rows")
    api = [c for c in report["cases"] if c["group"] == "api"]
    check(report["lowp"]["fp8_resolves_to"] == "cute_tma_fp8" and
          any(c["impl"] == "fp8" and c["expect_error"] == "ok" for c in api),
          "impl=fp8 must run cute_tma_fp8 (TMA runs on sm_90)")
    check(any(c["impl"] == "fp8" and c["accum"] == "fp16" and c["expect_error"] == "impl" for c in api) and
          any(c["impl"] == "fp8" and "misaligned" in c["case"] and c["expect_error"] == "layout" for c in api),
          "accum=fp16 with fp8 is an impl error, misaligned fp8 a layout error")
    check(any(c["impl"] == "fp4" and c["expect_error"] == "impl" and "sm_120 family" in c["expect_in_message"]
              for c in api), "impl=fp4 is an impl error naming the sm_120 family (no NVFP4 code for arch 90)")
    corr_log = (scratch / "state" / "logs" / "correctness.log").read_text()
    check("Low-precision cases: planned (cute_fp8 planned, cute_tma_fp8 planned, cute_tma_fp4 not compiled" in corr_log
          and "FP8 correctness, not FP8 speed" in corr_log,
          "the runner says which low-precision kernels run, and that sm_90 checks FP8's correctness, not its speed")


def sweep_plan(dims: tuple[int, ...], arch: int = 90) -> list[tuple[int, str, bool]]:
    """(D, path, is the default) per planned sweep row: cmake/FfpaSweep.cmake's subset,
    the first variant of each kind per head dim, after each path's default."""
    text = (REPO / "cmake" / "FfpaSweep.cmake").read_text()
    body = text[text.index("set(FFPA_SWEEP_VARIANTS"):]
    body = re.sub(r"#[^\n]*", "", body)  # comments may quote and parenthesise
    body = body[:body.index('")') + 1]
    entries = re.findall(r'"(\d+)\|(mma|cute)\|[0-9,]+"', body)
    paths = {"mma": "tma" if arch >= 90 else "mma", "cute": "cute_tma" if arch >= 90 else "cute"}
    plan = []
    for d in dims:
        kinds = []
        for ed, kind in entries:
            if int(ed) == d and kind not in kinds:
                kinds.append(kind)
        for kind in kinds:
            plan += [(d, paths[kind], True), (d, paths[kind], False)]
    return plan


def check_sweep(scratch: Path, out: Path, phases: dict, summary: dict) -> None:
    check(phases.get("sweep-build", {}).get("status") == "ok", f"the sweep builds: {phases.get('sweep-build')}")
    check(phases.get("sweep", {}).get("status") == "ok", f"the sweep plans: {phases.get('sweep')}")
    state = scratch / "state"
    header, *rows = (state / "sweep.csv").read_text().splitlines()
    check(header == "source,D,path,config,default,ms,tflops,max_diff,status", "the sweep CSV has its header")
    got = [(int(r.split(",")[1]), r.split(",")[2], r.split(",")[4] == "1") for r in rows]
    want = sweep_plan(REHEARSAL_DIMS)
    check(got == want, f"the sweep plans each path's default and the subset's variants: {got}")
    check(all(r.endswith(",planned") for r in rows), "a dry run plans the sweep, it times nothing")
    configs = [r.split(",")[3] for r in rows]
    check(all(re.match(r"Br=\d+ Bc=\d+ Bd=\d+ \((persist|split)-D\) warps=\d+x\d+ stages=\d+", c) for c in configs),
          f"every row names its configuration: {configs}")
    check(any("box=" in c for c in configs), "the TMA-fed CuTe rows name their TMA box")
    md = (out / "summary.md").read_text()
    check("## Tuning sweep" in md and "| planned |" in md and "(none: no configuration ran; a dry run plans only)" in md,
          "the summary has the sweep table and says that a dry run has no winner")
    check(len(summary["sweep"]["rows"]) == len(want) and summary["sweep"]["mode"] == "subset",
          "summary.json carries the sweep rows")
    log = (scratch / "state" / "logs" / "sweep-build.log").read_text()
    check(f"ffpa: sweep: {len(want) // 2} variants (tma, cute_tma)" in log, "configure generated the subset's variants")


def main() -> int:
    parser = argparse.ArgumentParser(description="rehearse the GPU device check without a GPU")
    parser.add_argument("action", choices=("venv", "tree", "run"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--case", choices=("with-headers", "no-headers", "time-limits", "gpu-mode", "no-cutlass"))
    parser.add_argument("--cutlass-dir", help="tree: the full CUTLASS include directory to take the subset from")
    parser.add_argument("--nvcc", default="nvcc", help="tree: nvcc for the subset's include closure")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.action == "venv":
        return make_venv(args.work)
    if args.action == "tree":
        if not args.cutlass_dir:
            parser.error("tree needs --cutlass-dir")
        return make_tree(args.work, args.cutlass_dir, args.nvcc)
    if not args.case:
        parser.error("run needs --case")
    return run_case(args.work, args.case)


if __name__ == "__main__":
    sys.exit(main())
