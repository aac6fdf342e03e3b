"""ffpa_attn_func: host paths, and validation of CUDA inputs before the extension runs.

CUDA arrays are simulated by a small CuPy-like type exporting __cuda_array_interface__
and __dlpack_device__; the extension by the conftest FakeExtension, or, where the
extension's own validation (its messages) is under test, the built one
(``install_extension.real()``).
"""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest
from conftest import DEFAULT_INFO

from ffpa_attn import (
    DeviceError,
    ExtensionNotAvailableError,
    ShapeError,
    SlowPathWarning,
    UnsupportedArrayTypeError,
    UnsupportedDTypeError,
    UnsupportedFeatureError,
    UnsupportedHeadDimError,
    UnsupportedImplError,
    UnsupportedLayoutError,
    ffpa_attn_func,
    reference,
)

fakecu = types.ModuleType("fakecu")


class FakeCudaArray:
    """Just enough of a CuPy array: shape, dtype, CAI strides, a DLPack device."""

    def __init__(self, shape, dtype="float16", device=0, strides=None):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.device_id = device
        self._strides = strides

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (0, False),
                "strides": self._strides, "version": 3}

    def __dlpack_device__(self):
        return (2, self.device_id)


FakeCudaArray.__module__ = "fakecu"


def _empty_like(x):
    return FakeCudaArray(x.shape, x.dtype, x.device_id)


def _empty(shape, dtype):
    return FakeCudaArray(shape, dtype)


fakecu.FakeCudaArray = FakeCudaArray
fakecu.empty_like = _empty_like
fakecu.empty = _empty


@pytest.fixture(autouse=True)
def _fake_framework(monkeypatch):
    monkeypatch.setitem(sys.modules, "fakecu", fakecu)


def qkv(b=1, hq=4, hkv=4, nq=16, nkv=16, d=128, dtype="float16"):
    return (FakeCudaArray((b, hq, nq, d), dtype), FakeCudaArray((b, hkv, nkv, d), dtype),
            FakeCudaArray((b, hkv, nkv, d), dtype))


def real_head_dim(install_extension):
    """Install the built extension; a head dim it has."""
    return install_extension.real().build_info()["head_dims"][0]


# --- host paths -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_numpy_inputs_use_the_reference(dtype):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 4, 9, 40)).astype(dtype)
    k = rng.standard_normal((1, 2, 11, 40)).astype(dtype)
    v = rng.standard_normal((1, 2, 11, 40)).astype(dtype)
    out, lse = ffpa_attn_func(q, k, v, enable_gqa=True, scale=0.2, return_lse=True)
    compute = np.float64 if dtype == np.float64 else np.float32
    want, want_lse = reference.attention(q, k, v, scale=0.2, return_lse=True, dtype=compute)
    assert out.dtype == dtype and lse.dtype == np.float32 and lse.shape == (1, 4, 9)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-6)


def test_numpy_inputs_validate_shapes():
    x = np.zeros((1, 3, 4, 8), np.float32)
    y = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(ShapeError, match="multiple of the number of kv heads"):
        ffpa_attn_func(x, y, y)


def test_numpy_integer_inputs_rejected():
    x = np.zeros((1, 1, 4, 8), np.int64)
    with pytest.raises(UnsupportedDTypeError):
        ffpa_attn_func(x, x, x)


def test_unknown_objects_rejected():
    with pytest.raises(UnsupportedArrayTypeError, match="NumPy arrays"):
        ffpa_attn_func(object(), object(), object())


def test_bad_impl_rejected_before_anything():
    x = np.zeros((1, 1, 4, 8), np.float32)
    with pytest.raises(UnsupportedImplError, match="auto"):
        ffpa_attn_func(x, x, x, impl="fast")


def test_mixed_host_and_cuda_is_a_device_error():
    q, k, v = qkv()
    with pytest.raises(DeviceError, match="all be on the GPU or all on the host"):
        ffpa_attn_func(q, np.zeros(k.shape, np.float16), v)


# --- CUDA inputs without the extension (the pure wheel) ---------------------------------


def test_cuda_inputs_without_extension_name_the_cuda_wheel(no_extension):
    with pytest.raises(ExtensionNotAvailableError) as info:
        ffpa_attn_func(*qkv())
    message = str(info.value)
    assert "/whl/cu" in message and "pip install" in message


