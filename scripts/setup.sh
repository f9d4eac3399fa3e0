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
	libuv1-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev libjson-c-dev
	libcmocka-dev clang-format python3
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
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
