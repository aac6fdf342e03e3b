# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Preflight covers every later step. What steps 1-4 need is checked
before step 1, so each of these is refused with nothing created: a 240-character
wheel name (its <wheel>.metadata temp file would not fit a file name), an asset store
that cannot be written, a site whose channel directory cannot be created, a site
repository in the middle of a merge; add checks the places it writes the same way.
The longest name that fits (234 characters) publishes end to end."""
import os
import subprocess

from site_testlib import check, check_index_consistent, expect_refusal, git, make_site, make_wheel, run, sha256


def test_preflight(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site


    def long_wheel(total, n22):
        """A wheel whose file name is `total` characters, made long by its platform tags:
    n22 tags of 22 characters and nine others of 21."""
        tags = [f"manylinux_2_{n}_x86_64" for n in range(100, 100 + n22)]
        tags += [f"manylinux_2_{n}_x86_64" for n in range(17, 17 + 9 - n22)]
        whl = make_wheel(work / f"long{total}", "1.0.0+cu13", tag=f"cp312-cp312-{'.'.join(tags)}")
        check(len(whl.name) == total, f"fixture: {len(whl.name)} characters, wanted {total}: {whl.name}")
        return whl


    def common(store):
        return ["--site-repo", site, "--assets", f"dir:{store}", "--release-url", "https://example.invalid/{tag}/",
                "--target", head, "--source-dir", src]


    roots = (site, remote, assets)
    too_long = long_wheel(240, 6)
    p = expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", too_long, *common(assets)], "240 characters",
                       roots)
    check("at most 234" in p.stderr, p.stderr)
    check(not assets.exists(), "a release was created for a name that cannot be stored")

    blocker = work / "blocker"
    blocker.write_text("a file where the asset store's parent directory should be\n")
    ok = make_wheel(work / "ok", "1.0.0+cu13")
    expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", ok, *common(blocker / "assets")],
                   "is not a directory", roots + (blocker,))
    if os.geteuid() != 0:  # root writes anywhere: permission bits prove nothing there
        ro = work / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", ok, *common(ro / "assets")], "is not writable",
                       roots + (ro,))
        ro.chmod(0o755)

    # The site's index directory cannot be created: a file named like it is committed.
    bremote, bsite = make_site(work / "b")
    (bsite / "whl").write_text("not a directory\n")
    git("add", "whl", cwd=bsite)
    git("commit", "--quiet", "-m", "whl file", cwd=bsite)
    bargs = ["publish", "--tag", "v1.0.0+cu13", "--wheels", ok, "--site-repo", bsite, "--assets", f"dir:{work / 'bassets'}",
             "--release-url", "https://example.invalid/{tag}/", "--target", head, "--source-dir", src]
    expect_refusal(bargs, "cannot be created", (bsite, bremote, work / "bassets"))
    check(not (work / "bassets").exists(), "a release was created for a site that cannot take the index")

    # add checks every place it writes before the first write, too.
    expect_refusal(["add", "--index-dir", site, "--release-url", "https://x/", "--metadata-dir", blocker / "md", ok],
                   "is not a directory", roots + (blocker,))

    # A site repository in the middle of a merge (or rebase) is not published into.
    (site / ".git" / "MERGE_HEAD").write_text(head + "\n")
    expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", ok, *common(assets)], "in the middle of a merge",
                   roots)
    (site / ".git" / "MERGE_HEAD").unlink()
    # ... nor one whose git index is locked (a git command killed half way).
    (site / ".git" / "index.lock").write_text("")
    expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", ok, *common(assets)], "index.lock exists", roots)
    (site / ".git" / "index.lock").unlink()

    fits = long_wheel(234, 0)
    run(["publish", "--tag", "v1.0.0+cu13", "--wheels", fits, *common(assets)], check_rc=0)
    check((assets / "v1.0.0+cu13" / (fits.name + ".metadata")).exists(), "the metadata of a 234-character name")
    check_index_consistent(site, {fits.name: sha256(fits)})
    check(subprocess.run(["git", "-C", str(site), "status", "--porcelain"], capture_output=True, text=True).stdout == "",
          "site left dirty")
    print("preflight: OK")
