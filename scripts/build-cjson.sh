#!/bin/sh
# scripts/build-cjson.sh: builds cJSON as a static library for the agent's
# static link, from Debian's source package cjson at the version of the
# installed libcjson-dev (else libcjson1), with Debian's patches applied:
# Debian ships cJSON only as a shared library. Make runs it (the cache
# build/cjson-VERSION/), as it runs scripts/build-curl.sh. See docs/lean.md.
#
#   sh scripts/build-cjson.sh --version   prints the version that would be built
#   sh scripts/build-cjson.sh OUTDIR      builds OUTDIR/lib/libcjson.a and
#                                         OUTDIR/include/cjson/cJSON.h
set -eu
cd "$(dirname "$0")/.."
unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL CC CFLAGS CPPFLAGS LDFLAGS LIBS
DEBSRC_ME=build-cjson
. scripts/debsrc.sh

version() { debsrc_version libcjson-dev libcjson1; }

if [ "${1:-}" = --version ]; then
  version
  exit
fi
[ $# = 1 ] || debsrc_die "usage: $0 --version | OUTDIR"
OUT=$1
VER=$(version) || debsrc_die "neither libcjson-dev nor libcjson1 is installed: run 'make deps'"
case "$OUT" in
  *"cjson-$VER") ;;
  *) debsrc_die "$OUT does not end in cjson-$VER, the installed version (run make again)" ;;
esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/reload-agent-cjson.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
debsrc_log "cjson $VER: fetching Debian's source package"
debsrc_fetch cjson "$VER" "$WORK"
SRC=$WORK/src

# cJSON.c is the whole library (Debian's CMake build compiles just it into
# libcjson.so); the same flags as Debian's, one section per function.
CFLAGS="$(debsrc_cflags) -ffunction-sections -fdata-sections -fPIC"
# shellcheck disable=SC2086 # flag lists
${CURL_CC:-cc} $(debsrc_cppflags) $CFLAGS -std=c89 -c -o "$WORK/cJSON.o" "$SRC/cJSON.c" ||
  debsrc_die "cannot compile cJSON.c"
NEW=$OUT.new.$$
rm -rf "$NEW"
mkdir -p "$NEW/lib" "$NEW/include/cjson"
ar rcs "$NEW/lib/libcjson.a" "$WORK/cJSON.o"
cp "$SRC/cJSON.h" "$NEW/include/cjson/"
{
  echo "cjson $VER (Debian source package cjson, patches applied): cJSON.c"
  echo "CFLAGS: $CFLAGS"
} > "$NEW/BUILDINFO"
echo "$VER" > "$NEW/stamp"
rm -rf "$OUT"
mv "$NEW" "$OUT"
debsrc_log "cjson $VER: built $OUT/lib/libcjson.a"
