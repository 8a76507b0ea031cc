#!/usr/bin/env bash
# tests/cluster/down.sh: stops the cluster up.sh started and leaves nothing
# behind: every process by its recorded pid (and the containerd shims of this
# cluster's own socket, found by pid), every mount under the state dir, the
# pod network's bridge and iptables rules, the kubelet's cgroups, and the
# host settings up.sh changed (sysctls, the root mount's propagation).
# Logs stay in $STATE/logs for a post-mortem; up.sh clears them.
#
# Order: controllers first (nothing recreates pods), then the pods are
# deleted through the API and the kubelet tears them down (CNI DEL, volume
# unmounts) within a bounded wait; then the node, the control plane and
# containerd; then whatever a crash left (tasks killed through ctr).
# Safe to run twice, or when nothing runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
PATH=$PATH:/usr/sbin:/sbin
[ "$(id -u)" = 0 ] || cdie "down.sh needs root"
[ -d "$STATE" ] || exit 0

# The binaries of the version that runs (up.sh records it), not of the one
# K8S_VERSION asks for: up.sh stops a cluster of another version with them.
K8S_BIN=$RA_CLUSTER_CACHE/k8s-$(cat "$STATE/k8s-version" 2> /dev/null || echo "$K8S_VERSION")/bin
CTRD_BIN=$RA_CLUSTER_CACHE/containerd-$CONTAINERD_VERSION/bin
KCFG=$STATE/admin.kubeconfig
kc() { timeout 30 "$K8S_BIN/kubectl" --kubeconfig "$KCFG" "$@"; }
ctr() { timeout 30 "$CTRD_BIN/ctr" -a "$CONTAINERD_SOCK" -n k8s.io "$@"; }

# 1. Pods away through the kubelet, while the API and the kubelet still run.
stop_proc kube-controller-manager
stop_proc kube-scheduler
if [ -n "$(pid_of kube-apiserver)" ] && [ -n "$(pid_of kubelet)" ]; then
	kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false > /dev/null 2>&1
	for ((i = 0; i < 120; i++)); do
		[ -z "$(ctr tasks ls -q 2> /dev/null)" ] && break
		sleep 0.5
	done
fi

# 2. The node and the control plane.
stop_proc kube-proxy
if [ -x "$K8S_BIN/kube-proxy" ]; then
	"$K8S_BIN/kube-proxy" --cleanup > "$STATE/logs/kube-proxy-cleanup.log" 2>&1 || true
fi
stop_proc kubelet 20
stop_proc kube-apiserver
stop_proc etcd

# 3. Anything still running in containerd (a crash, a stuck kubelet).
if [ -n "$(pid_of containerd)" ]; then
	for t in $(ctr tasks ls -q 2> /dev/null); do
		ctr tasks kill -s SIGKILL "$t" > /dev/null 2>&1
	done
	for ((i = 0; i < 50; i++)); do
		[ -z "$(ctr tasks ls 2> /dev/null | awk 'NR > 1 && $3 != "STOPPED"')" ] && break
		sleep 0.2
	done
	for t in $(ctr tasks ls -q 2> /dev/null); do ctr tasks delete -f "$t" > /dev/null 2>&1; done
	for c in $(ctr containers ls -q 2> /dev/null); do ctr containers rm "$c" > /dev/null 2>&1; done
fi
stop_proc containerd 20
# The shims of this containerd (they outlive it by design): by pid, found
# by their binary and the -address of this cluster's socket.
for d in /proc/[0-9]*; do
	[ "$(readlink "$d/exe" 2> /dev/null)" = "$(readlink -f "$CTRD_BIN/containerd-shim-runc-v2")" ] || continue
	tr '\0' ' ' < "$d/cmdline" 2> /dev/null | grep -qF -- "-address $CONTAINERD_SOCK " || continue
	clog "killing leftover shim ${d#/proc/}"
	kill -KILL "${d#/proc/}" 2> /dev/null
