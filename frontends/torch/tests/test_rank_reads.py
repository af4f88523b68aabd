"""ctx records which coordinates a rank program reads, so that ranks which read the same
coordinates share one trace (context.py). A read that is not logged makes every rank reuse
another rank's program: a rank-dependent bug would be proven equivalent. Every way of reading
ctx.coords and ctx.group_ranks must be logged, and torchrun's RANK / LOCAL_RANK in os.environ
(rank_environ.py) too."""
import copy
import json
import os

import pytest

from conftest import needs_torch
from harness_runs import capture_harness, verify_plan

HERE = os.path.dirname(os.path.abspath(__file__))


class _Mesh:
    names = ["dp", "tp"]


def _coords():
    from shardproof_torch.context import LoggedCoords, ReadLog
    log = ReadLog(_Mesh())
    return LoggedCoords({"dp": 1, "tp": 0}, log), log


READS_ALL = [dict, lambda c: {**c}, lambda c: c.copy(), copy.copy, copy.deepcopy, json.dumps,
             str, repr, lambda c: list(c.items()), lambda c: list(c.values()),
             lambda c: c == {"dp": 1, "tp": 0}, lambda c: c | {}, lambda c: {}.update(c)]


@pytest.mark.parametrize("read", READS_ALL)
def test_reading_every_value_logs_every_axis(read):
    c, log = _coords()
    read(c)
    assert log.axes == {"dp", "tp"}


def test_reading_one_value_logs_its_axis_and_names_log_nothing():
    c, log = _coords()
    assert c.get("tp") == 0 and log.axes == {"tp"}
    c, log = _coords()
    assert list(c) == ["dp", "tp"] and "dp" in c and len(c) == 2 and log.axes == set()


def test_group_ranks_read_logs_the_other_axes():
    from shardproof_torch.context import LoggedGroupRanks, ReadLog
    log = ReadLog(_Mesh())
    g = LoggedGroupRanks({"dp": [0, 2], "tp": [0, 1]}, _Mesh(), log)
    g.get("dp")
    assert log.axes == {"tp"}
    dict(g)
    assert log.axes == {"dp", "tp"}


def test_ctx_is_read_only():
    from shardproof_torch.errors import CaptureError
    c, _ = _coords()
    for write in (lambda: c.__setitem__("dp", 0), lambda: c.pop("dp"), lambda: c.update(tp=1),
                  lambda: c.setdefault("pp", 0)):
        with pytest.raises(CaptureError, match="read-only"):
            write()


@needs_torch
@pytest.mark.parametrize("read", ["get", "coords-copy", "coords-splat", "coords-json",
                                  "coords-str", "ranks-dict", "env-rank", "env-local-rank",
                                  "env-copy"])
def test_a_rank_dependent_step_read_any_way_is_not_equivalent(read, tmp_path, shardproof_bin):
    plan = tmp_path / "plan.json"
    rc, err = capture_harness(os.path.join(HERE, "harnesses", "rank_lr_by_read.py"), plan,
                              {"SHARDPROOF_READ": read})
    assert rc == 0, err
    rc, report = verify_plan(shardproof_bin, plan)
    assert rc == 1, json.dumps(report)[-2000:]
