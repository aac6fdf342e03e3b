#!/usr/bin/env bash
# The commands behind the CTest tests of index/fuzz/CMakeLists.txt. Exit 77 means
# skipped (SKIP_RETURN_CODE), which happens only when no clang++ is installed.
#
#   ctest_driver.sh build SRC_DIR BUILD_DIR GENERATOR LAUNCHER
#   ctest_driver.sh run BUILD_DIR TARGET WORK_DIR SECONDS RSS_MB MALLOC_MB TIMEOUT_S SEED_DIR...
#   ctest_driver.sh sanitize-unit INDEX_DIR BUILD_DIR GENERATOR LAUNCHER CXX
# Environment: FFPA_FUZZ_CXX, the clang++ to use (empty: clang++-14, else clang++).
set -uo pipefail

# Prints the clang++ to build with. Returns 1 when none is installed (skip) and 2
# when FFPA_FUZZ_CXX names one that is not there (a configuration error: fail).
find_clang() {
  if [ -n "${FFPA_FUZZ_CXX:-}" ]; then
    command -v "$FFPA_FUZZ_CXX" && return 0
    echo "ffpa fuzz: FFPA_FUZZ_CXX='$FFPA_FUZZ_CXX' is not an executable" >&2
    return 2
  fi
  command -v clang++-14 || command -v clang++ || return 1
}

# Whether the fuzz tests can run; exits the script otherwise.
need_clang() {
  local cxx rc
  cxx=$(find_clang)
  rc=$?
  if [ "$rc" -eq 1 ]; then
    echo "ffpa fuzz: SKIPPED: no clang++-14 or clang++ on PATH; tools/bootstrap installs clang-14 and libclang-rt-14-dev" >&2
    exit 77
  fi
  [ "$rc" -eq 0 ] || exit 1
  echo "$cxx"
}

# Leaks are findings too (LSan); stack-use-after-return and init-order checks cost
# little at this size. UBSan reports are fatal through -fno-sanitize-recover=all;
# halt_on_error also covers a build without it.
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

cmd=${1:-}
shift || true
case "$cmd" in
  build)
    [ $# -eq 4 ] || { echo "usage: $0 build SRC_DIR BUILD_DIR GENERATOR LAUNCHER" >&2; exit 2; }
    src=$1 bin=$2 gen=$3 launcher=$4
    cxx=$(need_clang) || exit $?
    echo "ffpa fuzz: building the fuzz targets in $bin with $cxx"
    cmake -S "$src" -B "$bin" -G "$gen" -DCMAKE_CXX_COMPILER="$cxx" -DFFPA_COMPILER_LAUNCHER="$launcher" || exit 1
    cmake --build "$bin" || exit 1
    ;;
  run)
    [ $# -ge 8 ] || { echo "usage: $0 run BUILD_DIR TARGET WORK_DIR SECONDS RSS_MB MALLOC_MB TIMEOUT_S SEED_DIR..." >&2; exit 2; }
    bin=$1 target=$2 work=$3/$2 seconds=$4 rss=$5 malloc=$6 hang=$7
    shift 7
    need_clang >/dev/null || exit $?
    fuzzer="$bin/ffpa_fuzz_$target"
    if [ ! -x "$fuzzer" ]; then
      echo "ffpa fuzz: $fuzzer is missing although clang is installed; see the output of index.fuzz.build"
      exit 1
    fi
    # New inputs go to a corpus of the build tree, which grows across runs (the
    # committed seeds are only read); findings and the input files of a crashed
    # run are not carried over.
    rm -rf "$work/crashes" "$work/tmp"
    mkdir -p "$work/corpus" "$work/crashes" "$work/tmp"
    log="$work/fuzz.log"
    echo "ffpa fuzz: $target for ${seconds}s, memory limit ${rss} MiB, single allocation ${malloc} MiB, hang ${hang}s; log: $log"
    args=(-max_total_time="$seconds" -rss_limit_mb="$rss" -malloc_limit_mb="$malloc" -timeout="$hang"
          -print_final_stats=1 -artifact_prefix="$work/crashes/" "$work/corpus" "$@")
    echo "TMPDIR=$work/tmp $fuzzer ${args[*]}" >"$log"
    # The outer timeout only backs up libFuzzer's own limits (a wedged process).
    TMPDIR="$work/tmp" timeout -s KILL $((seconds + 240)) "$fuzzer" "${args[@]}" >>"$log" 2>&1
    rc=$?
    found=$(find "$work/crashes" -type f | sort)
    if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
      tail -n 120 "$log"
      echo "ffpa fuzz: FAILED: $target exited with $rc"
      for f in $found; do
        echo "  finding: $f"
        echo "    reproduce: $fuzzer $f"
        echo "    minimize:  $fuzzer -minimize_crash=1 -max_total_time=60 -exact_artifact_path=$f.min $f"
      done
      exit 1
    fi
    grep -E '^(INFO: Seed|#[0-9]+[[:space:]]+(INITED|DONE))|^stat::(number_of_executed_units|peak_rss_mb)|^Done ' "$log"
    echo "ffpa fuzz: $target: no crash, hang, leak or sanitizer report; $(find "$work/corpus" -type f | wc -l) inputs in $work/corpus"
    ;;
  sanitize-unit)
    [ $# -eq 5 ] || { echo "usage: $0 sanitize-unit INDEX_DIR BUILD_DIR GENERATOR LAUNCHER CXX" >&2; exit 2; }
    idx=$1 bin=$2 gen=$3 launcher=$4 cxx=$5
    # Release as in the presets: the tests' expectations about the test shared
    # objects (which libraries an optimised build needs) hold for it.
    cmake -S "$idx" -B "$bin" -G "$gen" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
      -DFFPA_INDEX_FUZZ=OFF -DFFPA_COMPILER_LAUNCHER="$launcher" \
      -DCMAKE_PROJECT_ffpa_index_INCLUDE="$idx/fuzz/sanitize_units.cmake" >"$bin.configure.log" 2>&1 \
      || { cat "$bin.configure.log"; exit 1; }
    cmake --build "$bin" --target ffpa_index_unit_tests || exit 1
    # All of the core's unit tests: the zip, ELF and verify ones are the point, the
    # rest (pack, manylinux, hashes) drive the same readers and cost seconds.
    "$bin/bin/ffpa_index_unit_tests" --gtest_brief=1 || exit 1
    ;;
  *)
    echo "usage: $0 build|run|sanitize-unit ..." >&2
    exit 2
    ;;
esac
