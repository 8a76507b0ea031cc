#!/usr/bin/env python3
"""fakeapi.py - a fake Kubernetes API server (test double) for the agent's
Kubernetes tests, written from docs/kubernetes-api.md.

It serves the few routes the agent uses (docs/kubernetes-api.md, "Requests") over real TLS with a CA it
generates, checks the bearer token against the token file on every request,
applies the four PATCH content types with resourceVersion/generation rules,
validates Events, and can inject faults (error statuses, 429s, delays, dropped
connections, a closed listener). A plain-HTTP control API lets tests inspect
and steer it. Contract: tests/lib/fakeapi.md. Standard library + openssl CLI.

Usage: fakeapi.py --state DIR [--fixture NAME] [--pods N] [--namespace NS]
                  [--port 0] [--control-port 0] [--ipv6] [--exit-on-stdin-eof]

Tests can also import this file and use launch() (see the bottom).
"""
import argparse
import base64
import binascii
import bisect
import copy
import hmac
import http.client
import json
import os
import re
import secrets
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20
SA_USER = "system:serviceaccount:%s:default"
PLAIN_429 = "Too many requests, please try again later."

# (group, version, plural) -> (Kind, methods on an item, methods on the collection)
RESOURCES = {
    # the collection: a watch of every pod's metadata (the cluster sync service)
    ("", "v1", "pods"): ("Pod", {"GET", "PATCH"}, {"GET"}),
    # collection GET: list, or watch with ?watch=1 (fast sync; metadata only on request)
    ("", "v1", "configmaps"): ("ConfigMap", {"GET"}, {"GET"}),
    ("apps", "v1", "replicasets"): ("ReplicaSet", {"GET"}, set()),
    ("apps", "v1", "deployments"): ("Deployment", {"GET", "PATCH"}, set()),
    ("apps", "v1", "statefulsets"): ("StatefulSet", {"GET", "PATCH"}, set()),
    ("apps", "v1", "daemonsets"): ("DaemonSet", {"GET", "PATCH"}, set()),
    ("batch", "v1", "jobs"): ("Job", {"GET", "PATCH"}, set()),
    ("batch", "v1", "cronjobs"): ("CronJob", {"GET", "PATCH"}, set()),
    ("argoproj.io", "v1alpha1", "rollouts"): ("Rollout", {"GET", "PATCH"}, set()),
    ("", "v1", "events"): ("Event", set(), {"POST"}),
    ("events.k8s.io", "v1", "events"): ("Event", set(), {"POST"}),
    ("", "v1", "secrets"): ("Secret", {"GET"}, {"POST", "GET"}),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"):
        ("MutatingWebhookConfiguration", {"GET", "PATCH"}, set()),
    # staging's Lease: list/watch by name, PATCH (a merge patch with
    # metadata.resourceVersion is a compare-and-swap: 409 when it moved), POST
    ("coordination.k8s.io", "v1", "leases"): ("Lease", {"GET", "PATCH"}, {"GET", "POST"}),
}
# cluster-scoped resources: /apis/G/V/PLURAL/NAME, stored under namespace ""
CLUSTER_SCOPED = {"mutatingwebhookconfigurations"}
# namespaced collections also served across every namespace: GET /api/v1/PLURAL
# (a list or a watch; its route's namespace is None)
ALL_NAMESPACES = {"pods", "configmaps", "secrets"}
# resources without a status (a PATCH does not add one)
NO_STATUS = {"secrets", "configmaps", "mutatingwebhookconfigurations", "leases"}
# resources a watch can follow (their changes go to State.watch_log)
WATCHABLE = {"configmaps", "secrets", "leases", "pods"}
AS_META = "as=PartialObjectMetadata;"
AS_META_LIST = "as=PartialObjectMetadataList;"
AS_TABLE = "as=Table;"
# plural -> (group, version) for stored objects (events are kept apart)
OBJECT_GROUPS = {p: (g, v) for (g, v, p) in RESOURCES if p != "events"}

# GET /version: k8s.io/apimachinery/pkg/version.Info as the real server fills it
VERSION_INFO = {"major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36",
                "minCompatibilityMajor": "1", "minCompatibilityMinor": "35",
                "gitVersion": "v1.36.3", "gitCommit": "0" * 40, "gitTreeState": "clean",
                "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.26.8",
                "compiler": "gc", "platform": "linux/amd64"}

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
BUILTIN_TYPES = [JSONPATCH, MERGE, APPLY, STRATEGIC]
CR_TYPES = [JSONPATCH, MERGE, APPLY]

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
           415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
VERBS = {"GET": "get", "PATCH": "patch", "POST": "create", "PUT": "update", "DELETE": "delete"}
FAULT_KEYS = {"method", "path_regex", "status", "retry_after", "plain", "count", "delay_ms",
              "drop", "message"}
QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?"
                            r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ApiError(Exception):
    """An error answer: HTTP status and a Status object."""

    def __init__(self, code, message, details=None, reason=None):
        super().__init__(message)
        self.code = code
        self.status = status_obj(code, message, details, reason)


def status_obj(code, message, details=None, reason=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason or REASONS.get(code, "Unknown")}
    if details:
        s["details"] = details
    s["code"] = code
    return s


def qualified(plural, group):
    return plural + "." + group if group else plural


def kind_qualified(kind, group):
    return kind + "." + group if group else kind


def invalid(kind, group, plural, name, errors):
    """422 Invalid from a list of (field, reason, message) (apim NewInvalid)."""
    msgs = ["%s: %s" % (f, m) for f, _, m in errors]
    agg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    return ApiError(422, '%s "%s" is invalid: %s' % (kind_qualified(kind, group), name, agg),
                    {"name": name, "group": group, "kind": plural,
                     "causes": [{"reason": r, "message": m, "field": f} for f, r, m in errors]})


def not_found(plural, group, name):
    return ApiError(404, '%s "%s" not found' % (qualified(plural, group), name),
                    {"name": name, "group": group, "kind": plural})


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---- certificates ----

def _openssl(*args):
    r = subprocess.run(["openssl"] + list(args), capture_output=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit("fakeapi: openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace")))


def make_certs(d):
    """CA (ca.crt/ca.key), an unrelated CA (other-ca.*), ca-bundle.crt
    (unrelated + real) and server.crt/server.key for 127.0.0.1, ::1, localhost."""
    cfg = os.path.join(d, "openssl.cnf")
    with open(cfg, "w") as f:
        f.write("[req]\ndistinguished_name = dn\n[dn]\n")
    p = lambda n: os.path.join(d, n)  # noqa: E731

    def cert(name, cn, days, ext, signer=None):
        args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", p(name + ".key"), "-out", p(name + ".crt"), "-config", cfg,
                "-subj", "/CN=" + cn, "-days", days, "-set_serial", "0x" + secrets.token_hex(8),
                "-addext", "subjectKeyIdentifier=hash"]
        for e in ext:
            args += ["-addext", e]
        if signer:
            args += ["-CA", p(signer + ".crt"), "-CAkey", p(signer + ".key")]
        _openssl(*args)
    ca_ext = ("basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign")
    cert("ca", "fakeapi-ca", "3", ca_ext)
    cert("other-ca", "fakeapi-unrelated-ca", "3", ca_ext)
    cert("server", "localhost", "2", ("subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost",
                                      "basicConstraints=critical,CA:FALSE",
                                      "keyUsage=critical,digitalSignature,keyEncipherment",
                                      "extendedKeyUsage=serverAuth",
                                      "authorityKeyIdentifier=keyid"), signer="ca")
    with open(p("ca-bundle.crt"), "w") as out:
        for n in ("other-ca.crt", "ca.crt"):
            with open(p(n)) as f:
                out.write(f.read())


def write_atomic(path, data):
    tmp = "%s.tmp-%d-%d" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "w") as f:
        f.write(data)
    os.replace(tmp, path)


# ---- fixtures ----

