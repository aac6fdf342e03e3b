# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Fault injection: a publish SIGKILLed at each step boundary (FFPA_PUBLISH_KILL_AT)
and re-run converges: the index parses, lists every file once with its hash, the
release holds exactly the wheels and their .metadata, and the remote has the commit."""
import json
import signal

from site_testlib import check, check_index_consistent, fresh_dir, git, make_site, make_source, make_wheel, run, sha256


def test_publish_kill():
    BOUNDARIES = ["release", "upload-1", "upload", "index", "commit"]
    work = fresh_dir("kill")
    src, head = make_source(work)
    dist = work / "dist"
    old = [make_wheel(dist, "0.2.4+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in ("cp311", "cp312")]
    new = [make_wheel(dist, "0.2.5+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in ("cp311", "cp312", "cp313")]
    for step in BOUNDARIES:
        d = work / step
        d.mkdir()
        remote, site = make_site(d)
        assets = d / "assets"

        def publish(tag, wheels, env=None):
            return run(["publish", "--tag", tag, "--wheels", *wheels, "--site-repo", site, "--assets", f"dir:{assets}",
                        "--release-url", "https://example.invalid/dl/{tag}/", "--target", head, "--source-dir", src], env=env)

        # An earlier release is in place, so the merge must keep it.
        check(publish("v0.2.4+cu13", old).returncode == 0, "first publish failed")
        p = publish("v0.2.5+cu13", new, env={"FFPA_PUBLISH_KILL_AT": step})
        check(p.returncode == -signal.SIGKILL, f"{step}: expected SIGKILL, got {p.returncode}: {p.stderr}")
        p = publish("v0.2.5+cu13", new)
        check(p.returncode == 0, f"{step}: re-run failed:\n{p.stdout}\n{p.stderr}")
        expected = {w.name: sha256(w) for w in old + new}
        check_index_consistent(site, expected)
        rel = assets / "v0.2.5+cu13"
        names = sorted(x.name for x in rel.iterdir() if not x.name.startswith("."))
        check(names == sorted([w.name for w in new] + [w.name + ".metadata" for w in new]), f"{step}: assets {names}")
        check(all((rel / w.name).read_bytes() == w.read_bytes() for w in new), f"{step}: asset bytes differ")
        json.loads((rel / ".release.json").read_text())
        check(git("--git-dir", str(remote), "rev-parse", "gh-pages") == git("rev-parse", "HEAD", cwd=site),
              f"{step}: remote not at the local commit")
        check(git("status", "--porcelain", cwd=site) == "", f"{step}: site tree not clean")
        print(f"kill at {step}: converged")
    print("kill: OK")
