#!/usr/bin/env bash
# tests/cluster/build.sh: builds (or finds cached) the binaries of the real
# test cluster from the Go module proxy: Kubernetes, etcd and containerd at the
# versions pinned in versions.sh; and the chart's tools (`make test`, e2e):
# helm, and kustomize at the version kubectl $K8S_VERSION embeds. Each lands in $RA_CLUSTER_CACHE/<name>-<version>/
# with a .complete marker; a second call prints the cached path and builds
# nothing. Prints "built <name> in N s" for every build it did.
#
# Usage: build.sh [k8s|etcd|containerd|helm|kustomize|all]   (default all)
# Output (stdout, last lines): K8S_BIN=..., ETCD_BIN=..., CONTAINERD_BIN=...,
# HELM_BIN=..., KUSTOMIZE_BIN=... (each a bin directory)
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
export GOFLAGS=-buildvcs=false CGO_ENABLED=0
export GOTOOLCHAIN=local

log() { echo "build.sh: $*" >&2; }

# wrapper_dir NAME VERSION: a scratch module directory kept beside the cache.
wrapper_dir() {
	local d="$RA_CLUSTER_CACHE/src/$1-$2"
	rm -rf "$d"
	mkdir -p "$d"
	echo "$d"
}

# finish NAME VERSION TMPDIR START: moves a finished bin dir into place.
finish() {
	local out="$RA_CLUSTER_CACHE/$1-$2"
	rm -rf "$out"
	mv "$3" "$out"
	touch "$out/.complete"
	log "built $1 $2 in $(($(date +%s) - $4)) s into $out"
}

