"""The bench's named baselines on a CPU torch (CTest python.torch): one row per SDPA
backend, refusals as n/a with torch's reason, the default dispatch named by the op/kernel
the profiler saw."""

from __future__ import annotations

import csv
import json

import pytest

import ffpa_bench as bench

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

_ARGS = ["--backend", "reference", "--N", "64", "--H", "2", "--D", "64", "--iters", "2", "--warmup", "1"]


def _rows(tmp_path):
    with open(tmp_path / "bench.csv", newline="") as handle:
        return {r["baseline"]: r for r in csv.DictReader(handle)}


def test_every_backend_has_a_row_on_a_cpu_torch(tmp_path, capsys):
    assert bench.main([*_ARGS, "--verbose", "--save-path", str(tmp_path)]) == 0
    rows = _rows(tmp_path)
    assert list(rows) == list(bench.BASELINES)
    # On a CPU torch's efficient and cuDNN backends refuse: n/a and why, never a time.
    for name in ("sdpa-efficient", "sdpa-cudnn"):
        assert rows[name]["baseline_status"] == "n/a" and rows[name]["sdpa_ms"] == "" and rows[name]["speedup"] == ""
        backend = bench.SDPA_BACKENDS[name]
        assert rows[name]["baseline_reason"].startswith(f"refused by torch (sdpa_kernel(SDPBackend.{backend})): ")
    # The math backend and torch's CPU flash kernel run, each timed with its own ratio.
    for name in ("sdpa-math", "sdpa-flash"):
        r = rows[name]
        assert r["baseline_status"] == "ran" and float(r["sdpa_ms"]) > 0
        assert float(r["speedup"]) == pytest.approx(float(r["ffpa_tflops"]) / float(r["sdpa_tflops"]))
    assert rows["sdpa-flash"]["baseline_label"] == "sdpa-flash"  # not FA2: this is torch's CPU kernel
    # The default dispatch is named by the op the profiler saw below scaled_dot_product_attention.
    default = rows["sdpa-default"]
    assert default["baseline_status"] == "ran"
    assert default["baseline_kernel"].startswith("_scaled_dot_product")
    assert default["baseline_label"] == f"sdpa-default[{default['baseline_kernel']}]"
    out = capsys.readouterr().out.splitlines()
    match = bench.LINE_RE.match(out[0])
    assert match and match["baseline"] == default["baseline_label"]
    assert float(match["sdpa_ms"].removesuffix("ms")) == pytest.approx(float(default["sdpa_ms"]), rel=1e-3, abs=1e-3)
    assert out[2].startswith("    vs sdpa-efficient: n/a (refused by torch")
    data = json.loads((tmp_path / "bench.json").read_text())
    result = data["results"][0]
    assert result["baseline"] == default["baseline_label"]
    assert [b["status"] for b in result["baselines"]] == ["ran", "n/a", "n/a", "ran", "ran"]
    assert result["baselines"][-1]["op"] == "aten::" + default["baseline_kernel"]


def test_a_refusing_backend_is_na_not_a_substitute(tmp_path, monkeypatch):
    """SDPA restricted to the math backend refuses (a stand-in): the math row is n/a
    with the refusal, the others keep their own times."""
    real = torch.nn.functional.scaled_dot_product_attention

    def refusing(*args, **kwargs):
        backends = torch.backends.cuda
        if backends.math_sdp_enabled() and not backends.flash_sdp_enabled():
            raise RuntimeError("stand-in: the math backend cannot take this shape")
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refusing)
    assert bench.main([*_ARGS, "--baselines", "math,flash,default", "--save-path", str(tmp_path)]) == 0
    rows = _rows(tmp_path)
    assert list(rows) == ["sdpa-flash", "sdpa-math", "sdpa-default"]
    math_row = rows["sdpa-math"]
    assert math_row["baseline_status"] == "n/a" and math_row["sdpa_ms"] == "" and math_row["speedup"] == ""
    assert "stand-in: the math backend cannot take this shape" in math_row["baseline_reason"]
    assert rows["sdpa-flash"]["baseline_status"] == "ran" and rows["sdpa-default"]["baseline_status"] == "ran"


def test_measure_baselines_times_each_backend_under_its_own_restriction():
    """The timer sees each backend's call inside sdpa_kernel: flash_sdp_enabled differs."""
    seen = []

    def call():
        seen.append((torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()))
        return torch.zeros(1)

    out = bench.measure_baselines(torch, call, 1e9, lambda fn: (fn(), 2.0)[1], ["sdpa-flash", "sdpa-math"], "cpu")
    assert [(b.name, b.ms) for b in out] == [("sdpa-flash", 2.0), ("sdpa-math", 2.0)]
    # Probe + timed call per backend: flash only, then math only.
    assert seen == [(True, False), (True, False), (False, True), (False, True)]
    assert out[0].tflops == pytest.approx(1e9 / 2e-3 / 1e12)
