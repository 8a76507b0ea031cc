"""Events on the real apiserver: the injector's warnings (here: a subPath
mount, which never updates) reach `kubectl get events` through the agent,
although the pod was created by a controller (admission warnings go to the
controller, never to the user); a reload is a Normal Reloaded Event."""
from tests.lib import apps
from tests.lib.cluster import grant_role, wait_until
from tests.lib.proc import check


def pod_events(env, pod, reason):
    return [e for e in env.events() if e.get("reason") == reason
            and e.get("involvedObject", {}).get("name") == pod]


def test_events_and_subpath_warning(env):
    env.c.ensure_webhook()
    grant_role(env)  # "events create" is in the Role
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.configmap("motd", {"motd": "hello\n"}))
    ann = apps.agent_annotations(action="signal", process="nginx", events="true")
    env.apply(apps.nginx_workload(
        "Deployment", "web", ann,
        extra_volumes=[{"name": "motd", "configMap": {"name": "motd"}}],
        extra_mounts=[{"name": "motd", "mountPath": "/etc/motd", "subPath": "motd"}]))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name = pod["metadata"]["name"]
    warn = wait_until(lambda: pod_events(env, name, "InjectionWarning"), 60,
                      "the InjectionWarning Event on the pod")
    env.log("kubectl get events: %s %s: %s" % (warn[0]["type"], warn[0]["reason"], warn[0]["message"]))
    check(warn[0]["type"] == "Warning" and "subPath" in warn[0]["message"] and "motd" in warn[0]["message"],
          "the Event does not carry the subPath warning: %r" % warn[0])
    out = env.kubectl("get", "events", "--field-selector", "involvedObject.name=" + name)
    check("InjectionWarning" in out and "subPath" in out, "kubectl get events does not show it:\n" + out)

    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v2")}))
    ok = wait_until(lambda: pod_events(env, name, "Reloaded"), 180, "the Reloaded Event")
    check(ok[0]["type"] == "Normal", "Reloaded: %r" % ok[0])
    env.log("kubectl get events: %s %s: %s" % (ok[0]["type"], ok[0]["reason"], ok[0]["message"]))


test_events_and_subpath_warning.timeout = 600