class Fixtures:
    """Builds the owner-chain fixtures of docs/kubernetes-api.md ("What the test doubles implement")."""

    def __init__(self, state):
        self.st = state
        self.ns = state.ns

    def meta(self, name, labels=None, owner=None, annotations=None):
        m = {"name": name, "namespace": self.ns, "uid": str(uuid.uuid4()),
             "resourceVersion": self.st.next_rv(), "generation": 1,
             "creationTimestamp": now_rfc3339(), "labels": dict(labels or {}),
             "annotations": dict(annotations or {})}
        if owner is not None:
            m["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                     "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"],
                                     "controller": True, "blockOwnerDeletion": True}]
        return m

    @staticmethod
    def template(labels):
        return {"metadata": {"labels": dict(labels), "annotations": {}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}

    def add(self, plural, kind, api_version, meta, spec, status=None):
        obj = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec,
               "status": status or {}}
        self.st.objects[(plural, self.ns, meta["name"])] = obj
        return obj

    def workload(self, plural, kind, api_version, name, n, **spec_extra):
        labels = {"app": name}
        spec = {"selector": {"matchLabels": labels}, "template": self.template(labels)}
        if plural != "daemonsets":
            spec["replicas"] = n
        spec.update(spec_extra)
        return self.add(plural, kind, api_version, self.meta(name, labels), spec,
                        {"observedGeneration": 1})

    def replicaset(self, name, n, owner, labels):
        spec = {"replicas": n, "selector": {"matchLabels": labels},
                "template": copy.deepcopy(owner["spec"]["template"]) if owner else
                self.template(labels)}
        spec["template"]["metadata"]["labels"] = dict(labels)
        return self.add("replicasets", "ReplicaSet", "apps/v1",
                        self.meta(name, labels, owner), spec, {"replicas": n})

    def pod(self, name, owner, labels, template):
        meta = self.meta(name, labels, owner, template["metadata"].get("annotations"))
        spec = copy.deepcopy(template["spec"])
        spec.update({"serviceAccountName": "default", "nodeName": "node-1"})
        self.add("pods", "Pod", "v1", meta, spec, {"phase": "Running", "podIP": "10.0.0.10"})
        return name

    def pods(self, names, owner, labels, template, statefulset=False):
        return [self.pod(n, owner, dict(labels, **({"statefulset.kubernetes.io/pod-name": n}
                                                   if statefulset else {})), template)
                for n in names]

    def rs_chain(self, owner, n, rs_hash):
        labels = dict(owner["spec"]["selector"]["matchLabels"], **{"pod-template-hash": rs_hash})
        rs = self.replicaset("%s-%s" % (owner["metadata"]["name"], rs_hash), n, owner, labels)
        return self.pods(["%s-%d" % (rs["metadata"]["name"], i) for i in range(n)], rs, labels,
                         rs["spec"]["template"])

    def build(self, fixture, n):
        """Creates the objects; returns the pod names."""
        if fixture in ("deployment", "paused-deployment"):
            extra = {"strategy": {"type": "RollingUpdate"}}
            if fixture == "paused-deployment":
                extra["paused"] = True
            d = self.workload("deployments", "Deployment", "apps/v1", "web", n, **extra)
            return self.rs_chain(d, n, "5d8f7c9b4")
        if fixture == "rollout":
            r = self.workload("rollouts", "Rollout", "argoproj.io/v1alpha1", "web", n,
                              strategy={"canary": {}})
            return self.rs_chain(r, n, "6c7d8e9f5")
        if fixture in ("workloadref-rollout", "workloadref-other"):
            # Argo Rollouts' workloadRef: the Rollout has no template of its
            # own; it follows the referenced Deployment's (scaled to 0).
            d = self.workload("deployments", "Deployment", "apps/v1", "web-template", 0)
            ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-template",
                   "scaleDown": "never"}
            if fixture == "workloadref-other":
                ref = {"apiVersion": "v1", "kind": "PodTemplate", "name": "web-template"}
            r = self.workload("rollouts", "Rollout", "argoproj.io/v1alpha1", "web", n,
                              strategy={"canary": {}}, workloadRef=ref)
            r["spec"]["selector"] = copy.deepcopy(d["spec"]["selector"])
            r["spec"]["template"] = copy.deepcopy(d["spec"]["template"])
            labels = dict(d["spec"]["selector"]["matchLabels"], **{"pod-template-hash": "7d6c5b4a9"})
            rs = self.replicaset("web-7d6c5b4a9", n, r, labels)
            del r["spec"]["template"]
            return self.pods(["%s-%d" % (rs["metadata"]["name"], i) for i in range(n)], rs,
                             labels, rs["spec"]["template"])
        if fixture in ("statefulset", "ondelete-statefulset"):
            strategy = "OnDelete" if fixture.startswith("ondelete") else "RollingUpdate"
            s = self.workload("statefulsets", "StatefulSet", "apps/v1", "db", n,
                              serviceName="db", updateStrategy={"type": strategy})
            labels = {"app": "db", "controller-revision-hash": "db-7c9f8d6b5"}
            return self.pods(["db-%d" % i for i in range(n)], s, labels, s["spec"]["template"],
                             statefulset=True)
        if fixture in ("daemonset", "ondelete-daemonset"):
            strategy = "OnDelete" if fixture.startswith("ondelete") else "RollingUpdate"
            d = self.workload("daemonsets", "DaemonSet", "apps/v1", "agent", n,
                              updateStrategy={"type": strategy})
            d["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = "1"
            labels = {"app": "agent", "controller-revision-hash": "6f9b8c7d5"}
            return self.pods(["agent-%d" % i for i in range(n)], d, labels, d["spec"]["template"])
        if fixture in ("cronjob", "job"):
            cron = None
            name = "migrate"
            if fixture == "cronjob":
                labels = {"app": "nightly"}
                cron = self.add("cronjobs", "CronJob", "batch/v1", self.meta("nightly", labels),
                                {"schedule": "0 3 * * *", "concurrencyPolicy": "Forbid",
                                 "jobTemplate": {"spec": {"template": self.template(labels)}}})
                name = "nightly-123"
            labels = {"job-name": name}
            tpl = self.template(labels)
            tpl["spec"]["restartPolicy"] = "Never"
            job = self.add("jobs", "Job", "batch/v1", self.meta(name, labels, cron),
                           {"parallelism": n, "completions": n, "template": tpl},
                           {"active": n})
            return self.pods(["%s-%d" % (name, i) for i in range(n)], job, labels, tpl)
        if fixture == "orphan-rs":
            labels = {"app": "cache", "pod-template-hash": "6b5f4d7c8"}
            rs = self.replicaset("cache-6b5f4d7c8", n, None, labels)
            return self.pods(["%s-%d" % (rs["metadata"]["name"], i) for i in range(n)], rs, labels,
                             rs["spec"]["template"])
        if fixture == "bare-pod":
            return [self.pod("app", None, {"app": "app"}, self.template({"app": "app"}))]
        if fixture == "none":
            return []
        raise SystemExit("fakeapi: unknown --fixture %r" % fixture)


FIXTURES = ["deployment", "statefulset", "daemonset", "rollout", "cronjob", "job", "orphan-rs",
            "bare-pod", "paused-deployment", "ondelete-statefulset", "ondelete-daemonset",
            "workloadref-rollout", "workloadref-other", "none"]


# ---- patches ----

def merge_patch(target, patch):
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(400, "invalid JSON pointer %r: must start with /" % path)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(lst, tok, path, allow_end):
    if tok == "-" and allow_end:
        return len(lst)
    if not re.fullmatch(r"0|[1-9][0-9]*", tok) or int(tok) > len(lst) - (0 if allow_end else 1):
        raise ApiError(422, "the server rejected our request due to an error in our request: "
                       'invalid index %r in path "%s"' % (tok, path))
    return int(tok)


def json_patch(doc, ops):
    """RFC 6902 add/replace/remove/test (the fake does not implement move/copy)."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str) or "op" not in op:
            raise ApiError(400, "json patch operation needs \"op\" and \"path\": %s" % json.dumps(op))
        kind, path = op["op"], op["path"]
        if kind not in ("add", "replace", "remove", "test"):
            raise ApiError(422, "the server rejected our request due to an error in our request: "
                           "operation %r is not implemented by the fake API server" % kind)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(400, '%s operation at "%s" has no value' % (kind, path))
        toks = _pointer(path)
        if not toks:
            if kind == "test":
                if doc != op["value"]:
                    raise _jp_fail("testing value %s failed: test failed" % path)
                continue
            if kind == "remove" or not isinstance(op["value"], dict):
                raise ApiError(422, "the server rejected our request due to an error in our "
                               "request: cannot %s the document root" % kind)
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for t in toks[:-1]:
            if isinstance(parent, dict) and t in parent:
                parent = parent[t]
            elif isinstance(parent, list):
                parent = parent[_index(parent, t, path, False)]
            else:
                raise _jp_fail('%s operation does not apply: doc is missing path: "%s": '
                               'missing value' % (kind, path))
        last = toks[-1]
        if isinstance(parent, dict):
            if kind != "add" and last not in parent:
                raise _jp_fail('%s operation does not apply: doc is missing key: "%s": '
                               'missing value' % (kind, path))
            if kind == "remove":
                del parent[last]
            elif kind == "test":
                if parent[last] != op["value"]:
                    raise _jp_fail("testing value %s failed: test failed" % path)
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif isinstance(parent, list):
            i = _index(parent, last, path, kind == "add")
            if kind == "add":
                parent.insert(i, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[i] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[i]
            elif parent[i] != op["value"]:
                raise _jp_fail("testing value %s failed: test failed" % path)
        else:
            raise _jp_fail('%s operation does not apply: doc is missing path: "%s": '
                           'missing value' % (kind, path))
    return doc


def _jp_fail(msg):
    return ApiError(422, "the server rejected our request due to an error in our request: " + msg)


def template_of(obj):
    spec = obj.get("spec") or {}
    if "jobTemplate" in spec:
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return spec.get("template")


def template_annotations(obj):
    tpl = template_of(obj)
    return copy.deepcopy(((tpl or {}).get("metadata") or {}).get("annotations") or {})


# ---- state ----

class State:
    """Everything the fake knows, guarded by one lock."""

    def __init__(self, state_dir, ns):
        self.lock = threading.Lock()
        self.dir = state_dir
        self.ns = ns
        self.token_path = os.path.join(state_dir, "token")
        self.rv = 1000
        self.objects = {}   # (plural, ns, name) -> object
        self.history = {}   # (plural, ns, name) -> [template annotations per persisted change]
        self.events = []
        self.requests = []
        self.faults = []
        # watches (WATCHABLE resources): every change as (rv, type, plural, ns, name, obj)
        self.cond = threading.Condition(self.lock)
        self.watch_log = []
        self.watch_rvs = []     # the rvs of watch_log, ascending (for bisect)
        self.compacted = 0      # a watch from an older rv is 410 Gone
        self.gone_as = "event"  # how a too-old rv is answered: "event" (ERROR 410) or "status"
        # every control action, in order, as (action, rv when posted): an open
        # watch acts on each one posted since it opened (a log, not a slot: two
        # posted before the stream wakes are both acted on, e.g. bookmark then
        # end), between the events it sends as it was posted between the changes
        # (a drop posted before a change ends the stream before that change)
        self.watch_actions = []
        self.watch_hold = False  # POST /watch {"hold": true}: the streams send nothing
        self.open_watches = []  # dicts describing the open streams
        self.storms = {}        # (plural, ns, name) -> a storm spec (POST /storm): a watch fault
        self.version = dict(VERSION_INFO)  # what GET /version answers (POST /version sets it)

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def token(self):
        try:
            with open(self.token_path) as f:
                return f.read().strip()
        except OSError:
            return ""

    def store(self, plural, obj):
        key = (plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        kind = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        self.history.setdefault(key, []).append(template_annotations(obj))
        if plural in WATCHABLE:
            self.log_change(kind, plural, key[1], key[2], obj)

    def log_change(self, kind, plural, ns, name, obj):
        """Called with the lock held: a change open watches will send."""
        self.watch_log.append((int(obj["metadata"]["resourceVersion"]), kind, plural, ns, name,
                               copy.deepcopy(obj)))
        self.watch_rvs.append(self.watch_log[-1][0])
        self.cond.notify_all()

    def delete(self, plural, ns, name):
        obj = self.objects.pop((plural, ns, name), None)
        if obj is None:
            return None
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self.next_rv()
        if plural in WATCHABLE:
            self.log_change("DELETED", plural, ns, name, obj)
        return obj

    def take_fault(self, method, path):
        """The first fault matching the request (its count is used up), or None."""
        for f in self.faults:
            if f.get("method") and f["method"].upper() != method:
                continue
            if f.get("path_regex") and not re.search(f["path_regex"], path):
                continue
            if "count" in f:
                f["count"] -= 1
                if f["count"] <= 0:
                    self.faults.remove(f)
            return dict(f)
        return None


def parse_route(path):
    """(group, version, plural, ns, name or None) for an API path, or None; ns is None for a
    namespaced collection across every namespace (/api/v1/pods)."""
    parts = path.strip("/").split("/")
    if len(parts) == 3 and parts[:2] == ["api", "v1"] and parts[2] in ALL_NAMESPACES:
        return "", "v1", parts[2], None, None
    if len(parts) in (5, 6) and parts[:2] == ["api", "v1"] and parts[2] == "namespaces":
        group, version, rest = "", "v1", parts[3:]
    elif len(parts) in (6, 7) and parts[0] == "apis" and parts[3] == "namespaces":
        group, version, rest = parts[1], parts[2], parts[4:]
    elif len(parts) in (4, 5) and parts[0] == "apis" and parts[3] in CLUSTER_SCOPED:
        group, version, rest = parts[1], parts[2], [""] + parts[3:]
    else:
        return None
    ns, plural = urllib.parse.unquote(rest[0]), rest[1]
    name = urllib.parse.unquote(rest[2]) if len(rest) == 3 else None
    if (group, version, plural) not in RESOURCES or name == "" or \
            (not ns) != (plural in CLUSTER_SCOPED):
        return None
    return group, version, plural, ns, name


def generation_changed(plural, old, new):
    """metadata.generation (docs/kubernetes-api.md, "Requests"): Deployment bumps on spec or metadata.annotations; others on spec;
    a MutatingWebhookConfiguration on its webhooks."""
    if plural == "mutatingwebhookconfigurations":
        return old.get("webhooks") != new.get("webhooks")
    if old.get("spec") != new.get("spec"):
        return True
    return plural == "deployments" and \
        old["metadata"].get("annotations") != new["metadata"].get("annotations")


class Api:
    """The API logic, independent of HTTP: returns (status, object) or raises ApiError."""

    def __init__(self, state):
        self.st = state

    def get(self, route):
        group, _, plural, ns, name = route
        with self.st.lock:
            obj = self.st.objects.get((plural, ns, name))
            if obj is None:
                raise not_found(plural, group, name)
            return 200, copy.deepcopy(obj)

    def patch(self, route, ctype, query, body, user_agent):
        group, version, plural, ns, name = route
        kind = RESOURCES[(group, version, plural)][0]
        dry = query.get("dryRun")
        if dry is not None and dry != "All":
            raise ApiError(400, 'invalid dryRun value %r: the only valid value is "All"' % dry)
        manager = query.get("fieldManager")
        if manager is not None and (not 0 < len(manager) <= 128 or not manager.isprintable()):
            raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid '
                           'value: %s: must be 1-128 printable characters' % json.dumps(manager))
        if query.get("force") is not None and ctype != APPLY:
            raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may '
                           'not be specified for non-apply patch')
        accepted = CR_TYPES if group == "argoproj.io" else BUILTIN_TYPES
        if ctype not in accepted:
            raise ApiError(415, "the body of the request was in an unknown format - accepted "
                           "media types include: " + ", ".join(accepted))
        try:
            patch = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            what = "error decoding YAML (the fake accepts JSON only)" if ctype == APPLY else \
                "error decoding patch"
            raise ApiError(400, "%s: %s" % (what, e))
        if ctype != JSONPATCH and not isinstance(patch, dict):
            raise ApiError(400, "the patch body must be a JSON object")
        if ctype == APPLY:
            if not manager:
                raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                               'Required value: is required for apply patch')
            for f, got in (("apiVersion", patch.get("apiVersion")), ("kind", patch.get("kind")),
                           ("metadata.name", (patch.get("metadata") or {}).get("name"))):
                if not got:
                    raise ApiError(400, "apply patch is missing %s" % f)
        with self.st.lock:
            old = self.st.objects.get((plural, ns, name))
            if old is None:
                raise not_found(plural, group, name)
            new = json_patch(old, patch) if ctype == JSONPATCH else merge_patch(old, patch)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise ApiError(422, "the server rejected our request due to an error in our "
                               "request: the patched object has no metadata")
            if ctype == APPLY and (new.get("apiVersion") != old["apiVersion"] or
                                   new.get("kind") != old["kind"]):
                raise ApiError(400, "apply patch apiVersion/kind %s/%s do not match the object "
                               "(%s/%s)" % (new.get("apiVersion"), new.get("kind"),
                                            old["apiVersion"], old["kind"]))
            if new["metadata"].get("name") != name:
                raise ApiError(400, "the name of the object (%s) does not match the name on the "
                               "URL (%s)" % (new["metadata"].get("name"), name))
            for k in ("namespace", "uid", "creationTimestamp", "generation", "managedFields"):
                if k in old["metadata"]:
                    new["metadata"][k] = copy.deepcopy(old["metadata"][k])
            if plural not in NO_STATUS:  # the main resource ignores status
                new["status"] = copy.deepcopy(old.get("status", {}))
            if plural == "mutatingwebhookconfigurations":
                check_ca_bundles(new)
            rv = new["metadata"].get("resourceVersion")
            if rv is not None and rv != old["metadata"]["resourceVersion"]:
                raise ApiError(409, 'Operation cannot be fulfilled on %s "%s": the object has been '
                               'modified; please apply your changes to the latest version and '
                               'try again' % (qualified(plural, group), name),
                               {"name": name, "group": group, "kind": plural})
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if plural == "jobs" and template_of(new) != template_of(old):
                raise invalid(kind, group, plural, name, [
                    ("spec.template", "FieldValueInvalid",
                     "Invalid value: %s: field is immutable" % json.dumps(template_of(new)))])
            if new == old:  # a no-op patch writes nothing
                return 200, new
            if generation_changed(plural, old, new):
                new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1
            if plural == "daemonsets" and template_of(new) != template_of(old):
                ann = new["metadata"].setdefault("annotations", {})
                ann["deprecated.daemonset.template.generation"] = str(
                    int(ann.get("deprecated.daemonset.template.generation", "0")) + 1)
            if not manager:
                manager = (user_agent or "unknown").split("/")[0] or "unknown"
            entry = {"manager": manager, "operation": "Apply" if ctype == APPLY else "Update",
                     "apiVersion": old["apiVersion"]}
            mf = new["metadata"].setdefault("managedFields", [])
            if entry not in mf:
                mf.append(entry)
            if dry is None:
                new["metadata"]["resourceVersion"] = self.st.next_rv()
                self.st.store(plural, copy.deepcopy(new))
            return 200, new

    def create_secret(self, route, ctype, query, body, user_agent):
        return _create_secret(self, route, ctype, query, body, user_agent)

    def create_lease(self, route, ctype, query, body, user_agent):
        """POST …/leases: 201 with the Lease, 409 AlreadyExists, 400/415/422 for
        malformed ones (staging's agent creates its Lease when it may)."""
        group, version, plural, ns, _ = route
        if ctype not in ("application/json", ""):
            raise ApiError(415, "the body of the request was in an unknown format - accepted "
                           "media types include: application/json, application/yaml")
        try:
            lease = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "error decoding Lease: %s" % e)
        if not isinstance(lease, dict) or not isinstance(lease.get("metadata", {}), dict):
            raise ApiError(400, "the Lease must be a JSON object with an object metadata")
        for f, want in (("apiVersion", group + "/" + version), ("kind", "Lease")):
            if lease.get(f) not in (None, want):
                raise ApiError(400, "the %s in the data (%s) does not match the expected %s (%s)"
                               % (f, lease.get(f), f, want))
        meta = lease.setdefault("metadata", {})
        if meta.get("namespace", "") not in ("", ns):
            raise ApiError(400, "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        name = meta.get("name") or ""
        if not name or not DNS_SUBDOMAIN.match(name) or len(name) > 253:
            raise invalid("Lease", group, plural, name, [
                ("metadata.name", "FieldValueInvalid" if name else "FieldValueRequired",
                 "Invalid value: %s" % json.dumps(name))])
        manager = query.get("fieldManager") or (user_agent or "unknown").split("/")[0] or "unknown"
        with self.st.lock:
            if (plural, ns, name) in self.st.objects:
                raise ApiError(409, 'leases.%s "%s" already exists' % (group, name),
                               {"name": name, "group": group, "kind": plural}, "AlreadyExists")
            lease["apiVersion"], lease["kind"] = group + "/" + version, "Lease"
            lease.setdefault("spec", {})
            meta.update({"namespace": ns, "uid": str(uuid.uuid4()),
                         "creationTimestamp": now_rfc3339(), "resourceVersion": self.st.next_rv(),
                         "managedFields": [{"manager": manager, "operation": "Update",
                                            "apiVersion": group + "/" + version}]})
            self.st.store(plural, copy.deepcopy(lease))
        return 201, lease

    def create_event(self, route, ctype, body):
        group, version, _, ns, _ = route
        if ctype not in ("application/json", ""):
            raise ApiError(415, "the body of the request was in an unknown format - accepted "
                           "media types include: application/json, application/yaml")
        try:
            ev = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "error decoding event: %s" % e)
        if not isinstance(ev, dict):
            raise ApiError(400, "the event must be a JSON object")
        meta = ev.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object")
        if meta.get("namespace", "") not in ("", ns):
            raise ApiError(400, "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        meta["namespace"] = ns
        if not meta.get("name") and not meta.get("generateName"):
            raise ApiError(400, "Name parameter required.")
        if not meta.get("name"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        errs = (validate_core_event(ev) if group == "" else validate_events_v1(ev))
        if errs:
            raise invalid("Event", group, "events", meta["name"], errs)
        with self.st.lock:
            if any(e["metadata"]["name"] == meta["name"] and e["metadata"]["namespace"] == ns
                   for e in self.st.events):
                raise ApiError(409, 'events%s "%s" already exists' %
                               ("." + group if group else "", meta["name"]),
                               {"name": meta["name"], "group": group, "kind": "events"},
                               "AlreadyExists")
            ev["apiVersion"] = "v1" if group == "" else group + "/" + version
            ev["kind"] = "Event"
            meta.update({"uid": str(uuid.uuid4()), "resourceVersion": self.st.next_rv(),
                         "creationTimestamp": now_rfc3339()})
            self.st.events.append(copy.deepcopy(ev))
        return 201, ev


def _b64_error(v):
    """None if v is standard base64 (as a []byte field must be), else the
    decode error."""
    if not isinstance(v, str):
        return "expected a base64 string, got %s" % type(v).__name__
    try:
        base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as e:
        return "illegal base64 data: %s" % e
    return None


def check_ca_bundles(mwc):
    """A caBundle is []byte: the real server cannot decode a patched
    configuration whose caBundle is not base64 (400)."""
    for i, h in enumerate(mwc.get("webhooks") or []):
        ca = ((h or {}).get("clientConfig") or {}).get("caBundle")
        if ca is not None and _b64_error(ca):
            raise ApiError(400, "MutatingWebhookConfiguration in version \"v1\" cannot be handled "
                           "as a MutatingWebhookConfiguration: webhooks[%d].clientConfig.caBundle:"
                           " %s" % (i, _b64_error(ca)))


def _create_secret(api, route, ctype, query, body, user_agent):
    """POST /api/v1/namespaces/NS/secrets: 201, 409 AlreadyExists ("Errors"),
    400/415/422 as the real server answers malformed ones."""
    _, _, plural, ns, _ = route
    if ctype not in ("application/json", ""):
        raise ApiError(415, "the body of the request was in an unknown format - accepted "
                       "media types include: application/json, application/yaml")
    dry = query.get("dryRun")
    if dry is not None and dry != "All":
        raise ApiError(400, 'invalid dryRun value %r: the only valid value is "All"' % dry)
    try:
        sec = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ApiError(400, "error decoding Secret: %s" % e)
    if not isinstance(sec, dict) or not isinstance(sec.get("metadata", {}), dict):
        raise ApiError(400, "the Secret must be a JSON object with an object metadata")
    for f, want in (("apiVersion", "v1"), ("kind", "Secret")):
        if sec.get(f) not in (None, want):
            raise ApiError(400, "the %s in the data (%s) does not match the expected %s (%s)" %
                           (f, sec.get(f), f, want))
    meta = sec.setdefault("metadata", {})
    if meta.get("namespace", "") not in ("", ns):
        raise ApiError(400, "the namespace of the provided object does not match the namespace "
                       "sent on the request")
    meta["namespace"] = ns
    name = meta.get("name") or ""
    if not name and meta.get("generateName"):
        name = meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
    errs = []
    if not name:
        errs.append(("metadata.name", "FieldValueRequired",
                     "Required value: name or generateName is required"))
    elif not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        errs.append(("metadata.name", "FieldValueInvalid", "Invalid value: %s: a lowercase RFC "
                     "1123 subdomain must consist of lower case alphanumeric characters, '-' "
                     "or '.'" % json.dumps(name)))
    data = sec.get("data") or {}
    if not isinstance(data, dict):
        raise ApiError(400, "Secret in version \"v1\" cannot be handled as a Secret: data must "
                       "be an object")
    for k, v in data.items():
        err = _b64_error(v)
        if err:
            raise ApiError(400, "Secret in version \"v1\" cannot be handled as a Secret: "
                           "data[%s]: %s" % (k, err))
    for k, v in (sec.pop("stringData", None) or {}).items():  # stringData wins, as on a server
        data[k] = base64.b64encode(str(v).encode()).decode()
    sec["data"] = data
    sec.setdefault("type", "Opaque")
    if sec["type"] == "kubernetes.io/tls":
        errs += [("data[%s]" % k, "FieldValueRequired", "Required value") for k in
                 ("tls.crt", "tls.key") if k not in data]
    if errs:
        raise invalid("Secret", "", plural, name, errs)
    manager = query.get("fieldManager") or (user_agent or "unknown").split("/")[0] or "unknown"
    with api.st.lock:
        if (plural, ns, name) in api.st.objects:
            raise ApiError(409, 'secrets "%s" already exists' % name,
                           {"name": name, "group": "", "kind": "secrets"}, "AlreadyExists")
        sec["apiVersion"], sec["kind"] = "v1", "Secret"
        meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339(),
                     "managedFields": [{"manager": manager, "operation": "Update",
                                        "apiVersion": "v1"}]})
        if dry is None:
            meta["resourceVersion"] = api.st.next_rv()
            api.st.store(plural, copy.deepcopy(sec))
    return 201, sec


def _str_field(ev, key):
    v = ev.get(key)
    return v if isinstance(v, str) else ("" if v is None else json.dumps(v))


def _event_type_errors(ev):
    t = ev.get("type")
    if t not in ("Normal", "Warning"):
        return [("type", "FieldValueNotSupported", 'Unsupported value: %s: supported values: '
                 '"Normal", "Warning"' % json.dumps(t))]
    return []


def _required_limited(ev, fields):
    errs = []
    for f, limit in fields:
        v = _str_field(ev, f)
        if not v:
            errs.append((f, "FieldValueRequired", "Required value"))
        elif len(v) > limit:
            errs.append((f, "FieldValueInvalid", 'Invalid value: "": can have at most %d '
                         'characters' % limit))
    return errs


def _namespace_errors(ns):
    if DNS_SUBDOMAIN.match(ns) and len(ns) <= 253:
        return []
    return [("metadata.namespace", "FieldValueInvalid", "Invalid value: %s: must be a lowercase "
             "RFC 1123 subdomain" % json.dumps(ns))]


def validate_core_event(ev):
    """core/v1 (legacy) rules of docs/kubernetes-api.md, "Events", plus type Normal|Warning. [(field, reason, msg)]."""
    ns = ev["metadata"]["namespace"]
    inv = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
    ins = inv.get("namespace") or ""
    errs = []
    mismatch = ("involvedObject.namespace", "FieldValueInvalid",
                "Invalid value: %s: does not match event.namespace" % json.dumps(ins))
    if not ev.get("eventTime"):
        if (ins and ns != ins) or (not ins and ns not in ("", "default")):
            errs.append(mismatch)
    else:
        if not ins and ns not in ("default", "kube-system"):
            errs.append(mismatch)
        errs += _required_limited(ev, [("reportingComponent", 316), ("reportingInstance", 128),
                                       ("action", 128), ("reason", 128)])
        errs += _reporter_and_text_errors(ev, "reportingComponent", "message")
    return errs + _event_type_errors(ev) + _namespace_errors(ns)


def _reporter_and_text_errors(ev, reporter, text):
    """The reporter field must be a qualified name, the text at most 1024
    characters (both Event APIs, under their own field names)."""
    errs = []
    rc = _str_field(ev, reporter)
    if rc and not QUALIFIED_NAME.match(rc):
        errs.append((reporter, "FieldValueInvalid",
                     "Invalid value: %s: must be a qualified name" % json.dumps(rc)))
    if len(_str_field(ev, text)) > 1024:
        errs.append((text, "FieldValueInvalid",
                     'Invalid value: "": can have at most 1024 characters'))
    return errs


def validate_events_v1(ev):
    """events.k8s.io/v1 (strict) rules (docs/kubernetes-api.md, "Events")."""
    errs = _required_limited(ev, [("eventTime", 64), ("reportingController", 316),
                                  ("reportingInstance", 128), ("action", 128), ("reason", 128)])
    errs += _reporter_and_text_errors(ev, "reportingController", "note")
    for f in ("deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
              "deprecatedCount"):
        if ev.get(f):
            errs.append((f, "FieldValueInvalid", "Invalid value: must not be set"))
    if not DNS_SUBDOMAIN.match(ev["metadata"]["name"]):
        errs.append(("metadata.name", "FieldValueInvalid", "Invalid value: %s: must be a "
                     "lowercase RFC 1123 subdomain" % json.dumps(ev["metadata"]["name"])))
    return errs + _event_type_errors(ev) + _namespace_errors(ev["metadata"]["namespace"])


def fault_answer(f, method, route, ns):
    """(status, headers, body bytes, content type) for a status fault."""
    code = f["status"]
    headers = {}
    if f.get("retry_after") is not None:
        headers["Retry-After"] = str(f["retry_after"])
    if f.get("plain"):
        if code == 429:
            headers.setdefault("Retry-After", "1")
        text = f.get("message") or (PLAIN_429 if code == 429 else http.client.responses.get(
            code, "error"))
        return code, headers, (text + "\n").encode(), "text/plain; charset=utf-8"
    group, _, plural, rns, name = route or ("", "", "", ns, "")
    kind = RESOURCES.get(route[:3], ("",))[0] if route else ""
    name = name or ""
    det = {"name": name, "group": group, "kind": plural} if route else None
    obj = qualified(plural, group) + (' "%s"' % name if name else "")
    if code == 403:
        scope = 'in the namespace "%s"' % rns if rns else "at the cluster scope"
        msg = '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
            obj, SA_USER % ns, VERBS.get(method, method.lower()), plural, group, scope)
    elif code == 404:
        msg = '%s not found' % obj
    elif code == 409:
        msg = 'Operation cannot be fulfilled on %s: the object has been modified; please apply ' \
              'your changes to the latest version and try again' % obj
    elif code == 422:
        field = "spec.template.metadata.annotations"
        cause = 'Invalid value: "injected": injected fault'
        msg = '%s "%s" is invalid: %s: %s' % (kind_qualified(kind, group), name, field, cause)
        det = dict(det or {}, causes=[{"reason": "FieldValueInvalid", "message": cause,
                                       "field": field}])
    elif code == 429:
        msg = PLAIN_429
        det = dict(det or {}, retryAfterSeconds=int(f.get("retry_after") or 1))
        headers.setdefault("Retry-After", str(det["retryAfterSeconds"]))
    elif code == 500:
        msg = "Internal error occurred: injected fault"
        det = dict(det or {}, causes=[{"message": "injected fault"}])
    elif code == 503:
        msg = "the server is currently unable to handle the request"
    else:
        msg = "injected fault"
    if f.get("message"):
        msg = f["message"]
    if "Retry-After" in headers and code != 429:
        det = dict(det or {}, retryAfterSeconds=int(headers["Retry-After"]))
    body = json.dumps(status_obj(code, msg, det), separators=(",", ":")).encode()
    return code, headers, body, "application/json"


