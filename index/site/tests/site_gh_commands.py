# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""The gh backend's exact command lines: printed by --dry-run (which runs only the
read-only gh auth status / gh release view), then run through FFPA_GH pointing at a
stub that records argv (and answers "release not found" to view, as gh does)."""
import json
import os
import shlex

from site_testlib import check, fresh_dir, make_site, make_source, make_wheel, run, tree_hash

work = fresh_dir("gh")
remote, site = make_site(work)
log = work / "gh.log"
stub = work / "gh"
stub.write_text(
    "#!/bin/sh\n"
    f"python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\" >> {shlex.quote(str(log))}\n"
    "if [ \"$1 $2\" = 'release view' ]; then echo 'release not found' >&2; exit 1; fi\n")
stub.chmod(0o755)
env = {"FFPA_GH": str(stub)}
wheels = [make_wheel(work / "dist", "0.2.5+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in ("cp311", "cp312")]
src, sha = make_source(work)
args = ["publish", "--tag", "v0.2.5+cu13", "--wheels", *wheels, "--site-repo", site,
        "--assets", "gh:xlite-dev/ffpa-attn", "--target", sha, "--source-dir", src]
notes = ("Install the CUDA 13 build (Linux x86_64):\n\n```\npip install ffpa-attn==0.2.5+cu13 --index-url "
         "https://xlite-dev.github.io/ffpa-attn/whl/cu13/ --extra-index-url https://pypi.org/simple\n```\n\n"
         "Without CUDA (pure Python, from PyPI):\n\n```\npip install -U ffpa-attn==0.2.5\n```\n")
before = tree_hash(site, remote)
p = run(args + ["--dry-run"], env=env, check_rc=0)
check(tree_hash(site, remote) == before, "dry run changed the site")
create = [str(stub), "release", "create", "v0.2.5+cu13", "--repo", "xlite-dev/ffpa-attn", "--target", sha,
          "--notes", notes, "--latest=false"]
check("  " + shlex.join(create) + "\n" in p.stdout, f"release create line missing:\n{p.stdout}")
for w in wheels:
    # The verified copy is uploaded, staged in the site's git directory (never the given path).
    up = [str(stub), "release", "upload", "v0.2.5+cu13", str(site / ".git" / "ffpa-index-publish" / w.name), "--repo",
          "xlite-dev/ffpa-attn"]
    check("  " + shlex.join(up) + "\n" in p.stdout, f"upload line for {w.name} missing:\n{p.stdout}")
check("--title" not in p.stdout, "a title was given")
recorded = [json.loads(x) for x in log.read_text().splitlines()]
check([r[:2] for r in recorded] == [["auth", "status"], ["release", "view"]], f"dry run ran {recorded}")

# The real run issues exactly those commands, in spec order: create, then uploads.
log.unlink()
run(args, env=env, check_rc=0)
recorded = [json.loads(x) for x in log.read_text().splitlines()]
mutating = [r for r in recorded if r[:2] in (["release", "create"], ["release", "upload"])]
check(mutating[0] == create[1:], f"create ran as {mutating[0]}")
uploaded = [os.path.basename(r[3]) for r in mutating[1:]]
check(uploaded == [n for w in wheels for n in (w.name, w.name + ".metadata")], f"uploads {uploaded}")
page = json.loads((site / "whl/cu13/ffpa-attn/index.json").read_text())
check(all(f["url"].startswith("https://github.com/xlite-dev/ffpa-attn/releases/download/v0.2.5%2Bcu13/")
          for f in page["files"]), page)

# publish-pure's release targets the commit explicitly.
log.unlink()
pure = make_wheel(work / "dist", "0.2.5", tag="py3-none-any")
p = run(["publish-pure", "--tag", "v0.2.5", "--wheel", pure, "--assets", "gh:xlite-dev/ffpa-attn", "--target", sha,
         "--source-dir", src, "--repository-url", "http://127.0.0.1:9/", "--simple-url", "file:///nonexistent/", "--dry-run"],
        env={**env, "FFPA_TWINE": "/bin/true"})
check(p.returncode == 1 and "cannot ask" in p.stderr, f"unreachable upload target not refused:\n{p.stderr}")
print("gh commands: OK")
