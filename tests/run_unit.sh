#!/bin/sh
# Runs each cmocka binary given as an argument; fails if any fails.
fail=0
for t in "$@"; do
  echo "== $t"
  "$t" || { echo "FAILED: $t"; fail=1; }
done
exit $fail
