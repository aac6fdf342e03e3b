#!/usr/bin/env python3
# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Sizes claimed, not proven: small wheels whose headers claim
gigabytes, and a real 1 GiB member, checked by ffpa-index under a 300 MiB address
space limit (RLIMIT_AS, what `ulimit -v` sets). Every forged claim must end in a
clean refusal naming it (exit 1, no bad_alloc, no crash); the honest 1 GiB member
must verify, which proves members are streamed rather than held in memory."""

from __future__ import annotations

import hashlib
import re
import resource
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from craftzip import Archive, Entry, wheel_entries  # noqa: E402

LIMIT = 300 << 20
GIB = 1 << 30
NAME = "ffpa_attn-1.0.0-py3-none-any.whl"
PKG = [(b"ffpa_attn/__init__.py", b"x = 1\n")]


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def zeros_deflated(n: int) -> tuple[bytes, int, str]:
    """Raw deflate of n zero bytes, their CRC-32 and RECORD digest, built in 16 MiB steps."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = bytes(16 << 20)
    parts, crc, sha = [], 0, hashlib.sha256()
    left = n
    while left:
        b = block[: min(left, len(block))]
        parts.append(c.compress(b))
        crc = zlib.crc32(b, crc)
        sha.update(b)
        left -= len(b)
    parts.append(c.flush())
    import base64

    digest = "sha256=" + base64.urlsafe_b64encode(sha.digest()).rstrip(b"=").decode()
    return b"".join(parts), crc, digest


def big_member_wheel(claim: int, real: int, name: bytes = b"ffpa_attn/big.bin") -> bytes:
    """A wheel whose member `name` holds `real` zero bytes but claims `claim`."""
    raw, crc, digest = zeros_deflated(real)
    dist_info = b".dist-info/" in name
    entries = wheel_entries(PKG + ([] if dist_info else [(name, b"")]), metadata=b"" if dist_info else None)
    big = next(i for i, e in enumerate(entries) if e.name == name)
    entries[big] = Entry(name, b"", raw=raw, csizes=(len(raw), claim), lsizes=(len(raw), claim), ccrc=crc, lcrc=crc,
                         zip64=claim >= 0xFFFFFFFF)
    # RECORD: replace the empty file's line with the real digest and size.
    rec = entries[-1]
    text = rec.data.decode().replace(
        f"{name.decode()},sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0", f"{name.decode()},{digest},{real}")
    entries[-1] = Entry(rec.name, text.encode())
    return Archive(entries, zip64_end=claim >= 0xFFFFFFFF).build()


def cases():
    g = wheel_entries(PKG)
    raw1 = g[0].stored_bytes()
    # (case, wheel bytes, verify-wheel's exit status, its message, whether the
    # zip structure itself is forged, so that `list` must refuse it too)
    yield "claims_1gib_from_bytes", Archive(
        [Entry(**{**g[0].__dict__, "csizes": (len(raw1), GIB), "lsizes": (len(raw1), GIB)})] + g[1:]).build(), 1, r"more than deflate can produce", True
    yield "claims_2gib_stored", Archive(
        [Entry(**{**g[0].__dict__, "method": 0, "csizes": (2 * GIB - 2, 2 * GIB - 2), "lsizes": (2 * GIB - 2, 2 * GIB - 2)})] + g[1:]).build(), 1, r"compressed bytes in a \d+-byte archive", True
    z = [Entry(**{**e.__dict__, "zip64": True}) for e in g]
    z[0] = Entry(**{**z[0].__dict__, "csizes": (len(raw1), 1 << 62), "lsizes": (len(raw1), 1 << 62)})
    yield "zip64_claims_2pow62", Archive(z, zip64_end=True).build(), 1, r"more than the limit of \d+ bytes per member", True
    yield "zip64_claims_2pow40_members", Archive(g, zip64_end=True, zip64_count=1 << 40).build(), 1, r"claims \d+ members, more than the limit", True
    yield "metadata_bomb_200mib", big_member_wheel(200 << 20, 200 << 20, name=b"ffpa_attn-1.0.0.dist-info/METADATA"), 1, r"over the limit of \d+ bytes for this file", False
    yield "inflates_past_its_claim", big_member_wheel(GIB, GIB + (64 << 20)), 1, r"inflates to more than its recorded \d+ bytes", False
    yield "honest_1gib_member", big_member_wheel(GIB, GIB), 0, r": OK", False


def test_size_claims_bounded_memory(ffpa_env, work):
    ffpa_index = ffpa_env("INDEX")
    failures = []
    for name, data, rc, pattern, structural in cases():
        whl = work / name / NAME
        whl.parent.mkdir()
        whl.write_bytes(data)
        for cmd in (["verify-wheel"], ["list"]) if structural else (["verify-wheel"],):
            p = subprocess.run([ffpa_index, *cmd, str(whl)], capture_output=True, text=True, errors="replace",
                               preexec_fn=limited, timeout=600)
            out = p.stdout + p.stderr
            tail = out.strip().splitlines()[-1] if out.strip() else ""
            print(f"{name} ({len(data)} bytes), {cmd[0]} under {LIMIT >> 20} MiB: rc {p.returncode}: {tail}")
            if re.search(r"bad_alloc|std::|terminate|internal", out) or p.returncode not in (0, 1):
                failures.append(f"{name}: {cmd[0]} did not refuse cleanly (rc {p.returncode}):\n{out}")
            elif cmd[0] == "verify-wheel" and (p.returncode != rc or not re.search(pattern, out)):
                failures.append(f"{name}: expected rc {rc} and /{pattern}/, got rc {p.returncode}:\n{out}")
            elif cmd[0] == "list" and p.returncode != 1:
                failures.append(f"{name}: list accepted the forged archive:\n{out}")
        shutil.rmtree(whl.parent)
    assert not failures, f"{len(failures)} failure(s):\n" + "\n".join(" - " + f for f in failures)
    print("every forged claim refused cleanly; the honest 1 GiB member verified in flat memory")
