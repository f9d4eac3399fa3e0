#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh: install what is missing, build, and run the whole test suite (what CI runs):
# once in the normal build, once more built with AddressSanitizer and UBSan, where any
# memory error or leak makes the daemon exit non-zero and its test fail; then the fuzz targets
# for a bounded time in a clang build.
# Arguments go to ctest (e.g. -L integration). Tests labelled "long" (thousands of clients
# killed, two minutes of load) are left out unless ROCMMEM_TEST_LONG=1.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_long=(-LE long)
if [ "${ROCMMEM_TEST_LONG:-0}" = 1 ]; then
	skip_long=()
fi

scripts/setup.sh build
(cd build && ctest --output-on-failure -j "$(nproc)" "${skip_long[@]}" "$@")

scripts/setup.sh build-asan -DROCMMEM_SANITIZE=ON
(cd build-asan && ctest --output-on-failure -j "$(nproc)" "${skip_long[@]}" "$@")

# Fuzzing (docs/security.md): the libFuzzer targets, built with clang, each run for
# ROCMMEM_FUZZ_SECONDS (30) over the committed corpus. Only for the whole suite: arguments
# that pick tests skip it.
if (($# == 0)); then
	scripts/setup.sh build-fuzz -DCMAKE_C_COMPILER=clang -DROCMMEM_FUZZ=ON
	(cd build-fuzz && ctest --output-on-failure -j "$(nproc)" -L fuzz)
fi
