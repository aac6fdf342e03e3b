# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Channels cannot nest (docs/release.md, "Channels and the index prefix"): the index
prefix and the channel are one directory name each, so the index lies at the fixed depth
<prefix>/<channel>/<project>/. A --channel or --index-prefix of several parts (cu13/x,
whl/cu13) is refused by add, render, yank and publish before anything is written or
created, with the fix named; a site that already holds a channel nested inside another
(as an older engine wrote it) is refused by name, with the way out, not as a stray file;
and once it is moved out, the outer channel works again."""
import json
import shutil

from site_testlib import check, expect_refusal, make_wheel, run, tree_hash

URL = "https://example.invalid/{tag}/"


def test_channel_and_prefix_are_one_name(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    whl = make_wheel(work / "w", "1.0.0+cu13")
    run(["add", "--index-dir", site, "--release-url", URL, whl], check_rc=0)
    roots = (site, remote)
    nested = "has several parts; the index prefix and the channel are one directory name each"
    for flag, value in (("--channel", "cu13/x"), ("--channel", "x/cu13"), ("--index-prefix", "whl/cu13"),
                        ("--index-prefix", "a/b")):
        for cmd in (["add", "--index-dir", site, "--release-url", URL, whl],
                    ["render", "--index-dir", site],
                    ["yank", "--index-dir", site, "--version", "1.0.0+cu13"],
                    ["verify", "--index-dir", site, "--assets", work / "w"]):
            p = expect_refusal(cmd + [flag, value], nested, roots)
            check(f"{flag} '{value}'" in p.stderr and "pass one name" in p.stderr, p.stderr)
    # publish checks its inputs before any release, asset or commit; the channel's own
    # rule (cu<N>) refuses a nested channel name there first.
    publish = ["publish", "--tag", "v1.0.0+cu13", "--wheels", whl, "--site-repo", site, "--assets", f"dir:{assets}",
               "--release-url", URL, "--target", head, "--source-dir", src]
    expect_refusal(publish + ["--index-prefix", "whl/cu13"], nested, roots, env=env)
    expect_refusal(publish + ["--channel", "cu13/x"], "is not cu<CUDA major>", roots, env=env)
    check(not assets.exists(), "a release was created for a refused prefix")
    check(not (site / "whl" / "cu13" / "cu13").exists() and not (site / "whl" / "cu13" / "x").exists(),
          "a nested channel was created")


def test_existing_nested_channel_is_named(tmp_path):
    """A site an older engine wrote with --channel cu13/x (an index at whl/cu13/x) or
    --index-prefix whl/cu13 (whl/cu13/cu13): add, render, yank and verify of cu13 refuse
    it as a nested index, say how to move it out, and work again once it is moved."""
    site = tmp_path / "site"
    whl = make_wheel(tmp_path / "w", "1.0.0+cu13")
    run(["add", "--index-dir", site, "--release-url", URL, whl], check_rc=0)
    good = tree_hash(site)
    for inner in ("x", "cu13"):
        # What the older engine wrote: a whole channel (root pages, one project page)
        # inside whl/cu13, here as a copy of whl/cu13 itself.
        shutil.copytree(site / "whl" / "cu13", tmp_path / "inner")
        shutil.move(tmp_path / "inner", site / "whl" / "cu13" / inner)
        for cmd in (["add", "--index-dir", site, "--release-url", URL, whl],
                    ["render", "--index-dir", site],
                    ["yank", "--index-dir", site, "--version", "1.0.0+cu13"],
                    ["unyank", "--index-dir", site, "--version", "1.0.0+cu13"]):
            p = expect_refusal(cmd, f"whl/cu13/{inner}/ holds the directory ffpa-attn/: it is an index nested inside "
                                    "whl/cu13", (site,))
            check(f"git mv whl/cu13/{inner} whl/{inner}" in p.stderr, p.stderr)
            check(p.stderr.count("nested inside") == 1 and "not a page ffpa-index writes" not in p.stderr,
                  f"one problem naming the nested index, not one per file:\n{p.stderr}")
        # The way out the message names: the nested index becomes a channel of its own.
        if inner == "x":
            shutil.move(site / "whl" / "cu13" / "x", site / "whl" / "x")
            run(["render", "--index-dir", site, "--channel", "x"], check_rc=0)
            shutil.rmtree(site / "whl" / "x")
        else:
            shutil.rmtree(site / "whl" / "cu13" / "cu13")
        check(tree_hash(site) == good, "moving the nested index out left the site changed")
        p = run(["yank", "--index-dir", site, "--version", "1.0.0+cu13", "--reason", "r"], check_rc=0)
        page = json.loads((site / "whl" / "cu13" / "ffpa-attn" / "index.json").read_text())
        check(page["files"][0].get("yanked") == "r", page)
        run(["unyank", "--index-dir", site, "--version", "1.0.0+cu13"], check_rc=0)
        good = tree_hash(site)
    # A directory without pages of its own is a stray file like any other, not called
    # a nested index.
    stray = site / "whl" / "cu13" / "ffpa-attn" / "old"
    stray.mkdir()
    (stray / "notes.txt").write_text("notes\n")
    p = expect_refusal(["render", "--index-dir", site], "whl/cu13/ffpa-attn/old is not a page ffpa-index writes", (site,))
    check("nested" not in p.stderr, p.stderr)
