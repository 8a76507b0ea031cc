#!/bin/sh
# Installs the Debian packages the build and the tests need, when missing.
# Used by `make deps` (and so by `make test`), which then builds the static
# libcurl and cJSON from Debian's source packages (scripts/build-curl.sh,
# scripts/build-cjson.sh: they add the deb-src entries they need). Needs
# root for apt-get. libcurl4-openssl-dev and libcjson-dev give the versions
# (and so the security fixes) those builds follow; dpkg-dev unpacks source
# packages; libuv1-dev, libssl-dev and libhttp-parser-dev bring the static
# archives the agent links; lld links it (scripts/link-order.txt).
set -e
PKGS="build-essential dpkg-dev lld pkg-config clang libclang-rt-14-dev libuv1-dev libcjson-dev \
libcurl4-openssl-dev libssl-dev libcmocka-dev libhttp-parser-dev python3 inotify-tools strace openssl \
coreutils time nginx-light curl clang-format libyaml-dev python3-yaml python3-jsonpatch"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# kubectl validates manifests/ offline (tests/integration/test_manifests.py);
# Debian's kubernetes-client provides one where the machine has none.
command -v kubectl >/dev/null 2>&1 || missing="$missing kubernetes-client"
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
