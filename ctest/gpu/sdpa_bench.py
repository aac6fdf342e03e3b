#!/usr/bin/env python3
"""Time torch SDPA on the device check's bench shapes, in its own process.

    sdpa_bench.py --csv FILE [--dims 64,128,...] [--n 8192] [--h 32] [--warmup 3]
                  [--iters 10] [--dry-run]

The device check uses it when the binding cannot be built (no Python.h): the C++
runner times the FFPA kernels with CUDA events, and this script times
``torch.nn.functional.scaled_dot_product_attention`` on the same shapes (B = 1,
fp16, causal and not; N == Nkv, so SDPA's top-left causal mask equals our
bottom-right one). Head dims up to 256 are timed on SDPA's flash backend (the
target compares against it); larger ones on SDPA's default choice. Writes
``source,D,dtype,causal,B,H,N,backend,ms,tflops`` rows. Without torch or a GPU it
writes nothing and exits 77; ``--dry-run`` prints the plan only.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="time torch SDPA on the device check's shapes")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--dims", default="64,128,256,320,512")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--h", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    dims = [int(d) for d in args.dims.replace(";", ",").split(",") if d]
    if args.dry_run:
        for d in dims:
            for causal in (False, True):
                print(f"sdpa plan: D={d} fp16 causal={int(causal)} B=1 H={args.h} N={args.n}")
        return 0
    try:
        import torch
    except ImportError:
        print("sdpa: torch is not importable; SDPA is not timed", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("sdpa: torch sees no CUDA device; SDPA is not timed", file=sys.stderr)
        return 77
    functional = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3
        SDPBackend = sdpa_kernel = None  # noqa: N806

    rows = ["source,D,dtype,causal,B,H,N,backend,ms,tflops"]
    for d in dims:
        shape = (1, args.h, args.n, d)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
        for causal in (False, True):
            def run() -> None:
                functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

            backend = "default"
            if sdpa_kernel is not None and d <= 256:
                try:
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        run()
                    backend = "flash"
                except RuntimeError:
                    backend = "default"

            def timed() -> float:
                for _ in range(args.warmup):
                    run()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.iters):
                    run()
                end.record()
                end.synchronize()
                return start.elapsed_time(end) / args.iters

            if backend == "flash":
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    ms = timed()
            else:
                ms = timed()
            flop = 4.0 * args.h * args.n * args.n * d / (2 if causal else 1)
            tflops = flop / (ms * 1e-3) / 1e12
            line = f"sdpa,{d},fp16,{int(causal)},1,{args.h},{args.n},{backend},{ms:.4f},{tflops:.2f}"
            print(line, flush=True)
            rows.append(line)
        del q, k, v
    with open(args.csv, "w", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
