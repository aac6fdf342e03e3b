#!/usr/bin/env python3
"""`ffpa-index release --plan`: packaging as one engine call, tested on small trees.

    release_plan.py --ffpa-index PATH --work DIR

- the wheels are byte-identical to what `pack-many` writes for the same trees;
- SHA256SUMS, requirements-<channel>.txt and the manifest agree with the files, the
  manifest reads back through the engine (publish --dry-run refuses its dev profile,
  naming it) and through ctest/ffpa_manifest.py;
- the local site lists the wheels with relative anchors that resolve to the assets;
- a pure tree holding compiled code, and a malformed plan, are refused with a message
  naming the problem, and nothing is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ctest"))

import ffpa_manifest  # noqa: E402

EPOCH = 1700000000


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def make_trees(work: Path) -> dict[str, Path]:
    pure = work / "stage" / "wheel_pure" / "ffpa_attn"
    pure.mkdir(parents=True)
    (pure / "__init__.py").write_text("VERSION = '1.2.3'\n")
    cuda = work / "stage" / "wheel_cp312" / "ffpa_attn"
    cuda.mkdir(parents=True)
    (cuda / "__init__.py").write_text("VERSION = '1.2.3'\n")
    # A real ELF shared object stands in for the kernel library (platform tag "auto"
    # reads it); the test library built next to ffpa-index is one.
    return {"pure": pure.parent, "cuda": cuda.parent}


def plan_for(work: Path, trees: dict[str, Path], lib: Path, **over) -> dict:
    shutil.copy(lib, trees["cuda"] / "ffpa_attn" / "libffpa_kernels.so")
    (work / "METADATA.in").write_text("Summary: test\nRequires-Python: >=3.10\n")
    (work / "README.md").write_text("# test\n")
    plan = {
        "schema": 1, "name": "ffpa-attn", "version": "1.2.3", "profile": "dev",
        "source": {"commit": "0" * 40, "dirty": False, "date_epoch": EPOCH},
        "toolchain": {"cmake": "3.25.1", "gcc": "12.2.0", "nvcc": "13.0"},
        "channel": "cu13", "cuda_version": "1.2.3+cu13", "fatbin_compression": "size",
        "archs": ["89", "120f"], "head_dims": [64, 128], "dtypes": ["fp16", "bf16"],
        "metadata": str(work / "METADATA.in"), "readme": str(work / "README.md"), "readme_type": "text/markdown",
        "deflate_cache": str(work / "cache"), "forbid_paths": ["/nonexistent/build/dir"],
        "out_dir": str(work / "dist"), "site_dir": str(work / "site"),
        "wheels": [
            {"component": "wheel_pure", "kind": "pure", "tree": str(trees["pure"]), "tag": "py3-none-any",
             "version": "1.2.3", "root_is_purelib": True},
            {"component": "wheel_cp312", "kind": "cuda", "tree": str(trees["cuda"]), "tag": "cp312-cp312-auto",
             "version": "1.2.3+cu13", "root_is_purelib": False, "kernel_library": "ffpa_attn/libffpa_kernels.so"},
        ],
    }
    plan.update(over)
    return plan


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ffpa-index", required=True)
    ap.add_argument("--testlib", required=True, help="a real ELF shared object")
    ap.add_argument("--work", required=True, type=Path)
    args = ap.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    trees = make_trees(work)
    plan = plan_for(work, trees, Path(args.testlib))
    plan_file = work / "plan.json"
    plan_file.write_text(json.dumps(plan))

    r = run([args.ffpa_index, "release", "--plan", str(plan_file)])
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "release --plan succeeds")
    dist = work / "dist"
    wheels = sorted(dist.glob("*.whl"))
    check(len(wheels) == 2, f"two wheels written: {[w.name for w in wheels]}")

    # Byte-identical to pack-many on the same trees and options.
    ref = work / "ref"
    r2 = run([args.ffpa_index, "pack-many", "--name", "ffpa-attn", "--metadata", plan["metadata"],
              "--readme", plan["readme"], "--readme-type", "text/markdown", "--source-date-epoch", str(EPOCH),
              "--deflate-cache", str(work / "cache2"), "--out-dir", str(ref), "--forbid-path", "/nonexistent/build/dir",
              "--tree", str(trees["pure"]), "--tag", "py3-none-any", "--version", "1.2.3", "--root-is-purelib", "true",
              "--tree", str(trees["cuda"]), "--tag", "cp312-cp312-auto", "--version", "1.2.3+cu13",
              "--root-is-purelib", "false"])
    check(r2.returncode == 0, "pack-many on the same trees succeeds" + r2.stderr)
    for w in wheels:
        check((ref / w.name).read_bytes() == w.read_bytes(), f"{w.name} equals pack-many's bytes")

    sums = dict(reversed(line.split("  ", 1)) for line in (dist / "SHA256SUMS").read_text().splitlines())
    for f in [*wheels, dist / "requirements-cu13.txt"]:
        check(sums.get(f.name) == hashlib.sha256(f.read_bytes()).hexdigest(), f"SHA256SUMS holds {f.name}")
    man = ffpa_manifest.load(dist / "ffpa-release-manifest.json")
    check(man["schema"] == 1 and man["profile"] == "dev" and man["channel"] == "cu13", "manifest header")
    by_kind = {w["kind"]: w for w in man["wheels"]}
    check(by_kind["cuda"]["kernel_library_size"] == Path(args.testlib).stat().st_size,
          "manifest records the kernel library's size")
    check(by_kind["cuda"]["sha256"] == sums[by_kind["cuda"]["file"]], "manifest and SHA256SUMS agree")
    req = (dist / "requirements-cu13.txt").read_text()
    check("ffpa-attn==1.2.3+cu13 \\\n    --hash=sha256:" + by_kind["cuda"]["sha256"] in req,
          "requirements file pins V+cu13 with the CUDA wheel's hash")
    check(man["requirements"]["sha256"] == sums["requirements-cu13.txt"], "manifest lists the requirements file")
    log = (dist / "ffpa-build.log").read_text()
    check("[wheel_cp312] --tag cp312-cp312-auto --version 1.2.3+cu13" in log, "build log names each engine input")

    site = work / "site"
    page = json.loads((site / "whl" / "cu13" / "ffpa-attn" / "index.json").read_text())
    files = page["files"]
    check(len(files) == 1 and files[0]["url"].startswith("../../../assets/"), "CUDA page has a relative anchor")
    target = (site / "whl" / "cu13" / "ffpa-attn" / unquote(files[0]["url"].split("#")[0])).resolve()
    check(target.is_file() and target.read_bytes() == (dist / target.name).read_bytes(),
          "the anchor resolves to an asset with the wheel's bytes")
    check((site / "pypi" / "simple" / "ffpa-attn" / "index.html").is_file(), "the pure wheel's simple page exists")
    front = (site / "index.html").read_text()
    check("pip install ffpa-attn==1.2.3+cu13 --index-url &lt;site&gt;/whl/cu13/" in front
          and "uv pip install ffpa-attn==1.2.3+cu13 --index &lt;site&gt;/whl/cu13/" in front,
          "the site's front page gives the pinned pip and uv lines")
    check("development build" not in front, "a release version is not called a development build")
    r3 = run([args.ffpa_index, "verify", "--index-dir", str(site), "--channel", "cu13", "--assets", str(site / "assets")])
    check(r3.returncode == 0, "verify accepts the local site: " + r3.stdout[-300:] + r3.stderr[-300:])

    # Publishing a dev-profile manifest is refused, naming the profile.
    r4 = run([args.ffpa_index, "publish", "--tag", "v1.2.3+cu13", "--manifest", str(dist / "ffpa-release-manifest.json"),
              "--site-repo", str(work / "nosite"), "--assets", f"dir:{work / 'assets'}", "--dry-run"])
    check(r4.returncode != 0 and "profile 'dev'" in r4.stderr, "publish refuses a dev manifest: " + r4.stderr[-300:])

    # A pure tree with compiled code: refused before anything is written.
    (trees["pure"] / "ffpa_attn" / "_C.so").write_bytes(b"\x7fELF not really")
    out2 = work / "dist2"
    p2 = plan_for(work, trees, Path(args.testlib), out_dir=str(out2), site_dir=str(work / "site2"))
    (work / "plan2.json").write_text(json.dumps(p2))
    r5 = run([args.ffpa_index, "release", "--plan", str(work / "plan2.json")])
    check(r5.returncode == 1 and "holds compiled code (ffpa_attn/_C.so)" in r5.stderr, "compiled code refused")
    check(not out2.exists() or not any(out2.iterdir()), "nothing written for the refused plan")
    check(not (work / "site2").exists(), "no site written for the refused plan")
    (trees["pure"] / "ffpa_attn" / "_C.so").unlink()

    # Malformed plans name the field.
    for mutate, expect in [
        (lambda p: p.update(schema=2), "'schema' is 2, this engine reads 1"),
        (lambda p: p["wheels"][0].pop("tag"), "'wheels[0].tag' is missing"),
        (lambda p: p.update(head_dims=["64"]), "'head_dims' must hold integers"),
        (lambda p: p["wheels"][1].update(tree=str(work / "missing")), "component wheel_cp312 was not staged"),
    ]:
        bad = plan_for(work, trees, Path(args.testlib), out_dir=str(work / "dist3"), site_dir=None)
        mutate(bad)
        (work / "bad.json").write_text(json.dumps(bad))
        r6 = run([args.ffpa_index, "release", "--plan", str(work / "bad.json")])
        check(r6.returncode != 0 and expect in r6.stderr, f"bad plan refused: {expect}")
        check(not (work / "dist3").exists() or not any((work / "dist3").glob("*")), "nothing written")
    print("release plan: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
