#!/usr/bin/env bash
# The test suite under a sanitizer: `make test-asan`, `make test-tsan`, and the short ASan pass of
# `make test`. Usage: tools/sanitize.sh address|thread [FILTER [SKIP]] (regular expressions over
# test IDs, as tools/run-suites.sh takes them; FILTER . is every test).
#
# Everything is built with the sanitizer into its own build folder (.build-asan, .build-tsan), so
# the CLI tests spawn instrumented `streamlens` binaries: a sanitizer report in a spawned run makes
# it exit non-zero (ASan/LSan 1, TSan 66) and the test that spawned it fails with the report.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: tools/sanitize.sh address|thread [FILTER [SKIP]]}; filter=${2:-.}; skip=${3:-}
case "$kind" in
  address) build=.build-asan; runtime=asan ;;
  thread) build=.build-tsan; runtime=tsan ;;
  *) echo "sanitize: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
esac
supp="$PWD/tools/sanitizers"
# oneTBB (inside OpenVINO) dlopens libtbbbind with RTLD_DEEPBIND, which both runtimes refuse to
# load under; this variable is oneTBB's documented switch to load it without that flag.
export TBB_ENABLE_SANITIZERS=1
# The slow unwinder gives whole stacks through libraries built without frame pointers (GLib,
# OpenVINO), which the suppressions need to match their owners.
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:print_suppressions=0:${TSAN_OPTIONS:-}"
# The plugin tests load libgststreamlens.so into programs that are not ours (gst-inspect-1.0,
# gst-launch-1.0, python3): they need the sanitizer's runtime preloaded (Tests/CLITests/CLI.swift
# reads this), and their own leaks at exit are not ours to report.
rt=$(ls "$(dirname "$(dirname "$(command -v swift)")")"/lib/clang/*/lib/linux/libclang_rt.$runtime-x86_64.so 2>/dev/null | head -n1 || true)
[ -n "$rt" ] || { echo "sanitize: libclang_rt.$runtime-x86_64.so not found in the Swift toolchain" >&2; exit 1; }
# The toolchain's TSan runtime calls into libdispatch, which those programs do not load.
[ "$kind" = thread ] && rt="$rt $(dirname "$(dirname "$(command -v swift)")")/lib/swift/linux/libdispatch.so"
export STREAMLENS_SANITIZER_RUNTIME="$rt"
# Instrumented code is 2-15x slower: a pipeline may take longer than the usual 20 s to start.
export STREAMLENS_START_TIMEOUT=${STREAMLENS_START_TIMEOUT:-120}
# … and a model load in the background takes seconds: tests whose stream must outlast one run
# longer streams (Tests/CLITests/CLI.swift, CLI.slowdown).
export STREAMLENS_TEST_SLOWDOWN=${STREAMLENS_TEST_SLOWDOWN:-6}
echo "sanitize: building with -sanitize=$kind into $build" >&2
# (SwiftPM warns about -pthread from pkg-config and the linker about sanitizer-local symbols,
# thousands of lines of noise with no meaning here: filtered.)
quiet() { grep --line-buffered -v -e "prohibited flag" -e "Cannot export local symbol" || true; }
status=0
swift build --build-path "$build" --sanitize="$kind" --build-tests 2>&1 | quiet; status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || exit "$status"
exec tools/run-suites.sh "$(swift build --build-path "$build" --sanitize="$kind" --show-bin-path)" "$filter" "$skip"
