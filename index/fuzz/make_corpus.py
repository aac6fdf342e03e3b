#!/usr/bin/env python3
"""Regenerates the fuzz seed corpus under index/fuzz/corpus/ (committed).

    python3 index/fuzz/make_corpus.py --ffpa-index build/<tree>/bin/ffpa-index

Seeds are real files, so the fuzzers start from inputs that pass every check and
mutate from there:
  corpus/wheel/  wheels written by our own `ffpa-index pack` from a tiny tree: pure
                 (deflated, stored, ZIP64 records) and one manylinux wheel holding a
                 tiny .so. The names match what fuzz_wheel.cpp calls its input, so
                 each seed verifies clean. Used by the zip and the wheel target.
  corpus/zip/    zip features our writer never produces but other writers do (Python's
                 zipfile, as pip's own tooling would write them): directory entries,
                 a data descriptor, an archive comment, ZIP64 extra fields, an
                 unsupported method. Used by the zip target.
  corpus/elf/    tiny shared objects and an executable from the system C compiler,
                 with SONAME, DT_NEEDED, RUNPATH or RPATH and GLIBC version needs.
  corpus/wheel/crafted-*.whl  wheels written byte by byte by index/tests/craftzip.py,
                 one per class of name, RECORD and header defect the verifier refuses
                 (directory entries and rows, line boundaries, header case, trailing
                 whitespace, names that collide on another OS) plus two it accepts (a
                 quoted comma in a name, CRLF RECORD lines): mutations start on both
                 sides of each rule. --crafted-only rewrites just these.
regress-* files in these directories are fixed findings, kept as seeds; this
script leaves them alone.
Needs: cc (gcc or clang) and Python 3.8+ (standard library only).
"""
import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

EPOCH = "1700000000"
NAME, VERSION = "ffpa-fuzz", "1.0"

C_SOURCE = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
double ffpa_fuzz_cbrt(double x) { return cbrt(x); }
size_t ffpa_fuzz_len(const char* s) { return strlen(s); }
int ffpa_fuzz_print(const char* s) { return printf("%s\n", s); }
"""
MAIN_SOURCE = r"""
#include <stdio.h>
int main(int argc, char** argv) { return printf("%d %s\n", argc, argv[0]) < 0; }
"""
# Small outputs: no separate code segment, 4 KiB pages, symbols stripped (section
# headers stay, which read_elf needs), no build id (it would change every seed).
SMALL = ["-O2", "-s", "-Wl,-z,max-page-size=4096", "-Wl,-z,noseparate-code", "-Wl,--build-id=none"]


def run(cmd, **kw):
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f"make_corpus: {' '.join(map(str, cmd))} failed:\n{res.stdout}{res.stderr}")
    return res.stdout.strip()


def build_elves(cc, work, out):
    src = work / "seed.c"
    src.write_text(C_SOURCE)
    main = work / "main.c"
    main.write_text(MAIN_SOURCE)
    so = out / "libffpa_fuzz_runpath.so"
    run([cc, "-shared", "-fPIC", *SMALL, "-Wl,-soname,libffpa_fuzz.so.1", "-Wl,-rpath,$ORIGIN/lib:$ORIGIN/../ffpa_fuzz.libs",
         "-Wl,--enable-new-dtags", "-o", so, src, "-lm"])
    run([cc, "-shared", "-fPIC", *SMALL, "-Wl,-rpath,$ORIGIN", "-Wl,--disable-new-dtags",
         "-o", out / "libffpa_fuzz_rpath.so", src, "-lm"])
    run([cc, *SMALL, "-o", out / "ffpa_fuzz_exe", main])
    return so


def pack(ffpa_index, tree, meta, readme, out, tag, *extra):
    with tempfile.TemporaryDirectory() as d:
        whl = Path(run([ffpa_index, "pack", "--tree", tree, "--name", NAME, "--version", VERSION, "--tag", tag,
                        "--metadata", meta, "--readme", readme, "--out-dir", d, "--source-date-epoch", EPOCH,
                        *extra]))
        run([ffpa_index, "verify-wheel", whl])
        shutil.copyfile(whl, out)


def build_wheels(ffpa_index, so, work, out):
    tree = work / "tree"
    pkg = tree / "ffpa_fuzz"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Fuzz seed package."""\nfrom .core import answer\n__all__ = ["answer"]\n')
    (pkg / "core.py").write_text("def answer() -> int:\n    return 42\n" * 4)
    (pkg / "data" / "notes.txt").write_text("head dims 64 128 256 512, fp16 and bf16\n" * 8)
    (pkg / "py.typed").write_text("")
    meta = work / "meta.txt"
    meta.write_text("Summary: fuzz seed\nRequires-Python: >=3.10\nRequires-Dist: numpy>=1.24\n"
                    "License: BSD-3-Clause\nClassifier: Programming Language :: Python :: 3\n")
    readme = work / "README.md"
    readme.write_text("# ffpa-fuzz\n\nA seed wheel for the fuzzers.\n")
    pack(ffpa_index, tree, meta, readme, out / "pure.whl", "py3-none-any")
    pack(ffpa_index, tree, meta, readme, out / "pure-stored.whl", "py3-none-any", "--level", "0")
    pack(ffpa_index, tree, meta, readme, out / "pure-zip64.whl", "py3-none-any", "--test-zip64-threshold", "0")
    shutil.copyfile(so, pkg / "_ext.so")
    pack(ffpa_index, tree, meta, readme, out / "manylinux.whl", "py3-none-manylinux_2_17_x86_64")


