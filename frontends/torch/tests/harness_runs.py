"""Capture a harness under a set of environment variables (SHARDPROOF_EXAMPLE_BUG selects a
bug) and verify the plan in process: the steps every end-to-end test of the front end takes."""
import contextlib
import io
import json
import os
import subprocess
import time


def capture_harness(harness, out, env=None, mesh=None, extra=()):
    """(exit code, stderr) of `capture harness -o out` with env set for the capture."""
    from shardproof_torch.__main__ import main
    env = dict(env or {})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    args = ["capture", harness, "-o", str(out), *extra]
    if mesh:
        args += ["--mesh", mesh]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            rc = main(args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, err.getvalue()


def verify_plan(binary, plan, timeout=600):
    """(exit code, JSON report with "_seconds") of `verify --no-daemon --no-cache`."""
    t0 = time.time()
    p = subprocess.run([binary, "verify", "--no-daemon", "--no-cache", "--format", "json",
                        str(plan)], capture_output=True, text=True, timeout=timeout)
    report = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {"raw": p.stdout,
                                                                              "err": p.stderr}
    report["_seconds"] = round(time.time() - t0, 1)
    return p.returncode, report


def bug_env(bug, **env):
    return dict(env, SHARDPROOF_EXAMPLE_BUG=bug or "")
