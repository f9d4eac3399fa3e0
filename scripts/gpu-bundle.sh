#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gpu-bundle.sh: one directory that, copied to a machine with a GPU and its runtime (NVIDIA with
# the CUDA driver, or AMD with ROCm; PyTorch for the allocator's test), runs every test CTest
# labels gpu and the GPU benchmark with one command and writes one report:
#   DIR/run-gpu.sh [--bench tiny|quick|full|none] [--python PYTHON] [--out DIR]
#   -> DIR/results/REPORT.md and REPORT.json (logs in DIR/results/logs/)
# The target needs python3 only: the built programs and the shared libraries they use travel
# in the bundle (as with scripts/bench.sh --bundle); no compiler, CMake, network or apt.
# Usage: scripts/gpu-bundle.sh [--no-build] DIR
#   --no-build  use build-bench/ as it is (else scripts/setup.sh builds it, as bench.sh does)
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
dir=
while (($#)); do
	case "$1" in
	--no-build) build=0 ;;
	-h | --help)
		sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "gpu-bundle.sh: unknown option $1 (see --help)" >&2
		exit 1
		;;
	*) dir=$1 ;;
	esac
	shift
done
if [ -z "$dir" ]; then
	echo "usage: scripts/gpu-bundle.sh [--no-build] DIR" >&2
	exit 1
fi

build_dir=build-bench
if ((build)); then
	# Release flags, no sanitizers (real PyTorch does not run under them), the benchmarks on.
	bash scripts/setup.sh "$build_dir" -DROCMMEM_SANITIZE=OFF -DROCMMEM_BENCH=ON
fi
python3 scripts/gpu_bundle.py --build-dir "$build_dir" --source-dir "$PWD" --out "$dir"
echo "gpu-bundle.sh: bundle in $dir ($(du -sh "$dir" | cut -f1)): copy it to the GPU machine and run $dir/run-gpu.sh"
