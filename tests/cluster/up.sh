#!/usr/bin/env bash
# tests/cluster/up.sh: a real single-node Kubernetes on this machine, from
# binaries built from the Kubernetes sources (build.sh): etcd, kube-apiserver
# (RBAC + Node authorizers; ServiceAccount, NodeRestriction,
# MutatingAdmissionWebhook admission; an audit log), kube-controller-manager,
# kube-scheduler, containerd + runc, the kubelet (cgroup v1, cgroupfs) and
# kube-proxy (iptables), with the CNI bridge plugin. No image is pulled: the
# images come from images.sh and are imported into containerd.
#
# Prints KEY=VALUE lines on stdout: K8S_VERSION=, KUBECTL=, HELM=, STATE=,
# NODE_IP=, AUDIT_LOG=, and last KUBECONFIG=<absolute path>. Progress and
# timings go to stderr. A second call finds the running cluster and only
# imports images that changed and prints the lines again; a running cluster
# of another Kubernetes version (K8S_VERSION, versions.sh) is stopped with
# down.sh first and started fresh at the version asked for. down.sh stops it.
#
# Environment: RA_CLUSTER_STATE (state dir), RA_CLUSTER_CACHE (binaries),
# RA_CLUSTER_SKIP_IMAGES=1 (do not build or import images).
# Needs root. Every wait is bounded; on a timeout it prints the logs' tails.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
T0=$(date +%s)
step() { clog "$* [$(($(date +%s) - T0)) s]"; }

[ "$(id -u)" = 0 ] || cdie "up.sh needs root"
PATH=$PATH:/usr/sbin:/sbin

# ---- packages and binaries ----------------------------------------------------
sh "$here/deps.sh"
bins=$("$here/build.sh" all)
ETCD_BIN=$(echo "$bins" | sed -n 's/^ETCD_BIN=//p')
CTRD_BIN=$(echo "$bins" | sed -n 's/^CONTAINERD_BIN=//p')
K8S_BIN=$(echo "$bins" | sed -n 's/^K8S_BIN=//p')
HELM_BIN=$(echo "$bins" | sed -n 's/^HELM_BIN=//p')
KUBECTL=$K8S_BIN/kubectl
CTR=$CTRD_BIN/ctr
KCFG=$STATE/admin.kubeconfig

print_env() {
	echo "K8S_VERSION=$K8S_VERSION"
	echo "KUBECTL=$KUBECTL"
	echo "HELM=$HELM_BIN/helm"
	echo "CTR=$CTR"
	echo "CONTAINERD_SOCK=$CONTAINERD_SOCK"
	echo "STATE=$STATE"
	echo "NODE_IP=$NODE_IP"
	echo "AUDIT_LOG=$STATE/logs/audit.log"
	echo "KUBECONFIG=$KCFG"
}

images() {
	[ "${RA_CLUSTER_SKIP_IMAGES:-}" = 1 ] && return 0
	"$here/images.sh" build
	"$here/images.sh" import "$CONTAINERD_SOCK" "$CTR" "$STATE"
}

# ---- reuse ------------------------------------------------------------------
running=0 stopped=0
for c in $COMPONENTS; do
	if [ -n "$(pid_of "$c")" ]; then running=$((running + 1)); else stopped=$((stopped + 1)); fi
done
# The version the running cluster was started at (up.sh records it).
was=$(cat "$STATE/k8s-version" 2> /dev/null || echo v1.36.3)
if [ "$stopped" = 0 ] && [ "$was" != "$K8S_VERSION" ]; then
	step "the running cluster is Kubernetes $was, $K8S_VERSION is asked for: stopping it first"
	"$here/down.sh"
	running=0 stopped=1
fi
if [ "$stopped" = 0 ] && "$KUBECTL" --kubeconfig "$KCFG" get --raw /readyz > /dev/null 2>&1; then
	step "reusing the running cluster in $STATE"
	images
	print_env
	exit 0
fi
if [ "$running" != 0 ]; then
	step "$running of the cluster's processes run, $stopped do not: stopping them first"
	"$here/down.sh"
elif [ -d "$STATE" ]; then
	# A cluster whose processes were killed (a machine's session ended) leaves
	# mounts, bridges and rules: down.sh clears them whether anything runs.
	"$here/down.sh"
fi

# ---- fresh state --------------------------------------------------------------
if [ -d "$STATE" ]; then
	grep -q " $STATE" /proc/self/mountinfo && cdie "mounts under $STATE remain after down.sh"
	rm -rf "$STATE"
