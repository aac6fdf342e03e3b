# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""publish-pure against a real pypiserver on loopback: twine uploads, the plain vV
release targets the commit explicitly, a re-run converges, and the same version with
other bytes is refused (by our check, and by the server when twine is run directly)."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.request

from site_testlib import PY, check, fresh_dir, git, make_wheel, run


def test_publish_pure():
    work = fresh_dir("pure")
    pkgs = work / "packages"
    pkgs.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bindir = pathlib.Path(PY).parent
    server = subprocess.Popen(
        ["timeout", "600", str(bindir / "pypi-server"), "run", "-i", "127.0.0.1", "-p", str(port), "-a", ".", "-P", ".",
         str(pkgs)], stdout=open(work / "server.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "simple/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("pypiserver did not start: " + (work / "server.log").read_text())
        src = work / "src"
        src.mkdir()
        git("init", "--quiet", str(src))
        git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "--quiet", "--allow-empty", "-m", "r", cwd=src)
        head = git("rev-parse", "HEAD", cwd=src).strip()
        git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "--quiet", "--allow-empty", "-m", "later", cwd=src)
        env = {"FFPA_TWINE": str(bindir / "twine"), "TWINE_USERNAME": "ffpa", "TWINE_PASSWORD": "test"}
        pure = make_wheel(work / "dist", "0.2.5", tag="py3-none-any")
        args = ["publish-pure", "--tag", "v0.2.5", "--wheel", pure, "--repository-url", url, "--assets",
                f"dir:{work / 'assets'}", "--target", head, "--source-dir", src]
        p = run(args + ["--dry-run"], env=env, check_rc=0)
        check("twine upload --non-interactive" in p.stdout and not any(pkgs.iterdir()), p.stdout)
        run(args, env=env, check_rc=0)
        check((pkgs / pure.name).read_bytes() == pure.read_bytes(), "not uploaded")
        rel = json.loads((work / "assets" / "v0.2.5" / ".release.json").read_text())
        check(rel["target"] == head and rel["latest"] is True, f"release {rel}")
        check((work / "assets" / "v0.2.5" / pure.name).exists(), "wheel not attached to the release")
        p = run(args, env=env, check_rc=0)  # re-run converges
        check("skipped" in p.stdout, p.stdout)

        other = make_wheel(work / "other", "0.2.5", tag="py3-none-any", payload="# other")
        p = run(["publish-pure", "--tag", "v0.2.5", "--wheel", other, "--repository-url", url], env=env, check_rc=1)
        check("is already on" in p.stderr and "cannot be overwritten" in p.stderr, p.stderr)
        direct = subprocess.run([str(bindir / "twine"), "upload", "--non-interactive", "--repository-url", url,
                                 str(other)], capture_output=True, text=True, env={**os.environ, **env})
        check(direct.returncode != 0, "pypiserver accepted an overwrite")
        check((pkgs / pure.name).read_bytes() == pure.read_bytes(), "the server copy changed")

        local = make_wheel(work / "local", "0.2.6+cu13", tag="py3-none-any")
        p = run(["publish-pure", "--tag", "v0.2.6", "--wheel", local, "--repository-url", url], env=env, check_rc=1)
        check("local version" in p.stderr, p.stderr)
        so = make_wheel(work / "so", "0.2.6", tag="py3-none-any", extra={"ffpa_attn/_C.so": b"\x7fELF"})
        p = run(["publish-pure", "--tag", "v0.2.6", "--wheel", so, "--repository-url", url], env=env, check_rc=1)
        # Refused by publish-pure's own check, or earlier by verify-wheel's ELF-vs-tag check.
        check("shared object" in p.stderr or "ELF binary" in p.stderr, p.stderr)
        dev = make_wheel(work / "dev", "0.2.6.dev1", tag="py3-none-any")
        p = run(["publish-pure", "--tag", "v0.2.6.dev1", "--wheel", dev, "--repository-url", url], env=env, check_rc=1)
        check("refusing to publish a pre-release wheel" in p.stderr, p.stderr)
        print("pure: OK")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