def validate_fault(f):
    if not isinstance(f, dict):
        raise ValueError("a fault must be a JSON object")
    unknown = set(f) - FAULT_KEYS
    if unknown:
        raise ValueError("unknown fault key(s): %s" % ", ".join(sorted(unknown)))
    if "status" in f and (not isinstance(f["status"], int) or not 400 <= f["status"] <= 599):
        raise ValueError("fault status must be an integer 400-599")
    if "status" not in f and not f.get("drop") and not f.get("delay_ms"):
        raise ValueError("a fault needs status, drop or delay_ms")
    if f.get("drop") and "status" in f:
        raise ValueError("a fault cannot both drop and answer with a status")
    if "count" in f and (not isinstance(f["count"], int) or f["count"] < 1):
        raise ValueError("fault count must be a positive integer")
    for k in ("delay_ms", "retry_after"):
        if k in f and (not isinstance(f[k], int) or f[k] < 0):
            raise ValueError("fault %s must be a non-negative integer" % k)
    if f.get("path_regex"):
        re.compile(f["path_regex"])
    return f


# ---- storms: a fault mode for every watch of one object (POST /storm) ----

STORM_MODES = {
    "gone_event": "every watch: an ERROR 410 event (after the initial events of a watch from "
                  "resourceVersion 0), then the end",
    "gone_status": "every watch: the HTTP status 410",
    "end_after_bookmark": "every watch: a BOOKMARK at the current resourceVersion, then a clean end",
    "end_after_event": "every watch: the object changes (a new resourceVersion), its MODIFIED "
                       "event, then a clean end",
    "churn": "the object changes every interval_ms (default 20), watches or not",
    "garbage": "every watch: a line that is not JSON first",
    "other_name": "every watch: a MODIFIED event for the object `other` (default someone-else) "
                  "with a new resourceVersion first",
    "rvs": "every watch: MODIFIED events of the object with the resourceVersions of `rvs` in "
           "turn, one every interval_ms (default 50), while it is open",
    "trickle_head": "every watch: the response head is written one byte every interval_ms "
                    "(default 1000)",
}
STORM_KEYS = {"resource", "name", "mode", "interval_ms", "other", "rvs"}