def test_broken_extension_message_carries_the_loader_error(install_extension):
    install_extension(broken="undefined symbol: cudaLaunchKernel")
    with pytest.raises(ExtensionNotAvailableError, match="undefined symbol: cudaLaunchKernel"):
        ffpa_attn_func(*qkv())


def test_without_the_extension_cuda_inputs_name_the_install(no_extension):
    # The extension is the one judge of CUDA arguments: without it even bad shapes are told
    # what to install (NumPy arrays get the host path's own shape check).
    q, k, v = qkv(hq=3, hkv=2)
    with pytest.raises(ExtensionNotAvailableError):
        ffpa_attn_func(q, k, v)


# --- CUDA inputs with a (fake) extension ------------------------------------------------


def test_no_cuda_device(install_extension):
    ext = install_extension(devices=0)
    with pytest.raises(DeviceError, match="no CUDA device"):
        ffpa_attn_func(*qkv())
    assert ext.calls == []


def test_head_dim_not_compiled_lists_the_compiled_set(install_extension):
    ext = install_extension.real()
    dims = ext.build_info()["head_dims"]
    with pytest.raises(UnsupportedHeadDimError) as info:
        ffpa_attn_func(*qkv(d=96))
    assert f"this build has {dims}" in str(info.value) and "FFPA_HEAD_DIMS" in str(info.value)


@pytest.mark.parametrize(
    "make,error,pattern",
    [
        (lambda d: (FakeCudaArray((1, 4, 16)),) * 3, ShapeError, "q must be 4-D"),
        (lambda d: qkv(hq=6, hkv=4, d=d), ShapeError, r"Hq % Hkv == 0"),
        (lambda d: (FakeCudaArray((1, 4, 16, d)), FakeCudaArray((2, 4, 16, d)), FakeCudaArray((2, 4, 16, d))),
         ShapeError, "batch and head dim must match"),
        (lambda d: (FakeCudaArray((1, 4, 16, d)), FakeCudaArray((1, 4, 16, d + 64)), FakeCudaArray((1, 4, 16, d + 64))),
         ShapeError, "batch and head dim must match"),
        (lambda d: (FakeCudaArray((1, 4, 16, d)), FakeCudaArray((1, 4, 16, d)), FakeCudaArray((1, 4, 8, d))),
         ShapeError, "must have the same shape"),
        (lambda d: qkv(dtype="float32", d=d), UnsupportedDTypeError,
         "q has dtype fp32; the CUDA kernels take fp16 or bf16"),
        (lambda d: (FakeCudaArray((1, 4, 16, d)), FakeCudaArray((1, 4, 16, d), "float32"),
                    FakeCudaArray((1, 4, 16, d))), UnsupportedDTypeError, "k has dtype fp32"),
        (lambda d: (FakeCudaArray((1, 4, 16, d), strides=(32768, 512, 16 * 512 * 4, 4)),
                    *qkv(d=d)[1:]), UnsupportedLayoutError, "q must have a unit-stride last dim"),
        (lambda d: (FakeCudaArray((1, 4, 16, d), device=1), *qkv(d=d)[1:]), DeviceError, "same CUDA device"),
    ],
)
def test_validation_before_launch(install_extension, make, error, pattern):
    """The extension's validation (its messages) refuses before anything is allocated."""
    d = real_head_dim(install_extension)
    with pytest.raises(error, match=pattern):
        ffpa_attn_func(*make(d))


def test_the_extensions_answer_is_raised_as_it_is(install_extension):
    """launch.check hands the extension the arrays' shapes, strides, dtypes, impl and accum,
    and raises exactly the error it answers."""
    from ffpa_attn import launch

    ext = install_extension()
    strides = (16 * 4 * 128 * 2, 128 * 2, 4 * 128 * 2, 2)  # [B, N, H, D] memory viewed as [B, H, N, D]
    descs = {n: launch.describe(a) for n, a in zip("qkv", (FakeCudaArray((1, 4, 16, 128), strides=strides),
                                                           *qkv()[1:]))}
    assert launch.check(descs, "fp8", "fp32") == (1, 4, 4, 16, 16, 128)
    assert ext.validations == [(((1, 4, 16, 128), (8192, 128, 512, 1), "fp16"), ((1, 4, 16, 128), None, "fp16"),
                                ((1, 4, 16, 128), None, "fp16"), "fp8", "fp32")]
    ext.problem = UnsupportedLayoutError("the library's own words")
    with pytest.raises(UnsupportedLayoutError, match="the library's own words"):
        ffpa_attn_func(*qkv())
    assert ext.calls == []


