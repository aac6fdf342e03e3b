"""Shared fixtures for the ffpa_attn tests.

The tests import ``ffpa_attn`` from PYTHONPATH (the staged build directory under
CTest); when run by hand without it, the source tree is used.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SOURCE_ROOT.parent / "ctest"))
# The bench is a tool of the repository (python/bench/ffpa_bench.py), not a module of the
# package: its tests import it from there, against the ffpa_attn below.
BENCH_SCRIPT = SOURCE_ROOT / "bench" / "ffpa_bench.py"
sys.path.insert(0, str(BENCH_SCRIPT.parent))
from pytest_skip_rc import all_skipped_exit  # noqa: E402  (the path above)

try:
    import ffpa_attn  # noqa: F401
except ImportError:
    sys.path.insert(0, str(SOURCE_ROOT))
    import ffpa_attn  # noqa: F401


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs the CUDA extension and an NVIDIA GPU")
    config.addinivalue_line("markers", "torch: needs torch (CTest python.torch runs these in .venv-torch)")
    config.addinivalue_line("markers", "emulated: runs with FFPA_DEVICE=emulated (CTest ffpa.emulated.package; every "
                                       "other run deselects it)")
    config.addinivalue_line("markers", "jit: builds kernels with ffpa_attn.jit (CTest python.jit)")
    config.addinivalue_line("markers", "transformers: needs transformers (CTest python.transformers runs these in "
                                       ".venv-torch, where tools/torch-venv installs it)")
    if os.environ.get("FFPA_PYTEST_REQUIRE_TRANSFORMERS") == "1":
        # python.transformers: as for torch, a transformers that cannot be imported fails the run.
        try:
            import transformers  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(
                f"FFPA_PYTEST_REQUIRE_TRANSFORMERS=1 but transformers does not import ({exc}); run tools/torch-venv "
                ".venv-torch, which installs the transformers of tools/requirements-transformers.txt") from exc
    if os.environ.get("FFPA_PYTEST_REQUIRE_TORCH") == "1":
        # python.torch: a torch that cannot be imported must fail the run, never skip it.
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(
                f"FFPA_PYTEST_REQUIRE_TORCH=1 but torch does not import ({exc}); run tools/torch-venv .venv-torch "
                "(the test fixture python.torch-venv does), which installs the torch of tools/notebook-versions.txt") from exc
    # matplotlib's own use of pyparsing deprecations is not ours to fix.
    config.addinivalue_line("filterwarnings", r"ignore::DeprecationWarning:matplotlib(\..*)?")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # python.unit (FFPA_PYTEST_WITHOUT_TORCH=1) is the torch-free run: the torch modules
    # belong to python.torch and are not collected here, rather than collected as skips.
    if (os.environ.get("FFPA_PYTEST_WITHOUT_TORCH") == "1" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_")):
        return "pytest.mark.torch" in collection_path.read_text(encoding="utf-8") or None
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # "No tests collected" (exit 5) must never read as success: a filter or an import
    # error that empties the suite is a failure.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    # A GPU suite on a machine without a GPU skipped everything: CTest's skip, the one
    # rule of ctest/pytest_skip_rc.py.
    all_skipped_exit(session, exitstatus)


@pytest.fixture(autouse=True)
def _no_first_use_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts a first-use kernel build (ffpa_attn.jit) unless it sets FFPA_JIT=1
    itself: the stand-in CUDA tensors would otherwise make the pure-wheel cases build."""
    monkeypatch.setenv("FFPA_JIT", "0")


class FakeExtension(types.ModuleType):
    """Stands in for ffpa_attn._C: reports a build and records forward() calls.

    Its validate_forward() takes every call (or answers ``problem``) and records what it
    was asked: the messages of the real validation are tested against the built extension
    (the ``install_extension.real()`` factory), which no stand-in can imitate."""

    def __init__(self, info: dict[str, Any], devices: int) -> None:
        super().__init__("ffpa_attn._C")
        self.info = info
        self.devices = devices
        self.calls: list[tuple[Any, ...]] = []  # forward()'s positional arguments
        self.call_kwargs: list[dict[str, Any]] = []  # and its keywords (accum)
        self.kernel = "mma"  # what forward() reports as the kernel that ran
        self.auto = "mma"  # what auto_impl() reports for the current device
        self.problem: Exception | None = None  # what validate_forward() answers
        self.validations: list[tuple[Any, ...]] = []  # validate_forward()'s (q, k, v, impl, accum)
        self.__file__ = "/fake/ffpa_attn/_C.so"

    def build_info(self) -> dict[str, Any]:
        return dict(self.info)

    def device_count(self) -> int:
        return self.devices

    def auto_impl(self) -> str:
        return self.auto

    def validate_forward(self, q: Any, k: Any, v: Any, impl: str = "auto", accum: str = "fp32") -> Exception | None:
        self.validations.append((q, k, v, impl, accum))
        return self.problem

    def forward(self, *args: Any, **kwargs: Any) -> str:
        # Like the real binding, export q, k and v through DLPack when they offer it
        # (torch raises here for a tensor that requires grad).
        for array in args[:3]:
            export = getattr(array, "__dlpack__", None)
            if export is not None:
                export(stream=1)
        self.calls.append(args)
        self.call_kwargs.append(kwargs)
        return self.kernel


