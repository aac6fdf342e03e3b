"""What a directory of wheels holds, as text that two builds of different commits can
be compared by: per wheel, its kind and tags, its member names, and its METADATA and
WHEEL, with the version (and the commit inside it) replaced by {V} and METADATA's
long description named (it is the README of the commit built) instead of copied.
Unless --exact, the interpreter and glibc tags become cp3XY and manylinux_2_Y, and
wheels that are then alike (the CUDA wheels) are listed once.

    python ctest/wheel_contents.py DIST > listing.txt          # write the listing
    python ctest/wheel_contents.py DIST --compare listing.txt  # exit 1 on any difference

The release's wheels must keep their members, METADATA and WHEEL across changes to
the engine (only the version and the commit may differ);
the test wheel.contents (ctest/acceptance/test_wheel_contents.py) holds the ci tree's
wheels to the listing committed in ctest/data/wheel-contents.txt, and a pure-profile
tree's one wheel to its pure section.
"""
import argparse
import difflib
import json
import re
import sys
import zipfile
from pathlib import Path

# The wheel's own version: 0.0.1.dev195+gdff9a72, 0.0.1.dev195+gdff9a72.cu13, 0.3.0,
# 0.3.0+cu13. The channel suffix is kept: it is part of what a wheel is.
_VERSION = re.compile(r"^ffpa_attn-(?P<v>[^-]+?)(?P<ch>[.+]cu\d+)?-")


# What a build machine decides, not the engine: which CPythons it has (one CUDA wheel
# each, all alike but for the tag) and the glibc its binaries need.
_MACHINE = [(re.compile(r"cp3\d+"), "cp3XY"), (re.compile(r"cpython-3\d+"), "cpython-3XY"),
            (re.compile(r"manylinux_2_\d+"), "manylinux_2_Y")]


def listing(dist: Path, readme: str, exact: bool = False) -> str:
    """The listing of the wheels the release manifest in `dist` names (a release
    directory may also hold older builds' wheels)."""
    sections = []
    manifest = json.loads((dist / "ffpa-release-manifest.json").read_text())
    for whl in sorted(dist / w["file"] for w in manifest["wheels"]):
        out = []
        m = _VERSION.match(whl.name)
        if not m:
            raise SystemExit(f"{whl.name}: not an ffpa_attn wheel name")
        version = m.group("v")

        def norm(text: str) -> str:
            text = text.replace(version, "{V}")
            for pattern, repl in [] if exact else _MACHINE:
                text = pattern.sub(repl, text)
            return text

        out.append(f"== {norm(whl.name)}")
        with zipfile.ZipFile(whl) as z:
            names = [i.filename for i in z.infolist()]
            out.extend(f"member {norm(n)}" for n in names)
            for n in names:
                if n.endswith(".dist-info/METADATA") or n.endswith(".dist-info/WHEEL"):
                    text = z.read(n).decode("utf-8")
                    # The long description is the README of the commit built: named, not copied.
                    head, sep, body = text.partition("\n\n")
                    if sep and body == readme:
                        text = head + "\n\n<the README.md of the source tree>\n"
                    out.append(f"-- {norm(n)}")
                    out.extend(norm(text).splitlines())
        if out not in sections:
            sections.append(out)
    return "".join("\n".join(s) + "\n" for s in sections)


def kinds(dist: Path) -> set[str]:
    """The kinds of wheel ("pure", "cuda") the release manifest in `dist` names: a pure-profile
    tree (cmake --preset release-pure) makes the pure wheel only."""
    return {w["kind"] for w in json.loads((dist / "ffpa-release-manifest.json").read_text())["wheels"]}


def select(text: str, wanted: set[str]) -> str:
    """The sections of a listing for the wheel kinds in `wanted` (the pure wheel's section is
    the one tagged py3-none-any)."""
    out = []
    for section in re.split(r"(?m)^(?=== )", text):
        if not section:
            continue
        kind = "pure" if section.split("\n", 1)[0].endswith("-py3-none-any.whl") else "cuda"
        if kind in wanted:
            out.append(section)
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dist", type=Path)
    ap.add_argument("--readme", type=Path, default=Path(__file__).resolve().parents[1] / "README.md",
                    help="the README the wheels were built with (default: this checkout's)")
    ap.add_argument("--compare", type=Path, help="a listing written earlier; exit 1 when this one differs")
    ap.add_argument("--exact", action="store_true",
                    help="keep the interpreter and manylinux tags (one section per wheel)")
    a = ap.parse_args()
    now = listing(a.dist, a.readme.read_text(encoding="utf-8"), a.exact)
    if not a.compare:
        sys.stdout.write(now)
        return 0
    want = select(a.compare.read_text(), kinds(a.dist))
    if now == want:
        print(f"{a.dist}: members, METADATA and WHEEL as in {a.compare}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), now.splitlines(True), str(a.compare), str(a.dist)))
    return 1


if __name__ == "__main__":
    sys.exit(main())
