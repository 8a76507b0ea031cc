"""The Grafana dashboard (charts/reload-agent/dashboards/reload-agent.json,
issue 29 item 4) charts only what the programs export: every metric name in
every panel's query (and in the dashboard's variables) is read back from
the real binaries' /metrics: an agent with an API client (against the API
double, tests/lib/fakeapi.py), fast sync, staging and notifications on, and
the webhook over HTTPS with a test CA, both scraped over loopback (the
agent's API families appear with its first request: its /metrics is read
until they are there, 10 s at most)."""
import http.client
import json
import os
import re
import ssl
import subprocess

from tests.lib.agent import ROOT, volume
from tests.lib.kube import fake_for
from tests.lib.kube import start as start_k8s
from tests.lib.notifysink import Sink
from tests.lib.proc import check, free_port, http_get, poll, wait_until
from tests.lib.webhook import make_certs

DASHBOARD = os.path.join(ROOT, "charts", "reload-agent", "dashboards", "reload-agent.json")
NAME = re.compile(r"\breload_agent_[a-z0-9_]+")


def exported(text):
    """The sample names of a Prometheus text exposition."""
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{| )", text, re.M)}


def used(dash):
    """(where, metric name) of every reload_agent_ name the dashboard queries."""
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out += [(p["title"], n) for n in NAME.findall(t["expr"])]
    for v in dash["templating"]["list"]:
        out += [("variable " + v["name"], n) for n in NAME.findall(v.get("definition", ""))]
    return out


def agent_metrics(env, want):
    fake = fake_for(env)
    sink = Sink(env)
    vol = volume(env, {"app.conf": "v0\n"})
    port = free_port()
    start_k8s(env, fake, vol, "--listen", "127.0.0.1:%d" % port, "--notify-url", sink.url,
              "--fast-sync", "--stage", "1", "--action", "exec", "--exec-command", "true",
              wait_reconcile=False)
    url = "http://127.0.0.1:%d/metrics" % port
    last = []

    def scrape():
        last[:] = [http_get(url)[1].decode()]
        return want <= exported(last[0])
    poll(scrape, 10, 0.2)
    return last[0]


def webhook_metrics(env):
    d = env.path("tls")
    os.mkdir(d)
    make_certs(d)
    port = free_port()
    p = env.spawn([env.binary, "webhook", "--listen", "127.0.0.1:%d" % port, "--tls-cert-file",
                   d + "/tls.crt", "--tls-key-file", d + "/tls.key"],
                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctx = ssl.create_default_context(cafile=d + "/ca.crt")

    def get():
        check(p.poll() is None, "the webhook exited (%r)" % p.poll())
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            c.request("GET", "/metrics")
            r = c.getresponse()
            body = r.read().decode()
            c.close()
            return body if r.status == 200 else None
        except OSError:
            return None
    return wait_until(get, 15, "the webhook's /metrics")


def test_dashboard_queries_exported_metrics(env):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    check(dash.get("uid") == "reload-agent" and dash.get("panels"), "not a dashboard: %r" % list(dash))
    uses = used(dash)
    agent_side = {n for _, n in uses if not n.startswith("reload_agent_webhook_")}
    names = exported(agent_metrics(env, agent_side)) | exported(webhook_metrics(env))
    check(len(uses) >= 20, "only %d metric uses in the dashboard" % len(uses))
    missing = sorted({"%s: %s" % u for u in uses if u[1] not in names})
    check(not missing, "panels query metrics no program exports: %s" % "; ".join(missing))
    # each panel has a query, a title and a datasource of the variable
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        check(p.get("targets") and p.get("title"), "panel %r has no query" % p.get("id"))
        check(p["datasource"]["uid"] == "${datasource}", "panel %r: datasource %r" % (
            p["title"], p["datasource"]))
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)), "panel ids repeat: %r" % ids)
