"""The one Python reader of ffpa-release-manifest.json, shared by the tests.

The engine writes the manifest (`ffpa-index release`, index/core/include/ffpa/core/
manifest.h, whose plan form CMake writes at configure time) and reads it for
publishing; docs/release.md documents it field by field. This helper checks
the parts every script relies on, so a schema change fails here with one message
instead of as a KeyError deep inside a test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SCHEMA = 2


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file (a wheel, SHA256SUMS' other entries), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load(path: str | Path) -> dict[str, Any]:
    """The manifest at `path`, checked against schema 2; raises ValueError naming the problem."""
    path = Path(path)
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a release manifest of schema {SCHEMA} "
                         f"(schema {data.get('schema') if isinstance(data, dict) else None!r}); rebuild the release")
    for key in ("name", "version", "profile", "source_commit", "source_dirty", "toolchain", "channel", "wheels"):
        if key not in data:
            raise ValueError(f"{path}: '{key}' is missing; rebuild the release")
    for w in data["wheels"]:
        for key in ("file", "kind", "version", "tags", "size", "sha256"):
            if key not in w:
                raise ValueError(f"{path}: a wheel entry lacks '{key}'; rebuild the release")
    return data


def wheels(manifest: dict[str, Any], kind: str | None = None) -> list[dict[str, Any]]:
    """The wheel entries, optionally of one kind ("cuda" or "pure")."""
    return [w for w in manifest["wheels"] if kind is None or w["kind"] == kind]


def make(version: str, source_commit: str, wheel_files: list[Path], *, profile: str = "full",
         channel: str | None = "cu13", requirements: Path | None = None) -> dict[str, Any]:
    """A schema-2 manifest for test wheels (what `ffpa-index release` would write for them).

    Each wheel's kind, version and tags come from its file name; size and sha256 from its
    bytes. For tests that publish hand-made wheels without running the packaging step.
    """
    entries = []
    for f in wheel_files:
        f = Path(f)
        _, wversion, tags = f.name[: -len(".whl")].split("-", 2)
        entries.append({"file": f.name, "kind": "pure" if tags.endswith("-none-any") else "cuda",
                        "version": wversion, "tags": tags, "size": f.stat().st_size,
                        "sha256": file_sha256(f)})
    m: dict[str, Any] = {"schema": SCHEMA, "name": "ffpa-attn", "version": version, "profile": profile,
                         "source_commit": source_commit, "source_dirty": False, "source_date_epoch": 1700000000,
                         "toolchain": {"cmake": "3.25.1", "gcc": "12.2.0", "nvcc": "13.0" if channel else None},
                         "channel": channel}
    if channel:
        m.update({"cuda_version": f"{version}+{channel}", "fatbin_compression": "size", "archs": ["89", "120f"],
                  "head_dims": [128], "dtypes": ["fp16", "bf16"]})
    m["wheels"] = entries
    if requirements is not None:
        m["requirements"] = {"file": Path(requirements).name, "size": Path(requirements).stat().st_size,
                             "sha256": file_sha256(requirements)}
    return m
