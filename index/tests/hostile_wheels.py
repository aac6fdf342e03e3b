#!/usr/bin/env python3
# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Differential test of `ffpa-index verify-wheel` against pip (and uv, when it is
installed in the tool venv) on crafted wheels (issue 10, items 1, 3, 4, 6, 12).

Every case is a wheel written byte by byte by craftzip.py. The rule under test:
either verify-wheel refuses the wheel (exit 1, a message naming the problem), or
`pip install --no-deps --target` installs exactly the files RECORD lists (uv too).
Each case also states which of the two we expect, and the refusal's message, so a
weakened check fails here even when pip happens to agree. For refused cases the
log shows what pip would have done with the wheel, as evidence of why it matters.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from craftzip import SAT32, Archive, Entry, elf_header, record_line, wheel_entries  # noqa: E402

PKG = [(b"ffpa_attn/__init__.py", b"x = 1\n"), (b"ffpa_attn/core.py", b"def f():\n    return 2\n")]
GOOD_NAME = "ffpa_attn-1.0.0-py3-none-any.whl"
X86_NAME = "ffpa_attn-1.0.0-py3-none-manylinux_2_17_x86_64.whl"
EVIL = b"evil.pth"
EVIL_DATA = b"import os; os.environ['FFPA_PWNED'] = '1'\n"
# Files the installers write themselves (into the .dist-info, and uv's lock file at
# the top of --target); they are not the wheel's.
INSTALLER_OWN = {"INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json"}
TARGET_OWN = {".lock"}


def good(**kw) -> list[Entry]:
    return wheel_entries(PKG, **kw)


def with_entry(entries: list[Entry], index: int, **changes) -> list[Entry]:
    out = list(entries)
    e = out[index]
    out[index] = Entry(**{**e.__dict__, **changes})
    return out


