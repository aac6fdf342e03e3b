"""ffpa_attn.cuda reads everything from the extension, and is all-False without it."""

from __future__ import annotations

import ffpa_attn
from ffpa_attn import cuda


def test_flags_without_extension(no_extension):
    assert cuda.extension() is None
    assert cuda.EXTENSION_IMPORT_ERROR is None
    assert cuda.CUDA_FWD_AVAILABLE is False
    assert cuda.CUDA_TMA_AVAILABLE is False
    assert cuda.CUDA_CUTE_TMA_AVAILABLE is False
    assert cuda.COMPILED_HEAD_DIMS == () and cuda.COMPILED_DTYPES == () and cuda.COMPILED_ARCHS == ()
    assert cuda.CUDA_RUNTIME is None and cuda.EXTENSION_PATH is None
    assert cuda.device_count() == 0
    info = ffpa_attn.build_info()
    assert info["fwd"] is False and info["head_dims"] == [] and info["extension_available"] is False


def test_flags_read_from_extension(install_extension):
    install_extension(
        {"head_dims": [512, 64], "dtypes": ["fp16", "bf16"], "archs": ["89", "120f"], "fwd": True,
         "tma": False, "cute_tma": False, "cuda_runtime": "13.0", "impls": ["mma", "simt"]},
        devices=3,
    )
    assert cuda.CUDA_FWD_AVAILABLE is True
    assert cuda.CUDA_TMA_AVAILABLE is False and cuda.CUDA_CUTE_TMA_AVAILABLE is False
    assert cuda.COMPILED_HEAD_DIMS == (64, 512)
    assert cuda.COMPILED_DTYPES == ("fp16", "bf16")
    assert cuda.COMPILED_ARCHS == ("89", "120f")
    assert cuda.COMPILED_IMPLS == ("mma", "simt")
    assert cuda.CUDA_RUNTIME == "13.0"
    assert cuda.device_count() == 3
    assert cuda.EXTENSION_PATH == "/fake/ffpa_attn/_C.so"
    info = ffpa_attn.build_info()
    assert info["archs"] == ["89", "120f"] and info["extension_available"] is True


def test_tma_flag_only_when_extension_says_so(install_extension):
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["90a"], "fwd": True, "tma": True,
                       "cute_tma": False, "cuda_runtime": "13.0", "impls": ["mma"]})
    assert cuda.CUDA_TMA_AVAILABLE is True and cuda.CUDA_CUTE_TMA_AVAILABLE is False


def test_broken_extension_is_reported_not_hidden(install_extension):
    install_extension(broken="libffpa_kernels.so: undefined symbol: _ZN4ffpa7forwardEv")
    assert cuda.extension() is None
    assert cuda.CUDA_FWD_AVAILABLE is False
    assert "undefined symbol" in cuda.EXTENSION_IMPORT_ERROR
    assert ffpa_attn.build_info()["extension_import_error"] == cuda.EXTENSION_IMPORT_ERROR
