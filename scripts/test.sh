#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh: install what is missing, build, and run the whole test suite (what CI runs):
# once in the normal build, once more built with AddressSanitizer and UBSan, where any
# memory error or leak makes the daemon exit non-zero and its test fail.
# Arguments go to ctest (e.g. -L integration).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh build
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")

scripts/setup.sh build-asan -DROCMMEM_SANITIZE=ON
(cd build-asan && ctest --output-on-failure -j "$(nproc)" "$@")
