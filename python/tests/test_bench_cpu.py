"""python/bench/ffpa_bench.py --backend cpu: ffpa_attn_func on CPU torch tensors against
SDPA on the same inputs, with the ratio on each line, and no profiler noise on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import ffpa_bench as bench  # noqa: E402
from conftest import BENCH_SCRIPT  # noqa: E402

pytestmark = pytest.mark.torch


def test_cpu_backend_rows_compare_with_sdpa_on_the_same_inputs(capsys):
    rc = bench.main(["--backend", "cpu", "--verbose", "--N", "128", "--H", "2", "--D", "64", "--causal",
                     "--dtype", "bf16", "--iters", "1", "--warmup", "0", "--baselines", "default"])
    assert rc == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("[")]
    assert len(lines) == 3  # forward, forward + backward, then the backward alone
    for line in lines:
        match = bench.LINE_RE.match(line)
        assert match, line
        assert match["kernel"] == "torch_math" and match["allclose"] == "True"
        # The same op as SDPA's on the same inputs: the same numbers.
        assert float(match["err"]) == 0.0
        assert float(match["ratio"].rstrip("x")) > 0
        # SDPA's column names the op it ran: torch's CPU attention, as ours.
        assert "_scaled_dot_product_flash_attention_for_cpu" in line
    assert lines[1].startswith("[self-attn bf16 bwd]")
    # The backward alone: SDPA's column is its backward op, timed on its own forward's graph.
    assert lines[2].startswith("[self-attn bf16 bwd-only]")
    assert bench.LINE_RE.match(lines[2])["bwd"] == " bwd-only"
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in lines[2]


def test_cpu_run_prints_no_profiler_noise():
    # torch.profiler on a machine without a GPU prints kineto's "gpuGetDeviceCount failed";
    # the CPU rows find SDPA's op without it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "CUDA_VISIBLE_DEVICES": ""}
    for backend in ("cpu", "reference"):
        done = subprocess.run([sys.executable, str(BENCH_SCRIPT), "--backend", backend, "--N", "64", "--H", "1",
                               "--D", "64", "--iters", "1", "--warmup", "0", "--no-bwd", "--verbose"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "gpuGetDeviceCount" not in done.stderr + done.stdout
        assert "flash_attention_for_cpu" in done.stdout


def test_packed_rows_compare_with_sdpa_per_sequence(capsys, tmp_path):
    rc = bench.main(["--backend", "cpu", "--verbose", "--varlen", "48,0,96,17", "--H", "4", "--Hkv", "2", "--D", "64",
                     "--causal", "--iters", "1", "--warmup", "0", "--save-path", str(tmp_path)])
    assert rc == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("[")]
    assert [line.split("]")[0] for line in lines] == ["[packed fp16", "[packed fp16 bwd"]
    for line in lines:
        match = bench.LINE_RE.match(line)
        assert match, line
        assert (match["B"], match["Nq"], match["seqlens"]) == ("4", "96", "48,0,96,17")
        assert match["kernel"] == "torch_math" and match["allclose"] == "True" and float(match["err"]) == 0.0
        assert match["baseline"] == bench.PER_SEQUENCE and float(match["ratio"].rstrip("x")) > 0
    import csv

    with open(tmp_path / "bench.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["direction"], r["baseline"], r["seqlens"]) for r in rows] == [
        ("fwd", bench.PER_SEQUENCE, "48,0,96,17"), ("bwd", bench.PER_SEQUENCE, "48,0,96,17")]


@pytest.mark.parametrize("argv,message", [
    (["--backend", "reference", "--varlen", "8,8"], "--backend cuda or cpu"),
    (["--backend", "cpu", "--varlen", "8,x"], "comma list of sequence lengths"),
    (["--backend", "cpu", "--varlen", "0,0"], "at least one positive"),
])
def test_varlen_arguments_are_checked(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        bench.main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err
