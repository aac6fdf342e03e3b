"""Release acceptance against the local site (docs/release.md section 5), served on
loopback by the http_server fixture (ctest/pytest_ffpa.py).

Tests, one CTest test each (pytest -k; each writes RESULTS/<check>.json for the
closing summary):
  download   pip download ffpa-attn==V+CHANNEL from the served index, once per
             interpreter with that interpreter's own pip; sha256 equals dist/'s
  resolve    CUDA index as --index-url, a real pypiserver holding the pure wheel as
             --extra-index-url: pip picks V+CHANNEL; asked for ===V it gets the pure one
  sha256     SHA256SUMS, the manifest, the files and the index anchors all agree
  bench      python/bench/ffpa_bench.py --backend cuda ... (the repository's bench) in a
             venv with the CUDA wheel; skipped (CTest: SKIPPED) when the machine has no CUDA device
  summary    every check's outcome, the wheel names and their hashes
"""
from __future__ import annotations

import html.parser
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import ffpa_manifest  # the shared manifest reader
import pytest

SKIP = 77
# The bench is a tool of the repository, run against the installed wheel.
BENCH_SCRIPT = Path(__file__).resolve().parents[2] / "python" / "bench" / "ffpa_bench.py"


sha256 = ffpa_manifest.file_sha256


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+ " + " ".join(map(str, cmd)), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    sys.stdout.write(r.stdout[-4000:])
    sys.stderr.write(r.stderr[-4000:])
    return r


def manifest(dist: Path) -> dict:
    p = dist / "ffpa-release-manifest.json"
    if not p.exists():
        pytest.fail(f"{p} is missing: build the wheels first (cmake --build --preset <preset>)")
    return ffpa_manifest.load(p)


