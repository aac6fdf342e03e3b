# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""One lock per site, whatever the spelling of its path. 20 rounds of
two `add` runs racing on one site, each spelling the site differently (site, site/,
./site, a symlink) and with its own TMPDIR; then rounds where add races yank, unyank,
render and publish. After every round both runs succeeded, every entry is present,
and every HTML page is exactly what its JSON renders to (verify). Nothing is left in
either TMPDIR."""
import os
import subprocess

from site_testlib import CLI, check, load_page, make_wheel, sha256, verify_pages


def test_lock_race(release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    (work / "link").symlink_to(site, target_is_directory=True)
    spellings = ["site", "site/", "./site", "link", str(site), "./link/"]
    tmpdirs = [work / "tmp-a", work / "tmp-b"]
    for t in tmpdirs:
        t.mkdir()
    # One directory verify can hash everything from: the wheels given to add in dist/, and
    # the dir: store's releases beside it (publish keeps each release in <store>/<tag>/).
    dist = assets / "dist"
    URL = "https://example.invalid/dl/"
    expected = {}


    def start(args, tmp):
        env = dict(os.environ, TMPDIR=str(tmp))
        return subprocess.Popen([CLI] + [str(a) for a in args], cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


    def finish(procs, what):
        for p in procs:
            out, err = p.communicate(timeout=120)
            check(p.returncode == 0, f"{what}: {p.args[1]} exit {p.returncode}\n{out}\n{err}")


    def check_state(what):
        page = load_page(site)
        listed = {f["filename"]: f["hashes"]["sha256"] for f in page["files"]}
        check(listed == expected, f"{what}: index lists {sorted(listed)}, expected {sorted(expected)}")
        verify_pages(site, assets)


    for i in range(20):
        a = make_wheel(dist, f"0.{i}.0+cu13", tag="cp311-cp311-manylinux_2_28_x86_64")
        b = make_wheel(dist, f"0.{i}.0+cu13", tag="cp312-cp312-manylinux_2_28_x86_64")
        sa, sb = spellings[i % len(spellings)], spellings[(i + 1 + i // len(spellings)) % len(spellings)]
        procs = [start(["add", "--index-dir", sa, "--release-url", URL, a], tmpdirs[0]),
                 start(["add", "--index-dir", sb, "--release-url", URL, b], tmpdirs[1])]
        finish(procs, f"round {i} ({sa} vs {sb})")
        expected.update({a.name: sha256(a), b.name: sha256(b)})
        check_state(f"round {i} ({sa} vs {sb})")
    print("20 rounds of add vs add: every entry present, HTML = render(JSON)")

    # The other writers share the lock: yank/unyank/render/remove race an add.
    for i, other in enumerate([["yank", "--version", "0.1.0", "--reason", "race"], ["unyank", "--version", "0.1.0"],
                               ["render"], ["remove", "--version", "0.2.0"]]):
        w = make_wheel(dist, f"1.{i}.0+cu13")
        procs = [start(["add", "--index-dir", spellings[i], "--release-url", URL, w], tmpdirs[0]),
                 start([other[0], "--index-dir", spellings[-1 - i], *other[1:]], tmpdirs[1])]
        finish(procs, f"add vs {other[0]}")
        expected[w.name] = sha256(w)
        if other[0] == "remove":
            expected = {k: v for k, v in expected.items() if "-0.2.0+" not in k}
        check_state(f"add vs {other[0]}")
        page = {f["filename"]: f for f in load_page(site)["files"]}
        yanked = [n for n, f in page.items() if f["yanked"] is not False]
        check(yanked == ([n for n in page if "-0.1.0+" in n] if other[0] == "yank" else []), f"yank state {yanked}")

    # publish (site repository, own spelling) races an add.
    subprocess.run(["git", "-C", str(site), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(site), "commit", "--quiet", "-m", "adds"], check=True)
    for i in range(3):
        pw = make_wheel(dist, f"2.{i}.0+cu13")
        aw = make_wheel(dist, f"2.{i}.0+cu13", tag="cp311-cp311-manylinux_2_28_x86_64")
        procs = [start(["publish", "--tag", f"v2.{i}.0+cu13", "--wheels", pw, "--site-repo", spellings[i + 1], "--assets",
                        f"dir:{assets}", "--release-url", URL, "--target", head, "--source-dir", src], tmpdirs[0]),
                 start(["add", "--index-dir", spellings[i + 2], "--release-url", URL, aw], tmpdirs[1])]
        finish(procs, f"publish vs add {i}")
        expected.update({pw.name: sha256(pw), aw.name: sha256(aw)})
        check_state(f"publish vs add {i}")
        # Whichever ran second left its pages uncommitted (publish takes an earlier add's
        # pages of its project along); the next publish wants a committed site.
        subprocess.run(["git", "-C", str(site), "commit", "--quiet", "--allow-empty", "-am", f"add {i}"], check=True)

    for t in tmpdirs:
        check(list(t.iterdir()) == [], f"left in TMPDIR {t}: {list(t.iterdir())}")
    print("lock race: OK")