def cases():
    """(case name, file name, archive bytes, expected: "accept" or a refusal regex)."""
    g = good()
    yield "good", GOOD_NAME, Archive(g).build(), "accept"
    yield "good_zip64_records", GOOD_NAME, Archive([Entry(**{**e.__dict__, "zip64": True}) for e in g], zip64_end=True).build(), "accept"
    yield "good_utf8_name", GOOD_NAME, Archive(wheel_entries(PKG + [("ffpa_attn/données.py".encode(), b"y = 1\n")])).build(), "accept"
    yield "good_stored", GOOD_NAME, Archive([Entry(**{**e.__dict__, "method": 0}) for e in g]).build(), "accept"
    yield "good_data_dir", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn-1.0.0.data/purelib/extra_mod.py", b"y = 1\n"),
                                                                   (b"ffpa_attn-1.0.0.data/scripts/ffpa-tool", b"#!python\nprint(1)\n"),
                                                                   (b"ffpa_attn-1.0.0.data/data/share/ffpa.txt", b"d\n")])).build(), "accept"
    yield "good_x86_64_elf", X86_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/_k.so", elf_header())],
                                                             tag="py3-none-manylinux_2_17_x86_64")).build(), "accept"

    yield "data_unknown_scheme", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn-1.0.0.data/site/evil.pth", EVIL_DATA)])).build(), r"not under one of ffpa_attn-1\.0\.0\.data/\{purelib"

    yield "symlink_entry", GOOD_NAME, Archive(with_entry(g, 1, external_attr=0o120777 << 16)).build(), r"is not a regular file \(Unix mode 0120777"
    yield "setuid_entry", GOOD_NAME, Archive(with_entry(g, 1, external_attr=0o104755 << 16)).build(), r"setuid or setgid"

    # Item 1: what pip reads differently.
    evil = Entry(EVIL, EVIL_DATA)
    yield "extra_central_entry_pth", GOOD_NAME, Archive(g, hidden=[evil]).build(), r"more entries than the \d+ its end record counts"
    yield "fewer_entries_than_counted", GOOD_NAME, Archive(g, count=len(g) + 1).build(), r"counts \d+ entries but the central directory holds"
    yield "nul_in_name", GOOD_NAME, Archive(wheel_entries(PKG + [(EVIL + b"\0.txt", EVIL_DATA)])).build(), r"contains a NUL byte"
    yield "local_name_differs", GOOD_NAME, Archive(with_entry(g, 0, lname=b"ffpa_attn/__init_.py")).build(), r"local header disagrees .* on the name"
    yield "local_sizes_differ", GOOD_NAME, Archive(with_entry(g, 1, lsizes=(len(g[1].stored_bytes()), 3))).build(), r"local header disagrees .* on the sizes"
    yield "local_method_differs", GOOD_NAME, Archive(with_entry(g, 1, lmethod=0)).build(), r"local header disagrees .* on the method"
    yield "local_crc_differs", GOOD_NAME, Archive(with_entry(g, 1, lcrc=0x12345678)).build(), r"local header disagrees .* on the CRC-32"
    yield "local_flags_differ", GOOD_NAME, Archive(with_entry(g, 1, lflags=0x800)).build(), r"local header disagrees .* on the flags"
    yield "bad_utf8_flagged", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/\xff.py", b"y = 1\n")])).build(), r"flagged UTF-8 \(bit 11\) but is not valid UTF-8"
    surrogate = Archive(wheel_entries(PKG + [(b"ffpa_attn/\xed\xa0\x80.py", b"y = 1\n")])).build()
    yield "surrogate_utf8_flagged", GOOD_NAME, surrogate, r"not valid UTF-8"
    unflagged = wheel_entries(PKG + [("ffpa_attn/é.py".encode(), b"y = 1\n")])
    unflagged[2] = Entry(**{**unflagged[2].__dict__, "flags": 0})
    yield "utf8_bytes_without_flag_cp437", GOOD_NAME, Archive(unflagged).build(), r"without the UTF-8 flag .* cp437"
    latin1 = wheel_entries(PKG + [(b"ffpa_attn/\xe9.py", b"y = 1\n")])
    latin1[2] = Entry(**{**latin1[2].__dict__, "flags": 0})
    yield "latin1_without_flag", GOOD_NAME, Archive(latin1).build(), r"without the UTF-8 flag"
    dup = wheel_entries(PKG)
    dup.insert(1, Entry(b"ffpa_attn/__init__.py", EVIL_DATA))
    yield "duplicate_name", GOOD_NAME, Archive(dup).build(), r"appears more than once"
    for label, name, msg in [("absolute", b"/tmp/ffpa_evil.py", r"is absolute"),
                             ("dotdot", b"ffpa_attn/../../ffpa_evil.py", r"'\.\.' component"),
                             ("dot", b"ffpa_attn/./x.py", r"'\.' component"),
                             ("backslash", b"ffpa_attn\\x.py", r"contains a backslash"),
                             ("empty_component", b"ffpa_attn//x.py", r"empty path component"),
                             ("control_char", b"ffpa_attn/x\n.py", r"control character")]:
        yield f"name_{label}", GOOD_NAME, Archive(wheel_entries(PKG + [(name, b"y = 1\n")])).build(), msg
    unicode_path = struct.pack("<HHBI", 0x7075, 5 + len(EVIL), 1, zlib.crc32(b"ffpa_attn/core.py")) + EVIL
    yield "unicode_path_extra_renames", GOOD_NAME, Archive(with_entry(g, 1, cextra=unicode_path)).build(), r"extra field 0x7075"
    yield "truncated_extra", GOOD_NAME, Archive(with_entry(g, 1, cextra=b"\x55\x54\x09\x00\x01")).build(), r"extra field"
    yield "data_descriptor_flag", GOOD_NAME, Archive([Entry(**{**e.__dict__, "flags": 0x8}) for e in g]).build(), r"data descriptor"
    yield "encrypted_flag", GOOD_NAME, Archive(with_entry(g, 0, flags=0x1)).build(), r"encrypted"
    yield "method_bzip2", GOOD_NAME, Archive(with_entry(g, 0, method=12, raw=b"BZh9")).build(), r"compression method 12"
    yield "prepended_data", GOOD_NAME, Archive(g, prepend=b"MZ" + bytes(510)).build(), r"prepended"
    yield "prepended_data_offsets_relative", GOOD_NAME, Archive(g, prepend=b"#!/bin/sh\nexit 0\n", shift_offsets=True).build(), r"prepended"
    yield "hidden_bytes_between_members", GOOD_NAME, Archive(g, gap_after_first=bytes(64)).build(), r"hidden bytes between members"
    yield "appended_garbage", GOOD_NAME, Archive(g, append=b"trailing bytes").build(), r"bytes follow its end of central directory record"
    yield "archive_comment", GOOD_NAME, Archive(g, comment=b"a comment").build(), r"archive comment"
    yield "zip64_count_disagrees", GOOD_NAME, Archive(g, zip64_end=True, zip64_count=len(g) + 1).build(), r"counts \d+ entries|disagree"
    yield "zip64_locator_elsewhere", GOOD_NAME, Archive(g, zip64_end=True, zip64_locator_offset=0).build(), r"ZIP64 locator points at offset 0"
    # A member inside another member's data (the overlapping-entries zip bomb):
    inner = Entry(EVIL, EVIL_DATA, method=0)
    from craftzip import local_record  # noqa: E402

    inner_local = local_record(inner, EVIL_DATA)
    carrier = Entry(b"ffpa_attn/blob.bin", inner_local, method=0)
    ents = wheel_entries(PKG + [(carrier.name, carrier.data)], record_extra=record_line(EVIL.decode(), EVIL_DATA))
    ents[2] = carrier
    # The central entry of evil.pth points into the carrier's data.
    arch = Archive(ents)
    raw = arch.build()
    carrier_at = raw.index(inner_local)
    ents.insert(3, Entry(EVIL, EVIL_DATA, method=0, coffset=carrier_at))
    yield "overlapping_entries", GOOD_NAME, Archive(ents).build(), r"overlaps|starts at offset|local header"

    # Item 2: claims (the memory side is index.wheel.size_claims).
    yield "claimed_2gib_deflate", GOOD_NAME, Archive(with_entry(g, 1, lsizes=(len(g[1].stored_bytes()), 2 << 30),
                                                                csizes=(len(g[1].stored_bytes()), 2 << 30))).build(), r"more than deflate can produce"
    z64 = [Entry(**{**e.__dict__, "zip64": True}) for e in g]
    z64[1] = Entry(**{**z64[1].__dict__, "lsizes": (len(g[1].stored_bytes()), 1 << 62), "csizes": (len(g[1].stored_bytes()), 1 << 62)})
    yield "zip64_claimed_2pow62", GOOD_NAME, Archive(z64, zip64_end=True).build(), r"more than the limit"
    yield "stored_size_mismatch", GOOD_NAME, Archive([Entry(**{**e.__dict__, "method": 0}) for e in with_entry(g, 0, csizes=(6, 7), lsizes=(6, 7))]).build(), r"is stored but claims"
    yield "compressed_runs_into_directory", GOOD_NAME, Archive(with_entry(g, 3, csizes=(10**6, len(g[3].data)), lsizes=(10**6, len(g[3].data)))).build(), r"compressed bytes|central directory|claims"
    junk = Entry(b"ffpa_attn/core.py", PKG[1][1], raw=zlib.compress(PKG[1][1])[2:-4] + b"JUNK")
    jg = list(g)
    jg[1] = junk
    yield "junk_after_deflate_stream", GOOD_NAME, Archive(jg).build(), r"bytes follow the end of its deflate stream"
    yield "directory_entry_with_data", GOOD_NAME, Archive(wheel_entries(PKG) + [Entry(b"ffpa_attn/sub/", b"data")]).build(), r"directory entry with"

    # Item 3: one version, one spelling.
    for fname in ["ffpa_attn-01.0.0-py3-none-any.whl", "ffpa_attn-v1.0.0-py3-none-any.whl", "FFPA_Attn-1.0.0-py3-none-any.whl",
                  "ffpa.attn-1.0.0-py3-none-any.whl"]:
        yield f"spelling_{fname.split('-')[0]}_{fname.split('-')[1]}", fname, Archive(g).build(), r"ffpa_attn-1\.0\.0-py3-none-any\.whl"
    yield "metadata_version_differs", GOOD_NAME, Archive(good(metadata=b"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 1.0.1\nSummary: s\n")).build(), r"METADATA Version '1\.0\.1' does not match"
    yield "metadata_name_differs", GOOD_NAME, Archive(good(metadata=b"Metadata-Version: 2.1\nName: other\nVersion: 1.0.0\nSummary: s\n")).build(), r"METADATA Name 'other' does not match"

    # Item 4: METADATA must parse.
    base_meta = b"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 1.0.0\nSummary: s\n"
    for label, extra, msg in [("requires_python_xff", b"Requires-Python: >=3.10\xff\n", r"not valid UTF-8"),
                              ("requires_python_bad", b"Requires-Python: >=3.10.*\n", r"Requires-Python is not a PEP 440 specifier set"),
                              ("requires_dist_bad", b"Requires-Dist: numpy>=\n", r"Requires-Dist"),
                              ("requires_dist_bad_marker", b"Requires-Dist: numpy; python_versio < '3'\n", r"marker"),
                              ("not_header_form", b"this is not a header\n", r"is not 'Key: value'"),
                              ("duplicate_summary", b"Summary: again\n", r"'Summary' appears more than once"),
                              ("unknown_field", b"Evil-Field: 1\n", r"unknown field 'Evil-Field'"),
                              ("lone_cr", b"Summary2: a\rRequires-Dist: evil\n", r"control character")]:
        yield f"metadata_{label}", GOOD_NAME, Archive(good(metadata=base_meta + extra)).build(), msg
    yield "metadata_no_version", GOOD_NAME, Archive(good(metadata=b"Metadata-Version: 2.1\nName: ffpa-attn\n")).build(), r"no Version field"

    # Item 6: platform files match their tag.
    yield "aarch64_elf_in_x86_64_wheel", X86_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/_k.so", elf_header(machine=183))],
                                                                         tag="py3-none-manylinux_2_17_x86_64")).build(), r"AArch64 but the platform tag"
    yield "elf32_in_x86_64_wheel", X86_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/_k.so", elf_header(elf_class=1, machine=3))],
                                                                   tag="py3-none-manylinux_2_17_x86_64")).build(), r"ELF32 .* needs ELF64"
    yield "so_not_elf_in_x86_64_wheel", X86_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/_k.so", b"not an elf")],
                                                                        tag="py3-none-manylinux_2_17_x86_64")).build(), r"not an ELF file"
    yield "elf_in_pure_wheel", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/helper", elf_header())])).build(), r"platform is 'any'"
    yield "so_in_pure_wheel", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/_k.so.1", b"text")])).build(), r"platform is 'any'"

    # RECORD/member agreement (existing rules, still true under hostile input).
    yield "member_not_in_record", GOOD_NAME, Archive(wheel_entries(PKG + [(EVIL, EVIL_DATA)], unlisted=(EVIL,))).build(), r"'evil\.pth' is not listed in RECORD"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300, **kw)


