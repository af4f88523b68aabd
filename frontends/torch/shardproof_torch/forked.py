"""Runs independent capture tasks on two processes: the parent runs its share while a forked
child runs the rest and hands its results back pickled through a file. Tracing is pure
Python inside torch (no kernels run on fake tensors), so a second process is the only way to
use the second core. A child that dies, or whose result does not unpickle, costs only time:
its tasks are run again in the parent."""
import contextlib
import os
import pickle
import sys
import tempfile

from . import capture_cache


def jobs():
    """Processes capture may use: SHARDPROOF_CAPTURE_JOBS, else up to 2 of the CPUs."""
    text = os.environ.get("SHARDPROOF_CAPTURE_JOBS")
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


class _Failed:
    """A task's exception, carried as a value (re-raised by the caller in task order)."""

    def __init__(self, error):
        self.error = error


def attempt(fn):
    """fn()'s result, or its exception as a value (for value() to raise later)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (the caller decides which error to report)
        return _Failed(e)


def _attempt_all(tasks):
    return {k: attempt(fn) for k, fn in tasks}


@contextlib.contextmanager
def single_threaded(active):
    """torch's intra-op threads off while forking: a child that inherits a thread pool's
    state mid-use can hang in it (fake tensors run no kernels, so nothing is lost)."""
    if not active:
        yield
        return
    import torch
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def run_tasks(tasks, parallel):
    """tasks: [(key, fn)], fn() -> a picklable result. Returns {key: result}, where a task
    that raised has a _Failed; the first len(tasks)//2 tasks run in a child when parallel."""
    if not parallel or len(tasks) < 2 or not hasattr(os, "fork"):
        return _attempt_all(tasks)
    child_tasks, own_tasks = tasks[:len(tasks) // 2], tasks[len(tasks) // 2:]
    fd, path = tempfile.mkstemp(prefix="shardproof-capture-", suffix=".pickle")
    os.close(fd)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        status = 1
        try:
            results = _attempt_all(child_tasks)
            recorder = capture_cache.Recorder.active  # what the child read, for the parent's
            reads = recorder.snapshot() if recorder is not None else None
            with open(path, "wb") as f:
                pickle.dump((results, reads), f, protocol=pickle.HIGHEST_PROTOCOL)
            status = 0
        except BaseException:  # noqa: BLE001 (an unpicklable result: the parent redoes it)
            pass
        finally:
            os._exit(status)
    try:
        results = _attempt_all(own_tasks)
        _, status = os.waitpid(pid, 0)
        child = None
        if status == 0:
            try:
                with open(path, "rb") as f:
                    child, reads = pickle.load(f)
                if reads is not None and capture_cache.Recorder.active is not None:
                    capture_cache.Recorder.active.merge(reads)
            except Exception:  # noqa: BLE001
                child = None
        if child is None:  # the child failed as a process: its tasks run here
            child = _attempt_all(child_tasks)
        results.update(child)
        return results
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def value(result):
    """A task's result, or its exception raised."""
    if isinstance(result, _Failed):
        raise result.error
    return result
