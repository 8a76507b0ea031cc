#!/bin/sh
# run.sh BUILD_FUZZ_DIR SECONDS - fuzzes every target fuzz_<name> in
# BUILD_FUZZ_DIR for an equal share of SECONDS. New inputs go to the working
# corpus BUILD_FUZZ_DIR/corpus/<name>/ (kept between runs, outside git);
# tests/fuzz/corpus/<name>/ is read as the seed corpus. Crashes, leaks and
# timeouts are saved as tests/fuzz/corpus/<name>/crash-* (etc.) so that
# replay.sh keeps checking them once fixed. Fails if any target crashed.
set -u
dir=${1:?usage: run.sh BUILD_FUZZ_DIR SECONDS}
secs=${2:?usage: run.sh BUILD_FUZZ_DIR SECONDS}
seeds=$(cd "$(dirname "$0")" && pwd)/corpus
n=$(ls "$dir"/fuzz_* 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || { echo "no fuzz_* binaries in $dir"; exit 1; }
each=$((secs / n))
[ "$each" -gt 0 ] || each=1
fail=0
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  work=$dir/corpus/$name
  mkdir -p "$work" "$seeds/$name"
  echo "== $bin for ${each}s"
  if ! "$bin" -max_total_time="$each" -timeout=10 -rss_limit_mb=1024 -max_len=8192 \
      -artifact_prefix="$seeds/$name/" -print_final_stats=1 \
      "$work" "$seeds/$name" >"$dir/run-$name.log" 2>&1; then
    tail -n 40 "$dir/run-$name.log"
    echo "FAILED: $bin (artifact saved under $seeds/$name/, log $dir/run-$name.log)"
    fail=1
  fi
done
exit $fail