# What the release build (archs 89;120f) reports: TMA code for the sm_120 family, fp16
# accumulation, the CuTe kernels (TMA-fed too).
DEFAULT_INFO = {
    "head_dims": [64, 128, 256, 320, 512],
    "dtypes": ["fp16", "bf16"],
    "archs": ["89", "120f"],
    "fwd": True,
    "tma": True,
    "tma_archs": ["120f"],
    "f16_acc": True,
    "cute": True,
    "cute_tma": True,
    "cutlass": "4.2.0",
    "cuda_runtime": "13.0",
    "impls": ["mma", "simt", "tma", "cute", "cute_tma"],
    "auto_impl": "tma on sm_120-family GPUs that this build's TMA code runs on, else mma; "
                 "simt when an array is not 16-byte aligned (fp32 accumulation only); never cute or cute_tma "
                 "(no GPU measurement of them yet: docs/perf.md)",
}


def _reload_cuda() -> None:
    importlib.reload(ffpa_attn.cuda)


@pytest.fixture
def install_extension() -> Iterator[Any]:
    """Factory: install a fake ffpa_attn._C (or a broken one) and reload ffpa_attn.cuda.

    Whatever was there before (nothing, or a real extension in a build tree) is put
    back afterwards.
    """
    saved_module = sys.modules.get("ffpa_attn._C")
    saved_attr = getattr(ffpa_attn, "_C", None)
    finders: list[Any] = []

    def install(info: dict[str, Any] | None = None, devices: int = 1, broken: str | None = None) -> Any:
        sys.modules.pop("ffpa_attn._C", None)
        if broken is not None:
            finder = _BrokenFinder(broken)
            sys.meta_path.insert(0, finder)
            finders.append(finder)
            _reload_cuda()
            return None
        fake = FakeExtension(dict(DEFAULT_INFO if info is None else info), devices)
        sys.modules["ffpa_attn._C"] = fake
        _reload_cuda()
        return fake

    def absent() -> None:
        sys.modules.pop("ffpa_attn._C", None)
        finder = _AbsentFinder()
        sys.meta_path.insert(0, finder)
        finders.append(finder)
        _reload_cuda()

    def real() -> Any:
        """The built extension (its own validation, the messages of csrc/); skips where the
        build has none (the pure profile)."""
        sys.modules.pop("ffpa_attn._C", None)
        if saved_module is not None and not isinstance(saved_module, FakeExtension):
            sys.modules["ffpa_attn._C"] = saved_module
        _reload_cuda()
        ext = ffpa_attn.cuda.extension()
        if ext is None or isinstance(ext, FakeExtension):
            pytest.skip("this build has no ffpa_attn._C (the pure profile): the extension's validation is untested")
        return ext

    install.absent = absent  # type: ignore[attr-defined]
    install.real = real  # type: ignore[attr-defined]
    yield install
    for finder in finders:
        sys.meta_path.remove(finder)
    sys.modules.pop("ffpa_attn._C", None)
    if saved_module is not None:
        sys.modules["ffpa_attn._C"] = saved_module
    if saved_attr is not None:
        ffpa_attn._C = saved_attr
    elif hasattr(ffpa_attn, "_C"):
        del ffpa_attn._C
    _reload_cuda()


class _BrokenFinder:
    """Makes "import ffpa_attn._C" fail the way a bad shared object does."""

    def __init__(self, message: str) -> None:
        self.message = message

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "ffpa_attn._C":
            raise ImportError(self.message, name=name)
        return None


class _AbsentFinder:
    """Hides a real extension so the pure-wheel behaviour can be tested in a build tree."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "ffpa_attn._C":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture
def no_extension(install_extension: Any) -> None:
    install_extension.absent()