fi
mkdir -p "$STATE"/{pki,logs,pids,etcd,kubelet,pod-logs,cni/net.d,containerd}
echo "$K8S_VERSION" > "$STATE/k8s-version"
chmod 700 "$STATE/pki"

# Host settings the kubelet and kube-proxy change, recorded for down.sh.
for s in net.ipv4.ip_forward kernel.panic kernel.panic_on_oops vm.overcommit_memory; do
	echo "$s=$(sysctl -n "$s")"
done > "$STATE/sysctl.orig"
sysctl -qw net.ipv4.ip_forward=1
# The kubelet's volume mounts must propagate into containers (kind does this).
findmnt -no PROPAGATION / > "$STATE/root-propagation.orig"
mount --make-rshared /

# ---- PKI (openssl; EC P-256, one CA) ------------------------------------------
P=$STATE/pki
openssl ecparam -name prime256v1 -genkey -noout -out "$P/ca.key" 2> /dev/null
openssl req -x509 -new -key "$P/ca.key" -subj "/CN=reload-agent-e2e-ca" -days 30 -out "$P/ca.crt"
# cert NAME SUBJECT [SAN]: a key and a certificate signed by the CA.
cert() {
	local name=$1 subj=$2 san=${3:-}
	openssl ecparam -name prime256v1 -genkey -noout -out "$P/$name.key" 2> /dev/null
	openssl req -new -key "$P/$name.key" -subj "$subj" -out "$P/$name.csr"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} > "$P/$name.ext"
	openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
		-days 30 -extfile "$P/$name.ext" -out "$P/$name.crt" 2> /dev/null
	rm -f "$P/$name.csr" "$P/$name.ext"
}
cert apiserver "/CN=kube-apiserver" \
	"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$API_SERVICE_IP"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kube-proxy "/CN=system:kube-proxy"
cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME"
cert kubelet "/CN=$NODE_NAME" "DNS:$NODE_NAME,IP:$NODE_IP"
openssl genrsa -out "$P/sa.key" 2048 2> /dev/null
openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2> /dev/null

# kubeconfig FILE CERTNAME: a kubeconfig for the node address, by cert files.
kubeconfig() {
	cat > "$1" << EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority: $P/ca.crt
users:
- name: $2
  user:
    client-certificate: $P/$2.crt
    client-key: $P/$2.key
contexts:
- name: e2e
  context: {cluster: e2e, user: $2, namespace: default}
current-context: e2e
EOF
}
kubeconfig "$KCFG" admin
for u in controller-manager scheduler kube-proxy kubelet-client; do kubeconfig "$STATE/$u.kubeconfig" "$u"; done
step "PKI and kubeconfigs in $STATE"

# ---- network ------------------------------------------------------------------
if ! ip link show "$NODE_BRIDGE" > /dev/null 2>&1; then
	ip link add "$NODE_BRIDGE" type bridge
