"""A tensor the trace cannot see is refused, not dropped.

torch 1.13's make_fx records an op only when it can handle every tensor argument: a plain
tensor (a constant) or one with a proxy. A FakeTensor made before tracing began and not
passed in as an input (a plain attribute `self.gain = torch.full(...)` set in `__init__`,
optimizer state `Adagrad` makes at construction) has no proxy: make_fx returns
NotImplemented, FakeTensorMode computes the op, and the op and everything that depends on
its result are missing from the graph. The parameters' updates vanish with them, and the
plan says each parameter is left as it was on both sides, so any bug passed (a data-parallel
step that never averages was proven equivalent). Parameters, registered buffers and the
batch are the program's inputs; every other tensor must be made inside the step."""
import contextlib

import torch
import torch.fx.experimental.proxy_tensor as proxy_tensor
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

from ..errors import CaptureError
from .source import user_src


def _untracked(tracer, args, kwargs):
    for t in pytree.tree_flatten((args, kwargs))[0]:
        if isinstance(t, FakeTensor) and not proxy_tensor.has_proxy_slot(t, tracer):
            return t
    return None


def _refuse(func, t):
    src = user_src(2)
    raise CaptureError(
        "untracked-tensor",
        f"{func} reads a tensor of shape {list(t.shape)} that was made before the step ran and "
        "is neither a parameter, a registered buffer nor in the batch (a plain attribute such "
        "as `self.scale = torch.full(...)` set in __init__, or optimizer state made when the "
        "optimizer is built, as torch.optim.Adagrad does): the capture cannot follow it. "
        "Register it with `self.register_buffer(name, tensor)`, or make it inside the step",
        src and src["file"], src and src["line"])


@contextlib.contextmanager
def refused():
    """While installed, an op of a traced program that reads such a tensor is exit 2."""
    original = proxy_tensor.proxy_call

    def proxy_call(proxy_mode, func, args, kwargs):
        t = _untracked(proxy_mode.tracer, args, kwargs)
        if t is not None:
            _refuse(func, t)
        return original(proxy_mode, func, args, kwargs)

    proxy_tensor.proxy_call = proxy_call
    try:
        yield
    finally:
        proxy_tensor.proxy_call = original