def validate_storm(d):
    if not isinstance(d, dict):
        raise ValueError("a storm must be a JSON object")
    unknown = set(d) - STORM_KEYS
    if unknown:
        raise ValueError("unknown storm key(s): %s" % ", ".join(sorted(unknown)))
    if d.get("resource") not in WATCHABLE or not isinstance(d.get("name"), str) or \
            not DNS_SUBDOMAIN.match(d["name"]):
        raise ValueError('need {"resource": "configmaps"|"secrets", "name": NAME, "mode": ...}')
    if d.get("mode") is not None and d["mode"] not in STORM_MODES:
        raise ValueError("unknown storm mode %r (one of %s)" % (d["mode"], ", ".join(STORM_MODES)))
    iv = d.get("interval_ms", 0)
    if not isinstance(iv, int) or iv < 0:
        raise ValueError("storm interval_ms must be a non-negative integer")
    if d.get("mode") == "rvs" and (not isinstance(d.get("rvs"), list) or not d["rvs"] or
                                   not all(isinstance(v, str) and v for v in d["rvs"])):
        raise ValueError("storm mode rvs needs rvs: a non-empty list of strings")
    if "other" in d and (not isinstance(d["other"], str) or not DNS_SUBDOMAIN.match(d["other"])):
        raise ValueError("storm other must be an object name")
    return d


