# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Publish checks the site before its first side effect (index/README.md, "The site's
paths"): with the channel or the index prefix a symlink out of the checkout, the
index directory ignored by git, or an index prefix inside .git (or any dot-directory),
publish is refused with nothing created (no release, no asset, no page, no commit,
nothing outside the checkout), and add and render refuse the same paths. "published"
is printed only once the remote holds the index commit."""
import os

from site_testlib import check, expect_refusal, git, make_site, make_wheel, run


def test_site_paths(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    whl = make_wheel(work / "w", "1.0.0+cu13")
    outside = work / "outside"
    outside.mkdir()

    def publish(site_dir, *extra):
        return ["publish", "--tag", "v1.0.0+cu13", "--wheels", whl, "--site-repo", site_dir, "--assets", f"dir:{assets}",
                "--release-url", "https://example.invalid/{tag}/", "--target", head, "--source-dir", src, *extra]

    roots = (site, remote, assets, outside)
    # The channel directory, then the prefix directory, a symlink out of the checkout.
    for link, target in (("whl/cu13", outside), ("whl", outside)):
        (site / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, site / link)
        git("add", "-A", cwd=site)
        git("commit", "--quiet", "-m", f"{link} a symlink", cwd=site)
        p = expect_refusal(publish(site), "is a symlink", roots)
        check("replace it with a real directory" in p.stderr, p.stderr)
        check(not assets.exists(), "a release was created before the site was checked")
        expect_refusal(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/", whl],
                       "is a symlink", roots)
        expect_refusal(["render", "--index-dir", site], "is a symlink", roots)
        check(not any(outside.rglob("*")), f"written through the symlink: {list(outside.rglob('*'))}")
        git("rm", "--quiet", link, cwd=site)
        git("commit", "--quiet", "-m", f"{link} gone", cwd=site)
        git("push", "--quiet", "origin", "gh-pages", cwd=site)

    # whl/ ignored by git: the pages could be written but never committed.
    (site / ".gitignore").write_text("whl/\n")
    git("add", ".gitignore", cwd=site)
    git("commit", "--quiet", "-m", "ignore whl", cwd=site)
    p = expect_refusal(publish(site), "is ignored by git", roots)
    check("check-ignore -v" in p.stderr, p.stderr)
    check(not assets.exists(), "a release was created for a site that cannot commit its index")
    git("rm", "--quiet", ".gitignore", cwd=site)
    git("commit", "--quiet", "-m", "unignore", cwd=site)
    git("push", "--quiet", "origin", "gh-pages", cwd=site)

    # The index prefix in the git directory or another dot-directory.
    for prefix in (".git", ".git/hooks", ".github", "whl/.hidden"):
        expect_refusal(publish(site, "--index-prefix", prefix), "none starting with '.'", roots)
        expect_refusal(["add", "--index-dir", site, "--index-prefix", prefix, "--release-url",
                        "https://example.invalid/{tag}/", whl], "none starting with '.'", roots)
    expect_refusal(publish(site, "--channel", ".cu13"), "cu<CUDA major>", roots)

    # A publish that goes through says "published" with the remote holding its commit.
    p = run(publish(site), env=env)
    check(p.returncode == 0 and "published 1.0.0" in p.stdout, f"{p.stdout}\n{p.stderr}")
    check(git("rev-parse", "HEAD", cwd=site) == git("rev-parse", "gh-pages", cwd=remote), "remote lacks the index")
    # The remote cannot be reached on the re-run (the fetch only warns) while the local
    # remote-tracking branch still says it holds the index: publish does not claim it.
    git("remote", "set-url", "origin", str(work / "gone.git"), cwd=site)
    p = run(publish(site), env=env)
    check(p.returncode == 1 and "not published" in p.stderr and "published 1.0.0" not in p.stdout,
          f"{p.returncode}\n{p.stdout}\n{p.stderr}")
    git("remote", "set-url", "origin", str(remote), cwd=site)
    p = run(publish(site), env=env)
    check(p.returncode == 0 and "published 1.0.0" in p.stdout, f"{p.stdout}\n{p.stderr}")


def test_release_url_ending_in_the_tag(release_site):
    """A --release-url that ends in the tag being published (the runbook's mirror
    spelling) is read as the {tag} template, said so, and the next release's URL spelled
    the same way is accepted: never accepted once and refused later."""
    work, remote, site, src, head, assets, tmp, env = release_site
    import json
    for version in ("1.0.0", "1.0.1"):
        whl = make_wheel(work / f"w{version}", f"{version}+cu13")
        tag = f"v{version}+cu13"
        p = run(["publish", "--tag", tag, "--wheels", whl, "--site-repo", site, "--assets", f"dir:{assets}",
                 "--release-url", f"https://example.invalid/releases/download/{tag}", "--target", head,
                 "--source-dir", src], env=env)
        check(p.returncode == 0, f"{tag}: {p.stdout}\n{p.stderr}")
        check("read as the template https://example.invalid/releases/download/{tag}/" in p.stdout, p.stdout)
        page = json.loads((site / "whl" / "cu13" / "ffpa-attn" / "index.json").read_text())
        check(page["_ffpa-release-url"] == "https://example.invalid/releases/download/{tag}/", page)
        urls = {f["filename"]: f["url"] for f in page["files"]}
        check(urls[whl.name].startswith(f"https://example.invalid/releases/download/v{version}%2Bcu13/"), urls)


def test_channel_serves_its_platforms(tmp_path):
    """add (and publish, through the same plan) files into a cu channel only wheels pip
    on Linux x86_64 CPython 3 can install: Windows, macOS and Python 2 wheels are refused."""
    site = tmp_path / "site"
    run(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/",
         make_wheel(tmp_path / "ok", "1.0.0+cu13")], check_rc=0)
    for i, (tag, message) in enumerate((("cp312-cp312-win_amd64", "platform tag 'win_amd64'"),
                                        ("cp312-cp312-macosx_11_0_arm64", "platform tag 'macosx_11_0_arm64'"),
                                        ("cp312-cp312-manylinux_2_28_aarch64", "platform tag"),
                                        ("cp27-cp27mu-manylinux1_x86_64", "python tag 'cp27'"),
                                        ("py2-none-any", "python tag 'py2'"))):
        whl = make_wheel(tmp_path / f"w{i}", "1.0.1+cu13", tag=tag)
        p = expect_refusal(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/", whl],
                           message, (site,))
        check("does not belong in the cu13 channel" in p.stderr, p.stderr)
