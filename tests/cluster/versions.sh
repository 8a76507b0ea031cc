# tests/cluster/versions.sh: the one place that pins what the real test cluster
# is built from. Sourced by build.sh, up.sh and the e2e suite; change a version
# here and the next build.sh run builds it into a fresh cache directory.
K8S_VERSION=v1.36.3          # kube-apiserver, controller-manager, scheduler, kubelet, kube-proxy, kubectl
ETCD_VERSION=v3.6.13         # go.etcd.io/etcd/server/v3 (Debian's 3.4 is too old for 1.36)
CONTAINERD_VERSION=v2.2.9    # github.com/containerd/containerd/v2 (kubelet 1.36 wants >= 2.2)
HELM_VERSION=v4.3.2          # helm.sh/helm/v4: the chart's lint, template and e2e install (test tool only)
# kustomize is built at the version kubectl $K8S_VERSION embeds (k8s.io/kubectl's
# go.mod names it), so `kustomize build` is `kubectl kustomize` of that kubectl.
# runc and the CNI plugins (bridge, host-local, loopback, portmap) come from Debian.

# Where built binaries live, outside any clone, keyed by version, so a machine
# builds each version once. Override with RA_CLUSTER_CACHE.
RA_CLUSTER_CACHE=${RA_CLUSTER_CACHE:-/var/cache/reload-agent/cluster}