def bump_object(st, plural, ns, name):
    """Called with the lock held: the object gets a new resourceVersion (a
    real change, its MODIFIED event goes to the watches); False if absent."""
    obj = st.objects.get((plural, ns, name))
    if obj is None:
        return False
    obj = copy.deepcopy(obj)
    ann = obj["metadata"].setdefault("annotations", {})
    ann["fakeapi/bump"] = str(int(ann.get("fakeapi/bump", "0")) + 1)
    obj["metadata"]["resourceVersion"] = st.next_rv()
    st.store(plural, obj)
    return True


def churn(st, storm, plural, ns, name):
    """The churn storm's thread: a change every interval_ms until the storm goes."""
    every = (storm.get("interval_ms") or 20) / 1000.0
    while not storm["stop"].wait(every):
        with st.lock:
            bump_object(st, plural, ns, name)


# ---- HTTP ----

def read_body(h):
    """The request body (Content-Length or chunked), or raises ApiError (413,
    and the connection is closed since the rest of the body is unread)."""
    if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
        out = b""
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline().strip():
                    pass
                return out
            out += h.rfile.read(size)
            h.rfile.readline()
            if len(out) > MAX_BODY:
                h.close_connection = True
                raise ApiError(413, "request entity too large")
    n = int(h.headers.get("Content-Length") or 0)
    if n > MAX_BODY:
        h.close_connection = True
        raise ApiError(413, "request entity too large")
    return h.rfile.read(n) if n > 0 else b""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300  # idle keep-alive connections are closed after this long

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, body, ctype="application/json", headers=None):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def answer_json(self, code, obj, headers=None):
        self.answer(code, json.dumps(obj, separators=(",", ":")).encode(), headers=headers)

    do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = lambda self: self.dispatch()


