#!/usr/bin/env bash
# tests/cluster/restart.sh NAME [SECONDS]: stops one component of the
# running cluster (by its recorded pid: SIGTERM, then SIGKILL), waits SECONDS
# (default 0) and starts it again with the command line up.sh gave it. For
# the load suite's restart scenarios (the kubelet under load). Prints the
# new pid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# -ge 1 ] || cdie "usage: restart.sh NAME [SECONDS]"
name=$1 pause=${2:-0}
f="$STATE/cmd/$name"
[ -f "$f" ] || cdie "no recorded command for $name (started by an older up.sh?)"
[ -n "$(pid_of "$name")" ] || cdie "$name is not running"
mapfile -d '' cmd < "$f"
stop_proc "$name" 20
sleep "$pause"
PATH=${cmd[0]} start_proc "$name" "${cmd[@]:1}"
pid_of "$name"
