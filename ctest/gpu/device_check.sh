#!/usr/bin/env bash
# GPU truth in one command (docs/perf.md, "The device check"):
#
#   ctest/gpu/device_check.sh [--no-gpu] [--arch A] OUT
#
# Needs only what a bare GPU image holds: nvcc, CMake, Ninja and a python3 (torch,
# numpy, pybind11 and pytest when present; Python.h optional), plus the CUTLASS header
# subset carried in the tree (.cutlass/, made by `cmake -P cmake/FfpaCutlassSubset.cmake`
# where the pinned headers are; the image reaches no registry). It configures the
# kernels-only tree (preset gpu-check: no release engine, so no OpenSSL, zlib,
# nlohmann_json or GTest) for the present GPU's arch in a scratch directory, builds the
# kernels and the runner, then the package and its binding (when the interpreter has
# Python.h and pybind11), and runs, each phase under `timeout` within one time budget:
#   correctness   the C++ runner: every compiled head dim x dtype x causal x GQA x
#                 {Nq = Nkv, Nq < Nkv, Nq > Nkv} x {mma, simt, tma, cute, cute_tma},
#                 strided views, long sequences (N = 4096/8192 at D = 128/512), fp16
#                 accumulation (fp16, on mma, tma, cute and cute_tma), impl=auto,
#                 argument-error and stale-error checks, against the fp64-accumulated
#                 host reference. The tma and cute_tma cases run only where the device
#                 loads the build's TMA code (archs >= 90); else the log and the summary
#                 say they were skipped and why. The low-precision kernels (cute_fp8,
#                 cute_tma_fp8, cute_tma_fp4) get a group per head dim x dtype on plain
#                 and outlier-K inputs, long rows and api checks where the device has
#                 their code, judged by the fp8 / fp4 rows of cmake/kernel-facts.json (cos,
#                 rel L1, max abs, LSE, gain); on sm_90 FP8's mma runs as fp16 HMMA
#                 (nvcc's lowering): its correctness is checked there, not its speed;
#                 and the backward (a group per backward instance: dQ, dK, dV against
#                 float64 gradients, GQA, both causal alignments, ragged Nq != Nkv, a
#                 strided view; the bwd_fp16 / bwd_bf16 rows of ffpa/tolerance.h)
#   python-gpu    pytest -m gpu on the package (binding only)
#   bench-cpp     the kernels timed by the runner with CUDA events (fp16, B=1, H=32,
#                 N=8192, every compiled head dim, causal and not) on each path: mma,
#                 tma, accum=fp16 on both, cute, cute_tma and cute_tma with accum=fp16,
#                 and the low-precision cute_fp8, cute_tma_fp8 (cute_tma_fp4 on the sm_120
#                 family) where they run; the summary gives their ratios to mma, tma,
#                 cute_tma and the SDPA baselines; and ffpa::backward() alone ("bwd"
#                 rows) at every head dim with a backward instance
#   sweep         (last) the tree reconfigured with FFPA_SWEEP=ON: the tuning sweep's
#                 variant kernels (cmake/FfpaSweep.cmake) built and timed next to each
#                 path's default; the summary's sweep table and winner per head dim
#   bench         python/bench/ffpa_bench.py against the named baselines in the same
#                 process (binding): torch SDPA restricted to each backend (flash =
#                 FlashAttention-2, efficient, cuDNN, math; n/a with torch's reason where
#                 one refuses the shape) and SDPA's default dispatch named by the kernel
#                 the profiler saw; else the same baselines timed by sdpa_bench.py in a
#                 separate process
#   bench-bwd     (binding) forward + backward, and the backward alone, at D = 64/128/320/512
#                 (those compiled) against FA2(sdpa-flash)'s, sdpa-efficient's and SDPA's
#                 default in the same process; the runner's bench-cpp rows "bwd" time
#                 ffpa::backward() alone too, without torch
# OUT receives at most five files, all rewritten as the run goes (a run cut short still
# says how far it got): summary.json, summary.md, bench.csv, bench.png, logs.tar.gz
# (every log and raw result). The build never goes into OUT. Exit 0 only when every
# case passed (GPU mode) or every phase ran (--no-gpu); 1 otherwise; 2 usage; 77 no
# GPU without --no-gpu.
#
# --no-gpu   the rehearsal on machines without a GPU: everything but the kernel
#            launches (configure, build, the runner's plan, the binding import, the
#            bench plans, the output layout, the time limits, the tarball).
# --arch A   the arch to build (default: nvidia-smi's compute capability; 90 with --no-gpu)
# Environment:
#   FFPA_DEVICE_PYTHON           interpreter (default python3 on PATH)
#   FFPA_DEVICE_CHECK_DIMS       head dims (default: the release head dims of the preset)
#   FFPA_DEVICE_CHECK_JOBS       build jobs (default nproc)
#   FFPA_DEVICE_CHECK_BUDGET     seconds for the whole run (default 345: under 6 minutes)
#   FFPA_DEVICE_CHECK_TIMEOUTS   per-phase limits, e.g. "build=1,correctness=60"
#   FFPA_DEVICE_CHECK_CMAKE_ARGS extra configure arguments (word-split)
#   FFPA_DEVICE_CHECK_WORK       scratch directory (default: a new one under $TMPDIR)
#   FFPA_DEVICE_CHECK_COMMIT     commit to report when the tree has no .git
#   FFPA_DEVICE_CHECK_SWEEP      full (default), subset (the first variant of each kind per
#                                head dim: the CI rehearsal) or off
#   CMAKE_CUDA_COMPILER          nvcc (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
set -uo pipefail