class ApiHandler(Handler):
    def dispatch(self):
        app = self.server.app
        st = app.state
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True)
                 .items()}
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            body = read_body(self)
            err = None
        except (ApiError, ValueError) as e:
            self.close_connection = True  # the rest of the body is unread
            body, err = b"", e if isinstance(e, ApiError) else ApiError(400, "bad body: %s" % e)
        auth = self.headers.get("Authorization") or ""
        tok = st.token()
        authorized = bool(tok) and hmac.compare_digest(auth.encode(), ("Bearer " + tok).encode())
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        rec = {"time": time.time(), "method": self.command, "path": path, "query": query,
               "content_type": self.headers.get("Content-Type"), "body": parsed,
               "user_agent": self.headers.get("User-Agent"), "authorized": authorized,
               "status": None, "fault": False}
        with st.lock:
            st.requests.append(rec)
        if err is not None:
            return self.reply_status(rec, err)
        if not authorized:
            return self.reply_status(rec, ApiError(401, "Unauthorized"))
        with st.lock:
            fault = st.take_fault(self.command, path)
        route = parse_route(path)
        if fault:
            rec["fault"] = True
            if fault.get("delay_ms"):
                time.sleep(fault["delay_ms"] / 1000.0)
            if fault.get("drop"):
                rec["status"] = "dropped"
                self.close_connection = True
                try:
                    socket.socket.shutdown(self.connection, socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if "status" in fault:
                code, hdrs, data, ct = fault_answer(fault, self.command, route, st.ns)
                rec["status"] = code
                return self.answer(code, data, ct, hdrs)
        rec["accept"] = self.headers.get("Accept")
        try:
            code, obj = self.route(app.api, route, query, ctype, body)
        except ApiError as e:
            return self.reply_status(rec, e)
        if code is None:  # a watch stream, answered as it went
            rec["status"] = 200
            return
        rec["status"] = code
        self.answer_json(code, obj)

    def route(self, api, route, query, ctype, body):
        if route is None and self.path.split("?")[0] == "/version":
            if self.command != "GET":
                raise ApiError(405, "the server does not allow this method on the requested "
                               "resource")
            with app_state(self).lock:
                return 200, copy.deepcopy(app_state(self).version)
        if route is None:
            raise ApiError(404, "the server could not find the requested resource")
        _, item_methods, coll_methods = RESOURCES[route[:3]]
        allowed = item_methods if route[4] is not None else coll_methods
        if route[3] is None:  # across every namespace: a list or a watch only
            allowed = {"GET"}
        if self.command not in allowed:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if self.command == "GET" and route[4] is None:
            return self.list_or_watch(app_state(self), route, query)
        if self.command == "GET":
            return api.get(route)
        if self.command == "PATCH":
            return api.patch(route, ctype, query, body, self.headers.get("User-Agent"))
        if route[2] == "secrets":
            return api.create_secret(route, ctype, query, body, self.headers.get("User-Agent"))
        if route[2] == "leases":
            return api.create_lease(route, ctype, query, body, self.headers.get("User-Agent"))
        return api.create_event(route, ctype, body)

    def reply_status(self, rec, e):
        rec["status"] = e.code
        self.answer_json(e.code, e.status)

    # ---- list and watch (fast sync) ----

    def list_or_watch(self, st, route, query):
        _, _, plural, ns, _ = route
        accept = self.headers.get("Accept") or ""
        sel = query.get("fieldSelector")
        name = None
        if sel is not None:
            if not sel.startswith("metadata.name="):
                raise ApiError(400, 'fieldSelector %r: the fake supports only metadata.name=NAME' % sel)
            name = sel[len("metadata.name="):]
        table = AS_TABLE in accept
        if table and query.get("includeObject") != "None":
            raise ApiError(400, "the fake answers a Table only with includeObject=None")
        if query.get("watch") in ("1", "true"):
            return self.watch(st, plural, ns, name, query,
                              "table" if table else AS_META in accept)
        meta = AS_META_LIST in accept
        with st.lock:
            items = [copy.deepcopy(o) for (p, n, nm), o in sorted(st.objects.items())
                     if p == plural and ns in (None, n) and (name is None or nm == name)]
            rv = str(st.rv)
        if table:
            t = as_table(None, rv)
            t["rows"] = [table_row(o) for o in items]
            return 200, t
        if meta:
            return 200, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                         "metadata": {"resourceVersion": rv}, "items": [as_meta(o) for o in items]}
        kind = RESOURCES[route[:3]][0]
        return 200, {"kind": kind + "List", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
                     "items": items}

    def send_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def send_event(self, kind, obj):
        self.send_chunk(json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode()
                        + b"\n")

    def watch(self, st, plural, ns, name, query, meta):
        """A chunked stream of events after resourceVersion, until timeoutSeconds, a control
        action (drop, bookmark, gone, garbage, end) or the client leaves; from resourceVersion
        0 (or none) the objects first, as ADDED events. The object's storm (POST /storm), if
        any, shapes it. Answers itself; returns (None, None)."""
        try:
            since = int(query.get("resourceVersion") or "0")
        except ValueError:
            raise ApiError(400, "invalid resourceVersion %r" % query.get("resourceVersion"))
        timeout = min(float(query.get("timeoutSeconds") or 1800), 3600)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        with st.lock:
            storm = st.storms.get((plural, ns, name)) if name else None
            mode = storm["mode"] if storm else None
            if mode == "gone_status":
                raise ApiError(410, "too old resource version: %d (%d)" % (since, st.rv),
                               reason="Expired")
            too_old = since != 0 and since < st.compacted
            if too_old and st.gone_as == "status":
                raise ApiError(410, "too old resource version: %d (%d)" % (since, st.compacted),
                               reason="Expired")
            initial = []
            if since == 0:  # "Start at Any": the current state as ADDED events, then changes
                initial = [copy.deepcopy(o) for (p, n, nm), o in sorted(st.objects.items())
                           if p == plural and ns in (None, n) and (name is None or nm == name)]
                since = st.rv
            if mode == "end_after_event":
                bump_object(st, plural, ns, name)
            w = {"resource": plural, "namespace": ns, "name": name, "since": since, "meta": meta,
                 "bookmarks": bookmarks, "timeout": timeout, "started": time.time()}
            st.open_watches.append(w)
            gen = len(st.watch_actions)  # control actions from now on reach this stream
        try:
            self.close_connection = True
            self.start_stream(storm)
            for obj in initial:
                self.send_event("ADDED", shaped(obj, meta))
            if too_old:
                self.send_event("ERROR", status_obj(410, "too old resource version: %d (%d)" % (
                    since, st.compacted), reason="Expired"))
            elif not self.storm_prelude(st, storm, ns, meta, bookmarks):
                self.stream(st, (plural, ns, name), meta, bookmarks, storm, (since, gen),
                            time.monotonic() + timeout)
            self.send_chunk(b"")
        except (OSError, ssl.SSLError):
            pass
        finally:
            with st.lock:
                st.open_watches.remove(w)
        return None, None

    def start_stream(self, storm):
        """The 200 head of a watch; a trickle_head storm writes it one byte at a time (the
        rest at once when the storm is removed meanwhile)."""
        if not storm or storm["mode"] != "trickle_head":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            return
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        every = (storm.get("interval_ms") or 1000) / 1000.0
        for i in range(len(head)):
            self.wfile.write(head[i:i + 1])
            self.wfile.flush()
            if storm["stop"].wait(every):
                self.wfile.write(head[i + 1:])
                self.wfile.flush()
                return

    def storm_prelude(self, st, storm, ns, meta, bookmarks):
        """What a storm sends first; True when the stream ends there."""
        mode = storm["mode"] if storm else None
        if mode == "gone_event":
            self.send_event("ERROR", status_obj(410, "too old resource version", reason="Expired"))
            return True
        if mode == "end_after_bookmark":
            with st.lock:
                cur = st.rv
            if bookmarks:
                self.send_event("BOOKMARK", bookmark_obj(meta, cur))
            return True
        if mode == "garbage":
            self.send_chunk(b"{this is not json\n")
        if mode == "other_name":
            with st.lock:
                orv = st.next_rv()
            other = {"kind": "ConfigMap", "apiVersion": "v1",
                     "metadata": {"name": storm.get("other") or "someone-else", "namespace": ns,
                                  "resourceVersion": orv}}
            self.send_event("MODIFIED", shaped(other, meta))
        return False

    def client_gone(self):
        """A watch's client sends nothing after its request: the end of the connection (a TLS
        close_notify, then EOF) means it left, so the stream ends and leaves GET /watches within
        a second, not at its next write. Readable bytes that are not the end (part of a TLS
        record, anything a client may send) are not: a make test under load once ended live
        streams here when any readable byte counted."""
        conn = self.connection
        try:
            if not select.select([conn], [], [], 0)[0]:
                return False
            timeout = conn.gettimeout()
            conn.setblocking(False)
            try:
                return conn.recv(1) == b""
            finally:
                conn.settimeout(timeout)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return False
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionError):
            return True
        except (OSError, ValueError):
            return True

    def stream(self, st, key, meta, bookmarks, storm, since_gen, deadline):
        """The events after since until the deadline, a control action (after generation
        gen) or the storm's end."""
        plural, ns, name = key
        sent, gen = since_gen
        mode = storm["mode"] if storm else None
        every = ((storm or {}).get("interval_ms") or 50) / 1000.0
        next_at, n = time.monotonic(), 0
        while True:
            if storm and storm["stop"].is_set():
                mode = None  # the storm was removed: a plain watch from here on
            if self.client_gone():
                return
            with st.lock:
                todo = [e for e in st.watch_log[bisect.bisect_right(st.watch_rvs, sent):]
                        if e[2] == plural and ns in (None, e[3]) and (name is None or e[4] == name)]
                acts = st.watch_actions[gen:]
                now = time.monotonic()
                wait = min(deadline - now, 1.0, next_at - now if mode == "rvs" else 1.0)
                if wait > 0 and (st.watch_hold or not (todo or acts)):
                    st.cond.wait(wait)  # while held, what comes is sent when the hold ends
                    continue
                gen += len(acts)
                obj = copy.deepcopy(st.objects.get((plural, ns, name)))
            for action, at in acts:
                sent = self.send_events([e for e in todo if sent < e[0] <= at], meta, sent)
                if self.act(action, meta, bookmarks, at):
                    return
                if action == "bookmark" and bookmarks:
                    sent = max(sent, at)
            sent = self.send_events([e for e in todo if e[0] > sent], meta, sent)
            if mode == "rvs" and obj is not None and time.monotonic() >= next_at:
                obj["metadata"]["resourceVersion"] = storm["rvs"][n % len(storm["rvs"])]
                self.send_event("MODIFIED", shaped(obj, meta))
                n, next_at = n + 1, next_at + every
            if mode == "end_after_event" and todo:
                return
            if time.monotonic() >= deadline:
                return

    def send_events(self, events, meta, sent):
        """Sends the watch_log entries events; returns the rv of the last one sent (sent if none)."""
        for rv, kind, _, _, _, o in events:
            self.send_event(kind, shaped(o, meta))
            sent = rv
        return sent

    def act(self, action, meta, bookmarks, at):
        """A control action on this stream, posted at resourceVersion at; True when it ends the
        stream (a drop raises, as the connection is shut without an end)."""
        if action == "drop":
            socket.socket.shutdown(self.connection, socket.SHUT_RDWR)
            raise OSError("dropped")
        if action == "bookmark" and bookmarks:
            self.send_event("BOOKMARK", bookmark_obj(meta, at))
        if action == "gone":
            self.send_event("ERROR", status_obj(410, "too old resource version", reason="Expired"))
            return True
        if action == "garbage":
            self.send_chunk(b"{this is not json\n")
        return action == "end"


