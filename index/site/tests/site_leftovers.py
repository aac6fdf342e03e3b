# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""What add lists is what it checked, and a failed add leaves nothing behind.

One read: add verifies, hashes, measures and reads METADATA from one private copy of the
   wheel. While add runs, another process keeps swapping the path between two valid
   wheels of one name and an invalid one; whatever add lists (sha256, size and
   core-metadata hash) must be those of one and the same valid wheel.
Cleanup: a failed add --metadata-dir leaves nothing behind: under a file-size limit
   (ulimit -f) the engine is not killed by SIGXFSZ but reports EFBIG like a full disk,
   and the site and the served directory are exactly as before (the .metadata file it
   had written removed, no temp file). A killed one is covered by site_add_kill.py.
"""
import hashlib
import json
import os
import resource
import signal
import subprocess
import threading
import zipfile

from site_testlib import CLI, check, fresh_dir, load_page, make_wheel, run, sha256, tree_hash

work = fresh_dir("leftovers")
site = work / "site"
md = work / "md"
md.mkdir()
URL = "https://example.invalid/dl/"


def metadata_sha(whl):
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return hashlib.sha256(z.read(name)).hexdigest()


# --- one read from check to record --------------------------------------------
a = make_wheel(work / "a", "1.0.0+cu13", payload="a = 1")
b = make_wheel(work / "b", "1.0.0+cu13", payload="b = 2" * 50, requires_python=">=3.11")
bad = make_wheel(work / "bad", "1.0.0+cu13", payload="c = 3", bad_record=True)
known = {sha256(p): (os.path.getsize(p), metadata_sha(p)) for p in (a, b)}
live = work / "live" / a.name
live.parent.mkdir()
stop = threading.Event()


def swapper():
    i = 0
    srcs = [a.read_bytes(), b.read_bytes(), a.read_bytes(), b.read_bytes(), bad.read_bytes()]
    tmp = live.with_name(".swap")
    while not stop.is_set():
        tmp.write_bytes(srcs[i % len(srcs)])
        os.replace(tmp, live)
        i += 1


t = threading.Thread(target=swapper)
t.start()
listed = refused = 0
try:
    for i in range(40):
        p = run(["add", "--index-dir", site, "--release-url", URL, "--metadata-dir", md, live],
                env={"FFPA_FORCE_UPLOAD": "1"})
        if p.returncode != 0:
            check("does not verify" in p.stderr or "cannot open" in p.stderr or "does not exist" in p.stderr,
                  f"round {i}: unexpected failure:\n{p.stderr}")
            refused += 1
            continue
        f = load_page(site)["files"][0]
        sha = f["hashes"]["sha256"]
        check(sha in known, f"round {i}: listed bytes that are neither valid wheel (the invalid one?): {sha}")
        size, msha = known[sha]
        check(f["size"] == size and f["core-metadata"]["sha256"] == msha,
              f"round {i}: sha256 of one wheel listed with the size or METADATA of another: {f}")
        check(hashlib.sha256((md / (a.name + ".metadata")).read_bytes()).hexdigest() == msha,
              f"round {i}: the served .metadata is not the listed wheel's")
        listed += 1
finally:
    stop.set()
    t.join()
check(listed > 0, "no add succeeded while the path was swapped")
print(f"swap: {listed} adds listed one consistent wheel, {refused} refused the invalid one")

# --- a file-size limit -------------------------------------------------------
# A page large enough that its write passes the limit while the wheel's private copy
# and its .metadata stay below it.
site2 = work / "site2"
page_dir = site2 / "whl" / "cu13" / "ffpa-attn"
page_dir.mkdir(parents=True)
files = []
for i in range(2000):
    fn = f"ffpa_attn-0.{i // 100}.{i % 100}+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"
    files.append({"filename": fn, "url": URL + fn.replace("+", "%2B"), "size": 1,
                  "hashes": {"sha256": hashlib.sha256(fn.encode()).hexdigest()}, "core-metadata": False,
                  "dist-info-metadata": False, "yanked": False})
(page_dir / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": "ffpa-attn", "versions": [],
                                                 "_ffpa-release-url": URL, "files": files}))
run(["render", "--index-dir", site2], check_rc=0)
md2 = work / "md2"
md2.mkdir()
w = make_wheel(work / "dist", "9.0.0+cu13")
limit = 64 << 10
check(os.path.getsize(w) < limit < (page_dir / "index.json").stat().st_size, "fixture sizes")
before = tree_hash(site2, md2)


def limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


p = subprocess.run([CLI, "add", "--index-dir", str(site2), "--release-url", URL, "--metadata-dir", str(md2), str(w)],
                   capture_output=True, text=True, preexec_fn=limited)
check(p.returncode == 1, f"exit {p.returncode} (-{signal.SIGXFSZ} is SIGXFSZ) under ulimit -f:\n{p.stderr}")
check("File too large" in p.stderr and "ulimit -f" in p.stderr, f"EFBIG not reported with its fix:\n{p.stderr}")
check(tree_hash(site2, md2) == before, "a failed add left the site or the served directory changed")
check(not [x for x in list(site2.rglob("*")) + list(md2.rglob("*")) if ".tmp." in x.name], "temp files left")
# The same limit below the wheel's size: refused while copying it, nothing written.
small = 512
p = subprocess.run([CLI, "add", "--index-dir", str(site2), "--release-url", URL, "--metadata-dir", str(md2), str(w)],
                   capture_output=True, text=True,
                   preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (small, small)))
check(p.returncode == 1 and "private" in p.stderr and "ulimit -f" in p.stderr, f"copy under the limit:\n{p.stderr}")
check(tree_hash(site2, md2) == before, "a refused add changed something")
# Without the limit, the same add goes through.
run(["add", "--index-dir", site2, "--release-url", URL, "--metadata-dir", md2, w], check_rc=0)
check((md2 / (w.name + ".metadata")).exists(), "the .metadata file is missing after a good add")
print("leftovers: OK")
