"""The CUDA wheel's install lines have one home, cmake/install-lines.json: docs/install.md
and the README show them rendered with its 'docs' values, every wheel's hint carries them
rendered for its release (_build_info.CUDA_INSTALL_LINES), and acceptance.installers runs
them over an installed pure wheel. Every line that installs ffpa-attn from our index pins
the local version (==V+cu13): a public ==V is satisfied by an installed pure wheel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ffpa_attn
from ffpa_attn import launch

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "cmake" / "install-lines.json").read_text(encoding="utf-8"))
DOCS_LINES = {tool: line.format(**DATA["docs"]) for tool, line in DATA["cuda"].items()}
PAGES = [ROOT / "docs" / "install.md", ROOT / "README.md"]


def _code_lines(path: Path) -> list[str]:
    lines, inside = [], False
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("```"):
            inside = not inside
            continue
        if inside:
            lines.append(raw.strip())
    return lines


def test_the_template_pins_the_local_version():
    for tool, line in DATA["cuda"].items():
        assert "ffpa-attn=={cuda_version}" in line, tool
    assert DATA["docs"]["cuda_version"].endswith("+" + DATA["docs"]["channel"])


def test_install_md_shows_the_rendered_lines():
    code = _code_lines(ROOT / "docs" / "install.md")
    for tool, line in DOCS_LINES.items():
        assert line in code, f"docs/install.md lacks the {tool} line rendered from cmake/install-lines.json: {line}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_index_install_of_ffpa_attn_pins_the_local_version(page):
    text = page.read_text(encoding="utf-8")
    # Commands (code lines and inline code) that install ffpa-attn from our /whl/ index.
    commands = [c for c in _code_lines(page) + re.findall(r"`([^`]*pip install[^`]*)`", text)
                if re.match(r"(uv )?pip install", c) and "/whl/" in c and re.search(r"\bffpa-attn\b", c)]
    assert commands, f"{page.name} shows no CUDA install line"
    for c in commands:
        # V+cu13, or a dev build's whole version (0.0.1.devN+g<sha>.cu13).
        assert re.search(r"ffpa-attn==\S*\+\S*cu13\b", c), f"{page.name}: unpinned or public pin in {c!r}"


def test_the_hint_carries_the_built_lines():
    bi = getattr(ffpa_attn, "_build_info", None)
    if bi is None:
        pytest.skip("running from a source tree without _build_info.py")
    cuda_version = bi.VERSION if bi.CHANNEL else f"{bi.VERSION}+{bi.CUDA_CHANNEL}"
    want = {tool: line.format(**{**DATA["docs"], "cuda_version": cuda_version, "site": "<site>",
                                 "channel": bi.CUDA_CHANNEL})
            for tool, line in DATA["cuda"].items()}
    assert bi.CUDA_INSTALL_LINES == want
    hint = launch.cuda_wheel_hint()
    assert want["pip"] in hint and want["uv"] in hint
