"""The capture server: `python3 -m shardproof_torch serve --socket PATH`.

Importing torch and its tracing modules takes about a second; tracing a small harness takes a
few tenths. `shardproof verify H.py` starts this process on first use (cli/capture_server.cpp),
and later captures are forked from it with everything imported. The protocol, over a Unix
stream socket in the user's 0700 state directory (docs/torch-harness.md, "Capture server"):

- the client sends one JSON line `{"argv": [...], "cwd": "...", "env": {...}}` with three file
  descriptors attached (SCM_RIGHTS): the capture's stdin, stdout and stderr;
- the server forks; the child takes the cwd, the environment and the descriptors, runs
  `capture` with argv as `python3 -m shardproof_torch` would, and answers `{"exit": N}`;
- the server answers `{"stale": true}` and exits instead when the request could not be served
  as a fresh interpreter would: another interpreter, another PYTHONPATH, other values of the
  variables torch reads while importing, or a changed file of this package. The client then
  runs the capture itself and starts a new server for the next one.

Only a peer with this process's uid is served. The server exits after IDLE_S seconds without a
request, or as soon as its socket file is gone or replaced."""
import json
import os
import signal
import socket
import struct
import sys

IDLE_S = 600
TICK_S = 5  # how often an idle server checks that its socket is still its own
MAX_REQUEST = 4 << 20
_STARTUP_PATH0 = sys.path[0] if sys.path else None
# Variables read while torch and this package are imported: a request whose values differ
# would not capture as a fresh interpreter does.
IMPORT_ENV_PREFIXES = ("PYTHON", "TORCH", "OMP_", "MKL_", "KMP_", "LD_", "CUDA", "SHARDPROOF_TORCH")


def _package_files():
    """(path, mtime_ns, size) of every file of this package: a change means new code."""
    root = os.path.dirname(os.path.abspath(__file__))
    state = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                    state.append((path, st.st_mtime_ns, st.st_size))
                except OSError:
                    state.append((path, None, None))
    return state


def _import_env(env):
    return sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_ENV_PREFIXES))


class Identity:
    """What a request must share with this process to be served by a fork of it."""

    def __init__(self):
        self.executable = os.path.realpath(sys.executable)
        self.env = _import_env(os.environ)
        self.files = _package_files()

    def serves(self, request):
        return (os.path.realpath(request.get("python", "")) == self.executable
                and _import_env(request.get("env", {})) == self.env
                and _package_files() == self.files)


def _preload():
    """Everything a capture imports that does not depend on the harness."""
    import torch  # noqa: F401
    import torch.fx.experimental.proxy_tensor  # noqa: F401
    import torch._decomp  # noqa: F401
    import functorch  # noqa: F401
    from . import __main__, driver  # noqa: F401
    from . import tracer_torch1  # noqa: F401
    torch.set_num_threads(1)  # no intra-op thread pool to inherit across fork


def _peer_uid(conn):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _read_request(conn):
    """(request dict, [fds]) or (None, fds) when the request is malformed."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
        more = conn.recv(1 << 16)
        if not more:
            break
        data += more
    try:
        request = json.loads(data)
        ok = (isinstance(request, dict) and isinstance(request.get("argv"), list)
              and all(isinstance(a, str) for a in request["argv"])
              and isinstance(request.get("cwd"), str) and isinstance(request.get("env"), dict)
              and len(fds) == 3)
    except ValueError:
        ok = False
    return (request if ok else None), fds


def _answer(conn, message):
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass  # the client is gone: nothing to tell


def _run_child(listener, conn, request, fds):
    """In the forked child: become the capture the client asked for."""
    code = 4
    try:
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        os.chdir(request["cwd"])
        if sys.path and sys.path[0] == _STARTUP_PATH0:  # `-m` put the server's cwd there
            sys.path[0] = os.getcwd()
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        sys.argv = [sys.argv[0]] + request["argv"]
        from .__main__ import main
        code = main(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    except BaseException as e:  # noqa: BLE001 (the client must get an answer)
        try:
            sys.stderr.write(f"shardproof capture: [internal] capture server: {e!r}\n")
        except Exception:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        _answer(conn, {"exit": code})
        os._exit(0)


def _log(text):
    sys.stderr.write(f"capture server {os.getpid()}: {text}\n")
    sys.stderr.flush()


def _still_ours(path, inode):
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def serve(path):
    _preload()
    identity = Identity()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(path)  # a dead server's socket: the client found nobody listening
    except FileNotFoundError:
        pass
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(16)
    listener.settimeout(TICK_S)
    inode = os.stat(path).st_ino
    _log(f"listening on {path}")
    idle = 0.0
    try:
        while idle < IDLE_S and _still_ours(path, inode):
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                idle += TICK_S
                continue
            idle = 0.0
            with conn:
                conn.settimeout(10)
                try:
                    if _peer_uid(conn) != os.getuid():
                        continue
                    request, fds = _read_request(conn)
                except OSError:
                    continue
                if request is None:
                    for fd in fds:
                        os.close(fd)
                    _answer(conn, {"error": "malformed request"})
                    continue
                if not identity.serves(request):
                    for fd in fds:
                        os.close(fd)
                    _answer(conn, {"stale": True})
                    _log("stale (another interpreter, environment or front end): exiting")
                    break
                conn.settimeout(None)
                child = os.fork()
                if child == 0:
                    _run_child(listener, conn, request, fds)
                _log(f"served capture (pid {child}): {' '.join(request['argv'])}")
                for fd in fds:
                    os.close(fd)
    finally:
        _log("exiting")
        if _still_ours(path, inode):
            try:
                os.unlink(path)
            except OSError:
                pass
        listener.close()
    return 0
