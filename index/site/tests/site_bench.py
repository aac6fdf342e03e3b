# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Scale benchmark (issue 5 item 9): merge 6 new wheels into an index listing 10,000
files; check that only the 6 are hashed; time it against our own full regeneration
(every page re-rendered from the JSON) and against dumb-pypi doing the same
incremental update from the same file list, in the same run."""
import hashlib
import json
import os
import pathlib
import subprocess
import time

from site_testlib import PY, check, fresh_dir, make_wheel, run

N_VERSIONS, TAGS = 2000, ["cp310", "cp311", "cp312", "cp313", "cp314"]
URL = "https://github.com/xlite-dev/ffpa-attn/releases/download/bench/"
work = fresh_dir("bench")
site = work / "site"
page_dir = site / "whl" / "cu13" / "ffpa-attn"
page_dir.mkdir(parents=True)

files, lines = [], []
for i in range(N_VERSIONS):
    v = f"0.{i // 100}.{i % 100}+cu13"
    for t in TAGS:
        fn = f"ffpa_attn-{v}-{t}-{t}-manylinux_2_28_x86_64.whl"
        sha = hashlib.sha256(fn.encode()).hexdigest()
        files.append({"filename": fn, "url": URL + fn.replace("+", "%2B"), "hashes": {"sha256": sha},
                      "requires-python": ">=3.10", "core-metadata": False, "dist-info-metadata": False,
                      "yanked": False, "size": 1000})
        lines.append({"filename": fn, "hash": f"sha256={sha}", "requires_python": ">=3.10"})
assert len(files) == 10000
files.sort(key=lambda f: f["filename"])
(page_dir / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": "ffpa-attn",
                                                 "versions": [], "_ffpa-release-url": URL, "files": files}, indent=1))
run(["render", "--index-dir", site], check_rc=0)

new = [make_wheel(work / "dist", "9.0.0+cu13", tag=f"{t}-{t}-manylinux_2_28_x86_64") for t in TAGS + ["cp39"]]
old_list, new_list = work / "old.jsonl", work / "new.jsonl"
old_list.write_text("".join(json.dumps(x) + "\n" for x in lines))
for w in new:
    lines.append({"filename": w.name, "hash": "sha256=" + hashlib.sha256(w.read_bytes()).hexdigest(),
                  "requires_python": ">=3.10"})
new_list.write_text("".join(json.dumps(x) + "\n" for x in lines))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


t_add, p = timed(lambda: run(["add", "--index-dir", site, "--channel", "cu13", "--release-url", URL, *new],
                             check_rc=0))
check("hashed 6 file(s)" in p.stdout, f"the merge hashed more than the 6 new files:\n{p.stdout}")
page = json.loads((page_dir / "index.json").read_text())
check(len(page["files"]) == 10006, f"{len(page['files'])} files listed")
t_full, _ = timed(lambda: run(["render", "--index-dir", site, "--channel", "cu13"], check_rc=0))

dumb = [str(pathlib.Path(PY).parent / "dumb-pypi"), "--output-dir", str(work / "dumb"), "--packages-url", URL,
        "--no-generate-timestamp"]
t_dumb_full, _ = timed(lambda: subprocess.run(dumb + ["--package-list-json", str(old_list)], check=True,
                                              capture_output=True))
t_dumb_incr, _ = timed(lambda: subprocess.run(dumb + ["--package-list-json", str(new_list),
                                                      "--previous-package-list-json", str(old_list)],
                                              check=True, capture_output=True))
print(f"merge 6 into 10,000 (ffpa-index add):  {t_add:8.3f} s   (hashed 6 files)")
print(f"full regeneration (ffpa-index render):  {t_full:8.3f} s")
print(f"dumb-pypi incremental update:           {t_dumb_incr:8.3f} s")
print(f"dumb-pypi full build (10,000):          {t_dumb_full:8.3f} s")
print(f"ratio add/dumb-pypi incremental = {t_add / t_dumb_incr:.3f}x (target <= 0.1x); "
      f"render/dumb-pypi incremental = {t_full / t_dumb_incr:.3f}x")
# A benchmark reports its ratio against the baseline measured in this same run (PASS or
# MISS); it fails only when it measured nothing. Timing asserts would make a noisy
# 2-core CI machine flaky (project standards: targets are read from bench output).
check(all(t > 0 for t in (t_add, t_full, t_dumb_incr, t_dumb_full)), "the bench measured every time")
optimised = os.environ.get("FFPA_BENCH_ENFORCE") == "1"
verdict = "PASS" if t_add <= 0.1 * t_dumb_incr else "MISS"
print(f"target add/dumb-pypi incremental <= 0.1x: {t_add / t_dumb_incr:.3f}x {verdict}"
      + ("" if optimised else " (unoptimised build: not meaningful)"))
print("bench: OK")
