# scripts/debsrc.sh: shell functions shared by scripts/build-curl.sh and
# scripts/build-cjson.sh (sourced, not run). They fetch a Debian source
# package at exactly the version of an installed binary package, so the
# library the agent links statically carries the same security patches as
# the Debian package it replaces, and follows its updates.
#
# Needs: apt-get, dpkg-source (dpkg-dev), root or sudo the first time (to add
# the deb-src entries and run apt-get update).

DEBSRC_LIST=/etc/apt/sources.list.d/debian-src.sources

# debsrc_log MSG...: one line on stderr, prefixed with the script's name.
debsrc_log() { echo "${DEBSRC_ME:-debsrc}: $*" >&2; }
debsrc_die() {
  debsrc_log "error: $*"
  exit 1
}

# debsrc_version PKG...: prints the installed version of the first PKG that
# is installed; fails (prints nothing) if none is.
debsrc_version() {
  for p in "$@"; do
    if dpkg-query -W -f='${db:Status-Status} ${Version}\n' "$p" 2>/dev/null | grep -q '^installed '; then
      dpkg-query -W -f='${Version}\n' "$p"
      return 0
    fi
  done
  return 1
}

debsrc_sudo() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Adds deb-src entries for Debian bookworm, its updates and its security
# archive (the suites the installed packages come from), once: an existing
# file is left as it is. Returns 0 if it wrote the file.
debsrc_add_sources() {
  [ -e "$DEBSRC_LIST" ] && return 1
  debsrc_log "adding $DEBSRC_LIST (deb-src for bookworm, bookworm-updates, bookworm-security)"
  debsrc_sudo sh -c "cat > '$DEBSRC_LIST'" <<'EOF'
# Added by reload-agent's scripts/debsrc.sh: the source packages of libcurl
# and cJSON, built into the agent at the installed versions.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# One download at a time on this machine (make -j builds curl and cJSON
# side by side; both may need to add the sources and update apt's lists).
DEBSRC_LOCK=${TMPDIR:-/tmp}/reload-agent-debsrc.lock
debsrc_lock() {
  command -v flock >/dev/null 2>&1 || return 0
  (umask 0 && : >> "$DEBSRC_LOCK") 2>/dev/null || return 0
  [ -w "$DEBSRC_LOCK" ] || return 0
  exec 9>> "$DEBSRC_LOCK"
  flock -w 900 9 || debsrc_die "waited 15 minutes for another source download ($DEBSRC_LOCK)"
}
debsrc_unlock() {
  command -v flock >/dev/null 2>&1 && [ -w "$DEBSRC_LOCK" ] && exec 9>&- || true
}

# debsrc_fetch SRCPKG VERSION DIR: downloads source package SRCPKG at
# VERSION into DIR (apt checks it against the signed archive index) and
# unpacks it with Debian's patches applied into DIR/src. Adds the deb-src
# entries and updates apt's lists only when the download fails without them.
debsrc_fetch() {
  pkg=$1 ver=$2 dir=$3
  debsrc_lock
  # apt-get source downloads as root when _apt cannot write here; say so
  # ourselves instead of warning every time.
  if [ "$(id -u)" = 0 ]; then asroot="-o APT::Sandbox::User=root"; else asroot=""; fi
  # shellcheck disable=SC2086 # asroot is one option or nothing
  if ! (cd "$dir" && apt-get source -q --download-only $asroot "$pkg=$ver") > "$dir/apt.log" 2>&1; then
    debsrc_add_sources || true
    debsrc_log "apt-get update (source lists for $pkg)"
    # apt has one lock for the machine: another apt run (an install, an
    # upgrade) makes update fail at once; wait for it, within bounds.
    tries=0
    until debsrc_sudo apt-get -o DPkg::Lock::Timeout=60 update -qq >> "$dir/apt.log" 2>&1; do
      tries=$((tries + 1))
      if [ "$tries" -ge 10 ] || ! grep -qi 'lock' "$dir/apt.log"; then
        cat "$dir/apt.log" >&2
        debsrc_die "apt-get update failed (log above)"
      fi
      debsrc_log "apt is busy (lock held); retrying in 10 s ($tries/10)"
      sleep 10
    done
    # shellcheck disable=SC2086
    (cd "$dir" && apt-get source -q --download-only $asroot "$pkg=$ver") >> "$dir/apt.log" 2>&1 ||
      { tail -n 5 "$dir/apt.log" >&2; debsrc_die "cannot download the source of $pkg $ver (apt log above)"; }
  fi
  debsrc_unlock
  dsc=$(ls "$dir"/"${pkg}"_*.dsc 2>/dev/null | head -n 1)
  [ -n "$dsc" ] || debsrc_die "no .dsc for $pkg $ver in $dir"
  dpkg-source -x "$dsc" "$dir/src" > "$dir/dpkg-source.log" 2>&1 ||
    { cat "$dir/dpkg-source.log" >&2; debsrc_die "dpkg-source -x $dsc failed (log above)"; }
}

# The compiler flags Debian builds its packages with (hardening=+all), for
# the same code built here.
debsrc_cflags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS; }
debsrc_cppflags() { DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CPPFLAGS; }