done

# Containers whose containerd and shims died (killed with the machine's
# session): every process in the kubelet's cgroup tree is one of this
# cluster's pods; they are found by pid there.
for procs in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods; do
	[ -d "$procs" ] || continue
	for pid in $(find "$procs" -name cgroup.procs -exec cat {} + 2> /dev/null | sort -u); do
		clog "killing leftover pod process $pid"
		kill -KILL "$pid" 2> /dev/null
	done
	break
done
sleep 0.2

# 4. Mounts under the state dir, deepest first (volumes, overlays, netns).
for ((pass = 0; pass < 5; pass++)); do
	mounts=$(awk -v s="$STATE" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	[ -z "$mounts" ] && break
	for m in $mounts; do umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null; done
done
left=$(awk -v s="$STATE" 'index($5, s) == 1' /proc/self/mountinfo | wc -l)
[ "$left" = 0 ] || clog "WARNING: $left mounts under $STATE remain"

# 5. The pod network: bridges, and the masquerade rules of pods that were
# never torn down by CNI (their chains are named CNI-<hash>).
for br in "$POD_BRIDGE" "$NODE_BRIDGE"; do
	ip link show "$br" > /dev/null 2>&1 && ip link del "$br"
done
for ((i = 0; i < 200; i++)); do
	rule=$(iptables -t nat -S POSTROUTING 2> /dev/null | grep -m1 -- "-s ${POD_CIDR%.0.0/16}\." || true)
	[ -z "$rule" ] && break
	chain=$(echo "$rule" | sed -n 's/.* -j \(CNI-[0-9a-f]*\).*/\1/p')
	eval "iptables -t nat ${rule/-A /-D }"
	if [ -n "$chain" ]; then
		iptables -t nat -F "$chain" 2> /dev/null
		iptables -t nat -X "$chain" 2> /dev/null
	fi
done
# The kubelet's and kube-proxy's chains (KUBE-FIREWALL, the canaries, the
# hint) in every table: first the jumps into them, then the chains.
for ipt in iptables ip6tables; do
	for t in filter nat mangle; do
		"$ipt" -t "$t" -S 2> /dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' |
			while IFS= read -r rule; do eval "$ipt -t $t ${rule/-A /-D }"; done
		for chain in $("$ipt" -t "$t" -S 2> /dev/null | sed -n 's/^-N \(KUBE-[A-Z0-9-]*\)$/\1/p'); do
			"$ipt" -t "$t" -F "$chain" 2> /dev/null
		done
		for chain in $("$ipt" -t "$t" -S 2> /dev/null | sed -n 's/^-N \(KUBE-[A-Z0-9-]*\)$/\1/p'); do
			"$ipt" -t "$t" -X "$chain" 2> /dev/null
		done
	done
done

# 6. The kubelet's cgroups (empty now), deepest first.
for h in /sys/fs/cgroup/*/; do
	[ -d "$h/kubepods" ] || continue
	find "$h/kubepods" -depth -type d -exec rmdir {} \; 2> /dev/null
done

# containerd's shims keep their sockets under /run/containerd/s whatever the
# configuration says; up.sh notes whether that directory was there before.
if [ -f "$STATE/run-containerd.created" ]; then
	rm -rf /run/containerd
	rm -f "$STATE/run-containerd.created"
fi

# 7. Host settings back as they were.
if [ -f "$STATE/sysctl.orig" ]; then
	while IFS= read -r kv; do sysctl -qw "$kv" 2> /dev/null; done < "$STATE/sysctl.orig"
	rm -f "$STATE/sysctl.orig"
fi
if [ -f "$STATE/root-propagation.orig" ]; then
	case $(cat "$STATE/root-propagation.orig") in
	private) mount --make-rprivate / ;;
	esac
	rm -f "$STATE/root-propagation.orig"
fi
clog "down: nothing of the cluster runs; logs in $STATE/logs"
exit 0
