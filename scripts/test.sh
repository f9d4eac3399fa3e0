#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test.sh: install what is missing, build, and run the whole test suite (what CI runs), in
# three stages: the normal build; the same suite built with AddressSanitizer and UBSan, where
# any memory error or leak makes the daemon exit non-zero and its test fail; then the fuzz
# targets for a bounded time in a clang build. Every stage runs even when an earlier one
# failed; a summary of all their failures ends the output, and the exit status is non-zero
# if any stage failed (to build, or a test).
# Arguments go to ctest (e.g. -L integration); they skip the fuzz stage. Tests labelled
# "long" (thousands of clients killed, two minutes of load) are left out unless
# ROCMMEM_TEST_LONG=1.
# ROCMMEM_TEST_LOAD=N (1 means 2) runs `stress-ng --cpu N` beside the whole run, a competing
# CPU load as on a busy machine; it is stopped at the end, however the run ends.
set -uo pipefail
cd "$(dirname "$0")/.."

skip_long=(-LE long)
if [ "${ROCMMEM_TEST_LONG:-0}" = 1 ]; then
	skip_long=()
fi

summary=()
failed=0
run_start=$SECONDS

# start_load starts the competing CPU load ROCMMEM_TEST_LOAD asks for, if any.
load_pid=
load_text=
start_load() {
	local n=${ROCMMEM_TEST_LOAD:-0}
	[ "$n" = 0 ] && return 0
	[ "$n" = 1 ] && n=2
	if ! command -v stress-ng >/dev/null; then
		echo "test.sh: ROCMMEM_TEST_LOAD needs stress-ng (scripts/setup.sh installs it)" >&2
		exit 1
	fi
	stress-ng --cpu "$n" --quiet &
	load_pid=$!
	load_text=", beside stress-ng --cpu $n"
	echo "test.sh: competing load: stress-ng --cpu $n (pid $load_pid)"
}
stop_load() {
	if [ -n "$load_pid" ]; then
		kill "$load_pid" 2>/dev/null
		wait "$load_pid" 2>/dev/null
		load_pid=
	fi
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM

# stage NAME BUILD_DIR SETUP_ARGS... -- CTEST_ARGS...: build, then run ctest; records how it
# went (with the failed tests' names) in the summary instead of stopping.
stage() {
	local name=$1 dir=$2 setup=() tests=() start=$SECONDS rc list
	shift 2
	while (($#)) && [ "$1" != -- ]; do
		setup+=("$1")
		shift
	done
	shift
	tests=("$@")
	echo "=== test.sh: stage $name ($dir) ==="
	if ! bash scripts/setup.sh "$dir" "${setup[@]}"; then
		summary+=("$name: FAILED TO BUILD ($((SECONDS - start)) s)")
		failed=1
		return
	fi
	rm -f "$dir/Testing/Temporary/LastTestsFailed.log"
	(cd "$dir" && ctest --output-on-failure -j "$(nproc)" "${tests[@]}")
	rc=$?
	if ((rc == 0)); then
		summary+=("$name: passed ($((SECONDS - start)) s)")
		return
	fi
	failed=1
	list=$(cut -d: -f2- "$dir/Testing/Temporary/LastTestsFailed.log" 2>/dev/null | tr '\n' ' ')
	summary+=("$name: FAILED ($((SECONDS - start)) s): ${list:-ctest exited $rc}")
}

start_load
stage plain build -- "${skip_long[@]}" "$@"
stage asan build-asan -DROCMMEM_SANITIZE=ON -- "${skip_long[@]}" "$@"
# Fuzzing (docs/security.md): the libFuzzer targets, built with clang, each run for
# ROCMMEM_FUZZ_SECONDS (30) over the committed corpus. Only for the whole suite: arguments
# that pick tests skip it.
if (($# == 0)); then
	stage fuzz build-fuzz -DCMAKE_C_COMPILER=clang -DROCMMEM_FUZZ=ON -- -L fuzz
fi
stop_load

echo "=== test.sh: summary ($((SECONDS - run_start)) s$load_text) ==="
printf '  %s\n' "${summary[@]}"
exit "$failed"
