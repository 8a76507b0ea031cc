#!/bin/sh
# replay.sh BUILD_FUZZ_DIR - runs every libFuzzer target fuzz_<name> in
# BUILD_FUZZ_DIR once over each file of tests/fuzz/corpus/<name>/ (seeds,
# minimized corpus and past crash-* inputs). Fails if a target is missing
# its corpus or any input crashes or breaks an invariant. Ends with one
# summary line, "fuzz-replay: N targets, M inputs; F targets failed".
set -u
dir=${1:?usage: replay.sh BUILD_FUZZ_DIR}
corpus=$(cd "$(dirname "$0")" && pwd)/corpus
fail=0
found=0
targets=0
inputs=0
failed=0
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] || continue
  found=1
  targets=$((targets + 1))
  name=${bin##*/fuzz_}
  if [ ! -d "$corpus/$name" ] || [ -z "$(ls -A "$corpus/$name")" ]; then
    echo "FAILED: no corpus in $corpus/$name for $bin"
    fail=1
    failed=$((failed + 1))
    continue
  fi
  n=$(ls "$corpus/$name" | wc -l)
  inputs=$((inputs + n))
  echo "== $bin ($n inputs)"
  if ! "$bin" -runs=0 "$corpus/$name"/* >"$dir/replay-$name.log" 2>&1; then
    tail -n 30 "$dir/replay-$name.log"
    echo "FAILED: $bin (full log: $dir/replay-$name.log)"
    fail=1
    failed=$((failed + 1))
  fi
done
[ "$found" = 1 ] || { echo "FAILED: no fuzz_* binaries in $dir"; fail=1; }
echo "fuzz-replay: $targets targets, $inputs inputs; $failed targets failed"
exit $fail