def shaped(obj, meta):
    """obj as a watch of that form sends it: a Table, metadata only, or whole."""
    return as_table(obj) if meta == "table" else as_meta(obj) if meta else obj


def bookmark_obj(meta, cur):
    """A BOOKMARK's object at resourceVersion cur, as the real server sends it."""
    bm = {"kind": "PartialObjectMetadata" if meta else "ConfigMap",
          "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": str(cur)}}
    if meta == "table":
        bm = dict(as_table(None, str(cur)), rows=[
            {"cells": ["", "", 0, "<unknown>"], "object": dict(bm, kind="PartialObjectMetadata")}])
    return bm


def app_state(handler):
    return handler.server.app.state


TABLE_COLUMNS = [{"name": n, "type": t, "format": "", "description": "", "priority": 0}
                 for n, t in (("Name", "string"), ("Type", "string"), ("Data", "string"),
                              ("Age", "string"))]


def table_row(obj):
    """A Table row with includeObject=None: the columns, no object."""
    return {"cells": [obj["metadata"]["name"], obj.get("type", ""), len(obj.get("data") or {}),
                      "1s"], "object": None}


def as_table(obj, rv=None):
    """A Table of obj (or an empty one) without objects; its resourceVersion
    is the object's, as the real server's watch events carry it."""
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
         "metadata": {"resourceVersion": rv or obj["metadata"]["resourceVersion"]},
         "columnDefinitions": TABLE_COLUMNS, "rows": []}
    if obj is not None:
        t["rows"] = [table_row(obj)]
    return t


