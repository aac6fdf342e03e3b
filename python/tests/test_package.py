"""Package surface: imports, version, build info, error hierarchy, CMake file list."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import ffpa_attn
from ffpa_attn import build_facts, errors

PACKAGE_DIR = Path(ffpa_attn.__file__).resolve().parent
SOURCE_ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env_path = str(PACKAGE_DIR.parent)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})


def test_import_does_not_import_torch():
    result = _python("import sys, ffpa_attn, ffpa_attn.build_facts, ffpa_attn.cuda, ffpa_attn.reference, "
                     "ffpa_attn.deprecations, ffpa_attn.launch, ffpa_attn.routing; ffpa_attn.build_info(); "
                     "print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_import_works_when_torch_is_unimportable():
    # sys.modules[name] = None makes "import torch" raise ImportError, as without torch.
    result = _python(
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np, ffpa_attn\n"
        "x = np.ones((1, 1, 2, 8), np.float32)\n"
        "print(ffpa_attn.ffpa_attn_func(x, x, x).shape)\n"
        "try:\n    ffpa_attn.torch_ops\nexcept ImportError as e:\n    print('ImportError', e.name)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["(1, 1, 2, 8)", "ImportError torch"]


def test_public_api():
    for name in ("ffpa_attn_func", "FFPAError", "ExtensionNotAvailableError", "UnsupportedHeadDimError",
                 "UnsupportedDTypeError", "UnsupportedLayoutError", "ShapeError", "DeviceError",
                 "reference", "cuda", "build_info", "__version__"):
        assert name in ffpa_attn.__all__
        assert hasattr(ffpa_attn, name)
    with pytest.raises(AttributeError):
        ffpa_attn.not_a_name  # noqa: B018


def test_version_is_a_pep440_string():
    assert re.fullmatch(r"\d+(\.\d+)*([a-z0-9.+-]*)", ffpa_attn.__version__)


@pytest.mark.parametrize("cls", [errors.ExtensionNotAvailableError, errors.UnsupportedHeadDimError,
                                 errors.UnsupportedDTypeError, errors.UnsupportedLayoutError,
                                 errors.UnsupportedArrayTypeError, errors.UnsupportedImplError,
                                 errors.ShapeError, errors.DeviceError])
def test_error_hierarchy(cls):
    assert issubclass(cls, ffpa_attn.FFPAError)
    assert getattr(ffpa_attn, cls.__name__) is cls


def test_errors_also_derive_from_builtins():
    assert issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.UnsupportedHeadDimError, ValueError)
    assert issubclass(errors.UnsupportedDTypeError, TypeError)


def _with_build_info(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType | None) -> types.ModuleType:
    """The package as if the generated module were ``module`` (None: absent, as in a source
    tree): build_facts, its one reader, imports it again, then the package."""
    monkeypatch.delitem(sys.modules, "ffpa_attn._build_info", raising=False)
    if module is not None:
        monkeypatch.setitem(sys.modules, "ffpa_attn._build_info", module)
    else:
        monkeypatch.setitem(sys.modules, "ffpa_attn._build_info", None)  # import fails
    importlib.reload(build_facts)
    return importlib.reload(ffpa_attn)


def _restore() -> None:
    importlib.reload(build_facts)
    importlib.reload(ffpa_attn)


def test_build_info_without_generated_module(monkeypatch):
    try:
        pkg = _with_build_info(monkeypatch, None)
        assert pkg.__version__ == "0+unknown"
        info = pkg.build_info()
        assert info["version"] == "0+unknown"
        assert info["source_commit"] is None and info["profile"] is None
    finally:
        monkeypatch.undo()
        _restore()


def test_build_info_from_generated_module(monkeypatch):
    generated = types.ModuleType("ffpa_attn._build_info")
    generated.VERSION = "0.3.0"
    generated.SOURCE_COMMIT = "a" * 40
    generated.SOURCE_DIRTY = False
    generated.CHANNEL = None
    generated.TOOLCHAIN = {"cmake": "3.25.1", "gcc": "14.2.0", "nvcc": None}
    generated.PROFILE = "release-pure"
    try:
        pkg = _with_build_info(monkeypatch, generated)
        assert pkg.__version__ == "0.3.0"
        info = pkg.build_info()
        assert info["source_commit"] == "a" * 40 and info["source_dirty"] is False
        assert info["toolchain"] == {"cmake": "3.25.1", "gcc": "14.2.0", "nvcc": None}
        assert info["channel"] is None and info["profile"] == "release-pure"
        for key in ("head_dims", "dtypes", "archs", "fwd", "tma", "cute_tma", "cuda_runtime", "impls",
                    "extension_available", "extension_path", "extension_import_error"):
            assert key in info
    finally:
        monkeypatch.undo()
        _restore()


def test_cmake_lists_every_package_file():
    cmake = (SOURCE_ROOT / "CMakeLists.txt").read_text()
    block = cmake.split("set(_ffpa_python_package_files", 1)[1].split(")", 1)[0]
    listed = set(block.split())
    package = SOURCE_ROOT / "ffpa_attn"
    # Subpackages (integrations/) by their path in the package, as the list names them.
    on_disk = {p.relative_to(package).as_posix() for p in package.rglob("*.py")
               if p.name != "_build_info.py" and "__pycache__" not in p.parts}
    assert listed == on_disk, "python/CMakeLists.txt must list exactly the package's .py files"


def _package_imports() -> dict[str, set[str]]:
    """Module -> package modules it imports (at any level, lazily or not), from the AST."""
    import ast

    pkg = Path(ffpa_attn.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in pkg.glob("*.py"):
        name = path.stem
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(alias.name for alias in node.names)
        graph[name] = deps - {name}
    return graph


def test_modules_import_in_one_direction():
    """No import cycle inside the package, lazy imports included (interface <-> torch_ops was one)."""
    graph = _package_imports()
    # interface imports torch_ops (lazily, on the first torch tensor); the torch side and
    # the layers under it never import interface back.
    for module in ("torch_ops", "torch_math", "launch", "routing", "validation", "deprecations"):
        assert "interface" not in graph[module], module
    # routing and validation are the bottom layers: the errors, and validation's build facts.
    assert graph["routing"] <= {"errors", "validation"} and "torch_ops" not in graph["launch"]
    assert graph["validation"] <= {"errors", "build_facts"} and graph["build_facts"] <= {"errors"}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        if state.get(node) == 1:
            raise AssertionError("import cycle: " + " -> ".join(path + [node]))
        if state.get(node) == 2 or node not in graph:
            return
        state[node] = 1
        for dep in sorted(graph[node]):
            # __init__ re-exports the public surface; submodules never import it back.
            if dep != "__init__":
                visit(dep, path + [node])
        state[node] = 2

    for module in sorted(graph):
        if module != "__init__":
            visit(module, [])


def test_one_module_reads_the_build_facts():
    """build_facts alone imports the generated _build_info (by import_module, which sees a
    test's stand-in in sys.modules); the rest ask it."""
    import ast

    def reads(tree: ast.AST) -> bool:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and ("_build_info" in (node.module or "")
                                                     or any(a.name == "_build_info" for a in node.names)):
                return True
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                    and "_build_info" in ast.unparse(node)):
                return True
        return False

    readers = {p.relative_to(PACKAGE_DIR).as_posix() for p in PACKAGE_DIR.rglob("*.py")
               if "_src" not in p.parts and p.name != "_build_info.py" and reads(ast.parse(p.read_text()))}
    assert readers == {"build_facts.py"}


