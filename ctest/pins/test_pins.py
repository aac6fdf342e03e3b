"""CMake's and Ninja's PyPI pins have one home, tools/requirements-build.txt, and every reader
takes them from there.

CTest: pins.build-tools (unit). Fails when
  - a second file of the tree spells a cmake / ninja pin (`cmake==X`, `ninja>=Y`, ...) or a
    version of theirs in prose (`CMake 3.x.y`), or the home's version number anywhere else;
    the one generated exception is ctest/data/wheel-contents.txt (ctest/wheel_contents.py
    writes it from built wheels), whose pins must equal the home's;
  - the home pins either tool other than exactly once with `==`;
  - a reader disagrees with the home: the PEP 517 backend's build requirements
    (tools/pep517/ffpa_build_backend.py), the `jit` extra's Requires-Dist in the release plan
    this build tree's configure wrote (cmake/FfpaReleasePlan.cmake), and the first-use
    build's CMake check (python/ffpa_attn/jit.py), which must accept the pinned CMake.
Each check is also run on a deliberately broken copy, which must fail.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement

REPO = Path(os.environ.get("FFPA_SOURCE") or Path(__file__).resolve().parents[2])
HOME = "tools/requirements-build.txt"
TOOLS = ("cmake", "ninja")
# Generated from built wheels; checked against the home by generated_disagreements.
GENERATED = ("ctest/data/wheel-contents.txt",)
# This module: its breakage cases spell made-up pins on purpose.
SELF = "ctest/pins/test_pins.py"

_PIN = re.compile(r"(?<![\w.-])(cmake|ninja)\s*(===|==|~=|!=|<=|>=|<|>)\s*v?\d", re.I)
_PROSE = re.compile(r"(?<![\w.-])(cmake|ninja)(\s+version)?\s+v?\d+\.\d+\.\d+", re.I)


def home_pins(text: str) -> dict[str, str]:
    """tool -> pinned version from the home's text; a clear error unless each tool is pinned
    exactly once with ==."""
    found: dict[str, list[str]] = {t: [] for t in TOOLS}
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        try:
            req = Requirement(line.split(" --hash", 1)[0])
        except InvalidRequirement as e:
            raise ValueError(f"{HOME}: '{line}' is not a requirement ({e})") from e
        if req.name.lower() not in found:
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            raise ValueError(f"{HOME}: '{line}' is not a `name==version` pin")
        found[req.name.lower()].append(specs[0].version)
    for tool, versions in found.items():
        if len(versions) != 1:
            raise ValueError(f"{HOME} pins {tool} {len(versions)} times (want exactly one `{tool}==version` line)")
    return {t: v[0] for t, v in found.items()}


def tree_files(root: Path) -> list[str]:
    """The tree's files as git sees them: tracked, plus untracked ones git does not ignore."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    return sorted({p for p in out.decode().split("\0") if p})


def second_spellings(root: Path, files: list[str], pins: dict[str, str]) -> list[str]:
    """'path:line: text' for every spelling of a cmake / ninja pin or of the home's versions
    outside the home and the generated listings."""
    numbers = [re.compile(rf"(?<![\w.]){re.escape(v)}(?!\w|\.\d)") for v in pins.values()]
    hits = []
    for rel in files:
        if rel in (HOME, SELF) or rel in GENERATED:
            continue
        path = root / rel
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if _PIN.search(line) or _PROSE.search(line) or any(p.search(line) for p in numbers):
                hits.append(f"{rel}:{n}: {line.strip()}")
    return hits


def extra_pins(lines: list[str], extra: str) -> dict[str, list[str]]:
    """tool -> the versions `Requires-Dist: tool==V; extra == "<extra>"` lines pin."""
    found: dict[str, list[str]] = {t: [] for t in TOOLS}
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.name.lower() in found and req.marker is not None and req.marker.evaluate({"extra": extra}) \
                and not req.marker.evaluate({"extra": ""}):
            found[req.name.lower()] += [s.version for s in req.specifier] or ["(unpinned)"]
    return found


def disagreements(found: dict[str, list[str]], pins: dict[str, str], what: str, count: int | None = None) -> list[str]:
    problems = []
    for tool, want in pins.items():
        got = found.get(tool, [])
        if not got or any(v != want for v in got) or (count is not None and len(got) != count):
            problems.append(f"{what} pins {tool} {got or 'nowhere'}; {HOME} pins {tool}=={want}"
                            + (f" (want {count} such pin{'s' if count != 1 else ''})" if count is not None else ""))
    return problems


def generated_disagreements(text: str, pins: dict[str, str]) -> list[str]:
    # The listing holds the METADATA of the pure and of the CUDA wheel: each has the extra.
    return disagreements(extra_pins(text.splitlines(), "jit"), pins, GENERATED[0], count=2)


# --- the tree as it is ----------------------------------------------------------------

@pytest.fixture(scope="module")
def pins():
    return home_pins((REPO / HOME).read_text(encoding="utf-8"))


def test_no_second_spelling_of_cmake_or_ninja_pins(pins):
    hits = second_spellings(REPO, tree_files(REPO), pins)
    assert not hits, (f"CMake's and Ninja's pins live in {HOME} only; read them from there "
                      "(docs quote the file, not the number):\n  " + "\n  ".join(hits))


def test_the_generated_wheel_listing_agrees(pins):
    problems = generated_disagreements((REPO / GENERATED[0]).read_text(encoding="utf-8"), pins)
    assert not problems, ("\n".join(problems) + "\nrewrite it from built wheels: "
                          "python ctest/wheel_contents.py <dist> > ctest/data/wheel-contents.txt")


