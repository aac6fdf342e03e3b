"""The main job's wheels hold the members, METADATA and WHEEL that
ctest/data/wheel-contents.txt lists (ctest/wheel_contents.py writes it; the version,
the commit, the interpreter and glibc tags and the README body are normalised). A
change to what the wheels carry is then a reviewed change of that file:

    python ctest/wheel_contents.py build/ci/dist > ctest/data/wheel-contents.txt
"""

import difflib
from pathlib import Path

from wheel_contents import kinds, listing, select

REPO = Path(__file__).resolve().parents[2]


def test_wheels_hold_the_listed_contents(ffpa_env):
    dist = Path(ffpa_env("DIST"))
    # A pure-profile tree makes the pure wheel only: its section of the listing, checked alike.
    made = kinds(dist)
    assert "pure" in made, made
    want = select((REPO / "ctest" / "data" / "wheel-contents.txt").read_text(), made)
    got = listing(dist, (REPO / "README.md").read_text(encoding="utf-8"))
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "wheel-contents.txt", "dist"))
    assert got == want, ("the wheels' members, METADATA or WHEEL changed; if that is intended, rewrite the listing "
                         "with `python ctest/wheel_contents.py <dist> > ctest/data/wheel-contents.txt`\n" + diff)
