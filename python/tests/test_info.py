"""python -m ffpa_attn.info: what runs here, per GPU (device queries stood in), and one
real run of the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DEFAULT_INFO

import ffpa_attn
from ffpa_attn import build_facts, info

# The release build with its low-precision kernels (archs 89;120f).
RELEASE_INFO = {**DEFAULT_INFO, "fp8": True, "fp8_archs": ["89", "120f"], "fp4": True, "fp4_archs": ["120f"],
                "impls": [*DEFAULT_INFO["impls"], "cute_fp8", "cute_tma_fp8", "cute_tma_fp4"]}


def _on(monkeypatch, *caps):
    monkeypatch.setattr(info, "gpus", lambda: [{"index": i, "name": f"GPU{i}", "capability": c}
                                                for i, c in enumerate(caps)])


def _runs(gpu):
    return sorted(i for i, st in gpu["impls"].items() if st["runs"])


def test_release_build_per_gpu_family(install_extension, monkeypatch):
    install_extension(RELEASE_INFO)
    _on(monkeypatch, (8, 9), (12, 0), (9, 0), (8, 0), (10, 0))
    ada, blackwell, hopper, ampere, b200 = info.report()["gpus"]
    assert ada["arch"] == "sm_89" and ada["auto"] == "mma"
    assert _runs(ada) == ["cute", "cute_fp8", "fp8", "mma", "simt"]
    assert "no TMA" in ada["impls"]["tma"]["why"] and "no NVFP4" in ada["impls"]["fp4"]["why"]
    assert blackwell["auto"] == "tma"
    assert _runs(blackwell) == ["cute_tma", "cute_tma_fp4", "cute_tma_fp8", "fp4", "fp8", "mma", "simt", "tma"]
    assert "cute_tma" in blackwell["impls"]["cute"]["why"]
    assert blackwell["impls"]["fp8"]["kernel"] == "cute_tma_fp8"
    # H100 / H200, A100, B200: no code in the release for them: SDPA, and a build would serve them.
    for gpu in (hopper, ampere, b200):
        assert _runs(gpu) == [] and gpu["auto"] is None
        assert gpu["ffpa_attn_func"]["kernel"] == "sdpa" and gpu["ffpa_attn_func"]["reason"] == "arch"
        assert "a build for this arch" in gpu["impls"]["mma"]["what_would"]
    assert "-DFFPA_CUDA_ARCHS=90" in hopper["impls"]["mma"]["what_would"]


def test_flags_keep_their_compiled_meaning(install_extension, monkeypatch):
    install_extension(RELEASE_INFO)
    _on(monkeypatch, (9, 0))
    rep = info.report()
    # Compiled in: True, whatever the GPU; runs on this H100: nothing.
    assert rep["compiled"]["tma"] and rep["compiled"]["cute_tma"] and rep["compiled"]["fwd"]
    assert _runs(rep["gpus"][0]) == []


def test_pure_wheel_names_the_cuda_wheel_or_a_build(no_extension, monkeypatch):
    monkeypatch.setattr(info, "_release_archs", lambda: ("89", "120f"))
    _on(monkeypatch, (8, 9), (9, 0))
    ada, hopper = info.report()["gpus"]
    assert _runs(ada) == [] and ada["ffpa_attn_func"]["reason"] == "pure_wheel"
    assert "the pure wheel has no CUDA code" in ada["impls"]["mma"]["why"]
    assert "the CUDA wheel" in ada["impls"]["mma"]["what_would"] and "+cu13" in ada["impls"]["mma"]["what_would"]
    assert "a build for this arch" in hopper["impls"]["mma"]["what_would"]


def test_a_build_without_an_impl_says_so(install_extension, monkeypatch):
    install_extension({**DEFAULT_INFO, "archs": ["89"], "tma": False, "tma_archs": [], "cute": False,
                       "cute_tma": False, "impls": ["mma", "simt"]})
    _on(monkeypatch, (8, 9))
    (ada,) = info.report()["gpus"]
    assert _runs(ada) == ["mma", "simt"]
    assert "not compiled in this build" in ada["impls"]["cute"]["why"]


def test_without_gpus_the_report_says_what_runs_on_the_host(monkeypatch, capsys):
    monkeypatch.setattr(info, "gpus", lambda: [])
    assert info.main([]) == 0
    text = capsys.readouterr().out
    assert "GPUs: none" in text and "NumPy reference" in text and "compiled in" in text


def test_the_command_runs_and_its_json_parses():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "ffpa_attn.info", "--json"], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    rep = json.loads(done.stdout)
    assert rep["package"]["version"] == ffpa_attn.__version__
    assert rep["gpus"] == []  # no GPU visible
    assert set(rep["tolerances"]) >= {"fp16", "bf16", "fp8", "fp4"}
    assert rep["compiled"]["fwd"] == ffpa_attn.cuda.CUDA_FWD_AVAILABLE


@pytest.mark.parametrize("version,local", [("0.0.1.dev5+g1a2b3c4.cu13.local", True), ("1.2.0+cu13.local", True),
                                           ("1.2.0+cu13", False), ("1.2.0", False), ("0.0.1.dev5+glocal0.cu13", False)])
def test_a_local_build_says_so_in_text_and_json(version, local, monkeypatch, capsys):
    # A wheel built from source (pip install ., the local preset) is marked +cuNN.local
    # (cmake/FfpaOptions.cmake, FFPA_LOCAL_BUILD): the report must not call it a release's.
    monkeypatch.setattr(build_facts, "version", lambda: version)
    monkeypatch.setattr(info, "gpus", lambda: [])
    monkeypatch.setattr(info, "_release_archs", lambda: ("90",))
    assert info.main(["--json"]) == 0
    package = json.loads(capsys.readouterr().out)["package"]
    assert package["version"] == version and package["local_build"] is local
    assert ("local build from source" in package["build"]) is local
    assert info.main([]) == 0
    text = capsys.readouterr().out
    assert ("a local build from source, not a release wheel" in text) is local
    assert ("this local build has code for archs 90" in text) is local
    assert ("this release's CUDA wheels have code for archs 90" in text) is not local


def test_the_nonfinite_line_names_every_path_it_covers():
    line = info.report()["host"]["nonfinite"]
    assert "forward and backward" in line and "sliding windows" in line and "packed sequences" in line
