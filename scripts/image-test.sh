#!/bin/sh
# make image-test: builds the container image (Dockerfile) with podman and
# tests it the way Kubernetes runs it: in a pod that shares its PID, IPC and
# network namespaces, beside nginx, with a kubelet-style ConfigMap volume
# (written by build/tools/awsim) mounted read-only into both containers.
# Checks: the image runs read-only (version, hash against tests/refhash.py);
# in the pod, a content update reaches nginx by SIGHUP within 10 s, nginx's
# master process stays the same, and the agent logs exactly one successful
# signal action. No Docker engine and no registry are needed: the Debian
# base image is made locally with debootstrap and cached as $BASE.
# Everything it starts is removed on every exit path; every wait is bounded.
set -eu
cd "$(dirname "$0")/.."

AWSIM=${AWSIM:-build/tools/awsim}
PORT=${IMAGE_TEST_PORT:-18091}
BASE=localhost/debian-minbase:bookworm
IMAGE=localhost/reload-agent:test
NGINX_IMAGE=localhost/reload-agent-nginx:test
POD=reload-agent-image-test-$$
T0=$(date +%s)

step() { echo "image-test: $* [$(($(date +%s) - T0))s]"; }
fail() { echo "image-test: FAIL: $*" >&2; exit 1; }
# Every podman call is bounded; builds and debootstrap get longer below.
pm() { timeout 120 podman "$@"; }
PATH=$PATH:/usr/sbin:/sbin

[ -x "$AWSIM" ] || fail "$AWSIM not found: run 'make all' first"

missing=""
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || fail "need root to apt-get install:$missing"
  step "installing:$missing"
  apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

D=$(mktemp -d /tmp/reload-agent-image.XXXXXX)
cleanup() {
  rc=$?
  pm pod rm -f "$POD" >/dev/null 2>&1 || true
  pm rm -f reload-agent-curlcheck >/dev/null 2>&1 || true
  rm -rf "$D"
  [ "$rc" = 0 ] || echo "image-test: FAILED (exit status $rc)" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# podman's defaults fail in this sandbox: without explicit ulimits runc
# cannot set RLIMIT_NOFILE ("error setting rlimit type 7"), and there is no
# systemd for its cgroup manager.
cat > "$D/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF="$D/containers.conf"

# The Debian mirror apt already uses for bookworm (deb822 or one-line form).
apt_mirror() {
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function stanza() { if (!found && u != "" && s ~ /(^| )bookworm( |$)/) { print u; found = 1 } u = ""; s = "" }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { stanza(); next }
      $1 == "URIs:" { u = $2 }
      $1 == "Suites:" { $1 = ""; s = $0 }
      $1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                    if (!found && $(i + 1) == "bookworm") { print $i; found = 1 } }
      END { stanza() }' "$f"
  done | head -n 1
}

if pm image exists "$BASE"; then
  step "reusing base image $BASE"
else
  MIRROR=${DEBIAN_MIRROR:-$(apt_mirror)}
  [ -n "$MIRROR" ] || fail "no bookworm mirror in /etc/apt/sources.list*: set DEBIAN_MIRROR"
  step "building base image $BASE: debootstrap from $MIRROR"
  timeout 900 debootstrap --variant=minbase bookworm "$D/rootfs" "$MIRROR" > "$D/debootstrap.log" 2>&1 ||
    { tail -n 20 "$D/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
  tar -C "$D/rootfs" -c . | timeout 300 podman import -q - "$BASE" >/dev/null || fail "podman import of the base failed"
  rm -rf "$D/rootfs"
fi

build() { # $1 = tag, then podman build arguments
  tag=$1; shift
  step "building $tag"
  prev=$(pm image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  timeout 900 podman build --network host --build-arg BASE="$BASE" -t "$tag" "$@" > "$D/build.log" 2>&1 ||
    { tail -n 30 "$D/build.log" >&2; fail "podman build of $tag failed (log above)"; }
  # The image this tag named before (now untagged) goes; the layer cache stays.
  if [ -n "$prev" ] && [ "$prev" != "$(pm image inspect --format '{{.Id}}' "$tag")" ]; then
    pm rmi "$prev" >/dev/null 2>&1 || echo "image-test: note: could not remove the previous $tag ($prev)"
  fi
}
GIT_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
build "$IMAGE" --build-arg GIT_COMMIT="$GIT_COMMIT" -f Dockerfile .
build "$NGINX_IMAGE" --build-arg PORT="$PORT" -f tests/image/nginx.Containerfile tests/image
SIZE=$(pm image inspect --format '{{.Size}}' "$IMAGE")
step "image $IMAGE: $SIZE bytes ($((SIZE / 1024 / 1024)) MiB)"

# --- the image on its own: read-only root, no network, default user ---
[ "$(pm image inspect --format '{{.Config.User}}' "$IMAGE")" = "65532:65532" ] ||
  fail "image user is not 65532:65532"
ver=$(pm run --rm --network none --read-only "$IMAGE" version) ||
  fail "'version' failed in the image"
case "$ver" in
  "reload-agent "*"(commit $GIT_COMMIT)") ;;
  *) fail "'version' printed \"$ver\", expected reload-agent VERSION (commit $GIT_COMMIT)" ;;
esac
step "version: $ver"

