"""A webhook under test, from the client's side: a throwaway CA and a
serving certificate for 127.0.0.1 (openssl), an AdmissionReview of a
realistic Deployment pod (annotated for injection, with the managedFields,
ownerReferences and projected token volume the API server sends), and a
TLS client context that trusts that CA. Used by the webhook benches.
"""
import json
import ssl
import subprocess

HOST = "127.0.0.1"


def make_certs(d):
    """Writes ca.crt/ca.key and tls.crt/tls.key (P-256, SAN IP:127.0.0.1,
    serverAuth, 2 days) into directory d."""
    def ossl(*a):
        subprocess.run(["openssl"] + list(a), check=True, capture_output=True, timeout=60)
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=bench CA",
         "-addext", "basicConstraints=critical,CA:TRUE")
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", d + "/tls.key", "-out", d + "/tls.csr", "-subj", "/CN=webhook")
    ossl("x509", "-req", "-in", d + "/tls.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
         "-set_serial", "7", "-days", "2", "-out", d + "/tls.crt", "-extfile", d + "/ext")


def review_body():
    """The AdmissionReview (CREATE of a Pod) as request bytes."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "web-5d8f7c9b6-", "namespace": "",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6"},
            "annotations": {"reload-agent.io/inject": "true", "reload-agent.io/action": "signal",
                            "reload-agent.io/process": "nginx",
                            "reload-agent.io/rule": "*.jvm=rollout"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-5d8f7c9b6", "uid": "6f1c", "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}},
                                                           "f:ownerReferences": {}},
                                            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}":
                                                                        {}}}}}]},
        "spec": {
            "containers": [{
                "name": "web", "image": "nginx:1.27",
                "ports": [{"containerPort": 8080}],
                "securityContext": {"runAsUser": 101},
                "env": [{"name": "LEVEL", "valueFrom": {"configMapKeyRef":
                                                        {"name": "web-env", "key": "level"}}}],
                "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/nginx/conf.d", "readOnly": True},
                    {"name": "certs", "mountPath": "/etc/nginx/tls", "readOnly": True},
                    {"name": "kube-api-access-x7k2p",
                     "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                     "readOnly": True}]}],
            "volumes": [
                {"name": "conf", "configMap": {"name": "nginx-conf"}},
                {"name": "certs", "secret": {"secretName": "nginx-tls"}},
                {"name": "kube-api-access-x7k2p", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                                   "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]}}
    rv = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "bench-uid", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                      "resource": {"group": "", "version": "v1", "resource": "pods"},
                      "namespace": "team-a", "operation": "CREATE", "object": pod,
                      "dryRun": False}}
    return json.dumps(rv).encode()


def client_ctx(cafile):
    """A TLS client context that trusts cafile only."""
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.load_verify_locations(cafile)
    return c
