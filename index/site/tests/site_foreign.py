# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Issue 10 items 9 and 11: publish commits only what it wrote, and foreign content in
a channel is refused before anything is printed or written.
- an untracked whl/cu13/.env, or another project's page edited by hand, makes publish
  refuse and name it; nothing is created;
- temp files a killed add left (.index.json.tmp.*) are removed by the next run, never
  committed, and a committed one is removed in the next commit;
- the publish commit holds exactly the pages the engine wrote;
- a stray notes/index.html or other/index.json makes add, remove, yank, unyank and
  render refuse with nothing like "removed ..." printed;
- a --reason that is not UTF-8 is refused with a message, not an internal error;
- nothing is left under $TMPDIR."""
import os
import shutil

from site_testlib import (check, check_index_consistent, expect_refusal, fresh_dir, git, make_site, make_source,
                          make_wheel, run, sha256, verify_pages)

work = fresh_dir("foreign")
remote, site = make_site(work)
src, head = make_source(work)
assets = work / "assets"
tmp = work / "tmp"
tmp.mkdir()
env = {"TMPDIR": str(tmp)}
roots = (site, remote, assets)
channel = site / "whl" / "cu13"
expected = {}


def publish(version, name="ffpa_attn", rc=0):
    w = make_wheel(work / "dist", f"{version}+cu13", name=name)
    p = run(["publish", "--tag", f"v{version}+cu13", "--wheels", w, "--site-repo", site, "--assets", f"dir:{assets}",
             "--release-url", "https://example.invalid/{tag}/", "--target", head, "--source-dir", src], env=env,
            check_rc=rc)
    if rc == 0:
        expected[w.name] = sha256(w)
    return w, p


def publish_args(version):
    w = make_wheel(work / "dist", f"{version}+cu13")
    return ["publish", "--tag", f"v{version}+cu13", "--wheels", w, "--site-repo", site, "--assets", f"dir:{assets}",
            "--release-url", "https://example.invalid/{tag}/", "--target", head, "--source-dir", src]


def committed_paths():
    return sorted(git("show", "--name-only", "--format=", "HEAD", cwd=site).split())


publish("0.2.5")
other, _ = publish("0.1.0", name="other_proj")
del expected[other.name]  # another project's page; check_index_consistent reads ffpa-attn's

# 9a: an untracked foreign file in the channel is never committed: publish refuses.
(channel / ".env").write_text("TOKEN=secret\n")
p = expect_refusal(publish_args("0.2.6"), "whl/cu13/.env", roots, env=env)
check("[1/4]" not in p.stdout, p.stdout)
expect_refusal(["add", "--index-dir", site, "--release-url", "https://x/", make_wheel(work / "x", "0.2.6+cu13")],
               "whl/cu13/.env", roots, env=env)
(channel / ".env").unlink()

# 9b: another project's page edited by hand (uncommitted) is not this publish's to commit.
page = channel / "other-proj" / "index.json"
page.write_text(page.read_text().replace('"name"', ' "name"', 1))
expect_refusal(publish_args("0.2.6"), "whl/cu13/other-proj/index.json", roots, env=env)
git("checkout", "--", "whl/cu13/other-proj/index.json", cwd=site)

# 9c: a killed add's temp files: removed by the next run, never committed.
stale = channel / "ffpa-attn" / ".index.json.tmp.Ab12Cd"
stale.write_text('{"half": ')
stale_root = channel / ".index.html.tmp.Zz99Yy"
stale_root.write_text("<html")
git("add", "-f", str(stale_root.relative_to(site)), cwd=site)  # an older publish committed one
git("commit", "--quiet", "-m", "an older publish committed a temp file", cwd=site)
git("push", "--quiet", "origin", "gh-pages", cwd=site)
publish("0.2.6")
check(not stale.exists() and not stale_root.exists(), "stale temp files were not removed")
check(committed_paths() == sorted(["whl/cu13/.index.html.tmp.Zz99Yy", "whl/cu13/ffpa-attn/index.html",
                                   "whl/cu13/ffpa-attn/index.json"]),
      f"publish committed {committed_paths()}")
check(".tmp." not in git("ls-files", cwd=site), git("ls-files", cwd=site))
check(git("status", "--porcelain", "--untracked-files=all", cwd=site) == "", "site left dirty")
check_index_consistent(site, expected)
stale.write_text("{")
run(["add", "--index-dir", site, "--release-url", "https://example.invalid/{tag}/", make_wheel(work / "y", "0.2.7+cu13")], env=env,
    check_rc=0)
check(not stale.exists(), "add left a stale temp file")
git("checkout", "--", "whl", cwd=site)
git("clean", "-fdq", "whl", cwd=site)

# 11: foreign pages in the channel: every writer refuses first and prints nothing else.
notes = channel / "notes"
notes.mkdir()
(notes / "index.html").write_text("<html><body><p>release notes</p></body></html>\n")
stray = channel / "other"
stray.mkdir()
(stray / "index.json").write_text('{"meta": {"api-version": "1.1"}, "name": "something-else", "files": []}\n')
for args in (["remove", "--version", "0.2.5"], ["yank", "--version", "0.2.5", "--reason", "x"],
             ["unyank", "--version", "0.2.5"], ["render"]):
    p = expect_refusal([args[0], "--index-dir", site, *args[1:]], "whl/cu13/notes/index.html", roots, env=env)
    check("whl/cu13/other/index.json" in p.stderr, p.stderr)
    check(p.stdout == "", f"{args[0]} printed before refusing:\n{p.stdout}")
expect_refusal(["add", "--index-dir", site, "--release-url", "https://x/", make_wheel(work / "z", "0.2.8+cu13")],
               "whl/cu13/notes/index.html", roots, env=env)
expect_refusal(publish_args("0.2.8"), "whl/cu13/notes/index.html", roots, env=env)
p = run(["verify", "--index-dir", site, "--assets", assets], env=env, check_rc=1)
check("FOREIGN" in p.stdout and "notes/index.html" in p.stdout, p.stdout)
shutil.rmtree(notes)
shutil.rmtree(stray)

# 11: a reason that is not UTF-8.
p = expect_refusal(["yank", "--index-dir", site, "--version", "0.2.5", "--reason", b"bad \xff reason"],
                   "is not valid UTF-8", roots, env=env)
check("\\xff" in p.stderr, p.stderr)
run(["yank", "--index-dir", site, "--version", "0.2.5", "--reason", "wrong kernels"], env=env, check_rc=0)
verify_pages(site, assets)

check(list(tmp.iterdir()) == [], f"left under TMPDIR: {list(tmp.iterdir())}")
print("foreign: OK")