# Where --target puts the members of {name}-{version}.data/<scheme>/ (pip and uv agree).
DATA_SCHEMES = {"purelib": "", "platlib": "", "scripts": "bin/", "data": ""}


def record_files(whl: Path) -> set[str]:
    """The paths RECORD's list installs to, read by Python's zipfile as pip reads it."""
    import zipfile

    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(io.StringIO(z.read(name).decode("utf-8")))
        out = set()
        for r in rows:
            if not r:
                continue
            parts = r[0].split("/", 2)
            if len(parts) == 3 and parts[0].endswith(".data") and parts[1] in DATA_SCHEMES:
                out.add(DATA_SCHEMES[parts[1]] + parts[2])
            else:
                out.add(r[0])
        return out


def installed_files(target: Path) -> set[str]:
    out = set()
    for p in target.rglob("*"):
        if p.is_file() or p.is_symlink():
            rel = p.relative_to(target).as_posix()
            if rel.split("/")[0].endswith(".dist-info") and p.name in INSTALLER_OWN or rel in TARGET_OWN:
                continue
            out.add(rel)
    return out


def pip_install(python: str, whl: Path, target: Path, env: dict) -> subprocess.CompletedProcess:
    shutil.rmtree(target, ignore_errors=True)
    return run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "--disable-pip-version-check",
                "--target", str(target), str(whl)], env=env)


