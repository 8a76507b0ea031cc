# tests/cluster/lib.sh: what up.sh and down.sh share: the cluster's fixed
# names and addresses, where its state lives, and the process bookkeeping
# (every process the cluster starts has a pid file; nothing is ever looked up
# by name). Sourced, never run.
#
# Network: everything the cluster serves sits on bridges it creates itself.
#   ra-node0  10.86.0.1/24   the node's address (apiserver, kubelet); no ports
#   ra-pods0  10.244.0.1/16  the pod network (CNI bridge + host-local; not
#                            podman's 10.88/16, which may run beside it)
#   10.0.0.0/24              Service ClusterIPs (kube-proxy, iptables mode);
#                            10.0.0.1:443 is the apiserver, as in any cluster.
. "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

STATE=${RA_CLUSTER_STATE:-/var/lib/reload-agent/cluster-state}
NODE_NAME=ra-node
NODE_BRIDGE=ra-node0
NODE_IP=10.86.0.1
POD_BRIDGE=ra-pods0
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.0.0.0/24
API_SERVICE_IP=10.0.0.1
API_PORT=6443
CONTAINERD_SOCK=$STATE/containerd/containerd.sock
# The order processes start in; down.sh stops them in the reverse order.
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy"

clog() { echo "cluster: $*" >&2; }
cdie() {
	clog "FAIL: $*"
	exit 1
}

# pid_of NAME: the pid recorded for NAME if that process is still the one
# started (its /proc/PID/exe is the binary recorded beside the pid), else "".
pid_of() {
	local f="$STATE/pids/$1.pid" pid exe
	[ -f "$f" ] || return 0
	read -r pid exe < "$f" || return 0
	[ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
	[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] || return 0
	echo "$pid"
}

# start_proc NAME BINARY ARGS...: starts BINARY in a session of its own
# (it outlives the calling shell and its process group), output appended to
# $STATE/logs/NAME.log, pid and binary recorded in $STATE/pids/NAME.pid.
start_proc() {
	local name=$1 bin=$2
	shift 2
	mkdir -p "$STATE/logs" "$STATE/pids"
	setsid "$bin" "$@" >> "$STATE/logs/$name.log" 2>&1 < /dev/null &
	echo "$! $(readlink -f "$bin")" > "$STATE/pids/$name.pid"
	# The command line and PATH, for restart.sh (NUL-separated).
	mkdir -p "$STATE/cmd"
	printf '%s\0' "$PATH" "$bin" "$@" > "$STATE/cmd/$name"
}

# running PID: true while PID is a process that has not exited. An exited
# child of a PID 1 that does not reap (this VM's init) stays a zombie with
# a /proc entry; it counts as exited (state Z), or every stop would wait out
# its whole SIGTERM grace.
running() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# stop_proc NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 10).
stop_proc() {
	local name=$1 secs=${2:-10} pid i
	pid=$(pid_of "$name")
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < secs * 10; i++)); do
			running "$pid" || break
			sleep 0.1
		done
		if running "$pid"; then
			clog "$name (pid $pid) ignored SIGTERM for $secs s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
	fi
	rm -f "$STATE/pids/$name.pid"
}

# wait_for WHAT SECONDS CMD...: runs CMD every 0.5 s until it succeeds;
# after SECONDS, fails naming WHAT and the last lines of every log.
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 2; i++)); do
		if "$@" > /dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	clog "timed out after $secs s waiting for $what"
	local f
	for f in "$STATE"/logs/*.log; do
		[ -f "$f" ] || continue
		echo "----- last lines of $f" >&2
		tail -n 15 "$f" >&2
	done
	return 1
}
