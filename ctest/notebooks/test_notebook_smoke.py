"""Tests of the notebook smoke runner (notebook_smoke.py, smoke_env.py) and the
committed-notebook check (check_committed.py).

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
import smoke_env  # noqa: E402


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
    env.pop("PYTHONPATH", None)
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


def test_smoke_module_dir_ignores_caller_pythonpath(tmp_path: Path) -> None:
    # The runner, not the caller's environment, decides what the kernels import: a decoy
    # ffpa_attn on the caller's PYTHONPATH must not reach any notebook.
    decoy = tmp_path / "decoy"
    (decoy / "ffpa_attn").mkdir(parents=True)
    (decoy / "ffpa_attn" / "__init__.py").write_text('raise ImportError("decoy ffpa_attn imported")\n')
    result = run_smoke(REPO / "notebooks", tmp_path / "out", {"PYTHONPATH": str(decoy)})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "notebook-smoke: OK - 3/3 notebooks" in output
    for name in ("quickstart.ipynb", "head_dim_sweep.ipynb"):
        assert f"[ok] {name}: the install cell installed nothing" in output
        assert f"[ok] {name}: kernel's PYTHONPATH is the runner's ({module_dir().resolve()})" in output
    acceptance = json.loads((tmp_path / "out" / "acceptance.json").read_text())
    probes = [acceptance["smoke"]["notebooks"][name]["probe"] for name in smoke_env.NOTEBOOKS]
    assert all(p["pythonpath"] == str(module_dir().resolve()) for p in probes), probes
    assert acceptance["install"]["status"] == "skipped"


def test_smoke_install_cell_that_installs_fails(tmp_path: Path) -> None:
    # An install cell whose guard does not see the runner's package would pip-install
    # something else; the stand-in prints what pip would, and the runner must object.
    notebooks = copy_notebooks(tmp_path)
    nb = nbformat.read(notebooks / "head_dim_sweep.ipynb", as_version=4)
    install = next(c for c in nb.cells if c.cell_type == "code")
    install.source = 'import importlib.util\n\nif importlib.util.find_spec("ffpa_attn") is not None:\n' \
                     '    print("Successfully installed ffpa-attn")'
    nbformat.write(nb, notebooks / "head_dim_sweep.ipynb")
    result = run_smoke(notebooks, tmp_path / "out")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "[FAIL] head_dim_sweep.ipynb: the install cell installed nothing" in output
    assert "notebook-smoke: FAILED - 2/3 notebooks passed" in output


def test_kernel_environments_come_from_the_runner(tmp_path: Path) -> None:
    module = tmp_path / "python"
    envs = smoke_env.kernel_environments(module_dir=module, source_commit="a" * 40)
    assert set(envs) == set(smoke_env.NOTEBOOKS)
    assert all(env["PYTHONPATH"] == str(module) for env in envs.values())
    assert envs["colab_quickstart.ipynb"] == {"PYTHONPATH": str(module), "FFPA_SOURCE_COMMIT": "a" * 40}
    wheel = smoke_env.kernel_environments(wheel="/d/ffpa_attn-1-py3-none-any.whl", source_commit="b" * 40)
    assert wheel == {"colab_quickstart.ipynb": {"FFPA_WHEEL": "/d/ffpa_attn-1-py3-none-any.whl",
                                                "FFPA_SOURCE_COMMIT": "b" * 40},
                     "quickstart.ipynb": {}, "head_dim_sweep.ipynb": {}}
    with pytest.raises(ValueError, match="exclude each other"):
        smoke_env.kernel_environments(module_dir=module, wheel="/d/x.whl")


def test_clean_env_drops_what_selects_a_package(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "FFPA_WHEEL", "FFPA_SOURCE_COMMIT"):
        monkeypatch.setenv(name, "/somewhere")
    env = smoke_env.clean_env(Path("/venv/bin"))
    assert not {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "FFPA_WHEEL", "FFPA_SOURCE_COMMIT"} & env.keys()
    assert env["PYTHONNOUSERSITE"] == "1" and env["PATH"].startswith("/venv/bin" + os.pathsep)


def test_module_dir_setup_sets_pythonpath_for_every_kernel(tmp_path: Path) -> None:
    args = smoke.build_parser().parse_args(["--profile", "module-dir", "--module-dir", str(module_dir()),
                                            "--python", sys.executable, "--without-torch"])
    setup = smoke_env.setup_module_dir(args)
    expected = str(module_dir().resolve())
    assert {name: env.get("PYTHONPATH") for name, env in setup.notebook_env.items()} == {
        name: expected for name in smoke_env.NOTEBOOKS}
    assert "PYTHONPATH" not in setup.env  # pip freeze and the probes run without it
    assert os.path.isabs(setup.python)


def test_output_dir_not_ours_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    result = run_smoke(REPO / "notebooks", tmp_path)
    assert result.returncode == 1
    assert "not written by this runner" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"


# --- the committed-notebook check --------------------------------------------------------


def run_check(notebooks: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HERE / "check_committed.py"), "--notebooks-dir", str(notebooks),
                           "--package-dir", str(REPO / "python"), *extra], text=True, capture_output=True)


def set_cell(path: Path, code_index: int, source: str) -> None:
    nb = nbformat.read(path, as_version=4)
    [c for c in nb.cells if c.cell_type == "code"][code_index].source = source
    nbformat.write(nb, path)


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


def test_committed_check_clear_strips_outputs(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    nb = nbformat.read(notebooks / "head_dim_sweep.ipynb", as_version=4)
    cell = [c for c in nb.cells if c.cell_type == "code"][2]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    cell.execution_count = 1
    cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
    nbformat.write(nb, notebooks / "head_dim_sweep.ipynb")
    assert run_check(notebooks, "--check", "hygiene").returncode == 1
    cleared = run_check(notebooks, "--clear")
    assert "cleared: head_dim_sweep.ipynb" in cleared.stdout and "already clean: quickstart.ipynb" in cleared.stdout
    assert run_check(notebooks).returncode == 0
    assert (notebooks / "quickstart.ipynb").read_bytes() == (REPO / "notebooks" / "quickstart.ipynb").read_bytes()


def test_committed_check_contract_needs_the_install_cell_first(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    nb = nbformat.read(notebooks / "quickstart.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    nb.cells.remove(code[0])
    nbformat.write(nb, notebooks / "quickstart.ipynb")
    set_cell(notebooks / "head_dim_sweep.ipynb", 0, "%pip install ffpa-attn")  # unguarded: reinstalls every run
    result = run_check(notebooks, "--check", "contract")
    assert result.returncode == 1
    assert "quickstart.ipynb cell 1: the first code cell must be the install cell" in result.stdout
    assert "head_dim_sweep.ipynb cell 1: the first code cell must be the install cell" in result.stdout
    assert "quickstart.ipynb: the code cell after the install cell must `import ffpa_attn`" in result.stdout


def test_committed_check_contract_refuses_build_tree_search(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    insert_cell(notebooks / "quickstart.ipynb",
                'import sys\nfrom pathlib import Path\n# comments may say sys.path\n'
                'sys.path.insert(0, str(sorted(Path("..").glob("build/*/python"))[0]))')
    insert_cell(notebooks / "colab_quickstart.ipynb", 'import os\nos.environ["PYTHONPATH"] = "/x"')
    insert_cell(notebooks / "head_dim_sweep.ipynb", 'import os\nd = os.environ.get("FFPA_PYTHON_MODULE_DIR")')
    result = run_check(notebooks, "--check", "contract")
    assert result.returncode == 1
    assert "quickstart.ipynb cell 2 line 4: changes or reads the import path" in result.stdout
    assert "quickstart.ipynb cell 2 line 4: names a build tree" in result.stdout
    assert "line 3" not in result.stdout  # the comment
    assert "colab_quickstart.ipynb cell 2 line 2: sets PYTHONPATH from inside the kernel" in result.stdout
    assert "head_dim_sweep.ipynb cell 2 line 2: reads a package-selection variable" in result.stdout


def test_committed_check_contract_keeps_colab_first_cell(tmp_path: Path) -> None:
    notebooks = copy_notebooks(tmp_path)
    set_cell(notebooks / "colab_quickstart.ipynb", 0, 'WHEEL = "ffpa_attn-*.whl"\nSOURCE_COMMIT = ""')
    set_cell(notebooks / "colab_quickstart.ipynb", -1, 'print("done")')
    result = run_check(notebooks, "--check", "contract")
    assert result.returncode == 1
    assert result.stdout.count("colab_quickstart.ipynb cell 1: the first code cell must define") == 2
    assert "the last code cell must write ffpa-acceptance.json" in result.stdout


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
    assert smoke_env.wheel_tags("ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl") == {
        "cp312-cp312-manylinux_2_28_x86_64"}
    assert smoke_env.wheel_tags("x-1-py2.py3-none-any.whl") == {"py2-none-any", "py3-none-any"}
    url = "https://example.org/a/ffpa_attn-1.0.0-py3-none-any.whl?X-Amz-Signature=abc"
    assert smoke_env.wheel_file_name(url) == "ffpa_attn-1.0.0-py3-none-any.whl"
    with pytest.raises(smoke_env.SmokeError, match="wheel file name"):
        smoke_env.wheel_file_name("https://example.org/download?id=3")


def _touch(dist: Path, *names: str) -> None:
    dist.mkdir(exist_ok=True)
    for name in names:
        (dist / name).write_bytes(b"")


def test_select_wheel_needs_exactly_one_host_match(tmp_path: Path) -> None:
    host = ["cp312-cp312-manylinux_2_28_x86_64", "py3-none-any"]
    pure, cuda = "ffpa_attn-1.0.0-py3-none-any.whl", "ffpa_attn-1.0.0+cu13-cp312-cp312-manylinux_2_28_x86_64.whl"
    other = "ffpa_attn-1.0.0+cu13-cp311-cp311-manylinux_2_28_x86_64.whl"
    _touch(tmp_path / "one", pure, other)
    assert smoke_env.select_wheel(tmp_path / "one", host, "any", None).name == pure
    _touch(tmp_path / "two", pure, cuda, other)
    with pytest.raises(smoke_env.SmokeError, match="exactly one wheel"):
        smoke_env.select_wheel(tmp_path / "two", host, "any", None)
    assert smoke_env.select_wheel(tmp_path / "two", host, "cuda", None).name == cuda
    _touch(tmp_path / "none", other)
    with pytest.raises(smoke_env.SmokeError, match="found none"):
        smoke_env.select_wheel(tmp_path / "none", host, "any", None)


def test_torch_index_unset_default_empty_pypi(tmp_path: Path) -> None:
    assert smoke_env.torch_index("https://cpu", {}) == "https://cpu"
    assert smoke_env.torch_index("https://cpu", {"FFPA_TORCH_INDEX": ""}) is None
    assert smoke_env.torch_index("https://cpu", {"FFPA_TORCH_INDEX": "https://mirror/simple"}) == "https://mirror/simple"
    requirements, default = smoke_env.read_versions_file(REPO / "tools" / "notebook-versions.txt")
    names = {smoke_env.normalize_name(r.split("==")[0]) for r in requirements}
    assert {"numpy", "torch", "nbclient", "nbformat", "ipykernel", "jupyter-client", "matplotlib"} <= names
    assert default and default.startswith("https://")
    unpinned = tmp_path / "versions.txt"
    unpinned.write_text("numpy>=2\n")
    with pytest.raises(smoke_env.SmokeError, match="not pinned"):
        smoke_env.read_versions_file(unpinned)
