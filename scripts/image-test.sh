#!/bin/sh
# make image-test: builds the container image (Dockerfile) with podman and
# tests it the way Kubernetes runs it: in a pod that shares its PID, IPC and
# network namespaces, beside nginx, with a kubelet-style ConfigMap volume
# (written by build/tools/awsim) mounted read-only into both containers.
# Checks: the image is at most 8 MB and holds exactly the files
# scripts/rootfs.sh lays out (a static binary, no loader or library); it
# runs read-only (version, hash against tests/lib/refhash.py); its http client
# resolves names (/etc/hosts), connects, and speaks TLS verified against
# the CA bundle at the path the binary was built with (a mounted test CA:
# success; the image's own bundle: "self-signed certificate"); in the pod, a
# content update reaches nginx by SIGHUP within 10 s, nginx's master process
# stays the same, and the agent logs exactly one successful signal action.
# No Docker engine and no registry are needed: the Debian base image is made
# locally with debootstrap and cached as $BASE.
# Everything it starts is removed on every exit path; every wait is bounded.
# IMAGE_TAG / NGINX_IMAGE_TAG name the images it builds (defaults below).
set -eu
cd "$(dirname "$0")/.."

AWSIM=${AWSIM:-build/tools/awsim}
PORT=${IMAGE_TEST_PORT:-18091}
BASE=localhost/debian-minbase:bookworm
IMAGE=${IMAGE_TAG:-localhost/reload-agent:test}
NGINX_IMAGE=${NGINX_IMAGE_TAG:-localhost/reload-agent-nginx:test}
POD=reload-agent-image-test-$$
MAX_IMAGE_BYTES=8000000
T0=$(date +%s)

step() { echo "image-test: $* [$(($(date +%s) - T0))s]"; }
fail() { echo "image-test: FAIL: $*" >&2; exit 1; }
# Every podman call is bounded; builds and debootstrap get longer below.
pm() { timeout 120 podman "$@"; }
PATH=$PATH:/usr/sbin:/sbin

[ -x "$AWSIM" ] || fail "$AWSIM not found: run 'make all' first"

missing=""
for tool in podman runc debootstrap openssl; do
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
  pm rm -f "$POD-http" >/dev/null 2>&1 || true
  [ -z "${TLS_PID:-}" ] || { kill "$TLS_PID" 2>/dev/null || true; wait "$TLS_PID" 2>/dev/null || true; }
  rm -rf "$D"
  [ "$rc" = 0 ] || echo "image-test: FAILED (exit status $rc)" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# podman's defaults fail in this sandbox (scripts/containers.conf says why).
export CONTAINERS_CONF="$PWD/scripts/containers.conf"

step "base image $BASE"
sh scripts/base-image.sh "$BASE" || fail "no base image (above)"

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
build "$NGINX_IMAGE" -f tests/cluster/images/nginx.Containerfile tests/cluster/images
SIZE=$(pm image inspect --format '{{.Size}}' "$IMAGE")
step "image $IMAGE: $SIZE bytes"
[ "$SIZE" -le "$MAX_IMAGE_BYTES" ] || fail "image is $SIZE bytes, more than $MAX_IMAGE_BYTES"

# --- what is in it: exactly the files scripts/rootfs.sh lays out ---
cid=$(pm create "$IMAGE") || fail "podman create failed"
pm export "$cid" > "$D/image.tar" || { pm rm "$cid" >/dev/null 2>&1; fail "podman export failed"; }
pm rm "$cid" >/dev/null 2>&1 || true
# Regular files and symlinks (podman adds empty mount points: dev, proc, sys,
# etc/hosts, etc/resolv.conf... which are directories or empty files).
files=$(tar -tvf "$D/image.tar" | awk '$1 ~ /^[-l]/ && ($3 > 0 || $1 ~ /^l/) { print $6 }' | sed 's#^\./##' | sort | tr '\n' ' ')
want="etc/group etc/nsswitch.conf etc/passwd etc/ssl/certs/ca-certificates.crt usr/local/bin/reload-agent "
[ "$files" = "$want" ] || fail "image files are: $files; expected: $want"
tar -tvf "$D/image.tar" | awk '$1 ~ /^-/ && $3 > 0 { printf "image-test:   %10d  /%s\n", $3, $6 }' | sed 's#/\./#/#'

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
  printf 'server { listen 127.0.0.1:%s; location / { return 200 "%s\\n"; } }\n' "$PORT" "$1" > "$SRC/site.conf"
  "$AWSIM" --dir "$VOL" --payload "$SRC" || fail "awsim could not update $VOL"
}
page v1

