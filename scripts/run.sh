#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh: install what running needs if missing, build the daemon, library and command line
# (no tests, no benchmarks), and start rocmmemd in the foreground.
# Extra arguments go to rocmmemd (e.g. --budget 8G); Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --runtime build

if [ -n "${ROCMMEM_SOCKET:-}" ]; then
	sock=$ROCMMEM_SOCKET
elif [ "$(id -u)" -eq 0 ]; then
	sock=/run/rocmmemd/rocmmemd.sock
else
	sock=${XDG_RUNTIME_DIR:?set XDG_RUNTIME_DIR or ROCMMEM_SOCKET}/rocmmemd.sock
fi
prev=
for arg in "$@"; do
	case $prev in --socket | -s) sock=$arg ;; esac
	case $arg in --socket=*) sock=${arg#--socket=} ;; esac
	prev=$arg
done

cat <<MSG
rocmmemd is starting on socket $sock
Query it from another terminal with:
    $PWD/build/rocmmemctl --socket $sock status
MSG
exec build/rocmmemd "$@"
