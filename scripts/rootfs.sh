#!/bin/sh
# scripts/rootfs.sh BINARY DEST: lays out the container image's root
# filesystem in DEST (which must not exist): the statically linked agent
# (stripped), the CA bundle, and passwd/group/nsswitch.conf naming the
# unprivileged user 65532. Nothing else: no shell, no libc, no loader. The
# Dockerfile's build stage runs it; tests/bench/memory.py runs it to list the
# image's files with their sizes (docs/lean.md).
set -eu
[ $# = 2 ] || { echo "usage: $0 BINARY DEST" >&2; exit 2; }
BIN=$1 R=$2
CA=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
die() { echo "rootfs: $*" >&2; exit 1; }

[ -f "$BIN" ] || die "$BIN not found"
[ -e "$R" ] && die "$R exists"
[ -s "$CA" ] || die "no CA bundle at $CA (Debian package ca-certificates)"
# A scratch image has no loader: refuse a dynamically linked binary.
if LC_ALL=C readelf -lW "$BIN" | grep -q 'INTERP\|Requesting program interpreter'; then
  die "$BIN is dynamically linked (build it with make, not a sanitizer build)"
fi

install -D -m 0755 "$BIN" "$R/usr/local/bin/reload-agent"
strip --strip-all "$R/usr/local/bin/reload-agent"
install -D -m 0644 "$CA" "$R/etc/ssl/certs/ca-certificates.crt"
# getpwnam and friends read these; the image runs as 65532:65532.
printf 'root:x:0:0:root:/:/sbin/nologin\nreload-agent:x:65532:65532:reload-agent:/nonexistent:/sbin/nologin\n' \
  > "$R/etc/passwd"
printf 'root:x:0:\nreload-agent:x:65532:\n' > "$R/etc/group"
# The static glibc resolves names with its built-in files and dns services
# only: say so, so that a host's nsswitch.conf naming other services
# (which a static binary cannot load) never matters. Kubernetes mounts
# /etc/hosts and /etc/resolv.conf into the container.
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$R/etc/nsswitch.conf"
chmod 0644 "$R/etc/passwd" "$R/etc/group" "$R/etc/nsswitch.conf"
