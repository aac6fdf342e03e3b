"""python/bench/ffpa_bench.py: flags, the no-GPU exit, the reference backend, saved files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import math
import re

import numpy as np
import pytest
from conftest import BENCH_SCRIPT, DEFAULT_INFO, SOURCE_ROOT

import ffpa_attn
import ffpa_bench as bench
from ffpa_attn import cuda


def parse(argv):
    parser = bench.build_parser()
    return bench._finish_args(parser, parser.parse_args(argv))


def test_defaults_cuda():
    args = parse([])
    assert (args.backend, args.B, args.H, args.Hkv, args.N, args.Nkv, args.D) == ("cuda", 1, 32, 32, 8192, 8192, [512])
    assert args.dtypes == ["fp16"] and args.impl == "auto" and not args.causal
    assert args.warmup == 5 and args.iters == 20


def test_defaults_reference_are_small():
    args = parse(["--backend", "reference"])
    assert args.N == 256 and args.H == 4 and args.iters == 3


def test_flags():
    args = parse(["--B", "2", "--H", "16", "--Hkv", "4", "--N", "1000", "--D", "64", "128", "320",
                  "--causal", "--dtype", "both", "--warmup", "2", "--iters", "7", "--no-bwd",
                  "--cuda-impl", "simt", "--verbose", "--save-path", "out"])
    assert (args.B, args.H, args.Hkv, args.N, args.D) == (2, 16, 4, 1000, [64, 128, 320])
    assert args.causal and args.dtypes == ["fp16", "bf16"] and args.impl == "simt"
    assert (args.warmup, args.iters, args.no_bwd, args.no_fwd) == (2, 7, True, False)
    assert args.verbose and args.save_path == "out"


@pytest.mark.parametrize("impl", ["fp16", "bf16"])
def test_cuda_impl_dtype_spelling_selects_the_dtype(impl):
    args = parse(["--cuda-impl", impl, "--dtype", "both"])
    assert args.dtypes == [impl] and args.impl == "auto" and args.accum == "fp32"


@pytest.mark.parametrize(
    "argv,impl,accum",
    [
        ([], "auto", "fp32"),
        (["--cuda-impl", "auto"], "auto", "fp32"),
        (["--cuda-impl", "mma"], "mma", "fp32"),
        (["--cuda-impl", "simt"], "simt", "fp32"),
        (["--cuda-impl", "tma"], "tma", "fp32"),
        # upstream ffpa-attn's spellings
        (["--cuda-impl", "native"], "mma", "fp32"),
        (["--cuda-impl", "fp16"], "auto", "fp32"),
        (["--cuda-impl", "auto_acc_f16"], "auto", "fp16"),
        (["--cuda-impl", "mma_acc_f16"], "mma", "fp16"),
        (["--cuda-impl", "native_acc_f16"], "mma", "fp16"),
        (["--cuda-impl", "tma_acc_f16"], "tma", "fp16"),
        (["--cuda-impl", "tma", "--accum", "fp16"], "tma", "fp16"),
        (["--cuda-impl", "native", "--accum", "f16"], "mma", "fp16"),
        (["--cuda-impl", "fp16", "--accum", "fp16"], "auto", "fp16"),
        (["--cuda-impl", "mma_acc_f16", "--accum", "f16"], "mma", "fp16"),
        (["--cuda-impl", "simt", "--accum", "f32"], "simt", "fp32"),
        # the low-precision paths: upstream's spellings and our cute_fp8, fp32 accumulation only
        (["--cuda-impl", "fp8"], "fp8", "fp32"),
        (["--cuda-impl", "cute_fp8"], "cute_fp8", "fp32"),
        (["--cuda-impl", "cute_tma_fp8"], "cute_tma_fp8", "fp32"),
        (["--cuda-impl", "fp4"], "fp4", "fp32"),
        (["--cuda-impl", "cute_tma_fp4", "--accum", "f32"], "cute_tma_fp4", "fp32"),
        (["--cuda-impl", "fp8", "--accum", "fp32", "--dtype", "both"], "fp8", "fp32"),
    ],
)
def test_cuda_impl_spellings_map_to_impl_and_accum(argv, impl, accum):
    args = parse(argv)
    assert (args.impl, args.accum) == (impl, accum)
    assert bench.resolve_cuda_impl(args.cuda_impl, args.accum if "--accum" in argv else None)[:2] == (impl, accum)


def test_every_cuda_impl_spelling_is_a_kernel_of_the_api():
    from ffpa_attn.interface import ACCUMS, IMPLS

    for spelling, (impl, accum, dtype) in bench.CUDA_IMPLS.items():
        assert impl in IMPLS and accum in ACCUMS and dtype in (None, "fp16", "bf16"), spelling


def test_every_impl_of_the_api_is_a_cuda_impl_spelling():
    """The low-precision impls included: no impl of ffpa_attn_func is missing from the bench."""
    from ffpa_attn.interface import IMPLS

    assert set(IMPLS) <= set(bench.CUDA_IMPLS)
    for impl in ("fp8", "cute_fp8", "cute_tma_fp8", "fp4", "cute_tma_fp4"):
        assert bench.CUDA_IMPLS[impl] == (impl, "fp32", None)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--cuda-impl", "fp8_smk"], "its FP8 / NVFP4 spellings are cute_fp8, cute_tma_fp8, fp8, cute_tma_fp4, fp4"),
        (["--cuda-impl", "sage_fp4"], "not a low-precision path of this project"),
        (["--cuda-impl", "fp8", "--accum", "fp16"], "the FP8 / NVFP4 kernels accumulate in fp32 only"),
        (["--cuda-impl", "cute_tma_fp4", "--accum", "f16"], "the FP8 / NVFP4 kernels accumulate in fp32 only"),
        (["--cuda-impl", "cute_tma_acc_f16", "--accum", "fp32"], "means fp16 accumulation"),
        (["--cuda-impl", "fast"], "is not one of auto, mma, simt, tma, cute, cute_tma, native"),
        (["--cuda-impl", "tma_acc_f16", "--accum", "fp32"], "means fp16 accumulation"),
        (["--cuda-impl", "simt", "--accum", "fp16"], "simt accumulates in fp32 only"),
        (["--cuda-impl", "mma_acc_f16", "--dtype", "bf16"], "needs fp16 inputs; --dtype bf16"),
        (["--cuda-impl", "bf16", "--accum", "fp16"], "needs fp16 inputs"),
        (["--accum", "fp16", "--dtype", "both"], "needs fp16 inputs"),
        (["--backend", "reference", "--accum", "fp16"], "option of the CUDA kernels"),
        (["--backend", "reference", "--cuda-impl", "fp8"], "the reference backend has none to pick"),
        (["--backend", "cpu", "--cuda-impl", "mma"], "the cpu backend has none to pick"),
        (["--backend", "cpu", "--accum", "fp16"], "the cpu backend computes in fp32"),
        (["--accum", "bf16"], "invalid choice"),
    ],
)
def test_bad_impl_and_accum_combinations_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        bench.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_cuda_backend_impl_not_in_build(install_extension, capsys):
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["89"], "fwd": True, "tma": False,
                       "tma_archs": [], "f16_acc": True, "cute_tma": False, "cuda_runtime": "13.0",
                       "impls": ["mma", "simt"]})
    assert bench.main(["--backend", "cuda", "--D", "128", "--cuda-impl", "tma"]) == 2
    assert "--cuda-impl tma (tma) not in this build (archs ['89'])" in capsys.readouterr().err


def test_cuda_backend_lowp_kernels_not_in_build(install_extension, capsys):
    """The release's archs without the low-precision kernels (build_info's fp8/fp4 False): exit 2 naming it."""
    install_extension({**DEFAULT_INFO, "fp8": False, "fp8_archs": ["89", "120f"], "fp4": False,
                       "fp4_archs": ["120f"]})
    for impl, flag in (("fp8", "CUDA_FP8_AVAILABLE"), ("cute_tma_fp4", "CUDA_FP4_AVAILABLE")):
        assert bench.main(["--backend", "cuda", "--D", "128", "--cuda-impl", impl]) == 2
        err = capsys.readouterr().err
        assert f"--cuda-impl {impl} ({impl}) not in this build (archs ['89', '120f']): the FP8 / NVFP4 kernels " \
               f"were not compiled in this build" in err
        assert f"cuda.{flag} is False" in err


def test_cuda_backend_fp4_needs_the_sm120_family(install_extension, capsys):
    install_extension({**DEFAULT_INFO, "archs": ["89"], "tma": False, "tma_archs": [], "cute_tma": False,
                       "fp8": True, "fp8_archs": ["89"], "fp4": False, "fp4_archs": [],
                       "impls": ["mma", "simt", "cute", "cute_fp8", "fp8"]})
    assert bench.main(["--backend", "cuda", "--D", "128", "--cuda-impl", "fp4"]) == 2
    err = capsys.readouterr().err
    assert "NVFP4 (the block-scaled mma) runs on the sm_120 family only" in err and "120f" in err
    assert "available: ['auto', 'mma', 'simt', 'cute', 'cute_fp8', 'fp8']" in err


def test_cuda_backend_fp16_accum_not_in_build(install_extension, capsys):
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["89"], "fwd": True, "tma": False,
                       "tma_archs": [], "f16_acc": False, "cute_tma": False, "cuda_runtime": "13.0",
                       "impls": ["mma", "simt"]})
    assert bench.main(["--backend", "cuda", "--D", "128", "--cuda-impl", "mma_acc_f16"]) == 2
    assert "fp16 accumulation is not in this build" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--no-fwd", "--no-bwd"], ["--H", "6", "--Hkv", "4"], ["--backend", "tpu"],
                                  ["--N", "0"], ["--dtype", "fp8"]])
def test_bad_flags_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        bench.main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err


def test_cuda_backend_without_gpu_subprocess():
    if cuda.CUDA_FWD_AVAILABLE and cuda.device_count() > 0:
        pytest.skip("a GPU and the extension are present: the no-GPU path cannot be observed here")
    result = subprocess.run([sys.executable, str(BENCH_SCRIPT), "--backend", "cuda", "--verbose"],
                            capture_output=True, text=True, check=False,
                            env={"PYTHONPATH": str(Path(ffpa_attn.__file__).parents[1]), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(("extension not available: ", "no CUDA device: "))
    assert "--backend reference" in result.stderr


def test_cuda_backend_pure_wheel_message(no_extension, capsys):
    assert bench.main(["--backend", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("extension not available: ") and "/whl/cu" in err


def test_cuda_backend_no_device(install_extension, capsys):
    install_extension(devices=0)
    assert bench.main(["--backend", "cuda", "--D", "128"]) == 2
    assert capsys.readouterr().err.startswith("no CUDA device: ")


def test_cuda_backend_head_dim_must_be_compiled(install_extension, capsys):
    install_extension()
    assert bench.main(["--backend", "cuda", "--D", "128", "96"]) == 2
    err = capsys.readouterr().err
    assert "head dim [96] not compiled" in err and "[64, 128, 256, 320, 512]" in err


def test_reference_backend_verbose_lines(capsys):
    rc = bench.main(["--backend", "reference", "--verbose", "--N", "48", "--H", "2", "--D", "64", "96",
                     "--dtype", "both", "--iters", "1", "--warmup", "0", "--baselines", "none"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert len(lines) == 4
    for line in lines:
        match = bench.LINE_RE.match(line)
        assert match, line
        assert match["tag"] == "self-attn" and match["allclose"] == "True"
        assert match["kernel"] == "numpy" and match["accum"] == "fp32"  # every row names its path
        assert match["sdpa_ms"] == "n/a" and match["sdpa_tflops"] == "n/a" and match["ratio"] == "n/a"
        assert (match["B"], match["Hq"], match["Hkv"], match["Nq"], match["Nkv"]) == ("1", "2", "2", "48", "48")
    assert [bench.LINE_RE.match(x)["atol"] for x in lines] == ["0.02", "0.02", "0.05", "0.05"]
    assert lines[0].startswith("[self-attn fp16] B=1 Hq=2 Hkv=2 Nq=48 Nkv=48 D=64 O_err=")
    for line in lines:
        # The accuracy columns against the fp64 reference, here on the whole output.
        match = bench.LINE_RE.match(line)
        assert match["ref"] == "all" and match["bound"] is None and match["bound_ok"] is None
        assert 0.9999 < float(match["cos"]) <= 1.0 and 0 < float(match["rel_l1"]) < 5e-3
        assert float(match["max_abs"]) == pytest.approx(float(match["err"]), abs=1e-6, rel=2e-3)


def test_reference_backend_gqa_causal_cross(capsys):
    rc = bench.main(["--backend", "reference", "--verbose", "--N", "20", "--Nkv", "33", "--H", "4", "--Hkv", "2",
                     "--D", "64", "--causal", "--iters", "1", "--warmup", "0", "--no-bwd"])
    assert rc == 0
    match = bench.LINE_RE.match(capsys.readouterr().out.strip().split("\n")[0])
    assert match and match["tag"] == "cross-attn" and match["causal"] and match["Hkv"] == "2"


def test_spec_example_line_parses():
    line = ("[self-attn fp16] B=1 Hq=32 Hkv=32 Nq=8192 Nkv=8192 D=512 O_err=0.000977 allclose(atol=0.02)=True "
            "FFPA=12.345ms SDPA=20.100ms TFLOPS=181.20/111.30 1.63x")
    assert bench.LINE_RE.match(line)


def test_flops_and_result_line():
    assert bench.flops(1, 32, 8192, 8192, 512, False) == 4 * 32 * 8192 * 8192 * 512
    assert bench.flops(1, 1, 4, 4, 8, True) == 4 * 4 * 4 * 8 / 2
    result = bench.Result("cuda", "fwd", "bf16", "auto", 1, 32, 8, 8192, 8192, 512, False, 0.01, 0.05, True,
                          10.0, 20.0, 200.0, 100.0)
    line = result.line()
    assert line.endswith("FFPA=10.000ms SDPA=20.000ms TFLOPS=200.00/100.00 2.00x kernel=auto accum=fp32")
    assert bench.LINE_RE.match(line)["Hkv"] == "8"
    tma = bench.Result("cuda", "fwd", "fp16", "tma", 1, 32, 32, 8192, 8192, 512, True, 0.03, 0.05, True,
                       10.0, 20.0, 200.0, 100.0, accum="fp16")
    match = bench.LINE_RE.match(tma.line())
    assert (match["kernel"], match["accum"], match["atol"], match["causal"]) == ("tma", "fp16", "0.05", " causal")
    assert tma.short_line() == "fp16 fwd D=512 [tma, fp16 accum]: 200.00 TFLOPS (SDPA 100.00, 2.00x)"


def test_save_path_writes_csv_json_png(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises: every baseline n/a, with the reason
    out_dir = tmp_path / "results"
    rc = bench.main(["--backend", "reference", "--N", "32", "--H", "2", "--D", "64", "128", "--iters", "1",
                     "--warmup", "0", "--save-path", str(out_dir)])
    assert rc == 0
    with open(out_dir / "bench.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # One row per case and named baseline.
    assert [r["D"] for r in rows] == ["64"] * 5 + ["128"] * 5
    assert [r["baseline"] for r in rows] == list(bench.BASELINES) * 2
    assert all(r["baseline_status"] == "n/a" and "torch is not importable" in r["baseline_reason"]
               and r["sdpa_ms"] == "" and r["speedup"] == "" for r in rows)
    with open(out_dir / "bench.csv", newline="") as handle:
        header = next(csv.reader(handle))
    # The columns readers know keep their places; accum was added at the end, the baseline after it.
    assert header == ["backend", "direction", "dtype", "impl", "B", "Hq", "Hkv", "Nq", "Nkv", "D", "causal", "err",
                      "atol", "allclose", "ffpa_ms", "sdpa_ms", "ffpa_tflops", "sdpa_tflops", "speedup", "accum",
                      "baseline", "baseline_label", "baseline_kernel", "baseline_status", "baseline_reason",
                      "cos", "rel_l1", "max_abs", "ref", "lowp", "bound_ok", "seqlens"]
    assert [(r["impl"], r["accum"]) for r in rows] == [("numpy", "fp32")] * 10
    assert all(float(r["cos"]) > 0.9999 and r["ref"] == "all" and r["lowp"] == "" and r["bound_ok"] == ""
               for r in rows)
    data = json.loads((out_dir / "bench.json").read_text())
    assert data["config"]["backend"] == "reference" and len(data["results"]) == 2
    assert [b["name"] for b in data["results"][0]["baselines"]] == list(bench.BASELINES)
    assert all(b["status"] == "n/a" and b["ms"] is None for r in data["results"] for b in r["baselines"])
    assert all(r["impl"] == "numpy" and r["accum"] == "fp32" for r in data["results"])
    assert all(r["cos"] > 0.9999 and r["max_abs"] == r["err"] and r["lowp"] is None and r["bound_ok"] is None
               for r in data["results"])
    assert data["config"]["impl"] == "auto" and data["config"]["accum"] == "fp32"
    assert "version" in data["build_info"]
    png = out_dir / "bench_tflops.png"
    if png.exists():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        pytest.importorskip("matplotlib")
        pytest.fail("matplotlib is installed but no plot was written")
    assert "wrote" in capsys.readouterr().err


def test_impl_the_gpu_cannot_run_exits_2(install_extension, monkeypatch, capsys):
    """impl="tma" where the device has no TMA code: the library's UnsupportedImplError, exit 2."""
    from ffpa_attn import UnsupportedImplError

    install_extension()

    def refuse(args, log):
        raise UnsupportedImplError("impl='tma': this library has TMA code for 120f only")

    monkeypatch.setattr(bench, "_run_cuda", refuse)
    assert bench.main(["--backend", "cuda", "--D", "128", "--cuda-impl", "tma"]) == 2
    assert capsys.readouterr().err.startswith("--cuda-impl tma: impl='tma': this library has TMA code for 120f")