def test_impl_not_in_build(install_extension):
    """An impl the build has no code for is refused by the extension's validation, with the fix."""
    from ffpa_attn.interface import IMPLS

    d = real_head_dim(install_extension)
    info = install_extension.real().build_info()
    # cute_fp8 in a build of the sm_120 family only is the launch's refusal (the device check
    # of csrc/src/forward.cpp), not the validation's.
    missing = [i for i in IMPLS if i not in ("auto", "cute_fp8") and i not in info["impls"]]
    if not missing:
        pytest.skip("this build has every impl")
    for impl in missing:
        with pytest.raises(UnsupportedImplError, match=rf"impl='{impl}'.* was not compiled in this build") as err:
            ffpa_attn_func(*qkv(d=d), impl=impl)
        if impl in ("tma", "cute_tma"):
            assert f"archs {' '.join(info['archs'])}; TMA code needs an arch >= 90" in str(err.value)


def test_forward_call_contract(install_extension):
    ext = install_extension()
    q, k, v = qkv(b=2, hq=8, hkv=2, nq=33, nkv=70, d=128)
    out, lse = ffpa_attn_func(q, k, v, attn_mask=None, is_causal=False, enable_gqa=True, return_lse=True,
                              impl="simt")
    assert len(ext.calls) == 1
    cq, ck, cv, cout, clse, causal, scale, impl = ext.calls[0]
    assert (cq, ck, cv) == (q, k, v)
    assert cout is out and clse is lse
    assert isinstance(out, FakeCudaArray) and out.shape == q.shape and out.dtype == np.float16
    assert lse.shape == (2, 8, 33) and lse.dtype == np.float32
    assert causal is False and impl == "simt"
    assert scale == pytest.approx(1 / np.sqrt(128))


def test_forward_without_lse_passes_none_and_explicit_scale(install_extension):
    ext = install_extension()
    out = ffpa_attn_func(*qkv(), scale=0.5)
    assert isinstance(out, FakeCudaArray)
    assert ext.calls[0][4] is None and ext.calls[0][6] == 0.5 and ext.calls[0][7] == "auto"


def test_framework_without_allocator(install_extension, monkeypatch):
    install_extension()
    bare = types.ModuleType("fakecu")
    monkeypatch.setitem(sys.modules, "fakecu", bare)
    with pytest.raises(UnsupportedArrayTypeError, match="from_dlpack"):
        ffpa_attn_func(*qkv())


def test_strided_views_are_passed_through(install_extension):
    """A [B, N, H, D] buffer viewed as [B, H, N, D] (transpose(1, 2)) needs no copy."""
    ext = install_extension()
    b, n, h, d = 2, 16, 4, 128
    # Byte strides of the transposed view of a contiguous fp16 [B, N, H, D] array.
    strides = (n * h * d * 2, d * 2, h * d * 2, 2)
    q, k, v = (FakeCudaArray((b, h, n, d), strides=strides) for _ in range(3))
    out = ffpa_attn_func(q, k, v)
    assert ext.calls and ext.calls[0][:3] == (q, k, v)
    assert out.shape == (b, h, n, d)


def test_auto_fallback_to_simt_warns_and_is_reported(install_extension):
    from ffpa_attn.interface import last_kernel

    ext = install_extension()
    ffpa_attn_func(*qkv())
    assert last_kernel() == "mma"
    ext.kernel = "simt"
    with pytest.warns(SlowPathWarning, match="SIMT kernel"):
        ffpa_attn_func(*qkv())
    assert last_kernel() == "simt"
    # Asking for simt explicitly is not a surprise: no warning.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ffpa_attn_func(*qkv(), impl="simt")


