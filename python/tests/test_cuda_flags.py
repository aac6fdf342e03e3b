"""ffpa_attn.cuda reads everything from the extension, and is all-False without it."""

from __future__ import annotations

from conftest import DEFAULT_INFO

import ffpa_attn
from ffpa_attn import cuda


def test_flags_without_extension(no_extension):
    assert cuda.extension() is None
    assert cuda.EXTENSION_IMPORT_ERROR is None
    assert cuda.CUDA_FWD_AVAILABLE is False
    assert cuda.CUDA_TMA_AVAILABLE is False and cuda.TMA_ARCHS == ()
    assert cuda.F16_ACC_AVAILABLE is False
    assert cuda.CUDA_CUTE_TMA_AVAILABLE is False and cuda.CUDA_CUTE_AVAILABLE is False
    assert cuda.CUTLASS_VERSION is None
    assert cuda.COMPILED_HEAD_DIMS == () and cuda.COMPILED_DTYPES == () and cuda.COMPILED_ARCHS == ()
    assert cuda.COMPILED_IMPLS == ()
    assert cuda.CUDA_RUNTIME is None and cuda.EXTENSION_PATH is None
    assert cuda.device_count() == 0 and cuda.auto_impl() is None
    info = ffpa_attn.build_info()
    assert info["fwd"] is False and info["head_dims"] == [] and info["extension_available"] is False
    assert info["tma"] is False and info["tma_archs"] == [] and info["f16_acc"] is False


def test_flags_of_the_release_build(install_extension):
    """The release compiles 89 and 120f: TMA code for the sm_120 family, fp16 accumulation."""
    install_extension(dict(DEFAULT_INFO), devices=3)
    assert cuda.CUDA_FWD_AVAILABLE is True
    assert cuda.CUDA_TMA_AVAILABLE is True and cuda.TMA_ARCHS == ("120f",)
    assert cuda.F16_ACC_AVAILABLE is True
    assert cuda.CUDA_CUTE_AVAILABLE is True and cuda.CUDA_CUTE_TMA_AVAILABLE is True
    assert cuda.CUTLASS_VERSION == "4.2.0"
    assert cuda.COMPILED_HEAD_DIMS == (64, 128, 256, 320, 512)
    assert cuda.COMPILED_DTYPES == ("fp16", "bf16")
    assert cuda.COMPILED_ARCHS == ("89", "120f")
    assert cuda.COMPILED_IMPLS == ("mma", "simt", "tma", "cute", "cute_tma")
    assert cuda.CUDA_RUNTIME == "13.0"
    assert cuda.device_count() == 3
    assert cuda.EXTENSION_PATH == "/fake/ffpa_attn/_C.so"
    info = ffpa_attn.build_info()
    assert info["archs"] == ["89", "120f"] and info["extension_available"] is True
    assert info["tma"] is True and info["tma_archs"] == ["120f"] and info["f16_acc"] is True
    assert info["impls"] == ["mma", "simt", "tma", "cute", "cute_tma"]
    assert info["auto_impl"].startswith("tma on sm_120-family GPUs")


def test_flags_of_a_build_without_tma(install_extension):
    install_extension(
        {"head_dims": [512, 64], "dtypes": ["bf16"], "archs": ["89"], "fwd": True, "tma": False,
         "tma_archs": [], "f16_acc": False, "cute_tma": False, "cuda_runtime": "13.0",
         "impls": ["mma", "simt"]},
    )
    assert cuda.CUDA_TMA_AVAILABLE is False and cuda.TMA_ARCHS == ()
    assert cuda.F16_ACC_AVAILABLE is False
    assert cuda.COMPILED_HEAD_DIMS == (64, 512)
    assert cuda.COMPILED_IMPLS == ("mma", "simt")


def test_flags_only_when_extension_says_so(install_extension):
    """Flags come from build_info(), never from the archs or the GPU: a key it omits is False."""
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["90a"], "fwd": True,
                       "cuda_runtime": "13.0", "impls": ["mma"]})
    assert cuda.CUDA_TMA_AVAILABLE is False and cuda.TMA_ARCHS == () and cuda.F16_ACC_AVAILABLE is False
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["90a"], "fwd": True, "tma": True,
                       "tma_archs": ["90a"], "f16_acc": True, "cute_tma": False, "cuda_runtime": "13.0",
                       "impls": ["mma", "tma"]})
    assert cuda.CUDA_TMA_AVAILABLE is True and cuda.TMA_ARCHS == ("90a",)
    assert cuda.F16_ACC_AVAILABLE is True and cuda.CUDA_CUTE_TMA_AVAILABLE is False


def test_auto_impl_asks_the_extension(install_extension):
    ext = install_extension()
    assert cuda.auto_impl() == "mma"
    ext.auto = "tma"
    assert cuda.auto_impl() == "tma"
    install_extension(devices=0)
    assert cuda.auto_impl() is None


def test_broken_extension_is_reported_not_hidden(install_extension):
    install_extension(broken="libffpa_kernels.so: undefined symbol: _ZN4ffpa7forwardEv")
    assert cuda.extension() is None
    assert cuda.CUDA_FWD_AVAILABLE is False
    assert "undefined symbol" in cuda.EXTENSION_IMPORT_ERROR
    assert ffpa_attn.build_info()["extension_import_error"] == cuda.EXTENSION_IMPORT_ERROR
