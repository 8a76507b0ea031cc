"""Manifests the e2e scenarios, the load suite and the cluster benches
apply: stock nginx (localhost/e2e-nginx:1,
Debian's nginx-light, master as root) serving one ConfigMap key, in any
workload kind, with the agent's annotations. Plain YAML text, as a user
would write it; nothing here talks to the cluster."""
import json

NGINX_IMAGE = "localhost/e2e-nginx:1"
PORT = 8080


def site_conf(body):
    """An nginx server block that answers every GET with body."""
    return 'server { listen %d; location / { return 200 "%s\\n"; } }\n' % (PORT, body)


def configmap(name, data):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                       "data": data}, indent=1) + "\n"


def nginx_workload(kind, name, annotations, replicas=1, cm="site", mount="/etc/nginx/conf.d",
                   env_from=None, extra_volumes=(), extra_mounts=(), pod_spec=None, container=None):
    """A workload of kind Deployment|StatefulSet|DaemonSet|Pod running stock
    nginx with ConfigMap cm mounted at mount; annotations go on the pod
    template (or the Pod). env_from names a ConfigMap read through envFrom."""
    c = {"name": "nginx", "image": NGINX_IMAGE, "imagePullPolicy": "Never",
         "ports": [{"containerPort": PORT}],
         "volumeMounts": [{"name": "site", "mountPath": mount}] + list(extra_mounts),
         "readinessProbe": {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 2}}
    if env_from:
        c["envFrom"] = [{"configMapRef": {"name": env_from}}]
    c.update(container or {})
    spec = {"containers": [c], "volumes": [{"name": "site", "configMap": {"name": cm}}] + list(extra_volumes),
            "terminationGracePeriodSeconds": 5}
    spec.update(pod_spec or {})
    meta = {"labels": {"app": name}, "annotations": dict(annotations)}
    if kind == "Pod":
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta, name=name), "spec": spec}
        return json.dumps(obj, indent=1) + "\n"
    wspec = {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": meta, "spec": spec}}
    if kind in ("Deployment", "StatefulSet"):
        wspec["replicas"] = replicas
    if kind == "StatefulSet":
        wspec["serviceName"] = name
        wspec["podManagementPolicy"] = "Parallel"
    if kind == "Deployment":
        wspec["strategy"] = {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}
    obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": wspec}
    return json.dumps(obj, indent=1) + "\n"


def agent_annotations(**kw):
    """reload-agent.io/ annotations from keyword arguments (a_b -> a-b);
    inject "true" and a JSON log format for the tests to read."""
    a = {"reload-agent.io/inject": "true", "reload-agent.io/log-format": "json"}
    for k, v in kw.items():
        a["reload-agent.io/" + k.replace("_", "-")] = v
    return a


# ---- pods the restart actions act on (written by hand, or left to the injector) ----

CODE = 88  # the agent's exit code that asks the kubelet for RestartAllContainers
RULES = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [CODE]}}]
AGENT_IMAGE = "reload-agent:0.1.0"


def sidecar(args, rules=True, mounts=()):
    """The agent as a native sidecar written by hand (args after `run`),
    hardened as the injector writes it, with the site and podinfo mounts;
    rules: the restart-pod rule on its exit code CODE."""
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
    ConfigMap, an init container that counts its runs, and the agent (None:
    the injector adds it)."""
    init = {"name": "init", "image": NGINX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", "date +%s >> /runs/init"],
            "volumeMounts": [{"name": "runs", "mountPath": "/runs"}]}
    app = {"name": "nginx", "image": NGINX_IMAGE, "imagePullPolicy": "Never",
           "ports": [{"containerPort": PORT}],
           "envFrom": [{"configMapRef": {"name": "env"}}],
           "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d"},
                            {"name": "runs", "mountPath": "/runs"}],
           "readinessProbe": {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 2}}
    spec = {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 5,
            "initContainers": [init] + ([agent] if agent else []), "containers": [app],
            "volumes": [{"name": "site", "configMap": {"name": "site"}},
                        {"name": "runs", "emptyDir": {}}]}
    if agent:
        spec["volumes"] += [{"name": "env", "configMap": {"name": "env"}},
                            {"name": "podinfo", "downwardAPI": {"items": [
                                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]
    return {"metadata": {"labels": {"app": "web"}, "annotations": dict(annotations or {})}, "spec": spec}


def restart_pod_annotations():
    """What asks the injector for restart-pod: every change of the site and
    the env ConfigMaps restarts the pod in place, 5 s after it."""
    return agent_annotations(action="restart-pod", env_action="restart-pod", restart_delay="5s", resync="0")