class _TorchWithGpu:
    """Just what sdpa_only_reason asks of torch."""

    class cuda:  # noqa: N801 - mirrors torch.cuda
        available = True

        @classmethod
        def is_available(cls):
            return cls.available


def test_pure_wheel_with_a_gpu_times_sdpa_and_says_so(no_extension):
    reason = bench.sdpa_only_reason(_TorchWithGpu)
    assert reason.startswith("pure wheel: ") and "times SDPA only" in reason and "kernel=sdpa" in reason
    # The CUDA line pinned to the local version (cmake/install-lines.json).
    assert re.search(r"pip install ffpa-attn==\S+\+\S*cu\d+ --index-url", reason), reason
    assert bench.sdpa_only_reason(None) is None  # no torch: nothing to time


def test_sdpa_only_needs_the_pure_wheel_and_a_gpu(install_extension, monkeypatch):
    install_extension()
    assert bench.sdpa_only_reason(_TorchWithGpu) is None  # the CUDA wheel times its kernels
    install_extension(broken="undefined symbol: x")
    assert bench.sdpa_only_reason(_TorchWithGpu) is None  # a broken install is an error, not SDPA
    install_extension.absent()
    monkeypatch.setattr(_TorchWithGpu.cuda, "available", False)
    assert bench.sdpa_only_reason(_TorchWithGpu) is None  # no GPU: extension not available, exit 2


