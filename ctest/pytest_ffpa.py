"""Shared fixtures of every pytest module CTest runs (loaded with `-p pytest_ffpa`,
ctest/ on PYTHONPATH; ctest/FfpaPytest.cmake registers the tests).

CTest hands each module its inputs as environment variables, FFPA_<NAME> (the
engine, the dist directory, the tools venv, a work directory of its own); the
fixtures below read them and fail with the variable's name when one is missing.

    ffpa_env      FFPA_* inputs by name: ffpa_env("INDEX") is $FFPA_INDEX
    work          a fresh directory of this test (under $FFPA_TEST_WORK, else tmp)
    http_server   a loopback HTTP server: http_server(root) -> base URL ("http://127.0.0.1:PORT/")
    venv_for      one clean venv per interpreter and purpose, made once per session:
                  venv_for(python, "install") -> its python (created with pip)
    package       a fixture project of ctest/packages copied into place: package("selftest", dest) -> dest
    run           subprocess.run with text output captured, argv items str()-ed
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "ctest"))
from pytest_skip_rc import all_skipped_exit  # noqa: E402  (the path above)


def pytest_sessionfinish(session, exitstatus):
    """An all-skipped run is CTest's skip (ctest/pytest_skip_rc.py)."""
    all_skipped_exit(session, exitstatus)


def env_value(name: str) -> str:
    value = os.environ.get(f"FFPA_{name}")
    if not value:
        pytest.fail(f"FFPA_{name} is not set; run this module through CTest (ctest -R <test>), which sets it")
    return value


@pytest.fixture(scope="session")
def ffpa_env():
    return env_value


@pytest.fixture
def work(request) -> Path:
    base = os.environ.get("FFPA_TEST_WORK")
    root = Path(base) if base else Path(request.config._tmp_path_factory.getbasetemp())
    d = root / request.node.name.replace("/", "_")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


@pytest.fixture(scope="session")
def package():
    def copy(name: str, dest: Path) -> Path:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(REPO / "ctest" / "packages" / name, dest)
        return Path(dest)

    return copy


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the tests print what matters
        pass


@pytest.fixture(scope="session")
def http_server():
    """Serves directories on 127.0.0.1, one thread-backed server per root, stopped at
    the end of the session."""
    servers = {}

    def serve(root: Path) -> str:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        if root not in servers:
            handler = functools.partial(_Quiet, directory=str(root))
            srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=srv.serve_forever, daemon=True).start()
            servers[root] = srv
        return f"http://127.0.0.1:{servers[root].server_address[1]}/"

    yield serve
    for srv in servers.values():
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="session")
def venv_for(tmp_path_factory):
    """One clean venv per (interpreter, purpose), created on first use and reused by
    every test of the session; $FFPA_VENV_DIR keeps them beside the build tree."""
    base = Path(os.environ.get("FFPA_VENV_DIR") or tmp_path_factory.mktemp("venvs"))
    made = {}

    def make(python: str | Path, purpose: str = "install") -> Path:
        key = (str(python), purpose)
        if key not in made:
            tag = subprocess.run([str(python), "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
            d = base / f"{purpose}-{tag}"
            shutil.rmtree(d, ignore_errors=True)
            subprocess.run([str(python), "-m", "venv", str(d)], check=True, capture_output=True)
            made[key] = d / "bin" / "python"
        return made[key]

    return make


def run(cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([c if isinstance(c, bytes) else str(c) for c in cmd], **kw)


@pytest.fixture(scope="session")
def runner():
    return run


def make_venv(path: Path, with_pip: bool = True) -> Path:
    """A fresh venv at `path` (removed first); returns its python."""
    venv.EnvBuilder(with_pip=with_pip, clear=True).create(path)
    return path / "bin" / "python"


def publish_probe_project(proj: Path, modules: str | Path, args: str) -> Path:
    """A CMake project in `proj` that includes FfpaPublish from `modules` and calls
    ffpa_add_publish_targets(<args>): the publishing targets without the whole build."""
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.25)
project(publish_probe NONE)
list(APPEND CMAKE_MODULE_PATH "{modules}")
include(FfpaPublish)
ffpa_add_publish_targets({args})
""")
    return proj
