#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# rocm-runtime.sh: unpack Debian's real ROCm 5.2.3 runtime (libamdhip64.so.5,
# libhsa-runtime64.so.1, librocm_smi64.so.1) and whatever it needs that is not installed into
# DIR, without installing anything: an installed runtime would stand first in every search for
# libamdhip64 and change what every other test finds. The tests that load it (real_rocm, in
# tests/gpu/) put DIR's library directories on LD_LIBRARY_PATH, the dynamic loader's own search,
# as a machine with the packages installed finds them.
# Usage: scripts/rocm-runtime.sh DIR (does nothing when DIR already holds the runtime). Without
# apt (not Debian, no network) it says so and the tests that need it are skipped.
set -euo pipefail

dir=${1:?usage: rocm-runtime.sh DIR}
packages=(libamdhip64-5 libhsa-runtime64-1 librocm-smi64-1)

if [ -f "$dir/usr/lib/x86_64-linux-gnu/libamdhip64.so.5" ] && [ -f "$dir/usr/lib/librocm_smi64.so.1" ]; then
	exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
	echo "rocm-runtime: no apt here: the real ROCm runtime tests will be skipped" >&2
	exit 0
fi

# The packages and their dependencies, less what is installed already (libc, libstdc++, and
# often libnuma1, libdrm-amdgpu1, libelf1 or libllvm15): the unpacked copies load beside those.
deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
	--no-replaces --no-enhances "${packages[@]}" 2>/dev/null | grep -v '^ ' | grep -v '<' | sort -u)
need=()
for p in $deps; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		need+=("$p")
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's download user writes there
fetch() { (cd "$tmp" && apt-get download -qq "${need[@]}" >/dev/null 2>&1); }
if ! fetch && ! { [ "$(id -u)" -eq 0 ] && apt-get update -qq && fetch; }; then
	echo "rocm-runtime: could not fetch ${need[*]}: the real ROCm runtime tests will be skipped" >&2
	exit 0
fi
mkdir -p "$dir"
for deb in "$tmp"/*.deb; do
	dpkg -x "$deb" "$dir"
done
echo "rocm-runtime: unpacked ${need[*]} into $dir" >&2