def as_meta(obj):
    """The PartialObjectMetadata of obj: its metadata only, never data."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": copy.deepcopy(obj.get("metadata") or {})}


class ControlHandler(Handler):
    def dispatch(self):
        app = self.server.app
        st = app.state
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        try:
            body = read_body(self)
            data = json.loads(body) if body else None
            code, out = self.route(app, st, self.command, url.path, q, data)
        except ApiError as e:
            code, out = e.code, {"error": e.status["message"]}
        except (ValueError, re.error, KeyError, TypeError) as e:
            code, out = 400, {"error": str(e)}
        except OSError as e:  # e.g. the API port was taken while the listener was down
            code, out = 500, {"error": str(e)}
        self.answer_json(code, out)

    def route(self, app, st, method, path, q, data):
        if method == "GET" and path == "/requests":
            with st.lock:
                return 200, copy.deepcopy(st.requests)
        if method == "POST" and path == "/requests/clear":
            with st.lock:
                st.requests.clear()
            return 200, {}
        if method == "GET" and path in ("/object", "/history"):
            plural, name = q.get("resource"), q.get("name")
            if plural not in OBJECT_GROUPS or not name:
                raise ValueError("need ?resource=<one of %s>&name=NAME" %
                                 ", ".join(sorted(OBJECT_GROUPS)))
            key = (plural, "" if plural in CLUSTER_SCOPED else q.get("namespace", st.ns), name)
            with st.lock:
                if key not in st.objects:
                    raise not_found(plural, OBJECT_GROUPS[plural][0], name)
                return 200, copy.deepcopy(st.objects[key] if path == "/object"
                                          else st.history.get(key, []))
        if method == "POST" and path == "/object":
            return 200, self.put_object(st, data)
        if method == "POST" and path == "/objects":  # many at once: [{"resource", "object"}]
            if not isinstance(data, list):
                raise ValueError('need a list of {"resource": ..., "object": {...}}')
            return 200, {"resourceVersions": [self.put_object(st, d)["metadata"]["resourceVersion"]
                                              for d in data]}
        if method == "POST" and path == "/version":
            # the whole object GET /version answers from now on (any JSON object)
            if not isinstance(data, dict):
                raise ValueError("need a JSON object (the version.Info GET /version answers)")
            with st.lock:
                st.version = data
            return 200, data
        if method == "POST" and path == "/object/delete":
            if not isinstance(data, dict) or data.get("resource") not in OBJECT_GROUPS:
                raise ValueError('need {"resource": ..., "name": ...}')
            with st.lock:
                obj = st.delete(data["resource"], data.get("namespace", st.ns), data.get("name"))
            if obj is None:
                raise not_found(data["resource"], "", data.get("name"))
            return 200, obj
        if method == "GET" and path == "/watches":
            with st.lock:
                return 200, copy.deepcopy(st.open_watches)
        if method == "POST" and path == "/watch":
            # {"action": drop|bookmark|gone|garbage|end} acts on every open watch;
            # {"compact": true} makes older resourceVersions 410 Gone;
            # {"gone_as": "event"|"status"} says how a too-old rv is answered
            if not isinstance(data, dict):
                raise ValueError("need a JSON object")
            with st.lock:
                if data.get("action") is not None:
                    if data["action"] not in ("drop", "bookmark", "gone", "garbage", "end"):
                        raise ValueError("unknown watch action %r" % data["action"])
                    st.watch_actions.append((data["action"], st.rv))
                if data.get("compact"):
                    st.compacted = st.rv
                if data.get("hold") is not None:
                    st.watch_hold = bool(data["hold"])
                if data.get("gone_as") is not None:
                    if data["gone_as"] not in ("event", "status"):
                        raise ValueError("gone_as must be event or status")
                    st.gone_as = data["gone_as"]
                st.cond.notify_all()
                return 200, {"open": len(st.open_watches), "compacted": st.compacted}
        if method == "POST" and path == "/storm":
            return 200, self.set_storm(st, validate_storm(data))
        if method == "GET" and path == "/changes":
            with st.lock:
                return 200, [{"rv": str(e[0]), "type": e[1]} for e in st.watch_log
                             if e[2] == q.get("resource") and e[4] == q.get("name") and
                             e[3] == q.get("namespace", st.ns)]
        if method == "GET" and path == "/storms":
            with st.lock:
                return 200, [{k: v for k, v in d.items() if k != "stop"}
                             for d in st.storms.values()]
        if method == "GET" and path == "/events":
            with st.lock:
                return 200, copy.deepcopy(st.events)
        if method == "GET" and path == "/faults":
            with st.lock:
                return 200, copy.deepcopy(st.faults)
        if method == "POST" and path == "/faults":
            faults = [validate_fault(dict(f)) for f in (data if isinstance(data, list) else [data])]
            with st.lock:
                st.faults.extend(faults)
                return 200, copy.deepcopy(st.faults)
        if method == "POST" and path == "/faults/clear":
            with st.lock:
                st.faults.clear()
            return 200, {}
        if method == "POST" and path == "/listener":
            if not isinstance(data, dict) or not isinstance(data.get("up"), bool):
                raise ValueError('need {"up": true|false}')
            app.set_listener(data["up"])
            return 200, {"up": data["up"], "port": app.port}
        if method == "POST" and path == "/token":
            if not isinstance(data, dict) or not isinstance(data.get("token"), str):
                raise ValueError('need {"token": "..."}')
            write_atomic(st.token_path, data["token"])
            return 200, {}
        raise ApiError(404, "no control route %s %s" % (method, path))

    @staticmethod
    def set_storm(st, d):
        """Sets (or with mode null removes) the storm of one object."""
        key = (d["resource"], st.ns, d["name"])
        with st.lock:
            old = st.storms.pop(key, None)
            if old:
                old["stop"].set()
            if d.get("mode") is None:
                return {"storms": len(st.storms)}
            storm = dict(d, stop=threading.Event())
            st.storms[key] = storm
        if d["mode"] == "churn":
            threading.Thread(target=churn, args=(st, storm) + key, daemon=True).start()
        return {"storms": len(st.storms)}

    @staticmethod
    def put_object(st, data):
        if not isinstance(data, dict) or data.get("resource") not in OBJECT_GROUPS or \
                not isinstance(data.get("object"), dict):
            raise ValueError('need {"resource": <one of %s>, "object": {...}}' %
                             ", ".join(sorted(OBJECT_GROUPS)))
        obj = copy.deepcopy(data["object"])
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError("object.metadata.name is required")
        if data["resource"] in CLUSTER_SCOPED:
            meta.pop("namespace", None)
        else:
            meta.setdefault("namespace", st.ns)
        meta.setdefault("uid", str(uuid.uuid4()))
        if data["resource"] != "secrets":  # Secrets have no generation
            meta.setdefault("generation", 1)
        meta.setdefault("creationTimestamp", now_rfc3339())
        with st.lock:
            meta["resourceVersion"] = st.next_rv()
            st.store(data["resource"], obj)
        return copy.deepcopy(obj)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, addr, handler, app, tls=None, family=socket.AF_INET):
        self.address_family = family
        self.app = app
        self.tls = tls  # set for the API listeners, whose connections App tracks
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        # headers and body are written separately: without this, Nagle + delayed ACK add 40 ms
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            request.settimeout(10)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                request.close()
                return
            with self.app.conn_lock:
                self.app.conns.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.app.conn_lock:
                self.app.conns.discard(request)
            try:
                request.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass  # clients that vanish mid-request (and dropped connections) are normal here


class App:
    def __init__(self, a):
        os.makedirs(a.state, exist_ok=True)
        make_certs(a.state)
        self.state = State(a.state, a.namespace)
        write_atomic(self.state.token_path, secrets.token_urlsafe(32))
        self.pods = Fixtures(self.state).build(a.fixture, a.pods)
        self.api = Api(self.state)
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.minimum_version = ssl.TLSVersion.TLSv1_2
        self.tls.load_cert_chain(os.path.join(a.state, "server.crt"),
                                 os.path.join(a.state, "server.key"))
        self.ipv6 = a.ipv6
        self.conns = set()
        self.conn_lock = threading.Lock()
        self.listener_lock = threading.Lock()
        self.port = a.port
        self.api_servers = []
        self.set_listener(True)
        self.control = Server(("127.0.0.1", a.control_port), ControlHandler, self)
        threading.Thread(target=self.control.serve_forever, args=(0.05,), daemon=True).start()

    def _bind(self):
        for _ in range(20):  # with --port 0 and --ipv6, ::1 may already use the v4 port
            v4 = Server(("127.0.0.1", self.port), ApiHandler, self, self.tls)
            if not self.ipv6:
                return [v4]
            try:
                return [v4, Server(("::1", v4.server_address[1]), ApiHandler, self, self.tls,
                                   socket.AF_INET6)]
            except OSError:
                v4.server_close()
                if self.port:
                    raise
        raise SystemExit("fakeapi: could not bind 127.0.0.1 and ::1 on one port")

    def set_listener(self, up):
        """Opens the API listener(s) on the same port, or closes them together with
        every open API connection (clients then see refused connections)."""
        with self.listener_lock:
            if up and not self.api_servers:
                self.api_servers = self._bind()
                self.port = self.api_servers[0].server_address[1]
                for s in self.api_servers:
                    threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True).start()
            elif not up and self.api_servers:
                for s in self.api_servers:
                    s.shutdown()
                    s.server_close()
                self.api_servers = []
                with self.conn_lock:
                    for c in list(self.conns):
                        try:
                            socket.socket.shutdown(c, socket.SHUT_RDWR)
                        except OSError:
                            pass

    def info(self):
        d = self.state.dir
        return {"port": self.port, "control": self.control.server_address[1],
                "ca": os.path.join(d, "ca.crt"), "ca_bundle": os.path.join(d, "ca-bundle.crt"),
                "token_file": self.state.token_path, "namespace": self.state.ns,
                "pods": self.pods}


def main():
    ap = argparse.ArgumentParser(description="fake Kubernetes API server (test double)")
    ap.add_argument("--state", required=True, help="directory for certificates and the token")
    ap.add_argument("--fixture", default="deployment", choices=FIXTURES)
    ap.add_argument("--pods", type=int, default=1)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--ipv6", action="store_true", help="also serve the API on ::1")
    ap.add_argument("--exit-on-stdin-eof", action="store_true",
                    help="exit when stdin closes (so the fake cannot outlive its test)")
    a = ap.parse_args()
    a.state = os.path.abspath(a.state)
    if a.pods < 1:
        ap.error("--pods must be at least 1")
    if not DNS_SUBDOMAIN.match(a.namespace):
        ap.error("--namespace must be a lowercase RFC 1123 name")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        app = App(a)
    except OSError as e:
        raise SystemExit("fakeapi: cannot start: %s" % e)
    print(json.dumps(app.info()), flush=True)
    if a.exit_on_stdin_eof:
        def watch_stdin():
            while os.read(0, 4096):  # unbuffered: no lock held at interpreter exit
                pass
            stop.set()
        threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait()  # signal handlers interrupt the wait (POSIX)
    app.set_listener(False)
    app.control.shutdown()
    app.control.server_close()
    return 0


# ---- for tests: start the fake as a process and talk to it ----

class Fake:
    """A running fakeapi.py process (from launch())."""

    def __init__(self, proc, info, state_dir):
        self.proc = proc
        self.info = info
        self.dir = state_dir
        self.port = info["port"]
        self.url = "https://127.0.0.1:%d" % self.port

    def token(self):
        with open(self.info["token_file"]) as f:
            return f.read().strip()

    def ctl(self, method, path, body=None, timeout=10):
        """A control API call; returns (status, parsed JSON)."""
        c = http.client.HTTPConnection("127.0.0.1", self.info["control"], timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            c.request(method, path, data, {"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()

    def tls_context(self, cafile=None):
        return ssl.create_default_context(cafile=cafile or self.info["ca"])

    def api(self, method, path, body=None, ctype=None, token=None, host="127.0.0.1",
            timeout=10, cafile=None):
        """One HTTPS API request (CA-verified, bearer token from the file unless
        given). Returns (status, headers dict with lower-case names, body:
        parsed JSON or text)."""
        c = http.client.HTTPSConnection(host, self.port, timeout=timeout,
                                        context=self.tls_context(cafile))
        try:
            h = {"Accept": "application/json",
                 "Authorization": "Bearer " + (self.token() if token is None else token)}
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                h["Content-Type"] = ctype or "application/json"
            c.request(method, path, data, h)
            r = c.getresponse()
            raw = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
            return r.status, hdrs, parsed
        finally:
            c.close()

    def stop(self, timeout=10):
        """SIGTERM, wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def launch(state_dir, fixture="deployment", pods=1, namespace="default", ipv6=False,
           spawn=subprocess.Popen, timeout=30):
    """Starts fakeapi.py (exits when the returned Fake's stdin pipe closes, i.e.
    with the test) and waits for its JSON line. spawn: e.g. lib.Env.spawn, so
    the test environment stops it."""
    cmd = [sys.executable, os.path.abspath(__file__), "--state", state_dir, "--fixture", fixture,
           "--pods", str(pods), "--namespace", namespace, "--exit-on-stdin-eof"]
    if ipv6:
        cmd.append("--ipv6")
    proc = spawn(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            proc.wait(5)
            raise RuntimeError("fakeapi did not start (exit %s, output %r)" % (proc.returncode, line))
        if select.select([proc.stdout], [], [], min(left, 0.5))[0]:
            ch = os.read(proc.stdout.fileno(), 4096)
            if not ch:
                proc.wait(5)
                continue
            line += ch
    return Fake(proc, json.loads(line), state_dir)


if __name__ == "__main__":
    sys.exit(main())
