#!/bin/sh
# inject-e2e.sh - end-to-end test of `reload-agent inject` in a podman pod
# (issue 10 part 4), run by `make image-test` after the image test (or alone,
# once the images exist: `sh scripts/inject-e2e.sh`).
#
# A Deployment with nginx that mounts a ConfigMap volume (its site config)
# and reads another ConfigMap through envFrom, annotated
# reload-agent.io/inject: "true", action signal, env-action restart, goes
# through the host's `reload-agent inject`. From the injected pod template the
# script runs, in one `podman pod create --share pid,ipc,net` pod:
#   - the app container as the manifest says (command, user, volume mounts,
#     envFrom resolved like the kubelet does at start), --restart always;
#   - the injected sidecar with EXACTLY its image, args, env (fieldRefs
#     resolved as the kubelet does), user/group and security settings, and
#     every volumeMount as a host directory laid out by build/tools/awsim the
#     way the kubelet writes ConfigMap and downward-API volumes.
# Checks: an update of the volume ConfigMap (awsim) makes nginx serve the new
# config with the same master process (SIGHUP); an update of the env
# ConfigMap makes the agent restart the app container in place: its main
# process gets SIGTERM and podman restarts it (a new process, restart count
# +1), as the kubelet would (which then resolves envFrom again; podman keeps
# the env of the container's creation, so the new value itself is not
# checked, only the action the agent is configured for).
# No cluster and no API server are needed (env-action restart, no rollout).
# Everything it starts is removed by pod name on every exit path; every wait
# is bounded.
set -eu
cd "$(dirname "$0")/.."

BIN=${BIN:-build/reload-agent}
AWSIM=${AWSIM:-build/tools/awsim}
IMAGE=${IMAGE:-localhost/reload-agent:test}
NGINX_IMAGE=${NGINX_IMAGE:-localhost/reload-agent-nginx:test}
PORT=${INJECT_E2E_PORT:-18092}
POD=reload-agent-e2e-certs-$$
T0=$(date +%s)

step() { echo "inject-e2e: $* [$(($(date +%s) - T0))s]"; }
fail() { echo "inject-e2e: FAIL: $*" >&2; exit 1; }
pm() { timeout 120 podman "$@"; }

[ -x "$BIN" ] || fail "$BIN not found: run 'make all' first"
[ -x "$AWSIM" ] || fail "$AWSIM not found: run 'make all' first"
command -v podman >/dev/null 2>&1 || fail "podman not found (make image-test installs it)"
for img in "$IMAGE" "$NGINX_IMAGE"; do
  pm image exists "$img" || fail "image $img not found: run 'make image-test' (it builds both)"
done

D=$(mktemp -d /tmp/reload-agent-e2e.XXXXXX)
cleanup() {
  rc=$?
  pm pod rm -f "$POD" >/dev/null 2>&1 || true
  rm -rf "$D"
  [ "$rc" = 0 ] || echo "inject-e2e: FAILED (exit status $rc)" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 755 "$D"

# the podman settings of scripts/image-test.sh, unless the caller has its own
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/containers.conf}"

if curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/"; then
  fail "127.0.0.1:$PORT is already in use: set INJECT_E2E_PORT"
fi

# --- the workload, as a user writes it ---
cat > "$D/app.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/action: signal
        reload-agent.io/process: nginx
        reload-agent.io/env-action: restart
        reload-agent.io/restart-delay: 2s   # the default holds a restart 1m (restart storms)
        reload-agent.io/debounce: 100ms
        reload-agent.io/log-format: json
    spec:
      containers:
        - name: nginx
          image: $NGINX_IMAGE
          command: ["nginx", "-e", "stderr", "-g", "daemon off;"]
          securityContext:
            runAsUser: 33        # www-data: the sidecar must run as this UID to signal it
            runAsGroup: 33
          envFrom:
            - configMapRef: {name: web-env}
          volumeMounts:
            - name: site
              mountPath: /etc/nginx/site
              readOnly: true
      volumes:
        - name: site
          configMap: {name: web-site}
EOF

# The ConfigMaps' data, one file per key (what awsim lays out).
mkdir -p "$D/cm/web-site" "$D/cm/web-env"
site() { printf 'location / { return 200 "%s\\n"; }\n' "$1" > "$D/cm/web-site/site.conf"; }
site v1
printf 'hello' > "$D/cm/web-env/GREETING"

