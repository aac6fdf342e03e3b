"""pip and uv, as docs/install.md tells users to run them, against the served site and a
PyPI stand-in that holds a HIGHER pure ffpa-attn (as the real PyPI does for a dev build,
and for anyone installing an older CUDA release).

The stand-in is a real pypiserver (no fallback to pypi.org) holding:
  - ffpa-attn <major+1>.0.0, pure, packed by our own engine from this build's pure wheel;
  - this build's pure wheel V, because after a release PyPI holds V too and an installer
    that reads PyPI first then gets the pure V silently: the case this test exists for;
  - numpy (the pin of tools/requirements.txt), fetched once from PyPI with the tools pip,
    so the installs under test resolve against loopback indexes only.

Every install goes into a clean venv. The pinned pip of the tools venv runs as
`pip --python <venv>`; uv is the pinned one beside it. Installs that must end with our
CUDA wheel are checked for: __version__ == V+CHANNEL, the installed WHEEL tag, and
`ffpa_attn._C` imported from the venv with the very bytes of the wheel's member. The
documented hazards (uv with pip's flags; an unpinned dev install) are asserted too, so
a change of installer behaviour fails here before the docs go stale; so is what each
installer resolves for a machine the CUDA wheel cannot serve (glibc 2.28; a CPython
without a CUDA wheel): pip and uv's unsafe-best-match the pure V, uv with our index
first an error that names the wheels it found, pip with the docs' ==V+CHANNEL pin an
error. And docs/install.md's CUDA lines themselves (rendered from their one home,
cmake/install-lines.json), run over an installed pure wheel with pip and with uv, must
leave the CUDA wheel installed, where a public ==V keeps the pure wheel.

Inputs: $FFPA_DIST, $FFPA_SITE (served on loopback by the http_server fixture,
ctest/pytest_ffpa.py), $FFPA_RESULTS, $FFPA_INDEX, $FFPA_PYTHONS (os.pathsep-separated;
default the tools Python). Writes RESULTS/installers.json for acceptance.summary; passes
only when every case held.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.request
import zipfile
from pathlib import Path

import ffpa_manifest  # the shared manifest reader
import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = r'''
import json, sys
out = {"version": None, "file": None, "ext": None, "error": None}
try:
    import ffpa_attn
    out["version"], out["file"] = ffpa_attn.__version__, ffpa_attn.__file__
    from ffpa_attn import _C
    out["ext"] = _C.__file__
except Exception as e:  # the probe reports; the checker decides
    out["error"] = f"{type(e).__name__}: {e}"
print("PROBE-JSON " + json.dumps(out))
'''


sha256 = ffpa_manifest.file_sha256


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+ " + " ".join(map(str, cmd)), flush=True)
    r = subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)
    out = (r.stdout + r.stderr).strip()
    if out:
        print("  | " + out[-3000:].replace("\n", "\n  | "))
    return r


def clean_env() -> dict:
    """The user's own settings must not steer the installs: no PIP_*/UV_* variables, no
    pip or uv config file, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k != "PYTHONPATH"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               PIP_NO_CACHE_DIR="1", UV_NO_CACHE="1", UV_PYTHON_DOWNLOADS="never")
    return env


