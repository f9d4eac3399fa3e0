#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# setup.sh: install whatever dependency is missing (Debian 12), then configure and build.
# Usage: scripts/setup.sh [--runtime] [BUILD_DIR] [extra cmake arguments...]
#   --runtime: only what building and running the daemon, library and command line needs
#   (scripts/run.sh): no test packages, and a build without tests and benchmarks.
#   Without it: everything the test suite needs too (scripts/test.sh), and every target.
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_only=0
if [ "${1:-}" = --runtime ]; then
	runtime_only=1
	shift
fi
build_dir=${1:-build}
shift || true

# Building and running the daemon, librocmmem and rocmmemctl.
runtime_packages=(
	build-essential cmake pkg-config
	libuv1-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev libjson-c-dev libinih-dev
	libsmartcols-dev libmicrohttpd-dev
)
# The test suite, on top of those.
test_packages=(
	# The Debian packages (debian/, tests/package) and the third-party protocol client
	# (tests/protocol: Python code generated from the .proto by protoc).
	debhelper lintian protobuf-compiler python3-protobuf
	libcmocka-dev clang-format python3 python3-pip python3-setuptools python3-wheel python3-venv
	# Tests against the real tools: journald and journalctl, promtool and node_exporter.
	systemd prometheus prometheus-node-exporter man-db
	# The daemon under memcheck (tests/fault/valgrind.c).
	valgrind
	# The fuzz build (ROCMMEM_FUZZ=ON): clang and its libFuzzer and sanitizer runtimes.
	clang libclang-rt-dev
	# The integration tests that import upstream ComfyUI and FramePack (tests/integrations):
	# Debian's CPU-only PyTorch (a GPU is faked over it), and what ComfyUI's nodes import.
	python3-torch python3-torchvision python3-numpy python3-pil python3-scipy python3-tqdm
	python3-yaml python3-psutil python3-packaging git
	# rocmmemctl's bash completion, loaded by bash-completion's own loader (tests/install).
	bash-completion
	# A competing CPU load for the suite (ROCMMEM_TEST_LOAD=1 bash scripts/test.sh).
	stress-ng
	# Locale sources for localedef: sizes read alike under a decimal comma (tests/python).
	locales
)
packages=("${runtime_packages[@]}")
if ((!runtime_only)); then
	packages+=("${test_packages[@]}")
fi
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
	# Another apt-get (a user's upgrade, a second checkout's setup) holds dpkg's lock for a
	# while: wait for it rather than fail the stage.
	lock=(-o DPkg::Lock::Timeout=600)
	"${sudo[@]}" apt-get "${lock[@]}" update -qq
	"${sudo[@]}" apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" \
		>/dev/null
fi

if ((runtime_only)); then
	cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
		-DROCMMEM_BENCH=OFF "$@" >/dev/null
	cmake --build "$build_dir" -j "$(nproc)"
	exit 0
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

# Tests and benchmarks on, whatever a run.sh build of the same directory left in its cache.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
	-DROCMMEM_BENCH=ON -DROCMMEM_HIP_INCLUDE_DIR="$hip_dir/usr/include" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
