#!/usr/bin/env python3
"""Time torch SDPA on the device check's bench shapes, in its own process.

    sdpa_bench.py --csv FILE [--dims 64,128,...] [--n 8192] [--h 32] [--warmup 3]
                  [--iters 10] [--dry-run]

The device check uses it when the binding cannot be built (no Python.h): the C++
runner times the FFPA kernels with CUDA events, and this script times
``torch.nn.functional.scaled_dot_product_attention`` on the same shapes (B = 1,
fp16, causal and not; N == Nkv, so SDPA's top-left causal mask is the kernels'
one) against every named baseline of python/bench/ffpa_bench.py (SDPA restricted
to its flash (FlashAttention-2), efficient, cuDNN and math backends, and its default
dispatch with the kernel the profiler saw; a backend that refuses the shape is a row
with an empty time and torch's reason). Writes
``source,D,dtype,causal,B,H,N,backend,ms,tflops,label,kernel,reason`` rows, one per
shape and baseline (``backend`` is the baseline's name, e.g. ``sdpa-flash``). Without
torch or a GPU it writes nothing and exits 77; ``--dry-run`` prints the plan only.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="time torch SDPA on the device check's shapes")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--dims", default="64,128,256,320,512")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--h", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--baselines", default="all", help="as python/bench/ffpa_bench.py --baselines")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    dims = [int(d) for d in args.dims.replace(";", ",").split(",") if d]
    if args.dry_run:
        for d in dims:
            for causal in (False, True):
                print(f"sdpa plan: D={d} fp16 causal={int(causal)} B=1 H={args.h} N={args.n} "
                      f"baselines={args.baselines}")
        return 0
    try:
        import torch
    except ImportError:
        print("sdpa: torch is not importable; SDPA is not timed", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("sdpa: torch sees no CUDA device; SDPA is not timed", file=sys.stderr)
        return 77
    # The named baselines are python/bench/ffpa_bench.py's (one definition). It imports the
    # package, which must be a staged one (PYTHONPATH=<build>/python, device_check.sh): the
    # source tree's python/ has no generated _build_info, and the bench reads its tolerances
    # when imported. The staged package needs no binding.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "bench"))
    from ffpa_bench import measure_baselines, parse_baselines

    names = parse_baselines(args.baselines)
    header = ["source", "D", "dtype", "causal", "B", "H", "N", "backend", "ms", "tflops", "label", "kernel", "reason"]
    rows = []
    for d in dims:
        shape = (1, args.h, args.n, d)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
        for causal in (False, True):
            def run(causal: bool = causal) -> None:
                # N == Nkv: SDPA's top-left is_causal is the kernels' causal mask.
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def timed(fn) -> float:
                for _ in range(args.warmup):
                    fn()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.iters):
                    fn()
                end.record()
                end.synchronize()
                return start.elapsed_time(end) / args.iters

            flop = 4.0 * args.h * args.n * args.n * d / (2 if causal else 1)
            with torch.no_grad():
                measured = measure_baselines(torch, run, flop, timed, names, "cuda")
            for b in measured:
                row = ["sdpa", d, "fp16", int(causal), 1, args.h, args.n, b.name,
                       "" if b.ms is None else f"{b.ms:.4f}", "" if b.tflops is None else f"{b.tflops:.2f}",
                       b.label, b.kernel or b.op or "", b.reason or ""]
                print("sdpa: " + ",".join(str(x) for x in row[:10]) + f" {b.label}" + (f" ({b.reason})" if b.reason else ""),
                      flush=True)
                rows.append(row)
        del q, k, v
    tmp = args.csv + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(tmp, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