def record(results: Path, check: str, ok: bool, details: dict) -> int:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{check}.json").write_text(json.dumps({"check": check, "ok": ok, **details}, indent=2))
    print(f"{check}: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def pip_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # Only the indexes a check names may answer: no find-links or index from the
    # environment (certificate and timeout settings stay, PyPI may need them).
    for k in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        env.pop(k, None)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def py_tag(py: str) -> str:
    return subprocess.run([py, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                          text=True, capture_output=True, check=True).stdout.strip()


def cmd_download(a) -> int:
    m = manifest(a.dist)
    base = f"{a.base}whl/{m['channel']}/"
    want = f"ffpa-attn=={m['cuda_version']}"
    got, problems = {}, []
    for py in a.python:
        tag = py_tag(py)
        out = a.work / f"download-{tag}"
        shutil.rmtree(out, ignore_errors=True)
        r = run([py, "-m", "pip", "download", want, "--no-deps", "--index-url", base, "-d", str(out)], env=pip_env())
        files = sorted(out.glob("*.whl")) if out.exists() else []
        if r.returncode != 0 or len(files) != 1:
            problems.append(f"{tag}: pip download {want} from {base} failed or gave {[f.name for f in files]}")
            continue
        f = files[0]
        ref = a.dist / f.name
        if not ref.exists():
            problems.append(f"{tag}: downloaded {f.name}, which is not in {a.dist}")
        elif sha256(f) != sha256(ref):
            problems.append(f"{tag}: {f.name} downloaded with sha256 {sha256(f)}, dist/ has {sha256(ref)}")
        elif f"-{tag}-{tag}-" not in f.name:
            problems.append(f"{tag}: pip chose {f.name}, a wheel for another interpreter")
        else:
            got[tag] = {"file": f.name, "sha256": sha256(f)}
            print(f"{tag}: {f.name} sha256 matches dist/")
    for p in problems:
        print("FAIL: " + p)
    return record(a.results, "index", not problems and bool(got), {"downloads": got, "problems": problems})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_resolve(a) -> int:
    m = manifest(a.dist)
    pure = [w["file"] for w in m["wheels"] if w["kind"] == "pure"]
    tag = py_tag(a.python[0])
    cuda = [w["file"] for w in m["wheels"] if w["kind"] == "cuda" and f"-{tag}-{tag}-" in w["file"]]
    if len(pure) != 1 or len(cuda) != 1:
        pytest.fail(f"need one pure and one {tag} CUDA wheel in the manifest, have {pure} {cuda}")
    pkgs = a.work / "pypiserver-packages"
    shutil.rmtree(pkgs, ignore_errors=True)
    pkgs.mkdir(parents=True)
    shutil.copy2(a.dist / pure[0], pkgs)
    port = free_port()
    server = subprocess.Popen(["timeout", "600", a.pypi_server, "run", "-i", "127.0.0.1", "-p", str(port),
                               "-a", ".", "-P", ".", str(pkgs)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    problems, seen = [], {}
    try:
        extra = f"http://127.0.0.1:{port}/simple/"
        for _ in range(100):
            try:
                urllib.request.urlopen(extra, timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("pypiserver did not come up on 127.0.0.1")
        index = f"{a.base}whl/{m['channel']}/"
        # A public pin (no local part) matches both builds and pip ranks the local
        # +CHANNEL one higher. For dev builds V itself has a local part, so the public
        # part of V is what a user would pin.
        public = m["version"].split("+")[0]
        cases = [
            ("public pin ==V picks the CUDA build", f"ffpa-attn=={public}", cuda[0]),
            ("no pin picks the CUDA build", "ffpa-attn", cuda[0]),
            ("explicit ===V gets the pure wheel", f"ffpa-attn==={m['version']}", pure[0]),
        ]
        for what, req, expected in cases:
            out = a.work / f"resolve-{len(seen)}"
            shutil.rmtree(out, ignore_errors=True)
            r = run([a.python[0], "-m", "pip", "download", req, "--no-deps", "--index-url", index,
                     "--extra-index-url", extra, "-d", str(out)], env=pip_env())
            files = [f.name for f in out.glob("*.whl")] if out.exists() else []
            seen[what] = files
            if r.returncode != 0 or files != [expected]:
                problems.append(f"{what}: pip gave {files}, expected {expected}")
            else:
                print(f"{what}: {expected}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    for p in problems:
        print("FAIL: " + p)
    return record(a.results, "resolution", not problems, {"cases": seen, "problems": problems})


class Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None and data.strip():
            self.links[data.strip()] = self._href

    def handle_endtag(self, tag):
        if tag == "a":
            self._href = None


def cmd_sha256(a) -> int:
    m = manifest(a.dist)
    problems = []
    sums = {}
    for line in (a.dist / "SHA256SUMS").read_text().splitlines():
        h, name = line.split(None, 1)
        sums[name.strip().lstrip("*")] = h
    listed = {w["file"]: w["sha256"] for w in m["wheels"]}
    if m.get("requirements"):  # the hash-locked install file is a release asset too
        listed[m["requirements"]["file"]] = m["requirements"]["sha256"]
    if set(sums) != set(listed):
        problems.append(f"SHA256SUMS lists {sorted(sums)}, the manifest {sorted(listed)}")
    for name, h in listed.items():
        actual = sha256(a.dist / name)
        if actual != h:
            problems.append(f"{name}: manifest sha256 {h} != file {actual}")
        if sums.get(name) != actual:
            problems.append(f"{name}: SHA256SUMS {sums.get(name)} != file {actual}")
    pages = [("whl", m.get("channel"), [w for w in m["wheels"] if w["kind"] == "cuda"]),
             ("pypi", "simple", [w for w in m["wheels"] if w["kind"] == "pure"])]
    for prefix, channel, wheels in pages:
        if not wheels:
            continue
        page = a.site / prefix / channel / "ffpa-attn" / "index.html"
        if not page.exists():
            problems.append(f"{page} is missing")
            continue
        parser = Anchors()
        parser.feed(page.read_text())
        data = json.loads((page.parent / "index.json").read_text())
        json_hashes = {f["filename"]: f["hashes"]["sha256"] for f in data["files"]}
        for w in wheels:
            href = parser.links.get(w["file"])
            if href is None:
                problems.append(f"{page}: no anchor for {w['file']}")
            elif not href.endswith(f"#sha256={w['sha256']}"):
                problems.append(f"{page}: anchor of {w['file']} is {href}, expected #sha256={w['sha256']}")
            if json_hashes.get(w["file"]) != w["sha256"]:
                problems.append(f"{page.parent / 'index.json'}: {w['file']} has {json_hashes.get(w['file'])}")
    for p in problems:
        print("FAIL: " + p)
    return record(a.results, "sha256", not problems, {"files": listed, "problems": problems})


def cmd_bench(a) -> int:
    m = manifest(a.dist)
    py = a.python[0]
    tag = py_tag(py)
    cuda = [w for w in m["wheels"] if w["kind"] == "cuda" and f"-{tag}-{tag}-" in w["file"]]
    if not cuda:
        pytest.fail(f"no {tag} CUDA wheel in {a.dist}")
    venv = a.work / "bench-venv"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([py, "-m", "venv", str(venv)], check=True)
    vpy = str(venv / "bin" / "python")
    for args in (["numpy"], ["--no-deps", str(a.dist / cuda[0]["file"])]):
        if run([vpy, "-m", "pip", "install", "-q", *args], env=pip_env()).returncode != 0:
            return record(a.results, "bench-smoke", False, {"problems": ["install failed"]})
    n = run([vpy, "-c", "from ffpa_attn import cuda; print(cuda.device_count())"], env=pip_env(), cwd=str(a.work))
    if n.returncode != 0:
        return record(a.results, "bench-smoke", False, {"problems": ["import failed"]})
    if int(n.stdout.strip().splitlines()[-1]) == 0:
        record(a.results, "bench-smoke", True, {"skipped": "no CUDA device on this machine"})
        print("SKIPPED: no CUDA device on this machine; the bench smoke needs a GPU")
        return SKIP
    head_dim = str(max(m["head_dims"]))
    r = run([vpy, str(BENCH_SCRIPT), "--backend", "cuda", "--no-bwd", "--cuda-impl", "fp16",
             "--D", head_dim, "--verbose"], env=pip_env(), cwd=str(a.work))
    ok = r.returncode == 0 and "allclose(" in r.stdout and "=False" not in r.stdout
    return record(a.results, "bench-smoke", ok, {"output": r.stdout[-2000:]})


def cmd_summary(a) -> int:
    m = manifest(a.dist)
    print("ffpa-attn release acceptance")
    print(f"  version {m['version']}  channel {m.get('channel')}  commit {m['source_commit']}"
          f"{'  (DIRTY)' if m.get('source_dirty') else ''}")
    failed = False
    for check in a.checks:
        p = a.results / f"{check}.json"
        if not p.exists():
            print(f"  {check:<12} NOT RUN")
            failed = True
            continue
        r = json.loads(p.read_text())
        state = "SKIPPED (" + r["skipped"] + ")" if r.get("skipped") else ("OK" if r["ok"] else "FAILED")
        failed |= not r["ok"]
        print(f"  {check:<12} {state}")
    if a.notebook_results and a.notebook_results.is_dir():
        hashes = {w["sha256"] for w in m["wheels"]}
        for d in sorted(p for p in a.notebook_results.iterdir() if p.is_dir()):
            f = d / "acceptance.json"
            if not f.exists():
                print(f"  notebooks/{d.name:<24} NO RESULT")
                failed = True
                continue
            r = json.loads(f.read_text())
            wheel = r.get("wheel") or {}
            if wheel.get("sha256") and wheel["sha256"] not in hashes:
                # Results dirs outlive runs by design; one from another build says nothing here.
                print(f"  notebooks/{d.name:<24} not run against this build ({wheel.get('file')})")
                continue
            training = (r.get("training") or {}).get("status")
            print(f"  notebooks/{d.name:<24} {'OK' if r.get('passed') else 'FAILED'}"
                  f"  training={training}  {d / 'acceptance.json'}")
            failed |= not r.get("passed")
    print("  wheels:")
    for w in m["wheels"]:
        print(f"    {w['sha256']}  {w['file']}")
    return 1 if failed else 0


@pytest.fixture
def a(ffpa_env, work, http_server):
    """What every check reads: the release directory, the local site (served), the
    interpreters ($FFPA_PYTHONS, os.pathsep-separated), the results directory."""
    site = Path(os.environ["FFPA_SITE"]) if os.environ.get("FFPA_SITE") else None
    return types.SimpleNamespace(
        dist=Path(ffpa_env("DIST")), site=site, base=http_server(site) if site else None,
        python=[p for p in os.environ.get("FFPA_PYTHONS", sys.executable).split(os.pathsep) if p],
        work=work, results=Path(ffpa_env("RESULTS")),
        pypi_server=str(Path(sys.executable).parent / "pypi-server"),
        checks=os.environ.get("FFPA_CHECKS", "").split(),
        notebook_results=Path(os.environ["FFPA_NOTEBOOK_RESULTS"]) if os.environ.get("FFPA_NOTEBOOK_RESULTS") else None)


def test_download(a):
    assert cmd_download(a) == 0


def test_resolve(a):
    assert cmd_resolve(a) == 0


def test_sha256(a):
    assert cmd_sha256(a) == 0


def test_bench(a):
    rc = cmd_bench(a)
    if rc == SKIP:
        pytest.skip("no CUDA device on this machine; the bench smoke needs a GPU")
    assert rc == 0


def test_summary(a):
    assert cmd_summary(a) == 0
