"""``python -m ffpa_attn.info [--json]``: what runs in this environment.

One report: the package (version, wheel kind, the build's archs), torch, each GPU with
its arch, which kernels (``impl=``) have code that runs on it (for those that do not:
why, and what would: the CUDA wheel, a build for this arch, a rebuild), what
``ffpa_attn_func`` does there (the kernels, or torch SDPA and the fallback reason), the
host paths, and the tolerances.

The capability flags of :mod:`ffpa_attn.cuda` keep their meaning: what the extension
*compiled in*, whatever the GPU present (``compiled`` in the report). The per-GPU part
says what *runs*: a kernel runs on a GPU when the build holds machine code the GPU loads
(``launch.serving_arch``) and that kernel has code for that arch (the extension's own
per-kernel arch lists: ``tma_archs``, ``fp8_archs``, ``fp4_archs``).

Under ``FFPA_DEVICE=emulated`` (ffpa_attn.device) the one GPU is the emulated device, of
the arch ``FFPA_EMULATED_ARCH`` names, and the report says so (``device``, text and JSON).

Importing this module never imports torch; the report asks torch for the GPUs (names
and compute capabilities) when torch is installed, else the extension for their count.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import build_facts, cuda, jit, launch
from . import device as ffpa_device
from .errors import DeviceError
from .interface import IMPLS
from .validation import ARCH_RULES, IMPL_FACTS, LOWP_IMPLS, arch_has, impl_has_code

__all__ = ["device", "gpus", "impl_status", "local_build", "main", "report"]

# What the JIT would be: not built yet, so the report names the build it would make.
_A_BUILD_FOR = "a build for this arch (-DFFPA_CUDA_ARCHS={arch}; there is no JIT yet, docs/install.md)"


def _gpu_arch(capability: tuple[int, int]) -> str:
    return f"{capability[0]}{capability[1]}"


def device() -> dict[str, Any]:
    """The kernels' device: ``kind`` ("cuda", "emulated", or the unknown name FFPA_DEVICE
    gives), the emulated ``arch`` (FFPA_EMULATED_ARCH's value) and its ``capability``, and
    the ``error`` every call raises when the device cannot run (else None)."""
    problem = ffpa_device.problem()
    kind = ffpa_device.requested() or "cuda"
    out: dict[str, Any] = {"kind": kind, "arch": None, "capability": None,
                           "error": None if problem is None else str(problem)}
    if ffpa_device.emulated():
        try:
            out["arch"] = ffpa_device.emulated_arch()
            out["capability"] = ffpa_device.capability(0)
        except DeviceError as exc:
            out["error"] = str(exc)
    return out


def _emulated_name(dev: dict[str, Any]) -> str:
    return f"the emulated device ({ffpa_device.DEVICE_ENV}=emulated, {ffpa_device.ARCH_ENV}={dev['arch']})"


def gpus() -> list[dict[str, Any]]:
    """The CUDA GPUs: ``index``, ``name``, ``capability`` ((major, minor) or None); under
    ``FFPA_DEVICE=emulated``, the emulated device alone (none when its arch is unknown)."""
    if ffpa_device.emulated():
        dev = device()
        return [] if dev["capability"] is None else [
            {"index": 0, "name": _emulated_name(dev), "capability": dev["capability"]}]
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            torch = None
    if torch is not None and torch.cuda.is_available():
        return [{"index": i, "name": str(torch.cuda.get_device_name(i)),
                 "capability": tuple(int(x) for x in torch.cuda.get_device_capability(i))}
                for i in range(torch.cuda.device_count())]
    # Without torch, the extension counts them (no name or arch to report).
    return [{"index": i, "name": None, "capability": None} for i in range(cuda.device_count())]


# The arch features of cmake/kernel-facts.json in words: (what it is, which archs have it).
_FEATURE_WORDS = {
    "tma": ("TMA", "archs >= {tma_min_sm}"),
    "fp8": ("FP8 tensor cores", "archs >= {fp8_min_sm}"),
    "cp_async_heavy": ("code for the cp.async-fed heavy kernels", "archs below the sm_{sm120_family} family"),
    "nvfp4": ("NVFP4 block-scaled mma", "the sm_{sm120_family} family's specific targets"),
}


def _feature_words(feature: str) -> tuple[str, str]:
    if feature not in _FEATURE_WORDS:
        raise ValueError(f"no words for arch feature {feature!r} (cmake/kernel-facts.json)")
    what, where = _FEATURE_WORDS[feature]
    return what, where.format(**ARCH_RULES)


def _kernel_archs(impl: str) -> tuple[tuple[str, ...] | None, str]:
    """(compiled arch tokens that hold this kernel or None for all, the rule in words): the
    tokens with every arch feature the impl needs (cmake/kernel-facts.json)."""
    if impl not in IMPL_FACTS:
        raise ValueError(f"no arch rule for impl {impl!r}")
    needs = IMPL_FACTS[impl][1]
    if not needs:
        return None, "every arch of the build"
    archs = tuple(a for a in cuda.COMPILED_ARCHS if impl_has_code(impl, a))
    return archs, "; ".join("{}: {}".format(*_feature_words(f)) for f in needs)


def _concrete(impl: str) -> tuple[str, ...]:
    # fp8 is whichever FP8 kernel the GPU has code for; fp4 is the one NVFP4 kernel.
    if impl == "fp8":
        return ("cute_fp8", "cute_tma_fp8")
    if impl == "fp4":
        return ("cute_tma_fp4",)
    return (impl,)


def _tma_fed_twin(impl: str) -> str | None:
    """The impl that is this cp.async-fed one fed by TMA instead (same precision)."""
    _, needs, precision = IMPL_FACTS[impl]
    want = (set(needs) - {"cp_async_heavy"}) | {"tma"}
    for name, (_, other_needs, other_precision) in IMPL_FACTS.items():
        # the same kernel family: its name holds every part of this one's ("cute" -> "cute_tma")
        if (set(other_needs) == want and other_precision == precision
                and set(impl.split("_")) <= set(name.split("_"))):
            return name
    return None


def _hardware_lacks(impl: str, sm: int) -> str | None:
    """Why no build of this kernel can run on an sm_XY GPU at all, or None: a feature the
    impl needs (cmake/kernel-facts.json) that even the GPU's own specific target lacks."""
    for feature in IMPL_FACTS[impl][1]:
        if arch_has(feature, f"{sm}a"):
            continue
        if feature == "cp_async_heavy":
            twin = _tma_fed_twin(impl)
            return (f"on the sm_{ARCH_RULES['sm120_family']} family this kernel is TMA-fed only"
                    + (f": impl={twin!r}" if twin else ""))
        what, where = _feature_words(feature)
        return f"sm_{sm} has no {what} ({where})"
    return None


def impl_status(impl: str, capability: tuple[int, int] | None) -> dict[str, Any]:
    """``{"runs": bool, "kernel": the kernel it would run or None, "why": ..., "what_would": ...}``."""
    if impl in ("fp8", "fp4"):
        options = [impl_status(k, capability) for k in _concrete(impl)]
        running = [o for o in options if o["runs"]]
        if running:
            return running[0]
        first = options[-1] if impl == "fp8" and capability and capability[0] * 10 >= ARCH_RULES["sm120_family"] else options[0]
        return first
    result: dict[str, Any] = {"runs": False, "kernel": impl, "why": None, "what_would": None}
    if capability is None:
        result["why"] = "the GPU's arch is unknown (torch is not installed to ask it)"
        result["what_would"] = "pip install torch, then run this report again"
        return result
    sm = capability[0] * 10 + capability[1]
    lacks = _hardware_lacks(impl, sm)
    if cuda.extension() is None:
        if cuda.EXTENSION_IMPORT_ERROR is not None:
            result["why"] = f"the extension is installed but does not load ({cuda.EXTENSION_IMPORT_ERROR})"
            result["what_would"] = "reinstall the CUDA wheel that matches this Python; check the NVIDIA driver"
            return result
        result["why"] = "the pure wheel has no CUDA code" + (f"; and {lacks}" if lacks else "")
        if lacks:
            result["what_would"] = "nothing: this GPU cannot run this kernel; another impl"
        elif _release_serves(capability):
            result["what_would"] = "the CUDA wheel: " + launch.cuda_wheel_hint()
        else:
            result["what_would"] = _A_BUILD_FOR.format(arch=_gpu_arch(capability))
        return result
    if lacks:
        result["why"] = lacks
        result["what_would"] = "nothing on this GPU: use another impl"
        return result
    token = launch.serving_arch(capability)
    if token is None:
        result["why"] = (f"this build has machine code for archs {list(cuda.COMPILED_ARCHS)} only, none of which "
                         f"sm_{sm} loads")
        result["what_would"] = _A_BUILD_FOR.format(arch=_gpu_arch(capability))
        return result
    archs, rule = _kernel_archs(impl)
    compiled = impl in cuda.COMPILED_IMPLS or (impl in ("mma", "simt") and not cuda.COMPILED_IMPLS)
    if not compiled:
        hint = launch.impl_build_hint(impl)
        result["why"] = f"impl {impl!r} is not compiled in this build (impls {list(cuda.COMPILED_IMPLS)})"
        result["what_would"] = hint or "a rebuild that compiles it"
        return result
    if archs is not None and token not in archs:
        result["why"] = f"this GPU runs the build's sm_{token} code, which has no {impl} kernel ({rule})"
        result["what_would"] = f"a rebuild whose -DFFPA_CUDA_ARCHS holds this kernel for sm_{sm} ({rule})"
        return result
    result.update(runs=True, why=None, what_would=None, arch=token)
    return result


def _release_serves(capability: tuple[int, int]) -> bool:
    """Whether this release's CUDA wheels hold code this GPU loads (the pure wheel knows
    their archs from its build facts)."""
    archs = _release_archs()
    return bool(archs) and launch.serving_arch(capability, archs) is not None


def _release_archs() -> tuple[str, ...]:
    return build_facts.cuda_wheel_archs()


def _auto_kernel(capability: tuple[int, int] | None) -> str | None:
    # The rule of impl="auto" (cuda.auto_impl asks the current device; this asks for any).
    if capability is None:
        return None
    sm = capability[0] * 10 + capability[1]
    tma = impl_status("tma", capability)
    if sm >= ARCH_RULES["sm120_family"] and tma["runs"]:
        return "tma"
    return "mma" if impl_status("mma", capability)["runs"] else None


def _fallback(capability: tuple[int, int] | None) -> dict[str, Any]:
    kernel = _auto_kernel(capability)
    if kernel is not None:
        arrays = "CPU tensors (the emulated device's arrays)" if ffpa_device.emulated() else "CUDA tensors"
        return {"kernel": kernel, "reason": None,
                "says": f"fp16/bf16 {arrays} run the {kernel} kernel (impl='auto'); the other fallback "
                        "reasons (masks, dropout, head dims the build lacks) still apply per call"}
    if capability is not None and jit.wanted(False) and jit.MIN_SM is not None \
            and int(_gpu_arch(capability)) >= jit.MIN_SM:
        # Complete only when a probe compiled and linked with it (remembered per toolchain).
        tc = jit.checked_toolchain()
        try:
            cache = str(jit.cache_root())
        except jit.JitCacheError as exc:
            tc = dataclasses.replace(tc, missing=(*tc.missing, (str(exc), f"set {jit.CACHE_ENV} to a directory")))
        if tc.complete:
            return {"kernel": "jit", "reason": None,
                    "says": f"the first fp16/bf16 CUDA call builds the kernels for sm_{_gpu_arch(capability)} and its "
                            f"head dim (ffpa_attn.jit, cached in {cache}; docs/install.md, \"First-use "
                            "builds\"), then runs them"}
        detail, fix = jit.missing_message(tc, f"sm_{_gpu_arch(capability)}")
        return {"kernel": "sdpa", "reason": "jit",
                "says": f"every CUDA call runs torch SDPA (fallback reason 'jit': {detail}; {fix})"}
    if cuda.extension() is None:
        reason = "pure_wheel" if cuda.EXTENSION_IMPORT_ERROR is None else "extension"
    else:
        reason = "arch"
    return {"kernel": "sdpa", "reason": reason,
            "says": f"every CUDA call runs torch SDPA (fallback reason {reason!r}, one SDPAFallbackWarning; "
                    "strict=True raises)"}


def local_build(version: str) -> bool:
    """Whether this is a wheel built from source for one machine (``pip install .``, the
    local preset): cmake/FfpaOptions.cmake's FFPA_LOCAL_BUILD marks its version's local
    label ``.local`` (``V+cu13.local``), which a release never carries."""
    return "local" in version.partition("+")[2].lower().split(".")


def _package() -> dict[str, Any]:
    info = cuda.build_info()
    version = build_facts.version()
    kind = "cuda" if cuda.extension() is not None else ("cuda (broken)" if cuda.EXTENSION_IMPORT_ERROR else "pure")
    if ffpa_device.emulated():
        kind = "emulated"  # the build tree's _C_emulated (csrc/emulated), never a wheel
    local = local_build(version)
    return {"version": version, "wheel": kind, "local_build": local,
            "build": ("a local build from source (pip install . or the local preset): built for this machine's "
                      "archs, not a release wheel") if local else "a release build",
            "channel": info.get("channel"),
            "cuda_wheel_archs": list(_release_archs()), "extension_path": cuda.EXTENSION_PATH,
            "extension_import_error": cuda.EXTENSION_IMPORT_ERROR}


def _compiled() -> dict[str, Any]:
    return {"fwd": cuda.CUDA_FWD_AVAILABLE, "tma": cuda.CUDA_TMA_AVAILABLE, "cute": cuda.CUDA_CUTE_AVAILABLE,
            "cute_tma": cuda.CUDA_CUTE_TMA_AVAILABLE, "fp8": cuda.CUDA_FP8_AVAILABLE,
            "fp4": cuda.CUDA_FP4_AVAILABLE, "f16_acc": cuda.F16_ACC_AVAILABLE, "archs": list(cuda.COMPILED_ARCHS),
            "tma_archs": list(cuda.TMA_ARCHS), "fp8_archs": list(cuda.FP8_ARCHS), "fp4_archs": list(cuda.FP4_ARCHS),
            "head_dims": list(cuda.COMPILED_HEAD_DIMS), "dtypes": list(cuda.COMPILED_DTYPES),
            "impls": list(cuda.COMPILED_IMPLS)}


def _torch() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"version": None, "cuda": None, "note": "torch is not installed: NumPy arrays run the NumPy reference"}
    return {"version": str(torch.__version__), "cuda": torch.version.cuda,
            "cuda_available": bool(torch.cuda.is_available())}


