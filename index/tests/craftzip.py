# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
"""Writes zip archives byte by byte, including the ones no zip library would write:
local headers that disagree with the central directory, forged sizes, extra
central entries, prepended or appended bytes, broken ZIP64 records. The hostile
wheel tests build every input with this, so no binary fixture is committed."""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import hashlib
import struct
import zlib

SAT32 = 0xFFFFFFFF


@dataclasses.dataclass
class Entry:
    """One member. Fields left None take the value a correct writer would use;
    the l* fields override the local header only, the c* fields the central entry only."""

    name: bytes
    data: bytes = b""
    method: int = 8
    flags: int | None = None  # default: 0x800 when the name is not ASCII
    raw: bytes | None = None  # compressed bytes as stored (default: from data and method)
    zip64: bool = False  # sizes in ZIP64 extra fields (local and central)
    lname: bytes | None = None
    lflags: int | None = None
    lmethod: int | None = None
    lcrc: int | None = None
    lsizes: tuple[int, int] | None = None  # (compressed, uncompressed) in the local header
    csizes: tuple[int, int] | None = None  # (compressed, uncompressed) in the central entry
    ccrc: int | None = None
    lextra: bytes = b""
    cextra: bytes = b""
    coffset: int | None = None  # local header offset written in the central entry
    external_attr: int = (0o100644 << 16)

    def stored_bytes(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.method == 8:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            return c.compress(self.data) + c.flush()
        return self.data

    def flag_bits(self) -> int:
        if self.flags is not None:
            return self.flags
        return 0x800 if any(b >= 0x80 for b in self.name) else 0


def local_record(e: Entry, raw: bytes) -> bytes:
    crc = zlib.crc32(e.data) if e.lcrc is None else e.lcrc
    csize, usize = e.lsizes if e.lsizes is not None else (len(raw), len(e.data))
    name = e.name if e.lname is None else e.lname
    extra = e.lextra
    if e.zip64:
        extra = struct.pack("<HHQQ", 1, 16, usize, csize) + extra
        csize = usize = SAT32
    return struct.pack(
        "<IHHHHHIIIHH",
        0x04034B50,
        45 if e.zip64 else 20,
        e.flag_bits() if e.lflags is None else e.lflags,
        e.method if e.lmethod is None else e.lmethod,
        0,
        0x21,  # 1980-01-01
        crc,
        csize,
        usize,
        len(name),
        len(extra),
    ) + name + extra + raw


def central_record(e: Entry, raw: bytes, offset: int) -> bytes:
    crc = zlib.crc32(e.data) if e.ccrc is None else e.ccrc
    csize, usize = e.csizes if e.csizes is not None else (len(raw), len(e.data))
    offset = offset if e.coffset is None else e.coffset
    extra = e.cextra
    if e.zip64:
        extra = struct.pack("<HHQQ", 1, 16, usize, csize) + extra
        csize = usize = SAT32
    return struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        (3 << 8) | 45,
        45 if e.zip64 else 20,
        e.flag_bits(),
        e.method,
        0,
        0x21,
        crc,
        csize,
        usize,
        len(e.name),
        len(extra),
        0,
        0,
        0,
        e.external_attr,
        offset,
    ) + e.name + extra


@dataclasses.dataclass
class Archive:
    entries: list[Entry]
    hidden: list[Entry] = dataclasses.field(default_factory=list)  # in the directory, beyond the count
    prepend: bytes = b""
    shift_offsets: bool = False  # offsets counted from the prepended bytes' end (Python's "concat")
    gap_after_first: bytes = b""  # bytes between the first member and the second
    append: bytes = b""
    comment: bytes = b""
    count: int | None = None  # entries claimed by the end record
    zip64_end: bool = False
    zip64_count: int | None = None  # claim in the ZIP64 end record
    zip64_locator_offset: int | None = None

    def build(self) -> bytes:
        out = bytearray(self.prepend)
        base = 0 if self.shift_offsets else len(self.prepend)
        central = bytearray()
        for i, e in enumerate(self.entries + self.hidden):
            raw = e.stored_bytes()
            offset = len(out) - base
            out += local_record(e, raw)
            central += central_record(e, raw, offset)
            if i == 0:
                out += self.gap_after_first
        cd_offset = len(out) - base
        out += central
        count = len(self.entries) if self.count is None else self.count
        if self.zip64_end:
            z64_at = len(out) - base
            n64 = count if self.zip64_count is None else self.zip64_count
            out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, (3 << 8) | 45, 45, 0, 0, n64, n64, len(central), cd_offset)
            loc = z64_at if self.zip64_locator_offset is None else self.zip64_locator_offset
            out += struct.pack("<IIQI", 0x07064B50, 0, loc, 1)
            out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, SAT32, SAT32, len(self.comment))
        else:
            out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), cd_offset, len(self.comment))
        out += self.comment + self.append
        return bytes(out)


def record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def csv_line(*fields) -> str:
    """One RECORD row as Python's csv module writes it (minimal quoting, '\\n')."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    return out.getvalue()


def record_line(name: str, data: bytes) -> str:
    return csv_line(name, record_digest(data), len(data))


METADATA = "Metadata-Version: 2.1\nName: ffpa-attn\nVersion: {version}\nSummary: crafted\nRequires-Python: >=3.10\n"


def wheel_entries(
    files: list[tuple[bytes, bytes]],
    *,
    name: str = "ffpa_attn",
    version: str = "1.0.0",
    tag: str = "py3-none-any",
    metadata: bytes | None = None,
    wheel: bytes | None = None,
    record_extra: str = "",
    unlisted: tuple[bytes, ...] = (),
    record: str | None = None,
) -> list[Entry]:
    """A wheel's entries: `files`, then METADATA, WHEEL and RECORD (listing every
    file except those in `unlisted`, plus `record_extra` lines; or `record` as is).
    A name ending in '/' is a directory entry."""
    di = f"{name}-{version}.dist-info"
    meta = metadata if metadata is not None else METADATA.format(version=version).encode()
    purelib = "true" if tag.endswith("-any") else "false"
    if wheel is None:
        wheel = f"Wheel-Version: 1.0\nGenerator: craftzip\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n".encode()
    if record is None:
        record = ""
        for n, d in files:
            if n not in unlisted and not n.endswith(b"/"):
                record += record_line(n.decode("utf-8", "surrogateescape"), d)
        record += record_line(f"{di}/METADATA", meta) + record_line(f"{di}/WHEEL", wheel) + record_extra
        record += f"{di}/RECORD,,\n"
    entries = [Entry(n, d, external_attr=(0o40755 << 16) | 0x10) if n.endswith(b"/") else Entry(n, d) for n, d in files]
    entries += [Entry(f"{di}/METADATA".encode(), meta), Entry(f"{di}/WHEEL".encode(), wheel),
                Entry(f"{di}/RECORD".encode(), record.encode("utf-8", "surrogateescape"))]
    return entries


def elf_header(elf_class: int = 2, data: int = 1, machine: int = 62) -> bytes:
    """The first 64 bytes of an ELF shared object: enough for a machine check."""
    ident = b"\x7fELF" + bytes([elf_class, data, 1, 0]) + bytes(8)
    order = "<" if data == 1 else ">"
    rest = struct.pack(order + "HHI", 3, machine, 1)  # ET_DYN, e_machine, EV_CURRENT
    return (ident + rest).ljust(64, b"\0")
