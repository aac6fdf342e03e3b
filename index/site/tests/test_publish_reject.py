# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""A rejected push of the site branch prints the exact recovery commands, and running
them as printed finishes the publish."""
import subprocess

from site_testlib import check, check_index_consistent, git, make_wheel, run, sha256


def test_publish_reject(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    wheels = [make_wheel(work / "dist", "0.2.5+cu13")]
    args = ["publish", "--tag", "v0.2.5+cu13", "--wheels", *wheels, "--site-repo", site, "--assets",
            f"dir:{work / 'assets'}", "--release-url", "https://example.invalid/{tag}/", "--target", head, "--source-dir", src]
    # Committed locally, not pushed; meanwhile someone else pushes to the site.
    check(run(args, env={"FFPA_PUBLISH_KILL_AT": "commit"}).returncode != 0, "kill hook did not fire")
    other = work / "other"
    git("clone", "--quiet", "-b", "gh-pages", str(remote), str(other))
    (other / "CNAME").write_text("ffpa.example.invalid\n")
    git("add", "CNAME", cwd=other)
    git("-c", "user.name=o", "-c", "user.email=o@x", "commit", "--quiet", "-m", "cname", cwd=other)
    git("push", "--quiet", "origin", "gh-pages", cwd=other)

    p = run(args, check_rc=1)
    check("rejected" in p.stderr, p.stderr)
    cmds = [line.strip() for line in p.stderr.splitlines() if line.startswith("  git -C ")]
    check(len(cmds) == 2 and "pull --rebase origin gh-pages" in cmds[0] and cmds[1].endswith("push origin gh-pages"),
          f"recovery commands not printed as expected:\n{p.stderr}")
    for c in cmds:
        subprocess.run(c, shell=True, check=True)
    check(git("--git-dir", str(remote), "rev-parse", "gh-pages") == git("rev-parse", "HEAD", cwd=site), "not pushed")
    check((site / "CNAME").exists(), "the other push was lost")
    check_index_consistent(site, {wheels[0].name: sha256(wheels[0])})
    p = run(args, check_rc=0)
    check("already has the index" in p.stdout, p.stdout)
    print("reject: OK")
