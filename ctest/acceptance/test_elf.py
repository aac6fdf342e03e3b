"""Read the ELF files of every CUDA wheel in a dist directory, as a reviewer would.

For each CUDA wheel named in DIST/ffpa-release-manifest.json:
  - RUNPATH/RPATH of every shared object is $ORIGIN-relative only (patchelf);
  - DT_NEEDED names only the manylinux whitelist or libraries shipped in the wheel;
  - no build-tree or source-tree path appears anywhere in a shipped binary;
  - the platform tag in the file name equals what `auditwheel show` computes.

Inputs: $FFPA_DIST, and $FFPA_FORBID (os.pathsep-separated paths no binary may hold).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import ffpa_manifest  # the shared manifest reader

# Libraries every manylinux policy allows (PEP 600 / auditwheel's whitelist).
WHITELIST = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
    "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "libutil.so.1",
    "libnsl.so.1", "libcrypt.so.1", "libz.so.1", "libexpat.so.1",
    "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6",
    "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
}


def sh(cmd: list[str]) -> str:
    r = subprocess.run(cmd, text=True, capture_output=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    return r.stdout


def test_cuda_wheels_elf(ffpa_env, work):
    dist = Path(ffpa_env("DIST"))
    forbid = [f for f in os.environ.get("FFPA_FORBID", "").split(os.pathsep) if f]
    auditwheel = str(Path(sys.executable).parent / "auditwheel")
    manifest = ffpa_manifest.load(dist / "ffpa-release-manifest.json")
    cuda = [w for w in manifest["wheels"] if w["kind"] == "cuda"]
    assert cuda, f"no CUDA wheel in {dist}/ffpa-release-manifest.json"
    failures: list[str] = []
    klib_hashes = set()
    for w in cuda:
        whl = dist / w["file"]
        out = work / w["file"]
        with zipfile.ZipFile(whl) as z:
            z.extractall(out)
            k = z.getinfo("ffpa_attn/libffpa_kernels.so")
            if (w.get("kernel_library_size"), w.get("kernel_library_compressed_size")) != (k.file_size, k.compress_size):
                failures.append(f"{w['file']}: manifest kernel library sizes "
                                f"{w.get('kernel_library_size')}/{w.get('kernel_library_compressed_size')} != "
                                f"zip {k.file_size}/{k.compress_size}")
        sos = sorted(p for p in out.rglob("*.so*") if p.is_file())
        shipped = {p.name for p in sos}
        print(f"{w['file']}: {', '.join(str(p.relative_to(out)) for p in sos)}")
        for so in sos:
            rpath = sh(["patchelf", "--print-rpath", str(so)]).strip()
            for entry in filter(None, rpath.split(":")):
                if not entry.startswith("$ORIGIN"):
                    failures.append(f"{w['file']}:{so.name}: RUNPATH entry {entry!r} is not $ORIGIN-relative")
            for lib in sh(["patchelf", "--print-needed", str(so)]).split():
                if lib not in WHITELIST and lib not in shipped:
                    failures.append(f"{w['file']}:{so.name}: NEEDED {lib} is neither whitelisted nor shipped")
            data = so.read_bytes()
            for f in forbid:
                if f.encode() in data:
                    failures.append(f"{w['file']}:{so.name}: contains the build path {f}")
            print(f"  {so.name}: RUNPATH={rpath or '(none)'} NEEDED={sh(['patchelf', '--print-needed', str(so)]).split()}")
            if so.name == "libffpa_kernels.so":
                klib_hashes.add(hashlib.sha256(data).hexdigest())
        claimed = w["file"].rsplit("-", 1)[1].removesuffix(".whl")
        shown = sh([auditwheel, "show", str(whl)])
        flat = " ".join(shown.split())
        m = re.search(r'consistent with the following platform tag: "([^"]+)"', flat)
        if not m:
            failures.append(f"{w['file']}: cannot read auditwheel's verdict:\n{shown}")
        elif m.group(1) != claimed:
            failures.append(f"{w['file']}: claims {claimed}, auditwheel show says {m.group(1)}")
        else:
            print(f"  platform tag {claimed} == auditwheel show")
    if len(klib_hashes) != 1:
        failures.append(f"libffpa_kernels.so differs between CUDA wheels ({len(klib_hashes)} variants): it must be built once")
    print(f"{len(cuda)} CUDA wheel(s) read; {len(failures)} problem(s)")
    assert not failures, "\n".join(failures)
