"""restart-pod on the real kubelet (KEP-5532, beta and on by default in 1.36):
the agent exits with its code and the kubelet, told by the sidecar's
restartPolicyRules, restarts every container of the pod in place. No shared
PID namespace, no API access, no Role.

The pod here is written by hand, exactly as the injector writes it for
restart-pod: the sidecar carries the rule and a copy of it in
--restart-policy-rules, an emptyDir for --state-dir, the app's env
ConfigMap mounted for the agent alone (--env-watch). An init container
appends a line to an emptyDir each time it runs."""
import json
import time

import apps
from lib import check, wait_until

CODE = 88
RULES = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [CODE]}}]
AGENT_IMAGE = "reload-agent:0.1.0"


def sidecar(args, rules=True, mounts=()):
    c = {"name": "reload-agent", "image": AGENT_IMAGE, "imagePullPolicy": "Never", "restartPolicy": "Always",
         "args": ["run", "--log-format=json", "--resync=0"] + list(args),
         "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
                             "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                             "seccompProfile": {"type": "RuntimeDefault"}},
         "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d", "readOnly": True},
                          {"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}] + list(mounts)}
    if rules:
        c["restartPolicyRules"] = RULES
    return c


def pod_template(agent, annotations=None):
    """nginx serving the site ConfigMap and reading GREETING from the env
    ConfigMap, an init container that counts its runs, and the agent."""
    init = {"name": "init", "image": apps.NGINX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", "date +%s >> /runs/init"],
            "volumeMounts": [{"name": "runs", "mountPath": "/runs"}]}
    app = {"name": "nginx", "image": apps.NGINX_IMAGE, "imagePullPolicy": "Never",
           "ports": [{"containerPort": apps.PORT}],
           "envFrom": [{"configMapRef": {"name": "env"}}],
           "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d"},
                            {"name": "runs", "mountPath": "/runs"}],
           "readinessProbe": {"httpGet": {"path": "/", "port": apps.PORT}, "periodSeconds": 2}}
    spec = {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 5,
            "initContainers": [init, agent], "containers": [app],
            "volumes": [{"name": "site", "configMap": {"name": "site"}},
                        {"name": "env", "configMap": {"name": "env"}},
                        {"name": "runs", "emptyDir": {}},
                        {"name": "state", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                        {"name": "podinfo", "downwardAPI": {"items": [
                            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]}
    return {"metadata": {"labels": {"app": "web"}, "annotations": dict(annotations or {})}, "spec": spec}


def deployment(tmpl):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}})


def restart_pod_agent():
    return sidecar(["--watch=/etc/nginx/conf.d", "--env-watch=/reload-agent/env/env", "--action=restart-pod",
                    "--env-action=restart-pod", "--restart-policy-rules=" + json.dumps(RULES, separators=(",", ":")),
                    "--state-dir=/reload-agent/state", "--restart-delay=5s"],
                   mounts=[{"name": "env", "mountPath": "/reload-agent/env/env", "readOnly": True},
                           {"name": "state", "mountPath": "/reload-agent/state"}])


def restart_counts(pod):
    st = pod["status"]
    return {cs["name"]: cs.get("restartCount", 0)
            for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", [])}


def served(ip):
    from lib import http_get
    st, body = http_get("http://%s:%d/" % (ip, apps.PORT))
    return body.strip() if st == 200 else None


def check_no_role(env, sa="default"):
    """The pod's ServiceAccount is bound to nothing and may do nothing."""
    who = "system:serviceaccount:%s:%s" % (env.ns, sa)
    for kind in ("rolebindings", "clusterrolebindings"):
        items = env.c.get(kind, ns=env.ns if kind == "rolebindings" else None)["items"]
        bound = [b["metadata"]["name"] for b in items for s in b.get("subjects") or []
                 if s.get("kind") == "ServiceAccount" and s.get("name") == sa
                 and s.get("namespace", env.ns) == env.ns]
        check(not bound, "the ServiceAccount %s is bound by %s %r" % (sa, kind, bound))
    for verb, res in (("get", "pods"), ("patch", "deployments"), ("create", "events")):
        rc, out, _ = env.kubectl("auth", "can-i", verb, res, "--as", who, check=False)
        check(out.strip() == "no", "%s may %s %s (%r)" % (who, verb, res, out.strip()))


def test_restart_pod_in_place(env):
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.configmap("env", {"GREETING": "hello"}))
    env.apply(deployment(pod_template(restart_pod_agent())))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name, uid, ip = pod["metadata"]["name"], pod["metadata"]["uid"], pod["status"]["podIP"]
    env.wait_agent_event(name, "ready", 60)
    check(served(ip) == "v1", "nginx does not serve v1: %r" % served(ip))
    check(env.exec(name, "nginx", "printenv", "GREETING").strip() == "hello", "GREETING is not hello")
    r0 = restart_counts(pod)
    check(set(r0) == {"init", "reload-agent", "nginx"} and not any(r0.values()), "restart counts %r" % r0)
    gen = env.get("deployment", "web")["metadata"]["generation"]

    t0 = time.monotonic()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v2")}) +
              apps.configmap("env", {"GREETING": "bonjour"}))
    wait_until(lambda: restart_counts(env.get("pod", name)).get("nginx", 0) > 0, 300,
               "every container of the pod to restart in place")
    env.log("the ConfigMap edits restarted the pod in place after %.1f s (kubelet sync + --restart-delay 5s)"
            % (time.monotonic() - t0))
    env.kubectl("wait", "--for=condition=Ready", "pod/" + name, "--timeout=120s", timeout=130)
    time.sleep(15)  # a second restart, if the change caused one, would show by now
    pod = env.get("pod", name)
    check(pod["metadata"]["uid"] == uid, "the pod's UID changed: it was replaced")
    check(pod["status"]["podIP"] == ip, "the pod's IP changed: %s -> %s" % (ip, pod["status"]["podIP"]))
    check(restart_counts(pod) == {k: 1 for k in r0}, "restart counts %r, want each + 1" % restart_counts(pod))
    runs = env.exec(name, "nginx", "cat", "/runs/init").split()
    check(len(runs) == 2, "the init container ran %d times, want 2" % len(runs))
    check(served(ip) == "v2", "nginx does not serve v2 after the restart: %r" % served(ip))
    check(env.exec(name, "nginx", "printenv", "GREETING").strip() == "bonjour",
          "printenv GREETING does not show the new value after the restart")
    check(not pod["spec"].get("shareProcessNamespace"), "the pod shares its PID namespace")
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")
    for cs in pod["status"]["containerStatuses"] + pod["status"]["initContainerStatuses"]:
        last = cs.get("lastState", {}).get("terminated", {})
        check(last.get("reason") == "RestartingAllContainers",
              "container %s: last state %r, want reason RestartingAllContainers" % (cs["name"], last))
    check_no_role(env)
    # The agent that started again reports why, from the record in --state-dir.
    ev = env.wait_agent_event(name, "pod-restarted", 30)
    check(ev.get("exit_code") == CODE and "/etc/nginx/conf.d/site.conf" in ev.get("files", ""),
          "pod-restarted event %r" % ev)
    check(not [e for e in env.agent_events(name) if e.get("event") == "action"],
          "the agent acted again after the restart: %r" % env.agent_events(name))


