# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""The engine serves only URLs it wrote. A page records its release
URL ("_ffpa-release-url"); every file's url must be the one derived from it and the
file name. An index.json edited to point an entry elsewhere (another host, a
scheme-relative or backslash form, another file, a URL with its own fragment or
query, encoded traversal) is refused by render and add (nothing written) and
reported by verify, for the site directory and for the served site over HTTP, even
when the HTML was edited to match. Sizes are compared with the assets. Evidence: pip
follows such an entry and trusts the first hash fragment it meets."""
import hashlib
import json
import os
import pathlib
import subprocess
import zipfile

from site_testlib import PY, check, expect_refusal, fresh_dir, make_site, make_source, make_wheel, run, sha256, tree_hash

state = pathlib.Path(os.environ["FFPA_HTTP_STATE"])
http_root = pathlib.Path(os.environ["FFPA_HTTP_ROOT"])
port = (state / "port").read_text().strip()
os.environ["FFPA_TEST_WORK"] = str(http_root)
work = fresh_dir("urls")
base = f"http://127.0.0.1:{port}/urls"
remote, site = make_site(work)
src, head = make_source(work)
assets = work / "assets"
release_url = f"{base}/assets/{{tag}}/"
w25 = make_wheel(work / "dist", "0.2.5+cu13")
run(["publish", "--tag", "v0.2.5+cu13", "--wheels", w25, "--site-repo", site, "--assets", f"dir:{assets}",
     "--release-url", release_url, "--target", head, "--source-dir", src], check_rc=0)
page_dir = site / "whl" / "cu13" / "ffpa-attn"
json_path, html_path = page_dir / "index.json", page_dir / "index.html"
good_json, good_html = json_path.read_text(), html_path.read_text()
page = json.loads(good_json)
check(page["_ffpa-release-url"] == release_url, f"the page does not record its release URL: {page}")
entry = page["files"][0]
good_url = entry["url"]
check(good_url == f"{base}/assets/v0.2.5%2Bcu13/{w25.name.replace('+', '%2B')}", good_url)
local = ["verify", "--index-dir", site, "--assets", assets]
served = ["verify", "--index-url", f"{base}/site", "--assets", f"{base}/assets/"]
run(local, check_rc=0)
run(served, check_rc=0)
run(local + ["--release-url", release_url], check_rc=0)

# An evil wheel with the same name, served elsewhere: what a hostile entry points at.
evil_dir = work / "evil"
evil = make_wheel(evil_dir, "0.2.5+cu13", payload="import os  # evil")
evil_sha = sha256(evil)
encoded = w25.name.replace("+", "%2B")
hostile = {
    "foreign host": f"http://evil.example/{encoded}",
    "same server, other path": f"{base}/evil/{encoded}",
    "scheme-relative": f"//127.0.0.1:{port}/urls/evil/{encoded}",
    "backslash": f"{base}/assets/v0.2.5%2Bcu13\\..\\..\\evil\\{encoded}",
    "other file name": good_url.replace("0.2.5%2Bcu13-cp312", "0.2.6%2Bcu13-cp312"),
    "own fragment": f"{base}/evil/{encoded}#sha256={evil_sha}",
    "own query": f"{good_url}?download=1",
    "encoded traversal": f"{base}/assets/v0.2.5%2Bcu13/..%2F..%2Fevil/{encoded}",
    "upper-case scheme": good_url.replace("http://", "HTTP://"),
    "trailing slash": good_url + "/",
}


def write_page(url, html_too):
    p = json.loads(good_json)
    p["files"][0]["url"] = url
    json_path.write_text(json.dumps(p, indent=1) + "\n")
    # The HTML edited to match, as an attacker would (render refuses to write it).
    html_path.write_text(good_html.replace(f'href="{good_url}#', f'href="{url.replace("&", "&amp;")}#') if html_too
                         else good_html)


w26 = make_wheel(work / "dist", "0.2.6+cu13")
for label, url in hostile.items():
    for html_too in (False, True):
        write_page(url, html_too)
        p = expect_refusal(["render", "--index-dir", site], "the url of", (site,))
        check("the engine derives" in p.stderr and good_url in p.stderr, f"{label}: {p.stderr}")
        expect_refusal(["add", "--index-dir", site, "--release-url", release_url, w26], "the url of", (site,))
        for args in (local, served):
            p = run(args)
            check(p.returncode == 1 and "URL " in p.stdout and "the engine derives" in p.stdout,
                  f"{label}: verify {args[1]} passed:\n{p.stdout}")
    print(f"refused and reported: {label}")

# Evidence, over HTTP: the entry with its own fragment sends pip to the evil wheel, whose
# hash pip checks (the first fragment), not the engine's.
with zipfile.ZipFile(evil) as z:  # the PEP 658 file pip fetches first, beside the wheel
    (evil_dir / (evil.name + ".metadata")).write_bytes(z.read(f"ffpa_attn-0.2.5+cu13.dist-info/METADATA"))
write_page(hostile["own fragment"], True)
dl = work / "dl"
pip = subprocess.run([PY, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--index-url",
                      f"{base}/site/whl/cu13/", "-d", str(dl), "ffpa-attn==0.2.5+cu13", "--python-version", "3.12",
                      "--platform", "manylinux_2_28_x86_64", "--only-binary=:all:"],
                     capture_output=True, text=True, env=dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="0"))
got = sha256(dl / w25.name) if (dl / w25.name).exists() else None
if got == evil_sha:
    print("evidence: pip downloaded and accepted the evil wheel from the edited page")
elif f"Got        {evil_sha}" in pip.stderr:
    print("evidence: pip fetched the evil wheel (and its .metadata) from the edited page; its hash check then read "
          "the two fragments as one hash and failed")
else:
    print(f"evidence: pip did not reach the evil wheel (exit {pip.returncode}): {pip.stderr.strip()[-300:]}")

# Restored from git: everything passes again.
json_path.write_text(good_json)
html_path.write_text(good_html)
run(local, check_rc=0)

# The recorded release URL itself, edited with every url to match: pages are consistent,
# so verify says where they point; given the expected URL it reports the difference.
p = json.loads(good_json)
p["_ffpa-release-url"] = "http://evil.example/{tag}/"
p["files"][0]["url"] = f"http://evil.example/v0.2.5%2Bcu13/{encoded}"
json_path.write_text(json.dumps(p, indent=1) + "\n")
html_path.write_text(good_html.replace(good_url, p["files"][0]["url"]))
out = run(local).stdout
check("derive from the release URL http://evil.example/{tag}/" in out, out)
p = run(local + ["--release-url", release_url], check_rc=1)
check("records the release URL 'http://evil.example/{tag}/', not the expected" in p.stdout, p.stdout)
json_path.write_text(good_json)
html_path.write_text(good_html)

# A page the engine did not write (its key, layout or extra hashes): verify says so.
p = json.loads(good_json)
p["files"][0]["hashes"]["md5"] = "0" * 32
json_path.write_text(json.dumps(p, indent=1) + "\n")
p = run(local, check_rc=1)
check("is not what ffpa-index writes" in p.stdout, p.stdout)

# Sizes: the recorded size is compared with the asset's.
p = json.loads(good_json)
p["files"][0]["size"] += 1
json_path.write_text(json.dumps(p, indent=1) + "\n")
p = run(["render", "--index-dir", site], check_rc=0)
p = run(local, check_rc=1)
check(f"MISMATCH {w25.name}: the asset is" in p.stdout, p.stdout)
p = json.loads(good_json)
p["files"][0]["size"] = "12"
json_path.write_text(json.dumps(p, indent=1) + "\n")
expect_refusal(["render", "--index-dir", site], "is not a byte count", (site,))
json_path.write_text(good_json)
html_path.write_text(good_html)

# A release URL that is not one spelling of one place is refused before anything runs.
for bad in ("//evil.example/{tag}/", "https://user@evil.example/{tag}/", "https://h/{tag}/?x=1", "https://h/{tag}/#x",
            "https://h\\dl/{tag}/", "https://h/a/../{tag}/", "https://h/%7Btag%7D/", "javascript:alert(1)//"):
    expect_refusal(["add", "--index-dir", site, "--release-url", bad, w26], "is refused", (site,))
    expect_refusal(["render", "--index-dir", site, "--release-url", bad], "is refused", (site,))
# Another release URL than the page's: refused by add; render --release-url moves the
# channel (every url derived anew), and add then follows the new one.
expect_refusal(["add", "--index-dir", site, "--release-url", "https://mirror.example/{tag}/", w26],
               f"serves its files from the release URL '{release_url}'", (site,))
run(["render", "--index-dir", site, "--release-url", "https://mirror.example/{tag}/"], check_rc=0)
moved = json.loads(json_path.read_text())
check(moved["_ffpa-release-url"] == "https://mirror.example/{tag}/" and
      moved["files"][0]["url"] == f"https://mirror.example/v0.2.5%2Bcu13/{encoded}", f"not moved: {moved}")
run(["add", "--index-dir", site, "--release-url", "https://mirror.example/{tag}/", w26], check_rc=0)
urls = [f["url"] for f in json.loads(json_path.read_text())["files"]]
check(urls == [f"https://mirror.example/v0.2.5%2Bcu13/{encoded}",
               f"https://mirror.example/v0.2.6%2Bcu13/{w26.name.replace('+', '%2B')}"], f"{urls}")

# A page without a recorded release URL (hand-written, or from an older engine):
# render names the fix; --release-url records it when every url derives from it.
lsite = work / "legacy"
ldir = lsite / "whl" / "cu13" / "ffpa-attn"
ldir.mkdir(parents=True)
legacy = dict(json.loads(good_json))
del legacy["_ffpa-release-url"]
(ldir / "index.json").write_text(json.dumps(legacy, indent=1) + "\n")
expect_refusal(["render", "--index-dir", lsite], "records no release URL", (lsite,))
expect_refusal(["render", "--index-dir", lsite, "--release-url", "https://elsewhere.example/{tag}/"], "the url of",
               (lsite,))
run(["render", "--index-dir", lsite, "--release-url", release_url], check_rc=0)
check(json.loads((ldir / "index.json").read_text())["_ffpa-release-url"] == release_url, "not recorded")
run(["verify", "--index-dir", lsite, "--assets", assets], check_rc=0)
print("urls: OK")
