#!/usr/bin/env bash
# GPU truth in one command (spec/kernels.md "Correctness on a GPU"):
#   ctest/gpu/device_check.sh OUTDIR
# On a machine with an NVIDIA GPU: configure a dedicated build tree for that GPU's
# arch (Hopper 90 is the reference machine), build the kernels, the runner and the
# binding, run the full correctness matrix (every compiled head dim x dtype x causal
# x {aligned, non-aligned N} x {MHA, GQA}, impls mma and simt) against the fp32 host
# reference, then `python -m ffpa_attn.bench` for D in {64,128,256,320,512} at
# N = 8192 against torch SDPA. Writes into OUTDIR: build.log, build_rest.log,
# correctness.log, correctness.json, bench_D<d>.log, bench/ (CSV, JSON, PNG from --save-path),
# summary.json. Exits 0 when every case passes, 1 when any fails (named in
# correctness.log and summary.json), 77 without a GPU.
#
# The device machine has no network. Python for the bench, first that exists:
#   $FFPA_DEVICE_PYTHON            an interpreter that already has numpy and torch
#   $FFPA_WHEELHOUSE               a directory of wheels (torch, numpy, matplotlib and
#                                  their dependencies): a venv is made from it offline
#   <repo>/.venv/bin/python        the tools venv (numpy, no torch: SDPA is skipped)
# Without torch the bench is skipped and summary.json says so.
# Environment: FFPA_DEVICE_CHECK_DIMS (default "64;128;192;256;320;512"),
# FFPA_DEVICE_CHECK_JOBS (default: nproc), CMAKE_CUDA_COMPILER (default nvcc on PATH
# or /usr/local/cuda/bin/nvcc).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
start=$(date +%s)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no CUDA device (nvidia-smi finds no GPU)"
  printf '{"status": "skipped", "reason": "no CUDA device"}\n' > "$out/summary.json"
  exit 77