# nginx.conf belongs to the app image in real life; here it is mounted so
# nginx runs unprivileged (UID 33) on loopback and includes the ConfigMap.
cat > "$D/nginx.conf" <<EOF
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path /tmp/nginx-body;
  proxy_temp_path /tmp/nginx-proxy;
  fastcgi_temp_path /tmp/nginx-fastcgi;
  uwsgi_temp_path /tmp/nginx-uwsgi;
  scgi_temp_path /tmp/nginx-scgi;
  default_type text/plain;
  server {
    listen 127.0.0.1:$PORT;
    include /etc/nginx/site/site.conf;
  }
}
EOF

# --- inject ---
"$BIN" inject --image "$IMAGE" -f "$D/app.yaml" > "$D/injected.yaml" 2> "$D/inject.log" ||
  { cat "$D/inject.log" >&2; fail "reload-agent inject failed"; }
grep -q 'deployment/web injected' "$D/inject.log" ||
  { cat "$D/inject.log" >&2; fail "inject did not report deployment/web injected"; }
step "reload-agent inject: $(tr '\n' ' ' < "$D/inject.log")"

# --- the pod plan, from the injected template ---
# plan.py writes: volumes (one line per pod volume the containers mount:
# NAME KIND SOURCE, KIND configMap or downwardAPI), app.args and
# sidecar.args (podman run arguments, one per line), app.env (envFrom
# resolved), and the downward-API payloads under dw/<volume>/.
cat > "$D/plan.py" <<'EOF'
import os, sys, yaml

d, pod, image = sys.argv[1], sys.argv[2], sys.argv[3]
docs = [x for x in yaml.safe_load_all(open(os.path.join(d, "injected.yaml"))) if x]
dep = [x for x in docs if x.get("kind") == "Deployment"]
if len(dep) != 1:
    sys.exit("want one Deployment in the inject output, got %d" % len(dep))
tpl = dep[0]["spec"]["template"]
spec = tpl["spec"]
ns = dep[0]["metadata"]["namespace"]
pod_name = "web-5d8f7c9b4-e2e0"  # what a ReplicaSet would name it
side = [c for c in spec.get("initContainers", []) if c["name"] == "reload-agent"]
if len(side) != 1 or side[0].get("restartPolicy") != "Always":
    sys.exit("no native sidecar named reload-agent: %s" % spec.get("initContainers"))
side = side[0]
if spec.get("shareProcessNamespace") is not True:
    sys.exit("signal/restart need shareProcessNamespace: true, the template has %r"
             % spec.get("shareProcessNamespace"))
if side["image"] != image:
    sys.exit("sidecar image %s, want %s (--image)" % (side["image"], image))
vols = {v["name"]: v for v in spec["volumes"]}
used = {}

def mounts(c):
    out = []
    for m in c.get("volumeMounts", []):
        if "subPath" in m or "subPathExpr" in m:
            sys.exit("%s: subPath mount %s" % (c["name"], m))
        v = vols[m["name"]]
        if "configMap" in v:
            if v["configMap"].get("items"):
                sys.exit("volume %s: items mappings are not laid out here" % v["name"])
            used[v["name"]] = ("configMap", v["configMap"]["name"])
        elif "downwardAPI" in v:
            used[v["name"]] = ("downwardAPI", v["name"])
            p = os.path.join(d, "dw", v["name"])
            os.makedirs(p, exist_ok=True)
            for it in v["downwardAPI"]["items"]:
                fp = it["fieldRef"]["fieldPath"]
                if fp not in ("metadata.annotations", "metadata.labels"):
                    sys.exit("downwardAPI field %s is not laid out here" % fp)
                src = tpl["metadata"].get(fp.split(".")[1], {}) or {}
                # the kubelet's format: key="Go-quoted value", sorted
                with open(os.path.join(p, it["path"]), "w") as f:
                    for k in sorted(src):
                        v2 = src[k].replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                        f.write('%s="%s"\n' % (k, v2))
        elif "emptyDir" in v:
            # the kubelet's emptyDir: an empty directory anyone may write
            p = os.path.join(d, "vol", v["name"])
            os.makedirs(p, exist_ok=True)
            os.chmod(p, 0o777)
        else:
            sys.exit("volume %s: kind %s is not laid out here" % (v["name"], list(v)))
        ro = ":ro" if m.get("readOnly") else ""
        out += ["-v", "%s/vol/%s:%s%s" % (d, m["name"], m["mountPath"], ro)]
    return out

