"""restart-pod on the real kubelet (KEP-5532, beta and on by default in 1.36):
the agent exits with its code and the kubelet, told by the sidecar's
restartPolicyRules, restarts every container of the pod in place. No shared
PID namespace, no API access, no Role.

The restart-pod pod is the injector's: a Deployment annotated
reload-agent.io/action and env-action restart-pod, whose pods the webhook
injects (the sidecar's rule, its copy in --restart-policy-rules, an
emptyDir for --state-dir, the app's env ConfigMap mounted for the agent
alone). An init container appends a line to an emptyDir each time it runs.

The refusal test writes its pods by hand: the injector never writes a
restart-pod sidecar without the rule, and the agent must refuse one.

The Job test (KEP-5307) injects a Job with `reload-agent inject`: the
restart action stops the app, whose container the injected Restart rule on
exit code 143 restarts in place, and the Job still completes.

Below the versions they need (tests.lib.cluster.needs) each asserts the
documented behaviour instead: below 1.36 the webhook, with no flag, reads
the cluster's version and admits a restart-pod pod without the sidecar,
naming 1.36, and changes nothing else of it; below 1.35 `inject
--kube-version` leaves the Job's restart rule out, with a warning."""
import json
import subprocess
import time

from tests.lib import apps
from tests.lib.apps import CODE, RULES, pod_template, restart_pod_annotations, sidecar
from tests.lib.cluster import http_text, needs, wait_until
from tests.lib.proc import check

def deployment(tmpl):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}})


def check_injected_sidecar(pod):
    """The sidecar as the injector writes it for restart-pod: the rule, the
    same JSON in --restart-policy-rules, --state-dir on an emptyDir; no
    token, no UID of the app's."""
    (side,) = [c for c in pod["spec"]["initContainers"] if c["name"] == "reload-agent"]
    check(side.get("restartPolicy") == "Always", "the sidecar is not a native sidecar: %r" % side)
    check(side.get("restartPolicyRules") == RULES, "the sidecar's rules %r, want %r"
          % (side.get("restartPolicyRules"), RULES))
    args = side.get("args", [])
    check("--restart-policy-rules=" + json.dumps(RULES, separators=(",", ":")) in args,
          "the sidecar's args do not state the rule: %r" % args)
    check("--state-dir=/reload-agent/state" in args, "no --state-dir in %r" % args)
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    check("emptyDir" in vols.get("reload-agent-state", {}), "no state emptyDir: %r" % list(vols))
    mounts = [m["mountPath"] for m in side.get("volumeMounts", [])]
    check("/var/run/secrets/kubernetes.io/serviceaccount" not in mounts, "the sidecar mounts a token")


def restart_counts(pod):
    st = pod["status"]
    return {cs["name"]: cs.get("restartCount", 0)
            for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", [])}


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT))
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
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.configmap("env", {"GREETING": "hello"}))
    env.apply(deployment(pod_template(None, restart_pod_annotations())))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    check_injected_sidecar(pod)
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


def crawl_job():
    """A Job whose app (sh, killed by SIGTERM: exit code 143) works through
    the task ConfigMap: while the task is "wait" it waits; a task "done" ends
    it with 0. Each run logs the task it read."""
    script = ('echo "run $(date +%s): $(cat /etc/work/task)"; '
              'while [ "$(cat /etc/work/task)" = wait ]; do sleep 1; done; echo finished')
    ann = apps.agent_annotations(action="restart", process="sh", restart_delay="0s")
    tmpl = {"metadata": {"annotations": ann},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "work", "image": apps.NGINX_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", script],
                                     "volumeMounts": [{"name": "task", "mountPath": "/etc/work"}]}],
                     "volumes": [{"name": "task", "configMap": {"name": "task"}}]}}
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "crawl"},
                       "spec": {"backoffLimit": 0, "template": tmpl}})


def test_restart_in_place_keeps_a_job(env):
    """KEP-5307: `reload-agent inject` gives the Job's app container its
    restartPolicy and a Restart rule on 143, so the restart action restarts
    it in place: same pod, no failure counted, and the Job completes once
    the task says so. Without the rule the Job would fail (backoffLimit 0)."""
    env.apply(apps.configmap("task", {"task": "wait"}))
    p = subprocess.run([env.c.binary, "inject", "-o", "json", "-"], input=crawl_job().encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0, "inject failed: %s" % p.stderr.decode())
    env.log("inject: " + p.stderr.decode().strip().replace("\n", "; "))
    job = json.loads(p.stdout)
    (work,) = job["spec"]["template"]["spec"]["containers"]
    check(work.get("restartPolicy") == "Never" and work.get("restartPolicyRules") ==
          [{"action": "Restart", "exitCodes": {"operator": "In", "values": [143]}}],
          "the injector wrote restartPolicy %r, rules %r" % (work.get("restartPolicy"),
                                                             work.get("restartPolicyRules")))
    env.apply(json.dumps(job))
    pod = wait_until(lambda: [q for q in env.pods("job-name=crawl")
                              if any(cs["name"] == "work" and cs.get("state", {}).get("running")
                                     for cs in q.get("status", {}).get("containerStatuses", []))],
                     180, "the Job's app to run")[0]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    env.wait_agent_event(name, "ready", 60)
    # A first edit: the agent restarts the app, which reads the new task and
    # waits again; a second one ends it (the app sees "done" and exits 0, or
    # the agent's SIGTERM comes first and the run after it does: either way
    # the Job completes in this pod).
    env.apply(apps.configmap("task", {"task": "wait", "round": "2"}))
    wait_until(lambda: work_restarts(env.get("pod", name)) >= 1, 240, "the app to restart in place")
    st = [cs for cs in env.get("pod", name)["status"]["containerStatuses"] if cs["name"] == "work"][0]
    last = st.get("lastState", {}).get("terminated", {})
    check(last.get("exitCode") == 143, "the app's last state %r, want exit code 143 (SIGTERM)" % last)
    env.log("the restart action restarted the Job's app in place (exit 143, restartCount 1)")
    env.apply(apps.configmap("task", {"task": "done", "round": "3"}))
    wait_until(lambda: (env.get("job", "crawl").get("status", {}).get("succeeded") == 1), 240,
               "the Job to succeed")
    j = env.get("job", "crawl")
    check(not j["status"].get("failed"), "the Job counted a failure: %r" % j["status"])
    pods = env.pods("job-name=crawl")
    check([q["metadata"]["uid"] for q in pods] == [uid], "the Job ran other pods: %r"
          % [q["metadata"]["name"] for q in pods])
    # The kubelet keeps the log of the last run only (it removes older dead
    # containers): that run saw the final task and ended the Job itself.
    last_run = env.kubectl("logs", name, "-c", "work")
    check("finished" in last_run, "the app's last run: %r" % last_run)
    check(work_restarts(env.get("pod", name)) >= 1, "the app never restarted")
    env.log("the Job completed in its one pod after %d in-place restart(s)" % work_restarts(env.get("pod", name)))


