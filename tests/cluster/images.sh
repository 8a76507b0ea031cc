#!/usr/bin/env bash
# tests/cluster/images.sh: the test cluster's images, with no registry.
#
#   images.sh build             builds them with podman (cached layers):
#     - the agent, from the repository's Dockerfile (the current tree), tagged
#       with the name the manifests and the injector use by default
#       (docker.io/library/reload-agent:<VERSION>, what "reload-agent:<VERSION>"
#       normalises to) and localhost/reload-agent:e2e;
#     - the pod sandbox, registry.k8s.io/pause:<PAUSE_VERSION>, from the
#       Kubernetes module's own build/pause/linux/pause.c, compiled static;
#     - localhost/e2e-nginx:1, Debian's nginx-light on the local base.
#   images.sh import SOCKET     imports each into the node's containerd
#                               (namespace k8s.io) unless the same image ID
#                               was imported before (recorded under STATE).
#
# The Debian base comes from scripts/base-image.sh (debootstrap, once).
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/versions.sh"
export CONTAINERS_CONF="$repo/scripts/containers.conf"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

PAUSE_VERSION=3.10.2
VERSION=$(sed -n 's/^VERSION *?= *//p' "$repo/Makefile")
AGENT_IMAGE=docker.io/library/reload-agent:$VERSION
PAUSE_IMAGE=registry.k8s.io/pause:$PAUSE_VERSION
NGINX_IMAGE=localhost/e2e-nginx:1
BASE=localhost/debian-minbase:bookworm
# RA_EXTRA_IMAGES: more podman images for `import` (the load suite's peers).
IMAGES="$AGENT_IMAGE $PAUSE_IMAGE $NGINX_IMAGE ${RA_EXTRA_IMAGES:-}"

log() { echo "images.sh: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
pm() { timeout 900 podman "$@"; }

build_all() {
	local t0 d
	t0=$(date +%s)
	sh "$repo/scripts/base-image.sh" "$BASE" >&2 || die "no base image"
	d=$(mktemp -d /tmp/ra-images.XXXXXX)
	# shellcheck disable=SC2064
	trap "rm -rf '$d'" RETURN

	local commit
	commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
	pm build -q --network host --build-arg BASE="$BASE" --build-arg GIT_COMMIT="$commit" \
		-t localhost/reload-agent:e2e -f "$repo/Dockerfile" "$repo" > "$d/agent.log" 2>&1 ||
		{ tail -n 30 "$d/agent.log" >&2; die "podman build of the agent failed"; }
	pm tag localhost/reload-agent:e2e "$AGENT_IMAGE"

	local src
	src=$(cd "$here" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	[ -f "$src/build/pause/linux/pause.c" ] || die "no pause.c in the k8s.io/kubernetes@$K8S_VERSION module"
	mkdir -p "$d/pause"
	gcc -Os -static -Wall -DVERSION="v$PAUSE_VERSION-reload-agent" -o "$d/pause/pause" \
		"$src/build/pause/linux/pause.c"
	strip "$d/pause/pause"
	cp "$here/images/pause.Containerfile" "$d/pause/Containerfile"
	pm build -q -t "$PAUSE_IMAGE" "$d/pause" > "$d/pause.log" 2>&1 ||
		{ tail -n 30 "$d/pause.log" >&2; die "podman build of pause failed"; }

	pm build -q --network host --build-arg BASE="$BASE" -t "$NGINX_IMAGE" \
		-f "$here/images/nginx.Containerfile" "$here/images" > "$d/nginx.log" 2>&1 ||
		{ tail -n 30 "$d/nginx.log" >&2; die "podman build of e2e-nginx failed"; }
	log "built $IMAGES in $(($(date +%s) - t0)) s"
}

# import_all SOCKET CTR STATE: podman save | ctr import, skipping an image
# whose podman ID was already imported into this cluster.
import_all() {
	local sock=$1 ctr=$2 state=$3 img id tag f
	mkdir -p "$state/images"
	for img in $IMAGES; do
		id=$(pm image inspect --format '{{.Id}}' "$img") || die "no image $img: run images.sh build"
		tag=$(echo "$img" | tr '/:' '__')
		f="$state/images/$tag.id"
		if [ -f "$f" ] && [ "$(cat "$f")" = "$id" ] &&
			timeout 60 "$ctr" -a "$sock" -n k8s.io images ls -q 2> /dev/null | grep -qxF "$img"; then
			continue
		fi
		pm save --format docker-archive -o "$state/images/$tag.tar" "$img" >/dev/null
		timeout 300 "$ctr" -a "$sock" -n k8s.io images import --local "$state/images/$tag.tar" >&2 ||
			die "ctr import of $img failed"
		rm -f "$state/images/$tag.tar"
		echo "$id" > "$f"
		log "imported $img (${id:0:12})"
	done
}

case ${1:-} in
build) build_all ;;
import) [ $# = 4 ] || die "usage: images.sh import SOCKET CTR STATE"; import_all "$2" "$3" "$4" ;;
names) echo "AGENT_IMAGE=$AGENT_IMAGE PAUSE_IMAGE=$PAUSE_IMAGE NGINX_IMAGE=$NGINX_IMAGE" ;;
*) die "usage: images.sh build | import SOCKET CTR STATE | names" ;;
esac