def _tolerances() -> dict[str, Any] | None:
    return build_facts.tolerances()


def report() -> dict[str, Any]:
    """The whole report as one JSON-ready dict."""
    impls = [i for i in IMPLS if i != "auto"]
    per_gpu = []
    for gpu in gpus():
        cap = gpu["capability"]
        per_gpu.append({
            "index": gpu["index"], "name": gpu["name"],
            "arch": None if cap is None else f"sm_{_gpu_arch(cap)}",
            "impls": {impl: impl_status(impl, cap) for impl in impls},
            "auto": _auto_kernel(cap),
            "ffpa_attn_func": _fallback(cap),
        })
    torch_cpu = ("CPU tensors run torch's own CPU attention (the op SDPA runs there; last_kernel() 'torch_math')")
    if ffpa_device.emulated():
        torch_cpu = ("CPU tensors are the emulated device's arrays: they run the library's host code and kernels on "
                     "the CPU emulator (no timing; docs/install.md, \"The emulated device (no GPU)\")")
    return {
        "device": device(),
        "package": _package(),
        "torch": _torch(),
        "compiled": _compiled(),
        "gpus": per_gpu,
        "host": {"torch_cpu": torch_cpu,
                 "numpy": "NumPy arrays run the NumPy reference (last_kernel() 'reference')",
                 "nonfinite": "NaN and inf give what SDPA's math backend gives: CPU tensors forward and backward "
                              "(the causal mask, sliding windows, packed sequences and seqused_k included), the "
                              "NumPy reference (forward) and the CUDA kernels (docs/install.md, \"NaN and inf\")"},
        "tolerances": _tolerances(),
        "lowp_impls": dict(LOWP_IMPLS),
        "jit": jit.status(),
    }