def work_restarts(pod):
    for cs in pod.get("status", {}).get("containerStatuses", []):
        if cs["name"] == "work":
            return cs.get("restartCount", 0)
    return 0


test_restart_pod_in_place.timeout = 900
test_restart_pod_refused_without_the_rule.timeout = 600
test_restart_in_place_keeps_a_job.timeout = 900


# ---- below the versions these need (tests.lib.cluster.needs) ----

def restart_pod_refused_below_136(env):
    """No RestartAllContainers below 1.36: the webhook (no --kube-version:
    the API server's version) admits the restart-pod pod without the
    sidecar and logs why, naming the cluster's version and 1.36; the pod is
    the template's, nothing added."""
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.configmap("env", {"GREETING": "hello"}))
    tmpl = pod_template(None, restart_pod_annotations())
    env.apply(deployment(tmpl))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    spec = pod["spec"]
    check([c["name"] for c in spec.get("initContainers", [])] ==
          [c["name"] for c in tmpl["spec"]["initContainers"]], "init containers %r" %
          [c["name"] for c in spec.get("initContainers", [])])
    check([c["name"] for c in spec["containers"]] == [c["name"] for c in tmpl["spec"]["containers"]],
          "containers %r" % [c["name"] for c in spec["containers"]])
    for got, want in zip(spec["containers"] + spec["initContainers"],
                         tmpl["spec"]["containers"] + tmpl["spec"]["initContainers"]):
        for k in ("volumeMounts", "env", "args", "restartPolicyRules"):
            check(got.get(k) == want.get(k), "%s: %s changed: %r" % (got["name"], k, got.get(k)))
    check(sorted(v["name"] for v in spec["volumes"]) ==
          sorted(v["name"] for v in tmpl["spec"]["volumes"]), "volumes %r" % spec["volumes"])
    ann = pod["metadata"].get("annotations", {})
    check(not [k for k in ann if k not in tmpl["metadata"]["annotations"]],
          "annotations added: %r" % sorted(set(ann) - set(tmpl["metadata"]["annotations"])))
    check(not spec.get("shareProcessNamespace"), "the pod shares its PID namespace")
    want = ("restart-pod: Kubernetes 1.%d (the API server's /version) rejects restartPolicyRules on "
            "the sidecar; RestartAllContainers (KEP-5532) is on by default from 1.36" % env.c.minor)
    wait_until(lambda: want in env.c.kubectl("logs", "-l", "app.kubernetes.io/name=reload-agent-webhook",
                                             "--tail=-1", ns="reload-agent", timeout=60),
               60, "the webhook to log %r" % want)
    env.log("Kubernetes %s: restart-pod admitted without the sidecar: %s" % (env.c.version, want))


def job_rule_left_out_below_135(env):
    """No container restart rules below 1.35: `inject --kube-version` of the
    cluster leaves the Job's Restart rule out, with a warning, and says which
    version it assumed; the API server takes the Job as written."""
    p = subprocess.run([env.c.binary, "inject", "--kube-version", env.c.version, "-o", "json", "-"],
                       input=crawl_job().encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    err = p.stderr.decode()
    check(p.returncode == 0, "inject failed: %s" % err)
    env.log("inject: " + err.strip().replace("\n", "; "))
    check("restart: Kubernetes 1.%d (--kube-version) has no restartPolicyRules (1.35+): container work"
          % env.c.minor in err, "no warning: %s" % err)
    check(err.splitlines()[-1] == "Kubernetes 1.%d assumed (--kube-version)" % env.c.minor,
          "the report's last line: %s" % err)
    job = json.loads(p.stdout)
    (work,) = job["spec"]["template"]["spec"]["containers"]
    check("restartPolicyRules" not in work and "restartPolicy" not in work,
          "the injector wrote a rule: %r" % work)
    out = env.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(job))
    (sw,) = json.loads(out)["spec"]["template"]["spec"]["containers"]
    check("restartPolicyRules" not in sw, "the API server's Job has rules: %r" % sw)


needs(36, "RestartAllContainers (KEP-5532) on by default", restart_pod_refused_below_136,
      core=True)(test_restart_pod_in_place)
needs(35, "container restartPolicyRules (KEP-5307)", job_rule_left_out_below_135,
      core=True)(test_restart_in_place_keeps_a_job)
