#!/usr/bin/env python3
"""Install built wheels into clean venvs, one per interpreter, and check them.

For every interpreter given: a fresh venv of that interpreter, NumPy from PyPI (the
version pinned in tools/requirements.txt), the wheel with --no-deps, then a probe run
from outside the source tree that imports ffpa_attn and checks what the wheel claims:
version, source commit, capability flags, the compiled set, where the package was
imported from, and the NumPy reference against a naive formula. The capability flags
must follow the compiled set the manifest names: tma (and tma_archs, and "tma" in impls)
exactly for the archs >= 90, f16_acc exactly when fp16 was compiled, the CuTe kernels
("cute") in every CUDA wheel, and cute_tma (upstream's CUDA_CUTE_TMA_AVAILABLE, "cute_tma"
in impls) exactly when both the TMA and the CuTe kernels are there: the release's
89;120f wheel prints True True True for the runbook's one-line check.

  check_install.py --dist DIR --kind pure|cuda --python PY [--python PY ...] --work DIR

The manifest (DIST/ffpa-release-manifest.json) names the wheels. `twine check` runs on
every wheel checked. Exit 0 only when every check passed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ffpa_manifest  # noqa: E402  (the shared manifest reader)

PROBE = r'''
import json, os, sys
import numpy as np
import ffpa_attn
from ffpa_attn import cuda, reference
out = {
    "version": ffpa_attn.__version__,
    "file": ffpa_attn.__file__,
    "build_info": {k: v for k, v in ffpa_attn.build_info().items() if isinstance(v, (str, bool, int, float, list, dict, type(None)))},
    "fwd": cuda.CUDA_FWD_AVAILABLE, "tma": cuda.CUDA_TMA_AVAILABLE, "cute_tma": cuda.CUDA_CUTE_TMA_AVAILABLE,
    "cute": getattr(cuda, "CUDA_CUTE_AVAILABLE", False),
    "f16_acc": cuda.F16_ACC_AVAILABLE, "tma_archs": list(cuda.TMA_ARCHS), "impls": list(cuda.COMPILED_IMPLS),
    "fp8": getattr(cuda, "CUDA_FP8_AVAILABLE", False), "fp4": getattr(cuda, "CUDA_FP4_AVAILABLE", False),
    "head_dims": list(cuda.COMPILED_HEAD_DIMS), "dtypes": list(cuda.COMPILED_DTYPES), "archs": list(cuda.COMPILED_ARCHS),
}
try:
    from ffpa_attn import _C
    out["ext"] = _C.__file__
    out["device_count"] = _C.device_count()
except ImportError:
    out["ext"] = None
rng = np.random.default_rng(0)
q = rng.standard_normal((1, 4, 33, 64), dtype=np.float32)
k = rng.standard_normal((1, 2, 33, 64), dtype=np.float32)
v = rng.standard_normal((1, 2, 33, 64), dtype=np.float32)
o = reference.attention(q, k, v, causal=True)
kk = np.repeat(k, 2, axis=1); vv = np.repeat(v, 2, axis=1)
s = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(64)
s = np.where(np.tril(np.ones((33, 33), bool)), s, -np.inf)
p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
out["reference_max_err"] = float(np.abs(o - p @ vv).max())
print("PROBE-JSON " + json.dumps(out))
'''


def expected_capabilities(archs: list[str], dtypes: list[str]) -> dict:
    """The capability flags a CUDA wheel of this compiled set (the manifest's archs and
    dtypes) must report.

    TMA code exists for the arch tokens >= 90 (their leading number, as the library's
    is_tma_arch reads "90a" or "120f"); fp16 accumulation exists when fp16 was compiled;
    every kernel build compiles the CuTe kernels (cmake/FfpaKernelInstances.cmake gives
    each instance its CuTe files), so cute is true and cute_tma is exactly tma; impls
    lists tma and cute_tma exactly when tma is true. The low-precision kernels come with
    every head dim too: FP8 has code on the tokens >= 89 (cute_fp8 below the sm_120 family,
    cute_tma_fp8 from 90), NVFP4 on the sm_120 family's family- or arch-specific tokens
    (120f, 120a: plain 120 cannot hold its block-scaled mma).
    """
    sm = {a: int(re.match(r"\d*", a)[0] or 0) for a in archs}
    tma_archs = [a for a in archs if sm[a] >= 90]
    fp8_archs = [a for a in archs if sm[a] >= 89]
    fp4_archs = [a for a in archs if 120 <= sm[a] < 130 and a[-1:] in ("a", "f")]
    lowp = [*(["cute_fp8"] if any(sm[a] < 120 for a in fp8_archs) else []),
            *(["cute_tma_fp8"] if any(sm[a] >= 90 for a in fp8_archs) else []),
            *(["fp8"] if fp8_archs else []), *(["cute_tma_fp4", "fp4"] if fp4_archs else [])]
    return {
        "tma": bool(tma_archs),
        "tma_archs": sorted(tma_archs),
        "f16_acc": "fp16" in dtypes,
        "impls": sorted(["mma", "simt", "cute", *(["tma", "cute_tma"] if tma_archs else []), *lowp]),
        "cute": True,
        "cute_tma": bool(tma_archs),
        "fp8": bool(fp8_archs),
        "fp4": bool(fp4_archs),
    }


def capability_problems(got: dict, archs: list[str], dtypes: list[str]) -> list[str]:
    want = expected_capabilities(archs, dtypes)
    have = {"tma": got.get("tma"), "tma_archs": sorted(got.get("tma_archs") or []), "f16_acc": got.get("f16_acc"),
            "impls": sorted(got.get("impls") or []), "cute": got.get("cute"), "cute_tma": got.get("cute_tma"),
            "fp8": got.get("fp8"), "fp4": got.get("fp4")}
    return [f"{key} = {have[key]!r}, but archs {archs} / dtypes {dtypes} compile {want[key]!r}"
            for key in want if have[key] != want[key]]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}")
    return r


def numpy_pin(repo: Path) -> str:
    for line in (repo / "tools" / "requirements.txt").read_text().splitlines():
        if line.startswith("numpy=="):
            return line.strip()
    return "numpy"


def tag_of(py: str) -> str:
    r = run([py, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"])
    return r.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dist", required=True, type=Path)
    ap.add_argument("--kind", required=True, choices=["pure", "cuda"])
    ap.add_argument("--python", action="append", required=True)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--twine", default=None, help="twine executable (default: beside this Python)")
    args = ap.parse_args()

    manifest_path = args.dist / "ffpa-release-manifest.json"
    if not manifest_path.exists():
        raise SystemExit(f"{manifest_path} is missing: build the wheels first "
                         "(cmake --build --preset <preset>, whose build presets include the package target)")
    manifest = ffpa_manifest.load(manifest_path)
    wheels = {w["file"]: w for w in manifest["wheels"]}
    failures: list[str] = []
    checked: list[str] = []

    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # A machine-wide find-links directory would let a "clean" venv take packages from
    # outside this release and its named indexes.
    env.pop("PIP_FIND_LINKS", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    kinds = ["pure"] if args.kind == "pure" else ["cuda", "pure"]
    for py in args.python:
        tag = tag_of(py)
        for kind in kinds:
            if kind == "pure":
                cands = [w for w in wheels.values() if w["kind"] == "pure"]
            else:
                cands = [w for w in wheels.values() if w["kind"] == "cuda" and w["tags"].startswith(f"{tag}-{tag}-")]
            if len(cands) != 1:
                failures.append(f"{tag}: expected exactly one {kind} wheel in the manifest, found {[w['file'] for w in cands]}")
                continue
            w = cands[0]
            whl = args.dist / w["file"]
            venv = args.work / f"venv-{tag}-{kind}"
            run([py, "-m", "venv", str(venv)])
            vpy = str(venv / "bin" / "python")
            run([vpy, "-m", "pip", "install", "-q", numpy_pin(args.repo)], env=env)
            run([vpy, "-m", "pip", "install", "-q", "--no-deps", str(whl)], env=env)
            r = run([vpy, "-c", PROBE], env=env, cwd=str(args.work))
            m = re.search(r"^PROBE-JSON (.*)$", r.stdout, re.M)
            if not m:
                failures.append(f"{w['file']} on {tag}: the probe printed no result")
                continue
            got = json.loads(m.group(1))
            problems = []
            if got["version"] != w["version"]:
                problems.append(f"__version__ {got['version']!r} != wheel version {w['version']!r}")
            if not got["file"].startswith(str(venv)):
                problems.append(f"imported from {got['file']}, not from the venv")
            if got["build_info"].get("SOURCE_COMMIT", got["build_info"].get("source_commit")) != manifest["source_commit"]:
                problems.append(f"build info commit differs from the manifest's {manifest['source_commit']}")
            if got["reference_max_err"] > 1e-5:
                problems.append(f"reference.attention differs from the naive formula by {got['reference_max_err']}")
            if kind == "pure":
                if (got["fwd"] or got["tma"] or got["cute_tma"] or got["cute"] or got["f16_acc"] or got["tma_archs"]
                        or got["impls"]):
                    problems.append(f"pure wheel reports CUDA flags fwd={got['fwd']} tma={got['tma']} "
                                    f"cute={got['cute']} cute_tma={got['cute_tma']} f16_acc={got['f16_acc']} "
                                    f"tma_archs={got['tma_archs']} impls={got['impls']}")
                if got["ext"] is not None:
                    problems.append(f"pure wheel imported an extension: {got['ext']}")
            else:
                if got["fwd"] is not True:
                    problems.append("CUDA wheel reports CUDA_FWD_AVAILABLE != True")
                if sorted(got["head_dims"]) != sorted(manifest["head_dims"]):
                    problems.append(f"compiled head dims {got['head_dims']} != manifest {manifest['head_dims']}")
                if sorted(got["archs"]) != sorted(manifest["archs"]):
                    problems.append(f"compiled archs {got['archs']} != manifest {manifest['archs']}")
                if sorted(got["dtypes"]) != sorted(manifest["dtypes"]):
                    problems.append(f"compiled dtypes {got['dtypes']} != manifest {manifest['dtypes']}")
                # The capability flags follow the compiled set the manifest names (the
                # release's 89;120f: tma with tma_archs [120f], f16_acc, cute and cute_tma,
                # impls mma/simt/tma/cute/cute_tma).
                problems += capability_problems(got, list(manifest["archs"]), list(manifest["dtypes"]))
                if not (got["ext"] or "").startswith(str(venv)):
                    problems.append(f"_C imported from {got['ext']}, not from the venv")
            status = "OK" if not problems else "FAIL"
            print(f"[{status}] {w['file']} on {tag} ({py}): fwd={got['fwd']} head_dims={got['head_dims']} "
                  f"archs={got['archs']} tma={got['tma']} tma_archs={got['tma_archs']} f16_acc={got['f16_acc']} "
                  f"cute={got['cute']} impls={got['impls']}; the runbook's check (CUDA_FWD_AVAILABLE, "
                  f"CUDA_TMA_AVAILABLE, CUDA_CUTE_TMA_AVAILABLE): {got['fwd']} {got['tma']} {got['cute_tma']}")
            for p in problems:
                failures.append(f"{w['file']} on {tag}: {p}")
            checked.append(w["file"])

    twine = args.twine or str(Path(sys.executable).parent / "twine")
    files = sorted({str(args.dist / f) for f in checked})
    if files:
        r = subprocess.run([twine, "check", "--strict", *files], text=True, capture_output=True)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            failures.append("twine check failed")

    print(f"\nchecked {len(checked)} install(s) of {len(set(checked))} wheel(s)")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