# Mounted at its host path so the logical paths, and so the hash, are the
# ones the reference implementation computes on the host.
got=$(pm run --rm --network none --read-only -v "$VOL:$VOL:ro" "$IMAGE" hash "$VOL") ||
  fail "'hash' failed in the image"
want=$(python3 tests/lib/refhash.py "$VOL") || fail "tests/lib/refhash.py failed"
[ "$got" = "$want" ] || fail "hash in the image is $got, tests/lib/refhash.py says $want"
step "hash of the volume matches tests/lib/refhash.py"

# The http client inside the image: name resolution (the static glibc's
# files service, podman's /etc/hosts), connect, TLS. $1 = what, then the
# agent's run arguments after --watch; prints the first http action result.
http_result() {
  what=$1; shift
  pm rm -f "$POD-http" >/dev/null 2>&1 || true
  pm run -d --name "$POD-http" --network host --read-only -v "$VOL:$VOL:ro" "$@" >/dev/null ||
    fail "could not start the $what container"
  for _ in $(seq 50); do
    r=$(pm logs "$POD-http" 2>&1 | grep '"event":"action"' | grep '"action":"http"' | head -n 1)
    [ -z "$r" ] || break
    sleep 0.2
  done
  pm rm -f "$POD-http" >/dev/null 2>&1 || true
  [ -n "$r" ] || fail "no http action result in the image's log ($what)"
  echo "$r"
}
run_http() { # $1 = URL, then podman run options before the image
  url=$1; shift
  http_result "$url" "$@" "$IMAGE" run --watch "$VOL" --action http --http-url "$url" \
    --http-method GET --on-start reload --retry-initial 200ms --retry-max 200ms --log-format json
}

r=$(run_http http://localhost:9/)
case "$r" in
  *'"result":"failure"'*"Failed to connect to localhost port 9"*) ;;
  *) fail "http://localhost:9/ from the image: expected a connect failure, got: $r" ;;
esac
step "image: localhost resolved, connect refused as expected"

# A TLS server on the host with a throwaway CA-less certificate for localhost.
TLS_PORT=${IMAGE_TEST_TLS_PORT:-18443}
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$D/tls.key" -out "$D/tls.crt" -days 1 >/dev/null 2>&1 || fail "openssl req failed"
chmod 644 "$D/tls.crt"
openssl s_server -quiet -www -accept "$TLS_PORT" -cert "$D/tls.crt" -key "$D/tls.key" >/dev/null 2>&1 &
TLS_PID=$!
i=0
until curl -s -o /dev/null --max-time 1 --cacert "$D/tls.crt" "https://localhost:$TLS_PORT/"; do
  i=$((i + 1))
  [ "$i" -le 50 ] || fail "openssl s_server on port $TLS_PORT did not come up"
  kill -0 "$TLS_PID" 2>/dev/null || fail "openssl s_server exited (port $TLS_PORT in use? set IMAGE_TEST_TLS_PORT)"
  sleep 0.1
done
r=$(run_http "https://localhost:$TLS_PORT/" -v "$D/tls.crt:/etc/ssl/certs/ca-certificates.crt:ro")
case "$r" in
  *'"result":"success"'*) ;;
  *) fail "https with the server's certificate as the CA bundle: expected success, got: $r" ;;
esac
r=$(run_http "https://localhost:$TLS_PORT/")
case "$r" in
  *'"result":"failure"'*"self-signed certificate"*) ;;
  *) fail "https with the image's CA bundle: expected a verification failure, got: $r" ;;
esac
kill "$TLS_PID" 2>/dev/null || true
wait "$TLS_PID" 2>/dev/null || true
TLS_PID=
step "image: https verified against /etc/ssl/certs/ca-certificates.crt (test CA: success; image bundle: self-signed refused)"

# --- the pod ---
if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then
  fail "127.0.0.1:$PORT is already in use: set IMAGE_TEST_PORT"
fi
pm pod create --name "$POD" --share pid,ipc,net --network host >/dev/null || fail "podman pod create failed"
pm run -d --pod "$POD" --name "$POD-nginx" -v "$VOL:/etc/nginx/conf.d:ro" "$NGINX_IMAGE" >/dev/null ||
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

echo "image-test: PASS in $(($(date +%s) - T0))s (image $IMAGE, $SIZE bytes)"
