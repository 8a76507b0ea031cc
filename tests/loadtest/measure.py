"""What the load suite measures, apart from the scenarios themselves:
the agents' (and peers') memory and CPU read from /proc through
containerd's task list, API requests by verb from the apiserver's audit log,
and apply -> served polling of many pods at once.

Every wait is bounded; nothing here changes the cluster.
"""
import concurrent.futures
import os
import subprocess
import threading
import time

from tests.lib.cluster import http_text, rfc3339
from tests.lib.proc import poll

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Procs:
    """PIDs of containers, from containerd's task list (the node is this
    machine, so /proc/PID is the container's process)."""

    def __init__(self, cluster):
        self.ctr = cluster.env["CTR"]
        self.sock = cluster.env["CONTAINERD_SOCK"]

    def tasks(self):
        p = subprocess.run([self.ctr, "-a", self.sock, "-n", "k8s.io", "tasks", "ls"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60)
        out = {}
        for line in p.stdout.decode().splitlines()[1:]:
            f = line.split()
            if len(f) >= 3 and f[2] == "RUNNING":
                out[f[0]] = int(f[1])
        return out

    def container_pids(self, pods, container):
        """{pod name: pid} of the named container of each pod (running)."""
        tasks = self.tasks()
        out = {}
        for p in pods:
            for cs in p.get("status", {}).get("initContainerStatuses", []) + \
                    p.get("status", {}).get("containerStatuses", []):
                cid = (cs.get("containerID") or "").split("://")[-1]
                if cs["name"] == container and cid in tasks:
                    out[p["metadata"]["name"]] = tasks[cid]
        return out


def proc_sample(pid):
    """(VmRSS KiB, VmHWM KiB, CPU ms used so far) of pid, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            st = dict(line.split(":", 1) for line in f if ":" in line)
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) * 1000.0 / CLK_TCK
        return int(st["VmRSS"].split()[0]), int(st["VmHWM"].split()[0]), cpu
    except (OSError, KeyError, IndexError, ValueError):
        return None


def resources(pids):
    """Over {name: pid}: max VmRSS, max VmHWM (KiB), total CPU ms."""
    rss, hwm, cpu = [], [], 0.0
    for pid in pids.values():
        s = proc_sample(pid)
        if s:
            rss.append(s[0])
            hwm.append(s[1])
            cpu += s[2]
    return {"processes": len(rss), "rss_kib_max": max(rss) if rss else None,
            "hwm_kib_max": max(hwm) if hwm else None, "cpu_ms_total": round(cpu, 1)}


def api_requests(cluster, since, until, namespaces):
    """Requests by verb the ServiceAccounts of these namespaces made between
    since and until (Unix times), from the audit log (watches are not
    logged: the suite's audit policy leaves them out)."""
    prefixes = tuple("system:serviceaccount:%s:" % ns for ns in namespaces)
    evs = cluster.audit(since, lambda ev: ev.get("user", {}).get("username", "").startswith(prefixes)
                        and rfc3339(ev.get("stageTimestamp", "")) <= until)
    by = {}
    for ev in evs:
        by[ev.get("verb", "?")] = by.get(ev.get("verb", "?"), 0) + 1
    return by


def wait_served(targets, want, t0, timeout, interval=0.2):
    """Polls every (name, url) of targets, all at once, every interval
    seconds until it answers want (stripped). Returns {name: seconds after
    t0 it first did} and the names that never did within timeout. The load
    suite and the cluster benches time apply -> served with it."""
    got = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as ex:
        def step():
            left = [(n, u) for n, u in targets if n not in got]
            res = list(ex.map(lambda nu: (nu[0], http_text(nu[1], timeout=1.0)), left))
            now = time.time()
            for n, (st, body) in res:
                if st == 200 and body.strip() == want:
                    got[n] = now - t0
            return len(got) == len(targets)
        poll(step, timeout, interval)
    return got, [n for n, _ in targets if n not in got]


class Swaps:
    """When the kubelet swapped a pod's ConfigMap volume: a thread polls the
    volume's ..data link on the node (STATE/kubelet/pods/UID/volumes/...)
    every 50 ms and records (time, target) at each change, so a tool's
    latency splits into the kubelet's part and its own. stop() ends it."""

    def __init__(self, cluster, pod, volume):
        self.path = os.path.join(cluster.env["STATE"], "kubelet", "pods", pod["metadata"]["uid"], "volumes",
                                 "kubernetes.io~configmap", volume, "..data")
        self.seen = []
        self.done = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        last = None
        while not self.done.wait(0.05):
            try:
                cur = os.readlink(self.path)
            except OSError:
                continue
            if cur != last:
                if last is not None:
                    self.seen.append((time.time(), cur))
                last = cur

    def first_after(self, t0):
        """The time of the first swap after t0, or None."""
        return next((t for t, _ in list(self.seen) if t >= t0), None)

    def stop(self):
        self.done.set()
        self.t.join(5)
