#!/usr/bin/env python3
"""make loadtest: the load suite on the real cluster (tests/cluster/).

Takes the one cluster (the e2e lock), builds and imports the peers' images
(peers.sh), runs the scenarios of scenarios.py one after another (each in
namespaces of its own, bounded in time), and writes results.json and
results.md under build/loadtest/<UTC time>/; prints the table.

With --old REF (make loadtest OLD=REF) it also builds the agent image of
that git ref and runs the A/B scenarios (AB) once for each build, the old
one named per pod by the injector's sidecar-image annotation (the sidecar's
arguments are the current injector's, so REF must accept them), and checks
the thresholds below: the same actions, latency not worse beyond a floor,
memory not worse beyond a floor.

Usage: run.py --binary build/reload-agent [-k SUBSTRING[,SUBSTRING...]] [--old REF] [--out DIR]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import lib  # noqa: E402
import measure  # noqa: E402
import run as e2e_run  # noqa: E402
import scenarios  # noqa: E402

ORDER = ["s1_burst", "s2_fanout", "s3_cardinality", "s4_noop", "s5_churn", "s6_restarts", "s7_api_pressure",
         "s8_large", "s9_kinds", "s10_mixed", "s12_min_interval", "s13_references", "s_fleet", "s_peers"]

# Peers that could not be built or run here, with the exact reason (docs/performance.md).
UNAVAILABLE = {
    "stakater/Reloader": "the Go module proxy this machine reaches serves no version of github.com/stakater/Reloader "
                         "(403 'This module version is not available' for every version tried: v0.0.100-v0.0.160, "
                         "v1.0.0-v1.0.150, v1.1.0-v1.4.12; the version list itself is refused)",
}


AB = ["s1_burst", "s2_fanout", "s8_large"]
# An A/B pair fails when the current build needs more than this: latency is
# the kubelet's (a minute, with seconds of jitter between pods and runs), so
# its floor is wide; memory is the agent's own.
AB_LATENCY = (1.25, 10.0)   # p50 <= old * 1.25 + 10 s
AB_RSS = (1.2, 512)          # max RSS <= old * 1.2 + 512 KiB


def selected(k, name):
    """-k: comma-separated substrings; a scenario runs when one matches."""
    return any(part in name for part in k.split(",")) if k else True


def old_image(c, ref):
    """Builds the agent image of git ref REF; returns its tag, imported."""
    sha = subprocess.run(["git", "-C", lib.REPO, "rev-parse", "--short=12", ref], stdout=subprocess.PIPE,
                         check=True, timeout=30).stdout.decode().strip()
    tag = "localhost/reload-agent:old-" + sha
    wt = "/tmp/ra-old-" + sha
    if subprocess.run(["podman", "image", "exists", tag]).returncode != 0:
        subprocess.run(["git", "-C", lib.REPO, "worktree", "add", "--detach", wt, sha], check=True, timeout=60)
        try:
            env = dict(os.environ, CONTAINERS_CONF=os.path.join(lib.REPO, "scripts/containers.conf"))
            subprocess.run(["podman", "build", "-q", "--network", "host", "--build-arg",
                            "BASE=localhost/debian-minbase:bookworm", "--build-arg", "GIT_COMMIT=" + sha,
                            "-t", tag, "-f", os.path.join(wt, "Dockerfile"), wt], env=env, check=True, timeout=1800)
        finally:
            subprocess.run(["git", "-C", lib.REPO, "worktree", "remove", "--force", wt], timeout=60)
    env = dict(os.environ, RA_EXTRA_IMAGES=tag)
    subprocess.run(["bash", os.path.join(lib.REPO, "tests/cluster/images.sh"), "import", c.env["CONTAINERD_SOCK"],
                    c.env["CTR"], c.env["STATE"]], env=env, check=True, timeout=1800)
    return tag, sha


def ab_table(pairs):
    rows = ["| scenario | build | actions (expected) | p50 (s) | RSS max (KiB) | verdict |", "|---|---|---|---|---|---|"]
    for new, old in pairs:
        verdict, why = ab_verdict(new, old)
        for r in (new, old):
            lat = (r.get("latency_s") or {}).get("p50")
            rows.append("| %s | %s | %s (%s) | %s | %s | %s |" % (
                r["scenario"], r.get("build"), r.get("actions"), r.get("expected_actions"),
                "%.1f" % lat if lat is not None else "-", (r.get("resources") or {}).get("rss_kib_max", "-"),
                ("**%s** %s" % (verdict, why)) if r is new else ""))
    return "\n".join(rows) + "\n"


def ab_verdict(new, old):
    if not (new.get("pass") and old.get("pass")):
        return "fail", "(a run lost, duplicated or erred)"
    if new.get("actions") != old.get("actions"):
        return "fail", "(actions differ: %s vs %s)" % (new.get("actions"), old.get("actions"))
    ln, lo = (new.get("latency_s") or {}).get("p50"), (old.get("latency_s") or {}).get("p50")
    if ln is not None and lo is not None and ln > lo * AB_LATENCY[0] + AB_LATENCY[1]:
        return "fail", "(p50 %.1f s > %.1f s)" % (ln, lo * AB_LATENCY[0] + AB_LATENCY[1])
    rn, ro = (new.get("resources") or {}).get("rss_kib_max"), (old.get("resources") or {}).get("rss_kib_max")
    if rn and ro and rn > ro * AB_RSS[0] + AB_RSS[1]:
        return "fail", "(RSS %d KiB > %d)" % (rn, ro * AB_RSS[0] + AB_RSS[1])
    return "pass", ""


def peers_images(c):
    """Builds the peers' images and imports them into the node's containerd."""
    p = subprocess.run(["bash", os.path.join(HERE, "peers.sh"), "build"], stdout=subprocess.PIPE, timeout=3600)
    if p.returncode != 0:
        sys.exit("loadtest: peers.sh build failed")
    imgs = [l.split("=", 1)[1] for l in p.stdout.decode().splitlines() if "=" in l]
    env = dict(os.environ, RA_EXTRA_IMAGES=" ".join(imgs))
    p = subprocess.run(["bash", os.path.join(lib.REPO, "tests/cluster/images.sh"), "import", c.env["CONTAINERD_SOCK"],
                        c.env["CTR"], c.env["STATE"]], env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit("loadtest: importing the peers' images failed")


def table(results):
    rows = ["| scenario | scaled | actions (expected) | lost | dup | apply → used p50 / p95 / p99 (s) | "
            "API requests | agent RSS max (KiB) | agent CPU (ms) | errors | pass |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r and "scaled" not in r:
            rows.append("| %s | | | | | | | | | %s | no |" % (r["scenario"], r["error"].splitlines()[-1][:80]))
            continue
        lat = r.get("latency_s") or {}
        f = lambda v: "%.1f" % v if isinstance(v, (int, float)) else "-"  # noqa: E731
        api = ", ".join("%s %d" % kv for kv in sorted((r.get("api") or {}).items())) or "0"
        res = r.get("resources") or {}
        rows.append("| %s | %s | %s (%s) | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s |" % (
            r["scenario"], r["scaled"], r.get("actions"), r.get("expected_actions"), r.get("lost", 0),
            r.get("duplicated", 0), f(lat.get("p50")), f(lat.get("p95")), f(lat.get("p99")), api,
            res.get("rss_kib_max", "-"), res.get("cpu_ms_total", "-"), r.get("errors", 0),
            "yes" if r.get("pass") else "**no**"))
    return "\n".join(rows) + "\n"


def peers_table(results):
    """The peers side by side: apply -> used, and the part after the
    kubelet's swap of the pod's volume (the tool's own)."""
    rows = ["| tool | edits | reloads | apply → used p50 / max (s) | of which after the kubelet's swap p50 / max (s) "
            "| RSS max (KiB) | CPU (ms) |", "|---|---|---|---|---|---|---|"]
    f = lambda d, k: "%.2f" % d[k] if isinstance((d or {}).get(k), (int, float)) else "-"  # noqa: E731
    for r in results:
        if "own_latency_s" not in r:
            continue
        lat, own, res = r.get("latency_s") or {}, r.get("own_latency_s") or {}, r.get("resources") or {}
        rows.append("| %s | %s | %s | %s / %s | %s / %s | %s | %s |" % (
            r["scenario"].split(": ", 1)[-1], r.get("changes"), r.get("actions"), f(lat, "p50"), f(lat, "max"),
            f(own, "p50"), f(own, "max"), res.get("rss_kib_max", "-"), res.get("cpu_ms_total", "-")))
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("-k", default="")
    ap.add_argument("--out", default=None)
    ap.add_argument("--old", default=os.environ.get("OLD") or None)
    a = ap.parse_args()
    lock = e2e_run.lock_cluster()  # noqa: F841
    c = lib.Cluster(e2e_run.cluster_env(), os.path.abspath(a.binary))
    c.ensure_webhook()
    if any(selected(a.k, n) for n in ORDER if "peers" in n):
        peers_images(c)
    procs = measure.Procs(c)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = a.out or os.path.join(lib.REPO, "build", "loadtest", stamp)
    os.makedirs(out, exist_ok=True)
    results = []
    t0 = time.monotonic()
    for name in ORDER:
        if not selected(a.k, name):
            continue
        fn = getattr(scenarios, name)
        ts = time.monotonic()
        try:
            r = fn(c, procs)
        except Exception:
            r = {"scenario": name, "error": traceback.format_exc(), "pass": False}
        for x in (r if isinstance(r, list) else [r]):
            x["duration_s"] = round(time.monotonic() - ts, 1)
            results.append(x)
            print("loadtest: %s %s in %.0f s" % (x["scenario"], "passed" if x.get("pass") else "FAILED",
                                                 x["duration_s"]), flush=True)
            for key in ("error", "note"):
                if key in x:
                    print(x[key], flush=True)
    pairs = []
    if a.old:
        tag, sha = old_image(c, a.old)
        for name in AB:
            if not selected(a.k, name):
                continue
            new = next((r for r in results if r.get("build") == "current" and
                        r.get("scenario", "").lower().split(" ")[0] == name.split("_")[0]), None)
            scenarios.VARIANT.update(name="old", image=tag)
            try:
                old = getattr(scenarios, name)(c, procs)
            except Exception:
                old = {"scenario": name + " [old]", "error": traceback.format_exc(), "pass": False, "build": "old"}
            finally:
                scenarios.VARIANT.update(name="", image=None)
            old["build"] = "old " + sha
            results.append(old)
            if new:
                pairs.append((new, old))
            print("loadtest: A/B %s: %s" % (name, ab_verdict(new, old)[0] if new else "no current run"), flush=True)
    md = "# reload-agent load suite, %s\n\n%s" % (stamp, table(results))
    if peers_table(results):
        md += "\nThe peers on one Prometheus each, the same edits at the same moment:\n\n" + peers_table(results)
    if pairs:
        md += "\nA/B against %s:\n\n%s" % (a.old, ab_table(pairs))
    md += "\nNot measured here:\n\n" + "".join("- %s: %s\n" % kv for kv in UNAVAILABLE.items())
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"when": stamp, "results": results, "unavailable": UNAVAILABLE}, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    print(md)
    print("loadtest: %d scenarios in %.0f s; results in %s" % (len(results), time.monotonic() - t0, out))
    ok = results and all(r.get("pass") for r in results) and all(ab_verdict(n, o)[0] == "pass" for n, o in pairs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
