"""ffpa_attn._C on a machine without a GPU: build info, device count, validation
order (argument errors first, then "no CUDA device"). Arrays are faked with objects
exposing __cuda_array_interface__ and made-up pointers: nothing is dereferenced
before a launch, and no launch happens here."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ffpa_attn import _C, errors

ROOT = Path(__file__).resolve().parents[2]


class FakeCuda:
    def __init__(self, shape, typestr="<f2", ptr=0x7F0000000000, strides=None, readonly=False):
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, readonly),
            "strides": strides,
            "stream": None,
        }


def qkvo(d=None, hq=4, hkv=2, nq=100, nkv=77, typestr="<f2"):
    d = d or _C.build_info()["head_dims"][0]
    return (
        FakeCuda((2, hq, nq, d), typestr, 0x7F0000000000),
        FakeCuda((2, hkv, nkv, d), typestr, 0x7F0010000000),
        FakeCuda((2, hkv, nkv, d), typestr, 0x7F0020000000),
        FakeCuda((2, hq, nq, d), typestr, 0x7F0030000000),
    )


def test_build_info():
    info = _C.build_info()
    assert set(info) == {"head_dims", "dtypes", "archs", "fwd", "tma", "tma_archs", "f16_acc", "cute", "cute_tma",
                         "fp8", "fp8_archs", "fp4", "fp4_archs", "tolerances", "cutlass", "cuda_runtime", "impls",
                         "auto_impl", "bwd", "bwd_instances", "masks"}
    # The backward kernels: one instance per compiled (head dim, dtype), as the forward's.
    assert info["bwd"] is True
    assert sorted(info["bwd_instances"]) == sorted(f"{d}:{t}" for d in info["head_dims"] for t in info["dtypes"])
    assert info["head_dims"] == sorted(info["head_dims"]) and info["head_dims"]
    assert all(d % 64 == 0 for d in info["head_dims"])
    assert set(info["dtypes"]) <= {"fp16", "bf16"} and info["dtypes"]
    assert info["archs"] and all(a[:2].isdigit() for a in info["archs"])
    # TMA code exists for exactly the archs >= 90 of the build; fp16 accumulation
    # wherever fp16 is compiled; the CuTe kernels in every kernel build, TMA-fed exactly
    # when TMA code exists; CUTLASS as pinned (tools/requirements-cutlass.txt).
    want = [a for a in info["archs"] if int(re.match(r"\d+", a)[0]) >= 90]
    assert info["tma_archs"] == want
    assert info["fwd"] is True and info["tma"] is bool(want) and info["cute"] is True
    assert info["cute_tma"] is bool(want)
    # FP8 code on archs >= 89: fed by cp.async below the sm_120 family, by TMA from 90 on;
    # NVFP4 on the sm_120 family's specific targets (120f, 120a) only.
    sm = {a: int(re.match(r"\d+", a)[0]) for a in info["archs"]}
    fp8 = [a for a in info["archs"] if sm[a] >= 89]
    fp4 = [a for a in info["archs"] if 120 <= sm[a] < 130 and a[-1] in "af"]
    assert info["fp8_archs"] == fp8 and info["fp8"] is bool(fp8)
    assert info["fp4_archs"] == fp4 and info["fp4"] is bool(fp4)
    lowp = ((["cute_fp8"] if any(sm[a] < 120 for a in fp8) else [])
            + (["cute_tma_fp8"] if any(sm[a] >= 90 for a in fp8) else []) + (["fp8"] if fp8 else [])
            + (["cute_tma_fp4", "fp4"] if fp4 else []))
    assert info["impls"] == (["mma", "simt"] + (["tma"] if want else []) + ["cute"] + (["cute_tma"] if want else [])
                             + lowp)
    tol = info["tolerances"]
    assert set(tol) == {"fp16", "bf16", "fp16_acc", "fp8", "fp4", "bwd_fp16", "bwd_bf16"}
    assert tol["fp16"]["atol"] == pytest.approx(2e-2) and tol["fp8"]["min_cos"] > 0.99
    assert info["f16_acc"] is ("fp16" in info["dtypes"])
    assert info["auto_impl"].startswith("tma on sm_120" if want else "mma")
    assert "never cute or cute_tma" in info["auto_impl"]
    pin = re.search(r"^nvidia-cutlass==(\d+\.\d+\.\d+)", (ROOT / "tools" / "requirements-cutlass.txt").read_text(), re.M)
    assert info["cutlass"] == pin[1]
    assert info["cuda_runtime"].startswith("13.")


def test_impl_and_accum_spellings():
    q, k, v, o = qkvo()
    with pytest.raises(errors.UnsupportedImplError, match="fp32"):
        _C.forward(q, k, v, o, None, False, 0.125, "auto", accum="f16")
    with pytest.raises(errors.UnsupportedImplError, match="tma"):
        _C.forward(q, k, v, o, None, False, 0.125, "wgmma")
    # Without a GPU the kernel auto would pick is the cp.async one.
    assert _C.auto_impl() == "mma"


def test_device_count_is_zero_here():
    assert _C.device_count() == 0


def test_forward_without_gpu_raises_device_error():
    q, k, v, o = qkvo()
    with pytest.raises(errors.DeviceError, match="no CUDA device"):
        _C.forward(q, k, v, o, None, False, 0.125, "auto")
    assert issubclass(errors.DeviceError, errors.FFPAError)


def test_unsupported_head_dim_names_compiled_set_and_option():
    q, k, v, o = qkvo(d=96)
    with pytest.raises(errors.UnsupportedHeadDimError, match="FFPA_HEAD_DIMS") as exc:
        _C.forward(q, k, v, o, None, False, 0.1, "auto")
    assert str(_C.build_info()["head_dims"][0]) in str(exc.value)


def test_dtype_errors():
    q, k, v, o = qkvo(typestr="<f4")
    with pytest.raises(errors.UnsupportedDTypeError):
        _C.forward(q, k, v, o, None, False, 0.1, "auto")
    d = _C.build_info()["head_dims"][0]
    q, k, v, o = qkvo()
    with pytest.raises(errors.UnsupportedDTypeError, match="lse must be fp32"):
        _C.forward(q, k, v, o, FakeCuda((2, 4, 100), "<f2"), False, 0.1, "auto")
    del d


def test_shape_errors():
    d = _C.build_info()["head_dims"][0]
    q, k, v, o = qkvo(hq=3, hkv=2)
    with pytest.raises(errors.ShapeError, match="Hq % Hkv"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto")
    q, k, v, o = qkvo()
    with pytest.raises(errors.ShapeError):
        _C.forward(q, k, FakeCuda((2, 2, 78, d)), o, None, False, 0.1, "auto")
    with pytest.raises(errors.ShapeError, match="4-D"):
        _C.forward(FakeCuda((4, 100, d)), k, v, o, None, False, 0.1, "auto")
    with pytest.raises(errors.ShapeError, match="lse"):
        _C.forward(q, k, v, o, FakeCuda((2, 4, 99), "<f4"), False, 0.1, "auto")


def test_layout_errors():
    d = _C.build_info()["head_dims"][0]
    q, k, v, o = qkvo()
    strided_last = FakeCuda((2, 4, 100, d), strides=(4 * 100 * d * 4, 100 * d * 4, d * 4, 4))
    with pytest.raises(errors.UnsupportedLayoutError, match="unit-stride"):
        _C.forward(strided_last, k, v, o, None, False, 0.1, "auto")
    misaligned = FakeCuda((2, 4, 100, d), ptr=0x7F0000000002)
    with pytest.raises(errors.UnsupportedLayoutError, match="16-byte"):
        _C.forward(misaligned, k, v, o, None, False, 0.1, "mma")
    # auto falls back to the SIMT kernel for such arrays: only the device is missing.
    with pytest.raises(errors.DeviceError, match="no CUDA device"):
        _C.forward(misaligned, k, v, o, None, False, 0.1, "auto")
    with pytest.raises(errors.UnsupportedLayoutError, match="read-only"):
        _C.forward(q, k, v, FakeCuda((2, 4, 100, d), readonly=True), None, False, 0.1, "auto")


def test_impl_and_array_type_errors():
    q, k, v, o = qkvo()
    with pytest.raises(errors.UnsupportedImplError):
        _C.forward(q, k, v, o, None, False, 0.1, "wgmma")
    with pytest.raises(errors.UnsupportedArrayTypeError):
        _C.forward(object(), k, v, o, None, False, 0.1, "auto")


def test_host_arrays_are_a_device_error():
    d = _C.build_info()["head_dims"][0]
    host = np.zeros((1, 1, 8, d), np.float16)
    with pytest.raises(errors.DeviceError, match="not in CUDA memory"):
        _C.forward(host, host, host, host, None, False, 0.1, "auto")


def test_cute_impls_validate_like_the_other_tensor_core_paths():
    info = _C.build_info()
    q, k, v, o = qkvo()
    d = info["head_dims"][0]
    misaligned = FakeCuda((2, 4, 100, d), ptr=0x7F0000000002)
    for impl in ("cute", "cute_tma") if info["cute_tma"] else ("cute",):
        # cp.async and TMA both need 16-byte aligned rows; fp16 accumulation takes fp16.
        with pytest.raises(errors.UnsupportedLayoutError, match=f"impl='{impl}'"):
            _C.forward(misaligned, k, v, o, None, False, 0.1, impl)
        # Well-formed arguments get as far as the missing device, with either accumulator.
        for accum in ("fp32", "fp16") if "fp16" in info["dtypes"] else ("fp32",):
            with pytest.raises(errors.DeviceError, match="no CUDA device"):
                _C.forward(q, k, v, o, None, False, 0.1, impl, accum=accum)
    if not info["cute_tma"]:
        with pytest.raises(errors.UnsupportedImplError, match="impl='cute_tma' was not compiled.*use impl='cute'"):
            _C.forward(q, k, v, o, None, False, 0.1, "cute_tma")


# --- validate_forward: forward()'s checks without arrays -------------------------------------


def _describe(a):
    """validate_forward's description of a FakeCuda array: (shape, strides in elements, dtype)."""
    cai = a.__cuda_array_interface__
    size = np.dtype(cai["typestr"]).itemsize
    strides = None if cai["strides"] is None else tuple(s // size for s in cai["strides"])
    return cai["shape"], strides, {"<f2": "fp16", "<f4": "fp32"}[cai["typestr"]]


def test_validate_forward_answers_what_forward_raises():
    """The package asks validate_forward before it allocates: for the same arrays it hands
    back, unraised, the very error forward() raises (and None where forward() gets as far
    as the device)."""
    d = _C.build_info()["head_dims"][0]
    cases = [
        (qkvo(d=d), "auto", "fp32"),
        (qkvo(d=d, typestr="<f4"), "auto", "fp32"),
        (qkvo(d=96), "auto", "fp32"),
        (qkvo(d=d, hq=3), "auto", "fp32"),
        ((FakeCuda((2, 4, 100, d), strides=(4 * 100 * d * 2, 100 * d * 2, d * 2, 4)), *qkvo(d=d)[1:]), "auto", "fp32"),
        ((FakeCuda((2, 4, 100, d), strides=(4 * 100 * d * 2 + 2, 100 * d * 2, d * 2, 2)), *qkvo(d=d)[1:]), "mma",
         "fp32"),
        (qkvo(d=d), "wgmma", "fp32"),
        (qkvo(d=d), "auto", "f16"),
        (qkvo(d=d), "simt", "fp16"),
        (qkvo(d=d), "fp8", "fp16"),
        (qkvo(d=d), "fp4", "fp32"),
        (qkvo(d=d), "tma", "fp32"),
    ]
    refused = 0
    for (q, k, v, o), impl, accum in cases:
        problem = _C.validate_forward(_describe(q), _describe(k), _describe(v), impl=impl, accum=accum)
        with pytest.raises(errors.FFPAError) as raised:
            _C.forward(q, k, v, o, None, False, 0.125, impl, accum=accum)
        if problem is None:
            assert isinstance(raised.value, errors.DeviceError) and "no CUDA device" in str(raised.value)
        else:
            refused += 1
            assert isinstance(problem, errors.FFPAError) and type(problem) is type(raised.value), (impl, problem)
            assert str(problem) == str(raised.value)
    assert refused >= 9  # every case but the good one, and the impls this build may have


def test_validate_forward_refuses_malformed_descriptions():
    d = _C.build_info()["head_dims"][0]
    good = ((1, 4, 16, d), None, "fp16")
    with pytest.raises(ValueError, match="expected \\(shape, strides, dtype\\)"):
        _C.validate_forward(((1, 4, 16, d), None), good, good)
    with pytest.raises(ValueError, match="strides and shape differ"):
        _C.validate_forward(((1, 4, 16, d), (1, 1), "fp16"), good, good)
    assert _C.validate_forward(good, good, good) is None


# --- the backward (validate_backward, then "no CUDA device") ---------------------------------


def bwd_args(d=None, hq=4, hkv=2, nq=100, nkv=77, ws=None, **over):
    q, k, v, o = qkvo(d, hq, hkv, nq, nkv)
    d = q.__cuda_array_interface__["shape"][3]
    a = {"q": q, "k": k, "v": v, "out": o, "dout": FakeCuda((2, hq, nq, d), ptr=0x7F0040000000),
         "lse": FakeCuda((2, hq, nq), "<f4", 0x7F0050000000), "dq": FakeCuda((2, hq, nq, d), ptr=0x7F0060000000),
         "dk": FakeCuda((2, hkv, nkv, d), ptr=0x7F0070000000), "dv": FakeCuda((2, hkv, nkv, d), ptr=0x7F0080000000),
         "workspace": FakeCuda((2 * 2 * hq * nq if ws is None else ws,), "<f4", 0x7F0090000000),
         "causal": True, "causal_top_left": False, "scale": 0.125}
    a.update(over)
    return a


def test_backward_without_gpu_raises_device_error():
    with pytest.raises(errors.DeviceError, match="no CUDA device"):
        _C.backward(**bwd_args())


def test_backward_argument_errors_name_the_fix():
    d = _C.build_info()["head_dims"][0]
    with pytest.raises(errors.ShapeError, match=r"dk has shape .*must have the shape of k"):
        _C.backward(**bwd_args(dk=FakeCuda((2, 2, 76, d))))
    with pytest.raises(errors.ShapeError, match=r"dout has shape"):
        _C.backward(**bwd_args(dout=FakeCuda((2, 4, 99, d))))
    with pytest.raises(errors.ShapeError, match=r"workspace has 10 elements; the backward needs 1600"):
        _C.backward(**bwd_args(ws=10))
    with pytest.raises(errors.UnsupportedDTypeError, match="dv has dtype fp32"):
        _C.backward(**bwd_args(dv=FakeCuda((2, 2, 77, d), "<f4")))
    with pytest.raises(errors.UnsupportedDTypeError, match="lse must be the forward's fp32"):
        _C.backward(**bwd_args(lse=FakeCuda((2, 4, 100), "<f2")))
    with pytest.raises(errors.UnsupportedLayoutError, match="dq is not 16-byte aligned.*backward='torch'"):
        _C.backward(**bwd_args(dq=FakeCuda((2, 4, 100, d), ptr=0x7F0060000008)))
    with pytest.raises(errors.UnsupportedLayoutError, match="dq is read-only"):
        _C.backward(**bwd_args(dq=FakeCuda((2, 4, 100, d), ptr=0x7F0060000000, readonly=True)))
    with pytest.raises(errors.ShapeError, match="Hq % Hkv"):
        _C.backward(**bwd_args(hq=3, hkv=2))


def ints(n, ptr=0x7F00A0000000, typestr="<i4"):
    return FakeCuda((n,), typestr, ptr)


def test_build_info_masks_come_from_kernel_facts():
    facts = json.loads((ROOT / "cmake" / "kernel-facts.json").read_text())
    assert _C.build_info()["masks"] == facts["masks"] == ["window", "seqused_k", "varlen"]


def test_masks_reach_the_device_check_when_valid():
    # Valid masks pass every argument check: only the device is missing.
    q, k, v, o = qkvo()
    for kw in ({"window_left": 16}, {"window_right": 0}, {"window_left": 0, "window_right": 5},
               {"seqused_k": ints(2)}):
        with pytest.raises(errors.DeviceError, match="no CUDA device"):
            _C.forward(q, k, v, o, None, True, 0.1, "mma", **kw)
        with pytest.raises(errors.DeviceError, match="no CUDA device"):
            _C.backward(**bwd_args(), **kw)
    d = q.__cuda_array_interface__["shape"][3]
    # Varlen: [1, H, total, D] views of packed [total, H, D] (row stride H D).
    hq, hkv, tq, tk = 4, 2, 300, 280
    pq = FakeCuda((1, hq, tq, d), strides=(tq * hq * d * 2, d * 2, hq * d * 2, 2))
    pk = FakeCuda((1, hkv, tk, d), ptr=0x7F0010000000, strides=(tk * hkv * d * 2, d * 2, hkv * d * 2, 2))
    pv = FakeCuda((1, hkv, tk, d), ptr=0x7F0020000000, strides=(tk * hkv * d * 2, d * 2, hkv * d * 2, 2))
    po = FakeCuda((1, hq, tq, d), ptr=0x7F0030000000, strides=(tq * hq * d * 2, d * 2, hq * d * 2, 2))
    varlen = {"cu_seqlens_q": ints(4), "cu_seqlens_k": ints(4, 0x7F00B0000000), "max_seqlen_q": 200,
              "max_seqlen_k": 150}
    with pytest.raises(errors.DeviceError, match="no CUDA device"):
        _C.forward(pq, pk, pv, po, FakeCuda((1, hq, tq), "<f4", 0x7F0050000000), True, 0.1, "auto", **varlen,
                   seqused_k=ints(3, 0x7F00C0000000), window_left=8)
    with pytest.raises(errors.ShapeError, match=r"seqused_k has 2 entries; .*sequence \(3\)"):
        _C.forward(pq, pk, pv, po, None, True, 0.1, "auto", **varlen, seqused_k=ints(2, 0x7F00C0000000))
    with pytest.raises(errors.ShapeError, match="max_seqlen_q = 301.*longest sequence"):
        _C.forward(pq, pk, pv, po, None, True, 0.1, "auto", **{**varlen, "max_seqlen_q": 301})
    with pytest.raises(errors.ShapeError, match="max_seqlen_q = 0.*longest sequence"):
        _C.forward(pq, pk, pv, po, None, True, 0.1, "auto", **{**varlen, "max_seqlen_q": 0})


def test_mask_argument_errors_name_the_fix():
    q, k, v, o = qkvo()
    with pytest.raises(errors.ShapeError, match="window_left = -2: pass -1"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", window_left=-2)
    with pytest.raises(errors.ShapeError, match="window_right = 2147483648"):
        _C.backward(**bwd_args(), window_right=2**31)
    with pytest.raises(errors.ShapeError, match=r"seqused_k has 3 entries; it must have one per batch entry \(2\)"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", seqused_k=ints(3))
    with pytest.raises(errors.UnsupportedDTypeError, match="seqused_k must be int32.*torch.int32"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", seqused_k=ints(2, typestr="<f4"))
    with pytest.raises(errors.ShapeError, match="seqused_k must be 1-D"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", seqused_k=FakeCuda((2, 1), "<i4"))
    with pytest.raises(errors.UnsupportedLayoutError, match="seqused_k must be contiguous"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", seqused_k=FakeCuda((2,), "<i4", strides=(8,)))
    with pytest.raises(errors.ShapeError, match="both cu_seqlens_q and cu_seqlens_k"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", cu_seqlens_q=ints(3), max_seqlen_q=10)
    with pytest.raises(errors.ShapeError, match=r"varlen takes q, k, v as \[1, H, total, D\] views.*batch of 2"):
        _C.forward(q, k, v, o, None, False, 0.1, "auto", cu_seqlens_q=ints(3), cu_seqlens_k=ints(3),
                   max_seqlen_q=10, max_seqlen_k=10)
    # The masks live in the mma and CuTe kernels' two feeds: the SIMT and low-precision
    # kernels refuse them.
    impls = _C.build_info()["impls"]
    for impl in ("simt", "fp8", "cute_fp8", "cute_tma_fp8", "cute_tma_fp4"):
        if impl not in impls:
            continue
        with pytest.raises(errors.UnsupportedImplError,
                           match="takes no sliding window.*impl='auto', 'mma', 'tma', 'cute' or 'cute_tma'"):
            _C.forward(q, k, v, o, None, False, 0.1, impl, window_left=4)
    for impl in ("cute", "cute_tma"):
        if impl not in impls:
            continue
        # Every argument check passes (fp16 accumulation too): only the device is missing.
        for kw in ({"window_left": 4}, {"seqused_k": ints(2)}):
            for accum in ("fp32", "fp16"):
                with pytest.raises(errors.DeviceError, match="no CUDA device"):
                    _C.forward(q, k, v, o, None, False, 0.1, impl, accum=accum, **kw)
    misaligned = FakeCuda(q.__cuda_array_interface__["shape"], ptr=0x7F0000000002)
    with pytest.raises(errors.UnsupportedLayoutError, match="16-byte aligned.*masked kernels"):
        _C.forward(misaligned, k, v, o, None, False, 0.1, "auto", seqused_k=ints(2))
    with pytest.raises(TypeError):  # keyword-only
        _C.forward(q, k, v, o, None, False, 0.1, "auto", None, "fp32", 4)
