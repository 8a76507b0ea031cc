#!/usr/bin/env bash
# tests/loadtest/peers.sh: the peers the load suite measures beside
# reload-agent, built from the Go module proxy at pinned versions into
# $RA_CLUSTER_CACHE/peers/<name>-<version>/ (never into the clone), and their
# images (FROM scratch: the static binary alone), plus the application they
# reload, Prometheus from Debian's package on the local base.
#
#   peers.sh build    builds what is missing, prints NAME=IMAGE lines
#
# stakater/Reloader is not here: the module proxy serves no version of
# github.com/stakater/Reloader to this machine (docs/performance.md "Under load, with the peers").
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$repo/tests/cluster/versions.sh"
export GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOTOOLCHAIN=local
export CONTAINERS_CONF="$repo/scripts/containers.conf"

CMR_VERSION=v0.12.0      # github.com/jimmidyson/configmap-reload (the newest the proxy serves here)
PCR_VERSION=v0.88.0      # github.com/prometheus-operator/prometheus-operator, cmd/prometheus-config-reloader
PROM_IMAGE=localhost/e2e-prometheus:1
BASE=localhost/debian-minbase:bookworm

log() { echo "peers.sh: $*" >&2; }
die() {
	log "FAIL: $*"
	exit 1
}

# gobuild NAME VERSION OUTBIN MODULE PKG [REPLACE...]: a wrapper module that
# requires MODULE@VERSION as a tool (go install @v is refused: the proxy
# will not list versions for the deprecation check) and builds PKG.
gobuild() {
	local name=$1 v=$2 out=$3 mod=$4 pkg=$5
	shift 5
	local dir="$RA_CLUSTER_CACHE/peers/$name-$v"
	if [ -x "$dir/bin/$out" ]; then
		echo "$dir/bin/$out"
		return
	fi
	local start src
	start=$(date +%s)
	src="$RA_CLUSTER_CACHE/peers/src/$name-$v"
	rm -rf "$src" "$dir"
	mkdir -p "$src" "$dir/bin"
	(
		cd "$src"
		go mod init reload-agent.test/peer >/dev/null 2>&1
		go mod edit -go=1.26.0
		local r
		for r in "$@"; do go mod edit -replace="$r"; done
		go get -tool "$pkg@$v" >&2
		go build -trimpath -ldflags "-s -w" -o "$dir/bin/$out" "$pkg" >&2
	) || die "building $name $v"
	log "built $name $v in $(($(date +%s) - start)) s"
	echo "$dir/bin/$out"
}

# scratch_image TAG BINARY: an image holding only BINARY as /NAME.
scratch_image() {
	local tag=$1 bin=$2 d
	d=$(mktemp -d /tmp/ra-peer.XXXXXX)
	cp "$bin" "$d/$(basename "$bin")"
	printf 'FROM scratch\nCOPY %s /%s\nUSER 65534:65534\nENTRYPOINT ["/%s"]\n' \
		"$(basename "$bin")" "$(basename "$bin")" "$(basename "$bin")" > "$d/Containerfile"
	timeout 600 podman build -q -t "$tag" "$d" >/dev/null || die "podman build of $tag"
	rm -rf "$d"
}

build() {
	sh "$repo/scripts/base-image.sh" "$BASE" >&2
	local cmr pcr m=github.com/prometheus-operator/prometheus-operator
	cmr=$(gobuild configmap-reload "$CMR_VERSION" configmap-reload github.com/jimmidyson/configmap-reload \
		github.com/jimmidyson/configmap-reload)
	pcr=$(gobuild prometheus-config-reloader "$PCR_VERSION" prometheus-config-reloader "$m" \
		"$m/cmd/prometheus-config-reloader" \
		"$m/pkg/apis/monitoring=$m/pkg/apis/monitoring@$PCR_VERSION" \
		"$m/pkg/client=$m/pkg/client@$PCR_VERSION")
	scratch_image "localhost/peer-configmap-reload:$CMR_VERSION" "$cmr"
	scratch_image "localhost/peer-prometheus-config-reloader:$PCR_VERSION" "$pcr"
	timeout 900 podman build -q --network host --build-arg BASE="$BASE" -t "$PROM_IMAGE" \
		-f "$here/prometheus.Containerfile" "$here" >/dev/null || die "podman build of $PROM_IMAGE"
	echo "CONFIGMAP_RELOAD_IMAGE=localhost/peer-configmap-reload:$CMR_VERSION"
	echo "PROMETHEUS_CONFIG_RELOADER_IMAGE=localhost/peer-prometheus-config-reloader:$PCR_VERSION"
	echo "PROMETHEUS_IMAGE=$PROM_IMAGE"
}

case ${1:-} in
build) build ;;
*) die "usage: peers.sh build" ;;
esac
