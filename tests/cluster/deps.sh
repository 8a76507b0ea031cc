#!/bin/sh
# tests/cluster/deps.sh: the Debian packages the test cluster needs, installed
# when missing (root): podman (+ catatonit for its pods, as image-test uses it)
# and debootstrap build the images; runc runs containers for containerd; the
# CNI plugins give pods their network; iptables and conntrack serve
# kube-proxy. Go itself (1.26 or newer) must be on the machine already.
set -e
PKGS="podman catatonit runc debootstrap containernetworking-plugins iptables conntrack iproute2 \
util-linux openssl curl git ca-certificates"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
command -v go >/dev/null 2>&1 || { echo "cluster deps: no go on PATH (Go 1.26 is needed to build Kubernetes)" >&2; exit 1; }
[ -z "$missing" ] && exit 0
echo "cluster deps: installing:$missing" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
