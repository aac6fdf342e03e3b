# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the index/site pytest modules (test_*.py beside this file): small
valid wheels, a site repository with a local bare remote, the CLI runner and a tree
fingerprint. The loopback HTTP server and the work directory come from
ctest/pytest_ffpa.py."""
import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

CLI = os.environ["FFPA_SITE_CLI"]
PY = os.environ.get("FFPA_TOOLS_PYTHON", sys.executable)


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    assert cond, msg


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def make_wheel(out_dir, version, tag="cp312-cp312-manylinux_2_28_x86_64", name="ffpa_attn",
               payload="", requires_python=">=3.10", bad_record=False, extra=None):
    """A minimal PEP 427 wheel with a correct RECORD (or a wrong one). requires_python
    may be bytes, to craft METADATA that is not UTF-8."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}"
    if isinstance(requires_python, str):
        requires_python = requires_python.encode()
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n{payload}\n".encode(),
        **(extra or {}),
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n".encode()
            + (b"Requires-Python: " + requires_python + b"\n" if requires_python else b"")
            + b"\n"),
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: site_testlib\nRoot-Is-Purelib: false\n"
            + "".join(f"Tag: {t}\n" for t in expand_tags(tag))).encode(),
    }
    record = []
    for n, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if bad_record and n.endswith("__init__.py"):
            digest = "A" * 43
        record.append(f"{n},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    path = out_dir / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in files.items():
            info = zipfile.ZipInfo(n, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return path


def expand_tags(tag):
    py, abi, plat = tag.split("-")
    return [f"{a}-{b}-{c}" for a in py.split(".") for b in abi.split(".") for c in plat.split(".")]


def run(args, env=None, cwd=None, check_rc=None):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    argv = [CLI] + [a if isinstance(a, bytes) else str(a) for a in args]  # bytes: arguments that are not UTF-8
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=full_env, cwd=cwd)
    if check_rc is not None and p.returncode != check_rc:
        fail(f"{' '.join(map(str, args))}: exit {p.returncode}, expected {check_rc}\n"
             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def git(*args, cwd=None):
    return subprocess.run(["git"] + list(args), cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_site(root):
    """A bare remote with an initial gh-pages commit and a clone of it."""
    root = pathlib.Path(root)
    remote, clone = root / "site-remote.git", root / "site"
    git("init", "--quiet", "--bare", "-b", "gh-pages", str(remote))
    git("clone", "--quiet", str(remote), str(clone))
    git("checkout", "--quiet", "-B", "gh-pages", cwd=clone)
    for k, v in (("user.name", "ffpa test"), ("user.email", "test@example.invalid")):
        git("config", k, v, cwd=clone)
    (clone / ".nojekyll").write_text("")
    git("add", ".nojekyll", cwd=clone)
    git("commit", "--quiet", "-m", "site", cwd=clone)
    git("push", "--quiet", "origin", "gh-pages", cwd=clone)
    return remote, clone


def make_source(root):
    """A git checkout with one commit, the release commit a publish tags; returns
    (checkout, sha). publish refuses a --target that is not a commit of --source-dir."""
    src = pathlib.Path(root) / "src"
    (src / "cmake").mkdir(parents=True, exist_ok=True)
    # publish reads the channels that exist from the checkout's release matrix.
    shutil.copy(pathlib.Path(os.environ.get("FFPA_CMAKE_MODULES", pathlib.Path(__file__).resolve().parents[3] / "cmake"))
                / "release-matrix.json", src / "cmake" / "release-matrix.json")
    git("init", "--quiet", str(src))
    git("add", "-A", cwd=src)
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "--quiet", "-m", "release", cwd=src)
    return src, git("rev-parse", "HEAD", cwd=src).strip()


def fresh_dir(name):
    d = pathlib.Path(os.environ.get("FFPA_TEST_WORK", ".")) / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def tree_hash(*roots):
    """Fingerprint of files (content and names) under roots, ignoring git's index stat cache."""
    h = hashlib.sha256()
    for root in roots:
        root = pathlib.Path(root)
        if not root.exists():
            h.update(b"absent:" + str(root).encode())
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.name != "index" and "logs" not in p.parts and p.name != "FETCH_HEAD":
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def load_page(site, project="ffpa-attn", channel="cu13", prefix="whl"):
    import json
    return json.loads((pathlib.Path(site) / prefix / channel / project / "index.json").read_text())


def check_index_consistent(site, expected, channel="cu13"):
    """Index parses, lists each expected file once with its hash, and nothing else;
    the HTML carries the same anchors."""
    import re
    page = load_page(site, channel=channel)
    names = [f["filename"] for f in page["files"]]
    check(len(names) == len(set(names)), f"duplicate entries: {names}")
    check(sorted(names) == sorted(expected), f"index lists {sorted(names)}, expected {sorted(expected)}")
    for f in page["files"]:
        check(f["hashes"]["sha256"] == expected[f["filename"]], f"wrong hash for {f['filename']}")
    html = (pathlib.Path(site) / "whl" / channel / "ffpa-attn" / "index.html").read_text()
    anchors = re.findall(r'<a href="[^"#]*#sha256=([0-9a-f]{64})"[^>]*>([^<]*)</a>', html)
    check(sorted(a[1] for a in anchors) == sorted(expected), f"HTML anchors {anchors} disagree with JSON")
    for h, fn in anchors:
        check(expected[fn.replace("&#43;", "+")] == h, f"HTML hash wrong for {fn}")


def expect_refusal(args, message, roots, env=None, cwd=None):
    """Runs a command that must be refused: exit 1, `message` in stderr, no internal
    error, nothing under `roots` changed. Returns the process."""
    before = tree_hash(*roots)
    p = run(args, env=env, cwd=cwd)
    check(p.returncode == 1, f"{args[0]} {message!r}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    check(message in p.stderr, f"expected {message!r} in:\n{p.stderr}")
    check("unexpected failure" not in p.stderr, f"internal error instead of a refusal:\n{p.stderr}")
    check(tree_hash(*roots) == before, f"{message!r}: something changed on disk\n{p.stdout}")
    return p


def verify_pages(site, assets, channel="cu13"):
    """ffpa-index verify: every HTML page equals what its JSON renders to, every file hashes."""
    p = run(["verify", "--index-dir", site, "--channel", channel, "--assets", assets])
    check(p.returncode == 0, f"verify failed:\n{p.stdout}\n{p.stderr}")
