#!/bin/sh
# scripts/base-image.sh [TAG]: makes sure podman has the local Debian
# bookworm minbase image TAG (default localhost/debian-minbase:bookworm),
# made with debootstrap from the mirror apt already uses (DEBIAN_MIRROR
# overrides it) and `podman import`ed. Base images cannot be pulled here;
# this is the one place that makes one. Used by scripts/image-test.sh and
# tests/cluster/images.sh. Needs root, podman and debootstrap;
# CONTAINERS_CONF should name scripts/containers.conf. Bounded in time.
set -eu
BASE=${1:-localhost/debian-minbase:bookworm}
PATH=$PATH:/usr/sbin:/sbin
fail() { echo "base-image: FAIL: $*" >&2; exit 1; }

if timeout 120 podman image exists "$BASE"; then
  echo "base-image: reusing $BASE"
  exit 0
fi

# The Debian mirror apt already uses for bookworm (deb822 or one-line form).
apt_mirror() {
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function stanza() { if (!found && u != "" && s ~ /(^| )bookworm( |$)/) { print u; found = 1 } u = ""; s = "" }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { stanza(); next }
      $1 == "URIs:" { u = $2 }
      $1 == "Suites:" { $1 = ""; s = $0 }
      $1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                    if (!found && $(i + 1) == "bookworm") { print $i; found = 1 } }
      END { stanza() }' "$f"
  done | head -n 1
}

MIRROR=${DEBIAN_MIRROR:-$(apt_mirror)}
[ -n "$MIRROR" ] || fail "no bookworm mirror in /etc/apt/sources.list*: set DEBIAN_MIRROR"
D=$(mktemp -d /tmp/reload-agent-base.XXXXXX)
trap 'rm -rf "$D"' EXIT
echo "base-image: building $BASE: debootstrap from $MIRROR"
timeout 900 debootstrap --variant=minbase bookworm "$D/rootfs" "$MIRROR" > "$D/debootstrap.log" 2>&1 ||
  { tail -n 20 "$D/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
tar -C "$D/rootfs" -c . | timeout 300 podman import -q - "$BASE" >/dev/null || fail "podman import of the base failed"
