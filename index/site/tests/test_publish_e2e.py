# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Two releases published in turn into a fresh site repo (local bare remote) and a
dir: asset store, served over HTTP on loopback; read back by pip download and pip
install --require-hashes; verify catches tampering; yank, remove, mirror."""
import json
import os
import pathlib
import subprocess

from site_testlib import PY, check, check_index_consistent, fresh_dir, git, make_site, make_wheel, run, sha256


def test_publish_e2e(http_server):

    work = fresh_dir("e2e")
    base = http_server(work).rstrip("/")  # serves the work directory on loopback
    remote, site = make_site(work)
    src = work / "src"
    src.mkdir()
    git("init", "--quiet", str(src))
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "--quiet", "--allow-empty", "-m", "release", cwd=src)
    head = git("rev-parse", "HEAD", cwd=src).strip()
    assets = work / "assets"
    dist = work / "dist"
    wheels = {v: [make_wheel(dist, f"{v}+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in ("cp311", "cp312")]
              for v in ("0.2.5", "0.2.6")}
    expected = {}


    def publish(v, *extra, rc=0):
        return run(["publish", "--tag", f"v{v}+cu13", "--wheels", *wheels[v], "--site-repo", site,
                    "--assets", f"dir:{assets}", "--release-url", f"{base}/assets/{{tag}}/",
                    "--site-url", f"{base}/site", "--source-dir", src, *extra], check_rc=rc)


    for v in ("0.2.5", "0.2.6"):
        p = publish(v)
        for w in wheels[v]:
            expected[w.name] = sha256(w)
            check((assets / f"v{v}+cu13" / w.name).read_bytes() == w.read_bytes(), f"asset {w.name} not stored")
            check((assets / f"v{v}+cu13" / (w.name + ".metadata")).exists(), "PEP 658 metadata not stored beside asset")
        rel = json.loads((assets / f"v{v}+cu13" / ".release.json").read_text())
        check(rel["latest"] is False and rel["target"] == head, f"release record wrong: {rel}")
        check(f"pip install ffpa-attn=={v}+cu13 --index-url {base}/site/whl/cu13/" in rel["notes"], rel["notes"])
        check_index_consistent(site, expected)
        check(git("--git-dir", str(remote), "rev-parse", "gh-pages") == git("rev-parse", "HEAD", cwd=site),
              "site not pushed")

    # A re-run changes nothing.
    p = publish("0.2.6")
    check("identical; skipped" in p.stdout and "nothing new to commit" in p.stdout, p.stdout)

    # Read back through pip over HTTP: every downloaded wheel matches dist/ byte for byte.
    index_url = f"{base}/site/whl/cu13/"
    for v in ("0.2.5", "0.2.6"):
        dl = work / f"dl-{v}"
        subprocess.run([PY, "-m", "pip", "download", f"ffpa-attn=={v}+cu13", "--no-deps", "--no-cache-dir",
                        "--disable-pip-version-check", "--index-url", index_url, "-d", str(dl), "--only-binary", ":all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"], check=True)
        got = list(dl.iterdir())
        check(len(got) == 1 and sha256(got[0]) == expected[got[0].name], f"pip download {v}: {got}")
    req = work / "req.txt"
    w312 = [w for w in wheels["0.2.6"] if "cp312" in w.name][0]
    req.write_text(f"ffpa-attn==0.2.6+cu13 --hash=sha256:{sha256(w312)}\n")
    target = work / "target"
    subprocess.run([PY, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                    "--require-hashes", "-r", str(req), "--index-url", index_url, "--target", str(target),
                    "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--only-binary", ":all:"],
                   check=True)
    check("0.2.6+cu13" in (target / "ffpa_attn" / "__init__.py").read_text(), "installed the wrong wheel")

    # verify: clean, then a tampered asset is caught, by directory and by URL.
    run(["verify", "--index-dir", site, "--channel", "cu13", "--assets", assets], check_rc=0)
    run(["verify", "--index-dir", site, "--channel", "cu13", "--assets", f"{base}/assets/"], check_rc=0)
    victim = assets / "v0.2.5+cu13" / wheels["0.2.5"][0].name
    good = victim.read_bytes()
    victim.write_bytes(good + b"x")
    p = run(["verify", "--index-dir", site, "--assets", assets], check_rc=1)
    check(f"MISMATCH {victim.name}" in p.stdout, p.stdout)
    p = run(["verify", "--index-dir", site, "--assets", f"{base}/assets/"], check_rc=1)
    check(f"MISMATCH {victim.name}" in p.stdout, p.stdout)
    victim.write_bytes(good)

    # yank: pip skips 0.2.6 unless pinned; unyank restores it.
    run(["yank", "--index-dir", site, "--channel", "cu13", "--version", "0.2.6+cu13", "--reason", "bad <build> & co"],
        check_rc=0)
    page = json.loads((site / "whl/cu13/ffpa-attn/index.json").read_text())
    check(all(f["yanked"] == "bad <build> & co" for f in page["files"] if "0.2.6" in f["filename"]), "not yanked")
    check('data-yanked="bad &lt;build&gt; &amp; co"' in (site / "whl/cu13/ffpa-attn/index.html").read_text(),
          "yank reason not escaped in HTML")
    dl = work / "dl-latest"
    subprocess.run([PY, "-m", "pip", "download", "ffpa-attn", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                    "--index-url", index_url, "-d", str(dl), "--only-binary", ":all:", "--python-version", "3.12",
                    "--platform", "manylinux_2_28_x86_64"], check=True)
    check([x.name for x in dl.iterdir()] == [wheels["0.2.5"][1].name], f"yanked version chosen: {list(dl.iterdir())}")
    run(["unyank", "--index-dir", site, "--version", "0.2.6"], check_rc=0)

    # remove: the version's anchors go, earlier ones stay; a second remove is refused.
    run(["remove", "--index-dir", site, "--channel", "cu13", "--version", "0.2.6"], check_rc=0)
    for w in wheels["0.2.6"]:
        del expected[w.name]
    check_index_consistent(site, expected)
    p = run(["remove", "--index-dir", site, "--channel", "cu13", "--version", "0.2.6"], check_rc=1)
    check("nothing to remove" in p.stderr, p.stderr)

    # Mirror: refused without --release-url; with it, anchors point at the original assets.
    mremote, mirror = make_site(work / "mirror")
    p = run(["publish", "--tag", "v0.2.5+cu13", "--wheels", *wheels["0.2.5"], "--site-repo", mirror, "--index-only",
             "--site-url", "https://mirror.invalid/ffpa", "--index-prefix", "simple"], check_rc=1)
    check("--index-only needs --release-url" in p.stderr, p.stderr)
    run(["publish", "--tag", "v0.2.5+cu13", "--wheels", *wheels["0.2.5"], "--site-repo", mirror, "--index-only",
         "--release-url", f"{base}/assets/{{tag}}/", "--site-url", "https://mirror.invalid/ffpa", "--index-prefix",
         "simple"], check_rc=0)
    mpage = json.loads((mirror / "simple/cu13/ffpa-attn/index.json").read_text())
    check(all(f["url"].startswith(f"{base}/assets/v0.2.5%2Bcu13/") for f in mpage["files"]), mpage)
    check(all(f["core-metadata"] is False for f in mpage["files"]), "mirror must not claim metadata by default")
    print("e2e: OK")
