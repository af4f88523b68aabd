"""Shared test setup: the package on sys.path, torch (skipped, and said so, where it cannot
be imported), and the shardproof binary for the engine-side checks."""
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FRONTEND = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(FRONTEND))
sys.path.insert(0, FRONTEND)
sys.path.insert(0, HERE)

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch cannot be imported by this "
                                 "interpreter (use /usr/bin/python3 or SHARDPROOF_PYTHON)")


def find_binary():
    """SHARDPROOF_BIN, else the worktree's build, else /work/bin, else PATH."""
    for candidate in (os.environ.get("SHARDPROOF_BIN"), os.path.join(REPO, "build", "shardproof"),
                      "/work/bin/shardproof", shutil.which("shardproof")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def binary_has(binary, command):
    import subprocess
    p = subprocess.run([binary, command, "--help"], capture_output=True, text=True)
    return p.returncode == 0


@pytest.fixture(scope="session")
def shardproof_bin():
    b = find_binary()
    if b is None:
        pytest.skip("no shardproof binary (set SHARDPROOF_BIN)")
    return b


@pytest.fixture(scope="session")
def eval_bin(shardproof_bin):
    if not binary_has(shardproof_bin, "eval"):
        pytest.skip(f"{shardproof_bin} has no `eval` command (build this branch)")
    return shardproof_bin


def python():
    return os.environ.get("SHARDPROOF_PYTHON", sys.executable)
