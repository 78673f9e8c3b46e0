#!/usr/bin/env bash
# tests/timed.sh NAME CMD...: run one test suite, print its wall time, and append it to
# $SUITE_TIMES (make test prints that file at the end). Exits with the suite's status.
set -u
name=$1
shift
t0=$(date +%s.%N)
"$@"
rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
status=$([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)")
echo "== $name: ${secs} s, $status"
if [ -n "${SUITE_TIMES:-}" ]; then
  mkdir -p "$(dirname "$SUITE_TIMES")"
  printf '%-18s %8s s  %s\n' "$name" "$secs" "$status" >> "$SUITE_TIMES"
fi
exit $rc
