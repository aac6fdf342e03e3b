"""The lowest arch the kernels support has one home, cmake/kernel-facts.json's
arch_rules.min_sm, and every reader takes it from there.

CTest: facts.min-sm (unit). Fails when
  - a code file of the tree spells the threshold again: a comparison with it (`>= 80`,
    `GREATER_EQUAL 80`, `__CUDA_ARCH__ < 800`), a named floor set to it (`MIN_SM = 80`,
    `set(_MIN_ARCH 80)`), or a message stating it (`sm_80+`, `sm_80 or newer`, `GPU from
    sm_80`) outside a comment; messages are built from the fact instead;
  - a doc (README.md, docs/) states a floor ("GPU from sm_N", "older than sm_N", "the
    kernels need sm_N") other than the home's;
  - a malformed min_sm (missing, not an sm number, above a hardware path's threshold) is not
    a configure error naming arch_rules.min_sm (cmake/FfpaKernelFacts.cmake);
  - a reader disagrees with the home: the arch validation (cmake/FfpaCudaArchs.cmake, against
    a stand-in nvcc, also with a file whose floor moved), the generated ffpa/arch_rules.h and
    build-info module of this build tree, ffpa_attn.jit / validation, and the PEP 517 backend.
Each scan is also run on deliberately broken lines, which must be caught.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(os.environ.get("FFPA_SOURCE") or Path(__file__).resolve().parents[2])
HOME = "cmake/kernel-facts.json"
# This module: its breakage cases spell the threshold on purpose.
SELF = "ctest/facts/test_min_sm.py"
PROBE = Path(__file__).resolve().parent / "probe_facts.cmake"
CODE_SUFFIXES = (".py", ".cmake", ".h", ".cuh", ".cu", ".cpp", ".in", ".sh", ".toml", ".json")
def home_min_sm(text: str) -> int:
    """arch_rules.min_sm of the home's text; a clear error unless it is an sm number."""
    value = json.loads(text).get("arch_rules", {}).get("min_sm")
    if isinstance(value, bool) or not isinstance(value, int) or value < 10:
        raise ValueError(f"{HOME}: arch_rules.min_sm must be an sm number such as 80, got {value!r}")
    return value


def _patterns(n: int) -> tuple[list[re.Pattern[str]], list[re.Pattern[str]]]:
    """(spellings of the threshold in code, statements of it in messages) for the number n."""
    num = rf"[\"']?{n}[\"']?(?![\w.])"
    code = [
        re.compile(rf"\b(GREATER_EQUAL|GREATER|LESS_EQUAL|LESS|EQUAL)\s+{num}"),   # CMake if()
        re.compile(rf"(>=|<=|(?<![<-])<(?![<=])|(?<![>-])>(?![>=])|==|!=)\s*{num}"),  # Python / C++
        re.compile(rf"(?<![\w.\"']){n}\s*(>=|<=|<(?!<)|>(?!>))"),
        re.compile(rf"__CUDA_ARCH__\s*[<>=!]+\s*{n}0\b"),
        re.compile(rf"(?i)\b\w*(min|floor|lowest)\w*[\"']?\s*(=|:|\s)\s*{num}"),  # a named floor (last)
    ]
    says = [re.compile(rf"(?i)\bsm_?{n}(\+|\s+or\s+newer|\s+and\s+newer)"),
            re.compile(rf"(?i)\b(gpus?|archs?)\s+from\s+sm_?{n}\b"),
            re.compile(rf"(?i)\bolder\s+than\s+sm_?{n}\b"),
            re.compile(rf"(?i)\bneeds?\s+(an?\s+\w+\s+GPU\s+from\s+)?sm_?{n}\b")]
    return code, says


def _is_comment(line: str, rel: str) -> bool:
    s = line.lstrip()
    if rel.endswith((".h", ".cuh", ".cu", ".cpp")):
        return s.startswith(("//", "*", "/*"))
    return s.startswith("#") and not s.startswith(("#if", "#error", "#elif"))


