"""Captures kept in a cache directory (capture_cache.py): an unchanged capture takes the kept
plan, and any change to what the capture read is a new capture: a module the harness imports,
the harness itself, the environment, the mesh, a file it reads, a new file beside it."""
import json
import os
import subprocess
import sys

from conftest import FRONTEND, needs_torch

pytestmark = needs_torch

HARNESS = '''import os
import torch
import torch.nn.functional as F
from helper import Net, WIDTH
MESH = {"dp": 2}
SCALE = float(os.environ.get("SP_TEST_SCALE", "1"))
def build_logical():
    return Net()
def build_rank(ctx):
    return Net()
def batch():
    return {"x": torch.randn(4, WIDTH), "y": torch.randn(4, WIDTH)}
BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}
def loss(model, b):
    return SCALE * F.mse_loss(model(b["x"]), b["y"])
def optimizer(params):
    return torch.optim.SGD(params, lr=float(open(os.path.join(os.path.dirname(__file__),
                                                              "lr.txt")).read()))
'''
HELPER = '''import torch.nn as nn
WIDTH = {width}
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
    def forward(self, x):
        return self.fc(x)
'''


def capture(tmp_path, out, mesh="", env=None):
    cmd = [sys.executable, "-m", "shardproof_torch", "capture", str(tmp_path / "h" /
           "harness.py"), "-o", str(out), "--cache-dir", str(tmp_path / "cache"), "--stats"]
    if mesh:
        cmd += ["--mesh", mesh]
    e = dict(os.environ, PYTHONPATH=FRONTEND, **(env or {}))
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    return stats.get("cached", False), out.read_text()


def make_harness(tmp_path, width=4):
    h = tmp_path / "h"
    h.mkdir(exist_ok=True)
    (h / "harness.py").write_text(HARNESS)
    (h / "helper.py").write_text(HELPER.format(width=width))
    (h / "lr.txt").write_text("0.1")


def test_a_change_to_anything_read_is_a_new_capture(tmp_path):
    make_harness(tmp_path)
    out = tmp_path / "plan.json"
    cached, first = capture(tmp_path, out)
    assert not cached
    cached, again = capture(tmp_path, out)
    assert cached and again == first

    # an imported module changes: captured again, and the plan says so
    (tmp_path / "h" / "helper.py").write_text(HELPER.format(width=8))
    cached, wider = capture(tmp_path, out)
    assert not cached and wider != first and '"shape":[8,8]' in wider
    assert capture(tmp_path, out)[0]

    # the environment, the mesh, a file read, the harness, a new file beside it
    cached, scaled = capture(tmp_path, out, env={"SP_TEST_SCALE": "2"})
    assert not cached and scaled != wider
    cached, four = capture(tmp_path, out, mesh="dp=4")
    assert not cached and four != wider
    assert capture(tmp_path, out)[0]
    (tmp_path / "h" / "lr.txt").write_text("0.2")
    assert not capture(tmp_path, out)[0]
    (tmp_path / "h" / "harness.py").write_text(HARNESS + "\n# edited\n")
    assert not capture(tmp_path, out)[0]
    (tmp_path / "h" / "other.py").write_text("")
    assert not capture(tmp_path, out)[0]
    assert capture(tmp_path, out)[0]


def test_a_broken_entry_is_a_miss(tmp_path):
    make_harness(tmp_path)
    out = tmp_path / "plan.json"
    _, first = capture(tmp_path, out)
    for manifest in (tmp_path / "cache").rglob("*.json"):
        if not manifest.name.endswith(".plan.json"):
            manifest.write_text("{not json")
    cached, again = capture(tmp_path, out)
    assert not cached and again == first


def test_a_file_written_while_capturing_is_no_entry(tmp_path):
    make_harness(tmp_path)
    h = tmp_path / "h" / "harness.py"
    # the harness reads lr.txt and writes it back: which content did the plan see?
    h.write_text(HARNESS + "\nLR = open(os.path.join(os.path.dirname(__file__), 'lr.txt')).read()"
                 "\nopen(os.path.join(os.path.dirname(__file__), 'lr.txt'), 'w').write(LR)\n")
    out = tmp_path / "plan.json"
    assert not capture(tmp_path, out)[0]
    assert not capture(tmp_path, out)[0]
    assert not list((tmp_path / "cache").rglob("*.plan.json"))


def test_only_the_variables_a_capture_reads_are_part_of_its_key(tmp_path):
    # a `cd` changes OLDPWD and a CI run has its own id: neither is read, neither may make
    # every capture a miss; the variable the harness reads still does
    make_harness(tmp_path)
    out = tmp_path / "plan.json"
    assert not capture(tmp_path, out)[0]
    assert capture(tmp_path, out, env={"OLDPWD": "/elsewhere", "GITHUB_RUN_ID": "17"})[0]
    cached, scaled = capture(tmp_path, out, env={"SP_TEST_SCALE": "2"})
    assert not cached
    # both values stay kept: switching back and forth is a hit each time
    assert capture(tmp_path, out)[0]
    cached, again = capture(tmp_path, out, env={"SP_TEST_SCALE": "2", "OLDPWD": "/x"})
    assert cached and again == scaled
