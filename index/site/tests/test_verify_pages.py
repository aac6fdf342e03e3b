# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Verify reads what pip reads. A hand-edited index.html whose anchor
points at another (genuine) wheel with that wheel's hash passed verify before, since
only the JSON was checked; now every served page must be exactly what its JSON
renders to, in the site directory and, for a served site, over HTTP (index.json and
index.html both fetched). render restores the page."""
import os
import pathlib
import re

from site_testlib import check, make_wheel, run


def test_verify_pages(http_server, release_site):
    work, remote, site, src, head, assets, tmp, env = release_site
    base = http_server(work).rstrip("/")  # serves the work directory on loopback
    for v in ("0.2.5", "0.2.6"):
        w = make_wheel(work / "dist", f"{v}+cu13")
        run(["publish", "--tag", f"v{v}+cu13", "--wheels", w, "--site-repo", site, "--assets", f"dir:{assets}",
             "--release-url", f"{base}/assets/{{tag}}/", "--target", head, "--source-dir", src], check_rc=0)
    local = ["verify", "--index-dir", site, "--assets", assets]
    served = ["verify", "--index-url", f"{base}/site", "--assets", f"{base}/assets/"]
    run(local, env=env, check_rc=0)
    run(served, env=env, check_rc=0)

    # The 0.2.5 anchor now leads to the 0.2.6 wheel, with that wheel's (correct) hash.
    html_path = site / "whl" / "cu13" / "ffpa-attn" / "index.html"
    good = html_path.read_text()
    anchors = re.findall(r'<a href="([^"]*)"', good)
    check(len(anchors) == 2, good)
    evil = good.replace(f'href="{anchors[0]}"', f'href="{anchors[1]}"', 1)
    check(evil != good, "fixture: the page did not change")
    html_path.write_text(evil)
    for args in (local, served):
        p = run(args, env=env, check_rc=1)
        check("PAGE" in p.stdout and "ffpa-attn/index.html" in p.stdout and "render" in p.stdout, p.stdout)

    # A root page listing another project, over HTTP too.
    html_path.write_text(good)
    root = site / "whl" / "cu13" / "index.html"
    root_good = root.read_text()
    root.write_text(root_good.replace("</body>", '<a href="evil-attn/">evil-attn</a><br>\n</body>'))
    for args in (local, served):
        p = run(args, env=env, check_rc=1)
        check("PAGE" in p.stdout and "whl/cu13/index.html" in p.stdout, p.stdout)

    # render restores what pip reads.
    html_path.write_text(evil)
    run(["render", "--index-dir", site], check_rc=0)
    check(html_path.read_text() == good and root.read_text() == root_good, "render did not restore the pages")
    run(local, env=env, check_rc=0)
    run(served, env=env, check_rc=0)
    check(list(tmp.iterdir()) == [], f"verify left files under TMPDIR: {list(tmp.iterdir())}")
    print("verify pages: OK")