def code_spellings(rel: str, text: str, n: int) -> list[str]:
    """'path:line: text' for every spelling of the threshold n in a code file's text."""
    code, says = _patterns(n)
    hits = []
    for i, line in enumerate(text.splitlines(), 1):
        # A named floor anywhere, comments included; comparisons and messages outside
        # comments only: a comment's prose compares other quantities with the same number
        # ("rows < 80 do not see it").
        named_floor = code[-1]
        if named_floor.search(line) or (not _is_comment(line, rel) and any(p.search(line) for p in code + says)):
            hits.append(f"{rel}:{i}: {line.strip()}")
    return hits


_DOC_FLOOR = re.compile(r"(?i)\b(?:(?:gpus?|archs?)\s+from|older\s+than|kernels\s+need)\s+sm_?(\d+)\b")


def doc_disagreements(rel: str, text: str, n: int) -> list[str]:
    """'path:line: text' for every floor a doc states other than n."""
    return [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
            for m in _DOC_FLOOR.finditer(line) if int(m[1]) != n]


def tree_files(root: Path) -> list[str]:
    """The tree's files as git sees them: tracked, plus untracked ones git does not ignore."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    return sorted({p for p in out.decode().split("\0") if p})


def _text(root: Path, rel: str) -> str | None:
    path = root / rel
    if not path.is_file() or path.is_symlink():
        return None
    data = path.read_bytes()
    return None if b"\0" in data else data.decode("utf-8", errors="replace")


def _probe(work: Path, *defines: str, facts: Path | None = None) -> subprocess.CompletedProcess[str]:
    """cmake -P ctest/facts/probe_facts.cmake in <work> (the arch validation writes its
    probe source under the script's binary directory, the working directory)."""
    cmd = ["cmake", *defines]
    if facts is not None:
        cmd.append(f"-DFACTS={facts}")
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*cmd, "-P", str(PROBE)], capture_output=True, text=True, cwd=work)


# --- the tree as it is ----------------------------------------------------------------

@pytest.fixture(scope="module")
def min_sm():
    return home_min_sm((REPO / HOME).read_text(encoding="utf-8"))


def test_no_second_spelling_in_code(min_sm):
    hits = []
    for rel in tree_files(REPO):
        if rel in (HOME, SELF) or not (rel.endswith(CODE_SUFFIXES) or Path(rel).name == "CMakeLists.txt"):
            continue
        text = _text(REPO, rel)
        if text is None:
            continue
        hits += code_spellings(rel, text, min_sm)
    assert not hits, (f"the lowest supported arch lives in {HOME} (arch_rules.min_sm) only; read it from there "
                      "(FFPA_MIN_SM after ffpa_load_kernel_facts(), ffpa::kMinSm, ffpa_attn.validation.MIN_SM):\n  "
                      + "\n  ".join(hits))


def test_the_docs_state_the_homes_floor(min_sm):
    hits = []
    for rel in tree_files(REPO):
        if rel.endswith(".md") and (rel == "README.md" or rel.startswith("docs/")):
            hits += doc_disagreements(rel, _text(REPO, rel) or "", min_sm)
    assert not hits, f"these lines state a floor other than {HOME}'s arch_rules.min_sm = {min_sm}:\n  " + "\n  ".join(hits)


def test_the_generated_header_and_build_info_carry_it(min_sm):
    include = Path(os.environ["FFPA_KERNEL_FACTS_INCLUDE_DIR"])
    header = (include / "ffpa" / "arch_rules.h").read_text(encoding="utf-8")
    assert f"inline constexpr int kMinSm = {min_sm};" in header
    assert "static_assert(kDeviceSm >= kMinSm" in header
    info = Path(os.environ["FFPA_PYTHON_BUILD_DIR"]) / "ffpa_attn" / "_build_info.py"
    assert re.search(rf"^MIN_SM = {min_sm}$", info.read_text(encoding="utf-8"), re.M), info


