"""`reload-agent validator` over a real unix socket (issue 26): the server
of the validator protocol, run as the injector's validator container would
run it. Every answer is read from the socket; what the commands did is read
back from the files and processes they left (a PID file, /proc), never only
from the validator's own log.
"""
import json
import os
import signal
import socket
import subprocess
import time

from tests.lib.proc import TestFailure, check, wait_until
from tests.lib.validator import Validator, alive


def test_validator_runs_commands_and_reports(env):
    v = Validator(env)
    r = v.ask({"argv": ["sh", "-c", "echo checked; echo bad line >&2; exit 3"],
               "timeout_ms": 5000})
    check(r["exit"] == 3 and r["signal"] == 0 and r["timed_out"] is False, r)
    check(r["output"] == "checked\nbad line\n", r)
    r = v.ask({"argv": ["true"], "timeout_ms": 5000})
    check(r["exit"] == 0 and r["output"] == "", r)
    r = v.ask({"argv": ["reload-agent-no-such-checker"], "timeout_ms": 5000})
    check("error" in r and "no such file" in r["error"], r)
    # the output is bounded: 1 MiB written, 4 KiB kept
    r = v.ask({"argv": ["sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' y"],
               "timeout_ms": 10000})
    check(r["exit"] == 0 and len(r["output"]) == 4096 and r["truncated"] is True,
          (r["exit"], len(r["output"])))
    check(v.stop() == 0, "validator exit status")
    check(not os.path.exists(v.path), "the socket stays after SIGTERM")


def test_validator_timeout_kills_the_process_group(env):
    v = Validator(env)
    pids = env.path("pids")
    t0 = time.monotonic()
    r = v.ask({"argv": ["sh", "-c", "sleep 30 & echo $! > %s; echo $$ >> %s; wait" % (pids, pids)],
               "timeout_ms": 300})
    took = time.monotonic() - t0
    check(r["timed_out"] is True, r)
    check(took < 5, "the reply took %.1fs" % took)
    for pid in map(int, open(pids).read().split()):
        wait_until(lambda: not alive(pid), 5, "pid %d to be gone" % pid)
    v.stop()


def test_validator_one_at_a_time_and_bad_requests(env):
    v = Validator(env)
    started = env.path("started")
    # a long command holds the slot; a second request is answered "busy" at once
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(v.path)
    s.sendall((json.dumps({"argv": ["sh", "-c", "echo $$ > %s; exec sleep 30" % started],
                           "timeout_ms": 60000}) + "\n").encode())
    wait_until(lambda: os.path.exists(started) and open(started).read().strip(), 10,
               "the first command")
    pid = int(open(started).read())
    r = v.ask({"argv": ["true"], "timeout_ms": 1000})
    check("busy" in r.get("error", ""), r)
    # the client that goes away gets its command killed, and the slot frees
    s.close()
    wait_until(lambda: not alive(pid), 10, "the abandoned command to be killed")
    wait_until(lambda: v.ask({"argv": ["true"], "timeout_ms": 1000}).get("exit") == 0, 10,
               "the slot to free")
    for raw, why in ((b"not json\n", "not a JSON object"),
                     (b'{"argv":[],"timeout_ms":5}\n', "argv"),
                     (b'{"argv":["true"],"timeout_ms":0}\n', "timeout_ms"),
                     (b"x" * (70 * 1024), "exceeds")):
        r = v.ask(raw=raw)
        check(why in r.get("error", ""), "%r: %r" % (raw[:30], r))
    v.stop()


def test_validator_socket_path_rules(env):
    # a stale socket (a validator that was killed) is replaced
    v = Validator(env)
    v.p.kill()
    v.p.wait(5)
    check(os.path.exists(v.path), "socket gone after SIGKILL")
    v2 = Validator(env, v.path)
    check(v2.ask({"argv": ["true"], "timeout_ms": 1000})["exit"] == 0, "restarted validator")
    v2.stop()
    # a file that is not a socket is never replaced
    plain = env.path("plain")
    open(plain, "w").write("keep me")
    r = env.run([env.binary, "validator", "--socket", plain])
    check(r.returncode == 1 and b"not a socket" in r.stderr, r.stderr)
    check(open(plain).read() == "keep me", "the file was touched")
    r = env.run([env.binary, "validator"])
    check(r.returncode == 2 and b"--socket is required" in r.stderr, r.stderr)
    r = env.run([env.binary, "validator", "--socket", "/" + "x" * 120])
    check(r.returncode == 2 and b"at most 107 bytes" in r.stderr, r.stderr)
