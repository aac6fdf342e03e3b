"""Pack-time benchmark of ffpa-index.

Builds staged trees that each hold the same shared object (the release's kernel
library given with --so, or a synthetic blob mixing compressible "instruction" data
and random bytes), then measures in one run:

  * one wheel, `ffpa-index pack`                         (T1)
  * N wheels, one `ffpa-index release` call (one per tag,
    as the package target packs them)                     (TN)   target TN/T1 <= 1.3
  * the same N wheels by N separate `pack` calls          (TNs)  for comparison
  * python -m wheel pack of the same tree                 (TW)   target T1/TW <= 0.5
  * deflate levels 1, 6 and 9 for one wheel: time and size (the default-level choice)

Prints the ratios with PASS/MISS per target (medians over --repeat runs); it
asserts nothing about timing (machines differ), only that every wheel it produced
verifies. The exit status is 0 whether the targets are met or not.

    python index/bench/bench_pack.py --ffpa-index build/bin/ffpa-index [--so /path/lib.so] [--n 4] [--repeat 3]
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EPOCH = "1700000000"
# The install lines' one home (the release plan carries them for the site's front page).
INSTALL_LINES = json.loads((Path(__file__).resolve().parents[2] / "cmake" / "install-lines.json").read_text())


def synthetic_blob(size: int) -> bytes:
    # Alternating 256 KiB regions: SASS-like 16-byte instructions from a small
    # opcode vocabulary with random register fields (compresses ~3x, like fatbin
    # text), and random bytes (like already-compressed fatbin sections).
    # Eight instruction regions are generated once and reused: they recur 256 KiB
    # apart, far beyond deflate's 32 KiB window, so reuse does not help it.
    rng = random.Random(1234)
    opcodes = [rng.randbytes(10) for _ in range(96)]
    region = 256 * 1024
    code = []
    for _ in range(8):
        chunk = bytearray()
        while len(chunk) < region:
            chunk += opcodes[rng.randrange(len(opcodes))] + rng.randbytes(2) + b"\x00\x00\x80\x03"
        code.append(bytes(chunk[:region]))
    out = bytearray()
    i = 0
    while len(out) < size:
        out += rng.randbytes(region) if i % 3 == 2 else code[i % 8]
        i += 1
    return bytes(out[:size])


def stage(root: Path, blob_src: Path, blob_name: str) -> Path:
    tree = root
    pkg = tree / "ffpa_attn"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.3.0"\n')
    for i in range(20):
        (pkg / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 50)
    # The bytes keep their compressibility but lose the ELF magic: the benchmark
    # measures packing, and a system CUDA library's NEEDED entries (libnvJitLink...)
    # would rightly be refused by the manylinux check.
    data = bytearray(blob_src.read_bytes())
    data[:4] = b"BNCH"
    (pkg / blob_name).write_bytes(bytes(data))
    return tree


def run(cmd, **kw):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ffpa-index", required=True, type=Path)
    ap.add_argument("--so", type=Path, help="a real (CUDA) shared object to ship; default: synthetic blob")
    ap.add_argument("--size-mb", type=int, default=8, help="size of the synthetic blob")
    ap.add_argument("--n", type=int, default=4, help="number of wheels in the N-wheel run")
    ap.add_argument("--jobs", type=int, default=0, help="--jobs for ffpa-index (0: its default)")
    ap.add_argument("--repeat", type=int, default=1, help="measure T1, TN and TW this many times; report medians")
    ap.add_argument("--skip-levels", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ffpa_bench_"))
    try:
        if args.so:
            blob = args.so
            desc = f"{args.so} ({args.so.stat().st_size / 1e6:.1f} MB)"
        else:
            blob = work / "blob.bin"
            blob.write_bytes(synthetic_blob(args.size_mb * 1000 * 1000))
            desc = f"synthetic blob ({args.size_mb} MB)"
        metadata = "Summary: bench\nRequires-Python: >=3.10\nRequires-Dist: numpy\n"
        meta = work / "meta.txt"
        meta.write_text(metadata)
        tags = [f"cp3{10 + i}-cp3{10 + i}-manylinux_2_39_x86_64" for i in range(args.n)]
        trees = [stage(work / "stage" / f"wheel_cp3{10 + i}", blob, "libffpa_kernels.bin") for i in range(args.n)]
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []

        def pack(tree, tag, out, level=None):
            cmd = [str(args.ffpa_index), "pack", "--tree", str(tree), "--name", "ffpa-attn", "--version", "0.3.0+cu13",
                   "--tag", tag, "--metadata", str(meta), "--out-dir", str(out), "--source-date-epoch", EPOCH,
                   "--root-is-purelib", "false", *jobs]
            if level is not None:
                cmd += ["--level", str(level)]
            return run(cmd)

        def release(out):
            # The plan the package target runs (cmake/FfpaReleasePlan.cmake writes it),
            # for N CUDA wheels and no local site.
            plan = {"schema": 2, "name": "ffpa-attn", "version": "0.3.0", "profile": "dev",
                    "source_commit": "0" * 40, "source_dirty": False, "source_date_epoch": int(EPOCH),
                    "toolchain": {"cmake": None, "gcc": None, "nvcc": None}, "channel": "cu13",
                    "cuda_version": "0.3.0+cu13", "archs": [], "head_dims": [], "dtypes": [],
                    "metadata": metadata, "readme": "", "forbid_paths": [], "out_dir": str(out), "site_dir": None,
                    # The front page's install lines, from their one home (as FfpaReleasePlan.cmake
                    # copies them: the cuda lines plus the docs' pypi spelling).
                    "install_lines": {**INSTALL_LINES["cuda"], "pypi": INSTALL_LINES["docs"]["pypi"]},
                    "wheels": [{"kind": "cuda", "tree": t.name, "tags": tag, "version": "0.3.0+cu13"}
                               for t, tag in zip(trees, tags)]}
            (work / "plan.json").write_text(json.dumps(plan))
            return run([str(args.ffpa_index), "release", "--plan", str(work / "plan.json"),
                        "--staging", str(work / "stage")])

        # Warm the page cache so the first measurement is not a disk read.
        for t in trees:
            for f in t.rglob("*"):
                if f.is_file():
                    f.read_bytes()

        # python -m wheel pack wants the .dist-info inside the tree.
        wtree = work / "wtree"
        shutil.copytree(trees[0], wtree)
        di = wtree / "ffpa_attn-0.3.0+cu13.dist-info"
        di.mkdir()
        (di / "METADATA").write_text("Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 0.3.0+cu13\nSummary: bench\n")
        (di / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: false\nTag: " + tags[0] + "\n")
        for f in wtree.rglob("*"):
            if f.is_file():
                f.read_bytes()

        runs = []  # (t1, tn, tns, tw), each run with empty output dirs
        for r in range(max(1, args.repeat)):
            for d in ("out1", "outN", "outS", "outW"):
                shutil.rmtree(work / d, ignore_errors=True)
            (work / "outW").mkdir()
            t1 = pack(trees[0], tags[0], work / "out1")
            tn = release(work / "outN")
            tns = 0.0
            for tree, tag in zip(trees, tags):
                tns += pack(tree, tag, work / "outS")
            tw = run([sys.executable, "-m", "wheel", "pack", str(wtree), "-d", str(work / "outW")],
                     env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH})
            runs.append((t1, tn, tns, tw))
            if args.repeat > 1:
                print(f"run {r + 1}: T1 {t1:.2f} s  T{args.n} {tn:.2f} s ({tn / t1:.2f}x)  "
                      f"{args.n} x pack {tns:.2f} s ({tns / t1:.2f}x)  wheel pack {tw:.2f} s ({t1 / tw:.2f}x)", flush=True)

        wheels = sorted((work / "outN").glob("*.whl")) + sorted((work / "out1").glob("*.whl"))
        subprocess.run([str(args.ffpa_index), "verify-wheel", *map(str, wheels)], check=True, stdout=subprocess.DEVNULL)
        # One release call writes exactly the wheels the separate pack calls write.
        for w in sorted((work / "outS").glob("*.whl")):
            if w.read_bytes() != (work / "outN" / w.name).read_bytes():
                raise SystemExit(f"release and pack differ for {w.name}")

        t1 = statistics.median(r[0] for r in runs)
        tn = statistics.median(r[1] for r in runs)
        tns = statistics.median(r[2] for r in runs)
        tw = statistics.median(r[3] for r in runs)
        # Ratios of the medians (and, for a single run, of that run).
        rn, rw = tn / t1, t1 / tw
        # The test asserts that it measured: every time and ratio finite and positive.
        if not all(math.isfinite(x) and x > 0 for x in (t1, tn, tns, tw, rn, rw)):
            raise SystemExit(f"bench produced no usable ratios: T1={t1} TN={tn} TS={tns} TW={tw}")
        verdict = lambda ok: "PASS" if ok else "MISS"
        what = "median of %d runs" % len(runs) if len(runs) > 1 else "1 run"
        print(f"input: {desc}, jobs: {args.jobs or os.cpu_count()} (cpus {os.cpu_count()}), {what}")
        print(f"T1  1 wheel (pack):              {t1:7.2f} s   size {wheels[-1].stat().st_size / 1e6:.2f} MB")
        print(f"T{args.n}  {args.n} wheels (one release):     {tn:7.2f} s   +{(tn - t1) / max(1, args.n - 1):.2f} s per extra wheel")
        print(f"    {args.n} x pack:                 {tns:7.2f} s   ({tns / t1:.2f}x T1, for comparison)")
        print(f"TW  python -m wheel pack:        {tw:7.2f} s   size {next((work / 'outW').glob('*.whl')).stat().st_size / 1e6:.2f} MB")
        print(f"target T{args.n}/T1 <= 1.30:  {rn:5.2f}x  {verdict(rn <= 1.3)}")
        print(f"target T1/TW <= 0.50:  {rw:5.2f}x  {verdict(rw <= 0.5)}")
        if not args.skip_levels:
            for level in (1, 6, 9):
                out = work / f"outL{level}"
                t = pack(trees[0], tags[0], out, level=level)
                size = next(out.glob("*.whl")).stat().st_size
                print(f"level {level}: {t:7.2f} s  {size / 1e6:8.3f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
