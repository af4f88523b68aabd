"""The capture server (shardproof_torch/server.py, cli/capture_server.cpp): `shardproof capture`
starts it on first use and forks later captures from it. A served capture is byte for byte
the capture the interpreter makes itself, under the request's own environment; its errors are
the same `file:line: [rule]` lines; a server that cannot serve a request as a fresh
interpreter would (its front end changed) says so and is replaced; a server whose socket is
gone exits, as `daemon stop` makes it; a malformed request is answered and does not stop
it."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import FRONTEND, HERE, REPO, needs_torch, python

pytestmark = needs_torch
MLP = os.path.join(REPO, "examples", "torch", "mlp", "harness.py")


@pytest.fixture
def runtime():
    """A short private runtime directory (a socket path must fit 108 bytes)."""
    d = tempfile.mkdtemp(prefix="sp-srv-", dir="/tmp")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _env(runtime, **extra):
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime, SHARDPROOF_PYTHON=python(),
               SHARDPROOF_EXAMPLE_BUG="", SHARDPROOF_CAPTURE_SERVER="1")
    env.update(extra)
    return env


def _capture(binary, harness, out, env):
    p = subprocess.run([binary, "capture", harness, "-o", str(out)], env=env, cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr


def _log(runtime):
    path = os.path.join(runtime, "shardproof", "capture-server.log")
    return open(path).read() if os.path.exists(path) else ""


def _wait_for(predicate, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _socket(runtime):
    d = os.path.join(runtime, "shardproof")
    names = [n for n in os.listdir(d) if n.endswith(".sock")] if os.path.isdir(d) else []
    return os.path.join(d, names[0]) if names else None


def _exited(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie until its parent reaps it
        return f.read().split()[2] == "Z"


def _server_pid(runtime):
    return int(_log(runtime).split("capture server ")[1].split(":")[0])


def _started(binary, runtime, env, tmp_path):
    """Runs a first capture (which starts the server) and waits until it listens."""
    rc, err = _capture(binary, MLP, tmp_path / "first.json", env)
    assert rc == 0, err
    assert _wait_for(lambda: "listening on" in _log(runtime)), _log(runtime)


def test_a_served_capture_is_the_capture_under_its_own_environment(shardproof_bin, runtime,
                                                                    tmp_path):
    env = _env(runtime)
    _started(shardproof_bin, runtime, env, tmp_path)
    for bug in ("", "bias-before-allreduce"):
        served, direct = tmp_path / f"served{bug}.json", tmp_path / f"direct{bug}.json"
        rc, err = _capture(shardproof_bin, MLP, served, dict(env, SHARDPROOF_EXAMPLE_BUG=bug))
        assert rc == 0, err
        rc, err = _capture(shardproof_bin, MLP, direct,
                           dict(env, SHARDPROOF_EXAMPLE_BUG=bug, SHARDPROOF_CAPTURE_SERVER="0"))
        assert rc == 0, err
        assert served.read_bytes() == direct.read_bytes(), bug
    assert _log(runtime).count("served capture") == 2, _log(runtime)
    assert (tmp_path / "served.json").read_bytes() != \
        (tmp_path / "servedbias-before-allreduce.json").read_bytes()


def test_a_served_invalid_harness_reports_its_line(shardproof_bin, runtime, tmp_path):
    env = _env(runtime)
    _started(shardproof_bin, runtime, env, tmp_path)
    bad = os.path.join(HERE, "harnesses", "item_control_flow.py")
    rc, served = _capture(shardproof_bin, bad, tmp_path / "bad.json", env)
    rc_direct, direct = _capture(shardproof_bin, bad, tmp_path / "bad2.json",
                                 dict(env, SHARDPROOF_CAPTURE_SERVER="0"))
    assert rc == rc_direct == 2
    assert "item_control_flow.py:9: [data-dependent]" in served, served
    assert served == direct
    assert "served capture" in _log(runtime)


def test_a_changed_front_end_replaces_the_server(shardproof_bin, runtime, tmp_path):
    front = tmp_path / "front"
    shutil.copytree(os.path.join(FRONTEND, "shardproof_torch"), front / "shardproof_torch",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(runtime, SHARDPROOF_TORCH_FRONTEND=str(front))
    _started(shardproof_bin, runtime, env, tmp_path)
    first = _log(runtime)
    (front / "shardproof_torch" / "mesh.py").write_text(
        (front / "shardproof_torch" / "mesh.py").read_text() + "\n# changed\n")
    rc, err = _capture(shardproof_bin, MLP, tmp_path / "after.json", env)
    assert rc == 0, err
    assert _wait_for(lambda: "stale" in _log(runtime)), _log(runtime)
    assert _wait_for(lambda: _log(runtime).count("listening on") == 2), _log(runtime)
    assert first.count("listening on") == 1
    rc, err = _capture(shardproof_bin, MLP, tmp_path / "served.json", env)
    assert rc == 0, err
    assert (tmp_path / "served.json").read_bytes() == (tmp_path / "after.json").read_bytes()


def test_a_server_whose_socket_is_gone_exits(shardproof_bin, runtime, tmp_path):
    env = _env(runtime)
    _started(shardproof_bin, runtime, env, tmp_path)
    pid = _server_pid(runtime)
    os.unlink(_socket(runtime))
    assert _wait_for(lambda: _exited(pid), 30)


def test_a_malformed_request_is_answered_and_the_server_keeps_serving(shardproof_bin, runtime,
                                                                      tmp_path):
    import json
    import socket
    env = _env(runtime)
    _started(shardproof_bin, runtime, env, tmp_path)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for payload, fds in ((b"not json\n", [null] * 3), (b'{"argv": "capture"}\n', [null] * 3),
                             (b'{"argv": [], "cwd": "/", "env": {}}\n', [])):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(_socket(runtime))
                socket.send_fds(s, [payload], fds)
                answer = json.loads(s.makefile().readline())
                assert answer == {"error": "malformed request"}, payload
    finally:
        os.close(null)
    rc, err = _capture(shardproof_bin, MLP, tmp_path / "after.json", env)
    assert rc == 0, err
    assert "served capture" in _log(runtime), _log(runtime)


def test_daemon_stop_stops_the_capture_server(shardproof_bin, runtime, tmp_path):
    env = _env(runtime, SHARDPROOF_CACHE_DIR=str(tmp_path / "cache"))
    _started(shardproof_bin, runtime, env, tmp_path)
    pid = _server_pid(runtime)
    p = subprocess.run([shardproof_bin, "daemon", "stop"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "stopped 1 capture server" in p.stdout, p.stdout
    assert _socket(runtime) is None
    assert _wait_for(lambda: _exited(pid), 30)