class _FakeTorchTensor:
    """Enough of a CUDA torch.Tensor for the Python layer: DLPack export refuses grad."""

    def __init__(self, shape, requires_grad=False):
        self.shape = tuple(shape)
        self.dtype = "torch.float16"
        self.is_cuda = True
        self.device = types.SimpleNamespace(index=0, type="cuda")
        self.requires_grad = requires_grad

    def dim(self):
        return len(self.shape)

    def stride(self, i=None):
        strides = [1] * len(self.shape)
        for j in range(len(self.shape) - 2, -1, -1):
            strides[j] = strides[j + 1] * self.shape[j + 1]
        return tuple(strides) if i is None else strides[i]

    def detach(self):
        return _FakeTorchTensor(self.shape)

    def __dlpack__(self, stream=None):
        if self.requires_grad:  # torch's own message
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        return object()

    def __dlpack_device__(self):
        return (2, 0)


def test_tensors_that_require_grad_are_detached_for_export(install_extension, monkeypatch):
    """The launch layer (what the torch op runs on CUDA) exports tensors detached."""
    from ffpa_attn import launch

    fake_torch = types.ModuleType("torch")
    fake_torch.Tensor = _FakeTorchTensor
    fake_torch.float32 = "torch.float32"
    fake_torch.empty_like = lambda x: _FakeTorchTensor(x.shape)
    fake_torch.empty = lambda shape, dtype=None, device=None: _FakeTorchTensor(shape)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    ext = install_extension()
    q, k, v = (_FakeTorchTensor((1, 4, 16, 128), requires_grad=True) for _ in range(3))
    out = launch.forward(q, k, v, False, None, False, "auto", "fp32")
    assert len(ext.calls) == 1 and isinstance(out, _FakeTorchTensor)
    assert all(not t.requires_grad for t in ext.calls[0][:3])


def test_install_hints_name_the_release_channel(monkeypatch):
    """The channel comes from the build info (both wheel kinds carry it), never a literal."""
    from ffpa_attn import build_facts, launch

    fake = types.ModuleType("ffpa_attn._build_info")
    fake.CUDA_CHANNEL = "cu99"
    monkeypatch.setattr(build_facts, "GENERATED", fake)
    assert build_facts.cuda_channel() == "cu99"
    assert "/whl/cu99/" in launch.cuda_wheel_hint()


# --- impl="tma" and accum="fp16" --------------------------------------------------------


class _Bf16CudaArray(FakeCudaArray):
    """A CUDA bf16 array as CuPy-like libraries show it: no NumPy dtype for it."""

    def __init__(self, shape):
        super().__init__(shape, "V2")
        self.dtype = "bfloat16"

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": "|V2", "data": (0, False), "strides": None, "version": 3}


_Bf16CudaArray.__module__ = "fakecu"


def test_accum_is_passed_to_the_extension(install_extension):
    ext = install_extension()
    ffpa_attn_func(*qkv())
    ffpa_attn_func(*qkv(), impl="mma", accum="fp16")
    assert [c[7] for c in ext.calls] == ["auto", "mma"]
    assert ext.call_kwargs == [{"accum": "fp32"}, {"accum": "fp16"}]


@pytest.mark.parametrize("accum", ["f16", "FP16", "fp8", "", None])
def test_bad_accum_rejected_before_anything(install_extension, accum):
    ext = install_extension()
    for args in (qkv(), (np.zeros((1, 1, 4, 8), np.float32),) * 3):
        with pytest.raises(UnsupportedImplError, match=r"accum must be one of \['fp32', 'fp16'\]"):
            ffpa_attn_func(*args, accum=accum)
    assert ext.calls == []


def test_fp16_accum_with_simt_is_refused_everywhere(install_extension):
    d = real_head_dim(install_extension)
    with pytest.raises(UnsupportedImplError, match="tensor-core paths.*the SIMT kernel accumulates in fp32"):
        ffpa_attn_func(*qkv(d=d), impl="simt", accum="fp16")
    with pytest.raises(UnsupportedImplError, match="the host path .* always accumulates in fp32"):
        ffpa_attn_func(*(np.zeros((1, 1, 4, 8), np.float16),) * 3, impl="simt", accum="fp16")


@pytest.mark.parametrize("make", [lambda d: qkv(dtype="float32", d=d),
                                  lambda d: tuple(_Bf16CudaArray((1, 4, 16, d)) for _ in range(3))])
def test_fp16_accum_needs_fp16_inputs(install_extension, make):
    d = real_head_dim(install_extension)
    with pytest.raises(UnsupportedDTypeError):
        ffpa_attn_func(*make(d), accum="fp16")


