#!/bin/sh
# scripts/build-curl.sh: builds the libcurl the agent links statically, from
# Debian's own source package of curl at the version of the installed
# libcurl4-openssl-dev (else libcurl4), with Debian's patches (the security
# fixes) applied. Make runs it (the cache build/curl-VERSION/); so does
# `make deps` and the Dockerfile's build stage. See docs/lean.md.
#
#   sh scripts/build-curl.sh --version   prints the version that would be built
#   sh scripts/build-curl.sh OUTDIR      builds it into OUTDIR (include/, lib/libcurl.a,
#                                        BUILDINFO, stamp); an existing OUTDIR is replaced
#
# The build: HTTP and HTTPS only, OpenSSL (the system's libssl, linked by the
# agent), the threaded resolver, IPv6, proxies (incl. HTTPS proxies, proxy
# Basic auth and the *_proxy environment variables), date parsing (the
# Retry-After header). Nothing else: no other protocol, no HTTP/2 (the API
# client uses HTTP/1.1 keep-alive), no zlib/brotli/zstd (the agent never
# asks for compressed replies: they are small JSON documents or a reload
# endpoint's status), no IDN, PSL, SSH, RTMP, LDAP, GSS-API/Kerberos, NTLM,
# Digest, cookies, HSTS, alt-svc, DoH, MIME, netrc.
#
# Debian's own build pops its last two patches (the GnuTLS and NSS flavours,
# which only rename the library in Makefile.am) before building the OpenSSL
# flavour; so does this script. It uses the configure script the source
# ships: Debian regenerates it (autoreconf) only for its packaging patches
# to configure.ac and Makefile.am, which concern features disabled here
# (GSS-API link flags, LDAP, zsh completion, the library names).
set -eu
cd "$(dirname "$0")/.."
# Run from make, this inherits the caller's build settings (make asan's
# CC=clang and sanitizer flags, in MAKEFLAGS and the environment): none of
# them is meant for this library.
unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL CC CFLAGS CPPFLAGS LDFLAGS LIBS
DEBSRC_ME=build-curl
. scripts/debsrc.sh

version() { debsrc_version libcurl4-openssl-dev libcurl4; }

if [ "${1:-}" = --version ]; then
  version
  exit
fi
[ $# = 1 ] || debsrc_die "usage: $0 --version | OUTDIR"
OUT=$1
VER=$(version) || debsrc_die "neither libcurl4-openssl-dev nor libcurl4 is installed: run 'make deps'"
case "$OUT" in
  *"curl-$VER") ;;
  *) debsrc_die "$OUT does not end in curl-$VER, the installed version (did apt upgrade curl? run make again)" ;;
esac

T0=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/reload-agent-curl.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
chmod 755 "$WORK"
debsrc_log "curl $VER: fetching Debian's source package"
debsrc_fetch curl "$VER" "$WORK"
SRC=$WORK/src

# The OpenSSL flavour, as debian/rules builds it: without the last two
# patches of the series (90_gnutls, 99_nss).
last2=$(grep -v '^[[:space:]]*\(#\|$\)' "$SRC/debian/patches/series" | tail -n 2 | tr '\n' ' ')
[ "$last2" = "90_gnutls.patch 99_nss.patch " ] ||
  debsrc_die "the patch series of curl $VER no longer ends with 90_gnutls, 99_nss (it ends: $last2): check debian/rules"
for p in 99_nss 90_gnutls; do
  (cd "$SRC" && patch -R -p1 -s < "debian/patches/$p.patch") || debsrc_die "cannot pop $p.patch"
done

CONFIGURE_ARGS="--disable-shared --enable-static --with-pic --disable-dependency-tracking
  --with-openssl --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs
  --enable-http --enable-proxy --enable-http-auth --enable-dateparse --enable-ipv6
  --enable-threaded-resolver --enable-socketpair --enable-verbose
  --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict
  --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp
  --disable-gopher --disable-mqtt --disable-websockets
  --disable-manual --disable-libcurl-option --disable-ntlm --disable-ntlm-wb --disable-crypto-auth
  --disable-tls-srp --disable-unix-sockets --disable-cookies --disable-doh --disable-mime
  --disable-netrc --disable-progress-meter --disable-dnsshuffle --disable-get-easy-options
  --disable-alt-svc --disable-headers-api --disable-hsts --disable-versioned-symbols
  --without-zlib --without-brotli --without-zstd --without-libidn2 --without-libpsl
  --without-librtmp --without-libssh2 --without-libssh --without-wolfssh --without-nghttp2
  --without-nghttp3 --without-ngtcp2 --without-quiche --without-msh3 --without-hyper
  --without-libgsasl --without-gssapi --disable-ares"
# Debian's flags, plus one section per function and object so that the
# agent's link (--gc-sections) drops what it never calls.
CFLAGS="$(debsrc_cflags) -ffunction-sections -fdata-sections"
CPPFLAGS="$(debsrc_cppflags)"
debsrc_log "curl $VER: configure"
# shellcheck disable=SC2086 # CONFIGURE_ARGS is a word list
(cd "$SRC" && CC="${CURL_CC:-cc}" ./configure $CONFIGURE_ARGS CFLAGS="$CFLAGS" CPPFLAGS="$CPPFLAGS" LDFLAGS= LIBS=) \
  > "$WORK/configure.log" 2>&1 || { tail -n 30 "$WORK/configure.log" >&2; debsrc_die "configure failed (log above)"; }
debsrc_log "curl $VER: make -C lib"
make -C "$SRC/lib" -j"$(nproc 2>/dev/null || echo 2)" > "$WORK/make.log" 2>&1 ||
  { tail -n 30 "$WORK/make.log" >&2; debsrc_die "make failed (log above)"; }

# What the agent relies on: refuse a build that lacks it.
features=$(sh "$SRC/curl-config" --features | tr '\n' ' ')
protocols=$(sh "$SRC/curl-config" --protocols | tr '\n' ' ')
[ "$protocols" = "HTTP HTTPS " ] || debsrc_die "protocols are '$protocols', expected HTTP HTTPS only"
for f in SSL AsynchDNS IPv6 HTTPS-proxy; do
  case " $features" in *" $f "*) ;; *) debsrc_die "feature $f missing (features: $features)" ;; esac
done

NEW=$OUT.new.$$
rm -rf "$NEW"
mkdir -p "$NEW/lib" "$NEW/include/curl"
cp "$SRC/lib/.libs/libcurl.a" "$NEW/lib/"
cp "$SRC"/include/curl/*.h "$NEW/include/curl/"
{
  echo "curl $VER (Debian source package curl, patches applied, OpenSSL flavour)"
  echo "protocols: $protocols"
  echo "features: $features"
  echo "configure:" $CONFIGURE_ARGS
  echo "CFLAGS: $CFLAGS"
  echo "CPPFLAGS: $CPPFLAGS"
} > "$NEW/BUILDINFO"
echo "$VER" > "$NEW/stamp"
rm -rf "$OUT"
mv "$NEW" "$OUT"
debsrc_log "curl $VER: built $OUT/lib/libcurl.a in $(($(date +%s) - T0)) s"