def test_the_pep517_backend_asks_for_the_home_pins(pins, monkeypatch):
    sys.path.insert(0, str(REPO / "tools" / "pep517"))
    try:
        import ffpa_build_backend as backend
    finally:
        sys.path.remove(str(REPO / "tools" / "pep517"))
    monkeypatch.chdir(REPO)
    for hook in (backend.get_requires_for_build_wheel, backend.get_requires_for_build_sdist):
        reqs = [Requirement(r) for r in hook({})]
        found = {t: [s.version for r in reqs if r.name == t for s in r.specifier] for t in TOOLS}
        if hook is backend.get_requires_for_build_sdist:   # an sdist needs CMake only
            found.pop("ninja")
            assert not disagreements(found, {"cmake": pins["cmake"]}, hook.__name__, count=1)
        else:
            assert not disagreements(found, pins, hook.__name__, count=1)


def test_the_jit_extra_of_the_release_plan_asks_for_the_home_pins(pins):
    plan = os.environ.get("FFPA_RELEASE_PLAN")
    assert plan and Path(plan).is_file(), \
        f"FFPA_RELEASE_PLAN ({plan!r}) names no release plan: the configure writes it (cmake/FfpaWheelPackaging.cmake)"
    metadata = json.loads(Path(plan).read_text(encoding="utf-8"))["metadata"]
    problems = disagreements(extra_pins(metadata.splitlines(), "jit"), pins, "the jit extra's METADATA", count=1)
    assert not problems, "\n".join(problems) + "\nreconfigure the build tree (cmake --preset ...)"


def test_the_first_use_build_accepts_the_pinned_cmake(pins, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "python"))
    from ffpa_attn import jit
    fake = tmp_path / "cmake"
    fake.write_text(f"#!/bin/sh\necho 'cmake version {pins['cmake']}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert jit._cmake_version_ok(str(fake)), f"python/ffpa_attn/jit.py refuses the pinned CMake {pins['cmake']}"


# --- the checks fail on broken copies --------------------------------------------------

PINS = {"cmake": "3.99.1", "ninja": "1.77.0"}


@pytest.mark.parametrize("text, message", [
    ("cmake==3.99.1\n", "pins ninja 0 times"),
    ("cmake==3.99.1\nninja==1.77.0\ncmake==3.99.2\n", "pins cmake 2 times"),
    ("cmake>=3.99.1\nninja==1.77.0\n", "is not a `name==version` pin"),
    ("cmake==3.99.1\nninja==1.77.0 \\\n    --hash=sha256:" + "0" * 64 + "\n", None),
])
def test_the_home_is_parsed_strictly(text, message):
    if message is None:
        assert home_pins(text) == PINS
        return
    with pytest.raises(ValueError, match=re.escape(message)):
        home_pins(text)


@pytest.mark.parametrize("rel, line, bad", [
    ("tools/requirements-jit.txt", "cmake==3.98.6", True),
    ("docs/install.md", "pip install 'ninja>=1.76'", True),
    ("pyproject.toml", 'requires = ["CMake ~= 3.98"]', True),
    ("docs/install.md", "CMake 3.98.6 builds it", True),
    ("README.md", "the pinned 1.77.0 of Ninja", True),
    (HOME, "cmake==3.99.1", False),
    (GENERATED[0], 'Requires-Dist: cmake==3.99.1; extra == "jit"', False),
    ("docs/install.md", "CMake 3.25 or newer", False),
    ("CMakeLists.txt", "cmake_minimum_required(VERSION 3.25)", False),
    ("docs/install.md", "the pins of tools/requirements-build.txt", False),
    ("python/x.py", "version 1.77.0.1 of something else", False),
])
def test_a_second_spelling_is_found(tmp_path, rel, line, bad):
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text(f"first line\n{line}\n")
    hits = second_spellings(tmp_path, [rel], PINS)
    assert hits == ([f"{rel}:2: {line}"] if bad else []), hits


def test_a_disagreeing_reader_is_found():
    good = ['Requires-Dist: numpy', 'Requires-Dist: cmake==3.99.1; extra == "jit"',
            'Requires-Dist: ninja==1.77.0; extra == "jit"']
    assert not disagreements(extra_pins(good, "jit"), PINS, "plan", count=1)
    stale = [good[0], 'Requires-Dist: cmake==3.98.6; extra == "jit"', good[2]]
    assert disagreements(extra_pins(stale, "jit"), PINS, "plan", count=1) == \
        [f"plan pins cmake ['3.98.6']; {HOME} pins cmake==3.99.1 (want 1 such pin)"]
    missing = good[:2]
    assert "plan pins ninja nowhere" in disagreements(extra_pins(missing, "jit"), PINS, "plan", count=1)[0]
    twice = good + ['Requires-Dist: ninja==1.77.0; extra == "jit"']
    assert disagreements(extra_pins(twice, "jit"), PINS, "plan", count=1)
    # A pin outside the extra is not the extra's.
    unconditional = [good[0], "Requires-Dist: cmake==3.99.1", good[2]]
    assert disagreements(extra_pins(unconditional, "jit"), PINS, "plan", count=1)
    # The generated listing carries two wheels' METADATA.
    assert not generated_disagreements("\n".join(good + good[1:]), PINS)
    assert generated_disagreements("\n".join(good + stale[1:]), PINS)