def test_fp16_accum_on_bf16_names_the_fix(install_extension):
    d = real_head_dim(install_extension)
    q, k, v = (_Bf16CudaArray((1, 4, 16, d)) for _ in range(3))
    with pytest.raises(UnsupportedDTypeError, match=r"accum='fp16' needs fp16 inputs \(got bf16\).*cast to fp16"):
        ffpa_attn_func(q, k, v, accum="fp16")


def test_fp16_accum_is_a_cuda_option_on_the_host():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 8, 16)).astype(np.float16)
    with pytest.raises(UnsupportedImplError, match="CUDA kernels; the host path .* always accumulates in fp32"):
        ffpa_attn_func(q, q, q, accum="fp16")
    # Spelling the default out is fine on the host, and so is any impl (ignored there).
    want = ffpa_attn_func(q, q, q)
    np.testing.assert_array_equal(ffpa_attn_func(q, q, q, accum="fp32", impl="tma"), want)


def test_tma_runs_and_is_reported(install_extension):
    import warnings

    from ffpa_attn.interface import last_kernel

    ext = install_extension()
    ext.kernel = "tma"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tma is a fast path: no SlowPathWarning for auto or tma
        ffpa_attn_func(*qkv())
        assert last_kernel() == "tma"
        ffpa_attn_func(*qkv(), impl="tma", accum="fp16")
    assert last_kernel() == "tma"
    assert ext.calls[-1][7] == "tma" and ext.call_kwargs[-1] == {"accum": "fp16"}


@pytest.mark.parametrize("impl", ["cute", "cute_tma"])
def test_cute_paths_run_and_are_reported(install_extension, impl):
    import warnings

    from ffpa_attn.interface import last_kernel

    ext = install_extension()
    ext.kernel = impl
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CuTe kernels are fast paths: no SlowPathWarning
        ffpa_attn_func(*qkv(), impl=impl, accum="fp16")
    assert last_kernel() == impl
    assert ext.calls[-1][7] == impl and ext.call_kwargs[-1] == {"accum": "fp16"}


# --- the low-precision paths ------------------------------------------------------------

# A release-like build with the FP8 and NVFP4 kernels (archs 89;120f): build_info's impls.
LOWP_INFO = {**DEFAULT_INFO, "fp8": True, "fp8_archs": ["89", "120f"], "fp4": True, "fp4_archs": ["120f"],
             "impls": [*DEFAULT_INFO["impls"], "cute_fp8", "cute_tma_fp8", "fp8", "cute_tma_fp4", "fp4"]}


def test_impls_follow_the_kernel_facts(install_extension):
    """interface.IMPLS, LOWP_IMPLS and F16_ACC_IMPLS are derived from the one impl table
    (cmake/kernel-facts.json through the build-info module): auto first, the low-precision
    impls by their precision, fp16 accumulation only where an impl takes it, as the
    extension's validation has it."""
    from ffpa_attn.interface import IMPLS, LOWP_IMPLS
    from ffpa_attn.validation import F16_ACC_IMPLS

    assert IMPLS[0] == "auto" and len(set(IMPLS)) == len(IMPLS)
    assert LOWP_IMPLS == {"cute_fp8": "fp8", "cute_tma_fp8": "fp8", "fp8": "fp8", "cute_tma_fp4": "fp4", "fp4": "fp4"}
    assert set(F16_ACC_IMPLS) == {"auto", "mma", "tma", "cute", "cute_tma"}
    d = real_head_dim(install_extension)
    desc = ((1, 4, 16, d), None, "fp16")
    for impl in IMPLS:  # accum="fp16" is refused exactly where the table says so
        problem = install_extension.real().validate_forward(desc, desc, desc, impl=impl, accum="fp16")
        assert (problem is not None and "accum='fp16'" in str(problem)) is (impl not in F16_ACC_IMPLS), (impl, problem)


@pytest.mark.parametrize("impl,ran", [("fp8", "cute_tma_fp8"), ("cute_fp8", "cute_fp8"),
                                      ("cute_tma_fp8", "cute_tma_fp8"), ("fp4", "cute_tma_fp4"),
                                      ("cute_tma_fp4", "cute_tma_fp4")])