def _private_uses() -> list[str]:
    """Every place a module of the package imports or reads another module's private
    (underscore) name: ``from .x import _y`` or ``x._y`` on a package module."""
    import ast

    pkg = Path(ffpa_attn.__file__).parent
    modules = {p.stem for p in pkg.glob("*.py")} | {"integrations", "ffpa_device"}
    uses = []
    for path in sorted(pkg.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                uses += [f"{path.name}: from .{node.module or ''} import {a.name}" for a in node.names
                         if a.name.startswith("_") and a.name != "__version__"
                         and not (node.module is None and a.name == "_build_info")]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                  and node.value.id != path.stem and node.attr.startswith("_") and not node.attr.startswith("__")):
                uses.append(f"{path.name}: {node.value.id}.{node.attr}")
    return uses


def test_modules_use_only_each_others_public_names():
    """What one module shares with another has a public name in the module that owns it."""
    assert _private_uses() == []


def test_the_private_name_check_sees_a_violation(tmp_path, monkeypatch):
    # The check above on a copy of the package with one private import planted: it must
    # name it (a check that cannot fail proves nothing).
    import shutil

    copy = tmp_path / "ffpa_attn"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("_src", "__pycache__", "*.so"))
    (copy / "window.py").write_text((copy / "window.py").read_text() + "\nfrom .routing import _private\n")
    (copy / "errors.py").write_text((copy / "errors.py").read_text() + "\n_x = cuda._C\n")
    monkeypatch.setattr(ffpa_attn, "__file__", str(copy / "__init__.py"))
    assert _private_uses() == ["errors.py: cuda._C", "window.py: from .routing import _private"]


