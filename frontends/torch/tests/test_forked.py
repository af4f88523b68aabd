"""forked.run_tasks: results come back from the second process, errors come back as the
same CaptureError (rule, file and line kept), and a child that cannot hand its results back
costs only time: its tasks run again in the parent."""
import os

from shardproof_torch import forked
from shardproof_torch.errors import CaptureError


def test_results_come_back_from_the_child_in_task_order():
    pids = forked.run_tasks([(k, lambda: os.getpid()) for k in range(4)], parallel=True)
    assert sorted(pids) == [0, 1, 2, 3]
    assert pids[0] != os.getpid() and pids[1] != os.getpid()  # the first half: the child
    assert pids[2] == pids[3] == os.getpid()


def test_an_error_in_the_child_is_the_same_capture_error():
    def bad():
        raise CaptureError("param-layout", "w: no layout", "model.py", 12)
    out = forked.run_tasks([("a", bad), ("b", lambda: 1)], parallel=True)
    try:
        forked.value(out["a"])
        assert False, "expected the child's error"
    except CaptureError as e:
        assert (e.rule, e.text, e.file, e.line) == ("param-layout", "w: no layout", "model.py",
                                                    12)
    assert forked.value(out["b"]) == 1


def test_a_result_that_cannot_come_back_is_computed_again_here():
    calls = []

    def unpicklable():
        calls.append(os.getpid())
        return lambda: "made here"  # a lambda does not pickle
    out = forked.run_tasks([("f", unpicklable), ("g", lambda: 2)], parallel=True)
    assert forked.value(out["f"])() == "made here"
    assert calls == [os.getpid()]  # the child's run is lost; the parent's is the result


def test_one_process_when_not_parallel():
    out = forked.run_tasks([(k, lambda: os.getpid()) for k in range(3)], parallel=False)
    assert set(out.values()) == {os.getpid()}


def test_jobs_setting(monkeypatch):
    monkeypatch.setenv("SHARDPROOF_CAPTURE_JOBS", "1")
    assert forked.jobs() == 1
    monkeypatch.setenv("SHARDPROOF_CAPTURE_JOBS", "3")
    assert forked.jobs() == 3
    monkeypatch.delenv("SHARDPROOF_CAPTURE_JOBS")
    assert 1 <= forked.jobs() <= 2
