"""`reload-agent sync --all-namespaces` (docs/sync.md, "All namespaces")
against the API double (tests/lib/fakeapi.py): one pod watch across the
cluster (GET /api/v1/pods?watch=1), the ConfigMap and Secret watches of a
namespace only while it has pods that name objects, opened on its first
such pod and closed after its last; a namespace's watches opened again
nudge nobody for their initial events; at most --max-namespaces at once.
What the service did is read from the double's request record and its
list of open watches.
"""
from tests.lib.proc import check, wait_until
from tests.lib.syncsvc import Sync, launch, pod, put, requests, settle

ALL = ("--all-namespaces",)


def patched(fake):
    """[(namespace, pod, value)] of every pod PATCH, in order."""
    out = []
    for r in requests(fake):
        if r["method"] == "PATCH" and "/pods/" in r["path"]:
            parts = r["path"].split("/")  # /api/v1/namespaces/NS/pods/NAME
            out.append((parts[4], parts[6], r["body"]["metadata"]["annotations"][
                "reload-agent.io/sync"]))
    return out


def collections(fake):
    """The open collection watches: {(resource, namespace or None)}."""
    st, w = fake.ctl("GET", "/watches")
    check(st == 200, "GET /watches: %s" % st)
    return sorted((x["resource"], x["namespace"] or "*") for x in w if x["name"] is None)


def served(*nss):
    """The watches the service should hold: the pods of all, and the two of each ns."""
    return sorted([("pods", "*")] + [(r, ns) for ns in nss for r in ("configmaps", "secrets")])


def start(env, fake, *extra):
    s = Sync(env, fake, "one", *extra, scope=ALL)
    wait_until(s.leader, 15, "the service leads")
    return s


def two_namespaces(fake):
    """ConfigMap conf in shop and bank (the same name), pods naming it in both,
    a pod naming another object, a pod of a third namespace not injected."""
    for ns in ("shop", "bank"):
        put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": ns}, "data": {"k": "0"}})
        put(fake, "secrets", {"metadata": {"name": "s", "namespace": ns}, "data": {"k": "MA=="}})
    put(fake, "configmaps", {"metadata": {"name": "other", "namespace": "shop"}, "data": {}})
    put(fake, "pods", pod("web-1", "configmap/conf,secret/s", ns="shop"))
    put(fake, "pods", pod("web-2", "configmap/conf", ns="shop"))
    put(fake, "pods", pod("web-3", "configmap/other", ns="shop"))
    put(fake, "pods", pod("api-1", "configmap/conf", ns="bank"))
    put(fake, "pods", pod("plain", ns="quiet"))
    put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "quiet"}, "data": {}})


def test_sync_all_namespaces_nudges_each_namespace(env):
    """Pods in two namespaces, a ConfigMap of the same name in each: an edit
    of either PATCHes exactly the pods of its namespace that name it, once
    each, with KIND/NAME@RV; a namespace without injected pods costs no
    request."""
    fake = launch(env)
    two_namespaces(fake)
    s = start(env, fake)
    wait_until(lambda: collections(fake) == served("bank", "shop"), 15, "the watches")
    check(s.has("serving all namespaces"), "the serving line: %r" % s.lines[:5])
    settle(0.5)
    check(patched(fake) == [], "a PATCH without a change: %r" % patched(fake))
    rv = put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "shop"},
                                  "data": {"k": "1"}})
    wait_until(lambda: len(patched(fake)) == 2, 10, "the PATCHes of shop's web-1 and web-2")
    want = "configmap/conf@" + rv
    check(sorted(patched(fake)) == [("shop", "web-1", want), ("shop", "web-2", want)],
          "PATCHes: %r" % patched(fake))
    rv2 = put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "bank"},
                                   "data": {"k": "1"}})
    wait_until(lambda: len(patched(fake)) == 3, 10, "the PATCH of bank's api-1")
    check(patched(fake)[2] == ("bank", "api-1", "configmap/conf@" + rv2), "%r" % patched(fake))
    put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "quiet"}, "data": {"k": "1"}})
    settle(1.5)
    check(len(patched(fake)) == 3, "PATCHes: %r" % patched(fake))
    check(s.proc.poll() is None, "the service exited")
    check(s.stop() == 0, "exit status on SIGTERM")


def test_sync_all_namespaces_watches_follow_pods(env):
    """The pod watch is one, across the cluster (GET /api/v1/pods, metadata
    only, from 0); ConfigMaps and Secrets are watched in the namespaces with
    pods that name objects only, never across the cluster; the last pod of
    a namespace deleted, its two watches close and the others stay."""
    fake = launch(env)
    two_namespaces(fake)
    s = start(env, fake)
    wait_until(lambda: collections(fake) == served("bank", "shop"), 15, "the watches")
    for r in requests(fake):
        if r["query"].get("watch") != "1":
            continue
        path = r["path"]
        if path.endswith("/pods"):
            check(path == "/api/v1/pods", "a pod watch of one namespace: %r" % path)
            check("as=PartialObjectMetadata;" in (r.get("accept") or ""), "not metadata only")
        else:
            check(path.startswith("/api/v1/namespaces/shop/") or
                  path.startswith("/api/v1/namespaces/bank/"), "a watch elsewhere: %r" % path)
    fake.ctl("POST", "/object/delete", {"resource": "pods", "namespace": "bank", "name": "api-1"})
    wait_until(lambda: collections(fake) == served("shop"), 10, "bank's watches closed")
    check(s.has("namespace bank: no pod left"), "not logged: %r" % s.lines[-5:])
    fake.ctl("POST", "/object/delete", {"resource": "pods", "namespace": "shop", "name": "web-1"})
    settle(1.2)
    check(collections(fake) == served("shop"), "shop still has pods: %r" % collections(fake))
    # a pod whose annotation names nothing is no reason to watch
    put(fake, "pods", pod("lone", "", ns="bank"))
    settle(1.2)
    check(collections(fake) == served("shop"), "watches: %r" % collections(fake))
    s.stop()


