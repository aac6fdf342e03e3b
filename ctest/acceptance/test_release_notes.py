"""The release-notes machinery (cmake/FfpaReleaseNotes.cmake, tools/cliff.toml) on a
scratch git repository: two release tags and a handful of commits, plus the tags that
must not split the range (a CUDA tag vV+cu13 and a pre-release tag).

Inputs: $FFPA_CMAKE, $FFPA_GIT_CLIFF, $FFPA_INDEX (the module and the configuration are
this checkout's cmake/FfpaReleaseNotes.cmake and tools/cliff.toml).

Proves: `write` covers exactly <previous release tag>..<release commit>, grouped, with
the install lines of the version; the manifest's commit ends the range; a tag already on
the release commit changes nothing; `check` refuses a missing file and notes written for
another version, naming the fix; `attach` sets a dir: store's release notes (replace for
the pure release, append under the engine's install commands for the CUDA one, and a
re-run does not double them) and issues the exact gh command lines (through FFPA_GH);
and FfpaPublish's targets with NOTES end to end (dir: store, local site, pypiserver):
publish and publish-pure refuse missing or stale notes before changing anything,
preflight shows the notes step, and the releases end with the notes attached.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import ffpa_manifest  # the shared manifest helper
from pytest_ffpa import publish_probe_project

failures: list[str] = []


def check(cond: bool, what: str) -> None:
    print(f"[{'OK' if cond else 'FAIL'}] {what.splitlines()[0]}")
    if not cond:
        failures.append(what)


def git(repo: Path, *args: str, date: int = 1700000000) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": f"@{date} +0000", "GIT_COMMITTER_DATE": f"@{date} +0000",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], text=True, capture_output=True, check=True,
                          env=env).stdout.strip()


def publish_targets(a, repo: Path, commit: str) -> None:
    """FfpaPublish's targets with NOTES, end to end: a dir: store, a local site remote and
    a real pypiserver with twine, as the site tests run the engine."""
    work = a.work / "targets"
    dist = work / "dist"
    tree = work / "tree" / "ffpa_attn"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (work / "METADATA").write_text("Summary: probe\nRequires-Python: >=3.10\n")
    wheels = []
    for version, tag, kind in (("0.3.0+cu13", "cp312-cp312-manylinux_2_28_x86_64", "cuda"),
                               ("0.3.0", "py3-none-any", "pure")):
        subprocess.run([a.ffpa_index, "pack", "--tree", tree.parent, "--name", "ffpa-attn", "--version", version,
                        "--tag", tag, "--metadata", work / "METADATA", "--out-dir", dist,
                        "--source-date-epoch", "1700000000"], check=True, capture_output=True)
        f = dist / f"ffpa_attn-{version}-{tag}.whl"
        wheels.append(f)
    (dist / "ffpa-release-manifest.json").write_text(json.dumps(ffpa_manifest.make("0.3.0", commit, wheels)))
    remote, site = work / "site-remote.git", work / "site"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "gh-pages", str(remote)], check=True)
    subprocess.run(["git", "clone", "-q", str(remote), str(site)], check=True, capture_output=True)
    for args in (["checkout", "-q", "-B", "gh-pages"], ["config", "user.name", "t"],
                 ["config", "user.email", "t@example.invalid"], ["commit", "-q", "--allow-empty", "-m", "site"],
                 ["push", "-q", "origin", "gh-pages"]):
        subprocess.run(["git", "-C", str(site), *args], check=True, capture_output=True)
    docs = work / "docs"
    docs.mkdir()
    (docs / "install.md").write_text("pip install ffpa-attn --index-url https://x/whl/cu13/\n")
    notes = dist / "RELEASE_NOTES.md"
    pkgs = work / "pypi"
    pkgs.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(["timeout", "300", a.tools_bin / "pypi-server", "run", "-i", "127.0.0.1", "-p",
                               str(port), "-a", ".", "-P", ".", "--disable-fallback", str(pkgs)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/simple/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        proj = publish_probe_project(work / "proj", a.module.resolve().parent,
                                     f'VERSION 0.3.0 CHANNEL cu13 WHEELS_DIR "{dist}" CLI "{a.ffpa_index}" '
                                     f'DOCS "{docs}" SOURCE_DIR "{repo}" NOTES "{notes}"')
        build = work / "build"
        r = subprocess.run([a.cmake, "-S", proj, "-B", build, f"-DFFPA_SITE_REPO={site}",
                            f"-DFFPA_ASSETS=dir:{work / 'assets'}", "-DFFPA_RELEASE_URL=https://example.invalid/{tag}/",
                            f"-DFFPA_PYPI_REPOSITORY_URL=http://127.0.0.1:{port}/"], capture_output=True, text=True)
        check(r.returncode == 0, f"probe project configures\n{r.stdout}{r.stderr}")
        env = {**os.environ, "FFPA_TWINE": str(a.tools_bin / "twine"), "TWINE_USERNAME": "ffpa",
               "TWINE_PASSWORD": "test"}

        def target(name: str) -> subprocess.CompletedProcess:
            p = subprocess.run([a.cmake, "--build", build, "--target", name], capture_output=True, text=True, env=env)
            p.stdout = " ".join((p.stdout + p.stderr).split())
            return p

        record = work / "assets" / "v0.3.0+cu13" / ".release.json"
        p = target("publish")
        check(p.returncode != 0 and "--target release-notes" in p.stdout and not (work / "assets").exists(),
              f"publish without notes: refused before anything is created\n{p.stdout[-800:]}")
        r = subprocess.run([a.cmake, "-DFFPA_NOTES_ACTION=write", "-DVERSION=0.3.1", "-DCHANNEL=cu13",
                            f"-DOUTPUT={notes}", f"-DSOURCE_DIR={repo}", f"-DCONFIG={a.config}",
                            f"-DGIT_CLIFF={a.git_cliff}", "-DGIT=git", "-P", a.module], capture_output=True, text=True)
        p = target("publish-pure")
        check(p.returncode != 0 and "written for version '0.3.1'" in p.stdout and not any(pkgs.iterdir()),
              f"publish-pure with notes of another version: refused before the upload\n{p.stdout[-800:]}")
        r = subprocess.run([a.cmake, "-DFFPA_NOTES_ACTION=write", "-DVERSION=0.3.0", "-DCHANNEL=cu13",
                            f"-DOUTPUT={notes}", f"-DMANIFEST={dist / 'ffpa-release-manifest.json'}",
                            f"-DSOURCE_DIR={repo}", f"-DCONFIG={a.config}", f"-DGIT_CLIFF={a.git_cliff}", "-DGIT=git",
                            "-P", a.module], capture_output=True, text=True)
        check(r.returncode == 0, f"notes of 0.3.0 written\n{r.stderr}")
        text = notes.read_text()
        p = target("preflight")
        check(p.returncode == 0 and "set the notes of v0.3.0+cu13" in p.stdout and "set the notes of v0.3.0 " in p.stdout
              and not (work / "assets").exists(), f"preflight shows the notes step, changes nothing\n{p.stdout[-1500:]}")
        for attempt in (1, 2):   # the re-run converges: the notes are not doubled
            p = target("publish")
            rec = json.loads(record.read_text()) if record.exists() else {}
            body = rec.get("notes", "")
            check(p.returncode == 0 and body.startswith("Install the CUDA 13 build") and body.endswith(text)
                  and body.count("<!-- release notes of") == 1,
                  f"publish run {attempt}: the engine's install commands, then the notes\n{p.stdout[-800:]}\n{body[:600]}")
        p = target("publish-pure")
        rec = json.loads((work / "assets" / "v0.3.0" / ".release.json").read_text()) \
            if (work / "assets" / "v0.3.0" / ".release.json").exists() else {}
        check(p.returncode == 0 and rec.get("notes") == text and (pkgs / wheels[1].name).exists(),
              f"publish-pure: uploaded, and vV's notes are the file\n{p.stdout[-800:]}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


def test_release_notes(ffpa_env, work):
    repo_root = Path(__file__).resolve().parents[2]
    a = types.SimpleNamespace(cmake=ffpa_env("CMAKE"), module=repo_root / "cmake" / "FfpaReleaseNotes.cmake",
                              config=repo_root / "tools" / "cliff.toml", git_cliff=ffpa_env("GIT_CLIFF"), work=work,
                              ffpa_index=ffpa_env("INDEX"), tools_bin=Path(sys.executable).parent)
    assert Path(a.git_cliff).exists(), \
        f"{a.git_cliff} is missing: run tools/bootstrap (tools/requirements.txt pins git-cliff)"
    failures.clear()
    repo = a.work / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    n = [0]

    def commit(subject: str) -> str:
        n[0] += 1
        (repo / "f.txt").write_text(f"{n[0]}\n")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", subject, "-m", "Body lines are not part of the notes.", date=1700000000 + n[0])
        return git(repo, "rev-parse", "HEAD")

    commit("initial import")
    commit("kernels: head dim 192 for sm_89")
    git(repo, "tag", "v0.1.0")
    git(repo, "tag", "v0.1.0+cu13")
    commit("old: before the previous release, must not appear")   # noqa: the subject says it all
    git(repo, "tag", "v0.2.0")                                     # the previous release
    git(repo, "tag", "v0.2.0+cu13")
    c_kernel = commit("kernels: split-K for head dim 512")
    commit("site: yank keeps the anchors")
    git(repo, "tag", "v0.3.0rc1")                                  # a pre-release: not a release
    commit("docs: install with uv")
    commit("feat: bench prints TFLOPS")
    c_last_in_manifest = commit("something without an area")
    c_after = commit("after the manifest's commit, must not appear")

    dist = a.work / "dist"
    notes = dist / "RELEASE_NOTES.md"
    manifest = dist / "ffpa-release-manifest.json"
    dist.mkdir()
    manifest.write_text(json.dumps({"source_commit": c_last_in_manifest}))

    def script(action: str, *defs: str, env: dict | None = None) -> subprocess.CompletedProcess:
        cmd = [a.cmake, f"-DFFPA_NOTES_ACTION={action}", *[f"-D{d}" for d in defs], "-P", str(a.module)]
        print("+ " + shlex.join(cmd), flush=True)
        r = subprocess.run(cmd, text=True, capture_output=True, env={**os.environ, **(env or {})})
        r.stderr = " ".join(r.stderr.split())   # CMake wraps messages; compare words
        return r

    write = ["VERSION=0.3.0", "CHANNEL=cu13", f"OUTPUT={notes}", f"MANIFEST={manifest}", f"SOURCE_DIR={repo}",
             "INDEX_URL=https://example.invalid/ffpa/whl/cu13/", f"CONFIG={a.config}", f"GIT_CLIFF={a.git_cliff}",
             "GIT=git"]
    r = script("write", *write)
    check(r.returncode == 0 and notes.exists(), f"write: exit {r.returncode}\n{r.stdout}{r.stderr}")
    text = notes.read_text() if notes.exists() else ""
    print(text)
    check(text.startswith("<!-- release notes of ffpa-attn 0.3.0,"), f"first line names the version:\n{text[:200]}")
    check(f"v0.2.0..{c_last_in_manifest}" in text.splitlines()[0], "the range is v0.2.0..<manifest commit>")
    for subject in ("kernels: split-K for head dim 512", "site: yank keeps the anchors", "docs: install with uv",
                    "feat: bench prints TFLOPS", "something without an area"):
        check(f"- {subject} (" in text, f"lists '{subject}'")
    for absent in ("initial import", "head dim 192", "must not appear", "Body lines"):
        check(absent not in text, f"does not list '{absent}'")
    check(f"({c_kernel[:7]})" in text, "each change carries its short commit id")
    sections = [ln[4:] for ln in text.splitlines() if ln.startswith("### ")]
    check(sections == ["Features", "Kernels", "Release engine and index", "Documentation", "Other changes"],
          f"grouped, in the configured order: {sections}")
    check(text.index("## Summary") < text.index("## Install"), "the changes come before the install lines")
    for line in ("pip install -U ffpa-attn==0.3.0",
                 "pip install ffpa-attn==0.3.0+cu13 --index-url https://example.invalid/ffpa/whl/cu13/ "
                 "--extra-index-url https://pypi.org/simple",
                 "uv pip install ffpa-attn==0.3.0+cu13 --index https://example.invalid/ffpa/whl/cu13/"):
        check(line in text, f"install line: {line}")
    check(not notes.with_name("RELEASE_NOTES.md.tmp").exists(), "no temp file left")

    # The release tag already on the release commit (publish ran, or the tag came first):
    # the same range, the same notes.
    git(repo, "tag", "v0.3.0", c_last_in_manifest)
    before = text
    r = script("write", *write)
    check(r.returncode == 0 and notes.read_text() == before, f"tag on the release commit changes nothing\n{r.stderr}")
    # Without a manifest the range ends at HEAD; a first release covers the whole history.
    r = script("write", *[w for w in write if not w.startswith("MANIFEST=")], "VERSION=0.3.1")
    t2 = notes.read_text()
    check(r.returncode == 0 and "after the manifest's commit" in t2 and f"v0.3.0..{c_after}" in t2,
          f"without a manifest: v0.3.0..HEAD\n{t2[:300]}")
    fresh = a.work / "first"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "main")
    (fresh / "a").write_text("a")
    git(fresh, "add", "a")
    git(fresh, "commit", "-q", "-m", "python: first commit")
    r = script("write", *[w if not w.startswith("SOURCE_DIR=") else f"SOURCE_DIR={fresh}" for w in write
                          if not w.startswith("MANIFEST=")])
    check(r.returncode == 0 and "- python: first commit (" in notes.read_text(), "first release: the whole history")
    r = script("write", *[w if not w.startswith("GIT_CLIFF=") else "GIT_CLIFF=/nonexistent/git-cliff" for w in write])
    check(r.returncode != 0 and "run tools/bootstrap" in r.stderr, f"missing git-cliff names the fix:\n{r.stderr}")

    # check: present, and for this version.
    script("write", *write)
    r = script("check", f"NOTES={notes}", "VERSION=0.3.0")
    check(r.returncode == 0, f"check accepts notes of 0.3.0\n{r.stderr}")
    r = script("check", f"NOTES={notes}", "VERSION=0.3.1")
    check(r.returncode != 0 and "written for version '0.3.0'" in r.stderr and "--target release-notes" in r.stderr,
          f"check refuses notes of another version, naming the fix:\n{r.stderr}")
    r = script("check", f"NOTES={dist / 'missing.md'}", "VERSION=0.3.0")
    check(r.returncode != 0 and "--target release-notes" in r.stderr, f"check refuses a missing file:\n{r.stderr}")
    edited = dist / "edited.md"
    edited.write_text("hand-written notes\n")
    r = script("check", f"NOTES={edited}", "VERSION=0.3.0")
    check(r.returncode != 0 and "keep that first line" in r.stderr, f"check refuses notes without the first line:\n{r.stderr}")

    # attach to a dir: store, whose release records the engine writes.
    store = a.work / "assets"
    install = "Install the CUDA 13 build:\n\n```\npip install ffpa-attn==0.3.0+cu13 --index-url X\n```\n"
    for tag, old in (("v0.3.0", "```\npip install -U ffpa-attn==0.3.0\n```\n"), ("v0.3.0+cu13", install)):
        (store / tag).mkdir(parents=True)
        (store / tag / ".release.json").write_text(json.dumps(
            {"tag": tag, "target": c_last_in_manifest, "latest": tag == "v0.3.0", "notes": old}, indent=1) + "\n")
    text = notes.read_text()
    attach = [f"NOTES={notes}", "VERSION=0.3.0", f"ASSETS=dir:{store}"]
    r = script("attach", *attach, "TAG=v0.3.0", "MODE=replace")
    rec = json.loads((store / "v0.3.0" / ".release.json").read_text())
    check(r.returncode == 0 and rec["notes"] == text, f"pure release: the notes are the file\n{r.stderr}")
    check(rec["target"] == c_last_in_manifest and rec["latest"] is True, f"the rest of the record is kept: {rec}")
    for _ in range(2):   # a re-run replaces the appended copy, never doubles it
        r = script("attach", *attach, "TAG=v0.3.0+cu13", "MODE=append")
    rec = json.loads((store / "v0.3.0+cu13" / ".release.json").read_text())
    check(r.returncode == 0 and rec["notes"] == install.rstrip("\n") + "\n\n" + text,
          f"CUDA release: install commands, then the file, once\n{rec['notes'][:400]}\n{r.stderr}")
    check(not list((store / "v0.3.0+cu13").glob("*tmp*")), "no temp file left in the store")
    r = script("attach", *attach, "TAG=v9.9.9", "MODE=replace")
    check(r.returncode != 0 and "was not created" in r.stderr, f"a missing release is named:\n{r.stderr}")

    # attach through gh: the exact command lines, recorded by a stub.
    log = a.work / "gh.log"
    stub = a.work / "gh"
    stub.write_text("#!/bin/sh\n"
                    f"python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\" >> {shlex.quote(str(log))}\n"
                    "if [ \"$1 $2\" = 'release view' ]; then printf 'engine install notes\\n'; fi\n")
    stub.chmod(0o755)
    gh = [f"NOTES={notes}", "VERSION=0.3.0", "ASSETS=gh:xlite-dev/ffpa-attn"]
    r = script("attach", *gh, "TAG=v0.3.0", "MODE=replace", env={"FFPA_GH": str(stub)})
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    check(r.returncode == 0 and calls == [["release", "edit", "v0.3.0", "--repo", "xlite-dev/ffpa-attn",
                                           "--notes-file", str(notes)]], f"gh pure: {calls}\n{r.stderr}")
    log.unlink(missing_ok=True)
    r = script("attach", *gh, "TAG=v0.3.0+cu13", "MODE=append", env={"FFPA_GH": str(stub)})
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    combined = dist / "RELEASE_NOTES.md.v0.3.0+cu13.md"
    check(r.returncode == 0 and len(calls) == 2 and calls[0][:3] == ["release", "view", "v0.3.0+cu13"]
          and calls[1] == ["release", "edit", "v0.3.0+cu13", "--repo", "xlite-dev/ffpa-attn", "--notes-file",
                           str(combined)], f"gh CUDA: {calls}\n{r.stderr}")
    check(combined.exists() and combined.read_text() == "engine install notes\n\n" + text,
          "gh CUDA: the notes file is the engine's notes, then ours")
    log.unlink(missing_ok=True)
    r = script("attach", *gh, "TAG=v0.3.0", "MODE=replace", "DRY_RUN=ON", env={"FFPA_GH": str(stub)})
    check(r.returncode == 0 and not log.exists() and "release edit v0.3.0" in r.stderr,
          f"dry run prints the command and runs nothing:\n{r.stderr}")

    publish_targets(a, repo, c_last_in_manifest)

    assert not failures, "\n".join(failures)