def test_restart_pod_refused_without_the_rule(env):
    """Without the rule (and the flag that states it) the agent refuses
    restart-pod: at start it exits 2 naming what is missing; on a live switch
    the last good configuration stays in force."""
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.configmap("env", {"GREETING": "hello"}))
    # Live: starts with action none, then the annotation asks for restart-pod.
    live = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live"}}
    live.update(pod_template(sidecar(["--watch=/etc/nginx/conf.d", "--action=none"], rules=False)))
    live["metadata"]["name"] = "live"
    env.apply(json.dumps(live))
    env.kubectl("wait", "--for=condition=Ready", "pod/live", "--timeout=180s", timeout=200)
    env.wait_agent_event("live", "ready", 60)
    env.kubectl("annotate", "pod", "live", "reload-agent.io/action=restart-pod")
    err = env.wait_agent_event("live", "config-error", 180)
    check("restart-pod" in err.get("error", "") and "restartPolicyRules" in err.get("error", ""),
          "config-error %r does not name restart-pod and restartPolicyRules" % err)
    env.log("live switch refused: %s" % err.get("error"))
    check(restart_counts(env.get("pod", "live")) == {"init": 0, "reload-agent": 0, "nginx": 0},
          "a container restarted after the refused switch")
    # At start: the same configuration in the args exits 2.
    start = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "start"}}
    start.update(pod_template(sidecar(["--watch=/etc/nginx/conf.d", "--action=restart-pod"], rules=False)))
    start["metadata"]["name"] = "start"
    env.apply(json.dumps(start))

    def agent_exit():
        for cs in (env.get("pod", "start").get("status", {}).get("initContainerStatuses") or []):
            if cs["name"] == "reload-agent":
                t = cs.get("state", {}).get("terminated") or cs.get("lastState", {}).get("terminated")
                if t:
                    return t
        return None
    t = wait_until(agent_exit, 120, "the agent of pod start to exit")
    check(t.get("exitCode") == 2, "the agent exited %r, want 2" % t)
    log = env.agent_log("start") or env.agent_log("start", previous=True)
    check("restartPolicyRules" in log and "restart-pod" in log, "the agent's log does not say why: %r" % log)


test_restart_pod_in_place.timeout = 900
test_restart_pod_refused_without_the_rule.timeout = 600