fi
ip addr replace "$NODE_IP/24" dev "$NODE_BRIDGE"
ip link set "$NODE_BRIDGE" up
cat > "$STATE/cni/net.d/10-ra-pods.conflist" << EOF
{
  "cniVersion": "1.0.0",
  "name": "ra-pods",
  "plugins": [
    {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "$STATE/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
# Pods resolve no cluster DNS (there is none); an empty resolv.conf keeps
# the host's resolvers out of them.
echo "options ndots:1" > "$STATE/resolv.conf"

# ---- etcd ---------------------------------------------------------------------
start_proc etcd "$ETCD_BIN/etcd" --name e2e --data-dir "$STATE/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster e2e=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
wait_for "etcd" 60 curl -sf http://127.0.0.1:2379/health
step "etcd $ETCD_VERSION up"

# ---- kube-apiserver -----------------------------------------------------------
cat > "$STATE/audit-policy.yaml" << 'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
# The leases every component renews and the watches are noise for the e2e
# oracles (who patched what, how many requests per change).
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  verbs: [watch]
- level: Metadata
EOF
FEATURES=${RA_CLUSTER_FEATURE_GATES:-}
start_proc kube-apiserver "$K8S_BIN/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:2379 \
	--bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=$API_PORT \
	--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
	--client-ca-file="$P/ca.crt" \
	--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$P/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=InternalIP \
	--authorization-mode=Node,RBAC \
	--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,Priority,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota,NodeRestriction,PodSecurity \
	--service-cluster-ip-range="$SERVICE_CIDR" \
	--service-account-issuer=https://kubernetes.default.svc \
	--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
	--allow-privileged=true \
	--audit-policy-file="$STATE/audit-policy.yaml" --audit-log-path="$STATE/logs/audit.log" \
	--audit-log-maxsize=200 --audit-log-maxbackup=2 \
	--enable-aggregator-routing=true \
	${FEATURES:+--feature-gates=$FEATURES} --v=1
kc() { "$KUBECTL" --kubeconfig "$KCFG" "$@"; }
wait_for "kube-apiserver /readyz" 120 kc get --raw /readyz
step "kube-apiserver $K8S_VERSION up on https://$NODE_IP:$API_PORT"

# ---- controller-manager and scheduler -----------------------------------------
start_proc kube-controller-manager "$K8S_BIN/kube-controller-manager" \
	--kubeconfig="$STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
	--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
	--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
	--use-service-account-credentials --service-cluster-ip-range="$SERVICE_CIDR" \
	--controllers='*' --leader-elect=false --bind-address=127.0.0.1 \
	${FEATURES:+--feature-gates=$FEATURES} --v=1
cat > "$STATE/scheduler.yaml" << EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $STATE/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
EOF
start_proc kube-scheduler "$K8S_BIN/kube-scheduler" --config="$STATE/scheduler.yaml" \
	--bind-address=127.0.0.1 ${FEATURES:+--feature-gates=$FEATURES} --v=1

# ---- containerd ---------------------------------------------------------------
C=$STATE/containerd
[ -e /run/containerd ] || touch "$STATE/run-containerd.created"
cat > "$C/config.toml" << EOF
version = 3
root = '$C/root'
state = '$C/state'
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']
[grpc]
  address = '$CONTAINERD_SOCK'
[ttrpc]
  address = '$CONTAINERD_SOCK.ttrpc'
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:3.10.2'
[plugins.'io.containerd.cri.v1.runtime']
  # The VM withholds CAP_SYS_RESOURCE: a sandbox's oom_score_adj -998 fails.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = '/usr/sbin/runc'
  Root = '$C/runc'
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '$STATE/cni/net.d'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
EOF
[ -x /usr/sbin/runc ] || sed -i "s|/usr/sbin/runc|$(command -v runc)|" "$C/config.toml"
PATH=$CTRD_BIN:$PATH start_proc containerd "$CTRD_BIN/containerd" --config "$C/config.toml" --log-level warn
wait_for "containerd" 60 "$CTR" -a "$CONTAINERD_SOCK" version
step "containerd $CONTAINERD_VERSION up"
images
step "images imported"

# ---- kubelet ------------------------------------------------------------------
cat > "$STATE/kubelet.yaml" << EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
imageServiceEndpoint: unix://$CONTAINERD_SOCK
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $P/kubelet.crt
tlsPrivateKeyFile: $P/kubelet.key
address: $NODE_IP
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
resolvConf: $STATE/resolv.conf
podLogsDir: $STATE/pod-logs
clusterDomain: cluster.local
serializeImagePulls: false
registerNode: true
EOF
start_proc kubelet "$K8S_BIN/kubelet" --config="$STATE/kubelet.yaml" \
	--kubeconfig="$STATE/kubelet-client.kubeconfig" --root-dir="$STATE/kubelet" \
	--hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
	${FEATURES:+--feature-gates=$FEATURES} --v=1
node_ready() {
	[ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $NODE_NAME Ready" 180 node_ready
step "kubelet up, node $NODE_NAME Ready"

# ---- kube-proxy ---------------------------------------------------------------
cat > "$STATE/kube-proxy.yaml" << EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables: {localhostNodePorts: false}
# Leave the host's conntrack sysctls alone (as local-up-cluster does).
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
start_proc kube-proxy "$K8S_BIN/kube-proxy" --config="$STATE/kube-proxy.yaml" --v=1
wait_for "kube-proxy healthz" 60 curl -sf http://127.0.0.1:10256/healthz
step "kube-proxy up"

# ---- ready for tests ----------------------------------------------------------
wait_for "ServiceAccount default/default" 120 kc -n default get serviceaccount default
wait_for "ConfigMap default/kube-root-ca.crt" 60 kc -n default get configmap kube-root-ca.crt
step "cluster ready"
print_env