def test_the_python_readers_take_it_from_the_build_info(min_sm, monkeypatch):
    monkeypatch.syspath_prepend(os.environ["FFPA_PYTHON_BUILD_DIR"])
    from ffpa_attn import jit, routing, validation
    assert validation.MIN_SM == validation.ARCH_RULES["min_sm"] == jit.MIN_SM == min_sm
    assert f"GPU from sm_{min_sm};" in routing.FALLBACK_REASONS["arch"][1]
    with pytest.raises(ValueError, match=f"give a CUDA arch from {min_sm}"):
        jit.build(str(min_sm - 1), [64], ["fp16"])


def test_the_pep517_backend_reads_the_source_trees(min_sm, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "tools" / "pep517"))
    import ffpa_build_backend as backend
    assert backend.min_sm(REPO) == min_sm


@pytest.fixture(scope="module")
def fake_nvcc(tmp_path_factory):
    """A stand-in nvcc: lists compute_75 .. compute_90 and compiles the base archs only."""
    d = tmp_path_factory.mktemp("nvcc")
    nvcc = d / "nvcc"
    nvcc.write_text("#!/bin/sh\n"
                    "case \"$1\" in --list-gpu-arch) printf 'compute_75\\ncompute_80\\ncompute_86\\ncompute_89\\n"
                    "compute_90\\n'; exit 0;; esac\n"
                    "case \"$*\" in *-arch=sm_*[af]\\ *) exit 1;; esac\nexit 0\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


def _facts_with(tmp_path: Path, edit) -> Path:
    facts = json.loads((REPO / HOME).read_text(encoding="utf-8"))
    edit(facts["arch_rules"])
    path = tmp_path / "kernel-facts.json"
    path.write_text(json.dumps(facts, indent=2))
    return path


def test_the_arch_validation_refuses_below_the_floor(min_sm, fake_nvcc, tmp_path):
    ok = _probe(tmp_path, "-DMODE=validate", f"-DTOKENS={min_sm}", f"-DNVCC={fake_nvcc}")
    assert ok.returncode == 0 and f"PROBE ARCHS: {min_sm}-real" in ok.stdout + ok.stderr, ok.stderr
    below = _probe(tmp_path, "-DMODE=validate", "-DTOKENS=75", f"-DNVCC={fake_nvcc}")
    assert below.returncode != 0
    assert f"for these kernels (sm_{min_sm}+ needed)" in re.sub(r"\s+", " ", below.stderr), below.stderr


def test_a_moved_floor_moves_the_arch_validation(tmp_path, fake_nvcc):
    """The validation reads the file: with min_sm 86, sm_80 is refused and sm_86 accepted."""
    facts = _facts_with(tmp_path, lambda r: r.update(min_sm=86))
    refused = _probe(tmp_path, "-DMODE=validate", "-DTOKENS=80", f"-DNVCC={fake_nvcc}", facts=facts)
    assert refused.returncode != 0 and "(sm_86+ needed)" in re.sub(r"\s+", " ", refused.stderr), refused.stderr
    assert "Valid tokens: 86 89 90" in re.sub(r"\s+", " ", refused.stderr)
    ok = _probe(tmp_path, "-DMODE=validate", "-DTOKENS=86", f"-DNVCC={fake_nvcc}", facts=facts)
    assert ok.returncode == 0 and "PROBE ARCHS: 86-real" in ok.stdout + ok.stderr, ok.stderr


# --- malformed facts are configure errors ---------------------------------------------

@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("min_sm"), "no 'arch_rules.min_sm'"),
    (lambda r: r.update(min_sm="sm_80"), "arch_rules.min_sm must be an sm number such as 90, got 'sm_80'"),
    (lambda r: r.update(min_sm=8), "arch_rules.min_sm must be an sm number such as 90, got '8'"),
    (lambda r: r.update(min_sm=0), "arch_rules.min_sm must be an sm number such as 90, got '0'"),
    (lambda r: r.update(min_sm=None), "arch_rules.min_sm must be an sm number such as 90, got ''"),
    (lambda r: r.update(min_sm=80.5), "arch_rules.min_sm must be an sm number such as 90, got '80.5'"),
    (lambda r: r.update(min_sm=95), "arch_rules.min_sm (95) is above arch_rules.tma_min_sm (90)"),
    (lambda r: r.update(min_sm=89), None),
], ids=["missing", "prefixed", "one-digit", "zero", "null", "fraction", "above-fp8", "at-fp8"])
def test_a_malformed_min_sm_is_a_clear_configure_error(tmp_path, edit, message):
    facts = _facts_with(tmp_path, edit)
    r = _probe(tmp_path, "-DMODE=load", facts=facts)
    err = re.sub(r"\s+", " ", r.stderr)
    if message is None:
        assert r.returncode == 0 and "PROBE MIN_SM: 89" in r.stdout + r.stderr, r.stderr
        return
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"ffpa: {facts}: {message}" in err, r.stderr