build_k8s() {
	local v=$K8S_VERSION out="$RA_CLUSTER_CACHE/k8s-$K8S_VERSION"
	if [ -f "$out/.complete" ]; then echo "$out/bin"; return; fi
	local start; start=$(date +%s)
	local d; d=$(wrapper_dir k8s "$v")
	local minor=${v#v1.}; minor=${minor%%.*}
	local staging=v0.${v#v1.}
	(
		cd "$d"
		go mod init reload-agent.test/k8sbuild >/dev/null 2>&1
		go mod edit -go=1.26.0
		local kmod
		kmod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
		[ -f "$kmod" ] || { log "cannot download k8s.io/kubernetes@$v"; exit 1; }
		# Every staging module k/k replaces with ./staging/src/... gets its
		# published version instead (the module zip has no staging tree).
		local m
		for m in $(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\1|p' "$kmod"); do
			go mod edit -replace="$m=$m@$staging"
		done
		go mod edit -require="k8s.io/kubernetes@$v"
		local cmds="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
		local c
		for c in $cmds; do go get -tool "k8s.io/kubernetes/cmd/$c@$v" >&2; done
		go mod tidy >&2
		local pkg="k8s.io/component-base/version" cg="k8s.io/client-go/pkg/version" ld="-s -w"
		local kv
		for kv in "gitVersion=$v" "gitMajor=1" "gitMinor=$minor" "gitTreeState=clean" \
			"buildDate=1970-01-01T00:00:00Z" "gitCommit=0000000000000000000000000000000000000000"; do
			ld="$ld -X '$pkg.$kv' -X '$cg.$kv'"
		done
		mkdir -p bin.tmp/bin
		local targets=""
		for c in $cmds; do targets="$targets k8s.io/kubernetes/cmd/$c"; done
		# shellcheck disable=SC2086
		go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ld" -o bin.tmp/bin/ $targets >&2
	)
	finish k8s "$v" "$d/bin.tmp" "$start"
	echo "$out/bin"
}

build_etcd() {
	local v=$ETCD_VERSION out="$RA_CLUSTER_CACHE/etcd-$ETCD_VERSION"
	if [ -f "$out/.complete" ]; then echo "$out/bin"; return; fi
	local start; start=$(date +%s)
	local d; d=$(wrapper_dir etcd "$v")
	(
		cd "$d"
		go mod init reload-agent.test/etcdbuild >/dev/null 2>&1
		go mod edit -go=1.26.0
		go get -tool "go.etcd.io/etcd/server/v3@$v" >&2
		go mod tidy >&2
		mkdir -p bin.tmp/bin
		go build -trimpath -ldflags "-s -w" -o bin.tmp/bin/etcd go.etcd.io/etcd/server/v3 >&2
	)
	finish etcd "$v" "$d/bin.tmp" "$start"
	echo "$out/bin"
}

build_containerd() {
	local v=$CONTAINERD_VERSION out="$RA_CLUSTER_CACHE/containerd-$CONTAINERD_VERSION"
	if [ -f "$out/.complete" ]; then echo "$out/bin"; return; fi
	local start; start=$(date +%s)
	local d; d=$(wrapper_dir containerd "$v")
	(
		cd "$d"
		mkdir -p bin.tmp/bin
		local m=github.com/containerd/containerd/v2
		local ld="-s -w -X $m/version.Version=$v -X $m/version.Revision=pinned"
		GOBIN="$d/bin.tmp/bin" go install -trimpath -tags no_btrfs -ldflags "$ld" \
			"$m/cmd/containerd@$v" "$m/cmd/ctr@$v" "$m/cmd/containerd-shim-runc-v2@$v" >&2
	)
	finish containerd "$v" "$d/bin.tmp" "$start"
	echo "$out/bin"
}

# helm: `go install` of helm.sh/helm/v4/cmd/helm (its go.mod has no replace
# directives). v4 reads client-go's version from the build info; its own
# version is a -X, as its Makefile sets it (otherwise it says "v4.3").
build_helm() {
	local v=$HELM_VERSION out="$RA_CLUSTER_CACHE/helm-$HELM_VERSION"
	if [ -f "$out/.complete" ]; then echo "$out/bin"; return; fi
	local start; start=$(date +%s)
	local d; d=$(wrapper_dir helm "$v")
	(
		cd "$d"
		mkdir -p bin.tmp/bin
		local m=helm.sh/helm/v4/internal/version
		local ld="-s -w -X $m.version=$v -X $m.gitTreeState=clean"
		GOBIN="$d/bin.tmp/bin" go install -trimpath -ldflags "$ld" "helm.sh/helm/v4/cmd/helm@$v" >&2
	)
	finish helm "$v" "$d/bin.tmp" "$start"
	echo "$out/bin"
}

# kustomize: the sigs.k8s.io/kustomize/kustomize/v5 version that
# k8s.io/kubectl (the staging module of $K8S_VERSION) requires, so
# `kustomize build` is that kubectl's `kubectl kustomize` (same code, same
# api and kyaml versions) without building Kubernetes. Keyed by K8S_VERSION.
build_kustomize() {
	local k=$K8S_VERSION out="$RA_CLUSTER_CACHE/kustomize-k8s-$K8S_VERSION"
	if [ -f "$out/.complete" ]; then echo "$out/bin"; return; fi
	local start; start=$(date +%s)
	local d; d=$(wrapper_dir kustomize-k8s "$k")
	(
		cd "$d"
		local kmod v
		kmod=$(go mod download -json "k8s.io/kubectl@v0.${k#v1.}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
		[ -f "$kmod" ] || { log "cannot download k8s.io/kubectl@v0.${k#v1.}"; exit 1; }
		v=$(sed -n 's|^[[:space:]]*sigs.k8s.io/kustomize/kustomize/v5 \(v[0-9.]*\).*|\1|p' "$kmod")
		[ -n "$v" ] || { log "k8s.io/kubectl@v0.${k#v1.} requires no kustomize/v5"; exit 1; }
		log "kubectl $k embeds kustomize $v"
		mkdir -p bin.tmp/bin
		echo "$v" > bin.tmp/VERSION
		GOBIN="$d/bin.tmp/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$v" >&2
	)
	finish kustomize-k8s "$k" "$d/bin.tmp" "$start"
	echo "$out/bin"
}

what=${1:-all}
mkdir -p "$RA_CLUSTER_CACHE"
case $what in
k8s) echo "K8S_BIN=$(build_k8s)" ;;
etcd) echo "ETCD_BIN=$(build_etcd)" ;;
containerd) echo "CONTAINERD_BIN=$(build_containerd)" ;;
helm) echo "HELM_BIN=$(build_helm)" ;;
kustomize) echo "KUSTOMIZE_BIN=$(build_kustomize)" ;;
all)
	e=$(build_etcd)
	c=$(build_containerd)
	k=$(build_k8s)
	h=$(build_helm)
	z=$(build_kustomize)
	echo "ETCD_BIN=$e"
	echo "CONTAINERD_BIN=$c"
	echo "K8S_BIN=$k"
	echo "HELM_BIN=$h"
	echo "KUSTOMIZE_BIN=$z"
	;;
*)
	echo "usage: build.sh [k8s|etcd|containerd|helm|kustomize|all]" >&2
	exit 2
	;;
esac
