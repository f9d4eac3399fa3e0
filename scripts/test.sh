#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh: install what is missing, build, and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
