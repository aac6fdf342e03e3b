# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Issue 10 items 8-9 with real kills: `add` into a large page is SIGKILLed at random
points (temp file half written, JSON renamed but HTML not, ...); the next run removes
the dead run's temp files, converges (both wheels listed, every page exactly what its
JSON renders to), and nothing is left under $TMPDIR. Every run also
writes <wheel>.metadata into a served directory (--metadata-dir); every other re-run
adds other wheels than the killed one, and afterwards that directory holds no temp
file and exactly the .metadata files the page advertises."""
import hashlib
import json
import os
import random
import signal
import subprocess
import time

from site_testlib import CLI, check, fresh_dir, load_page, make_wheel, run, sha256

work = fresh_dir("add-kill")
site = work / "site"
page_dir = site / "whl" / "cu13" / "ffpa-attn"
page_dir.mkdir(parents=True)
URL = "https://example.invalid/dl/"
files = []
for i in range(3000):  # large enough that a write takes a few milliseconds
    fn = f"ffpa_attn-0.{i // 100}.{i % 100}+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"
    files.append({"filename": fn, "url": URL + fn.replace("+", "%2B"),
                  "hashes": {"sha256": hashlib.sha256(fn.encode()).hexdigest()}, "core-metadata": False,
                  "dist-info-metadata": False, "yanked": False})
files.sort(key=lambda f: f["filename"])
(page_dir / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": "ffpa-attn", "versions": [],
                                                 "files": files}))
tmp = work / "tmp"
tmp.mkdir()
env = {"TMPDIR": str(tmp)}
run(["render", "--index-dir", site, "--release-url", URL], env=env, check_rc=0)
start = time.monotonic()
run(["add", "--index-dir", site, "--release-url", URL, make_wheel(work / "dist", "8.0.0+cu13")], env=env, check_rc=0)
duration = time.monotonic() - start  # what one add takes here: kills land inside a run


def pages():
    return {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}


md = work / "served"
md.mkdir()
rng = random.Random(10)
killed = torn = orphans = 0
for i in range(12):
    wheels = [make_wheel(work / "dist", f"9.{i}.0+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64")
              for t in ("cp311", "cp312")]
    proc = subprocess.Popen([CLI, "add", "--index-dir", str(site), "--release-url", URL, "--metadata-dir", str(md),
                             *map(str, wheels)],
                            env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(0.2, 1.1) * duration)
    proc.send_signal(signal.SIGKILL)
    killed += proc.wait() == -signal.SIGKILL
    torn += any(".tmp." in p.name for p in site.rglob("*"))
    listed_now = {f["filename"] for f in load_page(site)["files"]}
    orphans += any((md / (w.name + ".metadata")).exists() and w.name not in listed_now for w in wheels)
    if i % 2:  # the killed wheels are not added again: what they left must go
        wheels = [make_wheel(work / "dist", f"9.{i}.1+cu13", tag="cp312-cp312-manylinux_2_28_x86_64")]
    run(["add", "--index-dir", site, "--release-url", URL, "--metadata-dir", md, *wheels], env=env, check_rc=0)
    page = load_page(site)["files"]
    listed = {f["filename"]: f["hashes"]["sha256"] for f in page}
    check(all(listed.get(w.name) == sha256(w) for w in wheels), f"round {i}: wheels missing after the re-run")
    leftovers = [p for p in list(site.rglob("*")) + list(md.iterdir()) if ".tmp." in p.name]
    check(leftovers == [], f"round {i}: temp files left: {leftovers}")
    served = {p.name for p in md.iterdir()}
    advertised = {f["filename"] + ".metadata" for f in page if f["core-metadata"]}
    check(served == advertised, f"round {i}: the served directory holds {sorted(served - advertised)} that no page "
                                f"advertises, and lacks {sorted(advertised - served)}")
    before = pages()
    run(["render", "--index-dir", site], env=env, check_rc=0)
    check(pages() == before, f"round {i}: the HTML was not what the JSON renders to")
check(killed > 0, "no run was killed: every add finished before its kill")
# Killed exactly between the .metadata file and the pages (the test hook): the next add
# there, of another wheel, removes the unlisted file and the marker beside it.
ghost = make_wheel(work / "dist", "10.0.0+cu13")
p = run(["add", "--index-dir", site, "--release-url", URL, "--metadata-dir", md, ghost],
        env=dict(env, FFPA_PUBLISH_KILL_AT="add-metadata"))
check(p.returncode == -signal.SIGKILL, f"the hook did not kill add: {p.returncode}\n{p.stderr}")
check((md / (ghost.name + ".metadata")).exists() and any(".tmp." in x.name for x in md.iterdir()),
      f"fixture: no .metadata file and marker after the kill: {sorted(x.name for x in md.iterdir())}")
check(ghost.name not in {f["filename"] for f in load_page(site)["files"]}, "the killed add listed its wheel")
run(["add", "--index-dir", site, "--release-url", URL, "--metadata-dir", md,
     make_wheel(work / "dist", "10.0.1+cu13")], env=env, check_rc=0)
served = {x.name for x in md.iterdir()}
advertised = {f["filename"] + ".metadata" for f in load_page(site)["files"] if f["core-metadata"]}
check(served == advertised, f"after the killed add: {sorted(served ^ advertised)}")
check(list(tmp.iterdir()) == [], f"left under TMPDIR: {list(tmp.iterdir())}")
print(f"add kill: {killed} of 12 runs killed ({torn} left a temp file, {orphans} an unlisted .metadata file), "
      "every re-run converged and cleaned up: OK")
