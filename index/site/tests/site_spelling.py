# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Issue 10 item 3: one version, one spelling. Once v1.0.0+cu13 is published, wheels
spelled 01.0.0, v1.0.0 or FFPA_Attn are refused by add and publish with nothing
written, the tag must be the canonical v1.0.0+cu13, and "already published with
different contents" compares canonical versions: a legacy entry spelled 01.0.0 and a
new 1.0.0 of the same tags are the same file."""
import hashlib

from site_testlib import (check, check_index_consistent, expect_refusal, fresh_dir, make_site, make_source,
                          make_wheel, run, sha256, verify_pages)

TAG = "cp312-cp312-manylinux_2_28_x86_64"
work = fresh_dir("spelling")
remote, site = make_site(work)
src, head = make_source(work)
assets = work / "assets"
roots = (site, remote, assets)
good = make_wheel(work / "dist", "1.0.0+cu13", tag=TAG)
common = ["--site-repo", site, "--assets", f"dir:{assets}", "--release-url", "https://example.invalid/{tag}/",
          "--target", head, "--source-dir", src]
run(["publish", "--tag", "v1.0.0+cu13", "--wheels", good, *common], check_rc=0)
expected = {good.name: sha256(good)}

# Other spellings of the same release, each with other bytes (pip would pick one).
spellings = {
    "leading zero": make_wheel(work / "zero", "01.0.0+cu13", tag=TAG, payload="# zero"),
    "v prefix": make_wheel(work / "v", "v1.0.0+cu13", tag=TAG, payload="# v"),
    "project name": make_wheel(work / "name", "1.0.0", tag=TAG, name="FFPA_Attn", payload="# name"),
    "upper-case local": make_wheel(work / "local", "1.0.0+CU13", tag=TAG, payload="# local"),
}
for why, whl in spellings.items():
    check(whl.exists() and whl.name != good.name, f"{why}: fixture {whl.name}")
    expect_refusal(["add", "--index-dir", site, "--release-url", "https://x/", whl], "one version has one spelling",
                   roots)
    expect_refusal(["publish", "--tag", "v1.0.0+cu13", "--wheels", whl, *common], "one version has one spelling",
                   roots)
    print(f"refused ({why}): {whl.name}")

# 1.0+cu13 is canonical text but the same version as 1.0.0+cu13 (PEP 440 pads release
# numbers with zeros): a second spelling, even for other tags and under its own tag.
short = make_wheel(work / "short", "1.0+cu13", tag="cp313-cp313-manylinux_2_28_x86_64")
expect_refusal(["add", "--index-dir", site, "--release-url", "https://x/", short], "already published as 1.0.0+cu13",
               roots)
expect_refusal(["publish", "--tag", "v1.0+cu13", "--wheels", short, *common], "already published as 1.0.0+cu13", roots)
check(not (assets / "v1.0+cu13").exists(), "a second release of 1.0.0+cu13 was created")
print("refused (zero padding): " + short.name)

# The tag names the version canonically.
again = make_wheel(work / "again", "1.0.1+cu13", tag=TAG)
for tag in ("v01.0.1+cu13", "vv1.0.1+cu13", "v1.0.1+CU13", "v1.0.1+cu13.0"):
    p = run(["publish", "--tag", tag, "--wheels", again, *common])
    check(p.returncode == 1 and ("is not the canonical spelling" in p.stderr or "does not name version" in p.stderr),
          f"tag {tag} accepted:\n{p.stdout}\n{p.stderr}")
check(not (assets / "v1.0.1+cu13").exists(), "a release was created for a non-canonical tag")

# A legacy page (imported once, kept as is) lists 2.0.0 spelled "02.0.0"; publishing
# the canonical 2.0.0 of the same tags with other bytes is "already published".
legacy_dir = work / "legacy"
lremote, lsite = make_site(legacy_dir)
page = lsite / "whl" / "cu13" / "ffpa-attn"
page.mkdir(parents=True)
old_name = f"ffpa_attn-02.0.0+cu13-{TAG}.whl"
old_sha = hashlib.sha256(b"old bytes").hexdigest()
(page / "index.html").write_text(
    f'<html><body><a href="https://example.invalid/old/{old_name.replace("+", "%2B")}#sha256={old_sha}">'
    f"{old_name}</a></body></html>\n")
new = make_wheel(work / "two", "2.0.0+cu13", tag=TAG)
lassets = legacy_dir / "assets"
p = expect_refusal(["add", "--index-dir", lsite, "--release-url", "https://example.invalid/old/", new],
                   "already published with different contents", (lsite, lremote))
check(old_name in p.stderr, p.stderr)
p = run(["add", "--index-dir", lsite, "--release-url", "https://example.invalid/old/", new], env={"FFPA_FORCE_UPLOAD": "1"}, check_rc=0)
check_index_consistent(lsite, {new.name: sha256(new)})
check(old_name in p.stdout, f"the replaced spelling is not named:\n{p.stdout}")
verify_pages(site, assets)
check_index_consistent(site, expected)

# An index written before spellings were checked, listing one file twice: verify says so.
dup = lsite / "whl" / "cu13" / "ffpa-attn" / "index.json"
text = dup.read_text()
page_json = __import__("json").loads(text)
twin = dict(page_json["files"][0], filename=page_json["files"][0]["filename"].replace("-2.0.0+", "-2.0+"),
            url=page_json["files"][0]["url"].replace("-2.0.0%2B", "-2.0%2B"))
page_json["files"].append(twin)
dup.write_text(__import__("json").dumps(page_json))
run(["render", "--index-dir", lsite], check_rc=0)
p = run(["verify", "--index-dir", lsite, "--assets", work / "two"], check_rc=1)
check("SPELLING" in p.stdout and twin["filename"] in p.stdout, p.stdout)
print("spelling: OK")
