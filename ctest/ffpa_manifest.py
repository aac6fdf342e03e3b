"""The one Python reader of ffpa-release-manifest.json, shared by the test scripts.

The engine writes the manifest (`ffpa-index release`, index/core manifest.h) and reads
it for publishing; docs/release.md documents it field by field. This helper checks
the parts every script relies on, so a schema change fails here with one message
instead of as a KeyError deep inside a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA = 1


def load(path: str | Path) -> dict[str, Any]:
    """The manifest at `path`, checked against schema 1; raises ValueError naming the problem."""
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