def _text(rep: dict[str, Any]) -> str:
    pkg, tor, comp = rep["package"], rep["torch"], rep["compiled"]
    what = "the emulated device's build tree, not a wheel" if pkg["wheel"] == "emulated" else f"{pkg['wheel']} wheel"
    lines = [f"ffpa-attn {pkg['version']} ({what}"
             + (", a local build from source, not a release wheel" if pkg["local_build"] else "")
             + (f", channel {pkg['channel']}" if pkg["channel"] else "") + ")"]
    if pkg["extension_import_error"]:
        lines.append(f"  extension does not load: {pkg['extension_import_error']}")
    if pkg["cuda_wheel_archs"]:
        whose = "this local build has" if pkg["local_build"] else "this release's CUDA wheels have"
        lines.append(f"  {whose} code for archs {', '.join(pkg['cuda_wheel_archs'])}")
    dev = rep["device"]
    if dev["kind"] == ffpa_device.EMULATED and dev["capability"] is not None:
        lines.append(f"device: emulated sm_{_gpu_arch(dev['capability'])} ({ffpa_device.ARCH_ENV}={dev['arch']}): "
                     "the library's host code and kernels on the CPU emulator, CPU tensors its arrays")
    elif dev["kind"] != "cuda" or dev["error"]:
        lines.append(f"device: {dev['kind']}: {dev['error']}")
    lines.append(f"torch {tor['version'] or 'not installed'}" + (f" (CUDA {tor['cuda']})" if tor.get("cuda") else ""))
    lines.append("compiled in (the capability flags: what this build holds, whatever the GPU): "
                 f"fwd={comp['fwd']} tma={comp['tma']} cute={comp['cute']} cute_tma={comp['cute_tma']} "
                 f"fp8={comp['fp8']} fp4={comp['fp4']} archs={comp['archs'] or '-'} "
                 f"head_dims={comp['head_dims'] or '-'}")
    if not rep["gpus"] and dev["kind"] == "cuda":
        lines.append("GPUs: none: CUDA tensors cannot exist here")
    for gpu in rep["gpus"]:
        lines.append(f"GPU {gpu['index']}: {gpu['name'] or '(name unknown)'} {gpu['arch'] or '(arch unknown)'}")
        for impl, st in gpu["impls"].items():
            if st["runs"]:
                lines.append(f"  {impl:14s} runs" + (f" ({st['kernel']})" if st["kernel"] != impl else ""))
            else:
                lines.append(f"  {impl:14s} no: {st['why']}; what would: {st['what_would']}")
        lines.append(f"  ffpa_attn_func: {gpu['ffpa_attn_func']['says']}")
    for text in rep["host"].values():
        lines.append(text)
    j = rep["jit"]
    lines.append(f"first-use builds (ffpa_attn.jit): {'on' if j['enabled'] else 'off (FFPA_JIT=0)'}, "
                 f"cache {j['cache_dir'] or 'unusable'}"
                 + (f", loaded {j['loaded']}" if j["loaded"] else "") + f", {len(j['entries'])} cached")
    if j["toolchain_complete"]:
        lines.append(f"  toolchain (a probe compiled and linked with it): nvcc {j['nvcc_version']} ({j['nvcc']}), "
                     f"CUDA runtime libraries {j['cuda_lib']}, cmake {j['cmake']}, ninja {j['ninja']}, {j['cxx']}, "
                     f"CUTLASS {j['cutlass_version']}")
    for m in j["missing"]:
        lines.append(f"  missing: {m['what']}: {m['install']}")
    if rep["tolerances"]:
        lines.append("tolerances: " + "; ".join(
            f"{path} rtol={row['rtol']:g} atol={row['atol']:g}" for path, row in rep["tolerances"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ffpa_attn.info", description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    rep = report()
    print(json.dumps(rep, indent=2, default=list) if args.json else _text(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
