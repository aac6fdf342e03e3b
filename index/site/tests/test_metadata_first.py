# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""METADATA must parse before anything is written. A wheel whose
METADATA says "Requires-Python: >=3.10\\xff" (not UTF-8; twine rejects it) is refused
by add and by publish with a message naming it, never an internal error; add writes
no page (not even for the good wheel given with it), and publish creates no release,
uploads nothing and commits nothing."""
from site_testlib import check, check_index_consistent, expect_refusal, make_wheel, run, sha256


def test_metadata_first(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    roots = (site, remote, assets)
    first = make_wheel(work / "first", "0.9.0+cu13")
    common = ["--site-repo", site, "--assets", f"dir:{assets}", "--release-url", "https://example.invalid/{tag}/",
              "--target", head, "--source-dir", src]
    run(["publish", "--tag", "v0.9.0+cu13", "--wheels", first, *common], check_rc=0)

    good = make_wheel(work / "good", "1.0.0+cu13", tag="cp311-cp311-manylinux_2_28_x86_64")
    bad = make_wheel(work / "bad", "1.0.0+cu13", requires_python=b">=3.10\xff")
    check(b">=3.10\xff" in __import__("zipfile").ZipFile(bad).read("ffpa_attn-1.0.0+cu13.dist-info/METADATA"),
          "fixture: METADATA does not carry the bad byte")
    for args in (["add", "--index-dir", site, "--release-url", "https://x/", good, bad],
                 ["add", "--index-dir", site, "--release-url", "https://x/", "--metadata-dir", work / "md", bad],
                 ["publish", "--tag", "v1.0.0+cu13", "--wheels", good, bad, *common],
                 ["publish", "--tag", "v1.0.0+cu13", "--wheels", good, bad, *common, "--dry-run"]):
        p = expect_refusal(args, bad.name, roots)
        check("METADATA" in p.stderr, f"the refusal does not name METADATA:\n{p.stderr}")
        check(not (work / "md").exists(), "--metadata-dir written for a refused wheel")
    check(not (assets / "v1.0.0+cu13").exists(), "a release was created")
    check_index_consistent(site, {first.name: sha256(first)})
    print("metadata first: OK")