# --- the scans catch broken copies -----------------------------------------------------

N = 80


@pytest.mark.parametrize("rel, line", [
    ("cmake/FfpaCudaArchs.cmake", f"set(_FFPA_MIN_CUDA_ARCH {N})"),
    ("cmake/FfpaCutlassSubset.cmake", f"  if(a GREATER_EQUAL {N})"),
    ("cmake/X.cmake", f'  if(base LESS "{N}")'),
    ("python/ffpa_attn/jit.py", f"MIN_SM = {N}"),
    ("tools/pep517/ffpa_build_backend.py", f"    usable = [a for a in archs if int(a) >= {N}]"),
    ("python/ffpa_attn/x.py", f"    if major * 10 + minor < {N}:"),
    ("python/ffpa_attn/x.py", f"    if {N} <= sm:"),
    ("csrc/kernels/ffpa/utils.cuh", f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < {N}0"),
    ("csrc/src/api.cu", f"  if (sm < {N}) return false;"),
    ("python/ffpa_attn/routing.py", f'    "arch": (DeviceError, "the kernels need an NVIDIA GPU from sm_{N}; on those"'),
    ("tools/pep517/ffpa_build_backend.py", f'        _log("leaving out sm_75 (the kernels need sm_{N}+)")'),
    ("csrc/kernels/ffpa/utils.cuh", f'#error "they need sm_{N} or newer (FFPA_CUDA_ARCHS)"'),
    ("python/ffpa_attn/x.py", f"    # the floor: min_sm: {N}"),  # a comment still may not set a named floor
])
def test_the_code_scan_catches(rel, line):
    assert code_spellings(rel, line, N)


@pytest.mark.parametrize("rel, line", [
    ("ctest/release/CMakeLists.txt", f"  ARGS -DFFPA_PROFILE=dev -DFFPA_CUDA_ARCHS={N} ${{_tools}}"),
    ("python/ffpa_attn/jit.py", f'    b.add_argument("--arch", help="CUDA arch, e.g. {N}, 90, 100")'),
    ("ctest/gpu/test_summarize.py", f'kernel="fmha_cutlassF_f16_aligned_64x128_rf_sm{N}"'),
    ("csrc/kernels/ffpa/utils.cuh", f"// PTX wrappers for the sm_{N}+ path: cp.async, ldmatrix"),
    ("python/ffpa_attn/x.py", f"    # the kernels need sm_{N} or newer"),
    ("python/ffpa_attn/x.py", f"    if width > {N}0:"),
    ("python/ffpa_attn/x.py", f"    if sm >= {N + 10}:"),
    ("python/ffpa_attn/x.py", f"    total = {N}.5 * x"),
    ("cmake/X.cmake", f"  if(n GREATER {N}0)"),
    ("csrc/tests/emulate_masks.cpp", f"      // key 100 (rows < {N} do not see it), seq 1"),  # prose, another quantity
])
def test_the_code_scan_leaves_alone(rel, line):
    assert not code_spellings(rel, line, N)


@pytest.mark.parametrize("line, bad", [
    ("| A100, A10, H100 (any other GPU from sm_75) |", True),
    ("torch SDPA (`arch`: the kernels need sm_86)", True),
    ("| older than sm_70 (V100, T4) |", True),
    ("a local build, any arch from sm_90", True),
    (f"| A100, A10, H100 (any other GPU from sm_{N}) |", False),
    (f"| older than sm_{N} (V100, T4) |", False),
    ("the FFPA kernels (`mma`, `tma` from sm_90)", False),
    ("FP8 from sm_89, TMA from sm_90", False),
])
def test_the_doc_scan(line, bad):
    assert bool(doc_disagreements("docs/install.md", line, N)) == bad


def test_the_home_is_parsed_strictly():
    assert home_min_sm('{"arch_rules": {"min_sm": 86}}') == 86
    for text in ('{"arch_rules": {}}', '{"arch_rules": {"min_sm": "80"}}', '{"arch_rules": {"min_sm": true}}',
                 '{"arch_rules": {"min_sm": 8}}'):
        with pytest.raises(ValueError, match="arch_rules.min_sm must be an sm number"):
            home_min_sm(text)


# --- the emulated device's archs (emulated_device) ------------------------------------

def _emulated_facts_with(tmp_path: Path, edit) -> Path:
    facts = json.loads((REPO / HOME).read_text(encoding="utf-8"))
    edit(facts["emulated_device"])
    path = tmp_path / "kernel-facts.json"
    path.write_text(json.dumps(facts, indent=2))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda e: e.update(archs=[]), "emulated_device.archs is empty"),
    (lambda e: e["archs"][0].update(name="sm_89"), "emulated_device.archs[0].name 'sm_89' is not a new arch name"),
    (lambda e: e["archs"][1].update(name="89"), "emulated_device.archs[1].name '89' is not a new arch name"),
    (lambda e: e["archs"][0].update(sm=75), "emulated_device.archs[0] (89).sm must be an sm number from "
                                            "arch_rules.min_sm (80), got '75'"),
    (lambda e: e["archs"][1].update(target="89"), "emulated_device.archs[1] (90).target '89' is not a target of "
                                                  "sm_90"),
    (lambda e: e["archs"][2].update(max_smem_bytes=0), "emulated_device.archs[2] (120f).max_smem_bytes must be a "
                                                       "positive byte count, got '0'"),
    (lambda e: e.update(default_arch="100"), "emulated_device.default_arch '100' is not one of its archs"),
    (lambda e: e.pop("default_arch"), "no 'emulated_device.default_arch'"),
], ids=["empty", "prefixed", "duplicate", "below-floor", "foreign-target", "no-smem", "unknown-default",
        "no-default"])