VOL=$D/vol
SRC=$D/payload
mkdir -p "$VOL" "$SRC"
chmod 755 "$D" "$VOL"
page() { # $1 = body: one nginx site.conf as a ConfigMap key, written like the kubelet
  printf 'location / { return 200 "%s\\n"; }\n' "$1" > "$SRC/site.conf"
  "$AWSIM" --dir "$VOL" --payload "$SRC" || fail "awsim could not update $VOL"
}
page v1

# Mounted at its host path so the logical paths, and so the hash, are the
# ones the reference implementation computes on the host.
got=$(pm run --rm --network none --read-only -v "$VOL:$VOL:ro" "$IMAGE" hash "$VOL") ||
  fail "'hash' failed in the image"
want=$(python3 tests/refhash.py "$VOL") || fail "tests/refhash.py failed"
[ "$got" = "$want" ] || fail "hash in the image is $got, tests/refhash.py says $want"
step "hash of the volume matches tests/refhash.py"

# libcurl is loaded on first use (net/curl_dl.c), so check that the image
# carries it and its libraries: an http action against a closed port must
# fail with curl's connect error, not with "libcurl could not be loaded".
pm run -d --name reload-agent-curlcheck --network host --read-only -v "$VOL:$VOL:ro" "$IMAGE" \
  run --watch "$VOL" --action http --http-url http://127.0.0.1:9/ --on-start reload \
  --retry-initial 200ms --retry-max 200ms --log-format json >/dev/null ||
  fail "could not start the http check container"
curl_ok=0
for _ in $(seq 50); do
  if pm logs reload-agent-curlcheck 2>&1 | grep -q '"action":"http".*"result":"failure"'; then curl_ok=1; break; fi
  sleep 0.2
done
curl_log=$(pm logs reload-agent-curlcheck 2>&1 | tail -n 5)
pm rm -f reload-agent-curlcheck >/dev/null 2>&1 || true
[ "$curl_ok" = 1 ] || fail "no http action result in the image's log: $curl_log"
case "$curl_log" in
  *"could not be loaded"*) fail "libcurl does not load in the image: $curl_log" ;;
esac
step "libcurl loads in the image (http action reached the network stack)"

# --- the pod ---
if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then
  fail "127.0.0.1:$PORT is already in use: set IMAGE_TEST_PORT"
fi
pm pod create --name "$POD" --share pid,ipc,net --network host >/dev/null || fail "podman pod create failed"
pm run -d --pod "$POD" --name "$POD-nginx" -v "$VOL:/config:ro" "$NGINX_IMAGE" >/dev/null ||
  fail "cannot start the nginx container"
# Root without capabilities: nginx's master runs as UID 0, and a same-UID
# signal needs no CAP_KILL. The image's default user 65532 could only signal
# an application that runs as 65532 too.
pm run -d --pod "$POD" --name "$POD-agent" --read-only --user 0:0 --cap-drop all \
  --security-opt no-new-privileges -v "$VOL:/config:ro" "$IMAGE" \
  run --watch /config --action signal --process nginx --debounce 100ms --log-format json >/dev/null ||
  fail "cannot start the agent container"

logs() { pm logs "$POD-$1" 2>&1; }
running() { [ "$(pm inspect --format '{{.State.Running}}' "$POD-$1")" = true ]; }
body() { curl -s --max-time 2 "http://127.0.0.1:$PORT/" || true; }
wait_for() { # $1 = what (for the message), then a command; 10 s at most
  what=$1; shift
  i=0
  until "$@"; do
    i=$((i + 1))
    [ "$i" -le 100 ] || return 1
    running nginx || { logs nginx >&2; fail "nginx exited while waiting for $what"; }
    running agent || { logs agent >&2; fail "the agent exited while waiting for $what"; }
    sleep 0.1
  done
}
serves() { [ "$(body)" = "$1" ]; }
ready() { logs agent | grep -q '"event":"ready"'; }

wait_for "nginx to serve v1" serves v1 || fail "nginx does not serve v1 (got \"$(body)\")"
wait_for "the agent to be ready" ready || { logs agent >&2; fail "the agent logged no ready event in 10 s"; }
MASTER=$(pm inspect --format '{{.State.Pid}} {{.State.StartedAt}}' "$POD-nginx")
step "pod up: nginx serves v1, agent ready, nginx master (host PID, start) $MASTER"

page v2
wait_for "v2" serves v2 || { logs agent >&2; fail "nginx still serves \"$(body)\" 10 s after the update to v2"; }
step "nginx serves v2"

now=$(pm inspect --format '{{.State.Pid}} {{.State.StartedAt}}' "$POD-nginx")
[ "$now" = "$MASTER" ] || fail "nginx master changed: was $MASTER, now $now (restarted, not reloaded)"
logs nginx | grep -q 'signal 1 (SIGHUP) received' || { logs nginx >&2; fail "nginx logged no SIGHUP"; }
n=$(logs agent | grep '"event":"action"' | grep '"action":"signal"' | grep -c '"result":"success"' || true)
[ "$n" = 1 ] || { logs agent >&2; fail "expected 1 successful signal action in the agent log, found $n"; }
step "nginx master unchanged, reloaded by SIGHUP; agent logged 1 successful signal action"

IMAGE=$IMAGE NGINX_IMAGE=$NGINX_IMAGE AWSIM=$AWSIM sh scripts/inject-e2e.sh || fail "the inject end-to-end test failed (above)"
echo "image-test: PASS in $(($(date +%s) - T0))s (image $IMAGE, $SIZE bytes)"