def uv_install(uv: str, python: str, whl: Path, target: Path, env: dict) -> subprocess.CompletedProcess:
    shutil.rmtree(target, ignore_errors=True)
    return run([uv, "pip", "install", "--no-deps", "--offline", "--no-config", "--python", python, "--target", str(target),
                str(whl)], env=env)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ffpa-index", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--python", default=sys.executable, help="interpreter whose pip installs the wheels")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, PIP_CACHE_DIR=str(work / "pip-cache"), UV_CACHE_DIR=str(work / "uv-cache"),
               PIP_CONFIG_FILE=os.devnull)
    uv = shutil.which("uv", path=str(Path(args.python).parent))
    print(f"pip: {run([args.python, '-m', 'pip', '--version']).stdout.strip()}")
    print(f"uv: {run([uv, '--version']).stdout.strip() if uv else 'not installed in the tool venv; uv comparison skipped'}")

    failures: list[str] = []
    seen = set()
    n_refused = n_accepted = 0
    for name, fname, data, expect in cases():
        assert name not in seen, f"duplicate case name {name}"
        seen.add(name)
        d = work / name
        d.mkdir()
        whl = d / fname
        whl.write_bytes(data)
        v = run([args.ffpa_index, "verify-wheel", str(whl)])
        out = v.stdout + v.stderr
        if v.returncode not in (0, 1) or re.search(r"internal|std::|bad_alloc|terminate|unexpected failure", out):
            failures.append(f"{name}: verify-wheel crashed or leaked an internal error (rc {v.returncode}):\n{out}")
            continue
        if v.returncode == 1:
            n_refused += 1
            shown = out.strip().splitlines()[1:2]
            print(f"[refused] {name}: {shown[0].strip() if shown else out.strip()}")
            if expect == "accept":
                failures.append(f"{name}: a valid wheel was refused:\n{out}")
            elif not re.search(expect, out):
                failures.append(f"{name}: refused, but the message does not match /{expect}/:\n{out}")
            # Evidence: what pip would have done with it.
            p = pip_install(args.python, whl, d / "pip", env)
            if p.returncode == 0:
                extra = installed_files(d / "pip") - record_files(whl) if data else set()
                print(f"          pip would install it{'; files beyond RECORD: ' + ', '.join(sorted(extra)) if extra else ''}")
            continue
        n_accepted += 1
        print(f"[accepted] {name}")
        if expect != "accept":
            failures.append(f"{name}: verify-wheel accepted a wheel it must refuse (/{expect}/)")
        listed = record_files(whl)
        p = pip_install(args.python, whl, d / "pip", env)
        if p.returncode != 0:
            failures.append(f"{name}: verify-wheel accepted it but pip cannot install it:\n{p.stdout}{p.stderr}")
        elif installed_files(d / "pip") != listed:
            got = installed_files(d / "pip")
            failures.append(f"{name}: pip installed {sorted(got - listed)} beyond RECORD and missed {sorted(listed - got)}")
        if uv:
            u = uv_install(uv, args.python, whl, d / "uv", env)
            if u.returncode != 0:
                failures.append(f"{name}: verify-wheel accepted it but uv cannot install it:\n{u.stdout}{u.stderr}")
            elif installed_files(d / "uv") != listed:
                got = installed_files(d / "uv")
                failures.append(f"{name}: uv installed {sorted(got - listed)} beyond RECORD and missed {sorted(listed - got)}")
    print(f"\n{len(seen)} crafted wheels: {n_refused} refused, {n_accepted} accepted and installed exactly as RECORD lists")
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for f in failures:
            print(" - " + f)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
