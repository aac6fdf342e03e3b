# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Preflight and convergence with real kills: a publish SIGKILLed at a random moment (not only at
the step boundaries site.publish_kill uses) either did nothing or is finished by
running the same command again: the pages equal what their JSON renders to and every
file hashes (verify), the release holds exactly the wheels and their .metadata (no
upload temp file), the site is clean and pushed, and nothing is left under $TMPDIR."""
import os
import random
import signal
import subprocess
import time

from site_testlib import CLI, check, fresh_dir, git, make_site, make_source, make_wheel, run


def test_publish_random_kill():
    work = fresh_dir("random-kill")
    src, head = make_source(work)
    tmp = work / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    wheels = [make_wheel(work / "dist", "0.3.0+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64")
              for t in ("cp311", "cp312", "cp313")]
    rng = random.Random(3)
    killed = 0
    for r in range(12):
        d = work / f"round{r}"
        d.mkdir()
        remote, site = make_site(d)
        assets = d / "assets"
        args = [CLI, "publish", "--tag", "v0.3.0+cu13", "--wheels", *map(str, wheels), "--site-repo", str(site),
                "--assets", f"dir:{assets}", "--release-url", "https://example.invalid/{tag}/", "--target", head,
                "--source-dir", str(src)]
        start = time.monotonic()
        dry_run = subprocess.run(args + ["--dry-run"], env=env, capture_output=True, text=True)
        check(dry_run.returncode == 0, f"round {r}: the dry run failed:\n{dry_run.stderr}")
        dry = time.monotonic() - start  # a publish takes a few times its preflight
        p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 4.0) * dry)
        p.send_signal(signal.SIGKILL)
        killed += p.wait() == -signal.SIGKILL
        q = subprocess.run(args, env=env, capture_output=True, text=True)
        check(q.returncode == 0, f"round {r}: the re-run failed:\n{q.stdout}\n{q.stderr}")
        run(["verify", "--index-dir", site, "--assets", assets], env={"TMPDIR": str(tmp)}, check_rc=0)
        names = sorted(x.name for x in (assets / "v0.3.0+cu13").iterdir())
        check(names == sorted([".release.json"] + [w.name for w in wheels] + [w.name + ".metadata" for w in wheels]),
              f"round {r}: release holds {names}")
        check(git("status", "--porcelain", "--untracked-files=all", cwd=site) == "", f"round {r}: site left dirty")
        check(git("--git-dir", str(remote), "rev-parse", "gh-pages") == git("rev-parse", "HEAD", cwd=site),
              f"round {r}: not pushed")
    check(killed > 0, "no publish was killed: every run finished before its kill")
    check(list(tmp.iterdir()) == [], f"left under TMPDIR: {list(tmp.iterdir())}")
    print(f"random kill: {killed} of 12 publishes killed, every re-run converged: OK")
