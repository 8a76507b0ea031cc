#!/bin/sh
# make demo: nginx reloads a config from a kubelet-style ConfigMap volume,
# live, on SIGHUP from reload-agent: same master PID, new content.
# Everything binds to 127.0.0.1; everything started here is stopped here.
set -eu
BIN=${BIN:-build/reload-agent}
AWSIM=${AWSIM:-build/tools/awsim}
PORT=${DEMO_PORT:-18080}

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "demo: installing nginx-light (Debian package)"
  [ "$(id -u)" = 0 ] || { echo "demo: need root to apt-get install nginx-light" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

D=$(mktemp -d /tmp/reload-agent-demo.XXXXXX)
AGENT_PID=
cleanup() {
  [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null || true
  [ -f "$D/nginx.pid" ] && kill -QUIT "$(cat "$D/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$D"
}
trap cleanup EXIT INT TERM

page() { # $1 = message: one site.conf as a ConfigMap key
  mkdir -p "$D/payload"
  printf 'location / { default_type text/plain; return 200 "%s\\n"; }\n' "$1" > "$D/payload/site.conf"
  "$AWSIM" --dir "$D/config" --payload "$D/payload"
}

mkdir -p "$D/config" "$D/nginx"
page "hello from ConfigMap version 1"
cat > "$D/nginx.conf" <<NGX
worker_processes 2;
pid $D/nginx.pid;
error_log $D/nginx/error.log notice;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $D/nginx/body; proxy_temp_path $D/nginx/proxy;
  fastcgi_temp_path $D/nginx/fastcgi; uwsgi_temp_path $D/nginx/uwsgi; scgi_temp_path $D/nginx/scgi;
  server { listen 127.0.0.1:$PORT; include $D/config/site.conf; }
}
NGX
"$NGINX" -p "$D/nginx" -c "$D/nginx.conf"
for i in $(seq 50); do [ -s "$D/nginx.pid" ] && break; sleep 0.1; done
MASTER=$(cat "$D/nginx.pid")

echo "== volume layout (kubelet AtomicWriter):"
ls -la "$D/config" | sed 's/^/   /'
echo "== nginx master PID $MASTER serves:"
curl -fsS "http://127.0.0.1:$PORT/" | sed 's/^/   /'

"$BIN" run --watch "$D/config" --action signal --pid-file "$D/nginx.pid" \
  --debounce 100ms --listen 127.0.0.1:0 &
AGENT_PID=$!
sleep 0.5

echo "== updating the ConfigMap (atomic ..data swap)"
page "hello from ConfigMap version 2"
ok=0
for i in $(seq 100); do
  body=$(curl -fsS "http://127.0.0.1:$PORT/" || true)
  case "$body" in *"version 2"*) ok=1; break ;; esac
  sleep 0.1
done
NOW=$(cat "$D/nginx.pid")
echo "== nginx master PID $NOW serves:"
curl -fsS "http://127.0.0.1:$PORT/" | sed 's/^/   /'
if [ "$ok" = 1 ] && [ "$MASTER" = "$NOW" ] && kill -0 "$MASTER"; then
  echo "== OK: new content served by the same master (PID $MASTER): reloaded, not restarted"
else
  echo "== FAILED: content or master PID not as expected" >&2
  exit 1
fi