def test_lowp_impls_reach_the_extension_and_report_the_kernel(install_extension, impl, ran):
    import warnings

    from ffpa_attn.interface import last_kernel

    ext = install_extension(LOWP_INFO)
    ext.kernel = ran  # the library resolves fp8 / fp4 to the kernel it launched
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit fast path: no SlowPathWarning
        ffpa_attn_func(*qkv(), impl=impl)
    assert ext.calls[-1][7] == impl and ext.call_kwargs[-1] == {"accum": "fp32"}
    assert last_kernel() == ran
    out, lse = ffpa_attn_func(*qkv(), impl=impl, return_lse=True)  # the LSE is requested like any other's
    assert ext.calls[-1][4] is lse and lse.shape == (1, 4, 16)


@pytest.mark.parametrize("impl", ["fp8", "cute_fp8", "cute_tma_fp8", "fp4", "cute_tma_fp4"])
def test_fp16_accum_with_a_lowp_impl_is_refused_everywhere(install_extension, impl):
    d = real_head_dim(install_extension)
    message = (rf"accum='fp16' is not an option of impl='{impl}': the FP8 / NVFP4 mma accumulates in fp32; drop "
               r"accum, or use impl 'mma', 'tma', 'cute' or 'cute_tma' for fp16 accumulation")
    with pytest.raises(UnsupportedImplError, match=message):
        ffpa_attn_func(*qkv(d=d), impl=impl, accum="fp16")
    with pytest.raises(UnsupportedImplError, match="the host path .* always accumulates in fp32"):
        ffpa_attn_func(*(np.zeros((1, 1, 4, 8), np.float16),) * 3, impl=impl, accum="fp16")


def test_launch_check_refuses_fp16_accum_with_a_lowp_impl(install_extension):
    """The torch op calls launch.check directly: the extension's refusal there."""
    from ffpa_attn import launch

    d = real_head_dim(install_extension)
    descs = {n: launch.describe(a) for n, a in zip("qkv", qkv(d=d))}
    with pytest.raises(UnsupportedImplError, match="accum='fp16' is not an option of impl='fp8'"):
        launch.check(descs, "fp8", "fp16")
    with pytest.raises(UnsupportedImplError, match="the SIMT kernel accumulates in fp32"):
        launch.check(descs, "simt", "fp16")


def test_lowp_impls_are_ignored_on_the_host():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 8, 16)).astype(np.float32)
    from ffpa_attn.interface import last_kernel

    want = ffpa_attn_func(q, q, q, is_causal=True)
    for impl in ("fp8", "fp4"):
        np.testing.assert_array_equal(ffpa_attn_func(q, q, q, is_causal=True, impl=impl), want)
        assert last_kernel() == "reference"


# --- SDPA's signature on the host and for CuPy-like arrays -------------------------------