def build_crafted(out):
    """Seeds named as fuzz_wheel.cpp names a pure input (ffpa_fuzz-1.0-py3-none-any)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from craftzip import Archive, wheel_entries  # noqa: E402 - the tests' byte-level writer

    pkg = [(b"ffpa_fuzz/__init__.py", b"x = 1\n"), (b"ffpa_fuzz/core.py", b"def f():\n    return 2\n")]
    meta = b"Metadata-Version: 2.1\nName: ffpa-fuzz\nVersion: 1.0\nSummary: crafted seed\n"
    wheel = b"Wheel-Version: 1.0\nGenerator: craftzip\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

    def seed(name, files=(), **kw):
        kw.setdefault("metadata", meta)
        ents = wheel_entries(pkg + list(files), name="ffpa_fuzz", version="1.0", **kw)
        (out / f"crafted-{name}.whl").write_bytes(Archive(ents).build())

    seed("dir-entry-and-row", [(b"nvidia/", b""), (b"nvidia/x.py", b"1\n")], record_extra="nvidia/,,\n")
    seed("record-splitlines", [(b"ffpa_fuzz/a\xe2\x80\xa8b.py", b"1\n")])
    seed("case-collision", [(b"ffpa_fuzz/Core.py", b"1\n")])
    seed("file-and-directory", [(b"ffpa_fuzz/x", b"1\n"), (b"ffpa_fuzz/x/y.py", b"2\n")])
    seed("device-name", [(b"ffpa_fuzz/con.py", b"1\n"), (b"ffpa_fuzz/a.", b"2\n")])
    seed("lowercase-name", metadata=meta.replace(b"Name: ffpa-fuzz", b"name: other"))
    seed("name-trailing-space", metadata=meta.replace(b"ffpa-fuzz\n", b"ffpa-fuzz \n"))
    seed("wheel-lowercase-keys", wheel=wheel.replace(b"Root-Is-Purelib", b"root-is-purelib"))
    seed("comma-name-accepted", [(b"ffpa_fuzz/a,b.py", b"1\n")])
    # The install rule (install_problems, wheel.h): each class once, and an accepted
    # entry point and PEP 639 pair beside them.
    di, data = b"ffpa_fuzz-1.0.dist-info/", b"ffpa_fuzz-1.0.data/"
    seed("entry-points", [(di + b"entry_points.txt", b"[console_scripts]\nffpa-x = ffpa_fuzz.core:f\n[gui_scripts]\n"
                           b"python3 = ffpa_fuzz.core:f\n../x = a:b\n")])
    seed("entry-point-accepted", [(di + b"entry_points.txt", b"[console_scripts]\nffpa-x = ffpa_fuzz.core:f\n")])
    seed("other-distribution", [(b"nvidia/cublas/__init__.py", b"1\n"), (data + b"purelib/torch/x.py", b"2\n")])
    seed("data-schemes", [(data + b"data/bin/python", b"1\n"), (data + b"scripts/pip", b"2\n"),
                          (data + b"purelib/ffpa_fuzz/ok.py", b"3\n")])
    seed("startup-hooks", [(b"x.pth", b"import os\n"), (b"sitecustomize.py", b"1\n"), (b"__editable__x.py", b"2\n")])
    seed("installer-files", [(di + b"direct_url.json", b"{}"), (di + b"INSTALLER", b"pip\n")])
    seed("requires-url", metadata=meta + b"Requires-Dist: x @ https://example.invalid/x.whl\nRequires-Dist: y[a]>=1\n")
    seed("pep639-accepted", [(di + b"licenses/LICENSE", b"MIT\n")],
         metadata=meta.replace(b"2.1", b"2.4") + b"License-Expression: MIT OR (Apache-2.0 WITH LLVM-exception)\n"
         b"License-File: LICENSE\n")
    seed("pep639", metadata=meta + b"License-Expression: MIT OR\nLicense-File: ../x\nDynamic: Summary\n")
    seed("wheel-version", wheel=wheel.replace(b"1.0", b"1.x"))
    ents = wheel_entries(pkg, name="ffpa_fuzz", version="1.0", metadata=meta)
    rec = ents[-1]
    ents[-1] = type(rec)(**{**rec.__dict__, "data": rec.data.replace(b"\n", b"\r\n")})
    (out / "crafted-crlf-record-accepted.whl").write_bytes(Archive(ents).build())


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def build_zips(out):
    when = (2023, 11, 14, 22, 13, 20)

    def info(name, method=zipfile.ZIP_DEFLATED):
        zi = zipfile.ZipInfo(name, when)
        zi.compress_type = method
        zi.external_attr = 0o644 << 16
        return zi

    with zipfile.ZipFile(out / "features.zip", "w") as z:
        z.comment = b"archive comment"
        z.writestr(info("pkg/", zipfile.ZIP_STORED), b"")
        z.writestr(info("pkg/a.txt"), b"alpha " * 40)
        z.writestr(info("pkg/b.bin", zipfile.ZIP_STORED), bytes(range(256)))
        z.writestr(info("pkg/caf\u00e9.txt"), "utf-8 name\n")
    with zipfile.ZipFile(out / "zip64.zip", "w") as z:
        with z.open(info("big.txt"), "w", force_zip64=True) as f:
            f.write(b"zip64 extra fields in both headers\n" * 8)
    with zipfile.ZipFile(out / "bzip2.zip", "w") as z:
        z.writestr(info("x.txt", zipfile.ZIP_BZIP2), b"a method the reader refuses\n" * 4)
    stream = Unseekable()
    with zipfile.ZipFile(stream, "w") as z:
        z.writestr(info("streamed.txt"), b"written with a data descriptor\n" * 4)
    (out / "data-descriptor.zip").write_bytes(bytes(stream.buf))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ffpa-index", type=Path, help="the ffpa-index binary (not needed with --crafted-only)")
    ap.add_argument("--cc", default="cc", help="C compiler for the ELF seeds (default: cc)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "corpus")
    ap.add_argument("--crafted-only", action="store_true", help="rewrite only corpus/wheel/crafted-*.whl")
    args = ap.parse_args()
    if args.crafted_only:
        (args.out / "wheel").mkdir(parents=True, exist_ok=True)
        build_crafted(args.out / "wheel")
        print("make_corpus: crafted seeds written")
        return
    # Files are overwritten in place: the regress-* seeds (fixed findings) beside
    # them are not this script's to remove.
    dirs = {k: args.out / k for k in ("wheel", "zip", "elf")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        so = build_elves(args.cc, work, dirs["elf"])
        build_wheels(args.ffpa_index.resolve(), so, work, dirs["wheel"])
    build_crafted(dirs["wheel"])
    build_zips(dirs["zip"])
    total = sum(f.stat().st_size for d in dirs.values() for f in d.iterdir())
    print(f"make_corpus: {sum(1 for d in dirs.values() for _ in d.iterdir())} seeds, {total} bytes in {args.out}")


if __name__ == "__main__":
    main()
