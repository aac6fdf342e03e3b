"""Benchmark: what a first-use build (ffpa_attn.jit) costs, against nvcc's own floor.

Not a test: wall-clock figures depend on the machine and its load, so nothing here passes
or fails on a time. It prints, per head dim, the first build of the plain kernel set for one
arch without the compiler cache, beside a baseline measured in the same run: nvcc compiling
one empty kernel for the same arch (the fixed cost of any CUDA build). A second figure is a
later process's cost of finding and loading the cached entry, beside the baseline of
importing the package alone. docs/perf.md ("First-use builds") records the figures.

    PYTHONPATH=<build tree>/python python python/bench/jit_first_use.py [--arch 90] [--head-dims 128,512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_BUILD = textwrap.dedent("""
    import json, sys
    from ffpa_attn import cuda, jit
    entry = jit.build(sys.argv[1], [int(sys.argv[2])], [sys.argv[3]])
    jit.load(entry)
    print(json.dumps({"entry": str(entry), "head_dims": cuda.extension_info()["head_dims"]}))
""")

_LOAD = textwrap.dedent("""
    import sys, time
    t = time.perf_counter()
    from ffpa_attn import jit
    if sys.argv[1] == "load":
        tc = jit.find_toolchain(for_build=False)
        jit.load(jit.find_entry(sys.argv[2], int(sys.argv[3]), sys.argv[4], tc))
    print(time.perf_counter() - t)
""")


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"jit_first_use: {' '.join(cmd[:3])} ... failed:\n{r.stderr}")
    return elapsed, r.stdout


def _nvcc_floor(nvcc: str, arch: str, work: Path) -> float:
    src = work / "empty.cu"
    src.write_text("__global__ void ffpa_empty() {}\n")
    flags = [f"-gencode=arch=compute_{arch},code=sm_{arch}", "-O3", "-std=c++17", "-c", str(src),
             "-o", str(work / "empty.o")]
    return _timed([nvcc, *flags], dict(os.environ))[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--head-dims", default="128,512")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    args = parser.parse_args()
    from ffpa_attn import jit

    tc = jit.find_toolchain(for_build=True)
    if tc.missing:
        sys.exit("jit_first_use: the toolchain is incomplete: " + "; ".join(f"{what} ({fix})" for what, fix in tc.missing))
    with tempfile.TemporaryDirectory(prefix="ffpa-jit-bench-") as tmp:
        work = Path(tmp)
        floor = _nvcc_floor(tc.nvcc, args.arch, work)
        print(f"baseline: nvcc {tc.nvcc_version}, one empty kernel for sm_{args.arch}: {floor:.1f} s")
        for dim in (int(d) for d in args.head_dims.split(",")):
            cache = work / f"cache-{dim}"
            # No compiler cache: a first build on a user's machine.
            env = dict(os.environ, FFPA_CACHE_DIR=str(cache), CCACHE_DISABLE="1")
            build, out = _timed([sys.executable, "-c", _BUILD, args.arch, str(dim), args.dtype], env)
            got = json.loads(out.strip().splitlines()[-1])
            if got["head_dims"] != [dim]:
                sys.exit(f"jit_first_use: the build for D={dim} holds head dims {got['head_dims']}")
            print(f"first build sm_{args.arch} D={dim} {args.dtype}: {build:.1f} s = {build / floor:.1f}x the baseline")
            imp = min(float(_timed([sys.executable, "-c", _LOAD, "import"], env)[1]) for _ in range(3))
            load = min(float(_timed([sys.executable, "-c", _LOAD, "load", args.arch, str(dim), args.dtype], env)[1])
                       for _ in range(3))
            print(f"  cached entry, once per process: import + toolchain lookup + entry check + load {load * 1000:.0f} ms"
                  f" = {load / imp:.1f}x importing ffpa_attn alone ({imp * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
