#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench.sh: build build-bench/ (scripts/setup.sh) and run every benchmark, writing the report.
# Usage: scripts/bench.sh [--quick | --tiny] [--no-build] [--bundle DIR] [-- run.py options]
#   (default)   the full run (about 5-10 minutes): bench/results/REPORT.md and REPORT.json
#   --quick     a smoke run of about a minute: build-bench/bench/results-quick/
#   --tiny      what the CTest smoke test runs (seconds): build-bench/bench/results-tiny/
#   --no-build  use build-bench/ as it is
#   --bundle DIR  instead of running: copy the daemon, the benchmark programs, the runner and
#               the shared libraries they need into DIR, to run on another machine (a GPU
#               one) with DIR/run-bench.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
build=1
bundle=
while (($#)); do
	case "$1" in
	--quick) mode=quick ;;
	--tiny) mode=tiny ;;
	--no-build) build=0 ;;
	--bundle)
		bundle=${2:?--bundle needs a directory}
		shift
		;;
	--)
		shift
		break
		;;
	-h | --help)
		sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench.sh: unknown option $1 (see --help)" >&2
		exit 1
		;;
	esac
	shift
done

build_dir=build-bench
if ((build)); then
	# Release flags (-O2, assertions kept), no sanitizers; the tests are built too, for the
	# stand-in CUDA driver the scaling benchmark uses.
	bash scripts/setup.sh "$build_dir" -DROCMMEM_SANITIZE=OFF -DROCMMEM_BENCH=ON
fi

if [ -n "$bundle" ]; then
	mkdir -p "$bundle/bench" "$bundle/lib" "$bundle/tests/fakegpu/cuda"
	cp "$build_dir/rocmmemd" "$bundle/"
	cp "$build_dir"/bench/bench_* "$build_dir/bench/build_info.json" bench/run.py bench/before_after.py "$bundle/bench/"
	if [ -f "$build_dir/tests/fakegpu/cuda/libcuda.so.1" ]; then
		cp "$build_dir/tests/fakegpu/cuda/libcuda.so.1" "$bundle/tests/fakegpu/cuda/"
	fi
	# The shared libraries beyond the C library itself (libuv, protobuf-c, libsystemd, inih).
	for bin in "$bundle/rocmmemd" "$bundle"/bench/bench_*; do
		ldd "$bin" | awk '$3 ~ /^\// {print $3}'
	done | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
		while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
	cat >"$bundle/run-bench.sh" <<'EOF'
#!/usr/bin/env bash
# run-bench.sh: the benchmarks from this bundle (made by scripts/bench.sh --bundle).
# Usage: run-bench.sh [--quick|--tiny] [run.py options]; the report goes to bench/results/
# here (full) or bench/results-MODE/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=full
case "${1:-}" in --quick) mode=quick; shift ;; --tiny) mode=tiny; shift ;; esac
out="$here/bench/results"
[ "$mode" = full ] || out="$here/bench/results-$mode"
exec python3 "$here/bench/run.py" --build-dir "$here" --lib-dir "$here/lib" --mode "$mode" \
	--out "$out" "$@"
EOF
	chmod +x "$bundle/run-bench.sh"
	echo "bench.sh: bundle in $bundle ($(du -sh "$bundle" | cut -f1)): run $bundle/run-bench.sh"
	exit 0
fi

case "$mode" in
full) out=bench/results ;;
*) out=$build_dir/bench/results-$mode ;;
esac
exec python3 bench/run.py --build-dir "$build_dir" --mode "$mode" --out "$out" "$@"