def py_tag(py: str) -> str:
    return subprocess.run([py, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                          text=True, capture_output=True, check=True).stdout.strip()


def requirement_pin(name: str) -> str:
    for line in (REPO / "tools" / "requirements.txt").read_text().splitlines():
        if line.lower().startswith(name + "=="):
            return line.strip()
    pytest.fail(f"tools/requirements.txt pins no {name}; add '{name}==X.Y.Z' there")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def higher_pure_wheel(pure: Path, version: str, ffpa_index: str, work: Path, out: Path) -> Path:
    """Our pure wheel re-packed by the engine at a higher version: a valid wheel whose
    __version__ says so, as a newer release on PyPI would be."""
    tree = work / "higher-tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    with zipfile.ZipFile(pure) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        headers = z.read(meta_name).decode().split("\n\n", 1)[0].splitlines()
        for n in z.namelist():
            if ".dist-info/" not in n:
                z.extract(n, tree)
    # The engine writes Metadata-Version, Name, Version and the description's type itself.
    own = ("Metadata-Version:", "Name:", "Version:", "Description-Content-Type:")
    (work / "higher-METADATA").write_text("\n".join(h for h in headers if not h.startswith(own)) + "\n")
    info = tree / "ffpa_attn" / "_build_info.py"
    text, n = re.subn(r'^VERSION = ".*"$', f'VERSION = "{version}"', info.read_text(), flags=re.M)
    if n != 1:
        pytest.fail(f"{info} has no VERSION line: the stand-in cannot say its version")
    info.write_text(text)
    r = run([ffpa_index, "pack", "--tree", tree, "--name", "ffpa-attn", "--version", version,
             "--tag", "py3-none-any", "--metadata", work / "higher-METADATA", "--out-dir", out,
             "--source-date-epoch", "1700000000"])
    made = out / f"ffpa_attn-{version}-py3-none-any.whl"
    if r.returncode != 0 or not made.exists():
        pytest.fail(f"ffpa-index pack could not build the stand-in wheel {made.name}")
    if run([ffpa_index, "verify-wheel", made]).returncode != 0:
        pytest.fail(f"the stand-in wheel {made} does not verify")
    return made


class PypiServer:
    def __init__(self, exe: str, packages: Path, log: Path):
        self.port = free_port()
        self.log = open(log, "wb")
        # --disable-fallback: a package the stand-in lacks must fail, not quietly come
        # from pypi.org (pypiserver redirects there by default).
        self.proc = subprocess.Popen(
            ["timeout", "900", exe, "run", "-i", "127.0.0.1", "-p", str(self.port), "-a", ".", "-P", ".",
             "--disable-fallback", str(packages)],
            stdout=self.log, stderr=self.log, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}/simple/"
        for _ in range(150):
            try:
                urllib.request.urlopen(self.url + "ffpa-attn/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        pytest.fail(f"pypiserver did not come up on 127.0.0.1:{self.port}; see {log}")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        self.log.close()


INSTALL_LINES = REPO / "cmake" / "install-lines.json"


def docs_cuda_lines(**values: str) -> dict[str, str]:
    """docs/install.md's CUDA install lines, rendered from their one home
    (cmake/install-lines.json) with this run's values instead of the docs' placeholders."""
    data = json.loads(INSTALL_LINES.read_text(encoding="utf-8"))
    return {tool: line.format(**{**data["docs"], **values}) for tool, line in data["cuda"].items()}


def as_invocation(line: str, pip: list[str], uv: list[str], vpy: str) -> list[str]:
    """A docs line (``pip install ...`` / ``uv pip install ...``) run verbatim against a venv:
    only the program is replaced (the tools' pinned pip / uv, aimed at the venv)."""
    words = shlex.split(line)
    if words[:3] == ["uv", "pip", "install"]:
        return [*uv, "--python", vpy, *words[3:]]
    if words[:2] == ["pip", "install"]:
        return [*pip, "--python", vpy, "install", *words[2:]]
    raise AssertionError(f"{INSTALL_LINES}: a line that is neither 'pip install' nor 'uv pip install': {line!r}")


def test_installers(ffpa_env, work, http_server):
    a = types.SimpleNamespace(
        dist=Path(ffpa_env("DIST")), results=Path(ffpa_env("RESULTS")), work=work, ffpa_index=ffpa_env("INDEX"),
        uv=str(Path(sys.executable).parent / "uv"), pypi_server=str(Path(sys.executable).parent / "pypi-server"))
    served = http_server(Path(ffpa_env("SITE")))
    pythons = [p for p in os.environ.get("FFPA_PYTHONS", "").split(os.pathsep) if p] or [sys.executable]
    for exe, fix in ((a.uv, "uv"), (a.pypi_server, "pypiserver")):
        if not Path(exe).exists():
            pytest.fail(f"{exe} is missing: run tools/bootstrap (tools/requirements.txt pins {fix})")

    mpath = a.dist / "ffpa-release-manifest.json"
    if not mpath.exists():
        pytest.fail(f"{mpath} is missing: build the wheels first (cmake --build --preset <preset>)")
    m = ffpa_manifest.load(mpath)
    version, cuda_version, channel = m["version"], m["cuda_version"], m["channel"]
    public = version.split("+")[0]          # what a user pins: ==V matches V and V+local
    pure = [w for w in m["wheels"] if w["kind"] == "pure"]
    if len(pure) != 1:
        pytest.fail(f"need exactly one pure wheel in {mpath}, have {[w['file'] for w in pure]}")
    pure_file = pure[0]["file"]
    higher = f"{int(public.split('.')[0]) + 1}.0.0"

    pkgs = a.work / "pypi-packages"
    pkgs.mkdir()
    higher_pure_wheel(a.dist / pure_file, higher, a.ffpa_index, a.work, pkgs)
    shutil.copy2(a.dist / pure_file, pkgs)
    # numpy from PyPI once, kept across runs (pip checks it against PyPI's hashes).
    numpy_cache = a.work.parent / "installers-numpy"
    numpy_pin = requirement_pin("numpy")
    for py in pythons:
        tag = py_tag(py)
        r = run([sys.executable, "-m", "pip", "download", "-q", numpy_pin, "--no-deps", "--only-binary=:all:",
                 "--python-version", tag[2] + "." + tag[3:], "--platform", "manylinux_2_17_x86_64",
                 "--platform", "manylinux2014_x86_64", "-d", numpy_cache])
        if r.returncode != 0:
            pytest.fail(f"could not fetch {numpy_pin} for {tag} from PyPI into {numpy_cache} "
                             "(the stand-in needs it); check the network, or put the wheel there by hand")
    for f in numpy_cache.glob("numpy-*.whl"):
        shutil.copy2(f, pkgs)

    site = f"{served}whl/{channel}/"
    env = clean_env()
    server = PypiServer(a.pypi_server, pkgs, a.work / "pypiserver.log")
    pypi = server.url
    cases_out: dict[str, dict] = {}
    problems: list[str] = []
    try:
        for py in pythons:
            tag = py_tag(py)
            cuda = [w for w in m["wheels"] if w["kind"] == "cuda" and w["tags"].startswith(f"{tag}-{tag}-")]
            if len(cuda) != 1:
                problems.append(f"{tag}: expected one CUDA wheel for this interpreter, have {[w['file'] for w in cuda]}")
                continue
            cuda_w = cuda[0]
            with zipfile.ZipFile(a.dist / cuda_w["file"]) as z:
                c_member = [n for n in z.namelist() if re.fullmatch(r"ffpa_attn/_C\..*\.so", n)]
                if len(c_member) != 1:
                    problems.append(f"{cuda_w['file']} holds {c_member}, not one ffpa_attn/_C*.so")
                    continue
                c_bytes_sha = hashlib.sha256(z.read(c_member[0])).hexdigest()
            numpy_whl = [f for f in pkgs.glob("numpy-*.whl") if f"-{tag}-" in f.name]
            # Hash-checked form (pip --require-hashes, uv --require-hashes): every CUDA
            # wheel of V+CHANNEL, so one file serves every interpreter; a resolution that
            # took the PyPI package has no matching hash and fails loudly.
            hashed = a.work / f"requirements-hashes-{tag}.txt"
            hashed.write_text(
                f"ffpa-attn=={cuda_version} \\\n" +
                " \\\n".join(f"    --hash=sha256:{w['sha256']}" for w in m["wheels"] if w["kind"] == "cuda") + "\n" +
                f"{numpy_pin} " + " ".join(f"--hash=sha256:{sha256(f)}" for f in numpy_whl) + "\n")
            # The release's own hash-locked file (requirements-<channel>.txt, in the manifest),
            # with the user's hashed numpy line appended as docs/install.md says.
            released = a.work / f"requirements-released-{tag}.txt"
            rel_req = m.get("requirements")
            if not rel_req:
                problems.append("the manifest lists no requirements file (requirements-<channel>.txt)")
                continue
            released.write_text((a.dist / rel_req["file"]).read_text() + f"{numpy_pin} " +
                                " ".join(f"--hash=sha256:{sha256(f)}" for f in numpy_whl) + "\n")
            # The pip requirements.txt of docs/install.md, with this site and stand-in.
            plain = a.work / f"requirements-{tag}.txt"
            plain.write_text(f"--index-url {site}\n--extra-index-url {pypi}\nffpa-attn=={public}\n")
            pip = [sys.executable, "-m", "pip"]
            uv = [a.uv, "pip", "install", "--no-config"]
            pip_idx = ["--index-url", site, "--extra-index-url", pypi]
            uv_best = [*pip_idx, "--index-strategy", "unsafe-best-match"]
            uv_ours_first = ["--index", site, "--default-index", pypi]
            # (name, command with {py} for the venv's python, what it must end with)
            cases = [
                ("pip ==V", [*pip, "--python", "{py}", "install", f"ffpa-attn=={public}", *pip_idx], "cuda"),
                ("pip -r requirements.txt (docs)", [*pip, "--python", "{py}", "install", "-r", plain], "cuda"),
                ("pip --require-hashes", [*pip, "--python", "{py}", "install", "--require-hashes", "-r", hashed,
                                          *pip_idx], "cuda"),
                ("pip --require-hashes -r requirements-<channel>.txt (release asset)",
                 [*pip, "--python", "{py}", "install", "--require-hashes", "-r", released, *pip_idx], "cuda"),
                ("uv --require-hashes -r requirements-<channel>.txt (release asset)",
                 [*uv, "--python", "{py}", "--require-hashes", "-r", released, *uv_ours_first], "cuda"),
                ("uv ==V --index-strategy unsafe-best-match",
                 [*uv, "--python", "{py}", f"ffpa-attn=={public}", *uv_best], "cuda"),
                ("uv ==V --index ours --default-index pypi",
                 [*uv, "--python", "{py}", f"ffpa-attn=={public}", *uv_ours_first], "cuda"),
                ("uv -r requirements.txt (docs) --index-strategy unsafe-best-match",
                 [*uv, "--python", "{py}", "-r", plain, "--index-strategy", "unsafe-best-match"], "cuda"),
                ("uv --require-hashes --index-strategy unsafe-best-match",
                 [*uv, "--python", "{py}", "--require-hashes", "-r", hashed, *uv_best], "cuda"),
                ("uv --require-hashes --index ours --default-index pypi",
                 [*uv, "--python", "{py}", "--require-hashes", "-r", hashed, *uv_ours_first], "cuda"),
                # Documented hazards: both must keep happening for docs/install.md to be right.
                ("hazard: uv ==V with pip's flags takes PyPI's pure V",
                 [*uv, "--python", "{py}", f"ffpa-attn=={public}", *pip_idx], "pure"),
                ("hazard: pip unpinned takes PyPI's higher version",
                 [*pip, "--python", "{py}", "install", "ffpa-attn", *pip_idx], "higher"),
            ]
            for name, cmd, expect in cases:
                key = f"{tag}: {name}"
                venv = a.work / f"venv-{len(cases_out)}"
                subprocess.run([py, "-m", "venv", "--without-pip", str(venv)], check=True)
                vpy = str(venv / "bin" / "python")
                r = run([vpy if c == "{py}" else c for c in cmd], env=env, cwd=str(a.work))
                got = {}
                p = run([vpy, "-c", PROBE], env=env, cwd=str(a.work))
                mm = re.search(r"^PROBE-JSON (.*)$", p.stdout, re.M)
                if mm:
                    got = json.loads(mm.group(1))
                bad = []
                if r.returncode != 0:
                    bad.append(f"the install failed (exit {r.returncode})")
                elif expect == "cuda":
                    if got.get("version") != cuda_version:
                        bad.append(f"ended with ffpa-attn {got.get('version')}, not our {cuda_version}: the "
                                   "resolution took the PyPI package; fix the command in docs/install.md")
                    ext = got.get("ext") or ""
                    if not ext.startswith(str(venv)):
                        bad.append(f"_C not imported from the venv ({ext or got.get('error')})")
                    elif Path(ext).name != Path(c_member[0]).name or sha256(Path(ext)) != c_bytes_sha:
                        bad.append(f"_C loaded from {ext} is not {c_member[0]} of {cuda_w['file']}")
                    tags = [ln.split(":", 1)[1].strip()
                            for d in venv.glob("lib/python*/site-packages/ffpa_attn-*.dist-info")
                            for ln in (d / "WHEEL").read_text().splitlines() if ln.startswith("Tag:")]
                    if tags != [cuda_w["tags"]]:
                        bad.append(f"installed wheel tags {tags}, expected [{cuda_w['tags']}]")
                elif expect == "pure":
                    if got.get("version") != version or got.get("ext"):
                        bad.append(f"documented as taking the pure {version} from PyPI, ended with "
                                   f"{got.get('version')} (_C {got.get('ext')}): uv changed; update docs/install.md")
                elif expect == "higher":
                    if got.get("version") != higher:
                        bad.append(f"documented as taking PyPI's higher {higher}, ended with {got.get('version')}: "
                                   "pip changed; update docs/install.md (dev builds)")
                cases_out[key] = {"ok": not bad, "expect": expect, "got": got.get("version"), "ext": got.get("ext"),
                                  "problems": bad}
                print(f"[{'OK' if not bad else 'FAIL'}] {key}: {got.get('version')}")
                problems += [f"{key}: {b}" for b in bad]

            # docs/install.md's CUDA lines over an installed pure wheel: the pure V first (from
            # the PyPI stand-in), then the line verbatim (rendered from cmake/install-lines.json
            # with this site and the stand-in for PyPI: uv's default index is PyPI, so
            # UV_DEFAULT_INDEX names the stand-in): the CUDA wheel must be what is installed.
            lines = docs_cuda_lines(cuda_version=cuda_version, site=served.rstrip("/"), channel=channel, pypi=pypi)
            # The hazard the local pin exists for: a public ==V keeps an installed pure V.
            public_line = lines["pip"].replace(f"ffpa-attn=={cuda_version}", f"ffpa-attn=={public}")
            for tool, line in [*lines.items(), ("hazard: public ==V", public_line)]:
                expect_pure = tool.startswith("hazard")
                label = tool if expect_pure else f"docs' {tool}"
                key = f"{tag}: {label} line over an installed pure wheel"
                venv = a.work / f"venv-{len(cases_out)}"
                subprocess.run([py, "-m", "venv", "--without-pip", str(venv)], check=True)
                vpy = str(venv / "bin" / "python")
                bad = []
                r0 = run([*pip, "--python", vpy, "install", f"ffpa-attn=={public}", "--index-url", pypi], env=env,
                         cwd=str(a.work))
                p0 = run([vpy, "-c", PROBE], env=env, cwd=str(a.work))
                m0 = re.search(r"^PROBE-JSON (.*)$", p0.stdout, re.M)
                first = json.loads(m0.group(1)) if m0 else {}
                if r0.returncode != 0 or first.get("version") != version or first.get("ext"):
                    bad.append(f"the pure {version} did not install first (got {first.get('version')})")
                r = run(as_invocation(line, pip, uv, vpy), env={**env, "UV_DEFAULT_INDEX": pypi}, cwd=str(a.work))
                p = run([vpy, "-c", PROBE], env=env, cwd=str(a.work))
                mm = re.search(r"^PROBE-JSON (.*)$", p.stdout, re.M)
                got = json.loads(mm.group(1)) if mm else {}
                if r.returncode != 0:
                    bad.append(f"the docs' line failed (exit {r.returncode}): {line}")
                elif expect_pure:
                    if got.get("version") != version or got.get("ext"):
                        bad.append(f"documented as keeping the installed pure {version}, ended with "
                                   f"{got.get('version')}: pip changed; update docs/install.md ({line})")
                elif got.get("version") != cuda_version or not (got.get("ext") or "").startswith(str(venv)):
                    bad.append(f"ended with {got.get('version')} (_C {got.get('ext')}), not our {cuda_version}: the "
                               f"docs' line kept the pure wheel; fix cmake/install-lines.json ({line})")
                cases_out[key] = {"ok": not bad, "expect": "pure" if expect_pure else "cuda", "got": got.get("version"),
                                  "ext": got.get("ext"), "problems": bad}
                print(f"[{'OK' if not bad else 'FAIL'}] {key}: {got.get('version')}")
                problems += [f"{key}: {b}" for b in bad]

            # A machine the CUDA wheel cannot serve (older glibc, a CPython without a CUDA
            # wheel), as docs/install.md states it: each installer asked to resolve for
            # that target. Resolution only (--dry-run), ffpa-attn alone (--no-deps).
            pyver = f"{tag[2]}.{tag[3:]}"
            targets = [("glibc 2.28", "manylinux_2_28", pyver)]
            have = {w["tags"].split("-")[0] for w in m["wheels"] if w["kind"] == "cuda"}
            lacking = [v for v in ("3.14", "3.13", "3.12", "3.11", "3.10") if "cp" + v.replace(".", "") not in have]
            if lacking:   # a release machine with all five CPythons leaves none to try
                targets.append((f"CPython {lacking[0]}", "manylinux_2_34", lacking[0]))
            for target, plat, pv in targets:
                cases_x = [
                    ("pip", "pure"), ("pip ==V+CHANNEL (docs)", "error"), ("uv --index ours", "error"),
                    ("uv --index-strategy unsafe-best-match", "pure")]
                for who, expect in cases_x:
                    key = f"{tag}: {target}: {who}"
                    if who == "pip ==V+CHANNEL (docs)":
                        r = run([*pip, "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:",
                                 "--platform", f"{plat}_x86_64", "--python-version", pv, "--target", a.work / "t",
                                 f"ffpa-attn=={cuda_version}", *pip_idx], env=env, cwd=str(a.work))
                        got = None
                        ok = r.returncode != 0 and "No matching distribution" in r.stderr
                    elif who == "pip":
                        report = a.work / "pip-report.json"
                        report.unlink(missing_ok=True)
                        r = run([*pip, "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:",
                                 "--platform", f"{plat}_x86_64", "--python-version", pv, "--target", a.work / "t",
                                 "--report", report, f"ffpa-attn=={public}", *pip_idx], env=env, cwd=str(a.work))
                        files = [i["download_info"]["url"].rsplit("/", 1)[1].replace("%2B", "+")
                                 for i in json.loads(report.read_text())["install"]] if report.exists() else []
                        got = files[0] if len(files) == 1 else None
                        ok = r.returncode == 0 and got == pure_file
                    else:
                        extra = uv_ours_first if who == "uv --index ours" else uv_best
                        r = run([*uv, "--python", py, "--dry-run", "--no-deps", "--python-platform", f"x86_64-{plat}",
                                 "--python-version", pv, f"ffpa-attn=={public}", *extra], env=env, cwd=str(a.work))
                        mm = re.search(r"^ \+ ffpa-attn==(\S+)$", r.stdout + r.stderr, re.M)
                        got = mm.group(1) if mm else None
                        if expect == "error":
                            # uv names why: the platform tags, or the Python ABI tags, it found.
                            ok = (r.returncode != 0 and got is None and "for `ffpa-attn`" in r.stderr
                                  and ("on the following platform" in r.stderr or "Python ABI tag" in r.stderr))
                        else:
                            ok = r.returncode == 0 and got == version
                    bad = [] if ok else [f"documented as '{expect}' (pure = {pure_file}), got {got!r} (exit "
                                         f"{r.returncode}): update docs/install.md (a machine the CUDA wheel cannot serve)"]
                    cases_out[key] = {"ok": ok, "expect": expect, "got": got, "problems": bad}
                    print(f"[{'OK' if ok else 'FAIL'}] {key}: {got or 'no install'}")
                    problems += [f"{key}: {b}" for b in bad]

            # docs/install.md's pyproject.toml: uv project mode with our index explicit.
            key = f"{tag}: uv sync (pyproject.toml, explicit index)"
            proj = a.work / f"uv-project-{tag}"
            proj.mkdir()
            (proj / "pyproject.toml").write_text(
                '[project]\nname = "uses-ffpa"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
                f'dependencies = ["ffpa-attn=={public}"]\n\n'
                f'[[tool.uv.index]]\nname = "pypi"\nurl = "{pypi}"\ndefault = true\n\n'
                f'[[tool.uv.index]]\nname = "ffpa-{channel}"\nurl = "{site}"\nexplicit = true\n\n'
                f'[tool.uv.sources]\nffpa-attn = {{ index = "ffpa-{channel}" }}\n')
            # Not --no-config here: it would also drop the project's own [tool.uv] indexes.
            r = run([a.uv, "sync", "--python", py], env=env, cwd=str(proj))
            vpy = proj / ".venv" / "bin" / "python"
            got = {}
            if vpy.exists():
                p = run([vpy, "-c", PROBE], env=env, cwd=str(a.work))
                mm = re.search(r"^PROBE-JSON (.*)$", p.stdout, re.M)
                got = json.loads(mm.group(1)) if mm else {}
            bad = []
            if r.returncode != 0:
                bad.append(f"uv sync failed (exit {r.returncode})")
            elif got.get("version") != cuda_version or not (got.get("ext") or "").startswith(str(proj)):
                bad.append(f"ended with {got.get('version')} (_C {got.get('ext')}), not our {cuda_version}")
            lock = (proj / "uv.lock").read_text() if (proj / "uv.lock").exists() else ""
            if cuda_w["sha256"] not in lock:
                bad.append("uv.lock does not record the sha256 of our wheel")
            cases_out[key] = {"ok": not bad, "expect": "cuda", "got": got.get("version"), "problems": bad}
            print(f"[{'OK' if not bad else 'FAIL'}] {key}: {got.get('version')}")
            problems += [f"{key}: {b}" for b in bad]
    finally:
        server.stop()

    for p in problems:
        print("FAIL: " + p)
    ok = not problems and bool(cases_out)
    a.results.mkdir(parents=True, exist_ok=True)
    (a.results / "installers.json").write_text(json.dumps(
        {"check": "installers", "ok": ok, "cases": cases_out, "problems": problems}, indent=2))
    print(f"installers: {'OK' if ok else 'FAILED'} ({sum(c['ok'] for c in cases_out.values())}/{len(cases_out)} cases)")
    assert ok, "\n".join(problems) or "no case ran"