def _brute_force(q, k, v, allowed, scale=None):
    """softmax attention with an explicit boolean mask, fp64, GQA by repetition."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1).astype(np.float64), np.repeat(v, group, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * (scale or 1 / np.sqrt(q.shape[-1]))
    s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("nq,nkv", [(6, 6), (5, 11), (11, 5)])
def test_numpy_is_causal_is_top_left(nq, nkv):
    rng = np.random.default_rng(nq)
    q = rng.standard_normal((1, 4, nq, 16))
    k, v = rng.standard_normal((2, 1, 2, nkv, 16))
    out, lse = ffpa_attn_func(q, k, v, is_causal=True, enable_gqa=True, return_lse=True)
    allowed = np.arange(nkv)[None, :] <= np.arange(nq)[:, None]
    np.testing.assert_allclose(out, _brute_force(q, k, v, allowed), rtol=1e-10, atol=1e-12)
    assert lse.shape == (1, 4, nq) and np.isfinite(lse).all()
    from ffpa_attn import last_kernel

    assert last_kernel(with_reason=True) == ("reference", None)


def test_numpy_deprecated_causal_is_bottom_right_and_takes_gqa():
    from ffpa_attn import FFPADeprecationWarning

    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 4, 5, 16))
    k, v = rng.standard_normal((2, 1, 2, 9, 16))
    with pytest.warns(FFPADeprecationWarning, match=r"ffpa_attn_func\(causal=\.\.\.\) is deprecated"):
        out = ffpa_attn_func(q, k, v, causal=True)
    allowed = np.arange(9)[None, :] <= np.arange(5)[:, None] + 4
    np.testing.assert_allclose(out, _brute_force(q, k, v, allowed), rtol=1e-10, atol=1e-12)


def test_grouped_query_needs_enable_gqa_like_sdpa():
    x = np.zeros((1, 4, 4, 8), np.float32)
    y = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(ShapeError, match="enable_gqa=True"):
        ffpa_attn_func(x, y, y)
    assert ffpa_attn_func(x, y, y, enable_gqa=True).shape == x.shape
    one = np.zeros((1, 1, 4, 8), np.float32)  # one kv head is broadcast, as SDPA does
    assert ffpa_attn_func(x, one, one).shape == x.shape


def test_host_arrays_refuse_what_only_sdpa_does():
    x = np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(UnsupportedFeatureError, match="attn_mask needs torch tensors"):
        ffpa_attn_func(x, x, x, attn_mask=np.ones((4, 4), bool))
    with pytest.raises(UnsupportedFeatureError, match="dropout_p=0.5 needs torch tensors"):
        ffpa_attn_func(x, x, x, dropout_p=0.5)
    with pytest.raises(UnsupportedArrayTypeError, match="it was causal before: pass is_causal=True"):
        ffpa_attn_func(x, x, x, True)
    with pytest.raises(UnsupportedFeatureError, match="SDPA refuses them too"):
        ffpa_attn_func(x, x, x, np.ones((4, 4), bool), is_causal=True)
    with pytest.raises(UnsupportedImplError, match="backward must be one of"):
        ffpa_attn_func(x, x, x, backward="fast")


def test_cuda_arrays_is_causal_runs_top_left_on_every_key(install_extension):
    """SDPA's top-left is_causal goes to the kernels as their top-left mask, over all Nkv keys
    (a NaN in a key the mask hides must reach the output, as in SDPA's math backend), for
    Nq < Nkv and Nq > Nkv alike; causal= stays bottom-right."""
    ext = install_extension()
    q = FakeCudaArray((1, 4, 16, 128))
    k, v = FakeCudaArray((1, 4, 40, 128)), FakeCudaArray((1, 4, 40, 128))
    ffpa_attn_func(q, k, v, is_causal=True)
    _cq, ck, cv, _out, _lse, causal, _scale, _impl = ext.calls[-1]
    assert ck is k and cv is v and causal is True
    assert ext.call_kwargs[-1].get("causal_top_left") is True
    ffpa_attn_func(k, q, q, is_causal=True)  # Nq = 40 > Nkv = 16
    assert ext.calls[-1][0] is k and ext.call_kwargs[-1].get("causal_top_left") is True
    ffpa_attn_func(q, k, v, causal=True)
    assert ext.calls[-1][5] is True and "causal_top_left" not in ext.call_kwargs[-1]
    ffpa_attn_func(q, k, v)
    assert ext.calls[-1][5] is False and "causal_top_left" not in ext.call_kwargs[-1]


def test_cuda_arrays_without_extension_raise_not_fall_back(no_extension):
    """CuPy-like arrays have no SDPA to go to: the pure wheel is an error naming the CUDA wheel."""
    with pytest.raises(ExtensionNotAvailableError, match=r"pip install ffpa-attn==\S+\+\S*cu\d+ --index-url"):
        ffpa_attn_func(*qkv(), strict=False)


# --- routing: reasons, warnings, strict ----------------------------------------------------


def test_every_fallback_reason_has_an_error_and_a_fix():
    from ffpa_attn import FFPAError, routing

    for reason, (cls, fix) in routing.FALLBACK_REASONS.items():
        assert issubclass(cls, FFPAError), reason
        error = routing.fallback_error(reason, "what went wrong", "the fix" if reason == "pure_wheel" else None)
        assert isinstance(error, cls) and "what went wrong" in str(error) and "FFPA_STRICT=1" in str(error)
        assert fix or reason == "pure_wheel", reason  # pure_wheel's fix is cuda_wheel_hint(), given by the caller


def test_fallback_warning_once_per_reason():
    from ffpa_attn import SDPAFallbackWarning, routing

    routing._reset_for_tests()
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            routing.warn_fallback("dtype", "fp32 inputs")
            routing.warn_fallback("head_dim", "head dim 96")
    assert [w.category for w in caught] == [SDPAFallbackWarning] * 2
    assert "reason 'dtype'" in str(caught[0].message) and "reason 'head_dim'" in str(caught[1].message)
    routing._reset_for_tests()
