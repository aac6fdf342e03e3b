"""Tests of the notebook smoke runner and the committed-notebook check.

The smoke runs use the module-dir profile with this interpreter (the tools venv, no
torch) on temporary, modified copies of notebooks/, so they take seconds and need no
wheel. FFPA_TEST_MODULE_DIR names the package directory (CTest passes the build tree's
staged package); without it the source tree's python/ serves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import notebook_smoke as smoke  # noqa: E402


def module_dir() -> Path:
    candidate = os.environ.get("FFPA_TEST_MODULE_DIR")
    if candidate and (Path(candidate) / "ffpa_attn" / "__init__.py").is_file():
        return Path(candidate)
    return REPO / "python"


def copy_notebooks(tmp_path: Path) -> Path:
    target = tmp_path / "notebooks"
    shutil.copytree(REPO / "notebooks", target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return target


def insert_cell(path: Path, source: str, after_first_code: bool = True) -> None:
    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "injected-by-test"
    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1 if after_first_code else len(nb.cells)
    nb.cells.insert(index, cell)
    nbformat.write(nb, path)


def run_smoke(notebooks: Path, out: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(extra_env or {})
    cmd = [sys.executable, str(HERE / "notebook_smoke.py"), "--profile", "module-dir", "--without-torch",
           "--module-dir", str(module_dir()), "--notebooks-dir", str(notebooks), "--output-dir", str(out)]
    return subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=600)


# --- the runner on broken notebooks -----------------------------------------------------


def test_smoke_raising_cell_fails(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    insert_cell(notebooks / "quickstart.ipynb", 'raise RuntimeError("injected by test_notebook_smoke")', after_first_code=False)
    # A user-level "python3" kernelspec that cannot start: the runner must not pick it.
    stray = tmp_path / "user-jupyter" / "kernels" / "python3"
    stray.mkdir(parents=True)
    (stray / "kernel.json").write_text(json.dumps({"argv": ["/bin/false", "{connection_file}"],
                                                   "display_name": "stray", "language": "python"}))
    result = run_smoke(notebooks, tmp_path / "out", {"JUPYTER_PATH": str(tmp_path / "user-jupyter")})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "notebook-smoke: OK" not in output
    assert "quickstart.ipynb: every cell ran without error" in output
    assert "RuntimeError: injected by test_notebook_smoke" in output
    # The two untouched notebooks ran in kernels of the runner's own kernelspec.
    assert "notebook-smoke: FAILED - 2/3 notebooks passed" in output, output
    executed = nbformat.read(tmp_path / "out" / "quickstart.ipynb", as_version=4)
    assert any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    acceptance = json.loads((tmp_path / "out" / "acceptance.json").read_text())
    assert acceptance["smoke"]["passed"] is False


def test_smoke_deprecated_name_fails(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    insert_cell(notebooks / "head_dim_sweep.ipynb", "import ffpa_attn as fa\nout = fa.ffpa(q, k, v)")
    result = run_smoke(notebooks, tmp_path / "out")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "head_dim_sweep.ipynb: no deprecated API names" in output
    assert "ffpa_attn.ffpa" in output and "ffpa_attn_func" in output
    assert "not executing" in output
    assert not (tmp_path / "out" / "head_dim_sweep.ipynb").exists()


def test_smoke_invalid_notebook_fails(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    data = json.loads((notebooks / "quickstart.ipynb").read_text())
    data["cells"][0]["cell_type"] = "not-a-cell-type"
    (notebooks / "quickstart.ipynb").write_text(json.dumps(data))
    result = run_smoke(notebooks, tmp_path / "out")
    assert result.returncode == 1
    assert "quickstart.ipynb: valid nbformat" in result.stdout


def test_output_dir_not_ours_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    result = run_smoke(REPO / "notebooks", tmp_path)
    assert result.returncode == 1
    assert "not written by this runner" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


# --- the committed-notebook check --------------------------------------------------------


def run_check(notebooks: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HERE / "check_committed.py"), "--notebooks-dir", str(notebooks),
                           "--package-dir", str(REPO / "python")], text=True, capture_output=True)


def test_committed_check_passes_on_clean_copy(tmp_path: Path) -> None:
    result = run_check(copy_notebooks(tmp_path))
    assert result.returncode == 0, result.stdout


def test_committed_check_fails_on_output(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    nb = nbformat.read(notebooks / "quickstart.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    cell.execution_count = 3
    nbformat.write(nb, notebooks / "quickstart.ipynb")
    result = run_check(notebooks)
    assert result.returncode == 1
    assert "has 1 output(s)" in result.stdout and "has execution_count 3" in result.stdout


def test_committed_check_fails_on_deprecated_name(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    insert_cell(notebooks / "colab_quickstart.ipynb", "from ffpa_attn import faster_prefill_attn_func")
    result = run_check(notebooks)
    assert result.returncode == 1
    assert "deprecated ffpa_attn.faster_prefill_attn_func" in result.stdout


# --- helpers -------------------------------------------------------------------------------


def test_freeze_difference_names_only_the_added_package() -> None:
    before = "numpy==2.2.6\nipykernel==6.29.5\npip==23.2.1\n"
    after = before + "ffpa_attn @ file:///tmp/w/ffpa_attn-1.0.0-py3-none-any.whl\n"
    diff = smoke.freeze_difference(before, after)
    assert diff == {"added": ["ffpa_attn @ file:///tmp/w/ffpa_attn-1.0.0-py3-none-any.whl"], "removed": [], "changed": []}
    changed = smoke.freeze_difference(before, after.replace("numpy==2.2.6", "numpy==2.3.0"))
    assert changed["changed"] == ["numpy==2.2.6 -> numpy==2.3.0"]


def test_wheel_tags_and_names() -> None:
    assert smoke.wheel_tags("ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl") == {
        "cp312-cp312-manylinux_2_28_x86_64"}
    assert smoke.wheel_tags("x-1-py2.py3-none-any.whl") == {"py2-none-any", "py3-none-any"}
    url = "https://example.org/a/ffpa_attn-1.0.0-py3-none-any.whl?X-Amz-Signature=abc"
    assert smoke.wheel_file_name(url) == "ffpa_attn-1.0.0-py3-none-any.whl"
    with pytest.raises(smoke.SmokeError, match="wheel file name"):
        smoke.wheel_file_name("https://example.org/download?id=3")


def _touch(dist: Path, *names: str) -> None:
    dist.mkdir(exist_ok=True)
    for name in names:
        (dist / name).write_bytes(b"")


def test_select_wheel_needs_exactly_one_host_match(tmp_path: Path) -> None:
    host = ["cp312-cp312-manylinux_2_28_x86_64", "py3-none-any"]
    pure, cuda = "ffpa_attn-1.0.0-py3-none-any.whl", "ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"
    other = "ffpa_attn-1.0.0+cu13-cp311-cp311-manylinux_2_28_x86_64.whl"
    _touch(tmp_path / "one", pure, other)
    assert smoke.select_wheel(tmp_path / "one", host, "any", None).name == pure
    _touch(tmp_path / "two", pure, cuda, other)
    with pytest.raises(smoke.SmokeError, match="exactly one wheel"):
        smoke.select_wheel(tmp_path / "two", host, "any", None)
    assert smoke.select_wheel(tmp_path / "two", host, "cuda", None).name == cuda
    _touch(tmp_path / "none", other)
    with pytest.raises(smoke.SmokeError, match="found none"):
        smoke.select_wheel(tmp_path / "none", host, "any", None)


def test_torch_index_unset_default_empty_pypi(tmp_path: Path) -> None:
    assert smoke.torch_index("https://cpu", {}) == "https://cpu"
    assert smoke.torch_index("https://cpu", {"FFPA_TORCH_INDEX": ""}) is None
    assert smoke.torch_index("https://cpu", {"FFPA_TORCH_INDEX": "https://mirror/simple"}) == "https://mirror/simple"
    requirements, default = smoke.read_versions_file(REPO / "tools" / "notebook-versions.txt")
    names = {smoke.normalize_name(r.split("==")[0]) for r in requirements}
    assert {"numpy", "torch", "nbclient", "nbformat", "ipykernel", "jupyter-client", "matplotlib"} <= names
    assert default and default.startswith("https://")
    unpinned = tmp_path / "versions.txt"
    unpinned.write_text("numpy>=2\n")
    with pytest.raises(smoke.SmokeError, match="not pinned"):
        smoke.read_versions_file(unpinned)