def test_sdpa_only_run_is_announced_and_runs(no_extension, monkeypatch, capsys):
    seen = {}

    def fake_run(args, torch, log, sdpa_only=False):
        seen["sdpa_only"] = sdpa_only
        return []

    monkeypatch.setattr(bench, "sdpa_only_reason", lambda torch: "pure wheel: this run times SDPA only")
    monkeypatch.setattr(bench, "_run_cuda_torch", fake_run)
    assert bench.main(["--backend", "cuda", "--D", "128", "--no-bwd"]) == 0
    assert seen == {"sdpa_only": True}
    assert capsys.readouterr().err.startswith("pure wheel: this run times SDPA only")


def test_baselines_flag_spellings():
    assert bench.parse_baselines("all") == bench.BASELINES
    assert bench.parse_baselines("none") == ()
    # Any order and either spelling; the result keeps the table's order.
    assert bench.parse_baselines("default,sdpa-flash,math") == ("sdpa-flash", "sdpa-math", "sdpa-default")
    with pytest.raises(ValueError, match="'fa3' is not one of flash, efficient, cudnn, math, default"):
        bench.parse_baselines("flash,fa3")


def test_unknown_baseline_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--backend", "reference", "--baselines", "xformers"])
    assert exc.value.code == 2 and "'xformers' is not one of" in capsys.readouterr().err