fi

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
arch=${cap/./}
dims=${FFPA_DEVICE_CHECK_DIMS:-"64;128;192;256;320;512"}
jobs=${FFPA_DEVICE_CHECK_JOBS:-$(nproc)}
nvcc=${CMAKE_CUDA_COMPILER:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build="$out/build"
echo "device check: $gpu (compute capability $cap -> arch $arch), head dims $dims, output $out"

python=""
if [ -n "${FFPA_DEVICE_PYTHON:-}" ]; then
  python=$FFPA_DEVICE_PYTHON
elif [ -n "${FFPA_WHEELHOUSE:-}" ]; then
  python_base=$(command -v python3.12 || command -v python3)
  "$python_base" -m venv "$out/venv" &&
    "$out/venv/bin/python" -m pip install -q --no-index --find-links "$FFPA_WHEELHOUSE" torch numpy matplotlib pytest \
      > "$out/venv.log" 2>&1 && python="$out/venv/bin/python"
  [ -z "$python" ] && echo "warning: offline venv from $FFPA_WHEELHOUSE failed (see venv.log)"
fi
[ -z "$python" ] && [ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
[ -z "$python" ] && python=$(command -v python3)

# ---- configure and build (the binding for the bench's interpreter) ------------------
# Configure asks the tools venv (.venv) for pybind11; a device machine may only have a
# checkout without it. Then take pybind11 from the bench's interpreter, else name a
# missing directory: configure still succeeds, only the binding (the bench) fails to
# build, and the correctness matrix, which needs neither, still runs.
pybind_arg=()
if [ ! -x "$repo/.venv/bin/python" ] || ! "$repo/.venv/bin/python" -c "import pybind11" >/dev/null 2>&1; then
  inc=$("$python" -c "import pybind11; print(pybind11.get_include())" 2>/dev/null || true)
  pybind_arg=("-Dpybind11_INCLUDE_DIR=${inc:-$out/no-pybind11}")
fi
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
{
  cmake -S "$repo" -B "$build" ${gen[@]+"${gen[@]}"} -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DFFPA_BUILD_KERNELS=ON -DFFPA_BUILD_TESTING=ON \
    "-DFFPA_CUDA_ARCHS=$arch" "-DFFPA_HEAD_DIMS=$dims" "-DFFPA_DTYPES=fp16;bf16" \
    -DFFPA_PROFILE=dev "-DFFPA_PYTHON_INTERPRETERS=$python" ${pybind_arg[@]+"${pybind_arg[@]}"} &&
  cmake --build "$build" -j "$jobs" --target ffpa_kernels ffpa_device_check
} > "$out/build.log" 2>&1
build_rc=$?
if [ $build_rc -ne 0 ]; then
  echo "FAILED: build (see $out/build.log)"; tail -20 "$out/build.log"
  printf '{"status": "failed", "stage": "build", "gpu": "%s", "arch": "%s"}\n' "$gpu" "$arch" > "$out/summary.json"
  exit 1
fi
# The rest (the Python binding for the bench) must not keep the correctness matrix
# from running: a failure here only skips the bench.
cmake --build "$build" -j "$jobs" > "$out/build_rest.log" 2>&1
rest_rc=$?
[ $rest_rc -ne 0 ] && echo "warning: full build failed (see build_rest.log); the bench may not run"

# ---- correctness matrix ---------------------------------------------------------------
runner=$(find "$build" -name ffpa_device_check -type f -perm -u+x | head -1)
"$runner" --json "$out/correctness.json" 2>&1 | tee "$out/correctness.log"
check_rc=${PIPESTATUS[0]}
failed_cases=$(grep '^FAILED: ' "$out/correctness.log" | sed 's/^FAILED: //')

# ---- bench against SDPA ------------------------------------------------------------------
bench_status="ran"
pyroot="$build/python"
if [ $rest_rc -ne 0 ]; then
  bench_status="skipped: the full build failed (see build_rest.log)"
  echo "bench $bench_status"
elif ! "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  bench_status="skipped: no torch with CUDA for $python (set FFPA_DEVICE_PYTHON or FFPA_WHEELHOUSE)"
  echo "bench $bench_status"
else
  mkdir -p "$out/bench"
  for d in 64 128 256 320 512; do
    case ";$dims;" in *";$d;"*) ;; *) continue ;; esac
    # One bench process per head dim: a crash names its D and the others still run.
    PYTHONPATH="$pyroot" timeout 120 "$python" -m ffpa_attn.bench --backend cuda --no-bwd \
      --B 1 --H 32 --N 8192 --D "$d" --dtype fp16 --warmup 3 --iters 10 --verbose \
      --save-path "$out/bench/D$d" > "$out/bench_D$d.log" 2>&1 ||
      bench_status="failed (see bench_D$d.log)"
    cat "$out/bench_D$d.log"
  done
fi

elapsed=$(( $(date +%s) - start ))
"${python}" - "$out" "$gpu" "$arch" "$check_rc" "$bench_status" "$elapsed" <<'PY' || true
import json, sys, pathlib
out, gpu, arch, rc, bench, elapsed = sys.argv[1:]
corr = {}
p = pathlib.Path(out, "correctness.json")
if p.exists():
    corr = json.loads(p.read_text())
failed = [c["case"] for c in corr.get("cases", []) if not c["pass"]]
summary = {
    "status": {"0": "passed", "77": "skipped"}.get(rc, "failed"),
    "gpu": gpu, "arch": arch, "elapsed_s": int(elapsed),
    "correctness": {"total": corr.get("total"), "failed": len(failed), "failed_cases": failed,
                    "runner_exit_code": int(rc)},
    "bench": bench,
}
pathlib.Path(out, "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(json.dumps(summary, indent=2))
PY
if [ "$check_rc" -eq 77 ]; then
  echo "SKIPPED: the CUDA runtime sees no device although nvidia-smi does (driver, CUDA_VISIBLE_DEVICES)"
  exit 77
fi
if [ "$check_rc" -ne 0 ]; then
  echo "FAILED cases:"; echo "$failed_cases"
  exit 1
fi
echo "device check passed in ${elapsed}s; results in $out"
