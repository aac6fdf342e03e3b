"""ffpa_attn.cuda reads everything from the extension, and is all-False without it."""

from __future__ import annotations

import pytest
from conftest import DEFAULT_INFO

import ffpa_attn
from ffpa_attn import cuda


def test_flags_without_extension(no_extension):
    assert cuda.extension() is None
    assert cuda.EXTENSION_IMPORT_ERROR is None
    assert cuda.CUDA_FWD_AVAILABLE is False
    assert cuda.CUDA_BWD_AVAILABLE is False and cuda.BWD_INSTANCES == ()
    assert cuda.CUDA_TMA_AVAILABLE is False and cuda.TMA_ARCHS == ()
    assert cuda.F16_ACC_AVAILABLE is False
    assert cuda.CUDA_CUTE_TMA_AVAILABLE is False and cuda.CUDA_CUTE_AVAILABLE is False
    assert cuda.CUDA_FP8_AVAILABLE is False and cuda.FP8_ARCHS == ()
    assert cuda.CUDA_FP4_AVAILABLE is False and cuda.FP4_ARCHS == ()
    assert cuda.CUTLASS_VERSION is None
    assert cuda.COMPILED_HEAD_DIMS == () and cuda.COMPILED_DTYPES == () and cuda.COMPILED_ARCHS == ()
    assert cuda.COMPILED_IMPLS == ()
    assert cuda.CUDA_RUNTIME is None and cuda.EXTENSION_PATH is None
    assert cuda.device_count() == 0 and cuda.auto_impl() is None
    info = ffpa_attn.build_info()
    assert info["fwd"] is False and info["head_dims"] == [] and info["extension_available"] is False
    assert info["tma"] is False and info["tma_archs"] == [] and info["f16_acc"] is False
    assert (info["fp8"], info["fp8_archs"], info["fp4"], info["fp4_archs"]) == (False, [], False, [])
    assert info["cute"] is False


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


def test_lowp_flags_of_a_build_with_the_kernels(install_extension):
    """A release-like build with the FP8 and NVFP4 kernels: every flag as build_info says."""
    install_extension({**DEFAULT_INFO, "fp8": True, "fp8_archs": ["89", "120f"], "fp4": True, "fp4_archs": ["120f"],
                       "impls": [*DEFAULT_INFO["impls"], "cute_fp8", "cute_tma_fp8", "fp8", "cute_tma_fp4", "fp4"]})
    assert cuda.CUDA_FP8_AVAILABLE is True and cuda.FP8_ARCHS == ("89", "120f")
    assert cuda.CUDA_FP4_AVAILABLE is True and cuda.FP4_ARCHS == ("120f",)
    assert cuda.COMPILED_IMPLS[-5:] == ("cute_fp8", "cute_tma_fp8", "fp8", "cute_tma_fp4", "fp4")
    info = ffpa_attn.build_info()
    assert (info["fp8"], info["fp8_archs"], info["fp4"], info["fp4_archs"]) == (True, ["89", "120f"], True, ["120f"])


def test_lowp_flags_are_read_not_inferred(install_extension):
    """The archs without the kernels (this build before they land): the flags stay False, the
    archs tuples are build_info's as they are; an extension without the keys reports nothing."""
    install_extension({**DEFAULT_INFO, "fp8": False, "fp8_archs": ["89", "120f"], "fp4": False, "fp4_archs": ["120f"]})
    assert cuda.CUDA_FP8_AVAILABLE is False and cuda.FP8_ARCHS == ("89", "120f")
    assert cuda.CUDA_FP4_AVAILABLE is False and cuda.FP4_ARCHS == ("120f",)
    install_extension(dict(DEFAULT_INFO))  # an older extension: no fp8/fp4 keys at all
    assert cuda.CUDA_FP8_AVAILABLE is False and cuda.FP8_ARCHS == ()
    assert cuda.CUDA_FP4_AVAILABLE is False and cuda.FP4_ARCHS == ()
    install_extension({**DEFAULT_INFO, "fp8": True, "fp8_archs": ["90a"], "fp4": False, "fp4_archs": []})
    assert cuda.CUDA_FP8_AVAILABLE is True and cuda.FP8_ARCHS == ("90a",) and cuda.CUDA_FP4_AVAILABLE is False


def test_the_built_extension_parses_every_impl_spelling():
    """The real ffpa_attn._C of a build tree (python.unit's PYTHONPATH): every impl of the API is
    one of its spellings (parsed before the arrays are read), in the C API's order, and its
    build_info has the low-precision keys."""
    from ffpa_attn import UnsupportedArrayTypeError, UnsupportedImplError
    from ffpa_attn.interface import IMPLS

    ext = cuda.extension()
    if ext is None or type(ext).__name__ == "FakeExtension":
        pytest.skip("no built ffpa_attn._C here (source tree or pure wheel)")
    for impl in IMPLS:
        with pytest.raises(UnsupportedArrayTypeError):  # the spelling passed; the array did not
            ext.forward(object(), object(), object(), object(), None, False, 0.1, impl)
    with pytest.raises(UnsupportedImplError) as info:
        ext.forward(object(), object(), object(), object(), None, False, 0.1, "fp6")
    assert str(info.value) == "impl='fp6' is not one of " + ", ".join(f"'{i}'" for i in IMPLS)
    built = ext.build_info()
    assert isinstance(built["fp8"], bool) and isinstance(built["fp4"], bool)
    assert set(built["fp4_archs"]) <= set(built["fp8_archs"]) <= set(built["archs"])
    assert cuda.CUDA_FP8_AVAILABLE is built["fp8"] and cuda.FP8_ARCHS == tuple(built["fp8_archs"])
    assert cuda.CUDA_FP4_AVAILABLE is built["fp4"] and cuda.FP4_ARCHS == tuple(built["fp4_archs"])
    # Low-precision impls are listed exactly when their flag is True (never picked by auto).
    assert ("fp8" in built["impls"]) is built["fp8"] and ("fp4" in built["impls"]) is built["fp4"]
    assert "fp8" not in built["auto_impl"].split(";")[0]
