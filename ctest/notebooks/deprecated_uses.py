"""Finds deprecated ffpa_attn API in Python and notebook source, for the notebook checks.

:func:`find_deprecated_uses` reports the names and keywords of ``ffpa_attn.deprecations``
(the registry of the package under test, imported at call time: never a copy kept here)
by resolving imports with ``ast`` (``import ffpa_attn as fa; fa.ffpa(...)`` is found, a
local variable that happens to be called ``ffpa`` is not; ``fa.ffpa_attn_func(q, k, v,
causal=True)`` is found through the alias too). Notebook cells may contain IPython syntax
(``!pip``, ``%time``); those lines are blanked before parsing, and a cell that still does
not parse is scanned token by token for dotted ``ffpa_attn.<name>`` uses (keywords are
found only in source that parses). Standard library only: it runs in the smoke's venvs.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Mapping

__all__ = ["find_deprecated_uses"]

_MAGIC_LINE = re.compile(r"^\s*[!%]")


def _blank_ipython_magics(source: str) -> str:
    # Keep line numbers: replace the line's content, not the line.
    return "\n".join("" if _MAGIC_LINE.match(line) else line for line in source.split("\n"))


def _qualified_module_names(names: Mapping[str, str]) -> set[str]:
    """Top-level module names that the registry entries hang off (ffpa_attn, pyffpa)."""
    return {name.split(".")[0] for name in names}


class _Finder(ast.NodeVisitor):
    def __init__(self, names: Mapping[str, str], keywords: Mapping[str, Mapping[str, str]]) -> None:
        self.names = names
        self.keywords = keywords
        self.roots = _qualified_module_names({**names, **keywords})
        # local name -> qualified name it is bound to by an import
        self.aliases: dict[str, str] = {}
        self.hits: list[tuple[str, int, str]] = []

    def _hit(self, qualified: str, line: int) -> None:
        self.hits.append((qualified, line, self.names[qualified]))

    def _check_prefixes(self, qualified: str, line: int) -> bool:
        """Report the longest registered prefix of a dotted name (pyffpa.ffpa -> pyffpa)."""
        parts = qualified.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in self.names:
                self._hit(candidate, line)
                return True
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] not in self.roots:
                continue
            self._check_prefixes(alias.name, node.lineno)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module.split(".")[0] not in self.roots:
            return
        if self._check_prefixes(module, node.lineno):
            return
        for alias in node.names:
            qualified = f"{module}.{alias.name}"
            if not self._check_prefixes(qualified, node.lineno):
                self.aliases[alias.asname or alias.name] = qualified

    def _resolve(self, node: ast.AST) -> str | None:
        """The qualified name an expression refers to through the imports, if any."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head not in self.aliases:
            return None
        return f"{self.aliases[head]}.{rest}" if rest else self.aliases[head]

    def visit_Call(self, node: ast.Call) -> None:
        target = self._resolve(node.func)
        if target in self.keywords:
            for kw in node.keywords:
                if kw.arg in self.keywords[target]:
                    self.hits.append((f"{target}({kw.arg}=)", getattr(kw, "lineno", node.lineno),
                                      self.keywords[target][kw.arg]))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted is not None:
            head, _, rest = dotted.partition(".")
            if head in self.aliases:
                qualified = f"{self.aliases[head]}.{rest}" if rest else self.aliases[head]
                if qualified in self.names:
                    self._hit(qualified, node.lineno)
                    return
        self.generic_visit(node)


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _token_scan(source: str, names: Mapping[str, str]) -> list[tuple[str, int, str]]:
    """Fallback for unparsable source: dotted NAME.NAME... token runs matching an entry."""
    hits: list[tuple[str, int, str]] = []
    run: list[str] = []
    run_line = 0
    expect_name = True

    def flush() -> None:
        # Any dotted sub-run may be the qualified name (aliases cannot be resolved
        # without a parse): report the first, longest match.
        for start in range(len(run)):
            for end in range(len(run), start, -1):
                candidate = ".".join(run[start:end])
                if candidate in names:
                    hits.append((candidate, run_line, names[candidate]))
                    return

    tokens: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            tokens.append(tok)
    except (tokenize.TokenError, SyntaxError):
        # Unbalanced brackets and the like end tokenizing; keep what was read.
        pass
    for tok in tokens:
        if tok.type == tokenize.NAME and expect_name:
            if not run:
                run_line = tok.start[0]
            run.append(tok.string)
            expect_name = False
        elif tok.type == tokenize.OP and tok.string == "." and run and not expect_name:
            expect_name = True
        else:
            if run:
                flush()
            run, expect_name = [], True
            if tok.type == tokenize.NAME:
                run, run_line, expect_name = [tok.string], tok.start[0], False
    if run:
        flush()
    return hits


def find_deprecated_uses(
    source: str, names: Mapping[str, str] | None = None,
    keywords: Mapping[str, Mapping[str, str]] | None = None,
) -> list[tuple[str, int, str]]:
    """``[(qualified_name, line, replacement), ...]`` for deprecated API used in ``source``.

    ``names`` defaults to ``ffpa_attn.deprecations.DEPRECATED_NAMES`` and ``keywords`` to
    its ``DEPRECATED_KEYWORDS`` (to none when only ``names`` is given); tests and the
    smoke runner's own checks may pass other mappings of the same form. A deprecated
    keyword is reported as ``"ffpa_attn.ffpa_attn_func(causal=)"``. Lines are 1-based,
    in order.
    """
    from ffpa_attn.deprecations import DEPRECATED_KEYWORDS, DEPRECATED_NAMES

    registry = DEPRECATED_NAMES if names is None else names
    keyword_registry = (DEPRECATED_KEYWORDS if names is None else {}) if keywords is None else keywords
    if not registry and not keyword_registry:
        return []
    cleaned = _blank_ipython_magics(source)
    try:
        tree = ast.parse(cleaned)
    except SyntaxError:
        hits = _token_scan(cleaned, registry)
    else:
        finder = _Finder(registry, keyword_registry)
        finder.visit(tree)
        hits = finder.hits
    return sorted(set(hits), key=lambda hit: (hit[1], hit[0]))