def test_sync_all_namespaces_reopened_watch_is_a_baseline(env):
    """A namespace's watches closed with its last pod; its ConfigMap edited
    meanwhile; a new pod there opens them again from 0: the initial events
    (the ConfigMap at a version the service never saw) nudge nobody; the
    next edit nudges the new pod once."""
    fake = launch(env)
    put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "shop"}, "data": {"k": "0"}})
    put(fake, "pods", pod("web-1", "configmap/conf", ns="shop"))
    s = start(env, fake)
    wait_until(lambda: collections(fake) == served("shop"), 15, "shop's watches")
    fake.ctl("POST", "/object/delete", {"resource": "pods", "namespace": "shop", "name": "web-1"})
    wait_until(lambda: collections(fake) == served(), 10, "shop's watches closed")
    put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "shop"}, "data": {"k": "1"}})
    n_watches = len([r for r in requests(fake) if r["path"].endswith("/shop/configmaps")])
    put(fake, "pods", pod("web-2", "configmap/conf", ns="shop"))
    wait_until(lambda: collections(fake) == served("shop"), 10, "shop's watches again")
    again = [r for r in requests(fake) if r["path"].endswith("/shop/configmaps")][n_watches:]
    check(len(again) == 1 and again[0]["query"].get("resourceVersion") == "0",
          "not one watch from 0: %r" % [r["query"] for r in again])
    settle(1.5)
    check(patched(fake) == [], "the initial events nudged: %r" % patched(fake))
    rv = put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "shop"},
                                  "data": {"k": "2"}})
    wait_until(lambda: len(patched(fake)) == 1, 10, "the PATCH of web-2")
    settle(1)
    check(patched(fake) == [("shop", "web-2", "configmap/conf@" + rv)], "%r" % patched(fake))
    s.stop()


def test_sync_all_namespaces_limit(env):
    """--max-namespaces 1: the first namespace with pods is watched, the
    second is logged by name with the limit and not watched (no crash);
    once the first has no pod left, the second gets its watches and its
    changes are nudged."""
    fake = launch(env)
    for ns in ("alpha", "beta"):
        put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": ns}, "data": {"k": "0"}})
        put(fake, "pods", pod("web", "configmap/conf", ns=ns))
    s = start(env, fake, "--max-namespaces", "1")
    wait_until(lambda: s.has("namespace beta is not served"), 15, "the warning")
    line = [x for x in s.lines if "namespace beta is not served" in x][0]
    check("--max-namespaces 1" in line, "the limit is not named: %r" % line)
    wait_until(lambda: collections(fake) == served("alpha"), 10, "alpha's watches")
    put(fake, "pods", pod("web-2", "configmap/conf", ns="beta"))  # no second warning
    settle(1)
    check(len([x for x in s.lines if "beta is not served" in x]) == 1, "%r" % s.lines[-5:])
    fake.ctl("POST", "/object/delete", {"resource": "pods", "namespace": "alpha", "name": "web"})
    wait_until(lambda: collections(fake) == served("beta"), 10, "beta's watches")
    rv = put(fake, "configmaps", {"metadata": {"name": "conf", "namespace": "beta"},
                                  "data": {"k": "1"}})
    wait_until(lambda: len(patched(fake)) == 2, 10, "the PATCHes of beta's pods")
    check(sorted(patched(fake)) == [("beta", "web", "configmap/conf@" + rv),
                                    ("beta", "web-2", "configmap/conf@" + rv)],
          "%r" % patched(fake))
    check(s.proc.poll() is None, "the service exited")
    s.stop()


def test_sync_scope_usage_errors(env):
    """Exactly one of --namespaces and --all-namespaces, by name, exit 2,
    before any request; --max-namespaces only with --all-namespaces."""
    for args, want in (([], "--namespaces NS[,NS...] or --all-namespaces is required"),
                       (["--namespaces", "a", "--all-namespaces"],
                        "--namespaces and --all-namespaces exclude each other"),
                       (["--all-namespaces", "--namespaces", "a"],
                        "--namespaces and --all-namespaces exclude each other"),
                       (["--namespaces", "a", "--max-namespaces", "5"],
                        "--max-namespaces needs --all-namespaces"),
                       (["--all-namespaces", "--max-namespaces", "0"], "--max-namespaces"),
                       (["--all-namespaces", "--max-namespaces", "1025"], "--max-namespaces")):
        r = env.run([env.binary, "sync"] + args, timeout=10)
        err = r.stderr.decode()
        check(r.returncode == 2 and want in err, "%r: exit %d, %r" % (args, r.returncode, err))