def test_tolerance_reads_the_generated_table(monkeypatch):
    generated = types.ModuleType("ffpa_attn._build_info")
    generated.TOLERANCES = {"fp8": {"rtol": 0.0, "atol": 0.25, "lse": 0.1, "min_cos": 0.998, "max_rel_l1": 0.06,
                                    "max_gain_err": 0.015}}
    try:
        pkg = _with_build_info(monkeypatch, generated)
        assert pkg.tolerance("fp8")["min_cos"] == 0.998
        assert pkg.build_info()["tolerances"]["fp8"]["atol"] == 0.25
        with pytest.raises(ValueError, match="the paths are fp8"):
            pkg.tolerance("fp7")
        pkg = _with_build_info(monkeypatch, None)
        with pytest.raises(pkg.FFPAError, match="cmake --workflow --preset dev"):
            pkg.tolerance("fp16")
    finally:
        monkeypatch.undo()
        _restore()


def test_the_arch_rules_reach_the_package():
    """cmake/kernel-facts.json's arch rules, every key (min_sm: the lowest supported arch
    among them), as configure generates them into the build-info module, and the readers
    that judge by them: the first-use build's floor and the per-impl code rule."""
    from ffpa_attn import jit, validation
    facts = json.loads((SOURCE_ROOT.parent / "cmake" / "kernel-facts.json").read_text(encoding="utf-8"))
    rules = facts["arch_rules"]
    assert validation.ARCH_RULES == rules
    assert jit.MIN_SM == validation.MIN_SM == rules["min_sm"]
    # An impl has code where every arch feature it needs is (the rule of the generated
    # ffpa/arch_rules.h and cmake/FfpaKernelFacts.cmake's ffpa_impl_has_code).
    has = {(impl, token) for impl in ("mma", "cute_fp8", "cute_tma_fp8", "cute_tma_fp4")
           for token in (str(rules["min_sm"]), "89", "90", "120", "120f") if validation.impl_has_code(impl, token)}
    assert has == {("mma", str(rules["min_sm"])), ("mma", "89"), ("mma", "90"), ("mma", "120"), ("mma", "120f"),
                   ("cute_fp8", "89"), ("cute_fp8", "90"), ("cute_tma_fp8", "90"), ("cute_tma_fp8", "120"),
                   ("cute_tma_fp8", "120f"), ("cute_tma_fp4", "120f")}
    with pytest.raises(ValueError, match="no arch rule for impl 'fp7'"):
        validation.impl_has_code("fp7", "90")


def test_the_tolerance_table_reaches_the_package_and_the_binding():
    """cmake/kernel-facts.json's tolerances, as configure generates them into the build-info
    module (ffpa_attn.tolerance) and the C++ header the extension exports (build_info())."""
    facts = json.loads((SOURCE_ROOT.parent / "cmake" / "kernel-facts.json").read_text(encoding="utf-8"))
    fields = ("rtol", "atol", "lse", "min_cos", "max_rel_l1", "max_gain_err")
    want = {row["name"]: {f: float(row[f]) for f in fields} for row in facts["tolerances"]}
    assert {"fp16", "bf16", "fp16_acc", "fp8", "fp4", "bwd_fp16", "bwd_bf16"} <= set(want)
    assert {path: ffpa_attn.tolerance(path) for path in want} == want
    extension = ffpa_attn.cuda.extension()
    if extension is not None:
        exported = extension.build_info()["tolerances"]
        assert set(exported) == set(want)
        for path, row in want.items():
            assert exported[path] == pytest.approx(row, rel=1e-6)  # float32 in the extension
