#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh: install whatever build and test dependency is missing (Debian 12), then build.
# Usage: scripts/setup.sh [BUILD_DIR] [extra cmake arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
shift || true

packages=(
	build-essential cmake pkg-config
	libuv1-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev libjson-c-dev libinih-dev
	libcmocka-dev clang-format python3 python3-pip python3-setuptools python3-wheel python3-venv
	# Tests against the real tools: journald and journalctl, promtool and node_exporter.
	systemd prometheus prometheus-node-exporter man-db
	# The daemon under memcheck (tests/fault/valgrind.c).
	valgrind
	# The fuzz build (ROCMMEM_FUZZ=ON): clang and its libFuzzer and sanitizer runtimes.
	clang libclang-rt-dev
	# A competing CPU load for the suite (ROCMMEM_TEST_LOAD=1 bash scripts/test.sh).
	stress-ng
)
missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}" >&2
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || {
			echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	# Packages with services (prometheus, node_exporter) must not start them here: a
	# policy-rc.d that refuses keeps them stopped, unless the machine has its own policy.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
		"${sudo[@]}" chmod 755 "$policy"
		trap '"${sudo[@]}" rm -f "$policy"' EXIT
	fi
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# HIP's headers, unpacked from Debian's package into the build tree rather than installed (an
# installed HIP runtime would stand first in every search for libamdhip64): test_hip_abi checks
# the project's own HIP declarations against them. Without them that one test is skipped.
hip_dir=$PWD/$build_dir/hip-headers
if [ ! -f "$hip_dir/usr/include/hip/hip_runtime_api.h" ]; then
	mkdir -p "$build_dir"
	tmp=$(mktemp -d)
	chmod 755 "$tmp" # apt's download user writes there
	if (cd "$tmp" && apt-get download -qq libamdhip64-dev >/dev/null 2>&1) ||
		{ [ "$(id -u)" -eq 0 ] && apt-get update -qq &&
			(cd "$tmp" && apt-get download -qq libamdhip64-dev >/dev/null 2>&1); }; then
		dpkg -x "$tmp"/libamdhip64-dev_*.deb "$hip_dir"
	else
		echo "setup: could not fetch libamdhip64-dev: test_hip_abi will be skipped" >&2
	fi
	rm -rf "$tmp"
fi

# Debian's real ROCm runtime, unpacked likewise, for the tests that load it (tests/gpu/real_rocm.c).
bash scripts/rocm-runtime.sh "$PWD/$build_dir/rocm-runtime"

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DROCMMEM_HIP_INCLUDE_DIR="$hip_dir/usr/include" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
