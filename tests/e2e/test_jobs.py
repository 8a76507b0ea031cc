"""A Job and a CronJob whose pods get the injected native sidecar still
complete: the kubelet stops a restartPolicy: Always init container once the
main containers have exited."""
import json

from tests.lib import apps
from tests.lib.cluster import wait_until, needs
from tests.lib.proc import check


def job_template(ann):
    return {"metadata": {"annotations": ann},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "work", "image": apps.NGINX_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", "cat /etc/work/task; sleep 3"],
                                     "volumeMounts": [{"name": "task", "mountPath": "/etc/work"}]}],
                     "volumes": [{"name": "task", "configMap": {"name": "task"}}]}}


def sidecar_of(pod):
    return [c for c in pod["spec"].get("initContainers", []) if c["name"] == "reload-agent"]


def check_job_done(env, job, t):
    wait_until(lambda: (env.get("job", job, check=False) or {}).get("status", {}).get("succeeded") == 1,
               t, "job %s to succeed" % job)
    pods = env.pods("job-name=" + job)
    check(pods, "no pod of job %s" % job)
    for p in pods:
        check(sidecar_of(p), "pod %s of job %s has no injected sidecar" % (p["metadata"]["name"], job))
        check(p["status"]["phase"] == "Succeeded", "pod %s is %s" % (p["metadata"]["name"], p["status"]["phase"]))


def test_job_and_cronjob_complete(env):
    env.c.ensure_webhook()
    env.apply(apps.configmap("task", {"task": "do the thing\n"}))
    ann = apps.agent_annotations(action="none")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
           "spec": {"backoffLimit": 0, "template": job_template(ann)}}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": {"backoffLimit": 0, "template": job_template(ann)}}}}
    env.apply(json.dumps(job))
    env.apply(json.dumps(cron))
    check_job_done(env, "once", 180)
    env.log("the Job completed with its sidecar")
    jobs = wait_until(lambda: [j["metadata"]["name"] for j in env.get("jobs")["items"]
                               if j["metadata"]["name"].startswith("tick-")
                               and j.get("status", {}).get("succeeded") == 1], 200,
                      "a Job of the CronJob to succeed")
    check_job_done(env, jobs[0], 30)
    env.log("CronJob's job %s completed with its sidecar" % jobs[0])


test_job_and_cronjob_complete.timeout = 600


needs(core=True)(test_job_and_cronjob_complete)  # E2E_CORE=1 runs it
