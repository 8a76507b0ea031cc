#!/bin/sh
# Runs each cmocka binary given as an argument, each under a time limit
# (UNIT_TIMEOUT seconds, default 120: libuv's runner gives every test a
# timeout too), so a hung test fails the run instead of stalling CI.
# Fails if any binary fails or times out.
limit=${UNIT_TIMEOUT:-120}
fail=0
for t in "$@"; do
  echo "== $t"
  timeout -k 5 "$limit" "$t"
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "FAILED: $t (timed out after ${limit}s)"; fail=1
  elif [ $rc -ne 0 ]; then
    echo "FAILED: $t"; fail=1
  fi
done
exit $fail