def test_without_torch_every_baseline_says_na_and_why(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    rc = bench.main(["--backend", "reference", "--N", "16", "--H", "1", "--D", "64", "--iters", "1", "--warmup", "0",
                     "--baselines", "flash,default", "--verbose"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert bench.LINE_RE.match(lines[0])["sdpa_ms"] == "n/a"
    assert lines[1:] == ["    vs sdpa-flash: n/a (torch is not importable (pip install torch to time SDPA))",
                         "    vs sdpa-default: n/a (torch is not importable (pip install torch to time SDPA))"]


def test_result_line_names_its_baseline():
    fa2 = bench.Baseline("sdpa-flash", 2.0, 100.0, device="cuda")
    cudnn = bench.Baseline("sdpa-cudnn", None, None, reason="refused by torch: head dim 512", device="cuda")
    default = bench.Baseline("sdpa-default", 1.0, 400.0, kernel="cudnn_generated_sdpa_sm90", device="cuda")
    r = bench.Result("cuda", "fwd", "fp16", "tma", 1, 32, 32, 8192, 8192, 128, False, 0.001, 0.02, True,
                     1.0, 1.0, 200.0, 400.0, baselines=[fa2, cudnn, default])
    match = bench.LINE_RE.match(r.line())
    assert match["baseline"] == "sdpa-default[cudnn_generated_sdpa_sm90]" and match["ratio"] == "0.50x"
    assert r.baseline_lines() == ["    vs sdpa-flash: 2.000ms 100.00 TFLOPS, 2.00x FA2(sdpa-flash)",
                                  "    vs sdpa-cudnn: n/a (refused by torch: head dim 512)",
                                  "    vs sdpa-default: 1.000ms 400.00 TFLOPS, 0.50x "
                                  "sdpa-default[cudnn_generated_sdpa_sm90]"]
    assert r.short_line().endswith("(sdpa-default[cudnn_generated_sdpa_sm90] 400.00, 0.50x "
                                   "sdpa-default[cudnn_generated_sdpa_sm90])")
    # On a CPU torch's flash backend is its CPU kernel, not FlashAttention-2.
    assert bench.Baseline("sdpa-flash", 1.0, 1.0, device="cpu").label == "sdpa-flash"


def test_dispatch_kernel_from_a_fake_profile():
    from types import SimpleNamespace as Ev

    cuda, cpu = "DeviceType.CUDA", "DeviceType.CPU"
    events = [Ev(name="aten::scaled_dot_product_attention", device_type=cpu),
              Ev(name="aten::_scaled_dot_product_flash_attention", device_type=cpu),
              Ev(name="aten::empty", device_type=cpu),
              Ev(name="void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)",
                 device_type=cuda),
              Ev(name="void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, false>"
                      "(pytorch_flash::Flash_fwd_params)", device_type=cuda),
              Ev(name="Memcpy DtoD (Device -> Device)", device_type=cuda)]
    assert bench.sdpa_dispatch_from_events(events) == ("aten::_scaled_dot_product_flash_attention",
                                                       "flash_fwd_kernel")
    # The math path has no attention kernel: all its kernels name it, in launch order.
    math_events = [Ev(name="aten::_scaled_dot_product_attention_math", device_type=cpu),
                   Ev(name="sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", device_type=cuda),
                   Ev(name="void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>(float*)",
                      device_type=cuda),
                   Ev(name="sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", device_type=cuda)]
    assert bench.sdpa_dispatch_from_events(math_events) == (
        "aten::_scaled_dot_product_attention_math",
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64+cunn_SoftMaxForward")
    # A CPU profile has no kernels: the op names what ran.
    assert bench.sdpa_dispatch_from_events(events[:3]) == ("aten::_scaled_dot_product_flash_attention",
                                                           "_scaled_dot_product_flash_attention")
    assert bench.sdpa_dispatch_from_events([]) == (None, None)


# --- accuracy columns and the low-precision rows ----------------------------------------


def test_accuracy_metrics():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((2, 3, 5))
    assert bench.accuracy(ref.copy(), ref) == (pytest.approx(1.0), 0.0, 0.0)
    cos, rel_l1, max_abs = bench.accuracy(2 * ref, ref)  # same direction, twice the size
    assert cos == pytest.approx(1.0) and rel_l1 == pytest.approx(1.0) and max_abs == pytest.approx(np.abs(ref).max())
    out = ref + np.where(np.arange(ref.size).reshape(ref.shape) == 7, 0.5, 0.0)
    cos, rel_l1, max_abs = bench.accuracy(out, ref)
    assert rel_l1 == pytest.approx(0.5 / np.abs(ref).sum()) and max_abs == pytest.approx(0.5)
    assert cos == pytest.approx(float((out * ref).sum() / np.sqrt((out * out).sum() * (ref * ref).sum())))
    assert bench.accuracy(np.array([1.0, 0.0]), np.array([0.0, 1.0]))[0] == 0.0  # orthogonal
    assert bench.accuracy(-ref, ref)[0] == pytest.approx(-1.0)
    zero = np.zeros(4)
    assert bench.accuracy(zero, zero) == (1.0, 0.0, 0.0)
    assert bench.accuracy(np.ones(4), zero)[:2] == (0.0, math.inf)
    nan = bench.accuracy(np.array([np.nan, 1.0]), np.array([1.0, 1.0]))
    assert math.isnan(nan[0]) and math.isnan(nan[1])


@pytest.mark.parametrize("hq,heads", [(32, [0, 10, 21, 31]), (4, [0, 1, 2, 3]), (3, [0, 1, 2]), (5, [0, 1, 3, 4]),
                                      (1, [0])])
def test_reference_heads_are_spread_over_the_query_heads(hq, heads):
    assert bench.reference_heads(hq) == heads


# Bounds for these tests only (LOWP_BOUNDS is empty until the measurement states the real ones).
TEST_BOUNDS = {"fp8": (0.999, 3e-2), "fp4": (0.99, None)}


@pytest.fixture
def bounds(monkeypatch):
    monkeypatch.setattr(bench, "LOWP_BOUNDS", dict(TEST_BOUNDS))


def _lowp_result(cos, rel_l1, lowp="fp8", err=0.03, impl="cute_tma_fp8"):
    return bench.Result("cuda", "fwd", "fp16", impl, 1, 32, 8, 8192, 8192, 512, False, err, 0.02, err <= 0.02,
                        5.0, 20.0, 400.0, 100.0, cos=cos, rel_l1=rel_l1, max_abs=0.0312, ref="b0:h0,10,21,31",
                        lowp=lowp)


def test_lowp_line_carries_accuracy_columns_and_the_bound(bounds):
    line = _lowp_result(0.999612, 1.2344e-2).line()
    assert line.endswith("kernel=cute_tma_fp8 accum=fp32 cos=0.999612 rel_l1=1.234e-02 max_abs=3.120e-02 "
                         "ref=b0:h0,10,21,31 bound(cos>=0.999,rel_l1<=0.03)=True")
    match = bench.LINE_RE.match(line)
    assert match, line
    assert (match["kernel"], match["cos"], match["rel_l1"], match["max_abs"], match["ref"]) == (
        "cute_tma_fp8", "0.999612", "1.234e-02", "3.120e-02", "b0:h0,10,21,31")
    assert (match["bound"], match["bound_ok"], match["allclose"]) == ("cos>=0.999,rel_l1<=0.03", "True", "False")
    # With the named baseline in between, the columns still parse.
    with_baseline = _lowp_result(0.9995, 1e-2)
    with_baseline.baselines = [bench.Baseline("sdpa-default", 20.0, 100.0, kernel="flash_fwd_kernel")]
    match = bench.LINE_RE.match(with_baseline.line())
    assert match["baseline"] == "sdpa-default[flash_fwd_kernel]" and match["cos"] == "0.999500"
    # NVFP4 is held to its cosine only.
    fp4 = _lowp_result(0.9931, 0.08, lowp="fp4", impl="cute_tma_fp4")
    assert fp4.line().endswith(" bound(cos>=0.99)=True") and fp4.passed


@pytest.mark.parametrize(
    "cos,rel_l1,lowp,passed",
    [
        (0.9995, 0.02, "fp8", True),  # within: its max abs error (0.03 > atol) does not decide
        (0.9985, 0.02, "fp8", False),  # cosine below the bound
        (0.9995, 0.031, "fp8", False),  # relative L1 above the bound
        (float("nan"), float("nan"), "fp8", False),  # a NaN output is never within
        (float("nan"), float("nan"), "fp4", False),  # not even without a relative L1 bound
        (0.989, 0.0, "fp4", False),
        (0.991, 0.5, "fp4", True),
    ],
)
def test_lowp_rows_are_judged_by_their_bound(bounds, cos, rel_l1, lowp, passed):
    result = _lowp_result(cos, rel_l1, lowp=lowp)
    assert result.bound == TEST_BOUNDS[lowp]
    assert result.bound_ok is passed and result.passed is passed
    assert bench.LINE_RE.match(result.line())["bound_ok"] == str(passed)


def test_other_rows_keep_allclose_as_their_verdict(bounds):
    result = _lowp_result(0.5, 0.9, lowp=None, impl="tma")
    assert result.bound is None and result.bound_ok is None and result.passed is False  # err 0.03 > atol 0.02
    match = bench.LINE_RE.match(result.line())
    assert match["cos"] == "0.500000" and match["bound"] is None


@pytest.mark.parametrize("err,passed", [(0.03, False), (0.01, True)])
def test_lowp_rows_without_a_stated_bound_are_judged_by_allclose(monkeypatch, err, passed):
    monkeypatch.setattr(bench, "LOWP_BOUNDS", {"fp4": (0.99, None)})  # none for fp8
    result = _lowp_result(0.9999, 1e-3, err=err)
    assert result.bound is None and result.bound_ok is None and result.passed is passed
    match = bench.LINE_RE.match(result.line())
    assert match["cos"] == "0.999900" and match["bound"] is None and match["allclose"] == str(passed)


@pytest.mark.parametrize("cos,rc", [(0.9995, 0), (0.99, 1)])
def test_exit_status_of_lowp_rows_follows_the_bound(install_extension, monkeypatch, bounds, capsys, cos, rc):
    install_extension({**DEFAULT_INFO, "fp8": True, "fp8_archs": ["89", "120f"],
                       "impls": [*DEFAULT_INFO["impls"], "cute_fp8", "cute_tma_fp8", "fp8"]})
    monkeypatch.setattr(bench, "_run_cuda", lambda args, log: [_lowp_result(cos, 0.02)])
    assert bench.main(["--backend", "cuda", "--D", "512", "--cuda-impl", "fp8", "--verbose"]) == rc
    out, err = capsys.readouterr()
    assert bench.LINE_RE.match(out.splitlines()[0])["bound_ok"] == str(rc == 0)
    if rc:
        assert "MISMATCH: fwd fp16 D=512 (cute_tma_fp8, fp8) cos=0.990000 rel_l1=2.000e-02 outside the bound " \
               "cos >= 0.999, rel_l1 <= 0.03 (ref b0:h0,10,21,31)" in err
    else:
        assert "MISMATCH" not in err