def test_a_malformed_emulated_device_is_a_clear_configure_error(tmp_path, edit, message):
    r = _probe(tmp_path, "-DMODE=load", facts=_emulated_facts_with(tmp_path, edit))
    assert r.returncode != 0, r.stdout + r.stderr
    assert message in re.sub(r"\s+", " ", r.stderr), r.stderr


def test_the_emulated_archs_reach_the_header_and_build_info():
    """The emulated device's runtime (ffpa/emulated_archs.h) and the package (_build_info)
    carry cmake/kernel-facts.json's emulated_device, row for row."""
    home = json.loads((REPO / HOME).read_text(encoding="utf-8"))["emulated_device"]
    header = (Path(os.environ["FFPA_KERNEL_FACTS_INCLUDE_DIR"]) / "ffpa" / "emulated_archs.h").read_text()
    rows = re.findall(r'\{"([^"]+)", (\d+), (\d+)\},', header)
    assert rows == [(a["name"], str(a["sm"]), str(a["max_smem_bytes"])) for a in home["archs"]]
    assert f'kDefaultArch[] = "{home["default_arch"]}"' in header
    info = (Path(os.environ["FFPA_PYTHON_BUILD_DIR"]) / "ffpa_attn" / "_build_info.py").read_text()
    scope: dict = {}
    exec(compile("\n".join(l for l in info.splitlines() if l.startswith("EMULATED_")), "_build_info", "exec"), scope)
    assert scope["EMULATED_ARCHS"] == {a["name"]: a["sm"] for a in home["archs"]}
    assert scope["EMULATED_DEFAULT_ARCH"] == home["default_arch"]
