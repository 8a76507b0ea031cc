"""The scheduler slice (--sched-slice): applied at start, changed live from
the annotations file, reported when the kernel refuses it. The slice in
force is read back from /proc/PID/sched (se.slice, Linux 6.12 and later)."""
import os
import re

from lib import check, wait_until

from test_engine import annotations_text, annotations_volume, start, update, volume


def se_slice(pid):
    """The slice in force, or None on a kernel that has no custom slices."""
    with open("/proc/%d/sched" % pid) as f:
        m = re.search(r"^se\.slice\s*:\s*(\d+)", f.read(), re.M)
    return int(m.group(1)) if m else None


def test_sched_slice_at_start_and_live(env):
    default = se_slice(os.getpid())  # this test process never asked for a slice
    if default is None:
        # Before Linux 6.12 the kernel accepts and ignores the request: the
        # agent must start without a warning and work (docs/performance.md).
        vol = volume(env, {"app.conf": "v0\n"})
        a = start(env, vol)
        h = update(env, vol, {"app.conf": "v1\n"})
        a.wait_match("change", hash=h)
        check(not a.matching("sched-slice"), "a warning on a kernel without custom slices")
        print("  (no se.slice in /proc/PID/sched on this kernel: checked the no-op path)")
        return
    check(default != 100000, "the kernel default slice is already 100us; the test cannot tell")
    vol = volume(env, {"app.conf": "v0\n"})
    ann, ann_file = annotations_volume(env, {"action": "none"})
    a = start(env, vol, "--annotations", ann_file)
    check(se_slice(a.pid) == 100000, "default --sched-slice 100us not applied: %d" % se_slice(a.pid))
    env.awsim(ann, {"annotations": annotations_text({"action": "none", "sched-slice": "2ms"})})
    wait_until(lambda: se_slice(a.pid) == 2000000, 10, "se.slice 2ms after the live change")
    env.awsim(ann, {"annotations": annotations_text({"action": "none", "sched-slice": "0"})})
    wait_until(lambda: se_slice(a.pid) == default, 10, "the kernel default slice after 0")
    b = start(env, vol, "--sched-slice", "0")
    check(se_slice(b.pid) == default, "--sched-slice 0 changed the slice: %d" % se_slice(b.pid))


def test_sched_slice_refused_is_reported(env):
    """Under SCHED_BATCH the agent does not touch the policy: it warns, keeps
    the batch policy and works as usual."""
    vol = volume(env, {"app.conf": "v0\n"})
    mine = os.sched_getscheduler(0)
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # inherited by the agent
    try:
        a = start(env, vol)
    finally:
        os.sched_setscheduler(0, mine, os.sched_param(0))
    warn = a.wait_event("sched-slice")[0]
    check(warn.get("level") == "warn" and "SCHED_OTHER" in warn.get("error", ""),
          "the refusal should be a warning naming the policy: %r" % warn)
    check(os.sched_getscheduler(a.pid) == os.SCHED_BATCH, "the agent changed its policy")
    h = update(env, vol, {"app.conf": "v1\n"})
    a.wait_match("change", hash=h)


def test_sched_slice_bad_value(env):
    vol = volume(env, {"app.conf": "v0\n"})
    r = env.run([env.binary, "run", "--watch", vol, "--sched-slice", "-1ms"])
    check(r.returncode == 2, "a negative --sched-slice should be a usage error, got %d" % r.returncode)
    check(b"sched-slice" in r.stderr, "the error should name --sched-slice: %r" % r.stderr)
