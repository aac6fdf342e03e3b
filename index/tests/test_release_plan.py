"""`ffpa-index release --plan --staging`: packaging as one engine call, on small trees.

- the wheels are byte-identical to what separate `pack` calls write for the same trees;
- SHA256SUMS, requirements-<channel>.txt and the manifest agree with the files, the
  manifest reads back through the engine (publish --dry-run refuses its dev profile,
  naming it) and through ctest/ffpa_manifest.py;
- the local site lists the wheels with relative anchors that resolve to the assets;
- a pure tree holding compiled code, and a malformed plan, are refused with a message
  naming the problem, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import ffpa_manifest
import pytest
from pytest_ffpa import run

# The one home of the CUDA wheel's install lines; cmake/FfpaReleasePlan.cmake copies its
# templates into the plan, the engine renders the site's front page from them.
INSTALL_LINES = json.loads((Path(__file__).resolve().parents[2] / "cmake" / "install-lines.json").read_text())


def plan_install_lines() -> dict:
    return {**INSTALL_LINES["cuda"], "pypi": INSTALL_LINES["docs"]["pypi"]}

EPOCH = 1700000000
METADATA = "Summary: test\nRequires-Python: >=3.10\n"


@pytest.fixture
def staged(work, ffpa_env, package):
    """The staging directory of a plan (ctest/packages/release-stage): a pure tree and
    a CUDA tree whose kernel library is a real ELF shared object (platform tag "auto"
    reads it)."""
    stage = package("release-stage", work / "stage")
    shutil.copy(ffpa_env("TESTLIB"), stage / "wheel_cp312" / "ffpa_attn" / "libffpa_kernels.so")
    return stage


def plan_for(work: Path, **over) -> dict:
    plan = {
        "schema": 2, "name": "ffpa-attn", "version": "1.2.3", "profile": "dev",
        "source_commit": "0" * 40, "source_dirty": False, "source_date_epoch": EPOCH,
        "toolchain": {"cmake": "3.25.1", "gcc": "12.2.0", "nvcc": "13.0"},
        "channel": "cu13", "cuda_version": "1.2.3+cu13", "fatbin_compression": "size",
        "archs": ["89", "120f"], "head_dims": [64, 128], "dtypes": ["fp16", "bf16"],
        "metadata": METADATA, "readme": str(work / "stage" / "README.md"), "forbid_paths": ["/nonexistent/build/dir"],
        "out_dir": str(work / "dist"), "site_dir": str(work / "site"), "install_lines": plan_install_lines(),
        "wheels": [
            {"kind": "pure", "tree": "wheel_pure", "tags": "py3-none-any", "version": "1.2.3"},
            {"kind": "cuda", "tree": "wheel_cp312", "tags": "cp312-cp312-auto", "version": "1.2.3+cu13",
             "kernel_library": "ffpa_attn/libffpa_kernels.so"},
        ],
    }
    plan.update(over)
    return plan


def release(ffpa_env, work: Path, plan: dict, staging: Path, name: str = "plan.json"):
    (work / name).write_text(json.dumps(plan))
    return run([ffpa_env("INDEX"), "release", "--plan", work / name, "--staging", staging])


def test_release_writes_wheels_sums_manifest_and_site(work, staged, ffpa_env):
    plan = plan_for(work)
    r = release(ffpa_env, work, plan, staged)
    assert r.returncode == 0, r.stdout + r.stderr
    dist = work / "dist"
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 2, [w.name for w in wheels]

    # Byte-identical to separate pack calls on the same trees and options.
    (work / "meta.txt").write_text(METADATA)
    for tree, tag, version, purelib in [("wheel_pure", "py3-none-any", "1.2.3", "true"),
                                        ("wheel_cp312", "cp312-cp312-auto", "1.2.3+cu13", "false")]:
        p = run([ffpa_env("INDEX"), "pack", "--tree", staged / tree, "--name", "ffpa-attn", "--metadata",
                 work / "meta.txt", "--readme", plan["readme"], "--source-date-epoch", EPOCH, "--out-dir", work / "ref",
                 "--forbid-path", "/nonexistent/build/dir", "--tag", tag, "--version", version,
                 "--root-is-purelib", purelib])
        assert p.returncode == 0, p.stderr
    for w in wheels:
        assert (work / "ref" / w.name).read_bytes() == w.read_bytes(), f"{w.name} equals pack's bytes"

    sums = dict(reversed(line.split("  ", 1)) for line in (dist / "SHA256SUMS").read_text().splitlines())
    for f in [*wheels, dist / "requirements-cu13.txt"]:
        assert sums.get(f.name) == hashlib.sha256(f.read_bytes()).hexdigest(), f"SHA256SUMS holds {f.name}"
    man = ffpa_manifest.load(dist / "ffpa-release-manifest.json")
    assert man["schema"] == 2 and man["profile"] == "dev" and man["channel"] == "cu13", "manifest header"
    by_kind = {w["kind"]: w for w in man["wheels"]}
    assert by_kind["cuda"]["kernel_library_size"] == Path(ffpa_env("TESTLIB")).stat().st_size, \
        "manifest records the kernel library's size"
    assert by_kind["cuda"]["sha256"] == sums[by_kind["cuda"]["file"]], "manifest and SHA256SUMS agree"
    assert by_kind["cuda"]["size"] == (dist / by_kind["cuda"]["file"]).stat().st_size, "manifest records the size"
    req = (dist / "requirements-cu13.txt").read_text()
    assert "ffpa-attn==1.2.3+cu13 \\\n    --hash=sha256:" + by_kind["cuda"]["sha256"] in req, \
        "requirements file pins V+cu13 with the CUDA wheel's hash"
    assert man["requirements"]["sha256"] == sums["requirements-cu13.txt"], "manifest lists the requirements file"
    log = (dist / "ffpa-build.log").read_text()
    assert "[wheel_cp312] --tag cp312-cp312-auto --version 1.2.3+cu13" in log, "build log names each engine input"

    site = work / "site"
    files = json.loads((site / "whl" / "cu13" / "ffpa-attn" / "index.json").read_text())["files"]
    assert len(files) == 1 and files[0]["url"].startswith("../../../assets/"), "CUDA page has a relative anchor"
    target = (site / "whl" / "cu13" / "ffpa-attn" / unquote(files[0]["url"].split("#")[0])).resolve()
    assert target.is_file() and target.read_bytes() == (dist / target.name).read_bytes(), \
        "the anchor resolves to an asset with the wheel's bytes"
    assert (site / "pypi" / "simple" / "ffpa-attn" / "index.html").is_file(), "the pure wheel's simple page exists"
    front = (site / "index.html").read_text()
    assert "pip install ffpa-attn==1.2.3+cu13 --index-url &lt;site&gt;/whl/cu13/" in front \
        and "uv pip install ffpa-attn==1.2.3+cu13 --index &lt;site&gt;/whl/cu13/" in front, \
        "the site's front page gives the pinned pip and uv lines"
    # Exactly cmake/install-lines.json's lines, rendered with this release's values.
    values = {"cuda_version": "1.2.3+cu13", "channel": "cu13", "site": "<site>", "pypi": INSTALL_LINES["docs"]["pypi"]}
    for tool in ("pip", "uv"):
        line = INSTALL_LINES["cuda"][tool].format(**values)
        assert line.replace("<", "&lt;").replace(">", "&gt;") in front, f"front page lacks the {tool} line: {line}"
    # Why the local version, and what to do over an installed pure wheel.
    assert "Why <code>==1.2.3+cu13</code> and not <code>==1.2.3</code>" in front \
        and "Requirement already satisfied" in front and "Over an installed pure wheel, run the same lines" in front, \
        "the front page explains the local-version pin and the pure-wheel case"
    assert "development build" not in front, "a release version is not called a development build"
    r3 = run([ffpa_env("INDEX"), "verify", "--index-dir", site, "--channel", "cu13", "--assets", site / "assets"])
    assert r3.returncode == 0, "verify accepts the local site: " + r3.stdout[-300:] + r3.stderr[-300:]

    # Publishing a dev-profile manifest is refused, naming the profile.
    r4 = run([ffpa_env("INDEX"), "publish", "--tag", "v1.2.3+cu13", "--manifest", dist / "ffpa-release-manifest.json",
              "--site-repo", work / "nosite", "--assets", f"dir:{work / 'assets'}", "--dry-run"])
    assert r4.returncode != 0 and "profile 'dev'" in r4.stderr, "publish refuses a dev manifest: " + r4.stderr[-300:]


def test_pure_tree_with_compiled_code_is_refused_before_writing(work, staged, ffpa_env):
    (staged / "wheel_pure" / "ffpa_attn" / "_C.so").write_bytes(b"\x7fELF not really")
    r = release(ffpa_env, work, plan_for(work), staged)
    assert r.returncode == 1 and "'ffpa_attn/_C.so' is an ELF binary but the wheel's platform is 'any'" in r.stderr \
        and "pure wheel must not ship binaries" in r.stderr, "compiled code refused: " + r.stderr
    assert not (work / "dist").exists() or not any((work / "dist").iterdir()), "nothing written for the refused plan"
    assert not (work / "site").exists(), "no site written for the refused plan"


@pytest.mark.parametrize("mutate, expect", [
    (lambda p: p.update(schema=1), "'schema' is 1, this engine reads 2"),
    (lambda p: p["wheels"][0].pop("tags"), "'wheels[0].tags' is missing"),
    (lambda p: p.update(head_dims=["64"]), "'head_dims' must hold integers"),
    (lambda p: p["wheels"][1].update(tree="missing"), "the tree missing was not staged"),
    (lambda p: p["wheels"][1].update(tree="../wheel_cp312"), "'wheels[1].tree' is '../wheel_cp312', not a directory"),
], ids=["schema", "tags", "head_dims", "tree", "tree-outside"])
def test_malformed_plan_names_the_field(work, staged, ffpa_env, mutate, expect):
    bad = plan_for(work, site_dir=None)
    mutate(bad)
    r = release(ffpa_env, work, bad, staged, "bad.json")
    assert r.returncode != 0 and expect in r.stderr, f"bad plan refused: {expect}: {r.stderr}"
    assert not (work / "dist").exists() or not any((work / "dist").glob("*")), "nothing written"


def test_front_page_renders_the_plans_install_lines(work, staged, ffpa_env):
    """The front page's CUDA lines come from the plan (cmake/install-lines.json), not from
    the engine: a changed template shows on the page, and a placeholder the engine does
    not know is refused with the file to fix."""
    lines = plan_install_lines()
    lines["pip"] = lines["pip"].replace("pip install", "pip install --upgrade", 1)
    r = release(ffpa_env, work, plan_for(work, install_lines=lines), staged)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pip install --upgrade ffpa-attn==1.2.3+cu13" in (work / "site" / "index.html").read_text()

    lines["uv"] += " --python {interpreter}"
    r = release(ffpa_env, work, plan_for(work, install_lines=lines, out_dir=str(work / "dist2"),
                                         site_dir=str(work / "site2")), staged)
    assert r.returncode != 0 and "fix cmake/install-lines.json" in r.stderr, r.stdout + r.stderr
    assert not (work / "site2").exists() and not any((work / "dist2").glob("*.whl")), \
        "nothing is written from a line the engine cannot render"


def test_plan_without_install_lines_is_refused(work, staged, ffpa_env):
    plan = plan_for(work)
    del plan["install_lines"]
    r = release(ffpa_env, work, plan, staged)
    assert r.returncode != 0 and "'install_lines' is missing" in r.stderr, r.stdout + r.stderr
