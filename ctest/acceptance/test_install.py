"""Install the built wheels into clean venvs, one per interpreter, and check them.
CTest: acceptance.pure.install (test_pure: the pure wheel) and acceptance.cuda.install
(test_cuda: each CUDA wheel and the pure wheel alongside).

For every interpreter ($FFPA_PYTHONS, os.pathsep-separated): a fresh venv of that
interpreter (the venv_for fixture, ctest/pytest_ffpa.py), NumPy from PyPI (the version
pinned in tools/requirements.txt), the wheel with --no-deps, then a probe run from the
work directory that imports ffpa_attn and checks what the wheel claims: version, source
commit, capability flags, the compiled set, where the package was imported from, and
the NumPy reference against a naive formula. The capability flags must follow the
compiled set the manifest names: tma (and tma_archs, and "tma" in impls) exactly for
the archs >= 90, f16_acc exactly when fp16 was compiled, the CuTe kernels ("cute") in
every CUDA wheel, and cute_tma (upstream's CUDA_CUTE_TMA_AVAILABLE, "cute_tma" in impls)
exactly when both the TMA and the CuTe kernels are there: the release's 89;120f wheel
prints True True True for the runbook's one-line check.

The manifest ($FFPA_DIST/ffpa-release-manifest.json) names the wheels. `twine check`
runs on every wheel checked.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import ffpa_manifest  # the shared manifest reader
import pytest

REPO = Path(__file__).resolve().parents[2]

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
    "bwd": getattr(cuda, "CUDA_BWD_AVAILABLE", False),
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
    every head dim its CuTe file), so cute is true and cute_tma is exactly tma; impls
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


def must(run, cmd: list, **kw):
    """run (the runner fixture), echoing the command; a failure ends the test with the
    command's output."""
    print("+ " + " ".join(map(str, cmd)), flush=True)
    r = run(cmd, **kw)
    if r.returncode != 0:
        pytest.fail(f"FAILED ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r


def numpy_pin() -> str:
    for line in (REPO / "tools" / "requirements.txt").read_text().splitlines():
        if line.startswith("numpy=="):
            return line.strip()
    return "numpy"


def install_problems(got: dict, kind: str, w: dict, manifest: dict, venv: Path) -> list[str]:
    """What the probe of wheel `w` (of `kind`) installed in `venv` reports against what
    the wheel and the manifest claim."""
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
        if (got["fwd"] or got["tma"] or got["cute_tma"] or got["cute"] or got["f16_acc"] or got["fp8"]
                or got["fp4"] or got["tma_archs"] or got["impls"] or got.get("bwd")):
            problems.append(f"pure wheel reports CUDA flags fwd={got['fwd']} tma={got['tma']} "
                            f"cute={got['cute']} cute_tma={got['cute_tma']} f16_acc={got['f16_acc']} "
                            f"fp8={got['fp8']} fp4={got['fp4']} bwd={got.get('bwd')} "
                            f"tma_archs={got['tma_archs']} impls={got['impls']}")
        if got["ext"] is not None:
            problems.append(f"pure wheel imported an extension: {got['ext']}")
        return problems
    if got["fwd"] is not True:
        problems.append("CUDA wheel reports CUDA_FWD_AVAILABLE != True")
    # Every (head dim, dtype) instance compiles its backward kernels too.
    if got.get("bwd") is not True:
        problems.append("CUDA wheel reports CUDA_BWD_AVAILABLE != True")
    for key in ("head_dims", "archs", "dtypes"):
        if sorted(got[key]) != sorted(manifest[key]):
            problems.append(f"compiled {key.replace('_', ' ')} {got[key]} != manifest {manifest[key]}")
    # The capability flags follow the compiled set the manifest names (the release's
    # 89;120f: tma with tma_archs [120f], f16_acc, cute and cute_tma, impls
    # mma/simt/tma/cute/cute_tma).
    problems += capability_problems(got, list(manifest["archs"]), list(manifest["dtypes"]))
    if not (got["ext"] or "").startswith(str(venv)):
        problems.append(f"_C imported from {got['ext']}, not from the venv")
    return problems


def check_installs(kinds: list[str], dist: Path, pythons: list[str], work: Path, venv_for, run) -> None:
    manifest_path = dist / "ffpa-release-manifest.json"
    if not manifest_path.exists():
        pytest.fail(f"{manifest_path} is missing: build the wheels first "
                    "(cmake --build --preset <preset>, whose build presets include the package target)")
    manifest = ffpa_manifest.load(manifest_path)
    wheels = manifest["wheels"]
    failures: list[str] = []
    checked: list[str] = []
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # A machine-wide find-links directory would let a "clean" venv take packages from
    # outside this release and its named indexes.
    env.pop("PIP_FIND_LINKS", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    for py in pythons:
        tag = must(run, [py, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"]).stdout.strip()
        for kind in kinds:
            cands = [w for w in wheels
                     if w["kind"] == kind and (kind == "pure" or w["tags"].startswith(f"{tag}-{tag}-"))]
            if len(cands) != 1:
                failures.append(f"{tag}: expected exactly one {kind} wheel in the manifest, "
                                f"found {[w['file'] for w in cands]}")
                continue
            w = cands[0]
            vpy = venv_for(py, f"install-{kind}")
            venv = vpy.parent.parent
            must(run, [vpy, "-m", "pip", "install", "-q", numpy_pin()], env=env)
            must(run, [vpy, "-m", "pip", "install", "-q", "--no-deps", dist / w["file"]], env=env)
            r = must(run, [vpy, "-c", PROBE], env=env, cwd=str(work))
            m = re.search(r"^PROBE-JSON (.*)$", r.stdout, re.M)
            if not m:
                failures.append(f"{w['file']} on {tag}: the probe printed no result")
                continue
            got = json.loads(m.group(1))
            problems = install_problems(got, kind, w, manifest, venv)
            print(f"[{'FAIL' if problems else 'OK'}] {w['file']} on {tag} ({py}): fwd={got['fwd']} "
                  f"head_dims={got['head_dims']} archs={got['archs']} tma={got['tma']} tma_archs={got['tma_archs']} "
                  f"f16_acc={got['f16_acc']} cute={got['cute']} impls={got['impls']}; the runbook's check "
                  f"(CUDA_FWD_AVAILABLE, CUDA_TMA_AVAILABLE, CUDA_CUTE_TMA_AVAILABLE): "
                  f"{got['fwd']} {got['tma']} {got['cute_tma']}")
            failures += [f"{w['file']} on {tag}: {p}" for p in problems]
            checked.append(w["file"])

    files = sorted({str(dist / f) for f in checked})
    if files:
        r = run([Path(sys.executable).parent / "twine", "check", "--strict", *files])
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            failures.append("twine check failed")
    print(f"\nchecked {len(checked)} install(s) of {len(set(checked))} wheel(s)")
    assert not failures, "\n".join(failures)


@pytest.fixture
def installs(ffpa_env, work, venv_for, runner):
    pythons = [p for p in ffpa_env("PYTHONS").split(os.pathsep) if p]
    return lambda kinds: check_installs(kinds, Path(ffpa_env("DIST")), pythons, work, venv_for, runner)


def test_pure(installs):
    installs(["pure"])


def test_cuda(installs):
    installs(["cuda", "pure"])
