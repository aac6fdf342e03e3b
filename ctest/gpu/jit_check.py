"""The device check's first-use build row (ctest/gpu/device_check.sh, phase jit).

    python ctest/gpu/jit_check.py --package <build>/python/ffpa_attn --cutlass <include dir>

Copies the staged package without its binding and kernel library (what the pure wheel
installs: the Python modules and ffpa_attn/_src), then, in a fresh process with an empty
cache, calls ffpa_attn_func with strict=True on the GPU: the first call builds the kernels
for this GPU's arch (ffpa_attn.jit) and must run them (last_kernel() a CUDA kernel, not
"sdpa"), with outputs within the fp16 tolerance of an fp32 SDPA reference, forward and
dQ; a second process must find the entry (no build). Prints "[jit] " lines: the
first call's time (the build), the cached process's first-call time, the errors.
Exit 0: passed; 77: no GPU or no torch (skipped); 1: failed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = r'''
import sys, time, json
import torch, ffpa_attn
from ffpa_attn import cuda, jit, last_kernel
assert cuda.extension() is None, f"the copied package still has an extension: {cuda.EXTENSION_PATH}"
torch.manual_seed(0)
q, k, v = (torch.randn(1, 8, 512, 128, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
t = time.perf_counter()
out = ffpa_attn.ffpa_attn_func(q, k, v, is_causal=True, strict=True)
torch.cuda.synchronize()
first = time.perf_counter() - t
kernel = last_kernel()
ref = torch.nn.functional.scaled_dot_product_attention(*(x.float() for x in (q, k, v)), is_causal=True)
err = (out.float() - ref).abs().max().item()
out.float().sum().backward()
grad = q.grad.detach().clone()
q.grad = None
ref.sum().backward()
gerr = ((grad.float() - q.grad.float()).abs().max() / q.grad.float().abs().max()).item()
print(json.dumps({"first_call_s": first, "kernel": kernel, "max_err": err, "max_grad_rel_err": gerr,
                  "archs": list(cuda.COMPILED_ARCHS), "loaded": (jit.loaded_entry() or {}).get("name")}))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", required=True, type=Path, help="the staged ffpa_attn package (with _src)")
    parser.add_argument("--cutlass", default="", help="CUTLASS include dir (gpu-check.txt's cutlass=)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("[jit] skipped: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("[jit] skipped: no CUDA device visible to torch")
        return 77
    import json
    with tempfile.TemporaryDirectory(prefix="ffpa-jit-check.") as tmp:
        pkg = Path(tmp) / "site" / "ffpa_attn"
        shutil.copytree(args.package, pkg, ignore=shutil.ignore_patterns("_C*.so", "libffpa_kernels*.so",
                                                                          "__pycache__"))
        env = dict(os.environ, PYTHONPATH=str(pkg.parent), FFPA_CACHE_DIR=str(Path(tmp) / "cache"), FFPA_JIT="1")
        if args.cutlass:
            env["FFPA_CUTLASS_DIR"] = args.cutlass
        rows, problems = [], []
        for run in ("first", "cached"):
            t = time.monotonic()
            r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
            wall = time.monotonic() - t
            print(r.stderr, file=sys.stderr, end="")
            if r.returncode != 0:
                print(f"[jit] {run} process failed (exit {r.returncode})")
                return 1
            row = json.loads(r.stdout.strip().splitlines()[-1])
            row["process_s"] = round(wall, 2)
            rows.append(row)
            print(f"[jit] {run}: " + " ".join(f"{k}={v}" for k, v in row.items()))
            built = "ffpa_attn.jit: building " in r.stderr
            if built != (run == "first"):
                problems.append(f"{run}: {'built' if built else 'did not build'} (stderr: {r.stderr[-500:]!r})")
            if row["kernel"] in (None, "sdpa"):
                problems.append(f"{run}: the call ran {row['kernel']}, not the kernels")
            # fp16 forward: the fp16 atol of cmake/kernel-facts.json; dQ relative to its largest entry.
            if not row["max_err"] <= 0.02 or not row["max_grad_rel_err"] <= 0.02:
                problems.append(f"{run}: max error {row['max_err']}, dQ relative {row['max_grad_rel_err']}")
        if rows[0]["loaded"] != rows[1]["loaded"]:
            problems.append(f"the cached process loaded {rows[1]['loaded']}, not {rows[0]['loaded']}")
        for p in problems:
            print(f"[jit] FAIL {p}")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