def env(c):
    out = []
    for e in c.get("env", []):
        if "value" in e:
            val = e["value"]
        else:
            fp = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            vals = {"metadata.name": pod_name, "metadata.namespace": ns}
            if fp not in vals:
                sys.exit("env %s: %s is not resolved here" % (e["name"], e))
            val = vals[fp]
        out += ["-e", "%s=%s" % (e["name"], val)]
    return out

def security(c):
    sc = c.get("securityContext", {})
    psc = spec.get("securityContext", {})
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    gid = sc.get("runAsGroup", psc.get("runAsGroup", uid))
    out = []
    if uid is not None:
        out += ["--user", "%d:%d" % (uid, gid)]
    if (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")) and not uid:
        sys.exit("%s: runAsNonRoot without a non-zero runAsUser" % c["name"])
    if sc.get("readOnlyRootFilesystem"):
        out.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        out += ["--security-opt", "no-new-privileges"]
    for cap in sc.get("capabilities", {}).get("drop", []):
        out += ["--cap-drop", cap.lower()]
    for cap in sc.get("capabilities", {}).get("add", []):
        out += ["--cap-add", cap.lower()]
    if sc.get("privileged"):
        sys.exit("%s: privileged" % c["name"])
    return out

app = spec["containers"][0]
app_args = ["--name", pod + "-app", "--restart", "always"] + security(app) + mounts(app) + \
    ["-v", os.path.join(d, "nginx.conf") + ":/etc/nginx/nginx.conf:ro",
     "--env-file", os.path.join(d, "app.env"), app["image"]] + app["command"] + app.get("args", [])
with open(os.path.join(d, "app.env"), "w") as f:
    for ef in app.get("envFrom", []):
        cm = ef["configMapRef"]["name"]
        for k in sorted(os.listdir(os.path.join(d, "cm", cm))):
            f.write("%s=%s\n" % (k, open(os.path.join(d, "cm", cm, k)).read()))
side_args = ["--name", pod + "-agent"] + security(side) + mounts(side) + env(side)
if side.get("command"):
    side_args += ["--entrypoint", side["command"][0], side["image"]] + side["command"][1:]
else:
    side_args.append(side["image"])
side_args += side.get("args", [])
for n, a in (("app.args", app_args), ("sidecar.args", side_args)):
    if any("\n" in x for x in a):
        sys.exit("a newline in %s" % n)
    open(os.path.join(d, n), "w").write("\n".join(a) + "\n")
with open(os.path.join(d, "volumes"), "w") as f:
    for name, (kind, src) in sorted(used.items()):
        f.write("%s %s %s\n" % (name, kind, src))
print("sidecar args: %s" % " ".join(side.get("args", [])))
EOF
python3 "$D/plan.py" "$D" "$POD" "$IMAGE" > "$D/plan.log" 2>&1 || { cat "$D/plan.log" >&2; fail "the injected template cannot be run"; }
step "$(cat "$D/plan.log")"

# Lays out every pod volume whose source is $1 (a ConfigMap name, or
# "downwardAPI") like the kubelet: one AtomicWriter update each.
layout() {
  while read -r name kind src; do
    case "$kind" in
      configMap) [ "$1" = "$src" ] || continue; payload=$D/cm/$src ;;
      downwardAPI) [ "$1" = downwardAPI ] || continue; payload=$D/dw/$src ;;
      *) fail "unknown volume kind $kind" ;;
    esac
    mkdir -p "$D/vol/$name"
    chmod 755 "$D/vol" "$D/vol/$name"
    "$AWSIM" --dir "$D/vol/$name" --payload "$payload" || fail "awsim could not update $name"
  done < "$D/volumes"
}
n=0
while read -r _ kind src; do
  [ "$kind" = downwardAPI ] && continue
  layout "$src"; n=$((n + 1))
done < "$D/volumes"
layout downwardAPI
[ "$n" -ge 2 ] || fail "expected the site volume and the env volume, got $(cat "$D/volumes")"

