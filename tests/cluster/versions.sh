# tests/cluster/versions.sh: the one place that pins what the real test cluster
# is built from. Sourced by build.sh, up.sh, down.sh and the e2e suite; change a
# version here and the next build.sh run builds it into a fresh cache directory.
#
# The Kubernetes version is a matrix: K8S_VERSION in the environment picks one
# of K8S_VERSIONS (`K8S_VERSION=v1.34.4 make e2e`); unset, the default. Each
# version is built once into its own cache directory (k8s-<version>). etcd and
# containerd are one pair for every version: etcd 3.6 (1.34 itself ships 3.6.4)
# and containerd 2.2, what 1.36's kubelet wants and 1.34's runs on (measured).
# docs/kubernetes.md#kubernetes-versions says what works on each.
K8S_DEFAULT_VERSION=v1.36.3
K8S_VERSIONS="v1.34.4 v1.35.4 v1.36.3 v1.37.2"
K8S_VERSION=${K8S_VERSION:-$K8S_DEFAULT_VERSION} # kube-apiserver, controller-manager, scheduler, kubelet, kube-proxy, kubectl
case " $K8S_VERSIONS " in
*" $K8S_VERSION "*) ;;
*)
	echo "versions.sh: K8S_VERSION=$K8S_VERSION is not one of the matrix's versions: $K8S_VERSIONS" >&2
	return 2 2> /dev/null || exit 2
	;;
esac
ETCD_VERSION=v3.6.13         # go.etcd.io/etcd/server/v3 (Debian's 3.4 is too old for 1.36)
CONTAINERD_VERSION=v2.2.9    # github.com/containerd/containerd/v2 (kubelet 1.36 wants >= 2.2)
HELM_VERSION=v4.3.2          # helm.sh/helm/v4: the chart's lint, template and e2e install (test tool only)
# kustomize is built at the version kubectl $K8S_VERSION embeds (k8s.io/kubectl's
# go.mod names it), so `kustomize build` is `kubectl kustomize` of that kubectl.
# runc and the CNI plugins (bridge, host-local, loopback, portmap) come from Debian.

# Where built binaries live, outside any clone, keyed by version, so a machine
# builds each version once. Override with RA_CLUSTER_CACHE.
RA_CLUSTER_CACHE=${RA_CLUSTER_CACHE:-/var/cache/reload-agent/cluster}
