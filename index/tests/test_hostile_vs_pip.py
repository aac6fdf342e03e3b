#!/usr/bin/env python3
# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""Differential test of `ffpa-index verify-wheel` against pip (the tool venv's and
a pip 23.x), uv and Windows/macOS path semantics (Python's ntpath, case folding and
Unicode normalisation) on crafted wheels: the zip layer, claims, spellings,
METADATA, ELF against the tag, directory entries and RECORD rows, line and field
boundaries, header case, values with whitespace, names that collide on another OS.

Every case is a wheel written byte by byte by craftzip.py. The rule under test:
either verify-wheel refuses the wheel (exit 1, a message naming the problem), or
every installer (`pip install --no-deps --target`, both pips and uv) installs
exactly the files RECORD lists; and, in a venv that already holds a bystander
package with files under nvidia/, installing then uninstalling the wheel (pip and
uv) adds exactly its own files and removes exactly them again. Each case also
states which of the two we expect, and the refusal's message, so a weakened check
fails here even when pip happens to agree. For refused cases the log shows what
pip would have done with the wheel, as evidence of why it matters.

Names are also judged by an oracle built from the other operating systems' rules
(ntpath.isreserved/splitdrive/normpath of Python 3.13, str.casefold, NFC/NFD,
str.splitlines): whatever the oracle says another OS reads differently must be
refused, in the cases below and in a sweep of single names and name pairs; where
the engine is stricter than the oracle, the sweep says so and why.
"""

from __future__ import annotations

import concurrent.futures
import csv
import glob
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import types
import unicodedata
import zipfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from craftzip import SAT32, Archive, Entry, elf_header, record_digest, record_line, wheel_entries  # noqa: E402

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
    # Valid, flagged UTF-8, and still refused: macOS stores it decomposed (NFD), and
    # the oracle below shows the collisions case folding and normalisation make.
    yield "utf8_name_non_ascii", GOOD_NAME, Archive(wheel_entries(PKG + [("ffpa_attn/données.py".encode(), b"y = 1\n")])).build(), r"holds non-ASCII characters"
    yield "good_stored", GOOD_NAME, Archive([Entry(**{**e.__dict__, "method": 0}) for e in g]).build(), "accept"
    yield "good_data_dir", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn-1.0.0.data/purelib/ffpa_attn/extra_mod.py", b"y = 1\n"),
                                                                   (b"ffpa_attn-1.0.0.data/platlib/ffpa_attn/plat_mod.py", b"y = 2\n")])).build(), "accept"
    yield "good_pep639", GOOD_NAME, Archive(wheel_entries(
        PKG + [(b"ffpa_attn-1.0.0.dist-info/licenses/LICENSE", b"Apache\n")],
        metadata=META24 + b"License-Expression: apache-2.0 OR (MIT WITH llvm-exception)\nLicense-File: LICENSE\n")).build(), "accept"
    yield "good_entry_points", GOOD_NAME, Archive(wheel_entries(
        PKG + [(b"ffpa_attn-1.0.0.dist-info/entry_points.txt",
                b"[console_scripts]\nffpa-tool = ffpa_attn.core:f\n[gui_scripts]\nffpa-gui = ffpa_attn.core:f\n")])).build(), "accept"
    yield from install_cases()
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
    yield "directory_entry_with_data", GOOD_NAME, Archive(wheel_entries(PKG) + [Entry(b"ffpa_attn/sub/", b"data")]).build(), r"is a directory entry"

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
    yield from above_zip_cases()


DI = "ffpa_attn-1.0.0.dist-info"
META = b"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 1.0.0\nSummary: crafted\n"
WHEEL = b"Wheel-Version: 1.0\nGenerator: craftzip\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def record_of(files, meta=META, wheel=WHEEL, extra="", line=record_line) -> str:
    """RECORD text for `files` plus the .dist-info files, rows written by `line`."""
    out = "".join(line(n.decode("utf-8", "surrogateescape"), d) for n, d in files if not n.endswith(b"/"))
    return out + line(f"{DI}/METADATA", meta) + line(f"{DI}/WHEEL", wheel) + extra + f"{DI}/RECORD,,\n"


def above_zip_cases():
    """Names, RECORD and headers, above the zip layer (URLs and the site are in
    index/site/tests/site_urls.py)."""
    # Directory entries and RECORD rows naming directories. pip keeps such a
    # row and `pip uninstall` removes the directory, the bystander's files with it.
    nv = [(b"nvidia/", b""), (b"nvidia/ffpa_hook.py", b"x = 1\n")]
    yield "dir_entry_and_record_row_nvidia", GOOD_NAME, Archive(wheel_entries(PKG + nv, record_extra="nvidia/,,\n")).build(), r"'nvidia/' is a directory entry"
    yield "record_row_directory_nvidia", GOOD_NAME, Archive(wheel_entries(PKG, record_extra="nvidia/,,\n")).build(), r"RECORD lists 'nvidia/' which is not in the archive and is a directory entry"
    yield "record_row_directory_no_slash", GOOD_NAME, Archive(wheel_entries(PKG + [(b"nvidia/ffpa_hook.py", b"x = 1\n")], record_extra="nvidia,,\n")).build(), r"RECORD lists 'nvidia' which is not in the archive and is the directory of"
    yield "record_row_dot_spelling", GOOD_NAME, Archive(wheel_entries(PKG, record_extra="nvidia/.,,\n")).build(), r"RECORD lists 'nvidia/\.' which is not in the archive and has a '\.' component"
    yield "record_row_other_spelling_of_member", GOOD_NAME, Archive(wheel_entries(PKG, record_extra=record_line("ffpa_attn//core.py", PKG[1][1]))).build(), r"RECORD lists 'ffpa_attn//core\.py' which is not in the archive"
    yield "file_is_also_directory", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/x", b"1\n"), (b"ffpa_attn/x/y.py", b"2\n")])).build(), r"'ffpa_attn/x' is a file and also the directory"

    # Characters a line or field reader treats as a boundary.
    for label, ch in [("vt", "\x0b"), ("ff", "\x0c"), ("fs", "\x1c"), ("gs", "\x1d"), ("rs", "\x1e"), ("cr", "\r"),
                      ("nel", "\x85"), ("ls", "\u2028"), ("ps", "\u2029")]:
        name = f"ffpa_attn/a{ch}b.py".encode()
        yield f"name_splitlines_{label}", GOOD_NAME, Archive(wheel_entries(PKG + [(name, b"y = 1\n")])).build(), r"control character|non-ASCII"
        # The same character inside RECORD only (a field, not a name), where pip's
        # str.splitlines() makes two rows of one.
        rec = record_of(PKG).replace(f"{DI}/RECORD,,", f"{DI}/RECORD,,{ch}evil.pth,,")
        yield f"record_splitlines_{label}", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=rec)).build(), r"ends a line|fields, expected 3|not written as"
    quoted = record_of(PKG, line=lambda n, d: f'"{n}",{record_digest(d)},{len(d)}\n')
    yield "record_needless_quotes", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=quoted)).build(), r"not written as Python's csv module writes it"
    midquote = record_of(PKG).replace("ffpa_attn/core.py,", 'ffpa_attn/co"re.py",')
    yield "record_quote_inside_field", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=midquote)).build(), r"not written as Python's csv module|not listed in RECORD"
    yield "record_blank_line", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=record_of(PKG).replace("\n", "\n\n", 1))).build(), r"is empty"
    yield "record_four_fields", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=record_of(PKG).replace(f"{DI}/RECORD,,", f"{DI}/RECORD,,,"))).build(), r"4 fields, expected 3"
    unquoted_comma = record_of(PKG + [(b"ffpa_attn/a,b.py", b"y = 1\n")], line=lambda n, d: f"{n},{record_digest(d)},{len(d)}\n")
    yield "record_comma_unquoted", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/a,b.py", b"y = 1\n")], metadata=META, record=unquoted_comma)).build(), r"4 fields, expected 3"
    # Accepted: a comma in a name, quoted as csv writes it (pip and uv read it back),
    # and "\r\n" line ends (csv.writer's default).
    yield "good_comma_and_space_names", GOOD_NAME, Archive(wheel_entries(PKG + [(b"ffpa_attn/a,b.py", b"y = 1\n"), (b"ffpa_attn/c d.py", b"z = 1\n")])).build(), "accept"
    yield "good_record_crlf", GOOD_NAME, Archive(wheel_entries(PKG, metadata=META, record=record_of(PKG).replace("\n", "\r\n"))).build(), "accept"

    # Header names are case-insensitive (email.parser); uv reads WHEEL's
    # names exactly as PEP 427 spells them.
    def with_meta(m):
        return Archive(wheel_entries(PKG, metadata=m)).build()

    def with_wheel(w):
        return Archive(wheel_entries(PKG, wheel=w)).build()

    yield "metadata_lowercase_name_other", GOOD_NAME, with_meta(META.replace(b"Name: ffpa-attn", b"name: other")), r"METADATA Name 'other' does not match"
    yield "metadata_uppercase_version_other", GOOD_NAME, with_meta(META.replace(b"Version: 1.0.0", b"VERSION: 1.0.1")), r"METADATA Version '1\.0\.1' does not match"
    yield "metadata_name_twice_two_spellings", GOOD_NAME, with_meta(META + b"NAME: other\n"), r"'NAME' appears more than once \(also as 'Name'"
    yield "metadata_requires_python_twice", GOOD_NAME, with_meta(META + b"Requires-Python: >=3.10\nrequires-python: <3\n"), r"appears more than once"
    yield "good_metadata_lowercase_name", GOOD_NAME, with_meta(META.replace(b"Name: ffpa-attn", b"name: ffpa-attn")), "accept"
    yield "wheel_lowercase_wheel_version", GOOD_NAME, with_wheel(WHEEL.replace(b"Wheel-Version", b"wheel-version")), r"'wheel-version' must be spelled 'Wheel-Version'"
    yield "wheel_lowercase_root_is_purelib", GOOD_NAME, with_wheel(WHEEL.replace(b"Root-Is-Purelib", b"root-is-purelib")), r"must be spelled 'Root-Is-Purelib'"
    yield "wheel_purelib_twice", GOOD_NAME, with_wheel(WHEEL + b"Root-Is-Purelib: false\n"), r"'Root-Is-Purelib' appears more than once"
    yield "wheel_version_twice_two_spellings", GOOD_NAME, with_wheel(b"Wheel-Version: 1.0\nWHEEL-VERSION: 9.0\n" + WHEEL.split(b"\n", 1)[1]), r"must be spelled 'Wheel-Version'|appears more than once"
    yield "wheel_uppercase_tag", GOOD_NAME, with_wheel(WHEEL.replace(b"Tag:", b"TAG:")), r"must be spelled 'Tag'"

    # Values the installers do not strip: refused, not repaired.
    yield "metadata_name_trailing_space", GOOD_NAME, with_meta(META.replace(b"ffpa-attn\n", b"ffpa-attn \n")), r"\('Name'\) ends in whitespace"
    yield "metadata_name_trailing_tab", GOOD_NAME, with_meta(META.replace(b"ffpa-attn\n", b"ffpa-attn\t\n")), r"\('Name'\) ends in whitespace"
    yield "metadata_version_trailing_space", GOOD_NAME, with_meta(META.replace(b"1.0.0\n", b"1.0.0 \n")), r"\('Version'\) ends in whitespace"
    yield "metadata_name_u2028", GOOD_NAME, with_meta(META.replace(b"ffpa-attn\n", "ffpa-attn\u2028evil\n".encode())), r"U\+0085, U\+2028 or U\+2029"
    yield "wheel_version_trailing_space", GOOD_NAME, with_wheel(WHEEL.replace(b"1.0\n", b"1.0 \n")), r"\('Wheel-Version'\) ends in whitespace"
    yield "good_metadata_leading_blanks", GOOD_NAME, with_meta(META.replace(b"Name: ", b"Name:   \t")), "accept"

    # Dependency fields past the engine's bounds (index/core/include/ffpa/core/wheel.h,
    # docs/release.md "What a wheel may declare"): pip, uv, packaging and PyPI accept
    # them all, and every resolver that meets the wheel parses every line; refused.
    yield "metadata_requires_dist_10000", GOOD_NAME, with_meta(
        META + b"".join(b"Requires-Dist: dep%d>=1.0\n" % i for i in range(10000))), r"10000 Requires-Dist lines, over the \d+"
    yield "metadata_provides_extra_10000", GOOD_NAME, with_meta(
        META + b"".join(b"Provides-Extra: x%d\n" % i for i in range(10000))), r"10000 Provides-Extra lines, over the \d+"
    yield "metadata_requires_dist_200k_chars", GOOD_NAME, with_meta(
        META + b"Requires-Dist: numpy[" + b"x" * 200000 + b"]\n"), r"Requires-Dist 'numpy\[x+\.\.\.' is 200007 bytes long"

    # Names another OS installs differently (more in the sweep, NAME_SWEEP).
    for label, extra, msg in [
            ("case_only_duplicate", [(b"ffpa_attn/Core.py", b"z = 1\n")], r"differ only in case"),
            ("directory_two_cases", [(b"ffpa_attn/Sub/a.py", b"1\n"), (b"ffpa_attn/sub/b.py", b"2\n")], r"also spelled"),
            ("trailing_dot", [(b"ffpa_attn/core.py.", b"1\n")], r"ends in a dot or a space"),
            ("trailing_space_dir", [(b"ffpa_attn /x.py", b"1\n")], r"ends in a dot or a space"),
            ("drive_letter", [(b"C:/ffpa_evil.py", b"1\n")], r"contains ':'"),
            ("drive_relative", [(b"C:ffpa_evil.py", b"1\n")], r"contains ':'"),
            ("ntfs_stream", [(b"ffpa_attn/core.py:evil", b"1\n")], r"contains ':'"),
            ("device_con", [(b"ffpa_attn/con.py", b"1\n")], r"Windows device name"),
            ("device_nul_space_ext", [(b"ffpa_attn/NUL .tar.gz", b"1\n")], r"Windows device name"),
            ("device_com1_dir", [(b"ffpa_attn/com1/x.py", b"1\n")], r"Windows device name"),
            ("device_superscript", [("ffpa_attn/COM\u00b9.py".encode(), b"1\n")], r"non-ASCII"),
            ("windows_pipe", [(b"ffpa_attn/a|b.py", b"1\n")], r"contains '\|'"),
            ("windows_quote", [(b'ffpa_attn/a"b.py', b"1\n")], r"contains '\"'"),
            ("short_name_alias", [(b"FFPA_A~1/__init__.py", b"1\n")], r"8\.3 short name"),
            ("data_purelib_over_root", [(b"ffpa_attn-1.0.0.data/purelib/ffpa_attn/core.py", b"evil = 1\n")], r"install to the same file"),
            ("nfd_name", [("ffpa_attn/e\u0301.py".encode(), b"1\n")], r"non-ASCII"),
    ]:
        yield f"os_{label}", GOOD_NAME, Archive(wheel_entries(PKG + extra)).build(), msg
    yield "good_portable_names", GOOD_NAME, Archive(wheel_entries(PKG + [(f"ffpa_attn/{n}".encode(), b"v = 1\n") for n in PORTABLE])).build(), "accept"


# Names Windows, macOS and Linux read alike (the oracle agrees): accepted.
PORTABLE = ["console.py", "com10.py", "lpt10.txt", "conx.py", "auxiliary.py", "nul_.py", "prn-x.py", ".hidden",
            "x.tar.gz", "-dash.py", "x..y.py", "a b.py", "a;b=c#d%e&f!g.py", "a,b.py", "A_upper.py", "con_/x.py",
            "deep/er/still/ok.py", "space in/dir.py"]



# Each name alone under ffpa_attn/ (or at the top when it has a '/' of its own at
# the front), judged by the engine and by the oracle. `stricter`: the engine refuses
# what the oracle lets through, and why (index/README.md, "Member names").
NAME_SWEEP = [(n, None) for n in PORTABLE] + [
    (n, None) for n in [
        "con", "CON.py", "con.tar.gz", "nul .txt", "Aux", "prn.py", "com1", "COM9.txt", "lpt1", "LPT5.py", "conin$",
        "CONOUT$.txt", "com\u00b9", "lpt\u00b3.py", "a.", "a ", "dir./x.py", "dir /x.py", "a<b", "a>b", 'a"b', "a|b",
        "a?b", "a*b", "x:y", "a\\b.py", "donn\u00e9es.py", "e\u0301.py", "\u212a.py", "stra\u00dfe.py", "a\u2028b.py",
        "a\u0085b.py", "a\x1cb.py", "a\x0bb.py", "a\x0cb.py", "/C:x.py", "/C:/x.py", "/c:x", "sub/"]
] + [
    ("com0", "COM0 and LPT0 are device names on current Windows, beyond ntpath's list"),
    ("lpt0.txt", "COM0 and LPT0 are device names on current Windows, beyond ntpath's list"),
    ("/FFPA_A~1/x.py", "an 8.3 short name aliases a directory on volumes that keep them"),
    ("x~2.py", "an 8.3 short name form"),
    ("\u6570\u636e.py", "non-ASCII names are refused whole: the engine cannot reproduce every OS's folding tables"),
    ("a" * 256 + ".py", "longer than NAME_MAX (255 bytes) on Linux and macOS"),
]
# Pairs of names that are fine one by one.
PAIR_SWEEP = [
    (("ffpa_attn/Core.py", "ffpa_attn/core.py"), None),
    (("ffpa_attn/Sub/a.py", "ffpa_attn/sub/b.py"), None),
    (("ffpa_attn/x", "ffpa_attn/x/y.py"), None),
    (("ffpa_attn/X", "ffpa_attn/x/y.py"), None),
    (("ffpa_attn-1.0.0.data/purelib/ffpa_attn/core2.py", "ffpa_attn/core2.py"), None),
    (("ffpa_attn-1.0.0.data/platlib/ffpa_attn/Core3.py", "ffpa_attn/core3.py"), None),
    (("ffpa_attn/a.py", "ffpa_attn/b.py"), None),
    (("ffpa_attn-1.0.0.data/scripts/ffpa_attn", "ffpa_attn/x.py"),
     "a .data/scripts member installs into the environment's bin/: only where the project declares it"),
]


META24 = b"Metadata-Version: 2.4\nName: ffpa-attn\nVersion: 1.0.0\nSummary: crafted\nRequires-Python: >=3.10\n"
META21 = b"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 1.0.0\nSummary: crafted\nRequires-Python: >=3.10\n"
DI_B = b"ffpa_attn-1.0.0.dist-info/"
DATA_B = b"ffpa_attn-1.0.0.data/"
ENTRY = DI_B + b"entry_points.txt"
PWN = b"import os, pathlib; pathlib.Path(os.environ['FFPA_PWN_FILE']).write_text('ran')\n"


def install_cases():
    """What an accepted wheel would make the installers do (index/README.md, "What a
    wheel may install"). Each case's harm says how the venv round trip proves it:
    'refuses' (pip 25 or uv refuses the wheel), 'outside' (installing or uninstalling
    touches files not its own: the nvidia/ bystander, the venv's interpreter, a path
    outside the venv), 'startup' (the venv's interpreter runs the wheel's code at start),
    'fetch' (installing with dependencies makes pip fetch a URL the index never listed),
    'freeze' (pip freeze reports a direct URL install), 'packaging' (packaging.metadata,
    which twine and PyPI read it with, refuses it). usercustomize runs where the user
    site is on (outside a venv), so a venv cannot show it; nor can the pip/ and REQUESTED
    cases, nor tags uv and pip read alike; those stay refused as the README says."""
    def w(files, **kw):
        return Archive(wheel_entries(PKG + files, **kw)).build()
    eps = [(b"dotdot", b"../../ffpa_escape", r"not one plain file name", "outside"),
           (b"python3", b"python3", r"the name of the environment's interpreter", "outside"),
           (b"pip", b"pip", r"the name of the environment's interpreter, an installer", None)]
    for label, ep, msg, harm in eps:
        yield (f"install_entry_point_{label.decode()}", GOOD_NAME,
               w([(ENTRY, b"[console_scripts]\n" + ep + b" = ffpa_attn.core:f\n")]), msg, harm)
    yield "install_data_script_python3", GOOD_NAME, w([(DATA_B + b"scripts/python3", b"#!python\nprint(1)\n")]), r"scripts scheme", "outside"
    yield "install_data_bin_python", GOOD_NAME, w([(DATA_B + b"data/bin/python", b"#!/bin/sh\n")]), r"data scheme", "outside"
    yield "install_data_pyvenv_cfg", GOOD_NAME, w([(DATA_B + b"data/pyvenv.cfg", b"home = /tmp\n")]), r"data scheme", "outside"
    yield "install_other_dist_nvidia", GOOD_NAME, w([(b"nvidia/cublas/__init__.py", b"import os\n")]), r"does not own", "outside"
    yield "install_other_dist_pip", GOOD_NAME, w([(b"pip/__init__.py", b"")]), r"does not own", None
    yield "install_purelib_other_dist", GOOD_NAME, w([(DATA_B + b"purelib/nvidia/cublas/__init__.py", b"x\n")]), r"does not own", "outside"
    yield "install_pth", GOOD_NAME, w([(b"ffpa_zz.pth", PWN)]), r"a \.pth file", "startup"
    yield "install_pth_purelib", GOOD_NAME, w([(DATA_B + b"purelib/ffpa_zz.pth", PWN)]), r"a \.pth file", "startup"
    yield "install_sitecustomize", GOOD_NAME, w([(b"sitecustomize.py", PWN[:-1].replace(b"import os", b"import os") + b"\n")]), r"sitecustomize", "startup"
    yield "install_usercustomize_pkg", GOOD_NAME, w([(b"usercustomize/__init__.py", PWN)]), r"usercustomize", None
    yield "install_editable_finder", GOOD_NAME, w([(b"__editable___ffpa_attn_finder.py", b"x = 1\n"),
                                                  (b"__editable__.ffpa_attn-1.0.0.pth", b"import __editable___ffpa_attn_finder\n" + PWN)]), r"__editable__|\.pth file", "startup"
    yield "install_direct_url_json", GOOD_NAME, w([(DI_B + b"direct_url.json", b'{"url": "file:///home/someone/src/ffpa", "dir_info": {"editable": true}}')]), r"written by the installer", "freeze"
    yield "install_requested_installer", GOOD_NAME, w([(DI_B + b"INSTALLER", b"evil\n"), (DI_B + b"REQUESTED", b"")]), r"written by the installer", None
    for label, req in [("https", b"ffpa-evil @ https://example.invalid/ffpa_evil-1.0-py3-none-any.whl"),
                       ("file", b"ffpa-evil @ file:///tmp/ffpa_evil-1.0-py3-none-any.whl"),
                       ("git", b"ffpa-evil[x] @ git+https://example.invalid/evil.git")]:
        yield f"install_requires_url_{label}", GOOD_NAME, w([], metadata=META21 + b"Requires-Dist: " + req + b"\n"), r"names a direct URL", "fetch"
    for label, v in [("1x", b"1.x"), ("1dot", b"1."), ("2", b"2.0")]:
        yield (f"wheel_version_{label}", GOOD_NAME, w([], wheel=b"Wheel-Version: " + v + b"\nGenerator: craftzip\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
               r"Wheel-Version is", "refuses")
    yield "pep639_license_file_escape", GOOD_NAME, w([], metadata=META24 + b"License-File: ../../../etc/passwd\n"), r"License-File", "packaging"
    yield "pep639_license_file_missing", GOOD_NAME, w([], metadata=META24 + b"License-File: LICENSE\n"), r"License-File 'LICENSE' is not in the wheel", None
    yield "pep639_license_expression", GOOD_NAME, w([], metadata=META24 + b"License-Expression: Use-it-after-midnight\n"), r"not an SPDX license identifier", "packaging"
    yield "pep639_expression_syntax", GOOD_NAME, w([], metadata=META24 + b"License-Expression: MIT OR\n"), r"not an SPDX expression", "packaging"
    yield "dynamic_under_21", GOOD_NAME, w([], metadata=META21 + b"Dynamic: Summary\n"), r"a field of metadata 2\.2", "packaging"
    yield "tags_upper", "ffpa_attn-1.0.0-PY3-NONE-ANY.whl", w([], tag="PY3-NONE-ANY"), r"canonical form", None
    yield "tags_unsorted", "ffpa_attn-1.0.0-py3.py2-none-any.whl", w([], tag="py3.py2-none-any"), r"canonical form", None
    yield "tags_duplicate", "ffpa_attn-1.0.0-py3.py3-none-any.whl", w([], tag="py3.py3-none-any"), r"canonical form", None
    yield ("tags_any_and_platform", "ffpa_attn-1.0.0-py3-none-any.manylinux_2_17_x86_64.whl",
           w([], tag="py3-none-any.manylinux_2_17_x86_64"), r"combines 'any' with a platform", None)
    yield "build_tag_without_wheel_build", "ffpa_attn-1.0.0-1-py3-none-any.whl", w([]), r"build tag '1' is not WHEEL's Build", None


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, errors="replace", timeout=300, **kw)


# Where --target puts the members of {name}-{version}.data/<scheme>/ (pip and uv agree).
DATA_SCHEMES = {"purelib": "", "platlib": "", "scripts": "bin/", "data": ""}


def installed_path(member: str) -> str:
    parts = member.split("/", 2)
    if len(parts) == 3 and parts[0].endswith(".data") and parts[1] in DATA_SCHEMES:
        return DATA_SCHEMES[parts[1]] + parts[2]
    return member


def full_state(root: Path) -> dict[str, str]:
    """Files and symlinks under `root` (a venv's parent), symlinks by their target."""
    out = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def harm_shown(inst: Installer, template: Path, whl: Path, kind: str, python: str, env: dict) -> str | None:
    """Evidence that installing `whl` with `inst` does the harm `kind` (install_cases),
    or that `inst` refuses the wheel; None when neither shows."""
    outer = whl.parent / f"harm-{inst.label}"
    shutil.rmtree(outer, ignore_errors=True)
    venv = outer / "venv"
    shutil.copytree(template, venv, symlinks=True)
    if kind == "packaging":
        with zipfile.ZipFile(whl) as z:
            meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
        if inst.is_uv:
            return None  # one reading, said once
        r = run([python, "-c", "import sys\nfrom packaging.metadata import Metadata\ntry:\n"
                 "    Metadata.from_email(sys.stdin.read(), validate=True)\nexcept ExceptionGroup as e:\n"
                 "    sys.exit(str(e.exceptions[0]))"], input=meta.decode())
        return f"packaging.metadata refuses it: {r.stderr.strip()}" if r.returncode else None
    if kind == "fetch":
        r = run(inst.cmd + (["pip", "install", "--no-config", "--python", python, "--target", outer / "t", whl] if inst.is_uv
                            else ["-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--target", outer / "t", whl]),
                env={k: v for k, v in env.items() if k != "PIP_NO_INDEX"}, )
        out = r.stdout + r.stderr
        return f"{inst.label} goes for the dependency's URL: {next(l for l in out.splitlines() if 'evil' in l).strip()}" \
            if "ffpa_evil" in out or "example.invalid" in out else None
    before = full_state(outer)
    if kind == "freeze":  # by name from an index (a --find-links page): pip then writes no direct_url.json of its own
        r = run(inst.cmd + (["pip", "install", "--no-deps", "--offline", "--no-config", "--python", venv / "bin" / "python",
                             "--find-links", whl.parent, "ffpa-attn"] if inst.is_uv else
                            ["-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index",
                             "--disable-pip-version-check", "--find-links", whl.parent, "ffpa-attn"]), env=env)
    else:
        r = inst.venv_install(venv, whl, env)
    if r.returncode != 0:
        return f"{inst.label} refuses it"
    evidence = []
    after = full_state(outer)
    touched = sorted(k for k in before if after.get(k) != before[k])
    outside = sorted(k for k in set(after) - set(before) if not k.startswith("venv/"))
    if touched:
        evidence.append(f"{inst.label} install replaced {touched}")
    if outside:
        evidence.append(f"{inst.label} wrote outside the venv: {outside}")
    if kind == "startup":
        run([venv / "bin" / "python", "-c", "pass"], env=dict(env, FFPA_PWN_FILE=str(outer / "pwned")))
        if (outer / "pwned").exists():
            evidence.append("the venv's interpreter ran the wheel's code at start-up")
    if kind == "freeze":
        f = run(inst.cmd + (["pip", "freeze", "--python", venv / "bin" / "python"] if inst.is_uv
                            else ["-m", "pip", "--python", venv / "bin" / "python", "freeze"]), env=env)
        if "file:///home/someone" in f.stdout:
            evidence.append(f"{inst.label} freeze reports: {next(l for l in f.stdout.splitlines() if 'someone' in l)}")
    inst.venv_uninstall(venv, "ffpa-attn", env)
    gone = sorted(k for k in before if k not in full_state(outer))
    if gone:
        evidence.append(f"{inst.label} uninstall deleted {gone}")
    return "; ".join(evidence) or None


def record_files(whl: Path) -> set[str]:
    """The paths RECORD's list installs to, read by Python's zipfile as pip reads it."""
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(z.read(name).decode("utf-8").splitlines())
        return {installed_path(r[0]) for r in rows if r} | {"bin/" + s for s in entry_point_scripts(whl)}


def entry_point_scripts(whl: Path) -> set[str]:
    """The launchers pip and uv write into bin/ for the wheel's console and GUI scripts
    (importlib.metadata's reading of entry_points.txt)."""
    import importlib.metadata
    with zipfile.ZipFile(whl) as z:
        name = next((n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
        if name is None:
            return set()
        eps = importlib.metadata.EntryPoints._from_text(z.read(name).decode("utf-8"))
    return {e.name for e in eps if e.group in ("console_scripts", "gui_scripts")}


def installed_files(target: Path) -> set[str]:
    out = set()
    for p in target.rglob("*"):
        if p.is_file() or p.is_symlink():
            rel = p.relative_to(target).as_posix()
            if rel.split("/")[0].endswith(".dist-info") and p.name in INSTALLER_OWN or rel in TARGET_OWN:
                continue
            out.add(rel)
    return out


# --- the oracle: how Windows, macOS and pip's line reader see a set of names -------

NT_PROBE = r"""
import json, ntpath, sys
out = {}
for n in json.load(sys.stdin):
    w, r = n.replace("/", "\\"), []
    if "\\" in n: r.append("a backslash is a separator for ntpath")
    if ntpath.isreserved(w): r.append("ntpath.isreserved")
    if ntpath.splitdrive(w)[0]: r.append("ntpath.splitdrive: drive " + ntpath.splitdrive(w)[0])
    if ntpath.isabs(w): r.append("ntpath.isabs")
    if ntpath.normpath(w) != w: r.append("ntpath.normpath reads " + ntpath.normpath(w))
    out[n] = r
json.dump(out, sys.stdout)
"""


class Oracle:
    """Python's own readings of member names; `python313` runs ntpath.isreserved
    (new in Python 3.13), the rest runs here."""

    def __init__(self, python313: str):
        self.python313 = python313
        self.nt: dict[str, list[str]] = {}

    def prime(self, names):
        todo = sorted({n for n in names if n not in self.nt})
        if todo:
            r = subprocess.run([self.python313, "-c", NT_PROBE], input=json.dumps(todo), capture_output=True, text=True,
                               check=True)
            self.nt.update(json.loads(r.stdout))

    def reasons(self, names: list[str]) -> list[str]:
        self.prime(names)
        out = []
        for n in names:
            why = list(self.nt[n])
            if len(("x" + n + "x").splitlines()) > 1:
                why.append("str.splitlines splits it (pip's RECORD reader)")
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in n):
                why.append("a control character")
            if unicodedata.normalize("NFD", n) != unicodedata.normalize("NFC", n) or n != unicodedata.normalize("NFC", n):
                why.append("NFC and NFD differ (macOS stores NFD)")
            if n.casefold() != n.lower():
                why.append(f"case folding changes it ({n.casefold()!r})")
            if n.endswith("/"):
                why.append("a directory entry (pathlib drops the '/', pip uninstall removes the directory)")
            out += [f"{n!r}: {w}" for w in why]
        # As a set: one file on case-insensitive, normalising systems, or one install path.
        seen: dict[str, str] = {}
        dirs: dict[str, str] = {}
        for n in names:
            key = unicodedata.normalize("NFC", installed_path(n)).casefold()
            if key in seen:
                out.append(f"{seen[key]!r} and {n!r} are one file on Windows/macOS or install to one place")
            seen[key] = n
            parts = installed_path(n).split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                k = unicodedata.normalize("NFC", d).casefold()
                if k in dirs and dirs[k] != d:
                    out.append(f"directory {dirs[k]!r} also spelled {d!r}")
                dirs.setdefault(k, d)
        out += [f"{seen[k]!r} is a file and a directory" for k in seen if k in dirs]
        return out


def find_python313() -> str:
    if sys.version_info >= (3, 13):
        return sys.executable
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
    for c in [shutil.which("python3.13")] + [p for r in roots if r for p in sorted(glob.glob(f"{r}/versions/3.13*/bin/python3.13"))]:
        if c and subprocess.run([c, "-c", "import ntpath; ntpath.isreserved"], capture_output=True).returncode == 0:
            return c
    sys.exit("hostile_wheels: needs a Python 3.13 (ntpath.isreserved) for the Windows oracle: install it (pyenv "
             "install 3.13) or put python3.13 on PATH")


def member_names(data: bytes) -> list[str] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return [i.filename if not i.is_dir() else i.filename for i in z.infolist()]
    except Exception:  # noqa: BLE001 - a zip-layer case: the names are not the point
        return None


# --- installers --------------------------------------------------------------------

def old_pip_pin(requirements: Path) -> list[str]:
    """The second pip's pin, from tools/requirements.txt ("# pip-old: pip==X --hash=...")."""
    for line in requirements.read_text().splitlines():
        if line.startswith("# pip-old: "):
            return line[len("# pip-old: "):].split()
    sys.exit(f"hostile_wheels: no '# pip-old:' line in {requirements}")


def ensure_old_pip(base_python: str, cache: Path, requirements: Path) -> str:
    """A venv holding the pinned pip 23.x, made once per build tree and reused."""
    pin = old_pip_pin(requirements)
    py = cache / "bin" / "python"
    stamp = cache / ".pin"
    if not (py.exists() and stamp.exists() and stamp.read_text() == " ".join(pin)):
        shutil.rmtree(cache, ignore_errors=True)
        r = run([base_python, "-m", "venv", cache])
        if r.returncode != 0:
            sys.exit(f"hostile_wheels: cannot create {cache}: {r.stderr}")
        req = cache / "requirements.txt"
        req.write_text(" ".join(pin) + "\n")
        r = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--require-hashes", "-r", req],
                env=dict(os.environ, PIP_NO_INDEX="0"))
        if r.returncode != 0:
            sys.exit(f"hostile_wheels: cannot install {pin[0]} into {cache} (PyPI needed once): {r.stdout}{r.stderr}")
        stamp.write_text(" ".join(pin))
    return str(py)


class Installer:
    """One installer: pip of a given interpreter, or uv."""

    def __init__(self, label: str, cmd: list[str], is_uv: bool):
        self.label, self.cmd, self.is_uv = label, cmd, is_uv

    def target(self, whl: Path, target: Path, python: str, env: dict) -> subprocess.CompletedProcess:
        shutil.rmtree(target, ignore_errors=True)
        if self.is_uv:
            return run(self.cmd + ["pip", "install", "--no-deps", "--offline", "--no-config", "--python", python,
                                   "--target", target, whl], env=env)
        return run(self.cmd + ["-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
                               "--disable-pip-version-check", "--target", target, whl], env=env)

    def venv_install(self, venv: Path, whl: Path, env: dict, *extra) -> subprocess.CompletedProcess:
        if self.is_uv:
            return run(self.cmd + ["pip", "install", "--no-deps", "--offline", "--no-config", "--python",
                                   venv / "bin" / "python", *extra, whl], env=env)
        return run(self.cmd + ["-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index",
                               "--no-compile", "--disable-pip-version-check", *extra, whl], env=env)

    def venv_uninstall(self, venv: Path, project: str, env: dict) -> subprocess.CompletedProcess:
        if self.is_uv:
            return run(self.cmd + ["pip", "uninstall", "--offline", "--no-config", "--python", venv / "bin" / "python",
                                   project], env=env)
        return run(self.cmd + ["-m", "pip", "--python", venv / "bin" / "python", "uninstall", "-y",
                               "--disable-pip-version-check", project], env=env)


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


BYSTANDER = [(b"nvidia/cublas/__init__.py", b""), (b"nvidia/cublas/lib/libcublas.so.12.txt", b"not really cuBLAS\n"),
             (b"nvidia/cuda_runtime/include/cuda.h", b"/* bystander */\n")]


def bystander_wheel(d: Path) -> Path:
    ents = wheel_entries(BYSTANDER, name="nvidia_bystander", version="12.0")
    meta = b"Metadata-Version: 2.1\nName: nvidia-bystander\nVersion: 12.0\n"
    ents = wheel_entries(BYSTANDER, name="nvidia_bystander", version="12.0", metadata=meta)
    whl = d / "nvidia_bystander-12.0-py3-none-any.whl"
    whl.write_bytes(Archive(ents).build())
    return whl


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3.*")) / "site-packages"


def venv_expected(venv: Path, whl: Path) -> set[str]:
    """Where the wheel's RECORD puts each file in `venv` (paths relative to it)."""
    sp = site_packages(venv).relative_to(venv).as_posix()
    out = set()
    for m in record_files_raw(whl):
        parts = m.split("/", 2)
        if len(parts) == 3 and parts[0].endswith(".data") and parts[1] in ("scripts", "data"):
            out.add(("bin/" if parts[1] == "scripts" else "") + parts[2])
        else:
            out.add(f"{sp}/{installed_path(m)}")
    return out | {"bin/" + s for s in entry_point_scripts(whl)}


def record_files_raw(whl: Path) -> list[str]:
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        return [r[0] for r in csv.reader(z.read(name).decode("utf-8").splitlines()) if r]


def uninstall_round_trip(inst: Installer, venv: Path, whl: Path, env: dict, base: dict[str, str]) -> str | None:
    """Install then uninstall `whl` in `venv`; None when it added exactly its own files
    and removed exactly them (the bystander untouched), else what went wrong."""
    r = inst.venv_install(venv, whl, env)
    if r.returncode != 0:
        return f"install failed: {r.stdout}{r.stderr}"
    after = snapshot(venv)
    added = set(after) - set(base)
    changed = sorted(k for k in base if k in after and after[k] != base[k])
    want = venv_expected(venv, whl)
    own = {p for p in added - want if p.split("/")[-2].endswith(".dist-info") and p.split("/")[-1] in INSTALLER_OWN}
    problems = []
    if changed:
        problems.append(f"install changed files it does not own: {changed}")
    if want - added:
        problems.append(f"install missed {sorted(want - added)}")
    if added - want - own:
        problems.append(f"install added files beyond RECORD: {sorted(added - want - own)}")
    u = inst.venv_uninstall(venv, "ffpa-attn", env)
    if u.returncode != 0:
        problems.append(f"uninstall failed: {u.stdout}{u.stderr}")
    now = snapshot(venv)
    if now != base:
        gone = sorted(set(base) - set(now))
        left = sorted(set(now) - set(base))
        problems.append(f"after uninstall: removed {gone} (bystander or other files), left {left}")
    return "; ".join(problems) or None


def make_venv(base_python: str, d: Path, inst: Installer, env: dict, bystander: Path) -> dict[str, str]:
    shutil.rmtree(d, ignore_errors=True)
    r = run([base_python, "-m", "venv", "--without-pip", d])
    if r.returncode != 0:
        sys.exit(f"hostile_wheels: cannot create {d}: {r.stderr}")
    r = inst.venv_install(d, bystander, env)
    if r.returncode != 0:
        sys.exit(f"hostile_wheels: {inst.label} cannot install the bystander: {r.stdout}{r.stderr}")
    return snapshot(d)


def test_hostile_vs_pip(ffpa_env, work):
    """Every crafted wheel: refused as expected, or installed exactly as RECORD lists by
    every installer. $FFPA_OLD_PIP_VENV keeps the pip 23.x venv between runs;
    $FFPA_ONLY (a regex) runs only the matching cases, without the sweep and the venvs."""
    args = types.SimpleNamespace(
        ffpa_index=ffpa_env("INDEX"), python=sys.executable, old_pip_venv=os.environ.get("FFPA_OLD_PIP_VENV"),
        only=os.environ.get("FFPA_ONLY"), requirements=str(Path(__file__).resolve().parents[2] / "tools" / "requirements.txt"))
    started = time.monotonic()
    env = dict(os.environ, PIP_CACHE_DIR=str(work / "pip-cache"), UV_CACHE_DIR=str(work / "uv-cache"),
               PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")
    uv = shutil.which("uv", path=str(Path(args.python).parent))
    if not uv:
        sys.exit("hostile_wheels: uv is not installed in the tool venv; run tools/bootstrap")
    old_pip = ensure_old_pip(args.python, Path(args.old_pip_venv or str(work) + "-pip-old"), Path(args.requirements))
    installers = [Installer("pip", [args.python], False), Installer("pip-old", [old_pip], False), Installer("uv", [uv], True)]
    for i in installers:
        v = run(i.cmd + (["--version"] if i.is_uv else ["-m", "pip", "--version"]))
        print(f"{i.label}: {v.stdout.strip()}")
    oracle = Oracle(find_python313())
    print(f"oracle: ntpath of {oracle.python313}")

    failures: list[str] = []
    seen = set()
    accepted: list[tuple[str, Path]] = []
    evidence: list[tuple[str, Path]] = []
    n_refused = 0

    def verify(whl: Path):
        v = run([args.ffpa_index, "verify-wheel", whl])
        out = v.stdout + v.stderr
        if v.returncode not in (0, 1) or re.search(r"internal|std::|bad_alloc|terminate|unexpected failure", out):
            return None, out
        return v.returncode == 1, out

    harms: dict[str, str] = {}
    for case in cases():
        name, fname, data, expect = case[:4]
        if len(case) > 4 and case[4]:
            harms[name] = case[4]
        assert name not in seen, f"duplicate case name {name}"
        if args.only and not re.search(args.only, name):
            continue
        seen.add(name)
        d = work / name
        d.mkdir()
        whl = d / fname
        whl.write_bytes(data)
        refused, out = verify(whl)
        if refused is None:
            failures.append(f"{name}: verify-wheel crashed or leaked an internal error:\n{out}")
            continue
        names = member_names(data)
        why_os = oracle.reasons(names) if names is not None else []
        if refused:
            n_refused += 1
            shown = out.strip().splitlines()[1:2]
            print(f"[refused] {name}: {shown[0].strip() if shown else out.strip()}")
            if expect == "accept":
                failures.append(f"{name}: a valid wheel was refused:\n{out}")
            elif not re.search(expect, out):
                failures.append(f"{name}: refused, but the message does not match /{expect}/:\n{out}")
            if why_os:
                print(f"          oracle: {why_os[0]}")
            evidence.append((name, whl))
            continue
        print(f"[accepted] {name}")
        if expect != "accept":
            failures.append(f"{name}: verify-wheel accepted a wheel it must refuse (/{expect}/)")
        if why_os:
            failures.append(f"{name}: verify-wheel accepted names another OS reads otherwise: {why_os}")
        accepted.append((name, whl))
        listed = record_files(whl)
        for inst in installers:
            p = inst.target(whl, d / inst.label, args.python, env)
            if p.returncode != 0:
                failures.append(f"{name}: verify-wheel accepted it but {inst.label} cannot install it:\n{p.stdout}{p.stderr}")
            elif installed_files(d / inst.label) != listed:
                got = installed_files(d / inst.label)
                failures.append(f"{name}: {inst.label} installed {sorted(got - listed)} beyond RECORD and missed {sorted(listed - got)}")

    phases = {"cases": time.monotonic() - started}
    # Evidence: what pip would have done with each refused wheel (in parallel: each
    # pip run is mostly interpreter start-up).
    def pip_would(item):
        name, whl = item
        p = installers[0].target(whl, whl.parent / "pip", args.python, env)
        if p.returncode != 0:
            return f"[evidence] {name}: pip refuses it too"
        extra = installed_files(whl.parent / "pip") - record_files(whl)
        return f"[evidence] {name}: pip would install it{'; files beyond RECORD: ' + ', '.join(sorted(extra)) if extra else ''}"

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for line in pool.map(pip_would, evidence):
            print(line)
    phases["evidence"] = time.monotonic() - started - sum(phases.values())
    if args.only:
        assert not failures, "\n".join(failures)
        return
    # The sweep: single names and pairs, engine against oracle.
    sweep_dir = work / "sweep"
    sweep_dir.mkdir()
    n_sweep = 0
    for names, stricter in [([n if n.startswith("/") else "ffpa_attn/" + n], s) for n, s in NAME_SWEEP] + \
                           [(list(p), s) for p, s in PAIR_SWEEP]:
        names = [n.lstrip("/") for n in names]
        n_sweep += 1
        whl = sweep_dir / str(n_sweep) / GOOD_NAME
        whl.parent.mkdir()
        files = [(n.encode(), b"v = 1\n") for n in names]
        whl.write_bytes(Archive(wheel_entries(PKG + files)).build())
        refused, out = verify(whl)
        why_os = oracle.reasons([n.decode() for n, _ in PKG + files])
        shown = ascii(names)
        if refused is None:
            failures.append(f"sweep {shown}: verify-wheel crashed:\n{out}")
        elif why_os and not refused:
            failures.append(f"sweep {shown}: accepted, but {why_os}")
        elif not why_os and refused and not stricter:
            failures.append(f"sweep {shown}: refused, yet every OS reads it alike:\n{out}")
        elif not why_os and not refused and stricter:
            failures.append(f"sweep {shown}: expected the engine's stricter refusal ({stricter}); accepted")
        elif refused and not why_os:
            print(f"[sweep] {shown}: refused, stricter than the oracle: {stricter}")
        else:
            print(f"[sweep] {shown}: {'refused: ' + why_os[0] if refused else 'accepted by both'}")

    phases["sweep"] = time.monotonic() - started - sum(phases.values())
    # Install and uninstall every accepted wheel beside a bystander under nvidia/.
    by = bystander_wheel(work)
    for inst in installers:
        venv = work / f"venv-{inst.label}"
        base = make_venv(args.python, venv, inst, env, by)
        for name, whl in accepted:
            problem = uninstall_round_trip(inst, venv, whl, env, base)
            if problem:
                failures.append(f"{name}: {inst.label} install + uninstall in a venv: {problem}")
        print(f"[venv] {inst.label}: {len(accepted)} accepted wheels installed and uninstalled beside the nvidia/ bystander")
    # Evidence for class 2: what pip's uninstall does with a directory row.
    venv = work / "venv-pip"
    base = snapshot(venv)
    for name in ("dir_entry_and_record_row_nvidia", "record_row_directory_nvidia"):
        whl = work / name / GOOD_NAME
        problem = uninstall_round_trip(installers[0], venv, whl, env, base)
        print(f"[evidence] {name} installed by pip anyway: {problem or 'no harm'}")
        installers[0].venv_install(venv, by, env, "--force-reinstall")
        installers[0].venv_uninstall(venv, "ffpa-attn", env)

    phases["venvs"] = time.monotonic() - started - sum(phases.values())
    # Each refused install case, with pip 25 and uv in a copy of a venv holding the
    # bystander: what the wheel would have done (install_cases).
    template = work / "venv-harm"
    make_venv(args.python, template, installers[0], env, by)
    files = {c[0]: c[1] for c in cases()}

    def harm(item):
        name, kind = item
        return name, kind, [e for e in (harm_shown(inst, template, work / name / files[name], kind, args.python, env)
                                        for inst in (installers[0], installers[2])) if e]

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for name, kind, shown in pool.map(harm, sorted(i for i in harms.items() if i[0] in seen)):
            if shown:
                print(f"[harm] {name}: {'; '.join(shown)}")
            else:
                failures.append(f"{name}: refused, but neither pip 25 nor uv shows the harm '{kind}' it is refused for")
    phases["harm"] = time.monotonic() - started - sum(phases.values())

    print(f"\n{len(seen)} crafted wheels: {n_refused} refused, {len(accepted)} accepted and installed exactly as RECORD "
          f"lists by {', '.join(i.label for i in installers)} (and uninstalled exactly); {n_sweep} names/pairs swept "
          f"against the oracle; {time.monotonic() - started:.0f} s (" +
          ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()) + ")")
    assert not failures, f"{len(failures)} failure(s):\n" + "\n".join(" - " + f for f in failures)
