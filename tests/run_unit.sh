#!/bin/sh
# Runs each cmocka binary given as an argument, each under a time limit
# (UNIT_TIMEOUT seconds, default 120: libuv's runner gives every test a
# timeout too), so a hung test fails the run instead of stalling CI.
# Fails if any binary fails or times out. Ends with one summary line,
# "unit: B binaries, T tests; F binaries failed" (T sums cmocka's own "N test(s)
# run." lines), so no count of the suite is kept by hand.
limit=${UNIT_TIMEOUT:-120}
fail=0
bins=0
tests=0
failed=0
log=$(mktemp "${TMPDIR:-/tmp}/run_unit.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
for t in "$@"; do
  echo "== $t"
  bins=$((bins + 1))
  timeout -k 5 "$limit" "$t" >"$log" 2>&1
  rc=$?
  cat "$log"
  n=$(sed -n 's/^\[==========\] \([0-9][0-9]*\) test(s) run\.$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  tests=$((tests + n))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FAILED: $t (timed out after ${limit}s)"; fail=1; failed=$((failed + 1))
  elif [ $rc -ne 0 ]; then
    echo "FAILED: $t"; fail=1; failed=$((failed + 1))
  fi
done
echo "unit: $bins binaries, $tests tests; $failed binaries failed"
exit $fail
