# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""CTest fixture: `start ROOT STATE` runs `python -m http.server --bind 127.0.0.1` on a
free port serving ROOT (detached, bounded by `timeout`), writing STATE/port and
STATE/pid; `stop STATE` ends it. Tests read STATE/port."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

LIFETIME_S = 1800  # the server never outlives a forgotten cleanup by more than this


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(root, state):
    root, state = pathlib.Path(root), pathlib.Path(state)
    root.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    (root / "alive").write_text("ok\n")
    for _ in range(5):
        port = free_port()
        log = open(state / "server.log", "wb")
        proc = subprocess.Popen(
            ["timeout", str(LIFETIME_S), sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
             "--directory", str(root), str(port)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/alive", timeout=1).read()
                (state / "port").write_text(str(port))
                (state / "pid").write_text(str(proc.pid))
                print(f"http.server on 127.0.0.1:{port} serving {root} (pid {proc.pid})")
                return 0
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    print("could not start http.server on a free loopback port", file=sys.stderr)
    return 1


def stop(state):
    pid_file = pathlib.Path(state) / "pid"
    if not pid_file.exists():
        return 0
    pid = int(pid_file.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    pid_file.unlink()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "start":
        sys.exit(start(sys.argv[2], sys.argv[3]))
    sys.exit(stop(sys.argv[2]))