usage() { echo "usage: $0 [--no-gpu] [--arch A] OUT" >&2; exit 2; }
no_gpu=0
arch=""
out_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gpu) no_gpu=1 ;;
    --arch) [ $# -ge 2 ] || usage; arch=$2; shift ;;
    -h|--help) sed -n '2,72p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) [ -z "$out_arg" ] || usage; out_arg=$1 ;;
  esac
  shift
done
[ -n "$out_arg" ] || usage

start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(mkdir -p "$out_arg" && cd "$out_arg" && pwd) || { echo "cannot create $out_arg" >&2; exit 2; }
work=${FFPA_DEVICE_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/ffpa-device-check.XXXXXX")}
mkdir -p "$work/state/logs"
state="$work/state"
logs="$state/logs"
build="$work/build"
budget=${FFPA_DEVICE_CHECK_BUDGET:-345}
jobs=${FFPA_DEVICE_CHECK_JOBS:-$(nproc)}
python=${FFPA_DEVICE_PYTHON:-$(command -v python3 || true)}
nvcc=${CMAKE_CUDA_COMPILER:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
summarize="$repo/ctest/gpu/summarize.py"
: > "$state/phases.tsv"

if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null; then
  echo "FAILED: no Python 3 interpreter (put python3 on PATH or set FFPA_DEVICE_PYTHON)" >&2
  exit 2
fi

# ---- what this machine is: the first lines of every run ---------------------------------
mode=gpu
[ "$no_gpu" = 1 ] && mode=no-gpu
gpu="none"; driver="none"; cap=""
if [ "$mode" = gpu ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIPPED: no CUDA device (nvidia-smi finds no GPU); use --no-gpu for the rehearsal"
    exit 77
  fi
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
fi
if [ -z "$arch" ]; then
  if [ -n "$cap" ]; then arch=${cap/./}; else arch=90; fi
fi
nvcc_version=$("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1 | cut -d' ' -f2)
torch_version=$("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "not importable")
commit=${FFPA_DEVICE_CHECK_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}
{
  echo "gpu=$gpu"
  echo "driver=$driver"
  echo "arch=$arch"
  echo "nvcc=${nvcc_version:-not found}"
  echo "torch=$torch_version"
  echo "python=$("$python" -c 'import sys; print(sys.version.split()[0])') ($python)"
  echo "cmake=$(cmake --version | head -1 | awk '{print $3}')"
  echo "ninja=$(ninja --version 2>/dev/null || echo 'not found')"
  echo "commit=$commit"
  echo "mode=$mode"
  echo "cores=$(nproc)"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$state/env.txt"
echo "device check ($mode): GPU $gpu, driver $driver, arch $arch"
echo "  nvcc ${nvcc_version:-not found}, torch $torch_version, python $python, commit $commit"
echo "  scratch $work, output $out, budget ${budget}s"

# ---- phases ----------------------------------------------------------------------------
limit_of() {  # name default -> the limit from FFPA_DEVICE_CHECK_TIMEOUTS, else default
  local v
  v=$(tr ',' '\n' <<<"${FFPA_DEVICE_CHECK_TIMEOUTS:-}" | sed -n "s/^$1=\([0-9]*\)$/\1/p" | tail -1)
  echo "${v:-$2}"
}
elapsed() { echo $(( $(date +%s) - start )); }
refresh() {  # status [exit-code]: summary files and the log tarball, atomically
  "$python" "$summarize" "$state" "$out" --status "$1" --elapsed "$(elapsed)" ${2:+--exit-code "$2"} ${3:+--plot} \
    2>>"$logs/summarize.log" || echo "warning: summarize failed (see logs/summarize.log)"
  tar -czf "$out/logs.tar.gz.tmp" -C "$state" . 2>/dev/null && mv -f "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"
}
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$state/phases.tsv"; }

# phase NAME DEFAULT_LIMIT [ok-codes] -- CMD...: runs CMD under timeout, its output in
# logs/NAME.log; the summary is refreshed every few seconds while it runs. Returns CMD's
# exit code (124 on timeout, 125 when the budget was spent before it could start).
phase() {
  local name=$1 limit; limit=$(limit_of "$1" "$2"); shift 2
  local ok_codes="0"
  if [ "$1" != "--" ]; then ok_codes=$1; shift; fi
  shift  # --
  local left=$(( budget - $(elapsed) ))
  if [ "$left" -le 5 ]; then
    record "$name" "not run: time budget spent" 0 ""
    echo "phase $name: not run (time budget of ${budget}s spent)"
    return 125
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0; t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$logs/$name.log" 2>&1 &
  local pid=$! ticks=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    ticks=$((ticks + 1))
    if [ $((ticks % 5)) -eq 0 ] && kill -0 "$pid" 2>/dev/null; then refresh running; fi
  done
  wait "$pid"
  local rc=$?
  local dt=$(( $(date +%s) - t0 )) status
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status="timed out after ${limit}s"
  elif [[ " $ok_codes " == *" $rc "* ]]; then status=$([ "$rc" -eq 0 ] && echo ok || echo "ok (exit $rc)")
  else status="failed (exit $rc)"
  fi
  record "$name" "$status" "$dt" "logs/$name.log"
  printf 'phase %-14s %-22s %4ss\n' "$name" "$status" "$dt"
  if [[ "$status" == failed* || "$status" == timed* ]]; then tail -15 "$logs/$name.log" | sed 's/^/    | /'; fi
  refresh running
  return "$rc"
}

failed=0
cd "$repo" || exit 2
configure_args=(--preset gpu-check -S "$repo" -B "$build" "-DFFPA_CUDA_ARCHS=$arch"
                "-DFFPA_PYTHON_INTERPRETERS=$python" "-DCMAKE_CUDA_COMPILER=$nvcc")
[ -n "${FFPA_DEVICE_CHECK_DIMS:-}" ] && configure_args+=("-DFFPA_HEAD_DIMS=$FFPA_DEVICE_CHECK_DIMS")
# shellcheck disable=SC2206  # word splitting is the documented interface
[ -n "${FFPA_DEVICE_CHECK_CMAKE_ARGS:-}" ] && configure_args+=($FFPA_DEVICE_CHECK_CMAKE_ARGS)

phase configure 90 -- cmake "${configure_args[@]}" || failed=1
# Which CUTLASS headers the kernels-only build found (cmake/FfpaCutlass.cmake wrote it).
gc="$build/gpu-check.txt"
if grep -q '^cutlass=' "$gc" 2>/dev/null; then
  cutlass_line="$(sed -n 's/^cutlass=//p' "$gc") (CUTLASS $(sed -n 's/^cutlass_version=//p' "$gc"), $(sed -n 's/^cutlass_source=//p' "$gc"), $(sed -n 's/^cutlass_files=//p' "$gc") files)"
else
  cutlass_line="not found (logs/configure.log says why and how to carry the subset)"
fi
echo "cutlass=$cutlass_line" >> "$state/env.txt"
echo "  CUTLASS headers: $cutlass_line"
# 300 s: the six release head dims with their CuTe and low-precision instances are about
# 420 core-seconds of nvcc for one arch, about 40-50 s on the GPU image's 16 cores
# (docs/perf.md, "Time"); the limit leaves room for a slower image, and the budget still
# bounds it.
[ "$failed" = 0 ] && { phase build 300 -- cmake --build "$build" -j "$jobs" --target ffpa_kernels ffpa_device_check || failed=1; }
runner="$build/bin/ffpa_device_check"

binding=no
if [ "$failed" = 0 ]; then
  # The package and its binding; a failure here leaves the correctness matrix running.
  # configure wrote what it decided (gpu-check.txt: binding=cp3XY, or why there is none).
  cp "$build/gpu-check.txt" "$state/gpu-check.txt" 2>/dev/null
  if phase build-binding 90 -- cmake --build "$build" -j "$jobs" --target ffpa_gpu_check &&
     grep -q '^binding=cp' "$state/gpu-check.txt" 2>/dev/null &&
     PYTHONPATH="$build/python" "$python" -c 'import ffpa_attn._C' >/dev/null 2>&1; then
    binding=yes
  fi
  why=$(sed -n 's/^binding=//p' "$state/gpu-check.txt" 2>/dev/null)
  echo "binding=$binding (${why:-unknown})" >> "$state/env.txt"
fi

if [ "$failed" = 0 ]; then
  if [ "$mode" = gpu ]; then
    phase correctness 150 -- "$runner" --json "$state/correctness.json" || failed=1
  else
    phase correctness 60 -- "$runner" --dry-run --json "$state/correctness.json" || failed=1
  fi
fi

if [ "$failed" = 0 ] || [ -x "$runner" ]; then
  if [ "$binding" = yes ]; then
    # python-gpu: pytest -m gpu; exit 77 (all skipped, conftest) is expected without a GPU.
    ok="0"; [ "$mode" = no-gpu ] && ok="0 77"
    PYTHONPATH="$build/python" FFPA_SKIP_RETURN_CODE=77 \
      phase python-gpu 90 "$ok" -- "$python" -m pytest -q -p no:cacheprovider -m gpu "$repo/python/tests"
    rc=$?
    [[ " $ok " == *" $rc "* ]] || failed=1
    "$python" - "$state/pytest-gpu.json" "$rc" <<'PY'
import json, sys
rc = int(sys.argv[2])
status = {0: "passed", 77: "skipped (no GPU)", 124: "timed out", 125: "not run"}.get(rc, f"failed (exit {rc})")
json.dump({"status": status, "detail": "pytest -m gpu python/tests (logs/python-gpu.log)"}, open(sys.argv[1], "w"))
PY
  fi
  # ---- torch rows (python/tests/gpu_torch_check.py): torch.compile with no graph break,
  # CUDA graph capture and replay, the fused backward against SDPA's gradients, the
  # pure wheel's SDPA fallback, peak memory of forward + backward against SDPA's own.
  # Without a GPU (or torch) the module skips: exit 77, expected only with --no-gpu.
  if [ "$binding" = yes ]; then
    ok="0"; [ "$mode" = no-gpu ] && ok="0 77"
    PYTHONPATH="$build/python" FFPA_SKIP_RETURN_CODE=77 FFPA_TORCH_GPU_REPORT="$state/torch_gpu.json" \
      phase torch-gpu 60 "$ok" -- "$python" -m pytest -q -s -p no:cacheprovider -m gpu \
      "$repo/python/tests/gpu_torch_check.py"
    rc=$?
    [[ " $ok " == *" $rc "* ]] || failed=1
    grep -h '^\[torch-gpu\] ' "$logs/torch-gpu.log" 2>/dev/null | sed 's/^/  /'
  fi
  # ---- the first-use build (ctest/gpu/jit_check.py): the staged package without its
  # binding (what the pure wheel installs) builds the kernels for this GPU on its first
  # call, runs them against SDPA, and a second process reuses the cached entry.
  if [ "$binding" = yes ]; then
    ok="0"; [ "$mode" = no-gpu ] && ok="0 77"
    phase jit 180 "$ok" -- "$python" "$repo/ctest/gpu/jit_check.py" --package "$build/python/ffpa_attn" \
      --cutlass "$(sed -n 's/^cutlass=//p' "$state/gpu-check.txt" 2>/dev/null)"
    rc=$?
    [[ " $ok " == *" $rc "* ]] || failed=1
    grep -h '^\[jit\] ' "$logs/jit.log" 2>/dev/null | sed 's/^/  /'
  fi
  # ---- end of the torch rows ----
  dry=(); [ "$mode" = no-gpu ] && dry=(--dry-run)
  # 90 s: the backward rows (about 10-15 s on the H200) joined the forward's 20 s.
  phase bench-cpp 90 -- "$runner" --bench-csv "$state/bench_cpp.csv" \
    --bench-n 8192 --bench-h 32 --bench-warmup 3 --bench-iters 10 ${dry[@]+"${dry[@]}"} || failed=1
  if [ "$binding" = yes ]; then
    dims=$(PYTHONPATH="$build/python" "$python" -c \
      'from ffpa_attn import cuda; print(" ".join(str(d) for d in cuda.COMPILED_HEAD_DIMS))')
    if [ "$mode" = gpu ]; then
      for causal in "" "--causal"; do
        dest="$state/bench_py${causal:+_causal}"
        # shellcheck disable=SC2086  # $dims is a list of numbers
        PYTHONPATH="$build/python" phase "bench${causal:+-causal}" 90 -- "$python" "$repo/python/bench/ffpa_bench.py" --backend cuda \
          --no-bwd --B 1 --H 32 --N 8192 --D $dims --dtype fp16 --warmup 3 --iters 10 $causal --verbose \
          --baselines all --save-path "$dest" || failed=1
      done
      # The backward's ratios: forward + backward of ffpa_attn_func (its default backward,
      # ours where compiled) against FA2(sdpa-flash)'s and sdpa-efficient's forward +
      # backward (and SDPA's own dispatch) in the same process, at the targets' head dims
      # (docs/perf.md "The backward kernels"); non-causal, fewer iterations: each call at
      # D = 512 is about 0.3 s of SDPA's.
      bwd_dims=$(for d in $dims; do case "$d" in 64|128|320|512) printf '%s ' "$d" ;; esac; done)
      if [ -n "$bwd_dims" ]; then
        # shellcheck disable=SC2086  # $bwd_dims is a list of numbers
        PYTHONPATH="$build/python" phase bench-bwd 120 -- "$python" "$repo/python/bench/ffpa_bench.py" --backend cuda --no-fwd \
          --B 1 --H 32 --N 8192 --D $bwd_dims --dtype fp16 --warmup 2 --iters 5 --verbose \
          --baselines flash,efficient --save-path "$state/bench_py_bwd" || failed=1
      fi
    else
      PYTHONPATH="$build/python" phase binding-import 30 -- "$python" -c \
        'import json, ffpa_attn; i = ffpa_attn.build_info(); assert i["extension_available"], i; print(json.dumps(i, indent=1, default=str))' ||
        failed=1
      PYTHONPATH="$build/python" phase bench-help 30 -- "$python" "$repo/python/bench/ffpa_bench.py" --help || failed=1
    fi
  else
    ok="0"; [ "$mode" = no-gpu ] && ok="0 77"
    sdpa_dims=$(sed -n 's/^head_dims=//p' "$build/gpu-check.txt" 2>/dev/null)
    PYTHONPATH="$build/python" phase bench-sdpa 90 "$ok" -- "$python" "$repo/ctest/gpu/sdpa_bench.py" --csv "$state/sdpa.csv" \
      --dims "${sdpa_dims:-64,128,256,320,512}" --n 8192 --h 32 --warmup 3 --iters 10 --baselines all \
      ${dry[@]+"${dry[@]}"} || true
  fi
fi

# ---- the tuning sweep (docs/perf.md "Tuning sweep"): the same tree reconfigured with
# FFPA_SWEEP=ON (cmake/FfpaSweep.cmake: the variant instances for this arch; the default
# instances are already built, so only the variants compile), then every variant timed
# next to its path's default. Last, so that a budget cut short costs the sweep first.
# A variant that is refused or differs from the default is a finding of the sweep's
# table, not a failed check (the runner exits 1 then: "ok (exit 1)").
sweep=${FFPA_DEVICE_CHECK_SWEEP:-full}
case "$sweep" in full|subset|off) ;; *) echo "FFPA_DEVICE_CHECK_SWEEP=$sweep: use full, subset or off" >&2; sweep=off; failed=1 ;; esac
echo "sweep=$sweep" >> "$state/env.txt"
if [ "$sweep" != off ] && [ -x "$runner" ]; then
  subset=$([ "$sweep" = subset ] && echo ON || echo OFF)
  if phase sweep-build 150 -- sh -c 'cmake -S "$1" -B "$2" -DFFPA_SWEEP=ON -DFFPA_SWEEP_SUBSET="$3" &&
                                     cmake --build "$2" -j "$4" --target ffpa_device_check' \
       sweep-build "$repo" "$build" "$subset" "$jobs"; then
    ok="0 1"; [ "$mode" = no-gpu ] && ok="0"
    phase sweep 60 "$ok" -- "$runner" --sweep-csv "$state/sweep.csv" --bench-n 8192 --bench-h 32 \
      --bench-warmup 3 --bench-iters 10 ${dry[@]+"${dry[@]}"}
    rc=$?
    [[ " $ok " == *" $rc "* ]] || failed=1
  else
    failed=1
  fi
fi

total=$(elapsed)
if [ "$mode" = gpu ]; then
  status=$([ "$failed" = 0 ] && echo passed || echo failed)
else
  status=$([ "$failed" = 0 ] && echo rehearsed || echo "rehearsal failed")
fi
rc=$([ "$failed" = 0 ] && echo 0 || echo 1)
echo "$status" > "$state/status"
refresh "$status" "$rc" plot
grep -h '^\[FAIL\]\|^FAILED: ' "$logs/correctness.log" 2>/dev/null | head -40
echo "device check $status in ${total}s (budget ${budget}s); results in $out:"
ls "$out"
exit "$rc"