# --- the pod ---
pm pod create --name "$POD" --share pid,ipc,net --network host >/dev/null || fail "podman pod create failed"
# One argument per line (plan.py refuses newlines); no globbing.
set -f
IFS='
'
# shellcheck disable=SC2046
set -- $(cat "$D/app.args")
pm run -d --pod "$POD" "$@" >/dev/null || fail "cannot start the app container"
# shellcheck disable=SC2046
set -- $(cat "$D/sidecar.args")
pm run -d --pod "$POD" "$@" >/dev/null || fail "cannot start the sidecar container"
unset IFS
set +f

logs() { pm logs "$POD-$1" 2>&1; }
running() { [ "$(pm inspect --format '{{.State.Running}}' "$POD-$1")" = true ]; }
body() { curl -s --max-time 2 "http://127.0.0.1:$PORT/" || true; }
state() { pm inspect --format '{{.State.Pid}} {{.State.StartedAt}}' "$POD-app"; }
restarts() { pm inspect --format '{{.RestartCount}}' "$POD-app"; }
wait_for() { # $1 = what (for the message), then a command; 20 s at most
  what=$1; shift
  i=0
  until "$@"; do
    i=$((i + 1))
    [ "$i" -le 200 ] || return 1
    running agent || { logs agent >&2; fail "the sidecar exited while waiting for $what"; }
    sleep 0.1
  done
}
serves() { [ "$(body)" = "$1" ]; }
ready() { logs agent | grep -q '"event":"ready"'; }
actions() { # $1 = action: successful ones in the sidecar's log
  logs agent | grep '"event":"action"' | grep "\"action\":\"$1\"" | grep -c '"result":"success"' || true
}
has_actions() { [ "$(actions "$1")" = "$2" ]; }

wait_for "nginx to serve v1" serves v1 || { logs app >&2; fail "nginx does not serve v1 (got \"$(body)\")"; }
wait_for "the sidecar to be ready" ready || { logs agent >&2; fail "the sidecar logged no ready event in 20 s"; }
MASTER=$(state)
R0=$(restarts)
step "pod up: nginx serves v1 (master $MASTER), sidecar ready"

# 1. the volume ConfigMap changes: signal, same master
site v2
layout web-site
wait_for "v2" serves v2 || { logs agent >&2; fail "nginx still serves \"$(body)\" 20 s after the update to v2"; }
[ "$(state)" = "$MASTER" ] || fail "nginx master changed: was $MASTER, now $(state) (restarted, not reloaded)"
logs app | grep -q 'signal 1 (SIGHUP) received' || { logs app >&2; fail "nginx logged no SIGHUP"; }
# the sidecar kept what it applied in its state directory (--state-dir)
grep -q '"sha256"' "$D/vol/reload-agent-state/applied.json" 2>/dev/null ||
  { logs agent >&2; fail "the sidecar wrote no applied state into its emptyDir"; }
wait_for "the signal action" has_actions signal 1 ||
  { logs agent >&2; fail "expected 1 successful signal action, found $(actions signal)"; }
[ "$(actions restart)" = 0 ] || fail "a restart for a volume change"
step "site ConfigMap v2: nginx reloaded by SIGHUP, same master"

# 2. the env ConfigMap changes: restart in place
printf 'bonjour' > "$D/cm/web-env/GREETING"
layout web-env
restarted() { [ "$(restarts)" -gt "$R0" ] && running app && [ "$(state)" != "$MASTER" ]; }
wait_for "the app container's restart" restarted ||
  { logs agent >&2; fail "the app was not restarted 20 s after the env ConfigMap changed (restarts $(restarts), state $(state))"; }
wait_for "the restart action" has_actions restart 1 ||
  { logs agent >&2; fail "expected 1 successful restart action, found $(actions restart)"; }
logs app | grep -q 'signal 15 (SIGTERM) received' || { logs app >&2; fail "nginx logged no SIGTERM"; }
wait_for "nginx to serve v2 after the restart" serves v2 || fail "nginx serves \"$(body)\" after the restart"
[ "$(actions signal)" = 1 ] || fail "an extra signal action for an env change"
step "env ConfigMap changed: app container restarted in place ($MASTER -> $(state), restarts $R0 -> $(restarts))"

echo "inject-e2e: PASS in $(($(date +%s) - T0))s"
